package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// WritePart writes this worker's part record of the epoch: the identity
// fields (pipeline, generation, epoch, attempt, worker, workers,
// parallelism, subtask range) are set from the decision and the topology.
// It is created with create-if-absent; if a part of this worker exists
// already (an earlier incarnation wrote it) that one stands and reused is
// true: a part names only files under the epoch's attempt, written
// create-if-absent by the same deterministic work, so either record
// describes the same files.
func (e *Epoch) WritePart(ctx context.Context, p *manifest.WorkerPart) (reused bool, err error) {
	d, self := e.Decision, e.w.cfg.Worker
	p.FormatVersion = manifest.FormatVersion
	p.Pipeline, p.Generation, p.Epoch, p.Attempt = d.Pipeline, d.Generation, d.Epoch, d.Attempt
	p.Worker, p.Workers, p.Parallelism = self, d.Workers, d.Parallelism
	p.SubtaskLo, p.SubtaskHi = e.w.cfg.Topology.Subtasks(self)
	if p.Operators == nil {
		p.Operators = []manifest.OperatorState{}
	}
	if p.Outputs == nil {
		p.Outputs = []manifest.FileRef{}
	}
	if p.SideOutputs == nil {
		p.SideOutputs = []manifest.FileRef{}
	}
	data, err := manifest.EncodeWorkerPart(p)
	if err != nil {
		return false, fmt.Errorf("gen %d epoch %d: %w", d.Generation, d.Epoch, err)
	}
	key := manifest.PartPath(d.Generation, d.Epoch, d.Attempt, self)
	_, err = e.w.cfg.Store.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, store.ErrPrecondition) {
		return false, fmt.Errorf("gen %d epoch %d: write part %s: %w", d.Generation, d.Epoch, key, err)
	}
	if _, err := e.readPart(ctx, self); err != nil {
		return false, err
	}
	return true, nil
}

// Part returns this worker's part record if it exists (nil if not): a
// worker that restarts after writing it skips straight to the commit.
func (e *Epoch) Part(ctx context.Context) (*manifest.WorkerPart, error) {
	p, err := e.readPart(ctx, e.w.cfg.Worker)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return p, err
}

func (e *Epoch) readPart(ctx context.Context, worker int) (*manifest.WorkerPart, error) {
	d := e.Decision
	key := manifest.PartPath(d.Generation, d.Epoch, d.Attempt, worker)
	data, _, err := e.w.cfg.Store.Get(ctx, key)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("read part: %w", err)
	}
	p, err := manifest.DecodeWorkerPart(key, data)
	if err != nil {
		return nil, fmt.Errorf("read part: %w", err)
	}
	lo, hi := Topology{d.Workers, d.Parallelism, d.MaxParallelism}.Subtasks(worker)
	if p.Pipeline != d.Pipeline || p.Generation != d.Generation || p.Epoch != d.Epoch || p.Attempt != d.Attempt ||
		p.Worker != worker || p.Workers != d.Workers || p.Parallelism != d.Parallelism || p.SubtaskLo != lo || p.SubtaskHi != hi {
		return nil, fmt.Errorf("%w: part %s is worker %d of %d (subtasks %d..%d) of gen %d epoch %d attempt %s",
			ErrCorrupt, key, p.Worker, p.Workers, p.SubtaskLo, p.SubtaskHi-1, p.Generation, p.Epoch, p.Attempt)
	}
	return p, nil
}

// Parts waits until the part record of every worker exists and returns
// them in worker order (the commit barrier). ErrCommitted when the epoch
// was committed meanwhile; a *MissingError after Config.Timeout without a
// new part.
func (e *Epoch) Parts(ctx context.Context) ([]*manifest.WorkerPart, error) {
	d := e.Decision
	parts := make([]*manifest.WorkerPart, d.Workers)
	probe := func(ctx context.Context, w int) (bool, error) {
		p, err := e.readPart(ctx, w)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		parts[w] = p
		return true, nil
	}
	all := make([]int, d.Workers)
	for i := range all {
		all[i] = i
	}
	if err := e.w.await(ctx, "parts", d.Generation, d.Epoch, all, probe, e.Committed); err != nil {
		return nil, err
	}
	return parts, nil
}

// Builder builds the epoch's manifest bytes from the decision and the parts
// of all workers (in worker order). It must be a function of its arguments
// only (and of committed state they name, such as the parent manifest):
// created_at from the decision, counters and stats summed from the parts,
// never the local clock or anything a worker holds in memory. Then every
// worker that sees all parts builds the same bytes. MergeParts does the
// merging; the engine adds the parent's cumulative counters and the source
// offsets the decision implies.
type Builder func(d *manifest.Decision, parts []*manifest.WorkerPart) ([]byte, error)

// Outcome says how the epoch's manifest came to exist.
type Outcome int

const (
	// Created: this worker created the manifest.
	Created Outcome = iota + 1
	// Found: another worker (or an earlier incarnation of this one) had
	// created the same manifest.
	Found
)

// Commit waits for the epoch's manifest to exist, creating it when it is
// this worker's turn: worker 0 gathers all parts (Parts), builds the
// manifest and creates it with create-if-absent; the others wait for it
// (one GET per poll) and do the same themselves after their take-over
// delay (TakeOver times their index: worker 1 first), so a dead worker 0
// delays a commit but never stops it. An existing manifest must be exactly the
// bytes this worker builds from the same parts (else ErrNotDeterministic,
// or ErrFenced when another attempt wrote it). It returns the manifest's
// bytes; the engine then moves _latest.json (compare-and-swap), which any
// worker may do: the pointer swap tolerates a manifest that exists.
func (e *Epoch) Commit(ctx context.Context, build Builder) ([]byte, Outcome, error) {
	d := e.Decision
	key := manifest.ManifestPath(d.Generation, d.Epoch)
	if e.w.cfg.Worker != 0 {
		data, ok, err := e.waitManifest(ctx)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			return data, Found, nil
		}
		e.w.cfg.Log.Warn("worker 0 has not committed the epoch: committing it", "generation", d.Generation, "epoch", d.Epoch)
	}
	parts, err := e.Parts(ctx)
	if errors.Is(err, ErrCommitted) {
		data, _, err := e.w.cfg.Store.Get(ctx, key)
		if err != nil {
			return nil, 0, fmt.Errorf("gen %d epoch %d: read manifest: %w", d.Generation, d.Epoch, err)
		}
		return data, Found, nil
	}
	if err != nil {
		return nil, 0, err
	}
	want, err := build(d, parts)
	if err != nil {
		return nil, 0, fmt.Errorf("gen %d epoch %d: build manifest: %w", d.Generation, d.Epoch, err)
	}
	if err := e.Fence(ctx); err != nil {
		return nil, 0, err
	}
	_, err = e.w.cfg.Store.Put(ctx, key, want, store.PutOptions{IfNotExist: true})
	if err == nil {
		return want, Created, nil
	}
	if !errors.Is(err, store.ErrPrecondition) {
		// Unknown outcome: the next Commit (or Recover) reads it back.
		return nil, 0, fmt.Errorf("gen %d epoch %d: create manifest: %w", d.Generation, d.Epoch, err)
	}
	got, _, err := e.w.cfg.Store.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("gen %d epoch %d: read manifest back: %w", d.Generation, d.Epoch, err)
	}
	if err := sameManifest(key, got, want, d.Attempt); err != nil {
		return nil, 0, err
	}
	return got, Found, nil
}

// sameManifest checks an existing manifest against the one built.
func sameManifest(key string, got, want []byte, attempt string) error {
	if bytes.Equal(got, want) {
		return nil
	}
	m, err := manifest.DecodeManifest(key, got)
	if err != nil {
		return fmt.Errorf("manifest %s exists but cannot be read: %w", key, err)
	}
	if m.Attempt != attempt {
		return fmt.Errorf("%w: %s was committed by attempt %s; this worker's attempt %s is abandoned", ErrFenced, key, m.Attempt, attempt)
	}
	return fmt.Errorf("%w: %s", ErrNotDeterministic, key)
}

// waitManifest polls for the manifest for up to the take-over delay (ok
// false when it is still absent then).
func (e *Epoch) waitManifest(ctx context.Context) ([]byte, bool, error) {
	d := e.Decision
	key := manifest.ManifestPath(d.Generation, d.Epoch)
	start := e.w.cfg.Now()
	for {
		data, _, err := e.w.cfg.Store.Get(ctx, key)
		if err == nil {
			return data, true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, false, fmt.Errorf("gen %d epoch %d: read manifest: %w", d.Generation, d.Epoch, err)
		}
		waited := e.w.cfg.Now().Sub(start)
		if waited >= e.w.takeOver() {
			return nil, false, nil
		}
		if err := sleep(ctx, e.w.pollDelay(waited)); err != nil {
			return nil, false, err
		}
	}
}

// Merged is the epoch's content merged from the parts, deterministically.
type Merged struct {
	// Counters: this epoch's counts, summed over the workers (add the
	// parent's for the manifest's cumulative counters).
	Counters manifest.Counters
	// Inputs: per input the greatest event time over the decision's
	// inputs and every part; LastActive the latest.
	Inputs map[string]manifest.InputState
	// Operators: per keyed stage (in the order of worker 0's part), the
	// state files and deltas of all workers in worker order, which is
	// subtask order (workers own ascending subtask ranges; each subtask's
	// deltas keep its worker's order), and the greatest EmittedThrough.
	Operators []manifest.OperatorState
	// Outputs and SideOutputs: every worker's, in worker order.
	Outputs     []manifest.FileRef
	SideOutputs []manifest.FileRef
	// Stats: summed; DurationMs is the slowest worker's.
	Stats *manifest.EpochStats
}

// MergeParts merges the parts of all workers (in worker order). Every part
// must list the same keyed stages in the same order.
func MergeParts(d *manifest.Decision, parts []*manifest.WorkerPart) (*Merged, error) {
	if len(parts) != d.Workers {
		return nil, fmt.Errorf("merge: %d parts for %d workers", len(parts), d.Workers)
	}
	m := &Merged{Inputs: maps.Clone(d.Inputs), Outputs: []manifest.FileRef{}, SideOutputs: []manifest.FileRef{}}
	if m.Inputs == nil {
		m.Inputs = map[string]manifest.InputState{}
	}
	var ids []string
	for _, op := range parts[0].Operators {
		ids = append(ids, op.ID)
		m.Operators = append(m.Operators, manifest.OperatorState{ID: op.ID, EmittedThrough: op.EmittedThrough, Files: []manifest.FileRef{}})
	}
	for i, p := range parts {
		if p.Worker != i {
			return nil, fmt.Errorf("merge: part %d is worker %d's", i, p.Worker)
		}
		var pids []string
		for _, op := range p.Operators {
			pids = append(pids, op.ID)
		}
		if !slices.Equal(ids, pids) {
			return nil, fmt.Errorf("merge: worker %d has keyed stages %q, worker 0 %q", i, pids, ids)
		}
		c := &m.Counters
		pc := p.Counters
		c.FilesIn += pc.FilesIn
		c.RowsIn += pc.RowsIn
		c.RowsOut += pc.RowsOut
		c.RowsLate += pc.RowsLate
		c.RowsRejected += pc.RowsRejected
		c.RowsFiltered += pc.RowsFiltered
		c.Windows += pc.Windows
		c.FilesRejectedWhole += pc.FilesRejectedWhole
		c.FilesAfterDrain += pc.FilesAfterDrain
		c.FilesChanged += pc.FilesChanged
		for name, in := range p.Inputs {
			cur, ok := m.Inputs[name]
			if !ok {
				m.Inputs[name] = in
				continue
			}
			cur.MaxEventTime = max(cur.MaxEventTime, in.MaxEventTime)
			if in.LastActive.After(cur.LastActive) {
				cur.LastActive = in.LastActive
			}
			m.Inputs[name] = cur
		}
		for j, op := range p.Operators {
			mo := &m.Operators[j]
			mo.EmittedThrough = max(mo.EmittedThrough, op.EmittedThrough)
			mo.Files = append(mo.Files, op.Files...)
			mo.Deltas = append(mo.Deltas, op.Deltas...)
		}
		m.Outputs = append(m.Outputs, p.Outputs...)
		m.SideOutputs = append(m.SideOutputs, p.SideOutputs...)
		if s := p.Stats; s != nil {
			if m.Stats == nil {
				m.Stats = &manifest.EpochStats{}
			}
			t := m.Stats
			t.DurationMs = max(t.DurationMs, s.DurationMs)
			t.FilesIn += s.FilesIn
			t.BytesIn += s.BytesIn
			t.RowsIn += s.RowsIn
			t.BytesWritten += s.BytesWritten
			t.Gets += s.Gets
			t.Puts += s.Puts
			t.Lists += s.Lists
			t.Deletes += s.Deletes
			t.Retries += s.Retries
		}
	}
	return m, nil
}
