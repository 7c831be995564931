package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"512MiB", 512 << 20}, {"2GB", 2e9}, {"2gb", 2e9}, {"1.5 GiB", 3 << 29}, {"1048576", 1 << 20},
		{"64 KiB", 64 << 10}, {"3K", 3000}, {"1TiB", 1 << 40}, {" 100 B ", 100}, {"16M", 16e6},
	} {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, msg string }{
		{"", "no number"}, {"MiB", "no number"}, {"1.2.3MiB", "not a number"},
		{"2 gigs", `unknown unit "gigs"`}, {"5 mibs", `unknown unit "mibs"`}, {"99999999999TiB", "too large"},
	} {
		_, err := ParseSize(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "such as 512MiB or 2GB") {
			t.Errorf("ParseSize(%q) = %v, want an error saying %q and how to write a size", c.in, err, c.msg)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{512 << 20: "512MiB", 2 << 30: "2GiB", 100: "100B", 3<<20 + 1<<19: "3.5MiB", 1 << 10: "1KiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMemoryLimitSpec: state.memory_limit reads sizes as strings or bytes,
// defaults to 0 (the engine's machine-derived default) and names the line
// of a bad value.
func TestMemoryLimitSpec(t *testing.T) {
	base := strings.Replace(designSketch, "retain_epochs: 10}", "retain_epochs: 10,\n  memory_limit: LIMIT}", 1)
	p, err := Parse("clicks.yaml", []byte(designSketch), "/srv/p")
	if err != nil || p.State.MemoryLimit != 0 {
		t.Fatalf("no memory_limit: %d, %v; want 0 (the default)", p.State.MemoryLimit, err)
	}
	for in, want := range map[string]int64{"512MiB": 512 << 20, `"2GB"`: 2e9, "67108864": 64 << 20, "1.5GiB": 3 << 29} {
		p, err := Parse("clicks.yaml", []byte(strings.Replace(base, "LIMIT", in, 1)), "/srv/p")
		if err != nil || p.State.MemoryLimit != want {
			t.Errorf("memory_limit: %s gave %d, %v; want %d", in, p.State.MemoryLimit, err, want)
		}
	}
	for in, msg := range map[string]string{
		"lots":    `state.memory_limit: invalid size "lots": no number (write a number of bytes with a unit, such as 512MiB or 2GB)`,
		"2 gigs":  `state.memory_limit: invalid size "2 gigs": unknown unit "gigs" (allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB) (write a number of bytes with a unit, such as 512MiB or 2GB)`,
		"[1]":     `state.memory_limit: expected a size like 512MiB or 2GB, got a list`,
		"0":       `state.memory_limit: must be above 0 (leave it out for the default, a quarter of the machine's memory)`,
		"1MiB":    `state.memory_limit: must be at least 16MiB, got 1MiB`,
		"-5MiB":   `state.memory_limit: invalid size "-5MiB": no number (write a number of bytes with a unit, such as 512MiB or 2GB)`,
		"true":    `state.memory_limit: expected a size like 512MiB or 2GB, got a boolean`,
		"1.5":     `state.memory_limit: expected a size like 512MiB or 2GB, got a number`,
		"100000B": `state.memory_limit: must be at least 16MiB, got 97.7KiB`,
	} {
		text := strings.Replace(base, "LIMIT", in, 1)
		_, err := Parse("clicks.yaml", []byte(text), "/srv/p")
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("memory_limit: %s: %v, want ErrInvalid", in, err)
			continue
		}
		want := fmt.Sprintf("clicks.yaml:%s: %s", posOf(t, text, "memory_limit: |"+in), msg)
		if err.Error() != want {
			t.Errorf("memory_limit: %s:\n got %s\nwant %s", in, err, want)
		}
	}
}
