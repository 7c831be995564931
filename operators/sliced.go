package operators

import (
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// Sliced sliding windows (as Flink's window slicing).
//
// A sliding window of size S and slide L (L divides S) keeps one state per
// key and slice [p, p+L), p a multiple of L: Process adds each row once, to
// its slice, instead of to each of its S/L windows. Window [s, s+S) is the
// union of the slices s, s+L, ..., s+S-L. Advance(wm) builds, from the
// slices, the windows whose end + lateness passes from above the old
// watermark to at most wm (exactly the windows that close at this call),
// emits the non-empty ones, and drops the slices whose last window,
// [p, p+S), is closed.
//
// The output is the per-window one: a window closes at one Advance, every
// row it holds arrived before (while it was open) and every row that arrived
// while it was open is in one of its slices; rows added to a slice after
// one of its windows closed only reach the windows still open. Float sums
// add slice sums, so their last bits may differ from a row-by-row sum.

// advanceSliding is Advance(wm) for a sliding window.
func (w *Window) advanceSliding(wm int64) (arrow.RecordBatch, error) {
	oldWm := w.wm
	w.wm = wm
	closedBefore := func(end int64) bool { return satAdd(end, w.lateness) <= oldWm }
	// Every window closing now ends by wm - lateness, so its slices have
	// closed first windows: collect those slices (one sequential pass over
	// the slots), sort their keys by bytes (the output order), and group
	// the slices by key in that order with a counting sort, so no key's
	// slots are chased through memory.
	var kids []int32
	refs := w.sref[:0]
	rank := w.rankScratch(w.keys.len())
	for s := range w.slots {
		if info := &w.slots[s]; info.live && w.closed(info.end) {
			refs = append(refs, sliceRef{start: info.start, slot: int32(s), kid: info.kid})
			if rank[info.kid] < 0 {
				rank[info.kid] = 0
				kids = append(kids, info.kid)
			}
		}
	}
	w.sref = refs
	if len(refs) == 0 {
		return nil, nil
	}
	w.sortKeys(kids)
	pos := make([]int32, len(kids)+1)
	for i, kid := range kids {
		rank[kid] = int32(i)
	}
	for _, r := range refs {
		pos[rank[r.kid]+1]++
	}
	for i := 1; i < len(pos); i++ {
		pos[i] += pos[i-1]
	}
	grouped := slices.Grow(w.sgroup[:0], len(refs))[:len(refs)]
	w.sgroup = grouped
	next := slices.Clone(pos[:len(kids)])
	for _, r := range refs {
		k := rank[r.kid]
		grouped[next[k]] = r
		next[k]++
	}
	// The windows are combined in scratch slots appended past the slot
	// table, one after another in output-building order (see scratchSlot),
	// and dropped by truncating it once built.
	base := len(w.slots)
	defer w.dropScratch(base)
	var out []int32
	for i, kid := range kids {
		run := grouped[pos[i]:pos[i+1]]
		sortRefsByStart(run)
		// The windows of these slices that close now, by ascending start:
		// every window holding one of the slices starts in
		// (first start - size, last start]; skip those that had closed
		// before, take the closed ones that hold a slice, stop at the first
		// still open (window ends grow with starts).
		pmin, pmax := run[0].start, run[len(run)-1].start
		if pmin < math.MinInt64+w.size {
			out = w.slidingWindowsFallback(kid, run, closedBefore, out)
			continue
		}
		lo := 0
		for s := pmin - w.size + w.slide; s <= pmax; s += w.slide {
			e := satAdd(s, w.size)
			if closedBefore(e) {
				continue
			}
			if !w.closed(e) {
				break
			}
			for lo < len(run) && run[lo].start < s {
				lo++
			}
			if lo == len(run) || run[lo].start >= e {
				continue // no slice of the key in this window
			}
			out = append(out, w.mergeSlices(kid, s, e, run[lo:]))
		}
	}
	// out is in key order, each key's windows by start; every window has
	// length size, so ordering it stably by start gives the output order
	// (start, key bytes, end) without comparing keys again.
	out = w.stableByStart(out)
	var rec arrow.RecordBatch
	if len(out) > 0 {
		var err error
		if rec, err = w.build(w.output, out, outputRows); err != nil {
			return nil, fmt.Errorf("window %s: advance to %d: %w", w.id, wm, err)
		}
	}
	// Drop the slices whose last window is closed (after build: dropping
	// may release their keys).
	for _, r := range refs {
		if w.closed(satAdd(r.start, w.size)) {
			w.killSlot(r.slot)
			w.freeSlot(r.slot)
		}
	}
	return rec, nil
}

// sliceRef is a closed slice of advanceSliding.
type sliceRef struct {
	start     int64
	slot, kid int32
}

// rankScratch returns a per-key scratch slice of n entries, all -1.
func (w *Window) rankScratch(n int) []int32 {
	w.rank = slices.Grow(w.rank[:0], n)[:n]
	for i := range w.rank {
		w.rank[i] = -1
	}
	return w.rank
}

// sortRefsByStart sorts a key's slices by start (starts are distinct): an
// insertion sort for the usual few, pdqsort past that.
func sortRefsByStart(run []sliceRef) {
	if len(run) > 16 {
		slices.SortFunc(run, func(a, b sliceRef) int { return cmpInt64(a.start, b.start) })
		return
	}
	for i := 1; i < len(run); i++ {
		for j := i; j > 0 && run[j].start < run[j-1].start; j-- {
			run[j], run[j-1] = run[j-1], run[j]
		}
	}
}

// mergeSlices builds window [s, e) of kid from its slices run (sorted by
// start, the first at or after s) in a scratch slot.
func (w *Window) mergeSlices(kid int32, s, e int64, run []sliceRef) int32 {
	r := w.scratchSlot(kid, s, e)
	for _, p := range run {
		if p.start >= e {
			break
		}
		for _, a := range w.aggs {
			a.merge(r, p.slot)
		}
	}
	return r
}

// slidingWindowsFallback is the per-slice search for the windows closing
// now, for slices so close to the smallest time that a window start before
// them does not fit an int64: for each slice, going back from the window
// starting at it, skip the open ones, take the closed ones, stop at the
// first that had closed before.
func (w *Window) slidingWindowsFallback(kid int32, run []sliceRef, closedBefore func(int64) bool, out []int32) []int32 {
	var starts []int64
	for _, p := range run {
		ps := p.start
		low := int64(math.MinInt64) // ps - size, which may not fit
		if ps >= math.MinInt64+w.size {
			low = ps - w.size
		}
		for s := ps; s > low; s -= w.slide {
			e := satAdd(s, w.size)
			if !w.closed(e) {
				continue
			}
			if closedBefore(e) {
				break
			}
			starts = append(starts, s)
			if s < math.MinInt64+w.slide {
				break
			}
		}
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)
	lo := 0
	for _, s := range starts {
		for lo < len(run) && run[lo].start < s {
			lo++
		}
		out = append(out, w.mergeSlices(kid, s, satAdd(s, w.size), run[lo:]))
	}
	return out
}

// stableByStart orders slots by start, keeping the order of slots with the
// same start (a counting sort over the distinct starts, usually one).
func (w *Window) stableByStart(slots []int32) []int32 {
	var ds []int64
	for _, s := range slots {
		if st := w.slots[s].start; len(ds) == 0 || ds[len(ds)-1] != st {
			ds = append(ds, st)
		}
	}
	slices.Sort(ds)
	ds = slices.Compact(ds)
	if len(ds) < 2 {
		return slots
	}
	pos := make([]int, len(ds)+1)
	idx := func(s int32) int {
		i, _ := slices.BinarySearch(ds, w.slots[s].start)
		return i
	}
	for _, s := range slots {
		pos[idx(s)+1]++
	}
	for i := 1; i < len(pos); i++ {
		pos[i] += pos[i-1]
	}
	sorted := make([]int32, len(slots))
	for _, s := range slots {
		i := idx(s)
		sorted[pos[i]] = s
		pos[i]++
	}
	return sorted
}

// scratchSlot returns an empty slot holding window [start, end) of kid
// outside the indexes (not live, not tracked), appended past the slot table:
// Advance combines slices into it, builds its output row, and then drops
// every scratch slot at once (dropScratch). Appending, rather than reusing
// freed slots scattered over the table, keeps the windows' accumulators in
// the order the output reads them.
func (w *Window) scratchSlot(kid int32, start, end int64) int32 {
	s := int32(len(w.slots))
	w.slots = append(w.slots, slotInfo{kid: kid, start: start, end: end, next: -1, prev: -1})
	if n := len(w.slots); n > w.aggLen {
		w.aggLen = n + n/4 + 1024 // in steps: a grow per window would cost a call per accumulator
		for _, a := range w.aggs {
			a.grow(w.aggLen)
		}
	}
	return s
}

// dropScratch empties the scratch slots from base on (scratchSlot) and
// truncates the slot table back to base.
func (w *Window) dropScratch(base int) {
	for s := base; s < len(w.slots); s++ {
		for _, a := range w.aggs {
			a.reset(int32(s))
		}
	}
	w.slots = w.slots[:base]
}
