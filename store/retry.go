package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ErrOutcomeUnknown marks a conditional write whose outcome the retry wrapper
// cannot know: an attempt failed with ErrTransient (it may have landed) and a
// later attempt lost its precondition, possibly to that very attempt. The
// caller resolves it by reading the object back (the commit protocol compares
// the attempt UUID in the body). Errors matching it also match
// ErrPrecondition and ErrTransient, so a caller that only checks
// ErrPrecondition fails safe: it treats its commit as lost, and its write, if
// it landed, is a committed epoch that the next run rolls forward.
var ErrOutcomeUnknown = errors.New("conditional write outcome unknown")

// OutcomeUnknownError is the error behind ErrOutcomeUnknown.
type OutcomeUnknownError struct {
	Key string
	// Transient is the first transient error: the attempt that may have landed.
	Transient error
	// Precondition is the final precondition failure.
	Precondition error
}

// Error implements error.
func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("store: put %q: %v: an earlier attempt failed with %q and may have landed; final attempt: %v",
		e.Key, ErrOutcomeUnknown, e.Transient, e.Precondition)
}

// Is matches ErrOutcomeUnknown, ErrPrecondition and ErrTransient.
func (e *OutcomeUnknownError) Is(target error) bool {
	return target == ErrOutcomeUnknown || target == ErrPrecondition || target == ErrTransient
}

// Unwrap returns the final and the first error.
func (e *OutcomeUnknownError) Unwrap() []error { return []error{e.Precondition, e.Transient} }

// RetryPolicy configures WithRetry. Zero fields take the defaults.
type RetryPolicy struct {
	// MaxAttempts is the number of tries including the first (default 5).
	MaxAttempts int
	// BaseDelay is the backoff before the first retry (default 50ms); it
	// doubles with every retry up to MaxDelay (default 5s). The actual sleep
	// is uniform in [0, that bound] ("full jitter").
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// AttemptTimeout bounds each try (0: no bound beyond the caller's
	// context). A try that hits it counts as ErrTransient.
	AttemptTimeout time.Duration
	// Seed seeds the jitter source (math/rand/v2 PCG); 0 picks a random seed.
	Seed uint64
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 50 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 5 * time.Second
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	if p.Seed == 0 {
		p.Seed = rand.Uint64()
	}
	return p
}

// Retrying is a Store that retries operations failing with ErrTransient,
// with exponential backoff and full jitter. It never retries ErrPrecondition,
// ErrNotFound, ErrCrashed or the caller's context errors.
type Retrying struct {
	inner   Store
	p       RetryPolicy
	mu      sync.Mutex // guards rng
	rng     *rand.Rand
	retries atomic.Int64
}

var _ Store = (*Retrying)(nil)

// WithRetry wraps s with the retry policy p.
func WithRetry(s Store, p RetryPolicy) *Retrying {
	p = p.withDefaults()
	return &Retrying{inner: s, p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Retries returns how many retries (tries after the first) were made so far.
func (r *Retrying) Retries() int64 { return r.retries.Load() }

// backoff returns the sleep before retry number n (1-based).
func (r *Retrying) backoff(n int) time.Duration {
	bound := r.p.MaxDelay
	if n < 32 {
		if d := r.p.BaseDelay << (n - 1); d > 0 && d < bound {
			bound = d
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Duration(r.rng.Int64N(int64(bound) + 1))
}

// do runs fn until it succeeds, fails with a non-transient error, or the
// attempts run out. conditional marks a conditional write.
func (r *Retrying) do(ctx context.Context, key string, conditional bool, fn func(ctx context.Context) error) error {
	var firstTransient error
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if r.p.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, r.p.AttemptTimeout)
		}
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err // the caller gave up: never retry
		}
		if !errors.Is(err, ErrTransient) && errors.Is(err, context.DeadlineExceeded) && r.p.AttemptTimeout > 0 {
			err = fmt.Errorf("%w: attempt timed out after %v: %w", ErrTransient, r.p.AttemptTimeout, err)
		}
		if !errors.Is(err, ErrTransient) {
			if conditional && firstTransient != nil && errors.Is(err, ErrPrecondition) {
				return &OutcomeUnknownError{Key: key, Transient: firstTransient, Precondition: err}
			}
			return err
		}
		if firstTransient == nil {
			firstTransient = err
		}
		if attempt >= r.p.MaxAttempts {
			return fmt.Errorf("after %d attempts: %w", attempt, err)
		}
		t := time.NewTimer(r.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (while backing off after: %w)", ctx.Err(), err)
		case <-t.C:
		}
		r.retries.Add(1)
	}
}

// Get implements Store.
func (r *Retrying) Get(ctx context.Context, key string) (data []byte, etag string, err error) {
	err = r.do(ctx, key, false, func(ctx context.Context) error {
		data, etag, err = r.inner.Get(ctx, key)
		return err
	})
	return data, etag, err
}

var _ Reader = (*Retrying)(nil)

// Read implements Reader, with retries.
func (r *Retrying) Read(ctx context.Context, key string) (data []byte, err error) {
	err = r.do(ctx, key, false, func(ctx context.Context) error {
		data, err = Read(ctx, r.inner, key)
		return err
	})
	return data, err
}

// Put implements Store. See ErrOutcomeUnknown for retried conditional writes.
func (r *Retrying) Put(ctx context.Context, key string, data []byte, opts PutOptions) (etag string, err error) {
	conditional := opts.IfNotExist || opts.IfMatch != ""
	err = r.do(ctx, key, conditional, func(ctx context.Context) error {
		etag, err = r.inner.Put(ctx, key, data, opts)
		return err
	})
	return etag, err
}

// List implements Store.
func (r *Retrying) List(ctx context.Context, prefix string) (out []ObjectInfo, err error) {
	err = r.do(ctx, prefix, false, func(ctx context.Context) error {
		out, err = r.inner.List(ctx, prefix)
		return err
	})
	return out, err
}

// Delete implements Store.
func (r *Retrying) Delete(ctx context.Context, key string) error {
	return r.do(ctx, key, false, func(ctx context.Context) error {
		return r.inner.Delete(ctx, key)
	})
}

// Close closes the wrapped Store.
func (r *Retrying) Close() error { return r.inner.Close() }
