package keygroup

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestHashMatchesStdlib(t *testing.T) {
	for _, s := range []string{"", "a", "user-1", strings.Repeat("xyz", 100)} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := Hash([]byte(s)), h.Sum64(); got != want {
			t.Errorf("Hash(%q) = %x, want %x", s, got, want)
		}
	}
}

func TestOf(t *testing.T) {
	if got := Of([]byte("x"), 0); got != 0 {
		t.Errorf("Of(k=0) = %d, want 0", got)
	}
	for _, k := range []int{1, 7, 128, Max} {
		for i := range 1000 {
			key := []byte{byte(i), byte(i >> 8), 'k'}
			g := Of(key, k)
			if g < 0 || g >= k {
				t.Fatalf("Of(%x, %d) = %d, out of [0,%d)", key, k, g, k)
			}
			if want := int(Hash(key) % uint64(k)); g != want {
				t.Fatalf("Of(%x, %d) = %d, want %d", key, k, g, want)
			}
		}
	}
}

// checkPartition checks that the ranges of subtasks 0..p-1 partition [0,k)
// in order, are non-empty when p <= k, and agree with SubtaskOf.
func checkPartition(t *testing.T, p, k int) {
	t.Helper()
	next := 0
	for s := 0; s < p; s++ {
		lo, hi := Range(s, p, k)
		if lo != next || hi < lo {
			t.Fatalf("K=%d P=%d s=%d: [%d,%d), want lo %d and hi >= lo", k, p, s, lo, hi, next)
		}
		if p <= k && hi == lo {
			t.Fatalf("K=%d P=%d s=%d: empty range with P <= K", k, p, s)
		}
		// SubtaskOf agrees at the bounds and, for small ranges, everywhere.
		for _, g := range []int{lo, hi - 1, lo + (hi-lo)/2} {
			if g >= lo && g < hi {
				if got := SubtaskOf(g, p, k); got != s {
					t.Fatalf("K=%d P=%d: group %d in subtask %d's range, SubtaskOf says %d", k, p, g, s, got)
				}
			}
		}
		if hi-lo <= 64 {
			for g := lo; g < hi; g++ {
				if got := SubtaskOf(g, p, k); got != s {
					t.Fatalf("K=%d P=%d: group %d in subtask %d's range, SubtaskOf says %d", k, p, g, s, got)
				}
			}
		}
		next = hi
	}
	if next != k {
		t.Fatalf("K=%d P=%d: ranges end at %d, want %d", k, p, next, k)
	}
}

func TestRangePartitionsExhaustiveSmall(t *testing.T) {
	for k := 1; k <= 64; k++ {
		for p := 1; p <= k; p++ {
			checkPartition(t, p, k)
			for g := 0; g < k; g++ {
				s := SubtaskOf(g, p, k)
				if lo, hi := Range(s, p, k); g < lo || g >= hi {
					t.Fatalf("K=%d P=%d: SubtaskOf(%d) = %d, whose range is [%d,%d)", k, p, g, s, lo, hi)
				}
			}
		}
	}
}

// TestRangePartitionsProperty checks the partition property for random
// (P, K) up to Max, including the extremes. The seed is logged for replay.
func TestRangePartitionsProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	cases := [][2]int{{1, 1}, {1, Max}, {Max, Max}, {Max - 1, Max}, {3, Max}, {Default, Default}, {7, Default}}
	for range 300 {
		k := 1 + r.IntN(Max)
		cases = append(cases, [2]int{1 + r.IntN(min(k, 512)), k}, [2]int{1 + r.IntN(k), k})
	}
	for _, c := range cases {
		checkPartition(t, c[0], c[1])
		// Random groups map to a subtask whose range holds them.
		for range 50 {
			g := r.IntN(c[1])
			s := SubtaskOf(g, c[0], c[1])
			if lo, hi := Range(s, c[0], c[1]); s < 0 || s >= c[0] || g < lo || g >= hi {
				t.Fatalf("K=%d P=%d: SubtaskOf(%d) = %d, whose range is [%d,%d)", c[1], c[0], g, s, lo, hi)
			}
		}
	}
}

func TestRangeOutOfDomain(t *testing.T) {
	for _, c := range [][3]int{{0, 0, 8}, {0, 1, 0}, {-1, 2, 8}, {2, 2, 8}, {0, -1, 8}} {
		if lo, hi := Range(c[0], c[1], c[2]); lo != 0 || hi != 0 {
			t.Errorf("Range(%d, %d, %d) = [%d,%d), want [0,0)", c[0], c[1], c[2], lo, hi)
		}
	}
	// P > K: ranges still partition [0, K); some are empty.
	checkPartition(t, 10, 3)
	if got := SubtaskOf(5, 3, 0); got != 0 {
		t.Errorf("SubtaskOf(k=0) = %d, want 0", got)
	}
}

func TestCounts(t *testing.T) {
	if !ValidCount(1) || !ValidCount(Max) || !ValidCount(Default) || ValidCount(0) || ValidCount(Max+1) {
		t.Error("ValidCount bounds wrong")
	}
	if Default > Max {
		t.Errorf("Default %d > Max %d", Default, Max)
	}
}
