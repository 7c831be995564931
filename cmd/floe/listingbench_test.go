package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// peakRSSEnv names a file the re-executed floe writes its peak RSS
// (VmHWM, KiB) to when it exits: a child's own figure, not wait4's, which
// on Linux also counts the parent's RSS at fork.
const peakRSSEnv = "FLOE_TEST_PEAK_RSS_FILE"

func writePeakRSS(path string) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			_ = os.WriteFile(path, []byte(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))), 0o644)
		}
	}
}

// listingBench is the history BenchmarkOneNewFile starts from: a versitygw
// bucket behind a counting proxy whose source holds n files, all
// processed by one pipeline.
type listingBench struct {
	px             *faultproxy.Proxy
	dir            string // the source's directory on the server
	lexical, plain string // spec paths: the same pipeline with and without order: lexical
	next           int
	// floe is a floe binary built from this package, or "" to run this
	// test binary as floe (FLOE_LISTING_BENCH_TESTBIN=1): its start-up
	// initialises every test dependency (the S3 test server's packages:
	// about 0.1 s of CPU and 60 MiB before floe starts).
	floe string
}

var (
	benchOnce  sync.Once
	benchState *listingBench
)

// benchFiles is the history's size: FLOE_LISTING_BENCH_FILES (default
// 100,000).
func benchFiles() int {
	if n, err := strconv.Atoi(os.Getenv("FLOE_LISTING_BENCH_FILES")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

func setupListingBench(b *testing.B) *listingBench {
	benchOnce.Do(func() {
		srv := s3test.Shared(b)
		bucketURL := srv.NewBucket(b)
		u, _ := url.Parse(bucketURL)
		px, err := faultproxy.Start(srv.Endpoint)
		if err != nil {
			b.Fatal(err)
		}
		lb := &listingBench{px: px, dir: filepath.Join(srv.Dir, u.Host, "in")}
		if os.Getenv("FLOE_LISTING_BENCH_TESTBIN") == "" {
			lb.floe = filepath.Join(b.TempDir(), "floe")
			if out, err := exec.Command("go", "build", "-o", lb.floe, ".").CombinedOutput(); err != nil {
				b.Fatalf("build floe: %v\n%s", err, out)
			}
			if _, err := exec.LookPath("/usr/bin/time"); err != nil {
				b.Fatal("the benchmark measures a built floe's peak RSS with /usr/bin/time (GNU time); set FLOE_LISTING_BENCH_TESTBIN=1 to run the test binary instead")
			}
		}
		n := benchFiles()
		if err := os.MkdirAll(lb.dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			line := fmt.Sprintf(`{"event_time":"2024-01-01T00:00:10Z","user_id":"u%d","page":"/p","bytes":%d}`+"\n", i%100, i)
			if err := os.WriteFile(filepath.Join(lb.dir, fmt.Sprintf("f%08d.jsonl", i)), []byte(line), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		lb.next = n
		via := func(prefix string) string { return s3test.Via(srv.URL(u.Host, prefix), px.URL) }
		d := b.TempDir()
		for _, mode := range []string{"lexical", "plain"} {
			order := ", order: lexical, full_list_every: 24h"
			if mode == "plain" {
				order = ""
			}
			y := fmt.Sprintf(`name: many
source: {type: files, url: %q, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time%s}
operators:
  - project: {event_time: event_time, user_id: user_id, bytes: bytes}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 1}
`, via("in"), order, via("out"), via("state"))
			path := filepath.Join(d, mode+".yaml")
			if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
				b.Fatal(err)
			}
			if mode == "lexical" {
				lb.lexical = path
			} else {
				lb.plain = path
			}
		}
		// The history, processed in-process (not measured).
		p, err := spec.Load(lb.lexical)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		res, err := engine.Run(context.Background(), p, engine.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("history: %d files processed in %v (%d epochs)", res.Files, time.Since(t0).Round(time.Millisecond), res.Epochs)
		benchState = lb
	})
	if benchState == nil {
		b.Fatal("listing bench set-up failed")
	}
	return benchState
}

// BenchmarkOneNewFile: after a history of many processed files (100,000 by
// default; FLOE_LISTING_BENCH_FILES), one new file arrives and `floe run`
// (a child process: a floe binary built from this package) reads it, on
// versitygw. Reported per run: the LIST,
// GET and PUT requests the server received (through a counting proxy),
// the child's peak RSS and CPU time, and (ns/op) its wall time;
// "lexical" lists after the frontier (source.order: lexical), "plain"
// lists the whole source, as every run did before
// (FLOE_LISTING_BENCH_ARGS adds flags to each run, e.g. --cpuprofile
// FILE). Run lexical first (the plain runs drop the
// frontier):
//
//	go test ./cmd/floe -run '^$' -bench OneNewFile -benchtime 3x
func BenchmarkOneNewFile(b *testing.B) {
	lb := setupListingBench(b)
	for _, mode := range []string{"lexical", "plain"} {
		b.Run(mode, func(b *testing.B) {
			specPath := lb.lexical
			if mode == "plain" {
				specPath = lb.plain
			}
			var lists, gets, puts, rss int64
			var cpu time.Duration
			rssFile := filepath.Join(b.TempDir(), "rss")
			for range b.N {
				b.StopTimer()
				line := fmt.Sprintf(`{"event_time":"2024-01-01T00:00:20Z","user_id":"new","page":"/p","bytes":%d}`+"\n", lb.next)
				if err := os.WriteFile(filepath.Join(lb.dir, fmt.Sprintf("f%08d.jsonl", lb.next)), []byte(line), 0o644); err != nil {
					b.Fatal(err)
				}
				lb.next++
				lb.px.ResetCounts()
				args := []string{"run", specPath, "--log-format", "json"}
				if extra := os.Getenv("FLOE_LISTING_BENCH_ARGS"); extra != "" {
					args = append(args, strings.Fields(extra)...) // e.g. --cpuprofile /tmp/run.prof
				}
				var cmd *exec.Cmd
				if lb.floe != "" {
					// GNU time reports the child's peak RSS (wait4's,
					// which after a fork from the small time process is
					// the child's own); its rusage includes the child's CPU.
					cmd = exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", rssFile, lb.floe}, args...)...)
				} else {
					cmd = floeCommand(b, args...)
					cmd.Env = append(cmd.Env, peakRSSEnv+"="+rssFile)
				}
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				b.StartTimer()
				err := cmd.Run()
				b.StopTimer()
				if err != nil {
					b.Fatalf("floe run: %v\n%s", err, tailString(out.String(), 3000))
				}
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				if os.Getenv("FLOE_LISTING_BENCH_LOG") != "" {
					b.Logf("floe run:\n%s", tailString(out.String(), 6000))
				}
				if !strings.Contains(out.String(), `"files":1`) {
					b.Fatalf("the run did not read exactly the new file:\n%s", tailString(out.String(), 3000))
				}
				for _, q := range lb.px.Requests() {
					switch store.S3Op(q.Method, q.Path, q.RawQuery, true) {
					case store.OpList:
						lists++
						if os.Getenv("FLOE_LISTING_BENCH_LOG") != "" {
							b.Logf("LIST %s?%s", q.Path, q.RawQuery)
						}
					case store.OpGet:
						gets++
					case store.OpPut:
						puts++
					}
				}
				data, err := os.ReadFile(rssFile)
				if err != nil {
					b.Fatal(err)
				}
				kib, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
				rss = max(rss, kib)
				b.StartTimer()
			}
			b.ReportMetric(float64(lists)/float64(b.N), "LIST/op")
			b.ReportMetric(float64(gets)/float64(b.N), "GET/op")
			b.ReportMetric(float64(puts)/float64(b.N), "PUT/op")
			b.ReportMetric(float64(rss)/1024, "peakRSS-MiB")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op") // the child's user+sys: less sensitive to the machine's load than wall time
		})
	}
}
