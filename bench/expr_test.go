package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/expr"
)

// exprCase is a floe expression and the DuckDB SQL that must give the same
// value on every row. Cases where floe documents a difference (overflow is
// null where DuckDB raises an error, / by zero is null where DuckDB gives
// inf, strings DuckDB reads as numbers and floe does not: '1.5', '0x10',
// '1_000' as int64) are left out of the data.
type exprCase struct{ floe, duck string }

// TestExprMatchesDuckDB evaluates floe expressions over a batch and the
// DuckDB equivalent over the same rows, and compares every row: integer
// division and % on negative and positive operands (and zero divisors),
// rounding, and cast.
func TestExprMatchesDuckDB(t *testing.T) {
	db, err := OpenDuckDB(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// Every pair of these integers, as a and b.
	ints := []int64{-100, -13, -8, -7, -6, -2, -1, 0, 1, 2, 3, 5, 7, 8, 13, 99997, 1000, -1000, 1 << 40, -(1 << 40) - 3}
	var as, bs []int64
	for _, a := range ints {
		for _, b := range ints {
			as, bs = append(as, a), append(bs, b)
		}
	}
	compareExprs(t, db, []arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.PrimitiveTypes.Int64}},
		[][]any{anys(as), anys(bs)}, []exprCase{
			{"a // b", "a // b"},
			{"a % b", "a % b"},
			{"a // 1000", "a // 1000"},
			{"-a // 3", "-a // 3"},
			{"a // b * b + a % b", "a // b * b + a % b"},
			{"a - b * 2 // 3", "a - b * 2 // 3"},
			{"round(a, -1)", "round(a, -1)"},
			{"round(a, -2)", "round(a, -2)"},
			{"round(a, 1)", "round(a, 1)"},
			{"trunc(a)", "trunc(a)"},
			{"cast(a, 'string')", "CAST(a AS VARCHAR)"},
			{"cast(a, 'float64') / 3", "CAST(a AS DOUBLE) / 3"},
			{"cast(b, 'bool')", "CAST(b AS BOOLEAN)"},
		})

	floats := []float64{2.5, -2.5, 3.5, -3.5, 0.5, -0.5, 1.5, -1.5, 2.4, 2.6, -2.6, 0, 1, -1, 2.675, 1.005, 0.285, 1.15,
		123.456, -123.456, 1234.5, 1250, -1250, 15, 25, -25, 1e15, 1e16, 1.5e16, 1e-4, 1e-5, 1.25e-4, 0.1, 0.30000000000000004,
		1e100, 1e300, 5e-324, math.MaxFloat64, 9999999999999998, 9.2233720368547758e18, -9.2233720368547758e18, 1e19,
		4503599627370497.5, 0.49999999999999994}
	xField := []arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}}
	// DuckDB's round(±inf, digits < 0) is 0; floe keeps ±inf.
	compareExprs(t, db, xField, [][]any{anys(floats)}, []exprCase{
		{"round(x, -1)", "round(x, -1)"},
		{"round(x, -2)", "round(x, -2)"},
	})
	floats = append(floats, math.Inf(1), math.Inf(-1))
	compareExprs(t, db, xField, [][]any{anys(floats)}, []exprCase{
		{"floor(x)", "floor(x)"},
		{"ceil(x)", "ceil(x)"},
		{"trunc(x)", "trunc(x)"},
		{"round(x)", "round(x)"},
		{"round(x, 2)", "round(x, 2)"},
		{"round(x, 1)", "round(x, 1)"},
		{"cast(x, 'int64')", "TRY_CAST(x AS BIGINT)"},
		{"cast(x, 'string')", "CAST(x AS VARCHAR)"},
		{"cast(x, 'bool')", "CAST(x AS BOOLEAN)"},
		{"cast(floor(x), 'int64') // 2", "TRY_CAST(floor(x) AS BIGINT) // 2"},
	})

	strs := []string{" 12 ", "-0", "+5", "010", "abc", "", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"1e3", ".5", "5.", " 1.5 ", "inf", "-Infinity", "NaN", "1e400", "true", "T", "yes", "y", "n", "no", "FALSE", "0", "1", "2",
		"on", " true ", "2024-01-02", "2024-01-02 03:04:05.5", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123456Z"}
	compareExprs(t, db, []arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, [][]any{anys(strs)}, []exprCase{
		{"cast(s, 'float64')", "TRY_CAST(s AS DOUBLE)"},
		{"cast(s, 'bool')", "TRY_CAST(s AS BOOLEAN)"},
	})
	// DuckDB reads 'inf' as an infinite timestamp; floe has none (null).
	tsStrs := []string{"2024-01-02", "2024-01-02 03:04:05.5", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123456Z", "1960-01-02", "abc", ""}
	compareExprs(t, db, []arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, [][]any{anys(tsStrs)}, []exprCase{
		{"cast(s, 'timestamp')", "TRY_CAST(s AS TIMESTAMP)"},
	})
	// int64 from a string: only the strings both read the same way (DuckDB
	// also reads '1.5' as 2 and '1e3' as 1000; floe takes decimal integers).
	intStrs := []string{" 12 ", "-0", "+5", "010", "abc", "", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "1 2", "--1"}
	compareExprs(t, db, []arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, [][]any{anys(intStrs)}, []exprCase{
		{"cast(s, 'int64')", "TRY_CAST(s AS BIGINT)"},
	})

	tsType := &arrow.TimestampType{Unit: arrow.Microsecond}
	times := []int64{0, 1704164645500000, 1704164645000000, 1704164645123456, 1704164645120000, -315525354500000, 253402300799999999}
	compareExprs(t, db, []arrow.Field{{Name: "ts", Type: tsType}}, [][]any{anys(times)}, []exprCase{
		{"cast(ts, 'string')", "CAST(ts AS VARCHAR)"},
	})
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// compareExprs builds a batch of the columns, puts the same rows in a DuckDB
// table and compares each case row by row.
func compareExprs(t *testing.T, db *sql.DB, fields []arrow.Field, cols [][]any, cases []exprCase) {
	t.Helper()
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema(fields, nil)
	bld := array.NewRecordBuilder(mem, schema)
	defer bld.Release()
	n := len(cols[0])
	rows := make([]string, n)
	for r := range n {
		vals := make([]string, len(cols))
		for c, col := range cols {
			switch v := col[r].(type) {
			case int64:
				if fields[c].Type.ID() == arrow.TIMESTAMP {
					bld.Field(c).(*array.TimestampBuilder).Append(arrow.Timestamp(v))
					vals[c] = fmt.Sprintf("make_timestamp(%d::BIGINT)", v)
				} else {
					bld.Field(c).(*array.Int64Builder).Append(v)
					vals[c] = fmt.Sprintf("%d::BIGINT", v)
				}
			case float64:
				bld.Field(c).(*array.Float64Builder).Append(v)
				vals[c] = fmt.Sprintf("'%s'::DOUBLE", strconv.FormatFloat(v, 'g', -1, 64))
			case string:
				bld.Field(c).(*array.StringBuilder).Append(v)
				vals[c] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
			}
		}
		rows[r] = "(" + strings.Join(vals, ", ") + ")"
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	if _, err := db.Exec("CREATE OR REPLACE TABLE t AS SELECT * FROM (VALUES " + strings.Join(rows, ", ") + ") v(" + strings.Join(names, ", ") + ")"); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		e, err := expr.Compile(c.floe, schema)
		if err != nil {
			t.Errorf("floe %s: %v", c.floe, err)
			continue
		}
		arr, err := e.Eval(rec, mem)
		if err != nil {
			t.Errorf("floe %s: %v", c.floe, err)
			continue
		}
		res, err := db.Query("SELECT " + c.duck + " FROM t ORDER BY rowid")
		if err != nil {
			t.Fatalf("duckdb %s: %v", c.duck, err)
		}
		i, bad := 0, 0
		for ; res.Next(); i++ {
			var want any
			if err := res.Scan(&want); err != nil {
				t.Fatalf("duckdb %s: %v", c.duck, err)
			}
			if got := floeValue(arr, i); !sameAsDuck(got, want) && bad < 5 {
				bad++
				row := make([]string, len(cols))
				for k, col := range cols {
					row[k] = fmt.Sprintf("%s=%v", names[k], col[i])
				}
				t.Errorf("%s at %s: floe %v (%T), duckdb %s: %v (%T)", c.floe, strings.Join(row, " "), got, got, c.duck, want, want)
			}
		}
		if err := res.Err(); err != nil {
			t.Fatalf("duckdb %s: %v", c.duck, err)
		}
		res.Close()
		if i != n {
			t.Fatalf("duckdb %s: %d rows, want %d", c.duck, i, n)
		}
		arr.Release()
	}
}

func floeValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.Timestamp:
		return a.Value(i).ToTime(arr.DataType().(*arrow.TimestampType).Unit)
	}
	return fmt.Sprintf("unexpected %s", arr.DataType())
}

// sameAsDuck compares a floe value with what database/sql scanned from DuckDB
// (integers of any width, float64, string, bool, time.Time). Floats compare
// exactly (NaN equals NaN); an integral float from floe equals an integer
// from DuckDB (floor of a BIGINT is a DOUBLE in DuckDB, an int64 in floe).
func sameAsDuck(got, want any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case int8, int16, int32, int64:
		wi, _ := strconv.ParseInt(fmt.Sprint(w), 10, 64)
		switch g := got.(type) {
		case int64:
			return g == wi
		case float64:
			return g == float64(wi)
		}
	case float64:
		switch g := got.(type) {
		case float64:
			return g == w || (math.IsNaN(g) && math.IsNaN(w))
		case int64:
			return float64(g) == w
		}
	case string:
		return got == w
	case bool:
		return got == w
	case time.Time:
		g, ok := got.(time.Time)
		return ok && g.Equal(w)
	}
	return false
}
