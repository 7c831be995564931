package epoch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// StartGeneration makes want the topology of the next generation after head
// and returns it with its number filled in. It uses the first generation
// number above head's whose _generation.json either does not exist (it is
// created, create-if-absent) or already records the same topology and parent
// (an earlier run of the same plan that crashed before its first commit; it
// is adopted). A generation is never written into by a run of another
// topology (invariant 1).
func (c *Committer) StartGeneration(ctx context.Context, head *Head, want manifest.Generation) (*manifest.Generation, error) {
	var base int64
	if head != nil && head.Manifest != nil {
		base = head.Manifest.Generation
	}
	want.FormatVersion = manifest.FormatVersion
	want.Pipeline = c.Pipeline
	if want.Parent == nil {
		want.Parent = head.Ref()
	} else {
		base = max(base, want.Parent.Generation) // restored from elsewhere (a savepoint, a rollback)
	}
	if want.Attempt == "" {
		want.Attempt = c.attemptID()
	}
	if want.CreatedAt.IsZero() {
		want.CreatedAt = c.now()
	}
	unknown := 0
	for gen := base + 1; ; gen++ {
		want.Generation = gen
		data, err := manifest.EncodeGeneration(&want)
		if err != nil {
			return nil, err
		}
		key := manifest.GenerationPath(gen)
		_, err = c.Store.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
		if err == nil {
			c.Log.Debug("created generation", "generation", gen, "parallelism", want.Parallelism, "parent", want.Parent)
			g := want
			return &g, nil
		}
		if !errors.Is(err, store.ErrPrecondition) && !errors.Is(err, store.ErrTransient) {
			return nil, fmt.Errorf("create %s: %w", key, err)
		}
		// Exists, or unknown: read it back.
		got, rerr := c.ReadGeneration(ctx, gen)
		if rerr != nil {
			if errors.Is(rerr, store.ErrNotFound) {
				if unknown++; unknown >= c.resolveTries() {
					return nil, fmt.Errorf("%w: create %s: %w", ErrCommitUnknown, key, err)
				}
				gen-- // did not land; try the same number again
				continue
			}
			return nil, rerr
		}
		if got.Attempt == want.Attempt || sameTopology(got, &want) {
			c.Log.Info("adopting generation", "generation", gen, "parallelism", got.Parallelism)
			return got, nil
		}
		c.Log.Info("generation number taken by another topology; trying the next", "generation", gen)
	}
}

func sameTopology(a, b *manifest.Generation) bool {
	return sameRef(a.Parent, b.Parent) && a.Parallelism == b.Parallelism && max(a.Workers, 1) == max(b.Workers, 1) &&
		a.MaxParallelism == b.MaxParallelism && a.PlanHash == b.PlanHash && a.Identity.SameExceptID(b.Identity) &&
		reflect.DeepEqual(a.Plan, b.Plan)
}

// Attempt is one try at committing one epoch. Its methods are safe for
// concurrent use (state of several subtasks is written in parallel).
type Attempt struct {
	c          *Committer
	ID         string
	Generation int64
	Epoch      int64
	head       *Head
}

// Begin starts an attempt at the epoch after head in generation gen.
func (c *Committer) Begin(head *Head, gen int64) *Attempt {
	return c.BeginAt(head, gen, head.Epoch()+1)
}

// BeginAt starts an attempt at epoch (at least head's next) in generation
// gen: a pipeline restored from a savepoint into an empty state continues
// the savepoint's epoch numbers.
func (c *Committer) BeginAt(head *Head, gen, epoch int64) *Attempt {
	return &Attempt{c: c, ID: c.attemptID(), Generation: gen, Epoch: max(epoch, head.Epoch()+1), head: head}
}

// Resume returns the attempt id at epoch after head in generation gen, an
// attempt decided elsewhere (the decision of a pipeline run by several
// workers, package cluster): every worker writes under the same id, and
// its Commit accepts the manifest any of them created.
func (c *Committer) Resume(head *Head, gen, epoch int64, id string) *Attempt {
	return &Attempt{c: c, ID: id, Generation: gen, Epoch: epoch, head: head}
}

func (a *Attempt) put(ctx context.Context, s store.Store, key string, data []byte) error {
	// An attempt-tagged key is written by this attempt only (invariant 2).
	// Create-if-absent makes that hold even if two attempts' short tags in
	// output names collided; a retry that finds our own bytes is fine.
	_, err := s.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
	if errors.Is(err, store.ErrPrecondition) {
		got, _, gerr := s.Get(ctx, key)
		switch {
		case gerr == nil && bytes.Equal(got, data):
			return nil // our own earlier try landed
		case gerr == nil:
			return fmt.Errorf("epoch %d attempt %s: write %s: another writer's object is already there: %w", a.Epoch, a.ID, key, err)
		default:
			// The object exists (or the write's outcome is unknown) and
			// reading it back failed: we cannot tell whose it is.
			return fmt.Errorf("epoch %d attempt %s: write %s: create-if-absent failed (%v) and reading the object back to compare failed: %w",
				a.Epoch, a.ID, key, err, gerr)
		}
	}
	if err != nil {
		return fmt.Errorf("epoch %d attempt %s: write %s: %w", a.Epoch, a.ID, key, err)
	}
	return nil
}

// WriteState writes one subtask's state file of operator opID.
func (a *Attempt) WriteState(ctx context.Context, opID string, subtask, kgLo, kgHi int, data []byte, rows int64) (manifest.FileRef, error) {
	key := manifest.StatePath(a.Generation, a.Epoch, a.ID, opID, subtask)
	if err := a.put(ctx, a.c.Store, key, data); err != nil {
		return manifest.FileRef{}, err
	}
	ref := manifest.NewFileRef(key, data)
	ref.Rows, ref.Subtask, ref.KeyGroupLo, ref.KeyGroupHi = rows, subtask, kgLo, kgHi
	return ref, nil
}

// WriteDelta writes one subtask's state delta file of operator opID (kind
// manifest.DeltaUpserts, manifest.DeltaTombstones or manifest.DeltaMerges).
func (a *Attempt) WriteDelta(ctx context.Context, opID string, subtask, kgLo, kgHi int, kind string, data []byte, rows int64) (manifest.FileRef, error) {
	key := manifest.DeltaPath(a.Generation, a.Epoch, a.ID, opID, subtask, kind)
	if err := a.put(ctx, a.c.Store, key, data); err != nil {
		return manifest.FileRef{}, err
	}
	ref := manifest.NewFileRef(key, data)
	ref.Rows, ref.Subtask, ref.KeyGroupLo, ref.KeyGroupHi, ref.Kind = rows, subtask, kgLo, kgHi, kind
	return ref, nil
}

// WriteSource writes a source-offset file (e.g. a seen-file segment).
func (a *Attempt) WriteSource(ctx context.Context, name string, data []byte, rows int64) (manifest.FileRef, error) {
	key := manifest.SourcePath(a.Generation, a.Epoch, a.ID, name)
	if err := a.put(ctx, a.c.Store, key, data); err != nil {
		return manifest.FileRef{}, err
	}
	ref := manifest.NewFileRef(key, data)
	ref.Rows = rows
	return ref, nil
}

// WriteSide writes one side-output file (late or rejected rows) into s, a
// store of its own, under dir; the reference's path is relative to s.
func (a *Attempt) WriteSide(ctx context.Context, s store.Store, dir string, subtask int, ext string, data []byte, rows int64) (manifest.FileRef, error) {
	key := manifest.OutputName(a.Generation, a.Epoch, subtask, a.ID, ext)
	if dir != "" {
		key = dir + "/" + key
	}
	if err := a.put(ctx, s, key, data); err != nil {
		return manifest.FileRef{}, err
	}
	ref := manifest.NewFileRef(key, data)
	ref.Rows, ref.Subtask = rows, subtask
	return ref, nil
}

// WriteOutput writes one sink file under dir (relative to the sink root,
// "" for the root) and returns its sink-relative reference.
func (a *Attempt) WriteOutput(ctx context.Context, dir string, subtask int, ext string, data []byte, rows int64) (manifest.FileRef, error) {
	if a.c.Sink == nil {
		return manifest.FileRef{}, errors.New("write output: no sink store configured")
	}
	key := manifest.OutputName(a.Generation, a.Epoch, subtask, a.ID, ext)
	if dir != "" {
		key = dir + "/" + key
	}
	if err := a.put(ctx, a.c.Sink, key, data); err != nil {
		return manifest.FileRef{}, err
	}
	ref := manifest.NewFileRef(key, data)
	ref.Rows, ref.Subtask = rows, subtask
	return ref, nil
}

// Commit makes m the manifest of this attempt's epoch. It fills in the
// identity fields (pipeline, generation, epoch, attempt, parent, time),
// creates the manifest (create-if-absent; the commit point), then moves
// _latest.json to it. It returns the new head.
//
// Errors: ErrFenced when another attempt committed this epoch or moved the
// pipeline past it; ErrSuperseded when this epoch is committed but another
// writer has already committed epochs on top of it (the caller's in-memory
// state is stale); ErrCommitUnknown when the outcome stays unknown after
// reading back (do not delete anything: the next Recover decides).
func (a *Attempt) Commit(ctx context.Context, m *manifest.Manifest) (*Head, error) {
	c := a.c
	m.FormatVersion = manifest.FormatVersion
	m.Pipeline = c.Pipeline
	m.Generation, m.Epoch, m.Attempt = a.Generation, a.Epoch, a.ID
	m.Parent = a.head.Ref()
	if m.CreatedAt.IsZero() {
		m.CreatedAt = c.now()
	}
	data, err := manifest.EncodeManifest(m)
	if err != nil {
		return nil, fmt.Errorf("epoch %d: encode manifest: %w", a.Epoch, err)
	}
	key := manifest.ManifestPath(a.Generation, a.Epoch)
	if err := a.createManifest(ctx, key, data); err != nil {
		return nil, err
	}
	c.remember(key, m)
	// Committed. Move the pointer; a lost swap is fine if the chain the
	// pointer now names contains our manifest.
	etag := a.head.ETag
	for try := 0; ; try++ {
		ok, newTag, err := c.swapLatest(ctx, etag, m, a.ID)
		if err != nil {
			return nil, fmt.Errorf("epoch %d committed (%s) but %s was not moved: %w", a.Epoch, key, manifest.LatestPath, err)
		}
		if ok {
			gen := a.head.Generation
			if gen == nil || gen.Generation != a.Generation {
				if gen, err = c.ReadGeneration(ctx, a.Generation); err != nil {
					return nil, err
				}
			}
			latest := &manifest.Latest{FormatVersion: manifest.FormatVersion, Generation: m.Generation, Epoch: m.Epoch, Manifest: key, Attempt: a.ID}
			return &Head{Latest: latest, ETag: newTag, Manifest: m, Generation: gen}, nil
		}
		latest, curTag, err := c.getLatest(ctx)
		if err != nil {
			return nil, fmt.Errorf("epoch %d: reread %s after a lost swap: %w", a.Epoch, manifest.LatestPath, err)
		}
		onChain, err := a.onChain(ctx, latest)
		if err != nil {
			return nil, err
		}
		switch {
		case onChain:
			// Another process rolled the pointer forward over our manifest.
			head, err := c.Recover(ctx)
			if err != nil {
				return nil, err
			}
			if head.Epoch() > a.Epoch {
				return head, fmt.Errorf("%w: epoch %d (attempt %s) is committed, but another writer has since committed up to epoch %d",
					ErrSuperseded, a.Epoch, a.ID, head.Epoch())
			}
			return head, nil
		case latest != nil && latest.Epoch >= a.Epoch:
			return nil, fmt.Errorf("%w: another writer committed epoch %d (%s, attempt %s); this writer's epoch %d (attempt %s) is abandoned",
				ErrFenced, latest.Epoch, latest.Manifest, latest.Attempt, a.Epoch, a.ID)
		case try >= c.resolveTries():
			return nil, fmt.Errorf("%w: epoch %d committed (%s) but %s keeps changing", ErrCommitUnknown, a.Epoch, key, manifest.LatestPath)
		}
		// The pointer is still behind us (it moved, but not past): swap again.
		etag = curTag
	}
}

// createManifest creates the commit point and resolves an unknown outcome by
// reading the manifest back.
func (a *Attempt) createManifest(ctx context.Context, key string, data []byte) error {
	var lastErr error
	for try := 0; try < a.c.resolveTries(); try++ {
		_, err := a.c.Store.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: create %s: %w", ErrCommitUnknown, key, err)
		}
		// Lost race or unknown outcome: read back and compare attempts.
		got, _, rerr := a.c.Store.Get(ctx, key)
		if rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
			lastErr = errors.Join(err, rerr)
			continue
		}
		if rerr == nil {
			m, derr := manifest.DecodeManifest(key, got)
			if derr != nil {
				return fmt.Errorf("epoch %d: manifest %s exists but cannot be read: %w", a.Epoch, key, derr)
			}
			if m.Attempt == a.ID {
				return nil // our earlier try landed
			}
			return fmt.Errorf("%w: another writer committed epoch %d (%s, attempt %s); this writer's attempt %s is abandoned",
				ErrFenced, a.Epoch, key, m.Attempt, a.ID)
		}
		lastErr = err // absent: our write did not land; try again
	}
	return fmt.Errorf("%w: create %s: %w", ErrCommitUnknown, key, lastErr)
}

// onChain reports whether the chain ending at latest contains this attempt's
// manifest.
func (a *Attempt) onChain(ctx context.Context, latest *manifest.Latest) (bool, error) {
	if latest == nil || latest.Epoch < a.Epoch {
		return false, nil
	}
	gen, ep := latest.Generation, latest.Epoch
	for ep > a.Epoch {
		m, err := a.c.ReadManifest(ctx, gen, ep)
		if errors.Is(err, store.ErrNotFound) {
			// Retention removed part of the chain: it is far ahead of us.
			return false, fmt.Errorf("%w: epoch %d: the chain to epoch %d can no longer be walked: %w", ErrCommitUnknown, a.Epoch, latest.Epoch, err)
		}
		if err != nil {
			return false, err
		}
		if m.Parent == nil {
			return false, nil
		}
		gen, ep = m.Parent.Generation, m.Parent.Epoch
	}
	if ep != a.Epoch || gen != a.Generation {
		return false, nil
	}
	m, err := a.c.ReadManifest(ctx, gen, ep)
	if err != nil {
		return false, err
	}
	return m.Attempt == a.ID, nil
}
