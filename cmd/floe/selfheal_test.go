package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// worker is a `floe run --trigger` subprocess.
type worker struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	exited         chan error
}

func startWorker(t *testing.T, args ...string) *worker {
	t.Helper()
	w := &worker{cmd: floeCommand(t, args...), exited: make(chan error, 1)}
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.exited <- w.cmd.Wait() }()
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
	})
	return w
}

// logs returns the worker's JSON log records so far.
func (w *worker) logs() []map[string]any {
	var recs []map[string]any
	for _, line := range strings.Split(w.stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			recs = append(recs, m)
		}
	}
	return recs
}

// committedFiles sums the files of the worker's "epoch committed" records.
func (w *worker) committedFiles() int {
	n := 0
	for _, r := range w.logs() {
		if r["msg"] == "epoch committed" {
			f, _ := r["files"].(float64)
			n += int(f)
		}
	}
	return n
}

// restarts returns the worker's restart records.
func (w *worker) restarts() []map[string]any {
	var out []map[string]any
	for _, r := range w.logs() {
		if r["msg"] == "attempt failed; restarting from the last committed epoch" {
			out = append(out, r)
		}
	}
	return out
}

// waitUntil polls cond until it holds, failing t if the worker exits first
// or limit passes.
func (w *worker) waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		select {
		case err := <-w.exited:
			w.exited <- err
			t.Fatalf("the worker exited (%v) while waiting for %s\nstderr:\n%s", err, what, tailString(w.stderr.String(), 6000))
		default:
		}
		if cond() {
			return
		}
	}
	t.Fatalf("no %s within %v\nstderr:\n%s", what, limit, tailString(w.stderr.String(), 6000))
}

// TestCLISelfHealing: a `floe run --trigger 100ms` worker whose S3 server
// (a fault proxy in front of it: source, state and sink) stalls for a few
// seconds fails its attempts (request deadline 300ms, retry budget 1s),
// restarts them with backoff, logging each restart at WARN, and once the
// server answers again continues without exiting: every file is processed
// once and, drained, its outputs equal an undisturbed run's row for row.
// With the server gone for good a worker exits 2 after --max-restarts
// consecutive failures, with the cause and what its attempts committed.
// (The 20 s outage is scaled down with the deadlines.)
func TestCLISelfHealing(t *testing.T) {
	t0 := time.Now()
	ctx := context.Background()
	srv := s3test.Shared(t)
	u, err := url.Parse(srv.NewBucket(t))
	if err != nil {
		t.Fatal(err)
	}
	b := u.Host
	px, err := faultproxy.Start(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	via := func(prefix string) string { return s3test.Via(srv.URL(b, prefix), px.URL) }

	// Eight small files; the worker sees four, then four more during the stall.
	type file struct {
		name string
		data []byte
	}
	var files []file
	err = datagen.Generate(datagen.Options{Rows: 1600, Files: 8, Users: 20, Span: 8 * time.Minute, Seed: 11, Format: datagen.JSONL,
		OutOfOrder: 3 * time.Second, LateFraction: 0.01, MalformedFraction: 0.002}, func(name string, data []byte) error {
		files = append(files, file{name, data})
		return nil
	})
	if err != nil || len(files) != 8 {
		t.Fatalf("generate: %v, %d files", err, len(files))
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	put := func(prefix string, fs []file) {
		t.Helper()
		st, err := store.Open(ctx, srv.URL(b, prefix)) // directly, not through the proxy
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for _, f := range fs {
			if _, err := st.Put(ctx, f.name, f.data, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("ref-events", files)
	put("events", files[:4])

	dir := t.TempDir()
	refSpec := writeSpec(t, dir, "heal-ref", srv.URL(b, "ref-events"), srv.URL(b, "ref/state"), srv.URL(b, "ref/out"))
	runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	want, _ := committedRows(t, ctx, refSpec, srv.URL(b, "ref/out"))

	// A worker across a stall that ends.
	spec := writeSpec(t, dir, "heal", via("events"), via("heal/state"), via("heal/out"))
	deadlines := []string{"--request-timeout", "300ms", "--retry-budget", "1s", "--log-format", "json"}
	maddr := freeAddr(t)
	w := startWorker(t, append([]string{"run", spec, "--trigger", "100ms", "--max-restarts", "10", "--restart-backoff", "200ms",
		"--metrics-addr", maddr}, deadlines...)...)
	w.waitUntil(t, "the first four files committed", 20*time.Second, func() bool { return w.committedFiles() == 4 })
	px.StallAll()
	stallStart := time.Now()
	put("events", files[4:])
	w.waitUntil(t, "three restarts during the stall", 15*time.Second, func() bool { return len(w.restarts()) >= 3 })
	if px.Stalled() == 0 && len(px.Log()) == 0 {
		t.Fatal("no request reached the stalled proxy")
	}
	px.Release()
	stalled := time.Since(stallStart)
	w.waitUntil(t, "all eight files committed after the stall", 20*time.Second, func() bool { return w.committedFiles() == 8 })
	for i, r := range w.restarts() {
		cause, _ := r["cause"].(string)
		if r["level"] != "WARN" || r["attempt"] != float64(i+1) || r["max_restarts"] != float64(10) || r["delay"] == nil ||
			!strings.Contains(cause, "transient storage error") {
			t.Errorf("restart record %d: %v", i, r)
		}
	}
	// The endpoint kept serving across the restarts and counts them; the
	// commits after the stall reset the consecutive failures. The head
	// figures are refreshed in the background after each epoch: wait for
	// the last one.
	var fams map[string]*dto.MetricFamily
	w.waitUntil(t, "the metrics to show all eight files", 10*time.Second, func() bool {
		f, err := scrape("http://" + maddr + "/metrics")
		if err != nil {
			return false
		}
		fams = f
		return gauge(f, "floe_files_in_total") == 8
	})
	if got := gauge(fams, "floe_run_restarts_total"); got != float64(len(w.restarts())) || got < 3 {
		t.Errorf("floe_run_restarts_total = %v, want the %d restarts logged", got, len(w.restarts()))
	}
	if got := gauge(fams, "floe_run_consecutive_failures"); got != 0 {
		t.Errorf("floe_run_consecutive_failures = %v after epochs committed, want 0", got)
	}
	if got := gauge(fams, "floe_files_in_total"); got != 8 {
		t.Errorf("floe_files_in_total = %v, want 8", got)
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-w.exited; err != nil {
		t.Fatalf("worker after SIGTERM: %v\n%s", err, tailString(w.stderr.String(), 4000))
	}
	t.Logf("stalled %v; %d restarts; worker stdout: %s", stalled.Round(time.Millisecond), len(w.restarts()), strings.TrimSpace(w.stdout.String()))
	if !strings.Contains(w.stdout.String(), "committed epochs 1..") || !strings.Contains(w.stdout.String(), ": 8 files") {
		t.Errorf("the worker's summary does not add up its attempts: %s", w.stdout.String())
	}
	runFloe(t, "run", spec, "--drain", "--log-format", "json")
	got, _ := committedRows(t, ctx, spec, srv.URL(b, "heal/out"))
	if missing, extra := multisetDiff(want, got); len(missing)+len(extra) > 0 || len(got) == 0 {
		t.Fatalf("after the stall: %d rows, want %d; missing %v, extra %v", len(got), len(want), firstN(missing, 5), firstN(extra, 5))
	}

	// A worker whose server goes away for good.
	spec2 := writeSpec(t, dir, "heal-gone", via("events"), via("gone/state"), via("gone/out"))
	w2 := startWorker(t, append([]string{"run", spec2, "--trigger", "100ms", "--max-restarts", "2", "--restart-backoff", "100ms"}, deadlines...)...)
	w2.waitUntil(t, "the files committed", 20*time.Second, func() bool { return w2.committedFiles() == 8 })
	px.Close()
	var werr error
	select {
	case werr = <-w2.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not give up within 20s\n%s", tailString(w2.stderr.String(), 4000))
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("worker with the server gone: %v, want exit 2\n%s", werr, tailString(w2.stderr.String(), 4000))
	}
	lines := lastLines(w2.stderr.String(), 2)
	if len(w2.restarts()) != 2 ||
		!strings.HasPrefix(lines[0], "pipeline heal-gone: before stopping, this run committed epochs 1..4: 8 files") ||
		!strings.HasPrefix(lines[1], "floe: giving up after 3 consecutive failed attempts (--max-restarts 2") ||
		!strings.Contains(lines[1], "transient storage error") {
		t.Fatalf("want 2 restarts, then the summary and the cause; stderr:\n%s", tailString(w2.stderr.String(), 4000))
	}
	t.Logf("gave up: %s", lines[1])
	t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
}
