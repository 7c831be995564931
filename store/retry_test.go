package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/store"
)

var fastRetry = store.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond, Seed: 1}

func TestRetryTransient(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		faults      []store.Fault
		op          func(s store.Store) error
		wantErr     error // nil: success
		wantRetries int64
		wantCalls   int
	}{
		{
			name:   "get retried until success",
			faults: []store.Fault{{At: 1, Mode: store.Fail}, {At: 2, Mode: store.Fail}},
			op: func(s store.Store) error {
				_, _, err := s.Get(ctx, "k")
				return err
			},
			wantRetries: 2, wantCalls: 4,
		},
		{
			name:   "attempts exhausted",
			faults: []store.Fault{{At: 1, Mode: store.Fail}, {At: 2, Mode: store.Fail}, {At: 3, Mode: store.Fail}, {At: 4, Mode: store.Fail}},
			op: func(s store.Store) error {
				_, err := s.List(ctx, "")
				return err
			},
			wantErr: store.ErrTransient, wantRetries: 3, wantCalls: 5,
		},
		{
			name: "not found is not retried",
			op: func(s store.Store) error {
				_, _, err := s.Get(ctx, "absent")
				return err
			},
			wantErr: store.ErrNotFound, wantCalls: 2,
		},
		{
			name: "precondition is not retried",
			op: func(s store.Store) error {
				_, err := s.Put(ctx, "k", []byte("y"), store.PutOptions{IfNotExist: true})
				return err
			},
			wantErr: store.ErrPrecondition, wantCalls: 2,
		},
		{
			name:    "crash is not retried",
			faults:  []store.Fault{{At: 1, Mode: store.CrashBefore}},
			op:      func(s store.Store) error { return s.Delete(ctx, "k") },
			wantErr: store.ErrCrashed, wantCalls: 2,
		},
		{
			name:   "unconditional put retried after apply",
			faults: []store.Fault{{At: 1, Mode: store.FailAfterApply}},
			op: func(s store.Store) error {
				_, err := s.Put(ctx, "k", []byte("y"), store.PutOptions{})
				return err
			},
			wantRetries: 1, wantCalls: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Faults: tc.faults})
			if _, err := f.Put(ctx, "k", []byte("x"), store.PutOptions{}); err != nil { // call 0
				t.Fatal(err)
			}
			r := store.WithRetry(f, fastRetry)
			err := tc.op(r)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if r.Retries() != tc.wantRetries || f.Calls() != tc.wantCalls {
				t.Fatalf("retries = %d, calls = %d; want %d, %d; log %q", r.Retries(), f.Calls(), tc.wantRetries, tc.wantCalls, f.Log())
			}
		})
	}
}

// TestRetryAmbiguousConditionalWrite: the first try of a conditional write
// lands but its response is lost; the retry loses its precondition to that
// very write. The wrapper must not report a clean lost race.
func TestRetryAmbiguousConditionalWrite(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts func(etag string) store.PutOptions
	}{
		{"if-not-exist", func(string) store.PutOptions { return store.PutOptions{IfNotExist: true} }},
		{"if-match", func(etag string) store.PutOptions { return store.PutOptions{IfMatch: etag} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := openURL(t, "mem://")
			base, err := inner.Put(ctx, "_latest.json", []byte("base"), store.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			key := "_latest.json"
			if tc.name == "if-not-exist" {
				key = "_manifest.json"
			}
			f := store.NewFaulty(inner, store.FaultPlan{Faults: []store.Fault{{At: 0, Mode: store.FailAfterApply}}})
			r := store.WithRetry(f, fastRetry)
			_, err = r.Put(ctx, key, []byte("ours"), tc.opts(base))
			if !errors.Is(err, store.ErrOutcomeUnknown) || !errors.Is(err, store.ErrPrecondition) || !errors.Is(err, store.ErrTransient) {
				t.Fatalf("err = %v, want one matching ErrOutcomeUnknown, ErrPrecondition and ErrTransient", err)
			}
			var oe *store.OutcomeUnknownError
			if !errors.As(err, &oe) || oe.Key != key {
				t.Fatalf("err %v is not an *OutcomeUnknownError for %s", err, key)
			}
			// Reading back resolves it: our write landed.
			if data, _, err := inner.Get(ctx, key); err != nil || string(data) != "ours" {
				t.Fatalf("read back = %q, %v", data, err)
			}
		})
	}
	// A clean lost race (no transient before) stays a plain precondition failure.
	inner := openURL(t, "mem://")
	if _, err := inner.Put(ctx, "m", []byte("theirs"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := store.WithRetry(inner, fastRetry).Put(ctx, "m", []byte("ours"), store.PutOptions{IfNotExist: true})
	if !errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("clean lost race: err = %v", err)
	}
}

func TestRetryAttemptTimeout(t *testing.T) {
	f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Faults: []store.Fault{{At: 0, Mode: store.Delay, Delay: time.Hour}}})
	p := fastRetry
	p.AttemptTimeout = 20 * time.Millisecond
	r := store.WithRetry(f, p)
	if _, err := r.Put(context.Background(), "k", []byte("x"), store.PutOptions{}); err != nil {
		t.Fatalf("Put after a timed-out attempt: %v", err)
	}
	if r.Retries() != 1 {
		t.Fatalf("retries = %d, want 1", r.Retries())
	}
}

func TestRetryStopsOnCallerContext(t *testing.T) {
	f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Throttle: store.Throttle{P: 1, Seed: 1}})
	r := store.WithRetry(f, store.RetryPolicy{MaxAttempts: 1000, BaseDelay: 10 * time.Millisecond, Seed: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := r.Get(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v after the deadline", d)
	}
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	before := f.Calls()
	_, _, err = r.Get(canceled, "k")
	if err == nil || f.Calls()-before != 1 {
		t.Fatalf("canceled context: err = %v after %d calls, want 1 call", err, f.Calls()-before)
	}
}

// TestRetryBudgetIsTime: with the server failing every request, retries go
// on for the time budget (far more than the old 5 attempts), each logged at
// Debug with op, key, attempt, delay and cause, and the error says why it
// stopped.
func TestRetryBudgetIsTime(t *testing.T) {
	var logs bytes.Buffer
	f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Throttle: store.Throttle{P: 1, Seed: 1}})
	r := store.WithRetry(f, store.RetryPolicy{
		MaxElapsed: 300 * time.Millisecond, BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Seed: 1,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	start := time.Now()
	_, _, err := r.Get(context.Background(), "_latest.json")
	took := time.Since(start)
	if !errors.Is(err, store.ErrTransient) {
		t.Fatalf("err = %v, want ErrTransient", err)
	}
	checkOneLine(t, err, `"_latest.json"`, "gave up after", "retry budget 300ms")
	if took < 300*time.Millisecond-20*time.Millisecond || took > 300*time.Millisecond+300*time.Millisecond {
		t.Fatalf("gave up after %v, want about the 300ms budget", took)
	}
	st := r.Stats()
	if st.Get.Attempts <= 5 || st.Retries != st.Get.Attempts-1 || st.GaveUp != 1 || st.Backoff <= 0 || st.Backoff > took {
		t.Fatalf("stats = %+v", st)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if int64(len(lines)) != st.Retries {
		t.Fatalf("%d log lines for %d retries:\n%s", len(lines), st.Retries, logs.String())
	}
	for _, want := range []string{"level=DEBUG", "op=get", "key=_latest.json", "attempt=1 ", "delay=", "cause=", "503 SlowDown"} {
		if !strings.Contains(lines[0], want) {
			t.Fatalf("first retry log line %q lacks %q", lines[0], want)
		}
	}
}

func TestRetryDefaults(t *testing.T) {
	p := store.WithRetry(openURL(t, "mem://"), store.RetryPolicy{}).Policy()
	if p.MaxAttempts != 0 || p.MaxElapsed != store.DefaultMaxElapsed || p.OpTimeout != store.DefaultOpTimeout ||
		p.BaseDelay != store.DefaultBaseDelay || p.MaxDelay != store.DefaultMaxDelay || p.Log == nil {
		t.Fatalf("defaults = %+v", p)
	}
	if store.DefaultMaxElapsed < 30*time.Second || store.DefaultMaxElapsed > time.Minute {
		t.Fatalf("DefaultMaxElapsed = %v, want tens of seconds", store.DefaultMaxElapsed)
	}
}

// TestRetryStats: per-kind calls and attempts, diffed between two snapshots
// as an engine would per epoch.
func TestRetryStats(t *testing.T) {
	ctx := context.Background()
	f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Faults: []store.Fault{
		{Match: store.Match{Op: store.OpPut}, At: 1, Mode: store.Fail},
		{Match: store.Match{Op: store.OpList}, At: 0, Mode: store.Fail},
	}})
	r := store.WithRetry(f, fastRetry)
	if _, err := r.Put(ctx, "a", []byte("1"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before := r.Stats()
	if _, err := r.Put(ctx, "b", []byte("2"), store.PutOptions{}); err != nil { // fails once
		t.Fatal(err)
	}
	if _, err := r.List(ctx, ""); err != nil { // fails once
		t.Fatal(err)
	}
	if _, err := store.Read(ctx, r, "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	got := r.Stats().Sub(before)
	want := store.RetryStats{
		Get: store.OpStats{Calls: 1, Attempts: 1}, Put: store.OpStats{Calls: 1, Attempts: 2},
		List: store.OpStats{Calls: 1, Attempts: 2}, Delete: store.OpStats{Calls: 1, Attempts: 1},
		// The faulted tries never reached the backend: it received one
		// request of each kind.
		Requests: store.Requests{Get: 1, Put: 1, List: 1, Delete: 1},
		Retries:  2,
	}
	got.Backoff = 0
	if got != want {
		t.Fatalf("stats diff = %+v, want %+v", got, want)
	}
	if got.Attempts() != 6 {
		t.Fatalf("Attempts() = %d", got.Attempts())
	}
}

// TestRetryAttemptTimeoutMessage: a try cut by AttemptTimeout is a one-line
// *TimeoutError naming op, key and bound.
func TestRetryAttemptTimeoutMessage(t *testing.T) {
	f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Faults: []store.Fault{{At: 0, Mode: store.Delay, Delay: time.Hour}}})
	p := fastRetry
	p.MaxAttempts = 1
	p.AttemptTimeout = 20 * time.Millisecond
	_, _, err := store.WithRetry(f, p).Get(context.Background(), "gen=1/_generation.json")
	var te *store.TimeoutError
	if !errors.As(err, &te) || te.Deadline != "attempt" || !errors.Is(err, store.ErrTransient) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want an attempt *TimeoutError", err)
	}
	checkOneLine(t, err, "get", `"gen=1/_generation.json"`, "attempt deadline", "20ms")
}
