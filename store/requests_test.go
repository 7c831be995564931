package store_test

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// serverRequests classifies what a proxy received the way store.Requests
// counts it.
func serverRequests(p *faultproxy.Proxy) store.Requests {
	var r store.Requests
	for _, q := range p.Requests() {
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

// bucketDir is the directory versitygw serves the bucket of storeURL from.
func bucketDir(t *testing.T, storeURL string) string {
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestRequestsEqualServer: the requests an S3 store counts equal what the
// server received, kind by kind: every LIST page (2,500 keys are three
// pages), every part of a multipart upload, every HEAD, and every retry
// of a request the proxy failed with 503 or 500 or reset.
func TestRequestsEqualServer(t *testing.T) {
	p, via, direct := proxied(t)
	ctx := testCtx(t, 3*time.Minute)
	// 2,500 objects written into the served directory (fast, uncounted).
	dir := filepath.Join(s3test.Shared(t).Dir, bucketDir(t, direct))
	for i := range 2500 {
		f := filepath.Join(dir, "in", fmt.Sprintf("k%05d.txt", i))
		if i == 0 {
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := store.WithRetry(openURL(t, via), store.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Seed: 7})
	defer s.Close()
	p.SetRandom(faultproxy.Random{P: 0.2, Seed: 3, Kinds: []faultproxy.Kind{faultproxy.SlowDown, faultproxy.InternalError, faultproxy.Reset}})

	objs, err := s.List(ctx, "in/")
	if err != nil || len(objs) != 2500 {
		t.Fatalf("List: %d objects, %v", len(objs), err)
	}
	after, err := store.ListAfter(ctx, s, "in/", "in/k02399.txt")
	if err != nil || len(after) != 100 || after[0].Key != "in/k02400.txt" {
		t.Fatalf("ListAfter: %d objects, %v", len(after), err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 17<<20/16) // 17 MiB: multipart
	if _, err := s.Put(ctx, "big", big, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Read(ctx, s, "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "small", []byte("s"), store.PutOptions{IfNotExist: true}); err != nil && !strings.Contains(err.Error(), "precondition") {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	got, want := s.Stats().Requests, serverRequests(p)
	t.Logf("store counted %+v; server received %+v; retries %d; faults %s", got, want, s.Stats().Retries, p.FaultSummary())
	if got != want {
		t.Fatalf("store counted %+v, server received %+v", got, want)
	}
	if s.Stats().Retries == 0 {
		t.Fatal("no retry happened: the test does not test retries")
	}
	if got.List < 3+1 || got.Put < 3 {
		t.Fatalf("lists %d (want >= 4: three pages and one StartAfter page), puts %d (want multipart: >= 3)", got.List, got.Put)
	}
}
