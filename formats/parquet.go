package formats

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// DefaultRowGroupRows is the row group size of EncodeParquet when
// EncodeOptions.RowGroupRows is zero.
const DefaultRowGroupRows = 128 * 1024

// EncodeOptions configure EncodeParquet.
type EncodeOptions struct {
	// Compression is "zstd" (default), "snappy" or "none".
	Compression string
	// NoDictionary writes every column plainly: cheaper for columns of
	// mostly distinct values (state keys), larger for repetitive ones. By
	// default string columns are dictionary-encoded and others are not
	// (dictionaries of numbers and timestamps rarely pay for their hashing).
	NoDictionary bool
	// IntStatsOnly writes column statistics only for top-level integer,
	// date and timestamp columns: state files, whose readers prune row
	// groups by key group and window bounds, and never by a string's or a
	// list's min and max, which cost a comparison per value to keep.
	IntStatsOnly bool
	// RowGroupRows is the maximum number of rows per row group.
	RowGroupRows int64
	// Mem is the allocator used while writing (default memory.DefaultAllocator).
	Mem memory.Allocator
}

// dictSample is how many values of a string column repeats looks at.
const dictSample = 4096

// repeats reports whether dictionary encoding pays for column col of b
// (string or binary): whether its values repeat and their dictionary stays
// within the writer's dictionary page limit, so the writer does not hash
// every value into a dictionary it then abandons. It samples up to
// dictSample non-null values spread evenly over the batch and estimates the
// column's distinct count from the repeats in the sample (n draws from D
// values repeat about n²/2D times): a window's output keyed by a million
// users is written plainly, one keyed by ten thousand users (each in many
// windows) or a column of few pages with a dictionary. A nil b, or fewer
// than 64 values: yes. It looks at one batch, the first, so that
// PartEncoder, which sees batches one by one, decides as EncodeParquet.
func repeats(b arrow.RecordBatch, col int) bool {
	if b == nil || col >= int(b.NumCols()) {
		return true
	}
	var get func(int) string
	switch x := b.Column(col).(type) {
	case *array.String:
		get = x.Value
	case *array.LargeString:
		get = x.Value
	case *array.Binary:
		get = func(i int) string { return string(x.Value(i)) }
	case *array.LargeBinary:
		get = func(i int) string { return string(x.Value(i)) }
	default:
		return true
	}
	a := b.Column(col)
	valid := a.Len() - a.NullN()
	if valid < 64 {
		return true
	}
	// Positions drawn at random (a fixed seed: the same batch always gets
	// the same answer), not at a stride, which a sorted periodic column
	// (users in order, window after window) would alias.
	rng := rand.New(rand.NewPCG(uint64(a.Len()), 0x9e3779b97f4a7c15))
	seen := make(map[string]struct{}, min(valid, dictSample))
	n, size := 0, 0
	for range 2 * dictSample {
		if n == dictSample {
			break
		}
		if i := rng.IntN(a.Len()); a.IsValid(i) {
			v := get(i)
			seen[v] = struct{}{}
			n++
			size += len(v)
		}
	}
	dup := n - len(seen)
	if n == 0 || dup == 0 {
		return n == 0
	}
	distinct := float64(n) * float64(n) / (2 * float64(dup)) // estimated over the batch
	distinct = min(distinct, float64(valid))
	avg := float64(size) / float64(n)
	return 2*distinct <= float64(valid) && distinct*(avg+4) <= dictPageLimit
}

// dictPageLimit is the writer's dictionary page size limit, past which it
// falls back to plain encoding (parquet.DefaultDictionaryPageSizeLimit).
const dictPageLimit = float64(parquet.DefaultDictionaryPageSizeLimit)

// firstRows returns the first batch of batches with rows (nil: none).
func firstRows(batches []arrow.RecordBatch) arrow.RecordBatch {
	for _, b := range batches {
		if b != nil && b.NumRows() > 0 {
			return b
		}
	}
	return nil
}

// EncodeParquet writes batches, which must all have schema's column types, as
// one Parquet file. Column statistics are on, and the Arrow schema is stored
// in the file so that ReadParquet returns exactly schema (timestamps stay
// timestamp[us, UTC], field metadata is kept).
func EncodeParquet(schema *arrow.Schema, batches []arrow.RecordBatch, opts EncodeOptions) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeParquet(&buf, schema, batches, opts); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodeBufs are the output buffers of EncodeParquetPooled. An encoded
// state or output file is written into one buffer that grows by doubling;
// for files of tens of megabytes the growth (allocating, zeroing and
// faulting in twice the file's size, copying it once more) cost as much
// as a fifth of a state-heavy query's CPU. Reused buffers have the room.
// Not a sync.Pool: the garbage collector empties that every other cycle,
// and state-heavy epochs run many cycles between two encodes.
var encodeBufs bufCache

// bufCache keeps up to maxCachedBufs buffers of up to maxCachedBytes in
// all, so idle buffers never pin more than that.
type bufCache struct {
	mu    sync.Mutex
	bufs  []*bytes.Buffer
	bytes int
}

const (
	maxCachedBufs  = 8
	maxCachedBytes = 128 << 20
)

func (c *bufCache) get() *bytes.Buffer {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.bufs)
	if n == 0 {
		return new(bytes.Buffer)
	}
	// The largest: the caller may be about to write a big file.
	best := 0
	for i, b := range c.bufs {
		if b.Cap() > c.bufs[best].Cap() {
			best = i
		}
	}
	b := c.bufs[best]
	c.bufs[best] = c.bufs[n-1]
	c.bufs = c.bufs[:n-1]
	c.bytes -= b.Cap()
	b.Reset()
	return b
}

func (c *bufCache) put(b *bytes.Buffer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bufs) < maxCachedBufs && c.bytes+b.Cap() <= maxCachedBytes {
		c.bufs = append(c.bufs, b)
		c.bytes += b.Cap()
	}
}

// encodeRatios remembers, per schema (its fingerprint), the encoded size
// of the last file over its batches' bytes, for EncodeParquetPooled's first
// reservation. A process sees few schemas; past maxRatios new ones are not
// remembered.
var encodeRatios ratioCache

type ratioCache struct {
	mu sync.Mutex
	m  map[string]float64
}

const maxRatios = 256

func (c *ratioCache) get(fp string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.m[fp]; ok && fp != "" {
		return r
	}
	return 0.25
}

func (c *ratioCache) put(fp string, r float64) {
	if fp == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]float64{}
	}
	if _, ok := c.m[fp]; ok || len(c.m) < maxRatios {
		c.m[fp] = min(r, 1.5)
	}
}

// EncodeParquetPooled is EncodeParquet into a reused buffer: data is valid
// until release is called, after which the caller must not touch it (call
// release once the bytes are written and checksummed, and only when nothing
// can still read them: not after a failed write, whose transport may).
// Not calling release is fine: the buffer is then garbage. On error
// release is a no-op.
func EncodeParquetPooled(schema *arrow.Schema, batches []arrow.RecordBatch, opts EncodeOptions) (data []byte, release func(), err error) {
	buf := encodeBufs.get()
	// Room for what the last file of this schema took per byte of its
	// batches, and a little more (a quarter at first: about what a
	// compressed file needs). Too little and the buffer doubles, copying
	// the file so far (state of random payload compresses to 0.8 of its
	// bytes: two doublings); too much costs memory that is zeroed and
	// counts as resident.
	raw := batchBytes(batches)
	fp := schema.Fingerprint()
	ratio := encodeRatios.get(fp)
	buf.Grow(int(min(float64(raw)*ratio*1.05+4096, maxCachedBytes)))
	if err := encodeParquet(buf, schema, batches, opts); err != nil {
		encodeBufs.put(buf)
		return nil, func() {}, err
	}
	if raw >= 1<<20 { // a small file's ratio is mostly its footer
		encodeRatios.put(fp, float64(buf.Len())/float64(raw))
	}
	var once sync.Once
	return buf.Bytes(), func() { once.Do(func() { encodeBufs.put(buf) }) }, nil
}

// batchBytes is the size of the batches' buffers (shared buffers counted
// once per batch).
func batchBytes(batches []arrow.RecordBatch) int64 {
	var n int64
	for _, b := range batches {
		if b == nil {
			continue
		}
		for _, col := range b.Columns() {
			n += int64(arrayBytes(col.Data()))
		}
	}
	return n
}

func arrayBytes(d arrow.ArrayData) int {
	n := 0
	for _, b := range d.Buffers() {
		if b != nil {
			n += b.Len()
		}
	}
	for _, c := range d.Children() {
		n += arrayBytes(c)
	}
	return n
}

func encodeParquet(buf *bytes.Buffer, schema *arrow.Schema, batches []arrow.RecordBatch, opts EncodeOptions) error {
	if schema == nil {
		return errors.New("encode parquet: nil schema")
	}
	props, arrProps, err := parquetWriterProps(schema, opts, firstRows(batches))
	if err != nil {
		return err
	}
	w, err := pqarrow.NewFileWriter(schema, buf, props, arrProps)
	if err != nil {
		return fmt.Errorf("encode parquet: %w", err)
	}
	for n, b := range batches {
		if err := checkBatch(schema, b); err != nil {
			w.Close()
			return fmt.Errorf("encode parquet: batch %d: %w", n, err)
		}
		if b.NumRows() == 0 {
			continue
		}
		rec := array.NewRecordBatch(schema, b.Columns(), b.NumRows())
		err := w.WriteBuffered(rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("encode parquet: batch %d: %w", n, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("encode parquet: %w", err)
	}
	return nil
}

func checkBatch(schema *arrow.Schema, b arrow.RecordBatch) error {
	if int(b.NumCols()) != schema.NumFields() {
		return fmt.Errorf("has %d columns, schema has %d", b.NumCols(), schema.NumFields())
	}
	for i, f := range schema.Fields() {
		if !arrow.TypeEqual(f.Type, b.Column(i).DataType()) {
			return fmt.Errorf("column %q has type %s, schema says %s", f.Name, b.Column(i).DataType(), f.Type)
		}
	}
	return nil
}

// openParquet opens a whole file held in memory (state, deltas) for reading
// in batches of at most batchSize rows, aligned to its row groups (see
// rowGroupBatchSize).
func openParquet(data []byte, mem memory.Allocator, batchSize int) (*file.Reader, *pqarrow.FileReader, error) {
	pf, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return nil, nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	return arrowReader(pf, mem, rowGroupBatchSize(pf, batchSize))
}

// rowGroupBatchSize is the batch size that reads pf one row group per batch
// when its row groups are smaller than batchSize but not tiny (state files
// have 16k-row row groups). A batch spanning several row groups grows each
// string column's data buffer once per row group (the Parquet reader
// reserves a row group's bytes at a time), copying what it holds so far; a
// batch within one row group reserves its bytes once.
func rowGroupBatchSize(pf *file.Reader, batchSize int) int {
	largest := int64(0)
	for g := range pf.NumRowGroups() {
		largest = max(largest, pf.MetaData().RowGroup(g).NumRows())
	}
	if largest >= int64(batchSize) || largest < int64(batchSize)/16 {
		return batchSize
	}
	return int(largest)
}

func openParquetAt(src parquet.ReaderAtSeeker, mem memory.Allocator, batchSize int) (*file.Reader, *pqarrow.FileReader, error) {
	pf, err := file.NewParquetReader(src, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return nil, nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	return arrowReader(pf, mem, batchSize)
}

func arrowReader(pf *file.Reader, mem memory.Allocator, batchSize int) (*file.Reader, *pqarrow.FileReader, error) {
	// Not Parallel: the column readers then run on the caller's goroutine,
	// where a panic of the Parquet library on a corrupt file is recovered
	// into an error (see recoverParquet); floe decodes files in parallel
	// instead.
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{Parallel: false, BatchSize: int64(batchSize), PreAllocBinaryData: true}, mem)
	if err != nil {
		pf.Close()
		return nil, nil, fmt.Errorf("parquet: %w", err)
	}
	return pf, fr, nil
}

// readAll drains a record reader over the given row groups (nil = all).
func readAll(fr *pqarrow.FileReader, cols, rowGroups []int, each func(rec arrow.RecordBatch) error) error {
	rr, err := fr.GetRecordReader(context.Background(), cols, rowGroups)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		if err := each(rr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// ReadParquet reads a whole Parquet file (typically one written by
// EncodeParquet) as it is. The caller releases the batches.
func ReadParquet(data []byte, mem memory.Allocator) (_ *arrow.Schema, _ []arrow.RecordBatch, err error) {
	defer recoverParquet(&err)
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	pf, fr, err := openParquet(data, mem, DefaultBatchSize)
	if err != nil {
		return nil, nil, err
	}
	defer pf.Close()
	schema, err := fr.Schema()
	if err != nil {
		return nil, nil, fmt.Errorf("parquet schema: %w", err)
	}
	schema = cleanSchema(schema)
	if pf.NumRowGroups() == 0 {
		return schema, nil, nil
	}
	var out []arrow.RecordBatch
	err = readAll(fr, nil, nil, func(rec arrow.RecordBatch) error {
		out = append(out, array.NewRecordBatch(schema, rec.Columns(), rec.NumRows()))
		return nil
	})
	if err != nil {
		releaseAll(out)
		return nil, nil, fmt.Errorf("read parquet: %w", err)
	}
	return schema, out, nil
}

// ReadParquetFiltered reads the rows whose integer column lies in [lo, hi).
// Row groups whose min/max statistics of column lie outside the range are
// not read at all, so a file sorted by column (state files are sorted by
// key group) costs only the row groups that hold the range.
func ReadParquetFiltered(data []byte, mem memory.Allocator, column string, lo, hi int64) (_ *arrow.Schema, _ []arrow.RecordBatch, err error) {
	defer recoverParquet(&err)
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	pf, fr, err := openParquet(data, mem, DefaultBatchSize)
	if err != nil {
		return nil, nil, err
	}
	defer pf.Close()
	schema, err := fr.Schema()
	if err != nil {
		return nil, nil, fmt.Errorf("parquet schema: %w", err)
	}
	schema = cleanSchema(schema)
	fi := schema.FieldIndices(column)
	if len(fi) != 1 {
		return nil, nil, fmt.Errorf("read parquet: no column %q", column)
	}
	if id := schema.Field(fi[0]).Type.ID(); id != arrow.INT64 && id != arrow.INT32 {
		return nil, nil, fmt.Errorf("read parquet: column %q has type %s, want an integer", column, schema.Field(fi[0]).Type)
	}
	leaf := pf.MetaData().Schema.ColumnIndexByName(column)
	if leaf < 0 {
		return nil, nil, fmt.Errorf("read parquet: no leaf column %q", column)
	}
	var groups []int
	for g := 0; g < pf.NumRowGroups(); g++ {
		keep, err := rowGroupOverlaps(pf.MetaData().RowGroup(g), leaf, lo, hi)
		if err != nil {
			return nil, nil, fmt.Errorf("read parquet: row group %d: %w", g, err)
		}
		if keep {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 || lo >= hi {
		return schema, nil, nil
	}
	var out []arrow.RecordBatch
	err = readAll(fr, nil, groups, func(rec arrow.RecordBatch) error {
		rec = array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
		defer rec.Release()
		f, err := filterRange(rec, fi[0], lo, hi)
		if err != nil {
			return err
		}
		if f.NumRows() == 0 {
			f.Release()
			return nil
		}
		out = append(out, f)
		return nil
	})
	if err != nil {
		releaseAll(out)
		return nil, nil, fmt.Errorf("read parquet: %w", err)
	}
	return schema, out, nil
}

// rowGroupOverlaps reports whether a row group may hold values of leaf column
// in [lo, hi). Without usable statistics it must be read.
func rowGroupOverlaps(rg *metadata.RowGroupMetaData, leaf int, lo, hi int64) (bool, error) {
	cc, err := rg.ColumnChunk(leaf)
	if err != nil {
		return false, err
	}
	if ok, err := cc.StatsSet(); err != nil || !ok {
		return true, nil
	}
	st, err := cc.Statistics()
	if err != nil || st == nil || !st.HasMinMax() {
		return true, nil
	}
	var mn, mx int64
	switch s := st.(type) {
	case *metadata.Int64Statistics:
		mn, mx = s.Min(), s.Max()
	case *metadata.Int32Statistics:
		mn, mx = int64(s.Min()), int64(s.Max())
	default:
		return true, nil
	}
	return mx >= lo && mn < hi, nil
}

func intValue(a arrow.Array, i int) int64 {
	switch a := a.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	}
	return 0
}

// filterRange returns rec's rows whose column col lies in [lo, hi) (nulls
// excluded). rec is not released; the result is a new reference.
func filterRange(rec arrow.RecordBatch, col int, lo, hi int64) (arrow.RecordBatch, error) {
	a := rec.Column(col)
	n := a.Len()
	all := a.NullN() == 0
	for i := 0; i < n && all; i++ {
		v := intValue(a, i)
		all = v >= lo && v < hi
	}
	if all {
		rec.Retain()
		return rec, nil
	}
	mb := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer mb.Release()
	mb.Reserve(n)
	for i := 0; i < n; i++ {
		v := intValue(a, i)
		mb.UnsafeAppend(a.IsValid(i) && v >= lo && v < hi)
	}
	mask := mb.NewArray()
	defer mask.Release()
	return compute.FilterRecordBatch(context.Background(), rec, mask, compute.DefaultFilterOptions())
}

func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}

// decodeParquet reads the declared columns of a Parquet input file, casting
// them to the declared types.
func decodeParquet(fileName string, data []byte, opts DecodeOptions) (*Decoded, error) {
	return collectBatches(func(each func(arrow.RecordBatch) error) (*Decoded, error) {
		return decodeParquetStream(fileName, bytes.NewReader(data), opts, each)
	})
}

// badUTF8Rows calls bad with the row and value of every non-null value of a
// that is not valid UTF-8, in row order. It looks only at string arrays
// (string, large_string, string_view, and dictionaries of those); binary and
// nested columns are not checked.
func badUTF8Rows(a arrow.Array, bad func(j int, v []byte)) {
	switch a := a.(type) {
	case *array.String:
		badUTF8Offsets(a, a.ValueBytes(), a.ValueOffsets(), bad)
	case *array.LargeString:
		badUTF8Offsets(a, a.ValueBytes(), a.ValueOffsets(), bad)
	case *array.StringView:
		for j := 0; j < a.Len(); j++ {
			if v := a.Value(j); a.IsValid(j) && !utf8.ValidString(v) {
				bad(j, []byte(v))
			}
		}
	case *array.Dictionary:
		var badIdx map[int][]byte
		badUTF8Rows(a.Dictionary(), func(k int, v []byte) {
			if badIdx == nil {
				badIdx = map[int][]byte{}
			}
			badIdx[k] = v
		})
		if badIdx == nil {
			return
		}
		for j := 0; j < a.Len(); j++ {
			if a.IsValid(j) {
				if v, ok := badIdx[a.GetValueIndex(j)]; ok {
					bad(j, v)
				}
			}
		}
	}
}

// badUTF8Offsets checks the values of an offset-based string array. The fast
// paths look at all its bytes at once: ASCII is valid however it is cut, and
// otherwise every value is valid UTF-8 exactly when the whole is and no value
// boundary falls inside a rune.
func badUTF8Offsets[O int32 | int64](a arrow.Array, vals []byte, offs []O, bad func(j int, v []byte)) {
	if len(offs) < 2 || isASCII(vals) {
		return
	}
	base := offs[0]
	if utf8.Valid(vals) {
		split := false
		for _, o := range offs[1 : len(offs)-1] {
			if p := o - base; int(p) < len(vals) && !utf8.RuneStart(vals[p]) {
				split = true
				break
			}
		}
		if !split {
			return
		}
	}
	for j := 0; j+1 < len(offs); j++ {
		if v := vals[offs[j]-base : offs[j+1]-base]; !utf8.Valid(v) && a.IsValid(j) {
			bad(j, v)
		}
	}
}

// isASCII reports whether b holds only bytes below 0x80.
func isASCII(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// inferSchema is the file's schema with timestamps as us UTC and
// dictionaries unpacked.
func inferSchema(s *arrow.Schema) *arrow.Schema {
	fs := make([]arrow.Field, s.NumFields())
	for i, f := range s.Fields() {
		switch t := f.Type.(type) {
		case *arrow.TimestampType:
			f.Type = TimestampType
		case *arrow.DictionaryType:
			f.Type = t.ValueType
		}
		fs[i] = f
	}
	md := s.Metadata()
	return arrow.NewSchema(fs, &md)
}

func isInt(id arrow.Type, maxBits int) bool {
	switch id {
	case arrow.INT8, arrow.UINT8:
		return true
	case arrow.INT16, arrow.UINT16:
		return maxBits >= 32 // uint16 needs 17 bits
	case arrow.INT32:
		return maxBits >= 32
	case arrow.UINT32:
		return maxBits >= 64
	case arrow.INT64:
		return maxBits >= 64
	}
	return false
}

// compatible reports whether a Parquet column of Arrow type src can be read
// as declared kind k without loss.
func compatible(src arrow.DataType, k kind) bool {
	if d, ok := src.(*arrow.DictionaryType); ok {
		src = d.ValueType
	}
	id := src.ID()
	switch k {
	case kString:
		return id == arrow.STRING || id == arrow.LARGE_STRING || id == arrow.STRING_VIEW
	case kInt64:
		return isInt(id, 64)
	case kInt32:
		return isInt(id, 32)
	case kFloat64:
		return id == arrow.FLOAT32 || id == arrow.FLOAT64 || isInt(id, 32)
	case kBool:
		return id == arrow.BOOL
	case kTimestamp:
		return id == arrow.TIMESTAMP
	default: // epoch numbers
		return id == arrow.TIMESTAMP || id == arrow.INT64 || id == arrow.INT32
	}
}

// convertColumn casts a to the declared kind's type. It returns a new
// reference.
func convertColumn(a arrow.Array, k kind, to arrow.DataType) (arrow.Array, error) {
	ctx := context.Background()
	if d, ok := a.(*array.Dictionary); ok {
		plain, err := compute.CastArray(ctx, d, compute.SafeCastOptions(d.Dictionary().DataType()))
		if err != nil {
			return nil, fmt.Errorf("unpack dictionary: %w", err)
		}
		defer plain.Release()
		a = plain
	}
	if k.isTimestamp() {
		var unit arrow.TimeUnit
		switch t := a.DataType().(type) {
		case *arrow.TimestampType:
			unit = t.Unit
		default: // integers: epoch numbers in the declared unit
			unit = map[kind]arrow.TimeUnit{kTimestampS: arrow.Second, kTimestampMS: arrow.Millisecond, kTimestampUS: arrow.Microsecond}[k]
			if a.DataType().ID() == arrow.INT32 {
				wide, err := compute.CastArray(ctx, a, compute.SafeCastOptions(arrow.PrimitiveTypes.Int64))
				if err != nil {
					return nil, err
				}
				defer wide.Release()
				a = wide
			}
		}
		// Relabel as timestamp[unit, UTC], sharing buffers, then rescale.
		d := a.Data()
		relData := array.NewData(&arrow.TimestampType{Unit: unit, TimeZone: "UTC"}, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
		rel := array.MakeFromData(relData)
		relData.Release()
		if unit == arrow.Microsecond {
			return rel, nil
		}
		defer rel.Release()
		opts := compute.SafeCastOptions(TimestampType)
		opts.AllowTimeTruncate = true
		return compute.CastArray(ctx, rel, opts)
	}
	if arrow.TypeEqual(a.DataType(), to) {
		a.Retain()
		return a, nil
	}
	return compute.CastArray(ctx, a, compute.SafeCastOptions(to))
}

// appendLeaves appends the leaf column indices under f.
func appendLeaves(dst []int, f *pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(dst, f.ColIndex)
	}
	for i := range f.Children {
		dst = appendLeaves(dst, &f.Children[i])
	}
	return dst
}

// fieldIDKey is the field metadata pqarrow adds to every column it reads.
const fieldIDKey = "PARQUET:field_id"

// cleanSchema drops the "PARQUET:field_id": "-1" metadata pqarrow adds to
// fields without a field id, so a schema read back equals the one written.
func cleanSchema(s *arrow.Schema) *arrow.Schema {
	fs := make([]arrow.Field, s.NumFields())
	for i, f := range s.Fields() {
		if j := f.Metadata.FindKey(fieldIDKey); j >= 0 && f.Metadata.Values()[j] == "-1" {
			var keys, vals []string
			for k := range f.Metadata.Keys() {
				if k != j {
					keys = append(keys, f.Metadata.Keys()[k])
					vals = append(vals, f.Metadata.Values()[k])
				}
			}
			f.Metadata = arrow.Metadata{}
			if len(keys) > 0 {
				f.Metadata = arrow.NewMetadata(keys, vals)
			}
		}
		fs[i] = f
	}
	md := s.Metadata()
	return arrow.NewSchema(fs, &md)
}

// ParquetSchema returns the schema Decode infers for a Parquet file (the
// file's own, timestamps as microseconds UTC) by reading only its footer.
func ParquetSchema(fileName string, data []byte) (_ *arrow.Schema, err error) {
	defer recoverParquet(&err)
	pf, fr, err := openParquet(data, memory.DefaultAllocator, DefaultBatchSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileName, err)
	}
	defer pf.Close()
	fileSchema, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("%s: parquet schema: %w", fileName, err)
	}
	return inferSchema(cleanSchema(fileSchema)), nil
}

// recoverParquet turns a panic of the Parquet library on a corrupt file
// into an error: floe must never crash on bad input.
func recoverParquet(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("corrupt Parquet data (the decoder failed: %v)", r)
	}
}
