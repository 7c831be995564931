package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MinMemoryLimit is the smallest state.memory_limit accepted (16 MiB).
const MinMemoryLimit = 16 << 20

// sizeUnits are the units ParseSize accepts (case-insensitive): SI units
// are powers of 1000, IEC units powers of 1024.
var sizeUnits = []struct {
	name string
	mult float64
}{
	{"b", 1},
	{"kb", 1e3}, {"k", 1e3}, {"kib", 1 << 10},
	{"mb", 1e6}, {"m", 1e6}, {"mib", 1 << 20},
	{"gb", 1e9}, {"g", 1e9}, {"gib", 1 << 30},
	{"tb", 1e12}, {"t", 1e12}, {"tib", 1 << 40},
}

// ParseSize parses a byte size: a number followed by an optional unit,
// "512MiB", "2GB", "1.5 GiB", "1048576". SI units (KB, MB, GB, TB) are
// powers of 1000, IEC units (KiB, MiB, GiB, TiB) powers of 1024; units are
// case-insensitive. The result is whole bytes (rounded down), at least 0.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	bad := func(why string) error {
		return fmt.Errorf("invalid size %s: %s (write a number of bytes with a unit, such as 512MiB or 2GB)", excerpt(s), why)
	}
	if num == "" {
		return 0, bad("no number")
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, bad("not a number")
	}
	mult := 0.0
	if unit == "" {
		mult = 1
	}
	for _, u := range sizeUnits {
		if u.name == unit {
			mult = u.mult
		}
	}
	if mult == 0 {
		return 0, bad(fmt.Sprintf("unknown unit %q (allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", strings.TrimSpace(t[i:])))
	}
	b := v * mult
	if b >= math.MaxInt64 {
		return 0, bad("too large")
	}
	return int64(b), nil
}

// FormatSize renders a byte count for people in the largest IEC unit it
// reaches: "512MiB", "3.5MiB", "100B".
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult {
			if n%u.mult == 0 {
				return strconv.FormatInt(n/u.mult, 10) + u.name
			}
			return strconv.FormatFloat(float64(n)/float64(u.mult), 'f', 1, 64) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// size reads a byte size: an integer (bytes) or a string ParseSize accepts.
func (d *decoder) size(n *node, path string) int64 {
	if n.kind != kindScalar || (n.sType != scalarInt && n.sType != scalarString) {
		d.c.decodeErr(n.pos, path, "expected a size like 512MiB or 2GB, got %s", n.describe())
		return 0
	}
	v, err := ParseSize(n.str)
	if err != nil {
		d.c.decodeErr(n.pos, path, "%s", err.Error())
		return 0
	}
	if v == 0 {
		d.c.decodeErr(n.pos, path, "must be above 0 (leave it out for the default, a quarter of the machine's memory)")
	}
	return v
}
