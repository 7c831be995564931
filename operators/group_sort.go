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
	lcp := -1
	var first string
	for i, s := range slots {
		info := &w.slots[s]
		ki := &w.keys[info.kid]
		ords[i] = slotOrd{major: major(info, ki), minor: minor(info, ki), key: ki.bytes, slot: s}
		if lcp < 0 {
			first, lcp = ki.bytes, len(ki.bytes)
			continue
		}
		k := ki.bytes
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
	slices.SortFunc(ords, cmpSlotOrd)
	for i := range ords {
		slots[i] = ords[i].slot
	}
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
