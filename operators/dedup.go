package operators

import (
	"cmp"
	"crypto/sha256"
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

// Dedup semantics.
//
// A dedup stage passes on one row per key and scope. The rows of a key,
// ordered by (event time, arrival), form scopes greedily: the first row
// opens the scope [t, t+within); every row of the key with an event time in
// it belongs to it; the first row at or after t+within opens the next scope.
// keep: first emits the first row of each scope (lowest event time, ties to
// the earliest arrival), keep: last the last one (greatest event time, ties
// to the latest arrival). Output rows are input rows, unchanged (float key
// columns come out canonical: -0 as 0, every NaN as one NaN).
//
// Dedup runs on event time, so its result does not depend on arrival order,
// batching, parallelism, restarts or rescales. With cutoff = watermark -
// allowed_lateness:
//
//   - a row with event time >= cutoff is accepted: it joins its key's open
//     scope if it falls in it, else it waits (state) until the cutoff passes
//     it, when rows are ordered by (event time, arrival) and form scopes;
//   - a row with event time < cutoff is accepted only if it falls in its
//     key's open scope (then the scope is the same as if it had come in
//     time); otherwise it is late: returned as a late row, never dropped;
//   - keep: first emits a scope's first row as soon as the cutoff passes its
//     event time (it is final then) and keeps only the scope's bounds until
//     the cutoff reaches the scope's end, to drop its duplicates;
//   - keep: last emits a scope's last row when the cutoff reaches the
//     scope's end t+within.
//
// Advance's rows are sorted by scope start, then key bytes. State rows: per
// key, its open scope (keep: last with the scope's last row so far) and the
// rows waiting for the cutoff (one per event time: keep: first keeps the
// earliest arrival, keep: last the latest), so state is one row per key plus
// the rows ahead of the watermark. Null is a key value like any other; the
// event time must not be null.

// DedupKeep says which row of a scope a dedup stage keeps.
type DedupKeep int

// The rows a dedup stage can keep.
const (
	KeepFirst DedupKeep = iota + 1 // the first row of each scope
	KeepLast                       // the last row of each scope
)

// String returns the keep mode as written in a pipeline spec.
func (k DedupKeep) String() string {
	switch k {
	case KeepFirst:
		return "first"
	case KeepLast:
		return "last"
	}
	return fmt.Sprintf("DedupKeep(%d)", int(k))
}

// ParseDedupKeep parses "first" or "last".
func ParseDedupKeep(s string) (DedupKeep, error) {
	switch strings.TrimSpace(s) {
	case "first":
		return KeepFirst, nil
	case "last":
		return KeepLast, nil
	}
	return 0, fmt.Errorf("dedup keep %q: want first or last", s)
}

// DedupSpec declares a dedup stage.
type DedupSpec struct {
	ID              string        // operator id, used in state paths and errors
	Keys            []string      // key columns (at least one)
	EventTime       string        // timestamp[us] column
	Keep            DedupKeep     // KeepFirst or KeepLast
	Within          time.Duration // scope length: a key's scope is [t_first, t_first+Within)
	AllowedLateness time.Duration // cutoff = watermark - AllowedLateness
}

// Reserved columns of the dedup state schema.
const (
	ColDedupPending = "dedup.pending" // true: a row waiting for the cutoff; false: the open scope
	ColDedupTime    = "dedup.time"    // the scope's start, or the waiting row's event time
	ColDedupSeq     = "dedup.seq"     // arrival sequence of the row held (null: none)
)

const dedupStateVersion = "floe-dedup-state/v1"

// dedupKey is the state of one key.
type dedupKey struct {
	bytes          string
	h              uint32 // keyIdx's hash of bytes
	kg             int32
	open           bool  // a scope is open
	start          int64 // the open scope's start
	held           int32 // keep last: slot of the open scope's last row; -1 none
	heldT, heldSeq int64
	pend           []dedupPend // rows waiting for the cutoff, by event time (distinct)
	live           bool
	listed         bool // in Dedup.dirty
	inBase         bool // existed at the last snapshot point
}

// dedupPend is a row waiting for the cutoff.
type dedupPend struct {
	t, seq int64
	slot   int32
}

func (k *dedupKey) rows() int {
	n := len(k.pend)
	if k.open {
		n++
	}
	return n
}

// dedupTomb is a key of the last snapshot point whose state was removed.
type dedupTomb struct {
	key string
	kg  int32
}

// dedupEmit is a row Advance emits.
type dedupEmit struct {
	start int64
	key   string
	slot  int32
}

// Dedup is one instance (subtask) of a dedup stage; see "Dedup semantics"
// above. It is not safe for concurrent use.
type Dedup struct {
	spec     DedupSpec
	id       string
	k        int
	input    *arrow.Schema
	state    *arrow.Schema
	keyCols  []int
	keyKinds []byte
	tsCol    int
	restCols []int // input columns that are not keys, in input order
	stateTs  int   // the event time column's index in the state schema
	within   int64
	lateness int64
	wm       int64
	seq      int64
	mem      memory.Allocator

	rows     *heldRows
	keyIdx   keyIndex // key ids of the live keys by key (bytes)
	karena   keyArena // the keys' bytes (dedupKey.bytes points into it)
	keys     paged[dedupKey]
	freeKeys []int32
	nrows    int
	due      dueQueue

	dirty []int32
	tombs []dedupTomb

	enc  keyEncoder
	buf  []byte
	late []int32
	rest []arrow.Array
	ids  []int32
}

var _ Stateful = (*Dedup)(nil)

// NewDedup validates spec against the input schema and returns an empty
// dedup instance for a pipeline with maxParallelism key groups.
func NewDedup(spec DedupSpec, input *arrow.Schema, maxParallelism int) (*Dedup, error) {
	id := spec.ID
	if id == "" {
		id = "dedup"
	}
	op := "dedup " + id
	fail := func(format string, args ...any) (*Dedup, error) {
		return nil, fmt.Errorf(op+": "+format, args...)
	}
	if input == nil {
		return fail("nil input schema")
	}
	if !keygroup.ValidCount(maxParallelism) {
		return fail("max parallelism %d out of range [1,%d]", maxParallelism, keygroup.Max)
	}
	d := &Dedup{spec: spec, id: id, k: maxParallelism, input: input, wm: math.MinInt64,
		mem: memory.DefaultAllocator, keyIdx: newKeyIndex(0)}
	switch spec.Keep {
	case KeepFirst, KeepLast:
	default:
		return fail("keep %v: want first or last", spec.Keep)
	}
	var err error
	if d.within, err = durMicros(op, "within", spec.Within, true); err != nil {
		return nil, err
	}
	if d.lateness, err = durMicros(op, "allowed lateness", spec.AllowedLateness, false); err != nil {
		return nil, err
	}
	if d.tsCol = uniqueColumn(input, spec.EventTime); d.tsCol < 0 {
		return fail("event time column %q not found (or ambiguous) in input schema%s", spec.EventTime, columnHint(spec.EventTime, input))
	}
	if !isEventTimeField(input.Field(d.tsCol)) {
		return fail("event time column %q has type %s; want timestamp[us, tz=UTC]", spec.EventTime, input.Field(d.tsCol).Type)
	}
	if len(spec.Keys) == 0 {
		return fail("no key columns: dedup needs at least one (the columns that make two rows duplicates)")
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
		isKey[c] = true
		d.keyCols = append(d.keyCols, c)
	}
	if d.keyKinds, err = keyKinds(input, d.keyCols); err != nil {
		return fail("%v", err)
	}
	fields := []arrow.Field{{Name: ColKeyGroup, Type: arrow.PrimitiveTypes.Int32}}
	for _, c := range d.keyCols {
		fields = append(fields, nullableStateField(input.Field(c)))
	}
	fields = append(fields,
		arrow.Field{Name: ColDedupPending, Type: arrow.FixedWidthTypes.Boolean},
		arrow.Field{Name: ColDedupTime, Type: eventTimeType},
		arrow.Field{Name: ColDedupSeq, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	var types []arrow.DataType
	var names []string
	for c, f := range input.Fields() {
		switch f.Name {
		case ColKeyGroup, ColDedupPending, ColDedupTime, ColDedupSeq:
			return fail("input column %q has a name the dedup state reserves; rename it with a projection", f.Name)
		}
		if isKey[c] {
			continue
		}
		d.restCols = append(d.restCols, c)
		types = append(types, f.Type)
		names = append(names, f.Name)
		fields = append(fields, nullableStateField(f))
	}
	if d.rows, err = newHeldRows(types, names); err != nil {
		return fail("%v", err)
	}
	d.state = arrow.NewSchema(fields, nil)
	d.stateTs = uniqueColumn(d.state, spec.EventTime)
	return d, nil
}

// nullableStateField is f as a nullable state column without metadata.
func nullableStateField(f arrow.Field) arrow.Field {
	f.Nullable = true
	f.Metadata = arrow.Metadata{}
	return f
}

// ID returns the operator id.
func (d *Dedup) ID() string { return d.id }

// NumInputs is 1.
func (d *Dedup) NumInputs() int { return 1 }

// InputSchemaOf returns the input schema.
func (d *Dedup) InputSchemaOf(int) *arrow.Schema { return d.input }

// KeyColumns returns the key column indices of the input.
func (d *Dedup) KeyColumns(int) []int { return d.keyCols }

// OutputSchema is the input schema: dedup passes rows on unchanged.
func (d *Dedup) OutputSchema() *arrow.Schema { return d.input }

// StateSchema is the schema of Snapshot's batches: key_group (int32), the
// key columns, dedup.pending (bool), dedup.time (timestamp[us, UTC]),
// dedup.seq (int64), then the other input columns (the row held, null for
// an open scope of keep: first). Rows are sorted by key_group, key bytes,
// then the scope row before the waiting rows by event time.
func (d *Dedup) StateSchema() *arrow.Schema { return d.state }

// TombstoneSchema is key_group and the key columns: a tombstone removes all
// state of its key.
func (d *Dedup) TombstoneSchema() *arrow.Schema {
	return arrow.NewSchema(d.state.Fields()[:1+len(d.keyCols)], nil)
}

// StateFingerprint identifies the state layout and meaning: the format
// version, keep, within and the state schema. A snapshot can be restored
// into a Dedup with the same fingerprint.
func (d *Dedup) StateFingerprint() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nkeep=%s within=%d\n", dedupStateVersion, d.spec.Keep, d.within)
	for _, f := range d.state.Fields() {
		fmt.Fprintf(&b, "%s:%s\n", f.Name, f.Type)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "dedup-v1-" + hex.EncodeToString(sum[:16])
}

// SetAllocator makes d allocate the batches it returns from mem (nil: the
// default allocator).
func (d *Dedup) SetAllocator(mem memory.Allocator) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	d.mem = mem
}

// Watermark is the largest watermark passed to Advance or Restore.
func (d *Dedup) Watermark() int64 { return d.wm }

// Len is the number of state rows: open scopes plus waiting rows.
func (d *Dedup) Len() int { return d.nrows }

func (d *Dedup) cutoff() int64 { return clampSub(d.wm, d.lateness) }

// compactKeys copies the bytes of the live keys into a fresh arena
// (keyArena): strings over the old chunks stay valid while referenced.
func (d *Dedup) compactKeys() {
	d.karena.compact(func(move func(string) string) {
		for kid := range int32(d.keys.len()) {
			if k := d.keys.at(kid); k.live {
				k.bytes = move(k.bytes)
			}
		}
	})
}

// findKey returns the id of a live key, if there is one.
func (d *Dedup) findKey(key string) (int32, bool) {
	return d.keyIdx.lookup(d.keyIdx.hash(key), func(k int32) bool { return d.keys.at(k).bytes == key })
}

func (d *Dedup) findKeyHash(key []byte, h uint32) (int32, bool) {
	return d.keyIdx.lookup(h, func(k int32) bool { return d.keys.at(k).bytes == string(key) })
}

// newKey creates the id of a key that is not live.
func (d *Dedup) newKey(key []byte) int32 {
	return d.newKeyHash(key, uint32(maphash.Bytes(d.keyIdx.seed, key)))
}

func (d *Dedup) newKeyHash(key []byte, h uint32) int32 {
	if d.karena.wasteful() {
		d.compactKeys()
	}
	k := dedupKey{bytes: d.karena.putString(key), h: h, kg: int32(keygroup.Of(key, d.k)), held: -1, live: true}
	var kid int32
	if n := len(d.freeKeys); n > 0 {
		kid = d.freeKeys[n-1]
		d.freeKeys = d.freeKeys[:n-1]
		k.listed = d.keys.at(kid).listed // still in d.dirty
		k.pend = d.keys.at(kid).pend[:0]
		*d.keys.at(kid) = k
	} else {
		kid = d.keys.push(k)
	}
	d.keyIdx.add(h, kid)
	return kid
}

func (d *Dedup) touch(kid int32) {
	if k := d.keys.at(kid); !k.listed {
		k.listed = true
		d.dirty = append(d.dirty, kid)
	}
}

// clearKey releases all rows of kid (it stays live).
func (d *Dedup) clearKey(kid int32) {
	k := d.keys.at(kid)
	if k.held >= 0 {
		d.rows.release(k.held)
	}
	for _, p := range k.pend {
		d.rows.release(p.slot)
	}
	d.nrows -= k.rows()
	k.open, k.held, k.pend = false, -1, k.pend[:0]
}

// dropKey removes kid, recording a tombstone when it existed at the last
// snapshot point (track).
func (d *Dedup) dropKey(kid int32, track bool) {
	d.clearKey(kid)
	k := d.keys.at(kid)
	if track && k.inBase {
		d.tombs = append(d.tombs, dedupTomb{key: k.bytes, kg: k.kg})
	}
	d.keyIdx.remove(k.h, kid)
	d.karena.release(uint32(len(k.bytes)))
	k.live, k.inBase, k.bytes = false, false, ""
	d.freeKeys = append(d.freeKeys, kid)
}

// pushDue queues kid at the first cutoff at which it has work.
func (d *Dedup) pushDue(kid int32) {
	k := d.keys.at(kid)
	due := int64(math.MaxInt64)
	if len(k.pend) > 0 {
		due = satAdd(k.pend[0].t, 1)
	}
	if k.open {
		due = min(due, satAdd(k.start, d.within))
	}
	d.due.push(due, kid)
}

// BeginEpoch starts epoch e's arrival numbers (ArrivalOrdered).
func (d *Dedup) BeginEpoch(e int64) { d.seq = max(d.seq, EpochArrivalBase(e)) }

// ProcessInput consumes rows sel of rec (nil: all); see "Dedup semantics"
// for which rows are late. The late batch (input rows) is the caller's to
// release; when every row of a whole batch is late it is rec itself, with
// an extra reference. Event times must not be null.
func (d *Dedup) ProcessInput(_ int, rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	if rec == nil || rec.NumRows() == 0 {
		return nil, nil
	}
	n := int(rec.NumRows())
	if sel != nil && len(sel) == 0 {
		d.seq += int64(n)
		return nil, nil
	}
	if !sameFields(rec.Schema(), d.input) {
		return nil, fmt.Errorf("dedup %s: process: batch schema %s does not match input schema %s", d.id, rec.Schema(), d.input)
	}
	tsArr, ok := rec.Column(d.tsCol).(*array.Timestamp)
	if !ok {
		return nil, fmt.Errorf("dedup %s: process: event time column is %T", d.id, rec.Column(d.tsCol))
	}
	if tsArr.NullN() > 0 {
		return nil, fmt.Errorf("dedup %s: process: event time column %q has %d nulls", d.id, d.spec.EventTime, tsArr.NullN())
	}
	tsv := tsArr.TimestampValues()
	cols := make([]arrow.Array, len(d.keyCols))
	for i, c := range d.keyCols {
		cols[i] = rec.Column(c)
	}
	d.enc.bind(d.keyKinds, cols)
	d.rest = d.rest[:0]
	for _, c := range d.restCols {
		d.rest = append(d.rest, rec.Column(c))
	}
	c := d.cutoff()
	late := d.late[:0]
	visit := func(i int) {
		t, seq := int64(tsv[i]), d.seq+int64(i)
		d.buf = d.enc.encode(d.buf[:0], i)
		h := uint32(maphash.Bytes(d.keyIdx.seed, d.buf))
		kid, ok := d.findKeyHash(d.buf, h)
		if t < c {
			if ok && d.inScope(kid, t) {
				d.join(kid, i, t, seq)
			} else {
				late = append(late, int32(i))
			}
			return
		}
		if !ok {
			kid = d.newKeyHash(d.buf, h)
		}
		if d.inScope(kid, t) {
			d.join(kid, i, t, seq)
			return
		}
		d.addPending(kid, i, t, seq)
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
	d.rows.flush(d.rest) // the copies join and addPending queued
	d.seq += int64(n)
	d.late = late
	if len(late) == 0 {
		return nil, nil
	}
	if sel == nil && len(late) == n {
		rec.Retain()
		return rec, nil
	}
	out, err := takeRows(rec, late, d.mem)
	if err != nil {
		return nil, fmt.Errorf("dedup %s: process: late rows: %w", d.id, err)
	}
	return out, nil
}

// inScope reports whether event time t falls in kid's open scope.
func (d *Dedup) inScope(kid int32, t int64) bool {
	k := d.keys.at(kid)
	return k.open && k.start <= t && t < satAdd(k.start, d.within)
}

// join adds row i (event time t, arrival seq) to kid's open scope.
func (d *Dedup) join(kid int32, i int, t, seq int64) {
	k := d.keys.at(kid)
	if d.spec.Keep == KeepFirst || !laterRow(t, seq, k.heldT, k.heldSeq) {
		return // keep first: a later row of a scope whose first row is final
	}
	d.rows.putLater(k.held, i)
	k.heldT, k.heldSeq = t, seq
	d.touch(kid)
}

// later orders rows by (event time, arrival).
func laterRow(t, seq, t2, seq2 int64) bool { return t > t2 || (t == t2 && seq > seq2) }

// addPending makes row i wait for the cutoff; of rows of a key with the
// same event time keep first keeps the earliest arrival, keep last the
// latest (this one: arrivals only grow).
func (d *Dedup) addPending(kid int32, i int, t, seq int64) {
	k := d.keys.at(kid)
	pos, found := len(k.pend), false
	if pos > 0 && k.pend[pos-1].t >= t { // else the common case: after every waiting row
		pos, found = slices.BinarySearchFunc(k.pend, t, func(p dedupPend, t int64) int { return cmp.Compare(p.t, t) })
	}
	if found {
		if d.spec.Keep == KeepLast && seq > k.pend[pos].seq {
			d.rows.putLater(k.pend[pos].slot, i)
			k.pend[pos].seq = seq
			d.touch(kid)
		}
		return
	}
	k.pend = slices.Insert(k.pend, pos, dedupPend{t: t, seq: seq, slot: d.rows.addLater(i)})
	d.nrows++
	d.touch(kid)
	if pos == 0 {
		d.pushDue(kid)
	}
}

// Advance moves the cutoff to wm - allowed lateness and emits the rows that
// became final (see "Dedup semantics"), sorted by scope start then key
// bytes. A wm not larger than Watermark() is ignored; nil when nothing is
// due. The caller releases the batch.
func (d *Dedup) Advance(wm int64) (arrow.RecordBatch, error) {
	if wm <= d.wm {
		return nil, nil
	}
	d.wm = wm
	c := d.cutoff()
	d.ids = d.due.popDue(c, d.ids[:0])
	emits := make([]dedupEmit, 0, len(d.ids)) // a due key emits one scope, seldom more
	for _, kid := range d.ids {
		emits = d.advanceKey(kid, c, emits)
	}
	if len(emits) == 0 {
		return nil, nil
	}
	order := make([]int32, len(emits))
	for i := range order {
		order[i] = int32(i)
	}
	sortIDs(order, func(i int32) int64 { return emits[i].start }, func(i int32) string { return emits[i].key }, nil)
	sorted := make([]dedupEmit, len(emits))
	for i, j := range order {
		sorted[i] = emits[j]
	}
	emits = sorted
	rec, err := d.buildOutput(emits)
	slots := make([]int32, len(emits))
	for i, e := range emits {
		slots[i] = e.slot
	}
	d.rows.releaseAll(slots)
	if err != nil {
		return nil, fmt.Errorf("dedup %s: advance to %d: %w", d.id, wm, err)
	}
	return rec, nil
}

// advanceKey forms kid's scopes from its rows with event time < c and
// closes a scope that ends at or before c, appending what is emitted (its
// slots are released by the caller).
func (d *Dedup) advanceKey(kid int32, c int64, emits []dedupEmit) []dedupEmit {
	if int(kid) >= d.keys.len() || !d.keys.at(kid).live {
		return emits // stale queue entry
	}
	k := d.keys.at(kid)
	changed := false
	i := 0
	for ; i < len(k.pend) && k.pend[i].t < c; i++ {
		p := k.pend[i]
		changed = true
		d.nrows--
		if k.open && p.t < satAdd(k.start, d.within) {
			// Joins the open scope (formed by an earlier row of this call).
			if d.spec.Keep == KeepLast && laterRow(p.t, p.seq, k.heldT, k.heldSeq) {
				d.rows.release(k.held)
				k.held, k.heldT, k.heldSeq = p.slot, p.t, p.seq
			} else {
				d.rows.release(p.slot)
			}
			continue
		}
		if k.open && d.spec.Keep == KeepLast {
			emits = append(emits, dedupEmit{start: k.start, key: k.bytes, slot: k.held})
		}
		if !k.open {
			d.nrows++
		}
		k.open, k.start = true, p.t
		if d.spec.Keep == KeepFirst {
			emits = append(emits, dedupEmit{start: p.t, key: k.bytes, slot: p.slot})
			k.held = -1
		} else {
			k.held, k.heldT, k.heldSeq = p.slot, p.t, p.seq
		}
	}
	if i > 0 {
		k.pend = slices.Delete(k.pend, 0, i)
	}
	if k.open && satAdd(k.start, d.within) <= c {
		if d.spec.Keep == KeepLast {
			emits = append(emits, dedupEmit{start: k.start, key: k.bytes, slot: k.held})
		}
		k.open, k.held = false, -1
		d.nrows--
		changed = true
	}
	if k.rows() == 0 {
		d.dropKey(kid, true)
		return emits
	}
	if changed {
		d.touch(kid)
		d.pushDue(kid)
	}
	return emits
}

// buildOutput makes the output batch of emitted rows.
func (d *Dedup) buildOutput(emits []dedupEmit) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(d.mem, d.input)
	defer b.Release()
	b.Reserve(len(emits))
	kbs := make([]array.Builder, len(d.keyCols))
	for i, c := range d.keyCols {
		kbs[i] = b.Field(c)
	}
	rbs := make([]array.Builder, len(d.restCols))
	for i, c := range d.restCols {
		rbs[i] = b.Field(c)
	}
	slots := make([]int32, len(emits))
	for i, e := range emits {
		if err := decodeKey(e.key, kbs); err != nil {
			return nil, err
		}
		slots[i] = e.slot
	}
	d.rows.appendRows(rbs, slots)
	return b.NewRecordBatch(), nil
}

// sortKeys sorts key ids by key group, then key bytes: the state row order.
func (d *Dedup) sortKeys(kids []int32) {
	sortIDs(kids, func(id int32) int64 { return int64(d.keys.at(id).kg) }, func(id int32) string { return d.keys.at(id).bytes }, nil)
}

// dedupStateRow is one state row buildState writes.
type dedupStateRow struct {
	kid     int32
	pending bool
	hasSeq  bool
	t, seq  int64
}

// buildState returns the state rows of kids in batches of at most
// snapshotChunkRows rows.
func (d *Dedup) buildState(kids []int32) ([]arrow.RecordBatch, error) {
	var rows []dedupStateRow
	var slots []int32
	for _, kid := range kids {
		k := d.keys.at(kid)
		if k.open {
			rows = append(rows, dedupStateRow{kid: kid, t: k.start, seq: k.heldSeq, hasSeq: k.held >= 0})
			slots = append(slots, k.held)
		}
		for _, p := range k.pend {
			rows = append(rows, dedupStateRow{kid: kid, pending: true, t: p.t, seq: p.seq, hasSeq: true})
			slots = append(slots, p.slot)
		}
	}
	var out []arrow.RecordBatch
	b := array.NewRecordBuilder(d.mem, d.state)
	defer b.Release()
	nk := len(d.keyCols)
	kgb := b.Field(0).(*array.Int32Builder)
	kbs := b.Fields()[1 : 1+nk]
	pb := b.Field(1 + nk).(*array.BooleanBuilder)
	tb := b.Field(2 + nk).(*array.TimestampBuilder)
	sb := b.Field(3 + nk).(*array.Int64Builder)
	rbs := b.Fields()[4+nk:]
	for lo := 0; lo < len(rows); lo += snapshotChunkRows {
		hi := min(len(rows), lo+snapshotChunkRows)
		b.Reserve(hi - lo)
		for _, r := range rows[lo:hi] {
			k := d.keys.at(r.kid)
			kgb.Append(k.kg)
			if err := decodeKey(k.bytes, kbs); err != nil {
				releaseBatches(out)
				return nil, err
			}
			pb.Append(r.pending)
			tb.Append(arrow.Timestamp(r.t))
			if r.hasSeq {
				sb.Append(r.seq)
			} else {
				sb.AppendNull()
			}
		}
		d.rows.appendRows(rbs, slots[lo:hi])
		out = append(out, b.NewRecordBatch())
	}
	return out, nil
}

// resetTracking makes the current state the snapshot point.
func (d *Dedup) resetTracking() {
	for _, kid := range d.dirty {
		k := d.keys.at(kid)
		k.listed = false
		if k.live {
			k.inBase = true
		}
	}
	d.dirty = d.dirty[:0]
	d.tombs = nil
}

// Dirty returns the state rows of the keys created or changed since the
// last snapshot point (a delta upserts all rows of a changed key) and the
// keys removed since (one tombstone each). It costs O(changed keys).
func (d *Dedup) Dirty() (changed, removed int) {
	for _, kid := range d.dirty {
		if k := d.keys.at(kid); k.live {
			changed += k.rows()
		}
	}
	return changed, len(d.tombs)
}

// Snapshot returns the whole state (StateSchema, sorted by key_group then key
// bytes) and makes now the snapshot point. Persist Watermark() beside it.
func (d *Dedup) Snapshot() ([]arrow.RecordBatch, error) {
	kids := make([]int32, 0, d.keyIdx.n)
	for kid := range int32(d.keys.len()) {
		if d.keys.at(kid).live {
			kids = append(kids, kid)
		}
	}
	d.sortKeys(kids)
	out, err := d.buildState(kids)
	if err != nil {
		return nil, fmt.Errorf("dedup %s: snapshot: %w", d.id, err)
	}
	d.resetTracking()
	return out, nil
}

// SnapshotDelta returns, since the last snapshot point, every state row of
// each key created or changed (upserts, StateSchema: they replace all state
// of their key) and each key removed (tombstones, TombstoneSchema; a key
// removed and created again has both), sorted by key_group then key bytes.
// It makes now the snapshot point; on error nothing is reset.
func (d *Dedup) SnapshotDelta() (upserts, tombstones []arrow.RecordBatch, err error) {
	var kids []int32
	for _, kid := range d.dirty {
		if d.keys.at(kid).live {
			kids = append(kids, kid)
		}
	}
	d.sortKeys(kids)
	upserts, err = d.buildState(kids)
	if err != nil {
		return nil, nil, fmt.Errorf("dedup %s: snapshot delta: %w", d.id, err)
	}
	tombs := slices.Clone(d.tombs)
	slices.SortFunc(tombs, func(a, b dedupTomb) int {
		return cmp.Or(cmp.Compare(a.kg, b.kg), strings.Compare(a.key, b.key))
	})
	tombstones, err = keyTombstoneBatches(d.mem, d.TombstoneSchema(), len(tombs), func(i int) (int32, string) { return tombs[i].kg, tombs[i].key })
	if err != nil {
		releaseBatches(upserts)
		return nil, nil, fmt.Errorf("dedup %s: snapshot delta: %w", d.id, err)
	}
	d.resetTracking()
	return upserts, tombstones, nil
}

// keyTombstoneBatches builds batches of key_group + key columns (+ any
// columns after them the caller fills through extra) for n tombstones.
func keyTombstoneBatches(mem memory.Allocator, schema *arrow.Schema, n int, at func(i int) (int32, string)) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for lo := 0; lo < n; lo += snapshotChunkRows {
		b := array.NewRecordBuilder(mem, schema)
		kgb := b.Field(0).(*array.Int32Builder)
		kbs := b.Fields()[1:]
		for i := lo; i < min(n, lo+snapshotChunkRows); i++ {
			kg, key := at(i)
			kgb.Append(kg)
			if err := decodeKey(key, kbs); err != nil {
				b.Release()
				releaseBatches(out)
				return nil, err
			}
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out, nil
}

// dedupRow is a validated state row picked for this instance.
type dedupRow struct {
	key     string
	pending bool
	t       int64 // dedup.time
	seq     int64
	hasSeq  bool
	rowT    int64 // the held row's event time
	row     int32
}

// pickKeyRows validates key_group and the key columns of rows of rec (state or
// tombstone layout) and returns, per row in [kgLo, kgHi), its row index and
// encoded key.
func pickKeyRows(rec arrow.RecordBatch, keyKinds []byte, k, kgLo, kgHi int, buf []byte) ([]int32, []string, []byte, error) {
	nk := len(keyKinds)
	kgs := rec.Column(0).(*array.Int32)
	if kgs.NullN() > 0 {
		return nil, nil, buf, fmt.Errorf("%d null key groups", kgs.NullN())
	}
	var enc keyEncoder
	enc.bind(keyKinds, rec.Columns()[1:1+nk])
	var rows []int32
	var keys []string
	for r, kg32 := range kgs.Int32Values() {
		kg := int(kg32)
		if kg < 0 || kg >= k {
			return nil, nil, buf, fmt.Errorf("row %d: key group %d outside [0,%d) (max parallelism changed or state corrupt)", r, kg, k)
		}
		if kg < kgLo || kg >= kgHi {
			continue
		}
		buf = enc.encode(buf[:0], r)
		if got := keygroup.Of(buf, k); got != kg {
			return nil, nil, buf, fmt.Errorf("row %d: key hashes to key group %d, row says %d (max parallelism changed or state corrupt)", r, got, kg)
		}
		rows = append(rows, int32(r))
		keys = append(keys, string(buf))
	}
	return rows, keys, buf, nil
}

// pickState validates the state rows of rec in [kgLo, kgHi).
func (d *Dedup) pickState(rec arrow.RecordBatch, kgLo, kgHi int, buf []byte) ([]dedupRow, []byte, error) {
	rows, keys, buf, err := pickKeyRows(rec, d.keyKinds, d.k, kgLo, kgHi, buf)
	if err != nil {
		return nil, buf, err
	}
	nk := len(d.keyCols)
	pa := rec.Column(1 + nk).(*array.Boolean)
	ta := rec.Column(2 + nk).(*array.Timestamp)
	sa := rec.Column(3 + nk).(*array.Int64)
	rt := rec.Column(d.stateTs).(*array.Timestamp)
	out := make([]dedupRow, len(rows))
	for j, r32 := range rows {
		r := int(r32)
		if pa.IsNull(r) || ta.IsNull(r) {
			return nil, buf, fmt.Errorf("row %d: null %s or %s", r, ColDedupPending, ColDedupTime)
		}
		p := dedupRow{key: keys[j], pending: pa.Value(r), t: int64(ta.Value(r)), row: r32}
		held := p.pending || d.spec.Keep == KeepLast
		if held {
			if sa.IsNull(r) || rt.IsNull(r) {
				return nil, buf, fmt.Errorf("row %d: a held row needs %s and event time %q", r, ColDedupSeq, d.spec.EventTime)
			}
			p.seq, p.hasSeq, p.rowT = sa.Value(r), true, int64(rt.Value(r))
			if p.pending && p.rowT != p.t {
				return nil, buf, fmt.Errorf("row %d: waiting row with event time %d says %s %d", r, p.rowT, ColDedupTime, p.t)
			}
		}
		out[j] = p
	}
	return out, buf, nil
}

// restoreRows adds validated state rows of rec, calling onKey with each
// row's key first; a row that duplicates state held is an error.
func (d *Dedup) restoreRows(rec arrow.RecordBatch, picks []dedupRow, onKey func(kid int32)) error {
	if len(picks) == 0 {
		return nil
	}
	rest := make([]arrow.Array, 0, len(d.restCols))
	nk := len(d.keyCols)
	for j := range d.restCols {
		rest = append(rest, rec.Column(4+nk+j))
	}
	defer d.rows.flush(rest) // the copies queued below
	for _, p := range picks {
		kid, ok := d.findKey(p.key)
		if !ok {
			kid = d.newKey([]byte(p.key))
		}
		onKey(kid)
		k := d.keys.at(kid)
		if !p.pending {
			if k.open {
				return fmt.Errorf("row %d: a second open scope for its key", p.row)
			}
			k.open, k.start, k.held = true, p.t, -1
			if d.spec.Keep == KeepLast {
				k.held, k.heldT, k.heldSeq = d.rows.addLater(int(p.row)), p.rowT, p.seq
			}
		} else {
			pos, found := slices.BinarySearchFunc(k.pend, p.t, func(q dedupPend, t int64) int { return cmp.Compare(q.t, t) })
			if found {
				return fmt.Errorf("row %d: a second waiting row at %d for its key", p.row, p.t)
			}
			k.pend = slices.Insert(k.pend, pos, dedupPend{t: p.t, seq: p.seq, slot: d.rows.addLater(int(p.row))})
		}
		d.nrows++
		if p.hasSeq {
			d.seq = max(d.seq, p.seq+1)
		}
	}
	return nil
}

// Restore adds the state rows whose key_group is in [kgLo, kgHi), skips the
// others, and raises the watermark to watermark. Schemas, key groups and
// null columns are validated before any state changes; after an error
// about duplicate rows the instance must be discarded. Restore is a
// snapshot point.
func (d *Dedup) Restore(state []arrow.RecordBatch, kgLo, kgHi int, watermark int64) error {
	if kgLo < 0 || kgHi > d.k || kgLo > kgHi {
		return fmt.Errorf("dedup %s: restore: key-group range [%d,%d) outside [0,%d)", d.id, kgLo, kgHi, d.k)
	}
	picks := make([][]dedupRow, len(state))
	var buf []byte
	for bi, rec := range state {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), d.state) {
			return fmt.Errorf("dedup %s: restore: batch %d schema %s does not match state schema %s", d.id, bi, rec.Schema(), d.state)
		}
		var err error
		if picks[bi], buf, err = d.pickState(rec, kgLo, kgHi, buf); err != nil {
			return fmt.Errorf("dedup %s: restore: batch %d %w", d.id, bi, err)
		}
	}
	touched := map[int32]bool{}
	for bi, rec := range state {
		if err := d.restoreRows(rec, picks[bi], func(kid int32) { touched[kid] = true }); err != nil {
			return fmt.Errorf("dedup %s: restore: batch %d %w", d.id, bi, err)
		}
	}
	d.settle(touched)
	d.wm = max(d.wm, watermark)
	return nil
}

// maxReserve bounds what ReserveRestore reserves ahead: beyond it the
// tables grow as rows come.
const maxReserve = 8 << 20

// ReserveRestore makes room for up to rows more state rows (at most one
// key each), before Restore and ApplyDelta: the key table, the key map
// (when empty: a Go map cannot grow ahead otherwise) and the held rows'
// slots.
func (d *Dedup) ReserveRestore(rows int) {
	rows = min(rows, maxReserve)
	if rows <= 0 {
		return
	}
	d.keys.reserve(rows)
	d.keyIdx.presize(rows)
	d.rows.reserve(rows)
}

// settle makes restored keys part of the snapshot point and queues them.
func (d *Dedup) settle(kids map[int32]bool) {
	d.resetTracking()
	for kid := range kids {
		if d.keys.at(kid).live {
			d.keys.at(kid).inBase = true
			d.pushDue(kid)
		}
	}
}

// ApplyDelta applies one SnapshotDelta to an instance rebuilt with Restore
// from the base the delta follows (and the deltas before it, in order):
// tombstones remove their keys' state, then the upserts replace, key by
// key, all state of the keys they name. Rows outside [kgLo, kgHi) are
// skipped. A tombstone of a key not held or a duplicate upsert row is an
// error (deltas out of order or state corrupt). Schemas and key groups are
// validated before any state changes; after a later error the instance must
// be discarded. ApplyDelta is a snapshot point.
func (d *Dedup) ApplyDelta(upserts, tombstones []arrow.RecordBatch, kgLo, kgHi int) error {
	if kgLo < 0 || kgHi > d.k || kgLo > kgHi {
		return fmt.Errorf("dedup %s: apply delta: key-group range [%d,%d) outside [0,%d)", d.id, kgLo, kgHi, d.k)
	}
	ts := d.TombstoneSchema()
	var buf []byte
	tkeys := make([][]string, len(tombstones))
	for bi, rec := range tombstones {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), ts) {
			return fmt.Errorf("dedup %s: apply delta: tombstone batch %d schema %s does not match tombstone schema %s", d.id, bi, rec.Schema(), ts)
		}
		var err error
		if _, tkeys[bi], buf, err = pickKeyRows(rec, d.keyKinds, d.k, kgLo, kgHi, buf); err != nil {
			return fmt.Errorf("dedup %s: apply delta: tombstone batch %d %w", d.id, bi, err)
		}
	}
	upicks := make([][]dedupRow, len(upserts))
	for bi, rec := range upserts {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), d.state) {
			return fmt.Errorf("dedup %s: apply delta: upsert batch %d schema %s does not match state schema %s", d.id, bi, rec.Schema(), d.state)
		}
		var err error
		if upicks[bi], buf, err = d.pickState(rec, kgLo, kgHi, buf); err != nil {
			return fmt.Errorf("dedup %s: apply delta: upsert batch %d %w", d.id, bi, err)
		}
	}
	for bi, keys := range tkeys {
		for r, key := range keys {
			kid, ok := d.findKey(key)
			if !ok {
				return fmt.Errorf("dedup %s: apply delta: tombstone batch %d row %d: key not held (deltas out of order or state corrupt)", d.id, bi, r)
			}
			d.dropKey(kid, false)
		}
	}
	touched := map[int32]bool{}
	for bi, rec := range upserts {
		err := d.restoreRows(rec, upicks[bi], func(kid int32) {
			if !touched[kid] {
				touched[kid] = true
				d.clearKey(kid) // the upserts replace all of the key's state
			}
		})
		if err != nil {
			return fmt.Errorf("dedup %s: apply delta: upsert batch %d %w", d.id, bi, err)
		}
	}
	d.settle(touched)
	return nil
}
