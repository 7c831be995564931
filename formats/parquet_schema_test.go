package formats

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestParquetSchemaMatchesDecode: the footer-only schema equals the schema
// a full Decode without a declared schema returns.
func TestParquetSchemaMatchesDecode(t *testing.T) {
	in := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, in)
	b.Field(0).(*array.TimestampBuilder).Append(1000)
	b.Field(1).(*array.Int32Builder).Append(7)
	b.Field(2).(*array.StringBuilder).Append("x")
	rec := b.NewRecordBatch()
	data, err := EncodeParquet(in, []arrow.RecordBatch{rec}, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParquetSchema("f.parquet", data)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode("parquet", "f.parquet", data, DecodeOptions{EventTime: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	if !got.Equal(d.Schema) {
		t.Fatalf("ParquetSchema = %v\nDecode schema = %v", got, d.Schema)
	}
	if _, err := ParquetSchema("bad.parquet", []byte("not parquet")); err == nil {
		t.Fatal("no error for a non-Parquet file")
	}
}
