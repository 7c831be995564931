package operators

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Stateful is one instance (subtask) of a keyed, event-time operator whose
// state lives in the epoch: the window, and the graph stages (dedup, top_n,
// join). The engine drives every instance the same way:
//
//   - rows are routed to an instance by the key group of their key columns
//     (KeyColumns of the input they arrive on; keygroup.Of over the
//     SerializeKey encoding) and passed with ProcessInput, each instance
//     seeing every batch through its own selection (possibly empty, which
//     still advances its arrival sequence, so ties break the same way at any
//     parallelism);
//   - Advance(wm) then emits what the watermark made final, exactly once;
//   - its state is written as a full snapshot (Snapshot) or a delta since
//     the last snapshot point (SnapshotDelta: upserts and tombstones), and
//     restored with Restore then ApplyDelta in order, each filtering rows by
//     key-group range [kgLo, kgHi) so rescale works;
//   - every state row starts with an int32 column key_group (ColKeyGroup)
//     and rows are written sorted by it, so readers can skip row groups.
//
// Operators are not safe for concurrent use; batches passed in are read,
// never modified, and may be shared by several instances at once.
type Stateful interface {
	// ID is the operator id (the stage name), used in state paths and errors.
	ID() string
	// NumInputs is 1, or 2 for a join (input 0 left, 1 right).
	NumInputs() int
	// InputSchemaOf is the schema of input i.
	InputSchemaOf(i int) *arrow.Schema
	// KeyColumns are the indices, in input i's schema, of the key columns
	// rows are routed by.
	KeyColumns(i int) []int
	OutputSchema() *arrow.Schema
	StateSchema() *arrow.Schema
	TombstoneSchema() *arrow.Schema
	SetAllocator(memory.Allocator)

	// ProcessInput consumes rows sel of rec (ascending; nil means all)
	// arriving on input i and returns the rows that were late (the caller
	// writes them to the stage's side output and releases them), or nil.
	ProcessInput(i int, rec arrow.RecordBatch, sel []int32) (late arrow.RecordBatch, err error)
	// Advance emits what became final at watermark wm, in a deterministic
	// order; nil when nothing is due. A wm that does not raise Watermark
	// leaves the watermark as it is, but may still emit what the rows
	// processed since are final for already (an interval join's new pairs).
	Advance(wm int64) (arrow.RecordBatch, error)
	Watermark() int64
	// Len is the number of state rows held (a compaction-policy estimate).
	Len() int
	// StateFingerprint identifies the state layout and meaning: restoring
	// state written under another fingerprint is refused.
	StateFingerprint() string

	// Dirty reports the state rows created or changed, and removed, since
	// the last snapshot point.
	Dirty() (changed, removed int)
	Snapshot() ([]arrow.RecordBatch, error)
	SnapshotDelta() (upserts, tombstones []arrow.RecordBatch, err error)
	Restore(state []arrow.RecordBatch, kgLo, kgHi int, watermark int64) error
	ApplyDelta(upserts, tombstones []arrow.RecordBatch, kgLo, kgHi int) error
}

// ArrivalOrdered is a Stateful operator that numbers the rows it holds by
// arrival (a join, dedup: ties broken by arrival). BeginEpoch(e), called
// before the epoch's rows, starts the numbers at e<<32 unless the operator
// holds higher ones: a restored operator counts from the highest number it
// restored, one that kept running from every row it was offered, and both
// number epoch e's rows alike from then on. So state written for an epoch
// does not depend on whether its operator was restored at the epoch's
// start: several workers redo a share under one attempt, where an object
// written again must have the same bytes (package cluster). Only the
// numbers change, never their order, so results are the same.
type ArrivalOrdered interface {
	BeginEpoch(epoch int64)
}

// EpochArrivalBase is the first arrival number of epoch e.
func EpochArrivalBase(e int64) int64 { return e << 32 }

// DeltaMerger is a Stateful operator whose deltas may also hold merge rows:
// changed state rows that restore by adding to the open row they name
// rather than replacing it, so that a delta costs what an epoch added, not
// what the row holds (a window's count_distinct set). SnapshotDeltaMerges
// is SnapshotDelta plus the merge rows (StateSchema); ApplyMerges applies
// them after the same delta's ApplyDelta.
type DeltaMerger interface {
	SnapshotDeltaMerges() (upserts, merges, tombstones []arrow.RecordBatch, err error)
	ApplyMerges(merges []arrow.RecordBatch, kgLo, kgHi int) error
	// DirtyMerges is how many of Dirty's changed rows the next
	// SnapshotDeltaMerges writes as merge rows.
	DirtyMerges() int
}

// Window is a Stateful operator of one input.
var (
	_ Stateful    = (*Window)(nil)
	_ DeltaMerger = (*Window)(nil)
)

// ID returns the window operator's id.
func (w *Window) ID() string { return w.id }

// NumInputs is 1: a window reads one input.
func (w *Window) NumInputs() int { return 1 }

// InputSchemaOf returns the window's input schema.
func (w *Window) InputSchemaOf(int) *arrow.Schema { return w.input }

// KeyColumns returns the key column indices of the window's input.
func (w *Window) KeyColumns(int) []int { return w.keyCols }

// ProcessInput is ProcessSelected (a window has one input).
func (w *Window) ProcessInput(_ int, rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	return w.ProcessSelected(rec, sel)
}

// RowCounted is a Stateful operator whose counts are exact: Len is the
// number of rows Snapshot would write, and Dirty's changed and removed are
// the upsert and tombstone rows SnapshotDelta would write. Then the rows of
// a committed base and its deltas, less Len, are the rows those deltas made
// dead (replaced, removed) plus the tombstones, and the compaction policy
// can weigh those instead of how much changed: for state that mostly grows
// (a dedup, join or top_n over keys that keep coming), what changed is
// mostly new rows, which a delta adds without making any row dead.
type RowCounted interface {
	RowCounted()
}

// RestoreReserver is a Stateful operator that can make room for the state
// rows a restore is about to add (a base and its deltas' upserts, rows
// being an upper bound), so that its tables grow once instead of by
// doubling as the rows come.
type RestoreReserver interface {
	ReserveRestore(rows int)
}

var (
	_ RestoreReserver = (*Dedup)(nil)
	_ RestoreReserver = (*TopN)(nil)
)

var (
	_ RowCounted = (*Dedup)(nil)
	_ RowCounted = (*TopN)(nil)
	_ RowCounted = (*Join)(nil)
	_ RowCounted = (*Over)(nil)
)

// RowCounted marks Dedup's counts as exact (see RowCounted).
func (d *Dedup) RowCounted() {}

// RowCounted marks TopN's counts as exact (see RowCounted).
func (t *TopN) RowCounted() {}

// RowCounted marks Join's counts as exact (see RowCounted).
func (j *Join) RowCounted() {}

// RowCounted marks Over's counts as exact (see RowCounted).
func (o *Over) RowCounted() {}
