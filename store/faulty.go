package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Op names a Store method for fault filters and logs.
type Op string

// The operations a Faulty counts. Close is not counted.
const (
	OpGet    Op = "get"
	OpPut    Op = "put"
	OpList   Op = "list"
	OpDelete Op = "delete"
)

// FaultMode says what happens at the faulted call.
type FaultMode int

const (
	// CrashBefore: the call does not apply; it and every later call return
	// ErrCrashed.
	CrashBefore FaultMode = iota + 1
	// CrashAfter: the call applies, then returns ErrCrashed, and every later
	// call returns ErrCrashed. Calls that start while it runs are later calls.
	CrashAfter
	// Fail: this one call returns ErrTransient without applying.
	Fail
	// FailAfterApply: this one call applies, then returns ErrTransient (an
	// ambiguous write: the response was lost).
	FailAfterApply
	// Delay: this one call sleeps Fault.Delay (or until its context ends),
	// then runs normally.
	Delay
)

func (m FaultMode) String() string {
	switch m {
	case CrashBefore:
		return "crash-before"
	case CrashAfter:
		return "crash-after"
	case Fail:
		return "fail"
	case FailAfterApply:
		return "fail-after-apply"
	case Delay:
		return "delay"
	}
	return fmt.Sprintf("FaultMode(%d)", int(m))
}

// Match selects calls: by operation (empty: any) and by a substring of the key
// (List: of the prefix; empty: any).
type Match struct {
	Op          Op
	KeyContains string
}

func (m Match) matches(op Op, key string) bool {
	return (m.Op == "" || m.Op == op) && strings.Contains(key, m.KeyContains)
}

// Fault injects Mode at the At-th (0-based) call that matches Match. With a
// zero Match, At is the index among all calls.
type Fault struct {
	Match
	At    int
	Mode  FaultMode
	Delay time.Duration // for Mode == Delay
}

// Throttle makes each matching call fail with ErrTransient, without applying,
// with probability P, drawn from a math/rand/v2 PCG source seeded with Seed
// (as a server answering 503 SlowDown would). Faults take precedence.
type Throttle struct {
	Match
	P    float64
	Seed uint64
}

// FaultPlan lists the faults a Faulty injects.
type FaultPlan struct {
	Faults   []Fault
	Throttle Throttle
}

// Faulty is a Store that injects the faults of a FaultPlan into calls to an
// inner Store. It is safe for concurrent use; the order in which concurrent
// calls are counted is the order in which they enter.
type Faulty struct {
	inner Store
	plan  FaultPlan

	mu      sync.Mutex
	calls   int
	seen    []int // per fault: matching calls so far
	rng     *rand.Rand
	crashed bool
	log     []string
}

var _ Store = (*Faulty)(nil)

// NewFaulty wraps inner with the faults of plan.
func NewFaulty(inner Store, plan FaultPlan) *Faulty {
	return &Faulty{
		inner: inner,
		plan:  plan,
		seen:  make([]int, len(plan.Faults)),
		rng:   rand.New(rand.NewPCG(plan.Throttle.Seed, plan.Throttle.Seed^0x5851f42d4c957f2d)),
	}
}

// Calls returns how many calls (all methods except Close) were made.
func (f *Faulty) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Crashed reports whether a crash fault has fired.
func (f *Faulty) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// Log returns one line per call: its index, operation, key and the injected
// fault, if any, e.g. "3 put gen=1/epoch=2/_manifest.json crash-before".
func (f *Faulty) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// action is what one call does.
type action int

const (
	actRun action = iota
	actCrashed
	actThrottle
)

// enter counts a call and decides its fault. mode is 0 when no fault applies.
func (f *Faulty) enter(op Op, key string) (act action, mode FaultMode, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := f.calls
	f.calls++
	note := ""
	defer func() { f.log = append(f.log, strings.TrimSpace(fmt.Sprintf("%d %s %s %s", idx, op, key, note))) }()
	if f.crashed {
		note = "crashed"
		return actCrashed, 0, 0
	}
	for i, ft := range f.plan.Faults {
		if !ft.matches(op, key) {
			continue
		}
		n := f.seen[i]
		f.seen[i]++
		if n == ft.At && mode == 0 {
			mode, delay = ft.Mode, ft.Delay
		}
	}
	if mode == CrashBefore || mode == CrashAfter {
		f.crashed = true
	}
	if mode != 0 {
		note = mode.String()
		return actRun, mode, delay
	}
	if t := f.plan.Throttle; t.P > 0 && t.matches(op, key) && f.rng.Float64() < t.P {
		note = "throttle"
		return actThrottle, 0, 0
	}
	return actRun, 0, 0
}

// call runs apply under the fault decided for this call.
func (f *Faulty) call(ctx context.Context, op Op, key string, apply func() error) error {
	act, mode, delay := f.enter(op, key)
	switch act {
	case actCrashed:
		return fmt.Errorf("faulty: %s %q: %w", op, key, ErrCrashed)
	case actThrottle:
		return fmt.Errorf("faulty: %s %q: injected 503 SlowDown: %w", op, key, ErrTransient)
	}
	switch mode {
	case CrashBefore:
		return fmt.Errorf("faulty: %s %q: crash before apply: %w", op, key, ErrCrashed)
	case Fail:
		return fmt.Errorf("faulty: %s %q: injected failure: %w", op, key, ErrTransient)
	case Delay:
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("faulty: %s %q: during injected delay: %w", op, key, ctx.Err())
		case <-t.C:
		}
	}
	err := apply()
	switch mode {
	case CrashAfter:
		return fmt.Errorf("faulty: %s %q: crash after apply (apply error: %v): %w", op, key, err, ErrCrashed)
	case FailAfterApply:
		return fmt.Errorf("faulty: %s %q: injected failure after apply (apply error: %v): %w", op, key, err, ErrTransient)
	}
	return err
}

// Get implements Store.
func (f *Faulty) Get(ctx context.Context, key string) (data []byte, etag string, err error) {
	err = f.call(ctx, OpGet, key, func() error {
		data, etag, err = f.inner.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return data, etag, nil
}

var _ Reader = (*Faulty)(nil)

// Read implements Reader; it counts as a Get.
func (f *Faulty) Read(ctx context.Context, key string) (data []byte, err error) {
	err = f.call(ctx, OpGet, key, func() error {
		data, err = Read(ctx, f.inner, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Put implements Store.
func (f *Faulty) Put(ctx context.Context, key string, data []byte, opts PutOptions) (etag string, err error) {
	err = f.call(ctx, OpPut, key, func() error {
		etag, err = f.inner.Put(ctx, key, data, opts)
		return err
	})
	if err != nil {
		return "", err
	}
	return etag, nil
}

// List implements Store.
func (f *Faulty) List(ctx context.Context, prefix string) (out []ObjectInfo, err error) {
	err = f.call(ctx, OpList, prefix, func() error {
		out, err = f.inner.List(ctx, prefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

var (
	_ ListerAfter    = (*Faulty)(nil)
	_ RequestCounter = (*Faulty)(nil)
)

// ListAfter implements ListerAfter; it counts as a List (the fault filter
// sees the prefix).
func (f *Faulty) ListAfter(ctx context.Context, prefix, after string) (out []ObjectInfo, err error) {
	err = f.call(ctx, OpList, prefix, func() error {
		out, err = ListAfter(ctx, f.inner, prefix, after)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Requests implements RequestCounter: the inner store's (zero if it does
// not count). A faulted call that did not apply sent no request.
func (f *Faulty) Requests() Requests {
	r, _ := CountRequests(f.inner)
	return r
}

// Delete implements Store.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	return f.call(ctx, OpDelete, key, func() error { return f.inner.Delete(ctx, key) })
}

// Close closes the inner Store. It is not counted and never faulted.
func (f *Faulty) Close() error { return f.inner.Close() }
