package sources

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/kafka"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Describe names p's sources in messages: source.url, or in the graph
// form each named source's URL ("sources(a=..., b=...)"), redacted.
func Describe(p *spec.Pipeline) string {
	if len(p.Sources) == 0 {
		return store.Redact(p.Source.URL)
	}
	var parts []string
	for _, ns := range p.Sources {
		parts = append(parts, ns.Name+"="+store.Redact(ns.Source.URL))
	}
	return "sources(" + strings.Join(parts, ", ") + ")"
}

// Mux is the combined store of a graph pipeline's sources: key
// "<name>/<key>" is key of source name. It only reads.
type Mux struct {
	names  []string // sorted
	stores map[string]store.Store
}

func (m *Mux) split(key string) (store.Store, string, error) {
	name, rest, ok := strings.Cut(key, "/")
	s := m.stores[name]
	if !ok || s == nil {
		return nil, "", fmt.Errorf("source file %q names no source of the pipeline (%s): %w", key, strings.Join(m.names, ", "), store.ErrNotFound)
	}
	return s, rest, nil
}

func (m *Mux) Get(ctx context.Context, key string) ([]byte, string, error) {
	s, k, err := m.split(key)
	if err != nil {
		return nil, "", err
	}
	return s.Get(ctx, k)
}

func (m *Mux) Read(ctx context.Context, key string) ([]byte, error) {
	s, k, err := m.split(key)
	if err != nil {
		return nil, err
	}
	return store.Read(ctx, s, k)
}

func (m *Mux) Put(ctx context.Context, key string, _ []byte, _ store.PutOptions) (string, error) {
	return "", fmt.Errorf("write %s: the sources of a pipeline are read only", key)
}

func (m *Mux) Delete(ctx context.Context, key string) error {
	return fmt.Errorf("delete %s: the sources of a pipeline are read only", key)
}

// List lists every source (each in key order, sources by name) with the
// source's name prefixed; a prefix selects as on the combined keys.
func (m *Mux) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	var out []store.ObjectInfo
	for _, name := range m.names {
		p := name + "/"
		if !strings.HasPrefix(p, prefix) && !strings.HasPrefix(prefix, p) {
			continue
		}
		sub := ""
		if strings.HasPrefix(prefix, p) {
			sub = prefix[len(p):]
		}
		objs, err := m.stores[name].List(ctx, sub)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", name, err)
		}
		for _, o := range objs {
			o.Key = p + o.Key
			out = append(out, o)
		}
	}
	return out, nil
}

func (m *Mux) Close() error {
	var first error
	for _, s := range m.stores {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// OpenGraph opens each named source of p (wrapped like any store; a kafka
// source is its own store, not retried as object storage is: a fetch has
// its own deadline) and combines them.
func OpenGraph(ctx context.Context, p *spec.Pipeline, open func(name, field, url string) (store.Store, error), log *slog.Logger) (store.Store, error) {
	m := &Mux{stores: map[string]store.Store{}}
	for _, ns := range p.Sources {
		var s store.Store
		var err error
		if ns.Source.Type == spec.SourceKafka {
			s, err = OpenKafka(&ns.Source, log.With("source", ns.Name))
			if err != nil {
				err = fmt.Errorf("sources.%s: %w", ns.Name, err)
			}
		} else {
			s, err = open("source", fmt.Sprintf("sources.%s.url", ns.Name), ns.Source.URL)
		}
		if err != nil {
			m.Close()
			return nil, err
		}
		m.stores[ns.Name] = s
		m.names = append(m.names, ns.Name)
	}
	slices.Sort(m.names)
	return m, nil
}

// Named returns the named source a combined key belongs to.
func Named(p *spec.Pipeline, key string) (*spec.NamedSource, string) {
	name, rest, _ := strings.Cut(key, "/")
	for i := range p.Sources {
		if p.Sources[i].Name == name {
			return &p.Sources[i], rest
		}
	}
	return nil, rest
}

// Delay is a named source's max_out_of_orderness.
func Delay(p *spec.Pipeline, name string) time.Duration {
	for _, ns := range p.Sources {
		if ns.Name == name {
			return ns.Source.Watermark.MaxOutOfOrderness
		}
	}
	return 0
}

// NamedKafka is one kafka source of a pipeline: the linear form's (Name
// "", its keys the range keys) or a graph's named one (its keys in the
// combined listing "<name>/<range key>").
type NamedKafka struct {
	Name   string
	Source *kafka.Source
}

// Prefix is what the source's keys start with in the run's listing.
func (k NamedKafka) Prefix() string {
	if k.Name == "" {
		return ""
	}
	return k.Name + "/"
}

// RangeKey returns the range key of a listed key of this source.
func (k NamedKafka) RangeKey(key string) (string, bool) {
	return strings.CutPrefix(key, k.Prefix())
}

// KafkaOf returns the kafka sources of a run's source store, by name.
func KafkaOf(src store.Store) []NamedKafka {
	switch s := src.(type) {
	case *kafka.Source:
		return []NamedKafka{{Source: s}}
	case *Mux:
		var out []NamedKafka
		for _, name := range s.names {
			if ks, ok := s.stores[name].(*kafka.Source); ok {
				out = append(out, NamedKafka{Name: name, Source: ks})
			}
		}
		return out
	}
	return nil
}

// HasKafka reports whether p reads a kafka source (in either form).
func HasKafka(p *spec.Pipeline) bool {
	if len(p.Sources) == 0 {
		return p.Source.Type == spec.SourceKafka
	}
	for _, ns := range p.Sources {
		if ns.Source.Type == spec.SourceKafka {
			return true
		}
	}
	return false
}

// OpenKafka opens the store of a kafka source.
func OpenKafka(s *spec.Source, log *slog.Logger) (*kafka.Source, error) {
	k := s.Kafka
	auth, err := kafka.LoadAuth(k.AuthFile, nil)
	if err != nil {
		return nil, err
	}
	startAt, _, _ := s.StartTime()
	format := string(s.Format)
	if format == "" {
		format = string(spec.JSONL)
	}
	var avroSchema string
	if s.Format == spec.Avro {
		if avroSchema, err = s.AvroSchema(); err != nil {
			return nil, err
		}
	}
	c := k.Columns
	return kafka.OpenSource(kafka.SourceConfig{
		Client:      kafka.Config{Brokers: k.Brokers, Auth: auth},
		Topics:      k.Topics,
		Format:      format,
		AvroSchema:  avroSchema,
		Confluent:   k.Avro != nil && k.Avro.Confluent,
		Columns:     kafka.Columns{Topic: c.Topic, Partition: c.Partition, Offset: c.Offset, Timestamp: c.Timestamp, Key: c.Key},
		StartAt:     startAt,
		MaxRecords:  k.MaxRecordsPerEpoch,
		SkipMissing: k.OnMissingOffsets == spec.MissingSkip,
		Log:         log,
	})
}

// KafkaOffsetsOf returns the committed offsets of m's kafka source name
// ("" in the linear form; none for nil) and the skipped-offsets total of
// all its kafka sources.
func KafkaOffsetsOf(m *manifest.Manifest, name string) (map[kafka.Partition]int64, int64) {
	out := map[kafka.Partition]int64{}
	if m == nil || m.Source.Kafka == nil {
		return out, 0
	}
	for _, p := range m.Source.Kafka.Partitions {
		if p.Source == name {
			out[kafka.Partition{Topic: p.Topic, Partition: p.Partition}] = p.Next
		}
	}
	return out, m.Source.Kafka.Skipped
}

// RangeReaderOf returns the store that holds source key and its key there,
// when that store reads ranges itself, and what one request costs it
// (store.RequestBytes).
func RangeReaderOf(s store.Store, key string) (store.RangeReader, string, int64) {
	if m, ok := s.(*Mux); ok {
		inner, k, err := m.split(key)
		if err != nil {
			return nil, "", 0
		}
		s, key = inner, k
	}
	rr, _ := s.(store.RangeReader)
	return rr, key, store.RequestBytes(s)
}

// List lists the source: every file that is not hidden or in
// progress (names starting with "." or "_") and matches source.pattern, in
// key order.
func List(ctx context.Context, p *spec.Pipeline, src store.Store) ([]store.ObjectInfo, error) {
	return ListAfter(ctx, p, src, "")
}

// ListAfter is listSource restricted to the keys after after (see
// listing.go).
func ListAfter(ctx context.Context, p *spec.Pipeline, src store.Store, after string) ([]store.ObjectInfo, error) {
	objs, err := store.ListAfter(ctx, src, "", after)
	if err != nil {
		return nil, fmt.Errorf("list source %s: %w", Describe(p), err)
	}
	out := objs[:0]
	for _, o := range objs {
		base := path.Base(o.Key)
		if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			continue // hidden and in-progress files (Spark/Hive convention)
		}
		if pat, rel, field := PatternOf(p, o.Key); pat != "" {
			ok, err := path.Match(pat, rel)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", field, pat, err)
			}
			if !ok {
				if ok2, _ := path.Match(pat, base); !ok2 {
					continue
				}
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// PatternOf returns the pattern that selects listed key: source.pattern,
// or in the graph form the pattern of the named source the key's first
// segment names, matched against the key below that source (rel); field
// names it for errors.
func PatternOf(p *spec.Pipeline, key string) (pat, rel, field string) {
	if len(p.Sources) == 0 {
		return p.Source.Pattern, key, "source.pattern"
	}
	name, rest, _ := strings.Cut(key, "/")
	for _, ns := range p.Sources {
		if ns.Name == name {
			return ns.Source.Pattern, rest, "sources." + name + ".pattern"
		}
	}
	return "", key, ""
}

// PendingFiles returns the listed files not in seen, in Listing order.
func PendingFiles(files []store.ObjectInfo, seen func(string) bool) []store.ObjectInfo {
	var out []store.ObjectInfo
	for _, f := range files {
		if !seen(f.Key) {
			out = append(out, f)
		}
	}
	return out
}

// InferSchema reads the footer of the first Parquet file of the Listing.
func InferSchema(ctx context.Context, p *spec.Pipeline, src store.Store, files []store.ObjectInfo) (*arrow.Schema, error) {
	if p.Source.Format != spec.Parquet {
		return nil, fmt.Errorf("source.schema is required for %s sources", p.Source.Format)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("source.schema is not declared and no Parquet file exists under %s to infer it from", store.Redact(p.Source.URL))
	}
	data, err := store.Read(ctx, src, files[0].Key)
	if err != nil {
		return nil, fmt.Errorf("infer schema: %w", err)
	}
	schema, err := formats.ParquetSchema(files[0].Key, data)
	if err != nil {
		return nil, fmt.Errorf("infer schema: %w", err)
	}
	return schema, nil
}

// DecodeOptions returns the options files of src decode with into schema.
func DecodeOptions(src *spec.Source, schema *arrow.Schema, mem memory.Allocator, parallel int) formats.DecodeOptions {
	opts := formats.DecodeOptions{Schema: schema, EventTime: src.EventTime, Mem: mem, Parallelism: parallel}
	if c := src.CSV; c != nil {
		opts.CSV.NoHeader = !c.Header
		if c.Delimiter != "" {
			opts.CSV.Delimiter = []rune(c.Delimiter)[0]
		}
	}
	return opts
}

// RowCaps counts an epoch's rows by source against each source's
// max_rows_per_epoch. nil (no source sets one) counts nothing.
type RowCaps struct {
	p     *spec.Pipeline
	total map[string]int64 // by source name ("" in the linear form)
}

func NewRowCaps(p *spec.Pipeline) *RowCaps {
	for _, b := range p.SourceBlocks() {
		if b.Source.MaxRowsPerEpoch > 0 {
			return &RowCaps{p: p, total: map[string]int64{}}
		}
	}
	return nil
}

// Add counts rows of the file key and reports whether its source reached
// its max_rows_per_epoch: the epoch then ends after this file, whatever the
// other sources' counts (every source's limit holds, and where the epoch
// ends depends only on the files' order and rows).
func (c *RowCaps) Add(key string, rows int64) bool {
	if c == nil {
		return false
	}
	b, _, ok := c.p.SourceOfKey(key)
	if !ok {
		return false
	}
	c.total[b.Name] += rows
	lim := b.Source.MaxRowsPerEpoch
	return lim > 0 && c.total[b.Name] >= lim
}
