-- Nexmark q6, average selling price by seller, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
SET 'pipeline.name' = 'nexmark-sql-q6';
SET 'state.url' = '${STATE}';
SET 'state.parallelism' = '${PARALLELISM}';
-- Bound the state of the regular join (Flink: processing-time TTL; floe: event time, docs/sql.md).
SET 'table.exec.state.ttl' = '24 h';

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

CREATE TABLE nexmark_q6 (
  seller VARCHAR,
  avg_price BIGINT
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

-- Refused: the TTL bounds the join, but the GROUP BY without a window is an updating
-- aggregate whose state never expires (floe's answers are append-only).
INSERT INTO nexmark_q6
SELECT
    Q.seller,
    AVG(Q.final) OVER
        (PARTITION BY Q.seller ORDER BY Q.dateTime ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
FROM (
    SELECT MAX(B.price) AS final, A.seller, B.dateTime
    FROM auction AS A, bid AS B
    WHERE A.id = B.auction and B.dateTime between A.dateTime and A.expires
    GROUP BY A.id, A.seller
) AS Q;
