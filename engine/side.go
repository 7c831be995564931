package engine

import (
	"context"
	"fmt"
	"path"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// sideDir is a place side outputs (late rows, rejected rows) are written.
type sideDir struct {
	name   string
	s      store.Store
	prefix string
}

type sideFile struct {
	dir sideDir
	key string
}

func (r *runner) sideDirs() []sideDir {
	var out []sideDir
	if r.st.rejected != nil {
		out = append(out, sideDir{"rejected_url", r.st.rejected, ""})
	} else {
		out = append(out, sideDir{"sink " + rejectedDir, r.st.sink, rejectedDir + "/"})
	}
	if r.st.late != nil {
		out = append(out, sideDir{"late_url", r.st.late, ""})
	}
	return out
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

// cleanSideOutputs runs at the start of a run. Side-output files of retained
// epochs that the committed attempt did not write are deleted now; files of
// epochs newer than the head (written by an attempt that died, or by one
// still running) are remembered and judged when this run commits their
// epoch: whatever the committed manifest does not list is then an orphan.
func (r *runner) cleanSideOutputs(ctx context.Context) error {
	r.sideCand = map[int64][]sideFile{}
	chain, err := r.c.Chain(ctx, r.head, r.keep())
	if err != nil {
		return err
	}
	byEpoch := map[int64]map[string]bool{}
	for _, m := range chain {
		byEpoch[m.Epoch] = sideNames(m)
	}
	for _, d := range r.sideDirs() {
		objs, err := d.s.List(ctx, d.prefix)
		if err != nil {
			return fmt.Errorf("%s: list: %w", d.name, err)
		}
		for _, o := range objs {
			info, ok := manifest.ParseOutputName(o.Key)
			if !ok {
				continue
			}
			if info.Epoch > r.head.Epoch() {
				r.sideCand[info.Epoch] = append(r.sideCand[info.Epoch], sideFile{d, o.Key})
				continue
			}
			if names, known := byEpoch[info.Epoch]; known && !names[path.Base(o.Key)] {
				if err := d.s.Delete(ctx, o.Key); err != nil {
					return fmt.Errorf("%s: delete orphan %s: %w", d.name, o.Key, err)
				}
			}
		}
	}
	return nil
}

// settleSideOutputs deletes the remembered side-output files of m's epoch
// that m does not list: their attempt lost, so they can never be committed.
func (r *runner) settleSideOutputs(ctx context.Context, m *manifest.Manifest) error {
	cands := r.sideCand[m.Epoch]
	if len(cands) == 0 {
		return nil
	}
	delete(r.sideCand, m.Epoch)
	names := sideNames(m)
	for _, f := range cands {
		if names[path.Base(f.key)] {
			continue
		}
		if err := f.dir.s.Delete(ctx, f.key); err != nil {
			return fmt.Errorf("%s: delete orphan %s: %w", f.dir.name, f.key, err)
		}
	}
	return nil
}
