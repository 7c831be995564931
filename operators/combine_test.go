package operators

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWindowCombiner: rows split between a window instance and combiners
// (each a share, in any order), the combiners' state folded into the
// instance with MergePartials, give exactly the windows, late rows and
// changed-window tracking of one instance that processed every row; for
// tumbling and sliding windows, with nulls, an earlier watermark that
// makes some rows late, and a key-group range that takes only part of the
// partials.
func TestWindowCombiner(t *testing.T) {
	aggs := mustAggs(t, "c", "count()", "cn", "count(n)", "sum", "sum(n)", "mn", "min(n)", "mx", "max(s)",
		"avg", "avg(n)", "mi", "max(i32)", "lo", "min(ts)")
	for _, spec := range []WindowSpec{
		{Kind: Tumbling, Size: time.Minute, AllowedLateness: 10 * time.Second, Aggregates: aggs},
		{Kind: Sliding, Size: 3 * time.Minute, Slide: time.Minute, Aggregates: aggs},
		{Kind: Tumbling, Size: time.Minute, Keys: []string{}, Aggregates: aggs}, // one global key
	} {
		t.Run(fmt.Sprintf("%s-%d-keys", spec.Kind, len(spec.Keys)), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(spec.Kind)))
			var rows []ev
			for i := range 3000 {
				r := ev{ts: int64(rng.IntN(20*60)) * int64(time.Second/us), user: sp(fmt.Sprintf("u%d", rng.IntN(40)))}
				if i%17 != 0 {
					r.n = ip(int64(rng.IntN(1000) - 500))
				}
				if i%13 != 0 {
					r.s = sp(fmt.Sprintf("s%d", rng.IntN(100)))
				}
				if i%11 != 0 {
					r.i32 = i32p(int32(rng.IntN(50)))
				}
				if i%29 == 0 {
					r.user = nil // a null key
				}
				rows = append(rows, r)
			}
			wm0 := int64(5*60) * int64(time.Second/us) // rows before ~5 min are late
			one := newWin(t, spec)
			one.wm = wm0
			lateOne := processAll(t, one, rows)
			// The instance takes every third row itself; two combiners
			// take the rest, alternately, and their partials are merged
			// in after its own rows.
			mine := newWin(t, spec)
			mine.wm = wm0
			var own, shares [2][]ev
			for i, r := range rows {
				if i%3 == 0 {
					own[0] = append(own[0], r)
				} else {
					shares[i%2] = append(shares[i%2], r)
				}
			}
			lateMine := processAll(t, mine, own[0])
			for _, share := range shares {
				c, err := mine.NewCombiner()
				if err != nil {
					t.Fatal(err)
				}
				lateMine = append(lateMine, processAll(t, c.(*Window), share)...)
				parts, err := c.(*Window).Partials()
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range parts {
					if _, err := mine.MergePartials(p, 0, 128); err != nil {
						t.Fatal(err)
					}
				}
				release(parts...)
			}
			slices.Sort(lateOne)
			slices.Sort(lateMine)
			eqLines(t, "late rows", lateMine, lateOne)
			if d1, _ := one.Dirty(); d1 == 0 {
				t.Fatal("nothing dirty")
			} else if d2, _ := mine.Dirty(); d2 != d1 {
				t.Fatalf("dirty windows: %d with partials, %d with rows", d2, d1)
			}
			for _, wm := range []int64{10 * 60 * int64(time.Second/us), 1 << 62} {
				a, err := one.Advance(wm)
				if err != nil {
					t.Fatal(err)
				}
				b, err := mine.Advance(wm)
				if err != nil {
					t.Fatal(err)
				}
				eqLines(t, fmt.Sprintf("windows at %d", wm), rowsOf(b), rowsOf(a))
				release(a, b)
			}
		})
	}
	// A key-group range takes the partials of its key groups only.
	spec := WindowSpec{Kind: Tumbling, Size: time.Minute, Aggregates: aggs}
	c, lo, hi := newWin(t, spec), newWin(t, spec), newWin(t, spec)
	var rows []ev
	for u := range 50 {
		rows = append(rows, row(int64(u)*1000, fmt.Sprintf("u%d", u), int64(u)))
	}
	processAll(t, c, rows)
	parts, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var n [2]int
	for _, p := range parts {
		a, err := lo.MergePartials(p, 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		b, err := hi.MergePartials(p, 64, 128)
		if err != nil {
			t.Fatal(err)
		}
		n[0], n[1] = n[0]+a, n[1]+b
	}
	release(parts...)
	if n[0]+n[1] != 50 || n[0] == 0 || n[1] == 0 || lo.Len() != n[0] || hi.Len() != n[1] {
		t.Fatalf("merged %v of 50 windows; Len %d and %d", n, lo.Len(), hi.Len())
	}
	// What cannot be combined is refused.
	for _, a := range []string{"sum(f)", "first(s)", "last(n)", "count_distinct(s)"} {
		w := newWin(t, WindowSpec{Kind: Tumbling, Size: time.Minute, Aggregates: mustAggs(t, "x", a)})
		if w.Combinable() {
			t.Errorf("%s: combinable", a)
		}
		if _, err := w.NewCombiner(); err == nil {
			t.Errorf("%s: a combiner", a)
		}
	}
	if w := newWin(t, WindowSpec{Kind: Session, Gap: time.Minute, Aggregates: mustAggs(t, "c", "count()")}); w.Combinable() {
		t.Error("a session window is combinable")
	}
	// Partials of another key-group count are refused, never skipped.
	parts, err = c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	spec64 := spec
	spec64.EventTime, spec64.Keys = "ts", []string{"user"}
	other, err := NewWindow(spec64, testSchema, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.MergePartials(parts[0], 0, 64); err == nil || !strings.Contains(err.Error(), "key group") {
		t.Errorf("partials of 128 key groups merged into 64: %v", err)
	}
	release(parts...)
	// A partial of a window the instance closed is an error, not a merge.
	late := newWin(t, spec)
	late.wm = 1 << 40
	c2 := newWin(t, spec)
	processAll(t, c2, []ev{row(0, "a", 1)})
	parts, _ = c2.Snapshot()
	if _, err := late.MergePartials(parts[0], 0, 128); err == nil {
		t.Error("a partial of a closed window was merged")
	}
	release(parts...)
}

// processAll processes rows in batches of 100 and returns the late ones.
func processAll(t *testing.T, w *Window, rows []ev) []string {
	t.Helper()
	var late []string
	for lo := 0; lo < len(rows); lo += 100 {
		rec := batch(t, rows[lo:min(len(rows), lo+100)]...)
		l, err := w.Process(rec)
		if err != nil {
			t.Fatal(err)
		}
		late = append(late, rowsOf(l)...)
		release(l, rec)
	}
	return late
}
