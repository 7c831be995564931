package expr

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// clickBatch is n rows of the clicks schema: 4 pages, bytes uniform in [0, 1000).
func clickBatch(b *testing.B, n int) arrow.RecordBatch {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	bld := array.NewRecordBuilder(memory.NewGoAllocator(), clickSchema)
	defer bld.Release()
	pages := []string{"home", "cart", "search", "product/42"}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := 0; i < n; i++ {
		bld.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(start + int64(i)*1000))
		bld.Field(1).(*array.StringBuilder).Append("user-" + string(rune('a'+r.IntN(26))))
		bld.Field(2).(*array.StringBuilder).Append(pages[r.IntN(len(pages))])
		bld.Field(3).(*array.Int64Builder).Append(int64(r.IntN(1000)))
	}
	return bld.NewRecordBatch()
}

// cpuTime is the CPU time (user + system) this process has used. Benchmarks
// report rows per CPU second beside rows per wall second, because on a shared
// machine wall time measures the neighbours too.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportRows(b *testing.B, rows int, cpu0 time.Duration) {
	total := float64(b.N) * float64(rows)
	b.ReportMetric(total/b.Elapsed().Seconds(), "rows/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(total/cpu.Seconds(), "rows/cpu-s")
	}
}

func benchFilter(b *testing.B, src string) {
	const n = 100_000
	rec := clickBatch(b, n)
	defer rec.Release()
	e, err := CompileFilter(src, clickSchema)
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	cpu0 := cpuTime()
	for b.Loop() {
		out, _, err := Filter(e, rec, mem)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	reportRows(b, n, cpu0)
}

// BenchmarkFilter is the acceptance benchmark: target >= 50M rows/s.
func BenchmarkFilter(b *testing.B) { benchFilter(b, `bytes > 100 and page != "home"`) }

func BenchmarkFilterInt(b *testing.B) { benchFilter(b, `bytes > 100`) }

func BenchmarkFilterTimestamp(b *testing.B) {
	benchFilter(b, `event_time >= timestamp("2024-01-01T00:00:30Z")`)
}

func BenchmarkEvalArith(b *testing.B) {
	const n = 100_000
	rec := clickBatch(b, n)
	defer rec.Release()
	e, err := Compile("bytes * 8 / 1024 + 1", clickSchema)
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	cpu0 := cpuTime()
	for b.Loop() {
		arr, err := e.Eval(rec, mem)
		if err != nil {
			b.Fatal(err)
		}
		arr.Release()
	}
	reportRows(b, n, cpu0)
}

// BenchmarkPredicate is the predicate of BenchmarkFilter without the row copy.
func BenchmarkPredicate(b *testing.B) {
	const n = 100_000
	rec := clickBatch(b, n)
	defer rec.Release()
	e, err := CompileFilter(`bytes > 100 and page != "home"`, clickSchema)
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		if _, _, err := e.selection(rec); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, n, cpu0)
}

func benchEval(b *testing.B, src string) {
	const n = 100_000
	rec := clickBatch(b, n)
	defer rec.Release()
	e, err := Compile(src, clickSchema)
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	cpu0 := cpuTime()
	for b.Loop() {
		arr, err := e.Eval(rec, mem)
		if err != nil {
			b.Fatal(err)
		}
		arr.Release()
	}
	reportRows(b, n, cpu0)
}

// BenchmarkEvalCase is a CASE-based banding (the Nexmark price-band shape).
func BenchmarkEvalCase(b *testing.B) {
	benchEval(b, `case(bytes < 100, 'small', bytes < 500, 'medium', 'large')`)
}

func BenchmarkEvalStringFuncs(b *testing.B) {
	benchEval(b, `concat(upper(substring(page, 1, 4)), '-', split_part(user_id, '-', 2))`)
}

func BenchmarkEvalDateTrunc(b *testing.B) { benchEval(b, `date_trunc('hour', event_time)`) }

func BenchmarkEvalFormatTime(b *testing.B) { benchEval(b, `format_time(event_time, '%F %T')`) }
