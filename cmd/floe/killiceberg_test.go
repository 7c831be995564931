package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/iceberg"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

func writeIcebergSpec(t *testing.T, dir, name, source, state, sink string) string {
	t.Helper()
	y := fmt.Sprintf(`name: %s
source: {type: files, url: %q, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2,
         watermark: {max_out_of_orderness: 5s, idle_timeout: 1m}}
operators:
  - filter: "bytes > 0"
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 30s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: iceberg, url: %q}
state: {url: %q, parallelism: 2, max_parallelism: 128, retain_epochs: 3}
`, name, source, sink, state)
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// scanTable reads a table with iceberg-go's catalog-less reader and returns
// its rows (sorted) and each snapshot's floe.epoch.
func scanTable(t *testing.T, tbl *table.Table) ([]string, []string) {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	var rows []string
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			var parts []string
			for c, col := range rec.Columns() {
				v := col.ValueStr(i)
				if ts, ok := col.(*array.Timestamp); ok && ts.IsValid(i) {
					v = time.UnixMicro(int64(ts.Value(i))).UTC().Format(time.RFC3339)
				}
				parts = append(parts, rec.ColumnName(c)+"="+v)
			}
			rows = append(rows, strings.Join(parts, ","))
		}
	}
	sort.Strings(rows)
	var epochs []string
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary != nil {
			epochs = append(epochs, s.Summary.Properties["floe.epoch"])
		}
	}
	return rows, epochs
}

// localTable opens the newest metadata version of a table in a local
// directory with iceberg-go's own file IO (none of floe's code).
func localTable(t *testing.T, dir string) *table.Table {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "metadata"))
	if err != nil {
		t.Fatal(err)
	}
	best := ""
	bestN := 0
	for _, e := range ents {
		var n int
		if _, err := fmt.Sscanf(e.Name(), "v%d.metadata.json", &n); err == nil && n > bestN {
			best, bestN = e.Name(), n
		}
	}
	tbl, err := table.NewFromLocation(context.Background(), table.Identifier{"t"}, "file://"+filepath.Join(dir, "metadata", best),
		func(context.Context) (icebergio.IO, error) { return icebergio.LocalFS{}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// s3Table opens a table on S3 through floe's store (the test S3 server
// needs its endpoint, which iceberg-go's own S3 IO does not take here).
func s3Table(t *testing.T, u string) *table.Table {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	x, _ := url.Parse(u)
	x.RawQuery = ""
	tb, err := iceberg.Open(ctx, st, x.String(), iceberg.Options{Schema: arrow.NewSchema(nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := tb.Head(ctx)
	if err != nil || h == nil {
		t.Fatalf("table head: %v (head %v)", err, h)
	}
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"reader", "t"}, h.MetadataLocation,
		func(ctx context.Context) (icebergio.IO, error) { return tb.FileIO(ctx), nil }, nil)
	if err != nil {
		t.Fatalf("read table %s: %v", h.MetadataLocation, err)
	}
	return tbl
}

// TestKillIcebergSink SIGKILLs `floe run --drain` with an Iceberg sink at
// random moments (including between floe's commit and the table's),
// restarts it, and checks that the table holds exactly the rows of an
// uninterrupted run, none twice, each snapshot naming one epoch.
func TestKillIcebergSink(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	kills := 10
	if testing.Short() {
		kills = 4
	}
	backends := map[string]func(t *testing.T) (src, refState, refSink, state, sink string, read func(*testing.T, string) *table.Table){
		"file": func(t *testing.T) (string, string, string, string, string, func(*testing.T, string) *table.Table) {
			root := t.TempDir()
			fu := func(p string) string { return "file://" + filepath.Join(root, p) }
			return fu("events"), fu("ref/state"), fu("ref/table"), fu("kill/state"), fu("kill/table"),
				func(t *testing.T, u string) *table.Table { return localTable(t, strings.TrimPrefix(u, "file://")) }
		},
		"s3": func(t *testing.T) (string, string, string, string, string, func(*testing.T, string) *table.Table) {
			srv := s3test.Shared(t)
			u, err := url.Parse(srv.NewBucket(t))
			if err != nil {
				t.Fatal(err)
			}
			b := u.Host
			return srv.URL(b, "events"), srv.URL(b, "ref/state"), srv.URL(b, "ref/table"), srv.URL(b, "kill/state"), srv.URL(b, "kill/table"), s3Table
		},
	}
	for _, name := range []string{"file", "s3"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			src, refState, refSink, state, sink, read := backends[name](t)
			putDataset(t, ctx, src)
			dir := t.TempDir()
			refSpec := writeIcebergSpec(t, dir, "ref", src, refState, refSink)
			killSpec := writeIcebergSpec(t, dir, "kill", src, state, sink)
			runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
			want, _ := scanTable(t, read(t, refSink))
			rng := rand.New(rand.NewPCG(seed, 7))
			landed := 0
			// Kill runs at random moments until one finishes on its own
			// (caught up), or enough kills landed.
			for i := 0; landed < kills && i < 10*kills; i++ {
				cmd := floeCommand(t, "run", killSpec, "--drain", "--log-format", "json")
				var errb bytes.Buffer
				cmd.Stderr = &errb
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("run %d: %v\n%s", i, err, tailString(errb.String(), 2000))
					}
					i = 10 * kills // caught up
				case <-time.After(time.Duration(5+rng.IntN(150)) * time.Millisecond):
					_ = cmd.Process.Kill()
					<-done
					landed++
				}
			}
			if landed < 2 {
				t.Fatalf("only %d kills landed before the run caught up: the test exercises too little", landed)
			}
			runFloe(t, "run", killSpec, "--drain", "--log-format", "json")
			got, epochs := scanTable(t, read(t, sink))
			if m, x := multisetDiff(want, got); len(m) > 0 || len(x) > 0 || len(got) == 0 {
				t.Fatalf("after %d kills the table has %d rows, an uninterrupted run %d: %d missing, %d extra", landed, len(got), len(want), len(m), len(x))
			}
			seen := map[string]bool{}
			for _, e := range epochs {
				if e == "" || seen[e] {
					t.Fatalf("snapshot epochs %v: each snapshot must name one epoch, once", epochs)
				}
				seen[e] = true
			}
			t.Logf("%s: %d kills landed; table holds %d rows in %d snapshots", name, landed, len(got), len(epochs))
		})
	}
}
