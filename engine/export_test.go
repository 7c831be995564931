package engine

import (
	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/runner"
)

// SetStateRowGroupRows sets the row-group size of state files for a test
// and returns a function that restores it.
func SetStateRowGroupRows(n int64) func() {
	old := runner.StateRowGroupRows
	runner.StateRowGroupRows = n
	return func() { runner.StateRowGroupRows = old }
}

// SetGraphPruning turns the column pruning of graph plans on or off (off:
// the plans, and state layouts, of the release before it) for a test and
// returns a function that restores it.
func SetGraphPruning(on bool) func() {
	old := dataflow.PruneGraphs
	dataflow.PruneGraphs = on
	return func() { dataflow.PruneGraphs = old }
}
