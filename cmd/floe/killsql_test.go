package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeSQLSpec writes the SQL twin of writeSpec's pipeline (the same
// pipeline in Flink SQL, lowered by package flinksql) and returns its path.
func writeSQLSpec(t testing.TB, dir, name, source, state, sink string) string {
	t.Helper()
	s := fmt.Sprintf(`SET 'pipeline.name' = '%s';
SET 'state.url' = '%s';
SET 'state.parallelism' = '2';
SET 'state.max-parallelism' = '128';
SET 'state.retain-epochs' = '3';
SET 'table.exec.source.idle-timeout' = '1m';
SET 'table.exec.emit.allow-lateness' = '30s';
CREATE TABLE events (
  event_time TIMESTAMP(3), user_id STRING, page STRING, bytes BIGINT,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'json',
        'source.max-files-per-epoch' = '2', 'source.late-url' = '%s');
CREATE TABLE clicks (user_id STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), clicks BIGINT, total_bytes BIGINT)
WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'parquet');
INSERT INTO clicks
SELECT user_id, window_start, window_end, COUNT(*), SUM(bytes)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '1' MINUTE))
WHERE bytes > 0
GROUP BY user_id, window_start, window_end;
`, name, state, source, lateOf(sink), sink)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".sql")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatalf("write sql: %v", err)
	}
	return p
}

// TestKillRestartSQL SIGKILLs `floe run --drain FILE.sql` at seeded random
// moments (10 times, 4 under -short) and checks that what the killed SQL
// runs committed equals, row for row (outputs, late and rejected rows), one
// uninterrupted run of the YAML twin.
func TestKillRestartSQL(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill schedule seed %d", seed)
	kills := 10
	if testing.Short() {
		kills = 4
	}
	ctx := context.Background()
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	src := fu("events")
	putDataset(t, ctx, src)
	dir := t.TempDir()
	refSpec := writeSpec(t, dir, "kill-ref", src, fu("ref/state"), fu("ref/out"))
	killSpec := writeSQLSpec(t, dir, "kill-sql", src, fu("kill/state"), fu("kill/out"))

	ref := runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	idle := runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	want, _ := committedRows(t, ctx, refSpec, fu("ref/out"))
	if len(want) == 0 {
		t.Fatal("reference run produced no rows")
	}
	killRuns(t, seed, kills, killSpec, ref.elapsed, idle.elapsed, lastEpoch(ref.stderr))
	got, _ := committedRows(t, ctx, killSpec, fu("kill/out"))
	if missing, extra := multisetDiff(want, got); len(missing) > 0 || len(extra) > 0 {
		t.Errorf("killed SQL runs committed %d rows, the YAML run %d: %d missing, %d extra; missing (first 5) %q",
			len(got), len(want), len(missing), len(extra), firstN(missing, 5))
	}
	wantLate, wantRej := sideRows(t, ctx, fu("ref/out"))
	gotLate, gotRej := sideRows(t, ctx, fu("kill/out"))
	if len(wantLate) == 0 || len(wantRej) == 0 {
		t.Errorf("reference has %d late and %d rejected rows; the data set should produce both", len(wantLate), len(wantRej))
	}
	if m, x := multisetDiff(wantLate, gotLate); len(m)+len(x) > 0 {
		t.Errorf("late rows: %d missing, %d extra", len(m), len(x))
	}
	if m, x := multisetDiff(wantRej, gotRej); len(m)+len(x) > 0 {
		t.Errorf("rejected rows: %d missing, %d extra", len(m), len(x))
	}
}

// TestRescaleSQL runs a SQL pipeline's first epochs at parallelism 1, the
// rest at its declared 2 (a rescale: a new generation), and checks the
// outputs against the YAML twin's uninterrupted run; then that the YAML twin
// continues the SQL pipeline's generation (same plan).
func TestRescaleSQL(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	src := fu("events")
	putDataset(t, ctx, src)
	dir := t.TempDir()
	refSpec := writeSpec(t, dir, "resc-ref", src, fu("ref/state"), fu("ref/out"))
	sqlSpec := writeSQLSpec(t, dir, "resc-sql", src, fu("sql/state"), fu("sql/out"))
	runFloe(t, "run", refSpec, "--drain")
	want, _ := committedRows(t, ctx, refSpec, fu("ref/out"))

	first := runFloe(t, "run", sqlSpec, "--parallelism", "1", "--until-epoch", "2")
	if !strings.Contains(first.stdout, "committed epochs") {
		t.Fatalf("first SQL run committed nothing:\n%s", first.stdout)
	}
	plan := runFloe(t, "plan", sqlSpec)
	if !strings.Contains(plan.stdout, "parallelism 1 -> 2") && !strings.Contains(plan.stdout, "new generation") {
		t.Logf("plan before the rescale:\n%s", plan.stdout)
	}
	runFloe(t, "run", sqlSpec, "--drain")
	got, _ := committedRows(t, ctx, sqlSpec, fu("sql/out"))
	if missing, extra := multisetDiff(want, got); len(missing) > 0 || len(extra) > 0 {
		t.Errorf("rescaled SQL runs committed %d rows, the YAML run %d: %d missing, %d extra", len(got), len(want), len(missing), len(extra))
	}
	st := runFloe(t, "status", sqlSpec, "--json").stdout
	if !strings.Contains(st, `"generation": 2`) {
		t.Errorf("after the rescale the head is not generation 2:\n%s", st)
	}
}
