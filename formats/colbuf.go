package formats

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// colBuf accumulates one output column of the text decoders (JSON lines,
// CSV) straight into Arrow buffers allocated from mem: a value is one store
// into a buffer the column grows itself, without the per-value capacity
// checks and indirect calls of Arrow's builders. Appends never fail; the
// caller checks capacity with ensure first.
type colBuf struct {
	mem   memory.Allocator
	kind  kind
	typ   arrow.DataType
	n     int // rows appended
	cap   int // rows the buffers hold
	nulls int
	vals  *memory.Buffer // fixed-width values, boolean bits or string offsets
	data  *memory.Buffer // string bytes
	valid *memory.Buffer // validity bits; nil until the first null
	v     []byte         // vals.Buf()
	d     []byte         // data.Buf()[:bytes used]
	bits  []byte         // valid.Buf()
}

func newColBuf(mem memory.Allocator, k kind) colBuf {
	return colBuf{mem: mem, kind: k, typ: k.arrowType()}
}

// width is the bytes per value of a fixed-width column; 0 for booleans
// (bits) and strings (offsets).
func (c *colBuf) width() int {
	switch c.kind {
	case kString, kBool:
		return 0
	case kInt32:
		return 4
	}
	return 8 // int64, float64, timestamps
}

// valsBytes is the size of vals for rows rows.
func (c *colBuf) valsBytes(rows int) int {
	switch c.kind {
	case kString:
		return (rows + 1) * 4
	case kBool:
		return int(bitutil.BytesForBits(int64(rows)))
	}
	return rows * c.width()
}

// ensure makes room for rows rows in all.
func (c *colBuf) ensure(rows int) {
	if rows <= c.cap {
		return
	}
	rows = max(rows, 2*c.cap)
	if c.vals == nil {
		c.vals = memory.NewResizableBuffer(c.mem)
		if c.kind == kString {
			c.data = memory.NewResizableBuffer(c.mem)
			c.data.Reserve(rows * 8)
			c.d = c.data.Buf()[:0]
		}
	}
	c.vals.Reserve(c.valsBytes(rows))
	c.v = c.vals.Buf()
	if c.kind == kString && c.n == 0 {
		*(*int32)(unsafe.Pointer(&c.v[0])) = 0
	}
	if c.valid != nil {
		c.valid.Reserve(int(bitutil.BytesForBits(int64(rows))))
		c.bits = c.valid.Buf()
	}
	c.cap = rows
}

// markValid records row c.n as valid when the column has a bitmap.
func (c *colBuf) markValid() {
	if c.bits != nil {
		bitutil.SetBit(c.bits, c.n)
	}
}

func (c *colBuf) appendNull() {
	if c.valid == nil {
		c.valid = memory.NewResizableBuffer(c.mem)
		c.valid.Reserve(int(bitutil.BytesForBits(int64(c.cap))))
		c.bits = c.valid.Buf()
		bitutil.SetBitsTo(c.bits, 0, int64(c.n), true)
	}
	bitutil.ClearBit(c.bits, c.n)
	switch c.kind {
	case kString:
		*(*int32)(unsafe.Pointer(&c.v[(c.n+1)*4])) = int32(len(c.d))
	case kBool:
		bitutil.ClearBit(c.v, c.n)
	default:
		clear(c.v[c.n*c.width() : (c.n+1)*c.width()])
	}
	c.nulls++
	c.n++
}

func (c *colBuf) appendInt64(x int64) {
	c.markValid()
	*(*int64)(unsafe.Pointer(&c.v[c.n*8])) = x
	c.n++
}

func (c *colBuf) appendInt32(x int32) {
	c.markValid()
	*(*int32)(unsafe.Pointer(&c.v[c.n*4])) = x
	c.n++
}

func (c *colBuf) appendFloat64(x float64) {
	c.markValid()
	*(*float64)(unsafe.Pointer(&c.v[c.n*8])) = x
	c.n++
}

func (c *colBuf) appendBool(x bool) {
	c.markValid()
	bitutil.SetBitTo(c.v, c.n, x)
	c.n++
}

func (c *colBuf) appendBytes(s []byte) {
	c.markValid()
	if len(c.d)+len(s) > cap(c.d) {
		c.data.Reserve(max(2*cap(c.d), len(c.d)+len(s)))
		c.d = c.data.Buf()[:len(c.d)]
	}
	c.d = append(c.d, s...) // within capacity: no allocation
	*(*int32)(unsafe.Pointer(&c.v[(c.n+1)*4])) = int32(len(c.d))
	c.n++
}

// dataBytes is the size of the string bytes appended.
func (c *colBuf) dataBytes() int { return len(c.d) }

// finish returns the rows appended as an array and starts a new batch.
func (c *colBuf) finish() arrow.Array {
	if c.vals == nil {
		c.ensure(1)
	}
	bufs := []*memory.Buffer{nil, c.vals}
	c.vals.ResizeNoShrink(c.valsBytes(c.n))
	if c.valid != nil {
		c.valid.ResizeNoShrink(int(bitutil.BytesForBits(int64(c.n))))
		bufs[0] = c.valid
	}
	if c.kind == kString {
		c.data.ResizeNoShrink(len(c.d))
		bufs = append(bufs, c.data)
	}
	d := array.NewData(c.typ, c.n, bufs, nil, c.nulls, 0)
	a := array.MakeFromData(d)
	d.Release()
	c.release()
	return a
}

// release drops the buffers; the column is empty again.
func (c *colBuf) release() {
	for _, b := range []*memory.Buffer{c.vals, c.data, c.valid} {
		if b != nil {
			b.Release()
		}
	}
	*c = colBuf{mem: c.mem, kind: c.kind, typ: c.typ}
}
