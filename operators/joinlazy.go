package operators

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// Restoring a join lazily.
//
// A join's state is mostly its buffered rows' data columns, and an epoch
// needs few of them: routing a new row, finding its partners, expiring
// rows and writing a delta need only each held row's identity (key group,
// side, seq), flags, key and time. The data columns of a held row are read
// only when it is paired (Advance gathers the output), or when a snapshot
// writes it (a flag change in a delta, a new base). RestoreLazy and
// ApplyDeltaLazy take state batches of which only those few columns are
// decoded (LazyStateColumns), with a function that decodes one side's data
// columns of the batch; a side's rows of a batch are decoded, together,
// the first time one of them is gathered. So the run after a long history
// decodes the old rows' keys and times, and the data of the old rows that
// meet a new row: for a stream joined with a table that grows slowly, the
// table's matching rows, not the stream's history.

// LazyRestorer is a Stateful whose state can be restored with its data
// columns decoded on demand (Join).
type LazyRestorer interface {
	Stateful
	// LazyStateColumns names the StateSchema columns a LazyStateBatch
	// must hold, in order.
	LazyStateColumns() []string
	// LazySideColumns names the StateSchema columns LazyStateBatch.Side
	// returns for side (0 left, 1 right), in order.
	LazySideColumns(side int) []string
	// ReserveRows makes room for about n more held rows (a hint given
	// before a restore).
	ReserveRows(n int)
	// RestoreLazy is Restore of lazy batches.
	RestoreLazy(state []LazyStateBatch, kgLo, kgHi int, watermark int64) error
	// ApplyDeltaLazy is ApplyDelta of lazy upserts.
	ApplyDeltaLazy(upserts []LazyStateBatch, tombstones []arrow.RecordBatch, kgLo, kgHi int) error
}

var _ LazyRestorer = (*Join)(nil)

// LazyStateBatch is a batch of state rows (of StateSchema) of which only
// some columns are decoded.
type LazyStateBatch struct {
	// Schema is the whole batch's schema (for a state file, the file's):
	// it must match StateSchema.
	Schema *arrow.Schema
	// Rows is the batch's row count.
	Rows int
	// Cols are the columns LazyStateColumns names, in order, Rows long.
	// They are read during the call only: the caller releases them after.
	Cols []arrow.Array
	// Side decodes the data columns of side (0 left, 1 right: StateSchema's
	// "left.<c>" or "right.<c>" columns, in order), Rows long; the caller
	// (the join) releases them. It is called at most once per side, at
	// any later time, and must stay valid as long as the join holds rows of
	// the batch.
	Side func(side int) ([]arrow.Array, error)
}

// lazyIdx returns the StateSchema indexes of the columns a lazy batch holds:
// the identity and flags, then per side its key and time columns.
func (j *Join) lazyIdx() []int {
	var idx []int
	for c := range joinStateMeta {
		idx = append(idx, c)
	}
	off := [2]int{joinStateMeta, joinStateMeta + j.in[0].NumFields()}
	for side := range 2 {
		for _, kc := range j.keyCols[side] {
			idx = append(idx, off[side]+kc)
		}
		idx = append(idx, off[side]+j.timeCol[side])
	}
	slices.Sort(idx)
	return slices.Compact(idx)
}

// LazyStateColumns names the columns of a LazyStateBatch, in order: key_group,
// side, seq, pending, matched, then each side's key and time columns, in
// StateSchema order.
func (j *Join) LazyStateColumns() []string {
	idx := j.lazyIdx()
	names := make([]string, len(idx))
	for i, c := range idx {
		names[i] = j.state.Field(c).Name
	}
	return names
}

// ReserveRows makes room for about n more held rows: a hint before a
// restore of that many, so that a base and its deltas do not regrow the
// row table once each.
func (j *Join) ReserveRows(n int) {
	if n > 0 {
		j.rows.reserve(n)
	}
}

// LazySideColumns names the data columns of side (0 left, 1 right) in
// StateSchema: "left.<c>" or "right.<c>" for each column of the input.
func (j *Join) LazySideColumns(side int) []string {
	off := [2]int{joinStateMeta, joinStateMeta + j.in[0].NumFields()}
	names := make([]string, j.in[side&1].NumFields())
	for i := range names {
		names[i] = j.state.Field(off[side&1] + i).Name
	}
	return names
}

// lazyIns checks lazy batches and makes them stateIns.
func (j *Join) lazyIns(state []LazyStateBatch, what string) ([]*stateIn, error) {
	idx := j.lazyIdx()
	ins := make([]*stateIn, len(state))
	for bi, b := range state {
		if b.Schema == nil || !sameFields(b.Schema, j.state) {
			return nil, fmt.Errorf("join %s: %s: batch %d schema %v does not match state schema %s", j.id, what, bi, b.Schema, j.state)
		}
		if len(b.Cols) != len(idx) || b.Side == nil || b.Rows < 0 {
			return nil, fmt.Errorf("join %s: %s: batch %d has %d columns, want %d (%v), and a side decoder", j.id, what, bi, len(b.Cols), len(idx), j.LazyStateColumns())
		}
		in := &stateIn{n: b.Rows, cols: make([]arrow.Array, j.state.NumFields()), side: b.Side}
		for i, c := range idx {
			f := j.state.Field(c)
			if a := b.Cols[i]; a == nil || a.Len() != b.Rows || !arrow.TypeEqual(a.DataType(), f.Type) {
				return nil, fmt.Errorf("join %s: %s: batch %d column %q is not %d rows of %s", j.id, what, bi, f.Name, b.Rows, f.Type)
			}
			in.cols[c] = b.Cols[i]
		}
		ins[bi] = in
	}
	return ins, nil
}

// RestoreLazy is Restore of lazy batches: the rows' identities, flags,
// keys and times are validated and restored now, their data columns are
// decoded when first needed (an error decoding them is then returned by
// the call that needed them: Advance, Snapshot, SnapshotDelta).
func (j *Join) RestoreLazy(state []LazyStateBatch, kgLo, kgHi int, watermark int64) error {
	ins, err := j.lazyIns(state, "restore")
	if err != nil {
		return err
	}
	return j.restore(ins, kgLo, kgHi, watermark)
}

// ApplyDeltaLazy is ApplyDelta with lazy upserts (see RestoreLazy).
func (j *Join) ApplyDeltaLazy(upserts []LazyStateBatch, tombstones []arrow.RecordBatch, kgLo, kgHi int) error {
	ins, err := j.lazyIns(upserts, "apply delta")
	if err != nil {
		return err
	}
	return j.applyDelta(ins, tombstones, kgLo, kgHi)
}

// Decoded reports how many buffered rows have their data columns decoded
// (the others were restored lazily and not needed yet).
func (j *Join) Decoded() (decoded, lazy int) {
	for side := range 2 {
		st := &j.store[side]
		lazy += st.lazyLive
		decoded += st.nlive - st.lazyLive
	}
	return decoded, lazy
}
