package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// Self-healing of a --trigger worker.
//
// A --trigger worker runs engine.Run as one attempt after another. When an
// attempt fails in a way that a later attempt can get past, the worker
// restarts from the last committed epoch (every attempt does: that is how a
// run starts) after an exponential backoff with jitter. It gives up after
// --max-restarts consecutive failed attempts; an attempt that commits an
// epoch resets the count. Giving up exits 2 with the cause and what all the
// attempts committed.
//
// Which failures are restarted (restartable):
//
//   - restarted: object-store failures that outlasted the per-request retry
//     budget (--retry-budget) — timeouts, 5xx, SlowDown, connection resets
//     and refusals (store.ErrTransient) — and commits whose outcome stayed
//     unknown (epoch.ErrCommitUnknown, store.ErrOutcomeUnknown: the next
//     attempt's recovery reads the pointer and rolls the commit forward or
//     discards it). An attempt is also counted transient when its store
//     wrapper gave up on an operation after the last commit
//     (RequestStats.GaveUp grew), whatever the engine made of the error.
//   - never restarted: fencing (another writer: exit 3), corrupt metadata
//     (manifest.ErrCorrupt: a person must look), an invalid spec, refused
//     changes and every other error the engine returns (identity or state
//     evolution refusals, on_error: fail, max_rejected_fraction, a missing
//     source directory, ...): repeating the attempt would fail the same way.
//     An unknown error is not restarted: restarting is for outages, not for
//     bugs or decisions.
//
// The CLI imports only engine (internal/lint): the store and epoch
// sentinels are recognised through engine's re-exports, by their messages
// when a wrap lost them (transientTexts, pinned to the sentinels by
// TestTransientTexts), and by the GaveUp counter.

// transientTexts are the messages of the sentinels a restart can get past:
// store.ErrTransient, epoch.ErrCommitUnknown, store.ErrOutcomeUnknown. Every
// error that wraps one of them (with %w or %v) contains its message.
var transientTexts = []string{"transient storage error", "commit outcome unknown", "conditional write outcome unknown"}

// restartable reports whether a failed attempt is restarted; storeGaveUp
// says that the attempt's object-store retries gave up on an operation
// after its last commit.
func restartable(err error, storeGaveUp bool) bool {
	var ee *exitError
	switch {
	case err == nil:
		return false
	case errors.As(err, &ee),
		errors.Is(err, engine.ErrFenced), errors.Is(err, engine.ErrSuperseded),
		errors.Is(err, manifest.ErrCorrupt), errors.Is(err, spec.ErrInvalid),
		errors.Is(err, context.Canceled):
		return false
	case storeGaveUp,
		errors.Is(err, engine.ErrTransient), errors.Is(err, engine.ErrCommitUnknown), errors.Is(err, engine.ErrOutcomeUnknown):
		return true
	}
	// Errors wrapped with %v lose their sentinel: match its message.
	msg := err.Error()
	for _, s := range transientTexts {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// restartPolicy bounds the restarts of a --trigger worker.
type restartPolicy struct {
	// max is the number of consecutive failed attempts that are restarted
	// (0: the first failure is final).
	max int
	// base is the delay before the first restart; it doubles with each
	// consecutive failure up to maxDelay. The actual delay is uniform in
	// [d/2, d] (jitter: workers that failed together do not come back in
	// step, and none retries at once).
	base, maxDelay time.Duration
	// rand returns a number in [0, 1) (nil: math/rand/v2).
	rand func() float64
}

// Defaults of the restart policy.
const (
	defaultMaxRestarts     = 10
	defaultRestartBackoff  = time.Second
	defaultRestartMaxDelay = 5 * time.Minute
)

// delay returns the wait before the restart after the n-th consecutive
// failure (n >= 1).
func (rp restartPolicy) delay(n int) time.Duration {
	d := rp.base
	for i := 1; i < n && d < rp.maxDelay; i++ {
		d *= 2
	}
	d = min(d, max(rp.maxDelay, rp.base))
	r := rp.rand
	if r == nil {
		r = rand.Float64
	}
	return d/2 + time.Duration(r()*float64(d-d/2))
}

// attempt is the outcome of one engine.Run of a --trigger worker.
type attempt struct {
	res *engine.Result
	err error
	// storeGaveUp: the object-store retries gave up on an operation after
	// the attempt's last commit (see restartable).
	storeGaveUp bool
}

// supervisor runs the attempts of a --trigger worker.
type supervisor struct {
	policy restartPolicy
	log    *slog.Logger
	stop   <-chan struct{} // a graceful stop: no restart after it
	// restoring: the first attempt restores something (--reset-state); a
	// restart before its first epoch committed could restore again, so
	// failures are final until then.
	restoring bool
	// run runs one attempt; restored says that an epoch has been committed
	// by an earlier attempt (restore options must not be applied again).
	run func(ctx context.Context, restored bool) attempt
	// onFailure is called after each failed attempt with the consecutive
	// failures so far, and onRestart before each restart (nil: nothing).
	onFailure, onRestart func(failures int)
	// sleep waits d or until stop or ctx ends; false when it did not wait
	// the whole d (nil: a timer).
	sleep func(ctx context.Context, d time.Duration) bool
}

// giveUpError is the error of a worker that exhausted --max-restarts.
type giveUpError struct {
	failures, max int
	cause         error
}

func (e *giveUpError) Error() string {
	return fmt.Sprintf("giving up after %d consecutive failed attempts (--max-restarts %d; a committed epoch resets the count): %v",
		e.failures, e.max, e.cause)
}

func (e *giveUpError) Unwrap() error { return e.cause }

// supervise runs attempts until one ends without error, one fails in a way
// that is not restarted, the restarts are exhausted, or a stop or the
// context ends the wait before a restart. It returns what all the attempts
// committed together (nil when no attempt got as far as a result).
func (s *supervisor) supervise(ctx context.Context) (*engine.Result, error) {
	var total *engine.Result
	failures := 0
	committed := false
	for {
		a := s.run(ctx, committed)
		total = mergeResults(total, a.res)
		if a.err == nil {
			return total, nil
		}
		if a.res != nil && a.res.Epochs > 0 {
			failures = 0 // this attempt committed: the failures before it are over
			committed = true
		}
		failures++
		if s.onFailure != nil {
			s.onFailure(failures)
		}
		if ctx.Err() != nil || stopped(s.stop) || !restartable(a.err, a.storeGaveUp) {
			return total, a.err
		}
		if s.restoring && !committed {
			return total, fmt.Errorf("%w (not restarted: --reset-state is restarted only after its first epoch commits, so that it never resets twice; run the command again once the store is back)", a.err)
		}
		if failures > s.policy.max {
			if s.policy.max == 0 {
				return total, a.err
			}
			ge := &giveUpError{failures: failures, max: s.policy.max, cause: a.err}
			s.log.Error("giving up: the worker failed too many times in a row", "failures", failures, "max_restarts", s.policy.max, "cause", a.err.Error())
			return total, ge
		}
		d := s.policy.delay(failures)
		s.log.Warn("attempt failed; restarting from the last committed epoch", "attempt", failures, "max_restarts", s.policy.max,
			"delay", d.Round(time.Millisecond).String(), "cause", a.err.Error())
		if s.onRestart != nil {
			s.onRestart(failures)
		}
		if !s.wait(ctx, d) {
			return total, fmt.Errorf("stopped while waiting to restart after a failure: %w", a.err)
		}
	}
}

func (s *supervisor) wait(ctx context.Context, d time.Duration) bool {
	if s.sleep != nil {
		return s.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

func stopped(stop <-chan struct{}) bool {
	if stop == nil {
		return false
	}
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// mergeResults adds the result of a later attempt b to a (either may be
// nil): sums of what was committed, the head and locations of the latest.
func mergeResults(a, b *engine.Result) *engine.Result {
	if b == nil {
		return a
	}
	if a == nil {
		c := *b
		c.Outputs = append([]string(nil), b.Outputs...)
		return &c
	}
	c := *a
	if c.Epochs == 0 {
		c.FirstEpoch = b.FirstEpoch
	}
	c.Epochs += b.Epochs
	c.LastEpoch = max(c.LastEpoch, b.LastEpoch)
	if b.Generation != 0 {
		c.Generation = b.Generation
	}
	c.Files += b.Files
	c.Rows += b.Rows
	c.RowsOut += b.RowsOut
	c.RowsLate += b.RowsLate
	c.RowsRejected += b.RowsRejected
	c.Watermark = b.Watermark
	c.Outputs = append(c.Outputs, b.Outputs...)
	c.Requests = addRequests(c.Requests, b.Requests)
	if b.SinkURL != "" {
		c.SinkURL = b.SinkURL
	}
	if b.StateURL != "" {
		c.StateURL = b.StateURL
	}
	c.UntilReached = b.UntilReached
	return &c
}

func addRequests(a, b engine.RequestStats) engine.RequestStats {
	a.Get.Calls += b.Get.Calls
	a.Get.Attempts += b.Get.Attempts
	a.Put.Calls += b.Put.Calls
	a.Put.Attempts += b.Put.Attempts
	a.List.Calls += b.List.Calls
	a.List.Attempts += b.List.Attempts
	a.Delete.Calls += b.Delete.Calls
	a.Delete.Attempts += b.Delete.Attempts
	a.Requests = a.Requests.Add(b.Requests)
	a.Retries += b.Retries
	a.Timeouts += b.Timeouts
	a.GaveUp += b.GaveUp
	a.Backoff += b.Backoff
	return a
}

// attemptRunner returns the attempts of a --trigger worker: engine.Run with
// opts, without the restore options once an earlier attempt committed (the
// restore is done), noting whether the store retries gave up on an
// operation after the attempt's last commit.
func attemptRunner(p *spec.Pipeline, opts engine.Options) func(ctx context.Context, restored bool) attempt {
	return func(ctx context.Context, restored bool) attempt {
		o := opts
		if restored {
			o.FromSavepoint, o.Claim, o.ResetState = "", false, false
		}
		var (
			mu       sync.Mutex
			seen     bool
			epoch    int64
			baseline int64 // GaveUp when this attempt last committed
		)
		o.Progress = func(pr engine.Progress) {
			mu.Lock()
			switch {
			case !seen:
				seen, epoch = true, pr.Epoch
			case pr.Epoch != epoch:
				epoch, baseline = pr.Epoch, pr.Requests.GaveUp
			}
			mu.Unlock()
			if opts.Progress != nil {
				opts.Progress(pr)
			}
		}
		res, err := engine.Run(ctx, p, o)
		a := attempt{res: res, err: err}
		if res != nil {
			mu.Lock()
			a.storeGaveUp = res.Requests.GaveUp > baseline
			mu.Unlock()
		}
		return a
	}
}
