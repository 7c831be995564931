package formats

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// toDictString returns a string column (plain, or a dictionary of strings
// with any index type) as a DictStringType array. A DictStringType array is
// returned as it is (a new reference); a dictionary with other indices
// keeps its dictionary; anything else is hashed into a new dictionary of
// the distinct values in first-seen order.
func toDictString(a arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	if d, ok := a.(*array.Dictionary); ok {
		// pqarrow does not check the indices it reads.
		if err := checkDictIndices(d); err != nil {
			return nil, err
		}
	}
	if isDictString(a.DataType()) {
		a.Retain()
		return a, nil
	}
	ctx := compute.WithAllocator(context.Background(), mem)
	if d, ok := a.(*array.Dictionary); ok {
		if d.Dictionary().DataType().ID() == arrow.STRING {
			idx, err := compute.CastArray(ctx, d.Indices(), compute.SafeCastOptions(arrow.PrimitiveTypes.Int32))
			if err != nil {
				return nil, fmt.Errorf("dictionary indices: %w", err)
			}
			defer idx.Release()
			return array.NewDictionaryArray(DictStringType, idx, d.Dictionary()), nil
		}
		plain, err := compute.CastArray(ctx, d, compute.SafeCastOptions(d.Dictionary().DataType()))
		if err != nil {
			return nil, fmt.Errorf("unpack dictionary: %w", err)
		}
		defer plain.Release()
		a = plain
	}
	if a.DataType().ID() != arrow.STRING {
		s, err := compute.CastArray(ctx, a, compute.SafeCastOptions(arrow.BinaryTypes.String))
		if err != nil {
			return nil, err
		}
		defer s.Release()
		a = s
	}
	b := array.NewDictionaryBuilder(mem, DictStringType).(*array.BinaryDictionaryBuilder)
	defer b.Release()
	if err := b.AppendArray(a); err != nil {
		return nil, fmt.Errorf("build dictionary: %w", err)
	}
	return b.NewArray(), nil
}

// startDict points the dictionary record reader of flat column i at its
// chunk in row group rg (creating the reader for the first row group).
func (r *flatReader) startDict(rg *file.RowGroupReader, i int) error {
	c := r.cols[i]
	if r.dictPg[i] != nil {
		r.dictPg[i].release()
		r.dictPg[i] = nil
	}
	cc, err := rg.MetaData().ColumnChunk(c.leaf)
	if err != nil {
		return err
	}
	pr, err := rg.GetColumnPageReader(c.leaf)
	if err != nil {
		return err
	}
	if !r.noDictPages && allDictPages(cc) {
		r.dictPg[i] = &dictPages{pr: pr, maxDef: c.maxDef, mem: r.mem}
		return nil
	}
	if r.dictRec[i] == nil {
		info := file.LevelInfo{NullSlotUsage: 1, DefLevel: c.maxDef}
		// A fresh type each time: the record reader may adjust it.
		dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
		r.dictRec[i] = file.NewRecordReader(r.pf.MetaData().Schema.Column(c.leaf), info, dt, r.mem, r.pf.BufferPool())
	}
	if rw, ok := r.dictRec[i].(file.RecordReaderWithError); ok {
		return rw.SetPageReaderWithError(pr)
	}
	r.dictRec[i].SetPageReader(pr)
	return nil
}

// readDict reads the next n rows of dict column i: the chunk's dictionary
// (the values of its dictionary page, plus the values of any plain pages
// read so far, hashed into it) and the rows' indices, decoded straight
// from dictionary-encoded pages.
func (r *flatReader) readDict(i, n int) (arrow.Array, error) {
	if d := r.dictPg[i]; d != nil {
		return d.read(n, r.cols[i].typ)
	}
	rr := r.dictRec[i]
	rr.Reset()
	if err := rr.Reserve(int64(n)); err != nil {
		return nil, err
	}
	for got := 0; got < n; {
		k, err := rr.ReadRecords(int64(n - got))
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, fmt.Errorf("column chunk ends after %d of %d rows", got, n)
		}
		got += int(k)
	}
	chunks := rr.(file.BinaryRecordReader).GetBuilderChunks()
	defer releaseArrays(chunks)
	var a arrow.Array
	switch len(chunks) {
	case 0:
		return nil, fmt.Errorf("no values decoded for %d rows", n)
	case 1:
		a = chunks[0]
		a.Retain()
	default: // a new dictionary within the batch (not expected within a chunk)
		var err error
		if a, err = array.Concatenate(chunks, r.mem); err != nil {
			return nil, err
		}
	}
	if a.Len() != n || !isDictString(a.DataType()) {
		a.Release()
		return nil, fmt.Errorf("dictionary reader returned %d values of %s for %d rows", a.Len(), a.DataType(), n)
	}
	if err := checkDictIndices(a.(*array.Dictionary)); err != nil {
		a.Release()
		return nil, err
	}
	return a, nil
}

// checkDictIndices fails unless every valid index of d lies inside its
// dictionary (a corrupt file can say otherwise).
func checkDictIndices(d *array.Dictionary) error {
	size := d.Dictionary().Len()
	if idx, ok := d.Indices().(*array.Int32); ok {
		for j, k := range idx.Int32Values() {
			if uint32(k) >= uint32(size) && idx.IsValid(j) {
				return fmt.Errorf("row %d: dictionary index %d outside a dictionary of %d values", j, k, size)
			}
		}
		return nil
	}
	for j := 0; j < d.Len(); j++ {
		if d.IsValid(j) {
			if k := d.GetValueIndex(j); k < 0 || k >= size {
				return fmt.Errorf("row %d: dictionary index %d outside a dictionary of %d values", j, k, size)
			}
		}
	}
	return nil
}

func releaseArrays(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}
