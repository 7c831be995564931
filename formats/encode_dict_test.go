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

// TestEncodeParquetDictionaryChoice: string columns whose values repeat
// are dictionary-encoded (few pages; 10k users, each in 30 windows, sorted
// by window then user as a window's output is), a column of mostly
// distinct values (a million users) is written plainly, and all read back
// the same.
func TestEncodeParquetDictionaryChoice(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "few", Type: arrow.BinaryTypes.String},
		{Name: "many", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "sorted", Type: arrow.BinaryTypes.String}}, nil)
	few := array.NewStringBuilder(memory.DefaultAllocator)
	many := array.NewStringBuilder(memory.DefaultAllocator)
	sorted := array.NewStringBuilder(memory.DefaultAllocator)
	const n = 300000
	for i := range n {
		few.Append(fmt.Sprintf("page-%d", i%50))
		if i%7 == 0 {
			many.AppendNull()
		} else {
			many.Append(fmt.Sprintf("user-%07d", i*3))
		}
		sorted.Append(fmt.Sprintf("user-%05d", i%10000)) // window i/10000, users in order
	}
	fa, ma, sa := few.NewArray(), many.NewArray(), sorted.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{fa, ma, sa}, n)
	fa.Release()
	ma.Release()
	sa.Release()
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
	if !dict(0) || dict(1) || !dict(2) {
		t.Fatalf("dictionary encoding: few pages %v, a million users %v, 10k users sorted %v; want true, false, true", dict(0), dict(1), dict(2))
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
		for c := range 3 {
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
