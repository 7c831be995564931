package runner

import (
	"context"
	"fmt"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// RunPlan is what a run will do, decided from the committed head, the spec
// and the source listing before anything is written. planRun computes it
// for both `floe run` (which executes it) and `floe plan` (which prints it),
// so the two cannot disagree.
type RunPlan struct {
	Head        *epoch.Head
	Files       []store.ObjectInfo // the source listing the plan was made from
	listing     *sources.Listing   // how it was listed
	Plan        *dataflow.Plan
	Parallelism int
	K           int // max parallelism: the key-group count
	// newGeneration: the run starts a generation (first run, parallelism or
	// plan changed); reason says why. Otherwise it continues head's.
	NewGeneration bool
	Reason        string
	// refusal, when set, is why the run must not start; it writes nothing.
	Refusal  error
	Identity *owner.IdentityPlan
	// share tells whether unchanged parent state files can be reused
	// (same layout, same generation); each stateful stage restores the
	// key-group ranges restoreSources gives it.
	share bool
	// Workers is the run's worker count (Options.Workers, at least 1);
	// workersOnly: the new generation changes it alone.
	Workers     int
	workersOnly bool
	// From is what the run restores: the head, or a savepoint, a retained
	// epoch (rollback) or the head without operator state (reset).
	From *RestoreSource
	// Stages migrates, per window stage, its restored state to the plan's
	// layout, by evolution or by a chain of registered migrations (no
	// entry: nothing to migrate).
	Stages map[string]*dataflow.StageMigration
	// TableChanges says how an iceberg sink's table schema evolves for the
	// plan's output (columns added, renamed, widened, dropped).
	TableChanges []string
}

type SubtaskRestore struct {
	Lo, Hi int
	Files  []manifest.FileRef // bases overlapping [lo, hi)
	deltas []manifest.FileRef // deltas overlapping [lo, hi), in order
}

// parallelismOf returns the run's parallelism and the key-group count.
func parallelismOf(p *spec.Pipeline, opts *Options) (int, int, error) {
	k := dataflow.MaxParallelism(p)
	n := p.State.Parallelism
	if opts.Parallelism > 0 {
		n = opts.Parallelism
	}
	n = max(n, 1)
	if n > k {
		return 0, 0, fmt.Errorf("parallelism %d exceeds max_parallelism %d (the key-group count); pick 1..%d", n, k, k)
	}
	return n, k, nil
}

// PlanRun decides the run from head (recovered by Run, peeked by Plan).
// Errors are for what could not be decided (storage, an invalid spec); a
// decided refusal is in runPlan.refusal.
func PlanRun(ctx context.Context, p *spec.Pipeline, st *Stores, opts *Options, head *epoch.Head) (*RunPlan, error) {
	rp := &RunPlan{Head: head}
	var err error
	if rp.From, err = ResolveRestore(ctx, p, st, opts, head); err != nil {
		return nil, err
	}
	from := rp.From
	if rp.Parallelism, rp.K, err = parallelismOf(p, opts); err != nil {
		return nil, err
	}
	rp.Workers = max(opts.Workers, 1)
	if rp.Workers > rp.Parallelism {
		return nil, fmt.Errorf("--workers %d exceeds the parallelism %d: every worker owns at least one subtask (raise state.parallelism or --parallelism)", rp.Workers, rp.Parallelism)
	}
	rp.listing = sources.PlanListing(p, opts.FullList, opts.now(), head, from.Kind != "")
	setKafkaCommitted(st.Source, head, from, opts.log())
	if rp.Files, err = rp.listing.List(ctx, p, st.Source, opts.now()); err != nil {
		return nil, err
	}
	if IsGraph(p) {
		schemas, lookups, err := GraphSchemas(ctx, p, st.Source, rp.Files, opts)
		if err != nil {
			return nil, err
		}
		if rp.Plan, err = dataflow.CompileGraph(p, schemas, lookups, opts.ExprOptions()...); err != nil {
			return nil, err
		}
		if hg := from.Generation; hg != nil { // the state layouts the restored generation recorded (dataflow.Plan.WithRecordedLayouts)
			if rp.Plan, err = rp.Plan.WithRecordedLayouts(hg.Plan); err != nil {
				return nil, err
			}
		}
	} else {
		src, err := dataflow.SourceSchema(p)
		if err != nil {
			return nil, err
		}
		if src == nil {
			if src, err = sources.InferSchema(ctx, p, st.Source, rp.Files); err != nil {
				return nil, err
			}
		}
		if rp.Plan, err = dataflow.CompileLinear(p, src, opts.ExprOptions()...); err != nil {
			return nil, err
		}
	}
	if rp.Identity, err = owner.PlanIdentity(ctx, p, st.StateURL, st.Sink, epoch.NewCommitter(st.State, nil, p.Name, nil), head, from.Generation, from.Kind == manifest.RestoreSavepoint); err != nil {
		return nil, err
	}
	hg := from.Generation
	switch {
	case hg != nil && hg.MaxParallelism != rp.K:
		rp.Refusal = fmt.Errorf("state.max_parallelism is %d but the pipeline was created with %d; it is fixed for a pipeline's life", rp.K, hg.MaxParallelism)
	case hg != nil && from.Kind != manifest.RestoreReset:
		// Each window stage's state migrates to the plan's layout (or
		// through registered migrations); every other stateful stage must
		// keep its layout.
		stages, err := dataflow.EvolveGraph(hg.Plan, rp.Plan, opts.Migrations)
		if err != nil {
			rp.Refusal = fmt.Errorf("plan change refused before anything was written: %w", err)
		}
		rp.Stages = stages
	}
	if rp.Refusal == nil {
		rp.Refusal = rp.Identity.Refusal
	}
	if rp.Refusal == nil && p.RootSink().Type == spec.SinkIceberg {
		changes, err := sinks.TableSchemaChanges(ctx, p, st.Sink, rp.Plan.Output)
		if err != nil {
			rp.Refusal = fmt.Errorf("plan change refused before anything was written: %w", err)
		}
		rp.TableChanges = changes
	}
	if rp.Refusal == nil && p.RootSink().Type == spec.SinkIceberg && (from.Kind == manifest.RestoreSavepoint || from.Kind == manifest.RestoreRollback) {
		rp.Refusal = fmt.Errorf("%s on an iceberg sink is not supported yet: the table has published the epochs it would abandon", from.describe())
	}
	switch {
	case from.Kind != "":
		rp.NewGeneration, rp.Reason = true, from.describe()
	case hg == nil:
		rp.NewGeneration, rp.Reason = true, "first generation"
	case hg.Parallelism != rp.Parallelism:
		rp.NewGeneration, rp.Reason = true, fmt.Sprintf("parallelism %d -> %d", hg.Parallelism, rp.Parallelism)
	case !dataflow.SamePlan(hg.PlanHash, p, rp.Plan.Declared, rp.Plan.Hash):
		rp.NewGeneration, rp.Reason = true, "plan changed"
	case max(hg.Workers, 1) != rp.Workers:
		// The state layout is the parallelism's: only who runs which
		// subtasks changes, so the state files are shared as they are.
		rp.NewGeneration, rp.Reason, rp.workersOnly = true, fmt.Sprintf("workers %d -> %d", max(hg.Workers, 1), rp.Workers), true
	}
	if c := dataflow.FirstChain(rp.Plan, rp.Stages); c != nil && !rp.NewGeneration {
		// The migrated state is written in the new format by a new
		// generation, so a later restore does not migrate it again.
		rp.NewGeneration, rp.Reason = true, dataflow.DescribeChain(c)
	}
	// Unchanged state files are shared by reference when they resolve in
	// the state root and the layout is the same: the parallelism, and per
	// stateful stage its state format and the parent's base count
	// (restoreGraph).
	rp.share = hg != nil && hg.Parallelism == rp.Parallelism &&
		(!rp.NewGeneration || rp.workersOnly || from.Kind == manifest.RestoreRollback || from.Kind == manifest.RestoreReprocess || from.claim)
	return rp, nil
}

// RestoreSources is the one rule for what a subtask restores: for each of
// p subtasks (k key groups), the base files and then the deltas of operator
// opID in m (nil: nothing) that overlap its key-group range, in order. It
// also returns the operator's emitted-through watermark and how many base
// files m has.
func RestoreSources(m *manifest.Manifest, opID string, p, k int) ([]SubtaskRestore, int64, int) {
	emitted := manifest.NoWatermark
	var bases, deltas []manifest.FileRef
	if m != nil {
		for _, op := range m.Operators {
			if op.ID == opID {
				bases, deltas, emitted = op.Files, op.Deltas, op.EmittedThrough
			}
		}
	}
	out := make([]SubtaskRestore, 0, p)
	for s := 0; s < p; s++ {
		lo, hi := keygroup.Range(s, p, k)
		sr := SubtaskRestore{Lo: lo, Hi: hi}
		for _, f := range bases {
			if f.KeyGroupHi > lo && f.KeyGroupLo < hi {
				sr.Files = append(sr.Files, f)
			}
		}
		for _, f := range deltas {
			if f.KeyGroupHi > lo && f.KeyGroupLo < hi {
				sr.deltas = append(sr.deltas, f)
			}
		}
		out = append(out, sr)
	}
	return out, emitted, len(bases)
}

// generationRecord is the _generation.json the plan starts.
func (rp *RunPlan) generationRecord() manifest.Generation {
	id := rp.Identity.Want
	g := manifest.Generation{Parallelism: rp.Parallelism, MaxParallelism: rp.K, Plan: rp.Plan.Ops,
		PlanHash: rp.Plan.Hash, Identity: &id}
	if rp.Workers > 1 {
		g.Workers = rp.Workers // absent for one, as every earlier generation
	}
	if f := rp.From; f.Kind != "" {
		g.RestoredFrom = &manifest.RestoredFrom{Kind: f.Kind, Savepoint: f.savepoint, Claimed: f.claim}
		if f.Manifest != nil {
			g.Parent = &manifest.Ref{Generation: f.Manifest.Generation, Epoch: f.Manifest.Epoch}
		}
	}
	return g
}

// hasStatePlan reports whether a generation recorded its operators' state
// plans (so evolve can say precisely what changed).
func hasStatePlan(ops []manifest.OpPlan) bool {
	for _, o := range ops {
		if o.StatePlan != "" {
			return true
		}
	}
	return false
}
