package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// rejectSpec reads event_time, user_id and bytes; status is declared but
// read by nothing.
const rejectSpec = `
name: rj
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, status: int64, bytes: int64},
         event_time: event_time, watermark: {max_out_of_orderness: 0s}VALIDATE}
operators:
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 0s,
             aggregates: {n: "count()", total: "sum(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 1}
`

// jsonRows writes n rows; every k-th row (k > 0) has a float bytes value,
// and every row whose index is odd has a status that is not an integer.
func jsonRows(n, k int) []byte {
	var b strings.Builder
	for i := range n {
		bytes := fmt.Sprint(i)
		if k > 0 && i%k == 0 {
			bytes = fmt.Sprintf("%d.5", i)
		}
		status := "200"
		if i%2 == 1 {
			status = `"abc"`
		}
		fmt.Fprintf(&b, `{"event_time":"2024-01-01T00:%02d:%02dZ","user_id":"u%d","status":%s,"bytes":%s}`+"\n", i/60%60, i%60, i%3, status, bytes)
	}
	return []byte(b.String())
}

// TestStatusRejecting: a pipeline whose declared type does not match most
// rows is "rejecting" in status, naming the share; one with a few bad
// rows is not.
func TestStatusRejecting(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		every int
		want  string
	}{
		{"most rows", 1, engine.HealthRejecting},
		{"a few rows", 50, engine.HealthHealthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := fileEnv(t)
			e.put(t, "a.jsonl", jsonRows(200, tc.every))
			p := e.pipeline(t, strings.Replace(rejectSpec, "VALIDATE", "", 1))
			res := run(t, p, engine.Options{})
			st, err := engine.ReadStatus(ctx, p)
			must(t, err)
			if st.State != tc.want {
				t.Fatalf("status %s (%s) after %d rejected of %d, want %s", st.State, st.Health, res.RowsRejected, res.Rows+res.RowsRejected, tc.want)
			}
			if tc.want == engine.HealthRejecting && !strings.Contains(st.Health, "rejecting: 100% of the last epoch's rows (200 of 200) were rejected") {
				t.Fatalf("health %q", st.Health)
			}
		})
	}
}

// TestValidateAll: with source.validate: all a row whose unread column
// does not match its declared type is rejected; by default (used) it is
// accepted, since that column is never decoded.
func TestValidateAll(t *testing.T) {
	for _, tc := range []struct {
		validate string
		rejected int64
	}{
		{"", 0},
		{", validate: used", 0},
		{", validate: all", 100},
	} {
		e := fileEnv(t)
		e.put(t, "a.jsonl", jsonRows(200, 0))
		p := e.pipeline(t, strings.Replace(rejectSpec, "VALIDATE", tc.validate, 1))
		res := run(t, p, engine.Options{})
		if res.RowsRejected != tc.rejected {
			t.Fatalf("source%s: %d rows rejected, want %d", tc.validate, res.RowsRejected, tc.rejected)
		}
	}
	_, err := spec.Parse("p.yaml", []byte(strings.Replace(rejectSpec, "VALIDATE", ", validate: every", 1)), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "source.validate: want used") {
		t.Fatalf("validate: every: %v", err)
	}
}
