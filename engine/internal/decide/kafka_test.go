package decide

import (
	"time"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"testing"

	"github.com/floe-dev/floe/store"
)

// TestKafkaRanges: a kafka source's listed ranges map to one input per
// partition, and max_records_per_epoch takes whole ranges up to the bound.
func TestKafkaRanges(t *testing.T) {
	c := Config{Kafka: true, MaxRecords: 100}
	if got := c.inputOf("clicks/3/100-200"); got != "clicks/3" {
		t.Fatalf("input = %q", got)
	}
	pend := []store.ObjectInfo{{Key: "t/0/0-40"}, {Key: "t/1/0-60"}, {Key: "t/0/40-90"}, {Key: "t/1/60-70"}}
	if n := c.Limit(pend); n != 2 {
		t.Fatalf("limit = %d, want 2 (40+60 = 100)", n)
	}
	if n := c.Limit(pend[2:]); n != 2 {
		t.Fatalf("limit = %d, want 2 (50+10)", n)
	}
	if n := (Config{Kafka: true, MaxRecords: 10}).Limit(pend); n != 1 {
		t.Fatalf("limit = %d, want 1 (one range even past the bound)", n)
	}
	if n := (Config{Kafka: true}).Limit(pend); n != 4 {
		t.Fatalf("no bound: limit = %d", n)
	}
}

// TestKafkaGraphSources: in the graph form a kafka source's partitions are
// inputs "<source>/<topic>/<partition>" under its name, a file source is
// one input; each source's watermark is the minimum over its own inputs
// (an idle partition stops holding it back), each kafka source's
// max_records_per_epoch bounds its own ranges, and a file source's files
// are not bound by it.
func TestKafkaGraphSources(t *testing.T) {
	p := &spec.Pipeline{Sources: []spec.NamedSource{
		{Name: "bids", Source: spec.Source{Type: spec.SourceKafka, Kafka: &spec.KafkaSource{MaxRecordsPerEpoch: 100},
			Watermark: spec.Watermark{MaxOutOfOrderness: time.Second, IdleTimeout: time.Minute}}},
		{Name: "auctions", Source: spec.Source{Watermark: spec.Watermark{MaxOutOfOrderness: 2 * time.Second}}},
	}}
	c := NewConfig(p)
	for key, want := range map[string]string{
		"bids/bids/3/100-200": "bids/bids/3",
		"bids/a/b/0/0-10":     "bids/a/b/0", // a topic with a slash
		"auctions/x/y.json":   "auctions",
	} {
		if got := c.inputOf(key); got != want {
			t.Errorf("inputOf(%q) = %q, want %q", key, got, want)
		}
	}
	pend := []store.ObjectInfo{{Key: "auctions/a1"}, {Key: "bids/t/0/0-60"}, {Key: "auctions/a2"},
		{Key: "bids/t/1/0-40"}, {Key: "auctions/a3"}, {Key: "bids/t/0/60-90"}, {Key: "auctions/a4"}}
	if n := c.Limit(pend); n != 5 {
		t.Fatalf("limit = %d, want 5 (bids: 60+40 = 100, the third range is past it; auctions unbounded)", n)
	}
	s := func(sec int64) int64 { return sec * 1e6 }
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	inputs := map[string]manifest.InputState{
		"bids/t/0": {MaxEventTime: s(100), LastActive: now},
		"bids/t/1": {MaxEventTime: s(50), LastActive: now.Add(-30 * time.Second)},
		"auctions": {MaxEventTime: s(80), LastActive: now},
	}
	names := []string{"auctions", "bids"}
	wm := c.InputWatermarks(inputs, 0, now, nil, 0, false, names)
	if wm["bids"] != s(49) || wm["auctions"] != s(78) {
		t.Fatalf("watermarks %v: want bids 49 s (its slower partition less 1 s), auctions 78 s", wm)
	}
	// partition 1 idle for longer than idle_timeout: it stops holding bids back
	later := now.Add(45 * time.Second)
	inputs["bids/t/0"] = manifest.InputState{MaxEventTime: s(100), LastActive: later}
	if wm := c.InputWatermarks(inputs, 0, later, nil, 0, false, names); wm["bids"] != s(99) {
		t.Fatalf("idle partition: bids watermark %d, want 99 s", wm["bids"])
	}
	// ... unless ranges of it are waiting
	waiting := []store.ObjectInfo{{Key: "bids/t/1/40-50"}}
	if wm := c.InputWatermarks(inputs, 0, later, waiting, 0, false, names); wm["bids"] != s(49) {
		t.Fatalf("idle partition with ranges waiting: bids watermark %d, want 49 s", wm["bids"])
	}
	if wm := c.InputWatermarksWaiting(inputs, 0, later, c.Waiting(waiting, 0), false, names); wm["bids"] != s(49) {
		t.Fatalf("InputWatermarksWaiting: bids watermark %d, want 49 s", wm["bids"])
	}
	// the combined watermark: the minimum over the sources
	if d := c.Decide(inputs, 0, nil, later, nil, 0, false, true); d.Watermark != s(78) {
		t.Fatalf("combined watermark %d, want 78 s", d.Watermark)
	}
}
