// Package runner executes a dataflow plan (package engine/internal/dataflow)
// epoch by epoch and is the only part of floe that decides when things
// happen. Package engine re-exports its public names (Run, Options,
// Result, the errors) and builds the read-only tools on it.
//
// The files, by concern:
//
//   - the run loop: engine.go (Run, Options), run.go (start, epochs,
//     retention), edit.go (the epoch's manifest), planner.go (what a run
//     of a plan will do: restores, generations, evolution); the decide
//     step (watermarks, which files an epoch takes, the memory budget) is
//     package engine/internal/decide;
//   - execution: graphexec.go (an epoch through the nodes: stateless nodes
//     map batches, keyed nodes take their inputs routed by key group over
//     shuffle edges), graphstream.go and stream.go (plans without a keyed
//     stage, in bounded memory), graphlookup.go (lookup tables), execute.go
//     (writing outputs and state);
//   - state restore: restore.go, lazyrestore.go (only the key groups an
//     epoch touches), restoresrc.go (savepoints, rollback, reset, reprocess);
//   - sources: graphsrc.go, source.go, listing.go, prefetch.go, ranged.go,
//     kafkasrc.go;
//   - sinks: package engine/internal/sinks (several sinks, Hive
//     partitions, Iceberg partitioning, rejected rows), tablesink.go (an
//     Iceberg table's publishing), outputs.go; who owns which location is
//     package engine/internal/owner;
//   - several worker processes: workers.go on package cluster.
//
// Every epoch commits through package epoch: state and outputs first, the
// manifest last, then the head.
package runner
