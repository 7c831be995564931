package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// keylessGraph is a graph pipeline without a keyed stage: two sources (JSON
// lines with malformed rows, Parquet), filters, a projection and a lookup,
// and two sinks (JSON lines; Parquet partitioned by the looked-up tier).
// Its epochs stream.
const keylessGraph = `
name: keyless
sources:
  clicks:
    type: files
    url: "{{clicks}}"
    format: jsonl
    schema: {event_time: timestamp, user_id: string, page: string, bytes: int64}
    event_time: event_time
    rejected_url: "{{rejected}}"
  views:
    type: files
    url: "{{views}}"
    format: parquet
    event_time: event_time
    rejected_url: "{{rejected}}"
stages:
  - {name: big, input: clicks, filter: "bytes > 100"}
  - {name: kb, input: big, project: {event_time: event_time, user_id: user_id, kb: "bytes / 1024", page: page}}
  - {name: heavy, input: views, filter: "bytes > 500"}
  - name: tiers
    input: heavy
    lookup: {url: "{{table}}", format: jsonl, schema: {user_id: string, tier: string}, on: [user_id]}
sinks:
  out: {input: kb, type: files, url: "{{sink}}", format: jsonl}
  views: {input: tiers, type: files, url: "{{views_out}}", format: parquet, partition_by: [tier]}
state: {url: "{{state}}", parallelism: 2{{memory}}}
`

// keylessEnv is where one keyless graph pipeline keeps its folders.
type keylessEnv struct {
	dir                                                   string
	clicks, views, table, sink, viewsOut, state, rejected string
}

func newKeylessEnv(t *testing.T) *keylessEnv {
	d := t.TempDir()
	e := &keylessEnv{dir: d}
	for _, x := range []struct {
		p   *string
		sub string
	}{{&e.clicks, "in/clicks"}, {&e.views, "in/views"}, {&e.table, "in/tiers"}, {&e.sink, "out"}, {&e.viewsOut, "views-out"},
		{&e.state, "state"}, {&e.rejected, "rejected"}} {
		p := filepath.Join(d, x.sub)
		must(t, os.MkdirAll(p, 0o755))
		*x.p = fileURL(p)
	}
	return e
}

func (e *keylessEnv) path(u string) string { return strings.TrimPrefix(u, "file://") }

// putData writes the clicks (JSON lines) and views (Parquet) data sets and
// the tier table (users u1..u30; others have no tier and are dropped).
func (e *keylessEnv) putData(t *testing.T, clicks, views datagen.Options) {
	must(t, datagen.Generate(clicks, func(name string, data []byte) error {
		return os.WriteFile(filepath.Join(e.path(e.clicks), name), data, 0o644)
	}))
	views.Format = "parquet"
	must(t, datagen.Generate(views, func(name string, data []byte) error {
		return os.WriteFile(filepath.Join(e.path(e.views), name), data, 0o644)
	}))
	var rows []string
	for u := 1; u <= 30; u++ {
		rows = append(rows, fmt.Sprintf(`{"user_id":"u%d","tier":"t%d"}`, u, u%3))
	}
	must(t, os.WriteFile(filepath.Join(e.path(e.table), "tiers.jsonl"), jsonl(rows...), 0o644))
}

func (e *keylessEnv) pipeline(t *testing.T, memory string) *spec.Pipeline {
	t.Helper()
	return e.pipelineOf(t, keylessGraph, memory)
}

// pipelineOf parses tmpl (keylessGraph or a variant) for the env.
func (e *keylessEnv) pipelineOf(t *testing.T, tmpl, memory string) *spec.Pipeline {
	t.Helper()
	if memory != "" {
		memory = ", memory_limit: " + memory
	}
	r := strings.NewReplacer("{{clicks}}", e.clicks, "{{views}}", e.views, "{{table}}", e.table, "{{sink}}", e.sink,
		"{{views_out}}", e.viewsOut, "{{state}}", e.state, "{{rejected}}", e.rejected, "{{memory}}", memory)
	p, err := spec.Parse("test.yaml", []byte(r.Replace(tmpl)), t.TempDir())
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return p
}

var (
	keylessClicks = datagen.Options{Rows: 80000, Files: 3, Users: 50, Span: 20 * time.Minute, Seed: 7, MalformedFraction: 0.01}
	keylessViews  = datagen.Options{Rows: 60000, Files: 3, Users: 50, Span: 20 * time.Minute, Seed: 8}
)

// checkParts checks that the epoch's outputs are numbered 0, 1, ... in the
// subtask slot per sink directory, by its attempt, and returns the number
// of parts per directory.
func checkParts(t *testing.T, m *manifest.Manifest) map[string]int {
	t.Helper()
	per := map[string]int{}
	for _, o := range m.Outputs {
		info, ok := manifest.ParseOutputName(o.Path)
		dir := ""
		if i := strings.LastIndexByte(o.Path, '/'); i >= 0 {
			dir = o.Path[:i]
		}
		if !ok || info.Epoch != m.Epoch || !strings.HasPrefix(m.Attempt, info.AttemptPrefix) || info.Subtask != per[dir] || o.Subtask != per[dir] {
			t.Fatalf("output %s (%+v): want part %d of %q, epoch %d, attempt %s", o.Path, info, per[dir], dir, m.Epoch, m.Attempt[:8])
		}
		per[dir]++
	}
	return per
}

// TestKeylessGraphStreams: a graph pipeline without a keyed stage, two
// sources into two sinks, at a 16MiB budget streams its one epoch (the
// budget does not split it) into several parts per sink; every sink's rows
// equal those the unstreamed path computes for the epoch (replay decodes and
// runs the whole epoch at once), and equal the rows of the same pipeline
// at the default budget; verify and replay --verify accept both.
func TestKeylessGraphStreams(t *testing.T) {
	ctx := context.Background()
	ref := newKeylessEnv(t)
	ref.putData(t, keylessClicks, keylessViews)
	pref := ref.pipeline(t, "")
	refRes := run(t, pref, engine.Options{})

	e := newKeylessEnv(t)
	e.putData(t, keylessClicks, keylessViews)
	p := e.pipeline(t, "16MiB")
	res := run(t, p, engine.Options{})
	if res.Epochs != 1 || refRes.Epochs != 1 {
		t.Fatalf("epochs: %d and %d, want one each (a streamed epoch is not split by the budget)", res.Epochs, refRes.Epochs)
	}
	if res.Rows != refRes.Rows || res.RowsOut != refRes.RowsOut || res.RowsRejected != refRes.RowsRejected || res.RowsRejected == 0 {
		t.Fatalf("result %+v, want the reference's %+v (with rejected rows)", res, refRes)
	}
	m := headChain(t, p, 1)[0]
	per := checkParts(t, m)
	views := 0
	for dir, n := range per {
		if strings.HasPrefix(dir, "@views/tier=") {
			views += n
		}
	}
	if per[""] < 3 || views < 3 {
		t.Fatalf("parts per directory %v: want 3 or more of the first sink, and one or more per tier of the second", per)
	}
	if n := len(checkParts(t, headChain(t, pref, 1)[0])); n != 4 {
		t.Fatalf("the reference wrote %d directories, want the first sink's and 3 tiers", n)
	}

	rp, err := engine.Replay(ctx, p, engine.ReplayOptions{})
	must(t, err)
	want := slices.Clone(rp.Outputs)
	slices.Sort(want)
	if got := sinkRows(t, p, "out"); !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Fatalf("first sink: %d rows streamed, the unstreamed epoch computes %d", len(got), len(want))
	}
	for _, name := range []string{"out", "views"} {
		got, ref := sinkRows(t, p, name), sinkRows(t, pref, name)
		if !reflect.DeepEqual(got, ref) || len(got) == 0 {
			t.Fatalf("sink %s: %d rows, the default budget's run %d", name, len(got), len(ref))
		}
	}
	// One file per source and epoch: the next epoch's files are prefetched
	// (decoded whole, then routed through the stages when taken).
	one := newKeylessEnv(t)
	one.putData(t, keylessClicks, keylessViews)
	pone := one.pipeline(t, "")
	pone.Sources[0].Source.MaxFilesPerEpoch, pone.Sources[1].Source.MaxFilesPerEpoch = 1, 1
	if r := run(t, pone, engine.Options{}); r.Epochs != 3 || r.RowsOut != res.RowsOut {
		t.Fatalf("one file per source and epoch: %+v, want 3 epochs and %d rows out", r, res.RowsOut)
	}
	for _, name := range []string{"out", "views"} {
		if got, ref := sinkRows(t, pone, name), sinkRows(t, pref, name); !reflect.DeepEqual(got, ref) {
			t.Fatalf("sink %s, one file per source and epoch: %d rows, the one epoch's %d", name, len(got), len(ref))
		}
	}
	for _, q := range []*spec.Pipeline{p, pref, pone} {
		rep, err := engine.Verify(ctx, q)
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("verify: %v %v", err, rep.Problems)
		}
		v, err := engine.VerifyReplay(ctx, q, engine.ReplayOptions{})
		if err != nil || !v.Identical() {
			t.Fatalf("replay --verify (the unstreamed path over the epoch): %v %+v %v", err, v.Diff, v.Counters)
		}
	}
	t.Logf("parts per directory %v, %d rows out", per, res.RowsOut)
}

// TestKeylessGraphStreamsIntoIceberg: a keyless graph whose first sink is
// a day-partitioned Iceberg table streams its parts into each day's data
// directory (numbered per directory); the table, read by iceberg-go, holds
// the rows a Parquet files sink gets, and the further sink beside it its
// own rows.
func TestKeylessGraphStreamsIntoIceberg(t *testing.T) {
	clicks := keylessClicks
	clicks.Span = 36 * time.Hour
	const files = `out: {input: kb, type: files, url: "{{sink}}", format: jsonl}`
	ref := newKeylessEnv(t)
	ref.putData(t, clicks, keylessViews)
	pref := ref.pipelineOf(t, strings.Replace(keylessGraph, files, strings.Replace(files, "jsonl", "parquet", 1), 1), "")
	run(t, pref, engine.Options{})

	e := newKeylessEnv(t)
	e.putData(t, clicks, keylessViews)
	p := e.pipelineOf(t, strings.Replace(keylessGraph, files, `out: {input: kb, type: iceberg, url: "{{sink}}", partition_by: day(event_time)}`, 1), "16MiB")
	if res := run(t, p, engine.Options{}); res.Epochs != 1 {
		t.Fatalf("%d epochs, want one", res.Epochs)
	}
	got, _ := tableRows(t, e.path(e.sink))
	if want := sinkRows(t, pref, "out"); !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Fatalf("table: %d rows, the files sink: %d", len(got), len(want))
	}
	if got, want := sinkRows(t, p, "views"), sinkRows(t, pref, "views"); !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Fatalf("the sink beside the table: %d rows, want %d", len(got), len(want))
	}
	days := 0
	for dir := range checkParts(t, headChain(t, p, 1)[0]) {
		if strings.HasPrefix(dir, "data/") {
			days++
		}
	}
	if days < 2 {
		t.Fatalf("%d day directories in the table, want 2", days)
	}
}

// TestKeylessGraphCrashSweep kills a streamed keyless graph run at every
// call to its sinks (crash after the call applied), then runs again: every
// row of both sinks is committed exactly once, verify finds nothing wrong,
// and retention leaves exactly the committed parts in the sinks.
func TestKeylessGraphCrashSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("crash sweep")
	}
	clicks, views := keylessClicks, keylessViews
	clicks.Rows, views.Rows = 60000, 20000
	ref := newKeylessEnv(t)
	ref.putData(t, clicks, views)
	pref := ref.pipeline(t, "")
	run(t, pref, engine.Options{})
	rows := func(p *spec.Pipeline) map[string][]string {
		return map[string][]string{"out": sinkRows(t, p, "out"), "views": sinkRows(t, p, "views")}
	}
	streamCrashSweep(t, func() (*spec.Pipeline, func() []string) {
		e := newKeylessEnv(t)
		e.putData(t, clicks, views)
		return e.pipeline(t, "16MiB"), e.parts(t)
	}, rows, rows(pref))
}

// parts lists the part files in the env's sinks, as output paths.
func (e *keylessEnv) parts(t *testing.T) func() []string {
	return func() []string { return append(partKeys(t, e.sink, ""), partKeys(t, e.viewsOut, "@views")...) }
}

// TestKeylessGraphMidFileFailure: a Parquet file of the views source whose
// second row group is corrupt fails only after rows of its first batch were
// written; the epoch starts over with the file rejected whole (as the
// unstreamed decoder rejects it) and commits the other files' rows exactly
// once, in both sinks.
func TestKeylessGraphMidFileFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("large file")
	}
	e := newKeylessEnv(t)
	clicks := keylessClicks
	clicks.Rows, clicks.Files, clicks.MalformedFraction = 3000, 1, 0
	e.putData(t, clicks, datagen.Options{Rows: 1000, Files: 1, Users: 50, Seed: 8})
	_, bad := corruptParquet(t, datagen.Options{Rows: 150000, Files: 1, Users: 50, Seed: 5})
	// Named after the generated file: it sorts after it.
	must(t, os.WriteFile(filepath.Join(e.path(e.views), "zz-bad.parquet"), bad, 0o644))
	p := e.pipeline(t, "")
	var logs bytes.Buffer
	res := run(t, p, engine.Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "the epoch starts again with the file rejected whole") {
		t.Fatalf("no restart of the epoch logged: the bad file failed before any of its rows were written:\n%s", logs.String())
	}
	if res.RowsRejected != 1 || res.Files != 3 || res.Epochs != 1 {
		t.Fatalf("result %+v: want one epoch over 3 files with zz-bad.parquet rejected whole (one record)", res)
	}
	m := headChain(t, p, 1)[0]
	if len(m.SideOutputs) != 1 {
		t.Fatalf("side outputs %v: want the rejected file", m.SideOutputs)
	}
	var rows int64
	for _, o := range m.Outputs {
		rows += o.Rows
	}
	views := sinkRows(t, p, "views")
	if rows != res.RowsOut || int64(len(sinkRows(t, p, "out"))+len(views)) != rows || len(views) == 0 || len(views) > 1000 {
		t.Fatalf("%d rows committed (rows_out %d), %d in views: want only the good files' rows, once", rows, res.RowsOut, len(views))
	}
	// The first attempt wrote a part of the bad file's rows before it
	// failed; the committed epoch is a later attempt's, and the orphans are
	// gone from the sinks.
	checkOnlyCommitted(t, p, e.parts(t)(), "after the restarted epoch")
	v, err := engine.VerifyReplay(context.Background(), p, engine.ReplayOptions{})
	if err != nil || !v.Identical() {
		t.Fatalf("replay --verify: %v %+v %v", err, v.Diff, v.Counters)
	}
}

// TestMemoryLimitSplitsKeyedGraphEpochs: a graph with a keyed stage decodes
// an epoch's files at once, so state.memory_limit splits a backlog into
// epochs whose files fit half the budget, as for the linear form's window;
// the drained windows equal those of an unsplit run.
func TestMemoryLimitSplitsKeyedGraphEpochs(t *testing.T) {
	const keyed = `
name: keyed
sources:
  clicks:
    type: files
    url: "{{clicks}}"
    format: jsonl
    schema: {event_time: timestamp, user_id: string, page: string, bytes: int64}
    event_time: event_time
stages:
  - {name: big, input: clicks, filter: "bytes > 100"}
  - name: per-user
    input: big
    window: {key: [user_id], tumbling: 1m, aggregates: {clicks: "count()", total: "sum(bytes)"}}
sinks:
  out: {input: per-user, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2{{memory}}}
`
	gen := datagen.Options{Rows: 120000, Files: 6, Users: 40, Span: 30 * time.Minute, Seed: 9}
	withLimit := func(limit string) (*spec.Pipeline, *engine.Result) {
		e := newKeylessEnv(t)
		must(t, datagen.Generate(gen, func(name string, data []byte) error {
			return os.WriteFile(filepath.Join(e.path(e.clicks), name), data, 0o644)
		}))
		if limit != "" {
			limit = ", memory_limit: " + limit
		}
		r := strings.NewReplacer("{{clicks}}", e.clicks, "{{sink}}", e.sink, "{{state}}", e.state, "{{memory}}", limit)
		p, err := spec.Parse("test.yaml", []byte(r.Replace(keyed)), t.TempDir())
		must(t, err)
		return p, run(t, p, engine.Options{Drain: true})
	}
	ref, refRes := withLimit("")
	p, res := withLimit("16MiB")
	if refRes.Epochs != 2 {
		t.Fatalf("unsplit run: %d epochs, want one with the files and the drain", refRes.Epochs)
	}
	if res.Epochs < 4 || res.Files != 6 {
		t.Fatalf("run with a 16MiB budget: %d epochs over %d files, want the six files split into 3 or more epochs", res.Epochs, res.Files)
	}
	if got, want := sinkRows(t, p, "out"), sinkRows(t, ref, "out"); !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Fatalf("split run: %d windows, want the unsplit run's %d", len(got), len(want))
	}
}
