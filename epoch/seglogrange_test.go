package epoch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// segHarness commits a segment log epoch by epoch, each "run" loading it
// afresh as a run would.
type segHarness struct {
	t    *testing.T
	ctx  context.Context
	cs   *countingStore
	c    *epoch.Committer
	head *epoch.Head
	gen  int64
}

func newSegHarness(t *testing.T) *segHarness {
	ctx := context.Background()
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &countingStore{Store: st}
	c := epoch.NewCommitter(cs, nil, "p", nil)
	head, err := c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.StartGeneration(ctx, head, manifest.Generation{Parallelism: 1, MaxParallelism: 128, PlanHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return &segHarness{t: t, ctx: ctx, cs: cs, c: c, head: head, gen: g.Generation}
}

// commit prepares add on l, commits the manifest and applies the edit; it
// returns the rows of the segments the epoch wrote.
func (h *segHarness) commit(l *epoch.SegLog, add []string) int64 {
	h.t.Helper()
	att := h.c.Begin(h.head, h.gen)
	ed, err := l.Prepare(h.ctx, att, add)
	if err != nil {
		h.t.Fatal(err)
	}
	m := &manifest.Manifest{Watermark: manifest.NoWatermark}
	m.Source.Inline, m.Source.Segments = ed.Inline, ed.Segments
	m.Source.Count = int64(l.Len() + len(ed.Added))
	if h.head, err = att.Commit(h.ctx, m); err != nil {
		h.t.Fatal(err)
	}
	var written int64
	for _, r := range ed.Segments {
		if strings.Contains(r.Path, att.ID) {
			written += r.Rows
		}
	}
	l.Apply(ed)
	return written
}

func inlineOf(h *epoch.Head) []string {
	if h.Manifest == nil {
		return nil
	}
	return h.Manifest.Source.Inline
}

func key(i int) string { return fmt.Sprintf("day=2026-12-01/f%06d.jsonl", i) }

// TestSegLogLoadAfter: a ranged log loaded after a frontier reads none of
// the segments that end at or before it, answers Has exactly for the keys
// after it and counts the rest; over 300 runs of 20 new keys each its
// manifest keeps at most MaxSegments segments while no run reads the old
// large ones (each key is rewritten a few times, not once per
// compaction), and a whole load sees every key once.
func TestSegLogLoadAfter(t *testing.T) {
	h := newSegHarness(t)
	const runs, per = 300, 20
	var written int64
	n := 0
	for run := 0; run < runs; run++ {
		l := epoch.NewSegLog("seen", 16)
		l.Ranged = true
		after := ""
		if n > 0 {
			after = key(n - 1)
		}
		h.cs.reset()
		var segs []manifest.FileRef
		if h.head.Manifest != nil {
			segs = h.head.Manifest.Source.Segments
		}
		if err := l.LoadAfter(h.ctx, h.cs, inlineOf(h.head), segs, after); err != nil {
			t.Fatal(err)
		}
		if n > 16 && h.cs.gets != 0 {
			t.Fatalf("run %d: the load after %s read %d segments, want none (every one ends at or before it)", run, after, h.cs.gets)
		}
		if l.Len() != n {
			t.Fatalf("run %d: Len %d, want %d", run, l.Len(), n)
		}
		var add []string
		for i := n; i < n+per; i++ {
			if l.Has(key(i)) {
				t.Fatalf("run %d: Has(%s) before it was added", run, key(i))
			}
			add = append(add, key(i))
		}
		written += h.commit(l, add)
		n += per
		if segs := h.head.Manifest.Source.Segments; len(segs) > epoch.MaxSegments {
			t.Fatalf("run %d: %d segments, bound %d", run, len(segs), epoch.MaxSegments)
		}
		for _, r := range h.head.Manifest.Source.Segments {
			if r.First == "" || r.Last == "" || r.First > r.Last {
				t.Fatalf("run %d: segment %s has no range [%q, %q]", run, r.Path, r.First, r.Last)
			}
		}
	}
	if written > int64(n)*12 {
		t.Fatalf("the runs wrote %d segment rows for %d keys: compaction rewrites the old segments", written, n)
	}
	all := epoch.NewSegLog("seen", 16)
	if err := all.LoadFrom(h.ctx, h.cs, nil, h.head.Manifest.Source.Segments, ""); err != nil {
		t.Fatal(err)
	}
	if all.Len() != n {
		t.Fatalf("whole load: %d entries, want %d", all.Len(), n)
	}
	for i := 0; i < n; i++ {
		if !all.Has(key(i)) {
			t.Fatalf("whole load lacks %s", key(i))
		}
	}
	t.Logf("%d keys over %d runs: %d segment rows written, %d segments", n, runs, written, len(h.head.Manifest.Source.Segments))

	// Remove on a partial log (forget_after on a listed key): the next
	// Prepare reads the skipped segments and rewrites the whole log.
	l := epoch.NewSegLog("seen", 16)
	l.Ranged = true
	if err := l.LoadAfter(h.ctx, h.cs, nil, h.head.Manifest.Source.Segments, key(n-30)); err != nil {
		t.Fatal(err)
	}
	if !l.Partial() {
		t.Fatal("a load after all but the newest keys read everything")
	}
	if got := l.Remove([]string{key(n - 5)}); got != 1 {
		t.Fatalf("Remove = %d, want 1", got)
	}
	h.commit(l, []string{key(n)})
	all = epoch.NewSegLog("seen", 16)
	if err := all.LoadFrom(h.ctx, h.cs, nil, h.head.Manifest.Source.Segments, ""); err != nil {
		t.Fatal(err)
	}
	if all.Len() != n || all.Has(key(n-5)) || !all.Has(key(0)) || !all.Has(key(n)) {
		t.Fatalf("after Remove on a partial log: %d entries (want %d), has removed %v, first %v, new %v",
			all.Len(), n, all.Has(key(n-5)), all.Has(key(0)), all.Has(key(n)))
	}
}

// TestSegLogRanges: segments without a range (an unranged log, or written
// before ranges) are read by LoadAfter; a recorded range that does not
// hold a segment's entries is corruption, not a reason to skip it.
func TestSegLogRanges(t *testing.T) {
	h := newSegHarness(t)
	l := epoch.NewSegLog("seen", 0)
	for i := 0; i < 3; i++ {
		h.commit(l, []string{key(2 * i), key(2*i + 1)})
	}
	segs := h.head.Manifest.Source.Segments
	if segs[0].First != "" || segs[0].Last != "" {
		t.Fatalf("an unranged log wrote a range: %+v", segs[0])
	}
	re := epoch.NewSegLog("seen", 0)
	h.cs.reset()
	if err := re.LoadAfter(h.ctx, h.cs, nil, segs, key(100)); err != nil {
		t.Fatal(err)
	}
	if h.cs.gets != len(segs) || re.Partial() || !re.Has(key(0)) {
		t.Fatalf("LoadAfter of unranged segments read %d of %d, partial %v", h.cs.gets, len(segs), re.Partial())
	}
	lying := append([]manifest.FileRef(nil), segs...)
	lying[1].First, lying[1].Last = key(2), key(2) // the segment also holds key(3)
	re = epoch.NewSegLog("seen", 0)
	err := re.LoadAfter(h.ctx, h.cs, nil, lying, key(1))
	if !errors.Is(err, manifest.ErrCorrupt) || !strings.Contains(err.Error(), "outside the segment's recorded range") {
		t.Fatalf("a segment outside its range: %v", err)
	}
}
