package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/floe-dev/floe/store"
)

// TestCorruptMetadata: a damaged current metadata file is a clear error that
// names the file, never a panic, and nothing is written on top of it.
func TestCorruptMetadata(t *testing.T) {
	ctx := context.Background()
	ft := newFileTable(t)
	tbl := mustOpen(t, ft.st, ft.loc, Options{})
	files, _ := writeEpoch(t, ft.st, 1, 1, 2)
	if err := tbl.Publish(ctx, "p", 1, nil, files); err != nil {
		t.Fatal(err)
	}
	good, _, err := ft.st.Get(ctx, "metadata/v2.metadata.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":       {},
		"truncated":   good[:len(good)/2],
		"not json":    []byte("\x00\xff garbage"),
		"empty obj":   []byte("{}"),
		"null":        []byte("null"),
		"wrong types": []byte(`{"format-version":"two","table-uuid":5,"location":[],"snapshots":{}}`),
		"bad version": []byte(strings.Replace(string(good), `"format-version":2`, `"format-version":99`, 1)),
		"no schema":   []byte(strings.Replace(string(good), `"current-schema-id":0`, `"current-schema-id":7`, 1)),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ft.st.Put(ctx, "metadata/v3.metadata.json", data, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := Open(ctx, ft.st, ft.loc, Options{Schema: testSchema})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "metadata/v3.metadata.json") {
				t.Fatalf("Open: %v; want ErrCorrupt naming metadata/v3.metadata.json", err)
			}
			files2, _ := writeEpoch(t, ft.st, 2, 1, 2)
			if err := tbl.Publish(ctx, "p", 2, nil, files2); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Publish on a corrupt head: %v", err)
			}
			if _, err := tbl.PublishedEpoch(ctx, "p"); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("PublishedEpoch on a corrupt head: %v", err)
			}
			if _, err := tbl.Maintain(ctx, MaintainOptions{MinAge: -1}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Maintain on a corrupt head: %v", err)
			}
			t.Log(err)
			if _, _, err := ft.st.Get(ctx, "metadata/v4.metadata.json"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("something committed on top of a corrupt head: %v", err)
			}
		})
	}
}

// TestForeignWriter: a table whose current metadata floe did not write is
// refused, unless foreign writers are allowed; then floe commits on it and
// Maintain deletes none of the other writer's metadata.
func TestForeignWriter(t *testing.T) {
	ctx := context.Background()
	ft := newFileTable(t)
	tbl := mustOpen(t, ft.st, ft.loc, Options{})
	var want []row
	for e := int64(1); e <= 3; e++ {
		files, rows := writeEpoch(t, ft.st, e, 1, 2)
		if err := tbl.Publish(ctx, "p", e, nil, files); err != nil {
			t.Fatal(err)
		}
		want = append(want, rows...)
	}
	// Another writer commits v5: the same table with a property of its own,
	// carrying floe's stamp of v4 along as any writer would.
	data, _, err := ft.st.Get(ctx, "metadata/v4.metadata.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["properties"].(map[string]any)["owner"] = "spark"
	// Members floe does not interpret, at the top and in a snapshot.
	doc["x-vendor"] = map[string]any{"k": []any{1.0, "two"}}
	doc["snapshots"].([]any)[0].(map[string]any)["x-snap"] = "kept"
	foreign, _ := json.Marshal(doc)
	if _, err := ft.st.Put(ctx, "metadata/v5.metadata.json", foreign, store.PutOptions{IfNotExist: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, ft.st, ft.loc, Options{Schema: testSchema}); !errors.Is(err, ErrForeignWriter) {
		t.Fatalf("Open: %v; want ErrForeignWriter", err)
	} else {
		t.Log(err)
	}
	files, rows := writeEpoch(t, ft.st, 4, 1, 2)
	if err := tbl.Publish(ctx, "p", 4, nil, files); !errors.Is(err, ErrForeignWriter) {
		t.Fatalf("Publish: %v; want ErrForeignWriter", err)
	}
	shared := mustOpen(t, ft.st, ft.loc, Options{AllowForeignWriters: true})
	if err := shared.Publish(ctx, "p", 4, nil, files); err != nil {
		t.Fatal(err)
	}
	want = append(want, rows...)
	if d := diffRows(ft.read(t), rowStrings(want)); d != "" {
		t.Fatal(d)
	}
	cur := currentTable(t, shared)
	if cur.Properties()["owner"] != "spark" {
		t.Fatal("floe's commit dropped the other writer's property")
	}
	head, err := shared.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err = ft.st.Get(ctx, versionKey(head.Version))
	if err != nil {
		t.Fatal(err)
	}
	var next map[string]any
	if err := json.Unmarshal(data, &next); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(next["x-vendor"], doc["x-vendor"]) || next["snapshots"].([]any)[0].(map[string]any)["x-snap"] != "kept" {
		t.Fatalf("floe's commit dropped members it does not know: x-vendor %v, snapshot 0 %v", next["x-vendor"], next["snapshots"].([]any)[0])
	}
	rep, err := shared.Maintain(ctx, MaintainOptions{RetainSnapshots: 1, RetainMetadata: 1, MinAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SkippedForeign != 1 || rep.DeletedManifests != 0 {
		t.Fatalf("maintain with foreign writers: %+v", rep)
	}
	if _, _, err := ft.st.Get(ctx, "metadata/v5.metadata.json"); err != nil {
		t.Fatalf("the other writer's metadata was deleted: %v", err)
	}
	if d := diffRows(ft.read(t), rowStrings(want)); d != "" {
		t.Fatal(d)
	}
}

// TestOpenErrors: bad locations and options are refused up front, and a
// table recorded under another location is not committed to.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	ft := newFileTable(t)
	for _, loc := range []string{"", "relative/dir", "mem://", "s3://user:pw@bucket/x", "file://"} {
		if _, err := Open(ctx, ft.st, loc, Options{}); err == nil {
			t.Errorf("location %q accepted", loc)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("error shows the password: %v", err)
		}
	}
	for _, p := range []string{"day()", "minute(window_start)", "day(window_start", "bucket[4](user_id)", "identity()"} {
		if _, err := Open(ctx, ft.st, ft.loc, Options{PartitionBy: p}); err == nil {
			t.Errorf("partition_by %q accepted", p)
		}
	}
	tbl := mustOpen(t, ft.st, ft.loc, Options{PartitionBy: "day(user_id)"})
	if err := tbl.Publish(ctx, "p", 1, nil, nil); err == nil || !strings.Contains(err.Error(), "want a timestamp") {
		t.Errorf("day(string column): %v", err)
	}
	tbl = mustOpen(t, ft.st, ft.loc+"/", Options{})
	if err := tbl.Publish(ctx, "p", 1, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, ft.st, "s3://elsewhere/t", Options{}); err == nil || !strings.Contains(err.Error(), "records table location") {
		t.Errorf("other location: %v", err)
	}
	noSchema, err := Open(ctx, newFileTable(t).st, ft.loc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := noSchema.Publish(ctx, "p", 1, nil, nil); err == nil || !strings.Contains(err.Error(), "no schema") {
		t.Errorf("create without schema: %v", err)
	}
}

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/golden from the current code")

// goldenLoc is the location recorded in the golden table: it is read from a
// copy anywhere, through a store rooted at the copy.
const goldenLoc = "s3://floe-golden/clicks"

// TestGolden reads a table written by this package and checked in under
// testdata/golden (regenerate with go test ./iceberg -run TestGolden
// -rewrite): 6 epochs, day-partitioned, maintained. The current code must
// keep reading it, continue it, and reach the same rows.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	golden := filepath.Join("testdata", "golden")
	var want []row
	for e := int64(1); e <= 6; e++ {
		for i := range int(e%2) + 1 {
			want = append(want, epochRows(e, i, 3)...)
		}
	}
	if *rewrite {
		if err := os.RemoveAll(golden); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(golden, 0o755); err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(golden)
		st, err := store.Open(ctx, "file://"+abs)
		if err != nil {
			t.Fatal(err)
		}
		tbl := mustOpen(t, st, goldenLoc, Options{PartitionBy: "day(window_start)"})
		for e := int64(1); e <= 6; e++ {
			files, _ := writeEpoch(t, st, e, int(e%2)+1, 3)
			if err := tbl.Publish(ctx, "golden", e, map[string]string{"attempt": "golden"}, files); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tbl.Maintain(ctx, MaintainOptions{RetainSnapshots: 3, RetainMetadata: 2, MinAge: -1}); err != nil {
			t.Fatal(err)
		}
		st.Close()
		// The file store's own directories are not part of the table.
		_ = os.RemoveAll(filepath.Join(abs, ".floe-locks"))
		_ = os.RemoveAll(filepath.Join(abs, ".floe-tmp"))
	}
	// Work on a copy: the test must not write into testdata.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(golden)); err != nil {
		t.Fatalf("copy golden table: %v", err)
	}
	st, err := store.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tbl, err := Open(ctx, st, goldenLoc, Options{})
	if err != nil {
		t.Fatalf("open golden table: %v", err)
	}
	if got, err := tbl.PublishedEpoch(ctx, "golden"); err != nil || got != 6 {
		t.Fatalf("PublishedEpoch = %d, %v", got, err)
	}
	if d := diffRows(readVia(t, tbl), rowStrings(want)); d != "" {
		t.Fatal(d)
	}
	// The current code continues the table.
	files, rows := writeEpoch(t, st, 7, 1, 3)
	if err := tbl.Publish(ctx, "golden", 7, nil, files); err != nil {
		t.Fatal(err)
	}
	if d := diffRows(readVia(t, tbl), rowStrings(append(want, rows...))); d != "" {
		t.Fatal(d)
	}
	if _, err := fs.Stat(os.DirFS(golden), "metadata/version-hint.text"); err != nil {
		t.Fatalf("golden table has no version hint: %v", err)
	}
}
