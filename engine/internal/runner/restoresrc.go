package runner

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// RestoreSource is the committed epoch a run restores from: normally the
// head; with Options.FromSavepoint a savepoint, with Options.RollbackTo a
// retained epoch, with Options.ResetState the head without operator state.
type RestoreSource struct {
	Kind       string // "" (the head), or a manifest.Restore* kind
	savepoint  string // name or URL
	claim      bool
	Manifest   *manifest.Manifest
	Generation *manifest.Generation
	// Store is where the manifest's references resolve; prefix is prepended
	// to them to make them state-root relative (claimed named savepoints),
	// "" when they cannot be shared (a savepoint elsewhere, not claimed).
	Store  store.Store
	prefix string
	Shared bool // references resolve in the state root (with prefix)
	Owned  store.Store
	// Forget are input files to read again (reprocess).
	Forget []string
}

func (f *RestoreSource) describe() string {
	switch f.Kind {
	case manifest.RestoreSavepoint:
		if f.claim {
			return fmt.Sprintf("restore from savepoint %s (gen %d epoch %d, claimed)", f.savepoint, f.Manifest.Generation, f.Manifest.Epoch)
		}
		return fmt.Sprintf("restore from savepoint %s (gen %d epoch %d)", f.savepoint, f.Manifest.Generation, f.Manifest.Epoch)
	case manifest.RestoreRollback:
		return fmt.Sprintf("rollback to epoch %d", f.Manifest.Epoch)
	case manifest.RestoreReset:
		return "reset state"
	case manifest.RestoreReprocess:
		return fmt.Sprintf("reprocess %d files", len(f.Forget))
	}
	return ""
}

func (f *RestoreSource) Close() {
	if f != nil && f.Owned != nil {
		f.Owned.Close()
	}
}

// ref makes a reference of the source's manifest usable in the new
// generation's manifests (state-root relative).
func (f *RestoreSource) ref(r manifest.FileRef) manifest.FileRef {
	r.Path = f.prefix + r.Path
	return r
}

// read reads a file the source's manifest references.
func (f *RestoreSource) read(ctx context.Context, r manifest.FileRef) ([]byte, error) {
	return epoch.ReadFileFrom(ctx, f.Store, r)
}

// savepointURL returns where a savepoint NAME or URL lives and, for a
// name, its folder relative to the state root.
func savepointURL(p *spec.Pipeline, st *Stores, nameOrURL string) (u, rel string, err error) {
	if strings.Contains(nameOrURL, "://") {
		return nameOrURL, "", nil
	}
	if strings.Contains(nameOrURL, "/") || strings.HasPrefix(nameOrURL, ".") {
		// A path (a name has no slash and starts with a letter or digit):
		// a relative one is relative to the working directory, as any
		// path on a command line.
		abs, err := filepath.Abs(filepath.FromSlash(nameOrURL))
		if err != nil {
			return "", "", fmt.Errorf("savepoint path %q: %w", nameOrURL, err)
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), "", nil
	}
	if err := manifest.ValidateSavepointName(nameOrURL); err != nil {
		return "", "", err
	}
	base, err := url.Parse(st.StateURL)
	if err != nil {
		return "", "", err
	}
	base.Path = path.Join(base.Path, strings.TrimSuffix(manifest.SavepointDir(nameOrURL), "/"))
	return base.String(), manifest.SavepointDir(nameOrURL), nil
}

// SavepointURL returns the URL of the named savepoint's folder.
func SavepointURL(p *spec.Pipeline, name string) (string, error) {
	stateURL, err := owner.PipelineStateURL(p)
	if err != nil {
		return "", err
	}
	u, _, err := savepointURL(p, &Stores{StateURL: stateURL}, name)
	return u, err
}

// ResolveRestore reads what the run restores from, per the options.
func ResolveRestore(ctx context.Context, p *spec.Pipeline, st *Stores, opts *Options, head *epoch.Head) (*RestoreSource, error) {
	n := 0
	for _, set := range []bool{opts.FromSavepoint != "", opts.RollbackTo > 0, opts.ResetState, opts.ReprocessRejected || opts.ReprocessFiles != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("--from-savepoint, --rollback-to, --reset-state and reprocessing exclude each other")
	}
	if (opts.ReprocessRejected || opts.ReprocessFiles != "") && HasKafka(p) {
		return nil, RefuseKafka(p, "reprocess")
	}
	if opts.Claim && opts.FromSavepoint == "" {
		return nil, fmt.Errorf("--claim applies to --from-savepoint only")
	}
	head0 := &RestoreSource{Manifest: head.Manifest, Generation: head.Generation, Store: st.State, Shared: true}
	switch {
	case opts.FromSavepoint != "":
		u, rel, err := savepointURL(p, st, opts.FromSavepoint)
		if err != nil {
			return nil, err
		}
		if opts.Claim && rel == "" {
			return nil, fmt.Errorf("--claim needs a savepoint of this pipeline by name (under %s); a savepoint elsewhere is restored by copy", manifest.SavepointsDir)
		}
		s, err := store.Open(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("savepoint %s: %w", store.Redact(opts.FromSavepoint), err)
		}
		s = store.WithRetry(s, opts.Retry)
		r, err := epoch.ReadSavepoint(ctx, s)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("savepoint %s: %w", store.Redact(opts.FromSavepoint), err)
		}
		if r.Manifest.Pipeline != p.Name {
			s.Close()
			return nil, fmt.Errorf("savepoint %s belongs to pipeline %q, not %q", store.Redact(opts.FromSavepoint), r.Manifest.Pipeline, p.Name)
		}
		if g := head.Generation; g != nil && g.RestoredFrom != nil && g.RestoredFrom.Kind == manifest.RestoreSavepoint &&
			g.RestoredFrom.Savepoint == store.Redact(opts.FromSavepoint) && g.Parent != nil &&
			*g.Parent == (manifest.Ref{Generation: r.Manifest.Generation, Epoch: r.Manifest.Epoch}) {
			// The head's generation is this very restore (an earlier run of
			// the same command committed it): continue, do not restore
			// again.
			s.Close()
			if opts.Log != nil {
				opts.Log.Info("already restored from this savepoint: continuing", "savepoint", store.Redact(opts.FromSavepoint), "generation", g.Generation)
			}
			return head0, nil
		}
		f := &RestoreSource{Kind: manifest.RestoreSavepoint, savepoint: store.Redact(opts.FromSavepoint), claim: opts.Claim,
			Manifest: r.Manifest, Generation: r.Generation, Store: s, Owned: s}
		if opts.Claim {
			f.prefix, f.Shared = rel, true
		}
		return f, nil
	case opts.RollbackTo > 0:
		if head.Manifest == nil {
			return nil, fmt.Errorf("rollback: nothing is committed")
		}
		if opts.RollbackTo >= head.Epoch() {
			return nil, fmt.Errorf("rollback to epoch %d: the head is epoch %d; pick an older retained epoch", opts.RollbackTo, head.Epoch())
		}
		// Only an epoch of the head's lineage can be restored: one a
		// rollback or restore abandoned has lost its outputs (they are not in
		// the output log any more and sink cleanup deleted them).
		c := epoch.NewCommitter(st.State, nil, p.Name, nil)
		m, _, err := c.LineageAt(ctx, head, opts.RollbackTo)
		if err != nil {
			return nil, fmt.Errorf("rollback to epoch %d: %w", opts.RollbackTo, err)
		}
		g, err := c.ReadGeneration(ctx, m.Generation)
		if err != nil {
			return nil, fmt.Errorf("rollback to epoch %d: %w", opts.RollbackTo, err)
		}
		return &RestoreSource{Kind: manifest.RestoreRollback, Manifest: m, Generation: g, Store: st.State, Shared: true}, nil
	case opts.ReprocessRejected || opts.ReprocessFiles != "":
		if head.Manifest == nil {
			return head0, nil // nothing was read yet
		}
		forget, err := filesToReprocess(ctx, p, st, opts, head)
		if err != nil {
			return nil, err
		}
		if len(forget) == 0 {
			return nil, fmt.Errorf("reprocess: no processed input file matches (nothing rejected whole in the retained epochs, or no file matches %q)", opts.ReprocessFiles)
		}
		head0.Kind, head0.Forget = manifest.RestoreReprocess, forget
		return head0, nil
	case opts.ResetState:
		if head.Manifest == nil {
			return head0, nil // nothing to reset
		}
		head0.Kind = manifest.RestoreReset
		return head0, nil
	}
	return head0, nil
}

// filesToReprocess returns the processed input files to read again: those
// rejected whole in the retained epochs and/or those matching the glob.
func filesToReprocess(ctx context.Context, p *spec.Pipeline, st *Stores, opts *Options, head *epoch.Head) ([]string, error) {
	c := epoch.NewCommitter(st.State, st.Sink, p.Name, nil)
	seen := NewSeenLog()
	if err := seen.Load(ctx, c, head.Manifest.Source.Inline, head.Manifest.Source.Segments); err != nil {
		return nil, err
	}
	want := map[string]bool{}
	if g := opts.ReprocessFiles; g != "" {
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("reprocess --files %q: %w", g, err)
		}
		for _, k := range seen.Entries() {
			full, _ := path.Match(g, k)
			base, _ := path.Match(g, path.Base(k))
			if full || base {
				want[k] = true
			}
		}
	}
	if opts.ReprocessRejected {
		chain, err := c.Chain(ctx, head, KeepOf(p))
		if err != nil {
			return nil, err
		}
		for _, m := range chain {
			for _, f := range m.SideOutputs {
				if f.Kind != manifest.SideOutputRejected {
					continue
				}
				s, key := st.Sink, f.Path
				if strings.Contains(f.Path, "://") {
					if st.Rejected == nil {
						continue // rejected_url was removed from the spec
					}
					s, key = st.Rejected, path.Base(f.Path)
				}
				data, err := epoch.ReadFileFrom(ctx, s, manifest.FileRef{Path: key, Size: f.Size, Checksum: f.Checksum})
				if err != nil {
					return nil, fmt.Errorf("reprocess: rejected rows of epoch %d: %w", m.Epoch, err)
				}
				rejects, err := sinks.DecodeRejects(data)
				if err != nil {
					return nil, fmt.Errorf("reprocess: rejected rows %s: %w", f.Path, err)
				}
				for _, rj := range rejects {
					if rj.WholeFile && seen.Has(rj.File) {
						want[rj.File] = true
					}
				}
			}
		}
	}
	var out []string
	for _, k := range seen.Entries() {
		if want[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

// OpenHead opens a pipeline's state and sink (not its source) for a
// read-only command and peeks at the head (no roll-forward write). The
// caller closes the stores.
func OpenHead(ctx context.Context, p *spec.Pipeline) (*Stores, *epoch.Committer, *epoch.Head, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, nil, err
	}
	st, err := OpenStores(ctx, p, &Options{}, false)
	if err != nil {
		return nil, nil, nil, err
	}
	c := epoch.NewCommitter(st.State, st.Sink, p.Name, nil)
	head, err := c.Peek(ctx)
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	return st, c, head, nil
}

func KeepOf(p *spec.Pipeline) int {
	if p.State.RetainEpochs > 0 {
		return p.State.RetainEpochs
	}
	return spec.DefaultRetainEpochs
}
