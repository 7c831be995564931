package dataflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// A graph pipeline compiled: every source and stage is a node, in
// topological order (sources first). The runner executes the nodes of an
// epoch in that order (engine/graphexec.go): a stateless node maps each batch of
// its input; a stateful node (window, join, top_n, dedup) routes its
// inputs' rows to its subtasks by key group, then advances them to its
// watermark and hands on what they emitted. Every stateful node keeps its
// state in the epoch like the linear pipeline's window (operator id = the
// stage's name), so kill, restore and rescale hold for every stage (an
// over stage too).

// Node is one node of a compiled graph.
type Node struct {
	Name  string
	Kind  string // "source" or a spec stage kind
	path  string // spec field path, for errors
	Ins   []*Node
	Out   *arrow.Schema
	delay time.Duration // how far behind its input watermark its output's event times may be
	// lag is how far behind the pipeline watermark this node's input
	// watermark is: the largest lag+delay over its inputs.
	lag time.Duration

	Src      *spec.NamedSource // source nodes
	spec     *spec.Stage       // stage nodes
	Stage    *stage            // filter and project
	Lookup   *lookupNode
	Stateful bool
	NewOp    func() (operators.Stateful, error)
	KeyCols  [][]int // stateful: per input, the key columns rows are routed by
	LateURL  string
	Fp       string // stateful: the state fingerprint
	// feedsKeyed: a keyed stage reads this node's rows, directly or
	// through stateless stages.
	FeedsKeyed bool
	// Canonical: a keyed stage whose rows are handed on in an order of
	// their values (markCanonical).
	Canonical bool
	// windows: the node's rows are window results (a window stage's, a
	// windowed join's), of window when fixedWindow (tumbling or sliding;
	// not a session window); set by the kind's compile (graphwin.go).
	windows     bool
	window      winShape
	fixedWindow bool
	// srcs are the sources this node's rows come from, sorted.
	srcs []string
	// atDecode: a stateless stage of a source's decode chain (see
	// decodeChains): it runs on each file as the file is decoded, not in
	// the epoch's node loop.
	AtDecode bool
	// ChainEnd (source nodes): the last node of the source's decode chain,
	// whose rows a decoded file's batches are (the source itself when its
	// chain is empty); filters are the chain's stages, in order.
	ChainEnd *Node
	Chain    []*Node
	// keepOut, in a pruned compile, are the output columns a project
	// computes (nil: all; graphprune.go).
	keepOut colSet
}

// lookupNode is a compiled lookup stage and the table it has loaded.
type lookupNode struct {
	Spec    operators.LookupSpec
	Cfg     *spec.Lookup
	Table   *arrow.Schema
	Op      *operators.Lookup
	Version string
	Files   int
	Rows    int64
}

// GraphPlan is a graph pipeline compiled against its sources' schemas.
type GraphPlan struct {
	Nodes   []*Node
	ByName  map[string]*Node
	Sink    *Node   // the node the (first) sink writes
	Extra   []*Node // the nodes the further sinks write, in spec order (engine/internal/sinks)
	State   []*Node // the stateful nodes, in node order
	Sources map[string]*Node
	Lookups []*Node
	// FullFP and narrowFP are each keyed stage's state fingerprint in the
	// unpruned plan and in a new pipeline's; wide are the stages this plan
	// keeps whole for their recorded layout; relayout compiles the plan
	// again with other such stages (graphprune.go).
	FullFP, narrowFP map[string]string
	wide             map[string]bool
	relayout         func(wide map[string]bool) (*Plan, error)
	// linear: compiled from the linear form (source, operators, sink). Its
	// one source's files keep their own keys (no "<source>/" prefix, the
	// layout the linear form has always committed), and its figures and
	// identity are the linear form's (CompileLinear).
	Linear bool
}

// SourceOf returns the source node a source file's key belongs to, and the
// key within that source: in the graph form the first segment of the key
// names the source (sourceMux); a plan compiled from the linear form has
// one source, whose keys are not prefixed.
func (gp *GraphPlan) SourceOf(key string) (*Node, string) {
	if gp.Linear {
		for _, n := range gp.Sources {
			return n, key
		}
	}
	name, rest, _ := strings.Cut(key, "/")
	return gp.Sources[name], rest
}

// decodeChains marks, for every source, its decode chain: the filter and
// project stages that follow it one after the other, each the only reader
// of the node before it and that node read by no sink. They run on each
// file as it is decoded, in parallel over the epoch's files, so a stateless
// prefix costs no pass over the epoch's rows and the rows its filters drop
// are counted as filtered (the linear form's rule: the stages before the
// first keyed stage).
func (gp *GraphPlan) decodeChains(g *spec.Graph) {
	readers := map[*Node][]*Node{}
	for _, n := range gp.Nodes {
		for _, in := range n.Ins {
			readers[in] = append(readers[in], n)
		}
	}
	for _, src := range gp.Sources {
		cur := src
		for {
			next := readers[cur]
			if len(next) != 1 || next[0].Stage == nil || len(g.SinksOf(cur.Name)) > 0 {
				break
			}
			cur = next[0]
			cur.AtDecode = true
			src.Chain = append(src.Chain, cur)
		}
		src.ChainEnd = cur
	}
}

// CompileGraph compiles p's graph over its sources' schemas (by source
// name) into a plan whose linear parts are empty, pruned to the columns
// its stages read (graphprune.go) with the layouts of a new pipeline;
// withRecordedLayouts gives a generation's stages the layouts it recorded.
func CompileGraph(p *spec.Pipeline, schemas map[string]*arrow.Schema, lookupSchemas map[string]*arrow.Schema, xo ...expr.Option) (*Plan, error) {
	g, err := p.Graph()
	if err != nil {
		return nil, err
	}
	full, err := CompileGraphOn(p, g, schemas, lookupSchemas, nil, xo)
	if err != nil {
		return nil, err
	}
	return pruneGraph(full, g, schemas, lookupSchemas, xo)
}

// CompileGraphOn compiles graph g of p over the sources' schemas; pr, when
// set, prunes project items and narrows keyed stages' inputs.
func CompileGraphOn(p *spec.Pipeline, g *spec.Graph, schemas map[string]*arrow.Schema, lookupSchemas map[string]*arrow.Schema, pr *graphPruning, xo []expr.Option) (*Plan, error) {
	k := MaxParallelism(p)
	gp := &GraphPlan{ByName: map[string]*Node{}, Sources: map[string]*Node{}}
	for i := range g.Sources {
		ns := &g.Sources[i]
		sc := schemas[ns.Name]
		if sc == nil {
			return nil, fmt.Errorf("internal error: no schema for source %s", ns.Name)
		}
		n := &Node{Name: ns.Name, Kind: "source", path: g.Path(ns.Name), Out: sc, Src: ns, srcs: []string{ns.Name}}
		gp.Nodes = append(gp.Nodes, n)
		gp.ByName[n.Name] = n
		gp.Sources[n.Name] = n
	}
	pl := &Plan{spec: p}
	for i := range g.Stages {
		st := &g.Stages[i]
		n := &Node{Name: st.Name, Kind: st.Kind(), path: g.Path(st.Name), LateURL: st.LateURL, spec: st}
		kd, err := kindOf(p, n) // kind.go
		if err != nil {
			return nil, err
		}
		for _, in := range st.Inputs {
			u := gp.ByName[in]
			if u == nil {
				return nil, fmt.Errorf("%s: input %q is not compiled (internal error)", n.path, in)
			}
			n.Ins = append(n.Ins, u)
			n.lag = max(n.lag, u.lag+u.delay)
			for _, s := range u.srcs {
				if !slices.Contains(n.srcs, s) {
					n.srcs = append(n.srcs, s)
				}
			}
		}
		var orig []*Node
		var cols [][]int
		if pr != nil {
			n.keepOut = pr.out[n.Name]
			orig, cols = n.narrowInputs(pr)
		}
		if err := compileStage(kd, g, st, n, k, lookupSchemas, xo); err != nil {
			return nil, fmt.Errorf("%s: %w", n.path, err)
		}
		if orig != nil {
			if err := n.wrapNarrowed(orig, cols); err != nil {
				return nil, fmt.Errorf("%s: %w", n.path, err)
			}
		}
		n.delay = g.WatermarkDelay(n.Name) // the one rule (docs/graph.md, Watermarks)
		if n.Stateful {
			op, err := n.NewOp()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", n.path, err)
			}
			n.Out = op.OutputSchema()
			pl.Ops = append(pl.Ops, manifest.OpPlan{ID: n.Name, Kind: n.Kind, StateSchema: n.Fp, StatePlan: StatePlanOf(op)})
			gp.State = append(gp.State, n)
		}
		if n.Lookup != nil {
			gp.Lookups = append(gp.Lookups, n)
		}
		gp.Nodes = append(gp.Nodes, n)
		gp.ByName[n.Name] = n
	}
	for i := len(gp.Nodes) - 1; i >= 0; i-- {
		nd := gp.Nodes[i]
		for _, in := range nd.Ins {
			if nd.Stateful || nd.FeedsKeyed {
				in.FeedsKeyed = true
			}
		}
	}
	sk := g.Sinks[0]
	gp.Sink = gp.ByName[sk.Input]
	if gp.Sink == nil {
		return nil, fmt.Errorf("%s: input %q unknown", g.SinkPath(sk.Name), sk.Input)
	}
	for _, sk := range g.Sinks[1:] {
		nd := gp.ByName[sk.Input]
		if nd == nil {
			return nil, fmt.Errorf("%s: input %q unknown", g.SinkPath(sk.Name), sk.Input)
		}
		gp.Extra = append(gp.Extra, nd)
	}
	gp.markCanonical()
	gp.decodeChains(g)
	pl.Graph = gp
	pl.Output = gp.Sink.Out
	pl.Source = gp.Nodes[0].Out
	pl.Declared = pl.Source
	pl.Hash = graphHash(g, gp)
	if err := pl.partitionSinks(p); err != nil {
		return nil, err
	}
	return pl, nil
}

// graphHash identifies a graph plan by what it computes, not where it
// runs: each source's name, format, event time and schema; each stage's
// name, inputs and settings (without its late_url, and a lookup without
// its table's location); the sink's input and format; every node's
// schema; and the time rule of stages reading window results. A pipeline
// moved or copied elsewhere, or run with other limits or watermark
// settings, keeps its plan (as the linear form's encodePlan does).
func graphHash(g *spec.Graph, gp *GraphPlan) string {
	h := sha256.New()
	fmt.Fprintln(h, "floe-graph-plan v2")
	for _, ns := range g.Sources {
		fmt.Fprintf(h, "source %q format=%s event_time=%q schema=%s\n", ns.Name, ns.Source.Format, ns.Source.EventTime, gp.ByName[ns.Name].Out)
	}
	for _, st := range g.Stages {
		c := st
		c.LateURL = ""
		if c.Lookup != nil {
			l := *c.Lookup
			l.URL, l.Pattern = "", ""
			c.Lookup = &l
		}
		data, err := json.Marshal(c)
		if err != nil {
			data = []byte(err.Error()) // plain config structs: cannot happen
		}
		nd := gp.ByName[st.Name]
		fmt.Fprintf(h, "stage %s fp=%s schema=%s\n", data, nd.Fp, nd.Out)
	}
	for _, sk := range g.Sinks {
		fmt.Fprintf(h, "sink %q input=%q type=%s format=%s\n", sk.Name, sk.Input, sk.Sink.Type, sk.Sink.Format)
	}
	return "g2-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// EventTimeOf is the event-time column of a node's output.
func EventTimeOf(g *spec.Graph, name string) string { return g.EventTime(name) }

// compileStage compiles stage st into node n by its kind (kind_<name>.go);
// the error names the kind.
func compileStage(kd *kind, g *spec.Graph, st *spec.Stage, n *Node, k int, lookupSchemas map[string]*arrow.Schema, xo []expr.Option) error {
	if err := kd.compile(&stageCompile{g: g, st: st, n: n, k: k, lookups: lookupSchemas, xo: xo}); err != nil {
		return fmt.Errorf("%s: %w", kd.name, err)
	}
	return nil
}

// ArrowNewRecord returns an empty batch of schema s.
func ArrowNewRecord(s *arrow.Schema) arrow.RecordBatch {
	return array.NewRecordBatch(s, emptyColumns(s), 0)
}

// emptyColumns returns zero-length arrays of s's field types.
func emptyColumns(s *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, s.NumFields())
	for i, f := range s.Fields() {
		b := array.NewBuilder(memory.DefaultAllocator, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	return cols
}

// satSub is a - d, saturating at the int64 bounds (a watermark of
// MinInt64 or MaxInt64 stays).
func satSub(a int64, d time.Duration) int64 {
	if a == math.MinInt64 || a == math.MaxInt64 {
		return a
	}
	us := d.Microseconds()
	if us > 0 && a < math.MinInt64+us {
		return math.MinInt64
	}
	return a - us
}

// DescribeGraph draws a graph plan for `floe plan`, with every stateful
// stage's parallelism.
func DescribeGraph(p *spec.Pipeline, parallelism int) string {
	g, err := p.Graph()
	if err != nil {
		return err.Error()
	}
	return g.DescribeWith(func(name string) string {
		if st := g.Stage(name); st != nil {
			if kd := kinds[st.Kind()]; kd != nil && kd.stateful {
				return fmt.Sprintf("parallelism %d", parallelism)
			}
		}
		return ""
	})
}

// Indent prefixes every line of s with pre.
func Indent(s, pre string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(pre + l)
		}
	}
	return b.String()
}

// SourceNames returns the graph's source names.
func (gp *GraphPlan) SourceNames() []string {
	var out []string
	for _, n := range gp.Nodes {
		if n.Kind == "source" {
			out = append(out, n.Name)
		}
	}
	return out
}

// InputWatermark is a node's input watermark: the minimum of the
// watermarks of the sources its rows come from (the pipeline's watermark
// when per-source ones are not known), minus the delays on its path.
func (n *Node) InputWatermark(wm int64, bySource map[string]int64) int64 {
	if len(bySource) > 0 && len(n.srcs) > 0 {
		in := int64(math.MaxInt64)
		for _, s := range n.srcs {
			v, ok := bySource[s]
			if !ok {
				v = wm
			}
			in = min(in, v)
		}
		wm = in
	}
	return satSub(wm, n.lag)
}
