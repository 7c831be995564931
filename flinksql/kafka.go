package flinksql

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/floe-dev/floe/spec"
)

// A 'connector' = 'kafka' table is a kafka source (spec/kafka.go). Flink's
// Kafka connector options map as follows:
//
//	'topic' = 'a;b'                        topic: a / topics: [a, b]
//	'properties.bootstrap.servers' = 'h:p,h2:p'  brokers: [h:p, h2:p]
//	'format' / 'value.format' = json | csv | avro  format: jsonl | csv (no header) | avro
//	'scan.startup.mode' = earliest-offset | latest-offset | timestamp
//	  (+ 'scan.startup.timestamp-millis')  start_from: earliest | latest | RFC 3339
//	'properties.group.id'                  accepted and ignored: floe keeps
//	                                       the offsets in its manifest
//	'source.<field>'                       a floe source field, as for files
//
// and its METADATA columns ('topic', 'partition', 'offset', 'timestamp')
// are the source's columns: {topic, partition, offset, timestamp}. The
// record key is Flink's key format read as one STRING column:
//
//	'key.format' = 'raw', 'key.fields' = 'k',  columns: {key: k}
//	'value.fields-include' = 'EXCEPT_KEY'      (the value holds the other
//	[, 'key.fields-prefix' = 'p']              columns; a null key is NULL)
//
// Every other option is refused with its position.

// kafkaMetaKeys are the Flink Kafka metadata keys floe reads, in the order
// the source appends their columns (spec.Source.withKafkaColumns), with
// the Flink types a column of each may be declared as.
var kafkaMetaKeys = []struct {
	key   string
	types []spec.DataType
	want  string
}{
	{"topic", []spec.DataType{spec.TypeString}, "STRING"},
	{"partition", []spec.DataType{spec.TypeInt32, spec.TypeInt64}, "INT (or BIGINT)"},
	{"offset", []spec.DataType{spec.TypeInt64}, "BIGINT"},
	{"timestamp", []spec.DataType{spec.TypeTimestamp}, "TIMESTAMP_LTZ(3) or TIMESTAMP(3)"},
}

// kafkaOptions are the WITH options of a kafka table, for messages.
const kafkaOptions = "connector, topic, properties.bootstrap.servers, properties.group.id (ignored), format or value.format, csv.field-delimiter, scan.startup.mode, scan.startup.timestamp-millis, key.format (raw), key.fields, key.fields-prefix, key.raw.charset (UTF-8), value.fields-include, and the floe source fields as 'source.<field>', e.g. 'source.max-records-per-epoch'"

// kafkaMapped are the floe source fields a Flink option of a kafka table
// sets: 'source.<field>' may not set them again.
var kafkaMapped = map[string]string{
	"type": "'connector'", "url": "'topic' and 'properties.bootstrap.servers'", "brokers": "'properties.bootstrap.servers'",
	"topic": "'topic'", "topics": "'topic' ('a;b')", "format": "'format'", "csv": "'csv.field-delimiter'",
	"start_from": "'scan.startup.mode'", "columns": "METADATA columns and 'key.fields'", "schema": "the table's columns",
	"event_time": "WATERMARK FOR", "watermark": "WATERMARK FOR and SET 'table.exec.source.idle-timeout'",
}

// isKafka reports whether tb is a 'connector' = 'kafka' table.
func (tb *table) isKafka() bool { return tb.opts["connector"].val == "kafka" }

// physicalOrder reports whether tb's columns are declared in the order its
// source renders them: the value columns, then the metadata columns in
// kafkaMetaKeys order. When not, a SELECT of every column in declared
// order still needs a project stage to put them in that order.
func (tb *table) physicalOrder() bool {
	key := tb.opts["key.fields"].val
	rank := func(c column) int {
		for i, k := range kafkaMetaKeys {
			if c.meta == k.key {
				return i + 1
			}
		}
		if c.meta == "" && key != "" && strings.EqualFold(c.name, key) {
			return len(kafkaMetaKeys) + 1 // the key column comes last
		}
		return 0
	}
	for i := 1; i < len(tb.cols); i++ {
		if rank(tb.cols[i]) < rank(tb.cols[i-1]) {
			return false
		}
	}
	return true
}

// refuseMetadata refuses METADATA columns on a table of another connector.
func refuseMetadata(tb *table) error {
	for _, c := range tb.cols {
		if c.meta != "" {
			return &lexError{c.metaOff, fmt.Sprintf("%s: METADATA columns are read from a 'connector' = 'kafka' table only", c.name)}
		}
	}
	return nil
}

// kafkaSource lowers a kafka table read as a stream to its YAML source.
func (tr *translator) kafkaSource(tb *table, idle option, hasIdle bool) (yaml.MapSlice, error) {
	at := func(field string, off int) { tr.pos["@"+tb.name+"."+field] = off }
	get := func(k string) (option, bool) { o, ok := tb.opts[k]; return o, ok }
	out := yaml.MapSlice{{Key: "type", Value: "kafka"}}

	bs, ok := get("properties.bootstrap.servers")
	if !ok {
		return nil, &lexError{tb.off, fmt.Sprintf("%s: WITH 'properties.bootstrap.servers' = 'host:port[,host:port...]' is required for 'connector' = 'kafka'", tb.name)}
	}
	var brokers []string
	for _, b := range strings.Split(bs.val, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		return nil, &lexError{bs.off, "'properties.bootstrap.servers': empty; want 'host:port[,host:port...]'"}
	}
	out = append(out, yaml.MapItem{Key: "brokers", Value: brokers})
	at("brokers", bs.off)

	if o, ok := get("topic-pattern"); ok {
		return nil, &lexError{o.off, "WITH 'topic-pattern': not supported; name the topics: 'topic' = 'a;b'"}
	}
	tp, ok := get("topic")
	if !ok {
		return nil, &lexError{tb.off, fmt.Sprintf("%s: WITH 'topic' = 'name[;name...]' is required for 'connector' = 'kafka'", tb.name)}
	}
	var topics []string
	for _, t := range strings.Split(tp.val, ";") {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}
	switch len(topics) {
	case 0:
		return nil, &lexError{tp.off, "'topic': empty; want 'name' or 'name;name...'"}
	case 1:
		out = append(out, yaml.MapItem{Key: "topic", Value: topics[0]})
		at("topic", tp.off)
	default:
		out = append(out, yaml.MapItem{Key: "topics", Value: topics})
		at("topics", tp.off)
	}

	f, hasF := get("format")
	if vf, ok := get("value.format"); ok {
		if hasF {
			return nil, &lexError{vf.off, "'value.format' and 'format' both given: give one"}
		}
		f, hasF = vf, true
	}
	if !hasF {
		return nil, &lexError{tb.off, fmt.Sprintf("%s: WITH 'format' is required for 'connector' = 'kafka' (json or csv)", tb.name)}
	}
	switch f.val {
	case "json":
		out = append(out, yaml.MapItem{Key: "format", Value: "jsonl"})
	case "csv":
		out = append(out, yaml.MapItem{Key: "format", Value: "csv"})
		csv := yaml.MapSlice{{Key: "header", Value: false}}
		if d, ok := get("csv.field-delimiter"); ok {
			csv = append(csv, yaml.MapItem{Key: "delimiter", Value: d.val})
			at("csv", d.off)
		}
		out = append(out, yaml.MapItem{Key: "csv", Value: csv})
	case "avro":
		// Flink's 'avro' format: bare Avro binary, the writer schema
		// derived from the table's value columns (spec.Source.AvroSchema).
		out = append(out, yaml.MapItem{Key: "format", Value: "avro"})
	case "avro-confluent":
		return nil, &lexError{f.off, "'format' = 'avro-confluent': not supported: floe reaches no schema registry; 'avro' reads bare Avro binary with the schema derived from the columns, and the YAML form reads the Confluent wire format with a schema file (format: avro, avro: {schema_file: ..., confluent: true})"}
	default:
		return nil, &lexError{f.off, fmt.Sprintf("'format' = '%s': a kafka table's record values are 'json' (one JSON object), 'csv' (one row) or 'avro' (one Avro record)", f.val)}
	}
	at("format", f.off)

	// The schema: the physical columns; the metadata columns are the
	// source's columns, appended by the spec in its order.
	keyCol, err := kafkaKey(tb)
	if err != nil {
		return nil, err
	}
	var schema yaml.MapSlice
	var columns yaml.MapSlice
	metaCol := map[string]column{}
	for _, c := range tb.cols {
		if keyCol != nil && c.name == keyCol.name {
			continue
		}
		if c.meta == "" {
			schema = append(schema, yaml.MapItem{Key: c.name, Value: string(c.typ)})
			continue
		}
		found := false
		for _, k := range kafkaMetaKeys {
			if k.key != c.meta {
				continue
			}
			found = true
			okType := false
			for _, t := range k.types {
				okType = okType || t == c.typ
			}
			if !okType {
				return nil, &lexError{c.off, fmt.Sprintf("%s %s METADATA FROM '%s': want %s", c.name, c.flink, c.meta, k.want)}
			}
		}
		if !found {
			return nil, &lexError{c.metaOff, fmt.Sprintf("%s: METADATA FROM '%s': not supported (a kafka table reads 'topic', 'partition', 'offset' and 'timestamp'; not 'headers', 'leader-epoch' nor 'timestamp-type')", c.name, c.meta)}
		}
		if prev, dup := metaCol[c.meta]; dup {
			return nil, &lexError{c.metaOff, fmt.Sprintf("%s: METADATA '%s' is already column %s", c.name, c.meta, prev.name)}
		}
		metaCol[c.meta] = c
	}
	for _, k := range kafkaMetaKeys {
		if c, ok := metaCol[k.key]; ok {
			columns = append(columns, yaml.MapItem{Key: k.key, Value: c.name})
			at("columns."+k.key, c.metaOff)
		}
	}
	if keyCol != nil {
		columns = append(columns, yaml.MapItem{Key: "key", Value: keyCol.name})
		at("columns.key", tb.opts["key.fields"].off)
	}
	if len(schema) == 0 {
		return nil, &lexError{tb.off, fmt.Sprintf("%s: a kafka table needs the columns of its record values, not only METADATA columns", tb.name)}
	}
	out = append(out, yaml.MapItem{Key: "schema", Value: schema})
	out = append(out, yaml.MapItem{Key: "event_time", Value: tb.wmCol})
	if len(columns) > 0 {
		out = append(out, yaml.MapItem{Key: "columns", Value: columns})
	}

	mode, hasMode := get("scan.startup.mode")
	ms, hasMS := get("scan.startup.timestamp-millis")
	if hasMode {
		at("start_from", mode.off)
		switch mode.val {
		case "earliest-offset":
			out = append(out, yaml.MapItem{Key: "start_from", Value: "earliest"})
		case "latest-offset":
			out = append(out, yaml.MapItem{Key: "start_from", Value: "latest"})
		case "timestamp":
			if !hasMS {
				return nil, &lexError{mode.off, "'scan.startup.mode' = 'timestamp' needs 'scan.startup.timestamp-millis' (milliseconds since 1970)"}
			}
			n, err := strconv.ParseInt(ms.val, 10, 64)
			if err != nil || n < 0 {
				return nil, &lexError{ms.off, fmt.Sprintf("'scan.startup.timestamp-millis' = '%s': want milliseconds since 1970 (a non-negative integer)", ms.val)}
			}
			out = append(out, yaml.MapItem{Key: "start_from", Value: time.UnixMilli(n).UTC().Format(time.RFC3339Nano)})
		case "group-offsets", "specific-offsets":
			return nil, &lexError{mode.off, fmt.Sprintf("'scan.startup.mode' = '%s': not supported: floe keeps a kafka source's offsets in its own manifest (a restart continues from them); the first run starts at earliest-offset (the default), latest-offset or timestamp", mode.val)}
		default:
			return nil, &lexError{mode.off, fmt.Sprintf("'scan.startup.mode' = '%s': want earliest-offset, latest-offset or timestamp", mode.val)}
		}
	}
	if hasMS && (!hasMode || mode.val != "timestamp") {
		return nil, &lexError{ms.off, "'scan.startup.timestamp-millis' is read only with 'scan.startup.mode' = 'timestamp'"}
	}

	for _, k := range tb.optOrder {
		o := tb.opts[k]
		switch {
		case k == "connector" || k == "topic" || k == "format" || k == "value.format" || k == "properties.bootstrap.servers" ||
			k == "scan.startup.mode" || k == "scan.startup.timestamp-millis":
		case k == "key.format" || k == "key.fields" || k == "key.fields-prefix" || k == "key.raw.charset" || k == "value.fields-include":
			// kafkaKey read them.
		case strings.HasPrefix(k, "key.") || strings.HasPrefix(k, "value."):
			return nil, &lexError{o.off, fmt.Sprintf("WITH '%s': not supported: a kafka table reads the record key as one STRING column ('key.format' = 'raw', 'key.fields' = 'col', 'value.fields-include' = 'EXCEPT_KEY') and the value with 'value.format' json or csv", k)}
		case k == "properties.group.id":
			// Accepted and ignored: the offsets are committed with the
			// epoch in floe's manifest, not to a consumer group.
		case k == "csv.field-delimiter":
			if f.val != "csv" {
				return nil, &lexError{o.off, "WITH 'csv.field-delimiter': only for 'format' = 'csv'"}
			}
		case strings.HasPrefix(k, "properties."):
			return nil, &lexError{o.off, fmt.Sprintf("WITH '%s': Kafka client properties are not passed on: a kafka table takes 'properties.bootstrap.servers' and 'properties.group.id' (ignored: floe keeps the offsets in its manifest); TLS and SASL come from FLOE_KAFKA_* in the environment or the file 'source.auth-file' names, never from the pipeline", k)}
		case strings.HasPrefix(k, "source."):
			field := strings.ReplaceAll(strings.TrimPrefix(k, "source."), "-", "_")
			if field == "" {
				return nil, &lexError{o.off, "empty option name"}
			}
			if by, ok := kafkaMapped[field]; ok {
				return nil, &lexError{o.off, fmt.Sprintf("WITH '%s': a kafka table sets %s with %s", k, field, by)}
			}
			at(field, o.off)
			out = append(out, yaml.MapItem{Key: field, Value: scalar(o.val)})
		default:
			return nil, &lexError{o.off, fmt.Sprintf("WITH '%s': unknown option for a kafka table (known: %s; see docs/sql.md)", k, kafkaOptions)}
		}
	}
	wm := yaml.MapSlice{{Key: "max_out_of_orderness", Value: durString(tb.wmDelay)}}
	if hasIdle {
		wm = append(wm, yaml.MapItem{Key: "idle_timeout", Value: idle.val})
	}
	out = append(out, yaml.MapItem{Key: "watermark", Value: wm})
	return out, nil
}

// kafkaKey reads the key options of a kafka table: nil when it reads no
// key, else the physical column the record key fills ('key.format' =
// 'raw' with 'key.fields' naming one STRING column, the value format
// holding the other columns: 'value.fields-include' = 'EXCEPT_KEY').
func kafkaKey(tb *table) (*column, error) {
	kf, hasKF := tb.opts["key.format"]
	fs, hasFS := tb.opts["key.fields"]
	inc, hasInc := tb.opts["value.fields-include"]
	if hasInc && !strings.EqualFold(inc.val, "ALL") && !strings.EqualFold(inc.val, "EXCEPT_KEY") {
		return nil, &lexError{inc.off, fmt.Sprintf("'value.fields-include' = '%s': want ALL or EXCEPT_KEY", inc.val)}
	}
	if !hasKF && !hasFS {
		for _, k := range []string{"key.fields-prefix", "key.raw.charset"} {
			if o, ok := tb.opts[k]; ok {
				return nil, &lexError{o.off, fmt.Sprintf("WITH '%s': only with 'key.format' = 'raw' and 'key.fields'", k)}
			}
		}
		if hasInc && strings.EqualFold(inc.val, "EXCEPT_KEY") {
			return nil, &lexError{inc.off, "'value.fields-include' = 'EXCEPT_KEY' without 'key.fields': name the key column"}
		}
		return nil, nil
	}
	if !hasKF {
		return nil, &lexError{fs.off, "'key.fields' needs 'key.format' = 'raw' (the record key read as one STRING column)"}
	}
	if kf.val != "raw" {
		return nil, &lexError{kf.off, fmt.Sprintf("'key.format' = '%s': not supported: a kafka table reads the record key as one STRING column, 'key.format' = 'raw'", kf.val)}
	}
	if !hasFS {
		return nil, &lexError{kf.off, "'key.format' = 'raw' needs 'key.fields' = 'col': the STRING column the record key fills"}
	}
	if cs, ok := tb.opts["key.raw.charset"]; ok && !strings.EqualFold(cs.val, "UTF-8") {
		return nil, &lexError{cs.off, fmt.Sprintf("'key.raw.charset' = '%s': a record key is read as UTF-8 (bytes that are not become U+FFFD)", cs.val)}
	}
	if strings.Contains(fs.val, ";") {
		return nil, &lexError{fs.off, fmt.Sprintf("'key.fields' = '%s': the raw key format fills one column", fs.val)}
	}
	c := tb.col(strings.TrimSpace(fs.val))
	if c == nil {
		return nil, &lexError{fs.off, fmt.Sprintf("'key.fields' = '%s': %s has no such column", fs.val, tb.name)}
	}
	if c.meta != "" {
		return nil, &lexError{fs.off, fmt.Sprintf("'key.fields' = '%s': %s is a METADATA column; the key fills a physical column", fs.val, c.name)}
	}
	if c.typ != spec.TypeString {
		return nil, &lexError{c.off, fmt.Sprintf("%s %s: the record key column ('key.fields') is STRING", c.name, c.flink)}
	}
	if p, ok := tb.opts["key.fields-prefix"]; ok && !strings.HasPrefix(c.name, p.val) {
		return nil, &lexError{p.off, fmt.Sprintf("'key.fields-prefix' = '%s': the key column %s does not start with it", p.val, c.name)}
	}
	if !hasInc || !strings.EqualFold(inc.val, "EXCEPT_KEY") {
		at := kf.off
		if hasInc {
			at = inc.off
		}
		return nil, &lexError{at, fmt.Sprintf("'key.fields' = '%s' needs 'value.fields-include' = 'EXCEPT_KEY': floe fills %s from the record key only, the value holds the other columns", fs.val, c.name)}
	}
	return c, nil
}
