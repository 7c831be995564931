package engine_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/spec"
)

// prunedGraph reads auctions and bids that carry a pad column no stage
// reads: a dedup of the bids, an interval join with the auctions, a
// window over the join and a project of the join that reads an auction
// column renamed by the join's right prefix (both inputs have price).
const prunedGraph = `
name: pruned
sources:
  auctions:
    type: files
    url: "{{auctions}}"
    format: jsonl
    schema: {id: int64, seller: int64, category: int64, price: int64, ts: timestamp, pad: string}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 2s}
  bids:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp, pad: string}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 2s}
stages:
  - name: last-bid
    input: bids
    dedup: {key: [auction, bidder], keep: last, within: 10s}
  - name: bid-auction
    inputs: [last-bid, auctions]
    join: {left_on: [auction], right_on: [id], interval: {lower: 30s, upper: 5s}}
  - name: per-category
    input: bid-auction
    window: {key: [category], tumbling: 10s, aggregates: {bids: "count()", volume: "sum(price)"}}
  - name: slim
    input: bid-auction
    project: {auction: auction, seller: seller, reserve: right_price, over: "price - right_price"}
sinks:
  out: {input: per-category, type: files, url: "{{sink}}", format: jsonl}
  pairs: {input: slim, type: files, url: "{{late}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2}
`

// putPadded writes files files per stream of auctions and bids, each row
// with a 64-byte pad column.
func (g *graphEnv) putPadded(t *testing.T, files int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 9))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	pad := strings.Repeat("x", 64)
	aid := 0
	for f := range files {
		var al, bl []string
		for i := range 5 {
			ts := base.Add(time.Duration(f*10+i*2) * time.Second)
			al = append(al, fmt.Sprintf(`{"id":%d,"seller":%d,"category":%d,"price":%d,"ts":"%s","pad":"%s%d"}`,
				aid, aid%7, aid%4, 100+aid%50, ts.Format(time.RFC3339Nano), pad, aid))
			aid++
		}
		for i := range 40 {
			ts := base.Add(time.Duration(f*10)*time.Second + time.Duration(i*250+rng.IntN(1500))*time.Millisecond)
			a := max(0, aid-1-rng.IntN(8))
			bl = append(bl, fmt.Sprintf(`{"auction":%d,"bidder":%d,"price":%d,"ts":"%s","pad":"%s%d"}`,
				a, rng.IntN(5), 10+rng.IntN(1000), ts.Format(time.RFC3339Nano), pad, i))
		}
		for dir, lines := range map[string][]string{g.auctions: al, g.bids: bl} {
			name := filepath.Join(strings.TrimPrefix(dir, "file://"), fmt.Sprintf("f-%03d.jsonl", f))
			if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// stateColumns returns the columns of every state file stage wrote in
// epochs after epoch `after`, by file, and fails when there is none.
func stateColumns(t *testing.T, g *graphEnv, stage string, after int) map[string][]string {
	t.Helper()
	root := filepath.Join(strings.TrimPrefix(g.state, "file://"), "pruned")
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, "/op="+stage+"/") || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		var ep int
		for _, part := range strings.Split(p, "/") {
			fmt.Sscanf(part, "epoch=%d", &ep)
		}
		if ep <= after {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sc, err := formats.ParquetSchema(p, data)
		if err != nil {
			return err
		}
		for _, f := range sc.Fields() {
			out[p] = append(out[p], f.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("stage %s wrote no state file after epoch %d", stage, after)
	}
	return out
}

// checkColumns fails unless every file's columns include each of has and
// none of hasNot.
func checkColumns(t *testing.T, what string, files map[string][]string, has, hasNot []string) {
	t.Helper()
	for p, cols := range files {
		for _, c := range has {
			if !slices.Contains(cols, c) {
				t.Errorf("%s: %s has no column %s: %v", what, filepath.Base(filepath.Dir(p)), c, cols)
			}
		}
		for _, c := range hasNot {
			if slices.Contains(cols, c) {
				t.Errorf("%s: %s holds column %s, which no stage reads: %v", what, filepath.Base(filepath.Dir(p)), c, cols)
			}
		}
	}
}

func generations(t *testing.T, g *graphEnv) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(strings.TrimPrefix(g.state, "file://"), "pruned"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "gen=") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestGraphPruning: a new graph pipeline's keyed stages hold only the
// columns downstream reads (its join's and dedup's state files have no
// pad column and no column nobody reads), and its outputs equal those of
// the same pipeline run without pruning (the release before it), which
// holds every column. That pipeline, continued with pruning, keeps its
// generation and its wide state layout, and still writes the same rows.
func TestGraphPruning(t *testing.T) {
	const files, split = 10, 4

	narrow := newGraphEnv(t)
	narrow.putPadded(t, files)
	p := narrow.pipelineFrom(t, prunedGraph)
	run(t, p, engine.Options{UntilEpoch: split})
	run(t, p, engine.Options{Drain: true, Parallelism: 3})
	checkColumns(t, "new pipeline, join", stateColumns(t, narrow, "bid-auction", 0),
		[]string{"left.auction", "left.price", "left.ts", "right.id", "right.seller", "right.category", "right.price", "right.ts"},
		[]string{"left.pad", "right.pad", "left.bidder"})
	checkColumns(t, "new pipeline, dedup", stateColumns(t, narrow, "last-bid", 0),
		[]string{"auction", "bidder", "price", "ts"}, []string{"pad"})

	// The release before pruning: every column decoded and held.
	wide := newGraphEnv(t)
	wide.putPadded(t, files)
	pw := wide.pipelineFrom(t, prunedGraph)
	restore := engine.SetGraphPruning(false)
	run(t, pw, engine.Options{UntilEpoch: split})
	restore()
	checkColumns(t, "unpruned, join", stateColumns(t, wide, "bid-auction", 0),
		[]string{"left.pad", "right.pad", "left.bidder"}, nil)
	ref := newGraphEnv(t)
	ref.putPadded(t, files)
	restore = engine.SetGraphPruning(false)
	run(t, ref.pipelineFrom(t, prunedGraph), engine.Options{Drain: true})
	restore()

	want, wantPairs := graphSinkLines(t, ref.sink), graphSinkLines(t, ref.late)
	if len(want) < 5 || len(wantPairs) < 20 {
		t.Fatalf("reference wrote %d window rows and %d pairs", len(want), len(wantPairs))
	}
	allLines := func(g *graphEnv) []string { return append(graphSinkLines(t, g.sink), graphSinkLines(t, g.late)...) }
	want = append(want, wantPairs...)
	if got := allLines(narrow); !reflect.DeepEqual(got, want) {
		t.Fatalf("pruned outputs differ from the unpruned run's:\n%s", diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}

	// The pipeline created unpruned continues with pruning on: in its
	// generation, then rescaled (a new generation restoring its state);
	// its keyed stages keep the layout it recorded.
	run(t, pw, engine.Options{UntilEpoch: split + 2})
	if gens := generations(t, wide); !reflect.DeepEqual(gens, []string{"gen=000001"}) {
		t.Fatalf("the unpruned pipeline continued in generations %v, want its own (gen=1)", gens)
	}
	run(t, pw, engine.Options{Drain: true, Parallelism: 3})
	if gens := generations(t, wide); !reflect.DeepEqual(gens, []string{"gen=000001", "gen=000002"}) {
		t.Fatalf("the rescaled unpruned pipeline has generations %v, want gen=1 and gen=2", gens)
	}
	checkColumns(t, "continued unpruned pipeline, join", stateColumns(t, wide, "bid-auction", split),
		[]string{"left.pad", "right.pad", "left.bidder"}, nil)
	checkColumns(t, "continued unpruned pipeline, dedup", stateColumns(t, wide, "last-bid", split), []string{"pad"}, nil)
	if got := allLines(wide); !reflect.DeepEqual(got, want) {
		t.Fatalf("continued unpruned pipeline: outputs differ:\n%s", diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}

	// floe state and floe replay --verify read either layout: the one the
	// epoch's generation recorded.
	for _, c := range []struct {
		what string
		p    *spec.Pipeline
		text string
	}{{"new pipeline", p, narrow.spec(t, prunedGraph)}, {"unpruned pipeline", pw, wide.spec(t, prunedGraph)}} {
		v, err := engine.ReadState(t.Context(), c.p, engine.StateQuery{Epoch: split + 1, Op: "bid-auction"})
		if err != nil {
			t.Fatalf("%s: read state: %v", c.what, err)
		}
		if len(v.Ops) != 1 {
			t.Fatalf("%s: read state: %d operators, want the join", c.what, len(v.Ops))
		}
		for _, ep := range []int64{split + 1, split + 3} {
			vr, err := engine.VerifyReplay(t.Context(), c.p, engine.ReplayOptions{Epoch: ep})
			if err != nil {
				t.Fatalf("%s: replay epoch %d: %v", c.what, ep, err)
			}
			if !vr.Identical() {
				t.Fatalf("%s: replay of epoch %d differs from what it committed: %v %v", c.what, ep, vr.Diff, vr.Counters)
			}
			// A regression bundle of the epoch replays the same lines.
			dir := filepath.Join(t.TempDir(), "bundle")
			if _, err := engine.EmitTestBundle(t.Context(), c.p, engine.EmitOptions{ReplayOptions: engine.ReplayOptions{Epoch: ep}, Spec: []byte(c.text), Dir: dir}); err != nil {
				t.Fatalf("%s: emit a bundle of epoch %d: %v", c.what, ep, err)
			}
			got, _, err := engine.ReplayBundle(t.Context(), dir, engine.BundleReplayOptions{})
			if err != nil {
				t.Fatalf("%s: replay the bundle of epoch %d: %v", c.what, ep, err)
			}
			if !reflect.DeepEqual(got.Lines(), vr.Replay.Lines()) {
				t.Fatalf("%s: the bundle of epoch %d replays other lines than the epoch", c.what, ep)
			}
		}
	}
}

// TestGraphDictKeysRun: a graph window reading a Parquet source directly
// (dictionary keys) writes the rows the plain-key plan writes, and a
// pipeline started before graph pruning continues in its generation.
func TestGraphDictKeysRun(t *testing.T) {
	const text = `
name: gdict
sources:
  clicks: {type: files, url: "{{source}}", format: parquet, event_time: event_time,
           max_files_per_epoch: 1, watermark: {max_out_of_orderness: 0s}}
stages:
  - name: per-user
    input: clicks
    window: {key: [user_id], tumbling: 1m, aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sinks:
  out: {input: per-user, type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`
	gen := datagen.Options{Rows: 4000, Files: 6, Users: 200, Span: 20 * time.Minute, Seed: 3, Format: "parquet"}
	sinkRows := func(e *env) []string {
		var rows []string
		dir := strings.TrimPrefix(e.sink, "file://")
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") || strings.Contains(p, "_rejected") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rows = append(rows, parquetRows(t, data)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(rows)
		return rows
	}
	ref := fileEnv(t)
	genData(t, ref, gen)
	restore := engine.SetGraphPruning(false)
	run(t, ref.pipeline(t, text), engine.Options{Drain: true})
	restore()
	want := sinkRows(ref)
	if len(want) < 100 {
		t.Fatalf("reference wrote %d rows", len(want))
	}

	e := fileEnv(t)
	genData(t, e, gen)
	p := e.pipeline(t, text)
	restore = engine.SetGraphPruning(false)
	run(t, p, engine.Options{UntilEpoch: 3}) // the release before: plain keys
	restore()
	run(t, p, engine.Options{UntilEpoch: 5})
	run(t, p, engine.Options{Drain: true, Parallelism: 3})
	if got := sinkRows(e); !reflect.DeepEqual(got, want) {
		t.Fatalf("dictionary keys: %d rows, want %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	ents, err := os.ReadDir(filepath.Join(strings.TrimPrefix(e.state, "file://"), "gdict"))
	if err != nil {
		t.Fatal(err)
	}
	var gens []string
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), "gen=") {
			gens = append(gens, d.Name())
		}
	}
	if !reflect.DeepEqual(gens, []string{"gen=000001", "gen=000002"}) {
		t.Fatalf("generations %v: the plan changed with dictionary keys (want gen 1, then 2 for the rescale)", gens)
	}
}
