package dataflow

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// Stage kinds: the engine's part of each kind of stage, one file per kind
// (kind_<name>.go), each registering its kind in init. The compiler, the
// column pruning, the order rules, evolution and the state inspector look
// a node's kind up here (kindOf) instead of switching on it. What the spec
// knows of a kind (decoding, validation, the watermark rule) is the spec's
// table (spec/stagekinds.go); TestKindTablesAgree holds the two to the
// same kinds.

// kind is the engine's part of one stage kind.
type kind struct {
	name string
	// stateful: compile makes the node a keyed stage (stageCompile.keyed),
	// whose rows are routed to subtasks by key group and whose state the
	// epoch keeps under the stage's name; else a stateless node (n.Stage
	// or n.Lookup) that maps each batch on its own.
	stateful bool
	// compile compiles the stage over its compiled inputs.
	compile func(c *stageCompile) error
	// needs adds to c.ins the columns of its inputs the stage reads when
	// its consumers read c.out (graphprune.go); nil: every column.
	needs func(c *needsCtx)
	// narrows: the pruned compile may narrow the keyed stage's input to
	// the columns it reads, which its state then holds (a window keeps
	// only its keys and aggregates anyway).
	narrows bool
	// copies (stateless kinds) returns the input column that output
	// column col is a copy of ("" when it is computed or not in the
	// output): how window bounds pass through the stage.
	copies func(st *spec.Stage, col string) string
	// orderSensitive (keyed kinds) reports whether the stage's result
	// depends on the order of its input rows (ties broken by arrival);
	// nil: it does not.
	orderSensitive func(st *spec.Stage) bool
	// orderFree (keyed kinds) reports whether node n's results, state and
	// output are the same in any order of its input rows within an epoch
	// (graphorder.go); nil: never.
	orderFree func(n *Node) bool
	// dictKeys returns the columns of node n's input that a Parquet
	// source read by n alone may decode as dictionaries (dictSchemas);
	// nil: none.
	dictKeys func(n *Node) []string
	// evolve (keyed kinds) plans how state recorded under prev reaches
	// the layout of cur, the stage's operator plan, when their layouts
	// differ (nil, nil: nothing to migrate, compatible decides); nil:
	// the kind's state never evolves, the layouts must be equal.
	evolve func(n *Node, prev, cur manifest.OpPlan) (*StageMigration, error)
	// finalised (keyed kinds): floe state shows the stage's state as the
	// windows it would emit (the window inspector); else held says how
	// the rows it holds read.
	finalised bool
	held      func(st *spec.Stage) *HeldRows
	// header is the stage as floe state's header shows it.
	header func(st *spec.Stage) string
}

// kinds maps a stage kind's name to its definition.
var kinds = map[string]*kind{}

// register adds k to kinds (from the init of its file).
func register(k *kind) {
	if _, dup := kinds[k.name]; dup || k.name == "" || k.compile == nil {
		panic(fmt.Sprintf("dataflow: stage kind %q registered twice or without a compiler", k.name))
	}
	kinds[k.name] = k
}

// kindNames returns the registered kinds' names, sorted.
func kindNames() []string { return slices.Sorted(maps.Keys(kinds)) }

// kindOf returns n's kind; the error names the stage and where the spec
// declares it.
func kindOf(p *spec.Pipeline, n *Node) (*kind, error) {
	if k := kinds[n.Kind]; k != nil {
		return k, nil
	}
	if n.Kind == "" {
		return nil, fmt.Errorf("%s: stage %s: no stage kind set", p.Where(n.path), n.Name)
	}
	return nil, fmt.Errorf("%s: stage %s: stage kind %q is not one the engine runs (%s)", p.Where(n.path), n.Name, n.Kind, strings.Join(kindNames(), ", "))
}

// stageCompile is what a kind's compile reads and fills: the stage st
// whose node n has its inputs compiled.
type stageCompile struct {
	g       *spec.Graph
	st      *spec.Stage
	n       *Node
	k       int // the pipeline's max parallelism (key groups)
	lookups map[string]*arrow.Schema
	xo      []expr.Option
}

// in is the schema of input i's rows.
func (c *stageCompile) in(i int) *arrow.Schema { return c.n.Ins[i].Out }

// timeOr is col, or when col is "" the event-time column of input i's
// rows.
func (c *stageCompile) timeOr(col string, i int) string { return timeOr(c.g, c.st, col, i) }

func timeOr(g *spec.Graph, st *spec.Stage, col string, i int) string {
	if col == "" {
		return EventTimeOf(g, st.Inputs[i])
	}
	return col
}

// keyed makes the node a keyed stage whose operator newOp builds: its
// state fingerprint (with the time rule of graphwin.go) and its key
// columns per input come from one operator built now.
func (c *stageCompile) keyed(newOp func() (operators.Stateful, error)) error {
	op, err := newOp()
	if err != nil {
		return err
	}
	n := c.n
	n.Stateful, n.Fp, n.NewOp = true, op.StateFingerprint()+timeRule(op), newOp
	n.KeyCols = make([][]int, len(n.Ins))
	for i := range n.Ins {
		n.KeyCols[i] = op.KeyColumns(i)
	}
	return nil
}

// needsCtx is what a kind's needs reads and fills (graphprune.go).
type needsCtx struct {
	n   *Node
	st  *spec.Stage
	g   *spec.Graph
	out colSet   // the output columns the stage's consumers read
	ins []colSet // per input, the columns the stage reads (filled)
	xo  []expr.Option
}

// timeOr is col, or when col is "" the event-time column of input i's
// rows.
func (c *needsCtx) timeOr(col string, i int) string { return timeOr(c.g, c.st, col, i) }

// holds reads, of the one input of a stage that holds its input's rows
// (top_n, dedup, over), the columns cols, the window bounds and the
// columns the stage hands on.
func (c *needsCtx) holds(cols ...string) {
	c.ins[0].addAll(cols...)
	c.bounds(0)
	c.passthrough(0)
}

// passthrough reads the output columns the stage hands on from input i
// under their own names.
func (c *needsCtx) passthrough(i int) {
	for _, f := range c.n.Ins[i].Out.Fields() {
		if c.out[f.Name] {
			c.ins[i][f.Name] = true
		}
	}
}

// bounds reads the window bounds of input i when its rows are window
// results (a keyed stage reads them: its own window, per-window ranking,
// the carried bounds).
func (c *needsCtx) bounds(i int) {
	if hasBounds(c.n.Ins[i].Out) {
		c.ins[i].addAll(operators.ColWindowStart, operators.ColWindowEnd)
	}
}

// copied returns the input column output column col of stateless node n
// is a copy of ("" when it is computed or not in the output).
func copied(n *Node, col string) string {
	if k := kinds[n.Kind]; k != nil && k.copies != nil && n.spec != nil {
		return k.copies(n.spec, col)
	}
	return ""
}

// identity is the copies of a stage that hands on its input's columns
// unchanged (a filter; a lookup, which adds the table's).
func identity(_ *spec.Stage, col string) string { return col }

// HeldRows says how the rows a keyed stage holds in its state read in
// floe state (cat, diff, export): the stage's state schema is key_group,
// then the columns named here and the rest, shown as they are.
type HeldRows struct {
	// Keys are the key columns, shown under these names. A stage without
	// sides (SideKeys nil) holds them under these names.
	Keys []string
	// SideKeys, for a stage of two sides (a join), are per side the state
	// columns of its key; Sides the prefixes of each side's state columns
	// ("left.", "right."). The key shows under Keys (the left side's).
	SideKeys [][]string
	Sides    []string
	// Ident are the columns that, with the key, identify a held row
	// across epochs and parallelisms; Sort order the rows of one key.
	Ident, Sort []string
	// Seq is the arrival-sequence column (renumbered by a rescale, so not
	// compared).
	Seq string
	// Rank, when set, names a column computed from the state's order (a
	// top_n's rank in its group), shown before Seq.
	Rank string
}

// HeldRowsOf is how the rows the keyed stage st holds read; nil for a
// stage whose state floe state finalises (a window), or st of a kind
// that keeps no rows.
func HeldRowsOf(st *spec.Stage) *HeldRows {
	if k := kinds[st.Kind()]; k != nil && k.held != nil {
		return k.held(st)
	}
	return nil
}

// Finalised reports whether floe state shows node n's state as the
// results it would emit (a window stage's), rather than as held rows.
func (n *Node) Finalised() bool { return FinalisedKind(n.Kind) }

// FinalisedKind is Finalised for the stages of kind.
func FinalisedKind(kind string) bool {
	k := kinds[kind]
	return k != nil && k.finalised
}

// StateHeader is the keyed stage st as floe state's header shows it.
func StateHeader(st *spec.Stage) string {
	if k := kinds[st.Kind()]; k != nil && k.header != nil {
		return k.header(st)
	}
	return st.Kind()
}
