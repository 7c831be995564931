package engine_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

var regenGraphFixture = flag.Bool("regen-graph-fixture", false,
	"rewrite testdata/compat/graph-v1 with the current code (only with a deliberate state-format version change; see its README)")

// graphFixtureDir holds a graph pipeline's spec, its input, and the state,
// sink and late rows a run of it left after graphFixtureStop epochs.
const graphFixtureDir = "../testdata/compat/graph-v1"

// graphFixtureStop is the epoch the fixture's run stopped at, of 21:
// every keyed stage then holds open state (windows, join buffers, dedup
// scopes, top_n groups).
const graphFixtureStop = 10

// graphFixtureSpec is the fixture's pipeline.yaml. Its URLs are relative to
// the spec's directory, so a copy of the fixture runs where it is copied.
const graphFixtureSpec = `# testdata/compat/graph-v1: see README.md. Do not edit: the state under
# state/ was written by this spec; engine's TestGraphCompat continues it.
name: auctions-v1
sources:
  auctions:
    type: files
    url: in/auctions
    format: jsonl
    schema: {id: int64, seller: int64, category: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 2
    watermark: {max_out_of_orderness: 2s}
  bids:
    type: files
    url: in/bids
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 2
    watermark: {max_out_of_orderness: 2s}
stages:
  - name: last-bid
    input: bids
    dedup: {key: [auction, bidder], keep: first, within: 1m}
    late_url: late/dedup
  - name: sold-by
    input: auctions
    lookup: {url: in/sellers, format: csv, schema: {seller: int64, region: string}, on: [seller], type: left}
  - name: bid-auction
    inputs: [last-bid, sold-by]
    join:
      left_on: [auction]
      right_on: [id]
      window: {tumbling: 10s}
    late_url: late/join
  - name: per-category
    input: bid-auction
    window: {key: [category, region], tumbling: 10s, allowed_lateness: 20s, aggregates: {bids: "count()", volume: "sum(price)", top_price: "max(price)"}}
  - name: top
    input: per-category
    top_n: {n: 4, key: [region], order_by: [volume desc, category], allowed_lateness: 10s}
sinks:
  out: {input: top, type: files, url: out, format: parquet}
state: {url: state, parallelism: 2, max_parallelism: 128, retain_epochs: 4}
`

// TestGraphCompat continues the graph pipeline whose state, sink and late
// rows an earlier floe wrote (testdata/compat/graph-v1) with the current
// code: it continues the same generation from the fixture's head, and its
// outputs and late rows equal those of a fresh uninterrupted run over the
// same input. The graph state format is a promise: this test must keep
// passing unchanged.
func TestGraphCompat(t *testing.T) {
	if *regenGraphFixture {
		regenerateGraphFixture(t)
	}
	continueGraphFixture(t, graphFixtureDir, graphFixtureStop)
}

// continueGraphFixture runs the checks of TestGraphCompat on the fixture
// in fixtureDir, whose run stopped at epoch stop. A fixture of an older
// format version keeps being checked by a call with its directory.
func continueGraphFixture(t *testing.T, fixtureDir string, stop int64) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixtureDir)); err != nil {
		t.Fatalf("copy %s: %v", fixtureDir, err)
	}
	p, err := spec.Load(filepath.Join(dir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fixturePace(p)
	head := fixtureHead(t, filepath.Join(dir, "state", p.Name))
	if head.Epoch != stop || head.Generation != 1 {
		t.Fatalf("fixture head: generation %d epoch %d; want generation 1 epoch %d", head.Generation, head.Epoch, stop)
	}
	fixtureGen := readGeneration(t, filepath.Join(dir, "state", p.Name), 1)
	kinds := map[string]bool{}
	deltas := 0
	for _, st := range fixtureGen.Plan {
		kinds[st.Kind] = true
		var rows int64
		for _, op := range head.Operators {
			if op.ID == st.ID {
				for _, f := range append(append([]manifest.FileRef(nil), op.Files...), op.Deltas...) {
					rows += f.Rows
				}
				deltas += len(op.Deltas)
			}
		}
		if rows == 0 {
			t.Errorf("fixture head epoch %d holds no state of stage %s: the fixture does not exercise its restore", head.Epoch, st.ID)
		}
	}
	for _, k := range []string{"dedup", "join", "window", "top_n"} {
		if !kinds[k] {
			t.Errorf("the fixture's plan has no %s stage", k)
		}
	}
	if deltas == 0 {
		t.Errorf("fixture head epoch %d holds no state deltas: the fixture does not exercise restoring bases and deltas", head.Epoch)
	}
	lateBefore := lateRowsUnder(t, filepath.Join(dir, "late"))
	outBefore := graphOutputRows(t, p)
	if len(lateBefore) == 0 || len(outBefore) == 0 {
		t.Fatalf("fixture holds %d output rows and %d late rows; want both", len(outBefore), len(lateBefore))
	}

	res := run(t, p, engine.Options{Drain: true})
	if res.FirstEpoch != head.Epoch+1 {
		t.Errorf("fixture continued from epoch %d; want %d, after its head", res.FirstEpoch, head.Epoch+1)
	}
	wantGen := int64(1)
	if !graphPlanHashPortable {
		wantGen = 2
	}
	if res.Generation != wantGen {
		t.Errorf("fixture continued in generation %d, want %d (graphPlanHashPortable = %v: see its comment)", res.Generation, wantGen, graphPlanHashPortable)
	}
	// Whatever the generation, the stages and their state formats are the
	// fixture's: the state was restored, not migrated or reset.
	if g := readGeneration(t, filepath.Join(dir, "state", p.Name), res.Generation); !slices.Equal(g.Plan, fixtureGen.Plan) {
		t.Errorf("generation %d's plan %+v; the fixture's %+v", res.Generation, g.Plan, fixtureGen.Plan)
	} else if g.Generation > 1 && (g.Parent == nil || g.Parent.Generation != 1 || g.Parent.Epoch != head.Epoch) {
		t.Errorf("generation %d's parent %+v; want the fixture's head, generation 1 epoch %d", g.Generation, g.Parent, head.Epoch)
	}
	got, gotLate := graphOutputRows(t, p), lateRowsUnder(t, filepath.Join(dir, "late"))

	// Reference: the same spec and input, fresh, uninterrupted.
	rd := t.TempDir()
	if err := os.CopyFS(filepath.Join(rd, "in"), os.DirFS(filepath.Join(fixtureDir, "in"))); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(fixtureDir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rd, "pipeline.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := spec.Load(filepath.Join(rd, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fixturePace(ref)
	rres := run(t, ref, engine.Options{Drain: true})
	want, wantLate := graphOutputRows(t, ref), lateRowsUnder(t, filepath.Join(rd, "late"))
	if rres.LastEpoch != res.LastEpoch {
		t.Errorf("continued fixture ends at epoch %d, a fresh run at %d", res.LastEpoch, rres.LastEpoch)
	}
	for _, c := range []struct {
		what      string
		want, got []string
	}{{"output", want, got}, {"late", wantLate, gotLate}} {
		if m, x := sortedDiff(c.want, c.got); len(m) > 0 || len(x) > 0 {
			t.Errorf("continued fixture: %d %s rows, a fresh run %d: %d missing, %d extra\nmissing (first 10):\n%s\nextra (first 10):\n%s",
				len(c.got), c.what, len(c.want), len(m), len(x), strings.Join(m[:min(len(m), 10)], "\n"), strings.Join(x[:min(len(x), 10)], "\n"))
		}
	}
	t.Logf("fixture at epoch %d (%d output rows, %d late rows so far) continued to epoch %d; compared %d output rows and %d late rows with a fresh run",
		head.Epoch, len(outBefore), len(lateBefore), res.LastEpoch, len(want), len(wantLate))
}

// fixturePace gives each source of the fixture's spec the pace the fixture
// was written at: its max_files_per_epoch: 2 was then one total across the
// two sources, a file of each an epoch; each source's limit is its own
// since (issue 23). The limit is not part of the plan, so the epochs of the
// continued and the fresh run compare as before.
func fixturePace(p *spec.Pipeline) {
	for i := range p.Sources {
		p.Sources[i].Source.MaxFilesPerEpoch = 1
	}
}

// sortedDiff returns the rows of want missing from got and the rows of got
// not in want (with multiplicity); both are sorted.
func sortedDiff(want, got []string) (missing, extra []string) {
	i, j := 0, 0
	for i < len(want) && j < len(got) {
		switch {
		case want[i] == got[j]:
			i++
			j++
		case want[i] < got[j]:
			missing = append(missing, want[i])
			i++
		default:
			extra = append(extra, got[j])
			j++
		}
	}
	return append(missing, want[i:]...), append(extra, got[j:]...)
}

// graphPlanHashPortable says whether a graph pipeline's plan hash is the
// same wherever its sources, sink and late_url are. It is not yet: graphHash
// (engine/graph.go) hashes the JSON of spec.Graph's sources, stages and
// sinks, URLs included (and every field of those Go structs, so adding one
// changes the hash of every graph pipeline), so a copy of the fixture starts
// generation 2 (reason "plan changed") where the linear form's encodePlan
// continues generation 1. Set it to true when graphHash leaves locations
// out: the test then requires generation 1.
const graphPlanHashPortable = true

// readGeneration reads generation gen's _generation.json under a
// pipeline's state directory.
func readGeneration(t *testing.T, stateDir string, gen int64) *manifest.Generation {
	t.Helper()
	name := manifest.GenerationPath(gen)
	data, err := os.ReadFile(filepath.Join(stateDir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := manifest.DecodeGeneration(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// fixtureHead reads the head manifest of a pipeline's state directory.
func fixtureHead(t *testing.T, stateDir string) *manifest.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, "_latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := manifest.DecodeLatest("_latest.json", data)
	if err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(filepath.Join(stateDir, filepath.FromSlash(l.Manifest)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.DecodeManifest(l.Manifest, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// graphOutputRows returns the sorted rows of every committed output file of
// a graph pipeline (its one sink), each column as name=value.
func graphOutputRows(t *testing.T, p *spec.Pipeline) []string {
	t.Helper()
	ctx := context.Background()
	outs, err := engine.Outputs(ctx, p)
	if err != nil {
		t.Fatalf("outputs: %v", err)
	}
	sink, err := store.Open(ctx, p.Sinks[0].Sink.URL)
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
		rows = append(rows, parquetValueRows(t, o, data)...)
	}
	slices.Sort(rows)
	return rows
}

// lateRowsUnder returns the sorted rows of every Parquet file under dir
// (each prefixed by its subdirectory, the stage's late_url).
func lateRowsUnder(t *testing.T, dir string) []string {
	t.Helper()
	var rows []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		for _, r := range parquetValueRows(t, p, data) {
			rows = append(rows, rel+": "+r)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	slices.Sort(rows)
	return rows
}

// parquetValueRows returns one string per row of a Parquet file, every
// column as name=value at full precision.
func parquetValueRows(t *testing.T, what string, data []byte) []string {
	t.Helper()
	schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var rows []string
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c, f := range schema.Fields() {
				if c > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(f.Name + "=" + rec.Column(c).ValueStr(i))
			}
			rows = append(rows, b.String())
		}
		rec.Release()
	}
	return rows
}

// regenerateGraphFixture rewrites testdata/compat/graph-v1: the spec, the
// input, and the state, sink and late rows of a run stopped at epoch
// graphFixtureStop. Its README is kept.
func regenerateGraphFixture(t *testing.T) {
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "pipeline.yaml"), []byte(graphFixtureSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	writeGraphFixtureInput(t, filepath.Join(tmp, "in"))
	p, err := spec.Load(filepath.Join(tmp, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, p, engine.Options{UntilEpoch: graphFixtureStop})
	if res.LastEpoch != graphFixtureStop {
		t.Fatalf("regenerate: the run stopped at epoch %d, want %d", res.LastEpoch, graphFixtureStop)
	}
	for _, sub := range []string{"pipeline.yaml", "in", "state", "out", "late"} {
		if err := os.RemoveAll(filepath.Join(graphFixtureDir, sub)); err != nil {
			t.Fatal(err)
		}
	}
	// The file store's lock files (.floe-locks) are its own business, and
	// empty directories (.floe-tmp) are not kept by git: leave them out.
	err = filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".floe-locks" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(tmp, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(graphFixtureDir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatalf("regenerate %s: %v", graphFixtureDir, err)
	}
	t.Logf("rewrote %s: %d epochs, %d rows in, %d out, %d late", graphFixtureDir, res.Epochs, res.Rows, res.RowsOut, res.RowsLate)
}

// graphFixtureFiles is how many files each source of the fixture has.
const graphFixtureFiles = 20

// writeGraphFixtureInput writes the fixture's input under dir: 20 files of
// auctions and of bids (10 s of event time each; bids on recent auctions by
// few bidders, so the keep-last dedup drops many; every few files a bid or
// an auction 40 s to 50 s old, late for the stage reading it) and a sellers
// table.
func writeGraphFixtureInput(t *testing.T, dir string) {
	t.Helper()
	put := func(rel, data string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("sellers/sellers.csv", "seller,region\n0,eu\n1,us\n2,eu\n3,apac\n")
	rng := rand.New(rand.NewPCG(5, 23))
	base := time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) string { return base.Add(d).Format(time.RFC3339Nano) }
	aid := 0
	for f := range graphFixtureFiles {
		start := time.Duration(f) * 10 * time.Second
		var al, bl []string
		for i := range 5 {
			d := start + time.Duration(i)*2*time.Second + time.Duration(rng.IntN(1000))*time.Millisecond
			al = append(al, fmt.Sprintf(`{"id":%d,"seller":%d,"category":%d,"ts":%q}`, aid, aid%5, aid%6, ts(d)))
			aid++
		}
		for i := range 30 {
			d := start + time.Duration(i)*300*time.Millisecond + time.Duration(rng.IntN(1500))*time.Millisecond
			a := max(0, aid-1-rng.IntN(10))
			bl = append(bl, fmt.Sprintf(`{"auction":%d,"bidder":%d,"price":%d,"ts":%q}`, a, rng.IntN(20), 10+rng.IntN(490), ts(d)))
		}
		if f >= 4 && f%2 == 0 {
			d := start - 40*time.Second - time.Duration(rng.IntN(10000))*time.Millisecond
			bl = append(bl, fmt.Sprintf(`{"auction":%d,"bidder":%d,"price":%d,"ts":%q}`, rng.IntN(aid), rng.IntN(4), 10+rng.IntN(490), ts(d)))
		}
		if f >= 4 && f%3 == 1 {
			d := start - 40*time.Second - time.Duration(rng.IntN(10000))*time.Millisecond
			al = append(al, fmt.Sprintf(`{"id":%d,"seller":%d,"category":%d,"ts":%q}`, aid, aid%5, aid%6, ts(d)))
			aid++
		}
		rng.Shuffle(len(bl), func(i, j int) { bl[i], bl[j] = bl[j], bl[i] })
		put(fmt.Sprintf("auctions/f-%03d.jsonl", f), strings.Join(al, "\n")+"\n")
		put(fmt.Sprintf("bids/f-%03d.jsonl", f), strings.Join(bl, "\n")+"\n")
	}
}
