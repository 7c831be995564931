// Package cluster coordinates W worker processes that run one pipeline
// together through object storage only: no scheduler, no membership
// protocol, no worker-to-worker network. docs/workers.md describes the
// protocol and its cost model; in short, per epoch:
//
//  1. Decision (Worker.Join): gen=G/epoch=E/_decision.json, created
//     create-if-absent by worker 0 (by any worker after Config.TakeOver),
//     fixes the epoch's files and their split among the workers
//     (AssignFiles), the watermark inputs, the clock, the topology and the
//     attempt every worker writes under. Losers adopt the winner's.
//  2. Exchange rounds (Epoch.Send, Epoch.Receive): per keyed stage whose
//     input crosses workers, each worker writes one object holding a
//     segment per receiver (rows routed by key group: Topology) and reads
//     its segment of every other worker's object with ranged GETs. The
//     presence of all senders' objects of a round is the round's barrier.
//  3. Parts and commit (Epoch.WritePart, Epoch.Commit): each worker writes
//     a part record naming its state files and outputs; once all W exist,
//     worker 0 (any worker after TakeOver) builds the manifest from the
//     decision and the parts alone (MergeParts, a deterministic Builder)
//     and creates it create-if-absent. The engine then moves _latest.json.
//
// Every object is written create-if-absent under the epoch's attempt, so a
// worker killed at any instant and restarted with the same index finds
// what it wrote and reuses it (never writes a second copy); a barrier that
// sees no progress for Config.Timeout fails with a *MissingError naming the
// workers it waited for (ErrPeersMissing, exit 2); a worker whose
// generation or attempt was superseded stops with ErrFenced.
//
// # What the engine does around it
//
// Per epoch, in every worker: Recover the head as today; Join with a
// Proposer that lists the source and selects files (AssignFiles; nil for
// no input: ErrIdle); if Epoch.Part exists skip to Commit; restore the
// worker's subtasks (Topology.Subtasks) from the parent; decode FilesOf the
// worker; per shuffle edge whose rows cross workers, one round: encode
// each receiver's rows (Topology.WorkerOfKeyGroup) as Arrow IPC, Send with
// meta carrying the per-input greatest event time, Receive, place the
// senders' rows in sender order with its own at its index, compute the
// watermark from all metas; write state and outputs under
// Decision.Attempt with the existing create-if-absent writes (window-less
// part numbers must not collide between workers); WritePart; Commit with a
// Builder that is a function of the decision, the parts and the parent
// manifest (MergeParts, plus cumulative counters and source offsets);
// then move _latest.json with epoch's Attempt.Commit (it accepts an
// existing manifest of its attempt). Map ErrPeersMissing to exit 2,
// ErrFenced and ErrTopology to 3 and 2, ErrCommitted to "continue".
//
// The package imports store, manifest and keygroup only; it knows nothing
// of rows: segments and meta are bytes the engine encodes (Arrow IPC).
package cluster
