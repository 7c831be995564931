package spec

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/manifest"
)

var rewriteGraph = flag.Bool("rewrite-graph", false, "rewrite testdata/graph/*.describe.txt from Graph.Describe")

// graphBase is the graph-form spec the error cases edit.
const graphBase = `name: g
sources:
  clicks: {type: files, url: /in/clicks, format: jsonl, schema: {ts: timestamp, user_id: string, bytes: int64}, event_time: ts}
  orders: {type: files, url: /in/orders, format: jsonl, schema: {ts: timestamp, user_id: string, amount: float64}, event_time: ts}
stages:
  - name: valid
    input: clicks
    filter: "bytes > 0"
  - name: joined
    inputs: [valid, orders]
    join: {on: [user_id], interval: {lower: 1m, upper: 1m}}
  - name: per-user
    input: joined
    window: {key: [user_id], tumbling: 1m, aggregates: {n: "count()"}}
sinks:
  out: {input: per-user, type: files, url: /out, format: parquet}
state: {url: /state}
`

func TestGraphParse(t *testing.T) {
	p, err := Parse("g.yaml", []byte(graphBase), "/srv")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if p.Source.Type != "" || p.Operators != nil || !p.Sink.IsZero() {
		t.Errorf("graph form filled the linear fields: %+v %+v %+v", p.Source, p.Operators, p.Sink)
	}
	g, err := p.Graph()
	if err != nil {
		t.Fatalf("Graph: %v", err)
	}
	if g.Linear() || g.FromLinear() {
		t.Errorf("Linear %v FromLinear %v, want false, false", g.Linear(), g.FromLinear())
	}
	var names []string
	for _, st := range g.Stages {
		names = append(names, st.Name+":"+st.Kind())
	}
	if got, want := strings.Join(names, " "), "valid:filter joined:join per-user:window"; got != want {
		t.Errorf("stages %s, want %s", got, want)
	}
	j := g.Stage("joined").Join
	want := &Join{Type: JoinInner, LeftKeys: []string{"user_id"}, RightKeys: []string{"user_id"},
		Interval: &JoinInterval{Lower: time.Minute, Upper: time.Minute}}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("join = %+v, want %+v", j, want)
	}
	if j != p.Stages[1].Join {
		t.Errorf("Graph copied the join config instead of sharing it")
	}
	for _, c := range []struct {
		name            string
		up, down, sinks []string
		path            string
		et              string
	}{
		{"clicks", nil, []string{"valid"}, nil, "sources.clicks", "ts"},
		{"orders", nil, []string{"joined"}, nil, "sources.orders", "ts"},
		{"valid", []string{"clicks"}, []string{"joined"}, nil, "stages[0]", "ts"},
		{"joined", []string{"valid", "orders"}, []string{"per-user"}, nil, "stages[1]", "ts"},
		{"per-user", []string{"joined"}, nil, []string{"out"}, "stages[2]", WindowEventTime},
		{"out", nil, nil, nil, "", ""}, // a sink: not a source or stage
		{"nope", nil, nil, nil, "", ""},
	} {
		if got := g.Upstreams(c.name); !slices.Equal(got, c.up) {
			t.Errorf("Upstreams(%s) = %v, want %v", c.name, got, c.up)
		}
		if got := g.Downstreams(c.name); !slices.Equal(got, c.down) {
			t.Errorf("Downstreams(%s) = %v, want %v", c.name, got, c.down)
		}
		if got := g.SinksOf(c.name); !slices.Equal(got, c.sinks) {
			t.Errorf("SinksOf(%s) = %v, want %v", c.name, got, c.sinks)
		}
		if got := g.Path(c.name); got != c.path {
			t.Errorf("Path(%s) = %q, want %q", c.name, got, c.path)
		}
		if got := g.EventTime(c.name); got != c.et {
			t.Errorf("EventTime(%s) = %q, want %q", c.name, got, c.et)
		}
	}
	if g.SinkPath("out") != "sinks.out" || g.Sink("out").Input != "per-user" || g.SinkPath("per-user") != "" {
		t.Errorf("SinkPath(out) = %q, Sink(out) = %+v", g.SinkPath("out"), g.Sink("out"))
	}
	if got, want := p.Where(g.Path("joined")+".join"), "g.yaml:11:12: stages[1].join"; got != want {
		t.Errorf("Where = %q, want %q", got, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("Validate of a parsed graph: %v", err)
	}
}

// TestGraphTopologicalOrder: stages declared downstream-first come out
// with every stage after its inputs, ties in declaration order.
func TestGraphTopologicalOrder(t *testing.T) {
	text := `name: g
sources:
  a: {type: files, url: /in/a, format: parquet, event_time: ts}
  b: {type: files, url: /in/b, format: parquet, event_time: ts}
stages:
  - {name: z, inputs: [y, x], join: {on: [k], window: {tumbling: 1m}}}
  - {name: y, input: b, dedup: {key: k, within: 1h}}
  - {name: x, input: w, project: {k: k, ts: ts}}
  - {name: w, input: a, filter: "k != ''"}
  - {name: v, input: a, filter: "true"}
sinks:
  out: {input: z, type: files, url: /out, format: parquet}
  copy: {input: v, type: files, url: /copy, format: jsonl}
state: {url: /state}
`
	p, err := Parse("g.yaml", []byte(text), "/")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	g, err := p.Graph()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range g.Stages {
		got = append(got, st.Name)
	}
	if want := []string{"y", "w", "x", "z", "v"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	checkTopological(t, g)
	if got := g.Downstreams("a"); !slices.Equal(got, []string{"w", "v"}) {
		t.Errorf("Downstreams(a) = %v", got)
	}
}

// checkTopological fails unless every stage and sink of g comes after its
// inputs.
func checkTopological(t *testing.T, g *Graph) {
	t.Helper()
	placed := map[string]bool{}
	for _, s := range g.Sources {
		placed[s.Name] = true
	}
	for _, st := range g.Stages {
		for _, in := range st.Inputs {
			if !placed[in] {
				t.Errorf("stage %s comes before its input %s", st.Name, in)
			}
		}
		placed[st.Name] = true
	}
	for _, s := range g.Sinks {
		if !placed[s.Input] {
			t.Errorf("sink %s reads %s, which is not a placed source or stage", s.Name, s.Input)
		}
	}
}

// legacySpecs returns every linear-form spec in the repository's test data
// and the constants the spec tests use.
func legacySpecs(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{"designSketch": []byte(designSketch), "base": []byte(base), "compileBase-like": []byte(designSketch)}
	var files []string
	for _, pat := range []string{"../testdata/pipelines/*.yaml", "testdata/*.yaml", "testdata/*/*.yaml"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "\nsources:") {
			continue // graph form
		}
		out[f] = data
	}
	if len(out) < 4 {
		t.Fatalf("found only %d legacy specs", len(out))
	}
	return out
}

// TestLegacyNormalisesToLinearGraph: every linear-form spec becomes a
// linear Graph: source "source", one stage per operator named by its id
// reading the one before and sharing its config, sink "sink"; and its
// Pipeline keeps the graph fields empty.
func TestLegacyNormalisesToLinearGraph(t *testing.T) {
	for name, data := range legacySpecs(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			p, err := Parse(name, data, "/srv/p")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if p.Sources != nil || p.Stages != nil || p.Sinks != nil {
				t.Fatalf("linear spec filled graph fields")
			}
			g, err := p.Graph()
			if err != nil {
				t.Fatalf("Graph: %v", err)
			}
			if !g.Linear() || !g.FromLinear() {
				t.Errorf("Linear %v FromLinear %v, want true", g.Linear(), g.FromLinear())
			}
			if len(g.Sources) != 1 || g.Sources[0].Name != "source" || !reflect.DeepEqual(g.Sources[0].Source, p.Source) || g.Path("source") != "source" {
				t.Errorf("sources = %+v", g.Sources)
			}
			if len(g.Stages) != len(p.Operators) {
				t.Fatalf("%d stages for %d operators", len(g.Stages), len(p.Operators))
			}
			prev := "source"
			for i, op := range p.Operators {
				st := g.Stages[i]
				if st.Name != op.ID || !slices.Equal(st.Inputs, []string{prev}) || st.Kind() != op.Kind() ||
					st.Filter != op.Filter || st.Project != op.Project || st.Window != op.Window {
					t.Errorf("stage %d = %+v, operator %+v", i, st, op)
				}
				if g.Path(op.ID) != index("operators", i) {
					t.Errorf("Path(%s) = %q", op.ID, g.Path(op.ID))
				}
				prev = op.ID
			}
			if len(g.Sinks) != 1 || g.Sinks[0].Name != "sink" || g.Sinks[0].Input != prev || !reflect.DeepEqual(g.Sinks[0].Sink, p.Sink) {
				t.Errorf("sinks = %+v", g.Sinks)
			}
			if g.EventTime(g.Sinks[0].Input) == "" || g.SinkPath("sink") != "sink" || !slices.Equal(g.SinksOf(prev), []string{"sink"}) {
				t.Errorf("sink: event time %q, path %q, SinksOf(%s) %v", g.EventTime(g.Sinks[0].Input), g.SinkPath("sink"), prev, g.SinksOf(prev))
			}
		})
	}
}

// TestLegacyNameClash: an operator id "source" moves the normalised source
// to the next free name; an operator id "sink" leaves the sink named "sink"
// (sinks have their own namespace).
func TestLegacyNameClash(t *testing.T) {
	text := strings.Replace(designSketch, `- filter: "bytes > 0"`, `- {id: source, filter: "bytes > 0"}`, 1)
	text = strings.Replace(text, "  - window: {", "  - window: {id: sink, ", 1)
	p, err := Parse("c.yaml", []byte(text), "/srv")
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Graph()
	if err != nil {
		t.Fatal(err)
	}
	if g.Sources[0].Name != "source-2" || g.Sinks[0].Name != "sink" || g.Sinks[0].Input != "sink" || !g.Linear() ||
		g.Stages[0].Inputs[0] != "source-2" || g.Path("sink") != "operators[1]" || g.SinkPath("sink") != "sink" {
		t.Errorf("got:\n%s", g.Describe())
	}
}

func TestGraphDescribeGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/graph/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../testdata/pipelines/clicks.yaml")
	if len(files) < 3 {
		t.Fatalf("only %d specs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(filepath.Base(f), data, "/srv/p")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			g, err := p.Graph()
			if err != nil {
				t.Fatalf("Graph: %v", err)
			}
			checkTopological(t, g)
			got := g.DescribeWith(func(name string) string {
				if g.Stage(name) != nil {
					return "parallelism 2"
				}
				return ""
			})
			golden := filepath.Join("testdata/graph", strings.TrimSuffix(filepath.Base(f), ".yaml")+".describe.txt")
			if *rewriteGraph {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -rewrite-graph to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Describe of %s:\n%s\nwant (%s):\n%s", f, got, golden, want)
			}
		})
	}
}

func TestGraphErrors(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     []wantErr
	}{
		{"unknown input with suggestion", "input: joined", "input: joind",
			[]wantErr{{"input: |joind", `stages[2].input: unknown input "joind" (did you mean joined?)`}}},
		{"unknown input listing names", "input: joined", "input: zzz",
			[]wantErr{{"input: |zzz", `stages[2].input: unknown input "zzz" (sources and stages: clicks, orders, valid, joined, per-user)`}}},
		{"input is a sink", "input: joined", "input: out",
			[]wantErr{{"input: |out", `stages[2].input: "out" is a sink; a stage or sink reads a source or a stage`}}},
		{"cycle", "inputs: [valid, orders]", "inputs: [per-user, orders]",
			[]wantErr{
				{"- |name: valid", `stages[0]: the output of stage "valid" is not read by any stage or sink (add a sink with input: valid, or remove the stage)`},
				{"inputs: [|per-user", `stages[1].inputs[0]: cycle: joined -> per-user -> joined (a stage cannot read its own output)`},
			}},
		{"self loop", "input: clicks", "input: valid",
			[]wantErr{
				{"  |clicks: {", `sources.clicks: source "clicks" is not read by any stage or sink`},
				{"input: |valid", `stages[0].input: cycle: valid -> valid (a stage cannot read its own output)`},
			}},
		{"join with one input", "inputs: [valid, orders]", "input: valid",
			[]wantErr{
				{"  |orders: {", `sources.orders: source "orders" is not read by any stage or sink`},
				{"input: |valid\n    join", `stages[1].input: a join reads two inputs (inputs: [left, right]), got 1`},
			}},
		{"filter with two inputs", "input: clicks", "inputs: [clicks, orders]",
			[]wantErr{{"inputs: [|clicks, orders]", `stages[0].inputs[0]: a filter stage reads one input, got 2`}}},
		{"input and inputs", "input: clicks", "input: clicks\n    inputs: [clicks]",
			[]wantErr{{"inputs: |[clicks]", `stages[0].inputs: set input (one upstream) or inputs (a list), not both`}}},
		{"missing input", "    input: clicks\n", "",
			[]wantErr{{"- |name: valid", `stages[0].input: required: name the source or stage this stage reads`}}},
		{"duplicate name", "name: valid", "name: orders",
			[]wantErr{
				{"name: |orders", `stages[0].name: duplicate name "orders" (also sources.orders); sources and stages share one namespace`},
				{"inputs: [|valid", `stages[1].inputs[0]: unknown input "valid" (sources and stages: clicks, orders, joined, per-user)`},
			}},
		{"invalid name", "name: valid", "name: Valid/x",
			[]wantErr{
				{"name: |Valid/x", `stages[0].name: invalid name "Valid/x" (use lowercase letters, digits, _ and -, starting with a letter or digit)`},
				{"inputs: [|valid", `stages[1].inputs[0]: unknown input "valid" (sources and stages: clicks, orders, joined, per-user)`},
			}},
		{"long name", "  out: {", "  " + strings.Repeat("o", 65) + ": {",
			[]wantErr{{"  |ooo", `sinks.` + strings.Repeat("o", 65) + `: name of 65 bytes is too long (at most 64: a name becomes a state operator id)`}}},
		{"sink without input", "out: {input: per-user, ", "out: {",
			[]wantErr{{"  |out: {", `sinks.out.input: required: name the source or stage this sink writes`}}},
		{"sink reads a source", "out: {input: per-user, ", "out: {input: orders, ",
			[]wantErr{{"- |name: per-user", `stages[2]: the output of stage "per-user" is not read by any stage or sink (add a sink with input: per-user, or remove the stage)`}}},
		{"both forms", "state: {url: /state}", "state: {url: /state}\nsource: {type: files}\noperators: []",
			[]wantErr{
				{"source: {|type", `source: cannot be used with sources, stages, sinks: a spec is either linear (source, operators, sink) or a graph (sources, stages, sinks)`},
				{"operators: |[]", `operators: cannot be used with sources, stages, sinks: a spec is either linear (source, operators, sink) or a graph (sources, stages, sinks)`},
			}},
		{"sink url is a source url", "url: /out,", "url: /in/orders,",
			[]wantErr{{"url: |/in/orders, format: parquet", `sinks.out.url: must differ from sources.orders.url (the pipeline would read its own output)`}}},
		{"join without time bound", "join: {on: [user_id], interval: {lower: 1m, upper: 1m}}", "join: {on: [user_id]}",
			[]wantErr{{"join: {|on", `stages[1].join: needs interval or window: a join without a time bound would keep every row`}}},
		{"join with interval and window", "upper: 1m}}", "upper: 1m}, window: {tumbling: 1m}}",
			[]wantErr{{"window: {|tumbling", `stages[1].join.window: join has both interval and window; set exactly one`}}},
		{"empty interval", "lower: 1m", "lower: -2m",
			[]wantErr{{"interval: {|lower", `stages[1].join.interval: empty interval: right.t between left.t - -2m and left.t + 1m (lower + upper must be >= 0)`}}},
		{"join keys pairwise", "on: [user_id]", "left_on: [user_id, ts], right_on: [user_id]",
			[]wantErr{{"right_on: |[user_id]", `stages[1].join.right_on: 1 columns but left_on has 2: the keys are matched pairwise`}}},
		{"join on and left_on", "on: [user_id]", "on: [user_id], left_on: [x]",
			[]wantErr{{"left_on: |[x]", `stages[1].join.left_on: set on (the same columns on both sides) or left_on and right_on, not both`}}},
		{"join type", "join: {on", "join: {type: outer, on",
			[]wantErr{{"type: |outer", `stages[1].join.type: invalid value "outer" (allowed: inner, left)`}}},
		{"windowed join with two windows", "interval: {lower: 1m, upper: 1m}", "window: {tumbling: 1m, sliding: {size: 2m, slide: 1m}}",
			[]wantErr{{"sliding: {|size", `stages[1].join.window.sliding: window has both tumbling and sliding; set exactly one`}}},
		{"windowed join sliding sizes", "interval: {lower: 1m, upper: 1m}", "window: {sliding: {size: 0s, slide: -1s}}",
			[]wantErr{
				{"size: |0s", `stages[1].join.window.sliding.size: must be > 0`},
				{"slide: |-1s", `stages[1].join.window.sliding.slide: must be > 0`},
			}},
		{"windowed join without a window", "interval: {lower: 1m, upper: 1m}", "window: {}",
			[]wantErr{{"window: |{}", `stages[1].join.window: needs exactly one of tumbling, sliding`}}},
		{"windowed join session", "interval: {lower: 1m, upper: 1m}", "window: {session: {gap: 1m}}",
			[]wantErr{
				{"window: {|session", `stages[1].join.window.session: unknown field (allowed: tumbling, sliding)`},
				{"window: {|session", `stages[1].join.window: needs exactly one of tumbling, sliding`},
			}},
		{"join lateness and times", "join: {on", "join: {allowed_lateness: -1s, left_time: \"\", on",
			[]wantErr{
				{"allowed_lateness: |-1s", `stages[1].join.allowed_lateness: must not be negative`},
				{"left_time: |\"\"", `stages[1].join.left_time: empty (leave it out for the default)`},
			}},
		{"join left_on without right_on", "on: [user_id]", "left_on: [user_id]",
			[]wantErr{{"join: {|left_on", `stages[1].join.right_on: required with left_on: the right side's key columns`}}},
		{"join empty key column", "on: [user_id]", "left_on: [user_id, \"\"], right_on: [\"\", ts]",
			[]wantErr{
				{"left_on: [user_id, |\"\"]", `stages[1].join.left_on[1]: empty column name`},
				{"right_on: [|\"\", ts]", `stages[1].join.right_on[0]: empty column name`},
			}},
		{"join unknown field", "join: {on", "join: {lateness: 1m, on",
			[]wantErr{{"join: {|lateness", `stages[1].join.lateness: unknown field (allowed: type, on, left_on, right_on, left_time, right_time, interval, window, allowed_lateness, right_prefix)`}}},
		{"no kind", `    filter: "bytes > 0"` + "\n", "",
			[]wantErr{{"- |name: valid", `stages[0]: needs one of filter, project, window, join, lookup, top_n, dedup, over`}}},
		{"two kinds", `    filter: "bytes > 0"`, `    filter: "bytes > 0"` + "\n    dedup: {key: user_id, within: 1h}",
			[]wantErr{{"- |name: valid", `stages[0]: sets more than one of filter, project, window, join, lookup, top_n, dedup, over; use one list item per stage`}}},
		{"misspelt stage field", "input: clicks", "inptu: clicks",
			[]wantErr{
				{"- |name: valid", `stages[0].input: required: name the source or stage this stage reads`},
				{"|inptu", `stages[0].inptu: unknown field (did you mean input?)`},
			}},
		{"window id in a stage", "window: {key", "window: {id: w, key",
			[]wantErr{{"id: |w", `stages[2].window.id: a stage's id is its name; leave window.id out`}}},
		{"late_url on a filter", `    filter: "bytes > 0"`, `    filter: "bytes > 0"` + "\n    late_url: /late",
			[]wantErr{{"late_url: |/late", `stages[0].late_url: a filter stage finds no rows late (window, join, top_n, dedup and over stages do)`}}},
		{"late_url on a source", "event_time: ts}\n  orders", "event_time: ts, late_url: /late}\n  orders",
			[]wantErr{{"late_url: |/late", `sources.clicks.late_url: in the graph form late rows belong to the stage that finds them late: set late_url on the window, join, top_n or dedup stage`}}},
		{"inputs: directory on a source", "event_time: ts}\n  orders", "event_time: ts, inputs: directory}\n  orders",
			[]wantErr{{"inputs: |directory", `sources.clicks.inputs: inputs: directory is not supported in the graph form: each source is one watermark input; declare each directory as a source of its own`}}},
		{"source problems keep their path", "format: jsonl, schema: {ts: timestamp, user_id: string, bytes", "format: jsonl, schema: {ts: timestamp, user_id: strin, bytes",
			[]wantErr{{"user_id: |strin", `sources.clicks.schema.user_id: unknown type "strin" (did you mean string?)`}}},
		{"no sources", "sources:\n  clicks:", "sources: {}\nx:\n  clicks:",
			nil}, // checked below by substring
		{"filter expression", `"bytes > 0"`, `"bytes >"`,
			nil}, // checked below by substring
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(graphBase, c.old) {
				t.Fatalf("old %q not in graphBase", c.old)
			}
			text := strings.Replace(graphBase, c.old, c.new, 1)
			_, err := Parse("g.yaml", []byte(text), "/srv")
			if err == nil {
				t.Fatalf("Parse succeeded, want errors\n%s", text)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if c.want == nil {
				sub := map[string]string{
					"unknown input listing names": `g.yaml:14:12: stages[2].input: unknown input "zzz" (sources and stages: clicks, orders, valid, joined, per-user)`,
					"no sources":                  `sources: required: at least one named source`,
					"filter expression":           `g.yaml:8:13: stages[0].filter: invalid expression "bytes >"`,
				}[c.name]
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("got %v\nwant it to contain %s", err, sub)
				}
				return
			}
			var want []string
			for _, w := range c.want {
				msg := w.msg
				want = append(want, fmt.Sprintf("g.yaml:%s: %s", posOf(t, text, w.at), msg))
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("errors:\n got: %s\nwant: %s", got, strings.Join(want, "\n"))
			}
		})
	}
}

// TestStageConfigErrors: the configuration of lookup, top_n and dedup
// stages, each replacing the filter stage of graphBase.
func TestStageConfigErrors(t *testing.T) {
	const filter = `    filter: "bytes > 0"`
	cases := []struct {
		name, stage string
		want        []wantErr
	}{
		{"lookup needs url and keys", `    lookup: {format: parquet}`,
			[]wantErr{
				{"lookup: {|format", `stages[0].lookup.url: required`},
				{"lookup: {|format", `stages[0].lookup: needs key columns: on: [column, ...], or left_on and right_on`},
			}},
		{"lookup csv needs a schema", `    lookup: {url: /t, format: csv, on: [user_id]}`,
			[]wantErr{{"lookup: {|url", `stages[0].lookup.schema: required for format csv (only parquet infers its schema)`}}},
		{"lookup key not in schema", `    lookup: {url: /t, format: jsonl, schema: {uid: string, country: string}, on: [user_id]}`,
			[]wantErr{{"on: |[user_id]", `stages[0].lookup.on: column "user_id" is not in stages[0].lookup.schema (columns: uid, country)`}}},
		{"lookup right_on without left_on", `    lookup: {url: /t, format: parquet, right_on: [uid]}`,
			[]wantErr{{"lookup: {|url", `stages[0].lookup.left_on: required with right_on: the left side's key columns`}}},
		{"lookup reads the sink", `    lookup: {url: /out, format: parquet, on: [user_id]}`,
			[]wantErr{{"url: |/out, format: parquet}", `sinks.out.url: must differ from stages[0].lookup.url (the pipeline would read its own output)`}}},
		{"top_n n", `    top_n: {n: 0, order_by: clicks desc, tumbling: 1h}`,
			[]wantErr{{"n: |0", `stages[0].top_n.n: must be between 1 and 10000, got 0`}}},
		{"top_n order", `    top_n: {n: 3, order_by: [clicks down], tumbling: 1h}`,
			[]wantErr{{"order_by: [|clicks down]", `stages[0].top_n.order_by[0]: invalid order "clicks down" (want "column [asc|desc] [nulls first|nulls last]", e.g. "clicks desc")`}}},
		{"top_n without order", `    top_n: {n: 3, tumbling: 1h}`,
			[]wantErr{{"top_n: {|n", `stages[0].top_n.order_by: required: the ranking column(s), e.g. order_by: [clicks desc]`}}},
		{"top_n of a source needs tumbling", `    top_n: {n: 3, order_by: "bytes desc, ts"}`,
			[]wantErr{{"input: |clicks", `stages[0].input: a top_n without tumbling ranks within its input's windows, and source "clicks" has none: read a window stage, or set tumbling`}}},
		{"top_n event_time without tumbling", `    input: valid`,
			nil},
		{"dedup within", `    dedup: {key: user_id}`,
			[]wantErr{{"dedup: {|key", `stages[0].dedup.within: required: how long a key's first row is remembered, e.g. within: 1h`}}},
		{"dedup keep", `    dedup: {key: [user_id], keep: newest, within: 1h}`,
			[]wantErr{{"keep: |newest", `stages[0].dedup.keep: invalid value "newest" (allowed: first, last)`}}},
		{"dedup key", `    dedup: {within: 1h, allowed_lateness: -1s}`,
			[]wantErr{
				{"dedup: {|within", `stages[0].dedup.key: required: the column(s) that identify a duplicate`},
				{"allowed_lateness: |-1s", `stages[0].dedup.allowed_lateness: must not be negative`},
			}},
		{"late_url on a dedup is fine", `    dedup: {key: user_id, within: 1h}` + "\n    late_url: /late", nil},
		{"lookup csv options", `    lookup: {url: /t, format: parquet, pattern: "[x", csv: {delimiter: ";;"}, on: [user_id], right_prefix: t_}`,
			[]wantErr{
				{"pattern: |\"[x\"", `stages[0].lookup.pattern: invalid glob "[x": syntax error in pattern`},
				{"csv: {|delimiter", `stages[0].lookup.csv: CSV options given but format is parquet`},
				{"delimiter: |\";;\"", `stages[0].lookup.csv.delimiter: must be one character other than a quote or line break, got ";;"`},
			}},
		{"lookup key column limit", `    lookup: {url: /t, format: parquet, on: [` + strings.Repeat("k, ", 32) + `k]}`,
			[]wantErr{{"on: |[k,", `stages[0].lookup.on: 33 key columns; at most 32`}}},
		{"dedup empty key column", `    dedup: {key: [user_id, ""], within: 1h}`,
			[]wantErr{{`user_id, |""`, `stages[0].dedup.key[1]: empty column name`}}},
		{"over is fine", `    over: {key: [user_id], order_by: ts, rows: 10, aggregates: {avg_bytes: "avg(bytes)", n: "count()"}}` + "\n    late_url: /late", nil},
		{"over needs rows and aggregates", `    over: {key: [user_id]}`,
			[]wantErr{
				{"over: {|key", `stages[0].over.rows: required: how many preceding rows the frame holds (ROWS BETWEEN n PRECEDING AND CURRENT ROW), e.g. rows: 10`},
				{"over: {|key", `stages[0].over.aggregates: required: at least one name: "func(column)", e.g. {avg_price: "avg(price)"}`},
			}},
		{"over rows range and order", `    over: {rows: 10001, order_by: ts desc, aggregates: {d: "count_distinct(bytes)", s: "sum(bytes)"}, allowed_lateness: -1s}`,
			[]wantErr{
				{"rows: |10001", `stages[0].over.rows: must be between 0 and 10000, got 10001 (rows: n means ROWS BETWEEN n PRECEDING AND CURRENT ROW)`},
				{"order_by: |ts desc", `stages[0].over.order_by: invalid order "ts desc": an over stage orders by one timestamp column, ascending (e.g. order_by: dateTime)`},
				{`d: |"count_distinct`, `stages[0].over.aggregates.d: count_distinct is not supported in an over stage (count, sum, avg, min, max, first, last are)`},
				{"allowed_lateness: |-1s", `stages[0].over.allowed_lateness: must not be negative`},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(graphBase, filter, c.stage, 1)
			if c.name == "top_n event_time without tumbling" {
				text = strings.Replace(graphBase, "  - name: per-user\n    input: joined", "  - name: per-user\n    input: joined\n    window: {key: [user_id], tumbling: 1m, aggregates: {n: \"count()\"}}\n  - name: top\n    input: per-user\n    top_n: {n: 1, order_by: n, event_time: x}\n  - name: x\n    input: top", 1)
				text = strings.Replace(text, "    window: {key: [user_id], tumbling: 1m, aggregates: {n: \"count()\"}}\nsinks:\n  out: {input: per-user", "    filter: \"true\"\nsinks:\n  out: {input: x", 1)
				c.want = []wantErr{{"event_time: |x", `stages[3].top_n.event_time: applies with tumbling only (without it the input's window_start and window_end group the rows)`}}
			}
			_, err := Parse("g.yaml", []byte(text), "/srv")
			if c.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v\n%s", err, text)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want errors\n%s", text)
			}
			var want []string
			for _, w := range c.want {
				want = append(want, fmt.Sprintf("g.yaml:%s: %s", posOf(t, text, w.at), w.msg))
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("errors:\n got: %s\nwant: %s", got, strings.Join(want, "\n"))
			}
		})
	}
}

// TestGraphLimits: more stages than maxStages, and a graph with no sources
// or sinks at all.
func TestGraphLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: g\nsources:\n  s: {type: files, url: /in, format: parquet, event_time: ts}\nstages:\n")
	prev := "s"
	for i := range maxStages + 1 {
		fmt.Fprintf(&b, "  - {name: f%d, input: %s, filter: \"true\"}\n", i, prev)
		prev = fmt.Sprintf("f%d", i)
	}
	fmt.Fprintf(&b, "sinks:\n  out: {input: %s, type: files, url: /out, format: parquet}\nstate: {url: /state}\n", prev)
	_, err := Parse("g.yaml", []byte(b.String()), "/")
	if want := "g.yaml:5:3: stages: 65 stages; at most 64"; err == nil || err.Error() != want {
		t.Errorf("65 stages: %v, want %s", err, want)
	}
	// maxStages exactly is fine.
	text := strings.Replace(b.String(), fmt.Sprintf("  - {name: f%d, input: f%d, filter: \"true\"}\n", maxStages, maxStages-1), "", 1)
	text = strings.Replace(text, fmt.Sprintf("input: f%d, type", maxStages), fmt.Sprintf("input: f%d, type", maxStages-1), 1)
	if _, err := Parse("g.yaml", []byte(text), "/"); err != nil {
		t.Errorf("64 stages: %v", err)
	}
	_, err = Parse("g.yaml", []byte("name: g\nsources: {}\nstages: []\nsinks:\nstate: {url: /state}\n"), "/")
	want := "g.yaml:2:10: sources: required: at least one named source, e.g. sources: {clicks: {type: files, url: ..., format: jsonl, ...}}\n" +
		"g.yaml:4:7: sinks: required: at least one named sink, e.g. sinks: {out: {input: <stage>, type: files, url: ..., format: parquet}}"
	if err == nil || err.Error() != want {
		t.Errorf("empty graph:\n got: %v\nwant: %s", err, want)
	}
}

// TestGraphGoBuilt: a graph built in Go validates without positions, gets
// its defaults from SetDefaults, and mixing in the linear form is refused.
func TestGraphGoBuilt(t *testing.T) {
	p := New("g")
	p.Sources = []NamedSource{{Name: "a", Source: Source{Type: SourceFiles, URL: "file:///in/a", Format: CSV,
		Schema: []Field{Col("ts", TypeTimestamp), Col("k", TypeString)}, EventTime: "ts"}}}
	p.Stages = []Stage{
		{Name: "d", Inputs: []string{"a"}, Dedup: &Dedup{Keys: []string{"k"}, Within: time.Hour}},
		{Name: "j", Inputs: []string{"d", "a"}, Join: &Join{LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Window: &JoinWindow{Tumbling: time.Minute}}},
	}
	p.Sinks = []NamedSink{{Name: "out", Input: "j", Sink: Sink{Type: SinkFiles, URL: "file:///out", Format: Parquet}}}
	p.State.URL = "file:///state"
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	p.SetDefaults()
	if p.Sources[0].Source.OnError != OnErrorReject || p.Sources[0].Source.CSV == nil || p.Stages[0].Dedup.Keep != KeepFirst || p.Stages[1].Join.Type != JoinInner {
		t.Errorf("SetDefaults: %+v %+v %+v", p.Sources[0].Source, *p.Stages[0].Dedup, *p.Stages[1].Join)
	}
	g, err := p.Graph()
	if err != nil {
		t.Fatal(err)
	}
	if g.Path("j") != "stages[1]" || g.Linear() || !slices.Equal(g.Downstreams("a"), []string{"d", "j"}) {
		t.Errorf("graph: %s", g.Describe())
	}
	p.Filter("true") // the linear form's builder
	p.Stages[1].Join.Window = nil
	err = p.Validate()
	want := "operators: cannot be used with sources, stages and sinks: a spec is either linear (source, operators, sink) or a graph (sources, stages, sinks)\n" +
		"stages[1].join: needs interval or window: a join without a time bound would keep every row"
	if err == nil || err.Error() != want {
		t.Errorf("Validate:\n got: %v\nwant: %s", err, want)
	}
	p.Operators = nil
	p.Stages[1].Join.Window = &JoinWindow{Tumbling: time.Minute}
	p.Sinks = append(p.Sinks, NamedSink{Name: "out", Input: "d", Sink: Sink{Type: SinkFiles, URL: "file:///out2", Format: Parquet}},
		NamedSink{Name: "j", Input: "j", Sink: Sink{Type: SinkFiles, URL: "file:///out3", Format: Parquet}})
	if err := p.Validate(); err == nil || err.Error() != `sinks.out: duplicate sink name "out" (also sinks.out)` {
		t.Errorf("duplicate sink: %v", err)
	}
	p.Sinks = p.Sinks[:1]
	p.Stages[0].Inputs = []string{"j"}
	if _, err := p.Graph(); err == nil || err.Error() != "stages[0].inputs[0]: cycle: d -> j -> d (a stage cannot read its own output)" {
		t.Errorf("Graph of a cycle: %v", err)
	}
}

// FuzzParseGraph: on graph-form input Parse never panics nor takes a
// second, fails only with ErrInvalid in short lines, and a pipeline it
// accepts passes Validate and has a Graph whose stages come after their
// inputs and whose Describe names every node.
func FuzzParseGraph(f *testing.F) {
	f.Add(graphBase)
	for _, name := range []string{"testdata/graph/enrich.yaml", "testdata/graph/dedup.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add(strings.Replace(graphBase, "inputs: [valid, orders]", "inputs: [per-user, orders]", 1))
	f.Add(strings.Replace(graphBase, "input: clicks", "input: valid", 1))
	f.Add(strings.Replace(graphBase, `filter: "bytes > 0"`, `top_n: {n: 2, order_by: "bytes desc nulls first", tumbling: 1m}`, 1))
	f.Add(strings.Replace(graphBase, `filter: "bytes > 0"`, `lookup: {url: /t, format: csv, schema: {user_id: string}, on: user_id, type: left}`, 1))
	f.Add("name: g\nsources: {a: &s {type: files, url: /a, format: parquet, event_time: t}}\nstages: [{name: b, input: a, filter: x}]\nsinks: {o: {input: b, type: files, url: /o, format: jsonl}}\nstate: {url: /s}\n")
	f.Add("sources:\nstages:\n  - name: [x]\nsinks: {o: {input: {}}}\n")
	f.Fuzz(func(t *testing.T, text string) {
		start := time.Now()
		p, err := Parse("f.yaml", []byte(text), "/base")
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Parse took %v on %d bytes", d, len(text))
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if len(line) > 600 || strings.ContainsAny(line, "\r\x00") {
					t.Fatalf("error line of %d bytes: %q", len(line), line)
				}
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a pipeline Validate rejects: %v", err)
		}
		g, err := p.Graph()
		if err != nil {
			t.Fatalf("Graph of a valid pipeline: %v", err)
		}
		checkTopological(t, g)
		d := g.Describe()
		if d != g.Describe() {
			t.Fatalf("Describe is not deterministic")
		}
		for _, st := range g.Stages {
			if !strings.Contains(d, "stage "+st.Name+": ") {
				t.Fatalf("Describe misses stage %s:\n%s", st.Name, d)
			}
		}
	})
}

// TestWatermarkDelayAndEventTime pins the rules docs/graph.md states for
// each stage kind.
func TestWatermarkDelayAndEventTime(t *testing.T) {
	data, err := os.ReadFile("testdata/graph/enrich.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse("enrich.yaml", data, "/srv")
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Graph()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		delay time.Duration
		et    string
	}{
		{"clicks", 0, "event_time"},
		{"orders", 0, "ts"},
		{"valid", 0, "event_time"},
		{"clicks-orders", 10 * time.Minute, "event_time"}, // interval upper bound
		{"users", 0, "event_time"},
		{"per-user", 30 * time.Second, WindowEventTime},
		{"per-country", 0, WindowEventTime},
		{"top3", 30 * time.Second, WindowEventTime},
	} {
		if got := g.WatermarkDelay(c.name); got != c.delay {
			t.Errorf("WatermarkDelay(%s) = %v, want %v", c.name, got, c.delay)
		}
		if got := g.EventTime(c.name); got != c.et {
			t.Errorf("EventTime(%s) = %q, want %q", c.name, got, c.et)
		}
	}
	if got := g.EventTime(g.Sink("top").Input); got != WindowEventTime {
		t.Errorf("EventTime of sink top's input = %q", got)
	}
	st := g.Stage("clicks-orders")
	st.Join.LeftTime, st.Join.AllowedLateness, st.Join.Interval.Upper = "lt", time.Second, -time.Minute
	if got := g.EventTime("users"); got != "lt" {
		t.Errorf("EventTime after a join with left_time = %q", got)
	}
	if got := g.WatermarkDelay("clicks-orders"); got != time.Second {
		t.Errorf("WatermarkDelay with a negative upper bound = %v, want the lateness alone", got)
	}
	st.Join.Interval, st.Join.Window = nil, &JoinWindow{Tumbling: time.Hour}
	if got, d := g.EventTime("users"), g.WatermarkDelay("clicks-orders"); got != WindowEventTime || d != time.Second {
		t.Errorf("windowed join: EventTime %q, WatermarkDelay %v", got, d)
	}
	dd := &Dedup{Keys: []string{"k"}, Keep: KeepLast, Within: time.Hour, AllowedLateness: time.Minute}
	tn := &TopN{N: 1, Tumbling: time.Hour, AllowedLateness: time.Minute}
	g2 := &Graph{Stages: []Stage{{Name: "d", Inputs: []string{"x"}, Dedup: dd}, {Name: "t", Inputs: []string{"d"}, TopN: tn}}}
	if got := g2.WatermarkDelay("d"); got != time.Hour+time.Minute {
		t.Errorf("dedup keep last: %v", got)
	}
	dd.Keep = KeepFirst
	if got := g2.WatermarkDelay("d"); got != time.Minute {
		t.Errorf("dedup keep first: %v", got)
	}
	g3 := &Graph{Stages: []Stage{{Name: "o", Inputs: []string{"x"}, Over: &Over{OrderBy: "t2", Rows: 10, AllowedLateness: 3 * time.Second}}}, Sources: []NamedSource{{Name: "x", Source: Source{EventTime: "t"}}}}
	if d, et := g3.WatermarkDelay("o"), g3.EventTime("o"); d != 3*time.Second || et != "t" {
		t.Errorf("over: WatermarkDelay %v (want its lateness), EventTime %q (want the input's: order_by does not restamp rows)", d, et)
	}
	if got := g2.WatermarkDelay("t"); got != time.Hour+time.Minute {
		t.Errorf("tumbling top_n: %v", got)
	}
}

// TestDocsGraphExample: the example of docs/graph.md parses, validates and
// has the shape the document describes.
func TestDocsGraphExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/graph.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml example in docs/graph.md")
	}
	p, err := Parse("graph.md", []byte(example), "/srv/p")
	if err != nil {
		t.Fatalf("the example of docs/graph.md: %v", err)
	}
	g, err := p.Graph()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Sources) != 2 || len(g.Stages) != 4 || len(g.Sinks) != 1 || g.Stage("clicks-orders").Join.Type != JoinLeft {
		t.Errorf("example graph:\n%s", g.Describe())
	}
}

// TestNameLimitIsTheOperatorIDLimit: a stage's name becomes its state
// operator id, which manifest refuses beyond MaxOpIDLen.
func TestNameLimitIsTheOperatorIDLimit(t *testing.T) {
	if maxNameLen != manifest.MaxOpIDLen {
		t.Errorf("maxNameLen %d, manifest.MaxOpIDLen %d", maxNameLen, manifest.MaxOpIDLen)
	}
}

func TestParseOrderColumn(t *testing.T) {
	for _, c := range []struct {
		in   string
		want OrderColumn
		err  string
	}{
		{"clicks", OrderColumn{Column: "clicks"}, ""},
		{" clicks  ASC ", OrderColumn{Column: "clicks"}, ""},
		{"clicks desc", OrderColumn{Column: "clicks", Desc: true}, ""},
		{"clicks Desc NULLS first", OrderColumn{Column: "clicks", Desc: true, NullsFirst: true}, ""},
		{"clicks nulls last", OrderColumn{Column: "clicks"}, ""},
		{"clicks nulls", OrderColumn{}, `invalid order "clicks nulls" (want "column [asc|desc] [nulls first|nulls last]", e.g. "clicks desc")`},
		{"clicks desc asc", OrderColumn{}, `invalid order "clicks desc asc" (want "column [asc|desc] [nulls first|nulls last]", e.g. "clicks desc")`},
		{"  ", OrderColumn{}, `empty order column (want "column [asc|desc] [nulls first|nulls last]")`},
	} {
		got, err := ParseOrderColumn(c.in)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("ParseOrderColumn(%q) = %+v, %v; want %+v, %s", c.in, got, err, c.want, c.err)
		}
		if err == nil {
			if back, _ := ParseOrderColumn(got.String()); back != got {
				t.Errorf("%q: String %q parses back to %+v", c.in, got.String(), back)
			}
		}
	}
}
