package iceberg

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

func TestMain(m *testing.M) { s3test.Main(m) }

// testSchema is the schema of the test data files: what a floe window sink
// writes (timestamps are timestamp[us, UTC]).
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "window_start", Type: formats.TimestampType, Nullable: true},
	{Name: "user_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "clicks", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// day0 is the first day of the test data.
var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// row is one test row, comparable as a string.
type row struct {
	ts     time.Time
	user   string
	clicks int64
}

func (r row) String() string {
	return fmt.Sprintf("%s|%s|%d", r.ts.UTC().Format(time.RFC3339Nano), r.user, r.clicks)
}

// epochRows are the rows of epoch e, file i: all in one day (the table may
// be partitioned by day(window_start)). Epochs walk over the days, 6 per day.
func epochRows(e int64, i, n int) []row {
	day := day0.AddDate(0, 0, int(e/6))
	var out []row
	for j := range n {
		out = append(out, row{
			ts:     day.Add(time.Duration(e%6)*time.Hour + time.Duration(i*n+j)*time.Minute),
			user:   fmt.Sprintf("u%d", (int(e)+j)%5),
			clicks: e*1000 + int64(i*n+j),
		})
	}
	return out
}

func encodeRows(t testing.TB, rows []row) []byte {
	t.Helper()
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, testSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts.UnixMicro()))
		b.Field(1).(*array.StringBuilder).Append(r.user)
		b.Field(2).(*array.Int64Builder).Append(r.clicks)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	data, err := formats.EncodeParquet(testSchema, []arrow.RecordBatch{rec}, formats.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeEpoch writes nfiles data files of epoch e (rowsPer rows each) into
// st under data/, as the engine would, and returns them with their rows.
func writeEpoch(t testing.TB, st store.Store, e int64, nfiles, rowsPer int) ([]DataFile, []row) {
	t.Helper()
	var files []DataFile
	var all []row
	for i := range nfiles {
		rows := epochRows(e, i, rowsPer)
		data := encodeRows(t, rows)
		p := fmt.Sprintf("data/part-e%010d-s%04d.parquet", e, i)
		if _, err := st.Put(context.Background(), p, data, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		files = append(files, DataFile{Path: p, Size: int64(len(data)), Rows: int64(len(rows))})
		all = append(all, rows...)
	}
	return files, all
}

func rowStrings(rows []row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.String()
	}
	slices.Sort(out)
	return out
}

// scanRows reads the table at metadata location metaLoc through fsys with
// iceberg-go's catalog-less reader and returns its rows, sorted.
func scanRows(t testing.TB, fsys icebergio.IO, metaLoc string) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"reader", "t"}, metaLoc,
		func(context.Context) (icebergio.IO, error) { return fsys, nil }, nil)
	if err != nil {
		t.Fatalf("reader: load %s: %v", metaLoc, err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("reader: scan %s: %v", metaLoc, err)
	}
	defer at.Release()
	var out []string
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		sc := rec.Schema()
		col := func(name string) arrow.Array {
			idx := sc.FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("reader: column %q missing in %s", name, sc)
			}
			return rec.Column(idx[0])
		}
		ts := col("window_start").(*array.Timestamp)
		if unit := ts.DataType().(*arrow.TimestampType); unit.Unit != arrow.Microsecond {
			t.Fatalf("reader: window_start is %s", unit)
		}
		users := col("user_id").(*array.String)
		clicks := col("clicks").(*array.Int64)
		for i := range int(rec.NumRows()) {
			out = append(out, row{ts: time.UnixMicro(int64(ts.Value(i))), user: users.Value(i), clicks: clicks.Value(i)}.String())
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// localHead returns the metadata location of the highest
// metadata/vN.metadata.json in a local table directory, found without any
// of this package's code.
func localHead(t testing.TB, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "metadata"))
	if err != nil {
		t.Fatal(err)
	}
	best := int64(0)
	for _, e := range ents {
		if n, ok := parseVersion("metadata/" + e.Name()); ok && n > best {
			best = n
		}
	}
	if best == 0 {
		t.Fatalf("no metadata version in %s", dir)
	}
	return "file://" + filepath.Join(dir, "metadata", fmt.Sprintf("v%d.metadata.json", best))
}

// fileTable is a table on file:// in a temp dir.
type fileTable struct {
	dir string
	loc string
	st  store.Store
}

func newFileTable(t testing.TB) fileTable {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return fileTable{dir: dir, loc: "file://" + dir, st: st}
}

// read reads the file table with iceberg-go's own local file system.
func (f fileTable) read(t testing.TB) []string {
	t.Helper()
	return scanRows(t, icebergio.LocalFS{}, localHead(t, f.dir))
}

// readVia reads the current version through st (for S3).
func readVia(t testing.TB, tbl *Table) []string {
	t.Helper()
	s, err := tbl.load(context.Background())
	if err != nil || s == nil {
		t.Fatalf("load: %v (state %v)", err, s)
	}
	return scanRows(t, newStoreIO(context.Background(), tbl.st, tbl.loc), s.loc)
}

// currentTable loads the table's current version with iceberg-go's own
// catalog-less reader (through the table's store).
func currentTable(t testing.TB, tbl *Table) *table.Table {
	t.Helper()
	ctx := context.Background()
	h, err := tbl.Head(ctx)
	if err != nil || h == nil {
		t.Fatalf("head: %v (head %v)", err, h)
	}
	rt, err := table.NewFromLocation(ctx, table.Identifier{"reader", "t"}, h.MetadataLocation,
		func(ctx context.Context) (icebergio.IO, error) { return tbl.FileIO(ctx), nil }, nil)
	if err != nil {
		t.Fatalf("reader: load %s: %v", h.MetadataLocation, err)
	}
	if got := rt.Metadata().Properties()[PropMetadataVersion]; got != fmt.Sprint(h.Version) {
		t.Fatalf("head version %d, metadata stamped %q", h.Version, got)
	}
	return rt
}

func diffRows(got, want []string) string {
	if slices.Equal(got, want) {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "got %d rows, want %d\n", len(got), len(want))
	g, w := map[string]int{}, map[string]int{}
	for _, s := range got {
		g[s]++
	}
	for _, s := range want {
		w[s]++
	}
	shown := 0
	for s, n := range g {
		if w[s] != n && shown < 10 {
			fmt.Fprintf(&b, "  %s: got %d, want %d\n", s, n, w[s])
			shown++
		}
	}
	for s, n := range w {
		if g[s] == 0 && shown < 10 {
			fmt.Fprintf(&b, "  %s: missing (want %d)\n", s, n)
			shown++
		}
	}
	return b.String()
}

func mustOpen(t testing.TB, st store.Store, loc string, opts Options) *Table {
	t.Helper()
	if opts.Schema == nil {
		opts.Schema = testSchema
	}
	tbl, err := Open(context.Background(), st, loc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}
