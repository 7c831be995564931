// Package sinks holds what a pipeline's sinks are, apart from running an
// epoch: the combined store of several sinks (Mux: the first sink is the
// root, a further sink <name> is reached as "@<name>/..."), the checks that
// keep sinks apart (CheckSinks), Hive-partitioned files (HiveSplit,
// Groups), an Iceberg sink's partitioning and schema checks (OpenIceberg,
// TableSchemaChanges, SplitByPartition) and the rejected-rows files
// (RejectRecord). Package engine/internal/runner writes through them; the
// read-only tools in package engine read through them.
package sinks
