package kafka

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/formats"
)

// Columns names the record metadata columns a decode appends after the
// value's columns; an empty name leaves that column out.
type Columns struct {
	Topic     string // string
	Partition string // int32
	Offset    string // int64
	Timestamp string // timestamp (the record's timestamp, microseconds, UTC)
	Key       string // string (the record key's bytes; null for a null key)
}

func (c Columns) names() []string {
	return []string{c.Topic, c.Partition, c.Offset, c.Timestamp, c.Key}
}

// Fields returns the metadata columns as Arrow fields, in the order they
// are appended (topic, partition, offset, timestamp, key).
func (c Columns) Fields() []arrow.Field {
	var out []arrow.Field
	add := func(name, typ string, dt arrow.DataType) {
		if name != "" {
			out = append(out, arrow.Field{Name: name, Type: dt, Nullable: true,
				Metadata: arrow.NewMetadata([]string{formats.TypeMetadataKey}, []string{typ})})
		}
	}
	add(c.Topic, "string", arrow.BinaryTypes.String)
	add(c.Partition, "int32", arrow.PrimitiveTypes.Int32)
	add(c.Offset, "int64", arrow.PrimitiveTypes.Int64)
	add(c.Timestamp, "timestamp", formats.TimestampType)
	add(c.Key, "string", arrow.BinaryTypes.String)
	return out
}

// DecodeOptions configure Decode.
type DecodeOptions struct {
	// Format of the record values: "jsonl" (one JSON object per record)
	// or "csv" (one CSV row per record, fields in schema order, no header).
	Format string
	// Schema is the declared schema of the value's fields.
	Schema *arrow.Schema
	// EventTime names a value field that must hold a timestamp (records
	// without one are rejected); empty for none, or when the event time is
	// the record timestamp (Columns.Timestamp).
	EventTime string
	// Columns are the metadata columns to append.
	Columns Columns
	// CSV configures the CSV decoder (NoHeader is always set).
	CSV formats.CSVOptions
	// BatchSize and Mem are passed to the value decoder.
	BatchSize int
	Mem       memory.Allocator
}

// Reject is a record that could not be decoded.
type Reject struct {
	Partition
	Offset int64
	Reason string
	// Raw is the record value, truncated to 1 KiB.
	Raw string
}

// Decoded is the result of Decode; the caller releases Batches.
type Decoded struct {
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch
	Rows    int64
	Rejects []Reject
}

// Release releases the batches.
func (d *Decoded) Release() {
	for _, b := range d.Batches {
		b.Release()
	}
	d.Batches = nil
}

// OutputSchema returns the output schema of a decode with opts: the value's
// fields, then the metadata columns. A metadata column named like a value
// field is an error.
func (o DecodeOptions) OutputSchema() (*arrow.Schema, error) {
	if o.Schema == nil {
		return nil, fmt.Errorf("kafka decode: no schema")
	}
	fields := append([]arrow.Field(nil), o.Schema.Fields()...)
	seen := map[string]bool{}
	for _, f := range fields {
		seen[f.Name] = true
	}
	for _, f := range o.Columns.Fields() {
		if seen[f.Name] {
			return nil, fmt.Errorf("kafka decode: metadata column %q is also a field of the value schema", f.Name)
		}
		seen[f.Name] = true
		fields = append(fields, f)
	}
	return arrow.NewSchema(fields, nil), nil
}

const maxRaw = 1024

// Decode decodes the values of recs (all of them, in order) into batches
// of OutputSchema. A record whose value does not decode is a Reject naming
// its topic, partition and offset; an error is a configuration problem.
func Decode(recs []Record, o DecodeOptions) (*Decoded, error) {
	schema, err := o.OutputSchema()
	if err != nil {
		return nil, err
	}
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
	format := strings.ToLower(o.Format)
	switch format {
	case "jsonl", "json", "ndjson":
		format = "jsonl"
	case "csv":
		o.CSV.NoHeader = true
	default:
		return nil, fmt.Errorf("kafka decode: unknown format %q (want jsonl or csv)", o.Format)
	}
	out := &Decoded{Schema: schema}
	reject := func(r *Record, reason string) {
		raw := r.Value
		if len(raw) > maxRaw {
			raw = raw[:maxRaw]
		}
		out.Rejects = append(out.Rejects, Reject{Partition: r.Partition, Offset: r.Offset, Reason: reason, Raw: strings.ToValidUTF8(string(raw), "\ufffd")})
	}
	// One line per record; lineRec maps a 1-based line to its record.
	var buf bytes.Buffer
	lineRec := []int{-1}
	for i := range recs {
		r := &recs[i]
		v := bytes.TrimSpace(r.Value)
		if len(v) == 0 {
			reject(r, "empty record value (a tombstone?)")
			continue
		}
		if bytes.ContainsAny(v, "\r\n") {
			if format != "jsonl" {
				reject(r, "a CSV record value must be one line")
				continue
			}
			var c bytes.Buffer
			if err := json.Compact(&c, v); err != nil {
				reject(r, "invalid JSON: "+err.Error())
				continue
			}
			v = c.Bytes()
		}
		buf.Write(v)
		buf.WriteByte('\n')
		lineRec = append(lineRec, i)
	}
	if len(lineRec) == 1 {
		return out, nil
	}
	d, err := formats.Decode(format, "kafka", buf.Bytes(), formats.DecodeOptions{
		Schema: o.Schema, EventTime: o.EventTime, BatchSize: o.BatchSize, Mem: o.Mem, CSV: o.CSV, Parallelism: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("kafka decode: %w", err)
	}
	defer d.Release()
	bad := map[int64]bool{}
	for _, rj := range d.Rejects {
		if rj.Line <= 0 || rj.Line >= int64(len(lineRec)) {
			return nil, fmt.Errorf("kafka decode: reject at line %d of %d", rj.Line, len(lineRec)-1)
		}
		bad[rj.Line] = true
		reject(&recs[lineRec[rj.Line]], rj.Reason)
	}
	// The accepted records, in order: the lines not rejected.
	accepted := make([]int, 0, len(lineRec)-1-len(bad))
	for line := 1; line < len(lineRec); line++ {
		if !bad[int64(line)] {
			accepted = append(accepted, lineRec[line])
		}
	}
	if int64(len(accepted)) != d.Rows {
		return nil, fmt.Errorf("kafka decode: %d rows decoded from %d accepted records", d.Rows, len(accepted))
	}
	sortRejects(out.Rejects)
	at := 0
	for _, b := range d.Batches {
		n := int(b.NumRows())
		nb := withColumns(b, schema, o.Columns, recs, accepted[at:at+n], o.Mem)
		at += n
		out.Batches = append(out.Batches, nb)
		out.Rows += int64(n)
	}
	return out, nil
}

// withColumns returns b with the metadata columns of the records idx
// appended, as a batch of schema.
func withColumns(b arrow.RecordBatch, schema *arrow.Schema, c Columns, recs []Record, idx []int, mem memory.Allocator) arrow.RecordBatch {
	cols := make([]arrow.Array, 0, schema.NumFields())
	for i := 0; i < int(b.NumCols()); i++ {
		a := b.Column(i)
		a.Retain()
		cols = append(cols, a)
	}
	if c.Topic != "" {
		bl := array.NewStringBuilder(mem)
		for _, i := range idx {
			bl.Append(recs[i].Topic)
		}
		cols = append(cols, bl.NewArray())
		bl.Release()
	}
	if c.Partition != "" {
		bl := array.NewInt32Builder(mem)
		for _, i := range idx {
			bl.Append(recs[i].Partition.Partition)
		}
		cols = append(cols, bl.NewArray())
		bl.Release()
	}
	if c.Offset != "" {
		bl := array.NewInt64Builder(mem)
		for _, i := range idx {
			bl.Append(recs[i].Offset)
		}
		cols = append(cols, bl.NewArray())
		bl.Release()
	}
	if c.Timestamp != "" {
		bl := array.NewTimestampBuilder(mem, formats.TimestampType)
		for _, i := range idx {
			bl.Append(arrow.Timestamp(recs[i].Timestamp.UnixMicro()))
		}
		cols = append(cols, bl.NewArray())
		bl.Release()
	}
	if c.Key != "" {
		bl := array.NewStringBuilder(mem)
		for _, i := range idx {
			k := recs[i].Key
			switch {
			case k == nil:
				bl.AppendNull()
			case utf8.Valid(k):
				bl.Append(string(k))
			default:
				bl.Append(strings.ToValidUTF8(string(k), "\ufffd"))
			}
		}
		cols = append(cols, bl.NewArray())
		bl.Release()
	}
	nb := array.NewRecordBatch(schema, cols, b.NumRows())
	for _, a := range cols {
		a.Release()
	}
	return nb
}

func sortRejects(rs []Reject) {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Partition != rs[j].Partition {
			return rs[i].Partition.Less(rs[j].Partition)
		}
		return rs[i].Offset < rs[j].Offset
	})
}
