package formats

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// dictSchema is schema with the named string fields declared as
// DictStringType.
func dictSchema(schema *arrow.Schema, names ...string) *arrow.Schema {
	fs := schema.Fields()
	for i := range fs {
		for _, n := range names {
			if fs[i].Name == n {
				fs[i].Type = DictStringType
			}
		}
	}
	md := schema.Metadata()
	return arrow.NewSchema(fs, &md)
}

// writeDictTest writes rec with small pages and the given dictionary page
// size limit (a small one makes dictionaries fall back to plain pages
// mid-chunk).
func writeDictTest(t testing.TB, rec arrow.RecordBatch, rowGroup int64, dict bool, dictLimit int64, more ...parquet.WriterProperty) []byte {
	t.Helper()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithMaxRowGroupLength(rowGroup), parquet.WithDictionaryDefault(dict),
		parquet.WithDataPageSize(2048), parquet.WithDictionaryPageSizeLimit(dictLimit), parquet.WithCompression(0)}, more...)...)
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

// checkDictBatches fails unless the named columns of every batch are
// DictStringType arrays whose valid rows index inside their dictionary,
// and every batch has the decoded schema.
func checkDictBatches(t testing.TB, d *Decoded, names ...string) {
	t.Helper()
	for _, b := range d.Batches {
		if !d.Schema.Equal(b.Schema()) {
			t.Fatalf("batch schema %s, want %s", b.Schema(), d.Schema)
		}
		for _, n := range names {
			c := b.Column(b.Schema().FieldIndices(n)[0])
			da, ok := c.(*array.Dictionary)
			if !ok || !isDictString(c.DataType()) {
				t.Fatalf("column %q is %s, want %s", n, c.DataType(), DictStringType)
			}
			idx := da.Indices().(*array.Int32)
			for j := 0; j < da.Len(); j++ {
				if da.IsValid(j) && (idx.Value(j) < 0 || int(idx.Value(j)) >= da.Dictionary().Len()) {
					t.Fatalf("column %q row %d: index %d outside a dictionary of %d", n, j, idx.Value(j), da.Dictionary().Len())
				}
			}
		}
	}
}

// unpackedRows is rows with dictionary columns unpacked.
func unpackedRows(t testing.TB, bs []arrow.RecordBatch) [][]any {
	t.Helper()
	var plain []arrow.RecordBatch
	for _, b := range bs {
		cols := make([]arrow.Array, b.NumCols())
		fs := make([]arrow.Field, b.NumCols())
		for i, c := range b.Columns() {
			if d, ok := c.(*array.Dictionary); ok {
				u, err := compute.CastArray(context.Background(), d, compute.SafeCastOptions(d.Dictionary().DataType()))
				if err != nil {
					t.Fatal(err)
				}
				defer u.Release()
				c = u
			}
			cols[i] = c
			fs[i] = arrow.Field{Name: b.Schema().Field(i).Name, Type: c.DataType(), Nullable: true}
		}
		plain = append(plain, array.NewRecordBatch(arrow.NewSchema(fs, nil), cols, b.NumRows()))
	}
	defer releaseAll(plain)
	return rows(plain)
}

// decodeBoth decodes data with schema as declared and with names as
// DictStringType, by Decode and by DecodeStream, and fails unless the
// dictionary decodes unpack to the plain decode's rows and have its
// rejects.
func decodeBoth(t testing.TB, data []byte, schema *arrow.Schema, opts DecodeOptions, names ...string) *Decoded {
	t.Helper()
	opts.Schema = schema
	plain := decode(t, "parquet", string(data), opts)
	want := rows(plain.Batches)
	opts.Schema = dictSchema(schema, names...)
	for _, mode := range []string{"pages", "record", "general"} {
		general := mode
		opts.generalParquet = mode == "general"
		opts.recordDictParquet = mode == "record"
		got := decode(t, "parquet", string(data), opts)
		checkDictBatches(t, got, names...)
		if got.Rows != plain.Rows || !reflect.DeepEqual(unpackedRows(t, got.Batches), want) {
			t.Fatalf("%s: dictionary decode differs from the plain decode (%d vs %d rows)", general, got.Rows, plain.Rows)
		}
		if !reflect.DeepEqual(got.Rejects, plain.Rejects) {
			t.Fatalf("%s: rejects %v\nplain %v", general, got.Rejects, plain.Rejects)
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		sopts := opts
		sopts.Mem = mem
		var streamed []arrow.RecordBatch
		sd, err := DecodeStream("parquet", "in.parquet", data, sopts, func(b arrow.RecordBatch) error {
			streamed = append(streamed, b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sd.Batches = streamed
		sd.Schema = got.Schema
		checkDictBatches(t, sd, names...)
		if sd.Rows != plain.Rows || !reflect.DeepEqual(unpackedRows(t, streamed), want) || !reflect.DeepEqual(sd.Rejects, plain.Rejects) {
			t.Fatalf("%s: DecodeStream differs from the plain decode", general)
		}
		releaseAll(streamed)
		mem.AssertSize(t, 0)
	}
	return plain
}

// TestParquetDictEqualsPlain: string columns declared as DictStringType
// decode, unpacked, to the plain decode's rows and rejects (invalid UTF-8
// in a dictionary value, null event times), for dictionary and plain
// pages, dictionaries that fall back to plain pages mid-chunk, several row
// groups, nulls and odd batch sizes.
func TestParquetDictEqualsPlain(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"}, Field{"u", "string"}, Field{"d", "string"},
		Field{"i", "int64"}, Field{"i32", "int32"}, Field{"f", "float64"})
	for _, nullEvery := range []int{0, 5, 1} {
		rec := flatTestBatch(5000, nullEvery)
		for _, dict := range []bool{true, false} {
			for _, limit := range []int64{1 << 20, 1024} {
				for _, rg := range []int64{5000, 1777} {
					version := parquet.DataPageV1
					if rg == 1777 { // the odd row groups in version 2 pages
						version = parquet.DataPageV2
					}
					data := writeDictTest(t, rec, rg, dict, limit, parquet.WithDataPageVersion(version))
					for _, batch := range []int{64 << 10, 1000, 333} {
						t.Run(fmt.Sprintf("nulls%d/dict=%v/limit%d/rg%d/v%d/batch%d", nullEvery, dict, limit, rg, version+1, batch), func(t *testing.T) {
							opts := DecodeOptions{EventTime: "t", BatchSize: batch}
							if nullEvery == 1 {
								opts.EventTime = ""
							}
							if !flatApplies(t, data, dictSchema(schema, "u", "d")) {
								t.Fatal("the flat reader does not take this file")
							}
							plain := decodeBoth(t, data, schema, opts, "u", "d")
							if plain.Rows == 0 || (nullEvery != 1 && len(plain.Rejects) == 0) {
								t.Fatalf("%d rows, %d rejects: the test data lost its point", plain.Rows, len(plain.Rejects))
							}
						})
					}
				}
			}
		}
		rec.Release()
	}
}

// TestParquetDictBadUTF8: a row whose dictionary value is not valid UTF-8
// is rejected with the plain decode's reason, whichever column it is in.
func TestParquetDictBadUTF8(t *testing.T) {
	for _, nullable := range []bool{true, false} {
		for _, v2 := range []bool{false, true} {
			t.Run(fmt.Sprintf("nullable=%v/v2=%v", nullable, v2), func(t *testing.T) { testParquetDictBadUTF8(t, nullable, v2) })
		}
	}
}

func testParquetDictBadUTF8(t *testing.T, nullable, v2 bool) {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.BinaryTypes.String, Nullable: nullable},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	for r := 0; r < 100; r++ {
		if r%10 == 4 {
			b.Field(0).(*array.StringBuilder).BinaryBuilder.Append([]byte("k\xc3"))
		} else {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprint("k", r%7))
		}
		b.Field(1).(*array.Int64Builder).Append(int64(r))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	version := parquet.DataPageV1
	if v2 {
		version = parquet.DataPageV2
	}
	data := writeDictTest(t, rec, 64, true, 1<<20, parquet.WithDataPageVersion(version))
	schema := mustSchema(t, Field{"k", "string"}, Field{"v", "int64"})
	plain := decodeBoth(t, data, schema, DecodeOptions{BatchSize: 17}, "k")
	if plain.Rows != 90 || len(plain.Rejects) != 10 {
		t.Fatalf("%d rows, %d rejects, want 90 and 10", plain.Rows, len(plain.Rejects))
	}
	want := Reject{File: "in.parquet", Line: 5, Reason: `column "k": value is not valid UTF-8: "k\xc3"`}
	if plain.Rejects[0] != want {
		t.Fatalf("reject %+v, want %+v", plain.Rejects[0], want)
	}
}

// TestParquetDictStoredTypes: a file column stored as another Arrow string
// shape (a dictionary with int8 indices, large_string) still comes out as
// DictStringType.
func TestParquetDictStoredTypes(t *testing.T) {
	mem := memory.DefaultAllocator
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "d8", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, sch)
	for r := 0; r < 300; r++ {
		if r%11 == 0 {
			b.Field(0).AppendNull()
			b.Field(1).AppendNull()
			continue
		}
		if err := b.Field(0).(*array.BinaryDictionaryBuilder).AppendString(fmt.Sprint("x", r%9)); err != nil {
			t.Fatal(err)
		}
		b.Field(1).(*array.LargeStringBuilder).Append(strings.Repeat("y", r%5))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	for _, dict := range []bool{true, false} {
		data := writeDictTest(t, rec, 100, dict, 1<<20)
		plain := decodeBoth(t, data, mustSchema(t, Field{"d8", "string"}, Field{"ls", "string"}), DecodeOptions{BatchSize: 77}, "d8", "ls")
		if plain.Rows != 300 {
			t.Fatalf("%d rows, want 300", plain.Rows)
		}
	}
}

// TestDictSchemaErrors: dictionaries other than DictStringType, a
// dictionary declared as another floe type, and DictStringType fields for
// JSON lines or CSV are errors naming the field.
func TestDictSchemaErrors(t *testing.T) {
	bad := []arrow.Field{
		{Name: "a", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}},
		{Name: "a", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Int64}},
		{Name: "a", Type: DictStringType, Metadata: arrow.NewMetadata([]string{TypeMetadataKey}, []string{"int64"})},
	}
	for _, f := range bad {
		if _, err := fieldKind(f); err == nil || !strings.Contains(err.Error(), `"a"`) {
			t.Errorf("fieldKind(%s): error %v", f.Type, err)
		}
	}
	if k, err := fieldKind(arrow.Field{Name: "a", Type: DictStringType}); err != nil || k != kString {
		t.Fatalf("fieldKind(DictStringType) = %v, %v", k, err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "user", Type: DictStringType, Nullable: true}}, nil)
	for _, format := range []string{"jsonl", "csv"} {
		_, err := Decode(format, "in."+format, []byte("{\"user\":\"x\"}\n"), DecodeOptions{Schema: schema})
		if err == nil || !strings.Contains(err.Error(), `"user"`) || !strings.Contains(err.Error(), "Parquet only") {
			t.Errorf("%s: error %v", format, err)
		}
		_, err = DecodeStream(format, "in."+format, []byte("user\nx\n"), DecodeOptions{Schema: schema}, func(b arrow.RecordBatch) error {
			b.Release()
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "Parquet only") {
			t.Errorf("%s stream: error %v", format, err)
		}
	}
}

// BenchmarkDecodeParquetDict: decoding user_id (10k distinct keys,
// dictionary pages) as plain strings versus as DictStringType, with all
// four columns of genClicks declared ("all") or only user_id ("key"); the
// "fb" cases read a file of the benchmark data set when it is present.
func BenchmarkDecodeParquetDict(b *testing.B) {
	d, err := Decode("jsonl", "gen.jsonl", genClicks(benchRows), DecodeOptions{Schema: clickSchema(b)})
	if err != nil {
		b.Fatal(err)
	}
	gen, err := EncodeParquet(d.Schema, d.Batches, EncodeOptions{Compression: "snappy"})
	d.Release()
	if err != nil {
		b.Fatal(err)
	}
	files := map[string][]byte{"gen": gen}
	if fb, err := os.ReadFile("/tmp/fb-data/10000000-100-10000/parquet/events-00000.parquet"); err == nil {
		files["fb"] = fb
	}
	all := mustSchema(b, Field{"event_time", "timestamp"}, Field{"user_id", "string"}, Field{"page", "string"}, Field{"bytes", "int64"})
	key := mustSchema(b, Field{"user_id", "string"})
	for _, src := range []string{"gen", "fb"} {
		data := files[src]
		for _, cols := range []string{"all", "key"} {
			schema := map[string]*arrow.Schema{"all": all, "key": key}[cols]
			for _, mode := range []string{"plain-flat", "plain-general", "dict"} {
				b.Run(src+"/"+cols+"/"+mode, func(b *testing.B) {
					if data == nil {
						b.Skip("no benchmark data file")
					}
					opts := DecodeOptions{Schema: schema, Mem: memory.NewGoAllocator(), generalParquet: mode == "plain-general"}
					if mode == "dict" {
						opts.Schema = dictSchema(schema, "user_id")
					}
					pd, err := Decode("parquet", "bench.parquet", data, opts)
					if err != nil {
						b.Fatal(err)
					}
					n := pd.Rows
					pd.Release()
					b.SetBytes(int64(len(data)))
					b.ReportAllocs()
					b.ResetTimer()
					cpu0 := cpuTime()
					for i := 0; i < b.N; i++ {
						d, err := Decode("parquet", "bench.parquet", data, opts)
						if err != nil || d.Rows != n {
							b.Fatal(err)
						}
						d.Release()
					}
					reportRows(b, int(n), cpu0)
				})
			}
		}
	}
}

// TestParquetDictPagesTaken: the encoding statistics of files floe writes
// let the flat reader read dictionary-encoded chunks straight from their
// pages, and a chunk whose dictionary fell back to plain pages is not
// read that way.
func TestParquetDictPagesTaken(t *testing.T) {
	rec := flatTestBatch(5000, 5)
	defer rec.Release()
	for _, c := range []struct {
		limit int64
		col   int
		want  bool
	}{{1 << 20, 1, true}, {1 << 20, 2, true}, {1024, 1, true}, {1024, 2, false}} {
		data := writeDictTest(t, rec, 5000, true, c.limit)
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		cc, err := pf.MetaData().RowGroup(0).ColumnChunk(c.col)
		if err != nil {
			t.Fatal(err)
		}
		if got := allDictPages(cc); got != c.want {
			t.Errorf("limit %d column %d: allDictPages %v, want %v (stats %v)", c.limit, c.col, got, c.want, cc.EncodingStats())
		}
		pf.Close()
	}
	data := writeDictTest(t, rec, 5000, false, 1<<20)
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	cc, _ := pf.MetaData().RowGroup(0).ColumnChunk(1)
	if allDictPages(cc) {
		t.Error("allDictPages of a chunk without a dictionary")
	}
}

// TestDecodeHybrid: RLE runs, bit-packed groups of every width and a last
// group cut short decode to their values; truncated input is an error.
func TestDecodeHybrid(t *testing.T) {
	for bw := 1; bw <= 32; bw++ {
		want := make([]int32, 0, 40)
		var b []byte
		// a run of 5 copies of the largest value
		maxv := uint64(1)<<bw - 1
		b = binary.AppendUvarint(b, 5<<1)
		for j := 0; j < (bw+7)/8; j++ {
			b = append(b, byte(maxv>>(8*j)))
		}
		for range 5 {
			want = append(want, int32(uint32(maxv)))
		}
		// 2 groups of 8 bit-packed values, 13 of them used
		vals := make([]uint64, 16)
		for j := range vals {
			vals[j] = (uint64(j)*0x9E3779B97F4A7C15 + uint64(bw)) & maxv
		}
		b = binary.AppendUvarint(b, 2<<1|1)
		packed := make([]byte, 2*bw)
		for j, v := range vals {
			for q := 0; q < bw; q++ {
				if v>>q&1 == 1 {
					p := j*bw + q
					packed[p/8] |= 1 << (p % 8)
				}
			}
		}
		b = append(b, packed...)
		for _, v := range vals[:13] {
			want = append(want, int32(uint32(v)))
		}
		got := make([]int32, len(want))
		if err := decodeHybrid(b, bw, got); err != nil {
			t.Fatalf("bit width %d: %v", bw, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("bit width %d: got %v, want %v", bw, got, want)
		}
		if err := decodeHybrid(b[:3], bw, make([]int32, len(want))); err == nil {
			t.Fatalf("bit width %d: truncated input accepted", bw)
		}
	}
}

// TestCorruptParquetDict: flipped bytes of a file with dictionary-encoded
// strings, decoded as DictStringType, are an error naming the file or
// batches whose indices lie inside their dictionaries.
func TestCorruptParquetDict(t *testing.T) {
	rec := flatTestBatch(300, 4)
	defer rec.Release()
	data := writeDictTest(t, rec, 128, true, 1<<20)
	schema := dictSchema(mustSchema(t, Field{"t", "timestamp"}, Field{"u", "string"}, Field{"d", "string"}), "u", "d")
	errs, t0 := 0, time.Now()
	for i := 0; i < len(data) && time.Since(t0) < 15*time.Second; i++ {
		d := append([]byte(nil), data...)
		d[i] ^= 0x5a
		for _, mode := range []string{"pages", "record", "general"} {
			opts := DecodeOptions{Schema: schema, BatchSize: 50, generalParquet: mode == "general", recordDictParquet: mode == "record"}
			dec, err := Decode("parquet", "c.parquet", d, opts)
			if err != nil {
				errs++
				if !strings.HasPrefix(err.Error(), "c.parquet: ") {
					t.Fatalf("error does not name the file: %v", err)
				}
				continue
			}
			t.Run(fmt.Sprintf("flip%d/%s", i, mode), func(t *testing.T) { checkDictBatches(t, dec, "u", "d") })
			dec.Release()
		}
	}
	if errs == 0 {
		t.Fatal("no flip was refused: the test exercises nothing")
	}
}
