package operators

import (
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ev is one input row of the test schema. Nil pointers are nulls.
type ev struct {
	ts   int64
	user *string
	n    *int64
	f    *float64
	s    *string
	i32  *int32
}

func sp(s string) *string                   { return &s }
func ip(v int64) *int64                     { return &v }
func fp(v float64) *float64                 { return &v }
func i32p(v int32) *int32                   { return &v }
func row(ts int64, user string, n int64) ev { return ev{ts: ts, user: sp(user), n: ip(n)} }

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "ts", Type: eventTimeType},
	{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
}, nil)

func batch(t testing.TB, rows ...ev) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
		appendStr(b.Field(1).(*array.StringBuilder), r.user)
		if r.n == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(*r.n)
		}
		if r.f == nil {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Float64Builder).Append(*r.f)
		}
		appendStr(b.Field(4).(*array.StringBuilder), r.s)
		if r.i32 == nil {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.Int32Builder).Append(*r.i32)
		}
	}
	return b.NewRecordBatch()
}

func appendStr(b *array.StringBuilder, s *string) {
	if s == nil {
		b.AppendNull()
	} else {
		b.Append(*s)
	}
}

// cell formats one value: integers and timestamps as %d, floats with 'g',
// strings quoted, nulls as null.
func cell(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch c := a.(type) {
	case *array.Int64:
		return strconv.FormatInt(c.Value(i), 10)
	case *array.Int32:
		return strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Timestamp:
		return strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Float64:
		return strconv.FormatFloat(c.Value(i), 'g', -1, 64)
	case *array.String:
		return strconv.Quote(c.Value(i))
	case *array.Boolean:
		return strconv.FormatBool(c.Value(i))
	}
	return a.ValueStr(i)
}

// rowsOf formats a batch as one line per row (nil batch: no lines).
func rowsOf(rec arrow.RecordBatch) []string {
	if rec == nil {
		return nil
	}
	out := make([]string, rec.NumRows())
	for i := range out {
		parts := make([]string, rec.NumCols())
		for c := range parts {
			parts[c] = cell(rec.Column(c), i)
		}
		out[i] = strings.Join(parts, " ")
	}
	return out
}

func eqLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func mustAggs(t testing.TB, kv ...string) []AggSpec {
	t.Helper()
	var out []AggSpec
	for i := 0; i+1 < len(kv); i += 2 {
		a, err := ParseAggregate(kv[i], kv[i+1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func release(recs ...arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}
