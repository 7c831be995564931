package operators

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/keygroup"
)

// Over semantics.
//
// An over stage is SQL's
//
//	agg(col) OVER (PARTITION BY keys ORDER BY t ROWS BETWEEN n PRECEDING AND CURRENT ROW)
//
// in event time, as Flink runs it: every input row is emitted once, with
// all its columns and one column per aggregate computed over the row and
// the n rows of its key before it. Rows of a key are ordered by their event
// time t, rows with equal t by arrival (an arrival sequence number kept in
// the state, so the order survives snapshots, restores and rescales).
//
// With cutoff = watermark - allowed_lateness, a row with t >= cutoff waits
// in state; Advance emits, in (t, arrival) order per key, every waiting row
// that the cutoff has passed (t < cutoff). A row that arrives with t <
// cutoff would come after rows of its key already emitted: it is late
// (returned, never dropped). The output is sorted by t, key bytes, then
// arrival, so it does not depend on batching, parallelism, restarts or
// rescales. Key columns come out canonical (-0 as 0, one NaN), as top_n's.
//
// Aggregates ignore nulls, as a window's do, except count(), which counts
// the rows of the frame: count(col) counts non-null values; sum of
// int32/int64 is int64 (null if it does not fit), of float64 float64; avg
// is float64 (null over no values); min, max, first (the oldest non-null
// value of the frame) and last (the newest) keep the column's type, of any
// type a stage can hold; floats order NaN above every number.
// count_distinct is not supported.
//
// State per key: the n newest emitted rows, holding only the columns an
// aggregate reads (the others null), and the rows waiting for the cutoff,
// whole. A key's frame is never dropped (its next row needs it); with
// rows: 0 a key without waiting rows leaves the state.

// OverSpec declares an over stage.
type OverSpec struct {
	ID string
	// Keys partition the rows (may be empty: one partition).
	Keys []string
	// EventTime is the timestamp[us] column rows are ordered by.
	EventTime string
	// Rows is n of "ROWS BETWEEN n PRECEDING AND CURRENT ROW" (0..MaxOverRows).
	Rows int
	// Aggregates are the output columns added to each row.
	Aggregates []AggSpec
	// AllowedLateness delays the cutoff (watermark - AllowedLateness) at
	// which rows are emitted and after which a row is late.
	AllowedLateness time.Duration
}

// MaxOverRows bounds OverSpec.Rows: the state keeps that many rows per key.
const MaxOverRows = 10000

// State columns of an over stage, after key_group and the key columns.
const (
	ColOverPending = "over.pending" // true: waiting for the cutoff; false: a frame row (emitted)
	ColOverTime    = "over.time"    // the row's event time
	ColOverSeq     = "over.seq"     // arrival sequence
)

const overStateVersion = "floe-over-state/v1"

// overRow is one held row of a key.
type overRow struct {
	slot    int32
	ts, seq int64
}

func cmpOverRow(a, b overRow) int { return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.seq, b.seq)) }

// overKey is the state of one key.
type overKey struct {
	key    string
	kg     int32
	frame  []overRow // emitted rows, oldest first, at most Rows
	pend   []overRow // waiting for the cutoff, in no order
	live   bool
	listed bool // in dirty
	inBase bool // exists at the last snapshot point
}

type overTomb struct {
	key string
	kg  int32
}

// overAgg is one compiled aggregate.
type overAgg struct {
	spec  AggSpec
	col   int  // index in restCols of the input column; -1 for count()
	float bool // sum/avg: a float64 column
	out   arrow.DataType
}

// overEmit is one row emitted by an Advance.
type overEmit struct {
	kid     int32
	slot    int32
	ts, seq int64
	res     int // index into the result buffers
}

// Over is one instance (subtask) of an over stage; see "Over semantics".
// It is not safe for concurrent use.
type Over struct {
	spec     OverSpec
	id       string
	k, n     int
	input    *arrow.Schema
	output   *arrow.Schema
	state    *arrow.Schema
	keyCols  []int
	keyKinds []byte
	tsCol    int
	restCols []int  // held input columns: every column but the keys
	aggCol   []bool // per restCols entry: an aggregate reads it (kept in frame rows)
	aggs     []overAgg
	lateness int64
	wm, seq  int64
	mem      memory.Allocator
	rows     *heldRows
	keyMap   map[string]int32
	keys     []overKey
	freeKeys []int32
	nrows    int
	due      dueQueue
	dirty    []int32
	tombs    []overTomb

	enc  keyEncoder
	buf  []byte
	late []int32
	rest []arrow.Array
	ids  []int32
}

var _ Stateful = (*Over)(nil)

// NewOver validates spec against the input schema and returns an empty over
// instance for a pipeline with maxParallelism key groups.
func NewOver(spec OverSpec, input *arrow.Schema, maxParallelism int) (*Over, error) {
	id := spec.ID
	if id == "" {
		id = "over"
	}
	op := "over " + id
	fail := func(format string, args ...any) (*Over, error) {
		return nil, fmt.Errorf(op+": "+format, args...)
	}
	if input == nil {
		return fail("nil input schema")
	}
	if !keygroup.ValidCount(maxParallelism) {
		return fail("max parallelism %d out of range [1,%d]", maxParallelism, keygroup.Max)
	}
	if spec.Rows < 0 || spec.Rows > MaxOverRows {
		return fail("rows %d out of range [0,%d]", spec.Rows, MaxOverRows)
	}
	if len(spec.Aggregates) == 0 {
		return fail("no aggregates: an over stage adds at least one (e.g. aggregates: {avg_price: \"avg(price)\"})")
	}
	o := &Over{spec: spec, id: id, k: maxParallelism, n: spec.Rows, input: input, wm: math.MinInt64,
		mem: memory.DefaultAllocator, keyMap: map[string]int32{}}
	var err error
	if o.lateness, err = durMicros(op, "allowed lateness", spec.AllowedLateness, false); err != nil {
		return nil, err
	}
	if o.tsCol = uniqueColumn(input, spec.EventTime); o.tsCol < 0 {
		return fail("order column %q not found (or ambiguous) in input schema%s", spec.EventTime, columnHint(spec.EventTime, input))
	}
	if !isEventTimeField(input.Field(o.tsCol)) {
		return fail("order column %q has type %s; an over stage orders by an event time, timestamp[us, tz=UTC]", spec.EventTime, input.Field(o.tsCol).Type)
	}
	isKey := make([]bool, input.NumFields())
	for _, k := range spec.Keys {
		c := uniqueColumn(input, k)
		if c < 0 {
			return fail("key column %q not found (or ambiguous) in input schema%s", k, columnHint(k, input))
		}
		if isKey[c] {
			return fail("key column %q listed twice", k)
		}
		if c == o.tsCol {
			return fail("key column %q is the order column", k)
		}
		isKey[c] = true
		o.keyCols = append(o.keyCols, c)
	}
	if o.keyKinds, err = keyKinds(input, o.keyCols); err != nil {
		return fail("%v", err)
	}
	fields := []arrow.Field{{Name: ColKeyGroup, Type: arrow.PrimitiveTypes.Int32}}
	for _, c := range o.keyCols {
		fields = append(fields, nullableStateField(input.Field(c)))
	}
	fields = append(fields,
		arrow.Field{Name: ColOverPending, Type: arrow.FixedWidthTypes.Boolean},
		arrow.Field{Name: ColOverTime, Type: eventTimeType},
		arrow.Field{Name: ColOverSeq, Type: arrow.PrimitiveTypes.Int64})
	held := map[int]int{}
	var types []arrow.DataType
	var names []string
	for c, f := range input.Fields() {
		switch f.Name {
		case ColKeyGroup, ColOverPending, ColOverTime, ColOverSeq:
			return fail("input column %q has a name the over state reserves; rename it with a projection", f.Name)
		}
		if isKey[c] {
			continue
		}
		held[c] = len(o.restCols)
		o.restCols = append(o.restCols, c)
		types = append(types, f.Type)
		names = append(names, f.Name)
		fields = append(fields, nullableStateField(f))
	}
	if o.rows, err = newHeldRows(types, names); err != nil {
		return fail("%v", err)
	}
	o.aggCol = make([]bool, len(o.restCols))
	out := slices.Clone(input.Fields())
	for _, a := range spec.Aggregates {
		if len(input.FieldIndices(a.Name)) > 0 {
			return fail("aggregate %s: the input has a column %q already; name the aggregate otherwise", a.Name, a.Name)
		}
		for _, f := range out[input.NumFields():] {
			if f.Name == a.Name {
				return fail("aggregate %s: listed twice", a.Name)
			}
		}
		ag := overAgg{spec: a, col: -1}
		if a.Func == AggCount && a.Column == "" {
			ag.out = arrow.PrimitiveTypes.Int64
		} else {
			c := uniqueColumn(input, a.Column)
			if c < 0 {
				return fail("aggregate %s = %s: column %q not found (or ambiguous) in input schema%s", a.Name, a, a.Column, columnHint(a.Column, input))
			}
			if isKey[c] {
				return fail("aggregate %s = %s: column %q is a key column, the same for every row of the frame", a.Name, a, a.Column)
			}
			ag.col = held[c]
			o.aggCol[ag.col] = true
			dt := input.Field(c).Type
			bad := func(want string) (*Over, error) {
				return fail("aggregate %s = %s: column %q has type %s; %s needs %s", a.Name, a, a.Column, dt, a.Func, want)
			}
			switch a.Func {
			case AggCount:
				ag.out = arrow.PrimitiveTypes.Int64
			case AggSum, AggAvg:
				switch dt.ID() {
				case arrow.INT32, arrow.INT64:
					ag.out = arrow.PrimitiveTypes.Int64
				case arrow.FLOAT64:
					ag.out, ag.float = arrow.PrimitiveTypes.Float64, true
				default:
					return bad("int32, int64 or float64")
				}
				if a.Func == AggAvg {
					ag.out = arrow.PrimitiveTypes.Float64
				}
			case AggMin, AggMax, AggFirst, AggLast:
				ag.out = dt
			default:
				return fail("aggregate %s = %s: %s is not supported in an over stage (count, sum, avg, min, max, first, last are)", a.Name, a, a.Func)
			}
		}
		out = append(out, arrow.Field{Name: a.Name, Type: ag.out, Nullable: true})
		o.aggs = append(o.aggs, ag)
	}
	o.output = arrow.NewSchema(out, nil)
	o.state = arrow.NewSchema(fields, nil)
	return o, nil
}

// ID returns the operator id.
func (o *Over) ID() string { return o.id }

// NumInputs is 1.
func (o *Over) NumInputs() int { return 1 }

// InputSchemaOf returns the input schema.
func (o *Over) InputSchemaOf(int) *arrow.Schema { return o.input }

// KeyColumns returns the partition key column indices of the input.
func (o *Over) KeyColumns(int) []int { return o.keyCols }

// OutputSchema is the input schema, then one column per aggregate.
func (o *Over) OutputSchema() *arrow.Schema { return o.output }

// StateSchema is key_group (int32), the key columns, over.pending (bool),
// over.time (timestamp[us]), over.seq (int64), then the other input
// columns: one row per held row, sorted by key_group, key bytes, frame
// rows before waiting rows, then time and arrival. A frame row holds only
// the columns an aggregate reads; the others are null.
func (o *Over) StateSchema() *arrow.Schema { return o.state }

// TombstoneSchema is key_group and the key columns: a tombstone removes a
// whole key.
func (o *Over) TombstoneSchema() *arrow.Schema {
	return arrow.NewSchema(o.state.Fields()[:1+len(o.keyCols)], nil)
}

// StateFingerprint identifies the state layout and meaning: the format
// version, rows, the order column, the columns aggregates read and the
// state schema.
func (o *Over) StateFingerprint() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nrows=%d order=%s\n", overStateVersion, o.n, o.spec.EventTime)
	for j, c := range o.restCols {
		if o.aggCol[j] {
			fmt.Fprintf(&b, "frame %s\n", o.input.Field(c).Name)
		}
	}
	for _, f := range o.state.Fields() {
		fmt.Fprintf(&b, "%s:%s\n", f.Name, f.Type)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "over-v1-" + hex.EncodeToString(sum[:16])
}

// SetAllocator makes o allocate the batches it returns from mem (nil: the
// default allocator).
func (o *Over) SetAllocator(mem memory.Allocator) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	o.mem = mem
}

// Watermark is the largest watermark passed to Advance or Restore.
func (o *Over) Watermark() int64 { return o.wm }

// Len is the number of rows held: frame rows and waiting rows.
func (o *Over) Len() int { return o.nrows }

func (o *Over) cutoff() int64 { return clampSub(o.wm, o.lateness) }

// keyID returns the key of key bytes, creating it.
func (o *Over) keyID(key []byte) int32 {
	if kid, ok := o.keyMap[string(key)]; ok {
		return kid
	}
	k := overKey{key: string(key), kg: int32(keygroup.Of(key, o.k)), live: true}
	var kid int32
	if n := len(o.freeKeys); n > 0 {
		kid = o.freeKeys[n-1]
		o.freeKeys = o.freeKeys[:n-1]
		old := &o.keys[kid]
		k.listed, k.frame, k.pend = old.listed, old.frame[:0], old.pend[:0]
		o.keys[kid] = k
	} else {
		kid = int32(len(o.keys))
		o.keys = append(o.keys, k)
	}
	o.keyMap[k.key] = kid
	return kid
}

func (o *Over) touch(kid int32) {
	if k := &o.keys[kid]; !k.listed {
		k.listed = true
		o.dirty = append(o.dirty, kid)
	}
}

// clearKey releases every row of kid (it stays).
func (o *Over) clearKey(kid int32) {
	k := &o.keys[kid]
	for _, r := range k.frame {
		o.rows.release(r.slot)
	}
	for _, r := range k.pend {
		o.rows.release(r.slot)
	}
	o.nrows -= len(k.frame) + len(k.pend)
	k.frame, k.pend = k.frame[:0], k.pend[:0]
}

// dropKey removes kid, recording a tombstone when it existed at the last
// snapshot point (track).
func (o *Over) dropKey(kid int32, track bool) {
	o.clearKey(kid)
	k := &o.keys[kid]
	if track && k.inBase {
		o.tombs = append(o.tombs, overTomb{key: k.key, kg: k.kg})
	}
	delete(o.keyMap, k.key)
	k.live, k.inBase = false, false
	o.freeKeys = append(o.freeKeys, kid)
}

// ProcessInput consumes rows sel of rec (nil: all): a row with event time
// >= the cutoff waits for it; an older row is late. The late batch (input
// rows) is the caller's to release; when every row of a whole batch is late
// it is rec itself, with an extra reference. Event times must not be null.
func (o *Over) ProcessInput(_ int, rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	if rec == nil || rec.NumRows() == 0 {
		return nil, nil
	}
	n := int(rec.NumRows())
	if sel != nil && len(sel) == 0 {
		o.seq += int64(n)
		return nil, nil
	}
	if !sameFields(rec.Schema(), o.input) {
		return nil, fmt.Errorf("over %s: process: batch schema %s does not match input schema %s", o.id, rec.Schema(), o.input)
	}
	tsArr, ok := rec.Column(o.tsCol).(*array.Timestamp)
	if !ok {
		return nil, fmt.Errorf("over %s: process: order column is %T", o.id, rec.Column(o.tsCol))
	}
	if tsArr.NullN() > 0 {
		return nil, fmt.Errorf("over %s: process: order column %q has %d nulls", o.id, o.spec.EventTime, tsArr.NullN())
	}
	tsv := tsArr.TimestampValues()
	cols := make([]arrow.Array, len(o.keyCols))
	for i, c := range o.keyCols {
		cols[i] = rec.Column(c)
	}
	o.enc.bind(o.keyKinds, cols)
	o.rest = o.rest[:0]
	for _, c := range o.restCols {
		o.rest = append(o.rest, rec.Column(c))
	}
	c := o.cutoff()
	late := o.late[:0]
	visit := func(i int) {
		t := int64(tsv[i])
		if t < c {
			late = append(late, int32(i))
			return
		}
		o.buf = o.enc.encode(o.buf[:0], i)
		kid := o.keyID(o.buf)
		k := &o.keys[kid]
		k.pend = append(k.pend, overRow{slot: o.rows.add(o.rest, i), ts: t, seq: o.seq + int64(i)})
		o.nrows++
		o.due.push(t, kid)
		o.touch(kid)
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
	o.seq += int64(n)
	o.late = late
	if len(late) == 0 {
		return nil, nil
	}
	if sel == nil && len(late) == n {
		rec.Retain()
		return rec, nil
	}
	out, err := takeRows(rec, late, o.mem)
	if err != nil {
		return nil, fmt.Errorf("over %s: process: late rows: %w", o.id, err)
	}
	return out, nil
}

// overResults buffers the aggregate values of the rows one Advance emits.
type overResults struct {
	ints   [][]int64 // count, int sum
	floats [][]float64
	slots  [][]int32 // min, max, first, last: the held slot of the value (-1: null)
	valid  [][]bool
}

// Advance moves the cutoff to wm - allowed lateness and emits, once, every
// waiting row older than it with its aggregates, sorted by event time, key
// bytes, then arrival. A wm not larger than Watermark() is ignored; nil
// when nothing is due. The caller releases the batch.
func (o *Over) Advance(wm int64) (arrow.RecordBatch, error) {
	if wm <= o.wm {
		return nil, nil
	}
	o.wm = wm
	c := o.cutoff()
	if c == math.MinInt64 {
		return nil, nil
	}
	o.ids = o.due.popDue(c-1, o.ids[:0])
	slices.Sort(o.ids)
	due := slices.Compact(o.ids)
	na := len(o.aggs)
	res := overResults{ints: make([][]int64, na), floats: make([][]float64, na), slots: make([][]int32, na), valid: make([][]bool, na)}
	var emits []overEmit
	var released []int32
	for _, kid := range due {
		k := &o.keys[kid]
		if !k.live || len(k.pend) == 0 {
			continue
		}
		slices.SortFunc(k.pend, cmpOverRow)
		j := 0
		for j < len(k.pend) && k.pend[j].ts < c {
			r := k.pend[j]
			k.frame = append(k.frame, r)
			o.aggregate(&res, k.frame[max(0, len(k.frame)-o.n-1):])
			emits = append(emits, overEmit{kid: kid, slot: r.slot, ts: r.ts, seq: r.seq, res: len(emits)})
			if drop := len(k.frame) - o.n; drop > 0 {
				for _, d := range k.frame[:drop] {
					released = append(released, d.slot)
				}
				k.frame = append(k.frame[:0], k.frame[drop:]...)
			}
			j++
		}
		if j == 0 {
			continue
		}
		k.pend = append(k.pend[:0], k.pend[j:]...)
		if len(k.pend) > 0 {
			o.due.push(k.pend[0].ts, kid)
		}
		o.touch(kid)
	}
	if len(emits) == 0 {
		return nil, nil
	}
	slices.SortFunc(emits, func(a, b overEmit) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), strings.Compare(o.keys[a.kid].key, o.keys[b.kid].key), cmp.Compare(a.seq, b.seq))
	})
	rec, err := o.buildOutput(emits, &res)
	if err != nil {
		return nil, fmt.Errorf("over %s: advance to %d: %w", o.id, wm, err)
	}
	// Emitted rows stay as frame rows holding only what aggregates read.
	for _, e := range emits {
		for j, hc := range o.rows.cols {
			if !o.aggCol[j] {
				hc.clear(e.slot)
			}
		}
	}
	for _, s := range released {
		o.rows.release(s)
	}
	o.nrows -= len(released)
	for _, kid := range due {
		if k := &o.keys[kid]; k.live && len(k.frame) == 0 && len(k.pend) == 0 {
			o.dropKey(kid, true) // rows: 0
		}
	}
	return rec, nil
}

// aggregate appends the aggregates of frame (oldest first; the last is the
// current row) to res.
func (o *Over) aggregate(res *overResults, frame []overRow) {
	for a, ag := range o.aggs {
		if ag.col < 0 { // count()
			res.ints[a] = append(res.ints[a], int64(len(frame)))
			res.valid[a] = append(res.valid[a], true)
			continue
		}
		hc := o.rows.cols[ag.col]
		switch ag.spec.Func {
		case AggCount:
			var n int64
			for _, r := range frame {
				if !hc.isNull(r.slot) {
					n++
				}
			}
			res.ints[a] = append(res.ints[a], n)
			res.valid[a] = append(res.valid[a], true)
		case AggSum, AggAvg:
			var n int64
			var fsum float64
			var hi, lo int64
			for _, r := range frame {
				if ag.float {
					if v, ok := heldFloat64(hc, r.slot); ok {
						fsum += v
						n++
					}
				} else if v, ok := heldInt64(hc, r.slot); ok {
					add128(&hi, &lo, v)
					n++
				}
			}
			switch {
			case ag.spec.Func == AggSum && ag.float:
				res.floats[a] = append(res.floats[a], fsum)
				res.valid[a] = append(res.valid[a], n > 0)
			case ag.spec.Func == AggSum:
				res.ints[a] = append(res.ints[a], lo)
				res.valid[a] = append(res.valid[a], n > 0 && hi == 0)
			case n == 0:
				res.floats[a] = append(res.floats[a], 0)
				res.valid[a] = append(res.valid[a], false)
			case ag.float:
				res.floats[a] = append(res.floats[a], fsum/float64(n))
				res.valid[a] = append(res.valid[a], true)
			default:
				res.floats[a] = append(res.floats[a], (float64(hi)*0x1p64+float64(lo))/float64(n))
				res.valid[a] = append(res.valid[a], true)
			}
		default: // min, max, first, last
			best := int32(-1)
			for _, r := range frame {
				if hc.isNull(r.slot) {
					continue
				}
				switch ag.spec.Func {
				case AggFirst:
					if best < 0 {
						best = r.slot
					}
				case AggLast:
					best = r.slot
				case AggMin:
					if best < 0 || hc.compareSlots(r.slot, best) < 0 {
						best = r.slot
					}
				case AggMax:
					if best < 0 || hc.compareSlots(r.slot, best) > 0 {
						best = r.slot
					}
				}
			}
			res.slots[a] = append(res.slots[a], best)
		}
	}
}

// heldInt64 reads an int32 or int64 held value.
func heldInt64(hc heldCol, s int32) (int64, bool) {
	switch c := hc.(type) {
	case *typedCol[int64, *array.Int64, *array.Int64Builder]:
		v := c.vals[s]
		return v.v, v.ok
	case *typedCol[int32, *array.Int32, *array.Int32Builder]:
		v := c.vals[s]
		return int64(v.v), v.ok
	}
	return 0, false
}

// heldFloat64 reads a float64 held value.
func heldFloat64(hc heldCol, s int32) (float64, bool) {
	if c, ok := hc.(*typedCol[float64, *array.Float64, *array.Float64Builder]); ok {
		v := c.vals[s]
		return v.v, v.ok
	}
	return 0, false
}

func (o *Over) buildOutput(emits []overEmit, res *overResults) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(o.mem, o.output)
	defer b.Release()
	kbs := make([]array.Builder, len(o.keyCols))
	for i, c := range o.keyCols {
		kbs[i] = b.Field(c)
	}
	rbs := make([]array.Builder, len(o.restCols))
	for i, c := range o.restCols {
		rbs[i] = b.Field(c)
	}
	slots := make([]int32, len(emits))
	for i, e := range emits {
		if err := decodeKey(o.keys[e.kid].key, kbs); err != nil {
			return nil, err
		}
		slots[i] = e.slot
	}
	o.rows.appendRows(rbs, slots)
	nin := o.input.NumFields()
	for a, ag := range o.aggs {
		ab := b.Field(nin + a)
		switch {
		case res.slots[a] != nil:
			s := make([]int32, len(emits))
			for i, e := range emits {
				s[i] = res.slots[a][e.res]
			}
			o.rows.cols[ag.col].appendSlots(ab, s)
		case ag.out.ID() == arrow.INT64:
			ib := ab.(*array.Int64Builder)
			for _, e := range emits {
				if res.valid[a][e.res] {
					ib.Append(res.ints[a][e.res])
				} else {
					ib.AppendNull()
				}
			}
		default:
			fb := ab.(*array.Float64Builder)
			for _, e := range emits {
				if res.valid[a][e.res] {
					fb.Append(res.floats[a][e.res])
				} else {
					fb.AppendNull()
				}
			}
		}
	}
	return b.NewRecordBatch(), nil
}

// sortKeys sorts key ids in state order: key group, then key bytes.
func (o *Over) sortKeys(kids []int32) {
	sortIDs(kids, func(id int32) int64 { return int64(o.keys[id].kg) }, func(id int32) string { return o.keys[id].key }, nil)
}

// buildState returns the state rows of kids (frame rows, then waiting rows
// by time and arrival) in batches of at most snapshotChunkRows rows.
func (o *Over) buildState(kids []int32) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	b := array.NewRecordBuilder(o.mem, o.state)
	defer b.Release()
	nk := len(o.keyCols)
	kgb := b.Field(0).(*array.Int32Builder)
	kbs := b.Fields()[1 : 1+nk]
	pb := b.Field(1 + nk).(*array.BooleanBuilder)
	tb := b.Field(2 + nk).(*array.TimestampBuilder)
	qb := b.Field(3 + nk).(*array.Int64Builder)
	rbs := b.Fields()[4+nk:]
	var slots []int32
	flush := func() {
		if len(slots) > 0 {
			o.rows.appendRows(rbs, slots)
			out = append(out, b.NewRecordBatch())
			slots = slots[:0]
		}
	}
	for _, kid := range kids {
		k := &o.keys[kid]
		slices.SortFunc(k.pend, cmpOverRow)
		for pi, rows := range [][]overRow{k.frame, k.pend} {
			for _, r := range rows {
				kgb.Append(k.kg)
				if err := decodeKey(k.key, kbs); err != nil {
					releaseBatches(out)
					return nil, err
				}
				pb.Append(pi == 1)
				tb.Append(arrow.Timestamp(r.ts))
				qb.Append(r.seq)
				if slots = append(slots, r.slot); len(slots) == snapshotChunkRows {
					flush()
				}
			}
		}
	}
	flush()
	return out, nil
}

func (o *Over) resetTracking() {
	for _, kid := range o.dirty {
		k := &o.keys[kid]
		k.listed = false
		if k.live {
			k.inBase = true
		}
	}
	o.dirty = o.dirty[:0]
	o.tombs = nil
}

// Dirty returns the rows of the keys created or changed since the last
// snapshot point (a delta upserts all rows of a changed key) and the keys
// removed since (one tombstone each).
func (o *Over) Dirty() (changed, removed int) {
	for _, kid := range o.dirty {
		if k := &o.keys[kid]; k.live {
			changed += len(k.frame) + len(k.pend)
		}
	}
	return changed, len(o.tombs)
}

// Snapshot returns the whole state (StateSchema) and makes now the snapshot
// point. Persist Watermark() beside it.
func (o *Over) Snapshot() ([]arrow.RecordBatch, error) {
	kids := make([]int32, 0, len(o.keyMap))
	for _, kid := range o.keyMap {
		kids = append(kids, kid)
	}
	o.sortKeys(kids)
	out, err := o.buildState(kids)
	if err != nil {
		return nil, fmt.Errorf("over %s: snapshot: %w", o.id, err)
	}
	o.resetTracking()
	return out, nil
}

// SnapshotDelta returns, since the last snapshot point, every row of each
// key created or changed (upserts, StateSchema: they replace all rows of
// their key) and each key removed (tombstones, TombstoneSchema), sorted by
// key_group and key bytes. It makes now the snapshot point; on error
// nothing is reset.
func (o *Over) SnapshotDelta() (upserts, tombstones []arrow.RecordBatch, err error) {
	var kids []int32
	for _, kid := range o.dirty {
		if k := &o.keys[kid]; k.live && len(k.frame)+len(k.pend) > 0 {
			kids = append(kids, kid)
		}
	}
	o.sortKeys(kids)
	if upserts, err = o.buildState(kids); err != nil {
		return nil, nil, fmt.Errorf("over %s: snapshot delta: %w", o.id, err)
	}
	tombs := slices.Clone(o.tombs)
	slices.SortFunc(tombs, func(a, b overTomb) int { return cmp.Or(cmp.Compare(a.kg, b.kg), strings.Compare(a.key, b.key)) })
	ts := o.TombstoneSchema()
	for lo := 0; lo < len(tombs); lo += snapshotChunkRows {
		b := array.NewRecordBuilder(o.mem, ts)
		kgb := b.Field(0).(*array.Int32Builder)
		kbs := b.Fields()[1:]
		for _, tb := range tombs[lo:min(len(tombs), lo+snapshotChunkRows)] {
			kgb.Append(tb.kg)
			if err := decodeKey(tb.key, kbs); err != nil {
				b.Release()
				releaseBatches(upserts)
				releaseBatches(tombstones)
				return nil, nil, fmt.Errorf("over %s: snapshot delta: %w", o.id, err)
			}
		}
		tombstones = append(tombstones, b.NewRecordBatch())
		b.Release()
	}
	o.resetTracking()
	return upserts, tombstones, nil
}

// overPick is a validated state row picked for this instance.
type overPick struct {
	key     string
	pending bool
	ts, seq int64
	row     int32
}

// pickRows validates the state rows of rec in [kgLo, kgHi).
func (o *Over) pickRows(rec arrow.RecordBatch, kgLo, kgHi int, buf []byte) ([]overPick, []byte, error) {
	rows, keys, buf, err := pickKeyRows(rec, o.keyKinds, o.k, kgLo, kgHi, buf)
	if err != nil {
		return nil, buf, err
	}
	nk := len(o.keyCols)
	pa := rec.Column(1 + nk).(*array.Boolean)
	ta := rec.Column(2 + nk).(*array.Timestamp)
	qa := rec.Column(3 + nk).(*array.Int64)
	out := make([]overPick, len(rows))
	for j, r32 := range rows {
		r := int(r32)
		if pa.IsNull(r) || ta.IsNull(r) || qa.IsNull(r) {
			return nil, buf, fmt.Errorf("row %d: null %s, %s or %s", r, ColOverPending, ColOverTime, ColOverSeq)
		}
		out[j] = overPick{key: keys[j], pending: pa.Value(r), ts: int64(ta.Value(r)), seq: qa.Value(r), row: r32}
	}
	return out, buf, nil
}

// restoreRows adds validated state rows of rec, calling onKey with each
// row's key first.
func (o *Over) restoreRows(rec arrow.RecordBatch, picks []overPick, onKey func(kid int32)) {
	if len(picks) == 0 {
		return
	}
	nk := len(o.keyCols)
	rest := make([]arrow.Array, len(o.restCols))
	for j := range rest {
		rest[j] = rec.Column(4 + nk + j)
	}
	defer o.rows.flush(rest) // the copies queued below
	for _, p := range picks {
		kid := o.keyID([]byte(p.key))
		onKey(kid)
		k := &o.keys[kid]
		r := overRow{slot: o.rows.addLater(int(p.row)), ts: p.ts, seq: p.seq}
		if p.pending {
			k.pend = append(k.pend, r)
		} else {
			k.frame = append(k.frame, r)
		}
		o.nrows++
		o.seq = max(o.seq, p.seq+1)
	}
}

// settle orders and checks the rows of restored keys, queues their waiting
// rows and makes them part of the snapshot point.
func (o *Over) settle(kids map[int32]bool) error {
	o.resetTracking()
	for kid := range kids {
		k := &o.keys[kid]
		if !k.live {
			continue
		}
		k.inBase = true
		slices.SortFunc(k.frame, cmpOverRow)
		slices.SortFunc(k.pend, cmpOverRow)
		if len(k.frame) > o.n {
			return fmt.Errorf("key group %d: %d frame rows for one key, more than rows=%d (rows changed or state corrupt)", k.kg, len(k.frame), o.n)
		}
		if len(k.frame) > 0 && len(k.pend) > 0 && cmpOverRow(k.pend[0], k.frame[len(k.frame)-1]) <= 0 {
			return fmt.Errorf("key group %d: a waiting row (time %d, arrival %d) orders before an emitted one (state corrupt)", k.kg, k.pend[0].ts, k.pend[0].seq)
		}
		if len(k.pend) > 0 {
			o.due.push(k.pend[0].ts, kid)
		}
	}
	return nil
}

// Restore adds the state rows whose key_group is in [kgLo, kgHi), skips the
// others, and raises the watermark to watermark. Schemas and key groups are
// validated before any state changes; after an error about a key's rows the
// instance must be discarded. Restore is a snapshot point.
func (o *Over) Restore(state []arrow.RecordBatch, kgLo, kgHi int, watermark int64) error {
	if kgLo < 0 || kgHi > o.k || kgLo > kgHi {
		return fmt.Errorf("over %s: restore: key-group range [%d,%d) outside [0,%d)", o.id, kgLo, kgHi, o.k)
	}
	picks := make([][]overPick, len(state))
	var buf []byte
	for bi, rec := range state {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), o.state) {
			return fmt.Errorf("over %s: restore: batch %d schema %s does not match state schema %s", o.id, bi, rec.Schema(), o.state)
		}
		var err error
		if picks[bi], buf, err = o.pickRows(rec, kgLo, kgHi, buf); err != nil {
			return fmt.Errorf("over %s: restore: batch %d %w", o.id, bi, err)
		}
	}
	touched := map[int32]bool{}
	for bi, rec := range state {
		o.restoreRows(rec, picks[bi], func(kid int32) { touched[kid] = true })
	}
	if err := o.settle(touched); err != nil {
		return fmt.Errorf("over %s: restore: %w", o.id, err)
	}
	o.wm = max(o.wm, watermark)
	return nil
}

// ApplyDelta applies one SnapshotDelta to an instance rebuilt with Restore
// from the base the delta follows (and the deltas before it, in order):
// tombstones remove their keys, then the upserts replace, key by key, all
// rows of the keys they name. Rows outside [kgLo, kgHi) are skipped. A
// tombstone of a key not held is an error (deltas out of order or state
// corrupt). ApplyDelta is a snapshot point.
func (o *Over) ApplyDelta(upserts, tombstones []arrow.RecordBatch, kgLo, kgHi int) error {
	if kgLo < 0 || kgHi > o.k || kgLo > kgHi {
		return fmt.Errorf("over %s: apply delta: key-group range [%d,%d) outside [0,%d)", o.id, kgLo, kgHi, o.k)
	}
	ts := o.TombstoneSchema()
	var buf []byte
	tkeys := make([][]string, len(tombstones))
	for bi, rec := range tombstones {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), ts) {
			return fmt.Errorf("over %s: apply delta: tombstone batch %d schema %s does not match tombstone schema %s", o.id, bi, rec.Schema(), ts)
		}
		var err error
		if _, tkeys[bi], buf, err = pickKeyRows(rec, o.keyKinds, o.k, kgLo, kgHi, buf); err != nil {
			return fmt.Errorf("over %s: apply delta: tombstone batch %d %w", o.id, bi, err)
		}
	}
	upicks := make([][]overPick, len(upserts))
	for bi, rec := range upserts {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), o.state) {
			return fmt.Errorf("over %s: apply delta: upsert batch %d schema %s does not match state schema %s", o.id, bi, rec.Schema(), o.state)
		}
		var err error
		if upicks[bi], buf, err = o.pickRows(rec, kgLo, kgHi, buf); err != nil {
			return fmt.Errorf("over %s: apply delta: upsert batch %d %w", o.id, bi, err)
		}
	}
	for bi, keys := range tkeys {
		for j, key := range keys {
			kid, ok := o.keyMap[key]
			if !ok {
				return fmt.Errorf("over %s: apply delta: tombstone batch %d row %d: key not held (deltas out of order or state corrupt)", o.id, bi, j)
			}
			o.dropKey(kid, false)
		}
	}
	touched := map[int32]bool{}
	for bi, rec := range upserts {
		o.restoreRows(rec, upicks[bi], func(kid int32) {
			if !touched[kid] {
				touched[kid] = true
				o.clearKey(kid) // the upserts replace all rows of the key
			}
		})
	}
	if err := o.settle(touched); err != nil {
		return fmt.Errorf("over %s: apply delta: %w", o.id, err)
	}
	return nil
}
