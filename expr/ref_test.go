package expr

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// This file checks the vectorised functions against ref, a row-at-a-time
// interpreter of the expr-lang AST written independently of the kernels:
// strings through []rune and strings.Split, dates through package time,
// format_time through Go layouts equivalent to the strftime ones.

var refSchema = arrow.NewSchema([]arrow.Field{
	{Name: "s1", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "s2", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "i1", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "i2", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f1", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "b1", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "t1", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "t2", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
}, nil)

var refWords = []string{"", "a", "a,b", "a,b,,c", "Héllo wörld", " pad ", "x/y/z", "ÄÖü", "日本語", "aaa", "b-a-b"}

// refLayouts maps the strftime layouts the generator uses to Go layouts.
var refLayouts = map[string]string{
	"%Y-%m-%d %H:%M:%S": "2006-01-02 15:04:05",
	"%F %T.%f":          "2006-01-02 15:04:05.000000",
	"%a %d %b %Y":       "Mon 02 Jan 2006",
	"%j|%I%p|%A|%B|%y":  "002|03PM|Monday|January|06",
}

type refGen struct{ r *rand.Rand }

func (g *refGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *refGen) expr(k string, d int) string {
	switch k {
	case "str":
		return g.str(d)
	case "int":
		return g.int(d)
	case "float":
		return g.float(d)
	case "bool":
		return g.bool(d)
	}
	return g.ts(d)
}

// cond is a conditional over kind k in one of its three syntaxes.
func (g *refGen) cond(k string, d int) string {
	switch g.r.IntN(3) {
	case 0:
		return "(" + g.bool(d-1) + " ? " + g.expr(k, d-1) + " : " + g.expr(k, d-1) + ")"
	case 1:
		return "(if " + g.bool(d-1) + " { " + g.expr(k, d-1) + " } else { " + g.expr(k, d-1) + " })"
	}
	if g.r.IntN(2) == 0 {
		return "case(" + g.bool(d-1) + ", " + g.expr(k, d-1) + ", " + g.bool(d-1) + ", " + g.expr(k, d-1) + ")"
	}
	return "case(" + g.bool(d-1) + ", " + g.expr(k, d-1) + ", " + g.bool(d-1) + ", " + g.expr(k, d-1) + ", " + g.expr(k, d-1) + ")"
}

func (g *refGen) str(d int) string {
	if d <= 0 || g.r.IntN(4) == 0 {
		if g.r.IntN(3) == 0 {
			return strconv.Quote(refWords[g.r.IntN(len(refWords))])
		}
		return g.pick("s1", "s2")
	}
	switch g.r.IntN(15) {
	case 0:
		return "lower(" + g.str(d-1) + ")"
	case 1:
		return "upper(" + g.str(d-1) + ")"
	case 2:
		return "substring(" + g.str(d-1) + ", " + g.int(d-1) + ", " + g.pick("0", "2", "5", "i2") + ")"
	case 3:
		return "substring(" + g.str(d-1) + ", " + g.int(d-1) + ")"
	case 4:
		return "trim(" + g.str(d-1) + ")"
	case 5:
		return "concat(" + g.str(d-1) + ", " + g.str(d-1) + ", " + g.str(d-1) + ")"
	case 6:
		return "split_part(" + g.str(d-1) + ", " + g.pick("','", "'/'", "''", "'-a-'") + ", " + g.pick("1", "2", "-1", "-3", "i1") + ")"
	case 7:
		return "replace(" + g.str(d-1) + ", " + g.pick("'a'", "''", "'é'", "','") + ", " + g.pick("'XY'", "''", "s2") + ")"
	case 8:
		return "regexp_extract(" + g.str(d-1) + ", " + g.pick(`'([a-z])[a-z]*'`, `'(\\w)(\\w)?'`, `'^(.)'`) + ", " + g.pick("0", "1") + ")"
	case 9:
		return "format_time(" + g.ts(d-1) + ", " + strconv.Quote(g.pick("%Y-%m-%d %H:%M:%S", "%F %T.%f", "%a %d %b %Y", "%j|%I%p|%A|%B|%y")) + ")"
	case 10:
		return "shout(" + g.str(d-1) + ")"
	case 11:
		return "coalesce(" + g.str(d-1) + ", " + g.str(d-1) + ")"
	case 12:
		return "(" + g.str(d-1) + " + " + g.str(d-1) + ")"
	}
	return g.cond("str", d)
}

func (g *refGen) int(d int) string {
	if d <= 0 || g.r.IntN(4) == 0 {
		return g.pick("i1", "i2", "0", "1", "2", "-1", "7")
	}
	switch g.r.IntN(8) {
	case 0:
		return "length(" + g.str(d-1) + ")"
	case 1:
		return "extract(" + g.pick("'year'", "'month'", "'day'", "'hour'", "'minute'", "'second'", "'dow'", "'isodow'", "'doy'", "'quarter'", "'epoch'") + ", " + g.ts(d-1) + ")"
	case 2:
		return "(" + g.int(d-1) + " + " + g.int(d-1) + ")"
	case 3:
		return "(" + g.int(d-1) + " * " + g.int(d-1) + ")"
	case 4:
		return "pos(" + g.int(d-1) + ")"
	case 5:
		return "(let v = " + g.int(d-1) + "; v - v * 2)"
	}
	return g.cond("int", d)
}

func (g *refGen) float(d int) string {
	if d <= 0 || g.r.IntN(3) == 0 {
		return g.pick("f1", "0.5", "-2.25")
	}
	switch g.r.IntN(3) {
	case 0:
		return "(" + g.bool(d-1) + " ? " + g.float(d-1) + " : " + g.int(d-1) + ")"
	case 1:
		return "case(" + g.bool(d-1) + ", " + g.int(d-1) + ", " + g.float(d-1) + ")"
	}
	return "(" + g.float(d-1) + " + " + g.float(d-1) + ")"
}

func (g *refGen) bool(d int) string {
	if d <= 0 || g.r.IntN(4) == 0 {
		return g.pick("b1", "true", "false", "(i1 > 0)", "(s1 == 'a')")
	}
	switch g.r.IntN(9) {
	case 0:
		return "starts_with(" + g.str(d-1) + ", " + g.pick("'a'", "''", "s2") + ")"
	case 1:
		return "ends_with(" + g.str(d-1) + ", " + g.pick("'b'", "'z'", "s1") + ")"
	case 2:
		return "regexp_match(" + g.str(d-1) + ", " + g.pick(`'^a'`, `'\\p{Lu}'`, `'b$'`) + ")"
	case 3:
		return "(" + g.int(d-1) + " " + g.pick("<", "==", ">=") + " " + g.int(d-1) + ")"
	case 4:
		return "(" + g.str(d-1) + " " + g.pick("<", "==", "!=") + " " + g.str(d-1) + ")"
	case 5:
		return "(" + g.bool(d-1) + " " + g.pick("and", "or") + " " + g.bool(d-1) + ")"
	case 6:
		return "(" + g.ts(d-1) + " " + g.pick("<", "==", ">") + " " + g.ts(d-1) + ")"
	case 7:
		return "not " + g.bool(d-1)
	}
	return g.cond("bool", d)
}

func (g *refGen) ts(d int) string {
	if d <= 0 || g.r.IntN(3) == 0 {
		return g.pick("t1", "t2", "t1", "t2", "timestamp('2024-02-29T13:14:15.123456Z')")
	}
	switch g.r.IntN(3) {
	case 0, 1:
		return "date_trunc(" + g.pick("'second'", "'minute'", "'hour'", "'day'", "'week'", "'month'", "'quarter'", "'year'") + ", " + g.ts(d-1) + ")"
	}
	return g.cond("ts", d)
}

// refFuncs are the user-defined functions of the differential test.
func refFuncs(t testing.TB) *Functions {
	fs := &Functions{}
	for name, fn := range map[string]any{
		"shout": func(s string) string { return strings.ToUpper(s) + "!" },
		"pos":   func(x int64) (int64, bool) { return x, x > 0 },
	} {
		if err := fs.Register(name, fn); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

// refRows builds n random rows (about one value in six null) as a batch and
// as Go values.
func refRows(t testing.TB, r *rand.Rand, n int) (arrow.RecordBatch, []map[string]any) {
	bld := array.NewRecordBuilder(memory.NewGoAllocator(), refSchema)
	defer bld.Release()
	rows := make([]map[string]any, n)
	minT := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxT := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	null := func() bool { return r.IntN(6) == 0 }
	for i := range rows {
		row := map[string]any{}
		for c, f := range refSchema.Fields() {
			b := bld.Field(c)
			if null() {
				b.AppendNull()
				row[f.Name] = nil
				continue
			}
			switch f.Name {
			case "s1", "s2":
				s := refWords[r.IntN(len(refWords))]
				b.(*array.StringBuilder).Append(s)
				row[f.Name] = s
			case "i1", "i2":
				x := int64(r.IntN(13) - 6)
				b.(*array.Int64Builder).Append(x)
				row[f.Name] = x
			case "f1":
				x := float64(r.IntN(40)-20) / 4
				b.(*array.Float64Builder).Append(x)
				row[f.Name] = x
			case "b1":
				x := r.IntN(2) == 0
				b.(*array.BooleanBuilder).Append(x)
				row[f.Name] = x
			case "t1":
				x := minT + r.Int64N(maxT-minT)
				b.(*array.TimestampBuilder).Append(arrow.Timestamp(x))
				row[f.Name] = time.UnixMicro(x).UTC()
			case "t2":
				x := (minT + r.Int64N(maxT-minT)) / 1000
				b.(*array.TimestampBuilder).Append(arrow.Timestamp(x))
				row[f.Name] = time.UnixMilli(x).UTC()
			}
		}
		rows[i] = row
	}
	return bld.NewRecordBatch(), rows
}

// TestFunctionsDifferential compares Eval with ref on random expressions over
// random rows with nulls.
func TestFunctionsDifferential(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	rec, rows := refRows(t, r, 300)
	defer rec.Release()
	fs := refFuncs(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	g := &refGen{r: r}
	n := 1500
	if testing.Short() {
		n = 300
	}
	kinds := []string{"str", "int", "float", "bool", "ts"}
	for k := 0; k < n; k++ {
		src := g.expr(kinds[k%len(kinds)], 4)
		e, err := Compile(src, refSchema, WithFunctions(fs))
		if err != nil {
			t.Fatalf("Compile(%s): %v", src, err)
		}
		arr, err := e.Eval(rec, mem)
		if err != nil {
			t.Fatalf("Eval(%s): %v", src, err)
		}
		tree, err := parser.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range rows {
			want := ref(t, tree.Node, row)
			if got := arrowValue(arr, i); !sameRef(got, want) {
				t.Fatalf("%s\nrow %d %v:\n got  %#v\n want %#v", src, i, row, got, want)
			}
		}
		arr.Release()
	}
}

// arrowValue reads row i as ref represents it (timestamps as time.Time).
func arrowValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.Timestamp:
		u := a.DataType().(*arrow.TimestampType).Unit
		return tsTime(int64(a.Value(i)), unitFactor(u))
	}
	panic(fmt.Sprintf("arrowValue: %s", arr.DataType()))
}

func sameRef(got, want any) bool {
	if w, ok := want.(int64); ok {
		if g, ok := got.(float64); ok { // int promoted to float by a conditional
			return g == float64(w)
		}
	}
	if w, ok := want.(time.Time); ok {
		g, ok := got.(time.Time)
		return ok && g.Equal(w)
	}
	return got == want
}

// ref evaluates n on one row: nil is null.
func ref(t testing.TB, n ast.Node, row map[string]any) any {
	ev := func(x ast.Node) any { return ref(t, x, row) }
	switch n := n.(type) {
	case *ast.IdentifierNode:
		v, ok := row[n.Value]
		if !ok {
			t.Fatalf("ref: unknown name %s", n.Value)
		}
		return v
	case *ast.MemberNode: // $env["name"]
		return row[n.Property.(*ast.StringNode).Value]
	case *ast.IntegerNode:
		return int64(n.Value)
	case *ast.FloatNode:
		return n.Value
	case *ast.StringNode:
		return n.Value
	case *ast.BoolNode:
		return n.Value
	case *ast.NilNode:
		return nil
	case *ast.UnaryNode:
		x := ev(n.Node)
		switch {
		case x == nil:
			return nil
		case n.Operator == "not" || n.Operator == "!":
			return !x.(bool)
		}
		if f, ok := x.(float64); ok {
			return -f
		}
		return -x.(int64)
	case *ast.ConditionalNode:
		if c, _ := ev(n.Cond).(bool); c {
			return ev(n.Exp1)
		}
		return ev(n.Exp2)
	case *ast.VariableDeclaratorNode:
		inner := make(map[string]any, len(row)+1)
		for k, v := range row {
			inner[k] = v
		}
		inner[n.Name] = ev(n.Value)
		return ref(t, n.Expr, inner)
	case *ast.BinaryNode:
		return refBinary(n.Operator, ev(n.Left), ev(n.Right))
	case *ast.BuiltinNode:
		return refCall(t, n.Name, n.Arguments, ev)
	case *ast.CallNode:
		return refCall(t, n.Callee.(*ast.IdentifierNode).Value, n.Arguments, ev)
	}
	t.Fatalf("ref: %T not supported", n)
	return nil
}

func refBinary(op string, l, r any) any {
	switch op {
	case "and", "&&":
		if l == false || r == false {
			return false
		}
		if l == nil || r == nil {
			return nil
		}
		return true
	case "or", "||":
		if l == true || r == true {
			return true
		}
		if l == nil || r == nil {
			return nil
		}
		return false
	}
	if l == nil || r == nil {
		return nil
	}
	// int meets float at float64
	if x, ok := l.(int64); ok {
		if _, ok := r.(float64); ok {
			l = float64(x)
		}
	}
	if y, ok := r.(int64); ok {
		if _, ok := l.(float64); ok {
			r = float64(y)
		}
	}
	var c int // comparison result
	switch x := l.(type) {
	case int64:
		y := r.(int64)
		switch op {
		case "+":
			return x + y
		case "-":
			return x - y
		case "*":
			return x * y
		}
		c = cmpOrd(x, y)
	case float64:
		y := r.(float64)
		if op == "+" {
			return x + y
		}
		c = cmpOrd(x, y)
	case string:
		y := r.(string)
		if op == "+" {
			return x + y
		}
		c = strings.Compare(x, y)
	case time.Time:
		c = x.Compare(r.(time.Time))
	}
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	panic("ref: operator " + op)
}

func cmpOrd[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func refCall(t testing.TB, name string, argNodes []ast.Node, ev func(ast.Node) any) any {
	args := make([]any, len(argNodes))
	for i, a := range argNodes {
		args[i] = ev(a)
	}
	switch name {
	case "case":
		for i := 0; i+1 < len(args); i += 2 {
			if args[i] == true {
				return args[i+1]
			}
		}
		if len(args)%2 == 1 {
			return args[len(args)-1]
		}
		return nil
	case "coalesce":
		for _, a := range args {
			if a != nil {
				return a
			}
		}
		return nil
	case "timestamp":
		ts, err := time.Parse(time.RFC3339Nano, args[0].(string))
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	for _, a := range args {
		if a == nil {
			return nil
		}
	}
	str := func(i int) string { return args[i].(string) }
	num := func(i int) int64 { return args[i].(int64) }
	tm := func(i int) time.Time { return args[i].(time.Time) }
	switch name {
	case "lower":
		return strings.ToLower(str(0))
	case "upper":
		return strings.ToUpper(str(0))
	case "length":
		return int64(utf8.RuneCountInString(str(0)))
	case "trim":
		return strings.TrimSpace(str(0))
	case "concat":
		return str(0) + str(1) + str(2)
	case "substring":
		n := int64(1 << 40)
		if len(args) == 3 {
			n = num(2)
		}
		return refSubstring(str(0), num(1), n)
	case "split_part":
		k := num(2)
		if k == 0 {
			return nil
		}
		parts := []string{str(0)}
		if str(1) != "" {
			parts = strings.Split(str(0), str(1))
		}
		if k > 0 && k <= int64(len(parts)) {
			return parts[k-1]
		}
		if k < 0 && -k <= int64(len(parts)) {
			return parts[int64(len(parts))+k]
		}
		return ""
	case "replace":
		if str(1) == "" {
			return str(0)
		}
		return strings.ReplaceAll(str(0), str(1), str(2))
	case "starts_with":
		return strings.HasPrefix(str(0), str(1))
	case "ends_with":
		return strings.HasSuffix(str(0), str(1))
	case "regexp_match":
		return regexp.MustCompile(str(1)).MatchString(str(0))
	case "regexp_extract":
		m := regexp.MustCompile(str(1)).FindStringSubmatchIndex(str(0))
		g := num(2)
		if m == nil || m[2*g] < 0 {
			return nil
		}
		return str(0)[m[2*g]:m[2*g+1]]
	case "format_time":
		return tm(0).Format(refLayouts[str(1)])
	case "date_trunc":
		return refTrunc(str(0), tm(1))
	case "extract", "date_part":
		return refPart(str(0), tm(1))
	case "shout":
		return strings.ToUpper(str(0)) + "!"
	case "pos":
		if num(0) > 0 {
			return num(0)
		}
		return nil
	}
	t.Fatalf("ref: function %s", name)
	return nil
}

// refSubstring is SQL substring on a []rune.
func refSubstring(s string, start, n int64) any {
	if n < 0 {
		return nil
	}
	rs := []rune(s)
	from, to := start, start+n
	from = max(from, 1)
	to = min(to, int64(len(rs))+1)
	if to <= from {
		return ""
	}
	return string(rs[from-1 : to-1])
}

func refTrunc(unit string, ts time.Time) time.Time {
	y, m, d := ts.Date()
	switch unit {
	case "second":
		return ts.Truncate(time.Second)
	case "minute":
		return ts.Truncate(time.Minute)
	case "hour":
		return ts.Truncate(time.Hour)
	case "day":
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case "week":
		return time.Date(y, m, d-(int(ts.Weekday())+6)%7, 0, 0, 0, 0, time.UTC)
	case "month":
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	case "quarter":
		return time.Date(y, (m-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
}

func refPart(field string, ts time.Time) int64 {
	switch field {
	case "year":
		return int64(ts.Year())
	case "quarter":
		return int64(ts.Month()-1)/3 + 1
	case "month":
		return int64(ts.Month())
	case "day":
		return int64(ts.Day())
	case "doy":
		return int64(ts.YearDay())
	case "dow":
		return int64(ts.Weekday())
	case "isodow":
		return int64(ts.Weekday()+6)%7 + 1
	case "hour":
		return int64(ts.Hour())
	case "minute":
		return int64(ts.Minute())
	case "second":
		return int64(ts.Second())
	}
	return ts.Unix() // epoch: whole seconds, rounded down
}

// FuzzSubstring checks substring and split_part on arbitrary strings against
// the []rune reference, and that they return valid UTF-8 for valid input.
func FuzzSubstring(f *testing.F) {
	f.Add("héllo", int64(2), int64(3), ",", int64(1))
	f.Add("", int64(0), int64(0), "", int64(-1))
	f.Add("a,b,,c", int64(-5), int64(9), ",", int64(-2))
	f.Add("日本語", int64(3), int64(1<<62), "本", int64(2))
	f.Fuzz(func(t *testing.T, s string, start, n int64, sep string, k int64) {
		if !utf8.ValidString(s) {
			return
		}
		if n >= 0 {
			got := substr(s, start, n)
			if want := refSubstring(s, start, n); got != want {
				t.Fatalf("substr(%q, %d, %d) = %q, want %q", s, start, n, got, want)
			}
		}
		if k != 0 {
			_ = splitPart(s, sep, k)
		}
	})
}

// FuzzCompile compiles arbitrary sources and evaluates those that compile:
// neither may panic.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"case(i > 0, s, 'x')", "substring(s, i, j)", "date_trunc('week', ts)", "format_time(ts, '%F %T')",
		"let x = i; x ? 1 : 2", "regexp_extract(s, '(a)(b)?', 2)", "split_part(s, '/', i)", "if b { 1 } else { 2.5 }",
		"i // j * -i % 3", "round(f, -2) + cast(s, 'int64')", "cast(ts, 'string')", "-(i ?? 1) // (j ?? 0)",
		"not (b == nil)", "'/*' + s // 2", "i /* c */", "`#` + s",
	} {
		f.Add(s)
	}
	rec := testRecord(f, memory.NewGoAllocator())
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src, testSchema)
		if err != nil {
			return
		}
		arr, err := e.Eval(rec, memory.NewGoAllocator())
		if err == nil {
			arr.Release()
		}
	})
}
