package expr

import (
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The expected values in this file are DuckDB's (v1.5, the one bench links),
// which bench/expr_test.go checks live.

var numSchema = arrow.NewSchema([]arrow.Field{
	{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "bytes", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
}, nil)

// numRows: a and b are the integer division cases, x and s conversion cases.
const numRows = `[
 {"a": 7,  "b": 2,  "x": 2.5,   "s": " 12 ",  "bytes": 99997},
 {"a": -7, "b": 2,  "x": -2.5,  "s": "-0",    "bytes": -1999},
 {"a": 7,  "b": -2, "x": 3.5,   "s": "1.5",   "bytes": 1000},
 {"a": -7, "b": -2, "x": -3.5,  "s": "abc",   "bytes": 999},
 {"a": 7,  "b": 0,  "x": 2.675, "s": "",      "bytes": 0},
 {"a": 0,  "b": 0,  "x": 1.005, "s": "010",   "bytes": -1000},
 {"a": 1,  "b": 3,  "x": -0.5,  "s": "+5",    "bytes": -999},
 {"a": -1, "b": 3,  "x": 1e19,  "s": "0x10",  "bytes": 2147483647},
 {"a": null, "b": 3, "x": null, "s": null,    "bytes": null}
]`

func numRecord(t testing.TB, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, numSchema, strings.NewReader(numRows))
	if err != nil {
		t.Fatalf("RecordFromJSON: %v", err)
	}
	return rec
}

func evalNum(t *testing.T, src string) (arrow.DataType, []any) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := numRecord(t, mem)
	defer rec.Release()
	e, err := Compile(src, numSchema)
	if err != nil {
		t.Fatalf("Compile(%s): %v", src, err)
	}
	arr, err := e.Eval(rec, mem)
	if err != nil {
		t.Fatalf("Eval(%s): %v", src, err)
	}
	defer arr.Release()
	return arr.DataType(), values(t, arr)
}

func TestIntegerDivision(t *testing.T) {
	I := func(v int64) any { return v }
	tests := []struct {
		src  string
		want []any
	}{
		// truncates toward zero, like DuckDB's // on integers: -7 // 2 = -3
		{"a // b", []any{I(3), I(-3), I(-3), I(3), nil, nil, I(0), I(0), nil}},
		{"a % b", []any{I(1), I(-1), I(1), I(-1), nil, nil, I(1), I(-1), nil}},
		// an int32 column computes as int64
		{"bytes // 1000", []any{I(99), I(-1), I(1), I(0), I(0), I(-1), I(0), I(2147483), nil}},
		// same precedence as * / %, left-associative: (a // b) * b + a % b == a
		{"a // b * b + a % b", []any{I(7), I(-7), I(7), I(-7), nil, nil, I(1), I(-1), nil}},
		{"1 + a // 2", []any{I(4), I(-2), I(4), I(-2), I(4), I(1), I(1), I(1), nil}},
		{"a //b", []any{I(3), I(-3), I(-3), I(3), nil, nil, I(0), I(0), nil}},
		// constants fold with the same rules
		{"-7 // 2", []any{I(-3), I(-3), I(-3), I(-3), I(-3), I(-3), I(-3), I(-3), I(-3)}},
		{"7 // 0", []any{nil, nil, nil, nil, nil, nil, nil, nil, nil}},
		// // inside a string is text
		{"s + '//' == '//'", []any{false, false, false, false, true, false, false, false, nil}},
	}
	for _, tt := range tests {
		dt, got := evalNum(t, tt.src)
		if !arrow.TypeEqual(dt, arrow.PrimitiveTypes.Int64) && !strings.Contains(tt.src, "==") {
			t.Errorf("%s: type %s, want int64", tt.src, dt)
		}
		if !equalValues(got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.src, got, tt.want)
		}
	}
}

// TestCommentsRefused: expr-lang's lexer skips // and /* */ comments; every
// comment-like syntax is refused at its position, none is ignored.
func TestCommentsRefused(t *testing.T) {
	tests := []struct{ src, want string }{
		{"bytes /* kilo */ + 1", `expression "bytes /* kilo */ + 1": /* is not allowed: expressions have no comments (// is integer division) (at 1:7)`},
		{"bytes\n/* x", "/* is not allowed: expressions have no comments (// is integer division) (at 2:1)"},
		{"bytes # kilo", "# is not allowed: expressions have no comments (at 1:7)"},
		{"bytes -- kilo", "-- is not allowed: it is not a comment (expressions have no comments) and would read as two minus signs; write a - (-b) or - -x (at 1:7)"},
		{"a -- 1", "-- is not allowed"}, // would be a + 1
		{"--a", "-- is not allowed: it is not a comment (expressions have no comments) and would read as two minus signs; write a - (-b) or - -x (at 1:1)"},
		{"'x' + s /* 'y' */", "(at 1:9)"},
		{"x // 2", "// (integer division) needs integers, got float64 and int64; divide with / and choose the rounding: trunc(a / b), floor(a / b), or cast(a, 'int64') // b (at 1:3)"},
		{"a ?? 1 // 2", "Operator (//) and coalesce expressions (??) cannot be mixed"},
		{"a = 1", `unexpected token Operator("="); compare with ==`},
	}
	for _, tt := range tests {
		_, err := Compile(tt.src, numSchema)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%q) = %v, want an error containing %q", tt.src, err, tt.want)
		}
	}
	// Inside string literals the same characters are text.
	for _, src := range []string{`s == "/* # -- //"`, `s == '\'/* #'`, "s == `-- //`", `s == "a\"#"`, "a - -b", "a - (-1)"} {
		if _, err := Compile(src, numSchema); err != nil {
			t.Errorf("Compile(%q): %v", src, err)
		}
	}
}

func TestIntegerOverflowIsNull(t *testing.T) {
	const max, min = math.MaxInt64, math.MinInt64
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewInt64Builder(mem)
	b.AppendValues([]int64{max, min, 1, -1, 0, 3037000500}, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	defer rec.Release()
	I := func(v int64) any { return v }
	tests := []struct {
		src  string
		want []any
	}{
		{"v + 1", []any{nil, I(min + 1), I(2), I(0), I(1), I(3037000501)}},
		{"v - 1", []any{I(max - 1), nil, I(0), I(-2), I(-1), I(3037000499)}},
		{"v * v", []any{nil, nil, I(1), I(1), I(0), nil}}, // 3037000500² > MaxInt64
		{"v * -1", []any{I(-max), nil, I(-1), I(1), I(0), I(-3037000500)}},
		{"-v", []any{I(-max), nil, I(-1), I(1), I(0), I(-3037000500)}},
		{"abs(v)", []any{I(max), nil, I(1), I(1), I(0), I(3037000500)}},
		{"v // -1", []any{I(-max), nil, I(-1), I(1), I(0), I(-3037000500)}},
		{"v % -1", []any{I(0), I(0), I(0), I(0), I(0), I(0)}},
		{"round(v, -1)", []any{nil, nil, I(0), I(0), I(0), I(3037000500)}},
		{"round(v, -19)", []any{I(0), I(0), I(0), I(0), I(0), I(0)}},
	}
	for _, tt := range tests {
		e, err := Compile(tt.src, schema)
		if err != nil {
			t.Fatalf("Compile(%s): %v", tt.src, err)
		}
		arr, err := e.Eval(rec, mem)
		if err != nil {
			t.Fatalf("Eval(%s): %v", tt.src, err)
		}
		if got := values(t, arr); !equalValues(got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.src, got, tt.want)
		}
		arr.Release()
	}
	// A seconds timestamp too far out for nanoseconds is null when widened
	// to compare with a nanosecond literal, not a wrapped time.
	tsSchema := arrow.NewSchema([]arrow.Field{{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Second}}}, nil)
	tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Second})
	tb.AppendValues([]arrow.Timestamp{0, 400 * 365 * 86400}, nil) // 1970, ~2370
	tcol := tb.NewArray()
	tb.Release()
	trec := array.NewRecordBatch(tsSchema, []arrow.Array{tcol}, 2)
	tcol.Release()
	defer trec.Release()
	e, err := Compile(`t > timestamp("2024-01-01T00:00:00.5Z")`, tsSchema)
	if err != nil {
		t.Fatal(err)
	}
	arr, err := e.Eval(trec, mem)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, arr); !equalValues(got, []any{false, nil}) {
		t.Errorf("seconds timestamp widened to ns: %v, want [false <nil>]", got)
	}
	arr.Release()
}

func TestRoundingAndCast(t *testing.T) {
	I := func(v int64) any { return v }
	tests := []struct {
		src  string
		typ  arrow.DataType
		want []any
	}{
		{"floor(x)", arrow.PrimitiveTypes.Float64, []any{2.0, -3.0, 3.0, -4.0, 2.0, 1.0, -1.0, 1e19, nil}},
		{"ceil(x)", arrow.PrimitiveTypes.Float64, []any{3.0, -2.0, 4.0, -3.0, 3.0, 2.0, -0.0, 1e19, nil}},
		{"trunc(x)", arrow.PrimitiveTypes.Float64, []any{2.0, -2.0, 3.0, -3.0, 2.0, 1.0, -0.0, 1e19, nil}},
		// round half away from zero; with digits as DuckDB computes it
		{"round(x)", arrow.PrimitiveTypes.Float64, []any{3.0, -3.0, 4.0, -4.0, 3.0, 1.0, -1.0, 1e19, nil}},
		{"round(x, 2)", arrow.PrimitiveTypes.Float64, []any{2.5, -2.5, 3.5, -3.5, 2.68, 1.0, -0.5, 1e19, nil}},
		{"round(x * 1000, -3)", arrow.PrimitiveTypes.Float64, []any{3000.0, -3000.0, 4000.0, -4000.0, 3000.0, 1000.0, -1000.0, 1e22, nil}},
		// on int64 they keep the exact int64
		{"floor(a)", arrow.PrimitiveTypes.Int64, []any{I(7), I(-7), I(7), I(-7), I(7), I(0), I(1), I(-1), nil}},
		{"round(bytes, -3)", arrow.PrimitiveTypes.Int64, []any{I(100000), I(-2000), I(1000), I(1000), I(0), I(-1000), I(-1000), I(2147484000), nil}},
		{"round(bytes, 2)", arrow.PrimitiveTypes.Int64, []any{I(99997), I(-1999), I(1000), I(999), I(0), I(-1000), I(-999), I(2147483647), nil}},
		// float to int64: nearest, ties to even (DuckDB's CAST); out of range is null
		{"cast(x, 'int64')", arrow.PrimitiveTypes.Int64, []any{I(2), I(-2), I(4), I(-4), I(3), I(1), I(0), nil, nil}},
		// string to int64: a decimal integer, spaces ignored; anything else is null
		{"cast(s, 'int64')", arrow.PrimitiveTypes.Int64, []any{I(12), I(0), nil, nil, nil, I(10), I(5), nil, nil}},
		{"cast(s, 'float64')", arrow.PrimitiveTypes.Float64, []any{12.0, -0.0, 1.5, nil, nil, 10.0, 5.0, nil, nil}},
		{"cast(x, 'string')", arrow.BinaryTypes.String, []any{"2.5", "-2.5", "3.5", "-3.5", "2.675", "1.005", "-0.5", "1e+19", nil}},
		{"cast(a, 'string') + '!'", arrow.BinaryTypes.String, []any{"7!", "-7!", "7!", "-7!", "7!", "0!", "1!", "-1!", nil}},
		{"cast(b, 'bool')", arrow.FixedWidthTypes.Boolean, []any{true, true, true, true, false, false, true, true, true}},
		{"cast(cast(a, 'float64') / 2, 'int64')", arrow.PrimitiveTypes.Int64, []any{I(4), I(-4), I(4), I(-4), I(4), I(0), I(0), I(0), nil}},
		{"cast(true, 'int64') + cast('t', 'int64')", arrow.PrimitiveTypes.Int64, []any{nil, nil, nil, nil, nil, nil, nil, nil, nil}},
		{"cast(nil, 'int64')", arrow.PrimitiveTypes.Int64, []any{nil, nil, nil, nil, nil, nil, nil, nil, nil}},
		{"cast('2024-01-02 03:04:05.5', 'timestamp')", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, []any{I(1704164645500000), I(1704164645500000), I(1704164645500000), I(1704164645500000), I(1704164645500000), I(1704164645500000), I(1704164645500000), I(1704164645500000), I(1704164645500000)}},
		{"cast(cast('2024-01-02T03:04:05.120Z', 'timestamp'), 'string')", arrow.BinaryTypes.String, []any{"2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12", "2024-01-02 03:04:05.12"}},
	}
	for _, tt := range tests {
		dt, got := evalNum(t, tt.src)
		if !arrow.TypeEqual(dt, tt.typ) {
			t.Errorf("%s: type %s, want %s", tt.src, dt, tt.typ)
		}
		if !equalValues(got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.src, got, tt.want)
		}
	}
	for _, tt := range []struct{ src, want string }{
		{"cast(a, 'bigint')", `cast() argument 2 (type): "bigint" is spelled "int64" here (one of int64, float64, string, bool, timestamp) (at 1:9)`},
		{"cast(a, 'int65')", `cast() argument 2 (type): "int65" is not one of int64, float64, string, bool, timestamp; did you mean "int64"?`},
		{"cast(a, s)", "cast() argument 2 (type) must be a constant string"},
		{"cast(a, 'timestamp')", "cast() cannot convert int64 to timestamp; only a string converts to a timestamp"},
		{"round(x, a)", "round() argument 2 (digits) must be a constant integer"},
		{"floor(s)", "floor() argument 1 (x) needs a number, got string"},
		{"int(x)", "int() is not supported; use cast(x, 'int64')"},
		{"string(a)", "string() is not supported; use cast(x, 'string')"},
	} {
		_, err := Compile(tt.src, numSchema)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%q) = %v, want an error containing %q", tt.src, err, tt.want)
		}
	}
}

func TestFormatFloat(t *testing.T) {
	for v, want := range map[float64]string{ // DuckDB's CAST(v AS VARCHAR)
		1: "1.0", 0.1: "0.1", 1e20: "1e+20", 1e-7: "1e-07", 123456789.125: "123456789.125",
		1e15: "1000000000000000.0", 1e16: "1e+16", 1e-4: "0.0001", 1e-5: "1e-05", 1.5e16: "1.5e+16",
		123e-10: "1.23e-08", -1.5: "-1.5", 1e100: "1e+100", 5e-324: "5e-324",
		math.MaxFloat64: "1.7976931348623157e+308", 9999999999999998: "9999999999999998.0",
		0.30000000000000004: "0.30000000000000004", 100: "100.0", 1.25e-4: "0.000125",
		math.Inf(1): "inf", math.Inf(-1): "-inf", math.Copysign(0, -1): "-0.0",
	} {
		if got := formatFloat(v); got != want {
			t.Errorf("formatFloat(%v) = %q, want %q", v, got, want)
		}
	}
	if got := formatFloat(math.NaN()); got != "nan" {
		t.Errorf("formatFloat(NaN) = %q", got)
	}
}

// TestSQLSpellingHints: SQL spellings that mean something else here, or
// nothing, are errors that say what to write.
func TestSQLSpellingHints(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"a <> 1", `unexpected token Operator(">"); not equal is != (at 1:4)`},
		{"s || 'x' == 'ax'", "|| is logical or (as in Go), not SQL's string concatenation: join strings with + or concat()"},
		{"a = 1", `compare with ==`},
		{"cast(a, 'varchar')", `"varchar" is spelled "string" here`},
		{"float(a)", "use cast(x, 'float64')"},
	} {
		_, err := Compile(tt.src, numSchema)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%q) = %v, want an error containing %q", tt.src, err, tt.want)
		}
	}
}

// TestBareCoalesceRefused: expr-lang's ?? binds tightest, so -a ?? 5 would
// be -(a ?? 5) (= -5 for a null a) where a C#, JavaScript or Kotlin reader
// expects (-a) ?? 5 (= 5); without parentheses it is refused.
func TestBareCoalesceRefused(t *testing.T) {
	for _, src := range []string{"-a ?? 5", "b * a ?? 0", "b // a ?? 1", "not (a > 1) ?? true", "s == s ?? 'x'", "a > 1 and a > 2 ?? true", "b + f(a) ?? 0"} {
		_, err := Compile(src, numSchema)
		if err == nil || !strings.Contains(err.Error(), "?? binds tighter than") {
			t.Errorf("Compile(%q) = %v, want a ?? precedence error", src, err)
		}
	}
	for _, src := range []string{"a ?? 5", "-(a ?? 5)", "(-a) ?? 5", "b * (a ?? 0)", "(b * a) ?? 0", "coalesce(a, 1) + (b ?? 0)", "a ?? b ?? 0", "a > 1 ? a ?? 0 : 1", "s + ('(' ?? s)"} {
		if _, err := Compile(src, numSchema); err != nil {
			t.Errorf("Compile(%q): %v", src, err)
		}
	}
	if _, got := evalNum(t, "(-a) ?? 5"); got[8] != int64(5) {
		t.Errorf("(-a) ?? 5 on a null a = %v, want 5", got[8])
	}
}

// TestBareNotRefused: expr-lang's not binds tighter than comparisons, so
// not flag == nil would be (not flag) == nil, true for a null flag, where a
// Python or SQL reader means not (flag == nil); without parentheses it is
// refused. ! keeps binding tight, as in C, Go and JavaScript.
func TestBareNotRefused(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}, {Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, src := range []string{"not flag == nil", "not flag in [true, false]", "not flag != true", "not flag == (a > 1)"} {
		_, err := Compile(src, schema)
		if err == nil || !strings.Contains(err.Error(), "binds tighter than") {
			t.Errorf("Compile(%q) = %v, want a not precedence error", src, err)
		}
	}
	for _, src := range []string{"not (flag == nil)", "(not flag) == nil", "a not in [1, 2]", "not flag", "not flag and a > 1", "flag == not (a > 1)", "not (a > 1)", "!flag == nil", "!(flag == nil) == true"} {
		if _, err := Compile(src, schema); err != nil {
			t.Errorf("Compile(%q): %v", src, err)
		}
	}
}
