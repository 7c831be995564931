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

// sortSlots sorts slots by (major(s), key bytes, minor(s)) and writes them
// back in that order. Zero-padding keeps the prefix order that of the
// bytes: a key shorter than the prefix window is a prefix of any key it
// ties with, and the full comparison then decides.
func (w *Window) sortSlots(slots []int32, major, minor func(s *slotInfo, k *keyInfo) int64) {
	if len(slots) < 2 {
		return
	}
	ords := make([]slotOrd, len(slots))
	for i, s := range slots {
		info := &w.slots[s]
		ki := &w.keys[info.kid]
		ords[i] = slotOrd{major: major(info, ki), minor: minor(info, ki), key: ki.bytes, slot: s}
	}
	sortOrds(ords)
	for i := range ords {
		slots[i] = ords[i].slot
	}
}

// sortOrds fills in the prefixes after the keys' common prefix and sorts.
func sortOrds(ords []slotOrd) {
	first := ords[0].key
	lcp := len(first)
	for i := 1; i < len(ords) && lcp > 0; i++ {
		k := ords[i].key
		n := min(lcp, len(k))
		j := 0
		for j < n && k[j] == first[j] {
			j++
		}
		lcp = j
	}
	for i := range ords {
		ords[i].pfx = prefix8(ords[i].key, lcp)
	}
	if len(ords) < 1<<12 || !sortBuckets(ords) {
		slices.SortFunc(ords, cmpSlotOrd)
	}
}

// maxBuckets bounds the distinct majors sortBuckets distributes by.
const maxBuckets = 1 << 12

// sortBuckets sorts ords when they have few distinct majors (key groups,
// window starts): a counting sort by major, then each bucket, small enough
// to sort in cache, by key and minor. It reports false, leaving ords as
// they were, when there are more than maxBuckets majors.
func sortBuckets(ords []slotOrd) bool {
	idx := map[int64]int{}
	var majors []int64
	last, lastIdx := ords[0].major, -1
	for i := range ords {
		m := ords[i].major
		if m == last && lastIdx >= 0 {
			continue
		}
		j, ok := idx[m]
		if !ok {
			if len(majors) == maxBuckets {
				return false
			}
			j = len(majors)
			idx[m] = j
			majors = append(majors, m)
		}
		last, lastIdx = m, j
	}
	cmpRest := func(a, b slotOrd) int {
		if a.pfx != b.pfx {
			return cmp.Compare(a.pfx, b.pfx)
		}
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.minor, b.minor)
	}
	if len(majors) == 1 {
		slices.SortFunc(ords, cmpRest)
		return true
	}
	// Bucket b holds the b-th smallest major.
	sorted := slices.Clone(majors)
	slices.Sort(sorted)
	rank := make(map[int64]int, len(sorted))
	for r, m := range sorted {
		rank[m] = r
	}
	bucketOf := make([]int32, len(ords))
	pos := make([]int, len(sorted)+1)
	last, lastIdx = ords[0].major, rank[ords[0].major]
	for i := range ords {
		if m := ords[i].major; m != last {
			last, lastIdx = m, rank[m]
		}
		bucketOf[i] = int32(lastIdx)
		pos[lastIdx+1]++
	}
	for b := 1; b < len(pos); b++ {
		pos[b] += pos[b-1]
	}
	bounds := slices.Clone(pos)
	tmp := make([]slotOrd, len(ords))
	for i := range ords {
		b := bucketOf[i]
		tmp[pos[b]] = ords[i]
		pos[b]++
	}
	for b := 0; b+1 < len(bounds); b++ {
		slices.SortFunc(tmp[bounds[b]:bounds[b+1]], cmpRest)
	}
	copy(ords, tmp)
	return true
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
	if len(kids) < 2 {
		return
	}
	ords := make([]slotOrd, len(kids))
	for i, k := range kids {
		ords[i] = slotOrd{key: w.keys[k].bytes, slot: k}
	}
	sortOrds(ords)
	for i := range ords {
		kids[i] = ords[i].slot
	}
}

func slotZero(*slotInfo, *keyInfo) int64      { return 0 }
func slotStart(s *slotInfo, _ *keyInfo) int64 { return s.start }
func slotEnd(s *slotInfo, _ *keyInfo) int64   { return s.end }
func slotKG(_ *slotInfo, k *keyInfo) int64    { return int64(k.kg) }

// sortOutputOrder sorts slots by window start, key bytes and window end:
// the row order of Advance.
func (w *Window) sortOutputOrder(slots []int32) { w.sortSlots(slots, slotStart, slotEnd) }

// sortStateOrder sorts slots by key group, key bytes and window start: the
// row order of Snapshot and SnapshotDelta.
func (w *Window) sortStateOrder(slots []int32) { w.sortSlots(slots, slotKG, slotStart) }
