package spec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParse: Parse never panics nor takes a second, every failure is
// ErrInvalid and prints as short lines without control characters, and a
// pipeline it accepts passes Validate.
func FuzzParse(f *testing.F) {
	f.Add(designSketch)
	f.Add(base)
	f.Add(strings.Replace(base, "tumbling: 1m", "sliding: {size: 1m, slide: 7s}", 1))
	f.Add(strings.Replace(base, `- filter: "bytes > 0"`, `- project: {user_id: user_id, event_time: event_time, bytes: "bytes * 2"}`, 1))
	f.Add("name: &a [*a]\n")
	f.Add("a: &x {b: 1}\nc:\n  <<: *x\n")
	f.Add("--- \n---\nname: x\n")
	f.Add("name: x\nsource: {csv: {header: yes}, schema: {a: !!str int64}}\n")
	f.Add("a: " + strings.Repeat("[", 200))
	f.Add("a:\n" + strings.Repeat("- ", 100) + "x\n")
	f.Add("a: [x'y, [[[[1]]]]]\nb: |\n  [[[\n")
	f.Add("name: \"\\e[31m\\x00\"\nsource: {url: \"~/\\n\"}\n")
	f.Add("name: x\x00\xff\n")
	f.Fuzz(func(t *testing.T, text string) {
		start := time.Now()
		p, err := Parse("f.yaml", []byte(text), "/base")
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Parse took %v on %d bytes", d, len(text))
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if len(line) > 600 || strings.ContainsAny(line, "\r\x00") {
					t.Fatalf("error line of %d bytes: %q", len(line), line)
				}
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a pipeline Validate rejects: %v", err)
		}
	})
}
