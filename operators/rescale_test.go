package operators

import (
	"flag"
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

	"github.com/floe-dev/floe/keygroup"
)

var seedFlag = flag.Uint64("seed", 0, "seed for TestRandomizedAgainstReference (0: time-based)")

// cluster runs p Window instances like the engine does: partition each batch
// by key group, snapshot/restore to rescale.
type cluster struct {
	t     *testing.T
	spec  WindowSpec
	insts []*Window
	calls int // odd calls use PartitionIndices + ProcessSelected
}

func newCluster(t *testing.T, spec WindowSpec, p int) *cluster {
	c := &cluster{t: t, spec: spec}
	for range p {
		c.insts = append(c.insts, newWin(t, spec))
	}
	return c
}

func (c *cluster) process(rows []ev) []string {
	c.t.Helper()
	rec := batch(c.t, rows...)
	defer rec.Release()
	c.calls++
	if c.calls%2 == 1 {
		return c.processSelected(rec)
	}
	// Even calls copy each subtask's rows into a batch of its own and use
	// Process, so the whole-batch path is covered too.
	sels, err := PartitionIndices(rec, c.insts[0].keyCols, len(c.insts), 128)
	if err != nil {
		c.t.Fatal(err)
	}
	var late []string
	for i, sel := range sels {
		if len(sel) == 0 {
			continue
		}
		part, err := takeRows(rec, sel, memory.DefaultAllocator)
		if err != nil {
			c.t.Fatal(err)
		}
		l, err := c.insts[i].Process(part)
		part.Release()
		if err != nil {
			c.t.Fatal(err)
		}
		late = append(late, rowsOf(l)...)
		release(l)
	}
	slices.Sort(late)
	return late
}

// processSelected routes rows by selection vectors over the shared batch,
// as the engine does, instead of copying them into per-subtask batches.
func (c *cluster) processSelected(rec arrow.RecordBatch) []string {
	c.t.Helper()
	sels, err := PartitionIndices(rec, c.insts[0].keyCols, len(c.insts), 128)
	if err != nil {
		c.t.Fatal(err)
	}
	var late []string
	total := 0
	for i, sel := range sels {
		total += len(sel)
		l, err := c.insts[i].ProcessSelected(rec, sel)
		if len(sel) == 0 && l != nil {
			c.t.Fatalf("instance %d returned late rows for an empty selection", i)
		}
		if err != nil {
			c.t.Fatal(err)
		}
		late = append(late, rowsOf(l)...)
		release(l)
	}
	if total != int(rec.NumRows()) {
		c.t.Fatalf("selections cover %d of %d rows", total, rec.NumRows())
	}
	slices.Sort(late)
	return late
}

func (c *cluster) advance(wm int64) []string {
	c.t.Helper()
	var out []string
	for _, w := range c.insts {
		o, err := w.Advance(wm)
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, rowsOf(o)...)
		release(o)
	}
	slices.Sort(out)
	return out
}

// rescale snapshots every instance and restores the union into p new ones.
func (c *cluster) rescale(p int) {
	c.t.Helper()
	var all []arrow.RecordBatch
	wm := c.insts[0].Watermark()
	total := 0
	for _, w := range c.insts {
		snap, err := w.Snapshot()
		if err != nil {
			c.t.Fatal(err)
		}
		for _, s := range snap {
			if !s.Schema().Equal(w.StateSchema()) {
				c.t.Fatalf("snapshot schema %s, want %s", s.Schema(), w.StateSchema())
			}
			if kgs := s.Column(0).(*array.Int32).Int32Values(); !slices.IsSorted(kgs) {
				c.t.Fatalf("snapshot not sorted by key_group: %v", kgs)
			}
		}
		total += w.Len()
		all = append(all, snap...)
	}
	defer release(all...)
	c.insts = nil
	restored := 0
	for s := range p {
		w := newWin(c.t, c.spec)
		lo, hi := keygroup.Range(s, p, 128)
		if err := w.Restore(all, lo, hi, wm); err != nil {
			c.t.Fatal(err)
		}
		restored += w.Len()
		c.insts = append(c.insts, w)
	}
	if restored != total {
		c.t.Fatalf("rescale to %d: restored %d states, had %d", p, restored, total)
	}
}

// TestSnapshotRestoreRescale: continuing without restore, after a round trip,
// after splitting into 3 instances and after merging 3 back into 1 all emit
// the same output.
func TestSnapshotRestoreRescale(t *testing.T) {
	for _, kind := range []WindowKind{Tumbling, Sliding, Session} {
		t.Run(kind.String(), func(t *testing.T) {
			spec := WindowSpec{Kind: kind, Size: 20 * us, Slide: 5 * us, Gap: 6 * us, AllowedLateness: 3 * us, Aggregates: allAggs(t)}
			var batches [][]ev
			for b := range 6 {
				var rows []ev
				for i := range 40 {
					u := fmt.Sprintf("u%d", (i*7+b)%13)
					rows = append(rows, ev{ts: int64(b*15 + i%17), user: sp(u), n: ip(int64(i)), s: sp(strconv.Itoa(i % 5)), f: fp(float64(i)), i32: i32p(int32(b))})
				}
				batches = append(batches, rows)
			}
			run := func(plan map[int]int) []string {
				c := newCluster(t, spec, 1)
				var out []string
				for b, rows := range batches {
					if p, ok := plan[b]; ok {
						c.rescale(p)
					}
					out = append(out, c.process(rows)...)
					out = append(out, "--")
					out = append(out, c.advance(int64(b*15))...)
				}
				return append(out, c.advance(math.MaxInt64)...)
			}
			want := run(nil)
			if len(want) < 20 {
				t.Fatalf("scenario too small: %d lines", len(want))
			}
			eqLines(t, "round trip", run(map[int]int{2: 1}), want)
			eqLines(t, "split into 3, merge back", run(map[int]int{2: 3, 4: 1}), want)
			eqLines(t, "3 -> 7 -> 2", run(map[int]int{1: 3, 3: 7, 5: 2}), want)
		})
	}
}

func TestRestoreRejects(t *testing.T) {
	spec := WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "c", "count()")}
	w := newWin(t, spec)
	var rows []ev
	for i := range 10 {
		rows = append(rows, row(1, fmt.Sprint("user-", i), 1))
	}
	runSteps(t, w, []step{proc(rows...)})
	snap, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	spec64 := spec
	spec64.Keys, spec64.EventTime = []string{"user"}, "ts"
	other, err := NewWindow(spec64, testSchema, 64) // different K: key groups disagree
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Restore(snap, 0, 64, 0); err == nil || !strings.Contains(err.Error(), "key group") {
		t.Errorf("restore with another max parallelism: %v", err)
	}
	twice := newWin(t, spec)
	if err := twice.Restore(append(slices.Clone(snap), snap...), 0, 128, 0); err == nil {
		t.Error("restoring the same state twice succeeded")
	}
	// Same state schema, different window layout: the fingerprint tells them apart.
	sess := newWin(t, WindowSpec{Kind: Session, Gap: 10 * us, Aggregates: spec.Aggregates})
	if sess.StateFingerprint() == w.StateFingerprint() {
		t.Error("tumbling and session windows share a state fingerprint")
	}
	sum := newWin(t, WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "c", "sum(n)")})
	if err := sum.Restore(snap, 0, 128, 0); err == nil || !strings.Contains(err.Error(), "does not match state schema") {
		t.Errorf("restore into another state schema: %v", err)
	}
	if a, b := w.StateFingerprint(), newWin(t, spec).StateFingerprint(); a != b {
		t.Errorf("fingerprint not stable: %s vs %s", a, b)
	}
}

// ---- randomized test against a naive reference ----

type refRow struct {
	ts, seq int64
	e       ev
}

type refWin struct {
	key        *string
	start, end int64
	rows       []refRow
}

// reference is a naive model of Window: it keeps rows and aggregates at emission.
type reference struct {
	spec             WindowSpec
	size, slide, gap int64
	late, wm, seq    int64
	wins             []*refWin
}

func keyStr(k *string) string {
	if k == nil {
		return "null"
	}
	return strconv.Quote(*k)
}

func (r *reference) closed(end int64) bool { return end+r.late <= r.wm }

func (r *reference) find(key *string, start int64) *refWin {
	for _, w := range r.wins {
		if keyStr(w.key) == keyStr(key) && w.start == start {
			return w
		}
	}
	w := &refWin{key: key, start: start, end: start + r.size}
	r.wins = append(r.wins, w)
	return w
}

func (r *reference) process(rows []ev) []string {
	var late []string
	for _, e := range rows {
		rr := refRow{ts: e.ts, seq: r.seq, e: e}
		r.seq++
		lateRow := fmt.Sprintf("%d %s %s %s %s %s", e.ts, keyStr(e.user), numStr(e.n), fstr(e.f), keyStr(e.s), i32str(e.i32))
		switch r.spec.Kind {
		case Tumbling, Sliding:
			var open []int64
			for s := e.ts - floorMod(e.ts, r.slide); s > e.ts-r.size; s -= r.slide {
				if !r.closed(s + r.size) {
					open = append(open, s)
				}
			}
			if len(open) == 0 {
				late = append(late, lateRow)
			}
			for _, s := range open {
				w := r.find(e.user, s)
				w.rows = append(w.rows, rr)
			}
		case Session:
			if r.closed(e.ts + r.gap) {
				// Late unless it joins a session of its key that is open.
				joins := false
				for _, w := range r.wins {
					if keyStr(w.key) == keyStr(e.user) && w.start <= e.ts+r.gap && w.end >= e.ts {
						joins = true
					}
				}
				if !joins {
					late = append(late, lateRow)
					continue
				}
			}
			nw := &refWin{key: e.user, start: e.ts, end: e.ts + r.gap, rows: []refRow{rr}}
			var keep []*refWin
			for _, w := range r.wins {
				if keyStr(w.key) == keyStr(e.user) && w.start <= nw.end && w.end >= nw.start {
					nw.start, nw.end = min(nw.start, w.start), max(nw.end, w.end)
					nw.rows = append(nw.rows, w.rows...)
				} else {
					keep = append(keep, w)
				}
			}
			r.wins = append(keep, nw)
		}
	}
	slices.Sort(late)
	return late
}

func numStr(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}
func fstr(p *float64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}
func i32str(p *int32) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(int(*p))
}

func (r *reference) advance(wm int64) []string {
	if wm <= r.wm {
		return nil
	}
	r.wm = wm
	var out []string
	var keep []*refWin
	for _, w := range r.wins {
		if !r.closed(w.end) {
			keep = append(keep, w)
			continue
		}
		out = append(out, r.emit(w))
	}
	r.wins = keep
	slices.Sort(out)
	return out
}

// emit formats w like Window's output for allAggs.
func (r *reference) emit(w *refWin) string {
	var cn, sum, imx int64
	var mn *int64
	var mx, fi *string
	var la *int64
	var fiT, fiS, laT, laS int64
	var sf float64
	var nf int
	var hasI bool
	distinct := map[string]bool{}
	for _, x := range w.rows {
		if x.e.n != nil {
			v := *x.e.n
			cn++
			sum += v
			if mn == nil || v < *mn {
				mn = &v
			}
			if la == nil || x.ts > laT || (x.ts == laT && x.seq > laS) {
				la, laT, laS = &v, x.ts, x.seq
			}
		}
		if x.e.s != nil {
			s := *x.e.s
			distinct[s] = true
			if mx == nil || s > *mx {
				mx = &s
			}
			if fi == nil || x.ts < fiT || (x.ts == fiT && x.seq < fiS) {
				fi, fiT, fiS = &s, x.ts, x.seq
			}
		}
		if x.e.f != nil {
			sf += *x.e.f
			nf++
		}
		if x.e.i32 != nil && (!hasI || int64(*x.e.i32) > imx) {
			imx, hasI = int64(*x.e.i32), true
		}
	}
	avg, sumS, sfS, imxS := "null", "null", "null", "null"
	if cn > 0 {
		avg = strconv.FormatFloat(float64(sum)/float64(cn), 'g', -1, 64)
		sumS = strconv.FormatInt(sum, 10)
	}
	if nf > 0 {
		sfS = strconv.FormatFloat(sf, 'g', -1, 64)
	}
	if hasI {
		imxS = strconv.FormatInt(imx, 10)
	}
	optS := func(p *string) string { return keyStr(p) }
	return strings.Join([]string{keyStr(w.key), strconv.FormatInt(w.start, 10), strconv.FormatInt(w.end, 10),
		strconv.Itoa(len(w.rows)), strconv.FormatInt(cn, 10), sumS, numStr(mn), optS(mx), avg,
		strconv.Itoa(len(distinct)), optS(fi), numStr(la), sfS, imxS}, " ")
}

func TestRandomizedAgainstReference(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	steps := 400
	if testing.Short() {
		steps = 100
	}
	users := []*string{sp("ann"), sp("bob"), sp("cy"), sp("dee"), sp("eve"), sp("fay"), nil}
	strs := []*string{sp("x"), sp("y"), sp("z"), sp(""), nil}
	for _, spec := range []WindowSpec{
		{Kind: Tumbling, Size: 10 * us, AllowedLateness: 5 * us},
		{Kind: Sliding, Size: 20 * us, Slide: 5 * us, AllowedLateness: 3 * us},
		{Kind: Session, Gap: 7 * us, AllowedLateness: 4 * us},
	} {
		t.Run(spec.Kind.String(), func(t *testing.T) {
			spec.Aggregates = allAggs(t)
			ref := &reference{spec: spec, size: spec.Size.Microseconds(), slide: spec.Slide.Microseconds(),
				gap: spec.Gap.Microseconds(), late: spec.AllowedLateness.Microseconds(), wm: math.MinInt64}
			if spec.Kind == Tumbling {
				ref.slide = ref.size
			}
			c := newCluster(t, spec, 1+rng.IntN(7))
			clock := int64(-50)
			for i := range steps {
				switch op := rng.IntN(10); {
				case op < 6:
					var rows []ev
					for range 1 + rng.IntN(30) {
						e := ev{ts: clock + int64(rng.IntN(40)) - 30, user: users[rng.IntN(len(users))], s: strs[rng.IntN(len(strs))]}
						if rng.IntN(4) > 0 {
							e.n = ip(int64(rng.IntN(100) - 20))
						}
						if rng.IntN(3) > 0 {
							e.f = fp(float64(rng.IntN(50)) / 4) // exact in binary: sums are order independent
						}
						if rng.IntN(3) > 0 {
							e.i32 = i32p(int32(rng.IntN(1000) - 500))
						}
						rows = append(rows, e)
					}
					clock += int64(rng.IntN(6))
					eqLines(t, fmt.Sprintf("step %d late rows", i), c.process(rows), ref.process(rows))
				case op < 9:
					wm := clock - int64(rng.IntN(25))
					eqLines(t, fmt.Sprintf("step %d advance(%d)", i, wm), c.advance(wm), ref.advance(wm))
				default:
					c.rescale(1 + rng.IntN(7))
				}
			}
			eqLines(t, "drain", c.advance(math.MaxInt64), ref.advance(math.MaxInt64))
		})
	}
}

// TestRestoreKeepsArrivalOrder: rows arriving after a restore come after the
// restored ones for first/last ties, even in a fresh instance.
func TestRestoreKeepsArrivalOrder(t *testing.T) {
	spec := WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "fi", "first(n)", "la", "last(n)")}
	w := newWin(t, spec)
	runSteps(t, w, []step{proc(row(5, "b", 0), row(5, "b", 0), row(5, "a", 1))})
	snap, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	fresh := newWin(t, spec)
	if err := fresh.Restore(snap, 0, 128, w.Watermark()); err != nil {
		t.Fatal(err)
	}
	runSteps(t, fresh, []step{proc(row(5, "a", 2)), adv(10, `"a" 0 10 1 2`, `"b" 0 10 0 0`)})
}
