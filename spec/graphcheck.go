package spec

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/floe-dev/floe/internal/aggsyntax"
)

// Graph is a pipeline as a directed acyclic graph: named sources, stages
// that read one or two named upstreams, and sinks that each write one
// upstream. Get one with Pipeline.Graph; it is the one shape the engine
// runs, whichever form the spec was written in.
type Graph struct {
	// Sources are in declaration order (the linear form: one, "source").
	Sources []NamedSource
	// Stages are in a topological order: every stage comes after its
	// inputs; among stages whose inputs are ready, declaration order.
	Stages []Stage
	// Sinks are in declaration order (the linear form: one, "sink").
	Sinks []NamedSink

	// paths maps a source or stage name to its field path in the spec
	// ("sources.clicks", "stages[2]", "operators[1]", "source");
	// sinkPaths a sink name to its ("sinks.out", "sink").
	paths, sinkPaths map[string]string
	// down maps a source or stage to the stages reading it, in Graph
	// order; sinksOf to the sinks writing it, in declaration order.
	down, sinksOf map[string][]string
	// linear records that the graph came from the linear form.
	linear bool
}

// Graph returns p as a Graph: the graph form as declared, the linear form
// as one source named "source" (or "source-2", ... if an operator id is
// "source"), one stage per operator named by its id, each reading the one
// before, and one sink named "sink". The Graph shares the configuration
// structs (Filter, Window, ...) of p and copies the rest.
//
// Sources and stages share one namespace (a stage's inputs name them);
// sinks, which nothing reads, have their own, so a sink may be named after
// the stage it writes.
//
// It checks only the graph's shape: names, inputs, cycles, stages and
// sources nobody reads, the number of inputs of each kind. A pipeline that
// passes Validate always has a Graph; for one that does not, Graph may
// succeed or report its shape problems as Validate would.
func (p *Pipeline) Graph() (*Graph, error) {
	c := newCollector(p.origin)
	g := p.buildGraph(c)
	if err := c.err(); err != nil {
		return nil, err
	}
	return g, nil
}

func (p *Pipeline) buildGraph(c *collector) *Graph {
	if !p.isGraph() {
		return p.linearGraph(c)
	}
	g := newGraph(false)
	role := map[string]string{} // name -> "source", "stage" or "sink"
	namePath := map[string]string{}
	claim := func(name, fp, what string) bool {
		key := name
		if what == "sink" {
			key = "sink " + name // sinks have their own namespace
		}
		switch {
		case name == "":
			c.add(fp, "required: name the %s", what)
		case len(name) > maxNameLen:
			c.add(fp, "name of %d bytes is too long (at most %d: a name becomes a state operator id)", len(name), maxNameLen)
		case !identRE.MatchString(name):
			c.add(fp, "invalid name %q (%s)", name, identRule)
		case role[key] != "" && what == "sink":
			c.add(fp, "duplicate sink name %q (also %s)", name, namePath[key])
		case role[key] != "":
			c.add(fp, "duplicate name %q (also %s); sources and stages share one namespace", name, namePath[key])
		default:
			role[key], namePath[key] = what, fp
			return true
		}
		return false
	}
	switch n := len(p.Sources); {
	case n == 0:
		c.add("sources", "required: at least one named source, e.g. sources: {clicks: {type: files, url: ..., format: jsonl, ...}}")
	case n > maxSources:
		c.add("sources", "%d sources; at most %d", n, maxSources)
	}
	if n := len(p.Stages); n > maxStages {
		c.add("stages", "%d stages; at most %d", n, maxStages)
		return g // too many to order; fix this first
	}
	switch n := len(p.Sinks); {
	case n == 0:
		c.add("sinks", "required: at least one named sink, e.g. sinks: {out: {input: <stage>, type: files, url: ..., format: parquet}}")
	case n > maxSinks:
		c.add("sinks", "%d sinks; at most %d", n, maxSinks)
	}
	for _, s := range p.Sources {
		fp := join("sources", s.Name)
		if s.Name == "" {
			fp = "sources"
		}
		if claim(s.Name, fp, "source") {
			g.paths[s.Name] = fp
		}
	}
	for i, st := range p.Stages {
		if claim(st.Name, index("stages", i)+".name", "stage") {
			g.paths[st.Name] = index("stages", i)
		}
	}
	for _, s := range p.Sinks {
		fp := join("sinks", s.Name)
		if s.Name == "" {
			fp = "sinks"
		}
		if claim(s.Name, fp, "sink") {
			g.sinkPaths[s.Name] = fp
		}
	}
	var readable []string // sources and stages, for suggestions
	for _, s := range p.Sources {
		if role[s.Name] == "source" {
			readable = append(readable, s.Name)
		}
	}
	for i, st := range p.Stages {
		if g.paths[st.Name] == index("stages", i) {
			readable = append(readable, st.Name)
		}
	}
	// resolve reports whether input names something a stage or sink can
	// read.
	broken := false // some input did not resolve
	resolve := func(fp, input string) bool {
		switch {
		case role[input] == "source" || role[input] == "stage":
			return true
		case input == "":
			c.add(fp, "empty name: name a source or a stage")
		case role["sink "+input] == "sink":
			c.add(fp, "%q is a sink; a stage or sink reads a source or a stage", input)
		default:
			if s := closest(input, readable); s != "" {
				c.add(fp, "unknown input %q (did you mean %s?)", input, s)
			} else {
				c.add(fp, "unknown input %q (sources and stages: %s)", input, strings.Join(readable, ", "))
			}
		}
		broken = true
		return false
	}
	// Stage inputs.
	reads := make([][]string, len(p.Stages)) // resolved inputs
	for i, st := range p.Stages {
		sp := index("stages", i)
		k := st.kind() // nil: none or several kinds set (validateStage reports it)
		two := k != nil && k.inputs == 2
		switch {
		case len(st.Inputs) == 0:
			broken = true
			if c.hasFailed(sp+".input") || c.hasFailed(sp+".inputs") {
				break // reported by the decoder
			}
			if two {
				c.add(sp+".inputs", "required: a %s reads two inputs, inputs: [left, right]", k.name)
			} else {
				c.add(sp+".input", "required: name the source or stage this stage reads")
			}
		default:
			if k != nil && len(st.Inputs) != k.inputs {
				if two {
					c.add(p.inputPath(i, 0), "a %s reads two inputs (inputs: [left, right]), got %d", k.name, len(st.Inputs))
				} else {
					c.add(p.inputPath(i, 0), "a %s stage reads one input, got %d", k.name, len(st.Inputs))
				}
			}
			for j, in := range st.Inputs {
				if resolve(p.inputPath(i, j), in) {
					reads[i] = append(reads[i], in)
				}
			}
		}
	}
	// Topological order: repeatedly take the first declared stage whose
	// inputs are all placed.
	placed := map[string]bool{}
	for _, s := range p.Sources {
		placed[s.Name] = true
	}
	done := make([]bool, len(p.Stages))
	order := make([]int, 0, len(p.Stages))
	for progress := true; progress; {
		progress = false
		for i, st := range p.Stages {
			if done[i] || !allPlaced(reads[i], placed) {
				continue
			}
			done[i], progress = true, true
			order = append(order, i)
			if role[st.Name] == "stage" && g.paths[st.Name] == index("stages", i) {
				placed[st.Name] = true
			}
			break
		}
	}
	p.reportCycles(c, done, reads)
	for _, i := range order {
		st := p.Stages[i]
		st.Inputs = slices.Clone(st.Inputs)
		g.Stages = append(g.Stages, st)
	}
	g.Sources = slices.Clone(p.Sources)
	for _, s := range p.Sinks {
		fp := "sinks.input"
		if s.Name != "" {
			fp = join("sinks", s.Name) + ".input"
		}
		if s.Input == "" {
			broken = true
			c.add(fp, "required: name the source or stage this sink writes")
		} else {
			resolve(fp, s.Input)
		}
		g.Sinks = append(g.Sinks, s)
	}
	g.index()
	// Sources and stages nobody reads (stages in a cycle count as
	// readers). Not when an input did not resolve: fix that first.
	if broken {
		return g
	}
	read := map[string]bool{}
	for _, in := range reads {
		for _, n := range in {
			read[n] = true
		}
	}
	for _, s := range p.Sinks {
		read[s.Input] = true
	}
	for _, s := range p.Sources {
		if role[s.Name] == "source" && !read[s.Name] {
			c.add(g.paths[s.Name], "source %q is not read by any stage or sink", s.Name)
		}
	}
	for i, st := range p.Stages {
		if g.paths[st.Name] == index("stages", i) && done[i] && !read[st.Name] {
			c.add(index("stages", i), "the output of stage %q is not read by any stage or sink (add a sink with input: %s, or remove the stage)", st.Name, st.Name)
		}
	}
	return g
}

func allPlaced(names []string, placed map[string]bool) bool {
	for _, n := range names {
		if !placed[n] {
			return false
		}
	}
	return true
}

// inputPath is the field path of stage i's input j: "stages[i].input" for
// the one-input form of a parsed spec, else "stages[i].inputs[j]".
func (p *Pipeline) inputPath(i, j int) string {
	sp := index("stages", i)
	if p.origin != nil {
		if _, ok := p.origin.pos[sp+".input"]; ok {
			return sp + ".input"
		}
	}
	return index(sp+".inputs", j)
}

// reportCycles names each cycle among the stages that could not be placed
// (done false), once, at the input of its first declared stage. reads
// holds each stage's resolved inputs.
func (p *Pipeline) reportCycles(c *collector, done []bool, reads [][]string) {
	at := map[string]int{}
	for i, st := range p.Stages {
		if !done[i] {
			if _, dup := at[st.Name]; !dup {
				at[st.Name] = i
			}
		}
	}
	seen := make([]bool, len(p.Stages))
	for start := range p.Stages {
		if done[start] || seen[start] {
			continue
		}
		// Walk upstream along the first unplaced input until a stage
		// repeats.
		var walk []int
		onWalk := map[int]int{}
		cur := start
		for {
			if k, ok := onWalk[cur]; ok {
				p.reportCycle(c, walk[k:], reads)
				break
			}
			if seen[cur] {
				break // reaches a cycle already reported
			}
			seen[cur] = true
			onWalk[cur] = len(walk)
			walk = append(walk, cur)
			next := -1
			for _, in := range reads[cur] {
				if j, ok := at[in]; ok {
					next = j
					break
				}
			}
			if next < 0 {
				break // cannot happen: an unplaced stage reads an unplaced stage
			}
			cur = next
		}
	}
}

// reportCycle reports the cycle whose stages, each reading the next, are
// cyc, in data-flow order from its first declared stage.
func (p *Pipeline) reportCycle(c *collector, cyc []int, reads [][]string) {
	flow := slices.Clone(cyc)
	slices.Reverse(flow) // each stage now feeds the next
	first := 0
	for k, i := range flow {
		if i < flow[first] {
			first = k
		}
	}
	flow = append(flow[first:], flow[:first]...)
	names := make([]string, 0, len(flow)+1)
	for _, i := range flow {
		names = append(names, p.Stages[i].Name)
	}
	names = append(names, names[0])
	i := flow[0]
	pred := p.Stages[flow[len(flow)-1]].Name
	j := max(slices.Index(p.Stages[i].Inputs, pred), 0)
	c.add(p.inputPath(i, j), "cycle: %s (a stage cannot read its own output)", strings.Join(names, " -> "))
}

// linearGraph is the Graph of the linear form.
func (p *Pipeline) linearGraph(c *collector) *Graph {
	g := newGraph(true)
	taken := map[string]bool{}
	for i, op := range p.Operators {
		switch {
		case op.ID == "":
			c.add(index("operators", i)+".id", "required (SetDefaults assigns one)")
		case taken[op.ID]:
			c.add(index("operators", i)+".id", "duplicate id %q", op.ID)
		}
		taken[op.ID] = true
	}
	free := func(base string) string {
		name := base
		for n := 2; taken[name]; n++ {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		taken[name] = true
		return name
	}
	src, snk := free("source"), "sink"
	g.Sources = []NamedSource{{Name: src, Source: p.Source}}
	g.paths[src] = "source"
	prev := src
	for i, op := range p.Operators {
		st := Stage{Name: op.ID, Inputs: []string{prev}, Filter: op.Filter, Project: op.Project, Window: op.Window}
		if op.Window != nil {
			st.LateURL = p.Source.LateURL // the linear form's late rows are the window's
		}
		g.Stages = append(g.Stages, st)
		g.paths[op.ID] = index("operators", i)
		prev = op.ID
	}
	g.Sinks = []NamedSink{{Name: snk, Input: prev, Sink: p.Sink}}
	g.sinkPaths[snk] = "sink"
	g.index()
	return g
}

func newGraph(linear bool) *Graph {
	return &Graph{paths: map[string]string{}, sinkPaths: map[string]string{},
		down: map[string][]string{}, sinksOf: map[string][]string{}, linear: linear}
}

// index fills g.down and g.sinksOf.
func (g *Graph) index() {
	for _, st := range g.Stages {
		for _, in := range st.Inputs {
			if !slices.Contains(g.down[in], st.Name) {
				g.down[in] = append(g.down[in], st.Name)
			}
		}
	}
	for _, s := range g.Sinks {
		if s.Input != "" && !slices.Contains(g.sinksOf[s.Input], s.Name) {
			g.sinksOf[s.Input] = append(g.sinksOf[s.Input], s.Name)
		}
	}
}

// ---- validation of the graph form ----

// sourceIndex returns the index of the source named name, or -1.
func (p *Pipeline) sourceIndex(name string) int {
	for i, s := range p.Sources {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// validateGraph checks a pipeline in the graph form: the shape (as Graph),
// then each source, stage and sink on its own.
func (p *Pipeline) validateGraph(c *collector) {
	if k := p.legacyField(); k != "" {
		c.add(k, "cannot be used with sources, stages and sinks: a spec is either linear (source, operators, sink) or a graph (sources, stages, sinks)")
	}
	p.buildGraph(c)
	for _, s := range p.Sources {
		sp := join("sources", s.Name)
		validateSourceAt(c, sp, &s.Source)
		if s.Source.LateURL != "" {
			c.add(sp+".late_url", "in the graph form late rows belong to the stage that finds them late: set late_url on the window, join, top_n or dedup stage")
		}
		if s.Source.Inputs == InputsDirectory {
			c.add(sp+".inputs", "inputs: directory is not supported in the graph form: each source is one watermark input; declare each directory as a source of its own")
		}
		if s.Source.Order != "" {
			c.add(sp+".order", "order is not supported in the graph form yet (its sources are listed whole every run); leave it out")
		}
		if first := p.Sources[0]; s.Source.RejectedURL != first.Source.RejectedURL {
			c.add(sp+".rejected_url", "differs from sources.%s's: the sources of one pipeline share one rejected-rows location for now; give every source the same rejected_url, or none (rows go to the sink's _rejected/)",
				first.Name)
		}
	}
	for i := range p.Stages {
		p.validateStage(c, i)
	}
	for i, st := range p.Stages {
		if k := st.kind(); k != nil && k.check != nil {
			k.check(p, c, i)
		}
	}
	// Locations: a sink must not write where the pipeline reads, nor where
	// another sink writes.
	reads := map[string]string{} // url -> field path
	for _, s := range p.Sources {
		if s.Source.URL != "" {
			fp := join("sources", s.Name) + ".url"
			if prev, dup := reads[s.Source.URL]; dup {
				c.add(fp, "same url as %s: two sources would read the same files", prev)
			} else {
				reads[s.Source.URL] = fp
			}
		}
	}
	for i, st := range p.Stages {
		for _, k := range st.setKinds() {
			if k.reads == nil {
				continue
			}
			if u, field := k.reads(&st); u != "" {
				if _, dup := reads[u]; !dup {
					reads[u] = index("stages", i) + "." + field
				}
			}
		}
	}
	writes := map[string]string{}
	for _, s := range p.Sinks {
		sp := join("sinks", s.Name)
		validateSinkAt(c, sp, &s.Sink)
		u := s.Sink.URL
		if u == "" {
			continue
		}
		if r, ok := reads[u]; ok {
			c.add(sp+".url", "must differ from %s (the pipeline would read its own output)", r)
		} else if w, ok := writes[u]; ok {
			c.add(sp+".url", "same url as %s: two sinks cannot write one location", w)
		}
		writes[u] = sp + ".url"
	}
}

func (p *Pipeline) validateStage(c *collector, i int) {
	st := &p.Stages[i]
	sp := index("stages", i)
	k := st.kind()
	switch all := strings.Join(StageKinds, ", "); {
	case k != nil:
		k.validate(c, sp+"."+k.name, st) // stagekinds.go
	case len(st.setKinds()) == 0:
		c.add(sp, "needs one of %s", all)
	default:
		c.add(sp, "sets more than one of %s; use one list item per stage", all)
	}
	if st.LateURL != "" {
		if k != nil && !k.keyed {
			c.add(sp+".late_url", "a %s stage finds no rows late (%s stages do)", k.name, lateKinds())
		} else {
			checkURLField(c, sp+".late_url", st.LateURL, false)
		}
	}
}

var joinTypes = []string{string(JoinInner), string(JoinLeft)}

func validateJoinType(c *collector, fp string, t JoinType) {
	if t != "" && !slices.Contains(joinTypes, string(t)) {
		c.add(fp, "invalid value %q (allowed: %s)", t, strings.Join(joinTypes, ", "))
	}
}

// validateKeys checks the key columns of a join or lookup at path jp.
func validateKeys(c *collector, jp string, left, right []string) {
	lp, rp := jp+".left_on", jp+".right_on"
	if c.origin != nil {
		if _, ok := c.origin.pos[jp+".on"]; ok {
			lp, rp = jp+".on", jp+".on"
		}
	} else if slices.Equal(left, right) {
		lp, rp = jp+".on", jp+".on"
	}
	switch {
	case len(left) == 0 && len(right) == 0:
		if !c.hasFailed(jp+".on") && !c.hasFailed(lp) && !c.hasFailed(rp) {
			c.add(jp, "needs key columns: on: [column, ...], or left_on and right_on")
		}
		return
	case len(left) == 0:
		c.add(lp, "required with right_on: the left side's key columns")
		return
	case len(right) == 0:
		c.add(rp, "required with left_on: the right side's key columns")
		return
	case len(left) != len(right):
		c.add(rp, "%d columns but left_on has %d: the keys are matched pairwise", len(right), len(left))
		return
	case len(left) > maxKeyColumns:
		c.add(lp, "%d key columns; at most %d", len(left), maxKeyColumns)
		return
	}
	for j := range left {
		if left[j] == "" {
			c.add(index(lp, j), "empty column name")
		}
		if right[j] == "" {
			c.add(index(rp, j), "empty column name")
		}
	}
}

// validateKeyList checks the key columns of a top_n or dedup at path fp.
func validateKeyList(c *collector, fp string, keys []string) {
	if len(keys) > maxKeyColumns {
		c.add(fp, "%d key columns; at most %d", len(keys), maxKeyColumns)
	}
	for j, k := range keys {
		if k == "" {
			c.add(index(fp, j), "empty column name")
		}
	}
}

func validateJoin(c *collector, jp string, j *Join) {
	validateJoinType(c, jp+".type", j.Type)
	validateKeys(c, jp, j.LeftKeys, j.RightKeys)
	switch {
	case j.Interval == nil && j.Window == nil:
		if !c.hasFailed(jp+".interval") && !c.hasFailed(jp+".window") {
			c.add(jp, "needs interval or window: a join without a time bound would keep every row")
		}
	case j.Interval != nil && j.Window != nil:
		c.add(jp+".window", "join has both interval and window; set exactly one")
	case j.Interval != nil:
		if iv := j.Interval; iv.Lower+iv.Upper < 0 {
			c.add(jp+".interval", "empty interval: right.t between left.t - %s and left.t + %s (lower + upper must be >= 0)", fmtDur(iv.Lower), fmtDur(iv.Upper))
		}
	default:
		w, wp := j.Window, jp+".window"
		switch {
		case w.Tumbling != 0 && w.Sliding != nil:
			c.add(wp+".sliding", "window has both tumbling and sliding; set exactly one")
		case w.Tumbling < 0:
			c.add(wp+".tumbling", "must be > 0")
		case w.Sliding != nil:
			if w.Sliding.Size <= 0 {
				c.add(wp+".sliding.size", "must be > 0")
			}
			if w.Sliding.Slide <= 0 {
				c.add(wp+".sliding.slide", "must be > 0")
			}
		case w.Tumbling == 0:
			if !c.hasFailed(wp + ".tumbling") {
				c.add(wp, "needs exactly one of tumbling, sliding")
			}
		}
	}
	if j.AllowedLateness < 0 {
		c.add(jp+".allowed_lateness", "must not be negative")
	}
	for _, x := range []struct{ name, v string }{{"left_time", j.LeftTime}, {"right_time", j.RightTime}, {"right_prefix", j.RightPrefix}} {
		if x.v == "" && c.origin != nil {
			if _, ok := c.origin.pos[jp+"."+x.name]; ok {
				c.add(jp+"."+x.name, "empty (leave it out for the default)")
			}
		}
	}
}

func validateLookup(c *collector, lp string, l *Lookup) {
	checkURLField(c, lp+".url", l.URL, true)
	switch {
	case l.Format == "":
		c.add(lp+".format", "required (allowed: %s)", strings.Join(sourceFormats, ", "))
	case !slices.Contains(sourceFormats, string(l.Format)):
		c.add(lp+".format", "invalid value %q (allowed: %s)", l.Format, strings.Join(sourceFormats, ", "))
	}
	if len(l.Schema) == 0 && l.Format != Parquet && l.Format != "" {
		c.add(lp+".schema", "required for format %s (only parquet infers its schema)", l.Format)
	}
	seen := map[string]bool{}
	for i, f := range l.Schema {
		fp := lp + ".schema." + f.Name
		switch {
		case f.Name == "":
			c.add(index(lp+".schema", i), "empty column name")
		case seen[f.Name]:
			c.add(fp, "duplicate column")
		case !slices.Contains(dataTypes, string(f.Type)):
			c.add(fp, "unknown type %q%s", f.Type, hint(string(f.Type), dataTypes))
		}
		seen[f.Name] = true
	}
	if l.Pattern != "" {
		if _, err := path.Match(l.Pattern, ""); err != nil {
			c.add(lp+".pattern", "invalid glob %q: %v", l.Pattern, err)
		}
	}
	if l.CSV != nil {
		if l.Format != CSV && l.Format != "" {
			c.add(lp+".csv", "CSV options given but format is %s", l.Format)
		}
		d := l.CSV.Delimiter
		r, size := utf8.DecodeRuneInString(d)
		if size != len(d) || d == "" || r == utf8.RuneError || r == '"' || r == '\r' || r == '\n' {
			c.add(lp+".csv.delimiter", "must be one character other than a quote or line break, got %q", d)
		}
	}
	validateJoinType(c, lp+".type", l.Type)
	validateKeys(c, lp, l.LeftKeys, l.RightKeys)
	if len(l.Schema) > 0 {
		rp := lp + ".right_on"
		if c.origin != nil {
			if _, ok := c.origin.pos[lp+".on"]; ok {
				rp = lp + ".on"
			}
		}
		for _, k := range l.RightKeys {
			if _, ok := lookup(l.Schema, k); k != "" && !ok {
				c.add(rp, "column %q is not in %s.schema%s", k, lp, colHint(k, l.Schema))
			}
		}
	}
}

// checkTopNInput refuses a top_n of stages[i] that ranks within its
// input's windows but reads a source, which has none.
func checkTopNInput(p *Pipeline, c *collector, i int) {
	st := &p.Stages[i]
	if st.TopN.PerWindow() && len(st.Inputs) == 1 && p.sourceIndex(st.Inputs[0]) >= 0 {
		c.add(p.inputPath(i, 0), "a top_n without tumbling ranks within its input's windows, and source %q has none: read a window stage, or set tumbling", st.Inputs[0])
	}
}

func validateTopN(c *collector, tp string, t *TopN) {
	if t.N < 1 || t.N > maxTopN {
		c.add(tp+".n", "must be between 1 and %d, got %d", maxTopN, t.N)
	}
	validateKeyList(c, tp+".key", t.Keys)
	if len(t.OrderBy) == 0 {
		c.add(tp+".order_by", "required: the ranking column(s), e.g. order_by: [clicks desc]")
	}
	for j, o := range t.OrderBy {
		if o.Column == "" && !c.hasFailed(tp+".order_by") {
			c.add(index(tp+".order_by", j), "empty column name")
		}
	}
	if t.Tumbling < 0 {
		c.add(tp+".tumbling", "must be > 0")
	}
	if t.EventTime != "" && t.Tumbling == 0 {
		c.add(tp+".event_time", "applies with tumbling only (without it the input's window_start and window_end group the rows)")
	}
	if t.AllowedLateness < 0 {
		c.add(tp+".allowed_lateness", "must not be negative")
	}
}

var dedupKeeps = []string{string(KeepFirst), string(KeepLast)}

func validateDedup(c *collector, dp string, d *Dedup) {
	if len(d.Keys) == 0 {
		c.add(dp+".key", "required: the column(s) that identify a duplicate")
	}
	validateKeyList(c, dp+".key", d.Keys)
	if d.Keep != "" && !slices.Contains(dedupKeeps, string(d.Keep)) {
		c.add(dp+".keep", "invalid value %q (allowed: %s)", d.Keep, strings.Join(dedupKeeps, ", "))
	}
	if d.AllowedLateness < 0 {
		c.add(dp+".allowed_lateness", "must not be negative")
	}
	switch {
	case d.Within < 0:
		c.add(dp+".within", "must be > 0")
	case d.Within == 0:
		c.add(dp+".within", "required: how long a key's first row is remembered, e.g. within: 1h")
	}
}

func validateOver(c *collector, op string, o *Over) {
	validateKeyList(c, op+".key", o.Keys)
	if o.Rows < 0 || o.Rows > maxOverRows {
		c.add(op+".rows", "must be between 0 and %d, got %d (rows: n means ROWS BETWEEN n PRECEDING AND CURRENT ROW)", maxOverRows, o.Rows)
	}
	if c.origin != nil {
		if _, ok := c.origin.pos[op+".rows"]; !ok {
			c.add(op+".rows", "required: how many preceding rows the frame holds (ROWS BETWEEN n PRECEDING AND CURRENT ROW), e.g. rows: 10")
		}
	}
	if o.AllowedLateness < 0 {
		c.add(op+".allowed_lateness", "must not be negative")
	}
	ap := op + ".aggregates"
	if len(o.Aggregates) == 0 {
		c.add(ap, "required: at least one name: \"func(column)\", e.g. {avg_price: \"avg(price)\"}")
	}
	for j, a := range o.Aggregates {
		fp := ap + "." + a.Name
		switch {
		case a.Name == "":
			c.add(index(ap, j), "empty aggregate name")
		case a.RenamedFrom != "":
			c.add(fp+".renamed_from", "applies to window aggregates only (an over stage's state holds input columns, not aggregates)")
		case c.hasFailed(fp):
		case a.Func == CountDistinct:
			c.add(fp, "count_distinct is not supported in an over stage (count, sum, avg, min, max, first, last are)")
		default:
			if err := aggsyntax.Check(string(a.Func), a.Column); err != nil {
				c.add(fp, "%s", err.Error())
			}
		}
	}
}
