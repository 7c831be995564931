package engine

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
)

// fuzzWindow is a window over (event_time, user_id, bytes) with every kind
// of accumulator.
func fuzzWindow(t testing.TB) (*operators.Window, *arrow.Schema) {
	in := arrow.NewSchema([]arrow.Field{
		{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "user_id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "bytes", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	ws := operators.WindowSpec{ID: "window", Keys: []string{"user_id"}, EventTime: "event_time", Kind: operators.Tumbling, Size: time.Minute}
	for _, a := range [][2]string{{"c", "count()"}, {"s", "sum(bytes)"}, {"a", "avg(bytes)"}, {"d", "count_distinct(user_id)"}, {"f", "first(bytes)"}, {"m", "max(bytes)"}} {
		as, err := operators.ParseAggregate(a[0], a[1])
		if err != nil {
			t.Fatal(err)
		}
		ws.Aggregates = append(ws.Aggregates, as)
	}
	w, err := operators.NewWindow(ws, in, 128)
	if err != nil {
		t.Fatal(err)
	}
	return w, in
}

// FuzzStateFile feeds arbitrary bytes to the path a restore takes with a
// state file (Parquet decode filtered by key group, then Window.Restore,
// ApplyDelta and ApplyMerges): it may refuse, never panic.
func FuzzStateFile(f *testing.F) {
	w, in := fuzzWindow(f)
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, in)
	for i := range 50 {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * int64(7*time.Second/time.Microsecond)))
		b.Field(1).(*array.StringBuilder).Append(string(rune('a' + i%5)))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	if _, err := w.Process(rec); err != nil {
		f.Fatal(err)
	}
	snap, err := w.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	data, err := formats.EncodeParquet(w.StateSchema(), snap, formats.EncodeOptions{NoDictionary: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte("PAR1"))
	// A merges file: rows into the windows the snapshot holds.
	if _, err := w.Process(rec); err != nil {
		f.Fatal(err)
	}
	_, merges, _, err := w.SnapshotDeltaMerges()
	if err != nil || len(merges) == 0 {
		f.Fatalf("no merge rows (%v)", err)
	}
	if data, err = formats.EncodeParquet(w.StateSchema(), merges, formats.EncodeOptions{NoDictionary: true}); err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, recs, err := formats.ReadParquetFiltered(data, mem, operators.ColKeyGroup, 0, 128)
		if err != nil {
			return
		}
		w, _ := fuzzWindow(t)
		if err := w.Restore(recs, 0, 128, manifest.NoWatermark); err != nil {
			return
		}
		_ = w.ApplyMerges(recs, 0, 128) // into the windows just restored
		w2, _ := fuzzWindow(t)
		_ = w2.ApplyDelta(recs, nil, 0, 128)
		w3, _ := fuzzWindow(t)
		_ = w3.ApplyMerges(recs, 0, 128) // none open: refused
	})
}
