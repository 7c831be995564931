package formats

import (
	"strings"
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
	rec := b.NewRecordBatch()
	defer rec.Release()
	plain, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, EncodeOptions{NoDictionary: true})
	if err != nil {
		t.Fatal(err)
	}
	dict, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, EncodeOptions{Compression: "none"})
	if err != nil {
		t.Fatal(err)
	}
	// Decode with a declared schema takes the flat column reader (and
	// pqarrow's with generalParquet).
	declared := mustSchema(t, Field{"k", "int32"}, Field{"s", "string"}, Field{"n", "int64"})
	errs := 0
	t0 := time.Now()
	for _, data := range [][]byte{plain, dict} {
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
				for _, general := range []bool{false, true} {
					opts := DecodeOptions{Schema: declared, BatchSize: 16, generalParquet: general}
					dec, err := Decode("parquet", "c.parquet", d, opts)
					if err != nil {
						errs++
						if !strings.HasPrefix(err.Error(), "c.parquet: ") {
							t.Fatalf("error does not name the file: %v", err)
						}
					} else {
						dec.Release()
					}
				}
			}
		}
	}
	if errs == 0 {
		t.Fatal("no flip was refused: the test exercises nothing")
	}
	t.Logf("%d reads of flipped files refused, none panicked", errs)
}
