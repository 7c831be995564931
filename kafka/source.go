package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/floe-dev/floe/store"
)

// A Source presents a Kafka topic to the engine as a store.Store of
// read-only "files", one per offset range: key "<topic>/<partition>/<from>-<to>"
// holds the records of [from, to) of that partition rendered one line per
// offset (an offset without a data record, a transaction marker, a
// compacted or skipped one, is an empty line), so that line N of the file
// is offset from+N-1 and the engine's decoders, reject handling and epoch
// protocol work on it unchanged.
//
// List returns the ranges between the committed offsets (SetCommitted,
// from the head manifest) and the high watermarks at the time of the
// listing, cut into epochs of at most MaxRecords (NextRanges, applied
// repeatedly): in epoch order, not key order, so that a prefix of the
// listing is always whole epochs followed by the start of the next.
type Source struct {
	cfg SourceConfig
	cl  *Client
	log *slog.Logger

	mu        sync.Mutex
	committed map[Partition]int64
	skippedTo int64               // offsets skipped over the pipeline's life, as committed
	starts    map[Partition]int64 // the start offset of every listed partition
	wms       map[Partition]Watermarks
	skipped   map[string]int64 // per key read, the offsets skipped (SkipMissing)
	timeStart map[Partition]int64
	avro      *AvroValues // format avro
}

// SourceConfig configures a Source.
type SourceConfig struct {
	Client Config
	Topics []string
	// Format of the values: "jsonl", "csv" or "avro" (Avro binary with
	// the writer schema AvroSchema, rendered as JSON lines; Confluent:
	// each value in the Confluent wire format, its schema id not checked).
	Format     string
	AvroSchema string
	Confluent  bool
	// Columns are the metadata columns rendered into each line (after the
	// value's fields for CSV; added to the JSON object for JSON lines). The
	// timestamp is rendered in milliseconds (declare it timestamp_ms).
	Columns Columns
	// StartAt, when not zero, starts partitions new to the pipeline at the
	// first offset at or after it (OffsetsForTime); else at their low
	// watermark (earliest; "latest" is the engine's: a first epoch that
	// marks what is there read).
	StartAt time.Time
	// MaxRecords bounds the offsets of one epoch (0: none).
	MaxRecords int64
	// SkipMissing skips offsets retention removed (else a read fails with
	// a *MissingOffsetsError).
	SkipMissing bool
	// RangeOffsets bounds the offsets of one listed range (default
	// MaxRangeOffsets).
	RangeOffsets int64
	// FetchTimeout bounds one range's fetch (FetchOptions.Timeout).
	FetchTimeout time.Duration
	Log          *slog.Logger
}

// OpenSource opens a Source; it connects lazily.
func OpenSource(cfg SourceConfig) (*Source, error) {
	if len(cfg.Topics) == 0 {
		return nil, errors.New("kafka source: no topic")
	}
	cl, err := Dial(cfg.Client)
	if err != nil {
		return nil, err
	}
	if cfg.RangeOffsets <= 0 {
		cfg.RangeOffsets = MaxRangeOffsets
	}
	var av *AvroValues
	if cfg.Format == "avro" {
		if av, err = NewAvroValues(cfg.AvroSchema, cfg.Confluent); err != nil {
			cl.Close()
			return nil, fmt.Errorf("kafka source: %w", err)
		}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: cfg, cl: cl, log: log, skipped: map[string]int64{}, avro: av}, nil
}

// Client is the source's client.
func (s *Source) Client() *Client { return s.cl }

// Topics are the source's topics.
func (s *Source) Topics() []string { return s.cfg.Topics }

// SetCommitted sets the committed offsets the next List starts from (and
// the skipped-offsets total they carry).
func (s *Source) SetCommitted(c map[Partition]int64, skipped int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = make(map[Partition]int64, len(c))
	for p, o := range c {
		s.committed[p] = o
	}
	s.skippedTo = skipped
}

// Base returns the offsets an epoch starts from: the committed ones, and
// for a partition not committed yet where the last List started it. An
// epoch's manifest records Advance(Base(), the ranges it consumed).
func (s *Source) Base() (map[Partition]int64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Partition]int64, len(s.starts)+len(s.committed))
	for p, o := range s.starts {
		out[p] = o
	}
	for p, o := range s.committed {
		out[p] = o
	}
	return out, s.skippedTo
}

// Starts returns the start offset of every partition the last List saw:
// the committed offset, else where a new partition starts. An epoch's
// manifest records these advanced by the ranges it consumed.
func (s *Source) Starts() map[Partition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Partition]int64, len(s.starts))
	for p, o := range s.starts {
		out[p] = o
	}
	return out
}

// Watermarks returns the watermarks the last List saw.
func (s *Source) Watermarks() map[Partition]Watermarks {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Partition]Watermarks, len(s.wms))
	for p, w := range s.wms {
		out[p] = w
	}
	return out
}

// Skipped returns the offsets skipped when key was read (SkipMissing).
func (s *Source) Skipped(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped[key]
}

// MaxRangeOffsets bounds the offsets of one listed range: a longer range
// is listed as consecutive ranges, so one read holds a bounded number of
// records in memory.
const MaxRangeOffsets = 50000

// AssumedRecordBytes is the size a listed range reports per offset (its
// records' size is known only once fetched): what the engine's memory
// budget estimates an epoch by.
const AssumedRecordBytes = 1024

func chunks(r Range, n int64) []Range {
	var out []Range
	for from := r.From; from < r.To; from += n {
		c := r
		c.From, c.To = from, min(from+n, r.To)
		out = append(out, c)
	}
	return out
}

// Key is the file key of r.
func Key(r Range) string {
	return fmt.Sprintf("%s/%d/%d-%d", r.Topic, r.Partition.Partition, r.From, r.To)
}

// ParseKey is the inverse of Key.
func ParseKey(key string) (Range, error) {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 {
		return Range{}, fmt.Errorf("kafka source: %q is not a range key (topic/partition/from-to)", key)
	}
	j := strings.LastIndexByte(key[:i], '/')
	if j <= 0 {
		return Range{}, fmt.Errorf("kafka source: %q is not a range key (topic/partition/from-to)", key)
	}
	p, err1 := strconv.ParseInt(key[j+1:i], 10, 32)
	a, b, ok := strings.Cut(key[i+1:], "-")
	from, err2 := strconv.ParseInt(a, 10, 64)
	to, err3 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || err3 != nil || p < 0 || from < 0 || to < from {
		return Range{}, fmt.Errorf("kafka source: %q is not a range key (topic/partition/from-to)", key)
	}
	return Range{Partition: Partition{Topic: key[:j], Partition: int32(p)}, From: from, To: to}, nil
}

// InputOf is the watermark input of a key: "<topic>/<partition>".
func InputOf(key string) string {
	if i := strings.LastIndexByte(key, '/'); i > 0 {
		return key[:i]
	}
	return key
}

// List lists the pending ranges (see Source); prefix selects by key.
func (s *Source) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	wms, err := s.cl.Watermarks(ctx, s.cfg.Topics...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	committed := s.committed
	s.mu.Unlock()
	var fresh []Partition
	for p := range wms {
		if _, ok := committed[p]; !ok {
			fresh = append(fresh, p)
		}
	}
	starts := map[Partition]int64{}
	if !s.cfg.StartAt.IsZero() && len(fresh) > 0 {
		byTime, err := s.cl.OffsetsForTime(ctx, s.cfg.StartAt, s.cfg.Topics...)
		if err != nil {
			return nil, err
		}
		for _, p := range fresh {
			if o, ok := byTime[p]; ok {
				starts[p] = o
			}
		}
	}
	start := func(p Partition) int64 {
		if o, ok := starts[p]; ok && o >= 0 {
			return o
		}
		return wms[p].Low
	}
	var out []store.ObjectInfo
	cur := committed
	first := true
	for {
		rs, next := NextRanges(cur, wms, nil, start, s.cfg.MaxRecords)
		if first {
			s.mu.Lock()
			s.starts, s.wms = next, wms
			s.mu.Unlock()
			first = false
		}
		if len(rs) == 0 {
			break
		}
		for _, r := range rs {
			for _, c := range chunks(r, s.cfg.RangeOffsets) {
				if k := Key(c); strings.HasPrefix(k, prefix) {
					out = append(out, store.ObjectInfo{Key: k, Size: c.Len() * AssumedRecordBytes})
				}
			}
		}
		cur = Advance(next, rs)
	}
	return out, nil
}

// Read fetches the range of key and renders it (see Source).
func (s *Source) Read(ctx context.Context, key string) ([]byte, error) {
	r, err := ParseKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, store.ErrNotFound)
	}
	f, err := s.cl.Fetch(ctx, []Range{r}, FetchOptions{SkipMissing: s.cfg.SkipMissing, Timeout: s.cfg.FetchTimeout})
	if err != nil {
		return nil, err
	}
	if n := f.SkippedCount(); n > 0 {
		s.mu.Lock()
		s.skipped[key] = n
		s.mu.Unlock()
		for _, sk := range f.Skipped {
			s.log.Warn("kafka: offsets no longer in the log skipped (on_missing_offsets: skip)",
				"topic", sk.Topic, "partition", sk.Partition.Partition, "from", sk.From, "to", sk.To-1, "count", sk.To-sk.From)
		}
	}
	return s.render(r, f.Records), nil
}

func (s *Source) render(r Range, recs []Record) []byte {
	var buf bytes.Buffer
	buf.Grow(int(r.Len()) * 64)
	at := r.From
	csv := s.cfg.Format == "csv"
	for _, rec := range recs {
		for ; at < rec.Offset; at++ {
			buf.WriteByte('\n')
		}
		switch {
		case csv:
			renderCSV(&buf, rec, s.cfg.Columns)
		case s.avro != nil:
			renderAvro(&buf, s.avro, rec, s.cfg.Columns)
		default:
			renderJSON(&buf, rec, s.cfg.Columns)
		}
		buf.WriteByte('\n')
		at = rec.Offset + 1
	}
	for ; at < r.To; at++ {
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// renderAvro writes an Avro record value as renderJSON writes a JSON one;
// a value that does not decode is written so that the decoder rejects it,
// with the reason.
func renderAvro(buf *bytes.Buffer, a *AvroValues, rec Record, c Columns) {
	v, err := a.AppendJSON(nil, rec.Value)
	if err != nil {
		buf.WriteString("\x00Avro value: ")
		buf.WriteString(strings.ReplaceAll(strings.ReplaceAll(err.Error(), "\r", " "), "\n", " "))
		return
	}
	rec.Value = v
	renderJSON(buf, rec, c)
}

// renderJSON writes the record value as one JSON line with the metadata
// columns added as the object's first members. A value that is not one
// JSON object is written so that the decoder rejects it (never as an empty
// line, which would be skipped).
func renderJSON(buf *bytes.Buffer, rec Record, c Columns) {
	v := bytes.TrimSpace(rec.Value)
	if bytes.ContainsAny(v, "\r\n") {
		var cb bytes.Buffer
		if err := json.Compact(&cb, v); err == nil {
			v = cb.Bytes()
		} else {
			v = bytes.ReplaceAll(bytes.ReplaceAll(v, []byte("\r"), []byte(" ")), []byte("\n"), []byte(" "))
			buf.WriteString("\x00invalid JSON: ")
			buf.Write(v)
			return
		}
	}
	if len(v) == 0 {
		buf.WriteString("\x00empty record value (a tombstone?)")
		return
	}
	meta := metaJSON(rec, c)
	if meta == "" || v[0] != '{' {
		buf.Write(v)
		return
	}
	buf.WriteByte('{')
	buf.WriteString(meta)
	rest := bytes.TrimSpace(v[1:])
	if len(rest) > 0 && rest[0] != '}' {
		buf.WriteByte(',')
	}
	buf.Write(rest)
}

func metaJSON(rec Record, c Columns) string {
	var parts []string
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	if c.Topic != "" {
		parts = append(parts, q(c.Topic)+":"+q(rec.Topic))
	}
	if c.Partition != "" {
		parts = append(parts, q(c.Partition)+":"+strconv.Itoa(int(rec.Partition.Partition)))
	}
	if c.Offset != "" {
		parts = append(parts, q(c.Offset)+":"+strconv.FormatInt(rec.Offset, 10))
	}
	if c.Timestamp != "" {
		parts = append(parts, q(c.Timestamp)+":"+strconv.FormatInt(rec.Timestamp.UnixMilli(), 10))
	}
	if c.Key != "" {
		k := "null"
		if rec.Key != nil {
			k = q(strings.ToValidUTF8(string(rec.Key), "\ufffd"))
		}
		parts = append(parts, q(c.Key)+":"+k)
	}
	return strings.Join(parts, ",")
}

// renderCSV writes the value (its line breaks as spaces: a CSV record is
// one row) and the metadata columns after it, in Columns order.
func renderCSV(buf *bytes.Buffer, rec Record, c Columns) {
	v := bytes.TrimRight(rec.Value, "\r\n")
	v = bytes.ReplaceAll(bytes.ReplaceAll(v, []byte("\r"), []byte(" ")), []byte("\n"), []byte(" "))
	if len(bytes.TrimSpace(v)) == 0 {
		buf.WriteString("\x00empty record value")
	}
	buf.Write(v)
	field := func(s string) {
		buf.WriteByte(',')
		if strings.ContainsAny(s, ",\"\r\n") {
			buf.WriteString(`"` + strings.ReplaceAll(s, `"`, `""`) + `"`)
		} else {
			buf.WriteString(s)
		}
	}
	if c.Topic != "" {
		field(rec.Topic)
	}
	if c.Partition != "" {
		field(strconv.Itoa(int(rec.Partition.Partition)))
	}
	if c.Offset != "" {
		field(strconv.FormatInt(rec.Offset, 10))
	}
	if c.Timestamp != "" {
		field(strconv.FormatInt(rec.Timestamp.UnixMilli(), 10))
	}
	if c.Key != "" {
		if rec.Key != nil {
			field(strings.ToValidUTF8(string(rec.Key), "\ufffd"))
		} else {
			buf.WriteByte(',')
		}
	}
}

// Get is Read with no ETag.
func (s *Source) Get(ctx context.Context, key string) ([]byte, string, error) {
	b, err := s.Read(ctx, key)
	return b, "", err
}

// Put refuses: a source is read only.
func (s *Source) Put(context.Context, string, []byte, store.PutOptions) (string, error) {
	return "", errors.New("kafka source: read only")
}

// Delete refuses: a source is read only.
func (s *Source) Delete(context.Context, string) error {
	return errors.New("kafka source: read only")
}

// Close closes the client.
func (s *Source) Close() error { s.cl.Close(); return nil }

var (
	_ store.Store  = (*Source)(nil)
	_ store.Reader = (*Source)(nil)
)
