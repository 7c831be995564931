package formats

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// Row-group access for readers that decode only part of a file: state
// restore reads the footer's statistics first (ParquetRowGroupRanges) and
// then decodes only the row groups a run needs (ReadParquetRowGroups).

// RowGroupRange is one row group's row count and, per requested integer (or
// timestamp) column, its minimum and maximum from the footer statistics.
// Known[i] is false when the file has no usable statistics for column i:
// a reader must then assume the row group may hold any value.
type RowGroupRange struct {
	Rows     int64
	Min, Max []int64
	Known    []bool
}

// ParquetRowGroupRanges reads data's footer and returns, for every row group
// in order, its row count and the statistics of the named columns (which
// must be integer or timestamp columns of the file).
func ParquetRowGroupRanges(data []byte, columns ...string) (_ []RowGroupRange, err error) {
	defer recoverParquet(&err)
	pf, _, err := openParquet(data, memory.DefaultAllocator, DefaultBatchSize)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	md := pf.MetaData()
	leaves := make([]int, len(columns))
	for i, c := range columns {
		if leaves[i] = md.Schema.ColumnIndexByName(c); leaves[i] < 0 {
			return nil, fmt.Errorf("parquet row groups: no column %q", c)
		}
	}
	out := make([]RowGroupRange, pf.NumRowGroups())
	for g := range out {
		rg := md.RowGroup(g)
		r := RowGroupRange{Rows: rg.NumRows(), Min: make([]int64, len(columns)), Max: make([]int64, len(columns)), Known: make([]bool, len(columns))}
		for i, leaf := range leaves {
			r.Min[i], r.Max[i], r.Known[i], err = intStats(rg, leaf)
			if err != nil {
				return nil, fmt.Errorf("parquet row group %d column %q: %w", g, columns[i], err)
			}
		}
		out[g] = r
	}
	return out, nil
}

// intStats returns the min and max of an integer leaf column of rg, and
// whether the statistics were present and usable.
func intStats(rg *metadata.RowGroupMetaData, leaf int) (mn, mx int64, ok bool, err error) {
	cc, err := rg.ColumnChunk(leaf)
	if err != nil {
		return 0, 0, false, err
	}
	if set, err := cc.StatsSet(); err != nil || !set {
		return 0, 0, false, nil
	}
	st, err := cc.Statistics()
	if err != nil || st == nil || !st.HasMinMax() {
		return 0, 0, false, nil
	}
	switch s := st.(type) {
	case *metadata.Int64Statistics:
		return s.Min(), s.Max(), true, nil
	case *metadata.Int32Statistics:
		return int64(s.Min()), int64(s.Max()), true, nil
	}
	return 0, 0, false, nil
}

// ReadParquetRowGroups decodes the row groups groups (ascending indices) of
// data into batches allocated from mem; the caller releases them.
func ReadParquetRowGroups(data []byte, mem memory.Allocator, groups []int) (_ []arrow.RecordBatch, err error) {
	defer recoverParquet(&err)
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if len(groups) == 0 {
		return nil, nil
	}
	pf, fr, err := openParquet(data, mem, DefaultBatchSize)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	for _, g := range groups {
		if g < 0 || g >= pf.NumRowGroups() {
			return nil, fmt.Errorf("read parquet: row group %d of %d", g, pf.NumRowGroups())
		}
	}
	schema, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("parquet schema: %w", err)
	}
	schema = cleanSchema(schema)
	var out []arrow.RecordBatch
	err = readAll(fr, nil, groups, func(rec arrow.RecordBatch) error {
		rec = array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
		out = append(out, rec)
		return nil
	})
	if err != nil {
		releaseAll(out)
		return nil, fmt.Errorf("read parquet: %w", err)
	}
	return out, nil
}
