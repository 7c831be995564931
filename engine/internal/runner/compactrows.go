package runner

import "github.com/floe-dev/floe/operators"

// Compaction policy of operators.RowCounted operators (dedup, join, top_n,
// over): every subtask of the operator that writes state this epoch writes
// a new base when one of them has maxDeltas deltas, or when, over those
// subtasks, the rows their committed files and this epoch's delta would
// hold exceed 1.5 times the rows they hold (the dead rows and tombstones
// are more than half the live rows: a restore would read that much more
// than the state). A subtask without a base writes one. Rows a delta adds
// for new keys make nothing dead, so state that grows by new keys (the
// usual shape of a dedup or a join) is written as deltas of what is new,
// where CompactPlan, which counts changed rows and delta bytes, rewrote it
// whole each time an epoch's new rows reached half the base.
func CompactPlanRows(prev []SubState, writes func(s int) bool, size func(s int) (delta, live int64)) []bool {
	full := make([]bool, len(prev))
	var files, live int64
	all := false
	for s, st := range prev {
		if !writes(s) {
			continue
		}
		if st.Base.Path == "" {
			full[s] = true
		}
		if len(st.Deltas) >= maxDeltas {
			all = true
		}
		files += st.Base.Rows
		for _, d := range st.Deltas {
			files += d.Rows
		}
		d, l := size(s)
		files += d
		live += l
	}
	if all || 2*files > 3*live {
		for s := range full {
			full[s] = writes(s)
		}
	}
	return full
}

// rowCounted reports whether op's compaction follows CompactPlanRows.
func rowCounted(op operators.Stateful) bool {
	_, ok := op.(operators.RowCounted)
	return ok
}

// deltaRows is CompactPlanRows's size of a subtask: the rows its delta
// would write, and the rows it holds (pending: base rows restored but not
// decoded yet).
func deltaRows(sub operators.Stateful, pending int64) (delta, live int64) {
	c, rm := sub.Dirty()
	return int64(c + rm), int64(sub.Len()) + pending
}
