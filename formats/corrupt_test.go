package formats

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCorruptParquetNeverPanics flips bytes of a small Parquet file: every
// read returns data or an error. The Parquet library panics on some of
// these (a nil page header) in a goroutine of its own when it reads columns
// in parallel, which crashed the process before floe read sequentially and
// recovered the panic into an error.
func TestCorruptParquetNeverPanics(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int32},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range 40 {
		b.Field(0).(*array.Int32Builder).Append(int32(i % 7))
		b.Field(1).(*array.StringBuilder).Append(string(rune('a' + i%5)))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	data, err := EncodeParquet(schema, []arrow.RecordBatch{b.NewRecordBatch()}, EncodeOptions{NoDictionary: true})
	if err != nil {
		t.Fatal(err)
	}
	errs := 0
	t0 := time.Now()
	for i := 0; i < len(data) && time.Since(t0) < 20*time.Second; i++ {
		for _, x := range []byte{0xff, 0x01} {
			d := append([]byte(nil), data...)
			d[i] ^= x
			if _, _, err := ReadParquetFiltered(d, nil, "k", 0, 128); err != nil {
				errs++
			}
			if _, _, err := ReadParquet(d, nil); err != nil {
				errs++
			}
		}
	}
	if errs == 0 {
		t.Fatal("no flip was refused: the test exercises nothing")
	}
	t.Logf("%d reads of flipped files refused, none panicked", errs)
}
