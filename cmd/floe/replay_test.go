package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/bundle"
)

// replayCLISpec: sliding windows at P=3 with late rows kept, rejected rows,
// a filter behind the window; one input file per epoch.
const replayCLISpec = `name: replay-cli
source: {type: files, url: "events", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 1, late_url: "late",
         watermark: {max_out_of_orderness: 10s}}
operators:
  - filter: "bytes >= 0"
  - window: {key: [user_id], sliding: {size: 2m, slide: 1m}, allowed_lateness: 0s,
             aggregates: {clicks: "count()", total: "sum(bytes)"}}
  - filter: "clicks > 1"
sink:  {type: files, url: "out", format: parquet}
state: {url: "state", parallelism: 3}
`

// replayCLIPipeline writes the spec and six input files (one a minute,
// each with a row far behind and a bad row) and returns the spec's path.
func replayCLIPipeline(t *testing.T, spec string) (string, string) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "events"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		var lines []string
		for j := range 12 {
			lines = append(lines, fmt.Sprintf(`{"event_time":"2024-01-01T00:%02d:%02dZ","user_id":"u%d","page":"/","bytes":%d}`, i, j*5, j%4, i+j))
		}
		if i > 2 {
			lines = append(lines, fmt.Sprintf(`{"event_time":"2024-01-01T00:%02d:00Z","user_id":"u9","page":"/","bytes":1}`, i-3))
		}
		lines = append(lines, `{"event_time":"yesterday","user_id":"u1","page":"/","bytes":1}`)
		if err := os.WriteFile(filepath.Join(dir, "events", fmt.Sprintf("e%d.jsonl", i)), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

// TestCLIReplay: replay prints canonical lines; --verify is identical for
// every epoch at P=3, 1 and 5 (exit 0); a changed filter behind the window
// is reported by --verify (exit 1) and by replay-diff of two --out files
// (exit 1, first difference and counts); nothing is written to the
// pipeline; a deleted input file is named with exit 2.
func TestCLIReplay(t *testing.T) {
	spec, dir := replayCLIPipeline(t, replayCLISpec)
	if code, out, e := floe("run", spec); code != 0 || !strings.Contains(out, "committed epochs 1..6") {
		t.Fatalf("run: code %d\n%s%s", code, out, e)
	}
	before := tree(t, dir)

	code, out, e := floe("replay", spec, "--epoch", "4")
	if code != 0 {
		t.Fatalf("replay: code %d\n%s%s", code, out, e)
	}
	kinds := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		kind, js, _ := strings.Cut(l, " ")
		if !strings.HasPrefix(js, "{") {
			t.Fatalf("replay line %q is not <kind> <json>", l)
		}
		kinds[kind]++
	}
	if kinds["output"] == 0 || kinds["late"] == 0 || kinds["rejected"] != 1 || len(kinds) != 3 {
		t.Fatalf("replay of epoch 4: %v\n%s", kinds, out)
	}
	if !strings.Contains(e, "replayed epoch 4 (generation 1) at parallelism 3 from the state of epoch 3: 1 input files") {
		t.Fatalf("replay summary: %s", e)
	}

	for ep := 1; ep <= 6; ep++ {
		for _, par := range []string{"3", "1", "5"} {
			code, out, e := floe("replay", spec, "--epoch", fmt.Sprint(ep), "--verify", "--parallelism", par)
			if code != 0 || !strings.Contains(out, "identical to what epoch") {
				t.Fatalf("replay --verify epoch %d P=%s: code %d\n%s%s", ep, par, code, out, e)
			}
		}
	}

	// The same epoch with a changed filter behind the window.
	changed := filepath.Join(dir, "changed.yaml")
	if err := os.WriteFile(changed, []byte(strings.Replace(replayCLISpec, `filter: "clicks > 1"`, `filter: "clicks > 6"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = floe("replay", changed, "--epoch", "4", "--verify")
	if code != 1 || !strings.Contains(out, "first difference at line") || !strings.Contains(out, "counter differs: rows_out") {
		t.Fatalf("replay --verify with a changed filter: code %d\n%s", code, out)
	}
	outs := t.TempDir()
	a, b := filepath.Join(outs, "a.txt"), filepath.Join(outs, "b.txt")
	if code, out, e := floe("replay", spec, "--epoch", "4", "--out", a, "--parallelism", "1"); code != 0 {
		t.Fatalf("replay --out: code %d\n%s%s", code, out, e)
	}
	if code, out, e := floe("replay", changed, "--epoch", "4", "--out", b); code != 0 {
		t.Fatalf("replay --out (changed): code %d\n%s%s", code, out, e)
	}
	// A changed aggregate definition: one more aggregate (the restored state
	// is migrated, as a run would): every output row changes.
	added := filepath.Join(dir, "added.yaml")
	if err := os.WriteFile(added, []byte(strings.Replace(replayCLISpec, `total: "sum(bytes)"}`, `total: "sum(bytes)", hi: "max(bytes)"}`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(outs, "c.txt")
	if code, out, e := floe("replay", added, "--epoch", "4", "--out", c); code != 0 {
		t.Fatalf("replay --out (added aggregate): code %d\n%s%s", code, out, e)
	}
	code, out, _ = floe("replay-diff", a, c)
	if code != 1 || !strings.Contains(out, "first difference at line 2:") || !strings.Contains(out, "8 lines differ: 4 only in "+a+", 4 only in "+c) {
		t.Fatalf("replay-diff with an added aggregate: code %d\n%s", code, out)
	}
	t.Logf("replay-diff, added aggregate:\n%s", out)
	if code, out, e := floe("replay", added, "--epoch", "4", "--verify"); code != 1 || !strings.Contains(out, "8 lines differ") {
		t.Fatalf("replay --verify with an added aggregate: code %d\n%s%s", code, out, e)
	}

	if code, out, _ := floe("replay-diff", a, a); code != 0 || !strings.HasPrefix(out, "identical") {
		t.Fatalf("replay-diff A A: code %d\n%s", code, out)
	}
	code, out, e = floe("replay-diff", a, b)
	if code != 1 || !strings.Contains(out, "first difference at line") || !strings.Contains(out, "4 lines differ: 4 only in "+a+", 0 only in "+b) ||
		!strings.Contains(e, "differ") {
		t.Fatalf("replay-diff A B: code %d\n%s%s", code, out, e)
	}
	t.Logf("replay-diff:\n%s", out)
	if code, _, e := floe("replay-diff", a, spec); code != 2 || !strings.Contains(e, "not a replay line") {
		t.Fatalf("replay-diff of a non-replay file: code %d\n%s", code, e)
	}

	if after := strings.Replace(strings.Replace(tree(t, dir), changed+"\n", "", 1), added+"\n", "", 1); after != before {
		t.Fatalf("replay wrote into the pipeline's folders:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	if err := os.Remove(filepath.Join(dir, "events", "e3.jsonl")); err != nil {
		t.Fatal(err)
	}
	code, _, e = floe("replay", spec, "--epoch", "4", "--verify")
	if code != 2 || !strings.Contains(e, "e3.jsonl") {
		t.Fatalf("replay with a deleted input: code %d\n%s", code, e)
	}
	t.Logf("deleted input: %s", e)
	if code, _, e := floe("replay", spec); code != 2 || !strings.Contains(e, "--epoch is required") {
		t.Fatalf("replay without --epoch: code %d\n%s", code, e)
	}
}

// TestCLIReplayEmitTest: --emit-test writes a bundle that bundle.Verify
// passes (golden.txt is replay --out's file), refuses a non-empty folder
// and --verify alongside (exit 2), and writes nothing to the pipeline.
func TestCLIReplayEmitTest(t *testing.T) {
	spec, dir := replayCLIPipeline(t, replayCLISpec)
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: code %d\n%s%s", code, out, e)
	}
	before := tree(t, dir)
	b := filepath.Join(t.TempDir(), "epoch4")
	code, out, e := floe("replay", spec, "--epoch", "4", "--emit-test", b)
	if code != 0 || !strings.Contains(out, "wrote the regression bundle of epoch 4 of pipeline replay-cli to "+b+": 1 input files, the state of epoch 3,") {
		t.Fatalf("replay --emit-test: code %d\n%s%s", code, out, e)
	}
	if after := tree(t, dir); after != before {
		t.Fatalf("--emit-test wrote to the pipeline:\n%s\n%s", before, after)
	}
	if err := bundle.Verify(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(t.TempDir(), "e4.txt")
	if code, out, e := floe("replay", spec, "--epoch", "4", "--out", outFile); code != 0 {
		t.Fatalf("replay --out: code %d\n%s%s", code, out, e)
	}
	want, _ := os.ReadFile(outFile)
	golden, _ := os.ReadFile(filepath.Join(b, "golden.txt"))
	if string(want) != string(golden) || len(golden) == 0 {
		t.Fatalf("golden.txt is not replay --out's file:\n%s\n%s", golden, want)
	}
	if code, _, e := floe("replay", spec, "--epoch", "5", "--emit-test", b); code != 2 || !strings.Contains(e, "not empty") {
		t.Fatalf("--emit-test into a non-empty folder: code %d\n%s", code, e)
	}
	if code, _, e := floe("replay", spec, "--epoch", "5", "--verify", "--emit-test", filepath.Join(t.TempDir(), "x")); code != 2 || !strings.Contains(e, "excludes") {
		t.Fatalf("--emit-test with --verify: code %d\n%s", code, e)
	}
}
