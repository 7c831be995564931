package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// snapshot returns every object under the URLs with the sha256 of its
// content: what a refused run must leave exactly as it was.
func snapshot(t *testing.T, urls ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ctx := context.Background()
	for _, u := range urls {
		s, err := store.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := s.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			data, _, err := s.Get(ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			out[u+" "+o.Key] = hex.EncodeToString(sum[:])
		}
		s.Close()
	}
	return out
}

// TestIdentityRefusals: edits of a spec that would orphan or mix committed
// data are refused before anything is written, with one line saying what
// changed and what to do; the original pipeline then continues and
// verifies clean.
func TestIdentityRefusals(t *testing.T) {
	bothEnvs(t, func(t *testing.T, newEnv func(testing.TB) *env) {
		e := newEnv(t)
		e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:01:10", "u2", 2)))
		e.put(t, "2.jsonl", jsonl(ev("00:02:10", "u1", 3)))
		withLate := strings.Replace(windowSpec, "max_files_per_epoch: 1,", "max_files_per_epoch: 1, late_url: \"{{late}}\",", 1)
		orig := e.pipeline(t, withLate)
		run(t, orig, engine.Options{})
		other := newEnv(t) // fresh locations for the edited specs
		cases := []struct {
			name, old, new, want string
			untouched            []string // locations the refused run must not create anything in
		}{
			{"sink url", "url: \"{{sink}}\"", "url: \"" + other.sink + "\"", "sink.url changed: ", []string{other.sink}},
			{"sink format", "format: parquet}", "format: jsonl}", "sink.format changed: parquet → jsonl", nil},
			{"late url", "late_url: \"{{late}}\"", "late_url: \"" + other.late + "\"", "source.late_url changed: ", []string{other.late}},
			{"second state on the sink", "url: \"{{state}}\"", "url: \"" + other.state + "\"", "belongs to another pipeline", []string{other.state}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if !strings.Contains(withLate, c.old) {
					t.Fatalf("template lacks %q", c.old)
				}
				p := e.pipeline(t, strings.Replace(withLate, c.old, c.new, 1))
				before := snapshot(t, e.state, e.sink, e.late)
				_, err := engine.Run(context.Background(), p, engine.Options{})
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("run: %v; want an error containing %q", err, c.want)
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") || !(strings.Contains(msg, "new pipeline name") || strings.Contains(msg, "own sink url") || strings.Contains(msg, "new sink url")) {
					t.Fatalf("refusal is not one line saying what to do: %q", msg)
				}
				if after := snapshot(t, e.state, e.sink, e.late); !reflect.DeepEqual(before, after) {
					t.Fatalf("a refused run changed objects:\nbefore %v\nafter  %v", before, after)
				}
				for _, u := range c.untouched {
					if keys := snapshot(t, u); len(keys) > 0 {
						t.Fatalf("a refused run wrote into %s: %v", u, keys)
					}
				}
				// plan reports the same refusal, from the same planner.
				rep, err := engine.Plan(context.Background(), p, engine.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Compatible || !strings.Contains(rep.Incompatible, c.want) {
					t.Fatalf("plan: compatible=%v %q; want the run's refusal", rep.Compatible, rep.Incompatible)
				}
			})
		}
		e.put(t, "3.jsonl", jsonl(ev("00:03:10", "u3", 4)))
		if res := run(t, orig, engine.Options{Drain: true}); res.Epochs == 0 {
			t.Fatal("the original pipeline did not continue")
		}
		rep, err := engine.Verify(context.Background(), orig)
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("verify after the refusals: %v %v", err, rep.Problems)
		}
		if got := committedRows(t, orig); len(got) != 4 {
			t.Fatalf("committed rows %v; want 4 windows", got)
		}
	})
}

// TestFreshStateOnUsedSink: deleting a pipeline's state and running again
// against its sink is refused (the old outputs would be judged orphans and
// deleted); a corrected spec before the first commit is accepted.
func TestFreshStateOnUsedSink(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{Drain: true})
	if err := os.RemoveAll(strings.TrimPrefix(e.state, "file://")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, e.sink)
	_, err := engine.Run(context.Background(), p, engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "has no record of them") {
		t.Fatalf("fresh state on a used sink: %v", err)
	}
	if after := snapshot(t, e.sink); !reflect.DeepEqual(before, after) {
		t.Fatal("the refused run changed the sink")
	}

	// Before anything is committed, a corrected sink is simply used.
	f := fileEnv(t)
	f.put(t, "1.jsonl", jsonl(`{"event_time":"bad"}`))
	bad := f.pipeline(t, strings.Replace(windowSpec, "max_out_of_orderness: 0s}", "max_out_of_orderness: 0s}, on_error: fail", 1))
	if _, err := engine.Run(context.Background(), bad, engine.Options{}); err == nil {
		t.Fatal("on_error: fail did not fail")
	}
	fixed := strings.Replace(windowSpec, "url: \"{{sink}}\"", "url: \""+f.sink+"2\"", 1)
	f.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	run(t, f.pipeline(t, fixed), engine.Options{Drain: true})
}

// TestRestoreV1State continues a pipeline whose state and sink were written
// by the release before the pipeline identity and plan encoding v2
// (testdata/compat/v1): same generation, no row lost or repeated; its first
// rescale then records the identity and upgrades the sink marker.
func TestRestoreV1State(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"state", "sink"} {
		if err := os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join("../testdata/compat/v1", sub))); err != nil {
			t.Fatal(err)
		}
	}
	events, err := filepath.Abs("../testdata/events")
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Load("../testdata/compat/v1/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p.Source.URL, p.State.URL, p.Sink.URL = fileURL(events), fileURL(filepath.Join(dir, "state")), fileURL(filepath.Join(dir, "sink"))
	res := run(t, p, engine.Options{UntilEpoch: 3})
	if res.Generation != 1 || res.FirstEpoch != 3 {
		t.Fatalf("v1 state continued in generation %d from epoch %d; want generation 1, epoch 3", res.Generation, res.FirstEpoch)
	}
	res = run(t, p, engine.Options{Parallelism: 3, Drain: true})
	if res.Generation != 2 {
		t.Fatalf("rescale: generation %d, want 2", res.Generation)
	}
	ref, err := spec.Load("../testdata/compat/v1/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rd := t.TempDir()
	ref.Source.URL, ref.State.URL, ref.Sink.URL = fileURL(events), fileURL(filepath.Join(rd, "state")), fileURL(filepath.Join(rd, "sink"))
	run(t, ref, engine.Options{Drain: true})
	if got, want := committedRows(t, p), committedRows(t, ref); !reflect.DeepEqual(got, want) {
		t.Fatalf("continued v1 pipeline: %d rows, a fresh run: %d", len(got), len(want))
	}
	data, err := os.ReadFile(filepath.Join(dir, "sink", manifest.SinkMarkerName))
	if err != nil {
		t.Fatal(err)
	}
	mk, err := manifest.DecodeSinkMarker(manifest.SinkMarkerName, data)
	if err != nil || mk.Legacy || mk.Pipeline != p.Name {
		t.Fatalf("sink marker after the first recorded generation: %+v %v", mk, err)
	}
}

// TestMovedPipeline: state and sink copied together to new locations (a
// bucket migration) continue there; the sink copy's marker names the
// pipeline. A copy of the state alone pointed at a fresh sink is refused.
func TestMovedPipeline(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:01:10", "u2", 2)))
	run(t, e.pipeline(t, windowSpec), engine.Options{})
	dst := t.TempDir()
	for _, c := range []struct{ from, to string }{{e.state, "state"}, {e.sink, "out"}} {
		if err := os.CopyFS(filepath.Join(dst, c.to), os.DirFS(strings.TrimPrefix(c.from, "file://"))); err != nil {
			t.Fatal(err)
		}
	}
	moved := &env{source: e.source, state: fileURL(filepath.Join(dst, "state")), sink: fileURL(filepath.Join(dst, "out")), late: e.late}
	e.put(t, "2.jsonl", jsonl(ev("00:02:10", "u1", 3)))
	if res := run(t, moved.pipeline(t, windowSpec), engine.Options{Drain: true}); res.Generation != 1 || res.Epochs == 0 {
		t.Fatalf("moved pipeline: generation %d, %d epochs", res.Generation, res.Epochs)
	}
	if got := committedRows(t, moved.pipeline(t, windowSpec)); len(got) != 3 {
		t.Fatalf("moved pipeline committed %v; want 3 windows", got)
	}
	alone := &env{source: e.source, state: moved.state, sink: fileURL(filepath.Join(t.TempDir(), "fresh")), late: e.late}
	if _, err := engine.Run(context.Background(), alone.pipeline(t, windowSpec), engine.Options{}); err == nil || !strings.Contains(err.Error(), "sink.url changed") {
		t.Fatalf("state copied onto a fresh sink: %v", err)
	}
}
