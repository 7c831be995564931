package dataflow

import (
	"fmt"
	"slices"

	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// A dedup stage drops the rows of a key within a time bound of its first
// (operators.Dedup). Its input is narrowed by the pruned compile; which
// duplicate it keeps depends on the arrival order of ties.
func init() {
	register(&kind{
		name: spec.KindDedup, stateful: true, narrows: true,
		compile: func(c *stageCompile) error {
			n, d := c.n, c.st.Dedup
			ds := operators.DedupSpec{ID: n.Name, Keys: d.Keys, EventTime: d.EventTime, Keep: operators.KeepFirst, Within: d.Within, AllowedLateness: d.AllowedLateness}
			if d.Keep == spec.KeepLast {
				ds.Keep = operators.KeepLast
			}
			ds.EventTime = c.timeOr(ds.EventTime, 0)
			in, k := c.in(0), c.k
			return c.keyed(func() (operators.Stateful, error) { return operators.NewDedup(ds, in, k) })
		},
		needs: func(c *needsCtx) {
			d := c.st.Dedup
			c.holds(append(slices.Clone(d.Keys), c.timeOr(d.EventTime, 0))...)
		},
		orderSensitive: func(*spec.Stage) bool { return true },
		held: func(st *spec.Stage) *HeldRows {
			return &HeldRows{Keys: slices.Clone(st.Dedup.Keys), Seq: operators.ColDedupSeq,
				Ident: []string{operators.ColDedupPending, operators.ColDedupTime}, Sort: []string{operators.ColDedupTime, operators.ColDedupPending}}
		},
		header: func(st *spec.Stage) string {
			d := st.Dedup
			keep := spec.KeepFirst
			if d.Keep == spec.KeepLast {
				keep = spec.KeepLast
			}
			return fmt.Sprintf("dedup keep %s within %s, allowed lateness %s", keep, d.Within, d.AllowedLateness)
		},
	})
}
