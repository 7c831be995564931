package operators

import (
	"fmt"
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
	// closed first windows: collect those slices and their keys, and sort
	// the keys by their bytes (the output order); each key's slices come
	// from its open-slot list.
	var sl, kids []int32
	for s := range w.slots {
		if info := &w.slots[s]; info.live && w.closed(info.end) {
			sl = append(sl, int32(s))
			if ki := &w.keys[info.kid]; !ki.mark {
				ki.mark = true
				kids = append(kids, info.kid)
			}
		}
	}
	if len(sl) == 0 {
		return nil, nil
	}
	w.sortKeys(kids)
	var starts []int64
	var out, run []int32
	for _, kid := range kids {
		w.keys[kid].mark = false
		run = run[:0]
		for p := w.keys[kid].head; p >= 0; p = w.slots[p].next {
			if w.closed(w.slots[p].end) {
				run = append(run, p)
			}
		}
		w.sortByStart(run)
		// The windows of these slices that close now: for each slice, going
		// back from the window starting at it, skip the open ones, take the
		// closed ones, stop at the first that had closed before.
		starts = starts[:0]
		for _, p := range run {
			ps := w.slots[p].start
			for s := ps; s > ps-w.size; s -= w.slide {
				e := satAdd(s, w.size)
				if !w.closed(e) {
					continue
				}
				if closedBefore(e) {
					break
				}
				starts = append(starts, s)
			}
		}
		slices.Sort(starts)
		starts = slices.Compact(starts)
		lo := 0
		for _, s := range starts {
			e := satAdd(s, w.size)
			for lo < len(run) && w.slots[run[lo]].start < s {
				lo++
			}
			r := w.scratchSlot(kid, s, e)
			for _, p := range run[lo:] {
				if w.slots[p].start >= e {
					break
				}
				for _, a := range w.aggs {
					a.merge(r, p)
				}
			}
			out = append(out, r)
		}
	}
	// out is in key order, each key's windows by start; every window has
	// length size, so ordering it stably by start gives the output order
	// (start, key bytes, end) without comparing keys again.
	out = w.stableByStart(out)
	var rec arrow.RecordBatch
	if len(out) > 0 {
		var err error
		if rec, err = w.build(w.output, out, false); err != nil {
			for _, r := range out {
				w.freeSlot(r)
			}
			return nil, fmt.Errorf("window %s: advance to %d: %w", w.id, wm, err)
		}
	}
	for _, r := range out {
		w.freeSlot(r)
	}
	// Drop the slices whose last window is closed (after build: dropping
	// may release their keys).
	for _, p := range sl {
		if w.closed(satAdd(w.slots[p].start, w.size)) {
			w.killSlot(p)
			w.freeSlot(p)
		}
	}
	return rec, nil
}

// sortByStart sorts a key's slices by start (starts are distinct): an
// insertion sort for the usual few, pdqsort past that.
func (w *Window) sortByStart(run []int32) {
	if len(run) > 16 {
		slices.SortFunc(run, func(a, b int32) int { return cmpInt64(w.slots[a].start, w.slots[b].start) })
		return
	}
	for i := 1; i < len(run); i++ {
		for j := i; j > 0 && w.slots[run[j]].start < w.slots[run[j-1]].start; j-- {
			run[j], run[j-1] = run[j-1], run[j]
		}
	}
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
// outside the indexes (not live, not tracked): Advance combines slices into
// it, builds its output row and frees it.
func (w *Window) scratchSlot(kid int32, start, end int64) int32 {
	info := slotInfo{kid: kid, start: start, end: end, next: -1}
	var s int32
	if n := len(w.freeSlots); n > 0 {
		s = w.freeSlots[n-1]
		w.freeSlots = w.freeSlots[:n-1]
		info.listed = w.slots[s].listed
		w.slots[s] = info
	} else {
		s = int32(len(w.slots))
		w.slots = append(w.slots, info)
	}
	for _, a := range w.aggs {
		a.grow(len(w.slots))
	}
	return s
}
