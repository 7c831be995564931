package formats

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkEncodeParquet encodes 100k click rows as the engine writes
// outputs (snappy) and state (snappy, no dictionary).
func BenchmarkEncodeParquet(b *testing.B) {
	d, err := Decode("jsonl", "gen.jsonl", genClicks(benchRows), DecodeOptions{Schema: clickSchema(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Release()
	for _, c := range []struct {
		name string
		opts EncodeOptions
	}{
		{"output", EncodeOptions{Compression: "snappy", Mem: memory.NewGoAllocator()}},
		{"state", EncodeOptions{Compression: "snappy", NoDictionary: true, Mem: memory.NewGoAllocator()}},
		{"state16k", EncodeOptions{Compression: "snappy", NoDictionary: true, IntStatsOnly: true, RowGroupRows: 16 << 10, Mem: memory.NewGoAllocator()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			var n int
			for range b.N {
				data, err := EncodeParquet(d.Schema, d.Batches, c.opts)
				if err != nil {
					b.Fatal(err)
				}
				n = len(data)
			}
			b.ReportMetric(float64(n), "file-bytes")
			reportRows(b, benchRows, cpu0)
		})
	}
}

// BenchmarkReadStateParquet reads back 100k click rows written as the
// engine writes state (16k-row row groups, no dictionary), whole and by
// key range, as a restore does.
func BenchmarkReadStateParquet(b *testing.B) {
	d, err := Decode("jsonl", "gen.jsonl", genClicks(benchRows), DecodeOptions{Schema: clickSchema(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Release()
	data, err := EncodeParquet(d.Schema, d.Batches, EncodeOptions{Compression: "snappy", NoDictionary: true, RowGroupRows: 16 << 10})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for range b.N {
		_, bs, err := ReadParquet(data, memory.NewGoAllocator())
		if err != nil {
			b.Fatal(err)
		}
		releaseAll(bs)
	}
	reportRows(b, benchRows, cpu0)
}
