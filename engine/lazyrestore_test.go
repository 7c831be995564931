package engine_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

const lazySpec = `
name: lazy
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 10,
         watermark: {max_out_of_orderness: 0s}}
operators:
  - window: {key: [user_id], WINDOW, allowed_lateness: 0s,
             aggregates: {clicks: "count()", pages: "count_distinct(page)", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`

// lazyHistory is 5 files of 1000 distinct users each (5000 open windows).
func lazyHistory(t *testing.T, e *env) {
	for f := range 5 {
		var lines []string
		for j := range 1000 {
			u := f*1000 + j
			lines = append(lines, fmt.Sprintf(`{"event_time":"2024-01-01T%02d:%02d:00Z","user_id":"u%04d","page":"/p%d","bytes":%d}`,
				f, j%60, u, j%7, j))
		}
		e.put(t, fmt.Sprintf("a-hist-%d.jsonl", f), jsonl(lines...))
	}
}

// TestRestoreOnDemand: a run over a small file after a long history
// decodes only the key groups its input touches (plus windows due), and the
// committed rows equal one run over all the files, for every window kind.
func TestRestoreOnDemand(t *testing.T) {
	defer engine.SetStateRowGroupRows(128)()
	for _, win := range []string{"tumbling: 24h", "sliding: {size: 48h, slide: 24h}", "session: {gap: 24h}"} {
		t.Run(strings.TrimSuffix(strings.Fields(win)[0], ":"), func(t *testing.T) {
			bothEnvs(t, func(t *testing.T, newEnv func(testing.TB) *env) {
				tmpl := strings.Replace(lazySpec, "WINDOW", win, 1)
				small := []struct{ key, body string }{
					{"b-small-1.jsonl", `{"event_time":"2024-01-01T06:00:00Z","user_id":"u0001","page":"/x","bytes":5}` + "\n" +
						`{"event_time":"2024-01-01T06:01:00Z","user_id":"new","page":"/y","bytes":6}`},
					{"b-small-2.jsonl", `{"event_time":"2024-01-01T07:00:00Z","user_id":"u0002","page":"/z","bytes":7}`},
					{"b-small-3.jsonl", `{"event_time":"2024-01-01T08:00:00Z","user_id":"u0001","page":"/q","bytes":8}`},
				}
				end := `{"event_time":"2024-01-04T00:00:00Z","user_id":"u4999","page":"/end","bytes":1}`

				e := newEnv(t)
				p := e.pipeline(t, tmpl)
				lazyHistory(t, e)
				first := run(t, p, engine.Options{})
				if first.Epochs != 1 || first.StateRowsSkipped != 0 {
					t.Fatalf("history run: %+v", first)
				}
				runSmallFiles(t, e, p, small)
				e.put(t, "c-end.jsonl", []byte(end+"\n"))
				last := run(t, p, engine.Options{Drain: true})
				if last.StateRowsSkipped != 0 || last.StateRowsDecoded < 5000 {
					t.Fatalf("final run must decode every window to emit it: %+v", last)
				}
				got := committedRows(t, p)

				ref := newEnv(t)
				rp := ref.pipeline(t, tmpl)
				lazyHistory(t, ref)
				for _, f := range small {
					ref.put(t, f.key, []byte(f.body+"\n"))
				}
				ref.put(t, "c-end.jsonl", []byte(end+"\n"))
				run(t, rp, engine.Options{Drain: true})
				want := committedRows(t, rp)
				if len(want) < 5000 {
					t.Fatalf("reference emitted %d rows", len(want))
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("restore on demand: %d rows, reference %d; first difference %s", len(got), len(want), firstDiff(got, want))
				}
			})
		})
	}
}

// runSmallFiles runs p over each small file after lazyHistory: each run
// decodes only the key groups the file's rows touch.
func runSmallFiles(t *testing.T, e *env, p *spec.Pipeline, small []struct{ key, body string }) {
	t.Helper()
	for i, f := range small {
		e.put(t, f.key, []byte(f.body+"\n"))
		res := run(t, p, engine.Options{})
		total := res.StateRowsDecoded + res.StateRowsSkipped
		if res.Epochs != 1 || total < 5000 {
			t.Fatalf("small file %d: %d epochs, %d decoded + %d skipped state rows, want >= 5000 in all",
				i, res.Epochs, res.StateRowsDecoded, res.StateRowsSkipped)
		}
		// One or two keys touch at most two key groups of 128, each in
		// at most two row groups of 128 rows.
		if res.StateRowsDecoded > 4*128*2 {
			t.Fatalf("small file %d: decoded %d of %d state rows, want only the touched key groups'", i, res.StateRowsDecoded, total)
		}
		t.Logf("small file %d: decoded %d of %d state rows", i, res.StateRowsDecoded, total)
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %q vs %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(a), len(b))
}

// clicksSource is the sources block of the graph specs of these tests: one
// source of click events in JSON lines.
const clicksSource = `sources:
  clicks:
    type: files
    url: "{{source}}"
    format: jsonl
    schema: {event_time: timestamp, user_id: string, page: string, bytes: int64}
    event_time: event_time
    max_files_per_epoch: 10
    watermark: {max_out_of_orderness: 0s}
`

// lazyGraph is lazySpec's window as a graph stage (behind a filter), and a
// second window over its results (timed by window_end - 1µs: the
// hidden-time operator).
const lazyGraph = `
name: lazy-graph
` + clicksSource + `stages:
  - {name: valid, input: clicks, filter: "bytes >= 0"}
  - name: per-user
    input: valid
    window: {key: [user_id], WINDOW, allowed_lateness: 0s,
             aggregates: {clicks: "count()", pages: "count_distinct(page)", total_bytes: "sum(bytes)"}}
  - name: by-clicks
    input: per-user
    window: {key: [clicks], tumbling: 24h, aggregates: {users: "count()", bytes: "sum(total_bytes)"}}
sinks:
  out: {input: by-clicks, type: files, url: "{{sink}}", format: parquet}
  users: {input: per-user, type: files, url: "{{late}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`

// TestGraphRestoreOnDemand: a graph's window stages restore on demand like
// the linear window: a run over a small file after a long history decodes
// only the key groups its rows touch (plus windows due), and both sinks'
// committed rows equal one run over all the files.
func TestGraphRestoreOnDemand(t *testing.T) {
	defer engine.SetStateRowGroupRows(128)()
	for _, win := range []string{"tumbling: 24h", "session: {gap: 24h}"} {
		t.Run(strings.TrimSuffix(strings.Fields(win)[0], ":"), func(t *testing.T) {
			tmpl := strings.Replace(lazyGraph, "WINDOW", win, 1)
			small := []struct{ key, body string }{
				{"b-small-1.jsonl", `{"event_time":"2024-01-01T06:00:00Z","user_id":"u0001","page":"/x","bytes":5}` + "\n" +
					`{"event_time":"2024-01-01T06:01:00Z","user_id":"new","page":"/y","bytes":6}`},
				{"b-small-2.jsonl", `{"event_time":"2024-01-01T07:00:00Z","user_id":"u0002","page":"/z","bytes":7}`},
			}
			// Past the first day: every per-user window fires, by-clicks
			// holds them, and the next file (day 4) fires those.
			ends := []string{`{"event_time":"2024-01-03T00:00:00Z","user_id":"u4999","page":"/end","bytes":1}`,
				`{"event_time":"2024-01-05T00:00:00Z","user_id":"u4998","page":"/end","bytes":1}`}

			e := fileEnv(t)
			p := e.pipeline(t, tmpl)
			lazyHistory(t, e)
			if first := run(t, p, engine.Options{}); first.Epochs != 1 || first.StateRowsSkipped != 0 {
				t.Fatalf("history run: %+v", first)
			}
			runSmallFiles(t, e, p, small)
			for i, end := range ends {
				e.put(t, fmt.Sprintf("c-end-%d.jsonl", i), []byte(end+"\n"))
				res := run(t, p, engine.Options{})
				if i == 0 && (res.StateRowsSkipped != 0 || res.StateRowsDecoded < 5000) {
					t.Fatalf("a run where every window is due must decode them all: %+v", res)
				}
			}
			run(t, p, engine.Options{Drain: true})
			got, gotUsers := sinkRows(t, p, "out"), sinkRows(t, p, "users")

			ref := fileEnv(t)
			rp := ref.pipeline(t, tmpl)
			lazyHistory(t, ref)
			for _, f := range small {
				ref.put(t, f.key, []byte(f.body+"\n"))
			}
			for i, end := range ends {
				ref.put(t, fmt.Sprintf("c-end-%d.jsonl", i), []byte(end+"\n"))
			}
			run(t, rp, engine.Options{Drain: true})
			want, wantUsers := sinkRows(t, rp, "out"), sinkRows(t, rp, "users")
			if len(wantUsers) < 5000 || len(want) == 0 {
				t.Fatalf("reference emitted %d per-user and %d by-clicks rows", len(wantUsers), len(want))
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("by-clicks: %d rows, reference %d; first difference %s", len(got), len(want), firstDiff(got, want))
			}
			if !reflect.DeepEqual(gotUsers, wantUsers) {
				t.Fatalf("per-user: %d rows, reference %d; first difference %s", len(gotUsers), len(wantUsers), firstDiff(gotUsers, wantUsers))
			}
		})
	}
}
