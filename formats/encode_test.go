package formats

import (
	"math"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestEncodeJSONLExact(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"}, Field{"s", "string"}, Field{"n", "int64"}, Field{"f", "float64"}, Field{"b", "bool"})
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1705314600123456, 0}, []bool{true, false})
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"a\"\\\n\x01é<>\xff", ""}, nil)
	b.Field(2).(*array.Int64Builder).AppendValues([]int64{math.MinInt64, 0}, []bool{true, false})
	b.Field(3).(*array.Float64Builder).AppendValues([]float64{1e21, math.NaN()}, nil)
	b.Field(4).(*array.BooleanBuilder).AppendValues([]bool{true, false}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	got, err := EncodeJSONL(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"t":"2024-01-15T10:30:00.123456Z","s":"a\"\\\n\u0001é<>\ufffd","n":-9223372036854775808,"f":1e+21,"b":true}` + "\n" +
		`{"t":null,"s":"","n":null,"f":"NaN","b":false}` + "\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	d := allTypesBatch(t)
	data, err := EncodeJSONL(d.Schema, d.Batches)
	if err != nil {
		t.Fatal(err)
	}
	// Encoded timestamps are text, so read every timestamp column back as "timestamp".
	var fields []Field
	for _, f := range d.Schema.Fields() {
		typ, _ := FieldType(f)
		if f.Type.ID() == arrow.TIMESTAMP {
			typ = "timestamp"
		}
		fields = append(fields, Field{f.Name, typ})
	}
	back := decode(t, "jsonl", string(data), DecodeOptions{Schema: mustSchema(t, fields...), EventTime: "t"})
	if len(back.Rejects) != 0 {
		t.Fatalf("rejects: %+v", back.Rejects)
	}
	if got, want := rows(back.Batches), rows(d.Batches); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip\n got %v\nwant %v", got, want)
	}
}

func TestEncodeRejects(t *testing.T) {
	got, err := EncodeRejects([]Reject{
		{File: "a.jsonl", Line: 3, Reason: `column "n": cannot parse "x" as int64`, Raw: `{"n":"x"} <&>`},
		{File: "b.parquet", Line: 9, Reason: `event time column "t" is null`},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"file":"a.jsonl","line":3,"reason":"column \"n\": cannot parse \"x\" as int64","raw":"{\"n\":\"x\"} <&>"}` + "\n" +
		`{"file":"b.parquet","line":9,"reason":"event time column \"t\" is null","raw":""}` + "\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestEncodeSchemaMismatch(t *testing.T) {
	d := allTypesBatch(t)
	other := mustSchema(t, Field{"x", "string"})
	if _, err := EncodeJSONL(other, d.Batches); err == nil {
		t.Fatal("EncodeJSONL accepted batches of another schema")
	}
	if _, err := EncodeParquet(other, d.Batches, EncodeOptions{}); err == nil {
		t.Fatal("EncodeParquet accepted batches of another schema")
	}
}
