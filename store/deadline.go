package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Default request deadlines of S3 stores. A RetryPolicy overrides them per
// call (RequestTimeout, IdleTimeout); a Store used without WithRetry gets
// these.
const (
	// DefaultRequestTimeout bounds the wait for a response's headers,
	// counted from the last byte of the request sent (and restarted by every
	// chunk of request body the transport takes). Every S3 request is
	// metadata-sized up to its headers, so this is what bounds a server that
	// accepts a connection and never answers.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultIdleTimeout bounds the time without progress while a response
	// body is read. A large body that keeps moving is never cut.
	DefaultIdleTimeout = 30 * time.Second
)

// TimeoutError is a request, attempt or operation that hit one of its
// deadlines. It matches ErrTransient: the operation may be retried, and for a
// write its outcome is unknown. Its message is one line naming the
// operation, the key and the deadline.
type TimeoutError struct {
	Op  string // "get", "put", "list", "delete"
	Key string // the key (List: the prefix)
	// Deadline names the bound that was hit: "request" (no response
	// headers), "idle" (a response body made no progress), "attempt"
	// (RetryPolicy.AttemptTimeout) or "operation" (RetryPolicy.OpTimeout).
	Deadline string
	Limit    time.Duration
}

// Error implements error.
func (e *TimeoutError) Error() string {
	var what string
	switch e.Deadline {
	case "request":
		what = "no response within the request deadline"
	case "idle":
		what = "response stalled longer than the idle deadline"
	default:
		what = "exceeded the " + e.Deadline + " deadline"
	}
	return fmt.Sprintf("store: %s %q: %s of %v: %v", e.Op, e.Key, what, e.Limit, ErrTransient)
}

// Is matches ErrTransient.
func (e *TimeoutError) Is(target error) bool { return target == ErrTransient }

// Timeout reports true, as net.Error does for a timeout.
func (e *TimeoutError) Timeout() bool { return true }

// requestDeadlines are the per-request bounds the S3 transport enforces. A
// zero field takes the store's default; a negative one disables the bound.
type requestDeadlines struct {
	request, idle time.Duration
}

type requestDeadlinesKey struct{}

// withRequestDeadlines returns ctx carrying d for the S3 transport.
func withRequestDeadlines(ctx context.Context, d requestDeadlines) context.Context {
	if d == (requestDeadlines{}) {
		return ctx
	}
	return context.WithValue(ctx, requestDeadlinesKey{}, d)
}

// transportTimeout is the error the deadline transport returns in place of
// the cancellation it caused. bucketStore turns it into a *TimeoutError.
type transportTimeout struct {
	deadline string // "request" or "idle"
	limit    time.Duration
}

func (e *transportTimeout) Error() string {
	if e.deadline == "idle" {
		return fmt.Sprintf("response body made no progress for %v", e.limit)
	}
	return fmt.Sprintf("no response headers within %v", e.limit)
}
func (e *transportTimeout) Is(target error) bool { return target == ErrTransient }
func (e *transportTimeout) Timeout() bool        { return true }
func (e *transportTimeout) Temporary() bool      { return true }

// deadlineTransport enforces requestDeadlines on every request through base:
// a watchdog that is armed while the request waits for its response headers
// (restarted by every read of the request body, so a large upload that keeps
// moving is not cut) and while each Read of the response body waits for
// data. When it fires it cancels the request and the caller sees a
// *transportTimeout (ErrTransient) instead of a context error.
type deadlineTransport struct {
	base http.RoundTripper
	def  requestDeadlines
}

func (t *deadlineTransport) deadlines(ctx context.Context) requestDeadlines {
	d := t.def
	if v, ok := ctx.Value(requestDeadlinesKey{}).(requestDeadlines); ok {
		if v.request != 0 {
			d.request = v.request
		}
		if v.idle != 0 {
			d.idle = v.idle
		}
	}
	return d
}

// RoundTrip implements http.RoundTripper.
func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	d := t.deadlines(req.Context())
	ctx, cancel := context.WithCancel(req.Context())
	w := &watchdog{cancel: cancel}
	r2 := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		r2.Body = &progressBody{ReadCloser: req.Body, w: w, limit: d.request}
	}
	w.arm("request", d.request)
	resp, err := t.base.RoundTrip(r2)
	w.endRequest()
	if err != nil {
		w.stop()
		cancel()
		if te := w.fired(); te != nil {
			return nil, te
		}
		return nil, err
	}
	resp.Body = &idleBody{ReadCloser: resp.Body, w: w, limit: d.idle}
	return resp, nil
}

// watchdog cancels a request when its deadline passes and remembers why.
// arm is cheap (it moves the due time; one timer per request), so it can be
// called for every chunk of a body.
type watchdog struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	timer  *time.Timer
	// scheduled is when the timer fires (zero: not pending).
	scheduled time.Time
	active    bool
	due       time.Time
	deadline  string
	limit     time.Duration
	// headersDone ends the request phase: a late read of the request body
	// by the transport must not re-arm it.
	headersDone bool
	err         *transportTimeout
}

func (w *watchdog) arm(deadline string, limit time.Duration) {
	if limit <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || (deadline == "request" && w.headersDone) {
		return
	}
	now := time.Now()
	w.active, w.deadline, w.limit, w.due = true, deadline, limit, now.Add(limit)
	switch {
	case w.timer == nil:
		w.timer = time.AfterFunc(limit, w.fire)
		w.scheduled = w.due
	case w.scheduled.IsZero() || w.due.Before(w.scheduled):
		w.timer.Reset(limit)
		w.scheduled = w.due
	}
}

func (w *watchdog) fire() {
	w.mu.Lock()
	if !w.active || w.err != nil {
		w.scheduled = time.Time{}
		w.mu.Unlock()
		return
	}
	if rem := time.Until(w.due); rem > 0 {
		w.timer.Reset(rem)
		w.scheduled = w.due
		w.mu.Unlock()
		return
	}
	w.scheduled = time.Time{}
	w.err = &transportTimeout{deadline: w.deadline, limit: w.limit}
	w.mu.Unlock()
	w.cancel()
}

// disarm suspends the deadline; a pending timer that fires finds it inactive.
func (w *watchdog) disarm() {
	w.mu.Lock()
	w.active = false
	w.mu.Unlock()
}

// endRequest ends the request phase (the headers arrived).
func (w *watchdog) endRequest() {
	w.mu.Lock()
	w.active, w.headersDone = false, true
	w.mu.Unlock()
}

// stop releases the timer.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.active, w.headersDone = false, true
	if w.timer != nil {
		w.timer.Stop()
		w.scheduled = time.Time{}
	}
	w.mu.Unlock()
}

// fired returns the timeout that fired, or nil.
func (w *watchdog) fired() *transportTimeout {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// progressBody restarts the request watchdog on every read of the request
// body: the wait for the response is counted from the last byte sent.
type progressBody struct {
	io.ReadCloser
	w     *watchdog
	limit time.Duration
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.arm("request", b.limit)
	}
	return n, err
}

// idleBody bounds each Read of a response body by the idle deadline and
// releases the request's context on Close.
type idleBody struct {
	io.ReadCloser
	w     *watchdog
	limit time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.w.arm("idle", b.limit)
	n, err := b.ReadCloser.Read(p)
	b.w.disarm()
	if err != nil && !errors.Is(err, io.EOF) {
		if te := b.w.fired(); te != nil {
			return n, te
		}
	}
	return n, err
}

func (b *idleBody) Close() error {
	err := b.ReadCloser.Close()
	b.w.stop()
	b.w.cancel()
	return err
}
