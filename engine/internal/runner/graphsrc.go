package runner

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Decoding the files of a pipeline's sources (package engine/internal/sources
// says how a graph's named sources are combined and listed).

// IsGraph reports whether p is written in the graph form.
func IsGraph(p *spec.Pipeline) bool { return len(p.Sources) > 0 }

// decodeGraphFile decodes one file of a graph pipeline's source with that
// source's format, schema and event time, and runs the source's decode
// chain (dataflow.decodeChains) on its batches.
func (r *Runner) decodeGraphFile(ctx context.Context, f store.ObjectInfo, parallel int) (*fileResult, error) {
	node, _ := r.Plan.Graph.SourceOf(f.Key)
	if node == nil {
		return nil, fmt.Errorf("source file %s belongs to no source of the pipeline", f.Key)
	}
	src := &node.Src.Source
	opts := sources.DecodeOptions(src, node.Out, r.Mem, parallel)
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
	kafkaRejects(res, src, r.P)
	tsCol := node.Out.FieldIndices(src.EventTime)[0]
	for _, b := range d.Batches {
		ts := b.Column(tsCol).(*array.Timestamp)
		for i, v := range ts.Values() {
			if int64(v) > res.maxTS && ts.IsValid(i) {
				res.maxTS = int64(v)
			}
		}
	}
	if start, _, _ := src.StartTime(); !start.IsZero() && res.maxTS < start.UnixMicro() && !kafkaIgnoresStartTime(src) {
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
			if sc, err = sources.InferSchema(ctx, sp, src, mine); err != nil {
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
			sc, err = sources.InferSchema(ctx, &spec.Pipeline{Source: spec.Source{Format: l.Format, URL: l.URL}}, ls, files)
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
