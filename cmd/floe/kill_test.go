package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/s3test"
)

// killSeedEnv replays a kill schedule: FLOE_KILL_SEED=<seed> go test -run TestKill ./cmd/floe
const killSeedEnv = "FLOE_KILL_SEED"

// killBackend names the URLs of one kill test: a shared source and two
// separate state/sink locations, one for the reference run, one for the
// killed runs.
type killBackend struct {
	source              string
	refState, refSink   string
	killState, killSink string
}

// TestKillRestart runs `floe run --drain` as a real process, SIGKILLs it at
// seeded random moments (at least 20 times, 5 under -short), restarts it
// each time, and checks that the union of committed outputs equals that of
// one uninterrupted run row for row, on file:// and on S3 (versitygw).
func TestKillRestart(t *testing.T) {
	seed := killSeed(t)
	kills := 20
	if testing.Short() {
		kills = 5
	}
	t.Run("file", func(t *testing.T) {
		root := t.TempDir()
		fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
		killRestart(t, seed, kills, killBackend{
			source:   fu("events"),
			refState: fu("ref/state"), refSink: fu("ref/out"),
			killState: fu("kill/state"), killSink: fu("kill/out"),
		})
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Shared(t)
		u, err := url.Parse(srv.NewBucket(t))
		if err != nil {
			t.Fatal(err)
		}
		b := u.Host
		killRestart(t, seed+1, kills, killBackend{
			source:   srv.URL(b, "events"),
			refState: srv.URL(b, "ref/state"), refSink: srv.URL(b, "ref/out"),
			killState: srv.URL(b, "kill/state"), killSink: srv.URL(b, "kill/out"),
		})
	})
}

func killRestart(t *testing.T, seed uint64, wantKills int, be killBackend) {
	ctx := context.Background()
	dir := t.TempDir()
	putDataset(t, ctx, be.source)
	refSpec := writeSpec(t, dir, "kill-ref", be.source, be.refState, be.refSink)
	killSpec := writeSpec(t, dir, "kill-run", be.source, be.killState, be.killSink)

	// Reference: one uninterrupted run.
	ref := runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	if !strings.Contains(ref.stdout, "committed epochs") {
		t.Fatalf("reference run committed nothing:\n%s", ref.stdout)
	}
	idle := runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	if !strings.Contains(idle.stdout, "nothing new") {
		t.Fatalf("second reference run: want \"nothing new\", got:\n%s", idle.stdout)
	}
	want, wantFiles := committedRows(t, ctx, refSpec, be.refSink)
	if len(want) == 0 {
		t.Fatal("reference run produced no rows")
	}
	refHead := lastEpoch(ref.stderr)
	t.Logf("reference: %v to commit epochs up to %d, %d output files, %d rows; a no-op run takes %v",
		ref.elapsed.Round(time.Millisecond), refHead, wantFiles, len(want), idle.elapsed.Round(time.Millisecond))

	// The kill schedule adapts to the machine: it estimates the start-up
	// cost (process start, recovery, restore, the first list) and the cost
	// of one epoch from the reference and from the commit times of every
	// run, and spreads the kills over the epochs that remain.
	killRuns(t, seed, wantKills, killSpec, ref.elapsed, idle.elapsed, refHead)

	got, gotFiles := committedRows(t, ctx, killSpec, be.killSink)
	missing, extra := multisetDiff(want, got)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("killed runs committed %d rows in %d files, the uninterrupted run %d rows in %d files: %d missing, %d extra\nmissing (first 10): %q\nextra (first 10): %q",
			len(got), gotFiles, len(want), wantFiles, len(missing), len(extra), firstN(missing, 10), firstN(extra, 10))
	}

	// Side outputs: every late and rejected row exactly once, as in the
	// uninterrupted run (orphans of killed attempts would duplicate them).
	checkSideRows(t, ctx, be.refSink, be.killSink)

	// Caught up: another run commits nothing.
	stateBefore, sinkBefore := listKeys(t, ctx, be.killState), listKeys(t, ctx, be.killSink)
	statusBefore := headOf(t, runFloe(t, "status", killSpec, "--json").stdout)
	again := runFloe(t, "run", killSpec, "--drain", "--log-format", "json")
	if !strings.Contains(again.stdout, "nothing new") {
		t.Errorf("run after completion: want \"nothing new\", got:\n%s", again.stdout)
	}
	if n := strings.Count(again.stderr, `"msg":"epoch committed"`); n != 0 {
		t.Errorf("run after completion committed %d epochs", n)
	}
	if s := headOf(t, runFloe(t, "status", killSpec, "--json").stdout); s != statusBefore {
		t.Errorf("status changed by a run with nothing new:\nbefore:\n%s\nafter:\n%s", statusBefore, s)
	}
	for name, m := range map[string][2]map[string]int64{
		"state": {stateBefore, listKeys(t, ctx, be.killState)},
		"sink":  {sinkBefore, listKeys(t, ctx, be.killSink)},
	} {
		for k := range m[1] {
			if _, ok := m[0][k]; !ok {
				t.Errorf("run with nothing new wrote %s object %s", name, k)
			}
		}
	}
}

// wasKilled reports whether err is the end of a process by a signal (the
// test sends only SIGKILL).
func wasKilled(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	return !ee.Exited() // ended by a signal, not by exit()
}

// killSchedule draws the seeded kill delays.
type killSchedule struct {
	rng     *rand.Rand
	startup time.Duration // estimated time from exec to the start of the first epoch
	perEp   time.Duration // estimated time of one epoch
}

// next returns the delay of the next kill, given the epochs that remain and
// the kills still to make. One kill in five lands in the first 30 ms (process
// start, recovery), one in five anywhere in the start-up phase, the rest
// after it, spread so that on average the kills cover the remaining epochs
// but for a few left to the final, uninterrupted run.
func (k *killSchedule) next(epochsLeft int64, killsLeft int) time.Duration {
	const reserve = 3 // epochs left to the final run
	switch k.rng.IntN(5) {
	case 0:
		return time.Duration(k.rng.Int64N(int64(30 * time.Millisecond)))
	case 1:
		return time.Duration(k.rng.Int64N(int64(max(k.startup, time.Millisecond))))
	}
	budget := float64(epochsLeft-reserve) / float64(max(killsLeft, 1)) // epochs per kill
	if budget <= 0 {
		// Few epochs left: kill within start-up or the first epoch.
		return time.Duration(k.rng.Int64N(int64(max(k.startup+k.perEp, time.Millisecond))))
	}
	span := time.Duration(2 * budget * float64(k.perEp))
	return k.startup + time.Duration(k.rng.Int64N(int64(max(span, time.Millisecond))))
}

// observe refines the estimates from the commit times of one run.
func (k *killSchedule) observe(commits []commitAt, killed bool, delay time.Duration) {
	if len(commits) == 0 {
		if killed && delay > k.startup+k.perEp {
			k.startup = (k.startup + delay - k.perEp) / 2 // slower start than estimated
		}
		return
	}
	if n := len(commits); n >= 2 {
		per := (commits[n-1].at - commits[0].at) / time.Duration(n-1)
		k.perEp = (k.perEp + per) / 2
	}
	k.startup = (k.startup + max(commits[0].at-k.perEp, 0)) / 2
}

// commitAt is one "epoch committed" log line and when it arrived.
type commitAt struct {
	epoch int64
	at    time.Duration // since start
}

// commitClock is a subprocess's stderr: it keeps the bytes and timestamps
// every "epoch committed" JSON log line as it arrives. exec.Cmd writes to it
// from one goroutine and Wait returns only after the last write.
type commitClock struct {
	start   time.Time
	buf     bytes.Buffer
	line    []byte
	commits []commitAt
}

func (c *commitClock) Write(p []byte) (int, error) {
	n := len(p)
	c.buf.Write(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.line = append(c.line, p...)
			break
		}
		c.line = append(c.line, p[:i]...)
		p = p[i+1:]
		if e, ok := committedEpoch(c.line); ok {
			c.commits = append(c.commits, commitAt{epoch: e, at: time.Since(c.start)})
		}
		c.line = c.line[:0]
	}
	return n, nil
}

// committedEpoch parses an "epoch committed" JSON log line.
func committedEpoch(line []byte) (int64, bool) {
	var rec struct {
		Msg   string `json:"msg"`
		Epoch int64  `json:"epoch"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Msg != "epoch committed" {
		return 0, false
	}
	return rec.Epoch, true
}

// lastEpoch returns the highest epoch an "epoch committed" line of a JSON
// log names.
func lastEpoch(log string) int64 {
	var last int64
	for _, l := range strings.Split(log, "\n") {
		if e, ok := committedEpoch([]byte(l)); ok {
			last = max(last, e)
		}
	}
	return last
}

// headOf drops the fields of a `status --json` that depend on the clock
// (now, ages, lags behind the wall clock): what is left is the head.
func headOf(t testing.TB, statusJSON string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(statusJSON), &m); err != nil {
		t.Fatalf("status --json: %v\n%s", err, statusJSON)
	}
	for _, k := range []string{"now", "last_commit_age_s", "watermark_lag_wall_s", "oldest_pending_age_s", "health"} {
		delete(m, k)
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	return string(b)
}
