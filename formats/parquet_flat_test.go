package formats

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// flatTestBatch builds n rows of every column shape the flat reader takes:
// a timestamp, a repetitive string, a mostly distinct string (its
// dictionary overflows into plain pages), an int64, an int32 and a float64,
// with nulls every nullEvery rows (0: none) and a few values that are not
// valid UTF-8 or whose event time is null.
func flatTestBatch(n, nullEvery int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "t", Type: TimestampType, Nullable: true},
		{Name: "u", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "d", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	null := func(r, col int) bool { return nullEvery > 0 && (r+col)%nullEvery == 0 }
	for r := 0; r < n; r++ {
		if null(r, 0) || r%1009 == 3 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(r)*1234))
		}
		switch {
		case null(r, 1):
			b.Field(1).AppendNull()
		case r%997 == 7:
			b.Field(1).(*array.StringBuilder).BinaryBuilder.Append([]byte("bad\xff"))
		case r%13 == 0:
			b.Field(1).(*array.StringBuilder).Append("")
		default:
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("u%d", r%50))
		}
		if null(r, 2) {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("distinct-%d-%s", r, strings.Repeat("x", r%40)))
		}
		if null(r, 3) {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Int64Builder).Append(int64(r) * -7919)
		}
		if null(r, 4) {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.Int32Builder).Append(int32(r % 1000))
		}
		if null(r, 5) {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.Float64Builder).Append(float64(r) / 3)
		}
	}
	return b.NewRecordBatch()
}

// writeFlatTest writes rec with small pages, dictionaries on or off.
func writeFlatTest(t *testing.T, rec arrow.RecordBatch, rowGroup int64, dict bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rowGroup), parquet.WithDictionaryDefault(dict),
		parquet.WithDataPageSize(4096), parquet.WithDictionaryPageSizeLimit(16<<10), parquet.WithCompression(0))
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBuffered(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestParquetFlatEqualsGeneral: the flat column reader returns the rows and
// rejects of pqarrow's record reader, for required and nullable columns,
// dictionary and plain pages, several row groups and batch sizes that cut
// row groups and pages anywhere.
func TestParquetFlatEqualsGeneral(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"}, Field{"u", "string"}, Field{"d", "string"},
		Field{"i", "int64"}, Field{"i32", "int32"}, Field{"f", "float64"})
	for _, nullEvery := range []int{0, 5, 1} {
		rec := flatTestBatch(5000, nullEvery)
		for _, dict := range []bool{true, false} {
			for _, rg := range []int64{5000, 1777} {
				data := writeFlatTest(t, rec, rg, dict)
				for _, batch := range []int{64 << 10, 1000, 333} {
					name := fmt.Sprintf("nulls%d/dict=%v/rg%d/batch%d", nullEvery, dict, rg, batch)
					t.Run(name, func(t *testing.T) {
						opts := DecodeOptions{Schema: schema, EventTime: "t", BatchSize: batch}
						if nullEvery == 1 {
							opts.EventTime = "" // every value is null: keep the rows
						}
						if !flatApplies(t, data, schema) {
							t.Fatal("the flat reader does not take this file")
						}
						flat := decode(t, "parquet", string(data), opts)
						opts.generalParquet = true
						general := decode(t, "parquet", string(data), opts)
						if flat.Rows != general.Rows || flat.Rows == 0 {
							t.Fatalf("rows: flat %d, general %d", flat.Rows, general.Rows)
						}
						if !reflect.DeepEqual(rows(flat.Batches), rows(general.Batches)) {
							t.Fatal("flat and general readers return different rows")
						}
						if !reflect.DeepEqual(flat.Rejects, general.Rejects) || (nullEvery != 1 && len(flat.Rejects) == 0) {
							t.Fatalf("rejects: flat %v\ngeneral %v", flat.Rejects, general.Rejects)
						}
						for _, b := range flat.Batches {
							if !flat.Schema.Equal(b.Schema()) {
								t.Fatalf("batch schema %s, want %s", b.Schema(), flat.Schema)
							}
						}
					})
				}
			}
		}
		rec.Release()
	}
}

// flatApplies reports whether the flat reader takes every declared column
// of data.
func flatApplies(t *testing.T, data []byte, schema *arrow.Schema) bool {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	n := schema.NumFields()
	names, src, leaves, kinds, out := make([]string, n), make([]arrow.DataType, n), make([]int, n), make([]kind, n), make([]arrow.DataType, n)
	for i, f := range schema.Fields() {
		fi := fs.FieldIndices(f.Name)[0]
		k, err := fieldKind(f)
		if err != nil {
			t.Fatal(err)
		}
		names[i], src[i], leaves[i], kinds[i], out[i] = f.Name, fs.Field(fi).Type, fr.Manifest.Fields[fi].ColIndex, k, k.arrowType()
		if isDictString(f.Type) {
			out[i] = f.Type
		}
	}
	return flatColumns(pf, names, src, leaves, kinds, out) != nil
}

// FuzzParquetFlat: for any values, nulls, page and batch sizes, the flat
// column reader returns what pqarrow's record reader returns, and the
// string column declared as DictStringType decodes to the same rows.
func FuzzParquetFlat(f *testing.F) {
	f.Add([]byte("a\x00bb\x00\x00\xff\x00ccc"), uint16(2), true)
	f.Add([]byte(strings.Repeat("xyz\x00", 300)), uint16(7), false)
	schema := mustSchema(f, Field{"t", "timestamp"}, Field{"s", "string"}, Field{"i", "int64"},
		Field{"i32", "int32"}, Field{"f", "float64"})
	f.Fuzz(func(t *testing.T, data []byte, batch uint16, dict bool) {
		vals := bytes.Split(data, []byte{0})
		b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
			{Name: "t", Type: TimestampType, Nullable: true},
			{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
			{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		}, nil))
		defer b.Release()
		for r, v := range vals {
			h := len(v)*31 + r
			if h%5 == 0 {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(h) * 1_000_003))
			}
			if len(v) > 0 && v[0] == 'n' {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).BinaryBuilder.Append(v)
			}
			for c := 2; c < 5; c++ {
				if (h+c)%(c+1) == 0 {
					b.Field(c).AppendNull()
					continue
				}
				switch c {
				case 2:
					b.Field(c).(*array.Int64Builder).Append(int64(h) << 20)
				case 3:
					b.Field(c).(*array.Int32Builder).Append(int32(-h))
				case 4:
					b.Field(c).(*array.Float64Builder).Append(float64(h) / 7)
				}
			}
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		pq := writeFlatTest(t, rec, int64(len(vals)/2+1), dict)
		opts := DecodeOptions{Schema: schema, EventTime: "t", BatchSize: int(batch%500) + 1}
		flat := decode(t, "parquet", string(pq), opts)
		opts.generalParquet = true
		general := decode(t, "parquet", string(pq), opts)
		if !reflect.DeepEqual(rows(flat.Batches), rows(general.Batches)) {
			t.Fatal("flat and general readers return different rows")
		}
		if !reflect.DeepEqual(flat.Rejects, general.Rejects) {
			t.Fatalf("rejects: flat %v\ngeneral %v", flat.Rejects, general.Rejects)
		}
		// "s" declared as DictStringType: pages, record reader and
		// general reader all unpack to the plain decode.
		opts.generalParquet = false
		decodeBoth(t, pq, schema, opts, "s")
	})
}
