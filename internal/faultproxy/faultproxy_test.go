package faultproxy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/faultproxy"
)

// backend counts the requests that reach it and answers with a body.
func backend(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"abc"`)
		_, _ = io.WriteString(w, "0123456789abcdefghij")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func start(t *testing.T, target string) *faultproxy.Proxy {
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func get(ctx context.Context, url string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestKinds(t *testing.T) {
	srv, hits := backend(t)
	p := start(t, srv.URL)
	ctx := context.Background()
	for _, tc := range []struct {
		kind     faultproxy.Kind
		status   int    // 0: want a transport error
		body     string // checked when status != 0
		forwards bool
		bodyErr  bool
	}{
		{kind: faultproxy.Pass, status: 200, body: "0123456789abcdefghij", forwards: true},
		{kind: faultproxy.SlowDown, status: 503, body: "<Code>SlowDown</Code>"},
		{kind: faultproxy.InternalError, status: 500, body: "<Code>InternalError</Code>"},
		{kind: faultproxy.Reset},
		{kind: faultproxy.LostResponse, forwards: true},
		{kind: faultproxy.Tear, status: 200, forwards: true, bodyErr: true},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			p.SetRules(faultproxy.Rule{Kind: tc.kind, Times: 1})
			before := hits.Load()
			status, body, err := get(ctx, p.URL+"/bucket/key")
			switch {
			case tc.bodyErr:
				if !errors.Is(err, io.ErrUnexpectedEOF) || status != tc.status || body != "0123456789" {
					t.Fatalf("got %d %q %v, want %d, half the body and an unexpected EOF", status, body, err, tc.status)
				}
			case tc.status == 0:
				if err == nil {
					t.Fatalf("got %d %q, want a transport error", status, body)
				}
			default:
				if err != nil || status != tc.status || !strings.Contains(body, tc.body) {
					t.Fatalf("got %d %q %v, want %d %q", status, body, err, tc.status, tc.body)
				}
			}
			if got := hits.Load() - before; got != map[bool]int64{true: 1, false: 0}[tc.forwards] {
				t.Fatalf("backend saw %d requests", got)
			}
			// Times: 1 — the next request passes.
			if status, _, err := get(ctx, p.URL+"/bucket/key"); err != nil || status != 200 {
				t.Fatalf("next request: %d %v", status, err)
			}
		})
	}
	if c := p.Counts()["GET"]; c != 12 {
		t.Fatalf("Counts()[GET] = %d, want 12", c)
	}
}

func TestStallUntilRelease(t *testing.T) {
	srv, hits := backend(t)
	p := start(t, srv.URL)
	p.StallAll()
	// A client that gives up is not forwarded.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := get(ctx, p.URL+"/b/k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled GET: %v, want the client's deadline", err)
	}
	done := make(chan error, 1)
	go func() {
		status, _, err := get(context.Background(), p.URL+"/b/k")
		if err == nil && status != 200 {
			err = errors.New(http.StatusText(status))
		}
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for p.Stalled() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("request never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("stalled request answered: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	p.Release()
	if err := <-done; err != nil {
		t.Fatalf("released request: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("backend saw %d requests, want 1 (the released one)", hits.Load())
	}
}

func TestRandomIsSeeded(t *testing.T) {
	srv, _ := backend(t)
	run := func() []string {
		p := start(t, srv.URL)
		p.SetRandom(faultproxy.Random{P: 0.5, Seed: 7, Kinds: []faultproxy.Kind{faultproxy.SlowDown, faultproxy.InternalError}})
		for range 20 {
			_, _, _ = get(context.Background(), p.URL+"/b/k")
		}
		return p.Log()
	}
	a, b := run(), run()
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("same seed, different faults:\n%s\n--\n%s", a, b)
	}
	if !strings.Contains(strings.Join(a, "\n"), "slowdown") {
		t.Fatalf("no fault in 20 draws at P=0.5: %s", a)
	}
}

func TestRandomKeepsConditionalWritesUnambiguous(t *testing.T) {
	srv, _ := backend(t)
	p := start(t, srv.URL)
	p.SetRandom(faultproxy.Random{P: 1, Seed: 1, Kinds: []faultproxy.Kind{faultproxy.LostResponse, faultproxy.Tear}})
	req, _ := http.NewRequest(http.MethodPut, p.URL+"/b/k", strings.NewReader("x"))
	req.Header.Set("If-None-Match", "*")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("conditional PUT got %d, want 503 (an unapplied fault)", resp.StatusCode)
	}
}

func TestLoopbackOnly(t *testing.T) {
	if _, err := faultproxy.Start("http://192.0.2.1:9000"); !errors.Is(err, faultproxy.ErrNotLoopback) {
		t.Fatalf("non-loopback target: %v", err)
	}
}

func TestStallBodyAndDrip(t *testing.T) {
	srv, _ := backend(t)
	p := start(t, srv.URL)
	p.SetRules(faultproxy.Rule{Kind: faultproxy.StallBody, Times: 1}, faultproxy.Rule{Kind: faultproxy.Drip, Delay: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	status, body, err := get(ctx, p.URL+"/b/k")
	if status != 200 || body != "0123456789" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stall-body: %d %q %v, want 200, half the body, then the client's deadline", status, body, err)
	}
	start := time.Now()
	status, body, err = get(context.Background(), p.URL+"/b/k")
	if err != nil || status != 200 || body != "0123456789abcdefghij" {
		t.Fatalf("drip: %d %q %v", status, body, err)
	}
	if d := time.Since(start); d < 9*20*time.Millisecond {
		t.Fatalf("drip took %v, want at least 180ms", d)
	}
}
