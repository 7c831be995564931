package runner

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// The execute step: the operators run on the decoded batches, and the
// epoch's outputs, side outputs and changed state files are written under
// the attempt. Execution changes the window operators' in-memory state
// (that is what they are for); it changes nothing else of the runner. If the
// epoch then fails to commit, the run ends (every epoch error is returned
// from the loop), so that state is never seen again.

// processed is an epoch's output before it is written.
type processed struct {
	Out     [][]arrow.RecordBatch // per subtask (subtask 0 without a window)
	outRows []int64
	Extra   [][][]arrow.RecordBatch // graph pipelines: per further sink, per subtask
	Late    int64
	Windows int64
	changed []bool    // per subtask: its state changed and must be written
	Graph   *graphOut // graph pipelines: late rows and changes per stage
	// streamed: the outputs a streamed epoch already wrote (stream.go).
	streamed *streamOut
}

// written is what an epoch wrote under its attempt.
type written struct {
	captured []manifest.FileRef // copies of the consumed input files (source.capture)
	outRefs  []manifest.FileRef // sink outputs, by subtask
	sideRefs []manifest.FileRef // late and rejected rows, by path
	rowsOut  int64
	graph    map[string][]SubState // graph pipelines: per stateful stage, per subtask
}

// Process runs an epoch's rows through the plan (processGraph).
func (r *Runner) Process(ctx context.Context, results []*fileResult, wm int64) (*processed, error) {
	return r.processGraph(ctx, results, wm)
}

// write puts the epoch's outputs, side outputs and changed state files, all
// attempt-tagged, in parallel, and returns their references. Unchanged
// subtasks keep their previous state file (shared by reference).
func (r *Runner) write(ctx context.Context, att *epoch.Attempt, out *processed, rejects []sinks.RejectRecord, files []store.ObjectInfo) (*written, error) {
	w := &written{}
	var mu sync.Mutex
	add := func(refs *[]manifest.FileRef, ref manifest.FileRef) {
		mu.Lock()
		*refs = append(*refs, ref)
		mu.Unlock()
	}
	if st := out.streamed; st != nil {
		if st.att != att {
			return nil, fmt.Errorf("epoch %d: outputs were streamed by attempt %s, but attempt %s writes the epoch (an engine bug)", att.Epoch, st.att.ID, att.ID)
		}
		w.outRefs = append(w.outRefs, st.refs...)
	}
	wg, wctx := errgroup.WithContext(ctx)
	wg.SetLimit(4 * runtime.GOMAXPROCS(0))
	for s, bs := range out.Out {
		if len(bs) == 0 {
			continue
		}
		groups := map[string][]arrow.RecordBatch{"": bs}
		if r.table != nil {
			// An Iceberg table's data files live under data/, one day
			// each in a day-partitioned table.
			groups = map[string][]arrow.RecordBatch{"data": bs}
			if r.table.partCol >= 0 {
				byDay, err := sinks.SplitByPartition(bs, r.table.partCol, r.table.transform, r.Mem)
				if err != nil {
					return nil, err
				}
				groups = map[string][]arrow.RecordBatch{}
				for dir, g := range byDay {
					groups["data/"+dir] = g
				}
			}
		} else if h := r.Plan.SinkParts; h != nil {
			var err error
			if groups, err = sinks.Groups(h, "", bs, r.Mem); err != nil {
				return nil, fmt.Errorf("sink: %w", err)
			}
		}
		schema := r.Plan.SinkParts.Schema(r.Plan.Output)
		for dir, g := range groups {
			wg.Go(func() error {
				return r.writeSinkFile(wctx, att, func(ref manifest.FileRef) { add(&w.outRefs, ref) }, dir, s, r.P.RootSink().Format, schema, g)
			})
		}
	}
	for i, perSub := range out.Extra {
		sk, nd := dataflow.ExtraSinks(r.P)[i], r.Plan.Graph.Extra[i]
		h := r.Plan.ExtraPartsOf(i)
		for s, bs := range perSub {
			if len(bs) == 0 {
				continue
			}
			groups, err := sinks.Groups(h, owner.ExtraSinkDir(sk.Name), bs, r.Mem)
			if err != nil {
				return nil, fmt.Errorf("sinks.%s: %w", sk.Name, err)
			}
			for dir, g := range groups {
				wg.Go(func() error {
					return r.writeSinkFile(wctx, att, func(ref manifest.FileRef) { add(&w.outRefs, ref) }, dir, s, sk.Sink.Format, h.Schema(nd.Out), g)
				})
			}
		}
	}
	if len(rejects) > 0 {
		wg.Go(func() error {
			data, err := sinks.EncodeRejects(rejects)
			if err != nil {
				return err
			}
			var ref manifest.FileRef
			if r.St.Rejected != nil {
				ref, err = att.WriteSide(wctx, r.St.Rejected, "", r.slot0(), "jsonl", data, int64(len(rejects)))
				ref.Path = refURL(r.P.RejectedURL(), ref.Path)
			} else {
				ref, err = att.WriteOutput(wctx, sinks.RejectedDir, r.slot0(), "jsonl", data, int64(len(rejects)))
			}
			if err != nil {
				return err
			}
			ref.Kind = manifest.SideOutputRejected
			add(&w.sideRefs, ref)
			return nil
		})
	}
	// source.capture: a copy of each consumed file of a source that asks
	// for one, in file order.
	var captured []string
	for _, f := range files {
		if b, _, ok := r.P.SourceOfKey(f.Key); ok && b.Source.Capture {
			captured = append(captured, f.Key)
		}
	}
	if len(captured) > 0 {
		w.captured = make([]manifest.FileRef, len(captured))
		for i, key := range captured {
			wg.Go(func() error {
				ref, err := r.capture(wctx, att, key)
				w.captured[i] = ref // each goroutine writes its own index
				return err
			})
		}
	}
	if err := wg.Wait(); err != nil {
		return nil, err
	}
	sort.Slice(w.outRefs, func(i, j int) bool {
		a, b := w.outRefs[i], w.outRefs[j]
		return a.Subtask < b.Subtask || a.Subtask == b.Subtask && a.Path < b.Path
	})
	sort.Slice(w.sideRefs, func(i, j int) bool { return w.sideRefs[i].Path < w.sideRefs[j].Path })
	for _, o := range w.outRefs {
		w.rowsOut += o.Rows
	}
	return w, nil
}

func countRows(bs []arrow.RecordBatch) int64 {
	var n int64
	for _, b := range bs {
		n += b.NumRows()
	}
	return n
}

// writeSinkFile encodes one output file of subtask s in format and writes
// it under dir of the (combined) sink.
func (r *Runner) writeSinkFile(ctx context.Context, att *epoch.Attempt, add func(manifest.FileRef), dir string, s int, format spec.Format, schema *arrow.Schema, bs []arrow.RecordBatch) error {
	var data []byte
	var err error
	release := func() {}
	ext := "parquet"
	if format == spec.JSONL {
		data, err = formats.EncodeJSONL(schema, bs)
		ext = "jsonl"
	} else {
		data, release, err = formats.EncodeParquetPooled(schema, bs, formats.EncodeOptions{Mem: r.Mem, Compression: "snappy"})
	}
	if err != nil {
		return err
	}
	ref, err := att.WriteOutput(ctx, dir, s, ext, data, countRows(bs))
	releaseWritten(release, err)
	if err != nil {
		return err
	}
	add(ref)
	return nil
}

// releaseWritten hands an encoded file's buffer back for reuse once its
// write succeeded. After a failed write it is left to the garbage
// collector: an HTTP transport may still read a cancelled request's body
// after the call returned.
func releaseWritten(release func(), err error) {
	if err == nil {
		release()
	}
}

// SubState is one subtask's committed state: a base (a full snapshot of its
// key-group range) and the deltas written since, in order.
type SubState struct {
	Base   manifest.FileRef
	Deltas []manifest.FileRef
}

// Compaction policy: a subtask writes a new base instead of a delta when it
// has no base in this layout. Besides, every subtask of an operator that
// writes state in an epoch writes a new base when one of them has
// maxDeltas deltas, when their deltas add up to more than half their bases,
// or when most of their windows changed whole (a delta would be about as
// large as the base; windows written as merge rows do not count, see
// dirtySize). The decision is the operator's, not each subtask's: subtasks run in
// parallel, so an epoch in which they all compact costs about one
// subtask's compaction, while subtasks that each reach their own threshold
// in a different epoch (their states differ slightly in size) would slow
// several epochs down instead of one.
const maxDeltas = 8

// CompactPlan decides which subtasks of one operator write a base this
// epoch (see maxDeltas). prev are the subtasks' committed states, writes
// reports whether subtask s writes state this epoch, and size its changed
// and removed windows, its windows, and its base rows not restored yet.
func CompactPlan(prev []SubState, writes func(s int) bool, size func(s int) (changed, live int64)) []bool {
	full := make([]bool, len(prev))
	var deltaBytes, baseBytes, changed, live int64
	all := false
	for s, st := range prev {
		if !writes(s) {
			continue
		}
		if st.Base.Path == "" {
			full[s] = true
		}
		if len(st.Deltas) >= maxDeltas {
			all = true
		}
		deltaBytes += st.deltaBytes()
		baseBytes += st.Base.Size
		c, l := size(s)
		changed += c
		live += l
	}
	if all || deltaBytes > baseBytes/2 || changed >= max(1, live/2) {
		for s := range full {
			full[s] = writes(s)
		}
	}
	return full
}

// applyDelta applies one decoded delta file of kind (manifest.DeltaUpserts,
// DeltaTombstones or DeltaMerges) to op, restricted to key groups
// [lo, hi).
func applyDelta(op operators.Stateful, kind string, recs []arrow.RecordBatch, lo, hi int) error {
	switch kind {
	case manifest.DeltaTombstones:
		return op.ApplyDelta(nil, recs, lo, hi)
	case manifest.DeltaMerges:
		m, ok := op.(operators.DeltaMerger)
		if !ok {
			return fmt.Errorf("operator %s has no merge rows, but a merges delta names it: %w", op.ID(), manifest.ErrCorrupt)
		}
		return m.ApplyMerges(recs, lo, hi)
	default:
		return op.ApplyDelta(recs, nil, lo, hi)
	}
}

func (st SubState) deltaBytes() int64 {
	var n int64
	for _, d := range st.Deltas {
		n += d.Size
	}
	return n
}

// dirtySize is compactPlan's size of a stateful subtask: its changed and
// removed windows, and its windows (pending: base rows restored but not
// decoded yet). Windows its delta writes as merge rows are not counted as
// changed: a merge row holds what the epoch added, not the window's whole
// state, so that most windows having changed no longer means a delta about
// as large as a base (the deltas' bytes still bound them).
func dirtySize(sub operators.Stateful, pending int64) (changed, live int64) {
	c, rm := sub.Dirty()
	if m, ok := sub.(operators.DeltaMerger); ok {
		c -= m.DirtyMerges()
	}
	return int64(c + rm), int64(sub.Len()) + pending
}

// writeOpState writes subtask s's changed state of operator opID: a new
// base when full (compactPlan; loadRest first decodes the state rows
// restored but not decoded yet), else a delta (tombstones, then upserts)
// on top of prev. The operator's change tracking is reset either way.
func (r *Runner) writeOpState(ctx context.Context, att *epoch.Attempt, opID string, s int, sub operators.Stateful, prev SubState, full bool, loadRest func() error) (SubState, error) {
	lo, hi := r.ranges[s][0], r.ranges[s][1]
	// The encoded bytes are released (their buffer reused) once written.
	encode := func(schema *arrow.Schema, bs []arrow.RecordBatch) ([]byte, func(), error) {
		return formats.EncodeParquetPooled(schema, bs, formats.EncodeOptions{Mem: r.Mem, RowGroupRows: StateRowGroupRows,
			Compression: "snappy", NoDictionary: true, IntStatsOnly: true})
	}
	if full {
		// A base holds every window: decode what this run has not needed yet.
		if err := loadRest(); err != nil {
			return SubState{}, err
		}
		snap, err := sub.Snapshot()
		if err != nil {
			return SubState{}, err
		}
		data, release, err := encode(sub.StateSchema(), snap)
		if err != nil {
			return SubState{}, fmt.Errorf("encode state of subtask %d: %w", s, err)
		}
		ref, err := att.WriteState(ctx, opID, s, lo, hi, data, countRows(snap))
		releaseWritten(release, err)
		if err != nil {
			return SubState{}, err
		}
		return SubState{Base: ref}, nil
	}
	var ups, merges, tombs []arrow.RecordBatch
	var err error
	if m, ok := sub.(operators.DeltaMerger); ok {
		ups, merges, tombs, err = m.SnapshotDeltaMerges()
	} else {
		ups, tombs, err = sub.SnapshotDelta()
	}
	if err != nil {
		return SubState{}, err
	}
	next := SubState{Base: prev.Base, Deltas: append([]manifest.FileRef(nil), prev.Deltas...)}
	// In the order a restore applies them (applyDelta).
	for _, part := range []struct {
		kind   string
		schema *arrow.Schema
		bs     []arrow.RecordBatch
	}{{manifest.DeltaTombstones, sub.TombstoneSchema(), tombs}, {manifest.DeltaUpserts, sub.StateSchema(), ups}, {manifest.DeltaMerges, sub.StateSchema(), merges}} {
		if countRows(part.bs) == 0 {
			continue
		}
		data, release, err := encode(part.schema, part.bs)
		if err != nil {
			return SubState{}, fmt.Errorf("encode state %s of subtask %d: %w", part.kind, s, err)
		}
		ref, err := att.WriteDelta(ctx, opID, s, lo, hi, part.kind, data, countRows(part.bs))
		releaseWritten(release, err)
		if err != nil {
			return SubState{}, err
		}
		next.Deltas = append(next.Deltas, ref)
	}
	return next, nil
}

// captureDir is the folder, under an attempt's source/, of captured inputs.
const captureDir = "input/"

// capture copies one consumed input file into the attempt's folder
// (source.capture): read again from the source, written attempt-tagged.
func (r *Runner) capture(ctx context.Context, att *epoch.Attempt, key string) (manifest.FileRef, error) {
	if err := manifest.ValidateRef(captureDir+key, false); err != nil {
		return manifest.FileRef{}, fmt.Errorf("source.capture: input file %q cannot be kept under a clean name: %w", key, err)
	}
	data, err := store.Read(ctx, r.St.Source, key)
	if err != nil {
		return manifest.FileRef{}, fmt.Errorf("source.capture: read %s: %w", key, err)
	}
	return att.WriteSource(ctx, captureDir+key, data, 0)
}

// CapturedKey returns the source key a captured copy keeps, or "".
func CapturedKey(ref manifest.FileRef) string {
	_, after, ok := strings.Cut(ref.Path, "/source/"+captureDir)
	if !ok {
		return ""
	}
	return after
}
