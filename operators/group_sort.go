package operators

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
)

// slotOrd is a slot with its sort key copied out of the slot and key
// tables: major, the key bytes, minor. pfx holds the 8 key bytes after the
// prefix every key of the sort shares, big-endian and zero-padded, so most
// comparisons are three integer compares and never touch the key bytes
// (keys of one workload often share a long prefix, such as "user-").
//
// A slotOrd holds no pointer (its key is the key id kid, whose bytes are
// Window.keyStr), so that the collector never scans an Advance's worth of
// them. When the Window's key is one string column and the value fits
// inline, the value itself is copied out too (inl[:inlN]; inlN is -1
// otherwise), so that Advance writes the output's key column from the slotOrd
// it reads anyway instead of reading each key's bytes at random.
type slotOrd struct {
	major int64
	pfx   uint64
	minor int64
	slot  int32
	kid   int32
	inlN  int8
	inl   [inlineKey]byte
}

// cmpSlotOrd compares a and b by (major, key bytes, minor); key returns the
// bytes of a key id.
func cmpSlotOrd(key func(kid int32) string, a, b *slotOrd) int {
	if a.major != b.major {
		return cmp.Compare(a.major, b.major)
	}
	if a.pfx != b.pfx {
		return cmp.Compare(a.pfx, b.pfx)
	}
	if a.kid != b.kid {
		if c := strings.Compare(key(a.kid), key(b.kid)); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.minor, b.minor)
}

// sortSlots sorts slots by (major(s), key bytes, minor(s)) and writes them
// back in that order. It returns their sort keys and the sorted order as
// positions in them (slots[j] is ords[perm[j]].slot); both are w's
// scratch, valid until releaseOrds, which the caller calls once done. The
// prefixes are the keys' cached ones (keyPfx), taken after the prefix all
// keys of w share: the keys' bytes are not read unless two prefixes tie.
// Zero-padding keeps the prefix order that of the bytes: a key shorter than
// the prefix window is a prefix of any key it ties with, and the full
// comparison then decides.
func (w *Window) sortSlots(slots []int32, major, minor func(s *slotInfo, k *keyInfo) int64) (ords []slotOrd, perm []int32) {
	return w.sortSlotsVisit(slots, major, minor, nil)
}

// sortSlotsVisit is sortSlots that also calls visit, when not nil, with
// each slot in slots' order (before it sorts them) right after reading its
// sort key, while the slot's key is in cache.
func (w *Window) sortSlotsVisit(slots []int32, major, minor func(s *slotInfo, k *keyInfo) int64, visit func(s int32)) (ords []slotOrd, perm []int32) {
	ords = slices.Grow(w.ords[:0], len(slots))[:len(slots)]
	w.ords = ords
	keyBytes := 0
	for lo := 0; lo < len(slots); lo += prefetchRows {
		// Load prefetchRows keys before reading them, so that their cache
		// misses overlap.
		group := slots[lo:min(len(slots), lo+prefetchRows)]
		var sink uint64
		for _, s := range group {
			sink += w.keys.at(w.slots[s].kid).pfx
		}
		w.sink += sink
		for j, s := range group {
			info := &w.slots[s]
			ki := w.keys.at(info.kid)
			o := &ords[lo+j]
			*o = slotOrd{major: major(info, ki), pfx: w.keyPfx(ki), minor: minor(info, ki), slot: s, kid: info.kid, inlN: -1}
			if n := ki.mkLen(); w.strKey && n <= inlineKey && info.kid != w.nullKid {
				o.inlN, o.inl = int8(n), ki.inl
			}
			keyBytes += int(ki.kn)
			if visit != nil {
				visit(s)
			}
		}
	}
	w.ordKeyBytes = keyBytes
	perm = w.sortPerm(ords)
	for j, i := range perm {
		slots[j] = ords[i].slot
	}
	return ords, perm
}

// sortPerm returns the order of ords by cmpSlotOrd, as positions in ords
// (w's scratch).
func (w *Window) sortPerm(ords []slotOrd) []int32 {
	perm := slices.Grow(w.perm[:0], len(ords))[:len(ords)]
	w.perm = perm
	if len(ords) >= radixMinOrds {
		return radixSortOrds(ords, perm, w.keyOfID)
	}
	for i := range perm {
		perm[i] = int32(i)
	}
	sortTies(w.keyOfID, ords, perm)
	return perm
}

// keyPfx returns the sort prefix of ki: its 8 bytes after the prefix all of
// w's keys share (w.keyLCP), cached in ki until that prefix shortens.
func (w *Window) keyPfx(ki *keyInfo) uint64 {
	if int(ki.pfxAt) != w.keyLCP {
		ki.pfx, ki.pfxAt = prefix8(w.keyStr(ki), w.keyLCP), int32(w.keyLCP)
	}
	return ki.pfx
}

// radixMinOrds is the size from which sortSlots and sortKeys radix-sort.
const radixMinOrds = 256

// radixEnt is an element of radixSortOrds: a sort word and the element's
// position.
type radixEnt struct {
	k uint64
	i int32
}

// maxMajorRanks bounds the distinct majors radixSortOrds ranks.
const maxMajorRanks = 256

// radixSortOrds writes into perm (len(ords) long) the order of ords by
// cmpSlotOrd, as positions in ords, and returns it. When there are at most
// maxMajorRanks distinct majors (usually a few window starts or key
// groups), it first places the elements by major rank (a counting sort),
// then sorts each major's run by a least-significant-digit radix sort over
// the prefixes' bytes: a run is small enough to stay in cache through its
// passes, where passes over all elements would stream them through memory
// once per byte. With more majors it radix-sorts by prefix and then by the
// majors' bits. Bytes in which every element of a sort agrees are skipped.
// Then each run of equal (major, prefix), rare when keys differ within
// their first 8 bytes after the common prefix, is sorted by the full
// comparison. ords itself is not moved.
func radixSortOrds(ords []slotOrd, perm []int32, key func(kid int32) string) []int32 {
	n := len(ords)
	a := make([]radixEnt, n)
	b := make([]radixEnt, n)
	if ranks := majorRanks(ords); ranks != nil {
		// Count each major, then place each element in its major's run.
		rk := make([]uint8, n)
		var start [maxMajorRanks + 1]int32
		last := ords[0].major
		r, _ := slices.BinarySearch(ranks, last)
		lastRank := uint8(r)
		for i := range ords {
			if m := ords[i].major; m != last {
				r, _ := slices.BinarySearch(ranks, m)
				last, lastRank = m, uint8(r)
			}
			rk[i] = lastRank
			start[int(lastRank)+1]++
		}
		for r := 1; r <= len(ranks); r++ {
			start[r] += start[r-1]
		}
		next := start
		for i := range ords {
			r := rk[i]
			a[next[r]] = radixEnt{k: ords[i].pfx, i: int32(i)}
			next[r]++
		}
		for r := range ranks {
			lo, hi := start[r], start[r+1]
			run := a[lo:hi]
			var hist [8][256]int32
			for _, e := range run {
				for d := range 8 {
					hist[d][byte(e.k>>(8*d))]++
				}
			}
			sorted, _ := radixPasses(run, b[lo:hi], &hist)
			for j, e := range sorted {
				perm[int(lo)+j] = e.i
			}
			// Ties of the prefix within the major, found on the sorted
			// words (reading ords in sorted order would be a cache
			// miss per element), are sorted by the full comparison.
			for i := 0; i < len(sorted); {
				j := i + 1
				for j < len(sorted) && sorted[j].k == sorted[i].k {
					j++
				}
				if j-i > 1 {
					sortTies(key, ords, perm[int(lo)+i:int(lo)+j])
				}
				i = j
			}
		}
		return perm
	}
	var hist [8][256]int32
	for i := range ords {
		k := ords[i].pfx
		a[i] = radixEnt{k: k, i: int32(i)}
		for d := range 8 {
			hist[d][byte(k>>(8*d))]++
		}
	}
	a, b = radixPasses(a, b, &hist)
	// Then by the majors' bits with the sign flipped (so that
	// unsigned order is signed order), stably.
	hist = [8][256]int32{}
	for j := range a {
		k := uint64(ords[a[j].i].major) ^ 1<<63
		a[j].k = k
		for d := range 8 {
			hist[d][byte(k>>(8*d))]++
		}
	}
	a, _ = radixPasses(a, b, &hist)
	for j := range a {
		perm[j] = a[j].i
	}
	for lo := 0; lo < n; {
		o := &ords[perm[lo]]
		hi := lo + 1
		for hi < n && ords[perm[hi]].major == o.major && ords[perm[hi]].pfx == o.pfx {
			hi++
		}
		if hi-lo > 1 {
			sortTies(key, ords, perm[lo:hi])
		}
		lo = hi
	}
	return perm
}

// sortTies sorts a run of perm (positions in ords) by the full comparison:
// one whose elements tie on (major, prefix), or any small sort.
func sortTies(key func(kid int32) string, ords []slotOrd, run []int32) {
	slices.SortFunc(run, func(x, y int32) int { return cmpSlotOrd(key, &ords[x], &ords[y]) })
}

// keyOfID returns the bytes of key id kid.
func (w *Window) keyOfID(kid int32) string { return w.keyStr(w.keys.at(kid)) }

// radixPasses stably sorts a by the bytes of its sort words, least
// significant first, skipping bytes in which every element agrees (hist
// holds each byte's counts), using b (allocated when nil) as the other
// buffer; it returns the sorted elements and the other buffer.
func radixPasses(a, b []radixEnt, hist *[8][256]int32) ([]radixEnt, []radixEnt) {
	n := int32(len(a))
	if n == 0 {
		return a, b
	}
	for d := range 8 {
		h := &hist[d]
		shift := 8 * d
		if h[byte(a[0].k>>shift)] == n {
			continue // every element has the same byte here
		}
		if b == nil {
			b = make([]radixEnt, n)
		}
		var sum int32
		for v := range h {
			c := h[v]
			h[v] = sum
			sum += c
		}
		for _, e := range a {
			v := byte(e.k >> shift)
			b[h[v]] = e
			h[v]++
		}
		a, b = b, a
	}
	return a, b
}

// majorRanks returns the distinct majors of ords, sorted, or nil when there
// are more than maxMajorRanks.
func majorRanks(ords []slotOrd) []int64 {
	var ms []int64
	last := ords[0].major
	ms = append(ms, last)
	for i := range ords {
		m := ords[i].major
		if m == last {
			continue
		}
		last = m
		if !slices.Contains(ms, m) {
			if len(ms) == maxMajorRanks {
				return nil
			}
			ms = append(ms, m)
		}
	}
	slices.Sort(ms)
	return ms
}

// prefix8 returns bytes [off, off+8) of s big-endian, zero-padded.
func prefix8(s string, off int) uint64 {
	if off+8 <= len(s) {
		return binary.BigEndian.Uint64([]byte(s[off : off+8]))
	}
	var b [8]byte
	if off < len(s) {
		copy(b[:], s[off:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// sortKeys sorts key ids by their bytes.
func (w *Window) sortKeys(kids []int32) {
	ords := slices.Grow(w.ords[:0], len(kids))[:len(kids)]
	w.ords = ords
	for i, k := range kids {
		ki := w.keys.at(k)
		ords[i] = slotOrd{pfx: w.keyPfx(ki), slot: k, kid: k, inlN: -1}
	}
	for j, i := range w.sortPerm(ords) {
		kids[j] = ords[i].slot
	}
	w.releaseOrds()
}

// releaseOrds lets the garbage collector have sortSlots's scratch when it is
// large.
func (w *Window) releaseOrds() {
	if cap(w.ords) > 1<<16 {
		w.ords, w.perm = nil, nil
	}
}

func slotZero(*slotInfo, *keyInfo) int64      { return 0 }
func slotStart(s *slotInfo, _ *keyInfo) int64 { return s.start }
func slotEnd(s *slotInfo, _ *keyInfo) int64   { return s.end }
func slotKG(_ *slotInfo, k *keyInfo) int64    { return int64(k.kg) }

// sortOutputOrder sorts slots by window start, key bytes and window end:
// the row order of Advance.
func (w *Window) sortOutputOrder(slots []int32) {
	w.sortSlots(slots, slotStart, slotEnd)
	w.releaseOrds()
}

// sortStateOrder sorts slots by key group, key bytes and window start: the
// row order of Snapshot and SnapshotDelta.
func (w *Window) sortStateOrder(slots []int32) {
	w.sortSlots(slots, slotKG, slotStart)
	w.releaseOrds()
}
