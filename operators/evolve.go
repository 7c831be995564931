package operators

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// State schema evolution.
//
// A window's state is Snapshot's rows: key_group, the key columns,
// window_start, window_end, then each aggregate's state columns
// (StateSchema). PlanStateEvolution decides whether state written by a
// window of one spec (old, over input schema oldIn) can be restored by a
// window of another (new, over newIn), aggregate by aggregate, and
// Evolution.Migrate rewrites the state batches into the new layout before
// Restore / ApplyDelta sees them. The decision depends only on the two
// specs and the types of the columns they read, never on the data, so
// `floe plan` and `floe run` reach the same verdict from the same records.
//
// Aggregates are matched by name; a new aggregate with RenamedFrom takes the
// state of the old aggregate of that name. Compatible without help:
//
//   - an added aggregate: every open window restores it at its identity,
//     i.e. as if no row had reached it: count 0, sum / avg / min / max /
//     first / last null (no value yet), count_distinct empty (0). Its output
//     for a window open at the change covers the rows processed after the
//     change only;
//   - a removed aggregate: its state columns are dropped;
//   - a renamed aggregate (RenamedFrom): its columns are kept under the new
//     name;
//   - an input column widened from int32 to int64: sum and avg keep their
//     state as it is (it is an exact 128-bit sum either way), min, max,
//     first and last cast their stored values, count_distinct re-encodes
//     its stored values as int64 (the encodings differ only in the type tag
//     byte, so old and new values compare equal); count(col) never depends
//     on the column type;
//   - sum <-> avg over the same column: both keep (sum, count);
//   - allowed_lateness and the event-time column: the state layout does not
//     depend on them (see RestoreWatermark for the lateness).
//
// Incompatible, each with a reason naming the field or aggregate and the ways
// out: a changed window kind, size, slide or gap (open windows cannot be
// re-cut); changed key columns (names, order or types: a key's type is part
// of its encoding, which decides its key group); an aggregate whose function
// or input column changed; a narrowed or otherwise changed input type (int64
// -> int32, int -> float64: an exact integer sum cannot continue as a float
// sum with the results a float sum over all rows gives); a renamed_from that
// names no old aggregate; an old aggregate claimed by two new ones. floe has
// no float32 aggregate input (sum, min, max, ... take int32, int64, float64),
// so there is no float widening.
//
// # Fingerprints
//
// Window.StateFingerprint identifies a state layout. The engine records, per
// window, the fingerprint and the state plan (MarshalStatePlan: the spec and
// the types of the columns it reads). On restore:
//
//   - same fingerprint and same plan: restore as before, files may be shared
//     by reference;
//   - otherwise: rebuild the old spec from the recorded plan
//     (UnmarshalStatePlan), call PlanStateEvolution(old, new, oldIn, newIn);
//     if !Compatible(), refuse before writing anything with Err(); if
//     SameLayout(), the files restore as they are (only RestoreWatermark may
//     differ); else every base and upsert batch goes through Migrate and
//     every tombstone batch through MigrateTombstones, and the first
//     checkpoint after the restore must write a full Snapshot (a delta over a
//     base of the old layout would mix layouts in one chain).
//
// A fingerprint alone cannot tell "evolvable" from "incompatible": it is a
// hash. That is why the plan is recorded beside it.

// ChangeKind classifies one StateChange.
type ChangeKind int

// The change kinds.
const (
	ChangeKept      ChangeKind = iota + 1 // same aggregate, same state columns: moved as they are
	ChangeAdded                           // new aggregate: open windows start from its identity
	ChangeRemoved                         // old aggregate: its state columns are dropped
	ChangeRenamed                         // renamed_from: the old state kept under the new name
	ChangeConverted                       // state kept, converted or reinterpreted (widened input, sum <-> avg)
	ChangeWindow                          // a window setting changed that the state layout does not depend on
	ChangeRefused                         // incompatible: the state cannot be restored
)

// String names the kind.
func (k ChangeKind) String() string {
	switch k {
	case ChangeKept:
		return "kept"
	case ChangeAdded:
		return "added"
	case ChangeRemoved:
		return "removed"
	case ChangeRenamed:
		return "renamed"
	case ChangeConverted:
		return "converted"
	case ChangeWindow:
		return "window"
	case ChangeRefused:
		return "refused"
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// StateChange is one line of an Evolution: what happens to one aggregate's
// state, or to a window setting.
type StateChange struct {
	Kind      ChangeKind
	Aggregate string // the aggregate's name in the new spec; "" when removed or for a window setting
	From      string // its name in the old spec; "" when added or for a window setting
	Field     string // for a window setting: kind, tumbling, sliding.size, sliding.slide, session.gap, key, allowed_lateness, event_time
	Detail    string // one line for people, e.g. "aggregate pages added: existing windows start with count_distinct empty"
}

// String returns Detail.
func (c StateChange) String() string { return c.Detail }

// wayOut ends every refusal: what makes a change possible when the state
// cannot follow it.
const wayOut = "or drop the window state with `floe run --reset-state --yes` (keeps source offsets), or start a new pipeline name (recomputes from the input)"

// columnOp says how one column of the new state is made.
type columnOp int

const (
	opMove      columnOp = iota // the old column as it is
	opCastInt64                 // the old int32 column cast to int64
	opRetag                     // count_distinct values re-encoded from int32 to int64
	opZero                      // identity: zeros (count, sum, avg)
	opNull                      // identity: nulls (min, max, first, last)
	opEmptyList                 // identity: empty lists (count_distinct)
)

type columnPlan struct {
	op   columnOp
	from int // old state column (opMove, opCastInt64, opRetag)
}

// Evolution is the verdict of PlanStateEvolution: whether state written
// under the old spec can be restored by a window of the new one, what
// happens to each aggregate, and how to convert state batches. It is
// immutable; Migrate may be called concurrently.
type Evolution struct {
	oldSpec, newSpec   WindowSpec
	oldState, newState *arrow.Schema
	oldTomb, newTomb   *arrow.Schema
	changes            []StateChange
	cols               []columnPlan // per new state column; nil when refused
	same               bool         // Migrate is the identity
	shift              int64        // new - old allowed lateness, microseconds
	mem                memory.Allocator
}

// PlanStateEvolution decides whether window state written under old (a
// window over input schema oldIn, the schema it read) can be restored by a
// window of spec new over newIn. An error means a spec does not compile
// against its schema (see NewWindow): that is not a verdict. Otherwise the
// Evolution says Compatible() or gives Reasons(); its decision depends only
// on the specs and the types of the columns they read.
func PlanStateEvolution(old, new WindowSpec, oldIn, newIn *arrow.Schema) (*Evolution, error) {
	ow, err := NewWindow(old, oldIn, 1)
	if err != nil {
		return nil, fmt.Errorf("state evolution: old spec: %w", err)
	}
	nw, err := NewWindow(new, newIn, 1)
	if err != nil {
		return nil, fmt.Errorf("state evolution: new spec: %w", err)
	}
	e := &Evolution{oldSpec: ow.StateSpec(), newSpec: nw.StateSpec(), oldState: ow.state, newState: nw.state,
		oldTomb: ow.TombstoneSchema(), newTomb: nw.TombstoneSchema(), mem: memory.DefaultAllocator}
	e.planWindow(ow, nw)
	cols := e.planAggregates(ow, nw)
	if e.Compatible() {
		e.cols = cols
		e.same = sameFields(e.oldState, e.newState)
		for i, c := range cols {
			e.same = e.same && c.op == opMove && c.from == i
		}
	}
	return e, nil
}

func (e *Evolution) add(c StateChange) { e.changes = append(e.changes, c) }

func (e *Evolution) refuse(agg, from, field, format string, args ...any) {
	e.add(StateChange{Kind: ChangeRefused, Aggregate: agg, From: from, Field: field, Detail: fmt.Sprintf(format, args...)})
}

// planWindow compares the window settings: kind, sizes, keys (strict),
// lateness and event time (informational).
func (e *Evolution) planWindow(ow, nw *Window) {
	o, n := ow.spec, nw.spec
	recut := "open windows were cut for the old shape and cannot be re-cut; keep the old value, " + wayOut
	switch {
	case o.Kind != n.Kind:
		e.refuse("", "", "kind", "window kind changed %s -> %s: %s", o.Kind, n.Kind, recut)
	case o.Kind == Tumbling && ow.size != nw.size:
		e.refuse("", "", "tumbling", "tumbling size changed %v -> %v: %s", o.Size, n.Size, recut)
	case o.Kind == Sliding && ow.size != nw.size:
		e.refuse("", "", "sliding.size", "sliding size changed %v -> %v: %s", o.Size, n.Size, recut)
	case o.Kind == Sliding && ow.slide != nw.slide:
		e.refuse("", "", "sliding.slide", "sliding slide changed %v -> %v: %s", o.Slide, n.Slide, recut)
	case o.Kind == Session && ow.gap != nw.gap:
		e.refuse("", "", "session.gap", "session gap changed %v -> %v: %s", o.Gap, n.Gap, recut)
	}
	if !slices.Equal(o.Keys, n.Keys) {
		e.refuse("", "", "key", "key changed [%s] -> [%s]: state rows are keyed and placed in key groups by the old key columns; keep the old key, %s",
			strings.Join(o.Keys, ", "), strings.Join(n.Keys, ", "), wayOut)
	} else {
		for i, k := range o.Keys {
			ot, nt := ow.input.Field(ow.keyCols[i]).Type, nw.input.Field(nw.keyCols[i]).Type
			if arrow.TypeEqual(ot, nt) {
				continue
			}
			e.refuse("", "", "key", "key column %s changed type %s -> %s: a key's type is part of its encoding, which decides its key group, so every key would move to another key group and subtask; keep %s %s (cast it in a project before the window), %s",
				k, typeName(ot), typeName(nt), k, typeName(ot), wayOut)
		}
	}
	if ow.lateness != nw.lateness {
		e.shift = nw.lateness - ow.lateness
		e.add(StateChange{Kind: ChangeWindow, Field: "allowed_lateness", Detail: fmt.Sprintf(
			"allowed_lateness %v -> %v: state layout unchanged; windows emitted under the old lateness stay emitted (restore with RestoreWatermark)", o.AllowedLateness, n.AllowedLateness)})
	}
	if o.EventTime != n.EventTime {
		e.add(StateChange{Kind: ChangeWindow, Field: "event_time", Detail: fmt.Sprintf(
			"event_time %s -> %s: state layout unchanged; open windows keep their bounds, new rows are assigned by %s", o.EventTime, n.EventTime, n.EventTime)})
	}
}

// planAggregates matches the new aggregates to the old ones and returns the
// plan of every new state column (meaningful only when no change is refused).
func (e *Evolution) planAggregates(ow, nw *Window) []columnPlan {
	oldBy := map[string]int{}
	for i, a := range ow.spec.Aggregates {
		oldBy[a.Name] = i
	}
	claimed := map[int]string{}
	cols := make([]columnPlan, nw.state.NumFields())
	for i := range 3 + len(nw.keyCols) { // key_group, keys, window bounds: keys match when compatible
		cols[i] = columnPlan{op: opMove, from: i}
	}
	for j, na := range nw.spec.Aggregates {
		src, renamed := -1, false
		if na.RenamedFrom != "" {
			if i, ok := oldBy[na.RenamedFrom]; ok {
				src, renamed = i, na.RenamedFrom != na.Name
			}
		}
		if src < 0 {
			if i, ok := oldBy[na.Name]; ok {
				src = i
			} else if na.RenamedFrom != "" {
				e.refuse(na.Name, na.RenamedFrom, "", "aggregate %s: renamed_from %s names no aggregate of the restored state (it has %s): fix the name, or remove renamed_from to start %s empty",
					na.Name, na.RenamedFrom, aggNames(ow.spec.Aggregates), na.Name)
				continue
			}
		}
		c0 := nw.aggState[j]
		nf := len(nw.aggs[j].stateFields(na.Name))
		if src < 0 {
			op := identityOp(na.Func)
			for c := c0; c < c0+nf; c++ {
				cols[c] = columnPlan{op: op, from: -1}
			}
			e.add(StateChange{Kind: ChangeAdded, Aggregate: na.Name, Detail: fmt.Sprintf(
				"aggregate %s added: existing windows start with %s", na.Name, identityText(na))})
			continue
		}
		oa := ow.spec.Aggregates[src]
		if prev, dup := claimed[src]; dup {
			e.refuse(na.Name, oa.Name, "", "aggregate %s: the old aggregate %s would restore both %s and %s; rename in one run and reuse the old name in a later one",
				na.Name, oa.Name, prev, na.Name)
			continue
		}
		claimed[src] = na.Name
		kind, note, op, ok := e.compareAggregate(ow, nw, src, j)
		if !ok {
			continue
		}
		oc0 := ow.aggState[src]
		if onf := len(ow.aggs[src].stateFields(oa.Name)); onf != nf {
			// Unreachable: compareAggregate accepts only pairs of one accumulator kind.
			e.refuse(na.Name, oa.Name, "", "aggregate %s: %d state columns -> %d", na.Name, onf, nf)
			continue
		}
		for c := 0; c < nf; c++ {
			cols[c0+c] = columnPlan{op: opMove, from: oc0 + c}
		}
		if op != opMove {
			cols[c0].op = op // the value column is the first one
		}
		var text string
		switch {
		case renamed && kind == ChangeKept:
			kind, text = ChangeRenamed, fmt.Sprintf("aggregate %s renamed to %s (renamed_from): its state is kept", oa.Name, na.Name)
		case renamed:
			text = fmt.Sprintf("aggregate %s renamed to %s (renamed_from) and %s", oa.Name, na.Name, note)
		case kind == ChangeKept:
			text = fmt.Sprintf("aggregate %s unchanged", na.Name)
		default:
			text = fmt.Sprintf("aggregate %s: %s", na.Name, note)
		}
		e.add(StateChange{Kind: kind, Aggregate: na.Name, From: oa.Name, Detail: text})
	}
	for i, oa := range ow.spec.Aggregates {
		if _, ok := claimed[i]; !ok {
			names := make([]string, 0, 3)
			for _, f := range ow.aggs[i].stateFields(oa.Name) {
				names = append(names, f.Name)
			}
			e.add(StateChange{Kind: ChangeRemoved, From: oa.Name, Detail: fmt.Sprintf(
				"aggregate %s removed: its state (%s) is dropped", oa.Name, strings.Join(names, ", "))})
		}
	}
	return cols
}

// compareAggregate decides whether old aggregate src can continue as new
// aggregate j: the kind of change, a note for the change line and the
// operation on the state's value column.
func (e *Evolution) compareAggregate(ow, nw *Window, src, j int) (ChangeKind, string, columnOp, bool) {
	oa, na := ow.spec.Aggregates[src], nw.spec.Aggregates[j]
	sumAvg := (oa.Func == AggSum || oa.Func == AggAvg) && (na.Func == AggSum || na.Func == AggAvg)
	if oa.Func != na.Func && !sumAvg {
		e.refuse(na.Name, oa.Name, "", "aggregate %s: function changed %s -> %s: the state holds what %s needs, not %s; give the new aggregate another name (it starts empty) and keep or drop %s, %s",
			na.Name, oa, na, oa.Func, na.Func, oa.Name, wayOut)
		return 0, "", 0, false
	}
	if oa.Column != na.Column {
		e.refuse(na.Name, oa.Name, "", "aggregate %s: input changed %s -> %s: the state was accumulated over %s; keep the column (rename it back in a project before the window), or give the new aggregate another name (it starts empty), %s",
			na.Name, oa, na, describeInput(oa), wayOut)
		return 0, "", 0, false
	}
	kind, note, op := ChangeKept, "", opMove
	if oa.Func != na.Func {
		kind = ChangeConverted
		note = fmt.Sprintf("%s -> %s: both keep (sum, count), state kept; output type %s -> %s",
			oa, na, typeName(ow.aggs[src].resultType()), typeName(nw.aggs[j].resultType()))
	}
	if oa.Column == "" {
		return kind, note, op, true
	}
	ot := ow.input.Field(ow.aggCols[src]).Type
	nt := nw.input.Field(nw.aggCols[j]).Type
	if arrow.TypeEqual(ot, nt) {
		return kind, note, op, true
	}
	widen := fmt.Sprintf("input column %s widened %s -> %s", oa.Column, typeName(ot), typeName(nt))
	and := func(s string) string {
		if note == "" {
			return s
		}
		return note + "; " + s
	}
	if na.Func == AggCount {
		return ChangeConverted, and(fmt.Sprintf("input column %s changed type %s -> %s: count(%s) counts non-null values whatever their type, state kept", oa.Column, typeName(ot), typeName(nt), oa.Column)), opMove, true
	}
	if ot.ID() == arrow.INT32 && nt.ID() == arrow.INT64 {
		switch na.Func {
		case AggSum, AggAvg:
			return ChangeConverted, and(widen + ": its exact 128-bit sum is kept as it is"), opMove, true
		case AggMin, AggMax, AggFirst, AggLast:
			return ChangeConverted, and(widen + ": stored values cast to int64"), opCastInt64, true
		case AggCountDistinct:
			return ChangeConverted, and(widen + ": stored distinct values re-encoded as int64 (equal values stay equal)"), opRetag, true
		}
	}
	why := fmt.Sprintf("the stored %s values cannot stand for %s values", typeName(ot), typeName(nt))
	switch {
	case isInt(ot) && isInt(nt):
		why = fmt.Sprintf("a narrowed type: stored values may not fit %s", typeName(nt))
	case isInt(ot) && nt.ID() == arrow.FLOAT64 && (na.Func == AggSum || na.Func == AggAvg):
		why = "an exact integer sum cannot continue as a float64 sum with the result a float sum over every row would give"
	case na.Func == AggCountDistinct:
		why = fmt.Sprintf("its distinct values are stored in the %s encoding and would never equal %s values", typeName(ot), typeName(nt))
	}
	e.refuse(na.Name, oa.Name, "", "aggregate %s = %s: input column %s changed type %s -> %s: %s; keep %s %s, or give the new aggregate another name (it starts empty), %s",
		na.Name, na, oa.Column, typeName(ot), typeName(nt), why, oa.Column, typeName(ot), wayOut)
	return 0, "", 0, false
}

func isInt(dt arrow.DataType) bool { return dt.ID() == arrow.INT32 || dt.ID() == arrow.INT64 }

func describeInput(a AggSpec) string {
	if a.Column == "" {
		return "every row"
	}
	return "column " + a.Column
}

func aggNames(aggs []AggSpec) string {
	names := make([]string, len(aggs))
	for i, a := range aggs {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

func identityOp(f AggFunc) columnOp {
	switch f {
	case AggCount, AggSum, AggAvg:
		return opZero
	case AggCountDistinct:
		return opEmptyList
	}
	return opNull
}

// identityText says what an added aggregate holds in a window open at the
// change.
func identityText(a AggSpec) string {
	switch a.Func {
	case AggCount:
		return a.Func.String() + " 0"
	case AggCountDistinct:
		return "count_distinct empty"
	}
	return a.Func.String() + " null (no value yet)"
}

// typeName names a column type as a pipeline spec does where it can.
func typeName(dt arrow.DataType) string {
	switch dt.ID() {
	case arrow.STRING:
		return "string"
	case arrow.TIMESTAMP:
		if ts := dt.(*arrow.TimestampType); ts.Unit == arrow.Microsecond {
			return "timestamp"
		}
	}
	return dt.String()
}

// Compatible reports whether the old state can be restored by the new window
// (after Migrate).
func (e *Evolution) Compatible() bool {
	for _, c := range e.changes {
		if c.Kind == ChangeRefused {
			return false
		}
	}
	return true
}

// SameLayout reports whether the old state batches are already in the new
// layout: Migrate returns them unchanged, and state files may be restored
// (and shared) as they are. False when not Compatible.
func (e *Evolution) SameLayout() bool { return e.same }

// Details returns every change, refused ones included, in order: window
// settings first, then the new aggregates in spec order, then the removed
// ones.
func (e *Evolution) Details() []StateChange { return slices.Clone(e.changes) }

// Changes returns one line per change the restore makes (added, removed,
// renamed, converted aggregates and window settings); unchanged aggregates
// and refusals are not listed. Empty when nothing changes.
func (e *Evolution) Changes() []string {
	var out []string
	for _, c := range e.changes {
		if c.Kind != ChangeRefused && c.Kind != ChangeKept {
			out = append(out, c.Detail)
		}
	}
	return out
}

// Reasons returns one line per incompatibility, each naming the field or
// aggregate, old and new, and what would make it work. Empty when
// Compatible.
func (e *Evolution) Reasons() []string {
	var out []string
	for _, c := range e.changes {
		if c.Kind == ChangeRefused {
			out = append(out, c.Detail)
		}
	}
	return out
}

// Err returns nil when Compatible, otherwise an error naming the window and
// listing every reason.
func (e *Evolution) Err() error {
	r := e.Reasons()
	if len(r) == 0 {
		return nil
	}
	id := e.newSpec.ID
	if id == "" {
		id = "window"
	}
	return fmt.Errorf("window %s: state cannot be restored: %s", id, strings.Join(r, "; "))
}

// SetAllocator makes Migrate allocate the columns it builds from mem
// (default memory.DefaultAllocator). Call it before sharing e.
func (e *Evolution) SetAllocator(mem memory.Allocator) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	e.mem = mem
}

// OldStateSchema and NewStateSchema are the state layouts Migrate converts
// between (the StateSchema of a window of each spec).
func (e *Evolution) OldStateSchema() *arrow.Schema { return e.oldState }

// NewStateSchema is the StateSchema of a window of the new spec.
func (e *Evolution) NewStateSchema() *arrow.Schema { return e.newState }

// RestoreWatermark returns the watermark to pass to Window.Restore for a
// state whose windows were emitted through emitted (the recorded
// emitted-through watermark) under the old allowed lateness. Window.Restore
// takes a watermark and closes every window with end + lateness <= it; with
// the new lateness and the recorded watermark that set differs from the
// windows the old window emitted:
//
//   - lateness raised by d: windows with end + old <= emitted < end + new
//     were emitted and dropped, yet would count as open: a late row would
//     build one of them again and emit it a second time;
//   - lateness lowered: windows with end + new <= emitted < end + old are
//     still in the state and open, yet would count as closed (they are
//     emitted at the next Advance; rows for them are late).
//
// emitted + (new - old) closes exactly the windows the old window closed, so
// each window is emitted once. Advance ignores watermarks up to it, so with
// a raised lateness the new lateness takes effect once the watermark passes
// emitted + d. The engine must then record the window's Watermark() (the
// larger of it and the pipeline watermark) as emitted-through, or the next
// restore falls back to the unshifted value and may emit a window twice.
// NoWatermark (math.MinInt64) is returned as it is.
func (e *Evolution) RestoreWatermark(emitted int64) int64 {
	switch {
	case emitted == math.MinInt64 || e.shift == 0:
		return emitted
	case e.shift > 0 && emitted > math.MaxInt64-e.shift:
		return math.MaxInt64
	case e.shift < 0 && emitted < math.MinInt64-e.shift:
		return math.MinInt64 + 1
	}
	return emitted + e.shift
}

// Migrate converts a state batch written under the old spec (base file or
// delta upserts, OldStateSchema) into NewStateSchema: columns are moved
// (sharing their buffers), renamed by the schema, cast (int32 -> int64) or
// re-encoded (count_distinct), and identity columns appended for added
// aggregates; no per-row work beyond those conversions. The caller releases
// the result (for a SameLayout evolution it is the input with one more
// reference). Rows, their order and key groups are unchanged. A nil batch
// gives nil.
func (e *Evolution) Migrate(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if err := e.Err(); err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, nil
	}
	if !sameFields(rec.Schema(), e.oldState) {
		return nil, fmt.Errorf("migrate state: batch schema %s does not match the old state schema %s", rec.Schema(), e.oldState)
	}
	if e.same {
		rec.Retain()
		return rec, nil
	}
	n := int(rec.NumRows())
	cols := make([]arrow.Array, len(e.cols))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range e.cols {
		f := e.newState.Field(i)
		var err error
		switch c.op {
		case opMove:
			cols[i] = rec.Column(c.from)
			cols[i].Retain()
		case opCastInt64:
			cols[i], err = castInt32ToInt64(e.mem, rec.Column(c.from))
		case opRetag:
			cols[i], err = retagDistinct(e.mem, rec.Column(c.from), tagInt32, tagInt64)
		case opZero, opNull, opEmptyList:
			cols[i], err = identityColumn(e.mem, f.Type, c.op, n)
		}
		if err != nil {
			return nil, fmt.Errorf("migrate state: column %s: %w", f.Name, err)
		}
	}
	return array.NewRecordBatch(e.newState, cols, int64(n)), nil
}

// MigrateTombstones converts a tombstone batch of the old TombstoneSchema
// (key_group, keys, window_start, window_end) into the new one. Keys must
// not change for a compatible evolution, so it is the identity: the input
// with one more reference, which the caller releases.
func (e *Evolution) MigrateTombstones(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if err := e.Err(); err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, nil
	}
	if !sameFields(rec.Schema(), e.oldTomb) {
		return nil, fmt.Errorf("migrate tombstones: batch schema %s does not match the old tombstone schema %s", rec.Schema(), e.oldTomb)
	}
	if !sameFields(e.oldTomb, e.newTomb) {
		return nil, errors.New("migrate tombstones: tombstone layout changed") // excluded by the key checks
	}
	rec.Retain()
	return rec, nil
}

// castInt32ToInt64 widens an int32 column, keeping its nulls.
func castInt32ToInt64(mem memory.Allocator, a arrow.Array) (arrow.Array, error) {
	in, ok := a.(*array.Int32)
	if !ok {
		return nil, fmt.Errorf("want int32, got %s", a.DataType())
	}
	vals := in.Int32Values()
	out := memory.NewResizableBuffer(mem)
	out.Resize(len(vals) * 8)
	dst := arrow.Int64Traits.CastFromBytes(out.Bytes())
	for i, v := range vals {
		dst[i] = int64(v)
	}
	bufs := []*memory.Buffer{nil, out}
	if in.NullN() > 0 {
		bufs[0] = copyBitmap(mem, in.NullBitmapBytes(), in.Data().Offset(), in.Len())
	}
	data := array.NewData(arrow.PrimitiveTypes.Int64, in.Len(), bufs, nil, in.NullN(), 0)
	defer data.Release()
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	return array.MakeFromData(data), nil
}

// copyBitmap copies n bits starting at bit off into a new buffer at bit 0.
func copyBitmap(mem memory.Allocator, src []byte, off, n int) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize((n + 7) / 8)
	dst := buf.Bytes()
	clear(dst)
	for i := 0; i < n; i++ {
		if src[(off+i)/8]&(1<<uint((off+i)%8)) != 0 {
			dst[i/8] |= 1 << uint(i%8)
		}
	}
	return buf
}

// retagDistinct rewrites the type tag byte of every stored value of a
// count_distinct state column (list<binary>) from one tag to another: int32
// and int64 values encode as the tag and the same 8 bytes (SerializeKey).
// The list's validity and offsets and the values' validity and offsets are
// shared; only the value bytes are copied.
func retagDistinct(mem memory.Allocator, a arrow.Array, from, to byte) (arrow.Array, error) {
	la, ok := a.(*array.List)
	if !ok {
		return nil, fmt.Errorf("count_distinct state is %s, want list<binary>", a.DataType())
	}
	vals, ok := la.ListValues().(*array.Binary)
	if !ok {
		return nil, fmt.Errorf("count_distinct values are %s, want binary", la.ListValues().DataType())
	}
	vd := vals.Data()
	var src []byte
	if b := vd.Buffers()[2]; b != nil {
		src = b.Bytes()
	}
	bytesBuf := memory.NewResizableBuffer(mem)
	defer bytesBuf.Release()
	bytesBuf.Resize(len(src))
	dst := bytesBuf.Bytes()
	copy(dst, src)
	for i := 0; i < vals.Len(); i++ {
		if vals.IsNull(i) {
			continue
		}
		lo := vals.ValueOffset(i)
		if vals.ValueLen(i) != 9 || dst[lo] != from {
			return nil, fmt.Errorf("count_distinct value %d is not an encoded %s value", i, tagName(from))
		}
		dst[lo] = to
	}
	vb := vd.Buffers()
	nvd := array.NewData(vd.DataType(), vd.Len(), []*memory.Buffer{vb[0], vb[1], bytesBuf}, nil, vd.NullN(), vd.Offset())
	defer nvd.Release()
	ld := la.Data()
	nld := array.NewData(ld.DataType(), ld.Len(), ld.Buffers(), []arrow.ArrayData{nvd}, ld.NullN(), ld.Offset())
	defer nld.Release()
	return array.MakeFromData(nld), nil
}

func tagName(tag byte) string {
	switch tag {
	case tagInt32:
		return "int32"
	case tagInt64:
		return "int64"
	}
	return fmt.Sprintf("tag 0x%02x", tag)
}

// identityColumn builds n rows of an added aggregate's identity: zeros
// (count, and sum / avg with count 0, which reads as "no value"), nulls
// (min, max, first, last) or empty lists (count_distinct).
func identityColumn(mem memory.Allocator, dt arrow.DataType, op columnOp, n int) (arrow.Array, error) {
	switch op {
	case opNull:
		return array.MakeArrayOfNull(mem, dt, n), nil
	case opZero, opEmptyList:
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		b.AppendEmptyValues(n)
		return b.NewArray(), nil
	}
	return nil, fmt.Errorf("no identity for op %d", op)
}

// StateSpec returns the spec w was built from (a copy): what the engine
// records, with the input schema, to rebuild the window's state layout
// later (MarshalStatePlan).
func (w *Window) StateSpec() WindowSpec {
	s := w.spec
	s.Keys = slices.Clone(s.Keys)
	s.Aggregates = slices.Clone(s.Aggregates)
	return s
}

// InputSchema returns the schema w reads (the one given to NewWindow).
func (w *Window) InputSchema() *arrow.Schema { return w.input }
