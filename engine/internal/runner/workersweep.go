package runner

import (
	"context"
	"errors"
)

// sweepWorkerOrphans is worker 0's sweep at the end of a run of several
// workers: sink and side-output files of epochs up to the head that no
// committed attempt wrote are deleted. They come from a stale worker (an
// older generation or attempt) that passed its fence just before the
// epoch was committed without it, and wrote after. Files of epochs newer
// than the head are kept (a peer may be writing the next epoch), as in
// every sweep (epoch.GCOptions), so the sweep is safe while peers run. A
// failure is logged: the next run's worker 0 sweeps again.
func (r *Runner) sweepWorkerOrphans(ctx context.Context) {
	if r.cl == nil || r.cl.self != 0 || r.head == nil || r.head.Manifest == nil {
		return
	}
	warn := func(err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			r.Log.Warn("orphan sweep at the end of the run failed; the next run tries again", "error", err)
		}
	}
	if _, err := r.C.SweepSideOutputs(ctx, r.head, r.keep(), r.sideDirs()); err != nil {
		warn(err)
	}
	if r.ident.TakeoverPending() {
		return // the sinks are judged once the takeover is committed
	}
	if err := r.outputs.Complete(ctx); err != nil {
		warn(err)
		return
	}
	opts := r.gcOptions(false)
	opts.SinkOnly = true
	_, err := r.C.Retain(ctx, r.head, opts)
	warn(err)
}
