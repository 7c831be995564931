package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/floe-dev/floe/store"
)

// Defaults of MaintainOptions.
const (
	DefaultRetainSnapshots = 10
	DefaultRetainMetadata  = 10
	// DefaultMinAge is the grace period of Maintain's deletions: no file
	// younger than this is deleted, which protects a commit in flight (its
	// manifests are written before its metadata file) and readers that
	// loaded an older version.
	DefaultMinAge = time.Hour
)

// MaintainOptions configure Maintain. Zero values take the defaults.
type MaintainOptions struct {
	// RetainSnapshots: the newest snapshots kept whatever their age
	// (default DefaultRetainSnapshots).
	RetainSnapshots int
	// MaxSnapshotAge: snapshots beyond RetainSnapshots that are younger
	// than this are kept too (0: expire every snapshot beyond
	// RetainSnapshots).
	MaxSnapshotAge time.Duration
	// RetainMetadata: the newest metadata versions kept (default
	// DefaultRetainMetadata, at least 1).
	RetainMetadata int
	// MinAge: files younger than this are never deleted (default
	// DefaultMinAge). A negative value deletes regardless of age: only for
	// tests, where nothing runs concurrently.
	MinAge time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// MaintainReport says what Maintain did and what metadata remains.
type MaintainReport struct {
	ExpiredSnapshots int
	// DeletedVersions counts metadata/vN.metadata.json files deleted,
	// DeletedManifests the manifest and manifest-list files (.avro).
	DeletedVersions  int
	DeletedManifests int
	// SkippedForeign counts old metadata files kept because floe did not
	// write them.
	SkippedForeign int
	// MetadataFiles and MetadataBytes: everything under metadata/ afterwards.
	MetadataFiles int
	MetadataBytes int64
}

// Maintain bounds the table's metadata: it expires snapshots (one commit,
// no snapshot of its own, data files untouched), then deletes, under
// metadata/ only and only when older than MinAge:
//   - metadata/vN.metadata.json beyond the newest RetainMetadata versions
//     that floe wrote (its version stamp is in the file);
//   - manifests and manifest lists (.avro) that neither the current version
//     nor a version younger than MinAge references: those of expired
//     snapshots, of merged-away manifests and of losing commits. Skipped with AllowForeignWriters, since another
//     writer's files cannot be told from floe's.
//
// Data files are never deleted: they are the engine's. Manifests are merged
// by every Publish (Options.ManifestMergeMinCount), not here. Maintain may
// run concurrently with Publish (a conflict makes one of them retry).
func (t *Table) Maintain(ctx context.Context, opts MaintainOptions) (MaintainReport, error) {
	var rep MaintainReport
	if opts.RetainSnapshots <= 0 {
		opts.RetainSnapshots = DefaultRetainSnapshots
	}
	if opts.RetainMetadata <= 0 {
		opts.RetainMetadata = DefaultRetainMetadata
	}
	if opts.MinAge == 0 {
		opts.MinAge = DefaultMinAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	n, err := t.expire(ctx, opts)
	rep.ExpiredSnapshots = n
	if err != nil {
		return rep, err
	}
	if err := t.sweep(ctx, opts, &rep); err != nil {
		return rep, err
	}
	objs, err := t.st.List(ctx, metadataPrefix)
	if err != nil {
		return rep, fmt.Errorf("iceberg: maintain %s: list %s: %w", t.loc, metadataPrefix, err)
	}
	for _, o := range objs {
		rep.MetadataFiles++
		rep.MetadataBytes += o.Size
	}
	return rep, nil
}

// expire commits a snapshot expiry if there are snapshots beyond the
// retention, retrying on conflicts by reloading.
func (t *Table) expire(ctx context.Context, opts MaintainOptions) (int, error) {
	var lastErr error
	for attempt := 0; attempt < t.opts.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, attempt); err != nil {
				return 0, err
			}
		}
		s, err := t.load(ctx)
		if err != nil || s == nil {
			return 0, err
		}
		if err := t.check(s); err != nil {
			return 0, err
		}
		if len(s.meta.snapshots) <= opts.RetainSnapshots {
			return 0, nil
		}
		cutoff := opts.Now().Add(-opts.MaxSnapshotAge).UnixMilli()
		exp, err := expireSnapshots(s.meta, opts.RetainSnapshots, cutoff)
		if err != nil {
			return 0, fmt.Errorf("iceberg: maintain %s: expire snapshots: %s: %w", t.loc, s.key, err)
		}
		if len(exp) == 0 {
			return 0, nil
		}
		_, err = t.commit(ctx, s, change{expire: exp})
		if err == nil {
			return len(exp), nil
		}
		if !retriable(err) {
			return 0, fmt.Errorf("iceberg: maintain %s: expire snapshots: %w", t.loc, err)
		}
		lastErr = err
	}
	return 0, fmt.Errorf("iceberg: maintain %s: expire snapshots: gave up after %d attempts: %w", t.loc, t.opts.MaxAttempts, lastErr)
}

// sweep deletes unreferenced metadata files (see Maintain).
func (t *Table) sweep(ctx context.Context, opts MaintainOptions, rep *MaintainReport) error {
	// List before loading the head: a file written by a commit that lands
	// after the load is unreferenced now, and only MinAge protects it.
	objs, err := t.st.List(ctx, metadataPrefix)
	if err != nil {
		return fmt.Errorf("iceberg: maintain %s: list %s: %w", t.loc, metadataPrefix, err)
	}
	head, err := t.load(ctx)
	if err != nil || head == nil {
		return err
	}
	if err := t.check(head); err != nil {
		return err
	}
	cutoff := opts.Now().Add(-opts.MinAge)
	old := func(o store.ObjectInfo) bool { return opts.MinAge < 0 || o.ModTime.Before(cutoff) }

	// The versions whose files must stay readable: the head, and versions
	// younger than MinAge (a reader may have just loaded one). As in
	// Iceberg, an older version's file may be kept (RetainMetadata) while
	// the files of its expired snapshots are deleted.
	live := []int64{head.version}
	for _, o := range objs {
		if n, ok := parseVersion(o.Key); ok && n < head.version && !old(o) {
			live = append(live, n)
		}
	}
	referenced := map[string]bool{}
	if !t.opts.AllowForeignWriters {
		if err := t.addReferences(ctx, head, live, referenced); err != nil {
			return fmt.Errorf("iceberg: maintain %s: %w", t.loc, err)
		}
	}
	io := newStoreIO(ctx, t.st, t.loc)
	for _, o := range objs {
		if !old(o) {
			continue
		}
		if n, ok := parseVersion(o.Key); ok {
			if n > head.version-int64(opts.RetainMetadata) {
				continue
			}
			mine, err := t.wroteVersion(ctx, n)
			if err != nil {
				return fmt.Errorf("iceberg: maintain %s: %w", t.loc, err)
			}
			if !mine {
				rep.SkippedForeign++
				continue
			}
			if err := t.st.Delete(ctx, o.Key); err != nil {
				return fmt.Errorf("iceberg: maintain %s: delete %s: %w", t.loc, o.Key, err)
			}
			rep.DeletedVersions++
			continue
		}
		if t.opts.AllowForeignWriters || !strings.HasSuffix(o.Key, ".avro") || referenced[o.Key] {
			continue
		}
		if err := io.Remove(t.loc + "/" + o.Key); err != nil {
			return fmt.Errorf("iceberg: maintain %s: %w", t.loc, err)
		}
		rep.DeletedManifests++
	}
	return nil
}

// addReferences adds the store keys of the manifest lists and manifests of
// every snapshot of the live versions.
func (t *Table) addReferences(ctx context.Context, head *state, live []int64, referenced map[string]bool) error {
	io := newStoreIO(ctx, t.st, t.loc)
	lists := map[string]bool{}
	for _, n := range live {
		s := head
		if n != head.version {
			var err error
			if s, err = t.loadVersion(ctx, n); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue // deleted by a concurrent Maintain
				}
				return err
			}
		}
		for _, snap := range s.meta.snapshots {
			if snap.ManifestList == "" || lists[snap.ManifestList] {
				continue
			}
			lists[snap.ManifestList] = true
			k, err := io.key(snap.ManifestList)
			if err != nil {
				return fmt.Errorf("%s: snapshot %d: manifest list %w", s.key, snap.ID, err)
			}
			referenced[k] = true
			mfs, err := readManifestList(io, snap.ManifestList)
			if errors.Is(err, fs.ErrNotExist) && s != head {
				continue // an older version's expired snapshot
			}
			if err != nil {
				return fmt.Errorf("%s: snapshot %d: read manifest list: %w", s.key, snap.ID, err)
			}
			for _, mf := range mfs {
				k, err := io.key(mf.FilePath())
				if err != nil {
					return fmt.Errorf("%s: snapshot %d: manifest %w", s.key, snap.ID, err)
				}
				referenced[k] = true
			}
		}
	}
	return nil
}

// wroteVersion reports whether floe wrote metadata/vN.metadata.json (its
// version stamp is N). A file that cannot be parsed is not floe's.
func (t *Table) wroteVersion(ctx context.Context, n int64) (bool, error) {
	s, err := t.loadVersion(ctx, n)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case errors.Is(err, ErrCorrupt):
		return false, nil
	case err != nil:
		return false, err
	}
	return s.meta.props[PropMetadataVersion] == fmt.Sprint(n), nil
}
