package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// workerSpec is the kill test's pipeline at parallelism 6, so that up to
// six workers can share it.
func workerSpec(t testing.TB, dir, name, source, state, sink string) string {
	t.Helper()
	y := fmt.Sprintf(`name: %s
source: {type: files, url: %q, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 4, late_url: %q,
         watermark: {max_out_of_orderness: 5s, idle_timeout: 1h}}
operators:
  - filter: "bytes > 0"
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 30s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 6, max_parallelism: 128, retain_epochs: 3}
`, name, source, lateOf(sink), sink, state)
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatalf("write spec: %v", err)
	}
	return p
}

// landing is the kill test's data set, landed into a source in batches.
type landing struct {
	names []string
	data  map[string][]byte
	next  int
}

func newLanding(t testing.TB) *landing {
	l := &landing{data: map[string][]byte{}}
	err := datagen.Generate(killData, func(name string, data []byte) error {
		l.names = append(l.names, name)
		l.data[name] = data
		return nil
	})
	if err != nil {
		t.Fatalf("generate data set: %v", err)
	}
	return l
}

// land puts the next n files (in name order) into the source at url.
func (l *landing) land(t testing.TB, ctx context.Context, url string, n int) {
	t.Helper()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("open source %s: %v", url, err)
	}
	defer st.Close()
	for ; n > 0 && l.next < len(l.names); n-- {
		name := l.names[l.next]
		if _, err := st.Put(ctx, name, l.data[name], store.PutOptions{}); err != nil {
			t.Fatalf("land %s: %v", name, err)
		}
		l.next++
	}
}

// workerProc is one running worker process.
type workerProc struct {
	index  int
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

func startPeer(t testing.TB, spec string, workers, index int, extra ...string) *workerProc {
	t.Helper()
	return startPeerEnv(t, nil, spec, workers, index, extra...)
}

// startPeerEnv is startPeer with env added to the worker's environment.
func startPeerEnv(t testing.TB, env []string, spec string, workers, index int, extra ...string) *workerProc {
	t.Helper()
	args := append([]string{"run", spec, "--workers", strconv.Itoa(workers), "--worker", strconv.Itoa(index),
		"--worker-timeout", "60s", "--worker-takeover", "2s", "--log-format", "json"}, extra...)
	cmd := floeCommand(t, args...)
	cmd.Env = append(cmd.Env, env...)
	w := &workerProc{index: index, cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker %d: %v", index, err)
	}
	go func() { w.done <- cmd.Wait() }()
	return w
}

// runWorkerRound runs W workers of spec until all exit 0, SIGKILLing a
// random one kills times at random moments and starting it again with the
// same index. It returns how many kills landed on a running process.
func runWorkerRound(t *testing.T, rng *rand.Rand, spec string, workers, kills int, extra ...string) int {
	t.Helper()
	return runWorkerRoundRetry(t, rng, spec, workers, kills, 0, extra...)
}

// runWorkerRoundRetry is runWorkerRound where a worker that fails (a
// storage fault outlasting its retries) is started again, up to retries
// times in all, as a Job's restart policy would.
func runWorkerRoundRetry(t *testing.T, rng *rand.Rand, spec string, workers, kills, retries int, extra ...string) int {
	t.Helper()
	procs := make([]*workerProc, workers)
	for i := range procs {
		procs[i] = startPeer(t, spec, workers, i, extra...)
	}
	landed := 0
	for k := 0; k < kills; k++ {
		// Half the kills within 400 ms (a round of workers may end in
		// less than a second), the others anywhere in 1.5 s.
		delay := 1500 * time.Millisecond
		if rng.IntN(2) == 0 {
			delay = 400 * time.Millisecond
		}
		time.Sleep(time.Duration(rng.Int64N(int64(delay))))
		i := rng.IntN(workers)
		p := procs[i]
		select {
		case err := <-p.done:
			p.done <- err // finished already: nothing to kill
			continue
		default:
		}
		_ = p.cmd.Process.Kill()
		err := <-p.done
		if !wasKilled(err) {
			if err != nil {
				if retries > 0 {
					retries--
					t.Logf("worker %d failed (restarted): %s", i, lastLine(p.stderr.String()))
					procs[i] = startPeer(t, spec, workers, i, extra...)
					continue
				}
				t.Fatalf("worker %d failed before the kill: %v\n%s", i, err, tailString(p.stderr.String(), 3000))
			}
			p.done <- err
			continue
		}
		landed++
		procs[i] = startPeer(t, spec, workers, i, extra...)
	}
	// Wait for all, restarting a failed one at once (its peers wait
	// for it at a barrier).
	finished := make([]bool, len(procs))
	deadline := time.Now().Add(5 * time.Minute)
	for left := len(procs); left > 0; {
		if time.Now().After(deadline) {
			for i, p := range procs {
				if !finished[i] {
					_ = p.cmd.Process.Kill()
					t.Errorf("worker %d of %d still running after 5 minutes\n%s", i, workers, tailString(p.stderr.String(), 3000))
				}
			}
			t.FailNow()
		}
		progressed := false
		for i, p := range procs {
			if finished[i] {
				continue
			}
			select {
			case err := <-p.done:
				progressed = true
				if err != nil && retries > 0 {
					retries--
					t.Logf("worker %d failed (restarted): %s", i, lastLine(p.stderr.String()))
					procs[i] = startPeer(t, spec, workers, i, extra...)
					continue
				}
				if err != nil {
					t.Fatalf("worker %d of %d: %v\n%s", i, workers, err, tailString(p.stderr.String(), 4000))
				}
				finished[i] = true
				left--
			default:
			}
		}
		if !progressed {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return landed
}

// TestWorkersKillRescale runs the kill test's pipeline as W = 3 worker
// processes while its files land in four batches, SIGKILLing random
// workers at random moments and restarting them, rescaling 3 -> 2 -> 5
// workers for the last batches, and drains: the committed outputs and side
// outputs must equal one uninterrupted single process's, row for row, the
// sink must hold exactly the committed files, and `floe verify` must find
// nothing wrong; on file://, on S3 (versitygw), and on S3 through the
// fault proxy failing 10% of requests.
func TestWorkersKillRescale(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process kill test")
	}
	seed := killSeed(t)
	t.Run("file", func(t *testing.T) {
		root := t.TempDir()
		fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
		workersKill(t, seed, killBackend{source: fu("events"), refState: fu("ref/state"), refSink: fu("ref/out"),
			killState: fu("w/state"), killSink: fu("w/out")}, fu("refsrc"), nil)
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Shared(t)
		u, err := url.Parse(srv.NewBucket(t))
		if err != nil {
			t.Fatal(err)
		}
		b := u.Host
		workersKill(t, seed+1, killBackend{source: srv.URL(b, "events"), refState: srv.URL(b, "ref/state"), refSink: srv.URL(b, "ref/out"),
			killState: srv.URL(b, "w/state"), killSink: srv.URL(b, "w/out")}, srv.URL(b, "refsrc"), nil)
	})
	t.Run("s3-faults", func(t *testing.T) {
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
		px.SetRandom(faultproxy.Random{P: 0.1, Seed: seed + 2, Kinds: faultproxy.AllKinds})
		via := func(prefix string) string { return s3test.Via(srv.URL(b, prefix), px.URL) }
		// The reference and the data go straight to the server; the
		// workers' state and sink go through the proxy.
		workersKill(t, seed+2, killBackend{source: srv.URL(b, "events"), refState: srv.URL(b, "ref/state"), refSink: srv.URL(b, "ref/out"),
			killState: via("w/state"), killSink: via("w/out")}, srv.URL(b, "refsrc"),
			func() {
				// The checks read what was committed, without faults.
				t.Logf("fault proxy: %d requests faulted", len(px.Log()))
				px.SetRandom(faultproxy.Random{})
			},
			// A stalled request is given up after 2 s and retried.
			"--request-timeout", "2s")
	})
}

// killSeed is the seed of a kill schedule: $FLOE_KILL_SEED to replay one,
// else the clock; logged.
func killSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(killSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", killSeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: %s=%d)", seed, killSeedEnv, seed)
	return seed
}

func workersKill(t *testing.T, seed uint64, be killBackend, refSource string, afterRuns func(), flags ...string) {
	ctx := context.Background()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(seed, 0x776f726b))
	// Reference: one process over the same batches (an epoch takes four
	// files, and every batch is a multiple of four, so the epochs are the
	// same however the runs fall).
	ref := newLanding(t)
	refSpec := workerSpec(t, dir, "w-ref", refSource, be.refState, be.refSink)
	batches := []int{12, 8, 12, 8}
	rescale := []int{3, 3, 2, 5} // workers per batch
	for i, n := range batches {
		ref.land(t, ctx, refSource, n)
		args := []string{"run", refSpec, "--log-format", "json"}
		if i == len(batches)-1 {
			args = append(args, "--drain")
		}
		runFloe(t, args...)
	}
	want, wantFiles := committedRows(t, ctx, refSpec, be.refSink)
	if len(want) == 0 {
		t.Fatal("reference produced no rows")
	}

	spec := workerSpec(t, dir, "w-run", be.source, be.killState, be.killSink)
	l := newLanding(t)
	kills := 0
	for i, n := range batches {
		l.land(t, ctx, be.source, n)
		extra := flags
		if i == len(batches)-1 {
			extra = append(slices.Clone(flags), "--drain")
		}
		kills += runWorkerRoundRetry(t, rng, spec, rescale[i], 3, 20, extra...)
	}
	t.Logf("%d kills landed over %d rounds", kills, len(batches))
	if afterRuns != nil {
		afterRuns()
	}
	if kills == 0 {
		t.Errorf("no kill landed on a running worker (seed %d)", seed)
	}
	got, gotFiles := committedRows(t, ctx, spec, be.killSink)
	missing, extra := multisetDiff(want, got)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("workers committed %d rows in %d files, one process %d rows in %d files: %d missing, %d extra\nmissing: %q\nextra: %q",
			len(got), gotFiles, len(want), wantFiles, len(missing), len(extra), firstN(missing, 10), firstN(extra, 10))
	}
	checkSideRows(t, ctx, be.refSink, be.killSink)
	// The sink holds exactly the committed files: what killed workers
	// wrote is either committed or gone.
	committed := map[string]bool{}
	base := strings.TrimSuffix(strings.SplitN(be.killSink, "?", 2)[0], "/") + "/"
	for _, line := range strings.Fields(runFloe(t, "outputs", spec).stdout) {
		committed[strings.TrimPrefix(line, base)] = true
	}
	for k := range listKeys(t, ctx, be.killSink) {
		if strings.HasPrefix(k, "part-") && !committed[k] {
			t.Errorf("sink file %s is not committed by any epoch (an orphan)", k)
		}
	}
	v := runFloe(t, "verify", spec)
	if !strings.Contains(v.stdout, " 0 problems") {
		t.Errorf("floe verify:\n%s", v.stdout)
	}
}

// TestWorkerLoneTimeout: a worker whose peers never start gives up after
// --worker-timeout with exit 2, naming the missing worker, and commits
// nothing.
func TestWorkerLoneTimeout(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	l := newLanding(t)
	l.land(t, ctx, fu("events"), 4)
	spec := workerSpec(t, root, "lone", fu("events"), fu("state"), fu("out"))
	cmd := floeCommand(t, "run", spec, "--workers", "2", "--worker", "1", "--worker-timeout", "2s", "--worker-takeover", "500ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 2 {
		t.Fatalf("lone worker: exit %d (%v), want 2\n%s", code, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "worker(s) 0") {
		t.Errorf("the error does not name the missing worker 0:\n%s", stderr.String())
	}
	t.Logf("gave up after %v: %s", time.Since(t0).Round(time.Millisecond), lastLine(stderr.String()))
	st := runFloe(t, "status", spec)
	if strings.Contains(st.stdout, "epoch 1") {
		t.Errorf("a lone worker committed an epoch:\n%s", st.stdout)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestWorkersJoin runs a two-source graph (bids joined with their auctions
// in 10 s windows, then bids and volume per category) as W = 3 workers
// with kills, and as one process: equal sinks row for row. The join's two
// inputs and the window after it each cross workers (three exchange
// rounds per epoch).
func TestWorkersJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx := context.Background()
	root := t.TempDir()
	abs, err := filepath.Abs("../../testdata/auctions")
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name string) string {
		y := fmt.Sprintf(`name: %s
sources:
  bids: {type: files, url: %q, format: jsonl, schema: {auction: int64, bidder: int64, price: int64, ts: timestamp},
         event_time: ts, max_files_per_epoch: 2, watermark: {max_out_of_orderness: 2s}}
  auctions: {type: files, url: %q, format: jsonl, schema: {id: int64, seller: int64, category: int64, ts: timestamp},
             event_time: ts, max_files_per_epoch: 2, watermark: {max_out_of_orderness: 2s}}
stages:
  - name: bid-auction
    inputs: [bids, auctions]
    join: {left_on: [auction], right_on: [id], window: {tumbling: 10s}}
  - name: per-category
    input: bid-auction
    window: {key: [category], tumbling: 10s, aggregates: {bids: "count()", volume: "sum(price)", top: "max(price)"}}
sinks:
  out: {input: per-category, type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 3}
`, name, filepath.Join(abs, "bids"), filepath.Join(abs, "auctions"), filepath.Join(root, name, "out"), filepath.Join(root, name, "state"))
		p := filepath.Join(root, name+".yaml")
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ref := spec("ref")
	runFloe(t, "run", ref, "--drain")
	want, _ := committedRows(t, ctx, ref, "file://"+filepath.Join(root, "ref", "out"))
	if len(want) == 0 {
		t.Fatal("reference produced no rows")
	}
	w := spec("w")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills := runWorkerRound(t, rng, w, 3, 2, "--drain")
	got, _ := committedRows(t, ctx, w, "file://"+filepath.Join(root, "w", "out"))
	if m, x := multisetDiff(want, got); len(m) > 0 || len(x) > 0 {
		t.Errorf("3 workers (%d kills) committed %d rows, one process %d: %d missing, %d extra\nmissing: %q\nextra: %q",
			kills, len(got), len(want), len(m), len(x), firstN(m, 5), firstN(x, 5))
	}
	t.Logf("%d rows equal; %d kills landed", len(got), kills)
	if v := runFloe(t, "verify", w); !strings.Contains(v.stdout, " 0 problems") {
		t.Errorf("floe verify:\n%s", v.stdout)
	}

	// The sample graph: dedup, join, window and top_n, two sinks. The
	// dedup's and the window's rows reach order-sensitive stages in an
	// order of their values, so every worker gathers them (Runner.gather).
	sample, err := os.ReadFile("../../testdata/pipelines/auctions-graph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	graph := func(name string) (string, string, string) {
		y := strings.ReplaceAll(string(sample), "../auctions", abs)
		y = strings.ReplaceAll(y, "../../out/", filepath.Join(root, name)+"/")
		y = strings.ReplaceAll(y, "../../.floe", filepath.Join(root, name, "state"))
		y = strings.ReplaceAll(y, "format: jsonl}", "format: parquet}")
		y = strings.ReplaceAll(y, "parallelism: 2}", "parallelism: 3}")
		p := filepath.Join(root, name+".yaml")
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p, "file://" + filepath.Join(root, name, "hot-categories"), "file://" + filepath.Join(root, name, "category-volume")
	}
	gref, refTop, refVol := graph("gref")
	runFloe(t, "run", gref, "--drain")
	gw, wTop, wVol := graph("gw")
	kills = runWorkerRound(t, rng, gw, 3, 2, "--drain")
	for _, c := range []struct{ sink, ref, got string }{{"out", refTop, wTop}, {"per-category", refVol, wVol}} {
		want, _ := committedRowsOf(t, ctx, gref, c.sink, c.ref)
		got, _ := committedRowsOf(t, ctx, gw, c.sink, c.got)
		if len(want) == 0 {
			t.Errorf("sample graph: sink %s: the reference has no rows", c.sink)
		}
		if m, x := multisetDiff(want, got); len(m) > 0 || len(x) > 0 {
			t.Errorf("sample graph, 3 workers (%d kills), sink %s: %d rows, one process %d: %d missing, %d extra\nmissing: %q\nextra: %q",
				kills, c.sink, len(got), len(want), len(m), len(x), firstN(m, 5), firstN(x, 5))
		}
	}
}

// TestWorkersGatherOrder: a dedup that keeps the last per-user window of
// each minute depends on the order its rows arrive in; one process hands
// the window's rows on in an order of their values. Three workers must
// keep the same last rows (Runner.gather), with kills.
func TestWorkersGatherOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx := context.Background()
	root := t.TempDir()
	src := "file://" + filepath.Join(root, "events")
	newLanding(t).land(t, ctx, src, 40)
	spec := func(name string) string {
		y := fmt.Sprintf(`name: %s
sources:
  events: {type: files, url: %q, format: jsonl,
           schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
           event_time: event_time, max_files_per_epoch: 4, watermark: {max_out_of_orderness: 5s}}
stages:
  - {name: per-user, input: events, window: {key: [user_id], tumbling: 1m, aggregates: {clicks: "count()"}}}
  - {name: first, input: per-user, dedup: {key: [window_start], keep: last, within: 1h}}
sinks:
  out: {input: first, type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 4}
`, name, src, "file://"+filepath.Join(root, name, "out"), "file://"+filepath.Join(root, name, "state"))
		p := filepath.Join(root, name+".yaml")
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ref := spec("ref")
	runFloe(t, "run", ref, "--drain")
	want, _ := committedRows(t, ctx, ref, "file://"+filepath.Join(root, "ref", "out"))
	if len(want) == 0 {
		t.Fatal("reference produced no rows")
	}
	w := spec("w")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	kills := runWorkerRound(t, rng, w, 3, 2, "--drain")
	got, _ := committedRows(t, ctx, w, "file://"+filepath.Join(root, "w", "out"))
	if m, x := multisetDiff(want, got); len(m) > 0 || len(x) > 0 {
		t.Errorf("3 workers (%d kills): %d rows, one process %d: %d missing, %d extra\nmissing: %q\nextra: %q",
			kills, len(got), len(want), len(m), len(x), firstN(m, 5), firstN(x, 5))
	}
	t.Logf("%d last rows equal; %d kills landed", len(got), kills)
}
