package runner

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
)

// Restoring a join by column (operators/joinlazy.go): a join's base files
// and delta upserts are decoded, row group by row group, in the columns a
// held row needs to be routed, paired and expired (identity, flags, key,
// time); each side's data columns of a row group are decoded when the
// join first gathers one of its rows (a pair, a delta's flag change, a new
// base). The run after a long history then decodes the history's keys and
// times, not its payload. Tombstones (identities only) are decoded whole.

// restoreLazy restores subtask s of stage n (op, fresh) lazily: its base
// rows, then its deltas in order.
func (r *Runner) restoreLazy(ctx context.Context, from *RestoreSource, n *dataflow.Node, op operators.LazyRestorer, s int, sr SubtaskRestore, emitted int64) error {
	names := op.LazyStateColumns()
	sides := [2][]string{op.LazySideColumns(0), op.LazySideColumns(1)}
	mem := r.Mem
	files := map[string][]byte{} // read (and verified) once
	read := func(f manifest.FileRef) ([]byte, error) {
		if data, ok := files[f.Path]; ok {
			return data, nil
		}
		data, err := from.read(ctx, f)
		if err == nil {
			files[f.Path] = data
		}
		return data, err
	}
	// batches decodes the lazy batches of state file f: the row groups that
	// may hold the subtask's key groups, in the columns names.
	batches := func(f manifest.FileRef) ([]operators.LazyStateBatch, func(), error) {
		var keep []arrow.RecordBatch
		done := func() { ReleaseBatches(keep) }
		fail := func(err error) ([]operators.LazyStateBatch, func(), error) {
			done()
			return nil, nil, fmt.Errorf("stage %s: restore %s: %w", n.Name, f.Path, err)
		}
		data, err := read(f)
		if err != nil {
			return fail(err)
		}
		delete(files, f.Path) // decoded once; the lazy batches keep it
		schema, err := formats.ParquetFileSchema(data)
		if err != nil {
			return fail(err)
		}
		ranges, err := formats.ParquetRowGroupRanges(data, operators.ColKeyGroup)
		if err != nil {
			return fail(err)
		}
		var groups []int
		for g, rg := range ranges {
			if rg.Known[0] && (rg.Max[0] < int64(sr.Lo) || rg.Min[0] >= int64(sr.Hi)) {
				continue // another subtask's key groups only
			}
			groups = append(groups, g)
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if keep, err = formats.ReadParquetRowGroupsColumns(data, mem, groups, names); err != nil {
			return fail(err)
		}
		var out []operators.LazyStateBatch
		for x, g := range groups {
			rec := keep[x]
			path := f.Path
			out = append(out, operators.LazyStateBatch{Schema: schema, Rows: int(rec.NumRows()), Cols: rec.Columns(),
				Side: func(side int) ([]arrow.Array, error) {
					b, err := formats.ReadParquetRowGroupColumns(data, mem, g, sides[side&1])
					if err != nil {
						return nil, fmt.Errorf("state file %s row group %d: %w", path, g, err)
					}
					cols := b.Columns()
					for _, c := range cols {
						c.Retain()
					}
					b.Release()
					return cols, nil
				}})
		}
		return out, done, nil
	}
	// Room for every row of the row groups the subtask reads (from the
	// footers), so that the deltas do not regrow the row table.
	var est int64
	for _, f := range sr.Files {
		est += footerRows(read, f, sr)
	}
	for _, d := range sr.deltas {
		if d.Kind != manifest.DeltaTombstones && d.Kind != manifest.DeltaMerges {
			est += footerRows(read, d, sr)
		}
	}
	op.ReserveRows(int(est))
	var base []operators.LazyStateBatch
	var release []func()
	defer func() {
		for _, f := range release {
			f()
		}
	}()
	for _, f := range sr.Files {
		bs, done, err := batches(f)
		if err != nil {
			return err
		}
		base, release = append(base, bs...), append(release, done)
	}
	if err := op.RestoreLazy(base, sr.Lo, sr.Hi, emitted); err != nil {
		return fmt.Errorf("stage %s: restore subtask %d: %w", n.Name, s, err)
	}
	for _, f := range release {
		f()
	}
	release = nil
	for _, d := range sr.deltas {
		if d.Kind == manifest.DeltaTombstones || d.Kind == manifest.DeltaMerges {
			recs, err := r.readRange(ctx, from, d, sr)
			if err != nil {
				return fmt.Errorf("stage %s: %w", n.Name, err)
			}
			err = applyDelta(op, d.Kind, recs, sr.Lo, sr.Hi)
			ReleaseBatches(recs)
			if err != nil {
				return fmt.Errorf("stage %s: restore subtask %d: delta %s: %w", n.Name, s, d.Path, err)
			}
			continue
		}
		bs, done, err := batches(d)
		if err != nil {
			return err
		}
		err = op.ApplyDeltaLazy(bs, nil, sr.Lo, sr.Hi)
		done()
		if err != nil {
			return fmt.Errorf("stage %s: restore subtask %d: delta %s: %w", n.Name, s, d.Path, err)
		}
	}
	return nil
}

// footerRows is the number of rows of the row groups of state file f that
// may hold sr's key groups, from its footer (0 if it cannot be read: the
// restore then reports the error).
func footerRows(read func(manifest.FileRef) ([]byte, error), f manifest.FileRef, sr SubtaskRestore) int64 {
	data, err := read(f)
	if err != nil {
		return 0
	}
	ranges, err := formats.ParquetRowGroupRanges(data, operators.ColKeyGroup)
	if err != nil {
		return 0
	}
	var n int64
	for _, rg := range ranges {
		if !rg.Known[0] || (rg.Max[0] >= int64(sr.Lo) && rg.Min[0] < int64(sr.Hi)) {
			n += rg.Rows
		}
	}
	return n
}
