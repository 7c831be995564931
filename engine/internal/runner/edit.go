package runner

import (
	"context"
	"math"

	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// epochEdit is everything one epoch changes, as a value: built after the
// execute step, turned into the manifest, and applied to the runner only
// once the manifest is committed. Nothing in it aliases the runner's live
// state, so the committed manifest (which the Committer caches as
// immutable) never changes after the commit.
type epochEdit struct {
	files     []store.ObjectInfo // source files the epoch consumed
	seen      epoch.SegEdit      // processed-file set after the epoch
	sizes     epoch.SegEdit      // processed files' sizes after the epoch
	changed   map[string]int64   // processed files found changed, recorded now
	outputs   epoch.SegEdit      // committed-output log after the epoch
	inputs    map[string]manifest.InputState
	counters  manifest.Counters // totals after the epoch
	watermark int64
	out       *written
	// What the epoch did, for the run's result and logs.
	rows, late, rejected, windows int64
	// prevRowsOut: the rows out before the epoch (workers' logs).
	prevRowsOut int64
}

// prepareEdit builds the epoch's edit: it writes the processed-file and
// output-log segments (attempt-tagged, like every file of the attempt) and
// computes the counters. The runner is not changed.
func (r *Runner) prepareEdit(ctx context.Context, att *epoch.Attempt, files []store.ObjectInfo, in InputSummary,
	d decide.EpochDecision, out *processed, w *written) (*epochEdit, error) {
	e := &epochEdit{files: files, inputs: d.Inputs, watermark: d.Watermark, out: w,
		rows: in.Rows, late: out.Late, rejected: int64(len(in.Rejects)), windows: out.Windows}
	// A kafka source's position is its offsets (kafkaManifest), not a file
	// set: its ranges are neither processed files nor sized.
	keys := make([]string, 0, len(files))
	sizes := make([]string, 0, len(files)+len(r.changed))
	for _, f := range files {
		if !r.kafkaKey(f.Key) {
			keys = append(keys, f.Key)
			sizes = append(sizes, sizeEntry(f.Key, f.Size))
		}
	}
	var err error
	if e.seen, err = r.Seen.Prepare(ctx, att, keys); err != nil {
		return nil, err
	}
	e.changed = r.changed
	for k, n := range r.changed {
		sizes = append(sizes, sizeEntry(k, n))
	}
	if e.sizes, err = r.sizes.Prepare(ctx, att, sizes); err != nil {
		return nil, err
	}
	paths := make([]string, len(w.outRefs))
	for i, o := range w.outRefs {
		paths[i] = o.Path
	}
	if e.outputs, err = r.outputs.Prepare(ctx, att, paths); err != nil {
		return nil, err
	}
	c := r.counters
	c.FilesIn += int64(len(files))
	c.RowsIn += in.Rows + e.rejected
	c.RowsOut += w.rowsOut
	c.RowsLate += out.Late
	c.RowsRejected += e.rejected
	c.RowsFiltered += in.Filtered
	c.Windows += out.Windows
	c.FilesRejectedWhole += in.wholeFiles
	c.FilesChanged += int64(len(r.changed))
	if r.wm == math.MaxInt64 {
		c.FilesAfterDrain += int64(len(files))
	}
	e.counters = c
	return e, nil
}

// manifest returns the manifest that commits the edit. The attempt fills
// in the identity fields.
func (r *Runner) manifest(e *epochEdit) *manifest.Manifest {
	m := &manifest.Manifest{
		Watermark:   e.watermark,
		Counters:    e.counters,
		Outputs:     e.out.outRefs,
		SideOutputs: e.out.sideRefs,
		OutputLog:   e.outputs.Segments,
	}
	m.Source.Inline, m.Source.Segments = e.seen.Inline, e.seen.Segments
	m.Source.Captured = e.out.captured
	m.Source.SizesInline, m.Source.SizeSegments = e.sizes.Inline, e.sizes.Segments
	m.Source.Count = int64(r.Seen.Len() + len(e.seen.Added))
	m.Source.Inputs = make(map[string]manifest.InputState, len(e.inputs))
	for k, v := range e.inputs {
		m.Source.Inputs[k] = v
	}
	r.kafkaManifest(m, e.files)
	m.Operators = r.graphOperators(e)
	for _, nd := range r.Plan.Graph.Lookups {
		lk := nd.Lookup
		m.Lookups = append(m.Lookups, manifest.LookupVersion{Stage: nd.Name, Version: lk.Version, Files: lk.Files, Rows: lk.Rows})
	}
	return m
}

// apply folds a committed edit into the runner and the run's result.
func (r *Runner) apply(e *epochEdit, head *epoch.Head) {
	r.head, r.wm = head, e.watermark
	r.res.Watermark = e.watermark
	r.Seen.Apply(e.seen)
	r.sizes.Apply(e.sizes)
	for _, x := range e.sizes.Added {
		if k, n, ok := splitSize(x); ok {
			r.sizeOf[k] = n
		}
	}
	for k := range e.changed {
		delete(r.changed, k)
	}
	r.outputs.Apply(e.outputs)
	r.inputs = e.inputs
	r.counters = e.counters
	if r.Graph != nil {
		r.Graph.state = e.out.graph
	}

	r.res.Epochs++
	if r.res.FirstEpoch == 0 {
		r.res.FirstEpoch = head.Epoch()
	}
	r.res.LastEpoch = head.Epoch()
	r.res.Files += int64(len(e.files))
	r.res.Rows += e.rows
	r.res.RowsOut += e.out.rowsOut
	r.res.RowsLate += e.late
	r.res.RowsRejected += e.rejected
	for _, o := range e.out.outRefs {
		r.res.Outputs = append(r.res.Outputs, o.Path)
	}
}
