package engine

import (
	"slices"
	"testing"

	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/manifest"
)

// TestCompactPlanRows: a row-counted operator (dedup, join, top_n, over)
// compacts when its files would hold more than 1.5 times its live rows, or
// at maxDeltas, all writing subtasks together; rows a delta adds for new
// keys do not count against it, where compactPlan compacts once half the
// rows changed.
func TestCompactPlanRows(t *testing.T) {
	st := func(base int64, deltas ...int64) runner.SubState {
		s := runner.SubState{}
		if base > 0 {
			s.Base = manifest.FileRef{Path: "b", Size: 10 * base, Rows: base}
		}
		for _, d := range deltas {
			s.Deltas = append(s.Deltas, manifest.FileRef{Path: "d", Size: 10 * d, Rows: d})
		}
		return s
	}
	all := func(int) bool { return true }
	size := func(delta, live int64) func(int) (int64, int64) {
		return func(int) (int64, int64) { return delta, live }
	}
	eight := []int64{1, 1, 1, 1, 1, 1, 1, 1}
	for _, c := range []struct {
		name   string
		prev   []runner.SubState
		writes func(int) bool
		size   func(int) (int64, int64)
		want   []bool
	}{
		// The state doubles with new keys: 1000 base + 1000 new = 2000 live.
		{"growth by new keys", []runner.SubState{st(1000), st(1000)}, all, size(1000, 2000), []bool{false, false}},
		// Deltas as large as the base, all new rows: still no dead rows.
		{"deltas of new rows", []runner.SubState{st(1000, 500, 500), st(1000, 500, 500)}, all, size(1000, 3000), []bool{false, false}},
		// 800 of 1000 rows replaced: 1800 rows in files for 1000 live.
		{"most rows replaced", []runner.SubState{st(1000), st(1000)}, all, size(800, 1000), []bool{true, true}},
		{"just under 1.5x", []runner.SubState{st(1000), st(1000)}, all, size(500, 1000), []bool{false, false}},
		// Everything removed (a drain): the tombstones and dead rows go.
		{"all removed", []runner.SubState{st(1000, 200), st(1000)}, all, size(1000, 0), []bool{true, true}},
		{"no base", []runner.SubState{st(0), st(1000, 10)}, all, size(10, 1010), []bool{true, false}},
		{"max deltas", []runner.SubState{st(1000, eight...), st(1000, 1)}, all, size(1, 2000), []bool{true, true}},
		{"only writers compact", []runner.SubState{st(1000, eight...), st(1000, 1), st(1000)},
			func(s int) bool { return s != 1 }, size(1, 2000), []bool{true, false, true}},
	} {
		if got := runner.CompactPlanRows(c.prev, c.writes, c.size); !slices.Equal(got, c.want) {
			t.Errorf("%s: compactPlanRows = %v, want %v", c.name, got, c.want)
		}
	}
	// compactPlan, by changed rows and bytes, rewrites the growing state.
	if got := runner.CompactPlan([]runner.SubState{st(1000), st(1000)}, all, size(1000, 2000)); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("compactPlan on growth by new keys = %v, want a compaction (what compactPlanRows avoids)", got)
	}
}
