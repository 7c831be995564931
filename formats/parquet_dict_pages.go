package formats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// The dictionary page reader of the flat Parquet reader: for a string
// column chunk whose data pages are all dictionary-encoded (as its
// encoding statistics say), a DictStringType column is the chunk's
// dictionary page, decoded once and shared by all the chunk's batches, and
// the indices unpacked from the pages' RLE/bit-packed runs: no string is
// copied or hashed per row. Other chunks go through the dictionary record
// reader (readDict), which hashes the values of plain pages into the
// dictionary.

// allDictPages reports whether every data page of the column chunk is
// dictionary-encoded, according to its encoding statistics (false when
// there are none).
func allDictPages(cc *metadata.ColumnChunkMetaData) bool {
	if !cc.HasDictionaryPage() {
		return false
	}
	stats := cc.EncodingStats()
	data := 0
	for _, s := range stats {
		switch s.PageType {
		case file.PageTypeDataPage, file.PageTypeDataPageV2:
			if s.Encoding != parquet.Encodings.RLEDict && s.Encoding != parquet.Encodings.PlainDict {
				return false
			}
			data++
		}
	}
	return data > 0
}

// dictPages reads one dictionary-encoded string column chunk.
type dictPages struct {
	pr     file.PageReader
	maxDef int16
	mem    memory.Allocator
	dict   arrow.Array // the chunk's dictionary (*array.String), nil before its page
	// the current data page, decoded: definition levels (nil when maxDef
	// is 0), the indices of its non-null values, and how far they are read
	defs       []int16
	idx        []int32
	nlev, lpos int
	vpos       int
	tmp        []int32 // levels as decoded
}

var errNotDictPage = errors.New("data page is not dictionary-encoded although the column chunk's encoding statistics say so")

func (d *dictPages) release() {
	if d.dict != nil {
		d.dict.Release()
		d.dict = nil
	}
	if d.pr != nil {
		d.pr.Close()
		d.pr = nil
	}
}

// next loads the next data page (reading the dictionary page on the way).
func (d *dictPages) next() error {
	for {
		if !d.pr.Next() {
			if err := d.pr.Err(); err != nil {
				return err
			}
			return errors.New("column chunk has no more pages")
		}
		err := d.load(d.pr.Page()) // the page reader releases its pages
		if err != nil || d.nlev > 0 {
			return err
		}
	}
}

func (d *dictPages) load(pg file.Page) error {
	d.nlev, d.lpos, d.vpos = 0, 0, 0
	data := pg.Data()
	switch p := pg.(type) {
	case *file.DictionaryPage:
		if d.dict != nil {
			return errors.New("second dictionary page in a column chunk")
		}
		if enc := parquet.Encoding(p.Encoding()); enc != parquet.Encodings.Plain && enc != parquet.Encodings.PlainDict {
			return fmt.Errorf("dictionary page encoding %s", enc)
		}
		dict, err := plainStrings(data, int(p.NumValues()), d.mem)
		d.dict = dict
		return err
	case *file.DataPageV1:
		n := int(p.NumValues())
		if d.maxDef > 0 {
			if p.DefinitionLevelEncoding() != parquet.Encodings.RLE {
				return fmt.Errorf("definition level encoding %s", p.DefinitionLevelEncoding())
			}
			if len(data) < 4 {
				return errors.New("truncated definition levels")
			}
			l := binary.LittleEndian.Uint32(data)
			if uint64(l) > uint64(len(data)-4) {
				return errors.New("truncated definition levels")
			}
			if err := d.levels(data[4:4+l], n); err != nil {
				return err
			}
			data = data[4+l:]
		}
		return d.values(data, parquet.Encoding(p.Encoding()), n)
	case *file.DataPageV2:
		n := int(p.NumValues())
		rl, dl := int(p.RepetitionLevelByteLen()), int(p.DefinitionLevelByteLen())
		if rl < 0 || dl < 0 || rl+dl > len(data) {
			return errors.New("truncated levels")
		}
		if d.maxDef > 0 {
			if err := d.levels(data[rl:rl+dl], n); err != nil {
				return err
			}
		}
		return d.values(data[rl+dl:], parquet.Encoding(p.Encoding()), n)
	}
	return nil // index pages and others: skipped
}

// levels decodes n definition levels.
func (d *dictPages) levels(b []byte, n int) error {
	if cap(d.defs) < n {
		d.defs = make([]int16, n)
	}
	d.defs = d.defs[:n]
	if cap(d.tmp) < n {
		d.tmp = make([]int32, n)
	}
	tmp := d.tmp[:n]
	if err := decodeHybrid(b, bits.Len16(uint16(d.maxDef)), tmp); err != nil {
		return fmt.Errorf("definition levels: %w", err)
	}
	for j, v := range tmp {
		if v > int32(d.maxDef) {
			return fmt.Errorf("definition level %d above the maximum %d", v, d.maxDef)
		}
		d.defs[j] = int16(v)
	}
	return nil
}

// values decodes the indices of the page's non-null values.
func (d *dictPages) values(b []byte, enc parquet.Encoding, n int) error {
	if enc != parquet.Encodings.RLEDict && enc != parquet.Encodings.PlainDict {
		return errNotDictPage
	}
	if d.dict == nil {
		return errors.New("dictionary-encoded data page before the dictionary page")
	}
	nn := n
	if d.maxDef > 0 {
		nn = 0
		for _, v := range d.defs[:n] {
			if v == d.maxDef {
				nn++
			}
		}
	}
	if cap(d.idx) < nn {
		d.idx = make([]int32, nn)
	}
	d.idx = d.idx[:nn]
	if nn > 0 {
		if len(b) < 1 || b[0] > 32 {
			return errors.New("bad dictionary index bit width")
		}
		if err := decodeHybrid(b[1:], int(b[0]), d.idx); err != nil {
			return fmt.Errorf("dictionary indices: %w", err)
		}
		size := int32(d.dict.Len())
		for _, v := range d.idx {
			if uint32(v) >= uint32(size) {
				return fmt.Errorf("dictionary index %d outside a dictionary of %d values", v, size)
			}
		}
	}
	d.nlev = n
	return nil
}

// read returns the next n rows as a DictStringType array.
func (d *dictPages) read(n int, typ arrow.DataType) (arrow.Array, error) {
	idxBuf := memory.NewResizableBuffer(d.mem)
	idxBuf.Resize(n * 4)
	out := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(idxBuf.Bytes()))), n)
	var valid *memory.Buffer
	var vbits []byte
	nulls := 0
	fail := func(err error) (arrow.Array, error) {
		idxBuf.Release()
		if valid != nil {
			valid.Release()
		}
		return nil, err
	}
	for pos := 0; pos < n; {
		if d.lpos >= d.nlev {
			if err := d.next(); err != nil {
				return fail(err)
			}
		}
		k := min(n-pos, d.nlev-d.lpos)
		if d.maxDef == 0 {
			copy(out[pos:pos+k], d.idx[d.vpos:d.vpos+k])
			d.vpos += k
		} else {
			for j, v := range d.defs[d.lpos : d.lpos+k] {
				if v == d.maxDef {
					out[pos+j] = d.idx[d.vpos]
					d.vpos++
					continue
				}
				if valid == nil {
					valid = memory.NewResizableBuffer(d.mem)
					valid.Resize(int(bitutil.BytesForBits(int64(n))))
					vbits = valid.Bytes()
					bitutil.SetBitsTo(vbits, 0, int64(n), true)
				}
				out[pos+j] = 0
				bitutil.ClearBit(vbits, pos+j)
				nulls++
			}
		}
		d.lpos += k
		pos += k
	}
	data := array.NewData(typ, n, []*memory.Buffer{valid, idxBuf}, nil, nulls, 0)
	idxBuf.Release()
	if valid != nil {
		valid.Release()
	}
	data.SetDictionary(d.dict.Data())
	a := array.MakeFromData(data)
	data.Release()
	return a, nil
}

// plainStrings decodes n PLAIN-encoded byte arrays (4-byte little-endian
// length, then the bytes) into a string array.
func plainStrings(b []byte, n int, mem memory.Allocator) (arrow.Array, error) {
	if n < 0 || n > len(b)/4 {
		return nil, fmt.Errorf("dictionary page of %d bytes cannot hold %d values", len(b), n)
	}
	offBuf := memory.NewResizableBuffer(mem)
	offBuf.Resize((n + 1) * 4)
	offs := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(offBuf.Bytes()))), n+1)
	dataBuf := memory.NewResizableBuffer(mem)
	dataBuf.Resize(len(b) - 4*n)
	vals := dataBuf.Bytes()[:0]
	offs[0] = 0
	for j := 0; j < n; j++ {
		if len(b) < 4 {
			offBuf.Release()
			dataBuf.Release()
			return nil, errors.New("truncated dictionary page")
		}
		l := binary.LittleEndian.Uint32(b)
		if uint64(l) > uint64(len(b)-4) {
			offBuf.Release()
			dataBuf.Release()
			return nil, errors.New("truncated dictionary page")
		}
		vals = append(vals, b[4:4+l]...)
		offs[j+1] = int32(len(vals))
		b = b[4+l:]
	}
	dataBuf.Resize(len(vals))
	data := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, offBuf, dataBuf}, nil, 0, 0)
	offBuf.Release()
	dataBuf.Release()
	a := array.MakeFromData(data)
	data.Release()
	return a, nil
}

// decodeHybrid fills out with values of bit width bw decoded from the
// Parquet RLE/bit-packed hybrid encoding in b.
func decodeHybrid(b []byte, bw int, out []int32) error {
	if bw < 0 || bw > 32 {
		return fmt.Errorf("bit width %d", bw)
	}
	byteW := (bw + 7) / 8
	mask := uint64(1)<<bw - 1
	for i := 0; i < len(out); {
		h, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("truncated run")
		}
		b = b[k:]
		if h&1 == 0 { // a run of one value
			if len(b) < byteW {
				return errors.New("truncated run")
			}
			var v uint64
			for j := 0; j < byteW; j++ {
				v |= uint64(b[j]) << (8 * j)
			}
			b = b[byteW:]
			if v > mask {
				return fmt.Errorf("run value %d wider than %d bits", v, bw)
			}
			cnt := min(h>>1, uint64(len(out)-i))
			fill := out[i : i+int(cnt)]
			for j := range fill {
				fill[j] = int32(v)
			}
			i += int(cnt)
			continue
		}
		// groups of 8 bit-packed values; the last may be cut short
		groups := h >> 1
		if bw == 0 {
			cnt := min(groups*8, uint64(len(out)-i))
			clear(out[i : i+int(cnt)])
			i += int(cnt)
			continue
		}
		nbytes := min(groups*uint64(bw), uint64(len(b)))
		cnt := min(groups*8, nbytes*8/uint64(bw), uint64(len(out)-i))
		if cnt == 0 {
			return errors.New("truncated bit-packed run")
		}
		src := b[:nbytes]
		dst := out[i : i+int(cnt)]
		for j := range dst {
			p := j * bw
			at := p >> 3
			var w uint64
			if at+8 <= len(src) {
				w = binary.LittleEndian.Uint64(src[at:])
			} else {
				for q := 0; at+q < len(src); q++ {
					w |= uint64(src[at+q]) << (8 * q)
				}
			}
			dst[j] = int32((w >> (p & 7)) & mask)
		}
		i += int(cnt)
		b = b[nbytes:]
	}
	return nil
}
