package dataflow

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// Column pruning of a graph pipeline (docs/graph.md, "Column pruning").
//
// CompileGraph compiles the graph twice. The first compile, over every
// declared (or inferred) source column, is the plan's identity: its hash
// is the plan hash, as it was before pruning existed. A backward pass over
// it (neededColumns) finds, for every node, the output columns its
// consumers read: a sink reads every column of its input; a filter its
// predicate's columns and what its consumers read; a project the inputs of
// the items its consumers read; a keyed stage its keys, its time columns,
// its aggregates' inputs and the columns of its input that it hands on
// and a consumer reads (a join's right columns through their right_prefix
// renames). The second compile decodes each source's needed columns only,
// computes only the project items read, and narrows the input of each
// join, top_n, dedup and over stage to the columns it needs, so that its
// state holds only those (narrowOp).
//
// Narrowing a stage's input changes its state layout (the fingerprint
// the generation records). A generation recorded before pruning recorded
// the unpruned fingerprints: a stage whose recorded fingerprint is the
// unpruned one keeps its unpruned input (withRecordedLayouts), so an
// existing pipeline continues in its generation with the state it wrote.
// A stage with a late_url keeps its whole input: its late rows are written
// as the input's rows, every column.

// pruneGraphs is off only in tests that write what the release before
// graph pruning wrote (SetGraphPruning).
var PruneGraphs = true

// colSet is a set of column names.
type colSet map[string]bool

func (s colSet) addAll(names ...string) {
	for _, n := range names {
		if n != "" {
			s[n] = true
		}
	}
}

func (s colSet) addSchema(sc *arrow.Schema) {
	for _, f := range sc.Fields() {
		s[f.Name] = true
	}
}

// covers reports whether s holds every column of sc.
func (s colSet) covers(sc *arrow.Schema) bool {
	for _, f := range sc.Fields() {
		if !s[f.Name] {
			return false
		}
	}
	return true
}

// graphPruning is what the pruned compile of a graph applies: per node,
// the output columns its consumers read (out) and, per keyed stage that is
// narrowed, the input columns it reads (in, by input).
type graphPruning struct {
	out map[string]colSet
	in  map[string][]colSet
	// wide are the keyed stages that keep their whole input (their
	// recorded layout is the unpruned one).
	wide map[string]bool
}

// narrows reports whether a keyed stage's input may be narrowed by the
// pruned compile (a window keeps only its keys and aggregates anyway).
func narrows(kind string) bool {
	k := kinds[kind]
	return k != nil && k.narrows
}

// neededColumns walks the compiled graph g (compiled over every column)
// backwards and returns what its pruned compile applies; the stages in
// wide keep their whole inputs.
func (gp *GraphPlan) neededColumns(g *spec.Graph, wide map[string]bool, xo []expr.Option) *graphPruning {
	pr := &graphPruning{out: map[string]colSet{}, in: map[string][]colSet{}, wide: wide}
	// A keyed stage whose rows a stage that breaks ties by arrival reads
	// keeps its whole input: the rows it emits are handed on in an order
	// of all their values (CanonicalOrder), which fewer columns would
	// change, and with it which of two tied rows wins.
	whole := gp.orderBound()
	for n := range wide {
		whole[n] = true
	}
	wide = whole
	for _, n := range gp.Nodes {
		pr.out[n.Name] = colSet{}
	}
	for _, n := range append([]*Node{gp.Sink}, gp.Extra...) {
		for _, f := range n.Out.Fields() {
			if !isHidden(f.Name) {
				pr.out[n.Name][f.Name] = true
			}
		}
	}
	for i := len(gp.Nodes) - 1; i >= 0; i-- {
		n := gp.Nodes[i]
		if n.Kind == "source" {
			continue
		}
		ins := n.inputNeeds(g, pr.out[n.Name], wide[n.Name], xo)
		for j, in := range n.Ins {
			for c := range ins[j] {
				pr.out[in.Name][c] = true
			}
		}
		if narrows(n.Kind) && !wide[n.Name] && n.LateURL == "" {
			pr.in[n.Name] = ins
		}
	}
	return pr
}

// orderBound returns the keyed stages that may be narrowed but whose
// rows (through stateless stages) reach a keyed stage whose result
// depends on the order of its input: top_n, dedup and over (ties by
// arrival), a window with first or last.
func (gp *GraphPlan) orderBound() map[string]bool {
	readers := map[*Node][]*Node{}
	for _, n := range gp.Nodes {
		for _, in := range n.Ins {
			readers[in] = append(readers[in], n)
		}
	}
	var sensitive func(n *Node, seen map[*Node]bool) bool
	sensitive = func(n *Node, seen map[*Node]bool) bool {
		for _, r := range readers[n] {
			if seen[r] {
				continue
			}
			seen[r] = true
			if !r.Stateful {
				if sensitive(r, seen) {
					return true
				}
			} else if k := kinds[r.Kind]; k != nil && k.orderSensitive != nil && k.orderSensitive(r.spec) {
				return true
			}
		}
		return false
	}
	out := map[string]bool{}
	for _, n := range gp.State {
		if narrows(n.Kind) && sensitive(n, map[*Node]bool{}) {
			out[n.Name] = true
		}
	}
	return out
}

// inputNeeds returns, per input of n, the columns of that input n reads
// when its consumers read the columns out of its output.
func (n *Node) inputNeeds(g *spec.Graph, out colSet, wide bool, xo []expr.Option) []colSet {
	ins := make([]colSet, len(n.Ins))
	for i := range ins {
		ins[i] = colSet{}
	}
	st, k := n.spec, kinds[n.Kind]
	if st == nil || wide || n.LateURL != "" || k == nil || k.needs == nil {
		// A stage with a late_url writes its late rows whole.
		for i, in := range n.Ins {
			ins[i].addSchema(in.Out)
		}
		return ins
	}
	k.needs(&needsCtx{n: n, st: st, g: g, out: out, ins: ins, xo: xo}) // kind_<name>.go
	return ins
}

// sideNeeds maps the output columns out of a two-sided stage (a join, a
// lookup) back to its sides: a left column keeps its name; a right column
// keeps its name unless a left column has it, then it is prefix+name, and
// the left column is kept too, so that the right column's output name does
// not change.
func sideNeeds(left, right *arrow.Schema, prefix string, out, l, r colSet) {
	has := func(s *arrow.Schema, c string) bool { return s != nil && len(s.FieldIndices(c)) > 0 }
	for c := range out {
		switch {
		case has(left, c):
			l[c] = true
		case has(right, c):
			r[c] = true
		case strings.HasPrefix(c, prefix) && has(right, c[len(prefix):]) && has(left, c[len(prefix):]):
			r[c[len(prefix):]], l[c[len(prefix):]] = true, true
		}
	}
}

// prunedSchemas returns each source's schema pruned to the columns pr
// needs, with its event time; a source that cannot be pruned (CSV without
// a header: columns by position; validate: all: every column checked)
// keeps its schema.
func prunedSchemas(g *spec.Graph, schemas map[string]*arrow.Schema, pr *graphPruning) map[string]*arrow.Schema {
	out := make(map[string]*arrow.Schema, len(schemas))
	for name, sc := range schemas {
		out[name] = sc
	}
	for i := range g.Sources {
		ns := &g.Sources[i]
		sc := schemas[ns.Name]
		src := &ns.Source
		if sc == nil || src.Validate == "all" || src.Format == spec.CSV && src.CSV != nil && !src.CSV.Header {
			continue
		}
		need := pr.out[ns.Name]
		need.addAll(src.EventTime)
		if need.covers(sc) {
			continue
		}
		var fields []arrow.Field
		for _, f := range sc.Fields() {
			if need[f.Name] {
				fields = append(fields, f)
			}
		}
		md := sc.Metadata()
		out[ns.Name] = arrow.NewSchema(fields, &md)
	}
	return out
}

// narrowSchema returns the columns of sc in need, in sc's order, and their
// indices in sc; nil when need covers sc.
func narrowSchema(sc *arrow.Schema, need colSet) (*arrow.Schema, []int) {
	if need.covers(sc) {
		return nil, nil
	}
	var fields []arrow.Field
	var idx []int
	for i, f := range sc.Fields() {
		if need[f.Name] {
			fields = append(fields, f)
			idx = append(idx, i)
		}
	}
	md := sc.Metadata()
	return arrow.NewSchema(fields, &md), idx
}

// narrowOp is a keyed stage built over narrowed inputs: it takes its
// inputs' whole rows and hands the inner operator the columns it holds.
// Its late rows are the narrowed rows (a stage with a late_url is never
// narrowed).
type narrowOp struct {
	operators.Stateful
	ins  []*arrow.Schema // the inputs as the stage receives them
	cols [][]int         // per input: the columns of ins[i] the inner operator reads (nil: all)
	keys [][]int         // per input: the key columns in ins[i]
}

func newNarrowOp(inner operators.Stateful, ins []*arrow.Schema, cols [][]int) *narrowOp {
	o := &narrowOp{Stateful: inner, ins: ins, cols: cols, keys: make([][]int, len(ins))}
	for i := range ins {
		k := inner.KeyColumns(i)
		if cols[i] == nil {
			o.keys[i] = k
			continue
		}
		o.keys[i] = make([]int, len(k))
		for j, c := range k {
			o.keys[i][j] = cols[i][c]
		}
	}
	return o
}

func (o *narrowOp) InputSchemaOf(i int) *arrow.Schema { return o.ins[i] }
func (o *narrowOp) KeyColumns(i int) []int            { return o.keys[i] }

func (o *narrowOp) ProcessInput(i int, rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	if o.cols[i] == nil {
		return o.Stateful.ProcessInput(i, rec, sel)
	}
	cs := make([]arrow.Array, len(o.cols[i]))
	for j, c := range o.cols[i] {
		cs[j] = rec.Column(c)
	}
	narrow := array.NewRecordBatch(o.Stateful.InputSchemaOf(i), cs, rec.NumRows())
	defer narrow.Release()
	return o.Stateful.ProcessInput(i, narrow, sel)
}

// narrowInputs replaces, for the compile of keyed stage n, each input whose
// rows hold more than n reads (pr.in) by a copy of it with the narrowed
// schema, and returns what wrapNarrowed needs to undo it.
func (n *Node) narrowInputs(pr *graphPruning) (orig []*Node, cols [][]int) {
	need := pr.in[n.Name]
	if need == nil || len(need) != len(n.Ins) {
		return nil, nil
	}
	cols = make([][]int, len(n.Ins))
	narrowed := false
	for i, in := range n.Ins {
		sc, idx := narrowSchema(in.Out, need[i])
		if sc == nil || sc.NumFields() == 0 {
			continue
		}
		if orig == nil {
			orig = append([]*Node(nil), n.Ins...)
		}
		shadow := *in
		shadow.Out = sc
		n.Ins[i], cols[i], narrowed = &shadow, idx, true
	}
	if !narrowed {
		return nil, nil
	}
	return orig, cols
}

// wrapNarrowed restores n's inputs after a compile over narrowed ones and
// makes n's operator take their whole rows.
func (n *Node) wrapNarrowed(orig []*Node, cols [][]int) error {
	n.Ins = orig
	ins := make([]*arrow.Schema, len(orig))
	for i, in := range orig {
		ins[i] = in.Out
	}
	inner := n.NewOp
	n.NewOp = func() (operators.Stateful, error) {
		op, err := inner()
		if err != nil {
			return nil, err
		}
		return newNarrowOp(op, ins, cols), nil
	}
	op, err := n.NewOp()
	if err != nil {
		return err
	}
	for i := range n.KeyCols {
		n.KeyCols[i] = op.KeyColumns(i)
	}
	return nil
}

// pruneGraph compiles full's pipeline again over the columns it needs,
// every keyed stage with the layout of a new pipeline; the plan keeps
// full's identity (hash, declared schema). A pruned plan whose sinks would
// not receive the unpruned plan's columns, or whose wide stages would not
// hold their unpruned layout, is not used: full is (pruning is an
// optimisation, never a change of results or of a recorded layout).
func pruneGraph(full *Plan, g *spec.Graph, schemas, lookups map[string]*arrow.Schema, xo []expr.Option) (*Plan, error) {
	if !PruneGraphs {
		return full, nil // a test running the plans of the release before pruning
	}
	fullFP := map[string]string{}
	for _, n := range full.Graph.State {
		fullFP[n.Name] = n.Fp
	}
	var narrowFP map[string]string
	var layout func(wide map[string]bool) (*Plan, error)
	layout = func(wide map[string]bool) (*Plan, error) {
		pr := full.Graph.neededColumns(g, wide, xo)
		pruned := prunedSchemas(g, schemas, pr)
		pl, err := CompileGraphOn(full.spec, g, pruned, lookups, pr, xo)
		if err != nil || !samePruned(full.Graph, pl.Graph, wide) {
			cp, gp := *full, *full.Graph
			cp.Graph = &gp
			pl = &cp
		} else {
			if dict := dictSchemas(g, pl.Graph, pruned); dict != nil {
				if pd, err := CompileGraphOn(full.spec, g, dict, lookups, pr, xo); err == nil && sameNodes(pl.Graph, pd.Graph) {
					pl = pd
				}
			}
			pl.Hash, pl.Declared = full.Hash, full.Declared // the plan's identity is the unpruned plan's
		}
		gp := pl.Graph
		gp.FullFP, gp.wide, gp.relayout = fullFP, wide, layout
		if narrowFP == nil {
			narrowFP = map[string]string{}
			for _, n := range gp.State {
				narrowFP[n.Name] = n.Fp
			}
		}
		gp.narrowFP = narrowFP
		return pl, nil
	}
	return layout(nil)
}

// dictSchemas returns the source schemas with dictionary keys (as the
// linear form's useDictKeys): a Parquet source read by one window stage
// only, with no late_url (its late rows are written as plain strings), is
// decoded with that window's string key columns as dictionary<int32,
// utf8>, so that the window looks up each distinct key once per batch
// instead of hashing a string per row. nil when no source qualifies.
func dictSchemas(g *spec.Graph, gp *GraphPlan, schemas map[string]*arrow.Schema) map[string]*arrow.Schema {
	readers := map[*Node][]*Node{}
	for _, n := range gp.Nodes {
		for _, in := range n.Ins {
			readers[in] = append(readers[in], n)
		}
	}
	sinks := map[*Node]bool{gp.Sink: true}
	for _, n := range gp.Extra {
		sinks[n] = true
	}
	var out map[string]*arrow.Schema
	for i := range g.Sources {
		ns := &g.Sources[i]
		src := gp.Sources[ns.Name]
		rs := readers[src]
		if ns.Source.Format != spec.Parquet || src == nil || sinks[src] || len(rs) != 1 {
			continue
		}
		w := rs[0]
		kd := kinds[w.Kind]
		if kd == nil || kd.dictKeys == nil || w.spec == nil || w.LateURL != "" || len(w.Ins) != 1 {
			continue
		}
		sc := schemas[ns.Name]
		fields := slices.Clone(sc.Fields())
		n := 0
		for _, k := range kd.dictKeys(w) {
			idx := sc.FieldIndices(k)
			if len(idx) == 1 && fields[idx[0]].Type.ID() == arrow.STRING && k != ns.Source.EventTime {
				fields[idx[0]].Type = DictKeyType
				n++
			}
		}
		if n == 0 {
			continue
		}
		if out == nil {
			out = make(map[string]*arrow.Schema, len(schemas))
			for name, s := range schemas {
				out[name] = s
			}
		}
		md := sc.Metadata()
		out[ns.Name] = arrow.NewSchema(fields, &md)
	}
	return out
}

// sameNodes reports whether b computes what a does with the same state:
// every stage's output schema and every keyed stage's fingerprint equal
// (b may decode its sources otherwise).
func sameNodes(a, b *GraphPlan) bool {
	if len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for i, n := range a.Nodes {
		m := b.Nodes[i]
		if n.Name != m.Name || n.Fp != m.Fp || n.Kind != "source" && !n.Out.Equal(m.Out) {
			return false
		}
	}
	return true
}

// samePruned reports whether the pruned graph pg computes what the
// unpruned fg does: the same sink columns, and the wide stages' layouts.
func samePruned(fg, pg *GraphPlan, wide map[string]bool) bool {
	if !fg.Sink.Out.Equal(pg.Sink.Out) || len(fg.Extra) != len(pg.Extra) {
		return false
	}
	for i := range fg.Extra {
		if !fg.Extra[i].Out.Equal(pg.Extra[i].Out) {
			return false
		}
	}
	for _, n := range fg.State {
		p := pg.ByName[n.Name]
		if p == nil || (wide[n.Name] || n.LateURL != "") && p.Fp != n.Fp {
			return false
		}
	}
	return true
}

// WithRecordedLayouts returns pl compiled with every keyed stage whose
// layout old (a generation's operators) recorded as the unpruned one
// holding its whole input again, so that a pipeline created before graph
// pruning keeps the state layout it wrote; every other stage has the
// layout of a new pipeline. pl itself when that is its layout already.
func (pl *Plan) WithRecordedLayouts(old []manifest.OpPlan) (*Plan, error) {
	gp := pl.Graph
	if gp == nil || gp.relayout == nil {
		return pl, nil
	}
	wide := map[string]bool{}
	for _, o := range old {
		if full, ok := gp.FullFP[o.ID]; ok && o.StateSchema == full && gp.narrowFP[o.ID] != full {
			wide[o.ID] = true
		}
	}
	if maps.Equal(wide, gp.wide) || len(wide) == 0 && len(gp.wide) == 0 {
		return pl, nil
	}
	if len(wide) == 0 {
		wide = nil
	}
	out, err := gp.relayout(wide)
	if err != nil {
		return nil, fmt.Errorf("plan with the recorded state layouts: %w", err)
	}
	return out, nil
}

// keptItems returns the project items whose output columns are in keep
// ("*" is kept: it hands on the columns its pruned input has); nil when
// keep is nil (no pruning).
func keptItems(items []expr.ProjectItem, keep colSet) []expr.ProjectItem {
	if keep == nil {
		return nil
	}
	var out []expr.ProjectItem
	for _, it := range items {
		name := it.Name
		if name == "" {
			name = strings.TrimSpace(it.Expr)
		}
		if it.Expr == "*" || keep[name] {
			out = append(out, it)
		}
	}
	return out
}
