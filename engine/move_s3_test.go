package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/store"
)

// copyStore copies every object under src to dst, as aws s3 sync does.
func copyStore(t *testing.T, srcURL, dstURL string) int {
	t.Helper()
	ctx := context.Background()
	src, err := store.Open(ctx, srcURL)
	must(t, err)
	defer src.Close()
	dst, err := store.Open(ctx, dstURL)
	must(t, err)
	defer dst.Close()
	objs, err := src.List(ctx, "")
	must(t, err)
	for _, o := range objs {
		data, _, err := src.Get(ctx, o.Key)
		must(t, err)
		_, err = dst.Put(ctx, o.Key, data, store.PutOptions{})
		must(t, err)
	}
	return len(objs)
}

// TestMoveBetweenBuckets: a pipeline whose sink and state are copied to
// another bucket (sink first, then state) runs there with "moved"
// warnings, and ends with the rows of a pipeline that never moved.
func TestMoveBetweenBuckets(t *testing.T) {
	data := datagen.Options{Rows: 600, Files: 6, Users: 9, Seed: 12}
	ref := fileEnv(t)
	genData(t, ref, data)
	run(t, ref.pipeline(t, windowSpec), engine.Options{Drain: true})
	want := committedRows(t, ref.pipeline(t, windowSpec))

	a := s3Env(t)
	genData(t, a, data)
	pa := a.pipeline(t, windowSpec)
	run(t, pa, engine.Options{UntilEpoch: 3})

	b := s3Env(t) // another bucket
	b.source = a.source
	copyStore(t, a.sink, b.sink)
	if n := copyStore(t, a.state, b.state); n == 0 {
		t.Fatal("nothing to copy")
	}
	pb := b.pipeline(t, windowSpec)
	rep, err := engine.Plan(context.Background(), pb, engine.Options{})
	must(t, err)
	if !rep.Compatible || rep.NewGeneration || !strings.Contains(strings.Join(rep.Warnings, "\n"), "sink moved") {
		t.Fatalf("plan in the new bucket: compatible %v (%s), new generation %v, warnings %q", rep.Compatible, rep.Incompatible, rep.NewGeneration, rep.Warnings)
	}
	res := run(t, pb, engine.Options{Drain: true})
	if res.FirstEpoch != 4 {
		t.Fatalf("continued at epoch %d, want 4", res.FirstEpoch)
	}
	if got := committedRows(t, pb); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("moved pipeline: %d rows, unmoved %d", len(got), len(want))
	}
}
