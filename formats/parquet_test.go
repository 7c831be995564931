package formats

import (
	"bytes"
	"fmt"
	"math/rand/v2"
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

// allTypesBatch decodes JSON lines covering every type and nulls.
func allTypesBatch(t *testing.T) *Decoded {
	schema := mustSchema(t, allTypesSchema(t)...)
	return decode(t, "jsonl", strings.Join([]string{
		`{"t":"2024-01-15T10:30:00.123456Z","s":"héllo","i":-9223372036854775808,"i32":-5,"f":2.5,"b":true,"ts":1,"tms":2,"tus":3}`,
		`{"t":"1969-07-20T20:17:40Z"}`,
		`{"t":"2262-04-11T23:47:16.854775Z","s":"","i":9223372036854775807,"i32":2147483647,"f":-0.001,"b":false,"tus":-1}`,
	}, "\n"), DecodeOptions{Schema: schema, EventTime: "t"})
}

func TestParquetRoundTrip(t *testing.T) {
	for _, codec := range []string{"zstd", "snappy", "none"} {
		t.Run(codec, func(t *testing.T) {
			d := allTypesBatch(t)
			data, err := EncodeParquet(d.Schema, d.Batches, EncodeOptions{Compression: codec})
			if err != nil {
				t.Fatal(err)
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			schema, batches, err := ReadParquet(data, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer releaseAll(batches)
			if !schema.Equal(d.Schema) {
				t.Fatalf("schema\n got %s\nwant %s", schema, d.Schema)
			}
			if got, want := rows(batches), rows(d.Batches); !reflect.DeepEqual(got, want) {
				t.Fatalf("rows\n got %v\nwant %v", got, want)
			}
			// Decode as an input file with the declared schema: same values.
			in := decode(t, "parquet", string(data), DecodeOptions{Schema: d.Schema, EventTime: "t"})
			if got, want := rows(in.Batches), rows(d.Batches); !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded rows\n got %v\nwant %v", got, want)
			}
		})
	}
	if _, err := EncodeParquet(mustSchema(t, Field{"a", "int64"}), nil, EncodeOptions{Compression: "lz5"}); err == nil {
		t.Fatal("unknown compression accepted")
	}
}

// foreignParquet writes batches with pqarrow directly (no stored Arrow
// schema), as other engines would.
func foreignParquet(t *testing.T, rec arrow.RecordBatch, rowGroup int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rowGroup))
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.DefaultWriterProps())
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

func TestDecodeParquetCasts(t *testing.T) {
	mem := memory.DefaultAllocator
	src := arrow.NewSchema([]arrow.Field{
		{Name: "et", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
		{Name: "ms", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "epoch", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "page", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "unused", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, src)
	defer b.Release()
	b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1_500_000_999, 0, 3_000_000_000}, []bool{true, false, true})
	b.Field(1).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1500, 0, 3000}, []bool{true, false, true})
	b.Field(2).(*array.Int32Builder).AppendValues([]int32{1, 2, 3}, nil)
	b.Field(3).(*array.Int64Builder).AppendValues([]int64{1700000000, 1, 2}, nil)
	db := b.Field(4).(*array.BinaryDictionaryBuilder)
	for _, s := range []string{"/a", "/b", "/a"} {
		if err := db.AppendString(s); err != nil {
			t.Fatal(err)
		}
	}
	b.Field(5).(*array.StringBuilder).AppendValues([]string{"x", "y", "z"}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	data := foreignParquet(t, rec, 2)

	declared := mustSchema(t, Field{"et", "timestamp"}, Field{"ms", "timestamp"}, Field{"n", "int64"}, Field{"epoch", "timestamp_s"}, Field{"page", "string"})
	d := decode(t, "parquet", string(data), DecodeOptions{Schema: declared, EventTime: "et", BatchSize: 2})
	want := [][]any{
		{ts("1970-01-01T00:00:01.500000Z"), ts("1970-01-01T00:00:01.5Z"), int64(1), ts("2023-11-14T22:13:20Z"), "/a"},
		{ts("1970-01-01T00:00:03Z"), ts("1970-01-01T00:00:03Z"), int64(3), ts("1970-01-01T00:00:02Z"), "/a"},
	}
	if got := rows(d.Batches); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %v\nwant %v", got, want)
	}
	if want := []Reject{{File: "in.parquet", Line: 2, Reason: `event time column "et" is null`}}; !reflect.DeepEqual(d.Rejects, want) {
		t.Fatalf("rejects = %+v", d.Rejects)
	}
	for _, f := range d.Schema.Fields() {
		if f.Type.ID() == arrow.TIMESTAMP && !arrow.TypeEqual(f.Type, TimestampType) {
			t.Fatalf("field %s has type %s", f.Name, f.Type)
		}
	}

	// Inferred schema: the file's columns, timestamps as us UTC.
	inf := decode(t, "parquet", string(data), DecodeOptions{})
	if inf.Rows != 3 || inf.Schema.NumFields() != 6 || !arrow.TypeEqual(inf.Schema.Field(1).Type, TimestampType) {
		t.Fatalf("inferred: rows=%d schema=%s", inf.Rows, inf.Schema)
	}
}

func TestDecodeParquetFileErrors(t *testing.T) {
	d := allTypesBatch(t)
	data, err := EncodeParquet(d.Schema, d.Batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		data   []byte
		schema *arrow.Schema
		want   []string
	}{
		{"not parquet", []byte(`{"a":1}`), d.Schema, []string{"s3/in/x.parquet", "not a readable Parquet file"}},
		{"truncated", data[:len(data)/2], d.Schema, []string{"s3/in/x.parquet", "Parquet"}},
		{"missing column", data, mustSchema(t, Field{"t", "timestamp"}, Field{"bytes", "int64"}), []string{"s3/in/x.parquet", `no column "bytes"`}},
		{"incompatible type", data, mustSchema(t, Field{"s", "int64"}), []string{"s3/in/x.parquet", `column "s"`, "incompatible"}},
		{"narrowing int", data, mustSchema(t, Field{"i", "int32"}), []string{`column "i"`, "incompatible"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("parquet", "s3/in/x.parquet", tt.data, DecodeOptions{Schema: tt.schema})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

// stateFile writes key_group 0..99 (10 rows each) in row groups of 100 rows,
// so row group g holds key groups 10g..10g+9.
func stateFile(t *testing.T) (*arrow.Schema, []byte) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
		{Name: "key", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < 1000; i++ {
		b.Field(0).(*array.Int32Builder).Append(int32(i / 10))
		b.Field(1).(*array.StringBuilder).Append("k" + strings.Repeat("x", i%7))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	data, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, EncodeOptions{RowGroupRows: 100, Compression: "none"})
	if err != nil {
		t.Fatal(err)
	}
	return schema, data
}

func TestReadParquetFilteredSkipsRowGroups(t *testing.T) {
	_, data := stateFile(t)
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRowGroups() != 10 {
		t.Fatalf("%d row groups, want 10", pf.NumRowGroups())
	}
	// Corrupt every row group except #3 (key groups 30..39) and #4 (40..49):
	// overwrite their column chunks with garbage.
	corrupt := bytes.Clone(data)
	for g := 0; g < 10; g++ {
		if g == 3 || g == 4 {
			continue
		}
		rg := pf.MetaData().RowGroup(g)
		for c := 0; c < rg.NumColumns(); c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
				start = cc.DictionaryPageOffset()
			}
			for i := start; i < start+cc.TotalCompressedSize(); i++ {
				corrupt[i] = 0xAB
			}
		}
	}
	pf.Close()
	if _, bs, err := ReadParquet(corrupt, nil); err == nil {
		releaseAll(bs)
		t.Fatal("the corruption is not detected by a plain read; the test proves nothing")
	}
	for _, tt := range []struct {
		lo, hi    int64
		wantFirst int64
		wantN     int
	}{
		{35, 45, 350, 100},
		{30, 50, 300, 200},
		{39, 40, 390, 10},
		{45, 45, 0, 0},
		{1000, 2000, 0, 0},
	} {
		_, batches, err := ReadParquetFiltered(corrupt, nil, "key_group", tt.lo, tt.hi)
		if err != nil {
			t.Fatalf("[%d,%d): %v", tt.lo, tt.hi, err)
		}
		var counts []int64
		for _, b := range batches {
			for i := 0; i < int(b.NumRows()); i++ {
				kg := int64(b.Column(0).(*array.Int32).Value(i))
				if kg < tt.lo || kg >= tt.hi {
					t.Fatalf("[%d,%d): got key_group %d", tt.lo, tt.hi, kg)
				}
				counts = append(counts, b.Column(2).(*array.Int64).Value(i))
			}
		}
		releaseAll(batches)
		if len(counts) != tt.wantN || (tt.wantN > 0 && counts[0] != tt.wantFirst) {
			t.Fatalf("[%d,%d): %d rows starting %v, want %d starting %d", tt.lo, tt.hi, len(counts), counts, tt.wantN, tt.wantFirst)
		}
	}
	// A range touching a corrupted row group must fail, not return silently.
	if _, bs, err := ReadParquetFiltered(corrupt, nil, "key_group", 0, 40); err == nil {
		releaseAll(bs)
		t.Fatal("read of a corrupted row group succeeded")
	}
	if _, _, err := ReadParquetFiltered(data, nil, "key", 0, 1); err == nil {
		t.Fatal("string filter column accepted")
	}
}

func TestEncodeParquetRowGroups(t *testing.T) {
	_, data := stateFile(t)
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	rg := pf.MetaData().RowGroup(2)
	cc, _ := rg.ColumnChunk(0)
	st, err := cc.Statistics()
	if err != nil || st == nil || !st.HasMinMax() {
		t.Fatalf("no statistics: %v", err)
	}
	if rg.NumRows() != 100 {
		t.Fatalf("row group rows = %d", rg.NumRows())
	}
}

// EncodeParquetPooled writes the bytes EncodeParquet writes; a result kept
// (not released) is not overwritten by later encodes, and a released
// buffer is reused for the next file whatever its size.
func TestEncodeParquetPooled(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	batch := func(n int, tag string) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i := range n {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s-%d", tag, i))
			b.Field(1).(*array.Int64Builder).Append(int64(i))
		}
		return b.NewRecordBatch()
	}
	opts := EncodeOptions{Compression: "snappy", RowGroupRows: 1000}
	var kept [][]byte
	var want [][]byte
	for i, n := range []int{5000, 10, 20000, 3, 7000} {
		rec := batch(n, fmt.Sprint("r", i))
		w, err := EncodeParquet(schema, []arrow.RecordBatch{rec}, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, release, err := EncodeParquetPooled(schema, []arrow.RecordBatch{rec}, opts)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("file %d: pooled encode differs from EncodeParquet (%d vs %d bytes)", i, len(got), len(w))
		}
		if i%2 == 0 {
			kept = append(kept, got) // never released: must stay intact
			want = append(want, w)
		} else {
			release()
			release() // twice is harmless
		}
	}
	for i := range kept {
		if !bytes.Equal(kept[i], want[i]) {
			t.Fatalf("kept file %d was overwritten by a later encode", i)
		}
	}
	if _, _, err := EncodeParquetPooled(nil, nil, opts); err == nil {
		t.Fatal("nil schema: no error")
	}
}

// TestEncodeRatioRemembered: a large file's encoded size per byte of its
// batches is remembered for its schema (incompressible strings: near 1, not
// the first guess of a quarter), a small file's is not, and a file of
// another schema starts at the first guess.
func TestEncodeRatioRemembered(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "payload", Type: arrow.BinaryTypes.String}}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	batch := func(n int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		buf := make([]byte, 64)
		for range n {
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			b.Field(0).(*array.StringBuilder).Append(string(buf))
		}
		return b.NewRecordBatch()
	}
	fp := schema.Fingerprint()
	encodeRatios.mu.Lock()
	delete(encodeRatios.m, fp) // from an earlier -count
	encodeRatios.mu.Unlock()
	if r := encodeRatios.get(fp); r != 0.25 {
		t.Fatalf("before any file: ratio %v, want the first guess 0.25", r)
	}
	encode := func(n int) {
		rec := batch(n)
		defer rec.Release()
		_, release, err := EncodeParquetPooled(schema, []arrow.RecordBatch{rec}, EncodeOptions{Compression: "snappy"})
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	encode(10)
	if r := encodeRatios.get(fp); r != 0.25 {
		t.Fatalf("after a small file: ratio %v, want 0.25 still", r)
	}
	encode(40000) // 2.7 MB of random bytes
	r := encodeRatios.get(fp)
	if r < 0.8 || r > 1.2 {
		t.Fatalf("after 2.7 MB of random strings: ratio %v, want about 1", r)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "other", Type: arrow.BinaryTypes.String}}, nil)
	if r := encodeRatios.get(other.Fingerprint()); r != 0.25 {
		t.Fatalf("another schema: ratio %v, want 0.25", r)
	}
}
