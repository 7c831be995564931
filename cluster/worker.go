package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// Defaults of Config.
const (
	DefaultTimeout  = 5 * time.Minute
	DefaultTakeOver = 10 * time.Second
	DefaultPollMin  = 5 * time.Millisecond
	DefaultPollMax  = time.Second
	DefaultFanout   = 16
)

// Config is one worker's view of the pipeline.
type Config struct {
	// Store is the pipeline's state store: keys relative to
	// <state-url>/<pipeline>/ (the store the engine's Committer uses).
	Store    store.Store
	Pipeline string
	// Worker is this process's index, 0..Topology.Workers-1.
	Worker   int
	Topology Topology
	// Timeout (--worker-timeout) bounds the wait at any barrier without
	// progress: a barrier that sees no new peer object for this long fails
	// with a *MissingError. Default DefaultTimeout.
	Timeout time.Duration
	// TakeOver is how long worker 1 waits for worker 0, which decides and
	// commits epochs, before doing it itself; worker w waits w times as
	// long (at most Timeout), so one stand-in does the work. Any worker
	// can: the documents are created once whoever writes them. Default
	// DefaultTakeOver.
	TakeOver time.Duration
	// PollMin and PollMax bound the delay between two polls of a barrier
	// (a quarter of the wait so far, within these bounds: pollDelay).
	// Defaults DefaultPollMin, DefaultPollMax.
	PollMin, PollMax time.Duration
	// Fanout bounds the reads a barrier issues at once. Default
	// DefaultFanout.
	Fanout int
	// Now is the clock of decisions (default time.Now).
	Now func() time.Time
	Log *slog.Logger
	// Once: the run ends at its first idle epoch (floe run without
	// --trigger). A worker then takes an idle note as the end when it was
	// written since the start of its last Join that returned a decision
	// (the note's epoch could only be looked at after that one
	// committed), not only since this Join began: a worker slower to
	// finish the last epoch than the proposer to find nothing new would
	// otherwise look itself, find input that arrived since, and wait for
	// peers that have gone. A note from before this process joined any
	// epoch is never taken (an earlier run's).
	Once bool
	// Run names this run of the workers (--run-id: a Kubernetes Job's
	// name); empty when not given. An idle note of the same run is the
	// run's end whenever it was written: a worker restarted after its
	// peers found nothing new and left ends too, where without a name it
	// cannot tell the note from an earlier run's and looks itself.
	Run string
}

// Worker runs the storage side of one worker of a pipeline: epoch
// decisions, exchange rounds, part records and the commit barrier.
type Worker struct {
	cfg Config
	// decidedAt is when the last Join that returned a decision began
	// (Config.Once).
	decidedAt time.Time
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Worker, error) {
	if cfg.Store == nil {
		return nil, errors.New("cluster: no store")
	}
	if err := manifest.ValidatePipelineName(cfg.Pipeline); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := cfg.Topology.Validate(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if cfg.Worker < 0 || cfg.Worker >= cfg.Topology.Workers {
		return nil, fmt.Errorf("cluster: worker index %d: must be in 0..%d (--worker, or $JOB_COMPLETION_INDEX, with --workers %d)",
			cfg.Worker, cfg.Topology.Workers-1, cfg.Topology.Workers)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.TakeOver <= 0 {
		cfg.TakeOver = DefaultTakeOver
	}
	cfg.TakeOver = min(cfg.TakeOver, cfg.Timeout)
	if cfg.PollMin <= 0 {
		cfg.PollMin = DefaultPollMin
	}
	if cfg.PollMax < cfg.PollMin {
		cfg.PollMax = max(DefaultPollMax, cfg.PollMin)
	}
	if cfg.Fanout <= 0 {
		cfg.Fanout = DefaultFanout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Log = cfg.Log.With("worker", cfg.Worker, "workers", cfg.Topology.Workers)
	return &Worker{cfg: cfg}, nil
}

// Config returns the worker's configuration with its defaults filled.
func (w *Worker) Config() Config { return w.cfg }

// Epoch is one decided epoch as one worker takes part in it.
type Epoch struct {
	w *Worker
	// Decision is the epoch as decided (by this worker or another).
	Decision *manifest.Decision
	// Won reports whether this worker created the decision.
	Won bool
}

// Proposer builds the decision of an epoch when this worker has to make
// it: the files (AssignFiles), the inputs and watermark of the parent,
// optionally Drain, CreatedAt and Attempt. Join fills the rest (format,
// pipeline, generation, epoch, parent, topology, proposer; a new attempt
// UUID and the clock when unset). It is called at most once per Join, and
// only when no decision exists yet. A nil decision (and nil error) means
// there is no input for the epoch: Join then leaves an idle note instead
// and returns ErrIdle.
type Proposer func(ctx context.Context) (*manifest.Decision, error)

// takeOver is how long worker waits for worker 0 before doing its job:
// TakeOver times its index, so that when worker 0 is gone worker 1 steps
// in first and the others only if it is gone too (W listings of the
// source, or W workers reading every part, would cost W times as much).
func (w *Worker) takeOver() time.Duration {
	return min(w.cfg.TakeOver*time.Duration(w.cfg.Worker), w.cfg.Timeout)
}

// Join returns the decision of epoch (gen, epoch), whose parent is parent
// (nil for the first). If none exists, worker 0 proposes one at once; the
// others poll for it and propose themselves after their take-over delay
// (TakeOver times their index). A proposal is created with
// create-if-absent, so exactly one exists; the losers adopt the winner's.
// A decision of another topology is ErrTopology; one with another parent
// means another writer decided this epoch on another head (ErrFenced).
// ErrIdle when the proposer found no input: by this worker's proposal, or
// by an idle note written since this Join started (one GET per poll while
// the decision is absent).
func (w *Worker) Join(ctx context.Context, gen, epoch int64, parent *manifest.Ref, propose Proposer) (*Epoch, error) {
	key := manifest.DecisionPath(gen, epoch)
	start := w.cfg.Now()
	idleSince := start
	if w.cfg.Once && !w.decidedAt.IsZero() {
		idleSince = w.decidedAt
	}
	for {
		d, err := w.readDecision(ctx, key)
		if err == nil {
			if err := w.checkDecision(d, gen, epoch, parent); err != nil {
				return nil, err
			}
			w.decidedAt = start
			return &Epoch{w: w, Decision: d}, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		waited := w.cfg.Now().Sub(start)
		if waited >= w.takeOver() {
			if w.cfg.Worker != 0 {
				w.cfg.Log.Warn("worker 0 has not decided the epoch: deciding it", "generation", gen, "epoch", epoch, "waited", waited.Round(time.Millisecond))
			}
			ep, err := w.propose(ctx, key, gen, epoch, parent, propose)
			if err == nil {
				w.decidedAt = start
			}
			return ep, err
		}
		if idle, err := w.idleSince(ctx, gen, epoch, idleSince); err != nil || idle {
			if err == nil {
				err = fmt.Errorf("gen %d epoch %d: %w", gen, epoch, ErrIdle)
			}
			return nil, err
		}
		if err := sleep(ctx, w.pollDelay(waited)); err != nil {
			return nil, err
		}
	}
}

// idleSince reports whether an idle note of the epoch was written at or
// after since (by the proposer's clock: a skewed clock only makes a worker
// wait for its take-over and look itself).
func (w *Worker) idleSince(ctx context.Context, gen, epoch int64, since time.Time) (bool, error) {
	key := manifest.IdlePath(gen, epoch)
	data, _, err := w.cfg.Store.Get(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read idle note: %w", err)
	}
	n, err := manifest.DecodeIdle(key, data)
	if err != nil {
		return false, fmt.Errorf("read idle note: %w", err)
	}
	return !n.CheckedAt.Before(since) || w.cfg.Run != "" && n.Run == w.cfg.Run, nil
}

func (w *Worker) propose(ctx context.Context, key string, gen, epoch int64, parent *manifest.Ref, propose Proposer) (*Epoch, error) {
	if err := w.fence(ctx, gen, epoch, ""); err != nil {
		return nil, err
	}
	d, err := propose(ctx)
	if err != nil {
		return nil, fmt.Errorf("gen %d epoch %d: decide: %w", gen, epoch, err)
	}
	if d == nil {
		note, err := manifest.EncodeIdle(&manifest.Idle{FormatVersion: manifest.FormatVersion, Pipeline: w.cfg.Pipeline,
			Generation: gen, Epoch: epoch, Proposer: w.cfg.Worker, CheckedAt: w.cfg.Now().UTC(), Run: w.cfg.Run})
		if err != nil {
			return nil, err
		}
		// A plain write: the latest look wins; nothing references it.
		if _, err := w.cfg.Store.Put(ctx, manifest.IdlePath(gen, epoch), note, store.PutOptions{}); err != nil {
			return nil, fmt.Errorf("gen %d epoch %d: write idle note: %w", gen, epoch, err)
		}
		return nil, fmt.Errorf("gen %d epoch %d: %w", gen, epoch, ErrIdle)
	}
	t := w.cfg.Topology
	d.FormatVersion = manifest.FormatVersion
	d.Pipeline, d.Generation, d.Epoch, d.Parent = w.cfg.Pipeline, gen, epoch, parent
	d.Workers, d.Parallelism, d.MaxParallelism, d.Proposer = t.Workers, t.Parallelism, t.MaxParallelism, w.cfg.Worker
	if d.Attempt == "" {
		if d.Attempt, err = newAttempt(); err != nil {
			return nil, err
		}
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = w.cfg.Now().UTC()
	}
	data, err := manifest.EncodeDecision(d)
	if err != nil {
		return nil, fmt.Errorf("gen %d epoch %d: %w", gen, epoch, err)
	}
	_, err = w.cfg.Store.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
	if err == nil {
		w.cfg.Log.Debug("decided epoch", "generation", gen, "epoch", epoch, "attempt", d.Attempt, "files", len(d.Files))
		return &Epoch{w: w, Decision: d, Won: true}, nil
	}
	if !errors.Is(err, store.ErrPrecondition) {
		return nil, fmt.Errorf("gen %d epoch %d: create decision: %w", gen, epoch, err)
	}
	// Lost the race, or our earlier try landed (an unknown outcome also
	// matches ErrPrecondition): the stored one is the decision.
	got, err := w.readDecision(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := w.checkDecision(got, gen, epoch, parent); err != nil {
		return nil, err
	}
	return &Epoch{w: w, Decision: got, Won: got.Attempt == d.Attempt}, nil
}

func (w *Worker) readDecision(ctx context.Context, key string) (*manifest.Decision, error) {
	data, _, err := w.cfg.Store.Get(ctx, key)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("read decision: %w", err)
	}
	d, err := manifest.DecodeDecision(key, data)
	if err != nil {
		return nil, fmt.Errorf("read decision: %w", err)
	}
	return d, nil
}

func (w *Worker) checkDecision(d *manifest.Decision, gen, epoch int64, parent *manifest.Ref) error {
	t := w.cfg.Topology
	dt := Topology{d.Workers, d.Parallelism, d.MaxParallelism}
	switch {
	case d.Pipeline != w.cfg.Pipeline || d.Generation != gen || d.Epoch != epoch:
		return fmt.Errorf("%w: decision %s names pipeline %q gen %d epoch %d", ErrCorrupt, manifest.DecisionPath(gen, epoch), d.Pipeline, d.Generation, d.Epoch)
	case dt != t:
		return fmt.Errorf("gen %d epoch %d: %w: decided for %s, this worker runs %s (every worker of a generation must run with the same --workers and state.parallelism)",
			gen, epoch, ErrTopology, dt, t)
	case !sameRef(d.Parent, parent):
		return fmt.Errorf("gen %d epoch %d: %w: the epoch was decided on parent %s, this worker continues %s",
			gen, epoch, ErrFenced, refString(d.Parent), refString(parent))
	}
	return nil
}

func sameRef(a, b *manifest.Ref) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func refString(r *manifest.Ref) string {
	if r == nil {
		return "none"
	}
	return r.String()
}

// Fence fails with ErrFenced when the pipeline has moved on from the
// epoch: _latest.json names this epoch with another attempt or a later
// epoch, or a newer generation's document exists (a Job of another
// topology took over). It reads two small objects. The commit's
// create-if-absent and the engine's pointer compare-and-swap are what make
// a stale writer's commit impossible; Fence makes it stop before it
// writes.
func (e *Epoch) Fence(ctx context.Context) error {
	return e.w.fence(ctx, e.Decision.Generation, e.Decision.Epoch, e.Decision.Attempt)
}

// fence is Fence for (gen, epoch); a pointer naming attempt at that epoch
// is this epoch committed, not a fence.
func (w *Worker) fence(ctx context.Context, gen, epoch int64, attempt string) error {
	data, _, err := w.cfg.Store.Get(ctx, manifest.LatestPath)
	switch {
	case err == nil:
		l, err := manifest.DecodeLatest(manifest.LatestPath, data)
		if err != nil {
			return fmt.Errorf("fence: %w", err)
		}
		if ours := l.Generation == gen && l.Epoch == epoch && l.Attempt == attempt && attempt != ""; l.Epoch >= epoch && !ours {
			return fmt.Errorf("%w: %s names epoch %d (gen %d, attempt %s): this worker's gen %d epoch %d is stale",
				ErrFenced, manifest.LatestPath, l.Epoch, l.Generation, l.Attempt, gen, epoch)
		}
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("fence: %w", err)
	}
	return w.staleGeneration(ctx, gen)
}

// staleGeneration fences a worker of generation gen once generation gen+1
// exists.
func (w *Worker) staleGeneration(ctx context.Context, gen int64) error {
	_, _, err := w.cfg.Store.Get(ctx, manifest.GenerationPath(gen+1))
	switch {
	case err == nil:
		return fmt.Errorf("%w: generation %d exists: this worker's generation %d is stale", ErrFenced, gen+1, gen)
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("fence: %w", err)
	}
	return nil
}

// newAttempt returns a random (version 4) UUID in canonical form.
func newAttempt() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("attempt id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// await polls probe for every worker of pending until all report true.
// Each pass probes the pending workers, at most Fanout at once; then, if
// some are still missing, done (if set) is asked whether the wait is moot
// (ErrCommitted), and after Timeout without a new arrival the wait fails
// with a *MissingError naming the missing workers.
func (w *Worker) await(ctx context.Context, barrier string, gen, epoch int64, pending []int,
	probe func(ctx context.Context, peer int) (bool, error), done func(ctx context.Context) (bool, error)) error {
	start := w.cfg.Now()
	last, checked := start, start
	for {
		found := make([]bool, len(pending))
		errs := make([]error, len(pending))
		sem := make(chan struct{}, w.cfg.Fanout)
		var wg sync.WaitGroup
		for i, p := range pending {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				found[i], errs[i] = probe(ctx, p)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		rest := pending[:0:0]
		for i, p := range pending {
			if !found[i] {
				rest = append(rest, p)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		if len(rest) < len(pending) {
			last = w.cfg.Now()
		}
		pending = rest
		if done != nil {
			ok, err := done(ctx)
			if err != nil {
				return err
			}
			if ok {
				return fmt.Errorf("gen %d epoch %d: %s: %w", gen, epoch, barrier, ErrCommitted)
			}
		}
		// A newer generation (a rescale, or another Job of the pipeline)
		// means the missing peers may never come: once per PollMax of
		// waiting, look for it (one GET; a barrier shorter than PollMax
		// pays nothing), so a stale worker stops at once rather than at
		// Timeout.
		if now := w.cfg.Now(); now.Sub(checked) >= w.cfg.PollMax {
			checked = now
			if err := w.staleGeneration(ctx, gen); err != nil {
				return fmt.Errorf("gen %d epoch %d: %s: %w", gen, epoch, barrier, err)
			}
		}
		if waited := w.cfg.Now().Sub(last); waited >= w.cfg.Timeout {
			// Peers that never come because a newer generation replaced
			// them (a rescale) make this worker stale, not short of peers.
			if err := w.staleGeneration(ctx, gen); err != nil {
				return err
			}
			return &MissingError{Barrier: barrier, Generation: gen, Epoch: epoch, Workers: slices.Clone(pending), Waited: waited}
		}
		if err := sleep(ctx, w.pollDelay(w.cfg.Now().Sub(start))); err != nil {
			return err
		}
	}
}

// pollDelay is the pause before the next poll of a wait that has lasted
// waited: a quarter of it, within [PollMin, PollMax]. A peer that arrives
// is then seen at most a quarter of the wait late (doubling the pause, as
// before, overshot by up to the whole wait: a barrier of 60 ms cost 75), for
// about three times as many polls in the first second and the same number,
// one per PollMax, after that.
func (w *Worker) pollDelay(waited time.Duration) time.Duration {
	return min(max(waited/4, w.cfg.PollMin), w.cfg.PollMax)
}
