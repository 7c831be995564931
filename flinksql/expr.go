package flinksql

import (
	"fmt"
	"strconv"
	"strings"

	"vitess.io/vitess/go/mysql/datetime"
	"vitess.io/vitess/go/vt/sqlparser"
)

// aggs collects the aggregates of a grouped SELECT; expr replaces each by
// the column that holds it.
type aggs struct {
	resolve func(sqlparser.Expr) (string, string, error)
	groups  map[string]string // computed GROUP BY expressions -> key column
	legacy  bool              // GROUP BY TUMBLE(...): TUMBLE_START(...) etc. are the bounds
}

// expr translates a SQL expression into a floe expression (docs/expressions.md)
// and its evaluation type ("int", "float", "string", "bool", "ts", "" unknown).
func (q *qctx) expr(e sqlparser.Expr, sc *scope, ag *aggs) (string, string, error) {
	sub := func(x sqlparser.Expr) (string, string, error) {
		s, t, err := q.expr(x, sc, ag)
		if err != nil {
			return "", "", err
		}
		if !atomic(x) {
			s = "(" + s + ")"
		}
		return s, t, nil
	}
	if ag != nil {
		if col, ok := ag.groups[sqlparser.String(e)]; ok {
			return exprName(col), sc.types[col], nil
		}
	}
	switch x := e.(type) {
	case *sqlparser.ColName:
		phys, err := sc.resolve(x.Qualifier.Name.String(), x.Name.String())
		if err != nil {
			return "", "", q.errf(x, "%v", err)
		}
		return exprName(phys), sc.types[phys], nil
	case *sqlparser.Literal:
		switch x.Type {
		case sqlparser.IntVal:
			return x.Val, "int", nil
		case sqlparser.FloatVal, sqlparser.DecimalVal:
			v := x.Val
			if !strings.ContainsAny(v, ".eE") {
				v += ".0"
			}
			return v, "float", nil
		case sqlparser.StrVal:
			return quoteExpr(x.Val), "string", nil
		}
		return "", "", q.errf(x, "unsupported literal")
	case sqlparser.BoolVal:
		if x {
			return "true", "bool", nil
		}
		return "false", "bool", nil
	case *sqlparser.NullVal:
		return "nil", "", nil
	case *sqlparser.AndExpr, *sqlparser.OrExpr:
		// and binds looser than comparisons, or looser than and: their
		// operands need parentheses only when they bind looser still.
		var a, b sqlparser.Expr
		op := " and "
		if y, ok := x.(*sqlparser.AndExpr); ok {
			a, b = y.Left, y.Right
		} else {
			y := x.(*sqlparser.OrExpr)
			a, b, op = y.Left, y.Right, " or "
		}
		part := func(e sqlparser.Expr) (string, error) {
			s, _, err := q.expr(e, sc, ag)
			if err != nil {
				return "", err
			}
			switch e.(type) {
			case *sqlparser.ComparisonExpr, *sqlparser.IsExpr, *sqlparser.BetweenExpr, *sqlparser.AndExpr:
				return s, nil
			case *sqlparser.OrExpr:
				if op == " or " {
					return s, nil
				}
			}
			if atomic(e) {
				return s, nil
			}
			return "(" + s + ")", nil
		}
		l, err := part(a)
		if err != nil {
			return "", "", err
		}
		r, err := part(b)
		if err != nil {
			return "", "", err
		}
		return l + op + r, "bool", nil
	case *sqlparser.NotExpr:
		s, _, err := q.expr(x.Expr, sc, ag)
		if err != nil {
			return "", "", err
		}
		return "not (" + s + ")", "bool", nil
	case *sqlparser.ComparisonExpr:
		l, _, err := sub(x.Left)
		if err != nil {
			return "", "", err
		}
		switch x.Operator {
		case sqlparser.InOp, sqlparser.NotInOp:
			tup, ok := x.Right.(sqlparser.ValTuple)
			if !ok {
				return "", "", q.errf(x, "IN (subquery): not supported")
			}
			var vs []string
			for _, v := range tup {
				s, _, err := q.expr(v, sc, ag)
				if err != nil {
					return "", "", err
				}
				vs = append(vs, s)
			}
			op := " in "
			if x.Operator == sqlparser.NotInOp {
				op = " not in "
			}
			return l + op + "[" + strings.Join(vs, ", ") + "]", "bool", nil
		case sqlparser.LikeOp, sqlparser.NotLikeOp:
			lit, ok := x.Right.(*sqlparser.Literal)
			if !ok || lit.Type != sqlparser.StrVal || x.Escape != nil {
				return "", "", q.errf(x, "LIKE takes a constant pattern")
			}
			s := likeExpr(l, lit.Val)
			if x.Operator == sqlparser.NotLikeOp {
				s = "not (" + s + ")"
			}
			return s, "bool", nil
		}
		r, _, err := sub(x.Right)
		if err != nil {
			return "", "", err
		}
		ops := map[sqlparser.ComparisonExprOperator]string{sqlparser.EqualOp: "==", sqlparser.NotEqualOp: "!=",
			sqlparser.LessThanOp: "<", sqlparser.LessEqualOp: "<=", sqlparser.GreaterThanOp: ">", sqlparser.GreaterEqualOp: ">="}
		op, ok := ops[x.Operator]
		if !ok {
			return "", "", q.errf(x, "unsupported comparison")
		}
		return l + " " + op + " " + r, "bool", nil
	case *sqlparser.BetweenExpr:
		l, _, err := sub(x.Left)
		if err != nil {
			return "", "", err
		}
		a, _, err := sub(x.From)
		if err != nil {
			return "", "", err
		}
		b, _, err := sub(x.To)
		if err != nil {
			return "", "", err
		}
		s := l + " >= " + a + " and " + l + " <= " + b
		if !x.IsBetween {
			s = "not (" + s + ")"
		}
		return s, "bool", nil
	case *sqlparser.IsExpr:
		l, _, err := sub(x.Left)
		if err != nil {
			return "", "", err
		}
		switch x.Right {
		case sqlparser.IsNullOp:
			return l + " == nil", "bool", nil
		case sqlparser.IsNotNullOp:
			return l + " != nil", "bool", nil
		case sqlparser.IsTrueOp:
			return "(" + l + " ?? false)", "bool", nil
		case sqlparser.IsFalseOp:
			return "(" + l + " == false ?? false)", "bool", nil
		}
		return "", "", q.errf(x, "unsupported IS test")
	case *sqlparser.BinaryExpr:
		l, lt, err := sub(x.Left)
		if err != nil {
			return "", "", err
		}
		r, rt, err := sub(x.Right)
		if err != nil {
			return "", "", err
		}
		num := "int"
		if lt == "float" || rt == "float" {
			num = "float"
		}
		switch x.Operator {
		case sqlparser.PlusOp:
			if lt == "ts" || rt == "ts" {
				return "", "", q.errf(x, "timestamp arithmetic: not supported in expressions")
			}
			return l + " + " + r, num, nil
		case sqlparser.MinusOp:
			if lt == "ts" || rt == "ts" {
				return "", "", q.errf(x, "timestamp arithmetic: not supported in expressions (only in WATERMARK and join time bounds)")
			}
			return l + " - " + r, num, nil
		case sqlparser.MultOp:
			return l + " * " + r, num, nil
		case sqlparser.DivOp:
			if lt == "int" && rt == "int" {
				// Flink divides integers as integers.
				return l + " // " + r, "int", nil
			}
			return l + " / " + r, "float", nil
		case sqlparser.IntDivOp:
			return l + " // " + r, "int", nil
		case sqlparser.ModOp:
			return l + " % " + r, "int", nil
		}
		return "", "", q.errf(x, "unsupported operator")
	case *sqlparser.UnaryExpr:
		s, t, err := sub(x.Expr)
		if err != nil {
			return "", "", err
		}
		switch x.Operator {
		case sqlparser.UMinusOp:
			return "-" + s, t, nil
		case sqlparser.UPlusOp:
			return s, t, nil
		}
		return "", "", q.errf(x, "unsupported operator")
	case *sqlparser.CaseExpr:
		var args []string
		typ := ""
		for _, w := range x.Whens {
			var c string
			var err error
			if x.Expr != nil {
				c, _, err = q.expr(&sqlparser.ComparisonExpr{Operator: sqlparser.EqualOp, Left: x.Expr, Right: w.Cond}, sc, ag)
			} else {
				c, _, err = q.expr(w.Cond, sc, ag)
			}
			if err != nil {
				return "", "", err
			}
			v, t, err := q.expr(w.Val, sc, ag)
			if err != nil {
				return "", "", err
			}
			typ = meet(typ, t)
			args = append(args, c, v)
		}
		if x.Else != nil {
			v, t, err := q.expr(x.Else, sc, ag)
			if err != nil {
				return "", "", err
			}
			typ = meet(typ, t)
			args = append(args, v)
		}
		return "case(" + strings.Join(args, ", ") + ")", typ, nil
	case *sqlparser.ExtractFuncExpr:
		s, _, err := q.expr(x.Expr, sc, ag)
		if err != nil {
			return "", "", err
		}
		f, ok := extractFields[x.IntervalType]
		if !ok {
			return "", "", q.errf(x, "EXTRACT: unsupported field")
		}
		return "extract('" + f + "', " + s + ")", "int", nil
	case *sqlparser.SubstrExpr:
		s, _, err := q.expr(x.Name, sc, ag)
		if err != nil {
			return "", "", err
		}
		args := []string{s}
		for _, a := range []sqlparser.Expr{x.From, x.To} {
			if a == nil {
				continue
			}
			v, _, err := q.expr(a, sc, ag)
			if err != nil {
				return "", "", err
			}
			args = append(args, v)
		}
		return "substring(" + strings.Join(args, ", ") + ")", "string", nil
	case *sqlparser.TrimFuncExpr:
		s, _, err := q.expr(x.StringArg, sc, ag)
		if err != nil {
			return "", "", err
		}
		fn := map[sqlparser.TrimType]string{sqlparser.LeadingTrimType: "ltrim", sqlparser.TrailingTrimType: "rtrim"}[x.Type]
		if fn == "" {
			fn = "trim"
		}
		if x.TrimFuncType == sqlparser.LTrimType {
			fn = "ltrim"
		} else if x.TrimFuncType == sqlparser.RTrimType {
			fn = "rtrim"
		}
		if x.TrimArg != nil {
			c, _, err := q.expr(x.TrimArg, sc, ag)
			if err != nil {
				return "", "", err
			}
			return fn + "(" + s + ", " + c + ")", "string", nil
		}
		return fn + "(" + s + ")", "string", nil
	case *sqlparser.Count, *sqlparser.CountStar, *sqlparser.Sum, *sqlparser.Min, *sqlparser.Max, *sqlparser.Avg:
		if ag == nil {
			return "", "", q.errf(x, "an aggregate needs a GROUP BY over a window table function")
		}
		col, t, err := ag.resolve(x)
		if err != nil {
			return "", "", err
		}
		return exprName(col), t, nil
	case *sqlparser.ArgumentLessWindowExpr:
		return "", "", q.errf(x, "%s() is supported as ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) in a subquery filtered by rownum <= N", strings.ToUpper(x.WindowFuncName()))
	case *sqlparser.CurTimeFuncExpr:
		return "", "", q.errf(x, "%s: processing time is not supported; floe's results depend on event time only (an epoch re-run must produce the same rows)", x.Name.String())
	case *sqlparser.FuncExpr:
		return q.call(x, sc, ag)
	case *sqlparser.IntervalDateExpr:
		return "", "", q.errf(x, "interval arithmetic: not supported here")
	case *sqlparser.Subquery:
		return "", "", q.errf(x, "scalar subqueries: not supported")
	}
	return "", "", q.errf(e, "unsupported expression")
}

func meet(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b:
		return a
	case (a == "int" && b == "float") || (a == "float" && b == "int"):
		return "float"
	}
	return a
}

// atomic reports whether e prints without needing parentheses.
func atomic(e sqlparser.Expr) bool {
	switch e.(type) {
	case *sqlparser.ColName, *sqlparser.Literal, sqlparser.BoolVal, *sqlparser.NullVal, *sqlparser.FuncExpr,
		*sqlparser.CaseExpr, *sqlparser.ExtractFuncExpr, *sqlparser.SubstrExpr, *sqlparser.TrimFuncExpr,
		*sqlparser.Count, *sqlparser.CountStar, *sqlparser.Sum, *sqlparser.Min, *sqlparser.Max, *sqlparser.Avg:
		return true
	}
	return false
}

var extractFields = map[datetime.IntervalType]string{
	datetime.IntervalYear: "year", datetime.IntervalQuarter: "quarter", datetime.IntervalMonth: "month",
	datetime.IntervalDay: "day", datetime.IntervalHour: "hour", datetime.IntervalMinute: "minute",
	datetime.IntervalSecond: "second",
}

// quoteExpr quotes s as an expression string literal.
func quoteExpr(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	s = strings.ReplaceAll(s, "\n", `\n`)
	return "'" + s + "'"
}

// likeExpr translates s LIKE pattern.
func likeExpr(s, pat string) string {
	if !strings.ContainsAny(pat, "_") {
		inner := strings.Trim(pat, "%")
		if !strings.Contains(inner, "%") {
			switch {
			case pat == "%" || pat == "%%":
				return s + " != nil"
			case strings.HasPrefix(pat, "%") && strings.HasSuffix(pat, "%"):
				return s + " contains " + quoteExpr(inner)
			case strings.HasSuffix(pat, "%"):
				return s + " startsWith " + quoteExpr(inner)
			case strings.HasPrefix(pat, "%"):
				return s + " endsWith " + quoteExpr(inner)
			default:
				return s + " == " + quoteExpr(pat)
			}
		}
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pat {
		switch r {
		case '%':
			b.WriteString("(?s:.*)")
		case '_':
			b.WriteString("(?s:.)")
		default:
			b.WriteString(regexpQuote(string(r)))
		}
	}
	b.WriteString("$")
	return "regexp_match(" + s + ", " + quoteExpr(b.String()) + ")"
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// call translates a function call, Flink names to floe's.
func (q *qctx) call(x *sqlparser.FuncExpr, sc *scope, ag *aggs) (string, string, error) {
	name := strings.ToLower(x.Name.String())
	switch name {
	case "tumble_start", "hop_start", "session_start", "tumble_end", "hop_end", "session_end":
		if ag != nil && ag.legacy {
			if strings.HasSuffix(name, "_start") {
				return "window_start", "ts", nil
			}
			return "window_end", "ts", nil
		}
		return "", "", q.errf(x, "%s outside a GROUP BY %s(...)", strings.ToUpper(name), strings.ToUpper(strings.SplitN(name, "_", 2)[0]))
	}
	args := make([]string, len(x.Exprs))
	types := make([]string, len(x.Exprs))
	for i, a := range x.Exprs {
		s, t, err := q.expr(a, sc, ag)
		if err != nil {
			return "", "", err
		}
		args[i], types[i] = s, t
	}
	want := func(n ...int) error {
		for _, k := range n {
			if len(args) == k {
				return nil
			}
		}
		return q.errf(x, "%s takes %v arguments, got %d", strings.ToUpper(name), n, len(args))
	}
	fn := func(f, typ string, n ...int) (string, string, error) {
		if err := want(n...); err != nil {
			return "", "", err
		}
		return f + "(" + strings.Join(args, ", ") + ")", typ, nil
	}
	if t, ok := strings.CutPrefix(name, "__floe_cast_"); ok {
		if err := want(1); err != nil {
			return "", "", err
		}
		et := map[string]string{"int64": "int", "float64": "float", "string": "string", "bool": "bool", "timestamp": "ts"}[t]
		return "cast(" + args[0] + ", '" + t + "')", et, nil
	}
	switch name {
	case "__floe_interval":
		return "", "", q.errf(x, "an INTERVAL is allowed in WATERMARK, window functions and join time bounds only")
	case "proctime", "now", "current_timestamp", "localtimestamp", "current_date", "current_time", "unix_timestamp":
		return "", "", q.errf(x, "processing time is not supported; floe computes in event time (a re-run epoch must produce the same rows), so use the table's WATERMARK column")
	case "upper", "lower":
		return fn(name, "string", 1)
	case "char_length", "character_length", "length":
		return fn("length", "int", 1)
	case "concat":
		return fn("concat", "string", len(args))
	case "coalesce", "ifnull":
		t := ""
		for _, x := range types {
			t = meet(t, x)
		}
		return fn("coalesce", t, len(args))
	case "abs":
		return fn("abs", types[0], 1)
	case "floor", "ceil", "ceiling":
		if name == "ceiling" {
			name = "ceil"
		}
		return fn(name, types[0], 1)
	case "round":
		return fn("round", types[0], 1, 2)
	case "truncate":
		return fn("trunc", types[0], 1)
	case "mod":
		if err := want(2); err != nil {
			return "", "", err
		}
		return paren(x.Exprs[0], args[0]) + " % " + paren(x.Exprs[1], args[1]), "int", nil
	case "replace":
		return fn("replace", "string", 3)
	case "split_index":
		// Flink's index counts from 0; split_part's from 1.
		if err := want(3); err != nil {
			return "", "", err
		}
		idx, err := strconv.Atoi(args[2])
		if err != nil {
			return "", "", q.errf(x, "SPLIT_INDEX: the index must be a constant integer")
		}
		return "split_part(" + args[0] + ", " + args[1] + ", " + strconv.Itoa(idx+1) + ")", "string", nil
	case "split_part":
		return fn("split_part", "string", 3)
	case "regexp_extract":
		return fn("regexp_extract", "string", 2, 3)
	case "regexp":
		return fn("regexp_match", "bool", 2)
	case "starts_with", "ends_with":
		return fn(name, "bool", 2)
	case "if":
		if err := want(3); err != nil {
			return "", "", err
		}
		return "case(" + strings.Join(args, ", ") + ")", meet(types[1], types[2]), nil
	case "date_format":
		if err := want(2); err != nil {
			return "", "", err
		}
		lit, ok := x.Exprs[1].(*sqlparser.Literal)
		if !ok || lit.Type != sqlparser.StrVal {
			return "", "", q.errf(x, "DATE_FORMAT: the format must be a constant string")
		}
		layout, err := javaLayout(lit.Val)
		if err != nil {
			return "", "", q.errf(x, "DATE_FORMAT: %v", err)
		}
		return "format_time(" + args[0] + ", " + quoteExpr(layout) + ")", "string", nil
	case "hour", "minute", "second", "year", "month", "quarter", "dayofmonth", "dayofyear":
		if err := want(1); err != nil {
			return "", "", err
		}
		f := map[string]string{"dayofmonth": "day", "dayofyear": "doy"}[name]
		if f == "" {
			f = name
		}
		return "extract('" + f + "', " + args[0] + ")", "int", nil
	case "dayofweek":
		// Flink: 1 = Sunday .. 7 = Saturday.
		if err := want(1); err != nil {
			return "", "", err
		}
		return "extract('dow', " + args[0] + ") + 1", "int", nil
	case "to_timestamp":
		if err := want(1); err != nil {
			return "", "", err
		}
		return "cast(" + args[0] + ", 'timestamp')", "ts", nil
	case "date_trunc":
		return fn("date_trunc", types[1], 2)
	case "tumble", "hop", "session", "tumble_rowtime", "hop_rowtime", "session_rowtime":
		return "", "", q.errf(x, "the legacy group window %s(...): not supported; write GROUP BY window_start, window_end over TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL ...))", strings.ToUpper(name))
	}
	return "", "", q.errf(x, "function %s: not supported (see docs/sql.md for the functions floe maps)", strings.ToUpper(name))
}

func paren(e sqlparser.Expr, s string) string {
	if atomic(e) {
		return s
	}
	return "(" + s + ")"
}

// javaLayout converts a Java DateTimeFormatter pattern (Flink's
// DATE_FORMAT) to a strftime layout (floe's format_time).
func javaLayout(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); {
		c := p[i]
		if c == '\'' {
			j := strings.IndexByte(p[i+1:], '\'')
			if j < 0 {
				return "", fmt.Errorf("unterminated quote in %q", p)
			}
			b.WriteString(strings.ReplaceAll(p[i+1:i+1+j], "%", "%%"))
			i += j + 2
			continue
		}
		n := 1
		for i+n < len(p) && p[i+n] == c {
			n++
		}
		run := p[i : i+n]
		var out string
		switch run {
		case "yyyy":
			out = "%Y"
		case "yy":
			out = "%y"
		case "MM":
			out = "%m"
		case "MMM":
			out = "%b"
		case "MMMM":
			out = "%B"
		case "dd":
			out = "%d"
		case "DDD":
			out = "%j"
		case "HH":
			out = "%H"
		case "hh":
			out = "%I"
		case "mm":
			out = "%M"
		case "ss":
			out = "%S"
		case "SSSSSS":
			out = "%f"
		case "a":
			out = "%p"
		case "EEE":
			out = "%a"
		case "EEEE":
			out = "%A"
		default:
			if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
				return "", fmt.Errorf("pattern letters %q in %q: not supported (yyyy yy MM MMM MMMM dd DDD HH hh mm ss SSSSSS a EEE EEEE)", run, p)
			}
			out = strings.ReplaceAll(run, "%", "%%")
		}
		b.WriteString(out)
		i += n
	}
	return b.String(), nil
}
