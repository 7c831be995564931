package formats

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// The flat Parquet reader: for the common input shape (top-level,
// non-repeated columns of strings, 32/64-bit integers, doubles and
// microsecond timestamps, each already of its declared type) it reads the
// column chunks directly and builds the Arrow arrays in one pass per batch,
// instead of going through pqarrow's record reader, whose string path
// appends values one by one to a builder. The result is the same arrays the
// general path produces (decodeParquetStream falls back to it for any other
// column shape), so rejects, UTF-8 checks and errors are unchanged.

// flatColumn is one output column the flat reader decodes.
type flatColumn struct {
	name   string
	leaf   int // leaf column index in the file
	maxDef int16
	typ    arrow.DataType // output type
	phys   parquet.Type
	dict   bool // output DictStringType (read by a dictionary record reader)
}

// flatColumns returns the flat reading plan of the output columns, or nil
// when some column needs the general reader. src are the file's Arrow
// types of the columns, leaves their leaf indices (-1: not a leaf).
func flatColumns(pf *file.Reader, names []string, src []arrow.DataType, leaves []int, kinds []kind, out []arrow.DataType) []flatColumn {
	cols := make([]flatColumn, len(names))
	sch := pf.MetaData().Schema
	for i := range names {
		if leaves[i] < 0 || leaves[i] >= sch.NumColumns() {
			return nil
		}
		d := sch.Column(leaves[i])
		if d.MaxRepetitionLevel() != 0 || d.MaxDefinitionLevel() > 1 {
			return nil
		}
		phys := d.PhysicalType()
		ok := false
		switch kinds[i] {
		case kString:
			ok = src[i].ID() == arrow.STRING && phys == parquet.Types.ByteArray && (out[i].ID() == arrow.STRING || isDictString(out[i]))
		case kInt64:
			ok = src[i].ID() == arrow.INT64 && phys == parquet.Types.Int64
		case kInt32:
			ok = src[i].ID() == arrow.INT32 && phys == parquet.Types.Int32
		case kFloat64:
			ok = src[i].ID() == arrow.FLOAT64 && phys == parquet.Types.Double
		case kTimestamp, kTimestampUS:
			t, isTS := src[i].(*arrow.TimestampType)
			lt, isLT := d.LogicalType().(schema.TimestampLogicalType)
			ok = isTS && t.Unit == arrow.Microsecond && isLT && lt.TimeUnit() == schema.TimeUnitMicros && phys == parquet.Types.Int64
		}
		if !ok {
			return nil
		}
		cols[i] = flatColumn{name: names[i], leaf: leaves[i], maxDef: d.MaxDefinitionLevel(), typ: out[i], phys: phys, dict: isDictString(out[i])}
	}
	return cols
}

// flatReader reads batches of the flat columns, row group by row group.
type flatReader struct {
	pf    *file.Reader
	cols  []flatColumn
	mem   memory.Allocator
	batch int
	// per column: the bytes per string value of the last batch (a size hint)
	avgLen  []int
	scratch []parquet.ByteArray
	defs    []int16
	// per column: the dictionary record reader of a dict column (nil
	// otherwise), kept from row group to row group
	dictRec []file.RecordReader
	// per column: the page reader of a dict column whose chunk in the
	// current row group has only dictionary-encoded data pages (nil
	// otherwise)
	dictPg []*dictPages
	// noDictPages makes every dict column use its record reader (tests
	// compare the two)
	noDictPages bool
}

// each reads the whole file and calls fn with each batch's columns (fn
// takes over the arrays) and row count.
func (r *flatReader) each(fn func(cols []arrow.Array, n int64) error) error {
	r.avgLen = make([]int, len(r.cols))
	r.dictRec = make([]file.RecordReader, len(r.cols))
	r.dictPg = make([]*dictPages, len(r.cols))
	defer func() {
		for _, rr := range r.dictRec {
			if rr != nil {
				rr.Release()
			}
		}
		for _, d := range r.dictPg {
			if d != nil {
				d.release()
			}
		}
	}()
	for g := 0; g < r.pf.NumRowGroups(); g++ {
		if err := r.rowGroup(g, fn); err != nil {
			return err
		}
	}
	return nil
}

func (r *flatReader) rowGroup(g int, fn func(cols []arrow.Array, n int64) error) error {
	rg := r.pf.RowGroup(g)
	readers := make([]file.ColumnChunkReader, 0, len(r.cols))
	defer func() {
		for _, cr := range readers {
			if cr != nil {
				cr.Close()
			}
		}
	}()
	for i, c := range r.cols {
		if c.dict {
			if err := r.startDict(rg, i); err != nil {
				return fmt.Errorf("row group %d column %q: %w", g, c.name, err)
			}
			readers = append(readers, nil)
			continue
		}
		cr, err := rg.Column(c.leaf)
		if err != nil {
			return fmt.Errorf("row group %d column %q: %w", g, c.name, err)
		}
		readers = append(readers, cr)
		if r.avgLen[i] == 0 {
			r.avgLen[i] = chunkValueLen(rg, c.leaf)
		}
	}
	for left := rg.NumRows(); left > 0; {
		n := int(min(left, int64(r.batch)))
		arrs := make([]arrow.Array, len(r.cols))
		for i, c := range r.cols {
			a, err := r.read(readers[i], c, i, n)
			if err != nil {
				for _, x := range arrs[:i] {
					x.Release()
				}
				return fmt.Errorf("row group %d column %q: %w", g, c.name, err)
			}
			arrs[i] = a
		}
		left -= int64(n)
		if err := fn(arrs, int64(n)); err != nil {
			return err
		}
	}
	return nil
}

// chunkValueLen guesses the bytes per value of a plain-encoded string
// column chunk from its metadata before the first batch has been read (a
// size hint for readStrings, which otherwise starts small and doubles,
// copying, up to a file's whole column): the uncompressed size less the
// 4-byte length of each value. 0 when unknown, as for a dictionary-encoded
// chunk, whose size says nothing of its values'.
func chunkValueLen(rg *file.RowGroupReader, leaf int) int {
	md, err := rg.MetaData().ColumnChunk(leaf)
	if err != nil || md.HasDictionaryPage() || md.NumValues() <= 0 {
		return 0
	}
	return int(max(0, md.TotalUncompressedSize()/md.NumValues()-4))
}

func (r *flatReader) levels(c flatColumn, n int) []int16 {
	if c.maxDef == 0 {
		return nil
	}
	if cap(r.defs) < n {
		r.defs = make([]int16, n)
	}
	return r.defs[:n]
}

func (r *flatReader) read(cr file.ColumnChunkReader, c flatColumn, i, n int) (arrow.Array, error) {
	if c.dict {
		return r.readDict(i, n)
	}
	switch rd := cr.(type) {
	case *file.ByteArrayColumnChunkReader:
		return r.readStrings(rd, c, i, n)
	case *file.Int64ColumnChunkReader:
		return readFixed(r.mem, c, n, r.levels(c, n), rd.ReadBatch)
	case *file.Int32ColumnChunkReader:
		return readFixed(r.mem, c, n, r.levels(c, n), rd.ReadBatch)
	case *file.Float64ColumnChunkReader:
		return readFixed(r.mem, c, n, r.levels(c, n), rd.ReadBatch)
	}
	return nil, fmt.Errorf("unexpected column reader %T", cr)
}

// readFixed reads n values of a fixed-width column into a new array.
func readFixed[T int32 | int64 | float64](mem memory.Allocator, c flatColumn, n int, defs []int16,
	readBatch func(int64, []T, []int16, []int16) (int64, int, error)) (arrow.Array, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * size)
	vals := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf.Bytes()))), n)
	total, got, err := readBatch(int64(n), vals, defs, nil)
	if err == nil && total != int64(n) {
		err = fmt.Errorf("column chunk ends after %d of %d rows", total, n)
	}
	if err != nil {
		buf.Release()
		return nil, err
	}
	var valid *memory.Buffer
	nulls := 0
	if defs != nil && got < n {
		// Values are dense: spread them to their rows, from the back.
		valid = memory.NewResizableBuffer(mem)
		valid.Resize(int(bitutil.BytesForBits(int64(n))))
		bits := valid.Bytes()
		clear(bits)
		k := got
		for j := n - 1; j >= 0; j-- {
			if defs[j] == c.maxDef && k > 0 {
				k--
				vals[j] = vals[k]
				bitutil.SetBit(bits, j)
			} else {
				vals[j] = zero
				nulls++
			}
		}
	}
	d := array.NewData(c.typ, n, []*memory.Buffer{valid, buf}, nil, nulls, 0)
	buf.Release()
	if valid != nil {
		valid.Release()
	}
	a := array.MakeFromData(d)
	d.Release()
	return a, nil
}

// readStrings reads n values of a string column page by page, copying the
// values (which alias the page or its dictionary) into one data buffer.
func (r *flatReader) readStrings(rd *file.ByteArrayColumnChunkReader, c flatColumn, i, n int) (arrow.Array, error) {
	defs := r.levels(c, n)
	if cap(r.scratch) < n {
		r.scratch = make([]parquet.ByteArray, n)
	}
	offBuf := memory.NewResizableBuffer(r.mem)
	offBuf.Resize((n + 1) * 4)
	offs := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(offBuf.Bytes()))), n+1)
	offs[0] = 0
	est := r.avgLen[i]*n + 64
	dataBuf := memory.NewResizableBuffer(r.mem)
	dataBuf.Reserve(est)
	data := dataBuf.Buf()[:0:est]
	var bits []byte
	var valid *memory.Buffer
	nulls := 0
	fail := func(err error) (arrow.Array, error) {
		offBuf.Release()
		dataBuf.Release()
		if valid != nil {
			valid.Release()
		}
		return nil, err
	}
	// grow makes room for need bytes, the values of the first rows rows:
	// for all n rows at their average length so far and an eighth more
	// (a dictionary-encoded chunk's metadata gives no estimate, and
	// doubling from a small guess copies the column again at each step).
	grow := func(need, rows int) {
		if need <= cap(data) {
			return
		}
		newCap := max(2*cap(data), need)
		if rows > 0 && rows < n {
			newCap = max(need, int(min(int64(need)*int64(n)/int64(rows)*9/8, math.MaxInt32)))
		}
		dataBuf.Reserve(newCap) // keeps the bytes written so far
		data = dataBuf.Buf()[:len(data):cap(dataBuf.Buf())]
	}
	for pos := 0; pos < n; {
		if !rd.HasNext() {
			if err := rd.Err(); err != nil {
				return fail(err)
			}
			return fail(fmt.Errorf("column chunk ends after %d of %d rows", pos, n))
		}
		var lv []int16
		if defs != nil {
			lv = defs[pos:]
		}
		total, got, err := rd.ReadBatchInPage(int64(n-pos), r.scratch[:n-pos], lv, nil)
		if err != nil {
			return fail(err)
		}
		if total == 0 {
			return fail(fmt.Errorf("column chunk ends after %d of %d rows", pos, n))
		}
		vs := r.scratch[:got]
		sum := 0
		for _, v := range vs {
			sum += len(v)
		}
		if len(data)+sum > math.MaxInt32 {
			return fail(fmt.Errorf("more than 2 GiB of string data in %d rows", n))
		}
		grow(len(data)+sum, pos+int(total))
		if defs == nil || int(total) == got {
			for j, v := range vs {
				data = append(data, v...)
				offs[pos+j+1] = int32(len(data))
			}
		} else {
			if valid == nil {
				valid = memory.NewResizableBuffer(r.mem)
				valid.Resize(int(bitutil.BytesForBits(int64(n))))
				bits = valid.Bytes()
				clear(bits)
				bitutil.SetBitsTo(bits, 0, int64(pos), true)
			}
			k := 0
			for j := 0; j < int(total); j++ {
				if lv[j] == c.maxDef && k < got {
					data = append(data, vs[k]...)
					k++
					bitutil.SetBit(bits, pos+j)
				} else {
					nulls++
				}
				offs[pos+j+1] = int32(len(data))
			}
		}
		if bits != nil && (defs == nil || int(total) == got) {
			bitutil.SetBitsTo(bits, int64(pos), total, true)
		}
		pos += int(total)
	}
	r.avgLen[i] = len(data)/n + 1
	dataBuf.Resize(len(data))
	d := array.NewData(c.typ, n, []*memory.Buffer{valid, offBuf, dataBuf}, nil, nulls, 0)
	offBuf.Release()
	dataBuf.Release()
	if valid != nil {
		valid.Release()
	}
	a := array.MakeFromData(d)
	d.Release()
	return a, nil
}
