package expr

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// vec is a column of values during evaluation. A constant vec holds one value
// that stands for every row (len of its slices is 1). Exactly one of b, i, f, s
// is used, by t.k: kInt and kTimestamp use i.
//
// Strings of columns alias the record's Arrow buffers (unsafe.String): a vec
// must not outlive the evaluation that made it.
type vec struct {
	t       typ
	isConst bool
	valid   []bool // nil: no nulls; else valid[i] is false for a null row
	b       []bool
	i       []int64
	f       []float64
	s       []string
	// A string column stays in its Arrow layout (off32 or off64 into data)
	// until a kernel needs s; str() then builds s once.
	off32 []int32
	off64 []int64
	data  []byte
}

// str returns the strings of a kString vec, materialising them from the
// Arrow layout on first use.
func (v *vec) str() []string {
	if v.s != nil {
		return v.s
	}
	switch {
	case v.off32 != nil:
		v.s = make([]string, len(v.off32)-1)
		for i := range v.s {
			v.s[i] = aliasString(v.data, int64(v.off32[i]), int64(v.off32[i+1]))
		}
	case v.off64 != nil:
		v.s = make([]string, len(v.off64)-1)
		for i := range v.s {
			v.s[i] = aliasString(v.data, v.off64[i], v.off64[i+1])
		}
	}
	return v.s
}

// newVec allocates a vec of type t with ln rows (ln is 1 for a constant).
func newVec(t typ, ln int, isConst bool) *vec {
	v := &vec{t: t, isConst: isConst}
	switch t.k {
	case kBool:
		v.b = make([]bool, ln)
	case kInt, kTimestamp:
		v.i = make([]int64, ln)
	case kFloat:
		v.f = make([]float64, ln)
	case kString:
		v.s = make([]string, ln)
	case kNull:
		v.valid = make([]bool, ln)
	}
	return v
}

// nullConst is the constant null of type t.
func nullConst(t typ) *vec {
	v := newVec(t, 1, true)
	v.valid = []bool{false}
	return v
}

// isNullConst reports whether v is a constant null.
func (v *vec) isNullConst() bool {
	return v.isConst && (v.t.k == kNull || (v.valid != nil && !v.valid[0]))
}

// validAt reports whether row i (a physical index) is not null.
func (v *vec) validAt(i int) bool { return v.valid == nil || v.valid[i] }

// andValid merges the validity of two operands for a result of ln rows.
// The returned slice may be shared with an operand and must not be mutated.
func andValid(a, b *vec, ln int) []bool {
	av, bv := a.valid, b.valid
	if a.isConst && !b.isConst {
		av = nil // non-null constant (null constants are handled by callers)
	}
	if b.isConst && !a.isConst {
		bv = nil
	}
	switch {
	case av == nil:
		return bv
	case bv == nil:
		return av
	}
	out := make([]bool, ln)
	for i := range out {
		out[i] = av[i] && bv[i]
	}
	return out
}

// loadColumn converts an Arrow column to a vec of type t without copying when
// the layout allows it (int64, float64, timestamp values).
func loadColumn(arr arrow.Array, t typ) (*vec, error) {
	n := arr.Len()
	v := &vec{t: t}
	if t.k == kNull {
		v.valid = make([]bool, n)
		return v, nil
	}
	if n == 0 && t.k == kString {
		v.s = []string{} // an empty array may have no offsets buffer
		return v, nil
	}
	if arr.NullN() > 0 {
		v.valid = make([]bool, n)
		for i := range v.valid {
			v.valid[i] = arr.IsValid(i)
		}
	}
	switch a := arr.(type) {
	case *array.Boolean:
		v.b = make([]bool, n)
		for i := range v.b {
			v.b[i] = a.Value(i)
		}
	case *array.Int64:
		v.i = a.Int64Values()
	case *array.Int32:
		v.i = widen(a.Int32Values())
	case *array.Int16:
		v.i = widen(a.Int16Values())
	case *array.Int8:
		v.i = widen(a.Int8Values())
	case *array.Uint32:
		v.i = widen(a.Uint32Values())
	case *array.Uint16:
		v.i = widen(a.Uint16Values())
	case *array.Uint8:
		v.i = widen(a.Uint8Values())
	case *array.Float64:
		v.f = a.Float64Values()
	case *array.Float32:
		v.f = make([]float64, n)
		for i, x := range a.Float32Values() {
			v.f[i] = float64(x)
		}
	case *array.Timestamp:
		ts := a.TimestampValues()
		if len(ts) > 0 {
			v.i = unsafe.Slice((*int64)(unsafe.Pointer(&ts[0])), len(ts))
		} else {
			v.i = []int64{}
		}
	case *array.String:
		v.off32, v.data = a.ValueOffsets(), dataBuffer(a.Data())
	case *array.LargeString:
		v.off64, v.data = a.ValueOffsets(), dataBuffer(a.Data())
	default:
		return nil, fmt.Errorf("column type %s is not supported in expressions", arr.DataType())
	}
	return v, nil
}

func widen[T int8 | int16 | int32 | uint8 | uint16 | uint32](in []T) []int64 {
	out := make([]int64, len(in))
	for i, x := range in {
		out[i] = int64(x)
	}
	return out
}

func dataBuffer(d arrow.ArrayData) []byte {
	bufs := d.Buffers()
	if len(bufs) < 3 || bufs[2] == nil {
		return nil
	}
	return bufs[2].Bytes()
}

// aliasString returns data[from:to] as a string without copying.
func aliasString(data []byte, from, to int64) string {
	if to <= from {
		return ""
	}
	return unsafe.String(&data[from], int(to-from))
}

// expand returns v with n physical rows (a constant is repeated).
func expand(v *vec, n int) *vec {
	if !v.isConst {
		return v
	}
	out := newVec(v.t, n, false)
	if !v.validAt(0) {
		out.valid = make([]bool, n)
		return out
	}
	switch v.t.k {
	case kBool:
		fill(out.b, v.b[0])
	case kInt, kTimestamp:
		fill(out.i, v.i[0])
	case kFloat:
		fill(out.f, v.f[0])
	case kString:
		fill(out.s, v.s[0])
	case kNull:
		out.valid = make([]bool, n)
	}
	return out
}

func fill[T any](s []T, x T) {
	for i := range s {
		s[i] = x
	}
}

// toArrow copies v (n rows) into a new Arrow array allocated from mem.
func toArrow(v *vec, n int, mem memory.Allocator) (arrow.Array, error) {
	v = expand(v, n)
	if v.t.k == kNull {
		return array.NewNull(n), nil
	}
	var (
		bitmap *memory.Buffer
		nulls  int
	)
	if v.valid != nil {
		for _, ok := range v.valid {
			if !ok {
				nulls++
			}
		}
		if nulls > 0 {
			bitmap = packBools(v.valid, mem)
			defer bitmap.Release()
		}
	}
	var bufs []*memory.Buffer
	switch v.t.k {
	case kBool:
		bufs = []*memory.Buffer{bitmap, packBools(v.b, mem)}
	case kInt, kTimestamp:
		bufs = []*memory.Buffer{bitmap, fixedBuffer(v.i, mem)}
	case kFloat:
		bufs = []*memory.Buffer{bitmap, fixedBuffer(v.f, mem)}
	case kString:
		total := 0
		for i, s := range v.str() {
			if v.validAt(i) {
				total += len(s)
			}
		}
		if total > math.MaxInt32 {
			return nil, fmt.Errorf("string result of %d bytes exceeds the 2 GiB limit of an Arrow string array", total)
		}
		offs := make([]int32, n+1)
		data := memory.NewResizableBuffer(mem)
		data.Resize(total)
		db := data.Bytes()
		pos := 0
		for i, s := range v.s {
			if v.validAt(i) {
				pos += copy(db[pos:], s)
			}
			offs[i+1] = int32(pos)
		}
		bufs = []*memory.Buffer{bitmap, fixedBuffer(offs, mem), data}
	}
	for _, b := range bufs[1:] {
		defer b.Release()
	}
	data := array.NewData(v.t.arrowType(), n, bufs, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// fixedBuffer copies a fixed-width slice into a buffer from mem.
func fixedBuffer[T int32 | int64 | float64](s []T, mem memory.Allocator) *memory.Buffer {
	var zero T
	size := int(unsafe.Sizeof(zero))
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(len(s) * size)
	if len(s) > 0 {
		copy(unsafe.Slice((*T)(unsafe.Pointer(&buf.Bytes()[0])), len(s)), s)
	}
	return buf
}

// packBools packs bools into an Arrow bitmap allocated from mem.
func packBools(bs []bool, mem memory.Allocator) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize((len(bs) + 7) / 8)
	out := buf.Bytes()
	full := len(bs) / 8
	for j := 0; j < full; j++ {
		c := bs[j*8 : j*8+8 : j*8+8]
		out[j] = b2u(c[0]) | b2u(c[1])<<1 | b2u(c[2])<<2 | b2u(c[3])<<3 |
			b2u(c[4])<<4 | b2u(c[5])<<5 | b2u(c[6])<<6 | b2u(c[7])<<7
	}
	if rem := len(bs) % 8; rem > 0 {
		var x byte
		for k := 0; k < rem; k++ {
			x |= b2u(bs[full*8+k]) << k
		}
		out[full] = x
	}
	return buf
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}
