package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"runtime"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// ListSource lists the source: every file that is not hidden or in
// progress (names starting with "." or "_") and matches source.pattern, in
// key order.
func ListSource(ctx context.Context, p *spec.Pipeline, src store.Store) ([]store.ObjectInfo, error) {
	return listSourceAfter(ctx, p, src, "")
}

// listSourceAfter is listSource restricted to the keys after after (see
// listing.go).
func listSourceAfter(ctx context.Context, p *spec.Pipeline, src store.Store, after string) ([]store.ObjectInfo, error) {
	objs, err := store.ListAfter(ctx, src, "", after)
	if err != nil {
		return nil, fmt.Errorf("list source %s: %w", SourcesURL(p), err)
	}
	out := objs[:0]
	for _, o := range objs {
		base := path.Base(o.Key)
		if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			continue // hidden and in-progress files (Spark/Hive convention)
		}
		if pat, rel, field := patternOf(p, o.Key); pat != "" {
			ok, err := path.Match(pat, rel)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", field, pat, err)
			}
			if !ok {
				if ok2, _ := path.Match(pat, base); !ok2 {
					continue
				}
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// patternOf returns the pattern that selects listed key: source.pattern,
// or in the graph form the pattern of the named source the key's first
// segment names, matched against the key below that source (rel); field
// names it for errors.
func patternOf(p *spec.Pipeline, key string) (pat, rel, field string) {
	if !IsGraph(p) {
		return p.Source.Pattern, key, "source.pattern"
	}
	name, rest, _ := strings.Cut(key, "/")
	for _, ns := range p.Sources {
		if ns.Name == name {
			return ns.Source.Pattern, rest, "sources." + name + ".pattern"
		}
	}
	return "", key, ""
}

// PendingFiles returns the listed files not in seen, in listing order.
func PendingFiles(files []store.ObjectInfo, seen func(string) bool) []store.ObjectInfo {
	var out []store.ObjectInfo
	for _, f := range files {
		if !seen(f.Key) {
			out = append(out, f)
		}
	}
	return out
}

// InferSchema reads the footer of the first Parquet file of the listing.
func InferSchema(ctx context.Context, p *spec.Pipeline, src store.Store, files []store.ObjectInfo) (*arrow.Schema, error) {
	if p.Source.Format != spec.Parquet {
		return nil, fmt.Errorf("source.schema is required for %s sources", p.Source.Format)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("source.schema is not declared and no Parquet file exists under %s to infer it from", store.Redact(p.Source.URL))
	}
	data, err := store.Read(ctx, src, files[0].Key)
	if err != nil {
		return nil, fmt.Errorf("infer schema: %w", err)
	}
	schema, err := formats.ParquetSchema(files[0].Key, data)
	if err != nil {
		return nil, fmt.Errorf("infer schema: %w", err)
	}
	return schema, nil
}

// fileResult is one decoded file after the stateless stages, split by
// subtask.
type fileResult struct {
	key      string
	rows     int64
	filtered int64
	maxTS    int64
	batches  []arrow.RecordBatch // after the stateless stages
	rejects  []formats.Reject
	// wholeFile: no row of the file was accepted (all rejected, or the file
	// could not be decoded at all).
	wholeFile bool
	// streamed: the file's rows went straight into the epoch's output parts
	// (batches is empty); shared by every result of a streamed epoch.
	streamed *streamOut
	// node (graph plans): the node whose rows batches are, the end of the
	// file's source's decode chain.
	node *dataflow.Node
}

// readSource reads one source file, or the copy an epoch captured of it
// when it is gone from the source (replay).
func (r *Runner) readSource(ctx context.Context, key string) ([]byte, error) {
	data, err := store.Read(ctx, r.St.Source, key)
	if ref, ok := r.Captured[key]; ok && errors.Is(err, store.ErrNotFound) {
		// Gone from the source; replay reads the copy the epoch captured.
		data, err = r.C.ReadFile(ctx, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("read source file %s: %w", key, err)
	}
	return data, nil
}

func (r *Runner) decodeOptions(schema *arrow.Schema, parallel int) formats.DecodeOptions {
	return decodeOptionsOf(&r.P.Source, schema, r.Mem, parallel)
}

// decodeOptionsOf returns the options files of src decode with into schema.
func decodeOptionsOf(src *spec.Source, schema *arrow.Schema, mem memory.Allocator, parallel int) formats.DecodeOptions {
	opts := formats.DecodeOptions{Schema: schema, EventTime: src.EventTime, Mem: mem, Parallelism: parallel}
	if c := src.CSV; c != nil {
		opts.CSV.NoHeader = !c.Header
		if c.Delimiter != "" {
			opts.CSV.Delimiter = []rune(c.Delimiter)[0]
		}
	}
	return opts
}

// undecodable is the result of a file that cannot be decoded at all (not
// Parquet, a CSV header without a declared column): with on_error: fail an
// error, else the whole file rejected as one record, so one bad file does
// not stop the pipeline. (Store errors fail the epoch before this.)
func (r *Runner) undecodable(key string, err error) (*fileResult, error) {
	if r.onErrorOf(key) == spec.OnErrorFail {
		return nil, fmt.Errorf("source file: %w (on_error: fail)", err)
	}
	r.Log.Warn("rejecting an undecodable source file", "file", key, "error", err)
	return &fileResult{key: key, maxTS: math.MinInt64,
		rejects: []formats.Reject{{File: key, Line: 0, Reason: "whole file rejected: " + err.Error()}}, wholeFile: true}, nil
}

// onErrorOf is the on_error policy of the source file key belongs to: in a
// graph pipeline its named source's, else the source's.
func (r *Runner) onErrorOf(key string) spec.OnError {
	if ns, _ := namedSource(r.P, key); ns != nil {
		return ns.Source.OnError
	}
	return r.P.Source.OnError
}

// checkDecoded fills res's rows and rejects from a decoded file, warns when
// no row of it was accepted, and fails on a rejected row with on_error:
// fail.
func (r *Runner) checkDecoded(res *fileResult, d *formats.Decoded) error {
	res.rows, res.rejects = d.Rows, d.Rejects
	res.wholeFile = d.Rows == 0 && len(d.Rejects) > 0 // no row of it was accepted
	if res.wholeFile {
		r.Log.Warn("every row of a source file was rejected (a wrong column type?); fix the spec, then `floe reprocess --rejected` reads it again",
			"file", res.key, "rows", len(d.Rejects), "first_reason", d.Rejects[0].Reason)
	}
	if r.onErrorOf(res.key) == spec.OnErrorFail && len(d.Rejects) > 0 {
		rj := d.Rejects[0]
		return fmt.Errorf("source file %s line %d: %s (on_error: fail)", rj.File, rj.Line, rj.Reason)
	}
	return nil
}

// decodeFile decodes one source file and runs its source's decode chain
// (decodeGraphFile).
func (r *Runner) decodeFile(ctx context.Context, f store.ObjectInfo, parallel int) (*fileResult, error) {
	return r.decodeGraphFile(ctx, f, parallel)
}

// rowCaps counts an epoch's rows by source against each source's
// max_rows_per_epoch. nil (no source sets one) counts nothing.
type rowCaps struct {
	p     *spec.Pipeline
	total map[string]int64 // by source name ("" in the linear form)
}

func newRowCaps(p *spec.Pipeline) *rowCaps {
	for _, b := range p.SourceBlocks() {
		if b.Source.MaxRowsPerEpoch > 0 {
			return &rowCaps{p: p, total: map[string]int64{}}
		}
	}
	return nil
}

// add counts rows of the file key and reports whether its source reached
// its max_rows_per_epoch: the epoch then ends after this file, whatever the
// other sources' counts (every source's limit holds, and where the epoch
// ends depends only on the files' order and rows).
func (c *rowCaps) add(key string, rows int64) bool {
	if c == nil {
		return false
	}
	b, _, ok := c.p.SourceOfKey(key)
	if !ok {
		return false
	}
	c.total[b.Name] += rows
	lim := b.Source.MaxRowsPerEpoch
	return lim > 0 && c.total[b.Name] >= lim
}

// DecodeEpoch decodes files in parallel (taking prefetched results). With
// max_rows_per_epoch it decodes in waves and stops after the file that
// crosses its source's limit (rowCaps), deterministically by file order; it returns the
// results of the files the epoch takes.
func (r *Runner) DecodeEpoch(ctx context.Context, files []store.ObjectInfo) ([]*fileResult, error) {
	results := make([]*fileResult, 0, len(files))
	if r.SkipRead {
		// start_from: latest: the files present at the start are marked
		// read without reading them.
		for _, f := range files {
			results = append(results, &fileResult{key: f.Key, maxTS: math.MinInt64})
		}
		return results, nil
	}
	wave := len(files)
	caps := newRowCaps(r.P)
	if caps != nil {
		wave = runtime.GOMAXPROCS(0)
	}
	for start := 0; start < len(files); start += wave {
		chunk := files[start:min(start+wave, len(files))]
		out := make([]*fileResult, len(chunk))
		errs := make([]error, len(chunk))
		var g errgroup.Group
		g.SetLimit(runtime.GOMAXPROCS(0))
		for i, f := range chunk {
			g.Go(func() error {
				if r.pf != nil {
					if res, err, ok := r.pf.Take(ctx, f.Key); ok {
						out[i], errs[i] = res, err
						return nil
					}
				}
				// A lone big file splits itself across the cores.
				out[i], errs[i] = r.decodeFile(ctx, f, max(1, runtime.GOMAXPROCS(0)/len(chunk)))
				return nil
			})
		}
		_ = g.Wait()
		// In key order: the first failing file fails the epoch, whatever
		// finished first, unless the row limit ends the epoch before it.
		for i, res := range out {
			if errs[i] != nil {
				return nil, errs[i]
			}
			results = append(results, res)
			if caps.add(res.key, res.rows) {
				return results, nil
			}
		}
	}
	return results, nil
}
