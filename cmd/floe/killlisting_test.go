package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKillLexicalListing: a source with order: lexical, runs SIGKILLed at
// spread-out moments while new files and late files (keys sorting before
// everything already processed) keep landing. After a final run with
// --full-list every file's row is committed exactly once: a kill never
// leaves a frontier past a file that was not read, and the full listing
// reads each late file once.
func TestKillLexicalListing(t *testing.T) {
	lx := newLexicalKill(t, 1)
	lx.killRounds(t, 0, nil, 1000, 999) // new keys count up from 1000; late keys count down from 999
}

// TestKillLexicalSegments is TestKillLexicalListing after a history of 600
// processed files, so the processed-file set is in segments with key
// ranges and the ordered runs load only those after the frontier (and not
// the output log): runs SIGKILLed at spread-out moments, late keys, then
// every file's row committed exactly once.
func TestKillLexicalSegments(t *testing.T) {
	lx := newLexicalKill(t, 2)
	// A history past the 512 names kept inline: the processed-file set
	// lives in ranged segments, which the ordered runs below skip.
	var history []int
	for i := range 600 {
		lx.put(t, fmt.Sprintf("k%04d.jsonl", 2000+i), i)
		history = append(history, i)
	}
	runFloe(t, "run", lx.spec)
	lx.killRounds(t, len(history), history, 3000, 1999)
}

// lexicalKill is the pipeline of the lexical kill tests: one-row JSON-lines
// files (the row's bytes is the file's number) under an ordered source.
type lexicalKill struct {
	src, sink, spec string
}

func newLexicalKill(t *testing.T, maxFiles int) *lexicalKill {
	d := t.TempDir()
	lx := &lexicalKill{src: filepath.Join(d, "in"), sink: "file://" + filepath.Join(d, "out"), spec: filepath.Join(d, "lex.yaml")}
	if err := os.MkdirAll(lx.src, 0o755); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf(`name: lex
source: {type: files, url: %q, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: %d, order: lexical, full_list_every: 1h}
operators:
  - project: {event_time: event_time, user_id: user_id, bytes: bytes}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2}
`, "file://"+lx.src, maxFiles, lx.sink, "file://"+filepath.Join(d, "state"))
	if err := os.WriteFile(lx.spec, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return lx
}

func (lx *lexicalKill) put(t *testing.T, key string, n int) {
	t.Helper()
	line := fmt.Sprintf(`{"event_time":"2024-01-01T00:00:10Z","user_id":"u1","page":"/p","bytes":%d}`+"\n", n)
	if err := os.WriteFile(filepath.Join(lx.src, key), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

// killRounds lands new files (keys counting up from next) and late ones
// (keys counting down from late, sorting before every key so far) while
// runs are SIGKILLed at spread-out moments; after an ordered run every
// file that arrived in key order (inOrder: the values of files already
// landed in key order, and those it lands) is
// committed once, and after a --full-list run every one of the n+landed
// files is.
func (lx *lexicalKill) killRounds(t *testing.T, n int, inOrder []int, next, late int) {
	ctx := context.Background()
	spec, sink := lx.spec, lx.sink
	put := func(key string, n int) { lx.put(t, key, n) }
	lateStart := late
	kills, killedCommits := 0, 0
	// Rounds go on until kills landed between commits (how fast a run is
	// depends on the machine's load), within a bound.
	for round := 0; round < 40 && (round < 10 || killedCommits < 3); round++ {
		for range 6 {
			put(fmt.Sprintf("k%04d.jsonl", next), n)
			inOrder = append(inOrder, n)
			next++
			n++
		}
		if round > 0 {
			put(fmt.Sprintf("k%04d.jsonl", late), n) // sorts before every key so far
			late--
			n++
		}
		cmd := floeCommand(t, "run", spec, "--log-format", "json")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		delay := time.Duration(30+(round%10)*90) * time.Millisecond
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("round %d: floe run failed: %v\n%s", round, err, tailString(out.String(), 3000))
			}
		case <-time.After(delay):
			_ = cmd.Process.Kill()
			if err := <-exited; wasKilled(err) {
				kills++
				killedCommits += strings.Count(out.String(), `"epoch committed"`)
			} else if err != nil {
				t.Fatalf("round %d: floe run failed: %v\n%s", round, err, tailString(out.String(), 3000))
			}
		}
	}
	// An ordered run (no full listing due) reads every file that arrived
	// in key order, whatever the kills left: the frontier never passed a
	// file that was not read.
	runFloe(t, "run", spec)
	rows, _ := committedRows(t, ctx, spec, sink)
	has := map[string]int{}
	for _, r := range rows {
		has[r[strings.LastIndex(r, "bytes="):]]++
	}
	for _, v := range inOrder {
		if c := has[fmt.Sprintf("bytes=%d", v)]; c != 1 {
			t.Fatalf("after an ordered run, the in-order file with value %d is committed %d times, want once", v, c)
		}
	}
	runFloe(t, "run", spec, "--full-list")
	rows, _ = committedRows(t, ctx, spec, sink)
	distinct := map[string]int{}
	for _, r := range rows {
		distinct[r]++
	}
	t.Logf("%d files (%d late), %d runs killed, which committed %d epochs; %d rows committed", n, lateStart-late, kills, killedCommits, len(rows))
	if kills == 0 || killedCommits == 0 {
		t.Fatal("no run was killed between commits: the test tests nothing")
	}
	for r, c := range distinct {
		if c != 1 {
			t.Errorf("row %s committed %d times", r, c)
		}
	}
	if len(distinct) != n {
		var missing []string
		for i := range n {
			if !strings.Contains(strings.Join(rows, "\n"), fmt.Sprintf("bytes=%d\n", i)) && !strings.HasSuffix(strings.Join(rows, "\n"), fmt.Sprintf("bytes=%d", i)) {
				missing = append(missing, fmt.Sprint(i))
			}
		}
		t.Fatalf("%d distinct rows committed, want %d (one per file); missing values %v", len(distinct), n, missing)
	}
}
