package expr

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestFunctions evaluates conditionals, let and the string and date/time
// functions over testRows (nulls in every column; ts is in seconds).
func TestFunctions(t *testing.T) {
	T, F := true, false
	str, i64, f64, boo := arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean
	tsS := &arrow.TimestampType{Unit: arrow.Second}
	tests := []struct {
		src  string
		typ  arrow.DataType
		want []any
	}{
		// conditionals: a null condition is not true (SQL CASE WHEN)
		{"i > 0 ? 'pos' : 'other'", str, []any{"pos", "other", "pos", "other", "other"}},
		{"i > 0 ? i : f", f64, []any{1.0, -2.0, 3.0, 0.0, 2.5}},
		{"i > 2 ? 'big' : i > 0 ? 'small' : 'none'", str, []any{"small", "none", "big", "none", "none"}},
		{"if i > 0 { 'p' } else if i < 0 { 'n' } else { 'z' }", str, []any{"p", "z", "p", "n", "z"}},
		{"b ? true : nil", boo, []any{T, nil, nil, T, nil}},
		{"b ? s : 'no'", str, []any{"home", "no", "no", "home/x", "no"}},
		{"case(i > 0, 'p', i < 0, 'n')", str, []any{"p", nil, "p", "n", nil}},
		{"case(i > 0, 'p', i < 0, 'n', 'z')", str, []any{"p", "z", "p", "n", "z"}},
		{"case(false, 1, j > 5, j, 0)", i64, []any{int64(10), int64(20), int64(0), int64(0), int64(7)}},
		{"case(true, 1, j > 5, j, 0)", i64, []any{int64(1), int64(1), int64(1), int64(1), int64(1)}},
		{"case(b, ts)", tsS, []any{jan1, nil, nil, jan1 + day, nil}},
		{"true ? 'a' : 'b'", str, []any{"a", "a", "a", "a", "a"}},
		{"let x = i * 2; x + x", i64, []any{int64(4), nil, int64(12), int64(-16), int64(0)}},
		{"let x = i; let y = x + 1; y * x", i64, []any{int64(2), nil, int64(12), int64(12), int64(0)}},
		{"let s = 'shadow'; s + $env['s']", str, []any{"shadowhome", "shadowShop", nil, "shadowhome/x", "shadow"}},
		// strings
		{"substring(s, 2, 3)", str, []any{"ome", "hop", nil, "ome", ""}},
		{"substring(s, 0, 2)", str, []any{"h", "S", nil, "h", ""}},
		{"substring(s, 3)", str, []any{"me", "op", nil, "me/x", ""}},
		{"substring('héllo', 2, 3)", str, []any{"éll", "éll", "éll", "éll", "éll"}},
		{"substring(s, j, 1)", str, []any{"", "", nil, "", ""}},
		{"substring(s, 1, j)", str, []any{"home", "Shop", nil, nil, ""}},
		{"length(s)", i64, []any{int64(4), int64(4), nil, int64(6), int64(0)}},
		{"trim('  a b  ') + ltrim('  a ') + rtrim(' a  ') + '|'", str, []any{"a ba  a|", "a ba  a|", "a ba  a|", "a ba  a|", "a ba  a|"}},
		{"trim(s, 'hx')", str, []any{"ome", "Shop", nil, "ome/", ""}},
		{"concat(s, '-', s)", str, []any{"home-home", "Shop-Shop", nil, "home/x-home/x", "-"}},
		{"split_part(s, '/', 1)", str, []any{"home", "Shop", nil, "home", ""}},
		{"split_part(s, '/', 2)", str, []any{"", "", nil, "x", ""}},
		{"split_part(s, '/', -1)", str, []any{"home", "Shop", nil, "x", ""}},
		{"split_part('a,b,c', ',', j % 4)", str, []any{"b", nil, nil, "a", "c"}}, // n = 0 is null
		{"replace(s, 'o', '0')", str, []any{"h0me", "Sh0p", nil, "h0me/x", ""}},
		{"replace(s, '', '-')", str, []any{"home", "Shop", nil, "home/x", ""}},
		{"starts_with(s, 'ho')", boo, []any{T, F, nil, T, F}},
		{"ends_with(s, 'x')", boo, []any{F, F, nil, T, F}},
		{"regexp_match(s, '^[a-z]+$')", boo, []any{T, F, nil, F, F}},
		{"regexp_extract(s, 'o.')", str, []any{"om", "op", nil, "om", nil}},
		{"regexp_extract(s, '([a-z]+)/([a-z])', 2)", str, []any{nil, nil, nil, "x", nil}},
		{"regexp_extract(s, 'h(x)?', 1)", str, []any{nil, nil, nil, nil, nil}},
		// date/time (UTC); 2024-01-01 is a Monday, 2023-12-31 a Sunday
		{"date_trunc('day', ts)", tsS, []any{jan1, jan1, nil, jan1 + day, jan1 - day}},
		{"date_trunc('HOUR', ts)", tsS, []any{jan1, jan1, nil, jan1 + day, jan1 - 3600}},
		{"date_trunc('minute', ts)", tsS, []any{jan1, jan1 + minute, nil, jan1 + day, jan1 - minute}},
		{"date_trunc('week', ts)", tsS, []any{jan1, jan1, nil, jan1, jan1 - 7*day}},
		{"date_trunc('month', ts)", tsS, []any{jan1, jan1, nil, jan1, jan1 - 31*day}},
		{"date_trunc('year', ts)", tsS, []any{jan1, jan1, nil, jan1, jan1 - 365*day}},
		{"extract('hour', ts)", i64, []any{int64(0), int64(0), nil, int64(0), int64(23)}},
		{"date_part('minute', ts)", i64, []any{int64(0), int64(1), nil, int64(0), int64(59)}},
		{"extract('dow', ts)", i64, []any{int64(1), int64(1), nil, int64(2), int64(0)}},
		{"extract('year', ts) * 100 + extract('month', ts)", i64, []any{int64(202401), int64(202401), nil, int64(202401), int64(202312)}},
		{"extract('day', ts)", i64, []any{int64(1), int64(1), nil, int64(2), int64(31)}},
		{"format_time(ts, '%Y-%m-%d %H:%M:%S')", str, []any{"2024-01-01 00:00:00", "2024-01-01 00:01:00", nil, "2024-01-02 00:00:00", "2023-12-31 23:59:59"}},
		{"format_time(ts, '%A %a %B %b %j %I%p %u %w %% %F')", str, []any{
			"Monday Mon January Jan 001 12AM 1 1 % 2024-01-01", "Monday Mon January Jan 001 12AM 1 1 % 2024-01-01", nil,
			"Tuesday Tue January Jan 002 12AM 2 2 % 2024-01-02", "Sunday Sun December Dec 365 11PM 7 0 % 2023-12-31"}},
		{"date_trunc('day', ts) == date_trunc('day', timestamp('2024-01-01T12:00:00Z'))", boo, []any{T, T, nil, F, F}},
		// null arguments
		{"substring(nil, 1, 2)", str, []any{nil, nil, nil, nil, nil}},
		{"date_trunc(nil, ts)", tsS, []any{nil, nil, nil, nil, nil}},
		{"regexp_extract(s, nil)", str, []any{nil, nil, nil, nil, nil}},
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
			if got := values(t, arr); !equalValues(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
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

func TestFunctionErrors(t *testing.T) {
	fs := &Functions{}
	if err := fs.Register("mask_user", func(s string) string { return s }); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ src, want string }{
		{"substring(bytes, 1) == ''", "substring() argument 1 (s) needs string, got int64 (at 1:11)"},
		{"substring(page, 'a') == ''", "substring() argument 2 (start) needs int64, got string"},
		{"substring(page, 1, -1) == ''", "substring() argument 3 (len) must not be negative"},
		{"substring(page) == ''", "substring() takes 2 to 3 arguments, got 1: substring(s, start[, len])"},
		{"trim() == ''", "trim() takes 1 to 2 arguments, got 0"},
		{"regexp_match(page, user_id)", "regexp_match() argument 2 (pattern) must be a constant string, not computed per row"},
		{"regexp_match(page, '(')", "regexp_match() argument 2 (pattern) is not a valid RE2 pattern"},
		{"regexp_extract(page, '(a') == ''", "regexp_extract() argument 2 (pattern) is not a valid RE2 pattern"},
		{"regexp_extract(page, '(a)', 2) == ''", "regexp_extract() argument 3 (group) is 2, but the pattern has 1 group(s)"},
		{"regexp_extract(page, '(a)', bytes) == ''", "argument 3 (group) must be a constant integer"},
		{"date_trunc('dya', event_time) > event_time", `date_trunc() argument 1 (unit): "dya" is not one of second, minute, hour, day, week, month, quarter, year; did you mean "day"?`},
		{"date_trunc(page, event_time) > event_time", "date_trunc() argument 1 (unit) must be a constant string"},
		{"date_trunc('day', page) > event_time", "date_trunc() argument 2 (ts) needs timestamp, got string"},
		{"extract('hours', event_time) > 1", `did you mean "hour"?`},
		{"format_time(event_time, '%Q') == ''", "format_time() argument 2 (layout): %Q is not a supported directive"},
		{"format_time(event_time, '%') == ''", "a lone % ends the layout"},
		{"format_time(bytes, '%Y') == ''", "format_time() argument 1 (ts) needs timestamp, got int64"},
		{"split_part(page, '/', 0) == ''", "split_part() argument 3 (n) must not be 0"},
		{"concat(page, bytes) == ''", "concat() argument 2 (s) needs string, got int64"},
		{"starts_with(page, 1)", "starts_with() argument 2 (prefix) needs string, got int64"},
		{"case(bytes, true, false)", "case() argument 1 (condition 1) needs bool, got int64"},
		{"case(bytes > 1, 1, 'x') == 1", "the values of case() have no common type: int64 and string"},
		{"case(true)", "case() takes at least 2 argument(s), got 1"},
		{"bytes ? true : false", "the condition of ?: needs bool, got int64"},
		{"if page { true } else { false }", "the condition of if/else needs bool, got string"},
		{"bytes > 1; true", "a sequence of expressions"},
		{"mask_usr(page) == ''", "registered: mask_user); did you mean mask_user()?"},
		{"mask_user(bytes) == ''", "mask_user() argument 1 needs string, got int64"},
		{"mask_user(page, page) == ''", "mask_user() takes 1 argument(s), got 2"},
		{"event_time > now()", "now() is not supported: it is non-deterministic"},
		{"substrng(page, 1) == ''", "did you mean substring()?"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := CompileFilter(tt.src, clickSchema, WithFunctions(fs))
			if err == nil {
				t.Fatalf("compiled, want error %q", tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Src != tt.src || ce.Line == 0 {
				t.Errorf("error %v is not a located *Error for the source", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n%s\ndoes not contain\n%s", err, tt.want)
			}
		})
	}
}

func TestRegister(t *testing.T) {
	fs := &Functions{}
	bad := []struct {
		name string
		fn   any
		want string
	}{
		{"1x", func(string) string { return "" }, "must be an identifier"},
		{"lower", func(string) string { return "" }, "a built-in function has that name"},
		{"now", func() int64 { return 0 }, "reserved"},
		{"contains", func(string) bool { return false }, "reserved"},
		{"f", 42, "want a func"},
		{"f", (func(string) string)(nil), "want a func"},
		{"f", func(int) int { return 0 }, "parameter 1 is int"},
		{"f", func(string) []byte { return nil }, "the result is []uint8"},
		{"f", func(string) (string, error) { return "", nil }, "want one result, or a result and a bool"},
		{"f", func(...string) string { return "" }, "variadic"},
	}
	for _, b := range bad {
		if err := fs.Register(b.name, b.fn); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Register(%q, %T) = %v, want %q", b.name, b.fn, err, b.want)
		}
	}
	if err := fs.Register("f", func(s string) string { return s }); err != nil {
		t.Fatal(err)
	}
	if err := fs.Register("f", func(s string) string { return s }); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("duplicate: %v", err)
	}
	if got := fs.Names(); len(got) != 1 || got[0] != "f" {
		t.Errorf("Names = %v", got)
	}
}

// TestUDF covers the typed and the reflective call paths, (T, bool) results,
// time.Time, null arguments (no call), constant folding, panics and that a
// compiled expression keeps its functions.
func TestUDF(t *testing.T) {
	var calls atomic.Int64
	fs := &Functions{}
	must := func(name string, fn any) {
		t.Helper()
		if err := fs.Register(name, fn); err != nil {
			t.Fatal(err)
		}
	}
	must("shout", func(s string) string { calls.Add(1); return strings.ToUpper(s) + "!" })
	must("add", func(a int64, b float64) float64 { return float64(a) + b })
	must("pos", func(x int64) (int64, bool) { return x, x > 0 })
	must("next_hour", func(t time.Time) time.Time { return t.Truncate(time.Hour).Add(time.Hour) })
	must("yearday", func(t time.Time) int64 { return int64(t.YearDay()) })
	must("both", func(a, b bool) bool { return a && b })
	must("boom", func(x int64) int64 {
		if x == 3 {
			panic("three")
		}
		return x
	})
	T, F := true, false
	tests := []struct {
		src  string
		typ  arrow.DataType
		want []any
	}{
		{"shout(s)", arrow.BinaryTypes.String, []any{"HOME!", "SHOP!", nil, "HOME/X!", "!"}},
		{"add(i, f)", arrow.PrimitiveTypes.Float64, []any{2.5, nil, nil, -4.0, 2.5}},
		{"add(j, 1)", arrow.PrimitiveTypes.Float64, []any{11.0, 21.0, 1.0, -2.0, 8.0}},
		{"pos(i)", arrow.PrimitiveTypes.Int64, []any{int64(1), nil, int64(3), nil, nil}},
		{"next_hour(ts)", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
			[]any{(jan1 + 3600) * 1e6, (jan1 + 3600) * 1e6, nil, (jan1 + day + 3600) * 1e6, jan1 * 1e6}},
		{"yearday(ts)", arrow.PrimitiveTypes.Int64, []any{int64(1), int64(1), nil, int64(2), int64(365)}},
		{"both(b, i > 0)", arrow.FixedWidthTypes.Boolean, []any{T, nil, nil, F, F}},
		{"i > 0 ? shout(s) : 'x'", arrow.BinaryTypes.String, []any{"HOME!", "x", nil, "x", "x"}},
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := testRecord(t, mem)
	defer rec.Release()
	for _, tt := range tests {
		e, err := Compile(tt.src, testSchema, WithFunctions(fs))
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		if !arrow.TypeEqual(e.Type(), tt.typ) {
			t.Errorf("%s: Type() = %s, want %s", tt.src, e.Type(), tt.typ)
		}
		arr, err := e.Eval(rec, mem)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		if got := values(t, arr); !equalValues(got, tt.want) {
			t.Errorf("%s:\n got  %v\n want %v", tt.src, got, tt.want)
		}
		arr.Release()
	}
	// shout(s) ran on 4 non-null rows, twice (the conditional evaluates it on every row).
	if n := calls.Load(); n != 8 {
		t.Errorf("shout called %d times, want 8 (never on a null)", n)
	}
	calls.Store(0)
	e, err := Compile("shout('a') + s", testSchema, WithFunctions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Errorf("a call on constants should run once at compile time, ran %d times", calls.Load())
	}
	arr, err := e.Eval(rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	arr.Release()
	if calls.Load() != 1 {
		t.Errorf("a folded call ran again at evaluation")
	}
	e, err = Compile("boom(i)", testSchema, WithFunctions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if arr, err := e.Eval(rec, mem); err == nil || !strings.Contains(err.Error(), "function boom() panicked: three") {
		if arr != nil {
			arr.Release()
		}
		t.Errorf("panicking function: %v", err)
	}
	if _, err := Compile("boom(3)", testSchema, WithFunctions(fs)); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("panicking function on constants: %v", err)
	}
	if _, err := Compile("shout(s)", testSchema); err == nil || !strings.Contains(err.Error(), "unknown function shout()") {
		t.Errorf("without WithFunctions: %v", err)
	}
	p, err := CompileProjection([]ProjectItem{{Name: "loud", Expr: "shout(s)"}}, testSchema, WithFunctions(fs))
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	out.Release()
}
