package operators

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/internal/suggest"
	"github.com/floe-dev/floe/keygroup"
)

// eventTimeType is the type of event times and window bounds: timestamp[us, UTC].
var eventTimeType arrow.DataType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// Reserved column names of the output and state schemas.
const (
	ColKeyGroup    = "key_group"
	ColWindowStart = "window_start"
	ColWindowEnd   = "window_end"
)

// The state format versions, mixed into StateFingerprint; add one when the
// state layout or the meaning of a state column changes. Tumbling and
// session windows are at v1. Sliding windows are at v2: their rows are
// slices [start, start+slide) of which each window is the union, where v1
// kept one row per window [start, start+size); a v1 sliding state has
// another fingerprint, so the caller refuses it instead of misreading it
// (and Restore rejects its rows, which are not slices).
const (
	stateFormatVersion       = "floe-window-state/v1"
	slicedStateFormatVersion = "floe-window-state/v2-sliced"
)

// snapshotChunkRows bounds the rows of one Snapshot batch.
const snapshotChunkRows = 1 << 16

// WindowKind is the kind of an event-time window.
type WindowKind int

// The window kinds.
const (
	Tumbling WindowKind = iota + 1 // fixed, non-overlapping windows of Size aligned to the Unix epoch
	Sliding                        // windows of Size starting every Slide (aligned to the Unix epoch)
	Session                        // per-key windows that close after Gap without rows
)

// String returns the kind's name as written in a pipeline spec.
func (k WindowKind) String() string {
	switch k {
	case Tumbling:
		return "tumbling"
	case Sliding:
		return "sliding"
	case Session:
		return "session"
	}
	return fmt.Sprintf("WindowKind(%d)", int(k))
}

// WindowSpec declares a keyed event-time window operator.
type WindowSpec struct {
	ID              string        // operator id, used in error messages
	Keys            []string      // key columns (may be empty: one global key); a string key column may be dictionary-encoded (output and state hold its values)
	EventTime       string        // timestamp[us] column
	Kind            WindowKind    // Tumbling, Sliding or Session
	Size            time.Duration // Tumbling and Sliding: window length
	Slide           time.Duration // Sliding: distance between window starts; divides Size
	Gap             time.Duration // Session: inactivity gap
	AllowedLateness time.Duration // a window is emitted when end + AllowedLateness <= watermark
	Aggregates      []AggSpec     // in output order
}

// keyInfo is 64 bytes, one cache line: a lookup that finds a short key
// (a map key of at most inlineKey bytes, kept in inl) reads nothing else.
type keyInfo struct {
	kc, ko, kn uint32          // the key's encoding (SerializeKey): kn bytes at chunk kc, offset ko of the Window's keyArena (keyStr); kn 0 once evicted
	inl        [inlineKey]byte // bytes[mkOff:] when at most inlineKey long
	pfx        uint64          // prefix8(bytes, pfxAt): the key's sort prefix (see sortSlots)
	kg         int32
	refs       int32  // open slots of this key
	head       int32  // tumbling/sliding: the key's open slots, newest start first, a list through slotInfo.next and prev; -1 when none
	h          uint32 // the map key's hash in ktab
	pfxAt      int32  // the Window's keyLCP when pfx was taken
	mkOff      uint8  // bytes[mkOff:] is the key's map key (see mapKey)
	queued     bool   // in Window.idle
}

// inlineKey is the longest map key keyInfo holds inline.
const inlineKey = 16

// mkLen is the length of the key's map key.
func (ki *keyInfo) mkLen() int { return int(ki.kn) - int(ki.mkOff) }

// keyStr returns the encoding of key ki (its bytes in w's arena).
func (w *Window) keyStr(ki *keyInfo) string { return w.karena.str(ki.kc, ki.ko, ki.kn) }

// hasMapKey reports whether key ki's map key is mk, reading the key's bytes
// only when they are not inline.
func (w *Window) hasMapKey(ki *keyInfo, mk string) bool {
	n := ki.mkLen()
	if n != len(mk) {
		return false
	}
	if n <= inlineKey {
		return string(ki.inl[:n]) == mk
	}
	return w.keyStr(ki)[ki.mkOff:] == mk
}

type slotInfo struct {
	start, end int64
	kid        int32
	next, prev int32 // tumbling/sliding: the key's next (older) and previous (newer) open slot, -1 at either end
	live       bool
	listed     bool // in Window.dirty (kept across reuse of the slot index)
	inBase     bool // existed at the last snapshot point (see delta.go)
}

// Window is one instance (subtask) of a keyed event-time window operator. It
// holds the open windows of the keys routed to it. It is not safe for
// concurrent use.
type Window struct {
	spec     WindowSpec
	id       string
	k        int
	input    *arrow.Schema
	output   *arrow.Schema
	state    *arrow.Schema
	keyCols  []int
	keyKinds []byte
	tsCol    int
	aggCols  []int // -1 for count()
	aggs     []accumulator
	aggState []int // first state column of each aggregate
	size     int64
	slide    int64
	gap      int64
	lateness int64
	wm       int64
	seq      int64 // arrival sequence number of the next row
	mem      memory.Allocator

	ktab        keyIndex // key ids by map key (see mapKey)
	strKey      bool     // one string key column: ktab is keyed by the raw string
	ordKeyBytes int      // the total length of the keys of the last sortSlots
	merging     bool     // an aggregate tracks what it added since the last snapshot point (freshTracker): deltas may hold merge rows
	nullKid     int32    // strKey: id of the null key, -1 when none
	keys        keyTable
	sessions    [][]int32 // Session: each key's open session slots, sorted by start
	freeKeys    []int32
	karena      keyArena // the keys' bytes (keyInfo.kc, ko, kn)
	lcpKey      string   // the first key's bytes
	keyLCP      int      // the length of the prefix every key so far shares with lcpKey
	lcpSet      bool     // lcpKey is set
	active      int      // keys with open slots (refs > 0)
	activeMax   int      // the most keys ever active at once
	idle        []int32  // keys that were left without open slots, oldest first (see newKey)
	idleHead    int      // idle[:idleHead] were taken
	slots       []slotInfo
	freeSlots   []int32
	aggLen      int // the accumulators address slots [0, aggLen) at least (scratchSlot)
	live        int

	// change tracking since the last snapshot point (delta.go)
	dirty []int32            // listed slots: created or changed
	tombs []tomb             // windows of the last snapshot point removed since
	moved map[int32][2]int64 // base sessions whose bounds changed: their base bounds

	// scratch, reused across calls
	hs       [prefetchRows]uint32 // prefetchStrKeys's key hashes
	dictKids []int32              // key ids by dictionary index of a batch's key column; -1 unknown
	sink     uint64               // prefetchStrKeys's loads
	ident    []int32              // 0, 1, 2, ...: the selection of a whole batch
	enc      keyEncoder
	buf      []byte
	rows     []int32
	slotIdx  []int32
	lateRows []int32
	redirect map[int32]int32
	pending  []int32
	rank     []int32    // advanceSliding's per-key scratch
	sref     []sliceRef // advanceSliding's closed slices
	sgroup   []sliceRef // and the same grouped by key
	gather   gathered   // build's columns of the slots it writes
	ords     []slotOrd  // sortSlots's scratch
	perm     []int32    // and its order
}

// gathered is build's columns of the slots it writes.
type gathered struct {
	kgs          []int32
	keys         []string
	starts, ends []arrow.Timestamp
}

// NewWindow validates spec against the input schema and returns an empty
// window instance for a pipeline with maxParallelism key groups.
func NewWindow(spec WindowSpec, input *arrow.Schema, maxParallelism int) (*Window, error) {
	id := spec.ID
	if id == "" {
		id = "window"
	}
	fail := func(format string, args ...any) (*Window, error) {
		return nil, fmt.Errorf("window %s: "+format, append([]any{id}, args...)...)
	}
	if input == nil {
		return fail("nil input schema")
	}
	if !keygroup.ValidCount(maxParallelism) {
		return fail("max parallelism %d out of range [1,%d]", maxParallelism, keygroup.Max)
	}
	w := &Window{spec: spec, id: id, k: maxParallelism, input: input, wm: math.MinInt64,
		mem: memory.DefaultAllocator, ktab: newKeyIndex(0),
		redirect: map[int32]int32{}, nullKid: -1, moved: map[int32][2]int64{}}
	micros := func(name string, d time.Duration, positive bool) (int64, error) {
		if d < 0 || (positive && d == 0) {
			return 0, fmt.Errorf("window %s: %s %v must be positive", id, name, d)
		}
		if d%time.Microsecond != 0 {
			return 0, fmt.Errorf("window %s: %s %v is not a whole number of microseconds", id, name, d)
		}
		return d.Microseconds(), nil
	}
	var err error
	switch spec.Kind {
	case Tumbling:
		if w.size, err = micros("size", spec.Size, true); err != nil {
			return nil, err
		}
		w.slide = w.size
	case Sliding:
		if w.size, err = micros("size", spec.Size, true); err != nil {
			return nil, err
		}
		if w.slide, err = micros("slide", spec.Slide, true); err != nil {
			return nil, err
		}
		if w.slide > w.size {
			return fail("sliding slide %v is larger than size %v", spec.Slide, spec.Size)
		}
		if w.size%w.slide != 0 {
			return fail("sliding size %v is not a multiple of slide %v", spec.Size, spec.Slide)
		}
	case Session:
		if w.gap, err = micros("gap", spec.Gap, true); err != nil {
			return nil, err
		}
	default:
		return fail("unknown window kind %v; expected tumbling, sliding or session", spec.Kind)
	}
	if w.lateness, err = micros("allowed lateness", spec.AllowedLateness, false); err != nil {
		return nil, err
	}
	col := func(name string) int {
		idx := input.FieldIndices(name)
		if len(idx) != 1 {
			return -1
		}
		return idx[0]
	}
	w.tsCol = col(spec.EventTime)
	if w.tsCol < 0 {
		return fail("event time column %q not found (or ambiguous) in input schema%s; a projection before the window must keep it", spec.EventTime, columnHint(spec.EventTime, input))
	}
	if ts, ok := input.Field(w.tsCol).Type.(*arrow.TimestampType); !ok || ts.Unit != arrow.Microsecond {
		return fail("event time column %q has type %s; want timestamp[us, tz=UTC]", spec.EventTime, input.Field(w.tsCol).Type)
	}
	names := map[string]string{ColWindowStart: "reserved", ColWindowEnd: "reserved", ColKeyGroup: "reserved"}
	claim := func(name, what string) error {
		if prev, ok := names[name]; ok {
			return fmt.Errorf("window %s: %s: column name %q already used (%s)", id, what, name, prev)
		}
		names[name] = what
		return nil
	}
	outFields := []arrow.Field{}
	stateFields := []arrow.Field{{Name: ColKeyGroup, Type: arrow.PrimitiveTypes.Int32}}
	for _, k := range spec.Keys {
		c := col(k)
		if c < 0 {
			return fail("key column %q not found (or ambiguous) in input schema%s", k, columnHint(k, input))
		}
		if err := claim(k, "key"); err != nil {
			return nil, err
		}
		w.keyCols = append(w.keyCols, c)
	}
	if w.keyKinds, err = keyKindsDict(input, w.keyCols); err != nil {
		return fail("%v", err)
	}
	w.strKey = len(w.keyKinds) == 1 && w.keyKinds[0] == tagString
	for _, c := range w.keyCols {
		f := input.Field(c)
		f.Nullable = true
		f.Metadata = arrow.Metadata{}
		if d, ok := f.Type.(*arrow.DictionaryType); ok {
			f.Type = d.ValueType // keys are written as plain strings
		}
		outFields = append(outFields, f)
		stateFields = append(stateFields, f)
	}
	bounds := []arrow.Field{{Name: ColWindowStart, Type: eventTimeType}, {Name: ColWindowEnd, Type: eventTimeType}}
	outFields = append(outFields, bounds...)
	stateFields = append(stateFields, bounds...)
	for _, a := range spec.Aggregates {
		if err := claim(a.Name, "aggregate"); err != nil {
			return nil, err
		}
		c := -1
		var dt arrow.DataType
		if a.Column != "" {
			if c = col(a.Column); c < 0 {
				return fail("aggregate %s = %s: column %q not found (or ambiguous) in input schema%s", a.Name, a, a.Column, columnHint(a.Column, input))
			}
			dt = input.Field(c).Type
		} else if a.Func != AggCount {
			return fail("aggregate %s: %s needs a column", a.Name, a.Func)
		}
		acc, err := newAccumulator(a, dt)
		if err != nil {
			return fail("%v", err)
		}
		w.aggs = append(w.aggs, acc)
		if m, ok := acc.(freshTracker); ok {
			m.trackSlots(&w.slots)
			w.merging = true
		}
		w.aggCols = append(w.aggCols, c)
		outFields = append(outFields, arrow.Field{Name: a.Name, Type: acc.resultType(), Nullable: true})
		w.aggState = append(w.aggState, len(stateFields))
		for _, f := range acc.stateFields(a.Name) {
			if f.Name != a.Name {
				if err := claim(f.Name, "state of aggregate "+a.Name); err != nil {
					return nil, err
				}
			}
			stateFields = append(stateFields, f)
		}
	}
	w.output = arrow.NewSchema(outFields, nil)
	w.state = arrow.NewSchema(stateFields, nil)
	return w, nil
}

// columnHint suggests the input column closest to a missing name, or lists
// the input columns.
func columnHint(name string, input *arrow.Schema) string {
	names := make([]string, input.NumFields())
	for i, f := range input.Fields() {
		names[i] = f.Name
	}
	if s := suggest.Closest(name, names); s != "" {
		return fmt.Sprintf(" (did you mean %s?)", s)
	}
	return fmt.Sprintf(" (columns: %s)", strings.Join(names, ", "))
}

// SetAllocator makes w allocate the batches it returns (Process's late rows,
// Advance, Snapshot) from mem instead of memory.DefaultAllocator. Call it
// before the first Process; nil restores the default.
func (w *Window) SetAllocator(mem memory.Allocator) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	w.mem = mem
}

// OutputSchema is the schema of Advance's batches: the key columns (input
// types), window_start and window_end (timestamp[us, UTC], [start, end)) and
// one column per aggregate in spec order.
func (w *Window) OutputSchema() *arrow.Schema { return w.output }

// StateSchema is the schema of Snapshot's batches: key_group (int32), the key
// columns, window_start, window_end, then each aggregate's state columns
// (named after the aggregate, with suffixes such as ".sum", ".count", ".ts",
// ".seq", ".values"). A row is one open (key, window) state; for a sliding
// window it is one (key, slice) state, window_start and window_end being the
// slice's bounds [start, start+slide).
func (w *Window) StateSchema() *arrow.Schema { return w.state }

// StateFingerprint identifies the state layout: the state schema, the window
// kind and its sizes (which decide window bounds) and the format version. A
// snapshot can be restored into a Window with the same fingerprint.
func (w *Window) StateFingerprint() string {
	version, prefix := stateFormatVersion, "v1-"
	if w.spec.Kind == Sliding {
		version, prefix = slicedStateFormatVersion, "v2-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nkind=%s size=%d slide=%d gap=%d\n", version, w.spec.Kind, w.size, w.slide, w.gap)
	for _, f := range w.state.Fields() {
		fmt.Fprintf(&b, "%s:%s\n", f.Name, f.Type)
	}
	for _, a := range w.spec.Aggregates {
		fmt.Fprintf(&b, "agg %s=%s\n", a.Name, a)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return prefix + hex.EncodeToString(sum[:16])
}

// Watermark is the largest watermark passed to Advance or Restore
// (math.MinInt64 when none).
func (w *Window) Watermark() int64 { return w.wm }

// Len is the number of open (key, window) states; for a sliding window, of
// open (key, slice) states.
func (w *Window) Len() int { return w.live }

// satAdd returns a+b clamped to int64 (b >= 0).
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func (w *Window) closed(end int64) bool { return satAdd(end, w.lateness) <= w.wm }

func floorMod(t, m int64) int64 {
	r := t % m
	if r < 0 {
		r += m
	}
	return r
}

func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// mapKey returns the keyMap key of an encoded key: the encoding itself, or
// for a single string key column the raw string (so Process can look keys up
// without encoding them); null reports the null key of a string column,
// which lives in nullKid.
func (w *Window) mapKey(enc []byte) (mk []byte, null bool) {
	if !w.strKey {
		return enc, false
	}
	if len(enc) == 0 || enc[0] == tagNull {
		return nil, true
	}
	_, n := binary.Uvarint(enc[1:])
	return enc[1+max(n, 0):], false
}

// keyID returns the id of the encoded key, creating it.
func (w *Window) keyID(key []byte) int32 {
	mk, null := w.mapKey(key)
	if null {
		if w.nullKid < 0 {
			w.nullKid = w.newKey(key, len(key), 0)
		}
		return w.nullKid
	}
	h := w.ktab.hash(string(mk))
	if kid, _, ok := w.findKey(h, string(mk)); ok {
		return kid
	}
	kid := w.newKey(key, len(key)-len(mk), h)
	w.ktab.add(h, kid)
	return kid
}

// strKeyID is keyID for a non-null value of a single string key column.
func (w *Window) strKeyID(s string) int32 { return w.strKeyIDHash(s, w.ktab.hash(s)) }

// strKeyIDHash is strKeyID of s, whose hash in w.ktab is h.
func (w *Window) strKeyIDHash(s string, h uint32) int32 {
	if kid, _, ok := w.findKey(h, s); ok {
		return kid
	}
	w.buf = binary.AppendUvarint(append(w.buf[:0], tagString), uint64(len(s)))
	w.buf = append(w.buf, s...)
	kid := w.newKey(w.buf, len(w.buf)-len(s), h)
	w.ktab.add(h, kid)
	return kid
}

// minKeys is the number of key ids a Window keeps before it evicts idle
// keys (see newKey).
const minKeys = 1 << 12

// newKey makes a key id for encoded key whose map key starts at mkOff and
// hashes to h in w.ktab; the caller indexes it (with keyIndex.add: newKey
// may remove an idle key from the index, which moves entries).
//
// A key left without open slots stays indexed (idle), so that a key that
// comes back in a later window costs a lookup, not an allocation, a
// key-group hash and two index updates: with many keys most windows are of
// keys that had one before. Idle keys are evicted, oldest first, only to
// make room for a new key once the key ids reach the most keys ever active
// at once (a size the key table and slices had to reach anyway).
func (w *Window) newKey(key []byte, mkOff int, h uint32) int32 {
	if len(w.freeKeys) == 0 && w.keys.len() >= w.keyBound() {
		w.evictIdle()
	}
	if w.karena.wasteful() {
		w.compactKeys()
	}
	ki := keyInfo{kg: int32(keygroup.Of(key, w.k)), head: -1, mkOff: uint8(mkOff), h: h, kn: uint32(len(key))}
	ki.kc, ki.ko = w.karena.put(key)
	copy(ki.inl[:], key[mkOff:]) // used only when it fits (hasMapKey)
	bs := w.keyStr(&ki)
	if !w.lcpSet {
		w.lcpKey, w.keyLCP, w.lcpSet = bs, len(bs), true
	} else {
		w.keyLCP = commonPrefix(w.lcpKey[:w.keyLCP], bs)
	}
	ki.pfx, ki.pfxAt = prefix8(bs, w.keyLCP), int32(w.keyLCP)
	var kid int32
	if n := len(w.freeKeys); n > 0 {
		kid = w.freeKeys[n-1]
		w.freeKeys = w.freeKeys[:n-1]
		*w.keys.at(kid) = ki
	} else {
		kid = w.keys.push(ki)
	}
	if w.spec.Kind == Session {
		if int(kid) < len(w.sessions) {
			w.sessions[kid] = w.sessions[kid][:0]
		} else {
			w.sessions = append(w.sessions, nil)
		}
	}
	return kid
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// rowKey returns the key id of row i of the batch bound to w.enc.
func (w *Window) rowKey(i int) int32 {
	if w.strKey {
		if bc := &w.enc.cols[0]; bc.valid(i) {
			return w.strKeyID(bc.strValue(i))
		}
	}
	w.buf = w.enc.encode(w.buf[:0], i)
	return w.keyID(w.buf)
}

// lookupKey returns the id of row i's key without creating it.
func (w *Window) lookupKey(i int) (int32, bool) {
	if w.strKey {
		if bc := &w.enc.cols[0]; bc.valid(i) {
			s := bc.strValue(i)
			kid, _, ok := w.findKey(w.ktab.hash(s), s)
			return kid, ok
		}
	}
	w.buf = w.enc.encode(w.buf[:0], i)
	return w.lookupEncoded(w.buf)
}

// lookupEncoded returns the id of an encoded key without creating it.
func (w *Window) lookupEncoded(key []byte) (int32, bool) {
	mk, null := w.mapKey(key)
	if null {
		return w.nullKid, w.nullKid >= 0
	}
	kid, _, ok := w.findKey(w.ktab.hash(string(mk)), string(mk))
	return kid, ok
}

// joinsOpenSession reports whether a row at t would merge into one of the
// key's open sessions (overlapping or touching [t, t+gap)).
func (w *Window) joinsOpenSession(kid int32, t int64) bool {
	lo, hi := t, satAdd(t, w.gap)
	for _, s := range w.sessions[kid] {
		if sl := &w.slots[s]; sl.live && sl.start <= hi && sl.end >= lo {
			return true
		}
	}
	return false
}

func (w *Window) newSlot(kid int32, start, end int64) int32 {
	var s int32
	info := slotInfo{kid: kid, start: start, end: end, next: -1, prev: -1, live: true}
	if n := len(w.freeSlots); n > 0 {
		s = w.freeSlots[n-1]
		w.freeSlots = w.freeSlots[:n-1]
		info.listed = w.slots[s].listed
		w.slots[s] = info
	} else {
		s = int32(len(w.slots))
		w.slots = append(w.slots, info)
	}
	if ki := w.keys.at(kid); ki.refs == 0 {
		w.active++
		w.activeMax = max(w.activeMax, w.active)
	}
	w.keys.at(kid).refs++
	w.live++
	return s
}

// keyBound is the number of key ids past which newKey evicts idle keys:
// half as many again as the most keys ever active at once (at least
// minKeys), so that keys that come back every few windows stay.
func (w *Window) keyBound() int { return max(minKeys, w.activeMax+w.activeMax/2) }

// evictIdle frees the oldest idle keys (keys without open slots): those
// among the next prefetchRows in the queue, or more until it frees one or
// the queue is empty. It loads the keys and their index entries before it
// removes them, so that their cache misses overlap.
func (w *Window) evictIdle() {
	t := &w.ktab
	freed := false
	for !freed && w.idleHead < len(w.idle) {
		cand := w.idle[w.idleHead:min(len(w.idle), w.idleHead+prefetchRows)]
		w.idleHead += len(cand)
		var sink uint64
		for _, kid := range cand {
			sink += uint64(w.keys.at(kid).h)
		}
		for _, kid := range cand {
			sink += t.ents[uint64(w.keys.at(kid).h)&t.mask]
		}
		w.sink += sink
		for _, kid := range cand {
			ki := w.keys.at(kid)
			ki.queued = false
			if ki.refs > 0 {
				continue // it came back
			}
			if w.strKey && kid == w.nullKid {
				w.nullKid = -1
			} else {
				t.remove(ki.h, kid)
			}
			w.karena.release(ki.kn)
			ki.kn = 0
			w.freeKeys = append(w.freeKeys, kid)
			freed = true
		}
	}
	if w.idleHead == len(w.idle) {
		w.idle, w.idleHead = w.idle[:0], 0
	} else if w.idleHead > 1024 && 2*w.idleHead > len(w.idle) {
		n := copy(w.idle, w.idle[w.idleHead:])
		w.idle, w.idleHead = w.idle[:n], 0
	}
}

// killSlot removes slot s from the indexes; the caller resets accumulators
// and returns it to freeSlots.
func (w *Window) killSlot(s int32) {
	info := &w.slots[s]
	info.live = false
	w.live--
	ki := w.keys.at(info.kid)
	if info.inBase {
		w.removed(s, ki)
	}
	if w.spec.Kind == Session {
		if i := slices.Index(w.sessions[info.kid], s); i >= 0 {
			w.sessions[info.kid] = slices.Delete(w.sessions[info.kid], i, i+1)
		}
	} else {
		w.unlinkSlot(ki, s)
	}
	ki.refs--
	if ki.refs == 0 {
		w.active--
		if !ki.queued {
			ki.queued = true
			w.idle = append(w.idle, info.kid)
		}
	}
}

func (w *Window) freeSlot(s int32) {
	for _, a := range w.aggs {
		a.reset(s)
	}
	w.freeSlots = append(w.freeSlots, s)
}

// fixedSlot returns the slot of (kid, [start, end)), creating it.
func (w *Window) fixedSlot(kid int32, start, end int64) int32 {
	p, s := w.seekFixed(kid, start)
	if s >= 0 && w.slots[s].start == start {
		return s
	}
	n := w.newSlot(kid, start, end)
	ni := &w.slots[n]
	ni.prev, ni.next = p, s
	if s >= 0 {
		w.slots[s].prev = n
	}
	if p >= 0 {
		w.slots[p].next = n
	} else {
		w.keys.at(kid).head = n
	}
	return n
}

// findFixed returns the open tumbling/sliding slot of kid starting at start.
func (w *Window) findFixed(kid int32, start int64) (int32, bool) {
	if _, s := w.seekFixed(kid, start); s >= 0 && w.slots[s].start == start {
		return s, true
	}
	return -1, false
}

// seekFixed returns the first of kid's open slots (kept newest start
// first) whose start is at most start, -1 if none, and the slot before it
// (-1 when it is the head). Rows arrive roughly in event-time order, so the
// answer is nearly always the head: a key's older slots, open until the
// watermark passes them, are not visited.
func (w *Window) seekFixed(kid int32, start int64) (prev, s int32) {
	prev = -1
	for s = w.keys.at(kid).head; s >= 0 && w.slots[s].start > start; s = w.slots[s].next {
		prev = s
	}
	return prev, s
}

// unlinkSlot removes slot s from the open slots of its key ki.
func (w *Window) unlinkSlot(ki *keyInfo, s int32) {
	info := &w.slots[s]
	next, prev := info.next, info.prev
	info.next, info.prev = -1, -1
	if next >= 0 {
		w.slots[next].prev = prev
	}
	if prev >= 0 {
		w.slots[prev].next = next
	} else {
		ki.head = next
	}
}

// sessionSlot adds [t, t+gap) to kid's sessions, merging every session it
// overlaps or touches, and returns the resulting slot. Merged-away slots are
// recorded in w.redirect and w.pending (freed after the batch's updates).
func (w *Window) sessionSlot(kid int32, t int64) int32 {
	lo, hi := t, satAdd(t, w.gap)
	ss := w.sessions[kid]
	first, last := -1, -1
	for i, s := range ss {
		if w.slots[s].start <= hi && w.slots[s].end >= lo {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		s := w.newSlot(kid, lo, hi)
		pos, _ := slices.BinarySearchFunc(w.sessions[kid], lo, func(x int32, t int64) int {
			return cmpInt64(w.slots[x].start, t)
		})
		w.sessions[kid] = slices.Insert(w.sessions[kid], pos, s)
		return s
	}
	target := ss[first]
	ti := &w.slots[target]
	if ti.inBase {
		w.move(target)
	}
	ti.start = min(ti.start, lo)
	ti.end = max(ti.end, hi, w.slots[ss[last]].end)
	victims := slices.Clone(ss[first+1 : last+1])
	for _, v := range victims {
		for _, a := range w.aggs {
			a.grow(len(w.slots)) // target or v may have been created in this batch
			a.merge(target, v)
		}
		w.redirect[v] = target
		w.killSlot(v)
		w.pending = append(w.pending, v)
	}
	return target
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Process aggregates the rows of rec (all routed to this instance; its schema
// must equal the input schema). Rows all of whose windows are closed
// (end + allowed lateness <= Watermark()) are not aggregated: they are returned
// as a batch of input rows, which the caller releases (nil when none). Event
// times must not be null.
func (w *Window) Process(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	return w.ProcessSelected(rec, nil)
}

// ProcessSelected is Process over the rows sel of rec only (ascending row
// indices; nil means every row). Several instances may process the same
// batch concurrently, each through its own selection (PartitionIndices):
// batches are read, never modified. Arrival order, which breaks first/last
// ties, is the row's position in rec, so it does not depend on how rows
// were partitioned.
func (w *Window) ProcessSelected(rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	if rec == nil || rec.NumRows() == 0 {
		return nil, nil
	}
	if sel != nil && len(sel) == 0 {
		w.seq += rec.NumRows()
		return nil, nil
	}
	if !sameFields(rec.Schema(), w.input) {
		return nil, fmt.Errorf("window %s: process: batch schema %s does not match input schema %s", w.id, rec.Schema(), w.input)
	}
	n := int(rec.NumRows())
	tsArr, ok := rec.Column(w.tsCol).(*array.Timestamp)
	if !ok {
		return nil, fmt.Errorf("window %s: process: event time column is %T", w.id, rec.Column(w.tsCol))
	}
	if tsArr.NullN() > 0 {
		return nil, fmt.Errorf("window %s: process: event time column %q has %d nulls", w.id, w.spec.EventTime, tsArr.NullN())
	}
	tsv := tsArr.TimestampValues()
	cols := make([]arrow.Array, len(w.keyCols))
	for i, c := range w.keyCols {
		cols[i] = rec.Column(c)
	}
	w.enc.bind(w.keyKinds, cols)
	rows, slots, late := w.rows[:0], w.slotIdx[:0], w.lateRows[:0]
	all := sel == nil
	if all {
		if len(w.ident) < n {
			w.ident = make([]int32, n)
			for i := range w.ident {
				w.ident[i] = int32(i)
			}
		}
		sel = w.ident[:n]
	}
	switch w.spec.Kind {
	case Tumbling, Sliding:
		// A row goes into its slice [start, start+slide) (for tumbling
		// windows the window itself). It is late when the last window
		// containing it, [start, start+size), is closed: then every window
		// containing it was emitted. Windows of the slice that are closed
		// already were emitted and are never built again (advanceSliding).
		if w.strKey && w.enc.cols[0].dict != nil {
			// A dictionary-encoded key column: each dictionary value is
			// looked up once per batch, at its first row. (A key id
			// stays valid through the batch: its first row opens a slot
			// of it, and only keys without open slots are evicted.)
			bc := &w.enc.cols[0]
			dk := slices.Grow(w.dictKids[:0], bc.str.Len())[:bc.str.Len()]
			w.dictKids = dk
			for j := range dk {
				dk[j] = -1
			}
			// Rows in groups of prefetchRows, as below: a batch of many
			// keys has about as many dictionary values as rows, and
			// each first lookup is a cache miss worth overlapping.
			for lo := 0; lo < len(sel); lo += prefetchRows {
				group := sel[lo:min(len(sel), lo+prefetchRows)]
				hs := w.prefetchDictKeys(bc, group, dk)
				for j, i32 := range group {
					i := int(i32)
					t := int64(tsv[i])
					start := t - floorMod(t, w.slide)
					if w.closed(satAdd(start, w.size)) {
						late = append(late, int32(i))
						continue
					}
					var kid int32
					if bc.valid(i) {
						d := bc.dictIndex(i)
						if kid = dk[d]; kid < 0 {
							kid = w.strKeyIDHash(bc.str.Value(d), hs[j])
							dk[d] = kid
						}
					} else {
						kid = w.rowKey(i)
					}
					rows = append(rows, int32(i))
					slots = append(slots, w.fixedSlot(kid, start, satAdd(start, w.slide)))
				}
			}
			break
		}
		if w.strKey {
			// Rows in groups of prefetchRows: look up the group's keys
			// ahead (prefetchStrKeys), so that their cache misses overlap
			// instead of each row waiting for its own.
			bc := &w.enc.cols[0]
			for lo := 0; lo < len(sel); lo += prefetchRows {
				group := sel[lo:min(len(sel), lo+prefetchRows)]
				hs := w.prefetchStrKeys(bc, group)
				for j, i32 := range group {
					i := int(i32)
					t := int64(tsv[i])
					start := t - floorMod(t, w.slide)
					if w.closed(satAdd(start, w.size)) {
						late = append(late, int32(i))
						continue
					}
					var kid int32
					if bc.valid(i) {
						kid = w.strKeyIDHash(bc.strValue(i), hs[j])
					} else {
						kid = w.rowKey(i)
					}
					rows = append(rows, int32(i))
					slots = append(slots, w.fixedSlot(kid, start, satAdd(start, w.slide)))
				}
			}
			break
		}
		for _, i32 := range sel {
			i := int(i32)
			t := int64(tsv[i])
			start := t - floorMod(t, w.slide)
			if w.closed(satAdd(start, w.size)) {
				late = append(late, int32(i))
				continue
			}
			rows = append(rows, int32(i))
			slots = append(slots, w.fixedSlot(w.rowKey(i), start, satAdd(start, w.slide)))
		}
	case Session:
		for _, i32 := range sel {
			i := int(i32)
			t := int64(tsv[i])
			if w.closed(satAdd(t, w.gap)) {
				// The row's own session [t, t+gap) is closed, but it may
				// join a session of its key that is still open: then its
				// window has not been emitted and it is not late.
				if kid, ok := w.lookupKey(i); !ok || !w.joinsOpenSession(kid, t) {
					late = append(late, int32(i))
					continue
				}
			}
			rows = append(rows, int32(i))
			slots = append(slots, w.sessionSlot(w.rowKey(i), t))
		}
		if len(w.redirect) > 0 {
			for j, s := range slots {
				for {
					r, ok := w.redirect[s]
					if !ok {
						break
					}
					s = r
				}
				slots[j] = s
			}
		}
	}
	w.rows, w.slotIdx, w.lateRows = rows, slots, late
	for _, s := range slots {
		if !w.slots[s].listed {
			w.touch(s)
		}
	}
	u := updateBatch{ts: tsv, seq0: w.seq, rows: rows, slots: slots}
	for j, a := range w.aggs {
		a.grow(len(w.slots))
		u.col = nil
		if w.aggCols[j] >= 0 {
			u.col = rec.Column(w.aggCols[j])
		}
		a.update(&u)
	}
	w.seq += int64(n)
	for _, s := range w.pending {
		w.freeSlot(s)
	}
	w.pending = w.pending[:0]
	clear(w.redirect)
	if len(late) == 0 {
		return nil, nil
	}
	if len(late) == n && all {
		rec.Retain()
		return rec, nil
	}
	out, err := takeRows(rec, late, w.mem)
	if err != nil {
		return nil, fmt.Errorf("window %s: process: late rows: %w", w.id, err)
	}
	return out, nil
}

// Advance emits every open window with end + allowed lateness <= wm, exactly
// once, removes it from the state and remembers wm. A wm not larger than
// Watermark() is ignored. The batch (OutputSchema, rows sorted by window_start,
// key bytes, window_end) is released by the caller; nil when nothing is due.
func (w *Window) Advance(wm int64) (arrow.RecordBatch, error) {
	if wm <= w.wm {
		return nil, nil
	}
	if w.spec.Kind == Sliding {
		return w.advanceSliding(wm)
	}
	w.wm = wm
	var due []int32
	for s := range w.slots {
		if w.slots[s].live && w.closed(w.slots[s].end) {
			due = append(due, int32(s))
		}
	}
	if len(due) == 0 {
		return nil, nil
	}
	order := slices.Clone(due)
	// The slots are removed from the indexes (killSlot) in slot order as
	// their sort keys are read, while their keys are in cache; their
	// accumulators are reset (freeSlot) only once the output is built.
	ords, perm := w.sortSlotsVisit(order, slotStart, slotEnd, w.killSlot)
	rec, err := w.buildOrds(w.output, order, ords, perm)
	w.releaseOrds()
	for _, s := range due {
		w.freeSlot(s)
	}
	if err != nil {
		return nil, fmt.Errorf("window %s: advance to %d: %w", w.id, wm, err)
	}
	return rec, nil
}

// rowLayout is what build writes: output rows, state rows, or merge rows
// (state rows whose count_distinct values are those added since the last
// snapshot point; see SnapshotDeltaMerges).
type rowLayout int

const (
	outputRows rowLayout = iota
	stateRows
	mergeRows
)

// build makes a batch of the given slots in output, state or merge layout.
func (w *Window) build(schema *arrow.Schema, slots []int32, layout rowLayout) (arrow.RecordBatch, error) {
	// Read each slot's key and bounds once, in one pass: the slots are in
	// output order, so these reads are random accesses, which one pass
	// makes once instead of once per column.
	n := len(slots)
	g := w.gatherScratch(n)
	keyBytes := 0
	for i, s := range slots {
		info := &w.slots[s]
		ki := w.keys.at(info.kid)
		g.kgs[i], g.keys[i] = ki.kg, w.keyStr(ki)
		g.starts[i], g.ends[i] = arrow.Timestamp(info.start), arrow.Timestamp(info.end)
		keyBytes += int(ki.kn)
	}
	return w.buildGathered(schema, slots, layout, keyBytes, func(kbs []array.Builder) error {
		// The keys' bytes lie scattered over the heap: load prefetchRows
		// of them before decoding them, so that their cache misses overlap.
		for lo := 0; lo < len(g.keys); lo += prefetchRows {
			group := g.keys[lo:min(len(g.keys), lo+prefetchRows)]
			var sink byte
			for _, k := range group {
				if len(k) > 0 {
					sink += k[len(k)-1]
				}
			}
			w.sink += uint64(sink)
			for _, k := range group {
				if err := decodeKey(k, kbs); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// buildOrds is build in output layout of slots sorted by sortSlots(slots,
// slotStart, slotEnd) into ords and perm, whose keys and bounds it takes
// instead of reading the slot and key tables again: one random read of a
// slotOrd per row, plus the key's bytes only when they are not inline.
func (w *Window) buildOrds(schema *arrow.Schema, slots []int32, ords []slotOrd, perm []int32) (arrow.RecordBatch, error) {
	g := w.gatherScratch(len(ords))
	return w.buildGathered(schema, slots, outputRows, w.ordKeyBytes, func(kbs []array.Builder) error {
		sb, raw := firstBuilder(kbs).(*array.StringBuilder)
		raw = raw && w.strKey
		for lo := 0; lo < len(perm); lo += prefetchRows {
			// Load the group's slotOrds (and keys not inline) before
			// reading them, so that their cache misses overlap.
			group := perm[lo:min(len(perm), lo+prefetchRows)]
			var sink byte
			for _, p := range group {
				o := &ords[p]
				if o.inlN >= 0 {
					sink += o.inl[0]
				} else if k := w.keyStr(w.keys.at(o.kid)); len(k) > 0 {
					sink += k[len(k)-1]
				}
			}
			w.sink += uint64(sink)
			for j, p := range group {
				o := &ords[p]
				g.starts[lo+j], g.ends[lo+j] = arrow.Timestamp(o.major), arrow.Timestamp(o.minor)
				if raw && o.inlN >= 0 {
					sb.BinaryBuilder.Append(o.inl[:o.inlN])
					continue
				}
				if err := decodeKey(w.keyStr(w.keys.at(o.kid)), kbs); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// gatherScratch sizes w.gather for n slots.
func (w *Window) gatherScratch(n int) *gathered {
	g := &w.gather
	g.kgs, g.keys = slices.Grow(g.kgs[:0], n)[:n], slices.Grow(g.keys[:0], n)[:n]
	g.starts, g.ends = slices.Grow(g.starts[:0], n)[:n], slices.Grow(g.ends[:0], n)[:n]
	return g
}

// buildGathered makes the batch of slots from w.gather (the slots' key
// groups and bounds; keyBytes bounds the keys' total length): appendKeys
// appends the slots' keys to the key columns' builders (and may fill the
// bounds in w.gather first).
func (w *Window) buildGathered(schema *arrow.Schema, slots []int32, layout rowLayout, keyBytes int, appendKeys func(kbs []array.Builder) error) (arrow.RecordBatch, error) {
	state := layout != outputRows
	b := array.NewRecordBuilder(w.mem, schema)
	defer b.Release()
	b.Reserve(len(slots))
	g := &w.gather
	defer func() {
		clear(g.keys) // drop the key strings' references
		if cap(g.keys) > 1<<16 {
			*g = gathered{} // an Advance's worth: let the collector have it
		}
	}()
	col := 0
	if state {
		b.Field(0).(*array.Int32Builder).AppendValues(g.kgs, nil)
		col = 1
	}
	nk := len(w.keyCols)
	kbs := b.Fields()[col : col+nk]
	if sb, ok := firstBuilder(kbs).(*array.StringBuilder); ok && nk == 1 {
		// The encoded keys' lengths bound the string bytes: reserve them
		// once instead of growing the buffer by doubling.
		sb.ReserveData(keyBytes)
	}
	if err := appendKeys(kbs); err != nil {
		return nil, err
	}
	col += nk
	b.Field(col).(*array.TimestampBuilder).AppendValues(g.starts, nil)
	b.Field(col+1).(*array.TimestampBuilder).AppendValues(g.ends, nil)
	col += 2
	for j, a := range w.aggs {
		if state {
			nf := len(a.stateFields(w.spec.Aggregates[j].Name))
			appendState := a.appendState
			if m, ok := a.(freshTracker); ok && layout == mergeRows {
				appendState = m.appendFresh
			}
			if err := appendState(b.Fields()[col:col+nf], slots); err != nil {
				return nil, fmt.Errorf("aggregate %s state: %w", w.spec.Aggregates[j].Name, err)
			}
			col += nf
		} else {
			if err := a.appendResults(b.Field(col), slots); err != nil {
				return nil, fmt.Errorf("aggregate %s: %w", w.spec.Aggregates[j].Name, err)
			}
			col++
		}
	}
	return b.NewRecordBatch(), nil
}

// firstBuilder is bs[0], or nil for no key columns (a global aggregate).
func firstBuilder(bs []array.Builder) array.Builder {
	if len(bs) == 0 {
		return nil
	}
	return bs[0]
}

// Snapshot returns the whole state as batches of StateSchema, sorted by
// key_group (then key bytes and window_start) so that a reader can select key
// group ranges. The watermark is not part of the rows: persist Watermark()
// beside them and pass it to Restore. The caller releases the batches.
// Snapshot is a snapshot point: change tracking (SnapshotDelta) starts anew.
func (w *Window) Snapshot() ([]arrow.RecordBatch, error) {
	all := w.liveSlots()
	w.sortStateOrder(all)
	return w.stateBatches(all, "snapshot")
}

// liveSlots returns the slots holding open windows, in slot order.
func (w *Window) liveSlots() []int32 {
	all := make([]int32, 0, w.live)
	for s := range w.slots {
		if w.slots[s].live {
			all = append(all, int32(s))
		}
	}
	return all
}

// stateBatches builds the state rows of slots in chunks of
// snapshotChunkRows and starts change tracking anew; what names the call
// in errors.
func (w *Window) stateBatches(slots []int32, what string) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for lo := 0; lo < len(slots); lo += snapshotChunkRows {
		rec, err := w.build(w.state, slots[lo:min(len(slots), lo+snapshotChunkRows)], stateRows)
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return nil, fmt.Errorf("window %s: %s: %w", w.id, what, err)
		}
		out = append(out, rec)
	}
	w.resetTracking()
	return out, nil
}

// Restore adds the state rows whose key_group is in [kgLo, kgHi) and skips the
// others, then raises the watermark to watermark. Every batch must have the
// StateSchema layout; a row whose key does not hash to its key_group, or that
// duplicates an open window, is an error. Schemas, key groups and window
// bounds are validated before any state changes; after an error about
// duplicate or overlapping windows or aggregate columns the Window holds
// partial state and must be discarded. Restore starts change tracking anew:
// the next SnapshotDelta holds what changed after it.
func (w *Window) Restore(state []arrow.RecordBatch, kgLo, kgHi int, watermark int64) error {
	if kgLo < 0 || kgHi > w.k || kgLo > kgHi {
		return fmt.Errorf("window %s: restore: key-group range [%d,%d) outside [0,%d)", w.id, kgLo, kgHi, w.k)
	}
	picks := make([][]statePick, len(state))
	// Presize the maps of an empty instance for the share of rows its key
	// groups should hold: growing them from empty dominated restore time.
	var total int64
	for _, rec := range state {
		if rec != nil {
			total += rec.NumRows()
		}
	}
	if est := int(total * int64(kgHi-kgLo) / int64(max(w.k, 1))); est > 1024 && w.live == 0 {
		w.ktab.presize(est)
		w.keys.reserve(est)
		w.slots = slices.Grow(w.slots, est)
	}
	var buf []byte
	for bi, rec := range state {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), w.state) {
			return fmt.Errorf("window %s: restore: batch %d schema %s does not match state schema %s", w.id, bi, rec.Schema(), w.state)
		}
		var err error
		if picks[bi], buf, err = w.pickRows(rec, kgLo, kgHi, buf); err != nil {
			return fmt.Errorf("window %s: restore: batch %d %w", w.id, bi, err)
		}
		if w.spec.Kind == Session {
			continue
		}
		for _, p := range picks[bi] {
			if _, ok := w.findSlot([]byte(p.key), p.start, p.end); ok {
				return fmt.Errorf("window %s: restore: batch %d row %d: window at %d already open for this key", w.id, bi, p.row, p.start)
			}
		}
	}
	for bi, rec := range state {
		if len(picks[bi]) == 0 {
			continue
		}
		rows := make([]int32, len(picks[bi]))
		slots := make([]int32, len(picks[bi]))
		for j, p := range picks[bi] {
			rows[j] = p.row
			kid := w.keyID([]byte(p.key))
			if w.spec.Kind == Session {
				s, err := w.addSession(kid, p.start, p.end)
				if err != nil {
					return fmt.Errorf("window %s: restore: batch %d row %d: %w", w.id, bi, p.row, err)
				}
				slots[j] = s
			} else {
				if _, dup := w.findFixed(kid, p.start); dup {
					return fmt.Errorf("window %s: restore: batch %d row %d: window at %d restored twice", w.id, bi, p.row, p.start)
				}
				slots[j] = w.fixedSlot(kid, p.start, p.end)
			}
			w.slots[slots[j]].inBase = true
		}
		if err := w.restoreAggs(rec, rows, slots); err != nil {
			return fmt.Errorf("window %s: restore: batch %d: %w", w.id, bi, err)
		}
	}
	w.wm = max(w.wm, watermark)
	w.resetTracking()
	return nil
}

// statePick is a state or tombstone row selected for this instance.
type statePick struct {
	key        string // encoded key
	start, end int64
	row        int32
}

// pickRows validates the rows of rec (StateSchema or TombstoneSchema: both
// start with key_group, the key columns, window_start, window_end) and
// returns those whose key group is in [kgLo, kgHi). Errors name the row.
func (w *Window) pickRows(rec arrow.RecordBatch, kgLo, kgHi int, buf []byte) ([]statePick, []byte, error) {
	nk := len(w.keyCols)
	kgs := rec.Column(0).(*array.Int32).Int32Values()
	var enc keyEncoder
	enc.bind(w.keyKinds, rec.Columns()[1:1+nk])
	starts := rec.Column(1 + nk).(*array.Timestamp).TimestampValues()
	ends := rec.Column(2 + nk).(*array.Timestamp).TimestampValues()
	var picks []statePick
	for r := 0; r < int(rec.NumRows()); r++ {
		kg := int(kgs[r])
		if kg < 0 || kg >= w.k {
			return nil, buf, fmt.Errorf("row %d: key group %d outside [0,%d) (max parallelism changed or state corrupt)", r, kg, w.k)
		}
		if kg < kgLo || kg >= kgHi {
			continue
		}
		buf = enc.encode(buf[:0], r)
		if got := keygroup.Of(buf, w.k); got != kg {
			return nil, buf, fmt.Errorf("row %d: key hashes to key group %d, row says %d (max parallelism changed or state corrupt)", r, got, kg)
		}
		start, end := int64(starts[r]), int64(ends[r])
		if end <= start {
			return nil, buf, fmt.Errorf("row %d: empty window [%d,%d)", r, start, end)
		}
		if w.spec.Kind != Session && (floorMod(start, w.slide) != 0 || end-start != w.slide) {
			if w.spec.Kind == Sliding {
				return nil, buf, fmt.Errorf("row %d: [%d,%d) is not a slice of length %d aligned to it (a sliding window state must hold slices, not windows)", r, start, end, w.slide)
			}
			return nil, buf, fmt.Errorf("row %d: window [%d,%d) does not fit size %d", r, start, end, w.size)
		}
		picks = append(picks, statePick{key: string(buf), start: start, end: end, row: int32(r)})
	}
	return picks, buf, nil
}

// findSlot returns the open slot of window [start, end) of an encoded key.
func (w *Window) findSlot(key []byte, start, end int64) (int32, bool) {
	kid, ok := w.lookupEncoded(key)
	if !ok {
		return -1, false
	}
	if w.spec.Kind == Session {
		for _, s := range w.sessions[kid] {
			if w.slots[s].start == start && w.slots[s].end == end {
				return s, true
			}
		}
		return -1, false
	}
	s, ok := w.findFixed(kid, start)
	if !ok || w.slots[s].end != end {
		return -1, false
	}
	return s, true
}

// addSession opens session [start, end) of kid; it must not overlap or touch
// an open session of the key.
func (w *Window) addSession(kid int32, start, end int64) (int32, error) {
	for _, s := range w.sessions[kid] {
		if w.slots[s].start <= end && w.slots[s].end >= start {
			return -1, fmt.Errorf("session [%d,%d) overlaps an open session [%d,%d)", start, end, w.slots[s].start, w.slots[s].end)
		}
	}
	s := w.newSlot(kid, start, end)
	pos, _ := slices.BinarySearchFunc(w.sessions[kid], start, func(x int32, t int64) int {
		return cmpInt64(w.slots[x].start, t)
	})
	w.sessions[kid] = slices.Insert(w.sessions[kid], pos, s)
	return s, nil
}

// restoreAggs sets slots[j] from state row rows[j] of rec, for every
// aggregate, and keeps arrival sequence numbers above the restored ones.
func (w *Window) restoreAggs(rec arrow.RecordBatch, rows, slots []int32) error {
	for ai, a := range w.aggs {
		a.grow(len(w.slots))
		nf := len(a.stateFields(w.spec.Aggregates[ai].Name))
		c0 := w.aggState[ai]
		maxSeq, err := a.restore(rec.Columns()[c0:c0+nf], rows, slots)
		if err != nil {
			return fmt.Errorf("aggregate %s: %w", w.spec.Aggregates[ai].Name, err)
		}
		w.seq = max(w.seq, maxSeq+1)
	}
	return nil
}

// compactKeys copies the bytes of the keys not evicted into a fresh arena
// (keyArena): strings over the old chunks stay valid while held.
func (w *Window) compactKeys() {
	fresh := keyArena{compactions: w.karena.compactions + 1}
	for i := range int32(w.keys.len()) {
		ki := w.keys.at(i)
		if ki.kn == 0 {
			continue
		}
		ki.kc, ki.ko = fresh.put([]byte(w.keyStr(ki)))
	}
	w.karena = fresh
}
