package epoch_test

import (
	"net/url"
	"testing"

	"github.com/floe-dev/floe/internal/s3test"
)

func TestMain(m *testing.M) {
	if raceHelper() {
		return
	}
	s3test.Main(m)
}

// s3Backend runs against the real S3 server (versitygw) shared by this test
// binary: one fresh bucket per test, state and sink under two prefixes.
func s3Backend(t testing.TB) backend {
	return backend{name: "s3", urls: func(t testing.TB) (string, string) {
		srv := s3test.Shared(t)
		u, err := url.Parse(srv.NewBucket(t))
		if err != nil {
			t.Fatal(err)
		}
		bucket := u.Host
		return srv.URL(bucket, "state"), srv.URL(bucket, "sink")
	}}
}
