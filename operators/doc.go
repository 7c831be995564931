// Package operators holds floe's keyed operators: key groups and partitioning,
// event-time windows (tumbling, sliding, session) and their aggregates, all on
// Apache Arrow record batches. It is pure computation: no I/O, no clocks, no
// object store. The caller (package engine) decides when to Process,
// Advance, Snapshot and Restore, and persists what Snapshot returns.
//
// # Key groups
//
// A key is serialised with [SerializeKey] (the encoding is documented there and
// is frozen: it defines key-group assignment for the life of every pipeline).
// Its key group, the subtask of a key group at parallelism P and the range of
// key groups a subtask owns are the rules of package keygroup (the one
// definition: fnv1a64(key bytes) mod K, g*P/K, contiguous ranges);
// [PartitionIndices] routes rows by them. testdata/keygroups_k128.txt pins
// the assignment of ~200 keys; a test compares it forever.
//
// # Arrow memory
//
// operators releases the Arrow data it allocates, as Arrow's reference
// counting documents; it does not rely on the garbage collector:
//
//   - Every batch a Window returns (Process's late rows, Advance, Snapshot,
//     SnapshotDelta) is the caller's, who calls Release. Its buffers come
//     from the allocator given to [Window.SetAllocator] (default
//     memory.DefaultAllocator, the Go allocator). When every row is late, Process returns the input batch
//     itself with an extra reference.
//   - Input batches are read during the call and never retained after it;
//     the caller may release them as soon as the call returns.
//   - Between calls a Window holds no Arrow memory: keys, string values and
//     distinct sets are copied into Go memory, so state survives the release
//     of the batches it came from.
//
// TestWindowReleasesArrowMemory checks this for every window kind and
// aggregate with memory.NewCheckedAllocator: after Process, ProcessSelected,
// Advance, Snapshot and Restore no byte is outstanding;
// TestDeltaReleasesArrowMemory does for SnapshotDelta and ApplyDelta.
//
// # Windows
//
// Invariants a [Window] keeps, which the tests check:
//
//  1. Every open (key, window) state has end + allowed_lateness > Watermark().
//     Advance(wm) emits, exactly once, every state with end + lateness <= wm
//     and removes it; a smaller or equal wm is ignored. A sliding window
//     keeps (key, slice) states instead (sliced.go): every open slice
//     [p, p+slide) has p + size + allowed_lateness > Watermark(), and
//     Advance(wm) emits each window exactly once, at the call that closes
//     it, as the union of its slices.
//  2. A row is aggregated into a window only if that window is still open at
//     Process time; a row none of whose windows is open is returned as late,
//     never silently dropped.
//  3. Snapshot + Restore is lossless: restoring the union of several
//     instances' snapshots into one instance, or one snapshot into instances
//     with disjoint key-group ranges, gives exactly the per-key state and
//     therefore exactly the same future output (rescale).
//  4. Output is deterministic: rows sorted by (window_start, key bytes,
//     window_end), independent of batch boundaries, arrival interleaving of
//     different keys, snapshots and rescales. (Aggregates over float64 sum in
//     arrival order, so float sums may differ in the last bits across merges.)
//  5. Restore(base) then ApplyDelta of every SnapshotDelta since, in order
//     (for SnapshotDeltaMerges, ApplyDelta then ApplyMerges), gives exactly
//     the state Snapshot would give (delta.go); change tracking costs
//     O(windows changed), never O(state), and a merge row O(values added).
//  6. State evolution (evolve.go) is exact: state of spec A migrated by
//     PlanStateEvolution(A, B).Migrate, restored at RestoreWatermark and
//     fed the rest of a stream emits, for every aggregate B keeps from A,
//     what a window of B fed the whole stream emits, and for an added
//     aggregate its identity plus the rows that arrived after the change
//     (TestEvolutionProperty, every window kind, base + delta).
//
// # Partial aggregation
//
// A [Window] whose aggregates do not depend on how their rows are split or
// ordered ([Window.Combinable]: count, integer sum and avg, min, max, over
// tumbling or sliding windows) is a [Combiner]: a fresh instance at its
// watermark ([Window.NewCombiner]) aggregates rows bound for another
// process, its windows leave as state rows ([Window.Partials]), and the
// owner folds them in ([Window.MergePartials]) as if it had processed the
// rows: TestWindowCombiner compares both with one instance that did.
//
// # State evolution
//
// PlanStateEvolution decides, aggregate by aggregate, whether state written
// under one WindowSpec can be restored by a window of another, and returns
// the one-line changes or the reasons it cannot; Migrate converts state
// batches column by column. MarshalStatePlan records what the decision
// needs (the spec and the types of the columns it reads) in a versioned,
// golden-tested JSON form that UnmarshalStatePlan reads back. The rules, and
// how the caller tells "same layout" from "evolvable", are in evolve.go.
package operators
