package spec

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/floe-dev/floe/internal/aggsyntax"
)

// Load reads the spec file at path, resolves its relative paths against the
// file's directory, applies defaults and validates it. A spec that is wrong
// yields an Errors listing every problem (errors.Is(err, ErrInvalid)). It
// reads at most MaxSpecBytes+1 bytes, so a huge or endless file is refused
// without being read.
func Load(path string) (*Pipeline, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("spec: read %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("spec: read %s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("spec: %s: %w", path, err)
	}
	return Parse(path, data, dir)
}

// Parse decodes a YAML spec, resolves relative paths against baseDir (the
// current directory when empty), applies defaults and validates. name is the
// file name used in error messages.
//
// Before any parsing it refuses, with one problem naming the limit, data
// larger than MaxSpecBytes, data that is not UTF-8 text (NUL bytes, other
// control characters, invalid UTF-8), nesting deeper than 64 levels and more
// than 10,000 elements. Every message quotes at most a short excerpt of an
// offending value, with control characters escaped, and is one line.
func Parse(name string, data []byte, baseDir string) (*Pipeline, error) {
	o := &origin{file: name, pos: map[string]Pos{}}
	c := newCollector(o)
	if fe := checkText(data); fe != nil {
		fe.File = name
		return nil, Errors{fe}
	}
	root, err := parseYAML(data)
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) {
			fe = &FieldError{Msg: err.Error()}
		}
		fe.File = name
		fe.Msg = oneLine(fe.Msg, maxMsgLen)
		return nil, Errors{fe}
	}
	base, err := filepath.Abs(baseDir)
	if err != nil {
		return nil, fmt.Errorf("spec: base directory %q: %w", baseDir, err)
	}
	d := &decoder{c: c, o: o, baseDir: base}
	p := d.pipeline(root)
	p.origin = o
	p.assignIDs()
	p.validate(c)
	if err := c.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// parseYAML parses data into a node tree. Syntax errors come back as a
// *FieldError with a position.
func parseYAML(data []byte) (*node, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		var se *yaml.SyntaxError
		if errors.As(err, &se) {
			return nil, &FieldError{Pos: tokenPos(se.Token), Msg: "YAML syntax: " + se.Message}
		}
		return nil, &FieldError{Msg: "YAML syntax: " + firstLine(err.Error())}
	}
	var body *node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		conv := &converter{anchors: map[string]*node{}}
		n, err := conv.convert(doc.Body, 0)
		if err != nil {
			return nil, err
		}
		if n.kind == kindScalar && n.sType == scalarNull {
			continue
		}
		if body != nil {
			return nil, &FieldError{Pos: n.pos, Msg: "a spec file holds one YAML document"}
		}
		body = n
	}
	if body == nil {
		return nil, &FieldError{Msg: "empty spec"}
	}
	return body, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

// decoder turns a node tree into a Pipeline, reporting type errors and
// unknown keys and recording the position of every field it sees.
type decoder struct {
	c       *collector
	o       *origin
	baseDir string
	// s3 holds the storage.s3 connection settings, added to every s3://
	// URL of the spec that does not set them itself.
	s3 url.Values
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// fields checks that n is a mapping with only allowed keys, records the
// position of each value, and returns the values by key (nil if n is not a
// mapping).
func (d *decoder) fields(n *node, path string, allowed ...string) map[string]*node {
	if n.kind != kindMap {
		d.c.decodeErr(n.pos, path, "expected a mapping, got %s", n.describe())
		return nil
	}
	d.o.pos[path] = n.pos
	out := make(map[string]*node, len(n.keys))
	for i, k := range n.keys {
		fp := join(path, k.str)
		if _, dup := out[k.str]; dup {
			d.c.decodeErr(k.pos, fp, "duplicate key")
			continue
		}
		if !contains(allowed, k.str) {
			d.c.decodeErr(k.pos, fp, "unknown field%s", hint(k.str, allowed))
			continue
		}
		d.o.pos[fp] = n.vals[i].pos
		out[k.str] = n.vals[i]
	}
	return out
}

// pairs checks that n is a mapping and returns its keys and values in
// document order, recording positions; duplicates are reported.
func (d *decoder) pairs(n *node, path string) (keys []string, vals []*node) {
	if n.kind != kindMap {
		d.c.decodeErr(n.pos, path, "expected a mapping, got %s", n.describe())
		return nil, nil
	}
	d.o.pos[path] = n.pos
	seen := map[string]bool{}
	for i, k := range n.keys {
		fp := join(path, k.str)
		if seen[k.str] {
			d.c.decodeErr(k.pos, fp, "duplicate key")
			continue
		}
		seen[k.str] = true
		d.o.pos[fp] = n.vals[i].pos
		keys = append(keys, k.str)
		vals = append(vals, n.vals[i])
	}
	return keys, vals
}

// hint suggests the closest allowed name, or lists them.
func hint(got string, allowed []string) string {
	if s := closest(got, allowed); s != "" {
		return fmt.Sprintf(" (did you mean %s?)", s)
	}
	return fmt.Sprintf(" (allowed: %s)", strings.Join(allowed, ", "))
}

func (d *decoder) str(n *node, path string) string {
	if n.kind != kindScalar || n.sType == scalarNull {
		d.c.decodeErr(n.pos, path, "expected a string, got %s", n.describe())
		return ""
	}
	return n.str
}

func (d *decoder) integer(n *node, path string, minimum int64) int64 {
	if n.kind != kindScalar || n.sType != scalarInt {
		d.c.decodeErr(n.pos, path, "expected an integer, got %s", n.describe())
		return 0
	}
	v, err := strconv.ParseInt(n.str, 10, 64)
	if err != nil {
		d.c.decodeErr(n.pos, path, "integer %q out of range", n.str)
		return 0
	}
	if v < minimum {
		d.c.decodeErr(n.pos, path, "must be >= %d, got %d", minimum, v)
		return 0
	}
	return v
}

func (d *decoder) smallInt(n *node, path string) int {
	v := d.integer(n, path, -1<<31)
	if v > 1<<31-1 {
		d.c.decodeErr(n.pos, path, "integer %d out of range", v)
		return 0
	}
	return int(v)
}

// fraction reads a number in (0, 1].
func (d *decoder) fraction(n *node, path string) float64 {
	if n.kind != kindScalar || (n.sType != scalarInt && n.sType != scalarFloat) {
		d.c.decodeErr(n.pos, path, "expected a number between 0 and 1, got %s", n.describe())
		return 0
	}
	v, err := strconv.ParseFloat(n.str, 64)
	if err != nil || !(v > 0 && v <= 1) {
		d.c.decodeErr(n.pos, path, "expected a number above 0 and at most 1, got %s", n.str)
		return 0
	}
	return v
}

func (d *decoder) boolean(n *node, path string) bool {
	if n.kind != kindScalar || n.sType != scalarBool {
		d.c.decodeErr(n.pos, path, "expected true or false, got %s", n.describe())
		return false
	}
	return n.str == "true"
}

func (d *decoder) duration(n *node, path string) time.Duration {
	if n.kind != kindScalar || n.sType == scalarNull {
		d.c.decodeErr(n.pos, path, "expected a duration like 1m or 30s, got %s", n.describe())
		return 0
	}
	v, err := ParseDuration(n.str)
	if err != nil {
		d.c.decodeErr(n.pos, path, "%s", err.Error())
		return 0
	}
	return v
}

// days is duration that also takes whole days ("30d").
func (d *decoder) days(n *node, path string) time.Duration {
	if n.kind == kindScalar && n.sType != scalarNull {
		t := strings.TrimSpace(n.str)
		if k, err := strconv.Atoi(strings.TrimSuffix(t, "d")); err == nil && strings.HasSuffix(t, "d") {
			if k < 1 || k > 100000 {
				d.c.decodeErr(n.pos, path, "want 1d to 100000d, got %s", excerpt(t))
				return 0
			}
			return time.Duration(k) * 24 * time.Hour
		}
	}
	return d.duration(n, path)
}

// ParseDuration parses Go duration syntax ("5s", "1m30s", "250ms"). Other
// forms fail with a message that says what to write instead.
func ParseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil {
		return v, nil
	}
	t := strings.TrimSpace(s)
	if strings.HasSuffix(t, "d") {
		if n, err := strconv.Atoi(strings.TrimSuffix(t, "d")); err == nil && n > 0 && n < 100000 {
			return 0, fmt.Errorf("invalid duration %s (use Go syntax like 1m, 30s; for days write %dh)", excerpt(s), n*24)
		}
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return 0, fmt.Errorf("invalid duration %s: missing unit (use Go syntax like 1m, 30s)", excerpt(s))
	}
	return 0, fmt.Errorf("invalid duration %s (use Go syntax like 1m, 30s)", excerpt(s))
}

func (d *decoder) url(n *node, path string) string {
	s := d.str(n, path)
	if s == "" {
		return ""
	}
	u, err := ResolveURL(d.baseDir, s)
	if err != nil {
		// ResolveURL quotes the whole value; quote an excerpt instead.
		d.c.decodeErr(n.pos, path, "%s", reQuote(err, s))
		return ""
	}
	if len(d.s3) > 0 && strings.HasPrefix(u, "s3://") {
		u = withS3Settings(u, d.s3)
	}
	return u
}

// storage decodes `storage: {s3: {endpoint, region, use_path_style,
// disable_https}}`: connection settings for every s3:// URL of the spec,
// written once instead of as query parameters on each.
func (d *decoder) storage(n *node, path string) {
	f := d.fields(n, path, "s3")
	sn := f["s3"]
	if sn == nil {
		return
	}
	sp := join(path, "s3")
	sf := d.fields(sn, sp, "endpoint", "region", "use_path_style", "disable_https")
	d.s3 = url.Values{}
	if v := sf["endpoint"]; v != nil {
		fp := join(sp, "endpoint")
		e := d.str(v, fp)
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			d.c.decodeErr(v.pos, fp, "want http://host[:port] or https://host[:port], without credentials (they come from the AWS credential chain)")
		} else {
			d.s3.Set("endpoint", e)
		}
	}
	if v := sf["region"]; v != nil {
		if r := d.str(v, join(sp, "region")); r != "" {
			d.s3.Set("region", r)
		}
	}
	for _, key := range []string{"use_path_style", "disable_https"} {
		if v := sf[key]; v != nil {
			d.s3.Set(key, strconv.FormatBool(d.boolean(v, join(sp, key))))
		}
	}
}

// withS3Settings adds each of settings that the s3:// URL u does not set.
func withS3Settings(u string, settings url.Values) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := pu.Query()
	for k, vs := range settings {
		if !q.Has(k) && len(vs) > 0 {
			q.Set(k, vs[0])
		}
	}
	pu.RawQuery = q.Encode()
	return pu.String()
}

// stringList accepts a scalar or a list of scalars (column names).
func (d *decoder) stringList(n *node, path string) []string {
	return d.scalarList(n, path, "a column name or a list of them")
}

// scalarList accepts a scalar or a list of scalars; want names them in the
// error for anything else.
func (d *decoder) scalarList(n *node, path, want string) []string {
	if n.kind == kindScalar && n.sType != scalarNull {
		return []string{n.str}
	}
	if n.kind != kindSeq {
		d.c.decodeErr(n.pos, path, "expected %s, got %s", want, n.describe())
		return nil
	}
	d.o.pos[path] = n.pos
	out := make([]string, 0, len(n.items))
	for i, it := range n.items {
		ip := index(path, i)
		d.o.pos[ip] = it.pos
		out = append(out, d.str(it, ip))
	}
	return out
}

func (d *decoder) pipeline(root *node) *Pipeline {
	p := &Pipeline{}
	f := d.fields(root, "", "name", "source", "operators", "sink", "state", "sources", "stages", "sinks", "storage")
	if f == nil {
		return p
	}
	if n := f["storage"]; n != nil {
		d.storage(n, "storage") // before every URL it applies to
	}
	if n := f["name"]; n != nil {
		p.Name = d.str(n, "name")
	}
	if n := f["source"]; n != nil {
		d.source(n, "source", &p.Source)
	}
	if n := f["operators"]; n != nil {
		p.Operators = d.operators(n, "operators")
	}
	if n := f["sink"]; n != nil {
		d.sink(n, "sink", &p.Sink)
	}
	d.graph(f, p) // sources, stages, sinks (graph.go)
	p.State = State{Parallelism: DefaultParallelism, MaxParallelism: DefaultMaxParallelism, RetainEpochs: DefaultRetainEpochs}
	if n := f["state"]; n != nil {
		d.state(n, "state", &p.State)
	}
	return p
}

var (
	sourceFields = []string{"type", "url", "format", "schema", "event_time", "max_files_per_epoch",
		"max_rows_per_epoch", "pattern", "csv", "watermark", "on_error", "rejected_url", "late_url", "inputs", "start_from", "max_rejected_fraction", "capture", "validate",
		"order", "full_list_every", "forget_after",
		"brokers", "topic", "topics", "max_records_per_epoch", "idle_timeout", "on_missing_offsets", "auth_file", "columns", "avro"}
	windowFields = []string{"key", "tumbling", "sliding", "session", "allowed_lateness", "aggregates", "id"}
)

func (d *decoder) source(n *node, path string, s *Source) {
	s.OnError = OnErrorReject
	f := d.fields(n, path, sourceFields...)
	if f == nil {
		return
	}
	for _, key := range sourceFields {
		v := f[key]
		if v == nil {
			continue
		}
		fp := join(path, key)
		switch key {
		case "type":
			s.Type = SourceType(d.str(v, fp))
		case "url":
			s.URL = d.url(v, fp)
		case "format":
			s.Format = Format(d.str(v, fp))
		case "schema":
			names, vals := d.pairs(v, fp)
			for i, name := range names {
				s.Schema = append(s.Schema, Field{Name: name, Type: DataType(d.str(vals[i], join(fp, name)))})
			}
		case "event_time":
			s.EventTime = d.str(v, fp)
		case "max_files_per_epoch":
			s.MaxFilesPerEpoch = d.smallInt(v, fp)
			if s.MaxFilesPerEpoch < 1 && !d.c.hasFailed(fp) {
				d.c.decodeErr(v.pos, fp, "must be >= 1 (leave it out for no limit)")
			}
		case "max_rows_per_epoch":
			s.MaxRowsPerEpoch = d.integer(v, fp, -1<<63)
			if s.MaxRowsPerEpoch < 1 && !d.c.hasFailed(fp) {
				d.c.decodeErr(v.pos, fp, "must be >= 1 (leave it out for no limit)")
			}
		case "pattern":
			s.Pattern = d.str(v, fp)
		case "csv":
			s.CSV = &CSVOptions{Header: true, Delimiter: ","}
			cf := d.fields(v, fp, "header", "delimiter")
			if h := cf["header"]; h != nil {
				s.CSV.Header = d.boolean(h, join(fp, "header"))
			}
			if dl := cf["delimiter"]; dl != nil {
				s.CSV.Delimiter = d.str(dl, join(fp, "delimiter"))
			}
		case "watermark":
			wf := d.fields(v, fp, "max_out_of_orderness", "idle_timeout")
			if x := wf["max_out_of_orderness"]; x != nil {
				s.Watermark.MaxOutOfOrderness = d.duration(x, join(fp, "max_out_of_orderness"))
			}
			if x := wf["idle_timeout"]; x != nil {
				s.Watermark.IdleTimeout = d.duration(x, join(fp, "idle_timeout"))
			}
		case "on_error":
			s.OnError = OnError(d.str(v, fp))
		case "rejected_url":
			s.RejectedURL = d.url(v, fp)
		case "late_url":
			s.LateURL = d.url(v, fp)
		case "inputs":
			s.Inputs = InputsMode(d.str(v, fp))
		case "start_from":
			s.StartFrom = d.str(v, fp)
		case "max_rejected_fraction":
			s.MaxRejectedFraction = d.fraction(v, fp)
		case "capture":
			s.Capture = d.boolean(v, fp)
		case "validate":
			s.Validate = d.str(v, fp)
			if s.Validate != "used" && s.Validate != "all" && !d.c.hasFailed(fp) {
				d.c.decodeErr(v.pos, fp, "want used (the columns the pipeline reads; the default) or all (every declared column)")
			}
		case "order":
			s.Order = d.str(v, fp)
		case "full_list_every":
			s.FullListEvery = d.duration(v, fp)
		case "forget_after":
			s.ForgetAfter = d.days(v, fp)
		case "brokers":
			d.kafka(s).Brokers = d.stringList(v, fp)
		case "topic":
			d.kafka(s).Topics = append(d.kafka(s).Topics, d.str(v, fp))
		case "topics":
			d.kafka(s).Topics = append(d.kafka(s).Topics, d.stringList(v, fp)...)
		case "max_records_per_epoch":
			d.kafka(s).MaxRecordsPerEpoch = d.integer(v, fp, -1<<63)
			if d.kafka(s).MaxRecordsPerEpoch < 1 && !d.c.hasFailed(fp) {
				d.c.decodeErr(v.pos, fp, "must be >= 1 (leave it out for no limit)")
			}
		case "idle_timeout":
			if f["watermark"] != nil {
				d.c.decodeErr(v.pos, fp, "set the idle timeout once: here or as watermark.idle_timeout")
				continue
			}
			s.Watermark.IdleTimeout = d.duration(v, fp)
		case "on_missing_offsets":
			d.kafka(s).OnMissingOffsets = d.str(v, fp)
		case "auth_file":
			d.kafka(s).AuthFile = d.path(v, fp)
		case "avro":
			af := d.fields(v, fp, "schema_file", "confluent")
			a := &KafkaAvro{}
			if x := af["schema_file"]; x != nil {
				a.SchemaFile = d.path(x, join(fp, "schema_file"))
			}
			if x := af["confluent"]; x != nil {
				a.Confluent = d.boolean(x, join(fp, "confluent"))
			}
			d.kafka(s).Avro = a
		case "columns":
			cf := d.fields(v, fp, "topic", "partition", "offset", "timestamp", "key")
			c := &d.kafka(s).Columns
			for name, dst := range map[string]*string{"topic": &c.Topic, "partition": &c.Partition, "offset": &c.Offset, "timestamp": &c.Timestamp, "key": &c.Key} {
				if x := cf[name]; x != nil {
					*dst = d.str(x, join(fp, name))
				}
			}
		}
	}
	if s.Format == CSV && s.CSV == nil {
		s.CSV = &CSVOptions{Header: true, Delimiter: ","}
		if s.Type == SourceKafka {
			s.CSV.Header = false // one record is one row, fields in schema order
		}
	}
	if s.Type == SourceKafka {
		s.withKafkaColumns()
	}
}

// kafka returns s.Kafka, creating it: the kafka-only fields are decoded on
// any source, and validation refuses them on one of another type.
func (d *decoder) kafka(s *Source) *KafkaSource {
	if s.Kafka == nil {
		s.Kafka = &KafkaSource{}
	}
	return s.Kafka
}

// path decodes a local file path, relative to the spec's directory.
func (d *decoder) path(n *node, path string) string {
	s := d.str(n, path)
	if s == "" || filepath.IsAbs(s) || d.baseDir == "" {
		return s
	}
	return filepath.Join(d.baseDir, s)
}

func (d *decoder) operators(n *node, path string) []Operator {
	if n.kind == kindScalar && n.sType == scalarNull {
		return nil
	}
	if n.kind != kindSeq {
		d.c.decodeErr(n.pos, path, "expected a list of operators, got %s", n.describe())
		return nil
	}
	d.o.pos[path] = n.pos
	ops := make([]Operator, 0, len(n.items))
	for i, it := range n.items {
		ops = append(ops, d.operator(it, index(path, i)))
	}
	return ops
}

func (d *decoder) operator(n *node, path string) Operator {
	var op Operator
	f := d.fields(n, path, KindFilter, KindProject, KindWindow, "id")
	if f == nil {
		return op
	}
	if v := f["id"]; v != nil {
		op.ID = d.str(v, join(path, "id"))
	}
	if v := f[KindFilter]; v != nil {
		op.Filter = d.filter(v, join(path, KindFilter))
	}
	if v := f[KindProject]; v != nil {
		op.Project = d.project(v, join(path, KindProject))
	}
	if v := f[KindWindow]; v != nil {
		op.Window = d.window(v, join(path, KindWindow), &op, path)
	}
	return op
}

// filter decodes a filter (an operator's or a stage's) at path.
func (d *decoder) filter(n *node, path string) *Filter { return &Filter{Expr: d.str(n, path)} }

// project decodes a project (an operator's or a stage's) at path.
func (d *decoder) project(n *node, path string) *Project {
	pr := &Project{}
	names, vals := d.pairs(n, path)
	for i, name := range names {
		pr.Columns = append(pr.Columns, Projection{Name: name, Expr: d.str(vals[i], join(path, name))})
	}
	return pr
}

func (d *decoder) window(n *node, path string, op *Operator, opPath string) *Window {
	w := &Window{}
	f := d.fields(n, path, windowFields...)
	if f == nil {
		return w
	}
	for _, key := range windowFields {
		v := f[key]
		if v == nil {
			continue
		}
		fp := join(path, key)
		switch key {
		case "key":
			w.Key = d.stringList(v, fp)
		case "tumbling":
			w.Tumbling = d.duration(v, fp)
			if w.Tumbling == 0 && !d.c.hasFailed(fp) {
				d.c.decodeErr(v.pos, fp, "must be > 0")
			}
		case "sliding":
			w.Sliding = &SlidingWindow{}
			sf := d.fields(v, fp, "size", "slide")
			if x := sf["size"]; x != nil {
				w.Sliding.Size = d.duration(x, join(fp, "size"))
			}
			if x := sf["slide"]; x != nil {
				w.Sliding.Slide = d.duration(x, join(fp, "slide"))
			}
		case "session":
			w.Session = &SessionWindow{}
			sf := d.fields(v, fp, "gap")
			if x := sf["gap"]; x != nil {
				w.Session.Gap = d.duration(x, join(fp, "gap"))
			}
		case "allowed_lateness":
			w.AllowedLateness = d.duration(v, fp)
		case "aggregates":
			names, vals := d.pairs(v, fp)
			for i, name := range names {
				w.Aggregates = append(w.Aggregates, d.aggregate(vals[i], join(fp, name), name))
			}
		case "id":
			id := d.str(v, fp)
			if op.ID != "" && op.ID != id {
				d.c.decodeErr(v.pos, fp, "conflicts with %s.id %q; set the id once", opPath, op.ID)
				continue
			}
			op.ID = id
			d.o.pos[join(opPath, "id")] = v.pos
		}
	}
	return w
}

// aggregateFields are the fields of the mapping form of an aggregate.
var aggregateFields = []string{"expr", "renamed_from"}

// aggregate decodes one aggregate: the string form "func(column)", or the
// mapping form {expr: "func(column)", renamed_from: old_name}. Problems of
// the expression are reported at the aggregate's path (ap), as for the
// string form, with the position of the expression.
func (d *decoder) aggregate(n *node, ap, name string) Aggregate {
	exprNode, renamed := n, ""
	if n.kind == kindMap {
		f := d.fields(n, ap, aggregateFields...)
		if r := f["renamed_from"]; r != nil {
			rp := join(ap, "renamed_from")
			if renamed = d.str(r, rp); renamed == "" && !d.c.hasFailed(rp) {
				d.c.decodeErr(r.pos, rp, "empty: name the aggregate's previous name, or leave renamed_from out")
			}
		}
		if exprNode = f["expr"]; exprNode == nil {
			if !d.c.hasFailed(ap) {
				d.c.decodeErr(n.pos, ap, "the mapping form needs expr, e.g. {expr: \"sum(bytes)\", renamed_from: old_name}")
			}
			return Aggregate{Name: name, RenamedFrom: renamed}
		}
	}
	if exprNode.kind != kindScalar || exprNode.sType == scalarNull {
		d.c.decodeErr(exprNode.pos, ap, "expected a string such as \"sum(bytes)\", or a mapping {expr: \"sum(bytes)\", renamed_from: old_name}, got %s", exprNode.describe())
		return Aggregate{Name: name, RenamedFrom: renamed}
	}
	text := exprNode.str
	if d.c.hasFailed(ap) {
		return Aggregate{Name: name, RenamedFrom: renamed}
	}
	a, err := ParseAggregate(name, text)
	if err != nil {
		d.c.decodeErr(exprNode.pos, ap, "%s", reQuote(err, text))
	}
	a.RenamedFrom = renamed
	return a
}

// ParseAggregate parses the spec form of an aggregate, "func(column)" or
// "count()", into an Aggregate named name. The grammar and its messages are
// the one definition in internal/aggsyntax, which the window operator uses
// too: the function is known (case-insensitive), the column is one name,
// count(*) means count(). Whether the column exists and has a type the
// function takes is checked when the plan is compiled against the schema.
// On error the Aggregate holds what could be parsed.
func ParseAggregate(name, text string) (Aggregate, error) {
	fn, col, err := aggsyntax.Parse(text)
	return Aggregate{Name: name, Func: AggFunc(fn), Column: col}, err
}

// sink decodes a sink block; extra names further allowed fields, which it
// returns, with the others, for the caller to decode.
func (d *decoder) sink(n *node, path string, s *Sink, extra ...string) map[string]*node {
	f := d.fields(n, path, append([]string{"type", "url", "format", "partition_by"}, extra...)...)
	if f == nil {
		return nil
	}
	if v := f["type"]; v != nil {
		s.Type = SinkType(d.str(v, join(path, "type")))
	}
	if v := f["partition_by"]; v != nil {
		if s.Type == SinkFiles {
			s.PartitionColumns = d.stringList(v, join(path, "partition_by"))
		} else {
			s.PartitionBy = d.str(v, join(path, "partition_by"))
		}
	}
	if v := f["url"]; v != nil {
		s.URL = d.url(v, join(path, "url"))
	}
	if v := f["format"]; v != nil {
		s.Format = Format(d.str(v, join(path, "format")))
	}
	if s.Type == SinkIceberg && s.Format == "" {
		s.Format = Parquet // an Iceberg table's data files are Parquet
	}
	return f
}

func (d *decoder) state(n *node, path string, s *State) {
	f := d.fields(n, path, "url", "parallelism", "max_parallelism", "retain_epochs", "memory_limit")
	if f == nil {
		return
	}
	if v := f["url"]; v != nil {
		s.URL = d.url(v, join(path, "url"))
	}
	if v := f["parallelism"]; v != nil {
		s.Parallelism = d.smallInt(v, join(path, "parallelism"))
	}
	if v := f["max_parallelism"]; v != nil {
		s.MaxParallelism = d.smallInt(v, join(path, "max_parallelism"))
	}
	if v := f["retain_epochs"]; v != nil {
		s.RetainEpochs = d.smallInt(v, join(path, "retain_epochs"))
	}
	if v := f["memory_limit"]; v != nil {
		s.MemoryLimit = d.size(v, join(path, "memory_limit"))
	}
}

// ParseMapped decodes a spec that was generated from another text (the SQL
// front end, package flinksql, writes the YAML a SQL file means): it parses
// data as Parse does, but every problem and every field position refers to
// the original text, through pos (the position of a field path there; a
// zero Pos when unknown). name is the original file's name.
func ParseMapped(name string, data []byte, baseDir string, pos func(path string) Pos) (*Pipeline, error) {
	p, err := Parse(name, data, baseDir)
	if err != nil {
		var es Errors
		if errors.As(err, &es) {
			for _, e := range es {
				e.Pos = pos(e.Path)
			}
			return nil, es
		}
		return nil, err
	}
	for k := range p.origin.pos {
		p.origin.pos[k] = pos(k)
	}
	return p, nil
}
