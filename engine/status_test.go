package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// TestStatusHealth walks a pipeline through every health state status
// reports: empty, behind (with bytes and the oldest file's age), healthy,
// drained, input after the drain, and a pointer at a missing manifest.
func TestStatusHealth(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	p := e.pipeline(t, windowSpec)
	now := time.Date(2024, 1, 1, 0, 10, 0, 0, time.UTC)
	status := func() *engine.Status {
		t.Helper()
		s, err := engine.ReadStatusWith(ctx, p, engine.StatusOptions{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		return s
	}
	if s := status(); s.State != engine.HealthEmpty || s.Committed || *s.PendingFiles != 0 {
		t.Fatalf("fresh pipeline: %+v", s)
	}

	a := jsonl(ev("00:00:10", "u1", 1), ev("00:01:10", "u2", 2))
	b := jsonl(ev("00:02:10", "u1", 3))
	e.put(t, "a.jsonl", a)
	e.put(t, "b.jsonl", b)
	old := now.Add(-90 * time.Second)
	if err := os.Chtimes(filepath.Join(e.sourceDir, "a.jsonl"), old, old); err != nil {
		t.Fatal(err)
	}
	s := status()
	if s.State != engine.HealthBehind || *s.PendingFiles != 2 || *s.PendingBytes != int64(len(a)+len(b)) ||
		s.OldestPending != "a.jsonl" || *s.OldestPendingAgeS != 90 {
		t.Fatalf("behind: %+v", s)
	}
	if !strings.HasPrefix(s.Health, "behind by 2 files") || !strings.Contains(s.Health, "1m30s ago") {
		t.Fatalf("behind: health %q", s.Health)
	}

	res := run(t, p, engine.Options{})
	s = status()
	if s.State != engine.HealthHealthy || *s.PendingFiles != 0 || s.Epoch != res.LastEpoch || s.RetainedEpochs != 2 ||
		s.OldestRetainedEpoch != 1 || s.Parallelism != 2 {
		t.Fatalf("healthy: %+v", s)
	}
	if s.LastCommit == nil || *s.LastCommitAgeS != now.Sub(*s.LastCommit).Seconds() {
		t.Fatalf("last commit: %v age %v", s.LastCommit, s.LastCommitAgeS)
	}
	// Newest event 00:02:10, no out-of-orderness: the watermark is there.
	if s.MaxEventTime != "2024-01-01T00:02:10Z" || *s.WatermarkLagEventS != 0 || *s.WatermarkLagWallS != 470 {
		t.Fatalf("watermark lag: max %s event %v wall %v", s.MaxEventTime, *s.WatermarkLagEventS, *s.WatermarkLagWallS)
	}
	if s.StateBytes == 0 || len(s.Operators) != 1 || len(s.Operators[0].Subtasks) != 2 || s.StateRows != s.Operators[0].Rows {
		t.Fatalf("state sizes: %+v", s.Operators)
	}
	var sum int64
	for _, st := range s.Operators[0].Subtasks {
		sum += st.BaseBytes + st.DeltaBytes
	}
	if sum != s.StateBytes {
		t.Fatalf("subtask bytes add up to %d, state bytes %d", sum, s.StateBytes)
	}

	run(t, p, engine.Options{Drain: true})
	if s := status(); s.State != engine.HealthDrained || s.WatermarkLagWallS != nil {
		t.Fatalf("drained: %+v", s)
	}
	e.put(t, "c.jsonl", jsonl(ev("00:05:10", "u3", 1)))
	if s := status(); s.State != engine.HealthLateData || !strings.Contains(s.Health, "1 files") {
		t.Fatalf("input after drain: %+v", s)
	}

	// Remove the manifest the pointer names: damaged, not an error.
	st, err := store.Open(ctx, p.State.URL+"/t")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Delete(ctx, manifest.ManifestPath(s.Generation, s.Epoch+1)); err != nil {
		t.Fatal(err)
	}
	if s := status(); s.State != engine.HealthDamaged || !strings.Contains(s.Health, "points at a manifest") {
		t.Fatalf("damaged: %+v", s)
	}
}

// TestHistory: one record per retained epoch, newest first, with per-epoch
// rows (differences of the cumulative counters) adding up to the head's
// counters, and the object-store requests the engine recorded.
func TestHistory(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	p := e.pipeline(t, windowSpec)
	for i, ts := range []string{"00:00:10", "00:01:10", "00:02:10", "00:03:10"} {
		e.put(t, string(rune('a'+i))+".jsonl", jsonl(ev(ts, "u1", 1), ev(ts, "u2", 2), `not json`))
	}
	res := run(t, p, engine.Options{})
	recs, err := engine.History(ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != res.Epochs || recs[0].Epoch != res.LastEpoch {
		t.Fatalf("%d records, newest epoch %d; want %d, %d", len(recs), recs[0].Epoch, res.Epochs, res.LastEpoch)
	}
	var in, out, rej, files int64
	for i, r := range recs {
		if i > 0 && r.Epoch != recs[i-1].Epoch-1 {
			t.Fatalf("not newest first: %d after %d", r.Epoch, recs[i-1].Epoch)
		}
		if r.Gets == nil || r.Puts == nil || *r.Puts == 0 || r.DurationS == nil || r.BytesWritten == nil || r.RowsIn == nil {
			t.Fatalf("epoch %d lacks stats: %+v", r.Epoch, r)
		}
		in, out, rej, files = in+*r.RowsIn, out+*r.RowsOut, rej+*r.RowsRejected, files+*r.Files
	}
	if in != 12 || rej != 4 || files != 4 || out != res.RowsOut {
		t.Fatalf("sums: in %d rejected %d files %d out %d; want 12, 4, 4, %d", in, rej, files, out, res.RowsOut)
	}
	two, err := engine.History(ctx, p, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(two) != 2 || two[1].RowsIn == nil || *two[1].RowsIn != *recs[1].RowsIn {
		t.Fatalf("--limit 2: %+v", two)
	}
	var b strings.Builder
	engine.PrintHistory(&b, recs)
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != len(recs)+1 {
		t.Fatalf("printed %d lines:\n%s", len(lines), b.String())
	}
}
