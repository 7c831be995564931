package iceberg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// This file is floe's model of an Iceberg (format version 2) table metadata
// file. It is written against the spec rather than iceberg-go's table
// package, whose import alone costs every floe process ~90 ms and ~32 MB at
// start-up (its substrait sub-package parses a YAML catalogue in an init
// function). Only the root iceberg-go package (schemas, partition specs,
// manifests, manifest lists) is used.
//
// Fields floe does not interpret are kept verbatim: a metadata file is
// decoded into its top-level members, the members floe changes are
// re-encoded and every other member is written back as it was read.

// Table property keys floe sets or reads (names from the Iceberg spec).
const (
	propCommitNumRetries        = "commit.retry.num-retries"
	propManifestMergeEnabled    = "commit.manifest-merge.enabled"
	propManifestMinMergeCount   = "commit.manifest.min-count-to-merge"
	propManifestTargetSize      = "commit.manifest.target-size-bytes"
	propMetadataPreviousMax     = "write.metadata.previous-versions-max"
	propNameMappingDefault      = "schema.name-mapping.default"
	defaultManifestTargetSize   = 8 << 20
	defaultMetadataPreviousMax  = 100
	formatVersion               = 2
	noSnapshot                  = -1
	mainBranch                  = "main"
	summaryOperation            = "operation"
	operationAppend             = "append"
	refTypeBranch               = "branch"
	unpartitionedLastPartitonID = 999
)

// snapshot is one entry of "snapshots". raw keeps the entry as read (nil
// for a snapshot floe is adding) so that members floe does not know survive.
type snapshot struct {
	ID           int64             `json:"snapshot-id"`
	Parent       *int64            `json:"parent-snapshot-id,omitempty"`
	Seq          int64             `json:"sequence-number"`
	TimestampMs  int64             `json:"timestamp-ms"`
	ManifestList string            `json:"manifest-list,omitempty"`
	Summary      map[string]string `json:"summary,omitempty"`
	SchemaID     *int              `json:"schema-id,omitempty"`
	raw          json.RawMessage
}

func (s snapshot) MarshalJSON() ([]byte, error) {
	if s.raw != nil {
		return s.raw, nil
	}
	type plain snapshot
	return json.Marshal(plain(s))
}

type snapshotLogEntry struct {
	SnapshotID  int64 `json:"snapshot-id"`
	TimestampMs int64 `json:"timestamp-ms"`
}

type metadataLogEntry struct {
	MetadataFile string `json:"metadata-file"`
	TimestampMs  int64  `json:"timestamp-ms"`
}

// tableMeta is one parsed metadata file.
type tableMeta struct {
	raw map[string]json.RawMessage

	location      string
	lastUpdatedMs int64
	lastSeq       int64
	schema        *iceberg.Schema // the current schema
	maxSchemaID   int             // the highest schema-id among "schemas"
	lastColumnID  int             // "last-column-id"
	spec          iceberg.PartitionSpec
	props         iceberg.Properties
	currentID     int64 // noSnapshot when none
	snapshots     []snapshot
	snapshotLog   []snapshotLogEntry
	metadataLog   []metadataLogEntry
	refs          map[string]map[string]json.RawMessage
	snapshotByID  map[int64]int
}

// member decodes raw[key] into v; required members must be present and
// not null.
func (m *tableMeta) member(key string, v any, required bool) error {
	r, ok := m.raw[key]
	if !ok || bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
		if required {
			return fmt.Errorf("missing %q", key)
		}
		return nil
	}
	if err := json.Unmarshal(r, v); err != nil {
		return fmt.Errorf("member %q: %w", key, err)
	}
	return nil
}

// parseMeta parses and checks a metadata file. A panic inside a parser on
// hostile input becomes an error.
func parseMeta(data []byte) (m *tableMeta, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("parse: %v", r)
		}
	}()
	m = &tableMeta{}
	if err := json.Unmarshal(data, &m.raw); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if m.raw == nil {
		return nil, errors.New("parse: empty metadata")
	}
	var version int
	if err := m.member("format-version", &version, true); err != nil {
		return nil, err
	}
	if version != formatVersion {
		return nil, fmt.Errorf("format-version %d: floe reads and writes Iceberg format version %d tables only", version, formatVersion)
	}
	var id string
	if err := m.member("table-uuid", &id, true); err != nil {
		return nil, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return nil, fmt.Errorf("table-uuid %q: %w", id, err)
	}
	if err := m.member("location", &m.location, true); err != nil {
		return nil, err
	}
	if m.location == "" {
		return nil, errors.New("empty location")
	}
	if err := m.member("last-updated-ms", &m.lastUpdatedMs, true); err != nil {
		return nil, err
	}
	if err := m.member("last-sequence-number", &m.lastSeq, true); err != nil {
		return nil, err
	}
	var schemas []*iceberg.Schema
	if err := m.member("schemas", &schemas, true); err != nil {
		return nil, err
	}
	schemaID := -1
	if err := m.member("current-schema-id", &schemaID, true); err != nil {
		return nil, err
	}
	for _, s := range schemas {
		if s != nil && s.ID == schemaID {
			m.schema = s
		}
		if s != nil {
			m.maxSchemaID = max(m.maxSchemaID, s.ID)
		}
	}
	if m.schema == nil {
		return nil, fmt.Errorf("current-schema-id %d is not among the schemas", schemaID)
	}
	if err := m.member("last-column-id", &m.lastColumnID, true); err != nil {
		return nil, err
	}
	var specs []iceberg.PartitionSpec
	if err := m.member("partition-specs", &specs, true); err != nil {
		return nil, err
	}
	specID := -1
	if err := m.member("default-spec-id", &specID, true); err != nil {
		return nil, err
	}
	found := false
	for _, s := range specs {
		if s.ID() == specID {
			m.spec, found = s, true
		}
	}
	if !found {
		return nil, fmt.Errorf("default-spec-id %d is not among the partition-specs", specID)
	}
	if err := m.member("properties", &m.props, false); err != nil {
		return nil, err
	}
	if m.props == nil {
		m.props = iceberg.Properties{}
	}
	var raws []json.RawMessage
	if err := m.member("snapshots", &raws, false); err != nil {
		return nil, err
	}
	m.snapshotByID = make(map[int64]int, len(raws))
	for i, r := range raws {
		var s snapshot
		if err := json.Unmarshal(r, &s); err != nil {
			return nil, fmt.Errorf("snapshot %d: %w", i, err)
		}
		if s.ID == 0 || s.TimestampMs == 0 {
			return nil, fmt.Errorf("snapshot %d: missing snapshot-id or timestamp-ms", i)
		}
		s.raw = r
		m.snapshotByID[s.ID] = len(m.snapshots)
		m.snapshots = append(m.snapshots, s)
	}
	m.currentID = noSnapshot
	if err := m.member("current-snapshot-id", &m.currentID, false); err != nil {
		return nil, err
	}
	if m.currentID != noSnapshot {
		if _, ok := m.snapshotByID[m.currentID]; !ok {
			return nil, fmt.Errorf("current-snapshot-id %d is not among the snapshots", m.currentID)
		}
	}
	if err := m.member("snapshot-log", &m.snapshotLog, false); err != nil {
		return nil, err
	}
	if err := m.member("metadata-log", &m.metadataLog, false); err != nil {
		return nil, err
	}
	if err := m.member("refs", &m.refs, false); err != nil {
		return nil, err
	}
	return m, nil
}

// current returns the current snapshot, or nil.
func (m *tableMeta) current() *snapshot {
	if m.currentID == noSnapshot {
		return nil
	}
	return &m.snapshots[m.snapshotByID[m.currentID]]
}

// newMeta is version 1 of a table: schema sc (fresh field IDs), spec, no
// snapshot.
func newMeta(sc *iceberg.Schema, spec iceberg.PartitionSpec, location string, props iceberg.Properties, nowMs int64) (*tableMeta, error) {
	enc := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // only plain values are encoded here
		}
		return b
	}
	sch, err := json.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	sp, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode partition spec: %w", err)
	}
	lastPartition := unpartitionedLastPartitonID
	if !spec.IsUnpartitioned() {
		lastPartition = spec.LastAssignedFieldID()
	}
	raw := map[string]json.RawMessage{
		"format-version":        enc(formatVersion),
		"table-uuid":            enc(uuid.NewString()),
		"location":              enc(location),
		"last-sequence-number":  enc(0),
		"last-updated-ms":       enc(nowMs),
		"last-column-id":        enc(sc.HighestFieldID()),
		"schemas":               json.RawMessage("[" + string(sch) + "]"),
		"current-schema-id":     enc(sc.ID),
		"partition-specs":       json.RawMessage("[" + string(sp) + "]"),
		"default-spec-id":       enc(spec.ID()),
		"last-partition-id":     enc(lastPartition),
		"properties":            enc(props),
		"sort-orders":           json.RawMessage(`[{"order-id":0,"fields":[]}]`),
		"default-sort-order-id": enc(0),
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	return parseMeta(data)
}

// change is what one commit does to a metadata version.
type change struct {
	props    iceberg.Properties // set (merged over the existing ones)
	schema   *iceberg.Schema    // added to "schemas" and made current, when not nil
	add      *snapshot          // appended and made current on main
	expire   map[int64]bool     // snapshot IDs removed
	nowMs    int64
	baseFile string // location of the version this change applies to
}

// apply returns the next version's metadata.
func (m *tableMeta) apply(c change) (*tableMeta, error) {
	n := &tableMeta{
		raw:           maps.Clone(m.raw),
		location:      m.location,
		lastUpdatedMs: max(c.nowMs, m.lastUpdatedMs+1),
		lastSeq:       m.lastSeq,
		schema:        m.schema,
		spec:          m.spec,
		props:         maps.Clone(m.props),
		currentID:     m.currentID,
		snapshotLog:   slices.Clone(m.snapshotLog),
		metadataLog:   slices.Clone(m.metadataLog),
		refs:          maps.Clone(m.refs),
		snapshotByID:  map[int64]int{},
	}
	maps.Copy(n.props, c.props)
	if c.schema != nil {
		var schemas []json.RawMessage
		if err := json.Unmarshal(m.raw["schemas"], &schemas); err != nil {
			return nil, fmt.Errorf("schemas: %w", err)
		}
		sch, err := json.Marshal(c.schema)
		if err != nil {
			return nil, fmt.Errorf("encode schema: %w", err)
		}
		all, err := json.Marshal(append(schemas, sch))
		if err != nil {
			return nil, fmt.Errorf("encode schemas: %w", err)
		}
		n.raw["schemas"] = all
		n.raw["current-schema-id"] = json.RawMessage(strconv.Itoa(c.schema.ID))
		n.raw["last-column-id"] = json.RawMessage(strconv.Itoa(max(m.lastColumnID, c.schema.HighestFieldID())))
		n.schema = c.schema
	}
	for _, s := range m.snapshots {
		if c.expire[s.ID] {
			if s.ID == m.currentID {
				return nil, fmt.Errorf("cannot expire the current snapshot %d", s.ID)
			}
			continue
		}
		n.snapshotByID[s.ID] = len(n.snapshots)
		n.snapshots = append(n.snapshots, s)
	}
	if len(c.expire) > 0 {
		n.snapshotLog = slices.DeleteFunc(n.snapshotLog, func(e snapshotLogEntry) bool { return c.expire[e.SnapshotID] })
		// Statistics files of removed snapshots go with them.
		for _, key := range []string{"statistics", "partition-statistics"} {
			var stats []map[string]json.RawMessage
			if err := json.Unmarshal(n.raw[key], &stats); err != nil || stats == nil {
				continue
			}
			stats = slices.DeleteFunc(stats, func(st map[string]json.RawMessage) bool {
				var id int64
				return json.Unmarshal(st["snapshot-id"], &id) == nil && c.expire[id]
			})
			b, err := json.Marshal(stats)
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", key, err)
			}
			n.raw[key] = b
		}
		for name, ref := range n.refs {
			var id int64
			if err := json.Unmarshal(ref["snapshot-id"], &id); err == nil && c.expire[id] {
				return nil, fmt.Errorf("cannot expire snapshot %d: ref %q points at it", id, name)
			}
		}
	}
	if s := c.add; s != nil {
		n.lastUpdatedMs = max(n.lastUpdatedMs, s.TimestampMs)
		if s.Seq != m.lastSeq+1 {
			return nil, fmt.Errorf("snapshot %d has sequence number %d, want %d", s.ID, s.Seq, m.lastSeq+1)
		}
		if _, dup := n.snapshotByID[s.ID]; dup {
			return nil, fmt.Errorf("snapshot id %d already exists", s.ID)
		}
		n.lastSeq = s.Seq
		n.snapshotByID[s.ID] = len(n.snapshots)
		n.snapshots = append(n.snapshots, *s)
		n.currentID = s.ID
		n.snapshotLog = append(n.snapshotLog, snapshotLogEntry{SnapshotID: s.ID, TimestampMs: s.TimestampMs})
		ref := maps.Clone(n.refs[mainBranch])
		if ref == nil {
			ref = map[string]json.RawMessage{"type": json.RawMessage(`"` + refTypeBranch + `"`)}
		}
		ref["snapshot-id"] = json.RawMessage(strconv.FormatInt(s.ID, 10))
		if n.refs == nil {
			n.refs = map[string]map[string]json.RawMessage{}
		}
		n.refs[mainBranch] = ref
	}
	n.metadataLog = append(n.metadataLog, metadataLogEntry{MetadataFile: c.baseFile, TimestampMs: m.lastUpdatedMs})
	keep := defaultMetadataPreviousMax
	if v, err := strconv.Atoi(n.props[propMetadataPreviousMax]); err == nil && v >= 1 {
		keep = v
	}
	if len(n.metadataLog) > keep {
		n.metadataLog = slices.Clone(n.metadataLog[len(n.metadataLog)-keep:])
	}

	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", key, err)
		}
		n.raw[key] = b
		return nil
	}
	snaps := n.snapshots
	if snaps == nil {
		snaps = []snapshot{}
	}
	for _, kv := range []struct {
		key string
		v   any
	}{
		{"last-updated-ms", n.lastUpdatedMs},
		{"last-sequence-number", n.lastSeq},
		{"properties", n.props},
		{"snapshots", snaps},
		{"snapshot-log", n.snapshotLog},
		{"metadata-log", n.metadataLog},
	} {
		if err := set(kv.key, kv.v); err != nil {
			return nil, err
		}
	}
	if n.currentID != noSnapshot {
		if err := set("current-snapshot-id", n.currentID); err != nil {
			return nil, err
		}
	}
	if n.refs != nil {
		if err := set("refs", n.refs); err != nil {
			return nil, err
		}
	}
	// Round trip: what is written is exactly what the next load parses.
	data, err := n.encode()
	if err != nil {
		return nil, err
	}
	return parseMeta(data)
}

func (m *tableMeta) encode() ([]byte, error) { return json.Marshal(m.raw) }
