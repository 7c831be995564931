package operators

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata golden files")

// slidingGoldenSpecs are the sliding windows of testdata/sliding_outputs.txt.
var slidingGoldenSpecs = []WindowSpec{
	{Kind: Sliding, Size: 20 * us, Slide: 5 * us, AllowedLateness: 3 * us},
	{Kind: Sliding, Size: 20 * us, Slide: 5 * us},
	{Kind: Sliding, Size: 12 * us, Slide: 4 * us, AllowedLateness: 30 * us},
	{Kind: Sliding, Size: 10 * us, Slide: 10 * us, AllowedLateness: 2 * us},
	{Kind: Sliding, Size: 30 * us, Slide: 3 * us, AllowedLateness: 7 * us},
}

// TestSlidingGolden compares the late rows and emitted windows of random
// streams (with rescales through Snapshot/Restore) with
// testdata/sliding_outputs.txt, which the per-window sliding implementation
// (every row aggregated into each of its size/slide windows, before window
// slicing) wrote. Window slicing must not change a single output row.
func TestSlidingGolden(t *testing.T) {
	var got strings.Builder
	for si, spec := range slidingGoldenSpecs {
		for seed := uint64(1); seed <= 3; seed++ {
			spec.Aggregates = allAggs(t)
			fmt.Fprintf(&got, "== spec %d size=%d slide=%d lateness=%d seed=%d\n", si, spec.Size.Microseconds(), spec.Slide.Microseconds(), spec.AllowedLateness.Microseconds(), seed)
			rng := rand.New(rand.NewPCG(seed, uint64(si)))
			c := newCluster(t, spec, 1+rng.IntN(4))
			for i, o := range randomStream(rng, 120) {
				var lines []string
				switch {
				case o.advance:
					lines = c.advance(o.wm)
				case o.p > 0:
					c.rescale(o.p)
				default:
					lines = c.process(o.rows)
				}
				for _, l := range lines {
					fmt.Fprintf(&got, "%d %s\n", i, l)
				}
			}
			for _, l := range c.advance(math.MaxInt64) {
				fmt.Fprintf(&got, "drain %s\n", l)
			}
		}
	}
	const path = "testdata/sliding_outputs.txt"
	if *rewrite {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		g, w := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Fatalf("%s line %d:\ngot  %s\nwant %s", path, i+1, g[i], w[i])
			}
		}
		t.Fatalf("%s: got %d lines, want %d", path, len(g), len(w))
	}
}
