package runner

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

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Runner holds one run's state between epochs. Its fields change in three
// places only: start (from the run plan), beginWriting (the generation the
// plan starts, once, before the first write) and apply (from a committed
// epoch's edit).
type Runner struct {
	P    *spec.Pipeline
	Opts *Options
	Log  *slog.Logger
	St   *Stores
	C    *epoch.Committer
	Mem  memory.Allocator
	Dc   decide.Config

	Plan        *dataflow.Plan
	head        *epoch.Head
	gen         *manifest.Generation
	Parallelism int
	K           int
	Graph       *graphState      // the stateful stages' subtasks and state (graphexec.go)
	sourceWM    map[string]int64 // the graph form: this epoch's watermark of each source
	StageWM     map[string]int64 // replay: each stage's recorded watermark
	decodedAll  atomic.Int64     // state rows decoded by loadAll (from parallel writers)
	ranges      [][2]int
	Seen        *epoch.SegLog
	listing     *sources.Listing // how the source is listed
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
	// Processing is the number of the epoch Process runs (0: unknown), for
	// operators that number rows by arrival (operators.ArrivalOrdered).
	Processing int64
	// mustCommit: the run restores something other than the head (a
	// savepoint, a rollback, a reset), which takes effect only once an epoch
	// of the new generation is committed, with or without new input.
	mustCommit bool
	// skipRead: the epoch marks its files read without reading them
	// (start_from: latest on a new pipeline).
	SkipRead bool
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
	// Captured maps source keys to the copies an epoch captured
	// (source.capture), read when the source's file is gone (replay).
	Captured map[string]manifest.FileRef
	// newGen is the generation the plan starts, not created yet (nil: none
	// pending); beginWriting creates it before the first attempt writes.
	// Until then gen is nil (no head) or the head's.
	newGen       *manifest.Generation
	newGenReason string
	// ident is the run plan's identity verdict; claimed: beginWriting ran
	// (generation started, sinks claimed).
	ident   *owner.IdentityPlan
	claimed bool
	// cl is this worker's side of a pipeline run by several (workers.go);
	// nil in one process.
	cl *clusterRun
}

func newRunner(p *spec.Pipeline, st *Stores, opts *Options, log *slog.Logger) (*Runner, error) {
	r := &Runner{P: p, Opts: opts, Log: log, St: st, Mem: memory.DefaultAllocator, started: opts.now(), Dc: decide.NewConfig(p)}
	r.C = epoch.NewCommitter(st.State, st.Sink, p.Name, log)
	r.C.Now = opts.Now
	var err error
	if r.Parallelism, r.K, err = parallelismOf(p, opts); err != nil {
		return nil, err
	}
	r.res.SinkURL, r.res.StateURL = store.Redact(p.RootSink().URL), store.Redact(st.StateURL) // printed by the CLI
	for _, sk := range dataflow.ExtraSinks(p) {
		r.res.SinkURL += ", " + store.Redact(sk.Sink.URL)
	}
	return r, nil
}

// keep is how many epochs retention keeps: the spec's retain_epochs, and
// every epoch an Iceberg table has not yet published.
func (r *Runner) keep() int {
	n := KeepOf(r.P)
	if r.table != nil && r.head != nil {
		n = max(n, int(r.head.Epoch()-r.table.published)+1)
	}
	return n
}

// start recovers the head, plans the run (refusing it before anything is
// written), claims the pipeline's identity, starts or continues the
// generation, restores state and cleans orphans of dead attempts. It
// returns the source listing the plan was made from.
func (r *Runner) start(ctx context.Context) ([]store.ObjectInfo, error) {
	t0 := time.Now()
	phase := func(name string) {
		r.Log.Debug("start phase", "phase", name, "elapsed", time.Since(t0))
	}
	head, err := r.C.Recover(ctx)
	if err != nil {
		return nil, err
	}
	phase("recover")
	rp, err := PlanRun(ctx, r.P, r.St, r.Opts, head)
	if err != nil {
		return nil, err
	}
	defer rp.From.Close()
	if rp.Refusal != nil {
		return nil, rp.Refusal
	}
	for _, w := range rp.Identity.Warnings {
		r.Log.Warn(w)
	}
	r.head, r.Plan, r.ident, r.listing = head, rp.Plan, rp.Identity, rp.listing
	if rp.NewGeneration {
		// Started by beginWriting, when the first epoch is about to write:
		// a run that commits nothing writes no generation.
		rec := rp.generationRecord()
		r.newGen, r.newGenReason = &rec, rp.Reason
	} else {
		r.gen = head.Generation
		r.res.Generation = r.gen.Generation
	}
	if f := rp.From; f.Kind == manifest.RestoreReset && head.Manifest != nil {
		r.res.StateDropped = droppedState(head.Manifest)
		for _, d := range r.res.StateDropped {
			r.Log.Warn("reset-state drops an operator's state", "operator", d.Operator, "base_rows", d.BaseRows, "delta_files", d.DeltaFiles, "epoch", head.Epoch())
		}
	}
	if f := rp.From; f.Kind != "" {
		r.mustCommit = true
		if f.Manifest != nil {
			r.epochFloor = f.Manifest.Epoch + 1
		}
	}
	phase("plan")
	if err := r.Restore(ctx, rp); err != nil {
		return nil, err
	}
	phase("restore")
	if err := r.openTable(ctx); err != nil {
		return nil, err
	}
	// The sinks are still this state's (a takeover may have come after
	// planIdentity read the markers): only then clean them.
	if err := r.ident.CheckOwner(ctx, r.St.Sink); err != nil {
		return nil, err
	}
	if r.cl != nil {
		// Several workers: the others may be writing the next epoch, whose
		// files a listing cannot tell from orphans; worker 0 runs the
		// chain's retention after each commit (workers.go).
		phase("cleanup")
		return rp.Files, nil
	}
	if r.sides, err = r.C.SweepSideOutputs(ctx, head, r.keep(), r.sideDirs()); err != nil {
		return nil, err
	}
	if !r.listing.Full {
		// Orphans in the state and the sinks wait for a run that lists the
		// source in full (sweeping); side outputs were swept above.
		phase("cleanup")
		return rp.Files, nil
	}
	// Sink cleanup judges outputs by the restored output log; while a
	// restore is not committed the head's log is the truth, so it waits.
	_, err = r.C.Retain(ctx, head, r.gcOptions(r.mustCommit || r.ident.TakeoverPending()))
	phase("cleanup")
	return rp.Files, err
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

func (r *Runner) sideDirs() []epoch.SideDir {
	var out []epoch.SideDir
	if r.St.Rejected != nil {
		out = append(out, epoch.SideDir{Name: "rejected_url", Store: r.St.Rejected, Flat: true})
	} else {
		out = append(out, epoch.SideDir{Name: "sink " + sinks.RejectedDir, Store: r.St.Sink, Prefix: sinks.RejectedDir + "/", Flat: true})
	}
	if r.St.Late != nil {
		out = append(out, epoch.SideDir{Name: "late_url", Store: r.St.Late, Flat: true})
	}
	if r.Graph != nil {
		for _, nd := range r.Plan.Graph.Nodes {
			if s := r.Graph.late[nd.Name]; s != nil && s != r.St.Late {
				out = append(out, epoch.SideDir{Name: "stages." + nd.Name + ".late_url", Store: s})
			}
		}
	}
	return out
}

func (r *Runner) gcOptions(skipSink bool) epoch.GCOptions {
	return epoch.GCOptions{Keep: r.keep(), SkipSink: skipSink, Committed: r.outputs.Has, SidePrefixes: []string{sinks.RejectedDir + "/"}}
}

func (r *Runner) run(ctx context.Context) (*Result, error) {
	if r.Opts.Workers > 1 {
		return r.runWorkers(ctx)
	}
	defer func() {
		r.res.Requests = r.St.Requests()
		r.res.StateRowsDecoded += r.decodedAll.Swap(0)
		r.res.StateRowsSkipped += r.rowsNotDecoded()
	}()
	files, err := r.start(ctx)
	if err != nil {
		return &r.res, err
	}
	r.res.LastEpoch = r.head.Epoch()
	if u := r.Opts.UntilEpoch; u > 0 && r.head.Epoch() >= u {
		r.res.UntilReached = true
	}
	pend := r.Dc.Interleave(r.pendingOf(files))
	known := int64(len(pend))
	r.warnAfterDrain(pend)
	r.noteChanged(files)
	if skip, rest := SplitStartLatest(r.P, pend); len(skip) > 0 && r.head.Manifest == nil && !r.mustCommit {
		// The skip epoch takes exactly the files start_from: latest marks
		// read: put first, so they are the prefix the epoch consumes.
		pend = append(skip, rest...)
		r.SkipRead = true
		n, err := r.epoch(ctx, skip, pend, false, false)
		r.SkipRead = false
		if err != nil {
			return &r.res, err
		}
		r.Log.Info("start_from: latest: files present at the start marked read without reading them", "files", n)
		pend = pend[n:]
	}
	r.pf = NewPrefetcher(ctx, r)
	defer r.pf.Stop()
	for {
		if r.Opts.UntilEpoch > 0 && r.head.Epoch() >= r.Opts.UntilEpoch {
			break
		}
		if ctx.Err() != nil {
			return &r.res, ctx.Err()
		}
		if r.stopping() {
			r.Log.Info("stop requested: stopping after the last committed epoch", "epoch", r.head.Epoch())
			break
		}
		batch := r.Dc.SelectFiles(pend)
		drainNow := len(batch) == 0 && r.Opts.Drain && r.wm != math.MaxInt64
		if len(batch) == 0 && !drainNow && (r.mustCommit || r.recordListing) {
			// Commit the restored state as it is (or the full listing).
			if _, err := r.epoch(ctx, nil, pend, false, false); err != nil {
				return &r.res, err
			}
			continue
		}
		if len(batch) == 0 && !drainNow {
			if r.Opts.Trigger == 0 {
				break
			}
			r.waiting(known)
			select {
			case <-ctx.Done():
				continue
			case <-r.Opts.Stop:
				continue
			case <-time.After(r.Opts.Trigger):
			}
			now := r.Opts.now()
			if err := r.replanListing(ctx, now); err != nil {
				return &r.res, err
			}
			if files, err = r.listing.List(ctx, r.P, r.St.Source, now); err != nil {
				return &r.res, err
			}
			pend = r.Dc.Interleave(r.pendingOf(files))
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
		if r.Opts.UntilEpoch == 0 || r.head.Epoch()+1 < r.Opts.UntilEpoch {
			r.pf.Start(r.Dc.SelectFiles(pend[len(batch):])) // the next epoch's files, in the background
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
		if err := r.ident.CheckOwner(ctx, r.St.Sink); err != nil {
			return &r.res, err
		}
		r.retainEnd(ctx)
		r.sweepAbandoned(ctx)
		r.maintainTable(ctx)
	}
	if r.newGen != nil {
		r.Log.Info("nothing to commit: no generation started (it takes effect with the first epoch a run with these options commits)",
			"reason", r.newGenReason, "parallelism", r.Parallelism)
		if note := ParallelismNote(r.P, r.Opts); note != "" {
			r.Log.Info(note)
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
func (r *Runner) beginWriting(ctx context.Context) error {
	if r.claimed {
		return nil
	}
	if rec := r.newGen; rec != nil {
		g, err := r.C.StartGeneration(ctx, r.head, *rec)
		if err != nil {
			return err
		}
		r.gen, r.newGen = g, nil
		r.res.Generation = g.Generation
		r.Log.Info("new generation", "generation", g.Generation, "reason", r.newGenReason, "parallelism", r.Parallelism)
		if err := r.table.reidentify(ctx, g.Identity); err != nil {
			return err
		}
	}
	if note := ParallelismNote(r.P, r.Opts); note != "" {
		r.Log.Warn(note)
	}
	if err := r.ident.ClaimSink(ctx, r.St.Sink, r.P.Name, r.gen.Identity, r.Log); err != nil {
		return err
	}
	r.claimed = true
	return nil
}

// writeIdentity is the identity the run writes under: its generation's, or the
// one the generation it is about to start will record.
func (r *Runner) writeIdentity() *manifest.Identity {
	if r.newGen != nil {
		return r.newGen.Identity
	}
	return r.gen.Identity
}

// ParallelismNote says, when --parallelism overrides state.parallelism,
// that the override holds for one run only ("" otherwise).
func ParallelismNote(p *spec.Pipeline, opts *Options) string {
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
func (r *Runner) retain(ctx context.Context, skipSink bool) {
	opts := r.gcOptions(skipSink)
	opts.ChainOnly = r.listing != nil && !r.listing.Full
	r.retainedAt, r.chainedAt = 0, 0
	if _, err := r.C.Retain(ctx, r.head, opts); err != nil {
		if !errors.Is(err, context.Canceled) {
			r.Log.Warn("retention failed; the next epoch tries again", "error", err)
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
func (r *Runner) retainEnd(ctx context.Context) {
	opts := r.gcOptions(false)
	if r.listing != nil && !r.listing.Swept() {
		if r.chainedAt == r.head.Epoch() || r.retainedAt == r.head.Epoch() {
			return
		}
		opts.ChainOnly = true
	} else if err := r.outputs.Complete(ctx); err != nil {
		r.Log.Warn("retention failed; the next epoch tries again", "error", err)
		return
	}
	opts.SinkOnly = r.retainedAt != 0 && r.retainedAt == r.head.Epoch()
	if _, err := r.C.Retain(ctx, r.head, opts); err != nil && !errors.Is(err, context.Canceled) {
		r.Log.Warn("retention failed; the next epoch tries again", "error", err)
	}
}

// sweepAbandoned removes, after a run that committed a rollback or a
// savepoint restore, the side outputs (late and rejected rows) of the epochs
// it abandoned, as the sink cleanup removed their outputs; a failure is
// logged (the next run's start sweeps again).
func (r *Runner) sweepAbandoned(ctx context.Context) {
	if rf := r.gen.RestoredFrom; rf == nil || rf.Kind != manifest.RestoreRollback && rf.Kind != manifest.RestoreSavepoint {
		return
	}
	if _, err := r.C.SweepSideOutputs(ctx, r.head, r.keep(), r.sideDirs()); err != nil && !errors.Is(err, context.Canceled) {
		r.Log.Warn("side-output cleanup of abandoned epochs failed; the next run tries again", "error", err)
	}
}

// checkRejected enforces max_rejected_fraction, each source's over its own
// files: an epoch in which a source rejected more than that fraction of
// its rows fails before it commits, naming the file with the most rejected
// rows.
func (r *Runner) checkRejected(in InputSummary) error {
	for _, b := range r.P.SourceBlocks() {
		limit := b.Source.MaxRejectedFraction
		if limit <= 0 {
			continue
		}
		mine := func(key string) bool {
			o, _, ok := r.P.SourceOfKey(key)
			return ok && o.Name == b.Name
		}
		var rows int64
		for k, n := range in.rowsOf {
			if mine(k) {
				rows += n
			}
		}
		byFile := map[string]int{}
		rejected, worst := 0, ""
		for _, rj := range in.Rejects {
			if !mine(rj.File) {
				continue
			}
			rejected++
			byFile[rj.File]++
			if byFile[rj.File] > byFile[worst] {
				worst = rj.File
			}
		}
		total := rows + int64(rejected)
		if total == 0 || float64(rejected) <= limit*float64(total) {
			continue
		}
		return fmt.Errorf("%s.max_rejected_fraction %g exceeded: %d of %d rows rejected in this epoch, most in %s (%d rows: %s); nothing was committed",
			b.Field, limit, rejected, total, worst, byFile[worst], firstReason(in.Rejects, worst))
	}
	return nil
}

func firstReason(rs []sinks.RejectRecord, file string) string {
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
func (r *Runner) noteChanged(files []store.ObjectInfo) {
	for _, f := range files {
		old, known := r.sizeOf[f.Key]
		if !known || old == f.Size || !r.Seen.Has(f.Key) || r.noted[f.Key] {
			continue
		}
		if r.changed == nil {
			r.changed, r.noted = map[string]int64{}, map[string]bool{}
		}
		r.changed[f.Key], r.noted[f.Key] = f.Size, true
		r.Log.Warn("a processed input file changed after it was read; it is not read again (input files must be immutable: write a new file; `floe reprocess --files` reads it again)",
			"file", f.Key, "size_then", old, "size_now", f.Size)
	}
}

// warnAfterDrain says so when input arrives for a pipeline whose input was
// ended with --drain: every window was emitted, so the new rows are late.
func (r *Runner) warnAfterDrain(pend []store.ObjectInfo) {
	if r.wm == math.MaxInt64 && len(pend) > 0 {
		late := "they are dropped (set source.late_url to keep them)"
		if r.P.Source.LateURL != "" {
			late = "they go to source.late_url"
		}
		r.Log.Warn("new input after --drain: every window was emitted, so the rows of these files count as late; "+late+
			" (floe rollback --to-epoch or a savepoint taken before the drain reopens the windows)", "files", len(pend), "first", pend[0].Key)
	}
}

// stopping reports whether Options.Stop was closed.
func (r *Runner) stopping() bool {
	select {
	case <-r.Opts.Stop:
		return true
	default:
		return false
	}
}

func (r *Runner) progress(known int64) {
	if r.Opts.Progress == nil {
		return
	}
	pr := Progress{Epoch: r.head.Epoch(), FilesDone: r.res.Files, FilesPending: known, Waiting: r.progressWaiting,
		RowsDone: r.res.Rows, Watermark: r.wm, Started: r.started, Counters: r.counters, Requests: r.St.Requests()}
	if r.gen != nil {
		pr.Generation = r.gen.Generation
	}
	if m := r.head.Manifest; m != nil {
		pr.CommittedAt = m.CreatedAt
	}
	r.Opts.Progress(pr)
}

// waiting reports a caught-up --trigger run to the progress callback.
func (r *Runner) waiting(known int64) {
	if r.Opts.Progress == nil {
		return
	}
	r.progressWaiting = true
	r.progress(known)
	r.progressWaiting = false
}

// InputSummary is what an epoch's decoded files add up to.
type InputSummary struct {
	Rows, Filtered int64
	Rejects        []sinks.RejectRecord
	Obs            []decide.FileObs
	wholeFiles     int64            // files no row of which was accepted
	rowsOf         map[string]int64 // accepted rows by file key
}

func Summarize(results []*fileResult) InputSummary {
	in := InputSummary{rowsOf: make(map[string]int64, len(results))}
	for _, res := range results {
		in.Rows += res.rows
		in.rowsOf[res.key] += res.rows
		in.Filtered += res.filtered
		for _, rj := range res.rejects {
			in.Rejects = append(in.Rejects, sinks.RejectRecord{Reject: rj, WholeFile: res.wholeFile})
		}
		if res.wholeFile {
			in.wholeFiles++
		}
		in.Obs = append(in.Obs, decide.FileObs{Key: res.key, MaxTS: res.maxTS})
	}
	return in
}

// epoch runs one epoch over files (a prefix of pend, the pending list):
// execute (decode), decide (watermark, whether to commit), execute
// (operators, writes), edit, commit, apply. drain advances the watermark to
// +inf; idle commits only if the watermark moved. It returns how many of
// files the epoch took (fewer than offered when max_rows_per_epoch cut it).
func (r *Runner) epoch(ctx context.Context, files, pend []store.ObjectInfo, drain, idle bool) (int, error) {
	now := r.Opts.now()
	t0 := time.Now()
	req0 := r.St.Requests()
	phase := func(name string) {
		r.Log.Debug("epoch phase", "phase", name, "elapsed", time.Since(t0))
	}
	results, err := r.decodeForCommit(ctx, files, pend)
	if err != nil {
		return 0, err
	}
	phase("decode")
	files = files[:len(results)]
	in := Summarize(results)
	if err := r.checkRejected(in); err != nil {
		return 0, err
	}
	d := r.Dc.Decide(r.inputs, r.wm, in.Obs, now, pend, len(files), drain, idle)
	if !d.Commit {
		return 0, nil
	}
	if err := r.lookupsFor(ctx, results); err != nil {
		return 0, err
	}
	if !r.Plan.Graph.Linear {
		r.sourceWM = r.Dc.InputWatermarks(d.Inputs, r.wm, now, pend, len(files), drain, r.Plan.Graph.SourceNames())
	}
	r.Processing = max(r.epochFloor, r.head.Epoch()+1) // the epoch the attempt will take (epoch.Committer.BeginAt)
	out, err := r.Process(ctx, results, d.Watermark)
	if err != nil {
		return 0, err
	}
	phase("process")
	// Another state may have taken the sinks over since the last epoch
	// (a --trigger worker of a moved pipeline's old state): stop before
	// writing, and before this epoch's side-output cleanup.
	if err := r.ident.CheckOwner(ctx, r.St.Sink); err != nil {
		return 0, err
	}
	att, err := r.attemptFor(ctx, results)
	if err != nil {
		return 0, err
	}
	w, err := r.write(ctx, att, out, in.Rejects, files)
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
		frontier = r.listing.Next(pend[len(files):])
	} else {
		frontier = r.listing.Next(nil)
	}
	r.listing.Record(m, frontier)
	req := r.St.Requests().Sub(req0)
	m.Stats = &manifest.EpochStats{DurationMs: time.Since(t0).Milliseconds(), FilesIn: int64(len(files)), RowsIn: in.Rows + int64(len(in.Rejects)),
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
	r.listing.SetFrontier(frontier)
	r.kafkaCommitted(m)
	if err := r.publish(ctx); err != nil {
		return 0, fmt.Errorf("epoch %d is committed but not yet in the table (the next run adds it): %w", head.Epoch(), err)
	}
	if err := r.sides.Settle(ctx, m); err != nil {
		r.Log.Warn("side-output cleanup failed; the next run tries again", "error", err)
	}
	r.retain(ctx, true)
	// The line says what the manifest records (floe history and status show
	// the same figures: one definition), and then what the commit itself
	// and the cleanup after it cost, which no manifest can record.
	st, total := m.Stats, r.St.Requests().Sub(req0).Requests
	r.Log.Info("epoch committed", "epoch", head.Epoch(), "generation", r.gen.Generation, "files", st.FilesIn,
		"rows_in", st.RowsIn, "rows_out", w.rowsOut, "late", out.Late, "rejected", len(in.Rejects), "watermark", FmtWM(d.Watermark),
		"duration", (time.Duration(st.DurationMs) * time.Millisecond).String(), "bytes_in", st.BytesIn, "bytes_written", st.BytesWritten,
		"gets", st.Gets, "puts", st.Puts, "lists", st.Lists, "deletes", st.Deletes, "retries", st.Retries,
		"commit_gets", total.Get-st.Gets, "commit_puts", total.Put-st.Puts, "commit_lists", total.List-st.Lists, "commit_deletes", total.Delete-st.Deletes)
	if msg := sinks.Rejecting(in.Rows+int64(len(in.Rejects)), int64(len(in.Rejects)), sinks.RejectedWhere(r.P)); msg != "" {
		r.Log.Warn("epoch "+strconv.FormatInt(head.Epoch(), 10)+" is "+msg, "epoch", head.Epoch())
	}
	return len(files), nil
}

// FmtWM renders a watermark in microseconds for people.
func FmtWM(wm int64) string {
	switch wm {
	case math.MinInt64:
		return "none"
	case math.MaxInt64:
		return "+inf (drained)"
	}
	return time.UnixMicro(wm).UTC().Format(time.RFC3339)
}

// FormatWatermark renders a watermark in microseconds for people.
func FormatWatermark(wm int64) string { return FmtWM(wm) }

// StartsLatest reports whether a source of p has start_from: latest (in
// the graph form, any of its named sources).
func StartsLatest(p *spec.Pipeline) bool {
	if !IsGraph(p) {
		_, latest, _ := p.Source.StartTime()
		return latest
	}
	for _, ns := range p.Sources {
		if _, latest, _ := ns.Source.StartTime(); latest {
			return true
		}
	}
	return false
}

// SplitStartLatest splits pending files into those start_from: latest marks
// read at a pipeline's first run (every file in the linear form; in the
// graph form the files of the named sources that set it) and the rest,
// each in its order.
func SplitStartLatest(p *spec.Pipeline, pend []store.ObjectInfo) (skip, rest []store.ObjectInfo) {
	if !IsGraph(p) {
		if StartsLatest(p) {
			return pend, nil
		}
		return nil, pend
	}
	latest := map[string]bool{}
	for _, ns := range p.Sources {
		if _, l, _ := ns.Source.StartTime(); l {
			latest[ns.Name] = true
		}
	}
	if len(latest) == 0 {
		return nil, pend
	}
	for _, f := range pend {
		name, _, _ := strings.Cut(f.Key, "/")
		if latest[name] {
			skip = append(skip, f)
		} else {
			rest = append(rest, f)
		}
	}
	return skip, rest
}
