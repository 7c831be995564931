package expr

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// testSchema covers every evaluation type; testRows has nulls in every column.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "j", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Second}, Nullable: true},
	{Name: "odd name", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
}, nil)

const testRows = `[
 {"i": 1,    "j": 10, "f": 1.5,  "s": "home",   "b": true,  "ts": "2024-01-01T00:00:00", "odd name": 5, "tags": ["a"]},
 {"i": null, "j": 20, "f": -2.0, "s": "Shop",   "b": false, "ts": "2024-01-01T00:01:00", "odd name": 6, "tags": []},
 {"i": 3,    "j": 0,  "f": null, "s": null,     "b": null,  "ts": null,                  "odd name": 7, "tags": null},
 {"i": -4,   "j": -3, "f": 0.0,  "s": "home/x", "b": true,  "ts": "2024-01-02T00:00:00", "odd name": 8, "tags": ["b", "c"]},
 {"i": 0,    "j": 7,  "f": 2.5,  "s": "",       "b": false, "ts": "2023-12-31T23:59:59", "odd name": 9, "tags": ["d"]}
]`

func testRecord(t testing.TB, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, testSchema, strings.NewReader(testRows))
	if err != nil {
		t.Fatalf("RecordFromJSON: %v", err)
	}
	return rec
}

// values returns the rows of arr as Go values: nil for null, int64, float64,
// string or bool; timestamps as int64.
func values(t testing.TB, arr arrow.Array) []any {
	t.Helper()
	out := make([]any, arr.Len())
	for i := range out {
		if arr.IsNull(i) {
			continue
		}
		switch a := arr.(type) {
		case *array.Int64:
			out[i] = a.Value(i)
		case *array.Int32:
			out[i] = int64(a.Value(i))
		case *array.Float64:
			out[i] = a.Value(i)
		case *array.String:
			out[i] = a.Value(i)
		case *array.Boolean:
			out[i] = a.Value(i)
		case *array.Timestamp:
			out[i] = int64(a.Value(i))
		default:
			t.Fatalf("values: unexpected array type %s", arr.DataType())
		}
	}
	return out
}

func equalValues(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, xok := a[i].(float64)
		y, yok := b[i].(float64)
		if xok && yok {
			if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
				return false
			}
			continue
		}
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

const (
	jan1   = int64(1704067200) // 2024-01-01T00:00:00Z in seconds
	minute = int64(60)
	day    = int64(86400)
)

func TestEval(t *testing.T) {
	T, F := true, false
	tests := []struct {
		src  string
		typ  arrow.DataType
		want []any
	}{
		// arithmetic
		{"i + j", arrow.PrimitiveTypes.Int64, []any{int64(11), nil, int64(3), int64(-7), int64(7)}},
		{"i * 2 - 1", arrow.PrimitiveTypes.Int64, []any{int64(1), nil, int64(5), int64(-9), int64(-1)}},
		{"i / 2", arrow.PrimitiveTypes.Float64, []any{0.5, nil, 1.5, -2.0, 0.0}},
		{"j / i", arrow.PrimitiveTypes.Float64, []any{10.0, nil, 0.0, 0.75, nil}},
		{"j % i", arrow.PrimitiveTypes.Int64, []any{int64(0), nil, int64(0), int64(-3), nil}},
		{"f / 0", arrow.PrimitiveTypes.Float64, []any{nil, nil, nil, nil, nil}},
		{"i + f", arrow.PrimitiveTypes.Float64, []any{2.5, nil, nil, -4.0, 2.5}},
		{"-i", arrow.PrimitiveTypes.Int64, []any{int64(-1), nil, int64(-3), int64(4), int64(0)}},
		{"+f", arrow.PrimitiveTypes.Float64, []any{1.5, -2.0, nil, 0.0, 2.5}},
		{"abs(i)", arrow.PrimitiveTypes.Int64, []any{int64(1), nil, int64(3), int64(4), int64(0)}},
		{"abs(f)", arrow.PrimitiveTypes.Float64, []any{1.5, 2.0, nil, 0.0, 2.5}},
		{"i + nil", arrow.PrimitiveTypes.Int64, []any{nil, nil, nil, nil, nil}},
		{`$env["odd name"] * 10`, arrow.PrimitiveTypes.Int64, []any{int64(50), int64(60), int64(70), int64(80), int64(90)}},
		// constant folding broadcasts
		{"1 + 2 * 3", arrow.PrimitiveTypes.Int64, []any{int64(7), int64(7), int64(7), int64(7), int64(7)}},
		{"10 / 0", arrow.PrimitiveTypes.Float64, []any{nil, nil, nil, nil, nil}},
		{"len('héllo')", arrow.PrimitiveTypes.Int64, []any{int64(5), int64(5), int64(5), int64(5), int64(5)}},
		{"nil", arrow.Null, []any{nil, nil, nil, nil, nil}},
		// comparisons
		{"i > 0", arrow.FixedWidthTypes.Boolean, []any{T, nil, T, F, F}},
		{"f >= 1.5", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, F, T}},
		{"i < f", arrow.FixedWidthTypes.Boolean, []any{T, nil, nil, T, T}},
		{"0 < i", arrow.FixedWidthTypes.Boolean, []any{T, nil, T, F, F}},
		{"j == i * 10", arrow.FixedWidthTypes.Boolean, []any{T, nil, F, F, F}},
		{"s == 'home'", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, F, F}},
		{"s < 'b'", arrow.FixedWidthTypes.Boolean, []any{F, T, nil, F, T}},
		{"b == true", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, T, F}},
		{"b != false", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, T, F}},
		{"i == nil", arrow.FixedWidthTypes.Boolean, []any{F, T, F, F, F}},
		{"nil != s", arrow.FixedWidthTypes.Boolean, []any{T, T, F, T, T}},
		{"is_null(b)", arrow.FixedWidthTypes.Boolean, []any{F, F, T, F, F}},
		{"ts > timestamp('2024-01-01T00:00:00Z')", arrow.FixedWidthTypes.Boolean, []any{F, T, nil, T, F}},
		{"ts > timestamp('2024-01-01T00:00:00.5Z')", arrow.FixedWidthTypes.Boolean, []any{F, T, nil, T, F}},
		{"ts >= '2024-01-01'", arrow.FixedWidthTypes.Boolean, []any{T, T, nil, T, F}},
		{"ts in ['2024-01-02T00:00:00Z', nil]", arrow.FixedWidthTypes.Boolean, []any{nil, nil, nil, T, nil}},
		// three-valued logic
		{"b and i > 0", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, F, F}},
		{"b or i > 0", arrow.FixedWidthTypes.Boolean, []any{T, nil, T, T, F}},
		{"b && nil", arrow.FixedWidthTypes.Boolean, []any{nil, F, nil, nil, F}},
		{"b || nil", arrow.FixedWidthTypes.Boolean, []any{T, nil, nil, T, nil}},
		{"b and true", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, T, F}},
		{"false or b", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, T, F}},
		{"not b", arrow.FixedWidthTypes.Boolean, []any{F, T, nil, F, T}},
		{"!(i > 0)", arrow.FixedWidthTypes.Boolean, []any{F, nil, F, T, T}},
		// in
		{"i in [1, 3, 5]", arrow.FixedWidthTypes.Boolean, []any{T, nil, T, F, F}},
		{"i not in [1, 3]", arrow.FixedWidthTypes.Boolean, []any{F, nil, F, T, T}},
		{"i in [1, nil]", arrow.FixedWidthTypes.Boolean, []any{T, nil, nil, nil, nil}},
		{"f in [1, 2.5]", arrow.FixedWidthTypes.Boolean, []any{F, F, nil, F, T}},
		{"s in ['home', 'Shop']", arrow.FixedWidthTypes.Boolean, []any{T, T, nil, F, F}},
		{"b in [false]", arrow.FixedWidthTypes.Boolean, []any{F, T, nil, F, T}},
		// strings
		{"s contains 'om'", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, T, F}},
		{"s startsWith 'home'", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, T, F}},
		{"s endsWith 'x'", arrow.FixedWidthTypes.Boolean, []any{F, F, nil, T, F}},
		{"s matches '^h.*e$'", arrow.FixedWidthTypes.Boolean, []any{T, F, nil, F, F}},
		{"s not matches '^h'", arrow.FixedWidthTypes.Boolean, []any{F, T, nil, F, T}},
		{"lower(s)", arrow.BinaryTypes.String, []any{"home", "shop", nil, "home/x", ""}},
		{"upper(s)", arrow.BinaryTypes.String, []any{"HOME", "SHOP", nil, "HOME/X", ""}},
		{"len(s)", arrow.PrimitiveTypes.Int64, []any{int64(4), int64(4), nil, int64(6), int64(0)}},
		{"s + '!'", arrow.BinaryTypes.String, []any{"home!", "Shop!", nil, "home/x!", "!"}},
		// null handling functions
		{"coalesce(i, j)", arrow.PrimitiveTypes.Int64, []any{int64(1), int64(20), int64(3), int64(-4), int64(0)}},
		{"coalesce(f, i)", arrow.PrimitiveTypes.Float64, []any{1.5, -2.0, 3.0, 0.0, 2.5}},
		{"coalesce(f, nil)", arrow.PrimitiveTypes.Float64, []any{1.5, -2.0, nil, 0.0, 2.5}},
		{"i ?? 99", arrow.PrimitiveTypes.Int64, []any{int64(1), int64(99), int64(3), int64(-4), int64(0)}},
		{"coalesce(s, 'none')", arrow.BinaryTypes.String, []any{"home", "Shop", "none", "home/x", ""}},
		// bare columns pass through with their own type
		{"j", arrow.PrimitiveTypes.Int32, []any{int64(10), int64(20), int64(0), int64(-3), int64(7)}},
		{"ts", &arrow.TimestampType{Unit: arrow.Second}, []any{jan1, jan1 + minute, nil, jan1 + day, jan1 - 1}},
		{"coalesce(ts, timestamp('2000-01-01'))", &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"},
			[]any{jan1 * 1e9, (jan1 + minute) * 1e9, int64(946684800) * 1e9, (jan1 + day) * 1e9, (jan1 - 1) * 1e9}},
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			e, err := Compile(tt.src, testSchema)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if !arrow.TypeEqual(e.Type(), tt.typ) {
				t.Errorf("Type() = %s, want %s", e.Type(), tt.typ)
			}
			arr, err := e.Eval(rec, mem)
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			defer arr.Release()
			if !arrow.TypeEqual(arr.DataType(), e.Type()) || arr.Len() != int(rec.NumRows()) {
				t.Fatalf("Eval returned %s x %d, want %s x %d", arr.DataType(), arr.Len(), e.Type(), rec.NumRows())
			}
			if tt.typ.ID() == arrow.NULL {
				if arr.NullN() != arr.Len() {
					t.Fatalf("null array has %d nulls of %d", arr.NullN(), arr.Len())
				}
				return
			}
			if got := values(t, arr); !equalValues(got, tt.want) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
			// The same expression over a slice of the batch gives the same rows.
			sl := rec.NewSlice(1, 4)
			defer sl.Release()
			sarr, err := e.Eval(sl, mem)
			if err != nil {
				t.Fatalf("Eval(slice): %v", err)
			}
			defer sarr.Release()
			if got := values(t, sarr); !equalValues(got, tt.want[1:4]) {
				t.Errorf("slice: got %v, want %v", got, tt.want[1:4])
			}
		})
	}
}

var clickSchema = arrow.NewSchema([]arrow.Field{
	{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "user_id", Type: arrow.BinaryTypes.String},
	{Name: "page", Type: arrow.BinaryTypes.String},
	{Name: "bytes", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		src  string
		want string // substring of the error; exact when it starts with `filter "`
	}{
		{"bytes > 'x'", `filter "bytes > 'x'": cannot compare int64 with string (at 1:7)`},
		{"byts > 0", `filter "byts > 0": unknown column "byts" (columns: event_time, user_id, page, bytes); did you mean "bytes"? (at 1:1)`},
		{"nosuch", `unknown column "nosuch" (columns: event_time, user_id, page, bytes) (at 1:1)`},
		{"event_time > now()", "now() is not supported: it is non-deterministic"},
		{"foo(bytes) > 1", "unknown function foo() (built in: abs, case, cast, ceil, coalesce,"},
		{"lenght(page) > 1", "; did you mean length()?"},
		{"bytes >", "(at 1:"},
		{"page + 1 > 0", "cannot apply + to string and int64"},
		{"-page == 'x'", "cannot negate string"},
		{"page matches user_id", "the pattern of matches must be a literal string"},
		{"page matches '('", "bad pattern"},
		{"bytes in page", "the right side of in must be a list literal"},
		{"bytes in [user_id]", "the items of an in list must be constants"},
		{"bytes in ['a']", "cannot compare int64 with string in list"},
		{"bytes % 1.5 > 0", "% needs integers"},
		{"not bytes", "not needs bool, got int64"},
		{"lower(bytes) == 'x'", "lower() argument 1 (s) needs string, got int64 (at 1:7)"},
		{"len(page, page) > 1", "len() takes 1 argument(s), got 2"},
		{"bytes.x > 1", "field and index access"},
		{"bytes > 1 ? page : false", "the values of ?: have no common type: string and bool"},
		{"bytes + 1", `filter "bytes + 1": must be a boolean expression, got int64`},
		{"event_time > timestamp('nope')", "is not RFC 3339"},
		{"event_time > timestamp(page)", "timestamp() takes a literal string"},
		{"event_time > 'garbage'", "cannot compare timestamp[us] with string"},
		{"true > false", "cannot compare bool with bool"},
		{"coalesce(bytes, page) == 1", "coalesce() arguments have no common type: int64 and string"},
		{"bytes ** 2 > 1", "operator ** is not supported"},
		{"$env > 1", "$env must be indexed"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := CompileFilter(tt.src, clickSchema)
			if err == nil {
				t.Fatalf("CompileFilter(%q) succeeded, want error %q", tt.src, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Src != tt.src {
				t.Errorf("error %v is not an *Error for the source", err)
			}
			if strings.HasPrefix(tt.want, `filter "`) {
				if err.Error() != tt.want {
					t.Errorf("error\n got %s\nwant %s", err, tt.want)
				}
			} else if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if _, err := Compile("tags", testSchema); err != nil {
		t.Errorf("a bare list column should compile as a pass-through: %v", err)
	}
	if _, err := Compile("len(tags) > 0", testSchema); err == nil || !strings.Contains(err.Error(), "can only be projected as is") {
		t.Errorf("computing on a list column: got %v", err)
	}
}

func TestEvalSchemaMismatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	other := arrow.NewSchema([]arrow.Field{{Name: "i", Type: arrow.BinaryTypes.String}}, nil)
	e, err := Compile("i == 'x'", other)
	if err != nil {
		t.Fatal(err)
	}
	if arr, err := e.Eval(rec, mem); err == nil {
		arr.Release()
		t.Fatal("Eval on a batch of another schema succeeded")
	}
	if _, _, err := Filter(e, rec, mem); err == nil {
		t.Fatal("Filter on a batch of another schema succeeded")
	}
}

func TestFilter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	tests := []struct {
		src     string
		wantS   []any // column s of the kept rows
		dropped int64
		same    bool // the input batch itself is returned
	}{
		{"i > 0", []any{"home", nil}, 3, false},
		{"b", []any{"home", "home/x"}, 3, false},
		{"b or i > 0", []any{"home", nil, "home/x"}, 2, false},
		{"i > -100 or is_null(i)", []any{"home", "Shop", nil, "home/x", ""}, 0, true},
		{"true", []any{"home", "Shop", nil, "home/x", ""}, 0, true},
		{"false", []any{}, 5, false},
		{"nil", []any{}, 5, false},
		{"i > 0 and nil", []any{}, 5, false},
		{"s startsWith 'h' and ts < '2024-01-02'", []any{"home"}, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			e, err := CompileFilter(tt.src, testSchema)
			if err != nil {
				t.Fatal(err)
			}
			out, dropped, err := Filter(e, rec, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			if dropped != tt.dropped || out.NumRows() != rec.NumRows()-tt.dropped {
				t.Errorf("dropped %d, %d rows left; want %d dropped", dropped, out.NumRows(), tt.dropped)
			}
			if (out == rec) != tt.same {
				t.Errorf("returned the input batch: %v, want %v", out == rec, tt.same)
			}
			if !out.Schema().Equal(rec.Schema()) {
				t.Errorf("schema changed: %s", out.Schema())
			}
			if got := values(t, out.Column(3)); !equalValues(got, tt.wantS) {
				t.Errorf("s = %v, want %v", got, tt.wantS)
			}
		})
	}
	e, err := Compile("i + 1", testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Filter(e, rec, mem); err == nil || !strings.Contains(err.Error(), "must be a boolean expression") {
		t.Errorf("Filter with an int expression: %v", err)
	}
}

func TestProjection(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	p, err := CompileProjection([]ProjectItem{
		{Expr: "s"},
		{Name: "double", Expr: "i * 2"},
		{Name: "name", Expr: "upper(s)"},
		{Name: "when", Expr: "ts"},
	}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	want := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "double", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "when", Type: &arrow.TimestampType{Unit: arrow.Second}, Nullable: true},
	}, nil)
	if !p.Schema().Equal(want) {
		t.Fatalf("schema\n got %s\nwant %s", p.Schema(), want)
	}
	out, err := p.Apply(rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !out.Schema().Equal(want) || out.NumRows() != rec.NumRows() {
		t.Fatalf("Apply: schema %s, %d rows", out.Schema(), out.NumRows())
	}
	if out.Column(0).Data().Buffers()[2] != rec.Column(3).Data().Buffers()[2] {
		t.Error("a bare column was copied, want its buffers shared")
	}
	if got, w := values(t, out.Column(1)), []any{int64(2), nil, int64(6), int64(-8), int64(0)}; !equalValues(got, w) {
		t.Errorf("double = %v, want %v", got, w)
	}
	if got, w := values(t, out.Column(2)), []any{"HOME", "SHOP", nil, "HOME/X", ""}; !equalValues(got, w) {
		t.Errorf("name = %v, want %v", got, w)
	}

	star, err := CompileProjection([]ProjectItem{{Expr: "*"}, {Name: "k", Expr: "i % 2"}}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if n := star.Schema().NumFields(); n != testSchema.NumFields()+1 || star.Schema().Field(n-1).Name != "k" {
		t.Errorf("* projection schema: %s", star.Schema())
	}
	out2, err := star.Apply(rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	out2.Release()

	bad := []struct {
		items []ProjectItem
		want  string
	}{
		{[]ProjectItem{{Expr: "i + 1"}}, `expression "i + 1" needs a name`},
		{[]ProjectItem{{Name: "x", Expr: "*"}}, `"*" cannot be named`},
		{[]ProjectItem{{Expr: "*"}, {Expr: "s"}}, `output column "s" is already produced by item 0`},
		{[]ProjectItem{{Name: "kb", Expr: "nope / 1024"}}, `projection "kb" "nope / 1024": unknown column "nope"`},
	}
	for _, tt := range bad {
		if _, err := CompileProjection(tt.items, testSchema); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompileProjection(%v) = %v, want error containing %q", tt.items, err, tt.want)
		}
	}
}

func TestColumns(t *testing.T) {
	e, err := Compile("b and s == 'x' or i > j", testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(e.Columns()); got != "[i j s b]" {
		t.Errorf("Columns() = %s", got)
	}
}

// TestFilterSliced filters a zero-copy slice (non-zero array offsets) and an
// empty batch, and checks a column that goes through compute's Take (a list).
func TestFilterSliced(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	sl := rec.NewSlice(1, 5)
	defer sl.Release()
	e, err := CompileFilter("s != nil and s != 'home/x'", testSchema)
	if err != nil {
		t.Fatal(err)
	}
	out, dropped, err := Filter(e, sl, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if dropped != 2 {
		t.Errorf("dropped %d, want 2", dropped)
	}
	if got, w := values(t, out.Column(3)), []any{"Shop", ""}; !equalValues(got, w) {
		t.Errorf("s = %v, want %v", got, w)
	}
	if got, w := values(t, out.Column(5)), []any{jan1 + minute, jan1 - 1}; !equalValues(got, w) {
		t.Errorf("ts = %v, want %v", got, w)
	}
	if got, w := values(t, out.Column(4)), []any{false, false}; !equalValues(got, w) {
		t.Errorf("b = %v, want %v", got, w)
	}
	if got := out.Column(7).String(); got != `[[] ["d"]]` {
		t.Errorf("tags = %s", got)
	}

	empty := rec.NewSlice(0, 0)
	defer empty.Release()
	out2, dropped, err := Filter(e, empty, mem)
	if err != nil || dropped != 0 || out2.NumRows() != 0 {
		t.Fatalf("Filter(empty) = %v rows, %d dropped, %v", out2, dropped, err)
	}
	out2.Release()
	u, err := Compile("upper(s) + '!'", testSchema)
	if err != nil {
		t.Fatal(err)
	}
	arr, err := u.Eval(empty, mem)
	if err != nil || arr.Len() != 0 {
		t.Fatalf("Eval(empty) = %v, %v", arr, err)
	}
	arr.Release()
}

func TestProjectionColumns(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.PrimitiveTypes.Int64},
		{Name: "c", Type: arrow.BinaryTypes.String},
	}, nil)
	p, err := CompileProjection([]ProjectItem{{Name: "x", Expr: "b * 2"}, {Expr: "a"}}, schema)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Columns(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("Columns = %v, want [a b]", got)
	}
	p, err = CompileProjection([]ProjectItem{{Expr: "*"}}, schema)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Columns(); len(got) != 3 {
		t.Fatalf("Columns of * = %v, want all three", got)
	}
}
