package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// replaySliding: sliding windows at P=3, late rows kept (late_url),
// rejected rows to <sink>/_rejected/, a filter behind the window, Parquet
// sink. replaySession: session windows, late rows only counted, rejected
// rows to rejected_url, JSON-lines sink, few retained epochs.
const replaySliding = `
name: replay-sliding
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2, late_url: "{{late}}",
         watermark: {max_out_of_orderness: 20s}}
operators:
  - filter: "bytes >= 0"
  - window: {key: [user_id], sliding: {size: 3m, slide: 1m}, allowed_lateness: 30s,
             aggregates: {clicks: "count()", total: "sum(bytes)", hi: "max(bytes)",
                          first_page: "first(page)", last_page: "last(page)"}}
  - filter: "clicks > 1"
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 3, retain_epochs: 20}
`

const replaySession = `
name: replay-session
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2, rejected_url: "{{rejected}}",
         watermark: {max_out_of_orderness: 20s}}
operators:
  - window: {key: [user_id], session: {gap: 15s}, allowed_lateness: 10s,
             aggregates: {clicks: "count()", total: "sum(bytes)", pages: "count_distinct(page)", mean: "avg(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 3, retain_epochs: 4}
`

// replayInput writes n files of events a minute apart per file, eight
// users, some rows far behind (late), some unparsable or without an event
// time (rejected), and one file whose every row is rejected.
func replayInput(t *testing.T, e *env, n int, seed uint64) {
	t.Logf("replay input seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		var lines []string
		if i == 5 {
			lines = []string{`{"event_time":"nope","user_id":"u1","page":"/","bytes":1}`, `{"user_id":"u2"}`}
			e.put(t, fmt.Sprintf("f%03d.jsonl", i), jsonl(lines...))
			continue
		}
		for range 30 {
			ts := base.Add(time.Duration(i)*time.Minute + time.Duration(rng.IntN(60))*time.Second)
			if rng.IntN(12) == 0 && i > 2 {
				ts = ts.Add(-time.Duration(2+rng.IntN(3)) * time.Minute) // behind the watermark
			}
			lines = append(lines, fmt.Sprintf(`{"event_time":"%s","user_id":"u%d","page":"/p%d","bytes":%d}`,
				ts.Format(time.RFC3339), rng.IntN(8), rng.IntN(4), rng.IntN(50)-2))
		}
		lines = append(lines, `{"event_time":"2024-01-01T00:00:00Z","user_id":"u1","bytes":"many"}`, `not json`)
		e.put(t, fmt.Sprintf("f%03d.jsonl", i), jsonl(lines...))
	}
}

// replayPipeline sets up a pipeline of tmpl over fresh folders and runs it
// in three runs (P=3, a rescale to 2, back to 3), so epochs of several
// generations are retained. It returns the pipeline and the root folder.
func replayPipeline(t *testing.T, tmpl string, seed uint64) (*spec.Pipeline, *env, string) {
	e := fileEnv(t)
	root := filepath.Dir(strings.TrimPrefix(e.state, "file://"))
	e.rejected = fileURL(filepath.Join(root, "rejected"))
	replayInput(t, e, 14, seed)
	p := e.pipeline(t, strings.ReplaceAll(tmpl, "{{rejected}}", e.rejected))
	run(t, p, engine.Options{UntilEpoch: 3})
	run(t, p, engine.Options{UntilEpoch: 5, Parallelism: 2})
	run(t, p, engine.Options{})
	return p, e, root
}

// TestReplayVerifyEveryEpoch: every retained epoch whose parent is retained
// replays to exactly what it committed, at its own parallelism, at 1 and at
// 5, for sliding and session windows with late and rejected rows; the
// oldest retained epoch names the retained range; nothing is written.
func TestReplayVerifyEveryEpoch(t *testing.T) {
	for _, tc := range []struct {
		name string
		tmpl string
	}{{"sliding", replaySliding}, {"session", replaySession}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, _, root := replayPipeline(t, tc.tmpl, 7)
			before := treeOf(t, root)
			head, err := engine.ReadState(ctx, p, engine.StateQuery{})
			if err != nil {
				t.Fatal(err)
			}
			var outputs, late, rejected, replayed int
			for ep := int64(1); ep <= head.Epoch; ep++ {
				for _, par := range []int{0, 1, 5} {
					v, err := engine.VerifyReplay(ctx, p, engine.ReplayOptions{Epoch: ep, Parallelism: par})
					if err != nil {
						if strings.Contains(err.Error(), "not retained") {
							if par == 0 {
								t.Logf("epoch %d: %v", ep, err)
							}
							if !strings.Contains(err.Error(), "retained epochs are") {
								t.Fatalf("epoch %d: the error does not name the retained epochs: %v", ep, err)
							}
							continue
						}
						t.Fatalf("epoch %d P=%d: %v", ep, par, err)
					}
					if !v.Identical() {
						t.Fatalf("epoch %d P=%d: replay differs from the commit: %s\ncounters: %v",
							ep, par, v.Diff.Describe("replayed", "committed"), v.Counters)
					}
					if par == 0 {
						replayed++
						outputs += len(v.Replay.Outputs)
						late += int(v.Replay.Counters.RowsLate)
						rejected += len(v.Replay.Rejected)
					}
				}
			}
			t.Logf("%s: %d epochs replayed (head %d): %d output, %d late, %d rejected rows", tc.name, replayed, head.Epoch, outputs, late, rejected)
			if replayed < 3 || outputs == 0 || late == 0 || rejected == 0 {
				t.Fatalf("the test does not exercise replay: %d epochs, %d outputs, %d late, %d rejected", replayed, outputs, late, rejected)
			}
			if after := treeOf(t, root); after != before {
				t.Fatalf("replay wrote something:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestReplayChangedSpec: a post-window filter changed (state stays
// compatible) replays the same epoch to different outputs; CompareLines
// reports the first difference and exactly the rows the change drops.
func TestReplayChangedSpec(t *testing.T) {
	ctx := context.Background()
	p, e, _ := replayPipeline(t, replaySliding, 11)
	changed := e.pipeline(t, strings.Replace(replaySliding, `filter: "clicks > 1"`, `filter: "clicks > 6"`, 1))
	clicks := regexp.MustCompile(`"clicks":(\d+),`)
	var differing int
	for ep := int64(2); ep <= 7; ep++ {
		a, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: ep})
		if err != nil {
			t.Fatal(err)
		}
		b, err := engine.Replay(ctx, changed, engine.ReplayOptions{Epoch: ep, Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, l := range a.Lines() {
			if m := clicks.FindStringSubmatch(l); m != nil && strings.HasPrefix(l, "output ") {
				if n, _ := strconv.Atoi(m[1]); n <= 6 {
					want++
				}
			}
		}
		d := engine.CompareLines(a.Lines(), b.Lines())
		if d.Differing() != want || d.OnlyB != 0 {
			t.Fatalf("epoch %d: %d lines differ (%d only in the changed replay), want the %d rows with clicks <= 6, only in the original\n%s",
				ep, d.Differing(), d.OnlyB, want, d.Describe("original", "changed"))
		}
		if want > 0 {
			m := clicks.FindStringSubmatch(d.FirstA)
			if n := 0; m != nil {
				n, _ = strconv.Atoi(m[1])
				if n > 6 {
					m = nil
				}
			}
			if m == nil {
				t.Fatalf("epoch %d: first difference %q / %q is not a row the changed filter drops", ep, d.FirstA, d.FirstB)
			}
			// Verified against the commit, the changed spec misses exactly those rows.
			v, err := engine.VerifyReplay(ctx, changed, engine.ReplayOptions{Epoch: ep})
			if err != nil {
				t.Fatal(err)
			}
			if v.Identical() || v.Diff.OnlyA != 0 || v.Diff.OnlyB != want || len(v.Counters) != 1 || !strings.HasPrefix(v.Counters[0], "rows_out:") {
				t.Fatalf("epoch %d: verify of the changed spec: %s; counters %v; want %d rows only in the commit",
					ep, v.Diff.Describe("replayed", "committed"), v.Counters, want)
			}
		}
		differing += want
	}
	if differing == 0 {
		t.Fatal("the changed filter changed no row: the test shows nothing")
	}
}

// TestReplayMissingInput: a consumed input file that is gone is named.
func TestReplayMissingInput(t *testing.T) {
	ctx := context.Background()
	p, e, _ := replayPipeline(t, replaySliding, 3)
	res, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2 || res.Files[0] != "f002.jsonl" || res.Files[1] != "f003.jsonl" {
		t.Fatalf("epoch 2 consumed %v, want [f002.jsonl f003.jsonl]", res.Files)
	}
	if err := os.Remove(filepath.Join(e.sourceDir, "f003.jsonl")); err != nil {
		t.Fatal(err)
	}
	_, err = engine.Replay(ctx, p, engine.ReplayOptions{Epoch: 2})
	if err == nil || !strings.Contains(err.Error(), "f003.jsonl") || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("replay with a deleted input: %v, want an error naming f003.jsonl", err)
	}
	if _, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: 1}); err != nil {
		t.Fatalf("epoch 1 did not read the deleted file: %v", err)
	}
}

func TestCompareLines(t *testing.T) {
	for _, tc := range []struct {
		a, b          []string
		line, oa, ob  int
		firstA, first string
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, 0, 0, 0, "", ""},
		{[]string{"a", "b", "c"}, []string{"a", "c"}, 2, 1, 0, "b", "c"},
		{[]string{"a"}, []string{"a", "a"}, 2, 0, 1, "", "a"},
		{nil, []string{"x"}, 1, 0, 1, "", "x"},
		{[]string{"a", "c", "d"}, []string{"b", "c", "e"}, 1, 2, 2, "a", "b"},
	} {
		d := engine.CompareLines(tc.a, tc.b)
		if d.Line != tc.line || d.OnlyA != tc.oa || d.OnlyB != tc.ob || d.FirstA != tc.firstA || d.FirstB != tc.first {
			t.Errorf("CompareLines(%q, %q) = %+v", tc.a, tc.b, d)
		}
	}
}

// treeOf lists every file under dir with its size and modification time.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			fmt.Fprintf(&b, "%s %d %s\n", p, info.Size(), info.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestReplayRestoredGenerations: the first epochs of generations that did
// not continue the head — a rollback, a reset of the state, a restore from
// a savepoint, a reprocess of a rejected file — replay to what they
// committed, as do the epochs after them.
func TestReplayRestoredGenerations(t *testing.T) {
	ctx := context.Background()
	e := fileEnv(t)
	replayInput(t, e, 14, 5)
	p := e.pipeline(t, replaySliding)
	run(t, p, engine.Options{UntilEpoch: 3})
	if _, err := engine.CreateSavepoint(ctx, p, "sp", 2); err != nil {
		t.Fatal(err)
	}
	run(t, p, engine.Options{UntilEpoch: 4})
	steps := []struct {
		name string
		opts engine.Options
	}{
		{"rollback", engine.Options{RollbackTo: 3, UntilEpoch: 5}},
		{"reset", engine.Options{ResetState: true, UntilEpoch: 6}},
		{"savepoint", engine.Options{FromSavepoint: "sp", UntilEpoch: 7}},
		{"reprocess", engine.Options{ReprocessRejected: true, UntilEpoch: 8}},
		{"rest", engine.Options{Parallelism: 4}},
	}
	for _, s := range steps {
		run(t, p, s.opts)
	}
	head, err := engine.ReadState(ctx, p, engine.StateQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for ep := int64(1); ep <= head.Epoch; ep++ {
		for _, par := range []int{0, 1} {
			v, err := engine.VerifyReplay(ctx, p, engine.ReplayOptions{Epoch: ep, Parallelism: par})
			if ep >= 3 && ep <= 6 {
				// Abandoned: the savepoint restore (epoch 7) went back to
				// epoch 2, the rollback (epoch 5) to epoch 3. Their outputs
				// are gone and retention removed them: refused, naming the
				// lineage and the restore.
				abandoned := func(what string, err error) {
					t.Helper()
					if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("epoch %d is not on the head's lineage (1 → 2 → 7 → … → 12)", ep)) ||
						!strings.Contains(err.Error(), "abandoned by a restore from savepoint sp") {
						t.Fatalf("%s of abandoned epoch %d: %v", what, ep, err)
					}
				}
				abandoned("verify", err)
				_, err := engine.Replay(ctx, p, engine.ReplayOptions{Epoch: ep, Parallelism: par})
				abandoned("replay", err)
				continue
			}
			if err != nil {
				t.Fatalf("epoch %d P=%d: %v", ep, par, err)
			}
			if !v.Identical() {
				t.Fatalf("epoch %d P=%d: %s\ncounters: %v", ep, par, v.Diff.Describe("replayed", "committed"), v.Counters)
			}
			if par == 0 {
				t.Logf("epoch %d: %s", ep, v.Replay.Summary())
			}
		}
	}
}
