package operators

import "hash/maphash"

// keyIndex is the index of a Window's key ids by key: an open-addressing
// hash table with linear probing whose entries are one uint64 each, the low
// 32 bits of the key's hash above kid+1 (0 is an empty entry). The key
// bytes themselves are not stored here: a probe that matches the hash bits
// compares the key against the key entry Window.keys.at(kid), so a key costs 8 bytes of
// index at most 50% load, no per-key map entry and no hashing of a Go
// string header. Deletion shifts later entries back (no tombstones), which
// the stored hash bits allow without rehashing a key.
//
// The hash is maphash with a per-table seed: it only places entries, it
// never decides an order, so outputs do not depend on it.
type keyIndex struct {
	seed maphash.Seed
	ents []uint64
	mask uint64
	n    int
}

const keyIndexMinCap = 64

func newKeyIndex(capHint int) keyIndex {
	t := keyIndex{seed: maphash.MakeSeed()}
	t.alloc(capHint)
	return t
}

// alloc makes an empty table for about n keys.
func (t *keyIndex) alloc(n int) {
	c := keyIndexMinCap
	for c < 2*n {
		c <<= 1
	}
	t.ents = make([]uint64, c)
	t.mask = uint64(c - 1)
	t.n = 0
}

func (t *keyIndex) hash(mk string) uint32 { return uint32(maphash.String(t.seed, mk)) }

// presize grows an empty table to hold about n keys without rehashing.
func (t *keyIndex) presize(n int) {
	if t.n == 0 && 2*n > len(t.ents) {
		t.alloc(n)
	}
}

// add indexes kid, whose key hashes to h and is not indexed yet, and grows
// the table past 50% load.
func (t *keyIndex) add(h uint32, kid int32) {
	pos := uint64(h) & t.mask
	for t.ents[pos] != 0 {
		pos = (pos + 1) & t.mask
	}
	t.ents[pos] = uint64(h)<<32 | uint64(uint32(kid)+1)
	t.n++
	if 2*t.n > len(t.ents) {
		t.grow()
	}
}

func (t *keyIndex) grow() {
	old := t.ents
	t.ents = make([]uint64, 2*len(old))
	t.mask = uint64(len(t.ents) - 1)
	for _, e := range old {
		if e == 0 {
			continue
		}
		i := (e >> 32) & t.mask
		for t.ents[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.ents[i] = e
	}
}

// remove deletes the entry of kid, whose key hashes to h, reporting
// whether there was one.
func (t *keyIndex) remove(h uint32, kid int32) bool {
	want := uint64(h)<<32 | uint64(uint32(kid)+1)
	i := uint64(h) & t.mask
	for t.ents[i] != want {
		if t.ents[i] == 0 {
			return false // not indexed
		}
		i = (i + 1) & t.mask
	}
	// Backward shift: move each later entry of the run into the hole when
	// the hole lies between its home and where it is.
	for j := i; ; {
		j = (j + 1) & t.mask
		e := t.ents[j]
		if e == 0 {
			break
		}
		home := (e >> 32) & t.mask
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.ents[i] = e
			i = j
		}
	}
	t.ents[i] = 0
	t.n--
	return true
}

// lookup returns the key id whose hash is h and for which is reports
// true (the caller compares the key bytes), or false.
func (t *keyIndex) lookup(h uint32, is func(kid int32) bool) (int32, bool) {
	i := uint64(h) & t.mask
	for {
		e := t.ents[i]
		if e == 0 {
			return -1, false
		}
		if uint32(e>>32) == h {
			if k := int32(uint32(e) - 1); is(k) {
				return k, true
			}
		}
		i = (i + 1) & t.mask
	}
}

// findKey returns the key id whose map key (see Window.mapKey) is mk, whose
// hash is h; when absent, pos is the empty entry insert takes.
func (w *Window) findKey(h uint32, mk string) (kid int32, pos uint64, ok bool) {
	t := &w.ktab
	i := uint64(h) & t.mask
	for {
		e := t.ents[i]
		if e == 0 {
			return -1, i, false
		}
		if uint32(e>>32) == h {
			k := int32(uint32(e) - 1)
			if w.hasMapKey(w.keys.at(k), mk) {
				return k, i, true
			}
		}
		i = (i + 1) & t.mask
	}
}

// prefetchRows is the number of rows whose keys prefetchStrKeys looks up
// ahead: about the misses a core keeps in flight.
const prefetchRows = 16

// prefetchStrKeys hashes the non-null keys of rows (at most prefetchRows)
// of the single string key column bc and loads, for all rows before any is
// processed, their home index entries, then the keys those entries name
// and the keys' bytes and newest slots: with a million keys each is a
// cache miss, which a row-at-a-time lookup waits for one after another.
// It changes nothing; the loads only warm the cache, and it returns the
// hashes (by position in rows; those of null keys are unset).
func (w *Window) prefetchStrKeys(bc *boundCol, rows []int32) *[prefetchRows]uint32 {
	t := &w.ktab
	hs := &w.hs
	var need [prefetchRows]uint32
	m := 0
	for j, i := range rows {
		if bc.valid(int(i)) {
			h := t.hash(bc.strValue(int(i)))
			hs[j] = h
			need[m] = h
			m++
		}
	}
	w.prefetchHashes(need[:m])
	return hs
}

// prefetchHashes loads, for keys of hashes hs (at most prefetchRows), their
// home index entries, then the keys those entries name, then the keys'
// bytes and newest slots, when the entries' hash bits match. Each step is
// a short loop of independent loads, so that the core keeps all of a
// step's cache misses in flight at once: a loop that also hashed, or
// followed one key's chain of loads before the next key's, would fill the
// core's reorder window after a few keys and wait for their misses one
// after another. It changes nothing; the loads only warm the cache.
func (w *Window) prefetchHashes(hs []uint32) {
	t := &w.ktab
	var sink uint64
	for _, h := range hs {
		sink += t.ents[uint64(h)&t.mask]
	}
	var kids [prefetchRows]int32
	m := 0
	for _, h := range hs {
		if e := t.ents[uint64(h)&t.mask]; e != 0 && uint32(e>>32) == h {
			kid := int32(uint32(e) - 1)
			kids[m] = kid
			m++
			sink += uint64(w.keys.at(kid).head)
		}
	}
	for _, kid := range kids[:m] {
		ki := w.keys.at(kid)
		if ki.mkLen() > inlineKey {
			sink += uint64(w.karena.chunks[ki.kc][ki.ko+ki.kn-1])
		}
		if ki.head >= 0 {
			sink += uint64(w.slots[ki.head].start)
		}
	}
	w.sink += sink
}

// prefetchDictKeys is prefetchStrKeys for a dictionary-encoded key column:
// it hashes and loads the keys of the rows whose dictionary value has no
// key id in dk yet (the rest cost no lookup). Rows of one value share a
// hash; a value met twice in rows is loaded twice, which is harmless.
func (w *Window) prefetchDictKeys(bc *boundCol, rows []int32, dk []int32) *[prefetchRows]uint32 {
	t := &w.ktab
	hs := &w.hs
	var need [prefetchRows]uint32
	m := 0
	for j, i := range rows {
		if bc.valid(int(i)) {
			if d := bc.dictIndex(int(i)); dk[d] < 0 {
				h := t.hash(bc.str.Value(d))
				hs[j] = h
				need[m] = h
				m++
			}
		}
	}
	w.prefetchHashes(need[:m])
	return hs
}
