package formats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// Reading only the column chunks a plan needs. A Parquet file's footer
// says where every column chunk lies; a reader that decodes a few columns
// of a wide file needs only the footer and those chunks' bytes. The caller
// fetches the file's tail (ParquetTailSize), asks ParquetColumnRanges for
// the ranges of the columns it decodes, fetches them, and decodes from a
// SparseFile holding just those bytes (DecodeParquetAt, DecodeStreamAt).

// ParquetTailSize is how many bytes at the end of a file of size bytes to
// fetch first: enough for the footer of any file floe's users write in
// practice (the footer's own length is read from its last 8 bytes, and a
// larger footer is fetched with one more request).
func ParquetTailSize(size int64) int64 { return min(size, 64<<10) }

// ByteRange is a range of a file's bytes: [Off, Off+Len).
type ByteRange struct{ Off, Len int64 }

// chunkPadding is added after every column chunk: readers of files written
// by old parquet-mr read up to 100 bytes past a chunk's recorded size
// (PARQUET-816), which must still be inside the bytes held.
const chunkPadding = 128

// ParquetColumnRanges reads the footer from tail, the last len(tail) bytes
// of a Parquet file of size bytes, and returns the ranges of the column
// chunks of the named top-level columns in every row group, sorted and
// merged where less than gap bytes lie between two, and the tail's range
// itself last. need > 0 (and no ranges) means the tail is too short: fetch
// the last need bytes and call again. An error means the footer cannot be
// read this way (not Parquet, encrypted, a column not in the file): decode
// the whole file instead, which reports the problem as a decode does.
func ParquetColumnRanges(tail []byte, size int64, columns []string, gap int64) (ranges []ByteRange, need int64, err error) {
	defer recoverParquet(&err)
	n := int64(len(tail))
	if n < 8 || n > size {
		return nil, 0, errors.New("parquet tail shorter than 8 bytes")
	}
	if !bytes.Equal(tail[n-4:], []byte("PAR1")) {
		return nil, 0, errors.New("no Parquet magic at the end of the file (an encrypted footer is read whole)")
	}
	footer := int64(binary.LittleEndian.Uint32(tail[n-8 : n-4]))
	if footer+12 > size {
		return nil, 0, fmt.Errorf("parquet footer length %d exceeds the file (%d bytes)", footer, size)
	}
	if footer+8 > n {
		return nil, footer + 8, nil
	}
	md, err := metadata.NewFileMetaData(tail[n-8-footer:n-8], nil)
	if err != nil {
		return nil, 0, err
	}
	want := map[string]bool{}
	for _, c := range columns {
		want[c] = true
	}
	found := map[string]bool{}
	for rg := 0; rg < md.NumRowGroups(); rg++ {
		g := md.RowGroup(rg)
		for c := 0; c < g.NumColumns(); c++ {
			cc, err := g.ColumnChunk(c)
			if err != nil {
				return nil, 0, err
			}
			path := cc.PathInSchema()
			if len(path) == 0 || !want[path[0]] {
				continue
			}
			found[path[0]] = true
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			length := cc.TotalCompressedSize()
			if start < 0 || length < 0 || start+length > size {
				return nil, 0, fmt.Errorf("column chunk %s of row group %d lies outside the file", path, rg)
			}
			ranges = append(ranges, ByteRange{start, min(length+chunkPadding, size-start)})
		}
	}
	for _, c := range columns {
		if !found[c] && md.NumRowGroups() > 0 {
			return nil, 0, fmt.Errorf("parquet file has no column %q", c)
		}
	}
	ranges = append(ranges, ByteRange{size - n, n})
	return mergeRanges(ranges, gap), 0, nil
}

// mergeRanges sorts rs and merges ranges that overlap or lie less than gap
// bytes apart.
func mergeRanges(rs []ByteRange, gap int64) []ByteRange {
	slices.SortFunc(rs, func(a, b ByteRange) int {
		switch {
		case a.Off < b.Off:
			return -1
		case a.Off > b.Off:
			return 1
		}
		return 0
	})
	var out []ByteRange
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && r.Off <= out[k].Off+out[k].Len+gap {
			out[k].Len = max(out[k].Off+out[k].Len, r.Off+r.Len) - out[k].Off
			continue
		}
		out = append(out, r)
	}
	return out
}

// SparseFile is a file of which only some byte ranges are held: it reads
// like the whole file (parquet.ReaderAtSeeker) as long as every read falls
// inside a held range, and fails naming the range otherwise.
type SparseFile struct {
	size int64
	segs []sparseSeg // sorted by offset, disjoint
	pos  int64
}

type sparseSeg struct {
	off  int64
	data []byte
}

// NewSparseFile returns a file of size bytes holding data[i] at
// ranges[i].Off; ranges must be sorted and disjoint.
func NewSparseFile(size int64, ranges []ByteRange, data [][]byte) (*SparseFile, error) {
	f := &SparseFile{size: size}
	for i, r := range ranges {
		if int64(len(data[i])) != r.Len || r.Off < 0 || r.Off+r.Len > size {
			return nil, fmt.Errorf("sparse file: range %d [%d,+%d) holds %d bytes of a %d-byte file", i, r.Off, r.Len, len(data[i]), size)
		}
		if i > 0 && r.Off < ranges[i-1].Off+ranges[i-1].Len {
			return nil, fmt.Errorf("sparse file: ranges overlap at %d", r.Off)
		}
		f.segs = append(f.segs, sparseSeg{r.Off, data[i]})
	}
	return f, nil
}

// Held returns the number of bytes the file holds.
func (f *SparseFile) Held() int64 {
	var n int64
	for _, s := range f.segs {
		n += int64(len(s.data))
	}
	return n
}

// ReadAt implements io.ReaderAt.
func (f *SparseFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("sparse file: negative offset %d", off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), f.size)
	i, _ := slices.BinarySearchFunc(f.segs, off, func(s sparseSeg, o int64) int {
		switch {
		case s.off+int64(len(s.data)) <= o:
			return -1
		case s.off > o:
			return 1
		}
		return 0
	})
	if i == len(f.segs) || f.segs[i].off > off || f.segs[i].off+int64(len(f.segs[i].data)) < end {
		return 0, fmt.Errorf("sparse file: bytes [%d,%d) were not fetched", off, end)
	}
	s := f.segs[i]
	n := copy(p, s.data[off-s.off:end-s.off])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Seek implements io.Seeker.
func (f *SparseFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.size
	default:
		return 0, fmt.Errorf("sparse file: bad whence %d", whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("sparse file: negative position %d", offset)
	}
	f.pos = offset
	return offset, nil
}

// DecodeParquetAt is Decode for a Parquet file read through r (a whole
// file, or a SparseFile holding the chunks of opts.Schema's columns).
func DecodeParquetAt(file string, r parquet.ReaderAtSeeker, opts DecodeOptions) (*Decoded, error) {
	opts = withDecodeDefaults(opts)
	var batches []arrow.RecordBatch
	d, err := decodeParquetStream(file, r, opts, func(b arrow.RecordBatch) error {
		batches = append(batches, b)
		return nil
	})
	if err != nil {
		releaseAll(batches)
		return nil, err
	}
	d.Batches = batches
	return d, nil
}

// DecodeParquetStreamAt is DecodeStream for a Parquet file read through r.
func DecodeParquetStreamAt(file string, r parquet.ReaderAtSeeker, opts DecodeOptions, each func(arrow.RecordBatch) error) (*Decoded, error) {
	opts = withDecodeDefaults(opts)
	var cbErr error
	d, err := decodeParquetStream(file, r, opts, func(b arrow.RecordBatch) error {
		if cbErr != nil {
			b.Release()
			return cbErr
		}
		cbErr = each(b)
		return cbErr
	})
	if cbErr != nil {
		return nil, cbErr
	}
	return d, err
}

func withDecodeDefaults(opts DecodeOptions) DecodeOptions {
	if opts.Mem == nil {
		opts.Mem = memory.DefaultAllocator
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	return opts
}
