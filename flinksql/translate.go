package flinksql

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/floe-dev/floe/spec"
)

// MaxFileBytes bounds a SQL file, as spec.MaxSpecBytes bounds a YAML spec.
const MaxFileBytes = spec.MaxSpecBytes

// IsSQL reports whether path names a SQL file (by its extension).
func IsSQL(path string) bool { return strings.EqualFold(filepath.Ext(path), ".sql") }

// Load reads the SQL file at path and lowers it to a pipeline; relative
// paths resolve against the file's directory.
func Load(path string) (*spec.Pipeline, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("sql: %s: %w", path, err)
	}
	return Parse(path, data, dir)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sql: read %s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, MaxFileBytes+1)
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
	}
	if n > MaxFileBytes {
		return nil, &Error{File: path, Msg: fmt.Sprintf("file larger than %d bytes", MaxFileBytes)}
	}
	return buf[:n], nil
}

// Parse lowers SQL text to a pipeline: name is the file name in errors,
// baseDir the directory relative paths resolve against.
func Parse(name string, data []byte, baseDir string) (*spec.Pipeline, error) {
	y, where, err := Translate(name, data)
	if err != nil {
		return nil, err
	}
	return spec.ParseMapped(name, y, baseDir, where)
}

// Translate lowers SQL text to the YAML spec it means (the graph form, or
// the linear form when the pipeline is one chain of filters, projects and
// windows), and a function mapping each field path of that spec to the
// position in the SQL text it came from.
func Translate(name string, data []byte) ([]byte, func(path string) spec.Pos, error) {
	src := string(data)
	ln := newLines(src)
	fail := func(err error) error {
		var le *lexError
		if errors.As(err, &le) {
			return &Error{File: name, Pos: ln.pos(le.off), Msg: le.msg}
		}
		return err
	}
	for i := 0; i < len(src); i++ {
		if c := src[i]; c == 0 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t') {
			return nil, nil, &Error{File: name, Pos: ln.pos(i), Msg: "not SQL text: control character"}
		}
	}
	toks, err := lex(src)
	if err != nil {
		return nil, nil, fail(err)
	}
	tr := &translator{file: name, src: src, ln: ln, tables: map[string]*table{}, views: map[string]*view{},
		settings: map[string]option{}, names: map[string]bool{}, pos: map[string]int{}}
	stmts := splitStatements(toks)
	if len(stmts) == 0 {
		return nil, nil, &Error{File: name, Msg: "no statements"}
	}
	for _, st := range stmts {
		if err := tr.statement(st); err != nil {
			return nil, nil, fail(err)
		}
	}
	if len(tr.sinks) == 0 {
		return nil, nil, &Error{File: name, Pos: ln.pos(stmts[len(stmts)-1][0].off), Msg: "no INSERT INTO: a pipeline writes at least one sink table"}
	}
	out, err := tr.yaml()
	if err != nil {
		return nil, nil, fail(err)
	}
	where := func(path string) spec.Pos {
		for p := path; ; {
			if off, ok := tr.pos[p]; ok {
				ps := ln.pos(off)
				return spec.Pos{Line: ps.Line, Column: ps.Col}
			}
			i := strings.LastIndexAny(p, ".[")
			if i < 0 {
				break
			}
			p = p[:i]
		}
		return spec.Pos{}
	}
	return out, where, nil
}

type view struct {
	name string
	toks []token
	off  int
	rel  *rel
	busy bool
}

// stage is one stage of the graph being built.
type stage struct {
	name   string
	inputs []string
	kind   string
	body   any
	off    int
}

type sinkOut struct {
	name  string
	input string
	tb    *table
	off   int
}

type translator struct {
	file     string
	src      string
	ln       *lines
	tables   map[string]*table
	views    map[string]*view
	settings map[string]option
	setOrder []string
	sources  []*table
	stages   []*stage
	sinks    []sinkOut
	names    map[string]bool
	pos      map[string]int // yaml path -> file offset
}

func (tr *translator) statement(st []token) error {
	c := &cursor{toks: st}
	first := c.peek()
	switch {
	case first.is("set"):
		c.next()
		k := c.next()
		if k.kind != tString && k.kind != tIdent {
			return errAt(k, "SET: want SET 'key' = 'value'")
		}
		key := k.text
		if k.kind == tIdent { // SET a.b.c = v
			for c.peek().isP(".") {
				c.next()
				key += "." + c.next().text
			}
		}
		if err := c.expectP("="); err != nil {
			return err
		}
		v := c.next()
		if v.kind != tString && v.kind != tNumber && v.kind != tIdent {
			return errAt(v, "SET '%s': want a value", key)
		}
		if t := c.peek(); t.kind != tEOF {
			return errAt(t, "unexpected %s after SET", describe(t))
		}
		key = strings.ToLower(key)
		if _, ok := setKeys[key]; !ok {
			return errAt(k, "SET '%s': unknown key (known: %s)", key, strings.Join(setKeyList(), ", "))
		}
		if _, dup := tr.settings[key]; !dup {
			tr.setOrder = append(tr.setOrder, key)
		}
		tr.settings[key] = option{val: v.text, off: v.off}
		return nil
	case first.is("create"):
		c.next()
		c.accept("temporary")
		switch {
		case c.accept("table"):
			tb, err := parseCreateTable(c)
			if err != nil {
				return err
			}
			key := strings.ToLower(tb.name)
			if tr.tables[key] != nil || tr.views[key] != nil {
				return &lexError{tb.off, fmt.Sprintf("%s is already defined", tb.name)}
			}
			tr.tables[key] = tb
			return nil
		case c.accept("view"):
			nt, err := c.ident("a view name")
			if err != nil {
				return err
			}
			if c.peek().isP("(") {
				return errAt(c.peek(), "CREATE VIEW %s (columns): name the columns in the SELECT instead", nt.text)
			}
			if err := c.expect("as"); err != nil {
				return err
			}
			key := strings.ToLower(nt.text)
			if tr.tables[key] != nil || tr.views[key] != nil {
				return errAt(nt, "%s is already defined", nt.text)
			}
			tr.views[key] = &view{name: nt.text, toks: st[c.i:], off: nt.off}
			return nil
		case c.peek().is("function"):
			return errAt(c.peek(), "CREATE FUNCTION: user-defined functions are registered from Go (expr.Functions), not in SQL")
		}
		return errAt(c.peek(), "CREATE %s: want CREATE TABLE or CREATE VIEW", describe(c.peek()))
	case first.is("insert"):
		c.next()
		if c.accept("overwrite") {
			return errAt(first, "INSERT OVERWRITE: a streaming sink is appended to; write INSERT INTO")
		}
		if err := c.expect("into"); err != nil {
			return err
		}
		nt, err := c.ident("a sink table name")
		if err != nil {
			return err
		}
		tb := tr.tables[strings.ToLower(nt.text)]
		if tb == nil {
			if tr.views[strings.ToLower(nt.text)] != nil {
				return errAt(nt, "INSERT INTO %s: a view cannot be written; CREATE TABLE a sink", nt.text)
			}
			return errAt(nt, "INSERT INTO %s: no such table (CREATE TABLE it first)", nt.text)
		}
		if c.peek().isP("(") {
			return errAt(c.peek(), "INSERT INTO %s (columns): not supported; select the sink's columns in order", nt.text)
		}
		if tb.use != "" && tb.use != "sink" {
			return errAt(nt, "%s is read as a %s; a table is either read or written", tb.name, tb.use)
		}
		for _, s := range tr.sinks {
			if s.tb == tb {
				return errAt(nt, "INSERT INTO %s twice: one INSERT per sink table (UNION ALL is not supported)", tb.name)
			}
		}
		tb.use = "sink"
		names := make([]string, len(tb.cols))
		for i, col := range tb.cols {
			names[i] = col.name
		}
		r, err := tr.query(st[c.i:], sanitize(tb.name), names)
		if err != nil {
			return err
		}
		if r.tvf != nil {
			return &lexError{r.off, "INSERT INTO " + tb.name + ": a window table function's rows need a GROUP BY window_start, window_end, a window join or a window Top-N"}
		}
		if len(tb.cols) > 0 && len(r.cols) != len(tb.cols) && !(len(r.cols) == len(tb.cols)+1 && r.cols[len(r.cols)-1] == r.evt) {
			return errAt(nt, "INSERT INTO %s: the query has %d columns, the table %d", tb.name, len(r.cols), len(tb.cols))
		}
		tr.sinks = append(tr.sinks, sinkOut{name: sanitize(tb.name), input: r.node, tb: tb, off: nt.off})
		return nil
	case first.is("select"):
		return errAt(first, "a bare SELECT has nowhere to go: write INSERT INTO <sink table> SELECT ...")
	case first.is("begin") || first.is("execute"):
		return errAt(first, "%s: write the INSERT statements one after the other; every INSERT of a file runs as one pipeline", strings.ToUpper(first.text))
	}
	return errAt(first, "unsupported statement %s (supported: SET, CREATE TABLE, CREATE VIEW, INSERT INTO)", describe(first))
}

// setKeys maps SET keys to where they go.
var setKeys = map[string]string{
	"pipeline.name":                  "name",
	"state.url":                      "state.url",
	"state.parallelism":              "state.parallelism",
	"parallelism.default":            "state.parallelism",
	"state.max-parallelism":          "state.max_parallelism",
	"pipeline.max-parallelism":       "state.max_parallelism",
	"state.retain-epochs":            "state.retain_epochs",
	"state.memory-limit":             "state.memory_limit",
	"table.exec.emit.allow-lateness": "allowed_lateness",
	"table.exec.source.idle-timeout": "idle_timeout",
	ttlKey:                           "ttl",
}

func setKeyList() []string {
	var ks []string
	for k := range setKeys {
		ks = append(ks, k)
	}
	sortStrings(ks)
	return ks
}

var nameRE = regexp.MustCompile(`[^a-z0-9_-]+`)

// sanitize makes a graph name of a SQL name.
func sanitize(s string) string {
	s = nameRE.ReplaceAllString(strings.ToLower(s), "-")
	s = strings.Trim(s, "-_")
	if s == "" {
		s = "t"
	}
	if len(s) > 56 {
		s = s[:56]
	}
	return s
}

// fresh returns a stage name not taken yet.
func (tr *translator) fresh(base string) string {
	base = sanitize(base)
	if !tr.names[base] {
		tr.names[base] = true
		return base
	}
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s-%d", base, i)
		if !tr.names[n] {
			tr.names[n] = true
			return n
		}
	}
}

func (tr *translator) addStage(base, kind string, inputs []string, body any, off int) string {
	name := tr.fresh(base + "-" + kind)
	tr.stages = append(tr.stages, &stage{name: name, inputs: inputs, kind: kind, body: body, off: off})
	return name
}

// sourceRel returns the relation of a table read as a source.
func (tr *translator) sourceRel(tb *table, off int) (*rel, error) {
	if tb.use == "sink" {
		return nil, &lexError{off, fmt.Sprintf("%s is written by an INSERT; a table is either read or written", tb.name)}
	}
	if tb.use == "lookup" {
		return nil, &lexError{off, fmt.Sprintf("%s is a lookup table; it cannot also be a stream", tb.name)}
	}
	if !tb.hasWM {
		return nil, &lexError{off, fmt.Sprintf("%s: a streamed table needs WATERMARK FOR <time column> AS <time column> - INTERVAL 'n' SECOND (floe runs in event time; processing time is not supported)", tb.name)}
	}
	if tb.use == "" {
		tb.use = "source"
		tb.node = tr.fresh(tb.name)
		tr.sources = append(tr.sources, tb)
	}
	r := &rel{node: tb.node, evt: tb.wmCol, types: map[string]string{}, off: off, reordered: !tb.physicalOrder()}
	for _, c := range tb.cols {
		r.cols = append(r.cols, c.name)
		r.types[c.name] = evalType(c.typ)
	}
	return r, nil
}

func evalType(t spec.DataType) string {
	switch {
	case t == spec.TypeInt64 || t == spec.TypeInt32:
		return "int"
	case t == spec.TypeFloat64:
		return "float"
	case t == spec.TypeString:
		return "string"
	case t == spec.TypeBool:
		return "bool"
	case t.IsTimestamp():
		return "ts"
	}
	return ""
}

// tableOpts turns a table's WITH options into source or sink fields.
func (tr *translator) fileOpts(tb *table, kind string) (yaml.MapSlice, error) {
	var m yaml.MapSlice
	get := func(k string) (option, bool) { o, ok := tb.opts[k]; return o, ok }
	conn, ok := get("connector")
	if !ok {
		return nil, &lexError{tb.off, fmt.Sprintf("%s: WITH ('connector' = 'filesystem', 'path' = '...', 'format' = '...') is required", tb.name)}
	}
	if err := refuseMetadata(tb); err != nil {
		return nil, err
	}
	switch conn.val {
	case "kafka":
		if kind == "source" {
			return nil, &lexError{conn.off, "internal: a kafka table is lowered by kafkaSource"}
		}
		return nil, &lexError{conn.off, fmt.Sprintf("'connector' = 'kafka': a kafka table can only be read as a stream (FROM it, with a WATERMARK); a %s is a 'filesystem' table (or an 'iceberg' sink)", kind)}
	case "filesystem":
		m = append(m, yaml.MapItem{Key: "type", Value: "files"})
	case "iceberg":
		if kind != "sink" {
			return nil, &lexError{conn.off, "'connector' = 'iceberg': only a sink may be an Iceberg table"}
		}
		m = append(m, yaml.MapItem{Key: "type", Value: "iceberg"})
	default:
		return nil, &lexError{conn.off, fmt.Sprintf("'connector' = '%s': floe reads and writes 'filesystem' tables, reads 'kafka' topics and writes 'iceberg' tables; replace the connector", conn.val)}
	}
	p, ok := get("path")
	if !ok {
		return nil, &lexError{tb.off, fmt.Sprintf("%s: WITH 'path' is required", tb.name)}
	}
	m = append(m, yaml.MapItem{Key: "url", Value: p.val})
	if f, ok := get("format"); ok {
		switch f.val {
		case "json", "jsonl":
			m = append(m, yaml.MapItem{Key: "format", Value: "jsonl"})
		case "csv", "parquet":
			m = append(m, yaml.MapItem{Key: "format", Value: f.val})
		default:
			return nil, &lexError{f.off, fmt.Sprintf("'format' = '%s': want parquet, json or csv", f.val)}
		}
	} else if conn.val == "filesystem" {
		return nil, &lexError{tb.off, fmt.Sprintf("%s: WITH 'format' is required (parquet, json, csv)", tb.name)}
	}
	prefix := kind + "."
	for _, k := range tb.optOrder {
		o := tb.opts[k]
		switch {
		case k == "connector" || k == "path" || k == "format":
		case k == "csv.field-delimiter" || k == "csv.header":
			var csv yaml.MapSlice
			if v, ok := get("csv.header"); ok {
				csv = append(csv, yaml.MapItem{Key: "header", Value: scalar(v.val)})
			}
			if v, ok := get("csv.field-delimiter"); ok {
				csv = append(csv, yaml.MapItem{Key: "delimiter", Value: v.val})
			}
			if k == "csv.field-delimiter" && tb.opts["csv.header"].val != "" {
				continue // emitted with the header
			}
			m = append(m, yaml.MapItem{Key: "csv", Value: csv})
		case strings.HasPrefix(k, prefix):
			field := strings.ReplaceAll(strings.TrimPrefix(k, prefix), "-", "_")
			if field == "" {
				return nil, &lexError{o.off, "empty option name"}
			}
			tr.pos[fmt.Sprintf("%s.%s", "@"+tb.name, field)] = o.off
			m = append(m, yaml.MapItem{Key: field, Value: scalar(o.val)})
		default:
			return nil, &lexError{o.off, fmt.Sprintf("WITH '%s': unknown option for a %s table (connector, path, format, csv.field-delimiter, csv.header, and the floe %s fields as '%s<field>', e.g. '%smax-files-per-epoch'; see docs/sql.md)", k, kind, kind, prefix, prefix)}
		}
	}
	return m, nil
}

// scalar types a WITH or SET value for YAML: integers and booleans bare.
func scalar(v string) any {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && strings.ContainsAny(v, ".eE") {
		return f
	}
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	return v
}

func durString(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%s%dh", neg, d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%s%dm", neg, d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%s%ds", neg, d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%s%dms", neg, d/time.Millisecond)
	}
	return fmt.Sprintf("%s%dus", neg, d/time.Microsecond)
}

// yaml writes the spec.
func (tr *translator) yaml() ([]byte, error) {
	var doc yaml.MapSlice
	name := ""
	if o, ok := tr.settings["pipeline.name"]; ok {
		name = o.val
		tr.pos["name"] = o.off
	} else {
		name = tr.sinks[0].name
	}
	doc = append(doc, yaml.MapItem{Key: "name", Value: name})
	idle, hasIdle := tr.settings["table.exec.source.idle-timeout"]
	source := func(tb *table) (yaml.MapSlice, error) {
		if tb.isKafka() {
			return tr.kafkaSource(tb, idle, hasIdle)
		}
		m, err := tr.fileOpts(tb, "source")
		if err != nil {
			return nil, err
		}
		var schema yaml.MapSlice
		for _, c := range tb.cols {
			schema = append(schema, yaml.MapItem{Key: c.name, Value: string(c.typ)})
		}
		// keep the YAML's field order: type, url, format, [pattern], schema, event_time, ...
		var out yaml.MapSlice
		out = append(out, m[:3]...)
		out = append(out, yaml.MapItem{Key: "schema", Value: schema})
		out = append(out, yaml.MapItem{Key: "event_time", Value: tb.wmCol})
		out = append(out, m[3:]...)
		wm := yaml.MapSlice{{Key: "max_out_of_orderness", Value: durString(tb.wmDelay)}}
		if hasIdle {
			wm = append(wm, yaml.MapItem{Key: "idle_timeout", Value: idle.val})
		}
		out = append(out, yaml.MapItem{Key: "watermark", Value: wm})
		return out, nil
	}
	sink := func(s sinkOut) (yaml.MapSlice, error) {
		m, err := tr.fileOpts(s.tb, "sink")
		if err != nil {
			return nil, err
		}
		if len(s.tb.partition) > 0 {
			m = append(m, yaml.MapItem{Key: "partition_by", Value: s.tb.partition})
		}
		return m, nil
	}
	state := yaml.MapSlice{}
	for _, k := range tr.setOrder {
		dst := setKeys[k]
		if f, ok := strings.CutPrefix(dst, "state."); ok {
			o := tr.settings[k]
			state = append(state, yaml.MapItem{Key: f, Value: scalar(o.val)})
			tr.pos["state."+f] = o.off
		}
	}
	if len(tr.sources) == 0 {
		return nil, &lexError{tr.sinks[0].off, "the pipeline reads no stream: an INSERT must select FROM a table with a WATERMARK"}
	}
	linear := len(tr.sources) == 1 && len(tr.sinks) == 1
	for i, s := range tr.stages {
		if s.kind != "filter" && s.kind != "project" && s.kind != "window" {
			linear = false
		}
		want := tr.sources[0].node
		if i > 0 {
			want = tr.stages[i-1].name
		}
		if len(s.inputs) != 1 || s.inputs[0] != want {
			linear = false
		}
	}
	if linear {
		last := tr.sources[0].node
		if len(tr.stages) > 0 {
			last = tr.stages[len(tr.stages)-1].name
		}
		if tr.sinks[0].input != last {
			linear = false
		}
	}
	if linear {
		src, err := source(tr.sources[0])
		if err != nil {
			return nil, err
		}
		tr.pos["source"] = tr.sources[0].off
		tr.remapOpts(tr.sources[0], "source")
		doc = append(doc, yaml.MapItem{Key: "source", Value: src})
		var ops []any
		for i, s := range tr.stages {
			ops = append(ops, yaml.MapSlice{{Key: s.kind, Value: s.body}})
			tr.pos[fmt.Sprintf("operators[%d]", i)] = s.off
		}
		if len(ops) > 0 {
			doc = append(doc, yaml.MapItem{Key: "operators", Value: ops})
		}
		sk, err := sink(tr.sinks[0])
		if err != nil {
			return nil, err
		}
		tr.pos["sink"] = tr.sinks[0].off
		doc = append(doc, yaml.MapItem{Key: "sink", Value: sk})
	} else {
		var srcs yaml.MapSlice
		for _, tb := range tr.sources {
			src, err := source(tb)
			if err != nil {
				return nil, err
			}
			tr.pos["sources."+tb.node] = tb.off
			tr.remapOpts(tb, "sources."+tb.node)
			srcs = append(srcs, yaml.MapItem{Key: tb.node, Value: src})
		}
		doc = append(doc, yaml.MapItem{Key: "sources", Value: srcs})
		var sts []any
		for i, s := range tr.stages {
			m := yaml.MapSlice{{Key: "name", Value: s.name}}
			if len(s.inputs) == 1 {
				m = append(m, yaml.MapItem{Key: "input", Value: s.inputs[0]})
			} else {
				m = append(m, yaml.MapItem{Key: "inputs", Value: s.inputs})
			}
			m = append(m, yaml.MapItem{Key: s.kind, Value: s.body})
			sts = append(sts, m)
			tr.pos[fmt.Sprintf("stages[%d]", i)] = s.off
		}
		if len(sts) > 0 {
			doc = append(doc, yaml.MapItem{Key: "stages", Value: sts})
		}
		var sks yaml.MapSlice
		for _, s := range tr.sinks {
			sk, err := sink(s)
			if err != nil {
				return nil, err
			}
			sk = append(yaml.MapSlice{{Key: "input", Value: s.input}}, sk...)
			tr.pos["sinks."+s.name] = s.off
			sks = append(sks, yaml.MapItem{Key: s.name, Value: sk})
		}
		doc = append(doc, yaml.MapItem{Key: "sinks", Value: sks})
	}
	if len(state) > 0 {
		doc = append(doc, yaml.MapItem{Key: "state", Value: state})
	}
	return yaml.MarshalWithOptions(doc, yaml.UseLiteralStyleIfMultiline(false))
}

func (tr *translator) remapOpts(tb *table, path string) {
	prefix := "@" + tb.name + "."
	for k, v := range tr.pos {
		if f, ok := strings.CutPrefix(k, prefix); ok {
			tr.pos[path+"."+f] = v
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
