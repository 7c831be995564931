package spec

import (
	"strings"
	"testing"
)

const kafkaSpec = `name: k
source:
  type: kafka
  brokers: [localhost:9092, "b2:9093"]
  topic: clicks
  format: jsonl
  schema: {ts: timestamp, user: string}
  event_time: ts
  max_records_per_epoch: 500
  idle_timeout: 30s
  on_missing_offsets: skip
  auth_file: secrets/kafka.env
  columns: {partition: kp, offset: ko, key: kk}
sink: {type: files, url: out, format: parquet}
state: {url: st}
`

func TestKafkaSourceSpec(t *testing.T) {
	p, err := Parse("k.yaml", []byte(kafkaSpec), "/specs")
	if err != nil {
		t.Fatal(err)
	}
	s := p.Source
	k := s.Kafka
	if s.Type != SourceKafka || len(k.Brokers) != 2 || k.Topics[0] != "clicks" || k.MaxRecordsPerEpoch != 500 ||
		k.OnMissingOffsets != MissingSkip || k.AuthFile != "/specs/secrets/kafka.env" || s.Watermark.IdleTimeout.Seconds() != 30 {
		t.Fatalf("decoded %+v %+v", s, k)
	}
	var names []string
	for _, f := range s.Schema {
		names = append(names, f.Name+":"+string(f.Type))
	}
	if got := strings.Join(names, " "); got != "ts:timestamp user:string kp:int32 ko:int64 kk:string" {
		t.Fatalf("schema with the metadata columns = %s", got)
	}
	// event_time: kafka_timestamp adds the timestamp column.
	p, err = Parse("k.yaml", []byte(strings.Replace(kafkaSpec, "event_time: ts", "event_time: kafka_timestamp", 1)), "/specs")
	if err != nil {
		t.Fatal(err)
	}
	if f := p.Source.Schema[len(p.Source.Schema)-2]; f.Name != KafkaTimestamp || f.Type != TypeTimestampMS {
		t.Fatalf("timestamp column = %+v", f)
	}
}

func TestKafkaSourceSpecErrors(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"  brokers: [localhost:9092, \"b2:9093\"]\n", "", "source.brokers: required for type: kafka"},
		{"localhost:9092", "localhost", `source.brokers[0]: invalid broker "localhost": want host:port`},
		{"localhost:9092", "user:pw@localhost:9092", "credentials do not go in the spec"},
		{"  topic: clicks\n", "", "source.topic: required for type: kafka"},
		{"topic: clicks", "topic: \"a/b\"", `source.topic: invalid topic name "a/b"`},
		{"topic: clicks", "topics: [a, a]", `source.topics: topic "a" named twice`},
		{"format: jsonl", "format: parquet", `source.format: invalid value "parquet" for a kafka source`},
		{"on_missing_offsets: skip", "on_missing_offsets: ignore", `source.on_missing_offsets: invalid value "ignore" (allowed: fail, skip)`},
		{"max_records_per_epoch: 500", "max_records_per_epoch: 0", "source.max_records_per_epoch: must be >= 1"},
		{"  type: kafka\n", "  type: kafka\n  url: somewhere\n", "source.url: a kafka source has no url"},
		{"  type: kafka\n", "  type: kafka\n  max_files_per_epoch: 3\n", "source.max_files_per_epoch: not for a kafka source"},
		{"  idle_timeout: 30s\n", "  idle_timeout: 30s\n  watermark: {idle_timeout: 1m}\n", "set the idle timeout once"},
		{"columns: {partition: kp, offset: ko, key: kk}", "columns: {partition: user}", "source.schema.user: duplicate column"},
		{"columns: {partition: kp, offset: ko, key: kk}", "columns: {partiton: kp}", "source.columns.partiton: unknown field"},
		{"  type: kafka\n", "  type: files\n  url: in\n", "source.type: fields brokers, topic"},
		{"format: jsonl", "format: jsonl\n  avro: {confluent: true}", "source.avro: only for format: avro"},
		{"format: jsonl", "format: avro\n  avro: {confluent: yes-please}", "source.avro.confluent"},
		{"format: jsonl", "format: avro\n  avro: {schema: x}", "source.avro.schema: unknown field"},
	} {
		y := strings.Replace(kafkaSpec, tc.old, tc.new, 1)
		if y == kafkaSpec {
			t.Fatalf("%q is not in the spec", tc.old)
		}
		_, err := Parse("k.yaml", []byte(y), "/specs")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pw@") {
			t.Errorf("%q -> %q: error %v, want one containing %q", tc.old, tc.new, err, tc.want)
		}
	}
}

// TestKafkaGraph: a kafka source under sources: in the graph form, joined
// with a files source.
func TestKafkaGraph(t *testing.T) {
	const g = `name: g
sources:
  files: {type: files, url: in, format: jsonl, schema: {ts: timestamp, user: string}, event_time: ts}
  clicks:
    type: kafka
    brokers: [localhost:9092]
    topic: clicks
    format: jsonl
    schema: {user: string}
    event_time: kafka_timestamp
    max_records_per_epoch: 50
stages:
  - name: j
    inputs: [clicks, files]
    join: {left_on: [user], right_on: [user], window: {tumbling: 1m}}
sinks:
  out: {input: j, type: files, url: out, format: parquet}
state: {url: st}
`
	p, err := Parse("g.yaml", []byte(g), "/specs")
	if err != nil {
		t.Fatal(err)
	}
	var k *KafkaSource
	for _, ns := range p.Sources {
		if ns.Name == "clicks" {
			k = ns.Source.Kafka
		}
	}
	if k == nil || k.Topics[0] != "clicks" || k.MaxRecordsPerEpoch != 50 {
		t.Fatalf("sources.clicks.kafka = %+v", k)
	}
	// a kafka source's own fields are still checked at their line
	_, err = Parse("g.yaml", []byte(strings.Replace(g, "topic: clicks", "topic: cl/icks", 1)), "/specs")
	if want := "g.yaml:7:12: sources.clicks.topic"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// TestKafkaAvroSpec: format: avro on a kafka source, with a schema file
// (relative to the spec) or the writer schema derived from the value
// columns as Flink derives it; refused on a files source.
func TestKafkaAvroSpec(t *testing.T) {
	y := strings.Replace(kafkaSpec, "format: jsonl", "format: avro\n  avro: {schema_file: click.avsc, confluent: true}", 1)
	p, err := Parse("k.yaml", []byte(y), "/specs")
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Source.Kafka.Avro; p.Source.Format != Avro || a == nil || a.SchemaFile != "/specs/click.avsc" || !a.Confluent {
		t.Fatalf("decoded %s %+v", p.Source.Format, a)
	}
	p, err = Parse("k.yaml", []byte(strings.Replace(kafkaSpec, "format: jsonl", "format: avro", 1)), "/specs")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Source.AvroSchema()
	if err != nil {
		t.Fatal(err)
	}
	// The value columns only: not the metadata columns kp, ko, kk.
	want := `{"fields":[{"name":"ts","type":["null",{"logicalType":"timestamp-millis","type":"long"}],"default":null},` +
		`{"name":"user","type":["null","string"],"default":null}],"name":"record","type":"record"}`
	if got != want {
		t.Fatalf("derived schema\n%s\nwant\n%s", got, want)
	}
	files := "name: f\nsource: {type: files, url: in, format: avro, schema: {a: string}}\nsink: {type: files, url: out, format: parquet}\nstate: {url: st}\n"
	if _, err := Parse("f.yaml", []byte(files), "/specs"); err == nil || !strings.Contains(err.Error(), `source.format: invalid value "avro"`) {
		t.Fatalf("format avro on a files source: %v", err)
	}
}
