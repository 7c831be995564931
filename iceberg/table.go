package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/store"
)

// Sentinel errors; everything else is wrapped with the table and file.
var (
	// ErrForeignWriter: the table's current metadata was not written by
	// floe (Options.AllowForeignWriters is off). Nothing was written.
	ErrForeignWriter = errors.New("iceberg table written by another writer")
	// ErrCorrupt: a metadata file cannot be parsed. The error names it.
	ErrCorrupt = errors.New("corrupt iceberg metadata")
	// ErrCommitUnknown: a metadata write failed and reading it back failed
	// too, so whether it landed is unknown. Publishing the same epoch again
	// (now or in a later run) resolves it: the epoch marker travels in the
	// same metadata file as the epoch's data files.
	ErrCommitUnknown = errors.New("iceberg commit outcome unknown")
	// ErrCommitFailed: another commit created the version this one was
	// built for; nothing of this commit is current. Publish and Maintain
	// retry it themselves.
	ErrCommitFailed = errors.New("iceberg commit lost to a concurrent commit")
)

// Defaults of Options and MaintainOptions.
const (
	DefaultManifestMergeMinCount = 16
	DefaultMaxAttempts           = 8
	DefaultMetadataVersionsMax   = 10
)

// Options configure a Table.
type Options struct {
	// Schema is the Arrow schema of the data files, used to create the table
	// on the first Publish (ignored once it exists). Timestamp columns become
	// Iceberg timestamptz (a timestamp without a zone is taken as UTC; floe
	// writes timestamp[us, UTC]).
	Schema *arrow.Schema
	// PartitionBy is "" (or "none"): unpartitioned; "hour(col)",
	// "day(col)", "month(col)" or "year(col)": by that part of the
	// timestamp column col; or "identity(col)": by the value of column col
	// (a string, integer, boolean, date or timestamp column). Used only to
	// create the table. Each data file must hold rows of one partition.
	PartitionBy string
	// Renames maps a column to its previous name (an aggregate's
	// renamed_from): when an epoch's files have the column and not the
	// previous one, the table's field of the previous name is renamed
	// (keeping its field id, so older files' values stay in it) instead
	// of a new field being added. See evolve.go.
	Renames map[string]string
	// AllowForeignWriters lets floe commit to a table whose current metadata
	// another writer wrote. Maintain then deletes only metadata files floe
	// provably wrote (its metadata JSON) and leaves manifests alone.
	AllowForeignWriters bool
	// ManifestMergeMinCount: an append merges the table's manifests once
	// there are this many (default DefaultManifestMergeMinCount), so the
	// manifest count of a snapshot stays bounded.
	ManifestMergeMinCount int
	// MaxAttempts bounds the commits one Publish or Maintain tries after
	// conflicts (default DefaultMaxAttempts).
	MaxAttempts int
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// DataFile is one Parquet file to add, written by the engine under the
// table's data/ (or anywhere under the table location).
type DataFile struct {
	// Path is relative to the table location, e.g. "data/part-...parquet".
	Path string
	// Size in bytes and Rows are checked against the file's footer.
	Size int64
	Rows int64
}

// Table is an Iceberg table that floe commits to through a store.Store
// rooted at the table location. It keeps nothing between calls except its
// configuration: every call reads the current metadata. Safe for concurrent
// use, also across processes.
type Table struct {
	st   store.Store
	loc  string
	opts Options
	log  *slog.Logger
	part partitionBy // the partition of a table it creates; zero: unpartitioned
}

// partitionBy is a parsed Options.PartitionBy.
type partitionBy struct {
	transform string // "identity", "hour", "day", "month", "year"; "" unpartitioned
	col       string
}

// Open returns the table at location, whose files st holds (st is rooted at
// the location: metadata/ and data/ are keys of st). location is the table's
// URL as recorded in its metadata and as other readers see it, e.g.
// s3://bucket/tables/clicks; a query string (endpoint=...) and a trailing
// slash are dropped. A table need not exist yet: the first Publish creates
// it from opts.Schema. An existing table must be readable, record the same
// location and (unless opts.AllowForeignWriters) have been last written by
// floe.
func Open(ctx context.Context, st store.Store, location string, opts Options) (*Table, error) {
	loc, err := canonicalLocation(location)
	if err != nil {
		return nil, err
	}
	part, err := parsePartitionBy(opts.PartitionBy)
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: %w", loc, err)
	}
	if opts.ManifestMergeMinCount <= 0 {
		opts.ManifestMergeMinCount = DefaultManifestMergeMinCount
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	t := &Table{st: st, loc: loc, opts: opts, log: log, part: part}
	s, err := t.load(ctx)
	if err != nil {
		return nil, err
	}
	if s != nil {
		if err := t.check(s); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Location returns the table location recorded in its metadata.
func (t *Table) Location() string { return t.loc }

func canonicalLocation(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return "", fmt.Errorf("iceberg: table location %q: not a URL", store.Redact(raw))
	}
	if u.User != nil {
		return "", fmt.Errorf("iceberg: table location %q: credentials are not accepted in a location", store.Redact(raw))
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	switch {
	case u.Scheme == "" && strings.HasPrefix(u.Path, "/"):
		u.Scheme = "file"
	case u.Scheme == "" || u.Scheme == "mem":
		return "", fmt.Errorf("iceberg: table location %q: want an absolute URL (s3://bucket/path, file:///abs/dir)", store.Redact(raw))
	}
	s := strings.TrimRight(u.String(), "/")
	if s == u.Scheme+":" || s == u.Scheme+"://" {
		return "", fmt.Errorf("iceberg: table location %q: empty path", store.Redact(raw))
	}
	return s, nil
}

func parsePartitionBy(s string) (partitionBy, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return partitionBy{}, nil
	}
	for _, tr := range []string{"identity", "hour", "day", "month", "year"} {
		if col, ok := strings.CutPrefix(s, tr+"("); ok {
			if col, ok = strings.CutSuffix(col, ")"); ok && strings.TrimSpace(col) != "" {
				return partitionBy{transform: tr, col: strings.TrimSpace(col)}, nil
			}
		}
	}
	return partitionBy{}, fmt.Errorf("partition_by %q: want none, identity(<column>) or hour, day, month or year(<timestamp column>)", s)
}

// spec returns the partition spec of p over schema sc: one field named as
// Iceberg's tools name it (col for identity, col_day for day(col), ...).
func (p partitionBy) spec(sc *iceberg.Schema) (iceberg.PartitionSpec, error) {
	if p.transform == "" {
		return *iceberg.UnpartitionedSpec, nil
	}
	f, ok := sc.FindFieldByName(p.col)
	if !ok {
		return iceberg.PartitionSpec{}, fmt.Errorf("partition column %q is not in the schema", p.col)
	}
	var tr iceberg.Transform
	name := p.col + "_" + p.transform
	switch p.transform {
	case "identity":
		switch f.Type.(type) {
		case iceberg.StringType, iceberg.Int32Type, iceberg.Int64Type, iceberg.BooleanType, iceberg.DateType, iceberg.TimestampTzType, iceberg.TimestampType:
		default:
			return iceberg.PartitionSpec{}, fmt.Errorf("partition column %q is %s; identity partitions take a string, integer, boolean, date or timestamp column", p.col, f.Type)
		}
		tr, name = iceberg.IdentityTransform{}, p.col
	case "hour", "day", "month", "year":
		if _, ok := f.Type.(iceberg.TimestampTzType); !ok {
			return iceberg.PartitionSpec{}, fmt.Errorf("partition column %q is %s, want a timestamp", p.col, f.Type)
		}
		tr = map[string]iceberg.Transform{"hour": iceberg.HourTransform{}, "day": iceberg.DayTransform{},
			"month": iceberg.MonthTransform{}, "year": iceberg.YearTransform{}}[p.transform]
	}
	return iceberg.NewPartitionSpecOpts(iceberg.AddPartitionFieldByName(p.col, name, tr, sc, nil))
}

// check refuses a version floe must not commit on.
func (t *Table) check(s *state) error {
	if got := strings.TrimRight(s.meta.location, "/"); got != t.loc {
		return fmt.Errorf("iceberg: %s records table location %q, opened as %q", s.key, got, t.loc)
	}
	if t.opts.AllowForeignWriters {
		return nil
	}
	if got := s.meta.props[PropMetadataVersion]; got != strconv.FormatInt(s.version, 10) {
		return fmt.Errorf("%w: %s/%s was not written by floe (%s=%q, want %d); floe must be the only writer of the table, or allow others (AllowForeignWriters)",
			ErrForeignWriter, t.loc, s.key, PropMetadataVersion, got, s.version)
	}
	return nil
}

// EpochProperty is the table property holding the last epoch of pipelineID
// published to the table.
func EpochProperty(pipelineID string) string { return "floe." + pipelineID + ".epoch" }

func publishedEpoch(md *tableMeta, pipelineID string) (int64, error) {
	key := EpochProperty(pipelineID)
	v, ok := md.props[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: table property %s=%q is not an epoch", ErrCorrupt, key, v)
	}
	return n, nil
}

// PublishedEpoch returns the last epoch of pipelineID in the table (0 when
// the table or the property does not exist).
func (t *Table) PublishedEpoch(ctx context.Context, pipelineID string) (int64, error) {
	s, err := t.load(ctx)
	if err != nil || s == nil {
		return 0, err
	}
	if err := t.check(s); err != nil {
		return 0, err
	}
	return publishedEpoch(s.meta, pipelineID)
}

// Head describes the current version of a table.
type Head struct {
	// Version is N of metadata/vN.metadata.json; MetadataLocation its
	// full location (what a catalog-less reader opens).
	Version          int64
	MetadataLocation string
	// SnapshotID is the current snapshot (0: none); Snapshots counts the
	// snapshots the version keeps.
	SnapshotID int64
	Snapshots  int
	// Properties are the table properties.
	Properties map[string]string
}

// Head returns the current version of the table, or nil when there is no
// table yet.
func (t *Table) Head(ctx context.Context) (*Head, error) {
	s, err := t.load(ctx)
	if err != nil || s == nil {
		return nil, err
	}
	h := &Head{Version: s.version, MetadataLocation: s.loc, Snapshots: len(s.meta.snapshots), Properties: maps.Clone(s.meta.props)}
	if cur := s.meta.current(); cur != nil {
		h.SnapshotID = cur.ID
	}
	return h, nil
}

// Publish adds epoch's files to the table in one commit that also sets the
// property floe.<pipelineID>.epoch = epoch. The snapshot summary carries
// floe.pipeline, floe.epoch and summary (keys prefixed "floe." unless they
// already are: pass the manifest path and attempt).
//
// It is idempotent: if the property is already >= epoch it does nothing.
// On a conflict (another writer committed first) or an unknown outcome it
// reloads the table and checks the property again before trying again;
// it never replays a commit on a newer base. Epochs of one pipeline must be
// published in order: the marker is a high-water mark.
//
// Each file's Parquet footer is read (schema check, column statistics,
// partition value) and must match its Size and Rows.
func (t *Table) Publish(ctx context.Context, pipelineID string, epoch int64, summary map[string]string, files []DataFile) error {
	if pipelineID == "" || strings.ContainsAny(pipelineID, " \t\r\n=") {
		return fmt.Errorf("iceberg: publish: bad pipeline id %q", pipelineID)
	}
	if epoch <= 0 {
		return fmt.Errorf("iceberg: publish %s: epoch %d must be positive", pipelineID, epoch)
	}
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "://") || path.Clean(f.Path) != f.Path || strings.HasPrefix(f.Path, "..") {
			return fmt.Errorf("iceberg: publish %s epoch %d: data file path %q must be relative to the table location", pipelineID, epoch, f.Path)
		}
		if strings.HasPrefix(f.Path, metadataPrefix) {
			return fmt.Errorf("iceberg: publish %s epoch %d: data file %q is under %s", pipelineID, epoch, f.Path, metadataPrefix)
		}
		if seen[f.Path] {
			return fmt.Errorf("iceberg: publish %s epoch %d: data file %q listed twice", pipelineID, epoch, f.Path)
		}
		seen[f.Path] = true
	}
	snapProps := iceberg.Properties{}
	for k, v := range summary {
		if !strings.HasPrefix(k, "floe.") {
			k = "floe." + k
		}
		snapProps[k] = v
	}
	snapProps["floe.pipeline"] = pipelineID
	snapProps["floe.epoch"] = strconv.FormatInt(epoch, 10)

	var (
		lastErr error
		cache   dataFileCache
	)
	for attempt := 0; attempt < t.opts.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, attempt); err != nil {
				return fmt.Errorf("iceberg: publish %s epoch %d: %w (last conflict: %v)", pipelineID, epoch, err, lastErr)
			}
		}
		done, err := t.publishOnce(ctx, pipelineID, epoch, snapProps, files, &cache)
		if err == nil {
			if done {
				t.log.Debug("iceberg: epoch already published", "table", t.loc, "pipeline", pipelineID, "epoch", epoch)
			}
			return nil
		}
		if !retriable(err) {
			return fmt.Errorf("iceberg: publish %s epoch %d: %w", pipelineID, epoch, err)
		}
		t.log.Debug("iceberg: publish retry", "table", t.loc, "pipeline", pipelineID, "epoch", epoch, "attempt", attempt, "cause", err)
		lastErr = err
	}
	return fmt.Errorf("iceberg: publish %s epoch %d: gave up after %d attempts: %w", pipelineID, epoch, t.opts.MaxAttempts, lastErr)
}

func retriable(err error) bool {
	return errors.Is(err, ErrCommitFailed) || errors.Is(err, ErrCommitUnknown) || errors.Is(err, store.ErrTransient)
}

func sleep(ctx context.Context, attempt int) error {
	d := min(20*time.Millisecond<<min(attempt, 10), 2*time.Second)
	d = d/2 + rand.N(d/2+1)
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// publishOnce loads the current version and commits epoch on it. done
// reports that the epoch was already there.
func (t *Table) publishOnce(ctx context.Context, pipelineID string, epoch int64, snapProps iceberg.Properties, files []DataFile, cache *dataFileCache) (done bool, err error) {
	s, err := t.load(ctx)
	if err != nil {
		return false, err
	}
	if s == nil {
		if err := t.create(ctx); err != nil {
			return false, err
		}
		if s, err = t.load(ctx); err != nil {
			return false, err
		}
		if s == nil {
			return false, fmt.Errorf("%w: created %s but found no metadata", ErrCommitUnknown, versionKey(1))
		}
	}
	if err := t.check(s); err != nil {
		return false, err
	}
	have, err := publishedEpoch(s.meta, pipelineID)
	if err != nil {
		return false, err
	}
	if have >= epoch {
		return true, nil
	}
	ev, err := cache.get(ctx, t, s, files)
	if err != nil {
		return false, err
	}
	props := iceberg.Properties{EpochProperty(pipelineID): strconv.FormatInt(epoch, 10)}
	for k, v := range t.tableProps() {
		if s.meta.props[k] != v {
			props[k] = v
		}
	}
	var snap *snapshot
	var newSchema *iceberg.Schema
	if len(ev.dfs) > 0 {
		if _, ok := s.meta.props[propNameMappingDefault]; !ok || len(ev.changes) > 0 {
			nm, err := json.Marshal(ev.mapping)
			if err != nil {
				return false, fmt.Errorf("name mapping: %w", err)
			}
			props[propNameMappingDefault] = string(nm)
		}
		base := s.meta
		if len(ev.changes) > 0 {
			// The snapshot and its manifests are written under the
			// evolved schema, which the same commit makes current.
			newSchema = ev.schema
			evolved := *s.meta
			evolved.schema = newSchema
			base = &evolved
			t.log.Info("iceberg: evolving the table schema", "table", t.loc, "epoch", epoch, "schema_id", newSchema.ID, "changes", strings.Join(ev.changes, "; "))
		}
		all := maps.Clone(s.meta.props)
		maps.Copy(all, props)
		if snap, err = appendSnapshot(newStoreIO(ctx, t.st, t.loc), base, ev.dfs, snapProps, all, time.Now()); err != nil {
			return false, fmt.Errorf("add data files: %w", err)
		}
	}
	if _, err := t.commit(ctx, s, change{props: props, add: snap, schema: newSchema}); err != nil {
		return false, err
	}
	t.log.Debug("iceberg: published epoch", "table", t.loc, "pipeline", pipelineID, "epoch", epoch, "files", len(ev.dfs), "version", s.version+1)
	return false, nil
}

// tableProps are the properties floe keeps on the table.
func (t *Table) tableProps() iceberg.Properties {
	return iceberg.Properties{
		propCommitNumRetries:      "0", // never replay a commit on a newer base
		propManifestMergeEnabled:  "true",
		propManifestMinMergeCount: strconv.Itoa(t.opts.ManifestMergeMinCount),
		propMetadataPreviousMax:   strconv.Itoa(DefaultMetadataVersionsMax),
	}
}

// create writes version 1 from Options.Schema. Losing the race to another
// creator is not an error: the caller reloads.
func (t *Table) create(ctx context.Context) error {
	if t.opts.Schema == nil {
		return fmt.Errorf("iceberg: no table at %s and no schema to create it with", t.loc)
	}
	sc, err := icebergSchema(t.opts.Schema)
	if err != nil {
		return fmt.Errorf("iceberg: create %s: %w", t.loc, err)
	}
	spec, err := t.part.spec(sc)
	if err != nil {
		return fmt.Errorf("iceberg: create %s: %w", t.loc, err)
	}
	props := t.tableProps()
	for k, v := range stamp(1) {
		props[k] = v
	}
	nm, err := json.Marshal(sc.NameMapping())
	if err != nil {
		return fmt.Errorf("iceberg: create %s: name mapping: %w", t.loc, err)
	}
	props[propNameMappingDefault] = string(nm)
	md, err := newMeta(sc, spec, t.loc, props, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("iceberg: create %s: %w", t.loc, err)
	}
	if _, err := t.createVersion(ctx, 1, md); err != nil && !errors.Is(err, ErrCommitFailed) {
		return err
	}
	return nil
}

// dataFileCache keeps the DataFiles built from footers across retries, as
// long as the schema and partition spec they were built for stay current.
type dataFileCache struct {
	schemaID, specID int
	ev               *evolvedFiles
}

// evolvedFiles are an epoch's data files as written under the schema
// evolveSchema chose for them.
type evolvedFiles struct {
	*schemaChange
	dfs []iceberg.DataFile
}

func (c *dataFileCache) get(ctx context.Context, t *Table, s *state, files []DataFile) (*evolvedFiles, error) {
	sc, spec := s.meta.schema, s.meta.spec
	if c.ev != nil && c.schemaID == sc.ID && c.specID == spec.ID() {
		return c.ev, nil
	}
	datas := make([][]byte, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, f := range files {
		g.Go(func() error {
			data, err := store.Read(gctx, t.st, f.Path)
			if err != nil {
				return fmt.Errorf("data file %s: %w", f.Path, err)
			}
			datas[i] = data
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	ev := &evolvedFiles{schemaChange: &schemaChange{schema: sc}}
	if len(files) > 0 {
		// An epoch's files share its plan's columns: the first says
		// which schema they are written under.
		out, err := parquetArrowSchema(datas[0])
		if err != nil {
			return nil, fmt.Errorf("data file %s: %w", files[0].Path, err)
		}
		if ev.schemaChange, err = evolveSchema(s.meta, out, t.opts.Renames); err != nil {
			return nil, fmt.Errorf("data file %s: %w", files[0].Path, err)
		}
	}
	ev.dfs = make([]iceberg.DataFile, len(files))
	g = &errgroup.Group{}
	g.SetLimit(4)
	for i, f := range files {
		g.Go(func() error {
			df, err := dataFileFromParquet(datas[i], t.loc+"/"+f.Path, ev.schema, spec)
			if err != nil {
				return fmt.Errorf("data file %s: %w", f.Path, err)
			}
			if df.FileSizeBytes() != f.Size || df.Count() != f.Rows {
				return fmt.Errorf("data file %s: footer says %d bytes, %d rows; the epoch says %d bytes, %d rows",
					f.Path, df.FileSizeBytes(), df.Count(), f.Size, f.Rows)
			}
			ev.dfs[i] = df
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	c.schemaID, c.specID, c.ev = sc.ID, spec.ID(), ev
	return ev, nil
}
