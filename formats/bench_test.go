package formats

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const benchRows = 100_000

// cpuTime is the CPU time (user+system) used by the process so far. The
// rows/cpu-s metric it feeds is stable on a shared, loaded machine where
// wall-clock rows/s is not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportRows(b *testing.B, rowsPerOp int, cpu0 time.Duration) {
	total := float64(rowsPerOp) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "rows/s")
	if c := cpuTime() - cpu0; c > 0 {
		b.ReportMetric(total/c.Seconds(), "rows/cpu-s")
	}
}

func BenchmarkDecodeJSONL(b *testing.B) {
	data := genClicks(benchRows)
	// all: every key is a declared column; pruned: "page" is not (as when
	// projection pushdown drops a column the pipeline does not read).
	for _, c := range []struct {
		name   string
		schema *arrow.Schema
	}{
		{"all", clickSchema(b)},
		{"pruned", mustSchema(b, Field{"event_time", "timestamp"}, Field{"user_id", "string"}, Field{"bytes", "int64"})},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := DecodeOptions{Schema: c.schema, EventTime: "event_time", Mem: memory.NewGoAllocator(), Parallelism: 1}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				d, err := Decode("jsonl", "bench.jsonl", data, opts)
				if err != nil || d.Rows != benchRows {
					b.Fatal(err, d.Rows)
				}
				d.Release()
			}
			reportRows(b, benchRows, cpu0)
		})
	}
}

func BenchmarkDecodeJSONLParallel(b *testing.B) {
	data := genClicks(benchRows * 4)
	opts := DecodeOptions{Schema: clickSchema(b), EventTime: "event_time", Mem: memory.NewGoAllocator()}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		d, err := Decode("jsonl", "bench.jsonl", data, opts)
		if err != nil || d.Rows != 4*benchRows {
			b.Fatal(err, d.Rows)
		}
		d.Release()
	}
	reportRows(b, 4*benchRows, cpu0)
}

func BenchmarkDecodeParquet(b *testing.B) {
	d, err := Decode("jsonl", "gen.jsonl", genClicks(benchRows), DecodeOptions{Schema: clickSchema(b)})
	if err != nil {
		b.Fatal(err)
	}
	data, err := EncodeParquet(d.Schema, d.Batches, EncodeOptions{Compression: "snappy"})
	d.Release()
	if err != nil {
		b.Fatal(err)
	}
	// flat: the column-chunk reader; general: pqarrow's record reader.
	for _, general := range []bool{false, true} {
		name := map[bool]string{false: "flat", true: "general"}[general]
		b.Run(name, func(b *testing.B) {
			opts := DecodeOptions{Schema: clickSchema(b), EventTime: "event_time", Mem: memory.NewGoAllocator(), generalParquet: general}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				d, err := Decode("parquet", "bench.parquet", data, opts)
				if err != nil || d.Rows != benchRows {
					b.Fatal(err)
				}
				d.Release()
			}
			reportRows(b, benchRows, cpu0)
		})
	}
}

// genClicksCSV generates the rows of genClicks as CSV with a header.
func genClicksCSV(n int) []byte {
	schema, err := SchemaFromFields([]Field{{"event_time", "string"}, {"user_id", "string"}, {"page", "string"}, {"bytes", "int64"}})
	if err != nil {
		panic(err)
	}
	d, err := Decode("jsonl", "gen.jsonl", genClicks(n), DecodeOptions{Schema: schema})
	if err != nil {
		panic(err)
	}
	defer d.Release()
	var sb strings.Builder
	sb.WriteString("event_time,user_id,page,bytes\n")
	for _, r := range rows(d.Batches) {
		fmt.Fprintf(&sb, "%s,%s,%s,%d\n", r[0], r[1], r[2], r[3])
	}
	return []byte(sb.String())
}

func BenchmarkDecodeCSV(b *testing.B) {
	data := genClicksCSV(benchRows)
	opts := DecodeOptions{Schema: clickSchema(b), EventTime: "event_time", Mem: memory.NewGoAllocator()}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		d, err := Decode("csv", "bench.csv", data, opts)
		if err != nil || d.Rows != benchRows {
			b.Fatal(err, d.Rows)
		}
		d.Release()
	}
	reportRows(b, benchRows, cpu0)
}
