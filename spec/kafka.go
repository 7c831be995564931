package spec

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// withKafkaColumns completes a kafka source after decoding: event_time:
// kafka_timestamp asks for the timestamp column (named kafka_timestamp
// unless columns.timestamp names it), and the metadata columns asked for
// are appended to the schema, in the order the source renders them
// (topic, partition, offset, timestamp, key), so every later step reads
// them as declared columns.
func (s *Source) withKafkaColumns() {
	if s.Kafka == nil {
		s.Kafka = &KafkaSource{}
	}
	c := &s.Kafka.Columns
	if s.EventTime == KafkaTimestamp && c.Timestamp == "" {
		c.Timestamp = KafkaTimestamp
	}
	for _, f := range []Field{{c.Topic, TypeString}, {c.Partition, TypeInt32}, {c.Offset, TypeInt64},
		{c.Timestamp, TypeTimestampMS}, {c.Key, TypeString}} {
		if f.Name != "" {
			s.Schema = append(s.Schema, f)
		}
	}
}

// KafkaMetadataColumns returns the names of the metadata columns s appends
// to its schema (a kafka source), in schema order.
func (s *Source) KafkaMetadataColumns() []string {
	if s.Kafka == nil {
		return nil
	}
	var out []string
	c := s.Kafka.Columns
	for _, n := range []string{c.Topic, c.Partition, c.Offset, c.Timestamp, c.Key} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ValueSchema is the schema of a kafka source's record values: Schema
// without the metadata columns.
func (s *Source) ValueSchema() []Field {
	meta := map[string]bool{}
	for _, n := range s.KafkaMetadataColumns() {
		meta[n] = true
	}
	var out []Field
	for _, f := range s.Schema {
		if !meta[f.Name] {
			out = append(out, f)
		}
	}
	return out
}

var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// kafkaOnly are the source fields only a kafka source takes.
var kafkaOnly = []string{"brokers", "topic", "topics", "max_records_per_epoch", "on_missing_offsets", "auth_file", "columns", "avro"}

// validateKafka checks a kafka source at sp; for another source it refuses
// the kafka-only fields.
func validateKafka(c *collector, sp string, s *Source) {
	k := s.Kafka
	if s.Type != SourceKafka {
		if k != nil {
			c.add(sp+".type", "fields %s are only for type: kafka", strings.Join(kafkaOnly, ", "))
		}
		return
	}
	if k == nil {
		k = &KafkaSource{}
	}
	if s.URL != "" {
		c.add(sp+".url", "a kafka source has no url; name the brokers (brokers: [host:port]) and the topic")
	}
	if len(k.Brokers) == 0 {
		c.add(sp+".brokers", "required for type: kafka (a list of host:port)")
	}
	for i, b := range k.Brokers {
		if strings.Contains(b, "@") {
			// Not quoted: it may hold a password.
			c.add(index(sp+".brokers", i), "credentials do not go in the spec: give host:port, and set FLOE_KAFKA_SASL_* in the environment or name a file with auth_file")
			continue
		}
		host, port, err := net.SplitHostPort(b)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			c.add(index(sp+".brokers", i), "invalid broker %q: want host:port", b)
		}
	}
	if len(k.Topics) == 0 {
		c.add(sp+".topic", "required for type: kafka (topic: NAME, or topics: [NAME, ...])")
	}
	seen := map[string]bool{}
	for _, t := range k.Topics {
		switch {
		case !topicRE.MatchString(t) || t == "." || t == "..":
			c.add(sp+".topic", "invalid topic name %q (letters, digits, '.', '_', '-'; at most 249)", t)
		case seen[t]:
			c.add(sp+".topics", "topic %q named twice", t)
		}
		seen[t] = true
	}
	switch s.Format {
	case JSONL, CSV, Avro, "":
	default:
		c.add(sp+".format", "invalid value %q for a kafka source (allowed: jsonl, csv, avro: one record value is one JSON object, one CSV row or one Avro record)", s.Format)
	}
	if k.Avro != nil && s.Format != Avro {
		c.add(sp+".avro", "only for format: avro")
	}
	if s.Format == Avro && (k.Avro == nil || k.Avro.SchemaFile == "") {
		if _, err := s.derivedAvroSchema(); err != nil {
			c.add(sp+".schema", "%v", err)
		}
	}
	if s.CSV != nil && s.CSV.Header {
		c.add(sp+".csv.header", "a kafka record is one CSV row without a header: its fields are the schema's columns in order")
	}
	switch k.OnMissingOffsets {
	case "", MissingFail, MissingSkip:
	default:
		c.add(sp+".on_missing_offsets", "invalid value %q (allowed: fail, skip)", k.OnMissingOffsets)
	}
	if k.MaxRecordsPerEpoch < 0 {
		c.add(sp+".max_records_per_epoch", "must not be negative")
	}
	if len(s.ValueSchema()) == 0 {
		c.add(sp+".schema", "required: the fields of the record values")
	}
	for field, name := range map[string]string{"topic": k.Columns.Topic, "partition": k.Columns.Partition, "offset": k.Columns.Offset,
		"timestamp": k.Columns.Timestamp, "key": k.Columns.Key} {
		if name != "" && !identRE.MatchString(strings.ToLower(name)) {
			c.add(sp+".columns."+field, "invalid column name %q", name)
		}
	}
	for _, f := range []string{"max_files_per_epoch", "pattern", "order", "forget_after", "capture", "inputs"} {
		bad := false
		switch f {
		case "max_files_per_epoch":
			bad = s.MaxFilesPerEpoch != 0
		case "pattern":
			bad = s.Pattern != ""
		case "order":
			bad = s.Order != ""
		case "forget_after":
			bad = s.ForgetAfter != 0
		case "capture":
			bad = s.Capture
		case "inputs":
			bad = s.Inputs != InputsSingle
		}
		if bad {
			c.add(sp+"."+f, "not for a kafka source (it applies to files; a kafka source has one watermark input per partition, bounded by max_records_per_epoch)")
		}
	}
}

// AvroSchema returns the Avro writer schema of a kafka source with format
// avro: the file avro.schema_file names, or the one derived from the
// value schema the way Flink's 'avro' format derives it from a table: a
// record named "record", one field per value column, each a union of
// null and the column's type with default null (string, long, int,
// double, boolean; timestamp as long timestamp-millis, timestamp_s, _ms
// and _us as the long epoch number in that unit). A value decodes to a
// JSON object (kafka.AvroValues: logical timestamps as RFC 3339 strings,
// read by timestamp columns), so the value columns read it as JSON.
func (s *Source) AvroSchema() (string, error) {
	if s.Kafka != nil && s.Kafka.Avro != nil && s.Kafka.Avro.SchemaFile != "" {
		data, err := os.ReadFile(s.Kafka.Avro.SchemaFile)
		if err != nil {
			return "", fmt.Errorf("source.avro.schema_file: %w", err)
		}
		return string(data), nil
	}
	return s.derivedAvroSchema()
}

func (s *Source) derivedAvroSchema() (string, error) {
	type field struct {
		Name    string `json:"name"`
		Type    []any  `json:"type"`
		Default any    `json:"default"`
	}
	var fields []field
	for _, f := range s.ValueSchema() {
		var t any
		switch f.Type {
		case TypeString:
			t = "string"
		case TypeInt64:
			t = "long"
		case TypeInt32:
			t = "int"
		case TypeFloat64:
			t = "double"
		case TypeBool:
			t = "boolean"
		case TypeTimestamp:
			t = map[string]string{"type": "long", "logicalType": "timestamp-millis"}
		case TypeTimestampS, TypeTimestampMS, TypeTimestampUS:
			t = "long" // the epoch number, as in JSON
		default:
			return "", fmt.Errorf("column %s: type %s has no derived Avro type; give the writer schema in avro.schema_file", f.Name, f.Type)
		}
		fields = append(fields, field{Name: f.Name, Type: []any{"null", t}})
	}
	data, err := json.Marshal(map[string]any{"type": "record", "name": "record", "fields": fields})
	if err != nil {
		return "", err
	}
	return string(data), nil
}
