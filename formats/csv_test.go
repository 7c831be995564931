package formats

import (
	"reflect"

	"github.com/apache/arrow-go/v18/arrow"
	"strings"
	"testing"
)

func TestDecodeCSV(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"}, Field{"s", "string"}, Field{"n", "int64"}, Field{"b", "bool"}, Field{"f", "float64"})
	t0 := ts("2024-01-15T10:30:00Z")
	tests := []struct {
		name    string
		data    string
		opts    CSVOptions
		want    [][]any
		rejects []Reject
	}{
		{"header by name, extra column ignored", "n,extra,t,s,b,f\n5,zz,2024-01-15T10:30:00Z,x,true,2.5\n",
			CSVOptions{}, [][]any{{t0, "x", int64(5), true, 2.5}}, nil},
		{"quoting", "t,s,n,b,f\n2024-01-15T10:30:00Z,\"a,\"\"b\"\"\nc\",1,false,\n",
			CSVOptions{}, [][]any{{t0, "a,\"b\"\nc", int64(1), false, nil}}, nil},
		{"empty fields: null except strings", "t,s,n,b,f\n2024-01-15T10:30:00Z,,,,\n",
			CSVOptions{}, [][]any{{t0, "", nil, nil, nil}}, nil},
		{"CRLF and BOM", "\xEF\xBB\xBFt,s,n,b,f\r\n2024-01-15T10:30:00Z,x,1,true,1\r\n",
			CSVOptions{}, [][]any{{t0, "x", int64(1), true, 1.0}}, nil},
		{"no header, semicolon", "2024-01-15T10:30:00Z;x;1;true;1",
			CSVOptions{NoHeader: true, Delimiter: ';'}, [][]any{{t0, "x", int64(1), true, 1.0}}, nil},
		{"empty file", "", CSVOptions{}, nil, nil},
		{"header only", "t,s,n,b,f\n", CSVOptions{}, nil, nil},
		{"rejects keep other rows", strings.Join([]string{
			"t,s,n,b,f",
			"2024-01-15T10:30:00Z,ok,1,true,1",
			"2024-01-15T10:30:00Z,x,abc,true,1",
			"2024-01-15T10:30:00Z,x,1",
			",x,1,true,1",
			"nope,x,1,true,1",
			"2024-01-15T10:30:00Z,x,1,maybe,1",
			"2024-01-15T10:30:00Z,\"bad\"quote,1,true,1",
			"2024-01-15T10:30:00Z,ok2,2,false,2",
		}, "\n"), CSVOptions{},
			[][]any{{t0, "ok", int64(1), true, 1.0}, {t0, "ok2", int64(2), false, 2.0}},
			[]Reject{
				{"in.csv", 3, `column "n": cannot parse "abc" as int64`, "2024-01-15T10:30:00Z,x,abc,true,1"},
				{"in.csv", 4, "CSV record has 3 fields, want 5", "2024-01-15T10:30:00Z,x,1"},
				{"in.csv", 5, `event time column "t" is null`, ",x,1,true,1"},
				{"in.csv", 6, `column "t": cannot parse "nope" as timestamp`, "nope,x,1,true,1"},
				{"in.csv", 7, `column "b": cannot parse "maybe" as bool`, "2024-01-15T10:30:00Z,x,1,maybe,1"},
				{"in.csv", 8, `invalid CSV: extraneous or missing " in quoted-field`, `2024-01-15T10:30:00Z,"bad"quote,1,true,1`},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decode(t, "csv", tt.data, DecodeOptions{Schema: schema, EventTime: "t", CSV: tt.opts})
			if got := rows(d.Batches); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("rows\n got %v\nwant %v", got, tt.want)
			}
			if !reflect.DeepEqual(d.Rejects, tt.rejects) {
				t.Fatalf("rejects\n got %+v\nwant %+v", d.Rejects, tt.rejects)
			}
		})
	}
}

func TestDecodeCSVHeaderMissingColumn(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"}, Field{"bytes", "int64"})
	_, err := Decode("csv", "data/x.csv", []byte("t,other\n2024-01-15T10:30:00Z,1\n"), DecodeOptions{Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "data/x.csv") || !strings.Contains(err.Error(), `"bytes"`) {
		t.Fatalf("err = %v, want one naming the file and the column", err)
	}
}

func TestDecodeConfigErrors(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"}, Field{"s", "string"})
	for _, tt := range []struct {
		name, format string
		opts         DecodeOptions
		want         string
	}{
		{"unknown format", "xml", DecodeOptions{Schema: schema}, `unknown format "xml"`},
		{"no schema", "jsonl", DecodeOptions{}, "schema is required"},
		{"event time not declared", "jsonl", DecodeOptions{Schema: schema, EventTime: "x"}, `event time column "x" is not in the schema`},
		{"event time not timestamp", "csv", DecodeOptions{Schema: schema, EventTime: "s"}, "not a timestamp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.format, "f1", []byte("{}"), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "f1") {
				t.Fatalf("err = %v, want %q naming the file", err, tt.want)
			}
		})
	}
}

func TestSchemaFromFields(t *testing.T) {
	if _, err := SchemaFromFields([]Field{{"a", "int64"}, {"a", "string"}}); err == nil || !strings.Contains(err.Error(), `duplicate field "a"`) {
		t.Fatalf("duplicate: err = %v", err)
	}
	if _, err := SchemaFromFields([]Field{{"a", "decimal"}}); err == nil || !strings.Contains(err.Error(), `unknown type "decimal"`) {
		t.Fatalf("unknown type: err = %v", err)
	}
	s := mustSchema(t, Field{"a", "timestamp_ms"}, Field{"b", "int32"})
	if !arrow.TypeEqual(s.Field(0).Type, TimestampType) {
		t.Fatalf("field a type = %s", s.Field(0).Type)
	}
	for name, want := range map[string]string{"a": "timestamp_ms", "b": "int32"} {
		f, _ := s.FieldsByName(name)
		if got, err := FieldType(f[0]); err != nil || got != want {
			t.Fatalf("FieldType(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
}
