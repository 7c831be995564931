package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/store"
)

func TestFaultyModes(t *testing.T) {
	ctx := context.Background()
	manifest := store.Match{Op: store.OpPut, KeyContains: "_manifest"}
	tests := []struct {
		name        string
		fault       store.Fault
		wantErr     error // of the third Put (the second manifest put)
		wantApplied bool  // whether that Put landed
		wantLater   error // of a Get after it
	}{
		{"crash-before", store.Fault{Match: manifest, At: 1, Mode: store.CrashBefore}, store.ErrCrashed, false, store.ErrCrashed},
		{"crash-after", store.Fault{Match: manifest, At: 1, Mode: store.CrashAfter}, store.ErrCrashed, true, store.ErrCrashed},
		{"fail", store.Fault{Match: manifest, At: 1, Mode: store.Fail}, store.ErrTransient, false, nil},
		{"fail-after-apply", store.Fault{Match: manifest, At: 1, Mode: store.FailAfterApply}, store.ErrTransient, true, nil},
		{"global index", store.Fault{At: 2, Mode: store.Fail}, store.ErrTransient, false, nil},
		{"no match", store.Fault{Match: store.Match{Op: store.OpDelete}, At: 0, Mode: store.CrashBefore}, nil, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inner := openURL(t, "mem://")
			f := store.NewFaulty(inner, store.FaultPlan{Faults: []store.Fault{tc.fault}})
			if _, err := f.Put(ctx, "gen=1/epoch=1/_manifest.json", []byte("1"), store.PutOptions{IfNotExist: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Put(ctx, "gen=1/epoch=2/state.parquet", []byte("s"), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := f.Put(ctx, "gen=1/epoch=2/_manifest.json", []byte("2"), store.PutOptions{IfNotExist: true})
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("faulted Put: err = %v, want %v", err, tc.wantErr)
			}
			_, _, gerr := inner.Get(ctx, "gen=1/epoch=2/_manifest.json")
			if applied := gerr == nil; applied != tc.wantApplied {
				t.Fatalf("applied = %v (%v), want %v", applied, gerr, tc.wantApplied)
			}
			_, _, err = f.Get(ctx, "gen=1/epoch=1/_manifest.json")
			if tc.wantLater == nil && err != nil || tc.wantLater != nil && !errors.Is(err, tc.wantLater) {
				t.Fatalf("later Get: err = %v, want %v", err, tc.wantLater)
			}
			if f.Calls() != 4 {
				t.Fatalf("Calls = %d, want 4; log:\n%s", f.Calls(), strings.Join(f.Log(), "\n"))
			}
			if crashed := f.Crashed(); crashed != (tc.wantLater != nil) {
				t.Fatalf("Crashed = %v", crashed)
			}
		})
	}
}

func TestFaultyLog(t *testing.T) {
	ctx := context.Background()
	f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Faults: []store.Fault{
		{Match: store.Match{Op: store.OpList}, At: 0, Mode: store.Fail},
		{Match: store.Match{Op: store.OpDelete}, At: 0, Mode: store.CrashAfter},
	}})
	_, _ = f.Put(ctx, "a", []byte("x"), store.PutOptions{})
	_, _ = f.List(ctx, "p/")
	_ = f.Delete(ctx, "a")
	_, _, _ = f.Get(ctx, "a")
	want := []string{"0 put a", "1 list p/ fail", "2 delete a crash-after", "3 get a crashed"}
	if got := f.Log(); !slices.Equal(got, want) {
		t.Fatalf("Log = %q, want %q", got, want)
	}
}

func TestFaultyDelay(t *testing.T) {
	f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Faults: []store.Fault{
		{At: 0, Mode: store.Delay, Delay: 50 * time.Millisecond},
		{At: 1, Mode: store.Delay, Delay: time.Hour},
	}})
	start := time.Now()
	if _, err := f.Put(context.Background(), "k", []byte("x"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("delayed call took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := f.Get(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delay must respect the context: %v", err)
	}
}

func TestFaultyThrottle(t *testing.T) {
	run := func(seed uint64) (failed int, pattern string) {
		f := store.NewFaulty(openURL(t, "mem://"), store.FaultPlan{Throttle: store.Throttle{
			Match: store.Match{Op: store.OpPut}, P: 0.3, Seed: seed}})
		var b strings.Builder
		for range 1000 {
			_, err := f.Put(context.Background(), "k", []byte("x"), store.PutOptions{})
			if err != nil {
				if !errors.Is(err, store.ErrTransient) {
					t.Fatalf("throttled call: %v", err)
				}
				failed++
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
			if _, _, err := f.Get(context.Background(), "k"); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Get is not throttled by an Op filter on put: %v", err)
			}
		}
		return failed, b.String()
	}
	n1, p1 := run(42)
	n2, p2 := run(42)
	if p1 != p2 {
		t.Fatal("same seed, different throttle pattern")
	}
	if n1 < 230 || n1 > 370 || n1 != n2 {
		t.Fatalf("throttled %d of 1000 puts at p=0.3", n1)
	}
	if _, p3 := run(43); p3 == p1 {
		t.Fatal("different seeds, same pattern")
	}
}
