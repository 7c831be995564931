package runner

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/store"
)

// graphState is the runtime state of a graph pipeline's stateful stages.
type graphState struct {
	Subs  map[string][]operators.Stateful // per stateful stage, per subtask
	state map[string][]SubState           // per stateful stage, per subtask: committed base and deltas
	late  map[string]store.Store          // per stage with a late_url
	// pending is, per stage restored on demand (a window), per subtask,
	// its restored state not decoded yet (lazyrestore.go).
	pending map[string][]*pendingState
}

// graphOut is what a graph epoch produced besides the sink's rows.
type graphOut struct {
	Late    map[string][][]arrow.RecordBatch // per stage and input ("stage" or "stage/input"), per subtask
	changed map[string][]bool                // per stateful stage, per subtask
}

// RestoreGraph restores every stateful stage's subtasks from the plan's
// head (base files then deltas, by key-group range): a window stage on
// demand (lazyrestore.go), its state migrated to the stage's layout when
// the plan evolved it (rp.stages); the other stages eagerly.
func (r *Runner) RestoreGraph(ctx context.Context, rp *RunPlan) error {
	gp := r.Plan.Graph
	gs := &graphState{Subs: map[string][]operators.Stateful{}, state: map[string][]SubState{}, late: map[string]store.Store{},
		pending: map[string][]*pendingState{}}
	r.Graph = gs
	from := rp.From
	var m *manifest.Manifest
	if from != nil && from.Kind != manifest.RestoreReset {
		m = from.Manifest
	}
	for _, n := range gp.State {
		srs, emitted, nParent := RestoreSources(m, n.Name, r.Parallelism, r.K)
		var ev *operators.Evolution
		var chain []dataflow.StateMigration
		if mig := rp.Stages[n.Name]; mig != nil {
			ev, chain = mig.Ev, mig.Chain
		}
		share := rp.share && nParent == r.Parallelism && (ev == nil || ev.SameLayout()) && chain == nil
		subs := make([]operators.Stateful, r.Parallelism)
		states := make([]SubState, r.Parallelism)
		pend := make([]*pendingState, r.Parallelism)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(runtime.GOMAXPROCS(0))
		for s, sr := range srs {
			if !r.owns(s) {
				continue // another worker's (workers.go)
			}
			g.Go(func() error {
				op, err := n.NewOp()
				if err != nil {
					return err
				}
				op.SetAllocator(r.Mem)
				if onDemand(op) {
					ps, err := r.restoreOnDemand(gctx, from, op, s, sr, emitted, ev, chain)
					if err != nil {
						return fmt.Errorf("stage %s: %w", n.Name, err)
					}
					pend[s] = ps
				} else if lr, ok := op.(operators.LazyRestorer); ok && (ev == nil || ev.SameLayout()) && chain == nil {
					if err := r.restoreLazy(gctx, from, n, lr, s, sr, emitted); err != nil {
						return err
					}
				} else if err := r.restoreWhole(gctx, from, n, op, s, sr, emitted, ev != nil && !ev.SameLayout() || chain != nil); err != nil {
					return err
				}
				if share && len(sr.Files) == 1 {
					st := SubState{Base: from.ref(sr.Files[0])}
					for _, d := range sr.deltas {
						st.Deltas = append(st.Deltas, from.ref(d))
					}
					states[s] = st
				}
				subs[s] = op
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		gs.Subs[n.Name], gs.state[n.Name] = subs, states
		if anyPending(pend) {
			gs.pending[n.Name] = pend
		}
	}
	for _, n := range gp.Nodes {
		if n.LateURL == "" {
			continue
		}
		if gp.Linear && r.St.Late != nil {
			gs.late[n.Name] = r.St.Late // source.late_url, opened with the sources
			continue
		}
		s, err := r.openSide(ctx, "late", "stages."+n.Name+".late_url", n.LateURL)
		if err != nil {
			return err
		}
		gs.late[n.Name] = s
	}
	return nil
}

// restoreWhole restores subtask s of a stage that cannot restore on demand
// (op, fresh): its base rows, then its deltas in order.
func (r *Runner) restoreWhole(ctx context.Context, from *RestoreSource, n *dataflow.Node, op operators.Stateful, s int, sr SubtaskRestore, emitted int64, migrates bool) error {
	if migrates {
		return fmt.Errorf("stage %s: its state layout evolves, but only a window's state can be migrated (internal error)", n.Name)
	}
	read := func(f manifest.FileRef) ([]arrow.RecordBatch, error) {
		recs, err := r.readRange(ctx, from, f, sr)
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", n.Name, err)
		}
		return recs, nil
	}
	if rr, ok := op.(operators.RestoreReserver); ok {
		rr.ReserveRestore(restoreRows(sr))
	}
	var base []arrow.RecordBatch
	for _, f := range sr.Files {
		recs, err := read(f)
		if err != nil {
			return err
		}
		base = append(base, recs...)
	}
	err := op.Restore(base, sr.Lo, sr.Hi, emitted)
	ReleaseBatches(base)
	if err != nil {
		return fmt.Errorf("stage %s: restore subtask %d: %w", n.Name, s, err)
	}
	for _, d := range sr.deltas {
		recs, err := read(d)
		if err != nil {
			return err
		}
		err = applyDelta(op, d.Kind, recs, sr.Lo, sr.Hi)
		ReleaseBatches(recs)
		if err != nil {
			return fmt.Errorf("stage %s: restore subtask %d: delta %s: %w", n.Name, s, d.Path, err)
		}
	}
	return nil
}

// restoreRows bounds the state rows a subtask's restore adds: its files'
// and its deltas' upserts, each file's rows scaled to the share of its key
// groups the subtask owns (rows spread evenly over key groups).
func restoreRows(sr SubtaskRestore) int {
	var n int64
	add := func(f manifest.FileRef) {
		lo, hi := max(f.KeyGroupLo, sr.Lo), min(f.KeyGroupHi, sr.Hi)
		if span := f.KeyGroupHi - f.KeyGroupLo; span > 0 && hi > lo {
			n += f.Rows * int64(hi-lo) / int64(span)
		} else if span <= 0 {
			n += f.Rows
		}
	}
	for _, f := range sr.Files {
		add(f)
	}
	for _, d := range sr.deltas {
		if d.Kind == manifest.DeltaUpserts {
			add(d)
		}
	}
	return int(n)
}

// processGraph runs an epoch's rows through the graph's nodes in order,
// every stateful stage advanced to its watermark (the pipeline's, minus the
// delays of the stages before it). Rows keep the subtask that produced them
// along forward edges: a stateless stage maps each subtask's rows, so the
// stages after a keyed stage run per subtask and its sink writes one file
// per subtask (the linear form's splitting); rows from the sources are
// subtask 0's.
func (r *Runner) processGraph(ctx context.Context, results []*fileResult, wm int64) (*processed, error) {
	if out := r.streamedGraph(results); out != nil {
		return out, nil // a graph without a keyed stage wrote its rows while decoding (graphstream.go)
	}
	gp := r.Plan.Graph
	n := r.Parallelism
	out := &processed{Out: make([][]arrow.RecordBatch, n), outRows: make([]int64, n), changed: make([]bool, n),
		Graph: &graphOut{Late: map[string][][]arrow.RecordBatch{}, changed: map[string][]bool{}}}
	rows := map[*dataflow.Node][][]arrow.RecordBatch{} // per node, per subtask
	of := func(nd *dataflow.Node) [][]arrow.RecordBatch {
		if rows[nd] == nil {
			rows[nd] = make([][]arrow.RecordBatch, n)
		}
		return rows[nd]
	}
	for _, res := range results {
		nd := res.node
		if nd == nil {
			if len(res.batches) > 0 {
				return nil, fmt.Errorf("source file %s belongs to no source of the graph (internal error)", res.key)
			}
			continue
		}
		of(nd)[r.slot0()] = append(of(nd)[r.slot0()], res.batches...)
	}
	var lateN, winN int64
	// replicated: nodes whose rows every worker holds whole (several
	// workers, after a gather).
	replicated := map[*dataflow.Node]bool{}
	// ran: filters a canonical stage's rows went through before the sort
	// (dataflow.FiltersAfter); the last one's rows are set.
	ran := map[*dataflow.Node]bool{}
	for _, nd := range gp.Nodes {
		if nd.Kind == "source" || nd.AtDecode || ran[nd] {
			continue
		}
		switch {
		case nd.Stage != nil || nd.Lookup != nil:
			replicated[nd] = replicated[nd.Ins[0]]
			for s, bs := range rows[nd.Ins[0]] {
				for _, b := range bs {
					o, err := r.mapNode(nd, b)
					if err != nil {
						return nil, err
					}
					if o.NumRows() > 0 {
						of(nd)[s] = append(of(nd)[s], o)
					}
				}
			}
		case nd.Stateful:
			in := map[*dataflow.Node][]arrow.RecordBatch{}
			for _, u := range nd.Ins {
				if _, ok := in[u]; !ok {
					in[u] = slices.Concat(rows[u]...)
				}
			}
			if r.cl != nil {
				// Several workers: this worker's subtasks' rows from all
				// of them (workers.go).
				var err error
				if in, err = r.exchange(ctx, nd, in, replicated); err != nil {
					return nil, err
				}
				wm = r.cl.wm // the epoch's: known after its first round
			}
			swm := nd.InputWatermark(wm, r.sourceWM)
			if v, ok := r.StageWM[nd.Name]; ok {
				swm = v // a replay: the watermark the stage recorded
			}
			subOut, late, changed, emitted, nLate, err := r.runStateful(ctx, nd, in, swm)
			if err != nil {
				return nil, err
			}
			if nd.Canonical {
				// In an order of their values only: the next keyed
				// stage's ties then do not depend on the parallelism.
				// The filters right after the stage run first: the sort
				// then orders only the rows they pass, the same way.
				bs := slices.Concat(subOut...)
				at, through := nd, []*dataflow.Node{nd}
				for _, f := range gp.FiltersAfter(nd) {
					var passed []arrow.RecordBatch
					for _, b := range bs {
						o, err := r.mapNode(f, b)
						if err != nil {
							return nil, err
						}
						if o.NumRows() > 0 {
							passed = append(passed, o)
						}
					}
					bs, at, ran[f] = passed, f, true
					through = append(through, f)
				}
				one, err := operators.CanonicalOrder(bs, r.Mem)
				if err != nil {
					return nil, fmt.Errorf("stage %s: %w", nd.Name, err)
				}
				if r.cl != nil {
					// Several workers: every worker gathers the stage's
					// rows of all and orders them alike (workers.go).
					if one, err = r.gather(ctx, nd, one); err != nil {
						return nil, err
					}
					for _, x := range through {
						replicated[x] = true
					}
				}
				if one != nil {
					of(at)[r.slot0()] = append(of(at)[r.slot0()], one)
				}
			} else {
				for s := range subOut {
					of(nd)[s] = append(of(nd)[s], subOut[s]...)
				}
			}
			for k, v := range late {
				out.Graph.Late[k] = v
			}
			out.Graph.changed[nd.Name] = changed
			lateN += nLate
			if nd.Kind == "window" {
				winN += emitted
			}
		}
	}
	// Rows every worker holds are written by worker 0 alone.
	dup := func(nd *dataflow.Node) bool { return replicated[nd] && r.cl.self != 0 }
	for s, bs := range of(gp.Sink) {
		if dup(gp.Sink) {
			break
		}
		out.Out[s] = bs
		out.outRows[s] = countRows(bs)
	}
	for _, nd := range gp.Extra {
		if dup(nd) {
			out.Extra = append(out.Extra, make([][]arrow.RecordBatch, n))
			continue
		}
		out.Extra = append(out.Extra, of(nd))
	}
	out.Late, out.Windows = lateN, winN
	return out, nil
}

// runStateful routes a stateful node's input rows to its subtasks by key
// group, processes them in parallel and advances every subtask to wm. It
// returns each subtask's emitted rows, the late rows by side-output key,
// which subtasks changed, and counts.
func (r *Runner) runStateful(ctx context.Context, nd *dataflow.Node, rows map[*dataflow.Node][]arrow.RecordBatch, wm int64) (
	[][]arrow.RecordBatch, map[string][][]arrow.RecordBatch, []bool, int64, int64, error) {
	p := r.Parallelism
	subs := r.Graph.Subs[nd.Name]
	// sels[i][j][s]: input i, batch j, subtask s.
	sels := make([][][][]int32, len(nd.Ins))
	for i, in := range nd.Ins {
		for _, b := range rows[in] {
			sel, ok := r.preselected(i, b) // several workers: routed by the exchange
			if !ok {
				var err error
				if sel, err = operators.PartitionIndices(b, nd.KeyCols[i], p, r.K); err != nil {
					return nil, nil, nil, 0, 0, fmt.Errorf("stage %s: %w", nd.Name, err)
				}
			}
			sels[i] = append(sels[i], sel)
		}
	}
	var partials []arrow.RecordBatch // several workers: other workers' rows as partial aggregates
	if r.cl != nil {
		partials = r.cl.partials
	}
	if err := r.loadStage(ctx, nd, rows, sels, partials, wm); err != nil {
		return nil, nil, nil, 0, 0, err
	}
	subOut := make([][]arrow.RecordBatch, p)
	lateBy := make([][][]arrow.RecordBatch, len(nd.Ins)) // input, subtask
	for i := range lateBy {
		lateBy[i] = make([][]arrow.RecordBatch, p)
	}
	changed := make([]bool, p)
	var mu sync.Mutex
	var nLate, emitted int64
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for s, op := range subs {
		if op == nil {
			continue // another worker's subtask
		}
		g.Go(func() error {
			ch := false
			var myLate, myEm int64
			if ao, ok := op.(operators.ArrivalOrdered); ok && r.Processing > 0 {
				ao.BeginEpoch(r.Processing)
			}
			for i, in := range nd.Ins {
				for j, b := range rows[in] {
					sel := sels[i][j][s]
					ch = ch || len(sel) > 0
					lb, err := op.ProcessInput(i, b, sel)
					if err != nil {
						return fmt.Errorf("stage %s: %w", nd.Name, err)
					}
					if lb != nil && lb.NumRows() > 0 {
						myLate += lb.NumRows()
						lateBy[i][s] = append(lateBy[i][s], lb)
					}
				}
			}
			if len(partials) > 0 {
				lo, hi := keygroup.Range(s, p, r.K)
				c := op.(operators.Combiner)
				for _, b := range partials {
					n, err := c.MergePartials(b, lo, hi)
					if err != nil {
						return fmt.Errorf("stage %s: %w", nd.Name, err)
					}
					ch = ch || n > 0
				}
			}
			em, err := op.Advance(wm)
			if err != nil {
				return fmt.Errorf("stage %s: %w", nd.Name, err)
			}
			if em != nil && em.NumRows() > 0 {
				ch = true
				myEm = em.NumRows()
				subOut[s] = []arrow.RecordBatch{em}
			}
			if d, rm := op.Dirty(); d+rm > 0 {
				ch = true
			}
			changed[s] = ch
			mu.Lock()
			nLate += myLate
			emitted += myEm
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, nil, 0, 0, err
	}
	late := map[string][][]arrow.RecordBatch{}
	for i, bySub := range lateBy {
		key := nd.Name
		if len(nd.Ins) > 1 {
			key = nd.Name + "/" + nd.Ins[i].Name
		}
		if countSub(bySub) > 0 {
			late[key] = bySub
		}
	}
	return subOut, late, changed, emitted, nLate, nil
}

func countSub(bs [][]arrow.RecordBatch) int64 {
	var n int64
	for _, b := range bs {
		n += countRows(b)
	}
	return n
}

// writeGraph writes a graph epoch's late rows (to each stage's late_url)
// and the changed state of every stateful stage, into w.
func (r *Runner) writeGraph(ctx context.Context, att *epoch.Attempt, out *processed, w *written) error {
	gp, gs := r.Plan.Graph, r.Graph
	w.graph = map[string][]SubState{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4 * runtime.GOMAXPROCS(0))
	for key, bySub := range out.Graph.Late {
		stageName, dir, _ := CutLast(key)
		st := gs.late[stageName]
		if st == nil {
			continue // counted only
		}
		nd := gp.ByName[stageName]
		schema := nd.Ins[0].Out
		if dir != "" {
			schema = gp.ByName[dir].Out
		}
		for s, bs := range bySub {
			if len(bs) == 0 {
				continue
			}
			g.Go(func() error {
				data, err := formats.EncodeParquet(schema, bs, formats.EncodeOptions{Mem: r.Mem})
				if err != nil {
					return err
				}
				ref, err := att.WriteSide(gctx, st, dir, s, "parquet", data, countRows(bs))
				if err != nil {
					return err
				}
				ref.Path = refURL(nd.LateURL, ref.Path)
				ref.Kind = manifest.SideOutputLate
				mu.Lock()
				w.sideRefs = append(w.sideRefs, ref)
				mu.Unlock()
				return nil
			})
		}
	}
	for _, nd := range gp.State {
		states := append([]SubState(nil), gs.state[nd.Name]...)
		w.graph[nd.Name] = states
		changed := out.Graph.changed[nd.Name]
		subs, pend := gs.Subs[nd.Name], gs.pending[nd.Name]
		writes := func(s int) bool {
			return r.owns(s) && (changed != nil && changed[s] || states[s].Base.Path == "")
		}
		var full []bool
		var first operators.Stateful
		for _, op := range subs {
			if op != nil {
				first = op
				break
			}
		}
		if first != nil && rowCounted(first) {
			full = CompactPlanRows(states, writes, func(s int) (int64, int64) {
				if subs[s] == nil {
					return 0, 0
				}
				return deltaRows(subs[s], pendingRowsOf(pend, s))
			})
		} else {
			full = CompactPlan(states, writes, func(s int) (int64, int64) {
				if subs[s] == nil {
					return 0, 0
				}
				return dirtySize(subs[s], pendingRowsOf(pend, s))
			})
		}
		for s, op := range subs {
			if !writes(s) {
				continue
			}
			g.Go(func() error {
				st, err := r.writeOpState(gctx, att, nd.Name, s, op, states[s], full[s], func() error {
					if pend == nil {
						return nil
					}
					return r.loadRest(gctx, pend, op, s)
				})
				if err != nil {
					return fmt.Errorf("stage %s: %w", nd.Name, err)
				}
				states[s] = st // each goroutine its own index
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	sort.Slice(w.sideRefs, func(i, j int) bool { return w.sideRefs[i].Path < w.sideRefs[j].Path })
	return nil
}

// CutLast splits "stage/input" into its parts ("stage", "" without input).
func CutLast(key string) (string, string, bool) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}

// graphOperators returns the manifest's operator states of a graph epoch.
func (r *Runner) graphOperators(e *epochEdit) []manifest.OperatorState {
	var ops []manifest.OperatorState
	for _, nd := range r.Plan.Graph.State {
		// A stage's own watermark (the pipeline's minus the delays before
		// it) is what its restore must start from.
		emitted := int64(manifest.NoWatermark)
		for _, op := range r.Graph.Subs[nd.Name] {
			if op != nil {
				emitted = max(emitted, op.Watermark())
			}
		}
		os := manifest.OperatorState{ID: nd.Name, EmittedThrough: emitted}
		for _, st := range e.out.graph[nd.Name] {
			os.Files = append(os.Files, st.Base)
			os.Deltas = append(os.Deltas, st.Deltas...)
		}
		ops = append(ops, os)
	}
	return ops
}

var _ = array.NewRecordBatch
