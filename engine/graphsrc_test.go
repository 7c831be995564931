package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
)

// TestGraphSourceOnError: each source of a graph keeps its own on_error: a
// bad row of a source with on_error: reject is rejected and the run goes
// on; a bad row of a source with on_error: fail fails the epoch, naming
// the file, and commits nothing.
func TestGraphSourceOnError(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 4)
	bad := func(dir, name string) {
		t.Helper()
		path := filepath.Join(strings.TrimPrefix(dir, "file://"), name)
		if err := os.WriteFile(path, []byte("{\"id\": \"not a number\"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := strings.Replace(auctionGraph, "    format: jsonl\n    schema: {auction:", "    format: jsonl\n    on_error: fail\n    schema: {auction:", 1)
	if tmpl == auctionGraph {
		t.Fatal("the bids source block of auctionGraph changed")
	}
	p := e.pipelineFrom(t, tmpl)
	bad(e.auctions, "f-000-bad.jsonl") // auctions: on_error reject (the default)
	res := run(t, p, engine.Options{Drain: true})
	if res.RowsRejected != 1 {
		t.Fatalf("a bad auctions row (on_error: reject): %d rows rejected, want 1", res.RowsRejected)
	}
	bad(e.bids, "f-999-bad.jsonl") // bids: on_error fail
	head := res.LastEpoch
	_, err := engine.Run(context.Background(), p, engine.Options{Drain: true})
	if err == nil || !strings.Contains(err.Error(), "f-999-bad.jsonl") || !strings.Contains(err.Error(), "on_error: fail") {
		t.Fatalf("a bad bids row (on_error: fail): %v, want an error naming the file", err)
	}
	st, err := engine.ReadStatusWith(context.Background(), p, engine.StatusOptions{NoList: true})
	if err != nil || st.Epoch != head {
		t.Fatalf("the failed run moved the head: %+v, %v (was %d)", st, err, head)
	}
}

// TestGraphSourcePattern: a graph source's pattern selects its files (it
// was ignored in the graph form: a notes file beside the auctions was
// decoded and rejected), matched below that source's url; another
// source's files are not filtered by it.
func TestGraphSourcePattern(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 4)
	notes := filepath.Join(strings.TrimPrefix(e.auctions, "file://"), "README.txt")
	if err := os.WriteFile(notes, []byte("these are not auctions\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl := strings.Replace(auctionGraph, "    format: jsonl\n    schema: {id:", "    format: jsonl\n    pattern: \"*.jsonl\"\n    schema: {id:", 1)
	if tmpl == auctionGraph {
		t.Fatal("the auctions source block of auctionGraph changed")
	}
	res := run(t, e.pipelineFrom(t, tmpl), engine.Options{Drain: true})
	if res.RowsRejected != 0 {
		t.Fatalf("%d rows rejected: the README.txt outside sources.auctions.pattern was read", res.RowsRejected)
	}
	if res.Files == 0 {
		t.Fatal("no file read")
	}
	// Without the pattern the same folder's README.txt is read (and rejected).
	e2 := newGraphEnv(t)
	e2.putAuctions(t, 4)
	notes2 := filepath.Join(strings.TrimPrefix(e2.auctions, "file://"), "README.txt")
	if err := os.WriteFile(notes2, []byte("these are not auctions\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res2 := run(t, e2.pipelineFrom(t, auctionGraph), engine.Options{Drain: true})
	if res2.RowsRejected != 1 || res2.Files != res.Files+1 {
		t.Fatalf("without a pattern: %d rows rejected, %d files read; want 1 and %d", res2.RowsRejected, res2.Files, res.Files+1)
	}
}
