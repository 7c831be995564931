package expr

import (
	"fmt"

	"github.com/expr-lang/expr/ast"
)

// caseNode is SQL's searched CASE: per row, the value of the first branch
// whose condition is true; a false or null condition falls through; rows no
// condition takes get els (null when els is nil). Every condition and value
// is evaluated over the whole batch (no kernel fails on a row, so this is only
// a cost), then rows are picked branch by branch.
type caseNode struct {
	conds []node // bool
	vals  []node // one per condition, of type t
	els   node   // of type t, or nil
	t     typ
}

func (c *caseNode) typ() typ { return c.t }

func (c *caseNode) eval(e *env) (*vec, error) {
	conds := make([]*vec, len(c.conds))
	vals := make([]*vec, len(c.vals))
	allConst := true
	for i := range c.conds {
		cv, err := c.conds[i].eval(e)
		if err != nil {
			return nil, err
		}
		vv, err := c.vals[i].eval(e)
		if err != nil {
			return nil, err
		}
		conds[i], vals[i] = cv, vv
		allConst = allConst && cv.isConst && vv.isConst
	}
	var els *vec
	if c.els != nil {
		v, err := c.els.eval(e)
		if err != nil {
			return nil, err
		}
		els = v
		allConst = allConst && v.isConst
	}
	ln := e.n
	if allConst {
		ln = 1
	}
	out := newVec(c.t, ln, allConst)
	valid := make([]bool, ln)
	pending := make([]bool, ln)
	fill(pending, true)
	left := ln
	for i, cv := range conds {
		if left == 0 {
			break
		}
		if cv.isNullConst() || (cv.isConst && !cv.b[0]) {
			continue
		}
		left -= pickRows(out, valid, pending, cv, vals[i])
	}
	if els != nil && left > 0 {
		pickRows(out, valid, pending, nil, els)
	}
	for _, ok := range valid {
		if !ok {
			out.valid = valid
			break
		}
	}
	return out, nil
}

// pickRows copies into out the rows of v that are pending and where cond is
// true (every pending row when cond is nil), marks them done and their
// validity, and returns how many it took.
func pickRows(out *vec, valid, pending []bool, cond, v *vec) int {
	var cb []bool
	sc := 0
	if cond != nil {
		cb, sc = cond.b, stride(cond.isConst)
		if cond.valid != nil {
			cb = make([]bool, len(cond.b))
			for i, ok := range cond.valid {
				cb[i] = ok && cond.b[i]
			}
		}
	}
	sv := stride(v.isConst)
	nullv := v.t.k == kNull || v.isNullConst()
	taken := 0
	for i, p := range pending {
		if !p || (cb != nil && !cb[i*sc]) {
			continue
		}
		pending[i] = false
		taken++
		j := i * sv
		if nullv || !v.validAt(j) {
			continue
		}
		valid[i] = true
		switch out.t.k {
		case kBool:
			out.b[i] = v.b[j]
		case kInt, kTimestamp:
			out.i[i] = v.i[j]
		case kFloat:
			out.f[i] = v.f[j]
		case kString:
			out.s[i] = v.str()[j]
		}
	}
	return taken
}

// conditional compiles `c ? a : b` and `if c { a } else { b }`.
func (c *compiler) conditional(n *ast.ConditionalNode) (node, error) {
	what := "?:"
	if !n.Ternary {
		what = "if/else"
	}
	cond, err := c.build(n.Cond)
	if err != nil {
		return nil, err
	}
	if cond, err = c.expect(n.Cond, cond, tBool, "the condition of "+what); err != nil {
		return nil, err
	}
	a, err := c.build(n.Exp1)
	if err != nil {
		return nil, err
	}
	b, err := c.build(n.Exp2)
	if err != nil {
		return nil, err
	}
	return c.caseOf(n, what, []node{cond}, []node{a}, b, []ast.Node{n.Exp1, n.Exp2})
}

// caseOf unifies the branch values and builds a caseNode, dropping branches
// whose condition is a constant false or null and ending at a constant true.
// at names the values for errors.
func (c *compiler) caseOf(n ast.Node, what string, conds, vals []node, els node, at []ast.Node) (node, error) {
	t := tNull
	all := append(append([]node{}, vals...), els)
	for i, v := range all {
		if v == nil {
			continue
		}
		u, ok := commonType(t, v.typ())
		if !ok {
			return nil, c.errAt(at[i], "the values of %s have no common type: %s and %s (int64 and float64 meet at float64; timestamps at the finer unit)", what, t, v.typ())
		}
		t = u
	}
	for i, v := range all {
		if v == nil {
			continue
		}
		y, err := c.castTo(at[i], v, t)
		if err != nil {
			return nil, err
		}
		all[i] = y
	}
	vals, els = all[:len(vals)], all[len(vals)]
	out := &caseNode{t: t, els: els}
	for i, cond := range conds {
		if k, ok := cond.(*constNode); ok {
			if k.v.isNullConst() || !k.v.b[0] {
				continue // never taken
			}
			out.els = vals[i] // always taken: later branches are dead
			break
		}
		out.conds = append(out.conds, cond)
		out.vals = append(out.vals, vals[i])
	}
	if len(out.conds) == 0 {
		if out.els == nil {
			return &constNode{v: nullConst(t)}, nil
		}
		return out.els, nil
	}
	inputs := append(append([]node{}, out.conds...), out.vals...)
	if out.els != nil {
		inputs = append(inputs, out.els)
	}
	return c.done(n, out, inputs...)
}

// caseFunc compiles case(cond1, v1, cond2, v2, ..., [else]).
func (c *compiler) caseFunc(n ast.Node, xs []node, args []ast.Node) (node, error) {
	if len(xs) < 2 {
		return nil, c.errAt(n, "case() takes condition, value pairs and an optional else value: case(c1, v1, c2, v2, ..., else); got %d argument(s)", len(xs))
	}
	var conds, vals []node
	var at []ast.Node
	for i := 0; i+1 < len(xs); i += 2 {
		cond, err := c.expect(args[i], xs[i], tBool, fmt.Sprintf("case() argument %d (condition %d)", i+1, i/2+1))
		if err != nil {
			return nil, err
		}
		conds, vals = append(conds, cond), append(vals, xs[i+1])
		at = append(at, args[i+1])
	}
	var els node
	if len(xs)%2 == 1 {
		els = xs[len(xs)-1]
	}
	return c.caseOf(n, "case()", conds, vals, els, append(at, args[len(args)-1]))
}

// letNode evaluates value once into its slot, then body.
type letNode struct {
	slot  int
	value node
	body  node
}

func (l *letNode) typ() typ { return l.body.typ() }

func (l *letNode) eval(e *env) (*vec, error) {
	v, err := l.value.eval(e)
	if err != nil {
		return nil, err
	}
	e.vars[l.slot] = v
	return l.body.eval(e)
}

// varNode reads a let variable bound by an enclosing letNode.
type varNode struct {
	slot int
	t    typ
}

func (v *varNode) typ() typ                  { return v.t }
func (v *varNode) eval(e *env) (*vec, error) { return e.vars[v.slot], nil }

// let compiles `let name = value; body`. The name shadows a column of the
// same name inside body ($env["name"] still reads the column).
func (c *compiler) let(n *ast.VariableDeclaratorNode) (node, error) {
	value, err := c.build(n.Value)
	if err != nil {
		return nil, err
	}
	outer := c.scope
	c.scope = make(map[string]node, len(outer)+1)
	for k, v := range outer {
		c.scope[k] = v
	}
	defer func() { c.scope = outer }()
	if _, ok := value.(*constNode); ok {
		c.scope[n.Name] = value
		return c.build(n.Expr)
	}
	slot := c.nvars
	c.nvars++
	c.scope[n.Name] = &varNode{slot: slot, t: value.typ()}
	body, err := c.build(n.Expr)
	if err != nil {
		return nil, err
	}
	if _, ok := body.(*constNode); ok {
		return body, nil
	}
	return &letNode{slot: slot, value: value, body: body}, nil
}
