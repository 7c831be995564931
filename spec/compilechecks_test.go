package spec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

const compileBase = `name: clicks-per-user
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
operators:
  - filter: "bytes > 0"
  - window:
      key: [user_id]
      tumbling: 1m
      aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}
sink: {type: files, url: ../../out/clicks, format: parquet}
state: {url: ../../.floe, parallelism: 4}
`

// compilePlan compiles p's operators against its source schema the way
// engine/plan.go does (expr.CompileFilter, expr.CompileProjection,
// operators.ParseAggregate, operators.NewWindow) and returns the first error.
func compilePlan(p *spec.Pipeline) error {
	fields := make([]formats.Field, len(p.Source.Schema))
	for i, f := range p.Source.Schema {
		fields[i] = formats.Field{Name: f.Name, Type: string(f.Type)}
	}
	cur, err := formats.SchemaFromFields(fields)
	if err != nil {
		return err
	}
	for i, op := range p.Operators {
		switch {
		case op.Filter != nil:
			if _, err := expr.CompileFilter(op.Filter.Expr, cur); err != nil {
				return fmt.Errorf("operators[%d].filter: %w", i, err)
			}
		case op.Project != nil:
			items := make([]expr.ProjectItem, len(op.Project.Columns))
			for j, c := range op.Project.Columns {
				items[j] = expr.ProjectItem{Name: c.Name, Expr: c.Expr}
			}
			pr, err := expr.CompileProjection(items, cur)
			if err != nil {
				return fmt.Errorf("operators[%d].project: %w", i, err)
			}
			cur = pr.Schema()
		case op.Window != nil:
			w := op.Window
			ws := operators.WindowSpec{ID: op.ID, Keys: w.Key, EventTime: p.Source.EventTime, AllowedLateness: w.AllowedLateness}
			switch {
			case w.Tumbling > 0:
				ws.Kind, ws.Size = operators.Tumbling, w.Tumbling
			case w.Sliding != nil:
				ws.Kind, ws.Size, ws.Slide = operators.Sliding, w.Sliding.Size, w.Sliding.Slide
			case w.Session != nil:
				ws.Kind, ws.Gap = operators.Session, w.Session.Gap
			}
			for _, a := range w.Aggregates {
				as, err := operators.ParseAggregate(a.Name, fmt.Sprintf("%s(%s)", a.Func, a.Column))
				if err != nil {
					return fmt.Errorf("operators[%d].window: %w", i, err)
				}
				ws.Aggregates = append(ws.Aggregates, as)
			}
			win, err := operators.NewWindow(ws, cur, p.State.MaxParallelism)
			if err != nil {
				return fmt.Errorf("operators[%d].window: %w", i, err)
			}
			cur = win.OutputSchema()
		}
	}
	return nil
}

// TestMovedChecksReportAtCompile: the checks spec.Validate leaves to compile
// (they need the schema flowing through the operators) pass Validate and are
// reported, each with a clear message, by expr or operators. One case per
// check that spec/validate.go used to make itself.
func TestMovedChecksReportAtCompile(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"filter unknown column", `"bytes > 0"`, `"byts > 0"`,
			`operators[0].filter: filter "byts > 0": unknown column "byts" (columns: event_time, user_id, page, bytes); did you mean "bytes"? (at 1:1)`},
		{"project unknown column", `- filter: "bytes > 0"`, `- project: {event_time: event_time, user_id: usr_id}`,
			`unknown column "usr_id" (columns: event_time, user_id, page, bytes); did you mean "user_id"?`},
		{"unknown key column", "key: [user_id]", "key: [user_id, usr]",
			`operators[1].window: window window: key column "usr" not found (or ambiguous) in input schema (columns: event_time, user_id, page, bytes)`},
		{"key as string", "key: [user_id]", "key: usr_id",
			`operators[1].window: window window: key column "usr_id" not found (or ambiguous) in input schema (did you mean user_id?)`},
		{"unknown aggregate column", `"sum(bytes)"`, `"sum(byte)"`,
			`operators[1].window: window window: aggregate total_bytes = sum(byte): column "byte" not found (or ambiguous) in input schema (did you mean bytes?)`},
		{"sum of a string", `"sum(bytes)"`, `"sum(page)"`,
			`operators[1].window: window window: aggregate total_bytes = sum(page): column "page" has type utf8; sum needs int32, int64 or float64`},
		{"aggregate named like key", `clicks: "count()"`, `user_id: "count()"`,
			`operators[1].window: window window: aggregate: column name "user_id" already used (key)`},
		{"aggregate named like a reserved column", `clicks: "count()"`, `window_start: "count()"`,
			`operators[1].window: window window: aggregate: column name "window_start" already used (reserved)`},
		{"sliding not a multiple", "tumbling: 1m", "sliding: {size: 1m, slide: 7s}",
			`operators[1].window: window window: sliding size 1m0s is not a multiple of slide 7s`},
		{"sliding slide larger", "tumbling: 1m", "sliding: {size: 1m, slide: 2m}",
			`operators[1].window: window window: sliding slide 2m0s is larger than size 1m0s`},
		{"project drops event time", `- filter: "bytes > 0"`, `- project: {user_id: user_id, n: bytes * 2}`,
			`operators[1].window: window window: event time column "event_time" not found (or ambiguous) in input schema (columns: user_id, n); a projection before the window must keep it`},
		{"project keeps types", `- filter: "bytes > 0"`, `- project: {event_time: event_time, user_id: user_id, bytes: page}`,
			`operators[1].window: window window: aggregate total_bytes = sum(bytes): column "bytes" has type utf8; sum needs int32, int64 or float64`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(compileBase, c.old) {
				t.Fatalf("old %q not in base", c.old)
			}
			text := strings.Replace(compileBase, c.old, c.new, 1)
			p, err := spec.Parse("clicks.yaml", []byte(text), "/srv/p")
			if err != nil {
				t.Fatalf("Parse: %v (this check is compile's now)", err)
			}
			err = compilePlan(p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("compile error:\n got: %v\nwant: %s", err, c.want)
			}
		})
	}
	p, err := spec.Parse("clicks.yaml", []byte(compileBase), "/srv/p")
	if err != nil {
		t.Fatal(err)
	}
	if err := compilePlan(p); err != nil {
		t.Errorf("base spec: %v", err)
	}
}

// TestGoBuiltDuplicateAggregate: a Go-built window with two aggregates of
// one name passes Validate (a spec file cannot say it: YAML keys are
// unique) and NewWindow rejects it.
func TestGoBuiltDuplicateAggregate(t *testing.T) {
	p := spec.New("dup").
		FromFiles("file:///in", spec.JSONL, spec.Col("ts", spec.TypeTimestamp), spec.Col("k", spec.TypeString)).
		EventTime("ts", 0).
		Window(spec.NewTumbling(60e9).By("k").Agg("n", spec.Count, "").Agg("n", spec.Count, "")).
		ToFiles("file:///out", spec.Parquet).
		StateAt("file:///state", 1)
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := compilePlan(p); err == nil || !strings.Contains(err.Error(), `column name "n" already used (aggregate)`) {
		t.Errorf("compile: %v, want the duplicate name reported", err)
	}
}

// TestAggFuncConstantsMatchGrammar: spec's exported function constants are
// exactly the functions of the one aggregate grammar.
func TestAggFuncConstantsMatchGrammar(t *testing.T) {
	consts := []spec.AggFunc{spec.Count, spec.Sum, spec.Min, spec.Max, spec.Avg, spec.CountDistinct, spec.First, spec.Last}
	var names []string
	for _, f := range consts {
		a, err := spec.ParseAggregate("a", string(f)+"(x)")
		if err != nil || a.Func != f {
			t.Errorf("ParseAggregate(%s(x)) = %+v, %v", f, a, err)
		}
		names = append(names, string(f))
	}
	if _, err := spec.ParseAggregate("a", "median(x)"); err == nil ||
		!strings.Contains(err.Error(), "(allowed: "+strings.Join(names, ", ")+")") {
		t.Errorf("unknown function error %v does not list exactly %v", err, names)
	}
}
