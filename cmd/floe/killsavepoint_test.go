package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// killLoop starts `floe args...` again and again, SIGKILLing it after a
// random delay (below maxDelay, then a growing bound), until one finishes on
// its own; it returns how many kills
// landed. A run that fails (rather than being killed) fails t.
func killLoop(t *testing.T, rng *rand.Rand, maxDelay time.Duration, args ...string) int {
	t.Helper()
	landed := 0
	for i := 0; i < 200; i++ {
		cmd := floeCommand(t, args...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !strings.Contains(errb.String(), "savepoint exists") {
				t.Fatalf("floe %s: %v\n%s", strings.Join(args, " "), err, tailString(errb.String(), 2000))
			}
			return landed // done (a killed create may have completed the savepoint already)
		case <-time.After(time.Duration(rng.Int64N(int64(maxDelay << min(i/25, 6))))):
			// The delay bound doubles every 25 tries, so that a loaded
			// machine where the command takes longer than maxDelay still
			// lets one finish.
			_ = cmd.Process.Kill()
			if err := <-done; err == nil {
				return landed // it finished just before the kill
			}
			landed++
		}
	}
	t.Fatalf("floe %s never finished in 200 tries", strings.Join(args, " "))
	return landed
}

// TestKillSavepoint SIGKILLs `floe savepoint create` and the first epochs of
// `floe run --from-savepoint` at random moments; rerun, the savepoint is
// complete and the restored pipeline commits exactly the rows of an
// uninterrupted run.
func TestKillSavepoint(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	ctx := context.Background()
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.Join(root, p) }
	putDataset(t, ctx, fu("events"))
	dir := t.TempDir()
	refSpec := writeSpec(t, dir, "ref", fu("events"), fu("ref/state"), fu("ref/out"))
	spec := writeSpec(t, dir, "sp", fu("events"), fu("sp/state"), fu("sp/out"))
	runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	want, _ := committedRows(t, ctx, refSpec, fu("ref/out"))

	runFloe(t, "run", spec, "--until-epoch", "4", "--log-format", "json")
	k1 := killLoop(t, rng, 150*time.Millisecond, "savepoint", "create", spec, "before")
	list := runFloe(t, "savepoint", "list", spec)
	if !strings.Contains(list.stdout, "before") || strings.Contains(list.stdout, "incomplete") {
		t.Fatalf("savepoint after %d kills of its creation:\n%s", k1, list.stdout)
	}
	runFloe(t, "run", spec, "--until-epoch", "9", "--log-format", "json")
	k2 := killLoop(t, rng, 300*time.Millisecond, "run", spec, "--from-savepoint", "before", "--drain", "--log-format", "json")
	got, _ := committedRows(t, ctx, spec, fu("sp/out"))
	if m, x := multisetDiff(want, got); len(m) > 0 || len(x) > 0 {
		t.Fatalf("after %d kills of savepoint create and %d of the restore: %d rows missing, %d extra (of %d)", k1, k2, len(m), len(x), len(want))
	}
	runFloe(t, "verify", spec)
	t.Logf("%d kills of savepoint create, %d of the restore; %d rows as uninterrupted", k1, k2, len(got))
}
