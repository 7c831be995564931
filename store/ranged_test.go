package store_test

import (
	"context"
	"testing"

	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// TestReadRangeOneRequest: a ranged read is one GET on every backend and
// through the wrappers (file:// and mem:// count one per call, S3 counts
// the requests sent), and returns the range whatever wraps the store.
func TestReadRangeOneRequest(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Shared(t)
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 31)
	}
	for _, u := range []string{"mem://", "file://" + t.TempDir(), srv.NewBucket(t)} {
		base := openURL(t, u)
		for _, s := range []store.Store{base, store.WithRetry(base, store.RetryPolicy{}), store.NewFaulty(base, store.FaultPlan{})} {
			if _, err := s.Put(ctx, "big", data, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			before, _ := store.CountRequests(base)
			got, err := store.ReadRange(ctx, s, "big", 1000, 300)
			if err != nil {
				t.Fatalf("%s %T: %v", u, s, err)
			}
			if string(got) != string(data[1000:1300]) {
				t.Fatalf("%s %T: wrong bytes", u, s)
			}
			after, _ := store.CountRequests(base)
			if d := after.Sub(before); d != (store.Requests{Get: 1}) {
				t.Errorf("%s %T: a ranged read sent %+v, want one GET", u, s, d)
			}
		}
		base.Close()
	}
}

// RequestBytes: file:// (and its wrappers) reports a local read's cost,
// an object store the default.
func TestRequestBytes(t *testing.T) {
	ctx := context.Background()
	fs, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	ms, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	for name, c := range map[string]struct {
		s    store.Store
		want int64
	}{
		"file":         {fs, store.LocalRequestBytes},
		"file retried": {store.WithRetry(fs, store.RetryPolicy{}), store.LocalRequestBytes},
		"mem":          {ms, store.DefaultRequestBytes},
		"mem retried":  {store.WithRetry(ms, store.RetryPolicy{}), store.DefaultRequestBytes},
	} {
		if got := store.RequestBytes(c.s); got != c.want {
			t.Errorf("%s: RequestBytes = %d, want %d", name, got, c.want)
		}
	}
}
