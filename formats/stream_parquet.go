package formats

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// decodeParquet (parquet.go) is this, collecting the batches.

// decodeParquetStream is decodeParquet handing each batch to each as it is
// read (row group by row group, BatchSize rows at a time) instead of
// collecting them. It returns the rows handed over and the rejects.
func decodeParquetStream(fileName string, src parquet.ReaderAtSeeker, opts DecodeOptions, each func(arrow.RecordBatch) error) (_ *Decoded, err error) {
	defer func() {
		if err != nil && !strings.HasPrefix(err.Error(), fileName) {
			err = fmt.Errorf("%s: %w", fileName, err)
		}
	}()
	// Deferred itself (recover works only there), and run first.
	defer recoverParquet(&err)
	pf, fr, err := openParquetAt(src, opts.Mem, opts.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileName, err)
	}
	defer pf.Close()
	fileSchema, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("%s: parquet schema: %w", fileName, err)
	}
	declared := opts.Schema
	if declared == nil {
		declared = inferSchema(cleanSchema(fileSchema))
	}
	// Output schema, kinds and the leaf columns to read.
	outFields := make([]arrow.Field, declared.NumFields())
	kinds := make([]kind, declared.NumFields())
	srcTypes := make([]arrow.DataType, declared.NumFields())
	fieldLeaf := make([]int, declared.NumFields()) // -1: not a leaf column
	// dict[i]: output column i is DictStringType (declared so).
	dict := make([]bool, declared.NumFields())
	var dictLeaves []int
	var leaves []int
	et := -1
	for i, f := range declared.Fields() {
		fi := fileSchema.FieldIndices(f.Name)
		if len(fi) == 0 {
			return nil, fmt.Errorf("%s: Parquet file has no column %q", fileName, f.Name)
		}
		src := fileSchema.Field(fi[0]).Type
		if opts.Schema == nil {
			outFields[i] = f
			if src.ID() == arrow.TIMESTAMP {
				kinds[i] = kTimestamp
			} else {
				kinds[i] = kString // unused: passthrough below
			}
		} else {
			k, err := fieldKind(f)
			if err != nil {
				return nil, fmt.Errorf("%s: schema: %w", fileName, err)
			}
			if !compatible(src, k) {
				return nil, fmt.Errorf("%s: Parquet column %q has type %s, incompatible with declared %s", fileName, f.Name, src, k)
			}
			kinds[i] = k
			if isDictString(f.Type) {
				dict[i] = true
				f.Type = DictStringType
			} else {
				f.Type = k.arrowType()
			}
			f.Nullable = true
			outFields[i] = f
		}
		if f.Name == opts.EventTime {
			if outFields[i].Type.ID() != arrow.TIMESTAMP {
				return nil, fmt.Errorf("%s: event time column %q has type %s, not a timestamp", fileName, f.Name, outFields[i].Type)
			}
			et = i
		}
		srcTypes[i], fieldLeaf[i] = src, -1
		if sf := &fr.Manifest.Fields[fi[0]]; sf.IsLeaf() {
			fieldLeaf[i] = sf.ColIndex
		}
		leaves = appendLeaves(leaves, &fr.Manifest.Fields[fi[0]])
		if dict[i] && fieldLeaf[i] >= 0 {
			dictLeaves = append(dictLeaves, fieldLeaf[i])
		}
	}
	if len(dictLeaves) > 0 {
		// Read those string columns as dictionaries: pqarrow then keeps
		// each column chunk's dictionary and appends the indices of
		// dictionary-encoded pages as they are (plain pages are hashed into
		// the same dictionary).
		props := fr.Props
		for _, l := range dictLeaves {
			props.SetReadDict(l, true)
		}
		if fr, err = pqarrow.NewFileReader(pf, props, opts.Mem); err != nil {
			return nil, fmt.Errorf("%s: parquet: %w", fileName, err)
		}
	}
	if opts.EventTime != "" && et < 0 {
		return nil, fmt.Errorf("%s: event time column %q is not in the schema", fileName, opts.EventTime)
	}
	md := declared.Metadata()
	outSchema := arrow.NewSchema(outFields, &md)
	res := &Decoded{Schema: outSchema}
	if pf.NumRowGroups() == 0 || len(leaves) == 0 {
		return res, nil
	}
	var rowBase int64
	// emit checks and hands over one batch of output columns; it takes
	// over cols.
	emit := func(cols []arrow.Array, n int64) error {
		defer func() {
			for _, c := range cols {
				if c != nil {
					c.Release()
				}
			}
		}()
		out := array.NewRecordBatch(outSchema, cols, n)
		// reasons[j] != "" rejects row j: the first column (in schema
		// order) whose string is not valid UTF-8, else a null event time.
		var reasons []string
		for i, c := range cols {
			badUTF8Rows(c, func(j int, v []byte) {
				if reasons == nil {
					reasons = make([]string, n)
				}
				if reasons[j] == "" {
					reasons[j] = badUTF8Reason(strconv.Quote(outFields[i].Name), v)
				}
			})
		}
		if et >= 0 && cols[et].NullN() > 0 {
			if reasons == nil {
				reasons = make([]string, n)
			}
			for j := range reasons {
				if reasons[j] == "" && cols[et].IsNull(j) {
					reasons[j] = fmt.Sprintf("event time column %q is null", outFields[et].Name)
				}
			}
		}
		if reasons != nil {
			mb := array.NewBooleanBuilder(memory.DefaultAllocator)
			mb.Reserve(int(n))
			for j, r := range reasons {
				mb.UnsafeAppend(r == "")
				if r != "" {
					res.Rejects = append(res.Rejects, Reject{File: fileName, Line: rowBase + int64(j) + 1, Reason: r})
				}
			}
			mask := mb.NewArray()
			mb.Release()
			filtered, err := compute.FilterRecordBatch(context.Background(), out, mask, compute.DefaultFilterOptions())
			mask.Release()
			out.Release()
			if err != nil {
				return err
			}
			out = filtered
		}
		rowBase += n
		if out.NumRows() == 0 {
			out.Release()
			return nil
		}
		res.Rows += out.NumRows()
		return each(out)
	}
	if opts.Schema != nil && !opts.generalParquet {
		types := make([]arrow.DataType, len(outFields))
		for i, f := range outFields {
			types[i] = f.Type
		}
		names := make([]string, len(outFields))
		for i, f := range outFields {
			names[i] = f.Name
		}
		if flat := flatColumns(pf, names, srcTypes, fieldLeaf, kinds, types); flat != nil {
			fl := &flatReader{pf: pf, cols: flat, mem: opts.Mem, batch: opts.BatchSize, noDictPages: opts.recordDictParquet}
			if err := fl.each(emit); err != nil {
				return nil, fmt.Errorf("%s: reading Parquet: %w", fileName, err)
			}
			return res, nil
		}
	}
	err = readAll(fr, leaves, nil, func(rec arrow.RecordBatch) error {
		n := rec.NumRows()
		cols := make([]arrow.Array, len(outFields))
		for i, f := range outFields {
			idx := rec.Schema().FieldIndices(f.Name)
			var err error
			if len(idx) == 0 {
				err = fmt.Errorf("column %q missing from a batch", f.Name)
			} else if src := rec.Column(idx[0]); opts.Schema == nil && kinds[i] != kTimestamp {
				src.Retain()
				cols[i] = src
			} else if dict[i] {
				if cols[i], err = toDictString(src, opts.Mem); err != nil {
					err = fmt.Errorf("column %q: %w", f.Name, err)
				}
			} else if cols[i], err = convertColumn(src, kinds[i], f.Type); err != nil {
				err = fmt.Errorf("column %q: %w", f.Name, err)
			}
			if err != nil {
				for _, c := range cols[:i] {
					c.Release()
				}
				return err
			}
		}
		return emit(cols, n)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: reading Parquet: %w", fileName, err)
	}
	return res, nil
}
