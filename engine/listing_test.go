package engine_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// proxiedEnv is an S3 env whose every store goes through a counting
// proxy; e.put writes directly (not counted).
func proxiedEnv(t *testing.T) (*env, *faultproxy.Proxy) {
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
	e.source, e.state, e.sink, e.late = s3test.Via(e.source, px.URL), s3test.Via(e.state, px.URL), s3test.Via(e.sink, px.URL), s3test.Via(e.late, px.URL)
	return e, px
}

// serverRequests classifies what the proxy received as store.Requests do.
func serverRequests(px *faultproxy.Proxy) store.Requests {
	var r store.Requests
	for _, q := range px.Requests() {
		switch store.S3Op(q.Method, q.Path, q.RawQuery, true) {
		case store.OpGet:
			r.Get++
		case store.OpPut:
			r.Put++
		case store.OpList:
			r.List++
		case store.OpDelete:
			r.Delete++
		}
	}
	return r
}

// TestRequestCountsEqualServer: a run's request counts (the Result, and
// the epochs' stats that history shows) are what the S3 server received,
// LIST pages included: 1,100 source files are two pages per listing.
func TestRequestCountsEqualServer(t *testing.T) {
	e, px := proxiedEnv(t)
	src, err := store.Open(context.Background(), e.source)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range 1100 {
		if _, err := src.Put(context.Background(), fmt.Sprintf("a/%04d.jsonl", i), jsonl(ev("00:00:10", "u1", 1)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := e.pipeline(t, windowSpec)
	p.Source.MaxFilesPerEpoch = 0
	run(t, p, engine.Options{}) // the first run reads them all
	e.put(t, "b/0000.jsonl", jsonl(ev("00:01:10", "u1", 1)))
	px.ResetCounts()
	res := run(t, p, engine.Options{})
	got, want := res.Requests.Requests, serverRequests(px)
	t.Logf("one new file after 1,100: run counted %+v, server received %+v", got, want)
	if got != want {
		t.Fatalf("run counted %+v, server received %+v", got, want)
	}
	if got.List < 2 {
		t.Fatalf("lists = %d: the source listing alone is two pages", got.List)
	}
	recs, err := engine.History(context.Background(), p, 1)
	if err != nil || len(recs) != 1 || recs[0].Lists == nil {
		t.Fatalf("history: %v, %v", recs, err)
	}
	if r := recs[0]; *r.Gets+*r.Puts+*r.Lists+*r.Deletes > want.Total() || *r.Puts == 0 {
		t.Fatalf("epoch stats gets=%d puts=%d lists=%d deletes=%d: more than the server received (%+v), or no put", *r.Gets, *r.Puts, *r.Lists, *r.Deletes, want)
	}
}
