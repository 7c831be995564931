package formats

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// TestIntStatsOnly: a state-style encoding keeps the integer and timestamp
// statistics restore prunes row groups by (names with dots included) and
// writes none for strings and lists; the default keeps them all.
func TestIntStatsOnly(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "window_start", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "total.lo", Type: arrow.PrimitiveTypes.Int64},
		{Name: "pages.values", Type: arrow.ListOf(arrow.BinaryTypes.Binary)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range 100 {
		b.Field(0).(*array.Int32Builder).Append(int32(i % 7))
		b.Field(1).(*array.StringBuilder).Append("u" + string(rune('a'+i%26)))
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(i * 1000))
		b.Field(3).(*array.Int64Builder).Append(int64(i))
		lb := b.Field(4).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.BinaryBuilder).Append([]byte{byte(i)})
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	for _, intOnly := range []bool{false, true} {
		data, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, EncodeOptions{Compression: "snappy", NoDictionary: true, IntStatsOnly: intOnly})
		if err != nil {
			t.Fatal(err)
		}
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		rg := pf.MetaData().RowGroup(0)
		for leaf := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(leaf)
			if err != nil {
				t.Fatal(err)
			}
			set, _ := cc.StatsSet()
			path := cc.PathInSchema().String()
			wantSet := !intOnly || leaf == 0 || leaf == 2 || leaf == 3
			if set != wantSet {
				t.Errorf("IntStatsOnly=%v: column %s statistics set %v, want %v", intOnly, path, set, wantSet)
			}
		}
		pf.Close()
		rs, err := ParquetRowGroupRanges(data, "key_group", "window_start")
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || !rs[0].Known[0] || rs[0].Min[0] != 0 || rs[0].Max[0] != 6 || !rs[0].Known[1] || rs[0].Max[1] != 99000 {
			t.Errorf("IntStatsOnly=%v: row group ranges %+v", intOnly, rs)
		}
	}
}
