--
-- The last ID this session generated: idgen_snowflake_last() and
-- idgen_uuid7_last(), with currval()'s rules.  First in a session of its
-- own, so nothing has been generated yet.
--
\set VERBOSITY default
SELECT idgen_snowflake_last();
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_uuid7_last();
\echo :LAST_ERROR_SQLSTATE

-- An INSERT with the default: the last ID is the row's, and lastval() is
-- the sequence's, untouched.
CREATE SEQUENCE last_seq;
SELECT nextval('last_seq') AS seq_value;
CREATE TABLE last_rows (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), v text);
INSERT INTO last_rows (v) VALUES ('a') RETURNING id AS inserted \gset
SELECT idgen_snowflake_last() = :inserted AS last_is_the_row, lastval() AS lastval;

-- Every way of generating counts: the gene forms, the trigger.
SELECT idgen_snowflake(0) AS with_gene \gset
SELECT idgen_snowflake_last() = :with_gene AS gene_form;
CREATE TABLE last_trigger (id bigint PRIMARY KEY, v text);
CREATE TRIGGER fill BEFORE INSERT ON last_trigger
    FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id');
INSERT INTO last_trigger (v) VALUES ('b') RETURNING id AS by_trigger \gset
SELECT idgen_snowflake_last() = :by_trigger AS trigger_form;

-- A rollback does not take it back (as currval); an explicit ID leaves it.
BEGIN;
SELECT idgen_snowflake() AS rolled_back \gset
ROLLBACK;
SELECT idgen_snowflake_last() = :rolled_back AS kept_across_rollback;
INSERT INTO last_rows (id, v) VALUES (1, 'explicit');
SELECT idgen_snowflake_last() = :rolled_back AS explicit_id_leaves_it;

-- UUIDv7: idgen_uuid7() counts, idgen_uuid7(ts) (built for a time) does not.
SELECT idgen_uuid7() AS made \gset
SELECT idgen_uuid7(timestamptz '2020-01-01') IS NOT NULL AS backfill;
SELECT idgen_uuid7_last() = :'made' AS uuid_last_is_the_generated_one;

DROP TABLE last_rows, last_trigger;
DROP SEQUENCE last_seq;

-- DISCARD resets them as it resets currval() and lastval(): a pooler's
-- server_reset_query (DISCARD ALL) hands the next client a session where
-- nothing has been generated yet.  DISCARD SEQUENCES too; DISCARD PLANS
-- and DISCARD TEMP leave them, as they leave a sequence's.
CREATE SEQUENCE discard_seq;
SELECT nextval('discard_seq') AS seq_value \gset
SELECT idgen_snowflake() AS kept \gset
SELECT idgen_uuid7() AS kept_uuid \gset
DISCARD PLANS;
DISCARD TEMP;
SELECT idgen_snowflake_last() = :kept AS kept_by_plans_and_temp,
       idgen_uuid7_last() = :'kept_uuid' AS uuid_kept_by_plans_and_temp,
       currval('discard_seq') = :seq_value AS currval_kept;
-- DISCARD ALL cannot run in a transaction block, and then resets nothing.
BEGIN;
DISCARD ALL;
ROLLBACK;
SELECT idgen_snowflake_last() = :kept AS kept_after_refused_discard_all;
DISCARD ALL;
SELECT currval('discard_seq');
SELECT idgen_snowflake_last();
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_uuid7_last();
\echo :LAST_ERROR_SQLSTATE
-- Generated again, defined again.
SELECT idgen_snowflake() AS again \gset
SELECT idgen_snowflake_last() = :again AS defined_again;
SELECT idgen_uuid7() AS again_uuid \gset
SELECT idgen_uuid7_last() = :'again_uuid' AS uuid_defined_again;
-- DISCARD SEQUENCES, even in a transaction that then rolls back (as for a
-- sequence, the reset is not transactional).
SELECT nextval('discard_seq') AS seq_value \gset
BEGIN;
DISCARD SEQUENCES;
ROLLBACK;
SELECT currval('discard_seq');
SELECT idgen_snowflake_last();
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_uuid7_last();
\echo :LAST_ERROR_SQLSTATE
DROP SEQUENCE discard_seq;
