package operators

import (
	"math"
	"testing"
	"time"
)

const us = time.Microsecond

func allAggs(t testing.TB) []AggSpec {
	return mustAggs(t, "c", "count()", "cn", "count(n)", "sum", "sum(n)", "mn", "min(n)", "mx", "max(s)",
		"avg", "avg(n)", "cd", "count_distinct(s)", "fi", "first(s)", "la", "last(n)", "sf", "sum(f)", "mi", "max(i32)")
}

func newWin(t testing.TB, spec WindowSpec) *Window {
	t.Helper()
	if spec.Keys == nil {
		spec.Keys = []string{"user"}
	}
	spec.EventTime = "ts"
	w, err := NewWindow(spec, testSchema, 128)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// step is one call in a window scenario: process rows, or advance to wm.
type step struct {
	rows    []ev
	wm      int64
	advance bool
	late    []string // expected late rows (rowsOf format), for process steps
	out     []string // expected output, for advance steps
}

func proc(rows ...ev) step { return step{rows: rows} }
func procLate(late []string, rows ...ev) step {
	return step{rows: rows, late: late}
}
func adv(wm int64, out ...string) step { return step{wm: wm, advance: true, out: out} }

func runSteps(t *testing.T, w *Window, steps []step) {
	t.Helper()
	for i, st := range steps {
		if st.advance {
			out, err := w.Advance(st.wm)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			eqLines(t, "advance output", rowsOf(out), st.out)
			if out != nil && !out.Schema().Equal(w.OutputSchema()) {
				t.Fatalf("step %d: output schema %s, want %s", i, out.Schema(), w.OutputSchema())
			}
			release(out)
			continue
		}
		rec := batch(t, st.rows...)
		late, err := w.Process(rec)
		rec.Release()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		eqLines(t, "late rows", rowsOf(late), st.late)
		release(late)
	}
}

func TestTumblingAllAggregates(t *testing.T) {
	w := newWin(t, WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: allAggs(t)})
	runSteps(t, w, []step{
		proc(
			ev{ts: 1, user: sp("a"), n: ip(5), s: sp("x"), f: fp(1.5), i32: i32p(-3)},
			ev{ts: 3, user: sp("a"), s: sp("y"), i32: i32p(-9)},
			ev{ts: 5, user: sp("b"), n: ip(2)},
			ev{ts: 12, user: sp("a"), n: ip(1), s: sp("z")},
		),
		proc(ev{ts: 2, user: sp("a"), n: ip(7), s: sp("x"), f: fp(2)}, ev{ts: 1, user: sp("a"), s: sp("w")}),
		adv(9),
		adv(10,
			`"a" 0 10 4 2 12 5 "y" 6 3 "x" 7 3.5 -3`,
			`"b" 0 10 1 1 2 2 null 2 0 null 2 null null`),
		adv(10),
		adv(5),
		procLate([]string{`9 "a" 4 null null null`}, ev{ts: 9, user: sp("a"), n: ip(4)}, ev{ts: 10, user: sp("a"), n: ip(3)}),
		adv(math.MaxInt64, `"a" 10 20 2 2 4 1 "z" 2 1 "z" 1 null null`),
	})
	if w.Len() != 0 || w.Watermark() != math.MaxInt64 {
		t.Fatalf("after drain: Len=%d Watermark=%d", w.Len(), w.Watermark())
	}
}

func TestLatenessBoundary(t *testing.T) {
	w := newWin(t, WindowSpec{Kind: Tumbling, Size: 10 * us, AllowedLateness: 5 * us, Aggregates: mustAggs(t, "c", "count()")})
	runSteps(t, w, []step{
		proc(row(3, "a", 1)),
		adv(14),
		proc(row(9, "a", 1)), // end+lateness = 15 > 14: still open
		adv(15, `"a" 0 10 2`),
		procLate([]string{`0 "a" 1 null null null`}, row(0, "a", 1)), // 10+5 <= 15: late
		proc(row(10, "a", 1)),
		adv(24),
		adv(25, `"a" 10 20 1`),
	})
}

func TestSlidingWindows(t *testing.T) {
	w := newWin(t, WindowSpec{Kind: Sliding, Size: 10 * us, Slide: 5 * us, Aggregates: mustAggs(t, "c", "count()", "sum", "sum(n)", "la", "last(n)")})
	runSteps(t, w, []step{
		proc(row(7, "a", 1), row(12, "a", 10), row(-1, "b", 100)),
		adv(10, `"b" -10 0 1 100 100`, `"b" -5 5 1 100 100`, `"a" 0 10 1 1 1`),
		// ts 8: window [0,10) closed, [5,15) open: aggregated there only, not late.
		proc(row(8, "a", 1000)),
		procLate([]string{`4 "a" 5 null null null`}, row(4, "a", 5)),
		adv(math.MaxInt64, `"a" 5 15 3 1011 10`, `"a" 10 20 1 10 10`),
	})
}

// TestMinMaxNaN: min and max over floats order NaN above every number, as
// SQL engines do (DuckDB, PostgreSQL): min of {1, NaN, 2} is 1, max NaN;
// min of NaN alone is NaN.
func TestMinMaxNaN(t *testing.T) {
	nan := math.NaN()
	w := newWin(t, WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "lo", "min(f)", "hi", "max(f)")})
	runSteps(t, w, []step{
		proc(
			ev{ts: 1, user: sp("a"), f: fp(1)}, ev{ts: 2, user: sp("a"), f: fp(nan)}, ev{ts: 3, user: sp("a"), f: fp(2)},
			ev{ts: 1, user: sp("b"), f: fp(nan)},
			ev{ts: 1, user: sp("c"), f: fp(nan)}, ev{ts: 2, user: sp("c"), f: fp(-1)},
		),
		adv(10, `"a" 0 10 1 NaN`, `"b" 0 10 NaN NaN`, `"c" 0 10 -1 NaN`),
	})
}
