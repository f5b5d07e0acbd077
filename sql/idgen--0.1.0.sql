/* idgen--0.1.0.sql: Snowflake IDs with genes, UUIDv7, statistics and server info. */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION idgen" to load this file. \quit

-- Generators.  VOLATILE; PARALLEL SAFE because their state is in shared
-- memory, shared by every backend and parallel worker.

CREATE FUNCTION @extschema@.idgen_snowflake()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_snowflake'
LANGUAGE C VOLATILE PARALLEL SAFE;

-- Not STRICT: a NULL gene is an error, not a NULL key.
CREATE FUNCTION @extschema@.idgen_snowflake(gene bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_snowflake_gene'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL SAFE;

-- Readers.  IMMUTABLE: they depend on their arguments and the layout, which
-- is fixed while the server runs.  In index and partition expressions, spell
-- the gene width out: idgen_gene(id, 4).

CREATE FUNCTION @extschema@.idgen_gene(value bigint)
RETURNS int
AS 'MODULE_PATHNAME', 'idgen_gene'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_gene(value bigint, bits int)
RETURNS int
AS 'MODULE_PATHNAME', 'idgen_gene'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_snowflake_decode(
    id bigint,
    OUT ts timestamptz,
    OUT datacenter_id int,
    OUT worker_id int,
    OUT sequence int,
    OUT gene int)
RETURNS record
AS 'MODULE_PATHNAME', 'idgen_snowflake_decode'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_snowflake_time(id bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idgen_snowflake_time'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_snowflake_min(ts timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_snowflake_min'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_snowflake_debug(id bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'idgen_snowflake_debug'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- UUIDv7 (RFC 9562).  idgen_uuid7() is strictly increasing across the whole
-- server; the others need no shared memory.

CREATE FUNCTION @extschema@.idgen_uuid7()
RETURNS uuid
AS 'MODULE_PATHNAME', 'idgen_uuid7'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_uuid7(ts timestamptz)
RETURNS uuid
AS 'MODULE_PATHNAME', 'idgen_uuid7_at'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_uuid7_min(ts timestamptz)
RETURNS uuid
AS 'MODULE_PATHNAME', 'idgen_uuid7_min'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_uuid7_time(u uuid)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idgen_uuid7_time'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Per-key business sequences (transactional).  One row per key; the table
-- belongs to the extension's owner and nobody else may read or write it:
-- the functions below switch to that owner around their own SQL.

-- The functions validate every value they write (keys of 1 to 256 bytes,
-- value >= 0, step > 0, max_value 0 or >= step, ttl NULL or positive);
-- CHECK constraints would repeat that on every update at a measurable cost.
-- value is the last column, and last_used changes only for keys with a ttl,
-- so that the WAL record of the common update logs little more than value.
CREATE TABLE @extschema@.idgen_seq (
    key text PRIMARY KEY,
    step bigint NOT NULL,
    max_value bigint NOT NULL,
    ttl interval,
    last_used timestamptz NOT NULL,
    value bigint NOT NULL
);
REVOKE ALL ON @extschema@.idgen_seq FROM PUBLIC;
-- pg_dump dumps the counters with the data, not the extension script.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idgen_seq', '');

CREATE FUNCTION @extschema@.idgen_seq_next(key text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_seq_next'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_seq_next(key text, count int)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'idgen_seq_next_n'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;

CREATE FUNCTION @extschema@.idgen_seq_current(key text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_seq_current'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- The administrative functions can reset a counter, and so produce
-- duplicate business numbers: not granted to PUBLIC.
CREATE FUNCTION @extschema@.idgen_seq_set(key text, value bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'idgen_seq_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_seq_set_if_absent(key text, value bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idgen_seq_set_if_absent'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_seq_configure(
    key text,
    step bigint DEFAULT 1,
    max_value bigint DEFAULT 0,
    ttl interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idgen_seq_configure'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_seq_drop(key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idgen_seq_drop'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_seq_purge()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_seq_purge'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION @extschema@.idgen_seq_set(text, bigint),
    @extschema@.idgen_seq_set_if_absent(text, bigint),
    @extschema@.idgen_seq_configure(text, bigint, bigint, interval),
    @extschema@.idgen_seq_drop(text),
    @extschema@.idgen_seq_purge() FROM PUBLIC;

-- Keys with their options; expired keys are not shown.  Like the
-- administrative functions, not granted to PUBLIC.
CREATE VIEW @extschema@.idgen_seq_keys AS
    SELECT key, value, step, max_value, ttl, last_used,
           last_used OPERATOR(pg_catalog.+) ttl AS expires_at
    FROM @extschema@.idgen_seq
    WHERE ttl IS NULL OR last_used OPERATOR(pg_catalog.+) ttl OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();
REVOKE ALL ON @extschema@.idgen_seq_keys FROM PUBLIC;

-- Observability.

CREATE FUNCTION @extschema@.idgen_stats(
    OUT kind text,
    OUT ids bigint,
    OUT borrowed_ms bigint,
    OUT clock_backward bigint,
    OUT waits bigint,
    OUT wait_time_ms double precision,
    OUT errors bigint,
    OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idgen_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

CREATE VIEW @extschema@.idgen_stats AS
    SELECT * FROM @extschema@.idgen_stats();

GRANT SELECT ON @extschema@.idgen_stats TO PUBLIC;

CREATE FUNCTION @extschema@.idgen_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idgen_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- Like pg_stat_statements_reset(): only what the administrator grants.
REVOKE ALL ON FUNCTION @extschema@.idgen_stats_reset() FROM PUBLIC;

CREATE FUNCTION @extschema@.idgen_info(
    OUT preloaded boolean,
    OUT layout_valid boolean,
    OUT layout_error text,
    OUT timestamp_bits int,
    OUT datacenter_bits int,
    OUT worker_bits int,
    OUT sequence_bits int,
    OUT gene_bits int,
    OUT datacenter_id int,
    OUT worker_id int,
    OUT max_drift_ms int,
    OUT clock_wait_ms int,
    OUT epoch timestamptz,
    OUT genes int,
    OUT ids_per_second_per_gene bigint,
    OUT ids_per_second bigint,
    OUT timestamp_end timestamptz,
    OUT years_left double precision,
    OUT shmem_bytes bigint,
    OUT keeper_pid int,
    OUT horizon_restored boolean,
    OUT horizon timestamptz,
    OUT horizon_lead_ms bigint,
    OUT horizon_persists bigint,
    OUT horizon_failures bigint,
    OUT horizon_persisted_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idgen_info'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- A column DEFAULT cannot read another column, so carrying a parent's gene
-- into a child's ID on INSERT is a BEFORE INSERT trigger:
--   CREATE TRIGGER orders_id BEFORE INSERT ON orders FOR EACH ROW
--       EXECUTE FUNCTION idgen_snowflake_trigger('id', 'user_id');
CREATE FUNCTION @extschema@.idgen_snowflake_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idgen_snowflake_trigger'
LANGUAGE C VOLATILE PARALLEL SAFE;
