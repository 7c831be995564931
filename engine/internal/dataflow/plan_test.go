package dataflow

import (
	"testing"

	"github.com/floe-dev/floe/spec"
)

// TestProjectionPushdown: the plan decodes only the source columns its
// operators read.
func TestProjectionPushdown(t *testing.T) {
	for _, tc := range []struct {
		ops  string
		want []string
	}{
		{`[{window: {key: [user_id], tumbling: 1m, aggregates: {n: "count()", b: "sum(bytes)"}}}]`, []string{"event_time", "user_id", "bytes"}},
		{`[{filter: "page != 'x'"}, {window: {key: [user_id], tumbling: 1m, aggregates: {n: "count()"}}}]`, []string{"event_time", "user_id", "page"}},
		{`[{filter: "bytes > 0"}]`, []string{"event_time", "user_id", "page", "bytes", "extra"}},
		{`[{project: {u: "user_id", event_time: "event_time"}}]`, []string{"event_time", "user_id"}},
	} {
		p, err := spec.Parse("p.yaml", []byte(`name: p
source: {type: files, url: "in", format: jsonl, event_time: event_time,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64, extra: float64}}
operators: `+tc.ops+`
sink: {type: files, url: "out", format: parquet}
state: {url: "st"}
`), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		src, err := SourceSchema(p)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := Compile(p, src)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range pl.Source.Fields() {
			got = append(got, f.Name)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: decodes %v, want %v", tc.ops, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%s: decodes %v, want %v", tc.ops, got, tc.want)
			}
		}
		full, _ := CompileOn(p, src)
		if pl.Hash != full.Hash {
			t.Fatalf("%s: pruning changed the plan hash", tc.ops)
		}
	}
}
