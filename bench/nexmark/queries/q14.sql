-- Nexmark q14, calculation, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
SET 'pipeline.name' = 'nexmark-sql-q14';
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

CREATE TABLE nexmark_q14 (
  auction BIGINT,
  bidder BIGINT,
  price DECIMAL(23, 3),
  bidTimeType VARCHAR,
  dateTime TIMESTAMP(3),
  extra VARCHAR,
  c_counts BIGINT
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

-- Nexmark's count_char(extra, 'c') UDF is written with built-ins.
INSERT INTO nexmark_q14
SELECT
    auction,
    bidder,
    0.908 * price as price,
    CASE
        WHEN HOUR(dateTime) >= 8 AND HOUR(dateTime) <= 18 THEN 'dayTime'
        WHEN HOUR(dateTime) <= 6 OR HOUR(dateTime) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bidTimeType,
    dateTime,
    extra,
    CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
