package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

func TestOpenRejects(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"relative/dir", "absolute"},
		{"file://host/dir", "no host"},
		{"file:///tmp/x?metadata=skip", "no query"},
		{"mem://?x=1", "no query"},
		{"gs://bucket", "unsupported scheme"},
		{"s3:///prefix", "bucket"},
		{"s3://bucket?bogus=1", "bogus"},
		{"s3://bucket?use_path_style=maybe", "use_path_style"},
		{"s3://AKIAEXAMPLE:topsecret@bucket", "credentials"},
		{"s3://bucket/a//b?region=us-east-1", "prefix"},
	} {
		s, err := store.Open(context.Background(), tc.url)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want it to mention %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), "topsecret") || strings.Contains(err.Error(), "AKIAEXAMPLE") {
			t.Errorf("Open(%q) error shows credentials: %v", tc.url, err)
		}
	}
}

func TestOpenStripsFloeParams(t *testing.T) {
	s := openURL(t, "mem://?floe_anything=1")
	s.Close()
	url := s3test.Shared(t).NewBucket(t) + "&floe_retry=3"
	s = openURL(t, url)
	defer s.Close()
	if _, err := s.Put(context.Background(), "k", []byte("x"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFileCreatesDirOnFirstWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := openURL(t, "file://"+dir)
	defer s.Close()
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("root created by Open; it must wait for the first write")
	}
	if objs, err := s.List(context.Background(), ""); err != nil || len(objs) != 0 {
		t.Fatalf("list of a missing root = %v, %v; want empty", objs, err)
	}
	if _, err := s.Put(context.Background(), "k", []byte("x"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("root not created by the first write: %v", err)
	}
}

// TestS3PrefixLayout checks that s3://bucket/a/b puts objects under "a/b/"
// of the bucket.
func TestS3PrefixLayout(t *testing.T) {
	root := s3test.Shared(t).NewBucket(t)
	i := strings.Index(root, "?")
	prefixed := openURL(t, root[:i]+"/pipe/line"+root[i:])
	defer prefixed.Close()
	whole := openURL(t, root)
	defer whole.Close()
	ctx := context.Background()
	if _, err := prefixed.Put(ctx, "gen=1/_generation.json", []byte("g"), store.PutOptions{IfNotExist: true}); err != nil {
		t.Fatal(err)
	}
	infos, err := whole.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Key != "pipe/line/gen=1/_generation.json" {
		t.Fatalf("bucket holds %+v, want pipe/line/gen=1/_generation.json", infos)
	}
}

// TestS3ServerDownIsTransient: a refused connection is ErrTransient, and
// WithRetry retries it.
func TestS3ServerDownIsTransient(t *testing.T) {
	srv := s3test.Start(t)
	s := openURL(t, srv.NewBucket(t))
	defer s.Close()
	srv.Stop()
	ctx := context.Background()
	_, _, err := s.Get(ctx, "k")
	if !errors.Is(err, store.ErrTransient) {
		t.Fatalf("Get from a stopped server: %v, want ErrTransient", err)
	}
	_, err = s.Put(ctx, "k", []byte("x"), store.PutOptions{IfNotExist: true})
	if !errors.Is(err, store.ErrTransient) || errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("Put to a stopped server: %v, want ErrTransient only", err)
	}
	r := store.WithRetry(s, store.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, Seed: 1})
	if _, err := r.List(ctx, ""); !errors.Is(err, store.ErrTransient) || r.Retries() != 2 {
		t.Fatalf("List with retries: %v after %d retries", err, r.Retries())
	}
}

// TestFileHidesInternals: temp and lock files never appear in List, a crashed
// writer's stale temp file is swept on Open, and Delete removes emptied
// directories.
func TestFileHidesInternals(t *testing.T) {
	root := t.TempDir()
	s := openURL(t, root)
	ctx := context.Background()
	for _, k := range []string{"gen=1/epoch=1/a", "gen=1/epoch=1/b", "x"} {
		if _, err := s.Put(ctx, k, []byte(k), store.PutOptions{IfNotExist: true}); err != nil {
			t.Fatal(err)
		}
	}
	// A crashed writer's temp file, and a nested store's internals.
	stale := filepath.Join(root, ".floe-tmp", "deadbeef")
	if err := os.WriteFile(stale, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	nested := openURL(t, filepath.Join(root, "gen=1", "sink"))
	if _, err := nested.Put(ctx, "part-0", []byte("p"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gen=1/epoch=1/a", "gen=1/epoch=1/b", "gen=1/sink/part-0", "x"}
	if got := keys(infos); !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	s2 := openURL(t, root) // sweeps stale temp files
	defer s2.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp file not swept: %v", err)
	}
	for _, k := range []string{"gen=1/epoch=1/a", "gen=1/epoch=1/b"} {
		if err := s2.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "gen=1", "epoch=1")); !os.IsNotExist(err) {
		t.Fatalf("emptied directory left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "gen=1", "sink", "part-0")); err != nil {
		t.Fatalf("Delete removed a sibling: %v", err)
	}
}

func keys(infos []store.ObjectInfo) []string {
	out := make([]string, len(infos))
	for i, o := range infos {
		out[i] = o.Key
	}
	return out
}
