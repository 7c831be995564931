package engine_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/store"
)

var featureRows = []string{
	`{"event_time":"2024-01-01T00:00:10Z","user_id":"u1","page":"a","bytes":5}`,
	`{"event_time":"2024-01-01T00:00:40Z","user_id":"u1","page":"b","bytes":7}`,
	`{"event_time":"2024-01-01T00:00:50Z","user_id":"u2","page":"a","bytes":1}`,
	`{"event_time":"2024-01-01T00:01:20Z","user_id":"u1","page":"a","bytes":3}`,
}

const featureSource = `
name: f
source: {type: files, url: "{{source}}", format: jsonl, event_time: event_time,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 3}
`

func featureRun(t *testing.T, ops string) []string {
	t.Helper()
	e := fileEnv(t)
	e.put(t, "a.jsonl", jsonl(featureRows...))
	p := e.pipeline(t, featureSource+"operators:\n"+ops)
	run(t, p, engine.Options{Drain: true})
	return committedRows(t, p)
}

// TestSlidingAllAggregates checks every aggregate on sliding windows, end to
// end through decode, partitioning over 3 subtasks and Parquet output.
func TestSlidingAllAggregates(t *testing.T) {
	got := featureRun(t, `
  - window: {key: [user_id], sliding: {size: 2m, slide: 1m},
             aggregates: {n: "count()", s: "sum(bytes)", lo: "min(bytes)", hi: "max(bytes)", mean: "avg(bytes)",
                          pages: "count_distinct(page)", fp: "first(page)", lp: "last(page)", lt: "max(event_time)"}}
`)
	want := []string{
		"user_id=u1,window_start=2023-12-31T23:59:00Z,window_end=2024-01-01T00:01:00Z,n=2,s=12,lo=5,hi=7,mean=6,pages=2,fp=a,lp=b,lt=2024-01-01T00:00:40Z",
		"user_id=u1,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:02:00Z,n=3,s=15,lo=3,hi=7,mean=5,pages=2,fp=a,lp=a,lt=2024-01-01T00:01:20Z",
		"user_id=u1,window_start=2024-01-01T00:01:00Z,window_end=2024-01-01T00:03:00Z,n=1,s=3,lo=3,hi=3,mean=3,pages=1,fp=a,lp=a,lt=2024-01-01T00:01:20Z",
		"user_id=u2,window_start=2023-12-31T23:59:00Z,window_end=2024-01-01T00:01:00Z,n=1,s=1,lo=1,hi=1,mean=1,pages=1,fp=a,lp=a,lt=2024-01-01T00:00:50Z",
		"user_id=u2,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:02:00Z,n=1,s=1,lo=1,hi=1,mean=1,pages=1,fp=a,lp=a,lt=2024-01-01T00:00:50Z",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSessionCompositeKey: session windows merge touching sessions; the key
// may have several columns.
func TestSessionCompositeKey(t *testing.T) {
	got := featureRun(t, `
  - window: {key: [user_id], session: {gap: 30s}, aggregates: {n: "count()", s: "sum(bytes)"}}
`)
	want := []string{
		"user_id=u1,window_start=2024-01-01T00:00:10Z,window_end=2024-01-01T00:01:10Z,n=2,s=12",
		"user_id=u1,window_start=2024-01-01T00:01:20Z,window_end=2024-01-01T00:01:50Z,n=1,s=3",
		"user_id=u2,window_start=2024-01-01T00:00:50Z,window_end=2024-01-01T00:01:20Z,n=1,s=1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("session rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = featureRun(t, `
  - window: {key: [user_id, page], tumbling: 1m, aggregates: {n: "count()"}}
`)
	want = []string{
		"user_id=u1,page=a,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,n=1",
		"user_id=u1,page=a,window_start=2024-01-01T00:01:00Z,window_end=2024-01-01T00:02:00Z,n=1",
		"user_id=u1,page=b,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,n=1",
		"user_id=u2,page=a,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,n=1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("composite-key rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestStatelessPipelineJSONLSink: filter and project with no window write
// the surviving rows, here as JSON lines.
func TestStatelessPipelineJSONLSink(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "a.jsonl", jsonl(featureRows...))
	p := e.pipeline(t, strings.Replace(featureSource, "format: parquet}", "format: jsonl}", 1)+`operators:
  - filter: "bytes > 2 and page == 'a'"
  - project: {u: "user_id", kb: "bytes * 2", event_time: "event_time"}
`)
	if r := run(t, p, engine.Options{}); r.RowsOut != 2 {
		t.Fatalf("rows out %d, want 2", r.RowsOut)
	}
	outs, err := engine.Outputs(context.Background(), p)
	if err != nil || len(outs) != 1 || !strings.HasSuffix(outs[0], ".jsonl") {
		t.Fatalf("outputs %v, %v", outs, err)
	}
	s, _ := store.Open(context.Background(), e.sink)
	defer s.Close()
	data, _, err := s.Get(context.Background(), outs[0])
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(data)), "\n")
	slices.Sort(got)
	want := []string{
		`{"u":"u1","kb":10,"event_time":"2024-01-01T00:00:10Z"}`,
		`{"u":"u1","kb":6,"event_time":"2024-01-01T00:01:20Z"}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("jsonl rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCSVSource: a CSV source with a header, columns in another order.
func TestCSVSource(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "a.csv", []byte("bytes,user_id,event_time,page\n5,u1,2024-01-01T00:00:10Z,a\n7,u1,2024-01-01T00:00:40Z,b\n"+
		"x,u1,2024-01-01T00:00:45Z,b\n1,u2,2024-01-01T00:00:50Z,a\n3,u1,2024-01-01T00:01:20Z,a\n"))
	p := e.pipeline(t, strings.Replace(featureSource, "format: jsonl,", "format: csv,", 1)+`operators:
  - window: {key: [user_id], tumbling: 1m, aggregates: {n: "count()", s: "sum(bytes)"}}
`)
	r := run(t, p, engine.Options{Drain: true})
	if r.RowsRejected != 1 {
		t.Fatalf("rejected %d, want 1 (bytes \"x\")", r.RowsRejected)
	}
	want := []string{
		"user_id=u1,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,n=2,s=12",
		"user_id=u1,window_start=2024-01-01T00:01:00Z,window_end=2024-01-01T00:02:00Z,n=1,s=3",
		"user_id=u2,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,n=1,s=1",
	}
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("csv rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIntegerSumExact: integer sums are exact in 128 bits: avg never
// overflows, a sum that comes back into range is right, and a sum beyond
// int64 is null rather than silently wrapped.
func TestIntegerSumExact(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "a.jsonl", jsonl(
		`{"event_time":"2024-01-01T00:00:10Z","user_id":"u1","page":"a","bytes":9000000000000000000}`,
		`{"event_time":"2024-01-01T00:00:11Z","user_id":"u1","page":"a","bytes":9000000000000000000}`,
		`{"event_time":"2024-01-01T00:00:12Z","user_id":"u1","page":"a","bytes":-9000000000000000000}`,
		`{"event_time":"2024-01-01T00:00:10Z","user_id":"u2","page":"a","bytes":9000000000000000000}`,
		`{"event_time":"2024-01-01T00:00:11Z","user_id":"u2","page":"a","bytes":9000000000000000000}`,
	))
	p := e.pipeline(t, featureSource+`operators:
  - window: {key: [user_id], tumbling: 1m, aggregates: {s: "sum(bytes)", a: "avg(bytes)"}}
`)
	run(t, p, engine.Options{Drain: true})
	want := []string{
		"user_id=u1,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,s=9000000000000000000,a=3e+18",
		"user_id=u2,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,s=(null),a=9e+18",
	}
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIntegerDivisionInWindow: kb: "bytes // 1000" is integer division
// (truncating toward zero, like DuckDB's //), not bytes followed by a comment
// (expr-lang's lexer reads // as one, which made max(kb) 99997 instead of 99).
func TestIntegerDivisionInWindow(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "a.jsonl", jsonl(
		`{"event_time":"2024-01-01T00:00:10Z","user_id":"u1","page":"a","bytes":99997}`,
		`{"event_time":"2024-01-01T00:00:20Z","user_id":"u1","page":"a","bytes":1999}`,
		`{"event_time":"2024-01-01T00:00:30Z","user_id":"u1","page":"a","bytes":-1999}`,
		`{"event_time":"2024-01-01T00:00:40Z","user_id":"u2","page":"a","bytes":-999}`,
	))
	p := e.pipeline(t, featureSource+`operators:
  - project: {user_id: user_id, event_time: event_time, kb: "bytes // 1000", r: "round(bytes, -3)", f: "floor(bytes / 1000)"}
  - window: {key: [user_id], tumbling: 1m, aggregates: {hi: "max(kb)", lo: "min(kb)", s: "sum(kb)", rs: "sum(r)", fl: "min(f)"}}
`)
	run(t, p, engine.Options{Drain: true})
	want := []string{
		"user_id=u1,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,hi=99,lo=-1,s=99,rs=100000,fl=-2",
		"user_id=u2,window_start=2024-01-01T00:00:00Z,window_end=2024-01-01T00:01:00Z,hi=0,lo=0,s=0,rs=-1000,fl=-1",
	}
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A comment is refused when the spec is compiled, naming the projection.
	e2 := fileEnv(t)
	e2.put(t, "a.jsonl", jsonl(featureRows...))
	p2 := e2.pipeline(t, featureSource+`operators:
  - project: {user_id: user_id, event_time: event_time, kb: "bytes /* kilo */"}
`)
	_, err := engine.Run(context.Background(), p2, engine.Options{Drain: true})
	if err == nil || !strings.Contains(err.Error(), `projection "kb" "bytes /* kilo */": /* is not allowed`) {
		t.Fatalf("comment in a projection: %v", err)
	}
}
