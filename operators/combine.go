package operators

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/keygroup"
)

// Partial aggregation (a combiner) for a pipeline run by several workers:
// the rows a worker routes to another worker's subtasks of a window are
// first aggregated per key and window (slice) by a fresh instance of the
// same window, and what crosses the exchange is that instance's state
// rows, which the owning subtask folds into its own (MergePartials). That
// is Flink's local-global aggregation and Spark's partial aggregation: one
// row per key and window instead of every input row.
//
// It is exact only where the result does not depend on how the rows were
// split or in which order they arrive: count, integer sum and avg (kept as
// 128-bit sums), min and max, over tumbling and sliding windows. A float
// sum (rounding depends on the order), first/last (the arrival order),
// count_distinct (its partial is the whole value set) and session windows
// (a row can join or merge sessions the sender does not see) are sent as
// rows. Late rows are judged by the combiner at the same watermark as the
// owner judges them (every subtask of a stage holds the stage's
// watermark), and are sent as rows: the owner counts them and writes them
// to the stage's late output as it does today.

// Combiner is a Stateful operator whose rows can be pre-aggregated before
// an exchange.
type Combiner interface {
	// Combinable reports whether the operator's rows can be combined:
	// its aggregates are all order-free and its windows fixed (above).
	Combinable() bool
	// NewCombiner returns a fresh, empty instance at the operator's
	// watermark that pre-aggregates rows (Combinable only).
	NewCombiner() (Stateful, error)
	// PartialSchema is the schema of the combiner's state rows
	// (StateSchema), the partials MergePartials takes.
	PartialSchema() *arrow.Schema
	// Partials returns a combiner's windows as partial rows (its state
	// rows in no particular order: folding them in does not depend on it)
	// and empties it.
	Partials() ([]arrow.RecordBatch, error)
	// MergePartials folds the partial rows of rec whose key group is in
	// [kgLo, kgHi) into the operator's windows, as if their rows had been
	// processed here, and returns how many it folded. The changed windows
	// are tracked as rows would change them.
	MergePartials(rec arrow.RecordBatch, kgLo, kgHi int) (int, error)
}

var _ Combiner = (*Window)(nil)

// Combinable implements Combiner: every aggregate of w gives the same
// result whatever the split and order of its rows, and w's windows are
// fixed.
func (w *Window) Combinable() bool {
	if w.spec.Kind != Tumbling && w.spec.Kind != Sliding {
		return false
	}
	for i, a := range w.aggs {
		switch w.spec.Aggregates[i].Func {
		case AggCount, AggMin, AggMax:
		case AggSum, AggAvg:
			if _, float := a.(*sumAcc[float64, float64]); float {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// NewCombiner implements Combiner.
func (w *Window) NewCombiner() (Stateful, error) {
	if !w.Combinable() {
		return nil, fmt.Errorf("window %s: combiner: its aggregates cannot be combined", w.id)
	}
	c, err := NewWindow(w.spec, w.input, w.k)
	if err != nil {
		return nil, fmt.Errorf("window %s: combiner: %w", w.id, err)
	}
	c.SetAllocator(w.mem)
	c.wm = w.wm
	return c, nil
}

// PartialSchema implements Combiner.
func (w *Window) PartialSchema() *arrow.Schema { return w.state }

// Partials implements Combiner: Snapshot without its sort.
func (w *Window) Partials() ([]arrow.RecordBatch, error) {
	return w.stateBatches(w.liveSlots(), "partials")
}

// MergePartials implements Combiner. A partial of a window this instance
// has closed already is an error: the combiner judged lateness at another
// watermark (a bug, never the input's fault). The rows are checked as
// state rows are (key group in range and matching the key, window bounds).
func (w *Window) MergePartials(rec arrow.RecordBatch, kgLo, kgHi int) (int, error) {
	if !w.Combinable() {
		return 0, fmt.Errorf("window %s: merge partials: its aggregates cannot be combined", w.id)
	}
	if kgLo < 0 || kgHi > w.k || kgLo > kgHi {
		return 0, fmt.Errorf("window %s: merge partials: key-group range [%d,%d) outside [0,%d)", w.id, kgLo, kgHi, w.k)
	}
	if !sameFields(rec.Schema(), w.state) {
		return 0, fmt.Errorf("window %s: merge partials: schema %s does not match state schema %s", w.id, rec.Schema(), w.state)
	}
	nk := len(w.keyCols)
	kgs := rec.Column(0).(*array.Int32).Int32Values()
	var enc keyEncoder
	enc.bind(w.keyKinds, rec.Columns()[1:1+nk])
	starts := rec.Column(1 + nk).(*array.Timestamp).TimestampValues()
	ends := rec.Column(2 + nk).(*array.Timestamp).TimestampValues()
	var dst, rows []int32
	buf := w.buf
	for r := range int(rec.NumRows()) {
		kg := int(kgs[r])
		if kg < 0 || kg >= w.k {
			w.buf = buf
			return 0, fmt.Errorf("window %s: merge partials: row %d: key group %d outside [0,%d)", w.id, r, kg, w.k)
		}
		if kg < kgLo || kg >= kgHi {
			continue
		}
		buf = enc.encode(buf[:0], r)
		if got := keygroup.Of(buf, w.k); got != kg {
			w.buf = buf
			return 0, fmt.Errorf("window %s: merge partials: row %d: key hashes to key group %d, row says %d", w.id, r, got, kg)
		}
		start, end := int64(starts[r]), int64(ends[r])
		if floorMod(start, w.slide) != 0 || end-start != w.slide {
			w.buf = buf
			return 0, fmt.Errorf("window %s: merge partials: row %d: [%d,%d) is not a slice of length %d aligned to it", w.id, r, start, end, w.slide)
		}
		if w.closed(satAdd(start, w.size)) {
			w.buf = buf
			return 0, fmt.Errorf("window %s: merge partials: row %d: slice [%d,%d) is closed at watermark %d (the combiner judged lateness at another watermark)", w.id, r, start, end, w.wm)
		}
		// keyID may reuse w.buf (a new string key): keep buf apart.
		w.buf = nil
		kid := w.keyID(buf)
		dst = append(dst, w.fixedSlot(kid, start, end))
		rows = append(rows, int32(r))
	}
	w.buf = buf
	if len(dst) == 0 {
		return 0, nil
	}
	// Restore the partials into scratch slots past the table, fold each
	// into its window, and drop the scratch slots.
	base := len(w.slots)
	scratch := make([]int32, len(dst))
	for j, s := range dst {
		scratch[j] = w.scratchSlot(-1, w.slots[s].start, w.slots[s].end)
	}
	if err := w.restoreAggs(rec, rows, scratch); err != nil {
		w.dropScratch(base)
		return 0, fmt.Errorf("window %s: merge partials: %w", w.id, err)
	}
	for j, s := range dst {
		for _, a := range w.aggs {
			a.merge(s, scratch[j])
		}
		if !w.slots[s].listed {
			w.touch(s)
		}
	}
	w.dropScratch(base)
	return len(dst), nil
}
