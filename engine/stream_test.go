package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"reflect"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// filterSpec is a window-less pipeline: its epochs stream.
const filterSpec = `
name: t
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, rejected_url: "{{rejected}}"}
operators:
  - filter: "bytes > 100"
  - project: {event_time: event_time, user_id: user_id, kb: "bytes / 1024", page: page}
sink:  {type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 1{{memory}}}
`

// streamEnv generates the data set of the streaming tests and returns the
// filter pipeline over it, with memory (a state.memory_limit, "" for the
// default).
func streamEnv(t *testing.T, gen datagen.Options, memory string) (*env, *spec.Pipeline) {
	e := fileEnv(t)
	e.rejected = fileURL(t.TempDir())
	genData(t, e, gen)
	if memory != "" {
		memory = ", memory_limit: " + memory
	}
	tmpl := strings.NewReplacer("{{rejected}}", e.rejected, "{{memory}}", memory).Replace(filterSpec)
	return e, e.pipeline(t, tmpl)
}

// sinkLines returns every committed output line (JSON lines sink), sorted.
func sinkLines(t testing.TB, p *spec.Pipeline) []string {
	t.Helper()
	ctx := context.Background()
	outs, err := engine.Outputs(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Open(ctx, p.Sink.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var lines []string
	for _, o := range outs {
		data, _, err := sink.Get(ctx, o)
		if err != nil {
			t.Fatalf("committed output %s: %v", o, err)
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")...)
	}
	slices.Sort(lines)
	return lines
}

var streamGen = datagen.Options{Rows: 80000, Files: 4, Users: 50, Span: 20 * time.Minute, Seed: 7,
	OutOfOrder: 5 * time.Second, MalformedFraction: 0.01}

// TestStreamedEpochWritesParts: a window-less epoch whose output exceeds
// the part size (a 16th of state.memory_limit, at least 1 MiB) is written
// as several attempt-tagged parts numbered in the subtask slot; the rows
// equal those of the same pipeline with the default (larger) budget, which
// writes one part; verify and replay --verify accept both.
func TestStreamedEpochWritesParts(t *testing.T) {
	ctx := context.Background()
	_, ref := streamEnv(t, streamGen, "")
	refRes := run(t, ref, engine.Options{})
	_, p := streamEnv(t, streamGen, "16MiB")
	res := run(t, p, engine.Options{})
	if res.Epochs != 1 || refRes.Epochs != 1 {
		t.Fatalf("epochs: %d and %d, want one each (a window-less epoch is not split)", res.Epochs, refRes.Epochs)
	}
	if res.Rows != refRes.Rows || res.RowsOut != refRes.RowsOut || res.RowsRejected != refRes.RowsRejected || res.RowsRejected == 0 {
		t.Fatalf("result %+v, want the reference's %+v (with rejected rows)", res, refRes)
	}
	want, got := sinkLines(t, ref), sinkLines(t, p)
	if !reflect.DeepEqual(got, want) || int64(len(got)) != res.RowsOut {
		t.Fatalf("%d rows, want the reference's %d (rows_out %d)", len(got), len(want), res.RowsOut)
	}
	for _, c := range []struct {
		p     *spec.Pipeline
		parts int // at least
		most  int
	}{{ref, 1, 1}, {p, 3, 100}} {
		m := headChain(t, c.p, 1)[0]
		if n := len(m.Outputs); n < c.parts || n > c.most {
			t.Fatalf("%d output parts, want %d to %d", n, c.parts, c.most)
		}
		var rows int64
		for i, o := range m.Outputs {
			info, ok := manifest.ParseOutputName(o.Path)
			if !ok || info.Subtask != i || o.Subtask != i || info.Epoch != m.Epoch || !strings.HasPrefix(m.Attempt, info.AttemptPrefix) {
				t.Fatalf("output %d is %s (%+v): want part %d of epoch %d by attempt %s", i, o.Path, info, i, m.Epoch, m.Attempt[:8])
			}
			rows += o.Rows
			if i < len(m.Outputs)-1 && o.Size < 1<<20 {
				t.Errorf("part %s has %d bytes: rolled before the 1 MiB part size", o.Path, o.Size)
			}
		}
		if rows != m.Counters.RowsOut {
			t.Fatalf("parts hold %d rows, counters say %d", rows, m.Counters.RowsOut)
		}
		rep, err := engine.Verify(ctx, c.p)
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("verify: %v %v", err, rep.Problems)
		}
		v, err := engine.VerifyReplay(ctx, c.p, engine.ReplayOptions{})
		if err != nil || !v.Identical() {
			t.Fatalf("replay --verify: %v %+v", err, v)
		}
	}
}

// TestStreamedEpochRowsEqualReplay: the rows a streamed epoch committed
// equal those replay produces for it by decoding and processing the whole
// epoch at once (the unstreamed path).
func TestStreamedEpochRowsEqualReplay(t *testing.T) {
	gen := streamGen
	gen.Rows, gen.Files = 3000, 3
	_, p := streamEnv(t, gen, "")
	run(t, p, engine.Options{})
	rp, err := engine.Replay(context.Background(), p, engine.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := sinkLines(t, p)
	want := slices.Clone(rp.Outputs)
	slices.Sort(want)
	if !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Fatalf("streamed rows (%d) differ from the replayed whole-epoch rows (%d)", len(got), len(want))
	}
}

// TestStreamedEpochCrashSweep kills a multi-part streamed run at every call
// to the sink store (crash after the call applied), then runs again: every
// row is committed exactly once and verify finds nothing wrong.
func TestStreamedEpochCrashSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("crash sweep")
	}
	gen := streamGen
	gen.Rows = 60000
	_, ref := streamEnv(t, gen, "")
	run(t, ref, engine.Options{})
	want := map[string][]string{"sink": sinkLines(t, ref)}
	streamCrashSweep(t, func() (*spec.Pipeline, func() []string) {
		e, p := streamEnv(t, gen, "16MiB")
		return p, func() []string { return partKeys(t, e.sink, "") }
	}, func(p *spec.Pipeline) map[string][]string { return map[string][]string{"sink": sinkLines(t, p)} }, want)
}

// streamCrashSweep kills a streamed run at every call to a sink store
// (crash after the call applied), then runs again, until a run passes
// every call: after each, rows of the pipeline (per sink) equal want, every
// row committed exactly once; verify finds nothing wrong; and the crashed
// attempt's parts are orphans that retention deleted, so the sinks hold
// exactly the committed parts. setup makes a fresh pipeline over the data
// and a listing of the part files in its sinks (as output paths).
func streamCrashSweep(t *testing.T, setup func() (*spec.Pipeline, func() []string), rows func(*spec.Pipeline) map[string][]string, want map[string][]string) {
	for at := 0; ; at++ {
		p, parts := setup()
		_, err := engine.Run(context.Background(), p, engine.Options{Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(n string, s store.Store) store.Store {
				if n != "sink" {
					return s
				}
				return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
			}})
		if err == nil {
			if at < 3 {
				t.Fatalf("no crash at sink call %d: the epoch wrote fewer than 3 parts", at)
			}
			t.Logf("crashed at each of %d sink calls", at)
			break
		}
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("crash at sink call %d: %v", at, err)
		}
		run(t, p, engine.Options{})
		got := rows(p)
		for name, w := range want {
			if !reflect.DeepEqual(got[name], w) {
				t.Fatalf("crash at sink call %d: %s: %d rows committed, want %d exactly once", at, name, len(got[name]), len(w))
			}
		}
		rep, err := engine.Verify(context.Background(), p)
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("crash at sink call %d: verify: %v %v", at, err, rep.Problems)
		}
		checkOnlyCommitted(t, p, parts(), fmt.Sprintf("crash at sink call %d", at))
	}
}

// checkOnlyCommitted fails unless parts, the part files found in the
// pipeline's sinks (as output paths), are exactly its committed outputs.
func checkOnlyCommitted(t *testing.T, p *spec.Pipeline, parts []string, what string) {
	t.Helper()
	outs, err := engine.Outputs(context.Background(), p)
	must(t, err)
	slices.Sort(outs)
	slices.Sort(parts)
	if !reflect.DeepEqual(parts, outs) {
		t.Fatalf("%s: sink holds %v, committed %v", what, parts, outs)
	}
}

// partKeys lists the part files under sink URL u, as output paths under
// dir ("" for a pipeline's first sink, "@<name>" for a further one);
// rejected rows (_rejected/) are not parts.
func partKeys(t *testing.T, u, dir string) []string {
	var parts []string
	for _, k := range listKeys(t, u) {
		if _, ok := manifest.ParseOutputName(k); ok && !strings.HasPrefix(k, "_") {
			if dir != "" {
				k = dir + "/" + k
			}
			parts = append(parts, k)
		}
	}
	return parts
}

// TestStreamedEpochBoundedHeap runs a filter pipeline over one epoch of a
// large generated input (80 files, about 80 MiB of JSON lines) and samples
// the live heap: streaming keeps it far below the input's size (the whole-
// epoch path held every file's bytes and decoded batches at once: its live
// heap grew by 66 MiB over half this input).
func TestStreamedEpochBoundedHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	gen := datagen.Options{Rows: 1000000, Files: 80, Users: 1000, Span: time.Hour, Seed: 3}
	e, p := streamEnv(t, gen, "64MiB")
	var input int64
	for _, k := range listKeys(t, e.source) {
		input += int64(len(mustRead(t, e, k)))
	}
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
		}
	}()
	res := run(t, p, engine.Options{})
	close(stop)
	wg.Wait()
	grew := int64(peak.Load()) - int64(base)
	t.Logf("input %d MiB in %d files, %d rows out in %d epoch(s); live heap grew at most %d MiB", input>>20, gen.Files, res.RowsOut, res.Epochs, grew>>20)
	if res.Epochs != 1 || res.RowsOut == 0 {
		t.Fatalf("result %+v, want one epoch with output", res)
	}
	if bound := int64(48 << 20); grew > bound || input <= bound {
		t.Fatalf("live heap grew by %d MiB over an input of %d MiB: not streaming (bound %d MiB)", grew>>20, input>>20, bound>>20)
	}
}

func mustRead(t *testing.T, e *env, key string) []byte {
	t.Helper()
	s, err := store.Open(context.Background(), e.source)
	must(t, err)
	defer s.Close()
	data, err := store.Read(context.Background(), s, key)
	must(t, err)
	return data
}

// TestStreamedEpochMidFileFailure: a Parquet file whose second row group is
// corrupt fails only after the rows of its first batch were written; the
// epoch starts over with the file rejected whole, as the whole-file decoder
// rejects it, and commits the other file's rows exactly once.
func TestStreamedEpochMidFileFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("large file")
	}
	e := fileEnv(t)
	e.rejected = fileURL(t.TempDir())
	d, bad := corruptParquet(t, datagen.Options{Rows: 150000, Files: 1, Seed: 5})
	small, err := formats.EncodeParquet(d.Batches[0].Schema(), d.Batches[:1], formats.EncodeOptions{})
	must(t, err)
	e.put(t, "a.parquet", small)
	e.put(t, "b.parquet", bad)
	tmpl := strings.NewReplacer("format: jsonl,\n", "format: parquet,\n", "{{rejected}}", e.rejected, "{{memory}}", "").Replace(filterSpec)
	p := e.pipeline(t, tmpl)
	res := run(t, p, engine.Options{})
	lines := sinkLines(t, p)
	if res.RowsRejected != 1 || int64(len(lines)) != res.RowsOut || res.RowsOut == 0 || res.RowsOut > d.Batches[0].NumRows() {
		t.Fatalf("result %+v with %d rows committed: want b.parquet rejected whole (one record) and only a.parquet's rows, once", res, len(lines))
	}
	m := headChain(t, p, 1)[0]
	if len(m.Outputs) != 1 || len(m.SideOutputs) != 1 {
		t.Fatalf("outputs %v side outputs %v: want one part and the rejected file", m.Outputs, m.SideOutputs)
	}
}

// corruptParquet generates gen's rows as a Parquet file of 100k-row row
// groups whose second row group's pages (the last fifth of the data, before
// the footer) are overwritten with garbage: it fails to decode only after
// its first batch. It returns the rows decoded and the corrupt file.
func corruptParquet(t *testing.T, gen datagen.Options) (*formats.Decoded, []byte) {
	t.Helper()
	var text []byte
	must(t, datagen.Generate(gen, func(name string, data []byte) error {
		text = data
		return nil
	}))
	schema, err := formats.SchemaFromFields([]formats.Field{{Name: "event_time", Type: "timestamp"}, {Name: "user_id", Type: "string"},
		{Name: "page", Type: "string"}, {Name: "bytes", Type: "int64"}})
	must(t, err)
	d, err := formats.Decode("jsonl", "gen.jsonl", text, formats.DecodeOptions{Schema: schema})
	must(t, err)
	data, err := formats.EncodeParquet(schema, d.Batches, formats.EncodeOptions{RowGroupRows: 100000})
	must(t, err)
	bad := bytes.Clone(data)
	for i := len(bad) * 85 / 100; i < len(bad)*95/100; i++ {
		bad[i] = byte(i * 7)
	}
	if _, err := formats.Decode("parquet", "b.parquet", bad, formats.DecodeOptions{Schema: schema}); err == nil {
		t.Fatal("the corrupted file decodes: the test corrupts nothing")
	}
	return d, bad
}

// TestMemoryLimitSplitsWindowedEpochs: a windowed plan decodes an epoch's
// files at once, so state.memory_limit splits a backlog into epochs whose
// files fit half the budget; the run says so once at info, and the drained
// windows equal those of an unsplit run.
func TestMemoryLimitSplitsWindowedEpochs(t *testing.T) {
	gen := datagen.Options{Rows: 120000, Files: 6, Users: 40, Span: 30 * time.Minute, Seed: 9}
	withLimit := func(limit string) (*spec.Pipeline, *engine.Result, string) {
		e := fileEnv(t)
		genData(t, e, gen)
		tmpl := strings.Replace(windowSpec, "max_files_per_epoch: 1,", "", 1)
		if limit != "" {
			tmpl = strings.Replace(tmpl, "parallelism: 2}", "parallelism: 2, memory_limit: "+limit+"}", 1)
		}
		p := e.pipeline(t, tmpl)
		var logs bytes.Buffer
		res := run(t, p, engine.Options{Drain: true, Log: slog.New(slog.NewTextHandler(&logs, nil))})
		return p, res, logs.String()
	}
	ref, refRes, refLog := withLimit("")
	p, res, log := withLimit("16MiB")
	// Epochs counts the drain epoch too.
	if refRes.Epochs != 2 || strings.Contains(refLog, "state.memory_limit") {
		t.Fatalf("unsplit run: %d epochs, want one with the files and the drain, without a split note", refRes.Epochs)
	}
	if res.Epochs < 4 || res.Files != 6 {
		t.Fatalf("run with a 16MiB budget: %d epochs over %d files, want the six files split into 3 or more epochs", res.Epochs, res.Files)
	}
	if n := strings.Count(log, "epoch split because of state.memory_limit"); n != 1 || !strings.Contains(log, "memory_limit=16MiB") || !strings.Contains(log, "level=INFO msg=\"epoch split") {
		t.Fatalf("split noted %d times (want once at info with the numbers):\n%s", n, log)
	}
	if got, want := committedRows(t, p), committedRows(t, ref); !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Fatalf("split run: %d windows, want the unsplit run's %d", len(got), len(want))
	}
}

// TestStreamedEpochIcebergParts: a window-less pipeline into a
// day-partitioned Iceberg table streams parts into each day's directory
// (one part series per day; a Parquet part's size grows as row groups of
// 128k rows are laid out); the table, read by iceberg-go, holds the rows of
// a files-sink run.
func TestStreamedEpochIcebergParts(t *testing.T) {
	gen := datagen.Options{Rows: 400000, Files: 4, Users: 50, Span: 36 * time.Hour, Seed: 13}
	tmpl := strings.NewReplacer("format: jsonl}", "format: parquet}", ", rejected_url: \"{{rejected}}\"", "").Replace(filterSpec)
	ref := fileEnv(t)
	genData(t, ref, gen)
	pref := ref.pipeline(t, strings.Replace(tmpl, "{{memory}}", "", 1))
	run(t, pref, engine.Options{})
	want := committedRows(t, pref)

	e := fileEnv(t)
	genData(t, e, gen)
	p := e.pipeline(t, strings.NewReplacer("sink:  {type: files, url: \"{{sink}}\", format: parquet}",
		"sink:  {type: iceberg, url: \"{{sink}}\", partition_by: day(event_time)}", "{{memory}}", ", memory_limit: 16MiB").Replace(tmpl))
	res := run(t, p, engine.Options{})
	sinkDir := strings.TrimPrefix(e.sink, "file://")
	got, epochs := tableRows(t, sinkDir)
	if !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Fatalf("table: %d rows, files sink: %d", len(got), len(want))
	}
	m := headChain(t, p, 1)[0]
	perDay := map[string][]int{}
	for _, o := range m.Outputs {
		info, ok := manifest.ParseOutputName(o.Path)
		if !ok || !strings.HasPrefix(o.Path, "data/day=") {
			t.Fatalf("output %s is not a day-partitioned data file", o.Path)
		}
		dir := path.Dir(o.Path)
		perDay[dir] = append(perDay[dir], info.Subtask)
	}
	multi := false
	for dir, parts := range perDay {
		for i, n := range parts {
			if n != i {
				t.Fatalf("%s: parts %v, want 0, 1, ...", dir, parts)
			}
		}
		multi = multi || len(parts) > 1
	}
	if len(perDay) < 2 || !multi {
		t.Fatalf("parts per day %v: want 2 days, one of them in several parts", perDay)
	}
	t.Logf("%d rows in %d epoch(s), parts per day %v, snapshots %v", len(got), res.Epochs, perDay, epochs)
}
