package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// stalledEnv is an S3 env whose state and sink go through a fault proxy
// (the source is read directly).
func stalledEnv(t *testing.T) (*env, *faultproxy.Proxy) {
	e := s3Env(t)
	u, err := url.Parse(e.state)
	if err != nil {
		t.Fatal(err)
	}
	px, err := faultproxy.Start(u.Query().Get("endpoint"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	e.state, e.sink = s3test.Via(e.state, px.URL), s3test.Via(e.sink, px.URL)
	return e, px
}

// TestStalledS3: a server that accepts requests and never answers makes
// `floe run` fail within its deadlines with a one-line message; a trigger
// worker whose server stalls for a while and then comes back continues and
// commits exactly the rows of an undisturbed run.
func TestStalledS3(t *testing.T) {
	ref := fileEnv(t)
	for i := range 4 {
		ref.put(t, fmt.Sprintf("%d.jsonl", i), jsonl(ev(fmt.Sprintf("00:0%d:10", i), "u1", i+1), ev(fmt.Sprintf("00:0%d:20", i), "u2", 1)))
	}
	run(t, ref.pipeline(t, windowSpec), engine.Options{Drain: true})
	want := committedRows(t, ref.pipeline(t, windowSpec))

	e, px := stalledEnv(t)
	for i := range 2 {
		e.put(t, fmt.Sprintf("%d.jsonl", i), jsonl(ev(fmt.Sprintf("00:0%d:10", i), "u1", i+1), ev(fmt.Sprintf("00:0%d:20", i), "u2", 1)))
	}
	p := e.pipeline(t, windowSpec)
	policy := store.RetryPolicy{RequestTimeout: 300 * time.Millisecond, MaxElapsed: 1500 * time.Millisecond}

	px.StallAll()
	t0 := time.Now()
	_, err := engine.Run(context.Background(), p, engine.Options{Retry: policy})
	took := time.Since(t0)
	px.Release()
	if err == nil || !errors.Is(err, store.ErrTransient) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("stalled server: %v; want a one-line transient error", err)
	}
	if took > 10*time.Second {
		t.Fatalf("stalled server: gave up after %v; the budget is %v", took, policy.MaxElapsed)
	}
	t.Logf("stalled run failed after %v: %v", took.Round(time.Millisecond), err)

	// A trigger worker across a stall that ends.
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := engine.Run(context.Background(), p, engine.Options{Trigger: 50 * time.Millisecond, Stop: stop,
			Retry: store.RetryPolicy{RequestTimeout: 300 * time.Millisecond, MaxElapsed: 20 * time.Second}})
		done <- err
	}()
	waitFor(t, func() bool { return len(committedRows(t, p)) > 0 })
	received := func() (n int) {
		for _, c := range px.Counts() {
			n += c
		}
		return n
	}
	before := received()
	px.StallAll()
	for i := 2; i < 4; i++ {
		e.put(t, fmt.Sprintf("%d.jsonl", i), jsonl(ev(fmt.Sprintf("00:0%d:10", i), "u1", i+1), ev(fmt.Sprintf("00:0%d:20", i), "u2", 1)))
	}
	time.Sleep(1500 * time.Millisecond)
	// A held request the client gave up on (its 300ms deadline) is no
	// longer held while the client backs off, so count arrivals.
	if received() == before {
		t.Fatal("no request reached the stalled proxy")
	}
	px.Release()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("trigger worker across a stall: %v", err)
	}
	run(t, p, engine.Options{Drain: true})
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the stall: %v, want %v", got, want)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 30s")
}

// TestS3FaultsThroughProxy: a whole run, state and sink behind a proxy that
// fails 20% of requests (503, 500, resets, lost responses, torn bodies;
// lost responses on conditional writes too), commits exactly the rows of
// an undisturbed run, and verify finds nothing wrong.
func TestS3FaultsThroughProxy(t *testing.T) {
	ref := fileEnv(t)
	e, px := stalledEnv(t)
	for i := range 6 {
		data := jsonl(ev(fmt.Sprintf("00:0%d:10", i), "u1", i+1), ev(fmt.Sprintf("00:0%d:20", i), fmt.Sprintf("u%d", i%3), 1))
		ref.put(t, fmt.Sprintf("%d.jsonl", i), data)
		e.put(t, fmt.Sprintf("%d.jsonl", i), data)
	}
	run(t, ref.pipeline(t, windowSpec), engine.Options{Drain: true})
	want := committedRows(t, ref.pipeline(t, windowSpec))
	p := e.pipeline(t, windowSpec)
	px.SetRandom(faultproxy.Random{P: 0.2, Seed: 5, Ambiguous: func(*http.Request) bool { return true },
		Kinds: []faultproxy.Kind{faultproxy.SlowDown, faultproxy.InternalError, faultproxy.Reset, faultproxy.LostResponse, faultproxy.Tear}})
	policy := store.RetryPolicy{RequestTimeout: 2 * time.Second, MaxElapsed: 30 * time.Second}
	for try := 0; ; try++ {
		// An ambiguous commit can end a run (fenced by its own lost write,
		// or an unknown outcome); the next run resolves it, as cron would.
		_, err := engine.Run(context.Background(), p, engine.Options{Drain: true, Retry: policy})
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("run %d through 20%% faults: %v", try, err)
		}
		t.Logf("run %d ended: %v", try, err)
	}
	px.SetRandom(faultproxy.Random{})
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("through faults: %v, want %v", got, want)
	}
	rep, err := engine.Verify(context.Background(), p)
	if err != nil || len(rep.Damaged) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
	t.Logf("faults injected: %s", px.FaultSummary())
}

// TestRequestCountsMatchServer: 30 epochs on S3 with every store behind a
// counting proxy: the run's request totals by kind equal the HTTP requests
// the server saw (no faults, so no retries), and history shows every
// epoch's recorded requests.
func TestRequestCountsMatchServer(t *testing.T) {
	e := s3Env(t)
	u, err := url.Parse(e.state)
	must(t, err)
	px, err := faultproxy.Start(u.Query().Get("endpoint"))
	must(t, err)
	t.Cleanup(px.Close)
	for i := range 30 {
		e.put(t, fmt.Sprintf("%02d.jsonl", i), jsonl(ev(fmt.Sprintf("00:%02d:10", i), "u1", i+1), ev(fmt.Sprintf("00:%02d:20", i), fmt.Sprintf("u%d", i%4), 1)))
	}
	e.source, e.state, e.sink, e.late = s3test.Via(e.source, px.URL), s3test.Via(e.state, px.URL), s3test.Via(e.sink, px.URL), s3test.Via(e.late, px.URL)
	p := e.pipeline(t, strings.Replace(windowSpec, "parallelism: 2}", "parallelism: 2, retain_epochs: 40}", 1))
	px.ResetCounts()
	res := run(t, p, engine.Options{})
	seen := px.Counts()
	r := res.Requests
	if res.Epochs != 30 || r.Retries != 0 {
		t.Fatalf("%d epochs, %d retries; want 30 epochs without retries", res.Epochs, r.Retries)
	}
	// A GET serves Get (and Read) calls and LIST pages; no HEAD is sent.
	if int64(seen["GET"]) != r.Get.Attempts+r.List.Attempts || int64(seen["PUT"]) != r.Put.Attempts ||
		int64(seen["DELETE"]) != r.Delete.Attempts || seen["HEAD"] != 0 {
		t.Fatalf("the server saw %v; the run counted %+v", seen, r)
	}
	hist, err := engine.History(context.Background(), p, 0)
	must(t, err)
	if len(hist) != 30 {
		t.Fatalf("history has %d epochs, want 30", len(hist))
	}
	var puts int64
	for _, h := range hist {
		if h.Puts == nil || h.Gets == nil || *h.Puts == 0 {
			t.Fatalf("epoch %d has no recorded requests: %+v", h.Epoch, h)
		}
		puts += *h.Puts
	}
	// Each epoch's record excludes its own manifest create and pointer swap.
	if puts+2*30 > r.Put.Attempts {
		t.Fatalf("history's PUTs (%d) plus 2 per commit exceed the run's %d", puts, r.Put.Attempts)
	}
	t.Logf("server saw %v; history PUTs %d of the run's %d", seen, puts, r.Put.Attempts)
}
