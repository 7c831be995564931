-- Nexmark q13, bounded side input join, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
SET 'pipeline.name' = 'nexmark-sql-q13';
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

CREATE TABLE side_input (
  key   BIGINT,
  `value` VARCHAR
) WITH ('connector' = 'filesystem', 'path' = '${SIDE_INPUT}', 'format' = '${FORMAT}', 'lookup.pattern' = '*.${FORMAT}');

CREATE TABLE nexmark_q13 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  dateTime TIMESTAMP(3),
  `value` VARCHAR
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

INSERT INTO nexmark_q13
SELECT
    B.auction,
    B.bidder,
    B.price,
    B.dateTime,
    S.`value`
FROM bid B
JOIN side_input FOR SYSTEM_TIME AS OF B.dateTime AS S
ON mod(B.auction, ${SIDE_ROWS}) = S.key;
