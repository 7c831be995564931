package flinksql

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"vitess.io/vitess/go/vt/sqlparser"
)

// rel is a relation flowing through the graph: the node that produces it,
// its columns and its event-time column.
type rel struct {
	node  string
	cols  []string
	types map[string]string
	evt   string
	off   int
	// tvf is a window table function still to be applied to node's rows
	// (by a GROUP BY window_start, window_end, a window join or a window
	// Top-N); cols do not include window_start/window_end then.
	tvf *tvfCall
	// windowed: the rows are window results carrying window_start/window_end.
	windowed bool
	// lookup: the relation is a table read whole (a lookup join's right side).
	lookup *table
	// win is the window of window results (windowed).
	win *tvfCall
	// vis, when set, is what a SELECT of bare columns exposes: names over
	// the physical columns, which flow on unchanged (a project that only
	// renames or drops columns is not a stage of its own; the stage that
	// needs the names, a sink's final project, writes them).
	vis []scopeCol
	// reordered: node's rows carry cols in another order (a kafka table
	// whose METADATA columns are not declared last, in the source's
	// order), so selecting every column in order is not the identity.
	reordered bool
}

func (r *rel) has(c string) bool {
	for _, x := range r.cols {
		if x == c {
			return true
		}
	}
	return false
}

var parser = func() *sqlparser.Parser {
	p, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: "8.0.40"})
	if err != nil {
		panic(err) // a constant configuration
	}
	return p
}()

var posRE = regexp.MustCompile(`at position (\d+)(?: near '([^']*)')?`)

// query lowers a query's tokens (ending with tEOF) and returns its relation.
// names, when given, name the output columns (a sink's columns).
func (tr *translator) query(toks []token, base string, names []string) (*rel, error) {
	if len(toks) == 0 || toks[0].kind == tEOF {
		return nil, &lexError{toks[0].off, "want a SELECT"}
	}
	rw, err := rewriteSelect(toks, 0)
	if err != nil {
		return nil, err
	}
	stmt, err := parser.Parse(rw.text.String())
	if err != nil {
		off := toks[0].off
		msg := err.Error()
		if m := posRE.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			// vitess reports the position after the offending token.
			near := m[2]
			p := n - len(near) - 1
			if p < 0 {
				p = 0
			}
			off = rw.origOf(p)
			if near != "" {
				return nil, &lexError{off, fmt.Sprintf("SQL syntax error near %q", near)}
			}
			return nil, &lexError{off, "SQL syntax error"}
		}
		return nil, &lexError{off, "SQL syntax error: " + firstLine(msg)}
	}
	q := &qctx{tr: tr, rw: rw, toks: toks, base: base}
	var sel *sqlparser.Select
	switch s := stmt.(type) {
	case *sqlparser.Select:
		sel = s
	case *sqlparser.Union:
		return nil, &lexError{toks[0].off, "UNION: not supported (write one INSERT per sink)"}
	default:
		return nil, &lexError{toks[0].off, fmt.Sprintf("want a SELECT, found %s", firstLine(sqlparser.String(stmt)))}
	}
	return q.selectRel(sel, names)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// qctx is the lowering of one statement's query.
type qctx struct {
	tr   *translator
	rw   *rewritten
	toks []token
	base string
}

// at finds the file offset of a construct by its first word in the
// statement (the AST carries no positions), else the statement's start.
func (q *qctx) at(word string) int {
	for _, t := range q.toks {
		if (t.kind == tIdent || t.kind == tQuoted) && strings.EqualFold(t.text, word) {
			return t.off
		}
	}
	return q.toks[0].off
}

func (q *qctx) errf(node sqlparser.SQLNode, format string, args ...any) error {
	off := q.toks[0].off
	construct := ""
	if node != nil {
		construct = sqlparser.String(node)
		word := construct
		if i := strings.IndexAny(word, " (.,`"); i == 0 && len(word) > 1 && word[0] == '`' {
			word = strings.Trim(strings.SplitN(word[1:], "`", 2)[0], "`")
		} else if i > 0 {
			word = word[:i]
		}
		if c, ok := node.(*sqlparser.ColName); ok {
			word = c.Name.String()
		}
		off = q.at(word)
		if len(construct) > 60 {
			construct = construct[:57] + "..."
		}
	}
	msg := fmt.Sprintf(format, args...)
	if construct != "" {
		msg = construct + ": " + msg
	}
	return &lexError{off, msg}
}

// scope resolves column references of one SELECT.
type scope struct {
	entries []scopeCol
	types   map[string]string
}

type scopeCol struct {
	qual string // table alias, lower case; "" matches any
	name string // the SQL name
	phys string // the column in the relation
}

func relScope(r *rel, alias string) *scope {
	s := &scope{types: map[string]string{}}
	for _, c := range r.cols {
		s.types[c] = r.types[c]
	}
	if r.vis != nil {
		for _, v := range r.vis {
			s.entries = append(s.entries, scopeCol{qual: strings.ToLower(alias), name: v.name, phys: v.phys})
		}
	} else {
		for _, c := range r.cols {
			s.entries = append(s.entries, scopeCol{qual: strings.ToLower(alias), name: c, phys: c})
		}
	}
	if r.tvf != nil {
		for _, c := range []string{"window_start", "window_end"} {
			if !r.has(c) {
				s.entries = append(s.entries, scopeCol{qual: strings.ToLower(alias), name: c, phys: c})
				s.types[c] = "ts"
			}
		}
	}
	return s
}

func (s *scope) resolve(qual, name string) (string, error) {
	qual = strings.ToLower(qual)
	var hits []scopeCol
	for pass := 0; pass < 2 && len(hits) == 0; pass++ {
		for _, e := range s.entries {
			if qual != "" && e.qual != qual {
				continue
			}
			if (pass == 0 && e.name == name) || (pass == 1 && strings.EqualFold(e.name, name)) {
				hits = append(hits, e)
			}
		}
	}
	switch {
	case len(hits) == 0:
		var known []string
		for _, e := range s.entries {
			known = append(known, e.name)
		}
		if qual != "" {
			return "", fmt.Errorf("no column %s.%s (columns: %s)", qual, name, strings.Join(dedupe(known), ", "))
		}
		return "", fmt.Errorf("no column %s (columns: %s)", name, strings.Join(dedupe(known), ", "))
	case len(hits) > 1 && hits[0].phys != hits[1].phys:
		return "", fmt.Errorf("column %s is ambiguous: qualify it with its table", name)
	}
	return hits[0].phys, nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// item is one output column of a SELECT.
type item struct {
	name string
	expr sqlparser.Expr
}

// selectRel lowers one SELECT.
func (q *qctx) selectRel(sel *sqlparser.Select, names []string) (*rel, error) {
	if sel.Distinct {
		return nil, q.errf(nil, "SELECT DISTINCT: an unbounded distinct keeps state forever; GROUP BY the columns over a window table function instead")
	}
	if sel.OrderBy != nil || sel.Limit != nil {
		return nil, q.errf(nil, "ORDER BY / LIMIT on a stream: not supported; use ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY ...) for a Top-N per window")
	}
	if sel.With != nil {
		return nil, q.errf(nil, "WITH: not supported; CREATE VIEW the subquery instead")
	}
	if len(sel.Windows) > 0 {
		return nil, q.errf(nil, "WINDOW clause: not supported; write OVER (...) in place")
	}
	if len(sel.From) == 2 && sel.Where != nil {
		// FROM a, b WHERE ...: the inner join of a and b ON the WHERE.
		cp := *sel
		cp.From = []sqlparser.TableExpr{&sqlparser.JoinTableExpr{LeftExpr: sel.From[0], RightExpr: sel.From[1],
			Join: sqlparser.NormalJoinType, Condition: &sqlparser.JoinCondition{On: sel.Where.Expr}}}
		cp.Where = nil
		sel = &cp
	}
	if len(sel.From) != 1 {
		return nil, q.errf(nil, "FROM a, b without a join condition: write the join as a JOIN ... ON")
	}
	if j, ok := sel.From[0].(*sqlparser.JoinTableExpr); ok && j.Join == sqlparser.NormalJoinType && sel.Where != nil && j.Condition != nil && j.Condition.On != nil {
		// An inner join's WHERE conditions are its ON conditions (the time
		// bound of an interval join is often written there).
		cp := *sel
		nj := *j
		nj.Condition = &sqlparser.JoinCondition{On: &sqlparser.AndExpr{Left: j.Condition.On, Right: sel.Where.Expr}}
		cp.From = []sqlparser.TableExpr{&nj}
		cp.Where = nil
		sel = &cp
	}
	// Top-N: SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (...) AS rn FROM ...) WHERE rn <= N
	if r, ok, err := q.topN(sel, names); ok || err != nil {
		return r, err
	}
	in, sc, err := q.from(sel.From[0])
	if err != nil {
		return nil, err
	}
	if in.lookup != nil {
		return nil, &lexError{q.at(in.lookup.name), fmt.Sprintf("%s has no WATERMARK: a table read as a stream needs WATERMARK FOR <time column> AS <time column> - INTERVAL 'n' SECOND (floe runs in event time); a table without one is a lookup table, the right side of a JOIN ... FOR SYSTEM_TIME AS OF", in.lookup.name)}
	}
	items, err := q.items(sel, sc, in)
	if err != nil {
		return nil, err
	}
	if sel.Where != nil {
		if in.lookup != nil {
			return nil, q.errf(sel.Where.Expr, "WHERE over a lookup table alone: not supported")
		}
		cond, _, err := q.expr(sel.Where.Expr, sc, nil)
		if err != nil {
			return nil, err
		}
		in = q.derive(in, q.tr.addStage(q.base, "filter", []string{in.node}, cond, q.at("where")))
	}
	grouped := sel.GroupBy != nil && len(sel.GroupBy.Exprs) > 0
	for _, it := range items {
		if containsOver(it.expr) {
			if grouped || sel.Having != nil {
				return nil, q.errf(it.expr, "an OVER aggregate in a grouped SELECT: aggregate in a subquery first")
			}
			return q.over(in, sc, items, names)
		}
	}
	hasAgg := false
	for _, it := range items {
		if containsAgg(it.expr) {
			hasAgg = true
		}
	}
	if grouped || hasAgg {
		return q.aggregate(sel, in, sc, items, names)
	}
	if sel.Having != nil {
		return nil, q.errf(sel.Having.Expr, "HAVING without GROUP BY")
	}
	if in.tvf != nil {
		// SELECT * FROM TABLE(TUMBLE(...)): pass the pending window on.
		if names != nil {
			return nil, q.errf(nil, "the rows of a window table function need a GROUP BY window_start, window_end (a window aggregation), a window join or a window Top-N before they are written")
		}
		for _, it := range items {
			if _, ok := it.expr.(*sqlparser.ColName); !ok {
				return nil, q.errf(it.expr, "over a window table function, select columns as they are (computed columns need a GROUP BY window_start, window_end, or a view computing them that the TVF reads)")
			}
		}
	}
	return q.project(in, sc, items, names)
}

// derive is r read through a stateless stage.
func (q *qctx) derive(r *rel, node string) *rel {
	n := *r
	n.node = node
	return &n
}

// items expands the SELECT list.
func (q *qctx) items(sel *sqlparser.Select, sc *scope, in *rel) ([]item, error) {
	var items []item
	for _, se := range sel.SelectExprs.Exprs {
		switch e := se.(type) {
		case *sqlparser.StarExpr:
			qual := strings.ToLower(e.TableName.Name.String())
			for _, en := range sc.entries {
				if qual != "" && en.qual != qual {
					continue
				}
				if (en.name == "window_start" || en.name == "window_end") && in.tvf != nil {
					continue
				}
				dup := false
				for _, it := range items {
					if it.name == en.phys {
						dup = true
					}
				}
				if !dup {
					items = append(items, item{name: en.phys, expr: &sqlparser.ColName{Name: sqlparser.NewIdentifierCI(en.phys), Qualifier: sqlparser.TableName{Name: sqlparser.NewIdentifierCS(en.qual)}}})
				}
			}
		case *sqlparser.AliasedExpr:
			name := e.As.String()
			if name == "" {
				if c, ok := e.Expr.(*sqlparser.ColName); ok {
					name = c.Name.String()
				} else {
					name = fmt.Sprintf("EXPR$%d", len(items))
				}
			}
			items = append(items, item{name: name, expr: e.Expr})
		default:
			return nil, q.errf(se, "unsupported select item")
		}
	}
	return items, nil
}

// project lowers the SELECT list of a non-aggregating SELECT.
func (q *qctx) project(in *rel, sc *scope, items []item, names []string) (*rel, error) {
	if names == nil {
		var vis []scopeCol
		for _, it := range items {
			c, ok := it.expr.(*sqlparser.ColName)
			if !ok {
				vis = nil
				break
			}
			phys, err := sc.resolve(c.Qualifier.Name.String(), c.Name.String())
			if err != nil {
				return nil, q.errf(c, "%v", err)
			}
			for _, v := range vis {
				if v.name == it.name {
					return nil, q.errf(it.expr, "the column name %s appears twice in the SELECT list; give one an alias", it.name)
				}
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
	out := &rel{node: "", types: map[string]string{}, evt: in.evt, off: in.off, windowed: in.windowed, win: in.win}
	identity := len(items) == len(in.cols) && !in.reordered
	for i, it := range items {
		name := it.name
		if i < len(names) {
			name = names[i]
		}
		ex, typ, err := q.expr(it.expr, sc, nil)
		if err != nil {
			return nil, err
		}
		if identity && (in.cols[i] != name || ex != exprName(name)) {
			identity = false
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
		// floe's stages carry the event time column: keep it.
		cols = append(cols, yaml.MapItem{Key: in.evt, Value: exprName(in.evt)})
		out.cols = append(out.cols, in.evt)
		out.types[in.evt] = "ts"
	}
	for _, w := range []string{"window_start", "window_end"} {
		if in.windowed && !out.has(w) {
			out.windowed = false
		}
	}
	if identity && len(out.cols) == len(in.cols) {
		out.node = in.node
		return out, nil
	}
	out.node = q.tr.addStage(q.base, "project", []string{in.node}, cols, q.at("select"))
	return out, nil
}

// from lowers a FROM item.
func (q *qctx) from(te sqlparser.TableExpr) (*rel, *scope, error) {
	switch t := te.(type) {
	case *sqlparser.AliasedTableExpr:
		alias := t.As.String()
		switch x := t.Expr.(type) {
		case sqlparser.TableName:
			name := x.Name.String()
			if alias == "" {
				alias = name
			}
			r, err := q.named(name, q.rw.systime[strings.ToLower(alias)] || q.rw.systime[strings.ToLower(name)])
			if err != nil {
				return nil, nil, err
			}
			return r, relScope(r, alias), nil
		case *sqlparser.DerivedTable:
			if x.Lateral {
				return nil, nil, q.errf(t, "LATERAL: not supported")
			}
			sub, ok := x.Select.(*sqlparser.Select)
			if !ok {
				return nil, nil, q.errf(t, "subquery: want a SELECT")
			}
			r, err := q.selectRel(sub, nil)
			if err != nil {
				return nil, nil, err
			}
			return r, relScope(r, alias), nil
		}
	case *sqlparser.JoinTableExpr:
		return q.join(t)
	case *sqlparser.ParenTableExpr:
		if len(t.Exprs) == 1 {
			return q.from(t.Exprs[0])
		}
	}
	return nil, nil, q.errf(te, "unsupported FROM item")
}

// named resolves a table, view or window table function by name.
func (q *qctx) named(name string, systime bool) (*rel, error) {
	if call, ok := q.rw.tvfs[name]; ok {
		in, err := q.named(call.table, false)
		if err != nil {
			return nil, err
		}
		if in.tvf != nil || in.windowed {
			if in.windowed && call.timecol == "window_time" {
				return nil, &lexError{call.off, "a window table function over window results: not supported yet"}
			}
		}
		col := ""
		for _, c := range in.cols {
			if c == call.timecol {
				col = c
			}
		}
		if col == "" {
			return nil, &lexError{call.off, fmt.Sprintf("DESCRIPTOR(%s): %s has no such column", call.timecol, call.table)}
		}
		if col != in.evt {
			return nil, &lexError{call.off, fmt.Sprintf("DESCRIPTOR(%s): floe windows a stream by its event time, %s (the WATERMARK column)", col, in.evt)}
		}
		r := *in
		r.tvf = call
		return &r, nil
	}
	key := strings.ToLower(name)
	if tb := q.tr.tables[key]; tb != nil {
		if systime || (!tb.hasWM && tb.use != "source") {
			if tb.use == "source" || tb.use == "sink" {
				return nil, &lexError{q.toks[0].off, fmt.Sprintf("%s is read as a stream; a lookup table is read only by lookup joins", tb.name)}
			}
			tb.use = "lookup"
			r := &rel{node: "", types: map[string]string{}, lookup: tb}
			for _, c := range tb.cols {
				r.cols = append(r.cols, c.name)
				r.types[c.name] = evalType(c.typ)
			}
			return r, nil
		}
		return q.tr.sourceRel(tb, q.at(name))
	}
	if v := q.tr.views[key]; v != nil {
		if v.rel != nil {
			return v.rel, nil
		}
		if v.busy {
			return nil, &lexError{v.off, fmt.Sprintf("view %s refers to itself", v.name)}
		}
		v.busy = true
		r, err := q.tr.query(v.toks, sanitize(v.name), nil)
		v.busy = false
		if err != nil {
			return nil, err
		}
		v.rel = r
		return r, nil
	}
	if strings.HasPrefix(name, "__floe_sub_") {
		return nil, &lexError{q.toks[0].off, "subquery alias"}
	}
	return nil, &lexError{q.at(name), fmt.Sprintf("no table or view %s (CREATE TABLE or CREATE VIEW it first)", name)}
}

// exprName is the expression reading column c.
func exprName(c string) string {
	if identRE.MatchString(c) && !exprKeywords[c] {
		return c
	}
	return `$env[` + strconv.Quote(c) + `]`
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var exprKeywords = map[string]bool{"and": true, "or": true, "not": true, "in": true, "nil": true, "true": true,
	"false": true, "let": true, "if": true, "else": true, "matches": true, "contains": true, "startsWith": true,
	"endsWith": true, "case": true}

// overOf returns the OVER clause of an aggregate call, or nil.
func overOf(n sqlparser.SQLNode) *sqlparser.OverClause {
	switch x := n.(type) {
	case *sqlparser.Count:
		return x.OverClause
	case *sqlparser.CountStar:
		return x.OverClause
	case *sqlparser.Sum:
		return x.OverClause
	case *sqlparser.Min:
		return x.OverClause
	case *sqlparser.Max:
		return x.OverClause
	case *sqlparser.Avg:
		return x.OverClause
	}
	return nil
}

func containsOver(e sqlparser.Expr) bool {
	found := false
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		if overOf(n) != nil {
			found = true
			return false, nil
		}
		return true, nil
	}, e)
	return found
}

func containsAgg(e sqlparser.Expr) bool {
	found := false
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		switch n.(type) {
		case *sqlparser.Count, *sqlparser.CountStar, *sqlparser.Sum, *sqlparser.Min, *sqlparser.Max, *sqlparser.Avg:
			if overOf(n) != nil {
				return false, nil
			}
			found = true
			return false, nil
		case *sqlparser.Subquery:
			return false, nil
		}
		return true, nil
	}, e)
	return found
}

// window shape of a TVF call.
func (q *qctx) windowBody(call *tvfCall) (yaml.MapSlice, error) {
	switch call.kind {
	case "tumble":
		if len(call.durations) != 1 {
			return nil, &lexError{call.off, "TUMBLE takes one INTERVAL (the size)"}
		}
		return yaml.MapSlice{{Key: "tumbling", Value: durString(call.durations[0])}}, nil
	case "hop":
		if len(call.durations) != 2 {
			return nil, &lexError{call.off, "HOP takes two INTERVALs (slide, size)"}
		}
		return yaml.MapSlice{{Key: "sliding", Value: yaml.MapSlice{{Key: "size", Value: durString(call.durations[1])}, {Key: "slide", Value: durString(call.durations[0])}}}}, nil
	case "session":
		if len(call.durations) != 1 {
			return nil, &lexError{call.off, "SESSION takes one INTERVAL (the gap)"}
		}
		return yaml.MapSlice{{Key: "session", Value: yaml.MapSlice{{Key: "gap", Value: durString(call.durations[0])}}}}, nil
	case "cumulate":
		return nil, &lexError{call.off, "CUMULATE: not supported yet (floe has tumbling, sliding and session windows)"}
	}
	return nil, &lexError{call.off, "unknown window function " + call.kind}
}

// ttlKey bounds regular joins and ROW_NUMBER over the whole stream, in
// event time (docs/sql.md "State TTL").
const ttlKey = "table.exec.state.ttl"

// ttl is the file's state TTL; ok is false when it is unset or 0 (Flink's
// default: state never expires).
func (q *qctx) ttl() (time.Duration, bool, error) {
	o, ok := q.tr.settings[ttlKey]
	if !ok {
		return 0, false, nil
	}
	d, err := flinkDuration(o.val)
	if err != nil {
		return 0, false, &lexError{o.off, fmt.Sprintf("'%s' = '%s': %v", ttlKey, o.val, err)}
	}
	return d, d > 0, nil
}

var durRE = regexp.MustCompile(`^(\d+)\s*([a-z]*)$`)

// flinkDuration reads a duration as Flink's options do: a number and a unit
// (ms, s, min, h, d and their long forms; no unit: milliseconds).
func flinkDuration(v string) (time.Duration, error) {
	m := durRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(v)))
	if m == nil {
		return 0, fmt.Errorf("want a duration such as '24 h', '30 min' or '86400000' (milliseconds)")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > 1<<40 {
		return 0, fmt.Errorf("%s: out of range", m[1])
	}
	unit := time.Duration(0)
	switch m[2] {
	case "", "ms", "milli", "millis", "millisecond", "milliseconds":
		unit = time.Millisecond
	case "s", "sec", "secs", "second", "seconds":
		unit = time.Second
	case "m", "min", "mins", "minute", "minutes":
		unit = time.Minute
	case "h", "hour", "hours":
		unit = time.Hour
	case "d", "day", "days":
		unit = 24 * time.Hour
	default:
		return 0, fmt.Errorf("unknown unit %q (ms, s, min, h, d)", m[2])
	}
	if n > int64(100*365*24*time.Hour/unit) {
		return 0, fmt.Errorf("%s: longer than 100 years", v)
	}
	return time.Duration(n) * unit, nil
}

// ttlHint is how a refusal says to bound state by the TTL.
const ttlHint = "SET '" + ttlKey + "' = '24 h' to bound it by event time (rows older than the TTL behind the watermark are forgotten, docs/sql.md \"State TTL\")"

func (q *qctx) lateness() (time.Duration, bool, error) {
	o, ok := q.tr.settings["table.exec.emit.allow-lateness"]
	if !ok {
		return 0, false, nil
	}
	d, err := time.ParseDuration(strings.ReplaceAll(strings.ReplaceAll(o.val, " ", ""), "ms", "ms"))
	if err != nil {
		if n, err2 := strconv.ParseInt(o.val, 10, 64); err2 == nil {
			return time.Duration(n) * time.Millisecond, true, nil
		}
		return 0, false, &lexError{o.off, fmt.Sprintf("'table.exec.emit.allow-lateness' = '%s': want a duration such as 30s", o.val)}
	}
	return d, true, nil
}
