-- Nexmark q22, get URL directories, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
SET 'pipeline.name' = 'nexmark-sql-q22';
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

CREATE TABLE nexmark_q22 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  channel VARCHAR,
  dir1 VARCHAR,
  dir2 VARCHAR,
  dir3 VARCHAR
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

INSERT INTO nexmark_q22
SELECT
    auction, bidder, price, channel,
    SPLIT_INDEX(url, '/', 3) as dir1,
    SPLIT_INDEX(url, '/', 4) as dir2,
    SPLIT_INDEX(url, '/', 5) as dir3 FROM bid;
