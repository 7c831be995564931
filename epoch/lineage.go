package epoch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// The lineage of the head.
//
// A manifest's parent link names the head it was committed on: that is what
// recovery rolls the pointer forward over (invariant 3). For the first
// manifest of a generation restored from an older epoch (a rollback, a
// savepoint of this pipeline) the parent link names the head the restore
// replaced, but the state, the seen set and the output log it continues are
// those of the restored epoch (the generation's parent). The epochs between
// the restored epoch and the replaced head were abandoned: their outputs are
// not in the output log any more and sink cleanup deletes them.
//
// The lineage follows the state instead: from each manifest to LineageParent.
// Everything that keeps, lists or restores epochs follows it (retention, side
// output sweeping, history, status, rollback, savepoints, state inspection,
// replay, verify); only the commit protocol follows parent links.

// LineageParent returns the epoch whose committed state m continues: m's
// parent, except for the first manifest of a generation restored from
// another epoch, whose lineage continues at the restored epoch. For a
// restore from a savepoint that is the savepoint's epoch only when the
// savepoint is one of this pipeline's named savepoints and a copy of this
// state's manifest of that epoch (checked by its recorded checksum); a
// savepoint from elsewhere (another state, a folder given by URL, a deleted
// savepoint) ends the lineage: nil. nil also for the pipeline's first epoch.
func (c *Committer) LineageParent(ctx context.Context, m *manifest.Manifest) (*manifest.Ref, error) {
	if m.Parent != nil && m.Parent.Generation == m.Generation {
		return m.Parent, nil
	}
	g, err := c.generationCached(ctx, m.Generation)
	if errors.Is(err, store.ErrNotFound) {
		return m.Parent, nil // no record to say otherwise (verify reports it)
	}
	if err != nil {
		return nil, err
	}
	rf := g.RestoredFrom
	if rf == nil || g.Parent == nil {
		return m.Parent, nil
	}
	if rf.Kind == manifest.RestoreSavepoint {
		c.mu.Lock()
		ok, known := c.traced[m.Generation]
		c.mu.Unlock()
		if !known {
			var err error
			if ok, err = c.savepointOfState(ctx, rf.Savepoint, *g.Parent); err != nil {
				return nil, err
			}
			c.mu.Lock()
			if c.traced == nil {
				c.traced = map[int64]bool{}
			}
			c.traced[m.Generation] = ok
			c.mu.Unlock()
		}
		if !ok {
			return nil, nil
		}
	}
	return g.Parent, nil
}

// savepointOfState reports whether the named savepoint (of this pipeline's
// savepoints/ folder) is a copy of this state's manifest at ref.
func (c *Committer) savepointOfState(ctx context.Context, name string, ref manifest.Ref) (bool, error) {
	if manifest.ValidateSavepointName(name) != nil {
		return false, nil // a URL: a folder elsewhere
	}
	key := manifest.SavepointDir(name) + manifest.SavepointFile
	data, _, err := c.Store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lineage: read %s: %w", key, err)
	}
	sp, err := manifest.DecodeSavepoint(key, data)
	if err != nil || sp.Generation != ref.Generation || sp.Epoch != ref.Epoch {
		return false, nil // not a savepoint this lineage can be traced through
	}
	mdata, _, err := c.Store.Get(ctx, ref.ManifestPath())
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lineage: read %s: %w", ref.ManifestPath(), err)
	}
	return manifest.Checksum(mdata) == sp.ManifestChecksum, nil
}

// generationCached reads a generation record once per Committer (a record
// is immutable once created).
func (c *Committer) generationCached(ctx context.Context, gen int64) (*manifest.Generation, error) {
	c.mu.Lock()
	g := c.generations[gen]
	c.mu.Unlock()
	if g != nil {
		return g, nil
	}
	g, err := c.ReadGeneration(ctx, gen)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.generations == nil {
		c.generations = map[int64]*manifest.Generation{}
	}
	c.generations[gen] = g
	c.mu.Unlock()
	return g, nil
}

// LineageAt returns the manifest of epoch n on the head's lineage and the
// lineage from the head down to it (newest first). An epoch that is not on
// it is an error saying why (NotOnLineage).
func (c *Committer) LineageAt(ctx context.Context, head *Head, n int64) (*manifest.Manifest, []*manifest.Manifest, error) {
	if head == nil || head.Manifest == nil {
		return nil, nil, fmt.Errorf("epoch %d: nothing is committed", n)
	}
	chain := []*manifest.Manifest{head.Manifest}
	for cur := head.Manifest; cur.Epoch > n; {
		ref, err := c.LineageParent(ctx, cur)
		if err != nil {
			return nil, nil, err
		}
		if ref == nil {
			break
		}
		m, err := c.ReadManifest(ctx, ref.Generation, ref.Epoch)
		if errors.Is(err, store.ErrNotFound) {
			break // older manifests were removed by retention
		}
		if err != nil {
			return nil, nil, err
		}
		chain = append(chain, m)
		cur = m
	}
	if last := chain[len(chain)-1]; last.Epoch == n {
		return last, chain, nil
	}
	full, err := c.Chain(ctx, head, int(^uint(0)>>1))
	if err != nil {
		return nil, nil, err
	}
	return nil, nil, c.NotOnLineage(ctx, head, full, n)
}

// NotOnLineage explains why epoch n is not in chain, the head's whole
// retained lineage (newest first): it was abandoned by a rollback or a
// restore, or it is not retained.
func (c *Committer) NotOnLineage(ctx context.Context, head *Head, chain []*manifest.Manifest, n int64) error {
	line := FormatLineage(chain)
	if n > head.Epoch() {
		return fmt.Errorf("epoch %d is newer than the head (epoch %d); the head's lineage is %s", n, head.Epoch(), line)
	}
	// Look for the restore that jumped over n: a manifest whose parent link
	// (the head it replaced) is at or past n while its lineage goes below.
	for i, m := range chain {
		if m.Parent == nil || m.Parent.Epoch < n {
			continue
		}
		lp, err := c.LineageParent(ctx, m)
		if err != nil {
			return err
		}
		if lp != nil && *lp == *m.Parent {
			continue
		}
		if lp != nil && lp.Epoch > n {
			continue
		}
		if lp == nil && i+1 < len(chain) {
			continue
		}
		how := "a restore"
		if g, err := c.generationCached(ctx, m.Generation); err == nil && g.RestoredFrom != nil {
			switch g.RestoredFrom.Kind {
			case manifest.RestoreRollback:
				how = "a rollback"
			case manifest.RestoreSavepoint:
				how = "a restore from savepoint " + g.RestoredFrom.Savepoint
			default:
				how = "a " + g.RestoredFrom.Kind
			}
		}
		to := "state from elsewhere"
		if lp != nil {
			to = "epoch " + strconv.FormatInt(lp.Epoch, 10)
		}
		return fmt.Errorf("epoch %d is not on the head's lineage %s; it was abandoned by %s (generation %d continued from %s instead of epoch %d)",
			n, line, how, m.Generation, to, m.Parent.Epoch)
	}
	lo := head.Epoch()
	if len(chain) > 0 {
		lo = chain[len(chain)-1].Epoch
	}
	return fmt.Errorf("epoch %d is not retained: retained epochs are %d..%d of the head's lineage %s (state.retain_epochs keeps the last epochs of the lineage)",
		n, lo, head.Epoch(), line)
}

// FormatLineage renders a lineage (newest first) oldest first for messages:
// "(1 → … → 5 → 9 → … → 12)", runs of four or more consecutive epochs
// shortened.
func FormatLineage(chain []*manifest.Manifest) string {
	var parts []string
	for i := len(chain) - 1; i >= 0; {
		j := i // chain[i..j] (downwards) is a run of consecutive epochs
		for j > 0 && chain[j-1].Epoch == chain[j].Epoch+1 {
			j--
		}
		if i-j >= 3 {
			parts = append(parts, strconv.FormatInt(chain[i].Epoch, 10), "…", strconv.FormatInt(chain[j].Epoch, 10))
		} else {
			for k := i; k >= j; k-- {
				parts = append(parts, strconv.FormatInt(chain[k].Epoch, 10))
			}
		}
		i = j - 1
	}
	return "(" + strings.Join(parts, " → ") + ")"
}

// Epochs returns the epoch numbers of a chain, newest first.
func Epochs(chain []*manifest.Manifest) []int64 {
	out := make([]int64, len(chain))
	for i, m := range chain {
		out[i] = m.Epoch
	}
	return out
}
