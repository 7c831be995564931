package operators

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// lazyOf makes a LazyStateBatch of state batch rec (kept alive by the
// caller): the columns j.LazyStateColumns names, and a side decoder that
// counts its calls in calls.
func lazyOf(t *testing.T, j *Join, rec arrow.RecordBatch, calls *[2]int) LazyStateBatch {
	t.Helper()
	col := func(name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("state batch has no column %q", name)
		}
		return rec.Column(idx[0])
	}
	var cols []arrow.Array
	for _, name := range j.LazyStateColumns() {
		cols = append(cols, col(name))
	}
	return LazyStateBatch{Schema: rec.Schema(), Rows: int(rec.NumRows()), Cols: cols,
		Side: func(side int) ([]arrow.Array, error) {
			calls[side]++
			var out []arrow.Array
			for _, name := range j.LazySideColumns(side) {
				c := col(name)
				c.Retain()
				out = append(out, c)
			}
			return out, nil
		}}
}

func lazyAll(t *testing.T, j *Join, recs []arrow.RecordBatch, calls *[2]int) []LazyStateBatch {
	var out []LazyStateBatch
	for _, r := range recs {
		out = append(out, lazyOf(t, j, r, calls))
	}
	return out
}

// TestJoinLazyRestoreMatchesEager: a join restored by column
// (RestoreLazy of its base, ApplyDeltaLazy of its deltas' upserts) emits
// what the uninterrupted join emits, and snapshots the same state, for
// every kind of join, restarted every few epochs from base + deltas. The
// wide intervals expire nothing: their deltas have no tombstones, so
// replaced rows (flag changes) are found by key, without the index.
func TestJoinLazyRestoreMatchesEager(t *testing.T) {
	specs := append(joinSpecsUnderTest(), intervalSpec(InnerJoin, 1000*us, 1000*us, 0), intervalSpec(LeftJoin, 1000*us, 1000*us, 0))
	for _, spec := range specs {
		t.Run(specName(spec), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			stream := makeJStream(rng, 14)
			a, b := newJoin(t, spec), newJoin(t, spec)
			feed := func(j *Join, e jepoch) {
				for side := range 2 {
					rec := joinBatch(t, memory.DefaultAllocator, side, e.rows[side]...)
					late, err := j.ProcessInput(side, rec, nil)
					rec.Release()
					if err != nil {
						t.Fatal(err)
					}
					release(late)
				}
			}
			adv := func(j *Join, wm int64) []string {
				out, err := j.Advance(wm)
				if err != nil {
					t.Fatal(err)
				}
				defer release(out)
				return rowsOf(out)
			}
			var base []arrow.RecordBatch
			var deltas [][2][]arrow.RecordBatch
			t.Cleanup(func() {
				release(base...)
				for _, d := range deltas {
					release(d[0]...)
					release(d[1]...)
				}
			})
			var calls [2]int
			restarts := 0
			for ei, e := range stream {
				feed(a, e)
				feed(b, e)
				if ei > 0 {
					ups, tombs, err := b.SnapshotDelta()
					if err != nil {
						t.Fatal(err)
					}
					deltas = append(deltas, [2][]arrow.RecordBatch{ups, tombs})
				}
				switch {
				case ei == 0:
					base = mustSnap(t, b)
				case ei%4 == 3:
					// Restart from the base and every delta so far.
					c := newJoin(t, spec)
					if err := c.RestoreLazy(lazyAll(t, c, base, &calls), 0, 128, a.Watermark()); err != nil {
						t.Fatal(err)
					}
					for _, d := range deltas {
						if jRows(d[1]) > 0 {
							if err := c.ApplyDelta(nil, d[1], 0, 128); err != nil {
								t.Fatal(err)
							}
						}
						if err := c.ApplyDeltaLazy(lazyAll(t, c, d[0], &calls), nil, 0, 128); err != nil {
							t.Fatal(err)
						}
					}
					if c.Len() != b.Len() {
						t.Fatalf("epoch %d: lazy restore holds %d rows, want %d", ei, c.Len(), b.Len())
					}
					b = c
					restarts++
				}
				eqLines(t, fmt.Sprintf("epoch %d", ei), adv(b, e.wm), adv(a, e.wm))
			}
			if restarts == 0 {
				t.Fatal("no restart")
			}
			eqLines(t, "state", jStateLines(mustSnap(t, b)), jStateLines(mustSnap(t, a)))
			eqLines(t, "drain", adv(b, math.MaxInt64), adv(a, math.MaxInt64))
		})
	}
}

// TestJoinLazyRestoreDecodesBySide: after a restore by column, nothing is
// decoded until a row's data columns are needed: new right rows decode the
// left rows they pair with (their batch's left side), never the old right
// rows; a delta of the new rows decodes nothing more; a full snapshot
// decodes the rest.
func TestJoinLazyRestoreDecodesBySide(t *testing.T) {
	spec := intervalSpec(InnerJoin, 100*us, 100*us, 0)
	j := newJoin(t, spec)
	var lefts, rights []jev
	for i := range 200 {
		lefts = append(lefts, jl(int64(i), fmt.Sprint("u", i%50), int64(i)))
		rights = append(rights, jr(int64(i), fmt.Sprint("u", i%50+100), "old")) // keys no left row has
	}
	runJoin(t, j, nil)
	for side, rows := range [][]jev{lefts, rights} {
		rec := joinBatch(t, memory.DefaultAllocator, side, rows...)
		if _, err := j.ProcessInput(side, rec, nil); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if out, err := j.Advance(0); err != nil {
		t.Fatal(err)
	} else if out != nil {
		t.Fatalf("%d pairs; want none (the keys differ)", out.NumRows())
	}
	state := mustSnap(t, j)
	var calls [2]int
	r := newJoin(t, spec)
	if err := r.RestoreLazy(lazyAll(t, r, state, &calls), 0, 128, j.Watermark()); err != nil {
		t.Fatal(err)
	}
	if d, l := r.Decoded(); calls != [2]int{} || d != 0 || l != 400 {
		t.Fatalf("after restore: side decodes %v, rows decoded %d, lazy %d; want none decoded, 400 lazy", calls, d, l)
	}
	if out, err := r.Advance(0); err != nil {
		t.Fatal(err)
	} else if out != nil {
		t.Fatalf("advance without input emitted %d rows", out.NumRows())
	}
	if calls != [2]int{} {
		t.Fatalf("advance without input decoded %v", calls)
	}
	// New right rows of key u7 at 150 and 151: each pairs with the left
	// rows of u7 within 100 (57, 107, 157).
	rec := joinBatch(t, memory.DefaultAllocator, 1, jr(150, "u7", "new"), jr(151, "u7", "new"))
	if _, err := r.ProcessInput(1, rec, nil); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	out, err := r.Advance(200)
	if err != nil {
		t.Fatal(err)
	}
	if out == nil || out.NumRows() != 6 {
		t.Fatalf("pairs: got %v, want 6 rows", out)
	}
	release(out)
	if calls[0] == 0 || calls[1] != 0 {
		t.Fatalf("pairs decoded sides %v; want the left side only", calls)
	}
	left := calls[0]
	ups, tombs, err := r.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	// The 2 new rows, the left rows 107 and 157 now matched (57 expired),
	// tombstones of the rows watermark 200 expired.
	if jRows(ups) != 4 || jRows(tombs) == 0 {
		t.Fatalf("delta: %d upserts, %d tombstones; want 4 and the rows watermark 200 expired", jRows(ups), jRows(tombs))
	}
	release(ups...)
	release(tombs...)
	if calls != [2]int{left, 0} {
		t.Fatalf("delta decoded %v, want %v", calls, [2]int{left, 0})
	}
	got := jStateLines(mustSnap(t, r))
	if calls[1] == 0 {
		t.Fatal("a full snapshot did not decode the right rows")
	}
	if len(got) != r.Len() || r.Len() >= 402 {
		t.Fatalf("snapshot: %d rows, join holds %d (of 402 before expiry)", len(got), r.Len())
	}
}

// TestJoinLazyRestoreHotKey: a delta replacing many rows of one key (more
// than findRow scans) restores to the same state as the join it came from.
func TestJoinLazyRestoreHotKey(t *testing.T) {
	spec := intervalSpec(InnerJoin, 10000*us, 10000*us, 0)
	j := newJoin(t, spec)
	var rows []jev
	for i := range 600 {
		rows = append(rows, jl(int64(i), "hot", int64(i)))
	}
	rec := joinBatch(t, memory.DefaultAllocator, 0, rows...)
	if _, err := j.ProcessInput(0, rec, nil); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	base := mustSnap(t, j) // 600 pending rows
	if out, err := j.Advance(0); err != nil {
		t.Fatal(err)
	} else {
		release(out)
	}
	ups, tombs, err := j.SnapshotDelta() // the same 600 rows, no longer pending
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release(ups...); release(tombs...) })
	if jRows(ups) != 600 {
		t.Fatalf("delta upserts %d rows, want the 600 rows again", jRows(ups))
	}
	var calls [2]int
	r := newJoin(t, spec)
	if err := r.RestoreLazy(lazyAll(t, r, base, &calls), 0, 128, j.Watermark()); err != nil {
		t.Fatal(err)
	}
	if err := r.ApplyDeltaLazy(lazyAll(t, r, ups, &calls), nil, 0, 128); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 600 {
		t.Fatalf("restored %d rows, want 600", r.Len())
	}
	eqLines(t, "state", jStateLines(mustSnap(t, r)), jStateLines(mustSnap(t, j)))
}
