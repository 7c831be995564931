package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// killGraphSpec is an auction pipeline in the graph form: two sources, a
// keep-last dedup of the bids, a windowed join of the deduplicated bids
// with the auctions, a window per category over the join and a top-n over
// that window, written to two sinks: the top-n and the per-category
// window's results with an over stage's average volume of each category's
// last 4 windows (the pipeline's sinks commit together, epoch by epoch). The dedup
// and the join find late rows (rows older than
// their watermark, in later files) and write them to their late_url.
const killGraphSpec = `name: %s
sources:
  auctions:
    type: files
    url: %q
    format: jsonl
    schema: {id: int64, seller: int64, category: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 2s}
  bids:
    type: files
    url: %q
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 2s}
stages:
  - name: last-bid
    input: bids
    dedup: {key: [auction, bidder], keep: last, within: 1m}
    late_url: %q
  - name: bid-auction
    inputs: [last-bid, auctions]
    join:
      left_on: [auction]
      right_on: [id]
      window: {tumbling: 10s}
    late_url: %q
  - name: per-category
    input: bid-auction
    window: {key: [category], tumbling: 10s, allowed_lateness: 10s, aggregates: {bids: "count()", volume: "sum(price)", top_price: "max(price)"}}
  - name: top
    input: per-category
    top_n: {n: 5, order_by: [volume desc, category], allowed_lateness: 10s}
  - name: category-trend
    input: per-category
    over: {key: [category], order_by: window_end, rows: 3, aggregates: {avg_volume: "avg(volume)", windows: "count()"}, allowed_lateness: 10s}
sinks:
  out: {input: top, type: files, url: %q, format: parquet}
  per-category: {input: category-trend, type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2, max_parallelism: 128, retain_epochs: 3}
`

// graphKillBackend names the URLs of one graph kill test: the two shared
// sources and, for the reference run and for the killed runs each, a
// state, a sink and the late_url of the dedup and of the join.
type graphKillBackend struct {
	auctions, bids string
	ref, kill      graphKillPlace
}

type graphKillPlace struct {
	state, sink, sink2, lateDedup, lateJoin string // sink2: the per-category sink
}

// TestKillGraph runs `floe run --drain` on a graph pipeline as a real
// process, SIGKILLs it at seeded random moments (16 times, 3 under
// -short), restarts it each time, and checks that the union of committed
// outputs equals that of one uninterrupted run row for row, and that every
// late row of each stage's late_url is there exactly once, on file:// and on
// S3 (versitygw). Replay a schedule with FLOE_KILL_SEED.
func TestKillGraph(t *testing.T) {
	seed := killSeed(t)
	kills := 16
	if testing.Short() {
		kills = 3
	}
	place := func(u func(string) string, dir string) graphKillPlace {
		return graphKillPlace{state: u(dir + "/state"), sink: u(dir + "/out"), sink2: u(dir + "/out-per-category"), lateDedup: u(dir + "/late/dedup"), lateJoin: u(dir + "/late/join")}
	}
	t.Run("file", func(t *testing.T) {
		root := t.TempDir()
		fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
		killGraphRestart(t, seed, kills, graphKillBackend{
			auctions: fu("in/auctions"), bids: fu("in/bids"),
			ref: place(fu, "ref"), kill: place(fu, "kill"),
		})
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Shared(t)
		u, err := url.Parse(srv.NewBucket(t))
		if err != nil {
			t.Fatal(err)
		}
		su := func(p string) string { return srv.URL(u.Host, p) }
		killGraphRestart(t, seed+1, kills, graphKillBackend{
			auctions: su("in/auctions"), bids: su("in/bids"),
			ref: place(su, "ref"), kill: place(su, "kill"),
		})
	})
}

func killGraphRestart(t *testing.T, seed uint64, wantKills int, be graphKillBackend) {
	ctx := context.Background()
	dir := t.TempDir()
	lateAuctions, lateBids := putGraphDataset(t, ctx, be.auctions, be.bids)
	refSpec := writeGraphSpec(t, dir, "graph-ref", be.auctions, be.bids, be.ref)
	killSpec := writeGraphSpec(t, dir, "graph-kill", be.auctions, be.bids, be.kill)

	// Reference: one uninterrupted run.
	ref := runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	if !strings.Contains(ref.stdout, "committed epochs") {
		t.Fatalf("reference run committed nothing:\n%s", ref.stdout)
	}
	idle := runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	if !strings.Contains(idle.stdout, "nothing new") {
		t.Fatalf("second reference run: want \"nothing new\", got:\n%s", idle.stdout)
	}
	want, wantFiles := graphCommittedRows(t, ctx, refSpec, "out", be.ref.sink)
	want2, _ := graphCommittedRows(t, ctx, refSpec, "per-category", be.ref.sink2)
	if len(want) == 0 || len(want2) <= len(want) {
		t.Fatalf("reference run: %d top-n rows, %d per-category rows (the top-n keeps at most 5 of them per window)", len(want), len(want2))
	}
	wantDedup, wantJoin := lateRowsAt(t, ctx, be.ref.lateDedup), lateRowsAt(t, ctx, be.ref.lateJoin)
	// The data set puts lateBids bids and lateAuctions auctions far
	// behind the watermark: every one of them must be found late, by the
	// stage that reads its source.
	if len(wantDedup) != lateBids || len(wantJoin) != lateAuctions {
		t.Fatalf("reference: %d late rows at the dedup, %d at the join; the data set has %d late bids and %d late auctions",
			len(wantDedup), len(wantJoin), lateBids, lateAuctions)
	}
	refHead := lastEpoch(ref.stderr)
	if refHead < 10 {
		t.Fatalf("reference committed %d epochs; the kill schedule needs more", refHead)
	}
	t.Logf("reference: %v to commit epochs up to %d, %d output files, %d rows, %d + %d late rows; a no-op run takes %v",
		ref.elapsed.Round(time.Millisecond), refHead, wantFiles, len(want), len(wantDedup), len(wantJoin), idle.elapsed.Round(time.Millisecond))

	killRuns(t, seed, wantKills, killSpec, ref.elapsed, idle.elapsed, refHead)

	got, gotFiles := graphCommittedRows(t, ctx, killSpec, "out", be.kill.sink)
	if m, x := multisetDiff(want, got); len(m) > 0 || len(x) > 0 {
		t.Errorf("killed runs committed %d rows in %d files, the uninterrupted run %d rows in %d files: %d missing, %d extra\nmissing (first 10): %q\nextra (first 10): %q",
			len(got), gotFiles, len(want), wantFiles, len(m), len(x), firstN(m, 10), firstN(x, 10))
	}
	got2, _ := graphCommittedRows(t, ctx, killSpec, "per-category", be.kill.sink2)
	if m, x := multisetDiff(want2, got2); len(m) > 0 || len(x) > 0 {
		t.Errorf("sink per-category: killed runs committed %d rows, the uninterrupted run %d: %d missing, %d extra\nmissing (first 10): %q\nextra (first 10): %q",
			len(got2), len(want2), len(m), len(x), firstN(m, 10), firstN(x, 10))
	}
	// Every late row of each stage exactly once, as in the uninterrupted
	// run (orphans of killed attempts would duplicate them).
	for _, c := range []struct {
		stage     string
		want, got []string
	}{
		{"last-bid", wantDedup, lateRowsAt(t, ctx, be.kill.lateDedup)},
		{"bid-auction", wantJoin, lateRowsAt(t, ctx, be.kill.lateJoin)},
	} {
		if m, x := multisetDiff(c.want, c.got); len(m) > 0 || len(x) > 0 {
			t.Errorf("late rows of stage %s after kills: %d missing, %d extra (of %d); missing (first 5): %q; extra (first 5): %q",
				c.stage, len(m), len(x), len(c.want), firstN(m, 5), firstN(x, 5))
		}
	}
	t.Logf("compared %d + %d output rows (two sinks) and %d + %d late rows: equal", len(want), len(want2), len(wantDedup), len(wantJoin))
	// Every sink holds exactly its committed files: the orphans killed
	// attempts wrote to any sink, not only the first, were deleted.
	checkSinkExact(t, ctx, killSpec, "out", be.kill.sink)
	checkSinkExact(t, ctx, killSpec, "per-category", be.kill.sink2)
	// Every file the retained epochs name is there, whole.
	if v := runFloe(t, "verify", killSpec); !strings.Contains(v.stdout, ": 0 problems") {
		t.Errorf("verify after kills:\n%s", v.stdout)
	}

	// Caught up: another run commits nothing and writes nothing.
	places := map[string]string{"state": be.kill.state, "sink": be.kill.sink, "sink per-category": be.kill.sink2, "late dedup": be.kill.lateDedup, "late join": be.kill.lateJoin}
	before := map[string]map[string]int64{}
	for name, u := range places {
		before[name] = listKeys(t, ctx, u)
	}
	statusBefore := headOf(t, runFloe(t, "status", killSpec, "--json").stdout)
	again := runFloe(t, "run", killSpec, "--drain", "--log-format", "json")
	if !strings.Contains(again.stdout, "nothing new") {
		t.Errorf("run after completion: want \"nothing new\", got:\n%s", again.stdout)
	}
	if n := strings.Count(again.stderr, `"msg":"epoch committed"`); n != 0 {
		t.Errorf("run after completion committed %d epochs", n)
	}
	if s := headOf(t, runFloe(t, "status", killSpec, "--json").stdout); s != statusBefore {
		t.Errorf("status changed by a run with nothing new:\nbefore:\n%s\nafter:\n%s", statusBefore, s)
	}
	for name, u := range places {
		after := listKeys(t, ctx, u)
		for k, size := range after {
			if old, ok := before[name][k]; !ok || old != size {
				t.Errorf("run with nothing new wrote %s object %s", name, k)
			}
		}
		for k := range before[name] {
			if _, ok := after[k]; !ok {
				t.Errorf("run with nothing new deleted %s object %s", name, k)
			}
		}
	}
}

// writeGraphSpec writes the graph kill test's spec over absolute URLs into
// dir and returns its path.
func writeGraphSpec(t testing.TB, dir, name, auctions, bids string, pl graphKillPlace) string {
	t.Helper()
	y := fmt.Sprintf(killGraphSpec, name, auctions, bids, pl.lateDedup, pl.lateJoin, pl.sink, pl.sink2, pl.state)
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatalf("write spec: %v", err)
	}
	return p
}

// graphKillFiles is how many files each source of the graph kill test has
// (each 10 s of event time).
const graphKillFiles = 60

// putGraphDataset writes the auctions and bids of the graph kill test
// through store.Put (so it works on any backend) and returns how many of
// them are late: every few files two bids 40 s to 50 s older than the
// file's time, or an auction 90 s to 100 s older, far behind the watermark
// of the stage reading them (the dedup's is the sources' minus 2 s, the
// join's a minute behind that: the keep-last dedup's scope). Bids pick among the latest auctions and few
// bidders, so the keep-last dedup drops many.
func putGraphDataset(t testing.TB, ctx context.Context, auctionsURL, bidsURL string) (lateAuctions, lateBids int) {
	t.Helper()
	as, err := store.Open(ctx, auctionsURL)
	if err != nil {
		t.Fatalf("open %s: %v", auctionsURL, err)
	}
	defer as.Close()
	bs, err := store.Open(ctx, bidsURL)
	if err != nil {
		t.Fatalf("open %s: %v", bidsURL, err)
	}
	defer bs.Close()
	rng := rand.New(rand.NewPCG(11, 17))
	base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) string { return base.Add(d).Format(time.RFC3339Nano) }
	aid := 0
	for f := range graphKillFiles {
		start := time.Duration(f) * 10 * time.Second
		var al, bl []string
		for i := range 6 {
			d := start + time.Duration(i)*1500*time.Millisecond + time.Duration(rng.IntN(1000))*time.Millisecond
			al = append(al, fmt.Sprintf(`{"id":%d,"seller":%d,"category":%d,"ts":%q}`, aid, aid%5, aid%8, ts(d)))
			aid++
		}
		for i := range 80 {
			d := start + time.Duration(i)*120*time.Millisecond + time.Duration(rng.IntN(1500))*time.Millisecond
			a := max(0, aid-1-rng.IntN(12))
			bl = append(bl, fmt.Sprintf(`{"auction":%d,"bidder":%d,"price":%d,"ts":%q}`, a, rng.IntN(40), 10+rng.IntN(990), ts(d)))
		}
		if f >= 5 && f%3 == 0 {
			for range 2 {
				d := start - 40*time.Second - time.Duration(rng.IntN(10000))*time.Millisecond
				bl = append(bl, fmt.Sprintf(`{"auction":%d,"bidder":%d,"price":%d,"ts":%q}`, rng.IntN(aid), rng.IntN(6), 10+rng.IntN(990), ts(d)))
				lateBids++
			}
		}
		if f >= 10 && f%4 == 1 {
			d := start - 90*time.Second - time.Duration(rng.IntN(10000))*time.Millisecond
			al = append(al, fmt.Sprintf(`{"id":%d,"seller":%d,"category":%d,"ts":%q}`, aid, aid%5, aid%8, ts(d)))
			aid++
			lateAuctions++
		}
		rng.Shuffle(len(bl), func(i, j int) { bl[i], bl[j] = bl[j], bl[i] })
		name := fmt.Sprintf("f-%03d.jsonl", f)
		for _, x := range []struct {
			st    store.Store
			lines []string
		}{{as, al}, {bs, bl}} {
			if _, err := x.st.Put(ctx, name, []byte(strings.Join(x.lines, "\n")+"\n"), store.PutOptions{}); err != nil {
				t.Fatalf("put %s: %v", name, err)
			}
		}
	}
	return lateAuctions, lateBids
}

// graphCommittedRows is committedRows for one sink of a graph pipeline:
// `floe outputs SPEC --sink NAME` lists each committed file of the sink
// once, under the sink's URL, every listed file exists and parses; it
// returns the sorted rows and the number of files.
func graphCommittedRows(t testing.TB, ctx context.Context, specPath, sinkName, sinkURL string) ([]string, int) {
	t.Helper()
	res := runFloe(t, "outputs", specPath, "--sink", sinkName)
	base := sinkURL
	if i := strings.IndexByte(base, '?'); i >= 0 {
		base = base[:i]
	}
	base = strings.TrimSuffix(base, "/") + "/"
	sink, err := store.Open(ctx, sinkURL)
	if err != nil {
		t.Fatalf("open sink %s: %v", sinkURL, err)
	}
	defer sink.Close()
	seen := map[string]bool{}
	var rows []string
	lines := strings.Fields(res.stdout)
	for _, line := range lines {
		if seen[line] {
			t.Errorf("floe outputs lists %s twice", line)
			continue
		}
		seen[line] = true
		key, ok := strings.CutPrefix(line, base)
		if !ok {
			t.Errorf("floe outputs --sink %s lists %s, outside the sink %s", sinkName, line, base)
			continue
		}
		data, _, err := sink.Get(ctx, key)
		if err != nil {
			t.Errorf("committed output %s: %v", line, err)
			continue
		}
		rows = append(rows, parquetLines(t, line, data)...)
	}
	slices.Sort(rows)
	return rows, len(lines)
}

// parquetLines returns one string per row of a Parquet file: every column
// as name=value, in schema order.
func parquetLines(t testing.TB, what string, data []byte) []string {
	t.Helper()
	schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s does not parse: %v", what, err)
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

// lateRowsAt returns the sorted rows of every Parquet file under a
// stage's late_url.
func lateRowsAt(t testing.TB, ctx context.Context, u string) []string {
	t.Helper()
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	defer st.Close()
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Fatalf("list %s: %v", u, err)
	}
	var rows []string
	for _, o := range objs {
		data, _, err := st.Get(ctx, o.Key)
		if err != nil {
			t.Fatalf("late file %s/%s: %v", u, o.Key, err)
		}
		rows = append(rows, parquetLines(t, "late file "+u+"/"+o.Key, data)...)
	}
	slices.Sort(rows)
	return rows
}

// checkSinkExact fails unless the part files in a sink are exactly those
// `floe outputs SPEC --sink NAME` lists: no file of an attempt that never
// committed is left (a reader globbing the folder would read its rows).
func checkSinkExact(t testing.TB, ctx context.Context, specPath, sinkName, sinkURL string) {
	t.Helper()
	base := sinkURL
	if i := strings.IndexByte(base, '?'); i >= 0 {
		base = base[:i]
	}
	base = strings.TrimSuffix(base, "/") + "/"
	want := map[string]bool{}
	for _, line := range strings.Fields(runFloe(t, "outputs", specPath, "--sink", sinkName).stdout) {
		want[strings.TrimPrefix(line, base)] = true
	}
	var extra []string
	for k := range listKeys(t, ctx, sinkURL) {
		if !strings.HasPrefix(k, "part-") {
			continue // the marker, _rejected/
		}
		if !want[k] {
			extra = append(extra, k)
		}
		delete(want, k)
	}
	slices.Sort(extra)
	if len(extra) > 0 || len(want) > 0 {
		t.Errorf("sink %s after kills: %d part files no epoch committed (first 5: %q), %d committed files missing",
			sinkName, len(extra), firstN(extra, 5), len(want))
	}
}
