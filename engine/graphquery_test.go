package engine_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// Everyday graph queries of issue 23: joins and windows over window
// results, global aggregates, per-source limits.

// writeLines writes one JSON-lines file under a file:// URL's folder.
func writeLines(t *testing.T, dirURL, name string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(strings.TrimPrefix(dirURL, "file://"), name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantLines fails the test when the sink's rows are not want.
func wantLines(t *testing.T, what, sinkURL string, want ...string) {
	t.Helper()
	if got := graphSinkLines(t, sinkURL); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", what, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// compileErr returns the error running p gives (nil when it runs).
func compileErr(t *testing.T, e *graphEnv, tmpl string) error {
	t.Helper()
	p, err := spec.Parse("graph.yaml", []byte(e.spec(t, tmpl)), e.dir)
	if err != nil {
		return err
	}
	_, err = engine.Run(t.Context(), p, engine.Options{Drain: true})
	return err
}

const twoSources = `
name: q
sources:
  auctions:
    type: files
    url: "{{auctions}}"
    format: jsonl
    schema: {id: int64, seller: int64, category: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 1
  bids:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 4
stages:
%s
sinks:
  out: {input: %s, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2}
`

// TestGraphMaxFilesPerSource: each source's max_files_per_epoch bounds
// that source's files of an epoch (not one total, the largest, across
// sources): 4 auction files at 1 an epoch take 4 epochs, the 4 bid files
// at 4 an epoch are read in the first.
func TestGraphMaxFilesPerSource(t *testing.T) {
	e := newGraphEnv(t)
	for i := range 4 {
		writeLines(t, e.auctions, "a-"+string(rune('0'+i))+".jsonl", `{"id":1,"seller":1,"category":1,"ts":"2024-01-01T00:00:0`+string(rune('0'+i))+`Z"}`)
		writeLines(t, e.bids, "b-"+string(rune('0'+i))+".jsonl", `{"auction":1,"bidder":1,"price":1,"ts":"2024-01-01T00:00:0`+string(rune('0'+i))+`Z"}`)
	}
	spec := strings.Replace(twoSources, "%s", `  - {name: a, input: auctions, filter: "id > 0"}
  - {name: b, input: bids, filter: "price > 0"}`, 1)
	spec = strings.Replace(spec, "%s", "a", 1)
	spec = strings.Replace(spec, "sinks:\n", "sinks:\n  bo: {input: b, type: files, url: \"{{late}}\", format: jsonl}\n", 1)
	p := e.pipelineFrom(t, spec)
	if res := run(t, p, engine.Options{UntilEpoch: 1}); res.Files != 5 {
		t.Fatalf("epoch 1 read %d files, want 5 (1 auction file, 4 bid files)", res.Files)
	}
	if res := run(t, p, engine.Options{}); res.Epochs != 3 || res.Files != 3 {
		t.Fatalf("then %d epochs read %d files, want 3 reading one auction file each", res.Epochs, res.Files)
	}
}

// TestGraphGlobalAggregate: a window with key: [] (or no key) aggregates
// every row of a window in one group, as SQL's GROUP BY of the window
// alone, across a restore and a rescale (the group lives in one subtask).
func TestGraphGlobalAggregate(t *testing.T) {
	for _, key := range []string{"key: [], ", ""} {
		e := newGraphEnv(t)
		writeLines(t, e.bids, "b1.jsonl",
			`{"auction":1,"bidder":1,"price":5,"ts":"2024-01-01T00:00:01Z"}`,
			`{"auction":2,"bidder":2,"price":9,"ts":"2024-01-01T00:00:09Z"}`,
			`{"auction":3,"bidder":1,"price":7,"ts":"2024-01-01T00:00:04Z"}`)
		writeLines(t, e.bids, "b2.jsonl",
			`{"auction":1,"bidder":3,"price":1,"ts":"2024-01-01T00:00:12Z"}`,
			`{"auction":1,"bidder":3,"price":3,"ts":"2024-01-01T00:00:15Z"}`)
		stages := `  - {name: a, input: auctions, filter: "id > 0"}
  - {name: all, input: bids, window: {` + key + `tumbling: 10s, aggregates: {n: "count()", top: "max(price)"}}}`
		tmpl := strings.Replace(strings.Replace(twoSources, "%s", stages, 1), "%s", "all", 1)
		tmpl = strings.Replace(tmpl, "sinks:\n", "sinks:\n  ao: {input: a, type: files, url: \"{{late}}\", format: jsonl}\n", 1)
		tmpl = strings.Replace(tmpl, "max_files_per_epoch: 4", "max_files_per_epoch: 1", 1)
		// An epoch a file; the state of the open window is restored
		// across a rescale.
		p := e.pipelineFrom(t, tmpl)
		run(t, p, engine.Options{UntilEpoch: 1, Parallelism: 3})
		run(t, p, engine.Options{Drain: true, Parallelism: 2})
		wantLines(t, "global aggregate "+key, e.sink,
			`{"window_start":"2024-01-01T00:00:00Z","window_end":"2024-01-01T00:00:10Z","n":3,"top":9}`,
			`{"window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z","n":2,"top":3}`)
	}
}
