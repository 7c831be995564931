package formats

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func allTypesSchema(t testing.TB) []Field {
	return []Field{{"t", "timestamp"}, {"s", "string"}, {"i", "int64"}, {"i32", "int32"},
		{"f", "float64"}, {"b", "bool"}, {"ts", "timestamp_s"}, {"tms", "timestamp_ms"}, {"tus", "timestamp_us"}}
}

func TestDecodeJSONLValues(t *testing.T) {
	schema := mustSchema(t, allTypesSchema(t)...)
	t0 := ts("2024-01-15T10:30:00Z")
	tests := []struct {
		name string
		line string
		want []any
	}{
		{"all types", `{"t":"2024-01-15T10:30:00Z","s":"x","i":-42,"i32":7,"f":1.5,"b":true,"ts":1705314600,"tms":1705314600000,"tus":1705314600000000}`,
			[]any{t0, "x", int64(-42), int32(7), 1.5, true, t0, t0, t0}},
		{"missing fields are null, extra ignored", `{"t":"2024-01-15T10:30:00Z","extra":{"a":[1,{"b":"}"}]},"zz":null}`,
			[]any{t0, nil, nil, nil, nil, nil, nil, nil, nil}},
		{"explicit nulls", `{"t":"2024-01-15T10:30:00Z","s":null,"i":null,"b":null}`,
			[]any{t0, nil, nil, nil, nil, nil, nil, nil, nil}},
		{"escapes", `{"t":"2024-01-15T10:30:00Z","s":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00\u0041"}`,
			[]any{t0, "a\"b\\c/d\n\té😀A", nil, nil, nil, nil, nil, nil, nil}},
		{"non-ASCII and escaped pairs pass as they are", `{"t":"2024-01-15T10:30:00Z","s":"é\ud83d\ude00\uFFFD�"}`,
			[]any{t0, "é😀\uFFFD\uFFFD", nil, nil, nil, nil, nil, nil, nil}},
		{"key not valid UTF-8 names no column", "{\"t\":\"2024-01-15T10:30:00Z\",\"s\xff\":\"x\",\"\\ud800\":1,\"\\udc00s\":2}",
			[]any{t0, nil, nil, nil, nil, nil, nil, nil, nil}},
		{"unknown values are not checked", "{\"t\":\"2024-01-15T10:30:00Z\",\"x\":\"\xff\\ud800\",\"y\":[\"\xfe\"]}",
			[]any{t0, nil, nil, nil, nil, nil, nil, nil, nil}},
		{"escaped key", `{"\u0074":"2024-01-15T10:30:00Z","\u0073":"k"}`,
			[]any{t0, "k", nil, nil, nil, nil, nil, nil, nil}},
		{"integral forms", `{"t":"2024-01-15T10:30:00Z","i":1.0e3,"i32":"12"}`,
			[]any{t0, nil, int64(1000), int32(12), nil, nil, nil, nil, nil}},
		{"int64 extremes", `{"t":"2024-01-15T10:30:00Z","i":-9223372036854775808}`,
			[]any{t0, nil, int64(math.MinInt64), nil, nil, nil, nil, nil, nil}},
		{"number and bool into string", `{"t":"2024-01-15T10:30:00Z","s":1.50}`,
			[]any{t0, "1.50", nil, nil, nil, nil, nil, nil, nil}},
		{"timestamp forms", `{"t":"2024-01-15 11:30:00.123456789+01:00","ts":1705314600.5,"tms":"-1"}`,
			[]any{ts("2024-01-15T10:30:00.123456Z"), nil, nil, nil, nil, nil, ts("2024-01-15T10:30:00.5Z"), ts("1969-12-31T23:59:59.999Z"), nil}},
		{"no zone is UTC", `{"t":"2024-02-29T23:59:59.5"}`,
			[]any{ts("2024-02-29T23:59:59.5Z"), nil, nil, nil, nil, nil, nil, nil, nil}},
		{"duplicate key: last wins", `{"t":"2024-01-15T10:30:00Z","i":1,"i":2}`,
			[]any{t0, nil, int64(2), nil, nil, nil, nil, nil, nil}},
		{"whitespace everywhere", " \t{ \"t\" : \"2024-01-15T10:30:00Z\" , \"b\" : false } \t",
			[]any{t0, nil, nil, nil, nil, false, nil, nil, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decode(t, "jsonl", tt.line, DecodeOptions{Schema: schema, EventTime: "t"})
			if len(d.Rejects) > 0 {
				t.Fatalf("rejects: %+v", d.Rejects)
			}
			got := rows(d.Batches)
			if len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Fatalf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestDecodeJSONLRejects(t *testing.T) {
	schema := mustSchema(t, allTypesSchema(t)...)
	const ok = `"t":"2024-01-15T10:30:00Z"`
	tests := []struct {
		name, line, reason string
	}{
		{"bad json", `{"t":`, "invalid JSON: unexpected end of line, expected a value"},
		{"not an object", `[1,2]`, "invalid JSON at byte 1: expected a JSON object"},
		{"trailing garbage", `{` + ok + `} x`, "invalid JSON at byte 30: unexpected data after the object"},
		{"missing comma", `{` + ok + ` "i":1}`, "invalid JSON at byte 29: expected ',' or '}'"},
		{"bad escape", `{` + ok + `,"s":"\x"}`, "invalid JSON at byte 33: invalid string"},
		{"raw control char", "{" + ok + ",\"s\":\"a\tb\"}", "invalid JSON at byte 33: invalid string"},
		{"leading zero", `{` + ok + `,"i":01}`, "invalid JSON at byte 34: expected ',' or '}'"},
		{"single quotes", `{'t':1}`, "invalid JSON at byte 2: expected a string key"},
		{"trailing comma", `{` + ok + `,}`, "invalid JSON at byte 29: expected a string key"},
		{"bad nested unknown", `{` + ok + `,"x":[1,]}`, "invalid JSON at byte 36: invalid value"},
		{"missing event time", `{"s":"a"}`, `event time column "t" is missing`},
		{"null event time", `{"t":null}`, `event time column "t" is null`},
		{"unparsable event time", `{"t":"yesterday"}`, `column "t": cannot parse "yesterday" as timestamp`},
		{"invalid date", `{"t":"2023-02-29T00:00:00Z"}`, `column "t": cannot parse "2023-02-29T00:00:00Z" as timestamp`},
		{"number event time", `{"t":1705314600}`, `column "t": expected a timestamp string, got number 1705314600`},
		{"string for int64", `{` + ok + `,"i":"abc"}`, `column "i": cannot parse "abc" as int64`},
		{"fraction for int64", `{` + ok + `,"i":1.5}`, `column "i": 1.5 is not an integer`},
		{"int64 overflow", `{` + ok + `,"i":9223372036854775808}`, `column "i": 9223372036854775808 is out of range for int64`},
		{"int32 overflow", `{` + ok + `,"i32":2147483648}`, `column "i32": 2147483648 is out of range for int32`},
		{"float overflow", `{` + ok + `,"f":1e400}`, `column "f": cannot parse "1e400" as float64`},
		{"bool from number", `{` + ok + `,"b":1}`, `column "b": expected a boolean, got number 1`},
		{"object for string", `{` + ok + `,"s":{"a":1}}`, `column "s": expected a string, got object`},
		{"array for int", `{` + ok + `,"i":[1]}`, `column "i": expected a number, got array`},
		{"bool for int", `{` + ok + `,"i":true}`, `column "i": expected a number, got boolean`},
		{"bad epoch", `{` + ok + `,"ts":"1e9"}`, `column "ts": cannot parse "1e9" as timestamp_s`},
		{"string not valid UTF-8", `{` + ok + ",\"s\":\"u\xff1\"}", `column "s": value is not valid UTF-8: "u\xff1"`},
		{"truncated rune", `{` + ok + ",\"s\":\"\xc3\"}", `column "s": value is not valid UTF-8: "\xc3"`},
		{"lone high surrogate", `{` + ok + `,"s":"\ud800x"}`, `column "s": value is not valid UTF-8: "\\ud800x"`},
		{"lone low surrogate", `{` + ok + `,"s":"\uDC00"}`, `column "s": value is not valid UTF-8: "\\uDC00"`},
		{"two high surrogates", `{` + ok + `,"s":"\ud83d\ud83d"}`, `column "s": value is not valid UTF-8: "\\ud83d\\ud83d"`},
		{"escaped surrogate after a valid one", `{` + ok + `,"s":"\u00e9\ud800"}`, `column "s": value is not valid UTF-8: "\\u00e9\\ud800"`},
		{"bad bytes in an int column", `{` + ok + ",\"i\":\"1\xff\"}", `column "i": value is not valid UTF-8: "1\xff"`},
		{"bad event time bytes", "{\"t\":\"2024\xff\"}", `column "t": value is not valid UTF-8: "2024\xff"`},
		{"bad then good duplicate", `{` + ok + ",\"s\":\"\xff\",\"s\":\"ok\"}", `column "s": value is not valid UTF-8: "\xff"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A good row before and after: a reject never loses other rows.
			good := `{` + ok + `,"i":5}`
			d := decode(t, "jsonl", good+"\n"+tt.line+"\n"+good+"\n", DecodeOptions{Schema: schema, EventTime: "t"})
			if d.Rows != 2 || len(rows(d.Batches)) != 2 {
				t.Fatalf("rows = %d, want 2", d.Rows)
			}
			want := []Reject{{File: "in.jsonl", Line: 2, Reason: tt.reason, Raw: tt.line}}
			if !reflect.DeepEqual(d.Rejects, want) {
				t.Fatalf("rejects\n got %+v\nwant %+v", d.Rejects, want)
			}
		})
	}
}

func TestDecodeJSONLLines(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"}, Field{"n", "int64"})
	row := func(n string) string { return `{"t":"2024-01-01T00:00:00Z","n":` + n + `}` }
	huge := `{"t":"2024-01-01T00:00:00Z","n":3,"pad":"` + strings.Repeat("é", 3<<20) + `"}`
	tests := []struct {
		name       string
		data       string
		wantN      []any
		rejectLine []int64
	}{
		{"empty file", "", nil, nil},
		{"only blank lines", "\n\r\n  \n", nil, nil},
		{"CRLF", row("1") + "\r\n" + row("2") + "\r\n", []any{int64(1), int64(2)}, nil},
		{"BOM", "\xEF\xBB\xBF" + row("1") + "\n", []any{int64(1)}, nil},
		{"no final newline", row("1") + "\n" + row("2"), []any{int64(1), int64(2)}, nil},
		{"blank lines count", "\n" + row("1") + "\n\nbad\n" + row("2"), []any{int64(1), int64(2)}, []int64{4}},
		{"huge line", huge + "\n" + row("4"), []any{int64(3), int64(4)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decode(t, "jsonl", tt.data, DecodeOptions{Schema: schema, EventTime: "t"})
			var gotN []any
			for _, r := range rows(d.Batches) {
				gotN = append(gotN, r[1])
			}
			if !reflect.DeepEqual(gotN, tt.wantN) {
				t.Fatalf("n = %v, want %v", gotN, tt.wantN)
			}
			var lines []int64
			for _, r := range d.Rejects {
				lines = append(lines, r.Line)
			}
			if !reflect.DeepEqual(lines, tt.rejectLine) {
				t.Fatalf("reject lines = %v, want %v", lines, tt.rejectLine)
			}
		})
	}
}

func TestRejectRawTruncated(t *testing.T) {
	schema := mustSchema(t, Field{"t", "timestamp"})
	line := `{"t":"` + strings.Repeat("€", 1000) + `"}`
	d := decode(t, "jsonl", line, DecodeOptions{Schema: schema, EventTime: "t"})
	if len(d.Rejects) != 1 {
		t.Fatalf("rejects = %v", d.Rejects)
	}
	raw := d.Rejects[0].Raw
	if len(raw) > maxRawLen || len(raw) < maxRawLen-3 || !strings.HasPrefix(line, raw) {
		t.Fatalf("raw has %d bytes, want a <=1KiB prefix on a rune boundary", len(raw))
	}
	if !strings.Contains(d.Rejects[0].Reason, "...") {
		t.Fatalf("long value not clipped in reason: %q", d.Rejects[0].Reason)
	}
}

func TestDecodeBatchesAndParallelChunks(t *testing.T) {
	schema := clickSchema(t)
	lines := strings.SplitAfter(string(genClicks(20000)), "\n")
	lines[15000] = "garbage\n" // line 15001
	in := []byte(strings.Join(lines, ""))
	opts := DecodeOptions{Schema: schema, EventTime: "event_time", BatchSize: 4096, Parallelism: 1}
	serial := decode(t, "jsonl", string(in), opts)
	for _, b := range serial.Batches {
		if b.NumRows() > 4096 {
			t.Fatalf("batch of %d rows, BatchSize 4096", b.NumRows())
		}
	}
	if serial.Rows != 19999 || len(serial.Batches) != 5 {
		t.Fatalf("rows=%d batches=%d", serial.Rows, len(serial.Batches))
	}
	wantRejects := []Reject{{File: "in.jsonl", Line: 15001, Reason: "invalid JSON at byte 1: expected a JSON object", Raw: "garbage"}}
	if !reflect.DeepEqual(serial.Rejects, wantRejects) {
		t.Fatalf("rejects = %+v", serial.Rejects)
	}
	// Decode the same file as 5 concurrent chunks: same rows, order, rejects.
	opts.Mem = memory.DefaultAllocator
	p, err := newPlan("in.jsonl", opts)
	if err != nil {
		t.Fatal(err)
	}
	chunks, first := parallelChunks(in, 5, len(in)/6)
	if len(chunks) != 5 {
		t.Fatalf("%d chunks", len(chunks))
	}
	par := runChunks(p, chunks, first, jsonChunk)
	defer par.Release()
	if !reflect.DeepEqual(rows(par.Batches), rows(serial.Batches)) {
		t.Fatal("parallel decode differs from serial decode")
	}
	if !reflect.DeepEqual(par.Rejects, wantRejects) {
		t.Fatalf("parallel rejects = %+v", par.Rejects)
	}
}

// TestSpecialBytes: the eight-byte scan finds exactly the first byte the
// byte-wise table says is not plain, for every byte value at every position
// after plain bytes and before arbitrary ones.
func TestSpecialBytes(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for p := 0; p < 8; p++ {
		for c := 0; c < 256; c++ {
			for k := 0; k < 20; k++ {
				var w [8]byte
				for i := range w {
					switch {
					case i < p:
						w[i] = byte(0x20 + rnd.IntN(0x60))
						for !plainStr[w[i]] {
							w[i] = byte(0x20 + rnd.IntN(0x60))
						}
					case i == p:
						w[i] = byte(c)
					default:
						w[i] = byte(rnd.IntN(256))
					}
				}
				first := 8
				for i, x := range w {
					if !plainStr[x] {
						first = i
						break
					}
				}
				m := specialBytes(binary.LittleEndian.Uint64(w[:]))
				got := 8
				if m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != first {
					t.Fatalf("%q: first special byte at %d, scan says %d", w, first, got)
				}
			}
		}
	}
}

// TestJSONKeyMatching: keys are matched by their decoded value whichever
// way they are found (predicted column, a key skipped before, a full
// scan): escapes, names that need escaping, keys in any order, unknown keys
// that look like a declared key's prefix.
func TestJSONKeyMatching(t *testing.T) {
	schema := mustSchema(t, Field{`a"b`, "string"}, Field{"user", "string"}, Field{"n", "int64"})
	d := decode(t, "jsonl", strings.Join([]string{
		`{"a\"b":"1","user":"u1","n":1,"page":"p"}`,
		`{"a\"b":"2","us\u0065r":"u2","page":"p","n":2}`,
		`{"page":"p","n":3,"user":"u3","a\u0022b":"3"}`,
		`{"use":"x","userx":"y","user":"u4","page":{"user":"no"},"n":4}`,
		`{"a\"b":"5","page":"p","use":"x","n":5,"user":"u5"}`,
		`{"n":6,"n":7,"user":"u6"}`,
	}, "\n"), DecodeOptions{Schema: schema})
	want := [][]any{
		{"1", "u1", int64(1)},
		{"2", "u2", int64(2)},
		{"3", "u3", int64(3)},
		{nil, "u4", int64(4)},
		{"5", "u5", int64(5)},
		{nil, "u6", int64(7)},
	}
	if len(d.Rejects) != 0 {
		t.Fatalf("rejects %v", d.Rejects)
	}
	if got := rows(d.Batches); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %v\nwant %v", got, want)
	}
}
