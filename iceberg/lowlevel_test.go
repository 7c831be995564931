package iceberg

import (
	"context"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"math"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/store"
)

// TestNoTablePackage: the package's code (current.go aside, which goes once
// its callers use Head) links neither iceberg-go's table package nor
// substrait: importing them costs every floe process ~90 ms and ~32 MB in
// package init.
func TestNoTablePackage(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "current.go" {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pf.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			imports[p] = true
		}
	}
	if !imports["github.com/apache/iceberg-go"] {
		t.Fatalf("found no import of iceberg-go's root package in %v: is the test looking at the right files?", files)
	}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, slices.Sorted(func(yield func(string) bool) {
		for p := range imports {
			if !yield(p) {
				return
			}
		}
	})...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if d == "github.com/apache/iceberg-go/table" || strings.HasPrefix(d, "github.com/apache/iceberg-go/table/") || strings.Contains(d, "substrait") {
			t.Errorf("package iceberg links %s", d)
		}
	}
}

// richSchema has a column of every type floe bounds, nullable.
var richSchema = arrow.NewSchema([]arrow.Field{
	{Name: "ts", Type: formats.TimestampType, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "allnull", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// richFile is a Parquet file of n rows of one day in row groups of rg rows:
// long and multi-byte strings, nulls (in ts too if nullTS), negative numbers.
func richFile(t testing.TB, n int, rg int64, nullTS bool) []byte {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, richSchema)
	defer b.Release()
	for i := range n {
		if nullTS && i%7 == 3 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(day0.Add(time.Duration(i) * time.Minute).UnixMicro()))
		}
		if i%7 == 3 {
			for c := 1; c < 9; c++ {
				b.Field(c).AppendNull()
			}
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%sé-user-%05d-with-a-long-name", strings.Repeat("ü", i%3), n-i))
			b.Field(2).(*array.BinaryBuilder).Append([]byte(fmt.Sprintf("\xff\xff%040d", i)))
			b.Field(3).(*array.Int64Builder).Append(int64(i*i) - 50)
			b.Field(4).(*array.Int32Builder).Append(int32(100 - i))
			b.Field(5).(*array.Float64Builder).Append(float64(i) / 3)
			b.Field(6).(*array.Float32Builder).Append(-float32(i) / 7)
			b.Field(7).(*array.BooleanBuilder).Append(i%2 == 0)
			b.Field(8).(*array.Date32Builder).Append(arrow.Date32(20000 + i))
		}
		b.Field(9).AppendNull()
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	data, err := formats.EncodeParquet(richSchema, []arrow.RecordBatch{rec}, formats.EncodeOptions{RowGroupRows: rg})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDataFileMatchesIcebergGo: the manifest record floe builds from a
// footer has the same counts, sizes, bounds, split offsets and partition as
// the one iceberg-go's table.FileToDataFile builds, which floe used before.
func TestDataFileMatchesIcebergGo(t *testing.T) {
	ctx := context.Background()
	ft := newFileTable(t)
	sc, err := icebergSchema(richSchema)
	if err != nil {
		t.Fatal(err)
	}
	daySpec, err := iceberg.NewPartitionSpecOpts(iceberg.AddPartitionFieldByName("ts", "ts_day", iceberg.DayTransform{}, sc, nil))
	if err != nil {
		t.Fatal(err)
	}
	props := iceberg.Properties{}
	for _, tc := range []struct {
		name string
		n    int
		rg   int64
		spec iceberg.PartitionSpec
	}{
		{"one row group", 40, 0, *iceberg.UnpartitionedSpec},
		{"row groups", 100, 16, *iceberg.UnpartitionedSpec},
		{"day partitioned", 60, 25, daySpec},
		{"one row", 1, 0, daySpec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := richFile(t, tc.n, tc.rg, tc.spec.IsUnpartitioned())
			key := "data/" + strings.ReplaceAll(tc.name, " ", "-") + ".parquet"
			if _, err := ft.st.Put(ctx, key, data, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			loc := ft.loc + "/" + key
			got, err := dataFileFromParquet(data, loc, sc, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			want, err := table.FileToDataFile(ctx, newStoreIO(ctx, ft.st, ft.loc), loc, sc, tc.spec, 0, props)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, g, w any) {
				t.Helper()
				if !reflect.DeepEqual(g, w) {
					t.Errorf("%s:\n got  %v\n want %v", what, g, w)
				}
			}
			check("path", got.FilePath(), want.FilePath())
			check("count", got.Count(), want.Count())
			check("size", got.FileSizeBytes(), want.FileSizeBytes())
			check("column sizes", got.ColumnSizes(), want.ColumnSizes())
			check("value counts", got.ValueCounts(), want.ValueCounts())
			check("null counts", got.NullValueCounts(), want.NullValueCounts())
			check("lower bounds", got.LowerBoundValues(), want.LowerBoundValues())
			check("upper bounds", got.UpperBoundValues(), want.UpperBoundValues())
			check("split offsets", got.SplitOffsets(), want.SplitOffsets())
			if len(got.Partition())+len(want.Partition()) > 0 {
				check("partition", got.Partition(), want.Partition())
			}
			if len(got.LowerBoundValues()) < 9 {
				t.Errorf("only %d columns bounded", len(got.LowerBoundValues()))
			}
			if !tc.spec.IsUnpartitioned() && len(got.Partition()) != 1 {
				t.Errorf("partition %v", got.Partition())
			}
		})
	}
	// A day-partitioned file must hold one day, and no null ones among them.
	for name, data := range map[string][]byte{"null day": richFile(t, 20, 0, true), "two days": richFile(t, 2000, 0, false)} {
		if _, err := dataFileFromParquet(data, ft.loc+"/data/x.parquet", sc, daySpec); err == nil {
			t.Errorf("%s: accepted into a day-partitioned table", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestTruncatedBounds(t *testing.T) {
	long := strings.Repeat("a", 15) + "bc"
	if got := truncLower(iceberg.NewLiteral(long)); got.String() != strings.Repeat("a", 15)+"b" {
		t.Errorf("lower %q", got)
	}
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"short", "short", true},
		{strings.Repeat("a", 15) + "bc", strings.Repeat("a", 15) + "c", true},
		{strings.Repeat("a", 15) + "\U0010FFFF" + "x", strings.Repeat("a", 14) + "b", true},
		{strings.Repeat("\U0010FFFF", 17), "", false},
		{strings.Repeat("a", 15) + "\uD7FF" + "x", strings.Repeat("a", 15) + "\uE000", true},
	} {
		got, ok := truncUpper(iceberg.NewLiteral(tc.in))
		if ok != tc.ok || (ok && got.String() != tc.want) {
			t.Errorf("upper(%q) = %v, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if ok && got.String() < tc.in[:min(len(tc.in), len(got.String()))] {
			t.Errorf("upper(%q) = %q sorts before the value", tc.in, got)
		}
	}
	b := append(make([]byte, 15), 0xff, 0xff, 1)
	got, ok := truncUpper(iceberg.NewLiteral(b))
	if want := append(make([]byte, 14), 1); !ok || !reflect.DeepEqual([]byte(got.(iceberg.BinaryLiteral)), want) {
		t.Errorf("binary upper = %v, %v; want %v", got, ok, want)
	}
}

type fakeManifest struct {
	iceberg.ManifestFile
	name string
	n    int64
}

func (f fakeManifest) Length() int64 { return f.n }

func TestPackEnd(t *testing.T) {
	mk := func(sizes ...int64) []iceberg.ManifestFile {
		var out []iceberg.ManifestFile
		for i, s := range sizes {
			out = append(out, fakeManifest{name: fmt.Sprint(i), n: s})
		}
		return out
	}
	show := func(bins [][]iceberg.ManifestFile) string {
		var parts []string
		for _, b := range bins {
			var names []string
			for _, m := range b {
				names = append(names, m.(fakeManifest).name)
			}
			parts = append(parts, strings.Join(names, ","))
		}
		return strings.Join(parts, "|")
	}
	for _, tc := range []struct {
		sizes []int64
		want  string
	}{
		{[]int64{1, 1, 1}, "0,1,2"},
		{[]int64{1, 4, 4, 4}, "0,1|2,3"}, // bins fill from the oldest end
		{[]int64{1, 9, 1}, "0|1|2"},      // an oversized manifest gets its own bin
		{[]int64{3, 3, 3, 3, 3}, "0|1,2|3,4"},
	} {
		if got := show(packEnd(mk(tc.sizes...), 8)); got != tc.want {
			t.Errorf("packEnd(%v) = %s, want %s", tc.sizes, got, tc.want)
		}
	}
}

func TestExpireSnapshots(t *testing.T) {
	// Snapshots 1..6 on main (6 current), 7 an orphan (a lost branch), 8 the
	// head of a tag on 2.
	ptr := func(v int64) *int64 { return &v }
	m := &tableMeta{currentID: 6, snapshotByID: map[int64]int{}, refs: map[string]map[string]json.RawMessage{}}
	for id := int64(1); id <= 8; id++ {
		s := snapshot{ID: id, TimestampMs: id * 1000}
		if id > 1 && id <= 6 {
			s.Parent = ptr(id - 1)
		}
		if id == 8 {
			s.Parent = ptr(2)
		}
		m.snapshotByID[id] = len(m.snapshots)
		m.snapshots = append(m.snapshots, s)
	}
	m.refs["main"] = map[string]json.RawMessage{"snapshot-id": json.RawMessage("6"), "type": json.RawMessage(`"branch"`)}
	m.refs["t"] = map[string]json.RawMessage{"snapshot-id": json.RawMessage("8"), "type": json.RawMessage(`"tag"`)}
	keys := func(s map[int64]bool) []int64 {
		var out []int64
		for k := range s {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		retain int
		cutoff int64
		want   []int64
	}{
		{2, math.MaxInt64, []int64{1, 3, 4, 7}}, // keep 5,6 (main), 8,2 (tag)
		{2, 4000, []int64{1, 3}},                // 4 and 7 are young enough
		{10, 0, nil},
	} {
		exp, err := expireSnapshots(m, tc.retain, tc.cutoff)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(exp); !slices.Equal(got, tc.want) {
			t.Errorf("retain %d cutoff %d: expire %v, want %v", tc.retain, tc.cutoff, got, tc.want)
		}
	}
}

// TestFilteredScan: iceberg-go's reader prunes floe's data files by the
// partition values and column bounds floe recorded and still returns every
// matching row; the snapshot summary's totals count the table.
func TestFilteredScan(t *testing.T) {
	ctx := context.Background()
	ft := newFileTable(t)
	tbl := mustOpen(t, ft.st, ft.loc, Options{PartitionBy: "day(window_start)", ManifestMergeMinCount: 4})
	var all []row
	files := 0
	for e := int64(1); e <= 14; e++ {
		fs, rows := writeEpoch(t, ft.st, e, int(e%2)+1, 3)
		if err := tbl.Publish(ctx, "p", e, nil, fs); err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
		files += len(fs)
	}
	cur := currentTable(t, tbl)
	sum := cur.CurrentSnapshot().Summary.Properties
	if sum["total-records"] != strconv.Itoa(len(all)) || sum["total-data-files"] != strconv.Itoa(files) {
		t.Errorf("summary %v; want %d records in %d files", sum, len(all), files)
	}
	mfs, err := cur.CurrentSnapshot().Manifests(newStoreIO(ctx, ft.st, ft.loc))
	if err != nil || len(mfs) >= 4 {
		t.Errorf("%d manifests (%v); merging at 4 should keep fewer", len(mfs), err)
	}
	for _, tc := range []struct {
		name   string
		filter iceberg.BooleanExpression
		keep   func(r row) bool
	}{
		{"clicks", iceberg.GreaterThanEqual(iceberg.Reference("clicks"), int64(9001)), func(r row) bool { return r.clicks >= 9001 }},
		{"user", iceberg.EqualTo(iceberg.Reference("user_id"), "u3"), func(r row) bool { return r.user == "u3" }},
		{"day", iceberg.LessThan(iceberg.Reference("window_start"), iceberg.Timestamp(day0.AddDate(0, 0, 1).UnixMicro())),
			func(r row) bool { return r.ts.Before(day0.AddDate(0, 0, 1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scan := cur.Scan(table.WithRowFilter(tc.filter))
			tasks, err := scan.PlanFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var want []row
			for _, r := range all {
				if tc.keep(r) {
					want = append(want, r)
				}
			}
			if len(tasks) >= files || len(want) == 0 {
				t.Errorf("planned %d of %d files for %d rows: nothing pruned", len(tasks), files, len(want))
			}
			at, err := scan.ToArrowTable(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer at.Release()
			if got := at.NumRows(); got != int64(len(want)) {
				t.Errorf("scan returned %d rows, want %d", got, len(want))
			}
		})
	}
}

// TestApplyChanges: snapshots become current on main, expiry drops them with
// their log entries and statistics files, the metadata log is bounded by
// write.metadata.previous-versions-max, and every version parses back.
func TestApplyChanges(t *testing.T) {
	sc, err := icebergSchema(testSchema)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMeta(sc, *iceberg.UnpartitionedSpec, "s3://b/t", iceberg.Properties{propMetadataPreviousMax: "2"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		s := &snapshot{ID: id * 11, Seq: id, TimestampMs: 1000 + id, ManifestList: fmt.Sprintf("s3://b/t/metadata/snap-%d.avro", id),
			Summary: map[string]string{"operation": "append"}}
		if c := m.current(); c != nil {
			s.Parent = &c.ID
		}
		if m, err = m.apply(change{add: s, nowMs: 2000 + id, baseFile: fmt.Sprintf("s3://b/t/metadata/v%d.metadata.json", id)}); err != nil {
			t.Fatal(err)
		}
	}
	m.raw["statistics"] = json.RawMessage(`[{"snapshot-id":11,"statistics-path":"a"},{"snapshot-id":33,"statistics-path":"c"}]`)
	if _, err := m.apply(change{expire: map[int64]bool{33: true}, nowMs: 3000}); err == nil {
		t.Fatal("expired the current snapshot")
	}
	m, err = m.apply(change{expire: map[int64]bool{11: true}, nowMs: 3000, baseFile: "s3://b/t/metadata/v4.metadata.json"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Current     int64              `json:"current-snapshot-id"`
		LastSeq     int64              `json:"last-sequence-number"`
		Snapshots   []snapshot         `json:"snapshots"`
		SnapshotLog []snapshotLogEntry `json:"snapshot-log"`
		MetadataLog []metadataLogEntry `json:"metadata-log"`
		Refs        map[string]struct {
			ID   int64  `json:"snapshot-id"`
			Type string `json:"type"`
		} `json:"refs"`
		Stats []struct {
			ID int64 `json:"snapshot-id"`
		} `json:"statistics"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Current != 33 || doc.LastSeq != 3 || len(doc.Snapshots) != 2 || doc.Refs["main"].ID != 33 || doc.Refs["main"].Type != "branch" {
		t.Errorf("current %d, last seq %d, %d snapshots, refs %v", doc.Current, doc.LastSeq, len(doc.Snapshots), doc.Refs)
	}
	if len(doc.SnapshotLog) != 2 || doc.SnapshotLog[0].SnapshotID != 22 {
		t.Errorf("snapshot log %v", doc.SnapshotLog)
	}
	if len(doc.Stats) != 1 || doc.Stats[0].ID != 33 {
		t.Errorf("statistics %v", doc.Stats)
	}
	if len(doc.MetadataLog) != 2 || doc.MetadataLog[1].MetadataFile != "s3://b/t/metadata/v4.metadata.json" || doc.MetadataLog[1].TimestampMs != 2003 {
		t.Errorf("metadata log %v", doc.MetadataLog)
	}
	if _, err := table.ParseMetadataBytes(data); err != nil {
		t.Errorf("iceberg-go does not parse it: %v", err)
	}
	if _, err := m.apply(change{add: &snapshot{ID: 44, Seq: 9, TimestampMs: 5000}, nowMs: 5000}); err == nil {
		t.Error("a snapshot with a sequence number out of order was accepted")
	}
}
