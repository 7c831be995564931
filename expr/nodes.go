package expr

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// node is a type-checked expression. eval returns a constant vec exactly when
// every input of the node is constant (so constant folding is eval with n = 1).
type node interface {
	typ() typ
	eval(e *env) (*vec, error)
}

// env is the evaluation of one record batch: n rows, columns loaded once.
type env struct {
	rec  arrow.RecordBatch
	n    int
	cols map[int]*vec
	vars []*vec // values of let variables, by slot
}

// plen is the physical length of v: 1 for a constant, else n.
func (e *env) plen(v *vec) int {
	if v.isConst {
		return 1
	}
	return e.n
}

// plen2 is the physical length of a result of two operands.
func (e *env) plen2(a, b *vec) int {
	if a.isConst && b.isConst {
		return 1
	}
	return e.n
}

type colNode struct {
	idx  int
	name string
	t    typ
	dt   arrow.DataType
}

func (c *colNode) typ() typ { return c.t }

func (c *colNode) eval(e *env) (*vec, error) {
	if v, ok := e.cols[c.idx]; ok {
		return v, nil
	}
	v, err := loadColumn(e.rec.Column(c.idx), c.t)
	if err != nil {
		return nil, fmt.Errorf("column %q: %w", c.name, err)
	}
	e.cols[c.idx] = v
	return v, nil
}

type constNode struct{ v *vec }

func (c *constNode) typ() typ                { return c.v.t }
func (c *constNode) eval(*env) (*vec, error) { return c.v, nil }

// unaryNode applies a row-wise function; nulls stay null.
type unaryNode struct {
	x  node
	t  typ
	fn func(in, out *vec)
}

func (u *unaryNode) typ() typ { return u.t }

func (u *unaryNode) eval(e *env) (*vec, error) {
	x, err := u.x.eval(e)
	if err != nil {
		return nil, err
	}
	if x.isNullConst() {
		return nullConst(u.t), nil
	}
	out := newVec(u.t, e.plen(x), x.isConst)
	out.valid = x.valid
	u.fn(x, out)
	return out, nil
}

// negInt negates; -MinInt64 does not exist in int64, so that row is null.
func negInt(in, out *vec) {
	overflow := false
	for i, x := range in.i[:len(out.i)] {
		out.i[i] = -x
		overflow = overflow || x == math.MinInt64
	}
	if overflow {
		nullWhere(out, func(i int) bool { return in.i[i] == math.MinInt64 })
	}
}

func negFloat(in, out *vec) {
	for i, x := range in.f[:len(out.f)] {
		out.f[i] = -x
	}
}

func not(in, out *vec) {
	for i, x := range in.b[:len(out.b)] {
		out.b[i] = !x
	}
}

func intToFloat(in, out *vec) {
	for i, x := range in.i[:len(out.f)] {
		out.f[i] = float64(x)
	}
}

// scaleBy multiplies by f (a timestamp to a finer unit); a value outside the
// finer unit's range is null, never a wrapped time.
func scaleBy(f int64) func(in, out *vec) {
	lo, hi := math.MinInt64/f, math.MaxInt64/f
	return func(in, out *vec) {
		overflow := false
		for i, x := range in.i[:len(out.i)] {
			out.i[i] = x * f
			overflow = overflow || x < lo || x > hi
		}
		if overflow {
			nullWhere(out, func(i int) bool { return in.i[i] < lo || in.i[i] > hi })
		}
	}
}

func lower(in, out *vec) {
	for i, x := range in.str()[:len(out.s)] {
		out.s[i] = strings.ToLower(x)
	}
}

func upper(in, out *vec) {
	for i, x := range in.str()[:len(out.s)] {
		out.s[i] = strings.ToUpper(x)
	}
}

func strLen(in, out *vec) {
	for i, x := range in.str()[:len(out.i)] {
		out.i[i] = int64(utf8.RuneCountInString(x))
	}
}

func absI(in, out *vec) {
	overflow := false
	for i, x := range in.i[:len(out.i)] {
		out.i[i] = absInt(x)
		overflow = overflow || x == math.MinInt64
	}
	if overflow {
		nullWhere(out, func(i int) bool { return in.i[i] == math.MinInt64 })
	}
}

func absF(in, out *vec) {
	for i, x := range in.f[:len(out.f)] {
		out.f[i] = absFloat(x)
	}
}

// binaryNode evaluates both operands of equal type; any null operand gives null.
type binaryNode struct {
	l, r node
	t    typ
	fn   func(a, b, out *vec)
	// divides: the kernel may null rows (division by zero) and owns out.valid.
	divides bool
}

func (b *binaryNode) typ() typ { return b.t }

func (b *binaryNode) eval(e *env) (*vec, error) {
	x, err := b.l.eval(e)
	if err != nil {
		return nil, err
	}
	y, err := b.r.eval(e)
	if err != nil {
		return nil, err
	}
	if x.isNullConst() || y.isNullConst() {
		return nullConst(b.t), nil
	}
	ln := e.plen2(x, y)
	out := newVec(b.t, ln, x.isConst && y.isConst)
	out.valid = andValid(x, y, ln)
	if b.divides {
		valid := make([]bool, ln)
		if out.valid == nil {
			fill(valid, true)
		} else {
			copy(valid, out.valid)
		}
		out.valid = valid
	}
	b.fn(x, y, out)
	if b.divides {
		nulls := false
		for _, ok := range out.valid {
			nulls = nulls || !ok
		}
		if !nulls {
			out.valid = nil
		}
	}
	return out, nil
}

func cmpKernel(k kind, op cmpOp) func(a, b, out *vec) {
	switch k {
	case kInt, kTimestamp:
		return func(a, b, out *vec) { compare(op, a.i, a.isConst, b.i, b.isConst, out.b) }
	case kFloat:
		return func(a, b, out *vec) { compare(op, a.f, a.isConst, b.f, b.isConst, out.b) }
	case kString:
		return func(a, b, out *vec) { compareStrings(op, a, b, out.b) }
	default: // kBool, == and != only
		return func(a, b, out *vec) { compareBool(op, a.b, a.isConst, b.b, b.isConst, out.b) }
	}
}

func arithKernel(k kind, op string) func(a, b, out *vec) {
	switch {
	case op == "/":
		return func(a, b, out *vec) { divide('/', a.f, a.isConst, b.f, b.isConst, out.f, out.valid) }
	case op == "%", op == "//":
		return func(a, b, out *vec) { divide(op[0], a.i, a.isConst, b.i, b.isConst, out.i, out.valid) }
	case k == kInt:
		return func(a, b, out *vec) {
			if arithInt(op[0], a.i, a.isConst, b.i, b.isConst, out.i) {
				nullOverflows(op[0], a, b, out)
			}
		}
	case k == kFloat:
		return func(a, b, out *vec) { arith(op[0], a.f, a.isConst, b.f, b.isConst, out.f) }
	default: // string concatenation
		return func(a, b, out *vec) {
			sa, sb := stride(a.isConst), stride(b.isConst)
			as, bs := a.str(), b.str()
			for i := range out.s {
				if out.validAt(i) {
					out.s[i] = as[i*sa] + bs[i*sb]
				}
			}
		}
	}
}

// strPredKernel implements contains, startsWith, endsWith and matches.
func strPredKernel(op string, re *rx) func(a, b, out *vec) {
	var fn func(s, t string) bool
	switch op {
	case "contains":
		fn = strings.Contains
	case "startsWith":
		fn = strings.HasPrefix
	case "endsWith":
		fn = strings.HasSuffix
	case "matches":
		fn = func(s, _ string) bool { return re.MatchString(s) }
	}
	return func(a, b, out *vec) {
		sa, sb := stride(a.isConst), stride(b.isConst)
		as, bs := a.str(), b.str()
		for i := range out.b {
			out.b[i] = fn(as[i*sa], bs[i*sb])
		}
	}
}

type logicNode struct {
	isAnd bool
	l, r  node
}

func (l *logicNode) typ() typ { return tBool }

func (l *logicNode) eval(e *env) (*vec, error) {
	x, err := l.l.eval(e)
	if err != nil {
		return nil, err
	}
	y, err := l.r.eval(e)
	if err != nil {
		return nil, err
	}
	return logic(l.isAnd, x, y, e.plen2(x, y)), nil
}

// inNode tests membership in a constant list. SQL semantics: a null operand
// gives null, and so does a miss when the list contains nil.
type inNode struct {
	x       node
	ints    map[int64]struct{}
	floats  map[float64]struct{}
	strs    map[string]struct{}
	bools   [2]bool // bools[0]: false in list, bools[1]: true in list
	hasNull bool
}

func (n *inNode) typ() typ { return tBool }

func (n *inNode) eval(e *env) (*vec, error) {
	x, err := n.x.eval(e)
	if err != nil {
		return nil, err
	}
	if x.isNullConst() {
		return nullConst(tBool), nil
	}
	ln := e.plen(x)
	out := newVec(tBool, ln, x.isConst)
	switch x.t.k {
	case kInt, kTimestamp:
		member(x.i[:ln], n.ints, out.b)
	case kFloat:
		member(x.f[:ln], n.floats, out.b)
	case kString:
		if x.off32 != nil {
			memberRaw(x.off32, x.data, n.strs, out.b)
		} else {
			member(x.str()[:ln], n.strs, out.b)
		}
	case kBool:
		for i, v := range x.b[:ln] {
			out.b[i] = n.bools[b2u(v)]
		}
	}
	out.valid = x.valid
	if n.hasNull {
		valid := make([]bool, ln)
		for i, hit := range out.b {
			valid[i] = hit && x.validAt(i)
		}
		out.valid = valid
	}
	return out, nil
}

func memberRaw(offs []int32, data []byte, set map[string]struct{}, out []bool) {
	for i := range out {
		_, out[i] = set[string(data[offs[i]:offs[i+1]])]
	}
}

func member[T comparable](xs []T, set map[T]struct{}, out []bool) {
	for i, x := range xs {
		_, out[i] = set[x]
	}
}

// isNullNode is never null itself.
type isNullNode struct{ x node }

func (n *isNullNode) typ() typ { return tBool }

func (n *isNullNode) eval(e *env) (*vec, error) {
	x, err := n.x.eval(e)
	if err != nil {
		return nil, err
	}
	ln := e.plen(x)
	out := newVec(tBool, ln, x.isConst)
	if x.t.k == kNull {
		fill(out.b, true)
		return out, nil
	}
	if x.valid != nil {
		for i, ok := range x.valid[:ln] {
			out.b[i] = !ok
		}
	}
	return out, nil
}

// coalesceNode returns, per row, the first non-null argument.
type coalesceNode struct {
	args []node
	t    typ
}

func (c *coalesceNode) typ() typ { return c.t }

func (c *coalesceNode) eval(e *env) (*vec, error) {
	vs := make([]*vec, 0, len(c.args))
	allConst := true
	for _, a := range c.args {
		v, err := a.eval(e)
		if err != nil {
			return nil, err
		}
		if v.isNullConst() {
			continue
		}
		vs = append(vs, v)
		allConst = allConst && v.isConst
		if v.valid == nil {
			break // no later argument is ever used
		}
	}
	if len(vs) == 0 {
		return nullConst(c.t), nil
	}
	if len(vs) == 1 {
		return vs[0], nil
	}
	ln := e.n
	if allConst {
		ln = 1
	}
	out := newVec(c.t, ln, allConst)
	valid := make([]bool, ln)
	nulls := false
	for i := 0; i < ln; i++ {
		for _, v := range vs {
			j := i * stride(v.isConst)
			if !v.validAt(j) {
				continue
			}
			valid[i] = true
			switch c.t.k {
			case kBool:
				out.b[i] = v.b[j]
			case kInt, kTimestamp:
				out.i[i] = v.i[j]
			case kFloat:
				out.f[i] = v.f[j]
			case kString:
				out.s[i] = v.str()[j]
			}
			break
		}
		nulls = nulls || !valid[i]
	}
	if nulls {
		out.valid = valid
	}
	return out, nil
}
