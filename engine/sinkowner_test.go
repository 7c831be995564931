package engine_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// readMarker returns the sink's marker.
func readMarker(t *testing.T, sinkURL string) *manifest.SinkMarker {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, sinkURL)
	must(t, err)
	defer s.Close()
	data, _, err := s.Get(ctx, manifest.SinkMarkerName)
	must(t, err)
	mk, err := manifest.DecodeSinkMarker(manifest.SinkMarkerName, data)
	must(t, err)
	return mk
}

// stateID is the identity string of p's state folder, as a marker names it.
func stateID(t *testing.T, p *spec.Pipeline) string {
	t.Helper()
	u, err := engine.PipelineStateURL(p)
	must(t, err)
	l, err := store.ParseLocation(u)
	must(t, err)
	l.Endpoint = ""
	return l.String()
}

// TestSavepointMoveTakesSinkOver: the state is moved through a savepoint
// (created in the old state, copied elsewhere, restored with a new
// state.url and the same sink). The restore rewrites the sink's marker to
// name the new state; the old state's next run is refused, naming the new
// owner, before it deletes anything (before, only a warning was logged and
// the old state's cleanup deleted the new state's outputs as orphans); the
// new state runs on and its outputs equal an uninterrupted run's. The new
// state goes to another folder, and to S3 (as in the report: file:// state
// moved to s3://).
func TestSavepointMoveTakesSinkOver(t *testing.T) {
	want := spRef(t)
	for _, to := range []string{"file", "s3"} {
		t.Run(to, func(t *testing.T) {
			ctx := context.Background()
			e := fileEnv(t)
			genData(t, e, spGen)
			old := e.pipeline(t, windowSpec)
			run(t, old, engine.Options{UntilEpoch: 3})
			if _, err := engine.CreateSavepoint(ctx, old, "tos3", 0); err != nil {
				t.Fatal(err)
			}
			spURL, err := engine.SavepointURL(old, "tos3")
			must(t, err)
			moved := *e
			switch to {
			case "file":
				moved.state = fileURL(filepath.Join(t.TempDir(), "state"))
			case "s3":
				srv := s3test.Shared(t)
				u, err := url.Parse(srv.NewBucket(t))
				must(t, err)
				moved.state = srv.URL(u.Host, "state")
			}
			elsewhere := withPath(t, moved.state, "copied-savepoint") // as aws s3 sync would put it
			copyAll(t, spURL, elsewhere)
			p2 := moved.pipeline(t, windowSpec)
			run(t, p2, engine.Options{FromSavepoint: elsewhere, UntilEpoch: 5})
			if mk := readMarker(t, e.sink); mk.State != stateID(t, p2) {
				t.Errorf("after the restore the sink marker names %s; want the new state %s", mk.State, stateID(t, p2))
			}

			// The old state (its cron job still scheduled) is refused,
			// and neither the sink nor the old state changes.
			stateURL, err := engine.PipelineStateURL(old)
			must(t, err)
			before := snapshot(t, e.sink, stateURL, e.late)
			for name, opts := range map[string]engine.Options{"run": {}, "drain": {Drain: true}, "rollback": {RollbackTo: 2}} {
				_, err := engine.Run(ctx, old, opts)
				if err == nil || !strings.Contains(err.Error(), "is owned by state "+stateID(t, p2)) || strings.Contains(err.Error(), "\n") {
					t.Errorf("old state's %s: %v; want a one-line refusal naming the new owner", name, err)
				}
			}
			rep, err := engine.Plan(ctx, old, engine.Options{})
			must(t, err)
			if rep.Compatible || !strings.Contains(rep.Incompatible, "is owned by state") {
				t.Errorf("plan of the old state: compatible %v %q; want the run's refusal", rep.Compatible, rep.Incompatible)
			}
			if after := snapshot(t, e.sink, stateURL, e.late); !reflect.DeepEqual(before, after) {
				t.Fatalf("the old state's refused runs changed objects:\nbefore %v\nafter  %v", before, after)
			}

			// The new state runs on and owns the sink.
			run(t, p2, engine.Options{Drain: true})
			if got := committedRows(t, p2); !reflect.DeepEqual(got, want) {
				t.Fatalf("moved pipeline: %d rows, want %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
			}
			if rep, err := engine.Verify(ctx, p2); err != nil || len(rep.Problems) > 0 {
				t.Fatalf("verify of the new state: %v %v", err, rep.Problems)
			}
		})
	}
}

// TestStateCopyTakesSinkOver: a state folder copied elsewhere (no
// savepoint) and run with the same sink takes the sink over (its
// generation was recorded where the marker points, so it is a move); the
// original is then refused, and so is a second copy of the original, so
// two states never both clean one sink.
func TestStateCopyTakesSinkOver(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:01:10", "u2", 2)))
	orig := e.pipeline(t, windowSpec)
	run(t, orig, engine.Options{})
	origState, err := engine.PipelineStateURL(orig)
	must(t, err)
	copies := make([]*spec.Pipeline, 2)
	for i := range copies {
		c := *e
		c.state = fileURL(filepath.Join(t.TempDir(), "state"))
		copies[i] = c.pipeline(t, windowSpec)
		u, err := engine.PipelineStateURL(copies[i])
		must(t, err)
		must(t, os.CopyFS(strings.TrimPrefix(u, "file://"), os.DirFS(strings.TrimPrefix(origState, "file://"))))
	}
	e.put(t, "2.jsonl", jsonl(ev("00:02:10", "u1", 3)))
	rep, err := engine.Plan(ctx, copies[0], engine.Options{})
	must(t, err)
	if !rep.Compatible || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "taking it over from state "+stateID(t, orig)) {
		t.Fatalf("plan of the moved state: compatible %v %q, warnings %q; want the takeover announced", rep.Compatible, rep.Incompatible, rep.Warnings)
	}
	if res := run(t, copies[0], engine.Options{Drain: true}); res.Epochs == 0 {
		t.Fatal("the moved state committed nothing")
	}
	if mk := readMarker(t, e.sink); mk.State != stateID(t, copies[0]) {
		t.Fatalf("marker names %s; want the moved state", mk.State)
	}
	before := snapshot(t, e.sink)
	for name, p := range map[string]*spec.Pipeline{"original": orig, "second copy": copies[1]} {
		if _, err := engine.Run(ctx, p, engine.Options{Drain: true}); err == nil || !strings.Contains(err.Error(), "is owned by state "+stateID(t, copies[0])) {
			t.Fatalf("%s: %v; want it refused, naming the moved state", name, err)
		}
	}
	if after := snapshot(t, e.sink); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused runs changed the sink:\nbefore %v\nafter  %v", before, after)
	}
	if got := committedRows(t, copies[0]); len(got) != 3 {
		t.Fatalf("moved state committed %v; want 3 windows", got)
	}
}

// TestTakeoverDuringRun: a run whose sink is taken over while it runs
// (the marker rewritten to name another state after an epoch) stops
// before its next epoch writes and before its closing sink cleanup, naming
// the new owner: a file of the new owner's that the cleanup would judge an
// orphan stays, and the next epoch wrote nothing to the sink.
func TestTakeoverDuringRun(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	for i, f := range []string{"1.jsonl", "2.jsonl", "3.jsonl"} {
		e.put(t, f, jsonl(ev("00:0"+string(rune('0'+i))+":10", "u1", i+1)))
	}
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{UntilEpoch: 1})
	mk := readMarker(t, e.sink)
	newOwner := fileURL(filepath.Join(t.TempDir(), "state", p.Name))
	// An output of the new owner's, of an epoch this run passes: the
	// closing cleanup deletes such a file when it is not in this
	// state's output log.
	theirs := manifest.OutputName(9, 2, 0, "deadbeef-0000-4000-8000-000000000000", "parquet")
	sink, err := store.Open(ctx, e.sink)
	must(t, err)
	defer sink.Close()
	taken := false
	_, err = engine.Run(ctx, p, engine.Options{Drain: true, Progress: func(pr engine.Progress) {
		if taken || pr.Epoch < 2 {
			return
		}
		taken = true
		data, err := manifest.EncodeSinkMarker(&manifest.SinkMarker{FormatVersion: manifest.FormatVersion, Pipeline: mk.Pipeline, ID: mk.ID, State: newOwner})
		must(t, err)
		_, err = sink.Put(ctx, manifest.SinkMarkerName, data, store.PutOptions{})
		must(t, err)
		_, err = sink.Put(ctx, theirs, []byte("the new owner's rows"), store.PutOptions{})
		must(t, err)
	}})
	if !taken {
		t.Fatal("the run never reported epoch 2")
	}
	if err == nil || !strings.Contains(err.Error(), "taken over by state "+newOwner) || !strings.Contains(err.Error(), "stops before it writes to or cleans the sink") {
		t.Fatalf("run during a takeover: %v; want a failure naming the new owner", err)
	}
	if _, _, err := sink.Get(ctx, theirs); err != nil {
		t.Fatalf("the new owner's output was deleted: %v", err)
	}
	objs, err := sink.List(ctx, "")
	must(t, err)
	for _, o := range objs {
		if info, ok := manifest.ParseOutputName(o.Key); ok && info.Epoch > 2 {
			t.Errorf("the run wrote %s after the takeover", o.Key)
		}
	}
}
