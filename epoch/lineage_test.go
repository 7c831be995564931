package epoch_test

import (
	"testing"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
)

func TestFormatLineage(t *testing.T) {
	chain := func(es ...int64) []*manifest.Manifest {
		var out []*manifest.Manifest
		for _, e := range es {
			out = append(out, &manifest.Manifest{Epoch: e})
		}
		return out
	}
	for _, c := range []struct {
		chain []*manifest.Manifest
		want  string
	}{
		{chain(3), "(3)"},
		{chain(3, 2, 1), "(1 → 2 → 3)"},
		{chain(12, 11, 10, 9, 5, 4), "(4 → 5 → 9 → … → 12)"},
		{chain(12, 11, 10, 9, 5, 4, 3, 2, 1), "(1 → … → 5 → 9 → … → 12)"},
		{chain(7, 3, 2, 1), "(1 → 2 → 3 → 7)"},
	} {
		if got := epoch.FormatLineage(c.chain); got != c.want {
			t.Errorf("FormatLineage(%v) = %q, want %q", epoch.Epochs(c.chain), got, c.want)
		}
	}
}
