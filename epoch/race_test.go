package epoch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// raceHelper is the body of a racing writer process: it recovers the head,
// says it is ready, waits for the start signal, then commits one epoch.
// Exit code 0: committed; 3: fenced; anything else: failure.
func raceHelper() bool {
	if os.Getenv("FLOE_RACE_HELPER") != "1" {
		return false
	}
	code := 0
	if err := raceWriter(os.Getenv("FLOE_RACE_STATE"), os.Getenv("FLOE_RACE_DIR"), os.Getenv("FLOE_RACE_ID")); err != nil {
		fmt.Println(err)
		code = 2
		if errors.Is(err, epoch.ErrFenced) {
			code = 3
		}
	}
	os.Exit(code)
	return true
}

func raceWriter(stateURL, dir, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, stateURL)
	if err != nil {
		return err
	}
	defer st.Close()
	c := epoch.NewCommitter(st, nil, "test", nil)
	head, err := c.Recover(ctx)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ready-"+id), nil, 0o644); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	att := c.Begin(head, head.Manifest.Generation)
	ref, err := att.WriteState(ctx, testOp, 0, 0, testMaxPar, []byte("state of writer "+id), 1)
	if err != nil {
		return err
	}
	_, err = att.Commit(ctx, &manifest.Manifest{Watermark: manifest.NoWatermark,
		Operators: []manifest.OperatorState{{ID: testOp, EmittedThrough: manifest.NoWatermark, Files: []manifest.FileRef{ref}}}})
	if err == nil {
		fmt.Println("committed", att.ID)
	}
	return err
}

// TestRacingProcesses: several OS processes race to commit the same epoch
// from the same parent. Exactly one commits, the others are fenced, and
// _latest.json never moves backwards.
func TestRacingProcesses(t *testing.T) {
	const writers, rounds = 4, 5
	for _, b := range allBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			su, ku := b.urls(t)
			st, sink := open(t, su), open(t, ku)
			d := newDriver(1)
			if err := d.run(ctx, t, d.committer(st, sink), 1); err != nil {
				t.Fatal(err)
			}
			for round := 0; round < rounds; round++ {
				dir := t.TempDir()
				procs := make([]*exec.Cmd, writers)
				outs := make([]*strings.Builder, writers)
				for i := range procs {
					outs[i] = &strings.Builder{}
					cmd := exec.Command(os.Args[0], "-test.run=^$")
					cmd.Env = append(os.Environ(), "FLOE_RACE_HELPER=1", "FLOE_RACE_STATE="+su,
						"FLOE_RACE_DIR="+dir, fmt.Sprintf("FLOE_RACE_ID=%d", i))
					cmd.Stdout, cmd.Stderr = outs[i], outs[i]
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					procs[i] = cmd
				}
				deadline := time.Now().Add(time.Minute)
				for {
					n, _ := filepath.Glob(filepath.Join(dir, "ready-*"))
					if len(n) == writers {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("writers not ready: %d of %d", len(n), writers)
					}
					time.Sleep(5 * time.Millisecond)
				}
				if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
				committed, fenced := 0, 0
				for i, cmd := range procs {
					err := cmd.Wait()
					var ee *exec.ExitError
					switch {
					case err == nil:
						committed++
					case errors.As(err, &ee) && ee.ExitCode() == 3:
						fenced++
						if !strings.Contains(outs[i].String(), "another writer committed epoch") {
							t.Errorf("fenced writer %d says %q", i, outs[i].String())
						}
					default:
						t.Fatalf("writer %d: %v: %s", i, err, outs[i].String())
					}
				}
				if committed != 1 || fenced != writers-1 {
					t.Fatalf("round %d: %d committed, %d fenced; want 1 and %d", round, committed, fenced, writers-1)
				}
				data, _, err := st.Get(ctx, manifest.LatestPath)
				if err != nil {
					t.Fatal(err)
				}
				l, err := manifest.DecodeLatest(manifest.LatestPath, data)
				if err != nil {
					t.Fatal(err)
				}
				if want := int64(round + 2); l.Epoch != want {
					t.Fatalf("round %d: _latest.json at epoch %d, want %d", round, l.Epoch, want)
				}
			}
		})
	}
}
