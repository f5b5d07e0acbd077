--
-- Every function an application calls with arguments resolves for the
-- parameters drivers send: untyped ones (the extended protocol's $1 of
-- type unknown: node-postgres, pgx, asyncpg, JDBC's setObject(null)) and
-- integers of every width (psycopg 3 sends a small Python int as smallint).
-- PREPARE resolves the call as the server resolves a driver's Parse
-- message; the prepared statements then show the types the parameters
-- took, and a few are executed.
--
\set VERBOSITY default

-- No name has two signatures that a call with the same number of
-- arguments could match: with defaults, argument counts never overlap.
SELECT a.oid::regprocedure AS one, b.oid::regprocedure AS other
FROM pg_proc a
JOIN pg_proc b ON a.proname = b.proname AND a.pronamespace = b.pronamespace AND a.oid < b.oid
JOIN pg_depend d ON d.objid = a.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idgen'
WHERE a.pronargs - a.pronargdefaults <= b.pronargs
  AND b.pronargs - b.pronargdefaults <= a.pronargs;

-- No integer argument narrower than bigint: an int argument refuses a
-- bigint (42883), where a bigint one takes every width.
SELECT p.oid::regprocedure AS narrow
FROM pg_proc p
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idgen'
WHERE EXISTS (SELECT FROM unnest(p.proargtypes) t WHERE t IN ('int2'::regtype, 'int4'::regtype));

-- Every call, its parameters untyped.
CREATE TEMP TABLE calls (n int PRIMARY KEY, call text NOT NULL);
INSERT INTO calls VALUES
 (1, 'idgen_snowflake($1)'),
 (2, 'idgen_snowflake_row($1)'),
 (3, 'idgen_gene($1)'),
 (4, 'idgen_gene($1, $2)'),
 (5, 'idgen_snowflake_decode($1)'),
 (6, 'idgen_snowflake_time($1)'),
 (7, 'idgen_snowflake_min($1)'),
 (8, 'idgen_snowflake_compose($1, $2, $3)'),
 (9, 'idgen_snowflake_compose($1, $2, $3, $4, $5)'),
 (10, 'idgen_snowflake_debug($1)'),
 (11, 'idgen_convert_column($1, $2)'),
 (12, 'idgen_uuid7($1)'),
 (13, 'idgen_uuid7_shifted($1)'),
 (14, 'idgen_uuid_version($1)'),
 (15, 'idgen_uuid7_min($1)'),
 (16, 'idgen_uuid7_time($1)'),
 (17, 'idgen_expiry($1, $2)'),
 (18, 'idgen_seq_next($1)'),
 (19, 'idgen_seq_next($1, $2)'),
 (20, 'idgen_seq_current($1)'),
 (21, 'idgen_seq_set($1, $2)'),
 (22, 'idgen_seq_set($1, $2, $3)'),
 (23, 'idgen_seq_set_if_absent($1, $2)'),
 (24, 'idgen_seq_configure($1, $2, $3, $4, $5, $6, $7, $8, $9)'),
 (25, 'idgen_seq_configure($1, cache => $2)'),
 (26, 'idgen_seq_drop($1)'),
 (27, 'idgen_seq_latest($1, $2, $3)'),
 (28, 'idgen_seq_served($1)'),
 (29, 'idgen_worker_acquire($1)'),
 (30, 'idgen_worker_acquire($1, $2, $3, $4)'),
 (31, 'idgen_worker_renew($1, $2)'),
 (32, 'idgen_worker_renew($1, $2, $3, $4)'),
 (33, 'idgen_worker_release($1, $2)'),
 (34, 'idgen_worker_release($1, $2, $3)'),
 (35, 'idgen_worker_reset_horizon($1, $2)'),
 (36, 'idgen_worker_reset_horizon($1, $2, $3)'),
 (37, 'idgen_server_lease($1, $2)'),
 (38, 'idgen_server_lease($1, $2, $3, $4, $5, $6)'),
 (39, 'idgen_public($1)'),
 (40, 'idgen_private($1)'),
 (41, 'idgen_public_bigint($1)'),
 (42, 'idgen_private_bigint($1)'),
 (43, 'idgen_private_bigint($1, $2)'),
 (44, 'idgen_public_retire($1)'),
 (45, 'idgen_speck64($1, $2)');
SELECT format('PREPARE untyped_%s AS SELECT %s', n, call) FROM calls ORDER BY n \gexec
SELECT c.n, c.call, p.parameter_types
FROM calls c LEFT JOIN pg_prepared_statements p ON p.name = 'untyped_' || c.n
ORDER BY c.n;
DEALLOCATE ALL;

-- Every integer argument, as smallint, int and bigint: $1 stands for it,
-- the other arguments are given as an application would.
CREATE TEMP TABLE int_calls (n int PRIMARY KEY, call text NOT NULL);
INSERT INTO int_calls VALUES
 (1, 'idgen_snowflake($1)'),
 (2, 'idgen_snowflake_row($1)'),
 (3, 'idgen_gene(12345, $1)'),
 (4, 'idgen_snowflake_decode($1)'),
 (5, 'idgen_snowflake_time($1)'),
 (6, 'idgen_snowflake_compose(now(), $1, $1, $1, $1)'),
 (7, 'idgen_snowflake_debug($1)'),
 (8, 'idgen_seq_next(''k'', $1)'),
 (9, 'idgen_seq_set(''k'', $1)'),
 (10, 'idgen_seq_set(''k'', $1, true)'),
 (11, 'idgen_seq_set_if_absent(''k'', $1)'),
 (12, 'idgen_seq_configure(''k'', $1, $1, NULL, $1, $1, $1, NULL, $1)'),
 (13, 'idgen_seq_served($1)'),
 (14, 'idgen_worker_acquire(''h'', ''30 s'', $1, false)'),
 (15, 'idgen_worker_renew($1, $1)'),
 (16, 'idgen_worker_release($1, $1)'),
 (17, 'idgen_worker_reset_horizon($1, $1)'),
 (18, 'idgen_server_lease($1, ''i'', ''30 s'', $1, $1)'),
 (19, 'idgen_public($1)'),
 (20, 'idgen_public_bigint($1)'),
 (21, 'idgen_private_bigint($1)'),
 (22, 'idgen_private_bigint($1, $1)'),
 (23, 'idgen_public_retire($1)'),
 (24, 'idgen_speck64(''\x00'', $1)');
SELECT format('PREPARE %s_%s(%s) AS SELECT %s', t, n, t, call)
FROM int_calls, unnest(ARRAY['smallint', 'int', 'bigint']) t ORDER BY n, t \gexec
SELECT c.n, c.call, array_agg(t ORDER BY t) FILTER (WHERE p.name IS NOT NULL) AS resolved
FROM int_calls c
CROSS JOIN unnest(ARRAY['smallint', 'int', 'bigint']) t
LEFT JOIN pg_prepared_statements p ON p.name = t || '_' || c.n
GROUP BY c.n, c.call ORDER BY c.n;
DEALLOCATE ALL;

-- Executed: untyped parameters carry the values through.
PREPARE gene_of(unknown, unknown) AS SELECT idgen_gene($1, $2);
EXECUTE gene_of('12345', '4');
PREPARE with_gene AS SELECT idgen_gene(idgen_snowflake($1), 8) AS gene;
EXECUTE with_gene('0');
PREPARE row_of AS SELECT gene FROM idgen_snowflake_row($1);
EXECUTE row_of('0');
PREPARE compose AS SELECT idgen_snowflake_compose($1, $2, $3, $4, $5);
EXECUTE compose('2025-01-01 00:00:00+00', '3', '7', '5', '0');
PREPARE uuid_at AS SELECT idgen_uuid7_time(idgen_uuid7($1));
EXECUTE uuid_at('2022-02-22 19:22:22+00');
PREPARE uuid_shifted AS SELECT idgen_uuid7_time(idgen_uuid7_shifted($1)) < now() - interval '59 minutes' AS shifted_back;
EXECUTE uuid_shifted('-1 hour');
DEALLOCATE ALL;

-- The string literal of RFC 9562's example, as pg_uuidv7's examples write
-- it, is the time of the UUID.
SELECT idgen_uuid7_time(idgen_uuid7('2022-02-22 19:22:22+00'));
SELECT idgen_uuid7_time(idgen_uuid7_shifted('-1 day')) < now() - interval '23 hours' AS a_day_back;

-- Integers of every width, and bigints beyond an argument's range are
-- 22003 naming the range (they were refused as int before they reached
-- the function).
SELECT idgen_gene(12345, 4::smallint), idgen_gene(12345, 4), idgen_gene(12345, 4::bigint);
SELECT idgen_gene(12345, 4294967300);
\echo :LAST_ERROR_SQLSTATE
SELECT gene FROM idgen_snowflake_row(4294967296);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_compose(now(), 4294967299, 7);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_compose(now(), 3, 7, 0, 4294967296);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM idgen_seq_next('params', 4294967297);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('params', cache => 4294967297);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_served(4294967297) <> 'transactional' AS a_cached_key;
SELECT idgen_worker_acquire('params', max_workers => 4294967297);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(4294967303, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(4294967303, 1);
\echo :LAST_ERROR_SQLSTATE
-- Within int but outside the layout's worker field: the same.
SELECT idgen_worker_renew(32, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(-1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_reset_horizon(4294967299, 7);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_private_bigint(1, 4294967297);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public_retire(4294967297);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public_retire(0);
\echo :LAST_ERROR_SQLSTATE
-- Nothing was created.
SELECT count(*) AS keys FROM idgen_seq WHERE key = 'params';
SELECT count(*) AS leases FROM idgen_worker_lease WHERE holder = 'params';
