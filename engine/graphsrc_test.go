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
