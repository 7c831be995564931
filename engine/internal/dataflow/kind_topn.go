package dataflow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// A top_n stage keeps the first n rows by its order per key and window
// (operators.TopN): of its input's windows, or of its own tumbling ones.
// Its input is narrowed by the pruned compile; ties are broken by arrival.
func init() {
	register(&kind{
		name: spec.KindTopN, stateful: true, narrows: true,
		compile: func(c *stageCompile) error {
			n, t := c.n, c.st.TopN
			ts := operators.TopNSpec{ID: n.Name, N: t.N, Keys: t.Keys, Size: t.Tumbling, AllowedLateness: t.AllowedLateness, RankColumn: t.RankColumn}
			for _, o := range t.OrderBy {
				ts.OrderBy = append(ts.OrderBy, operators.OrderSpec{Column: o.Column, Desc: o.Desc, NullsFirst: o.NullsFirst})
			}
			if t.Tumbling > 0 {
				ts.EventTime = c.timeOr(t.EventTime, 0)
				if prod, renamed, ok := windowEndAlias(n.Ins[0], ts.EventTime); ok {
					return offByOneWindow("event_time", ts.EventTime, prod, renamed)
				}
			}
			in, k := c.in(0), c.k
			return c.keyed(func() (operators.Stateful, error) { return operators.NewTopN(ts, in, k) })
		},
		needs: func(c *needsCtx) {
			t := c.st.TopN
			cols := slices.Clone(t.Keys)
			for _, o := range t.OrderBy {
				cols = append(cols, o.Column)
			}
			if t.Tumbling > 0 {
				cols = append(cols, c.timeOr(t.EventTime, 0))
			}
			c.holds(cols...)
		},
		orderSensitive: func(*spec.Stage) bool { return true },
		held: func(st *spec.Stage) *HeldRows {
			ident := []string{"window_start", "window_end", ColTopNRank}
			return &HeldRows{Keys: slices.Clone(st.TopN.Keys), Seq: operators.ColTopNSeq, Ident: ident, Sort: ident, Rank: ColTopNRank}
		},
		header: func(st *spec.Stage) string {
			t := st.TopN
			order := make([]string, len(t.OrderBy))
			for i, o := range t.OrderBy {
				order[i] = o.String()
			}
			per := "per input window"
			if t.Tumbling > 0 {
				per = fmt.Sprintf("per tumbling %s", t.Tumbling)
			}
			return fmt.Sprintf("top_n %d by %s %s, allowed lateness %s", t.N, strings.Join(order, ", "), per, t.AllowedLateness)
		},
	})
}

// ColTopNRank is the column floe state adds to a top_n stage's rows: the
// row's rank in its group (1 = first), from the order the state keeps.
const ColTopNRank = "topn.rank"
