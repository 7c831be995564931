package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// multiSink is auctionGraph with four sinks: the top-n (first: the root
// sink), the per-category window (Parquet), a filter of the bids (a
// window-less stage) and one source read directly.
var multiSink = strings.Replace(auctionGraph, "  - name: top\n", `  - name: big
    input: bids
    filter: "price > 900"
  - name: top
`, 1)

func multiSinkSpec(root string) string { return withSinks(multiSink, root) }

// withSinks replaces auctionGraph's sinks block in tmpl.
func withSinks(tmpl, sinks string) string {
	const old = `sinks:
  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
`
	if !strings.Contains(tmpl, old) {
		panic("withSinks: the sinks block of auctionGraph changed")
	}
	return strings.Replace(tmpl, old, "sinks:\n"+sinks, 1)
}

const fourSinks = `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
  per-category: {input: per-category, type: files, url: "{{dir}}/per-category", format: parquet}
  big-bids: {input: big, type: files, url: "{{dir}}/big", format: jsonl}
  auctions: {input: auctions, type: files, url: "{{dir}}/auctions", format: jsonl}
`

// oneSink is a single-sink pipeline: sink name of fourSinks writing input
// in format, with only the sources and stages that input reads.
func oneSink(name, input, format string) string {
	sink := "sinks:\n  " + name + ": {input: " + input + `, type: files, url: "{{sink}}", format: ` + format + "}\n"
	head, rest, _ := strings.Cut(auctionGraph, "sources:\n")
	srcs, rest, _ := strings.Cut(rest, "stages:\n")
	stages, rest, _ := strings.Cut(rest, "sinks:\n")
	_, state, _ := strings.Cut(rest, "\n")
	auctions, bids, _ := strings.Cut(srcs, "  bids:\n")
	bids = "  bids:\n" + bids
	switch input {
	case "top":
	case "per-category":
		stages, _, _ = strings.Cut(stages, "  - name: top\n")
	case "big":
		return head + "sources:\n" + bids + "stages:\n  - name: big\n    input: bids\n    filter: \"price > 900\"\n" + sink + state
	case "auctions":
		return head + "sources:\n" + auctions + "stages:\n  - name: all\n    input: auctions\n    filter: \"true\"\n" + strings.Replace(sink, "input: auctions", "input: all", 1) + state
	default:
		panic("oneSink: unknown input " + input)
	}
	return head + "sources:\n" + srcs + "stages:\n" + stages + sink + state
}

func (g *graphEnv) pipelineWith(t *testing.T, tmpl string) *spec.Pipeline {
	t.Helper()
	return g.pipelineFrom(t, strings.ReplaceAll(tmpl, "{{dir}}", fileURL(filepath.Join(g.dir, "sinks"))))
}

// sinkRows reads what an exactly-once reader of sink name reads
// (engine.OutputURLs with --sink), decoded by the file's format, sorted.
func sinkRows(t *testing.T, p *spec.Pipeline, name string) []string {
	t.Helper()
	ctx := context.Background()
	urls, err := engine.OutputURLs(ctx, p, name)
	if err != nil {
		t.Fatalf("outputs of sink %s: %v", name, err)
	}
	var rows []string
	for _, u := range urls {
		data, err := os.ReadFile(strings.TrimPrefix(u, "file://"))
		if err != nil {
			t.Fatalf("committed output of sink %s: %v", name, err)
		}
		if strings.HasSuffix(u, ".parquet") {
			rows = append(rows, parquetRows(t, data)...)
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				rows = append(rows, l)
			}
		}
	}
	slices.Sort(rows)
	return rows
}

// sinkFiles lists the part files under a sink's folder.
func sinkFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "part-") {
			out = append(out, p)
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var fourSinkNames = []struct{ name, input, format, dir string }{
	{"out", "top", "jsonl", ""},
	{"per-category", "per-category", "parquet", "per-category"},
	{"big-bids", "big", "jsonl", "big"},
	{"auctions", "auctions", "jsonl", "auctions"},
}

// singleSinkRows runs, for each of fourSinks, the pipeline with only that
// sink over files input files, and returns each one's rows.
func singleSinkRows(t *testing.T, files int) map[string][]string {
	want := map[string][]string{}
	for _, s := range fourSinkNames {
		e := newGraphEnv(t)
		e.putAuctions(t, files)
		p := e.pipelineWith(t, oneSink(s.name, s.input, s.format))
		run(t, p, engine.Options{Drain: true})
		want[s.name] = sinkRows(t, p, s.name)
		if len(want[s.name]) == 0 {
			t.Fatalf("the pipeline with only sink %s wrote nothing", s.name)
		}
	}
	return want
}

// TestGraphSinks: a pipeline with four sinks writes to each what the same
// pipeline with that one sink writes, across rescales 2 -> 5 -> 3; every
// sink's committed files are listed (outputs --sink), in its own folder and
// format, and each sink carries the pipeline's marker.
func TestGraphSinks(t *testing.T) {
	want := singleSinkRows(t, 10)

	e := newGraphEnv(t)
	e.putAuctions(t, 10)
	p := e.pipelineWith(t, multiSinkSpec(fourSinks))
	run(t, p, engine.Options{UntilEpoch: 2})
	run(t, p, engine.Options{UntilEpoch: 4, Parallelism: 5})
	res := run(t, p, engine.Options{Drain: true, Parallelism: 3})
	var total int64
	for _, s := range fourSinkNames {
		got := sinkRows(t, p, s.name)
		if !reflect.DeepEqual(got, want[s.name]) {
			t.Fatalf("sink %s: %d rows, want %d (the pipeline with only that sink)\n%s", s.name, len(got), len(want[s.name]),
				diffLines(strings.Join(want[s.name], "\n"), strings.Join(got, "\n")))
		}
		total += int64(len(got))
		dir := strings.TrimPrefix(e.sink, "file://")
		if s.dir != "" {
			dir = filepath.Join(e.dir, "sinks", s.dir)
		}
		files := sinkFiles(t, dir)
		urls, err := engine.OutputURLs(context.Background(), p, s.name)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != len(urls) || len(files) == 0 {
			t.Fatalf("sink %s: %d part files in %s, %d committed", s.name, len(files), dir, len(urls))
		}
		for _, f := range files {
			if !strings.HasSuffix(f, "."+s.format) {
				t.Fatalf("sink %s (format %s) holds %s", s.name, s.format, f)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "_floe_pipeline.json")); err != nil {
			t.Fatalf("sink %s has no marker: %v", s.name, err)
		}
	}
	all, err := engine.OutputURLs(context.Background(), p, "")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, s := range fourSinkNames {
		urls, _ := engine.OutputURLs(context.Background(), p, s.name)
		n += len(urls)
	}
	if n != len(all) {
		t.Fatalf("outputs of every sink: %d, sum over the sinks: %d", len(all), n)
	}
	if _, err := engine.OutputURLs(context.Background(), p, "nope"); err == nil || !strings.Contains(err.Error(), "out, per-category, big-bids, auctions") {
		t.Fatalf("an unknown sink: %v, want an error naming the sinks", err)
	}
	// rows_out counts every sink's rows, over the three runs.
	st, err := engine.ReadStatusWith(context.Background(), p, engine.StatusOptions{NoList: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters.RowsOut != total {
		t.Fatalf("rows_out %d, the sinks hold %d rows (last run %d)", st.Counters.RowsOut, total, res.RowsOut)
	}

	// Every epoch replays to what it committed to each sink.
	for ep := res.LastEpoch - 5; ep <= res.LastEpoch; ep++ {
		v, err := engine.VerifyReplay(context.Background(), p, engine.ReplayOptions{Epoch: ep})
		if err != nil {
			t.Fatalf("replay epoch %d: %v", ep, err)
		}
		if !v.Identical() {
			t.Fatalf("replay epoch %d differs: %+v", ep, v.Diff)
		}
	}
}

// TestGraphSinksCrashSweep crashes a four-sink run at every sink-store call
// (every sink's writes, markers, listings and cleanup go through it), then
// recovers: every sink holds exactly the uninterrupted run's rows, and no
// file that no epoch committed.
func TestGraphSinksCrashSweep(t *testing.T) {
	ref := newGraphEnv(t)
	ref.putAuctions(t, 6)
	rp := ref.pipelineWith(t, multiSinkSpec(fourSinks))
	run(t, rp, engine.Options{Drain: true})
	want := map[string][]string{}
	for _, s := range fourSinkNames {
		want[s.name] = sinkRows(t, rp, s.name)
	}
	for at := 0; ; at++ {
		e := newGraphEnv(t)
		e.putAuctions(t, 6)
		p := e.pipelineWith(t, multiSinkSpec(fourSinks))
		run(t, p, engine.Options{UntilEpoch: 1})
		var calls atomic.Int64
		stores := map[store.Store]bool{}
		_, err := engine.Run(context.Background(), p, engine.Options{Drain: true, Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(n string, s store.Store) store.Store {
				if n != "sink" {
					return s
				}
				stores[s] = true // openStores opens one store at a time
				return &crashAfter{Store: s, calls: &calls, at: int64(at)}
			}})
		if err == nil {
			t.Logf("crashed at each of %d sink-store calls (over %d sink stores)", at, len(stores))
			if len(stores) != len(fourSinkNames) {
				t.Fatalf("%d sink stores opened, want %d", len(stores), len(fourSinkNames))
			}
			if at < 20 {
				t.Fatalf("only %d sink-store calls: the sweep exercises too little", at)
			}
			break
		}
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("at %d: %v", at, err)
		}
		run(t, p, engine.Options{Drain: true})
		for _, s := range fourSinkNames {
			if got := sinkRows(t, p, s.name); !reflect.DeepEqual(got, want[s.name]) {
				t.Fatalf("crash at sink call %d: sink %s: %d rows, want %d\n%s", at, s.name, len(got), len(want[s.name]),
					diffLines(strings.Join(want[s.name], "\n"), strings.Join(got, "\n")))
			}
		}
	}
}

// crashAfter counts calls over several stores (calls is shared): call at
// applies, then it and every later call return store.ErrCrashed.
type crashAfter struct {
	store.Store
	calls *atomic.Int64
	at    int64
}

func (c *crashAfter) do(apply func() error) error {
	n := c.calls.Add(1) - 1
	if n > c.at {
		return store.ErrCrashed
	}
	err := apply()
	if n == c.at {
		return fmt.Errorf("crash after call %d (%v): %w", n, err, store.ErrCrashed)
	}
	return err
}

func (c *crashAfter) Get(ctx context.Context, key string) (data []byte, tag string, err error) {
	err = c.do(func() error { data, tag, err = c.Store.Get(ctx, key); return err })
	return data, tag, err
}

func (c *crashAfter) Put(ctx context.Context, key string, data []byte, opts store.PutOptions) (tag string, err error) {
	err = c.do(func() error { tag, err = c.Store.Put(ctx, key, data, opts); return err })
	return tag, err
}

func (c *crashAfter) List(ctx context.Context, prefix string) (objs []store.ObjectInfo, err error) {
	err = c.do(func() error { objs, err = c.Store.List(ctx, prefix); return err })
	return objs, err
}

func (c *crashAfter) Delete(ctx context.Context, key string) error {
	return c.do(func() error { return c.Store.Delete(ctx, key) })
}

// TestGraphSinksIdentity: a sink may be added to a running pipeline (it
// receives the epochs from then on); a sink that committed outputs may not
// be removed, moved or put first, and every sink must be this pipeline's.
func TestGraphSinksIdentity(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 8)
	ctx := context.Background()
	one := e.pipelineWith(t, oneSink("out", "top", "jsonl"))
	run(t, one, engine.Options{UntilEpoch: 2})
	before := sinkRows(t, one, "out")

	two := withSinks(auctionGraph, `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
  per-category: {input: per-category, type: files, url: "{{dir}}/per-category", format: parquet}
`)
	p := e.pipelineWith(t, two)
	run(t, p, engine.Options{Drain: true})
	ref := newGraphEnv(t)
	ref.putAuctions(t, 8)
	rp := ref.pipelineWith(t, oneSink("out", "top", "jsonl"))
	run(t, rp, engine.Options{Drain: true})
	if got, want := sinkRows(t, p, "out"), sinkRows(t, rp, "out"); !reflect.DeepEqual(got, want) || len(got) <= len(before) {
		t.Fatalf("the first sink after a second was added: %d rows (%d before), want %d", len(got), len(before), len(want))
	}
	if got := sinkRows(t, p, "per-category"); len(got) == 0 {
		t.Fatal("the added sink received nothing")
	}

	refused := func(tmpl, want string) {
		t.Helper()
		q, err := spec.Parse("graph.yaml", []byte(e.spec(t, strings.ReplaceAll(tmpl, "{{dir}}", fileURL(filepath.Join(e.dir, "sinks"))))), e.dir)
		if err == nil {
			_, err = engine.Run(ctx, q, engine.Options{Drain: true})
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("run: %v, want an error containing %q", err, want)
		}
	}
	refused(oneSink("out", "top", "jsonl"), "sinks.per-category removed")
	refused(withSinks(auctionGraph, `  per-category: {input: per-category, type: files, url: "{{dir}}/per-category", format: parquet}
  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
`), "list it first again")
	refused(withSinks(auctionGraph, `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
  per-category: {input: per-category, type: files, url: "{{dir}}/per-category-2", format: parquet}
`), "sinks.per-category.url changed")
	refused(withSinks(auctionGraph, `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
  per-category: {input: per-category, type: files, url: "{{dir}}/per-category", format: jsonl}
`), "sinks.per-category.format changed")
	refused(withSinks(auctionGraph, `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
  per-category: {input: per-category, type: files, url: "{{sink}}/inner", format: parquet}
`), "one inside the other")
	refused(withSinks(auctionGraph, `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
  per-category: {input: per-category, type: files, url: "{{sink}}", format: parquet}
`), "same url as sinks.out.url")

	// A further sink that another pipeline owns is refused before anything
	// is written.
	other := newGraphEnv(t)
	other.putAuctions(t, 2)
	op := other.pipelineWith(t, strings.Replace(oneSink("out", "top", "jsonl"), "name: auctions\n", "name: other\n", 1))
	run(t, op, engine.Options{Drain: true})
	stolen := withSinks(auctionGraph, `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}
  per-category: {input: per-category, type: files, url: "{{dir}}/per-category", format: parquet}
  stolen: {input: top, type: files, url: "`+other.sink+`", format: jsonl}
`)
	refused(stolen, "belongs to another pipeline")
	if got := sinkRows(t, p, "out"); len(got) == 0 {
		t.Fatal("the refused runs lost committed outputs")
	}
}

// TestGraphSinksSavepointAndRollback: a four-sink pipeline restored from a
// savepoint and rolled back holds, in every sink, exactly the rows of an
// uninterrupted run (the abandoned epochs' files are no longer committed in
// any sink).
func TestGraphSinksSavepointAndRollback(t *testing.T) {
	ref := newGraphEnv(t)
	ref.putAuctions(t, 10)
	rp := ref.pipelineWith(t, multiSinkSpec(fourSinks))
	run(t, rp, engine.Options{Drain: true})

	e := newGraphEnv(t)
	e.putAuctions(t, 10)
	p := e.pipelineWith(t, multiSinkSpec(fourSinks))
	run(t, p, engine.Options{UntilEpoch: 3})
	if _, err := engine.CreateSavepoint(context.Background(), p, "mid", 0); err != nil {
		t.Fatalf("savepoint: %v", err)
	}
	run(t, p, engine.Options{UntilEpoch: 5})
	check := func(what string) {
		t.Helper()
		for _, s := range fourSinkNames {
			want := sinkRows(t, rp, s.name)
			if got := sinkRows(t, p, s.name); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: sink %s: %d rows, want %d\n%s", what, s.name, len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
			}
		}
	}
	run(t, p, engine.Options{FromSavepoint: "mid", Drain: true, Parallelism: 3})
	check("restored from a savepoint taken at epoch 3")
	run(t, p, engine.Options{RollbackTo: 8, Drain: true})
	check("rolled back to epoch 8")
}

// TestGraphSinksIceberg: an Iceberg table as the first sink and a files
// sink after it: the table (read by iceberg-go alone) holds the rows of the
// pipeline with only the table, and none of the other sink's files.
func TestGraphSinksIceberg(t *testing.T) {
	table := `{input: per-category, type: iceberg, url: "{{sink}}"}`
	ref := newGraphEnv(t)
	ref.putAuctions(t, 8)
	rp := ref.pipelineWith(t, strings.Replace(oneSink("per-category", "per-category", "parquet"),
		`{input: per-category, type: files, url: "{{sink}}", format: parquet}`, table, 1))
	run(t, rp, engine.Options{Drain: true})
	want, _ := tableRows(t, strings.TrimPrefix(ref.sink, "file://"))
	if len(want) == 0 {
		t.Fatal("the table-only pipeline wrote no rows")
	}
	wantTop := singleSinkRows(t, 8)["out"]

	e := newGraphEnv(t)
	e.putAuctions(t, 8)
	p := e.pipelineWith(t, withSinks(auctionGraph, "  per-category: "+table+"\n"+
		`  out: {input: top, type: files, url: "{{dir}}/top", format: jsonl}`+"\n"))
	run(t, p, engine.Options{UntilEpoch: 3})
	run(t, p, engine.Options{Drain: true, Parallelism: 3})
	got, epochs := tableRows(t, strings.TrimPrefix(e.sink, "file://"))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("table with a second sink: %d rows, want %d (snapshots of epochs %v)\n%s", len(got), len(want), epochs,
			diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	if got := sinkRows(t, p, "out"); !reflect.DeepEqual(got, wantTop) {
		t.Fatalf("the files sink beside a table: %d rows, want %d", len(got), len(wantTop))
	}
	refused := withSinks(auctionGraph, `  out: {input: top, type: files, url: "{{sink}}", format: jsonl}`+"\n"+
		`  per-category: {input: per-category, type: iceberg, url: "{{dir}}/table"}`+"\n")
	q, err := spec.Parse("graph.yaml", []byte(e.spec(t, strings.ReplaceAll(refused, "{{dir}}", fileURL(filepath.Join(e.dir, "sinks2"))))), e.dir)
	if err == nil {
		_, err = engine.Run(context.Background(), q, engine.Options{})
	}
	if err == nil || !strings.Contains(err.Error(), "an iceberg sink must be the pipeline's first sink") {
		t.Fatalf("an iceberg sink after a files sink: %v", err)
	}
}

// sinkDir is the folder of one of fourSinkNames in env e.
func (g *graphEnv) sinkDir(s struct{ name, input, format, dir string }) string {
	if s.dir == "" {
		return strings.TrimPrefix(g.sink, "file://")
	}
	return filepath.Join(g.dir, "sinks", s.dir)
}

// checkSinksExact fails unless every sink of fourSinkNames holds exactly
// the part files its committed outputs name (outside _rejected/).
func checkSinksExact(t *testing.T, g *graphEnv, p *spec.Pipeline, what string) {
	t.Helper()
	for _, s := range fourSinkNames {
		urls, err := engine.OutputURLs(context.Background(), p, s.name)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, u := range urls {
			want[strings.TrimPrefix(u, "file://")] = true
		}
		var extra []string
		for _, f := range sinkFiles(t, g.sinkDir(s)) {
			if strings.Contains(f, "/_rejected/") {
				continue
			}
			if !want[f] {
				extra = append(extra, filepath.Base(f))
			}
			delete(want, f)
		}
		if len(extra) > 0 || len(want) > 0 {
			t.Fatalf("%s: sink %s holds %d files no epoch committed %v, and misses %d committed ones %v", what, s.name, len(extra), extra, len(want), want)
		}
	}
}

// TestGraphSinksOrphans: a file of an attempt that never committed, of an
// epoch older than the retained ones, is deleted from every sink of the
// graph, not only the first (docs/graph.md: each sink deletes files in its
// location that no epoch committed).
func TestGraphSinksOrphans(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 12)
	p := e.pipelineWith(t, strings.Replace(multiSinkSpec(fourSinks), "parallelism: 2}", "parallelism: 2, retain_epochs: 2}", 1))
	run(t, p, engine.Options{UntilEpoch: 4})
	var fakes []string
	for _, s := range fourSinkNames {
		files := sinkFiles(t, e.sinkDir(s))
		if len(files) == 0 {
			t.Fatalf("sink %s holds nothing after 4 epochs", s.name)
		}
		data, err := os.ReadFile(files[0])
		must(t, err)
		fake := filepath.Join(e.sinkDir(s), "part-g000001-e0000000001-s0000-deadbeef."+s.format)
		must(t, os.WriteFile(fake, data, 0o644))
		fakes = append(fakes, fake)
	}
	run(t, p, engine.Options{Drain: true})
	for _, f := range fakes {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("orphan %s is still there after a run", f)
		}
	}
	checkSinksExact(t, e, p, "after a run")
}
