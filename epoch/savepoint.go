package epoch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// ErrSavepointExists is returned when a complete savepoint of that name
// exists already.
var ErrSavepointExists = errors.New("savepoint exists")

// ReadFileFrom reads a file a manifest references from s (a savepoint
// folder, or any store the references are relative to) and verifies its
// size and checksum.
func ReadFileFrom(ctx context.Context, s store.Store, ref manifest.FileRef) ([]byte, error) {
	return readVerified(ctx, s, ref)
}

// CreateSavepoint copies everything the committed manifest m references
// (state bases and deltas, seen-set and output-log segments), m itself and
// its generation record from the pipeline's state into dst, a store rooted
// at the savepoint folder, at the same relative paths; every file is
// verified as it is read. _savepoint.json is written last, create-if-absent:
// a savepoint without it is incomplete (a crash) and CreateSavepoint of the
// same name completes it.
func (c *Committer) CreateSavepoint(ctx context.Context, m *manifest.Manifest, name string, dst store.Store) (*manifest.Savepoint, error) {
	if err := manifest.ValidateSavepointName(name); err != nil {
		return nil, err
	}
	if _, _, err := dst.Get(ctx, manifest.SavepointFile); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrSavepointExists, name)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("savepoint %s: %w", name, err)
	}
	sp := &manifest.Savepoint{FormatVersion: manifest.FormatVersion, Pipeline: c.Pipeline, Name: name,
		Generation: m.Generation, Epoch: m.Epoch, Watermark: m.Watermark, CreatedAt: c.now()}
	seen := map[string]bool{}
	for _, ref := range m.StateRefs() {
		if seen[ref.Path] {
			continue
		}
		seen[ref.Path] = true
		data, err := c.ReadFile(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("savepoint %s: %w", name, err)
		}
		if err := putSame(ctx, dst, ref.Path, data); err != nil {
			return nil, fmt.Errorf("savepoint %s: %w", name, err)
		}
		sp.Files++
		sp.Bytes += ref.Size
	}
	for _, f := range []struct{ from, to string }{
		{manifest.ManifestPath(m.Generation, m.Epoch), manifest.SavepointManifestFile},
		{manifest.GenerationPath(m.Generation), manifest.SavepointGenFile},
	} {
		data, _, err := c.Store.Get(ctx, f.from)
		if err != nil {
			return nil, fmt.Errorf("savepoint %s: read %s: %w", name, f.from, err)
		}
		if f.to == manifest.SavepointManifestFile {
			sp.ManifestChecksum = manifest.Checksum(data)
		}
		if err := putSame(ctx, dst, f.to, data); err != nil {
			return nil, fmt.Errorf("savepoint %s: %w", name, err)
		}
	}
	data, err := manifest.EncodeSavepoint(sp)
	if err != nil {
		return nil, err
	}
	if _, err := dst.Put(ctx, manifest.SavepointFile, data, store.PutOptions{IfNotExist: true}); err != nil {
		if errors.Is(err, store.ErrPrecondition) {
			return nil, fmt.Errorf("%w: %s (created by another run at the same time)", ErrSavepointExists, name)
		}
		return nil, fmt.Errorf("savepoint %s: write %s: %w", name, manifest.SavepointFile, err)
	}
	return sp, nil
}

// putSame writes data at key create-if-absent; an object already there with
// the same bytes (an earlier, interrupted create) is fine.
func putSame(ctx context.Context, s store.Store, key string, data []byte) error {
	_, err := s.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
	if err == nil || !errors.Is(err, store.ErrPrecondition) {
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		return nil
	}
	got, _, gerr := s.Get(ctx, key)
	if gerr == nil && bytes.Equal(got, data) {
		return nil
	}
	return fmt.Errorf("write %s: a different object is already there", key)
}

// Restorable is a committed epoch to restore from: a savepoint folder, or a
// retained epoch of the pipeline itself (rollback).
type Restorable struct {
	// Store is where Manifest's references resolve.
	Store      store.Store
	Manifest   *manifest.Manifest
	Generation *manifest.Generation
	// Savepoint is set for a savepoint.
	Savepoint *manifest.Savepoint
}

// ReadSavepoint reads and cross-checks a savepoint folder: _savepoint.json,
// the manifest (its bytes against the recorded checksum) and the generation
// record. A folder without _savepoint.json is an incomplete savepoint.
func ReadSavepoint(ctx context.Context, s store.Store) (*Restorable, error) {
	data, _, err := s.Get(ctx, manifest.SavepointFile)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("no complete savepoint there (%s is missing: the savepoint was never created, or its creation was interrupted)", manifest.SavepointFile)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", manifest.SavepointFile, err)
	}
	sp, err := manifest.DecodeSavepoint(manifest.SavepointFile, data)
	if err != nil {
		return nil, err
	}
	mdata, _, err := s.Get(ctx, manifest.SavepointManifestFile)
	if err != nil {
		return nil, fmt.Errorf("savepoint %s: read %s: %w", sp.Name, manifest.SavepointManifestFile, err)
	}
	if got := manifest.Checksum(mdata); got != sp.ManifestChecksum {
		return nil, fmt.Errorf("savepoint %s: %s does not match its recorded checksum: %w", sp.Name, manifest.SavepointManifestFile, ErrCorrupt)
	}
	m, err := manifest.DecodeManifest(manifest.SavepointManifestFile, mdata)
	if err != nil {
		return nil, err
	}
	gdata, _, err := s.Get(ctx, manifest.SavepointGenFile)
	if err != nil {
		return nil, fmt.Errorf("savepoint %s: read %s: %w", sp.Name, manifest.SavepointGenFile, err)
	}
	g, err := manifest.DecodeGeneration(manifest.SavepointGenFile, gdata)
	if err != nil {
		return nil, err
	}
	if m.Epoch != sp.Epoch || m.Generation != sp.Generation || g.Generation != m.Generation || m.Pipeline != sp.Pipeline {
		return nil, fmt.Errorf("savepoint %s: its documents disagree (savepoint gen %d epoch %d, manifest gen %d epoch %d, generation %d): %w",
			sp.Name, sp.Generation, sp.Epoch, m.Generation, m.Epoch, g.Generation, ErrCorrupt)
	}
	return &Restorable{Store: s, Manifest: m, Generation: g, Savepoint: sp}, nil
}

// SavepointInfo is one entry of ListSavepoints.
type SavepointInfo struct {
	Name      string
	Savepoint *manifest.Savepoint // nil for an incomplete one
	Claimed   bool                // a retained manifest references its files
}

// ListSavepoints lists the named savepoints under <state>/<pipeline>/
// savepoints/, complete or not, and whether the retained chain ending at
// head (keep epochs) references them.
func (c *Committer) ListSavepoints(ctx context.Context, head *Head, keep int) ([]SavepointInfo, error) {
	objs, err := c.Store.List(ctx, manifest.SavepointsDir)
	if err != nil {
		return nil, fmt.Errorf("list savepoints: %w", err)
	}
	claimed, err := c.claimedSavepoints(ctx, head, keep)
	if err != nil {
		return nil, err
	}
	byName := map[string]*SavepointInfo{}
	var out []SavepointInfo
	var order []string
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, manifest.SavepointsDir)
		name, file, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		info := byName[name]
		if info == nil {
			info = &SavepointInfo{Name: name, Claimed: claimed[name]}
			byName[name] = info
			order = append(order, name)
		}
		if file == manifest.SavepointFile {
			data, _, err := c.Store.Get(ctx, o.Key)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", o.Key, err)
			}
			if info.Savepoint, err = manifest.DecodeSavepoint(o.Key, data); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range order {
		out = append(out, *byName[n])
	}
	return out, nil
}

// claimedSavepoints returns the names of savepoints whose files a retained
// manifest references.
func (c *Committer) claimedSavepoints(ctx context.Context, head *Head, keep int) (map[string]bool, error) {
	chain, err := c.Chain(ctx, head, keep)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range chain {
		for _, f := range m.StateRefs() {
			if rest, ok := strings.CutPrefix(f.Path, manifest.SavepointsDir); ok {
				name, _, _ := strings.Cut(rest, "/")
				out[name] = true
			}
		}
	}
	return out, nil
}

// DeleteSavepoint deletes the named savepoint's folder, _savepoint.json
// first (so an interrupted delete leaves an incomplete savepoint, never a
// complete one missing files). A savepoint that retained epochs reference
// (claimed) is refused.
func (c *Committer) DeleteSavepoint(ctx context.Context, head *Head, keep int, name string) error {
	if err := manifest.ValidateSavepointName(name); err != nil {
		return err
	}
	claimed, err := c.claimedSavepoints(ctx, head, keep)
	if err != nil {
		return err
	}
	if claimed[name] {
		return fmt.Errorf("savepoint %s is claimed: retained epochs reference its files; it is released once retention passes them", name)
	}
	dir := manifest.SavepointDir(name)
	objs, err := c.Store.List(ctx, dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	if len(objs) == 0 {
		return fmt.Errorf("no savepoint named %s", name)
	}
	if err := c.Store.Delete(ctx, dir+manifest.SavepointFile); err != nil {
		return fmt.Errorf("delete %s: %w", dir+manifest.SavepointFile, err)
	}
	for _, o := range objs {
		if err := c.Store.Delete(ctx, o.Key); err != nil {
			return fmt.Errorf("delete %s: %w", o.Key, err)
		}
	}
	return nil
}
