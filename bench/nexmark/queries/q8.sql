-- Nexmark q8, monitor new users, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
-- Deviation: the sink's third column is named starttime (Nexmark: stime), as the DuckDB reference names it.
SET 'pipeline.name' = 'nexmark-sql-q8';
SET 'state.url' = '${STATE}';
SET 'state.parallelism' = '${PARALLELISM}';

CREATE TABLE person (
  id           BIGINT,
  name         VARCHAR,
  emailAddress VARCHAR,
  creditCard   VARCHAR,
  city         VARCHAR,
  state        VARCHAR,
  dateTime     TIMESTAMP(3),
  extra        VARCHAR,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '${MAX_DELAY_MS}' MILLISECOND
) WITH ('connector' = 'filesystem', 'path' = '${PERSONS}', 'format' = '${FORMAT}',
        'source.pattern' = '*.${FORMAT}', 'source.max-files-per-epoch' = '${MAX_FILES}');

CREATE TABLE auction (
  id          BIGINT,
  itemName    VARCHAR,
  description VARCHAR,
  initialBid  BIGINT,
  reserve     BIGINT,
  dateTime    TIMESTAMP(3),
  expires     TIMESTAMP(3),
  seller      BIGINT,
  category    BIGINT,
  extra       VARCHAR,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '${MAX_DELAY_MS}' MILLISECOND
) WITH ('connector' = 'filesystem', 'path' = '${AUCTIONS}', 'format' = '${FORMAT}',
        'source.pattern' = '*.${FORMAT}', 'source.max-files-per-epoch' = '${MAX_FILES}');

CREATE TABLE nexmark_q8 (
  id BIGINT,
  name VARCHAR,
  starttime TIMESTAMP(3)
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

INSERT INTO nexmark_q8
SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name,
         window_start AS starttime,
         window_end AS endtime
  FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) P
JOIN (
  SELECT seller,
         window_start AS starttime,
         window_end AS endtime
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
