-- The sample pipeline of the README in Flink SQL: the twin of clicks.yaml
-- (same plan, same state, same outputs). Run: floe run testdata/pipelines/clicks.sql
-- Relative paths resolve against this file's directory.
SET 'pipeline.name' = 'clicks-per-user';
SET 'state.url' = '../../.floe';
SET 'state.parallelism' = '2';
SET 'state.max-parallelism' = '128';
SET 'state.retain-epochs' = '10';
SET 'table.exec.source.idle-timeout' = '1m';
SET 'table.exec.emit.allow-lateness' = '30s';

CREATE TABLE events (
  event_time TIMESTAMP(3),
  user_id    STRING,
  page       STRING,
  bytes      BIGINT,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH (
  'connector' = 'filesystem',
  'path' = '../events',
  'format' = 'json',
  'source.max-files-per-epoch' = '2'
);

CREATE TABLE clicks (
  user_id      STRING,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  clicks       BIGINT,
  total_bytes  BIGINT
) WITH (
  'connector' = 'filesystem',
  'path' = '../../out/clicks',
  'format' = 'parquet'
);

INSERT INTO clicks
SELECT user_id, window_start, window_end, COUNT(*), SUM(bytes)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '1' MINUTE))
WHERE bytes > 0
GROUP BY user_id, window_start, window_end;
