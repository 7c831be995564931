package dataflow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// An over stage adds to each row aggregates over it and the rows of its key
// before it (operators.Over). Its input is narrowed by the pruned compile;
// ties in time are ordered by arrival.
func init() {
	register(&kind{
		name: spec.KindOver, stateful: true, narrows: true,
		compile: func(c *stageCompile) error {
			n, ov := c.n, c.st.Over
			os := operators.OverSpec{ID: n.Name, Keys: ov.Keys, EventTime: ov.OrderBy, Rows: ov.Rows, AllowedLateness: ov.AllowedLateness}
			os.EventTime = c.timeOr(os.EventTime, 0)
			for _, a := range ov.Aggregates {
				as, err := operators.ParseAggregate(a.Name, fmt.Sprintf("%s(%s)", a.Func, a.Column))
				if err != nil {
					return err
				}
				os.Aggregates = append(os.Aggregates, as)
			}
			in, k := c.in(0), c.k
			return c.keyed(func() (operators.Stateful, error) { return operators.NewOver(os, in, k) })
		},
		needs: func(c *needsCtx) {
			o := c.st.Over
			cols := append(slices.Clone(o.Keys), c.timeOr(o.OrderBy, 0))
			for _, a := range o.Aggregates {
				cols = append(cols, a.Column)
			}
			c.holds(cols...)
		},
		orderSensitive: func(*spec.Stage) bool { return true },
		held: func(st *spec.Stage) *HeldRows {
			ident := []string{operators.ColOverPending, operators.ColOverTime}
			return &HeldRows{Keys: slices.Clone(st.Over.Keys), Seq: operators.ColOverSeq, Ident: ident, Sort: ident}
		},
		header: func(st *spec.Stage) string {
			o := st.Over
			aggs := make([]string, len(o.Aggregates))
			for i, a := range o.Aggregates {
				aggs[i] = a.Name + "=" + a.String()
			}
			order := o.OrderBy
			if order == "" {
				order = "the input's event time"
			}
			return fmt.Sprintf("over rows %d preceding by %s, %s, allowed lateness %s", o.Rows, order, strings.Join(aggs, " "), o.AllowedLateness)
		},
	})
}
