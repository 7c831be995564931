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

// TestKillLexicalSegments is TestKillLexicalListing after a history of 600
// processed files, so the processed-file set is in segments with key
// ranges and the ordered runs load only those after the frontier (and not
// the output log): runs SIGKILLed at spread-out moments, late keys, then
// every file's row committed exactly once.
func TestKillLexicalSegments(t *testing.T) {
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
         event_time: event_time, max_files_per_epoch: 2, order: lexical, full_list_every: 1h}
operators:
  - project: {event_time: event_time, user_id: user_id, bytes: bytes}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2}
`, "file://"+src, sink, "file://"+filepath.Join(d, "state"))
	if err := os.WriteFile(spec, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	// A history past the 512 names kept inline: the processed-file set
	// lives in ranged segments, which the ordered runs below skip.
	n := 0
	for i := range 600 {
		put(fmt.Sprintf("k%04d.jsonl", 2000+i), n)
		n++
	}
	runFloe(t, "run", spec)
	next := 3000 // new keys count up from here; late keys count down from 1999
	late := 1999
	kills, killedCommits := 0, 0
	var inOrder []int // values of the files that arrived in key order
	for i := range n {
		inOrder = append(inOrder, i)
	}
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
	t.Logf("%d files (%d late), %d runs killed, which committed %d epochs; %d rows committed", n, 1999-late, kills, killedCommits, len(rows))
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
