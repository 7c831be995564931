// Package epoch implements floe's commit protocol on object storage: how one
// epoch's files are written, how the epoch is committed, how a new run finds
// the last committed epoch, and what may be deleted afterwards.
//
// The store given to a Committer is rooted at <state-url>/<pipeline>/. The
// protocol of one epoch (docs/design.md, "The commit protocol"):
//
//  1. Recover reads _latest.json and rolls it forward over committed
//     manifests whose parent is the current head.
//  2. Begin starts an attempt with a fresh UUID. WriteState, WriteSource and
//     WriteOutput put attempt-tagged objects (invariant 2: no key is written
//     twice), each returned as a FileRef with size and checksum.
//  3. Commit creates gen=N/epoch=M/_manifest.json with create-if-absent. The
//     manifest is the commit point (invariant 3).
//  4. Commit then moves _latest.json forward with compare-and-swap on the
//     ETag read in step 1. It never moves it backwards.
//
// An error from step 3 or 4 is an unknown outcome, never a failure: it is
// resolved by reading the object back and comparing the attempt UUID in its
// body. Nothing is deleted while an outcome is unknown. A writer that finds
// another attempt's manifest for its epoch, or finds _latest.json moved past
// its epoch by a chain that does not contain its manifest, is fenced
// (ErrFenced) and must stop (invariant 7).
//
// Two writers on different generations can both create a manifest for the
// same epoch number (their keys differ). The chain is then decided by the
// compare-and-swap of _latest.json: the writer whose swap loses is fenced; a
// recovery that finds several candidates and no pointer to choose between
// them takes the one of the lowest generation, then the lowest attempt. A
// manifest is therefore committed once it is on the chain that
// _latest.json, rolled forward, defines.
//
// Restore verifies the size and checksum of every file it reads (invariant
// 5). Retention deletes only what no retained manifest references and never
// anything of an epoch newer than _latest.json (invariant 6).
package epoch
