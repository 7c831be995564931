package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
)

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
	copyAll(t, a.sink, b.sink) // the sink first, then the state (README: Moving a pipeline)
	copyAll(t, a.state, b.state)
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
