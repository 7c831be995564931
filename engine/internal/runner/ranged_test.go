package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// A wide Parquet source file is read as its footer and the chunks of the
// columns the source node decodes: a few ranged GETs holding a small share
// of the file, decoding to the same rows as the whole file; a small file,
// another format, or a store that cannot read ranges is read whole (nil).
func TestReadColumnsFetchesOnlyNeededChunks(t *testing.T) {
	dir := t.TempDir()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "pad", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	x := uint32(7)
	pad := make([]byte, 512)
	const rows = 16000
	for i := 0; i < rows; i++ {
		for j := range pad {
			x = x*1664525 + 1013904223
			pad[j] = byte('a' + (x>>27)%26)
		}
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 1000))
		b.Field(1).(*array.StringBuilder).Append(string(pad))
		b.Field(2).(*array.Int64Builder).Append(int64(i % 97))
	}
	rec := b.NewRecordBatch()
	data, err := formats.EncodeParquet(sc, []arrow.RecordBatch{rec}, formats.EncodeOptions{Compression: "snappy", RowGroupRows: 4000})
	rec.Release()
	b.Release()
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < rangedMinRequests*store.DefaultRequestBytes {
		t.Fatalf("test file is %d bytes, below the object stores' ranged-read threshold %d", len(data), rangedMinRequests*store.DefaultRequestBytes)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.parquet"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := store.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := &Runner{St: &Stores{Source: s}}
	f := store.ObjectInfo{Key: "a.parquet", Size: int64(len(data))}
	need := arrow.NewSchema([]arrow.Field{sc.Field(0), sc.Field(2)}, nil)
	before, _ := store.CountRequests(s)
	sf, err := r.readColumns(ctx, f, spec.Parquet, need)
	if err != nil || sf == nil {
		t.Fatalf("readColumns: %v, %v", sf, err)
	}
	after, _ := store.CountRequests(s)
	if gets := after.Get - before.Get; gets < 2 || gets > 2+rangedFetches*4 {
		t.Fatalf("%d GETs for a footer and two columns of 4 row groups", gets)
	}
	if held := sf.Held(); held*5 > f.Size {
		t.Fatalf("held %d of %d bytes for two narrow columns of a file padded with 512-byte strings", held, f.Size)
	}
	opts := formats.DecodeOptions{Schema: need, EventTime: "ts"}
	got, err := formats.DecodeParquetAt(f.Key, sf, opts)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := formats.Decode("parquet", f.Key, data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != rows || whole.Rows != rows || text(got.Batches) != text(whole.Batches) {
		t.Fatalf("ranged decode: %d rows, whole: %d rows (or different values)", got.Rows, whole.Rows)
	}
	// Read whole: another format, a small file, all columns wanted.
	for name, c := range map[string]struct {
		f      store.ObjectInfo
		format spec.Format
		schema *arrow.Schema
	}{
		"jsonl":       {f, spec.JSONL, need},
		"small":       {store.ObjectInfo{Key: f.Key, Size: rangedMinRequests*store.LocalRequestBytes - 1}, spec.Parquet, need},
		"all columns": {f, spec.Parquet, sc},
	} {
		if sf, err := r.readColumns(ctx, c.f, c.format, c.schema); err != nil || sf != nil {
			t.Errorf("%s: readColumns = %v, %v; want nil (read whole)", name, sf, err)
		}
	}
}

func text(bs []arrow.RecordBatch) string {
	var out strings.Builder
	for _, b := range bs {
		for i := 0; i < int(b.NumRows()); i++ {
			for c := 0; c < int(b.NumCols()); c++ {
				fmt.Fprintf(&out, "%v|", b.Column(c).ValueStr(i))
			}
		}
	}
	return out.String()
}
