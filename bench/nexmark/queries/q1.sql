-- Nexmark q1, currency conversion, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
SET 'pipeline.name' = 'nexmark-sql-q1';
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

CREATE TABLE nexmark_q1 (
  auction BIGINT,
  bidder BIGINT,
  price DECIMAL(23, 3),
  dateTime TIMESTAMP(3),
  extra VARCHAR
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

INSERT INTO nexmark_q1
SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid;
