package operators

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/keygroup"
)

// Top-N semantics.
//
// A top_n stage keeps, per group, the N best rows by its order columns and
// emits them, ranked 1..N, when the group's window closes. A group is
// (key columns, window_start, window_end): either the input carries
// window_start and window_end (the output of a window stage; Size zero), or
// the stage puts each row in the tumbling window [start, start+Size) of its
// event time (Size and EventTime set; the output gains window_start and
// window_end). No key columns means one group per window.
//
// Rows are ordered by the order columns in turn, each ascending or
// descending; rows equal on all of them rank by arrival, the earlier first.
// Nulls rank after every value (nulls first: before), ascending or
// descending. Floats order NaN above every number (as Spark and PostgreSQL
// do: first when descending) and -0 equal to +0.
//
// A group is emitted once, when window_end + allowed_lateness <= watermark,
// and removed; a row whose group was emitted already (window_end +
// allowed_lateness <= the watermark when it arrives) is late. A window
// stage with allowed lateness L emits a window up to L after its end, so
// after one either pass top_n a watermark lagged by L (as the engine does,
// by the delays of the stages before) or give it at least L. The output is the input row (float
// key columns canonical: -0 as 0, one NaN), window_start and window_end in
// the tumbling form, and rank (int64, 1 = best), sorted by window_start, key
// bytes, window_end, then rank. The result does not depend on batching,
// parallelism, restarts or rescales. State holds at most N rows per open
// group.

// OrderSpec is one order column of a top_n stage.
type OrderSpec struct {
	Column     string
	Desc       bool // descending (default ascending)
	NullsFirst bool // nulls before every value (default after)
}

// String returns the order as ParseOrderBy reads it.
func (o OrderSpec) String() string {
	s := o.Column
	if o.Desc {
		s += " desc"
	}
	if o.NullsFirst {
		s += " nulls first"
	}
	return s
}

// ParseOrderBy parses a comma-separated list of order columns, each
// "column [asc|desc] [nulls first|nulls last]", e.g. "score desc, ts".
func ParseOrderBy(s string) ([]OrderSpec, error) {
	var out []OrderSpec
	for _, part := range strings.Split(s, ",") {
		words := strings.Fields(part)
		if len(words) == 0 {
			return nil, fmt.Errorf("order by %q: empty column", s)
		}
		o := OrderSpec{Column: words[0]}
		rest := words[1:]
		if len(rest) > 0 {
			switch strings.ToLower(rest[0]) {
			case "asc":
				rest = rest[1:]
			case "desc":
				o.Desc, rest = true, rest[1:]
			}
		}
		if len(rest) == 2 && strings.EqualFold(rest[0], "nulls") {
			switch strings.ToLower(rest[1]) {
			case "first":
				o.NullsFirst, rest = true, nil
			case "last":
				rest = nil
			}
		}
		if len(rest) > 0 {
			return nil, fmt.Errorf("order by %q: %q: want column [asc|desc] [nulls first|nulls last]", s, strings.TrimSpace(part))
		}
		out = append(out, o)
	}
	return out, nil
}

// TopNSpec declares a top_n stage.
type TopNSpec struct {
	ID              string
	N               int         // rows kept per group, at least 1
	Keys            []string    // group key columns (may be empty: one group per window)
	OrderBy         []OrderSpec // at least one
	EventTime       string      // tumbling form: the timestamp[us] column bucketed by Size
	Size            time.Duration
	AllowedLateness time.Duration // a group is emitted when window_end + AllowedLateness <= watermark
	RankColumn      string        // default "rank"
}

// ColTopNSeq is the arrival-sequence column of the top_n state.
const ColTopNSeq = "topn.seq"

const topNStateVersion = "floe-topn-state/v1"

// topRow is one kept row of a group.
type topRow struct {
	slot int32
	seq  int64
}

// topGroup is one open group.
type topGroup struct {
	gkey       string // encoded key, then start and end (8 bytes each); in TopN.karena
	h          uint32 // groupIdx's hash of gkey
	kg         int32
	start, end int64
	rows       []topRow // best first
	live       bool
	listed     bool
	inBase     bool
}

func (g *topGroup) key() string { return g.gkey[:len(g.gkey)-16] }

type topTomb struct {
	gkey string
	kg   int32
}

// TopN is one instance (subtask) of a top_n stage; see "Top-N semantics".
// It is not safe for concurrent use.
type TopN struct {
	spec       TopNSpec
	id         string
	k          int
	n          int
	input      *arrow.Schema
	output     *arrow.Schema
	state      *arrow.Schema
	keyCols    []int
	keyKinds   []byte
	tumbling   bool
	tsCol      int   // tumbling: event time column
	wsCol      int   // window form: window_start column
	weCol      int   // window form: window_end column
	restCols   []int // held input columns: not keys, not window bounds
	orderCols  []int // input index of each order column
	orderHeld  []int // index in restCols of each order column
	size       int64
	lateness   int64
	wm         int64
	seq        int64
	mem        memory.Allocator
	rows       *heldRows
	groupIdx   keyIndex // ids of the live groups by gkey
	karena     keyArena // the groups' gkey bytes
	groups     paged[topGroup]
	freeGroups []int32
	nrows      int
	due        dueQueue
	dirty      []int32
	tombs      []topTomb

	enc   keyEncoder
	buf   []byte
	late  []int32
	rest  []arrow.Array
	order []arrow.Array
	ids   []int32
}

var _ Stateful = (*TopN)(nil)

// NewTopN validates spec against the input schema and returns an empty
// top_n instance for a pipeline with maxParallelism key groups.
func NewTopN(spec TopNSpec, input *arrow.Schema, maxParallelism int) (*TopN, error) {
	id := spec.ID
	if id == "" {
		id = "top_n"
	}
	op := "top_n " + id
	fail := func(format string, args ...any) (*TopN, error) {
		return nil, fmt.Errorf(op+": "+format, args...)
	}
	if input == nil {
		return fail("nil input schema")
	}
	if !keygroup.ValidCount(maxParallelism) {
		return fail("max parallelism %d out of range [1,%d]", maxParallelism, keygroup.Max)
	}
	if spec.N < 1 || spec.N > 1<<20 {
		return fail("n %d out of range [1,%d]", spec.N, 1<<20)
	}
	if len(spec.OrderBy) == 0 {
		return fail("no order columns: top_n needs at least one (e.g. order_by: \"score desc\")")
	}
	t := &TopN{spec: spec, id: id, k: maxParallelism, n: spec.N, input: input, wm: math.MinInt64,
		mem: memory.DefaultAllocator, groupIdx: newKeyIndex(0), tsCol: -1, wsCol: -1, weCol: -1}
	var err error
	if t.lateness, err = durMicros(op, "allowed lateness", spec.AllowedLateness, false); err != nil {
		return nil, err
	}
	rank := spec.RankColumn
	if rank == "" {
		rank = "rank"
	}
	if len(input.FieldIndices(rank)) > 0 {
		return fail("rank column %q already exists in the input; name it with rank_column", rank)
	}
	bounds := func(name string) (int, error) {
		c := uniqueColumn(input, name)
		if c < 0 {
			return -1, fmt.Errorf("%s: column %q not found (or ambiguous) in input schema%s; top_n reads the windows of a window stage, or give it event_time and size to bucket rows itself", op, name, columnHint(name, input))
		}
		if !isEventTimeField(input.Field(c)) {
			return -1, fmt.Errorf("%s: column %q has type %s; want timestamp[us, tz=UTC]", op, name, input.Field(c).Type)
		}
		return c, nil
	}
	switch {
	case spec.Size != 0 || spec.EventTime != "":
		t.tumbling = true
		if t.size, err = durMicros(op, "size", spec.Size, true); err != nil {
			return nil, err
		}
		if spec.EventTime == "" {
			return fail("size %v without an event time column", spec.Size)
		}
		if t.tsCol = uniqueColumn(input, spec.EventTime); t.tsCol < 0 {
			return fail("event time column %q not found (or ambiguous) in input schema%s", spec.EventTime, columnHint(spec.EventTime, input))
		}
		if !isEventTimeField(input.Field(t.tsCol)) {
			return fail("event time column %q has type %s; want timestamp[us, tz=UTC]", spec.EventTime, input.Field(t.tsCol).Type)
		}
		for _, name := range []string{ColWindowStart, ColWindowEnd} {
			if len(input.FieldIndices(name)) > 0 {
				return fail("input already has a %q column, and top_n with size adds one; drop size to rank the input's windows", name)
			}
		}
	default:
		if t.wsCol, err = bounds(ColWindowStart); err != nil {
			return nil, err
		}
		if t.weCol, err = bounds(ColWindowEnd); err != nil {
			return nil, err
		}
	}
	role := make([]string, input.NumFields())
	if !t.tumbling {
		role[t.wsCol], role[t.weCol] = "window bound", "window bound"
	}
	for _, k := range spec.Keys {
		c := uniqueColumn(input, k)
		if c < 0 {
			return fail("key column %q not found (or ambiguous) in input schema%s", k, columnHint(k, input))
		}
		if role[c] != "" {
			return fail("key column %q is a %s; groups are per window already", k, role[c])
		}
		role[c] = "key"
		t.keyCols = append(t.keyCols, c)
	}
	if t.keyKinds, err = keyKinds(input, t.keyCols); err != nil {
		return fail("%v", err)
	}
	fields := []arrow.Field{{Name: ColKeyGroup, Type: arrow.PrimitiveTypes.Int32}}
	for _, c := range t.keyCols {
		fields = append(fields, nullableStateField(input.Field(c)))
	}
	fields = append(fields,
		arrow.Field{Name: ColWindowStart, Type: eventTimeType},
		arrow.Field{Name: ColWindowEnd, Type: eventTimeType},
		arrow.Field{Name: ColTopNSeq, Type: arrow.PrimitiveTypes.Int64})
	held := map[int]int{}
	var types []arrow.DataType
	var names []string
	for c, f := range input.Fields() {
		if f.Name == ColKeyGroup || f.Name == ColTopNSeq {
			return fail("input column %q has a name the top_n state reserves; rename it with a projection", f.Name)
		}
		if role[c] != "" {
			continue
		}
		held[c] = len(t.restCols)
		t.restCols = append(t.restCols, c)
		types = append(types, f.Type)
		names = append(names, f.Name)
		fields = append(fields, nullableStateField(f))
	}
	if t.rows, err = newHeldRows(types, names); err != nil {
		return fail("%v", err)
	}
	for _, o := range spec.OrderBy {
		c := uniqueColumn(input, o.Column)
		if c < 0 {
			return fail("order column %q not found (or ambiguous) in input schema%s", o.Column, columnHint(o.Column, input))
		}
		if role[c] != "" {
			return fail("order column %q is a %s, the same for every row of a group", o.Column, role[c])
		}
		if slices.Contains(t.orderCols, c) {
			return fail("order column %q listed twice", o.Column)
		}
		t.orderCols = append(t.orderCols, c)
		t.orderHeld = append(t.orderHeld, held[c])
	}
	out := slices.Clone(input.Fields())
	if t.tumbling {
		out = append(out, arrow.Field{Name: ColWindowStart, Type: eventTimeType}, arrow.Field{Name: ColWindowEnd, Type: eventTimeType})
	}
	out = append(out, arrow.Field{Name: rank, Type: arrow.PrimitiveTypes.Int64})
	t.output = arrow.NewSchema(out, nil)
	t.state = arrow.NewSchema(fields, nil)
	return t, nil
}

// ID returns the operator id.
func (t *TopN) ID() string { return t.id }

// NumInputs is 1.
func (t *TopN) NumInputs() int { return 1 }

// InputSchemaOf returns the input schema.
func (t *TopN) InputSchemaOf(int) *arrow.Schema { return t.input }

// KeyColumns returns the group key column indices of the input (none: every
// row goes to the key group of the empty key).
func (t *TopN) KeyColumns(int) []int { return t.keyCols }

// OutputSchema is the input schema, then window_start and window_end in the
// tumbling form, then the rank column (int64).
func (t *TopN) OutputSchema() *arrow.Schema { return t.output }

// StateSchema is key_group (int32), the key columns, window_start,
// window_end, topn.seq (int64 arrival sequence), then the other input
// columns: one row per kept row, sorted by key_group, key bytes,
// window_start, window_end, then rank.
func (t *TopN) StateSchema() *arrow.Schema { return t.state }

// TombstoneSchema is key_group, the key columns, window_start and
// window_end: a tombstone removes a whole group.
func (t *TopN) TombstoneSchema() *arrow.Schema {
	return arrow.NewSchema(t.state.Fields()[:3+len(t.keyCols)], nil)
}

// StateFingerprint identifies the state layout and meaning: the format
// version, N, the order, the tumbling size and the state schema.
func (t *TopN) StateFingerprint() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nn=%d size=%d\n", topNStateVersion, t.n, t.size)
	for _, o := range t.spec.OrderBy {
		fmt.Fprintf(&b, "order %s\n", o)
	}
	for _, f := range t.state.Fields() {
		fmt.Fprintf(&b, "%s:%s\n", f.Name, f.Type)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "topn-v1-" + hex.EncodeToString(sum[:16])
}

// SetAllocator makes t allocate the batches it returns from mem (nil: the
// default allocator).
func (t *TopN) SetAllocator(mem memory.Allocator) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	t.mem = mem
}

// Watermark is the largest watermark passed to Advance or Restore.
func (t *TopN) Watermark() int64 { return t.wm }

// Len is the number of rows held: at most N per open group.
func (t *TopN) Len() int { return t.nrows }

func (t *TopN) closed(end int64) bool { return satAdd(end, t.lateness) <= t.wm }

// groupID returns the open group of gkey, creating it.
func (t *TopN) groupID(gkey []byte, start, end int64) int32 {
	h := uint32(maphash.Bytes(t.groupIdx.seed, gkey))
	if gid, ok := t.groupIdx.lookup(h, func(g int32) bool { return t.groups.at(g).gkey == string(gkey) }); ok {
		return gid
	}
	if t.karena.wasteful() {
		t.compactGroupKeys()
	}
	g := topGroup{gkey: t.karena.putString(gkey), h: h, kg: int32(keygroup.Of(gkey[:len(gkey)-16], t.k)), start: start, end: end, live: true}
	var gid int32
	if n := len(t.freeGroups); n > 0 {
		gid = t.freeGroups[n-1]
		t.freeGroups = t.freeGroups[:n-1]
		g.listed = t.groups.at(gid).listed
		g.rows = t.groups.at(gid).rows[:0]
		*t.groups.at(gid) = g
	} else {
		gid = t.groups.push(g)
	}
	t.groupIdx.add(h, gid)
	t.due.push(satAdd(end, t.lateness), gid)
	return gid
}

// findGroup returns the id of the live group of gkey, if there is one.
func (t *TopN) findGroup(gkey []byte) (int32, bool) {
	h := uint32(maphash.Bytes(t.groupIdx.seed, gkey))
	return t.groupIdx.lookup(h, func(g int32) bool { return t.groups.at(g).gkey == string(gkey) })
}

// compactGroupKeys copies the gkey bytes of the live groups into a fresh
// arena (keyArena): strings over the old chunks stay valid while
// referenced (tombstones, picks).
func (t *TopN) compactGroupKeys() {
	t.karena.compact(func(move func(string) string) {
		for gid := range int32(t.groups.len()) {
			if g := t.groups.at(gid); g.live {
				g.gkey = move(g.gkey)
			}
		}
	})
}

func appendBounds(buf []byte, start, end int64) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(start))
	return binary.BigEndian.AppendUint64(buf, uint64(end))
}

func (t *TopN) touch(gid int32) {
	if g := t.groups.at(gid); !g.listed {
		g.listed = true
		t.dirty = append(t.dirty, gid)
	}
}

// clearGroup releases the rows of gid (it stays open).
func (t *TopN) clearGroup(gid int32) {
	g := t.groups.at(gid)
	for _, r := range g.rows {
		t.rows.release(r.slot)
	}
	t.nrows -= len(g.rows)
	g.rows = g.rows[:0]
}

// dropGroup removes gid, recording a tombstone when it existed at the last
// snapshot point (track).
func (t *TopN) dropGroup(gid int32, track bool) {
	t.clearGroup(gid)
	g := t.groups.at(gid)
	if track && g.inBase {
		t.tombs = append(t.tombs, topTomb{gkey: g.gkey, kg: g.kg})
	}
	t.groupIdx.remove(g.h, gid)
	t.karena.release(uint32(len(g.gkey)))
	g.live, g.inBase = false, false
	t.freeGroups = append(t.freeGroups, gid)
}

// outranks reports whether row i of the order arrays ranks before held slot
// s (ties: false, the held row arrived first).
func (t *TopN) outranks(i int, s int32) bool {
	for j, o := range t.spec.OrderBy {
		hc := t.rows.cols[t.orderHeld[j]]
		a := t.order[j]
		hn, in := hc.isNull(s), a.IsNull(i)
		if hn || in {
			if hn && in {
				continue
			}
			return in == o.NullsFirst
		}
		c := hc.compare(s, a, i) // held vs incoming
		if o.Desc {
			c = -c
		}
		if c != 0 {
			return c > 0
		}
	}
	return false
}

// compareHeld orders two held rows by the order columns, then arrival.
func (t *TopN) compareHeld(a, b topRow) int {
	for j, o := range t.spec.OrderBy {
		hc := t.rows.cols[t.orderHeld[j]]
		an, bn := hc.isNull(a.slot), hc.isNull(b.slot)
		if an || bn {
			if an && bn {
				continue
			}
			if an == o.NullsFirst {
				return -1
			}
			return 1
		}
		c := hc.compareSlots(a.slot, b.slot)
		if o.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(a.seq, b.seq)
}

// ProcessInput consumes rows sel of rec (nil: all). Rows whose group was
// emitted already are returned as late rows (the caller releases the batch;
// when every row of a whole batch is late it is rec itself, with an extra
// reference). Window bounds or event times must not be null.
func (t *TopN) ProcessInput(_ int, rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	if rec == nil || rec.NumRows() == 0 {
		return nil, nil
	}
	n := int(rec.NumRows())
	if sel != nil && len(sel) == 0 {
		t.seq += int64(n)
		return nil, nil
	}
	if !sameFields(rec.Schema(), t.input) {
		return nil, fmt.Errorf("top_n %s: process: batch schema %s does not match input schema %s", t.id, rec.Schema(), t.input)
	}
	timeCol := func(c int) ([]arrow.Timestamp, error) {
		a, ok := rec.Column(c).(*array.Timestamp)
		if !ok {
			return nil, fmt.Errorf("top_n %s: process: column %q is %T", t.id, t.input.Field(c).Name, rec.Column(c))
		}
		if a.NullN() > 0 {
			return nil, fmt.Errorf("top_n %s: process: column %q has %d nulls", t.id, t.input.Field(c).Name, a.NullN())
		}
		return a.TimestampValues(), nil
	}
	var tsv, wsv, wev []arrow.Timestamp
	var err error
	if t.tumbling {
		if tsv, err = timeCol(t.tsCol); err != nil {
			return nil, err
		}
	} else {
		if wsv, err = timeCol(t.wsCol); err != nil {
			return nil, err
		}
		if wev, err = timeCol(t.weCol); err != nil {
			return nil, err
		}
	}
	cols := make([]arrow.Array, len(t.keyCols))
	for i, c := range t.keyCols {
		cols[i] = rec.Column(c)
	}
	t.enc.bind(t.keyKinds, cols)
	t.rest = t.rest[:0]
	for _, c := range t.restCols {
		t.rest = append(t.rest, rec.Column(c))
	}
	t.order = t.order[:0]
	for _, c := range t.orderCols {
		t.order = append(t.order, rec.Column(c))
	}
	late := t.late[:0]
	visit := func(i int) {
		var start, end int64
		if t.tumbling {
			ts := int64(tsv[i])
			start = ts - floorMod(ts, t.size)
			end = satAdd(start, t.size)
		} else {
			start, end = int64(wsv[i]), int64(wev[i])
		}
		if t.closed(end) {
			late = append(late, int32(i))
			return
		}
		seq := t.seq + int64(i)
		if gid, ok := t.lookup(i, start, end); ok && len(t.groups.at(gid).rows) == t.n && !t.outranks(i, t.groups.at(gid).rows[t.n-1].slot) {
			return // not in the top N
		}
		gid := t.groupID(t.buf, start, end)
		g := t.groups.at(gid)
		pos := sortSearch(len(g.rows), func(j int) bool { return t.outranks(i, g.rows[j].slot) })
		if len(g.rows) == t.n {
			t.rows.release(g.rows[t.n-1].slot)
			g.rows = g.rows[:t.n-1]
			t.nrows--
		}
		g.rows = slices.Insert(g.rows, pos, topRow{slot: t.rows.add(t.rest, i), seq: seq})
		t.nrows++
		t.touch(gid)
	}
	if sel == nil {
		for i := range n {
			visit(i)
		}
	} else {
		for _, i := range sel {
			visit(int(i))
		}
	}
	t.seq += int64(n)
	t.late = late
	if len(late) == 0 {
		return nil, nil
	}
	if sel == nil && len(late) == n {
		rec.Retain()
		return rec, nil
	}
	out, err := takeRows(rec, late, t.mem)
	if err != nil {
		return nil, fmt.Errorf("top_n %s: process: late rows: %w", t.id, err)
	}
	return out, nil
}

// lookup encodes row i's group key into t.buf and returns its open group.
func (t *TopN) lookup(i int, start, end int64) (int32, bool) {
	t.buf = appendBounds(t.enc.encode(t.buf[:0], i), start, end)
	return t.findGroup(t.buf)
}

// sortSearch is sort.Search: the first j in [0, n) with f(j), or n.
func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Advance emits, once, every group with window_end + allowed lateness <= wm
// and removes it. A wm not larger than Watermark() is ignored; nil when
// nothing is due. The caller releases the batch.
func (t *TopN) Advance(wm int64) (arrow.RecordBatch, error) {
	if wm <= t.wm {
		return nil, nil
	}
	t.wm = wm
	t.ids = t.due.popDue(wm, t.ids[:0])
	due := t.ids[:0]
	for _, gid := range t.ids {
		if g := t.groups.at(gid); g.live && t.closed(g.end) {
			due = append(due, gid)
		}
	}
	slices.Sort(due)
	due = slices.Compact(due) // a group may be queued more than once
	if len(due) == 0 {
		return nil, nil
	}
	sortIDs(due, func(id int32) int64 { return t.groups.at(id).start }, func(id int32) string { return t.groups.at(id).key() },
		func(a, b int32) int { return cmp.Compare(t.groups.at(a).end, t.groups.at(b).end) })
	rec, err := t.buildOutput(due)
	if err != nil {
		return nil, fmt.Errorf("top_n %s: advance to %d: %w", t.id, wm, err)
	}
	// The closed groups' rows are freed at once (in slot order), then the
	// groups dropped.
	var slots []int32
	for _, gid := range due {
		for _, r := range t.groups.at(gid).rows {
			slots = append(slots, r.slot)
		}
	}
	t.rows.releaseAll(slots)
	for _, gid := range due {
		g := t.groups.at(gid)
		t.nrows -= len(g.rows)
		g.rows = g.rows[:0]
		t.dropGroup(gid, true)
	}
	return rec, nil
}

func (t *TopN) buildOutput(gids []int32) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(t.mem, t.output)
	defer b.Release()
	kbs := make([]array.Builder, len(t.keyCols))
	for i, c := range t.keyCols {
		kbs[i] = b.Field(c)
	}
	rbs := make([]array.Builder, len(t.restCols))
	for i, c := range t.restCols {
		rbs[i] = b.Field(c)
	}
	nin := t.input.NumFields()
	var sb, eb *array.TimestampBuilder
	if t.tumbling {
		sb, eb = b.Field(nin).(*array.TimestampBuilder), b.Field(nin+1).(*array.TimestampBuilder)
	} else {
		sb, eb = b.Field(t.wsCol).(*array.TimestampBuilder), b.Field(t.weCol).(*array.TimestampBuilder)
	}
	rb := b.Field(t.output.NumFields() - 1).(*array.Int64Builder)
	var slots []int32
	for _, gid := range gids {
		g := t.groups.at(gid)
		for r, row := range g.rows {
			if err := decodeKey(g.key(), kbs); err != nil {
				return nil, err
			}
			sb.Append(arrow.Timestamp(g.start))
			eb.Append(arrow.Timestamp(g.end))
			slots = append(slots, row.slot)
			rb.Append(int64(r + 1))
		}
	}
	t.rows.appendRows(rbs, slots)
	return b.NewRecordBatch(), nil
}

// sortGroups sorts group ids in state order: key group, key bytes, start,
// end.
func (t *TopN) sortGroups(gids []int32) {
	sortIDs(gids, func(id int32) int64 { return int64(t.groups.at(id).kg) }, func(id int32) string { return t.groups.at(id).key() },
		func(a, b int32) int {
			ga, gb := t.groups.at(a), t.groups.at(b)
			return cmp.Or(cmp.Compare(ga.start, gb.start), cmp.Compare(ga.end, gb.end))
		})
}

// buildState returns the state rows of gids in batches of at most
// snapshotChunkRows rows.
func (t *TopN) buildState(gids []int32) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	b := array.NewRecordBuilder(t.mem, t.state)
	defer b.Release()
	nk := len(t.keyCols)
	kgb := b.Field(0).(*array.Int32Builder)
	kbs := b.Fields()[1 : 1+nk]
	sb, eb := b.Field(1+nk).(*array.TimestampBuilder), b.Field(2+nk).(*array.TimestampBuilder)
	qb := b.Field(3 + nk).(*array.Int64Builder)
	rbs := b.Fields()[4+nk:]
	var slots []int32
	flush := func() {
		if len(slots) > 0 {
			t.rows.appendRows(rbs, slots)
			out = append(out, b.NewRecordBatch())
			slots = slots[:0]
		}
	}
	for _, gid := range gids {
		g := t.groups.at(gid)
		for _, r := range g.rows {
			kgb.Append(g.kg)
			if err := decodeKey(g.key(), kbs); err != nil {
				releaseBatches(out)
				return nil, err
			}
			sb.Append(arrow.Timestamp(g.start))
			eb.Append(arrow.Timestamp(g.end))
			qb.Append(r.seq)
			if slots = append(slots, r.slot); len(slots) == snapshotChunkRows {
				flush()
			}
		}
	}
	flush()
	return out, nil
}

func (t *TopN) resetTracking() {
	for _, gid := range t.dirty {
		g := t.groups.at(gid)
		g.listed = false
		if g.live {
			g.inBase = true
		}
	}
	t.dirty = t.dirty[:0]
	t.tombs = nil
}

// Dirty returns the rows of the groups created or changed since the last
// snapshot point (a delta upserts all rows of a changed group) and the
// groups removed since (one tombstone each). It costs O(changed groups).
func (t *TopN) Dirty() (changed, removed int) {
	for _, gid := range t.dirty {
		if g := t.groups.at(gid); g.live {
			changed += len(g.rows)
		}
	}
	return changed, len(t.tombs)
}

// Snapshot returns the whole state (StateSchema, sorted by key_group, key
// bytes, window, rank) and makes now the snapshot point. Persist
// Watermark() beside it.
func (t *TopN) Snapshot() ([]arrow.RecordBatch, error) {
	gids := make([]int32, 0, t.groupIdx.n)
	for gid := range int32(t.groups.len()) {
		if t.groups.at(gid).live {
			gids = append(gids, int32(gid))
		}
	}
	t.sortGroups(gids)
	out, err := t.buildState(gids)
	if err != nil {
		return nil, fmt.Errorf("top_n %s: snapshot: %w", t.id, err)
	}
	t.resetTracking()
	return out, nil
}

// SnapshotDelta returns, since the last snapshot point, every row of each
// group created or changed (upserts, StateSchema: they replace all rows of
// their group) and each group removed (tombstones, TombstoneSchema), sorted
// by key_group, key bytes and window. It makes now the snapshot point; on
// error nothing is reset.
func (t *TopN) SnapshotDelta() (upserts, tombstones []arrow.RecordBatch, err error) {
	var gids []int32
	for _, gid := range t.dirty {
		if t.groups.at(gid).live && len(t.groups.at(gid).rows) > 0 {
			gids = append(gids, gid)
		}
	}
	t.sortGroups(gids)
	if upserts, err = t.buildState(gids); err != nil {
		return nil, nil, fmt.Errorf("top_n %s: snapshot delta: %w", t.id, err)
	}
	tombs := slices.Clone(t.tombs)
	slices.SortFunc(tombs, func(a, b topTomb) int {
		ka, kb := a.gkey[:len(a.gkey)-16], b.gkey[:len(b.gkey)-16]
		return cmp.Or(cmp.Compare(a.kg, b.kg), strings.Compare(ka, kb), strings.Compare(a.gkey[len(ka):], b.gkey[len(kb):]))
	})
	ts := t.TombstoneSchema()
	for lo := 0; lo < len(tombs); lo += snapshotChunkRows {
		rec, err := t.buildTombs(ts, tombs[lo:min(len(tombs), lo+snapshotChunkRows)])
		if err != nil {
			releaseBatches(upserts)
			releaseBatches(tombstones)
			return nil, nil, fmt.Errorf("top_n %s: snapshot delta: %w", t.id, err)
		}
		tombstones = append(tombstones, rec)
	}
	t.resetTracking()
	return upserts, tombstones, nil
}

func (t *TopN) buildTombs(schema *arrow.Schema, tombs []topTomb) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(t.mem, schema)
	defer b.Release()
	nk := len(t.keyCols)
	kgb := b.Field(0).(*array.Int32Builder)
	kbs := b.Fields()[1 : 1+nk]
	sb, eb := b.Field(1+nk).(*array.TimestampBuilder), b.Field(2+nk).(*array.TimestampBuilder)
	for _, tb := range tombs {
		key, bounds := tb.gkey[:len(tb.gkey)-16], tb.gkey[len(tb.gkey)-16:]
		kgb.Append(tb.kg)
		if err := decodeKey(key, kbs); err != nil {
			return nil, err
		}
		sb.Append(arrow.Timestamp(int64(binary.BigEndian.Uint64([]byte(bounds[:8])))))
		eb.Append(arrow.Timestamp(int64(binary.BigEndian.Uint64([]byte(bounds[8:])))))
	}
	return b.NewRecordBatch(), nil
}

// topPick is a validated state or tombstone row picked for this instance.
type topPick struct {
	gkey       string
	start, end int64
	seq        int64
	row        int32
}

// pickGroups validates rows of rec (state or tombstone layout: key_group,
// keys, window_start, window_end first) in [kgLo, kgHi); withSeq reads
// topn.seq too.
func (t *TopN) pickGroups(rec arrow.RecordBatch, kgLo, kgHi int, withSeq bool, buf []byte) ([]topPick, []byte, error) {
	rows, keys, buf, err := pickKeyRows(rec, t.keyKinds, t.k, kgLo, kgHi, buf)
	if err != nil {
		return nil, buf, err
	}
	nk := len(t.keyCols)
	sa, ea := rec.Column(1+nk).(*array.Timestamp), rec.Column(2+nk).(*array.Timestamp)
	var qa *array.Int64
	if withSeq {
		qa = rec.Column(3 + nk).(*array.Int64)
	}
	out := make([]topPick, len(rows))
	for j, r32 := range rows {
		r := int(r32)
		if sa.IsNull(r) || ea.IsNull(r) || (qa != nil && qa.IsNull(r)) {
			return nil, buf, fmt.Errorf("row %d: null window bound or %s", r, ColTopNSeq)
		}
		start, end := int64(sa.Value(r)), int64(ea.Value(r))
		if end <= start {
			return nil, buf, fmt.Errorf("row %d: empty window [%d,%d)", r, start, end)
		}
		if t.tumbling && (floorMod(start, t.size) != 0 || end != satAdd(start, t.size)) {
			return nil, buf, fmt.Errorf("row %d: window [%d,%d) does not fit size %d", r, start, end, t.size)
		}
		p := topPick{gkey: string(appendBounds([]byte(keys[j]), start, end)), start: start, end: end, row: r32}
		if qa != nil {
			p.seq = qa.Value(r)
		}
		out[j] = p
	}
	return out, buf, nil
}

// restoreRows adds validated state rows of rec, calling onGroup with each
// row's group first.
func (t *TopN) restoreRows(rec arrow.RecordBatch, picks []topPick, onGroup func(gid int32)) {
	if len(picks) == 0 {
		return
	}
	nk := len(t.keyCols)
	rest := make([]arrow.Array, len(t.restCols))
	for j := range rest {
		rest[j] = rec.Column(4 + nk + j)
	}
	defer t.rows.flush(rest) // the copies queued below
	for _, p := range picks {
		gid := t.groupID([]byte(p.gkey), p.start, p.end)
		onGroup(gid)
		g := t.groups.at(gid)
		g.rows = append(g.rows, topRow{slot: t.rows.addLater(int(p.row)), seq: p.seq})
		t.nrows++
		t.seq = max(t.seq, p.seq+1)
	}
}

// ReserveRestore makes room in the held rows for up to rows more state
// rows, before Restore and ApplyDelta (groups hold several rows each, so
// their tables grow as they come).
func (t *TopN) ReserveRestore(rows int) {
	if rows = min(rows, maxReserve); rows > 0 {
		t.rows.reserve(rows)
	}
}

// settle sorts the rows of restored groups, checks them and makes them part
// of the snapshot point.
func (t *TopN) settle(gids map[int32]bool) error {
	t.resetTracking()
	for gid := range gids {
		g := t.groups.at(gid)
		if !g.live {
			continue
		}
		g.inBase = true
		slices.SortFunc(g.rows, t.compareHeld)
		if len(g.rows) > t.n {
			return fmt.Errorf("window [%d,%d): %d rows for one group, more than n=%d (n changed or state corrupt)", g.start, g.end, len(g.rows), t.n)
		}
		for j := 1; j < len(g.rows); j++ {
			if g.rows[j].seq == g.rows[j-1].seq {
				return fmt.Errorf("window [%d,%d): arrival %d held twice", g.start, g.end, g.rows[j].seq)
			}
		}
	}
	return nil
}

// Restore adds the state rows whose key_group is in [kgLo, kgHi), skips the
// others, and raises the watermark to watermark. Schemas, key groups and
// windows are validated before any state changes; after an error about a
// group's rows the instance must be discarded. Restore is a snapshot point.
func (t *TopN) Restore(state []arrow.RecordBatch, kgLo, kgHi int, watermark int64) error {
	if kgLo < 0 || kgHi > t.k || kgLo > kgHi {
		return fmt.Errorf("top_n %s: restore: key-group range [%d,%d) outside [0,%d)", t.id, kgLo, kgHi, t.k)
	}
	picks := make([][]topPick, len(state))
	var buf []byte
	for bi, rec := range state {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), t.state) {
			return fmt.Errorf("top_n %s: restore: batch %d schema %s does not match state schema %s", t.id, bi, rec.Schema(), t.state)
		}
		var err error
		if picks[bi], buf, err = t.pickGroups(rec, kgLo, kgHi, true, buf); err != nil {
			return fmt.Errorf("top_n %s: restore: batch %d %w", t.id, bi, err)
		}
	}
	touched := map[int32]bool{}
	for bi, rec := range state {
		t.restoreRows(rec, picks[bi], func(gid int32) { touched[gid] = true })
	}
	if err := t.settle(touched); err != nil {
		return fmt.Errorf("top_n %s: restore: %w", t.id, err)
	}
	t.wm = max(t.wm, watermark)
	return nil
}

// ApplyDelta applies one SnapshotDelta to an instance rebuilt with Restore
// from the base the delta follows (and the deltas before it, in order):
// tombstones remove their groups, then the upserts replace, group by group,
// all rows of the groups they name. Rows outside [kgLo, kgHi) are skipped. A
// tombstone of a group not held is an error (deltas out of order or state
// corrupt). Schemas and key groups are validated before any state changes;
// after a later error the instance must be discarded. ApplyDelta is a
// snapshot point.
func (t *TopN) ApplyDelta(upserts, tombstones []arrow.RecordBatch, kgLo, kgHi int) error {
	if kgLo < 0 || kgHi > t.k || kgLo > kgHi {
		return fmt.Errorf("top_n %s: apply delta: key-group range [%d,%d) outside [0,%d)", t.id, kgLo, kgHi, t.k)
	}
	ts := t.TombstoneSchema()
	var buf []byte
	tpicks := make([][]topPick, len(tombstones))
	for bi, rec := range tombstones {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), ts) {
			return fmt.Errorf("top_n %s: apply delta: tombstone batch %d schema %s does not match tombstone schema %s", t.id, bi, rec.Schema(), ts)
		}
		var err error
		if tpicks[bi], buf, err = t.pickGroups(rec, kgLo, kgHi, false, buf); err != nil {
			return fmt.Errorf("top_n %s: apply delta: tombstone batch %d %w", t.id, bi, err)
		}
	}
	upicks := make([][]topPick, len(upserts))
	for bi, rec := range upserts {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), t.state) {
			return fmt.Errorf("top_n %s: apply delta: upsert batch %d schema %s does not match state schema %s", t.id, bi, rec.Schema(), t.state)
		}
		var err error
		if upicks[bi], buf, err = t.pickGroups(rec, kgLo, kgHi, true, buf); err != nil {
			return fmt.Errorf("top_n %s: apply delta: upsert batch %d %w", t.id, bi, err)
		}
	}
	for bi, picks := range tpicks {
		for _, p := range picks {
			gid, ok := t.findGroup([]byte(p.gkey))
			if !ok {
				return fmt.Errorf("top_n %s: apply delta: tombstone batch %d row %d: window [%d,%d) not held (deltas out of order or state corrupt)", t.id, bi, p.row, p.start, p.end)
			}
			t.dropGroup(gid, false)
		}
	}
	touched := map[int32]bool{}
	for bi, rec := range upserts {
		t.restoreRows(rec, upicks[bi], func(gid int32) {
			if !touched[gid] {
				touched[gid] = true
				t.clearGroup(gid) // the upserts replace all rows of the group
			}
		})
	}
	if err := t.settle(touched); err != nil {
		return fmt.Errorf("top_n %s: apply delta: %w", t.id, err)
	}
	return nil
}
