package operators

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSortSlotsMatchesReference fills a window with keys that share long
// prefixes (some a prefix of others, some with zero bytes) and slots at a
// few starts, then checks the state order (key group, key bytes, start)
// and the output order (start, key bytes, end) against a plain sort, with
// few key groups (bucketed) and with more than maxBuckets (not).
func TestSortSlotsMatchesReference(t *testing.T) {
	mixed := func(rng *rand.Rand, i int) string {
		switch i % 4 {
		case 0:
			return fmt.Sprintf("user-%07d", rng.IntN(1e6))
		case 1:
			return fmt.Sprintf("user-%d", rng.IntN(1e4))
		case 2:
			return "user-" + strings.Repeat("\x00", rng.IntN(12))
		default:
			return fmt.Sprintf("u%d", rng.IntN(100))
		}
	}
	// Keys of one length sharing a long prefix (a long common prefix of
	// the encoded keys), and long enough that many tie on the 8 bytes
	// after it; the first keys share a longer prefix than the later ones,
	// so cached key prefixes go stale.
	long := func(rng *rand.Rand, i int) string {
		id := rng.IntN(100)
		if i < 100 {
			id = 7
		}
		return fmt.Sprintf("user-%07d-%s", id, strings.Repeat(string(rune('a'+rng.IntN(3))), 3)+fmt.Sprint(rng.IntN(1000)+1000))
	}
	for _, keys := range []struct {
		name string
		gen  func(*rand.Rand, int) string
	}{{"mixed", mixed}, {"long", long}} {
		for _, k := range []int{128, 32768} {
			t.Run(fmt.Sprintf("%s/k=%d", keys.name, k), func(t *testing.T) {
				seed := uint64(rand.Int64())
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 3))
				spec := WindowSpec{ID: "w", Keys: []string{"user"}, EventTime: "ts", Kind: Tumbling, Size: time.Minute,
					Aggregates: mustAggs(t, "c", "count()")}
				w, err := NewWindow(spec, testSchema, k)
				if err != nil {
					t.Fatal(err)
				}
				var slots []int32
				for i := range 20000 {
					kid := w.strKeyID(keys.gen(rng, i))
					start := int64(rng.IntN(5)) * 60e6
					if _, ok := w.findFixed(kid, start); ok {
						continue
					}
					slots = append(slots, w.fixedSlot(kid, start, start+60e6))
				}
				ref := func(major, minor func(s *slotInfo, k *keyInfo) int64) []int32 {
					out := slices.Clone(slots)
					slices.SortStableFunc(out, func(a, b int32) int {
						sa, sb := &w.slots[a], &w.slots[b]
						ka, kb := w.keys.at(sa.kid), w.keys.at(sb.kid)
						return cmp.Or(cmp.Compare(major(sa, ka), major(sb, kb)), strings.Compare(w.keyStr(ka), w.keyStr(kb)), cmp.Compare(minor(sa, ka), minor(sb, kb)))
					})
					return out
				}
				for _, n := range []int{len(slots), radixMinOrds - 1} { // radix sort and pdqsort
					got := slices.Clone(slots[:n])
					w.sortStateOrder(got)
					if want := ref(slotKG, slotStart); !slices.Equal(got, filterOrder(want, got)) {
						t.Errorf("%d slots: state order differs from the reference", n)
					}
					got = slices.Clone(slots[:n])
					w.sortOutputOrder(got)
					if want := ref(slotStart, slotEnd); !slices.Equal(got, filterOrder(want, got)) {
						t.Errorf("%d slots: output order differs from the reference", n)
					}
				}
				if w.keyLCP < 1 || (keys.name == "long" && w.keyLCP < 9) {
					t.Errorf("common key prefix %d bytes: the test does not exercise the prefix window", w.keyLCP)
				}
			})
		}
	}
}

// filterOrder returns the elements of ref that are in sub, in ref's order.
func filterOrder(ref, sub []int32) []int32 {
	in := map[int32]bool{}
	for _, s := range sub {
		in[s] = true
	}
	var out []int32
	for _, s := range ref {
		if in[s] {
			out = append(out, s)
		}
	}
	return out
}
