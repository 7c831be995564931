package main

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWorkersTools: the tools work on a pipeline that several workers
// run. Three workers commit 3 epochs; then history lists them, status names
// the workers, verify is clean, state cat reads a retained epoch, replay
// --verify re-runs epoch 2 in one process and finds what the workers
// committed, a savepoint is taken, and rollback to epoch 1 abandons epochs
// 2 and 3. Two workers then continue from the rolled-back state (a new
// generation): the committed rows and the late and rejected rows equal one
// process's over the same files, and verify is clean.
func TestWorkersTools(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx := context.Background()
	dir := t.TempDir()
	u := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(dir, p)) }
	src := u("events")
	newLanding(t).land(t, ctx, src, 12) // max_files_per_epoch 4: 3 epochs
	refSink := u("ref/out")
	refSpec := workerSpec(t, dir, "tools-ref", src, u("ref/state"), refSink)
	runFloe(t, "run", refSpec)
	sink := u("w/out")
	spec := workerSpec(t, dir, "tools", src, u("w/state"), sink)
	rng := rand.New(rand.NewPCG(7, 8))
	runWorkerRound(t, rng, spec, 3, 0)

	hist := runFloe(t, "history", spec).stdout
	for _, e := range []string{"1", "2", "3"} {
		if !regexp.MustCompile(`(?m)^\s*1\s+` + e + `\s`).MatchString(hist) { // generation 1, epoch e
			t.Errorf("floe history lists no epoch %s:\n%s", e, hist)
		}
	}
	if st := runFloe(t, "status", spec).stdout; !regexp.MustCompile(`(?m)^head .*, 3 workers$`).MatchString(st) {
		t.Errorf("floe status does not show the 3 workers:\n%s", st)
	}
	if v := runFloe(t, "verify", spec).stdout; !strings.Contains(v, " 0 problems") {
		t.Errorf("floe verify:\n%s", v)
	}
	if cat := runFloe(t, "state", "cat", spec, "--epoch", "2").stdout; !strings.Contains(cat, "user_id") {
		t.Errorf("floe state cat --epoch 2 shows no window state:\n%s", tailString(cat, 2000))
	}
	rp := runFloe(t, "replay", spec, "--epoch", "2", "--verify")
	t.Logf("replay --verify of epoch 2: %s", lastLine(rp.stdout+rp.stderr))
	runFloe(t, "savepoint", "create", spec, "before-rollback")
	if sp := runFloe(t, "savepoint", "list", spec).stdout; !strings.Contains(sp, "before-rollback") {
		t.Errorf("floe savepoint list:\n%s", sp)
	}
	runFloe(t, "rollback", spec, "--to-epoch", "1")
	runWorkerRound(t, rng, spec, 2, 0)

	want, _ := committedRows(t, ctx, refSpec, refSink)
	got, files := committedRows(t, ctx, spec, sink)
	if len(want) == 0 {
		t.Fatal("the reference committed no rows")
	}
	if m, x := multisetDiff(want, got); len(m) > 0 || len(x) > 0 {
		t.Errorf("after the rollback the workers committed %d rows in %d files, one process %d: %d missing, %d extra\nmissing: %q\nextra: %q",
			len(got), files, len(want), len(m), len(x), firstN(m, 5), firstN(x, 5))
	}
	checkSideRows(t, ctx, refSink, sink)
	if v := runFloe(t, "verify", spec).stdout; !strings.Contains(v, " 0 problems") {
		t.Errorf("floe verify after the rollback:\n%s", v)
	}
}
