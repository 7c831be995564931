package expr

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/compute/exec"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// takeRecord returns the rows idx (ascending) of rec. Flat columns (numbers,
// timestamps, bools, strings, binary) are gathered here; other types go
// through arrow's compute Take.
func takeRecord(rec arrow.RecordBatch, idx []int32, mem memory.Allocator) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, 0, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	var idxArr arrow.Array // built on first need
	defer func() {
		if idxArr != nil {
			idxArr.Release()
		}
	}()
	for i, col := range rec.Columns() {
		out := takeFlat(col, idx, mem)
		if out == nil {
			if idxArr == nil {
				buf := fixedBuffer(idx, mem)
				data := array.NewData(arrow.PrimitiveTypes.Int32, len(idx), []*memory.Buffer{nil, buf}, nil, 0, 0)
				buf.Release()
				idxArr = array.MakeFromData(data)
				data.Release()
			}
			ctx := exec.WithAllocator(context.Background(), mem)
			var err error
			if out, err = compute.TakeArray(ctx, col, idxArr); err != nil {
				return nil, fmt.Errorf("column %q: take: %w", rec.ColumnName(i), err)
			}
		}
		cols = append(cols, out)
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(idx))), nil
}

// takeFlat gathers rows idx of a flat array, or returns nil for other layouts.
func takeFlat(arr arrow.Array, idx []int32, mem memory.Allocator) arrow.Array {
	d := arr.Data()
	n := len(idx)
	var values []*memory.Buffer
	switch arr.DataType().ID() {
	case arrow.INT8, arrow.UINT8:
		values = []*memory.Buffer{gather[uint8](d, idx, mem)}
	case arrow.INT16, arrow.UINT16, arrow.FLOAT16:
		values = []*memory.Buffer{gather[uint16](d, idx, mem)}
	case arrow.INT32, arrow.UINT32, arrow.FLOAT32, arrow.DATE32, arrow.TIME32:
		values = []*memory.Buffer{gather[uint32](d, idx, mem)}
	case arrow.INT64, arrow.UINT64, arrow.FLOAT64, arrow.DATE64, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION:
		values = []*memory.Buffer{gather[uint64](d, idx, mem)}
	case arrow.BOOL:
		out := memory.NewResizableBuffer(mem)
		out.Resize(int(bitutil.BytesForBits(int64(n))))
		src, dst, off := d.Buffers()[1].Bytes(), out.Bytes(), d.Offset()
		clear(dst)
		for k, i := range idx {
			if bitutil.BitIsSet(src, off+int(i)) {
				bitutil.SetBit(dst, k)
			}
		}
		values = []*memory.Buffer{out}
	case arrow.STRING, arrow.BINARY:
		values = gatherVar[int32](d, idx, mem)
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		values = gatherVar[int64](d, idx, mem)
	default:
		return nil
	}
	var bitmap *memory.Buffer
	nulls := 0
	if arr.NullN() > 0 {
		bitmap = memory.NewResizableBuffer(mem)
		bitmap.Resize(int(bitutil.BytesForBits(int64(n))))
		dst := bitmap.Bytes()
		clear(dst)
		for k, i := range idx {
			if arr.IsValid(int(i)) {
				bitutil.SetBit(dst, k)
			} else {
				nulls++
			}
		}
	}
	bufs := append([]*memory.Buffer{bitmap}, values...)
	out := array.NewData(arr.DataType(), n, bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	defer out.Release()
	return array.MakeFromData(out)
}

// gather copies the fixed-width values idx of d into a new buffer.
func gather[T uint8 | uint16 | uint32 | uint64](d arrow.ArrayData, idx []int32, mem memory.Allocator) *memory.Buffer {
	src := castBuffer[T](d.Buffers()[1])
	if len(src) > 0 {
		src = src[d.Offset():]
	}
	out := memory.NewResizableBuffer(mem)
	var zero T
	out.Resize(len(idx) * int(unsafe.Sizeof(zero)))
	dst := castBuffer[T](out)
	for k, i := range idx {
		dst[k] = src[i]
	}
	return out
}

// gatherVar copies the variable-length values idx of d: offsets and data.
func gatherVar[O int32 | int64](d arrow.ArrayData, idx []int32, mem memory.Allocator) []*memory.Buffer {
	offs := castBuffer[O](d.Buffers()[1])
	if len(offs) > 0 {
		offs = offs[d.Offset():]
	}
	var data []byte
	if b := d.Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	total := 0
	for _, i := range idx {
		total += int(offs[i+1] - offs[i])
	}
	outOffs := memory.NewResizableBuffer(mem)
	var zero O
	outOffs.Resize((len(idx) + 1) * int(unsafe.Sizeof(zero)))
	oo := castBuffer[O](outOffs)
	outData := memory.NewResizableBuffer(mem)
	outData.Resize(total)
	od := outData.Bytes()
	// Copy runs of consecutive rows with one copy each: filters keep runs.
	pos, k := 0, 0
	oo[0] = 0
	for k < len(idx) {
		first := idx[k]
		end := k + 1
		for end < len(idx) && idx[end] == idx[end-1]+1 {
			end++
		}
		last := idx[end-1]
		base := O(pos) - offs[first]
		for j := first; j <= last; j++ {
			k++
			oo[k] = offs[j+1] + base
		}
		pos += copy(od[pos:], data[offs[first]:offs[last+1]])
	}
	return []*memory.Buffer{outOffs, outData}
}

func castBuffer[T any](b *memory.Buffer) []T {
	if b == nil || b.Len() == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(&b.Bytes()[0])), b.Len()/int(unsafe.Sizeof(zero)))
}
