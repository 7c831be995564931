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
	ctx := context.Background()
	d := t.TempDir()
	src := filepath.Join(d, "in")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(key string, n int) {
		line := fmt.Sprintf(`{"event_time":"2024-01-01T00:00:10Z","user_id":"u1","page":"/p","bytes":%d}`+"\n", n)
		if err := os.WriteFile(filepath.Join(src, key), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sink := "file://" + filepath.Join(d, "out")
	spec := filepath.Join(d, "lex.yaml")
	y := fmt.Sprintf(`name: lex
source: {type: files, url: %q, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 1, order: lexical, full_list_every: 1h}
operators:
  - project: {event_time: event_time, user_id: user_id, bytes: bytes}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2}
`, "file://"+src, sink, "file://"+filepath.Join(d, "state"))
	if err := os.WriteFile(spec, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	next := 1000 // new keys count up from here; late keys count down from 999
	late := 999
	kills, killedCommits := 0, 0
	var inOrder []int // values of the files that arrived in key order
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
	t.Logf("%d files (%d late), %d runs killed, which committed %d epochs; %d rows committed", n, 999-late, kills, killedCommits, len(rows))
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
