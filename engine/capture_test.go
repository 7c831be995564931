package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/manifest"
)

// TestCapture: with source.capture each epoch keeps byte-exact copies of the
// input files it consumed, referenced by its manifest (so verify checks
// them and retention deletes them with the epoch).
func TestCapture(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "a.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	e.put(t, "d/b.jsonl", jsonl(ev("00:01:10", "u2", 2)))
	p := e.pipeline(t, strings.Replace(windowSpec, "max_files_per_epoch: 1,", "max_files_per_epoch: 1, capture: true,", 1))
	run(t, p, engine.Options{})
	chain := headChain(t, p, 10)
	if len(chain) != 2 {
		t.Fatalf("%d epochs, want 2", len(chain))
	}
	stateURL, err := engine.PipelineStateURL(p)
	must(t, err)
	got := map[string]bool{}
	for _, m := range chain {
		if len(m.Source.Captured) != 1 {
			t.Fatalf("epoch %d captured %v; want its one input file", m.Epoch, m.Source.Captured)
		}
		ref := m.Source.Captured[0]
		_, key, _ := strings.Cut(ref.Path, "/source/input/")
		data, err := os.ReadFile(filepath.Join(strings.TrimPrefix(stateURL, "file://"), filepath.FromSlash(ref.Path)))
		must(t, err)
		orig, err := os.ReadFile(filepath.Join(e.sourceDir, filepath.FromSlash(key)))
		must(t, err)
		if string(data) != string(orig) || manifest.VerifyFile(ref, data) != nil {
			t.Fatalf("captured copy of %s differs from the input", key)
		}
		got[key] = true
	}
	if !got["a.jsonl"] || !got["d/b.jsonl"] {
		t.Fatalf("captured %v", got)
	}
	if rep, err := engine.Verify(context.Background(), p); err != nil || len(rep.Damaged) > 0 || rep.Files < 2 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// TestReplayFromCapture: with capture on, an epoch whose input file was
// deleted from the source after it committed still replays identical to
// what it committed; with capture off, replay names the missing file.
func TestReplayFromCapture(t *testing.T) {
	ctx := context.Background()
	for _, capture := range []bool{true, false} {
		e := fileEnv(t)
		e.put(t, "a.jsonl", jsonl(ev("00:00:10", "u1", 1), ev("00:00:20", "u2", 2)))
		e.put(t, "b.jsonl", jsonl(ev("00:01:10", "u1", 3), ev("00:01:50", "u3", 4)))
		e.put(t, "c.jsonl", jsonl(ev("00:02:10", "u1", 5)))
		tmpl := windowSpec
		if capture {
			tmpl = strings.Replace(windowSpec, "max_files_per_epoch: 1,", "max_files_per_epoch: 1, capture: true,", 1)
		}
		p := e.pipeline(t, tmpl)
		run(t, p, engine.Options{})
		must(t, os.Remove(filepath.Join(e.sourceDir, "b.jsonl")))
		_, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: 2})
		if !capture {
			if err == nil || !strings.Contains(err.Error(), "b.jsonl") || !strings.Contains(err.Error(), "not captured") {
				t.Fatalf("replay of a deleted, uncaptured input: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("replay from the captured copy: %v", err)
		}
		v, err := engine.VerifyReplay(ctx, p, engine.ReplayOptions{Epoch: 2})
		if err != nil || !v.Diff.Identical() || len(v.Counters) > 0 || len(v.Replay.Outputs)+len(v.Replay.Late)+len(v.Replay.Rejected) == 0 {
			t.Fatalf("replay from the captured copy differs from what epoch 2 committed: %v %+v", err, v)
		}
	}
}
