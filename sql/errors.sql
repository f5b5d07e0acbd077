--
-- Every error the Snowflake functions raise for bad input, and that it
-- changes nothing.  Each error is followed by its SQLSTATE.
--
SELECT idgen_stats_reset();
SELECT idgen_snowflake(1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake(2::bigint);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake(NULL::bigint);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake(NULL::int);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_gene(1, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_gene(1, 32);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_decode(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_time(-5);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_debug(-9223372036854775808);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_min('infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_min('2100-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
-- The failed calls issued no ID and are counted as errors.
SELECT ids, errors FROM idgen_stats WHERE kind = 'snowflake';

-- idgen_snowflake_compose checks every field against its width, and the
-- time against the field's range (this instance: 5 datacenter, 5 worker,
-- 12 sequence, no gene bits).  It generates nothing, so counts no error.
SELECT idgen_snowflake_compose('2025-01-01', 32, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_compose('2025-01-01', 0, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_compose('2025-01-01', 0, 0, 4096);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_compose('2025-01-01', 0, 0, 0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_compose('2023-12-31 23:59:59.999+00', 0, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_compose('2100-01-01 00:00:00+00', 0, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake_compose('infinity', 0, 0);
\echo :LAST_ERROR_SQLSTATE

-- STRICT readers return NULL for NULL.
SELECT idgen_gene(NULL::bigint) IS NULL AS a, idgen_gene(1, NULL) IS NULL AS b,
       idgen_snowflake_time(NULL) IS NULL AS c, idgen_snowflake_min(NULL) IS NULL AS d,
       idgen_snowflake_debug(NULL) IS NULL AS e, (idgen_snowflake_decode(NULL)).ts IS NULL AS f,
       idgen_snowflake_compose(NULL, 0, 0) IS NULL AS g, idgen_snowflake_compose(now(), 0, NULL) IS NULL AS h;

-- idgen_snowflake and idgen_gene take a bigint, and an int converts to
-- it: the README's call (idgen_snowflake(idgen_gene(42, 4))) needs no
-- cast, and a parameter of no type resolves (params has every function).
SELECT idgen_gene(42, 4) AS int_42, idgen_gene(42::bigint, 4) AS bigint_42,
       idgen_gene(-1, 4) AS int_minus_1, idgen_gene(-1::bigint, 4) AS bigint_minus_1,
       idgen_gene((-2147483648)::int, 31) = idgen_gene(-2147483648::bigint, 31) AS int_min,
       idgen_gene(2147483647, 31) = idgen_gene(2147483647::bigint, 31) AS int_max,
       idgen_gene(42) = idgen_gene(42::bigint) AS default_bits,
       idgen_snowflake(idgen_gene(42, 0)) > 0 AS generates;
-- A bare NULL is a bigint gene, and so an error; a parameter of no type
-- is a bigint.
SELECT idgen_snowflake(NULL);
\echo :LAST_ERROR_SQLSTATE
PREPARE untyped AS SELECT idgen_snowflake($1) > 0 AS generates;
EXECUTE untyped(0);
DEALLOCATE untyped;
PREPARE gene_untyped AS SELECT idgen_gene($1, 4) AS gene;
EXECUTE gene_untyped(42);
DEALLOCATE gene_untyped;
PREPARE typed(int) AS SELECT idgen_snowflake($1) > 0 AS generates;
EXECUTE typed(0);
DEALLOCATE typed;

-- Layout settings are fixed at server start.
SET idgen.gene_bits = 4;
SET idgen.worker_id = 1;
-- The prefix is reserved: a misspelt setting is an error.
SET idgen.workerid = 1;

-- Resetting statistics is not granted to PUBLIC.
CREATE ROLE regress_idgen_plain;
SET ROLE regress_idgen_plain;
SELECT idgen_stats_reset();
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM idgen_stats;
SELECT idgen_snowflake() > 0 AS ordinary_users_generate;
RESET ROLE;
DROP ROLE regress_idgen_plain;
