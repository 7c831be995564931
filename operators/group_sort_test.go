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
	for _, k := range []int{128, 32768} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
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
				var s string
				switch i % 4 {
				case 0:
					s = fmt.Sprintf("user-%07d", rng.IntN(1e6))
				case 1:
					s = fmt.Sprintf("user-%d", rng.IntN(1e4))
				case 2:
					s = "user-" + strings.Repeat("\x00", rng.IntN(12))
				default:
					s = fmt.Sprintf("u%d", rng.IntN(100))
				}
				kid := w.strKeyID(s)
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
					ka, kb := &w.keys[sa.kid], &w.keys[sb.kid]
					return cmp.Or(cmp.Compare(major(sa, ka), major(sb, kb)), strings.Compare(ka.bytes, kb.bytes), cmp.Compare(minor(sa, ka), minor(sb, kb)))
				})
				return out
			}
			got := slices.Clone(slots)
			w.sortStateOrder(got)
			if want := ref(slotKG, slotStart); !slices.Equal(got, want) {
				t.Errorf("state order differs from the reference")
			}
			got = slices.Clone(slots)
			w.sortOutputOrder(got)
			if want := ref(slotStart, slotEnd); !slices.Equal(got, want) {
				t.Errorf("output order differs from the reference")
			}
		})
	}
}
