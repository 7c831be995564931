package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// TestLocationsCompareNormalised: a sink inside the source is refused
// however its URL is spelled (.., //, localhost, a symlink); mem:// is
// refused; side outputs may not share a place with the sink or state.
func TestLocationsCompareNormalised(t *testing.T) {
	e := fileEnv(t)
	dir := filepath.Dir(e.sourceDir)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(e.sourceDir, link); err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{
		"file://" + dir + "/other/../events/o",
		"file://" + dir + "//events/o",
		"file://localhost" + dir + "/events/o",
		"file://" + link + "/o",
	} {
		p := e.pipeline(t, windowSpec)
		p.Sink.URL = sink
		if _, err := engine.Run(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), "inside source.url") {
			t.Errorf("sink %s: %v; want it refused as inside the source", sink, err)
		}
	}
	if keys := listKeys(t, e.source); len(keys) != 0 {
		t.Fatalf("refused runs wrote into the source: %v", keys)
	}
	p := e.pipeline(t, windowSpec)
	p.Sink.URL = "mem://"
	if _, err := engine.Run(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), "mem://") {
		t.Errorf("mem sink: %v", err)
	}
	p = e.pipeline(t, strings.Replace(windowSpec, "max_files_per_epoch: 1,", `max_files_per_epoch: 1, late_url: "{{sink}}",`, 1))
	if _, err := engine.Run(context.Background(), p, engine.Options{}); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("late_url = sink.url: %v", err)
	}
}

// TestEditedOutputLogRefused: an output-log segment edited to name a path
// outside the sink, with its size and checksum and the manifest's own
// checksum fixed up to match, is refused when read: `floe outputs` never
// prints such a path.
func TestEditedOutputLogRefused(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{Drain: true})
	stateURL, err := engine.PipelineStateURL(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, stateURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	head, err := epoch.NewCommitter(st, nil, p.Name, nil).Peek(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := *head.Manifest
	if len(m.OutputLog) == 0 {
		t.Fatal("no output-log segment to edit")
	}
	evil := []byte("part-x.parquet\n../../../etc/secret.txt\n")
	seg := m.OutputLog[len(m.OutputLog)-1]
	if _, err := st.Put(ctx, seg.Path+".evil", evil, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	fixed := manifest.NewFileRef(seg.Path+".evil", evil)
	fixed.Rows = 2
	m.OutputLog = append(append([]manifest.FileRef(nil), m.OutputLog[:len(m.OutputLog)-1]...), fixed)
	m.Checksum = ""
	data, err := manifest.EncodeManifest(&m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, manifest.ManifestPath(m.Generation, m.Epoch), data, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	outs, err := engine.Outputs(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "escapes") {
		t.Fatalf("outputs of an edited log: %v, %v; want the bad line refused", outs, err)
	}
}

// TestEditedManifestRefused: a committed manifest changed in a way that
// still parses (a processed-file name, the emitted-through time) is
// refused before any row is read, naming the manifest; before format 2
// such edits processed a file twice or lost windows silently.
func TestEditedManifestRefused(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	e.put(t, "part-00003.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	e.put(t, "part-00013.jsonl", jsonl(ev("00:01:10", "u1", 1)))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{UntilEpoch: 1})
	stateURL, _ := engine.PipelineStateURL(p)
	key := manifest.ManifestPath(1, 1)
	path := filepath.Join(strings.TrimPrefix(stateURL, "file://"), filepath.FromSlash(key))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, edit := range [][2]string{{"part-00003", "part-00013"}, {`"emitted_through_us": `, `"emitted_through_us": 1`}} {
		if !strings.Contains(string(orig), edit[0]) {
			t.Fatalf("manifest lacks %q", edit[0])
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(orig), edit[0], edit[1], 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := engine.Run(ctx, p, engine.Options{Drain: true})
		if err == nil || !strings.Contains(err.Error(), key) || !errors.Is(err, manifest.ErrCorrupt) {
			t.Fatalf("edit %q: %v; want the manifest refused as corrupt", edit, err)
		}
		rep, err := engine.Verify(ctx, p)
		if err == nil && len(rep.Problems) == 0 {
			t.Fatalf("edit %q: verify found nothing", edit)
		}
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, p, engine.Options{Drain: true})
	if got := committedRows(t, p); len(got) != 2 {
		t.Fatalf("rows %v; want 2 windows", got)
	}
}

// TestRetentionFailureDoesNotFailTheRun: every DELETE of retention failing
// (after its epoch committed) is logged, not fatal; the next run collects
// what was left, and nothing committed is lost.
func TestRetentionFailureDoesNotFailTheRun(t *testing.T) {
	e := fileEnv(t)
	for i := range 6 {
		e.put(t, fmt.Sprintf("%d.jsonl", i), jsonl(ev(fmt.Sprintf("00:0%d:10", i), "u1", 1)))
	}
	p := e.pipeline(t, strings.Replace(windowSpec, "parallelism: 2}", "parallelism: 2, retain_epochs: 1}", 1))
	var faults []store.Fault
	for i := range 200 {
		faults = append(faults, store.Fault{Match: store.Match{Op: store.OpDelete}, At: i, Mode: store.Fail})
	}
	res, err := engine.Run(context.Background(), p, engine.Options{Drain: true, Retry: store.RetryPolicy{MaxAttempts: 1},
		WrapStore: func(n string, s store.Store) store.Store {
			if n != "state" {
				return s
			}
			return store.NewFaulty(s, store.FaultPlan{Faults: faults})
		}})
	if err != nil || res.Epochs != 7 {
		t.Fatalf("run with every retention delete failing: %v (%d epochs)", err, res.Epochs)
	}
	before := len(listKeys(t, e.state))
	run(t, p, engine.Options{})
	e.put(t, "9.jsonl", jsonl(ev("00:09:10", "u2", 1)))
	run(t, p, engine.Options{})
	if after := len(listKeys(t, e.state)); after >= before {
		t.Fatalf("later runs did not collect what failed retention left: %d objects before, %d after", before, after)
	}
	if rep, err := engine.Verify(context.Background(), p); err != nil || len(rep.Damaged) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// TestGuardRails: a file no row of which was accepted and files read after
// --drain are counted in the manifest; source.max_rejected_fraction fails
// an epoch before it commits, naming the worst file.
func TestGuardRails(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	e.put(t, "2.jsonl", jsonl(`{"event_time":"nope","user_id":"u1","page":"/p","bytes":1}`, `{"event_time":"x","user_id":"u2","page":"/p","bytes":1}`))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{Drain: true})
	e.put(t, "3.jsonl", jsonl(ev("00:05:10", "u1", 1)))
	run(t, p, engine.Options{})
	st, err := engine.ReadStatus(ctx, p)
	must(t, err)
	if c := st.Counters; c.FilesRejectedWhole != 1 || c.FilesAfterDrain != 1 || c.RowsLate != 1 {
		t.Fatalf("counters %+v; want 1 file rejected whole, 1 file after the drain (its row late)", c)
	}

	f := fileEnv(t)
	f.put(t, "a.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u1", 1), ev("00:00:30", "u1", 1)))
	f.put(t, "b.jsonl", jsonl(ev("00:00:40", "u1", 1), `{"event_time":"bad"}`, `{"event_time":"bad2"}`, `{"event_time":"bad3"}`))
	strict := strings.Replace(windowSpec, "max_files_per_epoch: 1,", "max_files_per_epoch: 2, max_rejected_fraction: 0.25,", 1)
	pf := f.pipeline(t, strict)
	_, err = engine.Run(ctx, pf, engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "max_rejected_fraction") || !strings.Contains(err.Error(), "b.jsonl") {
		t.Fatalf("3 of 7 rows rejected with max_rejected_fraction 0.25: %v; want the epoch refused naming b.jsonl", err)
	}
	for k := range snapshot(t, f.state, f.sink) {
		if strings.Contains(k, manifest.ManifestFile) || strings.Contains(k, "part-") {
			t.Fatalf("the refused epoch committed or wrote %s", k)
		}
	}
}

// TestChangedFileDetected: a processed input file rewritten with another
// size is warned about once, counted (files_changed) and not read again;
// the size log survives restarts and retention.
func TestChangedFileDetected(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{})
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:11", "u9", 7))) // rewritten in place
	e.put(t, "2.jsonl", jsonl(ev("00:01:10", "u2", 2)))
	res := run(t, p, engine.Options{})
	if res.Files != 1 {
		t.Fatalf("%d files read; want only the new one (a changed file is not read again)", res.Files)
	}
	st, err := engine.ReadStatus(ctx, p)
	must(t, err)
	if st.Counters.FilesChanged != 1 || !strings.Contains(st.Health, "1 input files changed after they were read") {
		t.Fatalf("files_changed %d, health %q; want 1, and the health line saying so", st.Counters.FilesChanged, st.Health)
	}
	// Recorded with its new size: later runs do not count it again.
	e.put(t, "3.jsonl", jsonl(ev("00:02:10", "u3", 3)))
	run(t, p, engine.Options{Drain: true})
	st, err = engine.ReadStatus(ctx, p)
	must(t, err)
	if st.Counters.FilesChanged != 1 {
		t.Fatalf("files_changed %d after another run, want still 1", st.Counters.FilesChanged)
	}
	if rows := committedRows(t, p); strings.Contains(strings.Join(rows, ";"), "u9") {
		t.Fatalf("the changed file was read again: %v", rows)
	}
}
