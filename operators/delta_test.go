package operators

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/keygroup"
)

// persisted is what a caller of SnapshotDelta keeps: a base and the deltas
// after it, in order, and the watermark of the last one.
type persisted struct {
	base   []arrow.RecordBatch
	deltas []persistedDelta
	wm     int64
}

// persistedDelta is one SnapshotDelta (merges nil) or SnapshotDeltaMerges.
type persistedDelta struct{ ups, merges, tombs []arrow.RecordBatch }

func (p *persisted) release() {
	release(p.base...)
	for _, d := range p.deltas {
		release(d.ups...)
		release(d.merges...)
		release(d.tombs...)
	}
	p.base, p.deltas = nil, nil
}

// rebuild restores p's key groups [lo, hi) into a fresh window.
func (p *persisted) rebuild(t *testing.T, spec WindowSpec, lo, hi int) *Window {
	t.Helper()
	w := newWin(t, spec)
	if err := w.Restore(p.base, lo, hi, p.wm); err != nil {
		t.Fatal(err)
	}
	for i, d := range p.deltas {
		if err := w.ApplyDelta(d.ups, d.tombs, lo, hi); err != nil {
			t.Fatalf("delta %d: %v", i, err)
		}
		if err := w.ApplyMerges(d.merges, lo, hi); err != nil {
			t.Fatalf("delta %d merges: %v", i, err)
		}
	}
	return w
}

func snapRows(t *testing.T, w *Window) []string {
	t.Helper()
	snap, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	var out []string
	for _, r := range snap {
		out = append(out, rowsOf(r)...)
	}
	return out
}

func countRows(bs []arrow.RecordBatch) int {
	n := 0
	for _, b := range bs {
		n += int(b.NumRows())
	}
	return n
}

// TestDeltaProperty: for random streams of batches and watermark advances,
// over every window kind and every aggregate, Restore(base) + ApplyDelta of
// every delta since, in order, gives exactly the state Snapshot gives, in
// one instance and split over key-group ranges (rescale); Dirty counts the
// rows of the delta; deltas follow full snapshots taken at random points.
func TestDeltaProperty(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	steps := 300
	if testing.Short() {
		steps = 80
	}
	specs := []WindowSpec{
		{Kind: Tumbling, Size: 10 * us, AllowedLateness: 5 * us},
		{Kind: Sliding, Size: 20 * us, Slide: 5 * us, AllowedLateness: 3 * us},
		{Kind: Sliding, Size: 12 * us, Slide: 4 * us, AllowedLateness: 30 * us},
		{Kind: Session, Gap: 7 * us, AllowedLateness: 4 * us},
		{Kind: Session, Gap: 3 * us},
	}
	for si, spec := range specs {
		t.Run(fmt.Sprintf("%s%d", spec.Kind, si), func(t *testing.T) {
			spec.Aggregates = allAggs(t)
			live := newWin(t, spec)
			p := &persisted{wm: math.MinInt64}
			defer p.release()
			checkpoints, mergeRows := 0, 0
			for i, o := range randomStream(rng, steps) {
				switch {
				case o.advance:
					out, err := live.Advance(o.wm)
					if err != nil {
						t.Fatal(err)
					}
					release(out)
				case o.p > 0 || rng.IntN(5) == 0:
					// A checkpoint: a full base now and then, else a delta.
					checkpoints++
					if p.base == nil || rng.IntN(6) == 0 {
						p.release()
						snap, err := live.Snapshot()
						if err != nil {
							t.Fatal(err)
						}
						p.base, p.wm = snap, live.Watermark()
						if c, r := live.Dirty(); c != 0 || r != 0 {
							t.Fatalf("step %d: Dirty() = %d, %d right after Snapshot", i, c, r)
						}
						break
					}
					changed, removed := live.Dirty()
					var d persistedDelta
					var err error
					if rng.IntN(3) == 0 {
						d.ups, d.tombs, err = live.SnapshotDelta()
					} else {
						// Changed windows of the last point whose
						// count_distinct sets only grew are merge rows.
						dm := live.DirtyMerges()
						d.ups, d.merges, d.tombs, err = live.SnapshotDeltaMerges()
						mergeRows += countRows(d.merges)
						if err == nil && dm != countRows(d.merges) {
							t.Fatalf("step %d: DirtyMerges() = %d; the delta has %d merge rows", i, dm, countRows(d.merges))
						}
					}
					if err != nil {
						t.Fatal(err)
					}
					if countRows(d.ups)+countRows(d.merges) != changed || countRows(d.tombs) != removed {
						t.Fatalf("step %d: Dirty() = %d, %d; delta has %d upserts, %d merges, %d tombstones", i, changed, removed, countRows(d.ups), countRows(d.merges), countRows(d.tombs))
					}
					checkDeltaBatches(t, live, append(slices.Clone(d.ups), d.merges...), d.tombs)
					p.deltas = append(p.deltas, d)
					p.wm = live.Watermark()
					want := snapRows(t, live) // a Snapshot right after a delta changes nothing
					eqLines(t, fmt.Sprintf("step %d: base + %d deltas", i, len(p.deltas)), snapRows(t, p.rebuild(t, spec, 0, 128)), want)
					// Rescale: each key-group range restores its share of base + deltas.
					cut := []int{0, 1 + rng.IntN(60), 61 + rng.IntN(60), 128}
					var split []string
					for r := range 3 {
						split = append(split, snapRows(t, p.rebuild(t, spec, cut[r], cut[r+1]))...)
					}
					eqLines(t, fmt.Sprintf("step %d: base + %d deltas split at %v", i, len(p.deltas), cut), split, want)
				default:
					rec := batch(t, o.rows...)
					late, err := live.Process(rec)
					rec.Release()
					if err != nil {
						t.Fatal(err)
					}
					release(late)
				}
			}
			if checkpoints < 10 {
				t.Fatalf("only %d checkpoints", checkpoints)
			}
			if mergeRows == 0 && spec.Kind != Session {
				// (A session's new row usually moves its bounds: a
				// tombstone and an upsert.)
				t.Fatal("no delta held a merge row: the merge path went untested")
			}
		})
	}
}

// checkDeltaBatches checks the schemas and the row order of a delta.
func checkDeltaBatches(t *testing.T, w *Window, ups, tombs []arrow.RecordBatch) {
	t.Helper()
	for _, u := range ups {
		if !u.Schema().Equal(w.StateSchema()) {
			t.Fatalf("upsert schema %s, want %s", u.Schema(), w.StateSchema())
		}
		if kgs := u.Column(0).(*array.Int32).Int32Values(); !slices.IsSorted(kgs) {
			t.Fatalf("upserts not sorted by key_group: %v", kgs)
		}
	}
	for _, tb := range tombs {
		if !tb.Schema().Equal(w.TombstoneSchema()) {
			t.Fatalf("tombstone schema %s, want %s", tb.Schema(), w.TombstoneSchema())
		}
		if kgs := tb.Column(0).(*array.Int32).Int32Values(); !slices.IsSorted(kgs) {
			t.Fatalf("tombstones not sorted by key_group: %v", kgs)
		}
	}
}

// TestDeltaHoldsOnlyChanges: with a large open state, a batch touching one
// key gives a delta of that key's windows only, an epoch without input an
// empty delta, and an Advance that emits tombstones of exactly what it
// emitted.
func TestDeltaHoldsOnlyChanges(t *testing.T) {
	for _, spec := range []WindowSpec{
		{Kind: Tumbling, Size: 10 * us},
		{Kind: Sliding, Size: 20 * us, Slide: 5 * us},
		{Kind: Session, Gap: 5 * us},
	} {
		t.Run(spec.Kind.String(), func(t *testing.T) {
			spec.Aggregates = mustAggs(t, "c", "count()", "cd", "count_distinct(s)")
			w := newWin(t, spec)
			var rows []ev
			for i := range 2000 {
				rows = append(rows, ev{ts: int64(i % 7), user: sp(fmt.Sprint("u", i%500)), s: sp(fmt.Sprint(i % 3))})
			}
			runSteps(t, w, []step{proc(rows...)})
			snap, err := w.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			release(snap...)
			delta := func() (ups, tombs []string) {
				u, tb, err := w.SnapshotDelta()
				if err != nil {
					t.Fatal(err)
				}
				defer release(u...)
				defer release(tb...)
				for _, r := range u {
					ups = append(ups, rowsOf(r)...)
				}
				for _, r := range tb {
					tombs = append(tombs, rowsOf(r)...)
				}
				return ups, tombs
			}
			if u, tb := delta(); len(u)+len(tb) != 0 {
				t.Fatalf("delta without changes: %v %v", u, tb)
			}
			runSteps(t, w, []step{proc(ev{ts: 9, user: sp("u7"), s: sp("new")})})
			u, tb := delta()
			for _, l := range u {
				if !strings.Contains(l, `"u7"`) {
					t.Errorf("upsert of an untouched key: %s", l)
				}
			}
			wantUps := 1                                           // the window, the slice or the session of the row
			wantTombs := map[WindowKind]int{Session: 1}[spec.Kind] // the session's bounds moved
			if len(u) != wantUps || len(tb) != wantTombs {
				t.Fatalf("one row: %d upserts %v, %d tombstones %v; want %d, %d", len(u), u, len(tb), tb, wantUps, wantTombs)
			}
			open := w.Len()
			out, err := w.Advance(math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			release(out)
			u, tb = delta()
			if len(u) != 0 || len(tb) != open {
				t.Fatalf("after emitting all %d open states: %d upserts, %d tombstones", open, len(u), len(tb))
			}
		})
	}
}

// TestApplyDeltaRejects: deltas out of order, wrong schemas and bad key
// groups are errors, not silent corruption.
func TestApplyDeltaRejects(t *testing.T) {
	spec := WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "c", "count()")}
	w := newWin(t, spec)
	runSteps(t, w, []step{proc(row(1, "a", 1), row(12, "b", 1))})
	base, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(base...)
	runSteps(t, w, []step{adv(10, `"a" 0 10 1`), proc(row(15, "c", 1))})
	ups, tombs, err := w.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	defer release(ups...)
	defer release(tombs...)
	if countRows(ups) != 1 || countRows(tombs) != 1 {
		t.Fatalf("delta: %d upserts, %d tombstones", countRows(ups), countRows(tombs))
	}
	fresh := func() *Window {
		f := newWin(t, spec)
		if err := f.Restore(base, 0, 128, 10); err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := fresh()
	if err := f.ApplyDelta(ups, tombs, 0, 128); err != nil {
		t.Fatal(err)
	}
	if err := f.ApplyDelta(ups, tombs, 0, 128); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("applying a delta twice: %v", err)
	}
	if err := fresh().ApplyDelta(append(slices.Clone(ups), ups...), nil, 0, 128); err == nil || !strings.Contains(err.Error(), "upserted twice") {
		t.Errorf("the same upsert twice in one delta: %v", err)
	}
	if err := fresh().ApplyDelta(tombs, nil, 0, 128); err == nil || !strings.Contains(err.Error(), "does not match state schema") {
		t.Errorf("tombstones as upserts: %v", err)
	}
	if err := fresh().ApplyDelta(nil, ups, 0, 128); err == nil || !strings.Contains(err.Error(), "does not match tombstone schema") {
		t.Errorf("upserts as tombstones: %v", err)
	}
	if err := fresh().ApplyDelta(nil, nil, 0, 129); err == nil {
		t.Error("key-group range beyond max parallelism accepted")
	}
	// Rows outside the range are skipped, also tombstones of windows the
	// instance does not hold.
	kgA := keygroup.Of(SerializeKey(nil, mustBatch(t, row(1, "a", 1)), 0, []int{1}), 128)
	g := newWin(t, spec)
	if err := g.Restore(base, kgA+1, 128, 10); err != nil {
		t.Fatal(err)
	}
	if err := g.ApplyDelta(ups, tombs, kgA+1, 128); err != nil {
		t.Errorf("tombstone outside the range: %v", err)
	}
}

func mustBatch(t *testing.T, rows ...ev) arrow.RecordBatch {
	b := batch(t, rows...)
	t.Cleanup(b.Release)
	return b
}
