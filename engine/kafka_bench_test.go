package engine_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/kafka/kafkatest"
	"github.com/floe-dev/floe/spec"
)

const benchRecords = 60000

// benchWindowSpec is the window pipeline both benchmarks run: source
// replaced by the caller.
const benchWindowSpec = `
name: kbench
source:
%s
operators:
  - window: {key: [user], tumbling: 1m, aggregates: {clicks: "count()", total: "sum(bytes)"}}
sink: {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}"}
`

// BenchmarkKafkaWindow: records per CPU-second from the broker (kfake, in
// the same process: its CPU is counted too) through a tumbling window, in
// epochs of 20000 records. BenchmarkFilesWindow reads the same rows from
// JSON-lines files (3 files of 20000 rows) for comparison.
func BenchmarkKafkaWindow(b *testing.B) {
	br := kafkatest.Start(b)
	topic := br.Topic("bench", 3)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for p := int32(0); p < 3; p++ {
		var ms []kafkatest.Msg
		for i := 0; i < benchRecords/3; i++ {
			ms = append(ms, kafkatest.Msg{Partition: p, Value: benchLine(i, t0)})
		}
		br.Produce(topic, ms...)
	}
	src := fmt.Sprintf(`  type: kafka
  brokers: [%s]
  topic: %s
  format: jsonl
  schema: {ts: timestamp, user: string, bytes: int64}
  event_time: ts
  max_records_per_epoch: 20000`, strings.Join(br.Brokers(), ", "), topic)
	benchWindow(b, src)
}

func BenchmarkFilesWindow(b *testing.B) {
	e := fileEnv(b)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for f := 0; f < 3; f++ {
		var lines []string
		for i := 0; i < benchRecords/3; i++ {
			lines = append(lines, benchLine(i, t0))
		}
		e.put(b, fmt.Sprintf("part-%d.jsonl", f), jsonl(lines...))
	}
	src := fmt.Sprintf(`  type: files
  url: %q
  format: jsonl
  schema: {ts: timestamp, user: string, bytes: int64}
  event_time: ts
  max_files_per_epoch: 1`, e.source)
	benchWindow(b, src)
}

func benchLine(i int, t0 time.Time) string {
	return fmt.Sprintf(`{"ts":"%s","user":"u%d","bytes":%d}`, t0.Add(time.Duration(i)*10*time.Millisecond).Format(time.RFC3339Nano), i%100, i%1000)
}

func benchWindow(b *testing.B, src string) {
	var cpu time.Duration
	for n := 0; n < b.N; n++ {
		d := b.TempDir()
		r := strings.NewReplacer("{{sink}}", fileURL(filepath.Join(d, "out")), "{{state}}", fileURL(filepath.Join(d, "state")))
		p := mustParse(b, r.Replace(fmt.Sprintf(benchWindowSpec, src)), d)
		c0 := cpuTime(b)
		res := run(b, p, engine.Options{Drain: true})
		cpu += cpuTime(b) - c0
		if res.Rows != benchRecords {
			b.Fatalf("rows = %d, want %d", res.Rows, benchRecords)
		}
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/cpu.Seconds(), "records/cpu-s")
}

func mustParse(b *testing.B, y, dir string) *spec.Pipeline {
	b.Helper()
	p, err := spec.Parse("bench.yaml", []byte(y), dir)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkKafkaAvroWindow is BenchmarkKafkaWindow with the same records
// as Avro values (the schema derived from the value columns): the cost of
// decoding Avro and rendering it as JSON lines.
func BenchmarkKafkaAvroWindow(b *testing.B) {
	br := kafkatest.Start(b)
	topic := br.Topic("benchavro", 3)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	src := fmt.Sprintf(`  type: kafka
  brokers: [%s]
  topic: %s
  format: avro
  schema: {ts: timestamp, user: string, bytes: int64}
  event_time: ts
  max_records_per_epoch: 20000`, strings.Join(br.Brokers(), ", "), topic)
	p := mustParse(b, fmt.Sprintf(benchWindowSpec, src), b.TempDir())
	schema, err := p.Source.AvroSchema()
	if err != nil {
		b.Fatal(err)
	}
	ws := avro.MustParse(schema)
	for part := int32(0); part < 3; part++ {
		var ms []kafkatest.Msg
		for i := 0; i < benchRecords/3; i++ {
			data, err := ws.Encode(map[string]any{"ts": t0.Add(time.Duration(i) * 10 * time.Millisecond), "user": fmt.Sprintf("u%d", i%100), "bytes": int64(i % 1000)})
			if err != nil {
				b.Fatal(err)
			}
			ms = append(ms, kafkatest.Msg{Partition: part, Value: string(data)})
		}
		br.Produce(topic, ms...)
	}
	benchWindow(b, src)
}
