package nexmark

import (
	"context"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// sqlRefused are the Nexmark queries whose Flink SQL floe refuses, and a
// word of the reason each refusal must give.
var sqlRefused = map[string]string{
	"q4":  "updating aggregate",
	"q6":  "updating aggregate",
	"q12": "processing time",
}

// sqlJSONL are the queries also run over the JSON-lines copy of the data.
var sqlJSONL = map[string]bool{"q0": true, "q11": true, "q13": true, "q14": true, "q8": true}

// TestSQLQueries runs every Nexmark query's Flink SQL version
// (queries/<q>.sql) through floe and compares its output with DuckDB's
// answer of the same query; the queries floe refuses must be refused with
// their reason.
func TestSQLQueries(t *testing.T) {
	l := testData(t)
	ctx := context.Background()
	names, err := fs.Glob(specs, "queries/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	passed, refused := 0, 0
	for _, n := range names {
		name := strings.TrimSuffix(filepath.Base(n), ".sql")
		q, ok := sqlOnly[name]
		if !ok {
			qs, err := Lookup(name)
			if err != nil {
				q = Query{Name: name}
			} else {
				q = qs[0]
			}
		}
		formats := []string{Parquet}
		if sqlJSONL[name] {
			formats = append(formats, JSONL)
		}
		for _, format := range formats {
			t.Run(name+"/"+format, func(t *testing.T) {
				dir := t.TempDir()
				j := FloeJob{Query: name, Data: l.Dir, Format: format, SQL: true,
					Sink: filepath.Join(dir, "out"), State: filepath.Join(dir, "state"), Parallelism: 2,
					MaxDelay: testConfig.MaxDelay, MaxFilesPerEpoch: 3}
				p, err := Pipeline(q, j)
				if want, ok := sqlRefused[name]; ok {
					if format != Parquet {
						return
					}
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("%s: %v, want a refusal saying %q", name, err, want)
					}
					t.Logf("refused: %v", err)
					refused++
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				fr, err := runPipeline(ctx, p, j)
				if err != nil {
					t.Fatal(err)
				}
				if fr.RowsLate != 0 || fr.Epochs < 3 {
					t.Errorf("floe: %d late rows, %d epochs (want 0 late, >= 3 epochs)", fr.RowsLate, fr.Epochs)
				}
				if q.SQL == "" {
					t.Fatalf("%s has no DuckDB reference", name)
				}
				out := filepath.Join(dir, "duck.parquet")
				dr, err := runDuck(ctx, q, DuckJob{Data: l.Dir, Format: format, Out: out})
				if err != nil {
					t.Fatal(err)
				}
				if dr.Rows == 0 {
					t.Fatalf("DuckDB's answer is empty: the test data does not exercise %s", name)
				}
				c, err := Compare(ctx, fr.Outputs, out)
				if err != nil {
					t.Fatal(err)
				}
				if !c.Equal() || c.DuckDBRows != dr.Rows {
					t.Fatalf("outputs differ on %v: %s", c.Columns, c)
				}
				t.Logf("%s: %s", name, c)
				if format == Parquet {
					passed++
				}
			})
		}
	}
	t.Logf("Nexmark in Flink SQL: %d of %d queries equal DuckDB's answer, %d refused with their reason", passed, len(names), refused)
}
