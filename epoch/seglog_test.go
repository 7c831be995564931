package epoch_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// TestSeenSetBounded: with 100,000 processed files the manifest stays well
// under 1 MiB (the set spills to shared segments, compacted past
// epoch.MaxSegments), and a fresh load sees every file exactly once.
func TestSeenSetBounded(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := epoch.NewCommitter(st, nil, "p", nil)
	head, err := c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.StartGeneration(ctx, head, manifest.Generation{Parallelism: 1, MaxParallelism: 128, PlanHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	seen := epoch.NewSegLog("seen", 512)
	const epochs, perEpoch = 200, 500
	var maxSize int
	for e := 0; e < epochs; e++ {
		att := c.Begin(head, g.Generation)
		var add []string
		for i := 0; i < perEpoch; i++ {
			add = append(add, fmt.Sprintf("year=2026/month=11/day=29/events-%07d.jsonl", e*perEpoch+i))
		}
		ed, err := seen.Prepare(ctx, att, add)
		if err != nil {
			t.Fatal(err)
		}
		if seen.Len() != e*perEpoch {
			t.Fatalf("Prepare changed the log before the commit: %d entries, want %d", seen.Len(), e*perEpoch)
		}
		m := &manifest.Manifest{Watermark: manifest.NoWatermark}
		m.Source.Inline, m.Source.Segments = ed.Inline, ed.Segments
		m.Source.Count = int64(seen.Len() + len(ed.Added))
		if head, err = att.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
		seen.Apply(ed)
		data, _, err := st.Get(ctx, manifest.ManifestPath(head.Manifest.Generation, head.Manifest.Epoch))
		if err != nil {
			t.Fatal(err)
		}
		maxSize = max(maxSize, len(data))
		if len(m.Source.Segments) > epoch.MaxSegments {
			t.Fatalf("epoch %d: %d segments, bound is %d", e+1, len(m.Source.Segments), epoch.MaxSegments)
		}
	}
	if maxSize > 64<<10 {
		t.Fatalf("largest manifest %d bytes with %d files; want well under 1 MiB", maxSize, epochs*perEpoch)
	}
	re := epoch.NewSegLog("seen", 512)
	if err := re.Load(ctx, c, head.Manifest.Source.Inline, head.Manifest.Source.Segments); err != nil {
		t.Fatal(err)
	}
	if re.Len() != epochs*perEpoch || !re.Has("year=2026/month=11/day=29/events-0000000.jsonl") ||
		!re.Has(fmt.Sprintf("year=2026/month=11/day=29/events-%07d.jsonl", epochs*perEpoch-1)) {
		t.Fatalf("reloaded %d entries, want %d", re.Len(), epochs*perEpoch)
	}
	t.Logf("largest manifest: %d bytes for %d processed files", maxSize, epochs*perEpoch)
}
