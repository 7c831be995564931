package dataflow

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// A lookup stage enriches each row with the matching row of a table read
// from files (operators.Lookup): stateless, the table is loaded per run
// (lookupNode).
func init() {
	register(&kind{
		name: spec.KindLookup,
		compile: func(c *stageCompile) error {
			n, l := c.n, c.st.Lookup
			ls := operators.LookupSpec{ID: n.Name, Type: operators.InnerJoin, StreamKeys: l.LeftKeys, TableKeys: l.RightKeys, RightPrefix: l.RightPrefix}
			if l.Type == spec.JoinLeft {
				ls.Type = operators.LeftJoin
			}
			tsch := c.lookups[n.Name]
			if tsch == nil {
				return fmt.Errorf("the table's schema is unknown (declare lookup.schema, or put a Parquet file under %s)", store.Redact(l.URL))
			}
			empty := array.NewRecordBatch(tsch, emptyColumns(tsch), 0)
			op, err := operators.NewLookup(ls, c.in(0), []arrow.RecordBatch{empty})
			empty.Release()
			if err != nil {
				return err
			}
			n.Out = op.OutputSchema()
			n.Lookup = &lookupNode{Spec: ls, Cfg: l, Table: tsch}
			return nil
		},
		needs: func(c *needsCtx) {
			l := c.st.Lookup
			c.ins[0].addAll(l.LeftKeys...)
			prefix := l.RightPrefix
			if prefix == "" {
				prefix = operators.DefaultRightPrefix
			}
			var table *arrow.Schema
			if c.n.Lookup != nil {
				table = c.n.Lookup.Table
			}
			sideNeeds(c.n.Ins[0].Out, table, prefix, c.out, c.ins[0], colSet{})
		},
		copies: identity,
	})
}
