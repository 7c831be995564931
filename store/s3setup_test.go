package store_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// s3URLWithout returns the server's URL for bucket with the query
// parameters named removed.
func s3URLWithout(t *testing.T, srv *s3test.Server, bucket string, drop ...string) string {
	t.Helper()
	u, err := url.Parse(srv.URL(bucket, "p"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for _, d := range drop {
		q.Del(d)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TestS3SetupErrors: each way a newcomer mis-sets an S3 store fails at
// once (no retry) with one line naming the fix, and a missing bucket is
// not taken for a missing key; a URL without region= works against a
// server that signs for the default region.
func TestS3SetupErrors(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Shared(t)
	bu, _ := url.Parse(srv.NewBucket(t))
	bucket := bu.Host

	try := func(t *testing.T, u string) (error, store.RetryStats) {
		t.Helper()
		st, err := store.Open(ctx, u)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer st.Close()
		rs := store.WithRetry(st, store.RetryPolicy{})
		_, err = rs.List(ctx, "")
		if err == nil {
			_, _, err = rs.Get(ctx, "_latest.json")
		}
		return err, rs.Stats()
	}
	t.Run("no region", func(t *testing.T) {
		t.Setenv("AWS_REGION", "")
		t.Setenv("AWS_DEFAULT_REGION", "")
		err, _ := try(t, s3URLWithout(t, srv, bucket, "region"))
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("without region=: %v, want the listing to work and _latest.json not found", err)
		}
	})
	cases := []struct {
		name, url, want string
		env             map[string]string
	}{
		{name: "no path style", url: s3URLWithout(t, srv, bucket, "use_path_style"),
			want: "add use_path_style=true to the URL"},
		{name: "no bucket", url: s3URLWithout(t, srv, "nosuchbucket"),
			want: `bucket "nosuchbucket" does not exist (create it, or fix the bucket in the URL)`},
		{name: "wrong region", url: strings.Replace(srv.URL(bucket, "p"), "region="+s3test.Region, "region=eu-west-3", 1),
			want: "the server wants another region"},
		{name: "wrong secret", url: srv.URL(bucket, "p"), env: map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong"},
			want: "check the credentials"},
		{name: "no credentials", url: srv.URL(bucket, "p"), env: map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
			"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"), "AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"),
			"AWS_EC2_METADATA_DISABLED": "true"},
			want: "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
				if v == "" {
					os.Unsetenv(k)
				}
			}
			err, stats := try(t, tc.url)
			var se *store.SetupError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &se) {
				t.Fatalf("error %v, want a SetupError containing %q", err, tc.want)
			}
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrTransient) {
				t.Fatalf("a set-up error matches a sentinel: %v", err)
			}
			if stats.Retries != 0 {
				t.Fatalf("%d retries of a set-up error", stats.Retries)
			}
			t.Log(err)
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("not one line: %q", err)
			}
		})
	}
}
