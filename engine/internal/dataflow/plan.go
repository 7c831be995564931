package dataflow

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// stage is one stateless operator (filter or projection) compiled against
// its input schema.
type stage struct {
	id     string
	Filter *expr.Expr
	proj   *expr.Projection
	out    *arrow.Schema
}

// Apply runs the stage on one batch; dropped counts rows a filter removed.
func (s *stage) Apply(rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, int64, error) {
	if s.Filter != nil {
		out, dropped, err := expr.Filter(s.Filter, rec, mem)
		if err != nil {
			return nil, 0, fmt.Errorf("operator %s: %w", s.id, err)
		}
		return out, dropped, nil
	}
	out, err := s.proj.Apply(rec, mem)
	if err != nil {
		return nil, 0, fmt.Errorf("operator %s: %w", s.id, err)
	}
	return out, 0, nil
}

// Plan is a pipeline compiled against its source schema: stateless stages
// before the (optional) keyed window, the window, stages after it.
type Plan struct {
	spec     *spec.Pipeline
	Source   *arrow.Schema
	pre      []*stage
	window   *operators.WindowSpec
	windowIn *arrow.Schema // schema the window reads (after pre)
	keyCols  []int         // window key columns in windowIn
	post     []*stage
	Output   *arrow.Schema
	Ops      []manifest.OpPlan // stateful operators, for _generation.json
	// Declared is the source schema as declared or inferred, before
	// projection pushdown pruned it; the plan's identity is computed on it.
	Declared *arrow.Schema
	Hash     string // hashPlan(encodePlan(...)): the whole plan, stateless parts too
	// Graph is the compiled graph of a graph-form pipeline (graph.go); its
	// linear parts (pre, window, post) are then empty.
	Graph *GraphPlan
	// SinkParts and extraParts are the Hive partitioning of the first sink
	// and of the further sinks (nil: not partitioned), engine/internal/sinks/hive.go.
	SinkParts  *HiveParts
	extraParts []*HiveParts
}

// dictKeyType is the type a window's string key column is decoded as
// when the plan uses dictionary keys (graphprune.go dictSchemas).
var DictKeyType = formats.DictStringType

// SourceSchema returns the declared source schema (nil: infer from Parquet).
func SourceSchema(p *spec.Pipeline) (*arrow.Schema, error) {
	if len(p.Source.Schema) == 0 {
		return nil, nil
	}
	fields := make([]formats.Field, len(p.Source.Schema))
	for i, f := range p.Source.Schema {
		fields[i] = formats.Field{Name: f.Name, Type: string(f.Type)}
	}
	s, err := formats.SchemaFromFields(fields)
	if err != nil {
		return nil, fmt.Errorf("source.schema: %w", err)
	}
	return s, nil
}

// Compile builds the plan of p over the source schema src, then prunes the
// source to the columns the plan reads (projection pushdown: a Parquet
// column nobody reads is never decoded) and compiles again over that.
func Compile(p *spec.Pipeline, src *arrow.Schema, xo ...expr.Option) (*Plan, error) {
	full, err := CompileOn(p, src, xo...)
	if err != nil {
		return nil, err
	}
	need := full.neededColumns()
	switch {
	case len(need) == src.NumFields():
		return full, nil
	case p.Source.Format == spec.CSV && p.Source.CSV != nil && !p.Source.CSV.Header:
		return full, nil // positional CSV columns cannot be pruned
	case p.Source.LateURL != "":
		return full, nil // late rows are written whole
	case p.Source.Validate == "all":
		return full, nil // every declared column is decoded, so every one is checked
	}
	var fields []arrow.Field
	for _, f := range src.Fields() {
		if need[f.Name] {
			fields = append(fields, f)
		}
	}
	md := src.Metadata()
	pruned, err := CompileOn(p, arrow.NewSchema(fields, &md), xo...)
	if err != nil {
		return nil, fmt.Errorf("internal error: plan over pruned columns: %w", err)
	}
	pruned.Hash, pruned.Declared = full.Hash, full.Declared // the plan's identity is that of the declared schema
	return pruned, nil
}

// neededColumns walks the plan backwards and returns the source columns it
// reads.
func (pl *Plan) neededColumns() map[string]bool {
	need := map[string]bool{}
	all := func(s *arrow.Schema) {
		for _, f := range s.Fields() {
			need[f.Name] = true
		}
	}
	if pl.window != nil {
		need[pl.window.EventTime] = true
		for _, k := range pl.window.Keys {
			need[k] = true
		}
		for _, a := range pl.window.Aggregates {
			if a.Column != "" {
				need[a.Column] = true
			}
		}
	} else if len(pl.pre) > 0 {
		all(pl.pre[len(pl.pre)-1].out)
	} else {
		all(pl.Source)
	}
	for i := len(pl.pre) - 1; i >= 0; i-- {
		st := pl.pre[i]
		if st.Filter != nil {
			for _, c := range st.Filter.Columns() {
				need[c] = true
			}
			continue
		}
		need = map[string]bool{}
		for _, c := range st.proj.Columns() {
			need[c] = true
		}
	}
	need[pl.spec.Source.EventTime] = true
	return need
}

// CompileOn builds the plan of p over the source schema src.
func CompileOn(p *spec.Pipeline, src *arrow.Schema, xo ...expr.Option) (*Plan, error) {
	pl := &Plan{spec: p, Source: src, Declared: src}
	cur := src
	for i, op := range p.Operators {
		id := opID(op, i)
		switch {
		case op.Filter != nil:
			e, err := expr.CompileFilter(op.Filter.Expr, cur, xo...)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Where(fmt.Sprintf("operators[%d].filter", i)), err)
			}
			st := &stage{id: id, Filter: e, out: cur}
			pl.addStage(st)
		case op.Project != nil:
			items := make([]expr.ProjectItem, len(op.Project.Columns))
			for j, c := range op.Project.Columns {
				items[j] = expr.ProjectItem{Name: c.Name, Expr: c.Expr}
			}
			pr, err := expr.CompileProjection(items, cur, xo...)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Where(fmt.Sprintf("operators[%d].project", i)), err)
			}
			st := &stage{id: id, proj: pr, out: pr.Schema()}
			pl.addStage(st)
			cur = pr.Schema()
		case op.Window != nil:
			if pl.window != nil {
				return nil, fmt.Errorf("operators[%d] (%s): only one window operator per pipeline is supported", i, id)
			}
			ws, err := WindowSpec(id, op.Window, p.Source.EventTime)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Where(fmt.Sprintf("operators[%d].window", i)), err)
			}
			w, err := operators.NewWindow(ws, cur, MaxParallelism(p))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Where(fmt.Sprintf("operators[%d].window", i)), err)
			}
			pl.window, pl.windowIn = &ws, cur
			for _, k := range ws.Keys {
				pl.keyCols = append(pl.keyCols, cur.FieldIndices(k)[0])
			}
			sp, err := operators.MarshalStatePlan(ws, cur)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Where(fmt.Sprintf("operators[%d].window", i)), err)
			}
			pl.Ops = append(pl.Ops, manifest.OpPlan{ID: id, Kind: "window", StateSchema: w.StateFingerprint(), StatePlan: string(sp)})
			cur = w.OutputSchema()
		default:
			return nil, fmt.Errorf("operators[%d]: no operator kind set", i)
		}
	}
	pl.Output = cur
	pl.Hash = HashPlan(EncodePlan(p, src))
	if err := pl.partitionSinks(p); err != nil {
		return nil, err
	}
	return pl, nil
}

func (pl *Plan) addStage(s *stage) {
	if pl.window == nil {
		pl.pre = append(pl.pre, s)
	} else {
		pl.post = append(pl.post, s)
	}
}

func MaxParallelism(p *spec.Pipeline) int {
	if p.State.MaxParallelism > 0 {
		return p.State.MaxParallelism
	}
	return spec.DefaultMaxParallelism
}

func WindowSpec(id string, w *spec.Window, eventTime string) (operators.WindowSpec, error) {
	ws := operators.WindowSpec{ID: id, Keys: w.Key, EventTime: eventTime, AllowedLateness: w.AllowedLateness}
	switch {
	case w.Tumbling > 0:
		ws.Kind, ws.Size = operators.Tumbling, w.Tumbling
	case w.Sliding != nil:
		ws.Kind, ws.Size, ws.Slide = operators.Sliding, w.Sliding.Size, w.Sliding.Slide
	case w.Session != nil:
		ws.Kind, ws.Gap = operators.Session, w.Session.Gap
	default:
		return ws, fmt.Errorf("window needs one of tumbling, sliding or session")
	}
	for _, a := range w.Aggregates {
		text := fmt.Sprintf("%s(%s)", a.Func, a.Column)
		as, err := operators.ParseAggregate(a.Name, text)
		if err != nil {
			return ws, err
		}
		as.RenamedFrom = a.RenamedFrom
		ws.Aggregates = append(ws.Aggregates, as)
	}
	return ws, nil
}

// StageMigration is how one graph window stage's restored state reaches
// the plan's layout: through a planned evolution (ev) or a chain of
// registered migrations between state format versions (chain).
type StageMigration struct {
	Ev    *operators.Evolution
	Chain []StateMigration
}

// EvolveGraph is evolve for a graph plan: every window stage's state either
// has the same layout or migrates to the stage's (the linear window's rules
// per stage: a chain of the registered migrations regs when the state
// format version changed, migrationChain; else operators.PlanStateEvolution),
// and the other stateful stages must correspond exactly (compatible). It
// returns how each window stage migrates; a stage whose old generation
// recorded no state plan (written before graph windows recorded theirs) and
// kept its format version has nothing to migrate from: the layouts must
// match. A window behind the hidden-time operator (graphwin.go) evolves like
// any other as long as its time rule (what timeRule appends to the
// fingerprint) is the one the state was written under: the rule decides
// which window a row belongs to, so state written under another one is
// refused.
func EvolveGraph(old []manifest.OpPlan, pl *Plan, regs []StateMigration) (map[string]*StageMigration, error) {
	prevOf := map[string]manifest.OpPlan{}
	for _, o := range old {
		prevOf[o.ID] = o
	}
	out := map[string]*StageMigration{}
	ops := slices.Clone(pl.Ops)
	for i, o := range ops {
		prev, ok := prevOf[o.ID]
		nd := pl.Graph.ByName[o.ID]
		kd := kinds[o.Kind]
		if !ok || nd == nil || kd == nil || kd.evolve == nil || prev.Kind != o.Kind {
			continue // compatible decides
		}
		chain, err := chainOf(old, pl.Ops, o.ID, regs)
		if err != nil {
			return nil, err
		}
		if chain != nil {
			out[o.ID] = &StageMigration{Chain: chain}
			ops[i].StateSchema = prev.StateSchema // migrated: the layouts correspond
			continue
		}
		if prev.StatePlan == "" || o.StatePlan == "" {
			continue // nothing to migrate from: compatible decides
		}
		m, err := kd.evolve(nd, prev, o) // kind_<name>.go
		if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		out[o.ID] = m
		ops[i].StateSchema = prev.StateSchema // migrated: the layouts correspond
	}
	if err := Compatible(old, ops); err != nil {
		return nil, err
	}
	return out, nil
}

// FirstChain is the first chain of registered migrations of a graph plan's
// window stages (nil: none migrates so).
func FirstChain(pl *Plan, stages map[string]*StageMigration) []StateMigration {
	if pl.Graph == nil {
		return nil
	}
	for _, n := range pl.Graph.State {
		if m := stages[n.Name]; m != nil && m.Chain != nil {
			return m.Chain
		}
	}
	return nil
}

// WindowOf returns the window operator of a window stage's op (behind the
// hidden-time operator or not), nil for another operator.
func WindowOf(op operators.Stateful) *operators.Window {
	if h, ok := op.(*hiddenTimeOp); ok {
		op = h.Stateful
	}
	w, _ := op.(*operators.Window)
	return w
}

// StatePlanOf is the state plan a graph stage's generation record keeps for
// its operator op (operators.MarshalStatePlan of its window): "" for another
// operator, and for a window whose plan cannot be described (a column type
// without a stable name), which then cannot migrate but runs as before.
func StatePlanOf(op operators.Stateful) string {
	w := WindowOf(op)
	if w == nil {
		return ""
	}
	sp, err := operators.MarshalStatePlan(w.StateSpec(), plainSchema(w.InputSchema()))
	if err != nil {
		return ""
	}
	return string(sp)
}

// plainSchema is s with dictionary columns as their value type: a window
// reading dictionary keys (dictKeyType, decoded so for speed) holds and
// plans its state as for the plain strings, so whether its source is
// decoded with dictionaries never changes its state plan.
func plainSchema(s *arrow.Schema) *arrow.Schema {
	fields := slices.Clone(s.Fields())
	n := 0
	for i, f := range fields {
		if d, ok := f.Type.(*arrow.DictionaryType); ok {
			fields[i].Type = d.ValueType
			n++
		}
	}
	if n == 0 {
		return s
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md)
}

// Compatible reports whether state written under plan old can be restored
// by the stateful operators of plan ops; the error names the operator.
func Compatible(old, ops []manifest.OpPlan) error {
	byID := map[string]manifest.OpPlan{}
	for _, o := range old {
		byID[o.ID] = o
	}
	for _, o := range ops {
		prev, ok := byID[o.ID]
		if !ok {
			if len(old) > 0 {
				return fmt.Errorf("operator %q is new and the old plan's stateful operators (%v) have no counterpart; "+
					"keep the operator id (set `id:`) or start a new pipeline name", o.ID, OpIDs(old))
			}
			continue
		}
		if prev.Kind != o.Kind || prev.StateSchema != o.StateSchema {
			return fmt.Errorf("operator %q changed its state layout (%s %s -> %s %s): its state cannot be restored; "+
				"start a new pipeline name to recompute from the input", o.ID, prev.Kind, prev.StateSchema, o.Kind, o.StateSchema)
		}
		delete(byID, o.ID)
	}
	for id := range byID {
		return fmt.Errorf("operator %q was removed from the plan but has committed state; "+
			"start a new pipeline name to drop it", id)
	}
	return nil
}

func OpIDs(ops []manifest.OpPlan) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.ID
	}
	return out
}
