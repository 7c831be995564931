package operators

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// gatherColumn equals taking each row from its chunk, one by one, for
// every type it handles: values, nulls (in the chunks and as null rows),
// chunks that are slices (non-zero offset), empty strings, all-null chunks.
func TestGatherColumnMatchesTake(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Float64,
		arrow.FixedWidthTypes.Timestamp_us, &arrow.Decimal128Type{Precision: 20, Scale: 2},
		&arrow.FixedSizeBinaryType{ByteWidth: 3},
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary,
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for _, dt := range types {
		t.Run(dt.String(), func(t *testing.T) {
			fields := []arrow.Field{{Name: "c", Type: dt, Nullable: true}}
			schema := arrow.NewSchema(fields, nil)
			var chunks []arrow.RecordBatch
			for c := range 4 {
				b := array.NewRecordBuilder(mem, schema)
				rows := 50 + rng.IntN(50)
				for i := range rows {
					appendRandom(b.Field(0), i, rng, c == 2) // chunk 2: all null
				}
				rec := b.NewRecordBatch()
				b.Release()
				if c == 1 { // a slice: its arrays start at an offset
					s := rec.NewSlice(7, rec.NumRows()-3)
					rec.Release()
					rec = s
				}
				chunks = append(chunks, rec)
			}
			defer func() {
				for _, c := range chunks {
					c.Release()
				}
			}()
			var locs []rowLoc
			for range 300 {
				if rng.IntN(10) == 0 {
					locs = append(locs, nullLoc)
					continue
				}
				c := rng.IntN(len(chunks))
				locs = append(locs, rowLoc{chunk: int32(c), idx: int32(rng.IntN(int(chunks[c].NumRows())))})
			}
			got, ok := gatherColumn(chunks, 0, dt, locs, mem)
			if !ok {
				t.Fatalf("%s not gathered", dt)
			}
			defer got.Release()
			want := takeOneByOne(t, chunks, dt, locs, mem)
			defer want.Release()
			if !array.Equal(got, want) {
				t.Fatalf("gathered %v\nwant %v", got, want)
			}
			if got.NullN() != want.NullN() {
				t.Fatalf("null count %d, want %d", got.NullN(), want.NullN())
			}
		})
	}
	if _, ok := gatherColumn(nil, 0, arrow.FixedWidthTypes.Boolean, nil, mem); ok {
		t.Fatal("booleans are left to the take")
	}
}

func appendRandom(b array.Builder, i int, rng *rand.Rand, allNull bool) {
	if allNull || rng.IntN(5) == 0 {
		b.AppendNull()
		return
	}
	v := rng.Int64N(1000) - 500
	switch b := b.(type) {
	case *array.Int64Builder:
		b.Append(v)
	case *array.Int32Builder:
		b.Append(int32(v))
	case *array.Int8Builder:
		b.Append(int8(v))
	case *array.Float64Builder:
		b.Append(float64(v) / 7)
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v * 1e6))
	case *array.Decimal128Builder:
		b.Append(decimal128.FromI64(v))
	case *array.FixedSizeBinaryBuilder:
		b.Append([]byte{byte(v), byte(i), 7})
	case *array.StringBuilder:
		b.Append(fmt.Sprintf("%.*s", rng.IntN(12), "abcdefghijklmnop"))
	case *array.LargeStringBuilder:
		b.Append(fmt.Sprint("v", v))
	case *array.BinaryBuilder:
		b.Append([]byte(fmt.Sprintf("%03d", v+500))[:rng.IntN(4)])
	default:
		panic(fmt.Sprintf("no random values for %T", b))
	}
}

// takeOneByOne is the reference: each row taken alone, concatenated.
func takeOneByOne(t *testing.T, chunks []arrow.RecordBatch, dt arrow.DataType, locs []rowLoc, mem memory.Allocator) arrow.Array {
	t.Helper()
	ctx := compute.WithAllocator(context.Background(), mem)
	var parts []arrow.Array
	for _, l := range locs {
		if l.chunk < 0 {
			parts = append(parts, array.MakeArrayOfNull(mem, dt, 1))
			continue
		}
		idx := int32Array(mem, []int32{l.idx}, nil)
		p, err := compute.TakeArray(ctx, chunks[l.chunk].Column(0), idx)
		idx.Release()
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	out, err := array.Concatenate(parts, mem)
	releaseArrays(parts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rowStore.gather returns the rows at locs, in order, for the columns the
// direct gather copies and for those it leaves to the take (booleans), with
// null rows, over several chunks.
func TestRowStoreGather(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	rs := newRowStore(schema)
	rng := rand.New(rand.NewPCG(9, 4))
	type row struct {
		i    int64
		s    string
		b    bool
		null bool
	}
	var want [][]row // per chunk
	for c := range 3 {
		b := array.NewRecordBuilder(mem, schema)
		var rows []row
		for k := range 20 + c*7 {
			r := row{i: int64(c*100 + k), s: fmt.Sprint("r", c, "-", k), b: rng.IntN(2) == 0}
			b.Field(0).(*array.Int64Builder).Append(r.i)
			b.Field(1).(*array.StringBuilder).Append(r.s)
			b.Field(2).(*array.BooleanBuilder).Append(r.b)
			rows = append(rows, r)
		}
		rs.add(b.NewRecordBatch())
		b.Release()
		want = append(want, rows)
	}
	defer func() {
		for _, c := range rs.chunks {
			c.Release()
		}
	}()
	var locs []rowLoc
	var exp []row
	for range 200 {
		if rng.IntN(8) == 0 {
			locs = append(locs, nullLoc)
			exp = append(exp, row{null: true})
			continue
		}
		c := rng.IntN(3)
		k := rng.IntN(len(want[c]))
		locs = append(locs, rowLoc{chunk: int32(c), idx: int32(k)})
		exp = append(exp, want[c][k])
	}
	cols, err := rs.gather(locs, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseArrays(cols)
	ia, sa, ba := cols[0].(*array.Int64), cols[1].(*array.String), cols[2].(*array.Boolean)
	for j, r := range exp {
		if r.null {
			if ia.IsValid(j) || sa.IsValid(j) || ba.IsValid(j) {
				t.Fatalf("row %d: a null row has values", j)
			}
			continue
		}
		if ia.Value(j) != r.i || sa.Value(j) != r.s || ba.Value(j) != r.b {
			t.Fatalf("row %d: got (%d, %q, %v), want (%d, %q, %v)", j, ia.Value(j), sa.Value(j), ba.Value(j), r.i, r.s, r.b)
		}
	}
}
