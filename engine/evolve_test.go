package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// TestStateEvolution: an aggregate added and another renamed (renamed_from)
// keep the pipeline's state: plan and run agree, the run continues in a new
// generation, and windows emitted after the change carry the old
// aggregates' full values; a window-shape change is refused before anything
// is written.
func TestStateEvolution(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	// One window per user over the whole input, open across the change.
	base := strings.Replace(windowSpec, "tumbling: 1m", "tumbling: 1h", 1)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u1", 2), ev("00:00:30", "u2", 5)))
	run(t, e.pipeline(t, base), engine.Options{})

	edited := strings.Replace(base, `aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}`,
		`aggregates: {clicks: "count()", bytes_total: {expr: "sum(bytes)", renamed_from: total_bytes}, pages: "count_distinct(page)"}`, 1)
	if edited == base {
		t.Fatal("template did not change")
	}
	p := e.pipeline(t, edited)
	rep, err := engine.Plan(ctx, p, engine.Options{})
	if err != nil || !rep.Compatible || len(rep.StateChanges) < 2 {
		t.Fatalf("plan of an added and a renamed aggregate: %+v %v", rep, err)
	}
	t.Logf("state changes: %q", rep.StateChanges)
	e.put(t, "2.jsonl", jsonl(ev("00:10:10", "u1", 4)))
	res := run(t, p, engine.Options{Drain: true})
	if res.Generation != 2 {
		t.Fatalf("generation %d after a compatible plan change, want 2", res.Generation)
	}
	var u1 string
	for _, r := range committedRows(t, p) {
		if strings.Contains(r, "user_id=u1") {
			u1 = r
		}
	}
	// u1's window held 2 clicks (3 bytes) before the change and 1 after;
	// pages counts only what the window saw after the change.
	if !strings.Contains(u1, "clicks=3") || !strings.Contains(u1, "bytes_total=7") || !strings.Contains(u1, "pages=1") {
		t.Fatalf("u1's window after the change: %q; want clicks=3, bytes_total=7 (carried over), pages=1 (new)", u1)
	}

	// A window shape change cannot be migrated: refused, nothing written.
	f := fileEnv(t)
	f.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	run(t, f.pipeline(t, base), engine.Options{})
	before := snapshot(t, f.state, f.sink)
	_, err = engine.Run(ctx, f.pipeline(t, strings.Replace(base, "tumbling: 1h", "tumbling: 2h", 1)), engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("window size change: %v", err)
	}
	if after := snapshot(t, f.state, f.sink); len(after) != len(before) {
		t.Fatalf("a refused change wrote %d objects", len(after)-len(before))
	}
	t.Logf("refusal: %v", err)
}

// TestStateEvolutionWindowKinds: an aggregate added to a running sliding
// and a running session window keeps the existing accumulators; the new
// one starts from its identity (here: sum is null until a row arrives).
func TestStateEvolutionWindowKinds(t *testing.T) {
	for _, c := range []struct{ name, window, want string }{
		// Sliding 2m/1m: the rows at 00:00:10 and 00:00:50 (before the
		// change) and 00:01:10 (after) fall into the window [00:00, 00:02).
		{"sliding", "sliding: {size: 2m, slide: 1m}", "window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:02:00Z,clicks=3,mx=5"},
		// Session gap 1m: one session 00:00:10..00:02:10 of three rows.
		{"session", "session: {gap: 1m}", "window_start=2024-01-01T00:00:10Z,window_end=2024-01-01T00:02:10Z,clicks=3,mx=5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := fileEnv(t)
			base := strings.Replace(windowSpec, "tumbling: 1m", c.window, 1)
			base = strings.Replace(base, `aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}`, `aggregates: {clicks: "count()"}`, 1)
			e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:50", "u1", 2)))
			run(t, e.pipeline(t, base), engine.Options{})
			edited := strings.Replace(base, `aggregates: {clicks: "count()"}`, `aggregates: {clicks: "count()", mx: "max(bytes)"}`, 1)
			p := e.pipeline(t, edited)
			rep, err := engine.Plan(context.Background(), p, engine.Options{})
			if err != nil || !rep.Compatible || len(rep.StateChanges) != 1 {
				t.Fatalf("plan: %+v %v", rep, err)
			}
			e.put(t, "2.jsonl", jsonl(ev("00:01:10", "u1", 5)))
			run(t, p, engine.Options{Drain: true})
			var found bool
			for _, r := range committedRows(t, p) {
				if strings.Contains(r, c.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("rows %q; want %s (clicks carried over, max only of the row after the change)", committedRows(t, p), c.want)
			}
		})
	}
}

// TestIncompatibleChangesRefused: every kind of change that cannot be
// migrated is refused by plan and by run with the same message, and the
// state and sink are byte for byte unchanged.
func TestIncompatibleChangesRefused(t *testing.T) {
	base := strings.Replace(windowSpec, "tumbling: 1m", "tumbling: 1h", 1)
	for _, c := range []struct{ name, from, to string }{
		{"window size", "tumbling: 1h", "tumbling: 2h"},
		{"window kind", "tumbling: 1h", "sliding: {size: 1h, slide: 30m}"},
		{"key", "key: [user_id]", "key: [page]"},
		{"function", `total_bytes: "sum(bytes)"`, `total_bytes: "max(bytes)"`},
		{"column narrowed to a string", `total_bytes: "sum(bytes)"`, `total_bytes: "sum(page)"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e := fileEnv(t)
			e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
			run(t, e.pipeline(t, base), engine.Options{})
			if !strings.Contains(base, c.from) {
				t.Fatalf("template lacks %q", c.from)
			}
			p := e.pipeline(t, strings.Replace(base, c.from, c.to, 1))
			e.put(t, "2.jsonl", jsonl(ev("00:00:20", "u1", 1)))
			before := snapshot(t, e.state, e.sink)
			rep, perr := engine.Plan(ctx, p, engine.Options{})
			_, rerr := engine.Run(ctx, p, engine.Options{})
			switch {
			case rerr == nil:
				t.Fatal("run accepted the change")
			case perr != nil:
				// A change compile itself refuses (sum of a string) is the
				// same error from both.
				if perr.Error() != rerr.Error() {
					t.Fatalf("plan and run disagree:\nplan: %v\nrun:  %v", perr, rerr)
				}
			case rep.Compatible || rep.Incompatible != rerr.Error():
				t.Fatalf("plan and run disagree:\nplan: %v %q\nrun:  %v", rep.Compatible, rep.Incompatible, rerr)
			}
			if after := snapshot(t, e.state, e.sink); !reflect.DeepEqual(before, after) {
				t.Fatalf("a refused change altered objects")
			}
			t.Logf("%s: %v", c.name, rerr)
		})
	}
}

// evolveGraph is a graph with a window stage per user and a second window
// over its results (timed by window_end - 1µs: the hidden-time operator).
const evolveGraph = `
name: evolve-graph
` + clicksSource + `stages:
  - name: per-user
    input: clicks
    window: {key: [user_id], tumbling: 1h, aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
  - name: by-clicks
    input: per-user
    window: {key: [clicks], tumbling: 2h, aggregates: {users: "count()"}}
sinks:
  out: {input: by-clicks, type: files, url: "{{sink}}", format: parquet}
  users: {input: per-user, type: files, url: "{{late}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`

// TestGraphStateEvolution: aggregates added to a graph's window stages (and
// one renamed with renamed_from) migrate their state as the linear form's
// window does (TestStateEvolution): plan and run agree, the run continues
// in a new generation, windows open across the change keep the old
// aggregates' values and start the new ones from their identity, for a
// plain window stage and one behind the hidden-time operator. A window
// shape change is refused before anything is written.
func TestGraphStateEvolution(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	// Epoch 1: the per-user windows of 00:00 fire (u1: 2 clicks, u2: 1)
	// into by-clicks, whose window of 00:00-02:00 holds them; u1's
	// per-user window of 01:00 stays open.
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u1", 2), ev("00:00:30", "u2", 5), ev("01:00:30", "u1", 1)))
	if res := run(t, e.pipeline(t, evolveGraph), engine.Options{}); res.Generation != 1 {
		t.Fatalf("first run: %+v", res)
	}
	edited := strings.NewReplacer(
		`aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}`,
		`aggregates: {clicks: "count()", bytes_total: {expr: "sum(bytes)", renamed_from: total_bytes}, pages: "count_distinct(page)"}`,
		`aggregates: {users: "count()"}`, `aggregates: {users: "count()", mx: "max(bytes_total)"}`).Replace(evolveGraph)
	p := e.pipeline(t, edited)
	rep, err := engine.Plan(ctx, p, engine.Options{})
	if err != nil || !rep.Compatible || len(rep.StateChanges) < 3 {
		t.Fatalf("plan of added and renamed aggregates in two window stages: %+v %v", rep, err)
	}
	t.Logf("state changes: %q", rep.StateChanges)
	e.put(t, "2.jsonl", jsonl(ev("01:10:00", "u1", 4)))
	res := run(t, p, engine.Options{Drain: true})
	if res.Generation != 2 {
		t.Fatalf("generation %d after a compatible plan change, want 2", res.Generation)
	}
	users, out := sinkRows(t, p, "users"), sinkRows(t, p, "out")
	wantUsers := []string{
		// Emitted before the change, in the old layout.
		"user_id=u1,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T01:00:00Z,clicks=2,total_bytes=3",
		// Open across the change: 1 click (1 byte) before it, 1 (4 bytes) after.
		"user_id=u1,window_start=2024-01-01T01:00:00Z,window_end=2024-01-01T02:00:00Z,clicks=2,bytes_total=5,pages=1",
		"user_id=u2,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T01:00:00Z,clicks=1,total_bytes=5",
	}
	wantOut := []string{
		// Held by by-clicks across the change: u2's window (before it)
		// counts, and mx starts from its identity.
		"clicks=1,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T02:00:00Z,users=1,mx=(null)",
		// u1's windows of 00:00 (before the change) and 01:00 (after).
		"clicks=2,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T02:00:00Z,users=2,mx=5",
	}
	if !reflect.DeepEqual(users, wantUsers) {
		t.Fatalf("per-user rows:\n%s\nwant\n%s", strings.Join(users, "\n"), strings.Join(wantUsers, "\n"))
	}
	if !reflect.DeepEqual(out, wantOut) {
		t.Fatalf("by-clicks rows:\n%s\nwant\n%s", strings.Join(out, "\n"), strings.Join(wantOut, "\n"))
	}
	// Replay restores the epochs of generation 2 as the run did: from
	// generation 1's state, migrated.
	var replayed []string
	for ep := res.LastEpoch - int64(res.Epochs) + 1; ep <= res.LastEpoch; ep++ {
		rr, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: ep})
		if err != nil {
			t.Fatalf("replay of epoch %d: %v", ep, err)
		}
		replayed = append(replayed, rr.Lines()...)
	}
	if got := strings.Join(replayed, "\n"); !strings.Contains(got, `"clicks":2`) || !strings.Contains(got, `"users":2`) || !strings.Contains(got, `"mx":5`) {
		t.Fatalf("replay of generation 2's epochs:\n%s\nwant by-clicks' window of 2 users (one before the change), mx 5", got)
	}

	// A window shape change cannot be migrated: refused, nothing written.
	f := fileEnv(t)
	f.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	run(t, f.pipeline(t, evolveGraph), engine.Options{})
	before := snapshot(t, f.state, f.sink)
	_, err = engine.Run(ctx, f.pipeline(t, strings.Replace(evolveGraph, "key: [user_id], tumbling: 1h", "key: [user_id], tumbling: 2h", 1)), engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), `"per-user"`) {
		t.Fatalf("window size change: %v", err)
	}
	if after := snapshot(t, f.state, f.sink); len(after) != len(before) {
		t.Fatalf("a refused change wrote %d objects", len(after)-len(before))
	}
	t.Logf("refusal: %v", err)
}

// TestGraphStateEvolutionNeedsStatePlan: a graph generation written before
// graph window stages recorded their state plans (testdata/compat/graph-v1)
// has nothing to migrate from: its pipeline keeps running as it is, and an
// aggregate added to its window stage is refused as before, naming the
// stage, with nothing written. The next generation a release writes records
// the plans.
func TestGraphStateEvolutionNeedsStatePlan(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(graphFixtureDir)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pipeline.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := `top_price: "max(price)"}`
	if !strings.Contains(string(data), old) {
		t.Fatalf("fixture spec has no %s", old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, `top_price: "max(price)", low: "min(price)"}`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state", p.Name)
	head := fixtureHead(t, stateDir)
	for _, o := range readGeneration(t, stateDir, head.Generation).Plan {
		if o.StatePlan != "" {
			t.Fatalf("fixture generation records a state plan for %s: this test needs one that does not", o.ID)
		}
	}
	rep, err := engine.Plan(context.Background(), p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Compatible || !strings.Contains(rep.Incompatible, `operator "per-category" changed its state layout`) {
		t.Fatalf("an aggregate added to a window stage whose generation recorded no state plan: %+v", rep)
	}
	before := snapshot(t, filepath.Join(dir, "state"), filepath.Join(dir, "out"))
	if len(before) == 0 {
		t.Fatal("the fixture copy holds no objects")
	}
	if _, err := engine.Run(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), "changed its state layout") {
		t.Fatalf("run: %v", err)
	}
	if after := snapshot(t, filepath.Join(dir, "state"), filepath.Join(dir, "out")); len(after) != len(before) {
		t.Fatalf("a refused change wrote %d objects", len(after)-len(before))
	}
}
