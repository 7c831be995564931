package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// runner holds one run's state between epochs. Its fields change in three
// places only: start (from the run plan), beginWriting (the generation the
// plan starts, once, before the first write) and apply (from a committed
// epoch's edit).
type runner struct {
	p    *spec.Pipeline
	opts *Options
	log  *slog.Logger
	st   *stores
	c    *epoch.Committer
	mem  memory.Allocator
	dc   decideConfig

	plan        *plan
	head        *epoch.Head
	gen         *manifest.Generation
	parallelism int
	k           int
	graph       *graphState      // the stateful stages' subtasks and state (graphexec.go)
	sourceWM    map[string]int64 // the graph form: this epoch's watermark of each source
	stageWM     map[string]int64 // replay: each stage's recorded watermark
	decodedAll  atomic.Int64     // state rows decoded by loadAll (from parallel writers)
	ranges      [][2]int
	seen        *epoch.SegLog
	listing     *listing // how the source is listed (listing.go)
	// recordListing: the run made a full listing (or forgot processed
	// files) that the head does not record yet; an epoch commits it even
	// without new input.
	recordListing bool
	// chainedAt is the head epoch whose collection of the chain only
	// (GCOptions.ChainOnly) completed last (0: none since the last commit).
	chainedAt int64
	// retainedAt is the head epoch whose state-root collection completed
	// last (0: none since the last commit).
	retainedAt int64
	outputs    *epoch.SegLog
	inputs     map[string]manifest.InputState
	counters   manifest.Counters
	wm         int64
	res        Result
	started    time.Time
	sides      *epoch.SideSweeper
	pf         *prefetcher
	// epochFloor is the lowest epoch number the next attempt may take: a
	// restore into an empty state continues the restored epoch numbers.
	epochFloor int64
	// mustCommit: the run restores something other than the head (a
	// savepoint, a rollback, a reset), which takes effect only once an epoch
	// of the new generation is committed, with or without new input.
	mustCommit bool
	// skipRead: the epoch marks its files read without reading them
	// (start_from: latest on a new pipeline).
	skipRead bool
	// table is the Iceberg table of an iceberg sink (nil otherwise).
	table *tableSink
	// progressWaiting marks the progress report of a waiting trigger run.
	progressWaiting bool
	// sizes records every processed file's size; sizeOf is its index.
	// changed holds processed files found with another size, recorded by
	// the next epoch (noted: warned about in this run).
	sizes   *epoch.SegLog
	sizeOf  map[string]int64
	changed map[string]int64
	noted   map[string]bool
	// captured maps source keys to the copies an epoch captured
	// (source.capture), read when the source's file is gone (replay).
	captured map[string]manifest.FileRef
	// newGen is the generation the plan starts, not created yet (nil: none
	// pending); beginWriting creates it before the first attempt writes.
	// Until then gen is nil (no head) or the head's.
	newGen       *manifest.Generation
	newGenReason string
	// ident is the run plan's identity verdict; claimed: beginWriting ran
	// (generation started, sinks claimed).
	ident   *identityPlan
	claimed bool
}

func newRunner(p *spec.Pipeline, st *stores, opts *Options, log *slog.Logger) (*runner, error) {
	r := &runner{p: p, opts: opts, log: log, st: st, mem: memory.DefaultAllocator, started: opts.now(), dc: newDecideConfig(p)}
	if isGraph(p) {
		r.dc.oooOf = map[string]time.Duration{}
		r.dc.maxFilesOf = map[string]int{}
		for _, ns := range p.Sources {
			r.dc.oooOf[ns.Name] = ns.Source.Watermark.MaxOutOfOrderness
			r.dc.maxFilesOf[ns.Name] = ns.Source.MaxFilesPerEpoch
		}
	}
	r.c = epoch.NewCommitter(st.state, st.sink, p.Name, log)
	r.c.Now = opts.Now
	var err error
	if r.parallelism, r.k, err = parallelismOf(p, opts); err != nil {
		return nil, err
	}
	r.res.SinkURL, r.res.StateURL = store.Redact(p.Sink.URL), store.Redact(st.stateURL) // printed by the CLI
	for _, sk := range extraSinks(p) {
		r.res.SinkURL += ", " + store.Redact(sk.Sink.URL)
	}
	return r, nil
}

// keep is how many epochs retention keeps: the spec's retain_epochs, and
// every epoch an Iceberg table has not yet published.
func (r *runner) keep() int {
	n := keepOf(r.p)
	if r.table != nil && r.head != nil {
		n = max(n, int(r.head.Epoch()-r.table.published)+1)
	}
	return n
}

// start recovers the head, plans the run (refusing it before anything is
// written), claims the pipeline's identity, starts or continues the
// generation, restores state and cleans orphans of dead attempts. It
// returns the source listing the plan was made from.
func (r *runner) start(ctx context.Context) ([]store.ObjectInfo, error) {
	t0 := time.Now()
	phase := func(name string) {
		r.log.Debug("start phase", "phase", name, "elapsed", time.Since(t0))
	}
	head, err := r.c.Recover(ctx)
	if err != nil {
		return nil, err
	}
	phase("recover")
	rp, err := planRun(ctx, r.p, r.st, r.opts, head)
	if err != nil {
		return nil, err
	}
	defer rp.from.close()
	if rp.refusal != nil {
		return nil, rp.refusal
	}
	for _, w := range rp.identity.warnings {
		r.log.Warn(w)
	}
	r.head, r.plan, r.ident, r.listing = head, rp.plan, rp.identity, rp.listing
	if rp.newGeneration {
		// Started by beginWriting, when the first epoch is about to write:
		// a run that commits nothing writes no generation.
		rec := rp.generationRecord()
		r.newGen, r.newGenReason = &rec, rp.reason
	} else {
		r.gen = head.Generation
		r.res.Generation = r.gen.Generation
	}
	if f := rp.from; f.kind == manifest.RestoreReset && head.Manifest != nil {
		r.res.StateDropped = droppedState(head.Manifest)
		for _, d := range r.res.StateDropped {
			r.log.Warn("reset-state drops an operator's state", "operator", d.Operator, "base_rows", d.BaseRows, "delta_files", d.DeltaFiles, "epoch", head.Epoch())
		}
	}
	if f := rp.from; f.kind != "" {
		r.mustCommit = true
		if f.manifest != nil {
			r.epochFloor = f.manifest.Epoch + 1
		}
	}
	phase("plan")
	if err := r.restore(ctx, rp); err != nil {
		return nil, err
	}
	phase("restore")
	if err := r.openTable(ctx); err != nil {
		return nil, err
	}
	// The sinks are still this state's (a takeover may have come after
	// planIdentity read the markers): only then clean them.
	if err := r.ident.checkOwner(ctx, r.st.sink); err != nil {
		return nil, err
	}
	if r.sides, err = r.c.SweepSideOutputs(ctx, head, r.keep(), r.sideDirs()); err != nil {
		return nil, err
	}
	if !r.listing.full {
		// Orphans in the state and the sinks wait for a run that lists the
		// source in full (sweeping); side outputs were swept above.
		phase("cleanup")
		return rp.files, nil
	}
	// Sink cleanup judges outputs by the restored output log; while a
	// restore is not committed the head's log is the truth, so it waits.
	_, err = r.c.Retain(ctx, head, r.gcOptions(r.mustCommit || r.ident.takeoverPending()))
	phase("cleanup")
	return rp.files, err
}

// Housekeeping listings (what only a listing finds: files of attempts that
// never committed, in the state's gen= prefix and in the sinks) are made by
// runs whose source listing is whole: every run without source.order; with
// order: lexical the runs that list in full (full_list_every, --full-list,
// restores), so a run that lists after the frontier lists nothing else that
// grows with the history. Between them retention deletes what the manifest
// chain names (epochs leaving retention and the files only they
// reference, GCOptions.ChainOnly), and side outputs are swept at every
// start, listing only the epochs the sweep can judge (SideDir.Flat). An
// orphan in the state or a sink is therefore deleted by the first sweeping
// run after its epoch was committed, within full_list_every; a committed
// file never is.

func (r *runner) sideDirs() []epoch.SideDir {
	var out []epoch.SideDir
	if r.st.rejected != nil {
		out = append(out, epoch.SideDir{Name: "rejected_url", Store: r.st.rejected, Flat: true})
	} else {
		out = append(out, epoch.SideDir{Name: "sink " + rejectedDir, Store: r.st.sink, Prefix: rejectedDir + "/", Flat: true})
	}
	if r.st.late != nil {
		out = append(out, epoch.SideDir{Name: "late_url", Store: r.st.late, Flat: true})
	}
	if r.graph != nil {
		for _, nd := range r.plan.graph.nodes {
			if s := r.graph.late[nd.name]; s != nil && s != r.st.late {
				out = append(out, epoch.SideDir{Name: "stages." + nd.name + ".late_url", Store: s})
			}
		}
	}
	return out
}

func (r *runner) gcOptions(skipSink bool) epoch.GCOptions {
	return epoch.GCOptions{Keep: r.keep(), SkipSink: skipSink, Committed: r.outputs.Has, SidePrefixes: []string{rejectedDir + "/"}}
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	defer func() {
		r.res.Requests = r.st.requests()
		r.res.StateRowsDecoded += r.decodedAll.Swap(0)
		r.res.StateRowsSkipped += r.rowsNotDecoded()
	}()
	files, err := r.start(ctx)
	if err != nil {
		return &r.res, err
	}
	r.res.LastEpoch = r.head.Epoch()
	if u := r.opts.UntilEpoch; u > 0 && r.head.Epoch() >= u {
		r.res.UntilReached = true
	}
	pend := r.dc.interleave(r.pendingOf(files))
	known := int64(len(pend))
	r.warnAfterDrain(pend)
	r.noteChanged(files)
	if _, latest, _ := r.p.Source.StartTime(); latest && r.head.Manifest == nil && !r.mustCommit && len(pend) > 0 {
		r.skipRead = true
		n, err := r.epoch(ctx, pend, pend, false, false)
		r.skipRead = false
		if err != nil {
			return &r.res, err
		}
		r.log.Info("start_from: latest: files present at the start marked read without reading them", "files", n)
		pend = pend[n:]
	}
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
		batch := r.dc.selectFiles(pend)
		drainNow := len(batch) == 0 && r.opts.Drain && r.wm != math.MaxInt64
		if len(batch) == 0 && !drainNow && (r.mustCommit || r.recordListing) {
			// Commit the restored state as it is (or the full listing).
			if _, err := r.epoch(ctx, nil, pend, false, false); err != nil {
				return &r.res, err
			}
			continue
		}
		if len(batch) == 0 && !drainNow {
			if r.opts.Trigger == 0 {
				break
			}
			r.waiting(known)
			select {
			case <-ctx.Done():
				continue
			case <-r.opts.Stop:
				continue
			case <-time.After(r.opts.Trigger):
			}
			now := r.opts.now()
			if err := r.replanListing(ctx, now); err != nil {
				return &r.res, err
			}
			if files, err = r.listing.list(ctx, r.p, r.st.source, now); err != nil {
				return &r.res, err
			}
			pend = r.dc.interleave(r.pendingOf(files))
			known = r.res.Files + int64(len(pend))
			r.warnAfterDrain(pend)
			r.noteChanged(files)
			if len(pend) == 0 {
				// Idle: let the idle timeout advance the watermark (and
				// record a full listing).
				if _, err := r.epoch(ctx, nil, nil, false, !r.recordListing); err != nil {
					return &r.res, err
				}
			}
			continue
		}
		if r.opts.UntilEpoch == 0 || r.head.Epoch()+1 < r.opts.UntilEpoch {
			r.pf.start(r.dc.selectFiles(pend[len(batch):])) // the next epoch's files, in the background
		}
		consumed, err := r.epoch(ctx, batch, pend, drainNow, false)
		if err != nil {
			return &r.res, err
		}
		pend = pend[consumed:]
		r.progress(known)
		if drainNow {
			break
		}
	}
	// Final cleanup of orphans of the epochs this run committed, if the
	// sinks are still this state's.
	if r.res.Epochs > 0 {
		if err := r.ident.checkOwner(ctx, r.st.sink); err != nil {
			return &r.res, err
		}
		r.retainEnd(ctx)
		r.sweepAbandoned(ctx)
		r.maintainTable(ctx)
	}
	if r.newGen != nil {
		r.log.Info("nothing to commit: no generation started (it takes effect with the first epoch a run with these options commits)",
			"reason", r.newGenReason, "parallelism", r.parallelism)
		if note := parallelismNote(r.p, r.opts); note != "" {
			r.log.Info(note)
		}
	}
	r.res.LastEpoch = r.head.Epoch()
	r.res.Watermark = r.wm
	return &r.res, nil
}

// beginWriting is called before an attempt writes its first object: the
// first time, it starts the run's new generation (if the plan needs one)
// and claims the sinks. Until then the run has written nothing (cleanup
// aside), so a run that commits nothing leaves the state and the sinks as
// they were; a run that fails after this point leaves the generation for
// the next run of the same topology to adopt (StartGeneration), as a crash
// would.
func (r *runner) beginWriting(ctx context.Context) error {
	if r.claimed {
		return nil
	}
	if rec := r.newGen; rec != nil {
		g, err := r.c.StartGeneration(ctx, r.head, *rec)
		if err != nil {
			return err
		}
		r.gen, r.newGen = g, nil
		r.res.Generation = g.Generation
		r.log.Info("new generation", "generation", g.Generation, "reason", r.newGenReason, "parallelism", r.parallelism)
		if err := r.table.reidentify(ctx, g.Identity); err != nil {
			return err
		}
	}
	if note := parallelismNote(r.p, r.opts); note != "" {
		r.log.Warn(note)
	}
	if err := r.ident.claimSink(ctx, r.st.sink, r.p.Name, r.gen.Identity, r.log); err != nil {
		return err
	}
	r.claimed = true
	return nil
}

// writeIdentity is the identity the run writes under: its generation's, or the
// one the generation it is about to start will record.
func (r *runner) writeIdentity() *manifest.Identity {
	if r.newGen != nil {
		return r.newGen.Identity
	}
	return r.gen.Identity
}

// parallelismNote says, when --parallelism overrides state.parallelism,
// that the override holds for one run only ("" otherwise).
func parallelismNote(p *spec.Pipeline, opts *Options) string {
	n := max(p.State.Parallelism, 1)
	if opts.Parallelism <= 0 || opts.Parallelism == n {
		return ""
	}
	return fmt.Sprintf("--parallelism %d holds for this run only: the next run without --parallelism goes back to state.parallelism %d "+
		"(another generation, its state rewritten); set state.parallelism: %d in the spec to keep it", opts.Parallelism, n, opts.Parallelism)
}

// retain runs retention after a commit. A failure there loses nothing (the
// next collection deletes what this one left), so it is logged, not
// returned: the epoch is committed either way.
// It lists the state only while the run's current source listing is whole
// (see start); otherwise it deletes what the manifest chain names.
func (r *runner) retain(ctx context.Context, skipSink bool) {
	opts := r.gcOptions(skipSink)
	opts.ChainOnly = r.listing != nil && !r.listing.full
	r.retainedAt, r.chainedAt = 0, 0
	if _, err := r.c.Retain(ctx, r.head, opts); err != nil {
		if !errors.Is(err, context.Canceled) {
			r.log.Warn("retention failed; the next epoch tries again", "error", err)
		}
		return
	}
	if opts.ChainOnly {
		r.chainedAt = r.head.Epoch()
	} else {
		r.retainedAt = r.head.Epoch()
	}
}

// retainEnd is the run's last retention. After a run that listed its
// source in full: with the sink, and the state root only if the head's
// collection after its commit did not complete (one listing fewer per
// run). After one that did not: the chain's, if the last one failed.
func (r *runner) retainEnd(ctx context.Context) {
	opts := r.gcOptions(false)
	if r.listing != nil && !r.listing.swept {
		if r.chainedAt == r.head.Epoch() || r.retainedAt == r.head.Epoch() {
			return
		}
		opts.ChainOnly = true
	} else if err := r.outputs.Complete(ctx); err != nil {
		r.log.Warn("retention failed; the next epoch tries again", "error", err)
		return
	}
	opts.SinkOnly = r.retainedAt != 0 && r.retainedAt == r.head.Epoch()
	if _, err := r.c.Retain(ctx, r.head, opts); err != nil && !errors.Is(err, context.Canceled) {
		r.log.Warn("retention failed; the next epoch tries again", "error", err)
	}
}

// sweepAbandoned removes, after a run that committed a rollback or a
// savepoint restore, the side outputs (late and rejected rows) of the epochs
// it abandoned, as the sink cleanup removed their outputs; a failure is
// logged (the next run's start sweeps again).
func (r *runner) sweepAbandoned(ctx context.Context) {
	if rf := r.gen.RestoredFrom; rf == nil || rf.Kind != manifest.RestoreRollback && rf.Kind != manifest.RestoreSavepoint {
		return
	}
	if _, err := r.c.SweepSideOutputs(ctx, r.head, r.keep(), r.sideDirs()); err != nil && !errors.Is(err, context.Canceled) {
		r.log.Warn("side-output cleanup of abandoned epochs failed; the next run tries again", "error", err)
	}
}

// checkRejected enforces source.max_rejected_fraction: an epoch that
// rejected more than that fraction of its rows fails before it commits,
// naming the file with the most rejected rows.
func (r *runner) checkRejected(in inputSummary) error {
	limit := r.p.Source.MaxRejectedFraction
	total := in.rows + int64(len(in.rejects))
	if limit <= 0 || total == 0 || float64(len(in.rejects)) <= limit*float64(total) {
		return nil
	}
	byFile := map[string]int{}
	worst := ""
	for _, rj := range in.rejects {
		byFile[rj.File]++
		if byFile[rj.File] > byFile[worst] {
			worst = rj.File
		}
	}
	return fmt.Errorf("source.max_rejected_fraction %g exceeded: %d of %d rows rejected in this epoch, most in %s (%d rows: %s); nothing was committed",
		limit, len(in.rejects), total, worst, byFile[worst], firstReason(in.rejects, worst))
}

func firstReason(rs []rejectRecord, file string) string {
	for _, rj := range rs {
		if rj.File == file {
			return rj.Reason
		}
	}
	return ""
}

// noteChanged warns about processed input files whose size changed since
// they were read (input files must be immutable: they are not read again);
// the next epoch counts them (files_changed) and records the new size.
func (r *runner) noteChanged(files []store.ObjectInfo) {
	for _, f := range files {
		old, known := r.sizeOf[f.Key]
		if !known || old == f.Size || !r.seen.Has(f.Key) || r.noted[f.Key] {
			continue
		}
		if r.changed == nil {
			r.changed, r.noted = map[string]int64{}, map[string]bool{}
		}
		r.changed[f.Key], r.noted[f.Key] = f.Size, true
		r.log.Warn("a processed input file changed after it was read; it is not read again (input files must be immutable: write a new file; `floe reprocess --files` reads it again)",
			"file", f.Key, "size_then", old, "size_now", f.Size)
	}
}

// warnAfterDrain says so when input arrives for a pipeline whose input was
// ended with --drain: every window was emitted, so the new rows are late.
func (r *runner) warnAfterDrain(pend []store.ObjectInfo) {
	if r.wm == math.MaxInt64 && len(pend) > 0 {
		late := "they are dropped (set source.late_url to keep them)"
		if r.p.Source.LateURL != "" {
			late = "they go to source.late_url"
		}
		r.log.Warn("new input after --drain: every window was emitted, so the rows of these files count as late; "+late+
			" (floe rollback --to-epoch or a savepoint taken before the drain reopens the windows)", "files", len(pend), "first", pend[0].Key)
	}
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
	pr := Progress{Epoch: r.head.Epoch(), FilesDone: r.res.Files, FilesPending: known, Waiting: r.progressWaiting,
		RowsDone: r.res.Rows, Watermark: r.wm, Started: r.started, Counters: r.counters, Requests: r.st.requests()}
	if r.gen != nil {
		pr.Generation = r.gen.Generation
	}
	if m := r.head.Manifest; m != nil {
		pr.CommittedAt = m.CreatedAt
	}
	r.opts.Progress(pr)
}

// waiting reports a caught-up --trigger run to the progress callback.
func (r *runner) waiting(known int64) {
	if r.opts.Progress == nil {
		return
	}
	r.progressWaiting = true
	r.progress(known)
	r.progressWaiting = false
}

// inputSummary is what an epoch's decoded files add up to.
type inputSummary struct {
	rows, filtered int64
	rejects        []rejectRecord
	obs            []fileObs
	wholeFiles     int64 // files no row of which was accepted
}

func summarize(results []*fileResult) inputSummary {
	var in inputSummary
	for _, res := range results {
		in.rows += res.rows
		in.filtered += res.filtered
		for _, rj := range res.rejects {
			in.rejects = append(in.rejects, rejectRecord{Reject: rj, WholeFile: res.wholeFile})
		}
		if res.wholeFile {
			in.wholeFiles++
		}
		in.obs = append(in.obs, fileObs{key: res.key, maxTS: res.maxTS})
	}
	return in
}

// epoch runs one epoch over files (a prefix of pend, the pending list):
// execute (decode), decide (watermark, whether to commit), execute
// (operators, writes), edit, commit, apply. drain advances the watermark to
// +inf; idle commits only if the watermark moved. It returns how many of
// files the epoch took (fewer than offered when max_rows_per_epoch cut it).
func (r *runner) epoch(ctx context.Context, files, pend []store.ObjectInfo, drain, idle bool) (int, error) {
	now := r.opts.now()
	t0 := time.Now()
	req0 := r.st.requests()
	phase := func(name string) {
		r.log.Debug("epoch phase", "phase", name, "elapsed", time.Since(t0))
	}
	results, err := r.decodeForCommit(ctx, files, pend)
	if err != nil {
		return 0, err
	}
	phase("decode")
	files = files[:len(results)]
	in := summarize(results)
	if err := r.checkRejected(in); err != nil {
		return 0, err
	}
	d := r.dc.decide(r.inputs, r.wm, in.obs, now, pend, len(files), drain, idle)
	if !d.commit {
		return 0, nil
	}
	if err := r.lookupsFor(ctx, results); err != nil {
		return 0, err
	}
	if !r.plan.graph.linear {
		r.sourceWM = r.dc.inputWatermarks(d.inputs, r.wm, now, pend, len(files), drain, r.plan.graph.sourceNames())
	}
	out, err := r.process(ctx, results, d.watermark)
	if err != nil {
		return 0, err
	}
	phase("process")
	// Another state may have taken the sinks over since the last epoch
	// (a --trigger worker of a moved pipeline's old state): stop before
	// writing, and before this epoch's side-output cleanup.
	if err := r.ident.checkOwner(ctx, r.st.sink); err != nil {
		return 0, err
	}
	att, err := r.attemptFor(ctx, results)
	if err != nil {
		return 0, err
	}
	w, err := r.write(ctx, att, out, in.rejects, files)
	if err != nil {
		return 0, err
	}
	if err := r.writeGraph(ctx, att, out, w); err != nil {
		return 0, err
	}
	phase("write")
	edit, err := r.prepareEdit(ctx, att, files, in, d, out, w)
	if err != nil {
		return 0, err
	}
	phase("offsets")
	m := r.manifest(edit)
	var frontier string
	if len(files) <= len(pend) {
		frontier = r.listing.next(pend[len(files):])
	} else {
		frontier = r.listing.next(nil)
	}
	r.listing.record(m, frontier)
	req := r.st.requests().Sub(req0)
	m.Stats = &manifest.EpochStats{DurationMs: time.Since(t0).Milliseconds(), FilesIn: int64(len(files)), RowsIn: in.rows + int64(len(in.rejects)),
		Gets: req.Requests.Get, Puts: req.Requests.Put, Lists: req.Requests.List, Deletes: req.Requests.Delete, Retries: req.Retries}
	for _, f := range files {
		m.Stats.BytesIn += f.Size
	}
	for _, f := range append(m.StateRefs(), m.SinkRefs()...) {
		if strings.Contains(f.Path, att.ID[:manifest.AttemptPrefixLen]) {
			m.Stats.BytesWritten += f.Size
		}
	}
	head, err := att.Commit(ctx, m)
	phase("commit")
	if errors.Is(err, epoch.ErrSuperseded) {
		// Committed, but another run (an overlapping cron job?) is ahead of
		// this one: everything held in memory is stale. Stop; the next run
		// continues from the newest head.
		return 0, fmt.Errorf("%w; this run stops, the next one continues from there", err)
	}
	if err != nil {
		return 0, err
	}
	r.apply(edit, head)
	r.mustCommit, r.recordListing = false, false
	r.listing.frontier = frontier
	r.kafkaCommitted(m)
	if err := r.publish(ctx); err != nil {
		return 0, fmt.Errorf("epoch %d is committed but not yet in the table (the next run adds it): %w", head.Epoch(), err)
	}
	if err := r.sides.Settle(ctx, m); err != nil {
		r.log.Warn("side-output cleanup failed; the next run tries again", "error", err)
	}
	r.retain(ctx, true)
	// The line says what the manifest records (floe history and status show
	// the same figures: one definition), and then what the commit itself
	// and the cleanup after it cost, which no manifest can record.
	st, total := m.Stats, r.st.requests().Sub(req0).Requests
	r.log.Info("epoch committed", "epoch", head.Epoch(), "generation", r.gen.Generation, "files", st.FilesIn,
		"rows_in", st.RowsIn, "rows_out", w.rowsOut, "late", out.late, "rejected", len(in.rejects), "watermark", fmtWM(d.watermark),
		"duration", (time.Duration(st.DurationMs) * time.Millisecond).String(), "bytes_in", st.BytesIn, "bytes_written", st.BytesWritten,
		"gets", st.Gets, "puts", st.Puts, "lists", st.Lists, "deletes", st.Deletes, "retries", st.Retries,
		"commit_gets", total.Get-st.Gets, "commit_puts", total.Put-st.Puts, "commit_lists", total.List-st.Lists, "commit_deletes", total.Delete-st.Deletes)
	if msg := rejecting(in.rows+int64(len(in.rejects)), int64(len(in.rejects)), rejectedWhere(r.p)); msg != "" {
		r.log.Warn("epoch "+strconv.FormatInt(head.Epoch(), 10)+" is "+msg, "epoch", head.Epoch())
	}
	return len(files), nil
}

// fmtWM renders a watermark in microseconds for people.
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
