package operators

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestRowCountedCountsAreExact: for every RowCounted operator, Dirty is
// the rows SnapshotDelta writes (upserts, tombstones) and Len the rows
// Snapshot writes, epoch after epoch, with keys created, changed and
// removed. The compaction policy of these operators (engine
// compactPlanRows) counts dead rows as committed rows less Len.
func TestRowCountedCountsAreExact(t *testing.T) {
	users := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, tc := range []struct {
		name   string
		inputs int
		mk     func(t *testing.T) Stateful
	}{
		{"dedup keep last", 1, func(t *testing.T) Stateful {
			return newDedupT(t, DedupSpec{ID: "d", Keep: KeepLast, Within: 40 * us, AllowedLateness: 3 * us})
		}},
		{"dedup keep first", 1, func(t *testing.T) Stateful {
			return newDedupT(t, DedupSpec{ID: "d", Keep: KeepFirst, Within: 25 * us})
		}},
		{"top_n", 1, func(t *testing.T) Stateful {
			return newTopNT(t, TopNSpec{ID: "t", N: 2, Keys: []string{"user"}, OrderBy: mustOrder(t, "n desc"), Size: 20 * us})
		}},
		{"over", 1, func(t *testing.T) Stateful {
			return newOverT(t, OverSpec{ID: "o", Keys: []string{"user"}, EventTime: "ts", Rows: 2,
				Aggregates: mustAggs(t, "cnt", "count()", "sn", "sum(n)"), AllowedLateness: 5 * us})
		}},
		{"interval join", 2, func(t *testing.T) Stateful {
			return newJoin(t, intervalSpec(InnerJoin, 10*time.Microsecond, 10*time.Microsecond, 0))
		}},
		{"windowed join", 2, func(t *testing.T) Stateful {
			return newJoin(t, windowSpec(InnerJoin, Tumbling, 20*time.Microsecond, 0, 0))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			op := tc.mk(t)
			if _, ok := op.(RowCounted); !ok {
				t.Fatalf("%T is not RowCounted", op)
			}
			mem := memory.NewGoAllocator()
			var tsNow int64 = 100
			for epoch := range 12 {
				for range 3 {
					side := rng.IntN(tc.inputs)
					var rec arrow.RecordBatch
					if tc.inputs == 1 {
						var rows []ev
						for range 1 + rng.IntN(20) {
							rows = append(rows, row(tsNow+int64(rng.IntN(15)), users[rng.IntN(len(users))], int64(rng.IntN(100))))
						}
						rec = batch(t, rows...)
					} else {
						var rows []jev
						for range 1 + rng.IntN(20) {
							ts, u := tsNow+int64(rng.IntN(15)), users[rng.IntN(len(users))]
							if side == 0 {
								rows = append(rows, jl(ts, u, int64(rng.IntN(100))))
							} else {
								rows = append(rows, jr(ts, u, fmt.Sprint(rng.IntN(100))))
							}
						}
						rec = joinBatch(t, mem, side, rows...)
					}
					late, err := op.ProcessInput(side, rec, nil)
					rec.Release()
					if err != nil {
						t.Fatal(err)
					}
					release(late)
				}
				tsNow += 10
				out, err := op.Advance(tsNow)
				if err != nil {
					t.Fatal(err)
				}
				release(out)
				if epoch%4 == 3 {
					n := op.Len()
					snap, err := op.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					if got := countTestRows(snap); got != n {
						t.Fatalf("epoch %d: Len %d, Snapshot wrote %d rows", epoch, n, got)
					}
					releaseBatches(snap)
					continue
				}
				c, rm := op.Dirty()
				ups, tombs, err := op.SnapshotDelta()
				if err != nil {
					t.Fatal(err)
				}
				if gu, gt := countTestRows(ups), countTestRows(tombs); gu != c || gt != rm {
					t.Fatalf("epoch %d: Dirty (%d, %d), SnapshotDelta wrote %d upserts and %d tombstones", epoch, c, rm, gu, gt)
				}
				releaseBatches(ups)
				releaseBatches(tombs)
			}
			// The drain (over keeps its frames' rows).
			out, err := op.Advance(1 << 40)
			if err != nil {
				t.Fatal(err)
			}
			release(out)
			c, rm := op.Dirty()
			ups, tombs, err := op.SnapshotDelta()
			if err != nil {
				t.Fatal(err)
			}
			if gu, gt := countTestRows(ups), countTestRows(tombs); gu != c || gt != rm {
				t.Fatalf("drain: Dirty (%d, %d), SnapshotDelta %d upserts, %d tombstones", c, rm, gu, gt)
			}
			releaseBatches(ups)
			releaseBatches(tombs)
			n := op.Len()
			snap, err := op.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if got := countTestRows(snap); got != n {
				t.Fatalf("drain: Len %d, Snapshot wrote %d rows", n, got)
			}
			releaseBatches(snap)
		})
	}
}

func countTestRows(bs []arrow.RecordBatch) int {
	n := 0
	for _, b := range bs {
		n += int(b.NumRows())
	}
	return n
}
