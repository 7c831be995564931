package operators

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkWindowProcess: 100k-row batches, 10k string keys, 1-minute tumbling
// count() + sum(bytes). Each batch covers one minute; after each batch the
// previous minute is emitted, so state turns over like in production.
func BenchmarkWindowProcess(b *testing.B) {
	benchWindow(b, WindowSpec{Kind: Tumbling, Size: time.Minute})
}

// BenchmarkSliding is BenchmarkWindowProcess with 5-minute windows sliding
// by 1 minute: each row is in five windows.
func BenchmarkSliding(b *testing.B) {
	benchWindow(b, WindowSpec{Kind: Sliding, Size: 5 * time.Minute, Slide: time.Minute})
}

func benchWindow(b *testing.B, spec WindowSpec) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "event_time", Type: eventTimeType},
		{Name: "user_id", Type: arrow.BinaryTypes.String},
		{Name: "bytes", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	const rowsPerBatch, keys, minutes = 100_000, 10_000, 10
	rng := rand.New(rand.NewPCG(1, 2))
	users := make([]string, keys)
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
	}
	var batches []arrow.RecordBatch
	for m := range minutes {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := range rowsPerBatch {
			rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(m)*60e6 + int64(i)*600))
			rb.Field(1).(*array.StringBuilder).Append(users[rng.IntN(keys)])
			rb.Field(2).(*array.Int64Builder).Append(int64(rng.IntN(10_000)))
		}
		batches = append(batches, rb.NewRecordBatch())
		rb.Release()
	}
	defer release(batches...)
	spec.ID, spec.Keys, spec.EventTime = "bench", []string{"user_id"}, "event_time"
	spec.Aggregates = mustAggs(b, "clicks", "count()", "total_bytes", "sum(bytes)")
	runWindowBench(b, spec, schema, batches, rowsPerBatch, 1)
}

// runWindowBench processes batches[i % len] and advances to the start of
// its minute, with a new window every len(batches) iterations.
func runWindowBench(b *testing.B, spec WindowSpec, schema *arrow.Schema, batches []arrow.RecordBatch, rowsPerBatch, perEpoch int) {
	minutes := len(batches)
	newW := func() *Window {
		w, err := NewWindow(spec, schema, 128)
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	w := newW()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := i % minutes
		if m == 0 && i > 0 {
			b.StopTimer()
			w = newW()
			b.StartTimer()
		}
		late, err := w.Process(batches[m])
		if err != nil || late != nil {
			b.Fatalf("late=%v err=%v", late, err)
		}
		if (m+1)%perEpoch != 0 {
			continue
		}
		out, err := w.Advance(int64(m) * 60e6)
		if err != nil {
			b.Fatal(err)
		}
		release(out)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*float64(rowsPerBatch)/b.Elapsed().Seconds(), "rows/s")
	// The machine may be shared: also report throughput per CPU-second used.
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)*float64(rowsPerBatch)/cpu.Seconds(), "rows/cpu-s")
	}
	reportLiveHeap(b, w)
}

// reportLiveHeap reports the Go heap in use after a collection while w is
// alive (the inputs included): the state's footprint, compared across
// versions.
func reportLiveHeap(b *testing.B, w *Window) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MiB")
	runtime.KeepAlive(w)
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWindow1MKeys: 1-minute tumbling count() + sum(bytes) over 1M
// string keys, 100k-row batches (half Zipf-skewed hot keys, half uniform),
// one minute per batch, each batch emitted at the next.
func BenchmarkWindow1MKeys(b *testing.B) {
	bench1MKeys(b, WindowSpec{Kind: Tumbling, Size: time.Minute}, false)
}

// BenchmarkWindow1MKeysDict is BenchmarkWindow1MKeys with the key column
// dictionary-encoded per batch (as a Parquet reader can hand it): each
// distinct key of a batch is looked up once.
func BenchmarkWindow1MKeysDict(b *testing.B) {
	bench1MKeys(b, WindowSpec{Kind: Tumbling, Size: time.Minute}, true)
}

// BenchmarkWindow1MKeysEpoch is BenchmarkWindow1MKeysDict in the shape of
// the bench module's keys1m catch-up: an epoch of ten 100k-row batches, one
// minute each, whose windows all stay open until the epoch ends and is
// emitted at once (about 900k windows per Advance), three epochs in turn.
func BenchmarkWindow1MKeysEpoch(b *testing.B) {
	bench1MKeysN(b, WindowSpec{Kind: Tumbling, Size: time.Minute}, true, 30, 10)
}

func bench1MKeys(b *testing.B, spec WindowSpec, dict bool) {
	bench1MKeysN(b, spec, dict, 10, 1)
}

// bench1MKeysN runs minutes 100k-row batches, one minute each, over 1M
// keys, advancing the watermark after every perEpoch batches.
func bench1MKeysN(b *testing.B, spec WindowSpec, dict bool, minutes, perEpoch int) {
	const rowsPerBatch, keys = 100_000, 1_000_000
	rng := rand.New(rand.NewPCG(3, 4))
	users := make([]string, keys)
	for i := range users {
		users[i] = fmt.Sprintf("user-%07d", i)
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 8, keys-1)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "event_time", Type: eventTimeType},
		{Name: "user_id", Type: arrow.BinaryTypes.String},
		{Name: "bytes", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	var batches []arrow.RecordBatch
	for m := range minutes {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := range rowsPerBatch {
			rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(m)*60e6 + int64(i)*600))
			u := rng.IntN(keys)
			if rng.IntN(2) == 0 {
				u = int(zipf.Uint64())
			}
			rb.Field(1).(*array.StringBuilder).Append(users[u])
			rb.Field(2).(*array.Int64Builder).Append(int64(i % 10_000))
		}
		rec := rb.NewRecordBatch()
		rb.Release()
		if dict {
			rec = dictEncodeCol(b, rec, 1)
		}
		batches = append(batches, rec)
	}
	defer release(batches...)
	spec.ID, spec.Keys, spec.EventTime = "bench", []string{"user_id"}, "event_time"
	spec.Aggregates = mustAggs(b, "clicks", "count()", "total_bytes", "sum(bytes)")
	runWindowBench(b, spec, batches[0].Schema(), batches, rowsPerBatch, perEpoch)
}

// BenchmarkCountDistinct24h: one 24-hour tumbling window per user with
// count() and count_distinct(page), 200k users and 5k pages, 100k-row
// batches; every batch is followed by SnapshotDelta (an epoch's state
// write), so the cost of a growing state shows. A new window every 10
// batches.
func BenchmarkCountDistinct24h(b *testing.B) {
	const rowsPerBatch, users, pages, batchesPerDay = 100_000, 200_000, 5_000, 10
	rng := rand.New(rand.NewPCG(7, 8))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "event_time", Type: eventTimeType},
		{Name: "user_id", Type: arrow.BinaryTypes.String},
		{Name: "page", Type: arrow.BinaryTypes.String},
	}, nil)
	userNames := make([]string, users)
	for i := range userNames {
		userNames[i] = fmt.Sprintf("user-%07d", i)
	}
	pageNames := make([]string, pages)
	for i := range pageNames {
		pageNames[i] = fmt.Sprintf("/page/%d", i)
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(9, 10)), 1.2, 4, pages-1)
	var batches []arrow.RecordBatch
	for m := range batchesPerDay {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := range rowsPerBatch {
			rb.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(m)*3600e6 + int64(i)*1000))
			rb.Field(1).(*array.StringBuilder).Append(userNames[rng.IntN(users)])
			rb.Field(2).(*array.StringBuilder).Append(pageNames[zipf.Uint64()])
		}
		batches = append(batches, rb.NewRecordBatch())
		rb.Release()
	}
	defer release(batches...)
	spec := WindowSpec{ID: "bench", Keys: []string{"user_id"}, EventTime: "event_time", Kind: Tumbling, Size: 24 * time.Hour,
		Aggregates: mustAggs(b, "views", "count()", "pages", "count_distinct(page)")}
	newW := func() *Window {
		w, err := NewWindow(spec, schema, 128)
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	w := newW()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := i % batchesPerDay
		if m == 0 && i > 0 {
			b.StopTimer()
			w = newW()
			b.StartTimer()
		}
		late, err := w.Process(batches[m])
		if err != nil || late != nil {
			b.Fatalf("late=%v err=%v", late, err)
		}
		ups, tombs, err := w.SnapshotDelta()
		if err != nil {
			b.Fatal(err)
		}
		release(ups...)
		release(tombs...)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*float64(rowsPerBatch)/b.Elapsed().Seconds(), "rows/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)*float64(rowsPerBatch)/cpu.Seconds(), "rows/cpu-s")
	}
	reportLiveHeap(b, w)
}

// BenchmarkSliding1MKeys is BenchmarkWindow1MKeys with 5-minute windows
// sliding by 1 minute.
func BenchmarkSliding1MKeys(b *testing.B) {
	bench1MKeys(b, WindowSpec{Kind: Sliding, Size: 5 * time.Minute, Slide: time.Minute}, false)
}

// dictEncodeCol returns rec with string column c dictionary-encoded (int32
// indices, values in first-seen order); it releases rec.
func dictEncodeCol(b *testing.B, rec arrow.RecordBatch, c int) arrow.RecordBatch {
	defer rec.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	db := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.BinaryDictionaryBuilder)
	defer db.Release()
	col := rec.Column(c).(*array.String)
	for i := range col.Len() {
		if err := db.AppendString(col.Value(i)); err != nil {
			b.Fatal(err)
		}
	}
	arr := db.NewArray()
	defer arr.Release()
	cols := slices.Clone(rec.Columns())
	cols[c] = arr
	fields := slices.Clone(rec.Schema().Fields())
	fields[c].Type = dt
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// BenchmarkSortOrds sorts 450k (window start, key) sort keys as one
// Advance of the keys1m benchmark does (six window starts, keys "u<n>"
// skewed to low n): the radix sort against a comparison sort.
func BenchmarkSortOrds(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 450_000
	src := make([]slotOrd, n)
	keys := make([]string, n)
	for i := range src {
		k := fmt.Sprintf("\x04\x07u%d", int(1e6*rng.Float64()*rng.Float64()))
		keys[i] = k
		src[i] = slotOrd{major: int64(rng.IntN(6))*60e6 + 1704067200000000, pfx: prefix8(k, 1), slot: int32(i), kid: int32(i)}
	}
	key := func(kid int32) string { return keys[kid] }
	ords := make([]slotOrd, n)
	perm := make([]int32, n)
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(ords, src)
			radixSortOrds(ords, perm, key)
		}
	})
	b.Run("pdqsort", func(b *testing.B) {
		for b.Loop() {
			copy(ords, src)
			slices.SortFunc(ords, func(x, y slotOrd) int { return cmpSlotOrd(key, &x, &y) })
		}
	})
}
