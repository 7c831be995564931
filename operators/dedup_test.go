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
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func newDedupT(t testing.TB, spec DedupSpec) *Dedup {
	t.Helper()
	if spec.Keys == nil {
		spec.Keys = []string{"user"}
	}
	if spec.EventTime == "" {
		spec.EventTime = "ts"
	}
	d, err := NewDedup(spec, testSchema, 128)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runStage is runSteps for any Stateful over testSchema rows.
func runStage(t *testing.T, s Stateful, steps []step) {
	t.Helper()
	for i, st := range steps {
		if st.advance {
			out, err := s.Advance(st.wm)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if out != nil && !out.Schema().Equal(s.OutputSchema()) {
				t.Fatalf("step %d: output schema %s, want %s", i, out.Schema(), s.OutputSchema())
			}
			eqLines(t, fmt.Sprintf("step %d: advance(%d) output", i, st.wm), rowsOf(out), st.out)
			release(out)
			continue
		}
		rec := batch(t, st.rows...)
		late, err := s.ProcessInput(0, rec, nil)
		rec.Release()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		eqLines(t, fmt.Sprintf("step %d: late rows", i), rowsOf(late), st.late)
		release(late)
	}
}

// TestDedupKeepFirstAndLast: scopes [t_first, t_first+within) by event
// time, whatever the arrival order; keep first emits when the cutoff passes
// the first row, keep last when it passes the scope's end; rows outside an
// open scope and behind the cutoff are late.
func TestDedupKeepFirstAndLast(t *testing.T) {
	a := func(ts, n int64) ev { return row(ts, "a", n) }
	first := newDedupT(t, DedupSpec{Keep: KeepFirst, Within: 10 * us})
	runStage(t, first, []step{
		proc(a(5, 1), a(12, 2), row(4, "b", 3)),
		proc(a(3, 4)), // earlier than a(5), arriving later: it is the first row
		adv(4, `3 "a" 4 null null null`),
		proc(a(6, 5)),                                           // in the open scope [3,13): a duplicate
		adv(20, `4 "b" 3 null null null`),                       // a(5), a(12) were duplicates too
		procLate([]string{`13 "a" 6 null null null`}, a(13, 6)), // behind the cutoff, no open scope
		proc(a(25, 7)),
		adv(26, `25 "a" 7 null null null`),
		adv(math.MaxInt64), // closes the scope [25,35): nothing more to emit
	})
	last := newDedupT(t, DedupSpec{Keep: KeepLast, Within: 10 * us})
	runStage(t, last, []step{
		proc(a(5, 1), a(12, 2), row(4, "b", 3)),
		proc(a(3, 4)),
		adv(4),
		proc(a(6, 5)),
		adv(20, `12 "a" 2 null null null`, `4 "b" 3 null null null`), // by scope start: a's is 3, b's 4
		procLate([]string{`13 "a" 6 null null null`}, a(13, 6)),
		proc(a(25, 7), a(24, 8)), // one scope [24,34): its last row is a(25)
		adv(33),
		proc(a(30, 9)),
		adv(34, `30 "a" 9 null null null`),
	})
	if first.Len() != 0 || last.Len() != 0 {
		t.Fatalf("state left: %d, %d rows", first.Len(), last.Len())
	}
}

// TestDedupTiesBoundsAndNulls: rows of equal event time break ties by
// arrival (first: earliest, last: latest), a row at exactly t_first+within
// opens a new scope, null is a key, and allowed lateness moves the cutoff.
func TestDedupTiesBoundsAndNulls(t *testing.T) {
	for _, tc := range []struct {
		keep      DedupKeep
		out, out2 []string
	}{
		// keep first: cutoff 14 passed both first rows (the null key sorts first).
		{KeepFirst, []string{`5 null 10 null null null`, `5 "a" 1 null null null`}, []string{`15 "a" 4 null null null`}},
		{KeepLast, nil, []string{`8 null 11 null null null`, `14 "a" 5 null null null`, `15 "a" 4 null null null`}},
	} {
		t.Run(tc.keep.String(), func(t *testing.T) {
			d := newDedupT(t, DedupSpec{Keep: tc.keep, Within: 10 * us, AllowedLateness: 5 * us})
			runStage(t, d, []step{
				proc(row(5, "a", 1), row(5, "a", 2), ev{ts: 5, n: ip(10)}),
				proc(row(5, "a", 3), row(15, "a", 4), ev{ts: 8, n: ip(11)}),
				adv(19, tc.out...),    // cutoff 14: scope [5,15) open
				proc(row(14, "a", 5)), // behind the cutoff but in the open scope
				adv(40, tc.out2...),   // [5,15) then [15,25): 15 is not in [5,15)
				procLate([]string{`30 "a" 6 null null null`}, row(30, "a", 6)), // cutoff 35
			})
		})
	}
}

// TestDedupCompositeKeyAndCanonicalFloats: keys of several columns, nulls
// in any of them, and a float key column output in canonical form.
func TestDedupCompositeKey(t *testing.T) {
	d := newDedupT(t, DedupSpec{Keys: []string{"user", "i32", "f"}, Keep: KeepFirst, Within: 100 * us})
	negZero := math.Copysign(0, -1)
	runStage(t, d, []step{
		proc(ev{ts: 1, user: sp("a"), i32: i32p(1), f: fp(negZero), n: ip(1)},
			ev{ts: 2, user: sp("a"), i32: i32p(1), f: fp(0), n: ip(2)}, // -0 and 0 are one key
			ev{ts: 3, user: sp("a"), n: ip(3)},
			ev{ts: 4, user: sp("a"), n: ip(4)},
			ev{ts: 5, i32: i32p(1), n: ip(5)}),
		adv(10, `1 "a" 1 0 null 1`, `3 "a" 3 null null null`, `5 null 5 null null 1`),
	})
}

// TestDedupSameAtAnyBatchingParallelismAndRescale: a fixed stream gives the
// same output uninterrupted, split at random into batches, over 2 -> 5 -> 3
// instances (full bases and base + deltas) and after round trips.
func TestDedupSameAtAnyBatchingParallelismAndRescale(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var batches [][]ev
	var wms []int64
	for b := range 12 {
		batches = append(batches, randomRows(rng, int64(b*10)))
		wms = append(wms, int64(b*10-10))
	}
	for _, keep := range []DedupKeep{KeepFirst, KeepLast} {
		t.Run(keep.String(), func(t *testing.T) {
			mk := func() Stateful {
				return newDedupT(t, DedupSpec{Keys: []string{"user", "i32"}, Keep: keep, Within: 15 * us, AllowedLateness: 3 * us})
			}
			want := runPlan(t, mk, batches, wms, nil)
			if n := strings.Count(strings.Join(want, "\n"), "\n"); n < 40 {
				t.Fatalf("scenario too small: %d lines", n)
			}
			eqLines(t, "round trip", runPlan(t, mk, batches, wms, map[int]int{3: 1, 6: -1}), want)
			eqLines(t, "2 -> 5 -> 3", runPlan(t, mk, batches, wms, map[int]int{2: 2, 5: 5, 8: 3}), want)
			eqLines(t, "2 -> 5 -> 3 through deltas", runPlan(t, mk, batches, wms, map[int]int{2: -2, 5: -5, 8: -3}), want)
		})
	}
}

// refDedup is a naive model of Dedup: it keeps every accepted row and forms
// the scopes anew at every call.
type refDedup struct {
	keep             DedupKeep
	within, lateness int64
	wm, seq          int64
	keyOf            func(ev) string
	rows             map[string][]refDRow
	emitted          map[string]map[int64]bool
}

type refDRow struct {
	t, seq int64
	line   string
}

func newRefDedup(keep DedupKeep, within, lateness int64, keyOf func(ev) string) *refDedup {
	return &refDedup{keep: keep, within: within, lateness: lateness, wm: math.MinInt64, keyOf: keyOf,
		rows: map[string][]refDRow{}, emitted: map[string]map[int64]bool{}}
}

func (r *refDedup) cutoff() int64 { return clampSub(r.wm, r.lateness) }

// scopes forms the key's scopes greedily over its rows by (event time, arrival).
func (r *refDedup) scopes(key string) [][]refDRow {
	rows := slices.Clone(r.rows[key])
	slices.SortFunc(rows, func(a, b refDRow) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.seq, b.seq)) })
	var out [][]refDRow
	for _, x := range rows {
		if n := len(out); n > 0 && x.t < out[n-1][0].t+r.within {
			out[n-1] = append(out[n-1], x)
			continue
		}
		out = append(out, []refDRow{x})
	}
	return out
}

func (r *refDedup) process(rows []ev) []string {
	var late []string
	for _, e := range rows {
		x := refDRow{t: e.ts, seq: r.seq, line: evLine(e)}
		r.seq++
		key := r.keyOf(e)
		if c := r.cutoff(); x.t < c {
			open := false
			for _, sc := range r.scopes(key) {
				if s := sc[0].t; s <= x.t && x.t < s+r.within && s+r.within > c {
					open = true
				}
			}
			if !open {
				late = append(late, x.line)
				continue
			}
		}
		r.rows[key] = append(r.rows[key], x)
	}
	slices.Sort(late)
	return late
}

func (r *refDedup) advance(wm int64) []string {
	if wm <= r.wm {
		return nil
	}
	r.wm = wm
	c := r.cutoff()
	var out []string
	for key := range r.rows {
		if r.emitted[key] == nil {
			r.emitted[key] = map[int64]bool{}
		}
		for _, sc := range r.scopes(key) {
			s := sc[0].t
			if r.emitted[key][s] {
				continue
			}
			switch {
			case r.keep == KeepFirst && s < c:
				out = append(out, sc[0].line)
			case r.keep == KeepLast && s+r.within <= c:
				out = append(out, sc[len(sc)-1].line)
			default:
				continue
			}
			r.emitted[key][s] = true
		}
	}
	slices.Sort(out)
	return out
}

// TestDedupAgainstReference: random streams (out of order, late rows, null
// keys, ties) over random parallelism, batching, checkpoints and rescales
// give exactly the reference's late rows and output.
func TestDedupAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 3))
	steps := 300
	if testing.Short() {
		steps = 100
	}
	for _, tc := range []struct {
		name string
		spec DedupSpec
		key  func(ev) string
	}{
		{"first", DedupSpec{Keep: KeepFirst, Within: 10 * us}, func(e ev) string { return keyStr(e.user) }},
		{"last-lateness", DedupSpec{Keep: KeepLast, Within: 7 * us, AllowedLateness: 4 * us}, func(e ev) string { return keyStr(e.user) }},
		{"first-composite", DedupSpec{Keys: []string{"user", "s"}, Keep: KeepFirst, Within: 25 * us, AllowedLateness: 2 * us},
			func(e ev) string { return keyStr(e.user) + keyStr(e.s) }},
		{"last-composite", DedupSpec{Keys: []string{"i32", "user"}, Keep: KeepLast, Within: 3 * us},
			func(e ev) string { return i32str(e.i32) + keyStr(e.user) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() Stateful { return newDedupT(t, tc.spec) }
			ref := newRefDedup(tc.spec.Keep, tc.spec.Within.Microseconds(), tc.spec.AllowedLateness.Microseconds(), tc.key)
			runAgainstReference(t, rng, steps, mk, ref)
		})
	}
}

// TestDedupDeltaHoldsOnlyChanges: after a snapshot of many keys, a row of
// one key gives a delta of that key only, and an Advance that closes every
// scope gives one tombstone per key.
func TestDedupDeltaHoldsOnlyChanges(t *testing.T) {
	d := newDedupT(t, DedupSpec{Keep: KeepLast, Within: 10 * us})
	var rows []ev
	for i := range 1000 {
		rows = append(rows, row(int64(i%7), fmt.Sprint("u", i%300), int64(i)))
	}
	runStage(t, d, []step{proc(rows...), adv(5)})
	snap, err := d.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	release(snap...)
	delta := func() (ups, tombs []string) {
		u, tb, err := d.SnapshotDelta()
		if err != nil {
			t.Fatal(err)
		}
		defer release(u...)
		defer release(tb...)
		return batchLines(u), batchLines(tb)
	}
	if u, tb := delta(); len(u)+len(tb) != 0 {
		t.Fatalf("delta without changes: %v %v", u, tb)
	}
	runStage(t, d, []step{proc(row(8, "u7", -1))})
	u, tb := delta()
	for _, l := range u {
		if !strings.Contains(l, `"u7"`) {
			t.Errorf("upsert of an untouched key: %s", l)
		}
	}
	// u7's rows are at 0, 6, 5, 4: after adv(5) its open scope [0,10) and
	// the rows at 5 and 6 waiting for the cutoff; the new row joins the scope.
	if len(u) != 3 || len(tb) != 0 {
		t.Fatalf("one row: upserts %v, tombstones %v", u, tb)
	}
	keys := d.keyIdx.n
	out, err := d.Advance(math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	if out.NumRows() != int64(keys) {
		t.Errorf("drain emitted %d rows for %d keys", out.NumRows(), keys)
	}
	release(out)
	if u, tb := delta(); len(u) != 0 || len(tb) != keys {
		t.Fatalf("after the drain: %d upserts, %d tombstones; want 0, %d", len(u), len(tb), keys)
	}
}

// TestDedupRestoreRejects: another max parallelism, duplicated state,
// deltas out of order and foreign schemas are errors.
func TestDedupRestoreRejects(t *testing.T) {
	spec := DedupSpec{Keep: KeepLast, Within: 10 * us}
	d := newDedupT(t, spec)
	var rows []ev
	for i := range 10 {
		rows = append(rows, row(int64(i), fmt.Sprint("user-", i), 1))
	}
	runStage(t, d, []step{proc(rows...), adv(5)})
	snap, err := d.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	other, err := NewDedup(DedupSpec{Keys: []string{"user"}, EventTime: "ts", Keep: KeepLast, Within: 10 * us}, testSchema, 64)
	if err != nil {
		t.Fatal(err)
	}
	errContains(t, "restore with another max parallelism", other.Restore(snap, 0, 64, 0), "key group")
	errContains(t, "restore twice", newDedupT(t, spec).Restore(append(slices.Clone(snap), snap...), 0, 128, 0), "second")
	errContains(t, "range", newDedupT(t, spec).Restore(snap, 0, 129, 0), "key-group range")
	win := newWin(t, WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "c", "count()")})
	errContains(t, "window state", win.Restore(snap, 0, 128, 0), "does not match state schema")
	runStage(t, d, []step{adv(30, `0 "user-0" 1 null null null`, `1 "user-1" 1 null null null`, `2 "user-2" 1 null null null`,
		`3 "user-3" 1 null null null`, `4 "user-4" 1 null null null`, `5 "user-5" 1 null null null`, `6 "user-6" 1 null null null`,
		`7 "user-7" 1 null null null`, `8 "user-8" 1 null null null`, `9 "user-9" 1 null null null`)})
	ups, tombs, err := d.SnapshotDelta()
	if err != nil {
		t.Fatal(err)
	}
	defer release(ups...)
	defer release(tombs...)
	if countRows(tombs) != 10 {
		t.Fatalf("%d tombstones, want 10", countRows(tombs))
	}
	f := newDedupT(t, spec)
	if err := f.Restore(snap, 0, 128, 5); err != nil {
		t.Fatal(err)
	}
	if err := f.ApplyDelta(ups, tombs, 0, 128); err != nil {
		t.Fatal(err)
	}
	if f.Len() != 0 {
		t.Fatalf("after the delta: %d rows", f.Len())
	}
	errContains(t, "delta twice", f.ApplyDelta(ups, tombs, 0, 128), "not held")
	errContains(t, "tombstones as upserts", newDedupT(t, spec).ApplyDelta(tombs, nil, 0, 128), "does not match state schema")
	errContains(t, "upserts as tombstones", newDedupT(t, spec).ApplyDelta(nil, snap, 0, 128), "does not match tombstone schema")
	if a, b := d.StateFingerprint(), newDedupT(t, DedupSpec{Keep: KeepFirst, Within: 10 * us}).StateFingerprint(); a == b {
		t.Error("keep first and keep last share a state fingerprint")
	}
	if a, b := d.StateFingerprint(), newDedupT(t, spec).StateFingerprint(); a != b {
		t.Errorf("fingerprint not stable: %s vs %s", a, b)
	}
}

// TestDedupReleasesArrowMemory: no byte stays allocated after every call
// that allocates.
func TestDedupReleasesArrowMemory(t *testing.T) {
	var rows []ev
	for i := range 200 {
		x, f := int64(i), float64(i)/3
		rows = append(rows, ev{ts: int64(i % 50), user: sp(fmt.Sprint("u", i/10)), n: &x, f: &f, s: sp(fmt.Sprint("s", i))})
	}
	for _, keep := range []DedupKeep{KeepFirst, KeepLast} {
		t.Run(keep.String(), func(t *testing.T) {
			checkReleases(t, func() Stateful {
				return newDedupT(t, DedupSpec{Keep: keep, Within: 5 * us})
			}, rows, 30)
		})
	}
}

// TestNewDedupErrors: the constructor names what is wrong.
func TestNewDedupErrors(t *testing.T) {
	ok := DedupSpec{ID: "d1", Keys: []string{"user"}, EventTime: "ts", Keep: KeepFirst, Within: time10us}
	reserved := arrow.NewSchema(append(slices.Clone(testSchema.Fields()), arrow.Field{Name: ColDedupSeq, Type: arrow.PrimitiveTypes.Int64}), nil)
	list := arrow.NewSchema(append(slices.Clone(testSchema.Fields()), arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)}), nil)
	for _, tc := range []struct {
		name   string
		edit   func(*DedupSpec)
		schema *arrow.Schema
		parts  []string
	}{
		{"missing key", func(s *DedupSpec) { s.Keys = []string{"usr"} }, nil, []string{"dedup d1", `key column "usr"`, "did you mean user"}},
		{"no keys", func(s *DedupSpec) { s.Keys = nil }, nil, []string{"no key columns"}},
		{"key twice", func(s *DedupSpec) { s.Keys = []string{"user", "user"} }, nil, []string{`"user" listed twice`}},
		{"float key ok, list key not", func(s *DedupSpec) { s.Keys = []string{"tags"} }, list, []string{`"tags"`, "unsupported type"}},
		{"list column held", func(s *DedupSpec) {}, list, []string{`"tags"`, "unsupported type", "supported:"}},
		{"missing time", func(s *DedupSpec) { s.EventTime = "tss" }, nil, []string{`event time column "tss"`, "did you mean ts"}},
		{"time type", func(s *DedupSpec) { s.EventTime = "n" }, nil, []string{`"n" has type int64`}},
		{"keep", func(s *DedupSpec) { s.Keep = 0 }, nil, []string{"keep", "first or last"}},
		{"within zero", func(s *DedupSpec) { s.Within = 0 }, nil, []string{"within", "positive"}},
		{"within fraction", func(s *DedupSpec) { s.Within = 1500 }, nil, []string{"within", "microseconds"}},
		{"lateness", func(s *DedupSpec) { s.AllowedLateness = -time10us }, nil, []string{"allowed lateness", "positive"}},
		{"reserved", func(s *DedupSpec) {}, reserved, []string{ColDedupSeq, "reserves"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := ok
			tc.edit(&spec)
			schema := tc.schema
			if schema == nil {
				schema = testSchema
			}
			_, err := NewDedup(spec, schema, 128)
			errContains(t, tc.name, err, tc.parts...)
		})
	}
	if _, err := NewDedup(ok, testSchema, 0); err == nil {
		t.Error("max parallelism 0 accepted")
	}
	if k, err := ParseDedupKeep("last"); err != nil || k != KeepLast {
		t.Errorf("ParseDedupKeep(last) = %v, %v", k, err)
	}
	_, err := ParseDedupKeep("latest")
	errContains(t, "ParseDedupKeep(latest)", err, "first or last")
	d := newDedupT(t, DedupSpec{Keep: KeepFirst, Within: 10 * us})
	nullTs := nullTimeBatch(t)
	defer nullTs.Release()
	_, err = d.ProcessInput(0, nullTs, nil)
	errContains(t, "null event time", err, `"ts"`, "nulls")
}

const time10us = 10 * us

// nullTimeBatch is a testSchema batch of one row whose event time is null.
func nullTimeBatch(t *testing.T) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for _, f := range b.Fields() {
		f.AppendNull()
	}
	return b.NewRecordBatch()
}

// TestDedupEventTimeAsKey: exact duplicates (same user and event time) with
// the event time a key column, through a snapshot round trip.
func TestDedupEventTimeAsKey(t *testing.T) {
	for _, keep := range []DedupKeep{KeepFirst, KeepLast} {
		t.Run(keep.String(), func(t *testing.T) {
			spec := DedupSpec{Keys: []string{"user", "ts"}, Keep: keep, Within: 100 * us}
			d := newDedupT(t, spec)
			var early []string
			if keep == KeepFirst {
				early = []string{`1 "a" 1 null null null`} // final once the cutoff passes 1
			}
			runStage(t, d, []step{proc(row(1, "a", 1), row(1, "a", 2), row(2, "a", 3)), adv(2, early...)})
			snap, err := d.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer release(snap...)
			f := newDedupT(t, spec)
			if err := f.Restore(snap, 0, 128, d.Watermark()); err != nil {
				t.Fatal(err)
			}
			want := map[DedupKeep][]string{
				KeepFirst: {`2 "a" 3 null null null`}, // a@1 n=4 joins a's open scope at 1
				KeepLast:  {`1 "a" 4 null null null`, `2 "a" 3 null null null`},
			}[keep]
			for _, x := range []*Dedup{d, f} {
				runStage(t, x, []step{proc(row(1, "a", 4)), adv(math.MaxInt64, want...)})
			}
		})
	}
}

// TestDedupKeyArenaCompacts: keys of 1 kB that come and go (scopes of
// 15 us, epochs 10 us apart, each key set shared by two epochs) make the
// key arena compact several times while keys are held and looked up again;
// late rows and output stay the reference's, also across a checkpoint
// taken after compactions and restored into two instances.
func TestDedupKeyArenaCompacts(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	spec := DedupSpec{Keep: KeepFirst, Within: 15 * us}
	mk := func() Stateful { return newDedupT(t, spec) }
	c := newStageCluster(t, rng, 1, mk)
	ref := newRefDedup(KeepFirst, 15, 0, func(e ev) string { return keyStr(e.user) })
	emitted, compactions := 0, 0
	count := func() int { return arenaCompactions(c, func(s Stateful) *keyArena { return &s.(*Dedup).karena }) }
	for e := range 50 {
		keys := make([]string, 300) // rows point into keys
		for i := range keys {
			keys[i] = fmt.Sprintf("key-%01000d", (e/2)*10_000+rng.IntN(len(keys)))
		}
		for part := range 2 {
			rows := make([]ev, 150)
			for i := range rows {
				rows[i] = ev{ts: int64(e*10 + part*2 + rng.IntN(2)), user: &keys[rng.IntN(len(keys))]}
			}
			eqLines(t, fmt.Sprintf("epoch %d part %d late rows", e, part), c.process(rows), ref.process(rows))
		}
		got := c.advance(int64(e*10 + 10))
		slices.Sort(got)
		eqLines(t, fmt.Sprintf("epoch %d advance", e), got, ref.advance(int64(e*10+10)))
		emitted += len(got)
		if e == 30 {
			compactions += count()
			c.rescale(2, true)
		}
	}
	drainArenaScenario(t, c, ref, emitted, compactions+count())
}
