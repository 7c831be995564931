package operators

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// clicksSchema is the window input of testdata/pipelines/clicks.yaml.
var clicksSchema = arrow.NewSchema([]arrow.Field{
	{Name: "event_time", Type: eventTimeType},
	{Name: "user_id", Type: arrow.BinaryTypes.String},
	{Name: "page", Type: arrow.BinaryTypes.String},
	{Name: "bytes", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// TestStateFingerprintsPinned pins the state fingerprints of tumbling and
// session windows: their state layout is persisted (the v1 fixture under
// testdata/compat/v1 carries the tumbling one), so a change here makes every
// existing pipeline refuse its state. Change them only with a new state
// format version and a way to read the old one.
func TestStateFingerprintsPinned(t *testing.T) {
	aggs := mustAggs(t, "clicks", "count()", "total_bytes", "sum(bytes)")
	for _, c := range []struct {
		name string
		spec WindowSpec
		want string
	}{
		{"tumbling 1m", WindowSpec{Kind: Tumbling, Size: time.Minute, AllowedLateness: 30 * time.Second}, "v1-a4d0985696c0c453927ae2567d04343d"},
		{"session 5m", WindowSpec{Kind: Session, Gap: 5 * time.Minute}, "v1-dd84abca01ae43be760125f0007e3933"},
		// v2: sliced state (rows are slices). The v1 per-window layout of the
		// same spec was v1-be710d77934610478ae1c96056d0d54f.
		{"sliding 5m/1m", WindowSpec{Kind: Sliding, Size: 5 * time.Minute, Slide: time.Minute}, "v2-6b7c3faf859403d05c5c1c70ea4641fe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			spec.ID, spec.Keys, spec.EventTime, spec.Aggregates = "window", []string{"user_id"}, "event_time", aggs
			w, err := NewWindow(spec, clicksSchema, 128)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.StateFingerprint(); got != c.want {
				t.Errorf("StateFingerprint = %s, want %s", got, c.want)
			}
		})
	}
}

// TestSlidingV1StateRefused: a state of the per-window sliding layout (v1,
// one row per window [start, start+size)) is refused by Restore with a
// message that says why, besides having another fingerprint.
func TestSlidingV1StateRefused(t *testing.T) {
	aggs := mustAggs(t, "c", "count()", "sum", "sum(n)")
	// A tumbling window of the sliding size writes rows of the v1 sliding
	// layout: same state schema, windows of length size aligned to slide.
	v1 := newWin(t, WindowSpec{Kind: Tumbling, Size: 20 * us, Aggregates: aggs})
	runSteps(t, v1, []step{proc(row(3, "a", 1), row(25, "b", 2))})
	snap, err := v1.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	w := newWin(t, WindowSpec{Kind: Sliding, Size: 20 * us, Slide: 5 * us, Aggregates: aggs})
	err = w.Restore(snap, 0, 128, 0)
	if err == nil || !strings.Contains(err.Error(), "must hold slices, not windows") {
		t.Fatalf("restore of a per-window sliding state: %v", err)
	}
	if w.Len() != 0 {
		t.Fatalf("refused restore left %d states", w.Len())
	}
}
