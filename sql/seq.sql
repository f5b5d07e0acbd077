--
-- Per-key business sequences (transactional mode).
--

-- Keys spring into existence; values are step, 2 * step, ...
SELECT idgen_seq_next('conv:42') AS first, idgen_seq_next('conv:42') AS second,
       idgen_seq_next('conv:43') AS other_key;
SELECT idgen_seq_current('conv:42') AS current, idgen_seq_current('absent') IS NULL AS absent_is_null;

-- Seed 003's example: step 5, count 3 on a new key gives 5, 10, 15.
SELECT idgen_seq_configure('order', step => 5);
SELECT * FROM idgen_seq_next('order', 3);
-- A batch gives the same values as single calls, in order.
SELECT idgen_seq_configure('batch', step => 3);
SELECT array_agg(v) AS batch FROM idgen_seq_next('batch', 4) v;
SELECT idgen_seq_next('batch') AS single_after_batch;

-- max_value stops, as a sequence's MAXVALUE does (seq_options has every
-- option); cycle => true goes on from min_value.
SELECT idgen_seq_configure('wrap', step => 2, max_value => 7, cycle => true);
SELECT array_agg(v) AS wrapped FROM idgen_seq_next('wrap', 9) v;
SELECT idgen_seq_configure('wrap1', max_value => 3);
SELECT idgen_seq_next('wrap1'), idgen_seq_next('wrap1'), idgen_seq_next('wrap1');
SELECT idgen_seq_next('wrap1');
\echo :LAST_ERROR_SQLSTATE
-- Reconfiguring keeps the value and the options not given.
SELECT idgen_seq_configure('order', step => 10);
SELECT idgen_seq_next('order') AS after_reconfigure;
SELECT key, value, start, step, min_value, max_value, cycle, ttl FROM idgen_seq_keys ORDER BY key;

-- set / set_if_absent.
SELECT idgen_seq_set_if_absent('invoice:2026', 1000) AS initialised,
       idgen_seq_set_if_absent('invoice:2026', 5) AS again;
SELECT idgen_seq_next('invoice:2026') AS next_invoice;
SELECT idgen_seq_set('invoice:2026', 7);
SELECT idgen_seq_next('invoice:2026') AS after_set;
SELECT idgen_seq_set('fresh', 41);
SELECT idgen_seq_next('fresh') AS set_creates;

-- drop.
SELECT idgen_seq_drop('fresh') AS dropped, idgen_seq_drop('fresh') AS dropped_again;
SELECT idgen_seq_next('fresh') AS restarts;

-- Transactional: a rollback gives the value back.
BEGIN;
SELECT idgen_seq_next('tx') AS in_rolled_back_transaction;
ROLLBACK;
SELECT idgen_seq_next('tx') AS after_rollback;
BEGIN;
SELECT idgen_seq_next('tx');
SAVEPOINT s;
SELECT idgen_seq_next('tx');
ROLLBACK TO SAVEPOINT s;
SELECT idgen_seq_next('tx') AS after_savepoint_rollback;
COMMIT;

-- ttl: a key unused for its ttl is forgotten (value and options).
SELECT idgen_seq_configure('short', step => 4, ttl => '1 s');
SELECT idgen_seq_next('short'), idgen_seq_next('short');
SELECT pg_sleep(1.2);
SELECT idgen_seq_current('short') IS NULL AS expired,
       (SELECT count(*) FROM idgen_seq_keys WHERE key = 'short') AS listed;
SELECT idgen_seq_configure('short2', ttl => '1 s');
SELECT idgen_seq_next('short2');
SELECT pg_sleep(1.2);
SELECT idgen_seq_set_if_absent('short2', 9) AS expired_counts_as_absent;
SELECT idgen_seq_next('short') AS restarted_with_defaults;
SELECT idgen_seq_configure('gone', ttl => '200 ms');
SELECT pg_sleep(0.3);
SELECT idgen_seq_purge() AS purged;
SELECT count(*) AS gone_rows FROM idgen_seq WHERE key = 'gone';

-- Bad input: an error, and nothing changes.
SELECT idgen_seq_next(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_next('');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_next(repeat('x', 257));
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_next(repeat('x', 256)) AS key_of_256_bytes;
SELECT * FROM idgen_seq_next('batch', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_seq_next('batch', 1000001);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_seq_next('batch', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('batch', step => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('batch', step => 5, max_value => 4);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('batch', max_value => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('batch', ttl => '-1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_set('batch', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_set('batch', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_set(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT key, value, start, step, min_value, max_value, cycle, ttl FROM idgen_seq_keys WHERE key = 'batch';
-- A ttl is positive in every part (whether '-1 mon +32 days' is positive
-- depends on the month it is added to) and at most 100 years, so that the
-- expiry computed at every later use stays in the timestamp range.
SELECT idgen_seq_configure('batch', ttl => '-1 mon +32 days');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('batch', ttl => '1 day -1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('batch', ttl => '100 years 1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('batch', ttl => '290000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT key, ttl FROM idgen_seq_keys WHERE key = 'batch';
SELECT idgen_seq_configure('century', ttl => '100 years');
SELECT idgen_seq_next('century') AS ttl_of_100_years;
-- An expiry beyond the timestamp range (a row written by hand, or restored)
-- is "never": the key, the view and the purge all keep working.
UPDATE idgen_seq SET ttl = '290000 years' WHERE key = 'century';
SELECT idgen_seq_next('century') AS never_expires, idgen_seq_current('century') AS current;
SELECT key, expires_at IS NULL AS never FROM idgen_seq_keys WHERE key = 'century';
SELECT idgen_seq_purge() >= 0 AS purge_runs;
SELECT idgen_seq_drop('century') AS dropped;
SELECT idgen_expiry('294276-12-30 00:00+00', '1 day') IS NULL AS beyond_the_range,
       idgen_expiry('2026-01-31 12:00+00', '1 mon') = '2026-02-28 12:00+00' AS one_month,
       idgen_expiry(now(), NULL) IS NULL AS no_ttl;
-- idgen_seq_set refuses a value above the key's max_value; a batch that
-- would cross max_value fails whole; with cycle it wraps in its middle,
-- exactly as single calls would.
SELECT idgen_seq_configure('capped', max_value => 10);
SELECT idgen_seq_set('capped', 11);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_current('capped') IS NULL AS nothing_handed_out;
SELECT idgen_seq_set('capped', 8);
SELECT array_agg(v) AS crosses_max FROM idgen_seq_next('capped', 3) v;
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_current('capped') AS unchanged;
SELECT idgen_seq_configure('capped', cycle => true);
SELECT array_agg(v) AS wraps_mid_batch FROM idgen_seq_next('capped', 3) v;
-- The end of the bigint range without max_value.
SELECT idgen_seq_set('edge', 9223372036854775806);
SELECT idgen_seq_next('edge');
SELECT idgen_seq_next('edge');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_current('edge') AS unchanged;

-- Privileges: every function only for roles granted it (using a key
-- creates it); the table for nobody.  A role without grants cannot create
-- keys, nor read or advance existing ones.
CREATE ROLE regress_idgen_seq_nobody;
SET ROLE regress_idgen_seq_nobody;
SELECT idgen_seq_next('flood:1');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_seq_next('flood:2', 10);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_current('conv:42');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) AS flood_keys FROM idgen_seq WHERE key LIKE 'flood:%';
DROP ROLE regress_idgen_seq_nobody;
CREATE ROLE regress_idgen_seq_user;
CREATE ROLE regress_idgen_seq_admin;
GRANT EXECUTE ON FUNCTION idgen_seq_next(text), idgen_seq_next(text, bigint), idgen_seq_current(text)
    TO regress_idgen_seq_user, regress_idgen_seq_admin;
GRANT EXECUTE ON FUNCTION idgen_seq_set(text, bigint), idgen_seq_drop(text) TO regress_idgen_seq_admin;
SET ROLE regress_idgen_seq_user;
SELECT idgen_seq_next('made-by-user') AS user_creates;
SELECT idgen_seq_next('conv:42') AS user_next, idgen_seq_current('conv:42') AS user_current;
SELECT count(*) AS user_batch FROM idgen_seq_next('conv:42', 10);
SELECT idgen_seq_set('conv:42', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_set('conv:42', 1, false);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_set_if_absent('conv:99', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('conv:42', step => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_drop('conv:42');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_purge();
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_seq_keys;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_seq;
\echo :LAST_ERROR_SQLSTATE
UPDATE idgen_seq SET value = 0;
\echo :LAST_ERROR_SQLSTATE
SET ROLE regress_idgen_seq_admin;
SELECT idgen_seq_set('conv:42', 100);
SELECT idgen_seq_next('conv:42') AS after_admin_set;
SELECT idgen_seq_drop('conv:43') AS admin_drop;
RESET ROLE;
-- The key list shows who created each key.
SELECT key, created_by = 'regress_idgen_seq_user' AS by_user, created_by = current_user AS by_me
FROM idgen_seq_keys WHERE key IN ('made-by-user', 'conv:42') ORDER BY key;
-- A database-wide default ttl for keys created by use (off by default;
-- seq_limits has the rule); only a superuser sets it, so a role cannot
-- switch it off.
SET idgen.seq_default_ttl = '2d';
SELECT idgen_seq_next('with-default-ttl');
SELECT idgen_seq_configure('configured-without-ttl');
SELECT key, ttl FROM idgen_seq_keys WHERE key IN ('with-default-ttl', 'configured-without-ttl', 'made-by-user') ORDER BY key;
RESET idgen.seq_default_ttl;
SET ROLE regress_idgen_seq_user;
SET idgen.seq_default_ttl = 0;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- search_path cannot change what the functions run.
CREATE SCHEMA evil;
CREATE TABLE evil.idgen_seq (key text PRIMARY KEY, value bigint);
SET search_path = evil, public;
SELECT public.idgen_seq_next('conv:42') AS with_other_search_path;
RESET search_path;
SELECT count(*) AS evil_rows FROM evil.idgen_seq;
DROP SCHEMA evil CASCADE;
REVOKE ALL ON FUNCTION idgen_seq_next(text), idgen_seq_next(text, bigint), idgen_seq_current(text)
    FROM regress_idgen_seq_user, regress_idgen_seq_admin;
DROP ROLE regress_idgen_seq_user;
REVOKE ALL ON FUNCTION idgen_seq_set(text, bigint), idgen_seq_drop(text) FROM regress_idgen_seq_admin;
DROP ROLE regress_idgen_seq_admin;

-- Writes go to the table directly: a read-only transaction refuses them, and
-- so does a table altered under idgen's feet.
BEGIN READ ONLY;
SELECT idgen_seq_next('conv:42');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT idgen_seq_drop('conv:42');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
CREATE FUNCTION keep_value() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER keep_value BEFORE UPDATE ON idgen_seq FOR EACH ROW EXECUTE FUNCTION keep_value();
SELECT idgen_seq_next('conv:42');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER keep_value ON idgen_seq;
DROP FUNCTION keep_value();
SELECT idgen_seq_next('conv:42') AS after_trigger_dropped;

-- A transaction writes a key's row at its first call and once more before
-- it commits, however many calls it makes (seq_held.c): 20 000 calls over
-- 2 000 new keys are 2 000 inserts and 2 000 updates.  The inserts fill
-- their pages, so some of the updates are not HOT and add primary key
-- entries, at commit: every row must still be found, exactly once, by the
-- index.
CREATE EXTENSION amcheck;
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE upd_before AS
    SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'idgen_seq';
BEGIN;
SELECT count(*) AS calls FROM (SELECT idgen_seq_next('bulk:' || (i % 2000)) FROM generate_series(1, 20000) i) s;
COMMIT;
SELECT pg_stat_force_next_flush();
SELECT s.n_tup_ins - b.n_tup_ins AS inserts, s.n_tup_upd - b.n_tup_upd AS updates,
       (s.n_tup_upd - b.n_tup_upd) - (s.n_tup_hot_upd - b.n_tup_hot_upd) > 0 AS some_not_hot
FROM pg_stat_user_tables s, upd_before b WHERE s.relname = 'idgen_seq';
SELECT bt_index_parent_check('idgen_seq_pkey', heapallindexed => true);
SELECT min(idgen_seq_current('bulk:' || i)) AS min_value, max(idgen_seq_current('bulk:' || i)) AS max_value
FROM generate_series(0, 1999) i;
SET enable_seqscan = off;
SELECT count(*) AS rows_by_index FROM idgen_seq WHERE key LIKE 'bulk:%' AND key >= 'bulk:' AND key < 'bulk;';
RESET enable_seqscan;
SELECT idgen_seq_next('bulk:7') AS after_bulk;
-- An index added to the table (or rebuilt concurrently) is kept up to date:
-- with the value indexed, no update is HOT.
CREATE INDEX idgen_seq_value_idx ON idgen_seq (value);
SELECT count(*) AS calls FROM (SELECT idgen_seq_next('bulk:' || (i % 50)) FROM generate_series(1, 1000) i) s;
REINDEX INDEX CONCURRENTLY idgen_seq_pkey;
SELECT bt_index_check('idgen_seq_value_idx', heapallindexed => true) AS value_index_ok,
       bt_index_check('idgen_seq_pkey', heapallindexed => true) AS pkey_ok;
SET enable_seqscan = off;
SELECT key, value FROM idgen_seq WHERE value = 31 ORDER BY key LIMIT 3;
RESET enable_seqscan;
DROP INDEX idgen_seq_value_idx;
DROP EXTENSION amcheck;
