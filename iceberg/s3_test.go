package iceberg

import (
	"context"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// openS3 opens a fresh bucket of the shared versitygw server, with the retry
// wrapper the engine uses. The table location is the URL without its query.
func openS3(t *testing.T) (store.Store, string) {
	t.Helper()
	url := s3test.Shared(t).NewBucket(t)
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return store.WithRetry(st, store.RetryPolicy{Seed: 1}), url
}

// TestS3PublishMaintain: publish, republish, maintain and read back on a
// real S3 server (conditional creates enforced by the server).
func TestS3PublishMaintain(t *testing.T) {
	ctx := context.Background()
	st, url := openS3(t)
	tbl := mustOpen(t, st, url, Options{PartitionBy: "day(window_start)"})
	if strings.Contains(tbl.Location(), "?") || !strings.HasPrefix(tbl.Location(), "s3://") {
		t.Fatalf("location %q", tbl.Location())
	}
	var want []row
	for e := int64(1); e <= 30; e++ {
		files, rows := writeEpoch(t, st, e, int(e%2)+1, 3)
		if err := tbl.Publish(ctx, "p", e, map[string]string{"manifest": "m", "attempt": "a"}, files); err != nil {
			t.Fatalf("publish %d: %v", e, err)
		}
		want = append(want, rows...)
		if e%10 == 0 {
			rep, err := tbl.Maintain(ctx, MaintainOptions{RetainSnapshots: 3, RetainMetadata: 3, MinAge: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("epoch %d: %+v", e, rep)
		}
	}
	for e := int64(1); e <= 30; e++ {
		if err := tbl.Publish(ctx, "p", e, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if d := diffRows(readVia(t, tbl), rowStrings(want)); d != "" {
		t.Fatal(d)
	}
	// The metadata records the plain s3:// location: any reader resolves it.
	cur := currentTable(t, tbl)
	if got := cur.Metadata().Location(); got != tbl.Location() {
		t.Fatalf("metadata location %q", got)
	}
	if ml := cur.CurrentSnapshot().ManifestList; !strings.HasPrefix(ml, tbl.Location()+"/metadata/") {
		t.Fatalf("manifest list %q", ml)
	}
}

func TestS3Race(t *testing.T) {
	var tb *Table
	raceScenario(t, func(t *testing.T) (store.Store, string) { return openS3(t) },
		func(t *testing.T, tbl *Table) []string { tb = tbl; return readVia(t, tb) })
}

// TestS3LostResponse: the metadata create lands on the server but the
// response is lost.
func TestS3LostResponse(t *testing.T) {
	ctx := context.Background()
	st, url := openS3(t)
	faulty := store.NewFaulty(st, store.FaultPlan{Faults: []store.Fault{{Match: store.Match{Op: store.OpPut, KeyContains: "metadata/v"}, At: 2, Mode: store.FailAfterApply}}})
	tbl := mustOpen(t, faulty, url, Options{})
	var want []row
	for e := int64(1); e <= 4; e++ {
		files, rows := writeEpoch(t, st, e, 1, 2)
		if err := tbl.Publish(ctx, "p", e, nil, files); err != nil {
			t.Fatalf("publish %d: %v", e, err)
		}
		want = append(want, rows...)
	}
	if d := diffRows(readVia(t, tbl), rowStrings(want)); d != "" {
		t.Fatal(d)
	}
	vs, err := tbl.versions(ctx)
	if err != nil || len(vs) != 5 {
		t.Fatalf("%d versions (%v), want 5: a commit was applied twice or lost", len(vs), err)
	}
	if !strings.Contains(strings.Join(faulty.Log(), "\n"), "fail-after-apply") {
		t.Fatal("the fault never fired")
	}
}
