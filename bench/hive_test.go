package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// hiveRows are the rows of the partitioned-sink test: partition values with
// every character Hive escapes, non-ASCII letters, spaces, a leading zero
// (which a type-guessing reader would turn into a number), empty strings and
// nulls, over two days and with fractions of a second.
var hiveRows = func() [][]string {
	keys := []string{`"a/b"`, `"x=y"`, `"100%"`, `"東京 é"`, `""`, `null`, `"plain"`, `"sp ace"`,
		`"q?*:#'\"\\{[]^"`, `"007"`, `"tab\there"`, `"."`}
	ns := []string{"1", "2", "-3", "null", "40000000000"}
	times := []string{"2026-11-29T23:59:59.5Z", "2026-11-30T00:00:00Z", "2026-11-30T08:15:00.000123Z", "2026-11-30T23:00:00Z"}
	var files [][]string
	for f := range 3 {
		var lines []string
		for i := range 40 {
			r := f*40 + i
			lines = append(lines, fmt.Sprintf(`{"ts": %q, "k": %s, "n": %s, "v": %d}`,
				times[r%len(times)], keys[r%len(keys)], ns[r%len(ns)], r))
		}
		files = append(files, lines)
	}
	return files
}()

// hiveSpec is a pipeline over dir/src writing sink with the given sink
// block fields after format.
func hiveSpec(dir, name, sinkExtra string) string {
	return fmt.Sprintf(`name: %s
source: {type: files, url: %q, format: jsonl, schema: {ts: timestamp, k: string, n: int64, v: int64},
         event_time: ts, max_files_per_epoch: 1}
operators:
  - project: {v: v, k: k, n: n, ts: ts, d: "format_time(ts, '%%Y-%%m-%%d')", hm: "format_time(ts, '%%H:%%M')"}
sink: {type: files, url: %q, format: parquet%s}
state: {url: %q, parallelism: 2}
`, name, filepath.Join(dir, "src"), filepath.Join(dir, name), sinkExtra, filepath.Join(dir, "state"))
}

func runHiveSpec(t *testing.T, dir, name, text string) []string {
	t.Helper()
	p, err := spec.Parse(name+".yaml", []byte(text), dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := engine.Run(context.Background(), p, engine.Options{Drain: true})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []string
	for _, o := range res.Outputs {
		out = append(out, filepath.Join(dir, name, filepath.FromSlash(o)))
	}
	return out
}

// TestHivePartitionedSinkMatchesDuckDB writes the same rows through an
// unpartitioned sink and through one partitioned by a string with awkward
// values, an integer, a timestamp and two formatted times, and reads the
// partitioned files back with DuckDB's hive_partitioning: the rows are the
// unpartitioned output's (an empty string reads back as null, as Hive and
// Spark write it), each file sits in the directory of its rows' values, and
// the files do not hold the partition columns.
func TestHivePartitionedSinkMatchesDuckDB(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, lines := range hiveRows {
		if err := os.WriteFile(filepath.Join(dir, "src", fmt.Sprintf("f%d.jsonl", i)), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plain := runHiveSpec(t, dir, "plain", hiveSpec(dir, "plain", ""))
	parted := runHiveSpec(t, dir, "parted", hiveSpec(dir, "parted", ", partition_by: [k, n, ts, d, hm]"))
	if len(plain) == 0 || len(parted) <= len(plain) {
		t.Fatalf("%d unpartitioned and %d partitioned files", len(plain), len(parted))
	}
	ctx := context.Background()
	db, err := OpenDuckDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range parted {
		rel, _ := filepath.Rel(filepath.Join(dir, "parted"), f)
		if strings.Count(filepath.ToSlash(rel), "/") != 5 || !strings.HasPrefix(rel, "k=") {
			t.Errorf("partitioned file %s is not in a k=/n=/ts=/d=/hm= directory", rel)
		}
		var cols string
		if err := db.QueryRowContext(ctx, "SELECT string_agg(column_name, ',' ORDER BY column_name) FROM (DESCRIBE SELECT * FROM read_parquet("+sqlString(f)+", hive_partitioning = false))").Scan(&cols); err != nil {
			t.Fatal(err)
		}
		if cols != "v" {
			t.Errorf("partitioned file %s holds columns %s, want only v", rel, cols)
		}
	}
	// Each directory name is what Hive writes for the value.
	for _, want := range []string{"k=a%2Fb/", "k=x%3Dy/", "k=100%25/", "k=東京 é/", "k=__HIVE_DEFAULT_PARTITION__/", "k=q%3F%2A%3A%23%27%22%5C%7B%5B%5D%5E/",
		"k=tab%09here/", "n=-3/", "n=__HIVE_DEFAULT_PARTITION__/", "ts=2026-11-29 23%3A59%3A59.5/", "ts=2026-11-30 08%3A15%3A00.000123/",
		"ts=2026-11-30 00%3A00%3A00/", "d=2026-11-30/", "hm=08%3A15/"} {
		found := false
		for _, f := range parted {
			found = found || strings.Contains(filepath.ToSlash(f), "/"+want)
		}
		if !found {
			t.Errorf("no partitioned file under a directory %q", want)
		}
	}
	cols := "v, k, n, epoch_us(ts) AS ts, d::VARCHAR AS d, hm"
	want := "SELECT v, NULLIF(k, '') AS k, n, epoch_us(ts) AS ts, d, hm FROM read_parquet(" + sqlList(plain) + ")"
	got := "SELECT " + cols + " FROM read_parquet(" + sqlList(parted) + ", hive_partitioning = true, " +
		"hive_types = {'k': VARCHAR, 'n': BIGINT, 'ts': TIMESTAMP, 'd': DATE, 'hm': VARCHAR})"
	var nWant, nGot, onlyWant, onlyGot int64
	for _, q := range []struct {
		sql string
		n   *int64
	}{{want, &nWant}, {got, &nGot}, {want + " EXCEPT ALL " + got, &onlyWant}, {got + " EXCEPT ALL " + want, &onlyGot}} {
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM ("+q.sql+")").Scan(q.n); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if nWant != 120 || nGot != nWant || onlyWant != 0 || onlyGot != 0 {
		t.Fatalf("unpartitioned %d rows, partitioned read back %d rows: %d only unpartitioned, %d only partitioned", nWant, nGot, onlyWant, onlyGot)
	}
	// DuckDB's own guess of the types reads the timestamps and the leading
	// zero differently, but every row still comes back.
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+sqlList(parted)+", hive_partitioning = true) WHERE k IS NULL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 20 {
		t.Errorf("%d rows with a null or empty k, want 20", n)
	}
}
