package operators

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// batchFrom is batch with its buffers allocated from mem.
func batchFrom(t testing.TB, mem memory.Allocator, rows ...ev) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, testSchema)
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

// TestWindowReleasesArrowMemory runs every window kind with every aggregate
// through Process, ProcessSelected (with late rows), Advance, Snapshot and
// Restore with a checked allocator for the inputs and the window's own
// batches, releases what the caller owns, and checks that no byte is left
// allocated: the operators package releases all Arrow data it allocates.
func TestWindowReleasesArrowMemory(t *testing.T) {
	for _, kind := range []WindowKind{Tumbling, Sliding, Session} {
		t.Run(kind.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			spec := WindowSpec{Kind: kind, Size: 20 * us, Slide: 5 * us, Gap: 6 * us, AllowedLateness: 3 * us, Aggregates: allAggs(t)}
			w := newWin(t, spec)
			w.SetAllocator(mem)
			var rows []ev
			for i := range 200 {
				x, f, i32 := int64(i), float64(i)/3, int32(i%7)
				rows = append(rows, ev{ts: int64(i % 50), user: sp([]string{"a", "b", "c", "d"}[i%4]), n: &x, f: &f, s: sp([]string{"p", "q", "r"}[i%3]), i32: &i32})
			}
			rec := batchFrom(t, mem, rows[:100]...)
			late, err := w.Process(rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			release(late)
			out, err := w.Advance(30)
			if err != nil {
				t.Fatal(err)
			}
			release(out)
			// Rows older than the watermark come back as late rows.
			// A new key's session at time 0 is closed too.
			rec = batchFrom(t, mem, append([]ev{{ts: 0, user: sp("z")}}, rows[100:]...)...)
			sel := make([]int32, 0, rec.NumRows())
			for i := range int32(rec.NumRows()) {
				if i%2 == 0 {
					sel = append(sel, i)
				}
			}
			late, err = w.ProcessSelected(rec, sel)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			if late == nil || late.NumRows() == 0 {
				t.Error("no late rows; the test means to cover them")
			}
			release(late)
			snap, err := w.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			w2 := newWin(t, spec)
			w2.SetAllocator(mem)
			if err := w2.Restore(snap, 0, 128, w.Watermark()); err != nil {
				t.Fatal(err)
			}
			release(snap...)
			out, err = w2.Advance(1 << 40)
			if err != nil {
				t.Fatal(err)
			}
			if out == nil || out.NumRows() == 0 {
				t.Error("restored window emitted nothing")
			}
			release(out)
			out, err = w.Advance(1 << 40)
			if err != nil {
				t.Fatal(err)
			}
			release(out)
		})
	}
}

// TestTakeRowsReleases covers the late-row copy on its own.
func TestTakeRowsReleases(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := batchFrom(t, mem, ev{ts: 1, user: sp("a")}, ev{ts: 2, user: sp("b")}, ev{ts: 3})
	out, err := takeRows(rec, []int32{2, 0}, mem)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if out.NumRows() != 2 {
		t.Errorf("%d rows, want 2", out.NumRows())
	}
	out.Release()
}

// TestDeltaReleasesArrowMemory: SnapshotDelta's batches come from the
// window's allocator and ApplyDelta keeps none of its inputs.
func TestDeltaReleasesArrowMemory(t *testing.T) {
	for _, kind := range []WindowKind{Tumbling, Sliding, Session} {
		t.Run(kind.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			spec := WindowSpec{Kind: kind, Size: 20 * us, Slide: 5 * us, Gap: 6 * us, AllowedLateness: 3 * us, Aggregates: allAggs(t)}
			w := newWin(t, spec)
			w.SetAllocator(mem)
			var rows []ev
			for i := range 200 {
				x, f := int64(i), float64(i)/3
				rows = append(rows, ev{ts: int64(i % 50), user: sp([]string{"a", "b", "c", "d"}[i%4]), n: &x, f: &f, s: sp([]string{"p", "q", "r"}[i%3])})
			}
			process := func(rows []ev) {
				rec := batchFrom(t, mem, rows...)
				late, err := w.Process(rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
				release(late)
			}
			process(rows[:100])
			base, err := w.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			out, err := w.Advance(30)
			if err != nil {
				t.Fatal(err)
			}
			release(out)
			process(rows[100:])
			ups, tombs, err := w.SnapshotDelta()
			if err != nil {
				t.Fatal(err)
			}
			if len(ups) == 0 || len(tombs) == 0 {
				t.Fatalf("delta of %d upsert and %d tombstone batches; the test means to cover both", len(ups), len(tombs))
			}
			w2 := newWin(t, spec)
			w2.SetAllocator(mem)
			if err := w2.Restore(base, 0, 128, w.Watermark()); err != nil {
				t.Fatal(err)
			}
			if err := w2.ApplyDelta(ups, tombs, 0, 128); err != nil {
				t.Fatal(err)
			}
			release(base...)
			release(ups...)
			release(tombs...)
			for _, x := range []*Window{w, w2} {
				out, err := x.Advance(1 << 40)
				if err != nil {
					t.Fatal(err)
				}
				release(out)
			}
		})
	}
}
