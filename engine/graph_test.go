package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// auctionGraph is a small auction pipeline in the graph form: two sources,
// a windowed join, a window over the join, a top-n over that window, and a
// keep-last dedup feeding nothing but state (it is read by the join).
const auctionGraph = `
name: auctions
sources:
  auctions:
    type: files
    url: "{{auctions}}"
    format: jsonl
    schema: {id: int64, seller: int64, category: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 2s}
  bids:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 2s}
stages:
  - name: last-bid
    input: bids
    dedup: {key: [auction, bidder], keep: last, within: 10s}
  - name: bid-auction
    inputs: [last-bid, auctions]
    join:
      left_on: [auction]
      right_on: [id]
      window: {tumbling: 10s}
    late_url: "{{late}}/join"
  - name: per-category
    input: bid-auction
    window: {key: [category], tumbling: 10s, aggregates: {bids: "count()", volume: "sum(price)"}}
  - name: top
    input: per-category
    top_n: {n: 2, order_by: [volume desc, category]}
sinks:
  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2}
`

type graphEnv struct {
	dir                               string
	auctions, bids, sink, state, late string
}

func newGraphEnv(t *testing.T) *graphEnv {
	d := t.TempDir()
	g := &graphEnv{dir: d}
	for _, x := range []struct {
		p   *string
		sub string
	}{{&g.auctions, "in/auctions"}, {&g.bids, "in/bids"}, {&g.sink, "out"}, {&g.state, "state"}, {&g.late, "late"}} {
		p := filepath.Join(d, x.sub)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		*x.p = fileURL(p)
	}
	return g
}

func (g *graphEnv) spec(t *testing.T, tmpl string) string {
	return strings.NewReplacer("{{auctions}}", g.auctions, "{{bids}}", g.bids, "{{sink}}", g.sink, "{{state}}", g.state, "{{late}}", g.late).Replace(tmpl)
}

// auctionFiles returns n files per stream ("auctions/f-000.jsonl", ...):
// auctions of 4 categories, bids on them (several per bidder), in
// event-time order with bounded disorder.
func auctionFiles(files int) map[string][]byte {
	rng := rand.New(rand.NewPCG(7, 7))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	out := map[string][]byte{}
	aid := 0
	for f := range files {
		var al, bl []string
		for i := range 5 {
			ts := base.Add(time.Duration(f*10+i*2) * time.Second)
			al = append(al, fmt.Sprintf(`{"id":%d,"seller":%d,"category":%d,"ts":"%s"}`, aid, aid%7, aid%4, ts.Format(time.RFC3339Nano)))
			aid++
		}
		for i := range 40 {
			ts := base.Add(time.Duration(f*10)*time.Second + time.Duration(i*250+rng.IntN(1500))*time.Millisecond)
			a := max(0, aid-1-rng.IntN(8))
			bl = append(bl, fmt.Sprintf(`{"auction":%d,"bidder":%d,"price":%d,"ts":"%s"}`, a, rng.IntN(5), 10+rng.IntN(1000), ts.Format(time.RFC3339Nano)))
		}
		out[fmt.Sprintf("auctions/f-%03d.jsonl", f)] = []byte(strings.Join(al, "\n") + "\n")
		out[fmt.Sprintf("bids/f-%03d.jsonl", f)] = []byte(strings.Join(bl, "\n") + "\n")
	}
	return out
}

// putAuctions writes auctionFiles(files) into the env's source folders.
func (g *graphEnv) putAuctions(t *testing.T, files int) {
	for name, data := range auctionFiles(files) {
		stream, file, _ := strings.Cut(name, "/")
		dir := g.auctions
		if stream == "bids" {
			dir = g.bids
		}
		if err := os.WriteFile(filepath.Join(strings.TrimPrefix(dir, "file://"), file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func graphSinkLines(t *testing.T, sinkURL string) []string {
	t.Helper()
	dir := strings.TrimPrefix(sinkURL, "file://")
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") || strings.Contains(p, "_rejected") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestGraphPipeline(t *testing.T) {
	ref := newGraphEnv(t)
	ref.putAuctions(t, 12)
	p := ref.pipelineFrom(t, auctionGraph)
	res := run(t, p, engine.Options{Drain: true})
	want := graphSinkLines(t, ref.sink)
	t.Logf("reference: %d epochs, %d rows in, %d out, %d late", res.Epochs, res.Rows, res.RowsOut, res.RowsLate)
	if len(want) < 10 {
		t.Fatalf("reference wrote %d rows:\n%s", len(want), strings.Join(want, "\n"))
	}
	for _, l := range want[:3] {
		t.Log(l)
	}

	// The same input, run a few epochs at a time across rescales 2 -> 5 -> 3.
	e := newGraphEnv(t)
	e.putAuctions(t, 12)
	pe := e.pipelineFrom(t, auctionGraph)
	run(t, pe, engine.Options{UntilEpoch: 2})
	run(t, pe, engine.Options{UntilEpoch: 4, Parallelism: 5})
	run(t, pe, engine.Options{Drain: true, Parallelism: 3})
	if got := graphSinkLines(t, e.sink); !reflect.DeepEqual(got, want) {
		t.Fatalf("graph across rescales: %d rows, want %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
}

// TestGraphCrashSweep crashes a graph run at every state-store call, then
// recovers: the rows equal the uninterrupted run's.
func TestGraphCrashSweep(t *testing.T) {
	ref := newGraphEnv(t)
	ref.putAuctions(t, 8)
	run(t, ref.pipelineFrom(t, auctionGraph), engine.Options{Drain: true})
	want := graphSinkLines(t, ref.sink)
	for at := 0; ; at++ {
		e := newGraphEnv(t)
		e.putAuctions(t, 8)
		p := e.pipelineFrom(t, auctionGraph)
		run(t, p, engine.Options{UntilEpoch: 2})
		_, err := engine.Run(context.Background(), p, engine.Options{Drain: true, Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(n string, s store.Store) store.Store {
				if n != "state" {
					return s
				}
				return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
			}})
		if err == nil {
			t.Logf("crashed at each of %d state-store calls", at)
			if at < 20 {
				t.Fatalf("only %d state-store calls: the sweep exercises too little", at)
			}
			break
		}
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("at %d: %v", at, err)
		}
		run(t, p, engine.Options{Drain: true})
		if got := graphSinkLines(t, e.sink); !reflect.DeepEqual(got, want) {
			t.Fatalf("crash at state call %d: %d rows, want %d\n%s", at, len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
		}
	}
}

func (g *graphEnv) pipelineFrom(t *testing.T, tmpl string) *spec.Pipeline {
	t.Helper()
	p, err := spec.Parse("graph.yaml", []byte(g.spec(t, tmpl)), g.dir)
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return p
}

// TestGraphWindowOverWindow: a window reading a window's results puts each
// result at window_end - 1µs: a minute ending on the hour counts in the
// hour before.
func TestGraphWindowOverWindow(t *testing.T) {
	e := newGraphEnv(t)
	lines := []string{
		`{"id":1,"seller":1,"category":1,"ts":"2024-01-01T10:59:30Z"}`,
		`{"id":2,"seller":2,"category":1,"ts":"2024-01-01T10:59:40Z"}`,
		`{"id":3,"seller":1,"category":1,"ts":"2024-01-01T11:00:00Z"}`,
		`{"id":4,"seller":3,"category":1,"ts":"2024-01-01T13:00:00Z"}`,
	}
	if err := os.WriteFile(filepath.Join(strings.TrimPrefix(e.auctions, "file://"), "a.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const spec = `
name: hours
sources:
  auctions:
    type: files
    url: "{{auctions}}"
    format: jsonl
    schema: {id: int64, seller: int64, category: int64, ts: timestamp}
    event_time: ts
stages:
  - {name: per-minute, input: auctions, window: {key: [category, seller], tumbling: 1m, aggregates: {n: "count()"}}}
  - {name: per-hour, input: per-minute, window: {key: [category], tumbling: 1h, aggregates: {sellers: "count()", auctions: "sum(n)"}}}
sinks:
  out: {input: per-hour, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}"}
`
	run(t, e.pipelineFrom(t, spec), engine.Options{Drain: true})
	got := graphSinkLines(t, e.sink)
	want := []string{
		`{"category":1,"window_start":"2024-01-01T10:00:00Z","window_end":"2024-01-01T11:00:00Z","sellers":2,"auctions":2}`,
		`{"category":1,"window_start":"2024-01-01T11:00:00Z","window_end":"2024-01-01T12:00:00Z","sellers":1,"auctions":1}`,
		`{"category":1,"window_start":"2024-01-01T13:00:00Z","window_end":"2024-01-01T14:00:00Z","sellers":1,"auctions":1}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("window over window:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// TestGraphRescaleS3 runs the auction graph on S3 (versitygw) a few epochs
// at a time across rescales 2 -> 5 -> 3: the committed rows equal one
// uninterrupted run's on file://.
func TestGraphRescaleS3(t *testing.T) {
	ref := newGraphEnv(t)
	ref.putAuctions(t, 10)
	run(t, ref.pipelineFrom(t, strings.Replace(auctionGraph, "format: jsonl}", "format: parquet}", 1)), engine.Options{Drain: true})
	want := committedGraphRows(t, ref.pipelineFrom(t, strings.Replace(auctionGraph, "format: jsonl}", "format: parquet}", 1)), ref.sink)

	srv := s3test.Shared(t)
	u, err := url.Parse(srv.NewBucket(t))
	if err != nil {
		t.Fatal(err)
	}
	b := u.Host
	g := &graphEnv{dir: t.TempDir(), auctions: srv.URL(b, "in/auctions"), bids: srv.URL(b, "in/bids"), sink: srv.URL(b, "out"),
		state: srv.URL(b, "state"), late: srv.URL(b, "late/join")}
	ctx := context.Background()
	for name, data := range auctionFiles(10) {
		stream, file, _ := strings.Cut(name, "/")
		st, err := store.Open(ctx, srv.URL(b, "in/"+stream))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, file, data, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	p := g.pipelineFrom(t, strings.NewReplacer("format: jsonl}", "format: parquet}", `"{{late}}/join"`, `"{{late}}"`).Replace(auctionGraph))
	run(t, p, engine.Options{UntilEpoch: 2})
	run(t, p, engine.Options{UntilEpoch: 4, Parallelism: 5})
	res := run(t, p, engine.Options{Drain: true, Parallelism: 3})
	got := committedGraphRows(t, p, g.sink)
	if len(want) < 10 || !reflect.DeepEqual(got, want) {
		t.Fatalf("graph on S3 across rescales: %d rows, want %d (last run %+v)\n%s", len(got), len(want), res,
			diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	if rep, err := engine.Verify(ctx, p); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// committedGraphRows reads every committed output (engine.Outputs) of a
// graph pipeline with a Parquet sink at sinkURL.
func committedGraphRows(t *testing.T, p *spec.Pipeline, sinkURL string) []string {
	t.Helper()
	return committedGraph(t, p, sinkURL, func(data []byte) []string { return parquetRows(t, data) })
}

// committedGraph reads every committed output (engine.Outputs: what an
// exactly-once reader reads) of a graph pipeline's sink at sinkURL, each
// file's rows by decode, sorted.
func committedGraph(t *testing.T, p *spec.Pipeline, sinkURL string, decode func([]byte) []string) []string {
	t.Helper()
	ctx := context.Background()
	outs, err := engine.Outputs(ctx, p)
	if err != nil {
		t.Fatalf("outputs: %v", err)
	}
	sink, err := store.Open(ctx, sinkURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var rows []string
	for _, o := range outs {
		data, _, err := sink.Get(ctx, o)
		if err != nil {
			t.Fatalf("committed output %s: %v", o, err)
		}
		rows = append(rows, decode(data)...)
	}
	sort.Strings(rows)
	return rows
}

// TestGraphSavepointAndRollback: a savepoint of a graph pipeline taken
// mid-run restores to the rows of an uninterrupted run, and so does a
// rollback to a retained epoch.
func TestGraphSavepointAndRollback(t *testing.T) {
	ref := newGraphEnv(t)
	ref.putAuctions(t, 10)
	run(t, ref.pipelineFrom(t, auctionGraph), engine.Options{Drain: true})
	want := graphSinkLines(t, ref.sink)

	e := newGraphEnv(t)
	e.putAuctions(t, 10)
	p := e.pipelineFrom(t, auctionGraph)
	run(t, p, engine.Options{UntilEpoch: 3})
	if _, err := engine.CreateSavepoint(context.Background(), p, "mid", 0); err != nil {
		t.Fatalf("savepoint: %v", err)
	}
	run(t, p, engine.Options{UntilEpoch: 5})
	res := run(t, p, engine.Options{FromSavepoint: "mid", Drain: true, Parallelism: 3})
	if res.Generation < 2 {
		t.Fatalf("restore from a savepoint did not start a new generation: %+v", res)
	}
	got := committedGraphLines(t, p, e.sink)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("graph restored from a savepoint: %d rows, want %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	// Epoch 4 of generation 1 was abandoned by the savepoint restore (the
	// restored generation continued at epoch 6): a rollback refuses it.
	if _, err := engine.Run(context.Background(), p, engine.Options{RollbackTo: 4}); err == nil || !strings.Contains(err.Error(), "epoch 4 is not on the head's lineage") ||
		!strings.Contains(err.Error(), "abandoned by a restore from savepoint mid") {
		t.Fatalf("rollback to an abandoned epoch: %v", err)
	}
	res = run(t, p, engine.Options{RollbackTo: 8, Drain: true})
	if got := committedGraphLines(t, p, e.sink); !reflect.DeepEqual(got, want) {
		t.Fatalf("graph rolled back to epoch 8 (%+v): %d rows, want %d\n%s", res, len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
}

// committedGraphLines reads the committed JSON-lines outputs of a graph
// pipeline.
func committedGraphLines(t *testing.T, p *spec.Pipeline, sinkURL string) []string {
	t.Helper()
	return committedGraph(t, p, sinkURL, func(data []byte) []string {
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				rows = append(rows, l)
			}
		}
		return rows
	})
}

// TestUserFunctions: a Go function registered in Options.Functions is
// callable from a pipeline's expressions (linear and graph form); without
// it the run is refused naming the function.
func TestUserFunctions(t *testing.T) {
	fns := &expr.Functions{}
	if err := fns.Register("band", func(price int64) string {
		switch {
		case price < 100:
			return "low"
		case price < 500:
			return "mid"
		}
		return "high"
	}); err != nil {
		t.Fatal(err)
	}
	const tmpl = `
name: bands
sources:
  bids:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
stages:
  - {name: banded, input: bids, project: {auction: auction, price: price, band: "band(price)"}}
  - {name: cheap, input: banded, filter: "band(price) == 'low'"}
sinks:
  out: {input: cheap, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}"}
`
	e := newGraphEnv(t)
	e.putAuctions(t, 2)
	p := e.pipelineFrom(t, tmpl)
	if _, err := engine.Run(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), "band") {
		t.Fatalf("run without the function: %v, want an error naming band", err)
	}
	res := run(t, p, engine.Options{Functions: fns})
	got := graphSinkLines(t, e.sink)
	if res.RowsOut == 0 || int64(len(got)) != res.RowsOut {
		t.Fatalf("%d rows out, %d lines", res.RowsOut, len(got))
	}
	for _, l := range got {
		if !strings.Contains(l, `"band":"low"`) {
			t.Fatalf("row %s: want band low", l)
		}
	}
}

// TestGraphStageWatermarks: a stage's watermark is that of the sources it
// reads: a window over the fast source advances while the slow source
// holds back only the stages that read it.
func TestGraphStageWatermarks(t *testing.T) {
	e := newGraphEnv(t)
	for name, data := range auctionFiles(10) {
		stream, file, _ := strings.Cut(name, "/")
		dir := e.auctions
		if stream == "bids" {
			if file >= "f-002" {
				continue // the bids stop after 20 s; the auctions go on to 100 s
			}
			dir = e.bids
		}
		if err := os.WriteFile(filepath.Join(strings.TrimPrefix(dir, "file://"), file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const tmpl = `
name: stage-watermarks
sources:
  auctions:
    type: files
    url: "{{auctions}}"
    format: jsonl
    schema: {id: int64, seller: int64, category: int64, ts: timestamp}
    event_time: ts
  bids:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
stages:
  - {name: a-win, input: auctions, window: {key: [category], tumbling: 10s, aggregates: {n: "count()"}}}
  - {name: b-win, input: bids, window: {key: [auction], tumbling: 10s, aggregates: {n: "count()"}}}
  - name: both
    inputs: [a-win, b-win]
    join: {left_on: [category], right_on: [auction], interval: {lower: 10s, upper: 10s}}
sinks:
  out: {input: both, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}"}
`
	p := e.pipelineFrom(t, tmpl)
	run(t, p, engine.Options{})
	head := headChain(t, p, 1)[0]
	emitted := map[string]int64{}
	for _, op := range head.Operators {
		emitted[op.ID] = op.EmittedThrough
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	a, b, both := emitted["a-win"]-base, emitted["b-win"]-base, emitted["both"]-base
	t.Logf("watermarks after the run: a-win %ds, b-win %ds, both %ds (pipeline %ds)", a/1e6, b/1e6, both/1e6, (head.Watermark-base)/1e6)
	if a < 90e6 || b > 25e6 || both > b {
		t.Fatalf("stage watermarks a-win %d, b-win %d, both %d µs after the start: want a-win near the auctions' 98 s, b-win and the join held by the bids' 20 s", a, b, both)
	}
}

// TestGraphReplay: every epoch of a graph pipeline replays to exactly the
// rows and counters it committed, at another parallelism too; a lookup
// whose table changed since is refused rather than replayed inexactly.
func TestGraphReplay(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 8)
	p := e.pipelineFrom(t, auctionGraph)
	res := run(t, p, engine.Options{Drain: true})
	for ep := res.FirstEpoch; ep <= res.LastEpoch; ep++ {
		for _, par := range []int{0, 3} {
			v, err := engine.VerifyReplay(context.Background(), p, engine.ReplayOptions{Epoch: ep, Parallelism: par})
			if err != nil {
				t.Fatalf("replay epoch %d at parallelism %d: %v", ep, par, err)
			}
			if !v.Identical() {
				t.Fatalf("replay epoch %d at parallelism %d differs: %+v %v", ep, par, v.Diff, v.Counters)
			}
		}
	}

	// A lookup stage: its table version is recorded; changing the table
	// makes a replay refuse.
	tableDir := filepath.Join(e.dir, "in/sellers")
	if err := os.MkdirAll(tableDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for s := range 7 {
		rows = append(rows, fmt.Sprintf(`{"seller":%d,"region":"r%d"}`, s, s%3))
	}
	if err := os.WriteFile(filepath.Join(tableDir, "sellers.jsonl"), []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lookup := strings.Replace(auctionGraph, "stages:\n", `stages:
  - name: regions
    input: auctions
    lookup: {url: "`+fileURL(tableDir)+`", format: jsonl, schema: {seller: int64, region: string}, on: [seller]}
`, 1)
	lookup = strings.Replace(lookup, "inputs: [last-bid, auctions]", "inputs: [last-bid, regions]", 1)
	lookup = strings.Replace(lookup, "name: auctions\nsources", "name: auctions\nsources", 1)
	l := newGraphEnv(t)
	l.putAuctions(t, 4)
	lp := l.pipelineFrom(t, strings.Replace(lookup, "name: auctions\n", "name: auctions-lookup\n", 1))
	lres := run(t, lp, engine.Options{Drain: true})
	if v, err := engine.VerifyReplay(context.Background(), lp, engine.ReplayOptions{Epoch: lres.FirstEpoch}); err != nil || !v.Identical() {
		t.Fatalf("replay of a lookup epoch: %v %+v", err, v)
	}
	if err := os.WriteFile(filepath.Join(tableDir, "sellers.jsonl"), []byte(strings.Join(rows[:5], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.VerifyReplay(context.Background(), lp, engine.ReplayOptions{Epoch: lres.FirstEpoch}); err == nil || !strings.Contains(err.Error(), "lookup table version") {
		t.Fatalf("replay after the lookup table changed: %v, want a refusal naming the table version", err)
	}
}

// TestGraphMergeDeltas: a graph window stage with count_distinct, one file
// per epoch and one epoch per run, so that every run restores the stage
// from its base and deltas, merges among them (bids come back to the open
// windows of recent auctions); the sink ends equal to one drained run's,
// also after a rescale.
func TestGraphMergeDeltas(t *testing.T) {
	const spec = `
name: bidders
sources:
  bids:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 2s}
stages:
  - {name: per-auction, input: bids, window: {key: [auction], tumbling: 1h, aggregates: {bids: "count()", bidders: "count_distinct(bidder)", top: "max(price)"}}}
sinks:
  out: {input: per-auction, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2}
`
	ref := newGraphEnv(t)
	ref.putAuctions(t, 24)
	run(t, ref.pipelineFrom(t, spec), engine.Options{Drain: true})
	want := graphSinkLines(t, ref.sink)
	if len(want) < 50 {
		t.Fatalf("reference has %d windows; too few to keep most unchanged per epoch", len(want))
	}

	e := newGraphEnv(t)
	e.putAuctions(t, 24)
	p := e.pipelineFrom(t, spec)
	merges := 0
	for ep := int64(1); ep <= 16; ep++ {
		run(t, p, engine.Options{UntilEpoch: ep}) // restores what the last run committed
		for _, op := range headChain(t, p, 1)[0].Operators {
			for _, d := range op.Deltas {
				if d.Kind == manifest.DeltaMerges && ep < 16 {
					merges++
				}
			}
		}
	}
	if merges == 0 {
		t.Fatal("no run restored a merges delta of the stage")
	}
	run(t, p, engine.Options{Drain: true, Parallelism: 3})
	if got := graphSinkLines(t, e.sink); !reflect.DeepEqual(got, want) {
		t.Fatalf("run by run: %d rows, one drained run: %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
}
