package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// TestMigrationChain: state recorded in an older state format (here: the
// generation record says v0) is restored through a chain of migrations
// registered from Go (v0 → vA → vB → v1), applied in order at restore; the
// chain's new generation records the new format, so the next run migrates
// nothing; a missing step is reported by plan as incompatible, naming the
// formats.
func TestMigrationChain(t *testing.T) {
	ctx := context.Background()
	ref := fileEnv(t)
	e := fileEnv(t)
	for _, x := range []*env{ref, e} {
		x.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u2", 2)))
		x.put(t, "2.jsonl", jsonl(ev("00:00:30", "u1", 3)))
		x.put(t, "3.jsonl", jsonl(ev("00:01:30", "u1", 4)))
	}
	run(t, ref.pipeline(t, windowSpec), engine.Options{Drain: true})
	want := committedRows(t, ref.pipeline(t, windowSpec))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{UntilEpoch: 2})

	// Pretend generation 1 was written by a release whose window state
	// format was v0 (and which recorded no state plan).
	rewriteGeneration(t, p, 1, func(g *manifest.Generation) {
		g.Plan[0].StateSchema = "v0" + strings.TrimPrefix(g.Plan[0].StateSchema, "v1")
		g.Plan[0].StatePlan = ""
	})

	var mu sync.Mutex
	var steps []string
	step := func(name string) func(arrow.RecordBatch) (arrow.RecordBatch, error) {
		return func(b arrow.RecordBatch) (arrow.RecordBatch, error) {
			mu.Lock() // subtasks restore concurrently
			defer mu.Unlock()
			steps = append(steps, name)
			return b, nil // the layouts are the same here: the test is about the chain
		}
	}
	all := []dataflow.StateMigration{
		{Kind: "window", From: "vB", To: "v1", Migrate: step("vB→v1")},
		{Kind: "window", From: "v0", To: "vA", Migrate: step("v0→vA")},
		{Kind: "window", From: "vA", To: "vB", Migrate: step("vA→vB")},
	}
	missing := []dataflow.StateMigration{all[0], all[1]}
	rep, err := engine.Plan(ctx, p, engine.Options{Migrations: missing})
	must(t, err)
	if rep.Compatible || !strings.Contains(rep.Incompatible, "no chain of registered migrations leads from v0 to v1") {
		t.Fatalf("plan with a missing step: compatible=%v %q", rep.Compatible, rep.Incompatible)
	}
	if _, err := engine.Run(ctx, p, engine.Options{Migrations: missing}); err == nil || !strings.Contains(err.Error(), rep.Incompatible) {
		t.Fatalf("run with a missing step: %v; want the plan's message", err)
	}
	rep, err = engine.Plan(ctx, p, engine.Options{Migrations: all})
	must(t, err)
	if !rep.Compatible || !reflect.DeepEqual(rep.StateChanges, []string{"state format v0 → vA → vB → v1 through registered migrations"}) {
		t.Fatalf("plan with the chain: %+v", rep)
	}
	res := run(t, p, engine.Options{Migrations: all, Drain: true})
	if res.Generation != 2 || len(steps) == 0 || len(steps)%3 != 0 || !chainInOrder(steps) {
		t.Fatalf("generation %d, migration steps %v; want a new generation and the chain applied in order", res.Generation, steps)
	}
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the migration chain: %v, want %v", got, want)
	}
	steps = nil
	e.put(t, "4.jsonl", jsonl(ev("00:09:30", "u3", 1)))
	run(t, p, engine.Options{Migrations: all})
	if len(steps) != 0 {
		t.Fatalf("the next run migrated again: %v", steps)
	}
}

// rewriteGeneration edits generation gen's record of pipeline p (a file://
// state) in place, as an older release would have written it.
func rewriteGeneration(t *testing.T, p *spec.Pipeline, gen int64, edit func(g *manifest.Generation)) {
	t.Helper()
	stateURL, err := engine.PipelineStateURL(p)
	must(t, err)
	gpath := filepath.Join(strings.TrimPrefix(stateURL, "file://"), filepath.FromSlash(manifest.GenerationPath(gen)))
	data, err := os.ReadFile(gpath)
	must(t, err)
	g, err := manifest.DecodeGeneration(manifest.GenerationPath(gen), data)
	must(t, err)
	edit(g)
	g.Checksum = ""
	data, err = manifest.EncodeGeneration(g)
	must(t, err)
	must(t, os.WriteFile(gpath, data, 0o644))
}

// chainInOrder: each batch went through v0→vA, vA→vB, vB→v1 in that order
// (batches of different subtasks interleave).
func chainInOrder(steps []string) bool {
	n := map[string]int{}
	for _, s := range steps {
		switch s {
		case "vA→vB":
			if n["vA→vB"] >= n["v0→vA"] {
				return false
			}
		case "vB→v1":
			if n["vB→v1"] >= n["vA→vB"] {
				return false
			}
		}
		n[s]++
	}
	return n["v0→vA"] == n["vA→vB"] && n["vA→vB"] == n["vB→v1"]
}

// TestGraphMigrationChain: TestMigrationChain for a graph's window stages
// (a plain one and one behind the hidden-time operator): state recorded in
// an older state format is restored through the registered chain, in a new
// generation that records the new format, with the rows of a run that never
// changed; a missing step is refused, naming the stage.
func TestGraphMigrationChain(t *testing.T) {
	ctx := context.Background()
	ref, e := fileEnv(t), fileEnv(t)
	for _, x := range []*env{ref, e} {
		x.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u2", 2), ev("01:00:30", "u1", 3)))
		x.put(t, "2.jsonl", jsonl(ev("01:10:00", "u1", 4)))
	}
	run(t, ref.pipeline(t, evolveGraph), engine.Options{Drain: true})
	p := e.pipeline(t, evolveGraph)
	run(t, p, engine.Options{UntilEpoch: 1})

	// Pretend generation 1 was written by a release whose window state
	// format was v0 (and which recorded no state plans).
	rewriteGeneration(t, p, 1, func(g *manifest.Generation) {
		if len(g.Plan) != 2 {
			t.Fatalf("generation 1 records %d stateful stages, want 2", len(g.Plan))
		}
		for i := range g.Plan {
			g.Plan[i].StateSchema = "v0" + strings.TrimPrefix(g.Plan[i].StateSchema, "v1")
			g.Plan[i].StatePlan = ""
		}
	})

	var mu sync.Mutex
	var steps int
	chain := []dataflow.StateMigration{{Kind: "window", From: "v0", To: "v1", Migrate: func(b arrow.RecordBatch) (arrow.RecordBatch, error) {
		mu.Lock() // subtasks restore concurrently
		steps++
		mu.Unlock()
		return b, nil // the layouts are the same here: the test is about the chain
	}}}
	rep, err := engine.Plan(ctx, p, engine.Options{})
	must(t, err)
	if rep.Compatible || !strings.Contains(rep.Incompatible, `operator "per-user": its state is in format v0`) {
		t.Fatalf("plan without the step: compatible=%v %q", rep.Compatible, rep.Incompatible)
	}
	rep, err = engine.Plan(ctx, p, engine.Options{Migrations: chain})
	must(t, err)
	want := []string{"stage per-user: state format v0 → v1 through registered migrations", "stage by-clicks: state format v0 → v1 through registered migrations"}
	if !rep.Compatible || !reflect.DeepEqual(rep.StateChanges, want) {
		t.Fatalf("plan with the chain: %+v", rep)
	}
	res := run(t, p, engine.Options{Migrations: chain, Drain: true})
	if res.Generation != 2 || steps == 0 {
		t.Fatalf("generation %d, %d batches migrated; want a new generation and the chain applied", res.Generation, steps)
	}
	for _, sink := range []string{"out", "users"} {
		if got, want := sinkRows(t, p, sink), sinkRows(t, ref.pipeline(t, evolveGraph), sink); !reflect.DeepEqual(got, want) || len(want) == 0 {
			t.Fatalf("sink %s after the migration chain:\n%s\nwant\n%s", sink, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	steps = 0
	e.put(t, "3.jsonl", jsonl(ev("05:00:00", "u3", 1)))
	run(t, p, engine.Options{Migrations: chain})
	if steps != 0 {
		t.Fatalf("the next run migrated again: %d batches", steps)
	}
}
