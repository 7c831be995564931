package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func TestClassify(t *testing.T) {
	api := func(code string) error {
		return fmt.Errorf("operation error S3: PutObject: %w", &smithy.GenericAPIError{Code: code, Message: "m"})
	}
	status := func(code int) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("x")}}
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"412", api("PreconditionFailed"), ErrPrecondition},
		{"409 conditional conflict", api("ConditionalRequestConflict"), ErrTransient},
		{"503 slow down", api("SlowDown"), ErrTransient},
		{"500", api("InternalError"), ErrTransient},
		{"no such key", api("NoSuchKey"), ErrNotFound},
		{"head 404", api("NotFound"), ErrNotFound},
		{"access denied", api("AccessDenied"), nil},
		{"bucket exists 409", api("BucketAlreadyOwnedByYou"), nil},
		{"bare 503", status(503), ErrTransient},
		{"bare 429", status(429), ErrTransient},
		{"bare 412", status(412), ErrPrecondition},
		{"bare 404", status(404), ErrNotFound},
		{"bare 403", status(403), nil},
		{"connection reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, ErrTransient},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), ErrTransient},
		{"unexpected EOF", fmt.Errorf("body: %w", io.ErrUnexpectedEOF), ErrTransient},
		{"caller deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), nil},
		{"caller cancel", context.Canceled, nil},
		{"already a sentinel", fmt.Errorf("x: %w", ErrPrecondition), ErrPrecondition},
		{"plain", errors.New("boom"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Fatalf("classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
			w := wrapErr("put", "k", tc.err)
			if tc.want != nil && !errors.Is(w, tc.want) {
				t.Fatalf("wrapErr does not match %v: %v", tc.want, w)
			}
			if !errors.Is(w, tc.err) {
				t.Fatalf("wrapErr lost the cause: %v", w)
			}
		})
	}
}

func TestBackoffFullJitter(t *testing.T) {
	p := RetryPolicy{BaseDelay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond, Seed: 99}
	a, b := WithRetry(nil, p), WithRetry(nil, p)
	var sum time.Duration
	for n := 1; n <= 200; n++ {
		bound := min(p.BaseDelay<<min(n-1, 20), p.MaxDelay)
		da, db := a.backoff(n), b.backoff(n)
		if da != db {
			t.Fatalf("retry %d: same seed gave %v and %v", n, da, db)
		}
		if da < 0 || da > bound {
			t.Fatalf("retry %d: sleep %v outside [0, %v]", n, da, bound)
		}
		sum += da
	}
	// Full jitter: the mean is about half the bound (80ms for most retries).
	if mean := sum / 200; mean < 25*time.Millisecond || mean > 55*time.Millisecond {
		t.Fatalf("mean sleep %v, want about 40ms", mean)
	}
	if WithRetry(nil, RetryPolicy{Seed: 1}).backoff(1) == WithRetry(nil, RetryPolicy{Seed: 2}).backoff(1) &&
		WithRetry(nil, RetryPolicy{Seed: 1}).backoff(3) == WithRetry(nil, RetryPolicy{Seed: 2}).backoff(3) {
		t.Fatal("different seeds give the same schedule")
	}
}

func TestCheckKey(t *testing.T) {
	for _, k := range []string{"a", "a/b", "gen=1/epoch=2/x y.parquet", ".hidden", "a/.floe", "a/floe-x"} {
		if err := checkKey(k); err != nil {
			t.Errorf("checkKey(%q) = %v", k, err)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", "..", "a/./b", ".floe-tmp", "a/.floe-x/b", "a\x00b", "\xff"} {
		if err := checkKey(k); err == nil {
			t.Errorf("checkKey(%q) accepted", k)
		}
	}
}

// TestOpenS3HasDefaultDeadlines: a Store from Open, used without WithRetry,
// still bounds every request.
func TestOpenS3HasDefaultDeadlines(t *testing.T) {
	s, err := Open(context.Background(), "s3://bucket/p?endpoint=http://127.0.0.1:1&use_path_style=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bs := s.(*bucketStore)
	hc, ok := bs.s3.Options().HTTPClient.(*http.Client)
	if !ok {
		t.Fatalf("S3 HTTP client is %T", bs.s3.Options().HTTPClient)
	}
	dt, ok := hc.Transport.(*deadlineTransport)
	if !ok || dt.def.request != DefaultRequestTimeout || dt.def.idle != DefaultIdleTimeout {
		t.Fatalf("S3 transport = %#v, want the deadline transport with the defaults", hc.Transport)
	}
}

// TestDeadlineTransportSilentServer: a server that accepts and never answers
// ends in a *transportTimeout (ErrTransient), not a hang or a context error.
func TestDeadlineTransportSilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, never answer
		}
	}()
	hc := &http.Client{Transport: &deadlineTransport{base: http.DefaultTransport.(*http.Transport).Clone(),
		def: requestDeadlines{request: 100 * time.Millisecond, idle: 100 * time.Millisecond}}}
	start := time.Now()
	_, err = hc.Get("http://" + ln.Addr().String() + "/b/k")
	var tt *transportTimeout
	if !errors.As(err, &tt) || !errors.Is(err, ErrTransient) || tt.deadline != "request" {
		t.Fatalf("err = %v, want a request transportTimeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
	// The context's deadlines override the defaults; negative disables.
	ctx, cancel := context.WithTimeout(withRequestDeadlines(context.Background(), requestDeadlines{request: -1}), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/b/k", nil)
	_, err = hc.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &tt) {
		t.Fatalf("with the request deadline disabled: %v, want the caller's deadline", err)
	}
}
