package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// TestVerifyDamageKinds: verify names each damaged object once, with what
// is wrong (missing, size mismatch, checksum mismatch, unparsable); a store
// that fails transiently is "could not check" (an error), never damage.
func TestVerifyDamageKinds(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	e.put(t, "1.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:01:10", "u2", 2)))
	e.put(t, "2.jsonl", jsonl(ev("00:02:10", "u1", 3)))
	p := e.pipeline(t, windowSpec)
	run(t, p, engine.Options{Drain: true})
	rep, err := engine.Verify(ctx, p)
	if err != nil || len(rep.Damaged) != 0 || rep.Files == 0 {
		t.Fatalf("clean pipeline: %v %+v", err, rep)
	}

	// Through 60% transient GET faults without retries: could not check.
	couldNot := 0
	for seed := uint64(1); seed <= 5; seed++ {
		_, err := engine.VerifyWith(ctx, p, engine.Options{Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(name string, s store.Store) store.Store {
				return store.NewFaulty(s, store.FaultPlan{Throttle: store.Throttle{Match: store.Match{Op: store.OpGet}, P: 0.6, Seed: seed}})
			}})
		if err == nil {
			continue // the dice let every read through
		}
		if !errors.Is(err, store.ErrTransient) {
			t.Fatalf("seed %d: %v; want a transient could-not-check error", seed, err)
		}
		couldNot++
	}
	if couldNot == 0 {
		t.Fatal("no seed injected a fault: the check exercises nothing")
	}
	// ... and with retries the same store verifies clean.
	rep, err = engine.VerifyWith(ctx, p, engine.Options{WrapStore: func(name string, s store.Store) store.Store {
		return store.NewFaulty(s, store.FaultPlan{Throttle: store.Throttle{Match: store.Match{Op: store.OpGet}, P: 0.6, Seed: 7}})
	}})
	if err != nil || len(rep.Damaged) != 0 {
		t.Fatalf("60%% faults with retries: %v %v", err, rep.Problems)
	}

	stateDir := strings.TrimPrefix(e.state, "file://")
	sinkDir := strings.TrimPrefix(e.sink, "file://")
	var stateFile, output string
	filepath.WalkDir(stateDir, func(path string, d os.DirEntry, err error) error {
		if strings.HasSuffix(path, ".parquet") && stateFile == "" {
			stateFile = path
		}
		return nil
	})
	outs, _ := filepath.Glob(filepath.Join(sinkDir, "part-*.parquet"))
	if stateFile == "" || len(outs) < 2 {
		t.Fatalf("fixture: state %q outputs %v", stateFile, outs)
	}
	output = outs[0]
	data, _ := os.ReadFile(outs[1])
	data[len(data)/2] ^= 1
	must(t, os.WriteFile(outs[1], data, 0o644))
	must(t, os.Remove(stateFile))
	data, _ = os.ReadFile(output)
	must(t, os.WriteFile(output, data[:len(data)-3], 0o644))
	rep, err = engine.Verify(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, d := range rep.Damaged {
		kinds[d.Kind]++
		if strings.Contains(d.String(), "\n") {
			t.Errorf("damage prints over several lines: %q", d.String())
		}
	}
	if kinds[engine.DamageMissing] != 1 || kinds[engine.DamageSize] != 1 || kinds[engine.DamageChecksum] != 1 || len(rep.Damaged) != 3 {
		t.Fatalf("damage %v; want one missing, one size mismatch, one checksum mismatch", rep.Problems)
	}

	// A pointer at a missing manifest is damage too (exit 1), not an error.
	latest := filepath.Join(stateDir, "t", manifest.LatestPath)
	l, err := os.ReadFile(latest)
	must(t, err)
	var lp *manifest.Latest
	lp, err = manifest.DecodeLatest(manifest.LatestPath, l)
	must(t, err)
	must(t, os.Remove(filepath.Join(stateDir, "t", filepath.FromSlash(lp.Manifest))))
	rep, err = engine.Verify(ctx, p)
	if err != nil || len(rep.Damaged) != 1 || rep.Damaged[0].Kind != engine.DamageMissing {
		t.Fatalf("pointer at a missing manifest: %v %v", err, rep)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
