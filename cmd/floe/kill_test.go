package main

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	source             string
	refState, refSink  string
	killState, killSnk string
}

// TestKillRestart runs `floe run --drain` as a real process, SIGKILLs it at
// seeded random moments (at least 20 times, 5 under -short), restarts it
// each time, and checks that the union of committed outputs equals that of
// one uninterrupted run row for row, on file:// and on S3 (versitygw).
func TestKillRestart(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(killSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", killSeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("kill schedule seed %d (replay: %s=%d)", seed, killSeedEnv, seed)
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
			killState: fu("kill/state"), killSnk: fu("kill/out"),
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
			killState: srv.URL(b, "kill/state"), killSnk: srv.URL(b, "kill/out"),
		})
	})
}

func killRestart(t *testing.T, seed uint64, wantKills int, be killBackend) {
	ctx := context.Background()
	dir := t.TempDir()
	putDataset(t, ctx, be.source)
	refSpec := writeSpec(t, dir, "kill-ref", be.source, be.refState, be.refSink)
	killSpec := writeSpec(t, dir, "kill-run", be.source, be.killState, be.killSnk)

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
	refEpochs := strings.Count(ref.stderr, `"msg":"epoch committed"`)
	t.Logf("reference: %v for %d epochs, %d output files, %d rows; a no-op run takes %v",
		ref.elapsed.Round(time.Millisecond), refEpochs, wantFiles, len(want), idle.elapsed.Round(time.Millisecond))

	// Kill schedule: one in five delays is tiny (startup, recovery, the
	// first list); the rest are spread so that the kills, whose runs each
	// pay the start-up cost again, cover the whole run.
	startup := idle.elapsed
	work := max(ref.elapsed-startup, 10*time.Millisecond)
	spread := 2*startup + 4*work/time.Duration(wantKills)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	var (
		kills, attempts, killedBeforeCommit, killedAfterDone int
		committedByKilled                                    int
		done                                                 bool
	)
	t0 := time.Now()
	for kills < wantKills {
		attempts++
		if attempts > 10*wantKills {
			t.Fatalf("only %d of %d kills landed in %d attempts", kills, wantKills, attempts)
		}
		var delay time.Duration
		if rng.IntN(5) == 0 {
			delay = time.Duration(rng.Int64N(int64(30 * time.Millisecond)))
		} else {
			delay = time.Duration(rng.Int64N(int64(spread)))
		}
		cmd := floeCommand(t, "run", killSpec, "--drain", "--log-format", "json")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
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
		commits := strings.Count(stderr.String(), `"msg":"epoch committed"`)
		switch {
		case killed:
			kills++
			committedByKilled += commits
			if commits == 0 {
				killedBeforeCommit++
			}
			if done {
				killedAfterDone++
			}
		case err != nil:
			t.Fatalf("run %d (delay %v) failed after %d kills: %v\nstdout:\n%s\nstderr:\n%s",
				attempts, delay, kills, err, stdout.String(), tailString(stderr.String(), 4000))
		default:
			done = true // finished before the kill: later runs start caught up
		}
	}
	// Run to completion.
	final := runFloe(t, "run", killSpec, "--drain", "--log-format", "json")
	t.Logf("%d kills in %d runs over %v (delays up to %v, seed %d): %d kills before any commit, %d epochs committed by killed runs, %d kills after the pipeline was caught up; final run: %s",
		kills, attempts, time.Since(t0).Round(time.Millisecond), spread.Round(time.Millisecond), seed,
		killedBeforeCommit, committedByKilled, killedAfterDone, strings.SplitN(final.stdout, "\n", 2)[0])

	got, gotFiles := committedRows(t, ctx, killSpec, be.killSnk)
	missing, extra := multisetDiff(want, got)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("killed runs committed %d rows in %d files, the uninterrupted run %d rows in %d files: %d missing, %d extra\nmissing (first 10): %q\nextra (first 10): %q",
			len(got), gotFiles, len(want), wantFiles, len(missing), len(extra), firstN(missing, 10), firstN(extra, 10))
	}

	// Caught up: another run commits nothing.
	stateBefore, sinkBefore := listKeys(t, ctx, be.killState), listKeys(t, ctx, be.killSnk)
	statusBefore := runFloe(t, "status", killSpec, "--json").stdout
	again := runFloe(t, "run", killSpec, "--drain", "--log-format", "json")
	if !strings.Contains(again.stdout, "nothing new") {
		t.Errorf("run after completion: want \"nothing new\", got:\n%s", again.stdout)
	}
	if n := strings.Count(again.stderr, `"msg":"epoch committed"`); n != 0 {
		t.Errorf("run after completion committed %d epochs", n)
	}
	if s := runFloe(t, "status", killSpec, "--json").stdout; s != statusBefore {
		t.Errorf("status changed by a run with nothing new:\nbefore:\n%s\nafter:\n%s", statusBefore, s)
	}
	for name, m := range map[string][2]map[string]int64{
		"state": {stateBefore, listKeys(t, ctx, be.killState)},
		"sink":  {sinkBefore, listKeys(t, ctx, be.killSnk)},
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
