package operators

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The lookup tests enrich the join tests' left rows (ts, user, v) with a
// table (user, v string, tier int32).

var lookupTableSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "tier", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
}, nil)

type tableRow struct {
	user *string
	v    string
	tier int32
}

func tableBatch(t testing.TB, mem memory.Allocator, rows ...tableRow) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, lookupTableSchema)
	defer b.Release()
	for _, r := range rows {
		appendStr(b.Field(0).(*array.StringBuilder), r.user)
		b.Field(1).(*array.StringBuilder).Append(r.v)
		b.Field(2).(*array.Int32Builder).Append(r.tier)
	}
	return b.NewRecordBatch()
}

func lookupSpec(typ JoinType) LookupSpec {
	return LookupSpec{ID: "l", Type: typ, StreamKeys: []string{"user"}, TableKeys: []string{"user"}}
}

func newLookup(t testing.TB, spec LookupSpec, mem memory.Allocator, batches ...[]tableRow) *Lookup {
	t.Helper()
	var table []arrow.RecordBatch
	for _, rows := range batches {
		table = append(table, tableBatch(t, mem, rows...))
	}
	l, err := NewLookup(spec, joinLeftSchema, table)
	release(table...)
	if err != nil {
		t.Fatal(err)
	}
	l.SetAllocator(mem)
	return l
}

func enrich(t *testing.T, l *Lookup, mem memory.Allocator, rows ...jev) []string {
	t.Helper()
	rec := joinBatch(t, mem, 0, rows...)
	out, err := l.Enrich(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !out.Schema().Equal(l.OutputSchema()) {
		t.Fatalf("output schema %s, want %s", out.Schema(), l.OutputSchema())
	}
	return rowsOf(out)
}

var lookupTable = [][]tableRow{
	{{user: sp("a"), v: "gold", tier: 1}, {user: sp("b"), v: "silver", tier: 2}},
	{},
	{{user: nil, v: "null key: never matches", tier: 9}, {user: sp("c"), v: "bronze", tier: 3}},
}

func TestLookupLeftAndInner(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	stream := []jev{jl(1, "c", 10), jl(2, "x", 20), {ts: 3, v: 30}, jl(4, "a", 40), jl(5, "a", 50)}

	l := newLookup(t, lookupSpec(LeftJoin), mem, lookupTable...)
	if l.Len() != 3 {
		t.Fatalf("Len %d, want 3 indexed rows", l.Len())
	}
	var names []string
	for _, f := range l.OutputSchema().Fields() {
		names = append(names, f.Name)
	}
	eqLines(t, "left output columns", names, []string{"ts", "user", "v", "right_v", "tier"})
	eqLines(t, "left lookup", enrich(t, l, mem, stream...), []string{
		`1 "c" 10 "bronze" 3`,
		`2 "x" 20 null null`,
		`3 null 30 null null`,
		`4 "a" 40 "gold" 1`,
		`5 "a" 50 "gold" 1`,
	})

	spec := lookupSpec(InnerJoin)
	spec.RightPrefix = "t_"
	in := newLookup(t, spec, mem, lookupTable...)
	eqLines(t, "inner lookup", enrich(t, in, mem, stream...), []string{
		`1 "c" 10 "bronze" 3`,
		`4 "a" 40 "gold" 1`,
		`5 "a" 50 "gold" 1`,
	})
	if f := in.OutputSchema().Field(3); f.Name != "t_v" || f.Nullable != true {
		t.Errorf("inner lookup column 3 is %v", f)
	}
	eqLines(t, "every row matched", enrich(t, in, mem, jl(1, "b", 1)), []string{`1 "b" 1 "silver" 2`})
	eqLines(t, "no row matched", enrich(t, in, mem, jl(1, "z", 1)), nil)
	eqLines(t, "empty batch", enrich(t, l, mem), nil)

	// An empty table: a left lookup keeps every row with nulls.
	empty := newLookup(t, lookupSpec(LeftJoin), mem, []tableRow{})
	eqLines(t, "empty table", enrich(t, empty, mem, jl(1, "a", 1)), []string{`1 "a" 1 null null`})
}

func TestLookupErrors(t *testing.T) {
	tb := tableBatch(t, memory.DefaultAllocator, lookupTable[0]...)
	defer tb.Release()
	dup := tableBatch(t, memory.DefaultAllocator, tableRow{user: sp("x"), v: "1"}, tableRow{user: sp("b"), v: "again"})
	defer dup.Release()
	other := array.NewRecordBatch(arrow.NewSchema(lookupTableSchema.Fields()[:2], nil), tb.Columns()[:2], tb.NumRows())
	defer other.Release()
	cases := []struct {
		name  string
		spec  func(*LookupSpec)
		table []arrow.RecordBatch
		want  string
	}{
		{"duplicate key", nil, []arrow.RecordBatch{tb, dup}, "duplicate table key (user=b) in batch 0 row 1 and batch 1 row 1; a lookup table must have one row per key"},
		{"key types", func(s *LookupSpec) { s.StreamKeys = []string{"v"} }, []arrow.RecordBatch{tb}, `key 1: stream column "v" is int64 but table column "user" is utf8; join keys must have identical types`},
		{"missing key", func(s *LookupSpec) { s.TableKeys = []string{"usr"} }, []arrow.RecordBatch{tb}, `table key column "usr" not found (or ambiguous) in table schema (did you mean user?)`},
		{"key count", func(s *LookupSpec) { s.TableKeys = []string{"user", "tier"} }, []arrow.RecordBatch{tb}, "1 stream keys (user) but 2 table keys (user, tier)"},
		{"no table", nil, nil, "no table batches"},
		{"mixed schemas", nil, []arrow.RecordBatch{tb, other}, "table batch 1 schema does not match"},
		{"type", func(s *LookupSpec) { s.Type = 7 }, []arrow.RecordBatch{tb}, "unknown lookup type JoinType(7)"},
		{"prefix clash", func(s *LookupSpec) { s.RightPrefix = "t" }, []arrow.RecordBatch{tb}, `table column "v" clashes with a stream column, and its prefixed name "tv"`},
	}
	stream := arrow.NewSchema(append(joinLeftSchema.Fields(), arrow.Field{Name: "tv", Type: arrow.BinaryTypes.String}), nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := lookupSpec(LeftJoin)
			if c.spec != nil {
				c.spec(&spec)
			}
			_, err := NewLookup(spec, stream, c.table)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "lookup l: ") {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
	l := newLookup(t, lookupSpec(InnerJoin), memory.DefaultAllocator, lookupTable...)
	if _, err := l.Enrich(tb); err == nil || !strings.Contains(err.Error(), "does not match stream schema") {
		t.Fatalf("enrich of a table batch: %v", err)
	}
}
