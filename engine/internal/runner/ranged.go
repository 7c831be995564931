package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Ranged reads of Parquet sources. A Parquet source file at least
// rangedMinRequests requests' worth long (store.RequestBytes: 4 MiB on an
// object store, 256 KiB on file://) is read as its footer and the column
// chunks of the columns its source node decodes (the pruned schema), not
// whole: a wide file of which a plan reads two columns costs the bytes of
// those two (issue 25's unused-column case). Smaller files, and stores that
// cannot read ranges (a store wrapper of Options.WrapStore that does not
// pass store.RangeReader through), are read whole in one GET as before.
// Every failure to plan the ranges (not Parquet, an encrypted footer, a
// column the file lacks, the file changed) falls back to the whole read,
// whose decode names the problem as it always did.
const (
	rangedMinRequests = 4
	// Column chunks less than one request's worth (store.RequestBytes)
	// apart are fetched in one request.
	//
	// rangedMaxShare: when the chunks needed are at least this share of
	// the file, it is read whole.
	rangedMaxShare = 0.75
	rangedFetches  = 4 // ranged GETs in flight per file
)

// readColumns returns source file f, of format, as a sparse file holding
// its footer and the column chunks of schema's columns, or nil when it is
// to be read whole (see above).
func (r *Runner) readColumns(ctx context.Context, f store.ObjectInfo, format spec.Format, schema *arrow.Schema) (*formats.SparseFile, error) {
	if format != spec.Parquet || schema == nil {
		return nil, nil
	}
	rr, key, cost := sources.RangeReaderOf(r.St.Source, f.Key)
	if rr == nil || f.Size < rangedMinRequests*cost {
		return nil, nil
	}
	rangedGap := cost
	var cols []string
	for _, fd := range schema.Fields() {
		cols = append(cols, fd.Name)
	}
	n := formats.ParquetTailSize(f.Size)
	tail, err := rr.ReadRange(ctx, key, f.Size-n, n)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // the whole read reports it (or reads the captured copy)
	}
	if err != nil {
		return nil, fmt.Errorf("read source file %s: %w", f.Key, err)
	}
	if int64(len(tail)) != n {
		return nil, nil // shorter than listed: changed; the whole read sees it
	}
	ranges, need, err := formats.ParquetColumnRanges(tail, f.Size, cols, rangedGap)
	if need > 0 && need < f.Size/2 {
		if tail, err = rr.ReadRange(ctx, key, f.Size-need, need); err != nil {
			return nil, fmt.Errorf("read source file %s: %w", f.Key, err)
		}
		ranges, need, err = formats.ParquetColumnRanges(tail, f.Size, cols, rangedGap)
	}
	if err != nil || need > 0 {
		return nil, nil
	}
	var total int64
	for _, rg := range ranges {
		total += rg.Len
	}
	if float64(total) >= rangedMaxShare*float64(f.Size) {
		return nil, nil
	}
	tailOff := f.Size - int64(len(tail))
	data := make([][]byte, len(ranges))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rangedFetches)
	for i, rg := range ranges {
		end := rg.Off + rg.Len
		if rg.Off >= tailOff {
			data[i] = tail[rg.Off-tailOff : end-tailOff]
			continue
		}
		g.Go(func() error {
			upto := min(end, tailOff)
			b, err := rr.ReadRange(gctx, key, rg.Off, upto-rg.Off)
			if err != nil {
				return fmt.Errorf("read source file %s: %w", f.Key, err)
			}
			if int64(len(b)) != upto-rg.Off {
				return fmt.Errorf("read source file %s: bytes [%d,%d) came back short (%d bytes): the file changed after it was listed", f.Key, rg.Off, upto, len(b))
			}
			if end > tailOff {
				b = append(b, tail[:end-tailOff]...)
			}
			data[i] = b
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return formats.NewSparseFile(f.Size, ranges, data)
}
