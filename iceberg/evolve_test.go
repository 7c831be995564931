package iceberg

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/store"
)

// putColumns writes one data file of the given int64 columns (nil entries
// are nulls) beside a user_id column and returns it as a DataFile.
func putColumns(t *testing.T, st store.Store, name string, users []string, cols map[string][]any, order []string) DataFile {
	t.Helper()
	fields := []arrow.Field{{Name: "user_id", Type: arrow.BinaryTypes.String, Nullable: true}}
	for _, c := range order {
		typ := arrow.DataType(arrow.PrimitiveTypes.Int64)
		if _, ok := cols[c][0].(float64); ok {
			typ = arrow.PrimitiveTypes.Float64
		}
		if _, ok := cols[c][0].(int32); ok {
			typ = arrow.PrimitiveTypes.Int32
		}
		fields = append(fields, arrow.Field{Name: c, Type: typ, Nullable: true})
	}
	sc := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, u := range users {
		b.Field(0).(*array.StringBuilder).Append(u)
		for j, c := range order {
			switch v := cols[c][i].(type) {
			case int64:
				b.Field(j + 1).(*array.Int64Builder).Append(v)
			case int32:
				b.Field(j + 1).(*array.Int32Builder).Append(v)
			case float64:
				b.Field(j + 1).(*array.Float64Builder).Append(v)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	data, err := formats.EncodeParquet(sc, []arrow.RecordBatch{rec}, formats.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), name, data, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return DataFile{Path: name, Size: int64(len(data)), Rows: int64(len(users))}
}

// intSchema is user_id and the given int64 columns.
func intSchema(cols ...string) *arrow.Schema {
	fields := []arrow.Field{{Name: "user_id", Type: arrow.BinaryTypes.String, Nullable: true}}
	for _, c := range cols {
		fields = append(fields, arrow.Field{Name: c, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

// scanColumns reads the current table with iceberg-go's reader and returns
// its rows as "user|col=v|..." over the current schema's columns, sorted,
// and the current schema's column names.
func scanColumns(t *testing.T, f fileTable) ([]string, []string) {
	t.Helper()
	ctx := context.Background()
	tbl, err := table.NewFromLocation(ctx, table.Identifier{"reader", "t"}, localHead(t, f.dir),
		func(context.Context) (io.IO, error) { return io.LocalFS{}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fl := range tbl.Schema().Fields() {
		names = append(names, fl.Name)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer at.Release()
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	var out []string
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := range int(rec.NumRows()) {
			var parts []string
			for c := range int(rec.NumCols()) {
				parts = append(parts, rec.Schema().Field(c).Name+"="+rec.Column(c).ValueStr(i))
			}
			out = append(out, strings.Join(parts, "|"))
		}
	}
	slices.Sort(out)
	return out, names
}

// TestPublishEvolvesSchema adds, renames, widens and drops columns over
// three epochs; iceberg-go's reader sees every epoch's rows under the
// current schema: renamed values kept, added columns null in older files.
func TestPublishEvolvesSchema(t *testing.T) {
	ctx := context.Background()
	f := newFileTable(t)
	renames := map[string]string{"page_views": "views"}
	sc1 := arrow.NewSchema([]arrow.Field{
		{Name: "user_id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "views", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "small", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "gone", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	tbl := mustOpen(t, f.st, f.loc, Options{Schema: sc1, Renames: renames})

	e1 := putColumns(t, f.st, "data/e1.parquet", []string{"a", "b"},
		map[string][]any{"views": {int64(1), int64(2)}, "small": {int32(7), int32(8)}, "gone": {int64(9), int64(9)}}, []string{"views", "small", "gone"})
	if err := tbl.Publish(ctx, "p", 1, nil, []DataFile{e1}); err != nil {
		t.Fatal(err)
	}
	// Epoch 2: views renamed to page_views, small widened to int64, gone
	// dropped, uniq added.
	e2 := putColumns(t, f.st, "data/e2.parquet", []string{"c"},
		map[string][]any{"page_views": {int64(3)}, "small": {int64(1 << 40)}, "uniq": {int64(5)}}, []string{"page_views", "small", "uniq"})
	changes, err := tbl.CheckSchema(ctx, arrow.NewSchema([]arrow.Field{
		{Name: "user_id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "page_views", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "small", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "uniq", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"rename column views to page_views", "widen column small from int to long", "add column uniq long", "drop column gone"}
	if !slices.Equal(changes, want) {
		t.Fatalf("CheckSchema changes = %q, want %q", changes, want)
	}
	if err := tbl.Publish(ctx, "p", 2, nil, []DataFile{e2}); err != nil {
		t.Fatal(err)
	}
	rows, names := scanColumns(t, f)
	if got, want := fmt.Sprint(names), "[user_id page_views small uniq]"; got != want {
		t.Fatalf("schema columns %s, want %s", got, want)
	}
	wantRows := []string{
		"user_id=a|page_views=1|small=7|uniq=(null)",
		"user_id=b|page_views=2|small=8|uniq=(null)",
		"user_id=c|page_views=3|small=1099511627776|uniq=5",
	}
	if !slices.Equal(rows, wantRows) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
	}
	// Epoch 3 has the same columns: no new schema.
	e3 := putColumns(t, f.st, "data/e3.parquet", []string{"d"},
		map[string][]any{"page_views": {int64(4)}, "small": {int64(2)}, "uniq": {int64(6)}}, []string{"page_views", "small", "uniq"})
	if err := tbl.Publish(ctx, "p", 3, nil, []DataFile{e3}); err != nil {
		t.Fatal(err)
	}
	s, err := tbl.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.meta.schema.ID != 1 || s.meta.maxSchemaID != 1 || s.meta.lastColumnID != 5 {
		t.Fatalf("after epoch 3: current schema %d, max %d, last-column-id %d; want 1, 1, 5", s.meta.schema.ID, s.meta.maxSchemaID, s.meta.lastColumnID)
	}
	if rows, _ := scanColumns(t, f); len(rows) != 4 {
		t.Fatalf("after epoch 3: %d rows, want 4", len(rows))
	}
}

// TestPublishRefusesIncompatibleSchema: a change Iceberg cannot make is
// refused by CheckSchema and by Publish, and the table is unchanged.
func TestPublishRefusesIncompatibleSchema(t *testing.T) {
	ctx := context.Background()
	f := newFileTable(t)
	tbl := mustOpen(t, f.st, f.loc, Options{Schema: intSchema("views"), Renames: map[string]string{"hits": "views"}})
	e1 := putColumns(t, f.st, "data/e1.parquet", []string{"a"}, map[string][]any{"views": {int64(1)}}, []string{"views"})
	if err := tbl.Publish(ctx, "p", 1, nil, []DataFile{e1}); err != nil {
		t.Fatal(err)
	}
	h1, err := tbl.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cols map[string][]any
		want string
	}{
		{"long to double", map[string][]any{"views": {1.5}}, `column "views" is long in the table and double in the output`},
		{"rename to a double", map[string][]any{"hits": {1.5}}, `column "hits" is long in the table and double in the output`},
	}
	for i, tc := range cases {
		order := []string{}
		for k := range tc.cols {
			order = append(order, k)
		}
		df := putColumns(t, f.st, fmt.Sprintf("data/bad%d.parquet", i), []string{"x"}, tc.cols, order)
		if _, err := tbl.CheckDataFile(ctx, df.Path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: CheckDataFile error %v, want %q", tc.name, err, tc.want)
		}
		err := tbl.Publish(ctx, "p", 2, nil, []DataFile{df})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: Publish error %v, want %q", tc.name, err, tc.want)
		}
	}
	h2, err := tbl.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Version != h1.Version {
		t.Fatalf("table version %d after refused publishes, was %d", h2.Version, h1.Version)
	}
}

// TestPublishRefusesNameTakenByMapping: after views is renamed to
// page_views, older files still hold a column named views that the name
// mapping gives to page_views; a new column named views is refused.
func TestPublishRefusesNameTakenByMapping(t *testing.T) {
	ctx := context.Background()
	f := newFileTable(t)
	tbl := mustOpen(t, f.st, f.loc, Options{Schema: intSchema("views"), Renames: map[string]string{"page_views": "views"}})
	for e, df := range []DataFile{
		putColumns(t, f.st, "data/e1.parquet", []string{"a"}, map[string][]any{"views": {int64(1)}}, []string{"views"}),
		putColumns(t, f.st, "data/e2.parquet", []string{"b"}, map[string][]any{"page_views": {int64(2)}}, []string{"page_views"}),
	} {
		if err := tbl.Publish(ctx, "p", int64(e+1), nil, []DataFile{df}); err != nil {
			t.Fatal(err)
		}
	}
	df := putColumns(t, f.st, "data/e3.parquet", []string{"c"},
		map[string][]any{"page_views": {int64(3)}, "views": {int64(4)}}, []string{"page_views", "views"})
	err := tbl.Publish(ctx, "p", 3, nil, []DataFile{df})
	if err == nil || !strings.Contains(err.Error(), `column "views": the table's name mapping gives that name to field 2 (page_views, views)`) {
		t.Fatalf("Publish error %v", err)
	}
	rows, _ := scanColumns(t, f)
	if want := []string{"user_id=a|page_views=1", "user_id=b|page_views=2"}; !slices.Equal(rows, want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
}
