package dataflow

import (
	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/spec"
)

// A filter stage keeps the rows its predicate holds for.
func init() {
	register(&kind{
		name: spec.KindFilter,
		compile: func(c *stageCompile) error {
			in := c.in(0)
			e, err := expr.CompileFilter(c.st.Filter.Expr, in, c.xo...)
			if err != nil {
				return err
			}
			c.n.Stage, c.n.Out = &stage{id: c.n.Name, Filter: e, out: in}, in
			return nil
		},
		needs: func(c *needsCtx) {
			for col := range c.out {
				c.ins[0][col] = true
			}
			c.ins[0].addAll(c.n.Stage.Filter.Columns()...)
		},
		copies: identity,
	})
}
