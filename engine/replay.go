package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Replaying an epoch (floe replay, floe replay-diff).
//
// Determinism contract. The rows a committed epoch N produces — its outputs
// (after the stages behind the window), its late rows and its rejected rows
// — are a function of three things only:
//
//  1. the state of epoch N-1: each subtask's restored windows (bases, then
//     deltas, filtered by key-group range, with N-1's emitted-through
//     watermark, migrated by evolve when the window was edited), exactly as
//     runner.restore reads them for a run. For the first epoch of a
//     generation N-1 is what the generation restored: the previous head
//     (rescale, plan change, reprocess), the rollback target, the savepoint,
//     or the head's offsets with empty windows (reset);
//  2. the input files epoch N consumed, in the epoch's order: the entries
//     epoch N added to the processed-file log (seen), which Prepare appends
//     in the order the epoch read them;
//  3. the watermark manifest N records (watermark_us): the one process()
//     advanced the windows to.
//
// Not of the clock (idle timeouts only decide the watermark, which is
// recorded), nor of the parallelism (a key's rows reach one subtask whatever
// P is, in batch order, and every subtask advances its arrival sequence on
// every batch so first/last ties break the same way), nor of what
// max_files_per_epoch / max_rows_per_epoch / prefetching did (they chose the
// files, which are recorded). Expressions cannot read the clock (now() is
// refused). Replay re-runs exactly that function on the plan a run compiles
// (a linear pipeline lowered onto the graph, dataflow.CompileLinear): restore N-1
// (runner.restore, as a run and state inspection do), decode the consumed
// files with runner.decodeEpoch / decodeFile against the source store, run
// runner.process at the recorded watermark (a graph's keyed stages each at
// the watermark it recorded), and keep the rows in memory.
// Nothing is written to the state, the sink or the side outputs. Tests:
// replay_test.go replays every retained epoch of sliding and session
// pipelines at the recorded parallelism, at 1 and at 5, and requires what
// epoch N committed, row for row.
//
// The contract assumes input files are immutable (README: "Input files are
// immutable"). Replay checks what it can: a consumed file that is gone is an
// error naming it; a size different from the one the epoch read
// (stats.bytes_in) or a recomputed per-input max event time different from
// the recorded one is reported as a warning.
//
// The canonical text form of a result is one line per row, sorted
// byte-wise: "output <json>" (formats.EncodeJSONL over the pipeline's output
// schema), "late <json>" (over the schema the window reads) and "rejected
// <json>" (the rejected-rows file encoding: file, line, reason, raw,
// whole_file). Two results of the same epoch compare byte for byte.

// ReplayOptions select the epoch Replay re-runs.
type ReplayOptions struct {
	// Epoch is a retained committed epoch whose parent is retained too
	// (0: the head).
	Epoch int64
	// Functions are the user-defined functions the run had
	// (Options.Functions).
	Functions *expr.Functions
	// Parallelism restores and processes with this many subtasks (0: the
	// parallelism of the epoch's generation). The rows do not depend on it.
	Parallelism int
	// Log receives warnings (nil: discarded).
	Log *slog.Logger
}

// ReplayResult is what replaying one epoch produced, held in memory.
type ReplayResult struct {
	Pipeline   string
	Epoch      int64
	Generation int64
	// Parent is the epoch whose state the replay started from (N-1: the
	// chain parent, or what N's generation restored; nil: empty state);
	// Restart is how N's generation began when N is its first epoch and it
	// did not simply continue the head (a manifest.Restore* kind).
	Parent      *manifest.Ref
	Restart     string
	Parallelism int // the replay's
	// Files are the input files the epoch consumed, in the epoch's order.
	Files []string
	// Watermark is the one manifest N records, which the windows were
	// advanced to; Inputs the per-input progress it records.
	Watermark int64
	Inputs    map[string]manifest.InputState
	// Counters are what the replay counted for this one epoch (not
	// cumulative); Recorded is the difference of manifests N and N-1.
	Counters manifest.Counters
	Recorded manifest.Counters
	// Outputs, Late and Rejected are the rows as JSON, in the order the
	// subtasks produced them (subtask by subtask).
	Outputs, Late, Rejected []string
	// Sinks are the rows of a graph pipeline's further sinks (Outputs are
	// its first sink's), in spec order.
	Sinks []SinkRows
	// Warnings say what looked different from the epoch as committed
	// (input sizes, event times).
	Warnings []string
}

// SinkRows are the rows one further sink received, as JSON.
type SinkRows struct {
	Name string
	Rows []string
}

// Lines returns the canonical text form: "output <json>" ("output@<sink>
// <json>" for a further sink's rows), "late <json>" and "rejected <json>"
// lines, sorted byte-wise.
func (r *ReplayResult) Lines() []string {
	out := make([]string, 0, len(r.Outputs)+len(r.Late)+len(r.Rejected))
	for _, s := range r.Outputs {
		out = append(out, "output "+s)
	}
	for _, sk := range r.Sinks {
		for _, s := range sk.Rows {
			out = append(out, outputKind(sk.Name)+" "+s)
		}
	}
	for _, s := range r.Late {
		out = append(out, "late "+s)
	}
	for _, s := range r.Rejected {
		out = append(out, "rejected "+s)
	}
	slices.Sort(out)
	return out
}

// WriteText writes the canonical text form, one line each.
func (r *ReplayResult) WriteText(w io.Writer) error { return writeLines(w, r.Lines()) }

func writeLines(w io.Writer, lines []string) error {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Summary is one line saying what was replayed.
func (r *ReplayResult) Summary() string {
	from := "empty state"
	switch {
	case r.Parent != nil && r.Restart == manifest.RestoreReset:
		from = fmt.Sprintf("epoch %d's offsets with empty state (reset)", r.Parent.Epoch)
	case r.Parent != nil && r.Restart != "":
		from = fmt.Sprintf("the state of epoch %d (%s)", r.Parent.Epoch, r.Restart)
	case r.Parent != nil:
		from = fmt.Sprintf("the state of epoch %d", r.Parent.Epoch)
	}
	out := fmt.Sprintf("%d output", len(r.Outputs))
	for _, sk := range r.Sinks {
		out += fmt.Sprintf(", %d %s", len(sk.Rows), outputKind(sk.Name))
	}
	return fmt.Sprintf("pipeline %s: replayed epoch %d (generation %d) at parallelism %d from %s: %d input files, watermark %s: %s, %d late, %d rejected rows",
		r.Pipeline, r.Epoch, r.Generation, r.Parallelism, from, len(r.Files), runner.FmtWM(r.Watermark), out, len(r.Late), len(r.Rejected))
}

// outputKind labels a sink's rows in the canonical form: "output" for the
// first sink, "output@<name>" for a further one.
func outputKind(sink string) string {
	if sink == "" {
		return "output"
	}
	return "output" + manifest.ExtraSinkPrefix + sink
}

// Replay re-runs committed epoch opts.Epoch of p from the state of its
// parent, on the input files it consumed and at the watermark it recorded,
// and returns the rows it produces. It writes nothing anywhere. See the
// determinism contract above.
func Replay(ctx context.Context, p *spec.Pipeline, opts ReplayOptions) (*ReplayResult, error) {
	x, err := newReplayer(ctx, p, opts)
	if err != nil {
		return nil, err
	}
	defer x.close()
	return x.replay(ctx)
}

// replayer holds what one replay reads.
type replayer struct {
	x      *inspector // the retained-chain walk and error messages of state inspection
	opts   ReplayOptions
	log    *slog.Logger
	listed map[string]store.ObjectInfo // the source listing, unfiltered
	m      *manifest.Manifest          // epoch N
	g      *manifest.Generation        // its generation
	parent *manifest.Manifest          // epoch N-1 (nil: empty start)
	pgen   *manifest.Generation
	from   *runner.RestoreSource // where N-1's files resolve: the state root, or a savepoint N's generation began from
	first  bool                  // N is the first epoch of its generation
	// schemas are the source schemas the plan was compiled over, before
	// projection pushdown (declared, or inferred from the source), by
	// source name; skipRead is set when the epoch marked its files read
	// without reading them (start_from: latest). Both go into an
	// --emit-test bundle.
	schemas  map[string]*arrow.Schema
	skipRead bool
}

func newReplayer(ctx context.Context, p *spec.Pipeline, opts ReplayOptions) (*replayer, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := runner.RefuseKafka(p, "replay"); err != nil {
		return nil, err
	}
	err := sinks.CheckSinks(p)
	if err != nil {
		return nil, err
	}
	if opts.Epoch < 0 {
		return nil, fmt.Errorf("replay: epoch %d: must be a committed epoch number", opts.Epoch)
	}
	if opts.Parallelism < 0 {
		return nil, fmt.Errorf("replay: parallelism %d: must be at least 1", opts.Parallelism)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := runner.OpenStores(ctx, p, &runner.Options{Log: log}, true)
	if err != nil {
		return nil, err
	}
	y := &replayer{opts: opts, log: log}
	x := &inspector{p: p, st: st, c: epoch.NewCommitter(st.State, st.Sink, p.Name, nil)}
	y.x = x
	objs, err := st.Source.List(ctx, "")
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("list source %s: %w", sources.Describe(p), err)
	}
	y.listed = make(map[string]store.ObjectInfo, len(objs))
	for _, o := range objs {
		y.listed[o.Key] = o
	}
	xo := (&runner.Options{Functions: opts.Functions}).ExprOptions()
	x.pl, y.schemas, err = compileTool(ctx, p, st.Source, xo...)
	if err == nil {
		x.head, err = x.c.Peek(ctx) // read-only: no roll-forward write
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	return y, nil
}

func (y *replayer) close() {
	y.from.Close()
	y.x.close()
}

// locate finds epoch N, its generation and the epoch whose state it
// started from (N-1), refusing a spec whose state layout is not the one they
// were written with. Epoch N-1 is N's parent on the chain, except for the
// first epoch of a generation: that one started from what the generation
// restored (its generation record's parent): the previous head after a
// rescale, a plan change, a reset or a reprocess; the rollback target; the
// savepoint's epoch, read from the savepoint folder.
func (y *replayer) locate(ctx context.Context) error {
	x := y.x
	var err error
	if y.m, y.g, err = x.at(ctx, y.opts.Epoch); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	m, g := y.m, y.g
	if x.pl, err = x.pl.WithRecordedLayouts(g.Plan); err != nil { // a graph's recorded state layouts (dataflow.Plan.WithRecordedLayouts)
		return fmt.Errorf("replay: %w", err)
	}
	if _, err := dataflow.EvolveGraph(g.Plan, x.pl, nil); err != nil {
		return fmt.Errorf("replay: epoch %d (generation %d) cannot be replayed with this spec: %w", m.Epoch, m.Generation, err)
	}
	y.first = m.Parent == nil || m.Parent.Generation != m.Generation
	from := m.Parent
	if y.first {
		from = g.Parent
	}
	switch {
	case from == nil && m.Parent == nil:
		return nil // the pipeline's first epoch: empty start
	case from == nil:
		return fmt.Errorf("replay: epoch %d is the first of generation %d, whose record names no parent: its starting state is unknown", m.Epoch, m.Generation)
	case y.first && g.RestoredFrom != nil && g.RestoredFrom.Kind == manifest.RestoreSavepoint:
		rf := g.RestoredFrom
		f, err := runner.ResolveRestore(ctx, x.p, x.st, &runner.Options{FromSavepoint: rf.Savepoint, Claim: rf.Claimed}, x.head)
		if err != nil {
			return fmt.Errorf("replay: epoch %d started generation %d from savepoint %s, which replay reads its starting state from: %w", m.Epoch, m.Generation, rf.Savepoint, err)
		}
		if f.Manifest.Ref() != *from {
			f.Close()
			return fmt.Errorf("replay: epoch %d started from savepoint %s at %s, but the savepoint now holds %s", m.Epoch, rf.Savepoint, from, f.Manifest.Ref())
		}
		y.from, y.parent, y.pgen = f, f.Manifest, f.Generation
	default:
		y.parent, err = x.c.ReadManifest(ctx, from.Generation, from.Epoch)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("replay: epoch %d starts from the state of epoch %d, which is not retained any more, so it cannot be replayed: %s",
				m.Epoch, from.Epoch, x.retained(ctx))
		}
		if err != nil {
			return fmt.Errorf("replay: epoch %d: the epoch it started from: %w", m.Epoch, err)
		}
		if y.pgen, err = x.c.ReadGeneration(ctx, y.parent.Generation); err != nil {
			return fmt.Errorf("replay: epoch %d: the epoch it started from: %w", m.Epoch, err)
		}
	}
	// The one decision a run makes: restore as it is, or migrate to the
	// spec's window (an aggregate added, removed or renamed, a lateness
	// changed), or refuse.
	if y.restarts() == manifest.RestoreReset {
		return nil // no window state is restored
	}
	if _, err = dataflow.EvolveGraph(y.pgen.Plan, x.pl, nil); err != nil {
		return fmt.Errorf("replay: the state of epoch %d (generation %d) cannot be restored with this spec: %w", y.parent.Epoch, y.parent.Generation, err)
	}
	return nil
}

// restarts returns how epoch N's generation began when N is its first
// epoch and the generation restored something other than the head as it
// was: a manifest.Restore* kind, or "".
func (y *replayer) restarts() string {
	if !y.first || y.g.RestoredFrom == nil {
		return ""
	}
	return y.g.RestoredFrom.Kind
}

func (y *replayer) replay(ctx context.Context) (*ReplayResult, error) {
	if err := y.locate(ctx); err != nil {
		return nil, err
	}
	x, m := y.x, y.m
	par, k := y.g.Parallelism, y.g.MaxParallelism
	if y.opts.Parallelism > 0 {
		par = y.opts.Parallelism
	}
	if par > k {
		return nil, fmt.Errorf("replay: parallelism %d exceeds max_parallelism %d (the key-group count); pick 1..%d", par, k, k)
	}
	res := &ReplayResult{Pipeline: x.p.Name, Epoch: m.Epoch, Generation: m.Generation, Restart: y.restarts(), Parallelism: par,
		Watermark: m.Watermark, Inputs: m.Source.Inputs, Recorded: counterDelta(m.Counters, y.parent)}

	if y.parent != nil {
		ref := y.parent.Ref()
		res.Parent = &ref
	}
	// Restore N-1 exactly as a run that continued from it restores.
	r := &runner.Runner{P: x.p, Opts: &runner.Options{}, Log: y.log, St: x.st, C: x.c, Mem: memory.DefaultAllocator, Dc: decide.NewConfig(x.p),
		Plan: x.pl, Parallelism: par, K: k}
	rp := &runner.RunPlan{Plan: x.pl, Parallelism: par, K: k}
	from := runner.RestoreSource{Store: x.st.State, Shared: true}
	if y.from != nil {
		from = *y.from
	}
	if y.parent != nil {
		hm := *y.parent
		hm.OutputLog = nil // the committed-output log is not needed
		if y.restarts() == manifest.RestoreReset {
			hm.Operators = nil // the generation began with empty operator state
		}
		from.Manifest, from.Generation = &hm, y.pgen
	}
	from.Kind, from.Forget, from.Owned = "", nil, nil // read as it is; closed by y.close
	rp.From = &from
	if y.pgen != nil && y.restarts() != manifest.RestoreReset {
		stages, err := dataflow.EvolveGraph(y.pgen.Plan, x.pl, nil) // checked by locate
		if err != nil {
			return nil, fmt.Errorf("replay: the state of epoch %d cannot be restored with this spec: %w", y.parent.Epoch, err)
		}
		rp.Stages = stages
	}
	if err := r.Restore(ctx, rp); err != nil {
		return nil, fmt.Errorf("replay: restore the state epoch %d started from: %w", m.Epoch, err)
	}
	if err := r.LoadEverything(ctx); err != nil {
		return nil, fmt.Errorf("replay: restore the state epoch %d started from: %w", m.Epoch, err)
	}

	// The files epoch N consumed, in its order.
	keys, err := y.consumed(ctx, r.Seen)
	if err != nil {
		return nil, err
	}
	res.Files = keys
	files := make([]store.ObjectInfo, len(keys))
	var size int64
	r.Captured = map[string]manifest.FileRef{}
	for _, ref := range m.Source.Captured {
		if k := runner.CapturedKey(ref); k != "" {
			r.Captured[k] = ref
		}
	}
	for i, key := range keys {
		o, ok := y.listed[key]
		if !ok {
			if ref, kept := r.Captured[key]; kept {
				files[i] = store.ObjectInfo{Key: key, Size: ref.Size} // read from the epoch's captured copy
				size += ref.Size
				continue
			}
			return nil, fmt.Errorf("replay: input file %s, consumed by epoch %d, is no longer in %s and was not captured (set capture: true on its source to keep a copy of each epoch's input with its state): %w",
				key, m.Epoch, sources.Describe(x.p), store.ErrNotFound)
		}
		files[i] = o
		size += o.Size
	}
	if s := m.Stats; s != nil && s.BytesIn != size {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the epoch's input files add up to %d bytes now, but epoch %d read %d bytes: an input file changed since (input files must be immutable)", size, m.Epoch, s.BytesIn))
	}
	if runner.StartsLatest(x.p) && y.parent == nil && m.Counters.RowsIn == 0 && m.Watermark == manifest.NoWatermark {
		r.SkipRead = true // start_from: latest marked the files present at the start read without reading them
		y.skipRead = true
	}
	if !x.pl.Graph.Linear {
		// Each stage advances to the watermark it recorded (a linear
		// pipeline's one window advances to the epoch's), and every
		// lookup must read the table version the epoch read.
		r.StageWM = map[string]int64{}
		for _, op := range m.Operators {
			r.StageWM[op.ID] = op.EmittedThrough
		}
		if err := r.RefreshLookups(ctx); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		for _, lv := range m.Lookups {
			if nd := x.pl.Graph.ByName[lv.Stage]; nd != nil && nd.Lookup != nil && nd.Lookup.Version != lv.Version {
				return nil, fmt.Errorf("replay: epoch %d: stage %s read lookup table version %s (%d files, %d rows); its table is now version %s (%d files, %d rows): the replay would not be exact",
					m.Epoch, lv.Stage, lv.Version, lv.Files, lv.Rows, nd.Lookup.Version, nd.Lookup.Files, nd.Lookup.Rows)
			}
		}
	}
	in, err := replayFiles(r, ctx, m.Epoch, files, m.Watermark, res)
	if err != nil {
		return nil, err
	}
	y.checkInputs(res, in)
	for _, w := range res.Warnings {
		y.log.Warn(w)
	}
	return res, nil
}

// replayFiles decodes the files epoch ep consumed with r (whose state is
// restored), processes them at the epoch's recorded watermark wm, and
// fills res's rows and counters. Replay and ReplayBundle share it.
func replayFiles(r *runner.Runner, ctx context.Context, ep int64, files []store.ObjectInfo, wm int64, res *ReplayResult) (runner.InputSummary, error) {
	results, err := r.DecodeEpoch(ctx, files)
	if errors.Is(err, store.ErrNotFound) {
		return runner.InputSummary{}, fmt.Errorf("replay: epoch %d: an input file it consumed is gone: %w", ep, err)
	}
	if err != nil {
		return runner.InputSummary{}, fmt.Errorf("replay: epoch %d: %w", ep, err)
	}
	if len(results) != len(files) {
		return runner.InputSummary{}, fmt.Errorf("replay: epoch %d consumed %d files but max_rows_per_epoch now ends it after %d: the input changed, or the spec's row limit did", ep, len(files), len(results))
	}
	in := runner.Summarize(results)
	r.Processing = ep
	out, err := r.Process(ctx, results, wm)
	if err != nil {
		return runner.InputSummary{}, fmt.Errorf("replay: epoch %d: %w", ep, err)
	}
	for _, bs := range out.Out {
		lines, err := partitionedLines(r.Plan.SinkParts, r.Plan.Output, bs, r.Mem)
		if err != nil {
			return runner.InputSummary{}, fmt.Errorf("replay: outputs: %w", err)
		}
		res.Outputs = append(res.Outputs, lines...)
	}
	for i, perSub := range out.Extra {
		sr := SinkRows{Name: dataflow.ExtraSinks(r.P)[i].Name}
		for _, bs := range perSub {
			lines, err := partitionedLines(r.Plan.ExtraPartsOf(i), r.Plan.Graph.Extra[i].Out, bs, r.Mem)
			if err != nil {
				return runner.InputSummary{}, fmt.Errorf("replay: outputs of sink %s: %w", sr.Name, err)
			}
			sr.Rows = append(sr.Rows, lines...)
		}
		res.Sinks = append(res.Sinks, sr)
	}
	if g := out.Graph; g != nil {
		keys := slices.Sorted(maps.Keys(g.Late))
		for _, key := range keys {
			stage, input, _ := runner.CutLast(key)
			nd := r.Plan.Graph.ByName[stage]
			schema := nd.Ins[0].Out
			if input != "" {
				schema = r.Plan.Graph.ByName[input].Out
			}
			for _, bs := range g.Late[key] {
				lines, err := jsonLines(schema, bs)
				if err != nil {
					return runner.InputSummary{}, fmt.Errorf("replay: late rows of stage %s: %w", stage, err)
				}
				res.Late = append(res.Late, lines...)
			}
		}
	}
	if res.Rejected, err = rejectLines(in.Rejects); err != nil {
		return runner.InputSummary{}, err
	}
	rowsOut := len(res.Outputs)
	for _, sk := range res.Sinks {
		rowsOut += len(sk.Rows)
	}
	res.Counters = manifest.Counters{FilesIn: int64(len(files)), RowsIn: in.Rows + int64(len(in.Rejects)), RowsOut: int64(rowsOut),
		RowsLate: out.Late, RowsRejected: int64(len(in.Rejects)), RowsFiltered: in.Filtered, Windows: out.Windows}
	return in, nil
}

// consumed returns the input files epoch N consumed, in its order: the
// entries it added to the processed-file log. The log lists entries in the
// order they were added and an epoch appends its files in the order it read
// them, so they are the last files_in(N) - files_in(N-1) entries of
// seen(N); they are checked against seen(N) minus seen(N-1). (The first
// epoch of a reprocess generation re-reads files that are in both.)
func (y *replayer) consumed(ctx context.Context, prev *epoch.SegLog) ([]string, error) {
	m := y.m
	seen := runner.NewSeenLog()
	if err := seen.Load(ctx, y.x.c, m.Source.Inline, m.Source.Segments); err != nil {
		return nil, fmt.Errorf("replay: epoch %d: %w", m.Epoch, err)
	}
	all := seen.Entries()
	n := m.Counters.FilesIn
	if y.parent != nil {
		n -= y.parent.Counters.FilesIn
	}
	if n < 0 || n > int64(len(all)) {
		return nil, fmt.Errorf("replay: epoch %d: its counters say it consumed %d files, but its processed-file log has %d entries: %w", m.Epoch, n, len(all), manifest.ErrCorrupt)
	}
	keys := slices.Clone(all[len(all)-int(n):])
	inTail := make(map[string]bool, len(keys))
	for _, k := range keys {
		inTail[k] = true
	}
	reprocess := y.restarts() == manifest.RestoreReprocess
	for _, k := range all[:len(all)-int(n)] {
		if !prev.Has(k) {
			return nil, fmt.Errorf("replay: epoch %d added %s to its processed-file log, but not as one of its last %d entries: %w", m.Epoch, k, n, manifest.ErrCorrupt)
		}
	}
	for _, k := range keys {
		if prev.Has(k) && !reprocess {
			return nil, fmt.Errorf("replay: epoch %d lists %s as consumed, but it was processed before: %w", m.Epoch, k, manifest.ErrCorrupt)
		}
	}
	return keys, nil
}

// checkInputs compares the per-input max event time the decoded files give
// with what manifest N records.
func (y *replayer) checkInputs(res *ReplayResult, in runner.InputSummary) {
	if y.restarts() == manifest.RestoreReprocess {
		return
	}
	var prev map[string]manifest.InputState
	if y.parent != nil {
		prev = y.parent.Source.Inputs
	}
	next := decide.NewConfig(y.x.p).Observe(prev, in.Obs, time.Time{})
	for name, st := range next {
		rec, ok := y.m.Source.Inputs[name]
		if !ok || rec.MaxEventTime != st.MaxEventTime {
			res.Warnings = append(res.Warnings, fmt.Sprintf("input %q: the replayed files give max event time %s, epoch %d recorded %s: an input file changed since",
				name, runner.FmtWM(st.MaxEventTime), y.m.Epoch, runner.FmtWM(rec.MaxEventTime)))
		}
	}
}

// counterDelta is what manifest m added to the cumulative counters of its
// parent (nil: none).
func counterDelta(c manifest.Counters, parent *manifest.Manifest) manifest.Counters {
	if parent == nil {
		return c
	}
	p := parent.Counters
	return manifest.Counters{FilesIn: c.FilesIn - p.FilesIn, RowsIn: c.RowsIn - p.RowsIn, RowsOut: c.RowsOut - p.RowsOut,
		RowsLate: c.RowsLate - p.RowsLate, RowsRejected: c.RowsRejected - p.RowsRejected,
		RowsFiltered: c.RowsFiltered - p.RowsFiltered, Windows: c.Windows - p.Windows}
}

// jsonLines encodes batches as JSON lines (formats.EncodeJSONL), one string
// per row.
func jsonLines(schema *arrow.Schema, bs []arrow.RecordBatch) ([]string, error) {
	if len(bs) == 0 {
		return nil, nil
	}
	data, err := formats.EncodeJSONL(schema, bs)
	if err != nil {
		return nil, err
	}
	return splitLines(data), nil
}

func splitLines(data []byte) []string {
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// rejectLines encodes rejected rows as the rejected-rows files hold them.
func rejectLines(rs []sinks.RejectRecord) ([]string, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	data, err := sinks.EncodeRejects(rs)
	if err != nil {
		return nil, err
	}
	return splitLines(data), nil
}

// ReplayVerdict compares a replay with what the epoch committed.
type ReplayVerdict struct {
	Replay *ReplayResult
	// Replayed and Committed are the compared forms: the canonical lines,
	// except that without source.late_url (late rows were only counted)
	// both have one "late_count <n>" line instead of their late rows.
	Replayed, Committed []string
	Diff                LineDiff
	// Counters lists the per-epoch counters that differ from the recorded
	// ones ("rows_filtered: replayed 3, committed 4").
	Counters []string
}

// Identical reports whether the replay produced what the epoch committed.
func (v *ReplayVerdict) Identical() bool { return v.Diff.Identical() && len(v.Counters) == 0 }

// VerifyReplay replays epoch opts.Epoch and compares the rows with what
// that epoch committed: its outputs in the sink (Parquet or JSON lines), its
// late rows (when source.late_url is set; otherwise the late count the
// counters record) and its rejected rows. It writes nothing.
func VerifyReplay(ctx context.Context, p *spec.Pipeline, opts ReplayOptions) (*ReplayVerdict, error) {
	y, err := newReplayer(ctx, p, opts)
	if err != nil {
		return nil, err
	}
	defer y.close()
	res, err := y.replay(ctx)
	if err != nil {
		return nil, err
	}
	committed, err := y.committed(ctx)
	if err != nil {
		return nil, err
	}
	v := &ReplayVerdict{Replay: res, Replayed: res.Lines(), Committed: committed}
	if p.Source.LateURL == "" {
		v.Replayed = withLateCount(v.Replayed, res.Counters.RowsLate)
		v.Committed = withLateCount(v.Committed, res.Recorded.RowsLate)
	}
	v.Diff = CompareLines(v.Replayed, v.Committed)
	a, b := res.Counters, res.Recorded
	for _, c := range []struct {
		name string
		a, b int64
	}{{"files_in", a.FilesIn, b.FilesIn}, {"rows_in", a.RowsIn, b.RowsIn}, {"rows_out", a.RowsOut, b.RowsOut},
		{"rows_late", a.RowsLate, b.RowsLate}, {"rows_rejected", a.RowsRejected, b.RowsRejected},
		{"rows_filtered", a.RowsFiltered, b.RowsFiltered}, {"windows_emitted", a.Windows, b.Windows}} {
		if c.a != c.b {
			v.Counters = append(v.Counters, fmt.Sprintf("%s: replayed %d, committed %d", c.name, c.a, c.b))
		}
	}
	return v, nil
}

// withLateCount replaces the late rows of canonical lines by their count.
func withLateCount(lines []string, n int64) []string {
	out := slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return strings.HasPrefix(l, "late ") })
	out = append(out, fmt.Sprintf("late_count %d", n))
	slices.Sort(out)
	return out
}

// committed reads what epoch N committed into the canonical form.
func (y *replayer) committed(ctx context.Context) ([]string, error) {
	x, m := y.x, y.m
	var lines []string
	add := func(kind string, ls []string) {
		for _, l := range ls {
			lines = append(lines, kind+" "+l)
		}
	}
	for _, f := range m.Outputs {
		data, err := epoch.ReadFileFrom(ctx, x.st.Sink, f)
		if err != nil {
			return nil, fmt.Errorf("verify: committed output of epoch %d: %w", m.Epoch, err)
		}
		ls, err := rowLines(f.Path, data)
		if err != nil {
			return nil, fmt.Errorf("verify: committed output %s: %w", f.Path, err)
		}
		if part := sinks.HivePartitionOf(x.pl, x.p, f.Path); part != "" {
			for i, l := range ls {
				ls[i] = part + " " + l // as partitionedLines writes it
			}
		}
		sink, _ := sinks.SplitSinkPath(f.Path)
		add(outputKind(sink), ls)
	}
	for _, f := range m.SideOutputs {
		s, key := x.st.Sink, f.Path
		if strings.Contains(f.Path, "://") {
			s = x.st.Rejected
			if f.Kind == manifest.SideOutputLate {
				s = x.st.Late
			}
			if s == nil {
				return nil, fmt.Errorf("verify: epoch %d wrote %s rows to %s, which the spec no longer names", m.Epoch, f.Kind, store.Redact(f.Path))
			}
			key = path.Base(f.Path)
		}
		data, err := epoch.ReadFileFrom(ctx, s, manifest.FileRef{Path: key, Size: f.Size, Checksum: f.Checksum})
		if err != nil {
			return nil, fmt.Errorf("verify: %s rows of epoch %d: %w", f.Kind, m.Epoch, err)
		}
		switch f.Kind {
		case manifest.SideOutputLate:
			if x.p.Source.LateURL == "" {
				continue // compared by count
			}
			ls, err := rowLines(f.Path, data)
			if err != nil {
				return nil, fmt.Errorf("verify: late rows %s: %w", store.Redact(f.Path), err)
			}
			add("late", ls)
		case manifest.SideOutputRejected:
			rs, err := sinks.DecodeRejects(data)
			if err != nil {
				return nil, fmt.Errorf("verify: rejected rows %s: %w", store.Redact(f.Path), err)
			}
			ls, err := rejectLines(rs)
			if err != nil {
				return nil, err
			}
			add("rejected", ls)
		}
	}
	slices.Sort(lines)
	return lines, nil
}

// partitionedLines returns output rows of schema out as JSON lines; for a
// Hive-partitioned sink (h not nil) each line is the row as its file holds
// it (without the partition columns) after its partition directory and a
// space: "dt=2015-07-15/hm=08%3A00 {...}".
func partitionedLines(h *dataflow.HiveParts, out *arrow.Schema, bs []arrow.RecordBatch, mem memory.Allocator) ([]string, error) {
	if h == nil {
		return jsonLines(out, bs)
	}
	groups, err := sinks.HiveSplit(h, bs, mem)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, dir := range runner.SortedKeys(groups) {
		ls, err := jsonLines(h.File, groups[dir])
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			lines = append(lines, dir+" "+l)
		}
	}
	return lines, nil
}

// rowLines returns a committed Parquet or JSON-lines file's rows as
// formats.EncodeJSONL lines.
func rowLines(name string, data []byte) ([]string, error) {
	if strings.HasSuffix(name, ".jsonl") {
		return splitLines(data), nil // written by formats.EncodeJSONL
	}
	schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return jsonLines(schema, recs)
}

// LineDiff compares two sorted line lists (A and B).
type LineDiff struct {
	A, B int // how many lines each has
	// OnlyA and OnlyB count the lines (with multiplicity) of one side that
	// the other lacks; their sum is the number of differing lines.
	OnlyA, OnlyB int
	// Line is the 1-based line number of the first position where the two
	// differ (0: identical); FirstA and FirstB the lines there, Ended
	// telling which side had ended ("A", "B" or "").
	Line           int
	FirstA, FirstB string
	Ended          string
}

// Identical reports whether the two lists are equal.
func (d LineDiff) Identical() bool { return d.Line == 0 }

// Differing is the number of lines in one list and not the other.
func (d LineDiff) Differing() int { return d.OnlyA + d.OnlyB }

// CompareLines compares two lists of canonical lines, each sorted
// byte-wise: the first position where they diverge and how many lines
// (counted with multiplicity) only one of them has.
func CompareLines(a, b []string) LineDiff {
	d := LineDiff{A: len(a), B: len(b)}
	for i := 0; i < max(len(a), len(b)); i++ {
		switch {
		case i >= len(a):
			d.Line, d.FirstB, d.Ended = i+1, b[i], "A"
		case i >= len(b):
			d.Line, d.FirstA, d.Ended = i+1, a[i], "B"
		case a[i] != b[i]:
			d.Line, d.FirstA, d.FirstB = i+1, a[i], b[i]
		default:
			continue
		}
		break
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := strings.Compare(a[i], b[j]); {
		case c == 0:
			i, j = i+1, j+1
		case c < 0:
			d.OnlyA, i = d.OnlyA+1, i+1
		default:
			d.OnlyB, j = d.OnlyB+1, j+1
		}
	}
	d.OnlyA += len(a) - i
	d.OnlyB += len(b) - j
	return d
}

// Describe says how the lists differ, naming the sides nameA and nameB:
// the first divergence and the counts.
func (d LineDiff) Describe(nameA, nameB string) string {
	if d.Identical() {
		return fmt.Sprintf("identical: %d lines", d.A)
	}
	var first string
	switch d.Ended {
	case "A":
		first = fmt.Sprintf("%s ends at line %d; %s has: %s", nameA, d.Line-1, nameB, d.FirstB)
	case "B":
		first = fmt.Sprintf("%s ends at line %d; %s has: %s", nameB, d.Line-1, nameA, d.FirstA)
	default:
		first = fmt.Sprintf("first difference at line %d:\n  %s: %s\n  %s: %s", d.Line, nameA, d.FirstA, nameB, d.FirstB)
	}
	return fmt.Sprintf("%s\n%d lines differ: %d only in %s, %d only in %s (%s has %d lines, %s has %d)",
		first, d.Differing(), d.OnlyA, nameA, d.OnlyB, nameB, nameA, d.A, nameB, d.B)
}

// ReadReplayLines reads a file written by `floe replay --out`: canonical
// lines, checked to be output, late, rejected or late_count lines.
func ReadReplayLines(name string, data []byte) ([]string, error) {
	lines := splitLines(data)
	for i, l := range lines {
		kind, _, _ := strings.Cut(l, " ")
		switch kind {
		case "output", "late", "rejected", "late_count":
		default:
			return nil, fmt.Errorf("%s line %d: not a replay line (want output, late or rejected, then JSON): %.60q", name, i+1, l)
		}
	}
	slices.Sort(lines)
	return lines, nil
}
