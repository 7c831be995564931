package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/engine/internal/exchange"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// A pipeline run by W worker processes (Options.Workers > 1). Every worker
// runs this same loop; package cluster holds the storage protocol. Per
// epoch:
//
//  1. Join: the epoch's decision (its files, split among the workers in
//     contiguous runs, the inputs still waiting, drain) is created once by
//     the proposer (worker 0, another after the take-over delay) from its
//     own listing, and followed by all.
//  2. Each worker decodes its files and runs the stateless stages. Round 1
//     exchanges only each worker's greatest event time per input (the
//     exchange objects' meta): after it every worker computes the same
//     watermark (decide.DecideSeen).
//  3. Every keyed stage is one more round: a worker routes its input rows
//     by key group (rows of its own subtasks stay local) and places the
//     senders' rows in sender order, which, the files being split in
//     contiguous runs and subtasks owned in contiguous ranges, is the order
//     one process reads them in; then its own subtasks run as in one
//     process. Rows a keyed stage hands on keep the subtask that produced
//     them; rows not yet keyed are the worker's first subtask's, so two
//     workers never write an output of the same subtask number.
//  4. Each worker writes its subtasks' state and its outputs under the
//     decision's attempt, then its part record; the manifest is built from
//     the decision, the parts and the parent (the same in every worker:
//     each restored the same head) and created once; _latest.json moves
//     by compare-and-swap.
//
// A worker restarted with its part written commits and then restores
// again from the new head; one restarted earlier redoes its share, whose
// objects it finds already written with the same bytes.

// clusterRun is this process's side of a pipeline run by several workers.
type clusterRun struct {
	w      *cluster.Worker
	top    cluster.Topology
	self   int
	lo, hi int // the subtasks this worker owns, [lo, hi)
	// The epoch in progress.
	ep    *cluster.Epoch
	round int
	// seen: every worker's greatest event time per input of this epoch
	// (after round 1), merged; mine: this worker's.
	seen, mine map[string]int64
	// times: mine encoded, while not yet sent (round 1 carries it);
	// wm: the epoch's watermark, known after round 1.
	times []byte
	wm    int64
	// presel: per (input, batch) of the current keyed stage's rows, its
	// rows' subtasks (operators.PartitionIndices) as the exchange computed
	// them, so that the stage does not route them again.
	presel map[preselKey][][]int32
	// partials: the current keyed stage's partial aggregates received
	// (operators.Combiner), every sender's, for this worker's subtasks.
	partials []arrow.RecordBatch
	// waited: time spent in this epoch's exchange barriers (Receive).
	waited time.Duration
	// relist: a kafka source's listing is stale (an epoch committed
	// since): a proposal lists again.
	relist bool
}

// owns reports whether this process runs subtask s.
func (r *Runner) owns(s int) bool { return r.cl == nil || s >= r.cl.lo && s < r.cl.hi }

// slot0 is the subtask rows not yet keyed belong to: 0 in one process, the
// worker's first subtask with several.
func (r *Runner) slot0() int {
	if r.cl == nil {
		return 0
	}
	return r.cl.lo
}

// checkWorkers refuses what a pipeline run by several workers does not
// support yet, before anything is written.
func checkWorkers(p *spec.Pipeline, opts *Options) error {
	if opts.Workers <= 1 {
		if opts.Worker != 0 {
			return fmt.Errorf("--worker %d without --workers: a worker index needs the worker count", opts.Worker)
		}
		return nil
	}
	if opts.Worker < 0 || opts.Worker >= opts.Workers {
		return fmt.Errorf("--worker %d: must be in 0..%d with --workers %d", opts.Worker, opts.Workers-1, opts.Workers)
	}
	var why []string
	for _, s := range p.Sources {
		if s.Source.Order != "" || s.Source.Capture || s.Source.ForgetAfter != 0 {
			why = append(why, "sources."+s.Name+" with order, capture or forget_after")
		}
	}
	if p.RootSink().Type == spec.SinkIceberg {
		why = append(why, "an iceberg sink")
	}
	if p.Source.Capture {
		why = append(why, "source.capture")
	}
	if p.Source.Order != "" {
		why = append(why, "source.order")
	}
	if p.Source.ForgetAfter != 0 {
		why = append(why, "source.forget_after")
	}
	for _, b := range p.SourceBlocks() {
		// An epoch's files are decided before any is decoded, so a row
		// limit cannot cut it; every worker must take its whole share.
		if b.Source.MaxRowsPerEpoch > 0 {
			why = append(why, b.Field+".max_rows_per_epoch (bound the epoch with max_files_per_epoch)")
		}
	}
	if len(why) > 0 {
		return fmt.Errorf("--workers %d: not supported yet with %s; run it in one process (--parallelism spreads its keyed stages over this machine's cores)",
			opts.Workers, strings.Join(why, ", "))
	}
	return nil
}

// checkWorkerPlan refuses plans the exchange cannot yet keep exact.
func checkWorkerPlan(gp *dataflow.GraphPlan) error {
	for _, nd := range gp.Nodes {
		if nd.Lookup != nil {
			return fmt.Errorf("--workers: stage %s is a lookup; several workers cannot share one version of its table yet: run it in one process", nd.Name)
		}
	}
	return nil
}

// newClusterRun prepares this worker's side of the run.
func (r *Runner) newClusterRun() error {
	top := cluster.Topology{Workers: r.Opts.Workers, Parallelism: r.Parallelism, MaxParallelism: r.K}
	w, err := cluster.New(cluster.Config{Store: r.St.State, Pipeline: r.P.Name, Worker: r.Opts.Worker, Topology: top,
		Timeout: r.Opts.WorkerTimeout, TakeOver: r.Opts.WorkerTakeOver, Now: r.Opts.Now, Log: r.Log, Once: r.Opts.Trigger == 0, Run: r.Opts.WorkerRun})
	if err != nil {
		return err
	}
	lo, hi := top.Subtasks(r.Opts.Worker)
	r.cl = &clusterRun{w: w, top: top, self: r.Opts.Worker, lo: lo, hi: hi}
	return nil
}

// errRestore ends a worker's epoch loop for a fresh start from the head:
// the epoch was committed without this incarnation processing it (its
// part existed), or by another writer, so its in-memory state is stale.
var errRestore = errors.New("restore from the head")

// runWorkers is run for a pipeline run by several workers.
func (r *Runner) runWorkers(ctx context.Context) (*Result, error) {
	defer func() {
		r.res.Requests = r.St.Requests()
		r.res.StateRowsDecoded += r.decodedAll.Swap(0)
		r.res.StateRowsSkipped += r.rowsNotDecoded()
	}()
	if err := r.newClusterRun(); err != nil {
		return &r.res, err
	}
	for {
		files, err := r.start(ctx)
		if err != nil {
			return &r.res, err
		}
		if err := checkWorkerPlan(r.Plan.Graph); err != nil {
			return &r.res, err
		}
		r.res.LastEpoch = r.head.Epoch()
		err = r.workerEpochs(ctx, r.Dc.Interleave(r.pendingOf(files)))
		if errors.Is(err, errRestore) {
			r.Log.Info("restoring from the head the other workers committed", "epoch", r.head.Epoch(), "reason", err)
			continue
		}
		if err != nil {
			return &r.res, err
		}
		break
	}
	r.sweepWorkerOrphans(ctx)
	r.res.LastEpoch = r.head.Epoch()
	r.res.Watermark = r.wm
	return &r.res, nil
}

// workerEpochs runs epochs until the input is caught up (--once), the run
// is stopped or reaches --until-epoch.
func (r *Runner) workerEpochs(ctx context.Context, pend []store.ObjectInfo) error {
	for {
		if r.Opts.UntilEpoch > 0 && r.head.Epoch() >= r.Opts.UntilEpoch {
			r.res.UntilReached = r.res.Epochs == 0
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.stopping() {
			r.Log.Info("stop requested: stopping after the last committed epoch", "epoch", r.head.Epoch())
			return nil
		}
		err := r.workerEpoch(ctx, &pend)
		if errors.Is(err, cluster.ErrIdle) {
			if r.Opts.Trigger == 0 {
				return nil
			}
			select {
			case <-ctx.Done():
			case <-r.Opts.Stop:
			case <-time.After(r.Opts.Trigger):
			}
			files, err := r.listing.List(ctx, r.P, r.St.Source, r.Opts.now())
			if err != nil {
				return err
			}
			pend = r.Dc.Interleave(r.pendingOf(files))
			continue
		}
		if err != nil {
			return err
		}
		if r.wm == math.MaxInt64 && r.Opts.Drain {
			return nil
		}
	}
}

// propose decides the next epoch from this worker's listing (pend): nil
// when there is nothing to commit.
func (r *Runner) propose(pend []store.ObjectInfo) cluster.Proposer {
	return func(ctx context.Context) (*manifest.Decision, error) {
		if r.cl.relist {
			files, err := r.listing.List(ctx, r.P, r.St.Source, r.Opts.now())
			if err != nil {
				return nil, err
			}
			pend = r.Dc.Interleave(r.pendingOf(files))
		}
		batch := r.Dc.SelectFiles(pend)
		skipRead := false
		if skip, rest := SplitStartLatest(r.P, pend); len(skip) > 0 && r.head.Manifest == nil && !r.mustCommit {
			// start_from: latest, as in one process: the first epoch
			// takes exactly the files present at the start and marks them
			// read without reading them.
			batch, skipRead = skip, true
			pend = append(slices.Clone(skip), rest...)
		}
		drain := len(batch) == 0 && r.Opts.Drain && r.wm != math.MaxInt64
		d := &manifest.Decision{Inputs: maps.Clone(r.inputs), Watermark: r.wm, Drain: drain, SkipRead: skipRead,
			Waiting: r.Dc.Waiting(pend, len(batch)), CreatedAt: r.Opts.now().UTC(), Kafka: r.kafkaOffsets(batch, false)}
		if len(batch) == 0 && !drain {
			switch {
			case r.mustCommit || r.recordListing:
				d.Commit = true
			case !r.Dc.DecideSeen(r.inputs, r.wm, nil, d.CreatedAt, d.Waiting, false, true).Commit:
				return nil, nil // idle, and the idle timeout moves nothing
			}
		}
		files := make([]cluster.File, len(batch))
		for i, f := range batch {
			files[i] = cluster.File{Key: f.Key, Size: f.Size}
		}
		d.Files = cluster.AssignFiles(files, r.cl.top.Workers)
		return d, nil
	}
}

// workerEpoch takes part in the next epoch.
func (r *Runner) workerEpoch(ctx context.Context, pend *[]store.ObjectInfo) error {
	cl := r.cl
	if err := r.beginWriting(ctx); err != nil {
		return err
	}
	num := max(r.epochFloor, r.head.Epoch()+1)
	tj := time.Now()
	ep, err := cl.w.Join(ctx, r.gen.Generation, num, r.head.Ref(), r.propose(*pend))
	if err != nil {
		return err
	}
	d := ep.Decision
	cl.ep, cl.round, cl.seen, cl.mine, cl.waited, cl.times, cl.presel = ep, 0, nil, nil, 0, nil, nil
	att := r.C.Resume(r.head, d.Generation, d.Epoch, d.Attempt)
	t0 := time.Now()
	req0 := r.St.Requests()
	part, err := ep.Part(ctx)
	if err != nil {
		return err
	}
	restore := part != nil
	if part == nil {
		if part, err = r.workerShare(ctx, att, d, t0, req0); err != nil {
			if errors.Is(err, cluster.ErrCommitted) {
				// Committed without this process's part: another process
				// of the same index wrote it (a replacement of this one,
				// or a second Job of the same topology). This is the
				// stale copy.
				return fmt.Errorf("%w: another process of worker %d committed gen %d epoch %d: %w", cluster.ErrFenced, cl.self, d.Generation, d.Epoch, err)
			}
			return err
		}
		if _, err := ep.WritePart(ctx, part); err != nil {
			return err
		}
	}
	tc := time.Now()
	var edit *epochEdit
	var built []byte
	build := func(d *manifest.Decision, parts []*manifest.WorkerPart) ([]byte, error) {
		if built != nil {
			return built, nil
		}
		m, e, err := r.buildManifest(ctx, att, d, parts)
		if err != nil {
			return nil, err
		}
		edit = e
		return manifest.EncodeManifest(m)
	}
	if cl.self != 0 {
		// While worker 0 gathers the parts and creates the manifest, build
		// the same manifest and edit here from the same parts: this
		// worker needs the edit anyway, and then only waits for the
		// manifest to exist.
		parts, err := ep.Parts(ctx)
		switch {
		case errors.Is(err, cluster.ErrCommitted):
			return fmt.Errorf("%w: %w", errRestore, err)
		case err != nil:
			return err
		}
		if built, err = build(d, parts); err != nil {
			return err
		}
	}
	data, _, err := ep.Commit(ctx, build)
	if errors.Is(err, cluster.ErrCommitted) {
		return fmt.Errorf("%w: %w", errRestore, err)
	}
	if err != nil {
		return err
	}
	m, err := manifest.DecodeManifest(manifest.ManifestPath(d.Generation, d.Epoch), data)
	if err != nil {
		return err
	}
	if edit == nil {
		// Another worker built the manifest: build the same edit here.
		parts, err := ep.Parts(ctx)
		if err != nil {
			if errors.Is(err, cluster.ErrCommitted) {
				return fmt.Errorf("%w: %w", errRestore, err)
			}
			return err
		}
		if _, edit, err = r.buildManifest(ctx, att, d, parts); err != nil {
			return err
		}
	}
	head, err := att.Commit(ctx, m)
	if errors.Is(err, epoch.ErrSuperseded) {
		return fmt.Errorf("%w: %w", errRestore, err) // the other workers went on without this one
	}
	if err != nil {
		return err
	}
	r.apply(edit, head)
	r.kafkaCommitted(m)
	r.Log.Debug("worker epoch timings", "epoch", d.Epoch, "worker", cl.self, "join", t0.Sub(tj).Round(time.Millisecond),
		"share", tc.Sub(t0).Round(time.Millisecond), "exchange_waits", cl.waited.Round(time.Millisecond),
		"commit", time.Since(tc).Round(time.Millisecond))
	r.mustCommit, r.recordListing = false, false
	decided := map[string]bool{}
	for _, f := range d.Files {
		decided[f.Key] = true
	}
	*pend = slices.DeleteFunc(*pend, func(f store.ObjectInfo) bool { return decided[f.Key] })
	if len(r.kafkaSources()) > 0 {
		// The decided ranges are the proposer's listing: this worker's
		// own may have cut them elsewhere. Its next proposal, if it
		// makes one, lists again from the committed offsets.
		*pend, cl.relist = nil, true
	}
	if cl.self == 0 {
		r.retain(ctx, true)
	}
	st := m.Stats
	r.Log.Info("epoch committed", "epoch", head.Epoch(), "generation", r.gen.Generation, "worker", cl.self, "workers", cl.top.Workers,
		"files", st.FilesIn, "rows_in", st.RowsIn, "rows_out", m.Counters.RowsOut-edit.prevRowsOut, "watermark", FmtWM(m.Watermark),
		"duration", (time.Duration(st.DurationMs) * time.Millisecond).String(), "rounds", part.Rounds,
		"gets", st.Gets, "puts", st.Puts, "lists", st.Lists)
	if restore {
		return fmt.Errorf("%w: this worker's part of epoch %d was written by an earlier run", errRestore, d.Epoch)
	}
	return nil
}

// workerShare does this worker's share of the epoch: decode its files,
// exchange, run its subtasks, write its state and outputs. It returns its
// part record.
func (r *Runner) workerShare(ctx context.Context, att *epoch.Attempt, d *manifest.Decision, t0 time.Time, req0 store.RetryStats) (*manifest.WorkerPart, error) {
	cl := r.cl
	mine := cluster.FilesOf(d, cl.self)
	files := make([]store.ObjectInfo, len(mine))
	for i, f := range mine {
		files[i] = store.ObjectInfo{Key: f.Key, Size: f.Size}
	}
	r.SkipRead = d.SkipRead
	results, err := r.DecodeEpoch(ctx, files)
	r.SkipRead = false
	if err != nil {
		return nil, err
	}
	in := Summarize(results)
	if err := r.checkRejected(in); err != nil {
		return nil, err
	}
	cl.mine = r.Dc.SeenOf(in.Obs)
	// Round 1 carries every worker's event times, for the one watermark,
	// along with the first keyed stage's rows (exchangeRound): the
	// watermark is needed from that stage on, and the stages before it do
	// not read it.
	if cl.times, err = json.Marshal(cl.mine); err != nil {
		return nil, err
	}
	r.Processing = d.Epoch
	out, err := r.Process(ctx, results, r.wm) // the watermark is the epoch's from round 1 on
	if err != nil {
		return nil, err
	}
	if cl.times != nil {
		// No keyed stage: round 1 carries the event times alone.
		if _, err := r.exchangeRound(ctx, 0, func(int, *bytes.Buffer) error { return nil }); err != nil {
			return nil, err
		}
	}
	// A worker stopped for long (SIGSTOP, a frozen VM) may find its rounds
	// complete after a newer generation committed the epoch: no parts will
	// follow, and outputs written now would stay in the sinks for good
	// (no worker sweeps them). Refuse before writing anything.
	if err := cl.ep.Fence(ctx); err != nil {
		return nil, err
	}
	if err := r.ident.CheckOwner(ctx, r.St.Sink); err != nil {
		return nil, err
	}
	w, err := r.write(ctx, att, out, in.Rejects, nil)
	if err != nil {
		return nil, err
	}
	if err := r.writeGraph(ctx, att, out, w); err != nil {
		return nil, err
	}
	p := &manifest.WorkerPart{Rounds: cl.round, Outputs: w.outRefs, SideOutputs: w.sideRefs, Inputs: map[string]manifest.InputState{},
		KafkaSkipped: r.kafkaSkipped(files)}
	for name, ts := range cl.mine {
		p.Inputs[name] = manifest.InputState{MaxEventTime: ts, LastActive: d.CreatedAt}
	}
	p.Counters = manifest.Counters{FilesIn: int64(len(files)), RowsIn: in.Rows + int64(len(in.Rejects)), RowsOut: w.rowsOut,
		RowsLate: out.Late, RowsRejected: int64(len(in.Rejects)), RowsFiltered: in.Filtered, Windows: out.Windows,
		FilesRejectedWhole: in.wholeFiles}
	if r.wm == math.MaxInt64 {
		p.Counters.FilesAfterDrain = int64(len(files))
	}
	for _, nd := range r.Plan.Graph.State {
		emitted := int64(manifest.NoWatermark)
		os := manifest.OperatorState{ID: nd.Name, Files: []manifest.FileRef{}}
		for s, op := range r.Graph.Subs[nd.Name] {
			if op == nil {
				continue
			}
			emitted = max(emitted, op.Watermark())
			st := w.graph[nd.Name][s]
			os.Files = append(os.Files, st.Base)
			os.Deltas = append(os.Deltas, st.Deltas...)
		}
		os.EmittedThrough = emitted
		p.Operators = append(p.Operators, os)
	}
	req := r.St.Requests().Sub(req0)
	p.Stats = &manifest.EpochStats{DurationMs: time.Since(t0).Milliseconds(), FilesIn: int64(len(files)), RowsIn: p.Counters.RowsIn,
		Gets: req.Requests.Get, Puts: req.Requests.Put + 1, Lists: req.Requests.List, Deletes: req.Requests.Delete, Retries: req.Retries}
	for _, f := range files {
		p.Stats.BytesIn += f.Size
	}
	for _, f := range append(slices.Clone(p.Outputs), p.SideOutputs...) {
		p.Stats.BytesWritten += f.Size
	}
	for _, o := range p.Operators {
		for _, f := range append(slices.Clone(o.Files), o.Deltas...) {
			if strings.Contains(f.Path, att.ID[:manifest.AttemptPrefixLen]) {
				p.Stats.BytesWritten += f.Size
			}
		}
	}
	return p, nil
}

func mergeSeen(into, from map[string]int64) {
	for k, v := range from {
		if cur, ok := into[k]; !ok || v > cur {
			into[k] = v
		}
	}
}

// buildManifest builds the epoch's manifest and edit from the decision,
// the parts and the runner's head (the same in every worker): the bytes do
// not depend on which worker builds them. It writes the processed-file
// and output-log segments (attempt-tagged, the same bytes from any
// worker).
func (r *Runner) buildManifest(ctx context.Context, att *epoch.Attempt, d *manifest.Decision, parts []*manifest.WorkerPart) (*manifest.Manifest, *epochEdit, error) {
	mg, err := cluster.MergeParts(d, parts)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]int64{}
	for _, p := range parts {
		for name, in := range p.Inputs {
			mergeSeen(seen, map[string]int64{name: in.MaxEventTime})
		}
	}
	dd := r.Dc.DecideSeen(r.inputs, r.wm, seen, d.CreatedAt, d.Waiting, d.Drain, len(d.Files) == 0 && !d.Commit)
	files := make([]store.ObjectInfo, len(d.Files))
	keys := make([]string, 0, len(d.Files))
	sizes := make([]string, 0, len(d.Files))
	for i, f := range d.Files {
		files[i] = store.ObjectInfo{Key: f.Key, Size: f.Size}
		if !r.kafkaKey(f.Key) {
			// a kafka range's position is the offsets (the decision's),
			// not a file set
			keys, sizes = append(keys, f.Key), append(sizes, sizeEntry(f.Key, f.Size))
		}
	}
	kafkaSrc := len(r.kafkaSources()) > 0
	if kafkaSrc {
		if d.Kafka == nil {
			return nil, nil, fmt.Errorf("gen %d epoch %d: the decision of a kafka source records no offsets", d.Generation, d.Epoch)
		}
	}
	w := &written{outRefs: mg.Outputs, sideRefs: mg.SideOutputs, rowsOut: mg.Counters.RowsOut, graph: map[string][]SubState{}}
	e := &epochEdit{files: files, inputs: dd.Inputs, watermark: dd.Watermark, out: w, changed: map[string]int64{},
		rows: mg.Counters.RowsIn - mg.Counters.RowsRejected, late: mg.Counters.RowsLate, rejected: mg.Counters.RowsRejected,
		windows: mg.Counters.Windows, prevRowsOut: r.counters.RowsOut}
	if e.seen, err = r.Seen.Prepare(ctx, att, keys); err != nil {
		return nil, nil, err
	}
	if e.sizes, err = r.sizes.Prepare(ctx, att, sizes); err != nil {
		return nil, nil, err
	}
	paths := make([]string, len(w.outRefs))
	for i, o := range w.outRefs {
		paths[i] = o.Path
	}
	if e.outputs, err = r.outputs.Prepare(ctx, att, paths); err != nil {
		return nil, nil, err
	}
	c := r.counters
	mc := mg.Counters
	c.FilesIn += mc.FilesIn
	c.RowsIn += mc.RowsIn
	c.RowsOut += mc.RowsOut
	c.RowsLate += mc.RowsLate
	c.RowsRejected += mc.RowsRejected
	c.RowsFiltered += mc.RowsFiltered
	c.Windows += mc.Windows
	c.FilesRejectedWhole += mc.FilesRejectedWhole
	c.FilesAfterDrain += mc.FilesAfterDrain
	e.counters = c
	m := &manifest.Manifest{Watermark: e.watermark, Counters: e.counters, Outputs: w.outRefs, SideOutputs: w.sideRefs, OutputLog: e.outputs.Segments}
	m.Source.Inline, m.Source.Segments = e.seen.Inline, e.seen.Segments
	m.Source.SizesInline, m.Source.SizeSegments = e.sizes.Inline, e.sizes.Segments
	m.Source.Count = int64(r.Seen.Len() + len(e.seen.Added))
	m.Source.Inputs = maps.Clone(e.inputs)
	if m.Source.Inputs == nil {
		m.Source.Inputs = map[string]manifest.InputState{}
	}
	if kafkaSrc {
		ko := *d.Kafka
		ko.Partitions = slices.Clone(d.Kafka.Partitions)
		for _, p := range parts {
			ko.Skipped += p.KafkaSkipped
		}
		m.Source.Kafka = &ko
	}
	// Operators: per stateful stage, every subtask's state in subtask
	// order (the workers own ascending ranges).
	for i, nd := range r.Plan.Graph.State {
		if i >= len(mg.Operators) || mg.Operators[i].ID != nd.Name {
			return nil, nil, fmt.Errorf("worker parts do not list stage %s as the plan's keyed stage %d", nd.Name, i)
		}
		op := mg.Operators[i]
		m.Operators = append(m.Operators, op)
		w.graph[nd.Name], err = subStates(op, r.Parallelism, parts, i)
		if err != nil {
			return nil, nil, fmt.Errorf("stage %s: %w", nd.Name, err)
		}
	}
	if len(mg.Operators) != len(r.Plan.Graph.State) {
		return nil, nil, fmt.Errorf("worker parts list %d keyed stages, the plan %d", len(mg.Operators), len(r.Plan.Graph.State))
	}
	m.Stats = mg.Stats
	if m.Stats == nil {
		m.Stats = &manifest.EpochStats{}
	}
	// Fill the identity fields as the attempt's Commit does, so the bytes
	// are final.
	m.FormatVersion = manifest.FormatVersion
	m.Pipeline = r.C.Pipeline
	m.Generation, m.Epoch, m.Attempt = d.Generation, d.Epoch, d.Attempt
	m.Parent = d.Parent
	m.CreatedAt = d.CreatedAt
	return m, e, nil
}

// subStates splits a merged operator's files back into subtasks: worker
// w's part lists one base per subtask of its range, in order, and its
// deltas name their subtask.
func subStates(op manifest.OperatorState, p int, parts []*manifest.WorkerPart, idx int) ([]SubState, error) {
	out := make([]SubState, p)
	for _, part := range parts {
		po := part.Operators[idx]
		if len(po.Files) != part.SubtaskHi-part.SubtaskLo {
			return nil, fmt.Errorf("worker %d's part has %d state files for subtasks %d..%d", part.Worker, len(po.Files), part.SubtaskLo, part.SubtaskHi-1)
		}
		for j, f := range po.Files {
			out[part.SubtaskLo+j].Base = f
		}
		for _, dl := range po.Deltas {
			if dl.Subtask < part.SubtaskLo || dl.Subtask >= part.SubtaskHi {
				return nil, fmt.Errorf("worker %d's delta %s is of subtask %d, outside its range", part.Worker, dl.Path, dl.Subtask)
			}
			out[dl.Subtask].Deltas = append(out[dl.Subtask].Deltas, dl)
		}
	}
	return out, nil
}

// exchangeRound sends one round (write puts each other receiver's
// segment, of about size bytes in all, in place) and returns what the
// others sent, in sender order. The epoch's first round also carries this
// worker's event times (cl.times) as its meta: after it every worker
// computes the same watermark (settle).
func (r *Runner) exchangeRound(ctx context.Context, size int, write cluster.SegmentWriter) ([]cluster.Incoming, error) {
	cl := r.cl
	cl.round++
	meta := cl.times
	if _, err := cl.ep.SendWith(ctx, cl.round, meta, size, write); err != nil {
		return nil, err
	}
	t := time.Now()
	incoming, err := cl.ep.Receive(ctx, cl.round)
	cl.waited += time.Since(t)
	if err != nil {
		return nil, err
	}
	if meta != nil {
		cl.times = nil
		if err := r.settle(incoming); err != nil {
			return nil, err
		}
	}
	return incoming, nil
}

// settle merges every worker's event times (round 1's meta) and computes
// the epoch's watermark (cl.wm) and, in a graph, each source's.
func (r *Runner) settle(incoming []cluster.Incoming) error {
	cl := r.cl
	d := cl.ep.Decision
	cl.seen = maps.Clone(cl.mine)
	for _, inc := range incoming {
		var theirs map[string]int64
		if err := json.Unmarshal(inc.Meta, &theirs); err != nil {
			return fmt.Errorf("exchange round %d: worker %d's event times: %w", cl.round, inc.Sender, err)
		}
		mergeSeen(cl.seen, theirs)
	}
	dd := r.Dc.DecideSeen(r.inputs, r.wm, cl.seen, d.CreatedAt, d.Waiting, d.Drain, len(d.Files) == 0 && !d.Commit)
	if !r.Plan.Graph.Linear {
		r.sourceWM = r.Dc.InputWatermarksWaiting(dd.Inputs, r.wm, d.CreatedAt, d.Waiting, d.Drain, r.Plan.Graph.SourceNames())
	}
	cl.wm = dd.Watermark
	return nil
}

// preselKey names one input batch of a keyed stage.
type preselKey struct {
	input int
	batch arrow.RecordBatch
}

// preselected returns the subtasks of b's rows as input i of the current
// keyed stage, when the exchange already computed them.
func (r *Runner) preselected(i int, b arrow.RecordBatch) ([][]int32, bool) {
	if r.cl == nil {
		return nil, false
	}
	sel, ok := r.cl.presel[preselKey{i, b}]
	return sel, ok
}

// WorkerRounds is the number of exchange rounds of an epoch of plan gp
// run by several workers: one per keyed stage (the first also carries
// the event times) and one per gathered stage; a plan without a keyed
// stage has round 1 alone.
func WorkerRounds(gp *dataflow.GraphPlan) int {
	n := len(gp.State)
	for _, nd := range gp.State {
		if nd.Canonical {
			n++
		}
	}
	return max(n, 1)
}

// exchange routes a keyed stage's input rows (per input, this worker's)
// to the workers owning their key groups and returns, per input, the rows
// of this worker's subtasks: every sender's in sender order, its own at its
// index. The subtasks of its own and the received rows are kept for the
// stage (cl.presel), which then does not route them again.
func (r *Runner) exchange(ctx context.Context, nd *dataflow.Node, in map[*dataflow.Node][]arrow.RecordBatch,
	replicated map[*dataflow.Node]bool) (map[*dataflow.Node][]arrow.RecordBatch, error) {
	cl := r.cl
	nw := cl.top.Workers
	cl.presel = map[preselKey][][]int32{}
	ReleaseBatches(cl.partials)
	cl.partials = nil
	// A window whose aggregates combine sends the rows of other workers'
	// subtasks as partial aggregates (operators.Combiner), after the rows.
	comb := r.combinerOf(nd, replicated)
	var combs []operators.Stateful // per worker
	nIn := len(nd.Ins)
	// routed[w][i]: input i's rows for worker w (i = nIn: the partials).
	routed := make([][][]arrow.RecordBatch, nw)
	for w := range routed {
		routed[w] = make([][]arrow.RecordBatch, nIn, nIn+1)
	}
	if comb != nil {
		combs = make([]operators.Stateful, nw)
	}
	// The subtasks of each worker, [lo, hi).
	los, his := make([]int, nw), make([]int, nw)
	for w := range nw {
		los[w], his[w] = cl.top.Subtasks(w)
	}
	done := map[*dataflow.Node]bool{}
	size := 0
	for i, u := range nd.Ins {
		if done[u] || replicated[u] {
			continue // a self-join reads one input twice: route it once; every worker holds a replicated one whole
		}
		done[u] = true
		for _, b := range in[u] {
			sel, err := operators.PartitionIndices(b, nd.KeyCols[i], r.Parallelism, r.K)
			if err != nil {
				return nil, fmt.Errorf("stage %s: %w", nd.Name, err)
			}
			for w := range nw {
				idx, n := rowsOf(sel, los[w], his[w], b.NumRows())
				// Own rows are taken too, not kept whole with a selection:
				// a stateful operator may number rows by their place in
				// the batch (the join's sequence numbers), and a worker
				// restarted in the epoch, restoring from files, must write
				// the same state bytes as the incarnation it replaces.
				var t arrow.RecordBatch
				switch {
				case n == 0:
					continue
				case comb != nil && w != cl.self:
					// Pre-aggregated; the late rows go as rows.
					if combs[w] == nil {
						if combs[w], err = comb.NewCombiner(); err != nil {
							return nil, fmt.Errorf("stage %s: %w", nd.Name, err)
						}
					}
					if n == int(b.NumRows()) {
						idx = nil
					}
					late, err := combs[w].ProcessInput(i, b, idx)
					if err != nil {
						return nil, fmt.Errorf("stage %s: combiner: %w", nd.Name, err)
					}
					if late != nil && late.NumRows() > 0 {
						routed[w][i] = append(routed[w][i], late)
						size += batchBytes(late)
					} else if late != nil {
						late.Release()
					}
					continue
				case n == int(b.NumRows()) || comb != nil:
					// All rows are this worker's; or the stage combines,
					// so no aggregate depends on a row's place in the
					// batch: the subtasks take theirs by selection.
					b.Retain()
					t = b
				default:
					if t, err = operators.TakeRows(b, idx, r.Mem); err != nil {
						return nil, fmt.Errorf("stage %s: %w", nd.Name, err)
					}
				}
				routed[w][i] = append(routed[w][i], t)
				if w == cl.self {
					if t == b {
						cl.presel[preselKey{i, t}] = sel
					} else if his[w]-los[w] == 1 {
						own := make([][]int32, r.Parallelism)
						own[los[w]] = identity(int(t.NumRows()))
						cl.presel[preselKey{i, t}] = own
					}
				} else {
					size += batchBytes(t)
				}
			}
		}
	}
	schemas := inSchemas(nd)
	if comb != nil {
		schemas = append(schemas, comb.PartialSchema())
		var partials int64
		for w := range routed {
			var parts []arrow.RecordBatch
			if combs[w] != nil {
				var err error
				if parts, err = combs[w].(operators.Combiner).Partials(); err != nil {
					return nil, fmt.Errorf("stage %s: combiner: %w", nd.Name, err)
				}
				for _, b := range parts {
					size += batchBytes(b)
					partials += b.NumRows()
				}
			}
			routed[w] = append(routed[w], parts)
		}
		r.Log.Debug("exchange: rows for other workers sent as partial aggregates", "stage", nd.Name, "partials", partials)
	}
	incoming, err := r.exchangeRound(ctx, size, func(w int, buf *bytes.Buffer) error {
		defer func() {
			for _, bs := range routed[w] {
				ReleaseBatches(bs)
			}
		}()
		return exchange.Append(buf, schemas, routed[w])
	})
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", nd.Name, err)
	}
	bySender := make([][][]arrow.RecordBatch, nw)
	bySender[cl.self] = routed[cl.self]
	single := his[cl.self]-los[cl.self] == 1
	for _, inc := range incoming {
		bs, err := exchange.Decode(schemas, inc.Data)
		if err != nil {
			return nil, fmt.Errorf("stage %s: exchange round %d: worker %d's rows: %w", nd.Name, cl.round, inc.Sender, err)
		}
		if comb != nil {
			cl.partials = append(cl.partials, bs[nIn]...)
			bs = bs[:nIn]
		}
		if single {
			// Every row received is of this worker's one subtask.
			for i, ib := range bs {
				for _, b := range ib {
					sel := make([][]int32, r.Parallelism)
					sel[los[cl.self]] = identity(int(b.NumRows()))
					cl.presel[preselKey{i, b}] = sel
				}
			}
		}
		bySender[inc.Sender] = bs
	}
	out := map[*dataflow.Node][]arrow.RecordBatch{}
	for i, u := range nd.Ins {
		if _, ok := out[u]; ok {
			continue
		}
		if replicated[u] {
			out[u] = in[u] // whole, in the one order: each subtask takes its rows
			continue
		}
		var all []arrow.RecordBatch
		for _, bs := range bySender {
			if bs != nil {
				all = append(all, bs[i]...)
			}
		}
		out[u] = all
	}
	return out, nil
}

// combinerOf returns the combining operator of keyed stage nd when its
// rows should cross the exchange as partial aggregates: a window of
// combinable aggregates (operators.Combiner) whose input is not
// replicated. Nil otherwise.
func (r *Runner) combinerOf(nd *dataflow.Node, replicated map[*dataflow.Node]bool) operators.Combiner {
	if len(nd.Ins) != 1 || replicated[nd.Ins[0]] {
		return nil
	}
	for _, op := range r.Graph.Subs[nd.Name] {
		if op == nil {
			continue // another worker's subtask
		}
		if c, ok := op.(operators.Combiner); ok && c.Combinable() {
			return c
		}
		return nil
	}
	return nil
}

// rowsOf returns the rows (ascending) of subtasks [lo, hi) in sel (per
// subtask, ascending rows of a batch of n rows), and their count.
func rowsOf(sel [][]int32, lo, hi int, n int64) ([]int32, int) {
	if hi-lo == 1 {
		return sel[lo], len(sel[lo])
	}
	c := 0
	for s := lo; s < hi; s++ {
		c += len(sel[s])
	}
	if c == 0 || c == int(n) {
		return nil, c
	}
	mine := make([]bool, n)
	for s := lo; s < hi; s++ {
		for _, j := range sel[s] {
			mine[j] = true
		}
	}
	idx := make([]int32, 0, c)
	for j, ok := range mine {
		if ok {
			idx = append(idx, int32(j))
		}
	}
	return idx, c
}

func identity(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// batchBytes is about the size of b in an Arrow IPC stream.
func batchBytes(b arrow.RecordBatch) int {
	n := 1024 // the message's metadata, padding
	for _, c := range b.Columns() {
		n += arrayBytes(c.Data())
	}
	return n
}

func arrayBytes(d arrow.ArrayData) int {
	n := 0
	for _, buf := range d.Buffers() {
		if buf != nil {
			n += buf.Len() + 8
		}
	}
	for _, c := range d.Children() {
		n += arrayBytes(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		if dict := d.Dictionary(); dict != nil {
			n += arrayBytes(dict)
		}
	}
	return n
}

// inSchemas returns the schemas of nd's inputs.
func inSchemas(nd *dataflow.Node) []*arrow.Schema {
	out := make([]*arrow.Schema, len(nd.Ins))
	for i, u := range nd.Ins {
		out[i] = u.Out
	}
	return out
}

// gather sends a stage's rows (this worker's, in value order) to every
// worker and returns all workers' rows in value order
// (operators.CanonicalOrder): the same batch in every worker, which one
// process hands on. The stage's readers then find every row in every
// worker (Runner.exchange keeps such input whole).
func (r *Runner) gather(ctx context.Context, nd *dataflow.Node, mine arrow.RecordBatch) (arrow.RecordBatch, error) {
	cl := r.cl
	schemas := []*arrow.Schema{nd.Out}
	var local []arrow.RecordBatch
	if mine != nil {
		local = []arrow.RecordBatch{mine}
	}
	seg, err := exchange.Encode(schemas, [][]arrow.RecordBatch{local})
	if err != nil {
		return nil, fmt.Errorf("stage %s: gather: %w", nd.Name, err)
	}
	incoming, err := r.exchangeRound(ctx, len(seg)*(cl.top.Workers-1), func(_ int, buf *bytes.Buffer) error {
		buf.Write(seg)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", nd.Name, err)
	}
	all := local
	for _, inc := range incoming {
		bs, err := exchange.Decode(schemas, inc.Data)
		if err != nil {
			return nil, fmt.Errorf("stage %s: gather round %d: worker %d's rows: %w", nd.Name, cl.round, inc.Sender, err)
		}
		all = append(all, bs[0]...)
	}
	if len(all) == 0 {
		return nil, nil
	}
	one, err := operators.CanonicalOrder(all, r.Mem)
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", nd.Name, err)
	}
	return one, nil
}

var _ = decide.FileObs{}
