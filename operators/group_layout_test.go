package operators
import ("testing";"unsafe")
func TestKeyInfoSize(t *testing.T){ if n:=unsafe.Sizeof(keyInfo{}); n!=64 {t.Fatalf("keyInfo is %d bytes", n)}; if n:=unsafe.Sizeof(slotInfo{}); n!=32 {t.Fatalf("slotInfo is %d", n)} }
