package nexmark

import (
	"embed"
	"fmt"
	"strings"
)

// specs holds the floe pipeline specs, queries/<name>.yaml.
//
//go:embed queries/*.yaml queries/*.sql
var specs embed.FS

// NeedsGraph marks a query floe cannot run yet: it needs more than one
// linear chain (a join, window over window, top-N, dedup or a lookup).
const NeedsGraph = "graph"

// Query is one Nexmark query: a floe spec (queries/<Name>.yaml) and the DuckDB
// reference SQL of its final (drained) answer.
type Query struct {
	Name  string
	Title string
	// Needs is "" for a query floe runs today, NeedsGraph otherwise (the
	// harness reports it as not runnable yet, never as passing).
	Needs string
	// Streams the query reads (Persons, Auctions, Bids, SideInput).
	Streams []string
	// SQL is a DuckDB SELECT; {bids}, {persons}, {auctions} and {side_input}
	// stand for the streams' files and {side_rows} for the side input's
	// row count. Its column names and order are the ones compared.
	SQL string
}

// Spec returns the query's floe spec template (with ${...} placeholders).
func (q Query) Spec() ([]byte, error) {
	data, err := specs.ReadFile("queries/" + q.Name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: spec: %w", q.Name, err)
	}
	return data, nil
}

// SQLSpec returns the query in Flink SQL (queries/<Name>.sql, with ${...}
// placeholders), or nil when there is none.
func (q Query) SQLSpec() []byte {
	data, err := specs.ReadFile("queries/" + q.Name + ".sql")
	if err != nil {
		return nil
	}
	return data
}

// Runnable reports whether floe can run q today.
func (q Query) Runnable() bool { return q.Needs == "" }

// The reference SQL computes what floe's drained run emits: the generated
// disorder is below the pipelines' max_out_of_orderness, so no row is late
// and every window holds all of its rows.
var queries = []Query{
	{Name: "q0", Title: "passthrough", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, price, channel, url, dateTime, extra FROM {bids}`},
	{Name: "q1", Title: "currency conversion", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, price::DOUBLE * 0.908 AS price, dateTime, extra FROM {bids}`},
	{Name: "q2", Title: "selection", Streams: []string{Bids},
		SQL: `SELECT auction, price FROM {bids} WHERE auction % 123 = 0`},
	{Name: "q3", Title: "local item suggestion (join)", Streams: []string{Auctions, Persons},
		SQL: `SELECT P.name, P.city, P.state, A.id FROM {auctions} A JOIN {persons} P ON A.seller = P.id
WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')`},
	{Name: "q5", Title: "hot items (max count over sliding windows)", Streams: []string{Bids},
		SQL: `WITH w AS (
  SELECT auction, ws AS starttime
  FROM (SELECT auction, time_bucket(INTERVAL 2 SECOND, dateTime) AS last_start FROM {bids}),
       LATERAL (SELECT unnest(generate_series(last_start - INTERVAL 8 SECOND, last_start, INTERVAL 2 SECOND)) AS ws)),
c AS (SELECT auction, starttime, count(*) AS num FROM w GROUP BY ALL),
m AS (SELECT starttime, max(num) AS maxn FROM c GROUP BY ALL)
SELECT c.auction, c.num, c.starttime FROM c JOIN m USING (starttime) WHERE c.num >= m.maxn`},
	{Name: "q6", Title: "average selling price by seller (OVER ROWS frame)", Streams: []string{Auctions, Bids},
		SQL: `WITH q AS (
  SELECT A.id, A.seller, A.expires, max(B.price) AS final
  FROM {auctions} A JOIN {bids} B ON A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
  GROUP BY A.id, A.seller, A.expires)
SELECT seller, avg(final) OVER (PARTITION BY seller ORDER BY expires, id ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg_price
FROM q`},
	{Name: "q7", Title: "highest bid per window joined back to the bid", Streams: []string{Bids},
		SQL: `WITH b AS (SELECT *, time_bucket(INTERVAL 10 SECOND, dateTime) AS ws FROM {bids}),
m AS (SELECT ws, max(price) AS maxprice FROM b GROUP BY ws)
SELECT b.auction, b.price, b.bidder, b.dateTime, b.extra FROM b JOIN m ON b.ws = m.ws AND b.price = m.maxprice`},
	{Name: "q8", Title: "new persons and auctions (windowed join)", Streams: []string{Persons, Auctions},
		SQL: `WITH p AS (SELECT DISTINCT id, name, time_bucket(INTERVAL 10 SECOND, dateTime) AS starttime FROM {persons}),
a AS (SELECT DISTINCT seller, time_bucket(INTERVAL 10 SECOND, dateTime) AS starttime FROM {auctions})
SELECT p.id, p.name, p.starttime FROM p JOIN a ON p.id = a.seller AND p.starttime = a.starttime`},
	{Name: "q10", Title: "log to file system (time formatting)", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, price, dateTime, extra,
  strftime(dateTime, '%Y-%m-%d') AS dt, strftime(dateTime, '%H:%M') AS hm FROM {bids}`},
	{Name: "q11", Title: "user sessions (session window)", Streams: []string{Bids},
		SQL: `WITH s AS (
  SELECT bidder, dateTime,
    CASE WHEN dateTime - lag(dateTime) OVER (PARTITION BY bidder ORDER BY dateTime) > INTERVAL 10 SECOND
         THEN 1 ELSE 0 END AS brk
  FROM {bids}),
g AS (SELECT bidder, dateTime,
  sum(brk) OVER (PARTITION BY bidder ORDER BY dateTime ROWS UNBOUNDED PRECEDING) AS sid FROM s)
SELECT bidder, count(*) AS bid_count, min(dateTime) AS starttime, max(dateTime) + INTERVAL 10 SECOND AS endtime
FROM g GROUP BY bidder, sid`},
	{Name: "q13", Title: "bounded side input (lookup join)", Streams: []string{Bids, SideInput},
		SQL: `SELECT B.auction, B.bidder, B.price, B.dateTime, S.value
FROM {bids} B JOIN {side_input} S ON B.auction % {side_rows} = S.key`},
	{Name: "q14", Title: "calculation (CASE time banding, UDF as expression)", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, 0.908::DOUBLE * price AS price,
  CASE WHEN hour(dateTime) >= 8 AND hour(dateTime) <= 18 THEN 'dayTime'
       WHEN hour(dateTime) <= 6 OR hour(dateTime) >= 20 THEN 'nightTime'
       ELSE 'otherTime' END AS bidTimeType,
  dateTime, extra, length(extra) - length(replace(extra, 'c', '')) AS c_counts
FROM {bids} WHERE 0.908::DOUBLE * price > 1000000 AND 0.908::DOUBLE * price < 50000000`},
	{Name: "q15", Title: "bidding statistics per day (CASE price bands, distinct counts)", Streams: []string{Bids},
		SQL: `SELECT strftime(dateTime, '%Y-%m-%d') AS day,
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
FROM {bids} GROUP BY 1`},
	{Name: "q17", Title: "auction statistics per day (CASE price bands)", Streams: []string{Bids},
		SQL: `SELECT auction, strftime(dateTime, '%Y-%m-%d') AS day,
  count(*) AS total_bids,
  count(*) FILTER (WHERE price < 10000) AS rank1_bids,
  count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
  count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
  min(price) AS min_price, max(price) AS max_price,
  sum(price)::DOUBLE / count(*)::DOUBLE AS avg_price, sum(price)::BIGINT AS sum_price
FROM {bids} GROUP BY 1, 2`},
	{Name: "q18", Title: "find last bid (keep-last dedup)", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, price, channel, url, dateTime, extra FROM (
  SELECT *, row_number() OVER (PARTITION BY bidder, auction ORDER BY dateTime DESC) AS rn FROM {bids})
WHERE rn = 1`},
	{Name: "q19", Title: "auction top-10 price (Top-N per key)", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, price, channel, url, dateTime, extra, rank_number FROM (
  SELECT *, row_number() OVER (PARTITION BY auction ORDER BY price DESC, dateTime ASC) AS rank_number FROM {bids})
WHERE rank_number <= 10`},
	{Name: "q19w", Title: "top-10 bids per 10 s window (Top-N per window)", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, price, dateTime, rank_number FROM (
  SELECT *, row_number() OVER (PARTITION BY time_bucket(INTERVAL 10 SECOND, dateTime) ORDER BY price DESC, dateTime ASC) AS rank_number
  FROM {bids})
WHERE rank_number <= 10`},
	{Name: "q21", Title: "add channel id (CASE, regexp_extract)", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, price, channel,
  CASE WHEN lower(channel) = 'apple' THEN '0'
       WHEN lower(channel) = 'google' THEN '1'
       WHEN lower(channel) = 'facebook' THEN '2'
       WHEN lower(channel) = 'baidu' THEN '3'
       ELSE nullif(regexp_extract(url, '(&|^)channel_id=([^&]*)', 2), '') END AS channel_id
FROM {bids}
WHERE nullif(regexp_extract(url, '(&|^)channel_id=([^&]*)', 2), '') IS NOT NULL
   OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')`},
	{Name: "q22", Title: "get URL directories (split_part)", Streams: []string{Bids},
		SQL: `SELECT auction, bidder, price, channel,
  split_part(url, '/', 4) AS dir1, split_part(url, '/', 5) AS dir2, split_part(url, '/', 6) AS dir3 FROM {bids}`},
}

// Queries returns every query, in Nexmark order.
func Queries() []Query { return append([]Query(nil), queries...) }

// Lookup returns the queries named in names (comma-separated; "" or "all":
// every query; "runnable": those floe runs today).
func Lookup(names string) ([]Query, error) {
	switch strings.TrimSpace(names) {
	case "", "all":
		return Queries(), nil
	case "runnable":
		var out []Query
		for _, q := range queries {
			if q.Runnable() {
				out = append(out, q)
			}
		}
		return out, nil
	}
	var out []Query
	var unknown []string
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, q := range queries {
			if q.Name == n {
				out = append(out, q)
				found = true
			}
		}
		if !found {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		var known []string
		for _, q := range queries {
			known = append(known, q.Name)
		}
		return nil, fmt.Errorf("unknown queries %s (known: %s, or all, runnable)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return out, nil
}

// sqlOnly are the queries floe expresses in Flink SQL only (queries/<name>.sql,
// no YAML spec), with their DuckDB references. Lookup does not list them (the
// harness runs YAML specs); LookupSQLOnly does.
var sqlOnly = map[string]Query{
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

// LookupSQLOnly returns the query named name that floe runs only from its
// Flink SQL (q9, q16, q20), and whether there is one.
func LookupSQLOnly(name string) (Query, bool) {
	q, ok := sqlOnly[strings.TrimSpace(name)]
	return q, ok
}
