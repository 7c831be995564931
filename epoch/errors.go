package epoch

import (
	"errors"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// Sentinel errors. Each tells the caller what to do.
var (
	// ErrFenced: another writer committed the epoch this attempt was writing,
	// or moved the pipeline past it. Stop; this attempt's files are orphans.
	ErrFenced = errors.New("fenced by another writer")
	// ErrSuperseded: this attempt's epoch was committed, but another writer
	// has since committed later epochs on top of it. The returned head is the
	// newer one; state held in memory is stale: stop, or reload everything.
	ErrSuperseded = errors.New("superseded by another writer")
	// ErrCommitUnknown: the manifest create or the pointer swap failed in a
	// way that left its outcome unknown even after reading back. Do not
	// delete anything; a later Recover decides.
	ErrCommitUnknown = errors.New("commit outcome unknown")
	// ErrCorrupt: a metadata document or a referenced file does not match
	// what was recorded. The same value as manifest.ErrCorrupt.
	ErrCorrupt = manifest.ErrCorrupt
	// ErrNotFound: an object the protocol needs does not exist.
	ErrNotFound = store.ErrNotFound
)
