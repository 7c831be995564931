package operators

import (
	"slices"
	"unsafe"
)

// keyArena holds a Window's encoded keys' bytes in large chunks that hold
// no pointers, so that a million keys are a few chunks the garbage
// collector never scans instead of a million string objects it marks on
// every cycle, referenced from a key table it would scan too (keyInfo then
// holds no pointer either).
//
// Bytes are written once and never changed: a chunk only grows within its
// capacity, so strings handed out over it (keyStr) stay valid as long as
// anyone holds them, also after the arena moved on. An evicted key's bytes
// become dead; when the dead bytes outweigh the live ones, compact copies
// the live keys into fresh chunks and the collector frees the old ones once
// no string refers to them.
type keyArena struct {
	chunks      [][]byte
	live, dead  int
	compactions int // times the Window compacted its keys (tests)
}

// keyChunk is the capacity of an arena chunk; a key longer than a quarter
// of it gets a chunk of its own.
const keyChunk = 1 << 20

// put stores b and returns where.
func (a *keyArena) put(b []byte) (chunk, off uint32) {
	a.live += len(b)
	n := len(a.chunks)
	if len(b) > keyChunk/4 {
		// A chunk of its own, full: the next small key starts a new one.
		a.chunks = append(a.chunks, append(make([]byte, 0, len(b)), b...))
		return uint32(n), 0
	}
	if n == 0 || cap(a.chunks[n-1])-len(a.chunks[n-1]) < len(b) {
		a.chunks = append(a.chunks, make([]byte, 0, keyChunk))
		n++
	}
	c := a.chunks[n-1]
	off = uint32(len(c))
	a.chunks[n-1] = append(c, b...) // within capacity: c's bytes do not move
	return uint32(n - 1), off
}

// str returns the n bytes at (chunk, off) as a string sharing the chunk.
func (a *keyArena) str(chunk, off, n uint32) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&a.chunks[chunk][off], int(n))
}

// putString stores b and returns it as a string sharing the arena.
func (a *keyArena) putString(b []byte) string {
	c, off := a.put(b)
	return a.str(c, off, uint32(len(b)))
}

// compact replaces the arena by a fresh one holding only what visit moves:
// visit calls move on every live string and keeps what it returns (the same
// bytes in the fresh arena). Strings over the old chunks stay valid while
// referenced.
func (a *keyArena) compact(visit func(move func(string) string)) {
	fresh := keyArena{compactions: a.compactions + 1}
	visit(func(s string) string { return fresh.putString([]byte(s)) })
	*a = fresh
}

// release marks n bytes dead.
func (a *keyArena) release(n uint32) {
	a.live -= int(n)
	a.dead += int(n)
}

// wasteful reports whether compacting would free more than it copies.
func (a *keyArena) wasteful() bool {
	return a.dead > keyChunk && a.dead > a.live
}

// keyTable holds a Window's key entries in pages of keyPage entries, so
// that it grows without copying: a slice of a million 64-byte entries
// grown by append would copy (and fault in) about five times its final
// size on the way. Only the last page grows, by append, up to keyPage (a
// Window of few keys holds a small page).
type keyTable struct {
	pages [][]keyInfo
	n     int
}

const (
	keyPageBits = 14
	keyPage     = 1 << keyPageBits // 1 MiB of keyInfo
)

// at returns the entry of key id kid (< len).
func (t *keyTable) at(kid int32) *keyInfo {
	return &t.pages[kid>>keyPageBits][kid&(keyPage-1)]
}

// len is the number of key ids.
func (t *keyTable) len() int { return t.n }

// push appends ki and returns its id.
func (t *keyTable) push(ki keyInfo) int32 {
	last := t.open(64)
	if len(*last) == cap(*last) {
		*last = slices.Grow(*last, min(keyPage, 2*cap(*last))-len(*last))
	}
	*last = append(*last, ki)
	t.n++
	return int32(t.n - 1)
}

// reserve makes room for n more entries, within the last page.
func (t *keyTable) reserve(n int) {
	last := t.open(min(max(n, 64), keyPage))
	*last = slices.Grow(*last, min(n, keyPage-len(*last)))
}

// open returns the last page, starting one of capacity c when there is
// none or it is full (every page but the last holds exactly keyPage).
func (t *keyTable) open(c int) *[]keyInfo {
	if len(t.pages) == 0 || len(t.pages[len(t.pages)-1]) == keyPage {
		t.pages = append(t.pages, make([]keyInfo, 0, c))
	}
	return &t.pages[len(t.pages)-1]
}
