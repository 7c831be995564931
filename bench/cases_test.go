package bench

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/floe-dev/floe/internal/datagen"
)

// smallParquet generates a small Parquet data set of users distinct users
// and returns its history files and extra file.
func smallParquet(t *testing.T, users int) ([]string, string) {
	t.Helper()
	d := Dataset{Rows: 30000, Files: 12, Users: users, Format: datagen.Parquet}
	l, err := Generate(t.TempDir(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := l.HistoryFiles()
	if err != nil {
		t.Fatal(err)
	}
	return hist, l.Extra
}

// runCase runs case c over files with perEpoch files an epoch, drained, in
// a fresh directory.
func runCase(t *testing.T, c string, perEpoch int, files []string) (*FloeResult, FloeJob) {
	t.Helper()
	dir := t.TempDir()
	j := FloeJob{Source: filepath.Join(dir, "src"), Format: datagen.Parquet, Sink: filepath.Join(dir, "out"),
		State: filepath.Join(dir, "state"), Drain: true, Case: c, MaxFilesPerEpoch: perEpoch, RetainEpochs: 1000}
	if err := LinkFiles(j.Source, files...); err != nil {
		t.Fatal(err)
	}
	fr, err := RunFloe(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Rows != 30000 || fr.RowsLate != 0 {
		t.Fatalf("floe %s: read %d rows (%d late), want 30000 (0 late)", c, fr.Rows, fr.RowsLate)
	}
	return fr, j
}

// duckCompare runs case c in DuckDB over files and compares its output with
// floe's outputs.
func duckCompare(t *testing.T, c string, floeOut, files []string) *Comparison {
	t.Helper()
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "duck.parquet")
	if _, err := RunDuckDB(ctx, DuckJob{Files: files, Format: datagen.Parquet, Out: out, Case: c}); err != nil {
		t.Fatal(err)
	}
	cmp, err := CompareCase(ctx, c, floeOut, out)
	if err != nil {
		t.Fatal(err)
	}
	return cmp
}

// TestSlidingMatchesDuckDB: 5-minute windows every minute; every row counts
// in five windows.
func TestSlidingMatchesDuckDB(t *testing.T) {
	hist, _ := smallParquet(t, 200)
	fr, _ := runCase(t, CaseSliding, 0, hist)
	cmp := duckCompare(t, CaseSliding, fr.Outputs, hist)
	if !cmp.Equal() {
		t.Fatalf("sliding outputs differ: %+v", cmp)
	}
	if want := int64(SlideSize/Slide) * 30000; cmp.Floe.Clicks != want {
		t.Errorf("sliding windows count %d clicks, want %d (each row in %d windows)", cmp.Floe.Clicks, want, SlideSize/Slide)
	}
}

// TestDailyMatchesDuckDB: the growing-state case, an epoch per file; the
// final answer equals DuckDB's, and the manifests account for every epoch.
func TestDailyMatchesDuckDB(t *testing.T) {
	hist, _ := smallParquet(t, 5000)
	fr, j := runCase(t, CaseDaily, 1, hist)
	if fr.Epochs != len(hist)+1 {
		t.Errorf("floe ran %d epochs, want %d (one per file and the drain)", fr.Epochs, len(hist)+1)
	}
	cmp := duckCompare(t, CaseDaily, fr.Outputs, hist)
	if !cmp.Equal() || cmp.Floe.Clicks != 30000 {
		t.Fatalf("daily outputs differ: %+v", cmp)
	}

	costs, err := EpochCosts(j.State, "clickstream")
	if err != nil {
		t.Fatal(err)
	}
	if len(costs) != len(hist)+1 {
		t.Fatalf("%d manifests, want %d", len(costs), len(hist)+1)
	}
	groups, err := GroupStats(context.Background(), EpochGroups(hist, 1))
	if err != nil {
		t.Fatal(err)
	}
	var users int64
	for i, g := range groups {
		e := costs[i]
		if e.Epoch != int64(i+1) || e.Files != 1 || e.RowsIn != g.Rows {
			t.Errorf("epoch %d: %+v, want epoch %d with 1 file and %d rows", i+1, e, i+1, g.Rows)
		}
		if e.StateWritten() <= 0 || e.StateBytes < e.StateWritten() {
			t.Errorf("epoch %d: state written %d of %d bytes", e.Epoch, e.StateWritten(), e.StateBytes)
		}
		users = max(users, g.Users)
	}
	if costs[0].BaseRows < users/2 || costs[0].DeltaBytes != 0 {
		t.Errorf("epoch 1 wrote bases of %d windows and %d delta bytes; want about %d windows, no deltas", costs[0].BaseRows, costs[0].DeltaBytes, groups[0].Users)
	}
}

// TestFilterMatchesDuckDB: the filter-only pipeline at two epoch sizes
// keeps exactly DuckDB's rows; a comparison against a different answer
// fails.
func TestFilterMatchesDuckDB(t *testing.T) {
	hist, _ := smallParquet(t, 200)
	for _, per := range []int{1, 12} {
		t.Run(strconv.Itoa(per), func(t *testing.T) {
			fr, _ := runCase(t, CaseFilter, per, hist)
			cmp := duckCompare(t, CaseFilter, fr.Outputs, hist)
			if !cmp.Equal() {
				t.Fatalf("filter outputs differ: %+v", cmp)
			}
			if n := cmp.Floe.Windows; n <= 0 || n >= 30000 || fr.RowsOut != n {
				t.Errorf("filter kept %d rows (floe counted %d) of 30000, want some but not all", n, fr.RowsOut)
			}
			// DuckDB without the first file: the comparison must see it.
			bad := duckCompare(t, CaseFilter, fr.Outputs, hist[1:])
			if bad.Equal() || bad.OnlyFloe == 0 || bad.OnlyDuckDB != 0 || bad.Floe.Checksum == bad.DuckDB.Checksum {
				t.Errorf("comparison with a different answer: %+v, want only-floe rows and different checksums", bad)
			}
		})
	}
}

// TestIncrementalManyKeysMatchesDuckDB: a committed history over many keys
// (no drain), then one new file, drained: the union of both runs' outputs
// equals DuckDB over all files.
func TestIncrementalManyKeysMatchesDuckDB(t *testing.T) {
	ctx := context.Background()
	hist, extra := smallParquet(t, 20000)
	dir := t.TempDir()
	j := FloeJob{Source: filepath.Join(dir, "src"), Format: datagen.Parquet, Sink: filepath.Join(dir, "out"), State: filepath.Join(dir, "state")}
	if err := LinkFiles(j.Source, hist...); err != nil {
		t.Fatal(err)
	}
	first, err := RunFloe(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if err := LinkFiles(j.Source, extra); err != nil {
		t.Fatal(err)
	}
	j.Drain = true
	inc, err := RunFloe(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if inc.Files != 1 {
		t.Errorf("incremental run read %d files, want 1", inc.Files)
	}
	cmp := duckCompare(t, CaseTumbling, append(first.Outputs, inc.Outputs...), append(slices.Clone(hist), extra))
	if !cmp.Equal() {
		t.Fatalf("incremental outputs differ: %+v", cmp)
	}
	if cmp.Floe.Windows < 20000 {
		t.Errorf("only %d windows: the data set does not have many keys", cmp.Floe.Windows)
	}
}

func TestEpochGroups(t *testing.T) {
	got := EpochGroups([]string{"c", "a", "e", "b", "d"}, 2)
	want := [][]string{{"a", "b"}, {"c", "d"}, {"e"}}
	if len(got) != len(want) {
		t.Fatalf("EpochGroups = %v, want %v", got, want)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("group %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestCaseQueries(t *testing.T) {
	for _, c := range []string{CaseTumbling, CaseSliding, CaseDaily, CaseFilter} {
		if !ValidCase(c) {
			t.Errorf("ValidCase(%q) = false", c)
		}
		if _, err := Pipeline(FloeJob{Source: t.TempDir(), Format: datagen.Parquet, Sink: t.TempDir(), State: t.TempDir(), Case: c}); err != nil {
			t.Errorf("case %q: %v", c, err)
		}
	}
	if ValidCase("nope") {
		t.Error(`ValidCase("nope") = true`)
	}
	if _, err := Pipeline(FloeJob{Source: t.TempDir(), Format: datagen.Parquet, Case: "nope"}); err == nil {
		t.Error("Pipeline accepted an unknown case")
	}
	if _, err := Query(DuckJob{Files: []string{"x"}, Format: datagen.Parquet, Out: "o", Case: "nope"}); err == nil {
		t.Error("Query accepted an unknown case")
	}
}
