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

const graphYAML = `name: twin
sources:
  bids: {type: files, url: %[1]q, format: jsonl, schema: {auction: int64, bidder: int64, price: int64, ts: timestamp},
         event_time: ts, max_files_per_epoch: 2, watermark: {max_out_of_orderness: 2s}}
  auctions: {type: files, url: %[2]q, format: jsonl, schema: {id: int64, seller: int64, category: int64, ts: timestamp},
             event_time: ts, max_files_per_epoch: 2, watermark: {max_out_of_orderness: 2s}}
stages:
  - name: bid_auction-join
    inputs: [bids, auctions]
    join: {left_on: [auction], right_on: [id], window: {tumbling: 10s}}
  - name: per_category-window
    input: bid_auction-join
    window: {key: [category, window_start, window_end], tumbling: 10s, aggregates: {bids: "count()", volume: "sum(price)"}}
  - name: top_categories-top_n
    input: per_category-window
    top_n: {n: 2, order_by: [volume desc, category], rank_column: rownum}
sinks:
  top_categories: {input: top_categories-top_n, type: files, url: %[3]q, format: jsonl}
  category_volume: {input: per_category-window, type: files, url: %[4]q, format: parquet}
state: {url: %[5]q, parallelism: 2}
`

const graphSQL = `SET 'pipeline.name' = 'twin';
SET 'state.parallelism' = '2';
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '%[1]s', 'format' = 'json', 'source.max-files-per-epoch' = '2');
CREATE TABLE auctions (id BIGINT, seller BIGINT, category BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '%[2]s', 'format' = 'json', 'source.max-files-per-epoch' = '2');
CREATE TABLE top_categories (category BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT, volume BIGINT, rownum BIGINT)
WITH ('connector' = 'filesystem', 'path' = '%[3]s', 'format' = 'json');
CREATE TABLE category_volume (category BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT, volume BIGINT)
WITH ('connector' = 'filesystem', 'path' = '%[4]s', 'format' = 'parquet');
SET 'state.url' = '%[5]s';
-- bids with their auction, in the same 10 s window
CREATE VIEW bid_auction AS
  SELECT B.price, A.category, B.window_start, B.window_end
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) B
  JOIN TABLE(TUMBLE(TABLE auctions, DESCRIPTOR(ts), INTERVAL '10' SECOND)) A
  ON B.auction = A.id AND B.window_start = A.window_start AND B.window_end = A.window_end;
CREATE VIEW per_category AS
  SELECT category, window_start, window_end, COUNT(*) AS bids, SUM(price) AS volume
  FROM bid_auction GROUP BY category, window_start, window_end;
INSERT INTO top_categories
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY volume DESC, category) AS rownum
  FROM per_category)
WHERE rownum <= 2;
INSERT INTO category_volume SELECT * FROM per_category;
`

// TestTwinRunGraph: a graph pipeline (window join, a window over its
// results, a Top-N per window, two sinks) in SQL and in YAML is one
// pipeline: same plan hash, same rows in both sinks, and the SQL file
// continues the YAML pipeline's generation. (The sample auctions-graph.yaml
// has no SQL twin: its dedup is time-bounded, which Flink SQL cannot say.)
func TestTwinRunGraph(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	data := filepath.Join(root, "auctions")
	if err := os.CopyFS(data, os.DirFS("../testdata/auctions")); err != nil {
		t.Fatal(err)
	}
	bids, auctions := filepath.Join(data, "bids"), filepath.Join(data, "auctions")
	var mkIn func(kind, where string) (*spec.Pipeline, []string, string)
	mk := func(kind string) (*spec.Pipeline, []string, string) { return mkIn(kind, kind) }
	_ = mk
	mkIn = func(kind, where string) (*spec.Pipeline, []string, string) {
		dir := filepath.Join(root, where)
		top, vol, state := filepath.Join(dir, "top"), filepath.Join(dir, "vol"), filepath.Join(dir, "state")
		var p *spec.Pipeline
		var err error
		if kind == "sql" {
			p, err = Parse("twin.sql", []byte(fmt.Sprintf(graphSQL, bids, auctions, top, vol, state)), root)
		} else {
			p, err = spec.Parse("twin.yaml", []byte(fmt.Sprintf(graphYAML, bids, auctions, top, vol, state)), root)
		}
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		return p, []string{top, vol}, state
	}
	rows := map[string]map[string][]string{}
	hashes := map[string]string{}
	for _, kind := range []string{"yaml", "sql"} {
		p, sinks, state := mk(kind)
		res, err := engine.Run(ctx, p, engine.Options{Drain: true})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		rows[kind] = map[string][]string{}
		for _, o := range res.Outputs {
			if rest, ok := strings.CutPrefix(o, "@category_volume/"); ok {
				rows[kind]["vol"] = append(rows[kind]["vol"], readRows(t, filepath.Join(sinks[1], filepath.FromSlash(rest)))...)
			} else {
				data, err := os.ReadFile(filepath.Join(sinks[0], filepath.FromSlash(o)))
				if err != nil {
					t.Fatal(err)
				}
				rows[kind]["top"] = append(rows[kind]["top"], strings.Split(strings.TrimSpace(string(data)), "\n")...)
			}
		}
		for _, r := range rows[kind] {
			slices.Sort(r)
		}
		hashes[kind] = planHash(t, state)
	}
	for _, s := range []string{"top", "vol"} {
		if len(rows["yaml"][s]) == 0 || !slices.Equal(rows["yaml"][s], rows["sql"][s]) {
			t.Errorf("sink %s: YAML %d rows, SQL %d rows, or they differ", s, len(rows["yaml"][s]), len(rows["sql"][s]))
		}
	}
	if hashes["yaml"] == "" || hashes["yaml"] != hashes["sql"] {
		t.Errorf("plan hash: YAML %q, SQL %q", hashes["yaml"], hashes["sql"])
	}
	yp, _, _ := mkIn("yaml", "same")
	sp, _, _ := mkIn("sql", "same")
	yj, _ := json.Marshal(yp)
	sj, _ := json.Marshal(sp)
	if string(yj) != string(sj) {
		t.Errorf("the SQL lowers to\n%s\nthe YAML decodes to\n%s", sj, yj)
	}
}
