--
-- Per-key sequences: which keys take idgen.seq_default_ttl, and the limit
-- on the keys a role creates by using them (idgen.seq_max_keys_per_role).
--
SELECT current_user AS regress_superuser \gset

-- idgen.seq_default_ttl is 0 (off) or at least a second: a shorter value
-- is refused and changes nothing (it used to be rounded to 0, turning the
-- setting off without a word).
SET idgen.seq_default_ttl = '2d';
SHOW idgen.seq_default_ttl;
SET idgen.seq_default_ttl = '500ms';
\echo :LAST_ERROR_SQLSTATE
SHOW idgen.seq_default_ttl;
SET idgen.seq_default_ttl = '999ms';
\echo :LAST_ERROR_SQLSTATE
SET idgen.seq_default_ttl = 0;
SHOW idgen.seq_default_ttl;
SET idgen.seq_default_ttl = '1s';
SHOW idgen.seq_default_ttl;
SET idgen.seq_default_ttl = '1500ms';
SHOW idgen.seq_default_ttl;

-- One rule: the default ttl is taken by keys that spring into existence on
-- first use (idgen_seq_next, both forms), never by keys an administrative
-- function creates (set, set_if_absent, configure), which have a ttl only
-- when idgen_seq_configure gives them one.
SET idgen.seq_default_ttl = '2d';
SELECT idgen_seq_next('dt:next');
SELECT count(*) AS batch FROM idgen_seq_next('dt:batch', 3);
SELECT idgen_seq_set('dt:set', 10);
SELECT idgen_seq_set_if_absent('dt:baseline', 41000);
SELECT idgen_seq_configure('dt:configured', step => 2);
SELECT idgen_seq_configure('dt:configured-ttl', ttl => '1 hour');
SELECT key, ttl, expires_at IS NULL AS never_expires
FROM idgen_seq_keys WHERE key LIKE 'dt:%' ORDER BY key;
-- A key whose ttl passed is forgotten: used again it is created again by
-- use, and takes the default; set again by an administrator, it does not.
SELECT idgen_seq_configure('dt:revived-by-use', ttl => '100 ms'),
       idgen_seq_configure('dt:revived-by-admin', ttl => '100 ms');
SELECT pg_sleep(0.2);
SELECT idgen_seq_next('dt:revived-by-use') AS restarted,
       idgen_seq_set_if_absent('dt:revived-by-admin', 500) AS rebased;
SELECT key, ttl FROM idgen_seq_keys WHERE key LIKE 'dt:revived%' ORDER BY key;
-- What it means: with a default of 1 s, a baseline set by the administrator
-- is still there after a second unused; a key made by use is forgotten.
SET idgen.seq_default_ttl = '1s';
SELECT idgen_seq_set_if_absent('dt:short-baseline', 41000),
       idgen_seq_next('dt:short-next');
SELECT pg_sleep(1.2);
SELECT idgen_seq_current('dt:short-baseline') AS baseline_kept,
       idgen_seq_current('dt:short-next') IS NULL AS used_key_forgotten;
RESET idgen.seq_default_ttl;
SELECT count(*) > 0 AS dropped FROM (SELECT idgen_seq_drop(key) FROM idgen_seq_keys WHERE key LIKE 'dt:%') d;

-- idgen.seq_max_keys_per_role: idgen_seq_next does not create a key for a
-- role that has that many live keys (54000, nothing created); its existing
-- keys go on.  Set for the role with ALTER ROLE, by a superuser; the role
-- cannot change it.  The role logs in (\c) as a client would, with the
-- password of the test's own connection (PGPASSWORD, as pg_virtualenv sets
-- it for pg_buildext installcheck), if it has one.
\set regress_password ''
\getenv regress_password PGPASSWORD
SELECT :'regress_password' = '' AS no_password \gset
\if :no_password
CREATE ROLE regress_idgen_limit_app LOGIN;
\else
CREATE ROLE regress_idgen_limit_app LOGIN PASSWORD :'regress_password';
\endif
GRANT EXECUTE ON FUNCTION idgen_seq_next(text), idgen_seq_next(text, bigint), idgen_seq_current(text)
    TO regress_idgen_limit_app;
ALTER ROLE regress_idgen_limit_app SET idgen.seq_max_keys_per_role = 3;
\c - regress_idgen_limit_app
SHOW idgen.seq_max_keys_per_role;
SELECT idgen_seq_next('lim:1'), idgen_seq_next('lim:2'), idgen_seq_next('lim:3');
SELECT idgen_seq_next('lim:4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_seq_next('lim:4', 5);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_next('lim:1') AS existing_key_goes_on, idgen_seq_current('lim:4') IS NULL AS not_created;
SET idgen.seq_max_keys_per_role = 0;
\echo :LAST_ERROR_SQLSTATE
\c - :regress_superuser
SELECT count(*) AS lim4_rows FROM idgen_seq WHERE key = 'lim:4';
SELECT key, created_by FROM idgen_seq_keys WHERE key LIKE 'lim:%' ORDER BY key;
-- A key whose ttl has passed does not count (purged or not).
SELECT idgen_seq_configure('lim:1', ttl => '100 ms');
SELECT pg_sleep(0.2);
\c - regress_idgen_limit_app
SELECT idgen_seq_next('lim:4') AS after_one_expired;
SELECT idgen_seq_next('lim:5');
\echo :LAST_ERROR_SQLSTATE
\c - :regress_superuser
-- A key the administrator drops makes room at once.
SELECT idgen_seq_drop('lim:2');
\c - regress_idgen_limit_app
SELECT idgen_seq_next('lim:5') AS after_one_dropped;
SELECT idgen_seq_next('lim:6');
\echo :LAST_ERROR_SQLSTATE
\c - :regress_superuser
-- The administrative functions are not limited: the administrator decides.
-- Here a role granted them, with a limit of 3, creates a key by use and
-- three with them; using a new key is then refused: they count.
CREATE ROLE regress_idgen_limit_admin;
GRANT EXECUTE ON FUNCTION idgen_seq_next(text), idgen_seq_set(text, bigint),
    idgen_seq_set_if_absent(text, bigint), idgen_seq_configure(text, bigint, bigint, interval, bigint, bigint, bigint, boolean, bigint),
    idgen_seq_drop(text) TO regress_idgen_limit_admin;
SET idgen.seq_max_keys_per_role = 3;
SET ROLE regress_idgen_limit_admin;
SELECT idgen_seq_next('lim:admin-next');
SELECT idgen_seq_set('lim:admin-set', 5), idgen_seq_set_if_absent('lim:admin-baseline', 41000),
       idgen_seq_configure('lim:admin-configured', step => 2);
SELECT idgen_seq_next('lim:admin-set') AS existing_key_goes_on;
SELECT idgen_seq_next('lim:admin-next-2');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET idgen.seq_max_keys_per_role;
SELECT key, created_by FROM idgen_seq_keys WHERE key LIKE 'lim:admin%' ORDER BY key;
SELECT count(*) AS dropped FROM (SELECT idgen_seq_drop(key) FROM idgen_seq_keys WHERE key LIKE 'lim:%') d;
REVOKE ALL ON FUNCTION idgen_seq_next(text), idgen_seq_next(text, bigint), idgen_seq_current(text)
    FROM regress_idgen_limit_app;
DROP ROLE regress_idgen_limit_app;
REVOKE ALL ON FUNCTION idgen_seq_next(text), idgen_seq_set(text, bigint),
    idgen_seq_set_if_absent(text, bigint), idgen_seq_configure(text, bigint, bigint, interval, bigint, bigint, bigint, boolean, bigint),
    idgen_seq_drop(text) FROM regress_idgen_limit_admin;
DROP ROLE regress_idgen_limit_admin;

-- The administrative functions bound their waits for a key's row with
-- lock_timeout (5 s while it is 0), set for the call only: after a call
-- that succeeds, one that fails, and one whose error a PL/pgSQL block
-- catches, the session's lock_timeout is what it was.
SELECT idgen_seq_configure('lt:capped', max_value => 10);
SHOW lock_timeout;
SELECT idgen_seq_set('lt:capped', 11);
\echo :LAST_ERROR_SQLSTATE
SHOW lock_timeout;
DO $$
BEGIN
    PERFORM idgen_seq_set('lt:capped', 11);
EXCEPTION WHEN numeric_value_out_of_range THEN
    RAISE NOTICE 'caught: %', SQLERRM;
END $$;
SHOW lock_timeout;
BEGIN;
SELECT idgen_seq_set('lt:capped', 5);
SHOW lock_timeout;
SET LOCAL lock_timeout = '3s';
SELECT idgen_seq_drop('lt:capped');
SHOW lock_timeout;
COMMIT;
SHOW lock_timeout;
