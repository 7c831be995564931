package store_test

import (
	"context"
	"net/url"
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
