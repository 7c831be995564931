package operators

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func mustOrder(t testing.TB, s string) []OrderSpec {
	t.Helper()
	o, err := ParseOrderBy(s)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// newTopNT returns a top_n in the tumbling form over testSchema (event time
// ts, size 10us unless set).
func newTopNT(t testing.TB, spec TopNSpec) *TopN {
	t.Helper()
	if spec.EventTime == "" {
		spec.EventTime = "ts"
	}
	if spec.Size == 0 {
		spec.Size = 10 * us
	}
	tn, err := NewTopN(spec, testSchema, 128)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// TestTopNTumbling: the N best rows per key and window, ranked, emitted
// when the window closes (plus lateness), sorted by window, key, rank;
// ties rank by arrival; rows of an emitted window are late.
func TestTopNTumbling(t *testing.T) {
	tn := newTopNT(t, TopNSpec{N: 2, Keys: []string{"user"}, OrderBy: mustOrder(t, "n desc"), AllowedLateness: 2 * us})
	r := func(ts int64, u string, n int64, s string) ev { return ev{ts: ts, user: sp(u), n: ip(n), s: sp(s)} }
	runStage(t, tn, []step{
		proc(r(1, "a", 5, "p"), r(2, "a", 7, "q"), r(3, "a", 5, "r"), r(4, "b", 1, "s"), r(12, "a", 9, "t")),
		proc(r(5, "a", 6, "u"), r(6, "a", 7, "v")), // 7 ties with q, which came first
		adv(11),
		proc(r(9, "b", 3, "w")), // window [0,10) still open until 12
		adv(12,
			`2 "a" 7 null "q" null 0 10 1`, `6 "a" 7 null "v" null 0 10 2`,
			`9 "b" 3 null "w" null 0 10 1`, `4 "b" 1 null "s" null 0 10 2`),
		procLate([]string{`8 "a" 99 null "x" null`}, r(8, "a", 99, "x")),
		adv(math.MaxInt64, `12 "a" 9 null "t" null 10 20 1`),
	})
	if tn.Len() != 0 {
		t.Fatalf("state left: %d rows", tn.Len())
	}
}

// TestTopNOrdering: several order columns, asc and desc, nulls last by
// default and first when asked, NaN above every number, an empty key (one
// group per window).
func TestTopNOrdering(t *testing.T) {
	nan := math.NaN()
	rows := []ev{
		{ts: 1, user: sp("a"), n: ip(1), f: fp(2)},
		{ts: 1, user: sp("b"), f: fp(nan)},
		{ts: 1, user: sp("c"), n: ip(1), f: fp(-1)},
		{ts: 1, user: sp("d"), n: ip(0)},
		{ts: 1, user: sp("e"), n: ip(3), f: fp(nan)},
		{ts: 1, n: ip(1), f: fp(2)},
	}
	line := func(i int, rank int) string { return fmt.Sprintf("%s 0 10 %d", evLine(rows[i]), rank) }
	for _, tc := range []struct {
		order string
		want  []int // row indices in rank order
	}{
		{"n, f desc", []int{3, 0, 5, 2, 4, 1}},                // n nulls last; f desc: 2 before -1
		{"n desc nulls first, f", []int{1, 4, 2, 0, 5, 3}},    // null n first; f asc: -1, 2, 2 (ties by arrival)
		{"f desc", []int{1, 4, 0, 5, 2, 3}},                   // NaN above 2; null f last
		{"f nulls first, user desc", []int{3, 2, 0, 5, 4, 1}}, // user desc among f == 2: "a" before null user (nulls last)
	} {
		t.Run(tc.order, func(t *testing.T) {
			tn := newTopNT(t, TopNSpec{N: 6, OrderBy: mustOrder(t, tc.order)})
			var want []string
			for r, i := range tc.want {
				want = append(want, line(i, r+1))
			}
			runStage(t, tn, []step{proc(rows...), adv(10, want...)})
		})
	}
}

// TestTopNAfterWindow: top_n in the window form ranks the windows a window
// stage emits: the busiest user per window, with the window's lateness.
func TestTopNAfterWindow(t *testing.T) {
	w := newWin(t, WindowSpec{Kind: Tumbling, Size: 10 * us, AllowedLateness: 5 * us, Aggregates: mustAggs(t, "c", "count()", "total", "sum(n)")})
	tn, err := NewTopN(TopNSpec{ID: "busiest", N: 1, OrderBy: mustOrder(t, "c desc, total"), AllowedLateness: 5 * us}, w.OutputSchema(), 128)
	if err != nil {
		t.Fatal(err)
	}
	if got := tn.OutputSchema().Field(tn.OutputSchema().NumFields() - 1); got.Name != "rank" {
		t.Fatalf("last output column %s", got.Name)
	}
	var out []string
	feed := func(rows []ev, wm int64) {
		rec := batch(t, rows...)
		late, err := w.Process(rec)
		rec.Release()
		if err != nil || late != nil {
			t.Fatalf("window process: %v %v", late, err)
		}
		wo, err := w.Advance(wm)
		if err != nil {
			t.Fatal(err)
		}
		if wo != nil {
			late, err := tn.ProcessInput(0, wo, nil)
			wo.Release()
			if err != nil {
				t.Fatal(err)
			}
			if late != nil {
				t.Fatalf("window output late at top_n: %v", rowsOf(late))
			}
		}
		o, err := tn.Advance(wm)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rowsOf(o)...)
		release(o)
	}
	feed([]ev{row(1, "a", 1), row(2, "b", 5), row(3, "b", 1), row(12, "a", 1)}, 12)
	feed([]ev{row(9, "a", 2)}, 15) // within the window's lateness: [0,10) now a 2/3, b 2/6
	feed([]ev{row(15, "b", 1), row(16, "c", 0)}, 40)
	eqLines(t, "busiest user per window", out, []string{
		`"a" 0 10 2 3 1`,  // a and b tie on count 2: a's total is lower
		`"c" 10 20 1 0 1`, // a, b and c tie on count 1: c's total is lowest
	})
}

// topnRef is a naive model of TopN in the tumbling form: it keeps every
// accepted row and sorts at emission.
type topnRef struct {
	n              int
	size, lateness int64
	order          []OrderSpec
	keyOf          func(ev) string
	wm, seq        int64
	groups         map[string][]refTRow
}

type refTRow struct {
	e          ev
	seq        int64
	start, end int64
}

// refCmpCol compares column col of two rows: nulls reported, else the order.
func refCmpCol(a, b ev, col string) (an, bn bool, c int) {
	switch col {
	case "n":
		if a.n == nil || b.n == nil {
			return a.n == nil, b.n == nil, 0
		}
		return false, false, cmp.Compare(*a.n, *b.n)
	case "s", "user":
		x, y := a.s, b.s
		if col == "user" {
			x, y = a.user, b.user
		}
		if x == nil || y == nil {
			return x == nil, y == nil, 0
		}
		return false, false, strings.Compare(*x, *y)
	case "f":
		if a.f == nil || b.f == nil {
			return a.f == nil, b.f == nil, 0
		}
		x, y := *a.f, *b.f
		switch xn, yn := math.IsNaN(x), math.IsNaN(y); {
		case xn && yn:
			return false, false, 0
		case xn:
			return false, false, 1
		case yn:
			return false, false, -1
		}
		return false, false, cmp.Compare(x, y)
	case "i32":
		if a.i32 == nil || b.i32 == nil {
			return a.i32 == nil, b.i32 == nil, 0
		}
		return false, false, cmp.Compare(*a.i32, *b.i32)
	}
	panic("column " + col)
}

func (r *topnRef) compare(a, b refTRow) int {
	for _, o := range r.order {
		an, bn, c := refCmpCol(a.e, b.e, o.Column)
		if an || bn {
			if an && bn {
				continue
			}
			if an == o.NullsFirst {
				return -1
			}
			return 1
		}
		if o.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(a.seq, b.seq)
}

func (r *topnRef) process(rows []ev) []string {
	var late []string
	for _, e := range rows {
		start := e.ts - floorMod(e.ts, r.size)
		x := refTRow{e: e, seq: r.seq, start: start, end: start + r.size}
		r.seq++
		if x.end+r.lateness <= r.wm {
			late = append(late, evLine(e))
			continue
		}
		g := fmt.Sprintf("%s|%d", r.keyOf(e), start)
		r.groups[g] = append(r.groups[g], x)
	}
	slices.Sort(late)
	return late
}

func (r *topnRef) advance(wm int64) []string {
	if wm <= r.wm {
		return nil
	}
	r.wm = wm
	var out []string
	for g, rows := range r.groups {
		if rows[0].end+r.lateness > wm {
			continue
		}
		slices.SortFunc(rows, r.compare)
		for i, x := range rows[:min(r.n, len(rows))] {
			out = append(out, fmt.Sprintf("%s %d %d %d", evLine(x.e), x.start, x.end, i+1))
		}
		delete(r.groups, g)
	}
	slices.Sort(out)
	return out
}

// withNaNs replaces some float values of rows with NaN.
func withNaNs(rng *rand.Rand, rows []ev) []ev {
	for i := range rows {
		if rng.IntN(8) == 0 {
			rows[i].f = fp(math.NaN())
		}
	}
	return rows
}

// TestTopNAgainstReference: random streams (ties, nulls, NaN, late rows)
// over random parallelism, batching, checkpoints and rescales give exactly
// the reference's late rows and output.
func TestTopNAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 5))
	steps := 300
	if testing.Short() {
		steps = 100
	}
	for _, tc := range []struct {
		name string
		spec TopNSpec
		key  func(ev) string
	}{
		{"top2-by-user", TopNSpec{N: 2, Keys: []string{"user"}, OrderBy: mustOrder(t, "n desc")}, func(e ev) string { return keyStr(e.user) }},
		{"top3-global-lateness", TopNSpec{N: 3, OrderBy: mustOrder(t, "f desc, s nulls first"), AllowedLateness: 7 * us, Size: 5 * us}, func(ev) string { return "" }},
		{"top1-composite", TopNSpec{N: 1, Keys: []string{"user", "i32"}, OrderBy: mustOrder(t, "s, n desc nulls first, f")},
			func(e ev) string { return keyStr(e.user) + i32str(e.i32) }},
		{"top4-by-s", TopNSpec{N: 4, Keys: []string{"s"}, OrderBy: mustOrder(t, "i32 desc, user"), Size: 20 * us, AllowedLateness: 3 * us},
			func(e ev) string { return keyStr(e.s) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() Stateful { return newTopNT(t, tc.spec) }
			size := tc.spec.Size
			if size == 0 {
				size = 10 * us
			}
			ref := &topnRef{n: tc.spec.N, size: size.Microseconds(), lateness: tc.spec.AllowedLateness.Microseconds(),
				order: tc.spec.OrderBy, keyOf: tc.key, wm: math.MinInt64, groups: map[string][]refTRow{}}
			runAgainstReference(t, rng, steps, mk, ref)
		})
	}
}

// TestTopNSameAtAnyBatchingParallelismAndRescale: a fixed stream gives the
// same output uninterrupted, at random batch splits, over 2 -> 5 -> 3
// instances (full bases and base + deltas) and after round trips.
func TestTopNSameAtAnyBatchingParallelismAndRescale(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	var batches [][]ev
	var wms []int64
	for b := range 12 {
		batches = append(batches, withNaNs(rng, randomRows(rng, int64(b*10))))
		wms = append(wms, int64(b*10-10))
	}
	mk := func() Stateful {
		return newTopNT(t, TopNSpec{N: 2, Keys: []string{"user"}, OrderBy: mustOrder(t, "f desc, n"), AllowedLateness: 4 * us})
	}
	want := runPlan(t, mk, batches, wms, nil)
	if len(want) < 40 {
		t.Fatalf("scenario too small: %d lines", len(want))
	}
	eqLines(t, "round trip", runPlan(t, mk, batches, wms, map[int]int{3: 1, 6: -1}), want)
	eqLines(t, "2 -> 5 -> 3", runPlan(t, mk, batches, wms, map[int]int{2: 2, 5: 5, 8: 3}), want)
	eqLines(t, "2 -> 5 -> 3 through deltas", runPlan(t, mk, batches, wms, map[int]int{2: -2, 5: -5, 8: -3}), want)
}

// TestTopNStateIsBounded: however many rows a group sees, it holds N; a
// delta after one row upserts that row's group only.
func TestTopNStateIsBounded(t *testing.T) {
	tn := newTopNT(t, TopNSpec{N: 3, Keys: []string{"user"}, OrderBy: mustOrder(t, "n desc")})
	var rows []ev
	for i := range 5000 {
		rows = append(rows, row(int64(i%10), fmt.Sprint("u", i%50), int64(i)))
	}
	runStage(t, tn, []step{proc(rows...)})
	if tn.Len() != 150 {
		t.Fatalf("Len() = %d, want 3 rows for each of 50 groups", tn.Len())
	}
	snap, err := tn.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	release(snap...)
	runStage(t, tn, []step{proc(row(3, "u7", 1e6), row(4, "u8", -1))}) // u8's row is not in its top 3
	ups, tombs, err := tn.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	defer release(ups...)
	defer release(tombs...)
	lines := batchLines(ups)
	if len(lines) != 3 || len(tombs) != 0 {
		t.Fatalf("delta: upserts %v, %d tombstone batches", lines, len(tombs))
	}
	for _, l := range lines {
		if !strings.Contains(l, `"u7"`) {
			t.Errorf("upsert of an untouched group: %s", l)
		}
	}
}

// TestTopNRestoreRejects: another max parallelism, more rows than N,
// deltas out of order and foreign schemas are errors.
func TestTopNRestoreRejects(t *testing.T) {
	spec := TopNSpec{N: 2, Keys: []string{"user"}, OrderBy: mustOrder(t, "n")}
	tn := newTopNT(t, spec)
	var rows []ev
	for i := range 10 {
		rows = append(rows, row(int64(i), fmt.Sprint("user-", i%3), int64(i)))
	}
	runStage(t, tn, []step{proc(rows...)})
	snap, err := tn.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	other, err := NewTopN(TopNSpec{N: 2, Keys: []string{"user"}, OrderBy: spec.OrderBy, EventTime: "ts", Size: 10 * us}, testSchema, 64)
	if err != nil {
		t.Fatal(err)
	}
	errContains(t, "another max parallelism", other.Restore(snap, 0, 64, 0), "key group")
	errContains(t, "restore twice", newTopNT(t, spec).Restore(append(slices.Clone(snap), snap...), 0, 128, 0), "more than n=2")
	smaller := spec
	smaller.N = 1
	errContains(t, "n shrank", newTopNT(t, smaller).Restore(snap, 0, 128, 0), "more than n=1")
	if newTopNT(t, smaller).StateFingerprint() == tn.StateFingerprint() {
		t.Error("n=1 and n=2 share a state fingerprint")
	}
	wider := spec
	wider.Size = 20 * us
	errContains(t, "another size", newTopNT(t, wider).Restore(snap, 0, 128, 0), "does not fit size")
	runStage(t, tn, []step{adv(10,
		`0 "user-0" 0 null null null 0 10 1`, `3 "user-0" 3 null null null 0 10 2`,
		`1 "user-1" 1 null null null 0 10 1`, `4 "user-1" 4 null null null 0 10 2`,
		`2 "user-2" 2 null null null 0 10 1`, `5 "user-2" 5 null null null 0 10 2`)})
	ups, tombs, err := tn.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	defer release(ups...)
	defer release(tombs...)
	if countRows(tombs) != 3 || countRows(ups) != 0 {
		t.Fatalf("delta: %d upserts, %d tombstones", countRows(ups), countRows(tombs))
	}
	f := newTopNT(t, spec)
	if err := f.Restore(snap, 0, 128, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.ApplyDelta(ups, tombs, 0, 128); err != nil {
		t.Fatal(err)
	}
	errContains(t, "delta twice", f.ApplyDelta(ups, tombs, 0, 128), "not held")
	errContains(t, "tombstones as upserts", newTopNT(t, spec).ApplyDelta(tombs, nil, 0, 128), "does not match state schema")
	errContains(t, "state as tombstones", newTopNT(t, spec).ApplyDelta(nil, snap, 0, 128), "does not match tombstone schema")
	errContains(t, "range", newTopNT(t, spec).ApplyDelta(nil, nil, 0, 129), "key-group range")
}

// TestTopNReleasesArrowMemory: no byte stays allocated after every call
// that allocates.
func TestTopNReleasesArrowMemory(t *testing.T) {
	var rows []ev
	for i := range 200 {
		x, f := int64(i%17), float64(i)/3
		rows = append(rows, ev{ts: int64(i % 50), user: sp([]string{"a", "b", "c", "d"}[i%4]), n: &x, f: &f, s: sp(fmt.Sprint("s", i))})
	}
	checkReleases(t, func() Stateful {
		return newTopNT(t, TopNSpec{N: 2, Keys: []string{"user"}, OrderBy: mustOrder(t, "n desc, s")})
	}, rows, 30)
}

// TestNewTopNErrors: the constructor names what is wrong.
func TestNewTopNErrors(t *testing.T) {
	ok := TopNSpec{ID: "t1", N: 3, Keys: []string{"user"}, OrderBy: []OrderSpec{{Column: "n"}}, EventTime: "ts", Size: 10 * us}
	withRank := arrow.NewSchema(append(slices.Clone(testSchema.Fields()), arrow.Field{Name: "rank", Type: arrow.PrimitiveTypes.Int64}), nil)
	withBounds := arrow.NewSchema(append(slices.Clone(testSchema.Fields()),
		arrow.Field{Name: ColWindowStart, Type: eventTimeType}, arrow.Field{Name: ColWindowEnd, Type: arrow.PrimitiveTypes.Int64}), nil)
	list := arrow.NewSchema(append(slices.Clone(testSchema.Fields()), arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)}), nil)
	for _, tc := range []struct {
		name   string
		edit   func(*TopNSpec)
		schema *arrow.Schema
		parts  []string
	}{
		{"n", func(s *TopNSpec) { s.N = 0 }, nil, []string{"top_n t1", "n 0"}},
		{"no order", func(s *TopNSpec) { s.OrderBy = nil }, nil, []string{"no order columns"}},
		{"missing order column", func(s *TopNSpec) { s.OrderBy = []OrderSpec{{Column: "nn"}} }, nil, []string{`order column "nn"`, "did you mean n"}},
		{"order by key", func(s *TopNSpec) { s.OrderBy = []OrderSpec{{Column: "user"}} }, nil, []string{`order column "user" is a key`}},
		{"order twice", func(s *TopNSpec) { s.OrderBy = []OrderSpec{{Column: "n"}, {Column: "n", Desc: true}} }, nil, []string{`"n" listed twice`}},
		{"missing key", func(s *TopNSpec) { s.Keys = []string{"usr"} }, nil, []string{`key column "usr"`, "did you mean user"}},
		{"rank exists", func(s *TopNSpec) {}, withRank, []string{`rank column "rank"`, "rank_column"}},
		{"size without time", func(s *TopNSpec) { s.EventTime = "" }, nil, []string{"without an event time"}},
		{"time type", func(s *TopNSpec) { s.EventTime = "n" }, nil, []string{`"n" has type int64`}},
		{"size fraction", func(s *TopNSpec) { s.Size = 1500 }, nil, []string{"size", "microseconds"}},
		{"no window columns", func(s *TopNSpec) { s.EventTime, s.Size = "", 0 }, nil, []string{`"window_start" not found`, "event_time and size"}},
		{"window column type", func(s *TopNSpec) { s.EventTime, s.Size = "", 0 }, withBounds, []string{`"window_end" has type int64`}},
		{"tumbling over windows", func(s *TopNSpec) {}, withBounds, []string{`"window_start"`, "drop size"}},
		{"list column", func(s *TopNSpec) {}, list, []string{`"tags"`, "unsupported type"}},
		{"lateness", func(s *TopNSpec) { s.AllowedLateness = -us }, nil, []string{"allowed lateness", "positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := ok
			spec.Keys = slices.Clone(ok.Keys)
			tc.edit(&spec)
			schema := tc.schema
			if schema == nil {
				schema = testSchema
			}
			_, err := NewTopN(spec, schema, 128)
			errContains(t, tc.name, err, tc.parts...)
		})
	}
	if _, err := NewTopN(ok, testSchema, 1<<20); err == nil {
		t.Error("max parallelism beyond the limit accepted")
	}
}

func TestParseOrderBy(t *testing.T) {
	got, err := ParseOrderBy("score desc, ts, name ASC nulls first , x desc nulls last")
	if err != nil {
		t.Fatal(err)
	}
	want := []OrderSpec{{Column: "score", Desc: true}, {Column: "ts"}, {Column: "name", NullsFirst: true}, {Column: "x", Desc: true}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	var parts []string
	for _, o := range got {
		parts = append(parts, o.String())
	}
	if again, err := ParseOrderBy(strings.Join(parts, ", ")); err != nil || !slices.Equal(again, want) {
		t.Fatalf("String does not parse back: %v %v", again, err)
	}
	for _, bad := range []string{"", "a,,b", "a sideways", "a desc nulls", "a nulls middle"} {
		if _, err := ParseOrderBy(bad); err == nil {
			t.Errorf("ParseOrderBy(%q) accepted", bad)
		}
	}
}

// TestTopNRestoreRanksRows: state rows restored in any order rank as they
// did (by the order columns, then arrival), not by their position.
func TestTopNRestoreRanksRows(t *testing.T) {
	spec := TopNSpec{N: 3, Keys: []string{"user"}, OrderBy: mustOrder(t, "n desc")}
	tn := newTopNT(t, spec)
	runStage(t, tn, []step{proc(row(1, "a", 5), row(2, "a", 9), row(3, "a", 5), row(4, "a", 1))})
	snap, err := tn.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	if len(snap) != 1 || snap[0].NumRows() != 3 {
		t.Fatalf("snapshot of %d batches", len(snap))
	}
	reversed, err := takeRows(snap[0], []int32{2, 1, 0}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer reversed.Release()
	f := newTopNT(t, spec)
	if err := f.Restore([]arrow.RecordBatch{reversed}, 0, 128, 0); err != nil {
		t.Fatal(err)
	}
	want := []string{`2 "a" 9 null null null 0 10 1`, `1 "a" 5 null null null 0 10 2`, `3 "a" 5 null null null 0 10 3`}
	runStage(t, f, []step{adv(10, want...)})
	runStage(t, tn, []step{adv(10, want...)})
}

// TestTopNGroupKeyArenaCompacts: groups of 1 kB keys that come and go (a
// window of 10 us each) make the group key arena compact several times
// while groups are held and looked up again (the previous window closes
// between two parts of the next one's rows); late rows and output stay the
// reference's, also across a checkpoint taken after compactions and
// restored into two instances.
func TestTopNGroupKeyArenaCompacts(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	spec := TopNSpec{N: 2, Keys: []string{"user"}, OrderBy: mustOrder(t, "n desc"), Size: 10 * us}
	mk := func() Stateful { return newTopNT(t, spec) }
	c := newStageCluster(t, rng, 1, mk)
	ref := &topnRef{n: 2, size: 10, order: spec.OrderBy, keyOf: func(e ev) string { return keyStr(e.user) }, wm: math.MinInt64, groups: map[string][]refTRow{}}
	emitted, compactions := 0, 0
	count := func() int { return arenaCompactions(c, func(s Stateful) *keyArena { return &s.(*TopN).karena }) }
	for e := range 50 {
		// Rows of window e+1 in two parts; window e closes in between.
		keys := make([]string, 300) // rows point into keys
		for i := range keys {
			keys[i] = fmt.Sprintf("key-%01000d", e*10_000+rng.IntN(len(keys)))
		}
		for part := range 2 {
			rows := make([]ev, 150)
			for i := range rows {
				rows[i] = ev{ts: int64(e*10 + 10 + part*5 + rng.IntN(5)), user: &keys[rng.IntN(len(keys))], n: ip(int64(rng.IntN(1000)))}
			}
			eqLines(t, fmt.Sprintf("epoch %d part %d late rows", e, part), c.process(rows), ref.process(rows))
			if part == 0 {
				got := c.advance(int64(e*10 + 10))
				slices.Sort(got)
				eqLines(t, fmt.Sprintf("epoch %d advance", e), got, ref.advance(int64(e*10+10)))
				emitted += len(got)
			}
		}
		if e == 30 {
			compactions += count()
			c.rescale(2, true)
		}
	}
	drainArenaScenario(t, c, ref, emitted, compactions+count())
}
