/* idgen--1.0.0--1.0.1.sql: from 1.0.0 to 1.0.1. */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idgen UPDATE TO '1.0.1'" to load this file. \quit

-- The claims' trigger fires before the row is written, not after:
-- pglogical's apply worker left the relation it opened for an AFTER
-- trigger's queue unclosed, a "relcache reference leak" WARNING at every
-- claim it applied.  Dropped and made again in this transaction, which
-- holds the table's lock meanwhile: no claim passes unchecked.
DROP TRIGGER idgen_identity_claim_check ON @extschema@.idgen_identity_claim;
CREATE TRIGGER idgen_identity_claim_check
    BEFORE INSERT OR UPDATE ON @extschema@.idgen_identity_claim
    FOR EACH ROW EXECUTE FUNCTION @extschema@.idgen_identity_claim_check();
ALTER TABLE @extschema@.idgen_identity_claim ENABLE ALWAYS TRIGGER idgen_identity_claim_check;

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
-- Only its owner may run it, as in a fresh install, whatever default
-- privileges (ALTER DEFAULT PRIVILEGES) the updating role has: every
-- other role's privilege on it revoked, PUBLIC's included, and the
-- owner's given back.
DO $$
DECLARE
    steps pg_catalog.regprocedure :=
        '@extschema@.idgen_convert_column_steps(pg_catalog.regclass, pg_catalog.name, pg_catalog.int8)';
    stmt pg_catalog.text;
BEGIN
    FOR stmt IN
        SELECT pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %s CASCADE', steps,
                   CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
                        ELSE x.grantee::pg_catalog.regrole::pg_catalog.text END)
        FROM pg_catalog.pg_proc p,
             LATERAL pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) x
        WHERE p.oid OPERATOR(pg_catalog.=) steps AND x.grantee OPERATOR(pg_catalog.<>) p.proowner
        UNION ALL
        SELECT pg_catalog.format('GRANT ALL ON FUNCTION %s TO %s', steps,
                   p.proowner::pg_catalog.regrole::pg_catalog.text)
        FROM pg_catalog.pg_proc p
        WHERE p.oid OPERATOR(pg_catalog.=) steps
    LOOP
        EXECUTE stmt;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.idgen_convert_column(tbl regclass, col name)
RETURNS TABLE (relation regclass, column_name name, change text)
AS 'MODULE_PATHNAME', 'idgen_convert_column'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.idgen_convert_column_steps(regclass, name, bigint) IS
    'the checks and changes of idgen_convert_column() but its default, which calls it';
