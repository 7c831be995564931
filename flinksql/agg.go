package flinksql

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"vitess.io/vitess/go/vt/sqlparser"
)

type aggDef struct {
	key  string // sqlparser.String of the call
	name string
	fn   string
	arg  sqlparser.Expr // nil for count(*)
	col  string         // input column the aggregate reads
	typ  string
}

// aggregate lowers a grouped SELECT over a window table function to a
// window stage (plus a project before it for computed arguments, a filter
// for HAVING and a project for the SELECT list).
func (q *qctx) aggregate(sel *sqlparser.Select, in *rel, sc *scope, items []item, names []string) (*rel, error) {
	call := in.tvf
	results := false // GROUP BY window_start, window_end of window results: per input window
	legacy := false
	var keys []string
	groups := map[string]string{} // a computed GROUP BY expression -> its key column
	pre := yaml.MapSlice{}
	computed := map[string]bool{}
	hasStart, hasEnd := false, false
	var bucket *tvfCall // GROUP BY DATE_FORMAT(ts, 'yyyy-MM-dd'): a day per group
	if sel.GroupBy != nil {
		for gi, g := range sel.GroupBy.Exprs {
			if c, ok := g.(*sqlparser.ColName); ok {
				phys, err := sc.resolve(c.Qualifier.Name.String(), c.Name.String())
				if err != nil {
					return nil, q.errf(c, "%v", err)
				}
				switch {
				case phys == "window_start" && in.tvf != nil:
					hasStart = true
				case phys == "window_end" && in.tvf != nil:
					hasEnd = true
				case (phys == "window_start" || phys == "window_end") && in.windowed && in.win != nil:
					results = true
					hasStart, hasEnd = true, true
					keys = append(keys, phys)
				default:
					keys = append(keys, phys)
				}
				continue
			}
			if f, ok := g.(*sqlparser.FuncExpr); ok && in.tvf == nil {
				fn := strings.ToLower(f.Name.String())
				if fn == "tumble" || fn == "hop" || fn == "session" {
					lc, err := q.legacyWindow(f, fn, sc, in)
					if err != nil {
						return nil, err
					}
					if call != nil {
						return nil, q.errf(f, "one group window per GROUP BY")
					}
					call, legacy, hasStart, hasEnd = lc, true, true, true
					continue
				}
			}
			if containsAgg(g) {
				return nil, q.errf(g, "an aggregate in GROUP BY")
			}
			ex, t, err := q.expr(g, sc, nil)
			if err != nil {
				return nil, err
			}
			name := fmt.Sprintf("group_%d", gi)
			for i, it := range items {
				if sqlparser.String(it.expr) == sqlparser.String(g) {
					name = it.name
					if i < len(names) {
						name = names[i]
					}
				}
			}
			if sc.types[name] != "" || computed[name] {
				name = fmt.Sprintf("group_%d", gi)
			}
			pre = append(pre, yaml.MapItem{Key: name, Value: ex})
			computed[name] = true
			sc.types[name] = t
			groups[sqlparser.String(g)] = name
			keys = append(keys, name)
			if b := q.timeBucket(g, in); b != nil && bucket == nil {
				bucket = b
			}
		}
	}
	if results && call == nil {
		call = in.win
	}
	if call == nil && bucket != nil {
		// A group keyed by the event time's day (hour, minute) closes when
		// the watermark passes its end: a tumbling window of that size,
		// keyed by the formatted time, holds exactly the group's rows.
		call, hasStart, hasEnd = bucket, true, true
	}
	if call == nil {
		return nil, q.errf(nil, "GROUP BY without a window is an updating aggregate whose state never expires; group over TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL ...)) with GROUP BY window_start, window_end, ... (or key by DATE_FORMAT(ts, 'yyyy-MM-dd'), a day of event time)")
	}
	if !hasStart || !hasEnd {
		return nil, q.errf(nil, "GROUP BY over a window table function must list window_start and window_end")
	}
	needPre := len(pre) > 0
	// collect the aggregates: of the SELECT list (named by it), then of HAVING
	var defs []*aggDef
	byKey := map[string]*aggDef{}
	register := func(e sqlparser.Expr, name string) error {
		k := sqlparser.String(e)
		if byKey[k] != nil {
			return nil
		}
		d := &aggDef{key: k, name: name}
		switch x := e.(type) {
		case *sqlparser.CountStar:
			d.fn, d.typ = "count", "int"
		case *sqlparser.Count:
			if len(x.Args) != 1 {
				return q.errf(x, "COUNT takes one argument")
			}
			d.fn, d.arg, d.typ = "count", x.Args[0], "int"
			if x.Distinct {
				d.fn = "count_distinct"
			}
		case *sqlparser.Sum:
			d.fn, d.arg = "sum", x.Arg
		case *sqlparser.Min:
			d.fn, d.arg = "min", x.Arg
		case *sqlparser.Max:
			d.fn, d.arg = "max", x.Arg
		case *sqlparser.Avg:
			d.fn, d.arg, d.typ = "avg", x.Arg, "float"
		}
		for _, dist := range []bool{isDistinct(e)} {
			if dist && d.fn != "count_distinct" {
				return q.errf(e, "DISTINCT: only COUNT(DISTINCT x) is supported")
			}
		}
		if d.arg != nil {
			if containsAgg(d.arg) {
				return q.errf(e, "an aggregate inside an aggregate")
			}
			if c, ok := d.arg.(*sqlparser.ColName); ok {
				phys, err := sc.resolve(c.Qualifier.Name.String(), c.Name.String())
				if err != nil {
					return q.errf(c, "%v", err)
				}
				d.col = phys
				if d.typ == "" {
					d.typ = sc.types[phys]
				}
			} else {
				ex, t, err := q.expr(d.arg, sc, nil)
				if err != nil {
					return err
				}
				d.col = fmt.Sprintf("agg_arg_%d", len(defs))
				computed[d.col] = true
				pre = append(pre, yaml.MapItem{Key: d.col, Value: ex})
				needPre = true
				if d.typ == "" {
					d.typ = t
				}
			}
		}
		if d.name == "" {
			d.name = fmt.Sprintf("agg_%d", len(defs))
		}
		defs = append(defs, d)
		byKey[k] = d
		return nil
	}
	walkAggs := func(e sqlparser.Expr, name string) error {
		var err error
		_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
			switch n.(type) {
			case *sqlparser.Count, *sqlparser.CountStar, *sqlparser.Sum, *sqlparser.Min, *sqlparser.Max, *sqlparser.Avg:
				if err == nil {
					nm := ""
					if n == sqlparser.SQLNode(e) {
						nm = name
					}
					err = register(n.(sqlparser.Expr), nm)
				}
				return false, nil
			}
			return true, nil
		}, e)
		return err
	}
	for i, it := range items {
		name := it.name
		if i < len(names) {
			name = names[i]
		}
		if err := walkAggs(it.expr, name); err != nil {
			return nil, err
		}
	}
	if sel.Having != nil {
		if err := walkAggs(sel.Having.Expr, ""); err != nil {
			return nil, err
		}
	}
	for _, d := range defs {
		for _, k := range keys {
			if d.name == k || d.name == "window_start" || d.name == "window_end" {
				return nil, q.errf(nil, "the aggregate's name %s is a group column's", d.name)
			}
		}
	}
	src := in
	if needPre {
		var cols yaml.MapSlice
		seen := map[string]bool{}
		add := func(c string) {
			if !seen[c] {
				seen[c] = true
				cols = append(cols, yaml.MapItem{Key: c, Value: exprName(c)})
			}
		}
		for _, k := range keys {
			if !computed[k] {
				add(k)
			}
		}
		for _, d := range defs {
			if d.arg != nil && !computed[d.col] {
				add(d.col)
			}
		}
		add(in.evt)
		for _, p := range pre {
			cols = append(cols, p)
		}
		node := q.tr.addStage(q.base, "project", []string{in.node}, cols, q.at("select"))
		src = q.derive(in, node)
	}
	body := yaml.MapSlice{}
	if len(keys) > 0 { // no key: one group per window
		body = append(body, yaml.MapItem{Key: "key", Value: keys})
	}
	if len(defs) == 0 { // GROUP BY without aggregates: floe's window needs one
		defs = append(defs, &aggDef{name: "window_rows", fn: "count", typ: "int"})
	}
	shape, err := q.windowBody(call)
	if err != nil {
		return nil, err
	}
	body = append(body, shape...)
	if late, ok, err := q.lateness(); err != nil {
		return nil, err
	} else if ok {
		body = append(body, yaml.MapItem{Key: "allowed_lateness", Value: durString(late)})
	}
	var aggm yaml.MapSlice
	for _, d := range defs {
		aggm = append(aggm, yaml.MapItem{Key: d.name, Value: d.fn + "(" + d.col + ")"})
	}
	body = append(body, yaml.MapItem{Key: "aggregates", Value: aggm})
	node := q.tr.addStage(q.base, "window", []string{src.node}, body, q.at("group"))
	out := &rel{node: node, types: map[string]string{}, evt: "window_end", windowed: true, win: call, off: in.off}
	for _, k := range keys {
		if k == "window_start" || k == "window_end" {
			continue
		}
		out.cols = append(out.cols, k)
		out.types[k] = sc.types[k]
	}
	out.cols = append(out.cols, "window_start", "window_end")
	out.types["window_start"], out.types["window_end"] = "ts", "ts"
	for _, d := range defs {
		out.cols = append(out.cols, d.name)
		out.types[d.name] = d.typ
	}
	osc := &scope{types: out.types}
	for _, e := range sc.entries {
		for _, c := range out.cols {
			if e.phys == c {
				osc.entries = append(osc.entries, e)
			}
		}
	}
	for _, d := range defs {
		osc.entries = append(osc.entries, scopeCol{name: d.name, phys: d.name})
	}
	for k := range computed {
		if !strings.HasPrefix(k, "agg_arg_") {
			osc.entries = append(osc.entries, scopeCol{name: k, phys: k})
		}
	}
	ag := &aggs{groups: groups, legacy: legacy, resolve: func(e sqlparser.Expr) (string, string, error) {
		d := byKey[sqlparser.String(e)]
		if d == nil {
			return "", "", q.errf(e, "aggregate not found")
		}
		return d.name, d.typ, nil
	}}
	cur := out
	if sel.Having != nil {
		cond, _, err := q.expr(sel.Having.Expr, osc, ag)
		if err != nil {
			return nil, err
		}
		cur = q.derive(out, q.tr.addStage(q.base, "filter", []string{out.node}, cond, q.at("having")))
	}
	return q.projectAgg(cur, osc, items, names, ag)
}

// legacyWindow reads GROUP BY TUMBLE(ts, INTERVAL ...), HOP(ts, slide, size)
// or SESSION(ts, gap).
func (q *qctx) legacyWindow(f *sqlparser.FuncExpr, fn string, sc *scope, in *rel) (*tvfCall, error) {
	if len(f.Exprs) < 2 {
		return nil, q.errf(f, "%s(time_column, INTERVAL ...)", strings.ToUpper(fn))
	}
	c, ok := f.Exprs[0].(*sqlparser.ColName)
	if !ok {
		return nil, q.errf(f, "%s: the first argument is the time column", strings.ToUpper(fn))
	}
	phys, err := sc.resolve(c.Qualifier.Name.String(), c.Name.String())
	if err != nil {
		return nil, q.errf(c, "%v", err)
	}
	if phys != in.evt {
		return nil, q.errf(c, "%s: floe windows a stream by its event time, %s (the WATERMARK column)", strings.ToUpper(fn), in.evt)
	}
	call := &tvfCall{kind: map[string]string{"tumble": "tumble", "hop": "hop", "session": "session"}[fn], timecol: phys, off: q.at(fn)}
	for _, a := range f.Exprs[1:] {
		d, ok := intervalOf(a)
		if !ok {
			return nil, q.errf(a, "%s: want INTERVAL 'n' UNIT", strings.ToUpper(fn))
		}
		call.durations = append(call.durations, d)
	}
	return call, nil
}

// intervalOf reads a rewritten INTERVAL literal.
func intervalOf(e sqlparser.Expr) (time.Duration, bool) {
	f, ok := e.(*sqlparser.FuncExpr)
	if !ok || f.Name.String() != "__floe_interval" || len(f.Exprs) != 1 {
		return 0, false
	}
	lit, ok := f.Exprs[0].(*sqlparser.Literal)
	if !ok {
		return 0, false
	}
	us, err := strconv.ParseInt(lit.Val, 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(us) * time.Microsecond, true
}

// timeBucket recognises DATE_FORMAT(event_time, layout) whose layout names
// a whole day (hour, minute) of the time: year, month, day and nothing
// finer than its unit.
func (q *qctx) timeBucket(g sqlparser.Expr, in *rel) *tvfCall {
	f, ok := g.(*sqlparser.FuncExpr)
	if !ok || !strings.EqualFold(f.Name.String(), "date_format") || len(f.Exprs) != 2 {
		return nil
	}
	c, ok := f.Exprs[0].(*sqlparser.ColName)
	if !ok || c.Name.String() != in.evt {
		return nil
	}
	lit, ok := f.Exprs[1].(*sqlparser.Literal)
	if !ok || lit.Type != sqlparser.StrVal {
		return nil
	}
	l := lit.Val
	if !strings.Contains(l, "yyyy") || !strings.Contains(l, "MM") || !strings.Contains(l, "dd") ||
		strings.ContainsAny(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(l, "yyyy", ""), "MM", ""), "dd", ""), "HH", ""), "mm", ""), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'") {
		return nil
	}
	size := 24 * time.Hour
	if strings.Contains(l, "HH") {
		size = time.Hour
		if strings.Contains(l, "mm") {
			size = time.Minute
		}
	} else if strings.Contains(l, "mm") {
		return nil
	}
	return &tvfCall{kind: "tumble", timecol: in.evt, durations: []time.Duration{size}, off: q.at("group")}
}

func isDistinct(e sqlparser.Expr) bool {
	switch x := e.(type) {
	case *sqlparser.Sum:
		return x.Distinct
	case *sqlparser.Min:
		return x.Distinct
	case *sqlparser.Max:
		return x.Distinct
	case *sqlparser.Avg:
		return x.Distinct
	}
	return false
}

// projectAgg is project with aggregates resolved.
func (q *qctx) projectAgg(in *rel, sc *scope, items []item, names []string, ag *aggs) (*rel, error) {
	if names == nil {
		var vis []scopeCol
		for _, it := range items {
			phys := ""
			switch x := it.expr.(type) {
			case *sqlparser.ColName:
				p, err := sc.resolve(x.Qualifier.Name.String(), x.Name.String())
				if err != nil {
					return nil, q.errf(x, "%v", err)
				}
				phys = p
			case *sqlparser.Count, *sqlparser.CountStar, *sqlparser.Sum, *sqlparser.Min, *sqlparser.Max, *sqlparser.Avg:
				p, _, err := ag.resolve(x)
				if err != nil {
					return nil, err
				}
				phys = p
			}
			if col, ok := ag.groups[sqlparser.String(it.expr)]; ok {
				phys = col
			}
			if phys == "" {
				vis = nil
				break
			}
			vis = append(vis, scopeCol{name: it.name, phys: phys})
		}
		if vis != nil {
			out := *in
			out.vis = vis
			return &out, nil
		}
	}
	var cols yaml.MapSlice
	out := &rel{types: map[string]string{}, evt: in.evt, off: in.off, windowed: in.windowed, win: in.win}
	for i, it := range items {
		name := it.name
		if i < len(names) {
			name = names[i]
		}
		ex, typ, err := q.expr(it.expr, sc, ag)
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			if c.Key == name {
				return nil, q.errf(it.expr, "the column name %s appears twice in the SELECT list; give one an alias", name)
			}
		}
		cols = append(cols, yaml.MapItem{Key: name, Value: ex})
		out.cols = append(out.cols, name)
		out.types[name] = typ
	}
	if !out.has(in.evt) {
		cols = append(cols, yaml.MapItem{Key: in.evt, Value: exprName(in.evt)})
		out.cols = append(out.cols, in.evt)
		out.types[in.evt] = "ts"
	}
	if !out.has("window_start") {
		out.windowed = false
	}
	identity := len(out.cols) == len(in.cols)
	for i := range cols {
		if identity && (in.cols[i] != cols[i].Key || cols[i].Value != exprName(in.cols[i])) {
			identity = false
		}
	}
	if identity {
		out.node = in.node
		return out, nil
	}
	out.node = q.tr.addStage(q.base, "project", []string{in.node}, cols, q.at("select"))
	return out, nil
}

// topN recognises SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY
// ... ORDER BY ...) AS rn FROM ...) WHERE rn <= N.
func (q *qctx) topN(sel *sqlparser.Select, names []string) (*rel, bool, error) {
	ate, ok := sel.From[0].(*sqlparser.AliasedTableExpr)
	if !ok {
		return nil, false, nil
	}
	dt, ok := ate.Expr.(*sqlparser.DerivedTable)
	if !ok {
		return nil, false, nil
	}
	inner, ok := dt.Select.(*sqlparser.Select)
	if !ok {
		return nil, false, nil
	}
	rnIdx := -1
	var rn *sqlparser.ArgumentLessWindowExpr
	rnName := ""
	for i, se := range inner.SelectExprs.Exprs {
		if ae, ok := se.(*sqlparser.AliasedExpr); ok {
			if w, ok := ae.Expr.(*sqlparser.ArgumentLessWindowExpr); ok {
				if w.Type != sqlparser.RowNumberExprType {
					return nil, true, q.errf(w, "only ROW_NUMBER() is supported (RANK and DENSE_RANK are not)")
				}
				rnIdx, rn, rnName = i, w, ae.As.String()
			}
		}
	}
	if rn == nil {
		return nil, false, nil
	}
	if rnName == "" {
		return nil, true, q.errf(rn, "ROW_NUMBER() needs an alias (AS rownum) for the outer WHERE to filter on")
	}
	if rn.OverClause == nil || rn.OverClause.WindowSpec == nil || len(rn.OverClause.WindowSpec.OrderClause) == 0 {
		return nil, true, q.errf(rn, "ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) needs an ORDER BY")
	}
	// the outer WHERE: rn <= N / rn < N / rn = 1, and other conditions
	n := int64(0)
	var rest []sqlparser.Expr
	if sel.Where != nil {
		for _, c := range splitAnd(sel.Where.Expr) {
			if cmp, ok := c.(*sqlparser.ComparisonExpr); ok {
				if col, ok := cmp.Left.(*sqlparser.ColName); ok && col.Name.String() == rnName {
					lit, ok := cmp.Right.(*sqlparser.Literal)
					if !ok || lit.Type != sqlparser.IntVal {
						return nil, true, q.errf(cmp, "compare %s with a constant", rnName)
					}
					v, _ := strconv.ParseInt(lit.Val, 10, 64)
					switch cmp.Operator {
					case sqlparser.LessEqualOp:
						n = v
					case sqlparser.LessThanOp:
						n = v - 1
					case sqlparser.EqualOp:
						if v != 1 {
							return nil, true, q.errf(cmp, "%s = %d: only = 1 (deduplication) or <= N", rnName, v)
						}
						n = 1
					default:
						return nil, true, q.errf(cmp, "filter %s by <= N, < N or = 1", rnName)
					}
					continue
				}
			}
			rest = append(rest, c)
		}
	}
	if n < 1 {
		return nil, true, q.errf(rn, "ROW_NUMBER() without an outer WHERE %s <= N: every row would be kept with its changing rank; floe emits a Top-N, filter on the rank", rnName)
	}
	// the inner query without the ROW_NUMBER item
	cp := *inner
	exprs := append([]sqlparser.SelectExpr(nil), inner.SelectExprs.Exprs[:rnIdx]...)
	exprs = append(exprs, inner.SelectExprs.Exprs[rnIdx+1:]...)
	cp.SelectExprs = &sqlparser.SelectExprs{Exprs: exprs}
	if len(exprs) == 0 {
		cp.SelectExprs = &sqlparser.SelectExprs{Exprs: []sqlparser.SelectExpr{&sqlparser.StarExpr{}}}
	}
	r, err := q.selectRel(&cp, nil)
	if err != nil {
		return nil, true, err
	}
	sc := relScope(r, ate.As.String())
	spec := rn.OverClause.WindowSpec
	var keys []string
	hasStart, hasEnd := false, false
	for _, p := range spec.PartitionClause {
		c, ok := p.(*sqlparser.ColName)
		if !ok {
			return nil, true, q.errf(p, "PARTITION BY takes columns")
		}
		phys, err := sc.resolve(innerName(exprs, c))
		if err != nil {
			return nil, true, q.errf(c, "%v", err)
		}
		switch phys {
		case "window_start":
			hasStart = true
		case "window_end":
			hasEnd = true
		default:
			keys = append(keys, phys)
		}
	}
	var order []string
	for _, o := range spec.OrderClause {
		c, ok := o.Expr.(*sqlparser.ColName)
		if !ok {
			return nil, true, q.errf(o.Expr, "ORDER BY of ROW_NUMBER takes columns")
		}
		phys, err := sc.resolve(innerName(exprs, c))
		if err != nil {
			return nil, true, q.errf(c, "%v", err)
		}
		s := phys
		if o.Direction == sqlparser.DescOrder {
			s += " desc"
		}
		order = append(order, s)
	}
	body := yaml.MapSlice{{Key: "n", Value: n}, {Key: "order_by", Value: order}}
	if len(keys) > 0 { // no key: one group per window (key: [] would hash differently)
		body = append(body, yaml.MapItem{Key: "key", Value: keys})
	}
	var dedup yaml.MapSlice // a dedup stage's body, when it is one
	switch {
	case hasStart && hasEnd && r.windowed:
	case hasStart && hasEnd && r.tvf != nil:
		if r.tvf.kind != "tumble" {
			return nil, true, q.errf(rn, "a Top-N over the rows of a %s window: only TUMBLE (aggregate first for HOP and SESSION)", strings.ToUpper(r.tvf.kind))
		}
		body = append(body, yaml.MapItem{Key: "tumbling", Value: durString(r.tvf.durations[0])})
	case hasStart || hasEnd:
		return nil, true, q.errf(rn, "ROW_NUMBER() partitioned by a window's bounds: partition by both window_start and window_end, of a window table function's rows or a window's GROUP BY results")
	default:
		ttl, hasTTL, err := q.ttl()
		if err != nil {
			return nil, true, err
		}
		if !hasTTL || r.evt == "" {
			return nil, true, q.errf(rn, "ROW_NUMBER() over the whole stream keeps every partition's rows forever (an unbounded Top-N or deduplication); floe runs it per window: PARTITION BY window_start, window_end, ... over a window table function or its GROUP BY results, or %s", ttlHint)
		}
		if n == 1 && len(keys) > 0 && len(order) == 1 && strings.TrimSuffix(order[0], " desc") == r.evt {
			// deduplication on the event time: a dedup whose scope is the TTL
			keep := "first"
			if strings.HasSuffix(order[0], " desc") {
				keep = "last"
			}
			dedup = yaml.MapSlice{{Key: "key", Value: keys}, {Key: "keep", Value: keep}, {Key: "within", Value: durString(ttl)}}
		} else {
			// a Top-N ranked in tumbling windows of the TTL
			body = append(body, yaml.MapItem{Key: "tumbling", Value: durString(ttl)})
		}
	}
	late, hasLate, err := q.lateness()
	if err != nil {
		return nil, true, err
	}
	kind := "top_n"
	if dedup != nil {
		kind, body = "dedup", dedup
	}
	if hasLate {
		body = append(body, yaml.MapItem{Key: "allowed_lateness", Value: durString(late)})
	}
	if dedup == nil {
		body = append(body, yaml.MapItem{Key: "rank_column", Value: rnName})
	}
	node := q.tr.addStage(q.base, kind, []string{r.node}, body, q.at("row_number"))
	out := &rel{node: node, types: map[string]string{}, evt: r.evt, windowed: r.windowed, off: r.off}
	out.cols = append(out.cols, r.cols...)
	for k, v := range r.types {
		out.types[k] = v
	}
	if r.vis != nil { // the inner query's names over its columns
		out.vis = append([]scopeCol(nil), r.vis...)
	}
	if dedup != nil && selectsColumn(sel, rnName) {
		// a dedup has no rank column: the outer query reads rn, which is 1
		var cols yaml.MapSlice
		for _, c := range out.cols {
			cols = append(cols, yaml.MapItem{Key: c, Value: exprName(c)})
		}
		cols = append(cols, yaml.MapItem{Key: rnName, Value: "1"})
		out = q.derive(out, q.tr.addStage(q.base, "project", []string{out.node}, cols, q.at("row_number")))
		dedup = nil
	}
	if dedup == nil {
		out.cols = append(out.cols, rnName)
		out.types[rnName] = "int"
		if out.vis != nil {
			out.vis = append(out.vis, scopeCol{name: rnName, phys: rnName})
		}
	}
	osc := relScope(out, ate.As.String())
	cur := out
	if len(rest) > 0 {
		cond, _, err := q.expr(andAll(rest), osc, nil)
		if err != nil {
			return nil, true, err
		}
		cur = q.derive(out, q.tr.addStage(q.base, "filter", []string{out.node}, cond, q.at("where")))
	}
	items, err := q.items(sel, osc, cur)
	if err != nil {
		return nil, true, err
	}
	res, err := q.project(cur, osc, items, names)
	return res, true, err
}

// selectsColumn: sel's list reads the column name (or selects *).
func selectsColumn(sel *sqlparser.Select, name string) bool {
	found := false
	visit := func(node sqlparser.SQLNode) (bool, error) {
		switch x := node.(type) {
		case *sqlparser.StarExpr:
			found = true
		case *sqlparser.ColName:
			if x.Name.EqualString(name) {
				found = true
			}
		}
		return !found, nil
	}
	_ = sqlparser.Walk(visit, sel.SelectExprs)
	return found
}

// innerName is how the OVER clause's column c, named as the inner query's
// FROM names it (B.price), is called among the inner query's items exprs
// (price; B.dateTime AS bid_dateTime: bid_dateTime): the qualifier and
// name to resolve in the inner query's output.
func innerName(exprs []sqlparser.SelectExpr, c *sqlparser.ColName) (string, string) {
	qual, name := c.Qualifier.Name.String(), c.Name.String()
	if qual == "" {
		return qual, name
	}
	for _, se := range exprs {
		if ae, ok := se.(*sqlparser.AliasedExpr); ok {
			if x, ok := ae.Expr.(*sqlparser.ColName); ok && x.Name.EqualString(name) && strings.EqualFold(x.Qualifier.Name.String(), qual) {
				if !ae.As.IsEmpty() {
					return "", ae.As.String()
				}
				return "", x.Name.String()
			}
		}
	}
	for _, se := range exprs {
		if st, ok := se.(*sqlparser.StarExpr); ok && (st.TableName.IsEmpty() || strings.EqualFold(st.TableName.Name.String(), qual)) {
			return "", name
		}
	}
	return qual, name
}

func splitAnd(e sqlparser.Expr) []sqlparser.Expr {
	if a, ok := e.(*sqlparser.AndExpr); ok {
		return append(splitAnd(a.Left), splitAnd(a.Right)...)
	}
	return []sqlparser.Expr{e}
}

func andAll(es []sqlparser.Expr) sqlparser.Expr {
	e := es[0]
	for _, x := range es[1:] {
		e = &sqlparser.AndExpr{Left: e, Right: x}
	}
	return e
}

// timeRef is a column of one join side plus a constant offset.
type timeRef struct {
	side int // 0 left, 1 right
	col  string
	d    time.Duration
}

// join lowers a JOIN.
func (q *qctx) join(t *sqlparser.JoinTableExpr) (*rel, *scope, error) {
	typ := ""
	switch t.Join {
	case sqlparser.NormalJoinType:
		typ = "inner"
	case sqlparser.LeftJoinType:
		typ = "left"
	default:
		return nil, nil, q.errf(t, "only INNER and LEFT joins are supported")
	}
	if t.Condition == nil || t.Condition.On == nil {
		return nil, nil, q.errf(t, "a join needs ON conditions")
	}
	left, lsc, err := q.from(t.LeftExpr)
	if err != nil {
		return nil, nil, err
	}
	right, rsc, err := q.from(t.RightExpr)
	if err != nil {
		return nil, nil, err
	}
	if left.lookup != nil {
		return nil, nil, q.errf(t, "a lookup table must be the right side of the join")
	}
	side := func(e sqlparser.Expr) (int, string, bool) {
		c, ok := e.(*sqlparser.ColName)
		if !ok {
			return 0, "", false
		}
		if p, err := lsc.resolve(c.Qualifier.Name.String(), c.Name.String()); err == nil {
			if _, err2 := rsc.resolve(c.Qualifier.Name.String(), c.Name.String()); err2 == nil && c.Qualifier.Name.String() == "" {
				return 0, "", false
			}
			return 0, p, true
		}
		if p, err := rsc.resolve(c.Qualifier.Name.String(), c.Name.String()); err == nil {
			return 1, p, true
		}
		return 0, "", false
	}
	var lk, rk []string
	var lkExpr []sqlparser.Expr
	winStart, winEnd := false, false
	var lower, upper *time.Duration
	ltime, rtime := "", ""
	var rest []sqlparser.Expr
	ref := func(e sqlparser.Expr) (timeRef, bool) {
		var d time.Duration
		if b, ok := e.(*sqlparser.BinaryExpr); ok && (b.Operator == sqlparser.PlusOp || b.Operator == sqlparser.MinusOp) {
			f, ok := b.Right.(*sqlparser.FuncExpr)
			if !ok || f.Name.String() != "__floe_interval" || len(f.Exprs) != 1 {
				return timeRef{}, false
			}
			lit, ok := f.Exprs[0].(*sqlparser.Literal)
			if !ok {
				return timeRef{}, false
			}
			us, _ := strconv.ParseInt(lit.Val, 10, 64)
			d = time.Duration(us) * time.Microsecond
			if b.Operator == sqlparser.MinusOp {
				d = -d
			}
			e = b.Left
		}
		s, c, ok := side(e)
		if !ok {
			return timeRef{}, false
		}
		typs := lsc.types
		if s == 1 {
			typs = rsc.types
		}
		if typs[c] != "ts" {
			return timeRef{}, false
		}
		return timeRef{side: s, col: c, d: d}, true
	}
	// bound records x >= y (ge) or x <= y.
	bound := func(x, y timeRef, ge bool) bool {
		if x.side == y.side {
			return false
		}
		// normalise to r - l (op) c
		var r, l timeRef
		c := y.d - x.d // x.col - y.col (op) c
		if x.side == 1 {
			r, l = x, y
		} else {
			r, l = y, x
			c, ge = -c, !ge
		}
		if (ltime != "" && ltime != l.col) || (rtime != "" && rtime != r.col) {
			return false
		}
		ltime, rtime = l.col, r.col
		if ge {
			v := -c
			lower = &v
		} else {
			v := c
			upper = &v
		}
		return true
	}
	for _, c := range splitAnd(t.Condition.On) {
		switch x := c.(type) {
		case *sqlparser.ComparisonExpr:
			if x.Operator == sqlparser.EqualOp {
				ls, lc, lok := side(x.Left)
				rs, rc, rok := side(x.Right)
				if lok && rok && ls != rs {
					if ls == 1 {
						lc, rc = rc, lc
					}
					if lc == "window_start" && rc == "window_start" {
						winStart = true
						continue
					}
					if lc == "window_end" && rc == "window_end" {
						winEnd = true
						continue
					}
					lk, rk = append(lk, lc), append(rk, rc)
					continue
				}
				if right.lookup != nil && rok && rs == 1 && !lok {
					lk, rk = append(lk, ""), append(rk, rc)
					lkExpr = append(lkExpr, x.Left)
					continue
				}
			}
			if x.Operator == sqlparser.GreaterEqualOp || x.Operator == sqlparser.LessEqualOp || x.Operator == sqlparser.GreaterThanOp || x.Operator == sqlparser.LessThanOp {
				a, aok := ref(x.Left)
				b, bok := ref(x.Right)
				if aok && bok && bound(a, b, x.Operator == sqlparser.GreaterEqualOp || x.Operator == sqlparser.GreaterThanOp) {
					continue
				}
			}
		case *sqlparser.BetweenExpr:
			if x.IsBetween {
				a, aok := ref(x.Left)
				lo, lok := ref(x.From)
				hi, hok := ref(x.To)
				if aok && lok && hok && lo.side == hi.side && lo.col == hi.col && bound(a, lo, true) && bound(a, hi, false) {
					continue
				}
			}
		}
		rest = append(rest, c)
	}
	if pushJoinConditions && typ == "inner" && right.lookup == nil && len(rest) > 0 {
		// An inner join's condition on the columns of one side only is that
		// side's filter, applied before the join: the same pairs result, and
		// the join holds and pairs only the rows that can match (q20's
		// category = 10 keeps one auction in five and pairs a fifth of the
		// bids it did, instead of filtering all pairs after). The filter
		// after the join keeps every condition all the same: state written
		// by a floe that filtered only after the join holds rows of either
		// side that fail them, and its pairs must still be dropped (with
		// none failing, the filter passes its batches on as they are).
		var only [2][]sqlparser.Expr
		for _, c := range rest {
			if s := oneSide(c, side); s >= 0 {
				only[s] = append(only[s], c)
			}
		}
		for s, conds := range only {
			if len(conds) == 0 {
				continue
			}
			r, sc := left, lsc
			if s == 1 {
				r, sc = right, rsc
			}
			cond, _, err := q.expr(andAll(conds), sc, nil)
			if err != nil {
				return nil, nil, err
			}
			r = q.derive(r, q.tr.addStage(q.base, "filter", []string{r.node}, cond, q.at("on")))
			if s == 0 {
				left = r
			} else {
				right = r
			}
		}
	}
	if len(rk) == 0 && winStart && winEnd && left.windowed && right.windowed {
		// a window join of window results without other keys: one key for
		// all (a project on each side adds it and keeps the window bounds)
		keyed := func(r *rel) *rel {
			var cols yaml.MapSlice
			for _, c := range r.cols {
				cols = append(cols, yaml.MapItem{Key: c, Value: exprName(c)})
			}
			cols = append(cols, yaml.MapItem{Key: "window_key", Value: "0"})
			n := q.derive(r, q.tr.addStage(q.base, "project", []string{r.node}, cols, q.at("join")))
			n.cols = append(append([]string(nil), r.cols...), "window_key")
			n.types = map[string]string{"window_key": "int"}
			for k, v := range r.types {
				n.types[k] = v
			}
			return n
		}
		left, right = keyed(left), keyed(right)
		lk, rk = []string{"window_key"}, []string{"window_key"}
	}
	if len(rk) == 0 {
		return nil, nil, q.errf(t, "a join needs at least one equality between the two sides' columns")
	}
	if right.lookup != nil {
		return q.lookupJoin(t, typ, left, lsc, right, lk, lkExpr, rk, rest)
	}
	ttl, hasTTL, err := q.ttl()
	if err != nil {
		return nil, nil, err
	}
	if hasTTL && !winStart && !winEnd && (lower == nil || upper == nil) && left.evt != "" && right.evt != "" {
		// a regular join under a state TTL: an interval join of ±TTL on
		// the two sides' event times (a bound the ON gives is kept)
		if lower == nil {
			lower = &ttl
		}
		if upper == nil {
			upper = &ttl
		}
		if ltime == "" {
			ltime = left.evt
		}
		if rtime == "" {
			rtime = right.evt
		}
	}
	body := yaml.MapSlice{{Key: "type", Value: typ}, {Key: "left_on", Value: lk}, {Key: "right_on", Value: rk}}
	out := &rel{types: map[string]string{}, off: left.off}
	osc := &scope{types: out.types}
	windowedJoin, results := false, false
	switch {
	case winStart || winEnd:
		if !(winStart && winEnd) {
			return nil, nil, q.errf(t, "a window join equates both window_start and window_end")
		}
		var shape yaml.MapSlice
		switch {
		case left.tvf != nil && right.tvf != nil:
			if left.tvf.kind != right.tvf.kind || fmt.Sprint(left.tvf.durations) != fmt.Sprint(right.tvf.durations) {
				return nil, nil, q.errf(t, "a window join's two sides must use the same window")
			}
			s, err := q.windowBody(left.tvf)
			if err != nil {
				return nil, nil, err
			}
			shape = s
		case left.windowed && right.windowed && left.win != nil && right.win != nil:
			if left.win.kind != right.win.kind || fmt.Sprint(left.win.durations) != fmt.Sprint(right.win.durations) {
				return nil, nil, q.errf(t, "a window join's two sides must be results of the same window")
			}
			s, err := q.windowBody(left.win)
			if err != nil {
				return nil, nil, err
			}
			shape = s
			results = true
		default:
			return nil, nil, q.errf(t, "a window join joins the rows of two window table functions of the same window, or the GROUP BY results of the same window, on window_start and window_end")
		}
		if _, ok := shape[0].Value.(yaml.MapSlice); ok && shape[0].Key == "session" {
			return nil, nil, q.errf(t, "a window join over SESSION windows: not supported")
		}
		body = append(body, yaml.MapItem{Key: "window", Value: shape})
		windowedJoin = true
	case lower != nil && upper != nil:
		body = append(body, yaml.MapItem{Key: "interval", Value: yaml.MapSlice{{Key: "lower", Value: durString(*lower)}, {Key: "upper", Value: durString(*upper)}}})
		if ltime != left.evt {
			body = append(body, yaml.MapItem{Key: "left_time", Value: ltime})
		}
		if rtime != right.evt {
			body = append(body, yaml.MapItem{Key: "right_time", Value: rtime})
		}
	case lower != nil || upper != nil:
		return nil, nil, q.errf(t, "a regular join keeps both sides' rows forever: its time condition must bound one side's time by the other's on both sides, within constants (a.ts BETWEEN b.ts - INTERVAL '...' AND b.ts + INTERVAL '...'), to be an interval join; or %s", ttlHint)
	default:
		return nil, nil, q.errf(t, "a regular join keeps both sides' rows forever (unbounded state); bound it by time: ON ... AND a.ts BETWEEN b.ts - INTERVAL '...' AND b.ts + INTERVAL '...' (an interval join), join the rows of the same window (a window join), or %s", ttlHint)
	}
	if late, ok, err := q.lateness(); err != nil {
		return nil, nil, err
	} else if ok {
		body = append(body, yaml.MapItem{Key: "allowed_lateness", Value: durString(late)})
	}
	node := q.tr.addStage(q.base, "join", []string{left.node, right.node}, body, q.at("join"))
	out.node = node
	taken := map[string]bool{}
	isBound := func(c string) bool { return results && (c == "window_start" || c == "window_end") }
	for _, c := range left.cols {
		if isBound(c) {
			continue
		}
		out.cols = append(out.cols, c)
		out.types[c] = left.types[c]
		taken[c] = true
	}
	for _, e := range lsc.entries {
		if taken[e.phys] && e.phys != "window_start" && e.phys != "window_end" {
			osc.entries = append(osc.entries, e)
		}
	}
	for _, c := range right.cols {
		if isBound(c) {
			continue
		}
		name := c
		if taken[c] {
			name = "right_" + c
		}
		out.cols = append(out.cols, name)
		out.types[name] = right.types[c]
		for _, e := range rsc.entries {
			if e.phys == c {
				osc.entries = append(osc.entries, scopeCol{qual: e.qual, name: e.name, phys: name})
			}
		}
	}
	if windowedJoin {
		out.cols = append(out.cols, "window_start", "window_end")
		out.types["window_start"], out.types["window_end"] = "ts", "ts"
		for _, e := range append(append([]scopeCol{}, lsc.entries...), rsc.entries...) {
			if e.phys == "window_start" || e.phys == "window_end" {
				osc.entries = append(osc.entries, e)
			}
		}
		out.evt, out.windowed = "window_end", true
		out.win = left.tvf
		if results {
			out.win = left.win
		}
	} else {
		out.evt = left.evt
	}
	if len(rest) > 0 {
		if typ == "left" {
			return nil, nil, q.errf(rest[0], "a LEFT JOIN's ON takes only equalities and the time bound")
		}
		cond, _, err := q.expr(andAll(rest), osc, nil)
		if err != nil {
			return nil, nil, err
		}
		out = q.derive(out, q.tr.addStage(q.base, "filter", []string{out.node}, cond, q.at("on")))
	}
	return out, osc, nil
}

// lookupJoin lowers a join with a table read whole from files.
func (q *qctx) lookupJoin(t *sqlparser.JoinTableExpr, typ string, left *rel, lsc *scope, right *rel, lk []string, lkExpr []sqlparser.Expr, rk []string, rest []sqlparser.Expr) (*rel, *scope, error) {
	if len(rest) > 0 {
		return nil, nil, q.errf(rest[0], "a lookup join's ON takes only equalities")
	}
	tb := right.lookup
	in := left
	if len(lkExpr) > 0 {
		var cols yaml.MapSlice
		for _, c := range left.cols {
			cols = append(cols, yaml.MapItem{Key: c, Value: exprName(c)})
		}
		ni := 0
		for i := range lk {
			if lk[i] != "" {
				continue
			}
			ex, _, err := q.expr(lkExpr[ni], lsc, nil)
			if err != nil {
				return nil, nil, err
			}
			name := rk[i]
			for left.has(name) {
				name = "lookup_" + name
			}
			cols = append(cols, yaml.MapItem{Key: name, Value: ex})
			lk[i] = name
			ni++
		}
		node := q.tr.addStage(q.base, "project", []string{left.node}, cols, q.at("join"))
		in = q.derive(left, node)
		in.cols = nil
		for _, c := range cols {
			in.cols = append(in.cols, c.Key.(string))
		}
	}
	opts, err := q.tr.fileOpts(tb, "lookup")
	if err != nil {
		return nil, nil, err
	}
	body := yaml.MapSlice{}
	for _, o := range opts {
		if o.Key == "type" {
			continue
		}
		body = append(body, o)
	}
	var schema yaml.MapSlice
	for _, c := range tb.cols {
		schema = append(schema, yaml.MapItem{Key: c.name, Value: string(c.typ)})
	}
	body = append(body, yaml.MapItem{Key: "schema", Value: schema}, yaml.MapItem{Key: "type", Value: typ},
		yaml.MapItem{Key: "left_on", Value: lk}, yaml.MapItem{Key: "right_on", Value: rk})
	node := q.tr.addStage(q.base, "lookup", []string{in.node}, body, q.at("join"))
	out := &rel{node: node, types: map[string]string{}, evt: left.evt, off: left.off, windowed: left.windowed}
	osc := &scope{types: out.types}
	taken := map[string]bool{}
	for _, c := range in.cols {
		out.cols = append(out.cols, c)
		out.types[c] = in.types[c]
		taken[c] = true
	}
	osc.entries = append(osc.entries, lsc.entries...)
	rsc := relScope(right, "")
	isKey := map[string]string{}
	for i, k := range rk {
		isKey[k] = lk[i]
	}
	for _, e := range rsc.entries {
		_ = e
	}
	for _, c := range tb.cols {
		for _, e := range q.rightEntries(t, c.name) {
			if lkc, ok := isKey[c.name]; ok {
				osc.entries = append(osc.entries, scopeCol{qual: e, name: c.name, phys: lkc})
				continue
			}
			name := c.name
			if taken[name] {
				name = "right_" + name
			}
			osc.entries = append(osc.entries, scopeCol{qual: e, name: c.name, phys: name})
		}
		if _, ok := isKey[c.name]; !ok {
			name := c.name
			if taken[name] {
				name = "right_" + name
			}
			out.cols = append(out.cols, name)
			out.types[name] = evalType(c.typ)
			osc.types[name] = evalType(c.typ)
		}
	}
	return out, osc, nil
}

// rightEntries returns the qualifiers the join's right side answers to.
func (q *qctx) rightEntries(t *sqlparser.JoinTableExpr, _ string) []string {
	if a, ok := t.RightExpr.(*sqlparser.AliasedTableExpr); ok {
		if a.As.String() != "" {
			return []string{strings.ToLower(a.As.String())}
		}
		if tn, ok := a.Expr.(sqlparser.TableName); ok {
			return []string{strings.ToLower(tn.Name.String())}
		}
	}
	return []string{""}
}

// over lowers a SELECT with aggregates OVER (PARTITION BY ... ORDER BY t
// ROWS BETWEEN n PRECEDING AND CURRENT ROW) to an over stage and a project.
func (q *qctx) over(in *rel, sc *scope, items []item, names []string) (*rel, error) {
	if in.tvf != nil {
		return nil, q.errf(nil, "an OVER aggregate over a window table function's rows: not supported")
	}
	var spec *sqlparser.WindowSpecification
	specText := ""
	type overAgg struct {
		key, name, fn, col, typ string
	}
	var defs []*overAgg
	byKey := map[string]*overAgg{}
	var werr error
	for i, it := range items {
		name := it.name
		if i < len(names) {
			name = names[i]
		}
		_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
			oc := overOf(n)
			if oc == nil || werr != nil {
				return true, nil
			}
			if oc.WindowSpec == nil {
				werr = q.errf(n.(sqlparser.Expr), "OVER w (a named window): write the window in place")
				return false, nil
			}
			if specText == "" {
				spec, specText = oc.WindowSpec, sqlparser.String(oc.WindowSpec)
			} else if sqlparser.String(oc.WindowSpec) != specText {
				werr = q.errf(n.(sqlparser.Expr), "every OVER aggregate of a SELECT must use the same window")
				return false, nil
			}
			k := sqlparser.String(n)
			if byKey[k] != nil {
				return false, nil
			}
			d := &overAgg{key: k}
			var arg sqlparser.Expr
			switch x := n.(type) {
			case *sqlparser.CountStar:
				d.fn, d.typ = "count", "int"
			case *sqlparser.Count:
				if x.Distinct || len(x.Args) != 1 {
					werr = q.errf(x, "COUNT(DISTINCT ...) OVER: not supported")
					return false, nil
				}
				d.fn, d.typ, arg = "count", "int", x.Args[0]
			case *sqlparser.Sum:
				d.fn, arg = "sum", x.Arg
			case *sqlparser.Min:
				d.fn, arg = "min", x.Arg
			case *sqlparser.Max:
				d.fn, arg = "max", x.Arg
			case *sqlparser.Avg:
				d.fn, d.typ, arg = "avg", "float", x.Arg
			}
			if arg != nil {
				c, ok := arg.(*sqlparser.ColName)
				if !ok {
					werr = q.errf(arg, "an OVER aggregate takes a column; compute the expression in a subquery first")
					return false, nil
				}
				phys, err := sc.resolve(c.Qualifier.Name.String(), c.Name.String())
				if err != nil {
					werr = q.errf(c, "%v", err)
					return false, nil
				}
				d.col = phys
				if d.typ == "" {
					d.typ = sc.types[phys]
				}
			}
			d.name = fmt.Sprintf("over_%d", len(defs))
			if n == sqlparser.SQLNode(it.expr) {
				d.name = name
			}
			defs = append(defs, d)
			byKey[k] = d
			return false, nil
		}, it.expr)
		if werr != nil {
			return nil, werr
		}
	}
	var keys []string
	for _, p := range spec.PartitionClause {
		c, ok := p.(*sqlparser.ColName)
		if !ok {
			return nil, q.errf(p, "PARTITION BY takes columns")
		}
		phys, err := sc.resolve(c.Qualifier.Name.String(), c.Name.String())
		if err != nil {
			return nil, q.errf(c, "%v", err)
		}
		keys = append(keys, phys)
	}
	if len(spec.OrderClause) != 1 {
		return nil, q.errf(nil, "OVER (... ORDER BY t): order by one time column, ascending")
	}
	oc, ok := spec.OrderClause[0].Expr.(*sqlparser.ColName)
	if !ok || spec.OrderClause[0].Direction == sqlparser.DescOrder {
		return nil, q.errf(spec.OrderClause[0].Expr, "OVER (... ORDER BY t): order by one time column, ascending")
	}
	order, err := sc.resolve(oc.Qualifier.Name.String(), oc.Name.String())
	if err != nil {
		return nil, q.errf(oc, "%v", err)
	}
	if sc.types[order] != "ts" {
		return nil, q.errf(oc, "OVER (... ORDER BY %s): floe orders by a timestamp column (event time)", order)
	}
	f := spec.FrameClause
	if f == nil || f.Unit != sqlparser.FrameRowsType || f.Start == nil || f.Start.Type != sqlparser.ExprPrecedingType ||
		(f.End != nil && f.End.Type != sqlparser.CurrentRowType) {
		return nil, q.errf(nil, "OVER needs ROWS BETWEEN n PRECEDING AND CURRENT ROW (a frame of RANGE or UNBOUNDED PRECEDING keeps every row of a partition)")
	}
	lit, ok := f.Start.Expr.(*sqlparser.Literal)
	if !ok || lit.Type != sqlparser.IntVal {
		return nil, q.errf(nil, "ROWS BETWEEN n PRECEDING: n must be a constant integer")
	}
	rows, _ := strconv.Atoi(lit.Val)
	body := yaml.MapSlice{}
	if len(keys) > 0 {
		body = append(body, yaml.MapItem{Key: "key", Value: keys})
	}
	body = append(body, yaml.MapItem{Key: "order_by", Value: order}, yaml.MapItem{Key: "rows", Value: rows})
	var aggm yaml.MapSlice
	for _, d := range defs {
		aggm = append(aggm, yaml.MapItem{Key: d.name, Value: d.fn + "(" + d.col + ")"})
	}
	body = append(body, yaml.MapItem{Key: "aggregates", Value: aggm})
	if late, ok, err := q.lateness(); err != nil {
		return nil, err
	} else if ok {
		body = append(body, yaml.MapItem{Key: "allowed_lateness", Value: durString(late)})
	}
	node := q.tr.addStage(q.base, "over", []string{in.node}, body, q.at("over"))
	out := q.derive(in, node)
	out.cols = append(append([]string(nil), in.cols...), func() []string {
		var ns []string
		for _, d := range defs {
			ns = append(ns, d.name)
		}
		return ns
	}()...)
	out.types = map[string]string{}
	for k, v := range in.types {
		out.types[k] = v
	}
	osc := &scope{types: out.types, entries: append([]scopeCol(nil), sc.entries...)}
	for _, d := range defs {
		out.types[d.name] = d.typ
		osc.entries = append(osc.entries, scopeCol{name: d.name, phys: d.name})
	}
	ag := &aggs{resolve: func(e sqlparser.Expr) (string, string, error) {
		d := byKey[sqlparser.String(e)]
		if d == nil {
			return "", "", q.errf(e, "an aggregate without OVER next to OVER aggregates")
		}
		return d.name, d.typ, nil
	}}
	return q.projectAgg(out, osc, items, names, ag)
}

// pushJoinConditions lowers an inner join's one-sided conditions as filters
// before the join too (off: the lowering before 2026-12, for the test that
// restores state written under it).
var pushJoinConditions = true

// oneSide returns the side (0 left, 1 right) whose columns are all that
// condition e refers to, or -1: when it refers to both, to none, to a
// column side cannot place, or holds what must not move below a join (a
// subquery, an aggregate, an OVER, a function whose value changes from call
// to call).
func oneSide(e sqlparser.Expr, side func(sqlparser.Expr) (int, string, bool)) int {
	found, ok := -1, true
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		switch x := n.(type) {
		case *sqlparser.ColName:
			s, _, placed := side(x)
			if !placed || (found >= 0 && s != found) {
				ok = false
				return false, nil
			}
			found = s
		case *sqlparser.Subquery, *sqlparser.CurTimeFuncExpr:
			ok = false
			return false, nil
		case *sqlparser.FuncExpr:
			switch strings.ToLower(x.Name.String()) {
			case "rand", "random", "uuid", "now", "proctime", "current_timestamp", "localtimestamp", "current_time", "current_date", "current_row_timestamp", "unix_timestamp":
				ok = false
				return false, nil
			}
		}
		if overOf(n) != nil {
			ok = false
			return false, nil
		}
		return true, nil
	}, e)
	if !ok || containsAgg(e) {
		return -1
	}
	return found
}
