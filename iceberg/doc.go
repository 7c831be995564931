// Package iceberg commits floe's epochs to an Apache Iceberg table exactly
// once, on object storage alone: no catalog server. It writes the table
// metadata JSON itself (meta.go, after the Iceberg spec, format version 2)
// and uses only apache/iceberg-go's root package (schemas, partition specs,
// manifests, manifest lists, transforms). It must not import iceberg-go's
// table package: that package's table/substrait dependency parses a YAML
// function catalogue in an init function, which cost every floe process,
// even `floe --help`, ~90 ms and ~32 MB (TestNoTablePackage; measured
// 2026-12-01: without it `floe --help` peaks at 36 MB instead of 57 MB and
// package init allocates 3.6 MB instead of 37 MB). All table
// I/O goes through a floe store.Store rooted at the table location, so only
// package store touches gocloud or the AWS SDK.
//
// # Layout
//
//	<location>/data/...                          data files (the engine's; never deleted here)
//	<location>/metadata/vN.metadata.json         table metadata, version N = 1, 2, ...
//	<location>/metadata/*.avro                   manifests and manifest lists
//	<location>/metadata/version-hint.text        "N", best effort
//
// This is the Iceberg spec's file-system table layout; any reader that can
// open a table from a metadata file (Spark/Trino with the Hadoop catalog,
// DuckDB iceberg_scan, pyiceberg StaticTable, iceberg-go NewFromLocation)
// reads it.
//
// # Commit protocol
//
// The current version is the highest N listed under metadata/ (the hint is
// only for other readers). A commit loads version N, writes its manifests
// and manifest list (fresh UUID names), applies its change to version N's
// metadata (members floe does not interpret are written back verbatim) and
// creates metadata/v(N+1) with create-if-absent (S3 If-None-Match: *). So:
//
//   - At most one commit per version: a loser gets ErrCommitFailed and
//     nothing of it is current. A commit is never replayed on a newer base
//     (commit.retry.num-retries = 0 tells other writers the same).
//   - An ambiguous create (lost response, store.ErrOutcomeUnknown) is
//     resolved by reading the file back and comparing bytes; if that read
//     fails too the outcome is ErrCommitUnknown and the caller reloads.
//   - After a create, a listing checks the file is the head (retention may
//     have emptied an old slot that a stalled writer then refilled).
//   - Every metadata file floe writes carries floe.metadata-version = N, its
//     own version. A current file whose stamp differs was written by someone
//     else: floe refuses it (ErrForeignWriter) unless AllowForeignWriters.
//
// # Exactly once
//
// Publish(pipeline, E, files) commits, in ONE metadata file, the property
// floe.<pipeline>.epoch = E and a snapshot adding E's files whose summary
// carries floe.pipeline, floe.epoch and the caller's manifest and attempt.
// Before committing, and after every failure, it reloads the head and does
// nothing if the property is already >= E. Since the marker and the files
// land atomically together, the table holds E's files iff the marker is
// >= E (given epochs are published in order), whatever fails, retries or
// races: a second publisher of E either loses the create or sees the marker.
//
// # Maintenance
//
// Maintain expires snapshots (a metadata-only commit) and deletes, only
// under metadata/ and only files older than a grace period, old metadata
// versions floe wrote and manifests/manifest lists no live version
// references. Manifests are merged on append (commit.manifest-merge.enabled,
// commit.manifest.min-count-to-merge), so each snapshot references a
// bounded number of them and every snapshot is an append naming one epoch.
//
// # Data files
//
// A data file's manifest record is built from its Parquet footer: record
// count, column sizes, value and null counts, lower and upper bounds
// (strings and binary truncated to 16 characters, as Iceberg's default
// metrics mode) and, for a partitioned table (identity, hour, day, month or
// year of one column), the partition value, which
// all rows of the file must share. Columns are matched by name (floe's files
// carry no field IDs; the table's schema.name-mapping.default says the same
// to readers).
package iceberg
