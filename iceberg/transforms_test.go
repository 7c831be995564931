package iceberg

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/store"
)

// TestPublishPartitionTransforms publishes tables partitioned by
// identity(user_id), hour, month and year of window_start, each data file
// holding one partition's rows, and reads them back with iceberg-go's
// reader: every row, the spec's field and transform, each file's partition
// value as Iceberg computes it, and a filter on the partition source that
// prunes files. A file spanning two partitions is refused.
func TestPublishPartitionTransforms(t *testing.T) {
	base := time.Date(2026, 12, 31, 22, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		partitionBy, field string
		transform          iceberg.Transform
		// group says which partition a row is in; rows of one group go in
		// one file.
		group func(r row) string
	}{
		{"identity(user_id)", "user_id", iceberg.IdentityTransform{}, func(r row) string { return r.user }},
		{"hour(window_start)", "window_start_hour", iceberg.HourTransform{}, func(r row) string { return r.ts.Format("2006-01-02T15") }},
		{"month(window_start)", "window_start_month", iceberg.MonthTransform{}, func(r row) string { return r.ts.Format("2006-01") }},
		{"year(window_start)", "window_start_year", iceberg.YearTransform{}, func(r row) string { return r.ts.Format("2006") }},
	} {
		t.Run(tc.partitionBy, func(t *testing.T) {
			ctx := context.Background()
			ft := newFileTable(t)
			tbl := mustOpen(t, ft.st, ft.loc, Options{PartitionBy: tc.partitionBy})
			// Rows over three hours across a year's end, four users.
			var all []row
			groups := map[string][]row{}
			var order []string
			for i := range 48 {
				r := row{ts: base.Add(time.Duration(i) * 5 * time.Minute), user: fmt.Sprintf("u/%d=x", i%4), clicks: int64(i)}
				all = append(all, r)
				g := tc.group(r)
				if groups[g] == nil {
					order = append(order, g)
				}
				groups[g] = append(groups[g], r)
			}
			if len(groups) < 2 {
				t.Fatalf("test data in %d partitions", len(groups))
			}
			var files []DataFile
			for i, g := range order {
				files = append(files, putFile(t, ft.st, fmt.Sprintf("data/p%d/part-%d.parquet", i, i), groups[g]))
			}
			if err := tbl.Publish(ctx, "p1", 1, nil, files); err != nil {
				t.Fatalf("publish: %v", err)
			}
			if d := diffRows(ft.read(t), rowStrings(all)); d != "" {
				t.Fatal(d)
			}
			cur := currentTable(t, tbl)
			spec := cur.Metadata().PartitionSpec()
			var fields []iceberg.PartitionField
			for _, f := range spec.Fields() {
				fields = append(fields, f)
			}
			if len(fields) != 1 || fields[0].Name != tc.field || fields[0].Transform != tc.transform {
				t.Fatalf("partition spec %v, want one field %s with transform %s", spec, tc.field, tc.transform)
			}
			tasks, err := cur.Scan().PlanFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			src, _ := cur.Schema().FindFieldByName(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(tc.field, "_hour"), "_month"), "_year"), "_identity"))
			for _, task := range tasks {
				p := task.File.Partition()
				i := indexOfPath(task.File.FilePath(), order)
				first := groups[order[i]][0]
				var lit iceberg.Literal = iceberg.NewLiteral(iceberg.Timestamp(first.ts.UnixMicro()))
				if tc.field == "user_id" {
					lit = iceberg.NewLiteral(first.user)
				}
				want := tc.transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: lit})
				if got, ok := p[fields[0].FieldID]; !ok || !want.Valid || fmt.Sprint(got) != fmt.Sprint(want.Val.Any()) {
					t.Errorf("file %s: partition %v, want %s=%v (%s)", task.File.FilePath(), p, tc.field, want.Val.Any(), src.Name)
				}
			}
			// A filter on the source column prunes by partition.
			var filter iceberg.BooleanExpression = iceberg.GreaterThanEqual(iceberg.Reference("window_start"), iceberg.Timestamp(base.Add(150*time.Minute).UnixMicro()))
			if tc.field == "user_id" {
				filter = iceberg.EqualTo(iceberg.Reference("user_id"), "u/1=x")
			}
			pruned, err := cur.Scan(table.WithRowFilter(filter)).PlanFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(pruned) >= len(tasks) || len(pruned) == 0 {
				t.Errorf("filter planned %d of %d files", len(pruned), len(tasks))
			}

			// Rows of two partitions in one file are refused.
			two := append(append([]row{}, groups[order[0]]...), groups[order[1]][0])
			if err := tbl.Publish(ctx, "p1", 2, nil, []DataFile{putFile(t, ft.st, "data/mixed.parquet", two)}); err == nil || !strings.Contains(err.Error(), "more than one partition") {
				t.Errorf("a file of two partitions: %v", err)
			}
		})
	}
	ft := newFileTable(t)
	if err := mustOpen(t, ft.st, ft.loc, Options{PartitionBy: "hour(user_id)"}).Publish(context.Background(), "p", 1, nil, nil); err == nil || !strings.Contains(err.Error(), "want a timestamp") {
		t.Errorf("hour(string column): %v", err)
	}
}

func putFile(t *testing.T, st store.Store, p string, rows []row) DataFile {
	t.Helper()
	data := encodeRows(t, rows)
	if _, err := st.Put(context.Background(), p, data, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return DataFile{Path: p, Size: int64(len(data)), Rows: int64(len(rows))}
}

func indexOfPath(p string, order []string) int {
	for i := range order {
		if strings.Contains(p, fmt.Sprintf("/data/p%d/", i)) {
			return i
		}
	}
	return 0
}
