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

// sqlExtra are DuckDB references of queries with a SQL version only.
var sqlExtra = map[string]Query{
	"q9": {Name: "q9", Title: "winning bids", Streams: []string{Auctions, Bids},
		SQL: `SELECT id, itemName, description, initialBid, reserve, dateTime, expires, seller, category, extra,
  auction, bidder, price, bid_dateTime, bid_extra FROM (
  SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime, B.extra AS bid_extra,
    row_number() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.dateTime ASC) AS rownum
  FROM {auctions} A JOIN {bids} B ON A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires)
WHERE rownum <= 1`},
	"q20": {Name: "q20", Title: "expand bid with auction", Streams: []string{Bids, Auctions},
		SQL: `SELECT auction, bidder, price, channel, url, B.dateTime AS bid_dateTime, B.extra AS bid_extra,
  itemName, description, initialBid, reserve, A.dateTime AS auction_dateTime, expires, seller, category,
  A.extra AS auction_extra
FROM {bids} B JOIN {auctions} A ON B.auction = A.id WHERE A.category = 10`},
	"q16": {Name: "q16", Title: "channel statistics report", Streams: []string{Bids},
		SQL: `SELECT channel, strftime(dateTime, '%Y-%m-%d') AS day, max(strftime(dateTime, '%H:%M')) AS minute,
  count(*) AS total_bids,
  count(*) FILTER (WHERE price < 10000) AS rank1_bids,
  count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
  count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
  count(DISTINCT bidder) AS total_bidders,
  count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
  count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
  count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
  count(DISTINCT auction) AS total_auctions,
  count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
  count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
  count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
FROM {bids} GROUP BY 1, 2`},
}

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
		q, ok := sqlExtra[name]
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
