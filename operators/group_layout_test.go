package operators

import (
	"testing"
	"unsafe"
)

// TestEntryLayout pins the sizes the window's lookups are tuned for: a key
// entry is one 64-byte cache line (its short key inline), a slot half of one.
func TestEntryLayout(t *testing.T) {
	if n := unsafe.Sizeof(keyInfo{}); n != 64 {
		t.Errorf("keyInfo is %d bytes, want 64 (one cache line)", n)
	}
	if n := unsafe.Sizeof(slotInfo{}); n != 32 {
		t.Errorf("slotInfo is %d bytes, want 32", n)
	}
}
