package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

const windowSpec = `
name: t
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 1,
         watermark: {max_out_of_orderness: 0s}}
operators:
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 0s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`

// TestGoldenSample runs the README's sample pipeline and compares its
// committed output with the checked-in result.
func TestGoldenSample(t *testing.T) {
	p, err := spec.Load("../testdata/pipelines/clicks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	p.State.URL, p.Sink.URL = fileURL(filepath.Join(d, "state")), fileURL(filepath.Join(d, "out"))
	res := run(t, p, engine.Options{})
	if res.Epochs != 3 || res.Files != 6 || res.RowsLate != 4 || res.RowsRejected != 12 {
		t.Fatalf("result = %+v; want 3 epochs, 6 files, 4 late, 12 rejected", res)
	}
	got := strings.Join(committedRows(t, p), "\n") + "\n"
	golden := "../testdata/golden/clicks.txt"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./engine -run TestGoldenSample -rewrite once to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("sample output differs from %s:\n%s", golden, diffLines(string(want), got))
	}
	if again := run(t, p, engine.Options{}); again.Epochs != 0 || again.Files != 0 {
		t.Fatalf("second run processed %d files in %d epochs; want nothing new", again.Files, again.Epochs)
	}
	// Conservation: once drained, every decoded row that passed the filter
	// and was not late is counted in exactly one window.
	run(t, p, engine.Options{Drain: true})
	var clicks int64
	for _, row := range committedRows(t, p) {
		var n int64
		i := strings.Index(row, "clicks=")
		fmt.Sscanf(row[i:], "clicks=%d", &n)
		clicks += n
	}
	const decoded, filtered, late = 1988, 33, 4
	if clicks != decoded-filtered-late {
		t.Fatalf("drained windows count %d clicks; want %d rows (decoded - filtered - late)", clicks, decoded-filtered-late)
	}
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("- " + a + "\n+ " + c + "\n")
		}
	}
	return b.String()
}

// TestLateFileSmallerKey: a file that lands after later-named files were
// processed is still processed, exactly once.
func TestLateFileSmallerKey(t *testing.T) {
	bothEnvs(t, func(t *testing.T, newEnv func(testing.TB) *env) {
		e := newEnv(t)
		p := e.pipeline(t, windowSpec)
		e.put(t, "b.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u2", 2)))
		e.put(t, "c.jsonl", jsonl(ev("00:00:30", "u1", 4)))
		if r := run(t, p, engine.Options{}); r.Files != 2 || r.Rows != 3 {
			t.Fatalf("first run: %d files %d rows; want 2 and 3", r.Files, r.Rows)
		}
		e.put(t, "a.jsonl", jsonl(ev("00:00:40", "u2", 8), ev("00:05:00", "u3", 16)))
		r := run(t, p, engine.Options{})
		if r.Files != 1 || r.Rows != 2 || r.RowsLate != 0 {
			t.Fatalf("second run: %d files %d rows %d late; want 1, 2, 0", r.Files, r.Rows, r.RowsLate)
		}
		if r := run(t, p, engine.Options{}); r.Files != 0 {
			t.Fatalf("third run processed %d files; want 0", r.Files)
		}
		got := committedRows(t, p)
		want := []string{
			"user_id=u1,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,clicks=2,total_bytes=5",
			"user_id=u2,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,clicks=2,total_bytes=10",
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("rows = %q\nwant %q", got, want)
		}
	})
}

// TestMalformedRows: bad rows go to the rejected output with file, line and
// reason and are counted; the good rows of the same file are kept.
func TestMalformedRows(t *testing.T) {
	e := fileEnv(t)
	p := e.pipeline(t, windowSpec)
	e.put(t, "a.jsonl", jsonl(
		ev("00:00:01", "u1", 1),
		`{"event_time": "2024-01-01T00:00:02Z", "user_id": "u1", "bytes": 2`, // bad JSON
		`{"user_id":"u1","page":"/p","bytes":3}`,                             // missing event time
		`{"event_time":"yesterday","user_id":"u1","page":"/p","bytes":4}`,    // unparsable time
		`{"event_time":"2024-01-01T00:00:05Z","user_id":"u1","page":"/p","bytes":"abc"}`,
		ev("00:00:06", "u1", 6),
	))
	r := run(t, p, engine.Options{Drain: true})
	if r.Rows != 2 || r.RowsRejected != 4 {
		t.Fatalf("rows %d rejected %d; want 2 and 4", r.Rows, r.RowsRejected)
	}
	rej := filepath.Join(strings.TrimPrefix(e.sink, "file://"), "_rejected")
	ents, err := os.ReadDir(rej)
	if err != nil || len(ents) != 1 {
		t.Fatalf("rejected output dir: %v %v", ents, err)
	}
	data, _ := os.ReadFile(filepath.Join(rej, ents[0].Name()))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 {
		t.Fatalf("rejected output has %d lines, want 4:\n%s", len(lines), data)
	}
	for i, want := range []string{`"line":2`, `"line":3`, `"line":4`, `"line":5`} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], `"file":"a.jsonl"`) {
			t.Errorf("rejected row %d = %s; want %s and the file name", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[3], "bytes") {
		t.Errorf("type-mismatch reason does not name the column: %s", lines[3])
	}
	if got := committedRows(t, p); len(got) != 1 || !strings.Contains(got[0], "clicks=2,total_bytes=7") {
		t.Fatalf("rows = %q; want one window with 2 clicks, 7 bytes", got)
	}

	// on_error: fail stops with the file and line, committing nothing.
	e2 := fileEnv(t)
	p2 := e2.pipeline(t, strings.Replace(windowSpec, "event_time: event_time,", "event_time: event_time, on_error: fail,", 1))
	e2.put(t, "a.jsonl", data[:0])
	e2.put(t, "a.jsonl", jsonl(ev("00:00:01", "u1", 1), `{"event_time":"nope","user_id":"u1","page":"/p","bytes":1}`))
	_, err = engine.Run(context.Background(), p2, engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "a.jsonl line 2") {
		t.Fatalf("on_error fail: %v; want an error naming a.jsonl line 2", err)
	}
	if keys := listKeys(t, e2.state); len(keys) > 1 { // only gen=1/_generation.json may exist
		t.Fatalf("state after a failed run: %v", keys)
	}
}

// TestLateRows: rows whose window was already emitted are counted and
// written to the late output, never aggregated into a second version.
func TestLateRows(t *testing.T) {
	bothEnvs(t, func(t *testing.T, newEnv func(testing.TB) *env) {
		e := newEnv(t)
		p := e.pipeline(t, strings.Replace(windowSpec, "event_time: event_time,", `event_time: event_time, late_url: "{{late}}",`, 1))
		e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:01:10", "u1", 2), ev("00:02:30", "u2", 4)))
		e.put(t, "2.jsonl", jsonl(ev("00:00:30", "u1", 8), ev("00:00:50", "u2", 16), ev("00:02:40", "u2", 32)))
		r := run(t, p, engine.Options{Drain: true})
		if r.RowsLate != 2 || r.Rows != 6 {
			t.Fatalf("late %d rows %d; want 2 late of 6", r.RowsLate, r.Rows)
		}
		want := []string{
			"user_id=u1,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,clicks=1,total_bytes=1",
			"user_id=u1,window_start=2024-01-01T00:01:00Z,window_end=2024-01-01T00:02:00Z,clicks=1,total_bytes=2",
			"user_id=u2,window_start=2024-01-01T00:02:00Z,window_end=2024-01-01T00:03:00Z,clicks=2,total_bytes=36",
		}
		if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("rows = %q\nwant %q", got, want)
		}
		lateKeys := listKeys(t, e.late)
		if len(lateKeys) == 0 {
			t.Fatal("no late-rows output written")
		}
		var n int
		ls, _ := store.Open(context.Background(), e.late)
		defer ls.Close()
		for _, k := range lateKeys {
			data, _, _ := ls.Get(context.Background(), k)
			n += len(parquetRows(t, data))
		}
		if n != 2 {
			t.Fatalf("late output holds %d rows, want 2", n)
		}
		// A later run's orphan cleanup must keep committed late files
		// (after the drain the new row is late too: one more file).
		e.put(t, "3.jsonl", jsonl(ev("00:05:00", "u3", 1)))
		if r := run(t, p, engine.Options{}); r.RowsLate != 1 {
			t.Fatalf("row after the drain: %d late, want 1", r.RowsLate)
		}
		again := listKeys(t, e.late)
		for _, k := range lateKeys {
			if !slices.Contains(again, k) {
				t.Fatalf("committed late file %s deleted by a later run (now %v)", k, again)
			}
		}
		if len(again) != len(lateKeys)+1 {
			t.Fatalf("late files after another run: %v; want the %d committed before plus one", again, len(lateKeys))
		}
	})
}

// TestIdleInput: with inputs by directory, an input that stops receiving
// files holds the watermark back until its idle timeout passes.
func TestIdleInput(t *testing.T) {
	for _, idle := range []string{"", "idle_timeout: 1m"} {
		e := fileEnv(t)
		tmpl := strings.Replace(windowSpec, "watermark: {max_out_of_orderness: 0s}", "inputs: directory, watermark: {max_out_of_orderness: 0s, "+idle+"}", 1)
		tmpl = strings.Replace(tmpl, "watermark: {max_out_of_orderness: 0s, }", "watermark: {max_out_of_orderness: 0s}", 1)
		p := e.pipeline(t, tmpl)
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now := func() time.Time { return clock }
		e.put(t, "a/0.jsonl", jsonl(ev("00:00:10", "u1", 1)))
		e.put(t, "b/0.jsonl", jsonl(ev("00:00:20", "u2", 1)))
		run(t, p, engine.Options{Now: now})
		// Input b goes quiet; a keeps going, one file every two minutes.
		var emitted int64
		for i, ts := range []string{"00:02:10", "00:04:10", "00:06:10"} {
			clock = clock.Add(2 * time.Minute)
			e.put(t, "a/"+string(rune('1'+i))+".jsonl", jsonl(ev(ts, "u1", 1)))
			emitted += run(t, p, engine.Options{Now: now}).RowsOut
		}
		if idle == "" && emitted != 0 {
			t.Fatalf("without idle timeout the quiet input must hold the watermark at 00:00:10; %d windows emitted", emitted)
		}
		// a's windows [0,1m), [2m,3m), [4m,5m) and b's [0,1m) close once b is idle.
		if idle != "" && emitted != 4 {
			t.Fatalf("with idle timeout: %d windows emitted, want 4", emitted)
		}
	}
}

// TestRescaleSequence: P = 1 -> 4 -> 3 -> 7 -> 1 across runs gives exactly
// the rows of a never-rescaled run, on the sample pipeline and on a
// generated one; no object is ever written under a parent generation's
// prefix.
func TestRescaleSequence(t *testing.T) {
	bothEnvs(t, func(t *testing.T, newEnv func(testing.TB) *env) {
		t.Run("sample", func(t *testing.T) {
			sample := func(e *env) *spec.Pipeline {
				p, err := spec.Load("../testdata/pipelines/clicks.yaml")
				if err != nil {
					t.Fatal(err)
				}
				ents, err := os.ReadDir("../testdata/events")
				if err != nil {
					t.Fatal(err)
				}
				for _, ent := range ents {
					data, err := os.ReadFile(filepath.Join("../testdata/events", ent.Name()))
					if err != nil {
						t.Fatal(err)
					}
					e.put(t, ent.Name(), data)
				}
				p.Source.URL, p.State.URL, p.Sink.URL = e.source, e.state, e.sink
				p.Source.MaxFilesPerEpoch = 1 // six epochs
				return p
			}
			checkRescales(t, sample(newEnv(t)), sample(newEnv(t)))
		})
		t.Run("generated", func(t *testing.T) {
			gen := datagen.Options{Rows: 6000, Files: 10, Users: 50, Span: 20 * time.Minute, Seed: 3, OutOfOrder: 20 * time.Second, LateFraction: 0.01}
			tmpl := strings.Replace(windowSpec, "max_out_of_orderness: 0s", "max_out_of_orderness: 10s", 1)
			tmpl = strings.Replace(tmpl, "max_files_per_epoch: 1", "max_files_per_epoch: 2", 1)
			ref, e := newEnv(t), newEnv(t)
			genData(t, ref, gen)
			genData(t, e, gen)
			checkRescales(t, ref.pipeline(t, tmpl), e.pipeline(t, tmpl))
		})
	})
}

// checkRescales runs ref without rescaling and p with P = 1, 4, 3, 7, 1 for
// one epoch each (then drained), and compares their committed rows.
func checkRescales(t *testing.T, ref, p *spec.Pipeline) {
	t.Helper()
	run(t, ref, engine.Options{Drain: true})
	want := committedRows(t, ref)
	stateURL, err := engine.PipelineStateURL(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, par := range []int{1, 4, 3, 7, 1} {
		before := map[string]bool{}
		for _, k := range listKeys(t, stateURL) {
			before[k] = true
		}
		r := run(t, p, engine.Options{Parallelism: par, UntilEpoch: int64(i + 1)})
		if r.LastEpoch != int64(i+1) || (i > 0 && r.Generation != int64(i+1)) {
			t.Fatalf("run %d (P=%d): epoch %d generation %d", i, par, r.LastEpoch, r.Generation)
		}
		prefix := manifest.GenerationDir(r.Generation)
		for _, k := range listKeys(t, stateURL) {
			if !before[k] && !strings.HasPrefix(k, prefix) && k != manifest.LatestPath {
				t.Fatalf("run %d (generation %d) wrote %s outside its generation", i, r.Generation, k)
			}
		}
	}
	run(t, p, engine.Options{Parallelism: 1, Drain: true})
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("rescaled run differs from never-rescaled run: %d vs %d rows\n%s", len(got), len(want),
			diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
}

// TestCrashAfterRescale: a crash at any state-store call of the first epoch
// after a rescale, before the new generation commits, restores from the
// parent generation and ends with the same rows.
func TestCrashAfterRescale(t *testing.T) {
	gen := datagen.Options{Rows: 3000, Files: 6, Users: 30, Span: 12 * time.Minute, Seed: 5}
	tmpl := strings.Replace(windowSpec, "max_files_per_epoch: 1", "max_files_per_epoch: 2", 1)
	ref := fileEnv(t)
	genData(t, ref, gen)
	pref := ref.pipeline(t, tmpl)
	run(t, pref, engine.Options{Drain: true})
	want := committedRows(t, pref)
	for at := 0; at < 40; at += 3 {
		e := fileEnv(t)
		genData(t, e, gen)
		p := e.pipeline(t, tmpl)
		run(t, p, engine.Options{UntilEpoch: 1})
		var f *store.Faulty
		_, err := engine.Run(context.Background(), p, engine.Options{Parallelism: 3, UntilEpoch: 2,
			Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(name string, s store.Store) store.Store {
				if name != "state" {
					return s
				}
				f = store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
				return f
			}})
		if err == nil {
			break // the sweep passed the last call of the epoch
		}
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("at %d: %v", at, err)
		}
		run(t, p, engine.Options{Parallelism: 3, Drain: true})
		if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("crash at state call %d after rescale: rows differ (%d vs %d)", at, len(got), len(want))
		}
	}
}

// TestPlanChange: an edited filter starts a new generation and carries the
// state over; a changed aggregate is refused before anything is written.
func TestPlanChange(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{})
	edited := strings.Replace(windowSpec, "operators:\n", "operators:\n  - filter: \"bytes > 0\"\n", 1)
	e.put(t, "2.jsonl", jsonl(ev("00:00:20", "u1", 5), ev("00:00:30", "u1", 0)))
	r := run(t, e.pipeline(t, edited), engine.Options{Drain: true})
	if r.Generation != 2 {
		t.Fatalf("filter edit: generation %d, want 2", r.Generation)
	}
	if got := committedRows(t, p); len(got) != 1 || !strings.Contains(got[0], "clicks=2,total_bytes=6") {
		t.Fatalf("rows = %q; want the window carried over: 2 clicks, 6 bytes", got)
	}
	before := listKeys(t, e.state)
	changed := strings.Replace(windowSpec, `total_bytes: "sum(bytes)"`, `total_bytes: "max(bytes)"`, 1)
	e.put(t, "3.jsonl", jsonl(ev("00:09:00", "u1", 1)))
	_, err := engine.Run(context.Background(), e.pipeline(t, changed), engine.Options{})
	if err == nil || !strings.Contains(err.Error(), `operator "window"`) {
		t.Fatalf("incompatible change: %v; want a refusal naming operator \"window\"", err)
	}
	if after := listKeys(t, e.state); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused plan change wrote objects:\nbefore %v\nafter  %v", before, after)
	}
}

// TestSinkCrashSweep crashes at every sink call of a run; the next run
// finishes, leaves no orphan output at the sink root and commits exactly the
// rows of an uninterrupted run.
func TestSinkCrashSweep(t *testing.T) {
	gen := datagen.Options{Rows: 2000, Files: 6, Users: 20, Span: 12 * time.Minute, Seed: 9}
	tmpl := strings.Replace(windowSpec, "max_files_per_epoch: 1", "max_files_per_epoch: 2", 1)
	ref := fileEnv(t)
	genData(t, ref, gen)
	pref := ref.pipeline(t, tmpl)
	run(t, pref, engine.Options{Drain: true})
	want := committedRows(t, pref)
	for at := 0; ; at++ {
		e := fileEnv(t)
		genData(t, e, gen)
		p := e.pipeline(t, tmpl)
		_, err := engine.Run(context.Background(), p, engine.Options{Drain: true, Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(name string, s store.Store) store.Store {
				if name != "sink" {
					return s
				}
				return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
			}})
		if err == nil {
			if at < 3 {
				t.Fatalf("no crash at sink call %d: the sweep is not exercising anything", at)
			}
			break
		}
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("at %d: %v", at, err)
		}
		run(t, p, engine.Options{Drain: true})
		if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("crash at sink call %d: rows differ (%d vs %d)", at, len(got), len(want))
		}
		outs, err := engine.Outputs(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		committed := map[string]bool{"_floe_pipeline.json": true}
		for _, o := range outs {
			committed[o] = true
		}
		for _, k := range listKeys(t, e.sink) {
			if !strings.Contains(k, "/") && !committed[k] {
				t.Fatalf("crash at sink call %d: orphan output %s left in the sink", at, k)
			}
		}
	}
}

// TestSinkOwnedByOnePipeline: a second pipeline pointed at the same sink is
// refused, so orphan cleanup can never delete another pipeline's outputs.
func TestSinkOwnedByOnePipeline(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	run(t, e.pipeline(t, windowSpec), engine.Options{})
	other := e.pipeline(t, strings.Replace(windowSpec, "name: t", "name: other", 1))
	_, err := engine.Run(context.Background(), other, engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "belongs to another pipeline") {
		t.Fatalf("second pipeline on the same sink: %v", err)
	}
}

// TestTriggerMode: with a trigger the run keeps going, picks up files as
// they land, and stops cleanly when asked.
func TestTriggerMode(t *testing.T) {
	e := fileEnv(t)
	p := e.pipeline(t, windowSpec)
	stop := make(chan struct{})
	done := make(chan error, 1)
	var res *engine.Result
	go func() {
		var err error
		res, err = engine.Run(context.Background(), p, engine.Options{Trigger: 20 * time.Millisecond, Stop: stop})
		done <- err
	}()
	waitFor := func(files int64) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			rep, err := engine.Plan(context.Background(), p, engine.Options{})
			if err == nil && rep.Status.Counters != nil && rep.Status.Counters.FilesIn == files {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("trigger run did not commit %d files in time", files)
	}
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	waitFor(1)
	e.put(t, "2.jsonl", jsonl(ev("00:01:10", "u1", 2)))
	waitFor(2)
	close(stop)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopped run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop")
	}
	if res.Files != 2 || res.RowsOut != 1 {
		t.Fatalf("trigger run: %d files, %d rows out; want 2 files, 1 window", res.Files, res.RowsOut)
	}
}

// TestSideOutputOrphans: a run killed after writing its late-rows and
// rejected-rows files but before committing leaves orphans; the next run
// commits that epoch again and deletes them, so each late or rejected row
// is in exactly one committed side-output file.
func TestSideOutputOrphans(t *testing.T) {
	e := fileEnv(t)
	p := e.pipeline(t, strings.Replace(windowSpec, "event_time: event_time,", `event_time: event_time, late_url: "{{late}}",`, 1))
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:01:10", "u1", 2), ev("00:02:30", "u2", 4)))
	e.put(t, "2.jsonl", jsonl(ev("00:00:30", "u1", 8), `not json`, ev("00:00:50", "u2", 16), ev("00:02:40", "u2", 32)))
	run(t, p, engine.Options{UntilEpoch: 1})
	// Epoch 2 writes one late file and one rejected file, then dies before its manifest.
	_, err := engine.Run(context.Background(), p, engine.Options{Retry: store.RetryPolicy{MaxAttempts: 1},
		WrapStore: func(name string, s store.Store) store.Store {
			if name != "state" {
				return s
			}
			return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{
				Match: store.Match{Op: store.OpPut, KeyContains: manifest.ManifestFile}, Mode: store.CrashBefore}}})
		}})
	if !errors.Is(err, store.ErrCrashed) {
		t.Fatalf("crashing run: %v", err)
	}
	orphans := listKeys(t, e.late)
	if len(orphans) == 0 {
		t.Fatal("the crashed epoch wrote no late file; the test is not exercising orphans")
	}
	r := run(t, p, engine.Options{})
	if r.RowsLate != 2 || r.RowsRejected != 1 {
		t.Fatalf("rerun: late %d rejected %d; want 2 and 1", r.RowsLate, r.RowsRejected)
	}
	ls, _ := store.Open(context.Background(), e.late)
	defer ls.Close()
	var lateRows int
	for _, k := range listKeys(t, e.late) {
		for _, o := range orphans {
			if k == o {
				t.Fatalf("orphan late file %s survived the rerun", k)
			}
		}
		data, _, _ := ls.Get(context.Background(), k)
		lateRows += len(parquetRows(t, data))
	}
	if lateRows != 2 {
		t.Fatalf("late files hold %d rows, want 2 (each late row exactly once)", lateRows)
	}
	var rejected []string
	for _, k := range listKeys(t, e.sink) {
		if strings.HasPrefix(k, "_rejected/") {
			rejected = append(rejected, k)
		}
	}
	if len(rejected) != 1 {
		t.Fatalf("rejected files %v, want exactly the committed one", rejected)
	}
}

// TestBadSourcesAndPlans: a file that cannot be decoded at all is rejected
// as a whole (the pipeline goes on), a missing local source directory is an
// error, and an expression type error names the spec file, line and field.
func TestBadSourcesAndPlans(t *testing.T) {
	e := fileEnv(t)
	p := e.pipeline(t, strings.Replace(windowSpec, "format: jsonl,", "format: csv,", 1))
	e.put(t, "a.csv", []byte("event_time,user_id,page\n2024-01-01T00:00:10Z,u1,/p\n")) // no bytes column
	e.put(t, "b.csv", []byte("event_time,user_id,page,bytes\n2024-01-01T00:00:20Z,u1,/p,5\n"))
	r := run(t, p, engine.Options{Drain: true})
	if r.RowsRejected != 1 || r.Rows != 1 || r.Files != 2 {
		t.Fatalf("files %d rows %d rejected %d; want 2 files, 1 row, the bad file rejected once", r.Files, r.Rows, r.RowsRejected)
	}
	failing := e.pipeline(t, strings.Replace(strings.Replace(windowSpec, "format: jsonl,", "format: csv, on_error: fail,", 1), "name: t", "name: t2", 1))
	failing.Sink.URL = fileURL(t.TempDir())
	if _, err := engine.Run(context.Background(), failing, engine.Options{}); err == nil || !strings.Contains(err.Error(), "a.csv") {
		t.Fatalf("on_error fail with an undecodable file: %v", err)
	}

	missing := e.pipeline(t, windowSpec)
	missing.Source.URL = fileURL(filepath.Join(t.TempDir(), "typo"))
	if _, err := engine.Run(context.Background(), missing, engine.Options{}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing source dir: %v", err)
	}

	bad := e.pipeline(t, strings.Replace(windowSpec, "operators:\n", "operators:\n  - filter: \"bytes > 'x'\"\n", 1))
	_, err := engine.Run(context.Background(), bad, engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "test.yaml:") || !strings.Contains(err.Error(), "operators[0].filter") {
		t.Fatalf("filter type error: %v; want it placed at test.yaml:LINE:COL: operators[0].filter", err)
	}
}

// TestRejectedURL: rejected rows go to their own store when rejected_url is
// set, and a later run keeps the committed files.
func TestRejectedURL(t *testing.T) {
	bothEnvs(t, func(t *testing.T, newEnv func(testing.TB) *env) {
		e := newEnv(t)
		p := e.pipeline(t, strings.Replace(windowSpec, "event_time: event_time,", `event_time: event_time, rejected_url: "{{late}}",`, 1))
		e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), `{"event_time": 5}`, `oops`))
		if r := run(t, p, engine.Options{}); r.RowsRejected != 2 {
			t.Fatalf("rejected %d, want 2", r.RowsRejected)
		}
		first := listKeys(t, e.late)
		if len(first) != 1 || !strings.HasSuffix(first[0], ".jsonl") {
			t.Fatalf("rejected store holds %v, want one JSON-lines file", first)
		}
		e.put(t, "2.jsonl", jsonl(`{}`))
		run(t, p, engine.Options{})
		if again := listKeys(t, e.late); len(again) != 2 || !slices.Contains(again, first[0]) {
			t.Fatalf("rejected store after a second run: %v; want the first file kept and one more", again)
		}
	})
}

// TestSinkInsideSource: outputs under the source prefix would be read back
// as input; the run is refused.
func TestSinkInsideSource(t *testing.T) {
	e := fileEnv(t)
	p := e.pipeline(t, windowSpec)
	p.Sink.URL = e.source + "/out"
	if _, err := engine.Run(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), "inside source.url") {
		t.Fatalf("sink inside source: %v", err)
	}
	p = e.pipeline(t, windowSpec)
	p.Sink.URL = e.source + "-out" // a sibling that shares a name prefix is fine
	run(t, p, engine.Options{})
}
