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
	"github.com/floe-dev/floe/store"
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
	// windowedJoin: a join whose results are window results.
	windowedJoin bool
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
	Extra   []*Node // the nodes the further sinks write, in spec order (sinks.go)
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
		if err := compileStage(g, st, n, k, lookupSchemas, xo); err != nil {
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

func compileStage(g *spec.Graph, st *spec.Stage, n *Node, k int, lookupSchemas map[string]*arrow.Schema, xo []expr.Option) error {
	in := n.Ins[0].Out
	switch {
	case st.Filter != nil:
		e, err := expr.CompileFilter(st.Filter.Expr, in, xo...)
		if err != nil {
			return fmt.Errorf("filter: %w", err)
		}
		n.Stage, n.Out = &stage{id: n.Name, Filter: e, out: in}, in
	case st.Project != nil:
		items := make([]expr.ProjectItem, 0, len(st.Project.Columns))
		for _, c := range st.Project.Columns {
			items = append(items, expr.ProjectItem{Name: c.Name, Expr: c.Expr})
		}
		if kept := keptItems(items, n.keepOut); len(kept) > 0 {
			items = kept // a pruned compile: only the items read
		}
		pr, err := expr.CompileProjection(items, in, xo...)
		if err != nil {
			return fmt.Errorf("project: %w", err)
		}
		n.Stage, n.Out = &stage{id: n.Name, proj: pr, out: pr.Schema()}, pr.Schema()
	case st.Window != nil:
		ws, err := WindowSpec(n.Name, st.Window, EventTimeOf(g, st.Inputs[0]))
		if err != nil {
			return fmt.Errorf("window: %w", err)
		}
		newOp := func() (operators.Stateful, error) { return operators.NewWindow(ws, in, k) }
		own, err := OwnWindowKey(st.Window, n.Ins[0], ws.EventTime)
		switch {
		case err != nil:
			return fmt.Errorf("window: %w", err)
		case own != nil:
			// Keyed by the input's window (issue 23): each input row is
			// aggregated in its own window, which is this stage's: the
			// operator runs on buckets one slide long that end where the
			// windows end, keyed by the other columns.
			hs := ws
			hs.Keys = slices.DeleteFunc(slices.Clone(ws.Keys), IsWindowBound)
			hs.Kind, hs.Size, hs.Slide, hs.EventTime = operators.Tumbling, own.slide, 0, HiddenTime
			o := hiddenOpts{ends: []string{spec.WindowEventTime}}
			if own.slide != own.size {
				o.fixStart = own.size
			}
			newOp = func() (operators.Stateful, error) {
				return newHiddenTimeOp([]*arrow.Schema{in}, o, func(exts []*arrow.Schema) (operators.Stateful, error) {
					return operators.NewWindow(hs, exts[0], k)
				})
			}
		case ws.EventTime == spec.WindowEventTime && readsWindowResults(n.Ins[0]):
			// Window results are stamped window_end - 1µs (graphwin.go).
			hs := ws
			hs.EventTime = HiddenTime
			newOp = func() (operators.Stateful, error) {
				return newHiddenTimeOp([]*arrow.Schema{in}, hiddenOpts{ends: []string{ws.EventTime}}, func(exts []*arrow.Schema) (operators.Stateful, error) {
					return operators.NewWindow(hs, exts[0], k)
				})
			}
		}
		op, err := newOp()
		if err != nil {
			return fmt.Errorf("window: %w", err)
		}
		n.Stateful = true
		n.Fp = op.StateFingerprint() + timeRule(op)
		n.KeyCols = [][]int{op.KeyColumns(0)}
		n.NewOp = newOp
	case st.Join != nil:
		j := st.Join
		js := operators.JoinSpec{ID: n.Name, Type: operators.InnerJoin, LeftKeys: j.LeftKeys, RightKeys: j.RightKeys,
			LeftTime: j.LeftTime, RightTime: j.RightTime, AllowedLateness: j.AllowedLateness, RightPrefix: j.RightPrefix}
		if j.Type == spec.JoinLeft {
			js.Type = operators.LeftJoin
		}
		if js.LeftTime == "" {
			js.LeftTime = EventTimeOf(g, st.Inputs[0])
		}
		if js.RightTime == "" {
			js.RightTime = EventTimeOf(g, st.Inputs[1])
		}
		switch {
		case j.Interval != nil:
			js.Interval = &operators.JoinInterval{Lower: j.Interval.Lower, Upper: j.Interval.Upper}
		case j.Window != nil && j.Window.Tumbling > 0:
			js.Window = &operators.JoinWindow{Kind: operators.Tumbling, Size: j.Window.Tumbling}
		case j.Window != nil && j.Window.Sliding != nil:
			js.Window = &operators.JoinWindow{Kind: operators.Sliding, Size: j.Window.Sliding.Size, Slide: j.Window.Sliding.Slide}
		}
		right := n.Ins[1].Out
		n.windowedJoin = js.Window != nil
		newOp := func() (operators.Stateful, error) { return operators.NewJoin(js, in, right, k) }
		carry, err := ownWindowSides(j, n.Ins)
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		o := hiddenOpts{ends: []string{"", ""}, carry: carry[:]}
		hs := js
		times := [2]*string{&hs.LeftTime, &hs.RightTime}
		for side := range 2 {
			switch {
			case carry[side]:
				// Results of the join's own window: paired in their
				// window, whose bounds the output shows once.
				o.ends[side], *times[side] = spec.WindowEventTime, HiddenTime
			case *times[side] == spec.WindowEventTime && readsWindowResults(n.Ins[side]):
				o.ends[side], *times[side] = spec.WindowEventTime, HiddenTime
			}
		}
		if carry[0] || carry[1] {
			w := shapeOfJoin(j.Window)
			// Buckets one slide long ending where the windows end hold
			// one window's results each (for tumbling windows, the
			// windows themselves).
			hs.Window = &operators.JoinWindow{Kind: operators.Tumbling, Size: w.slide}
			if w.slide != w.size {
				o.fixStart = w.size
			}
		} else {
			o.carry = nil
		}
		if o.ends[0] != "" || o.ends[1] != "" {
			// A side of window results is timed window_end - 1µs (graphwin.go).
			newOp = func() (operators.Stateful, error) {
				return newHiddenTimeOp([]*arrow.Schema{in, right}, o, func(exts []*arrow.Schema) (operators.Stateful, error) {
					return operators.NewJoin(hs, exts[0], exts[1], k)
				})
			}
		}
		op, err := newOp()
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		n.Stateful, n.Fp = true, op.StateFingerprint()+timeRule(op)
		n.KeyCols = [][]int{op.KeyColumns(0), op.KeyColumns(1)}
		n.NewOp = newOp
	case st.TopN != nil:
		t := st.TopN
		ts := operators.TopNSpec{ID: n.Name, N: t.N, Keys: t.Keys, Size: t.Tumbling, AllowedLateness: t.AllowedLateness, RankColumn: t.RankColumn}
		for _, o := range t.OrderBy {
			ts.OrderBy = append(ts.OrderBy, operators.OrderSpec{Column: o.Column, Desc: o.Desc, NullsFirst: o.NullsFirst})
		}
		if t.Tumbling > 0 {
			ts.EventTime = t.EventTime
			if ts.EventTime == "" {
				ts.EventTime = EventTimeOf(g, st.Inputs[0])
			}
			if prod, renamed, ok := windowEndAlias(n.Ins[0], ts.EventTime); ok {
				return fmt.Errorf("top_n: %w", offByOneWindow("event_time", ts.EventTime, prod, renamed))
			}
		}
		op, err := operators.NewTopN(ts, in, k)
		if err != nil {
			return fmt.Errorf("top_n: %w", err)
		}
		n.Stateful, n.Fp = true, op.StateFingerprint()
		n.KeyCols = [][]int{op.KeyColumns(0)}
		n.NewOp = func() (operators.Stateful, error) { return operators.NewTopN(ts, in, k) }
	case st.Dedup != nil:
		d := st.Dedup
		ds := operators.DedupSpec{ID: n.Name, Keys: d.Keys, EventTime: d.EventTime, Keep: operators.KeepFirst, Within: d.Within, AllowedLateness: d.AllowedLateness}
		if d.Keep == spec.KeepLast {
			ds.Keep = operators.KeepLast
		}
		if ds.EventTime == "" {
			ds.EventTime = EventTimeOf(g, st.Inputs[0])
		}
		op, err := operators.NewDedup(ds, in, k)
		if err != nil {
			return fmt.Errorf("dedup: %w", err)
		}
		n.Stateful, n.Fp = true, op.StateFingerprint()
		n.KeyCols = [][]int{op.KeyColumns(0)}
		n.NewOp = func() (operators.Stateful, error) { return operators.NewDedup(ds, in, k) }
	case st.Over != nil:
		ov := st.Over
		os := operators.OverSpec{ID: n.Name, Keys: ov.Keys, EventTime: ov.OrderBy, Rows: ov.Rows, AllowedLateness: ov.AllowedLateness}
		if os.EventTime == "" {
			os.EventTime = EventTimeOf(g, st.Inputs[0])
		}
		for _, a := range ov.Aggregates {
			as, err := operators.ParseAggregate(a.Name, fmt.Sprintf("%s(%s)", a.Func, a.Column))
			if err != nil {
				return fmt.Errorf("over: %w", err)
			}
			os.Aggregates = append(os.Aggregates, as)
		}
		op, err := operators.NewOver(os, in, k)
		if err != nil {
			return fmt.Errorf("over: %w", err)
		}
		n.Stateful, n.Fp = true, op.StateFingerprint()
		n.KeyCols = [][]int{op.KeyColumns(0)}
		n.NewOp = func() (operators.Stateful, error) { return operators.NewOver(os, in, k) }
	case st.Lookup != nil:
		l := st.Lookup
		ls := operators.LookupSpec{ID: n.Name, Type: operators.InnerJoin, StreamKeys: l.LeftKeys, TableKeys: l.RightKeys, RightPrefix: l.RightPrefix}
		if l.Type == spec.JoinLeft {
			ls.Type = operators.LeftJoin
		}
		tsch := lookupSchemas[n.Name]
		if tsch == nil {
			return fmt.Errorf("lookup: the table's schema is unknown (declare lookup.schema, or put a Parquet file under %s)", store.Redact(l.URL))
		}
		empty := array.NewRecordBatch(tsch, emptyColumns(tsch), 0)
		op, err := operators.NewLookup(ls, in, []arrow.RecordBatch{empty})
		empty.Release()
		if err != nil {
			return fmt.Errorf("lookup: %w", err)
		}
		n.Out = op.OutputSchema()
		n.Lookup = &lookupNode{Spec: ls, Cfg: l, Table: tsch}
	default:
		return fmt.Errorf("stage %s: no stage kind set", n.Name)
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
			switch st.Kind() {
			case spec.KindWindow, spec.KindJoin, spec.KindTopN, spec.KindDedup, spec.KindOver:
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
