package spec

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	exprparser "github.com/expr-lang/expr/parser"

	"github.com/floe-dev/floe/internal/aggsyntax"
	"github.com/floe-dev/floe/internal/suggest"
	"github.com/floe-dev/floe/keygroup"
)

var identRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// maxIdentLen bounds pipeline names and operator ids, which appear in
// object keys.
const maxIdentLen = 100

func validIdent(s string) bool { return len(s) <= maxIdentLen && identRE.MatchString(s) }

const identRule = "use lowercase letters, digits, _ and -, starting with a letter or digit"

var (
	sourceFormats = []string{string(JSONL), string(CSV), string(Parquet)}
	sinkFormats   = []string{string(Parquet), string(JSONL)}
	onErrors      = []string{string(OnErrorReject), string(OnErrorFail)}
	dataTypes     = func() []string {
		out := make([]string, len(DataTypes))
		for i, t := range DataTypes {
			out[i] = string(t)
		}
		return out
	}()
)

// Validate checks the pipeline and returns an Errors listing every problem,
// or nil. For a parsed spec each problem carries the file, line and column;
// for a pipeline built in Go only the field path. Validate does not modify
// p; call SetDefaults first for a pipeline built from a struct literal.
//
// Validate checks what the spec alone decides: required fields, names and
// ids, enumerations, URLs, durations and their signs, the source schema and
// its event-time column, expression syntax, the aggregate grammar, state
// bounds. What depends on the schema flowing through the operators (an
// expression's or a window's columns and their types, the output column
// names a window makes, the shape of sliding windows) has one definition in
// packages expr and operators and is reported when the plan is compiled
// against the source schema (floe run, floe plan), which for a Parquet
// source without a declared schema is only known then.
func (p *Pipeline) Validate() error {
	c := newCollector(p.origin)
	p.validate(c)
	return c.err()
}

// SetDefaults fills zero-valued optional fields with their defaults:
// state parallelism, max_parallelism and retain_epochs, source on_error,
// CSV options for CSV sources, and operator ids; in the graph form also
// each source's on_error and CSV options, join and lookup types (inner)
// and dedup keep (first).
func (p *Pipeline) SetDefaults() {
	if p.State.Parallelism == 0 {
		p.State.Parallelism = DefaultParallelism
	}
	if p.State.MaxParallelism == 0 {
		p.State.MaxParallelism = DefaultMaxParallelism
	}
	if p.State.RetainEpochs == 0 {
		p.State.RetainEpochs = DefaultRetainEpochs
	}
	if p.Source.OnError == "" {
		p.Source.OnError = OnErrorReject
	}
	if p.Source.Format == CSV && p.Source.CSV == nil {
		p.Source.CSV = &CSVOptions{Header: true, Delimiter: ","}
	}
	p.assignIDs()
	p.setGraphDefaults() // graph.go
}

// assignIDs gives every operator without an id its kind as id, then
// "<kind>-2", "<kind>-3", ..., skipping ids already taken.
func (p *Pipeline) assignIDs() {
	taken := map[string]bool{}
	for _, op := range p.Operators {
		if op.ID != "" {
			taken[op.ID] = true
		}
	}
	next := map[string]int{}
	for i := range p.Operators {
		op := &p.Operators[i]
		kind := op.Kind()
		if op.ID != "" || kind == "" {
			continue
		}
		for {
			next[kind]++
			id := kind
			if n := next[kind]; n > 1 {
				id = fmt.Sprintf("%s-%d", kind, n)
			}
			if !taken[id] {
				op.ID, taken[id] = id, true
				break
			}
		}
	}
}

func (p *Pipeline) validate(c *collector) {
	switch {
	case p.Name == "":
		c.add("name", "required")
	case !validIdent(p.Name):
		c.add("name", "invalid name %q (%s)", p.Name, identRule)
	}
	if p.isGraph() {
		p.validateGraph(c) // graph.go
		p.validateState(c)
		return
	}
	p.validateSource(c)
	for i := range p.Operators {
		p.validateOperator(c, i)
	}
	ids := map[string]int{}
	for i, op := range p.Operators {
		fp := index("operators", i) + ".id"
		switch {
		case op.ID == "":
			if op.Kind() != "" {
				c.add(fp, "required (SetDefaults assigns one)")
			}
		case !validIdent(op.ID):
			c.add(fp, "invalid id %q (%s)", op.ID, identRule)
		default:
			if j, dup := ids[op.ID]; dup {
				c.add(fp, "duplicate id %q (also operators[%d])", op.ID, j)
			}
			ids[op.ID] = i
		}
	}
	p.validateSink(c)
	p.validateState(c)
}

func (p *Pipeline) validateSource(c *collector) { validateSourceAt(c, "source", &p.Source) }

// validateSourceAt checks the source s at field path sp ("source", or
// "sources.<name>" in the graph form).
func validateSourceAt(c *collector, sp string, s *Source) {
	switch s.Type {
	case "":
		c.add(sp+".type", "required (allowed: files, kafka)")
	case SourceFiles, SourceKafka:
	default:
		c.add(sp+".type", "invalid value %q (allowed: files, kafka)", s.Type)
	}
	validateKafka(c, sp, s)
	checkURLField(c, sp+".url", s.URL, s.Type != SourceKafka)
	switch {
	case s.Format == "":
		c.add(sp+".format", "required (allowed: %s)", strings.Join(sourceFormats, ", "))
	case s.Type == SourceKafka:
		// validateKafka checks a kafka source's format.
	case !contains(sourceFormats, string(s.Format)):
		c.add(sp+".format", "invalid value %q (allowed: %s)", s.Format, strings.Join(sourceFormats, ", "))
	}
	if len(s.Schema) == 0 && s.Format != Parquet && s.Format != "" {
		c.add(sp+".schema", "required for format %s (only parquet infers its schema)", s.Format)
	}
	seen := map[string]bool{}
	for i, f := range s.Schema {
		fp := sp + ".schema." + f.Name
		switch {
		case f.Name == "":
			c.add(index(sp+".schema", i), "empty column name")
		case seen[f.Name]:
			c.add(fp, "duplicate column")
		case !contains(dataTypes, string(f.Type)):
			c.add(fp, "unknown type %q%s", f.Type, hint(string(f.Type), dataTypes))
		}
		seen[f.Name] = true
	}
	if s.EventTime == "" {
		c.add(sp+".event_time", "required: name the timestamp column that drives event time")
	} else if len(s.Schema) > 0 {
		if f, ok := lookup(s.Schema, s.EventTime); !ok {
			c.add(sp+".event_time", "column %q is not in %s.schema%s", s.EventTime, sp, colHint(s.EventTime, s.Schema))
		} else if !f.Type.IsTimestamp() && contains(dataTypes, string(f.Type)) {
			c.add(sp+".event_time", "column %q has type %s; event time needs a timestamp type", s.EventTime, f.Type)
		}
	}
	if s.MaxFilesPerEpoch < 0 {
		c.add(sp+".max_files_per_epoch", "must not be negative")
	}
	switch {
	case s.Order != "" && s.Order != OrderLexical:
		c.add(sp+".order", "unknown order %q (want lexical, or leave it out)", s.Order)
	case s.Order == "" && s.FullListEvery != 0:
		c.add(sp+".full_list_every", "only with order: lexical (without it every run lists the whole source)")
	case s.FullListEvery < 0:
		c.add(sp+".full_list_every", "must be positive")
	case s.Order == OrderLexical && len(s.Schema) == 0:
		c.add(sp+".order", "order: lexical needs a declared schema (an inferred one is read from the first file of a full listing)")
	}
	if s.ForgetAfter < 0 {
		c.add(sp+".forget_after", "must be positive")
	}
	if s.MaxRowsPerEpoch < 0 {
		c.add(sp+".max_rows_per_epoch", "must not be negative")
	}
	if s.Pattern != "" {
		if _, err := path.Match(s.Pattern, ""); err != nil {
			c.add(sp+".pattern", "invalid glob %q: %v", s.Pattern, err)
		}
	}
	if s.CSV != nil {
		if s.Format != CSV && s.Format != "" {
			c.add(sp+".csv", "CSV options given but format is %s", s.Format)
		}
		d := s.CSV.Delimiter
		r, size := utf8.DecodeRuneInString(d)
		if size != len(d) || d == "" || r == utf8.RuneError || r == '"' || r == '\r' || r == '\n' {
			c.add(sp+".csv.delimiter", "must be one character other than a quote or line break, got %q", d)
		}
	}
	if s.Watermark.MaxOutOfOrderness < 0 {
		c.add(sp+".watermark.max_out_of_orderness", "must not be negative")
	}
	if s.Watermark.IdleTimeout < 0 {
		c.add(sp+".watermark.idle_timeout", "must not be negative")
	}
	if _, _, err := s.StartTime(); err != nil {
		c.add(sp+".start_from", "%v", err)
	}
	if s.Inputs != InputsSingle && s.Inputs != InputsDirectory {
		c.add(sp+".inputs", "invalid value %q (allowed: directory, or leave it out for one input)", s.Inputs)
	}
	if s.OnError != "" && !contains(onErrors, string(s.OnError)) {
		c.add(sp+".on_error", "invalid value %q (allowed: %s)", s.OnError, strings.Join(onErrors, ", "))
	}
	checkURLField(c, sp+".rejected_url", s.RejectedURL, false)
	checkURLField(c, sp+".late_url", s.LateURL, false)
}

// validateOperator checks operator i on its own; its columns are checked
// when the plan is compiled (see Validate).
func (p *Pipeline) validateOperator(c *collector, i int) {
	st := operatorOf(p.Operators[i])
	opPath := index("operators", i)
	all := strings.Join(operatorKinds, ", ")
	switch k := st.kind(); {
	case k != nil && k.operator:
		k.validate(c, opPath+"."+k.name, st) // stagekinds.go
	case len(st.setKinds()) == 0:
		c.add(opPath, "needs one of %s", all)
	default:
		c.add(opPath, "sets more than one of %s; use one list item per operator", all)
	}
}

// validateProject checks a project at field path fp.
func validateProject(c *collector, fp string, pr *Project) {
	if len(pr.Columns) == 0 {
		c.add(fp, "needs at least one output column")
		return
	}
	for j, pc := range pr.Columns {
		if pc.Name == "" {
			c.add(index(fp, j), "empty column name")
		}
		checkExpr(c, fp+"."+pc.Name, pc.Expr)
	}
}

func validateWindow(c *collector, wp string, w *Window) {
	// No key (key: [] or none) is one group: every row of a window.
	for j, k := range w.Key {
		if k == "" {
			c.add(index(wp+".key", j), "empty column name")
		}
	}
	var kinds []string
	if w.Tumbling != 0 {
		kinds = append(kinds, WindowTumbling)
	}
	if w.Sliding != nil {
		kinds = append(kinds, WindowSliding)
	}
	if w.Session != nil {
		kinds = append(kinds, WindowSession)
	}
	switch len(kinds) {
	case 0:
		if !c.hasFailed(wp+".tumbling") && !c.hasFailed(wp+".sliding") && !c.hasFailed(wp+".session") {
			c.add(wp, "needs exactly one of tumbling, sliding, session")
		}
	case 1:
	default:
		c.add(wp+"."+kinds[1], "window has both %s and %s; set exactly one", kinds[0], kinds[1])
	}
	if w.Tumbling < 0 {
		c.add(wp+".tumbling", "must be > 0")
	}
	if s := w.Sliding; s != nil {
		sp := wp + ".sliding"
		if s.Size <= 0 {
			c.add(sp+".size", "must be > 0")
		}
		if s.Slide <= 0 {
			c.add(sp+".slide", "must be > 0")
		}
	}
	if s := w.Session; s != nil && s.Gap <= 0 {
		c.add(wp+".session.gap", "must be > 0")
	}
	if w.AllowedLateness < 0 {
		c.add(wp+".allowed_lateness", "must not be negative")
	}
	ap := wp + ".aggregates"
	if len(w.Aggregates) == 0 {
		c.add(ap, "required: at least one name: \"func(column)\"")
	}
	renamedBy := map[string]string{}
	for j, a := range w.Aggregates {
		fp := ap + "." + a.Name
		if a.Name == "" {
			c.add(index(ap, j), "empty aggregate name")
			continue
		}
		if a.RenamedFrom != "" { // an empty renamed_from in a file is refused by the decoder
			rp := fp + ".renamed_from"
			switch prev, dup := renamedBy[a.RenamedFrom]; {
			case strings.TrimSpace(a.RenamedFrom) == "":
				c.add(rp, "empty: name the aggregate's previous name, or leave renamed_from out")
			case a.RenamedFrom == a.Name:
				c.add(rp, "is the aggregate's own name; name its previous name, or leave renamed_from out")
			case dup:
				c.add(rp, "%s is also the renamed_from of %s: one old aggregate can become only one new one", a.RenamedFrom, prev)
			default:
				renamedBy[a.RenamedFrom] = a.Name
			}
		}
		if c.hasFailed(fp) {
			continue // ParseAggregate reported it
		}
		if err := aggsyntax.Check(string(a.Func), a.Column); err != nil {
			c.add(fp, "%s", err.Error())
		}
	}
}

func (p *Pipeline) validateSink(c *collector) {
	validateSinkAt(c, "sink", &p.Sink)
	if p.Sink.URL != "" && p.Sink.URL == p.Source.URL {
		c.add("sink.url", "must differ from source.url (the pipeline would read its own output)")
	}
}

// validateSinkAt checks the sink s at field path sp ("sink", or
// "sinks.<name>" in the graph form).
func validateSinkAt(c *collector, sp string, s *Sink) {
	switch s.Type {
	case "":
		c.add(sp+".type", "required (allowed: files, iceberg)")
	case SinkFiles:
		if s.PartitionBy != "" {
			c.add(sp+".partition_by", "a files sink takes a list of column names, e.g. [dt, hm]")
		}
		seen := map[string]bool{}
		for i, col := range s.PartitionColumns {
			switch {
			case col == "":
				c.add(index(sp+".partition_by", i), "empty column name")
			case seen[col]:
				c.add(index(sp+".partition_by", i), "column %q listed twice", col)
			}
			seen[col] = true
		}
	case SinkIceberg:
		if s.Format != Parquet {
			c.add(sp+".format", "an iceberg sink writes parquet (leave format out)")
		}
		if len(s.PartitionColumns) > 0 {
			c.add(sp+".partition_by", "an iceberg sink takes one transform, e.g. day(ts) or identity(col)")
		}
		if pb := s.PartitionBy; pb != "" && pb != "none" {
			if _, _, ok := ParsePartitionTransform(pb); !ok {
				c.add(sp+".partition_by", "invalid value %q (allowed: none, identity(<column>), hour(<timestamp column>), day(...), month(...), year(...))", pb)
			}
		}
	default:
		c.add(sp+".type", "invalid value %q (allowed: files, iceberg)", s.Type)
	}
	checkURLField(c, sp+".url", s.URL, true)
	switch {
	case s.Format == "":
		c.add(sp+".format", "required (allowed: %s)", strings.Join(sinkFormats, ", "))
	case !contains(sinkFormats, string(s.Format)):
		c.add(sp+".format", "invalid value %q (allowed: %s)", s.Format, strings.Join(sinkFormats, ", "))
	}
}

func (p *Pipeline) validateState(c *collector) {
	s := &p.State
	checkURLField(c, "state.url", s.URL, true)
	mp := s.MaxParallelism
	if !keygroup.ValidCount(mp) {
		c.add("state.max_parallelism", "must be between 1 and %d, got %d", keygroup.Max, mp)
		mp = keygroup.Max
	}
	if s.Parallelism < 1 || s.Parallelism > mp {
		c.add("state.parallelism", "must be between 1 and max_parallelism (%d), got %d", mp, s.Parallelism)
	}
	if s.RetainEpochs < 1 {
		c.add("state.retain_epochs", "must be >= 1, got %d", s.RetainEpochs)
	}
	if s.MemoryLimit != 0 && s.MemoryLimit < MinMemoryLimit {
		c.add("state.memory_limit", "must be at least %s, got %s", FormatSize(MinMemoryLimit), FormatSize(s.MemoryLimit))
	}
}

func checkURLField(c *collector, path, u string, required bool) {
	if u == "" {
		if required {
			c.add(path, "required")
		}
		return
	}
	if msg := checkURL(u); msg != "" {
		c.add(path, "%s", msg)
	}
}

// checkExpr checks that e is a non-empty expression that parses; the
// columns it reads are checked by expr when the plan is compiled.
func checkExpr(c *collector, path, e string) {
	if strings.TrimSpace(e) == "" {
		c.add(path, "empty expression")
		return
	}
	if _, err := exprparser.Parse(e); err != nil {
		c.add(path, "invalid expression %q: %s", e, firstLine(err.Error()))
	}
}

func lookup(cols []Field, name string) (Field, bool) {
	for _, f := range cols {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// colHint suggests the closest column, or lists them.
func colHint(got string, cols []Field) string {
	all := make([]string, len(cols))
	for i, f := range cols {
		all[i] = f.Name
	}
	if s := closest(got, all); s != "" {
		return fmt.Sprintf(" (did you mean %s?)", s)
	}
	return fmt.Sprintf(" (columns: %s)", strings.Join(all, ", "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// closest returns the entry of candidates nearest to s by edit distance,
// if near enough to be a likely typo (suggest.Closest, the one policy).
func closest(s string, candidates []string) string { return suggest.Closest(s, candidates) }

// PartitionTransforms are the Iceberg partition transforms an iceberg
// sink's partition_by may name.
var PartitionTransforms = []string{"identity", "hour", "day", "month", "year"}

// ParsePartitionTransform splits an Iceberg partition_by value such as
// "day(ts)" into its transform and column; ok is false for anything else.
func ParsePartitionTransform(s string) (transform, column string, ok bool) {
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") {
		return "", "", false
	}
	transform, column = s[:open], s[open+1:len(s)-1]
	if column == "" || !contains(PartitionTransforms, transform) {
		return "", "", false
	}
	return transform, column, true
}
