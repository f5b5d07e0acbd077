--
-- Cached per-key sequences (cache => n).  Their segments are reserved by
-- this database's idgen sequencer, which the first cached key asks the
-- idgen sequencer launcher for (configuring one does): wait for it first.
--
SELECT idgen_seq_configure('cache:a', cache => 5);
\i test/wait_sequencer.sql
SELECT count(*) AS worker_here FROM pg_stat_activity
WHERE backend_type = 'idgen sequencer' AND datname = current_database();

-- Values come from shared memory, in order, each once.
SELECT string_agg(idgen_seq_next('cache:a')::text, ',') AS served FROM generate_series(1, 12);
-- The table is ahead of every value served: it holds the reserved ranges.
SELECT value >= 12 AS reserved_ahead, cache FROM idgen_seq WHERE key = 'cache:a';
SELECT key, cache, served, fetches >= 2 AS fetched_segments FROM idgen_seq_cache;
-- idgen_seq_keys says how each key is served in this database.
SELECT idgen_seq_next('cache:plain') AS plain;
SELECT key, cache, served FROM idgen_seq_keys WHERE key IN ('cache:a', 'cache:plain') ORDER BY key;
-- Not transactional: a rollback does not give a value back.
BEGIN;
SELECT idgen_seq_next('cache:a') AS in_rolled_back_transaction;
ROLLBACK;
SELECT idgen_seq_next('cache:a') AS after_rollback;
-- A batch: the next values, in order, across segments.
SELECT array_agg(v) AS batch FROM idgen_seq_next('cache:a', 7) v;
-- The options keep their meaning (seq_options has each of them in both
-- modes): here a cycle from max_value to min_value.
SELECT idgen_seq_configure('cache:w', step => 2, max_value => 7, cycle => true, cache => 3);
SELECT string_agg(idgen_seq_next('cache:w')::text, ',') AS wrapped FROM generate_series(1, 8);

-- set, drop and reconfiguration forget the cached segments at once.
SELECT idgen_seq_set('cache:a', 100);
SELECT idgen_seq_next('cache:a') AS after_set;
SELECT count(*) AS cached_after_set FROM idgen_seq_cache WHERE key = 'cache:a';
-- Back to the transactional mode: it goes on above every reserved value.
-- (The row's value is read once the key is transactional: until then the
-- worker may still reserve a segment it was asked to prefetch.)
SELECT idgen_seq_configure('cache:a', cache => 0);
SELECT value AS reserved FROM idgen_seq WHERE key = 'cache:a' \gset
SELECT idgen_seq_next('cache:a') = :reserved + 1 AS transactional_after_reserved;
SELECT count(*) AS cached_after_mode_switch FROM idgen_seq_cache WHERE key = 'cache:a';
-- And cached again: above that.
SELECT idgen_seq_configure('cache:a', cache => 5);
SELECT idgen_seq_next('cache:a') = :reserved + 2 AS cached_again;
SELECT idgen_seq_drop('cache:a') AS dropped;
SELECT idgen_seq_next('cache:a') AS restarts_transactional;
SELECT count(*) AS cached_after_drop FROM idgen_seq_cache WHERE key = 'cache:a';

-- A transaction that configured the key holds its row: it is served from
-- the table until it commits (the sequencer could not reserve meanwhile).
BEGIN;
SELECT idgen_seq_configure('cache:t', cache => 5);
SELECT idgen_seq_next('cache:t') AS first, idgen_seq_next('cache:t') AS second;
COMMIT;
SELECT idgen_seq_next('cache:t') AS cached_after_commit;

-- The end of the bigint range: the values that fit, then 2200H.
SELECT idgen_seq_configure('cache:e', cache => 5);
SELECT idgen_seq_set('cache:e', 9223372036854775800);
SELECT string_agg(idgen_seq_next('cache:e')::text, ',') AS last_values FROM generate_series(1, 7);
SELECT idgen_seq_next('cache:e');
\echo :LAST_ERROR_SQLSTATE

-- Bad cache settings: an error, and nothing changes.
SELECT idgen_seq_configure('cache:w', cache => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('cache:w', cache => 1000001);
\echo :LAST_ERROR_SQLSTATE
-- (NULL, like an omitted argument, keeps the setting.)
SELECT idgen_seq_configure('cache:w', cache => NULL);
SELECT key, step, max_value, cycle, cache FROM idgen_seq_keys WHERE key = 'cache:w';
-- The view is not for PUBLIC; a role granted idgen_seq_next gets cached
-- values as any other caller.
CREATE ROLE regress_idgen_cache_user;
GRANT EXECUTE ON FUNCTION idgen_seq_next(text) TO regress_idgen_cache_user;
SET ROLE regress_idgen_cache_user;
SELECT * FROM idgen_seq_cache;
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_next('cache:w') AS user_next;
RESET ROLE;
REVOKE ALL ON FUNCTION idgen_seq_next(text) FROM regress_idgen_cache_user;
DROP ROLE regress_idgen_cache_user;
-- A read-only transaction gets no cached value either.
BEGIN READ ONLY;
SELECT idgen_seq_next('cache:w');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- A cached key whose last use is 'infinity' (a row restored or written by
-- hand) never expires: it is not taken for absent, and keeps its value.
SELECT idgen_seq_configure('cache:inf', ttl => '1 day', cache => 5);
SELECT idgen_seq_next('cache:inf') AS first;
-- (Once the next segment is reserved: reserving records a use.)
DO $$BEGIN
  FOR i IN 1 .. 1000 LOOP
    EXIT WHEN (SELECT next_ready FROM idgen_seq_cache() WHERE key = 'cache:inf');
    PERFORM pg_sleep(0.01);
  END LOOP;
END$$;
UPDATE idgen_seq SET last_used = 'infinity' WHERE key = 'cache:inf';
SELECT idgen_seq_set_if_absent('cache:inf', 99) AS taken_for_absent;
SELECT expires_at IS NULL AS never FROM idgen_seq_keys WHERE key = 'cache:inf';
SELECT idgen_seq_drop('cache:inf') AS dropped;

-- Dropping and creating the extension again forgets the cached segments of
-- the old table: the key starts again in the new one.
SELECT idgen_seq_next('cache:w') > 0 AS served_before_drop;
DROP EXTENSION idgen;
CREATE EXTENSION idgen;
SELECT idgen_seq_next('cache:w') AS new_table_starts_at_1;
SELECT count(*) AS cached_keys_of_the_new_table FROM idgen_seq_cache;
