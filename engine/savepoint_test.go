package engine_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

var spGen = datagen.Options{Rows: 3000, Files: 8, Users: 30, Span: 16 * time.Minute, Seed: 21, OutOfOrder: 10 * time.Second, LateFraction: 0.02}

// spRef returns the rows of an uninterrupted, drained run over spGen.
func spRef(t *testing.T) []string {
	ref := fileEnv(t)
	genData(t, ref, spGen)
	p := ref.pipeline(t, windowSpec)
	run(t, p, engine.Options{Drain: true})
	return committedRows(t, p)
}

// copyAll copies every object under one store URL to another (as aws s3
// sync or cp -r would).
func copyAll(t *testing.T, from, to string) {
	ctx := context.Background()
	src, err := store.Open(ctx, from)
	must(t, err)
	defer src.Close()
	dst, err := store.Open(ctx, to)
	must(t, err)
	defer dst.Close()
	objs, err := src.List(ctx, "")
	must(t, err)
	for _, o := range objs {
		data, _, err := src.Get(ctx, o.Key)
		must(t, err)
		_, err = dst.Put(ctx, o.Key, data, store.PutOptions{})
		must(t, err)
	}
}

// deleteAll deletes every object under a store URL.
func deleteAll(t *testing.T, u string) {
	ctx := context.Background()
	s, err := store.Open(ctx, u)
	must(t, err)
	defer s.Close()
	objs, err := s.List(ctx, "")
	must(t, err)
	for _, o := range objs {
		must(t, s.Delete(ctx, o.Key))
	}
}

func withPath(t *testing.T, u, sub string) string {
	x, err := url.Parse(u)
	must(t, err)
	x.Path = strings.TrimSuffix(x.Path, "/") + "/" + sub
	return x.String()
}

// TestSavepointPortable: a savepoint copied to another place restores after
// the pipeline's whole state is deleted; the committed outputs equal an
// uninterrupted run's, nothing of the abandoned epochs counted twice.
func TestSavepointPortable(t *testing.T) {
	want := spRef(t)
	bothEnvs(t, func(t *testing.T, newEnv func(testing.TB) *env) {
		ctx := context.Background()
		e := newEnv(t)
		genData(t, e, spGen)
		p := e.pipeline(t, windowSpec)
		run(t, p, engine.Options{UntilEpoch: 3})
		sp, err := engine.CreateSavepoint(ctx, p, "before-deploy", 0)
		if err != nil || sp.Epoch != 3 || !sp.Complete {
			t.Fatalf("create: %+v %v", sp, err)
		}
		if _, err := engine.CreateSavepoint(ctx, p, "before-deploy", 0); err == nil {
			t.Fatal("a second savepoint of the same name was accepted")
		}
		run(t, p, engine.Options{UntilEpoch: 6}) // run on: epochs 4-6 will be abandoned
		spURL, err := engine.SavepointURL(p, "before-deploy")
		must(t, err)
		elsewhere := withPath(t, e.late, "moved-savepoint") // another prefix / folder
		copyAll(t, spURL, elsewhere)
		stateURL, err := engine.PipelineStateURL(p)
		must(t, err)
		deleteAll(t, stateURL)

		res := run(t, p, engine.Options{FromSavepoint: elsewhere, Drain: true})
		if res.FirstEpoch != 4 {
			t.Fatalf("restored run started at epoch %d, want 4 (the savepoint's next)", res.FirstEpoch)
		}
		if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("restored from a moved savepoint: %d rows, want %d\n%s", len(got), len(want),
				diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
		}
		rep, err := engine.Verify(ctx, p)
		if err != nil || len(rep.Damaged) > 0 {
			t.Fatalf("verify: %v %v", err, rep.Problems)
		}
	})
}

// TestRollback: rolling back to a retained epoch and running on gives the
// rows of a run that never went past it.
func TestRollback(t *testing.T) {
	want := spRef(t)
	e := fileEnv(t)
	genData(t, e, spGen)
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{UntilEpoch: 6})
	if _, err := engine.Run(context.Background(), p, engine.Options{RollbackTo: 99}); err == nil || !strings.Contains(err.Error(), "head is epoch") {
		t.Fatalf("rollback past the head: %v", err)
	}
	res := run(t, p, engine.Options{RollbackTo: 3, Drain: true})
	if res.Generation != 2 || res.FirstEpoch != 7 {
		t.Fatalf("rollback: generation %d first epoch %d; want a new generation from epoch 7", res.Generation, res.FirstEpoch)
	}
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("rollback to 3: %d rows, want %d", len(got), len(want))
	}
	rep, err := engine.Verify(context.Background(), p)
	if err != nil || len(rep.Damaged) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// TestSavepointClaim: without claim the savepoint can be deleted right
// after the restore; with claim, 20 epochs with retain_epochs 2 keep the
// savepoint files the new generation still references, and verify is clean.
func TestSavepointClaim(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	putGrowing(t, e, 10)
	tmpl := strings.Replace(growingSpec, "parallelism: 2}", "parallelism: 2, retain_epochs: 2}", 1)
	p := e.pipeline(t, tmpl)
	// Run to an epoch that compacted (bases, no deltas), so that the first
	// epoch restored from the savepoint writes deltas on top of its bases
	// (it shares them) instead of compacting too.
	for ep := int64(1); ; ep++ {
		run(t, p, engine.Options{UntilEpoch: ep})
		if m := headChain(t, p, 1)[0]; ep > 1 && len(m.Operators[0].Deltas) == 0 {
			break
		}
		if ep >= 10 {
			t.Fatalf("no epoch of 2..10 compacted")
		}
	}
	for _, name := range []string{"a", "b"} {
		if _, err := engine.CreateSavepoint(ctx, p, name, 0); err != nil {
			t.Fatal(err)
		}
	}
	// No claim: delete the savepoint at once; the pipeline does not need it.
	run(t, p, engine.Options{FromSavepoint: "a"})
	must(t, engine.DeleteSavepoint(ctx, p, "a"))
	putGrowing(t, e, 14)
	run(t, p, engine.Options{})
	if rep, err := engine.Verify(ctx, p); err != nil || len(rep.Damaged) > 0 {
		t.Fatalf("verify after deleting an unclaimed savepoint: %v %v", err, rep.Problems)
	}
	// Claim: the new generation shares the savepoint's files. (Its seen set
	// is the savepoint's: the files read after it are read again.)
	head := headChain(t, p, 1)[0].Epoch
	run(t, p, engine.Options{FromSavepoint: "b", Claim: true, UntilEpoch: head + 1})
	list, err := engine.ListSavepoints(ctx, p)
	if err != nil || len(list) != 1 || !list[0].Claimed || !list[0].Complete {
		t.Fatalf("list after a claim: %+v %v", list, err)
	}
	if err := engine.DeleteSavepoint(ctx, p, "b"); err == nil || !strings.Contains(err.Error(), "claimed") {
		t.Fatalf("delete of a claimed savepoint: %v", err)
	}
	putGrowing(t, e, 34)
	for range 20 {
		run(t, p, engine.Options{UntilEpoch: headChain(t, p, 1)[0].Epoch + 1})
		if rep, err := engine.Verify(ctx, p); err != nil || len(rep.Damaged) > 0 {
			t.Fatalf("verify while running on a claimed savepoint: %v %v", err, rep.Problems)
		}
	}
	ref := fileEnv(t)
	putGrowing(t, ref, 34)
	pr := ref.pipeline(t, tmpl)
	run(t, pr, engine.Options{Drain: true})
	run(t, p, engine.Options{Drain: true})
	if got, want := committedRows(t, p), committedRows(t, pr); !reflect.DeepEqual(got, want) {
		t.Fatalf("claimed restore: %d rows, want %d", len(got), len(want))
	}
}

// TestResetState: a reset starts a new generation with empty windows and
// keeps the offsets: files already read are not read again.
func TestResetState(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u1", 2)))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{}) // the window of u1 stays open (watermark 00:00:20)
	e.put(t, "2.jsonl", jsonl(ev("00:00:30", "u1", 4)))
	res := run(t, p, engine.Options{ResetState: true, Drain: true})
	if res.Files != 1 || res.Generation != 2 {
		t.Fatalf("reset: %d files read in generation %d; want only the new file, generation 2", res.Files, res.Generation)
	}
	if got := committedRows(t, p); len(got) != 1 || !strings.Contains(got[0], "clicks=1,total_bytes=4") {
		t.Fatalf("after a reset: %v; want one window holding only the row read after it", got)
	}
}

// TestSavepointCrashSweep: a crash at every state-store call of a savepoint
// creation leaves no complete savepoint or a correct one; creating it again
// completes it; and a crash at every call of a restore's first epoch,
// followed by the same restore, ends with the rows of an uninterrupted run.
func TestSavepointCrashSweep(t *testing.T) {
	ctx := context.Background()
	want := spRef(t)
	crashAt := func(at int) func(string, store.Store) store.Store {
		return func(n string, s store.Store) store.Store {
			if n != "state" {
				return s
			}
			return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
		}
	}
	for at := 0; ; at++ {
		e := fileEnv(t)
		genData(t, e, spGen)
		p := e.pipeline(t, windowSpec)
		run(t, p, engine.Options{UntilEpoch: 3})
		// The savepoint folder is written through its own store: crash it there.
		spURL, err := engine.SavepointURL(p, "sp")
		must(t, err)
		s, err := store.Open(ctx, spURL)
		must(t, err)
		_, cerr := engine.CreateSavepointTo(ctx, p, "sp", 0, store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}}))
		s.Close()
		if cerr == nil {
			t.Logf("savepoint create: crashed at each of %d calls", at)
			break
		}
		list, err := engine.ListSavepoints(ctx, p)
		if err != nil || len(list) > 1 {
			t.Fatalf("crash at %d: %+v %v", at, list, err)
		}
		// A crash after the last write leaves it complete; before, creating
		// it again completes it.
		if len(list) == 0 || !list[0].Complete {
			if _, err := engine.CreateSavepoint(ctx, p, "sp", 0); err != nil {
				t.Fatalf("completing after a crash at %d: %v", at, err)
			}
		}
		run(t, p, engine.Options{UntilEpoch: 6})
		run(t, p, engine.Options{FromSavepoint: "sp", Drain: true})
		if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("crash at %d: %d rows, want %d", at, len(got), len(want))
		}
	}
	for at := 0; ; at++ {
		e := fileEnv(t)
		genData(t, e, spGen)
		p := e.pipeline(t, windowSpec)
		run(t, p, engine.Options{UntilEpoch: 3})
		if _, err := engine.CreateSavepoint(ctx, p, "sp", 0); err != nil {
			t.Fatal(err)
		}
		run(t, p, engine.Options{UntilEpoch: 6})
		head := headChain(t, p, 1)[0].Epoch
		_, err := engine.Run(ctx, p, engine.Options{FromSavepoint: "sp", UntilEpoch: head + 1,
			Retry: store.RetryPolicy{MaxAttempts: 1}, WrapStore: crashAt(at)})
		if err == nil {
			t.Logf("restore: crashed at each of %d state calls", at)
			break
		}
		// The operator reruns the same restore (it may already have
		// committed: then a plain run continues).
		if _, err := engine.Run(ctx, p, engine.Options{FromSavepoint: "sp", UntilEpoch: head + 1}); err != nil {
			t.Fatalf("restore again after a crash at %d: %v", at, err)
		}
		run(t, p, engine.Options{Drain: true})
		if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("restore crashed at %d: %d rows, want %d", at, len(got), len(want))
		}
	}
}

// TestRestoreGoldenSavepoint restores the savepoint checked in under
// testdata/compat/savepoint-v2 (written by this format after two epochs of
// testdata/events, with its sink) into an empty state: the result equals a
// fresh run over all the files, so a format change cannot break savepoints
// unnoticed.
func TestRestoreGoldenSavepoint(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"savepoint", "sink"} {
		must(t, os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join("../testdata/compat/savepoint-v2", sub))))
	}
	events, err := filepath.Abs("../testdata/events")
	must(t, err)
	load := func(state, sink string) *spec.Pipeline {
		p, err := spec.Load("../testdata/compat/v1/pipeline.yaml")
		must(t, err)
		p.Source.URL, p.State.URL, p.Sink.URL = fileURL(events), fileURL(state), fileURL(sink)
		return p
	}
	p := load(filepath.Join(dir, "state"), filepath.Join(dir, "sink"))
	res := run(t, p, engine.Options{FromSavepoint: fileURL(filepath.Join(dir, "savepoint")), Drain: true})
	if res.FirstEpoch != 3 {
		t.Fatalf("golden savepoint restored from epoch %d, want 3", res.FirstEpoch)
	}
	rd := t.TempDir()
	ref := load(filepath.Join(rd, "state"), filepath.Join(rd, "sink"))
	run(t, ref, engine.Options{Drain: true})
	if got, want := committedRows(t, p), committedRows(t, ref); !reflect.DeepEqual(got, want) {
		t.Fatalf("golden savepoint: %d rows, want %d", len(got), len(want))
	}
}

// TestStartFromAndReprocess: start_from latest skips the files present at
// the first run; start_from <time> skips files whose rows are all older;
// reprocess --rejected reads again a file rejected whole once the spec is
// fixed, with exact row counts.
func TestStartFromAndReprocess(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "old-1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u2", 1)))
	e.put(t, "old-2.jsonl", jsonl(ev("00:00:30", "u1", 1)))
	latest := strings.Replace(windowSpec, "max_files_per_epoch: 1,", "max_files_per_epoch: 1, start_from: latest,", 1)
	p := e.pipeline(t, latest)
	res := run(t, p, engine.Options{})
	if res.Files != 2 || res.Rows != 0 {
		t.Fatalf("start_from latest, first run: %d files %d rows; want 2 files marked read, 0 rows", res.Files, res.Rows)
	}
	e.put(t, "new-1.jsonl", jsonl(ev("00:01:10", "u3", 5)))
	res = run(t, p, engine.Options{Drain: true})
	if res.Rows != 1 || len(committedRows(t, p)) != 1 {
		t.Fatalf("start_from latest, then a new file: %d rows, outputs %v", res.Rows, committedRows(t, p))
	}

	f := fileEnv(t)
	f.put(t, "a.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u1", 1)))
	f.put(t, "b.jsonl", jsonl(ev("00:00:50", "u1", 1), ev("00:02:10", "u2", 7)))
	byTime := strings.Replace(windowSpec, "max_files_per_epoch: 1,", `max_files_per_epoch: 1, start_from: "2024-01-01T00:01:00Z",`, 1)
	pt := f.pipeline(t, byTime)
	run(t, pt, engine.Options{Drain: true})
	if got := committedRows(t, pt); len(got) != 2 {
		t.Fatalf("start_from time: %v; want b.jsonl's two windows only (a.jsonl is all older)", got)
	}

	g := fileEnv(t)
	g.put(t, "good.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	// bytes as text: with bytes declared int64 and on_error reject, every
	// row of bad.jsonl is rejected... make the file undecodable instead.
	g.put(t, "bad.jsonl", []byte("\x00\x01 not json at all\n"))
	pr := g.pipeline(t, windowSpec)
	res = run(t, pr, engine.Options{})
	if res.RowsRejected == 0 {
		t.Fatalf("the bad file was not rejected: %+v", res)
	}
	g.put(t, "bad.jsonl", jsonl(ev("00:00:40", "u1", 2), ev("00:00:50", "u9", 3))) // fixed in place
	res = run(t, pr, engine.Options{ReprocessRejected: true, Drain: true})
	if res.Files != 1 || res.Rows != 2 || res.Generation != 2 {
		t.Fatalf("reprocess --rejected: %d files %d rows generation %d; want bad.jsonl read again (2 rows) in generation 2", res.Files, res.Rows, res.Generation)
	}
	got := committedRows(t, pr)
	if len(got) != 2 || !strings.Contains(strings.Join(got, ";"), "clicks=2,total_bytes=3") {
		t.Fatalf("after reprocessing: %v; want u1 with 2 clicks (3 bytes) and u9", got)
	}
}

// TestSavepointImport: a savepoint folder edited offline is validated
// (schema, key groups) and stored with recomputed checksums; an unedited
// copy restores to the uninterrupted rows, an edited one restores what was
// edited, and bad edits are refused naming the file and the problem.
func TestSavepointImport(t *testing.T) {
	ctx := context.Background()
	want := spRef(t)
	e := fileEnv(t)
	genData(t, e, spGen)
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{UntilEpoch: 3})
	_, err := engine.CreateSavepoint(ctx, p, "orig", 0)
	must(t, err)
	spURL, err := engine.SavepointURL(p, "orig")
	must(t, err)
	work := t.TempDir()
	must(t, os.CopyFS(work, os.DirFS(strings.TrimPrefix(spURL, "file://"))))
	var base string
	filepath.WalkDir(work, func(path string, d os.DirEntry, err error) error {
		if strings.HasSuffix(path, "s=0000.parquet") {
			base = path
		}
		return nil
	})
	orig, err := os.ReadFile(base)
	must(t, err)
	schema, recs, err := formats.ReadParquet(orig, memory.DefaultAllocator)
	must(t, err)

	// Refused: a column dropped, a row moved out of its key-group range.
	bad := schema.Fields()[:schema.NumFields()-1]
	var cut []arrow.RecordBatch
	for _, r := range recs {
		cut = append(cut, array.NewRecordBatch(arrow.NewSchema(bad, nil), r.Columns()[:len(bad)], r.NumRows()))
	}
	data, err := formats.EncodeParquet(arrow.NewSchema(bad, nil), cut, formats.EncodeOptions{})
	must(t, err)
	must(t, os.WriteFile(base, data, 0o644))
	if _, err := engine.ImportSavepoint(ctx, p, "bad", fileURL(work)); err == nil || !strings.Contains(err.Error(), "columns") {
		t.Fatalf("import of a file missing a column: %v", err)
	}

	// Edited: the first window of subtask 0 removed.
	first := recs[0].NewSlice(1, recs[0].NumRows())
	data, err = formats.EncodeParquet(schema, append([]arrow.RecordBatch{first}, recs[1:]...), formats.EncodeOptions{})
	must(t, err)
	must(t, os.WriteFile(base, data, 0o644))
	sp, err := engine.ImportSavepoint(ctx, p, "edited", fileURL(work))
	if err != nil || !sp.Complete {
		t.Fatalf("import of an edited savepoint: %+v %v", sp, err)
	}
	run(t, p, engine.Options{UntilEpoch: 6})
	run(t, p, engine.Options{FromSavepoint: "edited", Drain: true})
	if got := committedRows(t, p); reflect.DeepEqual(got, want) {
		t.Fatal("the restored edited savepoint gave the unedited rows: the edit was not restored")
	}
	rep, err := engine.Verify(ctx, p)
	if err != nil || len(rep.Damaged) > 0 {
		t.Fatalf("verify after restoring an imported savepoint: %v %v", err, rep.Problems)
	}

	// Unedited: the original bytes back, imported and restored: the
	// uninterrupted rows.
	must(t, os.WriteFile(base, orig, 0o644))
	if _, err := engine.ImportSavepoint(ctx, p, "same", fileURL(work)); err != nil {
		t.Fatal(err)
	}
	run(t, p, engine.Options{FromSavepoint: "same", Drain: true})
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored from an imported unedited savepoint: %d rows, want %d", len(got), len(want))
	}
}
