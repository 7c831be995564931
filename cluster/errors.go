package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors. The CLI maps ErrPeersMissing to exit code 2 (the Job's
// restart policy takes over) and ErrFenced to exit code 3.
var (
	// ErrPeersMissing: a barrier saw no progress for Config.Timeout; the
	// error is a *MissingError naming the workers it waited for.
	ErrPeersMissing = errors.New("workers missing")
	// ErrTopology: the epoch was decided for another worker count,
	// parallelism or key-group count than this worker runs with. A changed
	// W or P starts a new generation; a worker must not join an epoch of
	// another topology.
	ErrTopology = errors.New("topology differs from the epoch's decision")
	// ErrFenced: another writer committed this epoch (another attempt, or
	// another generation moved the pipeline past it), or a newer generation
	// exists. The worker's files are orphans for retention.
	ErrFenced = errors.New("fenced")
	// ErrCommitted: the epoch was committed while this worker waited at a
	// barrier (an earlier incarnation of it had already written its part).
	// Not a failure: continue with the next epoch.
	ErrCommitted = errors.New("epoch already committed")
	// ErrNotDeterministic: the epoch's manifest exists with this attempt
	// but other bytes than this worker built from the same parts: the
	// manifest builder depends on something besides the decision and the
	// parts. A bug, never retried.
	ErrNotDeterministic = errors.New("manifest is not a function of the decision and the parts")
	// ErrIdle: the epoch's proposer found no new input and decided
	// nothing. With --once every worker stops; with --trigger it joins again
	// at the next tick.
	ErrIdle = errors.New("no new input")
	// ErrCorrupt: an exchange object or part record that does not parse,
	// fails its checksum or names another epoch, attempt or sender.
	ErrCorrupt = errors.New("corrupt exchange object")
)

// MissingError is returned when a barrier gives up: the workers whose
// objects did not appear within the timeout.
type MissingError struct {
	Barrier    string // "decision", "exchange round 2", "parts"
	Generation int64
	Epoch      int64
	Workers    []int // sorted
	Waited     time.Duration
}

func (e *MissingError) Error() string {
	ws := make([]string, len(e.Workers))
	for i, w := range e.Workers {
		ws[i] = strconv.Itoa(w)
	}
	return fmt.Sprintf("gen %d epoch %d: %s: no progress for %s, still waiting for worker(s) %s (not started, crashed, or started with another --workers or spec?)",
		e.Generation, e.Epoch, e.Barrier, e.Waited.Round(time.Millisecond), strings.Join(ws, ", "))
}

// Is makes a *MissingError match ErrPeersMissing.
func (e *MissingError) Is(target error) bool { return target == ErrPeersMissing }
