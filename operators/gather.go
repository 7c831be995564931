package operators

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// gatherColumn returns column f of the rows at locs (nullLoc: a null row),
// read from chunks, in one pass and into buffers sized exactly: for
// fixed-width types and (large) strings and binaries, which is what a join
// outputs and holds nearly always. ok is false for other types (booleans,
// nested, dictionaries), which the caller takes with compute.Take.
//
// The take it replaces ran per chunk, then concatenated the parts, then
// took them again in output order, copying every string twice and growing
// the string data by doubling; for q20 (a join whose output and state are
// mostly strings) that was 40% of the CPU.
func gatherColumn(chunks []arrow.RecordBatch, f int, dt arrow.DataType, locs []rowLoc, mem memory.Allocator) (arrow.Array, bool) {
	switch dt.ID() {
	case arrow.STRING, arrow.BINARY:
		return gatherBinary[int32](chunks, f, dt, locs, mem), true
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return gatherBinary[int64](chunks, f, dt, locs, mem), true
	case arrow.DICTIONARY, arrow.EXTENSION, arrow.BOOL:
		return nil, false
	}
	fw, ok := dt.(arrow.FixedWidthDataType)
	if !ok || fw.BitWidth()%8 != 0 || fw.BitWidth() == 0 {
		return nil, false
	}
	return gatherFixed(chunks, f, dt, fw.BitWidth()/8, locs, mem), true
}

// gatherValidity returns the validity bitmap of the rows at locs and their
// null count (nil, 0 when none is null).
func gatherValidity(chunks []arrow.RecordBatch, f int, locs []rowLoc, mem memory.Allocator) (*memory.Buffer, int) {
	withNulls := false
	for _, c := range chunks {
		if c != nil && c.Column(f).NullN() > 0 {
			withNulls = true
			break
		}
	}
	nulls := 0
	for _, l := range locs {
		if l.chunk < 0 || withNulls && chunks[l.chunk].Column(f).IsNull(int(l.idx)) {
			nulls++
		}
	}
	if nulls == 0 {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(len(locs)))))
	bits := buf.Bytes()
	clear(bits)
	for j, l := range locs {
		if l.chunk >= 0 && chunks[l.chunk].Column(f).IsValid(int(l.idx)) {
			bitutil.SetBit(bits, j)
		}
	}
	return buf, nulls
}

func gatherFixed(chunks []arrow.RecordBatch, f int, dt arrow.DataType, w int, locs []rowLoc, mem memory.Allocator) arrow.Array {
	n := len(locs)
	vals := make([][]byte, len(chunks)) // per chunk, its values from its offset
	for _, l := range locs {
		if l.chunk >= 0 && vals[l.chunk] == nil {
			d := chunks[l.chunk].Column(f).Data()
			if b := d.Buffers()[1]; b != nil && b.Len() >= (d.Offset()+d.Len())*w {
				vals[l.chunk] = b.Bytes()[d.Offset()*w:]
			} else { // no values buffer (all null): zeros
				vals[l.chunk] = make([]byte, d.Len()*w)
			}
		}
	}
	data := memory.NewResizableBuffer(mem)
	data.Resize(n * w)
	out := data.Bytes()
	switch w { // the common widths without a copy call per value
	case 8:
		gatherWords[uint64](out, vals, locs)
	case 4:
		gatherWords[uint32](out, vals, locs)
	default:
		gatherBytes(out, vals, w, locs)
	}
	valid, nulls := gatherValidity(chunks, f, locs, mem)
	return finishGather(dt, n, []*memory.Buffer{valid, data}, nulls)
}

func gatherWords[W uint32 | uint64](out []byte, vals [][]byte, locs []rowLoc) {
	dst := arrow.GetData[W](out)[:len(locs)]
	src := make([][]W, len(vals))
	for c, v := range vals {
		if v != nil {
			src[c] = arrow.GetData[W](v)
		}
	}
	for j, l := range locs {
		if l.chunk < 0 {
			dst[j] = 0
			continue
		}
		dst[j] = src[l.chunk][l.idx]
	}
}

func gatherBytes(out []byte, vals [][]byte, w int, locs []rowLoc) {
	for j, l := range locs {
		dst := out[j*w : (j+1)*w]
		if l.chunk < 0 {
			clear(dst)
			continue
		}
		i := int(l.idx) * w
		copy(dst, vals[l.chunk][i:i+w])
	}
}

func gatherBinary[O int32 | int64](chunks []arrow.RecordBatch, f int, dt arrow.DataType, locs []rowLoc, mem memory.Allocator) arrow.Array {
	n := len(locs)
	type src struct {
		offs []O
		data []byte
	}
	srcs := make([]src, len(chunks))
	for _, l := range locs {
		if l.chunk >= 0 && srcs[l.chunk].offs == nil {
			d := chunks[l.chunk].Column(f).Data()
			var offs []O
			if b := d.Buffers()[1]; b != nil && b.Len() >= (d.Offset()+d.Len()+1)*sizeOf[O]() {
				offs = arrow.GetData[O](b.Bytes())[d.Offset() : d.Offset()+d.Len()+1]
			} else { // no offsets (all null or empty): every value empty
				offs = make([]O, d.Len()+1)
			}
			var data []byte
			if b := d.Buffers()[2]; b != nil {
				data = b.Bytes()
			}
			srcs[l.chunk] = src{offs: offs, data: data}
		}
	}
	total := 0
	for _, l := range locs {
		if l.chunk >= 0 {
			o := srcs[l.chunk].offs
			total += int(o[l.idx+1] - o[l.idx])
		}
	}
	offBuf := memory.NewResizableBuffer(mem)
	offBuf.Resize((n + 1) * sizeOf[O]())
	offs := arrow.GetData[O](offBuf.Bytes())[:n+1]
	dataBuf := memory.NewResizableBuffer(mem)
	dataBuf.Resize(total)
	data := dataBuf.Bytes()
	pos := 0
	for j, l := range locs {
		offs[j] = O(pos)
		if l.chunk < 0 {
			continue
		}
		s := srcs[l.chunk]
		pos += copy(data[pos:], s.data[s.offs[l.idx]:s.offs[l.idx+1]])
	}
	offs[n] = O(pos)
	valid, nulls := gatherValidity(chunks, f, locs, mem)
	return finishGather(dt, n, []*memory.Buffer{valid, offBuf, dataBuf}, nulls)
}

func sizeOf[O int32 | int64]() int {
	var o O
	switch any(o).(type) {
	case int32:
		return 4
	}
	return 8
}

// finishGather makes the array of the gathered buffers, which it owns.
func finishGather(dt arrow.DataType, n int, bufs []*memory.Buffer, nulls int) arrow.Array {
	d := array.NewData(dt, n, bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	a := array.MakeFromData(d)
	d.Release()
	return a
}
