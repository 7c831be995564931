package spec

import (
	"fmt"
	"time"

	"github.com/floe-dev/floe/keygroup"
)

// Defaults applied to fields a spec leaves out (and by SetDefaults).
const (
	DefaultParallelism = 1
	// DefaultMaxParallelism is the key-group count of a spec that does not
	// set max_parallelism: keygroup.Default, the one definition.
	DefaultMaxParallelism = keygroup.Default
	DefaultRetainEpochs   = 10
)

// Pipeline is one named job: source -> operators -> sink, plus where its
// state lives. The zero values of optional fields mean "engine default";
// SetDefaults fills the ones that have a concrete default.
type Pipeline struct {
	// Name identifies the pipeline; it names its directory under State.URL.
	// Lowercase letters, digits, '_' and '-', starting with a letter or digit.
	Name      string
	Source    Source
	Operators []Operator
	Sink      Sink
	State     State

	// Sources, Stages and Sinks are the graph form (`sources:`, `stages:`,
	// `sinks:`; see graph.go and docs/graph.md), which a pipeline uses
	// instead of Source, Operators and Sink. They are empty in the linear
	// form; Graph returns one Graph for either form.
	Sources []NamedSource
	Stages  []Stage
	Sinks   []NamedSink

	// origin holds the file name and field positions of a parsed spec; nil
	// for pipelines built in Go.
	origin *origin
}

// SourceType names a kind of source.
type SourceType string

// Source types.
const (
	// SourceFiles reads immutable files landing under a URL prefix.
	SourceFiles SourceType = "files"
	// SourceKafka reads records of Kafka topics (source.kafka); the offsets
	// consumed are recorded per partition in the manifest.
	SourceKafka SourceType = "kafka"
)

// SinkType names a kind of sink.
type SinkType string

// Sink types.
const (
	// SinkFiles writes output files under a URL prefix.
	SinkFiles SinkType = "files"
	// SinkIceberg commits each epoch's output files to an Iceberg table at
	// the sink URL, exactly once, on object storage alone.
	SinkIceberg SinkType = "iceberg"
)

// Format is a file format.
type Format string

// File formats. Sources read JSONL, CSV and Parquet; sinks write Parquet and JSONL.
// A kafka source also reads Avro record values.
const (
	JSONL   Format = "jsonl"
	CSV     Format = "csv"
	Parquet Format = "parquet"
	Avro    Format = "avro"
)

// DataType is the type of a schema column.
type DataType string

// Column types.
const (
	TypeString  DataType = "string"
	TypeInt64   DataType = "int64"
	TypeInt32   DataType = "int32"
	TypeFloat64 DataType = "float64"
	TypeBool    DataType = "bool"
	// TypeTimestamp is an instant; in JSONL/CSV input an RFC 3339 string.
	TypeTimestamp DataType = "timestamp"
	// TypeTimestampS, TypeTimestampMS and TypeTimestampUS are instants
	// spelt in the input as epoch seconds, milliseconds or microseconds.
	TypeTimestampS  DataType = "timestamp_s"
	TypeTimestampMS DataType = "timestamp_ms"
	TypeTimestampUS DataType = "timestamp_us"
)

// DataTypes lists every column type, in documentation order (the type
// names of the formats package).
var DataTypes = []DataType{TypeString, TypeInt64, TypeInt32, TypeFloat64, TypeBool,
	TypeTimestamp, TypeTimestampS, TypeTimestampMS, TypeTimestampUS}

// Numeric reports whether t supports sum and avg.
func (t DataType) Numeric() bool { return t == TypeInt64 || t == TypeInt32 || t == TypeFloat64 }

// IsTimestamp reports whether t is one of the timestamp types.
func (t DataType) IsTimestamp() bool {
	return t == TypeTimestamp || t == TypeTimestampS || t == TypeTimestampMS || t == TypeTimestampUS
}

// OnError says what a source does with a row it cannot decode.
type OnError string

// OnError policies.
const (
	// OnErrorReject counts the row and writes it to the rejected side output.
	OnErrorReject OnError = "reject"
	// OnErrorFail fails the epoch.
	OnErrorFail OnError = "fail"
)

// Field is one schema column.
type Field struct {
	Name string
	Type DataType
}

// Col is shorthand for Field{Name: name, Type: t}.
func Col(name string, t DataType) Field { return Field{Name: name, Type: t} }

// Source is where input rows come from.
type Source struct {
	Type SourceType
	// URL is the prefix the input files land under (resolved, with a scheme).
	URL    string
	Format Format
	// Schema lists the input columns in declared order, which is also the
	// column order of the decoded batches. It may be empty for Parquet, whose
	// files carry their own schema.
	Schema []Field
	// EventTime names the timestamp column that drives watermarks and windows.
	EventTime string
	// MaxFilesPerEpoch bounds the files one epoch reads; 0 = no limit.
	MaxFilesPerEpoch int
	// MaxRowsPerEpoch bounds the rows one epoch reads (an epoch stops after
	// the file that crosses it); 0 = no limit.
	MaxRowsPerEpoch int64
	// Pattern is a path.Match glob on the file key relative to URL, e.g.
	// "*.jsonl"; empty matches every file.
	Pattern string
	// CSV holds CSV options; set only for Format CSV (Parse sets defaults).
	CSV *CSVOptions
	// Watermark configures event-time progress.
	Watermark Watermark
	// OnError is the policy for undecodable rows; empty means reject.
	OnError OnError
	// RejectedURL receives rejected rows; empty = the engine's default.
	RejectedURL string
	// LateURL receives rows later than the allowed lateness; empty = they
	// are only counted.
	LateURL string
	// Inputs says how files map to watermark inputs: "" (one input) or
	// "directory" (each top-level directory under URL is an input, e.g. one
	// per device or region; an input idle longer than the idle timeout
	// stops holding the watermark back).
	Inputs InputsMode
	// StartFrom says where a pipeline starts reading: "earliest" (the
	// default: every file), "latest" (its first run marks every file
	// present then as read, without reading it), or an RFC 3339 time (a
	// file whose rows are all older is skipped).
	StartFrom string
	// MaxRejectedFraction (0: unset) fails an epoch before it commits when
	// more than this fraction of its rows were rejected, naming the file
	// with the most rejected rows.
	MaxRejectedFraction float64
	// Validate says which columns of the declared schema a row must match
	// to be accepted: "used" (the default: the columns the pipeline reads,
	// the only ones decoded) or "all" (every declared column is decoded
	// and checked, so the schema is a contract for the whole file).
	Validate string
	// Capture keeps a copy of each epoch's consumed input files with the
	// epoch's state (retention deletes it with the epoch), so `floe replay`
	// works after the source's own lifecycle rules deleted the originals.
	Capture bool
	// Order declares how new keys sort: "" (no promise: every run lists
	// the whole source) or OrderLexical (new files arrive with keys that
	// sort after the ones processed, e.g. time-stamped names or
	// day=YYYY-MM-DD/ folders): a run lists only the keys after the
	// listing frontier (S3 StartAfter), and the whole source once every
	// FullListEvery, when a run restores or reprocesses, or with
	// `floe run --full-list`, so a late key that sorts earlier is still
	// found, by the first run that lists it whole.
	Order string
	// FullListEvery (Order lexical; default DefaultFullListEvery) is the
	// longest time between two full listings recorded in the head.
	FullListEvery time.Duration
	// ForgetAfter (0: never) ignores source files whose modification time
	// is older than this when a run lists them: they are not read, and
	// the processed-file set forgets them, so a key that reappears with
	// its old modification time is not read again.
	ForgetAfter time.Duration
	// Kafka holds the settings of a kafka source (Type SourceKafka); nil
	// for other sources.
	Kafka *KafkaSource
}

// KafkaSource is the part of a source that only a kafka source has. The
// record metadata columns it asks for are appended to Source.Schema when
// the spec is decoded (KafkaColumns), so the rest of the pipeline reads
// them as ordinary columns.
type KafkaSource struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topics are the topics read (source.topic is one).
	Topics []string
	// MaxRecordsPerEpoch bounds the offsets one epoch reads over all
	// partitions (0: no limit).
	MaxRecordsPerEpoch int64
	// OnMissingOffsets is what an epoch does when offsets it should read
	// are no longer in the log (retention deleted them): fail (the
	// default) or skip (continue at the log start, counting them).
	OnMissingOffsets string
	// AuthFile names a file with the TLS and SASL settings (KEY=value
	// lines, FLOE_KAFKA_* names); empty: they come from the environment.
	// Credentials are never part of a spec.
	AuthFile string
	// Columns names the record metadata columns wanted; empty: not wanted.
	Columns KafkaColumns
	// Avro configures format: avro (nil: the writer schema is derived
	// from the value schema, the values bare Avro binary).
	Avro *KafkaAvro
}

// KafkaAvro configures the Avro record values of a kafka source.
type KafkaAvro struct {
	// SchemaFile is the writer schema (an .avsc file, relative to the
	// spec); empty: derived from the value schema as Flink's 'avro'
	// format derives it (AvroSchema).
	SchemaFile string
	// Confluent: each value is in the Confluent wire format (magic byte
	// 0, a 4-byte schema id, the datum); the id is not checked.
	Confluent bool
}

// KafkaColumns names the record metadata columns of a kafka source.
type KafkaColumns struct {
	Topic, Partition, Offset, Timestamp, Key string
}

// KafkaTimestamp is the event_time of a kafka source that takes the
// record's timestamp (and the default name of its column).
const KafkaTimestamp = "kafka_timestamp"

// Kafka on_missing_offsets values.
const (
	MissingFail = "fail"
	MissingSkip = "skip"
)

// OrderLexical is Source.Order for keys that arrive in lexical order.
const OrderLexical = "lexical"

// DefaultFullListEvery is Source.FullListEvery when it is not set.
const DefaultFullListEvery = time.Hour

// InputsMode selects how source files map to watermark inputs.
type InputsMode string

// Inputs modes.
const (
	InputsSingle    InputsMode = ""
	InputsDirectory InputsMode = "directory"
)

// CSVOptions configures the CSV decoder.
type CSVOptions struct {
	// Header says the first line of each file names the columns.
	Header bool
	// Delimiter is the single-character field separator.
	Delimiter string
}

// Watermark configures how event time advances.
type Watermark struct {
	// MaxOutOfOrderness: watermark = max event time seen - this.
	MaxOutOfOrderness time.Duration
	// IdleTimeout advances the watermark by processing time when no input
	// arrives for this long; 0 disables.
	IdleTimeout time.Duration
}

// Operator is one step of the plan. Exactly one of Filter, Project and
// Window is set.
type Operator struct {
	// ID names the operator in state keys (op=<id>). Unique in the pipeline;
	// defaults to its kind, then "<kind>-2", "<kind>-3", ... .
	ID      string
	Filter  *Filter
	Project *Project
	Window  *Window
}

// Operator kinds, as returned by Operator.Kind.
const (
	KindFilter  = "filter"
	KindProject = "project"
	KindWindow  = "window"
)

// Kind returns "filter", "project", "window", or "" when none or several
// are set.
func (o Operator) Kind() string {
	n, k := 0, ""
	if o.Filter != nil {
		n, k = n+1, KindFilter
	}
	if o.Project != nil {
		n, k = n+1, KindProject
	}
	if o.Window != nil {
		n, k = n+1, KindWindow
	}
	if n != 1 {
		return ""
	}
	return k
}

// Filter keeps the rows for which Expr (an expr-lang boolean expression over
// the columns) is true.
type Filter struct {
	Expr string
}

// Project replaces the columns with Columns, computed in order.
type Project struct {
	Columns []Projection
}

// Projection is one output column of a Project: Name = Expr.
type Projection struct {
	Name string
	Expr string
}

// Window is a keyed event-time window aggregation. Exactly one of Tumbling,
// Sliding and Session is set.
type Window struct {
	// Key lists the grouping columns; none (key: []) aggregates every row
	// of a window in one group (SQL's GROUP BY of the window alone).
	Key []string
	// Tumbling is the size of fixed, non-overlapping windows.
	Tumbling time.Duration
	// Sliding windows overlap: Size is a multiple of Slide.
	Sliding *SlidingWindow
	// Session windows close after Gap without events for the key.
	Session *SessionWindow
	// AllowedLateness keeps a window's state this long past its end so late
	// rows still update it.
	AllowedLateness time.Duration
	// Aggregates are the output columns, in declared order.
	Aggregates []Aggregate
}

// SlidingWindow is the shape of sliding windows.
type SlidingWindow struct {
	Size  time.Duration
	Slide time.Duration
}

// SessionWindow is the shape of session windows.
type SessionWindow struct {
	Gap time.Duration
}

// Window kinds, as returned by Window.Kind.
const (
	WindowTumbling = "tumbling"
	WindowSliding  = "sliding"
	WindowSession  = "session"
)

// Kind returns "tumbling", "sliding", "session", or "" when none or several
// are set.
func (w *Window) Kind() string {
	n, k := 0, ""
	if w.Tumbling != 0 {
		n, k = n+1, WindowTumbling
	}
	if w.Sliding != nil {
		n, k = n+1, WindowSliding
	}
	if w.Session != nil {
		n, k = n+1, WindowSession
	}
	if n != 1 {
		return ""
	}
	return k
}

// AggFunc is an aggregate function.
type AggFunc string

// Aggregate functions.
const (
	Count         AggFunc = "count"
	Sum           AggFunc = "sum"
	Min           AggFunc = "min"
	Max           AggFunc = "max"
	Avg           AggFunc = "avg"
	CountDistinct AggFunc = "count_distinct"
	First         AggFunc = "first"
	Last          AggFunc = "last"
)

// Aggregate is one output column of a Window: Name = Func(Column). Column is
// empty only for count(), which counts rows.
type Aggregate struct {
	Name   string
	Func   AggFunc
	Column string
	// RenamedFrom is the aggregate's previous name (`renamed_from:`): when
	// the pipeline restores state written before the rename, that
	// aggregate's state is kept under Name instead of starting empty. It
	// may stay in the spec after the rename has run.
	RenamedFrom string
}

// String returns the spec form, e.g. "sum(bytes)".
func (a Aggregate) String() string { return fmt.Sprintf("%s(%s)", a.Func, a.Column) }

// Sink is where output rows go.
type Sink struct {
	Type   SinkType
	URL    string
	Format Format
	// PartitionBy (Iceberg sinks): "identity(<column>)",
	// "hour(<timestamp column>)", "day(...)" (the default: the window
	// start's day when the output has one), "month(...)", "year(...)" or
	// "none".
	PartitionBy string
	// PartitionColumns (files sinks, `partition_by: [col, ...]`): the
	// output columns whose values name Hive-style directories
	// (col=value/...) the sink's files are written into; the files hold the
	// other columns. Empty: every file at the sink root.
	PartitionColumns []string
}

// IsZero reports whether s is the zero Sink (no field set).
func (s Sink) IsZero() bool {
	return s.Type == "" && s.URL == "" && s.Format == "" && s.PartitionBy == "" && len(s.PartitionColumns) == 0
}

// State is where the pipeline's manifests and operator state live.
type State struct {
	// URL is the state root; the pipeline uses <URL>/<Name>/.
	URL string
	// Parallelism is the number of keyed subtasks (1..MaxParallelism).
	Parallelism int
	// MaxParallelism is the key-group count, fixed for the pipeline's life
	// (1..keygroup.Max, i.e. 1..32768).
	MaxParallelism int
	// RetainEpochs is how many committed epochs retention keeps (>= 1).
	RetainEpochs int
	// MemoryLimit is the memory budget of one run in bytes
	// (state.memory_limit: "512MiB", "2GB"). 0 means the default the engine
	// derives from the machine (a quarter of the cgroup limit, else of
	// physical memory).
	MemoryLimit int64
}

// Start-from modes of Source.StartFrom.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// StartTime interprets StartFrom: latest, or the time before which a file
// whose rows are all older is skipped (ok false: earliest).
func (s *Source) StartTime() (t time.Time, latest bool, err error) {
	switch s.StartFrom {
	case "", StartEarliest:
		return time.Time{}, false, nil
	case StartLatest:
		return time.Time{}, true, nil
	}
	t, err = time.Parse(time.RFC3339Nano, s.StartFrom)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("invalid value %q (allowed: earliest, latest, or an RFC 3339 time such as 2026-01-01T00:00:00Z)", s.StartFrom)
	}
	return t, false, nil
}
