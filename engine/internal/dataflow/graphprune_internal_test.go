package dataflow

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/spec"
)

const pruneSpec = `
name: p
sources:
  a: {type: files, url: in/a, format: jsonl, event_time: ts,
      schema: {id: int64, cat: int64, ts: timestamp, pad: string}}
  b: {type: files, url: in/b, format: jsonl, event_time: ts, VALIDATE
      schema: {aid: int64, price: int64, ts: timestamp, pad: string}}
stages:
  - name: j
    inputs: [b, a]
    join: {left_on: [aid], right_on: [id], interval: {lower: 10s, upper: 0s}}
    LATE
  - name: after
    input: j
    AFTER
sinks:
  out: {input: after, type: files, url: out, format: jsonl}
state: {url: st}
`

// TestGraphPruningRules: which stages are narrowed, and what each source
// decodes.
func TestGraphPruningRules(t *testing.T) {
	window := `window: {key: [cat], tumbling: 10s, aggregates: {n: "count()", s: "sum(price)"}}`
	for _, c := range []struct {
		name, late, after string
		narrow            bool   // j holds fewer columns than its inputs
		srcB              string // the columns source b decodes
		validate          string
	}{
		{"window", "", window, true, "aid,price,ts", ""},
		{"window with first", "", `window: {key: [cat], tumbling: 10s, aggregates: {f: "first(price)"}}`, false, "aid,price,ts,pad", ""},
		{"top_n ties by arrival", "", `top_n: {n: 2, key: [cat], tumbling: 10s, order_by: [price desc]}`, false, "aid,price,ts,pad", ""},
		{"late rows written whole", "late_url: late", window, false, "aid,price,ts,pad", ""},
		{"project of a renamed column", "", `project: {cat: cat, bts: ts, ats: right_ts}`, true, "aid,ts", ""},
		{"validate all decodes every column", "", window, true, "aid,price,ts,pad", "validate: all,"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.NewReplacer("LATE", c.late, "AFTER", c.after, "VALIDATE", c.validate).Replace(pruneSpec)
			p, schemas := parseGraph(t, "p.yaml", text)
			pl, err := CompileGraph(p, schemas, nil)
			if err != nil {
				t.Fatal(err)
			}
			gp := pl.Graph
			j := gp.ByName["j"]
			if got := j.Fp != gp.FullFP["j"]; got != c.narrow {
				t.Errorf("join narrowed = %v, want %v", got, c.narrow)
			}
			var cols []string
			for _, f := range gp.Sources["b"].Out.Fields() {
				cols = append(cols, f.Name)
			}
			if got := strings.Join(cols, ","); got != c.srcB {
				t.Errorf("source b decodes %s, want %s", got, c.srcB)
			}
			full, err := CompileGraphOn(p, mustGraph(t, p), schemas, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if pl.Hash != full.Hash || !pl.Graph.Sink.Out.Equal(full.Graph.Sink.Out) {
				t.Errorf("pruned plan: hash %s sink %s, unpruned: %s %s", pl.Hash, pl.Graph.Sink.Out, full.Hash, full.Graph.Sink.Out)
			}
		})
	}
}

func mustGraph(t *testing.T, p *spec.Pipeline) *spec.Graph {
	t.Helper()
	g, err := p.Graph()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGraphDictKeys: a Parquet source read only by a window is decoded
// with the window's string keys as dictionaries; the window's state
// layout and output, and the plan hash, are those of plain keys.
func TestGraphDictKeys(t *testing.T) {
	const text = `
name: d
sources:
  a: {type: files, url: in/a, format: parquet, event_time: ts,
      schema: {user: string, page: string, ts: timestamp, bytes: int64}}
  b: {type: files, url: in/b, format: parquet, event_time: ts,
      schema: {user: string, ts: timestamp}}
stages:
  - name: w
    input: a
    window: {key: [user], tumbling: 1m, aggregates: {n: "count()", pages: "count_distinct(page)"}}
  - name: f
    input: b
    filter: "user != 'x'"
  - name: v
    input: f
    window: {key: [user], tumbling: 1m, aggregates: {n: "count()"}}
  - name: both
    inputs: [w, v]
    join: {on: [user], window: {tumbling: 1m}}
sinks:
  out: {input: both, type: files, url: out, format: parquet}
state: {url: st}
`
	p, schemas := parseGraph(t, "d.yaml", text)
	pl, err := CompileGraph(p, schemas, nil)
	if err != nil {
		t.Fatal(err)
	}
	full, err := CompileGraphOn(p, mustGraph(t, p), schemas, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gp := pl.Graph
	if got := gp.Sources["a"].Out.Field(0).Type; !arrow.TypeEqual(got, DictKeyType) {
		t.Errorf("source a decodes user as %s, want %s", got, DictKeyType)
	}
	if got := gp.Sources["b"].Out.Field(0).Type; got.ID() != arrow.STRING {
		t.Errorf("source b (read by a filter) decodes user as %s, want plain", got)
	}
	for _, n := range full.Graph.Nodes {
		m := gp.ByName[n.Name]
		if n.Fp != m.Fp || n.Kind != "source" && !n.Out.Equal(m.Out) {
			t.Errorf("stage %s: fp %s out %s, want %s %s", n.Name, m.Fp, m.Out, n.Fp, n.Out)
		}
	}
	if pl.Hash != full.Hash {
		t.Errorf("hash %s, want %s", pl.Hash, full.Hash)
	}
}
