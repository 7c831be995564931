package runner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// The sources of a graph pipeline.
//
// A graph pipeline reads several named sources. The runner keeps one
// listing, one processed-file set and one watermark progress map: the
// sources are combined into one store whose keys are "<source>/<key>"
// (sourceMux), and each source is one watermark input (source.inputs:
// directory on the combined source), so every source has its own
// watermark progress and idle timeout, and the pipeline's watermark is the
// minimum over the sources, as for directory inputs. A file's source is the
// first segment of its combined key (spec.Pipeline.SourceOfKey); it is
// decoded with that source's format, schema and event time, and the
// source's own limits apply to it: max_files_per_epoch (decide),
// max_rows_per_epoch (DecodeEpoch), max_rejected_fraction (checkRejected),
// capture and on_error. Nothing merges the sources' settings.

// IsGraph reports whether p is written in the graph form.
func IsGraph(p *spec.Pipeline) bool { return len(p.Sources) > 0 }

// SourcesURL names p's sources in messages: source.url, or in the graph
// form each named source's URL ("sources(a=..., b=...)"), redacted.
func SourcesURL(p *spec.Pipeline) string {
	if !IsGraph(p) {
		return store.Redact(p.Source.URL)
	}
	var parts []string
	for _, ns := range p.Sources {
		parts = append(parts, ns.Name+"="+store.Redact(ns.Source.URL))
	}
	return "sources(" + strings.Join(parts, ", ") + ")"
}

// sourceMux is the combined store of a graph pipeline's sources: key
// "<name>/<key>" is key of source name. It only reads.
type sourceMux struct {
	names  []string // sorted
	stores map[string]store.Store
}

func (m *sourceMux) split(key string) (store.Store, string, error) {
	name, rest, ok := strings.Cut(key, "/")
	s := m.stores[name]
	if !ok || s == nil {
		return nil, "", fmt.Errorf("source file %q names no source of the pipeline (%s): %w", key, strings.Join(m.names, ", "), store.ErrNotFound)
	}
	return s, rest, nil
}

func (m *sourceMux) Get(ctx context.Context, key string) ([]byte, string, error) {
	s, k, err := m.split(key)
	if err != nil {
		return nil, "", err
	}
	return s.Get(ctx, k)
}

func (m *sourceMux) Read(ctx context.Context, key string) ([]byte, error) {
	s, k, err := m.split(key)
	if err != nil {
		return nil, err
	}
	return store.Read(ctx, s, k)
}

func (m *sourceMux) Put(ctx context.Context, key string, _ []byte, _ store.PutOptions) (string, error) {
	return "", fmt.Errorf("write %s: the sources of a pipeline are read only", key)
}

func (m *sourceMux) Delete(ctx context.Context, key string) error {
	return fmt.Errorf("delete %s: the sources of a pipeline are read only", key)
}

// List lists every source (each in key order, sources by name) with the
// source's name prefixed; a prefix selects as on the combined keys.
func (m *sourceMux) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	var out []store.ObjectInfo
	for _, name := range m.names {
		p := name + "/"
		if !strings.HasPrefix(p, prefix) && !strings.HasPrefix(prefix, p) {
			continue
		}
		sub := ""
		if strings.HasPrefix(prefix, p) {
			sub = prefix[len(p):]
		}
		objs, err := m.stores[name].List(ctx, sub)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", name, err)
		}
		for _, o := range objs {
			o.Key = p + o.Key
			out = append(out, o)
		}
	}
	return out, nil
}

func (m *sourceMux) Close() error {
	var first error
	for _, s := range m.stores {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// openGraphSources opens each named source of p (wrapped like any store)
// and combines them.
func openGraphSources(ctx context.Context, p *spec.Pipeline, open func(name, field, url string) (store.Store, error)) (store.Store, error) {
	m := &sourceMux{stores: map[string]store.Store{}}
	for _, ns := range p.Sources {
		s, err := open("source", fmt.Sprintf("sources.%s.url", ns.Name), ns.Source.URL)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.stores[ns.Name] = s
		m.names = append(m.names, ns.Name)
	}
	slices.Sort(m.names)
	return m, nil
}

// namedSource returns the named source a combined key belongs to.
func namedSource(p *spec.Pipeline, key string) (*spec.NamedSource, string) {
	name, rest, _ := strings.Cut(key, "/")
	for i := range p.Sources {
		if p.Sources[i].Name == name {
			return &p.Sources[i], rest
		}
	}
	return nil, rest
}

// sourceDelay is a named source's max_out_of_orderness.
func sourceDelay(p *spec.Pipeline, name string) time.Duration {
	for _, ns := range p.Sources {
		if ns.Name == name {
			return ns.Source.Watermark.MaxOutOfOrderness
		}
	}
	return 0
}

// decodeGraphFile decodes one file of a graph pipeline's source with that
// source's format, schema and event time, and runs the source's decode
// chain (dataflow.decodeChains) on its batches.
func (r *Runner) decodeGraphFile(ctx context.Context, f store.ObjectInfo, parallel int) (*fileResult, error) {
	node, _ := r.Plan.Graph.SourceOf(f.Key)
	if node == nil {
		return nil, fmt.Errorf("source file %s belongs to no source of the pipeline", f.Key)
	}
	src := &node.Src.Source
	opts := decodeOptionsOf(src, node.Out, r.Mem, parallel)
	var d *formats.Decoded
	sparse, err := r.readColumns(ctx, f, src.Format, node.Out)
	if err != nil {
		return nil, err
	}
	if sparse != nil {
		d, err = formats.DecodeParquetAt(f.Key, sparse, opts)
	} else {
		data, rerr := r.readSource(ctx, f.Key)
		if rerr != nil {
			return nil, rerr
		}
		d, err = formats.Decode(string(src.Format), f.Key, data, opts)
	}
	if err != nil {
		return r.undecodable(f.Key, err)
	}
	res := &fileResult{key: f.Key, maxTS: math.MinInt64}
	if err := r.checkDecoded(res, d); err != nil {
		return nil, err
	}
	kafkaRejects(res, r.P)
	tsCol := node.Out.FieldIndices(src.EventTime)[0]
	for _, b := range d.Batches {
		ts := b.Column(tsCol).(*array.Timestamp)
		for i, v := range ts.Values() {
			if int64(v) > res.maxTS && ts.IsValid(i) {
				res.maxTS = int64(v)
			}
		}
	}
	if start, _, _ := src.StartTime(); !start.IsZero() && res.maxTS < start.UnixMicro() && !kafkaIgnoresStartTime(r.P) {
		ReleaseBatches(d.Batches)
		return &fileResult{key: f.Key, maxTS: math.MinInt64, rows: d.Rows, filtered: d.Rows, rejects: d.Rejects}, nil
	}
	res.node = node.ChainEnd
	for _, b := range d.Batches {
		for _, st := range node.Chain {
			out, dropped, err := st.Stage.Apply(b, r.Mem)
			if err != nil {
				return nil, fmt.Errorf("source file %s: stage %s: %w", f.Key, st.Name, err)
			}
			res.filtered += dropped
			b = out
			if b.NumRows() == 0 {
				break
			}
		}
		if b.NumRows() == 0 {
			continue
		}
		res.batches = append(res.batches, b)
	}
	return res, nil
}

// GraphSchemas returns each named source's schema (declared, or read from
// its first Parquet file) and each lookup stage's table schema.
func GraphSchemas(ctx context.Context, p *spec.Pipeline, src store.Store, files []store.ObjectInfo, opts *Options) (map[string]*arrow.Schema, map[string]*arrow.Schema, error) {
	schemas := map[string]*arrow.Schema{}
	for _, ns := range p.Sources {
		sp := &spec.Pipeline{Source: ns.Source}
		sc, err := dataflow.SourceSchema(sp)
		if err != nil {
			return nil, nil, fmt.Errorf("sources.%s: %w", ns.Name, err)
		}
		if sc == nil {
			var mine []store.ObjectInfo
			for _, f := range files {
				if name, _, _ := strings.Cut(f.Key, "/"); name == ns.Name {
					mine = append(mine, f)
				}
			}
			if sc, err = InferSchema(ctx, sp, src, mine); err != nil {
				return nil, nil, fmt.Errorf("sources.%s: %w", ns.Name, err)
			}
		}
		schemas[ns.Name] = sc
	}
	lookups, err := LookupSchemas(ctx, p, opts)
	if err != nil {
		return nil, nil, err
	}
	return schemas, lookups, nil
}

// LookupSchemas returns the table schema of each lookup stage of p: the
// declared one, or one inferred from its table's files.
func LookupSchemas(ctx context.Context, p *spec.Pipeline, opts *Options) (map[string]*arrow.Schema, error) {
	lookups := map[string]*arrow.Schema{}
	for _, st := range p.Stages {
		l := st.Lookup
		if l == nil {
			continue
		}
		if len(l.Schema) > 0 {
			sc, err := dataflow.SourceSchema(&spec.Pipeline{Source: spec.Source{Schema: l.Schema}})
			if err != nil {
				return nil, fmt.Errorf("stage %s: lookup.schema: %w", st.Name, err)
			}
			lookups[st.Name] = sc
			continue
		}
		ls, err := OpenLookupStore(ctx, opts, st.Name, l.URL)
		if err != nil {
			return nil, err
		}
		files, err := ListLookup(ctx, ls, l)
		if err == nil {
			var sc *arrow.Schema
			sc, err = InferSchema(ctx, &spec.Pipeline{Source: spec.Source{Format: l.Format, URL: l.URL}}, ls, files)
			lookups[st.Name] = sc
		}
		ls.Close()
		if err != nil {
			return nil, fmt.Errorf("stage %s: lookup table: %w", st.Name, err)
		}
	}
	return lookups, nil
}

// openSide opens a side-output store of a graph stage (its late_url),
// wrapped and retried like every store of the run.
func (r *Runner) openSide(ctx context.Context, name, field, url string) (store.Store, error) {
	s, err := store.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if r.Opts.WrapStore != nil {
		s = r.Opts.WrapStore(name, s)
	}
	policy := r.Opts.Retry
	if policy.Log == nil {
		policy.Log = r.Opts.log().With("store", name)
	}
	rs := store.WithRetry(s, policy)
	r.St.retrying = append(r.St.retrying, rs)
	r.St.extra = append(r.St.extra, rs)
	return rs, nil
}

// errGraphUnsupported refuses a command that does not read graph pipelines
// yet, naming it.
func errGraphUnsupported(what string) error {
	return fmt.Errorf("%s do not support pipelines in the graph form (sources/stages/sinks) yet; they read linear pipelines only", what)
}
