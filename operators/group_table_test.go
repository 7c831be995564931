package operators

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyIndexMatchesMap inserts and removes random int and string keys
// through a Window's key index (keyID, killSlot's removal) and checks every
// lookup against a Go map, across table growth and backward-shift deletes.
func TestKeyIndexMatchesMap(t *testing.T) {
	for _, strKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("strKey=%v", strKey), func(t *testing.T) {
			seed := uint64(rand.Int64())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			w := &Window{k: 128, strKey: strKey, nullKid: -1, ktab: newKeyIndex(0)}
			ref := map[string]int32{}
			enc := func(i int) []byte {
				if strKey {
					s := fmt.Sprintf("k%d", i)
					return append([]byte{tagString, byte(len(s))}, s...)
				}
				return appendU64(nil, tagInt64, uint64(i))
			}
			for step := range 20000 {
				i := rng.IntN(3000)
				key := enc(i)
				if rng.IntN(3) == 0 {
					kid, ok := ref[string(key)]
					if !ok {
						continue
					}
					ki := w.keys.at(kid)
					w.ktab.remove(ki.h, kid)
					w.karena.release(ki.kn)
					ki.kn = 0
					w.freeKeys = append(w.freeKeys, kid)
					delete(ref, string(key))
				} else {
					kid := w.keyID(key)
					if want, ok := ref[string(key)]; ok && want != kid {
						t.Fatalf("step %d: key %d has id %d, want %d", step, i, kid, want)
					}
					ref[string(key)] = kid
				}
				if step%997 == 0 {
					for k, want := range ref {
						if got, ok := w.lookupEncoded([]byte(k)); !ok || got != want {
							t.Fatalf("step %d: lookup %q = %d,%v want %d", step, k, got, ok, want)
						}
					}
					if w.ktab.n != len(ref) {
						t.Fatalf("step %d: index holds %d keys, want %d", step, w.ktab.n, len(ref))
					}
				}
			}
			for i := range 3000 {
				_, want := ref[string(enc(i))]
				if _, ok := w.lookupEncoded(enc(i)); ok != want {
					t.Fatalf("key %d: found=%v want %v", i, ok, want)
				}
			}
		})
	}
}
