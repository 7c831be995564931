// Package dataflow is floe's plan and its compiler: a pipeline spec (the
// linear form, the graph form, or Flink SQL lowered by package flinksql)
// compiled against its sources' schemas into one dataflow plan.
//
// A Plan holds a GraphPlan: nodes in topological order (sources, stateless
// stages: filter, project, lookup; keyed stages: window, join, top_n, dedup,
// over; and the nodes the sinks write), each compiled against its input
// schema, with forward edges (rows keep the subtask that produced them) and
// shuffle edges (a keyed stage's input, routed by key group). The package
// also decides everything about a plan that is fixed before it runs:
//
//   - stage kinds (kind.go): each kind's compile, column needs, order
//     rules, evolution and state layout for floe state is registered by
//     its own file, kind_<name>.go; the spec's half of each kind (decoding,
//     validation, watermark delay) is spec's table, spec/stagekinds.go;
//   - lowering: CompileLinear compiles the linear form as the graph
//     spec.Pipeline.Graph gives, keeping that form's on-storage identity
//     (plan hash, operator ids and state plans, source keys, output names);
//   - hashing: EncodePlan and HashPlan (plan hash v2), PlanHashV1 for
//     pipelines created before it, SamePlan to compare with a recorded one;
//   - column pruning and dictionary keys (graphprune.go): each source
//     decodes only the columns some stage reads, keyed stages hold only the
//     columns their readers use, and WithRecordedLayouts keeps the layouts
//     an existing generation recorded;
//   - state evolution (EvolveGraph, Compatible) and registered migrations
//     (StateMigration, chains between state format versions);
//   - the compile-time half of sinks: Hive partitioning (HiveParts) and
//     further sinks.
//
// Nothing here reads or writes storage or runs an epoch: package engine
// executes plans, restores and writes their state, and commits epochs.
package dataflow
