package epoch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// ReadFile reads a state or source file a manifest references and verifies
// its size and checksum (invariant 5). A mismatch is ErrCorrupt naming the
// file.
func (c *Committer) ReadFile(ctx context.Context, ref manifest.FileRef) ([]byte, error) {
	return readVerified(ctx, c.Store, ref)
}

// ReadOutput reads a sink file a manifest lists and verifies it.
func (c *Committer) ReadOutput(ctx context.Context, ref manifest.FileRef) ([]byte, error) {
	if c.Sink == nil {
		return nil, errors.New("read output: no sink store configured")
	}
	return readVerified(ctx, c.Sink, ref)
}

func readVerified(ctx context.Context, s store.Store, ref manifest.FileRef) ([]byte, error) {
	if strings.Contains(ref.Path, "://") {
		return nil, fmt.Errorf("read %s: absolute references are not supported by this release", ref.Path)
	}
	data, err := store.Read(ctx, s, ref.Path) // the checksum below, not an ETag, verifies it
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("read %s: referenced file is missing: %w", ref.Path, errors.Join(ErrCorrupt, err))
		}
		return nil, fmt.Errorf("read %s: %w", ref.Path, err)
	}
	if err := manifest.VerifyFile(ref, data); err != nil {
		return nil, err
	}
	return data, nil
}

// Chain returns up to n committed manifests of the head's lineage, newest
// first: from head through LineageParent (lineage.go), so the epochs a
// rollback or restore abandoned are not part of it.
func (c *Committer) Chain(ctx context.Context, head *Head, n int) ([]*manifest.Manifest, error) {
	if head == nil || head.Manifest == nil || n <= 0 {
		return nil, nil
	}
	out := []*manifest.Manifest{head.Manifest}
	for cur := head.Manifest; len(out) < n; {
		ref, err := c.LineageParent(ctx, cur)
		if err != nil {
			return nil, err
		}
		if ref == nil {
			break
		}
		m, err := c.ReadManifest(ctx, ref.Generation, ref.Epoch)
		if errors.Is(err, store.ErrNotFound) {
			break // older manifests were removed by retention
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
		cur = m
	}
	return out, nil
}

// GCOptions control Retain.
type GCOptions struct {
	// Keep is how many committed epochs (ending at the head) stay restorable.
	Keep int
	// SkipSink leaves the sink alone (listing a large sink every epoch is
	// wasteful; the engine cleans it at the start and end of a run).
	SkipSink bool
	// SinkOnly cleans only the sink: the state root was collected for this
	// head already (it saves the state listing).
	SinkOnly bool
	// Committed, when set, tells whether a sink-relative path at the sink
	// root or in a Hive partition directory below it (col=value/...) is a
	// committed output (the engine's output log, exact for every
	// epoch). Without it only outputs of retained epochs can be judged.
	Committed func(path string) bool
	// SidePrefixes are the sink's folders of side outputs ("_rejected/"):
	// they are not in the output log, so their files are judged by the
	// lineage's manifests.
	SidePrefixes []string
	// ChainOnly lists nothing: it deletes only what the head's lineage
	// names, the manifests of lineage epochs older than the Keep retained
	// ones (followed until one is missing) and the state files they
	// reference that no retained manifest references, and skips the sink.
	// What only a listing finds (files of attempts that never committed,
	// manifests of fenced writers, what an interrupted collection left) is
	// left for a later collection that lists. It deletes a subset of what
	// a listing collection of the same head deletes.
	ChainOnly bool
}

// GCStats counts what a collection removed.
type GCStats struct {
	Manifests, StateFiles, Outputs, Other int
}

// Retain keeps the last opts.Keep committed epochs restorable and deletes
// every other file of the pipeline's state that no retained manifest
// references: superseded epochs, orphans of attempts that never committed,
// and manifests of fenced writers (invariant 6). Nothing of an epoch newer
// than head is ever deleted, however old: a writer can stall for any time
// and then commit that epoch. Such files are judged once a later call's head
// has passed their epoch; unreferenced then, they can never be committed
// (the epoch's commit went to another attempt). A stale head is therefore
// safe too: everything it would delete is older than itself and
// unreferenced by its chain, and newer chains reference old files only
// through it. Generation documents and _latest.json are never deleted. When a sink is configured, sink files
// of retained epochs written by attempts that did not commit are removed too.
func (c *Committer) Retain(ctx context.Context, head *Head, opts GCOptions) (GCStats, error) {
	var st GCStats
	if opts.Keep < 1 {
		opts.Keep = 1
	}
	chain, err := c.Chain(ctx, head, opts.Keep)
	if err != nil {
		return st, fmt.Errorf("retention: %w", err)
	}
	headEpoch := head.Epoch()
	retained := map[string]bool{}
	referenced := map[string]bool{}
	for _, m := range chain {
		retained[manifest.ManifestPath(m.Generation, m.Epoch)] = true
		for _, f := range m.StateRefs() {
			referenced[f.Path] = true
		}
	}
	if opts.ChainOnly {
		if len(chain) < opts.Keep {
			return st, nil // the lineage ends within the retained epochs
		}
		return c.retainChain(ctx, head, chain, referenced)
	}
	var objs []store.ObjectInfo
	if !opts.SinkOnly {
		if objs, err = c.Store.List(ctx, "gen="); err != nil {
			return st, fmt.Errorf("retention: list: %w", err)
		}
	}
	var manifests, files []string
	for _, o := range objs {
		info, ok := manifest.ParseKey(o.Key)
		if !ok || info.Kind == manifest.KeyGeneration || info.Epoch == 0 {
			continue
		}
		if info.Epoch > headEpoch {
			// Possibly in flight, however old (a writer may stall for any
			// time and then commit). Judged once the head passes the epoch:
			// then an unreferenced file can never become committed.
			continue
		}
		if info.Epoch == headEpoch && manifest.IsWorkersKey(o.Key) {
			continue // the other workers may still be reading them
		}
		switch {
		case info.Kind == manifest.KeyManifest:
			if !retained[o.Key] {
				manifests = append(manifests, o.Key)
			}
		case !referenced[o.Key]:
			files = append(files, o.Key)
		}
	}
	// Manifests first: a crash in between leaves only unreferenced files,
	// which the next collection removes.
	for _, k := range manifests {
		c.forget(k)
		if err := c.Store.Delete(ctx, k); err != nil {
			return st, fmt.Errorf("retention: delete %s: %w", k, err)
		}
		st.Manifests++
	}
	for _, k := range files {
		if err := c.Store.Delete(ctx, k); err != nil {
			return st, fmt.Errorf("retention: delete %s: %w", k, err)
		}
		if info, _ := manifest.ParseKey(k); info.Kind == manifest.KeyState {
			st.StateFiles++
		} else {
			st.Other++
		}
	}
	if c.Sink != nil && !opts.SkipSink {
		n, err := c.cleanSink(ctx, chain, headEpoch, opts)
		st.Outputs = n
		if err != nil {
			return st, err
		}
	}
	if st != (GCStats{}) {
		c.Log.Info("retention", "kept_epochs", len(chain), "manifests_deleted", st.Manifests,
			"state_files_deleted", st.StateFiles, "outputs_deleted", st.Outputs, "other_deleted", st.Other)
	}
	return st, nil
}

// retainChain is Retain with ChainOnly: it walks the lineage past the
// retained chain and deletes the manifests it finds there (newest first),
// then the files they reference that the retained chain does not. Files
// are judged by the same rule as a listing collection's (ParseKey, epoch
// at most the head's), so savepoint copies and absolute references are
// never touched. Manifests go first, as in Retain: a crash in between
// leaves unreferenced files for a listing collection.
func (c *Committer) retainChain(ctx context.Context, head *Head, chain []*manifest.Manifest, referenced map[string]bool) (GCStats, error) {
	var st GCStats
	if len(chain) == 0 {
		return st, nil
	}
	headEpoch := head.Epoch()
	var beyond []*manifest.Manifest
	for cur := chain[len(chain)-1]; ; {
		ref, err := c.LineageParent(ctx, cur)
		if err != nil {
			return st, fmt.Errorf("retention: %w", err)
		}
		if ref == nil || ref.Epoch > headEpoch {
			break
		}
		m, err := c.ReadManifest(ctx, ref.Generation, ref.Epoch)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, ErrCorrupt) {
			break // collected before (or unreadable: a listing collection deletes it)
		}
		if err != nil {
			return st, fmt.Errorf("retention: %w", err)
		}
		beyond = append(beyond, m)
		cur = m
	}
	var files []string
	doomed := map[string]bool{}
	for _, m := range beyond {
		for _, f := range m.StateRefs() {
			info, ok := manifest.ParseKey(f.Path)
			if !ok || info.Kind == manifest.KeyGeneration || info.Kind == manifest.KeyManifest || info.Epoch == 0 ||
				info.Epoch > headEpoch || referenced[f.Path] || doomed[f.Path] {
				continue
			}
			doomed[f.Path] = true
			files = append(files, f.Path)
		}
	}
	for _, m := range beyond {
		k := manifest.ManifestPath(m.Generation, m.Epoch)
		c.forget(k)
		if err := c.Store.Delete(ctx, k); err != nil {
			return st, fmt.Errorf("retention: delete %s: %w", k, err)
		}
		st.Manifests++
	}
	for _, k := range files {
		if err := c.Store.Delete(ctx, k); err != nil {
			return st, fmt.Errorf("retention: delete %s: %w", k, err)
		}
		if info, _ := manifest.ParseKey(k); info.Kind == manifest.KeyState {
			st.StateFiles++
		} else {
			st.Other++
		}
	}
	if st != (GCStats{}) {
		c.Log.Info("retention", "kept_epochs", len(chain), "manifests_deleted", st.Manifests,
			"state_files_deleted", st.StateFiles, "other_deleted", st.Other, "listed", false)
	}
	return st, nil
}

// cleanSink deletes sink files that no committed attempt wrote, in every
// sink the store reaches (a pipeline's further sinks are keys under
// "@<name>/"): files of epochs up to the head that opts.Committed (exact for
// every epoch) does not list, and side outputs in the sink (opts.SidePrefixes,
// e.g. "_rejected/") that the lineage manifest of their epoch does not list
// or whose epoch a rollback or restore abandoned (lineageJudge). Files of
// epochs newer than the head are kept (an attempt may be in flight), and so
// is a file whose fate cannot be decided (a side output of an epoch older
// than the retained lineage): a committed output is never deleted.
func (c *Committer) cleanSink(ctx context.Context, chain []*manifest.Manifest, headEpoch int64, opts GCOptions) (int, error) {
	j, err := c.lineageJudge(ctx, chain)
	if err != nil {
		return 0, fmt.Errorf("sink cleanup: %w", err)
	}
	objs, err := c.Sink.List(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("sink cleanup: list: %w", err)
	}
	n := 0
	for _, o := range objs {
		info, ok := manifest.ParseOutputName(o.Key)
		if !ok || info.Epoch > headEpoch {
			continue // not floe's, or possibly in flight: judged once the head passes it
		}
		side := false
		for _, p := range opts.SidePrefixes {
			side = side || strings.HasPrefix(o.Key, p)
		}
		var orphan bool
		if opts.Committed != nil && !side {
			orphan = !opts.Committed(o.Key)
		} else {
			orphan = j.orphan(info)
		}
		if !orphan {
			continue
		}
		if err := c.Sink.Delete(ctx, o.Key); err != nil {
			return n, fmt.Errorf("sink cleanup: delete %s: %w", o.Key, err)
		}
		n++
	}
	return n, nil
}

// judge decides the fate of a file named by its epoch (side outputs, and
// outputs when no output log is at hand) from the head's retained lineage.
type judge struct {
	byEpoch map[int64]*manifest.Manifest
	// bound: every lineage epoch above it is in byEpoch, so an epoch in
	// (bound, head] missing from byEpoch was abandoned by a rollback or a
	// restore; epochs at or below it cannot be judged.
	bound int64
	// boundGen: no file of an epoch above bound has an older generation
	// (startAfter).
	boundGen int64
}

func (c *Committer) lineageJudge(ctx context.Context, chain []*manifest.Manifest) (judge, error) {
	j := judge{byEpoch: map[int64]*manifest.Manifest{}, bound: math.MaxInt64}
	for _, m := range chain {
		j.byEpoch[m.Epoch] = m
	}
	if len(chain) == 0 {
		return j, nil
	}
	oldest := chain[len(chain)-1]
	lp, err := c.LineageParent(ctx, oldest)
	if err != nil {
		return j, err
	}
	if lp != nil {
		j.bound, j.boundGen = lp.Epoch, lp.Generation
	} else {
		// The lineage starts here (the first epoch, or state restored from
		// a savepoint this state cannot trace): judge nothing older. A
		// writer of the generation before may still have raced for the
		// oldest epoch.
		j.bound, j.boundGen = oldest.Epoch-1, oldest.Generation-1
	}
	return j, nil
}

// orphan reports whether a file of info's generation, epoch and attempt can
// never be committed: its epoch's lineage manifest was written by another
// attempt, or its epoch was abandoned.
func (j judge) orphan(info manifest.OutputInfo) bool {
	if m := j.byEpoch[info.Epoch]; m != nil {
		return m.Generation != info.Generation || !strings.HasPrefix(m.Attempt, info.AttemptPrefix)
	}
	return info.Epoch > j.bound
}

// abandoned reports whether epoch e (at most the head) was abandoned by a
// rollback or restore: newer than the judged bound and not on the lineage.
func (j judge) abandoned(e int64) bool {
	return j.byEpoch[e] == nil && e > j.bound
}
