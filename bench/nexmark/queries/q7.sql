-- Nexmark q7, highest bid, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
SET 'pipeline.name' = 'nexmark-sql-q7';
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

CREATE TABLE nexmark_q7 (
  auction BIGINT,
  price BIGINT,
  bidder BIGINT,
  dateTime TIMESTAMP(3),
  extra VARCHAR
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

INSERT INTO nexmark_q7
SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
from bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end as dateTime
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.dateTime BETWEEN B1.dateTime  - INTERVAL '10' SECOND AND B1.dateTime;
