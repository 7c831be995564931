package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/kafka/kafkatest"
)

// kafkaAvroWriter is a writer schema other than the derived one: fields in
// another order, one the pipeline does not declare, the timestamp in
// microseconds, the user a union.
const kafkaAvroWriter = `{"type": "record", "name": "click", "namespace": "test", "fields": [
  {"name": "user", "type": ["null", "string"], "default": null},
  {"name": "extra", "type": "int"},
  {"name": "bytes", "type": "long"},
  {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}
]}`

// TestKafkaAvro reads Avro record values: with the writer schema derived
// from the value columns (bare Avro binary, as Flink's 'avro' format
// writes), and with a schema file and the Confluent wire format. The rows
// are exactly the records (partition and offset included), over two runs;
// values that are not Avro of the schema are rejected with their offset.
func TestKafkaAvro(t *testing.T) {
	for _, c := range []struct {
		name, extra, writer string
		confluent           bool
	}{
		{"derived", "", "", false},
		{"schema-file", "\n  avro: {schema_file: click.avsc, confluent: true}", kafkaAvroWriter, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := kafkatest.Start(t)
			topic := b.Topic("avro", 2)
			t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			tmpl := strings.Replace(kafkaStateless, "format: jsonl", "format: avro"+c.extra, 1)
			tmpl = strings.Replace(tmpl, "event_time: ts", "event_time: ts\n  rejected_url: \"{{rejected}}\"", 1)
			p, dir := kafkaPipeline(t, b, topic, tmpl)
			writer := c.writer
			if writer == "" {
				var err error
				if writer, err = p.Source.AvroSchema(); err != nil {
					t.Fatal(err)
				}
			} else {
				// The spec names the file relative to itself: write it where
				// the spec was parsed (kafkaPipeline's directory).
				if err := os.WriteFile(filepath.Join(dir, "click.avsc"), []byte(writer), 0o644); err != nil {
					t.Fatal(err)
				}
				if p.Source.Kafka.Avro.SchemaFile != filepath.Join(dir, "click.avsc") {
					t.Fatalf("schema_file = %s", p.Source.Kafka.Avro.SchemaFile)
				}
			}
			ws := avro.MustParse(writer)
			produce := func(from, n int) {
				var ms []kafkatest.Msg
				for part := int32(0); part < 2; part++ {
					for i := from; i < from+n; i++ {
						v := map[string]any{"ts": t0.Add(time.Duration(i) * time.Second), "user": fmt.Sprintf("u%d", i%3),
							"bytes": int64(int(part)*1000 + i), "extra": int32(i)}
						data, err := ws.Encode(v)
						if err != nil {
							t.Fatal(err)
						}
						if c.confluent {
							data = append([]byte{0, 0, 0, 0, 1}, data...)
						}
						ms = append(ms, kafkatest.Msg{Partition: part, Value: string(data)})
					}
				}
				b.Produce(topic, ms...)
			}
			produce(0, 25)
			run(t, p, engine.Options{})
			if got, want := committedRows(t, p), wantKafkaRows(2, 25, t0); !slices.Equal(got, want) {
				t.Fatalf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// Values that are not Avro of the schema: rejected, offsets 25
			// and 26 of partition 1; the rows stay those of the first run.
			b.Produce(topic, kafkatest.Msg{Partition: 1, Value: "not avro at all"}, kafkatest.Msg{Partition: 1, Value: "\x00"})
			res := run(t, p, engine.Options{})
			if res.RowsRejected != 2 {
				t.Fatalf("rejected %d, want 2", res.RowsRejected)
			}
			if rj, want := readRejected(t, p.Source.RejectedURL), []string{topic + "/1@25", topic + "/1@26"}; !slices.Equal(rj, want) {
				t.Fatalf("rejected = %v, want %v", rj, want)
			}
			if got := committedRows(t, p); len(got) != 50 {
				t.Fatalf("%d rows after the second run, want 50", len(got))
			}
		})
	}
}
