package engine

import (
	"context"
	"fmt"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// runPlan is what a run will do, decided from the committed head, the spec
// and the source listing before anything is written. planRun computes it
// for both `floe run` (which executes it) and `floe plan` (which prints it),
// so the two cannot disagree.
type runPlan struct {
	head        *epoch.Head
	files       []store.ObjectInfo // the source listing the plan was made from
	listing     *listing           // how it was listed (listing.go)
	plan        *plan
	parallelism int
	k           int // max parallelism: the key-group count
	// newGeneration: the run starts a generation (first run, parallelism or
	// plan changed); reason says why. Otherwise it continues head's.
	newGeneration bool
	reason        string
	// refusal, when set, is why the run must not start; it writes nothing.
	refusal  error
	identity *identityPlan
	// share tells whether unchanged parent state files can be reused
	// (same layout, same generation); each stateful stage restores the
	// key-group ranges restoreSources gives it.
	share bool
	// from is what the run restores: the head, or a savepoint, a retained
	// epoch (rollback) or the head without operator state (reset).
	from *restoreSource
	// stages migrates, per window stage, its restored state to the plan's
	// layout, by evolution or by a chain of registered migrations (no
	// entry: nothing to migrate).
	stages map[string]*stageMigration
	// tableChanges says how an iceberg sink's table schema evolves for the
	// plan's output (columns added, renamed, widened, dropped).
	tableChanges []string
}

type subtaskRestore struct {
	lo, hi int
	files  []manifest.FileRef // bases overlapping [lo, hi)
	deltas []manifest.FileRef // deltas overlapping [lo, hi), in order
}

// parallelismOf returns the run's parallelism and the key-group count.
func parallelismOf(p *spec.Pipeline, opts *Options) (int, int, error) {
	k := maxParallelism(p)
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

// planRun decides the run from head (recovered by Run, peeked by Plan).
// Errors are for what could not be decided (storage, an invalid spec); a
// decided refusal is in runPlan.refusal.
func planRun(ctx context.Context, p *spec.Pipeline, st *stores, opts *Options, head *epoch.Head) (*runPlan, error) {
	rp := &runPlan{head: head}
	var err error
	if rp.from, err = resolveRestore(ctx, p, st, opts, head); err != nil {
		return nil, err
	}
	from := rp.from
	if rp.parallelism, rp.k, err = parallelismOf(p, opts); err != nil {
		return nil, err
	}
	rp.listing = planListing(p, opts, head, from.kind != "")
	setKafkaCommitted(st.source, head, from)
	if rp.files, err = rp.listing.list(ctx, p, st.source, opts.now()); err != nil {
		return nil, err
	}
	if isGraph(p) {
		schemas, lookups, err := graphSchemas(ctx, p, st.source, rp.files, opts)
		if err != nil {
			return nil, err
		}
		if rp.plan, err = compileGraph(p, schemas, lookups, opts.exprOptions()...); err != nil {
			return nil, err
		}
		if hg := from.generation; hg != nil { // the state layouts the restored generation recorded (graphprune.go)
			if rp.plan, err = rp.plan.withRecordedLayouts(hg.Plan); err != nil {
				return nil, err
			}
		}
	} else {
		src, err := sourceSchema(p)
		if err != nil {
			return nil, err
		}
		if src == nil {
			if src, err = inferSchema(ctx, p, st.source, rp.files); err != nil {
				return nil, err
			}
		}
		if rp.plan, err = compileLinear(p, src, opts.exprOptions()...); err != nil {
			return nil, err
		}
	}
	if rp.identity, err = planIdentity(ctx, p, st, epoch.NewCommitter(st.state, nil, p.Name, nil), head, from.generation, from.kind == manifest.RestoreSavepoint); err != nil {
		return nil, err
	}
	hg := from.generation
	switch {
	case hg != nil && hg.MaxParallelism != rp.k:
		rp.refusal = fmt.Errorf("state.max_parallelism is %d but the pipeline was created with %d; it is fixed for a pipeline's life", rp.k, hg.MaxParallelism)
	case hg != nil && from.kind != manifest.RestoreReset:
		// Each window stage's state migrates to the plan's layout (or
		// through registered migrations); every other stateful stage must
		// keep its layout.
		stages, err := evolveGraph(hg.Plan, rp.plan, opts.Migrations)
		if err != nil {
			rp.refusal = fmt.Errorf("plan change refused before anything was written: %w", err)
		}
		rp.stages = stages
	}
	if rp.refusal == nil {
		rp.refusal = rp.identity.refusal
	}
	if rp.refusal == nil && p.Sink.Type == spec.SinkIceberg {
		changes, err := tableSchemaChanges(ctx, p, st, rp.plan.output)
		if err != nil {
			rp.refusal = fmt.Errorf("plan change refused before anything was written: %w", err)
		}
		rp.tableChanges = changes
	}
	if rp.refusal == nil && p.Sink.Type == spec.SinkIceberg && (from.kind == manifest.RestoreSavepoint || from.kind == manifest.RestoreRollback) {
		rp.refusal = fmt.Errorf("%s on an iceberg sink is not supported yet: the table has published the epochs it would abandon", from.describe())
	}
	switch {
	case from.kind != "":
		rp.newGeneration, rp.reason = true, from.describe()
	case hg == nil:
		rp.newGeneration, rp.reason = true, "first generation"
	case hg.Parallelism != rp.parallelism:
		rp.newGeneration, rp.reason = true, fmt.Sprintf("parallelism %d -> %d", hg.Parallelism, rp.parallelism)
	case !samePlan(hg.PlanHash, p, rp.plan.declared, rp.plan.hash):
		rp.newGeneration, rp.reason = true, "plan changed"
	}
	if c := firstChain(rp.plan, rp.stages); c != nil && !rp.newGeneration {
		// The migrated state is written in the new format by a new
		// generation, so a later restore does not migrate it again.
		rp.newGeneration, rp.reason = true, describeChain(c)
	}
	// Unchanged state files are shared by reference when they resolve in
	// the state root and the layout is the same: the parallelism, and per
	// stateful stage its state format and the parent's base count
	// (restoreGraph).
	rp.share = hg != nil && hg.Parallelism == rp.parallelism &&
		(!rp.newGeneration || from.kind == manifest.RestoreRollback || from.kind == manifest.RestoreReprocess || from.claim)
	return rp, nil
}

// restoreSources is the one rule for what a subtask restores: for each of
// p subtasks (k key groups), the base files and then the deltas of operator
// opID in m (nil: nothing) that overlap its key-group range, in order. It
// also returns the operator's emitted-through watermark and how many base
// files m has.
func restoreSources(m *manifest.Manifest, opID string, p, k int) ([]subtaskRestore, int64, int) {
	emitted := manifest.NoWatermark
	var bases, deltas []manifest.FileRef
	if m != nil {
		for _, op := range m.Operators {
			if op.ID == opID {
				bases, deltas, emitted = op.Files, op.Deltas, op.EmittedThrough
			}
		}
	}
	out := make([]subtaskRestore, 0, p)
	for s := 0; s < p; s++ {
		lo, hi := keygroup.Range(s, p, k)
		sr := subtaskRestore{lo: lo, hi: hi}
		for _, f := range bases {
			if f.KeyGroupHi > lo && f.KeyGroupLo < hi {
				sr.files = append(sr.files, f)
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
func (rp *runPlan) generationRecord() manifest.Generation {
	id := rp.identity.want
	g := manifest.Generation{Parallelism: rp.parallelism, MaxParallelism: rp.k, Plan: rp.plan.ops,
		PlanHash: rp.plan.hash, Identity: &id}
	if f := rp.from; f.kind != "" {
		g.RestoredFrom = &manifest.RestoredFrom{Kind: f.kind, Savepoint: f.savepoint, Claimed: f.claim}
		if f.manifest != nil {
			g.Parent = &manifest.Ref{Generation: f.manifest.Generation, Epoch: f.manifest.Epoch}
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
