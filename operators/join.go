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

// Joins of two keyed event-time streams.
//
// A Join is one instance of a keyed two-input operator: rows of input 0
// (left) and input 1 (right) are routed by the key group of their join keys
// (which encode identically on both sides, so matching rows meet in one
// instance), buffered, and paired when their keys are equal and non-null and
// their event times match:
//
//   - interval join: right.t BETWEEN left.t - Lower AND left.t + Upper, both
//     bounds inclusive (Lower and Upper may be negative; Lower + Upper >= 0);
//   - windowed join: both rows fall in the same tumbling or sliding window
//     [start, end) (start inclusive, end exclusive); a pair is emitted once
//     for every window that holds both rows, with window_start and
//     window_end.
//
// A null in any key column never matches (as SQL's =). Type inner emits the
// pairs; type left also emits each left row that found no partner, with
// null right columns: for an interval join once no right row can still
// arrive for it, for a windowed join per window without right rows of its
// key.
//
// # Lateness and finality
//
// L is the allowed lateness and W the watermark of the last Advance.
//
//   - Interval join: a row of either side with t + L < W is late: it is
//     returned from ProcessInput and never joined (Flink's rule, with
//     lateness). A left row is final, and removed, when W > t + Upper + L:
//     every right row that could match it (t_r <= t + Upper) is then late.
//     A right row is removed when W > t + Lower + L: every left row it could
//     match (t_l <= t_r + Lower) is then late. So every pair of rows that
//     are not late is emitted, exactly once, whatever the batching, the
//     arrival order within and across inputs and the parallelism.
//   - Windowed join: as for Window, window [s, e) is closed when
//     e + L <= W, a row is late when every window holding it is closed, a
//     row is joined in the windows that were open when it arrived, and each
//     window is emitted at the Advance that closes it.
//
// All output comes from Advance: an interval join emits at every call the
// pairs whose second row arrived since the previous call (even when the
// watermark does not rise, so an idle watermark does not hold back pairs),
// and, when the watermark rises, the unmatched left rows it made final. Rows
// are sorted by (left time, left key bytes, left arrival seq, right time,
// right arrival seq); a windowed join's by (window_start, window_end, key
// bytes, left time, left seq, right time, right seq). Unmatched left rows
// sort where their pairs would. Arrival seqs count the rows of every batch
// passed on an input, as for Window, so the order is the same at any
// parallelism.
//
// # State
//
// The state is the buffered rows of both sides, one state row each
// (StateSchema). Buffered rows are immutable except for two flags: pending
// (arrived since the last Advance: its pairs are not emitted yet) and
// matched (a left row of an interval left join that had a partner). A row is
// identified by (key_group, side, seq): seqs are unique per side within an
// instance, a key group lives in one instance at a time and a restored
// instance numbers new rows above every restored seq.

// JoinType is the type of a join or lookup.
type JoinType int

// The join types.
const (
	InnerJoin JoinType = iota + 1 // pairs only
	LeftJoin                      // pairs, and left rows without a partner with null right columns
)

// String returns the type's name as written in a pipeline spec.
func (t JoinType) String() string {
	switch t {
	case InnerJoin:
		return "inner"
	case LeftJoin:
		return "left"
	}
	return fmt.Sprintf("JoinType(%d)", int(t))
}

// JoinInterval is the time condition of an interval join:
// right.t BETWEEN left.t - Lower AND left.t + Upper (inclusive).
type JoinInterval struct {
	Lower, Upper time.Duration
}

// JoinWindow is the time condition of a windowed join: both rows in the same
// window (Kind Tumbling or Sliding, windows aligned to the Unix epoch as for
// Window).
type JoinWindow struct {
	Kind  WindowKind
	Size  time.Duration
	Slide time.Duration // Sliding only; divides Size
}

// JoinSpec declares a keyed event-time join of two inputs. Exactly one of
// Interval and Window is set.
type JoinSpec struct {
	ID                  string // operator id, used in errors and state paths
	Type                JoinType
	LeftKeys, RightKeys []string // paired in order; pairs must have identical types
	LeftTime, RightTime string   // timestamp[us] columns
	Interval            *JoinInterval
	Window              *JoinWindow
	AllowedLateness     time.Duration
	// RightPrefix renames a right column whose name is already taken by a
	// left column (or window_start/window_end of a windowed join):
	// "user" becomes RightPrefix+"user". Empty means DefaultRightPrefix.
	// If the prefixed name is taken too, NewJoin fails.
	RightPrefix string
}

// Columns of the join state schema before the data columns.
const (
	colJoinSide    = "side"
	colJoinSeq     = "seq"
	colJoinPending = "pending"
	colJoinMatched = "matched"
	joinStateMeta  = 5 // key_group, side, seq, pending, matched
)

// joinStateFormatVersion is mixed into Join.StateFingerprint; bump it when
// the layout or meaning of the join state changes.
const joinStateFormatVersion = "floe-join-state/v1"

// joinKey is one join key held by an instance.
type joinKey struct {
	bytes   string
	h       uint32 // keyIdx's hash of bytes
	kg      int32
	null    bool       // a key column is null: never matches
	rows    [2][]int32 // live row ids per side, unordered
	pending bool       // in Join.pendingKeys
}

// jrow is one buffered row.
type jrow struct {
	t, seq  int64
	kid     int32
	pos     int32 // index in keys[kid].rows[side]
	loc     rowLoc
	side    int8
	live    bool
	pending bool
	matched bool
	listed  bool // in Join.dirty (kept across reuse of the row id)
	inBase  bool // existed at the last snapshot point
}

// hotKey is one side of one key.
type hotKey struct {
	kid  int32
	side int8
}

// rowID identifies a state row.
type rowID struct {
	kg   int32
	side int8
	seq  int64
}

// Join is one instance (subtask) of a keyed event-time join. It is not safe
// for concurrent use.
type Join struct {
	spec     JoinSpec
	id       string
	k        int
	in       [2]*arrow.Schema
	keyCols  [2][]int
	timeCol  [2]int
	kinds    []byte
	output   *arrow.Schema
	state    *arrow.Schema
	tombs    *arrow.Schema
	interval bool
	lower    int64 // interval
	upper    int64
	size     int64 // windowed
	slide    int64
	lateness int64
	wm       int64
	seq      [2]int64
	mem      memory.Allocator
	store    [2]rowStore

	keyIdx      keyIndex // key ids by key (bytes)
	karena      keyArena // the keys' bytes (joinKey.bytes points into it)
	keys        paged[joinKey]
	freeKeys    []int32
	rows        paged[jrow]
	freeRows    []int32
	index       map[rowID]int32 // built by Restore and ApplyDelta, dropped by ProcessInput (see ensureIndex)
	live        int
	pendingKeys []int32

	hot       map[hotKey]map[int64]int32 // findRow's index of a key with many rows, during one applyDeltaScan
	dirty     []int32                    // rows created or changed since the last snapshot point
	tombstone []rowID                    // base rows removed since

	enc  keyEncoder
	buf  []byte
	tbuf []timeEnt // byTime's scratch
	// Advance's scratch, kept between calls: the pairs in the order found
	// and in output order, and the gather's row locations. An epoch's
	// pairs are as many as the last one's, and growing them from nothing
	// each time copied and faulted in their memory several times over.
	pairs, sortedPairs []joinOut
	locs               [2][]rowLoc
}

var _ Stateful = (*Join)(nil)

// NewJoin validates spec against the left and right input schemas and
// returns an empty join instance for a pipeline with maxParallelism key
// groups.
func NewJoin(spec JoinSpec, left, right *arrow.Schema, maxParallelism int) (*Join, error) {
	id := spec.ID
	if id == "" {
		id = "join"
	}
	fail := func(format string, args ...any) (*Join, error) {
		return nil, fmt.Errorf("join %s: "+format, append([]any{id}, args...)...)
	}
	if left == nil || right == nil {
		return fail("nil input schema")
	}
	if !keygroup.ValidCount(maxParallelism) {
		return fail("max parallelism %d out of range [1,%d]", maxParallelism, keygroup.Max)
	}
	if spec.Type != InnerJoin && spec.Type != LeftJoin {
		return fail("unknown join type %v; expected inner or left", spec.Type)
	}
	j := &Join{spec: spec, id: id, k: maxParallelism, in: [2]*arrow.Schema{left, right}, wm: math.MinInt64,
		mem: memory.DefaultAllocator, keyIdx: newKeyIndex(0)}
	micros := func(name string, d time.Duration) (int64, error) {
		if d%time.Microsecond != 0 {
			return 0, fmt.Errorf("join %s: %s %v is not a whole number of microseconds", id, name, d)
		}
		return d.Microseconds(), nil
	}
	var err error
	switch {
	case spec.Interval != nil && spec.Window != nil:
		return fail("both an interval and a window are set; a join has one time condition")
	case spec.Interval != nil:
		j.interval = true
		if j.lower, err = micros("interval lower bound", spec.Interval.Lower); err != nil {
			return nil, err
		}
		if j.upper, err = micros("interval upper bound", spec.Interval.Upper); err != nil {
			return nil, err
		}
		if j.lower+j.upper < 0 {
			return fail("interval [left.t - %v, left.t + %v] is empty (lower + upper must not be negative)", spec.Interval.Lower, spec.Interval.Upper)
		}
	case spec.Window != nil:
		wn := spec.Window
		if wn.Size <= 0 {
			return fail("window size %v must be positive", wn.Size)
		}
		if j.size, err = micros("window size", wn.Size); err != nil {
			return nil, err
		}
		switch wn.Kind {
		case Tumbling:
			j.slide = j.size
		case Sliding:
			if wn.Slide <= 0 {
				return fail("sliding window slide %v must be positive", wn.Slide)
			}
			if j.slide, err = micros("window slide", wn.Slide); err != nil {
				return nil, err
			}
			if j.slide > j.size || j.size%j.slide != 0 {
				return fail("sliding window size %v is not a multiple of slide %v", wn.Size, wn.Slide)
			}
		default:
			return fail("window kind %v not supported by a join; expected tumbling or sliding", wn.Kind)
		}
	default:
		return fail("no time condition: set an interval or a window")
	}
	if spec.AllowedLateness < 0 {
		return fail("allowed lateness %v must not be negative", spec.AllowedLateness)
	}
	if j.lateness, err = micros("allowed lateness", spec.AllowedLateness); err != nil {
		return nil, err
	}
	if j.keyCols[0], j.keyCols[1], j.kinds, err = keyPairs(left, right, spec.LeftKeys, spec.RightKeys, "left", "right"); err != nil {
		return fail("%v", err)
	}
	for side, name := range []string{spec.LeftTime, spec.RightTime} {
		what := [2]string{"left", "right"}[side]
		c := findColumn(j.in[side], name)
		if c < 0 {
			return fail("%s time column %q not found (or ambiguous) in %s schema%s", what, name, what, columnHint(name, j.in[side]))
		}
		if ts, ok := j.in[side].Field(c).Type.(*arrow.TimestampType); !ok || ts.Unit != arrow.Microsecond {
			return fail("%s time column %q has type %s; want timestamp[us]", what, name, j.in[side].Field(c).Type)
		}
		j.timeCol[side] = c
	}
	prefix := spec.RightPrefix
	if prefix == "" {
		prefix = DefaultRightPrefix
	}
	var reserved []string
	if !j.interval {
		reserved = []string{ColWindowStart, ColWindowEnd}
	}
	fields, err := outputFields(left.Fields(), right.Fields(), reserved, prefix, spec.Type == LeftJoin, "left", "right")
	if err != nil {
		return fail("%v", err)
	}
	if !j.interval {
		fields = append(fields, arrow.Field{Name: ColWindowStart, Type: eventTimeType}, arrow.Field{Name: ColWindowEnd, Type: eventTimeType})
	}
	j.output = arrow.NewSchema(fields, nil)
	state := []arrow.Field{
		{Name: ColKeyGroup, Type: arrow.PrimitiveTypes.Int32},
		{Name: colJoinSide, Type: arrow.PrimitiveTypes.Int8},
		{Name: colJoinSeq, Type: arrow.PrimitiveTypes.Int64},
		{Name: colJoinPending, Type: arrow.FixedWidthTypes.Boolean},
		{Name: colJoinMatched, Type: arrow.FixedWidthTypes.Boolean},
	}
	for side, pfx := range []string{"left.", "right."} {
		for _, f := range j.in[side].Fields() {
			state = append(state, arrow.Field{Name: pfx + f.Name, Type: f.Type, Nullable: true})
		}
	}
	j.state = arrow.NewSchema(state, nil)
	j.tombs = arrow.NewSchema(state[:3], nil)
	j.store = [2]rowStore{newRowStore(left), newRowStore(right)}
	return j, nil
}

// ID returns the join's operator id.
func (j *Join) ID() string { return j.id }

// NumInputs is 2: input 0 is the left side, 1 the right side.
func (j *Join) NumInputs() int { return 2 }

// InputSchemaOf returns the schema of input i (0 left, 1 right).
func (j *Join) InputSchemaOf(i int) *arrow.Schema { return j.in[i&1] }

// KeyColumns returns the join key column indices of input i, in key order.
func (j *Join) KeyColumns(i int) []int { return j.keyCols[i&1] }

// OutputSchema is the schema of Advance's batches: the left columns, then
// the right columns (a right column whose name a left column has is renamed
// with the right prefix; all nullable for a left join), then for a windowed
// join window_start and window_end (timestamp[us, UTC], [start, end)).
func (j *Join) OutputSchema() *arrow.Schema { return j.output }

// StateSchema is the schema of Snapshot's batches, an on-storage format
// (version floe-join-state/v1, see StateFingerprint). One row per buffered
// input row:
//
//	key_group  int32     key group of the row's join key
//	side       int8      0 left, 1 right
//	seq        int64     arrival seq of the row on its side
//	pending    bool      arrived since the last Advance (interval join)
//	matched    bool      a left row that had a partner (interval join)
//	left.<c>   ...       every column of the left input, null on right rows
//	right.<c>  ...       every column of the right input, null on left rows
//
// Rows are sorted by key_group, key bytes, side and seq.
func (j *Join) StateSchema() *arrow.Schema { return j.state }

// TombstoneSchema is the schema of SnapshotDelta's tombstones: key_group,
// side and seq, the identity of a removed state row.
func (j *Join) TombstoneSchema() *arrow.Schema { return j.tombs }

// StateFingerprint identifies the state layout and the spec parts that
// decide what a state row means (join type, time condition, lateness). A
// snapshot can be restored into a Join with the same fingerprint.
func (j *Join) StateFingerprint() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\ntype=%s interval=%t lower=%d upper=%d size=%d slide=%d lateness=%d\n",
		joinStateFormatVersion, j.spec.Type, j.interval, j.lower, j.upper, j.size, j.slide, j.lateness)
	fmt.Fprintf(&b, "keys=%s|%s\n", strings.Join(j.spec.LeftKeys, ","), strings.Join(j.spec.RightKeys, ","))
	for _, f := range j.state.Fields() {
		fmt.Fprintf(&b, "%s:%s\n", f.Name, f.Type)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "j1-" + hex.EncodeToString(sum[:16])
}

// SetAllocator makes the join allocate the batches it returns (late rows,
// Advance, Snapshot, SnapshotDelta) from mem; nil restores
// memory.DefaultAllocator. Buffered rows never use it: they are Go memory.
func (j *Join) SetAllocator(mem memory.Allocator) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	j.mem = mem
}

// Watermark is the largest watermark passed to Advance or Restore.
func (j *Join) Watermark() int64 { return j.wm }

// Len is the number of buffered rows of both sides.
func (j *Join) Len() int { return j.live }

// late reports whether a row of time t arriving now is late.
func (j *Join) late(t int64) bool {
	if j.interval {
		return addSat(t, j.lateness) < j.wm
	}
	return j.windowClosed(addSat(t-floorMod(t, j.slide), j.size), j.wm)
}

func (j *Join) windowClosed(end, wm int64) bool { return addSat(end, j.lateness) <= wm }

// expired reports whether buffered row r can match nothing more at
// watermark wm (and, for a left row of an interval join, is final).
func (j *Join) expired(r *jrow, wm int64) bool {
	if !j.interval {
		return j.windowClosed(addSat(r.t-floorMod(r.t, j.slide), j.size), wm)
	}
	if r.side == 0 {
		return addSat(addSat(r.t, j.upper), j.lateness) < wm || j.keys.at(r.kid).null
	}
	return addSat(addSat(r.t, j.lower), j.lateness) < wm
}

// keyID returns the id of an encoded key, creating it.
func (j *Join) keyID(key []byte) int32 {
	h := uint32(maphash.Bytes(j.keyIdx.seed, key))
	if kid, ok := j.keyIdx.lookup(h, func(k int32) bool { return j.keys.at(k).bytes == string(key) }); ok {
		return kid
	}
	return j.newKey(string(key), h)
}

// keyIDString is keyID of a key already held as a string (restore).
func (j *Join) keyIDString(key string) int32 {
	h := j.keyIdx.hash(key)
	if kid, ok := j.keyIdx.lookup(h, func(k int32) bool { return j.keys.at(k).bytes == key }); ok {
		return kid
	}
	return j.newKey(key, h)
}

// findKey returns the id of an encoded key held, if it is.
func (j *Join) findKey(key string) (int32, bool) {
	return j.keyIdx.lookup(j.keyIdx.hash(key), func(k int32) bool { return j.keys.at(k).bytes == key })
}

// newKey creates the id of an encoded key not held, whose hash is h. Its
// bytes are copied into the key arena (no allocation of its own).
func (j *Join) newKey(key string, h uint32) int32 {
	if j.karena.wasteful() {
		j.compactKeys()
	}
	jk := joinKey{bytes: j.karena.putString([]byte(key)), h: h, kg: int32(keygroup.Of([]byte(key), j.k)), null: hasNullKey([]byte(key), len(j.kinds))}
	var kid int32
	if n := len(j.freeKeys); n > 0 {
		kid = j.freeKeys[n-1]
		j.freeKeys = j.freeKeys[:n-1]
		jk.rows = [2][]int32{j.keys.at(kid).rows[0][:0], j.keys.at(kid).rows[1][:0]}
		*j.keys.at(kid) = jk
	} else {
		kid = j.keys.push(jk)
	}
	j.keyIdx.add(h, kid)
	return kid
}

// freeKey makes key id kid (no longer indexed) free for reuse; its bytes
// are dead.
func (j *Join) freeKey(kid int32) {
	jk := j.keys.at(kid)
	j.karena.release(uint32(len(jk.bytes)))
	jk.bytes = ""
	j.freeKeys = append(j.freeKeys, kid)
}

// compactKeys copies the bytes of the held keys into a fresh arena
// (keyArena): strings over the old chunks stay valid while referenced.
func (j *Join) compactKeys() {
	j.karena.compact(func(move func(string) string) {
		for kid := range int32(j.keys.len()) {
			if jk := j.keys.at(kid); jk.bytes != "" { // "": free
				jk.bytes = move(jk.bytes)
			}
		}
	})
}

// hasNullKey reports whether an encoded key of n columns has a null column.
func hasNullKey(key []byte, n int) bool {
	p := 0
	for range n {
		if p >= len(key) {
			return false
		}
		tag := key[p]
		p++
		switch tag {
		case tagNull:
			return true
		case tagInt64, tagInt32, tagFloat64, tagTimestamp:
			p += 8
		case tagBool:
			p++
		default: // string and other: uvarint length, bytes
			l, w := binary.Uvarint(key[p:])
			if w <= 0 {
				return false
			}
			p += w + int(l)
		}
	}
	return false
}

// addRow buffers a row of side at loc and returns its id. The row is
// created, so it is listed for the next delta.
func (j *Join) addRow(side int8, kid int32, t, seq int64, loc rowLoc) int32 {
	id := j.putRow(side, kid, t, seq, loc)
	j.touch(id)
	return id
}

// putRow buffers a row of side at loc and returns its id, without listing
// it for the next delta (a restored row: it is in the files already).
func (j *Join) putRow(side int8, kid int32, t, seq int64, loc rowLoc) int32 {
	r := jrow{t: t, seq: seq, kid: kid, loc: loc, side: side, live: true}
	var id int32
	if n := len(j.freeRows); n > 0 {
		id = j.freeRows[n-1]
		j.freeRows = j.freeRows[:n-1]
		r.listed = j.rows.at(id).listed
		*j.rows.at(id) = r
	} else {
		id = j.rows.push(r)
	}
	jk := j.keys.at(kid)
	j.rows.at(id).pos = int32(len(jk.rows[side]))
	jk.rows[side] = append(jk.rows[side], id)
	if j.index != nil {
		j.index[rowID{kg: jk.kg, side: side, seq: seq}] = id
	}
	j.live++
	return id
}

func (j *Join) touch(id int32) {
	if !j.rows.at(id).listed {
		j.rows.at(id).listed = true
		j.dirty = append(j.dirty, id)
	}
}

// removeRow drops buffered row id, recording a tombstone if it was in the
// last snapshot point.
func (j *Join) removeRow(id int32) {
	r := j.rows.at(id)
	jk := j.keys.at(r.kid)
	if r.inBase {
		j.tombstone = append(j.tombstone, rowID{kg: jk.kg, side: r.side, seq: r.seq})
	}
	if j.index != nil {
		delete(j.index, rowID{kg: jk.kg, side: r.side, seq: r.seq})
	}
	list := jk.rows[r.side]
	last := list[len(list)-1]
	list[r.pos] = last
	j.rows.at(last).pos = r.pos
	jk.rows[r.side] = list[:len(list)-1]
	j.store[r.side].drop(r.loc.chunk)
	r.live, r.inBase, r.pending = false, false, false
	j.freeRows = append(j.freeRows, id)
	j.live--
	if len(jk.rows[0]) == 0 && len(jk.rows[1]) == 0 && !jk.pending {
		j.keyIdx.remove(jk.h, r.kid)
		j.freeKey(r.kid)
	}
}

// BeginEpoch starts epoch e's arrival numbers (ArrivalOrdered).
func (j *Join) BeginEpoch(e int64) {
	for side := range j.seq {
		j.seq[side] = max(j.seq[side], EpochArrivalBase(e))
	}
}

// ProcessInput buffers rows sel of rec (nil: all) arriving on input i (0
// left, 1 right) and returns its late rows (see the package comment on
// joins), which the caller releases, or nil. Rows with a null key are
// dropped, except left rows of a left join, which are emitted unmatched.
// Event times must not be null. Nothing is emitted here: see Advance.
func (j *Join) ProcessInput(i int, rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	if i != 0 && i != 1 {
		return nil, fmt.Errorf("join %s: process: input %d out of range [0,2)", j.id, i)
	}
	if rec == nil || rec.NumRows() == 0 {
		return nil, nil
	}
	j.index = nil // only restore needs it: not worth its upkeep per row
	side := int8(i)
	n := int(rec.NumRows())
	seq0 := j.seq[side]
	j.seq[side] += int64(n)
	if sel != nil && len(sel) == 0 {
		return nil, nil
	}
	what := [2]string{"left", "right"}[side]
	fail := func(err error) (arrow.RecordBatch, error) {
		j.seq[side] = seq0
		return nil, fmt.Errorf("join %s: process %s: %w", j.id, what, err)
	}
	if !sameFields(rec.Schema(), j.in[side]) {
		return fail(fmt.Errorf("batch schema %s does not match %s input schema %s", rec.Schema(), what, j.in[side]))
	}
	tsArr, ok := rec.Column(j.timeCol[side]).(*array.Timestamp)
	if !ok {
		return fail(fmt.Errorf("time column is %T", rec.Column(j.timeCol[side])))
	}
	if tsArr.NullN() > 0 {
		return fail(fmt.Errorf("time column %q has %d nulls", j.in[side].Field(j.timeCol[side]).Name, tsArr.NullN()))
	}
	tsv := tsArr.TimestampValues()
	cols := make([]arrow.Array, len(j.keyCols[side]))
	for c, kc := range j.keyCols[side] {
		cols[c] = rec.Column(kc)
	}
	j.enc.bind(j.kinds, cols)
	all := sel == nil
	if all {
		sel = make([]int32, n)
		for r := range sel {
			sel[r] = int32(r)
		}
	}
	for _, r := range sel {
		if int(r) >= n || r < 0 {
			return fail(fmt.Errorf("selection row %d outside the batch of %d rows", r, n))
		}
	}
	var late, keep, kids []int32
	keepNull := j.spec.Type == LeftJoin && side == 0
	for _, r := range sel {
		if j.late(int64(tsv[r])) {
			late = append(late, r)
			continue
		}
		j.buf = j.enc.encode(j.buf[:0], int(r))
		if !keepNull && hasNullKey(j.buf, len(j.kinds)) {
			continue // a null key matches nothing
		}
		keep = append(keep, r)
		kids = append(kids, j.keyID(j.buf))
	}
	if len(keep) > 0 {
		c, err := j.store[side].copyRows(rec, keep)
		if err != nil {
			for _, kid := range kids {
				j.releaseKeyIfEmpty(kid)
			}
			return fail(err)
		}
		for x, r := range keep {
			id := j.addRow(side, kids[x], int64(tsv[r]), seq0+int64(r), rowLoc{chunk: c, idx: int32(x)})
			if j.interval {
				j.rows.at(id).pending = true
				j.markPending(kids[x])
			}
		}
	}
	if len(late) == 0 {
		return nil, nil
	}
	if all && len(late) == n {
		rec.Retain()
		return rec, nil
	}
	out, err := takeRows(rec, late, j.mem)
	if err != nil {
		return nil, fmt.Errorf("join %s: process %s: late rows: %w", j.id, what, err)
	}
	return out, nil
}

func (j *Join) markPending(kid int32) {
	if !j.keys.at(kid).pending {
		j.keys.at(kid).pending = true
		j.pendingKeys = append(j.pendingKeys, kid)
	}
}

// releaseKeyIfEmpty frees a key created for rows that were not buffered.
func (j *Join) releaseKeyIfEmpty(kid int32) {
	jk := j.keys.at(kid)
	if len(jk.rows[0]) == 0 && len(jk.rows[1]) == 0 && !jk.pending {
		if j.keyIdx.remove(jk.h, kid) {
			j.freeKey(kid)
		}
	}
}

// joinOut is one output row: left row l, right row r (-1: none) and, for a
// windowed join, the window start.
type joinOut struct {
	l, r int32
	ws   int64
}

// Advance emits what is due at watermark wm and raises Watermark to it if
// larger (see the package comment on joins): for an interval join, the
// pairs whose second row arrived since the last call, at every call, and
// when wm raises the watermark the unmatched left rows of a left join made
// final; for a windowed join, the windows wm closes. Rows that can match
// nothing more are removed. The batch (OutputSchema) is the caller's to
// release; nil when nothing is due. On error the state is unchanged.
func (j *Join) Advance(wm int64) (arrow.RecordBatch, error) {
	raise := wm > j.wm
	if !raise {
		wm = j.wm
	}
	var out []joinOut
	var runs, matched []int32
	if j.interval {
		out, runs, matched = j.intervalPairs()
	} else if raise {
		out, runs = j.windowPairs(j.wm, wm)
	}
	// Rows the new watermark makes final, and null-keyed left rows.
	var expired []int32
	if raise {
		for id := range int32(j.rows.len()) {
			if r := j.rows.at(id); r.live && j.expired(r, wm) {
				expired = append(expired, int32(id))
			}
		}
	} else if j.interval {
		for _, kid := range j.pendingKeys {
			if j.keys.at(kid).null {
				expired = append(expired, j.keys.at(kid).rows[0]...)
			}
		}
	}
	if j.interval && j.spec.Type == LeftJoin && len(expired) > 0 {
		now := make(map[int32]bool, len(matched))
		for _, id := range matched {
			now[id] = true
		}
		for _, id := range expired {
			if r := j.rows.at(id); r.side == 0 && !r.matched && !now[id] {
				runs = append(runs, int32(len(out)))
				out = append(out, joinOut{l: id, r: -1})
			}
		}
	}
	j.pairs = out[:0]
	var rec arrow.RecordBatch
	if len(out) > 0 {
		out = j.sortOutput(out, runs)
		j.sortedPairs = out[:0]
		var err error
		if rec, err = j.buildOutput(out); err != nil {
			return nil, fmt.Errorf("join %s: advance to %d: %w", j.id, wm, err)
		}
	}
	// Commit: flags, then removals, then the watermark.
	for _, id := range matched {
		if !j.rows.at(id).matched {
			j.rows.at(id).matched = true
			j.touch(id)
		}
	}
	for _, kid := range j.pendingKeys {
		jk := j.keys.at(kid)
		jk.pending = false
		for side := range 2 {
			for _, id := range jk.rows[side] {
				if j.rows.at(id).pending {
					j.rows.at(id).pending = false
					j.touch(id)
				}
			}
		}
	}
	pk := j.pendingKeys
	j.pendingKeys = j.pendingKeys[:0]
	for _, id := range expired {
		j.removeRow(id)
	}
	for _, kid := range pk {
		j.releaseKeyIfEmpty(kid)
	}
	j.wm = wm
	if err := j.maybeCompact(); err != nil {
		if rec != nil {
			rec.Release()
		}
		return nil, fmt.Errorf("join %s: advance to %d: %w", j.id, wm, err)
	}
	return rec, nil
}

// byTime sorts row ids by (time, seq), a total order (seqs are unique per
// side). It sorts copies of the two values beside each id, in a scratch
// slice, rather than ids whose comparison reads two rows.
func (j *Join) byTime(ids []int32) {
	if len(ids) < 2 {
		return
	}
	es := j.tbuf[:0]
	sorted := true
	for _, id := range ids {
		r := j.rows.at(id)
		e := timeEnt{t: r.t, seq: r.seq, id: id}
		if n := len(es); n > 0 && sorted && cmpTimeEnt(es[n-1], e) > 0 {
			sorted = false
		}
		es = append(es, e)
	}
	j.tbuf = es
	if sorted {
		return
	}
	if len(es) <= 24 {
		// Mostly sorted (a key's rows arrive near time order) and short:
		// an insertion sort with the comparison inline.
		for i := 1; i < len(es); i++ {
			e := es[i]
			k := i
			for ; k > 0 && (es[k-1].t > e.t || es[k-1].t == e.t && es[k-1].seq > e.seq); k-- {
				es[k] = es[k-1]
			}
			es[k] = e
		}
	} else {
		slices.SortFunc(es, cmpTimeEnt)
	}
	for i := range es {
		ids[i] = es[i].id
	}
}

// timeEnt is a row id with its (time, seq), byTime's sort element.
type timeEnt struct {
	t, seq int64
	id     int32
}

func cmpTimeEnt(a, b timeEnt) int {
	return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.seq, b.seq))
}

// intervalPairs returns the pairs of the keys with pending rows in which at
// least one row is pending, as runs (the start index of each) of one left
// row's pairs sorted by right time and seq, and the left rows that found a
// partner.
func (j *Join) intervalPairs() (out []joinOut, runs, matched []int32) {
	var lefts, rights, newRights []int32
	out = j.pairs[:0]
	for _, kid := range j.pendingKeys {
		jk := j.keys.at(kid)
		if jk.null || len(jk.rows[0]) == 0 || len(jk.rows[1]) == 0 {
			continue
		}
		lefts = append(lefts[:0], jk.rows[0]...)
		j.byTime(lefts)
		// A pending left row pairs with every right row, the others with
		// the pending right rows only: sort all right rows only when needed.
		rights = rights[:0]
		for _, l := range lefts {
			if j.rows.at(l).pending {
				rights = append(rights, jk.rows[1]...)
				j.byTime(rights)
				break
			}
		}
		src := rights // sorted, or empty: then sort the pending ones
		if len(src) == 0 {
			src = jk.rows[1]
		}
		newRights = newRights[:0]
		for _, id := range src {
			if j.rows.at(id).pending {
				newRights = append(newRights, id)
			}
		}
		if len(rights) == 0 {
			j.byTime(newRights)
		}
		for _, l := range lefts {
			lr := j.rows.at(l)
			cand := newRights
			if lr.pending {
				cand = rights
			}
			lo, hi := addSat(lr.t, -j.lower), addSat(lr.t, j.upper)
			first, _ := slices.BinarySearchFunc(cand, lo, func(id int32, t int64) int { return cmp.Compare(j.rows.at(id).t, t) })
			mark := len(out)
			for _, r := range cand[first:] {
				if j.rows.at(r).t > hi {
					break
				}
				out = append(out, joinOut{l: l, r: r})
			}
			if len(out) > mark {
				runs = append(runs, int32(mark))
				matched = append(matched, l)
			}
		}
	}
	return out, runs, matched
}

// windowPairs returns the output of the windows that close when the
// watermark rises from oldWm to wm, as runs (the start index of each) of
// one key and window sorted by left time, left seq, right time, right seq.
func (j *Join) windowPairs(oldWm, wm int64) (out []joinOut, runs []int32) {
	var starts []int64
	out = j.pairs[:0]
	var ls, rs []int32
	for kid := range int32(j.keys.len()) {
		jk := j.keys.at(kid)
		if len(jk.rows[0]) == 0 || (len(jk.rows[1]) == 0 && j.spec.Type == InnerJoin) {
			continue
		}
		starts = starts[:0]
		for side := range 2 {
			for _, id := range jk.rows[side] {
				t := j.rows.at(id).t
				p := t - floorMod(t, j.slide)
				for s := p; s > t-j.size; s -= j.slide {
					e := addSat(s, j.size)
					if !j.windowClosed(e, wm) {
						continue
					}
					if j.windowClosed(e, oldWm) {
						break
					}
					starts = append(starts, s)
				}
			}
		}
		if len(starts) == 0 {
			continue
		}
		slices.Sort(starts)
		starts = slices.Compact(starts)
		ls = append(ls[:0], jk.rows[0]...)
		rs = append(rs[:0], jk.rows[1]...)
		j.byTime(ls)
		j.byTime(rs)
		at := func(ids []int32, t int64) int {
			i, _ := slices.BinarySearchFunc(ids, t, func(id int32, t int64) int { return cmp.Compare(j.rows.at(id).t, t) })
			return i
		}
		for _, s := range starts {
			e := addSat(s, j.size)
			wl := ls[at(ls, s):at(ls, e)]
			wr := rs[at(rs, s):at(rs, e)]
			mark := len(out)
			for _, l := range wl {
				if len(wr) == 0 || jk.null {
					if j.spec.Type == LeftJoin {
						out = append(out, joinOut{l: l, r: -1, ws: s})
					}
					continue
				}
				for _, r := range wr {
					out = append(out, joinOut{l: l, r: r, ws: s})
				}
			}
			if len(out) > mark {
				runs = append(runs, int32(mark))
			}
		}
	}
	return out, runs
}

// sortOutput returns the output rows in emission order. runs are the start
// indexes of out's runs, each sorted already and headed by the row that
// orders it among the others: a window's rows of one key (windowed join) or
// one left row's pairs or unmatched row (interval join). Runs are ordered by
// their head's (window start, left time, key bytes, left seq), left time
// counting for an interval join only.
func (j *Join) sortOutput(out []joinOut, runs []int32) []joinOut {
	type head struct {
		ws, lt, ls int64
		key        string
		start, end int32
	}
	heads := make([]head, len(runs))
	for x, st := range runs {
		o := out[st]
		l := j.rows.at(o.l)
		end := int32(len(out))
		if x+1 < len(runs) {
			end = runs[x+1]
		}
		h := head{ws: o.ws, ls: l.seq, key: j.keys.at(l.kid).bytes, start: st, end: end}
		if j.interval {
			h.lt = l.t
		}
		heads[x] = h
	}
	full := func(a, b head) int {
		if c := cmp.Compare(a.ws, b.ws); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lt, b.lt); c != 0 {
			return c
		}
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.ls, b.ls)
	}
	sorted := slices.Grow(j.sortedPairs[:0], len(out))
	if len(heads) < radixSortIDs {
		slices.SortFunc(heads, full)
		for _, h := range heads {
			sorted = append(sorted, out[h.start:h.end]...)
		}
		return sorted
	}
	// Radix by (window start, left time, first 16 key bytes), then the runs
	// that agree on those by the full order (key, left seq).
	order := radixSorted(len(heads), 4, func(w, i int) uint64 {
		switch h := &heads[i]; w {
		case 0:
			return signedWord(h.ws)
		case 1:
			return signedWord(h.lt)
		case 2:
			return keyPrefix(h.key, 0)
		default:
			return keyPrefix(h.key, 8)
		}
	})
	same := func(x, y int32) bool {
		a, b := &heads[x], &heads[y]
		return a.ws == b.ws && a.lt == b.lt && keyPrefix(a.key, 0) == keyPrefix(b.key, 0) && keyPrefix(a.key, 8) == keyPrefix(b.key, 8)
	}
	var run []head
	forRuns(order, same, func(_ int, rs []radixEnt) {
		run = run[:0]
		for _, e := range rs {
			run = append(run, heads[e.i])
		}
		if len(run) > 1 {
			slices.SortFunc(run, full)
		}
		for _, h := range run {
			sorted = append(sorted, out[h.start:h.end]...)
		}
	})
	return sorted
}

// buildOutput makes the output batch of out.
func (j *Join) buildOutput(out []joinOut) (arrow.RecordBatch, error) {
	for side := range 2 {
		j.locs[side] = slices.Grow(j.locs[side][:0], len(out))[:len(out)]
	}
	locs := j.locs
	for x, o := range out {
		locs[0][x] = j.rows.at(o.l).loc
		locs[1][x] = nullLoc
		if o.r >= 0 {
			locs[1][x] = j.rows.at(o.r).loc
		}
	}
	var cols []arrow.Array
	defer func() { releaseArrays(cols) }()
	for side := range 2 {
		c, err := j.store[side].gather(locs[side], j.mem)
		if err != nil {
			return nil, err
		}
		cols = append(cols, c...)
	}
	if !j.interval {
		sb := array.NewTimestampBuilder(j.mem, eventTimeType.(*arrow.TimestampType))
		eb := array.NewTimestampBuilder(j.mem, eventTimeType.(*arrow.TimestampType))
		for _, o := range out {
			sb.Append(arrow.Timestamp(o.ws))
			eb.Append(arrow.Timestamp(addSat(o.ws, j.size)))
		}
		cols = append(cols, sb.NewArray(), eb.NewArray())
		sb.Release()
		eb.Release()
	}
	return array.NewRecordBatch(j.output, cols, int64(len(out))), nil
}

// maybeCompact rewrites a side's buffered rows into one chunk when its
// chunks are many or mostly dead.
func (j *Join) maybeCompact() error {
	for side := range 2 {
		st := &j.store[side]
		if !st.needsCompaction() {
			continue
		}
		var ids []int32
		var locs []rowLoc
		for id := range int32(j.rows.len()) {
			if r := j.rows.at(id); r.live && int(r.side) == side {
				ids = append(ids, int32(id))
				locs = append(locs, r.loc)
			}
		}
		nl, err := st.compact(locs)
		if err != nil {
			return fmt.Errorf("compact %s rows: %w", [2]string{"left", "right"}[side], err)
		}
		for x, id := range ids {
			j.rows.at(id).loc = nl[x]
		}
	}
	return nil
}

// stateOrder sorts row ids by key group, key bytes, side and seq.
func (j *Join) stateOrder(ids []int32) {
	sortIDs(ids, func(id int32) int64 { return int64(j.keys.at(j.rows.at(id).kid).kg) }, func(id int32) string { return j.keys.at(j.rows.at(id).kid).bytes },
		func(a, b int32) int {
			ra, rb := j.rows.at(a), j.rows.at(b)
			return cmp.Or(cmp.Compare(ra.side, rb.side), cmp.Compare(ra.seq, rb.seq))
		})
}

// buildState makes state batches of the given rows (in order).
func (j *Join) buildState(ids []int32) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for lo := 0; lo < len(ids); lo += snapshotChunkRows {
		part := ids[lo:min(len(ids), lo+snapshotChunkRows)]
		rec, err := j.buildStateBatch(part)
		if err != nil {
			releaseBatches(out)
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func (j *Join) buildStateBatch(ids []int32) (arrow.RecordBatch, error) {
	kg := array.NewInt32Builder(j.mem)
	sd := array.NewInt8Builder(j.mem)
	sq := array.NewInt64Builder(j.mem)
	pe := array.NewBooleanBuilder(j.mem)
	ma := array.NewBooleanBuilder(j.mem)
	locs := [2][]rowLoc{make([]rowLoc, len(ids)), make([]rowLoc, len(ids))}
	for x, id := range ids {
		r := j.rows.at(id)
		kg.Append(j.keys.at(r.kid).kg)
		sd.Append(r.side)
		sq.Append(r.seq)
		pe.Append(r.pending)
		ma.Append(r.matched)
		locs[r.side][x] = r.loc
		locs[1-r.side][x] = nullLoc
	}
	cols := make([]arrow.Array, 0, j.state.NumFields())
	for _, b := range []array.Builder{kg, sd, sq, pe, ma} {
		cols = append(cols, b.NewArray())
		b.Release()
	}
	defer func() { releaseArrays(cols) }()
	for side := range 2 {
		c, err := j.store[side].gather(locs[side], j.mem)
		if err != nil {
			return nil, err
		}
		cols = append(cols, c...)
	}
	return array.NewRecordBatch(j.state, cols, int64(len(ids))), nil
}

// Snapshot returns every buffered row as batches of StateSchema, sorted by
// key_group (then key bytes, side, seq), in batches of at most 65536 rows.
// Persist Watermark() beside them. The caller releases the batches. It is a
// snapshot point: change tracking starts anew.
func (j *Join) Snapshot() ([]arrow.RecordBatch, error) {
	ids := make([]int32, 0, j.live)
	for id := range int32(j.rows.len()) {
		if j.rows.at(id).live {
			ids = append(ids, int32(id))
		}
	}
	j.stateOrder(ids)
	out, err := j.buildState(ids)
	if err != nil {
		return nil, fmt.Errorf("join %s: snapshot: %w", j.id, err)
	}
	j.resetTracking()
	return out, nil
}

func (j *Join) resetTracking() {
	for _, id := range j.dirty {
		r := j.rows.at(id)
		r.listed = false
		if r.live {
			r.inBase = true
		}
	}
	j.dirty = j.dirty[:0]
	j.tombstone = nil
}

// Dirty returns how many buffered rows were created or changed (changed)
// and how many rows of the last snapshot point were removed (removed)
// since the last Snapshot, SnapshotDelta, Restore or ApplyDelta.
func (j *Join) Dirty() (changed, removed int) {
	for _, id := range j.dirty {
		if j.rows.at(id).live {
			changed++
		}
	}
	return changed, len(j.tombstone)
}

// SnapshotDelta returns what changed since the last snapshot point and
// makes now the new one: upserts (StateSchema) are the full rows created or
// changed since (a changed row is a flag change), tombstones
// (TombstoneSchema) the rows of the last point removed since. Both are
// sorted by key_group; the caller releases them. Restore(base) followed by
// ApplyDelta of every delta since, in order, gives exactly the state
// Snapshot would give. It costs O(changed rows). On error nothing is reset.
func (j *Join) SnapshotDelta() (upserts, tombstones []arrow.RecordBatch, err error) {
	ids := make([]int32, 0, len(j.dirty))
	for _, id := range j.dirty {
		if j.rows.at(id).live {
			ids = append(ids, id)
		}
	}
	j.stateOrder(ids)
	if upserts, err = j.buildState(ids); err != nil {
		return nil, nil, fmt.Errorf("join %s: snapshot delta: %w", j.id, err)
	}
	tombs := slices.Clone(j.tombstone)
	slices.SortFunc(tombs, func(a, b rowID) int {
		return cmp.Or(cmp.Compare(a.kg, b.kg), cmp.Compare(a.side, b.side), cmp.Compare(a.seq, b.seq))
	})
	for lo := 0; lo < len(tombs); lo += snapshotChunkRows {
		part := tombs[lo:min(len(tombs), lo+snapshotChunkRows)]
		b := array.NewRecordBuilder(j.mem, j.tombs)
		for _, t := range part {
			b.Field(0).(*array.Int32Builder).Append(t.kg)
			b.Field(1).(*array.Int8Builder).Append(t.side)
			b.Field(2).(*array.Int64Builder).Append(t.seq)
		}
		tombstones = append(tombstones, b.NewRecordBatch())
		b.Release()
	}
	j.resetTracking()
	return upserts, tombstones, nil
}

// joinPick is one state row selected for this instance.
type joinPick struct {
	row  int32
	id   rowID
	key  string
	t    int64
	pend bool
	mat  bool
}

// stateIn is one batch of state rows to restore: a whole state batch
// (rec), or a lazy one (LazyStateBatch) of which only the columns
// LazyStateColumns names are decoded (side decodes a side's data columns
// when a row of it is first needed).
type stateIn struct {
	n    int
	cols []arrow.Array // by StateSchema index; nil where not decoded
	side func(side int) ([]arrow.Array, error)
}

func eagerIn(rec arrow.RecordBatch) stateIn {
	return stateIn{n: int(rec.NumRows()), cols: rec.Columns()}
}

// pickState validates the rows of a state batch and returns those whose
// key group is in [kgLo, kgHi). Errors name the row.
func (j *Join) pickState(in stateIn, kgLo, kgHi int) ([]joinPick, error) {
	for c := range joinStateMeta {
		if in.cols[c].NullN() > 0 {
			return nil, fmt.Errorf("column %s has %d nulls", j.state.Field(c).Name, in.cols[c].NullN())
		}
	}
	kgs := in.cols[0].(*array.Int32).Int32Values()
	sides := in.cols[1].(*array.Int8).Int8Values()
	seqs := in.cols[2].(*array.Int64).Int64Values()
	pend := in.cols[3].(*array.Boolean)
	mat := in.cols[4].(*array.Boolean)
	var enc [2]keyEncoder
	var times [2]*array.Timestamp
	off := [2]int{joinStateMeta, joinStateMeta + j.in[0].NumFields()}
	for side := range 2 {
		cols := make([]arrow.Array, len(j.keyCols[side]))
		for c, kc := range j.keyCols[side] {
			cols[c] = in.cols[off[side]+kc]
		}
		enc[side].bind(j.kinds, cols)
		times[side] = in.cols[off[side]+j.timeCol[side]].(*array.Timestamp)
	}
	picks := make([]joinPick, 0, in.n)
	var buf []byte
	for r := range in.n {
		kg := int(kgs[r])
		if kg < 0 || kg >= j.k {
			return nil, fmt.Errorf("row %d: key group %d outside [0,%d) (max parallelism changed or state corrupt)", r, kg, j.k)
		}
		if kg < kgLo || kg >= kgHi {
			continue
		}
		side := sides[r]
		if side != 0 && side != 1 {
			return nil, fmt.Errorf("row %d: side %d is neither 0 (left) nor 1 (right)", r, side)
		}
		if times[side].IsNull(r) {
			return nil, fmt.Errorf("row %d: null time", r)
		}
		buf = enc[side].encode(buf[:0], r)
		if got := keygroup.Of(buf, j.k); got != kg {
			return nil, fmt.Errorf("row %d: key hashes to key group %d, row says %d (max parallelism changed or state corrupt)", r, got, kg)
		}
		if side == 1 && mat.Value(r) {
			return nil, fmt.Errorf("row %d: a right row marked matched", r)
		}
		picks = append(picks, joinPick{row: int32(r), id: rowID{kg: int32(kg), side: side, seq: seqs[r]}, key: string(buf),
			t: int64(times[side].Value(r)), pend: pend.Value(r), mat: mat.Value(r)})
	}
	return picks, nil
}

// load adds the picked rows of a state batch (validated) as base rows.
func (j *Join) load(in stateIn, picks []joinPick) error {
	off := [2]int{joinStateMeta, joinStateMeta + j.in[0].NumFields()}
	for side := range int8(2) {
		var rows []int32
		for _, p := range picks {
			if p.id.side == side {
				rows = append(rows, p.row)
			}
		}
		if len(rows) == 0 {
			continue
		}
		var c int32
		if in.side != nil {
			load := in.side
			c = j.store[side].addLazy(func() ([]arrow.Array, error) { return load(int(side)) }, rows)
		} else {
			nf := j.in[side].NumFields()
			var err error
			if c, err = j.store[side].copyColumns(in.cols[off[side]:off[side]+nf], rows); err != nil {
				return err
			}
		}
		x := int32(0)
		for _, p := range picks {
			if p.id.side != side {
				continue
			}
			kid := j.keyIDString(p.key)
			id := j.putRow(side, kid, p.t, p.id.seq, rowLoc{chunk: c, idx: x})
			x++
			r := j.rows.at(id)
			r.pending, r.matched, r.inBase = p.pend && j.interval, p.mat, true
			if r.pending {
				j.markPending(kid)
			}
			j.seq[side] = max(j.seq[side], p.id.seq+1)
		}
	}
	return nil
}

// eachTombstone checks every tombstone batch (its schema, no nulls, key
// groups within [0, K)) and calls fn with each row of key groups [kgLo,
// kgHi), in order: its row identity, batch and row.
func (j *Join) eachTombstone(tombstones []arrow.RecordBatch, kgLo, kgHi int, fn func(id rowID, bi, r int) error) error {
	for bi, rec := range tombstones {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), j.tombs) {
			return fmt.Errorf("join %s: apply delta: tombstone batch %d schema %s does not match tombstone schema %s", j.id, bi, rec.Schema(), j.tombs)
		}
		for c := range 3 {
			if rec.Column(c).NullN() > 0 {
				return fmt.Errorf("join %s: apply delta: tombstone batch %d column %s has nulls", j.id, bi, j.tombs.Field(c).Name)
			}
		}
		kgs := rec.Column(0).(*array.Int32).Int32Values()
		sides := rec.Column(1).(*array.Int8).Int8Values()
		seqs := rec.Column(2).(*array.Int64).Int64Values()
		for r := range int(rec.NumRows()) {
			if kgs[r] < 0 || int(kgs[r]) >= j.k {
				return fmt.Errorf("join %s: apply delta: tombstone batch %d row %d: key group %d outside [0,%d)", j.id, bi, r, kgs[r], j.k)
			}
			if int(kgs[r]) < kgLo || int(kgs[r]) >= kgHi {
				continue
			}
			if err := fn(rowID{kg: kgs[r], side: sides[r], seq: seqs[r]}, bi, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyDeltaScan is applyDelta without the index of rows by identity
// (which costs a map entry per held row): tombstones are found by one scan
// of the held rows against their sorted identities, and a replaced row (a
// flag change) among its key's rows, by the upsert's key. Everything is
// validated before any state changes, as in applyDelta.
func (j *Join) applyDeltaScan(upserts []*stateIn, picks [][]joinPick, tombstones []arrow.RecordBatch, kgLo, kgHi int) error {
	if bi, p, dup := dupPick(picks); dup {
		return fmt.Errorf("join %s: apply delta: upsert batch %d row %d: row (key group %d, side %d, seq %d) upserted twice", j.id, bi, p.row, p.id.kg, p.id.side, p.id.seq)
	}
	type tomb struct {
		id    rowID
		bi, r int
		found bool
	}
	var tombs []tomb
	if err := j.eachTombstone(tombstones, kgLo, kgHi, func(id rowID, bi, r int) error {
		tombs = append(tombs, tomb{id: id, bi: bi, r: r})
		return nil
	}); err != nil {
		return err
	}
	cmpID := func(a, b rowID) int {
		return cmp.Or(cmp.Compare(a.kg, b.kg), cmp.Compare(a.side, b.side), cmp.Compare(a.seq, b.seq))
	}
	notHeld := func(t tomb) error {
		return fmt.Errorf("join %s: apply delta: tombstone batch %d row %d: row (key group %d, side %d, seq %d) is not held (deltas out of order or state corrupt)", j.id, t.bi, t.r, t.id.kg, t.id.side, t.id.seq)
	}
	var dead []int32
	if len(tombs) > 0 {
		slices.SortStableFunc(tombs, func(a, b tomb) int { return cmpID(a.id, b.id) })
		for i := 1; i < len(tombs); i++ {
			if tombs[i].id == tombs[i-1].id {
				return notHeld(tombs[i]) // removed twice
			}
		}
		for id := range int32(j.rows.len()) {
			r := j.rows.at(id)
			if !r.live {
				continue
			}
			rid := rowID{kg: j.keys.at(r.kid).kg, side: r.side, seq: r.seq}
			if x, ok := slices.BinarySearchFunc(tombs, rid, func(t tomb, id rowID) int { return cmpID(t.id, id) }); ok {
				tombs[x].found = true
				dead = append(dead, int32(id))
			}
		}
		for _, t := range tombs {
			if !t.found {
				return notHeld(t)
			}
		}
	}
	for _, x := range dead {
		kid := j.rows.at(x).kid
		j.removeRow(x)
		j.releaseKeyIfEmpty(kid)
	}
	dead = dead[:0]
	for _, ps := range picks {
		for _, p := range ps {
			if p.id.seq < j.seq[p.id.side] {
				if x, ok := j.findRow(p.id, p.key); ok {
					dead = append(dead, x)
				}
			}
		}
	}
	j.hot = nil // valid until rows are removed
	for _, x := range dead {
		kid := j.rows.at(x).kid
		j.removeRow(x)
		j.releaseKeyIfEmpty(kid)
	}
	return j.loadPicks(upserts, picks, "apply delta: upsert batch")
}

// findRow returns the held row of identity id, whose encoded key is key:
// from the index if there is one, else among the key's rows (building the
// index when the key holds many).
func (j *Join) findRow(id rowID, key string) (int32, bool) {
	if j.index == nil {
		kid, ok := j.findKey(key)
		if !ok {
			return 0, false
		}
		list := j.keys.at(kid).rows[id.side]
		if len(list) <= 256 {
			for _, x := range list {
				if j.rows.at(x).seq == id.seq {
					return x, true // a key lives in one key group
				}
			}
			return 0, false
		}
		// A key of many rows: index its rows of that side by seq, once
		// per delta (applyDeltaScan drops the map).
		hk := hotKey{kid: kid, side: id.side}
		m, ok := j.hot[hk]
		if !ok {
			if j.hot == nil {
				j.hot = map[hotKey]map[int64]int32{}
			}
			m = make(map[int64]int32, len(list))
			for _, x := range list {
				m[j.rows.at(x).seq] = x
			}
			j.hot[hk] = m
		}
		x, ok := m[id.seq]
		return x, ok
	}
	x, ok := j.index[id]
	return x, ok
}

// ensureIndex builds the index of rows by identity, which Restore and
// ApplyDelta use and keep up to date until the next ProcessInput.
func (j *Join) ensureIndex() {
	if j.index != nil {
		return
	}
	j.index = make(map[rowID]int32, j.live)
	for id := range int32(j.rows.len()) {
		if r := j.rows.at(id); r.live {
			j.index[rowID{kg: j.keys.at(r.kid).kg, side: r.side, seq: r.seq}] = int32(id)
		}
	}
}

// Restore adds the state rows whose key_group is in [kgLo, kgHi) and skips
// the others, then raises the watermark to watermark. Every batch must have
// the StateSchema layout; a row whose key does not hash to its key_group,
// or that is already held, is an error. Everything is validated before any
// state changes. Restore starts change tracking anew.
func (j *Join) Restore(state []arrow.RecordBatch, kgLo, kgHi int, watermark int64) error {
	ins := make([]*stateIn, len(state))
	for bi, rec := range state {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), j.state) {
			return fmt.Errorf("join %s: restore: batch %d schema %s does not match state schema %s", j.id, bi, rec.Schema(), j.state)
		}
		in := eagerIn(rec)
		ins[bi] = &in
	}
	return j.restore(ins, kgLo, kgHi, watermark)
}

func (j *Join) restore(state []*stateIn, kgLo, kgHi int, watermark int64) error {
	if kgLo < 0 || kgHi > j.k || kgLo > kgHi {
		return fmt.Errorf("join %s: restore: key-group range [%d,%d) outside [0,%d)", j.id, kgLo, kgHi, j.k)
	}
	var rows int64
	for _, rec := range state {
		if rec != nil {
			rows += int64(rec.n)
		}
	}
	// A join holding no rows needs no index to find duplicates: it checks
	// the picked identities by sorting them, and builds no index (ApplyDelta
	// builds it if a delta needs it).
	fresh := j.live == 0
	if fresh {
		j.index = nil
	} else {
		j.ensureIndex()
	}
	// The index doubles as the set of rows picked so far (placeholder -1,
	// replaced by the row's id as it loads): on an error it is dropped and
	// rebuilt from the rows when next needed.
	picks := make([][]joinPick, len(state))
	var total, keys int
	for bi, rec := range state {
		if rec == nil {
			continue
		}
		var err error
		if picks[bi], err = j.pickState(*rec, kgLo, kgHi); err != nil {
			j.index = nil
			return fmt.Errorf("join %s: restore: batch %d %w", j.id, bi, err)
		}
		for _, p := range picks[bi] {
			if fresh {
				break
			}
			if _, dup := j.index[p.id]; dup {
				j.index = nil
				return fmt.Errorf("join %s: restore: batch %d row %d: row (key group %d, side %d, seq %d) restored twice", j.id, bi, p.row, p.id.kg, p.id.side, p.id.seq)
			}
			j.index[p.id] = -1
		}
		total += len(picks[bi])
		for x, p := range picks[bi] {
			if x == 0 || p.key != picks[bi][x-1].key {
				keys++ // state rows are sorted by key group, then key bytes
			}
		}
	}
	if fresh {
		if bi, p, dup := dupPick(picks); dup {
			return fmt.Errorf("join %s: restore: batch %d row %d: row (key group %d, side %d, seq %d) restored twice", j.id, bi, p.row, p.id.kg, p.id.side, p.id.seq)
		}
	}
	j.rows.reserve(total)
	j.keys.reserve(keys)
	j.keyIdx.presize(keys)
	for bi, rec := range state {
		if rec == nil {
			continue
		}
		if err := j.load(*rec, picks[bi]); err != nil {
			j.index = nil
			return fmt.Errorf("join %s: restore: batch %d: %w", j.id, bi, err)
		}
	}
	j.wm = max(j.wm, watermark)
	j.resetTracking()
	return nil
}

// ApplyDelta applies one SnapshotDelta to a Join rebuilt with Restore from
// the base the delta follows (and the deltas before it, in order): first
// tombstones remove their rows, then upserts add or replace rows by
// (key_group, side, seq). Rows whose key_group is outside [kgLo, kgHi) are
// skipped. A tombstone of a row not held, or a row upserted twice, is an
// error; schemas and rows are validated before any state changes. Like
// Restore, ApplyDelta starts change tracking anew.
func (j *Join) ApplyDelta(upserts, tombstones []arrow.RecordBatch, kgLo, kgHi int) error {
	ins := make([]*stateIn, len(upserts))
	for bi, rec := range upserts {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), j.state) {
			return fmt.Errorf("join %s: apply delta: upsert batch %d schema %s does not match state schema %s", j.id, bi, rec.Schema(), j.state)
		}
		in := eagerIn(rec)
		ins[bi] = &in
	}
	return j.applyDelta(ins, tombstones, kgLo, kgHi)
}

func (j *Join) applyDelta(upserts []*stateIn, tombstones []arrow.RecordBatch, kgLo, kgHi int) error {
	if kgLo < 0 || kgHi > j.k || kgLo > kgHi {
		return fmt.Errorf("join %s: apply delta: key-group range [%d,%d) outside [0,%d)", j.id, kgLo, kgHi, j.k)
	}
	// Pick the upserts first: when no tombstone is in the delta and every
	// upsert is a new row (its seq above every seq held on its side), no
	// row needs finding by identity and the index is not built.
	picks := make([][]joinPick, len(upserts))
	for bi, rec := range upserts {
		if rec == nil {
			continue
		}
		var err error
		if picks[bi], err = j.pickState(*rec, kgLo, kgHi); err != nil {
			return fmt.Errorf("join %s: apply delta: upsert batch %d %w", j.id, bi, err)
		}
	}
	if j.index == nil {
		return j.applyDeltaScan(upserts, picks, tombstones, kgLo, kgHi)
	}
	j.ensureIndex()
	var dead []int32
	gone := map[rowID]bool{}
	if err := j.eachTombstone(tombstones, kgLo, kgHi, func(id rowID, bi, r int) error {
		x, ok := j.index[id]
		if !ok || gone[id] {
			return fmt.Errorf("join %s: apply delta: tombstone batch %d row %d: row (key group %d, side %d, seq %d) is not held (deltas out of order or state corrupt)", j.id, bi, r, id.kg, id.side, id.seq)
		}
		gone[id] = true
		dead = append(dead, x)
		return nil
	}); err != nil {
		return err
	}
	seen := map[rowID]bool{}
	for bi := range upserts {
		for _, p := range picks[bi] {
			if seen[p.id] {
				return fmt.Errorf("join %s: apply delta: upsert batch %d row %d: row (key group %d, side %d, seq %d) upserted twice", j.id, bi, p.row, p.id.kg, p.id.side, p.id.seq)
			}
			seen[p.id] = true
			if x, ok := j.index[p.id]; ok && !gone[p.id] {
				dead = append(dead, x) // replaced
				gone[p.id] = true
			}
		}
	}
	for _, x := range dead {
		kid := j.rows.at(x).kid
		j.removeRow(x)
		j.releaseKeyIfEmpty(kid)
	}
	return j.loadPicks(upserts, picks, "apply delta: upsert batch")
}

// loadPicks loads the picked rows of upserts (validated) and starts change
// tracking anew.
func (j *Join) loadPicks(upserts []*stateIn, picks [][]joinPick, what string) error {
	var total, keys int
	for _, ps := range picks {
		total += len(ps)
		for x, p := range ps {
			if x == 0 || p.key != ps[x-1].key {
				keys++ // at most: some keys are held already
			}
		}
	}
	j.rows.reserve(max(0, total-len(j.freeRows)))
	j.keys.reserve(max(0, keys-len(j.freeKeys)))
	for bi, rec := range upserts {
		if rec == nil {
			continue
		}
		if err := j.load(*rec, picks[bi]); err != nil {
			return fmt.Errorf("join %s: %s %d: %w", j.id, what, bi, err)
		}
	}
	j.resetTracking()
	return nil
}

// growCap makes room for n more elements in s, growing its capacity by at
// least a quarter when it must grow (repeated deltas do not copy the rows
// once each).
func growCap[E any](s []E, n int) []E {
	if cap(s)-len(s) >= n {
		return s
	}
	return slices.Grow(s, max(n, cap(s)/4))
}

// dupPick reports a row identity picked twice in picks (the batch and the
// second pick), sorting packed identities rather than filling a map.
func dupPick(picks [][]joinPick) (int, joinPick, bool) {
	var n int
	for _, ps := range picks {
		n += len(ps)
	}
	packed := make([]uint64, 0, n)
	for _, ps := range picks {
		for _, p := range ps {
			if p.id.seq < 0 || p.id.seq >= 1<<47 || p.id.kg < 0 || p.id.kg >= 1<<16 {
				return dupPickPairs(picks, n)
			}
			packed = append(packed, uint64(p.id.kg)<<48|uint64(p.id.side&1)<<47|uint64(p.id.seq))
		}
	}
	slices.Sort(packed)
	for i := 1; i < len(packed); i++ {
		if packed[i] == packed[i-1] {
			return dupPickMap(picks) // rare: find which, for the error
		}
	}
	return 0, joinPick{}, false
}

// dupPickPairs is dupPick for identities that do not pack into 64 bits
// (arrival numbers from epoch 32768 on: EpochArrivalBase): sorted as
// (key group and side, seq) pairs.
func dupPickPairs(picks [][]joinPick, n int) (int, joinPick, bool) {
	type pair struct{ a, b int64 }
	ids := make([]pair, 0, n)
	for _, ps := range picks {
		for _, p := range ps {
			ids = append(ids, pair{int64(p.id.kg)<<1 | int64(p.id.side&1), p.id.seq})
		}
	}
	slices.SortFunc(ids, func(x, y pair) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(x.b, y.b)) })
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return dupPickMap(picks) // rare: find which, for the error
		}
	}
	return 0, joinPick{}, false
}

func dupPickMap(picks [][]joinPick) (int, joinPick, bool) {
	seen := map[rowID]bool{}
	for bi, ps := range picks {
		for _, p := range ps {
			if seen[p.id] {
				return bi, p, true
			}
			seen[p.id] = true
		}
	}
	return 0, joinPick{}, false
}
