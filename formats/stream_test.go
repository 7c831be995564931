package formats

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// collect runs fn, collecting what it hands over.
func collect(t *testing.T, fn func(each func(arrow.RecordBatch) error) (*Decoded, error)) (*Decoded, [][]any) {
	t.Helper()
	var got []arrow.RecordBatch
	d, err := fn(func(b arrow.RecordBatch) error {
		got = append(got, b)
		return nil
	})
	if err != nil {
		t.Fatalf("stream decode: %v", err)
	}
	if n := countRows(got); n != d.Rows {
		t.Errorf("handed over %d rows, reports %d", n, d.Rows)
	}
	if len(d.Batches) != 0 {
		t.Errorf("DecodeStream returned %d batches, want none (handed over)", len(d.Batches))
	}
	r := rows(got)
	releaseAll(got)
	return d, r
}

func countRows(bs []arrow.RecordBatch) int64 {
	var n int64
	for _, b := range bs {
		n += b.NumRows()
	}
	return n
}

// TestDecodeStreamEqualsDecode: the rows and rejects DecodeStream hands
// over equal Decode's, whatever the chunk size and parallelism.
func TestDecodeStreamEqualsDecode(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("\xEF\xBB\xBF")
	clicks := strings.Split(strings.TrimSpace(string(genClicks(3000))), "\n")
	for i, l := range clicks {
		sb.WriteString(l + "\n")
		switch i % 397 {
		case 5:
			sb.WriteString("{not json\n")
		case 9:
			sb.WriteString("\n")
		case 11:
			sb.WriteString(`{"user_id":"u","page":"/","bytes":1}` + "\n") // no event time
		}
	}
	jsonl := sb.String()
	schema := clickSchema(t)
	want := decode(t, "jsonl", jsonl, DecodeOptions{Schema: schema, EventTime: "event_time"})
	for _, chunk := range []int{1, 100, 4096, 1 << 20} {
		for _, par := range []int{1, 3} {
			t.Run(fmt.Sprintf("jsonl chunk=%d par=%d", chunk, par), func(t *testing.T) {
				opts := DecodeOptions{Schema: schema, EventTime: "event_time", Parallelism: par, BatchSize: 500}
				d, got := collect(t, func(each func(arrow.RecordBatch) error) (*Decoded, error) {
					return decodeJSONLStream("in.jsonl", []byte(jsonl), withDefaults(opts), chunk, each)
				})
				if !reflect.DeepEqual(got, rows(want.Batches)) {
					t.Errorf("rows differ from Decode's (%d vs %d)", len(got), want.Rows)
				}
				if !reflect.DeepEqual(d.Rejects, want.Rejects) {
					t.Errorf("rejects differ:\n got %v\nwant %v", d.Rejects, want.Rejects)
				}
			})
		}
	}

	var cb strings.Builder
	cb.WriteString("page,event_time,bytes,user_id,extra\n")
	for i := 0; i < 2000; i++ {
		switch i % 301 {
		case 3:
			cb.WriteString("\"/multi\nline\",2024-03-01T00:00:00Z,5,u1,x\n")
		case 7:
			cb.WriteString("/short,row\n")
		case 8:
			cb.WriteString("/bad,2024-03-01T00:00:00Z,notanint,u2,x\n")
		}
		fmt.Fprintf(&cb, "/p%d,2024-03-01T00:%02d:%02dZ,%d,user-%d,x\n", i%7, (i/60)%60, i%60, i, i%13)
	}
	csvText := cb.String()
	wantCSV := decode(t, "csv", csvText, DecodeOptions{Schema: schema, EventTime: "event_time"})
	for _, bs := range []int{1, 7, 1000, 100000} {
		t.Run(fmt.Sprintf("csv batch=%d", bs), func(t *testing.T) {
			d, got := collect(t, func(each func(arrow.RecordBatch) error) (*Decoded, error) {
				return DecodeStream("csv", "in.csv", []byte(csvText), DecodeOptions{Schema: schema, EventTime: "event_time", BatchSize: bs}, each)
			})
			if !reflect.DeepEqual(got, rows(wantCSV.Batches)) {
				t.Errorf("rows differ from Decode's (%d vs %d)", len(got), wantCSV.Rows)
			}
			if !reflect.DeepEqual(d.Rejects, wantCSV.Rejects) || len(d.Rejects) == 0 {
				t.Errorf("rejects differ:\n got %v\nwant %v", d.Rejects, wantCSV.Rejects)
			}
		})
	}

	pq, err := EncodeParquet(want.Schema, want.Batches, EncodeOptions{RowGroupRows: 700})
	if err != nil {
		t.Fatal(err)
	}
	wantPQ := decode(t, "parquet", string(pq), DecodeOptions{Schema: schema, EventTime: "event_time"})
	t.Run("parquet", func(t *testing.T) {
		n := 0
		d, got := collect(t, func(each func(arrow.RecordBatch) error) (*Decoded, error) {
			return DecodeStream("parquet", "in.parquet", pq, DecodeOptions{Schema: schema, EventTime: "event_time", BatchSize: 256},
				func(b arrow.RecordBatch) error { n++; return each(b) })
		})
		if !reflect.DeepEqual(got, rows(wantPQ.Batches)) || d.Rows != want.Rows {
			t.Errorf("rows differ from Decode's (%d vs %d)", len(got), wantPQ.Rows)
		}
		if n < int(want.Rows/256) {
			t.Errorf("%d batches handed over, want one per 256 rows", n)
		}
	})
}

func withDefaults(o DecodeOptions) DecodeOptions {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
	return o
}

// TestDecodeStreamCallerError: an error of the callback stops decoding and
// comes back as it is.
func TestDecodeStreamCallerError(t *testing.T) {
	stop := errors.New("stop here")
	schema := clickSchema(t)
	data := genClicks(5000)
	pq, err := EncodeParquet(schema, decode(t, "jsonl", string(data), DecodeOptions{Schema: schema}).Batches, EncodeOptions{RowGroupRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for format, in := range map[string][]byte{"jsonl": data, "parquet": pq, "csv": []byte("event_time,user_id,page,bytes\n" + strings.Repeat("2024-01-01T00:00:00Z,u,/,1\n", 5000))} {
		calls := 0
		_, err := DecodeStream(format, "in", in, DecodeOptions{Schema: schema, BatchSize: 1000, Parallelism: 1}, func(b arrow.RecordBatch) error {
			calls++
			b.Release()
			return stop
		})
		if err != stop || calls != 1 {
			t.Errorf("%s: err %v after %d calls, want the callback's error after 1", format, err, calls)
		}
	}
}

// TestPartEncoderBytes: fed the same batches, PartEncoder writes the bytes
// EncodeParquet and EncodeJSONL write, and Size grows with what it holds.
func TestPartEncoderBytes(t *testing.T) {
	schema := clickSchema(t)
	d := decode(t, "jsonl", string(genClicks(20000)), DecodeOptions{Schema: schema, BatchSize: 3000})
	for _, c := range []struct {
		format string
		opts   EncodeOptions
		want   func() ([]byte, error)
	}{
		{"parquet", EncodeOptions{Compression: "snappy"}, func() ([]byte, error) {
			return EncodeParquet(schema, d.Batches, EncodeOptions{Compression: "snappy"})
		}},
		{"parquet", EncodeOptions{RowGroupRows: 4000, NoDictionary: true}, func() ([]byte, error) {
			return EncodeParquet(schema, d.Batches, EncodeOptions{RowGroupRows: 4000, NoDictionary: true})
		}},
		{"jsonl", EncodeOptions{}, func() ([]byte, error) { return EncodeJSONL(schema, d.Batches) }},
	} {
		want, err := c.want()
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewPartEncoder(c.format, schema, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		var last int64
		for i, b := range d.Batches {
			if err := e.Write(b); err != nil {
				t.Fatal(err)
			}
			if i > 0 && e.Size() <= last && c.format == "jsonl" {
				t.Errorf("%s: Size did not grow: %d after %d", c.format, e.Size(), last)
			}
			last = e.Size()
		}
		if e.Rows() != d.Rows || last == 0 {
			t.Errorf("%s: Rows %d Size %d, want %d rows and a size", c.format, e.Rows(), last, d.Rows)
		}
		got, err := e.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s %+v: %d bytes differ from the whole-file encoder's %d", c.format, c.opts, len(got), len(want))
		}
		if _, err := e.Finish(); err == nil {
			t.Errorf("%s: a second Finish succeeded", c.format)
		}
	}
	if _, err := NewPartEncoder("csv", schema, EncodeOptions{}); err == nil || !strings.Contains(err.Error(), "unknown format") {
		t.Errorf("csv encoder: %v, want unknown format", err)
	}
}

// FuzzDecodeStream: for any JSON-lines or CSV text, DecodeStream (in tiny
// chunks and batches, serially and in parallel) hands over the rows and
// rejects Decode returns, or fails when Decode fails.
func FuzzDecodeStream(f *testing.F) {
	f.Add([]byte("{\"s\":\"a\",\"i\":1}\n{bad\n\n{\"t\":\"2024-01-01T00:00:00Z\"}\n"), uint8(3), false)
	f.Add([]byte("s,i,t\n\"x\ny\",2,2024-01-01T00:00:00Z\nz,notint,\n,,\n"), uint8(1), true)
	f.Add([]byte("\xEF\xBB\xBFs,i\n\"unterminated\n"), uint8(7), true)
	schema, err := SchemaFromFields([]Field{{"s", "string"}, {"i", "int64"}, {"t", "timestamp"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint8, isCSV bool) {
		format := "jsonl"
		if isCSV {
			format = "csv"
		}
		bs := int(size%16) + 1
		opts := DecodeOptions{Schema: schema, BatchSize: bs, Mem: memory.DefaultAllocator}
		want, werr := Decode(format, "in", data, opts)
		for _, par := range []int{1, 3} {
			opts.Parallelism = par
			var got []arrow.RecordBatch
			each := func(b arrow.RecordBatch) error { got = append(got, b); return nil }
			var d *Decoded
			var err error
			if isCSV {
				d, err = DecodeStream(format, "in", data, opts, each)
			} else {
				d, err = decodeJSONLStream("in", data, opts, bs*8, each)
			}
			if (err != nil) != (werr != nil) {
				t.Fatalf("par %d: DecodeStream error %v, Decode error %v", par, err, werr)
			}
			if err != nil {
				continue
			}
			if !reflect.DeepEqual(rows(got), rows(want.Batches)) || d.Rows != want.Rows {
				t.Fatalf("par %d: rows differ: %d vs %d", par, d.Rows, want.Rows)
			}
			if !reflect.DeepEqual(d.Rejects, want.Rejects) {
				t.Fatalf("par %d: rejects differ:\n got %v\nwant %v", par, d.Rejects, want.Rejects)
			}
		}
	})
}
