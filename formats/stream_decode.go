package formats

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
)

// StreamChunkBytes is how much JSON-lines text DecodeStream decodes per
// goroutine before handing the batches over.
const StreamChunkBytes = 8 << 20

// DecodeStream decodes one input file like Decode, but hands each batch to
// each as soon as it is decoded, in file order, instead of collecting them,
// so that the decoded form of a large file never is in memory at once:
// JSON lines StreamChunkBytes per goroutine at a time (Parallelism
// goroutines), CSV and Parquet BatchSize rows at a time (Parquet row group
// by row group). The rows and rejects are those Decode returns, in the same
// order; batch boundaries may differ. each owns the batch it is handed.
//
// It returns the number of rows handed over and the rejects (Batches is
// empty). An error returned by each stops decoding and is returned as it
// is. Any other error is a whole-file problem, as with Decode; unlike
// Decode's it may come after batches were handed over (a corrupt Parquet
// page, a CSV read error), which the caller sees from its own count.
func DecodeStream(format string, file string, data []byte, opts DecodeOptions, each func(arrow.RecordBatch) error) (*Decoded, error) {
	opts = withDecodeDefaults(opts)
	emit, cbErr := guardEach(each)
	var d *Decoded
	var err error
	switch strings.ToLower(format) {
	case "jsonl", "json", "ndjson", "avro": // avro: a kafka source renders its Avro values as JSON lines
		if data, err = decompress(file, data); err == nil {
			d, err = decodeJSONLStream(file, data, opts, StreamChunkBytes, emit)
		}
	case "csv":
		if data, err = decompress(file, data); err == nil {
			d, err = decodeCSVStream(file, data, opts, emit)
		}
	case "parquet":
		d, err = decodeParquetStream(file, bytes.NewReader(data), opts, emit)
	default:
		return nil, fmt.Errorf("%s: unknown format %q (want jsonl, csv or parquet)", file, format)
	}
	if *cbErr != nil {
		return nil, *cbErr
	}
	return d, err
}

// decodeJSONLStream decodes rounds of up to Parallelism chunks of about
// chunk bytes each, cut at line ends, and hands over each round's
// batches in order.
func decodeJSONLStream(file string, data []byte, opts DecodeOptions, chunk int, each func(arrow.RecordBatch) error) (*Decoded, error) {
	p, err := newPlan(file, opts)
	if err != nil {
		return nil, err
	}
	data = stripBOM(data)
	par := parallelism(opts)
	res := &Decoded{Schema: p.schema}
	line := int64(1)
	for len(data) > 0 {
		var chunks [][]byte
		var first []int64
		for k := 0; k < par && len(data) > 0; k++ {
			end := len(data)
			if chunk < end {
				if j := bytes.IndexByte(data[chunk:], '\n'); j >= 0 {
					end = chunk + j + 1
				}
			}
			c := data[:end]
			data = data[end:]
			chunks, first = append(chunks, c), append(first, line)
			line += int64(bytes.Count(c, []byte{'\n'}))
		}
		var d *Decoded
		if len(chunks) == 1 {
			rb := newRowBuilder(p)
			jsonChunk(rb, chunks[0], first[0])
			d = rb.result()
		} else {
			d = runChunks(p, chunks, first, jsonChunk)
		}
		res.Rows += d.Rows
		res.Rejects = append(res.Rejects, d.Rejects...)
		for i, b := range d.Batches {
			if err := each(b); err != nil {
				releaseAll(d.Batches[i+1:])
				return nil, err
			}
		}
	}
	return res, nil
}

// decodeCSVStream is decodeCSV (csv.go) handing over each batch as the row
// builder completes it.
func decodeCSVStream(file string, data []byte, opts DecodeOptions, each func(arrow.RecordBatch) error) (*Decoded, error) {
	p, err := newPlan(file, opts)
	if err != nil {
		return nil, err
	}
	data = stripBOM(data)
	r := csv.NewReader(bytes.NewReader(data))
	r.ReuseRecord = true
	r.FieldsPerRecord = -1
	if opts.CSV.Delimiter != 0 {
		r.Comma = opts.CSV.Delimiter
	}
	index := make([]int, len(p.names))
	for i := range index {
		index[i] = i
	}
	width := len(p.names)
	if !opts.CSV.NoHeader {
		hdr, err := r.Read()
		if errors.Is(err, io.EOF) {
			return &Decoded{Schema: p.schema}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: CSV header: %w", file, err)
		}
		pos := make(map[string]int, len(hdr))
		for j, h := range hdr {
			h = strings.TrimSpace(h)
			if _, dup := pos[h]; !dup {
				pos[h] = j
			}
		}
		for i, n := range p.names {
			j, ok := pos[n]
			if !ok {
				return nil, fmt.Errorf("%s: CSV header has no column %q", file, n)
			}
			index[i] = j
		}
		width = len(hdr)
	}
	checkUTF8 := !utf8.Valid(data)
	rb := newRowBuilder(p)
	defer rb.release()
	rb.reserve(bytes.Count(data, []byte{'\n'}) + 1)
	res := &Decoded{Schema: p.schema}
	handOver := func() error {
		for i, b := range rb.out {
			if err := each(b); err != nil {
				releaseAll(rb.out[i+1:])
				rb.out = nil
				return err
			}
		}
		rb.out = rb.out[:0]
		return nil
	}
	for {
		start := r.InputOffset()
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		end := r.InputOffset()
		raw := bytes.TrimRight(data[start:end], "\r\n")
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				rb.reject(int64(pe.StartLine), "invalid CSV: "+pe.Err.Error(), raw)
				continue
			}
			return nil, fmt.Errorf("%s: CSV: %w", file, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) != width {
			rb.reject(int64(line), fmt.Sprintf("CSV record has %d fields, want %d", len(rec), width), raw)
			continue
		}
		rb.resetCells()
		reason := ""
		for i, j := range index {
			f := rec[j]
			if p.kinds[i] == kString {
				if checkUTF8 && !utf8.ValidString(f) {
					reason = rb.badUTF8(i, []byte(f))
					break
				}
			} else if f == "" {
				continue // null
			}
			if reason = rb.setText(i, unsafe.Slice(unsafe.StringData(f), len(f))); reason != "" {
				break
			}
		}
		if reason == "" {
			reason = rb.checkEventTime(true)
		}
		if reason != "" {
			rb.reject(int64(line), reason, raw)
			continue
		}
		rb.commit()
		if len(rb.out) > 0 {
			if err := handOver(); err != nil {
				return nil, err
			}
		}
	}
	rb.flush()
	if err := handOver(); err != nil {
		return nil, err
	}
	res.Rows, res.Rejects = rb.total, rb.rejects
	return res, nil
}
