package iceberg

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/store"
)

// TestPublishEpochs publishes epochs 1..N, day-partitioned and not, and reads
// the table back with iceberg-go's catalog-less reader over its own local
// file system. Republishing any epoch changes nothing.
func TestPublishEpochs(t *testing.T) {
	for _, partition := range []string{"", "day(window_start)"} {
		t.Run("partition="+partition, func(t *testing.T) {
			ctx := context.Background()
			ft := newFileTable(t)
			tbl := mustOpen(t, ft.st, ft.loc, Options{PartitionBy: partition})
			if got, err := tbl.PublishedEpoch(ctx, "p1"); err != nil || got != 0 {
				t.Fatalf("PublishedEpoch before any publish = %d, %v", got, err)
			}
			var want []row
			const epochs = 12
			for e := int64(1); e <= epochs; e++ {
				files, rows := writeEpoch(t, ft.st, e, int(e%3), 4) // epochs with 0, 1, 2 files
				summary := map[string]string{"manifest": "gen=1/epoch=" + strconv.FormatInt(e, 10) + "/_manifest.json", "attempt": "a" + strconv.FormatInt(e, 10)}
				if err := tbl.Publish(ctx, "p1", e, summary, files); err != nil {
					t.Fatalf("publish %d: %v", e, err)
				}
				want = append(want, rows...)
			}
			if d := diffRows(ft.read(t), rowStrings(want)); d != "" {
				t.Fatal(d)
			}
			if got, err := tbl.PublishedEpoch(ctx, "p1"); err != nil || got != epochs {
				t.Fatalf("PublishedEpoch = %d, %v; want %d", got, err, epochs)
			}
			// Every snapshot names one epoch of p1, each epoch at most once.
			cur := currentTable(t, tbl)
			seen := map[string]bool{}
			for _, s := range cur.Metadata().Snapshots() {
				e := s.Summary.Properties["floe.epoch"]
				if e == "" || seen[e] || s.Summary.Properties["floe.pipeline"] != "p1" || s.Summary.Properties["floe.attempt"] != "a"+e {
					t.Fatalf("snapshot %d summary %v", s.SnapshotID, s.Summary.Properties)
				}
				seen[e] = true
			}
			if partition != "" && cur.Metadata().PartitionSpec().Equals(*iceberg.UnpartitionedSpec) {
				t.Fatalf("spec %v, want day partition", cur.Spec())
			}

			// Republish: nothing changes, not even the metadata version.
			before := localHead(t, ft.dir)
			for e := int64(1); e <= epochs; e++ {
				files, _ := writeEpoch(t, ft.st, e, 1, 4)
				if err := tbl.Publish(ctx, "p1", e, nil, files); err != nil {
					t.Fatalf("republish %d: %v", e, err)
				}
			}
			if after := localHead(t, ft.dir); after != before {
				t.Fatalf("republish moved the head from %s to %s", before, after)
			}
			if d := diffRows(ft.read(t), rowStrings(want)); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// TestPublishChecksFiles: a file whose footer disagrees with the epoch's
// record, or whose rows span two days of a day-partitioned table, is refused
// and nothing is committed.
func TestPublishChecksFiles(t *testing.T) {
	ctx := context.Background()
	ft := newFileTable(t)
	tbl := mustOpen(t, ft.st, ft.loc, Options{PartitionBy: "day(window_start)"})
	files, _ := writeEpoch(t, ft.st, 1, 1, 3)
	bad := files[0]
	bad.Rows++
	if err := tbl.Publish(ctx, "p", 1, nil, []DataFile{bad}); err == nil {
		t.Fatal("publish with a wrong row count succeeded")
	} else {
		t.Logf("wrong rows: %v", err)
	}
	// Rows of two days in one file.
	rows := append(epochRows(1, 0, 2), epochRows(7, 0, 2)...)
	data := encodeRows(t, rows)
	if _, err := ft.st.Put(ctx, "data/two-days.parquet", data, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	err := tbl.Publish(ctx, "p", 1, nil, []DataFile{{Path: "data/two-days.parquet", Size: int64(len(data)), Rows: 4}})
	if err == nil {
		t.Fatal("publish of a file spanning two days into a day-partitioned table succeeded")
	}
	t.Logf("two days: %v", err)
	if got, _ := tbl.PublishedEpoch(ctx, "p"); got != 0 {
		t.Fatalf("PublishedEpoch = %d after refused publishes", got)
	}
	for _, p := range []string{"/abs.parquet", "../x.parquet", "metadata/v9.metadata.json", "s3://b/x.parquet", "data/./x.parquet"} {
		if err := tbl.Publish(ctx, "p", 1, nil, []DataFile{{Path: p, Size: 1, Rows: 1}}); err == nil {
			t.Fatalf("path %q accepted", p)
		}
	}
	if err := tbl.Publish(ctx, "p", 0, nil, nil); err == nil {
		t.Fatal("epoch 0 accepted")
	}
	if err := tbl.Publish(ctx, "", 1, nil, nil); err == nil {
		t.Fatal("empty pipeline id accepted")
	}
	if !errors.Is(tbl.Publish(ctx, "p", 1, nil, files), nil) {
		t.Fatal("a good publish after refused ones failed")
	}
}
