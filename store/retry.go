package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Defaults of RetryPolicy.
const (
	// DefaultMaxElapsed is the default retry budget: no retry starts later
	// than this after an operation's first try started.
	DefaultMaxElapsed = 45 * time.Second
	// DefaultOpTimeout is the default bound on one whole operation, retries
	// and backoff included. It is generous because it also bounds the
	// transfer of the largest object; stalls are caught much earlier by
	// the request and idle deadlines.
	DefaultOpTimeout = 10 * time.Minute
	// DefaultBaseDelay and DefaultMaxDelay bound the backoff.
	DefaultBaseDelay = 50 * time.Millisecond
	DefaultMaxDelay  = 5 * time.Second
)

// RetryPolicy configures WithRetry. Zero fields take the defaults; a negative
// duration disables that bound.
//
// Each operation (one Store call) is tried, and retried after ErrTransient,
// until it succeeds, fails for good, or a bound is reached: MaxAttempts
// tries, a retry that would start after MaxElapsed, or OpTimeout for the
// whole call. Each request inside a try is bounded by RequestTimeout (until
// its response headers) and IdleTimeout (between chunks of its response
// body); a try that hits one fails with a *TimeoutError (ErrTransient) and
// is retried like any transient failure.
type RetryPolicy struct {
	// MaxAttempts is the number of tries including the first (0: no limit
	// by count; MaxElapsed bounds the retries).
	MaxAttempts int
	// BaseDelay is the backoff bound before the first retry (default 50ms);
	// it doubles with every retry up to MaxDelay (default 5s). The actual
	// sleep is uniform in [0, that bound] ("full jitter").
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxElapsed is the retry budget: no retry is started (its backoff
	// included) later than this after the first try started (default 45s;
	// negative: no time limit, only MaxAttempts, OpTimeout and the caller's
	// context bound the retries).
	MaxElapsed time.Duration
	// OpTimeout bounds a whole operation, every try and backoff included
	// (default 10m, generous because it also bounds the transfer of the
	// largest object; negative: none). Hitting it fails the operation with
	// a *TimeoutError (ErrTransient), not a context error.
	OpTimeout time.Duration
	// AttemptTimeout bounds each try (0: no bound beyond the others). A try
	// that hits it fails with a *TimeoutError (ErrTransient). It cuts a
	// large transfer that is still moving; prefer IdleTimeout.
	AttemptTimeout time.Duration
	// RequestTimeout bounds each S3 request until its response headers
	// arrive, counted from the last byte of the request body sent (0:
	// DefaultRequestTimeout, 30s; negative: none). It is what ends a server
	// that accepts a connection and never answers.
	RequestTimeout time.Duration
	// IdleTimeout bounds each wait for more of an S3 response body (0:
	// DefaultIdleTimeout, 30s; negative: none). A large body that keeps
	// arriving is never cut.
	IdleTimeout time.Duration
	// Log receives one Debug record per retry (op, key, attempt, delay,
	// cause). Nil: slog.Default().
	Log *slog.Logger
	// Seed seeds the jitter source (math/rand/v2 PCG); 0 picks a random seed.
	Seed uint64
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts < 0 {
		p.MaxAttempts = 0
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	if p.MaxElapsed == 0 {
		p.MaxElapsed = DefaultMaxElapsed
	}
	if p.OpTimeout == 0 {
		p.OpTimeout = DefaultOpTimeout
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	if p.Seed == 0 {
		p.Seed = rand.Uint64()
	}
	return p
}

// OpStats counts the calls of one kind of operation.
type OpStats struct {
	// Calls is the number of Store calls.
	Calls int64
	// Attempts is the number of tries: Calls plus their retries. It is
	// not the number of requests: a Put of 16 MiB or more makes several
	// on S3 (multipart) and a List one per page of 1000 keys; see
	// RetryStats.Requests.
	Attempts int64
}

// RetryStats is a snapshot of a Retrying's counters since it was made. Take
// one before and one after a unit of work (an epoch) and Sub them.
type RetryStats struct {
	Get, Put, List, Delete OpStats // Read counts as Get
	// Requests counts the requests the store sent, as the backend bills
	// them (see Requests): every LIST page, multipart part, HEAD and
	// retry. Where the wrapped store does not count them (a wrapper of
	// another package), it is the tries of each kind.
	Requests Requests
	// Retries is the number of tries after the first, over all operations.
	Retries int64
	// Timeouts counts tries that ended with a *TimeoutError (request,
	// idle, attempt or operation deadline).
	Timeouts int64
	// GaveUp counts operations that failed with ErrTransient because a
	// bound (MaxAttempts, MaxElapsed, OpTimeout) ended their retries.
	GaveUp int64
	// Backoff is the total time slept between tries.
	Backoff time.Duration
}

// Sub returns s minus prev: the activity between two snapshots.
func (s RetryStats) Sub(prev RetryStats) RetryStats {
	sub := func(a, b OpStats) OpStats { return OpStats{a.Calls - b.Calls, a.Attempts - b.Attempts} }
	return RetryStats{
		Get: sub(s.Get, prev.Get), Put: sub(s.Put, prev.Put),
		List: sub(s.List, prev.List), Delete: sub(s.Delete, prev.Delete),
		Requests: s.Requests.Sub(prev.Requests),
		Retries:  s.Retries - prev.Retries, Timeouts: s.Timeouts - prev.Timeouts,
		GaveUp: s.GaveUp - prev.GaveUp, Backoff: s.Backoff - prev.Backoff,
	}
}

// Attempts returns the tries of every kind.
func (s RetryStats) Attempts() int64 {
	return s.Get.Attempts + s.Put.Attempts + s.List.Attempts + s.Delete.Attempts
}

type opCounters struct{ calls, attempts atomic.Int64 }

// Retrying is a Store that retries operations failing with ErrTransient,
// with exponential backoff and full jitter, within the bounds of its
// RetryPolicy. It never retries ErrPrecondition, ErrNotFound, ErrCrashed or
// the caller's context errors.
type Retrying struct {
	inner Store
	p     RetryPolicy
	mu    sync.Mutex // guards rng
	rng   *rand.Rand

	ops      [4]opCounters // by opIndex
	retries  atomic.Int64
	timeouts atomic.Int64
	gaveUp   atomic.Int64
	backoffs atomic.Int64 // nanoseconds
}

var _ Store = (*Retrying)(nil)

func opIndex(op Op) int {
	switch op {
	case OpGet:
		return 0
	case OpPut:
		return 1
	case OpList:
		return 2
	}
	return 3
}

// WithRetry wraps s with the retry policy p.
func WithRetry(s Store, p RetryPolicy) *Retrying {
	p = p.withDefaults()
	return &Retrying{inner: s, p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Policy returns the policy in effect, defaults filled in.
func (r *Retrying) Policy() RetryPolicy { return r.p }

// Retries returns how many retries (tries after the first) were made so far.
func (r *Retrying) Retries() int64 { return r.retries.Load() }

// Stats returns a snapshot of the counters. It is safe to call while
// operations run.
func (r *Retrying) Stats() RetryStats {
	load := func(i int) OpStats { return OpStats{r.ops[i].calls.Load(), r.ops[i].attempts.Load()} }
	get, put, list, del := load(0), load(1), load(2), load(3)
	reqs, ok := CountRequests(r.inner)
	if !ok {
		reqs = Requests{get.Attempts, put.Attempts, list.Attempts, del.Attempts}
	}
	return RetryStats{
		Get: get, Put: put, List: list, Delete: del, Requests: reqs,
		Retries:  r.retries.Load(),
		Timeouts: r.timeouts.Load(),
		GaveUp:   r.gaveUp.Load(),
		Backoff:  time.Duration(r.backoffs.Load()),
	}
}

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

// do runs fn until it succeeds, fails with a non-transient error, or a bound
// of the policy ends the retries. conditional marks a conditional write.
func (r *Retrying) do(ctx context.Context, op Op, key string, conditional bool, fn func(ctx context.Context) error) error {
	c := &r.ops[opIndex(op)]
	c.calls.Add(1)
	start := time.Now()
	opCtx, opCancel := ctx, context.CancelFunc(func() {})
	if r.p.OpTimeout > 0 {
		opCtx, opCancel = context.WithTimeout(ctx, r.p.OpTimeout)
	}
	defer opCancel()
	opCtx = withRequestDeadlines(opCtx, requestDeadlines{request: r.p.RequestTimeout, idle: r.p.IdleTimeout})
	var firstTransient error
	for attempt := 1; ; attempt++ {
		c.attempts.Add(1)
		actx, cancel := opCtx, context.CancelFunc(func() {})
		if r.p.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(opCtx, r.p.AttemptTimeout)
		}
		err := fn(actx)
		attemptExpired := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			// The caller gave up: never retry, and say so (an attempt that
			// failed on its own as the deadline passed must not read as a
			// storage error; the caller's context errors are never
			// ErrTransient).
			if errors.Is(err, cerr) {
				return err
			}
			return fmt.Errorf("%w (the last attempt failed: %v)", cerr, err)
		}
		if opCtx.Err() != nil {
			// The operation deadline, not the caller's: transient, final.
			r.timeouts.Add(1)
			r.gaveUp.Add(1)
			te := &TimeoutError{Op: string(op), Key: key, Deadline: "operation", Limit: r.p.OpTimeout}
			return fmt.Errorf("%w (after %d attempts in %v)", te, attempt, roundDur(time.Since(start)))
		}
		if attemptExpired && !errors.Is(err, ErrTransient) {
			err = &TimeoutError{Op: string(op), Key: key, Deadline: "attempt", Limit: r.p.AttemptTimeout}
		}
		var te *TimeoutError
		if errors.As(err, &te) {
			r.timeouts.Add(1)
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
		elapsed := time.Since(start)
		if r.p.MaxAttempts > 0 && attempt >= r.p.MaxAttempts {
			r.gaveUp.Add(1)
			return fmt.Errorf("%w (gave up after %d attempts in %v)", err, attempt, roundDur(elapsed))
		}
		delay := r.backoff(attempt)
		if r.p.MaxElapsed > 0 && elapsed+delay > r.p.MaxElapsed {
			r.gaveUp.Add(1)
			return fmt.Errorf("%w (gave up after %d attempts in %v; retry budget %v)", err, attempt, roundDur(elapsed), r.p.MaxElapsed)
		}
		if r.p.OpTimeout > 0 && elapsed+delay >= r.p.OpTimeout {
			r.gaveUp.Add(1)
			return fmt.Errorf("%w (gave up after %d attempts in %v; operation deadline %v)", err, attempt, roundDur(elapsed), r.p.OpTimeout)
		}
		if r.p.Log.Enabled(ctx, slog.LevelDebug) {
			r.p.Log.LogAttrs(ctx, slog.LevelDebug, "store: retrying",
				slog.String("op", string(op)), slog.String("key", key),
				slog.Int("attempt", attempt), slog.Duration("delay", delay),
				slog.Duration("elapsed", elapsed), slog.String("cause", err.Error()))
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (while backing off after: %w)", ctx.Err(), err)
		case <-t.C:
		}
		r.retries.Add(1)
		r.backoffs.Add(int64(delay))
	}
}

// roundDur rounds d for messages.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(10 * time.Millisecond)
	case d > time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d
}

// Get implements Store.
func (r *Retrying) Get(ctx context.Context, key string) (data []byte, etag string, err error) {
	err = r.do(ctx, OpGet, key, false, func(ctx context.Context) error {
		data, etag, err = r.inner.Get(ctx, key)
		return err
	})
	return data, etag, err
}

var _ Reader = (*Retrying)(nil)

// Read implements Reader, with retries.
func (r *Retrying) Read(ctx context.Context, key string) (data []byte, err error) {
	err = r.do(ctx, OpGet, key, false, func(ctx context.Context) error {
		data, err = Read(ctx, r.inner, key)
		return err
	})
	return data, err
}

// Put implements Store. See ErrOutcomeUnknown for retried conditional writes.
func (r *Retrying) Put(ctx context.Context, key string, data []byte, opts PutOptions) (etag string, err error) {
	conditional := opts.IfNotExist || opts.IfMatch != ""
	err = r.do(ctx, OpPut, key, conditional, func(ctx context.Context) error {
		etag, err = r.inner.Put(ctx, key, data, opts)
		return err
	})
	return etag, err
}

// List implements Store.
func (r *Retrying) List(ctx context.Context, prefix string) (out []ObjectInfo, err error) {
	err = r.do(ctx, OpList, prefix, false, func(ctx context.Context) error {
		out, err = r.inner.List(ctx, prefix)
		return err
	})
	return out, err
}

var (
	_ ListerAfter    = (*Retrying)(nil)
	_ RequestCounter = (*Retrying)(nil)
)

// ListAfter implements ListerAfter, with retries.
func (r *Retrying) ListAfter(ctx context.Context, prefix, after string) (out []ObjectInfo, err error) {
	err = r.do(ctx, OpList, prefix, false, func(ctx context.Context) error {
		out, err = ListAfter(ctx, r.inner, prefix, after)
		return err
	})
	return out, err
}

// Requests implements RequestCounter (Stats().Requests).
func (r *Retrying) Requests() Requests { return r.Stats().Requests }

// Delete implements Store.
func (r *Retrying) Delete(ctx context.Context, key string) error {
	return r.do(ctx, OpDelete, key, false, func(ctx context.Context) error {
		return r.inner.Delete(ctx, key)
	})
}

// Close closes the wrapped Store.
func (r *Retrying) Close() error { return r.inner.Close() }
