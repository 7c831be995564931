package engine

// SetStateRowGroupRows sets the row-group size of state files for a test
// and returns a function that restores it.
func SetStateRowGroupRows(n int64) func() {
	old := stateRowGroupRows
	stateRowGroupRows = n
	return func() { stateRowGroupRows = old }
}
