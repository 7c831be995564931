package engine

import (
	"slices"
	"testing"

	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/manifest"
)

// TestCompactPlan: subtasks of an operator compact together, by the
// operator's totals, so that compactions of parallel subtasks fall in the
// same epoch; a subtask without a base always writes one; a subtask that
// writes nothing this epoch never does.
func TestCompactPlan(t *testing.T) {
	st := func(base int64, deltas ...int64) runner.SubState {
		s := runner.SubState{}
		if base > 0 {
			s.Base = manifest.FileRef{Path: "b", Size: base}
		}
		for _, d := range deltas {
			s.Deltas = append(s.Deltas, manifest.FileRef{Path: "d", Size: d})
		}
		return s
	}
	eight := []int64{1, 1, 1, 1, 1, 1, 1, 1}
	all := func(int) bool { return true }
	small := func(int) (int64, int64) { return 1, 100 } // 1 of 100 windows changed
	for _, c := range []struct {
		name   string
		prev   []runner.SubState
		writes func(int) bool
		size   func(int) (int64, int64)
		want   []bool
	}{
		{"small deltas", []runner.SubState{st(1000, 100), st(1000, 200)}, all, small, []bool{false, false}},
		// 260+260 > 1000/2 in total although neither subtask's own
		// deltas pass half of its base (260 vs 300 of 600, 260 of 400 does).
		{"together by totals", []runner.SubState{st(600, 130, 130), st(400, 130, 130)}, all, small, []bool{true, true}},
		{"just under the totals", []runner.SubState{st(600, 150, 140), st(400, 100, 100)}, all, small, []bool{false, false}},
		{"no base", []runner.SubState{st(0), st(1000, 10)}, all, small, []bool{true, false}},
		{"max deltas", []runner.SubState{st(1000, eight...), st(1000, 1)}, all, small, []bool{true, true}},
		{"most windows changed", []runner.SubState{st(1000, 1), st(1000, 1)}, all, func(int) (int64, int64) { return 60, 100 }, []bool{true, true}},
		{"only writers compact", []runner.SubState{st(1000, eight...), st(1000, 1), st(1000)},
			func(s int) bool { return s != 1 }, small, []bool{true, false, true}},
	} {
		if got := runner.CompactPlan(c.prev, c.writes, c.size); !slices.Equal(got, c.want) {
			t.Errorf("%s: compactPlan = %v, want %v", c.name, got, c.want)
		}
	}
}
