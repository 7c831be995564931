package formats

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// stringParquet writes the values as one Parquet string column "k" (raw
// bytes, not validated) plus an int64 column "n" counting rows from 1.
func stringParquet(t testing.TB, vals [][]byte, opts EncodeOptions) []byte {
	t.Helper()
	schema := mustSchema(t, Field{"k", "string"}, Field{"n", "int64"})
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	nb := array.NewInt64Builder(memory.DefaultAllocator)
	for i, v := range vals {
		sb.BinaryBuilder.Append(v)
		nb.Append(int64(i + 1))
	}
	ks, ns := sb.NewArray(), nb.NewArray()
	sb.Release()
	nb.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{ks, ns}, int64(len(vals)))
	ks.Release()
	ns.Release()
	defer rec.Release()
	data, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestInvalidUTF8SameRuleEveryFormat: the same two rows with different
// invalid keys ("u\xff1", "u\xfe1") are rejected, naming the column, by
// every input format; the good rows around them survive unchanged and no
// output string is invalid UTF-8 (DuckDB refuses such Parquet files).
func TestInvalidUTF8SameRuleEveryFormat(t *testing.T) {
	keys := []string{"ok-1", "u\xff1", "é-2", "u\xfe1", "ok-3"}
	schema := mustSchema(t, Field{"k", "string"}, Field{"n", "int64"})
	var csv, jsonl strings.Builder
	csv.WriteString("k,n\n")
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		csv.WriteString(k + "," + string(rune('1'+i)) + "\n")
		jsonl.WriteString(`{"k":"` + k + `","n":` + string(rune('1'+i)) + "}\n")
		vals[i] = []byte(k)
	}
	inputs := []struct {
		name, format, data string
		schema             *arrow.Schema
		lines              []int64 // 1-based line (CSV, JSON lines) or row (Parquet)
	}{
		{"csv", "csv", csv.String(), schema, []int64{3, 5}},
		{"jsonl", "jsonl", jsonl.String(), schema, []int64{2, 4}},
		{"parquet", "parquet", string(stringParquet(t, vals, EncodeOptions{})), schema, []int64{2, 4}},
		{"parquet plain", "parquet", string(stringParquet(t, vals, EncodeOptions{NoDictionary: true})), schema, []int64{2, 4}},
		{"parquet inferred schema", "parquet", string(stringParquet(t, vals, EncodeOptions{})), nil, []int64{2, 4}},
	}
	want := [][]any{{"ok-1", int64(1)}, {"é-2", int64(3)}, {"ok-3", int64(5)}}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			d := decode(t, in.format, in.data, DecodeOptions{Schema: in.schema})
			if got := rows(d.Batches); !reflect.DeepEqual(got, want) {
				t.Fatalf("rows %q, want %q", got, want)
			}
			if len(d.Rejects) != 2 {
				t.Fatalf("rejects = %+v, want 2", d.Rejects)
			}
			for i, r := range d.Rejects {
				if r.File != "in."+in.format || r.Line != in.lines[i] {
					t.Errorf("reject %d at %s:%d, want in.%s:%d", i, r.File, r.Line, in.format, in.lines[i])
				}
				bad := []string{`"u\xff1"`, `"u\xfe1"`}[i]
				if want := `column "k": value is not valid UTF-8: ` + bad; r.Reason != want {
					t.Errorf("reason %q, want %q", r.Reason, want)
				}
			}
		})
	}
}

// TestParquetUTF8RuneSplitAcrossValues: the whole value buffer "a\xc3" +
// "\xa9b" is valid UTF-8 ("aéb") but neither value is; the fast path must
// not accept them.
func TestParquetUTF8RuneSplitAcrossValues(t *testing.T) {
	data := stringParquet(t, [][]byte{[]byte("x"), []byte("a\xc3"), []byte("\xa9b"), []byte("€"), {}, []byte("\xe2\x82"), []byte("\xac")},
		EncodeOptions{NoDictionary: true})
	d := decode(t, "parquet", string(data), DecodeOptions{Schema: mustSchema(t, Field{"k", "string"}, Field{"n", "int64"})})
	var lines []int64
	for _, r := range d.Rejects {
		lines = append(lines, r.Line)
	}
	if want := []int64{2, 3, 6, 7}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("rejected rows %v, want %v (%+v)", lines, want, d.Rejects)
	}
	if got, want := rows(d.Batches), [][]any{{"x", int64(1)}, {"€", int64(4)}, {"", int64(5)}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

// TestParquetUTF8RejectsWithNullEventTime: one row can fail both ways; it is
// rejected once, for the first reason.
func TestParquetUTF8RejectsWithNullEventTime(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"}, Field{"k", "string"})
	tb := array.NewTimestampBuilder(memory.DefaultAllocator, TimestampType)
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	tb.Append(1)
	sb.Append("a")
	tb.AppendNull()
	sb.BinaryBuilder.Append([]byte("\xff"))
	tb.AppendNull()
	sb.Append("c")
	tb.Append(4)
	sb.BinaryBuilder.Append([]byte("d\x80"))
	ta, sa := tb.NewArray(), sb.NewArray()
	tb.Release()
	sb.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{ta, sa}, 4)
	ta.Release()
	sa.Release()
	defer rec.Release()
	data, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := decode(t, "parquet", string(data), DecodeOptions{Schema: schema, EventTime: "t"})
	want := []Reject{
		{File: "in.parquet", Line: 2, Reason: `column "k": value is not valid UTF-8: "\xff"`},
		{File: "in.parquet", Line: 3, Reason: `event time column "t" is null`},
		{File: "in.parquet", Line: 4, Reason: `column "k": value is not valid UTF-8: "d\x80"`},
	}
	if !reflect.DeepEqual(d.Rejects, want) {
		t.Fatalf("rejects\n got %+v\nwant %+v", d.Rejects, want)
	}
	if d.Rows != 1 {
		t.Fatalf("rows = %d, want 1", d.Rows)
	}
}

// FuzzParquetUTF8: values split from the input at NUL bytes go through a
// Parquet file; exactly the ones that are not valid UTF-8 are rejected, at
// their row number, and the rest come out unchanged and in order, also
// when the column is declared as DictStringType.
func FuzzParquetUTF8(f *testing.F) {
	for _, s := range []string{"a\x00b", "a\xc3\x00\xa9b\x00é", "\xe2\x82\x00\xac\x00\x00€", "\xff\x00\xfe\x00ok", "\xed\xa0\x80\x00\xf4\x90\x80\x80"} {
		f.Add([]byte(s), false)
	}
	schema := mustSchema(f, Field{"k", "string"}, Field{"n", "int64"})
	f.Fuzz(func(t *testing.T, data []byte, plain bool) {
		vals := bytes.Split(data, []byte{0})
		pq := stringParquet(t, vals, EncodeOptions{NoDictionary: plain, Compression: "none"})
		d, err := Decode("parquet", "f.parquet", pq, DecodeOptions{Schema: schema, BatchSize: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Release()
		var want [][]any
		var wantLines, gotLines []int64
		for i, v := range vals {
			if utf8.Valid(v) {
				want = append(want, []any{string(v), int64(i + 1)})
			} else {
				wantLines = append(wantLines, int64(i+1))
			}
		}
		for _, r := range d.Rejects {
			gotLines = append(gotLines, r.Line)
		}
		if !reflect.DeepEqual(gotLines, wantLines) {
			t.Fatalf("rejected rows %v, want %v", gotLines, wantLines)
		}
		if got := rows(d.Batches); len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("rows %q, want %q", got, want)
		}
		// Declared as DictStringType: the same rows and rejects.
		dd, err := Decode("parquet", "f.parquet", pq, DecodeOptions{Schema: dictSchema(schema, "k"), BatchSize: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer dd.Release()
		if got := unpackedRows(t, dd.Batches); len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("dictionary decode: rows %q, want %q", got, want)
		}
		if !reflect.DeepEqual(dd.Rejects, d.Rejects) {
			t.Fatalf("dictionary decode: rejects %v, want %v", dd.Rejects, d.Rejects)
		}
	})
}

// FuzzDecodeCSVUTF8 compares the CSV decoder with encoding/csv on a
// string column and an int64 column: a record is kept exactly when it has
// two fields, the string is valid UTF-8 and the number parses.
func FuzzDecodeCSVUTF8(f *testing.F) {
	for _, s := range []string{"a,1\nu\xff1,2\n\"x\xfe\",\n", "é,3\r\n\"a\nb\",4", "a,1,2\n\"bad\"q,1\n", "\xc3,1\n\xa9,2"} {
		f.Add([]byte(s))
	}
	schema := mustSchema(f, Field{"s", "string"}, Field{"n", "int64"})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode("csv", "f.csv", data, DecodeOptions{Schema: schema, CSV: CSVOptions{NoHeader: true}})
		if err != nil {
			return // a reader error that is not a ParseError; not about UTF-8
		}
		defer d.Release()
		want, nRecords := refCSV(stripBOM(data))
		got := rows(d.Batches)
		if len(got)+len(d.Rejects) != nRecords {
			t.Fatalf("%d rows + %d rejects, encoding/csv read %d records", len(got), len(d.Rejects), nRecords)
		}
		if len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("rows %q, want %q", got, want)
		}
		for _, r := range got {
			if !utf8.ValidString(r[0].(string)) {
				t.Fatalf("invalid UTF-8 passed through: %q", r[0])
			}
		}
	})
}

// TestUTF8OnlyDeclaredColumnsChecked: bytes in columns the schema does not
// declare are not read, so they do not reject the row (in any format).
func TestUTF8OnlyDeclaredColumnsChecked(t *testing.T) {
	schema := mustSchema(t, Field{"k", "string"})
	for _, in := range []struct{ format, data string }{
		{"csv", "k,x\nok,\xff\n"},
		{"jsonl", "{\"k\":\"ok\",\"x\":\"\xff\"}\n"},
	} {
		d := decode(t, in.format, in.data, DecodeOptions{Schema: schema})
		if got := rows(d.Batches); len(d.Rejects) != 0 || !reflect.DeepEqual(got, [][]any{{"ok"}}) {
			t.Errorf("%s: rows %q, rejects %+v", in.format, got, d.Rejects)
		}
	}
}
