package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// Looking inside the state of a graph pipeline (floe state cat / diff /
// export on the sources / stages / sinks form).
//
// Every keyed stage keeps its state in the epoch under its name (the
// operator id), as bases and deltas per key-group range. The state of a
// retained epoch is restored exactly as a run restores it: restoreGraph
// (graphexec.go) reads each selected stage's bases and deltas into one
// operator per subtask at the epoch's own parallelism. Then:
//
//   - a window stage is finalised like the linear form's window (every
//     open (key, window) becomes the row it would emit if the input ended
//     at this epoch), and prints, diffs and exports exactly as it does;
//   - a dedup, top_n or join stage shows the rows it holds, decoded from
//     its snapshot (its state schema without key_group): a dedup's open
//     scope and waiting rows per key, a top_n's kept rows per group and
//     window, a join's buffered rows of each side (a row of one side
//     without the other side's columns, which are null). The hidden
//     window-time column a stage reading window results adds is left out.
//
// Nothing is written anywhere; late_url side outputs are not opened.

// keyedStages returns the names of the graph's keyed (stateful) stages, in
// node order.
func keyedStages(gp *dataflow.GraphPlan) []string {
	out := make([]string, len(gp.State))
	for i, n := range gp.State {
		out[i] = n.Name
	}
	return out
}

// unknownStage is the error for a --op that names no keyed stage of the
// graph: it names the keyed stages.
func (x *inspector) unknownStage(name string) error {
	gp := x.pl.Graph
	if gp.Linear {
		// A linear pipeline names its stateful operators by id.
		ids := dataflow.OpIDs(x.pl.Ops)
		if len(ids) == 0 {
			return fmt.Errorf("unknown operator %q: pipeline %s has no stateful operator", name, x.p.Name)
		}
		return fmt.Errorf("unknown operator %q: the stateful operators are %s", name, strings.Join(ids, ", "))
	}
	keyed := keyedStages(gp)
	avail := "pipeline " + x.p.Name + " has no keyed stage"
	if len(keyed) > 0 {
		avail = "the keyed stages are " + strings.Join(keyed, ", ")
	}
	if n := gp.ByName[name]; n != nil {
		if n.Kind == "source" {
			return fmt.Errorf("%q is a source, not a stage: %s", name, avail)
		}
		return fmt.Errorf("stage %q (%s) keeps no state: %s", name, n.Kind, avail)
	}
	return fmt.Errorf("unknown stage %q: %s", name, avail)
}

// readGraph restores the keyed stages of a graph epoch (those q.Op
// selects) and decodes them.
func (x *inspector) readGraph(ctx context.Context, m *manifest.Manifest, g *manifest.Generation, q StateQuery) (*StateView, error) {
	gp := x.pl.Graph
	var sel []*dataflow.Node
	for _, n := range gp.State {
		if q.Op == "" || n.Name == q.Op {
			sel = append(sel, n)
		}
	}
	if q.Op != "" && len(sel) == 0 {
		return nil, x.unknownStage(q.Op)
	}
	v := &StateView{Pipeline: x.p.Name, Epoch: m.Epoch, Head: x.head.Epoch(), Generation: m.Generation,
		Parallelism: g.Parallelism, MaxParallelism: g.MaxParallelism, Watermark: m.Watermark}
	if len(sel) == 0 {
		return v, nil
	}
	sg, err := x.p.Graph()
	if err != nil {
		return nil, err
	}
	// restoreGraph restores the plan's stateful nodes and opens the late
	// outputs of its nodes: give it the selected stages and no nodes.
	sub := *gp
	sub.Nodes, sub.State = nil, sel
	pl := *x.pl
	pl.Graph = &sub
	p, k := g.Parallelism, g.MaxParallelism
	// Only the keyed state is needed: the processed-file set and the
	// output log are left out of the head.
	hm := *m
	hm.Source.Inline, hm.Source.Segments, hm.OutputLog = nil, nil, nil
	rp := &runner.RunPlan{Plan: &pl, Parallelism: p, K: k}
	rp.Head = &epoch.Head{Manifest: &hm, Generation: g}
	rp.From = &runner.RestoreSource{Manifest: &hm, Generation: g, Store: x.st.State, Shared: true}
	r := &runner.Runner{P: x.p, Opts: &runner.Options{}, Log: slog.New(slog.DiscardHandler), St: x.st, C: x.c,
		Mem: memory.DefaultAllocator, Plan: &pl, Parallelism: p, K: k}
	if err := r.RestoreGraph(ctx, rp); err != nil {
		return nil, fmt.Errorf("epoch %d: %w", m.Epoch, err)
	}
	if err := r.LoadEverything(ctx); err != nil {
		return nil, fmt.Errorf("epoch %d: %w", m.Epoch, err)
	}
	for _, n := range sel {
		st := sg.Stage(n.Name)
		if st == nil {
			return nil, fmt.Errorf("internal error: keyed stage %s is not in the spec", n.Name)
		}
		srs, emitted, _ := runner.RestoreSources(&hm, n.Name, p, k)
		subs := r.Graph.Subs[n.Name]
		r.Graph.Subs[n.Name] = nil
		var op *WindowState
		if n.Finalised() { // a window stage (dataflow kind_window.go)
			ws, err := dataflow.WindowSpec(n.Name, st.Window, dataflow.EventTimeOf(sg, st.Inputs[0]))
			if err != nil {
				return nil, fmt.Errorf("stage %s: %w", n.Name, err)
			}
			if own, err := dataflow.OwnWindowKey(st.Window, n.Ins[0], ws.EventTime); err == nil && own != nil {
				// Keyed by its input's window: the operator's key is the
				// other columns (graphwin.go).
				ws.Keys = slices.DeleteFunc(slices.Clone(ws.Keys), dataflow.IsWindowBound)
			}
			op = newWindowState(&ws, emitted)
			err = op.finalise(subs, srs, k)
			if err == nil && op.schema == nil {
				var fresh operators.Stateful
				if fresh, err = n.NewOp(); err == nil {
					op.schema = fresh.OutputSchema()
				}
			}
			if err != nil {
				return nil, fmt.Errorf("epoch %d: stage %s: %w", m.Epoch, n.Name, err)
			}
		} else {
			if op, err = heldState(n, st, emitted, subs, srs); err != nil {
				return nil, fmt.Errorf("epoch %d: stage %s: %w", m.Epoch, n.Name, err)
			}
		}
		slices.SortFunc(op.Rows, compareRows)
		op.Total = len(op.Rows)
		op.keepKeys(q.Keys)
		v.Ops = append(v.Ops, op)
	}
	return v, nil
}

// heldLayout is where a stage's state schema keeps what a StateRow shows.
type heldLayout struct {
	keys    [][]int       // per join side (one entry otherwise): the key columns
	cols    []int         // per WindowState.Columns entry its state column; -1: topn.rank (computed)
	fields  []arrow.Field // the export fields of WindowState.Columns
	keyType []arrow.Field // the export fields of the key (a join: named by the left keys)
}

// heldState decodes the rows a dedup, top_n, over or join stage's restored
// subtasks hold, from their snapshots, as its kind says they read
// (dataflow.HeldRowsOf).
func heldState(n *dataflow.Node, st *spec.Stage, emitted int64, subs []operators.Stateful, srs []runner.SubtaskRestore) (*WindowState, error) {
	h := dataflow.HeldRowsOf(st)
	if h == nil {
		return nil, fmt.Errorf("internal error: stage kind %s keeps no rows to show", n.Kind)
	}
	fresh, err := n.NewOp()
	if err != nil {
		return nil, err
	}
	sch := fresh.StateSchema()
	if sch.NumFields() == 0 || sch.Field(0).Name != operators.ColKeyGroup {
		return nil, fmt.Errorf("internal error: the state schema does not start with %s: %s", operators.ColKeyGroup, sch)
	}
	op := &WindowState{ID: n.Name, Kind: n.Kind, Stage: dataflow.StateHeader(st), EmittedThrough: emitted}
	idx := func(name string) (int, error) {
		is := sch.FieldIndices(name)
		if len(is) != 1 {
			return 0, fmt.Errorf("internal error: the state schema has no column %q: %s", name, sch)
		}
		return is[0], nil
	}
	var lay heldLayout
	skip := map[int]bool{0: true}
	op.Keys = slices.Clone(h.Keys)
	if h.SideKeys != nil {
		// A stage of two sides: each side's key columns, the key
		// named by the first side's.
		for _, ks := range h.SideKeys {
			var cols []int
			for _, k := range ks {
				c, err := idx(k)
				if err != nil {
					return nil, err
				}
				cols = append(cols, c)
			}
			lay.keys = append(lay.keys, cols)
		}
		for _, c := range lay.keys[0] {
			f := sch.Field(c)
			f.Name = strings.TrimPrefix(f.Name, h.Sides[0])
			lay.keyType = append(lay.keyType, f)
		}
	} else {
		var cols []int
		for _, k := range h.Keys {
			c, err := idx(k)
			if err != nil {
				return nil, err
			}
			cols = append(cols, c)
			skip[c] = true
			lay.keyType = append(lay.keyType, sch.Field(c))
		}
		lay.keys = [][]int{cols}
	}
	for c, f := range sch.Fields() {
		if skip[c] || strings.HasSuffix(f.Name, dataflow.HiddenTime) {
			continue
		}
		if h.Rank != "" && f.Name == h.Seq {
			// The rank in the group, from the snapshot's order.
			lay.cols = append(lay.cols, -1)
			op.Columns = append(op.Columns, h.Rank)
			lay.fields = append(lay.fields, arrow.Field{Name: h.Rank, Type: arrow.PrimitiveTypes.Int64})
		}
		// A carried input window's bounds show under their own names
		// (graphwin.go).
		f.Name = strings.NewReplacer(dataflow.HiddenStart, operators.ColWindowStart, dataflow.HiddenEnd, operators.ColWindowEnd).Replace(f.Name)
		lay.cols = append(lay.cols, c)
		op.Columns = append(op.Columns, f.Name)
		lay.fields = append(lay.fields, f)
	}
	at := func(names []string) ([]int, error) {
		var out []int
		for _, name := range names {
			i := slices.Index(op.Columns, name)
			if i < 0 {
				return nil, fmt.Errorf("internal error: the state schema has no column %q: %s", name, sch)
			}
			out = append(out, i)
		}
		return out, nil
	}
	if op.identCols, err = at(h.Ident); err != nil {
		return nil, err
	}
	if op.sortCols, err = at(h.Sort); err != nil {
		return nil, err
	}
	seqAt, err := at([]string{h.Seq})
	if err != nil {
		return nil, err
	}
	op.noCmp = map[int]bool{seqAt[0]: true}
	if h.Sides != nil {
		op.joinSide = 1 + op.identCols[0]
		for c, name := range op.Columns { // the row's values identify it
			if slices.ContainsFunc(h.Sides, func(pre string) bool { return strings.HasPrefix(name, pre) }) {
				op.identCols = append(op.identCols, c)
			}
		}
	}
	op.schema = arrow.NewSchema(append(slices.Clone(lay.keyType), lay.fields...), nil)
	for s, sub := range subs {
		op.States += sub.Len()
		recs, err := sub.Snapshot()
		subs[s] = nil
		if err != nil {
			return nil, fmt.Errorf("subtask %d: snapshot: %w", s, err)
		}
		err = op.appendHeld(recs, &lay, s, srs[s])
		runner.ReleaseBatches(recs)
		if err != nil {
			return nil, fmt.Errorf("subtask %d: %w", s, err)
		}
	}
	return op, nil
}

// appendHeld appends the rows of subtask s's snapshot batches to op.Rows.
func (op *WindowState) appendHeld(recs []arrow.RecordBatch, lay *heldLayout, s int, sr runner.SubtaskRestore) error {
	var b strings.Builder
	seen := map[string]int{} // identities so far: the n-th of equal rows
	var group string         // top_n: the current group (key group, key, window)
	var rank int64
	for _, rec := range recs {
		kgs, ok := rec.Column(0).(*array.Int32)
		if !ok {
			return fmt.Errorf("internal error: state column %s is %s", operators.ColKeyGroup, rec.Column(0).DataType())
		}
		for i := range int(rec.NumRows()) {
			kg := int(kgs.Value(i))
			if kg < sr.Lo || kg >= sr.Hi {
				return fmt.Errorf("internal error: subtask %d [%d,%d) holds a row of key group %d", s, sr.Lo, sr.Hi, kg)
			}
			row := StateRow{KeyGroup: kg, Subtask: s}
			rankAt := -1
			for j, c := range lay.cols {
				if c < 0 {
					rankAt = j
					row.Values = append(row.Values, nil)
					continue
				}
				row.Values = append(row.Values, cellValue(rec.Column(c), i))
			}
			keys := lay.keys[0]
			if op.joinSide > 0 {
				if side, _ := row.Values[op.joinSide-1].(int8); side == 1 {
					keys = lay.keys[1]
				}
			}
			for _, c := range keys {
				row.Key = append(row.Key, cellValue(rec.Column(c), i))
			}
			b.Reset()
			fmt.Fprintf(&b, "%d\x00", kg)
			for _, v := range row.Key {
				b.WriteString(fieldText(v))
				b.WriteByte(0)
			}
			if rankAt >= 0 {
				for _, c := range op.identCols {
					if c != rankAt {
						b.WriteString(fieldText(row.Values[c]))
						b.WriteByte(0)
					}
				}
				if g := b.String(); g != group {
					group, rank = g, 0
				}
				rank++
				row.Values[rankAt] = rank
				b.Reset()
			}
			for _, v := range row.Key {
				b.WriteString(fieldText(v))
				b.WriteByte(0)
			}
			for _, c := range op.identCols {
				b.WriteString(fieldText(row.Values[c]))
				b.WriteByte(0)
			}
			id := b.String()
			seen[id]++
			row.ident = id + strconv.Itoa(seen[id])
			for _, c := range op.sortCols {
				row.id = append(row.id, row.Values[c])
			}
			op.Rows = append(op.Rows, row)
		}
	}
	return nil
}

// writeHeldText prints a dedup, top_n or join stage's header and rows.
func (op *WindowState) writeHeldText(bw *errWriter) {
	shown := fmt.Sprintf("%d state rows", op.Total)
	if len(op.Rows) != op.Total {
		shown = fmt.Sprintf("%d of %d state rows", len(op.Rows), op.Total)
	}
	bw.printf("# operator %s: %s; key [%s]; watermark %s; %s\n",
		op.ID, op.Stage, strings.Join(op.Keys, ", "), runner.FmtWM(op.EmittedThrough), shown)
	for i := range op.Rows {
		r := &op.Rows[i]
		bw.printf("op=%s %s key_group=%d subtask=%d\n", op.ID, op.rowText(r), r.KeyGroup, r.Subtask)
	}
}

// heldHeaderJSON is a dedup, top_n or join stage's header in cat --json.
func (op *WindowState) heldHeaderJSON() object {
	return object{{"id", op.ID}, {"kind", op.Kind}, {"stage", op.Stage}, {"keys", op.Keys}, {"columns", op.Columns},
		{"watermark", wmJSON(op.EmittedThrough)}, {"state_rows", op.Total}}
}

// columnsText ends a held row's text: its shown columns as name=value.
func (op *WindowState) columnsText(b *strings.Builder, r *StateRow) string {
	sep := ""
	for c, name := range op.Columns {
		if op.hidden(r, c) {
			continue
		}
		fmt.Fprintf(b, "%s%s=%s", sep, name, fieldText(r.Values[c]))
		sep = " "
	}
	return b.String()
}

// columnsJSON is a held row's shown columns, in order.
func (op *WindowState) columnsJSON(r *StateRow) object {
	o := make(object, 0, len(op.Columns))
	for c, name := range op.Columns {
		if !op.hidden(r, c) {
			o = append(o, field{name, jsonValue(r.Values[c])})
		}
	}
	return o
}

// changeText is a changed held row in diff: its key and the columns that
// did not change as name=value, then each column that did as
// name: old -> new (the arrival sequence left out).
func (op *WindowState) changeText(c *RowChange) string {
	var b strings.Builder
	for i, k := range op.Keys {
		fmt.Fprintf(&b, "%s=%s ", k, fieldText(c.New.Key[i]))
	}
	var changed strings.Builder
	sep := ""
	for i, name := range op.Columns {
		switch {
		case op.noCmp[i] || op.hidden(&c.New, i):
		case sameValues(c.Old.Values[i:i+1], c.New.Values[i:i+1]):
			fmt.Fprintf(&b, "%s%s=%s", sep, name, fieldText(c.New.Values[i]))
			sep = " "
		default:
			fmt.Fprintf(&changed, " %s: %s -> %s", name, fieldText(c.Old.Values[i]), fieldText(c.New.Values[i]))
		}
	}
	return b.String() + changed.String()
}

// changeJSON is a changed held row in diff --json: its key and all its
// shown columns before and after.
func (op *WindowState) changeJSON(c *RowChange) object {
	return object{{"key", namedValues(op.Keys, c.New.Key)}, {"old", op.columnsJSON(&c.Old)}, {"new", op.columnsJSON(&c.New)}}
}
