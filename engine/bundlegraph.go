package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Regression bundles of graph pipelines (bundle_format 2). Besides what a
// linear bundle holds, a graph bundle has:
//
//	DIR/inputs/<source>/<key>       each source's files the epoch consumed
//	DIR/lookups/<stage>/<key>       each lookup stage's table, as the epoch
//	                                read it (its recorded version)
//	DIR/schemas/<source>.parquet    the inferred schema of each source that
//	                                declares none
//
// and bundle.json records the watermark each keyed stage advanced to
// (stage_watermarks_us) and the lookup tables' files with their checksums,
// which the replay checks. The replay is Replay's: each stage advances to
// its recorded watermark and every lookup reads the bundled table.

// emitGraph writes the plan's parts of a bundle: the schemas of the
// sources that declare none and, for a graph pipeline, its stage
// watermarks and lookup tables. A linear pipeline's bundle stays
// bundle_format 1: its one source's schema is schema.parquet.
func (y *replayer) emitGraph(ctx context.Context, p *spec.Pipeline, b *BundleManifest, write func(string, []byte) error) error {
	g, err := p.Graph()
	if err != nil {
		return fmt.Errorf("emit-test: %w", err)
	}
	linear := !runner.IsGraph(p)
	if !linear {
		b.BundleFormat = BundleFormat
		b.StageWatermarks = map[string]int64{}
		for _, op := range y.m.Operators {
			b.StageWatermarks[op.ID] = op.EmittedThrough
		}
	}
	for _, ns := range g.Sources {
		if len(ns.Source.Schema) > 0 {
			continue
		}
		sc := y.schemas[ns.Name]
		if sc == nil {
			return fmt.Errorf("emit-test: sources.%s: no schema was inferred", ns.Name)
		}
		data, err := formats.EncodeParquet(sc, nil, formats.EncodeOptions{})
		if err != nil {
			return fmt.Errorf("emit-test: sources.%s schema: %w", ns.Name, err)
		}
		back, err := formats.ParquetSchema(ns.Name, data)
		switch {
		case linear && (err != nil || !back.Equal(sc)):
			return fmt.Errorf("emit-test: the inferred source schema does not survive a Parquet round trip (%v); declare source.schema in the spec", err)
		case err != nil || !back.Equal(sc):
			return fmt.Errorf("emit-test: the inferred schema of sources.%s does not survive a Parquet round trip (%v); declare its schema in the spec", ns.Name, err)
		}
		if linear {
			if err := write(BundleSchemaFile, data); err != nil {
				return err
			}
			b.Schema = BundleSchemaFile
			continue
		}
		name := "schemas/" + ns.Name + ".parquet"
		if err := write(name, data); err != nil {
			return err
		}
		if b.Schemas == nil {
			b.Schemas = map[string]string{}
		}
		b.Schemas[ns.Name] = name
	}
	recorded := map[string]string{}
	for _, lv := range y.m.Lookups {
		recorded[lv.Stage] = lv.Version
	}
	for _, st := range p.Stages {
		if st.Lookup == nil {
			continue
		}
		bl, err := emitLookup(ctx, st.Name, st.Lookup, recorded[st.Name], write)
		if err != nil {
			return err
		}
		b.Lookups = append(b.Lookups, bl)
	}
	return nil
}

// emitLookup copies one lookup stage's table into the bundle, refusing a
// table that is no longer the version the epoch recorded.
func emitLookup(ctx context.Context, stage string, l *spec.Lookup, version string, write func(string, []byte) error) (BundleLookup, error) {
	bl := BundleLookup{Stage: stage, Version: version}
	s, err := runner.OpenLookupStore(ctx, &runner.Options{}, stage, l.URL)
	if err != nil {
		return bl, fmt.Errorf("emit-test: %w", err)
	}
	defer s.Close()
	files, err := runner.ListLookup(ctx, s, l)
	if err != nil {
		return bl, fmt.Errorf("emit-test: stage %s: %w", stage, err)
	}
	if v := runner.TableVersion(files); version != "" && v != version {
		return bl, fmt.Errorf("emit-test: stage %s: its lookup table is now version %s, the epoch read version %s: the bundle would not replay the epoch", stage, v, version)
	}
	for _, f := range files {
		if err := manifest.ValidateSourceKey(f.Key); err != nil {
			return bl, fmt.Errorf("emit-test: stage %s: lookup file %q: %w", stage, f.Key, err)
		}
		data, err := store.Read(ctx, s, f.Key)
		if err != nil {
			return bl, fmt.Errorf("emit-test: stage %s: lookup file %s: %w", stage, f.Key, err)
		}
		if err := write(BundleLookupsDir+"/"+stage+"/"+f.Key, data); err != nil {
			return bl, err
		}
		bl.Files = append(bl.Files, BundleFile{Key: f.Key, Size: int64(len(data)), Checksum: manifest.Checksum(data)})
	}
	return bl, nil
}

// bundlePlan compiles the bundle's spec as the replay runs it (a linear
// pipeline lowered onto the graph) over the schemas the bundle holds: the
// declared ones, else the bundled files (a linear bundle's schema.parquet,
// a graph bundle's schemas/<source>.parquet), after checking the bundled
// lookup tables against what bundle.json recorded.
func bundlePlan(ctx context.Context, dir string, b *BundleManifest, p *spec.Pipeline) (*dataflow.Plan, error) {
	linear := !runner.IsGraph(p)
	if !linear && b.BundleFormat < 2 {
		return nil, fmt.Errorf("bundle: spec.yaml is a graph pipeline, but bundle.json has bundle_format %d (graph bundles are format 2): %w", b.BundleFormat, manifest.ErrCorrupt)
	}
	// The lookup tables, checked against what the bundle recorded.
	for _, bl := range b.Lookups {
		for _, f := range bl.Files {
			if err := manifest.ValidateSourceKey(f.Key); err != nil {
				return nil, fmt.Errorf("bundle: lookup file %q of stage %s: %w", f.Key, bl.Stage, err)
			}
			data, err := os.ReadFile(filepath.Join(dir, BundleLookupsDir, bl.Stage, filepath.FromSlash(f.Key)))
			if err != nil {
				return nil, fmt.Errorf("bundle: lookup table of stage %s: %w", bl.Stage, err)
			}
			if int64(len(data)) != f.Size || manifest.Checksum(data) != f.Checksum {
				return nil, fmt.Errorf("bundle: lookup file %s of stage %s is not the one the epoch read (%d bytes, bundle.json records %d and its checksum): %w",
					f.Key, bl.Stage, len(data), f.Size, manifest.ErrCorrupt)
			}
		}
	}
	g, err := p.Graph()
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	schemas := map[string]*arrow.Schema{}
	for _, ns := range g.Sources {
		sc, err := dataflow.SourceSchema(&spec.Pipeline{Source: ns.Source})
		if err == nil && sc == nil {
			file := b.Schemas[ns.Name]
			if linear {
				file = b.Schema
			}
			switch {
			case file == "" && linear:
				return nil, fmt.Errorf("bundle: spec.yaml declares no source.schema and bundle.json names no schema file")
			case file == "":
				return nil, fmt.Errorf("bundle: sources.%s declares no schema and bundle.json names no schema file for it", ns.Name)
			}
			var data []byte
			if data, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(file))); err == nil {
				sc, err = formats.ParquetSchema(file, data)
			}
		}
		switch {
		case err != nil && linear:
			return nil, fmt.Errorf("bundle: source schema: %w", err)
		case err != nil:
			return nil, fmt.Errorf("bundle: sources.%s schema: %w", ns.Name, err)
		}
		schemas[ns.Name] = sc
	}
	if linear {
		pl, err := dataflow.CompileLinear(p, schemas[g.Sources[0].Name])
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		return pl, nil
	}
	lookups, err := runner.LookupSchemas(ctx, p, &runner.Options{})
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	pl, err := dataflow.CompileGraph(p, schemas, lookups)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return pl, nil
}
