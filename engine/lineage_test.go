package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// lineageSpec is windowSpec with late rows kept, rejected rows in the sink's
// _rejected/ and six epochs retained.
var lineageSpec = strings.NewReplacer(
	"event_time: event_time,", `event_time: event_time, late_url: "{{late}}",`,
	"parallelism: 2}", "parallelism: 2, retain_epochs: 6}").Replace(windowSpec)

// putLineageFiles writes n input files, one epoch each: two users' events
// in minute i, a late event (minute 0, from the second file on) and a line
// that is not JSON (rejected).
func putLineageFiles(t *testing.T, e *env, n int) {
	for i := 1; i <= n; i++ {
		ts := fmt.Sprintf("00:%02d:10", i)
		lines := []string{ev(ts, "u1", i), ev(ts, "u2", 2*i), `not json ` + fmt.Sprint(i)}
		if i > 1 {
			lines = append(lines, ev("00:00:05", "late", i))
		}
		e.put(t, fmt.Sprintf("f%02d.jsonl", i), jsonl(lines...))
	}
}

// manifestEpochs lists the epochs whose manifests are in the state.
func manifestEpochs(t *testing.T, p *spec.Pipeline) []int64 {
	t.Helper()
	u, err := engine.PipelineStateURL(p)
	must(t, err)
	var out []int64
	for _, k := range listKeys(t, u) {
		if info, ok := manifest.ParseKey(k); ok && info.Kind == manifest.KeyManifest {
			out = append(out, info.Epoch)
		}
	}
	slices.Sort(out)
	return out
}

// sideEpochs returns the epochs of the part files under dir (a file:// URL).
func sideEpochs(t *testing.T, dir string) []int64 {
	t.Helper()
	var out []int64
	for _, f := range sinkFiles(t, strings.TrimPrefix(dir, "file://")) {
		info, ok := manifest.ParseOutputName(filepath.Base(f))
		if !ok {
			t.Fatalf("unexpected file %s", f)
		}
		out = append(out, info.Epoch)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestLineageAfterRollback: run to epoch 8, roll back to 5, run to 12 with
// retain_epochs 6. Retention keeps the last six epochs of the head's
// lineage (4, 5, 9..12), not the six highest manifests (7..12); status
// lists those; history diffs epoch 9 against epoch 5 and lists no abandoned
// epoch; rollback, savepoints, state inspection and replay accept every
// lineage epoch and refuse the abandoned ones, naming the lineage; the
// rollback removed the abandoned epochs' late and rejected files; verify is
// clean, and finds an output-log file that is gone.
func TestLineageAfterRollback(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	putLineageFiles(t, e, 8)
	p := e.pipeline(t, lineageSpec)
	run(t, p, engine.Options{UntilEpoch: 8})
	rejected := e.sink + "/_rejected"
	if got := sideEpochs(t, rejected); !reflect.DeepEqual(got, []int64{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("rejected files of epochs %v before the rollback", got)
	}
	if got := sideEpochs(t, e.late); !reflect.DeepEqual(got, []int64{2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("late files of epochs %v before the rollback", got)
	}

	// floe rollback --to-epoch 5: one epoch (9), re-reading f06.
	res := run(t, p, engine.Options{RollbackTo: 5, UntilEpoch: 9})
	if res.LastEpoch != 9 {
		t.Fatalf("rollback committed up to epoch %d, want 9", res.LastEpoch)
	}
	if got, want := sideEpochs(t, rejected), []int64{1, 2, 3, 4, 5, 9}; !reflect.DeepEqual(got, want) {
		t.Errorf("rejected files of epochs %v after the rollback, want %v (those of the abandoned epochs 6-8 removed)", got, want)
	}
	if got, want := sideEpochs(t, e.late), []int64{2, 3, 4, 5, 9}; !reflect.DeepEqual(got, want) {
		t.Errorf("late files of epochs %v after the rollback, want %v", got, want)
	}
	putLineageFiles(t, e, 9) // one more input file: f09
	run(t, p, engine.Options{UntilEpoch: 12})

	// Retention: the last six epochs of the lineage 12, 11, 10, 9, 5, 4.
	if got, want := manifestEpochs(t, p), []int64{4, 5, 9, 10, 11, 12}; !reflect.DeepEqual(got, want) {
		t.Errorf("manifests of epochs %v retained, want %v (the lineage's last six)", got, want)
	}
	if got, want := sideEpochs(t, rejected), []int64{1, 2, 3, 4, 5, 9, 10, 11, 12}; !reflect.DeepEqual(got, want) {
		t.Errorf("rejected files of epochs %v, want %v", got, want)
	}

	// Status lists what is restorable.
	st, err := engine.ReadStatus(ctx, p)
	must(t, err)
	if want := []int64{12, 11, 10, 9, 5, 4}; !reflect.DeepEqual(st.RestorableEpochs, want) || st.RetainedEpochs != 6 || st.OldestRetainedEpoch != 4 {
		t.Errorf("status: restorable %v, retained %d, oldest %d; want %v, 6, 4", st.RestorableEpochs, st.RetainedEpochs, st.OldestRetainedEpoch, want)
	}
	var b strings.Builder
	st.Print(&b)
	if !strings.Contains(b.String(), "6 (4, 5, 9..12)") {
		t.Errorf("status does not list the restorable epochs:\n%s", b.String())
	}

	// History: the lineage only; epoch 9 diffs against epoch 5.
	recs, err := engine.History(ctx, p, 0)
	must(t, err)
	var epochs []int64
	for i, r := range recs {
		epochs = append(epochs, r.Epoch)
		if i == len(recs)-1 {
			continue // its parent was removed: no differences
		}
		if r.RowsIn == nil || *r.RowsIn < 0 || r.RowsOut == nil || *r.RowsOut < 0 {
			t.Fatalf("history epoch %d: rows in %v out %v", r.Epoch, dash(r.RowsIn), dash(r.RowsOut))
		}
	}
	if want := []int64{12, 11, 10, 9, 5, 4}; !reflect.DeepEqual(epochs, want) {
		t.Errorf("history lists epochs %v, want %v", epochs, want)
	}
	e9 := recs[3]
	if *e9.RowsIn != 4 || e9.Continues == nil || *e9.Continues != 5 || e9.Restore != manifest.RestoreRollback {
		t.Fatalf("history epoch 9: rows in %d, continues %v, restore %q; want 4 rows (f06), continues 5, rollback", *e9.RowsIn, dash(e9.Continues), e9.Restore)
	}
	b.Reset()
	engine.PrintHistory(&b, recs)
	if !strings.Contains(b.String(), "rollback: continues epoch 5") {
		t.Fatalf("history does not mark the rollback:\n%s", b.String())
	}

	// Every tool refuses an abandoned epoch, naming the lineage.
	abandoned := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "epoch 7 is not on the head's lineage (4 → 5 → 9 → … → 12)") ||
			!strings.Contains(err.Error(), "abandoned by a rollback") {
			t.Fatalf("%s of abandoned epoch 7: %v", what, err)
		}
	}
	_, err = engine.CreateSavepoint(ctx, p, "old7", 7)
	abandoned("savepoint", err)
	_, err = engine.ReadState(ctx, p, engine.StateQuery{Epoch: 7})
	abandoned("state", err)
	_, err = engine.Replay(ctx, p, engine.ReplayOptions{Epoch: 7})
	abandoned("replay", err)
	_, err = engine.Run(ctx, p, engine.Options{RollbackTo: 7})
	abandoned("rollback", err)
	_, err = engine.Run(ctx, p, engine.Options{RollbackTo: 2})
	if err == nil || !strings.Contains(err.Error(), "not retained") {
		t.Fatalf("rollback to epoch 2 (removed by retention): %v", err)
	}
	// ... and accepts the lineage's epochs.
	if _, err := engine.ReadState(ctx, p, engine.StateQuery{Epoch: 4}); err != nil {
		t.Fatalf("state of epoch 4: %v", err)
	}
	if _, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: 9}); err != nil {
		t.Fatalf("replay of epoch 9: %v", err)
	}
	if sp, err := engine.CreateSavepoint(ctx, p, "five", 5); err != nil || sp.Epoch != 5 {
		t.Fatalf("savepoint of epoch 5: %+v %v", sp, err)
	}

	rep, err := engine.Verify(ctx, p)
	if err != nil || len(rep.Damaged) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
	want := committedRows(t, p)

	// Rollback to a retained lineage epoch works, and a lineage epoch
	// beyond retention's cut is reported as such.
	run(t, p, engine.Options{RollbackTo: 5, UntilEpoch: 13})
	run(t, p, engine.Options{})
	if got := committedRows(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("rolled back to 5 again and ran on: %d rows, want %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}

	// verify checks every file of the output log, also of epochs
	// retention no longer keeps.
	outs, err := engine.Outputs(ctx, p)
	must(t, err)
	old := ""
	for _, o := range outs {
		if info, ok := manifest.ParseOutputName(o); ok && info.Epoch == 2 {
			old = o
		}
	}
	if old == "" {
		t.Fatalf("no output of epoch 2 in %v", outs)
	}
	must(t, os.Remove(filepath.Join(strings.TrimPrefix(e.sink, "file://"), old)))
	rep, err = engine.Verify(ctx, p)
	must(t, err)
	if len(rep.Damaged) != 1 || rep.Damaged[0].Object != old || rep.Damaged[0].Kind != engine.DamageMissing {
		t.Fatalf("verify after deleting %s: %v", old, rep.Problems)
	}
}

func dash(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

// TestLineageAfterSavepointRestore: a restore from a savepoint of this
// state continues that epoch's lineage (history, status, rollback and the
// tools see 1, 2, 3, 7) and removes the side outputs of the epochs it
// abandoned (4-6); a restore from a copy given by URL starts a lineage of
// its own.
func TestLineageAfterSavepointRestore(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	putLineageFiles(t, e, 8)
	p := e.pipeline(t, lineageSpec)
	run(t, p, engine.Options{UntilEpoch: 3})
	_, err := engine.CreateSavepoint(ctx, p, "three", 0)
	must(t, err)
	run(t, p, engine.Options{UntilEpoch: 6})
	run(t, p, engine.Options{FromSavepoint: "three", UntilEpoch: 7})

	st, err := engine.ReadStatus(ctx, p)
	must(t, err)
	if want := []int64{7, 3, 2, 1}; !reflect.DeepEqual(st.RestorableEpochs, want) {
		t.Errorf("restorable epochs %v after the restore, want %v", st.RestorableEpochs, want)
	}
	recs, err := engine.History(ctx, p, 0)
	must(t, err)
	if len(recs) != 4 || recs[0].Continues == nil || *recs[0].Continues != 3 || recs[0].Restore != "savepoint three" || *recs[0].RowsIn != 4 {
		t.Fatalf("history after the restore: %+v", recs)
	}
	if got, want := sideEpochs(t, e.sink+"/_rejected"), []int64{1, 2, 3, 7}; !reflect.DeepEqual(got, want) {
		t.Errorf("rejected files of epochs %v, want %v (those of the abandoned epochs 4-6 removed)", got, want)
	}
	if got, want := sideEpochs(t, e.late), []int64{2, 3, 7}; !reflect.DeepEqual(got, want) {
		t.Errorf("late files of epochs %v, want %v", got, want)
	}
	_, err = engine.CreateSavepoint(ctx, p, "five", 5)
	if err == nil || !strings.Contains(err.Error(), "epoch 5 is not on the head's lineage (1 → 2 → 3 → 7)") ||
		!strings.Contains(err.Error(), "abandoned by a restore from savepoint three") {
		t.Fatalf("savepoint of abandoned epoch 5: %v", err)
	}
	if _, err := engine.ReadState(ctx, p, engine.StateQuery{Epoch: 2}); err != nil {
		t.Fatalf("state of epoch 2 (on the lineage through the savepoint): %v", err)
	}

	// The same savepoint, copied elsewhere and restored by URL: this state
	// cannot tell it is a copy of its epoch 3, so the lineage starts anew.
	elsewhere := withPath(t, e.late, "../moved")
	spURL, err := engine.SavepointURL(p, "three")
	must(t, err)
	copyAll(t, spURL, elsewhere)
	run(t, p, engine.Options{FromSavepoint: elsewhere, UntilEpoch: 8})
	st, err = engine.ReadStatus(ctx, p)
	must(t, err)
	if want := []int64{8}; !reflect.DeepEqual(st.RestorableEpochs, want) {
		t.Errorf("restorable epochs %v after a restore by URL, want %v", st.RestorableEpochs, want)
	}
	if _, err := engine.Run(ctx, p, engine.Options{RollbackTo: 3}); err == nil || !strings.Contains(err.Error(), "not on the head's lineage") {
		t.Fatalf("rollback past a restore by URL: %v", err)
	}
	rep, err := engine.Verify(ctx, p)
	if err != nil || len(rep.Damaged) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}
