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
	if p.Source.Type != "" || p.Operators != nil || p.Sink != (Sink{}) {
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
		name     string
		up, down []string
		path     string
		et       string
	}{
		{"clicks", nil, []string{"valid"}, "sources.clicks", "ts"},
		{"orders", nil, []string{"joined"}, "sources.orders", "ts"},
		{"valid", []string{"clicks"}, []string{"joined"}, "stages[0]", "ts"},
		{"joined", []string{"valid", "orders"}, []string{"per-user"}, "stages[1]", "ts"},
		{"per-user", []string{"joined"}, []string{"out"}, "stages[2]", WindowEventTime},
		{"out", []string{"per-user"}, nil, "sinks.out", WindowEventTime},
		{"nope", nil, nil, "", ""},
	} {
		if got := g.Upstreams(c.name); !slices.Equal(got, c.up) {
			t.Errorf("Upstreams(%s) = %v, want %v", c.name, got, c.up)
		}
		if got := g.Downstreams(c.name); !slices.Equal(got, c.down) {
			t.Errorf("Downstreams(%s) = %v, want %v", c.name, got, c.down)
		}
		if got := g.Path(c.name); got != c.path {
			t.Errorf("Path(%s) = %q, want %q", c.name, got, c.path)
		}
		if got := g.EventTime(c.name); got != c.et {
			t.Errorf("EventTime(%s) = %q, want %q", c.name, got, c.et)
		}
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
			if len(g.Sinks) != 1 || g.Sinks[0].Name != "sink" || g.Sinks[0].Input != prev || g.Sinks[0].Sink != p.Sink {
				t.Errorf("sinks = %+v", g.Sinks)
			}
			if g.EventTime("sink") == "" {
				t.Errorf("no event time at the sink")
			}
		})
	}
}

// TestLegacyNameClash: an operator id "source" or "sink" moves the
// normalised source or sink to the next free name.
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
	if g.Sources[0].Name != "source-2" || g.Sinks[0].Name != "sink-2" || !g.Linear() || g.Stages[0].Inputs[0] != "source-2" {
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
				{"name: |orders", `stages[0].name: duplicate name "orders" (also sources.orders); sources, stages and sinks share one namespace`},
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
		{"join unknown field", "join: {on", "join: {lateness: 1m, on",
			[]wantErr{{"join: {|lateness", `stages[1].join.lateness: unknown field (allowed: type, on, left_on, right_on, left_time, right_time, interval, window, allowed_lateness, right_prefix)`}}},
		{"no kind", `    filter: "bytes > 0"` + "\n", "",
			[]wantErr{{"- |name: valid", `stages[0]: needs one of filter, project, window, join, lookup, top_n, dedup`}}},
		{"two kinds", `    filter: "bytes > 0"`, `    filter: "bytes > 0"` + "\n    dedup: {key: user_id, within: 1h}",
			[]wantErr{{"- |name: valid", `stages[0]: sets more than one of filter, project, window, join, lookup, top_n, dedup; use one list item per stage`}}},
		{"misspelt stage field", "input: clicks", "inptu: clicks",
			[]wantErr{
				{"- |name: valid", `stages[0].input: required: name the source or stage this stage reads`},
				{"|inptu", `stages[0].inptu: unknown field (did you mean input?)`},
			}},
		{"window id in a stage", "window: {key", "window: {id: w, key",
			[]wantErr{{"id: |w", `stages[2].window.id: a stage's id is its name; leave window.id out`}}},
		{"late_url on a filter", `    filter: "bytes > 0"`, `    filter: "bytes > 0"` + "\n    late_url: /late",
			[]wantErr{{"late_url: |/late", `stages[0].late_url: a filter stage finds no rows late (window, join, top_n and dedup stages do)`}}},
		{"late_url on a source", "event_time: ts}\n  orders", "event_time: ts, late_url: /late}\n  orders",
			[]wantErr{{"late_url: |/late", `sources.clicks.late_url: in the graph form late rows belong to the stage that finds them late: set late_url on the window, join, top_n or dedup stage`}}},
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
