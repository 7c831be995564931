package formats

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// wideParquet writes rows rows of (id int64, ts timestamp, pad string of
// padLen bytes, cat string) in row groups of rg rows.
func wideParquet(t testing.TB, rows, rg, padLen int) ([]byte, *arrow.Schema) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "pad", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "cat", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	x := uint32(1)
	pad := make([]byte, padLen)
	for i := 0; i < rows; i++ {
		for j := range pad {
			x = x*1664525 + 1013904223
			pad[j] = byte('a' + x>>27%26)
		}
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 1000))
		b.Field(2).(*array.StringBuilder).Append(string(pad))
		b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("c%d", i%7))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	data, err := EncodeParquet(sc, []arrow.RecordBatch{rec}, EncodeOptions{Compression: "snappy", RowGroupRows: int64(rg)})
	if err != nil {
		t.Fatal(err)
	}
	return data, sc
}

// fetch reads the ranges of data as a store's ranged reads would.
func fetch(data []byte, rs []ByteRange) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = data[r.Off : r.Off+r.Len]
	}
	return out
}

// Decoding the few columns a plan needs from only their column chunks (and
// the footer) gives the same rows as decoding the whole file, while holding
// a small part of the file's bytes; a column whose chunks were not fetched
// fails the decode instead of reading garbage.
func TestDecodeParquetFromColumnRanges(t *testing.T) {
	data, _ := wideParquet(t, 20000, 3000, 200)
	size := int64(len(data))
	want := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "cat", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	opts := DecodeOptions{Schema: want, EventTime: "ts"}
	full, err := Decode("parquet", "f.parquet", data, opts)
	if err != nil {
		t.Fatal(err)
	}
	tail := data[size-ParquetTailSize(size):]
	rs, need, err := ParquetColumnRanges(tail, size, []string{"ts", "cat"}, 0)
	if err != nil || need != 0 {
		t.Fatalf("ranges: %v (need %d)", err, need)
	}
	sf, err := NewSparseFile(size, rs, fetch(data, rs))
	if err != nil {
		t.Fatal(err)
	}
	if held := sf.Held(); held*4 > size {
		t.Fatalf("held %d of %d bytes; the ts and cat chunks and the footer are far less than a quarter of a file padded with 200-byte strings", held, size)
	}
	got, err := DecodeParquetAt("f.parquet", sf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != full.Rows || got.Rows != 20000 {
		t.Fatalf("rows %d, whole-file decode %d, want 20000", got.Rows, full.Rows)
	}
	if a, b := tableText(t, full.Batches), tableText(t, got.Batches); a != b {
		t.Fatal("ranged decode differs from the whole-file decode")
	}
	// pad was not fetched: decoding it must fail, not invent values.
	withPad := arrow.NewSchema(append(want.Fields(), arrow.Field{Name: "pad", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	if _, err := DecodeParquetAt("f.parquet", sf, DecodeOptions{Schema: withPad, EventTime: "ts"}); err == nil || !strings.Contains(err.Error(), "not fetched") {
		t.Fatalf("decoding an unfetched column: err = %v, want a 'not fetched' error", err)
	}
	// A tail too short for the footer asks for more.
	_, need, err = ParquetColumnRanges(data[size-16:], size, []string{"ts"}, 0)
	if err != nil || need <= 16 || need > size {
		t.Fatalf("short tail: need %d, err %v", need, err)
	}
	// Not Parquet, or a column the file lacks: an error (the caller reads the whole file).
	if _, _, err := ParquetColumnRanges([]byte("definitely not a parquet file"), 29, []string{"ts"}, 0); err == nil {
		t.Fatal("ranges of a non-Parquet tail: no error")
	}
	if _, _, err := ParquetColumnRanges(tail, size, []string{"nope"}, 0); err == nil {
		t.Fatal("ranges of a missing column: no error")
	}
}

func TestMergeRanges(t *testing.T) {
	got := mergeRanges([]ByteRange{{100, 10}, {0, 10}, {12, 5}, {50, 10}, {105, 20}}, 3)
	want := []ByteRange{{0, 17}, {50, 10}, {100, 25}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("merge: %v, want %v", got, want)
	}
}

func tableText(t *testing.T, bs []arrow.RecordBatch) string {
	var buf bytes.Buffer
	for _, b := range bs {
		for i := 0; i < int(b.NumRows()); i++ {
			for c := 0; c < int(b.NumCols()); c++ {
				fmt.Fprintf(&buf, "%v|", b.Column(c).ValueStr(i))
			}
			buf.WriteByte('\n')
		}
	}
	return buf.String()
}

// The footer parser takes any bytes without panicking.
func FuzzParquetColumnRanges(f *testing.F) {
	data, _ := wideParquet(f, 100, 30, 4)
	f.Add(data[len(data)-200:], int64(len(data)))
	f.Add([]byte("PAR1"), int64(4))
	f.Fuzz(func(t *testing.T, tail []byte, size int64) {
		if size < int64(len(tail)) {
			size = int64(len(tail))
		}
		_, _, _ = ParquetColumnRanges(tail, size, []string{"id", "ts"}, 64)
	})
}
