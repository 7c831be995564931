package formats

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultBatchSize is the number of rows per output batch when
// DecodeOptions.BatchSize is zero.
const DefaultBatchSize = 64 * 1024

// maxRawLen bounds Reject.Raw.
const maxRawLen = 1024

// CSVOptions configure the CSV decoder.
type CSVOptions struct {
	// NoHeader says the file has no header line; its fields are the declared
	// columns in schema order. By default the first line is a header and
	// columns are matched by name (extra file columns are ignored).
	NoHeader bool
	// Delimiter separates fields; 0 means ','.
	Delimiter rune
}

// DecodeOptions configure Decode.
type DecodeOptions struct {
	// Schema is the declared schema. It may be nil for Parquet only, where the
	// file's own schema is used (timestamps converted to us, UTC).
	Schema *arrow.Schema
	// EventTime names a timestamp column that must be present and non-null;
	// rows without a parsable value are rejected. Empty means none.
	EventTime string
	// BatchSize is the maximum number of rows per output batch (default 64k).
	BatchSize int
	// Mem allocates the output buffers (default memory.DefaultAllocator).
	Mem memory.Allocator
	// CSV configures the CSV decoder.
	CSV CSVOptions
	// Parallelism bounds the goroutines that decode one large JSON-lines file
	// (default GOMAXPROCS; 1 decodes serially). Output order never depends on it.
	Parallelism int

	// generalParquet makes the Parquet decoder use pqarrow's record reader
	// for every file (tests compare it with the flat reader).
	generalParquet bool
	// recordDictParquet makes the flat Parquet reader read every
	// DictStringType column with pqarrow's dictionary record reader, never
	// straight from the pages (tests compare the two).
	recordDictParquet bool
}

// Decoded is the result of Decode. The caller owns Batches and must Release
// them.
type Decoded struct {
	Batches []arrow.RecordBatch
	Schema  *arrow.Schema
	Rows    int64 // rows in Batches
	Rejects []Reject
}

// Release releases all batches.
func (d *Decoded) Release() {
	for _, b := range d.Batches {
		b.Release()
	}
	d.Batches = nil
}

// Reject is one input row that could not be decoded.
type Reject struct {
	File string `json:"file"`
	// Line is the 1-based line number (JSON lines, CSV) or row number (Parquet).
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
	// Raw is the raw line, truncated to 1 KiB (empty for Parquet).
	Raw string `json:"raw"`
}

// Decode decodes one whole input file in format "jsonl" (or "json"), "csv" or
// "parquet". file names the input in rejects and errors. A returned error is
// a whole-file (or configuration) problem; per-row problems are in Rejects.
// JSON-lines and CSV files compressed with gzip or zstd are decompressed
// first, recognised by their magic bytes whatever their name (see
// DetectCompression); line numbers in rejects count decompressed lines.
func Decode(format string, file string, data []byte, opts DecodeOptions) (*Decoded, error) {
	opts = withDecodeDefaults(opts)
	switch strings.ToLower(format) {
	case "jsonl", "json", "ndjson", "avro": // avro: a kafka source renders its Avro values as JSON lines
		data, err := decompress(file, data)
		if err != nil {
			return nil, err
		}
		return decodeJSONL(file, data, opts)
	case "csv":
		data, err := decompress(file, data)
		if err != nil {
			return nil, err
		}
		return decodeCSV(file, data, opts)
	case "parquet":
		return decodeParquet(file, data, opts)
	}
	return nil, fmt.Errorf("%s: unknown format %q (want jsonl, csv or parquet)", file, format)
}

// column is one declared output column and its buffers.
type column struct {
	name  string
	kind  kind
	buf   colBuf
	quote string // strconv.Quote(name), precomputed for reasons
	ts    tsCache
}

// cell is the parsed value of one column in the current row.
type cell struct {
	set bool // value present and non-null
	i   int64
	f   float64
	b   bool
	s   []byte
}

// plan is the validated decoding plan shared by the row decoders of a file.
type plan struct {
	file      string
	schema    *arrow.Schema // output schema
	kinds     []kind
	names     []string
	eventTime int // -1 when none
	opts      DecodeOptions
}

func newPlan(file string, opts DecodeOptions) (*plan, error) {
	if opts.Schema == nil {
		return nil, fmt.Errorf("%s: a declared schema is required", file)
	}
	p := &plan{file: file, opts: opts, eventTime: -1}
	fields := make([]arrow.Field, opts.Schema.NumFields())
	for i, f := range opts.Schema.Fields() {
		k, err := fieldKind(f)
		if err != nil {
			return nil, fmt.Errorf("%s: schema: %w", file, err)
		}
		if f.Type.ID() == arrow.DICTIONARY {
			return nil, fmt.Errorf("%s: schema: field %q has type %s: dictionary-encoded strings are decoded from Parquet only (declare it as string)", file, f.Name, f.Type)
		}
		p.kinds = append(p.kinds, k)
		p.names = append(p.names, f.Name)
		f.Type = k.arrowType()
		f.Nullable = true
		fields[i] = f
		if f.Name == opts.EventTime {
			if !k.isTimestamp() {
				return nil, fmt.Errorf("%s: event time column %q has type %s, not a timestamp", file, f.Name, k)
			}
			p.eventTime = i
		}
	}
	if opts.EventTime != "" && p.eventTime < 0 {
		return nil, fmt.Errorf("%s: event time column %q is not in the schema", file, opts.EventTime)
	}
	md := opts.Schema.Metadata()
	p.schema = arrow.NewSchema(fields, &md)
	return p, nil
}

// maxBatchData bounds the string bytes of one column in a batch: a batch
// is cut early before its 32-bit string offsets could overflow.
const maxBatchData = 1 << 30

// rowBuilder accumulates accepted rows into batches.
type rowBuilder struct {
	p       *plan
	cols    []column
	cells   []cell
	rows    int // rows in the current batch
	capRows int // rows the columns' buffers hold
	out     []arrow.RecordBatch
	total   int64
	rejects []Reject
}

func newRowBuilder(p *plan) *rowBuilder {
	rb := &rowBuilder{p: p, cols: make([]column, len(p.kinds)), cells: make([]cell, len(p.kinds))}
	for i, k := range p.kinds {
		c := &rb.cols[i]
		c.name, c.kind, c.quote = p.names[i], k, strconv.Quote(p.names[i])
		c.buf = newColBuf(p.opts.Mem, k)
	}
	return rb
}

// reserve makes room for n more rows (at most a batch).
func (rb *rowBuilder) reserve(n int) {
	n = min(rb.rows+n, rb.p.opts.BatchSize)
	if n <= rb.capRows {
		return
	}
	for i := range rb.cols {
		rb.cols[i].buf.ensure(n)
	}
	rb.capRows = n
}

// resetCells marks every cell unset (values are read only when set).
func (rb *rowBuilder) resetCells() {
	for i := range rb.cells {
		rb.cells[i].set = false
	}
}

// commit appends the current cells as one row. It cannot fail.
func (rb *rowBuilder) commit() {
	if rb.rows >= rb.capRows {
		rb.reserve(max(rb.capRows, 1024))
	}
	full := false
	for i := range rb.cols {
		c, v := &rb.cols[i].buf, &rb.cells[i]
		if !v.set {
			c.appendNull()
			continue
		}
		switch c.kind {
		case kString:
			c.appendBytes(v.s)
			full = full || c.dataBytes() > maxBatchData
		case kInt32:
			c.appendInt32(int32(v.i))
		case kFloat64:
			c.appendFloat64(v.f)
		case kBool:
			c.appendBool(v.b)
		default: // int64, timestamps
			c.appendInt64(v.i)
		}
	}
	rb.rows++
	if rb.rows >= rb.p.opts.BatchSize || full {
		rb.flush()
	}
}

func (rb *rowBuilder) flush() {
	if rb.rows == 0 {
		return
	}
	arrs := make([]arrow.Array, len(rb.cols))
	for i := range rb.cols {
		arrs[i] = rb.cols[i].buf.finish()
	}
	rec := array.NewRecordBatch(rb.p.schema, arrs, int64(rb.rows))
	for _, a := range arrs {
		a.Release()
	}
	rb.out = append(rb.out, rec)
	rb.total += int64(rb.rows)
	rb.rows, rb.capRows = 0, 0
}

func (rb *rowBuilder) release() {
	for i := range rb.cols {
		rb.cols[i].buf.release()
	}
	rb.capRows = 0
}

func (rb *rowBuilder) reject(line int64, reason string, raw []byte) {
	rb.rejects = append(rb.rejects, Reject{File: rb.p.file, Line: line, Reason: reason, Raw: truncRaw(raw)})
}

// truncRaw copies raw, cut to at most maxRawLen bytes on a rune boundary.
func truncRaw(raw []byte) string {
	if len(raw) <= maxRawLen {
		return string(raw)
	}
	n := maxRawLen
	for n > maxRawLen-utf8.UTFMax && n > 0 && !utf8.RuneStart(raw[n]) {
		n--
	}
	return string(raw[:n])
}

// checkEventTime returns the reject reason for a row whose event time is
// missing or null, or "".
func (rb *rowBuilder) checkEventTime(present bool) string {
	et := rb.p.eventTime
	if et < 0 || rb.cells[et].set {
		return ""
	}
	if present {
		return fmt.Sprintf("event time column %s is null", rb.cols[et].quote)
	}
	return fmt.Sprintf("event time column %s is missing", rb.cols[et].quote)
}

// setText parses the text form of a value (a JSON string or a CSV field)
// into cell i. It returns a reject reason or "".
func (rb *rowBuilder) setText(i int, s []byte) string {
	c, v := &rb.cols[i], &rb.cells[i]
	switch c.kind {
	case kString:
		v.s = s
	case kInt64, kInt32:
		n, e := parseInt(s)
		if e != intOK {
			return rb.intReason(i, s, e)
		}
		if c.kind == kInt32 && int64(int32(n)) != n {
			return rb.intReason(i, s, intRange)
		}
		v.i = n
	case kFloat64:
		f, err := strconv.ParseFloat(bstr(s), 64)
		if err != nil {
			return rb.cannotParse(i, s)
		}
		v.f = f
	case kBool:
		b, err := strconv.ParseBool(bstr(s))
		if err != nil {
			return rb.cannotParse(i, s)
		}
		v.b = b
	case kTimestamp:
		t, ok := c.ts.parse(s)
		if !ok {
			return rb.cannotParse(i, s)
		}
		v.i = t
	case kTimestampS, kTimestampMS, kTimestampUS:
		t, ok := parseEpoch(s, unitMicros(c.kind))
		if !ok {
			return rb.cannotParse(i, s)
		}
		v.i = t
	}
	v.set = true
	return ""
}

func unitMicros(k kind) int64 {
	switch k {
	case kTimestampS:
		return 1_000_000
	case kTimestampMS:
		return 1000
	}
	return 1
}

func (rb *rowBuilder) cannotParse(i int, s []byte) string {
	if len(s) > 64 {
		s = append(s[:61:61], "..."...)
	}
	return fmt.Sprintf("column %s: cannot parse %q as %s", rb.cols[i].quote, s, rb.cols[i].kind)
}

// badUTF8 is the reject reason for a value of column i that is not valid
// UTF-8. s is the value as the file spells it (quoted with escapes, cut).
func (rb *rowBuilder) badUTF8(i int, s []byte) string {
	return badUTF8Reason(rb.cols[i].quote, s)
}

func badUTF8Reason(quotedCol string, s []byte) string {
	if len(s) > 64 {
		s = append(s[:61:61], "..."...)
	}
	return fmt.Sprintf("column %s: value is not valid UTF-8: %q", quotedCol, s)
}

func (rb *rowBuilder) intReason(i int, s []byte, e intErr) string {
	switch e {
	case intFraction:
		return fmt.Sprintf("column %s: %s is not an integer", rb.cols[i].quote, clip(s))
	case intRange:
		return fmt.Sprintf("column %s: %s is out of range for %s", rb.cols[i].quote, clip(s), rb.cols[i].kind)
	}
	return rb.cannotParse(i, s)
}

func clip(s []byte) string {
	if len(s) > 64 {
		return string(s[:61]) + "..."
	}
	return string(s)
}

func (rb *rowBuilder) result() *Decoded {
	rb.flush()
	rb.release()
	return &Decoded{Batches: rb.out, Schema: rb.p.schema, Rows: rb.total, Rejects: rb.rejects}
}

// stripBOM removes a UTF-8 byte order mark.
func stripBOM(b []byte) []byte {
	return bytes.TrimPrefix(b, []byte("\xEF\xBB\xBF"))
}

// parallelChunks splits data into at most n chunks that end at '\n', each at
// least minChunk bytes, and returns each chunk's 1-based first line number.
func parallelChunks(data []byte, n, minChunk int) (chunks [][]byte, firstLine []int64) {
	if n > len(data)/minChunk {
		n = len(data) / minChunk
	}
	if n <= 1 {
		return [][]byte{data}, []int64{1}
	}
	line := int64(1)
	start := 0
	for k := 1; k <= n && start < len(data); k++ {
		end := len(data)
		if k < n {
			target := len(data) * k / n
			if target < start {
				target = start
			}
			j := bytes.IndexByte(data[target:], '\n')
			if j >= 0 {
				end = target + j + 1
			}
		}
		chunks = append(chunks, data[start:end])
		firstLine = append(firstLine, line)
		if end < len(data) {
			line += int64(bytes.Count(data[start:end], []byte{'\n'}))
		}
		start = end
	}
	return chunks, firstLine
}

// runChunks decodes chunks concurrently with fn and concatenates the results
// in chunk order.
func runChunks(p *plan, chunks [][]byte, firstLine []int64, fn func(rb *rowBuilder, chunk []byte, line int64)) *Decoded {
	rbs := make([]*rowBuilder, len(chunks))
	var wg sync.WaitGroup
	for k := range chunks {
		rbs[k] = newRowBuilder(p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(rbs[k], chunks[k], firstLine[k])
		}()
	}
	wg.Wait()
	out := &Decoded{Schema: p.schema}
	for _, rb := range rbs {
		d := rb.result()
		out.Batches = append(out.Batches, d.Batches...)
		out.Rows += d.Rows
		out.Rejects = append(out.Rejects, d.Rejects...)
	}
	return out
}

func parallelism(opts DecodeOptions) int {
	if opts.Parallelism > 0 {
		return opts.Parallelism
	}
	return runtime.GOMAXPROCS(0)
}
