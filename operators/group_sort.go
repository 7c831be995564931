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
type slotOrd struct {
	major int64
	pfx   uint64
	minor int64
	key   string
	slot  int32
}

func cmpSlotOrd(a, b slotOrd) int {
	if a.major != b.major {
		return cmp.Compare(a.major, b.major)
	}
	if a.pfx != b.pfx {
		return cmp.Compare(a.pfx, b.pfx)
	}
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.minor, b.minor)
}

// sortSlots sorts slots by (major(s), key bytes, minor(s)), writes them
// back in that order and returns their sort keys in that order (w's
// scratch, valid until the next call; the caller clears it once done, to
// drop the key strings). The prefixes are the keys' cached ones (keyPfx),
// taken after the prefix all keys of w share: the keys' bytes are not read
// unless two prefixes tie. Zero-padding keeps the prefix order that of the
// bytes: a key shorter than the prefix window is a prefix of any key it
// ties with, and the full comparison then decides.
func (w *Window) sortSlots(slots []int32, major, minor func(s *slotInfo, k *keyInfo) int64) []slotOrd {
	ords := slices.Grow(w.ords[:0], len(slots))[:len(slots)]
	w.ords = ords
	for i, s := range slots {
		info := &w.slots[s]
		ki := &w.keys[info.kid]
		ords[i] = slotOrd{major: major(info, ki), pfx: w.keyPfx(ki), minor: minor(info, ki), key: ki.bytes, slot: s}
	}
	if len(ords) < radixMinOrds {
		slices.SortFunc(ords, cmpSlotOrd)
	} else {
		ords = radixSortOrds(ords, w.ords2)
		w.ords, w.ords2 = ords, w.ords
	}
	for i := range ords {
		slots[i] = ords[i].slot
	}
	return ords
}

// keyPfx returns the sort prefix of ki: its 8 bytes after the prefix all of
// w's keys share (w.keyLCP), cached in ki until that prefix shortens.
func (w *Window) keyPfx(ki *keyInfo) uint64 {
	if int(ki.pfxAt) != w.keyLCP {
		ki.pfx, ki.pfxAt = prefix8(ki.bytes, w.keyLCP), int32(w.keyLCP)
	}
	return ki.pfx
}

// radixMinOrds is the size from which sortSlots and sortKeys radix-sort.
const radixMinOrds = 256

// radixEnt is an element of radixSortOrds: the sort words (w[1] the
// major's rank or the major with its sign bit flipped, so that unsigned
// order is signed order; w[0] the prefix) and the element's index.
type radixEnt struct {
	w [2]uint64
	i int32
}

// maxMajorRanks bounds the distinct majors radixSortOrds ranks.
const maxMajorRanks = 256

// radixSortOrds sorts ords by (major, pfx) with a least-significant-digit
// radix sort over bytes (skipping the bytes every element has equal; the
// majors, usually a few window starts or key groups, are replaced by their
// rank when there are at most maxMajorRanks), then each run of equal
// (major, pfx), rare when keys differ within their first 8 bytes after the
// common prefix, by the full comparison. The order is that of cmpSlotOrd.
// It returns the sorted elements: ords itself or into (grown as needed).
func radixSortOrds(ords, into []slotOrd) []slotOrd {
	n := len(ords)
	a := make([]radixEnt, n)
	ranks := majorRanks(ords)
	var hist [16][256]int32
	last, lastRank := ords[0].major, uint64(0)
	if ranks != nil {
		r, _ := slices.BinarySearch(ranks, last)
		lastRank = uint64(r)
	}
	for i := range ords {
		hi := uint64(ords[i].major) ^ 1<<63
		if ranks != nil {
			if m := ords[i].major; m != last {
				r, _ := slices.BinarySearch(ranks, m)
				last, lastRank = m, uint64(r)
			}
			hi = lastRank
		}
		e := radixEnt{w: [2]uint64{ords[i].pfx, hi}, i: int32(i)}
		a[i] = e
		for d := range 16 {
			hist[d][byte(e.w[d>>3]>>(8*(d&7)))]++
		}
	}
	var b []radixEnt
	for d := range 16 {
		h := &hist[d]
		word, shift := d>>3, 8*(d&7)
		if h[byte(a[0].w[word]>>shift)] == int32(n) {
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
			v := byte(e.w[word] >> shift)
			b[h[v]] = e
			h[v]++
		}
		a, b = b, a
	}
	// Gather in the order of a (independent loads, unlike following the
	// permutation's cycles in place, whose every load waits for the last).
	out := slices.Grow(into[:0], n)[:n]
	for j, e := range a {
		out[j] = ords[e.i]
	}
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && out[hi].major == out[lo].major && out[hi].pfx == out[lo].pfx {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(out[lo:hi], cmpSlotOrd)
		}
		lo = hi
	}
	return out
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
		ki := &w.keys[k]
		ords[i] = slotOrd{pfx: w.keyPfx(ki), key: ki.bytes, slot: k}
	}
	if len(ords) < radixMinOrds {
		slices.SortFunc(ords, cmpSlotOrd)
	} else {
		ords = radixSortOrds(ords, w.ords2)
		w.ords, w.ords2 = ords, w.ords
	}
	for i := range ords {
		kids[i] = ords[i].slot
	}
	w.releaseOrds()
}

// releaseOrds clears sortSlots's scratch (dropping the key strings' references) and
// lets the garbage collector have it when it is large.
func (w *Window) releaseOrds() {
	clear(w.ords)
	clear(w.ords2)
	if cap(w.ords)+cap(w.ords2) > 1<<16 {
		w.ords, w.ords2 = nil, nil
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
