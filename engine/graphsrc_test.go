package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
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

// TestGraphSourceStartLatest: start_from: latest on one source of a graph
// marks that source's files present at the first run read without reading
// them, and only that source's (it was ignored in the graph form: every
// file was read); files landing later are read from every source.
func TestGraphSourceStartLatest(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 4) // 4 files a stream: 5 auctions and 40 bids each
	tmpl := strings.Replace(auctionGraph, "    format: jsonl\n    schema: {auction:", "    format: jsonl\n    start_from: latest\n    schema: {auction:", 1)
	if tmpl == auctionGraph {
		t.Fatal("the bids source block of auctionGraph changed")
	}
	p := e.pipelineFrom(t, tmpl)
	res := run(t, p, engine.Options{Drain: true})
	if res.Rows != 4*5 || res.Files != 8 {
		t.Fatalf("first run: %d rows from %d files; want the 20 auctions only (the 4 bids files marked read unread)", res.Rows, res.Files)
	}
	e.putAuctions(t, 6) // files 4 and 5 of each stream land (0-3 rewritten unchanged)
	res = run(t, p, engine.Options{Drain: true})
	if res.Rows != 2*5+2*40 || res.Files != 4 {
		t.Fatalf("second run: %d rows from %d files; want 90 from the 4 new files", res.Rows, res.Files)
	}
}

// withSourceSettings returns auctionGraph with extra settings in the
// auctions and the bids source blocks (each "key: value" lines, indented as
// the block's).
func withSourceSettings(t *testing.T, auctions, bids string) string {
	t.Helper()
	tmpl := auctionGraph
	for _, x := range []struct{ at, extra string }{
		{"    format: jsonl\n    schema: {id:", auctions},
		{"    format: jsonl\n    schema: {auction:", bids},
	} {
		if x.extra == "" {
			continue
		}
		next := strings.Replace(tmpl, x.at, "    format: jsonl\n"+x.extra+x.at[len("    format: jsonl\n"):], 1)
		if next == tmpl {
			t.Fatal("a source block of auctionGraph changed")
		}
		tmpl = next
	}
	return strings.ReplaceAll(tmpl, "    max_files_per_epoch: 1\n", "    max_files_per_epoch: 4\n")
}

// TestGraphSourceRowLimit: a source's max_rows_per_epoch counts that
// source's rows only. Epoch 1 is offered the 4 auctions files (5 rows
// each, no limit) and the 4 bids files (40 rows each, max_rows_per_epoch:
// 50), the two sources' files in turn (a0, b0, a1, b1, ...): it ends after
// the file that crosses 50 bids rows, b1, so it reads 2 + 2 files and 90
// rows. (One limit over both sources' rows, as the runner once merged
// them, ended it after a1 at 50 rows.)
func TestGraphSourceRowLimit(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 4)
	p := e.pipelineFrom(t, withSourceSettings(t, "", "    max_rows_per_epoch: 50\n"))
	res := run(t, p, engine.Options{Drain: true, UntilEpoch: 1})
	if res.Files != 4 || res.Rows != 2*5+2*40 {
		t.Fatalf("epoch 1 read %d files, %d rows; want 2 auctions and 2 bids files (90 rows)", res.Files, res.Rows)
	}
	all := run(t, p, engine.Options{Drain: true})
	if res.Files+all.Files != 8 || res.Rows+all.Rows != 4*5+4*40 {
		t.Fatalf("epoch 1 and the rest read %d+%d files, %d+%d rows; want all 8 files and 180 rows", res.Files, all.Files, res.Rows, all.Rows)
	}
}

// TestGraphSourceRejectedFraction: a source's max_rejected_fraction is
// judged over that source's rows: many rejected bids do not fail an epoch
// on the auctions' limit; rejected auctions over it do, naming the
// source's field and the file.
func TestGraphSourceRejectedFraction(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 4)
	badLines := func(dir, name string, n int) {
		t.Helper()
		var b strings.Builder
		for range n {
			b.WriteString("{\"id\": \"not a number\", \"auction\": \"x\"}\n")
		}
		if err := os.WriteFile(filepath.Join(strings.TrimPrefix(dir, "file://"), name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := e.pipelineFrom(t, withSourceSettings(t, "    max_rejected_fraction: 0.1\n", ""))
	// 30 bad bids among 160 good: 14% of all rows, 0% of the auctions.
	badLines(e.bids, "f-001-bad.jsonl", 30)
	res := run(t, p, engine.Options{Drain: true})
	if res.RowsRejected != 30 {
		t.Fatalf("%d rows rejected, want the 30 bad bids", res.RowsRejected)
	}
	head := res.LastEpoch
	// 5 bad auctions beside 5 new good ones: half of the auctions' rows.
	e2 := newGraphEnv(t)
	e2.putAuctions(t, 2)
	badLines(e2.auctions, "f-000-bad.jsonl", 5)
	p2 := e2.pipelineFrom(t, withSourceSettings(t, "    max_rejected_fraction: 0.1\n", ""))
	_, err := engine.Run(context.Background(), p2, engine.Options{Drain: true})
	if err == nil || !strings.Contains(err.Error(), "sources.auctions.max_rejected_fraction 0.1 exceeded") || !strings.Contains(err.Error(), "f-000-bad.jsonl") {
		t.Fatalf("rejected auctions over their limit: %v; want an error naming sources.auctions.max_rejected_fraction and the file", err)
	}
	if st, err := engine.ReadStatusWith(context.Background(), p, engine.StatusOptions{NoList: true}); err != nil || st.Epoch != head {
		t.Fatalf("status of the first pipeline: %+v, %v (head was %d)", st, err, head)
	}
}

// TestGraphSourceCapture: capture: true on one source copies that source's
// consumed files only.
func TestGraphSourceCapture(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 2)
	p := e.pipelineFrom(t, withSourceSettings(t, "    capture: true\n", ""))
	run(t, p, engine.Options{Drain: true})
	var got []string
	for _, m := range headChain(t, p, 10) {
		for _, ref := range m.Source.Captured {
			_, key, _ := strings.Cut(ref.Path, "/source/input/")
			got = append(got, key)
		}
	}
	slices.Sort(got)
	want := []string{"auctions/f-000.jsonl", "auctions/f-001.jsonl"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the epochs captured %v; want the auctions files %v only", got, want)
	}
}
