package dataflow

import (
	"os"
	"testing"

	"github.com/floe-dev/floe/internal/scenario"
	"github.com/floe-dev/floe/spec"
)

// TestPlanEncodingGolden pins the plan identity: the v2 canonical text of
// the sample pipeline (testdata/plans/clicks.v2.txt) and the v1 hash that
// the release before v2 recorded for it (testdata/compat/v1's generation).
// If this fails, a change altered what decides a generation: every
// pipeline's first run after an upgrade would start a new one. Make such a
// change only as a new encoding version that still recognises the old.
func TestPlanEncodingGolden(t *testing.T) {
	p, err := spec.Load("../../../testdata/compat/v1/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := SourceSchema(p)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Compile(p, src)
	if err != nil {
		t.Fatal(err)
	}
	text := EncodePlan(p, pl.Declared)
	const golden = "testdata/plans/clicks.v2.txt"
	if *scenario.Rewrite {
		if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if text != string(want) {
		t.Fatalf("plan encoding changed:\n%s\nwant:\n%s", text, want)
	}
	if pl.Hash != HashPlan(string(want)) {
		t.Fatalf("plan hash %s is not the hash of the golden text", pl.Hash)
	}
	const v1 = "sha256:e4e71c8eaf1cd1ed" // testdata/compat/v1/state/.../gen=000001/_generation.json
	if got := PlanHashV1(p, pl.Declared); got != v1 {
		t.Fatalf("v1 plan hash %s, want %s", got, v1)
	}
	if !SamePlan(v1, p, pl.Declared, pl.Hash) || SamePlan("sha256:0000000000000000", p, pl.Declared, pl.Hash) {
		t.Fatal("samePlan does not recognise exactly the v1 hash")
	}
	// An edit of the filter is a different plan in both encodings.
	p.Operators[0].Filter.Expr = "bytes > 1"
	if HashPlan(EncodePlan(p, pl.Declared)) == pl.Hash || PlanHashV1(p, pl.Declared) == v1 {
		t.Fatal("an edited filter kept the plan's identity")
	}
}
