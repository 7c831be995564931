package spec

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, every failure is ErrInvalid, and a
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
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse("f.yaml", []byte(text), "/base")
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is not ErrInvalid: %v", err)
			}
			_ = err.Error()
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a pipeline Validate rejects: %v", err)
		}
	})
}
