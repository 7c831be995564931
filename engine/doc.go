// Package engine is the only package that decides when things happen: it
// plans a run, executes its epochs, commits each through the epoch
// package, rescales across generations and runs retention; and it gives the
// read-only tools (status, history, plan, verify, inspect, replay, bundles,
// savepoints) that read what runs committed.
//
// Every pipeline is one dataflow: its spec (the linear form, the graph form
// or, through package flinksql, Flink SQL) is compiled into a graph plan of
// nodes in topological order: sources, stateless stages (filter, project,
// lookup), keyed stages (window, join, top_n, dedup, over) and sinks, with
// forward edges (rows keep the subtask that produced them) and shuffle edges
// (a keyed stage's input, routed by key group). The files, by concern:
//
//   - the run loop and the public API: engine.go (Run, Options), run.go
//     (start, epochs, retention), edit.go (the epoch's manifest), decide.go
//     (watermarks, which files an epoch takes), membudget.go;
//   - the plan and its compiler live in package engine/internal/dataflow
//     (lowering, hashing, pruning, evolution, registered migrations);
//     planner.go here says what a run of a plan will do;
//   - execution: graphexec.go (an epoch through the nodes), graphstream.go
//     and stream.go (plans without a keyed stage, in bounded memory),
//     graphlookup.go, execute.go (writing outputs and state);
//   - state restore: restore.go, lazyrestore.go (on demand), restoresrc.go
//     (savepoints, rollback, reset, reprocess);
//   - sources: graphsrc.go, source.go, listing.go, prefetch.go, rejects.go;
//   - sinks: sinks.go, hivesink.go, tablesink.go (Iceberg), identity.go and
//     locations.go (who owns which location);
//   - the read-only tools: report.go, history.go, verify.go, validate.go,
//     inspect.go, inspectgraph.go, replay.go, bundle.go, bundlegraph.go,
//     savepoint.go, version.go.
//
// docs/design.md describes the design as built; docs/graph.md the graph
// form's semantics.
package engine
