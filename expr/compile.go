package expr

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"

	"github.com/floe-dev/floe/internal/suggest"
)

// Error is a compile error. It names the expression, what is wrong and, when
// known, where: `filter "bytes > 'x'": cannot compare int64 with string (at 1:7)`.
type Error struct {
	Context string // what the expression is: "expression", "filter", `projection "kb"`
	Src     string // the expression text
	Line    int    // 1-based line of the offending token; 0 when unknown
	Column  int    // 1-based column (in runes) of the offending token; 0 when unknown
	Msg     string // the problem
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("%s %q: %s", e.Context, e.Src, e.Msg)
	if e.Line > 0 {
		s += fmt.Sprintf(" (at %d:%d)", e.Line, e.Column)
	}
	return s
}

// Expr is a compiled, type-checked expression over the columns of one schema.
// It is immutable and safe for concurrent use.
type Expr struct {
	src    string
	schema *arrow.Schema
	root   node           // nil for a bare column reference
	col    int            // the column of a bare column reference, else -1
	dt     arrow.DataType // result type
	used   []int          // referenced columns, ascending
	nvars  int            // let variables: slots in env.vars
}

// Compile parses src with expr-lang's parser and type-checks it against schema.
// See the package documentation for the language and its null semantics.
// Options add user-defined functions ([WithFunctions]).
func Compile(src string, schema *arrow.Schema, opts ...Option) (*Expr, error) {
	return compile("expression", src, schema, makeOptions(opts))
}

// CompileFilter is Compile for a predicate: the expression must be boolean
// (or the nil literal), and errors read `filter "...": ...`.
func CompileFilter(src string, schema *arrow.Schema, opts ...Option) (*Expr, error) {
	e, err := compile("filter", src, schema, makeOptions(opts))
	if err != nil {
		return nil, err
	}
	if id := e.dt.ID(); id != arrow.BOOL && id != arrow.NULL {
		return nil, &Error{Context: "filter", Src: src, Msg: fmt.Sprintf("must be a boolean expression, got %s", e.dt)}
	}
	return e, nil
}

// String returns the expression's source text.
func (e *Expr) String() string { return e.src }

// Type is the Arrow type of the arrays Eval returns. A bare column reference
// keeps the column's type; computed integers are int64, floats float64.
func (e *Expr) Type() arrow.DataType { return e.dt }

// Columns returns the names of the input columns the expression reads, in schema order.
func (e *Expr) Columns() []string {
	names := make([]string, len(e.used))
	for i, c := range e.used {
		names[i] = e.schema.Field(c).Name
	}
	return names
}

// Eval evaluates the expression on every row of rec and returns an array of
// Type() with rec.NumRows() rows, allocated from mem (a bare column reference
// returns the column itself, retained). The caller releases the result.
// rec must have the schema the expression was compiled against.
func (e *Expr) Eval(rec arrow.RecordBatch, mem memory.Allocator) (arrow.Array, error) {
	if err := e.check(rec); err != nil {
		return nil, err
	}
	if e.root == nil {
		col := rec.Column(e.col)
		col.Retain()
		return col, nil
	}
	v, err := e.evalVec(rec)
	if err != nil {
		return nil, err
	}
	arr, err := toArrow(v, int(rec.NumRows()), mem)
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", e.src, err)
	}
	return arr, nil
}

func (e *Expr) evalVec(rec arrow.RecordBatch) (*vec, error) {
	en := &env{rec: rec, n: int(rec.NumRows()), cols: make(map[int]*vec, len(e.used))}
	if e.nvars > 0 {
		en.vars = make([]*vec, e.nvars)
	}
	v, err := e.root.eval(en)
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", e.src, err)
	}
	return v, nil
}

// check verifies that rec has the columns the expression was compiled against.
func (e *Expr) check(rec arrow.RecordBatch) error {
	if rec == nil {
		return fmt.Errorf("expression %q: nil record batch", e.src)
	}
	got := rec.Schema()
	for _, c := range e.used {
		want := e.schema.Field(c)
		if c >= got.NumFields() {
			return fmt.Errorf("expression %q: record batch has %d columns, column %q was #%d at compile time", e.src, got.NumFields(), want.Name, c)
		}
		f := got.Field(c)
		if f.Name != want.Name || !arrow.TypeEqual(f.Type, want.Type) {
			return fmt.Errorf("expression %q: record batch column #%d is %s %s, compiled against %s %s", e.src, c, f.Name, f.Type, want.Name, want.Type)
		}
	}
	return nil
}

type compiler struct {
	ctx    string
	src    string
	schema *arrow.Schema
	used   map[int]bool
	opts   options
	scope  map[string]node // let variables in scope
	nvars  int             // let variables allocated
	intDiv map[int]bool    // rune offsets of // operators (see prepare)
}

func compile(ctx, src string, schema *arrow.Schema, opts options) (*Expr, error) {
	if schema == nil {
		return nil, &Error{Context: ctx, Src: src, Msg: "nil schema"}
	}
	prep, err := prepare(ctx, src)
	if err != nil {
		return nil, err
	}
	tree, err := parser.Parse(prep.src)
	if err != nil {
		e := &Error{Context: ctx, Src: src, Msg: err.Error()}
		var fe *file.Error
		if errors.As(err, &fe) {
			e.Msg, e.Line, e.Column = prep.parseMessage(fe.Message, fe.From), fe.Line, fe.Column+1
		}
		return nil, e
	}
	c := &compiler{ctx: ctx, src: src, schema: schema, used: map[int]bool{}, opts: opts, intDiv: prep.intDiv}
	out := &Expr{src: src, schema: schema, col: -1}
	if idx, ok, err := c.columnRef(tree.Node); err != nil {
		return nil, err
	} else if ok {
		out.col, out.dt, out.used = idx, schema.Field(idx).Type, []int{idx}
		return out, nil
	}
	root, err := c.build(tree.Node)
	if err != nil {
		return nil, err
	}
	out.root, out.dt, out.nvars = root, root.typ().arrowType(), c.nvars
	for i := range c.used {
		out.used = append(out.used, i)
	}
	sort.Ints(out.used)
	return out, nil
}

// errAt returns an Error located at n.
func (c *compiler) errAt(n ast.Node, format string, args ...any) error {
	e := &Error{Context: c.ctx, Src: c.src, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		from := n.Location().From
		e.Line, e.Column = 1, 1
		for i, r := range []rune(c.src) {
			if i == from {
				break
			}
			if r == '\n' {
				e.Line, e.Column = e.Line+1, 1
			} else {
				e.Column++
			}
		}
	}
	return e
}

// columnRef resolves an identifier or `$env["name"]` to a column index.
// ok is false when n is not a column reference at all.
func (c *compiler) columnRef(n ast.Node) (int, bool, error) {
	var name string
	switch n := n.(type) {
	case *ast.IdentifierNode:
		if n.Value == "$env" {
			return 0, false, c.errAt(n, `$env must be indexed with a column name: $env["my column"]`)
		}
		name = n.Value
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		if !ok || id.Value != "$env" {
			return 0, false, nil
		}
		s, ok := n.Property.(*ast.StringNode)
		if !ok {
			return 0, false, c.errAt(n, `$env must be indexed with a literal column name: $env["my column"]`)
		}
		name = s.Value
	default:
		return 0, false, nil
	}
	idx := c.schema.FieldIndices(name)
	switch len(idx) {
	case 0:
		return 0, false, c.errAt(n, "%s", c.unknownColumn(name))
	case 1:
		c.used[idx[0]] = true
		return idx[0], true, nil
	}
	return 0, false, c.errAt(n, "column name %q is ambiguous: the schema has it %d times", name, len(idx))
}

func (c *compiler) unknownColumn(name string) string {
	names := make([]string, c.schema.NumFields())
	best, bestD := "", 3 // suggest only close names
	for i, f := range c.schema.Fields() {
		names[i] = f.Name
		if d := suggest.Distance(strings.ToLower(name), strings.ToLower(f.Name)); d < bestD {
			best, bestD = f.Name, d
		}
	}
	msg := fmt.Sprintf("unknown column %q (columns: %s)", name, strings.Join(names, ", "))
	if best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return msg
}

// done folds n into a constant when all its inputs are constants.
func (c *compiler) done(at ast.Node, n node, inputs ...node) (node, error) {
	for _, in := range inputs {
		if _, ok := in.(*constNode); !ok {
			return n, nil
		}
	}
	v, err := n.eval(&env{n: 1})
	if err != nil {
		return nil, c.errAt(at, "%v", err)
	}
	return &constNode{v: v}, nil
}

func constOf(t typ, set func(v *vec)) node {
	v := newVec(t, 1, true)
	set(v)
	return &constNode{v: v}
}

func (c *compiler) build(n ast.Node) (node, error) {
	switch n := n.(type) {
	case *ast.NilNode:
		return &constNode{v: nullConst(tNull)}, nil
	case *ast.BoolNode:
		return constOf(tBool, func(v *vec) { v.b[0] = n.Value }), nil
	case *ast.IntegerNode:
		return constOf(tInt, func(v *vec) { v.i[0] = int64(n.Value) }), nil
	case *ast.FloatNode:
		return constOf(tFloat, func(v *vec) { v.f[0] = n.Value }), nil
	case *ast.StringNode:
		return constOf(tString, func(v *vec) { v.s[0] = n.Value }), nil
	case *ast.IdentifierNode, *ast.MemberNode:
		if id, ok := n.(*ast.IdentifierNode); ok {
			if v, ok := c.scope[id.Value]; ok {
				return v, nil
			}
		}
		idx, ok, err := c.columnRef(n)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, c.errAt(n, "field and index access (%s) is not supported; name columns directly or as $env[\"name\"]", n)
		}
		f := c.schema.Field(idx)
		t, ok := columnTyp(f.Type)
		if !ok {
			return nil, c.errAt(n, "column %q has type %s, which expressions cannot compute on (it can only be projected as is)", f.Name, f.Type)
		}
		return &colNode{idx: idx, name: f.Name, t: t, dt: f.Type}, nil
	case *ast.UnaryNode:
		return c.unary(n)
	case *ast.BinaryNode:
		return c.binary(n)
	case *ast.BuiltinNode:
		return c.call(n, n.Name, n.Arguments)
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok {
			return nil, c.errAt(n, "method calls are not supported")
		}
		return c.call(n, id.Value, n.Arguments)
	case *ast.ArrayNode:
		return nil, c.errAt(n, "a list literal is only allowed on the right of in")
	case *ast.ConditionalNode:
		return c.conditional(n)
	case *ast.VariableDeclaratorNode:
		return c.let(n)
	case *ast.SequenceNode:
		return nil, c.errAt(n, "a sequence of expressions (a; b) is not supported; use let name = value; expression")
	}
	return nil, c.errAt(n, "%T (%s) is not supported", n, n)
}

func (c *compiler) unary(n *ast.UnaryNode) (node, error) {
	if err := c.bareCoalesce(n, n.Operator, n.Node); err != nil {
		return nil, err
	}
	x, err := c.build(n.Node)
	if err != nil {
		return nil, err
	}
	t := x.typ()
	switch n.Operator {
	case "not", "!":
		if x, err = c.expect(n, x, tBool, n.Operator); err != nil {
			return nil, err
		}
		return c.done(n, &unaryNode{x: x, t: tBool, fn: not}, x)
	case "-":
		switch t.k {
		case kInt:
			return c.done(n, &unaryNode{x: x, t: tInt, fn: negInt}, x)
		case kFloat:
			return c.done(n, &unaryNode{x: x, t: tFloat, fn: negFloat}, x)
		case kNull:
			return x, nil
		}
		return nil, c.errAt(n, "cannot negate %s", t)
	case "+":
		if t.numeric() || t.k == kNull {
			return x, nil
		}
		return nil, c.errAt(n, "unary + needs a number, got %s", t)
	}
	return nil, c.errAt(n, "operator %s is not supported", n.Operator)
}

// expect casts a null literal to t and rejects any other type than t.
func (c *compiler) expect(at ast.Node, x node, t typ, what string) (node, error) {
	switch x.typ().k {
	case t.k:
		return x, nil
	case kNull:
		return &constNode{v: nullConst(t)}, nil
	}
	return nil, c.errAt(at, "%s needs %s, got %s", what, t, x.typ())
}

func isNil(n ast.Node) bool {
	_, ok := n.(*ast.NilNode)
	return ok
}

func (c *compiler) binary(n *ast.BinaryNode) (node, error) {
	op := n.Operator
	if op == "%" && c.intDiv[n.Location().From] {
		op = "//"
	}
	if err := c.bareNot(n, op); err != nil {
		return nil, err
	}
	if (op == "==" || op == "!=") && (isNil(n.Left) || isNil(n.Right)) {
		// x == nil is the null check of expr-lang, not SQL's always-null comparison.
		other := n.Left
		if isNil(other) {
			other = n.Right
		}
		x, err := c.build(other)
		if err != nil {
			return nil, err
		}
		var out node = &isNullNode{x: x}
		if out, err = c.done(n, out, x); err != nil {
			return nil, err
		}
		if op == "!=" {
			return c.done(n, &unaryNode{x: out, t: tBool, fn: not}, out)
		}
		return out, nil
	}
	if op != "??" {
		if err := c.bareCoalesce(n, op, n.Right); err != nil {
			return nil, err
		}
	}
	l, err := c.build(n.Left)
	if err != nil {
		return nil, err
	}
	if op == "in" {
		return c.in(n, l)
	}
	r, err := c.build(n.Right)
	if err != nil {
		return nil, err
	}
	lt, rt := l.typ(), r.typ()
	switch op {
	case "and", "&&", "or", "||":
		if op == "||" && (lt.k == kString || rt.k == kString) {
			return nil, c.errAt(n, "|| is logical or (as in Go), not SQL's string concatenation: join strings with + or concat()")
		}
		if l, err = c.expect(n, l, tBool, op); err != nil {
			return nil, err
		}
		if r, err = c.expect(n, r, tBool, op); err != nil {
			return nil, err
		}
		return c.done(n, &logicNode{isAnd: op == "and" || op == "&&", l: l, r: r}, l, r)
	case "==", "!=", "<", "<=", ">", ">=":
		l, r, t, ok := c.unify(l, r)
		if !ok || (t.k == kBool && op != "==" && op != "!=") {
			return nil, c.errAt(n, "cannot compare %s with %s", lt, rt)
		}
		if t.k == kNull {
			return &constNode{v: nullConst(tBool)}, nil
		}
		return c.done(n, &binaryNode{l: l, r: r, t: tBool, fn: cmpKernel(t.k, cmpOps[op])}, l, r)
	case "+", "-", "*", "/", "%", "//":
		return c.arith(n, op, l, r)
	case "contains", "startsWith", "endsWith", "matches":
		if l, err = c.expect(n, l, tString, op); err != nil {
			return nil, err
		}
		if r, err = c.expect(n, r, tString, op); err != nil {
			return nil, err
		}
		var re *rx
		if op == "matches" {
			k, ok := r.(*constNode)
			if !ok {
				return nil, c.errAt(n.Right, "the pattern of matches must be a literal string")
			}
			if k.v.isNullConst() {
				return &constNode{v: nullConst(tBool)}, nil
			}
			if re, err = compileRx(k.v.s[0]); err != nil {
				return nil, c.errAt(n.Right, "bad pattern: %v", err)
			}
		}
		return c.done(n, &binaryNode{l: l, r: r, t: tBool, fn: strPredKernel(op, re)}, l, r)
	case "??":
		return c.coalesce(n, []node{l, r})
	}
	return nil, c.errAt(n, "operator %s is not supported", op)
}

// bareCoalesce refuses a ?? that is, without parentheses, the operand on
// the right of another operator. expr-lang's ?? binds tightest, so x * y ?? 0
// is x * (y ?? 0) and -y ?? 0 is -(y ?? 0), while in C#, JavaScript, Kotlin
// or Swift ?? binds loosest ((x * y) ?? 0): the two differ when x is null.
// (An operator after ?? is already refused by the parser.)
func (c *compiler) bareCoalesce(parent ast.Node, op string, operand ast.Node) error {
	b, ok := operand.(*ast.BinaryNode)
	if !ok || b.Operator != "??" {
		return nil
	}
	if c.parenDepth(parent.Location().From+len([]rune(op)), b.Location().From) > 0 {
		return nil // (x ?? y) is parenthesized
	}
	if op == "%" && c.intDiv[parent.Location().From] {
		op = "//"
	}
	return c.errAt(b, "?? binds tighter than %s here: this reads x %s (y ?? z), while ?? in C#, JavaScript or Kotlin "+
		"binds loosest, (x %s y) ?? z; add parentheses to say which", op, op, op)
}

// bareNot refuses not x == y (and the other comparisons and in) without
// parentheses. expr-lang's not binds tighter than comparisons, so it reads
// (not x) == y, while Python and SQL, where not is a keyword, read
// not (x == y): the two differ, silently, for not flag == nil and not flag
// in [true, false]. !x == y is allowed: ! binds tight in C, Go and
// JavaScript too.
func (c *compiler) bareNot(n *ast.BinaryNode, op string) error {
	switch op {
	case "==", "!=", "<", "<=", ">", ">=", "in":
	default:
		return nil
	}
	u, ok := n.Left.(*ast.UnaryNode)
	if !ok || u.Operator != "not" {
		return nil
	}
	if b, ok := u.Node.(*ast.BinaryNode); ok {
		switch b.Operator {
		case "in", "contains", "matches", "startsWith", "endsWith":
			return nil // x not in [..]: the not is part of the operator
		}
	}
	if c.parenDepth(u.Location().From, n.Location().From) < 0 {
		return nil // (not x) == y
	}
	return c.errAt(u, "not binds tighter than %s here: this reads (not x) %s y, while Python and SQL read not (x %s y); "+
		"add parentheses to say which", op, op, op)
}

// parenDepth is the count of ( minus ) in the source between rune offsets
// from and to, outside string literals.
func (c *compiler) parenDepth(from, to int) int {
	rs := []rune(c.src)
	if from < 0 || to > len(rs) || from > to {
		return 0
	}
	depth := 0
	for i := from; i < to; i++ {
		switch r := rs[i]; r {
		case '(':
			depth++
		case ')':
			depth--
		case '\'', '"', '`':
			for i++; i < to && rs[i] != r; i++ {
				if rs[i] == '\\' && r != '`' {
					i++
				}
			}
		}
	}
	return depth
}

// arith type-checks + - * / % //. int op int stays int64 except /, which
// like expr-lang always divides as float64; an int64 result that overflows is
// null (never a wrapped value). // and % need integers: // truncates toward
// zero and % takes the sign of the dividend, like SQL and DuckDB. A zero
// divisor gives null. + also concatenates strings.
func (c *compiler) arith(n *ast.BinaryNode, op string, l, r node) (node, error) {
	lt, rt := l.typ(), r.typ()
	if op == "+" && (lt.k == kString || rt.k == kString) {
		if l, r, t, ok := c.unify(l, r); ok && (t.k == kString || t.k == kNull) {
			if t.k == kNull {
				return &constNode{v: nullConst(tString)}, nil
			}
			return c.done(n, &binaryNode{l: l, r: r, t: tString, fn: arithKernel(kString, "+")}, l, r)
		}
	}
	if !(lt.numeric() || lt.k == kNull) || !(rt.numeric() || rt.k == kNull) {
		return nil, c.errAt(n, "cannot apply %s to %s and %s", op, lt, rt)
	}
	l, r, t, _ := c.unify(l, r)
	switch op {
	case "/":
		t = tFloat
	case "%":
		if lt.k == kFloat || rt.k == kFloat {
			return nil, c.errAt(n, "%% needs integers, got %s and %s", lt, rt)
		}
		t = tInt
	case "//":
		if lt.k == kFloat || rt.k == kFloat {
			return nil, c.errAt(n, "// (integer division) needs integers, got %s and %s; "+
				"divide with / and choose the rounding: trunc(a / b), floor(a / b), or cast(a, 'int64') // b", lt, rt)
		}
		t = tInt
	}
	if t.k == kNull {
		t = tInt
	}
	var err error
	if l, err = c.castTo(n, l, t); err != nil {
		return nil, err
	}
	if r, err = c.castTo(n, r, t); err != nil {
		return nil, err
	}
	if l.typ().k == kNull || r.typ().k == kNull {
		return &constNode{v: nullConst(t)}, nil
	}
	b := &binaryNode{l: l, r: r, t: t, fn: arithKernel(t.k, op), divides: op == "/" || op == "%" || op == "//"}
	return c.done(n, b, l, r)
}

// commonType is the type two types meet at: int and float at float,
// timestamps at the finer unit, nil at anything.
func commonType(a, b typ) (typ, bool) {
	switch {
	case a.k == kNull:
		return b, true
	case b.k == kNull:
		return a, true
	case a.k == b.k && a.k != kTimestamp:
		return a, true
	case a.numeric() && b.numeric():
		return tFloat, true
	case a.k == kTimestamp && b.k == kTimestamp:
		if unitFactor(b.unit) > unitFactor(a.unit) {
			return b, true
		}
		return a, true
	}
	return typ{}, false
}

// unify casts l and r to their common type for a comparison. A string literal
// compared with a timestamp is parsed as a timestamp. ok is false when there is
// no common type.
func (c *compiler) unify(l, r node) (node, node, typ, bool) {
	lt, rt := l.typ(), r.typ()
	if lt.k == kTimestamp && rt.k == kString {
		if ts, ok := stringTimestamp(r); ok {
			return c.unify(l, ts)
		}
	}
	if rt.k == kTimestamp && lt.k == kString {
		if ts, ok := stringTimestamp(l); ok {
			return c.unify(ts, r)
		}
	}
	if lt.k == kTimestamp && rt.k == kTimestamp && lt.unit != rt.unit {
		// Prefer converting a literal down to the column's unit when exact:
		// then the column needs no conversion.
		if k, ok := l.(*constNode); ok {
			if down, ok := coarsen(k.v, rt); ok {
				return down, r, rt, true
			}
		}
		if k, ok := r.(*constNode); ok {
			if down, ok := coarsen(k.v, lt); ok {
				return l, down, lt, true
			}
		}
	}
	t, ok := commonType(lt, rt)
	if !ok {
		return l, r, t, false
	}
	l2, err := c.castTo(nil, l, t)
	if err != nil {
		return l, r, t, false
	}
	r2, err := c.castTo(nil, r, t)
	if err != nil {
		return l, r, t, false
	}
	return l2, r2, t, true
}

// coarsen converts a constant timestamp to the coarser type t when exact.
func coarsen(v *vec, t typ) (node, bool) {
	if v.isNullConst() {
		return &constNode{v: nullConst(t)}, true
	}
	f := unitFactor(v.t.unit) / unitFactor(t.unit)
	if f <= 1 || v.i[0]%f != 0 {
		return nil, false
	}
	return constOf(t, func(out *vec) { out.i[0] = v.i[0] / f }), true
}

// stringTimestamp parses a constant string as a timestamp literal.
func stringTimestamp(n node) (node, bool) {
	k, ok := n.(*constNode)
	if !ok || k.v.isNullConst() {
		return nil, false
	}
	ns, err := parseTimestamp(k.v.s[0])
	if err != nil {
		return nil, false
	}
	return constOf(tTimestamp(arrow.Nanosecond, "UTC"), func(v *vec) { v.i[0] = ns }), true
}

// castTo converts x to t; only widening casts exist (int to float, a timestamp
// to a finer unit, nil to anything).
func (c *compiler) castTo(at ast.Node, x node, t typ) (node, error) {
	xt := x.typ()
	switch {
	case xt.k == t.k && (xt.k != kTimestamp || xt.unit == t.unit):
		return x, nil
	case xt.k == kNull:
		return &constNode{v: nullConst(t)}, nil
	case xt.k == kInt && t.k == kFloat:
		return c.done(at, &unaryNode{x: x, t: t, fn: intToFloat}, x)
	case xt.k == kTimestamp && t.k == kTimestamp && unitFactor(t.unit) > unitFactor(xt.unit):
		return c.done(at, &unaryNode{x: x, t: t, fn: scaleBy(unitFactor(t.unit) / unitFactor(xt.unit))}, x)
	}
	return nil, c.errAt(at, "cannot convert %s to %s", xt, t)
}

func (c *compiler) in(n *ast.BinaryNode, x node) (node, error) {
	list, ok := n.Right.(*ast.ArrayNode)
	if !ok {
		return nil, c.errAt(n.Right, "the right side of in must be a list literal like [1, 2]")
	}
	in := &inNode{}
	var items []node
	for _, it := range list.Nodes {
		item, err := c.build(it)
		if err != nil {
			return nil, err
		}
		if _, ok := item.(*constNode); !ok {
			return nil, c.errAt(it, "the items of an in list must be constants")
		}
		if item.typ().k == kNull {
			in.hasNull = true
			continue
		}
		items = append(items, item)
	}
	t := x.typ()
	for i, it := range items {
		if t.k == kTimestamp && it.typ().k == kString {
			ts, ok := stringTimestamp(it)
			if !ok {
				return nil, c.errAt(n, "%q is not a timestamp", it.(*constNode).v.s[0])
			}
			items[i], it = ts, ts
		}
		u, ok := commonType(t, it.typ())
		if !ok {
			return nil, c.errAt(n, "cannot compare %s with %s in list", x.typ(), it.typ())
		}
		t = u
	}
	if t.k == kNull {
		return &constNode{v: nullConst(tBool)}, nil
	}
	x, err := c.castTo(n, x, t)
	if err != nil {
		return nil, err
	}
	in.x = x
	for _, it := range items {
		it, err := c.castTo(n, it, t)
		if err != nil {
			return nil, err
		}
		v := it.(*constNode).v
		if !v.validAt(0) {
			in.hasNull = true
			continue
		}
		switch t.k {
		case kInt, kTimestamp:
			if in.ints == nil {
				in.ints = map[int64]struct{}{}
			}
			in.ints[v.i[0]] = struct{}{}
		case kFloat:
			if in.floats == nil {
				in.floats = map[float64]struct{}{}
			}
			in.floats[v.f[0]] = struct{}{}
		case kString:
			if in.strs == nil {
				in.strs = map[string]struct{}{}
			}
			in.strs[v.s[0]] = struct{}{}
		case kBool:
			in.bools[b2u(v.b[0])] = true
		}
	}
	return c.done(n, in, x)
}

func (c *compiler) coalesce(n ast.Node, xs []node) (node, error) {
	t := tNull
	for _, x := range xs {
		u, ok := commonType(t, x.typ())
		if !ok {
			return nil, c.errAt(n, "coalesce() arguments have no common type: %s and %s", t, x.typ())
		}
		t = u
	}
	for i, x := range xs {
		y, err := c.castTo(n, x, t)
		if err != nil {
			return nil, err
		}
		xs[i] = y
	}
	return c.done(n, &coalesceNode{args: xs, t: t}, xs...)
}

// parseTimestamp parses RFC 3339 (optionally without zone, read as UTC) or a
// bare date, to nanoseconds since the Unix epoch.
func parseTimestamp(s string) (int64, error) {
	t, err := parseTime(s)
	if err != nil {
		return 0, err
	}
	ns := t.UnixNano()
	if !time.Unix(0, ns).Equal(t) {
		return 0, fmt.Errorf("timestamp %q is outside the nanosecond range (years 1678 to 2262)", s)
	}
	return ns, nil
}

// parseTime parses what parseTimestamp accepts, without its range limit.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp %q is not RFC 3339 (2024-01-01T00:00:00Z) or a date (2024-01-01)", s)
}
