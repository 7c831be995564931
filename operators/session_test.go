package operators

import (
	"math"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/aggsyntax"
)

func TestSessionMerges(t *testing.T) {
	rows := []ev{
		{ts: 0, user: sp("a"), n: ip(1), s: sp("p")},
		{ts: 25, user: sp("a"), n: ip(2), s: sp("q")},
		{ts: 15, user: sp("a"), n: ip(3), s: sp("p")}, // touches [25,35): [15,35)
		{ts: 40, user: sp("b"), n: ip(9)},
		{ts: 8, user: sp("a"), n: ip(4), s: sp("r")}, // bridges [0,10) and [15,35): [0,35)
		{ts: 0, user: sp("a"), s: sp("z")},           // ties with the first row on ts: first keeps "p"
	}
	want := []string{`"a" 0 35 5 4 10 "p" "q" 4`, `"b" 40 50 1 1 9 null null 0`}
	aggs := mustAggs(t, "c", "count()", "cn", "count(n)", "sum", "sum(n)", "fi", "first(s)", "la", "last(s)", "cd", "count_distinct(s)")
	for _, split := range []int{1, 2, 6} { // rows per batch
		t.Run(strings.Repeat("x", split), func(t *testing.T) {
			w := newWin(t, WindowSpec{Kind: Session, Gap: 10 * us, Aggregates: aggs})
			var steps []step
			for i := 0; i < len(rows); i += split {
				steps = append(steps, proc(rows[i:min(len(rows), i+split)]...))
			}
			steps = append(steps, adv(44, want[0]))
			// a's session was emitted at 44; a row at 30 (30+gap <= 44) is late; b's [45,55) touches [40,50).
			steps = append(steps, procLate([]string{`30 "a" 1 null null null`}, row(30, "a", 1), row(45, "b", 1)))
			steps = append(steps, adv(math.MaxInt64, `"b" 40 55 2 2 10 null null 0`))
			runSteps(t, w, steps)
			if w.Len() != 0 {
				t.Fatalf("Len = %d after drain", w.Len())
			}
		})
	}
}

func TestNewWindowErrors(t *testing.T) {
	ok := WindowSpec{ID: "w", Keys: []string{"user"}, EventTime: "ts", Kind: Tumbling, Size: time10, Aggregates: mustAggs(t, "c", "count()")}
	cases := []struct {
		name string
		mod  func(*WindowSpec)
		want string
	}{
		{"no kind", func(s *WindowSpec) { s.Kind = 0 }, "unknown window kind"},
		{"zero size", func(s *WindowSpec) { s.Size = 0 }, "size 0s must be positive"},
		{"sub-micro", func(s *WindowSpec) { s.Size = 1500 }, "not a whole number of microseconds"},
		{"slide", func(s *WindowSpec) { s.Kind, s.Slide = Sliding, 3*us }, "not a multiple of slide"},
		{"gap", func(s *WindowSpec) { s.Kind = Session }, "gap 0s must be positive"},
		{"lateness", func(s *WindowSpec) { s.AllowedLateness = -us }, "allowed lateness"},
		{"no key", func(s *WindowSpec) { s.Keys = []string{"nope"} }, `key column "nope" not found`},
		{"event time type", func(s *WindowSpec) { s.EventTime = "n" }, `event time column "n" has type int64`},
		{"agg column", func(s *WindowSpec) { s.Aggregates = mustAggs(t, "x", "sum(nope)") }, `aggregate x = sum(nope): column "nope" not found`},
		{"agg type", func(s *WindowSpec) { s.Aggregates = mustAggs(t, "total", "sum(s)") }, `aggregate total = sum(s): column "s" has type utf8; sum needs int32, int64 or float64`},
		{"dup name", func(s *WindowSpec) { s.Aggregates = mustAggs(t, "user", "count()") }, `column name "user" already used`},
		{"reserved", func(s *WindowSpec) { s.Aggregates = mustAggs(t, "window_end", "count()") }, `"window_end" already used`},
		{"slide larger", func(s *WindowSpec) { s.Kind, s.Slide = Sliding, 20*us }, "sliding slide 20µs is larger than size 10µs"},
		{"key hint", func(s *WindowSpec) { s.Keys = []string{"usr"} }, `key column "usr" not found (or ambiguous) in input schema (did you mean user?)`},
		{"key list", func(s *WindowSpec) { s.Keys = []string{"zzzzzz"} }, `key column "zzzzzz" not found (or ambiguous) in input schema (columns: ts, user, n`},
		{"no event time", func(s *WindowSpec) { s.EventTime = "event_time" }, `event time column "event_time" not found (or ambiguous) in input schema (columns: ts, user, n`},
		{"agg column hint", func(s *WindowSpec) { s.Aggregates = mustAggs(t, "x", "sum(nn)") }, `column "nn" not found (or ambiguous) in input schema (did you mean n?)`},
		{"dup aggregate", func(s *WindowSpec) { s.Aggregates = mustAggs(t, "c", "count()", "c", "sum(n)") }, `window w: aggregate: column name "c" already used (aggregate)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.mod(&s)
			_, err := NewWindow(s, testSchema, 128)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := NewWindow(ok, testSchema, 128); err != nil {
		t.Fatal(err)
	}
}

const time10 = 10 * us

// TestAggFuncsMatchGrammar checks that every function of the one aggregate
// grammar has an implementation here, and nothing more.
func TestAggFuncsMatchGrammar(t *testing.T) {
	var names []string
	for _, n := range aggFuncNames {
		names = append(names, n.name)
	}
	if got, want := strings.Join(names, ","), strings.Join(aggsyntax.Funcs(), ","); got != want {
		t.Errorf("operators implements %s; the grammar has %s", got, want)
	}
}

func TestParseAggregate(t *testing.T) {
	cases := []struct {
		expr string
		want AggSpec
		err  string
	}{
		{"count()", AggSpec{Name: "a", Func: AggCount}, ""},
		{" COUNT ( * ) ", AggSpec{Name: "a", Func: AggCount}, ""},
		{"count(n)", AggSpec{Name: "a", Func: AggCount, Column: "n"}, ""},
		{"sum( bytes )", AggSpec{Name: "a", Func: AggSum, Column: "bytes"}, ""},
		{"count_distinct(user_id)", AggSpec{Name: "a", Func: AggCountDistinct, Column: "user_id"}, ""},
		{"first(x)", AggSpec{Name: "a", Func: AggFirst, Column: "x"}, ""},
		{"last(x)", AggSpec{Name: "a", Func: AggLast, Column: "x"}, ""},
		{"min(x)", AggSpec{Name: "a", Func: AggMin, Column: "x"}, ""},
		{"max(x)", AggSpec{Name: "a", Func: AggMax, Column: "x"}, ""},
		{"avg(x)", AggSpec{Name: "a", Func: AggAvg, Column: "x"}, ""},
		{"summ(bytes)", AggSpec{}, `aggregate a: unknown function "summ" (did you mean sum?)`},
		{"median(x)", AggSpec{}, `aggregate a: unknown function "median" (allowed: count, sum, min, max, avg, count_distinct, first, last)`},
		{"sum()", AggSpec{}, "sum needs a column"},
		{"sum(a, b)", AggSpec{}, "takes one column name"},
		{"sum bytes", AggSpec{}, `aggregate a: invalid aggregate "sum bytes" (want func(column), e.g. sum(bytes) or count())`},
		{"(x)", AggSpec{}, `invalid aggregate "(x)"`},
	}
	for _, tc := range cases {
		got, err := ParseAggregate("a", tc.expr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.expr, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q = %+v, %v; want %+v", tc.expr, got, err, tc.want)
		}
	}
}
