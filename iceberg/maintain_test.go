package iceberg

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/store"
)

// TestMaintainBounded publishes 500 small epochs with Maintain every 50 and
// checks that the metadata stays bounded: the file count by a constant, the
// bytes by a constant plus a small amount per live data file (the merged
// manifests list every data file, which is the table's content, not its
// history). The table reads back exactly.
func TestMaintainBounded(t *testing.T) {
	epochs, every := int64(500), int64(50)
	if testing.Short() {
		epochs = 100
	}
	ctx := context.Background()
	ft := newFileTable(t)
	tbl := mustOpen(t, ft.st, ft.loc, Options{PartitionBy: "day(window_start)"})
	mopts := MaintainOptions{RetainSnapshots: 5, RetainMetadata: 5, MinAge: -1}
	var want []row
	start := time.Now()
	maxFiles := 0
	for e := int64(1); e <= epochs; e++ {
		files, rows := writeEpoch(t, ft.st, e, 1, 2)
		if err := tbl.Publish(ctx, "p", e, map[string]string{"attempt": "x"}, files); err != nil {
			t.Fatalf("publish %d: %v", e, err)
		}
		want = append(want, rows...)
		if n := countMetadata(t, ft.st); n > maxFiles {
			maxFiles = n
		}
		if e%every == 0 {
			rep, err := tbl.Maintain(ctx, mopts)
			if err != nil {
				t.Fatalf("maintain after %d: %v", e, err)
			}
			jsonBytes, avroBytes := metadataBytes(t, ft.st)
			t.Logf("epoch %3d: maintain expired %d snapshots, deleted %d versions + %d manifests; metadata now %d files, %d bytes (%d in metadata JSON, %d in manifests)",
				e, rep.ExpiredSnapshots, rep.DeletedVersions, rep.DeletedManifests, rep.MetadataFiles, rep.MetadataBytes, jsonBytes, avroBytes)
			// 5 versions + 5 snapshots' manifest lists + at most
			// ManifestMergeMinCount manifests + hint.
			if rep.MetadataFiles > 5+5+DefaultManifestMergeMinCount+1 {
				t.Fatalf("metadata files %d after maintain", rep.MetadataFiles)
			}
			// Metadata JSON: 5 versions of at most every+5 snapshots
			// (about 750 bytes each): constant in the number of epochs.
			if jsonBytes > 5*(every+5)*1000 {
				t.Fatalf("metadata JSON %d bytes after %d epochs", jsonBytes, e)
			}
			// Manifests: a constant plus one entry per live data file.
			if avroBytes > 60_000+200*e {
				t.Fatalf("manifests %d bytes after %d epochs", avroBytes, e)
			}
			if rep.SkippedForeign != 0 {
				t.Fatalf("skipped %d foreign files in a floe-only table", rep.SkippedForeign)
			}
		}
	}
	t.Logf("%d epochs in %v; at most %d metadata files between maintenance runs", epochs, time.Since(start).Round(time.Millisecond), maxFiles)
	if d := diffRows(ft.read(t), rowStrings(want)); d != "" {
		t.Fatal(d)
	}
	// Data files are never touched.
	data, err := ft.st.List(ctx, "data/")
	if err != nil || int64(len(data)) != epochs {
		t.Fatalf("data files: %d, %v; want %d", len(data), err, epochs)
	}
	// Every kept snapshot names one epoch.
	cur := currentTable(t, tbl)
	for _, s := range cur.Metadata().Snapshots() {
		if s.Summary.Properties["floe.epoch"] == "" {
			t.Fatalf("snapshot %d without epoch: %v", s.SnapshotID, s.Summary.Properties)
		}
	}
}

func metadataBytes(t testing.TB, st store.Store) (jsonBytes, avroBytes int64) {
	t.Helper()
	objs, err := st.List(context.Background(), metadataPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch {
		case strings.HasSuffix(o.Key, versionSuffix):
			jsonBytes += o.Size
		case strings.HasSuffix(o.Key, ".avro"):
			avroBytes += o.Size
		}
	}
	return jsonBytes, avroBytes
}

func countMetadata(t testing.TB, st store.Store) int {
	t.Helper()
	objs, err := st.List(context.Background(), metadataPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return len(objs)
}

// TestMaintainGrace: with the default grace nothing young is deleted; files
// of a losing commit are swept once old.
func TestMaintainGrace(t *testing.T) {
	ctx := context.Background()
	ft := newFileTable(t)
	tbl := mustOpen(t, ft.st, ft.loc, Options{})
	for e := int64(1); e <= 30; e++ {
		files, _ := writeEpoch(t, ft.st, e, 1, 1)
		if err := tbl.Publish(ctx, "p", e, nil, files); err != nil {
			t.Fatal(err)
		}
	}
	// A losing commit's leftovers: a manifest list nobody references.
	orphan := "metadata/snap-1-0-00000000-0000-0000-0000-000000000000.avro"
	if _, err := ft.st.Put(ctx, orphan, []byte("orphan"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// A file Maintain must never touch: not floe's kind of file.
	if _, err := ft.st.Put(ctx, "metadata/notes.txt", []byte("keep"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before := countMetadata(t, ft.st)
	rep, err := tbl.Maintain(ctx, MaintainOptions{RetainSnapshots: 2, RetainMetadata: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedVersions != 0 || rep.DeletedManifests != 0 {
		t.Fatalf("default grace deleted young files: %+v", rep)
	}
	if rep.ExpiredSnapshots != 28 {
		t.Fatalf("expired %d snapshots, want 28", rep.ExpiredSnapshots)
	}
	// An hour later everything unreferenced goes.
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	rep, err = tbl.Maintain(ctx, MaintainOptions{RetainSnapshots: 2, RetainMetadata: 2, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before %d files; %+v", before, rep)
	if _, _, err := ft.st.Get(ctx, orphan); err == nil {
		t.Fatal("orphan manifest list survived")
	}
	if _, _, err := ft.st.Get(ctx, "metadata/notes.txt"); err != nil {
		t.Fatalf("maintain deleted a file it does not own: %v", err)
	}
	objs, _ := ft.st.List(ctx, versionPrefix)
	var versions []string
	for _, o := range objs {
		if strings.HasSuffix(o.Key, versionSuffix) {
			versions = append(versions, o.Key)
		}
	}
	if len(versions) != 2 {
		t.Fatalf("versions left: %v", versions)
	}
	if got, err := tbl.PublishedEpoch(ctx, "p"); err != nil || got != 30 {
		t.Fatalf("PublishedEpoch = %d, %v", got, err)
	}
	if rows := ft.read(t); len(rows) != 30 {
		t.Fatalf("read %d rows, want 30", len(rows))
	}
}
