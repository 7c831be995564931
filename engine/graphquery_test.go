package engine_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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

// sellersBidders writes the auctions and bids of the window-results tests.
func sellersBidders(t *testing.T, e *graphEnv) {
	writeLines(t, e.auctions, "a.jsonl",
		`{"id":1,"seller":1,"category":1,"ts":"2024-01-01T00:00:01Z"}`,
		`{"id":2,"seller":2,"category":1,"ts":"2024-01-01T00:00:05Z"}`,
		`{"id":3,"seller":1,"category":1,"ts":"2024-01-01T00:00:12Z"}`,
		`{"id":4,"seller":3,"category":1,"ts":"2024-01-01T00:00:19Z"}`)
	writeLines(t, e.bids, "b.jsonl",
		`{"auction":1,"bidder":1,"price":1,"ts":"2024-01-01T00:00:03Z"}`,
		`{"auction":1,"bidder":1,"price":1,"ts":"2024-01-01T00:00:07Z"}`,
		`{"auction":1,"bidder":3,"price":1,"ts":"2024-01-01T00:00:11Z"}`,
		`{"auction":1,"bidder":2,"price":1,"ts":"2024-01-01T00:00:14Z"}`,
		`{"auction":1,"bidder":1,"price":1,"ts":"2024-01-01T00:00:15Z"}`)
}

// windowResultsGraph is twoSources with stages: sellers (per seller and
// window) and bidders (per bidder and window), both windowed by win, then
// more.
func windowResultsGraph(win, more, out string) string {
	stages := `  - {name: sellers, input: auctions, window: {key: [seller], ` + win + `, aggregates: {n: "count()"}}}
  - {name: bidders, input: bids, window: {key: [bidder], ` + win + `, aggregates: {bids: "count()"}}}
` + more
	return strings.Replace(strings.Replace(twoSources, "%s", stages, 1), "%s", out, 1)
}

// TestGraphJoinWindowResults: a windowed join of two window results of its
// own window (Nexmark q8's shape) pairs equal windows, as Flink's window
// join (L.window_start = R.window_start AND L.window_end = R.window_end),
// and shows window_start and window_end once; written as naturally as
// that, with no renames. Tumbling (a left join: a seller without bids in
// its window is kept) and sliding windows, rows computed by hand.
func TestGraphJoinWindowResults(t *testing.T) {
	e := newGraphEnv(t)
	sellersBidders(t, e)
	join := `  - {name: j, inputs: [sellers, bidders], join: {type: left, left_on: [seller], right_on: [bidder], window: {tumbling: 10s}}}`
	p := e.pipelineFrom(t, windowResultsGraph("tumbling: 10s", join, "j"))
	run(t, p, engine.Options{UntilEpoch: 1, Parallelism: 2})
	// floe state shows the sides' bounds under their own names.
	v, err := engine.ReadState(t.Context(), p, engine.StateQuery{Op: "j"})
	if err != nil {
		t.Fatal(err)
	}
	if cols := strings.Join(v.Ops[0].Columns, " "); !strings.Contains(cols, "left.window_start") || strings.Contains(cols, "__floe") {
		t.Errorf("join state columns %s: want left.window_start, no hidden names", cols)
	}
	run(t, p, engine.Options{Drain: true, Parallelism: 3})
	wantLines(t, "tumbling join of window results", e.sink,
		`{"seller":1,"n":1,"bidder":1,"bids":1,"window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z"}`,
		`{"seller":1,"n":1,"bidder":1,"bids":2,"window_start":"2024-01-01T00:00:00Z","window_end":"2024-01-01T00:00:10Z"}`,
		`{"seller":2,"n":1,"bidder":null,"bids":null,"window_start":"2024-01-01T00:00:00Z","window_end":"2024-01-01T00:00:10Z"}`,
		`{"seller":3,"n":1,"bidder":3,"bids":1,"window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z"}`)

	// Sliding 10s every 5s: windows [-5,5), [0,10), [5,15), [10,20), [15,25).
	e = newGraphEnv(t)
	sellersBidders(t, e)
	join = `  - {name: j, inputs: [sellers, bidders], join: {left_on: [seller], right_on: [bidder], window: {sliding: {size: 10s, slide: 5s}}}}`
	run(t, e.pipelineFrom(t, windowResultsGraph("sliding: {size: 10s, slide: 5s}", join, "j")), engine.Options{Drain: true, Parallelism: 2})
	wantLines(t, "sliding join of window results", e.sink,
		`{"seller":1,"n":1,"bidder":1,"bids":1,"window_start":"2023-12-31T23:59:55Z","window_end":"2024-01-01T00:00:05Z"}`,
		`{"seller":1,"n":1,"bidder":1,"bids":1,"window_start":"2024-01-01T00:00:05Z","window_end":"2024-01-01T00:00:15Z"}`,
		`{"seller":1,"n":1,"bidder":1,"bids":1,"window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z"}`,
		`{"seller":1,"n":1,"bidder":1,"bids":2,"window_start":"2024-01-01T00:00:00Z","window_end":"2024-01-01T00:00:10Z"}`,
		`{"seller":2,"n":1,"bidder":2,"bids":1,"window_start":"2024-01-01T00:00:05Z","window_end":"2024-01-01T00:00:15Z"}`,
		`{"seller":3,"n":1,"bidder":3,"bids":1,"window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z"}`)
}

// TestGraphJoinWindowResultsAndRows: a tumbling join of window results
// (left) with plain rows pairs each result with the rows of its window;
// with the sides the other way round (Nexmark q7's shape) the plan is the
// one it was before: the right's bounds kept as right_window_start and
// right_window_end.
func TestGraphJoinWindowResultsAndRows(t *testing.T) {
	e := newGraphEnv(t)
	sellersBidders(t, e)
	join := `  - {name: j, inputs: [sellers, bids], join: {left_on: [seller], right_on: [bidder], window: {tumbling: 10s}}}`
	tmpl := windowResultsGraph("tumbling: 10s", join, "j")
	tmpl = strings.Replace(tmpl, "sinks:\n", "sinks:\n  bo: {input: bidders, type: files, url: \"{{late}}\", format: jsonl}\n", 1)
	run(t, e.pipelineFrom(t, tmpl), engine.Options{Drain: true, Parallelism: 2})
	wantLines(t, "results joined with rows", e.sink,
		`{"seller":1,"n":1,"auction":1,"bidder":1,"price":1,"ts":"2024-01-01T00:00:03Z","window_start":"2024-01-01T00:00:00Z","window_end":"2024-01-01T00:00:10Z"}`,
		`{"seller":1,"n":1,"auction":1,"bidder":1,"price":1,"ts":"2024-01-01T00:00:07Z","window_start":"2024-01-01T00:00:00Z","window_end":"2024-01-01T00:00:10Z"}`,
		`{"seller":1,"n":1,"auction":1,"bidder":1,"price":1,"ts":"2024-01-01T00:00:15Z","window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z"}`,
		`{"seller":3,"n":1,"auction":1,"bidder":3,"price":1,"ts":"2024-01-01T00:00:11Z","window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z"}`)

	e = newGraphEnv(t)
	sellersBidders(t, e)
	join = `  - {name: j, inputs: [auctions, bidders], join: {left_on: [seller], right_on: [bidder], window: {tumbling: 10s}}}`
	tmpl = windowResultsGraph("tumbling: 10s", join, "j")
	tmpl = strings.Replace(tmpl, "sinks:\n", "sinks:\n  so: {input: sellers, type: files, url: \"{{late}}\", format: jsonl}\n", 1)
	run(t, e.pipelineFrom(t, tmpl), engine.Options{Drain: true, Parallelism: 2})
	wantLines(t, "rows joined with results", e.sink,
		`{"id":1,"seller":1,"category":1,"ts":"2024-01-01T00:00:01Z","bidder":1,"right_window_start":"2024-01-01T00:00:00Z","right_window_end":"2024-01-01T00:00:10Z","bids":2,"window_start":"2024-01-01T00:00:00Z","window_end":"2024-01-01T00:00:10Z"}`,
		`{"id":3,"seller":1,"category":1,"ts":"2024-01-01T00:00:12Z","bidder":1,"right_window_start":"2024-01-01T00:00:10Z","right_window_end":"2024-01-01T00:00:20Z","bids":1,"window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z"}`,
		`{"id":4,"seller":3,"category":1,"ts":"2024-01-01T00:00:19Z","bidder":3,"right_window_start":"2024-01-01T00:00:10Z","right_window_end":"2024-01-01T00:00:20Z","bids":1,"window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z"}`)
}

// TestGraphWindowKeyedByInputWindow: a window over window results keyed by
// window_start or window_end (as docs/graph.md says it may be) aggregates
// each input window on its own: the key is the input's window, the stage's
// own, and the output shows it once. Sliding windows, where each result's
// window_end - 1µs lies in two windows: it still counts in its own only.
func TestGraphWindowKeyedByInputWindow(t *testing.T) {
	for _, key := range []string{"[window_start]", "[window_end, window_start]"} {
		e := newGraphEnv(t)
		sellersBidders(t, e)
		more := `  - {name: per-window, input: sellers, window: {key: ` + key + `, sliding: {size: 10s, slide: 5s}, aggregates: {sellers: "count()", auctions: "sum(n)"}}}`
		tmpl := windowResultsGraph("sliding: {size: 10s, slide: 5s}", more, "per-window")
		tmpl = strings.Replace(tmpl, "sinks:\n", "sinks:\n  bo: {input: bidders, type: files, url: \"{{late}}\", format: jsonl}\n", 1)
		tmpl = strings.Replace(tmpl, `sliding: {size: 10s, slide: 5s}, aggregates: {sellers:`, `sliding: {size: 10s, slide: 5s}, allowed_lateness: 10s, aggregates: {sellers:`, 1)
		p := e.pipelineFrom(t, tmpl)
		run(t, p, engine.Options{UntilEpoch: 1, Parallelism: 2})
		// floe state reads the open windows (kept for late rows).
		v, err := engine.ReadState(t.Context(), p, engine.StateQuery{Op: "per-window"})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Ops[0].Rows) == 0 {
			t.Fatal("no open windows in the state: the test does not read any")
		}
		for _, r := range v.Ops[0].Rows {
			if len(r.Key) != 0 || r.WindowEnd.Sub(r.WindowStart) != 10*time.Second {
				t.Errorf("state row %+v: want no key and a 10 s window", r)
			}
		}
		run(t, p, engine.Options{Drain: true, Parallelism: 3})
		wantLines(t, "keyed by "+key, e.sink,
			`{"window_start":"2023-12-31T23:59:55Z","window_end":"2024-01-01T00:00:05Z","sellers":1,"auctions":1}`,
			`{"window_start":"2024-01-01T00:00:00Z","window_end":"2024-01-01T00:00:10Z","sellers":2,"auctions":2}`,
			`{"window_start":"2024-01-01T00:00:05Z","window_end":"2024-01-01T00:00:15Z","sellers":2,"auctions":2}`,
			`{"window_start":"2024-01-01T00:00:10Z","window_end":"2024-01-01T00:00:20Z","sellers":2,"auctions":2}`,
			`{"window_start":"2024-01-01T00:00:15Z","window_end":"2024-01-01T00:00:25Z","sellers":1,"auctions":1}`)
	}
}

// TestGraphWindowResultsRefusals: what would pair or group the wrong
// windows is refused with the reason.
func TestGraphWindowResultsRefusals(t *testing.T) {
	for _, c := range []struct{ name, win, more, out, want string }{
		{"join timed by a renamed window_end", "tumbling: 10s", `  - {name: r, input: sellers, project: {seller: seller, n: n, ws: window_start, wend: window_end}}
  - {name: j, inputs: [r, bidders], join: {left_on: [seller], right_on: [bidder], left_time: wend, window: {tumbling: 10s}}}`,
			"j", `left_time "wend" is the window_end of sellers's window results (renamed by r)`},
		{"time column on results of the join's window", "tumbling: 10s",
			`  - {name: j, inputs: [sellers, bidders], join: {left_on: [seller], right_on: [bidder], right_time: window_end, left_time: n, window: {tumbling: 10s}}}`,
			"j", `left_time "n": the left rows are results of sellers's tumbling 10s windows, this join's`},
		{"left results of another window", "tumbling: 10s",
			`  - {name: j, inputs: [sellers, bidders], join: {left_on: [seller], right_on: [bidder], window: {tumbling: 1m}}}`,
			"j", `pairs equal windows; give it the inputs' window (tumbling 10s)`},
		{"sliding join of results with raw rows", "sliding: {size: 10s, slide: 5s}",
			`  - {name: j, inputs: [sellers, bids], join: {left_on: [seller], right_on: [bidder], window: {sliding: {size: 10s, slide: 5s}}}}`,
			"j", `window the other side by sliding 10s every 5s too`},
		{"top_n timed by a renamed window_end", "tumbling: 10s", `  - {name: r, input: sellers, project: {seller: seller, n: n, ws: window_start, wend: window_end}}
  - {name: j, input: r, top_n: {n: 1, order_by: [n desc], tumbling: 1m, event_time: wend}}`,
			"j", `event_time "wend" is the window_end of sellers's window results (renamed by r)`},
		{"coarser window keyed by the input's", "tumbling: 10s",
			`  - {name: w, input: sellers, window: {key: [window_start], tumbling: 1m, aggregates: {c: "count()"}}}`,
			"w", `give this stage the input's window (tumbling 10s)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newGraphEnv(t)
			sellersBidders(t, e)
			tmpl := windowResultsGraph(c.win, c.more, c.out)
			tmpl = strings.Replace(tmpl, "sinks:\n", "sinks:\n  so: {input: sellers, type: files, url: \"{{late}}/s\", format: jsonl}\n  bo: {input: bidders, type: files, url: \"{{late}}/b\", format: jsonl}\n", 1)
			err := compileErr(t, e, tmpl)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error with %q", err, c.want)
			}
		})
	}
}

// TestLinearGlobalAggregate: key: [] in the linear form, with the open
// window's state restored across runs and a rescale.
func TestLinearGlobalAggregate(t *testing.T) {
	e := fileEnv(t)
	p := e.pipeline(t, strings.Replace(windowSpec, "key: [user_id]", "key: []", 1))
	e.put(t, "a.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u2", 2)))
	e.put(t, "b.jsonl", jsonl(ev("00:00:30", "u1", 4), ev("00:01:10", "u3", 8)))
	run(t, p, engine.Options{UntilEpoch: 1, Parallelism: 3})
	run(t, p, engine.Options{Drain: true, Parallelism: 2})
	want := []string{
		"window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,clicks=3,total_bytes=7",
		"window_start=2024-01-01T00:01:00Z,window_end=2024-01-01T00:02:00Z,clicks=1,total_bytes=8",
	}
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows = %q\nwant %q", got, want)
	}
}
