--
-- Generating Snowflake IDs in one backend (layout 41/5/5/12, whatever the
-- server's identity: layout.sql checks a known one).  Raw IDs are never
-- shown: only facts about them.
--
SELECT idgen_stats_reset();
SELECT kind, ids, errors FROM idgen_stats;

CREATE TEMP TABLE ids AS
    SELECT g, idgen_snowflake() AS id, clock_timestamp() AS after
    FROM generate_series(1, 200000) g;

-- Unique, strictly increasing in generation order, all carrying this
-- server's identity, gene 0, and a time within the drift bound of the
-- clock read just after each one.
SELECT count(*) AS n, count(DISTINCT id) AS distinct_ids FROM ids;
SELECT count(*) FILTER (WHERE id <= prev) AS not_increasing
FROM (SELECT id, lag(id) OVER (ORDER BY g) AS prev FROM ids) s;
SELECT count(*) FILTER (WHERE (d.datacenter_id, d.worker_id) <> (i.datacenter_id, i.worker_id) OR d.gene <> 0)
         AS wrong_identity,
       count(*) FILTER (WHERE d.ts > date_trunc('milliseconds', ids.after) + interval '100 ms') AS ahead_of_drift,
       count(*) FILTER (WHERE d.ts < date_trunc('milliseconds', ids.after) - interval '10 s') AS far_behind
FROM ids, LATERAL idgen_snowflake_decode(ids.id) d, idgen_info() i;
SELECT count(*) FILTER (WHERE sequence > 4095) AS sequence_overflow
FROM ids, LATERAL idgen_snowflake_decode(ids.id) d;

-- The explicit-gene form with gene_bits = 0 accepts only gene 0.
SELECT idgen_snowflake(0) > max(id) AS gene0_after_all FROM ids;
SELECT idgen_gene(idgen_snowflake(0)) AS gene;

-- Why routing by id % n is wrong: at a low rate every ID is the first of its
-- millisecond, sequence 0, so id % 16 sends every row to shard 0.
-- (The sleep comes first in the target list, which is evaluated in order.)
SELECT count(DISTINCT id % 16) AS shards_used, min(id % 16) AS shard
FROM (SELECT pg_sleep(0.002), idgen_snowflake() AS id FROM generate_series(1, 20)) s;

-- A DEFAULT on a primary key.
CREATE TABLE users (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), name text);
INSERT INTO users (name) SELECT 'user ' || g FROM generate_series(1, 1000) g;
SELECT count(*), count(DISTINCT id), min(id) > 0 AS positive FROM users;

-- Range scan by time with idgen_snowflake_min.
SELECT count(*) = 1000 AS all_in_range
FROM users
WHERE id >= idgen_snowflake_min(now() - interval '1 minute')
  AND id <  idgen_snowflake_min(now() + interval '1 minute');
SELECT count(*) AS none_in_past_hour
FROM users
WHERE id >= idgen_snowflake_min(now() - interval '2 hours')
  AND id <  idgen_snowflake_min(now() - interval '1 hour');
-- Bounds are exact: min(t) <= every ID generated at or after t.
SELECT bool_and(id >= idgen_snowflake_min(idgen_snowflake_time(id))) AS lower_bound,
       bool_and(id <  idgen_snowflake_min(idgen_snowflake_time(id) + interval '1 ms')) AS upper_bound
FROM ids;

-- A parallel query calls the generator in its workers: still unique.
CREATE TABLE big AS SELECT g FROM generate_series(1, 200000) g;
ANALYZE big;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT idgen_snowflake() FROM big;
CREATE TEMP TABLE par AS SELECT idgen_snowflake() AS id FROM big;
SELECT count(*), count(DISTINCT id) FROM par;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

-- Statistics counted every ID above.
SELECT kind, ids >= 200000 + 1 + 1 + 1000 + 200000 AS counted, errors,
       stats_reset <= now() AS reset_recorded
FROM idgen_stats WHERE kind = 'snowflake';
SELECT idgen_stats_reset();
SELECT ids, borrowed_ms, waits, wait_time_ms, errors FROM idgen_stats;

-- idgen_snowflake_row() without gene bits: every gene is 0, and a width
-- above idgen.gene_bits (0 here) is refused.
SELECT r.id > 0 AS id, r.gene, idgen_snowflake_last() = r.id AS counted_as_last
FROM idgen_snowflake_row() r;
SELECT gene, id > 0 AS has_id FROM idgen_snowflake_row(0);
SELECT * FROM idgen_snowflake_row(1);
\echo :LAST_ERROR_SQLSTATE

DROP TABLE users, big;
