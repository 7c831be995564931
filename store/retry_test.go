package store_test

import (
	"context"
	"errors"
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
