package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// TestTransientTexts pins transientTexts to the sentinels they stand for:
// the CLI may not import store or epoch, so it matches their messages.
func TestTransientTexts(t *testing.T) {
	for _, s := range []error{store.ErrTransient, epoch.ErrCommitUnknown, store.ErrOutcomeUnknown} {
		found := false
		for _, txt := range transientTexts {
			found = found || s.Error() == txt
		}
		if !found {
			t.Errorf("sentinel %q is not in transientTexts %q", s, transientTexts)
		}
	}
}

func TestRestartable(t *testing.T) {
	timeout := &store.TimeoutError{Op: "get", Key: "_latest.json", Deadline: "request", Limit: time.Second}
	for _, c := range []struct {
		name   string
		err    error
		gaveUp bool
		want   bool
	}{
		{"transient", fmt.Errorf("state: get x: %w (gave up after 5 attempts in 1s; retry budget 1s)", store.ErrTransient), false, true},
		{"timeout", fmt.Errorf("epoch 4: list source: %w", timeout), false, true},
		{"commit unknown", fmt.Errorf("%w: put _latest.json: %w", epoch.ErrCommitUnknown, store.ErrTransient), false, true},
		{"outcome unknown", &store.OutcomeUnknownError{Key: "k", Transient: store.ErrTransient, Precondition: store.ErrPrecondition}, false, true},
		{"store gave up, error reworded by the engine", errors.New("epoch 5: reading the state failed"), true, true},
		{"fenced", fmt.Errorf("epoch 3: %w", engine.ErrFenced), true, false},
		{"superseded", fmt.Errorf("%w; this run stops", epoch.ErrSuperseded), false, false},
		{"corrupt", fmt.Errorf("manifest 7: %w (after a %v)", manifest.ErrCorrupt, store.ErrTransient), true, false},
		{"invalid spec", fmt.Errorf("p.yaml: %w: window: tumbling missing", spec.ErrInvalid), false, false},
		{"refusal", errors.New("the pipeline identity changed: source.url; refusing"), false, false},
		{"on_error fail", errors.New("b.jsonl line 1: on_error: fail"), false, false},
		{"cancelled", fmt.Errorf("list: %w", context.Canceled), true, false},
		{"exit error", &exitError{code: 1, err: errors.New("x")}, false, false},
	} {
		if got := restartable(c.err, c.gaveUp); got != c.want {
			t.Errorf("%s: restartable(%v, %v) = %v, want %v", c.name, c.err, c.gaveUp, got, c.want)
		}
	}
}

func TestRestartDelay(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999} {
		rp := restartPolicy{base: 100 * time.Millisecond, maxDelay: time.Second, rand: func() float64 { return r }}
		for n, full := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
			full *= time.Millisecond
			if n == 5 {
				full = time.Second
			}
			d := rp.delay(n + 1)
			if d < full/2 || d > full {
				t.Errorf("rand %v: delay(%d) = %v, want in [%v, %v]", r, n+1, d, full/2, full)
			}
		}
	}
	rp := restartPolicy{base: time.Second, maxDelay: 5 * time.Minute}
	if d := rp.delay(1000); d > 5*time.Minute || d < 150*time.Second {
		t.Errorf("delay(1000) = %v: the cap is 5m", d)
	}
}

// fakeAttempts replays a list of attempts and records the delays waited.
type fakeAttempts struct {
	seq      []attempt
	n        int
	restored []bool
	waits    []time.Duration
}

func (f *fakeAttempts) run(_ context.Context, restored bool) attempt {
	f.restored = append(f.restored, restored)
	a := f.seq[f.n]
	f.n++
	return a
}

func (f *fakeAttempts) sleep(_ context.Context, d time.Duration) bool {
	f.waits = append(f.waits, d)
	return true
}

func transientFailure(epochs int) attempt {
	res := &engine.Result{Epochs: epochs, LastEpoch: 10, Files: int64(2 * epochs), Rows: int64(100 * epochs)}
	if epochs > 0 {
		res.FirstEpoch = 1
	}
	return attempt{res: res, err: fmt.Errorf("list source: no response: %w", store.ErrTransient)}
}

func newSupervisor(f *fakeAttempts, max int, log *bytes.Buffer) *supervisor {
	return &supervisor{
		policy: restartPolicy{max: max, base: 10 * time.Millisecond, maxDelay: time.Second},
		log:    slog.New(slog.NewTextHandler(log, nil)),
		run:    f.run, sleep: f.sleep,
	}
}

func TestSupervise(t *testing.T) {
	t.Run("restarts then succeeds", func(t *testing.T) {
		var log bytes.Buffer
		f := &fakeAttempts{seq: []attempt{transientFailure(2), transientFailure(0), {res: &engine.Result{Epochs: 1, LastEpoch: 12, Files: 1}}}}
		restarts := 0
		s := newSupervisor(f, 3, &log)
		s.onRestart = func(int) { restarts++ }
		res, err := s.supervise(context.Background())
		if err != nil || f.n != 3 || restarts != 2 || len(f.waits) != 2 {
			t.Fatalf("err %v, attempts %d, restarts %d, waits %v", err, f.n, restarts, f.waits)
		}
		if res.Epochs != 3 || res.Files != 5 || res.LastEpoch != 12 || res.FirstEpoch != 1 {
			t.Fatalf("merged result %+v", res)
		}
		if fmt.Sprint(f.restored) != "[false true true]" {
			t.Fatalf("restored %v: restore options must be dropped once an epoch committed", f.restored)
		}
		warns := strings.Count(log.String(), "level=WARN msg=\"attempt failed; restarting from the last committed epoch\"")
		if warns != 2 || !strings.Contains(log.String(), "attempt=1 max_restarts=3 delay=") || !strings.Contains(log.String(), "attempt=2") ||
			!strings.Contains(log.String(), "cause=\"list source: no response: transient storage error\"") {
			t.Fatalf("want 2 WARN lines with attempt, delay and cause:\n%s", log.String())
		}
	})
	t.Run("a committed epoch resets the count", func(t *testing.T) {
		var log bytes.Buffer
		// max 2: without the reset the third failure would be the last.
		f := &fakeAttempts{seq: []attempt{transientFailure(0), transientFailure(0), transientFailure(1), transientFailure(0), transientFailure(0)}}
		res, err := newSupervisor(f, 2, &log).supervise(context.Background())
		var ge *giveUpError
		if !errors.As(err, &ge) || f.n != 5 || ge.failures != 3 {
			t.Fatalf("err %v after %d attempts", err, f.n)
		}
		if !strings.Contains(err.Error(), "giving up after 3 consecutive failed attempts (--max-restarts 2") ||
			!strings.Contains(err.Error(), "transient storage error") || exitCode(err) != exitFailed {
			t.Fatalf("give-up error %q (exit %d)", err, exitCode(err))
		}
		if res.Epochs != 1 || res.FirstEpoch != 1 || res.LastEpoch != 10 {
			t.Fatalf("merged result %+v", res)
		}
		if !strings.Contains(log.String(), "level=ERROR msg=\"giving up") {
			t.Fatalf("no ERROR line when giving up:\n%s", log.String())
		}
	})
	t.Run("max 0 fails at once", func(t *testing.T) {
		var log bytes.Buffer
		f := &fakeAttempts{seq: []attempt{transientFailure(0)}}
		_, err := newSupervisor(f, 0, &log).supervise(context.Background())
		if err == nil || f.n != 1 || strings.Contains(err.Error(), "giving up") {
			t.Fatalf("err %v after %d attempts", err, f.n)
		}
	})
	for _, c := range []struct {
		name string
		err  error
		code int
	}{
		{"fenced", fmt.Errorf("epoch 3: %w", engine.ErrFenced), exitFenced},
		{"corrupt", fmt.Errorf("manifest: %w", manifest.ErrCorrupt), exitFailed},
		{"refusal", errors.New("state evolution refused: window changed"), exitFailed},
	} {
		t.Run(c.name+" is final", func(t *testing.T) {
			var log bytes.Buffer
			f := &fakeAttempts{seq: []attempt{{res: &engine.Result{}, err: c.err}}}
			_, err := newSupervisor(f, 10, &log).supervise(context.Background())
			if !errors.Is(err, c.err) || f.n != 1 || exitCode(err) != c.code {
				t.Fatalf("err %v (exit %d) after %d attempts", err, exitCode(err), f.n)
			}
		})
	}
	t.Run("reset-state is not restarted before it commits", func(t *testing.T) {
		var log bytes.Buffer
		f := &fakeAttempts{seq: []attempt{transientFailure(0)}}
		s := newSupervisor(f, 10, &log)
		s.restoring = true
		_, err := s.supervise(context.Background())
		if err == nil || f.n != 1 || !strings.Contains(err.Error(), "never resets twice") {
			t.Fatalf("err %v after %d attempts", err, f.n)
		}
	})
	t.Run("a stop during the wait ends the worker", func(t *testing.T) {
		var log bytes.Buffer
		stop := make(chan struct{})
		close(stop)
		f := &fakeAttempts{seq: []attempt{transientFailure(0)}}
		s := newSupervisor(f, 10, &log)
		s.sleep = nil
		s.policy.base = time.Hour
		s.stop = stop
		t0 := time.Now()
		_, err := s.supervise(context.Background())
		if err == nil || time.Since(t0) > 5*time.Second || f.n != 1 {
			t.Fatalf("err %v after %v", err, time.Since(t0))
		}
	})
}

func TestRunRestartFlags(t *testing.T) {
	spec, _ := sampleSpec(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-restarts", "3"}, "--max-restarts applies to --trigger workers"},
		{[]string{"--once", "--restart-backoff", "1s"}, "--restart-backoff applies to --trigger workers"},
		{[]string{"--trigger", "1s", "--max-restarts", "-1"}, "--max-restarts -1: must be at least 0"},
		{[]string{"--trigger", "1s", "--metrics-push", "http://127.0.0.1:1"}, "--metrics-push is for --once runs"},
		{[]string{"--trigger", "1s", "--metrics-addr", "no-such-host-floe.invalid:http"}, "--metrics-addr"},
	} {
		code, out, errOut := floe(append([]string{"run", spec}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("floe run %v: code %d, want 2 and %q\nstdout %s\nstderr %s", c.args, code, c.want, out, errOut)
		}
	}
}
