package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// SavepointInfo describes one savepoint of a pipeline.
type SavepointInfo struct {
	Name       string `json:"name"`
	Complete   bool   `json:"complete"` // false: its creation was interrupted
	Generation int64  `json:"generation,omitempty"`
	Epoch      int64  `json:"epoch,omitempty"`
	Watermark  string `json:"watermark,omitempty"`
	Files      int    `json:"files,omitempty"`
	Bytes      int64  `json:"bytes,omitempty"`
	CreatedAt  string `json:"created_at,omitempty"`
	Claimed    bool   `json:"claimed"`
	URL        string `json:"url"`
}

// CreateSavepoint copies a committed epoch (0: the head) into the named
// savepoint under <state>/<pipeline>/savepoints/NAME/. It writes nothing
// else; a crash leaves an incomplete savepoint that the same command
// completes.
func CreateSavepoint(ctx context.Context, p *spec.Pipeline, name string, epochN int64) (*SavepointInfo, error) {
	return CreateSavepointTo(ctx, p, name, epochN, nil)
}

// CreateSavepointTo is CreateSavepoint writing through dst (nil: the named
// savepoint's folder), e.g. a store with injected faults.
func CreateSavepointTo(ctx context.Context, p *spec.Pipeline, name string, epochN int64, dst store.Store) (*SavepointInfo, error) {
	st, c, head, err := runner.OpenHead(ctx, p)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if head.Manifest == nil {
		return nil, fmt.Errorf("savepoint %s: nothing is committed yet", name)
	}
	m := head.Manifest
	if epochN > 0 && epochN != m.Epoch {
		// An epoch a rollback or restore abandoned is refused: its outputs
		// are gone from the output log (and the sink), so a savepoint of it
		// would restore a log naming deleted files.
		if m, _, err = c.LineageAt(ctx, head, epochN); err != nil {
			return nil, fmt.Errorf("savepoint %s: %w", name, err)
		}
	}
	u, err := runner.SavepointURL(p, name)
	if err != nil {
		return nil, err
	}
	if dst == nil {
		s, err := store.Open(ctx, u)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		dst = store.WithRetry(s, store.RetryPolicy{})
	}
	sp, err := c.CreateSavepoint(ctx, m, name, dst)
	if err != nil {
		return nil, err
	}
	return savepointInfo(epoch.SavepointInfo{Name: name, Savepoint: sp}, u), nil
}

func savepointInfo(s epoch.SavepointInfo, u string) *SavepointInfo {
	info := &SavepointInfo{Name: s.Name, Claimed: s.Claimed, URL: store.Redact(u)}
	if sp := s.Savepoint; sp != nil {
		info.Complete = true
		info.Generation, info.Epoch, info.Watermark = sp.Generation, sp.Epoch, runner.FmtWM(sp.Watermark)
		info.Files, info.Bytes, info.CreatedAt = sp.Files, sp.Bytes, sp.CreatedAt.Format("2006-01-02T15:04:05Z07:00")
	}
	return info
}

// ListSavepoints lists the pipeline's named savepoints.
func ListSavepoints(ctx context.Context, p *spec.Pipeline) ([]SavepointInfo, error) {
	st, c, head, err := runner.OpenHead(ctx, p)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	list, err := c.ListSavepoints(ctx, head, runner.KeepOf(p))
	if err != nil {
		return nil, err
	}
	out := []SavepointInfo{}
	for _, s := range list {
		u, _ := runner.SavepointURL(p, s.Name)
		out = append(out, *savepointInfo(s, u))
	}
	return out, nil
}

// DeleteSavepoint deletes a named savepoint (refused while claimed).
func DeleteSavepoint(ctx context.Context, p *spec.Pipeline, name string) error {
	st, c, head, err := runner.OpenHead(ctx, p)
	if err != nil {
		return err
	}
	defer st.Close()
	return c.DeleteSavepoint(ctx, head, runner.KeepOf(p), name)
}

// ImportSavepoint validates a savepoint folder at dirURL whose state files
// were changed offline (with DuckDB, pandas, a Go program) and stores it as
// the named savepoint: every state file must have the operator's state
// schema (as the spec compiles it) and keep its rows in its key-group range;
// sizes, checksums and row counts are recomputed, so the stored savepoint's
// manifest matches the edited files. The folder's other files (segments,
// generation record) are copied as they are, verified.
func ImportSavepoint(ctx context.Context, p *spec.Pipeline, name, dirURL string) (*SavepointInfo, error) {
	if err := manifest.ValidateSavepointName(name); err != nil {
		return nil, err
	}
	st, c, head, err := runner.OpenHead(ctx, p)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	_, _ = c, head
	src, err := store.Open(ctx, dirURL)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", store.Redact(dirURL), err)
	}
	defer src.Close()
	read := func(key string) ([]byte, error) {
		data, _, err := src.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("import: read %s: %w", key, err)
		}
		return data, nil
	}
	mdata, err := read(manifest.SavepointManifestFile)
	if err != nil {
		return nil, err
	}
	m, err := manifest.DecodeManifest(manifest.SavepointManifestFile, mdata)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	gdata, err := read(manifest.SavepointGenFile)
	if err != nil {
		return nil, err
	}
	g, err := manifest.DecodeGeneration(manifest.SavepointGenFile, gdata)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if m.Pipeline != p.Name || g.Generation != m.Generation {
		return nil, fmt.Errorf("import: the folder holds epoch %d of pipeline %q (generation record %d), not a savepoint of %q", m.Epoch, m.Pipeline, g.Generation, p.Name)
	}
	schemas, err := stateSchemas(ctx, p)
	if err != nil {
		return nil, err
	}
	u, err := runner.SavepointURL(p, name)
	if err != nil {
		return nil, err
	}
	dst, err := store.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	if _, _, err := dst.Get(ctx, manifest.SavepointFile); err == nil {
		return nil, fmt.Errorf("%w: %s", epoch.ErrSavepointExists, name)
	}
	sp := &manifest.Savepoint{FormatVersion: manifest.FormatVersion, Pipeline: p.Name, Name: name,
		Generation: m.Generation, Epoch: m.Epoch, Watermark: m.Watermark, CreatedAt: time.Now().UTC()}
	put := func(key string, data []byte) error {
		if _, err := dst.Put(ctx, key, data, store.PutOptions{}); err != nil {
			return fmt.Errorf("import: write %s: %w", key, err)
		}
		sp.Files++
		sp.Bytes += int64(len(data))
		return nil
	}
	var schema *arrow.Schema // of the operator whose files fix checks
	fix := func(refs []manifest.FileRef, state bool) error {
		for i, ref := range refs {
			data, err := read(ref.Path)
			if err != nil {
				return err
			}
			if !state {
				if err := manifest.VerifyFile(ref, data); err != nil {
					return fmt.Errorf("import: %w", err)
				}
			} else {
				rows, err := checkStateFile(data, ref, schema)
				if err != nil {
					return fmt.Errorf("import: %s: %w", ref.Path, err)
				}
				nr := manifest.NewFileRef(ref.Path, data)
				nr.Rows, nr.Subtask, nr.KeyGroupLo, nr.KeyGroupHi, nr.Kind = rows, ref.Subtask, ref.KeyGroupLo, ref.KeyGroupHi, ref.Kind
				refs[i] = nr
			}
			if err := put(ref.Path, data); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range m.Operators {
		id := m.Operators[i].ID
		if schema = schemas[id]; schema == nil {
			return nil, fmt.Errorf("import: the savepoint holds state of operator %q, which is not a stateful operator of the spec (%s)", id, strings.Join(slices.Sorted(maps.Keys(schemas)), ", "))
		}
		if err := fix(m.Operators[i].Files, true); err != nil {
			return nil, err
		}
		for j, d := range m.Operators[i].Deltas {
			if d.Kind == manifest.DeltaTombstones {
				if err := fix(m.Operators[i].Deltas[j:j+1], false); err != nil {
					return nil, err
				}
				continue
			}
			if err := fix(m.Operators[i].Deltas[j:j+1], true); err != nil {
				return nil, err
			}
		}
	}
	if err := fix(m.Source.Segments, false); err != nil {
		return nil, err
	}
	if err := fix(m.OutputLog, false); err != nil {
		return nil, err
	}
	m.Checksum = ""
	newM, err := manifest.EncodeManifest(m)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	sp.ManifestChecksum = manifest.Checksum(newM)
	if _, err := dst.Put(ctx, manifest.SavepointManifestFile, newM, store.PutOptions{}); err != nil {
		return nil, err
	}
	if _, err := dst.Put(ctx, manifest.SavepointGenFile, gdata, store.PutOptions{}); err != nil {
		return nil, err
	}
	data, err := manifest.EncodeSavepoint(sp)
	if err != nil {
		return nil, err
	}
	if _, err := dst.Put(ctx, manifest.SavepointFile, data, store.PutOptions{IfNotExist: true}); err != nil {
		return nil, fmt.Errorf("import: write %s: %w", manifest.SavepointFile, err)
	}
	if _, err := epoch.ReadSavepoint(ctx, dst); err != nil {
		return nil, fmt.Errorf("import: the stored savepoint does not read back: %w", err)
	}
	return savepointInfo(epoch.SavepointInfo{Name: name, Savepoint: sp}, u), nil
}

// stateSchemas compiles the spec's plan as a run does (a linear pipeline
// lowered onto the graph; declared schemas, or inferred from the sources)
// and returns each stateful operator's state schema, by operator id.
func stateSchemas(ctx context.Context, p *spec.Pipeline) (map[string]*arrow.Schema, error) {
	err := sinks.CheckSinks(p)
	if err != nil {
		return nil, err
	}
	st, err := runner.OpenStores(ctx, p, &runner.Options{}, needsSourceFiles(p)) // the sources only to infer a schema
	if err != nil {
		return nil, err
	}
	defer st.Close()
	pl, _, err := compileTool(ctx, p, st.Source)
	if err != nil {
		return nil, err
	}
	if len(pl.Graph.State) == 0 {
		return nil, fmt.Errorf("the pipeline has no stateful operator")
	}
	out := map[string]*arrow.Schema{}
	for _, n := range pl.Graph.State {
		op, err := n.NewOp()
		if err != nil {
			return nil, fmt.Errorf("operator %q: %w", n.Name, err)
		}
		out[n.Name] = op.StateSchema()
	}
	return out, nil
}

// checkStateFile checks an edited state file: Parquet with exactly the
// state schema's columns (names and types, in order), every row's key group
// within the file's range. It returns the row count.
func checkStateFile(data []byte, ref manifest.FileRef, want *arrow.Schema) (int64, error) {
	got, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if got.NumFields() != want.NumFields() {
		return 0, fmt.Errorf("%d columns, the state schema has %d (%v)", got.NumFields(), want.NumFields(), dataflow.FieldNames(want))
	}
	for i, f := range want.Fields() {
		g := got.Field(i)
		if g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			return 0, fmt.Errorf("column %d is %s %s, the state schema has %s %s", i, g.Name, g.Type, f.Name, f.Type)
		}
	}
	kgCol := want.FieldIndices(operators.ColKeyGroup)
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
		if len(kgCol) != 1 {
			continue
		}
		col := r.Column(kgCol[0])
		for i := 0; i < col.Len(); i++ {
			var kg int64
			switch a := col.(type) {
			case *array.Int32:
				kg = int64(a.Value(i))
			case *array.Int64:
				kg = a.Value(i)
			default:
				return 0, fmt.Errorf("key_group column of type %s", col.DataType())
			}
			if kg < int64(ref.KeyGroupLo) || kg >= int64(ref.KeyGroupHi) {
				return 0, fmt.Errorf("row %d has key group %d, outside the file's range [%d, %d)", rows-r.NumRows()+int64(i)+1, kg, ref.KeyGroupLo, ref.KeyGroupHi)
			}
		}
	}
	return rows, nil
}
