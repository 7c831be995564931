package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
)

// TestSavepointImportGraph: a graph pipeline's savepoint imports like a
// linear one's: each keyed stage's state files are checked against that
// stage's state schema (a file missing a column of the window stage is
// refused, naming it), and the unedited savepoint, imported and restored,
// drains to the rows of the uninterrupted run.
func TestSavepointImportGraph(t *testing.T) {
	ctx := context.Background()
	g := newGraphEnv(t)
	p := g.pipelineFrom(t, visitsGraph)
	for i := range 6 {
		putVisits(t, g, i, visitFile(i))
	}
	run(t, p, engine.Options{UntilEpoch: 3})
	_, err := engine.CreateSavepoint(ctx, p, "orig", 0)
	must(t, err)
	run(t, p, engine.Options{Drain: true})
	lines := func(data []byte) []string { return strings.Split(strings.TrimSpace(string(data)), "\n") }
	want := committedGraph(t, p, g.sink, lines)
	spURL, err := engine.SavepointURL(p, "orig")
	must(t, err)
	work := t.TempDir()
	must(t, os.CopyFS(work, os.DirFS(strings.TrimPrefix(spURL, "file://"))))
	var win string
	filepath.WalkDir(work, func(path string, d os.DirEntry, err error) error {
		if strings.Contains(path, "op=per-user") && strings.HasSuffix(path, ".parquet") && win == "" {
			win = path
		}
		return nil
	})
	if win == "" {
		t.Fatal("the savepoint holds no state file of the window stage per-user")
	}
	orig, err := os.ReadFile(win)
	must(t, err)
	schema, recs, err := formats.ReadParquet(orig, memory.DefaultAllocator)
	must(t, err)
	bad := schema.Fields()[:schema.NumFields()-1]
	var cut []arrow.RecordBatch
	for _, r := range recs {
		cut = append(cut, array.NewRecordBatch(arrow.NewSchema(bad, nil), r.Columns()[:len(bad)], r.NumRows()))
	}
	data, err := formats.EncodeParquet(arrow.NewSchema(bad, nil), cut, formats.EncodeOptions{})
	must(t, err)
	must(t, os.WriteFile(win, data, 0o644))
	if _, err := engine.ImportSavepoint(ctx, p, "bad", fileURL(work)); err == nil || !strings.Contains(err.Error(), "columns") || !strings.Contains(err.Error(), "op=per-user") {
		t.Fatalf("import of a window stage file missing a column: %v", err)
	}
	must(t, os.WriteFile(win, orig, 0o644))
	if _, err := engine.ImportSavepoint(ctx, p, "same", fileURL(work)); err != nil {
		t.Fatal(err)
	}
	run(t, p, engine.Options{FromSavepoint: "same", Drain: true})
	if got := committedGraph(t, p, g.sink, lines); len(want) < 5 || !reflect.DeepEqual(got, want) {
		t.Fatalf("restored from an imported graph savepoint: %d rows, want %d", len(got), len(want))
	}
}
