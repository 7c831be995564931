package operators

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/keygroup"
)

// stageCluster runs p instances of a Stateful stage over testSchema rows as
// the engine does: every instance sees every batch through its selection of
// the batch's rows (by key group), and state moves between generations as
// a chain of a full base and deltas, restored by key-group range (rescale).
type stageCluster struct {
	t     *testing.T
	mk    func() Stateful
	insts []Stateful
	rng   *rand.Rand

	base   []arrow.RecordBatch
	deltas [][2][]arrow.RecordBatch
	wm     int64
}

func newStageCluster(t *testing.T, rng *rand.Rand, p int, mk func() Stateful) *stageCluster {
	c := &stageCluster{t: t, mk: mk, rng: rng, wm: math.MinInt64}
	for range p {
		c.insts = append(c.insts, mk())
	}
	t.Cleanup(c.releasePersisted)
	return c
}

func (c *stageCluster) releasePersisted() {
	release(c.base...)
	for _, d := range c.deltas {
		release(d[0]...)
		release(d[1]...)
	}
	c.base, c.deltas = nil, nil
}

// process feeds rows, split into 1..3 batches at random points, and returns
// the late rows (sorted lines).
func (c *stageCluster) process(rows []ev) []string {
	c.t.Helper()
	var late []string
	for len(rows) > 0 {
		n := len(rows)
		if c.rng != nil && n > 1 && c.rng.IntN(3) == 0 {
			n = 1 + c.rng.IntN(n-1)
		}
		late = append(late, c.processBatch(rows[:n])...)
		rows = rows[n:]
	}
	slices.Sort(late)
	return late
}

func (c *stageCluster) processBatch(rows []ev) []string {
	c.t.Helper()
	rec := batch(c.t, rows...)
	defer rec.Release()
	var sels [][]int32
	if len(c.insts) == 1 {
		sels = [][]int32{nil} // the whole batch, no selection
	} else {
		var err error
		if sels, err = PartitionIndices(rec, c.insts[0].KeyColumns(0), len(c.insts), 128); err != nil {
			c.t.Fatal(err)
		}
	}
	var late []string
	for i, sel := range sels {
		l, err := c.insts[i].ProcessInput(0, rec, sel)
		if err != nil {
			c.t.Fatal(err)
		}
		if l != nil && !l.Schema().Equal(c.insts[i].InputSchemaOf(0)) {
			c.t.Fatalf("late rows schema %s", l.Schema())
		}
		late = append(late, rowsOf(l)...)
		release(l)
	}
	return late
}

// advance returns each instance's output in its order, instances in
// subtask order.
func (c *stageCluster) advance(wm int64) []string {
	c.t.Helper()
	var out []string
	for _, s := range c.insts {
		o, err := s.Advance(wm)
		if err != nil {
			c.t.Fatal(err)
		}
		if o != nil && !o.Schema().Equal(s.OutputSchema()) {
			c.t.Fatalf("output schema %s, want %s", o.Schema(), s.OutputSchema())
		}
		out = append(out, rowsOf(o)...)
		release(o)
	}
	return out
}

func (c *stageCluster) len() int {
	n := 0
	for _, s := range c.insts {
		n += s.Len()
	}
	return n
}

// snapshotLines is the state of all instances as lines, in key-group order.
func (c *stageCluster) snapshotLines(insts []Stateful) []string {
	c.t.Helper()
	var out []string
	for _, s := range insts {
		snap, err := s.Snapshot()
		if err != nil {
			c.t.Fatal(err)
		}
		for _, r := range snap {
			if !r.Schema().Equal(s.StateSchema()) {
				c.t.Fatalf("snapshot schema %s, want %s", r.Schema(), s.StateSchema())
			}
			if kgs := r.Column(0).(*array.Int32).Int32Values(); !slices.IsSorted(kgs) {
				c.t.Fatalf("snapshot not sorted by key_group: %v", kgs)
			}
		}
		out = append(out, batchLines(snap)...)
		release(snap...)
	}
	return out
}

func batchLines(bs []arrow.RecordBatch) []string {
	var out []string
	for _, b := range bs {
		out = append(out, rowsOf(b)...)
	}
	return out
}

// checkpoint persists every instance's state: a full base (full, or when
// there is none yet) or a delta appended to the chain. It checks Dirty
// against the delta, the batches' schemas and order, and that the chain
// rebuilt into one instance and into three key-group ranges gives exactly
// the live state.
func (c *stageCluster) checkpoint(full bool) {
	c.t.Helper()
	if full || c.base == nil {
		c.releasePersisted()
		for _, s := range c.insts {
			snap, err := s.Snapshot()
			if err != nil {
				c.t.Fatal(err)
			}
			if ch, rm := s.Dirty(); ch != 0 || rm != 0 {
				c.t.Fatalf("Dirty() = %d, %d right after Snapshot", ch, rm)
			}
			c.base = append(c.base, snap...)
		}
		c.wm = c.insts[0].Watermark()
		if n := countRows(c.base); n != c.len() {
			c.t.Fatalf("Len() = %d, snapshot has %d rows", c.len(), n)
		}
		return
	}
	var d [2][]arrow.RecordBatch
	for _, s := range c.insts {
		changed, removed := s.Dirty()
		ups, tombs, err := s.SnapshotDelta()
		if err != nil {
			c.t.Fatal(err)
		}
		if countRows(ups) != changed || countRows(tombs) != removed {
			c.t.Fatalf("Dirty() = %d, %d; delta has %d upserts, %d tombstones", changed, removed, countRows(ups), countRows(tombs))
		}
		for _, u := range ups {
			if !u.Schema().Equal(s.StateSchema()) {
				c.t.Fatalf("upsert schema %s, want %s", u.Schema(), s.StateSchema())
			}
			if kgs := u.Column(0).(*array.Int32).Int32Values(); !slices.IsSorted(kgs) {
				c.t.Fatalf("upserts not sorted by key_group: %v", kgs)
			}
		}
		for _, tb := range tombs {
			if !tb.Schema().Equal(s.TombstoneSchema()) {
				c.t.Fatalf("tombstone schema %s, want %s", tb.Schema(), s.TombstoneSchema())
			}
			if kgs := tb.Column(0).(*array.Int32).Int32Values(); !slices.IsSorted(kgs) {
				c.t.Fatalf("tombstones not sorted by key_group: %v", kgs)
			}
		}
		d[0] = append(d[0], ups...)
		d[1] = append(d[1], tombs...)
	}
	c.deltas = append(c.deltas, d)
	c.wm = c.insts[0].Watermark()
	want := c.snapshotLines(c.insts) // right after a delta: changes nothing
	eqLines(c.t, fmt.Sprintf("base + %d deltas", len(c.deltas)), c.snapshotLines([]Stateful{c.rebuild(0, 128)}), want)
	cut := []int{0, 1 + c.rng.IntN(60), 61 + c.rng.IntN(60), 128}
	var split []Stateful
	for r := range 3 {
		split = append(split, c.rebuild(cut[r], cut[r+1]))
	}
	eqLines(c.t, fmt.Sprintf("base + %d deltas split at %v", len(c.deltas), cut), c.snapshotLines(split), want)
}

// rebuild restores key groups [lo, hi) of the persisted chain.
func (c *stageCluster) rebuild(lo, hi int) Stateful {
	c.t.Helper()
	s := c.mk()
	if rr, ok := s.(RestoreReserver); ok {
		// Reservations are hints: too few, too many or none restore alike.
		var n int
		for _, b := range c.base {
			n += int(b.NumRows())
		}
		rr.ReserveRestore([]int{n / 3, 2*n + 5, 0, -1}[lo%4])
	}
	if err := s.Restore(c.base, lo, hi, c.wm); err != nil {
		c.t.Fatal(err)
	}
	for i, d := range c.deltas {
		if err := s.ApplyDelta(d[0], d[1], lo, hi); err != nil {
			c.t.Fatalf("delta %d: %v", i, err)
		}
	}
	return s
}

// rescale persists the state (a base or a delta) and rebuilds it into p
// new instances, as a new generation would.
func (c *stageCluster) rescale(p int, full bool) {
	c.t.Helper()
	c.checkpoint(full)
	had := c.len()
	c.insts = nil
	for s := range p {
		lo, hi := keygroup.Range(s, p, 128)
		c.insts = append(c.insts, c.rebuild(lo, hi))
	}
	if got := c.len(); got != had {
		c.t.Fatalf("rescale to %d: %d state rows, had %d", p, got, had)
	}
}

// evLine formats a row like rowsOf formats testSchema rows.
func evLine(e ev) string {
	return fmt.Sprintf("%d %s %s %s %s %s", e.ts, keyStr(e.user), numStr(e.n), fstr(e.f), keyStr(e.s), i32str(e.i32))
}

// randomRows makes 1..30 rows around clock with few users (and null) so
// that keys repeat; exact binary floats and some NaNs.
func randomRows(rng *rand.Rand, clock int64) []ev {
	users := []*string{sp("ann"), sp("bob"), sp("cy"), sp("dee"), nil}
	strs := []*string{sp("x"), sp("y"), sp("z"), nil}
	var rows []ev
	for range 1 + rng.IntN(30) {
		e := ev{ts: clock + int64(rng.IntN(40)) - 30, user: users[rng.IntN(len(users))], s: strs[rng.IntN(len(strs))]}
		if rng.IntN(5) > 0 {
			e.n = ip(int64(rng.IntN(8)))
		}
		if rng.IntN(3) > 0 {
			e.f = fp(float64(rng.IntN(50)) / 4)
			if rng.IntN(10) == 0 {
				e.f = fp(math.NaN())
			}
		}
		if rng.IntN(3) > 0 {
			e.i32 = i32p(int32(rng.IntN(3)))
		}
		rows = append(rows, e)
	}
	return rows
}

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return seed
}

// refModel is a naive model of a stage fed the same stream.
type refModel interface {
	process(rows []ev) []string // late rows, sorted
	advance(wm int64) []string  // output, sorted
}

// runAgainstReference drives a cluster of random parallelism and a
// reference through a random stream of batches (random splits), watermark
// advances, checkpoints (bases and deltas) and rescales, comparing late
// rows and outputs at every step and after a final drain.
func runAgainstReference(t *testing.T, rng *rand.Rand, steps int, mk func() Stateful, ref refModel) {
	t.Helper()
	c := newStageCluster(t, rng, 1+rng.IntN(4), mk)
	clock := int64(-50)
	wm := int64(math.MinInt64)
	rescales, checkpoints := 0, 0
	for i := range steps {
		switch op := rng.IntN(20); {
		case op < 11:
			rows := randomRows(rng, clock)
			clock += int64(rng.IntN(6))
			eqLines(t, fmt.Sprintf("step %d late rows", i), c.process(rows), ref.process(rows))
		case op < 16:
			w := clock - int64(rng.IntN(25))
			got := c.advance(w)
			slices.Sort(got)
			eqLines(t, fmt.Sprintf("step %d advance(%d)", i, w), got, ref.advance(w))
			wm = max(wm, w)
		case op < 18:
			checkpoints++
			c.checkpoint(rng.IntN(5) == 0)
		default:
			rescales++
			c.rescale(1+rng.IntN(5), rng.IntN(4) == 0)
		}
	}
	got := c.advance(math.MaxInt64)
	slices.Sort(got)
	eqLines(t, "drain", got, ref.advance(math.MaxInt64))
	if n := c.len(); n != 0 {
		t.Fatalf("after drain: %d state rows", n)
	}
	if rescales < 3 || checkpoints < 3 {
		t.Fatalf("only %d rescales and %d checkpoints", rescales, checkpoints)
	}
}

// arenaCompactions sums the compactions of the key arenas (arena) of c's
// instances.
func arenaCompactions(c *stageCluster, arena func(Stateful) *keyArena) int {
	n := 0
	for _, s := range c.insts {
		n += arena(s).compactions
	}
	return n
}

// drainArenaScenario drains c against ref and fails unless the scenario
// emitted at least 1000 rows (emitted before the drain) and its key arenas
// compacted at least twice.
func drainArenaScenario(t *testing.T, c *stageCluster, ref refModel, emitted, compactions int) {
	t.Helper()
	got := c.advance(math.MaxInt64)
	slices.Sort(got)
	eqLines(t, "drain", got, ref.advance(math.MaxInt64))
	if emitted += len(got); emitted < 1000 {
		t.Fatalf("only %d output rows: the scenario is too thin", emitted)
	}
	if compactions < 2 {
		t.Fatalf("the key arenas compacted %d times, want at least 2 (the test no longer exercises compaction)", compactions)
	}
}

// runPlan runs a fixed stream on a cluster that starts with one instance
// and, before the batches in plan, rescales to plan[b] instances (negative:
// through base + deltas rather than a new full base); outputs are sorted
// per advance.
func runPlan(t *testing.T, mk func() Stateful, batches [][]ev, wms []int64, plan map[int]int) []string {
	t.Helper()
	c := newStageCluster(t, rand.New(rand.NewPCG(1, 2)), 1, mk)
	var out []string
	for b, rows := range batches {
		if p, ok := plan[b]; ok {
			c.rescale(max(p, -p), p > 0)
		}
		out = append(out, c.process(rows)...)
		out = append(out, "--")
		o := c.advance(wms[b])
		slices.Sort(o)
		out = append(out, o...)
		if b == 0 {
			c.checkpoint(true) // a base, so that later rescales through deltas carry changes
		}
	}
	o := c.advance(math.MaxInt64)
	slices.Sort(o)
	return append(out, o...)
}

// checkReleases runs a stage with a checked allocator through Process
// (whole batch and selection, with late rows), Advance, Snapshot, Restore,
// SnapshotDelta and ApplyDelta, and checks that no byte stays allocated.
func checkReleases(t *testing.T, mk func() Stateful, rows []ev, wmMid int64) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := mk()
	s.SetAllocator(mem)
	feed := func(s Stateful, rows []ev, sel []int32) int {
		rec := batchFrom(t, mem, rows...)
		late, err := s.ProcessInput(0, rec, sel)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if late != nil {
			n = int(late.NumRows())
			late.Release()
		}
		return n
	}
	half := len(rows) / 2
	feed(s, rows[:half], nil)
	base, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Advance(wmMid)
	if err != nil {
		t.Fatal(err)
	}
	if out == nil || out.NumRows() == 0 {
		t.Error("nothing emitted at the middle watermark; the test means to cover it")
	}
	release(out)
	var sel []int32
	for i := range int32(len(rows) - half) {
		if i%3 != 0 {
			sel = append(sel, i)
		}
	}
	if feed(s, rows[half:], sel) == 0 {
		t.Error("no late rows; the test means to cover them")
	}
	ups, tombs, err := s.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) == 0 || len(tombs) == 0 {
		t.Errorf("delta of %d upsert and %d tombstone batches; the test means to cover both", len(ups), len(tombs))
	}
	s2 := mk()
	s2.SetAllocator(mem)
	if err := s2.Restore(base, 0, 128, s.Watermark()); err != nil {
		t.Fatal(err)
	}
	if err := s2.ApplyDelta(ups, tombs, 0, 128); err != nil {
		t.Fatal(err)
	}
	release(base...)
	release(ups...)
	release(tombs...)
	for _, x := range []Stateful{s, s2} {
		out, err := x.Advance(math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		if out == nil || out.NumRows() == 0 {
			t.Error("nothing emitted at the end")
		}
		release(out)
	}
}

// errContains checks that err is non-nil and mentions every part.
func errContains(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not mention %q", what, err, p)
		}
	}
}

// benchStage feeds 10 one-minute batches of 100k rows (10k string keys, a
// page column, event times in order) to a fresh stage per pass, advancing
// to the start of each batch's minute and draining at the end.
func benchStage(b *testing.B, mk func(schema *arrow.Schema) Stateful) {
	benchStageKeys(b, 10_000, mk)
}

// benchStageKeys is benchStage with keys distinct keys.
func benchStageKeys(b *testing.B, keys int, mk func(schema *arrow.Schema) Stateful) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "event_time", Type: eventTimeType},
		{Name: "user_id", Type: arrow.BinaryTypes.String},
		{Name: "page", Type: arrow.BinaryTypes.String},
		{Name: "bytes", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	const rowsPerBatch, minutes = 100_000, 10
	rng := rand.New(rand.NewPCG(1, 2))
	var batches []arrow.RecordBatch
	for m := range minutes {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := range rowsPerBatch {
			rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(m)*60e6 + int64(i)*600))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprint("user-", rng.IntN(keys)))
			rb.Field(2).(*array.StringBuilder).Append(fmt.Sprint("/page/", rng.IntN(100)))
			rb.Field(3).(*array.Int64Builder).Append(int64(rng.IntN(10_000)))
		}
		batches = append(batches, rb.NewRecordBatch())
		rb.Release()
	}
	defer release(batches...)
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		s := mk(schema)
		for m, rec := range batches {
			late, err := s.ProcessInput(0, rec, nil)
			if err != nil {
				b.Fatal(err)
			}
			release(late)
			out, err := s.Advance(int64(m) * 60e6)
			if err != nil {
				b.Fatal(err)
			}
			release(out)
		}
		out, err := s.Advance(math.MaxInt64)
		if err != nil {
			b.Fatal(err)
		}
		release(out)
	}
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N*minutes*rowsPerBatch)/cpu.Seconds(), "rows/cpu-s")
	}
}

// BenchmarkDedupProcess: keep first per user within 5 minutes.
func BenchmarkDedupProcess(b *testing.B) {
	benchStage(b, func(schema *arrow.Schema) Stateful {
		d, err := NewDedup(DedupSpec{ID: "bench", Keys: []string{"user_id"}, EventTime: "event_time", Keep: KeepFirst, Within: 5 * time.Minute}, schema, 128)
		if err != nil {
			b.Fatal(err)
		}
		return d
	})
}

// BenchmarkDedupManyKeys: keep last per user within an hour, a million
// users (most rows a key of their own; Nexmark q18's last bid per bidder
// and auction).
func BenchmarkDedupManyKeys(b *testing.B) {
	benchStageKeys(b, 1_000_000, func(schema *arrow.Schema) Stateful {
		d, err := NewDedup(DedupSpec{ID: "bench", Keys: []string{"user_id"}, EventTime: "event_time", Keep: KeepLast, Within: time.Hour}, schema, 128)
		if err != nil {
			b.Fatal(err)
		}
		return d
	})
}

// BenchmarkTopNProcess: the 3 largest rows by bytes per page and minute.
func BenchmarkTopNProcess(b *testing.B) {
	benchStage(b, func(schema *arrow.Schema) Stateful {
		t, err := NewTopN(TopNSpec{ID: "bench", N: 3, Keys: []string{"page"}, OrderBy: []OrderSpec{{Column: "bytes", Desc: true}},
			EventTime: "event_time", Size: time.Minute}, schema, 128)
		if err != nil {
			b.Fatal(err)
		}
		return t
	})
}

// TestHeldRowsModel adds, overwrites and releases rows of string, binary
// and int64 columns at random (enough churn for the string arenas to be
// compacted many times) and checks every live slot, the order comparisons
// and appendRows against a plain model.
func TestHeldRowsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 7))
	types := []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeString, arrow.PrimitiveTypes.Int64}
	h, err := newHeldRows(types, []string{"s", "b", "ls", "i"})
	if err != nil {
		t.Fatal(err)
	}
	// One batch of candidate rows, some null.
	const n = 500
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	want := make([][4]any, n)
	bs := make([]array.Builder, len(types))
	for c, dt := range types {
		bs[c] = array.NewBuilder(mem, dt)
	}
	for i := range n {
		s := strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(3000))
		if i%50 == 0 {
			s = "" // valid and empty
		}
		for c := range types {
			if rng.IntN(8) == 0 {
				bs[c].AppendNull()
				continue
			}
			switch b := bs[c].(type) {
			case *array.StringBuilder:
				b.Append(s)
				want[i][c] = s
			case *array.LargeStringBuilder:
				b.Append(s + "L")
				want[i][c] = s + "L"
			case *array.BinaryBuilder:
				b.Append([]byte(s + "B"))
				want[i][c] = s + "B"
			case *array.Int64Builder:
				b.Append(int64(i))
				want[i][c] = int64(i)
			}
		}
	}
	cols := make([]arrow.Array, len(types))
	for c, b := range bs {
		cols[c] = b.NewArray()
		b.Release()
	}
	defer func() {
		for _, a := range cols {
			a.Release()
		}
	}()
	live := map[int32]int{} // slot -> row of the batch it holds
	added := 0              // bytes ever put in column 0
	check := func() {
		t.Helper()
		var slots []int32
		for s := range live {
			slots = append(slots, s)
		}
		slices.Sort(slots)
		slots = append(slots, -1)
		out := make([]array.Builder, len(types))
		for c, dt := range types {
			out[c] = array.NewBuilder(mem, dt)
			defer out[c].Release()
		}
		h.appendRows(out, slots)
		for c := range types {
			arr := out[c].NewArray()
			for j, s := range slots {
				var got any
				if !arr.IsNull(j) {
					switch a := arr.(type) {
					case *array.String:
						got = a.Value(j)
					case *array.LargeString:
						got = a.Value(j)
					case *array.Binary:
						got = string(a.Value(j))
					case *array.Int64:
						got = a.Value(j)
					}
				}
				var w any
				if s >= 0 {
					w = want[live[s]][c]
				}
				if got != w {
					arr.Release()
					t.Fatalf("slot %d column %d: got %v, want %v", s, c, got, w)
				}
				if s >= 0 && w != nil {
					for _, other := range []int{0, rng.IntN(n)} {
						if cols[c].IsNull(other) {
							continue
						}
						ws, _ := w.(string)
						os, _ := want[other][c].(string)
						if c < 3 && sign(h.cols[c].compare(s, cols[c], other)) != sign(strings.Compare(ws, os)) {
							t.Fatalf("slot %d column %d: compare with row %d wrong", s, c, other)
						}
					}
				}
			}
			arr.Release()
		}
	}
	for step := range 20000 {
		switch r := rng.IntN(10); {
		case r < 4 || len(live) == 0:
			i := rng.IntN(n)
			live[h.add(cols, i)] = i
			w0, _ := want[i][0].(string)
			added += len(w0)
		case r < 7:
			for s := range live {
				i := rng.IntN(n)
				h.put(s, cols, i)
				live[s] = i
				w0, _ := want[i][0].(string)
				added += len(w0)
				break
			}
		case r < 9 || len(live) < 2*releaseSorted:
			for s := range live {
				h.release(s)
				delete(live, s)
				break
			}
		default:
			// A batch of releases at once (an Advance's emitted rows):
			// sorted from releaseSorted slots on.
			var batch []int32
			for s := range live {
				if len(batch) == 2*releaseSorted {
					break
				}
				batch = append(batch, s)
			}
			if rng.IntN(2) == 0 {
				batch = batch[:min(len(batch), releaseSorted/2)]
			}
			h.releaseAll(batch)
			for _, s := range batch {
				delete(live, s)
				for c, hc := range h.cols {
					if !hc.isNull(s) {
						t.Fatalf("step %d: released slot %d still holds column %d", step, s, c)
					}
				}
			}
		}
		if step%2000 == 0 {
			check()
		}
	}
	check()
	if h.live != len(live) {
		t.Fatalf("live %d, want %d", h.live, len(live))
	}
	sc := h.cols[0].(*bytesCol[string, *array.String])
	liveBytes := 0
	for _, i := range live {
		w0, _ := want[i][0].(string)
		liveBytes += len(w0)
	}
	held := 0
	for _, c := range sc.chunks {
		held += len(c)
	}
	if sc.live != liveBytes || held-sc.live != sc.dead {
		t.Fatalf("arena: %d live, %d dead, %d held; want %d live", sc.live, sc.dead, held, liveBytes)
	}
	if held >= added || held > 2*liveBytes+heldSlack+heldChunk {
		t.Fatalf("arena holds %d bytes after %d bytes added (%d live): dead bytes not reclaimed", held, added, liveBytes)
	}
}

func sign(x int) int { return max(-1, min(1, x)) }

// TestSortIDs checks sortIDs against a plain sort on keys that share long
// prefixes, differ only after 8 bytes, are shorter than 8 bytes or end in
// zero bytes, with ties on the lead and the key.
func TestSortIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 9))
	// Below and above radixSortIDs: the comparison sort and the radix one.
	for _, n := range []int{2000, 3 * radixSortIDs} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { testSortIDs(t, rng, n) })
	}
}

func testSortIDs(t *testing.T, rng *rand.Rand, n int) {
	parts := []string{"", "\x00", "a", "abcdefgh", "abcdefghi", "abcdefgh\x00", "zz", "\xff", "abcdefghabcdefgh", "abcdefghabcdefgh\x00"}
	lead := make([]int64, n)
	key := make([]string, n)
	sub := make([]int64, n)
	ids := make([]int32, n)
	for i := range n {
		lead[i] = int64(rng.IntN(3)) - 1
		if rng.IntN(4) == 0 {
			lead[i] = []int64{math.MinInt64, math.MaxInt64, -1 << 40, 1 << 40}[rng.IntN(4)]
		}
		key[i] = parts[rng.IntN(len(parts))] + parts[rng.IntN(len(parts))]
		if rng.IntN(4) == 0 { // random bytes: every radix byte varies
			b := make([]byte, rng.IntN(20))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			key[i] = string(b)
		}
		sub[i] = int64(rng.IntN(4))
		ids[i] = int32(i)
	}
	want := slices.Clone(ids)
	slices.SortStableFunc(want, func(a, b int32) int {
		return cmp.Or(cmp.Compare(lead[a], lead[b]), strings.Compare(key[a], key[b]), cmp.Compare(sub[a], sub[b]))
	})
	got := slices.Clone(ids)
	sortIDs(got, func(id int32) int64 { return lead[id] }, func(id int32) string { return key[id] },
		func(a, b int32) int { return cmp.Compare(sub[a], sub[b]) })
	for i := range got {
		a, b := got[i], want[i]
		if lead[a] != lead[b] || key[a] != key[b] || sub[a] != sub[b] {
			t.Fatalf("position %d: got (%d %q %d), want (%d %q %d)", i, lead[a], key[a], sub[a], lead[b], key[b], sub[b])
		}
	}
}

// TestDueQueue pushes random due times and checks popDue returns exactly
// the entries due by each watermark and leaves a valid heap.
func TestDueQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 11))
	var q dueQueue
	var model []dueItem
	for step := range 200 {
		for range rng.IntN(50) {
			it := dueItem{due: int64(step*10 + rng.IntN(100)), id: int32(rng.IntN(1000))}
			q.push(it.due, it.id)
			model = append(model, it)
		}
		wm := int64(step*10 + rng.IntN(20))
		var due []int32
		var kept []dueItem
		for _, it := range model {
			if it.due <= wm {
				due = append(due, it.id)
			} else {
				kept = append(kept, it)
			}
		}
		model = kept
		n := len(q)
		got := q.popDue(wm, nil)
		if len(got) != len(due) || len(q) != n-len(due) {
			t.Fatalf("step %d: popped %d entries, want %d", step, len(got), len(due))
		}
		slices.Sort(due)
		if slices.Sort(got); !slices.Equal(got, due) {
			t.Fatalf("step %d: popped ids %v, want %v", step, got, due)
		}
		for i := 1; i < len(q); i++ {
			if q[(i-1)/2].due > q[i].due {
				t.Fatalf("step %d: heap order broken at %d", step, i)
			}
		}
	}
}

// TestRadixSortsAgainstReferences runs the reference tests of the join,
// dedup and top_n with the radix sorts on from two elements, so that the
// outputs and state orders they sort (sortIDs, the join's sortOutput) are
// checked through the radix path too.
func TestRadixSortsAgainstReferences(t *testing.T) {
	defer func(n int) { radixSortIDs = n }(radixSortIDs)
	radixSortIDs = 2
	t.Run("join", TestJoinRandomizedAgainstReference)
	t.Run("join-deterministic", TestJoinDeterministic)
	t.Run("dedup", TestDedupAgainstReference)
	t.Run("topn", TestTopNAgainstReference)
}
