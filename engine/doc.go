// Package engine is floe's API: Run plans a run and executes its epochs
// (committing each through the epoch package, rescaling across generations
// and running retention), and the read-only tools (status, history, plan,
// verify, inspect, replay, bundles, savepoints) read what runs committed.
//
// Every pipeline is one dataflow: its spec (the linear form, the graph form
// or, through package flinksql, Flink SQL) is compiled into a graph plan of
// nodes in topological order: sources, stateless stages (filter, project,
// lookup), keyed stages (window, join, top_n, dedup, over) and sinks, with
// forward edges (rows keep the subtask that produced them) and shuffle edges
// (a keyed stage's input, routed by key group). The code, by concern:
//
//   - package engine/internal/dataflow: the plan and its compiler
//     (lowering, hashing, pruning, evolution, registered migrations);
//   - package engine/internal/runner: the run loop, execution, state
//     restore and write, sources and sinks; api.go re-exports its public
//     names (Run, Options, Result, the errors);
//   - this package: the public API and the read-only tools on top of them:
//     report.go (status, plan), history.go, verify.go, validate.go,
//     inspect.go and inspectgraph.go, replay.go, bundle.go and
//     bundlegraph.go, savepoint.go, version.go.
//
// docs/design.md describes the design as built; docs/graph.md the graph
// form's semantics.
package engine
