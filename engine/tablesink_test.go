package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/store"
)

var tableGen = datagen.Options{Rows: 2400, Files: 6, Users: 20, Span: 50 * time.Hour, Seed: 31, OutOfOrder: 10 * time.Second}

// icebergSpec is windowSpec with an Iceberg sink (partitioned by the window
// start's day, the default) and hourly windows over two days.
var icebergSpec = strings.NewReplacer("tumbling: 1m", "tumbling: 1h",
	"sink:  {type: files, url: \"{{sink}}\", format: parquet}", "sink:  {type: iceberg, url: \"{{sink}}\"}").Replace(windowSpec)

// tableRows reads the table at a local directory with iceberg-go's own
// catalog-less reader and local file system (none of floe's code), and
// returns its rows and every snapshot's floe.epoch summary.
func tableRows(t *testing.T, dir string) ([]string, []string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "metadata"))
	must(t, err)
	best := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(e.Name(), "v"), ".metadata.json")); err == nil && n > best {
			best = n
		}
	}
	loc := "file://" + filepath.Join(dir, "metadata", fmt.Sprintf("v%d.metadata.json", best))
	ctx := context.Background()
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"t"}, loc,
		func(context.Context) (icebergio.IO, error) { return icebergio.LocalFS{}, nil }, nil)
	must(t, err)
	at, err := tbl.Scan().ToArrowTable(ctx)
	must(t, err)
	defer at.Release()
	var rows []string
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rows = append(rows, recordRows(tr.RecordBatch())...)
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

// TestIcebergSink: every committed epoch lands in the table exactly once,
// also when the run crashes at any sink call (including between floe's
// commit and the table's); the table, read by iceberg-go alone, holds the
// rows of a files-sink run, and each snapshot names one epoch.
func TestIcebergSink(t *testing.T) {
	ref := fileEnv(t)
	genData(t, ref, tableGen)
	pref := ref.pipeline(t, strings.Replace(windowSpec, "tumbling: 1m", "tumbling: 1h", 1))
	run(t, pref, engine.Options{Drain: true})
	want := committedRows(t, pref)
	sort.Strings(want)

	e := fileEnv(t)
	genData(t, e, tableGen)
	p := e.pipeline(t, icebergSpec)
	run(t, p, engine.Options{Drain: true})
	sinkDir := strings.TrimPrefix(e.sink, "file://")
	got, epochs := tableRows(t, sinkDir)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("table: %d rows, files sink: %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	if days, _ := filepath.Glob(filepath.Join(sinkDir, "data", "day=*")); len(days) < 2 {
		t.Fatalf("data files not partitioned by day: %v", days)
	}
	t.Logf("%d rows, snapshots of epochs %v", len(got), epochs)
	st, err := engine.ReadStatus(context.Background(), p)
	if err != nil || st.Table == nil || st.Table.PublishedEpoch != st.Epoch || st.Table.SnapshotID == 0 {
		t.Fatalf("status of an iceberg sink: %+v %v; want the head epoch published", st.Table, err)
	}

	// Two runs of the pipeline at once: one is fenced (or finds nothing
	// left), the table still holds each epoch once.
	c := fileEnv(t)
	genData(t, c, tableGen)
	pc := c.pipeline(t, icebergSpec)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := engine.Run(context.Background(), pc, engine.Options{})
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, engine.ErrFenced) && !strings.Contains(err.Error(), "another") {
			t.Fatalf("concurrent run: %v", err)
		}
	}
	run(t, pc, engine.Options{Drain: true})
	if got, epochs := tableRows(t, strings.TrimPrefix(c.sink, "file://")); !reflect.DeepEqual(got, want) || !uniqueEpochs(epochs) {
		t.Fatalf("two concurrent runs: %d rows (want %d), snapshot epochs %v", len(got), len(want), epochs)
	}

	for at := 0; ; at++ {
		e := fileEnv(t)
		genData(t, e, tableGen)
		p := e.pipeline(t, icebergSpec)
		_, err := engine.Run(context.Background(), p, engine.Options{Drain: true, Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(n string, s store.Store) store.Store {
				if n != "sink" {
					return s
				}
				return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
			}})
		if err == nil {
			t.Logf("crashed at each of %d sink calls", at)
			break
		}
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("crash at sink call %d: %v", at, err)
		}
		run(t, p, engine.Options{Drain: true})
		got, epochs := tableRows(t, strings.TrimPrefix(e.sink, "file://"))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("crash at sink call %d: table has %d rows, want %d", at, len(got), len(want))
		}
		seen := map[string]bool{}
		for _, ep := range epochs {
			if ep == "" || seen[ep] {
				t.Fatalf("crash at sink call %d: snapshot epochs %v: each snapshot must name one epoch, once", at, epochs)
			}
			seen[ep] = true
		}
	}
}

func uniqueEpochs(epochs []string) bool {
	seen := map[string]bool{}
	for _, e := range epochs {
		if e == "" || seen[e] {
			return false
		}
		seen[e] = true
	}
	return true
}

// TestIcebergSchemaEvolves: an aggregate renamed with renamed_from and a
// new count_distinct on an iceberg sink evolve the table's schema in the
// commit of the first epoch of the new plan (floe plan says how); the
// renamed column keeps the values of epochs published before it, and the
// rows are those of a run that never changed. A change the table cannot
// take (sum turned avg: long to double) is refused by plan and run before
// anything is written.
func TestIcebergSchemaEvolves(t *testing.T) {
	ctx := context.Background()
	ref := fileEnv(t)
	genData(t, ref, tableGen)
	pref := ref.pipeline(t, strings.Replace(windowSpec, "tumbling: 1m", "tumbling: 1h", 1))
	run(t, pref, engine.Options{Drain: true})
	var want []string
	for _, r := range committedRows(t, pref) {
		want = append(want, strings.Replace(r, "clicks=", "events=", 1))
	}
	sort.Strings(want)

	e := fileEnv(t)
	genData(t, e, tableGen)
	p := e.pipeline(t, icebergSpec)
	run(t, p, engine.Options{UntilEpoch: 2})
	renamed := strings.Replace(icebergSpec, `aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}`,
		`aggregates: {events: {expr: "count()", renamed_from: clicks}, total_bytes: "sum(bytes)", pages: "count_distinct(page)"}`, 1)
	if renamed == icebergSpec {
		t.Fatal("spec edit did not apply")
	}
	p2 := e.pipeline(t, renamed)
	rep, err := engine.Plan(ctx, p2, engine.Options{})
	must(t, err)
	if !rep.Compatible || !reflect.DeepEqual(rep.TableChanges, []string{"rename column clicks to events", "add column pages long"}) {
		t.Fatalf("plan: compatible %v (%s), table changes %q", rep.Compatible, rep.Incompatible, rep.TableChanges)
	}
	var buf strings.Builder
	rep.Print(&buf)
	if !strings.Contains(buf.String(), "iceberg table: the schema evolves with the first epoch of this plan:\n  rename column clicks to events\n") {
		t.Fatalf("plan output does not say how the table evolves:\n%s", buf.String())
	}
	run(t, p2, engine.Options{Drain: true})
	got, epochs := tableRows(t, strings.TrimPrefix(e.sink, "file://"))
	if !uniqueEpochs(epochs) {
		t.Fatalf("snapshot epochs %v", epochs)
	}
	var noPages []string
	withPages := 0
	for _, r := range got {
		before, after, ok := strings.Cut(r, ",pages=")
		if !ok {
			t.Fatalf("row without pages: %s", r)
		}
		if after == "(null)" {
			noPages = append(noPages, before)
		} else {
			withPages++
			noPages = append(noPages, before)
		}
	}
	sort.Strings(noPages)
	if !reflect.DeepEqual(noPages, want) {
		t.Fatalf("table rows (without pages) differ from an unchanged run:\n%s", diffLines(strings.Join(want, "\n"), strings.Join(noPages, "\n")))
	}
	if withPages == 0 || withPages == len(got) {
		t.Fatalf("%d of %d rows have pages: want the new plan's rows only", withPages, len(got))
	}

	// sum -> avg migrates the state but would turn a long column double.
	avg := strings.Replace(renamed, `total_bytes: "sum(bytes)"`, `total_bytes: "avg(bytes)"`, 1)
	p3 := e.pipeline(t, avg)
	e.put(t, "events-99999.jsonl", []byte(`{"event_time":"2024-01-05T00:00:00Z","user_id":"u1","page":"/a","bytes":10}`+"\n"))
	rep, err = engine.Plan(ctx, p3, engine.Options{})
	must(t, err)
	if rep.Compatible || !strings.Contains(rep.Incompatible, `column "total_bytes" is long in the table and double in the output`) {
		t.Fatalf("plan of sum -> avg on an iceberg sink: compatible %v, %q", rep.Compatible, rep.Incompatible)
	}
	stateDir := strings.TrimPrefix(e.state, "file://")
	before := treeOf(t, stateDir) + treeOf(t, strings.TrimPrefix(e.sink, "file://"))
	if _, err := engine.Run(ctx, p3, engine.Options{Drain: true}); err == nil || !strings.Contains(err.Error(), "refused before anything was written") {
		t.Fatalf("run of sum -> avg: %v, want a refusal", err)
	}
	if after := treeOf(t, stateDir) + treeOf(t, strings.TrimPrefix(e.sink, "file://")); after != before {
		t.Fatalf("a refused run wrote files:\n%s", diffLines(before, after))
	}
}

// TestIcebergSinkPartitionTransforms: an iceberg sink partitioned by
// identity(user_id), hour, month or year of the window start writes each
// partition's rows into a data file of their own, under data/<partition>/,
// and the table, read by iceberg-go alone, holds the rows of a files-sink
// run.
func TestIcebergSinkPartitionTransforms(t *testing.T) {
	ref := fileEnv(t)
	genData(t, ref, tableGen)
	pref := ref.pipeline(t, strings.Replace(windowSpec, "tumbling: 1m", "tumbling: 1h", 1))
	run(t, pref, engine.Options{Drain: true})
	want := committedRows(t, pref)
	sort.Strings(want)
	for _, tc := range []struct{ partitionBy, dirs string }{
		{"identity(user_id)", "user_id=*"},
		{"hour(window_start)", "hour=*"},
		{"month(window_start)", "month=*"},
		{"year(window_start)", "year=*"},
	} {
		t.Run(strings.TrimSuffix(tc.dirs, "=*"), func(t *testing.T) {
			e := fileEnv(t)
			genData(t, e, tableGen)
			p := e.pipeline(t, strings.Replace(icebergSpec, `{type: iceberg, url: "{{sink}}"}`, `{type: iceberg, url: "{{sink}}", partition_by: "`+tc.partitionBy+`"}`, 1))
			run(t, p, engine.Options{Drain: true})
			sinkDir := strings.TrimPrefix(e.sink, "file://")
			got, epochs := tableRows(t, sinkDir)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("table: %d rows, files sink: %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
			}
			if !uniqueEpochs(epochs) {
				t.Errorf("snapshot epochs %v", epochs)
			}
			dirs, _ := filepath.Glob(filepath.Join(sinkDir, "data", tc.dirs))
			if len(dirs) == 0 {
				t.Fatalf("no data/%s directories", tc.dirs)
			}
			if tc.partitionBy != "month(window_start)" && tc.partitionBy != "year(window_start)" && len(dirs) < 2 {
				t.Errorf("data files in %d partitions: %v", len(dirs), dirs)
			}
		})
	}
}
