package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// proxiedEnv is an S3 env whose every store goes through a counting
// proxy; e.put writes directly (not counted).
func proxiedEnv(t *testing.T) (*env, *faultproxy.Proxy) {
	e := s3Env(t)
	u, err := url.Parse(e.state)
	if err != nil {
		t.Fatal(err)
	}
	px, err := faultproxy.Start(u.Query().Get("endpoint"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	e.source, e.state, e.sink, e.late = s3test.Via(e.source, px.URL), s3test.Via(e.state, px.URL), s3test.Via(e.sink, px.URL), s3test.Via(e.late, px.URL)
	return e, px
}

// serverRequests classifies what the proxy received as store.Requests do.
func serverRequests(px *faultproxy.Proxy) store.Requests {
	var r store.Requests
	for _, q := range px.Requests() {
		switch store.S3Op(q.Method, q.Path, q.RawQuery, true) {
		case store.OpGet:
			r.Get++
		case store.OpPut:
			r.Put++
		case store.OpList:
			r.List++
		case store.OpDelete:
			r.Delete++
		}
	}
	return r
}

// TestRequestCountsEqualServer: a run's request counts (the Result, and
// the epochs' stats that history shows) are what the S3 server received,
// LIST pages included: 1,100 source files are two pages per listing.
func TestRequestCountsEqualServer(t *testing.T) {
	e, px := proxiedEnv(t)
	src, err := store.Open(context.Background(), e.source)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range 1100 {
		if _, err := src.Put(context.Background(), fmt.Sprintf("a/%04d.jsonl", i), jsonl(ev("00:00:10", "u1", 1)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := e.pipeline(t, windowSpec)
	p.Source.MaxFilesPerEpoch = 0
	run(t, p, engine.Options{}) // the first run reads them all
	e.put(t, "b/0000.jsonl", jsonl(ev("00:01:10", "u1", 1)))
	px.ResetCounts()
	res := run(t, p, engine.Options{})
	got, want := res.Requests.Requests, serverRequests(px)
	t.Logf("one new file after 1,100: run counted %+v, server received %+v", got, want)
	if got != want {
		t.Fatalf("run counted %+v, server received %+v", got, want)
	}
	if got.List < 2 {
		t.Fatalf("lists = %d: the source listing alone is two pages", got.List)
	}
	recs, err := engine.History(context.Background(), p, 1)
	if err != nil || len(recs) != 1 || recs[0].Lists == nil {
		t.Fatalf("history: %v, %v", recs, err)
	}
	if r := recs[0]; *r.Gets+*r.Puts+*r.Lists+*r.Deletes > want.Total() || *r.Puts == 0 {
		t.Fatalf("epoch stats gets=%d puts=%d lists=%d deletes=%d: more than the server received (%+v), or no put", *r.Gets, *r.Puts, *r.Lists, *r.Deletes, want)
	}

	// floe status: the listing's keys and requests, and a warning past
	// the bound.
	st, err := engine.ReadStatusWith(context.Background(), p, engine.StatusOptions{MaxListRequests: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.ListedKeys == nil || *st.ListedKeys != 1101 || *st.ListRequests != 2 || st.Listing != "full" || st.FilesSeen != 1101 ||
		!strings.Contains(st.ListWarning, "2 requests") || !strings.Contains(st.ListWarning, "order: lexical") {
		t.Fatalf("status listing %q, keys %v, requests %v, held %d, warning %q", st.Listing, st.ListedKeys, st.ListRequests, st.FilesSeen, st.ListWarning)
	}
}

const lexSpec = `
name: lex
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, order: lexical, full_list_every: 1h{{extra}}}
operators:
  - project: {event_time: event_time, user_id: user_id, bytes: bytes}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: {{par}}}
`

func lexPipeline(t *testing.T, e *env, extra string, par int) *spec.Pipeline {
	return e.pipeline(t, strings.NewReplacer("{{extra}}", extra, "{{par}}", fmt.Sprint(par)).Replace(lexSpec))
}

// listRec records the start key of every listing of the source.
type listRec struct {
	store.Store
	mu     sync.Mutex
	afters []string
}

func (l *listRec) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	return l.ListAfter(ctx, prefix, "")
}

func (l *listRec) ListAfter(ctx context.Context, prefix, after string) ([]store.ObjectInfo, error) {
	l.mu.Lock()
	l.afters = append(l.afters, after)
	l.mu.Unlock()
	return store.ListAfter(ctx, l.Store, prefix, after)
}

// take returns the start keys recorded since the last call.
func (l *listRec) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.afters
	l.afters = nil
	return out
}

func recording(rec *listRec, now func() time.Time) engine.Options {
	return engine.Options{Now: now, WrapStore: func(name string, s store.Store) store.Store {
		if name != "source" {
			return s
		}
		rec.Store = s
		return rec
	}}
}

// putN writes the file key with one row whose bytes value is n.
func putN(t *testing.T, e *env, key string, n int) {
	e.put(t, key, jsonl(ev("00:00:10", "u1", n)))
}

// wantEachOnce checks the committed rows are the bytes values want, each once.
func wantEachOnce(t *testing.T, p *spec.Pipeline, want ...int) {
	t.Helper()
	rows := committedRows(t, p)
	if len(rows) != len(want) {
		t.Fatalf("committed %d rows, want %d (each file once):\n%s", len(rows), len(want), strings.Join(rows, "\n"))
	}
	for _, n := range want {
		hits := 0
		for _, r := range rows {
			if strings.HasSuffix(r, fmt.Sprintf(",bytes=%d", n)) {
				hits++
			}
		}
		if hits != 1 {
			t.Fatalf("value %d committed %d times, want once:\n%s", n, hits, strings.Join(rows, "\n"))
		}
	}
}

func headOf(t *testing.T, p *spec.Pipeline) *manifest.Manifest {
	t.Helper()
	return headChain(t, p, 1)[0]
}

// TestLexicalListing: with source.order: lexical a run lists only the keys
// after the listing frontier; a late key that sorts before it is not seen
// by ordered listings and is read by the first full listing, due
// full_list_every after the last one, once; nothing is read twice.
func TestLexicalListing(t *testing.T) {
	e := fileEnv(t)
	p := lexPipeline(t, e, "", 1)
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := t0
	rec := &listRec{}
	opts := recording(rec, func() time.Time { return now })
	for i := 1; i <= 5; i++ {
		putN(t, e, fmt.Sprintf("day=2026-12-01/f%02d.jsonl", i*10), i)
	}
	if res := run(t, p, opts); res.Files != 5 {
		t.Fatalf("first run read %d files, want 5", res.Files)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "" {
		t.Fatalf("first run listed after %q, want one full listing", got)
	}
	m := headOf(t, p)
	if m.Source.ListedAfter != "day=2026-12-01/f50.jsonl" || m.Source.FullListAt == nil || !m.Source.FullListAt.Equal(t0) {
		t.Fatalf("head records frontier %q, full listing at %v", m.Source.ListedAfter, m.Source.FullListAt)
	}

	// A new key, and a late one that sorts before the frontier.
	now = t0.Add(10 * time.Minute)
	putN(t, e, "day=2026-12-02/f10.jsonl", 6)
	putN(t, e, "day=2026-12-01/f15.jsonl", 7) // late
	if res := run(t, p, opts); res.Files != 1 {
		t.Fatalf("ordered run read %d files, want 1 (the new one)", res.Files)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "day=2026-12-01/f50.jsonl" {
		t.Fatalf("ordered run listed after %q, want after the frontier", got)
	}
	putN(t, e, "day=2026-12-02/f20.jsonl", 8)
	st, err := engine.ReadStatusWith(context.Background(), p, engine.StatusOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Listing != "after day=2026-12-02/f10.jsonl" || *st.ListedKeys != 1 || *st.PendingFiles != 1 || st.FilesSeen != 6 || st.ListWarning != "" {
		t.Fatalf("status: listing %q, %d keys, %d pending, %d held, warning %q", st.Listing, *st.ListedKeys, *st.PendingFiles, st.FilesSeen, st.ListWarning)
	}
	if res := run(t, p, opts); res.Files != 1 {
		t.Fatalf("ordered run read %d files, want 1", res.Files)
	}
	rec.take()
	wantEachOnce(t, p, 1, 2, 3, 4, 5, 6, 8)

	// Nothing new: an ordered run commits nothing and lists one key.
	now = t0.Add(30 * time.Minute)
	if res := run(t, p, opts); res.Files != 0 || res.Epochs != 0 {
		t.Fatalf("idle ordered run: %d files, %d epochs", res.Files, res.Epochs)
	}
	rec.take()

	// An hour after the last full listing: a full listing finds the late key.
	now = t0.Add(61 * time.Minute)
	if res := run(t, p, opts); res.Files != 1 {
		t.Fatalf("full-listing run read %d files, want 1 (the late one)", res.Files)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "" {
		t.Fatalf("due run listed after %q, want a full listing", got)
	}
	m = headOf(t, p)
	if m.Source.ListedAfter != "day=2026-12-02/f20.jsonl" || !m.Source.FullListAt.Equal(now) {
		t.Fatalf("head records frontier %q, full listing at %v", m.Source.ListedAfter, m.Source.FullListAt)
	}
	wantEachOnce(t, p, 1, 2, 3, 4, 5, 6, 7, 8)

	// --full-list, and another due full listing with nothing new: nothing
	// is read again; the due one is recorded by an epoch without input.
	opts.FullList = true
	if res := run(t, p, opts); res.Files != 0 {
		t.Fatalf("--full-list run read %d files again", res.Files)
	}
	opts.FullList = false
	now = t0.Add(3 * time.Hour)
	if res := run(t, p, opts); res.Files != 0 || res.Epochs != 1 {
		t.Fatalf("due full listing with nothing new: %d files, %d epochs (want 0, 1: the listing recorded)", res.Files, res.Epochs)
	}
	now = t0.Add(3*time.Hour + time.Minute)
	rec.take()
	if res := run(t, p, opts); res.Files != 0 || res.Epochs != 0 {
		t.Fatalf("run after a recorded full listing: %d files, %d epochs", res.Files, res.Epochs)
	}
	if got := rec.take(); len(got) != 1 || got[0] == "" {
		t.Fatalf("run after a recorded full listing listed after %q, want an ordered listing", got)
	}
	wantEachOnce(t, p, 1, 2, 3, 4, 5, 6, 7, 8)
}

// TestLexicalFrontierBehindPending: a run that stops before it read every
// listed file (max_files_per_epoch, --until-epoch) records the frontier
// just before the first file still pending, not at the greatest key it
// processed, so the next ordered listing still finds the rest.
func TestLexicalFrontierBehindPending(t *testing.T) {
	e := fileEnv(t)
	p := lexPipeline(t, e, ", max_files_per_epoch: 1", 1)
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := t0
	rec := &listRec{}
	opts := recording(rec, func() time.Time { return now })
	for i := 1; i <= 5; i++ {
		putN(t, e, fmt.Sprintf("f%02d.jsonl", i*10), i)
	}
	opts.UntilEpoch = 2
	if res := run(t, p, opts); res.Files != 2 {
		t.Fatalf("first run read %d files, want 2", res.Files)
	}
	if m := headOf(t, p); m.Source.ListedAfter != "f20.jsonl" {
		t.Fatalf("frontier %q after reading f10, f20 of five: want f20.jsonl", m.Source.ListedAfter)
	}
	opts.UntilEpoch = 0
	now = t0.Add(time.Minute)
	rec.take()
	if res := run(t, p, opts); res.Files != 3 {
		t.Fatalf("second run read %d files, want the 3 left", res.Files)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "f20.jsonl" {
		t.Fatalf("second run listed after %q, want f20.jsonl", got)
	}
	wantEachOnce(t, p, 1, 2, 3, 4, 5)
}

// TestLexicalRescale: late keys across a rescale (parallelism 2 -> 1 ->
// 3): each is read by the first full listing after it landed, once.
func TestLexicalRescale(t *testing.T) {
	e := fileEnv(t)
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := t0
	opts := engine.Options{Now: func() time.Time { return now }}
	putN(t, e, "k20.jsonl", 1)
	putN(t, e, "k40.jsonl", 2)
	run(t, lexPipeline(t, e, "", 2), opts)
	putN(t, e, "k30.jsonl", 3) // late
	putN(t, e, "k50.jsonl", 4)
	now = t0.Add(time.Minute)
	if res := run(t, lexPipeline(t, e, "", 1), opts); res.Files != 1 {
		t.Fatalf("rescaled ordered run read %d files, want 1 (k50)", res.Files)
	}
	putN(t, e, "k10.jsonl", 5) // late
	now = t0.Add(2 * time.Hour)
	p := lexPipeline(t, e, "", 3)
	if res := run(t, p, opts); res.Files != 2 {
		t.Fatalf("rescaled run with a due full listing read %d files, want 2 (k10, k30)", res.Files)
	}
	now = t0.Add(4 * time.Hour)
	if res := run(t, p, engine.Options{Now: opts.Now, FullList: true}); res.Files != 0 {
		t.Fatalf("a later full listing read %d files again", res.Files)
	}
	wantEachOnce(t, p, 1, 2, 3, 4, 5)
}

// TestForgetAfter: with source.forget_after, a processed file older than
// the bound is forgotten by the processed-file set (the head's count
// drops) and, when it reappears with its old modification time, is not
// read again; an unprocessed file older than the bound is ignored.
func TestForgetAfter(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("lexical=%v", ordered), func(t *testing.T) {
			e := fileEnv(t)
			tmpl := strings.Replace(lexSpec, "order: lexical, full_list_every: 1h", "forget_after: 30d", 1)
			if ordered {
				tmpl = strings.Replace(lexSpec, "{{extra}}", ", forget_after: 30d{{extra}}", 1)
			}
			p := e.pipeline(t, strings.NewReplacer("{{extra}}", "", "{{par}}", "1").Replace(tmpl))
			t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
			now := t0
			opts := engine.Options{Now: func() time.Time { return now }}
			touch := func(key string, mod time.Time) {
				if err := os.Chtimes(filepath.Join(e.sourceDir, key), mod, mod); err != nil {
					t.Fatal(err)
				}
			}
			putN(t, e, "a.jsonl", 1)
			touch("a.jsonl", t0.Add(-20*24*time.Hour))
			putN(t, e, "b.jsonl", 2)
			touch("b.jsonl", t0.Add(-1*time.Hour))
			putN(t, e, "old.jsonl", 3)
			touch("old.jsonl", t0.Add(-40*24*time.Hour)) // never read: older than the bound
			if res := run(t, p, opts); res.Files != 2 {
				t.Fatalf("first run read %d files, want 2 (old.jsonl is past forget_after)", res.Files)
			}
			if c := headOf(t, p).Source.Count; c != 2 {
				t.Fatalf("processed-file set holds %d, want 2", c)
			}
			// 15 days on a.jsonl is 35 days old: forgotten (with a full
			// listing, which the lexical source makes every hour).
			now = t0.Add(15 * 24 * time.Hour)
			putN(t, e, "c.jsonl", 4)
			touch("c.jsonl", now)
			if res := run(t, p, opts); res.Files != 1 {
				t.Fatalf("second run read %d files, want 1 (c.jsonl)", res.Files)
			}
			if c := headOf(t, p).Source.Count; c != 2 {
				t.Fatalf("processed-file set holds %d after forgetting a.jsonl, want 2 (b, c)", c)
			}
			// a.jsonl reappears (rewritten, its old modification time kept).
			putN(t, e, "a.jsonl", 1)
			touch("a.jsonl", t0.Add(-20*24*time.Hour))
			now = now.Add(2 * time.Hour)
			if res := run(t, p, engine.Options{Now: opts.Now, FullList: true}); res.Files != 0 {
				t.Fatalf("a forgotten file that reappeared was read again (%d files)", res.Files)
			}
			wantEachOnce(t, p, 1, 2, 4)
		})
	}
}

// TestLexicalS3Requests: on S3, after 1,100 processed files (two LIST
// pages), a run with one new file lists the source with one request
// (StartAfter the frontier), the whole run with 2 (the source, and
// _rejected/ after the names of epochs older than the retained ones: the
// state and the sink are listed by runs that list the source in full),
// counted at the server; a late key is read by the due full listing, once.
func TestLexicalS3Requests(t *testing.T) {
	e, px := proxiedEnv(t)
	src, err := store.Open(context.Background(), e.source)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range 1100 {
		if _, err := src.Put(context.Background(), fmt.Sprintf("k%05d.jsonl", 10*i+10), jsonl(ev("00:00:10", "u1", i)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := lexPipeline(t, e, "", 1)
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := t0
	opts := engine.Options{Now: func() time.Time { return now }}
	sourceLists := func() (n int, afters []string) {
		for _, q := range px.Requests() {
			if store.S3Op(q.Method, q.Path, q.RawQuery, true) == store.OpList && strings.Contains(q.RawQuery, "prefix=in%2Fevents%2F") {
				n++
				v, _ := url.ParseQuery(q.RawQuery)
				afters = append(afters, v.Get("start-after"))
			}
		}
		return n, afters
	}
	px.ResetCounts()
	run(t, p, opts)
	if n, _ := sourceLists(); n != 2 {
		t.Fatalf("the first (full) listing took %d requests, want 2 pages", n)
	}
	putN(t, e, "k99999.jsonl", 5000)
	putN(t, e, "k00015.jsonl", 5001) // late: sorts before the frontier
	now = t0.Add(time.Minute)
	px.ResetCounts()
	res := run(t, p, opts)
	n, afters := sourceLists()
	all := serverRequests(px)
	t.Logf("one new file after 1,100: source listing %d requests (start-after %q); the run %+v", n, afters, all)
	if res.Files != 1 || n != 1 || afters[0] != "in/events/k11000.jsonl" {
		t.Fatalf("ordered run: %d files, source listed with %d requests after %q; want 1 file, 1 request after the frontier", res.Files, n, afters)
	}
	if all.List > 2 || all != res.Requests.Requests {
		t.Fatalf("the run sent %+v (counted %+v); want at most 2 LIST requests and equal counts", all, res.Requests.Requests)
	}
	for _, q := range px.Requests() {
		if store.S3Op(q.Method, q.Path, q.RawQuery, true) != store.OpList || strings.Contains(q.RawQuery, "prefix=in%2Fevents%2F") {
			continue
		}
		v, _ := url.ParseQuery(q.RawQuery)
		if !strings.HasSuffix(v.Get("prefix"), "_rejected/") {
			t.Fatalf("the ordered run listed %s?%s; want only the source and the side outputs", q.Path, q.RawQuery)
		}
	}
	now = t0.Add(2 * time.Hour)
	if res := run(t, p, opts); res.Files != 1 {
		t.Fatalf("due full listing read %d files, want the late one", res.Files)
	}
	want := []int{5000, 5001}
	for i := range 1100 {
		want = append(want, i)
	}
	wantEachOnce(t, p, want...)
}

// TestGraphRefusesOrder: the graph form lists its sources whole; order
// on a named source is refused with a message naming it.
func TestGraphRefusesOrder(t *testing.T) {
	p, err := spec.Load("../testdata/pipelines/auctions-graph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	p.State.URL = fileURL(filepath.Join(d, "state"))
	p.Sources[0].Source.Order = spec.OrderLexical
	_, err = engine.Run(context.Background(), p, engine.Options{})
	if err == nil || !strings.Contains(err.Error(), "sources."+p.Sources[0].Name+".order: order is not supported in the graph form") {
		t.Fatalf("graph source with order: %v", err)
	}
}

// TestGraphForgetAfter: in the graph form forget_after is a named
// source's own: its files older than the bound are ignored, while files
// of the same age in another source are read.
func TestGraphForgetAfter(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 3)
	tmpl := strings.Replace(auctionGraph, "    format: jsonl\n    schema: {auction:", "    format: jsonl\n    forget_after: 30d\n    schema: {auction:", 1)
	if tmpl == auctionGraph {
		t.Fatal("the bids source block of auctionGraph changed")
	}
	p := e.pipelineFrom(t, tmpl)
	now := time.Now()
	old := now.Add(-40 * 24 * time.Hour)
	var bids, auctions int
	for _, dir := range []string{e.bids, e.auctions} {
		root := strings.TrimPrefix(dir, "file://")
		ents, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for i, de := range ents {
			if i == 0 { // the first file of each source is 40 days old
				if err := os.Chtimes(filepath.Join(root, de.Name()), old, old); err != nil {
					t.Fatal(err)
				}
			}
			if dir == e.bids {
				bids++
			} else {
				auctions++
			}
		}
	}
	res := run(t, p, engine.Options{Drain: true})
	if want := int64(bids - 1 + auctions); res.Files != want {
		t.Fatalf("read %d files, want %d: every auctions file and the bids files but the old one (forget_after on bids only)", res.Files, want)
	}
	if res := run(t, p, engine.Options{}); res.Files != 0 {
		t.Fatalf("a second run read %d files", res.Files)
	}
}

// listCount counts the listings of a store, by prefix.
type listCount struct {
	store.Store
	mu       sync.Mutex
	prefixes []string
}

func (l *listCount) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	return l.ListAfter(ctx, prefix, "")
}

func (l *listCount) ListAfter(ctx context.Context, prefix, after string) ([]store.ObjectInfo, error) {
	l.mu.Lock()
	l.prefixes = append(l.prefixes, prefix)
	l.mu.Unlock()
	return store.ListAfter(ctx, l.Store, prefix, after)
}

func (l *listCount) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.prefixes
	l.prefixes = nil
	return out
}

// TestLexicalOrphans: with order: lexical, a run that lists after the
// frontier lists neither the state nor the sink. A killed attempt's
// rejected-rows file is deleted by the next run anyway (side outputs are
// swept at every start), its output and state files stay until the next
// run that lists the source in full, which deletes them; retention keeps
// retain_epochs epochs meanwhile (from the manifest chain), and every row
// is committed once.
func TestLexicalOrphans(t *testing.T) {
	e := fileEnv(t)
	p := lexPipeline(t, e, "", 1)
	p.State.RetainEpochs = 2
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := t0
	state, sink := &listCount{}, &listCount{}
	opts := engine.Options{Now: func() time.Time { return now }, WrapStore: func(name string, s store.Store) store.Store {
		switch name {
		case "state":
			state.Store = s
			return state
		case "sink":
			sink.Store = s
			return sink
		}
		return s
	}}
	putN(t, e, "f01.jsonl", 1)
	run(t, p, opts)

	// Epoch 2 writes its output and its rejected-rows file, then dies
	// before its manifest; a state file of the dead attempt stands in for
	// the state it would have written.
	now = t0.Add(time.Minute)
	e.put(t, "f02.jsonl", jsonl(ev("00:00:10", "u1", 2), "not json"))
	_, err := engine.Run(context.Background(), p, engine.Options{Now: opts.Now, Retry: store.RetryPolicy{MaxAttempts: 1},
		WrapStore: func(name string, s store.Store) store.Store {
			if name != "state" {
				return s
			}
			return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{
				Match: store.Match{Op: store.OpPut, KeyContains: manifest.ManifestFile}, Mode: store.CrashBefore}}})
		}})
	if !errors.Is(err, store.ErrCrashed) {
		t.Fatalf("crashing run: %v", err)
	}
	deadState := "lex/" + manifest.SourcePath(1, 2, "0badc0de-0000-4000-8000-000000000000", "seen-9.txt")
	st, err := store.Open(context.Background(), e.state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Put(context.Background(), deadState, []byte("x\n"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var deadOut, deadRejected []string
	for _, k := range listKeys(t, e.sink) {
		switch {
		case strings.HasPrefix(k, "part-g000001-e0000000002-"):
			deadOut = append(deadOut, k)
		case strings.HasPrefix(k, "_rejected/part-g000001-e0000000002-"):
			deadRejected = append(deadRejected, k)
		}
	}
	if len(deadOut) != 1 || len(deadRejected) != 1 {
		t.Fatalf("the dead attempt left outputs %v and rejected files %v; want one of each", deadOut, deadRejected)
	}

	// Ordered runs: epoch 2 again, then more, each with one new file.
	for i := 3; i <= 6; i++ {
		now = t0.Add(time.Duration(i) * time.Minute)
		putN(t, e, fmt.Sprintf("f%02d.jsonl", i), i)
		state.take()
		sink.take()
		if res := run(t, p, opts); res.Epochs < 1 {
			t.Fatalf("ordered run %d committed nothing", i)
		}
		if got := state.take(); len(got) != 0 {
			t.Fatalf("an ordered run listed the state: %q", got)
		}
		if got := sink.take(); len(got) != 1 || got[0] != "_rejected/" {
			t.Fatalf("an ordered run listed the sink under %q; want _rejected/ once", got)
		}
	}
	keys := strings.Join(listKeys(t, e.sink), "\n")
	if strings.Contains(keys, deadRejected[0]) {
		t.Fatalf("the dead attempt's rejected-rows file survived the next run's side sweep")
	}
	if !strings.Contains(keys, deadOut[0]) || !slices.Contains(listKeys(t, e.state), deadState) {
		t.Fatalf("an ordered run deleted the dead attempt's files, which it should not see (it lists neither the state nor the sink)")
	}
	manifests := 0
	for _, k := range listKeys(t, e.state) {
		if strings.HasSuffix(k, manifest.ManifestFile) {
			manifests++
		}
	}
	if manifests != 2 {
		t.Fatalf("%d manifests after ordered runs with retain_epochs: 2, want 2", manifests)
	}
	wantEachOnce(t, p, 1, 2, 3, 4, 5, 6)

	// The full listing due an hour later sweeps them.
	now = t0.Add(2 * time.Hour)
	run(t, p, opts)
	if got := state.take(); len(got) == 0 {
		t.Fatal("the full-listing run did not list the state")
	}
	if slices.Contains(listKeys(t, e.sink), deadOut[0]) || slices.Contains(listKeys(t, e.state), deadState) {
		t.Fatalf("the full-listing run left the dead attempt's files")
	}
	wantEachOnce(t, p, 1, 2, 3, 4, 5, 6)
}

// getRec records the keys a store is asked for.
type getRec struct {
	store.Store
	mu   sync.Mutex
	keys []string
}

func (g *getRec) Get(ctx context.Context, key string) ([]byte, string, error) {
	g.mu.Lock()
	g.keys = append(g.keys, key)
	g.mu.Unlock()
	return g.Store.Get(ctx, key)
}

func (g *getRec) take(part string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, k := range g.keys {
		if strings.Contains(k, part) {
			out = append(out, k)
		}
	}
	g.keys = nil
	return out
}

// TestLexicalPartialLogs: with order: lexical the processed-file set and
// the size log record each segment's key range; a run that lists after
// the frontier reads none of the segments that end at or before it, and
// not the output log; a full listing reads them all and still reads a
// late key once.
func TestLexicalPartialLogs(t *testing.T) {
	e := fileEnv(t)
	p := lexPipeline(t, e, "", 1)
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := t0
	gets := &getRec{}
	opts := engine.Options{Now: func() time.Time { return now }, WrapStore: func(name string, s store.Store) store.Store {
		if name != "state" {
			return s
		}
		gets.Store = s
		return gets
	}}
	var want []int
	for i := range 600 { // past the 512 kept inline: segments
		putN(t, e, fmt.Sprintf("k%05d.jsonl", 10*i+10), i)
		want = append(want, i)
	}
	run(t, p, opts)
	m := headOf(t, p)
	if len(m.Source.Segments) == 0 || m.Source.Segments[0].Last != "k06000.jsonl" || len(m.Source.SizeSegments) == 0 || m.Source.SizeSegments[0].Last == "" {
		t.Fatalf("segments %+v, size segments %+v: want key ranges", m.Source.Segments, m.Source.SizeSegments)
	}
	gets.take("")
	for i := 1; i <= 3; i++ {
		now = t0.Add(time.Duration(i) * time.Minute)
		putN(t, e, fmt.Sprintf("k%05d.jsonl", 6000+i), 1000+i)
		want = append(want, 1000+i)
		if res := run(t, p, opts); res.Files != 1 {
			t.Fatalf("ordered run %d read %d files, want 1", i, res.Files)
		}
		if got := gets.take("/source/"); len(got) != 0 {
			t.Fatalf("ordered run %d read log segments %q; want none (all end before the frontier, the output log is not needed)", i, got)
		}
	}
	putN(t, e, "k00015.jsonl", 2000) // late: sorts before the frontier
	want = append(want, 2000)
	now = t0.Add(2 * time.Hour)
	if res := run(t, p, opts); res.Files != 1 {
		t.Fatalf("full listing read %d files, want the late one", res.Files)
	}
	if got := gets.take("/source/seen-"); len(got) < len(headChain(t, p, 2)[1].Source.Segments) {
		t.Fatalf("the full listing read %d seen segments, want all", len(got))
	}
	now = t0.Add(5 * time.Hour)
	if res := run(t, p, engine.Options{Now: opts.Now, FullList: true}); res.Files != 0 {
		t.Fatalf("a second full listing read %d files again", res.Files)
	}
	if c := headOf(t, p).Source.Count; c != int64(len(want)) {
		t.Fatalf("the processed-file set counts %d, want %d", c, len(want))
	}
	wantEachOnce(t, p, want...)
}

// TestLexicalTriggerFullTick: a --trigger run that started after the
// frontier holds only part of the processed-file set; when a later tick's
// listing is due in full it reads the rest first, so the full listing
// reads the late key alone, not every processed file again.
func TestLexicalTriggerFullTick(t *testing.T) {
	e := fileEnv(t)
	p := lexPipeline(t, e, "", 1)
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	var want []int
	for i := range 600 { // past the 512 kept inline: ranged segments
		putN(t, e, fmt.Sprintf("k%05d.jsonl", 10*i+10), i)
		want = append(want, i)
	}
	run(t, p, engine.Options{Now: now})
	clock.Store(t0.Add(time.Minute).UnixNano())
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := engine.Run(context.Background(), p, engine.Options{Now: now, Trigger: 20 * time.Millisecond, Stop: stop})
		done <- err
	}()
	waitFor := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if rep, err := engine.Plan(context.Background(), p, engine.Options{Now: now}); err == nil && rep.Status.Counters != nil && rep.Status.Counters.FilesIn == n {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("the trigger run did not commit %d files in time", n)
	}
	putN(t, e, "k99999.jsonl", 1000) // after the frontier: an ordered tick
	want = append(want, 1000)
	waitFor(601)
	putN(t, e, "k00015.jsonl", 1001) // late
	want = append(want, 1001)
	clock.Store(t0.Add(2 * time.Hour).UnixNano()) // the next tick lists in full
	waitFor(602)
	time.Sleep(100 * time.Millisecond) // a few more ticks
	close(stop)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("trigger run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the trigger run did not stop")
	}
	wantEachOnce(t, p, want...)
}
