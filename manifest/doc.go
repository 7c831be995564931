// Package manifest defines floe's on-storage metadata: the _latest.json
// pointer, gen=N/_generation.json and gen=N/epoch=M/_manifest.json, their
// JSON codec, strict validation and the object-key layout. It does no I/O:
// callers hand it bytes and keys, the store package moves them.
//
// # Layout
//
// All keys are relative to <state-url>/<pipeline>/. Generation and epoch
// numbers are zero padded (6 and 10 digits, subtasks 4) so that a
// lexicographic listing is in numeric order:
//
//	_latest.json
//	gen=000003/_generation.json
//	gen=000003/epoch=0000000041/_manifest.json
//	gen=000003/epoch=0000000041/<attempt>/op=<op-id>/s=0002.parquet
//	gen=000003/epoch=0000000041/<attempt>/source/<name>
//
// Sink outputs are named part-g000003-e0000000041-s0002-<attempt8>.parquet
// and referenced relative to the sink root. ParseKey and ParseOutputName are
// the inverses; they accept only the canonical spelling, so a key they do not
// recognise was not written by floe and must not be garbage collected.
// Padding is a minimum width: numbers wider than it still format and parse,
// they just stop sorting numerically.
//
// # Invariants checked by Validate
//
//   - every document carries FormatVersion == FormatVersion;
//   - generations and epochs are >= 1, attempts are canonical UUIDs;
//   - every FileRef names its file by a clean root-relative path (no "..",
//     ".", empty segment, leading "/" or backslash) or, where allowed, by an
//     absolute URL with a scheme, and carries its size and "sha256:" checksum;
//   - a manifest's parent, when present, is strictly older (smaller epoch, not
//     newer generation); a generation's parent is in an older generation;
//   - operator state files of one operator have distinct subtasks and
//     disjoint, non-empty key-group ranges [lo, hi);
//   - _latest.json points at exactly ManifestPath(generation, epoch).
//
// CheckGeneration adds the cross-document rules (a manifest matches the
// topology of its generation).
//
// # Decoding and format evolution
//
// Decoding is strict: the format_version is read first and a version outside
// [MinFormatVersion, FormatVersion] is rejected with a clear error naming it;
// within a version unknown fields, duplicate keys, missing fields, wrong JSON
// types, non-integral numbers and trailing data are all errors. We own the
// only writer, so anything unexpected is corruption, not a newer writer's
// extension. A field is required unless its json tag has omitempty.
//
// The rule for changes: an additive change is a new optional (omitempty)
// field whose absence means what the code did before; it is written only by
// the new release, so it comes with a FormatVersion bump (an older release
// then refuses the document by its version, clearly, instead of reading a
// field it does not know as corruption), and the new release keeps reading
// every older version (golden files under testdata/golden/v1, v2, ...).
// Format 2 added the document checksum and the optional generation
// identity, restored_from, operator state plans, manifest stats, operator
// deltas and guard-rail counters. Every format-2 document carries Checksum,
// the sha256 of its canonical encoding with Checksum empty, verified on
// decode. Nested opaque payloads (a window's state plan, operators
// .MarshalStatePlan) have versions of their own and ignore unknown fields,
// so they can grow without a manifest format change.
//
// Every decode and validation error wraps ErrCorrupt and is an *Error that
// names the object key and the JSON path of the field, e.g.
//
//	manifest gen=000003/epoch=0000000041/_manifest.json: field operators[0].files[1].path: "../x" escapes the pipeline root
package manifest
