package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

const (
	defaultInput  = "default"
	inlineSeenMax = 512
	rejectedDir   = "_rejected"
)

// runner holds one run's state between epochs.
type runner struct {
	p    *spec.Pipeline
	opts *Options
	log  *slog.Logger
	st   *stores
	c    *epoch.Committer
	mem  memory.Allocator

	plan        *plan
	head        *epoch.Head
	gen         *manifest.Generation
	parallelism int
	k           int
	subtasks    []*operators.Window
	ranges      [][2]int
	stateRefs   []manifest.FileRef // current state file per subtask (reused when unchanged)
	seen        *segLog
	outputs     *segLog
	inputs      map[string]manifest.InputState
	counters    manifest.Counters
	wm          int64
	res         Result
	started     time.Time
	consumed    int
	sideCand    map[int64][]sideFile // side outputs of epochs newer than the head at start
	pf          *prefetcher
	pend        []store.ObjectInfo // pending files, the next epoch's first
}

func newRunner(ctx context.Context, p *spec.Pipeline, st *stores, opts *Options, log *slog.Logger) (*runner, error) {
	r := &runner{p: p, opts: opts, log: log, st: st, mem: memory.DefaultAllocator, started: opts.now()}
	r.c = epoch.NewCommitter(st.state, st.sink, p.Name, log)
	r.c.Now = opts.Now
	r.k = maxParallelism(p)
	r.parallelism = p.State.Parallelism
	if opts.Parallelism > 0 {
		r.parallelism = opts.Parallelism
	}
	if r.parallelism < 1 {
		r.parallelism = 1
	}
	if r.parallelism > r.k {
		return nil, fmt.Errorf("parallelism %d exceeds max_parallelism %d (the key-group count); pick 1..%d", r.parallelism, r.k, r.k)
	}
	r.res.SinkURL, r.res.StateURL = p.Sink.URL, st.stateURL
	return r, nil
}

func (r *runner) keep() int {
	if r.p.State.RetainEpochs > 0 {
		return r.p.State.RetainEpochs
	}
	return spec.DefaultRetainEpochs
}

// start recovers the head, compiles the plan, decides the generation and
// restores state. It writes nothing but the rolled-forward pointer, orphan
// cleanup and (on a topology change) the new _generation.json.
func (r *runner) start(ctx context.Context, files []store.ObjectInfo) error {
	var err error
	t0 := time.Now()
	phase := func(name string) {
		r.log.Debug("start phase", "phase", name, "elapsed", time.Since(t0))
	}
	if r.head, err = r.c.Recover(ctx); err != nil {
		return err
	}
	phase("recover")
	src, err := sourceSchema(r.p)
	if err != nil {
		return err
	}
	if src == nil {
		if src, err = r.inferSchema(ctx, files); err != nil {
			return err
		}
	}
	if r.plan, err = compile(r.p, src); err != nil {
		return err
	}
	// Orphans of attempts that never committed are cleaned (once the output
	// log is loaded) before anything is written.
	hg := r.head.Generation
	if hg != nil && hg.MaxParallelism != r.k {
		return fmt.Errorf("state.max_parallelism is %d but the pipeline was created with %d; it is fixed for a pipeline's life", r.k, hg.MaxParallelism)
	}
	if hg != nil {
		if err := compatible(hg.Plan, r.plan.ops); err != nil {
			return fmt.Errorf("plan change refused before anything was written: %w", err)
		}
	}
	if hg == nil || hg.Parallelism != r.parallelism || hg.PlanHash != r.plan.hash {
		g, err := r.c.StartGeneration(ctx, r.head, manifest.Generation{
			Parallelism: r.parallelism, MaxParallelism: r.k, Plan: r.plan.ops, PlanHash: r.plan.hash,
		})
		if err != nil {
			return err
		}
		r.gen = g
		if hg != nil {
			r.log.Info("new generation", "generation", g.Generation, "parallelism_from", hg.Parallelism, "parallelism_to", r.parallelism,
				"plan_changed", hg.PlanHash != r.plan.hash)
		} else {
			r.log.Info("first generation", "generation", g.Generation, "parallelism", r.parallelism)
		}
	} else {
		r.gen = hg
	}
	phase("plan")
	if err := r.restore(ctx); err != nil {
		return err
	}
	phase("restore")
	if err := r.claimSink(ctx); err != nil {
		return err
	}
	if err := r.cleanSideOutputs(ctx); err != nil {
		return err
	}
	_, err = r.c.Retain(ctx, r.head, r.gcOptions(false))
	phase("cleanup")
	return err
}

// sinkMarker names the object that records which pipeline owns a sink URL.
// Orphan cleanup deletes sink files that the owner did not commit, so two
// pipelines must never share a sink.
const sinkMarker = "_floe_pipeline.json"

func (r *runner) claimSink(ctx context.Context) error {
	// Only the name: state may legitimately move (a bucket migration).
	want := fmt.Sprintf("{\"pipeline\":%q}\n", r.p.Name)
	data, _, err := r.st.sink.Get(ctx, sinkMarker)
	if errors.Is(err, store.ErrNotFound) {
		_, err = r.st.sink.Put(ctx, sinkMarker, []byte(want), store.PutOptions{IfNotExist: true})
		if err == nil || !errors.Is(err, store.ErrPrecondition) {
			return err
		}
		data, _, err = r.st.sink.Get(ctx, sinkMarker)
	}
	if err != nil {
		return fmt.Errorf("sink %s: read %s: %w", r.p.Sink.URL, sinkMarker, err)
	}
	if string(data) != want {
		return fmt.Errorf("sink %s belongs to another pipeline (%s says %s); give each pipeline its own sink url",
			r.p.Sink.URL, sinkMarker, strings.TrimSpace(string(data)))
	}
	return nil
}

func (r *runner) gcOptions(skipSink bool) epoch.GCOptions {
	return epoch.GCOptions{Keep: r.keep(), SkipSink: skipSink, Committed: r.outputs.has}
}

// restore loads source offsets, counters, watermark and keyed state from the
// head, re-partitioning state by key-group range when the parallelism
// changed.
func (r *runner) restore(ctx context.Context) error {
	r.seen = newSegLog("seen", inlineSeenMax)
	r.outputs = newSegLog("outputs", 0)
	r.inputs = map[string]manifest.InputState{}
	r.wm = manifest.NoWatermark
	m := r.head.Manifest
	if m != nil {
		if err := r.seen.load(ctx, r.c, m.Source.Inline, m.Source.Segments); err != nil {
			return err
		}
		if err := r.outputs.load(ctx, r.c, nil, m.OutputLog); err != nil {
			return err
		}
		for k, v := range m.Source.Inputs {
			r.inputs[k] = v
		}
		r.counters = m.Counters
		r.wm = m.Watermark
	}
	r.ranges = make([][2]int, r.parallelism)
	for s := range r.ranges {
		lo, hi := operators.KeyGroupRange(s, r.parallelism, r.k)
		r.ranges[s] = [2]int{lo, hi}
	}
	if r.plan.window == nil {
		return nil
	}
	r.subtasks = make([]*operators.Window, r.parallelism)
	r.stateRefs = make([]manifest.FileRef, r.parallelism)
	var parentFiles []manifest.FileRef
	emitted := manifest.NoWatermark
	if m != nil {
		for _, op := range m.Operators {
			if op.ID == r.plan.window.ID {
				parentFiles, emitted = op.Files, op.EmittedThrough
			}
		}
	}
	sameLayout := r.head.Generation != nil && r.head.Generation.Parallelism == r.parallelism && len(parentFiles) == r.parallelism
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for s := range r.subtasks {
		g.Go(func() error {
			w, err := operators.NewWindow(*r.plan.window, r.plan.windowIn, r.k)
			if err != nil {
				return err
			}
			lo, hi := r.ranges[s][0], r.ranges[s][1]
			var batches []arrow.RecordBatch
			for _, f := range parentFiles {
				if f.KeyGroupHi <= lo || f.KeyGroupLo >= hi {
					continue // no overlap: not read at all
				}
				data, err := r.c.ReadFile(gctx, f)
				if err != nil {
					return err
				}
				_, recs, err := formats.ReadParquetFiltered(data, r.mem, operators.ColKeyGroup, int64(lo), int64(hi))
				if err != nil {
					return fmt.Errorf("restore %s: %w", f.Path, err)
				}
				batches = append(batches, recs...)
			}
			if err := w.Restore(batches, lo, hi, emitted); err != nil {
				return fmt.Errorf("restore subtask %d: %w", s, err)
			}
			if sameLayout && r.gen.Generation == r.head.Manifest.Generation {
				r.stateRefs[s] = parentFiles[s] // unchanged state can be shared
			}
			r.subtasks[s] = w
			return nil
		})
	}
	return g.Wait()
}

func (r *runner) inferSchema(ctx context.Context, files []store.ObjectInfo) (*arrow.Schema, error) {
	if r.p.Source.Format != spec.Parquet {
		return nil, fmt.Errorf("source.schema is required for %s sources", r.p.Source.Format)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("source.schema is not declared and no Parquet file exists under %s to infer it from", r.p.Source.URL)
	}
	data, err := store.Read(ctx, r.st.source, files[0].Key)
	if err != nil {
		return nil, fmt.Errorf("infer schema: %w", err)
	}
	schema, err := formats.ParquetSchema(files[0].Key, data)
	if err != nil {
		return nil, fmt.Errorf("infer schema: %w", err)
	}
	return schema, nil
}

// listPending lists the source and returns the files not yet processed, in
// key order.
func (r *runner) listSource(ctx context.Context) ([]store.ObjectInfo, error) {
	objs, err := r.st.source.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list source %s: %w", r.p.Source.URL, err)
	}
	out := objs[:0]
	for _, o := range objs {
		base := path.Base(o.Key)
		if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			continue // hidden and in-progress files (Spark/Hive convention)
		}
		if pat := r.p.Source.Pattern; pat != "" {
			ok, err := path.Match(pat, o.Key)
			if err != nil {
				return nil, fmt.Errorf("source.pattern %q: %w", pat, err)
			}
			if !ok {
				if ok2, _ := path.Match(pat, base); !ok2 {
					continue
				}
			}
		}
		out = append(out, o)
	}
	return out, nil
}

func (r *runner) pending(files []store.ObjectInfo) []store.ObjectInfo {
	var out []store.ObjectInfo
	for _, f := range files {
		if !r.seen.has(f.Key) {
			out = append(out, f)
		}
	}
	return out
}

// inputOf maps a source file to its watermark input.
func (r *runner) inputOf(key string) string {
	if r.p.Source.Inputs == spec.InputsDirectory {
		if i := strings.IndexByte(key, '/'); i > 0 {
			return key[:i]
		}
	}
	return defaultInput
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	files, err := r.listSource(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.start(ctx, files); err != nil {
		return nil, err
	}
	r.res.Generation = r.gen.Generation
	r.res.LastEpoch = r.head.Epoch()
	if u := r.opts.UntilEpoch; u > 0 && r.head.Epoch() >= u {
		r.res.UntilReached = true
	}
	pend := r.interleave(r.pending(files))
	known := int64(len(pend))
	r.pf = newPrefetcher(ctx, r)
	defer r.pf.stop()
	for {
		if r.opts.UntilEpoch > 0 && r.head.Epoch() >= r.opts.UntilEpoch {
			break
		}
		if ctx.Err() != nil {
			return &r.res, ctx.Err()
		}
		if r.stopping() {
			r.log.Info("stop requested: stopping after the last committed epoch", "epoch", r.head.Epoch())
			break
		}
		batch := r.selectFiles(pend)
		r.pend = pend
		drainNow := len(batch) == 0 && r.opts.Drain && r.wm != math.MaxInt64
		if len(batch) == 0 && !drainNow {
			if r.opts.Trigger == 0 {
				break
			}
			select {
			case <-ctx.Done():
				continue
			case <-r.opts.Stop:
				continue
			case <-time.After(r.opts.Trigger):
			}
			if files, err = r.listSource(ctx); err != nil {
				return &r.res, err
			}
			pend = r.interleave(r.pending(files))
			known = r.res.Files + int64(len(pend))
			if len(pend) == 0 {
				// Idle: let the idle timeout advance the watermark.
				if err := r.epoch(ctx, nil, false, true); err != nil {
					return &r.res, err
				}
			}
			continue
		}
		if r.opts.UntilEpoch == 0 || r.head.Epoch()+1 < r.opts.UntilEpoch {
			r.pf.start(r.selectFiles(pend[len(batch):])) // the next epoch's files, in the background
		}
		if err := r.epoch(ctx, batch, drainNow, false); err != nil {
			return &r.res, err
		}
		pend = pend[r.consumed:]
		r.progress(known)
		if drainNow {
			break
		}
	}
	// Final cleanup of orphans of the epochs this run committed.
	if r.res.Epochs > 0 {
		if _, err := r.c.Retain(ctx, r.head, r.gcOptions(false)); err != nil {
			return &r.res, err
		}
	}
	r.res.LastEpoch = r.head.Epoch()
	r.res.Watermark = r.wm
	return &r.res, nil
}

// stopping reports whether Options.Stop was closed.
func (r *runner) stopping() bool {
	select {
	case <-r.opts.Stop:
		return true
	default:
		return false
	}
}

func (r *runner) progress(known int64) {
	if r.opts.Progress == nil {
		return
	}
	r.opts.Progress(Progress{Epoch: r.head.Epoch(), FilesDone: r.res.Files, FilesPending: known,
		RowsDone: r.res.Rows, Watermark: r.wm, Started: r.started})
}

// selectFiles picks the next epoch's files: at most max_files_per_epoch, and
// (by size estimate) about max_rows_per_epoch rows; always at least one.
func (r *runner) selectFiles(pend []store.ObjectInfo) []store.ObjectInfo {
	n := len(pend)
	if m := r.p.Source.MaxFilesPerEpoch; m > 0 && n > m {
		n = m
	}
	return pend[:n]
}

// fileResult is one decoded file after the stateless stages, split by
// subtask.
type fileResult struct {
	key      string
	rows     int64
	filtered int64
	maxTS    int64
	batches  []arrow.RecordBatch // after the stateless stages
	sels     [][][]int32         // window: per batch, per subtask, the rows it owns
	rejects  []formats.Reject
}

func (r *runner) decodeFile(ctx context.Context, f store.ObjectInfo, schema *arrow.Schema, parallel int) (*fileResult, error) {
	data, err := store.Read(ctx, r.st.source, f.Key)
	if err != nil {
		return nil, fmt.Errorf("read source file %s: %w", f.Key, err)
	}
	opts := formats.DecodeOptions{Schema: schema, EventTime: r.p.Source.EventTime, Mem: r.mem, Parallelism: parallel}
	if c := r.p.Source.CSV; c != nil {
		opts.CSV.NoHeader = !c.Header
		if c.Delimiter != "" {
			opts.CSV.Delimiter = []rune(c.Delimiter)[0]
		}
	}
	d, err := formats.Decode(string(r.p.Source.Format), f.Key, data, opts)
	if err != nil {
		if r.p.Source.OnError == spec.OnErrorFail {
			return nil, fmt.Errorf("source file: %w (on_error: fail)", err)
		}
		// The whole file is undecodable (not Parquet, a CSV header without a
		// declared column): reject it as one record, so one bad file does
		// not stop the pipeline. Store errors above still fail the epoch.
		r.log.Warn("rejecting an undecodable source file", "file", f.Key, "error", err)
		return &fileResult{key: f.Key, maxTS: math.MinInt64,
			rejects: []formats.Reject{{File: f.Key, Line: 0, Reason: "whole file rejected: " + err.Error()}}}, nil
	}
	res := &fileResult{key: f.Key, rows: d.Rows, rejects: d.Rejects, maxTS: math.MinInt64}
	if r.p.Source.OnError == spec.OnErrorFail && len(d.Rejects) > 0 {
		rj := d.Rejects[0]
		return nil, fmt.Errorf("source file %s line %d: %s (on_error: fail)", rj.File, rj.Line, rj.Reason)
	}
	tsCol := r.plan.source.FieldIndices(r.p.Source.EventTime)[0]
	for _, b := range d.Batches {
		ts := b.Column(tsCol).(*array.Timestamp)
		for i, v := range ts.Values() {
			if int64(v) > res.maxTS && ts.IsValid(i) {
				res.maxTS = int64(v)
			}
		}
		out, dropped, err := runStages(r.plan.pre, b, r.mem)
		if err != nil {
			return nil, fmt.Errorf("source file %s: %w", f.Key, err)
		}
		res.filtered += dropped
		if out.NumRows() == 0 {
			continue
		}
		res.batches = append(res.batches, out)
		if r.plan.window != nil {
			sels, err := operators.PartitionIndices(out, r.plan.keyCols, r.parallelism, r.k)
			if err != nil {
				return nil, err
			}
			res.sels = append(res.sels, sels)
		}
	}
	return res, nil
}

// watermark computes the combined watermark: the minimum over active inputs
// of max event time - max_out_of_orderness; inputs idle longer than the idle
// timeout do not hold it back.
func (r *runner) watermark(now time.Time, waiting map[string]bool) int64 {
	ooo := r.p.Source.Watermark.MaxOutOfOrderness.Microseconds()
	idle := r.p.Source.Watermark.IdleTimeout
	wm, active := int64(math.MaxInt64), false
	maxAll := int64(math.MinInt64)
	for name, in := range r.inputs {
		if in.MaxEventTime == math.MinInt64 {
			continue
		}
		v := in.MaxEventTime - ooo
		maxAll = max(maxAll, v)
		if idle > 0 && now.Sub(in.LastActive) >= idle && !waiting[name] {
			continue // idle: no files for a while, none waiting
		}
		active = true
		wm = min(wm, v)
	}
	for name := range waiting {
		if in, seen := r.inputs[name]; !seen || in.MaxEventTime == math.MinInt64 {
			// An input with files waiting whose event times are unknown yet
			// holds the watermark where it is until they are read.
			wm, active = min(wm, r.wm), true
		}
	}
	if !active {
		wm = maxAll
	}
	return max(wm, r.wm) // never backwards
}

// waitingInputs returns the inputs that have listed files not taken by the
// epoch in progress.
func (r *runner) waitingInputs(taken int) map[string]bool {
	w := map[string]bool{}
	if taken < len(r.pend) {
		for _, f := range r.pend[taken:] {
			w[r.inputOf(f.Key)] = true
		}
	}
	return w
}

// interleave orders pending files round-robin across inputs (the first
// file of every input, then the second, ...), so that with per-directory
// inputs a catch-up advances every input together instead of one after the
// other, which would hold the watermark back. Deterministic: by key within
// an input, by name across inputs.
func (r *runner) interleave(pend []store.ObjectInfo) []store.ObjectInfo {
	if r.p.Source.Inputs != spec.InputsDirectory {
		return pend
	}
	byInput := map[string][]store.ObjectInfo{}
	var names []string
	for _, f := range pend {
		n := r.inputOf(f.Key)
		if _, ok := byInput[n]; !ok {
			names = append(names, n)
		}
		byInput[n] = append(byInput[n], f)
	}
	sort.Strings(names)
	out := make([]store.ObjectInfo, 0, len(pend))
	for k := 0; len(out) < len(pend); k++ {
		for _, n := range names {
			if k < len(byInput[n]) {
				out = append(out, byInput[n][k])
			}
		}
	}
	return out
}

// epoch processes files as one epoch and commits it. drain advances the
// watermark to +inf; idle commits only if the watermark moved.
// It sets r.consumed to how many of files the epoch took (fewer than
// offered when max_rows_per_epoch cut it).
func (r *runner) epoch(ctx context.Context, files []store.ObjectInfo, drain, idle bool) error {
	now := r.opts.now()
	t0 := time.Now()
	phase := func(name string) {
		r.log.Debug("epoch phase", "phase", name, "elapsed", time.Since(t0))
	}
	results, err := r.decodeEpoch(ctx, files)
	if err != nil {
		return err
	}
	phase("decode")
	files = files[:len(results)]
	r.consumed = len(files)
	in := r.observe(results, now)
	newWM := r.watermark(now, r.waitingInputs(len(files)))
	if drain {
		newWM = math.MaxInt64
	}
	if idle && newWM == r.wm {
		return nil
	}
	out, err := r.process(ctx, results, newWM)
	if err != nil {
		return err
	}
	phase("process")
	att := r.c.Begin(r.head, r.gen.Generation)
	if err := r.write(ctx, att, out, in.rejects); err != nil {
		return err
	}
	phase("write")
	m, err := r.manifest(ctx, att, files, in, out, newWM)
	if err != nil {
		return err
	}
	phase("offsets")
	head, err := att.Commit(ctx, m)
	phase("commit")
	if errors.Is(err, epoch.ErrSuperseded) {
		// Committed, but another run (an overlapping cron job?) is ahead of
		// this one: everything held in memory is stale. Stop; the next run
		// continues from the newest head.
		return fmt.Errorf("%w; this run stops, the next one continues from there", err)
	}
	if err != nil {
		return err
	}
	r.head, r.wm = head, newWM
	if err := r.settleSideOutputs(ctx, m); err != nil {
		return err
	}
	r.account(files, in, out)
	r.log.Info("epoch committed", "epoch", head.Epoch(), "generation", r.gen.Generation, "files", len(files),
		"rows", in.rows, "rows_out", out.rowsOut, "late", out.late, "rejected", len(in.rejects), "watermark", fmtWM(newWM),
		"duration", time.Since(t0).Round(time.Millisecond))
	if _, err := r.c.Retain(ctx, r.head, r.gcOptions(true)); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// decodeEpoch decodes files in parallel (taking prefetched results). With
// max_rows_per_epoch it decodes in waves and stops after the file that
// crosses the limit, deterministically by file order; it returns the
// results of the files the epoch takes.
func (r *runner) decodeEpoch(ctx context.Context, files []store.ObjectInfo) ([]*fileResult, error) {
	results := make([]*fileResult, 0, len(files))
	wave := len(files)
	if r.p.Source.MaxRowsPerEpoch > 0 {
		wave = runtime.GOMAXPROCS(0)
	}
	var total int64
	for start := 0; start < len(files); start += wave {
		chunk := files[start:min(start+wave, len(files))]
		out := make([]*fileResult, len(chunk))
		errs := make([]error, len(chunk))
		var g errgroup.Group
		g.SetLimit(runtime.GOMAXPROCS(0))
		for i, f := range chunk {
			g.Go(func() error {
				if r.pf != nil {
					if res, err, ok := r.pf.take(ctx, f.Key); ok {
						out[i], errs[i] = res, err
						return nil
					}
				}
				// A lone big file splits itself across the cores.
				out[i], errs[i] = r.decodeFile(ctx, f, r.plan.source, max(1, runtime.GOMAXPROCS(0)/len(chunk)))
				return nil
			})
		}
		_ = g.Wait()
		// In key order: the first failing file fails the epoch, whatever
		// finished first, unless the row limit ends the epoch before it.
		for i, res := range out {
			if errs[i] != nil {
				return nil, errs[i]
			}
			results = append(results, res)
			total += res.rows
			if lim := r.p.Source.MaxRowsPerEpoch; lim > 0 && total >= lim {
				return results, nil
			}
		}
	}
	return results, nil
}

// inputSummary is what an epoch's decoded files add up to.
type inputSummary struct {
	rows, filtered int64
	rejects        []formats.Reject
}

// observe totals the decoded files and advances each input's event-time
// progress.
func (r *runner) observe(results []*fileResult, now time.Time) inputSummary {
	var in inputSummary
	for _, res := range results {
		in.rows += res.rows
		in.filtered += res.filtered
		in.rejects = append(in.rejects, res.rejects...)
		name := r.inputOf(res.key)
		st := r.inputs[name]
		if st.LastActive.IsZero() {
			st.MaxEventTime = math.MinInt64
		}
		st.LastActive = now
		st.MaxEventTime = max(st.MaxEventTime, res.maxTS)
		r.inputs[name] = st
	}
	return in
}

// processed is an epoch's output before it is written.
type processed struct {
	out      [][]arrow.RecordBatch // per subtask (subtask 0 without a window)
	outRows  []int64
	lateRows [][]arrow.RecordBatch // per subtask
	late     int64
	windows  int64
	rowsOut  int64
	outRefs  []manifest.FileRef
	sideRefs []manifest.FileRef
}

// process runs the keyed window subtasks in parallel (each over its
// selection of every batch) and advances them to wm, or passes rows through
// a window-less plan.
func (r *runner) process(ctx context.Context, results []*fileResult, wm int64) (*processed, error) {
	n := max(1, r.parallelism)
	out := &processed{out: make([][]arrow.RecordBatch, n), outRows: make([]int64, n)}
	if r.plan.window == nil {
		for _, res := range results {
			for _, b := range res.batches {
				o, _, err := runStages(r.plan.post, b, r.mem)
				if err != nil {
					return nil, err
				}
				if o.NumRows() > 0 {
					out.out[0] = append(out.out[0], o)
					out.outRows[0] += o.NumRows()
				}
			}
		}
		return out, nil
	}
	out.lateRows = make([][]arrow.RecordBatch, r.parallelism)
	var lateN, winN atomic.Int64
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for s, w := range r.subtasks {
		g.Go(func() error {
			changed := false
			for _, res := range results {
				for j, b := range res.batches {
					// Every instance sees every batch (an empty selection
					// still advances its arrival sequence), so first/last
					// ties break the same way at any parallelism.
					sel := res.sels[j][s]
					changed = changed || len(sel) > 0
					lb, err := w.ProcessSelected(b, sel)
					if err != nil {
						return err
					}
					if lb != nil && lb.NumRows() > 0 {
						lateN.Add(lb.NumRows())
						out.lateRows[s] = append(out.lateRows[s], lb)
					}
				}
			}
			em, err := w.Advance(wm)
			if err != nil {
				return err
			}
			if em != nil && em.NumRows() > 0 {
				changed = true
				winN.Add(em.NumRows())
				o, _, err := runStages(r.plan.post, em, r.mem)
				if err != nil {
					return err
				}
				if o.NumRows() > 0 {
					out.out[s] = append(out.out[s], o)
					out.outRows[s] = o.NumRows()
				}
			}
			if changed {
				r.stateRefs[s] = manifest.FileRef{} // must be rewritten
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out.late, out.windows = lateN.Load(), winN.Load()
	return out, nil
}

// write puts the epoch's outputs, side outputs and changed state files, all
// attempt-tagged, in parallel, and records their references.
func (r *runner) write(ctx context.Context, att *epoch.Attempt, out *processed, rejects []formats.Reject) error {
	var mu sync.Mutex
	add := func(refs *[]manifest.FileRef, ref manifest.FileRef) {
		mu.Lock()
		*refs = append(*refs, ref)
		mu.Unlock()
	}
	wg, wctx := errgroup.WithContext(ctx)
	wg.SetLimit(4 * runtime.GOMAXPROCS(0))
	for s, bs := range out.out {
		if len(bs) == 0 {
			continue
		}
		wg.Go(func() error {
			data, ext, err := r.encodeOutput(bs)
			if err != nil {
				return err
			}
			ref, err := att.WriteOutput(wctx, "", s, ext, data, out.outRows[s])
			if err != nil {
				return err
			}
			add(&out.outRefs, ref)
			return nil
		})
	}
	for s, bs := range out.lateRows {
		if len(bs) == 0 || r.st.late == nil {
			continue
		}
		wg.Go(func() error {
			data, err := formats.EncodeParquet(r.plan.windowIn, bs, formats.EncodeOptions{Mem: r.mem})
			if err != nil {
				return err
			}
			ref, err := att.WriteSide(wctx, r.st.late, "", s, "parquet", data, countRows(bs))
			if err != nil {
				return err
			}
			ref.Path = refURL(r.p.Source.LateURL, ref.Path)
			ref.Kind = manifest.SideOutputLate
			add(&out.sideRefs, ref)
			return nil
		})
	}
	if len(rejects) > 0 {
		wg.Go(func() error {
			data, err := formats.EncodeRejects(rejects)
			if err != nil {
				return err
			}
			var ref manifest.FileRef
			if r.st.rejected != nil {
				ref, err = att.WriteSide(wctx, r.st.rejected, "", 0, "jsonl", data, int64(len(rejects)))
				ref.Path = refURL(r.p.Source.RejectedURL, ref.Path)
			} else {
				ref, err = att.WriteOutput(wctx, rejectedDir, 0, "jsonl", data, int64(len(rejects)))
			}
			if err != nil {
				return err
			}
			ref.Kind = manifest.SideOutputRejected
			add(&out.sideRefs, ref)
			return nil
		})
	}
	for s, w := range r.subtasks {
		if r.stateRefs[s].Path != "" {
			continue // unchanged: the previous file is shared
		}
		wg.Go(func() error {
			snap, err := w.Snapshot()
			if err != nil {
				return err
			}
			data, err := formats.EncodeParquet(w.StateSchema(), snap, formats.EncodeOptions{Mem: r.mem, RowGroupRows: 16 << 10,
				Compression: "snappy", NoDictionary: true})
			if err != nil {
				return fmt.Errorf("encode state of subtask %d: %w", s, err)
			}
			ref, err := att.WriteState(wctx, r.plan.window.ID, s, r.ranges[s][0], r.ranges[s][1], data, countRows(snap))
			if err != nil {
				return err
			}
			r.stateRefs[s] = ref
			return nil
		})
	}
	if err := wg.Wait(); err != nil {
		return err
	}
	sort.Slice(out.outRefs, func(i, j int) bool { return out.outRefs[i].Subtask < out.outRefs[j].Subtask })
	sort.Slice(out.sideRefs, func(i, j int) bool { return out.sideRefs[i].Path < out.sideRefs[j].Path })
	for _, o := range out.outRefs {
		out.rowsOut += o.Rows
	}
	return nil
}

// manifest builds the epoch's manifest: offsets (the processed-file set and
// the committed-output log, flushed as segments when large), watermark,
// counters, state and output references.
func (r *runner) manifest(ctx context.Context, att *epoch.Attempt, files []store.ObjectInfo, in inputSummary, out *processed, wm int64) (*manifest.Manifest, error) {
	m := &manifest.Manifest{}
	for _, f := range files {
		r.seen.append(f.Key)
	}
	var err error
	if m.Source.Inline, m.Source.Segments, err = r.seen.flush(ctx, att); err != nil {
		return nil, err
	}
	m.Source.Count = int64(len(r.seen.entries))
	m.Source.Inputs = r.inputs
	for _, o := range out.outRefs {
		r.outputs.append(o.Path)
	}
	if _, m.OutputLog, err = r.outputs.flush(ctx, att); err != nil {
		return nil, err
	}
	rejected := int64(len(in.rejects))
	r.counters.FilesIn += int64(len(files))
	r.counters.RowsIn += in.rows + rejected
	r.counters.RowsOut += out.rowsOut
	r.counters.RowsLate += out.late
	r.counters.RowsRejected += rejected
	r.counters.RowsFiltered += in.filtered
	r.counters.Windows += out.windows
	m.Counters = r.counters
	m.Watermark = wm
	m.Outputs = out.outRefs
	m.SideOutputs = out.sideRefs
	if r.plan.window != nil {
		m.Operators = []manifest.OperatorState{{ID: r.plan.window.ID, EmittedThrough: wm, Files: append([]manifest.FileRef(nil), r.stateRefs...)}}
	}
	return m, nil
}

// account adds a committed epoch to the run's result.
func (r *runner) account(files []store.ObjectInfo, in inputSummary, out *processed) {
	r.res.Epochs++
	if r.res.FirstEpoch == 0 {
		r.res.FirstEpoch = r.head.Epoch()
	}
	r.res.LastEpoch = r.head.Epoch()
	r.res.Files += int64(len(files))
	r.res.Rows += in.rows
	r.res.RowsOut += out.rowsOut
	r.res.RowsLate += out.late
	r.res.RowsRejected += int64(len(in.rejects))
	for _, o := range out.outRefs {
		r.res.Outputs = append(r.res.Outputs, o.Path)
	}
}

func countRows(bs []arrow.RecordBatch) int64 {
	var n int64
	for _, b := range bs {
		n += b.NumRows()
	}
	return n
}

func (r *runner) encodeOutput(bs []arrow.RecordBatch) ([]byte, string, error) {
	switch r.p.Sink.Format {
	case spec.JSONL:
		data, err := formats.EncodeJSONL(r.plan.output, bs)
		return data, "jsonl", err
	default:
		data, err := formats.EncodeParquet(r.plan.output, bs, formats.EncodeOptions{Mem: r.mem, Compression: "snappy"})
		return data, "parquet", err
	}
}

// FormatWatermark renders a watermark for people.
func fmtWM(wm int64) string {
	switch wm {
	case math.MinInt64:
		return "none"
	case math.MaxInt64:
		return "+inf (drained)"
	}
	return time.UnixMicro(wm).UTC().Format(time.RFC3339)
}

// FormatWatermark renders a watermark in microseconds for people.
func FormatWatermark(wm int64) string { return fmtWM(wm) }
