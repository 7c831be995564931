package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// designSketch is the spec of DESIGN.md "Pipeline spec", verbatim.
const designSketch = `name: clicks-per-user
source: {type: files, url: "../events", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 8,
         watermark: {max_out_of_orderness: 5s, idle_timeout: 1m}}
operators:
  - filter: "bytes > 0"
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 30s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: "../../out/clicks", format: parquet}
state: {url: "../../.floe", parallelism: 4, max_parallelism: 128, retain_epochs: 10}
`

func clicksSchema() []Field {
	return []Field{
		{Name: "event_time", Type: TypeTimestamp},
		{Name: "user_id", Type: TypeString},
		{Name: "page", Type: TypeString},
		{Name: "bytes", Type: TypeInt64},
	}
}

func TestParseDesignSketch(t *testing.T) {
	p, err := Parse("clicks.yaml", []byte(designSketch), "/srv/pipelines/clicks")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Pipeline{
		Name: "clicks-per-user",
		Source: Source{
			Type:             SourceFiles,
			URL:              "file:///srv/pipelines/events",
			Format:           JSONL,
			Schema:           clicksSchema(),
			EventTime:        "event_time",
			MaxFilesPerEpoch: 8,
			Watermark:        Watermark{MaxOutOfOrderness: 5 * time.Second, IdleTimeout: time.Minute},
			OnError:          OnErrorReject,
		},
		Operators: []Operator{
			{ID: "filter", Filter: &Filter{Expr: "bytes > 0"}},
			{ID: "window", Window: &Window{
				Key:             []string{"user_id"},
				Tumbling:        time.Minute,
				AllowedLateness: 30 * time.Second,
				Aggregates: []Aggregate{
					{Name: "clicks", Func: Count},
					{Name: "total_bytes", Func: Sum, Column: "bytes"},
				},
			}},
		},
		Sink:  Sink{Type: SinkFiles, URL: "file:///srv/out/clicks", Format: Parquet},
		State: State{URL: "file:///srv/.floe", Parallelism: 4, MaxParallelism: 128, RetainEpochs: 10},
	}
	p.origin = nil
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Parse mismatch\n got: %s\nwant: %s", dump(p), dump(want))
	}
	if err := p.Validate(); err != nil {
		t.Errorf("Validate of a parsed pipeline: %v", err)
	}
}

func dump(p *Pipeline) string {
	s := fmt.Sprintf("%+v", *p)
	for _, op := range p.Operators {
		switch {
		case op.Filter != nil:
			s += fmt.Sprintf("\n  %s filter %+v", op.ID, *op.Filter)
		case op.Project != nil:
			s += fmt.Sprintf("\n  %s project %+v", op.ID, *op.Project)
		case op.Window != nil:
			s += fmt.Sprintf("\n  %s window %+v", op.ID, *op.Window)
		}
	}
	return s
}

// TestLoadTestdata checks the sample spec the README runs, and that its
// relative URLs resolve against the spec's directory whatever the working
// directory is.
func TestLoadTestdata(t *testing.T) {
	specPath, err := filepath.Abs("../testdata/pipelines/clicks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Dir(filepath.Dir(filepath.Dir(specPath)))
	t.Chdir(t.TempDir())
	p, err := Load(specPath)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := p.Source.URL, "file://"+filepath.Join(repo, "testdata/events"); got != want {
		t.Errorf("source.url = %q, want %q", got, want)
	}
	if got, want := p.Sink.URL, "file://"+filepath.Join(repo, "out/clicks"); got != want {
		t.Errorf("sink.url = %q, want %q", got, want)
	}
	if got, want := p.State.URL, "file://"+filepath.Join(repo, ".floe"); got != want {
		t.Errorf("state.url = %q, want %q", got, want)
	}
	if p.State.Parallelism != 2 {
		t.Errorf("parallelism = %d, want 2", p.State.Parallelism)
	}
}

func TestLoadRelativeSpecPath(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(designSketch), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	p, err := Load(filepath.Join("a", "b", "p.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := "file://" + filepath.Join(root, "a", "events"); p.Source.URL != want {
		t.Errorf("source.url = %q, want %q", p.Source.URL, want)
	}
	if want := "file://" + filepath.Join(root, "out", "clicks"); p.Sink.URL != want {
		t.Errorf("sink.url = %q, want %q", p.Sink.URL, want)
	}
	// Errors name the spec path as given.
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(strings.Replace(designSketch, "tumbling: 1m", "tumbling: 1x", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(filepath.Join("a", "b", "bad.yaml"))
	if want := `a/b/bad.yaml:8:40: operators[1].window.tumbling: invalid duration "1x" (use Go syntax like 1m, 30s)`; err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v, want %s", err, want)
	}
	if _, err := Load(filepath.Join(root, "missing.yaml")); err == nil || errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want a not-exist error that is not ErrInvalid", err)
	}
}

func TestResolveURL(t *testing.T) {
	cases := []struct {
		base, raw, want, wantErr string
	}{
		{"/srv/p", "../events", "file:///srv/events", ""},
		{"/srv/p", "./a/../b/", "file:///srv/p/b", ""},
		{"/srv/p", "/data/x", "file:///data/x", ""},
		{"/srv/p", "/data/with space", "file:///data/with%20space", ""},
		{"/srv/p", "s3://bucket/a/b?endpoint=http://127.0.0.1:9000&use_path_style=true", "s3://bucket/a/b?endpoint=http://127.0.0.1:9000&use_path_style=true", ""},
		{"/srv/p", "file:///abs/dir", "file:///abs/dir", ""},
		{"/srv/p", "mem://", "mem://", ""},
		{"/srv/p", "gs://b/p", "gs://b/p", ""},
		{"/srv/p", "", "", "empty URL"},
		{"/srv/p", "~/data", "", `path "~/data": ~ is not expanded; write an absolute path or one relative to the spec file`},
		{"/srv/p", "1x://b", "", `invalid URL "1x://b": bad scheme "1x"`},
	}
	for _, c := range cases {
		got, err := ResolveURL(c.base, c.raw)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("ResolveURL(%q, %q) error = %v, want %q", c.base, c.raw, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ResolveURL(%q, %q) = %q, %v; want %q", c.base, c.raw, got, err, c.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"5s", 5 * time.Second, ""},
		{"1m30s", 90 * time.Second, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"0", 0, ""},
		{"1 minute", 0, `invalid duration "1 minute" (use Go syntax like 1m, 30s)`},
		{"1d", 0, `invalid duration "1d" (use Go syntax like 1m, 30s; for days write 24h)`},
		{"30", 0, `invalid duration "30": missing unit (use Go syntax like 1m, 30s)`},
	}
	for _, c := range cases {
		got, err := ParseDuration(c.in)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("ParseDuration(%q) error = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// base is a valid spec in block style; validation cases edit it.
const base = `name: clicks-per-user
source:
  type: files
  url: ../events
  format: jsonl
  schema:
    event_time: timestamp
    user_id: string
    page: string
    bytes: int64
  event_time: event_time
  max_files_per_epoch: 8
  watermark: {max_out_of_orderness: 5s, idle_timeout: 1m}
operators:
  - filter: "bytes > 0"
  - window:
      key: [user_id]
      tumbling: 1m
      allowed_lateness: 30s
      aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}
sink: {type: files, url: ../../out/clicks, format: parquet}
state: {url: ../../.floe, parallelism: 4}
`

// posOf returns "line:col" of the '|' marker in needle, searched in text
// with the marker removed. It computes positions independently of the YAML
// parser, so the tests check the reported positions.
func posOf(t *testing.T, text, needle string) string {
	t.Helper()
	mark := strings.IndexByte(needle, '|')
	if mark < 0 {
		mark = 0
	}
	plain := strings.Replace(needle, "|", "", 1)
	i := strings.Index(text, plain)
	if i < 0 {
		t.Fatalf("needle %q not in spec:\n%s", plain, text)
	}
	off := i + mark
	line := strings.Count(text[:off], "\n") + 1
	col := off - (strings.LastIndexByte(text[:off], '\n') + 1) + 1
	return fmt.Sprintf("%d:%d", line, col)
}

type wantErr struct {
	at  string // needle with '|' marking the reported position
	msg string // "path: message"
}

func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     []wantErr
	}{
		{"bad duration", "tumbling: 1m", "tumbling: 1 minute",
			[]wantErr{{"tumbling: |1 minute", `operators[1].window.tumbling: invalid duration "1 minute" (use Go syntax like 1m, 30s)`}}},
		{"days", "allowed_lateness: 30s", "allowed_lateness: 1d",
			[]wantErr{{"allowed_lateness: |1d", `operators[1].window.allowed_lateness: invalid duration "1d" (use Go syntax like 1m, 30s; for days write 24h)`}}},
		{"typo key", "max_files_per_epoch: 8", "max_file_per_epoch: 8",
			[]wantErr{{"|max_file_per_epoch", `source.max_file_per_epoch: unknown field (did you mean max_files_per_epoch?)`}}},
		{"unknown key, no suggestion", "max_files_per_epoch: 8", "zzz: 8",
			[]wantErr{{"|zzz", `source.zzz: unknown field (allowed: type, url, format, schema, event_time, max_files_per_epoch, max_rows_per_epoch, pattern, csv, watermark, on_error, rejected_url, late_url, inputs, start_from, max_rejected_fraction, capture, validate, order, full_list_every, forget_after, brokers, topic, topics, max_records_per_epoch, idle_timeout, on_missing_offsets, auth_file, columns, avro)`}}},
		{"unknown top-level key", "state:", "stat:",
			[]wantErr{
				{"|name:", `state.url: required`},
				{"|stat:", `stat: unknown field (did you mean state?)`},
			}},
		{"unknown function", `"sum(bytes)"`, `"summ(bytes)"`,
			[]wantErr{{`|"summ(bytes)"`, `operators[1].window.aggregates.total_bytes: unknown function "summ" (did you mean sum?)`}}},
		{"aggregate syntax", `"sum(bytes)"`, `"sum bytes"`,
			[]wantErr{{`|"sum bytes"`, `operators[1].window.aggregates.total_bytes: invalid aggregate "sum bytes" (want func(column), e.g. sum(bytes) or count())`}}},
		{"count_distinct needs a column", `"count()"`, `"count_distinct()"`,
			[]wantErr{{`|"count_distinct()"`, `operators[1].window.aggregates.clicks: count_distinct needs a column, e.g. count_distinct(bytes)`}}},
		{"missing name", "name: clicks-per-user\n", "",
			[]wantErr{{"|source:", `name: required`}}},
		{"bad name", "name: clicks-per-user", "name: Clicks/PerUser",
			[]wantErr{{"name: |Clicks", `name: invalid name "Clicks/PerUser" (use lowercase letters, digits, _ and -, starting with a letter or digit)`}}},
		{"event_time not in schema", "event_time: event_time", "event_time: ts",
			[]wantErr{{"event_time: |ts", `source.event_time: column "ts" is not in source.schema (columns: event_time, user_id, page, bytes)`}}},
		{"event_time not a timestamp", "event_time: timestamp", "event_time: string",
			[]wantErr{{"event_time: |event_time", `source.event_time: column "event_time" has type string; event time needs a timestamp type`}}},
		{"unknown type", "bytes: int64", "bytes: int",
			[]wantErr{{"bytes: |int", `source.schema.bytes: unknown type "int" (did you mean int64?)`}}},
		{"source format", "format: jsonl", "format: xml",
			[]wantErr{{"format: |xml", `source.format: invalid value "xml" (allowed: jsonl, csv, parquet)`}}},
		{"sink format", "format: parquet", "format: csv",
			[]wantErr{{"format: |csv", `sink.format: invalid value "csv" (allowed: parquet, jsonl)`}}},
		{"source type", "type: files\n", "type: kinesis\n",
			[]wantErr{{"type: |kinesis", `source.type: invalid value "kinesis" (allowed: files, kafka)`}}},
		{"schema missing for jsonl", "  schema:\n    event_time: timestamp\n    user_id: string\n    page: string\n    bytes: int64\n", "",
			[]wantErr{{"  |type: files", `source.schema: required for format jsonl (only parquet infers its schema)`}}},
		{"both window kinds", "tumbling: 1m\n", "tumbling: 1m\n      sliding: {size: 1m, slide: 30s}\n",
			[]wantErr{{"sliding: {|size", `operators[1].window.sliding: window has both tumbling and sliding; set exactly one`}}},
		{"no window kind", "      tumbling: 1m\n", "",
			[]wantErr{{"|key: [user_id]", `operators[1].window: needs exactly one of tumbling, sliding, session`}}},
		{"session gap", "tumbling: 1m", "session: {gap: 0s}",
			[]wantErr{{"gap: |0s", `operators[1].window.session.gap: must be > 0`}}},
		{"tumbling zero", "tumbling: 1m", "tumbling: 0s",
			[]wantErr{{"tumbling: |0s", `operators[1].window.tumbling: must be > 0`}}},
		{"negative lateness", "allowed_lateness: 30s", "allowed_lateness: -30s",
			[]wantErr{{"allowed_lateness: |-30s", `operators[1].window.allowed_lateness: must not be negative`}}},
		{"two kinds in one item", `- filter: "bytes > 0"`, `- {filter: "bytes > 0", project: {a: bytes}}`,
			[]wantErr{{`- {|filter`, `operators[0]: sets more than one of filter, project, window; use one list item per operator`}}},
		{"misspelt kind", `- filter: "bytes > 0"`, `- filtr: "bytes > 0"`,
			[]wantErr{
				{`- |filtr`, `operators[0].filtr: unknown field (did you mean filter?)`},
				{`- |filtr`, `operators[0]: needs one of filter, project, window`},
			}},
		{"duplicate ids", "\"bytes > 0\"\n  - window:\n", "\"bytes > 0\"\n    id: w\n  - window:\n      id: w\n",
			[]wantErr{{"      id: |w\n", `operators[1].id: duplicate id "w" (also operators[0])`}}},
		{"parallelism zero", "parallelism: 4", "parallelism: 0",
			[]wantErr{{"parallelism: |0", `state.parallelism: must be between 1 and max_parallelism (128), got 0`}}},
		{"parallelism above max", "parallelism: 4", "parallelism: 200",
			[]wantErr{{"parallelism: |200", `state.parallelism: must be between 1 and max_parallelism (128), got 200`}}},
		{"max_parallelism range", "parallelism: 4", "parallelism: 4, max_parallelism: 40000",
			[]wantErr{{"max_parallelism: |40000", `state.max_parallelism: must be between 1 and 32768, got 40000`}}},
		{"retain_epochs", "parallelism: 4", "parallelism: 4, retain_epochs: 0",
			[]wantErr{{"retain_epochs: |0", `state.retain_epochs: must be >= 1, got 0`}}},
		{"parallelism not an int", "parallelism: 4", "parallelism: four",
			[]wantErr{{"parallelism: |four", `state.parallelism: expected an integer, got "four"`}}},
		{"max_files zero", "max_files_per_epoch: 8", "max_files_per_epoch: 0",
			[]wantErr{{"max_files_per_epoch: |0", `source.max_files_per_epoch: must be >= 1 (leave it out for no limit)`}}},
		{"on_error", "max_files_per_epoch: 8", "on_error: skip",
			[]wantErr{{"on_error: |skip", `source.on_error: invalid value "skip" (allowed: reject, fail)`}}},
		{"csv options with jsonl", "max_files_per_epoch: 8", "csv: {header: false}",
			[]wantErr{{"csv: {|header", `source.csv: CSV options given but format is jsonl`}}},
		{"bad pattern", "max_files_per_epoch: 8", `pattern: "[x"`,
			[]wantErr{{`pattern: |"[x"`, `source.pattern: invalid glob "[x": syntax error in pattern`}}},
		{"sink reads itself", "url: ../../out/clicks", "url: ../events",
			[]wantErr{{"sink: {type: files, url: |../events", `sink.url: must differ from source.url (the pipeline would read its own output)`}}},
		{"missing state url", "url: ../../.floe, ", "",
			[]wantErr{{"state: {|parallelism", `state.url: required`}}},
		{"sink not a mapping", "sink: {type: files, url: ../../out/clicks, format: parquet}", "sink: files",
			[]wantErr{{"sink: |files", `sink: expected a mapping, got "files"`}}},
		{"duplicate yaml key", "  event_time: event_time\n", "  event_time: event_time\n  event_time: event_time\n",
			nil}, // filled below: goccy rejects duplicates itself
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.old) {
				t.Fatalf("old %q not in base", c.old)
			}
			text := strings.Replace(base, c.old, c.new, 1)
			_, err := Parse("clicks.yaml", []byte(text), "/srv/p")
			if err == nil {
				t.Fatalf("Parse succeeded, want errors\n%s", text)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if c.want == nil {
				if !strings.HasPrefix(err.Error(), "clicks.yaml:12:") {
					t.Errorf("got %q, want an error at line 12", err)
				}
				return
			}
			var want []string
			for _, w := range c.want {
				want = append(want, fmt.Sprintf("clicks.yaml:%s: %s", posOf(t, text, w.at), w.msg))
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("errors:\n got: %s\nwant: %s", got, strings.Join(want, "\n"))
			}
		})
	}
}

// TestAllProblemsReported: one spec with many problems reports each of
// them, sorted by position, in one error.
func TestAllProblemsReported(t *testing.T) {
	text := `name: Clicks
source: {type: files, url: "../events", format: jsnol, max_file_per_epoch: 3,
  schema: {event_time: timestamp, user_id: strin},
  event_time: event_time}
operators:
  - filter: "byts > 0"
  - window: {key: usr, tumbling: 1 minute,
      aggregates: {a: "summ(bytes)", b: "sum(event_time)", c: "sum bytes"}}
sink: {type: files, url: x}
state: {parallelism: 0}
`
	_, err := Parse("clicks.yaml", []byte(text), "/tmp")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse error %T %v, want Errors", err, err)
	}
	want := []wantErr{
		{"name: |Clicks", `name: invalid name "Clicks" (use lowercase letters, digits, _ and -, starting with a letter or digit)`},
		{"format: |jsnol", `source.format: invalid value "jsnol" (allowed: jsonl, csv, parquet)`},
		{"|max_file_per_epoch", `source.max_file_per_epoch: unknown field (did you mean max_files_per_epoch?)`},
		{"user_id: |strin", `source.schema.user_id: unknown type "strin" (did you mean string?)`},
		{"tumbling: |1 minute", `operators[1].window.tumbling: invalid duration "1 minute" (use Go syntax like 1m, 30s)`},
		{`a: |"summ`, `operators[1].window.aggregates.a: unknown function "summ" (did you mean sum?)`},
		{`c: |"sum bytes"`, `operators[1].window.aggregates.c: invalid aggregate "sum bytes" (want func(column), e.g. sum(bytes) or count())`},
		{"sink: {|type", `sink.format: required (allowed: parquet, jsonl)`},
		{"state: {|parallelism", `state.url: required`},
		{"parallelism: |0", `state.parallelism: must be between 1 and max_parallelism (128), got 0`},
	}
	var got, wantS []string
	for _, e := range es {
		got = append(got, e.Error())
	}
	for _, w := range want {
		wantS = append(wantS, fmt.Sprintf("clicks.yaml:%s: %s", posOf(t, text, w.at), w.msg))
	}
	if strings.Join(got, "\n") != strings.Join(wantS, "\n") {
		t.Errorf("errors:\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantS, "\n"))
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "name" || fe.Pos != (Pos{Line: 1, Column: 7}) || fe.File != "clicks.yaml" {
		t.Errorf("first FieldError = %+v", fe)
	}
}

func TestOrderPreserved(t *testing.T) {
	text := `name: order
source:
  type: files
  url: s3://bucket/in
  format: csv
  schema: {zeta: string, alpha: int64, ts: timestamp, mid: float64, beta: bool}
  event_time: ts
operators:
  - project: {z: zeta, a: alpha, ts: ts, m: "mid * 2", b: beta, y: "zeta + 'x'"}
  - window:
      key: z
      sliding: {size: 10m, slide: 2m}
      aggregates: {zz: "count()", aa: "sum(a)", mm: "max(m)", bb: "last(b)", cc: "count_distinct(y)", dd: "avg(a)", ee: "min(ts)", ff: "first(z)"}
      id: per-z
sink: {type: files, url: "s3://bucket/out", format: jsonl}
state: {url: "s3://bucket/state"}
`
	p, err := Parse("order.yaml", []byte(text), "/")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var schema []string
	for _, f := range p.Source.Schema {
		schema = append(schema, f.Name+":"+string(f.Type))
	}
	if got, want := strings.Join(schema, ","), "zeta:string,alpha:int64,ts:timestamp,mid:float64,beta:bool"; got != want {
		t.Errorf("schema order = %s, want %s", got, want)
	}
	var proj []string
	for _, c := range p.Operators[0].Project.Columns {
		proj = append(proj, c.Name+"="+c.Expr)
	}
	if got, want := strings.Join(proj, ","), "z=zeta,a=alpha,ts=ts,m=mid * 2,b=beta,y=zeta + 'x'"; got != want {
		t.Errorf("project order = %s, want %s", got, want)
	}
	var aggs []string
	for _, a := range p.Operators[1].Window.Aggregates {
		aggs = append(aggs, a.Name+"="+a.String())
	}
	if got, want := strings.Join(aggs, ","), "zz=count(),aa=sum(a),mm=max(m),bb=last(b),cc=count_distinct(y),dd=avg(a),ee=min(ts),ff=first(z)"; got != want {
		t.Errorf("aggregate order = %s, want %s", got, want)
	}
	w := p.Operators[1].Window
	if w.Kind() != WindowSliding || *w.Sliding != (SlidingWindow{Size: 10 * time.Minute, Slide: 2 * time.Minute}) {
		t.Errorf("window = %+v", *w)
	}
	if p.Operators[0].ID != "project" || p.Operators[1].ID != "per-z" {
		t.Errorf("ids = %q, %q", p.Operators[0].ID, p.Operators[1].ID)
	}
	if p.Source.CSV == nil || *p.Source.CSV != (CSVOptions{Header: true, Delimiter: ","}) {
		t.Errorf("csv defaults = %+v", p.Source.CSV)
	}
	if p.Source.URL != "s3://bucket/in" || p.State.URL != "s3://bucket/state" {
		t.Errorf("scheme URLs changed: %q %q", p.Source.URL, p.State.URL)
	}
	if p.State != (State{URL: "s3://bucket/state", Parallelism: 1, MaxParallelism: 128, RetainEpochs: 10}) {
		t.Errorf("state defaults = %+v", p.State)
	}
}

func TestOptionalFieldsAndIDs(t *testing.T) {
	text := `name: full
source:
  type: files
  url: /data/in
  format: csv
  csv: {header: false, delimiter: ";"}
  pattern: "*.csv"
  schema: {ts: timestamp, k: string, v: int64}
  event_time: ts
  max_rows_per_epoch: 100000
  on_error: fail
  rejected_url: rejected
  late_url: mem://late
operators:
  - window: {key: k, tumbling: 1h, aggregates: {n: "count(*)"}}
  - window: {key: [k], session: {gap: 5m}, aggregates: {n: "COUNT()"}}
  - filter: "n > 0"
    id: window-3
  - window: {key: [k], tumbling: 1m, aggregates: {n: "count()"}}
sink: {type: files, url: /data/out, format: jsonl}
state: {url: /data/state, parallelism: 8, max_parallelism: 16, retain_epochs: 3}
`
	p, err := Parse("full.yaml", []byte(text), "/data/specs")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	s := p.Source
	if *s.CSV != (CSVOptions{Header: false, Delimiter: ";"}) || s.Pattern != "*.csv" || s.MaxRowsPerEpoch != 100000 ||
		s.OnError != OnErrorFail || s.RejectedURL != "file:///data/specs/rejected" || s.LateURL != "mem://late" {
		t.Errorf("source = %+v", s)
	}
	var ids []string
	for _, op := range p.Operators {
		ids = append(ids, op.ID)
	}
	if got, want := strings.Join(ids, ","), "window,window-2,window-3,window-4"; got != want {
		t.Errorf("ids = %s, want %s", got, want)
	}
	if a := p.Operators[0].Window.Aggregates[0]; a != (Aggregate{Name: "n", Func: Count}) {
		t.Errorf("count(*) = %+v", a)
	}
	if a := p.Operators[1].Window.Aggregates[0]; a.Func != Count {
		t.Errorf("COUNT() = %+v", a)
	}
	if p.State != (State{URL: "file:///data/state", Parallelism: 8, MaxParallelism: 16, RetainEpochs: 3}) {
		t.Errorf("state = %+v", p.State)
	}
}

func TestSyntaxAndDocumentErrors(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"empty", "", "x.yaml: empty spec"},
		{"comment only", "# nothing\n", "x.yaml: empty spec"},
		{"two documents", "name: a\n---\nname: b\n", "x.yaml:3:1: a spec file holds one YAML document"},
		{"not a mapping", "- a\n- b\n", "x.yaml:1:1: expected a mapping, got a list"},
		{"merge key", "a: &x {b: 1}\nc:\n  <<: *x\n", "x.yaml:3:3: merge keys (<<) are not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.text), "/")
			if err == nil || err.Error() != c.want {
				t.Errorf("Parse = %v, want %s", err, c.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("not ErrInvalid: %v", err)
			}
		})
	}
	_, err := Parse("x.yaml", []byte("name: a\nsource: {type: files\n"), "/")
	if err == nil || !strings.HasPrefix(err.Error(), "x.yaml:2:") || !strings.Contains(err.Error(), "YAML syntax") {
		t.Errorf("syntax error = %v, want x.yaml:2:..: YAML syntax ...", err)
	}
}

func TestAnchorsAndAliases(t *testing.T) {
	text := strings.Replace(base, "tumbling: 1m", "tumbling: &size 1m", 1)
	text = strings.Replace(text, "allowed_lateness: 30s", "allowed_lateness: *size", 1)
	p, err := Parse("a.yaml", []byte(text), "/")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if w := p.Operators[1].Window; w.AllowedLateness != time.Minute {
		t.Errorf("allowed_lateness via alias = %v", w.AllowedLateness)
	}
}

func TestValidateGoBuilt(t *testing.T) {
	p := &Pipeline{
		Name:   "go-built",
		Source: Source{Type: SourceFiles, URL: "/data/in", Format: JSONL, Schema: clicksSchema(), EventTime: "event_time"},
		Operators: []Operator{
			{Window: &Window{Key: []string{"user_id"}, Tumbling: time.Minute, Sliding: &SlidingWindow{Size: time.Minute, Slide: time.Second},
				Aggregates: []Aggregate{{Name: "n", Func: "cnt"}, {Name: "n", Func: Count}}}},
			{},
		},
		Sink: Sink{Type: SinkFiles, URL: "file:///out", Format: Parquet},
	}
	err := p.Validate()
	want := strings.Join([]string{
		`source.url: "/data/in" is not a URL; use an absolute URL such as file:///dir or s3://bucket/prefix (ResolveURL turns paths into URLs)`,
		`operators[0].window.sliding: window has both tumbling and sliding; set exactly one`,
		`operators[0].window.aggregates.n: unknown function "cnt" (did you mean count?)`,
		`operators[1]: needs one of filter, project, window`,
		`operators[0].id: required (SetDefaults assigns one)`,
		`state.url: required`,
		`state.max_parallelism: must be between 1 and 32768, got 0`,
		`state.parallelism: must be between 1 and max_parallelism (32768), got 0`,
		`state.retain_epochs: must be >= 1, got 0`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Validate:\n got: %v\nwant: %s", err, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("not ErrInvalid")
	}
	p.SetDefaults()
	p.Source.URL = "file:///data/in"
	p.State.URL = "file:///state"
	p.Operators = p.Operators[:1]
	p.Operators[0].Window.Sliding = nil
	p.Operators[0].Window.Aggregates = p.Operators[0].Window.Aggregates[1:]
	if err := p.Validate(); err != nil {
		t.Errorf("Validate after fixes: %v", err)
	}
	if p.Operators[0].ID != "window" || p.State.Parallelism != 1 {
		t.Errorf("SetDefaults: id %q parallelism %d", p.Operators[0].ID, p.State.Parallelism)
	}
}

func TestBuilderMatchesSpec(t *testing.T) {
	built := New("clicks-per-user").
		FromFiles("/srv/events", JSONL, clicksSchema()...).
		EventTime("event_time", 5*time.Second).
		Filter("bytes > 0").
		Window(NewTumbling(time.Minute).By("user_id").Lateness(30*time.Second).
			Agg("clicks", Count, "").Agg("total_bytes", Sum, "bytes")).
		ToFiles("/out/clicks", Parquet).
		StateAt("/.floe", 4)
	built.Source.MaxFilesPerEpoch = 8
	built.Source.Watermark.IdleTimeout = time.Minute
	if err := built.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	parsed, err := Parse("clicks.yaml", []byte(designSketch), "/srv/pipelines")
	if err != nil {
		t.Fatal(err)
	}
	parsed.origin = nil
	if !reflect.DeepEqual(built, parsed) {
		t.Errorf("builder and spec differ\nbuilt:  %s\nparsed: %s", dump(built), dump(parsed))
	}
}

// TestListingFields: source.order, full_list_every and forget_after
// (which takes days).
func TestListingFields(t *testing.T) {
	with := func(extra string) (*Pipeline, error) {
		return Parse("clicks.yaml", []byte(strings.Replace(base, "  max_files_per_epoch: 8\n", "  max_files_per_epoch: 8\n"+extra, 1)), t.TempDir())
	}
	p, err := with("  order: lexical\n  full_list_every: 2h\n  forget_after: 30d\n")
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Source; s.Order != OrderLexical || s.FullListEvery != 2*time.Hour || s.ForgetAfter != 720*time.Hour {
		t.Fatalf("decoded order %q, full_list_every %v, forget_after %v", s.Order, s.FullListEvery, s.ForgetAfter)
	}
	for _, tc := range []struct{ extra, want string }{
		{"  order: sorted\n", `source.order: unknown order "sorted" (want lexical, or leave it out)`},
		{"  full_list_every: 1h\n", "source.full_list_every: only with order: lexical"},
		{"  forget_after: 0d\n", "source.forget_after: want 1d to 100000d"},
		{"  forget_after: soon\n", "source.forget_after: invalid duration"},
	} {
		if _, err := with(tc.extra); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.extra, err, tc.want)
		}
	}
	noSchema := strings.Replace(base, "  schema:\n    event_time: timestamp\n    user_id: string\n    page: string\n    bytes: int64\n", "", 1)
	noSchema = strings.Replace(noSchema, "format: jsonl", "format: parquet", 1)
	noSchema = strings.Replace(noSchema, "  max_files_per_epoch: 8\n", "  order: lexical\n", 1)
	if _, err := Parse("clicks.yaml", []byte(noSchema), t.TempDir()); err == nil || !strings.Contains(err.Error(), "order: lexical needs a declared schema") {
		t.Errorf("lexical without a schema: %v", err)
	}
}
