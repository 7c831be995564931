package spec

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The graph form of a pipeline (docs/graph.md):
//
//	sources: {clicks: {type: files, ...}, orders: {...}}  # name -> source block
//	stages:                                                # a list
//	  - {name: valid, input: clicks, filter: "bytes > 0"}
//	  - {name: joined, inputs: [valid, orders], join: {on: [user_id], interval: {before: 5m, after: 5m}}}
//	sinks: {out: {input: joined, type: files, url: ..., format: parquet}}
//
// Sources and stages share one namespace of names (a stage's inputs name
// them); sinks have their own. A stage's name is its state operator id.
// The linear form (source, operators, sink) is the graph with one source
// named "source", one stage per operator named by its id, and one sink
// named "sink" (Pipeline.Graph).

// Limits of the graph form. Like the limits of limits.go, no real pipeline
// comes near them.
const (
	maxSources = 16
	maxStages  = 64
	maxSinks   = 16
	// maxNameLen bounds source, stage and sink names: a stage's name is
	// its operator id in state keys, at most manifest.MaxOpIDLen bytes.
	maxNameLen = 64
	// maxTopN bounds top_n.n: the stage keeps n rows per key in state.
	maxTopN = 10000
	// maxOverRows bounds over.rows: the stage keeps that many rows per key
	// (operators.MaxOverRows).
	maxOverRows = 10000
	// maxKeyColumns bounds the key columns of a join, lookup, top_n or dedup.
	maxKeyColumns = 32
)

// Stage kinds beyond the operator kinds (KindFilter, KindProject,
// KindWindow), as returned by Stage.Kind.
const (
	KindJoin   = "join"
	KindLookup = "lookup"
	KindTopN   = "top_n"
	KindDedup  = "dedup"
	KindOver   = "over"
)

// NamedSource is one entry of `sources:`. Its name is unique among
// sources and stages.
type NamedSource struct {
	Name   string
	Source Source
}

// NamedSink is one entry of `sinks:`: a sink that writes the rows of the
// source or stage named Input. Its name is unique among sinks; it may be
// the name of a source or stage.
type NamedSink struct {
	Name  string
	Input string
	Sink  Sink
}

// Stage is one entry of `stages:`: a named step that reads one or two
// named upstreams (sources or stages). Exactly one of Filter, Project,
// Window, Join, Lookup, TopN, Dedup and Over is set: its kind (Kind; the
// kinds are registered in stagekinds.go).
type Stage struct {
	// Name is unique among sources and stages, and is the stage's state
	// operator id (op=<name>).
	Name string
	// Inputs names the upstreams: two for a join (left, right), one for
	// every other kind.
	Inputs []string
	// LateURL receives the rows this stage finds late (window, join, top_n
	// and dedup stages); empty = they are only counted.
	LateURL string

	Filter  *Filter
	Project *Project
	Window  *Window
	Join    *Join
	Lookup  *Lookup
	TopN    *TopN
	Dedup   *Dedup
	// Over is omitted from the JSON form when nil, so that the plan hash
	// of a graph without an over stage (engine graphHash) is what it was
	// before the kind existed.
	Over *Over `json:",omitempty"`
}

// JoinType is inner or left (outer).
type JoinType string

// Join types.
const (
	// JoinInner emits a row for each matching pair.
	JoinInner JoinType = "inner"
	// JoinLeft also emits each left row that found no match, with the
	// right columns null, once no match can come any more.
	JoinLeft JoinType = "left"
)

// Join joins its two inputs (Inputs[0] left, Inputs[1] right) on equal
// key columns within a time bound: exactly one of Interval and Window is
// set.
type Join struct {
	// Type is inner (the default) or left.
	Type JoinType
	// LeftKeys and RightKeys are the key columns, pairwise equal in a
	// match; `on: [k]` sets both to the same names.
	LeftKeys, RightKeys []string
	// LeftTime and RightTime name each side's event-time column; empty =
	// that input's event time (Graph.EventTime).
	LeftTime, RightTime string
	// Interval: a right row matches a left row when
	// left.t - Lower <= right.t <= left.t + Upper.
	Interval *JoinInterval
	// Window: rows match when both fall in the same window.
	Window *JoinWindow
	// AllowedLateness delays the cutoff (watermark - AllowedLateness)
	// after which a row is late and a left join emits a left row with
	// no match.
	AllowedLateness time.Duration
	// RightPrefix renames a right column whose name a left column has
	// ("user" becomes RightPrefix+"user"); empty = the engine's default
	// ("right_").
	RightPrefix string
}

// JoinInterval bounds an interval join: right.t between left.t - Lower and
// left.t + Upper, inclusive (SQL: b.t BETWEEN a.t - Lower AND a.t + Upper).
// Either may be negative (an interval wholly after or before the left
// row), but not so far that the interval is empty.
type JoinInterval struct {
	Lower, Upper time.Duration
}

// JoinWindow is the window of a windowed join: exactly one of Tumbling and
// Sliding is set.
type JoinWindow struct {
	Tumbling time.Duration
	Sliding  *SlidingWindow
}

// Lookup enriches its input with the rows of a table read from files,
// matching LeftKeys (input columns) to RightKeys (table columns).
type Lookup struct {
	// URL is the prefix the table's files are under.
	URL    string
	Format Format
	// Schema lists the table's columns; required unless Format is Parquet.
	Schema []Field
	// CSV holds CSV options; set only for Format CSV (Parse sets defaults).
	CSV *CSVOptions
	// Pattern is a path.Match glob on the file key relative to URL.
	Pattern string
	// Type is inner (the default: rows without a match are dropped) or
	// left (they are kept, with the table's columns null).
	Type JoinType
	// LeftKeys are input columns, RightKeys table columns, paired in
	// order. The table's key must be unique.
	LeftKeys, RightKeys []string
	// RightPrefix renames a table column whose name an input column has;
	// empty = the engine's default ("right_").
	RightPrefix string
}

// TopN keeps the N first rows by OrderBy of each group and emits them,
// ranked, when the group's window closes. A group is the key columns and
// a window: the input's window_start and window_end (PerWindow: it reads
// a window stage's output), or, with Tumbling set, the tumbling window of
// the row's event time.
type TopN struct {
	N int
	// Keys may be empty: one group per window.
	Keys    []string
	OrderBy []OrderColumn
	// Tumbling is the size of the stage's own windows; 0 = the input
	// carries window_start and window_end.
	Tumbling time.Duration
	// EventTime (with Tumbling) names the column windowed; empty = the
	// input's event time.
	EventTime string
	// AllowedLateness: a group is emitted when window_end +
	// AllowedLateness <= watermark. After a window stage with lateness L,
	// use at least L.
	AllowedLateness time.Duration
	// RankColumn names the output's rank column; empty = "rank".
	RankColumn string
}

// PerWindow reports whether t ranks within the windows its input carries
// (no tumbling of its own).
func (t *TopN) PerWindow() bool { return t.Tumbling == 0 }

// OrderColumn is one column of a TopN's order.
type OrderColumn struct {
	Column string
	Desc   bool
	// NullsFirst ranks nulls before every value (default: after).
	NullsFirst bool
}

// String returns the spec form, e.g. "score", "score desc nulls first".
func (o OrderColumn) String() string {
	s := o.Column
	if o.Desc {
		s += " desc"
	}
	if o.NullsFirst {
		s += " nulls first"
	}
	return s
}

// DedupKeep says which row of a key's duplicates a Dedup keeps.
type DedupKeep string

// Dedup policies.
const (
	// KeepFirst emits a key's first row at once and drops the rows of the
	// same key within the time bound.
	KeepFirst DedupKeep = "first"
	// KeepLast emits a key's last row within the time bound, once the
	// watermark has passed the bound.
	KeepLast DedupKeep = "last"
)

// Dedup drops duplicate rows: rows with equal Keys whose event times are
// within Within of the first row of the key.
type Dedup struct {
	Keys []string
	// Keep is first (the default) or last.
	Keep   DedupKeep
	Within time.Duration
	// EventTime names the event-time column; empty = the input's.
	EventTime string
	// AllowedLateness delays the cutoff (watermark - AllowedLateness)
	// that makes a row late and keep: last rows final.
	AllowedLateness time.Duration
}

// Over adds to each row aggregates over the row and the Rows rows of its
// key before it, in event-time order: SQL's agg(col) OVER (PARTITION BY
// Keys ORDER BY OrderBy ROWS BETWEEN Rows PRECEDING AND CURRENT ROW). A row
// is emitted once the watermark (minus AllowedLateness) passes its time.
type Over struct {
	// Keys may be empty: one partition.
	Keys []string
	// OrderBy names the timestamp column rows are ordered by; empty = the
	// input's event time.
	OrderBy string
	// Rows is the number of preceding rows in the frame (0..10000).
	Rows int
	// Aggregates are the columns added, in declared order.
	Aggregates []Aggregate
	// AllowedLateness delays the cutoff (watermark - AllowedLateness) at
	// which rows are emitted and after which a row is late.
	AllowedLateness time.Duration
}

// isGraph reports whether p uses the graph form: it has sources, stages or
// sinks, or its spec file names one of those keys (even with no entries).
func (p *Pipeline) isGraph() bool {
	if len(p.Sources) > 0 || len(p.Stages) > 0 || len(p.Sinks) > 0 {
		return true
	}
	if p.origin == nil {
		return false
	}
	for _, k := range []string{"sources", "stages", "sinks"} {
		if _, ok := p.origin.pos[k]; ok {
			return true
		}
	}
	return false
}

// legacyField returns the first linear-form key (source, operators, sink)
// p sets, or "". Defaults SetDefaults gives an unset source (on_error) do
// not count.
func (p *Pipeline) legacyField() string {
	s := &p.Source
	switch {
	case s.Type != "" || s.URL != "" || s.Format != "" || len(s.Schema) > 0 || s.EventTime != "":
		return "source"
	case len(p.Operators) > 0:
		return "operators"
	case !p.Sink.IsZero():
		return "sink"
	}
	return ""
}

// setGraphDefaults fills the defaults of the graph form: each source's
// on_error and CSV options, join and lookup types, dedup keep.
func (p *Pipeline) setGraphDefaults() {
	for i := range p.Sources {
		s := &p.Sources[i].Source
		if s.OnError == "" {
			s.OnError = OnErrorReject
		}
		if s.Format == CSV && s.CSV == nil {
			s.CSV = &CSVOptions{Header: true, Delimiter: ","}
		}
	}
	for i := range p.Stages {
		st := &p.Stages[i]
		for _, k := range st.setKinds() {
			if k.defaults != nil {
				k.defaults(st)
			}
		}
	}
}

// ---- decoding ----

var (
	stageFields  []string // name, input, inputs, late_url and StageKinds (stagekinds.go)
	joinFields   = []string{"type", "on", "left_on", "right_on", "left_time", "right_time", "interval", "window", "allowed_lateness", "right_prefix"}
	lookupFields = []string{"url", "format", "schema", "csv", "pattern", "type", "on", "left_on", "right_on", "right_prefix"}
	topNFields   = []string{"n", "key", "order_by", "tumbling", "event_time", "allowed_lateness", "rank_column"}
	dedupFields  = []string{"key", "keep", "within", "event_time", "allowed_lateness"}
	overFields   = []string{"key", "order_by", "rows", "aggregates", "allowed_lateness"}
)

// graph decodes the graph form's top-level fields (sources, stages, sinks)
// of the document's fields f into p, and refuses a document that mixes
// them with the linear form's.
func (d *decoder) graph(f map[string]*node, p *Pipeline) {
	var used []string
	for _, k := range []string{"sources", "stages", "sinks"} {
		if f[k] != nil {
			used = append(used, k)
		}
	}
	if len(used) == 0 {
		return
	}
	for _, k := range []string{"source", "operators", "sink"} {
		if v := f[k]; v != nil {
			d.c.decodeErr(d.o.at(k), k, "cannot be used with %s: a spec is either linear (source, operators, sink) or a graph (sources, stages, sinks)", strings.Join(used, ", "))
		}
	}
	if n := f["sources"]; n != nil && !isNull(n) {
		names, vals := d.pairs(n, "sources")
		for i, name := range names {
			ns := NamedSource{Name: name}
			fp := join("sources", name)
			d.source(vals[i], fp, &ns.Source)
			d.o.pos[fp] = keyPos(n, name) // problems of the source as a whole point at its name
			p.Sources = append(p.Sources, ns)
		}
	}
	if n := f["stages"]; n != nil && !isNull(n) {
		if n.kind != kindSeq {
			d.c.decodeErr(n.pos, "stages", "expected a list of stages, got %s", n.describe())
		} else {
			for i, it := range n.items {
				p.Stages = append(p.Stages, d.stage(it, index("stages", i)))
			}
		}
	}
	if n := f["sinks"]; n != nil && !isNull(n) {
		names, vals := d.pairs(n, "sinks")
		for i, name := range names {
			ns := NamedSink{Name: name}
			fp := join("sinks", name)
			sf := d.sink(vals[i], fp, &ns.Sink, "input")
			if v := sf["input"]; v != nil {
				ns.Input = d.str(v, join(fp, "input"))
			}
			d.o.pos[fp] = keyPos(n, name)
			p.Sinks = append(p.Sinks, ns)
		}
	}
}

func isNull(n *node) bool { return n.kind == kindScalar && n.sType == scalarNull }

// keyPos returns the position of the first key of mapping n named key.
func keyPos(n *node, key string) Pos {
	for _, k := range n.keys {
		if k.str == key {
			return k.pos
		}
	}
	return n.pos
}

func (d *decoder) stage(n *node, sp string) Stage {
	var st Stage
	f := d.fields(n, sp, stageFields...)
	if f == nil {
		return st
	}
	if v := f["name"]; v != nil {
		st.Name = d.str(v, join(sp, "name"))
	}
	in, ins := f["input"], f["inputs"]
	switch {
	case in != nil && ins != nil:
		d.c.decodeErr(ins.pos, join(sp, "inputs"), "set input (one upstream) or inputs (a list), not both")
	case in != nil:
		st.Inputs = []string{d.str(in, join(sp, "input"))}
	case ins != nil:
		st.Inputs = d.nameList(ins, join(sp, "inputs"))
	}
	if v := f["late_url"]; v != nil {
		st.LateURL = d.url(v, join(sp, "late_url"))
	}
	for _, k := range stageKinds { // stagekinds.go
		if v := f[k.name]; v != nil {
			k.decode(d, v, join(sp, k.name), sp, &st)
		}
	}
	return st
}

// nameList accepts a name or a list of names.
func (d *decoder) nameList(n *node, path string) []string {
	return d.scalarList(n, path, "a list of source or stage names")
}

// keys decodes `on` (the same columns on both sides) or `left_on` and
// `right_on`.
func (d *decoder) keys(f map[string]*node, path string) (left, right []string) {
	on, lo, ro := f["on"], f["left_on"], f["right_on"]
	if on != nil {
		for _, x := range []struct {
			n    *node
			name string
		}{{lo, "left_on"}, {ro, "right_on"}} {
			if x.n != nil {
				d.c.decodeErr(x.n.pos, join(path, x.name), "set on (the same columns on both sides) or left_on and right_on, not both")
			}
		}
		k := d.stringList(on, join(path, "on"))
		return k, slices.Clone(k)
	}
	if lo != nil {
		left = d.stringList(lo, join(path, "left_on"))
	}
	if ro != nil {
		right = d.stringList(ro, join(path, "right_on"))
	}
	return left, right
}

func (d *decoder) joinStage(n *node, path string) *Join {
	j := &Join{Type: JoinInner}
	f := d.fields(n, path, joinFields...)
	if f == nil {
		return j
	}
	j.LeftKeys, j.RightKeys = d.keys(f, path)
	if v := f["type"]; v != nil {
		j.Type = JoinType(d.str(v, join(path, "type")))
	}
	if v := f["left_time"]; v != nil {
		j.LeftTime = d.str(v, join(path, "left_time"))
	}
	if v := f["right_time"]; v != nil {
		j.RightTime = d.str(v, join(path, "right_time"))
	}
	if v := f["allowed_lateness"]; v != nil {
		j.AllowedLateness = d.duration(v, join(path, "allowed_lateness"))
	}
	if v := f["right_prefix"]; v != nil {
		j.RightPrefix = d.str(v, join(path, "right_prefix"))
	}
	if v := f["interval"]; v != nil {
		fp := join(path, "interval")
		j.Interval = &JoinInterval{}
		inf := d.fields(v, fp, "lower", "upper")
		if x := inf["lower"]; x != nil {
			j.Interval.Lower = d.duration(x, join(fp, "lower"))
		}
		if x := inf["upper"]; x != nil {
			j.Interval.Upper = d.duration(x, join(fp, "upper"))
		}
	}
	if v := f["window"]; v != nil {
		fp := join(path, "window")
		j.Window = &JoinWindow{}
		wf := d.fields(v, fp, "tumbling", "sliding")
		if x := wf["tumbling"]; x != nil {
			j.Window.Tumbling = d.duration(x, join(fp, "tumbling"))
			if j.Window.Tumbling == 0 && !d.c.hasFailed(join(fp, "tumbling")) {
				d.c.decodeErr(x.pos, join(fp, "tumbling"), "must be > 0")
			}
		}
		if x := wf["sliding"]; x != nil {
			sp := join(fp, "sliding")
			j.Window.Sliding = &SlidingWindow{}
			sf := d.fields(x, sp, "size", "slide")
			if y := sf["size"]; y != nil {
				j.Window.Sliding.Size = d.duration(y, join(sp, "size"))
			}
			if y := sf["slide"]; y != nil {
				j.Window.Sliding.Slide = d.duration(y, join(sp, "slide"))
			}
		}
	}
	return j
}

func (d *decoder) lookupStage(n *node, path string) *Lookup {
	l := &Lookup{Type: JoinInner}
	f := d.fields(n, path, lookupFields...)
	if f == nil {
		return l
	}
	l.LeftKeys, l.RightKeys = d.keys(f, path)
	if v := f["url"]; v != nil {
		l.URL = d.url(v, join(path, "url"))
	}
	if v := f["format"]; v != nil {
		l.Format = Format(d.str(v, join(path, "format")))
	}
	if v := f["schema"]; v != nil {
		fp := join(path, "schema")
		names, vals := d.pairs(v, fp)
		for i, name := range names {
			l.Schema = append(l.Schema, Field{Name: name, Type: DataType(d.str(vals[i], join(fp, name)))})
		}
	}
	if v := f["csv"]; v != nil {
		fp := join(path, "csv")
		l.CSV = &CSVOptions{Header: true, Delimiter: ","}
		cf := d.fields(v, fp, "header", "delimiter")
		if h := cf["header"]; h != nil {
			l.CSV.Header = d.boolean(h, join(fp, "header"))
		}
		if dl := cf["delimiter"]; dl != nil {
			l.CSV.Delimiter = d.str(dl, join(fp, "delimiter"))
		}
	}
	if v := f["pattern"]; v != nil {
		l.Pattern = d.str(v, join(path, "pattern"))
	}
	if v := f["type"]; v != nil {
		l.Type = JoinType(d.str(v, join(path, "type")))
	}
	if v := f["right_prefix"]; v != nil {
		l.RightPrefix = d.str(v, join(path, "right_prefix"))
	}
	if l.Format == CSV && l.CSV == nil {
		l.CSV = &CSVOptions{Header: true, Delimiter: ","}
	}
	return l
}

func (d *decoder) topNStage(n *node, path string) *TopN {
	t := &TopN{}
	f := d.fields(n, path, topNFields...)
	if f == nil {
		return t
	}
	if v := f["n"]; v != nil {
		t.N = d.smallInt(v, join(path, "n"))
	}
	if v := f["key"]; v != nil {
		t.Keys = d.stringList(v, join(path, "key"))
	}
	if v := f["tumbling"]; v != nil {
		fp := join(path, "tumbling")
		if t.Tumbling = d.duration(v, fp); t.Tumbling == 0 && !d.c.hasFailed(fp) {
			d.c.decodeErr(v.pos, fp, "must be > 0 (leave it out to rank within the input's windows)")
		}
	}
	if v := f["event_time"]; v != nil {
		t.EventTime = d.str(v, join(path, "event_time"))
	}
	if v := f["allowed_lateness"]; v != nil {
		t.AllowedLateness = d.duration(v, join(path, "allowed_lateness"))
	}
	if v := f["rank_column"]; v != nil {
		t.RankColumn = d.str(v, join(path, "rank_column"))
	}
	if v := f["order_by"]; v != nil {
		fp := join(path, "order_by")
		for i, s := range d.stringList(v, fp) {
			ip := fp
			if v.kind == kindSeq {
				ip = index(fp, i)
			}
			for _, part := range strings.Split(s, ",") {
				o, err := ParseOrderColumn(part)
				if err != nil {
					d.c.decodeErr(d.o.at(ip), ip, "%s", reQuote(err, part))
				}
				t.OrderBy = append(t.OrderBy, o)
			}
		}
	}
	return t
}

// ParseOrderColumn parses one order column: "column [asc|desc] [nulls
// first|nulls last]" (the words in any case), as operators.ParseOrderBy
// reads each of its comma-separated parts.
func ParseOrderColumn(s string) (OrderColumn, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return OrderColumn{}, fmt.Errorf("empty order column (want \"column [asc|desc] [nulls first|nulls last]\")")
	}
	o, rest := OrderColumn{Column: f[0]}, f[1:]
	if len(rest) > 0 && (strings.EqualFold(rest[0], "asc") || strings.EqualFold(rest[0], "desc")) {
		o.Desc, rest = strings.EqualFold(rest[0], "desc"), rest[1:]
	}
	if len(rest) == 2 && strings.EqualFold(rest[0], "nulls") && (strings.EqualFold(rest[1], "first") || strings.EqualFold(rest[1], "last")) {
		o.NullsFirst, rest = strings.EqualFold(rest[1], "first"), nil
	}
	if len(rest) > 0 {
		return OrderColumn{}, fmt.Errorf("invalid order %q (want \"column [asc|desc] [nulls first|nulls last]\", e.g. \"clicks desc\")", strings.TrimSpace(s))
	}
	return o, nil
}

func (d *decoder) dedupStage(n *node, path string) *Dedup {
	dd := &Dedup{Keep: KeepFirst}
	f := d.fields(n, path, dedupFields...)
	if f == nil {
		return dd
	}
	if v := f["key"]; v != nil {
		dd.Keys = d.stringList(v, join(path, "key"))
	}
	if v := f["keep"]; v != nil {
		dd.Keep = DedupKeep(d.str(v, join(path, "keep")))
	}
	if v := f["within"]; v != nil {
		dd.Within = d.duration(v, join(path, "within"))
	}
	if v := f["event_time"]; v != nil {
		dd.EventTime = d.str(v, join(path, "event_time"))
	}
	if v := f["allowed_lateness"]; v != nil {
		dd.AllowedLateness = d.duration(v, join(path, "allowed_lateness"))
	}
	return dd
}

func (d *decoder) overStage(n *node, path string) *Over {
	o := &Over{}
	f := d.fields(n, path, overFields...)
	if f == nil {
		return o
	}
	if v := f["key"]; v != nil {
		o.Keys = d.stringList(v, join(path, "key"))
	}
	if v := f["order_by"]; v != nil {
		fp := join(path, "order_by")
		s := d.str(v, fp)
		words := strings.Fields(s)
		switch {
		case d.c.hasFailed(fp):
		case len(words) == 1 || len(words) == 2 && strings.EqualFold(words[1], "asc"):
			o.OrderBy = words[0]
		default:
			d.c.decodeErr(v.pos, fp, "invalid order %q: an over stage orders by one timestamp column, ascending (e.g. order_by: dateTime)", s)
		}
	}
	if v := f["rows"]; v != nil {
		o.Rows = d.smallInt(v, join(path, "rows"))
	}
	if v := f["aggregates"]; v != nil {
		fp := join(path, "aggregates")
		names, vals := d.pairs(v, fp)
		for i, name := range names {
			o.Aggregates = append(o.Aggregates, d.aggregate(vals[i], join(fp, name), name))
		}
	}
	if v := f["allowed_lateness"]; v != nil {
		o.AllowedLateness = d.duration(v, join(path, "allowed_lateness"))
	}
	return o
}

// ---- Graph queries ----

// Source returns the source named name, or nil.
func (g *Graph) Source(name string) *NamedSource {
	for i := range g.Sources {
		if g.Sources[i].Name == name {
			return &g.Sources[i]
		}
	}
	return nil
}

// Stage returns the stage named name, or nil.
func (g *Graph) Stage(name string) *Stage {
	for i := range g.Stages {
		if g.Stages[i].Name == name {
			return &g.Stages[i]
		}
	}
	return nil
}

// Sink returns the sink named name, or nil.
func (g *Graph) Sink(name string) *NamedSink {
	for i := range g.Sinks {
		if g.Sinks[i].Name == name {
			return &g.Sinks[i]
		}
	}
	return nil
}

// Upstreams returns what the stage named name reads, in order (a join's
// left then right); nil for a source or an unknown name. A sink's input is
// Sink(name).Input.
func (g *Graph) Upstreams(name string) []string {
	if st := g.Stage(name); st != nil {
		return slices.Clone(st.Inputs)
	}
	return nil
}

// Downstreams returns the stages that read the source or stage named
// name, each once, in Graph order.
func (g *Graph) Downstreams(name string) []string { return slices.Clone(g.down[name]) }

// SinksOf returns the sinks that write the source or stage named name, in
// declaration order.
func (g *Graph) SinksOf(name string) []string { return slices.Clone(g.sinksOf[name]) }

// Path returns the field path in the spec of the source or stage named
// name ("sources.clicks", "stages[2]", and for the linear form "source",
// "operators[1]"), for Pipeline.Where; "" for an unknown name.
func (g *Graph) Path(name string) string { return g.paths[name] }

// SinkPath returns the field path of the sink named name ("sinks.out", and
// for the linear form "sink"); "" for an unknown name.
func (g *Graph) SinkPath(name string) string { return g.sinkPaths[name] }

// FromLinear reports whether the graph came from the linear form (source,
// operators, sink).
func (g *Graph) FromLinear() bool { return g.linear }

// Linear reports whether the graph is a chain: one source, stages that
// each read one input, the previous stage (the first reads the source),
// and one sink writing the last. Every linear-form pipeline is linear; a
// graph-form one may be.
func (g *Graph) Linear() bool {
	if len(g.Sources) != 1 || len(g.Sinks) != 1 {
		return false
	}
	prev := g.Sources[0].Name
	for _, st := range g.Stages {
		if len(st.Inputs) != 1 || st.Inputs[0] != prev {
			return false
		}
		prev = st.Name
	}
	return g.Sinks[0].Input == prev
}

// WindowEventTime is the event-time column of a window stage's output
// (Graph.EventTime): a result row's event time is the last instant of its
// window, window_end minus one microsecond, so that a window reading a
// window puts each input window in the window that contains it.
const WindowEventTime = "window_end"

// EventTime returns the event-time column of the rows that the source or
// stage named name produces (for a sink: EventTime(Sink(name).Input)): a
// source's event_time; a window's and a windowed join's WindowEventTime;
// an interval join's left time column (left_time, else its left input's);
// for every other kind, its input's. "" for an unknown name.
func (g *Graph) EventTime(name string) string {
	for range len(g.Stages) + 2 { // a Graph is acyclic: each step goes upstream
		if s := g.Source(name); s != nil {
			return s.Source.EventTime
		}
		st := g.Stage(name)
		if st == nil || len(st.Inputs) == 0 {
			return ""
		}
		if k := st.kind(); k != nil && k.eventTime != nil {
			if et := k.eventTime(st); et != "" {
				return et
			}
		}
		name = st.Inputs[0]
	}
	return ""
}

// WatermarkDelay returns how far behind its input watermark (the minimum
// of its inputs' watermarks) the stage named name may emit a row, by its
// EventTime: the stage's output watermark is its input watermark minus
// this, so that no row a stage emits is late for the stages reading it
// (docs/graph.md, "Watermarks"). It is the stage's allowed lateness, plus
// an interval join's upper bound (when positive), a dedup's within for
// keep: last, a tumbling top_n's size; 0 for filter, project, lookup,
// sources, sinks and unknown names.
func (g *Graph) WatermarkDelay(name string) time.Duration {
	st := g.Stage(name)
	if st == nil {
		return 0
	}
	if k := st.kind(); k != nil && k.delay != nil {
		return k.delay(st)
	}
	return 0
}

// ---- Describe ----

// Describe draws the graph as text for `floe plan`: every source, then
// every stage in topological order, then every sink, each as a header line
// "<role> <name>: <what it does>" and a line "inputs -> name -> outputs".
func (g *Graph) Describe() string { return g.DescribeWith(nil) }

// DescribeWith is Describe with note(name), when not empty, appended in
// brackets to the header line of each source and stage (the engine adds
// parallelism this way). Sinks get no note: their names may be those of a
// source or stage.
func (g *Graph) DescribeWith(note func(name string) string) string {
	var b strings.Builder
	header := func(role, name, what string) {
		fmt.Fprintf(&b, "%s %s: %s", role, name, what)
		if note != nil && role != "sink" {
			if n := note(name); n != "" {
				fmt.Fprintf(&b, " [%s]", n)
			}
		}
		b.WriteByte('\n')
	}
	// flow writes "inputs -> name -> outputs"; sinks have no outputs.
	flow := func(in []string, name string, sink bool) {
		b.WriteString("  ")
		if len(in) > 0 {
			b.WriteString(strings.Join(in, ", "))
			b.WriteString(" -> ")
		}
		if sink {
			b.WriteString("sink ")
		}
		b.WriteString(name)
		var out []string
		if !sink {
			out = slices.Clone(g.down[name])
			for _, s := range g.sinksOf[name] {
				out = append(out, "sink "+s)
			}
		}
		if len(out) > 0 {
			b.WriteString(" -> ")
			b.WriteString(strings.Join(out, ", "))
		}
		b.WriteByte('\n')
	}
	for _, s := range g.Sources {
		header("source", s.Name, describeSource(&s.Source))
		flow(nil, s.Name, false)
	}
	for _, st := range g.Stages {
		header("stage", st.Name, g.describeStage(&st))
		in := st.Inputs
		if k := st.kind(); k != nil && k.inputs == 2 && len(in) == 2 {
			in = []string{in[0] + " (left)", in[1] + " (right)"}
		}
		flow(in, st.Name, false)
	}
	for _, s := range g.Sinks {
		what := fmt.Sprintf("%s %s %s", s.Sink.Type, s.Sink.Format, s.Sink.URL)
		if s.Sink.PartitionBy != "" {
			what += ", partition by " + s.Sink.PartitionBy
		}
		if len(s.Sink.PartitionColumns) > 0 {
			what += ", partition by " + strings.Join(s.Sink.PartitionColumns, ", ")
		}
		header("sink", s.Name, what)
		flow([]string{s.Input}, s.Name, true)
	}
	return b.String()
}

func describeSource(s *Source) string {
	what := fmt.Sprintf("%s %s %s, event time %s", s.Type, s.Format, s.URL, s.EventTime)
	if s.Watermark.MaxOutOfOrderness > 0 {
		what += ", out of order " + fmtDur(s.Watermark.MaxOutOfOrderness)
	}
	if s.Inputs == InputsDirectory {
		what += ", an input per directory"
	}
	return what
}

func (g *Graph) describeStage(st *Stage) string {
	what := "?"
	if k := st.kind(); k != nil {
		what = k.describe(g, st)
	}
	if st.LateURL != "" {
		what += ", late rows to " + st.LateURL
	}
	return what
}

func describeProject(_ *Graph, st *Stage) string {
	cols := make([]string, len(st.Project.Columns))
	for i, c := range st.Project.Columns {
		cols[i] = c.Name
	}
	return "project " + strings.Join(cols, ", ")
}

func describeWindowStage(_ *Graph, st *Stage) string {
	var what string
	w := st.Window
	switch w.Kind() {
	case WindowTumbling:
		what = "window tumbling " + fmtDur(w.Tumbling)
	case WindowSliding:
		what = fmt.Sprintf("window sliding %s every %s", fmtDur(w.Sliding.Size), fmtDur(w.Sliding.Slide))
	case WindowSession:
		what = "window session gap " + fmtDur(w.Session.Gap)
	default:
		what = "window"
	}
	what += ", key " + keyList(w.Key)
	if w.AllowedLateness > 0 {
		what += ", lateness " + fmtDur(w.AllowedLateness)
	}
	aggs := make([]string, len(w.Aggregates))
	for i, a := range w.Aggregates {
		aggs[i] = a.Name + "=" + a.String()
	}
	return what + ", " + strings.Join(aggs, " ")
}

func describeJoin(g *Graph, st *Stage) string {
	j := st.Join
	what := fmt.Sprintf("join %s on %s", j.Type, onList(j.LeftKeys, j.RightKeys))
	lt, rt := "left."+j.LeftTime, "right."+j.RightTime
	if j.LeftTime == "" && len(st.Inputs) == 2 {
		lt = "left." + g.EventTime(st.Inputs[0])
	}
	if j.RightTime == "" && len(st.Inputs) == 2 {
		rt = "right." + g.EventTime(st.Inputs[1])
	}
	switch {
	case j.Interval != nil:
		what += fmt.Sprintf(", %s between %s - %s and %s + %s", rt, lt, fmtDur(j.Interval.Lower), lt, fmtDur(j.Interval.Upper))
	case j.Window != nil && j.Window.Sliding != nil:
		what += fmt.Sprintf(", same sliding window %s every %s", fmtDur(j.Window.Sliding.Size), fmtDur(j.Window.Sliding.Slide))
	case j.Window != nil:
		what += ", same tumbling window " + fmtDur(j.Window.Tumbling)
	}
	if j.AllowedLateness > 0 {
		what += ", lateness " + fmtDur(j.AllowedLateness)
	}
	return what
}

func describeTopN(_ *Graph, st *Stage) string {
	t := st.TopN
	order := make([]string, len(t.OrderBy))
	for i, o := range t.OrderBy {
		order[i] = o.String()
	}
	what := fmt.Sprintf("top_n %d by %s, key %s", t.N, strings.Join(order, ", "), keyList(t.Keys))
	if t.PerWindow() {
		what += ", per input window"
	} else {
		what += ", tumbling " + fmtDur(t.Tumbling)
	}
	if t.AllowedLateness > 0 {
		what += ", lateness " + fmtDur(t.AllowedLateness)
	}
	return what
}

func describeDedup(_ *Graph, st *Stage) string {
	dd := st.Dedup
	what := fmt.Sprintf("dedup keep %s within %s, key %s", dd.Keep, fmtDur(dd.Within), keyList(dd.Keys))
	if dd.EventTime != "" {
		what += ", event time " + dd.EventTime
	}
	if dd.AllowedLateness > 0 {
		what += ", lateness " + fmtDur(dd.AllowedLateness)
	}
	return what
}

func describeOver(g *Graph, st *Stage) string {
	o := st.Over
	order := o.OrderBy
	if order == "" && len(st.Inputs) == 1 {
		order = g.EventTime(st.Inputs[0])
	}
	aggs := make([]string, len(o.Aggregates))
	for i, a := range o.Aggregates {
		aggs[i] = a.Name + "=" + a.String()
	}
	what := fmt.Sprintf("over rows %d preceding by %s, key %s, %s", o.Rows, order, keyList(o.Keys), strings.Join(aggs, " "))
	if o.AllowedLateness > 0 {
		what += ", lateness " + fmtDur(o.AllowedLateness)
	}
	return what
}

func keyList(k []string) string { return "[" + strings.Join(k, ", ") + "]" }

// onList renders join keys: "[a, b]" when both sides name the same
// columns, else "[a = x, b = y]".
func onList(left, right []string) string {
	if slices.Equal(left, right) {
		return keyList(left)
	}
	pairs := make([]string, max(len(left), len(right)))
	for i := range pairs {
		var l, r string
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		pairs[i] = l + " = " + r
	}
	return keyList(pairs)
}

// fmtDur formats d as Go does without trailing zero units: 1m, 1h30m, 5s.
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
