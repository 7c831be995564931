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
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// erow is one input row of the evolution tests: id identifies it (late rows
// come back by id), v is int32 before the change and int64 after it.
type erow struct {
	id, ts int64
	user   *string
	v      *int32
	n      *int64
	s      *string
}

func evolveSchema(v arrow.DataType) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: eventTimeType},
		{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: v, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

var (
	schemaV32 = evolveSchema(arrow.PrimitiveTypes.Int32)
	schemaV64 = evolveSchema(arrow.PrimitiveTypes.Int64)
)

func evolveBatch(t testing.TB, schema *arrow.Schema, rows []erow) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
		appendStr(b.Field(2).(*array.StringBuilder), r.user)
		switch vb := b.Field(3).(type) {
		case *array.Int32Builder:
			if r.v == nil {
				vb.AppendNull()
			} else {
				vb.Append(*r.v)
			}
		case *array.Int64Builder:
			if r.v == nil {
				vb.AppendNull()
			} else {
				vb.Append(int64(*r.v))
			}
		}
		if r.n == nil {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.Int64Builder).Append(*r.n)
		}
		appendStr(b.Field(5).(*array.StringBuilder), r.s)
	}
	return b.NewRecordBatch()
}

// outRow is one emitted window: its cells by column name and the step
// (batch index) after which it was emitted.
type outRow struct {
	step  int
	cells map[string]string
}

func collect(rec arrow.RecordBatch, step int) []outRow {
	if rec == nil {
		return nil
	}
	defer rec.Release()
	out := make([]outRow, rec.NumRows())
	for i := range out {
		out[i] = outRow{step: step, cells: map[string]string{}}
		for c, f := range rec.Schema().Fields() {
			out[i].cells[f.Name] = cell(rec.Column(c), i)
		}
	}
	return out
}

// evolveRun drives a window over batches[lo:hi] with the watermarks wms,
// collecting outputs and the ids of late rows.
type evolveRun struct {
	t      *testing.T
	w      *Window
	schema *arrow.Schema
	out    []outRow
	late   map[int64]bool
}

func (r *evolveRun) steps(batches [][]erow, wms []int64, lo, hi int) {
	r.t.Helper()
	for i := lo; i < hi; i++ {
		rec := evolveBatch(r.t, r.schema, batches[i])
		late, err := r.w.Process(rec)
		rec.Release()
		if err != nil {
			r.t.Fatal(err)
		}
		if late != nil {
			ids := late.Column(0).(*array.Int64)
			for j := 0; j < ids.Len(); j++ {
				r.late[ids.Value(j)] = true
			}
			late.Release()
		}
		em, err := r.w.Advance(wms[i])
		if err != nil {
			r.t.Fatal(err)
		}
		r.out = append(r.out, collect(em, i)...)
	}
}

func (r *evolveRun) drain(step int) {
	r.t.Helper()
	em, err := r.w.Advance(math.MaxInt64)
	if err != nil {
		r.t.Fatal(err)
	}
	r.out = append(r.out, collect(em, step)...)
}

// The specs of the property test. B renames total (and widens v), turns
// mean = avg(n) into mean_sum = sum(n), widens hi, fst and dv, removes
// dropme and adds the new* aggregates, in another order.
var (
	evolveAggsA = []string{"c", "count()", "total", "sum(v)", "hi", "max(v)", "fst", "first(v)", "dv", "count_distinct(v)",
		"dropme", "min(n)", "mean", "avg(n)", "lst", "last(s)", "cnt_s", "count(s)"}
	evolveAggsB = []string{"lst", "last(s)", "bytes_total", "sum(v)", "c", "count()", "newc", "count(v)", "hi", "max(v)",
		"fst", "first(v)", "dv", "count_distinct(v)", "mean_sum", "sum(n)", "newmax", "max(n)", "newfirst", "first(s)",
		"newlast", "last(v)", "newcd", "count_distinct(s)", "newsum", "sum(v)", "newavg", "avg(n)", "newmin", "min(s)", "cnt_s", "count(s)"}
	evolveRenamed = map[string]string{"bytes_total": "total", "mean_sum": "mean"}
	// A's aggregates whose output B keeps under another (or the same) name
	// with the same value.
	evolveSameOutput = map[string]string{"c": "c", "total": "bytes_total", "hi": "hi", "fst": "fst", "dv": "dv", "lst": "lst", "cnt_s": "cnt_s"}
	evolveAdded      = []string{"newc", "newmax", "newfirst", "newlast", "newcd", "newsum", "newavg", "newmin"}
)

func evolveSpecs(t testing.TB, shape WindowSpec) (a, b WindowSpec) {
	a, b = shape, shape
	a.ID, b.ID = "window-1", "window-1"
	a.Keys, b.Keys = []string{"user"}, []string{"user"}
	a.EventTime, b.EventTime = "ts", "ts"
	a.Aggregates = mustAggs(t, evolveAggsA...)
	b.Aggregates = mustAggs(t, evolveAggsB...)
	for i := range b.Aggregates {
		b.Aggregates[i].RenamedFrom = evolveRenamed[b.Aggregates[i].Name]
	}
	return a, b
}

func evolveStream(rng *rand.Rand, n int) []erow {
	users := []string{"ann", "bob", "cy", "dee", "eve"}
	vals := []string{"x", "y", "z", "w"}
	rows := make([]erow, n)
	base := int64(0)
	for i := range rows {
		base += int64(rng.IntN(4))
		r := erow{id: int64(i), ts: max(0, base-int64(rng.IntN(60)))}
		if rng.IntN(12) > 0 {
			r.user = sp(users[rng.IntN(len(users))])
		}
		if rng.IntN(6) > 0 {
			v := int32(rng.IntN(2001) - 1000)
			if rng.IntN(20) == 0 {
				v = int32(rng.IntN(2)*2-1) * math.MaxInt32
			}
			r.v = &v
		}
		if rng.IntN(6) > 0 {
			r.n = ip(int64(rng.IntN(100)))
		}
		if rng.IntN(5) > 0 {
			r.s = sp(vals[rng.IntN(len(vals))])
		}
		rows[i] = r
	}
	return rows
}

// TestEvolutionProperty: for random streams and each window kind, a window
// of spec A processes the first half of the batches (a base snapshot after a
// quarter, a delta after the half), its state is migrated to spec B (added,
// removed, renamed aggregates, a widened column, avg -> sum) and restored,
// and the migrated window processes the rest. Compared with a B window fed
// the whole stream: every output row of the second half is the same for the
// aggregates B keeps from A, the first half's outputs agree on the
// aggregates both have, late rows are the same, and every added aggregate
// equals an independent computation over the rows that reached the window
// after the change (its identity plus the new rows).
func TestEvolutionProperty(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (go test ./operators -run TestEvolutionProperty -seed %d replays it)", seed, seed)
	shapes := []WindowSpec{
		{Kind: Tumbling, Size: 50 * us, AllowedLateness: 20 * us},
		{Kind: Sliding, Size: 60 * us, Slide: 20 * us, AllowedLateness: 10 * us},
		{Kind: Session, Gap: 15 * us, AllowedLateness: 10 * us},
	}
	spanning := map[WindowKind]int{}
	for iter := range 12 {
		rng := rand.New(rand.NewPCG(seed, uint64(iter)))
		for _, shape := range shapes {
			t.Run(fmt.Sprintf("%d/%s", iter, shape.Kind), func(t *testing.T) {
				spanning[shape.Kind] += checkEvolution(t, rng, shape)
			})
		}
	}
	// The test means something only if windows were open across the change.
	for _, shape := range shapes {
		if spanning[shape.Kind] == 0 {
			t.Errorf("%s: no emitted window held rows from before and after the change", shape.Kind)
		}
	}
	t.Logf("windows open across the change: %v", spanning)
}

// checkEvolution runs one case and returns how many windows emitted after
// the change held rows from before it.
func checkEvolution(t *testing.T, rng *rand.Rand, shape WindowSpec) int {
	specA, specB := evolveSpecs(t, shape)
	rows := evolveStream(rng, 200+rng.IntN(400))
	var batches [][]erow
	for lo := 0; lo < len(rows); {
		hi := min(len(rows), lo+1+rng.IntN(40))
		batches = append(batches, rows[lo:hi])
		lo = hi
	}
	if len(batches) < 4 {
		batches = append(batches, nil, nil, nil)
	}
	delay := int64(rng.IntN(40))
	wms := make([]int64, len(batches))
	var maxTs, wm int64 = 0, math.MinInt64
	for i, b := range batches {
		for _, r := range b {
			maxTs = max(maxTs, r.ts)
		}
		wm = max(wm, maxTs-delay)
		wms[i] = wm
	}
	nb, half, quarter := len(batches), len(batches)/2, len(batches)/4

	wa, err := NewWindow(specA, schemaV32, 128)
	if err != nil {
		t.Fatal(err)
	}
	ra := &evolveRun{t: t, w: wa, schema: schemaV32, late: map[int64]bool{}}
	ra.steps(batches, wms, 0, quarter)
	base, err := wa.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(base...)
	ra.steps(batches, wms, quarter, half)
	ups, tombs, err := wa.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	defer release(ups...)
	defer release(tombs...)
	full, err := wa.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(full...)

	ev, err := PlanStateEvolution(specA, specB, schemaV32, schemaV64)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Compatible() || ev.SameLayout() {
		t.Fatalf("compatible=%v same=%v reasons=%q", ev.Compatible(), ev.SameLayout(), ev.Reasons())
	}
	migrate := func(recs []arrow.RecordBatch, tomb bool) []arrow.RecordBatch {
		var out []arrow.RecordBatch
		for _, rec := range recs {
			// Migrate slices too: columns with an offset.
			cut := rec.NumRows() / 3
			for _, part := range []arrow.RecordBatch{rec.NewSlice(0, cut), rec.NewSlice(cut, rec.NumRows())} {
				var m arrow.RecordBatch
				var err error
				if tomb {
					m, err = ev.MigrateTombstones(part)
				} else {
					m, err = ev.Migrate(part)
				}
				part.Release()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, m)
			}
		}
		return out
	}
	mbase, mups, mtombs, mfull := migrate(base, false), migrate(ups, false), migrate(tombs, true), migrate(full, false)
	defer release(mbase...)
	defer release(mups...)
	defer release(mtombs...)
	defer release(mfull...)

	wb, err := NewWindow(specB, schemaV64, 128)
	if err != nil {
		t.Fatal(err)
	}
	if err := wb.Restore(mbase, 0, 128, ev.RestoreWatermark(wa.Watermark())); err != nil {
		t.Fatal(err)
	}
	if err := wb.ApplyDelta(mups, mtombs, 0, 128); err != nil {
		t.Fatal(err)
	}
	// base + migrated delta == migrated full snapshot.
	got, err := wb.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var gotLines, wantLines []string
	for _, r := range got {
		gotLines = append(gotLines, rowsOf(r)...)
	}
	release(got...)
	for _, r := range mfull {
		wantLines = append(wantLines, rowsOf(r)...)
	}
	eqLines(t, "restored base+delta vs migrated full snapshot", gotLines, wantLines)

	rb := &evolveRun{t: t, w: wb, schema: schemaV64, late: map[int64]bool{}}
	rb.steps(batches, wms, half, nb)
	rb.drain(nb)

	wr, err := NewWindow(specB, schemaV64, 128)
	if err != nil {
		t.Fatal(err)
	}
	rr := &evolveRun{t: t, w: wr, schema: schemaV64, late: map[int64]bool{}}
	rr.steps(batches, wms, 0, nb)
	rr.drain(nb)

	var refA, refB []outRow
	for _, o := range rr.out {
		if o.step < half {
			refA = append(refA, o)
		} else {
			refB = append(refB, o)
		}
	}
	bounds := []string{"user", "window_start", "window_end"}
	// First half: A's outputs agree with the reference on what both compute.
	if len(ra.out) != len(refA) {
		t.Fatalf("first half: %d windows emitted, reference %d", len(ra.out), len(refA))
	}
	for i, o := range ra.out {
		for _, c := range bounds {
			if o.cells[c] != refA[i].cells[c] {
				t.Fatalf("first half row %d: %s = %s, reference %s", i, c, o.cells[c], refA[i].cells[c])
			}
		}
		for an, bn := range evolveSameOutput {
			if o.cells[an] != refA[i].cells[bn] {
				t.Fatalf("first half row %d (%s %s): A %s = %s, reference %s = %s", i, o.cells["user"], o.cells["window_start"], an, o.cells[an], bn, refA[i].cells[bn])
			}
		}
	}
	// Second half: every column but the added aggregates equals the
	// reference's.
	if len(rb.out) != len(refB) {
		t.Fatalf("second half: %d windows emitted, reference %d", len(rb.out), len(refB))
	}
	added := map[string]bool{}
	for _, n := range evolveAdded {
		added[n] = true
	}
	for i, o := range rb.out {
		if o.step != refB[i].step {
			t.Fatalf("second half row %d emitted after batch %d, reference after %d", i, o.step, refB[i].step)
		}
		for c, v := range o.cells {
			if !added[c] && v != refB[i].cells[c] {
				t.Fatalf("second half row %d (%s [%s,%s)): %s = %s, reference %s", i, o.cells["user"], o.cells["window_start"], o.cells["window_end"], c, v, refB[i].cells[c])
			}
		}
	}
	for id := range rr.late {
		if id >= batchStart(batches, half) && !rb.late[id] {
			t.Fatalf("row %d late in the reference, not after the change", id)
		}
	}
	for id := range rb.late {
		if !rr.late[id] {
			t.Fatalf("row %d late after the change, not in the reference", id)
		}
	}
	// Added aggregates: identity + the rows that reached the window after
	// the change.
	arrived := map[int64]int{}
	for i, b := range batches {
		for _, r := range b {
			arrived[r.id] = i
		}
	}
	// A row belongs to every output window of its key that holds its event
	// time and was emitted at or after its arrival; for sessions, only the
	// first such (a session emitted earlier may have covered the same time).
	members := make([][]erow, len(rb.out))
	bounds64 := make([][2]int64, len(rb.out))
	for i, o := range rb.out {
		bounds64[i][0], _ = strconv.ParseInt(o.cells["window_start"], 10, 64)
		bounds64[i][1], _ = strconv.ParseInt(o.cells["window_end"], 10, 64)
	}
	for _, r := range rows[batchStart(batches, half):] {
		if rb.late[r.id] {
			continue
		}
		best := -1
		for i, o := range rb.out {
			if keyStr(r.user) != o.cells["user"] || r.ts < bounds64[i][0] || r.ts >= bounds64[i][1] || o.step < arrived[r.id] {
				continue
			}
			if shape.Kind != Session {
				members[i] = append(members[i], r)
			} else if best < 0 || o.step < rb.out[best].step {
				best = i
			}
		}
		if best >= 0 {
			members[best] = append(members[best], r)
		}
	}
	spanning := 0
	for i, o := range rb.out {
		in := members[i]
		if o.cells["c"] != strconv.Itoa(len(in)) {
			spanning++
		}
		want := expectAdded(in)
		for _, c := range evolveAdded {
			if o.cells[c] != want[c] {
				t.Fatalf("second half row %d (%s [%d,%d)): added %s = %s, want %s over %d new rows", i, o.cells["user"], bounds64[i][0], bounds64[i][1], c, o.cells[c], want[c], len(in))
			}
		}
	}
	return spanning
}

func batchStart(batches [][]erow, i int) int64 {
	n := 0
	for _, b := range batches[:i] {
		n += len(b)
	}
	return int64(n)
}

// expectAdded computes the added aggregates of evolveAggsB over rows (in
// arrival order), formatted as cell formats them.
func expectAdded(rows []erow) map[string]string {
	out := map[string]string{}
	var cntV, sumV, sumN, cntN int64
	var maxN *int64
	var minS *string
	var first, last *erow
	distinct := map[string]bool{}
	for i := range rows {
		r := &rows[i]
		if r.v != nil {
			cntV++
			sumV += int64(*r.v)
			if last == nil || r.ts >= last.ts {
				last = r
			}
		}
		if r.n != nil {
			cntN++
			sumN += *r.n
			if maxN == nil || *r.n > *maxN {
				maxN = r.n
			}
		}
		if r.s != nil {
			distinct[*r.s] = true
			if minS == nil || *r.s < *minS {
				minS = r.s
			}
			if first == nil || r.ts < first.ts {
				first = r
			}
		}
	}
	out["newc"] = strconv.FormatInt(cntV, 10)
	out["newcd"] = strconv.Itoa(len(distinct))
	out["newmax"], out["newsum"], out["newavg"], out["newmin"], out["newfirst"], out["newlast"] = "null", "null", "null", "null", "null", "null"
	if maxN != nil {
		out["newmax"] = strconv.FormatInt(*maxN, 10)
	}
	if cntV > 0 {
		out["newsum"] = strconv.FormatInt(sumV, 10)
		out["newlast"] = strconv.FormatInt(int64(*last.v), 10)
	}
	if cntN > 0 {
		out["newavg"] = strconv.FormatFloat(float64(sumN)/float64(cntN), 'g', -1, 64)
	}
	if minS != nil {
		out["newmin"] = strconv.Quote(*minS)
	}
	if first != nil {
		out["newfirst"] = strconv.Quote(*first.s)
	}
	return out
}

// TestEvolutionChanges pins the change lines of the property test's specs.
func TestEvolutionChanges(t *testing.T) {
	a, b := evolveSpecs(t, WindowSpec{Kind: Tumbling, Size: time.Minute})
	b.AllowedLateness = 30 * time.Second
	ev, err := PlanStateEvolution(a, b, schemaV32, schemaV64)
	if err != nil {
		t.Fatal(err)
	}
	eqLines(t, "changes", ev.Changes(), []string{
		"allowed_lateness 0s -> 30s: state layout unchanged; windows emitted under the old lateness stay emitted (restore with RestoreWatermark)",
		"aggregate total renamed to bytes_total (renamed_from) and input column v widened int32 -> int64: its exact 128-bit sum is kept as it is",
		"aggregate newc added: existing windows start with count 0",
		"aggregate hi: input column v widened int32 -> int64: stored values cast to int64",
		"aggregate fst: input column v widened int32 -> int64: stored values cast to int64",
		"aggregate dv: input column v widened int32 -> int64: stored distinct values re-encoded as int64 (equal values stay equal)",
		"aggregate mean renamed to mean_sum (renamed_from) and avg(n) -> sum(n): both keep (sum, count), state kept; output type float64 -> int64",
		"aggregate newmax added: existing windows start with max null (no value yet)",
		"aggregate newfirst added: existing windows start with first null (no value yet)",
		"aggregate newlast added: existing windows start with last null (no value yet)",
		"aggregate newcd added: existing windows start with count_distinct empty",
		"aggregate newsum added: existing windows start with sum null (no value yet)",
		"aggregate newavg added: existing windows start with avg null (no value yet)",
		"aggregate newmin added: existing windows start with min null (no value yet)",
		"aggregate dropme removed: its state (dropme) is dropped",
	})
	if len(ev.Reasons()) != 0 || ev.Err() != nil {
		t.Fatalf("reasons %q err %v", ev.Reasons(), ev.Err())
	}
	kinds := map[ChangeKind]int{}
	for _, c := range ev.Details() {
		kinds[c.Kind]++
	}
	want := map[ChangeKind]int{ChangeWindow: 1, ChangeConverted: 5, ChangeAdded: 8, ChangeRemoved: 1, ChangeKept: 3}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
}

// TestEvolutionUnchanged: the same spec (or one differing only in its
// lateness, event-time column or a renamed_from that already happened) is
// the same layout and Migrate returns its input.
func TestEvolutionUnchanged(t *testing.T) {
	a, _ := evolveSpecs(t, WindowSpec{Kind: Session, Gap: time.Minute})
	b := a
	b.Aggregates = slices.Clone(a.Aggregates)
	b.Aggregates[1].RenamedFrom = "total_before" // the rename happened in an earlier run
	for _, c := range []struct {
		name    string
		old     WindowSpec
		new     WindowSpec
		changes int
	}{
		{"same", a, a, 0},
		{"sticky renamed_from", a, b, 0},
		{"lateness", a, func() WindowSpec { s := a; s.AllowedLateness = time.Hour; return s }(), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, err := PlanStateEvolution(c.old, c.new, schemaV32, schemaV32)
			if err != nil {
				t.Fatal(err)
			}
			if !ev.Compatible() || !ev.SameLayout() || len(ev.Changes()) != c.changes {
				t.Fatalf("compatible=%v same=%v changes=%q", ev.Compatible(), ev.SameLayout(), ev.Changes())
			}
			w, _ := NewWindow(c.old, schemaV32, 128)
			rec := evolveBatch(t, schemaV32, []erow{{id: 1, ts: 5, user: sp("a"), v: i32p(3)}})
			defer rec.Release()
			if _, err := w.Process(rec); err != nil {
				t.Fatal(err)
			}
			snap, _ := w.Snapshot()
			defer release(snap...)
			m, err := ev.Migrate(snap[0])
			if err != nil {
				t.Fatal(err)
			}
			defer m.Release()
			if m != snap[0] {
				t.Fatal("same layout: Migrate did not return its input")
			}
		})
	}
}

// TestEvolutionRefused: every incompatible change is refused with one line
// that names the field or aggregate, old and new, and a way out; Migrate
// refuses too.
func TestEvolutionRefused(t *testing.T) {
	base := func() WindowSpec {
		return WindowSpec{ID: "w", Keys: []string{"user"}, EventTime: "ts", Kind: Tumbling, Size: time.Minute,
			Aggregates: mustAggs(t, "c", "count()", "total", "sum(v)", "hi", "max(v)", "dv", "count_distinct(s)", "nd", "count_distinct(n)")}
	}
	withInput := func(col string, dt arrow.DataType) *arrow.Schema {
		fs := slices.Clone(schemaV32.Fields())
		for i := range fs {
			if fs[i].Name == col {
				fs[i].Type = dt
			}
		}
		return arrow.NewSchema(fs, nil)
	}
	type tc struct {
		name     string
		edit     func(*WindowSpec)
		newIn    *arrow.Schema
		oldIn    *arrow.Schema
		wantAll  []string // substrings of the one reason
		nReasons int
	}
	cases := []tc{
		{name: "kind", edit: func(s *WindowSpec) { s.Kind, s.Size, s.Gap = Session, 0, time.Minute }, wantAll: []string{"window kind changed tumbling -> session", "--reset-state", "new pipeline name"}},
		{name: "size", edit: func(s *WindowSpec) { s.Size = 2 * time.Minute }, wantAll: []string{"tumbling size changed 1m0s -> 2m0s", "cannot be re-cut"}},
		{name: "key added", edit: func(s *WindowSpec) { s.Keys = []string{"user", "s"} }, wantAll: []string{"key changed [user] -> [user, s]", "keep the old key"}},
		{name: "key renamed", edit: func(s *WindowSpec) { s.Keys = []string{"s"} }, wantAll: []string{"key changed [user] -> [s]"}},
		{name: "key removed", edit: func(s *WindowSpec) { s.Keys = nil }, wantAll: []string{"key changed [user] -> []"}},
		{name: "key widened", edit: func(s *WindowSpec) { s.Keys = []string{"v"} }, oldIn: schemaV32, newIn: schemaV64, wantAll: []string{"key changed [user] -> [v]"}},
		{name: "function", edit: func(s *WindowSpec) { s.Aggregates[2].Func = AggMin }, wantAll: []string{"aggregate hi: function changed max(v) -> min(v)", "give the new aggregate another name"}},
		{name: "count to count(col)", edit: func(s *WindowSpec) { s.Aggregates[0].Column = "s" }, wantAll: []string{"aggregate c: input changed count() -> count(s)", "accumulated over every row"}},
		{name: "column", edit: func(s *WindowSpec) { s.Aggregates[1].Column = "n" }, wantAll: []string{"aggregate total: input changed sum(v) -> sum(n)", "rename it back in a project"}},
		{name: "count_distinct over changed type", edit: func(s *WindowSpec) {}, newIn: withInput("s", arrow.PrimitiveTypes.Int64),
			wantAll: []string{"aggregate dv = count_distinct(s): input column s changed type string -> int64", "never equal int64 values"}},
		{name: "narrowed", edit: func(s *WindowSpec) {}, oldIn: schemaV64, newIn: schemaV32, nReasons: 2,
			wantAll: []string{"aggregate total = sum(v): input column v changed type int64 -> int32: a narrowed type", "keep v int64"}},
		{name: "int to float sum", edit: func(s *WindowSpec) {}, newIn: withInput("v", arrow.PrimitiveTypes.Float64), nReasons: 2,
			wantAll: []string{"aggregate total = sum(v): input column v changed type int32 -> float64: an exact integer sum cannot continue as a float64 sum"}},
		{name: "count_distinct int64 to int32", edit: func(s *WindowSpec) {}, newIn: withInput("n", arrow.PrimitiveTypes.Int32),
			wantAll: []string{"aggregate nd = count_distinct(n): input column n changed type int64 -> int32"}},
		{name: "renamed_from unknown", edit: func(s *WindowSpec) { s.Aggregates[1].Name, s.Aggregates[1].RenamedFrom = "sum_v", "totl" },
			wantAll: []string{"aggregate sum_v: renamed_from totl names no aggregate of the restored state (it has c, total, hi, dv, nd)", "remove renamed_from"}},
		{name: "old aggregate claimed twice", edit: func(s *WindowSpec) {
			s.Aggregates = append(s.Aggregates, AggSpec{Name: "total2", Func: AggSum, Column: "v", RenamedFrom: "total"})
		}, wantAll: []string{"aggregate total2: the old aggregate total would restore both total and total2", "reuse the old name in a later one"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, nw := base(), base()
			nw.Aggregates = slices.Clone(nw.Aggregates)
			c.edit(&nw)
			oldIn, newIn := schemaV32, schemaV32
			if c.oldIn != nil {
				oldIn = c.oldIn
			}
			if c.newIn != nil {
				newIn = c.newIn
			}
			ev, err := PlanStateEvolution(old, nw, oldIn, newIn)
			if err != nil {
				t.Fatal(err)
			}
			reasons := ev.Reasons()
			want := max(c.nReasons, 1)
			if ev.Compatible() || len(reasons) != want {
				t.Fatalf("compatible=%v, reasons (want %d):\n  %s", ev.Compatible(), want, strings.Join(reasons, "\n  "))
			}
			for _, s := range c.wantAll {
				if !strings.Contains(reasons[0], s) {
					t.Errorf("reason %q lacks %q", reasons[0], s)
				}
			}
			if strings.Contains(reasons[0], "\n") {
				t.Errorf("reason is not one line: %q", reasons[0])
			}
			if err := ev.Err(); err == nil || !strings.HasPrefix(err.Error(), "window w: state cannot be restored: ") {
				t.Errorf("Err() = %v", err)
			}
			w, _ := NewWindow(old, oldIn, 128)
			snap, _ := w.Snapshot()
			if rec, err := ev.Migrate(evolveBatch(t, oldIn, nil)); err == nil || rec != nil {
				t.Errorf("Migrate of a refused evolution: %v", err)
			}
			release(snap...)
		})
	}
}

// TestEvolutionKeyWidenedRefused: an int32 key widened to int64 keeps its
// name but not its encoding, so it is refused with that reason.
func TestEvolutionKeyWidenedRefused(t *testing.T) {
	spec := WindowSpec{ID: "w", Keys: []string{"v"}, EventTime: "ts", Kind: Tumbling, Size: time.Minute, Aggregates: mustAggs(t, "c", "count()")}
	ev, err := PlanStateEvolution(spec, spec, schemaV32, schemaV64)
	if err != nil {
		t.Fatal(err)
	}
	r := ev.Reasons()
	if len(r) != 1 || !strings.Contains(r[0], "key column v changed type int32 -> int64: a key's type is part of its encoding, which decides its key group") {
		t.Fatalf("reasons %q", r)
	}
}

// TestLatenessChangeEmitsOnce: raising allowed_lateness must not reopen a
// window the old lateness emitted. Restored at the recorded watermark a late
// row builds the window again and it is emitted twice; restored at
// RestoreWatermark the row is late and nothing is emitted twice. Lowering
// it emits the windows the new lateness closes at the next Advance.
func TestLatenessChangeEmitsOnce(t *testing.T) {
	old := WindowSpec{ID: "w", Keys: []string{"user"}, EventTime: "ts", Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "c", "count()")}
	raised := old
	raised.AllowedLateness = 50 * us
	run := func(t *testing.T, restoreAt func(*Evolution, int64) int64) (emitted []string, late int) {
		w, _ := NewWindow(old, schemaV32, 128)
		rec := evolveBatch(t, schemaV32, []erow{{id: 1, ts: 3, user: sp("a")}})
		if _, err := w.Process(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		em, _ := w.Advance(20) // [0,10) emitted: 10 + 0 <= 20
		emitted = append(emitted, rowsOf(em)...)
		release(em)
		snap, _ := w.Snapshot()
		defer release(snap...)
		ev, err := PlanStateEvolution(old, raised, schemaV32, schemaV32)
		if err != nil || !ev.SameLayout() {
			t.Fatalf("%v same=%v", err, ev.SameLayout())
		}
		w2, _ := NewWindow(raised, schemaV32, 128)
		if err := w2.Restore(snap, 0, 128, restoreAt(ev, w.Watermark())); err != nil {
			t.Fatal(err)
		}
		rec = evolveBatch(t, schemaV32, []erow{{id: 2, ts: 5, user: sp("a")}}) // [0,10): 10 + 50 > 20
		lr, err := w2.Process(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if lr != nil {
			late = int(lr.NumRows())
			lr.Release()
		}
		em, _ = w2.Advance(math.MaxInt64)
		emitted = append(emitted, rowsOf(em)...)
		release(em)
		return emitted, late
	}
	t.Run("recorded watermark", func(t *testing.T) {
		emitted, late := run(t, func(_ *Evolution, wm int64) int64 { return wm })
		if len(emitted) != 2 || late != 0 {
			t.Fatalf("expected the flaw this guards against (window [0,10) emitted twice); got %q, %d late", emitted, late)
		}
	})
	t.Run("RestoreWatermark", func(t *testing.T) {
		emitted, late := run(t, (*Evolution).RestoreWatermark)
		eqLines(t, "emitted", emitted, []string{`"a" 0 10 1`})
		if late != 1 {
			t.Fatalf("%d late rows, want 1", late)
		}
	})
	t.Run("lowered", func(t *testing.T) {
		ev, _ := PlanStateEvolution(raised, old, schemaV32, schemaV32)
		if got := ev.RestoreWatermark(100); got != 50 {
			t.Fatalf("RestoreWatermark(100) = %d, want 50", got)
		}
		if got := ev.RestoreWatermark(math.MinInt64); got != math.MinInt64 {
			t.Fatalf("RestoreWatermark(NoWatermark) = %d", got)
		}
		if got := ev.RestoreWatermark(math.MinInt64 + 10); got != math.MinInt64+1 {
			t.Fatalf("RestoreWatermark saturates to %d", got)
		}
	})
}

// TestMigrateReleasesArrowMemory: Migrate allocates its new columns from
// the Evolution's allocator, and releasing its result frees them.
func TestMigrateReleasesArrowMemory(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a, b := evolveSpecs(t, WindowSpec{Kind: Tumbling, Size: 10 * us})
	w, _ := NewWindow(a, schemaV32, 128)
	rec := evolveBatch(t, schemaV32, evolveStream(rand.New(rand.NewPCG(1, 2)), 300))
	defer rec.Release()
	if _, err := w.Process(rec); err != nil {
		t.Fatal(err)
	}
	snap, _ := w.Snapshot()
	defer release(snap...)
	ev, err := PlanStateEvolution(a, b, schemaV32, schemaV64)
	if err != nil {
		t.Fatal(err)
	}
	ev.SetAllocator(mem)
	for _, s := range snap {
		m, err := ev.Migrate(s)
		if err != nil {
			t.Fatal(err)
		}
		if mem.CurrentAlloc() == 0 {
			t.Fatal("Migrate allocated nothing from the Evolution's allocator")
		}
		m.Release()
	}
}

// TestLatenessChangeProperty: for random streams, each window kind and a
// raised or lowered allowed_lateness, a window restored at RestoreWatermark
// never emits a (key, window) that was emitted before the change, while
// restoring a raised lateness at the recorded watermark does for some
// stream (the flaw RestoreWatermark removes).
func TestLatenessChangeProperty(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d", seed)
	shapes := []WindowSpec{
		{Kind: Tumbling, Size: 50 * us},
		{Kind: Sliding, Size: 60 * us, Slide: 20 * us},
		{Kind: Session, Gap: 15 * us},
	}
	for _, shape := range shapes {
		flawSeen := false
		for iter := range 40 {
			rng := rand.New(rand.NewPCG(seed, uint64(iter)))
			a := shape
			a.ID, a.Keys, a.EventTime, a.Aggregates = "w", []string{"user"}, "ts", mustAggs(t, "c", "count()")
			a.AllowedLateness = time.Duration(rng.IntN(30)) * us
			b := a
			b.AllowedLateness = time.Duration(rng.IntN(30)) * us // odd iterations: raised or lowered
			if iter%2 == 0 {
				b.AllowedLateness = a.AllowedLateness + time.Duration(20+rng.IntN(60))*us // raised
			}
			rows := evolveStream(rng, 300)
			var batches [][]erow
			for lo := 0; lo < len(rows); lo += 20 {
				batches = append(batches, rows[lo:min(len(rows), lo+20)])
			}
			wms := make([]int64, len(batches))
			var maxTs int64
			for i, bt := range batches {
				for _, r := range bt {
					maxTs = max(maxTs, r.ts)
				}
				wms[i] = maxTs - 10
			}
			half := len(batches) / 2
			ev, err := PlanStateEvolution(a, b, schemaV32, schemaV32)
			if err != nil || !ev.Compatible() || !ev.SameLayout() {
				t.Fatalf("%v %q", err, ev.Reasons())
			}
			for _, shifted := range []bool{true, false} {
				wa, _ := NewWindow(a, schemaV32, 128)
				ra := &evolveRun{t: t, w: wa, schema: schemaV32, late: map[int64]bool{}}
				ra.steps(batches, wms, 0, half)
				snap, _ := wa.Snapshot()
				wb, _ := NewWindow(b, schemaV32, 128)
				at := wa.Watermark()
				if shifted {
					at = ev.RestoreWatermark(at)
				}
				if err := wb.Restore(snap, 0, 128, at); err != nil {
					t.Fatal(err)
				}
				release(snap...)
				rb := &evolveRun{t: t, w: wb, schema: schemaV32, late: map[int64]bool{}}
				rb.steps(batches, wms, half, len(batches))
				rb.drain(len(batches))
				seen := map[string]bool{}
				dup := ""
				for _, o := range append(ra.out, rb.out...) {
					k := o.cells["user"] + " " + o.cells["window_start"] + " " + o.cells["window_end"]
					if seen[k] && dup == "" {
						dup = k
					}
					seen[k] = true
				}
				switch {
				case shifted && dup != "":
					t.Fatalf("%s, lateness %v -> %v (iter %d): window %s emitted twice", shape.Kind, a.AllowedLateness, b.AllowedLateness, iter, dup)
				case !shifted && dup != "":
					flawSeen = true
				}
			}
		}
		if !flawSeen && shape.Kind != Session {
			t.Errorf("%s: restoring at the recorded watermark never emitted a window twice: the test lacks power", shape.Kind)
		}
	}
}
