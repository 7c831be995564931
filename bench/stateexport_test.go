package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/spec"
)

// TestStateExportReadByDuckDB: `floe state export` (engine.ReadState →
// Parquet) is read by DuckDB directly; its window count and the sums of the
// accumulators equal `floe state cat`'s rows.
func TestStateExportReadByDuckDB(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "events")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	err := datagen.Generate(datagen.Options{Rows: 20000, Files: 8, Users: 300, Span: 3 * time.Hour, Seed: 4, Format: datagen.JSONL},
		func(name string, data []byte) error { return os.WriteFile(filepath.Join(src, name), data, 0o644) })
	if err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf(`name: exp
source: {type: files, url: %q, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2, watermark: {max_out_of_orderness: 5s}}
operators:
  - window: {key: [user_id], tumbling: 24h, allowed_lateness: 0s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)", pages: "count_distinct(page)"}}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2}
`, src, filepath.Join(dir, "out"), filepath.Join(dir, "state"))
	p, err := spec.Parse("exp.yaml", []byte(y), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(ctx, p, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	view, err := engine.ReadState(ctx, p, engine.StateQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var windows, clicks, bytes, pages int64
	op := view.Ops[0]
	idx := map[string]int{}
	for i, a := range op.Aggregates {
		idx[a] = i
	}
	for _, r := range op.Rows {
		windows++
		clicks += r.Values[idx["clicks"]].(int64)
		bytes += r.Values[idx["total_bytes"]].(int64)
		pages += r.Values[idx["pages"]].(int64)
	}
	if windows == 0 {
		t.Fatal("no open windows to export")
	}
	data, err := view.Parquet()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "state.parquet")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var dw, dc, db_, dp int64
	q := fmt.Sprintf("SELECT count(*), sum(clicks), sum(total_bytes), sum(pages) FROM read_parquet('%s') WHERE operator = 'window'", strings.ReplaceAll(file, "'", "''"))
	if err := db.QueryRowContext(ctx, q).Scan(&dw, &dc, &db_, &dp); err != nil {
		t.Fatalf("duckdb: %v", err)
	}
	if dw != windows || dc != clicks || db_ != bytes || dp != pages {
		t.Fatalf("DuckDB reads %d windows, %d clicks, %d bytes, %d pages; state cat has %d, %d, %d, %d", dw, dc, db_, dp, windows, clicks, bytes, pages)
	}
	t.Logf("DuckDB and state cat agree: %d windows, %d clicks, %d bytes, %d distinct pages", windows, clicks, bytes, pages)
}
