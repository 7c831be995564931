package runner

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/exchange"
)

// An exchange segment carries rows whose schema differs from the plan's
// only in nullability (decoders mark every column nullable; a schema
// inferred from a Parquet file's required columns is not) under the plan's
// schema, rows unchanged; a batch of another column type is refused by
// name.
func TestExchangeSegmentNullability(t *testing.T) {
	plan := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	nd := &dataflow.Node{Name: "window", Ins: []*dataflow.Node{{Name: "src", Out: plan}}}
	batch := func(vType arrow.DataType) arrow.RecordBatch {
		sc := arrow.NewSchema([]arrow.Field{
			{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "v", Type: vType, Nullable: true},
		}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer b.Release()
		for i := range 5 {
			b.Field(0).(*array.StringBuilder).Append(strings.Repeat("x", i+1))
			switch f := b.Field(1).(type) {
			case *array.Int64Builder:
				f.Append(int64(i * 10))
			case *array.Int32Builder:
				f.Append(int32(i * 10))
			}
		}
		return b.NewRecordBatch()
	}
	b := batch(arrow.PrimitiveTypes.Int64)
	defer b.Release()
	seg, err := exchange.Encode(inSchemas(nd), [][]arrow.RecordBatch{{b}})
	if err != nil {
		t.Fatalf("encode nullable rows under a non-nullable plan schema: %v", err)
	}
	got, err := exchange.Decode(inSchemas(nd), seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0]) != 1 {
		t.Fatalf("decoded %d inputs, want 1 with 1 batch", len(got))
	}
	defer ReleaseBatches(got[0])
	if g := got[0][0]; !g.Schema().Equal(plan) || !array.RecordEqual(array.NewRecordBatch(b.Schema(), g.Columns(), g.NumRows()), b) {
		t.Errorf("decoded %v, want the rows of %v under the plan's schema", g, b)
	}

	bad := batch(arrow.PrimitiveTypes.Int32)
	defer bad.Release()
	if _, err := exchange.Encode(inSchemas(nd), [][]arrow.RecordBatch{{bad}}); err == nil || !strings.Contains(err.Error(), "column 1 is v int32, the plan's v int64") {
		t.Errorf("encode rows of another column type: %v, want the column named", err)
	}
}
