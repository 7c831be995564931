package operators

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// canonicalOrderRef is the first CanonicalOrder: one string per row's
// encoding and a stable sort of them. The current one must give the same
// rows in the same order.
func canonicalOrderRef(t *testing.T, recs []arrow.RecordBatch, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	schema := recs[0].Schema()
	var n int64
	cols := make([]arrow.Array, schema.NumFields())
	for c := range cols {
		var parts []arrow.Array
		for _, r := range recs {
			parts = append(parts, r.Column(c))
		}
		a, err := array.Concatenate(parts, mem)
		if err != nil {
			t.Fatal(err)
		}
		cols[c] = a
		n = int64(a.Len())
	}
	all := array.NewRecordBatch(schema, cols, n)
	releaseArrays(cols)
	defer all.Release()
	var keyCols []int
	var kinds []byte
	for c, f := range schema.Fields() {
		if k := kindOf(f.Type); k != tagOther {
			keyCols = append(keyCols, c)
			kinds = append(kinds, k)
		}
	}
	var enc keyEncoder
	kc := make([]arrow.Array, len(keyCols))
	for i, c := range keyCols {
		kc[i] = all.Column(c)
	}
	enc.bind(kinds, kc)
	keys := make([]string, n)
	for i := range int(n) {
		keys[i] = string(enc.encode(nil, i))
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	out, err := takeRows(all, idx, mem)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCanonicalOrderMatchesStableSort(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "u", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},   // no key encoding: ignored, keeps input order
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}, // gathered by a take
	}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"", "a", "ab", "abc", "b", "ba", "a\x00", "zzzzzzzzzzzzzzzz", "zzzzzzzzzzzzzzzy"}
	batch := func(rows, ids int, shared bool) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for range rows {
			switch {
			case rng.IntN(10) == 0:
				b.Field(0).AppendNull()
			case shared: // every key shares a long prefix: a constant id
				b.Field(0).(*array.Int64Builder).Append(7)
			default:
				b.Field(0).(*array.Int64Builder).Append(int64(rng.IntN(ids)) - 3)
			}
			if rng.IntN(12) == 0 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(names[rng.IntN(len(names))])
			}
			b.Field(2).(*array.Float64Builder).Append(float64(rng.IntN(3)) - 1)
			b.Field(3).(*array.Uint16Builder).Append(uint16(rng.IntN(1 << 16)))
			if rng.IntN(7) == 0 {
				b.Field(4).AppendNull()
			} else {
				b.Field(4).(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
			}
		}
		return b.NewRecordBatch()
	}
	for _, tc := range []struct {
		name    string
		batches []int
		ids     int
		shared  bool
	}{
		{"one batch", []int{500}, 50, false},
		{"several batches", []int{100, 1, 300, 77}, 20, false},
		{"many ties", []int{400, 400}, 3, false},
		{"shared prefix", []int{300, 200}, 1, true},
		{"one row", []int{1}, 5, false},
		// From radixSortIDs rows on, a radix sort by the first 16 bytes.
		{"radix", []int{3000, 2500}, 100000, false},
		{"radix, many ties", []int{5000}, 3, false},
		{"radix, shared prefix", []int{2500, 2500}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			for _, n := range tc.batches {
				recs = append(recs, batch(n, tc.ids, tc.shared))
			}
			defer releaseBatches(recs)
			want := canonicalOrderRef(t, recs, mem)
			defer want.Release()
			got, err := CanonicalOrder(recs, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if !array.RecordEqual(got, want) {
				t.Fatalf("CanonicalOrder differs from the stable sort of the encodings:\ngot  %v\nwant %v", got, want)
			}
			// Its output is in canonical order already: the same rows come back.
			again, err := CanonicalOrder([]arrow.RecordBatch{got}, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Release()
			if !array.RecordEqual(again, want) {
				t.Fatal("CanonicalOrder of sorted rows changed them")
			}
		})
	}
	if got, err := CanonicalOrder(nil, mem); got != nil || err != nil {
		t.Fatalf("no rows: got %v, %v", got, err)
	}
}

// Batches whose column types differ are refused, not read as each other's.
func TestCanonicalOrderRefusesMixedTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	mk := func(dt arrow.DataType, app func(array.Builder)) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "v", Type: dt}}, nil))
		defer b.Release()
		app(b.Field(0))
		return b.NewRecordBatch()
	}
	a := mk(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).Append(1) })
	defer a.Release()
	s := mk(arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).Append("x") })
	defer s.Release()
	if out, err := CanonicalOrder([]arrow.RecordBatch{a, s}, mem); err == nil {
		out.Release()
		t.Fatal("int64 and string batches sorted together")
	} else if !strings.Contains(err.Error(), `column "v"`) {
		t.Fatalf("error %q does not name the column", err)
	}
}
