package dataflow

import (
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/spec"
)

// TestKindTablesAgree: the spec's stage kinds (spec/stagekinds.go) and the
// engine's (kind_<name>.go) are the same kinds, agree on which keep state,
// and every engine kind has the hooks its nature needs.
func TestKindTablesAgree(t *testing.T) {
	for _, name := range spec.StageKinds {
		if kinds[name] == nil {
			t.Errorf("spec stage kind %q has no engine kind: add engine/internal/dataflow/kind_%s.go registering it", name, name)
		}
	}
	for _, name := range kindNames() {
		if !slices.Contains(spec.StageKinds, name) {
			t.Errorf("engine kind %q is not a spec stage kind: add it to spec/stagekinds.go", name)
		}
	}
	for name, k := range kinds {
		if k.name != name {
			t.Errorf("kind registered as %q is named %q", name, k.name)
		}
		if got := spec.KeyedKind(name); got != k.stateful {
			t.Errorf("kind %s: the spec says keyed=%v, the engine stateful=%v", name, got, k.stateful)
		}
		if k.needs == nil {
			t.Errorf("kind %s: no needs: column pruning would read every column of its input", name)
		}
		if k.stateful {
			if k.finalised == (k.held != nil) {
				t.Errorf("kind %s: floe state needs exactly one of finalised and held (finalised=%v, held set=%v)", name, k.finalised, k.held != nil)
			}
			if k.held != nil && k.header == nil {
				t.Errorf("kind %s: held rows but no header for floe state", name)
			}
			if k.copies != nil {
				t.Errorf("kind %s: a keyed stage does not copy columns through (copies is for stateless kinds)", name)
			}
		} else {
			if k.copies == nil {
				t.Errorf("kind %s: a stateless kind needs copies (how window bounds pass through it)", name)
			}
			if k.narrows || k.orderSensitive != nil || k.orderFree != nil || k.evolve != nil || k.finalised || k.held != nil {
				t.Errorf("kind %s: stateless, but has keyed-stage hooks", name)
			}
		}
	}
}

const kindSpec = `name: p
sources:
  a: {type: files, url: in/a, format: jsonl, event_time: ts, schema: {id: int64, v: int64, ts: timestamp}}
stages:
  - name: valid
    input: a
    filter: "id > 0"
  - name: recent
    input: valid
    over: {key: [id], rows: 2, aggregates: {n: "sum(v)"}}
sinks:
  out: {input: recent, type: files, url: out, format: jsonl}
state: {url: st}
`

// TestUnknownKindNamesStage: a stage whose kind the engine has not
// registered is refused by the compiler with an error naming the stage,
// its place in the spec (file, line, column and path) and the kinds the
// engine runs, rather than compiled as something else.
func TestUnknownKindNamesStage(t *testing.T) {
	p, schemas := parseGraph(t, "p.yaml", kindSpec)
	if _, err := CompileGraph(p, schemas, nil); err != nil {
		t.Fatalf("with every kind registered: %v", err)
	}
	over := kinds[spec.KindOver]
	delete(kinds, spec.KindOver)
	t.Cleanup(func() { kinds[spec.KindOver] = over })
	_, err := CompileGraph(p, schemas, nil)
	if err == nil {
		t.Fatal("compiled a stage of an unregistered kind")
	}
	for _, want := range []string{"p.yaml:8:5: stages[1]", "stage recent", `stage kind "over" is not one the engine runs`, "(dedup, filter, join, lookup, project, top_n, window)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// parseGraph parses the spec text (as file name) and returns it with its
// sources' declared schemas, by source name.
func parseGraph(t *testing.T, name, text string) (*spec.Pipeline, map[string]*arrow.Schema) {
	t.Helper()
	p, err := spec.Parse(name, []byte(text), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*arrow.Schema{}
	for _, ns := range p.Sources {
		sc, err := SourceSchema(&spec.Pipeline{Source: ns.Source})
		if err != nil {
			t.Fatal(err)
		}
		schemas[ns.Name] = sc
	}
	return p, schemas
}
