package expr

import (
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/expr-lang/expr/ast"

	"github.com/floe-dev/floe/internal/suggest"
)

// fcall is one call being compiled: the built arguments and their syntax.
type fcall struct {
	at   ast.Node
	name string
	xs   []node
	args []ast.Node
}

// builtin is a built-in function: its signature for messages, its arity
// (max < 0: variadic) and how it compiles.
type builtin struct {
	sig      string
	min, max int
	build    func(c *compiler, f fcall) (node, error)
}

// builtins is filled in init (the table refers to compiler methods that
// refer back to it for error messages).
var builtins map[string]builtin

func init() {
	str1 := func(fn func(in, out *vec), t typ) func(c *compiler, f fcall) (node, error) {
		return func(c *compiler, f fcall) (node, error) {
			x, err := c.arg(f, 0, "s", tString)
			if err != nil {
				return nil, err
			}
			return c.done(f.at, &unaryNode{x: x, t: t, fn: fn}, x)
		}
	}
	builtins = map[string]builtin{
		"abs":            {"abs(x)", 1, 1, (*compiler).absFunc},
		"coalesce":       {"coalesce(x, ...)", 1, -1, func(c *compiler, f fcall) (node, error) { return c.coalesce(f.at, f.xs) }},
		"is_null":        {"is_null(x)", 1, 1, func(c *compiler, f fcall) (node, error) { return c.done(f.at, &isNullNode{x: f.xs[0]}, f.xs[0]) }},
		"timestamp":      {"timestamp('2024-01-01T00:00:00Z')", 1, 1, (*compiler).timestampFunc},
		"case":           {"case(cond1, v1, ..., [else])", 2, -1, func(c *compiler, f fcall) (node, error) { return c.caseFunc(f.at, f.xs, f.args) }},
		"len":            {"len(s)", 1, 1, str1(strLen, tInt)},
		"length":         {"length(s)", 1, 1, str1(strLen, tInt)},
		"lower":          {"lower(s)", 1, 1, str1(lower, tString)},
		"upper":          {"upper(s)", 1, 1, str1(upper, tString)},
		"trim":           {"trim(s[, chars])", 1, 2, (*compiler).trimFunc},
		"ltrim":          {"ltrim(s[, chars])", 1, 2, (*compiler).trimFunc},
		"rtrim":          {"rtrim(s[, chars])", 1, 2, (*compiler).trimFunc},
		"substring":      {"substring(s, start[, len])", 2, 3, (*compiler).substringFunc},
		"concat":         {"concat(s, ...)", 1, -1, (*compiler).concatFunc},
		"split_part":     {"split_part(s, sep, n)", 3, 3, (*compiler).splitPartFunc},
		"replace":        {"replace(s, from, to)", 3, 3, (*compiler).replaceFunc},
		"starts_with":    {"starts_with(s, prefix)", 2, 2, (*compiler).strPredFunc},
		"ends_with":      {"ends_with(s, suffix)", 2, 2, (*compiler).strPredFunc},
		"regexp_match":   {"regexp_match(s, pattern)", 2, 2, (*compiler).regexpMatchFunc},
		"regexp_extract": {"regexp_extract(s, pattern[, group])", 2, 3, (*compiler).regexpExtractFunc},
		"date_trunc":     {"date_trunc(unit, ts)", 2, 2, (*compiler).dateTruncFunc},
		"extract":        {"extract(field, ts)", 2, 2, (*compiler).datePartFunc},
		"date_part":      {"date_part(field, ts)", 2, 2, (*compiler).datePartFunc},
		"format_time":    {"format_time(ts, layout)", 2, 2, (*compiler).formatTimeFunc},
		"floor":          {"floor(x)", 1, 1, (*compiler).roundingFunc},
		"ceil":           {"ceil(x)", 1, 1, (*compiler).roundingFunc},
		"trunc":          {"trunc(x)", 1, 1, (*compiler).roundingFunc},
		"round":          {"round(x[, digits])", 1, 2, (*compiler).roundFunc},
		"cast":           {"cast(x, 'int64' | 'float64' | 'string' | 'bool' | 'timestamp')", 2, 2, (*compiler).castFunc},
	}
}

// refused names functions that parse but are not allowed, and why. int(),
// float() and string() are expr-lang built-ins a reader may expect to work
// (with expr-lang's rules: int(2.7) is 2); they point to cast().
var refused = map[string]string{
	"now": "now() is not supported: it is non-deterministic, so a re-run epoch could keep different rows; " +
		`compare event-time columns with timestamp("2024-01-01T00:00:00Z") instead`,
	"int":     "int() is not supported; use cast(x, 'int64') (a float rounds to the nearest, ties to even; trunc, floor, ceil or round choose otherwise)",
	"float":   "float() is not supported; use cast(x, 'float64')",
	"string":  "string() is not supported; use cast(x, 'string')",
	"ceiling": "ceiling() is spelled ceil() here",
	"mod":     "mod() is not supported; use a % b",
	"div":     "div() is not supported; use a // b (integer division)",
}

func builtinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (c *compiler) call(n ast.Node, name string, args []ast.Node) (node, error) {
	if why, ok := refused[name]; ok {
		return nil, c.errAt(n, "%s", why)
	}
	b, isBuiltin := builtins[name]
	var u *udf
	if !isBuiltin {
		u = c.opts.funcs.lookup(name)
		if u == nil {
			return nil, c.errAt(n, "%s", c.unknownFunction(name))
		}
		b.min, b.max = len(u.in), len(u.in)
	}
	if len(args) < b.min || (b.max >= 0 && len(args) > b.max) {
		switch {
		case b.min == b.max:
			return nil, c.errAt(n, "%s() takes %d argument(s), got %d", name, b.min, len(args))
		case b.max < 0:
			return nil, c.errAt(n, "%s() takes at least %d argument(s), got %d: %s", name, b.min, len(args), b.sig)
		}
		return nil, c.errAt(n, "%s() takes %d to %d arguments, got %d: %s", name, b.min, b.max, len(args), b.sig)
	}
	xs := make([]node, len(args))
	for i, a := range args {
		x, err := c.build(a)
		if err != nil {
			return nil, err
		}
		xs[i] = x
	}
	f := fcall{at: n, name: name, xs: xs, args: args}
	if u != nil {
		return c.callUDF(f, u)
	}
	return b.build(c, f)
}

func (c *compiler) unknownFunction(name string) string {
	known := builtinNames()
	msg := fmt.Sprintf("unknown function %s() (built in: %s", name, strings.Join(known, ", "))
	if udfs := c.opts.funcs.Names(); len(udfs) > 0 {
		msg += "; registered: " + strings.Join(udfs, ", ")
		known = append(known, udfs...)
	}
	msg += ")"
	if best := suggest.Closest(name, known); best != "" {
		msg += fmt.Sprintf("; did you mean %s()?", best)
	}
	return msg
}

// arg checks argument i of f against want, converting a null literal to want
// and an integer to float64 when want is float64. want.k == kTimestamp accepts
// a timestamp of any unit (a null literal becomes timestamp[us, UTC]).
func (c *compiler) arg(f fcall, i int, pname string, want typ) (node, error) {
	x := f.xs[i]
	xt := x.typ()
	switch {
	case xt.k == want.k:
		return x, nil
	case xt.k == kNull:
		if want.k == kTimestamp {
			want = tTimestamp(arrow.Microsecond, "UTC")
		}
		return &constNode{v: nullConst(want)}, nil
	case xt.k == kInt && want.k == kFloat:
		return c.castTo(f.args[i], x, tFloat)
	}
	wants := want.String()
	if want.k == kTimestamp {
		wants = "timestamp"
	}
	if pname != "" {
		pname = " (" + pname + ")"
	}
	return nil, c.errAt(f.args[i], "%s() argument %d%s needs %s, got %s", f.name, i+1, pname, wants, xt)
}

// constString returns argument i of f, which must be a literal string
// (possibly folded from constants). null reports a nil literal.
func (c *compiler) constString(f fcall, i int, pname string) (s string, null bool, err error) {
	x, err := c.arg(f, i, pname, tString)
	if err != nil {
		return "", false, err
	}
	k, ok := x.(*constNode)
	if !ok {
		return "", false, c.errAt(f.args[i], "%s() argument %d (%s) must be a constant string, not computed per row", f.name, i+1, pname)
	}
	if k.v.isNullConst() {
		return "", true, nil
	}
	return k.v.s[0], false, nil
}

// constInt is constString for an integer argument.
func (c *compiler) constInt(f fcall, i int, pname string) (n int64, null bool, err error) {
	x, err := c.arg(f, i, pname, tInt)
	if err != nil {
		return 0, false, err
	}
	k, ok := x.(*constNode)
	if !ok {
		return 0, false, c.errAt(f.args[i], "%s() argument %d (%s) must be a constant integer, not computed per row", f.name, i+1, pname)
	}
	if k.v.isNullConst() {
		return 0, true, nil
	}
	return k.v.i[0], false, nil
}

// choice checks that s is one of options; the error names the argument and
// suggests the closest option.
func (c *compiler) choice(f fcall, i int, pname, s string, options []string) error {
	for _, o := range options {
		if s == o {
			return nil
		}
	}
	msg := fmt.Sprintf("%s() argument %d (%s): %q is not one of %s", f.name, i+1, pname, s, strings.Join(options, ", "))
	if best := suggest.Closest(strings.ToLower(s), options); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return c.errAt(f.args[i], "%s", msg)
}

func (c *compiler) absFunc(f fcall) (node, error) {
	x := f.xs[0]
	switch x.typ().k {
	case kInt:
		return c.done(f.at, &unaryNode{x: x, t: tInt, fn: absI}, x)
	case kFloat:
		return c.done(f.at, &unaryNode{x: x, t: tFloat, fn: absF}, x)
	case kNull:
		return x, nil
	}
	return nil, c.errAt(f.args[0], "abs() argument 1 (x) needs a number, got %s", x.typ())
}

func (c *compiler) timestampFunc(f fcall) (node, error) {
	k, ok := f.xs[0].(*constNode)
	if !ok || k.v.t.k != kString || k.v.isNullConst() {
		return nil, c.errAt(f.at, `timestamp() takes a literal string like timestamp("2024-01-01T00:00:00Z")`)
	}
	ts, ok := stringTimestamp(k)
	if !ok {
		_, err := parseTimestamp(k.v.s[0])
		return nil, c.errAt(f.at, "%v", err)
	}
	return ts, nil
}

// funcNode applies a kernel to its arguments' vecs. A row with a null in any
// argument is null; a nullable kernel may also null rows itself (it then owns
// out.valid, a fresh slice).
type funcNode struct {
	args     []node
	t        typ
	nullable bool
	kernel   func(args []*vec, out *vec)
}

func (f *funcNode) typ() typ { return f.t }

func (f *funcNode) eval(e *env) (*vec, error) {
	vs := make([]*vec, len(f.args))
	allConst := true
	for i, a := range f.args {
		v, err := a.eval(e)
		if err != nil {
			return nil, err
		}
		if v.isNullConst() {
			return nullConst(f.t), nil
		}
		vs[i] = v
		allConst = allConst && v.isConst
	}
	ln := e.n
	if allConst {
		ln = 1
	}
	out := newVec(f.t, ln, allConst)
	out.valid = andValidAll(vs, ln)
	if f.nullable {
		valid := make([]bool, ln)
		if out.valid == nil {
			fill(valid, true)
		} else {
			copy(valid, out.valid)
		}
		out.valid = valid
	}
	f.kernel(vs, out)
	if f.nullable {
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

// andValidAll merges the validity of operands for a result of ln rows (constant
// operands are non-null here). The result may be shared with an operand.
func andValidAll(vs []*vec, ln int) []bool {
	var out []bool
	shared := true
	for _, v := range vs {
		if v.valid == nil || (v.isConst && ln > 1) {
			continue
		}
		if out == nil {
			out = v.valid[:ln]
			continue
		}
		if shared {
			out = append([]bool(nil), out...)
			shared = false
		}
		for i, ok := range v.valid[:ln] {
			out[i] = out[i] && ok
		}
	}
	return out
}

// fn builds a funcNode over xs, folded when every input is constant.
func (c *compiler) fn(at ast.Node, t typ, nullable bool, kernel func(args []*vec, out *vec), xs ...node) (node, error) {
	return c.done(at, &funcNode{args: xs, t: t, nullable: nullable, kernel: kernel}, xs...)
}

// outLen is the number of rows of out.
func outLen(out *vec) int {
	switch out.t.k {
	case kBool:
		return len(out.b)
	case kInt, kTimestamp:
		return len(out.i)
	case kFloat:
		return len(out.f)
	case kString:
		return len(out.s)
	}
	return len(out.valid)
}
