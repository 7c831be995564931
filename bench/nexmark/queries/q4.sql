-- Nexmark q4, average price per category, in Flink SQL as the nexmark/nexmark suite writes it, over
-- file tables. Placeholders (dollar-brace NAME) are filled in by the harness.
SET 'pipeline.name' = 'nexmark-sql-q4';
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

CREATE TABLE nexmark_q4 (
  id BIGINT,
  final BIGINT
) WITH ('connector' = 'filesystem', 'path' = '${SINK}', 'format' = 'parquet');

-- Refused: the TTL bounds the join, but the GROUP BY without a window is an updating
-- aggregate whose state never expires (floe's answers are append-only).
INSERT INTO nexmark_q4
SELECT Q.category, AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
