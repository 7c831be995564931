package epoch

import (
	"context"
	"fmt"
	"math"
	"path"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// SideDir is a place side outputs (late rows, rejected rows) are written:
// a store of its own or a prefix of the sink.
type SideDir struct {
	Name   string // for messages: "late", "rejected", "sink _rejected"
	Store  store.Store
	Prefix string // key prefix inside Store ("" or "dir/")
	// Flat: every side output is a direct child of Prefix (its key is
	// Prefix + OutputName), so a sweep lists only the names of epochs it
	// can judge (StartAfter), not every side output ever written.
	Flat bool
}

type sideFile struct {
	dir SideDir
	key string
}

// SideSweeper removes side-output files that no committed attempt wrote. It
// follows the same rule as retention (invariant 6): a file of an epoch the
// head has passed is judged against that epoch's committed manifest; a file
// of a newer epoch may belong to an attempt in flight and is only
// remembered, then judged when this run commits that epoch.
type SideSweeper struct {
	c    *Committer
	cand map[int64][]sideFile
}

// SweepSideOutputs runs at the start of a run (and at the end of one that
// committed a restore). Side-output files of the last keep epochs of the
// head's lineage that the committed attempt did not write, and those of
// epochs a rollback or restore abandoned (side outputs follow the lineage
// like outputs), are deleted now; files of epochs newer than the head are
// remembered for Settle.
func (c *Committer) SweepSideOutputs(ctx context.Context, head *Head, keep int, dirs []SideDir) (*SideSweeper, error) {
	sw := &SideSweeper{c: c, cand: map[int64][]sideFile{}}
	chain, err := c.Chain(ctx, head, keep)
	if err != nil {
		return nil, err
	}
	byEpoch := map[int64]map[string]bool{}
	for _, m := range chain {
		byEpoch[m.Epoch] = sideNames(m)
	}
	j, err := c.lineageJudge(ctx, chain)
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		after := ""
		if d.Flat {
			after = j.startAfter(head, d.Prefix)
		}
		objs, err := store.ListAfter(ctx, d.Store, d.Prefix, after)
		if err != nil {
			return nil, fmt.Errorf("%s: list: %w", d.Name, err)
		}
		for _, o := range objs {
			info, ok := manifest.ParseOutputName(o.Key)
			if !ok {
				continue
			}
			if info.Epoch > head.Epoch() {
				sw.cand[info.Epoch] = append(sw.cand[info.Epoch], sideFile{d, o.Key})
				continue
			}
			names, known := byEpoch[info.Epoch]
			if known && !names[path.Base(o.Key)] || j.abandoned(info.Epoch) {
				if err := d.Store.Delete(ctx, o.Key); err != nil {
					return nil, fmt.Errorf("%s: delete orphan %s: %w", d.Name, o.Key, err)
				}
			}
		}
	}
	return sw, nil
}

// startAfter returns the key a listing of flat side outputs under prefix
// may start after: the name of the last epoch this judge cannot decide
// (bound) in the generation of the lineage parent's manifest, or "" to
// list everything. Output names sort by generation, then epoch (both
// zero-padded), and no generation older than the one holding epoch bound
// can hold a newer epoch: a writer of generation g writes epochs up to the
// first one of generation g+1 (a later attempt at that number is fenced).
// So every file this sweep can judge (an epoch above bound, however old
// its writer) sorts after the key, and what it skips it would keep.
func (j judge) startAfter(head *Head, prefix string) string {
	if j.bound == math.MaxInt64 || j.bound < 1 || head.Generation == nil ||
		head.Epoch() >= 9_000_000_000 || head.Generation.Generation >= 900_000 {
		return "" // nothing to judge by, or names near the padding width
	}
	return prefix + fmt.Sprintf("part-g%0*d-e%0*d~", manifest.GenerationDigits, j.boundGen, manifest.EpochDigits, j.bound)
}

// Settle deletes the remembered side-output files of m's epoch that m, now
// committed, does not list: their attempt lost, so they can never be
// committed.
func (sw *SideSweeper) Settle(ctx context.Context, m *manifest.Manifest) error {
	cands := sw.cand[m.Epoch]
	if len(cands) == 0 {
		return nil
	}
	delete(sw.cand, m.Epoch)
	names := sideNames(m)
	for _, f := range cands {
		if names[path.Base(f.key)] {
			continue
		}
		if err := f.dir.Store.Delete(ctx, f.key); err != nil {
			return fmt.Errorf("%s: delete orphan %s: %w", f.dir.Name, f.key, err)
		}
	}
	return nil
}

// sideNames returns the base names of a manifest's side outputs (output
// names are unique per generation, epoch, subtask and attempt).
func sideNames(m *manifest.Manifest) map[string]bool {
	out := map[string]bool{}
	for _, f := range m.SideOutputs {
		out[path.Base(f.Path)] = true
	}
	return out
}
