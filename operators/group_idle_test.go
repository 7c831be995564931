package operators

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestIdleKeysEvictedAndReused churns far more keys than minKeys through
// tumbling windows (each minute's keys are a random few of 3*minKeys, plus
// the null key), so that keys go idle, come back, and are evicted to make
// room for new ones. Every emitted window must match a reference count and
// sum, and after every step the key index must hold exactly the keys that
// are not free, each found under its own bytes, and the key ids must stay
// within keyBound (at most twice the most keys active at once, or minKeys).
func TestIdleKeysEvictedAndReused(t *testing.T) {
	w := churnKeys(t, 3*minKeys, func(i int) string { return fmt.Sprintf("u%d", i) })
	if w.karena.compactions != 0 {
		t.Fatalf("%d key-arena compactions for short keys", w.karena.compactions)
	}
}

// TestKeyArenaCompacts: with long keys (not inline, 105 bytes) churned
// through eviction, the key arena's dead bytes pass its live ones and it
// compacts, more than once; every window is still emitted with its key and
// aggregates, and every key is found under its bytes.
func TestKeyArenaCompacts(t *testing.T) {
	w := churnKeys(t, 60000, func(i int) string { return fmt.Sprintf("user-%0100d", i) })
	if w.karena.compactions < 2 {
		t.Fatalf("%d key-arena compactions; the churn should force several", w.karena.compactions)
	}
	if held := len(w.karena.chunks) * keyChunk; held > 4*max(w.karena.live, keyChunk) {
		t.Fatalf("arena holds %d chunks for %d live bytes", len(w.karena.chunks), w.karena.live)
	}
}

// churnKeys runs the eviction churn of TestIdleKeysEvictedAndReused over
// keys name(0..space) and returns the window.
func churnKeys(t *testing.T, space int, name func(int) string) *Window {
	t.Helper()
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 8))
	w := newWin(t, WindowSpec{Kind: Tumbling, Size: time.Minute, Aggregates: mustAggs(t, "c", "count()", "sum", "sum(n)")})
	type agg struct{ c, sum int64 }
	ref := map[int64]map[string]*agg{} // minute start -> quoted user (or null) -> aggregate
	const minute = int64(60e6)
	for m := int64(0); m < 30; m++ {
		// Rows of minutes m and m+1; minute m closes at the end of the step.
		var rows []ev
		for range 2500 {
			start := (m + int64(rng.IntN(2))) * minute
			e := ev{ts: start + rng.Int64N(minute), n: ip(rng.Int64N(100))}
			user := "null"
			if rng.IntN(50) > 0 {
				u := name(rng.IntN(space))
				e.user, user = &u, fmt.Sprintf("%q", u)
			}
			rows = append(rows, e)
			if ref[start] == nil {
				ref[start] = map[string]*agg{}
			}
			a := ref[start][user]
			if a == nil {
				a = &agg{}
				ref[start][user] = a
			}
			a.c++
			a.sum += *e.n
		}
		rec := batch(t, rows...)
		late, err := w.Process(rec)
		rec.Release()
		if err != nil || late != nil {
			t.Fatalf("minute %d: process: late %v, err %v", m, rowsOf(late), err)
		}
		out, err := w.Advance((m + 1) * minute)
		if err != nil {
			t.Fatalf("minute %d: advance: %v", m, err)
		}
		got := rowsOf(out)
		release(out)
		var want []string
		for user, a := range ref[m*minute] {
			want = append(want, fmt.Sprintf("%s %d %d %d %d", user, m*minute, (m+1)*minute, a.c, a.sum))
		}
		slices.Sort(got)
		slices.Sort(want)
		eqLines(t, fmt.Sprintf("minute %d output", m), got, want)
		checkKeyIndex(t, w)
	}
	seen := map[string]bool{}
	for _, users := range ref {
		for u := range users {
			seen[u] = true
		}
	}
	if w.keys.len() >= len(seen) {
		t.Fatalf("%d key ids for %d distinct keys: no key was evicted, the test does not exercise eviction", w.keys.len(), len(seen))
	}
	return w
}

// checkKeyIndex checks that w.ktab indexes exactly the keys that are not
// free, and that the key ids stay within the eviction bound.
func checkKeyIndex(t *testing.T, w *Window) {
	t.Helper()
	free := map[int32]bool{}
	for _, k := range w.freeKeys {
		free[k] = true
	}
	if bound := w.keyBound(); w.keys.len() > bound || bound < w.activeMax || bound > 2*max(minKeys, w.activeMax) {
		t.Fatalf("%d key ids, bound %d, most active %d", w.keys.len(), bound, w.activeMax)
	}
	indexed := 0
	active := 0
	for kid := range int32(w.keys.len()) {
		ki := w.keys.at(kid)
		if free[int32(kid)] {
			continue
		}
		if ki.refs > 0 {
			active++
		}
		if w.strKey && int32(kid) == w.nullKid {
			continue
		}
		indexed++
		mk := w.keyStr(ki)[ki.mkOff:]
		if got, _, ok := w.findKey(w.ktab.hash(mk), mk); !ok || got != int32(kid) {
			t.Fatalf("key %q (id %d) not found in the index (got %d, %v)", w.keyStr(ki), kid, got, ok)
		}
	}
	if indexed != w.ktab.n {
		t.Fatalf("index holds %d keys, want %d", w.ktab.n, indexed)
	}
	if active != w.active {
		t.Fatalf("%d keys active, counter says %d", active, w.active)
	}
}
