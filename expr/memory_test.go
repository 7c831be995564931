package expr

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestFilterThenProjectReleasesArrowMemory chains filters and a projection
// the way the engine runs stateless stages (each stage's output is the next
// one's input and is released after it), over whole, sliced, all-kept and
// all-dropped batches, with a checked allocator: expr releases every buffer
// it allocates, so nothing is outstanding at the end.
func TestFilterThenProjectReleasesArrowMemory(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	proj, err := CompileProjection([]ProjectItem{
		{Expr: "s"}, {Name: "double", Expr: "i * 2"}, {Name: "name", Expr: "upper(s) + '!'"},
		{Name: "tags", Expr: "tags"}, {Name: "ok", Expr: "coalesce(b, false)"},
	}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"i > 0 or is_null(i)", "true", "false", "s startsWith 'h'"} {
		f, err := CompileFilter(src, testSchema)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []struct {
			name   string
			lo, hi int64
		}{{"whole", 0, rec.NumRows()}, {"slice", 1, rec.NumRows() - 1}} {
			batch := rec.NewSlice(in.lo, in.hi)
			kept, _, err := Filter(f, batch, mem)
			batch.Release()
			if err != nil {
				t.Fatalf("%s %s: filter: %v", src, in.name, err)
			}
			out, err := proj.Apply(kept, mem)
			kept.Release()
			if err != nil {
				t.Fatalf("%s %s: project: %v", src, in.name, err)
			}
			if out.NumCols() != 5 {
				t.Errorf("%s %s: %d columns", src, in.name, out.NumCols())
			}
			out.Release()
		}
	}
}
