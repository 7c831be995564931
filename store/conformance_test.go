package store_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
	"github.com/floe-dev/floe/store/storetest"
)

func openURL(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	return s
}

func TestConformanceMem(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openURL(t, "mem://") })
}

func TestConformanceFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openURL(t, "file://"+t.TempDir()) })
}

func TestConformanceFilePlainPath(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openURL(t, t.TempDir()+"/nested/root") })
}

func TestConformanceS3(t *testing.T) {
	srv := s3test.Shared(t)
	storetest.Run(t, func(t *testing.T) store.Store { return openURL(t, srv.NewBucket(t)) })
}

// TestConformanceS3Prefix runs the suite under a key prefix of a bucket that
// also holds objects outside the prefix, which must stay invisible.
func TestConformanceS3Prefix(t *testing.T) {
	srv := s3test.Shared(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		root := srv.NewBucket(t)
		outside := openURL(t, root)
		defer outside.Close()
		for _, k := range []string{"pipe", "pipe-other/x", "pipeline/b/c"} {
			if _, err := outside.Put(context.Background(), k, []byte("outside"), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		u, err := url.Parse(root)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/pipeline/a"
		return openURL(t, u.String())
	})
}

// TestFileOpenLeavesDirectoryAlone: opening and reading a file:// store (a
// pipeline's source) creates nothing in the directory.
func TestFileOpenLeavesDirectoryAlone(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.List(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(context.Background(), "a.jsonl"); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("reading the store changed the directory: %v", ents)
	}
}

// TestRead: Read returns what Get returns, through the wrappers too, and
// ErrNotFound for a missing key.
func TestRead(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"mem://", "file://" + t.TempDir()} {
		base := openURL(t, u)
		for _, s := range []store.Store{base, store.WithRetry(base, store.RetryPolicy{}), store.NewFaulty(base, store.FaultPlan{})} {
			if _, err := s.Put(ctx, "k", []byte("v"), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := store.Read(ctx, s, "k")
			if err != nil || string(got) != "v" {
				t.Fatalf("%s %T: Read = %q, %v", u, s, got, err)
			}
			if _, err := store.Read(ctx, s, "missing"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%s %T: Read(missing) = %v, want ErrNotFound", u, s, err)
			}
		}
	}
}
