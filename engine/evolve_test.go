package engine_test

import (
	"context"
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
