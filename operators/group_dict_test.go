package operators

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// dictBatch returns rec with its "user" column dictionary-encoded with
// indices of type idx: a dictionary of the distinct values in reverse
// first-seen order plus an unused value and a null value; null rows get,
// alternately, a null index or the index of the null value.
func dictBatch(t *testing.T, rec arrow.RecordBatch, idx arrow.DataType) arrow.RecordBatch {
	t.Helper()
	users := rec.Column(1).(*array.String)
	var vals []string
	pos := map[string]int{}
	for i := range users.Len() {
		if users.IsValid(i) {
			if _, ok := pos[users.Value(i)]; !ok {
				pos[users.Value(i)] = len(vals)
				vals = append(vals, users.Value(i))
			}
		}
	}
	slices.Reverse(vals)
	db := array.NewStringBuilder(memory.DefaultAllocator)
	defer db.Release()
	for i, v := range vals {
		pos[v] = i
		db.Append(v)
	}
	db.Append("unused")
	db.AppendNull()
	nullVal := len(vals) + 1
	dict := db.NewArray()
	defer dict.Release()
	ib := array.NewBuilder(memory.DefaultAllocator, idx)
	defer ib.Release()
	appendIdx := func(v int) {
		switch b := ib.(type) {
		case *array.Int32Builder:
			b.Append(int32(v))
		case *array.Int8Builder:
			b.Append(int8(v))
		default:
			t.Fatalf("index builder %T", ib)
		}
	}
	for i := range users.Len() {
		switch {
		case users.IsValid(i):
			appendIdx(pos[users.Value(i)])
		case i%2 == 0:
			ib.AppendNull()
		default:
			appendIdx(nullVal)
		}
	}
	indices := ib.NewArray()
	defer indices.Release()
	dt := &arrow.DictionaryType{IndexType: idx, ValueType: arrow.BinaryTypes.String}
	col := array.NewDictionaryArray(dt, indices, dict)
	defer col.Release()
	cols := slices.Clone(rec.Columns())
	cols[1] = col
	fields := slices.Clone(rec.Schema().Fields())
	fields[1].Type = dt
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// TestDictionaryKeys feeds the same rows to a window with a plain string key
// column and to one with the column dictionary-encoded (int32 and int8
// indices, null indices and a null dictionary value): the outputs, late
// rows and state must be identical, as must PartitionIndices.
func TestDictionaryKeys(t *testing.T) {
	for _, kind := range []WindowSpec{
		{Kind: Tumbling, Size: time.Minute},
		{Kind: Sliding, Size: 3 * time.Minute, Slide: time.Minute},
		{Kind: Session, Gap: 30 * time.Second},
	} {
		for _, idx := range []arrow.DataType{arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int8} {
			t.Run(fmt.Sprintf("%s/%s", kind.Kind, idx), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(11, 12))
				spec := kind
				spec.ID, spec.Keys, spec.EventTime = "w", []string{"user"}, "ts"
				spec.Aggregates = mustAggs(t, "c", "count()", "sum", "sum(n)", "fi", "first(n)")
				plain, err := NewWindow(spec, testSchema, 128)
				if err != nil {
					t.Fatal(err)
				}
				var dw *Window
				lateRows := 0
				for m := int64(0); m < 8; m++ {
					var rows []ev
					for range 300 {
						// Rows of the four minutes before the last
						// watermark too: some late for the fixed windows.
						e := ev{ts: (m-4)*60e6 + rng.Int64N(300e6), n: ip(rng.Int64N(100))}
						if rng.IntN(10) > 0 {
							e.user = sp(fmt.Sprintf("u%d", rng.IntN(60)))
						}
						rows = append(rows, e)
					}
					rec := batch(t, rows...)
					drec := dictBatch(t, rec, idx)
					if dw == nil {
						if dw, err = NewWindow(spec, drec.Schema(), 128); err != nil {
							t.Fatal(err)
						}
						if got := dw.OutputSchema().Field(0).Type; !arrow.TypeEqual(got, arrow.BinaryTypes.String) {
							t.Fatalf("output key type %s, want string", got)
						}
					}
					for _, p := range []int{1, 3} {
						pi, err := PartitionIndices(rec, []int{1}, p, 128)
						if err != nil {
							t.Fatal(err)
						}
						di, err := PartitionIndices(drec, []int{1}, p, 128)
						if err != nil {
							t.Fatal(err)
						}
						for s := range pi {
							if !slices.Equal(pi[s], di[s]) {
								t.Fatalf("minute %d: PartitionIndices(p=%d) subtask %d differs for the dictionary column", m, p, s)
							}
						}
					}
					pl, err := plain.Process(rec)
					if err != nil {
						t.Fatal(err)
					}
					dl, err := dw.Process(drec)
					if err != nil {
						t.Fatal(err)
					}
					a, b := rowsOf(pl), rowsOf(dl)
					lateRows += len(a)
					if len(a) != len(b) || (len(a) > 0 && !sameCols(pl, dl, 0, 2)) {
						t.Fatalf("minute %d: late rows differ: %d plain, %d dictionary", m, len(a), len(b))
					}
					release(pl, dl, rec, drec)
					po, err := plain.Advance(m * 60e6)
					if err != nil {
						t.Fatal(err)
					}
					do, err := dw.Advance(m * 60e6)
					if err != nil {
						t.Fatal(err)
					}
					eqLines(t, fmt.Sprintf("minute %d output", m), rowsOf(do), rowsOf(po))
					release(po, do)
				}
				if lateRows == 0 && kind.Kind != Session {
					t.Fatal("no late rows: the test does not exercise them")
				}
				ps, err := plain.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				ds, err := dw.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				var pr, dr []string
				for _, r := range ps {
					pr = append(pr, rowsOf(r)...)
				}
				for _, r := range ds {
					dr = append(dr, rowsOf(r)...)
				}
				if len(pr) == 0 {
					t.Fatal("empty state: the test does not compare state")
				}
				eqLines(t, "state", dr, pr)
				release(ps...)
				release(ds...)
			})
		}
	}
}

// sameCols reports whether columns cols of a and b hold the same cells.
func sameCols(a, b arrow.RecordBatch, cols ...int) bool {
	if a.NumRows() != b.NumRows() {
		return false
	}
	for _, c := range cols {
		for i := range int(a.NumRows()) {
			if cell(a.Column(c), i) != cell(b.Column(c), i) {
				return false
			}
		}
	}
	return true
}
