package main

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// TestKillRestartHivePartitioned is TestKillRestart with the sink
// partitioned by window_start (partition_by: [window_start]): after
// SIGKILLs at seeded moments and restarts, the committed files hold the
// uninterrupted run's rows, each in the partition folder of its window; no
// file of a killed attempt is left in any partition folder; and orphans
// planted in partition folders (one of an epoch older than the retained
// manifests, one of the head's epoch) are removed by the next run.
func TestKillRestartHivePartitioned(t *testing.T) {
	seed := killSeed(t)
	kills := 8
	if testing.Short() {
		kills = 3
	}
	ctx := context.Background()
	root, dir := t.TempDir(), t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	putDataset(t, ctx, fu("events"))
	refSpec := writeHiveSpec(t, dir, "hive-ref", fu("events"), fu("ref/state"), fu("ref/out"))
	killSpec := writeHiveSpec(t, dir, "hive-kill", fu("events"), fu("kill/state"), fu("kill/out"))

	ref := runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	idle := runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	want, wantFiles := partitionedRows(t, ctx, refSpec, fu("ref/out"))
	if len(want) == 0 || wantFiles < 10 {
		t.Fatalf("reference run committed %d rows in %d files", len(want), wantFiles)
	}
	refHead := lastEpoch(ref.stderr)
	killRuns(t, seed, kills, killSpec, ref.elapsed, idle.elapsed, refHead)

	// Plant orphans in a partition folder: what a killed attempt of epoch
	// 1 (long out of the retained manifests) and of the head's epoch would
	// have left there.
	sink, err := store.Open(ctx, fu("kill/out"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	committed := committedKeys(t, killSpec, fu("kill/out"))
	var some manifest.OutputInfo
	var folder string
	var head int64
	for k := range committed {
		if info, ok := manifest.ParseOutputName(k); ok && info.Partition != "" {
			if folder == "" {
				some, folder = info, path.Dir(k)
			}
			head = max(head, info.Epoch)
		}
	}
	if folder == "" {
		t.Fatalf("no committed file in a partition folder: %v", committed)
	}
	planted := []string{
		folder + "/" + manifest.OutputName(some.Generation, 1, 0, uuid.NewString(), "parquet"),
		folder + "/" + manifest.OutputName(some.Generation, head, 1, uuid.NewString(), "parquet"),
	}
	for _, k := range planted {
		if _, err := sink.Put(ctx, k, []byte("orphan"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	again := runFloe(t, "run", killSpec, "--drain", "--log-format", "json")
	if !strings.Contains(again.stdout, "nothing new") {
		t.Errorf("run after completion: want \"nothing new\", got:\n%s", again.stdout)
	}

	got, gotFiles := partitionedRows(t, ctx, killSpec, fu("kill/out"))
	missing, extra := multisetDiff(want, got)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("killed runs committed %d rows in %d files, the uninterrupted run %d rows in %d files: %d missing, %d extra\nmissing (first 10): %q\nextra (first 10): %q",
			len(got), gotFiles, len(want), wantFiles, len(missing), len(extra), firstN(missing, 10), firstN(extra, 10))
	}
	// Nothing but committed files in the partition folders: orphans of
	// the killed attempts and the planted ones are gone.
	committed = committedKeys(t, killSpec, fu("kill/out"))
	folders := map[string]bool{}
	for k := range listKeys(t, ctx, fu("kill/out")) {
		info, ok := manifest.ParseOutputName(k)
		if !ok || info.Dir != "" {
			continue // markers, _rejected/
		}
		if info.Partition == "" {
			t.Errorf("sink file %s outside a partition folder", k)
		}
		folders[info.Partition] = true
		if !committed[k] {
			t.Errorf("sink file %s in a partition folder is not committed (an orphan left behind)", k)
		}
	}
	for _, k := range planted {
		if _, _, err := sink.Get(ctx, k); err == nil {
			t.Errorf("planted orphan %s is still there", k)
		}
	}
	// floe verify checks every committed file (sizes, checksums) and
	// replay --verify the head epoch against its files.
	runFloe(t, "verify", killSpec)
	if out := runFloe(t, "replay", killSpec, "--verify", "--epoch", strconv.FormatInt(head, 10)).stdout; !strings.Contains(strings.ToLower(out), "identical") {
		t.Errorf("replay --verify of the head epoch:\n%s", out)
	}
	if len(folders) < 30 {
		t.Errorf("%d partition folders, want one per minute window (about 40)", len(folders))
	}
}

// writeHiveSpec is writeSpec with the sink partitioned by window_start.
func writeHiveSpec(t *testing.T, dir, name, source, state, sink string) string {
	t.Helper()
	p := writeSpec(t, dir, name, source, state, sink)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	old := "format: parquet}"
	if !strings.Contains(string(data), old) {
		t.Fatalf("writeSpec's sink changed:\n%s", data)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, "format: parquet, partition_by: [window_start]}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// committedKeys returns the sink-relative keys `floe outputs` lists.
func committedKeys(t *testing.T, specPath, sinkURL string) map[string]bool {
	t.Helper()
	base := strings.TrimSuffix(sinkURL, "/") + "/"
	out := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(runFloe(t, "outputs", specPath).stdout), "\n") {
		key, ok := strings.CutPrefix(line, base)
		if !ok {
			t.Fatalf("floe outputs lists %s, outside the sink %s", line, base)
		}
		out[key] = true
	}
	return out
}

// partitionedRows returns the rows of the committed files of a sink
// partitioned by window_start, each with its partition folder, sorted, and
// the number of files; every file must sit in the folder of its rows.
func partitionedRows(t *testing.T, ctx context.Context, specPath, sinkURL string) ([]string, int) {
	t.Helper()
	sink, err := store.Open(ctx, sinkURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	keys := committedKeys(t, specPath, sinkURL)
	var rows []string
	for key := range keys {
		part := path.Dir(key)
		if !strings.HasPrefix(part, "window_start=") || strings.Contains(part, "/") {
			t.Errorf("committed file %s is not in a window_start= folder", key)
		}
		data, _, err := sink.Get(ctx, key)
		if err != nil {
			t.Fatalf("committed output %s: %v", key, err)
		}
		schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("committed output %s: %v", key, err)
		}
		if schema.HasField("window_start") {
			t.Errorf("committed file %s holds the partition column", key)
		}
		for _, rec := range recs {
			for i := range int(rec.NumRows()) {
				var b strings.Builder
				b.WriteString(part)
				for c, f := range schema.Fields() {
					b.WriteString(" " + f.Name + "=" + rec.Column(c).ValueStr(i))
				}
				rows = append(rows, b.String())
			}
			rec.Release()
		}
	}
	slices.Sort(rows)
	return rows, len(keys)
}
