package dataflow

import (
	"strings"

	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/spec"
)

// A project stage computes its columns from each row; a pruned compile
// computes only the items its consumers read (keepOut).
func init() {
	register(&kind{
		name: spec.KindProject,
		compile: func(c *stageCompile) error {
			items := make([]expr.ProjectItem, 0, len(c.st.Project.Columns))
			for _, col := range c.st.Project.Columns {
				items = append(items, expr.ProjectItem{Name: col.Name, Expr: col.Expr})
			}
			if kept := keptItems(items, c.n.keepOut); len(kept) > 0 {
				items = kept // a pruned compile: only the items read
			}
			pr, err := expr.CompileProjection(items, c.in(0), c.xo...)
			if err != nil {
				return err
			}
			c.n.Stage, c.n.Out = &stage{id: c.n.Name, proj: pr, out: pr.Schema()}, pr.Schema()
			return nil
		},
		needs: func(c *needsCtx) {
			in0 := c.n.Ins[0].Out
			for _, col := range c.st.Project.Columns {
				if col.Expr == "*" {
					c.passthrough(0)
					continue
				}
				name := col.Name
				if name == "" {
					name = strings.TrimSpace(col.Expr)
				}
				if !c.out[name] {
					continue
				}
				pr, err := expr.CompileProjection([]expr.ProjectItem{{Name: col.Name, Expr: col.Expr}}, in0, c.xo...)
				if err != nil {
					c.ins[0].addSchema(in0) // compiled whole, so cannot happen; read everything
					continue
				}
				c.ins[0].addAll(pr.Columns()...)
			}
		},
		copies: func(st *spec.Stage, col string) string { return projectedFrom(st.Project, col) },
	})
}
