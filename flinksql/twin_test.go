package flinksql

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
)

// twinYAML and twinSQL are one pipeline in both front doors: the README's
// sample with a late side output, over absolute folders.
const twinYAML = `name: twin
source: {type: files, url: %q, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2, late_url: %q,
         watermark: {max_out_of_orderness: 5s, idle_timeout: 1m}}
operators:
  - filter: "bytes > 0"
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 30s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2}
`

const twinSQL = `SET 'pipeline.name' = 'twin';
SET 'state.parallelism' = '2';
SET 'table.exec.source.idle-timeout' = '1m';
SET 'table.exec.emit.allow-lateness' = '30s';
CREATE TABLE events (event_time TIMESTAMP(3), user_id STRING, page STRING, bytes BIGINT,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'json',
      'source.max-files-per-epoch' = '2', 'source.late-url' = '%s');
CREATE TABLE clicks (user_id STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), clicks BIGINT, total_bytes BIGINT)
WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'parquet');
SET 'state.url' = '%s';
INSERT INTO clicks
SELECT user_id, window_start, window_end, COUNT(*) AS clicks, SUM(bytes) AS total_bytes
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '1' MINUTE))
WHERE bytes > 0
GROUP BY user_id, window_start, window_end;
`

// TestTwinRun runs a YAML pipeline and its SQL twin through the engine
// and checks that they are one pipeline: the same plan hash in their
// generations, the same output rows, and the SQL pipeline continuing the
// YAML pipeline's state without a new generation.
func TestTwinRun(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	events := filepath.Join(root, "events")
	if err := os.CopyFS(events, os.DirFS("../testdata/events")); err != nil {
		t.Fatal(err)
	}
	type run struct {
		p     *spec.Pipeline
		state string
		sink  string
	}
	mk := func(kind string) run {
		dir := filepath.Join(root, kind)
		sink, state, late := filepath.Join(dir, "out"), filepath.Join(dir, "state"), filepath.Join(dir, "late")
		var p *spec.Pipeline
		var err error
		if kind == "yaml" {
			p, err = spec.Parse("twin.yaml", []byte(fmt.Sprintf(twinYAML, events, late, sink, state)), root)
		} else {
			p, err = Parse("twin.sql", []byte(fmt.Sprintf(twinSQL, events, late, sink, state)), root)
		}
		if err != nil {
			t.Fatal(err)
		}
		return run{p, state, sink}
	}
	y, s := mk("yaml"), mk("sql")
	rows := map[string][]string{}
	for kind, r := range map[string]run{"yaml": y, "sql": s} {
		res, err := engine.Run(ctx, r.p, engine.Options{Drain: true})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if res.RowsLate == 0 {
			t.Errorf("%s: no late rows; the sample data has some", kind)
		}
		for _, o := range res.Outputs {
			rows[kind] = append(rows[kind], readRows(t, filepath.Join(r.sink, filepath.FromSlash(o)))...)
		}
		slices.Sort(rows[kind])
	}
	if len(rows["yaml"]) == 0 || !slices.Equal(rows["yaml"], rows["sql"]) {
		t.Errorf("outputs differ: YAML %d rows, SQL %d rows", len(rows["yaml"]), len(rows["sql"]))
	}
	if hy, hs := planHash(t, y.state), planHash(t, s.state); hy == "" || hy != hs {
		t.Errorf("plan hash: YAML %q, SQL %q", hy, hs)
	}
	// The SQL file pointed at the YAML pipeline's state continues it.
	cont := mk("sql")
	cont.p.State.URL = y.p.State.URL
	cont.p.Sink.URL = y.p.Sink.URL
	cont.p.Source.LateURL = y.p.Source.LateURL
	rep, err := engine.Plan(ctx, cont.p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NewGeneration || !rep.Compatible {
		t.Errorf("the SQL twin on the YAML pipeline's state: new generation %v (%s), compatible %v", rep.NewGeneration, rep.Reason, rep.Compatible)
	}
}

func planHash(t *testing.T, state string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, "twin", "gen=000001", "_generation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		PlanHash string `json:"plan_hash"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g.PlanHash
}

func readRows(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c, f := range schema.Fields() {
				fmt.Fprintf(&b, "%s=%s ", f.Name, rec.Column(c).ValueStr(i))
			}
			out = append(out, b.String())
		}
		rec.Release()
	}
	return out
}
