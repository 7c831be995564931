package engine_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/store"
)

// rescaleSpec keeps every window open: all events fall in the first hour and
// the lateness holds [00:00, 01:00) past any watermark the data reaches, so
// the state holds one row per distinct user.
const rescaleSpec = `
name: t
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 8,
         watermark: {max_out_of_orderness: 0s}}
operators:
  - window: {key: [user_id], tumbling: 1h, allowed_lateness: 1h,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 4}
`

const (
	rescaleKeys  = 1_000_000
	rescaleFiles = 8
)

// fileSet is a set of files by slash-separated relative path.
type fileSet map[string][]byte

// readTree loads every file under dir.
func readTree(tb testing.TB, dir string) fileSet {
	tb.Helper()
	out := fileSet{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		tb.Fatalf("read %s: %v", dir, err)
	}
	return out
}

// writeTree writes fs under dir.
func writeTree(tb testing.TB, dir string, files fileSet) {
	tb.Helper()
	for rel, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// distinctUsers writes n rows, one per distinct user "user-0000000".., spread
// over the first 50 minutes of 2024-01-01, in files JSONL files.
func distinctUsers(n, files int) fileSet {
	out := fileSet{}
	per := (n + files - 1) / files
	for f := 0; f < files; f++ {
		var b strings.Builder
		b.Grow(per * 100)
		for i := f * per; i < min(n, (f+1)*per); i++ {
			ts := datagen.DefaultStart.Add(time.Duration(i) * (50 * time.Minute / time.Duration(n)))
			b.WriteString(`{"event_time":"`)
			b.WriteString(ts.Format("2006-01-02T15:04:05.000Z07:00"))
			b.WriteString(`","user_id":"user-`)
			b.WriteString(fmt.Sprintf("%07d", i))
			b.WriteString(`","page":"/p","bytes":`)
			b.WriteString(strconv.Itoa(i % 1000))
			b.WriteString("}\n")
		}
		out[fmt.Sprintf("events-%02d.jsonl", f)] = []byte(b.String())
	}
	return out
}

// committedState is a pipeline's state directory after its first run.
type committedState struct {
	state fileSet // files under the state URL
	rows  int64   // state rows of the head manifest
}

var (
	rescaleMu     sync.Mutex
	rescaleSource fileSet
	rescaleCache  = map[int]*committedState{} // by the parallelism it was committed at
)

// rescaleSetup ingests rescaleKeys distinct users at parallelism par once
// per process and returns the committed state, kept in memory.
func rescaleSetup(b *testing.B, par int) *committedState {
	b.Helper()
	rescaleMu.Lock()
	defer rescaleMu.Unlock()
	if cs := rescaleCache[par]; cs != nil {
		return cs
	}
	t0 := time.Now()
	if rescaleSource == nil {
		rescaleSource = distinctUsers(rescaleKeys, rescaleFiles)
	}
	e := fileEnv(b)
	writeTree(b, e.sourceDir, rescaleSource)
	p := e.pipeline(b, rescaleSpec)
	res := run(b, p, engine.Options{Parallelism: par})
	if res.Rows != rescaleKeys || res.RowsOut != 0 {
		b.Fatalf("setup at P=%d: %d rows in, %d out; want %d in, 0 out", par, res.Rows, res.RowsOut, rescaleKeys)
	}
	rows := stateRows(b, e, p.Name)
	if rows != rescaleKeys {
		b.Fatalf("setup at P=%d: %d state rows, want %d", par, rows, rescaleKeys)
	}
	cs := &committedState{state: readTree(b, strings.TrimPrefix(e.state, "file://")), rows: rows}
	rescaleCache[par] = cs
	b.Logf("setup: %d keys committed at P=%d in %v", rows, par, time.Since(t0).Round(time.Millisecond))
	return cs
}

// stateRows sums the rows of the head manifest's operator state files.
func stateRows(tb testing.TB, e *env, name string) int64 {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, e.state+"/"+name)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	sink, err := store.Open(ctx, e.sink)
	if err != nil {
		tb.Fatal(err)
	}
	defer sink.Close()
	head, err := epoch.NewCommitter(st, sink, name, nil).Peek(ctx)
	if err != nil || head.Manifest == nil {
		tb.Fatalf("read head: %v (manifest %v)", err, head)
	}
	var n int64
	for _, op := range head.Manifest.Operators {
		for _, f := range op.Files {
			n += f.Rows
		}
	}
	return n
}

// epochDurations is a slog handler that records the duration of every
// committed epoch.
type epochDurations struct {
	mu sync.Mutex
	d  []time.Duration
}

func (h *epochDurations) Enabled(context.Context, slog.Level) bool { return true }
func (h *epochDurations) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *epochDurations) WithGroup(string) slog.Handler            { return h }
func (h *epochDurations) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "epoch committed" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "duration" {
			h.mu.Lock()
			h.d = append(h.d, a.Value.Duration())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// BenchmarkRescaleRestore times the first run after a parallelism change
// over 1M keyed state rows: restore (every subtask reads the overlapping
// parent files and filters by key group) plus one tiny epoch that rewrites
// all state at the new parallelism. Metrics: state-rows/s over the restore
// phase (run wall time minus the epoch's own duration), restore-s and
// epoch-s.
func BenchmarkRescaleRestore(b *testing.B) {
	for _, c := range []struct{ from, to int }{{4, 3}, {1, 2}} {
		b.Run(fmt.Sprintf("P%dto%d", c.from, c.to), func(b *testing.B) {
			cs := rescaleSetup(b, c.from)
			tiny := jsonl(ev("00:30:00", "newcomer", 1))
			b.ResetTimer()
			var restore, epochD time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				e := fileEnv(b)
				writeTree(b, strings.TrimPrefix(e.state, "file://"), cs.state)
				e.put(b, "tiny.jsonl", tiny)
				p := e.pipeline(b, rescaleSpec)
				h := &epochDurations{}
				opts := engine.Options{Parallelism: c.to, Log: slog.New(h)}
				runtime.GC() // start from a clean heap, not the setup's garbage
				b.StartTimer()
				t0 := time.Now()
				var res *engine.Result
				// The label lets a CPU profile isolate the timed run:
				// go tool pprof -tagfocus phase=rescale.
				pprof.Do(context.Background(), pprof.Labels("phase", "rescale"), func(context.Context) {
					res = run(b, p, opts)
				})
				wall := time.Since(t0)
				b.StopTimer()
				if res.Epochs != 1 || res.Rows != 1 || res.Generation != 2 || len(h.d) != 1 {
					b.Fatalf("rescale run: %+v, %d epoch logs; want 1 epoch of 1 row in generation 2", res, len(h.d))
				}
				if got := stateRows(b, e, p.Name); got != cs.rows+1 {
					b.Fatalf("after rescale: %d state rows, want %d", got, cs.rows+1)
				}
				restore += wall - h.d[0]
				epochD += h.d[0]
				if err := os.RemoveAll(filepath.Dir(e.sourceDir)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cs.rows)*float64(b.N)/restore.Seconds(), "state-rows/s")
			b.ReportMetric(restore.Seconds()/float64(b.N), "restore-s")
			b.ReportMetric(epochD.Seconds()/float64(b.N), "epoch-s")
		})
	}
}

const throughputSpec = `
name: t
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 5,
         watermark: {max_out_of_orderness: 10s}}
operators:
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 0s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 1}
`

var throughputData = sync.OnceValues(func() (fileSet, error) {
	out := fileSet{}
	err := datagen.Generate(datagen.Options{Rows: 1_000_000, Files: 20, Users: 10_000, Span: 20 * time.Minute, Seed: 7},
		func(name string, data []byte) error {
			out[name] = data
			return nil
		})
	return out, err
})

// benchThroughput times a drained catch-up of 1M generated clickstream rows
// (20 JSONL files, 10k users, 20 minutes, 1-minute tumbling count + sum) at
// parallelism par and reports rows/s.
func benchThroughput(b *testing.B, par int) {
	data, err := throughputData()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var rows int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := fileEnv(b)
		writeTree(b, e.sourceDir, data)
		p := e.pipeline(b, throughputSpec)
		runtime.GC()
		b.StartTimer()
		res := run(b, p, engine.Options{Parallelism: par, Drain: true})
		b.StopTimer()
		if res.Files != 20 || res.Rows != 1_000_000 || res.RowsOut == 0 {
			b.Fatalf("run: %d files %d rows %d out; want 20 files, 1M rows, some output", res.Files, res.Rows, res.RowsOut)
		}
		rows += res.Rows
		if err := os.RemoveAll(filepath.Dir(e.sourceDir)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkThroughputP1 is the end-to-end catch-up at parallelism 1.
func BenchmarkThroughputP1(b *testing.B) { benchThroughput(b, 1) }

// BenchmarkThroughputP2 is the end-to-end catch-up at parallelism 2.
func BenchmarkThroughputP2(b *testing.B) { benchThroughput(b, 2) }
