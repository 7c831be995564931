package operators

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Incremental state.
//
// A snapshot point is the last call of Snapshot, SnapshotDelta, Restore or
// ApplyDelta. Between two points a Window tracks, at a cost proportional to
// what changes (never to the state it holds):
//
//   - dirty: the slots created or updated (a slot is listed once, with
//     slotInfo.listed, and stays listed when its index is reused);
//   - tombs: the windows that existed at the last point and were removed
//     since (emitted by Advance, merged into another session), with the
//     bounds they had at that point;
//   - moved: sessions that existed at the last point and whose bounds
//     changed since, with those bounds.
//
// slotInfo.inBase says that a slot's window existed at the last point. Every
// live slot is listed or inBase (or both), so a snapshot point only has to
// visit the listed slots to make them inBase.
//
// SnapshotDelta turns this into rows: upserts are the live listed slots,
// tombstones are tombs plus the old bounds of moved sessions. ApplyDelta
// applies tombstones first, then upserts, so that base + deltas in order
// rebuild exactly the state a Snapshot would have written.

// tomb is a removed window of the last snapshot point.
type tomb struct {
	key        string // encoded key
	kg         int32
	start, end int64
}

// touch lists slot s as created or changed since the last snapshot point.
func (w *Window) touch(s int32) {
	w.slots[s].listed = true
	w.dirty = append(w.dirty, s)
}

// removed records the removal of base slot s (whose key is ki) as a tombstone
// of the bounds it had at the last snapshot point.
func (w *Window) removed(s int32, ki *keyInfo) {
	info := &w.slots[s]
	start, end := info.start, info.end
	if b, ok := w.moved[s]; ok {
		start, end = b[0], b[1]
		delete(w.moved, s)
	}
	w.tombs = append(w.tombs, tomb{key: w.keyStr(ki), kg: ki.kg, start: start, end: end})
	info.inBase = false
}

// move records the bounds of base session s before they first change.
func (w *Window) move(s int32) {
	if _, ok := w.moved[s]; !ok {
		w.moved[s] = [2]int64{w.slots[s].start, w.slots[s].end}
	}
}

// resetTracking makes the current state the snapshot point.
func (w *Window) resetTracking() {
	for _, s := range w.dirty {
		info := &w.slots[s]
		info.listed = false
		if info.live {
			info.inBase = true
		}
	}
	w.dirty = w.dirty[:0]
	w.tombs = nil
	clear(w.moved)
	for _, a := range w.aggs {
		if m, ok := a.(freshTracker); ok {
			m.clearFresh()
		}
	}
}

// TombstoneSchema is the schema of SnapshotDelta's tombstone batches: the
// first columns of StateSchema, key_group (int32), the key columns,
// window_start and window_end.
func (w *Window) TombstoneSchema() *arrow.Schema {
	return arrow.NewSchema(w.state.Fields()[:3+len(w.keyCols)], nil)
}

// Dirty returns how many windows were created or changed (changed) and how
// many windows of the last snapshot point were removed or, for sessions,
// moved to other bounds (removed) since the last Snapshot, SnapshotDelta,
// Restore or ApplyDelta: the upsert and tombstone rows SnapshotDelta would
// return. It costs O(changed).
func (w *Window) Dirty() (changed, removed int) {
	for _, s := range w.dirty {
		if w.slots[s].live {
			changed++
		}
	}
	return changed, len(w.tombs) + len(w.moved)
}

// DirtyMerges returns how many of the windows Dirty counts as changed the
// next SnapshotDeltaMerges writes as merge rows (mergeable: see
// snapshotDelta). It costs O(changed).
func (w *Window) DirtyMerges() int {
	n := 0
	for _, s := range w.dirty {
		if w.mergeable(s) {
			n++
		}
	}
	return n
}

// mergeable reports whether changed slot s is written as a merge row by
// SnapshotDeltaMerges: a live window that existed at the last snapshot
// point with the same bounds, of a Window with a count_distinct.
func (w *Window) mergeable(s int32) bool {
	info := &w.slots[s]
	_, moved := w.moved[s]
	return w.merging && info.live && info.inBase && !moved
}

// SnapshotDelta returns what changed since the last Snapshot, SnapshotDelta,
// Restore or ApplyDelta, and makes now the new point of comparison:
//
//   - upserts (StateSchema, the encoding of Snapshot): the full state row of
//     every window created or changed since;
//   - tombstones (TombstoneSchema): every window that existed at the last
//     point and was removed since (emitted, or a session merged into
//     another), with the bounds it had then. A session whose bounds changed
//     is a tombstone of its old bounds plus an upsert of the new ones.
//
// Both are sorted by key_group, key bytes and window_start, in batches of at
// most 65536 rows; the caller releases them. Restore(base) followed by
// ApplyDelta of every delta since base, in order, gives exactly the state
// Snapshot would give now. It costs O(changed windows), not O(state). On
// error nothing is reset: the next call returns the same changes.
func (w *Window) SnapshotDelta() (upserts, tombstones []arrow.RecordBatch, err error) {
	upserts, _, tombstones, err = w.snapshotDelta(false)
	return upserts, tombstones, err
}

// SnapshotDeltaMerges is SnapshotDelta that writes a changed window which
// existed at the last point, with the same bounds, as a merge row instead of
// an upsert when the window has an aggregate whose state grows with its
// input (count_distinct): a merge row (StateSchema, sorted like upserts)
// holds the full state of the other aggregates but only the count_distinct
// values added since the last point, so that a window's delta costs what
// the epoch added to it, not the whole set it holds. ApplyMerges applies
// them after the delta's tombstones and upserts. Without such an aggregate
// merges is empty and the delta is SnapshotDelta's.
func (w *Window) SnapshotDeltaMerges() (upserts, merges, tombstones []arrow.RecordBatch, err error) {
	return w.snapshotDelta(w.merging)
}

func (w *Window) snapshotDelta(merge bool) (upserts, merges, tombstones []arrow.RecordBatch, err error) {
	ups := make([]int32, 0, len(w.dirty))
	var mrg []int32
	for _, s := range w.dirty {
		switch {
		case !w.slots[s].live:
		case merge && w.mergeable(s):
			mrg = append(mrg, s)
		default:
			ups = append(ups, s)
		}
	}
	w.sortStateOrder(ups)
	w.sortStateOrder(mrg)
	tombs := slices.Clone(w.tombs)
	for s, b := range w.moved {
		ki := w.keys.at(w.slots[s].kid)
		tombs = append(tombs, tomb{key: w.keyStr(ki), kg: ki.kg, start: b[0], end: b[1]})
	}
	slices.SortFunc(tombs, func(a, b tomb) int {
		return cmp.Or(cmp.Compare(a.kg, b.kg), strings.Compare(a.key, b.key), cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
	})
	fail := func(err error) ([]arrow.RecordBatch, []arrow.RecordBatch, []arrow.RecordBatch, error) {
		releaseBatches(upserts)
		releaseBatches(merges)
		releaseBatches(tombstones)
		return nil, nil, nil, fmt.Errorf("window %s: snapshot delta: %w", w.id, err)
	}
	for _, part := range []struct {
		slots  []int32
		layout rowLayout
		out    *[]arrow.RecordBatch
	}{{ups, stateRows, &upserts}, {mrg, mergeRows, &merges}} {
		for lo := 0; lo < len(part.slots); lo += snapshotChunkRows {
			rec, err := w.build(w.state, part.slots[lo:min(len(part.slots), lo+snapshotChunkRows)], part.layout)
			if err != nil {
				return fail(err)
			}
			*part.out = append(*part.out, rec)
		}
	}
	ts := w.TombstoneSchema()
	for lo := 0; lo < len(tombs); lo += snapshotChunkRows {
		rec, err := w.buildTombstones(ts, tombs[lo:min(len(tombs), lo+snapshotChunkRows)])
		if err != nil {
			return fail(err)
		}
		tombstones = append(tombstones, rec)
	}
	w.resetTracking()
	return upserts, merges, tombstones, nil
}

func (w *Window) buildTombstones(schema *arrow.Schema, tombs []tomb) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(w.mem, schema)
	defer b.Release()
	b.Reserve(len(tombs))
	nk := len(w.keyCols)
	kgb := b.Field(0).(*array.Int32Builder)
	kbs := b.Fields()[1 : 1+nk]
	sb, eb := b.Field(1+nk).(*array.TimestampBuilder), b.Field(2+nk).(*array.TimestampBuilder)
	for _, t := range tombs {
		kgb.Append(t.kg)
		if err := decodeKey(t.key, kbs); err != nil {
			return nil, err
		}
		sb.Append(arrow.Timestamp(t.start))
		eb.Append(arrow.Timestamp(t.end))
	}
	return b.NewRecordBatch(), nil
}

// ApplyDelta applies one SnapshotDelta to a Window rebuilt with Restore from
// the base the delta follows (and the deltas before it, in order): first the
// tombstones remove their windows, then the upserts add or replace windows
// by (key, window_start, window_end). Rows whose key_group is outside
// [kgLo, kgHi) are skipped (rescale). A tombstone of a window that is not
// open, or an upsert that overlaps another open session of its key or
// appears twice, is an error (deltas applied out of order or state
// corrupt). Schemas, key groups and bounds are validated before any state
// changes; after a later error the Window must be discarded. Like Restore,
// ApplyDelta starts change tracking anew.
func (w *Window) ApplyDelta(upserts, tombstones []arrow.RecordBatch, kgLo, kgHi int) error {
	if kgLo < 0 || kgHi > w.k || kgLo > kgHi {
		return fmt.Errorf("window %s: apply delta: key-group range [%d,%d) outside [0,%d)", w.id, kgLo, kgHi, w.k)
	}
	tpicks, buf, err := w.pickBatches(tombstones, w.TombstoneSchema(), "tombstone", kgLo, kgHi, "apply delta: tombstone batch", nil)
	if err != nil {
		return err
	}
	upicks, _, err := w.pickBatches(upserts, w.state, "state", kgLo, kgHi, "apply delta: upsert batch", buf)
	if err != nil {
		return err
	}
	for bi, picks := range tpicks {
		for _, p := range picks {
			s, ok := w.findSlot([]byte(p.key), p.start, p.end)
			if !ok {
				return fmt.Errorf("window %s: apply delta: tombstone batch %d row %d: window [%d,%d) is not open (deltas out of order or state corrupt)", w.id, bi, p.row, p.start, p.end)
			}
			w.killSlot(s)
			w.freeSlot(s)
		}
	}
	seen := map[int32]bool{}
	for bi, rec := range upserts {
		if len(upicks[bi]) == 0 {
			continue
		}
		rows := make([]int32, len(upicks[bi]))
		slots := make([]int32, len(upicks[bi]))
		for j, p := range upicks[bi] {
			rows[j] = p.row
			s, ok := w.findSlot([]byte(p.key), p.start, p.end)
			switch {
			case ok && seen[s]:
				return fmt.Errorf("window %s: apply delta: upsert batch %d row %d: window [%d,%d) upserted twice", w.id, bi, p.row, p.start, p.end)
			case ok:
				for _, a := range w.aggs {
					a.reset(s)
				}
			case w.spec.Kind == Session:
				var err error
				if s, err = w.addSession(w.keyID([]byte(p.key)), p.start, p.end); err != nil {
					return fmt.Errorf("window %s: apply delta: upsert batch %d row %d: %w", w.id, bi, p.row, err)
				}
			default:
				s = w.fixedSlot(w.keyID([]byte(p.key)), p.start, p.end)
			}
			seen[s] = true
			w.slots[s].inBase = true
			slots[j] = s
		}
		if err := w.restoreAggs(rec, rows, slots); err != nil {
			return fmt.Errorf("window %s: apply delta: upsert batch %d: %w", w.id, bi, err)
		}
	}
	w.resetTracking()
	return nil
}

// ApplyMerges applies the merge rows of one SnapshotDeltaMerges, after that
// delta's ApplyDelta: each row's window must be open (it existed when the
// delta was taken); its count_distinct values are added to the window's set
// and its other aggregates are replaced. Rows whose key_group is outside
// [kgLo, kgHi) are skipped. A merge of a window that is not open, or of one
// window twice, is an error (deltas applied out of order or state corrupt);
// schemas and key groups are validated before any state changes, and after
// a later error the Window must be discarded. Like ApplyDelta, ApplyMerges
// starts change tracking anew.
func (w *Window) ApplyMerges(merges []arrow.RecordBatch, kgLo, kgHi int) error {
	if kgLo < 0 || kgHi > w.k || kgLo > kgHi {
		return fmt.Errorf("window %s: apply merges: key-group range [%d,%d) outside [0,%d)", w.id, kgLo, kgHi, w.k)
	}
	picks, _, err := w.pickBatches(merges, w.state, "state", kgLo, kgHi, "apply merges: batch", nil)
	if err != nil {
		return err
	}
	seen := map[int32]bool{}
	for bi, rec := range merges {
		if len(picks[bi]) == 0 {
			continue
		}
		rows := make([]int32, len(picks[bi]))
		slots := make([]int32, len(picks[bi]))
		for j, p := range picks[bi] {
			s, ok := w.findSlot([]byte(p.key), p.start, p.end)
			switch {
			case !ok:
				return fmt.Errorf("window %s: apply merges: batch %d row %d: window [%d,%d) is not open (deltas out of order or state corrupt)", w.id, bi, p.row, p.start, p.end)
			case seen[s]:
				return fmt.Errorf("window %s: apply merges: batch %d row %d: window [%d,%d) merged twice", w.id, bi, p.row, p.start, p.end)
			}
			for _, a := range w.aggs {
				if _, adds := a.(freshTracker); !adds {
					a.reset(s)
				}
			}
			seen[s] = true
			rows[j], slots[j] = p.row, s
		}
		if err := w.restoreAggs(rec, rows, slots); err != nil {
			return fmt.Errorf("window %s: apply merges: batch %d: %w", w.id, bi, err)
		}
	}
	w.resetTracking()
	return nil
}

// pickBatches checks that every batch of recs (nil ones skipped) has
// schema (named schemaName in errors) and picks its rows of key groups
// [kgLo, kgHi) (pickRows, reusing buf); what names the batches in errors.
func (w *Window) pickBatches(recs []arrow.RecordBatch, schema *arrow.Schema, schemaName string, kgLo, kgHi int, what string, buf []byte) ([][]statePick, []byte, error) {
	picks := make([][]statePick, len(recs))
	for bi, rec := range recs {
		if rec == nil {
			continue
		}
		if !sameFields(rec.Schema(), schema) {
			return nil, buf, fmt.Errorf("window %s: %s %d schema %s does not match %s schema %s", w.id, what, bi, rec.Schema(), schemaName, schema)
		}
		var err error
		if picks[bi], buf, err = w.pickRows(rec, kgLo, kgHi, buf); err != nil {
			return nil, buf, fmt.Errorf("window %s: %s %d %w", w.id, what, bi, err)
		}
	}
	return picks, buf, nil
}

// releaseBatches releases record batches built by this package.
func releaseBatches(bs []arrow.RecordBatch) {
	for _, b := range bs {
		if b != nil {
			b.Release()
		}
	}
}
