package formats

import (
	"cmp"
	"slices"

	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
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

// ReadParquetRowGroupColumns decodes only the named top-level columns of
// row group group of data (a flat file such as a state file), as one batch
// of those columns in the order named, allocated from mem; the caller
// releases it. Decoding a few columns of a wide file costs only those
// columns' pages.
func ReadParquetRowGroupColumns(data []byte, mem memory.Allocator, group int, names []string) (arrow.RecordBatch, error) {
	out, err := ReadParquetRowGroupsColumns(data, mem, []int{group}, names)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// ReadParquetRowGroupsColumns is ReadParquetRowGroupColumns of several row
// groups: one batch per row group, in the order of groups.
func ReadParquetRowGroupsColumns(data []byte, mem memory.Allocator, groups []int, names []string) (_ []arrow.RecordBatch, err error) {
	defer recoverParquet(&err)
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	pf, fr, err := openParquet(data, mem, DefaultBatchSize)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	schema, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("parquet schema: %w", err)
	}
	schema = cleanSchema(schema)
	md := pf.MetaData()
	leaves := make([]int, len(names))
	fields := make([]arrow.Field, len(names))
	for i, name := range names {
		fi := schema.FieldIndices(name)
		if len(fi) != 1 {
			return nil, fmt.Errorf("read parquet: no column %q (or more than one)", name)
		}
		if leaves[i] = md.Schema.ColumnIndexByName(name); leaves[i] < 0 {
			return nil, fmt.Errorf("read parquet: column %q is not a flat column", name)
		}
		fields[i] = schema.Field(fi[0])
	}
	// The record reader returns the columns in leaf order: decode them in
	// that order, then put them in the order named.
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(leaves[a], leaves[b]) })
	sorted := make([]int, len(names))
	for i, o := range order {
		sorted[i] = leaves[o]
	}
	if len(slices.Compact(slices.Clone(sorted))) != len(sorted) {
		return nil, fmt.Errorf("read parquet: a column is named twice in %v", names)
	}
	outSchema := arrow.NewSchema(fields, nil)
	var out []arrow.RecordBatch
	for _, g := range groups {
		if g < 0 || g >= pf.NumRowGroups() {
			releaseAll(out)
			return nil, fmt.Errorf("read parquet: row group %d of %d", g, pf.NumRowGroups())
		}
		// One batch per row group: buffers sized once.
		fr.Props.BatchSize = max(1, md.RowGroup(g).NumRows())
		rec, err := readColumns(fr, mem, g, sorted, order, fields, outSchema)
		if err != nil {
			releaseAll(out)
			return nil, fmt.Errorf("read parquet: row group %d: %w", g, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// readColumns reads leaf columns sorted (names[order[i]]'s leaf is
// sorted[i]) of row group g as one batch of outSchema.
func readColumns(fr *pqarrow.FileReader, mem memory.Allocator, g int, sorted, order []int, fields []arrow.Field, outSchema *arrow.Schema) (arrow.RecordBatch, error) {
	var parts [][]arrow.Array // per batch, in leaf order
	var rows int64
	defer func() {
		for _, p := range parts {
			releaseArrays(p)
		}
	}()
	err := readAll(fr, sorted, []int{g}, func(rec arrow.RecordBatch) error {
		cols := rec.Columns()
		for _, c := range cols {
			c.Retain()
		}
		parts = append(parts, cols)
		rows += rec.NumRows()
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]arrow.Array, len(order))
	defer releaseArrays(out)
	for i, o := range order {
		switch len(parts) {
		case 0:
			out[o] = array.MakeArrayOfNull(mem, fields[o].Type, 0)
		case 1:
			out[o] = parts[0][i]
			out[o].Retain()
		default:
			col := make([]arrow.Array, len(parts))
			for p := range parts {
				col[p] = parts[p][i]
			}
			var err error
			if out[o], err = array.Concatenate(col, mem); err != nil {
				return nil, fmt.Errorf("column %q: %w", fields[o].Name, err)
			}
		}
	}
	return array.NewRecordBatch(outSchema, out, rows), nil
}

// ParquetFileSchema returns the Arrow schema of data as written (the
// schema ReadParquet's batches have), reading only the footer.
func ParquetFileSchema(data []byte) (_ *arrow.Schema, err error) {
	defer recoverParquet(&err)
	pf, fr, err := openParquet(data, memory.DefaultAllocator, DefaultBatchSize)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	schema, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("parquet schema: %w", err)
	}
	return cleanSchema(schema), nil
}
