package decide

import (
	"testing"
	"time"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// A graph's sources each keep their own idle_timeout: a source with none
// holds the watermark back however long it is quiet, while one with a
// timeout stops holding it once quiet that long. (The combined source took
// the smallest timeout for every source.)
func TestWatermarkPerSourceIdleTimeout(t *testing.T) {
	p := &spec.Pipeline{Sources: []spec.NamedSource{
		{Name: "bids", Source: spec.Source{Watermark: spec.Watermark{IdleTimeout: time.Minute}}},
		{Name: "people", Source: spec.Source{}},
	}}
	c := NewConfig(p)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	long := now.Add(-time.Hour)
	in := func(maxTS int64, last time.Time) manifest.InputState {
		return manifest.InputState{MaxEventTime: maxTS, LastActive: last}
	}
	// people quiet for an hour with no timeout: it holds the watermark.
	wm := c.watermark(map[string]manifest.InputState{"bids": in(5000, now), "people": in(1000, long)}, 0, now, nil)
	if wm != 1000 {
		t.Fatalf("watermark %d, want 1000 (people has no idle_timeout and holds it)", wm)
	}
	// bids quiet for an hour with a 1m timeout: it no longer holds it.
	wm = c.watermark(map[string]manifest.InputState{"bids": in(1000, long), "people": in(5000, now)}, 0, now, nil)
	if wm != 5000 {
		t.Fatalf("watermark %d, want 5000 (bids is idle past its 1m timeout)", wm)
	}
}
