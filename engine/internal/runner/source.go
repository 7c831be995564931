package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

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
	return sources.DecodeOptions(&r.P.Source, schema, r.Mem, parallel)
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
	if ns, _ := sources.Named(r.P, key); ns != nil {
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

// DecodeEpoch decodes files in parallel (taking prefetched results). With
// max_rows_per_epoch it decodes in waves and stops after the file that
// crosses its source's limit (sources.RowCaps), deterministically by file order; it returns the
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
	caps := sources.NewRowCaps(r.P)
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
			if caps.Add(res.key, res.rows) {
				return results, nil
			}
		}
	}
	return results, nil
}
