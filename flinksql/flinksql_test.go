package flinksql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// TestSampleTwin: the README's sample pipeline in SQL lowers to exactly the
// pipeline its YAML spec decodes to.
func TestSampleTwin(t *testing.T) {
	y, err := spec.Load("../testdata/pipelines/clicks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load("../testdata/pipelines/clicks.sql")
	if err != nil {
		t.Fatal(err)
	}
	yj, _ := json.Marshal(y)
	sj, _ := json.Marshal(s)
	if string(yj) != string(sj) {
		t.Errorf("clicks.sql lowers to\n%s\nclicks.yaml decodes to\n%s", sj, yj)
	}
	yg, err := y.Graph()
	if err != nil {
		t.Fatal(err)
	}
	sg, err := s.Graph()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := yg.Describe(), sg.Describe(); a != b {
		t.Errorf("graphs differ:\n%s\n---\n%s", a, b)
	}
}

const ddl = `SET 'state.url' = '/tmp/st';
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, url STRING, dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '/tmp/bids', 'format' = 'parquet');
CREATE TABLE person (id BIGINT, name STRING, dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '/tmp/persons', 'format' = 'json');
CREATE TABLE dim (k BIGINT, v STRING) WITH ('connector' = 'filesystem', 'path' = '/tmp/dim', 'format' = 'csv');
`

func sink(cols string) string {
	return "CREATE TABLE out (" + cols + ") WITH ('connector' = 'filesystem', 'path' = '/tmp/out', 'format' = 'parquet');\n"
}

// TestLowering checks what each construct lowers to (the YAML a SQL file
// means), and that the result is a valid spec.
func TestLowering(t *testing.T) {
	for _, c := range []struct {
		name, sql string
		want      []string
	}{
		{"filter-project", sink("a BIGINT, p DOUBLE, u STRING") + "INSERT INTO out SELECT auction, price * 0.5, UPPER(url) FROM bid WHERE price > 10 AND url LIKE 'http%';",
			[]string{"filter: price > 10 and url startsWith 'http'", "a: auction", "p: price * 0.5", "u: upper(url)", "dateTime: dateTime"}},
		{"int-division", sink("a BIGINT") + "INSERT INTO out SELECT price / 100 FROM bid;", []string{"a: price // 100"}},
		{"cast-case", sink("a STRING, b BIGINT") + "INSERT INTO out SELECT CAST(price AS STRING), CASE WHEN price > 5 THEN 1 ELSE 0 END FROM bid;",
			[]string{"a: cast(price, 'string')", "b: case(price > 5, 1, 0)"}},
		{"hop", sink("auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT") +
			"INSERT INTO out SELECT auction, window_start, window_end, COUNT(*) FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end;",
			[]string{"sliding:", "size: 10s", "slide: 2s", `"n": count()`}},
		{"session-having", sink("bidder BIGINT, n BIGINT") +
			"INSERT INTO out SELECT bidder, COUNT(*) AS n FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) GROUP BY bidder, window_start, window_end HAVING COUNT(*) > 2;",
			[]string{"gap: 10s", "filter: n > 2"}},
		{"filter-aggregate", sink("window_start TIMESTAMP(3), window_end TIMESTAMP(3), cheap BIGINT, d BIGINT") +
			"INSERT INTO out SELECT window_start, window_end, COUNT(*) FILTER (WHERE price < 10), COUNT(DISTINCT bidder) FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;",
			[]string{"agg_arg_0: case(price < 10, 1)", "cheap: count(agg_arg_0)", "d: count_distinct(bidder)", "tumbling: 1m"}},
		{"interval-join", sink("id BIGINT, name STRING, price BIGINT") +
			"INSERT INTO out SELECT P.id, P.name, B.price FROM person P JOIN bid B ON P.id = B.bidder AND B.dateTime BETWEEN P.dateTime - INTERVAL '1' MINUTE AND P.dateTime + INTERVAL '5' MINUTE;",
			[]string{"join:", "- id", "lower: 1m", "upper: 5m"}},
		{"top-n", sink("auction BIGINT, price BIGINT, rn BIGINT") +
			"INSERT INTO out SELECT auction, price, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))) WHERE rn <= 3;",
			[]string{"top_n:", `"n": 3`, "price desc", "tumbling: 10s", "rank_column: rn"}},
		{"lookup", sink("auction BIGINT, v STRING") +
			"INSERT INTO out SELECT B.auction, D.v FROM bid B JOIN dim FOR SYSTEM_TIME AS OF B.dateTime AS D ON B.auction = D.k;",
			[]string{"lookup:", "url: /tmp/dim", "- k"}},
		{"over", sink("auction BIGINT, avg_price DOUBLE") +
			"INSERT INTO out SELECT auction, AVG(maxp) OVER (PARTITION BY auction ORDER BY window_end ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) FROM " +
			"(SELECT auction, MAX(price) AS maxp, window_start, window_end FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end);",
			[]string{"over:", "order_by: window_end", "rows: 10", "avg_price: avg(maxp)"}},
		{"ttl-join", "SET 'table.exec.state.ttl' = '24 h';\n" + sink("id BIGINT, name STRING, price BIGINT") +
			"INSERT INTO out SELECT P.id, P.name, B.price FROM person P JOIN bid B ON P.id = B.bidder;",
			[]string{"join:\n    type: inner", "- id", "- bidder", "interval:\n      lower: 24h\n      upper: 24h"}},
		{"ttl-left-join-comma", "SET 'table.exec.state.ttl' = '90 min';\n" + sink("id BIGINT, price BIGINT") +
			"INSERT INTO out SELECT P.id, B.price FROM person P LEFT JOIN bid B ON P.id = B.bidder;",
			[]string{"type: left", "lower: 90m", "upper: 90m"}},
		{"ttl-join-one-bound", "SET 'table.exec.state.ttl' = '1 h';\n" + sink("id BIGINT, price BIGINT") +
			"INSERT INTO out SELECT P.id, B.price FROM person P, bid B WHERE P.id = B.bidder AND B.dateTime >= P.dateTime;",
			[]string{"lower: 0s", "upper: 1h"}},
		{"ttl-dedup", "SET 'table.exec.state.ttl' = '24 h';\n" + sink("auction BIGINT, bidder BIGINT, price BIGINT") +
			"INSERT INTO out SELECT auction, bidder, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dateTime DESC) AS rn FROM bid) WHERE rn = 1;",
			[]string{"dedup:\n    key:\n    - bidder\n    - auction\n    keep: last\n    within: 24h"}},
		{"ttl-dedup-first", "SET 'table.exec.state.ttl' = '10 s';\n" + sink("auction BIGINT") +
			"INSERT INTO out SELECT auction FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY dateTime) AS rn FROM bid) WHERE rn <= 1;",
			[]string{"keep: first", "within: 10s"}},
		{"ttl-dedup-select-star", "SET 'table.exec.state.ttl' = '24 h';\n" + sink("auction BIGINT, bidder BIGINT, price BIGINT, url STRING, dateTime TIMESTAMP(3), rn BIGINT") +
			"INSERT INTO out SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY dateTime DESC) AS rn FROM bid) WHERE rn = 1;",
			[]string{"keep: last", "input: out-dedup\n  project:", `rn: "1"`}},
		{"ttl-top-n", "SET 'table.exec.state.ttl' = '1 d';\n" + sink("auction BIGINT, price BIGINT, rn BIGINT") +
			"INSERT INTO out SELECT auction, price, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 10;",
			[]string{"top_n:", `"n": 10`, "- price desc", "- auction", "tumbling: 24h", "rank_column: rn"}},
		{"ttl-top-n-over-join", "SET 'table.exec.state.ttl' = '24 h';\n" + sink("id BIGINT, price BIGINT, bid_time TIMESTAMP(3)") +
			"INSERT INTO out SELECT id, price, bid_time FROM (SELECT P.id, B.price, B.dateTime AS bid_time, ROW_NUMBER() OVER (PARTITION BY P.id ORDER BY B.price DESC, B.dateTime) AS rn FROM person P, bid B WHERE P.id = B.bidder) WHERE rn <= 1;",
			[]string{"interval:", "top_n:", `"n": 1`, "- price desc\n    - right_dateTime", "tumbling: 24h"}},
		{"view-and-two-sinks", "CREATE VIEW big AS SELECT auction, price, dateTime FROM bid WHERE price > 100;\n" + sink("auction BIGINT, price BIGINT") +
			"CREATE TABLE out2 (auction BIGINT) WITH ('connector' = 'filesystem', 'path' = '/tmp/out2', 'format' = 'json');\n" +
			"INSERT INTO out SELECT auction, price FROM big; INSERT INTO out2 SELECT auction FROM big;",
			[]string{"sinks:", "out2:", "format: jsonl", "filter: price > 100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			y, _, err := Translate("t.sql", []byte(ddl+c.sql))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(y), w) {
					t.Errorf("lowered spec lacks %q:\n%s", w, y)
				}
			}
			p, err := Parse("t.sql", []byte(ddl+c.sql), t.TempDir())
			if err != nil {
				t.Fatalf("not a valid spec: %v\n%s", err, y)
			}
			// compiled against the declared schemas, as floe validate does
			rep, err := engine.Validate(context.Background(), p, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Valid {
				t.Errorf("does not compile: %v\n%s", rep.Problems, y)
			}
		})
	}
}

// TestErrors: every refusal names file:line:col and says why.
func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name, sql, want string
	}{
		{"syntax", "INSERT INTO out SELECT auction FROM bid WHERE price >;", "t.sql:10:53: SQL syntax error"},
		{"unknown-column", "INSERT INTO out SELECT auctionn FROM bid;", "t.sql:10:24: auctionn: no column auctionn"},
		{"unknown-table", "INSERT INTO out SELECT auction FROM bids;", "t.sql:10:37: no table or view bids"},
		{"unbounded-join", "INSERT INTO out SELECT P.id FROM person P JOIN bid B ON P.id = B.bidder;", "a regular join keeps both sides' rows forever"},
		{"unbounded-join-names-ttl", "INSERT INTO out SELECT P.id FROM person P JOIN bid B ON P.id = B.bidder;", "t.sql:10:34: person as P join bid as B on P.id = B.bidder: a regular join keeps both sides' rows forever (unbounded state); bound it by time: ON ... AND a.ts BETWEEN b.ts - INTERVAL '...' AND b.ts + INTERVAL '...' (an interval join), join the rows of the same window (a window join), or SET 'table.exec.state.ttl' = '24 h'"},
		{"ttl-zero", "SET 'table.exec.state.ttl' = '0 ms'; INSERT INTO out SELECT P.id FROM person P JOIN bid B ON P.id = B.bidder;", "SET 'table.exec.state.ttl' = '24 h'"},
		{"ttl-bad", "SET 'table.exec.state.ttl' = '24 weeks'; INSERT INTO out SELECT P.id FROM person P JOIN bid B ON P.id = B.bidder;", "t.sql:10:30: 'table.exec.state.ttl' = '24 weeks': unknown unit \"weeks\""},
		{"ttl-keeps-given-bounds", "SET 'table.exec.state.ttl' = '1 h'; INSERT INTO out SELECT B.auction FROM bid B JOIN person P ON B.bidder = P.id AND B.dateTime >= P.dateTime AND B.dateTime <= P.dateTime - INTERVAL '1' HOUR;", "lower + upper"},
		{"state-ttl-hint", "SET 'table.exec.state.ttl' = '1 h'; INSERT INTO out SELECT /*+ STATE_TTL('P' = '1d') */ P.id FROM person P JOIN bid B ON P.id = B.bidder;", "t.sql:10:60: /*+ ... */: query hints"},
		{"unbounded-topn-names-ttl", "INSERT INTO out SELECT auction FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 3;", "or SET 'table.exec.state.ttl' = '24 h' to bound it by event time"},
		{"unbounded-agg", "INSERT INTO out SELECT COUNT(*) FROM bid GROUP BY auction;", "updating aggregate whose state never expires"},
		{"unbounded-topn", "INSERT INTO out SELECT auction FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 3;", "over the whole stream"},
		{"proctime", "INSERT INTO out SELECT PROCTIME() FROM bid;", "processing time is not supported"},
		{"bad-type", "CREATE TABLE x (a MAP<STRING, INT>) WITH ('connector' = 'filesystem');", "t.sql:10:19: type MAP: not supported"},
		{"connector", "CREATE TABLE x (a INT, t TIMESTAMP(3), WATERMARK FOR t AS t) WITH ('connector' = 'datagen', 'path' = 'p', 'format' = 'json'); INSERT INTO out SELECT a FROM x;", "'connector' = 'datagen': floe reads and writes 'filesystem' tables, reads 'kafka' topics"},
		{"no-watermark", "INSERT INTO out SELECT k FROM dim;", "lookup table"},
		{"set-key", "SET 'state.urll' = 'x';", "t.sql:10:5: SET 'state.urll': unknown key"},
		{"unterminated", "INSERT INTO out SELECT 'abc FROM bid;", "t.sql:10:24: unterminated string literal"},
		{"over-range", "INSERT INTO out SELECT SUM(price) OVER (PARTITION BY auction ORDER BY dateTime) FROM bid;", "ROWS BETWEEN n PRECEDING"},
		{"concat", "INSERT INTO out SELECT url || 'x' FROM bid;", "t.sql:10:28: ||"},
		{"spec-check", "SET 'state.parallelism' = '0'; INSERT INTO out SELECT auction FROM bid;", "t.sql:10:27: state.parallelism:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := ddl + sink("auction BIGINT") + c.sql
			_, err := Parse("t.sql", []byte(src), t.TempDir())
			if err == nil {
				t.Fatalf("no error for %s", c.sql)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
			var e *Error
			var se spec.Errors
			if !errors.As(err, &e) && !errors.As(err, &se) {
				t.Errorf("error %T %v is neither a flinksql.Error nor a spec.Errors", err, err)
			}
		})
	}
}

// TestNexmarkFilesParse: the bench's Nexmark SQL files lex and split (a
// smoke test of the front end on real queries; the bench module runs them).
func TestNexmarkFilesParse(t *testing.T) {
	files, _ := filepath.Glob("../bench/nexmark/queries/*.sql")
	if len(files) < 20 {
		t.Fatalf("found %d Nexmark SQL files", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = regexp.MustCompile(`\$\{[A-Z_]+\}`).ReplaceAll(bytes.ReplaceAll(data, []byte("${FORMAT}"), []byte("parquet")), []byte("1"))
		if _, _, err := Translate(f, data); err != nil && !strings.Contains(err.Error(), "forever") && !strings.Contains(err.Error(), "never expires") && !strings.Contains(err.Error(), "processing time") {
			t.Errorf("%s: %v", f, err)
		}
		if _, err := lex(string(data)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
