// Package kafka is floe's Kafka client: the part of the Kafka source that
// does not depend on the pipeline spec or the engine.
//
// It lists the partitions of topics, reads their low and high watermarks
// and the offset of a time (ListOffsets by timestamp), fetches exactly the
// records of a half-open offset range [From, To) per partition, and decodes
// record values (JSON lines or CSV, through package formats) into Arrow
// batches of a declared schema, optionally with the record's key,
// partition, offset and timestamp as columns.
//
// Contract (what the engine relies on for exactly once):
//
//  1. Fetch returns, for each Range, every data record whose offset is in
//     [From, To) and no other, in offset order. Offsets the log does not
//     hold because the topic is compacted or they are transaction markers
//     are not an error: the range is complete when a record at or past
//     To-1 was seen, or the partition's high watermark reached To.
//  2. A range that starts below the partition's log start offset (deleted
//     by retention or DeleteRecords) is a *MissingOffsetsError naming the
//     topic, partition and the missing offsets, unless the caller asked to
//     skip them (FetchOptions.SkipMissing), in which case the result says
//     how many offsets were skipped. Nothing is silently lost.
//  3. The client keeps no consumer-group state and commits nothing to the
//     broker: the offsets a pipeline has consumed live in its manifest.
//
// Credentials never come from a pipeline spec: Auth is read from the
// environment (FLOE_KAFKA_*) or from a file the spec names, and no error,
// log line or String method prints a password.
package kafka
