package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// oneMoreLinear and oneMoreGraph are the same keyed window (every window
// held open: the state keeps one row per distinct user), in the linear
// form and as a graph stage.
const oneMoreLinear = `
name: t
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 10,
         watermark: {max_out_of_orderness: 0s}}
operators:
  - window: {key: [user_id], tumbling: 1h, allowed_lateness: 1h,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`

const oneMoreGraph = `
name: t
` + clicksSource + `stages:
  - name: per-user
    input: clicks
    window: {key: [user_id], tumbling: 1h, allowed_lateness: 1h,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sinks:
  out: {input: per-user, type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`

// BenchmarkOneMoreFile: a window over 1M distinct users (10 history files,
// committed without drain), then one small file of 4 users: the run over
// that file against a full recompute (a fresh pipeline over all 11 files),
// for the linear form and the graph form. Each timed run starts from a
// copy of the committed history (or from nothing); medians of 3 runs each
// (the -benchtime=1x iteration does all of them). Metrics: the medians in
// seconds of wall and CPU (user+sys of the process) time, and their ratios.
//
//	go test ./engine/ -run '^$' -bench BenchmarkOneMoreFile -benchtime 1x -timeout 60m
func BenchmarkOneMoreFile(b *testing.B) {
	const users, files, reps = 1_000_000, 10, 3
	history := distinctUsers(users, files)
	small := jsonl(ev("00:40:00", "user-0000001", 5), ev("00:41:00", "newcomer", 6),
		ev("00:42:00", "user-0500000", 7), ev("00:43:00", "user-0999999", 8))
	for _, c := range []struct{ name, tmpl string }{{"linear", oneMoreLinear}, {"graph", oneMoreGraph}} {
		b.Run(c.name, func(b *testing.B) {
			// The committed history (state and sink), kept in memory; each
			// incremental run starts from a copy of it in the same place
			// (the state records its sink's location).
			h := fileEnv(b)
			writeTree(b, h.sourceDir, history)
			hp := h.pipeline(b, c.tmpl)
			run(b, hp, engine.Options{})
			stateDir, sinkDir := strings.TrimPrefix(h.state, "file://"), strings.TrimPrefix(h.sink, "file://")
			committed, committedSink := readTree(b, stateDir), readTree(b, sinkDir)
			var rss int64 // the last measured run's peak RSS, MiB
			measure := func(p *spec.Pipeline, check func(res *engine.Result)) (time.Duration, time.Duration) {
				debug.FreeOSMemory() // a GC, and the heap's free pages back to the OS
				resetPeakRSS(b)
				cpu0, t0 := cpuTime(b), time.Now()
				res := run(b, p, engine.Options{})
				wall, cpu := time.Since(t0), cpuTime(b)-cpu0
				rss = peakRSS(b)
				check(res)
				return wall, cpu
			}
			incremental := func(check func(res *engine.Result)) (time.Duration, time.Duration) {
				for _, d := range []string{stateDir, sinkDir} {
					if err := os.RemoveAll(d); err != nil {
						b.Fatal(err)
					}
				}
				writeTree(b, stateDir, committed)
				writeTree(b, sinkDir, committedSink)
				h.put(b, "events-99-small.jsonl", small)
				defer os.Remove(filepath.Join(h.sourceDir, "events-99-small.jsonl"))
				return measure(hp, check)
			}
			recompute := func(check func(res *engine.Result)) (time.Duration, time.Duration) {
				e := fileEnv(b)
				writeTree(b, e.sourceDir, history)
				e.put(b, "events-99-small.jsonl", small)
				defer os.RemoveAll(filepath.Dir(e.sourceDir))
				return measure(e.pipeline(b, c.tmpl), check)
			}
			for i := 0; i < b.N; i++ {
				var incW, incC, allW, allC []time.Duration
				var incR, allR []int64
				var decoded, skipped int64
				for range reps {
					w, cpu := incremental(func(res *engine.Result) {
						if res.Files != 1 || res.Rows != 4 {
							b.Fatalf("incremental run: %+v; want 1 file of 4 rows", res)
						}
						decoded, skipped = res.StateRowsDecoded, res.StateRowsSkipped
					})
					incW, incC, incR = append(incW, w), append(incC, cpu), append(incR, rss)
					w, cpu = recompute(func(res *engine.Result) {
						if res.Files != files+1 || res.Rows != users+4 {
							b.Fatalf("recompute: %+v; want %d files of %d rows", res, files+1, users+4)
						}
					})
					allW, allC, allR = append(allW, w), append(allC, cpu), append(allR, rss)
				}
				iw, ic, aw, ac := median(incW), median(incC), median(allW), median(allC)
				b.Logf("%s: incremental wall %v cpu %v peak RSS %v MiB (state rows decoded %d, not decoded %d); recompute wall %v cpu %v peak RSS %v MiB; ratio wall %.3fx cpu %.3fx",
					c.name, fmtRuns(incW), fmtRuns(incC), incR, decoded, skipped, fmtRuns(allW), fmtRuns(allC), allR, iw.Seconds()/aw.Seconds(), ic.Seconds()/ac.Seconds())
				b.ReportMetric(iw.Seconds(), "incremental-s")
				b.ReportMetric(aw.Seconds(), "recompute-s")
				b.ReportMetric(iw.Seconds()/aw.Seconds(), "wall-ratio")
				b.ReportMetric(ic.Seconds()/ac.Seconds(), "cpu-ratio")
			}
		})
	}
}

// resetPeakRSS resets the process's peak resident set size (VmHWM), so
// that peakRSS reports the peak of what runs after it; the process's own
// baseline (the benchmark's data held in memory) is included.
func resetPeakRSS(tb testing.TB) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Logf("reset peak RSS: %v", err)
	}
}

// peakRSS is the process's VmHWM in MiB (0: unknown).
func peakRSS(tb testing.TB) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb >> 10
			}
		}
	}
	return 0
}

// cpuTime is the process's user+sys CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func fmtRuns(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.3f", d.Seconds())
	}
	return "[" + strings.Join(parts, " ") + "]s"
}
