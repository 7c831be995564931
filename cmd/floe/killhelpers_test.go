package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// reexecEnv, when set to "1", makes the test binary behave as the floe
// command: the kill test starts itself as `floe` instead of building a
// separate binary.
const reexecEnv = "FLOE_TEST_REEXEC_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "1" {
		installPauseHook()
		code := run(os.Args[1:], os.Stdout, os.Stderr)
		if f := os.Getenv(peakRSSEnv); f != "" {
			writePeakRSS(f)
		}
		os.Exit(code)
	}
	s3test.Main(m)
}

// floeBinary returns the path of this test binary, which runs as floe when
// reexecEnv is set.
func floeBinary(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("test binary path: %v", err)
	}
	return exe
}

// floeCommand returns a not yet started `floe args...` subprocess.
func floeCommand(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(floeBinary(t), args...)
	cmd.Env = append(os.Environ(), reexecEnv+"=1")
	return cmd
}

// floeResult is a finished floe subprocess.
type floeResult struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// runFloe runs `floe args...` to completion and fails t unless it exits 0.
func runFloe(t testing.TB, args ...string) floeResult {
	t.Helper()
	cmd := floeCommand(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	res := floeResult{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(t0)}
	if err != nil {
		t.Fatalf("floe %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, res.stdout, tailString(res.stderr, 4000))
	}
	return res
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// killData describes the generated input of the kill test.
var killData = datagen.Options{
	Rows:              60000,
	Files:             40,
	Users:             200,
	Span:              40 * time.Minute,
	Seed:              7,
	Format:            datagen.JSONL,
	OutOfOrder:        3 * time.Second,
	LateFraction:      0.005,
	MalformedFraction: 0.001,
}

// putDataset writes the kill test's data set into the store at url.
func putDataset(t testing.TB, ctx context.Context, url string) {
	t.Helper()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("open source %s: %v", url, err)
	}
	defer st.Close()
	err = datagen.Generate(killData, func(name string, data []byte) error {
		_, err := st.Put(ctx, name, data, store.PutOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("generate data set: %v", err)
	}
}

// writeSpec writes a pipeline spec over the given absolute URLs into dir and
// returns its path.
func writeSpec(t testing.TB, dir, name, source, state, sink string) string {
	t.Helper()
	y := fmt.Sprintf(`name: %s
source: {type: files, url: %q, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2, late_url: %q,
         watermark: {max_out_of_orderness: 5s, idle_timeout: 1m}}
operators:
  - filter: "bytes > 0"
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 30s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2, max_parallelism: 128, retain_epochs: 3}
`, name, source, lateOf(sink), sink, state)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatalf("write spec: %v", err)
	}
	return p
}

// committedRows runs `floe outputs SPEC`, checks that no file is listed twice
// and that every listed file exists and parses, and returns the sorted
// multiset of rows (one string per row) and the number of files.
func committedRows(t testing.TB, ctx context.Context, specPath, sinkURL string) ([]string, int) {
	t.Helper()
	return committedRowsOf(t, ctx, specPath, "", sinkURL)
}

// committedRowsOf is committedRows of one named sink of a graph pipeline
// ("" for all).
func committedRowsOf(t testing.TB, ctx context.Context, specPath, sinkName, sinkURL string) ([]string, int) {
	t.Helper()
	args := []string{"outputs", specPath}
	if sinkName != "" {
		args = append(args, "--sink", sinkName)
	}
	res := runFloe(t, args...)
	base := sinkURL
	if i := strings.IndexByte(base, '?'); i >= 0 {
		base = base[:i]
	}
	base = strings.TrimSuffix(base, "/") + "/"
	sink, err := store.Open(ctx, sinkURL)
	if err != nil {
		t.Fatalf("open sink %s: %v", sinkURL, err)
	}
	defer sink.Close()
	seen := map[string]bool{}
	var rows []string
	lines := strings.Fields(res.stdout)
	for _, line := range lines {
		if seen[line] {
			t.Errorf("floe outputs lists %s twice", line)
			continue
		}
		seen[line] = true
		key, ok := strings.CutPrefix(line, base)
		if !ok {
			t.Errorf("floe outputs lists %s, outside the sink %s", line, base)
			continue
		}
		data, _, err := sink.Get(ctx, key)
		if err != nil {
			t.Errorf("committed output %s: %v", line, err)
			continue
		}
		schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
		if err != nil {
			t.Errorf("committed output %s does not parse: %v", line, err)
			continue
		}
		for _, rec := range recs {
			for i := range int(rec.NumRows()) {
				var b strings.Builder
				for c, f := range schema.Fields() {
					if c > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(f.Name + "=" + rec.Column(c).ValueStr(i))
				}
				rows = append(rows, b.String())
			}
			rec.Release()
		}
	}
	slices.Sort(rows)
	return rows, len(lines)
}

// multisetDiff returns the rows of want missing from got and the rows of got
// not in want (with multiplicity); both inputs are sorted.
func multisetDiff(want, got []string) (missing, extra []string) {
	i, j := 0, 0
	for i < len(want) && j < len(got) {
		switch {
		case want[i] == got[j]:
			i++
			j++
		case want[i] < got[j]:
			missing = append(missing, want[i])
			i++
		default:
			extra = append(extra, got[j])
			j++
		}
	}
	missing = append(missing, want[i:]...)
	extra = append(extra, got[j:]...)
	return missing, extra
}

// listKeys returns every key under url with its size, for before/after
// comparisons.
func listKeys(t testing.TB, ctx context.Context, url string) map[string]int64 {
	t.Helper()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	defer st.Close()
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Fatalf("list %s: %v", url, err)
	}
	out := make(map[string]int64, len(objs))
	for _, o := range objs {
		out[o.Key] = o.Size
	}
	return out
}

// firstN returns at most n elements of s, for failure messages.
func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// lateOf returns the late-rows URL the kill test uses beside a sink URL.
func lateOf(sink string) string {
	q := ""
	if i := strings.IndexByte(sink, '?'); i >= 0 {
		sink, q = sink[:i], sink[i:]
	}
	return strings.TrimSuffix(sink, "/") + "-late" + q
}

// sideRows returns the sorted rows of every late-rows file (beside the
// sink) and every rejected-rows file (under the sink's _rejected/). After a
// completed run every such file must be a committed one: orphans of killed
// attempts would show up here as duplicate rows.
func sideRows(t testing.TB, ctx context.Context, sinkURL string) (late, rejected []string) {
	t.Helper()
	ls, err := store.Open(ctx, lateOf(sinkURL))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	objs, err := ls.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		data, _, err := ls.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("late file %s: %v", o.Key, err)
		}
		for _, rec := range recs {
			for i := range int(rec.NumRows()) {
				var b strings.Builder
				for c, f := range schema.Fields() {
					b.WriteString(f.Name + "=" + rec.Column(c).ValueStr(i) + " ")
				}
				late = append(late, b.String())
			}
		}
	}
	sink, err := store.Open(ctx, sinkURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	robjs, err := sink.List(ctx, "_rejected/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range robjs {
		data, _, err := sink.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if line != "" {
				rejected = append(rejected, line)
			}
		}
	}
	slices.Sort(late)
	slices.Sort(rejected)
	return late, rejected
}

// killRuns runs `floe run spec --drain` again and again, SIGKILLing each
// run after a delay from a schedule fitted to the reference run (it took
// refElapsed to commit refHead epochs; a run with nothing new took
// idleElapsed), until wantKills kills landed; then it runs spec to
// completion and logs what the kills hit. A run that fails rather than
// being killed fails t.
func killRuns(t *testing.T, seed uint64, wantKills int, spec string, refElapsed, idleElapsed time.Duration, refHead int64) {
	t.Helper()
	sched := &killSchedule{
		rng:     rand.New(rand.NewPCG(seed, 0x6b696c6c)),
		startup: idleElapsed,
		perEp:   max(refElapsed-idleElapsed, time.Millisecond) / time.Duration(max(refHead, 1)),
	}
	var (
		kills, attempts                      int
		killedStartup, killedMid, killedDone int
		committedByKilled                    int
		head                                 int64
		maxDelay                             time.Duration
	)
	t0 := time.Now()
	for kills < wantKills {
		attempts++
		if attempts > 10*wantKills {
			t.Fatalf("only %d of %d kills landed in %d attempts (seed %d)", kills, wantKills, attempts, seed)
		}
		delay := sched.next(refHead-head, wantKills-kills)
		maxDelay = max(maxDelay, delay)
		cmd := floeCommand(t, "run", spec, "--drain", "--log-format", "json")
		var stdout bytes.Buffer
		stderr := &commitClock{start: time.Now()} // set before Start: the copier goroutine reads it
		cmd.Stdout, cmd.Stderr = &stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start floe: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		timer := time.NewTimer(delay)
		var err error
		killed := false
		select {
		case err = <-exited:
			timer.Stop()
		case <-timer.C:
			_ = cmd.Process.Kill()
			err = <-exited
			killed = wasKilled(err)
		}
		sched.observe(stderr.commits, killed, delay)
		if !killed && err != nil {
			t.Fatalf("run %d (delay %v) failed after %d kills (seed %d): %v\nstdout:\n%s\nstderr:\n%s",
				attempts, delay, kills, seed, err, stdout.String(), tailString(stderr.buf.String(), 4000))
		}
		if killed {
			kills++
			committedByKilled += len(stderr.commits)
			switch {
			case head >= refHead:
				killedDone++
			case len(stderr.commits) == 0:
				killedStartup++
			default:
				killedMid++
			}
		}
		for _, c := range stderr.commits {
			head = max(head, c.epoch)
		}
	}
	final := runFloe(t, "run", spec, "--drain", "--log-format", "json")
	t.Logf("%d kills in %d runs over %v (delays up to %v): %d before the run's first commit, %d after it, %d once caught up; killed runs committed %d epochs; final run: %s",
		kills, attempts, time.Since(t0).Round(time.Millisecond), maxDelay.Round(time.Millisecond),
		killedStartup, killedMid, killedDone, committedByKilled, strings.SplitN(final.stdout, "\n", 2)[0])
	if killedMid == 0 {
		t.Logf("no kill landed between two commits of a run (seed %d): the schedule missed the middle of the run", seed)
	}
}

// checkSideRows checks that the late and rejected rows of the sink at got
// equal those of the reference sink at ref, each exactly once (orphans of
// killed attempts would duplicate them), and that the reference has both.
func checkSideRows(t testing.TB, ctx context.Context, ref, got string) {
	t.Helper()
	wantLate, wantRej := sideRows(t, ctx, ref)
	gotLate, gotRej := sideRows(t, ctx, got)
	if len(wantLate) == 0 || len(wantRej) == 0 {
		t.Errorf("reference has %d late and %d rejected rows; the data set should produce both", len(wantLate), len(wantRej))
	}
	for _, c := range []struct {
		what      string
		want, got []string
	}{{"late", wantLate, gotLate}, {"rejected", wantRej, gotRej}} {
		if m, x := multisetDiff(c.want, c.got); len(m) > 0 || len(x) > 0 {
			t.Errorf("%s rows after kills: %d missing, %d extra (of %d); extra (first 5): %q", c.what, len(m), len(x), len(c.want), firstN(x, 5))
		}
	}
}
