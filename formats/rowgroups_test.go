package formats

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestReadParquetRowGroupsColumns: the named columns of chosen row groups,
// in the order named (not the file's), equal those columns of the whole
// row groups; a name not in the file is an error naming it.
func TestReadParquetRowGroupsColumns(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int32},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range 1000 {
		b.Field(0).(*array.Int32Builder).Append(int32(i))
		if i%7 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("s", i%13))
		}
		b.Field(2).(*array.Int64Builder).Append(int64(i * 3))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	data, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, EncodeOptions{RowGroupRows: 300})
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	groups := []int{3, 1}
	got, err := ReadParquetRowGroupsColumns(data, mem, groups, []string{"v", "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(got)
	for x, g := range groups {
		whole, err := ReadParquetRowGroups(data, mem, []int{g})
		if err != nil || len(whole) != 1 {
			t.Fatalf("row group %d whole: %v, %d batches", g, err, len(whole))
		}
		defer releaseAll(whole)
		w := whole[0]
		if got[x].NumRows() != w.NumRows() || got[x].NumCols() != 2 {
			t.Fatalf("row group %d: %d rows, %d columns; want %d rows, 2 columns", g, got[x].NumRows(), got[x].NumCols(), w.NumRows())
		}
		if got[x].Schema().Field(0).Name != "v" || got[x].Schema().Field(1).Name != "k" {
			t.Fatalf("row group %d: columns %s, want v, k", g, got[x].Schema())
		}
		if !array.Equal(got[x].Column(0), w.Column(2)) || !array.Equal(got[x].Column(1), w.Column(0)) {
			t.Fatalf("row group %d: columns differ from the whole row group's", g)
		}
	}
	one, err := ReadParquetRowGroupColumns(data, mem, 0, []string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Release()
	if one.NumRows() != 300 || one.Column(0).NullN() != 43 {
		t.Fatalf("row group 0 of s: %d rows, %d nulls; want 300, 43", one.NumRows(), one.Column(0).NullN())
	}
	if _, err := ReadParquetRowGroupsColumns(data, mem, []int{0}, []string{"nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown column: err %v, want one naming it", err)
	}
	if _, err := ReadParquetRowGroupsColumns(data, mem, []int{9}, []string{"k"}); err == nil {
		t.Fatal("row group 9 of 4: no error")
	}
}
