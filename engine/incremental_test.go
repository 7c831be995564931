package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// growingSpec keeps one 24-hour window per user open for the whole input:
// the state grows with the users seen, while each epoch touches a few.
const growingSpec = `
name: grow
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 1,
         watermark: {max_out_of_orderness: 0s}}
operators:
  - window: {key: [user_id], tumbling: 24h, allowed_lateness: 0s,
             aggregates: {clicks: "count()", pages: "count_distinct(page)", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`

// putGrowing writes files files; file i touches 4 of 120 users: three
// spread over all of them, one of 10 hot users (u000, u012, ...) seen again
// every 10 files, whose open windows later epochs change again (merge
// deltas of their count_distinct sets).
func putGrowing(t *testing.T, e *env, files int) {
	for i := range files {
		var lines []string
		for j := range 4 {
			u := (i*7 + j*31) % 120
			if j == 3 {
				u = (i % 10) * 12
			}
			lines = append(lines, fmt.Sprintf(`{"event_time":"2024-01-01T%02d:%02d:00Z","user_id":"u%03d","page":"/p%d","bytes":%d}`,
				i/60, i%60, u, (i+j)%5, i+j))
		}
		e.put(t, fmt.Sprintf("f-%03d.jsonl", i), jsonl(lines...))
	}
}

func headChain(t *testing.T, p *spec.Pipeline, n int) []*manifest.Manifest {
	t.Helper()
	ctx := context.Background()
	u, err := engine.PipelineStateURL(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := epoch.NewCommitter(st, nil, p.Name, nil)
	head, err := c.Peek(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := c.Chain(ctx, head, n)
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

// TestIncrementalState: epochs that touch a few windows of a large state
// write deltas holding only those windows; restores from base + deltas
// (also across rescales 2 -> 5 -> 3, and after a crash at every state-store
// call) give exactly the rows of a run that never crashed.
func TestIncrementalState(t *testing.T) {
	ref := fileEnv(t)
	putGrowing(t, ref, 40)
	pref := ref.pipeline(t, strings.Replace(growingSpec, "max_files_per_epoch: 1", "max_files_per_epoch: 100", 1))
	run(t, pref, engine.Options{Drain: true})
	want := committedRows(t, pref)
	if len(want) < 60 {
		t.Fatalf("reference has %d windows; the data set is too small to grow state", len(want))
	}

	e := fileEnv(t)
	putGrowing(t, e, 40)
	p := e.pipeline(t, growingSpec)
	run(t, p, engine.Options{UntilEpoch: 15})
	var deltas, upserts, merges int64
	for _, m := range headChain(t, p, 10) {
		for _, d := range m.Operators[0].Deltas {
			deltas++
			if d.Kind == manifest.DeltaMerges {
				merges++
			}
			if d.Kind != manifest.DeltaTombstones {
				// Only what the epoch touched: at most 4 users.
				upserts = max(upserts, d.Rows)
			}
		}
	}
	if deltas == 0 {
		t.Fatal("no delta files in the last 10 epochs: every epoch rewrote the whole state")
	}
	if merges == 0 {
		t.Fatal("no merges delta in the last 10 epochs: windows that existed before were rewritten whole")
	}
	if upserts > 4 {
		t.Fatalf("a delta holds %d upserted or merged windows; an epoch touches at most 4", upserts)
	}
	run(t, p, engine.Options{UntilEpoch: 25, Parallelism: 5})
	run(t, p, engine.Options{UntilEpoch: 32, Parallelism: 3})
	run(t, p, engine.Options{Drain: true, Parallelism: 3})
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("incremental state with rescales: %d rows, want %d\n%s", len(got), len(want),
			diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	rep, err := engine.Verify(context.Background(), p)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}

	// Crash at every state-store call of a run that writes deltas and
	// compactions, then recover.
	ref18 := fileEnv(t)
	putGrowing(t, ref18, 18)
	p18 := ref18.pipeline(t, growingSpec)
	run(t, p18, engine.Options{Drain: true})
	want = committedRows(t, p18)
	for at := 0; ; at++ {
		e := fileEnv(t)
		putGrowing(t, e, 18)
		p := e.pipeline(t, growingSpec)
		run(t, p, engine.Options{UntilEpoch: 10})
		_, err := engine.Run(context.Background(), p, engine.Options{Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(n string, s store.Store) store.Store {
				if n != "state" {
					return s
				}
				return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
			}})
		if err == nil {
			t.Logf("crashed at each of %d state-store calls", at)
			if at < 20 {
				t.Fatalf("only %d state-store calls: the sweep exercises too little", at)
			}
			break
		}
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("at %d: %v", at, err)
		}
		run(t, p, engine.Options{Drain: true})
		if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("crash at state call %d: %d rows, want %d", at, len(got), len(want))
		}
	}
}

// TestRestoreDistinctDeltas continues count_distinct pipelines from
// checked-in state: testdata/compat/distinct-v2, whose base and upsert
// deltas (whole sets) were written by the release before merge deltas, and
// testdata/compat/distinct-merges, whose head holds merge deltas. The
// current release applies them, writes merge deltas on top, restores those
// in later runs, and ends with exactly the rows of a fresh run, also after a
// rescale.
func TestRestoreDistinctDeltas(t *testing.T) {
	for _, c := range []struct {
		fixture, in string
		head        int64
		kind        string // a delta kind the fixture's head must list
		until       int64  // run one epoch per run up to here
	}{
		{"distinct-v2", "in", 12, manifest.DeltaUpserts, 36},
		{"distinct-merges", "../distinct-v2/in", 34, manifest.DeltaMerges, 39},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			fixture := filepath.Join("../testdata/compat", c.fixture)
			dir := t.TempDir()
			for _, sub := range []string{"state", "sink"} {
				if err := os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join(fixture, sub))); err != nil {
					t.Fatal(err)
				}
			}
			in, err := filepath.Abs(filepath.Join(fixture, c.in))
			if err != nil {
				t.Fatal(err)
			}
			load := func(state, sink string) *spec.Pipeline {
				p, err := spec.Load(filepath.Join(fixture, "pipeline.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				p.Source.URL, p.State.URL, p.Sink.URL = fileURL(in), fileURL(state), fileURL(sink)
				return p
			}
			p := load(filepath.Join(dir, "state"), filepath.Join(dir, "sink"))
			countKind := func(m *manifest.Manifest, kind string) int {
				n := 0
				for _, d := range m.Operators[0].Deltas {
					if d.Kind == kind {
						n++
					}
				}
				return n
			}
			if old := headChain(t, p, 1)[0]; old.Epoch != c.head || countKind(old, c.kind) == 0 {
				t.Fatalf("fixture head: epoch %d with %d %s deltas; want epoch %d with some", old.Epoch, countKind(old, c.kind), c.kind, c.head)
			}
			// One epoch per run: each run restores the head's base and
			// deltas, the fixture's first, then the merges this release
			// wrote.
			restoredMerges := 0
			for ep := c.head + 1; ep <= c.until; ep++ {
				restoredMerges += countKind(headChain(t, p, 1)[0], manifest.DeltaMerges)
				res := run(t, p, engine.Options{UntilEpoch: ep})
				if res.Generation != 1 || res.FirstEpoch != ep {
					t.Fatalf("continued in generation %d from epoch %d; want generation 1, epoch %d", res.Generation, res.FirstEpoch, ep)
				}
			}
			if restoredMerges == 0 {
				t.Fatal("no run restored a merges delta")
			}
			run(t, p, engine.Options{Drain: true, Parallelism: 3})
			rd := t.TempDir()
			ref := load(filepath.Join(rd, "state"), filepath.Join(rd, "sink"))
			run(t, ref, engine.Options{Drain: true})
			if got, want := committedRows(t, p), committedRows(t, ref); !reflect.DeepEqual(got, want) {
				t.Fatalf("continued pipeline: %d rows, a fresh run: %d\n%s", len(got), len(want),
					diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
			}
		})
	}
}

// TestMergesDoNotForceCompaction: when every window of a count_distinct
// window changes every epoch (a few users, all active), the deltas are
// merge rows holding what each epoch added, so the epochs write deltas
// until their bytes pass half the bases, instead of a whole base every
// epoch; the result equals a single run's.
func TestMergesDoNotForceCompaction(t *testing.T) {
	put := func(e *env) {
		for i := range 12 {
			var lines []string
			for u := range 4 {
				lines = append(lines, fmt.Sprintf(`{"event_time":"2024-01-01T00:%02d:00Z","user_id":"u%d","page":"/p%d","bytes":%d}`, i, u, i*4+u, i))
			}
			e.put(t, fmt.Sprintf("f-%03d.jsonl", i), jsonl(lines...))
		}
	}
	ref := fileEnv(t)
	put(ref)
	pref := ref.pipeline(t, strings.Replace(growingSpec, "max_files_per_epoch: 1", "max_files_per_epoch: 100", 1))
	run(t, pref, engine.Options{Drain: true})

	e := fileEnv(t)
	put(e)
	p := e.pipeline(t, growingSpec)
	run(t, p, engine.Options{UntilEpoch: 12})
	bases, merges := 0, 0
	for _, m := range headChain(t, p, 11) {
		if m.Epoch == 1 {
			continue
		}
		for _, f := range m.Operators[0].Files {
			if strings.Contains(f.Path, fmt.Sprintf("epoch=%010d/", m.Epoch)) {
				bases++ // written by this epoch, not shared from an earlier one
			}
		}
		for _, d := range m.Operators[0].Deltas {
			if d.Kind == manifest.DeltaMerges && strings.Contains(d.Path, fmt.Sprintf("epoch=%010d/", m.Epoch)) {
				merges++
			}
		}
	}
	t.Logf("epochs 2-12: %d bases, %d merges files", bases, merges)
	if merges == 0 || bases >= 2*10 {
		t.Fatalf("epochs 2-12 wrote %d bases and %d merges files; with every window changed each epoch, merges should spare most bases", bases, merges)
	}
	run(t, p, engine.Options{Drain: true})
	if got, want := committedRows(t, p), committedRows(t, pref); !reflect.DeepEqual(got, want) {
		t.Fatalf("%d rows, a single run: %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
}
