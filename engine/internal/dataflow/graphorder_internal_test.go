package dataflow

import (
	"slices"
	"strings"
	"testing"
)

// TestMarkCanonical: a keyed stage hands its rows on sorted by their values
// when a reader can depend on their order (top_n, a window with first or
// over floats, a window writing late rows, a sink), and as its subtasks
// produced them when only order-free windows read them.
func TestMarkCanonical(t *testing.T) {
	const chained = `
name: p
sources:
  a: {type: files, url: in/a, format: jsonl, event_time: ts, schema: {id: int64, cat: int64, ts: timestamp, pad: string}}
  b: {type: files, url: in/b, format: jsonl, event_time: ts, schema: {aid: int64, price: int64, ts: timestamp, pad: string}}
stages:
  - name: j
    inputs: [b, a]
    join: {left_on: [aid], right_on: [id], interval: {lower: 10s, upper: 0s}}
  - name: f
    input: j
    project: {cat: cat, price: price, fp: "price * 1.5", pad: pad, ts: ts}
  - name: w
    input: f
    WINDOW
  - name: t
    input: w
    top_n: {n: 2, key: [cat], order_by: [n desc]}
sinks:
  out: {input: t, type: files, url: out, format: jsonl}
state: {url: st}
`
	for _, c := range []struct {
		name       string
		window     string
		jCanonical bool
	}{
		{"count and integer sums", `window: {key: [cat], tumbling: 10s, aggregates: {n: "count()", s: "sum(price)", m: "max(price)", d: "count_distinct(pad)"}}`, false},
		{"sliding", `window: {key: [cat], sliding: {size: 20s, slide: 10s}, aggregates: {n: "count()", a: "avg(price)"}}`, false},
		{"first", `window: {key: [cat], tumbling: 10s, aggregates: {n: "count()", f: "first(price)"}}`, true},
		{"sum of floats", `window: {key: [cat], tumbling: 10s, aggregates: {n: "count()", s: "sum(fp)"}}`, true},
		{"max of floats", `window: {key: [cat], tumbling: 10s, aggregates: {n: "count()", s: "max(fp)"}}`, true},
		{"session", `window: {key: [cat], session: {gap: 10s}, aggregates: {n: "count()"}}`, true},
		{"late rows written", "late_url: late\n    window: {key: [cat], tumbling: 10s, aggregates: {n: \"count()\"}}", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(chained, "WINDOW", c.window, 1)
			p, schemas := parseGraph(t, "p.yaml", text)
			pl, err := CompileGraph(p, schemas, nil)
			if err != nil {
				t.Fatal(err)
			}
			gp := pl.Graph
			if got := gp.ByName["j"].Canonical; got != c.jCanonical {
				t.Errorf("join canonical = %v, want %v", got, c.jCanonical)
			}
			// The window feeds a top_n (ties by arrival); the top_n feeds
			// only the sink and no keyed stage.
			if !gp.ByName["w"].Canonical {
				t.Error("window feeding a top_n is not canonical")
			}
			if gp.ByName["t"].Canonical {
				t.Error("top_n feeding only the sink is canonical")
			}
		})
	}
}

// TestFiltersAfter: the filters a canonical stage's rows go through first
// are the chain of filters each the only reader of the node before; a
// project, a second reader or a sink ends the chain.
func TestFiltersAfter(t *testing.T) {
	const text = `
name: p
sources:
  a: {type: files, url: in/a, format: jsonl, event_time: ts, schema: {id: int64, cat: int64, ts: timestamp}}
  b: {type: files, url: in/b, format: jsonl, event_time: ts, schema: {aid: int64, price: int64, ts: timestamp}}
stages:
  - name: j
    inputs: [b, a]
    join: {left_on: [aid], right_on: [id], interval: {lower: 10s, upper: 0s}}
  - name: f1
    input: j
    filter: "price > 10"
  - name: f2
    input: f1
    filter: "cat != 3"
  - name: p
    input: f2
    project: {cat: cat, price: price, ts: ts}
  - name: t
    input: p
    top_n: {n: 2, key: [cat], order_by: [price desc], tumbling: 10s}
  - name: t2
    input: t
    filter: "price > 20"
  - name: g
    input: t2
    top_n: {n: 1, key: [cat], order_by: [price desc], rank_column: r2}
  - name: h
    input: t2
    filter: "price > 30"
  - name: k
    input: h
    top_n: {n: 1, key: [cat], order_by: [price desc], rank_column: r3}
sinks:
  out: {input: g, type: files, url: out, format: jsonl}
  more: {input: k, type: files, url: more, format: jsonl}
state: {url: st}
`
	p, schemas := parseGraph(t, "p.yaml", text)
	pl, err := CompileGraph(p, schemas, nil)
	if err != nil {
		t.Fatal(err)
	}
	gp := pl.Graph
	names := func(ns []*Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	for stage, want := range map[string][]string{
		"j": {"f1", "f2"}, // then a project
		"t": {"t2"},       // t2 has two readers: it ends the chain, its rows are set
		"g": nil,          // written by a sink
	} {
		if got := names(gp.FiltersAfter(gp.ByName[stage])); !slices.Equal(got, want) {
			t.Errorf("FiltersAfter(%s) = %v, want %v", stage, got, want)
		}
	}
}
