package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// treeSums returns every file under dir with the sha256 of its content.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[p] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lookupGraph is auctionGraph with a lookup stage (regions) the join reads.
func lookupGraph(table string) string {
	g := strings.Replace(auctionGraph, "stages:\n", `stages:
  - name: regions
    input: auctions
    lookup: {url: "`+table+`", format: jsonl, schema: {seller: int64, region: string}, on: [seller]}
`, 1)
	g = strings.Replace(g, "inputs: [last-bid, auctions]", "inputs: [last-bid, regions]", 1)
	return strings.Replace(g, "name: auctions\n", "name: auctions-lookup\n", 1)
}

// TestLookupOverlapsRefused: a lookup table whose location overlaps the
// state root, the pipeline's state folder, a sink, a side output or a
// source (equal, inside or containing, however the URL is spelled) is
// refused by plan and run before anything is written; before, only
// equality with the sink was refused, and the next run read floe's own
// state or outputs as the table.
func TestLookupOverlapsRefused(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 4)
	table := filepath.Join(e.dir, "tables", "sellers")
	must(t, os.MkdirAll(table, 0o755))
	var rows []string
	for s := range 7 {
		rows = append(rows, fmt.Sprintf(`{"seller":%d,"region":"r%d"}`, s, s%3))
	}
	must(t, os.WriteFile(filepath.Join(table, "sellers.jsonl"), []byte(strings.Join(rows, "\n")+"\n"), 0o644))
	good := e.pipelineFrom(t, lookupGraph(fileURL(table)))
	run(t, good, engine.Options{Drain: true})
	stateDir := strings.TrimPrefix(e.state, "file://")
	sinkDir := strings.TrimPrefix(e.sink, "file://")
	srcDir := strings.TrimPrefix(e.auctions, "file://")
	folder := filepath.Join(stateDir, good.Name)

	cases := []struct {
		name, lookup string
		edit         func(p *spec.Pipeline) // moves another location for the case
		want         string
	}{
		{"state root", e.state, nil, "contains the pipeline's state folder"},
		{"state root spelled otherwise", "file://" + e.dir + "//tables/../state/", nil, "contains the pipeline's state folder"},
		{"inside the state root", fileURL(filepath.Join(stateDir, "other")), nil, "is inside state.url"},
		{"state folder", fileURL(folder), nil, "is the pipeline's state folder"},
		{"inside the state folder", fileURL(filepath.Join(folder, "gen=000001")), nil, "is inside the pipeline's state folder"},
		{"contains the state", fileURL(filepath.Join(e.dir, "x")), func(p *spec.Pipeline) {
			p.State.URL = fileURL(filepath.Join(e.dir, "x", "state"))
		}, "contains the pipeline's state folder"},
		{"sink", e.sink, nil, "must differ from stages[0].lookup.url"}, // the spec's own check
		{"inside the sink", fileURL(filepath.Join(sinkDir, "sub")), nil, "is inside sinks.out.url"},
		{"contains the sink", fileURL(filepath.Join(e.dir, "y")), func(p *spec.Pipeline) {
			p.Sinks[0].Sink.URL = fileURL(filepath.Join(e.dir, "y", "out"))
		}, "contains sinks.out.url"},
		{"late output", e.late + "/join", nil, "is stages.bid-auction.late_url"},
		{"source", e.auctions, nil, "is sources.auctions.url"},
		{"inside a source", fileURL(filepath.Join(srcDir, "sub")), nil, "is inside sources.auctions.url"},
		{"contains a source", fileURL(filepath.Join(e.dir, "in")), nil, "contains sources.auctions.url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Set after parsing: the spec's own check refuses a lookup
			// url equal to a sink's as text.
			p := e.pipelineFrom(t, lookupGraph(fileURL(table)))
			p.Stages[0].Lookup.URL = c.lookup
			if c.edit != nil {
				c.edit(p)
			}
			before := treeSums(t, e.dir)
			if _, err := engine.Plan(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "lookup.url") {
				t.Errorf("plan: %v; want a refusal naming the lookup's url and %q", err, c.want)
			}
			_, err := engine.Run(context.Background(), p, engine.Options{Drain: true})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("run: %v; want a refusal containing %q", err, c.want)
			}
			if after := treeSums(t, e.dir); !reflect.DeepEqual(before, after) {
				t.Errorf("a refused run changed files:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	// The pipeline as it was still runs.
	e.putAuctions(t, 6)
	if res := run(t, good, engine.Options{Drain: true}); res.Epochs == 0 {
		t.Fatal("the pipeline with its own lookup location did not continue")
	}
}

// TestGraphWriteLocationsInsideSource: every sink and every stage's
// late_url of a graph is checked against every source and the state, not
// only the first sink.
func TestGraphWriteLocationsInsideSource(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 2)
	two := strings.Replace(auctionGraph, "sinks:\n", "sinks:\n  cats: {input: per-category, type: files, url: \"{{bids}}/cats\", format: jsonl}\n", 1)
	p := e.pipelineFrom(t, two)
	before := treeSums(t, e.dir)
	if _, err := engine.Run(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), "sinks.cats.url") || !strings.Contains(err.Error(), "inside sources.bids.url") {
		t.Errorf("a further sink inside a source: %v", err)
	}
	p = e.pipelineFrom(t, strings.Replace(auctionGraph, `late_url: "{{late}}/join"`, `late_url: "{{sink}}/late"`, 1))
	if _, err := engine.Run(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), "stages.bid-auction.late_url") || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("a stage's late_url inside the sink: %v", err)
	}
	if after := treeSums(t, e.dir); !reflect.DeepEqual(before, after) {
		t.Errorf("refused runs changed files:\nbefore %v\nafter  %v", before, after)
	}
}

// TestCheckOutputPathGraph: in the graph form a file a tool writes is
// refused inside every source, every sink (not only the first), every
// stage's late_url, a lookup table and the state folder; a folder also when
// it contains one; beside them it is accepted.
func TestCheckOutputPathGraph(t *testing.T) {
	e := newGraphEnv(t)
	table := filepath.Join(e.dir, "tables", "sellers")
	g := strings.Replace(lookupGraph(fileURL(table)), "sinks:\n", "sinks:\n  cats: {input: per-category, type: files, url: \""+fileURL(filepath.Join(e.dir, "cats"))+"\", format: jsonl}\n", 1)
	p := e.pipelineFrom(t, g)
	state := filepath.Join(strings.TrimPrefix(e.state, "file://"), p.Name)
	for _, c := range []struct {
		path  string
		dir   bool
		where string
	}{
		{filepath.Join(strings.TrimPrefix(e.bids, "file://"), "x.jsonl"), false, "is inside sources.bids.url"},
		{filepath.Join(e.dir, "cats", "x"), false, "is inside sinks.cats.url"},
		{filepath.Join(strings.TrimPrefix(e.sink, "file://"), "x"), false, "is inside sinks.out.url"},
		{filepath.Join(strings.TrimPrefix(e.late, "file://"), "join", "x"), false, "is inside stages.bid-auction.late_url"},
		{filepath.Join(table, "more.jsonl"), false, "is inside stages.regions.lookup.url"},
		{filepath.Join(state, "_latest.json"), false, "is inside the pipeline's state folder"},
		{filepath.Join(e.dir, "tables"), true, "contains stages.regions.lookup.url"},
	} {
		err := engine.CheckOutputPath(p, "--flag", c.path, c.dir)
		if err == nil || !strings.HasPrefix(err.Error(), "--flag "+c.path+" "+c.where) {
			t.Errorf("%s (dir %v): %v; want a refusal: %s", c.path, c.dir, err, c.where)
		}
	}
	for _, ok := range []string{filepath.Join(e.dir, "export.parquet"), filepath.Join(strings.TrimPrefix(e.state, "file://"), "other-pipeline.txt")} {
		if err := engine.CheckOutputPath(p, "--flag", ok, false); err != nil {
			t.Errorf("%s: %v; want it accepted", ok, err)
		}
	}
	if err := engine.CheckOutputPath(p, "--flag", filepath.Join(e.dir, "tables2"), true); err != nil {
		t.Errorf("a sibling folder: %v", err)
	}
}
