package operators

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Shared helpers of the graph stages dedup and top_n: rows held in Go
// memory, column by column, and a queue of per-entry due times.

// heldRows holds whole rows (a chosen subset of an input schema's columns)
// in Go memory, one slot per row, so that state survives the release of the
// batches the rows came from. Strings and binaries are copied.
type heldRows struct {
	cols []heldCol
	n    int32   // slots ever allocated
	free []int32 // freed slots, reused first
	live int
	// queue holds the copies addLater and putLater deferred to flush: one
	// column at a time, with one type switch per column instead of one per
	// value.
	queue []slotRow
}

// heldCol is one column of heldRows.
type heldCol interface {
	// set copies value i of a (an array of the column's type) into slot s.
	set(s int32, a arrow.Array, i int)
	// setRows does set for each of rows, in order.
	setRows(a arrow.Array, rows []slotRow)
	// clear drops slot s's value (so freed strings can be collected).
	clear(s int32)
	// reserve makes room for slots below n.
	reserve(n int)
	// compare orders slot s against value i of a: <0, 0, >0. Nulls are
	// handled by the caller (see isNull); both values are non-null here.
	compare(s int32, a arrow.Array, i int) int
	// compareSlots orders two non-null slots.
	compareSlots(s, t int32) int
	isNull(s int32) bool
	// appendSlots appends the slots in order to b (s < 0: null), reserving
	// the room first.
	appendSlots(b array.Builder, slots []int32)
}

// slotsLen is the length a column's slots grow to for slot s: doubling,
// but within the capacity reserved when that covers s.
func slotsLen(s, n, c int) int {
	want := max(s+1, 2*n)
	if s < c {
		want = min(want, c)
	}
	return want
}

// heldTypes lists the types heldRows can hold, for error messages.
const heldTypes = "bool, int8..int64, uint8..uint64, float32, float64, string, large_string, binary, large_binary, timestamp, date32, date64, time32, time64, duration, decimal128"

// newHeldCol returns the column store of a data type, or an error naming the
// type when it is not supported.
func newHeldCol(dt arrow.DataType) (heldCol, error) {
	switch dt.ID() {
	case arrow.BOOL:
		return &typedCol[bool, *array.Boolean, *array.BooleanBuilder]{cmp: heldCmpBool}, nil
	case arrow.INT8:
		return &typedCol[int8, *array.Int8, *array.Int8Builder]{cmp: cmp.Compare[int8]}, nil
	case arrow.INT16:
		return &typedCol[int16, *array.Int16, *array.Int16Builder]{cmp: cmp.Compare[int16]}, nil
	case arrow.INT32:
		return &typedCol[int32, *array.Int32, *array.Int32Builder]{cmp: cmp.Compare[int32]}, nil
	case arrow.INT64:
		return &typedCol[int64, *array.Int64, *array.Int64Builder]{cmp: cmp.Compare[int64]}, nil
	case arrow.UINT8:
		return &typedCol[uint8, *array.Uint8, *array.Uint8Builder]{cmp: cmp.Compare[uint8]}, nil
	case arrow.UINT16:
		return &typedCol[uint16, *array.Uint16, *array.Uint16Builder]{cmp: cmp.Compare[uint16]}, nil
	case arrow.UINT32:
		return &typedCol[uint32, *array.Uint32, *array.Uint32Builder]{cmp: cmp.Compare[uint32]}, nil
	case arrow.UINT64:
		return &typedCol[uint64, *array.Uint64, *array.Uint64Builder]{cmp: cmp.Compare[uint64]}, nil
	case arrow.FLOAT32:
		return &typedCol[float32, *array.Float32, *array.Float32Builder]{cmp: heldCmpFloat[float32]}, nil
	case arrow.FLOAT64:
		return &typedCol[float64, *array.Float64, *array.Float64Builder]{cmp: heldCmpFloat[float64]}, nil
	case arrow.STRING:
		return &bytesCol[string, *array.String]{bin: stringBuilderBin}, nil
	case arrow.LARGE_STRING:
		return &bytesCol[string, *array.LargeString]{bin: largeStringBuilderBin}, nil
	case arrow.BINARY:
		return &bytesCol[[]byte, *array.Binary]{bin: binaryBuilderBin}, nil
	case arrow.LARGE_BINARY:
		return &bytesCol[[]byte, *array.LargeBinary]{bin: binaryBuilderBin}, nil
	case arrow.TIMESTAMP:
		return &typedCol[arrow.Timestamp, *array.Timestamp, *array.TimestampBuilder]{cmp: cmp.Compare[arrow.Timestamp]}, nil
	case arrow.DATE32:
		return &typedCol[arrow.Date32, *array.Date32, *array.Date32Builder]{cmp: cmp.Compare[arrow.Date32]}, nil
	case arrow.DATE64:
		return &typedCol[arrow.Date64, *array.Date64, *array.Date64Builder]{cmp: cmp.Compare[arrow.Date64]}, nil
	case arrow.TIME32:
		return &typedCol[arrow.Time32, *array.Time32, *array.Time32Builder]{cmp: cmp.Compare[arrow.Time32]}, nil
	case arrow.TIME64:
		return &typedCol[arrow.Time64, *array.Time64, *array.Time64Builder]{cmp: cmp.Compare[arrow.Time64]}, nil
	case arrow.DURATION:
		return &typedCol[arrow.Duration, *array.Duration, *array.DurationBuilder]{cmp: cmp.Compare[arrow.Duration]}, nil
	case arrow.DECIMAL128:
		return &typedCol[decimal128.Num, *array.Decimal128, *array.Decimal128Builder]{cmp: decimal128.Num.Cmp}, nil
	}
	return nil, fmt.Errorf("unsupported type %s (supported: %s)", dt, heldTypes)
}

func heldCmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// heldCmpFloat orders floats with NaN above every number (and equal to NaN),
// as Spark and PostgreSQL sort them; -0 equals +0.
func heldCmpFloat[T float32 | float64](a, b T) int {
	an, bn := math.IsNaN(float64(a)), math.IsNaN(float64(b))
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

// typedCol is a heldCol over arrays of type A (values T) and builders B.
type typedCol[T any, A interface {
	arrow.Array
	Value(int) T
}, B interface {
	array.Builder
	Append(T)
}] struct {
	vals []heldVal[T] // per slot, value and validity side by side
	cmp  func(a, b T) int
}

// heldVal is one slot of a typedCol.
type heldVal[T any] struct {
	v  T
	ok bool // not null
}

func (c *typedCol[T, A, B]) set(s int32, a arrow.Array, i int) {
	if int(s) >= len(c.vals) {
		c.vals = growTo(c.vals, slotsLen(int(s), len(c.vals), cap(c.vals)))
	}
	if a.IsNull(i) {
		c.vals[s] = heldVal[T]{}
		return
	}
	c.vals[s] = heldVal[T]{v: a.(A).Value(i), ok: true}
}

func (c *typedCol[T, A, B]) setRows(a arrow.Array, rows []slotRow) {
	if top := int(maxSlot(rows)); top >= len(c.vals) {
		c.vals = growTo(c.vals, slotsLen(top, len(c.vals), cap(c.vals)))
	}
	aa, nulls := a.(A), a.NullN() > 0
	for _, r := range rows {
		if nulls && a.IsNull(int(r.row)) {
			c.vals[r.slot] = heldVal[T]{}
			continue
		}
		c.vals[r.slot] = heldVal[T]{v: aa.Value(int(r.row)), ok: true}
	}
}

func (c *typedCol[T, A, B]) reserve(n int) {
	if n > cap(c.vals) {
		c.vals = slices.Grow(c.vals, n-len(c.vals))
	}
}

func (c *typedCol[T, A, B]) clear(s int32) {
	c.vals[s] = heldVal[T]{}
}

func (c *typedCol[T, A, B]) compare(s int32, a arrow.Array, i int) int {
	return c.cmp(c.vals[s].v, a.(A).Value(i))
}

func (c *typedCol[T, A, B]) compareSlots(s, t int32) int { return c.cmp(c.vals[s].v, c.vals[t].v) }

func (c *typedCol[T, A, B]) isNull(s int32) bool { return !c.vals[s].ok }

func (c *typedCol[T, A, B]) appendSlots(b array.Builder, slots []int32) {
	b.Reserve(len(slots))
	bb := b.(B)
	for _, s := range slots {
		if s < 0 || !c.vals[s].ok {
			bb.AppendNull()
			continue
		}
		bb.Append(c.vals[s].v)
	}
}

// bytesCol is a heldCol of strings or binaries (values T, arrays A): the
// bytes of the slots live in chunks of heldChunk bytes (a longer value
// gets a chunk of its own), so holding a row costs no allocation of its own
// and the garbage collector has no pointers to scan. The bytes of cleared or
// overwritten slots are dead: a chunk with no live bytes left is reused,
// and when dead bytes outnumber live ones (and exceed heldSlack) the live
// bytes are copied to fresh chunks.
type bytesCol[T string | []byte, A interface {
	arrow.Array
	Value(int) T
}] struct {
	chunks    [][]byte // nil: an unused chunk index (in freeIdx)
	chunkLive []int    // live bytes per chunk
	freeIdx   []int32
	spare     [][]byte // emptied chunks of heldChunk bytes, for reuse
	cur       int32    // the chunk appended to (-1: none)
	live      int
	dead      int
	slots     []bytesSlot
	bin       func(array.Builder) *array.BinaryBuilder
}

// bytesSlot is where one slot's bytes are.
type bytesSlot struct {
	ch, off int32 // chunk, first byte in it
	n       int32 // length; -1: null (or free)
}

const (
	heldChunk = 1 << 20
	heldSlack = 8 * heldChunk
	heldSpare = 4
)

func stringBuilderBin(b array.Builder) *array.BinaryBuilder {
	return b.(*array.StringBuilder).BinaryBuilder
}

func largeStringBuilderBin(b array.Builder) *array.BinaryBuilder {
	return b.(*array.LargeStringBuilder).BinaryBuilder
}

func binaryBuilderBin(b array.Builder) *array.BinaryBuilder { return b.(*array.BinaryBuilder) }

func (c *bytesCol[T, A]) set(s int32, a arrow.Array, i int) {
	c.grow(s)
	c.clear(s)
	if a.IsNull(i) {
		return
	}
	c.setValue(s, a.(A).Value(i))
}

func (c *bytesCol[T, A]) setRows(a arrow.Array, rows []slotRow) {
	c.grow(maxSlot(rows))
	aa, nulls := a.(A), a.NullN() > 0
	for _, r := range rows {
		c.clear(r.slot)
		if nulls && a.IsNull(int(r.row)) {
			continue
		}
		c.setValue(r.slot, aa.Value(int(r.row)))
	}
}

// grow makes room for slot s.
func (c *bytesCol[T, A]) grow(s int32) {
	if int(s) >= len(c.slots) {
		if len(c.slots) == 0 {
			c.cur = -1
		}
		n := len(c.slots)
		c.slots = growTo(c.slots, slotsLen(int(s), n, cap(c.slots)))
		for j := n; j < len(c.slots); j++ {
			c.slots[j].n = -1
		}
	}
}

// setValue stores v in slot s, which holds nothing.
func (c *bytesCol[T, A]) setValue(s int32, v T) {
	if len(v) == 0 {
		c.slots[s] = bytesSlot{}
		return
	}
	if c.dead > c.live && c.dead > heldSlack {
		c.compact()
	}
	k := c.room(len(v))
	buf := c.chunks[k]
	c.slots[s] = bytesSlot{ch: k, off: int32(len(buf)), n: int32(len(v))}
	c.chunks[k] = append(buf, v...)
	c.chunkLive[k] += len(v)
	c.live += len(v)
}

// room returns the chunk to append n bytes to, starting a new one when the
// current one is full.
func (c *bytesCol[T, A]) room(n int) int32 {
	if c.cur >= 0 && len(c.chunks[c.cur])+n <= cap(c.chunks[c.cur]) {
		return c.cur
	}
	var buf []byte
	if k := len(c.spare); k > 0 && n <= heldChunk {
		buf, c.spare = c.spare[k-1], c.spare[:k-1]
	} else {
		buf = make([]byte, 0, max(n, heldChunk))
	}
	if k := len(c.freeIdx); k > 0 {
		c.cur, c.freeIdx = c.freeIdx[k-1], c.freeIdx[:k-1]
		c.chunks[c.cur], c.chunkLive[c.cur] = buf, 0
	} else {
		c.cur = int32(len(c.chunks))
		c.chunks = append(c.chunks, buf)
		c.chunkLive = append(c.chunkLive, 0)
	}
	return c.cur
}

// compact copies the live bytes to fresh chunks.
func (c *bytesCol[T, A]) compact() {
	old := c.chunks
	c.chunks, c.chunkLive, c.freeIdx, c.cur = nil, nil, nil, -1
	c.live, c.dead = 0, 0
	for s := range c.slots {
		sl := &c.slots[s]
		if sl.n <= 0 {
			continue
		}
		v := old[sl.ch][sl.off : sl.off+sl.n]
		k := c.room(int(sl.n))
		sl.ch, sl.off = k, int32(len(c.chunks[k]))
		c.chunks[k] = append(c.chunks[k], v...)
		c.chunkLive[k] += int(sl.n)
		c.live += int(sl.n)
	}
}

func (c *bytesCol[T, A]) reserve(n int) {
	if n > cap(c.slots) {
		c.slots = slices.Grow(c.slots, n-len(c.slots))
	}
}

func (c *bytesCol[T, A]) clear(s int32) {
	sl := &c.slots[s]
	n, k := int(sl.n), sl.ch
	sl.n = -1
	if n <= 0 {
		return
	}
	c.chunkLive[k] -= n
	c.live -= n
	c.dead += n
	if c.chunkLive[k] > 0 {
		return
	}
	// The chunk is all dead: reuse it.
	buf := c.chunks[k]
	c.dead -= len(buf)
	if k == c.cur {
		c.chunks[k] = buf[:0]
		return
	}
	if cap(buf) == heldChunk && len(c.spare) < heldSpare {
		c.spare = append(c.spare, buf[:0])
	}
	c.chunks[k] = nil
	c.freeIdx = append(c.freeIdx, k)
}

func (c *bytesCol[T, A]) bytes(s int32) []byte {
	sl := c.slots[s]
	if sl.n <= 0 {
		return nil
	}
	return c.chunks[sl.ch][sl.off : sl.off+sl.n : sl.off+sl.n]
}

func (c *bytesCol[T, A]) appendSlots(b array.Builder, slots []int32) {
	bb := c.bin(b)
	total := 0
	for _, s := range slots {
		if s >= 0 {
			total += max(0, int(c.slots[s].n))
		}
	}
	bb.Reserve(len(slots))
	bb.ReserveData(total)
	for _, s := range slots {
		if s < 0 || c.slots[s].n < 0 {
			bb.AppendNull()
			continue
		}
		bb.Append(c.bytes(s))
	}
}

func (c *bytesCol[T, A]) compare(s int32, a arrow.Array, i int) int {
	return compareBytes(c.bytes(s), a.(A).Value(i))
}

func (c *bytesCol[T, A]) compareSlots(s, t int32) int { return bytes.Compare(c.bytes(s), c.bytes(t)) }

func (c *bytesCol[T, A]) isNull(s int32) bool { return c.slots[s].n < 0 }

// compareBytes orders a and b byte-wise, like bytes.Compare and
// strings.Compare.
func compareBytes[T string | []byte](a []byte, b T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return cmp.Compare(len(a), len(b))
}

// newHeldRows returns a store for columns of the given types; what names the
// columns in an error.
func newHeldRows(types []arrow.DataType, names []string) (*heldRows, error) {
	h := &heldRows{}
	for i, dt := range types {
		c, err := newHeldCol(dt)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", names[i], err)
		}
		h.cols = append(h.cols, c)
	}
	return h, nil
}

// reserve makes room for n more slots.
func (h *heldRows) reserve(n int) {
	for _, hc := range h.cols {
		hc.reserve(int(h.n) + n)
	}
}

// add copies row i of cols (one array per held column) into a new slot.
func (h *heldRows) add(cols []arrow.Array, i int) int32 {
	s := h.alloc()
	h.put(s, cols, i)
	return s
}

// alloc takes a free slot (or a new one) for a live row.
func (h *heldRows) alloc() int32 {
	h.live++
	if n := len(h.free); n > 0 {
		s := h.free[n-1]
		h.free = h.free[:n-1]
		return s
	}
	h.n++
	return h.n - 1
}

// put overwrites slot s with row i of cols.
func (h *heldRows) put(s int32, cols []arrow.Array, i int) {
	for c, hc := range h.cols {
		hc.set(s, cols[c], i)
	}
}

// slotRow is a copy addLater or putLater queued: row of the batch into slot.
type slotRow struct{ slot, row int32 }

func maxSlot(rows []slotRow) int32 {
	m := int32(-1)
	for _, r := range rows {
		m = max(m, r.slot)
	}
	return m
}

// addLater is add whose copy waits for flush: the slot's values must not be
// read before. Every queued row comes from the same cols.
func (h *heldRows) addLater(i int) int32 {
	s := h.alloc()
	h.queue = append(h.queue, slotRow{slot: s, row: int32(i)})
	return s
}

// putLater is put whose copy waits for flush.
func (h *heldRows) putLater(s int32, i int) {
	h.queue = append(h.queue, slotRow{slot: s, row: int32(i)})
}

// flush makes the queued copies from cols, column by column, in the order
// they were queued (a slot queued twice gets its later row).
func (h *heldRows) flush(cols []arrow.Array) {
	if len(h.queue) == 0 {
		return
	}
	for c, hc := range h.cols {
		hc.setRows(cols[c], h.queue)
	}
	h.queue = h.queue[:0]
}

// release frees slot s.
func (h *heldRows) release(s int32) {
	for _, hc := range h.cols {
		hc.clear(s)
	}
	h.free = append(h.free, s)
	h.live--
}

// releaseAll frees slots (distinct, live), column by column in slot order:
// the rows an Advance emits are in output order, their slots scattered, and
// freeing them in slot order walks each column's slot table front to back
// instead of missing the cache at every slot (q18's drain frees 588k rows).
// slots is reordered.
func (h *heldRows) releaseAll(slots []int32) {
	if len(slots) < releaseSorted {
		for _, s := range slots {
			h.release(s)
		}
		return
	}
	slices.Sort(slots)
	for _, hc := range h.cols {
		for _, s := range slots {
			hc.clear(s)
		}
	}
	h.free = append(h.free, slots...)
	h.live -= len(slots)
}

// releaseSorted is the number of slots from which releaseAll sorts them.
const releaseSorted = 256

// appendRows appends the slots in order to one builder per held column
// (s < 0: a row of nulls), column by column.
func (h *heldRows) appendRows(bs []array.Builder, slots []int32) {
	for c, hc := range h.cols {
		hc.appendSlots(bs[c], slots)
	}
}

// sortItem is one id being sorted by sortIDs: its leading order value (a
// key group or a time), then the first 16 bytes of its key, so most
// comparisons need neither the key string nor the owner's records.
type sortItem struct {
	lead      int64
	pre, pre2 uint64
	id        int32
}

// keyPrefix is bytes [from, from+8) of key, big-endian, zero padded: keys
// equal before from and with different prefixes order as their prefixes.
func keyPrefix(key string, from int) uint64 {
	var b [8]byte
	if from < len(key) {
		copy(b[:], key[from:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// sortIDs sorts ids by (lead(id), key(id) bytes, tie(a, b)); tie may be nil
// (then ids that agree on lead and key are in no particular order: callers
// pass ids of distinct keys).
func sortIDs(ids []int32, lead func(int32) int64, key func(int32) string, tie func(a, b int32) int) {
	items := make([]sortItem, len(ids))
	for i, id := range ids {
		k := key(id)
		items[i] = sortItem{lead: lead(id), pre: keyPrefix(k, 0), pre2: keyPrefix(k, 8), id: id}
	}
	full := func(a, b sortItem) int {
		if c := cmp.Compare(a.lead, b.lead); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pre, b.pre); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pre2, b.pre2); c != 0 {
			return c
		}
		if c := strings.Compare(key(a.id), key(b.id)); c != 0 || tie == nil {
			return c
		}
		return tie(a.id, b.id)
	}
	if len(items) < radixSortIDs {
		slices.SortFunc(items, full)
		for i, it := range items {
			ids[i] = it.id
		}
		return
	}
	// Radix by (lead, pre, pre2), then the runs that agree on all three
	// (keys equal in their first 16 bytes) by the full order.
	order := radixSorted(len(items), 3, func(w, i int) uint64 {
		switch it := &items[i]; w {
		case 0:
			return signedWord(it.lead)
		case 1:
			return it.pre
		default:
			return it.pre2
		}
	})
	same := func(x, y int32) bool {
		a, b := &items[x], &items[y]
		return a.lead == b.lead && a.pre == b.pre && a.pre2 == b.pre2
	}
	var run []sortItem
	forRuns(order, same, func(lo int, rs []radixEnt) {
		if len(rs) == 1 {
			ids[lo] = items[rs[0].i].id
			return
		}
		run = run[:0]
		for _, e := range rs {
			run = append(run, items[e.i])
		}
		slices.SortFunc(run, full)
		for x, it := range run {
			ids[lo+x] = it.id
		}
	})
}

// signedWord maps v to a word that orders as v does.
func signedWord(v int64) uint64 { return uint64(v) ^ 1<<63 }

// radixSorted returns the positions 0..n-1 (as radixEnt.i) stably sorted by
// their words word(0, i), ..., word(words-1, i), the first most significant:
// least significant digit first, one pass per byte in which the elements
// differ.
func radixSorted(n, words int, word func(w, i int) uint64) []radixEnt {
	a := make([]radixEnt, n)
	for i := range a {
		a[i].i = int32(i)
	}
	var b []radixEnt
	for w := words - 1; w >= 0; w-- {
		var hist [8][256]int32
		for x := range a {
			k := word(w, int(a[x].i))
			a[x].k = k
			for d := range 8 {
				hist[d][byte(k>>(8*d))]++
			}
		}
		a, b = radixPasses(a, b, &hist)
	}
	return a
}

// forRuns calls f for each run of consecutive elements of sorted that
// same reports equal (by position), with the index of its first element.
func forRuns(sorted []radixEnt, same func(x, y int32) bool, f func(lo int, run []radixEnt)) {
	for lo := 0; lo < len(sorted); {
		hi := lo + 1
		for hi < len(sorted) && same(sorted[lo].i, sorted[hi].i) {
			hi++
		}
		f(lo, sorted[lo:hi])
		lo = hi
	}
}

// radixSortIDs is the number of ids from which sortIDs (and the join's
// sortOutput) radix-sort them; a variable for the tests.
var radixSortIDs = 4096

// dueItem is one entry of a dueQueue: id is due at time due.
type dueItem struct {
	due int64
	id  int32
}

// dueQueue is a min-heap of due times. Entries are never updated in place:
// when an id's due time changes the owner pushes a new entry and ignores, on
// pop, entries that no longer match (lazy deletion), so every entry is
// popped once the watermark passes its time and the heap stays bounded by
// the pushes since.
type dueQueue []dueItem

func (q *dueQueue) push(due int64, id int32) {
	*q = append(*q, dueItem{due: due, id: id})
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].due <= h[i].due {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

// pop removes the earliest entry (the queue is not empty).
func (q *dueQueue) pop() dueItem {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].due < h[l].due {
			m = r
		}
		if h[i].due <= h[m].due {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// popDue pops every entry with due <= t and returns their ids (possibly
// repeated or stale: the owner checks).
func (q *dueQueue) popDue(t int64, ids []int32) []int32 {
	for len(*q) > 0 && (*q)[0].due <= t {
		ids = append(ids, q.pop().id)
	}
	return ids
}

// clampSub returns a-b clamped to int64 (b >= 0).
func clampSub(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// durMicros checks that d is a whole, non-negative (positive when asked)
// number of microseconds and returns it.
func durMicros(op, name string, d time.Duration, positive bool) (int64, error) {
	if d < 0 || (positive && d == 0) {
		return 0, fmt.Errorf("%s: %s %v must be positive", op, name, d)
	}
	if d%time.Microsecond != 0 {
		return 0, fmt.Errorf("%s: %s %v is not a whole number of microseconds", op, name, d)
	}
	return d.Microseconds(), nil
}

// uniqueColumn returns the index of the one column named name, or -1.
func uniqueColumn(s *arrow.Schema, name string) int {
	idx := s.FieldIndices(name)
	if len(idx) != 1 {
		return -1
	}
	return idx[0]
}

// isEventTimeField reports whether a field has the event-time type timestamp[us].
func isEventTimeField(f arrow.Field) bool {
	ts, ok := f.Type.(*arrow.TimestampType)
	return ok && ts.Unit == arrow.Microsecond
}
