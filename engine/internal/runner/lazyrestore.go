package runner

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
)

// Restore on demand.
//
// A run restores a subtask's window state (the linear form's window, every
// window stage of a graph: onDemand) in two steps. At start it reads
// the subtask's base files and deltas but decodes only the deltas and the
// footers of the base files: per row group, the range of key groups it
// holds and its earliest window_end (the state is written sorted by key
// group, in row groups of 16k rows, so these ranges are narrow). Each
// epoch then decodes, before its rows reach the subtask, the key groups
// that epoch needs:
//
//   - every key group its input touches (a new row must meet its key's open
//     windows and sessions);
//   - every key group holding a window that may fire or be purged at the
//     epoch's watermark (a row group whose earliest window_end is at or
//     below the watermark, a delta upsert whose window_end is);
//
// closed over row groups (a row group that holds a wanted key group is
// decoded whole, and all of its key groups count as loaded), then the
// deltas' rows of exactly those key groups are applied in order. A key
// group is loaded once and from then on lives in memory like before. Key
// groups no epoch needs are never decoded: a run over one small file after
// a long history pays for the state it touches. A graph stage decodes when
// its rows are routed (loadStage, from runStateful), with its own
// watermark. Writing a new base
// (compaction) needs every window, so it loads the rest first; deltas never
// do. Inspection, replay and bundles load everything at restore.
//
// This is correct because nothing reads or changes a key group's windows
// except rows of that key group (routed by key) and Advance (which touches
// only windows that are due): both are covered by the rules above before
// they happen.

// stateRowGroupRows is the row-group size of state files: the granularity
// of restore on demand (a variable for tests).
var StateRowGroupRows int64 = 16 << 10

// pendingState is the part of one subtask's restored state not decoded yet.
type pendingState struct {
	lo, hi  int   // the subtask's key-group range
	emitted int64 // the watermark passed to Restore
	units   []stateUnit
	deltas  []pendingDelta
	loaded  []bool  // per key group (index kg-lo)
	dueAt   []int64 // per key group: the earliest window_end of its delta upserts
	left    int     // key groups not loaded
	rows    int64   // base rows not decoded (a size estimate)
	migrate func(recs []arrow.RecordBatch) ([]arrow.RecordBatch, error)
}

// stateUnit is one row group of a base file, not decoded yet.
type stateUnit struct {
	path         string
	data         []byte
	group        int
	kgMin, kgMax int   // clipped to the subtask's range
	minEnd       int64 // earliest window_end; known says the footer had statistics
	known        bool
	rows         int64
}

// pendingDelta is one delta file of the restore, decoded (rows of the
// subtask's key groups, migrated to the plan's layout), kept until every key
// group is loaded.
type pendingDelta struct {
	path string
	kind string // manifest.DeltaUpserts, DeltaTombstones or DeltaMerges
	recs []arrow.RecordBatch
}

func (ps *pendingState) release() {
	for _, d := range ps.deltas {
		ReleaseBatches(d.recs)
	}
	ps.deltas, ps.units = nil, nil
}

// addBase registers the row groups of one base file that may hold rows of
// the subtask's key groups.
func (ps *pendingState) addBase(f manifest.FileRef, data []byte) error {
	ranges, err := formats.ParquetRowGroupRanges(data, operators.ColKeyGroup, operators.ColWindowEnd)
	if err != nil {
		return fmt.Errorf("restore %s: %w", f.Path, err)
	}
	for g, rg := range ranges {
		u := stateUnit{path: f.Path, data: data, group: g, kgMin: ps.lo, kgMax: ps.hi - 1, rows: rg.Rows, known: rg.Known[0] && rg.Known[1]}
		if u.known {
			if rg.Max[0] < int64(ps.lo) || rg.Min[0] >= int64(ps.hi) {
				continue // another subtask's key groups only
			}
			u.kgMin, u.kgMax = max(ps.lo, int(rg.Min[0])), min(ps.hi-1, int(rg.Max[0]))
			u.minEnd = rg.Min[1]
		}
		ps.units = append(ps.units, u)
		ps.rows += rg.Rows
	}
	return nil
}

// addDelta keeps a decoded delta and notes when its upserted windows fall due.
func (ps *pendingState) addDelta(d manifest.FileRef, recs []arrow.RecordBatch) error {
	pd := pendingDelta{path: d.Path, kind: d.Kind, recs: recs}
	ps.deltas = append(ps.deltas, pd)
	if pd.kind == manifest.DeltaTombstones {
		return nil
	}
	for _, rec := range recs {
		kgs, ok := rec.Column(0).(*array.Int32)
		idx := rec.Schema().FieldIndices(operators.ColWindowEnd)
		if !ok || len(idx) != 1 {
			return fmt.Errorf("restore %s: delta without key_group or window_end columns: %w", d.Path, manifest.ErrCorrupt)
		}
		ends, ok := rec.Column(idx[0]).(*array.Timestamp)
		if !ok {
			return fmt.Errorf("restore %s: window_end is %s: %w", d.Path, rec.Column(idx[0]).DataType(), manifest.ErrCorrupt)
		}
		for i := range kgs.Len() {
			g := int(kgs.Value(i)) - ps.lo
			if g < 0 || g >= len(ps.dueAt) {
				continue // filtered to the range on read; tolerate
			}
			ps.dueAt[g] = min(ps.dueAt[g], int64(ends.Value(i)))
		}
	}
	return nil
}

// wantDue marks the key groups, not loaded, that hold a window whose end is
// at or below wm (one that may fire or be purged), and reports whether any.
func (ps *pendingState) wantDue(want []bool, wm int64) bool {
	any := false
	for _, u := range ps.units {
		if !u.known || u.minEnd <= wm {
			for g := u.kgMin; g <= u.kgMax; g++ {
				if !ps.loaded[g-ps.lo] {
					want[g-ps.lo], any = true, true
				}
			}
		}
	}
	for g, t := range ps.dueAt {
		if t <= wm && !ps.loaded[g] {
			want[g], any = true, true
		}
	}
	return any
}

// load decodes the wanted key groups of subtask s (want is indexed kg-lo)
// into w: their base rows (the row groups that hold them are decoded, only
// the wanted key groups' rows kept), then every delta's rows of those key
// groups in order. It returns the base rows restored.
func (ps *pendingState) load(ctx context.Context, w operators.Stateful, r *Runner, s int, want []bool) (int64, error) {
	for _, u := range ps.units {
		if !u.known {
			// No statistics to select by: load everything at once.
			for g := range want {
				want[g] = true
			}
			break
		}
	}
	n := 0
	for g := range want {
		if ps.loaded[g] {
			want[g] = false
		}
		if want[g] {
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	hits := func(u stateUnit) bool {
		for g := u.kgMin; g <= u.kgMax; g++ {
			if want[g-ps.lo] {
				return true
			}
		}
		return false
	}
	// Base rows: the row groups holding wanted key groups, file by file,
	// sliced to the wanted key groups' rows (state rows are sorted by key
	// group, so each is one run of rows: slicing copies nothing).
	var batches, slices []arrow.RecordBatch
	defer func() { ReleaseBatches(batches); ReleaseBatches(slices) }()
	var groups []int
	for i := 0; i < len(ps.units); {
		j := i
		groups = groups[:0]
		for ; j < len(ps.units) && ps.units[j].path == ps.units[i].path; j++ {
			if hits(ps.units[j]) {
				groups = append(groups, ps.units[j].group)
			}
		}
		if len(groups) > 0 {
			recs, err := formats.ReadParquetRowGroups(ps.units[i].data, r.Mem, groups)
			if err != nil {
				return 0, fmt.Errorf("restore subtask %d: %s: %w", s, ps.units[i].path, err)
			}
			if recs, err = ps.migrate(recs); err != nil {
				return 0, err
			}
			batches = append(batches, recs...)
		}
		i = j
	}
	var restored int64
	for _, rec := range batches {
		kgs, ok := rec.Column(0).(*array.Int32)
		if !ok {
			return 0, fmt.Errorf("restore subtask %d: state column key_group is %s: %w", s, rec.Column(0).DataType(), manifest.ErrCorrupt)
		}
		in := func(i int) bool {
			g := int(kgs.Value(i)) - ps.lo
			return g >= 0 && g < len(want) && want[g]
		}
		for a, m := 0, kgs.Len(); a < m; {
			if !in(a) {
				a++
				continue
			}
			b := a + 1
			for b < m && in(b) {
				b++
			}
			slices = append(slices, rec.NewSlice(int64(a), int64(b)))
			restored += int64(b - a)
			a = b
		}
	}
	if err := w.Restore(slices, ps.lo, ps.hi, ps.emitted); err != nil {
		return 0, fmt.Errorf("restore subtask %d: %w", s, err)
	}
	// Deltas, in order, over each run of wanted key groups.
	for a := 0; a < len(want); {
		if !want[a] {
			a++
			continue
		}
		b := a
		for b < len(want) && want[b] {
			b++
		}
		for _, d := range ps.deltas {
			if err := applyDelta(w, d.kind, d.recs, ps.lo+a, ps.lo+b); err != nil {
				return 0, fmt.Errorf("restore subtask %d: delta %s: %w", s, d.path, err)
			}
		}
		a = b
	}
	for g, ok := range want {
		if ok {
			ps.loaded[g] = true
			ps.left--
		}
	}
	// Drop the row groups whose key groups are all loaded.
	keep := ps.units[:0]
	for _, u := range ps.units {
		done := true
		for g := u.kgMin; g <= u.kgMax && done; g++ {
			done = ps.loaded[g-ps.lo]
		}
		if !done {
			keep = append(keep, u)
		}
	}
	clear(ps.units[len(keep):]) // drop references to the files' bytes
	ps.units = keep
	ps.rows = max(0, ps.rows-restored)
	if ps.left == 0 {
		ps.release()
	}
	return restored, nil
}

// restoreOnDemand restores subtask s of op (a fresh window instance) from
// sr on demand: op gets the key-group range and the watermark (through ev's
// RestoreWatermark when the layout evolves), the deltas are decoded and
// migrated to op's layout, the base files only registered by row group.
// The returned pendingState decodes the rest as epochs need it (load).
func (r *Runner) restoreOnDemand(ctx context.Context, from *RestoreSource, op operators.Stateful, s int, sr SubtaskRestore, emitted int64,
	ev *operators.Evolution, chain []dataflow.StateMigration) (*pendingState, error) {
	read := func(f manifest.FileRef) ([]arrow.RecordBatch, error) { return r.readRange(ctx, from, f, sr) }
	migrate := func(recs []arrow.RecordBatch, tombstones bool) ([]arrow.RecordBatch, error) {
		if chain != nil && !tombstones {
			out := make([]arrow.RecordBatch, len(recs))
			for i, b := range recs {
				for _, m := range chain {
					next, err := m.Migrate(b)
					if err != nil {
						return nil, fmt.Errorf("subtask %d: state migration %s %s→%s: %w", s, m.Kind, m.From, m.To, err)
					}
					b = next
				}
				out[i] = b
			}
			return out, nil
		}
		if ev == nil || ev.SameLayout() {
			return recs, nil
		}
		out := make([]arrow.RecordBatch, len(recs))
		for i, b := range recs {
			var err error
			if tombstones {
				out[i], err = ev.MigrateTombstones(b)
			} else {
				out[i], err = ev.Migrate(b)
			}
			if err != nil {
				return nil, fmt.Errorf("migrate the state of subtask %d: %w", s, err)
			}
		}
		return out, nil
	}
	if ev != nil {
		emitted = ev.RestoreWatermark(emitted)
	}
	if err := op.Restore(nil, sr.Lo, sr.Hi, emitted); err != nil {
		return nil, fmt.Errorf("restore subtask %d: %w", s, err)
	}
	ps := &pendingState{lo: sr.Lo, hi: sr.Hi, emitted: emitted, loaded: make([]bool, sr.Hi-sr.Lo), dueAt: make([]int64, sr.Hi-sr.Lo), left: sr.Hi - sr.Lo,
		migrate: func(recs []arrow.RecordBatch) ([]arrow.RecordBatch, error) { return migrate(recs, false) }}
	for g := range ps.dueAt {
		ps.dueAt[g] = math.MaxInt64
	}
	for _, f := range sr.Files {
		data, err := from.read(ctx, f)
		if err != nil {
			return nil, err
		}
		if err := ps.addBase(f, data); err != nil {
			return nil, err
		}
	}
	for _, d := range sr.deltas {
		recs, err := read(d)
		if err != nil {
			ps.release()
			return nil, err
		}
		if recs, err = migrate(recs, d.Kind == manifest.DeltaTombstones); err != nil {
			ps.release()
			return nil, err
		}
		if err := ps.addDelta(d, recs); err != nil {
			ps.release()
			return nil, err
		}
	}
	if len(ps.units) == 0 && len(ps.deltas) == 0 {
		return nil, nil // nothing restored: nothing to decode later
	}
	return ps, nil
}

// readRange reads state file f (verified) and decodes its rows of sr's
// key-group range.
func (r *Runner) readRange(ctx context.Context, from *RestoreSource, f manifest.FileRef, sr SubtaskRestore) ([]arrow.RecordBatch, error) {
	data, err := from.read(ctx, f)
	if err != nil {
		return nil, err
	}
	_, recs, err := formats.ReadParquetFiltered(data, r.Mem, operators.ColKeyGroup, int64(sr.Lo), int64(sr.Hi))
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", f.Path, err)
	}
	return recs, nil
}

// onDemand reports whether op's state can be restored on demand (see the
// rules above): a window, the linear form's or a graph window stage's, also
// one behind the hidden-time operator (graphwin.go), which passes the
// watermark and its state through unchanged. Its Restore adds the windows
// of the key groups it is given to those it holds, and nothing but rows of
// a key group and windows due at the watermark read or change them. The
// other stateful stages (dedup, top_n, over, join) restore whole: their
// state rows carry arrival sequences and expiry times of their own, not a
// window_end that says when a key group is due.
func onDemand(op operators.Stateful) bool { return dataflow.WindowOf(op) != nil }

// loadStage decodes, before a graph stage's rows reach its subtasks, the
// key groups of its pending state the epoch needs: those its input rows
// touch (sels[i][j][s]: input i, batch j, subtask s, as runStateful routes
// them) and those with windows due at wm, the stage's watermark.
func (r *Runner) loadStage(ctx context.Context, nd *dataflow.Node, rows map[*dataflow.Node][]arrow.RecordBatch, sels [][][][]int32,
	partials []arrow.RecordBatch, wm int64) error {
	pend := r.Graph.pending[nd.Name]
	if pend == nil {
		return nil
	}
	subs := r.Graph.Subs[nd.Name]
	err := r.loadNeeded(ctx, pend, func(s int) operators.Stateful { return subs[s] }, func(s int, ps *pendingState, want []bool) error {
		for i, in := range nd.Ins {
			for j, b := range rows[in] {
				if _, err := operators.MarkKeyGroups(b, nd.KeyCols[i], r.K, sels[i][j][s], ps.lo, want); err != nil {
					return err
				}
			}
		}
		markPartials(partials, ps.lo, want)
		return nil
	}, wm)
	if err != nil {
		return fmt.Errorf("stage %s: %w", nd.Name, err)
	}
	return nil
}

// loadNeeded decodes, in every subtask of one operator in parallel, the
// key groups of its pending state (pend, per subtask) that mark marks (an
// epoch's input rows) and those with windows due at wm.
func (r *Runner) loadNeeded(ctx context.Context, pend []*pendingState, op func(s int) operators.Stateful,
	mark func(s int, ps *pendingState, want []bool) error, wm int64) error {
	if !anyPending(pend) {
		return nil
	}
	var rows [2]int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	decoded := make([]int64, len(pend))
	for s, ps := range pend {
		if ps == nil {
			continue
		}
		g.Go(func() error {
			want := make([]bool, ps.hi-ps.lo)
			if err := mark(s, ps, want); err != nil {
				return err
			}
			ps.wantDue(want, wm)
			n, err := ps.load(gctx, op(s), r, s, want)
			decoded[s] = n
			if ps.left == 0 {
				pend[s] = nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for s, n := range decoded {
		r.res.StateRowsDecoded += n
		rows[0] += n
		if ps := pend[s]; ps != nil {
			rows[1] += ps.rows
		}
	}
	if rows[0] > 0 || rows[1] > 0 {
		r.Log.Debug("state decoded on demand", "rows", rows[0], "rows_not_needed_yet", rows[1])
	}
	return nil
}

// loadRest decodes every key group of subtask s (op) of one operator's
// pending state not loaded yet.
func (r *Runner) loadRest(ctx context.Context, pend []*pendingState, op operators.Stateful, s int) error {
	ps := pend[s]
	if ps == nil {
		return nil
	}
	want := make([]bool, ps.hi-ps.lo)
	for g := range want {
		want[g] = true
	}
	n, err := ps.load(ctx, op, r, s, want)
	if err != nil {
		return err
	}
	r.decodedAll.Add(n)
	pend[s] = nil
	return nil
}

// LoadEverything decodes all pending state of every subtask of every
// stateful stage.
func (r *Runner) LoadEverything(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	if r.Graph != nil {
		for name, pend := range r.Graph.pending {
			subs := r.Graph.Subs[name]
			for s := range pend {
				g.Go(func() error {
					if err := r.loadRest(gctx, pend, subs[s], s); err != nil {
						return fmt.Errorf("stage %s: %w", name, err)
					}
					return nil
				})
			}
		}
	}
	return g.Wait()
}

func anyPending(pend []*pendingState) bool {
	for _, ps := range pend {
		if ps != nil {
			return true
		}
	}
	return false
}

// pendingRowsOf is the number of base rows of subtask s not decoded yet.
func pendingRowsOf(pend []*pendingState, s int) int64 {
	if s < len(pend) && pend[s] != nil {
		return pend[s].rows
	}
	return 0
}

// rowsNotDecoded is the number of restored base rows no epoch of the run
// needed, over every operator.
func (r *Runner) rowsNotDecoded() int64 {
	var n int64
	if r.Graph != nil {
		for _, pend := range r.Graph.pending {
			for s := range pend {
				n += pendingRowsOf(pend, s)
			}
		}
	}
	return n
}

func ReleaseBatches(bs []arrow.RecordBatch) {
	for _, b := range bs {
		if b != nil {
			b.Release()
		}
	}
}

// markPartials marks in want (key groups from lo) those of the partial
// aggregates' rows (operators.Combiner: state rows, key_group first).
func markPartials(partials []arrow.RecordBatch, lo int, want []bool) {
	for _, b := range partials {
		for _, kg := range b.Column(0).(*array.Int32).Int32Values() {
			if i := int(kg) - lo; i >= 0 && i < len(want) {
				want[i] = true
			}
		}
	}
}
