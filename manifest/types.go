package manifest

import (
	"strconv"
	"time"
)

// FormatVersion is the on-storage format this release writes. Version 2
// added a checksum of its own canonical bytes to every document, the
// generation's identity and the versioned sink marker.
const FormatVersion = 2

// MinFormatVersion is the oldest format this release reads: version 1
// documents (no checksum, no identity) still decode.
const MinFormatVersion = 1

// NoWatermark is the watermark before any event was seen.
const NoWatermark int64 = -1 << 63

// Ref names one committed epoch.
type Ref struct {
	Generation int64 `json:"generation"`
	Epoch      int64 `json:"epoch"`
}

// Latest is the content of _latest.json: a pointer to the newest committed
// manifest. Recovery rolls it forward over newer committed manifests.
type Latest struct {
	FormatVersion int    `json:"format_version"`
	Generation    int64  `json:"generation"`
	Epoch         int64  `json:"epoch"`
	Manifest      string `json:"manifest"` // root-relative path of the manifest
	Attempt       string `json:"attempt"`  // attempt that wrote this pointer
	// Checksum is "sha256:<hex>" of the document's canonical encoding with
	// Checksum empty (format 2 on; absent in format 1). See DocChecksum.
	Checksum string `json:"checksum,omitempty"`
}

// Generation is the content of gen=N/_generation.json: one topology.
type Generation struct {
	FormatVersion  int    `json:"format_version"`
	Pipeline       string `json:"pipeline"`
	Generation     int64  `json:"generation"`
	Parent         *Ref   `json:"parent"` // epoch restored from; nil for a fresh pipeline
	Parallelism    int    `json:"parallelism"`
	MaxParallelism int    `json:"max_parallelism"`
	// Workers (format 2) is the number of worker processes that run the
	// generation's epochs together (floe run --workers); absent (0) means
	// one. A change of it starts a new generation, as one of the
	// parallelism does.
	Workers  int      `json:"workers,omitempty"`
	Plan     []OpPlan `json:"plan"` // keyed/stateful operators, in order
	PlanHash string   `json:"plan_hash"`
	// Identity is what the pipeline is (sink, side outputs, state, id);
	// nil in generations written before it was recorded.
	Identity *Identity `json:"identity,omitempty"`
	// RestoredFrom (format 2) says where the state came from when it is not
	// the previous head: a savepoint, a rollback, a reset.
	RestoredFrom *RestoredFrom `json:"restored_from,omitempty"`
	Attempt      string        `json:"attempt"`
	CreatedAt    time.Time     `json:"created_at"`
	Checksum     string        `json:"checksum,omitempty"` // see Latest.Checksum
}

// OpPlan describes one stateful operator of a generation's plan.
type OpPlan struct {
	ID string `json:"id"`
	// Kind, e.g. "window", "dedup".
	Kind string `json:"kind"`
	// StateSchema fingerprints the operator's state layout; two plans whose
	// operators agree on (ID, Kind, StateSchema) can restore each other.
	StateSchema string `json:"state_schema"`
	// StatePlan (format 2) is the operator's versioned description (for a
	// window: operators.MarshalStatePlan, JSON text): what a later run needs
	// to rebuild the old spec and migrate its state to an edited one.
	StatePlan string `json:"state_plan,omitempty"`
}

// Manifest is the content of gen=N/epoch=M/_manifest.json, the commit point
// of one epoch. It is created once (create-if-absent) and never modified.
type Manifest struct {
	FormatVersion int       `json:"format_version"`
	Pipeline      string    `json:"pipeline"`
	Generation    int64     `json:"generation"`
	Epoch         int64     `json:"epoch"`
	Attempt       string    `json:"attempt"`
	Parent        *Ref      `json:"parent"` // previous committed epoch; nil for the first
	CreatedAt     time.Time `json:"created_at"`

	// Watermark in microseconds since the Unix epoch (UTC), NoWatermark if none.
	Watermark int64       `json:"watermark_us"`
	Source    SourceState `json:"source"`
	Counters  Counters    `json:"counters"`
	// Operators holds the state of each stateful operator after this epoch.
	Operators []OperatorState `json:"operators"`
	// Outputs lists the sink files this epoch committed (only this epoch's).
	// Their paths are relative to the SINK root, never absolute URLs.
	Outputs []FileRef `json:"outputs"`
	// SideOutputs lists this epoch's late-row and rejected-row files,
	// relative to the sink root or absolute URLs; Kind is "late" or
	// "rejected".
	SideOutputs []FileRef `json:"side_outputs"`
	// OutputLog lists segment files (under the state root, shared by later
	// manifests) that together name every output file committed by this
	// epoch and all before it, one sink-relative path per line. Unlike
	// Outputs it survives retention, so committed outputs stay known.
	OutputLog []FileRef `json:"output_log,omitempty"`
	// Stats (format 2) is what this epoch cost; informational, never used
	// to decide anything.
	Stats *EpochStats `json:"stats,omitempty"`
	// Lookups (format 2, graph pipelines) names the version of each lookup
	// stage's table this epoch enriched with: a digest of the table's file
	// listing (keys, sizes, modification times).
	Lookups  []LookupVersion `json:"lookups,omitempty"`
	Checksum string          `json:"checksum,omitempty"` // see Latest.Checksum
}

// LookupVersion is the table version one lookup stage used in an epoch.
type LookupVersion struct {
	Stage   string `json:"stage"`
	Version string `json:"version"`
	Files   int    `json:"files"`
	Rows    int64  `json:"rows"`
}

// EpochStats is the cost of one epoch, as the writer measured it before the
// commit: wall time, input, and object-store requests by kind (the manifest
// create and pointer swap of the commit itself are not included).
type EpochStats struct {
	DurationMs   int64 `json:"duration_ms"`
	FilesIn      int64 `json:"files_in"`
	BytesIn      int64 `json:"bytes_in"`
	RowsIn       int64 `json:"rows_in"`
	BytesWritten int64 `json:"bytes_written"` // outputs, side outputs, state and segments this epoch wrote
	Gets         int64 `json:"gets"`
	Puts         int64 `json:"puts"`
	Lists        int64 `json:"lists"`
	Deletes      int64 `json:"deletes"`
	Retries      int64 `json:"retries"`
}

// SourceState is the source's offsets after an epoch.
type SourceState struct {
	// Inline holds the processed-file keys when the set is small.
	Inline []string `json:"inline,omitempty"`
	// Segments are attempt-tagged files listing processed-file keys, written
	// once and shared by later manifests (root-relative references).
	Segments []FileRef `json:"segments,omitempty"`
	// Count is the total number of processed files (inline + segments).
	Count int64 `json:"count"`
	// Inputs holds per-input watermark progress (keyed by input name).
	Inputs map[string]InputState `json:"inputs,omitempty"`
	// Captured (format 2, source.capture) are copies of the input files
	// this epoch consumed, under its attempt folder (source/input/<key>),
	// kept and deleted with the epoch: replay reads them when the source's
	// own files are gone.
	Captured []FileRef `json:"captured,omitempty"`
	// SizesInline / SizeSegments (format 2) record the size of every
	// processed file as "<key>\x00<size>" entries (the last entry of a key
	// wins), so a run notices an input file changed after it was read.
	SizesInline  []string  `json:"sizes_inline,omitempty"`
	SizeSegments []FileRef `json:"size_segments,omitempty"`
	// ListedAfter (format 2, source.order: lexical) is the listing
	// frontier: every key that a listing found and that sorts at or before
	// it was processed (or ignored), so an ordered listing starts after it
	// (S3 StartAfter). Empty: the next run lists the whole source.
	ListedAfter string `json:"listed_after,omitempty"`
	// FullListAt (format 2, source.order: lexical) is when the last full
	// listing of the source started; the next one is due
	// source.full_list_every later.
	FullListAt *time.Time `json:"full_list_at,omitempty"`
	// Kafka (format 2, a kafka source) holds the offsets per partition.
	Kafka *KafkaOffsets `json:"kafka,omitempty"`
}

// InputState is one input's watermark progress.
type InputState struct {
	MaxEventTime int64     `json:"max_event_time_us"`
	LastActive   time.Time `json:"last_active"`
}

// Counters are cumulative over the pipeline's life, except where noted.
type Counters struct {
	FilesIn      int64 `json:"files_in"`
	RowsIn       int64 `json:"rows_in"`
	RowsOut      int64 `json:"rows_out"`
	RowsLate     int64 `json:"rows_late"`
	RowsRejected int64 `json:"rows_rejected"`
	RowsFiltered int64 `json:"rows_filtered"`
	Windows      int64 `json:"windows_emitted"`
	// Format 2 guard-rail counters (absent: 0).
	// FilesRejectedWhole counts files no row of which was accepted.
	FilesRejectedWhole int64 `json:"files_rejected_whole,omitempty"`
	// FilesAfterDrain counts files read after the input was ended with
	// --drain (their rows are late).
	FilesAfterDrain int64 `json:"files_after_drain,omitempty"`
	// FilesChanged counts processed input files found with another size
	// later (input files must be immutable; they are not read again).
	FilesChanged int64 `json:"files_changed,omitempty"`
}

// OperatorState is one stateful operator's committed state.
type OperatorState struct {
	ID string `json:"id"`
	// EmittedThrough: every window with end+allowed_lateness <= this
	// watermark (microseconds) has been emitted.
	EmittedThrough int64 `json:"emitted_through_us"`
	// Files holds one base state file per subtask: a full snapshot of the
	// subtask's key-group range.
	Files []FileRef `json:"files"`
	// Deltas (format 2) are changes on top of the bases, in the order they
	// are applied: per epoch and subtask that changed, a DeltaTombstones
	// file (windows removed since), a DeltaUpserts file (windows created
	// or changed, whole), then a DeltaMerges file (windows that existed
	// before and kept their bounds, whose count_distinct values are only
	// those added since: they are added to the window's set, its other
	// aggregates replaced). A restore reads the bases overlapping its
	// key-group range, then applies the overlapping deltas in order. A
	// compaction writes a new base and drops that subtask's deltas.
	Deltas []FileRef `json:"deltas,omitempty"`
}

// Kinds of operator delta files. DeltaMerges files appeared after format
// version 2 was set; a release from before them refuses a manifest that
// lists one (its validation names the unknown kind) rather than misreading
// it.
const (
	DeltaUpserts    = "upserts"
	DeltaTombstones = "tombstones"
	DeltaMerges     = "merges"
)

// FileRef names one file a manifest depends on.
type FileRef struct {
	// Path is relative to <state-url>/<pipeline>/ (outputs: to the sink
	// root) or an absolute URL; never relative to the manifest. See
	// ValidateRef.
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"` // "sha256:<64 hex>", see Checksum
	Rows     int64  `json:"rows"`
	// Subtask and the key-group range [KeyGroupLo, KeyGroupHi) for state files.
	Subtask    int `json:"subtask,omitempty"`
	KeyGroupLo int `json:"kg_lo,omitempty"`
	KeyGroupHi int `json:"kg_hi,omitempty"`
	// Kind of a side output: "late" or "rejected".
	Kind string `json:"kind,omitempty"`
	// First and Last are the least and greatest entry (byte order) of a
	// segment of the processed-file set or the size log of a source with
	// order: lexical: a run that asks only about keys after its listing
	// frontier does not read a segment whose Last is at or before it.
	// Optional: a segment without them is read whole.
	First string `json:"first,omitempty"`
	Last  string `json:"last,omitempty"`
}

// String formats r as "gen=3 epoch=41".
func (r Ref) String() string {
	return "gen=" + strconv.FormatInt(r.Generation, 10) + " epoch=" + strconv.FormatInt(r.Epoch, 10)
}

// ManifestPath returns the key of the manifest r names.
func (r Ref) ManifestPath() string { return ManifestPath(r.Generation, r.Epoch) }

// NewLatest returns the pointer to the manifest of (gen, epoch) written by
// attempt, with Manifest set to ManifestPath(gen, epoch).
func NewLatest(gen, epoch int64, attempt string) *Latest {
	return &Latest{
		FormatVersion: FormatVersion,
		Generation:    gen,
		Epoch:         epoch,
		Manifest:      ManifestPath(gen, epoch),
		Attempt:       attempt,
	}
}

// Ref returns the epoch the pointer names.
func (l *Latest) Ref() Ref { return Ref{Generation: l.Generation, Epoch: l.Epoch} }

// Ref returns the epoch the manifest commits.
func (m *Manifest) Ref() Ref { return Ref{Generation: m.Generation, Epoch: m.Epoch} }

// StateRefs returns every file the manifest references under the state root
// (or by absolute URL): operator state files, then source segments. These
// are what retention must keep while the manifest is retained.
func (m *Manifest) StateRefs() []FileRef {
	var refs []FileRef
	for _, op := range m.Operators {
		refs = append(refs, op.Files...)
		refs = append(refs, op.Deltas...)
	}
	refs = append(refs, m.Source.Segments...)
	refs = append(refs, m.Source.Captured...)
	refs = append(refs, m.Source.SizeSegments...)
	return append(refs, m.OutputLog...)
}

// SinkRefs returns the files this epoch committed to the sink: outputs,
// then side outputs. Their paths are relative to the sink root (side outputs
// may be absolute URLs).
func (m *Manifest) SinkRefs() []FileRef {
	refs := make([]FileRef, 0, len(m.Outputs)+len(m.SideOutputs))
	refs = append(refs, m.Outputs...)
	return append(refs, m.SideOutputs...)
}
