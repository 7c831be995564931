-- Nexmark q5, hot items, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
-- Deviation: the output keeps starttime (the window), as the DuckDB reference does.
SET 'pipeline.name' = 'nexmark-sql-q5';
SET 'state.url' = '${STATE}';
SET 'state.parallelism' = '${PARALLELISM}';

CREATE TABLE bid (
  auction  BIGINT,
  bidder   BIGINT,
  price    BIGINT,
  channel  VARCHAR,
  url      VARCHAR,
  dateTime TIMESTAMP(3),
  extra    VARCHAR,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '${MAX_DELAY_MS}' MILLISECOND
) WITH ('connector' = 'filesystem', 'path' = '${BIDS}', 'format' = '${FORMAT}',
        'source.pattern' = '*.${FORMAT}', 'source.max-files-per-epoch' = '${MAX_FILES}');

CREATE TABLE nexmark_q5 (
  auction BIGINT,
  num BIGINT,
  starttime TIMESTAMP(3)
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

INSERT INTO nexmark_q5
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime
 FROM (
   SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
   FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
   GROUP BY auction, window_start, window_end
 ) AS AuctionBids
 JOIN (
   SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
   FROM (
     SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
     FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
     GROUP BY auction, window_start, window_end
     ) AS CountBids
   GROUP BY CountBids.starttime, CountBids.endtime
 ) AS MaxBids
 ON AuctionBids.starttime = MaxBids.starttime AND
    AuctionBids.endtime = MaxBids.endtime AND
    AuctionBids.num >= MaxBids.maxn;
