package operators

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/keygroup"
)

// Join tests. Left rows are (ts, user, v int64), right rows (ts, user,
// w string); the output of a join on user is
// "ts user v right_ts right_user w [window_start window_end]".

var (
	joinLeftSchema = arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: eventTimeType},
		{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	joinRightSchema = arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: eventTimeType},
		{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "w", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
)

// jev is one input row of either side: v is the left value, w the right one.
type jev struct {
	ts   int64
	user *string
	v    int64
	w    string
}

func jl(ts int64, user string, v int64) jev { return jev{ts: ts, user: sp(user), v: v} }
func jr(ts int64, user, w string) jev       { return jev{ts: ts, user: sp(user), w: w} }

func joinBatch(t testing.TB, mem memory.Allocator, side int, rows ...jev) arrow.RecordBatch {
	t.Helper()
	schema := [2]*arrow.Schema{joinLeftSchema, joinRightSchema}[side]
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
		appendStr(b.Field(1).(*array.StringBuilder), r.user)
		if side == 0 {
			b.Field(2).(*array.Int64Builder).Append(r.v)
		} else {
			b.Field(2).(*array.StringBuilder).Append(r.w)
		}
	}
	return b.NewRecordBatch()
}

func intervalSpec(typ JoinType, lower, upper, late time.Duration) JoinSpec {
	return JoinSpec{ID: "j", Type: typ, LeftKeys: []string{"user"}, RightKeys: []string{"user"}, LeftTime: "ts", RightTime: "ts",
		Interval: &JoinInterval{Lower: lower, Upper: upper}, AllowedLateness: late}
}

func windowSpec(typ JoinType, kind WindowKind, size, slide, late time.Duration) JoinSpec {
	return JoinSpec{ID: "j", Type: typ, LeftKeys: []string{"user"}, RightKeys: []string{"user"}, LeftTime: "ts", RightTime: "ts",
		Window: &JoinWindow{Kind: kind, Size: size, Slide: slide}, AllowedLateness: late}
}

func newJoin(t testing.TB, spec JoinSpec) *Join {
	t.Helper()
	j, err := NewJoin(spec, joinLeftSchema, joinRightSchema, 128)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// jstep is one call in a join scenario.
type jstep struct {
	side    int
	rows    []jev
	wm      int64
	advance bool
	want    []string // late rows of a process step, output of an advance step
}

func jleft(rows ...jev) jstep  { return jstep{side: 0, rows: rows} }
func jright(rows ...jev) jstep { return jstep{side: 1, rows: rows} }
func lateOn(side int, want []string, rows ...jev) jstep {
	return jstep{side: side, rows: rows, want: want}
}
func jadv(wm int64, out ...string) jstep { return jstep{wm: wm, advance: true, want: out} }

func runJoin(t *testing.T, j *Join, steps []jstep) {
	t.Helper()
	for i, st := range steps {
		if st.advance {
			out, err := j.Advance(st.wm)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if out != nil && !out.Schema().Equal(j.OutputSchema()) {
				t.Fatalf("step %d: output schema %s, want %s", i, out.Schema(), j.OutputSchema())
			}
			eqLines(t, fmt.Sprintf("step %d advance(%d)", i, st.wm), rowsOf(out), st.want)
			release(out)
			continue
		}
		rec := joinBatch(t, memory.DefaultAllocator, st.side, st.rows...)
		late, err := j.ProcessInput(st.side, rec, nil)
		rec.Release()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		eqLines(t, fmt.Sprintf("step %d late rows", i), rowsOf(late), st.want)
		release(late)
	}
}

func TestJoinOutputSchema(t *testing.T) {
	j := newJoin(t, intervalSpec(LeftJoin, 0, 0, 0))
	var names []string
	for _, f := range j.OutputSchema().Fields() {
		names = append(names, fmt.Sprintf("%s:%t", f.Name, f.Nullable))
	}
	eqLines(t, "left join output", names, []string{"ts:false", "user:true", "v:true", "right_ts:true", "right_user:true", "w:true"})
	spec := windowSpec(InnerJoin, Tumbling, 10*us, 0, 0)
	spec.RightPrefix = "r."
	j = newJoin(t, spec)
	names = names[:0]
	for _, f := range j.OutputSchema().Fields() {
		names = append(names, fmt.Sprintf("%s:%t", f.Name, f.Nullable))
	}
	eqLines(t, "windowed inner output", names, []string{"ts:false", "user:true", "v:true", "r.ts:false", "r.user:true", "w:true", "window_start:false", "window_end:false"})
	if got := j.InputSchemaOf(1); got != joinRightSchema || j.NumInputs() != 2 || !slices.Equal(j.KeyColumns(0), []int{1}) {
		t.Errorf("inputs: %v %d %v", got, j.NumInputs(), j.KeyColumns(0))
	}
}

// TestIntervalJoinInner: bounds are inclusive on both ends, pairs come out
// at the Advance after their second row arrived (whatever the watermark),
// sorted by left time, key, left arrival, right time, right arrival.
func TestIntervalJoinInner(t *testing.T) {
	j := newJoin(t, intervalSpec(InnerJoin, 2*us, 3*us, 0))
	runJoin(t, j, []jstep{
		jleft(jl(10, "a", 1), jl(10, "b", 2)),
		jright(jr(7, "a", "too early"), jr(8, "a", "lo"), jr(13, "a", "hi"), jr(14, "a", "too late"), jr(10, "c", "other key")),
		jadv(0,
			`10 "a" 1 8 "a" "lo"`,
			`10 "a" 1 13 "a" "hi"`),
		jadv(0), // nothing new
		jright(jr(12, "b", "b1"), jr(9, "a", "mid")),
		jleft(jl(11, "a", 6)),
		jleft(jl(11, "a", 3)), // same time and key: after the row that arrived first
		// Not raising the watermark still emits the new pairs: old left
		// (10,a) with the new right (9,a); new left (11,a) with every right.
		jadv(-5,
			`10 "a" 1 9 "a" "mid"`,
			`10 "b" 2 12 "b" "b1"`,
			`11 "a" 6 9 "a" "mid"`,
			`11 "a" 6 13 "a" "hi"`,
			`11 "a" 6 14 "a" "too late"`,
			`11 "a" 3 9 "a" "mid"`,
			`11 "a" 3 13 "a" "hi"`,
			`11 "a" 3 14 "a" "too late"`),
	})
	if j.Watermark() != 0 {
		t.Fatalf("watermark %d after advances to 0 and -5", j.Watermark())
	}
}

// TestIntervalJoinLeft: an unmatched left row is emitted once the watermark
// passes t + upper + lateness, and not before; a matched one never; a
// null-keyed one at the next Advance; right rows with null keys never match.
func TestIntervalJoinLeft(t *testing.T) {
	j := newJoin(t, intervalSpec(LeftJoin, 2*us, 3*us, 1*us))
	runJoin(t, j, []jstep{
		jleft(jl(10, "a", 1), jl(10, "b", 2), jev{ts: 10, v: 3}),
		jright(jev{ts: 10, w: "null key"}, jr(11, "b", "x")),
		jadv(5,
			`10 null 3 null null null`, // null key: final at once
			`10 "b" 2 11 "b" "x"`),
		jadv(14), // 10+3+1 = 14 is not < 14: a right row at 13 could still come
		lateOn(1, nil, jr(13, "c", "y")),
		jadv(15, `10 "a" 1 null null null`),
		// b was matched: never emitted unmatched; state is empty but c.
		jadv(100),
	})
	if j.Len() != 0 {
		t.Fatalf("Len %d after all rows expired", j.Len())
	}
}

// TestIntervalJoinLate: a row is late on either side when t + lateness <
// watermark; a row right at the bound is not late and still pairs.
func TestIntervalJoinLate(t *testing.T) {
	j := newJoin(t, intervalSpec(InnerJoin, 5*us, 5*us, 2*us))
	runJoin(t, j, []jstep{
		jleft(jl(20, "a", 1)),
		jadv(20),
		lateOn(1, []string{`17 "a" "late"`}, jr(17, "a", "late"), jr(18, "a", "at bound")),
		lateOn(0, []string{`17 "a" 2`}, jl(18, "a", 3), jl(17, "a", 2)),
		jadv(21,
			`18 "a" 3 18 "a" "at bound"`,
			`20 "a" 1 18 "a" "at bound"`),
	})
}

// TestIntervalJoinNegativeBounds: right.t in [left.t + 2, left.t + 4].
func TestIntervalJoinNegativeBounds(t *testing.T) {
	j := newJoin(t, intervalSpec(LeftJoin, -2*us, 4*us, 0))
	runJoin(t, j, []jstep{
		jleft(jl(10, "a", 1), jl(20, "a", 2)),
		jright(jr(11, "a", "x"), jr(12, "a", "lo"), jr(14, "a", "hi"), jr(15, "a", "y")),
		jadv(15,
			`10 "a" 1 12 "a" "lo"`,
			`10 "a" 1 14 "a" "hi"`),
		jadv(25, `20 "a" 2 null null null`),
	})
}

// TestWindowJoinTumbling: rows meet when in the same window [start, end);
// a window's pairs come out when it closes; a left join emits left rows of
// windows without right rows.
func TestWindowJoinTumbling(t *testing.T) {
	j := newJoin(t, windowSpec(LeftJoin, Tumbling, 10*us, 0, 2*us))
	runJoin(t, j, []jstep{
		jleft(jl(0, "a", 1), jl(9, "a", 2), jl(10, "a", 3), jl(5, "b", 4), jev{ts: 3, v: 5}),
		jright(jr(9, "a", "x"), jr(10, "a", "y"), jr(1, "a", "z"), jev{ts: 3, w: "null"}),
		jadv(11),
		jadv(12,
			`3 null 5 null null null 0 10`, // the null key's encoding sorts first
			`0 "a" 1 1 "a" "z" 0 10`,
			`0 "a" 1 9 "a" "x" 0 10`,
			`9 "a" 2 1 "a" "z" 0 10`,
			`9 "a" 2 9 "a" "x" 0 10`,
			`5 "b" 4 null null null 0 10`),
		lateOn(0, []string{`9 "b" 6`}, jl(9, "b", 6), jl(10, "b", 7)),
		jadv(22,
			`10 "a" 3 10 "a" "y" 10 20`,
			`10 "b" 7 null null null 10 20`),
	})
	if j.Len() != 0 {
		t.Fatalf("Len %d after all windows closed", j.Len())
	}
}

// TestWindowJoinSliding: a pair comes out in every window holding both
// rows; a row arriving after one of its windows closed joins the others.
func TestWindowJoinSliding(t *testing.T) {
	j := newJoin(t, windowSpec(InnerJoin, Sliding, 10*us, 5*us, 0))
	runJoin(t, j, []jstep{
		jleft(jl(7, "a", 1)),
		jright(jr(8, "a", "both"), jr(3, "a", "first only"), jr(12, "a", "second only")),
		jadv(10,
			`7 "a" 1 3 "a" "first only" 0 10`,
			`7 "a" 1 8 "a" "both" 0 10`),
		jright(jr(6, "a", "after")), // [0,10) closed, [5,15) open
		lateOn(1, []string{`4 "a" "late"`}, jr(4, "a", "late")),
		jadv(15,
			`7 "a" 1 6 "a" "after" 5 15`,
			`7 "a" 1 8 "a" "both" 5 15`,
			`7 "a" 1 12 "a" "second only" 5 15`),
		jadv(100),
	})
}

func TestNewJoinErrors(t *testing.T) {
	ok := intervalSpec(InnerJoin, us, us, 0)
	other := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: eventTimeType},
		{Name: "user", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: arrow.PrimitiveTypes.Int64},
		{Name: "right_user", Type: arrow.BinaryTypes.String},
		{Name: "lst", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
	}, nil)
	cases := []struct {
		name  string
		edit  func(*JoinSpec)
		right *arrow.Schema
		want  string
	}{
		{"type", func(s *JoinSpec) { s.Type = 0 }, nil, "unknown join type"},
		{"no condition", func(s *JoinSpec) { s.Interval = nil }, nil, "no time condition"},
		{"both conditions", func(s *JoinSpec) { s.Window = &JoinWindow{Kind: Tumbling, Size: time.Second} }, nil, "both an interval and a window"},
		{"empty interval", func(s *JoinSpec) { s.Interval = &JoinInterval{Lower: -3 * us, Upper: 2 * us} }, nil, "is empty"},
		{"sub-microsecond", func(s *JoinSpec) { s.Interval = &JoinInterval{Upper: time.Nanosecond} }, nil, "whole number of microseconds"},
		{"negative lateness", func(s *JoinSpec) { s.AllowedLateness = -us }, nil, "must not be negative"},
		{"session window", func(s *JoinSpec) { s.Interval, s.Window = nil, &JoinWindow{Kind: Session, Size: us} }, nil, "not supported by a join"},
		{"bad slide", func(s *JoinSpec) {
			s.Interval, s.Window = nil, &JoinWindow{Kind: Sliding, Size: 10 * us, Slide: 3 * us}
		}, nil, "not a multiple of slide"},
		{"zero size", func(s *JoinSpec) { s.Interval, s.Window = nil, &JoinWindow{Kind: Tumbling} }, nil, "size 0s must be positive"},
		{"no keys", func(s *JoinSpec) { s.LeftKeys, s.RightKeys = nil, nil }, nil, "no key columns"},
		{"key count", func(s *JoinSpec) { s.RightKeys = []string{"user", "w"} }, nil, "1 left keys (user) but 2 right keys (user, w)"},
		{"missing key", func(s *JoinSpec) { s.LeftKeys = []string{"usr"} }, nil, `left key column "usr" not found (or ambiguous) in left schema (did you mean user?)`},
		{"key types", nil, other, `key 1: left column "user" is utf8 but right column "user" is int64; join keys must have identical types`},
		{"unsupported key type", func(s *JoinSpec) { s.LeftKeys, s.RightKeys = []string{"lst"}, []string{"lst"} }, arrow.NewSchema(append(other.Fields(), arrow.Field{Name: "x", Type: eventTimeType}), nil), "left key column \"lst\" not found"},
		{"missing time", func(s *JoinSpec) { s.RightTime = "tss" }, nil, `right time column "tss" not found`},
		{"time type", func(s *JoinSpec) { s.RightTime = "w" }, nil, `right time column "w" has type utf8; want timestamp[us]`},
		{"prefix clash", func(s *JoinSpec) { s.RightKeys = []string{"right_user"}; s.RightTime = "ts" }, arrow.NewSchema([]arrow.Field{{Name: "ts", Type: eventTimeType}, {Name: "right_user", Type: arrow.BinaryTypes.String}, {Name: "user", Type: arrow.BinaryTypes.String}}, nil), `right column "user" clashes with a left column, and its prefixed name "right_user" with a right column`},
		{"reserved", func(s *JoinSpec) {
			s.Interval, s.Window = nil, &JoinWindow{Kind: Tumbling, Size: us}
			s.LeftTime = "window_start"
		}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := ok
			spec.LeftKeys, spec.RightKeys = slices.Clone(ok.LeftKeys), slices.Clone(ok.RightKeys)
			if c.edit != nil {
				c.edit(&spec)
			}
			right := joinRightSchema
			if c.right != nil {
				right = c.right
			}
			_, err := NewJoin(spec, joinLeftSchema, right, 128)
			if c.want == "" {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "join j: ") {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
	// A left column named like a window column clashes with the windowed
	// join's own output column.
	ws := arrow.NewSchema(append(joinLeftSchema.Fields(), arrow.Field{Name: "window_start", Type: eventTimeType}), nil)
	_, err := NewJoin(windowSpec(InnerJoin, Tumbling, us, 0, 0), ws, joinRightSchema, 128)
	if err == nil || !strings.Contains(err.Error(), `left column "window_start" clashes with a reserved output column`) {
		t.Fatalf("window_start clash: %v", err)
	}
	if _, err := NewJoin(ok, joinLeftSchema, joinRightSchema, 0); err == nil || !strings.Contains(err.Error(), "max parallelism 0") {
		t.Fatalf("max parallelism 0: %v", err)
	}
	// Composite keys of several types are fine.
	multi := ok
	multi.LeftKeys, multi.RightKeys = []string{"user", "ts"}, []string{"user", "ts"}
	if _, err := NewJoin(multi, joinLeftSchema, joinRightSchema, 128); err != nil {
		t.Fatal(err)
	}
}

func TestJoinProcessErrors(t *testing.T) {
	j := newJoin(t, intervalSpec(InnerJoin, us, us, 0))
	rec := joinBatch(t, memory.DefaultAllocator, 0, jl(1, "a", 1))
	defer rec.Release()
	if _, err := j.ProcessInput(1, rec, nil); err == nil || !strings.Contains(err.Error(), "does not match right input schema") {
		t.Fatalf("left batch on the right input: %v", err)
	}
	if _, err := j.ProcessInput(2, rec, nil); err == nil || !strings.Contains(err.Error(), "input 2 out of range") {
		t.Fatalf("input 2: %v", err)
	}
	if _, err := j.ProcessInput(0, rec, []int32{3}); err == nil || !strings.Contains(err.Error(), "selection row 3") {
		t.Fatalf("bad selection: %v", err)
	}
	if j.Len() != 0 || j.seq != [2]int64{} {
		t.Fatalf("failed calls changed state: Len %d seq %v", j.Len(), j.seq)
	}
}

// ---- a naive reference model ----

type refJRow struct {
	side    int
	e       jev
	seq     int64
	epoch   int     // Advance calls before its arrival
	windows []int64 // windowed: starts of the windows open at arrival
	final   bool    // interval left row: emitted or expired
}

type refJoin struct {
	spec                JoinSpec
	lower, upper, late  int64
	size, slide         int64
	wm                  int64
	epoch               int
	seq                 [2]int64
	rows                []*refJRow
	interval, leftOuter bool
}

func newRefJoin(spec JoinSpec) *refJoin {
	r := &refJoin{spec: spec, late: spec.AllowedLateness.Microseconds(), wm: math.MinInt64, leftOuter: spec.Type == LeftJoin}
	if spec.Interval != nil {
		r.interval, r.lower, r.upper = true, spec.Interval.Lower.Microseconds(), spec.Interval.Upper.Microseconds()
	} else {
		r.size, r.slide = spec.Window.Size.Microseconds(), spec.Window.Slide.Microseconds()
		if spec.Window.Kind == Tumbling {
			r.slide = r.size
		}
	}
	return r
}

func jevLine(side int, e jev) string {
	if side == 0 {
		return fmt.Sprintf("%d %s %d", e.ts, keyStr(e.user), e.v)
	}
	return fmt.Sprintf("%d %s %s", e.ts, keyStr(e.user), strconv.Quote(e.w))
}

func (r *refJoin) process(side int, rows []jev) []string {
	var late []string
	for _, e := range rows {
		row := &refJRow{side: side, e: e, seq: r.seq[side], epoch: r.epoch}
		r.seq[side]++
		isLate := false
		if r.interval {
			isLate = e.ts+r.late < r.wm
		} else {
			for s := e.ts - floorMod(e.ts, r.slide); s > e.ts-r.size; s -= r.slide {
				if s+r.size+r.late > r.wm {
					row.windows = append(row.windows, s)
				}
			}
			isLate = len(row.windows) == 0
		}
		if isLate {
			late = append(late, jevLine(side, e))
			continue
		}
		if e.user == nil && (side == 1 || !r.leftOuter) {
			continue
		}
		r.rows = append(r.rows, row)
	}
	slices.Sort(late)
	return late
}

func (r *refJoin) match(l, x *refJRow) bool {
	return l.e.user != nil && x.e.user != nil && *l.e.user == *x.e.user &&
		x.e.ts >= l.e.ts-r.lower && x.e.ts <= l.e.ts+r.upper
}

func (r *refJoin) advance(wm int64) []string {
	raise := wm > r.wm
	var out []string
	if r.interval {
		for _, l := range r.rows {
			if l.side != 0 {
				continue
			}
			matched := false
			for _, x := range r.rows {
				if x.side == 1 && r.match(l, x) {
					matched = true
					if l.epoch == r.epoch || x.epoch == r.epoch {
						out = append(out, jevLine(0, l.e)+" "+jevLine(1, x.e))
					}
				}
			}
			if l.final {
				continue
			}
			if l.e.user == nil || (raise && l.e.ts+r.upper+r.late < wm) {
				l.final = true
				if r.leftOuter && !matched {
					out = append(out, jevLine(0, l.e)+" null null null")
				}
			}
		}
	} else if raise {
		closes := func(s int64) bool { return s+r.size+r.late <= wm && s+r.size+r.late > r.wm }
		type kw struct {
			key string
			s   int64
		}
		wins := map[kw]bool{}
		for _, x := range r.rows {
			for _, s := range x.windows {
				if closes(s) {
					wins[kw{keyStr(x.e.user), s}] = true
				}
			}
		}
		for w := range wins {
			var ls, rs []*refJRow
			for _, x := range r.rows {
				if keyStr(x.e.user) == w.key && slices.Contains(x.windows, w.s) {
					if x.side == 0 {
						ls = append(ls, x)
					} else {
						rs = append(rs, x)
					}
				}
			}
			bounds := fmt.Sprintf(" %d %d", w.s, w.s+r.size)
			for _, l := range ls {
				if len(rs) == 0 || l.e.user == nil {
					if r.leftOuter {
						out = append(out, jevLine(0, l.e)+" null null null"+bounds)
					}
					continue
				}
				for _, x := range rs {
					out = append(out, jevLine(0, l.e)+" "+jevLine(1, x.e)+bounds)
				}
			}
		}
	}
	if raise {
		r.wm = wm
	}
	r.epoch++
	slices.Sort(out)
	return out
}

// ---- a cluster of join instances, driven as the engine does ----

type jcluster struct {
	t     *testing.T
	spec  JoinSpec
	insts []*Join
	saved []*jpersisted // per instance: base and deltas since
	mem   memory.Allocator
}

// jpersisted is what the engine keeps of an instance: a base snapshot and
// the deltas after it.
type jpersisted struct {
	base   []arrow.RecordBatch
	deltas [][2][]arrow.RecordBatch
}

func (p *jpersisted) release() {
	release(p.base...)
	for _, d := range p.deltas {
		release(d[0]...)
		release(d[1]...)
	}
}

func newJCluster(t *testing.T, spec JoinSpec, p int, mem memory.Allocator) *jcluster {
	c := &jcluster{t: t, spec: spec, mem: mem}
	for range p {
		j := newJoin(t, spec)
		j.SetAllocator(mem)
		c.insts = append(c.insts, j)
		c.saved = append(c.saved, &jpersisted{})
	}
	return c
}

func (c *jcluster) release() {
	for _, p := range c.saved {
		p.release()
	}
	c.saved = nil
}

func (c *jcluster) process(side int, rows []jev) []string {
	c.t.Helper()
	rec := joinBatch(c.t, c.mem, side, rows...)
	defer rec.Release()
	sels, err := PartitionIndices(rec, c.insts[0].KeyColumns(side), len(c.insts), 128)
	if err != nil {
		c.t.Fatal(err)
	}
	var late []string
	for i, sel := range sels {
		l, err := c.insts[i].ProcessInput(side, rec, sel)
		if err != nil {
			c.t.Fatal(err)
		}
		late = append(late, rowsOf(l)...)
		release(l)
	}
	slices.Sort(late)
	return late
}

// advance advances every instance and returns the union of their outputs,
// sorted, and per instance its output in emission order.
func (c *jcluster) advance(wm int64) ([]string, [][]string) {
	c.t.Helper()
	var all []string
	per := make([][]string, len(c.insts))
	for i, j := range c.insts {
		o, err := j.Advance(wm)
		if err != nil {
			c.t.Fatal(err)
		}
		per[i] = rowsOf(o)
		all = append(all, per[i]...)
		release(o)
	}
	slices.Sort(all)
	return all, per
}

// checkpoint persists every instance: a full snapshot or a delta.
func (c *jcluster) checkpoint(full bool) {
	c.t.Helper()
	for i, j := range c.insts {
		p := c.saved[i]
		if full || p.base == nil {
			snap, err := j.Snapshot()
			if err != nil {
				c.t.Fatal(err)
			}
			checkJoinState(c.t, j, snap, nil)
			p.release()
			*p = jpersisted{base: snap}
			continue
		}
		changed, removed := j.Dirty()
		ups, tombs, err := j.SnapshotDelta()
		if err != nil {
			c.t.Fatal(err)
		}
		if jRows(ups) != changed || jRows(tombs) != removed {
			c.t.Fatalf("Dirty() = %d, %d; delta has %d upserts, %d tombstones", changed, removed, jRows(ups), jRows(tombs))
		}
		checkJoinState(c.t, j, ups, tombs)
		p.deltas = append(p.deltas, [2][]arrow.RecordBatch{ups, tombs})
	}
}

// rescale checkpoints, then rebuilds p instances from the persisted bases
// and deltas, as the engine restores after a kill or a rescale, and checks
// that the rebuilt state equals the live one.
func (c *jcluster) rescale(p int, full bool) {
	c.t.Helper()
	c.checkpoint(full)
	want := c.state()
	wm := c.insts[0].Watermark()
	var bases []arrow.RecordBatch
	for _, s := range c.saved {
		bases = append(bases, s.base...)
	}
	var insts []*Join
	for s := range p {
		lo, hi := keygroup.Range(s, p, 128)
		j := newJoin(c.t, c.spec)
		j.SetAllocator(c.mem)
		if err := j.Restore(bases, lo, hi, wm); err != nil {
			c.t.Fatal(err)
		}
		for _, sv := range c.saved {
			for di, d := range sv.deltas {
				if err := j.ApplyDelta(d[0], d[1], lo, hi); err != nil {
					c.t.Fatalf("delta %d: %v", di, err)
				}
			}
		}
		insts = append(insts, j)
	}
	c.release()
	c.insts = insts
	for range p {
		c.saved = append(c.saved, &jpersisted{})
	}
	eqLines(c.t, fmt.Sprintf("state after rescale to %d", p), c.state(), want)
}

// state is the union of every instance's snapshot rows, sorted. It makes a
// snapshot point, so it is only called right before instances are replaced
// or checkpointed in full.
func (c *jcluster) state() []string {
	c.t.Helper()
	var out []string
	for _, j := range c.insts {
		snap, err := j.Snapshot()
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, jStateLines(snap)...)
		release(snap...)
	}
	slices.Sort(out)
	return out
}

// jStateLines formats state rows without the pending flag's... as is.
func jStateLines(bs []arrow.RecordBatch) []string {
	var out []string
	for _, b := range bs {
		out = append(out, rowsOf(b)...)
	}
	return out
}

func jRows(bs []arrow.RecordBatch) int {
	n := 0
	for _, b := range bs {
		n += int(b.NumRows())
	}
	return n
}

// checkJoinState checks schemas and key_group order of state batches.
func checkJoinState(t *testing.T, j *Join, ups, tombs []arrow.RecordBatch) {
	t.Helper()
	var prev int32 = -1
	for _, u := range ups {
		if !u.Schema().Equal(j.StateSchema()) {
			t.Fatalf("state schema %s, want %s", u.Schema(), j.StateSchema())
		}
		for _, kg := range u.Column(0).(*array.Int32).Int32Values() {
			if kg < prev {
				t.Fatalf("state rows not sorted by key_group")
			}
			prev = kg
		}
	}
	prev = -1
	for _, tb := range tombs {
		if !tb.Schema().Equal(j.TombstoneSchema()) {
			t.Fatalf("tombstone schema %s, want %s", tb.Schema(), j.TombstoneSchema())
		}
		for _, kg := range tb.Column(0).(*array.Int32).Int32Values() {
			if kg < prev {
				t.Fatalf("tombstones not sorted by key_group")
			}
			prev = kg
		}
	}
}

func joinSpecsUnderTest() []JoinSpec {
	return []JoinSpec{
		intervalSpec(InnerJoin, 3*us, 5*us, 0),
		intervalSpec(LeftJoin, 3*us, 5*us, 4*us),
		intervalSpec(LeftJoin, -2*us, 6*us, 0),
		intervalSpec(InnerJoin, 0, 0, 2*us),
		windowSpec(InnerJoin, Tumbling, 10*us, 0, 3*us),
		windowSpec(LeftJoin, Tumbling, 7*us, 0, 0),
		windowSpec(InnerJoin, Sliding, 12*us, 4*us, 2*us),
		windowSpec(LeftJoin, Sliding, 10*us, 5*us, 6*us),
	}
}

func specName(s JoinSpec) string {
	if s.Interval != nil {
		return fmt.Sprintf("interval_%s_%d_%d_late%d", s.Type, s.Interval.Lower.Microseconds(), s.Interval.Upper.Microseconds(), s.AllowedLateness.Microseconds())
	}
	return fmt.Sprintf("%s_%s_%d_%d_late%d", s.Window.Kind, s.Type, s.Window.Size.Microseconds(), s.Window.Slide.Microseconds(), s.AllowedLateness.Microseconds())
}

func randomJoinRows(rng *rand.Rand, clock int64, n int) []jev {
	users := []*string{sp("ann"), sp("bob"), sp("cy"), sp("dee"), sp("eve"), sp("fay"), sp("gus"), nil}
	words := []string{"x", "y", "z", ""}
	rows := make([]jev, n)
	for i := range rows {
		rows[i] = jev{ts: clock + int64(rng.IntN(30)) - 20, user: users[rng.IntN(len(users))], v: int64(rng.IntN(1000)), w: words[rng.IntN(len(words))]}
	}
	return rows
}

// TestJoinRandomizedAgainstReference: random streams on both inputs, in
// random batches, with random watermarks, checkpoints (full or delta),
// kills and rescales at random parallelism, give exactly the reference's
// late rows and output at every step; every instance's output is in
// emission order (sorted by the documented key).
func TestJoinRandomizedAgainstReference(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	steps := 300
	if testing.Short() {
		steps = 80
	}
	for _, spec := range joinSpecsUnderTest() {
		t.Run(specName(spec), func(t *testing.T) {
			ref := newRefJoin(spec)
			c := newJCluster(t, spec, 1+rng.IntN(5), memory.DefaultAllocator)
			defer c.release()
			clock := int64(-40)
			emitted, rescales := 0, 0
			for i := range steps {
				switch op := rng.IntN(20); {
				case op < 11:
					side := rng.IntN(2)
					rows := randomJoinRows(rng, clock, 1+rng.IntN(12))
					clock += int64(rng.IntN(4))
					eqLines(t, fmt.Sprintf("step %d late rows of side %d", i, side), c.process(side, rows), ref.process(side, rows))
				case op < 17:
					wm := clock - int64(rng.IntN(20))
					got, _ := c.advance(wm)
					eqLines(t, fmt.Sprintf("step %d advance(%d)", i, wm), got, ref.advance(wm))
					emitted += len(got)
				case op < 19:
					c.checkpoint(rng.IntN(4) == 0)
				default:
					rescales++
					c.rescale(1+rng.IntN(6), rng.IntN(3) == 0)
				}
			}
			got, _ := c.advance(math.MaxInt64)
			eqLines(t, "drain", got, ref.advance(math.MaxInt64))
			emitted += len(got)
			if emitted < steps/16 {
				t.Fatalf("only %d output rows: the scenario is too thin", emitted)
			}
			t.Logf("%d output rows, %d rescales", emitted, rescales)
			for _, j := range c.insts {
				if j.Len() != 0 {
					t.Fatalf("instance holds %d rows after the drain", j.Len())
				}
			}
		})
	}
}

// jstream is a fixed stream: per epoch, rows of each side, then a watermark.
type jepoch struct {
	rows [2][]jev
	wm   int64
}

func makeJStream(rng *rand.Rand, epochs int) []jepoch {
	var out []jepoch
	clock := int64(0)
	for range epochs {
		var e jepoch
		for side := range 2 {
			e.rows[side] = randomJoinRows(rng, clock, 5+rng.IntN(20))
			for i := range e.rows[side] {
				e.rows[side][i].v = int64(len(out)*100 + i) // unique: tells left rows apart in checkEmissionOrder
			}
		}
		clock += 4
		e.wm = clock - 10
		out = append(out, e)
	}
	return out
}

// runJStream feeds a stream to a cluster of p instances, cutting each
// side's rows of an epoch into random batches and interleaving the sides
// at random (arrival order within an epoch across inputs does not change
// arrival seqs), and returns per epoch every instance's output.
func runJStream(t *testing.T, spec JoinSpec, stream []jepoch, p int, rng *rand.Rand, plan map[int]int) [][][]string {
	c := newJCluster(t, spec, p, memory.DefaultAllocator)
	defer c.release()
	var out [][][]string
	for ei, e := range stream {
		if np, ok := plan[ei]; ok {
			c.rescale(np, ei%2 == 0)
		}
		var cuts [2][][]jev
		for side := range 2 {
			rows := e.rows[side]
			for len(rows) > 0 {
				n := 1 + rng.IntN(len(rows))
				cuts[side] = append(cuts[side], rows[:n])
				rows = rows[n:]
			}
		}
		for len(cuts[0])+len(cuts[1]) > 0 {
			side := rng.IntN(2)
			if len(cuts[side]) == 0 {
				side = 1 - side
			}
			c.process(side, cuts[side][0])
			cuts[side] = cuts[side][1:]
		}
		_, per := c.advance(e.wm)
		out = append(out, per)
		if rng.IntN(3) == 0 {
			c.checkpoint(false)
		}
	}
	_, per := c.advance(math.MaxInt64)
	return append(out, per)
}

// TestJoinDeterministic: the same stream, cut into other batches and
// interleaved otherwise, gives byte-identical output in one instance; at
// parallelism 3 and 4, and across a rescale 2 -> 5 -> 3 through persisted
// bases and deltas, each instance emits exactly the one-instance output
// restricted to its keys, in the same order.
func TestJoinDeterministic(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, spec := range joinSpecsUnderTest() {
		t.Run(specName(spec), func(t *testing.T) {
			stream := makeJStream(rng, 25)
			one := runJStream(t, spec, stream, 1, rng, nil)
			total := 0
			for _, e := range one {
				total += len(e[0])
			}
			if total < 30 {
				t.Fatalf("only %d output rows", total)
			}
			checkEmissionOrder(t, spec, one)
			for ei, e := range runJStream(t, spec, stream, 1, rng, nil) {
				eqLines(t, fmt.Sprintf("epoch %d, other batching", ei), e[0], one[ei][0])
			}
			owner := func(line string) int { // user is the second field of the line
				f := strings.Fields(line)[1]
				var key []byte
				if f == "null" {
					key = []byte{tagNull}
				} else {
					s, _ := strconv.Unquote(f)
					key = SerializeKey(nil, mustStrBatch(t, s), 0, []int{0})
				}
				return keygroup.Of(key, 128)
			}
			check := func(name string, got [][][]string, parallelism func(epoch int) int) {
				for ei, per := range got {
					p := parallelism(ei)
					if len(per) != p {
						t.Fatalf("%s epoch %d: %d instances, want %d", name, ei, len(per), p)
					}
					for s, lines := range per {
						lo, hi := keygroup.Range(s, p, 128)
						var want []string
						for _, l := range one[ei][0] {
							if kg := owner(l); kg >= lo && kg < hi {
								want = append(want, l)
							}
						}
						eqLines(t, fmt.Sprintf("%s epoch %d instance %d", name, ei, s), lines, want)
					}
				}
			}
			check("p=3", runJStream(t, spec, stream, 3, rng, nil), func(int) int { return 3 })
			check("p=4", runJStream(t, spec, stream, 4, rng, nil), func(int) int { return 4 })
			check("2 -> 5 -> 3", runJStream(t, spec, stream, 2, rng, map[int]int{8: 5, 16: 3}), func(e int) int {
				switch {
				case e < 8:
					return 2
				case e < 16:
					return 5
				}
				return 3
			})
		})
	}
}

// checkEmissionOrder checks that every instance's output of every epoch is
// sorted by the documented key, as far as the lines show it (not the arrival
// seqs): interval (left time, key bytes), windowed (window_start, key
// bytes, left time), then for one left row (same time, key and value:
// makeJStream's values are unique) right time.
func checkEmissionOrder(t *testing.T, spec JoinSpec, epochs [][][]string) {
	t.Helper()
	type sortKey struct {
		ws, lt int64
		key    string
		lt2    int64
		rt     int64
	}
	parse := func(line string) sortKey {
		f := strings.Fields(line)
		num := func(s string) int64 {
			if s == "null" {
				return math.MinInt64
			}
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			return v
		}
		key := []byte{tagNull}
		if f[1] != "null" {
			u, _ := strconv.Unquote(f[1])
			key = SerializeKey(nil, mustStrBatch(t, u), 0, []int{0})
		}
		k := sortKey{key: string(key), lt2: num(f[0]), rt: num(f[3])}
		if spec.Interval != nil {
			k.lt = num(f[0])
		} else {
			k.ws = num(f[6])
		}
		return k
	}
	for ei, per := range epochs {
		for s, lines := range per {
			for i := 1; i < len(lines); i++ {
				a, b := parse(lines[i-1]), parse(lines[i])
				c := cmp.Or(cmp.Compare(a.ws, b.ws), cmp.Compare(a.lt, b.lt), strings.Compare(a.key, b.key), cmp.Compare(a.lt2, b.lt2))
				sameLeft := c == 0 && slices.Equal(strings.Fields(lines[i-1])[:3], strings.Fields(lines[i])[:3])
				if c > 0 || (sameLeft && a.rt > b.rt) {
					t.Fatalf("epoch %d instance %d: line %d out of order:\n  %s\n  %s", ei, s, i, lines[i-1], lines[i])
				}
			}
		}
	}
}

func mustStrBatch(t testing.TB, s string) arrow.RecordBatch {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(s)
	a := b.NewArray()
	defer a.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{a}, 1)
}

// TestJoinDeltaHoldsOnlyChanges: a delta after an epoch holds the rows that
// arrived (upserts) and the base rows that expired (tombstones), not the
// rest of the state; an epoch without input and watermark change gives an
// empty delta.
func TestJoinDeltaHoldsOnlyChanges(t *testing.T) {
	j := newJoin(t, intervalSpec(LeftJoin, 5*us, 5*us, 0))
	var rows []jev
	for i := range 200 {
		rows = append(rows, jl(int64(100+i), fmt.Sprint("u", i), int64(i)))
	}
	runJoin(t, j, []jstep{jleft(rows...), jadv(0)})
	base, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(base...)
	if jRows(base) != 200 {
		t.Fatalf("base of %d rows", jRows(base))
	}
	// One right row matching u7: an upsert of it and of u7 (now matched).
	runJoin(t, j, []jstep{jright(jr(107, "u7", "m")), jadv(0, `107 "u7" 7 107 "u7" "m"`)})
	if c, r := j.Dirty(); c != 2 || r != 0 {
		t.Fatalf("Dirty() = %d, %d; want 2, 0", c, r)
	}
	ups, tombs, err := j.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	eqLines(t, "upserts", jStateLines(ups), []string{
		fmt.Sprintf("%d 0 7 false true 107 \"u7\" 7 null null null", keygroup.Of(SerializeKey(nil, mustStrBatch(t, "u7"), 0, []int{0}), 128)),
		fmt.Sprintf("%d 1 0 false false null null null 107 \"u7\" \"m\"", keygroup.Of(SerializeKey(nil, mustStrBatch(t, "u7"), 0, []int{0}), 128)),
	})
	release(ups...)
	release(tombs...)
	if len(tombs) != 0 {
		t.Fatalf("%d tombstone batches", len(tombs))
	}
	// Nothing happened: empty delta.
	runJoin(t, j, []jstep{jadv(0)})
	ups, tombs, err = j.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	if len(ups)+len(tombs) != 0 {
		t.Fatalf("idle epoch: %d upsert and %d tombstone batches", len(ups), len(tombs))
	}
	// The watermark expires u0..u4 (t + 5 < 110) and the right row
	// (107 + 5 < 113 only later): 5 tombstones, the unmatched ones emitted.
	runJoin(t, j, []jstep{jadv(110,
		`100 "u0" 0 null null null`, `101 "u1" 1 null null null`, `102 "u2" 2 null null null`,
		`103 "u3" 3 null null null`, `104 "u4" 4 null null null`)})
	ups, tombs, err = j.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	defer release(ups...)
	defer release(tombs...)
	if jRows(ups) != 0 || jRows(tombs) != 5 {
		t.Fatalf("delta of %d upserts and %d tombstones; want 0 and 5", jRows(ups), jRows(tombs))
	}
}

func TestJoinRestoreRejects(t *testing.T) {
	spec := intervalSpec(InnerJoin, us, us, 0)
	j := newJoin(t, spec)
	var rows []jev
	for i := range 20 {
		rows = append(rows, jl(1, fmt.Sprint("user-", i), 1))
	}
	runJoin(t, j, []jstep{jleft(rows...), jright(jr(1, "user-3", "x"))})
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	other, err := NewJoin(spec, joinLeftSchema, joinRightSchema, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Restore(snap, 0, 64, 0); err == nil || !strings.Contains(err.Error(), "key group") {
		t.Errorf("restore with another max parallelism: %v", err)
	}
	if err := newJoin(t, spec).Restore(append(slices.Clone(snap), snap...), 0, 128, 0); err == nil || !strings.Contains(err.Error(), "restored twice") {
		t.Errorf("restoring the same state twice: %v", err)
	}
	if err := newJoin(t, spec).Restore(snap, 0, 200, 0); err == nil || !strings.Contains(err.Error(), "key-group range") {
		t.Errorf("bad range: %v", err)
	}
	wspec := windowSpec(InnerJoin, Tumbling, 10*us, 0, 0)
	wspec.LeftKeys, wspec.RightKeys = []string{"v"}, []string{"v"}
	if _, err := NewJoin(wspec, joinLeftSchema, joinRightSchema, 128); err == nil {
		t.Fatal("int64 and utf8 keys accepted")
	}
	// A tombstone of a row that is not held.
	fresh := newJoin(t, spec)
	if err := fresh.Restore(snap, 0, 128, 0); err != nil {
		t.Fatal(err)
	}
	tb := array.NewRecordBuilder(memory.DefaultAllocator, fresh.TombstoneSchema())
	tb.Field(0).(*array.Int32Builder).Append(0)
	tb.Field(1).(*array.Int8Builder).Append(0)
	tb.Field(2).(*array.Int64Builder).Append(999)
	tomb := tb.NewRecordBatch()
	tb.Release()
	defer tomb.Release()
	if err := fresh.ApplyDelta(nil, []arrow.RecordBatch{tomb}, 0, 128); err == nil || !strings.Contains(err.Error(), "is not held") {
		t.Errorf("tombstone of a missing row: %v", err)
	}
	if err := fresh.ApplyDelta(append(slices.Clone(snap), snap...), nil, 0, 128); err == nil || !strings.Contains(err.Error(), "upserted twice") {
		t.Errorf("row upserted twice: %v", err)
	}
	if err := fresh.ApplyDelta([]arrow.RecordBatch{tomb}, nil, 0, 128); err == nil || !strings.Contains(err.Error(), "does not match state schema") {
		t.Errorf("tombstone as upsert: %v", err)
	}
	// The failed calls changed nothing: the state is the snapshot's.
	eqLines(t, "state after rejected deltas", jStateLines(mustSnap(t, fresh)), jStateLines(snap))
	// Fingerprints tell layouts apart.
	if newJoin(t, spec).StateFingerprint() != j.StateFingerprint() {
		t.Error("fingerprint not stable")
	}
	if newJoin(t, intervalSpec(InnerJoin, us, 2*us, 0)).StateFingerprint() == j.StateFingerprint() {
		t.Error("another interval has the same fingerprint")
	}
}

func mustSnap(t *testing.T, j *Join) []arrow.RecordBatch {
	t.Helper()
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release(snap...) })
	return snap
}

// TestJoinRestoreContinues: a join restored from its snapshot in the middle
// of a stream, with pending rows (snapshot between ProcessInput and
// Advance), emits what the uninterrupted one emits.
func TestJoinRestoreContinues(t *testing.T) {
	for _, spec := range joinSpecsUnderTest() {
		t.Run(specName(spec), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			stream := makeJStream(rng, 12)
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
			for ei, e := range stream {
				feed(a, e)
				feed(b, e)
				if ei%3 == 1 {
					snap := mustSnap(t, b)
					b = newJoin(t, spec)
					if err := b.Restore(snap, 0, 128, a.Watermark()); err != nil {
						t.Fatal(err)
					}
				}
				eqLines(t, fmt.Sprintf("epoch %d", ei), adv(b, e.wm), adv(a, e.wm))
			}
			eqLines(t, "drain", adv(b, math.MaxInt64), adv(a, math.MaxInt64))
		})
	}
}

// TestJoinReleasesArrowMemory: every batch a join returns comes from its
// allocator and is released by the caller; the join keeps none of the
// caller's memory, including through late rows, compaction of its buffers,
// snapshots, deltas, restore and rescale.
func TestJoinReleasesArrowMemory(t *testing.T) {
	for _, spec := range joinSpecsUnderTest() {
		t.Run(specName(spec), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(3, 4))
			c := newJCluster(t, spec, 2, mem)
			late, out := 0, 0
			for ei, e := range makeJStream(rng, 90) { // > 64 chunks: compaction
				for side := range 2 {
					late += len(c.process(side, e.rows[side]))
					if ei%10 == 5 {
						late += len(c.process(side, []jev{{ts: e.wm - 100, user: sp("old")}, {ts: e.wm + 1, user: sp("new")}}))
					}
				}
				got, _ := c.advance(e.wm)
				out += len(got)
				switch ei % 30 {
				case 10:
					c.checkpoint(true)
				case 20:
					c.checkpoint(false)
				case 29:
					c.rescale(3, false)
				}
			}
			got, _ := c.advance(math.MaxInt64)
			out += len(got)
			c.release()
			if late == 0 || out == 0 {
				t.Fatalf("%d late and %d output rows; the test means to cover both", late, out)
			}
		})
	}
}

// TestJoinAllLateReturnsInput: when every row of a whole batch is late the
// batch itself comes back with an extra reference.
func TestJoinAllLateReturnsInput(t *testing.T) {
	j := newJoin(t, intervalSpec(InnerJoin, us, us, 0))
	runJoin(t, j, []jstep{jadv(100)})
	rec := joinBatch(t, memory.DefaultAllocator, 1, jr(1, "a", "x"), jr(2, "b", "y"))
	defer rec.Release()
	late, err := j.ProcessInput(1, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release(late)
	if late != rec {
		t.Fatalf("late batch is a copy")
	}
}

// TestHasNullKey: a composite key is null when any of its columns is,
// whatever the types before that column.
func TestHasNullKey(t *testing.T) {
	rec := batch(t,
		ev{ts: 1, user: sp("a"), n: ip(1), f: fp(1), s: sp("x"), i32: i32p(1)},
		ev{ts: 1, user: sp("a"), n: ip(1), f: fp(1), s: sp("x")},
		ev{ts: 1, user: sp(""), f: fp(1), s: sp("x"), i32: i32p(1)},
		ev{ts: 1, n: ip(1), f: fp(1), s: sp("x"), i32: i32p(1)},
	)
	defer rec.Release()
	cols := []int{0, 1, 2, 3, 4, 5}
	for r, want := range []bool{false, true, true, true} {
		if got := hasNullKey(SerializeKey(nil, rec, r, cols), len(cols)); got != want {
			t.Errorf("row %d: hasNullKey = %t, want %t", r, got, want)
		}
	}
	bools := array.NewBooleanBuilder(memory.DefaultAllocator)
	bools.AppendValues([]bool{true}, nil)
	bools.AppendNull()
	ba := bools.NewArray()
	bools.Release()
	defer ba.Release()
	brec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}, {Name: "b2", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}}, nil), []arrow.Array{ba, ba}, 2)
	defer brec.Release()
	if hasNullKey(SerializeKey(nil, brec, 0, []int{0, 1}), 2) || !hasNullKey(SerializeKey(nil, brec, 1, []int{0, 1}), 2) {
		t.Error("bool keys")
	}
}

// BenchmarkJoin: 2000 keys, per epoch 5000 rows per side and a watermark
// step of 100us; the state stays bounded by the interval or window.
func BenchmarkJoin(b *testing.B) {
	for _, spec := range []JoinSpec{
		intervalSpec(LeftJoin, 20*us, 20*us, 0),
		windowSpec(LeftJoin, Tumbling, 50*us, 0, 0),
		windowSpec(InnerJoin, Sliding, 100*us, 25*us, 0),
	} {
		b.Run(specName(spec), func(b *testing.B) {
			users := make([]string, 2000)
			for i := range users {
				users[i] = fmt.Sprint("user-", i)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			var recs [2][]arrow.RecordBatch
			for e := range 20 {
				for side := range 2 {
					rows := make([]jev, 5000)
					for i := range rows {
						rows[i] = jev{ts: int64(e*100 + rng.IntN(100)), user: &users[rng.IntN(len(users))], v: int64(i), w: "w"}
					}
					recs[side] = append(recs[side], joinBatch(b, memory.DefaultAllocator, side, rows...))
				}
			}
			b.ResetTimer()
			var j *Join
			out, state := 0, 0
			for i := range b.N {
				e := i % 20
				if e == 0 {
					j = newJoin(b, spec)
				}
				for side := range 2 {
					if _, err := j.ProcessInput(side, recs[side][e], nil); err != nil {
						b.Fatal(err)
					}
				}
				o, err := j.Advance(int64(e*100 - 50))
				if err != nil {
					b.Fatal(err)
				}
				if o != nil {
					out += int(o.NumRows())
					o.Release()
				}
				state = max(state, j.Len())
			}
			b.ReportMetric(float64(out)/float64(b.N), "out-rows/epoch")
			b.ReportMetric(float64(state), "max-state-rows")
		})
	}
}

// TestJoinStateGolden pins the join state format (floe-join-state/v1): the
// state and tombstone schemas, the fingerprint and the rows of a snapshot
// with pending, matched and unmatched rows of both sides, in
// testdata/join_state_v1.txt (regenerate with -rewrite only with a new
// format version). A join restored from that snapshot writes it back
// unchanged.
func TestJoinStateGolden(t *testing.T) {
	var got strings.Builder
	for _, spec := range []JoinSpec{intervalSpec(LeftJoin, 2*us, 3*us, time.Microsecond), windowSpec(LeftJoin, Sliding, 10*us, 5*us, 0)} {
		j := newJoin(t, spec)
		runJoin(t, j, []jstep{
			jleft(jl(10, "a", 1), jl(11, "b", 2), jev{ts: 12, v: 3}),
			jright(jr(12, "a", "x"), jr(30, "c", "y")),
		})
		if j.interval {
			runJoin(t, j, []jstep{jadv(5, `10 "a" 1 12 "a" "x"`, `12 null 3 null null null`), jleft(jl(13, "c", 4))})
		} else {
			runJoin(t, j, []jstep{jadv(5)})
		}
		fmt.Fprintf(&got, "# %s fingerprint %s\n", specName(spec), j.StateFingerprint())
		for _, f := range j.StateSchema().Fields() {
			fmt.Fprintf(&got, "state %s: %s\n", f.Name, f.Type)
		}
		for _, f := range j.TombstoneSchema().Fields() {
			fmt.Fprintf(&got, "tombstone %s: %s\n", f.Name, f.Type)
		}
		snap := mustSnap(t, j)
		lines := jStateLines(snap)
		for _, l := range lines {
			fmt.Fprintf(&got, "row %s\n", l)
		}
		back := newJoin(t, spec)
		if err := back.Restore(snap, 0, 128, j.Watermark()); err != nil {
			t.Fatal(err)
		}
		eqLines(t, "restored state", jStateLines(mustSnap(t, back)), lines)
	}
	const path = "testdata/join_state_v1.txt"
	if *rewrite {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	eqLines(t, path, strings.Split(got.String(), "\n"), strings.Split(string(want), "\n"))
}

// BenchmarkJoinRestore: restore of a join holding 400,000 rows of 100,000
// keys (a base snapshot, as a run after a long history restores it); "delta"
// restores half of them from a base and the other half from a delta.
func BenchmarkJoinRestore(b *testing.B) {
	spec := intervalSpec(InnerJoin, 24*3600*1000*us, 0, 0)
	users := make([]string, 100000)
	for i := range users {
		users[i] = fmt.Sprint("user-", i)
	}
	j := newJoin(b, spec)
	for e := range 4 {
		for side := range 2 {
			rows := make([]jev, 50000)
			for i := range rows {
				rows[i] = jev{ts: int64(e*1000 + i%1000), user: &users[(i*7+e*13+side)%len(users)], v: int64(i), w: "some payload string of a bid"}
			}
			rec := joinBatch(b, memory.DefaultAllocator, side, rows...)
			if _, err := j.ProcessInput(side, rec, nil); err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		if o, err := j.Advance(int64(e * 1000)); err != nil {
			b.Fatal(err)
		} else if o != nil {
			o.Release()
		}
	}
	state, err := j.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("base", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			r := newJoin(b, spec)
			if err := r.Restore(state, 0, r.k, 4000); err != nil {
				b.Fatal(err)
			}
			if r.Len() != j.Len() {
				b.Fatalf("restored %d rows, want %d", r.Len(), j.Len())
			}
		}
	})
	// Half the rows as a base, the other half as a delta after it.
	half := newJoin(b, spec)
	var base []arrow.RecordBatch
	for _, rec := range state {
		n := rec.NumRows() / 2
		base = append(base, rec.NewSlice(0, n))
		if err := half.Restore([]arrow.RecordBatch{rec.NewSlice(n, rec.NumRows())}, 0, half.k, 4000); err != nil {
			b.Fatal(err)
		}
	}
	ups, err := half.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("delta", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			r := newJoin(b, spec)
			if err := r.Restore(base, 0, r.k, 4000); err != nil {
				b.Fatal(err)
			}
			if err := r.ApplyDelta(ups, nil, 0, r.k); err != nil {
				b.Fatal(err)
			}
			if r.Len() != j.Len() {
				b.Fatalf("restored %d rows, want %d", r.Len(), j.Len())
			}
		}
	})
}

// BenchmarkJoinManyKeys joins 20 epochs of 50,000 rows a side whose keys
// are drawn from ten million, in a tumbling window of one epoch: a million
// short-lived keys, each created, paired or not and dropped when its
// window closes (Nexmark q7's join of bids with each window's top price).
func BenchmarkJoinManyKeys(b *testing.B) {
	spec := windowSpec(InnerJoin, Tumbling, 100*us, 0, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	var recs [2][]arrow.RecordBatch
	for e := range 20 {
		for side := range 2 {
			rows := make([]jev, 50000)
			for i := range rows {
				u := fmt.Sprint("u", rng.IntN(10_000_000))
				rows[i] = jev{ts: int64(e*100 + rng.IntN(100)), user: &u, v: int64(i), w: "w"}
			}
			recs[side] = append(recs[side], joinBatch(b, memory.DefaultAllocator, side, rows...))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		j := newJoin(b, spec)
		for e := range 20 {
			for side := range 2 {
				if _, err := j.ProcessInput(side, recs[side][e], nil); err != nil {
					b.Fatal(err)
				}
			}
			o, err := j.Advance(int64(e*100 + 99))
			if err != nil {
				b.Fatal(err)
			}
			if o != nil {
				o.Release()
			}
		}
	}
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N*20*2*50000)/cpu.Seconds(), "rows/cpu-s")
	}
}

// BenchmarkJoinIntervalAuctions is Nexmark q6's join: each epoch 6,000
// auctions (left, a key each) and 92,000 bids (right) on the auctions of
// the last three epochs, an interval join whose upper bound outlasts the
// run (every auction held), one Advance an epoch.
func BenchmarkJoinIntervalAuctions(b *testing.B) {
	spec := intervalSpec(InnerJoin, 0, 900*time.Second, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	const epochs, auctions, bids = 10, 6000, 92000
	keys := make([]string, epochs*auctions)
	for i := range keys {
		keys[i] = fmt.Sprint("a", i)
	}
	var recs [2][]arrow.RecordBatch
	for e := range epochs {
		left := make([]jev, auctions)
		for i := range left {
			left[i] = jev{ts: int64(e*1_000_000 + i*100), user: &keys[e*auctions+i], v: int64(i)}
		}
		right := make([]jev, bids)
		for i := range right {
			k := e*auctions + rng.IntN(auctions)
			if e > 0 {
				k = max(0, (e-2)*auctions) + rng.IntN(min(3, e+1)*auctions)
			}
			right[i] = jev{ts: int64(e*1_000_000 + 600_000 + rng.IntN(400_000)), user: &keys[k], w: "w"}
		}
		recs[0] = append(recs[0], joinBatch(b, memory.DefaultAllocator, 0, left...))
		recs[1] = append(recs[1], joinBatch(b, memory.DefaultAllocator, 1, right...))
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	out := 0
	for range b.N {
		j := newJoin(b, spec)
		for e := range epochs {
			for side := range 2 {
				if _, err := j.ProcessInput(side, recs[side][e], nil); err != nil {
					b.Fatal(err)
				}
			}
			o, err := j.Advance(int64(e*1_000_000 + 999_999))
			if err != nil {
				b.Fatal(err)
			}
			if o != nil {
				out += int(o.NumRows())
				o.Release()
			}
		}
	}
	b.ReportMetric(float64(out)/float64(b.N), "pairs/op")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N*epochs*(auctions+bids))/cpu.Seconds(), "rows/cpu-s")
	}
}

// TestJoinKeyArenaCompacts: a join whose keys come and go moves its held
// keys' bytes to a fresh arena several times while it holds other keys (a
// sliding window of two epochs; keys recur in the next epoch), and every
// window's pairs stay exactly those of its rows (computed here: the
// reference join is quadratic in the rows held, too slow for megabytes of
// keys).
func TestJoinKeyArenaCompacts(t *testing.T) {
	spec := windowSpec(InnerJoin, Sliding, 20*us, 10*us, 0)
	c := newJCluster(t, spec, 1, memory.DefaultAllocator)
	defer c.release()
	rng := rand.New(rand.NewPCG(7, 7))
	emitted := 0
	var prev [2][]jev
	for e := range 16 {
		// 1 kB keys, 300 an epoch, drawn from a set shared with the next
		// epoch: some pair, most do not; rows point into keys.
		keys := make([]string, 300)
		for i := range keys {
			keys[i] = fmt.Sprintf("key-%01000d", (e/2)*10_000+rng.IntN(4*len(keys)))
		}
		var rows [2][]jev
		for side := range 2 {
			rows[side] = make([]jev, 200)
			for i := range rows[side] {
				rows[side][i] = jev{ts: int64(e*10 + rng.IntN(10)), user: &keys[rng.IntN(len(keys))], v: int64(e*1000 + i), w: "w"}
			}
			if late := c.process(side, rows[side]); len(late) != 0 {
				t.Fatalf("epoch %d: %d late rows", e, len(late))
			}
		}
		// advance(10e+10) closes the window [10e-10, 10e+10): this epoch's
		// rows and the previous one's.
		var want []string
		for _, l := range append(prev[0], rows[0]...) {
			for _, r := range append(prev[1], rows[1]...) {
				if *l.user == *r.user {
					want = append(want, fmt.Sprintf("%s %s %d %d", jevLine(0, l), jevLine(1, r), e*10-10, e*10+10))
				}
			}
		}
		got, _ := c.advance(int64(e*10 + 10))
		slices.Sort(got)
		slices.Sort(want)
		eqLines(t, fmt.Sprintf("epoch %d advance", e), got, want)
		emitted += len(got)
		prev = rows
	}
	if emitted < 300 {
		t.Fatalf("only %d output rows: the scenario is too thin", emitted)
	}
	if n := c.insts[0].karena.compactions; n < 2 {
		t.Fatalf("the key arena compacted %d times, want at least 2 (the test no longer exercises compaction)", n)
	}
}
