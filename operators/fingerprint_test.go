package operators

import (
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
