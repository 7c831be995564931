package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/bundle"
	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// bundleGraph is auctionGraph with a lookup stage (the auctions' seller
// regions, from a table folder), late rows written by the join, and a
// second sink (the per-category window).
func bundleGraph(tableURL string) string {
	g := strings.Replace(auctionGraph, "stages:\n", `stages:
  - name: regions
    input: auctions
    lookup: {url: "`+tableURL+`", format: jsonl, schema: {seller: int64, region: string}, on: [seller]}
`, 1)
	g = strings.Replace(g, "inputs: [last-bid, auctions]", "inputs: [last-bid, regions]", 1)
	return withSinks(g, `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
  per-category: {input: per-category, type: files, url: "{{dir}}/per-category", format: parquet}
`)
}

// TestEmitTestBundleGraph: a regression bundle of a graph pipeline's epoch
// (two sources, a lookup table, keyed stages, two sinks) replays from the
// bundle alone to golden.txt, at any parallelism; it holds each source's
// inputs, the lookup table and each stage's watermark; a changed lookup
// file or golden line is caught.
func TestEmitTestBundleGraph(t *testing.T) {
	ctx := context.Background()
	e, p, text, res := graphBundlePipeline(t)
	var sawExtra bool
	for ep := res.LastEpoch - 3; ep <= res.LastEpoch; ep++ {
		dir, b := emitBundle(t, p, text, ep, fmt.Sprintf("epoch-%d", ep))
		if err := bundle.Verify(ctx, dir); err != nil {
			t.Fatalf("a fresh bundle of epoch %d: %v", ep, err)
		}
		if b.BundleFormat != 2 || len(b.StageWatermarks) != 4 || len(b.Lookups) != 1 || len(b.Lookups[0].Files) != 1 {
			t.Fatalf("bundle.json of epoch %d: format %d, stage watermarks %v, lookups %+v", ep, b.BundleFormat, b.StageWatermarks, b.Lookups)
		}
		rr, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: ep})
		if err != nil {
			t.Fatal(err)
		}
		golden, err := os.ReadFile(filepath.Join(dir, engine.BundleGoldenFile))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(rr.Lines(), "\n"); strings.TrimSuffix(string(golden), "\n") != want {
			t.Fatalf("golden.txt of epoch %d is not the replay's lines", ep)
		}
		sawExtra = sawExtra || strings.Contains(string(golden), "output@per-category ")
		for _, f := range rr.Files {
			if _, err := os.Stat(filepath.Join(dir, "inputs", filepath.FromSlash(f))); err != nil {
				t.Fatalf("input %s: %v", f, err)
			}
		}
		for _, par := range []int{1, 5} {
			got, _, err := engine.ReplayBundle(ctx, dir, engine.BundleReplayOptions{Parallelism: par})
			if err != nil {
				t.Fatalf("epoch %d at parallelism %d: %v", ep, par, err)
			}
			if !reflect.DeepEqual(got.Lines(), rr.Lines()) {
				t.Fatalf("epoch %d at parallelism %d replays differently from the bundle's golden lines", ep, par)
			}
		}
		sp, _ := os.ReadFile(filepath.Join(dir, engine.BundleSpecFile))
		if strings.Contains(string(sp), e.dir) {
			t.Fatalf("spec.yaml names the pipeline's folders:\n%s", sp)
		}
		if ep != res.LastEpoch {
			continue
		}
		// A changed lookup file and a changed golden line are caught.
		lf := filepath.Join(dir, "lookups", "regions", "sellers.jsonl")
		orig, err := os.ReadFile(lf)
		if err != nil {
			t.Fatalf("the bundle lacks the lookup table: %v", err)
		}
		if err := os.WriteFile(lf, []byte(strings.Replace(string(orig), `"r1"`, `"r9"`, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := bundle.Verify(ctx, dir); err == nil || !strings.Contains(err.Error(), "is not the one the epoch read") {
			t.Fatalf("a changed lookup file: %v", err)
		}
		if err := os.WriteFile(lf, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		gf := filepath.Join(dir, engine.BundleGoldenFile)
		if err := os.WriteFile(gf, append(golden, []byte("output {\"x\":1}\n")...), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := bundle.Verify(ctx, dir); err == nil || !strings.Contains(err.Error(), "replays differently") {
			t.Fatalf("an edited golden.txt: %v", err)
		}
	}
	if !sawExtra {
		t.Fatal("no bundle held rows of the second sink")
	}
}

// graphBundlePipeline runs bundleGraph to the end over 10 files of
// auctions and 14 of bids (the bids run ahead, so the dedup's watermark,
// the bids', is ahead of the join's, both sources'), with a sellers table,
// and returns the env, the pipeline, its spec text and the run's result.
func graphBundlePipeline(t *testing.T) (*graphEnv, *spec.Pipeline, []byte, *engine.Result) {
	e := newGraphEnv(t)
	e.putAuctions(t, 10)
	for name, data := range auctionFiles(14) {
		if f, ok := strings.CutPrefix(name, "bids/"); ok && f >= "f-010" {
			if err := os.WriteFile(filepath.Join(strings.TrimPrefix(e.bids, "file://"), f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
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
	text := []byte(e.spec(t, strings.ReplaceAll(bundleGraph(fileURL(tableDir)), "{{dir}}", fileURL(filepath.Join(e.dir, "sinks")))))
	p, err := spec.Parse(filepath.Join(e.dir, "graph.yaml"), text, e.dir)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, p, engine.Options{Drain: true})
	if res.LastEpoch < 4 {
		t.Fatalf("%d epochs; the test needs more", res.LastEpoch)
	}
	return e, p, text, res
}
