package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/bundle"
	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// bundleSliding: sliding windows at P=2, late rows kept (late_url),
// rejected rows to the sink's _rejected/, a filter behind the window.
const bundleSliding = `
name: bundle-sliding
# a comment the bundle keeps
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2, late_url: "{{late}}",
         watermark: {max_out_of_orderness: 20s}}
operators:
  - filter: "bytes >= 0"
  - window: {key: [user_id], sliding: {size: 3m, slide: 1m}, allowed_lateness: 30s,
             aggregates: {clicks: "count()", total: "sum(bytes)", hi: "max(bytes)",
                          first_page: "first(page)", last_page: "last(page)"}}
  - filter: "clicks > 1"
sink:
  type: files
  url: "{{sink}}"
  format: parquet
state: {url: "{{state}}", parallelism: 2, retain_epochs: 20}
`

// fakeTB records what a test reports instead of failing.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) { f.Errorf(format, args...) }
func (f *fakeTB) Error(args ...any)                 { f.Errorf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) Fatal(args ...any)                 { f.Errorf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) Fail()                             { f.Errorf("Fail") }
func (f *fakeTB) FailNow()                          { f.Errorf("FailNow") }
func (f *fakeTB) Failed() bool                      { return f.failed }
func (f *fakeTB) Logf(string, ...any)               {}
func (f *fakeTB) Log(...any)                        {}

// bundlePipeline runs bundleSliding over replayInput files for 5 epochs
// (P=2) and returns the pipeline, its spec text and its root folder.
func bundlePipeline(t *testing.T) (*spec.Pipeline, []byte, string) {
	e := fileEnv(t)
	root := filepath.Dir(strings.TrimPrefix(e.state, "file://"))
	replayInput(t, e, 14, 11)
	text := strings.NewReplacer("{{source}}", e.source, "{{state}}", e.state, "{{sink}}", e.sink, "{{late}}", e.late).Replace(bundleSliding)
	p, err := spec.Parse("test.yaml", []byte(text), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run(t, p, engine.Options{UntilEpoch: 5})
	return p, []byte(text), root
}

// emitBundle writes the bundle of epoch ep into a new folder named name.
func emitBundle(t *testing.T, p *spec.Pipeline, text []byte, ep int64, name string) (string, *engine.BundleManifest) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	b, err := engine.EmitTestBundle(context.Background(), p, engine.EmitOptions{ReplayOptions: engine.ReplayOptions{Epoch: ep}, Spec: text, Dir: dir})
	if err != nil {
		t.Fatalf("emit epoch %d: %v", ep, err)
	}
	return dir, b
}

// editGolden changes one row of golden.txt (an output row's number).
func editGolden(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, engine.BundleGoldenFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^(output .*"clicks":)(\d+)`)
	loc := re.FindSubmatchIndex(data)
	if loc == nil {
		t.Fatalf("no output line with clicks in golden.txt:\n%s", data)
	}
	edited := append(append(append([]byte{}, data[:loc[4]]...), []byte("999")...), data[loc[5]:]...)
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEmitTestBundle: the bundle of epoch 3 (sliding windows, P=2, late and
// rejected rows) holds the epoch's inputs, the state of epoch 2 as a
// savepoint, a rewritten spec, golden lines equal to the replay's and a
// manifest; bundle.Check passes on it (at any parallelism), fails with the
// first differing line and the counts once one golden line is edited, and
// names a changed input file. Emitting writes nothing to the pipeline and
// refuses a non-empty folder.
func TestEmitTestBundle(t *testing.T) {
	ctx := context.Background()
	p, text, root := bundlePipeline(t)
	before := treeOf(t, root)
	dir, b := emitBundle(t, p, text, 3, "epoch-3")
	if after := treeOf(t, root); after != before {
		t.Fatalf("emitting a bundle wrote to the pipeline's folders:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	res, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := res.WriteText(&want); err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join(dir, engine.BundleGoldenFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(golden, want.Bytes()) {
		t.Fatalf("golden.txt is not the replay's lines:\n%s\nwant:\n%s", golden, want.Bytes())
	}
	var outputs, late, rejected int
	for _, l := range res.Lines() {
		switch {
		case strings.HasPrefix(l, "output "):
			outputs++
		case strings.HasPrefix(l, "late "):
			late++
		case strings.HasPrefix(l, "rejected "):
			rejected++
		}
	}
	t.Logf("epoch 3: %d output, %d late, %d rejected lines", outputs, late, rejected)
	if outputs == 0 || rejected == 0 {
		t.Fatalf("epoch 3 should have output and rejected rows: %d, %d", outputs, rejected)
	}

	// The layout.
	for _, f := range res.Files {
		if _, err := os.Stat(filepath.Join(dir, "inputs", f)); err != nil {
			t.Fatalf("input %s: %v", f, err)
		}
	}
	for _, f := range []string{"bundle.json", "spec.yaml", "golden.txt", "replay_test.go", ".gitattributes",
		"state/_savepoint.json", "state/_manifest.json", "state/_generation.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("the bundle lacks %s: %v", f, err)
		}
	}
	if b.Epoch != 3 || b.Parent == nil || b.Parent.Epoch != 2 || b.Parallelism != 2 || b.Watermark != res.Watermark ||
		len(b.Files) != len(res.Files) || b.GoldenLines != len(res.Lines()) || b.ManifestFormat != manifest.FormatVersion || b.StateFormat == 0 {
		t.Fatalf("bundle.json: %+v", b)
	}
	rb, err := engine.ReadBundleManifest(dir)
	if err != nil || rb.Epoch != 3 || rb.Inputs == nil || rb.Counters != res.Counters {
		t.Fatalf("bundle.json reads back as %+v, %v", rb, err)
	}
	src, _ := os.ReadFile(filepath.Join(dir, "replay_test.go"))
	if !strings.Contains(string(src), "package epoch_3_test") || !strings.Contains(string(src), `bundle.Check(t, ".")`) {
		t.Fatalf("replay_test.go:\n%s", src)
	}
	sp, _ := os.ReadFile(filepath.Join(dir, "spec.yaml"))
	if strings.Contains(string(sp), root) || !strings.Contains(string(sp), "# a comment the bundle keeps") {
		t.Fatalf("spec.yaml names the pipeline's folders or lost its comment:\n%s", sp)
	}
	t.Logf("spec.yaml:\n%s", sp)

	// Check passes, at the recorded parallelism and at others.
	ft := &fakeTB{TB: t}
	bundle.Check(ft, dir)
	if ft.failed {
		t.Fatalf("Check failed on a fresh bundle: %v", ft.msgs)
	}
	for _, par := range []int{1, 5} {
		got, _, err := engine.ReplayBundle(ctx, dir, engine.BundleReplayOptions{Parallelism: par})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_ = got.WriteText(&buf)
		if !bytes.Equal(buf.Bytes(), golden) {
			t.Fatalf("P=%d: the bundle replays differently", par)
		}
	}
	// The bundle does not depend on the pipeline's folders.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	ft = &fakeTB{TB: t}
	bundle.Check(ft, dir)
	if ft.failed {
		t.Fatalf("Check failed once the pipeline's folders were gone: %v", ft.msgs)
	}

	// One edited golden line fails, naming the line and the counts.
	editGolden(t, dir)
	ft = &fakeTB{TB: t}
	bundle.Check(ft, dir)
	if !ft.failed || len(ft.msgs) != 1 {
		t.Fatalf("Check passed with an edited golden.txt: %v", ft.msgs)
	}
	msg := ft.msgs[0]
	t.Logf("edited golden: %s", msg)
	for _, w := range []string{"first difference at line", `"clicks":999`, "2 lines differ: 1 only in replayed, 1 only in golden.txt"} {
		if !strings.Contains(msg, w) {
			t.Fatalf("the failure does not say %q:\n%s", w, msg)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, engine.BundleGoldenFile), golden, 0o644); err != nil {
		t.Fatal(err)
	}
	// Line endings changed by a checkout are a byte difference.
	if err := os.WriteFile(filepath.Join(dir, engine.BundleGoldenFile), bytes.TrimSuffix(golden, []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bundle.Verify(ctx, dir); err == nil || !strings.Contains(err.Error(), "bytes differ") {
		t.Fatalf("a golden.txt without its final newline: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, engine.BundleGoldenFile), golden, 0o644); err != nil {
		t.Fatal(err)
	}
	// A changed input file is named.
	in := filepath.Join(dir, "inputs", res.Files[0])
	data, _ := os.ReadFile(in)
	if err := os.WriteFile(in, append(data, []byte("{}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bundle.Verify(ctx, dir); err == nil || !strings.Contains(err.Error(), res.Files[0]) {
		t.Fatalf("a changed input file: %v", err)
	}
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bundle.Verify(ctx, dir); err != nil {
		t.Fatal(err)
	}
}

// TestEmitTestBundleEdges: the first epoch (no starting state: state/ is
// empty) and a Parquet source without a declared schema (the inferred
// schema travels as schema.parquet) make bundles that pass; a non-empty
// folder is refused.
func TestEmitTestBundleEdges(t *testing.T) {
	ctx := context.Background()
	p, text, _ := bundlePipeline(t)
	dir, b := emitBundle(t, p, text, 1, "first")
	if b.Parent != nil {
		t.Fatalf("epoch 1 has a parent: %+v", b.Parent)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "state")); len(ents) != 0 {
		t.Fatalf("state/ of the first epoch holds %d files", len(ents))
	}
	if err := bundle.Verify(ctx, dir); err != nil {
		t.Fatal(err)
	}
	_, err := engine.EmitTestBundle(ctx, p, engine.EmitOptions{ReplayOptions: engine.ReplayOptions{Epoch: 2}, Spec: text, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a non-empty folder: %v", err)
	}

	// Parquet source, schema inferred.
	e := fileEnv(t)
	for i := range 4 {
		var lines []string
		for j := range 6 {
			lines = append(lines, ev(fmt.Sprintf("00:%02d:%02d", i, j*7), fmt.Sprintf("u%d", j%3), j+i))
		}
		e.put(t, fmt.Sprintf("p%02d.parquet", i), parquetOf(t, lines))
	}
	ptext := strings.NewReplacer("{{source}}", e.source, "{{state}}", e.state, "{{sink}}", e.sink).Replace(`
name: bundle-parquet
source: {type: files, url: "{{source}}", format: parquet, event_time: event_time, max_files_per_epoch: 1}
operators:
  - window: {key: [user_id], tumbling: 1m, aggregates: {n: "count()", total: "sum(bytes)"}}
sink: {type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2}
`)
	pp, err := spec.Parse("p.yaml", []byte(ptext), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run(t, pp, engine.Options{})
	dir, b = emitBundle(t, pp, []byte(ptext), 3, "parquet")
	if b.Schema != engine.BundleSchemaFile || len(b.Files) != 1 || b.Files[0].Key != "p02.parquet" {
		t.Fatalf("bundle.json: %+v", b)
	}
	if err := bundle.Verify(ctx, dir); err != nil {
		t.Fatal(err)
	}
	golden, _ := os.ReadFile(filepath.Join(dir, engine.BundleGoldenFile))
	if !strings.Contains(string(golden), "output ") {
		t.Fatalf("epoch 3 of the Parquet pipeline emitted nothing:\n%s", golden)
	}
}

// TestEmitTestBundleGoTest is the must-show: the emitted bundle,
// placed in a fresh Go module that depends on floe (replaced by this
// checkout), passes `go test`, and fails once a golden row is edited.
func TestEmitTestBundleGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test in a subprocess")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(gomod)
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	p, text, _ := bundlePipeline(t)
	mod := t.TempDir()
	dir := filepath.Join(mod, "regress", "clicks-epoch3")
	if _, err := engine.EmitTestBundle(context.Background(), p, engine.EmitOptions{ReplayOptions: engine.ReplayOptions{Epoch: 3}, Spec: text, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": fmt.Sprintf("module bundletest\n\n%s\n\nrequire github.com/floe-dev/floe v0.0.0\n\nreplace github.com/floe-dev/floe => %s\n", goLine, repo),
		"go.sum": string(sum),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goTest := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "./...")
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	start := time.Now()
	out, err := goTest()
	t.Logf("go test (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("go test of the emitted bundle failed: %v", err)
	}
	if !strings.Contains(out, "ok  \tbundletest/regress/clicks-epoch3") {
		t.Fatalf("go test did not run the bundle's package:\n%s", out)
	}
	editGolden(t, dir)
	start = time.Now()
	out, err = goTest()
	t.Logf("go test with an edited golden row (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err == nil {
		t.Fatal("go test passed with an edited golden row")
	}
	for _, w := range []string{"FAIL", "TestReplayEpoch3", "first difference at line", `"clicks":999`} {
		if !strings.Contains(out, w) {
			t.Fatalf("go test's output does not say %q", w)
		}
	}
}

// parquetOf encodes JSON event lines (event_time, user_id, page, bytes)
// as a Parquet file.
func parquetOf(t *testing.T, lines []string) []byte {
	t.Helper()
	schema, err := formats.SchemaFromFields([]formats.Field{{Name: "event_time", Type: "timestamp"}, {Name: "user_id", Type: "string"},
		{Name: "page", Type: "string"}, {Name: "bytes", Type: "int64"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := formats.Decode("jsonl", "x.jsonl", jsonl(lines...), formats.DecodeOptions{Schema: schema, EventTime: "event_time", Mem: memory.DefaultAllocator})
	if err != nil || len(d.Rejects) > 0 {
		t.Fatalf("decode: %v %v", err, d.Rejects)
	}
	data, err := formats.EncodeParquet(schema, d.Batches, formats.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestEmitTestBundleRestoredGenerations: every retained epoch, including
// the first epochs of generations that began with a rollback, a reset, a
// savepoint restore (its state copied from the savepoint folder), a
// reprocess and a rescale, makes a bundle that replays to its golden lines,
// which are the pipeline's own replay lines.
func TestEmitTestBundleRestoredGenerations(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	replayInput(t, e, 14, 5)
	text := strings.NewReplacer("{{source}}", e.source, "{{state}}", e.state, "{{sink}}", e.sink, "{{late}}", e.late).Replace(bundleSliding)
	p, err := spec.Parse("test.yaml", []byte(text), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run(t, p, engine.Options{UntilEpoch: 3})
	if _, err := engine.CreateSavepoint(ctx, p, "sp", 2); err != nil {
		t.Fatal(err)
	}
	run(t, p, engine.Options{UntilEpoch: 4})
	// Each restore's first epoch stays on the head's lineage: the savepoint
	// restore (epoch 5) abandons 3-4, the rollback (7) abandons 6.
	for _, o := range []engine.Options{{FromSavepoint: "sp", UntilEpoch: 5}, {UntilEpoch: 6}, {RollbackTo: 5, UntilEpoch: 7},
		{ResetState: true, UntilEpoch: 8}, {ReprocessRejected: true, UntilEpoch: 9}, {Parallelism: 4}} {
		run(t, p, o)
	}
	head, err := engine.ReadState(ctx, p, engine.StateQuery{})
	if err != nil {
		t.Fatal(err)
	}
	restarts := map[string]bool{}
	for ep := int64(1); ep <= head.Epoch; ep++ {
		res, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: ep})
		if ep == 3 || ep == 4 || ep == 6 {
			// Abandoned: not on the head's lineage, refused
			// (replay_test.go).
			if err == nil || !strings.Contains(err.Error(), "not on the head's lineage") {
				t.Fatalf("epoch %d (abandoned): %v", ep, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("epoch %d: %v", ep, err)
		}
		dir, b := emitBundle(t, p, []byte(text), ep, fmt.Sprintf("e%d", ep))
		restarts[b.Restart] = true
		var want bytes.Buffer
		_ = res.WriteText(&want)
		golden, _ := os.ReadFile(filepath.Join(dir, engine.BundleGoldenFile))
		if !bytes.Equal(golden, want.Bytes()) {
			t.Fatalf("epoch %d: golden.txt is not the replay's lines", ep)
		}
		if err := bundle.Verify(ctx, dir); err != nil {
			t.Fatalf("epoch %d (%s): %v", ep, b.Restart, err)
		}
		t.Logf("epoch %d: restart %q, %d lines, parallelism %d", ep, b.Restart, b.GoldenLines, b.Parallelism)
	}
	for _, k := range []string{manifest.RestoreRollback, manifest.RestoreReset, manifest.RestoreSavepoint, manifest.RestoreReprocess} {
		if !restarts[k] {
			t.Fatalf("no bundle of a %s generation's first epoch (%v)", k, restarts)
		}
	}
}
