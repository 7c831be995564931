//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// stopSelf stops this process (the pause point of pauseEnv).
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

// processStopped reports whether pid is stopped by a signal (state T in
// /proc/<pid>/stat).
func processStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] == 'T' || s[i+2] == 't'
}

// pauseAt is the environment entry that stops a worker just before its
// first write of a state key containing every one of subs.
func pauseAt(subs ...string) []string { return []string{pauseEnv + "=" + strings.Join(subs, ",")} }

// waitStopped waits until p has stopped itself at its pause point.
func waitStopped(t *testing.T, p *workerProc) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !processStopped(p.cmd.Process.Pid) {
		select {
		case err := <-p.done:
			t.Fatalf("worker %d exited (%v) before its pause point\n%s", p.index, err, tailString(p.stderr.String(), 3000))
		default:
		}
		if time.Now().After(deadline) {
			_ = p.cmd.Process.Kill()
			t.Fatalf("worker %d did not reach its pause point in 3 minutes\n%s", p.index, tailString(p.stderr.String(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitCodeOf returns a finished process's exit code (-1: killed by a
// signal).
func exitCodeOf(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -2
}

// waitExit waits up to d for p to exit and returns its exit code.
func waitExit(t *testing.T, p *workerProc, d time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		return exitCodeOf(err)
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("worker %d still running after %v\n%s", p.index, d, tailString(p.stderr.String(), 3000))
	}
	return 0
}

// killProc SIGKILLs p and waits for it.
func killProc(p *workerProc) {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitKey waits until a key under url contains every one of subs.
func waitKey(t *testing.T, ctx context.Context, url string, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		for k := range listKeys(t, ctx, url) {
			ok := true
			for _, s := range subs {
				ok = ok && strings.Contains(k, s)
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no key under %s contains %q after 3 minutes", url, subs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fenceSnap is what a stale worker must leave as it was.
type fenceSnap struct {
	latest            []byte
	state, sink, late map[string]int64
}

func takeSnap(t *testing.T, ctx context.Context, stateURL, pipeline, sinkURL string) fenceSnap {
	t.Helper()
	st, err := store.Open(ctx, stateURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	latest, _, err := st.Get(ctx, pipeline+"/_latest.json")
	if err != nil {
		t.Fatalf("read the head: %v", err)
	}
	return fenceSnap{latest: latest, state: listKeys(t, ctx, stateURL), sink: hashKeys(t, ctx, sinkURL), late: hashKeys(t, ctx, lateOf(sinkURL))}
}

// hashKeys returns every key under url with a hash of its bytes (a
// rewrite of the same size shows).
func hashKeys(t *testing.T, ctx context.Context, url string) map[string]int64 {
	t.Helper()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string]int64{}
	for k := range listKeys(t, ctx, url) {
		data, _, err := st.Get(ctx, k)
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		h := fnv.New64a()
		h.Write(data)
		out[k] = int64(h.Sum64())
	}
	return out
}

// checkUntouched compares the snapshots taken before a stale worker was
// resumed and after it exited: the same head, the same sink and late files
// (none added, removed or rewritten), and in the state nothing deleted or
// rewritten and nothing added outside allowed: the directory of the stale
// epoch (which no committed manifest references: retention's), and what
// else a scenario expects.
func checkUntouched(t *testing.T, before, after fenceSnap, allowed ...string) {
	t.Helper()
	if string(before.latest) != string(after.latest) {
		t.Errorf("the stale worker moved the head:\nbefore %s\nafter  %s", before.latest, after.latest)
	}
	for _, c := range []struct {
		what          string
		before, after map[string]int64
	}{{"sink", before.sink, after.sink}, {"late rows", before.late, after.late}} {
		if !maps.Equal(c.before, c.after) {
			t.Errorf("the stale worker changed the %s: %s", c.what, keysDiff(c.before, c.after))
		}
	}
	isAllowed := func(k string) bool {
		return slices.ContainsFunc(allowed, func(a string) bool { return strings.Contains(k, a) })
	}
	for k, n := range before.state {
		if m, ok := after.state[k]; (!ok || m != n) && !isAllowed(k) {
			t.Errorf("the stale worker deleted or rewrote state key %s", k)
		}
	}
	var added []string
	for k := range after.state {
		if _, ok := before.state[k]; !ok {
			if !isAllowed(k) {
				t.Errorf("the stale worker wrote state key %s, outside %q", k, allowed)
			}
			added = append(added, k)
		}
	}
	slices.Sort(added)
	t.Logf("the stale worker added %d state key(s): %q", len(added), added)
}

func keysDiff(before, after map[string]int64) string {
	var b strings.Builder
	for k, n := range after {
		if m, ok := before[k]; !ok {
			fmt.Fprintf(&b, "\n  added %s", k)
		} else if m != n {
			fmt.Fprintf(&b, "\n  rewritten %s", k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			fmt.Fprintf(&b, "\n  deleted %s", k)
		}
	}
	return b.String()
}

// checkOutcome checks the pipeline's committed result against the
// reference single process's: the same rows and late and rejected rows,
// each exactly once, a sink holding only committed files, verify clean.
func checkOutcome(t *testing.T, ctx context.Context, refSpec, refSink, spec, sink string) {
	t.Helper()
	want, _ := committedRows(t, ctx, refSpec, refSink)
	if len(want) == 0 {
		t.Fatal("reference produced no rows")
	}
	got, files := committedRows(t, ctx, spec, sink)
	if m, x := multisetDiff(want, got); len(m) > 0 || len(x) > 0 {
		t.Errorf("workers committed %d rows in %d files, one process %d: %d missing, %d extra\nmissing: %q\nextra: %q",
			len(got), files, len(want), len(m), len(x), firstN(m, 5), firstN(x, 5))
	}
	checkSideRows(t, ctx, refSink, sink)
	committed := map[string]bool{}
	base := strings.TrimSuffix(strings.SplitN(sink, "?", 2)[0], "/") + "/"
	for _, line := range strings.Fields(runFloe(t, "outputs", spec).stdout) {
		committed[strings.TrimPrefix(line, base)] = true
	}
	for k := range listKeys(t, ctx, sink) {
		if strings.HasPrefix(k, "part-") && !committed[k] {
			t.Errorf("sink file %s is not committed by any epoch (an orphan a reader of the folder sees)", k)
		}
	}
	if v := runFloe(t, "verify", spec); !strings.Contains(v.stdout, " 0 problems") {
		t.Errorf("floe verify:\n%s", v.stdout)
	}
}

// fenceCase is one fencing scenario over a backend: url maps a folder name
// to a store URL of the backend.
type fenceCase struct {
	url func(string) string
	dir string
}

// setup lands n files of the kill test's data set, runs the reference
// single process over them and writes the workers' spec.
func (c fenceCase) setup(t *testing.T, ctx context.Context, name string, n int) (spec, state, sink, refSpec, refSink string) {
	t.Helper()
	src := c.url(name + "/events")
	newLanding(t).land(t, ctx, src, n)
	refSink = c.url(name + "/ref/out")
	refSpec = workerSpec(t, c.dir, name+"-ref", src, c.url(name+"/ref/state"), refSink)
	runFloe(t, "run", refSpec)
	state, sink = c.url(name+"/w/state"), c.url(name+"/w/out")
	spec = workerSpec(t, c.dir, name, src, state, sink)
	return spec, state, sink, refSpec, refSink
}

// TestWorkersFence: a stale worker can never commit or corrupt output, on
// file:// and on S3 (versitygw). Workers stop themselves at an exact step
// (pauseEnv, SIGSTOP) and are resumed (SIGCONT) once the pipeline has
// moved on without them.
func TestWorkersFence(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Run("file", func(t *testing.T) {
		root := t.TempDir()
		workersFence(t, fenceCase{dir: root, url: func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }})
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Shared(t)
		u, err := url.Parse(srv.NewBucket(t))
		if err != nil {
			t.Fatal(err)
		}
		workersFence(t, fenceCase{dir: t.TempDir(), url: func(p string) string { return srv.URL(u.Host, p) }})
	})
}

func workersFence(t *testing.T, c fenceCase) {
	t.Run("older-generation", func(t *testing.T) { fenceOlderGeneration(t, c) })
	t.Run("zombie-attempt", func(t *testing.T) { fenceZombie(t, c) })
	t.Run("zombie-same-epoch", func(t *testing.T) { fenceZombieSameEpoch(t, c) })
	t.Run("two-jobs", func(t *testing.T) { fenceTwoJobs(t, c) })
	t.Run("two-jobs-same-topology", func(t *testing.T) { fenceTwoJobsSame(t, c) })
	t.Run("outputs-then-rescale", func(t *testing.T) { fenceOutputsThenRescale(t, c) })
}

// The pause point: worker w's exchange object of the window's round in
// epoch 2 of generation 1 (round 1, which carries the first keyed stage's
// rows with the event times), written after it decoded its files and
// before it writes any output.
func windowRound(w int) []string {
	return []string{"gen=000001/epoch=0000000002/", fmt.Sprintf("/x/r=01/w=%04d.bin", w)}
}

const staleEpoch = "gen=000001/epoch=0000000002/"

// fenceOlderGeneration: W = 3 run epoch 1; in epoch 2 worker 2 stops
// before its window-round exchange object, its peers are SIGKILLed at the
// round's barrier (the Job deleted for a rescale), and W = 2 (generation
// 2) runs epoch 2 to completion. Then the stale worker resumes with its
// old W and index: its window-round barrier completes (its peers' objects are
// there: the head epoch's exchange objects are kept), and it must exit 3
// (fenced) without writing an output, leaving head, sinks and verify as
// they were.
func fenceOlderGeneration(t *testing.T, c fenceCase) {
	ctx := context.Background()
	spec, state, sink, refSpec, refSink := c.setup(t, ctx, "fence-gen", 8)
	p0, p1 := startPeer(t, spec, 3, 0), startPeer(t, spec, 3, 1)
	stale := startPeerEnv(t, pauseAt(windowRound(2)...), spec, 3, 2)
	waitStopped(t, stale)
	waitKey(t, ctx, state, windowRound(0)...)
	waitKey(t, ctx, state, windowRound(1)...)
	killProc(p0)
	killProc(p1)
	runWorkerRound(t, rand.New(rand.NewPCG(1, 2)), spec, 2, 0)
	before := takeSnap(t, ctx, state, "fence-gen", sink)
	if !strings.Contains(string(before.latest), `"generation": 2`) && !strings.Contains(string(before.latest), `"generation":2`) {
		t.Fatalf("the rescaled run did not commit generation 2: %s", before.latest)
	}
	_ = syscall.Kill(stale.cmd.Process.Pid, syscall.SIGCONT)
	code := waitExit(t, stale, 3*time.Minute)
	t.Logf("stale worker 2 of 3 (generation 1): exit %d: %s", code, lastLine(stale.stderr.String()))
	if code != 3 || !strings.Contains(stale.stderr.String(), "fenced") {
		t.Errorf("stale worker of generation 1: exit %d, want 3 (fenced)\n%s", code, tailString(stale.stderr.String(), 3000))
	}
	checkUntouched(t, before, takeSnap(t, ctx, state, "fence-gen", sink), staleEpoch)
	checkOutcome(t, ctx, refSpec, refSink, spec, sink)
}

// fenceZombie: W = 3; in epoch 2 worker 2 stops before its window-round
// exchange object, and a replacement with the same index (as a Job
// replaces a pod) finishes epochs 2 and 3 with the peers. Then the zombie
// resumes: its window-round barrier finds the peers' objects gone (retention
// deleted epoch 2's once the head passed it) and the epoch committed
// (ErrCommitted), and it must exit 3 (fenced: another process of its
// index committed the epoch), having written only its exchange object,
// under epoch 2's attempt.
func fenceZombie(t *testing.T, c fenceCase) {
	ctx := context.Background()
	spec, state, sink, refSpec, refSink := c.setup(t, ctx, "fence-zombie", 12)
	p0, p1 := startPeer(t, spec, 3, 0), startPeer(t, spec, 3, 1)
	zombie := startPeerEnv(t, pauseAt(windowRound(2)...), spec, 3, 2)
	waitStopped(t, zombie)
	p2 := startPeer(t, spec, 3, 2)
	for _, p := range []*workerProc{p0, p1, p2} {
		if code := waitExit(t, p, 3*time.Minute); code != 0 {
			t.Fatalf("worker %d: exit %d\n%s", p.index, code, tailString(p.stderr.String(), 3000))
		}
	}
	before := takeSnap(t, ctx, state, "fence-zombie", sink)
	if !strings.Contains(string(before.latest), "epoch=0000000003") {
		t.Fatalf("the replacement and its peers did not commit epoch 3: %s", before.latest)
	}
	_ = syscall.Kill(zombie.cmd.Process.Pid, syscall.SIGCONT)
	code := waitExit(t, zombie, 3*time.Minute)
	t.Logf("zombie worker 2 (epoch 2): exit %d: %s", code, lastLine(zombie.stderr.String()))
	if code != 3 || !strings.Contains(zombie.stderr.String(), "fenced") {
		t.Errorf("zombie of epoch 2: exit %d, want 3 (fenced)\n%s", code, tailString(zombie.stderr.String(), 3000))
	}
	checkUntouched(t, before, takeSnap(t, ctx, state, "fence-zombie", sink), staleEpoch)
	checkOutcome(t, ctx, refSpec, refSink, spec, sink)
}

// fenceTwoJobs: Job A (W = 2) runs epoch 1; in epoch 2 its worker 1
// stops before its window-round exchange object while its worker 0 waits at
// that barrier. Job B of the same spec with W = 3 (generation 2) runs to
// completion meanwhile. When A's worker 1 resumes, A's round completes and
// both of A's workers must exit 3 (fenced), writing no output.
func fenceTwoJobs(t *testing.T, c fenceCase) {
	ctx := context.Background()
	spec, state, sink, refSpec, refSink := c.setup(t, ctx, "fence-jobs", 8)
	// A's worker 0 waits at the barrier while B runs: no timeout then.
	a0 := startPeer(t, spec, 2, 0, "--worker-timeout", "10m")
	a1 := startPeerEnv(t, pauseAt(windowRound(1)...), spec, 2, 1, "--worker-timeout", "10m")
	waitStopped(t, a1)
	waitKey(t, ctx, state, windowRound(0)...)
	runWorkerRound(t, rand.New(rand.NewPCG(3, 4)), spec, 3, 0)
	before := takeSnap(t, ctx, state, "fence-jobs", sink)
	_ = syscall.Kill(a1.cmd.Process.Pid, syscall.SIGCONT)
	for _, p := range []*workerProc{a1, a0} {
		code := waitExit(t, p, 3*time.Minute)
		t.Logf("job A worker %d of 2: exit %d: %s", p.index, code, lastLine(p.stderr.String()))
		if code != 3 || !strings.Contains(p.stderr.String(), "fenced") {
			t.Errorf("job A worker %d: exit %d, want 3 (fenced)\n%s", p.index, code, tailString(p.stderr.String(), 3000))
		}
	}
	checkUntouched(t, before, takeSnap(t, ctx, state, "fence-jobs", sink), staleEpoch)
	checkOutcome(t, ctx, refSpec, refSink, spec, sink)
}

// fenceZombieSameEpoch is fenceZombie where the replacement and its peers
// commit epoch 2 only (the input ends there), so the zombie's window-round
// barrier completes when it resumes (the head epoch's exchange objects are
// kept) and the fence passes (the pointer names its own attempt: one epoch
// has one attempt per generation). What keeps it harmless is that it
// redoes the same work under the same attempt: every object it writes
// exists with the same bytes (create-if-absent, compared), its part and
// the manifest exist, and the pointer already names the epoch. It then
// takes part in epoch 3 like any worker, finds no input and exits 0.
func fenceZombieSameEpoch(t *testing.T, c fenceCase) {
	ctx := context.Background()
	spec, state, sink, refSpec, refSink := c.setup(t, ctx, "fence-zombie2", 8)
	p0, p1 := startPeer(t, spec, 3, 0), startPeer(t, spec, 3, 1)
	zombie := startPeerEnv(t, pauseAt(windowRound(2)...), spec, 3, 2)
	waitStopped(t, zombie)
	p2 := startPeer(t, spec, 3, 2)
	for _, p := range []*workerProc{p0, p1, p2} {
		if code := waitExit(t, p, 3*time.Minute); code != 0 {
			t.Fatalf("worker %d: exit %d\n%s", p.index, code, tailString(p.stderr.String(), 3000))
		}
	}
	before := takeSnap(t, ctx, state, "fence-zombie2", sink)
	if !strings.Contains(string(before.latest), "gen=000001/epoch=0000000002/") {
		t.Fatalf("the replacement and its peers did not commit epoch 2: %s", before.latest)
	}
	_ = syscall.Kill(zombie.cmd.Process.Pid, syscall.SIGCONT)
	code := waitExit(t, zombie, 3*time.Minute)
	t.Logf("zombie worker 2 (epoch 2, the head): exit %d: %s", code, lastLine(zombie.stderr.String()))
	if code != 0 {
		t.Errorf("zombie of the head epoch: exit %d, want 0 (it redid the committed epoch's work with the same bytes)\n%s", code, tailString(zombie.stderr.String(), 3000))
	}
	redid := false
	for _, line := range strings.Split(zombie.stderr.String(), "\n") {
		redid = redid || strings.Contains(line, `"msg":"epoch committed"`) && strings.Contains(line, `"epoch":2,`)
	}
	if !redid {
		t.Errorf("the zombie did not go through epoch 2's commit (its same-bytes path)\n%s", tailString(zombie.stderr.String(), 3000))
	}
	// Its idle note of epoch 3 (a plain write, the latest look wins).
	checkUntouched(t, before, takeSnap(t, ctx, state, "fence-zombie2", sink), staleEpoch, "gen=000001/epoch=0000000003/_idle.json")
	checkOutcome(t, ctx, refSpec, refSink, spec, sink)
}

// fenceTwoJobsSame: two Jobs of the same spec and W = 3 started together.
// Nothing tells them apart (the same generation, decisions and attempts),
// so they run as one Job with two processes per index: each epoch is
// committed once, whichever process writes first; a process whose epoch
// was committed without its part exits 3, one that redid the work exits 0.
// The result must be exactly one process's.
func fenceTwoJobsSame(t *testing.T, c fenceCase) {
	ctx := context.Background()
	spec, _, sink, refSpec, refSink := c.setup(t, ctx, "fence-twins", 12)
	var procs []*workerProc
	for range 2 {
		for i := range 3 {
			procs = append(procs, startPeer(t, spec, 3, i))
		}
	}
	codes := map[int]int{}
	for j, p := range procs {
		code := waitExit(t, p, 5*time.Minute)
		codes[code]++
		if code != 0 && code != 3 {
			t.Errorf("job %c worker %d: exit %d, want 0 or 3\n%s", 'A'+j/3, p.index, code, tailString(p.stderr.String(), 3000))
		}
	}
	t.Logf("exit codes of the 6 processes: %v", codes)
	checkOutcome(t, ctx, refSpec, refSink, spec, sink)
}

// fenceOutputsThenRescale: W = 3 run epoch 1; in epoch 2 every worker
// writes its outputs (they passed the fence), and worker 2 stops just
// after, before its first state file. Its peers are SIGKILLed while they
// wait for its part, and W = 2 (generation 2) runs epoch 2 again under its
// own attempt. Generation 1's outputs of epoch 2 can never be committed:
// worker 0 of the W = 2 run sweeps them at the end of its run (before, no
// worker-mode run swept the sinks, so they stayed in the folder for good).
// The stale worker then resumes and writes its state, late rows and part
// under its dead attempt (it passed the fence before the rescale: the race
// the sweep is for); waiting for peers that never come, it finds the newer
// generation and must exit 3. The next W = 2 run commits nothing new and
// its worker 0 sweeps those late rows: head, sink and late rows end as the
// W = 2 run left them.
func fenceOutputsThenRescale(t *testing.T, c fenceCase) {
	ctx := context.Background()
	spec, state, sink, refSpec, refSink := c.setup(t, ctx, "fence-out", 8)
	p0, p1 := startPeer(t, spec, 3, 0), startPeer(t, spec, 3, 1)
	stale := startPeerEnv(t, pauseAt(staleEpoch, ".parquet"), spec, 3, 2)
	waitStopped(t, stale)
	waitKey(t, ctx, sink, "part-g000001-e0000000002")
	killProc(p0)
	killProc(p1)
	orphans := 0
	for k := range listKeys(t, ctx, sink) {
		if strings.Contains(k, "part-g000001-e0000000002") {
			orphans++
		}
	}
	t.Logf("generation 1 left %d output file(s) of epoch 2 before the rescale", orphans)
	runWorkerRound(t, rand.New(rand.NewPCG(3, 4)), spec, 2, 0)
	for k := range listKeys(t, ctx, sink) {
		if strings.Contains(k, "part-g000001-e0000000002") {
			t.Errorf("after the W = 2 run, generation 1's uncommitted output %s is still in the sink", k)
		}
	}
	before := takeSnap(t, ctx, state, "fence-out", sink)
	_ = syscall.Kill(stale.cmd.Process.Pid, syscall.SIGCONT)
	code := waitExit(t, stale, 3*time.Minute)
	t.Logf("stale worker 2 of 3 (generation 1, after its outputs): exit %d: %s", code, lastLine(stale.stderr.String()))
	if code != 3 {
		t.Errorf("stale worker of generation 1: exit %d, want 3 (fenced)\n%s", code, tailString(stale.stderr.String(), 3000))
	}
	runWorkerRound(t, rand.New(rand.NewPCG(5, 6)), spec, 2, 0)
	// The next run may record its idle epoch (_idle.json) anew.
	checkUntouched(t, before, takeSnap(t, ctx, state, "fence-out", sink), staleEpoch, "/_idle.json")
	checkOutcome(t, ctx, refSpec, refSink, spec, sink)
}
