package operators

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/keygroup"
)

// Type tags of the key encoding. They are part of the frozen format.
const (
	tagNull      byte = 0x00
	tagInt64     byte = 0x01
	tagInt32     byte = 0x02
	tagFloat64   byte = 0x03
	tagString    byte = 0x04
	tagBool      byte = 0x05
	tagTimestamp byte = 0x06
	tagOther     byte = 0xFF
)

// SerializeKey appends the canonical encoding of the composite key formed by
// columns keyCols of row `row` of rec to buf and returns the extended buffer.
//
// The encoding is frozen (it decides key groups forever). Per key column, in
// keyCols order:
//
//	null value               0x00
//	int64                    0x01, 8 bytes big-endian of uint64(v) XOR 1<<63
//	int32                    0x02, 8 bytes big-endian of uint64(int64(v)) XOR 1<<63
//	float64                  0x03, 8 bytes big-endian of the order-preserving
//	                         bits: -0 is encoded as +0 and every NaN as
//	                         0x7FF8000000000000, then negative values have all
//	                         bits flipped and others the sign bit set
//	string                   0x04, uvarint(len), the UTF-8 bytes
//	bool                     0x05, 0x00 (false) or 0x01 (true)
//	timestamp[us]            0x06, 8 bytes as int64
//
// The encoding is unambiguous (prefix-free per column) so distinct composite
// keys never collide. Other column types are rejected by NewWindow and
// PartitionIndices; SerializeKey encodes them as 0xFF, uvarint(len), the value's
// string form, which is not guaranteed stable across releases.
func SerializeKey(buf []byte, rec arrow.RecordBatch, row int, keyCols []int) []byte {
	for _, c := range keyCols {
		col := rec.Column(c)
		bc := bindColumn(kindOf(col.DataType()), col)
		buf = bc.append(buf, row)
	}
	return buf
}

// kindOf returns the key tag used for a data type, or tagOther.
func kindOf(dt arrow.DataType) byte {
	switch t := dt.(type) {
	case *arrow.Int64Type:
		return tagInt64
	case *arrow.Int32Type:
		return tagInt32
	case *arrow.Float64Type:
		return tagFloat64
	case *arrow.StringType:
		return tagString
	case *arrow.BooleanType:
		return tagBool
	case *arrow.TimestampType:
		if t.Unit == arrow.Microsecond {
			return tagTimestamp
		}
	}
	return tagOther
}

// boundCol is one key column of one batch, with its typed values extracted so
// that encoding a row costs no interface call.
type boundCol struct {
	kind byte
	i64  []int64
	i32  []int32
	f64  []float64
	ts   []arrow.Timestamp
	str  *array.String // tagString: the values, or a dictionary's values
	bl   *array.Boolean
	arr  arrow.Array
	bm   []byte // validity bitmap, nil when the column has no nulls
	off  int

	// A dictionary-encoded string column: row i is str.Value(dict
	// index of i). dictNulls says the dictionary itself holds nulls.
	dict      *array.Dictionary
	idx32     []int32 // the indices when they are int32
	dictNulls bool
}

func bindColumn(kind byte, col arrow.Array) boundCol {
	bc := boundCol{kind: kind, arr: col}
	if col.NullN() > 0 {
		bc.bm = col.NullBitmapBytes()
		bc.off = col.Data().Offset()
	}
	switch kind {
	case tagInt64:
		bc.i64 = col.(*array.Int64).Int64Values()
	case tagInt32:
		bc.i32 = col.(*array.Int32).Int32Values()
	case tagFloat64:
		bc.f64 = col.(*array.Float64).Float64Values()
	case tagString:
		if d, ok := col.(*array.Dictionary); ok {
			bc.dict = d
			bc.str = d.Dictionary().(*array.String)
			bc.dictNulls = bc.str.NullN() > 0
			if ix, ok := d.Indices().(*array.Int32); ok {
				bc.idx32 = ix.Int32Values()
			}
		} else {
			bc.str = col.(*array.String)
		}
	case tagBool:
		bc.bl = col.(*array.Boolean)
	case tagTimestamp:
		bc.ts = col.(*array.Timestamp).TimestampValues()
	}
	return bc
}

func (bc *boundCol) valid(i int) bool {
	if bc.bm != nil && !bitutil.BitIsSet(bc.bm, bc.off+i) {
		return false
	}
	return !bc.dictNulls || bc.str.IsValid(bc.dictIndex(i))
}

// dictIndex is the dictionary index of row i of a dictionary column.
func (bc *boundCol) dictIndex(i int) int {
	if bc.idx32 != nil {
		return int(bc.idx32[i])
	}
	return bc.dict.GetValueIndex(i)
}

// strValue is the value of row i of a valid string column.
func (bc *boundCol) strValue(i int) string {
	if bc.dict != nil {
		return bc.str.Value(bc.dictIndex(i))
	}
	return bc.str.Value(i)
}

func appendU64(buf []byte, tag byte, u uint64) []byte {
	return binary.BigEndian.AppendUint64(append(buf, tag), u)
}

func floatKeyBits(v float64) uint64 {
	var bits uint64
	switch {
	case v == 0:
		bits = 0
	case math.IsNaN(v):
		bits = 0x7FF8000000000000
	default:
		bits = math.Float64bits(v)
	}
	if bits>>63 == 1 {
		return ^bits
	}
	return bits | 1<<63
}

func floatFromKeyBits(u uint64) float64 {
	if u>>63 == 1 {
		return math.Float64frombits(u &^ (1 << 63))
	}
	return math.Float64frombits(^u)
}

func (bc *boundCol) append(buf []byte, i int) []byte {
	if !bc.valid(i) {
		return append(buf, tagNull)
	}
	switch bc.kind {
	case tagInt64:
		return appendU64(buf, tagInt64, uint64(bc.i64[i])^1<<63)
	case tagInt32:
		return appendU64(buf, tagInt32, uint64(int64(bc.i32[i]))^1<<63)
	case tagFloat64:
		return appendU64(buf, tagFloat64, floatKeyBits(bc.f64[i]))
	case tagString:
		s := bc.strValue(i)
		buf = binary.AppendUvarint(append(buf, tagString), uint64(len(s)))
		return append(buf, s...)
	case tagBool:
		if bc.bl.Value(i) {
			return append(buf, tagBool, 1)
		}
		return append(buf, tagBool, 0)
	case tagTimestamp:
		return appendU64(buf, tagTimestamp, uint64(bc.ts[i])^1<<63)
	default:
		s := bc.arr.ValueStr(i)
		buf = binary.AppendUvarint(append(buf, tagOther), uint64(len(s)))
		return append(buf, s...)
	}
}

// keyEncoder encodes the key columns of one batch.
type keyEncoder struct {
	cols []boundCol
}

func (e *keyEncoder) bind(kinds []byte, cols []arrow.Array) {
	e.cols = e.cols[:0]
	for i, c := range cols {
		e.cols = append(e.cols, bindColumn(kinds[i], c))
	}
}

func (e *keyEncoder) encode(buf []byte, row int) []byte {
	for i := range e.cols {
		buf = e.cols[i].append(buf, row)
	}
	return buf
}

// decodeKey appends the values of an encoded key to one builder per column.
func decodeKey(key string, bs []array.Builder) error {
	p := 0
	for ci, b := range bs {
		if p >= len(key) {
			return fmt.Errorf("key column %d: truncated key", ci)
		}
		tag := key[p]
		p++
		if tag == tagNull {
			b.AppendNull()
			continue
		}
		switch tag {
		case tagInt64, tagInt32, tagFloat64, tagTimestamp:
			if p+8 > len(key) {
				return fmt.Errorf("key column %d: truncated key", ci)
			}
			u := binary.BigEndian.Uint64([]byte(key[p : p+8]))
			p += 8
			var ok bool
			switch tag {
			case tagInt64:
				var bb *array.Int64Builder
				if bb, ok = b.(*array.Int64Builder); ok {
					bb.Append(int64(u ^ 1<<63))
				}
			case tagInt32:
				var bb *array.Int32Builder
				if bb, ok = b.(*array.Int32Builder); ok {
					bb.Append(int32(int64(u ^ 1<<63)))
				}
			case tagFloat64:
				var bb *array.Float64Builder
				if bb, ok = b.(*array.Float64Builder); ok {
					bb.Append(floatFromKeyBits(u))
				}
			case tagTimestamp:
				var bb *array.TimestampBuilder
				if bb, ok = b.(*array.TimestampBuilder); ok {
					bb.Append(arrow.Timestamp(int64(u ^ 1<<63)))
				}
			}
			if !ok {
				return fmt.Errorf("key column %d: tag %#x does not match builder %T", ci, tag, b)
			}
		case tagString:
			n, w := binary.Uvarint([]byte(key[p:min(len(key), p+binary.MaxVarintLen64)]))
			if w <= 0 || uint64(len(key)-p-w) < n {
				return fmt.Errorf("key column %d: bad string length", ci)
			}
			p += w
			bb, ok := b.(*array.StringBuilder)
			if !ok {
				return fmt.Errorf("key column %d: tag %#x does not match builder %T", ci, tag, b)
			}
			bb.Append(key[p : p+int(n)])
			p += int(n)
		case tagBool:
			bb, ok := b.(*array.BooleanBuilder)
			if !ok || p >= len(key) {
				return fmt.Errorf("key column %d: bad bool", ci)
			}
			bb.Append(key[p] == 1)
			p++
		default:
			return fmt.Errorf("key column %d: unsupported tag %#x", ci, tag)
		}
	}
	if p != len(key) {
		return fmt.Errorf("key: %d trailing bytes", len(key)-p)
	}
	return nil
}

// keyKinds checks that every key column of schema has a supported type.
func keyKinds(schema *arrow.Schema, keyCols []int) ([]byte, error) {
	return checkKeyKinds(schema, keyCols, false)
}

// keyKindsDict is keyKinds that also accepts dictionary-encoded string
// columns (of any index type), whose keys encode as their values do
// (tagString): the Window and PartitionIndices take them.
func keyKindsDict(schema *arrow.Schema, keyCols []int) ([]byte, error) {
	return checkKeyKinds(schema, keyCols, true)
}

// isStringDict reports whether dt is a dictionary of strings.
func isStringDict(dt arrow.DataType) bool {
	d, ok := dt.(*arrow.DictionaryType)
	return ok && d.ValueType.ID() == arrow.STRING
}

func checkKeyKinds(schema *arrow.Schema, keyCols []int, dict bool) ([]byte, error) {
	kinds := make([]byte, len(keyCols))
	for i, c := range keyCols {
		if c < 0 || c >= schema.NumFields() {
			return nil, fmt.Errorf("key column index %d out of range [0,%d)", c, schema.NumFields())
		}
		f := schema.Field(c)
		k := kindOf(f.Type)
		if dict && isStringDict(f.Type) {
			k = tagString
		}
		if k == tagOther {
			return nil, fmt.Errorf("key column %q: unsupported type %s (want int64, int32, float64, string, bool or timestamp[us])", f.Name, f.Type)
		}
		kinds[i] = k
	}
	return kinds, nil
}

// PartitionIndices returns, per subtask at parallelism p with k key groups,
// the indices of rec's rows that subtask owns, in order (empty, never nil,
// when none: a nil selection means every row to ProcessSelected). It
// copies no row data: each subtask reads the shared batch through its
// selection (Window.ProcessSelected).
func PartitionIndices(rec arrow.RecordBatch, keyCols []int, p, k int) ([][]int32, error) {
	if rec == nil {
		return nil, fmt.Errorf("partition: nil record batch")
	}
	if !keygroup.ValidCount(k) {
		return nil, fmt.Errorf("partition: max parallelism %d out of range [1,%d]", k, keygroup.Max)
	}
	if p < 1 || p > k {
		return nil, fmt.Errorf("partition: parallelism %d out of range [1,%d]", p, k)
	}
	kinds, err := keyKindsDict(rec.Schema(), keyCols)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	n := int(rec.NumRows())
	idx := make([][]int32, p)
	if n == 0 {
		for s := range idx {
			idx[s] = []int32{}
		}
		return idx, nil
	}
	if p == 1 {
		all := make([]int32, n)
		for i := range all {
			all[i] = int32(i)
		}
		idx[0] = all
		return idx, nil
	}
	cols := make([]arrow.Array, len(keyCols))
	for i, c := range keyCols {
		cols[i] = rec.Column(c)
	}
	var enc keyEncoder
	enc.bind(kinds, cols)
	var buf []byte
	for s := range idx {
		idx[s] = make([]int32, 0, n/p+n/(4*p)+8)
	}
	for i := 0; i < n; i++ {
		buf = enc.encode(buf[:0], i)
		s := keygroup.SubtaskOf(keygroup.Of(buf, k), p, k)
		idx[s] = append(idx[s], int32(i))
	}
	return idx, nil
}

// takeRows returns a new batch with rows idx of rec, in that order, its
// buffers allocated from mem. The caller releases it.
func takeRows(rec arrow.RecordBatch, idx []int32, mem memory.Allocator) (arrow.RecordBatch, error) {
	if err := checkRows(idx, int(rec.NumRows())); err != nil {
		return nil, err
	}
	ib := array.NewInt32Builder(mem)
	ib.AppendValues(idx, nil)
	indices := ib.NewInt32Array()
	ib.Release()
	defer indices.Release()
	ctx := compute.WithAllocator(context.Background(), mem)
	cols := make([]arrow.Array, rec.NumCols())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i := range cols {
		c, err := takeTrusted(ctx, rec.Column(i), indices)
		if err != nil {
			release()
			return nil, fmt.Errorf("take column %q: %w", rec.Schema().Field(i).Name, err)
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(rec.Schema(), cols, int64(len(idx)))
	release()
	return out, nil
}

// TakeRows returns a new batch with rows idx of rec, in that order, its
// buffers allocated from mem (the exchange between workers routes rows
// with it). The caller releases it.
func TakeRows(rec arrow.RecordBatch, idx []int32, mem memory.Allocator) (arrow.RecordBatch, error) {
	return takeRows(rec, idx, mem)
}

// takeTrusted is compute.TakeArray without its pass over the indices to
// check their bounds: for indices the operators built themselves, within
// values by construction (a null index is 0). The check was 40% of the
// take in a join's output gather.
func takeTrusted(ctx context.Context, values, indices arrow.Array) (arrow.Array, error) {
	return compute.TakeArrayOpts(ctx, values, indices, compute.TakeOptions{BoundsCheck: false})
}

// checkRows checks that every index of idx is a row of n: what the bounds
// check takeTrusted skips, in one tight pass.
func checkRows(idx []int32, n int) error {
	for _, i := range idx {
		if uint32(i) >= uint32(n) {
			return fmt.Errorf("take: row %d out of range [0,%d) (internal error)", i, n)
		}
	}
	return nil
}
