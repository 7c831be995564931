package formats

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// PartEncoder encodes batches into one output file as they come, so that a
// writer can bound the memory of an output by rolling to a new file when
// Size reaches a limit. Fed the same batches, it produces the same bytes as
// EncodeParquet (or EncodeJSONL) with the same options. Not safe for
// concurrent use.
type PartEncoder struct {
	schema *arrow.Schema
	rows   int64
	buf    chunkBuffer
	pq     *pqarrow.FileWriter // Parquet: created by the first batch with rows (or Finish)
	opts   *EncodeOptions      // Parquet's options; nil for JSON lines
	keys   [][]byte            // JSON lines: `"name":` per column
	batch  int                 // batches written, for error messages
	done   bool
	// scratch is the JSON-lines encoding buffer, reused across batches.
	scratch []byte
}

// NewPartEncoder returns an encoder of one file in format "parquet" or
// "jsonl". opts apply to Parquet only.
func NewPartEncoder(format string, schema *arrow.Schema, opts EncodeOptions) (*PartEncoder, error) {
	if schema == nil {
		return nil, fmt.Errorf("encode %s: nil schema", format)
	}
	e := &PartEncoder{schema: schema}
	switch strings.ToLower(format) {
	case "jsonl", "json", "ndjson":
		e.keys = make([][]byte, schema.NumFields())
		for i, f := range schema.Fields() {
			e.keys[i] = append(appendJSONString(nil, f.Name), ':')
		}
		return e, nil
	case "parquet":
		if _, _, err := parquetWriterProps(schema, opts, nil); err != nil {
			return nil, err // a bad option fails now, not at the first batch
		}
		e.opts = &opts
		return e, nil
	}
	return nil, fmt.Errorf("encode: unknown format %q (want parquet or jsonl)", format)
}

// parquetWriterProps are EncodeParquet's writer properties; first (the
// first batch with rows, nil if none) decides which string columns are
// dictionary-encoded (repeats).
func parquetWriterProps(schema *arrow.Schema, opts EncodeOptions, first arrow.RecordBatch) (*parquet.WriterProperties, pqarrow.ArrowWriterProperties, error) {
	mem := opts.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	var codec compress.Compression
	switch strings.ToLower(opts.Compression) {
	case "", "zstd":
		codec = compress.Codecs.Zstd
	case "snappy":
		codec = compress.Codecs.Snappy
	case "none", "uncompressed":
		codec = compress.Codecs.Uncompressed
	default:
		return nil, pqarrow.ArrowWriterProperties{}, fmt.Errorf("encode parquet: unknown compression %q (want zstd, snappy or none)", opts.Compression)
	}
	rg := opts.RowGroupRows
	if rg <= 0 {
		rg = DefaultRowGroupRows
	}
	wopts := []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}
	if !opts.NoDictionary {
		for i, f := range schema.Fields() {
			switch f.Type.ID() {
			case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
				if repeats(first, i) {
					wopts = append(wopts, parquet.WithDictionaryFor(f.Name, true))
				}
			}
		}
	}
	wopts = append(wopts, parquet.WithStats(!opts.IntStatsOnly))
	if opts.IntStatsOnly {
		for _, f := range schema.Fields() {
			switch f.Type.ID() {
			case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
				arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP:
				wopts = append(wopts, parquet.WithStatsPath(parquet.ColumnPath{f.Name}, true))
			}
		}
	}
	props := parquet.NewWriterProperties(append(wopts,
		parquet.WithCompression(codec),
		parquet.WithMaxRowGroupLength(rg),
		parquet.WithAllocator(mem),
	)...)
	return props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem)), nil
}

// Write encodes one batch, which must have the schema's column types. It
// does not keep b.
func (e *PartEncoder) Write(b arrow.RecordBatch) (err error) {
	if e.done {
		return errors.New("encode: write after Finish")
	}
	n := e.batch
	e.batch++
	if err := checkBatch(e.schema, b); err != nil {
		return fmt.Errorf("encode: batch %d: %w", n, err)
	}
	if b.NumRows() == 0 {
		return nil
	}
	e.rows += b.NumRows()
	if e.opts == nil {
		buf := e.scratch[:0]
		cols := b.Columns()
		for r := 0; r < int(b.NumRows()); r++ {
			buf = append(buf, '{')
			for c, a := range cols {
				if c > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, e.keys[c]...)
				if buf, err = appendJSONValue(buf, a, r); err != nil {
					return fmt.Errorf("encode jsonl: column %q: %w", e.schema.Field(c).Name, err)
				}
			}
			buf = append(buf, '}', '\n')
			if len(buf) >= chunkSize/2 {
				e.buf.Write(buf)
				buf = buf[:0]
			}
		}
		e.buf.Write(buf)
		e.scratch = buf[:0]
		return nil
	}
	if err := e.open(b); err != nil {
		e.done = true
		return err
	}
	rec := array.NewRecordBatch(e.schema, b.Columns(), b.NumRows())
	defer rec.Release()
	if err := e.pq.WriteBuffered(rec); err != nil {
		e.done = true
		return fmt.Errorf("encode parquet: batch %d: %w", n, err)
	}
	return nil
}

// open creates the Parquet writer, its dictionary columns decided by first
// (EncodeParquet's rule), unless it exists.
func (e *PartEncoder) open(first arrow.RecordBatch) error {
	if e.pq != nil {
		return nil
	}
	props, arrProps, err := parquetWriterProps(e.schema, *e.opts, first)
	if err != nil {
		return err
	}
	if e.pq, err = pqarrow.NewFileWriter(e.schema, &e.buf, props, arrProps); err != nil {
		return fmt.Errorf("encode parquet: %w", err)
	}
	return nil
}

// Rows is the number of rows written.
func (e *PartEncoder) Rows() int64 { return e.rows }

// Size estimates the encoded size so far: the bytes of finished row groups
// and the compressed pages of the buffered one (Parquet), or the bytes
// written (JSON lines).
func (e *PartEncoder) Size() int64 {
	n := e.buf.n
	if e.pq != nil {
		n += e.pq.RowGroupTotalCompressedBytes()
	}
	return n
}

// Finish completes the file and returns its bytes. The encoder cannot be
// used afterwards.
func (e *PartEncoder) Finish() ([]byte, error) {
	if e.done {
		return nil, errors.New("encode: Finish called twice or after a failed write")
	}
	e.done = true
	if e.opts != nil {
		if err := e.open(nil); err != nil {
			return nil, err
		}
		if err := e.pq.Close(); err != nil {
			return nil, fmt.Errorf("encode parquet: %w", err)
		}
	}
	return e.buf.bytes(), nil
}

// Abort releases an unfinished encoder's buffers.
func (e *PartEncoder) Abort() {
	if !e.done && e.pq != nil {
		e.pq.Close()
	}
	e.done = true
	e.buf = chunkBuffer{}
}

// chunkSize is the size of one chunkBuffer chunk.
const chunkSize = 1 << 20

// chunkBuffer collects written bytes in chunks of chunkSize, so that a
// growing part never copies itself into a buffer twice its size (as a
// bytes.Buffer does when it grows); bytes makes the one contiguous copy.
type chunkBuffer struct {
	chunks [][]byte
	n      int64
}

func (c *chunkBuffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(c.chunks) == 0 || len(c.chunks[len(c.chunks)-1]) == chunkSize {
			c.chunks = append(c.chunks, make([]byte, 0, chunkSize))
		}
		last := &c.chunks[len(c.chunks)-1]
		k := min(len(p), chunkSize-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
	c.n += int64(n)
	return n, nil
}

// bytes returns the written bytes in one slice and drops the chunks.
func (c *chunkBuffer) bytes() []byte {
	out := make([]byte, 0, c.n)
	for i, ch := range c.chunks {
		out = append(out, ch...)
		c.chunks[i] = nil
	}
	c.chunks = nil
	return out
}
