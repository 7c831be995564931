package engine_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
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
