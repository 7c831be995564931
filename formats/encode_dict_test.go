package formats

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// TestEncodeParquetDictionaryChoice: a string column whose values repeat
// is dictionary-encoded, one of mostly distinct values is written plainly,
// and both read back the same.
func TestEncodeParquetDictionaryChoice(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "few", Type: arrow.BinaryTypes.String}, {Name: "many", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	few := array.NewStringBuilder(memory.DefaultAllocator)
	many := array.NewStringBuilder(memory.DefaultAllocator)
	const n = 10000
	for i := range n {
		few.Append(fmt.Sprintf("page-%d", i%50))
		if i%7 == 0 {
			many.AppendNull()
		} else {
			many.Append(fmt.Sprintf("user-%07d", i))
		}
	}
	fa, ma := few.NewArray(), many.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{fa, ma}, n)
	fa.Release()
	ma.Release()
	defer rec.Release()
	data, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, EncodeOptions{Mem: memory.DefaultAllocator, Compression: "snappy"})
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	dict := func(col int) bool {
		md, err := pf.MetaData().RowGroup(0).ColumnChunk(col)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range md.Encodings() {
			if e == parquet.Encodings.RLEDict || e == parquet.Encodings.PlainDict {
				return true
			}
		}
		return false
	}
	if !dict(0) || dict(1) {
		t.Fatalf("dictionary encoding: repeated column %v, distinct column %v; want true, false", dict(0), dict(1))
	}
	_, back, err := ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, b := range back {
			b.Release()
		}
	}()
	var rows int64
	for _, b := range back {
		for c := range 2 {
			want := rec.Column(c)
			got := b.Column(c)
			for i := range int(b.NumRows()) {
				if want.ValueStr(int(rows)+i) != got.ValueStr(i) {
					t.Fatalf("column %d row %d: %q, want %q", c, int(rows)+i, got.ValueStr(i), want.ValueStr(int(rows)+i))
				}
			}
		}
		rows += b.NumRows()
	}
	if rows != n {
		t.Fatalf("read back %d rows, want %d", rows, n)
	}
}
