/* idgen--1.0.1.sql: Snowflake IDs with genes, UUIDv7, statistics and server info. */

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

-- One signature per name and argument count, every integer argument
-- bigint: a driver's untyped parameter ($1 of type unknown) or an integer
-- of any width resolves to exactly one function, as a call must
-- (idgen_snowflake($1) from node-postgres, a smallint from psycopg 3,
-- idgen_snowflake(idgen_gene(id, 4)) with its int).  A look-alike function
-- of the same name in another schema on the caller's search_path is kept
-- out by installing idgen in a schema of its own (README, Installation),
-- not by overloads.

-- A root row's ID and its gene in one call, for a gene column the INSERT
-- fills (tables distributed or partitioned by gene):
--   INSERT INTO users (id, gene, name) SELECT r.id, r.gene, 'ann' FROM idgen_snowflake_row() r;
CREATE FUNCTION @extschema@.idgen_snowflake_row(OUT id bigint, OUT gene int)
RETURNS record
AS 'MODULE_PATHNAME', 'idgen_snowflake_row'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_snowflake_row(bits bigint, OUT id bigint, OUT gene int)
RETURNS record
AS 'MODULE_PATHNAME', 'idgen_snowflake_row'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- Readers.  IMMUTABLE: they depend on their arguments and the layout, which
-- is fixed while the server runs.  In index and partition expressions, spell
-- the gene width out: idgen_gene(id, 4).

CREATE FUNCTION @extschema@.idgen_gene(value bigint)
RETURNS int
AS 'MODULE_PATHNAME', 'idgen_gene'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_gene(value bigint, bits bigint)
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

-- The inverse of idgen_snowflake_decode, for generators outside the
-- database that lease a worker id and must make IDs of this layout.
CREATE FUNCTION @extschema@.idgen_snowflake_compose(
    ts timestamptz,
    datacenter_id bigint,
    worker_id bigint,
    sequence bigint DEFAULT 0,
    gene bigint DEFAULT 0)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_snowflake_compose'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_snowflake_debug(id bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'idgen_snowflake_debug'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The last ID this session generated, with currval()'s rules.  PARALLEL
-- RESTRICTED: the state is the session's process's own.
CREATE FUNCTION @extschema@.idgen_snowflake_last()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_snowflake_last'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- Converting an existing key (serial, bigserial, identity, or a plain
-- integer column) to bigint DEFAULT idgen_snowflake(), in the caller's
-- transaction and with the caller's rights: the column and every
-- foreign-key column that refers to it, directly or through others,
-- become bigint; an identity is dropped, a serial's default and its owned
-- sequence are dropped (a sequence the default used that is kept, because
-- the column does not own it or something else uses it, is reported);
-- existing values stay, and must lie below the IDs generated now.
-- Refused, before any change, for what ALTER TABLE cannot do or idgen
-- will not guess at: a partitioned table, a partition or an inheritance
-- child or parent, a column whose type a view or a generated column
-- depends on, a default other than a sequence's, a column that is not an
-- integer, a table whose row-level security applies to the caller (its
-- largest value cannot be read).  And refused when a table it would alter
-- is not owned by the calling role itself (a member of the owner, or a
-- superuser, is not enough): ALTER COLUMN ... TYPE evaluates the CHECK constraints of each
-- table it rewrites with the rights of the role running it, so another
-- owner's constraint would run with the caller's rights.  One row per
-- change made.
--
-- idgen_convert_column() itself is C (convert.c): it passes the first ID
-- of the statement's time to idgen_convert_column_steps() below, which
-- checks and makes every change but the default, and sets the default to
-- idgen_snowflake() by the function's oid.  Neither calls a function of
-- idgen's by name: one of the extension's schema, even called qualified
-- with its exact argument types, is ambiguous (42725) once the schema's
-- owner creates one of the same name with one more, defaulted, argument,
-- and the conversion would fail for everyone.  The steps are not granted:
-- only the C function runs them.
CREATE FUNCTION @extschema@.idgen_convert_column_steps(tbl regclass, col name, first_id bigint,
    OUT relations regclass[], OUT column_names name[], OUT changes text[])
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS $convert$
DECLARE
    rel record;
    att record;
    dep record;
    seq regclass;
    default_oid oid;
    default_expr text;
    -- the sequences the old default used, and what a kept one is to whom
    default_seqs oid[] := ARRAY[]::oid[];
    seq_by_text text;
    seq_name text[];
    seq_uses text[];
    -- the calling role, and the tables it would alter that others own
    me oid;
    others text;
    max_value bigint;
    -- the columns to widen: (relation, attnum) pairs, the key first
    widen_rel oid[] := ARRAY[]::oid[];
    widen_att int2[] := ARRAY[]::int2[];
    i int;
BEGIN
    relations := ARRAY[]::regclass[];
    column_names := ARRAY[]::name[];
    changes := ARRAY[]::text[];
    SELECT c.relkind, c.relispartition INTO rel FROM pg_class c WHERE c.oid = tbl;
    IF rel.relkind = 'p' OR rel.relispartition
       OR EXISTS (SELECT FROM pg_inherits WHERE inhrelid = tbl OR inhparent = tbl) THEN
        RAISE EXCEPTION 'cannot convert a column of "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = CASE WHEN rel.relkind = 'p' THEN 'It is a partitioned table.'
                                WHEN rel.relispartition THEN 'It is a partition.'
                                ELSE 'It inherits from another table, or another inherits from it.' END,
                  HINT = 'Convert such tables by hand: ALTER TABLE ... ALTER COLUMN ... TYPE bigint, then SET DEFAULT idgen_snowflake(), on the parent.';
    END IF;
    IF rel.relkind <> 'r' THEN
        RAISE EXCEPTION '"%" is not a table', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'idgen_convert_column converts a column of an ordinary table.';
    END IF;

    SELECT a.attnum, a.atttypid, a.attidentity, a.attgenerated INTO att
    FROM pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation "%" does not exist', col, tbl
            USING ERRCODE = 'undefined_column';
    END IF;
    IF att.atttypid NOT IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN
        RAISE EXCEPTION 'column "%" of "%" is of type %, not an integer type', col, tbl, att.atttypid::regtype
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'idgen_convert_column converts smallint, integer and bigint columns.';
    END IF;
    IF att.attgenerated <> '' THEN
        RAISE EXCEPTION 'column "%" of "%" is a generated column', col, tbl
            USING ERRCODE = 'feature_not_supported';
    END IF;

    -- A default other than a sequence's is the user's: not replaced.
    SELECT d.oid, pg_get_expr(d.adbin, d.adrelid) INTO default_oid, default_expr
    FROM pg_attrdef d WHERE d.adrelid = tbl AND d.adnum = att.attnum;
    IF default_expr IS NOT NULL AND default_expr NOT LIKE 'nextval(%' THEN
        RAISE EXCEPTION 'column "%" of "%" has a default that is not a sequence''s', col, tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('Its default is %s.', default_expr),
                  HINT = 'Drop the default first if IDs should replace it.';
    END IF;

    -- The foreign-key columns that refer to the key, directly or through
    -- other foreign keys (a child's key that is itself referred to).  Only
    -- the constraints declared on a table (a partition's clones follow
    -- their parent's).
    widen_rel := ARRAY[tbl::oid];
    widen_att := ARRAY[att.attnum];
    i := 1;
    WHILE i <= cardinality(widen_rel) LOOP
        FOR dep IN
            SELECT c.conrelid AS relid, c.conkey[k.n] AS attnum
            FROM pg_constraint c, generate_subscripts(c.confkey, 1) AS k(n)
            WHERE c.contype = 'f' AND c.conparentid = 0
              AND c.confrelid = widen_rel[i] AND c.confkey[k.n] = widen_att[i]
            ORDER BY c.conrelid::regclass::text, c.conname, k.n
        LOOP
            IF NOT EXISTS (SELECT FROM unnest(widen_rel, widen_att) AS w(r, a)
                           WHERE w.r = dep.relid AND w.a = dep.attnum) THEN
                widen_rel := widen_rel || dep.relid;
                widen_att := widen_att || dep.attnum;
            END IF;
        END LOOP;
        i := i + 1;
    END LOOP;

    -- Every table altered must be the calling role's own.  ALTER COLUMN
    -- ... TYPE rewrites a table and re-checks its CHECK constraints as the
    -- role running it (its index expressions as the owner, under
    -- SECURITY_RESTRICTED_OPERATION; its triggers, rules and defaults
    -- not at all): a constraint on a referencing table, which any role
    -- granted REFERENCES can make, would run its owner's code with the
    -- caller's rights, a superuser's included.  So the owner must be the
    -- caller itself: membership in the owning role would let the owner's
    -- code run with the member's other rights.  The tables altered are
    -- the key's, each whose column is widened, and their partitions and
    -- inheritance children (ALTER TABLE recurses to them).  A table whose
    -- foreign key is only re-checked (its column already bigint) runs
    -- none of its code.  Ownership changes need the owner or a
    -- superuser, so it cannot change under the caller between here and
    -- the ALTERs; a table another role makes meanwhile to refer to a
    -- column being widened is not in the list, so not rewritten either
    -- (its foreign key is only checked again), and a partition or child
    -- can be added only by the parent's owner.
    SELECT r.oid INTO me FROM pg_roles r WHERE r.rolname = current_user;
    WITH RECURSIVE altered(relid) AS (
        SELECT w.r FROM unnest(widen_rel, widen_att) AS w(r, a)
        WHERE w.r = tbl::oid
           OR (SELECT a.atttypid FROM pg_attribute a
               WHERE a.attrelid = w.r AND a.attnum = w.a) <> 'int8'::regtype
        UNION
        SELECT i.inhrelid FROM pg_inherits i JOIN altered ON i.inhparent = altered.relid)
    SELECT string_agg(format('%s (owner %s)', c.oid::regclass, quote_ident(pg_get_userbyid(c.relowner))),
                      ', ' ORDER BY c.oid::regclass::text)
    INTO others
    FROM pg_class c JOIN altered ON altered.relid = c.oid
    WHERE c.relowner IS DISTINCT FROM me;
    IF others IS NOT NULL THEN
        RAISE EXCEPTION 'cannot convert column "%" of "%": it would alter tables role % does not own', col, tbl, quote_ident(current_user)
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('PostgreSQL re-checks the CHECK constraints of a table whose column type changes with the rights of the role changing it, so idgen_convert_column alters only tables the calling role owns itself. Owned by others: %s.', others),
                  HINT = 'Convert as the role that owns the tables (SET ROLE). A referencing table of another owner: that owner first widens its own column (ALTER TABLE ... ALTER COLUMN ... TYPE bigint), and the key''s owner converts after.';
    END IF;

    -- What depends on the type of a column to widen: ALTER TABLE refuses
    -- views and generated columns; say so before anything changed.
    FOR i IN 1 .. cardinality(widen_rel) LOOP
        CONTINUE WHEN (SELECT a.atttypid FROM pg_attribute a
                       WHERE a.attrelid = widen_rel[i] AND a.attnum = widen_att[i]) = 'int8'::regtype;
        SELECT r.ev_class::regclass AS obj, 'view' AS kind INTO dep
        FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
          AND d.refobjid = widen_rel[i] AND d.refobjsubid = widen_att[i]
          AND r.ev_class <> widen_rel[i]
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'cannot convert column "%" of "%": view % depends on the type of %.%',
                    col, tbl, dep.obj, widen_rel[i]::regclass,
                    quote_ident((SELECT attname FROM pg_attribute
                                 WHERE attrelid = widen_rel[i] AND attnum = widen_att[i]))
                USING ERRCODE = 'dependent_objects_still_exist',
                      DETAIL = 'The column must become bigint, and PostgreSQL cannot change the type of a column a view uses.',
                      HINT = 'Drop the view, convert the column, and create the view again, in one transaction.';
        END IF;
        -- (a generation expression is a pg_attrdef row that depends on
        -- the columns it reads)
        SELECT a.attname INTO dep
        FROM pg_depend d
             JOIN pg_attrdef ad ON ad.oid = d.objid
             JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
        WHERE d.classid = 'pg_attrdef'::regclass
          AND d.refclassid = 'pg_class'::regclass AND d.refobjid = widen_rel[i]
          AND d.refobjsubid = widen_att[i] AND a.attgenerated <> ''
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'cannot convert column "%" of "%": generated column %.% depends on the type of %.%',
                    col, tbl, widen_rel[i]::regclass, quote_ident(dep.attname), widen_rel[i]::regclass,
                    quote_ident((SELECT attname FROM pg_attribute
                                 WHERE attrelid = widen_rel[i] AND attnum = widen_att[i]))
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'The column must become bigint, and PostgreSQL cannot change the type of a column a generated column uses.',
                      HINT = 'Drop the generated column, convert, and add it again.';
        END IF;
    END LOOP;

    -- Existing values must lie below every ID generated from now on, or a
    -- new ID could equal one of them; no row is written meanwhile (the
    -- ALTERs below take this lock anyway).
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    -- All of them: row-level security the owner is subject to (FORCE ROW
    -- LEVEL SECURITY) would hide some from max(), so with row_security
    -- off (the function's SET) a table it applies to fails here instead.
    BEGIN
        EXECUTE format('SELECT max(%I)::bigint FROM %s', col, tbl) INTO max_value;
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'cannot convert column "%" of "%": row-level security applies to role % on it', col, tbl, quote_ident(current_user)
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Existing values must lie below the IDs generated from now on, and the largest cannot be read through the table''s policies.',
                  HINT = 'Convert as a role that bypasses row-level security, or ALTER TABLE ... NO FORCE ROW LEVEL SECURITY for the conversion.';
    END;
    IF max_value >= first_id THEN
        RAISE EXCEPTION 'existing values of column "%" of "%" reach the Snowflake ID range', col, tbl
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = format('Its largest value is %s; IDs generated now start at %s, so a new ID could equal an existing one.',
                                  max_value, first_id),
                  HINT = 'Such a column already holds Snowflake-sized values: give it DEFAULT idgen_snowflake() only if they are IDs of this layout.';
    END IF;

    -- The changes, in the caller's transaction.
    IF att.attidentity <> '' THEN
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
        relations := relations || tbl; column_names := column_names || col;
        changes := changes || 'identity dropped, with its sequence'::text;
    ELSIF default_expr IS NOT NULL THEN
        seq := pg_get_serial_sequence(tbl::text, col::text)::regclass;
        SELECT coalesce(array_agg(DISTINCT d.refobjid), ARRAY[]::oid[]) INTO default_seqs
        FROM pg_depend d JOIN pg_class s ON s.oid = d.refobjid
        WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = default_oid
          AND d.refclassid = 'pg_class'::regclass AND s.relkind = 'S';
        -- A default that names its sequence in text, nextval('users_seq'::text)
        -- (old schemas, Roundcube's), records no dependency: each insert
        -- looks the name up through its own search_path.  The sequences
        -- that name can mean: the one of that schema, or, unqualified,
        -- every one of that name (which one an application reads depends
        -- on its search_path, which this function cannot know).
        seq_by_text := substring(default_expr FROM '^nextval\(\(''((?:[^'']|'''')*)''::[a-z ]+\)::regclass\)$');
        IF seq_by_text IS NOT NULL THEN
            seq_by_text := replace(seq_by_text, '''''', '''');
            BEGIN
                seq_name := parse_ident(seq_by_text, false);
            EXCEPTION WHEN invalid_parameter_value THEN
                seq_name := NULL;
            END;
            default_seqs := default_seqs || ARRAY(
                SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE c.relkind = 'S' AND c.relname = seq_name[cardinality(seq_name)]
                  AND (cardinality(seq_name) = 1 OR n.nspname = seq_name[cardinality(seq_name) - 1])
                ORDER BY c.oid::regclass::text);
        END IF;
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT', tbl, col);
        relations := relations || tbl; column_names := column_names || col;
        changes := changes || format('default %s dropped', default_expr);
        -- The serial's own sequence, unless something else (another
        -- default, a view) still uses it.
        IF seq IS NOT NULL AND NOT EXISTS (
                SELECT FROM pg_depend d
                WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = seq
                  AND d.deptype = 'n') THEN
            changes := changes || format('sequence %s dropped', seq);
            EXECUTE format('DROP SEQUENCE %s', seq);
            relations := relations || tbl; column_names := column_names || col;
        END IF;
        -- Every other sequence the default used is kept, and said so:
        -- nothing advances it for this column any more, and an
        -- application that reads the new key from it (currval, lastval,
        -- lastInsertId('users_seq')) gets a stale value or an error.  It
        -- is not dropped: the column does not own it, and what else reads
        -- it (function bodies, applications) PostgreSQL does not record.
        FOR i IN 1 .. cardinality(default_seqs) LOOP
            CONTINUE WHEN NOT EXISTS (SELECT FROM pg_class WHERE oid = default_seqs[i]);
            SELECT array_agg(u ORDER BY o, u) INTO seq_uses FROM (
                SELECT 0 AS o, format('named in text by the old default (%L)', seq_by_text) AS u
                WHERE seq_by_text IS NOT NULL
                UNION ALL
                SELECT 1, 'owned by ' || pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid)
                FROM pg_depend d
                WHERE d.classid = 'pg_class'::regclass AND d.objid = default_seqs[i]
                  AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
                UNION ALL
                SELECT 2, 'used by ' || pg_describe_object(d.classid, d.objid, d.objsubid)
                FROM pg_depend d
                WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = default_seqs[i]
                  AND d.deptype = 'n') AS x;
            relations := relations || tbl; column_names := column_names || col;
            changes := changes || format('sequence %s kept, no longer advanced by this column: %s',
                                         default_seqs[i]::regclass,
                                         coalesce(array_to_string(seq_uses, ', '), 'owned by no column, no other use recorded'));
        END LOOP;
    END IF;
    FOR i IN 1 .. cardinality(widen_rel) LOOP
        SELECT a.attname, a.atttypid INTO dep FROM pg_attribute a
        WHERE a.attrelid = widen_rel[i] AND a.attnum = widen_att[i];
        CONTINUE WHEN dep.atttypid = 'int8'::regtype;
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint', widen_rel[i]::regclass, dep.attname);
        relations := relations || widen_rel[i]::regclass; column_names := column_names || dep.attname;
        changes := changes || format('type %s widened to bigint', dep.atttypid::regtype);
    END LOOP;
    -- (the default itself is set by the caller, idgen_convert_column())
    relations := relations || tbl; column_names := column_names || col;
    changes := changes || format('default idgen_snowflake(); existing values up to %s, new IDs from %s',
                                 coalesce(max_value::text, 'none'), first_id);
END
$convert$;
REVOKE ALL ON FUNCTION @extschema@.idgen_convert_column_steps(regclass, name, bigint) FROM PUBLIC;

CREATE FUNCTION @extschema@.idgen_convert_column(tbl regclass, col name)
RETURNS TABLE (relation regclass, column_name name, change text)
AS 'MODULE_PATHNAME', 'idgen_convert_column'
LANGUAGE C VOLATILE STRICT;

-- UUIDv7 (RFC 9562).  idgen_uuid7() is strictly increasing across the whole
-- server; the others need no shared memory.

CREATE FUNCTION @extschema@.idgen_uuid7()
RETURNS uuid
AS 'MODULE_PATHNAME', 'idgen_uuid7'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_uuid7_last()
RETURNS uuid
AS 'MODULE_PATHNAME', 'idgen_uuid7_last'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION @extschema@.idgen_uuid7(ts timestamptz)
RETURNS uuid
AS 'MODULE_PATHNAME', 'idgen_uuid7_at'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- PostgreSQL 18's uuidv7(shift): the next UUIDv7 with its time moved.  A
-- name of its own: as an overload of idgen_uuid7(ts), a string literal or
-- an untyped parameter would match both and be ambiguous.
CREATE FUNCTION @extschema@.idgen_uuid7_shifted(shift interval)
RETURNS uuid
AS 'MODULE_PATHNAME', 'idgen_uuid7_shifted'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- PostgreSQL 18's uuid_extract_version(), on every version.
CREATE FUNCTION @extschema@.idgen_uuid_version(u uuid)
RETURNS smallint
AS 'MODULE_PATHNAME', 'idgen_uuid_version'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_uuid7_min(ts timestamptz)
RETURNS uuid
AS 'MODULE_PATHNAME', 'idgen_uuid7_min'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.idgen_uuid7_time(u uuid)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idgen_uuid7_time'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- since + ttl, or NULL (never) when that lies beyond the timestamp range
-- (interval.c): expiries computed long after a ttl was accepted never fail.
CREATE FUNCTION @extschema@.idgen_expiry(since timestamptz, ttl interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idgen_expiry'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- Per-key business sequences (transactional).  One row per key; the table
-- belongs to the extension's owner and nobody else may read or write it:
-- the functions below switch to that owner around their own SQL.

-- The functions validate every value they write (keys of 1 to 256 bytes,
-- step not 0, min_value < max_value, start within them, value within them,
-- ttl NULL or positive in every part and at most 100 years), as
-- CREATE SEQUENCE and setval() do; CHECK constraints would repeat that on
-- every update at a measurable cost.  called and value are PostgreSQL's
-- is_called and last_value: a key that has handed out nothing yet has
-- called false and value = the next value to hand out (its start).
-- value is the last column, and last_used changes only for keys with a
-- ttl, so that the WAL record of the common update logs little more than
-- value.
CREATE TABLE @extschema@.idgen_seq (
    key text PRIMARY KEY,
    step bigint NOT NULL,
    start bigint NOT NULL,
    min_value bigint NOT NULL,
    max_value bigint NOT NULL,
    cycle boolean NOT NULL,
    ttl interval,
    last_used timestamptz NOT NULL,
    cache int NOT NULL DEFAULT 0,
    -- the role that created the key (idgen_seq_keys shows its name)
    created_by oid NOT NULL,
    called boolean NOT NULL,
    value bigint NOT NULL
);
-- idgen.seq_max_keys_per_role has a role's live keys counted now and then
-- (seq.c, "Keys per role"): this index lets that read only the role's rows
-- when other roles own most keys.  Advancing a key changes value (and
-- last_used), never created_by, so its update stays HOT.
CREATE INDEX idgen_seq_created_by_idx ON @extschema@.idgen_seq (created_by);
REVOKE ALL ON @extschema@.idgen_seq FROM PUBLIC;
-- pg_dump dumps the counters with the data, not the extension script.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idgen_seq', '');

CREATE FUNCTION @extschema@.idgen_seq_next(key text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_seq_next'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_seq_next(key text, count bigint)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'idgen_seq_next_n'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;

CREATE FUNCTION @extschema@.idgen_seq_current(key text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_seq_current'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- Using per-key sequences creates keys (rows in idgen_seq), so it is for the
-- roles the administrator grants it to, as USAGE on a sequence is:
--   GRANT EXECUTE ON FUNCTION idgen_seq_next(text), idgen_seq_next(text, bigint),
--       idgen_seq_current(text) TO app;
REVOKE ALL ON FUNCTION @extschema@.idgen_seq_next(text),
    @extschema@.idgen_seq_next(text, bigint),
    @extschema@.idgen_seq_current(text) FROM PUBLIC;

-- The administrative functions can reset a counter, and so produce
-- duplicate business numbers: not granted to PUBLIC.
CREATE FUNCTION @extschema@.idgen_seq_set(key text, value bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'idgen_seq_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- setval(seq, value, is_called): is_called false makes value the next one.
CREATE FUNCTION @extschema@.idgen_seq_set(key text, value bigint, is_called boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'idgen_seq_set3'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_seq_set_if_absent(key text, value bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idgen_seq_set_if_absent'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ALTER SEQUENCE for a key: an option not passed (NULL) keeps its value, or
-- takes CREATE SEQUENCE's default for a key being created; ttl => '0'
-- removes a ttl.  restart is ALTER SEQUENCE ... RESTART WITH.
CREATE FUNCTION @extschema@.idgen_seq_configure(
    key text,
    step bigint DEFAULT NULL,
    max_value bigint DEFAULT NULL,
    ttl interval DEFAULT NULL,
    cache bigint DEFAULT NULL,
    start bigint DEFAULT NULL,
    min_value bigint DEFAULT NULL,
    cycle boolean DEFAULT NULL,
    restart bigint DEFAULT NULL)
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
    @extschema@.idgen_seq_set(text, bigint, boolean),
    @extschema@.idgen_seq_set_if_absent(text, bigint),
    @extschema@.idgen_seq_configure(text, bigint, bigint, interval, bigint, bigint, bigint, boolean, bigint),
    @extschema@.idgen_seq_drop(text),
    @extschema@.idgen_seq_purge() FROM PUBLIC;

-- The last value of a key as the calling transaction sees it: the one it
-- advanced in memory for a key it holds (seq_held.c), else 'value' (the
-- row's); NULL if the key has handed out nothing yet ('called' false).
-- Reveals nothing but the caller's own values: PUBLIC, as idgen_expiry,
-- so that whoever may read idgen_seq_keys may call it.
CREATE FUNCTION @extschema@.idgen_seq_latest(key text, value bigint, called boolean)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_seq_latest'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- How a key with this cache setting is served in this database:
-- 'transactional', 'cached', or 'transactional: ' and why a cached key
-- cannot be served from shared memory here.  PUBLIC, as idgen_expiry.
CREATE FUNCTION @extschema@.idgen_seq_served(cache bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'idgen_seq_served'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- Keys with their options; expired keys are not shown.  Like the
-- administrative functions, not granted to PUBLIC.
CREATE VIEW @extschema@.idgen_seq_keys AS
    SELECT key, @extschema@.idgen_seq_latest(key, value, called) AS value,
           start, step, min_value, max_value, cycle,
           ttl, cache, @extschema@.idgen_seq_served(cache) AS served,
           last_used, expires_at,
           pg_catalog.pg_get_userbyid(created_by) AS created_by
    FROM (SELECT s.*, @extschema@.idgen_expiry(s.last_used, s.ttl) AS expires_at
          FROM @extschema@.idgen_seq s) s
    WHERE expires_at IS NULL OR expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();
REVOKE ALL ON @extschema@.idgen_seq_keys FROM PUBLIC;

-- Cached keys (cache => n) of this database, as shared memory holds them:
-- values served, segments fetched, waits for a segment, the size of the
-- next segment and the current one.  Not granted to PUBLIC.
CREATE FUNCTION @extschema@.idgen_seq_cache(
    OUT key text,
    OUT cache int,
    OUT segment_size bigint,
    OUT served bigint,
    OUT fetches bigint,
    OUT waits bigint,
    OUT segment_first bigint,
    OUT segment_last bigint,
    OUT segment_left bigint,
    OUT next_ready boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idgen_seq_cache'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION @extschema@.idgen_seq_cache() FROM PUBLIC;

CREATE VIEW @extschema@.idgen_seq_cache AS
    SELECT * FROM @extschema@.idgen_seq_cache();
REVOKE ALL ON @extschema@.idgen_seq_cache FROM PUBLIC;

-- Worker-id leases (lease.c) for Snowflake generators outside the database.
-- One row per worker id ever leased: id is datacenter_id << worker_bits |
-- worker_id.  Like idgen_seq, private to the extension's owner; the
-- functions switch to that owner around their SQL.
CREATE TABLE @extschema@.idgen_worker_lease (
    id int PRIMARY KEY,
    holder text NOT NULL,
    token bigint NOT NULL UNIQUE,
    ttl interval,
    session_bound boolean NOT NULL,
    acquired_by oid NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    expires_at timestamptz,
    released_at timestamptz,
    -- set for a server's own identity (idgen_server_lease): its
    -- pg_control_system().system_identifier
    system_identifier bigint,
    -- Handover (registry.c): no ID of any holder of this id, the current
    -- one included, has a timestamp at or beyond 'horizon', as the holders
    -- reported it before they used it; 'handover_horizon' is what it was
    -- when the current lease began, the point its holder started above.
    horizon timestamptz,
    handover_horizon timestamptz
);
REVOKE ALL ON @extschema@.idgen_worker_lease FROM PUBLIC;
-- Fencing tokens are ticks of the server's UUIDv7 clock (lease.c): every
-- acquisition takes a new one, never reused, not even after the extension
-- is dropped and created again.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idgen_worker_lease', '');

CREATE FUNCTION @extschema@.idgen_worker_acquire(
    holder text,
    ttl interval DEFAULT '30 s',
    max_workers bigint DEFAULT NULL,
    session_bound boolean DEFAULT false,
    OUT worker_id int,
    OUT datacenter_id int,
    OUT token bigint,
    OUT expires_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idgen_worker_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_worker_renew(worker_id bigint, token bigint, ttl interval DEFAULT NULL,
    horizon timestamptz DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idgen_worker_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_worker_release(worker_id bigint, token bigint,
    horizon timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idgen_worker_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_worker_purge()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_worker_purge'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The horizon of an id whose lease has ended, set by an administrator who
-- knows how far its holders issued; the horizon it had.
CREATE FUNCTION @extschema@.idgen_worker_reset_horizon(datacenter_id bigint, worker_id bigint,
    horizon timestamptz DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idgen_worker_reset_horizon'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- A server's own identity, when this server is the registry of others
-- (idgen.registry on those): called by their "idgen registry" processes, and
-- renewed and released with idgen_worker_renew / idgen_worker_release.
CREATE FUNCTION @extschema@.idgen_server_lease(
    system_identifier bigint,
    instance text,
    ttl interval DEFAULT '30 s',
    claim_datacenter_id bigint DEFAULT NULL,
    claim_worker_id bigint DEFAULT NULL,
    horizon timestamptz DEFAULT NULL,
    OUT worker_id int,
    OUT datacenter_id int,
    OUT token bigint,
    OUT expires_at timestamptz,
    OUT handover_horizon timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idgen_server_lease'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Leasing worker ids is for the roles the administrator grants it to.
REVOKE ALL ON FUNCTION @extschema@.idgen_server_lease(bigint, text, interval, bigint, bigint, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idgen_worker_acquire(text, interval, bigint, boolean),
    @extschema@.idgen_worker_renew(bigint, bigint, interval, timestamptz),
    @extschema@.idgen_worker_release(bigint, bigint, timestamptz),
    @extschema@.idgen_worker_purge(),
    @extschema@.idgen_worker_reset_horizon(bigint, bigint, timestamptz) FROM PUBLIC;

-- Every lease with its state: held, quarantine (ended, the id resting until
-- the lease's expiry, even if it was released before, plus
-- idgen.worker_quarantine; see lease.c) or free.  A session-bound lease is held while its
-- session holds the id's advisory lock (classid 1768187749 = 0x69646765,
-- objsubid 26980 = 0x6964, see lease_lock.c).
CREATE VIEW @extschema@.idgen_worker_leases AS
    SELECT l.datacenter_id, l.worker_id, l.holder, l.token, l.session_bound,
           pg_catalog.pg_get_userbyid(l.acquired_by) AS acquired_by,
           l.acquired_at, l.renewed_at, l.expires_at, l.released_at,
           CASE WHEN l.ended_at IS NULL THEN
                     CASE WHEN l.session_held THEN 'held' ELSE 'quarantine' END
                WHEN l.released_at IS NULL
                     AND l.ended_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() THEN 'held'
                WHEN (l.ended_at OPERATOR(pg_catalog.+) l.quarantine) OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
                     THEN 'quarantine'
                ELSE 'free' END AS state,
           l.holder_pid, l.system_identifier, l.horizon, l.handover_horizon
    FROM (SELECT (l.id OPERATOR(pg_catalog.>>) w.bits) AS datacenter_id,
                 (l.id::bigint OPERATOR(pg_catalog.&)
                  ((1::bigint OPERATOR(pg_catalog.<<) w.bits) OPERATOR(pg_catalog.-) 1))::int AS worker_id,
                 l.*,
                 GREATEST(l.released_at, l.expires_at) AS ended_at,
                 w.quarantine,
                 k.pid AS holder_pid,
                 k.pid IS NOT NULL AS session_held
          FROM @extschema@.idgen_worker_lease l
          CROSS JOIN (SELECT pg_catalog.current_setting('idgen.worker_bits')::int AS bits,
                             pg_catalog.current_setting('idgen.worker_quarantine')::interval AS quarantine) w
          LEFT JOIN pg_catalog.pg_locks k
            ON l.session_bound AND l.released_at IS NULL
           AND k.locktype OPERATOR(pg_catalog.=) 'advisory'
           AND k.database OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_database
                                                  WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
           AND k.classid OPERATOR(pg_catalog.=) 1768187749::pg_catalog.oid
           AND k.objid OPERATOR(pg_catalog.=) l.id::pg_catalog.oid
           AND k.objsubid OPERATOR(pg_catalog.=) 26980
           AND k.granted AND k.pid IS NOT NULL) l;
REVOKE ALL ON @extschema@.idgen_worker_leases FROM PUBLIC;

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
-- granted to PUBLIC at the end, with the functions

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
    OUT horizon_persisted_at timestamptz,
    OUT in_recovery boolean,
    OUT wal_horizon timestamptz,
    OUT wal_datacenter_id int,
    OUT wal_worker_id int,
    OUT wal_records bigint,
    OUT recovery_ended_at timestamptz,
    OUT recovery_lead_ms bigint,
    OUT sequencers int,
    OUT max_sequencers int,
    OUT sequencers_refused bigint,
    OUT databases_waiting name[],
    OUT databases_waiting_since timestamptz,
    OUT identity_clash text)
RETURNS record
AS 'MODULE_PATHNAME', 'idgen_info'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- Where this server's Snowflake identity comes from (idgen.identity,
-- idgen.registry) and, when it is leased from a registry, the lease.
CREATE FUNCTION @extschema@.idgen_identity(
    OUT source text,
    OUT leased boolean,
    OUT state text,
    OUT datacenter_id int,
    OUT worker_id int,
    OUT token bigint,
    OUT valid_until timestamptz,
    OUT registry_expires_at timestamptz,
    OUT acquired_at timestamptz,
    OUT renewed_at timestamptz,
    OUT clock_skew_ms bigint,
    OUT system_identifier bigint,
    OUT message text,
    OUT process_pid int,
    OUT failures bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'idgen_identity'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- A column DEFAULT cannot read another column, so carrying a parent's gene
-- into a child's ID on INSERT is a BEFORE INSERT trigger:
--   CREATE TRIGGER orders_id BEFORE INSERT ON orders FOR EACH ROW
--       EXECUTE FUNCTION idgen_snowflake_trigger('id', 'user_id');
CREATE FUNCTION @extschema@.idgen_snowflake_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idgen_snowflake_trigger'
LANGUAGE C VOLATILE PARALLEL SAFE;

-- Descriptions, for \df+ and \dv+ (test/t/017_attack_surface.pl checks that
-- every function and view of the extension has one).
COMMENT ON FUNCTION @extschema@.idgen_snowflake() IS
    'next Snowflake ID of this server; with gene bits, spread evenly over the genes';
COMMENT ON FUNCTION @extschema@.idgen_snowflake(bigint) IS
    'next Snowflake ID carrying the given gene in its low bits';
COMMENT ON FUNCTION @extschema@.idgen_gene(bigint) IS
    'the low idgen.gene_bits bits of a value: the shard of an ID (IMMUTABLE: index, partition, route by it)';
COMMENT ON FUNCTION @extschema@.idgen_gene(bigint, bigint) IS
    'the low bits bits of a value';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_decode(bigint) IS
    'a Snowflake ID split into its time, datacenter, worker, sequence and gene';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_time(bigint) IS
    'the time of a Snowflake ID';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_min(timestamptz) IS
    'the smallest Snowflake ID any generator can produce at a time (range scans by time)';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_compose(timestamptz, bigint, bigint, bigint, bigint) IS
    'the Snowflake ID with these fields in this server''s layout (the inverse of idgen_snowflake_decode)';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_debug(bigint) IS
    'the bits of a Snowflake ID split into its fields';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_trigger() IS
    'trigger: fills an ID column with idgen_snowflake(), with the gene of a parent column if named';
COMMENT ON FUNCTION @extschema@.idgen_convert_column(regclass, name) IS
    'turns a serial, bigserial, identity or integer key into bigint DEFAULT idgen_snowflake(), widening the foreign keys that refer to it';
COMMENT ON FUNCTION @extschema@.idgen_convert_column_steps(regclass, name, bigint) IS
    'the checks and changes of idgen_convert_column() but its default, which calls it';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_row() IS
    'next Snowflake ID and its gene (idgen.gene_bits wide), for a gene column the INSERT fills';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_row(bigint) IS
    'next Snowflake ID and its gene, bits wide (at most idgen.gene_bits)';
COMMENT ON FUNCTION @extschema@.idgen_snowflake_last() IS
    'the last Snowflake ID this session generated (currval rules; lastval untouched)';
COMMENT ON FUNCTION @extschema@.idgen_uuid7_last() IS
    'the last UUIDv7 idgen_uuid7() generated in this session (currval rules)';
COMMENT ON FUNCTION @extschema@.idgen_uuid7() IS
    'next UUIDv7 of this server, greater than every one it issued before';
COMMENT ON FUNCTION @extschema@.idgen_uuid7(timestamptz) IS
    'a UUIDv7 for a given time (backfills): random tail, not ordered';
COMMENT ON FUNCTION @extschema@.idgen_uuid7_shifted(interval) IS
    'next UUIDv7 of this server with its time moved by shift (PostgreSQL 18''s uuidv7(shift))';
COMMENT ON FUNCTION @extschema@.idgen_uuid_version(uuid) IS
    'the version of an RFC 9562 UUID, NULL for other variants (PostgreSQL 18''s uuid_extract_version)';
COMMENT ON FUNCTION @extschema@.idgen_uuid7_min(timestamptz) IS
    'the smallest UUIDv7 of a time''s millisecond (range scans)';
COMMENT ON FUNCTION @extschema@.idgen_uuid7_time(uuid) IS
    'the millisecond of a UUIDv7; NULL for a UUID that is not version 7';
COMMENT ON FUNCTION @extschema@.idgen_expiry(timestamptz, interval) IS
    'since + ttl, or NULL (never) when that lies beyond the timestamp range';
COMMENT ON FUNCTION @extschema@.idgen_seq_next(text) IS
    'next value of a per-key sequence, creating the key (granted roles)';
COMMENT ON FUNCTION @extschema@.idgen_seq_next(text, bigint) IS
    'the next count values of a per-key sequence, as count single calls would give them (granted roles)';
COMMENT ON FUNCTION @extschema@.idgen_seq_current(text) IS
    'the last value of a per-key sequence; NULL for an absent or expired key, or one that handed out none yet (granted roles)';
COMMENT ON FUNCTION @extschema@.idgen_seq_set(text, bigint) IS
    'overwrite the value of a per-key sequence (admin)';
COMMENT ON FUNCTION @extschema@.idgen_seq_set_if_absent(text, bigint) IS
    'set the value of a missing or expired key; true if it did (admin)';
COMMENT ON FUNCTION @extschema@.idgen_seq_set(text, bigint, boolean) IS
    'overwrite the value of a per-key sequence; is_called false: it is the next value (admin)';
COMMENT ON FUNCTION @extschema@.idgen_seq_configure(text, bigint, bigint, interval, bigint, bigint, bigint, boolean, bigint) IS
    'change the options passed (step, max_value, ttl, cache, start, min_value, cycle, restart), keeping the others (admin)';
COMMENT ON FUNCTION @extschema@.idgen_seq_drop(text) IS
    'forget a key; true if it existed (admin)';
COMMENT ON FUNCTION @extschema@.idgen_seq_latest(text, bigint, boolean) IS
    'the last value of a key this transaction advanced, else the value given; NULL if none handed out (behind the idgen_seq_keys view)';
COMMENT ON FUNCTION @extschema@.idgen_seq_served(bigint) IS
    'how a key with this cache setting is served in this database, and why a cached key is not (behind the idgen_seq_keys view)';
COMMENT ON FUNCTION @extschema@.idgen_seq_purge() IS
    'delete the keys whose ttl has passed; how many (admin)';
COMMENT ON FUNCTION @extschema@.idgen_seq_cache() IS
    'cached keys of this database in shared memory (behind the idgen_seq_cache view)';
COMMENT ON VIEW @extschema@.idgen_seq_cache IS
    'cached keys of this database in shared memory, with their segments and counters (admin)';
COMMENT ON VIEW @extschema@.idgen_seq_keys IS
    'per-key sequences with their value, options, expiry and creator (admin)';
COMMENT ON FUNCTION @extschema@.idgen_worker_acquire(text, interval, bigint, boolean) IS
    'lease a free worker id for a Snowflake generator outside the database (granted roles)';
COMMENT ON FUNCTION @extschema@.idgen_worker_renew(bigint, bigint, interval, timestamptz) IS
    'extend a worker-id lease; an error if it was lost (granted roles)';
COMMENT ON FUNCTION @extschema@.idgen_worker_release(bigint, bigint, timestamptz) IS
    'end a worker-id lease; false if already released (granted roles)';
COMMENT ON FUNCTION @extschema@.idgen_worker_purge() IS
    'end the leases of closed sessions and delete the leases whose id has rested (admin)';
COMMENT ON FUNCTION @extschema@.idgen_worker_reset_horizon(bigint, bigint, timestamptz) IS
    'set the horizon of an id whose lease has ended; the horizon it had (admin)';
COMMENT ON VIEW @extschema@.idgen_worker_leases IS
    'every worker-id lease with its state: held, quarantine or free (admin)';
COMMENT ON FUNCTION @extschema@.idgen_server_lease(bigint, text, interval, bigint, bigint, timestamptz) IS
    'on a registry: lease a server''s Snowflake identity (granted to the registry role)';
COMMENT ON FUNCTION @extschema@.idgen_stats() IS
    'counters per kind of ID (behind the idgen_stats view)';
COMMENT ON VIEW @extschema@.idgen_stats IS
    'IDs generated, borrowed milliseconds, clock steps back, waits and errors per kind of ID';
COMMENT ON FUNCTION @extschema@.idgen_stats_reset() IS
    'restart the counters of idgen_stats (admin)';
COMMENT ON FUNCTION @extschema@.idgen_info() IS
    'effective layout, identity, capacity, the durable horizon and replication state of this server';
COMMENT ON FUNCTION @extschema@.idgen_identity() IS
    'where this server''s Snowflake identity comes from and, when leased from a registry, the lease';
COMMENT ON TABLE @extschema@.idgen_seq IS
    'per-key sequences, one row per key; written only through the idgen_seq_* functions';
COMMENT ON TABLE @extschema@.idgen_worker_lease IS
    'worker-id leases, one row per id ever leased; written only through the idgen_worker_* functions';

-- ==========================================================================
-- Logical replication: merging a publisher's idgen rows
-- (docs/logical-replication.md)
-- ==========================================================================
-- A publication FOR ALL TABLES publishes idgen_seq and idgen_worker_lease
-- with the application's tables, and a subscriber that has idgen has rows
-- of its own in them: its own keys and leases, or another publisher's.  A
-- plain copy of those rows would fail on the primary keys (two publishers
-- with the same key, or a lease on the same worker id), and the
-- subscription's sync would fail and start again forever.  So each table
-- has a trigger enabled as a REPLICA trigger: it fires only where
-- session_replication_role is 'replica', which logical replication's apply
-- and table sync workers set (the sync's COPY fires row triggers as any
-- COPY does), and never in ordinary use ('origin').  It merges what
-- arrives with what is there instead of conflicting:
--
--   idgen_seq: a key's value never goes back.  An arriving key that exists
--   is updated, not inserted; an update keeps the value further on in the
--   key's direction (GREATEST, or LEAST for a negative step) of a key that
--   has handed out values on either side, and GREATEST(new, old)
--   last_used (so that a key with a ttl does not expire sooner); the key's
--   options (step, start, min_value, max_value, cycle, ttl, cache) are the
--   arriving ones, as with any replicated update: the last change wins.  created_by stays the
--   subscriber's, and a key that arrives new counts as the table owner's
--   (the extension's owner): a publisher's role oids mean nothing here.
--   Deletes are skipped (a publisher's purge, drop, or a second
--   publisher's absence of the key): the subscriber's own purge expires
--   keys with a ttl.  So after a switch of writes to the subscriber, every
--   key continues past the value any publisher reached, cached keys too
--   (a cached key's row is ahead of the values its server served).
--
--   idgen_worker_lease: one row per worker id.  Of a lease that arrives
--   and the one there, with different tokens, the one that ends later is
--   kept (its expiry, or its release if later, as lease.c counts a lease's
--   end; a held session-bound one, NULL end, last of all); the same lease (same token)
--   is updated as it arrives (renewed, released).  horizon and
--   handover_horizon are the greater of both: where the id's next holder
--   starts, never lowered.  Deletes are skipped.  So a worker id some
--   publisher's holder still generates with stays taken on the subscriber
--   until that lease ends and rests.  (A session-bound lease's session is
--   not on the subscriber: its purge ends such a lease there.)
--
-- The merge is an INSERT ... ON CONFLICT run from the trigger, whose update
-- the BEFORE UPDATE part merges: two subscriptions' workers writing the
-- same key or id wait for each other rather than fail; that INSERT's own
-- row (trigger depth > 1) goes in as it is.  The workers run with an empty
-- search_path; the functions set their own and qualify idgen's tables.
-- idgen's own writes to idgen_seq bypass the executor and fire no trigger;
-- they accept this one on the table, and no other (seq_row.c).
--
-- A data-only restore with pg_dump's --disable-triggers ends with ALTER
-- TABLE ... ENABLE TRIGGER ALL, which makes these triggers ordinary ones:
-- they then check session_replication_role themselves and do nothing in
-- ordinary use; ALTER TABLE ... ENABLE REPLICA TRIGGER makes them merge
-- again (README, Troubleshooting).
CREATE FUNCTION @extschema@.idgen_seq_replica_trigger()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF pg_catalog.current_setting('session_replication_role') <> 'replica' THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF pg_catalog.pg_trigger_depth() > 1 THEN
            -- the row of the INSERT below, for a key new here
            NEW.created_by := (SELECT c.relowner FROM pg_catalog.pg_class c
                               WHERE c.oid = TG_RELID);
            RETURN NEW;
        END IF;
        INSERT INTO @extschema@.idgen_seq AS s
            (key, step, start, min_value, max_value, cycle, ttl, last_used,
             cache, created_by, called, value)
        VALUES (NEW.key, NEW.step, NEW.start, NEW.min_value, NEW.max_value,
                NEW.cycle, NEW.ttl, NEW.last_used, NEW.cache, NEW.created_by,
                NEW.called, NEW.value)
        ON CONFLICT (key) DO UPDATE
            SET step = excluded.step, start = excluded.start,
                min_value = excluded.min_value, max_value = excluded.max_value,
                cycle = excluded.cycle, ttl = excluded.ttl,
                last_used = excluded.last_used, cache = excluded.cache,
                called = excluded.called, value = excluded.value;
        RETURN NULL;
    ELSIF TG_OP = 'UPDATE' THEN
        NEW.key := OLD.key;
        -- the value further on in the key's direction, of a key that has
        -- handed out values on either side
        IF OLD.called AND NOT NEW.called THEN
            NEW.called := true;
            NEW.value := OLD.value;
        ELSIF OLD.called AND NEW.step < 0 THEN
            NEW.value := LEAST(NEW.value, OLD.value);
        ELSIF OLD.called THEN
            NEW.value := GREATEST(NEW.value, OLD.value);
        END IF;
        NEW.last_used := GREATEST(NEW.last_used, OLD.last_used);
        NEW.created_by := OLD.created_by;
        RETURN NEW;
    END IF;
    RETURN NULL;
END
$fn$;

CREATE FUNCTION @extschema@.idgen_worker_lease_replica_trigger()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    merged_horizon timestamptz;
    merged_handover timestamptz;
BEGIN
    IF pg_catalog.current_setting('session_replication_role') <> 'replica' THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF pg_catalog.pg_trigger_depth() > 1 THEN
            RETURN NEW;     -- the row of the INSERT below, for an id new here
        END IF;
        -- A token is unique; two servers' clocks giving the same tick to
        -- leases of different ids is not impossible: keep the row there.
        IF EXISTS (SELECT FROM @extschema@.idgen_worker_lease l
                   WHERE l.token = NEW.token AND l.id <> NEW.id) THEN
            RETURN NULL;
        END IF;
        INSERT INTO @extschema@.idgen_worker_lease AS l
            (id, holder, token, ttl, session_bound, acquired_by, acquired_at,
             renewed_at, expires_at, released_at, system_identifier, horizon,
             handover_horizon)
        VALUES (NEW.id, NEW.holder, NEW.token, NEW.ttl, NEW.session_bound,
                NEW.acquired_by, NEW.acquired_at, NEW.renewed_at, NEW.expires_at,
                NEW.released_at, NEW.system_identifier, NEW.horizon,
                NEW.handover_horizon)
        ON CONFLICT (id) DO UPDATE
            SET holder = excluded.holder, token = excluded.token, ttl = excluded.ttl,
                session_bound = excluded.session_bound,
                acquired_by = excluded.acquired_by, acquired_at = excluded.acquired_at,
                renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
                released_at = excluded.released_at,
                system_identifier = excluded.system_identifier,
                horizon = excluded.horizon, handover_horizon = excluded.handover_horizon;
        RETURN NULL;
    ELSIF TG_OP = 'UPDATE' THEN
        merged_horizon := GREATEST(NEW.horizon, OLD.horizon);
        merged_handover := GREATEST(NEW.handover_horizon, OLD.handover_horizon);
        IF NEW.token <> OLD.token
           AND (COALESCE(GREATEST(NEW.released_at, NEW.expires_at), 'infinity')
                < COALESCE(GREATEST(OLD.released_at, OLD.expires_at), 'infinity')
                OR EXISTS (SELECT FROM @extschema@.idgen_worker_lease l
                           WHERE l.token = NEW.token AND l.id <> OLD.id)) THEN
            NEW := OLD;
        END IF;
        NEW.id := OLD.id;
        NEW.horizon := merged_horizon;
        NEW.handover_horizon := merged_handover;
        RETURN NEW;
    END IF;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER idgen_seq_replica
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.idgen_seq
    FOR EACH ROW EXECUTE FUNCTION @extschema@.idgen_seq_replica_trigger();
ALTER TABLE @extschema@.idgen_seq ENABLE REPLICA TRIGGER idgen_seq_replica;
CREATE TRIGGER idgen_worker_lease_replica
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.idgen_worker_lease
    FOR EACH ROW EXECUTE FUNCTION @extschema@.idgen_worker_lease_replica_trigger();
ALTER TABLE @extschema@.idgen_worker_lease ENABLE REPLICA TRIGGER idgen_worker_lease_replica;

COMMENT ON FUNCTION @extschema@.idgen_seq_replica_trigger() IS
    'trigger on idgen_seq, fires in logical replication only: merges a publisher''s keys, values never lowered';
COMMENT ON FUNCTION @extschema@.idgen_worker_lease_replica_trigger() IS
    'trigger on idgen_worker_lease, fires in logical replication only: keeps the lease that ends later';

-- Identity claims (active.c, docs/active-active.md): each primary writes
-- its Snowflake identity here, one row per server (its system identifier),
-- from the idgen sequencer; replication carries the rows to the other
-- nodes with the data.  A trigger enabled ALWAYS (it fires in replication's
-- workers too) stops this server's Snowflake generation when a row claims
-- its identity for another server.  Not dumped: a restored copy claims its
-- own identity, and must not meet the claim of the server it was copied
-- from.  Private to the extension's owner, as the other tables.
CREATE TABLE @extschema@.idgen_identity_claim (
    system_identifier bigint PRIMARY KEY,
    datacenter_id int NOT NULL,
    worker_id int NOT NULL,
    instance text NOT NULL,
    -- when the server last wrote it (anew at every purge)
    announced_at timestamptz NOT NULL
);
REVOKE ALL ON @extschema@.idgen_identity_claim FROM PUBLIC;

CREATE FUNCTION @extschema@.idgen_identity_announce()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_identity_announce'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.idgen_identity_announce() FROM PUBLIC;

CREATE FUNCTION @extschema@.idgen_identity_claim_check()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idgen_identity_claim_check'
LANGUAGE C;
CREATE TRIGGER idgen_identity_claim_check
    BEFORE INSERT OR UPDATE ON @extschema@.idgen_identity_claim
    FOR EACH ROW EXECUTE FUNCTION @extschema@.idgen_identity_claim_check();
ALTER TABLE @extschema@.idgen_identity_claim ENABLE ALWAYS TRIGGER idgen_identity_claim_check;

COMMENT ON TABLE @extschema@.idgen_identity_claim IS
    'each server''s Snowflake identity, one row per server, carried by logical replication; another server''s claim to this one''s stops its generation';
COMMENT ON FUNCTION @extschema@.idgen_identity_announce() IS
    'write this server''s identity claim and look for another server''s claim to it (the idgen sequencer calls it)';
COMMENT ON FUNCTION @extschema@.idgen_identity_claim_check() IS
    'trigger on idgen_identity_claim, enabled ALWAYS: another server''s claim to this server''s identity stops its generation';

-- Public IDs (public.c): a keyed permutation of IDs, for showing them
-- outside.  The keys, one row per version, belong to the extension's owner
-- and are granted to nobody; the functions read them as that owner.  Made
-- by idgen_public_rotate(), or brought by idgen_public_key_import(), a
-- restore or a subscription; retired by idgen_public_retire(); dumped with
-- the data, for the administrator.  CREATE EXTENSION makes none: a key made
-- here at install would meet the one a restore or a subscription brings
-- under the same version, and no server can tell whether forms of its own
-- were handed out (docs/public-ids.md, "One key per version").
CREATE TABLE @extschema@.idgen_public_key (
    version int PRIMARY KEY CHECK (version BETWEEN 1 AND 31),
    key bytea NOT NULL CHECK (pg_catalog.octet_length(key) OPERATOR(pg_catalog.=) 16),
    created_at timestamptz NOT NULL,
    retired_at timestamptz
);
REVOKE ALL ON @extschema@.idgen_public_key FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idgen_public_key', '');
-- ANALYZE would copy the keys into pg_statistic (the most common values of
-- a ten-row column are all of them), and keep them there after a
-- retirement.
ALTER TABLE @extschema@.idgen_public_key ALTER COLUMN key SET STATISTICS 0;

-- One version, one key, forever: a form names only its version, so a
-- version made twice, or given another key, would decode the forms made
-- before to other IDs.  The rows are therefore never deleted (a version
-- is retired, its row kept), so the greatest version ever made stays in
-- the table and idgen_public_rotate() makes the next one above it.  Every
-- write passes this trigger, enabled ALWAYS so that it fires in logical
-- replication's apply and table sync workers too:
--
--   - INSERT of a version not here (a restore, a subscription, an import,
--     an administrator): inserted.  A version not here was never here.
--   - INSERT or UPDATE bringing the key a version has here: merged; a
--     retirement on either side stays (retired_at is never cleared), and
--     nothing else changes.
--   - INSERT or UPDATE bringing another key for a version here: refused
--     (23505) in ordinary sessions, which changes nothing (a restore or an
--     import into a server with keys of its own).  In replication
--     (session_replication_role 'replica'), where an error would stop the
--     subscription and start it again forever, the row here is kept and
--     retired, with a WARNING: forms of that version, this server's and
--     the other's, no longer decode here, rather than one of them to other
--     IDs.
--   - UPDATE of the version number, DELETE, TRUNCATE: refused (55000); a
--     DELETE arriving by replication is skipped.  A TRUNCATE cannot be
--     skipped: the publisher's own trigger refuses it there first.
CREATE FUNCTION @extschema@.idgen_public_key_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    replica boolean := pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.=) 'replica';
    here @extschema@.idgen_public_key;
    retired timestamptz;
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'TRUNCATE' THEN
        RAISE EXCEPTION 'cannot truncate idgen_public_key'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A public ID key version is never made twice, so its row is kept for good.',
                  HINT = 'Retire a version with idgen_public_retire(version).';
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        IF replica THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION 'cannot delete public ID key version %', OLD.version
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A public ID key version is never made twice, so its row is kept for good.',
                  HINT = 'Retire it with idgen_public_retire(version): its forms are then refused.';
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        IF NEW.version OPERATOR(pg_catalog.<>) OLD.version THEN
            RAISE EXCEPTION 'cannot renumber public ID key version %', OLD.version
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'Public IDs name their key version: renumbered, it would decode them to other IDs.';
        END IF;
        here := OLD;
    ELSE
        SELECT * INTO here FROM @extschema@.idgen_public_key k
        WHERE k.version OPERATOR(pg_catalog.=) NEW.version FOR UPDATE;
        IF NOT FOUND THEN
            RETURN NEW;
        END IF;
    END IF;

    IF NEW.key OPERATOR(pg_catalog.=) here.key THEN
        -- The same key: a retirement on either side stays.
        retired := CASE WHEN here.retired_at IS NULL THEN NEW.retired_at
                        WHEN NEW.retired_at IS NULL THEN here.retired_at
                        ELSE LEAST(here.retired_at, NEW.retired_at) END;
    ELSIF replica THEN
        RAISE WARNING 'public ID key version % arrived with another key than this server''s', NEW.version
            USING DETAIL = 'The version is retired here: its forms, made here or there, are refused rather than decoded to other IDs.',
                  HINT = 'Servers that read each other''s public IDs share their keys (idgen_public_key_export() and idgen_public_key_import()) and rotate on one of them only.';
        retired := COALESCE(here.retired_at, pg_catalog.now());
    ELSE
        RAISE EXCEPTION 'public ID key version % exists here with another key', NEW.version
            USING ERRCODE = 'unique_violation',
                  DETAIL = 'Forms of this version made here would decode to other IDs with the key given.',
                  HINT = 'Share keys before either server makes one: import into a server that has none, or whose versions are the same.';
    END IF;

    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        NEW := OLD;
        NEW.retired_at := retired;
        RETURN NEW;
    END IF;
    IF retired IS DISTINCT FROM here.retired_at THEN
        UPDATE @extschema@.idgen_public_key k SET retired_at = retired
        WHERE k.version OPERATOR(pg_catalog.=) NEW.version;
    END IF;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER idgen_public_key_guard BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.idgen_public_key
    FOR EACH ROW EXECUTE FUNCTION @extschema@.idgen_public_key_guard();
ALTER TABLE @extschema@.idgen_public_key ENABLE ALWAYS TRIGGER idgen_public_key_guard;
CREATE TRIGGER idgen_public_key_no_truncate BEFORE TRUNCATE ON @extschema@.idgen_public_key
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.idgen_public_key_guard();
ALTER TABLE @extschema@.idgen_public_key ENABLE ALWAYS TRIGGER idgen_public_key_no_truncate;

-- Every write to the keys drops every backend's cached keys (public.c).
CREATE FUNCTION @extschema@.idgen_public_key_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idgen_public_key_changed'
LANGUAGE C;
CREATE TRIGGER idgen_public_key_changed AFTER INSERT OR UPDATE OR DELETE ON @extschema@.idgen_public_key
    FOR EACH ROW EXECUTE FUNCTION @extschema@.idgen_public_key_changed();
ALTER TABLE @extschema@.idgen_public_key ENABLE ALWAYS TRIGGER idgen_public_key_changed;

-- STABLE: the result depends on the key, which changes only between
-- statements; not IMMUTABLE, so not in index or generated-column
-- expressions (store the ID, compute the public form in a view or the
-- application).  PARALLEL RESTRICTED: the keys are read by the session.
CREATE FUNCTION @extschema@.idgen_public(id bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'idgen_public'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION @extschema@.idgen_private(public text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_private'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION @extschema@.idgen_public_bigint(id bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_public_bigint'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION @extschema@.idgen_private_bigint(public bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_private_bigint'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION @extschema@.idgen_private_bigint(public bigint, version bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_private_bigint'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION @extschema@.idgen_public_rotate()
RETURNS int
AS 'MODULE_PATHNAME', 'idgen_public_rotate'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.idgen_public_retire(version bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idgen_public_retire'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- Sharing keys among servers that read each other's forms: the export on
-- one, the import on the others, before those make keys of their own.  Both
-- run with the caller's rights (not SECURITY DEFINER) and read or write
-- idgen_public_key as the caller: only a role that may already read the
-- keys (the owner, superusers) exports them, and only one that may write
-- them imports.  Neither is granted to PUBLIC.  No message quotes a key.
CREATE FUNCTION @extschema@.idgen_public_key_export()
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'version', k.version,
               'key', encode(k.key, 'hex'),
               'created_at', k.created_at,
               'retired_at', k.retired_at) ORDER BY k.version), '[]'::jsonb)
    FROM @extschema@.idgen_public_key k
$fn$;

CREATE FUNCTION @extschema@.idgen_public_key_import(keys jsonb)
RETURNS int
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    e jsonb;
    bad boolean;
    before bigint;
    after bigint;
BEGIN
    IF jsonb_typeof(keys) OPERATOR(pg_catalog.<>) 'array' THEN
        RAISE EXCEPTION 'invalid public ID keys'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The keys are a JSON array, as idgen_public_key_export() returns them.';
    END IF;
    -- Every element is checked here, before the INSERT, so that no error
    -- of the INSERT quotes a row: a NOT NULL or CHECK violation's detail
    -- ("Failing row contains ...") would show the key.  Each test is false,
    -- never NULL, for a field that is missing, and the times are cast here,
    -- where a failure is caught rather than quoted.
    FOR e IN SELECT * FROM jsonb_array_elements(keys) LOOP
        bad := jsonb_typeof(e) OPERATOR(pg_catalog.<>) 'object'
           OR NOT COALESCE((e OPERATOR(pg_catalog.->>) 'version') OPERATOR(pg_catalog.~) '^([1-9]|[12][0-9]|3[01])$', false)
           OR jsonb_typeof(e OPERATOR(pg_catalog.->) 'key') IS DISTINCT FROM 'string'
           OR NOT COALESCE((e OPERATOR(pg_catalog.->>) 'key') OPERATOR(pg_catalog.~) '^[0-9a-fA-F]{32}$', false)
           OR jsonb_typeof(e OPERATOR(pg_catalog.->) 'created_at') IS DISTINCT FROM 'string'
           OR COALESCE(jsonb_typeof(e OPERATOR(pg_catalog.->) 'retired_at'), 'null') NOT IN ('string', 'null');
        IF NOT bad THEN
            BEGIN
                PERFORM (e OPERATOR(pg_catalog.->>) 'created_at')::timestamptz,
                        (e OPERATOR(pg_catalog.->>) 'retired_at')::timestamptz;
            EXCEPTION WHEN data_exception THEN
                bad := true;
            END;
        END IF;
        IF bad THEN
            -- (the element is not quoted: it may hold a key)
            RAISE EXCEPTION 'invalid public ID keys'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'Each element has a version (1 to 31), a key (32 hexadecimal digits), a created_at and a retired_at (a timestamp or null), as idgen_public_key_export() returns them.';
        END IF;
    END LOOP;
    -- Under the lock rotations take, so that none makes a version between
    -- the count and the insert.
    LOCK TABLE @extschema@.idgen_public_key IN SHARE ROW EXCLUSIVE MODE;
    SELECT count(*) INTO before FROM @extschema@.idgen_public_key;
    -- idgen_public_key_guard merges each version that is here with the same
    -- key, and refuses the whole if one is here with another.
    INSERT INTO @extschema@.idgen_public_key (version, key, created_at, retired_at)
    SELECT (x OPERATOR(pg_catalog.->>) 'version')::int, decode(x OPERATOR(pg_catalog.->>) 'key', 'hex'),
           (x OPERATOR(pg_catalog.->>) 'created_at')::timestamptz,
           (x OPERATOR(pg_catalog.->>) 'retired_at')::timestamptz
    FROM jsonb_array_elements(keys) x
    ORDER BY 1;
    SELECT count(*) INTO after FROM @extschema@.idgen_public_key;
    RETURN after OPERATOR(pg_catalog.-) before;
END
$fn$;

CREATE FUNCTION @extschema@.idgen_speck64(key bytea, block bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idgen_speck64'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.idgen_public(bigint) IS
    'the public form of an ID: 15 URL-safe characters, a keyed permutation with the key version and a check character';
COMMENT ON FUNCTION @extschema@.idgen_private(text) IS
    'the ID a public form stands for';
COMMENT ON FUNCTION @extschema@.idgen_public_bigint(bigint) IS
    'the keyed permutation of a non-negative bigint, with the current key';
COMMENT ON FUNCTION @extschema@.idgen_private_bigint(bigint) IS
    'the bigint a numeric public form stands for, with the current key';
COMMENT ON FUNCTION @extschema@.idgen_private_bigint(bigint, bigint) IS
    'the bigint a numeric public form stands for, with the given key version';
COMMENT ON FUNCTION @extschema@.idgen_public_rotate() IS
    'makes a new current public ID key and returns its version';
COMMENT ON FUNCTION @extschema@.idgen_public_retire(bigint) IS
    'retires a public ID key version: its forms no longer decode';
COMMENT ON FUNCTION @extschema@.idgen_public_key_guard() IS
    'trigger on idgen_public_key: one key per version forever; merges a restored, replicated or imported version, refuses another key for it, and deletes';
COMMENT ON FUNCTION @extschema@.idgen_public_key_export() IS
    'every public ID key version, with its key, as jsonb for idgen_public_key_import on another server (reads idgen_public_key with the caller''s rights)';
COMMENT ON FUNCTION @extschema@.idgen_public_key_import(jsonb) IS
    'adds the key versions of an idgen_public_key_export; refuses the whole if a version exists here with another key';
COMMENT ON FUNCTION @extschema@.idgen_public_key_changed() IS
    'trigger on idgen_public_key: every write drops the keys every backend cached';
COMMENT ON FUNCTION @extschema@.idgen_speck64(bytea, bigint) IS
    'the Speck64/128 block cipher on one block (to check it against published test vectors)';

-- Privileges.  Every object above was created with the installing role's
-- default privileges (ALTER DEFAULT PRIVILEGES, for every schema or for
-- this one), which may grant EXECUTE, or ALL on the tables, to other roles,
-- or take PUBLIC's EXECUTE or the owner's own privileges away.  Whatever
-- they did: every role but the owner loses what it holds on the extension's
-- objects (on their columns too), the owner gets back what an owner holds,
-- and PUBLIC is granted what the README's attack surface table lists, so
-- that the extension starts with exactly those privileges
-- (test/t/017_attack_surface.pl).  Run while this script runs, the statements
-- are recorded as the objects' initial privileges (pg_init_privs), which
-- pg_dump leaves alone.
DO $$
DECLARE
    stmt pg_catalog.text;
BEGIN
    FOR stmt IN
        WITH dep AS (
            -- the extension's members
            SELECT d.classid, d.objid
            FROM pg_catalog.pg_depend d
            WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
              AND d.refobjid OPERATOR(pg_catalog.=)
                  (SELECT e.oid FROM pg_catalog.pg_extension e
                   WHERE e.extname OPERATOR(pg_catalog.=) 'idgen')
              AND d.deptype OPERATOR(pg_catalog.=) 'e'
        ),
        member AS (
            SELECT 'FUNCTION' AS kind, p.oid::pg_catalog.regprocedure::pg_catalog.text AS name,
                   p.proowner AS owner,
                   COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner)) AS acl,
                   NULL::pg_catalog.oid AS rel
            FROM dep d
            JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
            WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
            UNION ALL
            SELECT 'TABLE', c.oid::pg_catalog.regclass::pg_catalog.text, c.relowner,
                   COALESCE(c.relacl, pg_catalog.acldefault('r', c.relowner)),
                   c.oid
            FROM dep d
            JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid
            WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
        ),
        -- every role but the owner that holds a privilege on the object or
        -- on one of its columns (a relation-level REVOKE revokes the
        -- column privileges too), PUBLIC included
        holder AS (
            SELECT DISTINCT m.kind, m.name, a.grantee
            FROM member m,
                 LATERAL (SELECT x.grantee FROM pg_catalog.aclexplode(m.acl) x
                          UNION ALL
                          SELECT x.grantee
                          FROM pg_catalog.pg_attribute t,
                               LATERAL pg_catalog.aclexplode(t.attacl) x
                          WHERE t.attrelid OPERATOR(pg_catalog.=) m.rel
                            AND t.attacl IS NOT NULL) a
            WHERE a.grantee OPERATOR(pg_catalog.<>) m.owner
        )
        SELECT pg_catalog.format('REVOKE ALL ON %s %s FROM %s CASCADE', h.kind, h.name,
                   CASE WHEN h.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
                        ELSE h.grantee::pg_catalog.regrole::pg_catalog.text END)
        FROM holder h
        UNION ALL
        SELECT pg_catalog.format('GRANT ALL ON %s %s TO %s', m.kind, m.name,
                   m.owner::pg_catalog.regrole::pg_catalog.text)
        FROM member m
    LOOP
        EXECUTE stmt;
    END LOOP;
END
$$;

-- What PUBLIC may use (the README's attack surface table): generating and
-- reading IDs, and the counters.
GRANT EXECUTE ON FUNCTION
    @extschema@.idgen_snowflake(),
    @extschema@.idgen_snowflake(bigint),
    @extschema@.idgen_snowflake_trigger(),
    @extschema@.idgen_snowflake_row(),
    @extschema@.idgen_snowflake_row(bigint),
    @extschema@.idgen_public(bigint),
    @extschema@.idgen_private(text),
    @extschema@.idgen_public_bigint(bigint),
    @extschema@.idgen_private_bigint(bigint),
    @extschema@.idgen_private_bigint(bigint, bigint),
    @extschema@.idgen_speck64(bytea, bigint),
    @extschema@.idgen_gene(bigint),
    @extschema@.idgen_gene(bigint, bigint),
    @extschema@.idgen_snowflake_decode(bigint),
    @extschema@.idgen_snowflake_time(bigint),
    @extschema@.idgen_snowflake_min(timestamptz),
    @extschema@.idgen_snowflake_compose(timestamptz, bigint, bigint, bigint, bigint),
    @extschema@.idgen_snowflake_debug(bigint),
    @extschema@.idgen_snowflake_last(),
    @extschema@.idgen_uuid7(),
    @extschema@.idgen_uuid7_last(),
    @extschema@.idgen_uuid7(timestamptz),
    @extschema@.idgen_uuid7_shifted(interval),
    @extschema@.idgen_uuid7_min(timestamptz),
    @extschema@.idgen_uuid7_time(uuid),
    @extschema@.idgen_uuid_version(uuid),
    @extschema@.idgen_expiry(timestamptz, interval),
    @extschema@.idgen_seq_latest(text, bigint, boolean),
    @extschema@.idgen_seq_served(bigint),
    @extschema@.idgen_stats(),
    @extschema@.idgen_info(),
    @extschema@.idgen_identity()
    TO PUBLIC;
GRANT SELECT ON @extschema@.idgen_stats TO PUBLIC;
