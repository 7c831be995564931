package engine

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
// maxSegments), and a fresh load sees every file exactly once.
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
	seen := newSegLog("seen", inlineSeenMax)
	const epochs, perEpoch = 200, 500
	var maxSize int
	for e := 0; e < epochs; e++ {
		att := c.Begin(head, g.Generation)
		for i := 0; i < perEpoch; i++ {
			seen.append(fmt.Sprintf("year=2026/month=11/day=29/events-%07d.jsonl", e*perEpoch+i))
		}
		m := &manifest.Manifest{Watermark: manifest.NoWatermark}
		if m.Source.Inline, m.Source.Segments, err = seen.flush(ctx, att); err != nil {
			t.Fatal(err)
		}
		m.Source.Count = int64(len(seen.entries))
		if head, err = att.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
		data, _, err := st.Get(ctx, manifest.ManifestPath(head.Manifest.Generation, head.Manifest.Epoch))
		if err != nil {
			t.Fatal(err)
		}
		maxSize = max(maxSize, len(data))
		if len(m.Source.Segments) > maxSegments {
			t.Fatalf("epoch %d: %d segments, bound is %d", e+1, len(m.Source.Segments), maxSegments)
		}
	}
	if maxSize > 64<<10 {
		t.Fatalf("largest manifest %d bytes with %d files; want well under 1 MiB", maxSize, epochs*perEpoch)
	}
	re := newSegLog("seen", inlineSeenMax)
	if err := re.load(ctx, c, head.Manifest.Source.Inline, head.Manifest.Source.Segments); err != nil {
		t.Fatal(err)
	}
	if len(re.entries) != epochs*perEpoch || !re.has("year=2026/month=11/day=29/events-0000000.jsonl") ||
		!re.has(fmt.Sprintf("year=2026/month=11/day=29/events-%07d.jsonl", epochs*perEpoch-1)) {
		t.Fatalf("reloaded %d entries, want %d", len(re.entries), epochs*perEpoch)
	}
	t.Logf("largest manifest: %d bytes for %d processed files", maxSize, epochs*perEpoch)
}
