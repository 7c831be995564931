package decide

import (
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
