package operators

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/keygroup"
)

// overAggs are the aggregates the over tests compute: every function and
// input type an over stage takes.
var overAggs = []string{
	"cnt", "count()", "cn", "count(n)", "sn", "sum(n)", "an", "avg(n)", "sf", "sum(f)", "af", "avg(f)",
	"mins", "min(s)", "maxf", "max(f)", "firstn", "first(n)", "lasts", "last(s)", "si", "sum(i32)", "maxts", "max(ts)",
}

func newOverT(t testing.TB, spec OverSpec) *Over {
	t.Helper()
	o, err := NewOver(spec, testSchema, 128)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOverRowsFrame(t *testing.T) {
	spec := OverSpec{ID: "o", Keys: []string{"user"}, EventTime: "ts", Rows: 2,
		Aggregates: mustAggs(t, "cnt", "count()", "sn", "sum(n)", "an", "avg(n)")}
	o := newOverT(t, spec)
	in := batch(t, row(30, "a", 3), row(10, "a", 1), row(20, "b", 7), row(20, "a", 2), row(40, "a", 4), row(50, "a", 5))
	defer in.Release()
	if late, err := o.ProcessInput(0, in, nil); err != nil || late != nil {
		t.Fatalf("late %v, err %v", late, err)
	}
	out, err := o.Advance(45) // rows before 45 are final; 50 waits
	if err != nil {
		t.Fatal(err)
	}
	eqLines(t, "advance 45", rowsOf(out), []string{
		`10 "a" 1 null null null 1 1 1`,
		`20 "a" 2 null null null 2 3 1.5`,
		`20 "b" 7 null null null 1 7 7`,
		`30 "a" 3 null null null 3 6 2`,
		`40 "a" 4 null null null 3 9 3`, // 2, 3, 4: the row and the 2 before it
	})
	release(out)
	late := batch(t, row(44, "a", 9))
	defer late.Release()
	l, err := o.ProcessInput(0, late, nil)
	if err != nil || l == nil || l.NumRows() != 1 {
		t.Fatalf("a row behind the cutoff must be late: %v %v", l, err)
	}
	release(l)
	out, err = o.Advance(100)
	if err != nil {
		t.Fatal(err)
	}
	eqLines(t, "advance 100", rowsOf(out), []string{`50 "a" 5 null null null 3 12 4`})
	release(out)
}

// overRef is a naive over stage: every row, sorted per key on each advance,
// aggregates recomputed from the whole history.
type overRef struct {
	n     int
	late  int64
	keyed bool
	wm    int64
	seq   int64
	pend  map[string][]refORow
	hist  map[string][]ev
}

type refORow struct {
	e   ev
	seq int64
}

func newOverRef(n int, late int64, keyed bool) *overRef {
	return &overRef{n: n, late: late, keyed: keyed, wm: math.MinInt64, pend: map[string][]refORow{}, hist: map[string][]ev{}}
}

func (r *overRef) cutoff() int64 { return clampSub(r.wm, r.late) }

func (r *overRef) key(e ev) string {
	if !r.keyed {
		return ""
	}
	return keyStr(e.user)
}

func (r *overRef) process(rows []ev) []string {
	var late []string
	for _, e := range rows {
		if e.ts < r.cutoff() {
			late = append(late, fmtEv(e))
		} else {
			r.pend[r.key(e)] = append(r.pend[r.key(e)], refORow{e: e, seq: r.seq})
		}
		r.seq++
	}
	slices.Sort(late)
	return late
}

func (r *overRef) advance(wm int64) []string {
	if wm <= r.wm {
		return nil
	}
	r.wm = wm
	c := r.cutoff()
	var out []string
	for k, p := range r.pend {
		slices.SortFunc(p, func(a, b refORow) int {
			if a.e.ts != b.e.ts {
				return int(a.e.ts - b.e.ts)
			}
			return int(a.seq - b.seq)
		})
		j := 0
		for ; j < len(p) && p[j].e.ts < c; j++ {
			h := append(r.hist[k], p[j].e)
			r.hist[k] = h
			out = append(out, fmtEv(p[j].e)+" "+refOverAggs(h[max(0, len(h)-r.n-1):]))
		}
		r.pend[k] = p[j:]
	}
	slices.Sort(out)
	return out
}

// fmtEv formats a test row as rowsOf does.
func fmtEv(e ev) string {
	q := func(s *string) string {
		if s == nil {
			return "null"
		}
		return strconv.Quote(*s)
	}
	return strings.Join([]string{strconv.FormatInt(e.ts, 10), q(e.user), numStr(e.n), fstr(e.f), q(e.s), i32str(e.i32)}, " ")
}

// refOverAggs computes overAggs over frame (oldest first).
func refOverAggs(frame []ev) string {
	var cn, sn, nf, si, ni int64
	var sf float64
	var mins, lasts *string
	var maxf *float64
	var firstn *int64
	var maxts int64
	for _, e := range frame {
		maxts = max(maxts, e.ts)
		if e.n != nil {
			cn++
			sn += *e.n
			if firstn == nil {
				firstn = e.n
			}
		}
		if e.f != nil {
			nf++
			sf += *e.f
			if maxf == nil || *e.f > *maxf {
				maxf = e.f
			}
		}
		if e.s != nil {
			if mins == nil || *e.s < *mins {
				mins = e.s
			}
			lasts = e.s
		}
		if e.i32 != nil {
			ni++
			si += int64(*e.i32)
		}
	}
	q := func(s *string) string {
		if s == nil {
			return "null"
		}
		return strconv.Quote(*s)
	}
	orNull := func(ok bool, s string) string {
		if !ok {
			return "null"
		}
		return s
	}
	g := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	return strings.Join([]string{
		strconv.Itoa(len(frame)), strconv.FormatInt(cn, 10),
		orNull(cn > 0, strconv.FormatInt(sn, 10)), orNull(cn > 0, g(float64(sn)/float64(cn))),
		orNull(nf > 0, g(sf)), orNull(nf > 0, g(sf/float64(nf))),
		q(mins), fstr(maxf), numStr(firstn), q(lasts), orNull(ni > 0, strconv.FormatInt(si, 10)),
		strconv.FormatInt(maxts, 10),
	}, " ")
}

// overCluster runs p Over instances as the engine does: rows routed by key
// group through selections, state checkpointed as a base and deltas, and
// restored (possibly into another parallelism) from them.
type overCluster struct {
	t      *testing.T
	spec   OverSpec
	insts  []*Over
	base   []arrow.RecordBatch
	deltas [][2][]arrow.RecordBatch // upserts, tombstones
}

func newOverCluster(t *testing.T, spec OverSpec, p int) *overCluster {
	c := &overCluster{t: t, spec: spec}
	for range p {
		c.insts = append(c.insts, newOverT(t, spec))
	}
	return c
}

func (c *overCluster) process(rows []ev) []string {
	c.t.Helper()
	rec := batch(c.t, rows...)
	defer rec.Release()
	sels, err := PartitionIndices(rec, c.insts[0].KeyColumns(0), len(c.insts), 128)
	if err != nil {
		c.t.Fatal(err)
	}
	var late []string
	for i, sel := range sels {
		if sel == nil {
			sel = []int32{}
		}
		l, err := c.insts[i].ProcessInput(0, rec, sel)
		if err != nil {
			c.t.Fatal(err)
		}
		late = append(late, rowsOf(l)...)
		release(l)
	}
	slices.Sort(late)
	return late
}

func (c *overCluster) advance(wm int64) []string {
	c.t.Helper()
	var out []string
	for _, o := range c.insts {
		rec, err := o.Advance(wm)
		if err != nil {
			c.t.Fatal(err)
		}
		lines := rowsOf(rec)
		if rec != nil {
			ts := rec.Column(0).(*array.Timestamp).TimestampValues()
			if !slices.IsSorted(ts) {
				c.t.Fatalf("output not sorted by event time: %v", ts)
			}
		}
		out = append(out, lines...)
		release(rec)
	}
	slices.Sort(out)
	return out
}

// checkpoint writes a base (full) or a delta of every instance.
func (c *overCluster) checkpoint(full bool) {
	c.t.Helper()
	if full {
		c.drop()
		for _, o := range c.insts {
			snap, err := o.Snapshot()
			if err != nil {
				c.t.Fatal(err)
			}
			for _, s := range snap {
				if kgs := s.Column(0).(*array.Int32).Int32Values(); !slices.IsSorted(kgs) {
					c.t.Fatalf("snapshot not sorted by key_group: %v", kgs)
				}
			}
			c.base = append(c.base, snap...)
		}
		return
	}
	var d [2][]arrow.RecordBatch
	for _, o := range c.insts {
		ch, rm := o.Dirty()
		up, tomb, err := o.SnapshotDelta()
		if err != nil {
			c.t.Fatal(err)
		}
		if n := countRows(up); n != ch {
			c.t.Fatalf("Dirty says %d changed rows, delta upserts %d", ch, n)
		}
		if n := countRows(tomb); n != rm {
			c.t.Fatalf("Dirty says %d removed, delta tombstones %d", rm, n)
		}
		d[0], d[1] = append(d[0], up...), append(d[1], tomb...)
	}
	c.deltas = append(c.deltas, d)
}

// restore replaces the instances by p new ones rebuilt from the base and
// deltas (call right after a checkpoint).
func (c *overCluster) restore(p int) {
	c.t.Helper()
	wm := c.insts[0].Watermark()
	total := 0
	for _, o := range c.insts {
		total += o.Len()
	}
	c.insts = nil
	got := 0
	for s := range p {
		o := newOverT(c.t, c.spec)
		lo, hi := keygroup.Range(s, p, 128)
		if err := o.Restore(c.base, lo, hi, wm); err != nil {
			c.t.Fatal(err)
		}
		for _, d := range c.deltas {
			if err := o.ApplyDelta(d[0], d[1], lo, hi); err != nil {
				c.t.Fatal(err)
			}
		}
		got += o.Len()
		c.insts = append(c.insts, o)
	}
	if got != total {
		c.t.Fatalf("restore into %d: %d rows, had %d", p, got, total)
	}
}

func (c *overCluster) drop() {
	release(c.base...)
	for _, d := range c.deltas {
		release(d[0]...)
		release(d[1]...)
	}
	c.base, c.deltas = nil, nil
}

// TestOverAgainstReference runs random rows in random batches through 1..4
// instances, checkpointing (bases and deltas) and restoring into another
// parallelism at random points, and compares every advance and every late
// row with overRef.
func TestOverAgainstReference(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed)", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	users := []*string{sp("a"), sp("b"), sp("c"), sp("d"), sp("e"), nil}
	strs := []*string{sp("x"), sp("y"), sp("zz"), sp(""), nil}
	for run := range 40 {
		n := []int{0, 1, 3, 10}[rng.IntN(4)]
		lateness := []int64{0, 5}[rng.IntN(2)]
		keyed := rng.IntN(4) != 0
		spec := OverSpec{ID: "o", EventTime: "ts", Rows: n, AllowedLateness: time.Duration(lateness) * time.Microsecond}
		if keyed {
			spec.Keys = []string{"user"}
		}
		spec.Aggregates = mustAggs(t, overAggs...)
		ref := newOverRef(n, lateness, keyed)
		c := newOverCluster(t, spec, 1+rng.IntN(4))
		now := int64(100)
		for step := range 60 {
			var rows []ev
			for range rng.IntN(12) {
				e := ev{ts: now - int64(rng.IntN(30)), user: users[rng.IntN(len(users))], s: strs[rng.IntN(len(strs))]}
				if rng.IntN(5) != 0 {
					e.n = ip(int64(rng.IntN(200) - 50))
				}
				if rng.IntN(5) != 0 {
					e.f = fp(float64(rng.IntN(1000)) / 8)
				}
				if rng.IntN(5) != 0 {
					e.i32 = i32p(int32(rng.IntN(100)))
				}
				rows = append(rows, e)
			}
			now += int64(rng.IntN(10))
			what := fmt.Sprintf("run %d step %d (rows %d, lateness %d, keyed %v, parallelism %d)", run, step, n, lateness, keyed, len(c.insts))
			eqLines(t, what+": late", c.process(rows), ref.process(rows))
			if rng.IntN(3) == 0 {
				wm := now - int64(rng.IntN(20))
				eqLines(t, what+": advance", c.advance(wm), ref.advance(wm))
			}
			switch rng.IntN(6) {
			case 0:
				c.checkpoint(true)
			case 1, 2:
				if c.base != nil {
					c.checkpoint(false)
				}
			}
			if c.base != nil && rng.IntN(5) == 0 {
				c.checkpoint(false)
				c.restore(1 + rng.IntN(4))
			}
		}
		eqLines(t, fmt.Sprintf("run %d: drain", run), c.advance(math.MaxInt64), ref.advance(math.MaxInt64))
		c.drop()
	}
}

// TestOverSpecErrors: what an over stage refuses, with the column named.
func TestOverSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		spec OverSpec
		want string
	}{
		{OverSpec{EventTime: "ts", Rows: 1}, "no aggregates"},
		{OverSpec{EventTime: "nope", Rows: 1, Aggregates: mustAggs(t, "c", "count()")}, `order column "nope" not found`},
		{OverSpec{EventTime: "n", Rows: 1, Aggregates: mustAggs(t, "c", "count()")}, `order column "n" has type int64`},
		{OverSpec{EventTime: "ts", Rows: -1, Aggregates: mustAggs(t, "c", "count()")}, "rows -1 out of range"},
		{OverSpec{EventTime: "ts", Keys: []string{"user"}, Rows: 1, Aggregates: mustAggs(t, "c", "min(user)")}, `column "user" is a key column`},
		{OverSpec{EventTime: "ts", Rows: 1, Aggregates: mustAggs(t, "c", "sum(s)")}, `column "s" has type utf8; sum needs int32, int64 or float64`},
		{OverSpec{EventTime: "ts", Rows: 1, Aggregates: mustAggs(t, "c", "count_distinct(s)")}, "count_distinct is not supported"},
		{OverSpec{EventTime: "ts", Rows: 1, Aggregates: mustAggs(t, "n", "count()")}, `the input has a column "n" already`},
	} {
		_, err := NewOver(tc.spec, testSchema, 128)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// TestOverStateFingerprintPinned pins the over state's layout: its schema
// and fingerprint (floe-over-state/v1). A change makes every existing
// pipeline with an over stage refuse its state: change them only with a
// new state format version and a way to read the old one.
func TestOverStateFingerprintPinned(t *testing.T) {
	o := newOverT(t, OverSpec{ID: "o", Keys: []string{"user"}, EventTime: "ts", Rows: 10,
		Aggregates: mustAggs(t, "a", "avg(n)", "c", "count()")})
	const schema = "key_group:int32 user:utf8 over.pending:bool over.time:timestamp[us, tz=UTC] over.seq:int64 " +
		"ts:timestamp[us, tz=UTC] n:int64 f:float64 s:utf8 i32:int32"
	var got []string
	for _, f := range o.StateSchema().Fields() {
		got = append(got, f.Name+":"+f.Type.String())
	}
	if g := strings.Join(got, " "); g != schema {
		t.Errorf("state schema\n got %s\nwant %s", g, schema)
	}
	if fp := o.StateFingerprint(); fp != "over-v1-5b0e2134494fee8e0f6a0f57ff8eea6e" {
		t.Errorf("StateFingerprint = %s", fp)
	}
}
