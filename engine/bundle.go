package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Regression bundles (floe replay --emit-test DIR).
//
// A bundle is a folder that replays one committed epoch on its own, offline,
// and compares the rows with the ones the epoch produced when it was
// emitted, byte for byte:
//
//	DIR/bundle.json     BundleManifest: pipeline, epoch, generation, the
//	                    recorded watermark and per-input progress, the
//	                    parallelism, the input files (size, checksum), the
//	                    format versions
//	DIR/spec.yaml       the pipeline's spec, its source, state, sink, late and
//	                    rejected URLs rewritten to folders inside the bundle
//	                    (inputs, work/...; replay writes nothing to them)
//	DIR/inputs/<key>    the input files the epoch consumed, as they were
//	DIR/state/          the state the epoch started from, as a savepoint
//	                    folder (epoch N-1); empty when it started from empty
//	                    windows (the pipeline's first epoch, a reset)
//	DIR/schema.parquet  only when the spec declares no source.schema: the
//	                    schema inferred from the source, as an empty
//	                    Parquet file (the bundle's inputs alone may infer
//	                    another one)
//	DIR/golden.txt      the canonical replay lines (ReplayResult.Lines)
//	DIR/replay_test.go  one test: bundle.Check(t, ".")
//	DIR/.gitattributes  "* -text": git must not touch line endings
//
// ReplayBundle re-runs the epoch from the bundle alone, by the same path
// Replay takes (the plan a run compiles, runner.restore of the savepoint,
// then decodeEpoch and process at the recorded watermark: the determinism
// contract in replay.go), for a bundle of either format, so the bundle
// checks the behaviour of the floe it is built with against the rows of the
// floe that emitted it. Package bundle wraps it for tests.

// Bundle layout: file names inside a bundle folder.
const (
	BundleManifestFile = "bundle.json"
	BundleSpecFile     = "spec.yaml"
	BundleGoldenFile   = "golden.txt"
	BundleInputsDir    = "inputs"
	BundleStateDir     = "state"
	BundleSchemaFile   = "schema.parquet"
	BundleTestFile     = "replay_test.go"
	BundleLookupsDir   = "lookups"
	// BundleFormat is the newest bundle.json format version: 1 for linear
	// pipelines, 2 (stage watermarks, lookup tables, per-source schemas)
	// for graph pipelines.
	BundleFormat = 2
)

// BundleManifest is bundle.json.
type BundleManifest struct {
	BundleFormat int `json:"bundle_format"`
	// ManifestFormat is the manifest format version of the floe that
	// emitted the bundle; StateFormat the one of the starting state's
	// manifest (0: no starting state).
	ManifestFormat int    `json:"manifest_format"`
	StateFormat    int    `json:"state_format,omitempty"`
	FloeVersion    string `json:"floe_version,omitempty"` // the emitting build's module version
	Pipeline       string `json:"pipeline"`
	Epoch          int64  `json:"epoch"`
	Generation     int64  `json:"generation"`
	// Parent is the epoch the replay starts from (as recorded; its state is
	// in state/ unless Restart is a reset); Restart how epoch's generation
	// began when it is its first epoch (a manifest.Restore* kind).
	Parent         *manifest.Ref `json:"parent,omitempty"`
	Restart        string        `json:"restart,omitempty"`
	Parallelism    int           `json:"parallelism"`
	MaxParallelism int           `json:"max_parallelism"`
	// Watermark is the one the epoch recorded (microseconds; WatermarkText
	// for people), Inputs the per-input progress it recorded.
	Watermark     int64                          `json:"watermark_us"`
	WatermarkText string                         `json:"watermark"`
	Inputs        map[string]manifest.InputState `json:"inputs,omitempty"`
	// Files are the consumed input files, in the epoch's order, under
	// inputs/.
	Files []BundleFile `json:"files"`
	// Schema names the inferred source schema file ("" : spec.yaml declares
	// source.schema).
	Schema string `json:"schema,omitempty"`
	// SkipRead: the epoch marked its files read without reading them
	// (start_from: latest on a new pipeline).
	SkipRead bool `json:"skip_read,omitempty"`
	// Counters are what the replay counted when the bundle was emitted
	// (this epoch only); Recorded what the epoch's manifest records.
	Counters    manifest.Counters `json:"counters"`
	Recorded    manifest.Counters `json:"recorded_counters"`
	GoldenLines int               `json:"golden_lines"`

	// Graph pipelines (bundle_format 2; bundlegraph.go). Schemas names the
	// schema file of each source that declares none; StageWatermarks is
	// the watermark each keyed stage advanced to in the epoch; Lookups are
	// the lookup tables the epoch read, copied under lookups/<stage>/.
	Schemas         map[string]string `json:"schemas,omitempty"`
	StageWatermarks map[string]int64  `json:"stage_watermarks_us,omitempty"`
	Lookups         []BundleLookup    `json:"lookups,omitempty"`
}

// BundleLookup is the table one lookup stage read, as the bundle holds it.
type BundleLookup struct {
	Stage   string       `json:"stage"`
	Version string       `json:"version"` // as the epoch's manifest recorded it
	Files   []BundleFile `json:"files"`
}

// BundleFile is one input file of a bundle.
type BundleFile struct {
	Key      string `json:"key"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
}

// EmitOptions select the epoch EmitTestBundle writes a bundle of.
type EmitOptions struct {
	ReplayOptions
	// Spec is the pipeline's spec as written (YAML); the bundle's
	// spec.yaml is it with its URLs rewritten. Required.
	Spec []byte
	// Dir is the local folder to write; it must not exist or be empty,
	// and must neither lie inside nor contain a location of the pipeline
	// (CheckOutputPath).
	Dir string
}

// EmitTestBundle replays epoch opts.Epoch (as Replay does) and writes a
// self-contained regression bundle of it to opts.Dir (see the layout
// above). It writes nothing to the pipeline's state, sink or side outputs.
func EmitTestBundle(ctx context.Context, p *spec.Pipeline, opts EmitOptions) (*BundleManifest, error) {
	if opts.Dir == "" {
		return nil, errors.New("emit-test: no folder given")
	}
	if err := runner.RefuseKafka(p, "emit-test"); err != nil {
		return nil, err
	}
	if len(opts.Spec) == 0 {
		return nil, errors.New("emit-test: the spec's YAML is needed (it is copied into the bundle)")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("emit-test: %w", err)
	}
	if err := owner.CheckOutputPath(p, "emit-test", opts.Dir, true); err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("emit-test: %s is not empty: give a new or empty folder", opts.Dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("emit-test: %w", err)
	}
	specYAML, err := bundleSpec(opts.Spec, p)
	if err != nil {
		return nil, err
	}
	y, err := newReplayer(ctx, p, opts.ReplayOptions)
	if err != nil {
		return nil, err
	}
	defer y.close()
	res, err := y.replay(ctx)
	if err != nil {
		return nil, err
	}
	b := &BundleManifest{BundleFormat: 1, ManifestFormat: manifest.FormatVersion, FloeVersion: floeVersion(),
		Pipeline: res.Pipeline, Epoch: res.Epoch, Generation: res.Generation, Parent: res.Parent, Restart: res.Restart,
		Parallelism: res.Parallelism, MaxParallelism: y.g.MaxParallelism, Watermark: res.Watermark, WatermarkText: runner.FmtWM(res.Watermark),
		Inputs: res.Inputs, SkipRead: y.skipRead, Counters: res.Counters, Recorded: res.Recorded}
	golden := linesText(res.Lines())
	b.GoldenLines = len(res.Lines())

	if err := os.MkdirAll(filepath.Join(dir, BundleStateDir), 0o755); err != nil {
		return nil, fmt.Errorf("emit-test: %w", err)
	}
	write := func(rel string, data []byte) error {
		full := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("emit-test: %w", err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return fmt.Errorf("emit-test: %w", err)
		}
		return nil
	}
	// The input files, as the epoch read them.
	for _, key := range res.Files {
		if err := manifest.ValidateSourceKey(key); err != nil {
			return nil, fmt.Errorf("emit-test: input file %q: %w", key, err)
		}
		data, err := store.Read(ctx, y.x.st.Source, key)
		if errors.Is(err, store.ErrNotFound) {
			// Gone from the source: the copy the epoch captured, if any.
			for _, ref := range y.m.Source.Captured {
				if runner.CapturedKey(ref) == key {
					data, err = y.x.c.ReadFile(ctx, ref)
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("emit-test: read input file %s: %w", key, err)
		}
		if err := write(BundleInputsDir+"/"+key, data); err != nil {
			return nil, err
		}
		b.Files = append(b.Files, BundleFile{Key: key, Size: int64(len(data)), Checksum: manifest.Checksum(data)})
	}
	// The starting state, as a savepoint folder.
	if y.parent != nil && res.Restart != manifest.RestoreReset {
		b.StateFormat = y.parent.FormatVersion
		dst, err := store.Open(ctx, fileURLOf(filepath.Join(dir, BundleStateDir)))
		if err != nil {
			return nil, fmt.Errorf("emit-test: %w", err)
		}
		defer dst.Close()
		if y.from != nil {
			// N's generation began from a savepoint: copy its folder.
			if err := copyStore(ctx, y.from.Store, dst); err != nil {
				return nil, fmt.Errorf("emit-test: copy the savepoint epoch %d started from: %w", res.Epoch, err)
			}
		} else {
			name := fmt.Sprintf("epoch-%d", y.parent.Epoch)
			if _, err := y.x.c.CreateSavepoint(ctx, y.parent, name, dst); err != nil {
				return nil, fmt.Errorf("emit-test: write the state of epoch %d: %w", y.parent.Epoch, err)
			}
		}
	}
	if err := y.emitGraph(ctx, p, b, write); err != nil {
		return nil, err
	}
	mdata, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{BundleSpecFile, specYAML},
		{BundleGoldenFile, golden},
		{BundleTestFile, []byte(bundleTestSource(dir, b))},
		{".gitattributes", []byte("* -text\n")},
		{BundleManifestFile, append(mdata, '\n')},
	} {
		if err := write(f.name, f.data); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// ReadBundleManifest reads a bundle's bundle.json.
func ReadBundleManifest(dir string) (*BundleManifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, BundleManifestFile))
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	var b BundleManifest
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("bundle: %s: %w", BundleManifestFile, err)
	}
	if b.BundleFormat < 1 || b.BundleFormat > BundleFormat {
		return nil, fmt.Errorf("bundle: %s has bundle_format %d; this floe reads 1..%d", BundleManifestFile, b.BundleFormat, BundleFormat)
	}
	if b.Parallelism < 1 || b.MaxParallelism < b.Parallelism {
		return nil, fmt.Errorf("bundle: %s: parallelism %d, max_parallelism %d: %w", BundleManifestFile, b.Parallelism, b.MaxParallelism, manifest.ErrCorrupt)
	}
	return &b, nil
}

// BundleReplayOptions tune ReplayBundle.
type BundleReplayOptions struct {
	// Parallelism replays with this many subtasks (0: the bundle's). The
	// rows do not depend on it.
	Parallelism int
	Log         *slog.Logger
}

// ReplayBundle replays the epoch of the bundle in dir from the bundle
// alone: it restores the savepoint in state/ (nothing when it is empty),
// decodes the files under inputs/ in the recorded order, checking their
// sizes and checksums, and processes them at the recorded watermark. It
// writes nothing. Compare its Lines with golden.txt (package bundle does).
func ReplayBundle(ctx context.Context, dir string, opts BundleReplayOptions) (*ReplayResult, *BundleManifest, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	b, err := ReadBundleManifest(dir)
	if err != nil {
		return nil, nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sdata, err := os.ReadFile(filepath.Join(dir, BundleSpecFile))
	if err != nil {
		return nil, b, fmt.Errorf("bundle: %w", err)
	}
	p, err := spec.Parse(filepath.Join(dir, BundleSpecFile), sdata, dir)
	if err != nil {
		return nil, b, fmt.Errorf("bundle: %w", err)
	}
	if p.Name != b.Pipeline {
		return nil, b, fmt.Errorf("bundle: spec.yaml names pipeline %q, bundle.json %q", p.Name, b.Pipeline)
	}
	srcStore, err := store.Open(ctx, fileURLOf(filepath.Join(dir, BundleInputsDir)))
	if err != nil {
		return nil, b, fmt.Errorf("bundle: %w", err)
	}
	defer srcStore.Close()
	stStore, err := store.Open(ctx, fileURLOf(filepath.Join(dir, BundleStateDir)))
	if err != nil {
		return nil, b, fmt.Errorf("bundle: %w", err)
	}
	defer stStore.Close()

	// The input files, checked against what the bundle recorded.
	files := make([]store.ObjectInfo, len(b.Files))
	for i, f := range b.Files {
		if err := manifest.ValidateSourceKey(f.Key); err != nil {
			return nil, b, fmt.Errorf("bundle: input %q: %w", f.Key, err)
		}
		data, err := store.Read(ctx, srcStore, f.Key)
		if err != nil {
			return nil, b, fmt.Errorf("bundle: input file %s: %w", f.Key, err)
		}
		if int64(len(data)) != f.Size || manifest.Checksum(data) != f.Checksum {
			return nil, b, fmt.Errorf("bundle: input file %s is not the one the epoch read (%d bytes, bundle.json records %d and its checksum): %w",
				f.Key, len(data), f.Size, manifest.ErrCorrupt)
		}
		files[i] = store.ObjectInfo{Key: f.Key, Size: f.Size}
	}

	err = sinks.CheckSinks(p)
	if err != nil {
		return nil, b, fmt.Errorf("bundle: %w", err)
	}
	pl, err := bundlePlan(ctx, dir, b, p)
	if err != nil {
		return nil, b, err
	}
	r, rp, err := bundleRunner(ctx, b, p, pl, srcStore, stStore, opts, log)
	if err != nil {
		return nil, b, err
	}
	if g := rp.From.Generation; g != nil { // the state layouts the bundle's generation recorded (dataflow.Plan.WithRecordedLayouts)
		if pl, err = pl.WithRecordedLayouts(g.Plan); err != nil {
			return nil, b, fmt.Errorf("bundle: %w", err)
		}
		r.Plan, rp.Plan = pl, pl
	}
	if from := rp.From; from.Manifest != nil && from.Generation != nil {
		if rp.Stages, err = dataflow.EvolveGraph(from.Generation.Plan, pl, nil); err != nil {
			return nil, b, fmt.Errorf("bundle: the state in %s cannot be restored with spec.yaml: %w", BundleStateDir, err)
		}
	}
	if err := r.Restore(ctx, rp); err != nil {
		return nil, b, fmt.Errorf("bundle: restore %s: %w", BundleStateDir, err)
	}
	if err := r.LoadEverything(ctx); err != nil {
		return nil, b, fmt.Errorf("bundle: restore %s: %w", BundleStateDir, err)
	}
	if !pl.Graph.Linear {
		// Each stage advances to the watermark it recorded (a linear
		// pipeline's one window advances to the epoch's).
		r.StageWM = maps.Clone(b.StageWatermarks)
		if r.StageWM == nil {
			r.StageWM = map[string]int64{}
		}
	}
	if err := r.RefreshLookups(ctx); err != nil {
		return nil, b, fmt.Errorf("bundle: %w", err)
	}
	res := &ReplayResult{Pipeline: p.Name, Epoch: b.Epoch, Generation: b.Generation, Parent: b.Parent, Restart: b.Restart,
		Parallelism: rp.Parallelism, Watermark: b.Watermark, Inputs: b.Inputs, Recorded: b.Recorded}
	for _, f := range b.Files {
		res.Files = append(res.Files, f.Key)
	}
	if _, err := replayFiles(r, ctx, b.Epoch, files, b.Watermark, res); err != nil {
		return nil, b, err
	}
	return res, b, nil
}

// bundleRunner returns the runner and plan that replay a bundle's epoch:
// the starting state is the savepoint in state/ (none for a first epoch or
// a reset), at the bundle's parallelism or opts'.
func bundleRunner(ctx context.Context, b *BundleManifest, p *spec.Pipeline, pl *dataflow.Plan, srcStore, stStore store.Store,
	opts BundleReplayOptions, log *slog.Logger) (*runner.Runner, *runner.RunPlan, error) {
	from := runner.RestoreSource{Store: stStore}
	if b.Parent != nil && b.Restart != manifest.RestoreReset {
		sp, err := epoch.ReadSavepoint(ctx, stStore)
		if err != nil {
			return nil, nil, fmt.Errorf("bundle: %s: %w", BundleStateDir, err)
		}
		if got := sp.Manifest.Ref(); got != *b.Parent {
			return nil, nil, fmt.Errorf("bundle: %s holds %s, bundle.json says the epoch started from %s: %w", BundleStateDir, got, b.Parent, manifest.ErrCorrupt)
		}
		m := *sp.Manifest
		m.OutputLog = nil // not needed
		from.Manifest, from.Generation = &m, sp.Generation
	}
	par, k := b.Parallelism, b.MaxParallelism
	if opts.Parallelism > 0 {
		par = opts.Parallelism
	}
	if par > k {
		return nil, nil, fmt.Errorf("bundle: parallelism %d exceeds max_parallelism %d", par, k)
	}
	r := &runner.Runner{P: p, Opts: &runner.Options{}, Log: log, St: &runner.Stores{Source: srcStore, State: stStore}, Mem: memory.DefaultAllocator,
		Dc: decide.NewConfig(p), Plan: pl, Parallelism: par, K: k, SkipRead: b.SkipRead}
	return r, &runner.RunPlan{Plan: pl, Parallelism: par, K: k, From: &from}, nil
}

// bundleSpec rewrites the spec's URLs to folders inside the bundle: the
// source to inputs/ (a graph's sources to inputs/<source>, its lookup
// tables to lookups/<stage>), the state, sinks and side outputs under work/
// (never written: a bundle replay writes nothing).
func bundleSpec(data []byte, p *spec.Pipeline) ([]byte, error) {
	f, err := parser.ParseBytes(data, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("emit-test: the spec's YAML: %w", err)
	}
	for _, r := range bundleRewrites(p) {
		p, err := yaml.PathString(r.path)
		if err != nil {
			return nil, err
		}
		if _, err := p.FilterFile(f); err != nil {
			continue // not in the spec
		}
		if err := p.ReplaceWithReader(f, strings.NewReader(fmt.Sprintf("%q", r.to))); err != nil {
			return nil, fmt.Errorf("emit-test: rewrite %s: %w", r.path, err)
		}
	}
	out := []byte(f.String())
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	// It must still parse to a spec whose URLs are all inside the bundle.
	base := filepath.Join(os.TempDir(), "floe-bundle-check")
	q, err := spec.Parse(BundleSpecFile, out, base)
	if err != nil {
		return nil, fmt.Errorf("emit-test: the rewritten spec does not parse: %w", err)
	}
	for _, u := range specURLs(q) {
		if u != "" && !strings.HasPrefix(u, fileURLOf(base)+"/") {
			return nil, fmt.Errorf("emit-test: the spec names %s, which the bundle cannot rewrite to a folder of its own", store.Redact(u))
		}
	}
	return out, nil
}

// bundleRewrite sets the YAML value at path to a bundle folder.
type bundleRewrite struct{ path, to string }

// bundleRewrites lists every URL field of p's form and the bundle folder
// it becomes.
func bundleRewrites(p *spec.Pipeline) []bundleRewrite {
	if !runner.IsGraph(p) {
		return []bundleRewrite{
			{"$.source.url", BundleInputsDir},
			{"$.source.late_url", "work/late"},
			{"$.source.rejected_url", "work/rejected"},
			{"$.sink.url", "work/sink"},
			{"$.state.url", "work/state"},
		}
	}
	// Names are [a-z0-9_-]: quoted, they are YAML path selectors.
	var rw []bundleRewrite
	for _, ns := range p.Sources {
		rw = append(rw, bundleRewrite{"$.sources.'" + ns.Name + "'.url", BundleInputsDir + "/" + ns.Name},
			bundleRewrite{"$.sources.'" + ns.Name + "'.rejected_url", "work/rejected"})
	}
	for i, st := range p.Stages {
		rw = append(rw, bundleRewrite{fmt.Sprintf("$.stages[%d].late_url", i), "work/late/" + st.Name},
			bundleRewrite{fmt.Sprintf("$.stages[%d].lookup.url", i), BundleLookupsDir + "/" + st.Name})
	}
	for _, sk := range p.Sinks {
		rw = append(rw, bundleRewrite{"$.sinks.'" + sk.Name + "'.url", "work/sinks/" + sk.Name})
	}
	return append(rw, bundleRewrite{"$.state.url", "work/state"})
}

// specURLs returns every location p names.
func specURLs(p *spec.Pipeline) []string {
	us := []string{p.Source.URL, p.Source.LateURL, p.Source.RejectedURL, p.Sink.URL, p.State.URL}
	for _, ns := range p.Sources {
		us = append(us, ns.Source.URL, ns.Source.LateURL, ns.Source.RejectedURL)
	}
	for _, st := range p.Stages {
		us = append(us, st.LateURL)
		if st.Lookup != nil {
			us = append(us, st.Lookup.URL)
		}
	}
	for _, sk := range p.Sinks {
		us = append(us, sk.Sink.URL)
	}
	return us
}

// copyStore copies every object of src to dst.
func copyStore(ctx context.Context, src, dst store.Store) error {
	objs, err := src.List(ctx, "")
	if err != nil {
		return err
	}
	for _, o := range objs {
		data, _, err := src.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		if _, err := dst.Put(ctx, o.Key, data, store.PutOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func fileURLOf(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

func linesText(lines []string) []byte {
	var b bytes.Buffer
	_ = writeLines(&b, lines)
	return b.Bytes()
}

// floeVersion is the floe module's version in this build ("" unknown).
func floeVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == "github.com/floe-dev/floe" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/floe-dev/floe" {
			return d.Version
		}
	}
	return ""
}

// BundlePackage is the Go package name of a bundle folder's test file:
// the folder's name, lower-cased, other characters than letters, digits
// and '_' replaced by '_', prefixed when it does not start with a letter.
func BundlePackage(dir string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(filepath.Base(dir)) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z') {
		s = "bundle_" + s
	}
	return strings.TrimRight(s, "_")
}

func bundleTestSource(dir string, b *BundleManifest) string {
	return fmt.Sprintf(`// Code generated by floe replay --emit-test. DO NOT EDIT.

// A byte-exact regression test: it replays epoch %d of pipeline %q (its
// input files, the state it started from, its recorded watermark, all in this
// folder) and compares the rows with golden.txt.
package %s_test

import (
	"testing"

	"github.com/floe-dev/floe/bundle"
)

func TestReplayEpoch%d(t *testing.T) { bundle.Check(t, ".") }
`, b.Epoch, b.Pipeline, BundlePackage(dir), b.Epoch)
}
