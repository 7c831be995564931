package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// proxied returns a fresh bucket's URL through a new fault proxy, and the
// bucket's direct URL.
func proxied(t *testing.T) (p *faultproxy.Proxy, viaProxy, direct string) {
	t.Helper()
	srv := s3test.Shared(t)
	direct = srv.NewBucket(t)
	p, err := faultproxy.Start(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, s3test.Via(direct, p.URL), direct
}

// testCtx guards a test against the hang it checks for.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// checkOneLine checks err is one line that mentions every want.
func checkOneLine(t *testing.T, err error, want ...string) {
	t.Helper()
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
}

// TestStallingServerGet: an S3 server that accepts the connection and never
// answers. The Get fails within the retry budget plus one request deadline,
// with ErrTransient and a one-line error naming op, key and deadline.
func TestStallingServerGet(t *testing.T) {
	p, via, _ := proxied(t)
	p.StallAll()
	s := store.WithRetry(openURL(t, via), store.RetryPolicy{
		RequestTimeout: 200 * time.Millisecond, MaxElapsed: 600 * time.Millisecond,
		BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Seed: 1,
	})
	defer s.Close()
	ctx := testCtx(t, 20*time.Second)
	start := time.Now()
	_, _, err := s.Get(ctx, "_latest.json")
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("Get hung until the test's guard: %v", err)
	}
	if !errors.Is(err, store.ErrTransient) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTransient and no context error", err)
	}
	var te *store.TimeoutError
	if !errors.As(err, &te) || te.Deadline != "request" || te.Op != "get" || te.Key != "_latest.json" {
		t.Fatalf("err = %v, want a request *TimeoutError for get _latest.json", err)
	}
	checkOneLine(t, err, "get", `"_latest.json"`, "request deadline", "200ms", "retry budget 600ms")
	if limit := 600*time.Millisecond + 200*time.Millisecond + 500*time.Millisecond; took > limit {
		t.Fatalf("took %v, want at most %v", took, limit)
	}
	st := s.Stats()
	if st.Get.Calls != 1 || st.Get.Attempts < 2 || st.Timeouts != st.Get.Attempts || st.GaveUp != 1 {
		t.Fatalf("stats = %+v", st)
	}
	t.Logf("%v after %v; %+v", err, took, st)
}

// TestStallingServerOperationDeadline: with the request deadline disabled,
// the operation deadline still ends the call, as a one-line transient error.
func TestStallingServerOperationDeadline(t *testing.T) {
	p, via, _ := proxied(t)
	p.StallAll()
	s := store.WithRetry(openURL(t, via), store.RetryPolicy{RequestTimeout: -1, OpTimeout: 300 * time.Millisecond, Seed: 1})
	ctx := testCtx(t, 20*time.Second)
	start := time.Now()
	err := s.Delete(ctx, "gen=1/x")
	var te *store.TimeoutError
	if !errors.As(err, &te) || te.Deadline != "operation" || !errors.Is(err, store.ErrTransient) {
		t.Fatalf("err = %v, want an operation *TimeoutError", err)
	}
	checkOneLine(t, err, "delete", `"gen=1/x"`, "operation deadline", "300ms")
	if took := time.Since(start); took > 300*time.Millisecond+500*time.Millisecond {
		t.Fatalf("took %v", took)
	}
}

// TestIdleDeadline: a response body that stops arriving half-way fails the
// Get after the idle deadline; one that arrives slowly but steadily is not
// cut even though the whole transfer takes longer than both deadlines.
func TestIdleDeadline(t *testing.T) {
	p, via, _ := proxied(t)
	s := store.WithRetry(openURL(t, via), store.RetryPolicy{
		MaxAttempts: 1, RequestTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond, Seed: 1,
	})
	ctx := testCtx(t, 20*time.Second)
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)
	if _, err := s.Put(ctx, "big", data, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	p.SetRules(faultproxy.Rule{Match: faultproxy.Method("GET"), Kind: faultproxy.StallBody, Times: 1},
		faultproxy.Rule{Match: faultproxy.Method("GET"), Kind: faultproxy.Drip, Delay: 100 * time.Millisecond})
	start := time.Now()
	_, _, err := s.Get(ctx, "big")
	var te *store.TimeoutError
	if !errors.As(err, &te) || te.Deadline != "idle" || !errors.Is(err, store.ErrTransient) {
		t.Fatalf("stalled body: err = %v, want an idle *TimeoutError", err)
	}
	checkOneLine(t, err, "get", `"big"`, "idle deadline", "300ms")
	if took := time.Since(start); took > 300*time.Millisecond+700*time.Millisecond {
		t.Fatalf("stalled body: took %v", took)
	}
	start = time.Now()
	got, _, err := s.Get(ctx, "big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("dripped body: %d bytes, %v", len(got), err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("dripped body took only %v: the drip rule did not apply", took)
	}
}

// TestStallThenRecover: the server stalls, then answers again; operations
// with retries succeed, and the stats show the retries.
func TestStallThenRecover(t *testing.T) {
	p, via, _ := proxied(t)
	s := store.WithRetry(openURL(t, via), store.RetryPolicy{
		RequestTimeout: 250 * time.Millisecond, MaxElapsed: 10 * time.Second,
		BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond, Seed: 1,
	})
	ctx := testCtx(t, 30*time.Second)
	if _, err := s.Put(ctx, "_latest.json", []byte("v1"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	p.StallAll()
	go func() {
		time.Sleep(time.Second)
		p.Release()
	}()
	data, _, err := s.Get(ctx, "_latest.json")
	if err != nil || string(data) != "v1" {
		t.Fatalf("Get across the stall: %q, %v", data, err)
	}
	// Unconditional: under load a conditional write slower than the short
	// request deadline would rightly end in ErrOutcomeUnknown.
	if _, err := s.Put(ctx, "_latest.json", []byte("v2"), store.PutOptions{}); err != nil {
		t.Fatalf("Put after the stall: %v", err)
	}
	if objs, err := s.List(ctx, ""); err != nil || len(objs) != 1 {
		t.Fatalf("List after the stall: %v, %v", objs, err)
	}
	d := s.Stats().Sub(before)
	if d.Get.Calls != 1 || d.Get.Attempts < 2 || d.Retries < 1 || d.Timeouts < 1 || d.GaveUp != 0 {
		t.Fatalf("stats across the stall = %+v", d)
	}
	t.Logf("stats across the stall: %+v", d)
}

// TestDeleteIsOneRequest: a retention delete costs one DeleteObject, for an
// existing and for a missing key, with and without a key prefix.
func TestDeleteIsOneRequest(t *testing.T) {
	p, via, _ := proxied(t)
	i := strings.Index(via, "?")
	for _, u := range []string{via, via[:i] + "/pipe/line" + via[i:]} {
		s := openURL(t, u)
		ctx := testCtx(t, 20*time.Second)
		if _, err := s.Put(ctx, "gen=1/epoch=2/a/s=0.parquet", []byte("x"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"gen=1/epoch=2/a/s=0.parquet", "gen=1/epoch=2/a/s=0.parquet", "never/was"} {
			p.ResetCounts()
			if err := s.Delete(ctx, key); err != nil {
				t.Fatalf("Delete(%q): %v", key, err)
			}
			if got := p.Counts(); len(got) != 1 || got["DELETE"] != 1 {
				t.Fatalf("Delete(%q) via %s sent %v, want one DELETE", key, u, got)
			}
		}
		if _, _, err := s.Get(ctx, "gen=1/epoch=2/a/s=0.parquet"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get after Delete: %v", err)
		}
		s.Close()
	}
}

// TestLostResponseConditionalWrite: a create whose response is lost after
// it landed, retried, ends in ErrOutcomeUnknown on a real S3 server, and
// reading back resolves it.
func TestLostResponseConditionalWrite(t *testing.T) {
	p, via, _ := proxied(t)
	p.SetRules(faultproxy.Rule{Match: faultproxy.And(faultproxy.Method("PUT"), faultproxy.Conditional), Kind: faultproxy.LostResponse, Times: 1})
	s := store.WithRetry(openURL(t, via), store.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxElapsed: 5 * time.Second, Seed: 1})
	ctx := testCtx(t, 20*time.Second)
	_, err := s.Put(ctx, "gen=1/epoch=1/_manifest.json", []byte("attempt-A"), store.PutOptions{IfNotExist: true})
	if !errors.Is(err, store.ErrOutcomeUnknown) || !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown; proxy log %q", err, p.Log())
	}
	if data, _, err := s.Get(ctx, "gen=1/epoch=1/_manifest.json"); err != nil || string(data) != "attempt-A" {
		t.Fatalf("read back: %q, %v", data, err)
	}
}
