package flinksql

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/floe-dev/floe/spec"
)

// kafkaDDL is a kafka table in Flink's own words: the record timestamp,
// partition and offset as METADATA columns (declared first, as Flink's
// docs do), a topic list, a group id floe ignores.
const kafkaDDL = `CREATE TABLE clicks (
  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
  ` + "`partition`" + ` BIGINT METADATA VIRTUAL,
  user_id STRING,
  bytes BIGINT,
  ` + "`offset`" + ` BIGINT METADATA VIRTUAL,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = '%[1]s',
  'properties.bootstrap.servers' = '%[2]s',
  'properties.group.id' = 'ignored-by-floe',
  'format' = 'json'%[3]s
);
`

// kafkaWindowSQL and kafkaWindowYAML are one pipeline in both front doors.
const kafkaWindowSQL = kafkaDDL + `CREATE TABLE per_user (user_id STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), clicks BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '%[4]s', 'format' = 'parquet');
SET 'pipeline.name' = 'ktwin';
SET 'state.url' = '%[5]s';
INSERT INTO per_user
SELECT user_id, window_start, window_end, COUNT(*) AS clicks, SUM(bytes) AS total
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY user_id, window_start, window_end;
`

const kafkaWindowYAML = `name: ktwin
source:
  type: kafka
  brokers: [%[2]s]
  topic: %[1]s
  format: jsonl
  schema: {user_id: string, bytes: int64}
  event_time: ts
  columns: {partition: partition, offset: offset, timestamp: ts}%[3]s
  watermark: {max_out_of_orderness: 5s}
operators:
  - window: {key: [user_id], tumbling: 1m, aggregates: {clicks: "count()", total: "sum(bytes)"}}
sink: {type: files, url: %[4]q, format: parquet}
state: {url: %[5]q}
`

// TestKafkaLoweringTwin: a kafka table lowers to exactly the pipeline its
// YAML twin decodes to, for each startup mode and a topic list.
func TestKafkaLoweringTwin(t *testing.T) {
	for _, c := range []struct{ name, topic, sqlOpts, yamlOpts string }{
		{"default", "clicks", "", ""},
		{"earliest", "clicks", ",\n  'scan.startup.mode' = 'earliest-offset'", "\n  start_from: earliest"},
		{"latest", "clicks", ",\n  'scan.startup.mode' = 'latest-offset'", "\n  start_from: latest"},
		{"timestamp", "clicks", ",\n  'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = '1772366400123'",
			"\n  start_from: 2026-03-01T12:00:00.123Z"},
		{"floe-fields", "clicks", ",\n  'source.max-records-per-epoch' = '50', 'source.on-missing-offsets' = 'skip'",
			"\n  max_records_per_epoch: 50\n  on_missing_offsets: skip"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse("k.sql", []byte(fmt.Sprintf(kafkaWindowSQL, c.topic, "k1:9092, k2:9092", c.sqlOpts, "/tmp/out", "/tmp/state")), "/tmp")
			if err != nil {
				t.Fatal(err)
			}
			y, err := spec.Parse("k.yaml", []byte(fmt.Sprintf(kafkaWindowYAML, c.topic, "k1:9092, k2:9092", c.yamlOpts, "/tmp/out", "/tmp/state")), "/tmp")
			if err != nil {
				t.Fatal(err)
			}
			sj, _ := json.Marshal(s)
			yj, _ := json.Marshal(y)
			if string(sj) != string(yj) {
				t.Errorf("the SQL lowers to\n%s\nthe YAML decodes to\n%s", sj, yj)
			}
		})
	}
	// A topic list and the CSV format.
	sql := strings.Replace(fmt.Sprintf(kafkaWindowSQL, "a; b", "k1:9092", ",\n  'csv.field-delimiter' = '|'", "/tmp/out", "/tmp/state"), "'json'", "'csv'", 1)
	s, err := Parse("k.sql", []byte(sql), "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	k := s.Source.Kafka
	if !slices.Equal(k.Topics, []string{"a", "b"}) || s.Source.Format != spec.CSV || s.Source.CSV.Header || s.Source.CSV.Delimiter != "|" {
		t.Errorf("topics %q, format %s, csv %+v", k.Topics, s.Source.Format, s.Source.CSV)
	}
}

// TestKafkaErrors: every refused kafka option or column names itself and
// its position.
func TestKafkaErrors(t *testing.T) {
	const sinkDDL = "CREATE TABLE out (user_id STRING, bytes BIGINT) WITH ('connector' = 'filesystem', 'path' = '/tmp/out', 'format' = 'parquet');\n"
	const ins = "INSERT INTO out SELECT user_id, bytes FROM clicks;"
	table := func(cols, opts string) string {
		if cols == "" {
			cols = "ts TIMESTAMP(3) METADATA FROM 'timestamp', user_id STRING, bytes BIGINT"
		}
		if opts == "" {
			opts = "'topic' = 'clicks', 'properties.bootstrap.servers' = 'k:9092', 'format' = 'json'"
		}
		return "CREATE TABLE clicks (" + cols + ",\n  WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka', " + opts + ");\n"
	}
	std := "'topic' = 'clicks', 'properties.bootstrap.servers' = 'k:9092', 'format' = 'json', "
	for _, c := range []struct {
		name, sql, at, want string
	}{
		{"property", table("", std+"'properties.security.protocol' = 'SASL_SSL'") + sinkDDL + ins, "'SASL_SSL'",
			"WITH 'properties.security.protocol': Kafka client properties are not passed on"},
		{"group-offsets", table("", std+"'scan.startup.mode' = 'group-offsets'") + sinkDDL + ins, "'group-offsets'",
			"'scan.startup.mode' = 'group-offsets': not supported: floe keeps a kafka source's offsets in its own manifest"},
		{"specific-offsets", table("", std+"'scan.startup.mode' = 'specific-offsets', 'scan.startup.specific-offsets' = 'partition:0,offset:42'") + sinkDDL + ins,
			"'specific-offsets'", "'scan.startup.mode' = 'specific-offsets': not supported"},
		{"bad-mode", table("", std+"'scan.startup.mode' = 'earliest'") + sinkDDL + ins, "'earliest'",
			"'scan.startup.mode' = 'earliest': want earliest-offset, latest-offset or timestamp"},
		{"timestamp-no-millis", table("", std+"'scan.startup.mode' = 'timestamp'") + sinkDDL + ins, "'timestamp')",
			"'scan.startup.mode' = 'timestamp' needs 'scan.startup.timestamp-millis'"},
		{"millis-no-timestamp", table("", std+"'scan.startup.timestamp-millis' = '1000'") + sinkDDL + ins, "'1000'",
			"'scan.startup.timestamp-millis' is read only with 'scan.startup.mode' = 'timestamp'"},
		{"bad-millis", table("", std+"'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = 'yesterday'") + sinkDDL + ins, "'yesterday'",
			"'scan.startup.timestamp-millis' = 'yesterday': want milliseconds since 1970"},
		{"unknown", table("", std+"'sink.partitioner' = 'fixed'") + sinkDDL + ins, "'fixed'",
			"WITH 'sink.partitioner': unknown option for a kafka table (known: connector, topic, properties.bootstrap.servers"},
		{"key-no-fields", table("", std+"'key.format' = 'raw'") + sinkDDL + ins, "'raw'", "'key.format' = 'raw' needs 'key.fields' = 'col'"},
		{"key-json", table("", std+"'key.format' = 'json', 'key.fields' = 'user_id'") + sinkDDL + ins, "'json', 'key.fields'",
			"'key.format' = 'json': not supported: a kafka table reads the record key as one STRING column, 'key.format' = 'raw'"},
		{"key-fields-no-format", table("", std+"'key.fields' = 'user_id'") + sinkDDL + ins, "'user_id'", "'key.fields' needs 'key.format' = 'raw'"},
		{"key-all", table("", std+"'key.format' = 'raw', 'key.fields' = 'user_id', 'value.fields-include' = 'ALL'") + sinkDDL + ins, "'ALL'",
			"'key.fields' = 'user_id' needs 'value.fields-include' = 'EXCEPT_KEY'"},
		{"key-default-include", table("", std+"'key.format' = 'raw', 'key.fields' = 'user_id'") + sinkDDL + ins, "'raw'",
			"'key.fields' = 'user_id' needs 'value.fields-include' = 'EXCEPT_KEY'"},
		{"key-two-fields", table("", std+"'key.format' = 'raw', 'key.fields' = 'user_id;bytes', 'value.fields-include' = 'EXCEPT_KEY'") + sinkDDL + ins, "'user_id;bytes'",
			"'key.fields' = 'user_id;bytes': the raw key format fills one column"},
		{"key-no-column", table("", std+"'key.format' = 'raw', 'key.fields' = 'k', 'value.fields-include' = 'EXCEPT_KEY'") + sinkDDL + ins, "'k'",
			"'key.fields' = 'k': clicks has no such column"},
		{"key-type", table("", std+"'key.format' = 'raw', 'key.fields' = 'bytes', 'value.fields-include' = 'EXCEPT_KEY'") + sinkDDL + ins, "bytes BIGINT",
			"bytes BIGINT: the record key column ('key.fields') is STRING"},
		{"key-metadata", table("", std+"'key.format' = 'raw', 'key.fields' = 'ts', 'value.fields-include' = 'EXCEPT_KEY'") + sinkDDL + ins, "'ts'",
			"'key.fields' = 'ts': ts is a METADATA column"},
		{"key-prefix", table("", std+"'key.format' = 'raw', 'key.fields' = 'user_id', 'key.fields-prefix' = 'k_', 'value.fields-include' = 'EXCEPT_KEY'") + sinkDDL + ins, "'k_'",
			"'key.fields-prefix' = 'k_': the key column user_id does not start with it"},
		{"key-charset", table("", std+"'key.format' = 'raw', 'key.fields' = 'user_id', 'key.raw.charset' = 'ISO-8859-1', 'value.fields-include' = 'EXCEPT_KEY'") + sinkDDL + ins, "'ISO-8859-1'",
			"'key.raw.charset' = 'ISO-8859-1': a record key is read as UTF-8"},
		{"key-other", table("", std+"'key.format' = 'raw', 'key.fields' = 'user_id', 'key.raw.endianness' = 'big-endian', 'value.fields-include' = 'EXCEPT_KEY'") + sinkDDL + ins, "'big-endian'",
			"WITH 'key.raw.endianness': not supported: a kafka table reads the record key as one STRING column"},
		{"except-key-alone", table("", std+"'value.fields-include' = 'EXCEPT_KEY'") + sinkDDL + ins, "'EXCEPT_KEY'",
			"'value.fields-include' = 'EXCEPT_KEY' without 'key.fields'"},
		{"include-bad", table("", std+"'value.fields-include' = 'SOME'") + sinkDDL + ins, "'SOME'", "'value.fields-include' = 'SOME': want ALL or EXCEPT_KEY"},
		{"value-other", table("", std+"'value.json.ignore-parse-errors' = 'true'") + sinkDDL + ins, "'true'",
			"WITH 'value.json.ignore-parse-errors': not supported"},
		{"format", table("", "'topic' = 'clicks', 'properties.bootstrap.servers' = 'k:9092', 'format' = 'protobuf'") + sinkDDL + ins, "'protobuf'",
			"'format' = 'protobuf': a kafka table's record values are 'json' (one JSON object), 'csv' (one row) or 'avro' (one Avro record)"},
		{"avro-confluent", table("", "'topic' = 'clicks', 'properties.bootstrap.servers' = 'k:9092', 'value.format' = 'avro-confluent'") + sinkDDL + ins, "'avro-confluent'",
			"'format' = 'avro-confluent': not supported: floe reaches no schema registry"},
		{"avro-option", table("", "'topic' = 'clicks', 'properties.bootstrap.servers' = 'k:9092', 'format' = 'avro', 'avro.codec' = 'snappy'") + sinkDDL + ins, "'snappy'",
			"WITH 'avro.codec': unknown option for a kafka table"},
		{"no-servers", table("", "'topic' = 'clicks', 'format' = 'json'") + sinkDDL + ins, "clicks (",
			"clicks: WITH 'properties.bootstrap.servers' = 'host:port[,host:port...]' is required"},
		{"no-topic", table("", "'properties.bootstrap.servers' = 'k:9092', 'format' = 'json'") + sinkDDL + ins, "clicks (",
			"clicks: WITH 'topic' = 'name[;name...]' is required"},
		{"topic-pattern", table("", std+"'topic-pattern' = 'cl.*'") + sinkDDL + ins, "'cl.*'", "WITH 'topic-pattern': not supported"},
		{"source-brokers", table("", std+"'source.brokers' = 'x:1'") + sinkDDL + ins, "'x:1'",
			"WITH 'source.brokers': a kafka table sets brokers with 'properties.bootstrap.servers'"},
		{"bad-broker", table("", "'topic' = 'clicks', 'properties.bootstrap.servers' = 'nohost', 'format' = 'json'") + sinkDDL + ins, "'nohost'",
			`source.brokers[0]: invalid broker "nohost": want host:port`},
		{"bad-topic", table("", "'topic' = 'cl/icks', 'properties.bootstrap.servers' = 'k:9092', 'format' = 'json'") + sinkDDL + ins, "'cl/icks'",
			`source.topic: invalid topic name "cl/icks"`},
		{"headers", table("ts TIMESTAMP(3) METADATA FROM 'timestamp', h STRING METADATA FROM 'headers', user_id STRING, bytes BIGINT", "") + sinkDDL + ins,
			"'headers'", "h: METADATA FROM 'headers': not supported"},
		{"meta-type", table("ts TIMESTAMP(3) METADATA FROM 'timestamp', o INT METADATA FROM 'offset', user_id STRING, bytes BIGINT", "") + sinkDDL + ins,
			"o INT", "o INT METADATA FROM 'offset': want BIGINT"},
		{"meta-twice", table("ts TIMESTAMP(3) METADATA FROM 'timestamp', t2 TIMESTAMP(3) METADATA FROM 'timestamp', user_id STRING, bytes BIGINT", "") + sinkDDL + ins,
			"'timestamp', user_id", "t2: METADATA 'timestamp' is already column ts"},
		{"only-meta", table("ts TIMESTAMP(3) METADATA FROM 'timestamp'", "") + "CREATE TABLE out (ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '/tmp/out', 'format' = 'parquet');\nINSERT INTO out SELECT ts FROM clicks;",
			"clicks (", "clicks: a kafka table needs the columns of its record values"},
		{"meta-on-files", "CREATE TABLE clicks (ts TIMESTAMP(3) METADATA FROM 'timestamp', user_id STRING, bytes BIGINT, WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', 'path' = '/tmp/in', 'format' = 'json');\n" + sinkDDL + ins,
			"'timestamp'", "ts: METADATA columns are read from a 'connector' = 'kafka' table only"},
		{"kafka-sink", table("", "") + "CREATE TABLE out (user_id STRING, bytes BIGINT) WITH ('connector' = 'kafka', 'topic' = 'o', 'properties.bootstrap.servers' = 'k:9092', 'format' = 'json');\n" + ins,
			"'kafka', 'topic' = 'o'", "'connector' = 'kafka': a kafka table can only be read as a stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.sql = "SET 'state.url' = '/tmp/st';\n" + c.sql
			_, err := Parse("t.sql", []byte(c.sql), t.TempDir())
			if err == nil {
				t.Fatalf("no error for\n%s", c.sql)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
			off := strings.Index(c.sql, c.at)
			if off < 0 {
				t.Fatalf("%q is not in the SQL", c.at)
			}
			p := newLines(c.sql).pos(off)
			if at := fmt.Sprintf("t.sql:%d:%d: ", p.Line, p.Col); !strings.HasPrefix(err.Error(), at) {
				t.Errorf("error %q, want it at %s (%q)", err, at, c.at)
			}
			var e *Error
			var se spec.Errors
			if !errors.As(err, &e) && !errors.As(err, &se) {
				t.Errorf("error %T %v is neither a flinksql.Error nor a spec.Errors", err, err)
			}
		})
	}
}

// kafkaClicks produces n records on each of parts partitions of topic:
// user u<i%3>, bytes p*1000+i, record timestamp t0 + 7i seconds; the
// values carry no time: the event time is the record's timestamp.
func kafkaClicks(b *kafkatest.Broker, topic string, parts int32, n int, t0 time.Time) []kafkatest.Msg {
	var ms []kafkatest.Msg
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			ms = append(ms, kafkatest.Msg{Partition: p, Time: t0.Add(time.Duration(7*i) * time.Second),
				Value: fmt.Sprintf(`{"user_id":"u%d","bytes":%d}`, i%3, int(p)*1000+i)})
		}
	}
	b.Produce(topic, ms...)
	return ms
}

// TestKafkaTwinRun runs a windowed SQL pipeline on a kafka table and its
// YAML twin against a broker (kfake, or FLOE_KAFKA_TEST_BROKERS): the same
// plan hash, and the rows of both are exactly the per-user, per-minute
// counts and sums of the records produced, windows on record timestamps.
func TestKafkaTwinRun(t *testing.T) {
	ctx := context.Background()
	b := kafkatest.Start(t)
	topic := b.Topic("sqlclicks", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	msgs := kafkaClicks(b, topic, 2, 40, t0)

	type agg struct{ n, sum int64 }
	want := map[string]*agg{}
	for _, m := range msgs {
		var v struct {
			User  string `json:"user_id"`
			Bytes int64  `json:"bytes"`
		}
		if err := json.Unmarshal([]byte(m.Value), &v); err != nil {
			t.Fatal(err)
		}
		ws := m.Time.Truncate(time.Minute)
		k := fmt.Sprintf("user_id=%s window_start=%s window_end=%s ", v.User, tsStr(ws), tsStr(ws.Add(time.Minute)))
		if want[k] == nil {
			want[k] = &agg{}
		}
		want[k].n++
		want[k].sum += v.Bytes
	}
	var wantRows []string
	for k, a := range want {
		wantRows = append(wantRows, fmt.Sprintf("%sclicks=%d total=%d ", k, a.n, a.sum))
	}
	slices.Sort(wantRows)

	root := t.TempDir()
	brokers := strings.Join(b.Brokers(), ",")
	rows := map[string][]string{}
	for _, kind := range []string{"yaml", "sql"} {
		dir := filepath.Join(root, kind)
		out, state := filepath.Join(dir, "out"), filepath.Join(dir, "state")
		var p *spec.Pipeline
		var err error
		if kind == "sql" {
			p, err = Parse("k.sql", []byte(fmt.Sprintf(kafkaWindowSQL, topic, brokers, "", out, state)), root)
		} else {
			p, err = spec.Parse("k.yaml", []byte(fmt.Sprintf(kafkaWindowYAML, topic, brokers, "", out, state)), root)
		}
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		res, err := engine.Run(ctx, p, engine.Options{Drain: true})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		for _, o := range res.Outputs {
			rows[kind] = append(rows[kind], readRows(t, filepath.Join(out, filepath.FromSlash(o)))...)
		}
		slices.Sort(rows[kind])
		if !slices.Equal(rows[kind], wantRows) {
			t.Errorf("%s rows:\n%s\nwant\n%s", kind, strings.Join(rows[kind], "\n"), strings.Join(wantRows, "\n"))
		}
	}
	if hy, hs := planHashOf(t, filepath.Join(root, "yaml", "state"), "ktwin"), planHashOf(t, filepath.Join(root, "sql", "state"), "ktwin"); hy == "" || hy != hs {
		t.Errorf("plan hash: YAML %q, SQL %q", hy, hs)
	}
}

// TestKafkaSQLMetadata: a stateless SQL pipeline reads the record
// timestamp, partition and offset as columns; SELECT * writes them in the
// order the table declares them (not the source's: value columns, then
// metadata), and a second run reads only the records produced since.
func TestKafkaSQLMetadata(t *testing.T) {
	ctx := context.Background()
	b := kafkatest.Start(t)
	topic := b.Topic("sqlmeta", 3)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	root := t.TempDir()
	out := filepath.Join(root, "out")
	sql := fmt.Sprintf(kafkaDDL, topic, strings.Join(b.Brokers(), ","), ",\n  'source.max-records-per-epoch' = '25'") +
		"CREATE TABLE big (ts TIMESTAMP(3), `partition` BIGINT, user_id STRING, bytes BIGINT, `offset` BIGINT) WITH ('connector' = 'filesystem', 'path' = '" + out + "', 'format' = 'parquet');\n" +
		"SET 'state.url' = '" + filepath.Join(root, "state") + "';\n" +
		"INSERT INTO big SELECT * FROM clicks WHERE bytes % 2 = 0;\n"
	p, err := Parse("meta.sql", []byte(sql), root)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	expect := func(ms []kafkatest.Msg, offs []int64) {
		for i, m := range ms {
			var v struct {
				User  string `json:"user_id"`
				Bytes int64  `json:"bytes"`
			}
			if err := json.Unmarshal([]byte(m.Value), &v); err != nil {
				t.Fatal(err)
			}
			if v.Bytes%2 == 0 {
				want = append(want, fmt.Sprintf("ts=%s partition=%d user_id=%s bytes=%d offset=%d ", tsStr(m.Time), m.Partition, v.User, v.Bytes, offs[i]))
			}
		}
		slices.Sort(want)
	}
	produce := func(from, n int) {
		var ms []kafkatest.Msg
		for p := int32(0); p < 3; p++ {
			for i := from; i < from+n; i++ {
				ms = append(ms, kafkatest.Msg{Partition: p, Time: t0.Add(time.Duration(i) * time.Second),
					Value: fmt.Sprintf(`{"user_id":"u%d","bytes":%d}`, i%3, int(p)*1000+i)})
			}
		}
		expect(ms, b.Produce(topic, ms...))
	}
	check := func(run int, wantEpochs int) {
		res, err := engine.Run(ctx, p, engine.Options{})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if res.Epochs != wantEpochs {
			t.Errorf("run %d: %d epochs, want %d", run, res.Epochs, wantEpochs)
		}
		outs, err := engine.Outputs(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range outs {
			got = append(got, readRows(t, filepath.Join(out, filepath.FromSlash(o)))...)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("run %d rows:\n%s\nwant\n%s", run, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	produce(0, 20) // 60 records, 25 an epoch
	check(1, 3)
	produce(20, 5) // 15 more: one epoch
	check(2, 1)
}

// tsStr prints a time as readRows prints a timestamp column.
func tsStr(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// planHashOf is the plan hash of pipeline name's first generation.
func planHashOf(t *testing.T, state, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, name, "gen=000001", "_generation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		PlanHash string `json:"plan_hash"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g.PlanHash
}

// TestKafkaSQLStartupTimestamp: 'scan.startup.mode' = 'timestamp' starts
// each partition at the broker's offset for 'scan.startup.timestamp-millis':
// the rows are exactly the records from that time on.
func TestKafkaSQLStartupTimestamp(t *testing.T) {
	ctx := context.Background()
	b := kafkatest.Start(t)
	topic := b.Topic("sqlstart", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	from := t0.Add(10 * time.Second)
	var ms []kafkatest.Msg
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 20; i++ {
			ms = append(ms, kafkatest.Msg{Partition: p, Time: t0.Add(time.Duration(i) * time.Second),
				Value: fmt.Sprintf(`{"user_id":"u%d","bytes":%d}`, i%3, int(p)*1000+i)})
		}
	}
	offs := b.Produce(topic, ms...)
	var want []string
	for i, m := range ms {
		if !m.Time.Before(from) {
			var v struct {
				User  string `json:"user_id"`
				Bytes int64  `json:"bytes"`
			}
			if err := json.Unmarshal([]byte(m.Value), &v); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("ts=%s partition=%d user_id=%s bytes=%d offset=%d ", tsStr(m.Time), m.Partition, v.User, v.Bytes, offs[i]))
		}
	}
	slices.Sort(want)
	root := t.TempDir()
	out := filepath.Join(root, "out")
	sql := fmt.Sprintf(kafkaDDL, topic, strings.Join(b.Brokers(), ","),
		fmt.Sprintf(",\n  'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = '%d'", from.UnixMilli())) +
		"CREATE TABLE all_rows (ts TIMESTAMP(3), `partition` BIGINT, user_id STRING, bytes BIGINT, `offset` BIGINT) WITH ('connector' = 'filesystem', 'path' = '" + out + "', 'format' = 'parquet');\n" +
		"SET 'state.url' = '" + filepath.Join(root, "state") + "';\n" +
		"INSERT INTO all_rows SELECT * FROM clicks;\n"
	p, err := Parse("start.sql", []byte(sql), root)
	if err != nil {
		t.Fatal(err)
	}
	res, err := engine.Run(ctx, p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range res.Outputs {
		got = append(got, readRows(t, filepath.Join(out, filepath.FromSlash(o)))...)
	}
	slices.Sort(got)
	if len(want) != 20 || !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant (%d)\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}

// TestKafkaSQLKey: the record key read the Flink way ('key.format' =
// 'raw', 'key.fields', 'value.fields-include' = 'EXCEPT_KEY') lowers to
// the YAML twin's columns: {key: ...}, and a run against a broker fills
// the column with each record's key (NULL for a null key), the key column
// declared first (so SELECT * keeps the declared order).
func TestKafkaSQLKey(t *testing.T) {
	ctx := context.Background()
	b := kafkatest.Start(t)
	topic := b.Topic("sqlkey", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	root := t.TempDir()
	out, state := filepath.Join(root, "out"), filepath.Join(root, "state")
	brokers := strings.Join(b.Brokers(), ",")
	sql := "CREATE TABLE clicks (\n  k STRING,\n  user_id STRING,\n  bytes BIGINT,\n  ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',\n" +
		"  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND\n) WITH (\n  'connector' = 'kafka', 'topic' = '" + topic + "',\n" +
		"  'properties.bootstrap.servers' = '" + brokers + "', 'format' = 'json',\n" +
		"  'key.format' = 'raw', 'key.fields' = 'k', 'key.raw.charset' = 'UTF-8', 'value.fields-include' = 'EXCEPT_KEY'\n);\n" +
		"CREATE TABLE keyed (k STRING, user_id STRING, bytes BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '" + out + "', 'format' = 'parquet');\n" +
		"SET 'pipeline.name' = 'kkey';\nSET 'state.url' = '" + state + "';\n" +
		"INSERT INTO keyed SELECT * FROM clicks;\n"
	p, err := Parse("key.sql", []byte(sql), root)
	if err != nil {
		t.Fatal(err)
	}
	y, err := spec.Parse("key.yaml", []byte(fmt.Sprintf(`name: kkey
source:
  type: kafka
  brokers: [%s]
  topic: %s
  format: jsonl
  schema: {user_id: string, bytes: int64}
  event_time: ts
  columns: {timestamp: ts, key: k}
  watermark: {max_out_of_orderness: 5s}
operators:
  - project: {k: k, user_id: user_id, bytes: bytes, ts: ts}
sink: {type: files, url: %q, format: parquet}
state: {url: %q}
`, strings.Join(b.Brokers(), ", "), topic, out, state)), root)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source.Kafka.Columns != y.Source.Kafka.Columns || !slices.Equal(p.Source.Schema, y.Source.Schema) {
		t.Errorf("SQL source columns %+v schema %v; YAML twin %+v %v", p.Source.Kafka.Columns, p.Source.Schema, y.Source.Kafka.Columns, y.Source.Schema)
	}
	var ms []kafkatest.Msg
	var want []string
	for part := int32(0); part < 2; part++ {
		for i := 0; i < 15; i++ {
			ts := t0.Add(time.Duration(i) * time.Second)
			key, shown := fmt.Sprintf("key-%d-%d", part, i), ""
			shown = key
			if i%5 == 0 {
				key, shown = "", "(null)" // a null key
			}
			ms = append(ms, kafkatest.Msg{Partition: part, Key: key, Time: ts, Value: fmt.Sprintf(`{"user_id":"u%d","bytes":%d}`, i%3, i)})
			want = append(want, fmt.Sprintf("k=%s user_id=u%d bytes=%d ts=%s ", shown, i%3, i, tsStr(ts)))
		}
	}
	b.Produce(topic, ms...)
	slices.Sort(want)
	res, err := engine.Run(ctx, p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range res.Outputs {
		got = append(got, readRows(t, filepath.Join(out, filepath.FromSlash(o)))...)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestKafkaSQLAvro: 'format' = 'avro' is Flink's: bare Avro binary
// written with the schema derived from the table's value columns. It
// lowers to its YAML twin (format: avro), and a run against a broker
// reads values encoded with that schema.
func TestKafkaSQLAvro(t *testing.T) {
	ctx := context.Background()
	b := kafkatest.Start(t)
	topic := b.Topic("sqlavro", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	root := t.TempDir()
	out, state := filepath.Join(root, "out"), filepath.Join(root, "state")
	sql := strings.Replace(fmt.Sprintf(kafkaWindowSQL, topic, strings.Join(b.Brokers(), ","), "", out, state), "'json'", "'avro'", 1)
	p, err := Parse("k.sql", []byte(sql), root)
	if err != nil {
		t.Fatal(err)
	}
	y, err := spec.Parse("k.yaml", []byte(strings.Replace(fmt.Sprintf(kafkaWindowYAML, topic, strings.Join(b.Brokers(), ", "), "", out, state), "format: jsonl", "format: avro", 1)), root)
	if err != nil {
		t.Fatal(err)
	}
	sj, _ := json.Marshal(p)
	yj, _ := json.Marshal(y)
	if string(sj) != string(yj) {
		t.Fatalf("the SQL lowers to\n%s\nthe YAML decodes to\n%s", sj, yj)
	}
	schema, err := p.Source.AvroSchema()
	if err != nil {
		t.Fatal(err)
	}
	ws := avro.MustParse(schema)
	type agg struct{ n, sum int64 }
	want := map[string]*agg{}
	var ms []kafkatest.Msg
	for part := int32(0); part < 2; part++ {
		for i := 0; i < 30; i++ {
			ts := t0.Add(time.Duration(7*i) * time.Second)
			user, bytes := fmt.Sprintf("u%d", i%3), int64(int(part)*1000+i)
			data, err := ws.Encode(map[string]any{"user_id": user, "bytes": bytes})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, kafkatest.Msg{Partition: part, Time: ts, Value: string(data)})
			ws := ts.Truncate(time.Minute)
			k := fmt.Sprintf("user_id=%s window_start=%s window_end=%s ", user, tsStr(ws), tsStr(ws.Add(time.Minute)))
			if want[k] == nil {
				want[k] = &agg{}
			}
			want[k].n++
			want[k].sum += bytes
		}
	}
	b.Produce(topic, ms...)
	var wantRows []string
	for k, a := range want {
		wantRows = append(wantRows, fmt.Sprintf("%sclicks=%d total=%d ", k, a.n, a.sum))
	}
	slices.Sort(wantRows)
	res, err := engine.Run(ctx, p, engine.Options{Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range res.Outputs {
		got = append(got, readRows(t, filepath.Join(out, filepath.FromSlash(o)))...)
	}
	slices.Sort(got)
	if !slices.Equal(got, wantRows) {
		t.Fatalf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantRows, "\n"))
	}
}

// kafkaJoinSQL joins a kafka table of bids (its event time the record
// timestamp) with a filesystem table of auctions: the graph form, with a
// kafka source under sources.
const kafkaJoinSQL = `CREATE TABLE bids (
  bts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
  auction BIGINT,
  bidder STRING,
  price BIGINT,
  WATERMARK FOR bts AS bts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = '%[1]s', 'properties.bootstrap.servers' = '%[2]s', 'format' = 'json',
  'source.max-records-per-epoch' = '15');
CREATE TABLE auctions (id BIGINT, category STRING, ats TIMESTAMP(3), WATERMARK FOR ats AS ats)
WITH ('connector' = 'filesystem', 'path' = '%[3]s', 'format' = 'json');
CREATE TABLE pairs (auction BIGINT, bidder STRING, price BIGINT, category STRING)
WITH ('connector' = 'filesystem', 'path' = '%[4]s', 'format' = 'parquet');
SET 'pipeline.name' = 'kjoin';
SET 'state.url' = '%[5]s';
INSERT INTO pairs
SELECT B.auction, B.bidder, B.price, A.category
FROM bids B JOIN auctions A ON B.auction = A.id
  AND B.bts BETWEEN A.ats - INTERVAL '2' HOUR AND A.ats + INTERVAL '2' HOUR;
`

// TestKafkaSQLJoin runs a SQL join of a kafka table with a filesystem
// table (the graph form): every bid of a known auction once, over epochs
// of at most 'source.max-records-per-epoch'.
func TestKafkaSQLJoin(t *testing.T) {
	ctx := context.Background()
	b := kafkatest.Start(t)
	topic := b.Topic("sqlbids", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var ms []kafkatest.Msg
	var want []string
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 40; i++ {
			a := (i + int(p)) % 7 // auctions 0-4 exist
			ms = append(ms, kafkatest.Msg{Partition: p, Time: t0.Add(time.Duration(i) * time.Second),
				Value: fmt.Sprintf(`{"auction":%d,"bidder":"b%d","price":%d}`, a, p, int(p)*100+i)})
			if a < 5 {
				// the sink gets the event time column too (docs/sql.md)
				want = append(want, fmt.Sprintf("auction=%d bidder=b%d price=%d category=c%d bts=%s ", a, p, int(p)*100+i, a%2,
					t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339)))
			}
		}
	}
	b.Produce(topic, ms...)
	slices.Sort(want)
	root := t.TempDir()
	in, out, state := filepath.Join(root, "auctions"), filepath.Join(root, "out"), filepath.Join(root, "state")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for a := 0; a < 5; a++ {
		fmt.Fprintf(&sb, `{"id":%d,"category":"c%d","ats":"%s"}`+"\n", a, a%2, t0.Format(time.RFC3339))
	}
	if err := os.WriteFile(filepath.Join(in, "a.json"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Parse("j.sql", []byte(fmt.Sprintf(kafkaJoinSQL, topic, strings.Join(b.Brokers(), ","), in, out, state)), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sources) != 2 || p.Sources[slices.IndexFunc(p.Sources, func(s spec.NamedSource) bool { return s.Name == "bids" })].Source.Type != spec.SourceKafka {
		t.Fatalf("sources %+v: want the graph form with a kafka source bids", p.Sources)
	}
	res, err := engine.Run(ctx, p, engine.Options{Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Epochs < 5 { // 80 records, at most 15 an epoch
		t.Fatalf("%d epochs, want at least 5", res.Epochs)
	}
	var got []string
	for _, o := range res.Outputs {
		got = append(got, readRows(t, filepath.Join(out, filepath.FromSlash(o)))...)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("rows (%d):\n%s\nwant (%d)\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}
