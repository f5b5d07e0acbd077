--
-- idgen_convert_column: existing keys (serial, bigserial, identity) become
-- bigint DEFAULT idgen_snowflake(), with the foreign keys that refer to
-- them; what it cannot do is refused before anything changes.
--
-- (Errors without the PL/pgSQL context: its line numbers are no contract.)
\set SHOW_CONTEXT never

-- A schema with foreign keys: customers (serial) <- orders (bigserial,
-- customer_id int) <- lines (order_id bigint); invoices (int identity) <-
-- invoice_items (invoice_id int), itself referred to by a 1:1 note whose
-- key is its item's key.
CREATE TABLE customers (id serial PRIMARY KEY, name text);
CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, amount int);
CREATE TABLE lines (order_id bigint REFERENCES orders, n int);
CREATE TABLE invoices (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, total int);
CREATE TABLE invoice_items (id int PRIMARY KEY, invoice_id int REFERENCES invoices, what text);
CREATE TABLE invoice_item_notes (item_id smallint PRIMARY KEY REFERENCES invoice_items, note text);
-- A partitioned table may refer to a key: its column is widened with its
-- partitions'.
CREATE TABLE visits (customer_id int REFERENCES customers, at date) PARTITION BY RANGE (at);
CREATE TABLE visits_2026 PARTITION OF visits FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
INSERT INTO customers (name) SELECT 'c' || g FROM generate_series(1, 3) g;
INSERT INTO visits VALUES (2, '2026-11-26');
INSERT INTO orders (customer_id, amount) SELECT 1 + g % 3, g FROM generate_series(1, 5) g;
INSERT INTO lines SELECT id, 1 FROM orders;
INSERT INTO invoices (total) VALUES (10), (20);
INSERT INTO invoice_items VALUES (1, 1, 'a'), (2, 2, 'b');
INSERT INTO invoice_item_notes VALUES (1, 'n');

-- serial: the default and its sequence dropped, the column and the
-- foreign key referring to it widened, the default set.  (Rows say what
-- changed; the figures of the last are not shown.)
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('customers', 'id');
SELECT table_name, column_name, data_type, column_default
FROM information_schema.columns
WHERE table_name IN ('customers', 'orders', 'visits', 'visits_2026') AND column_name IN ('id', 'customer_id')
ORDER BY 1, 2;
SELECT count(*) AS customers_id_seq_left FROM pg_class WHERE relname = 'customers_id_seq';
-- Existing rows keep their values; a new one gets a Snowflake ID above them.
INSERT INTO customers (name) VALUES ('new') RETURNING id > 3 AS above_existing,
    (idgen_snowflake_decode(id)).worker_id = (SELECT worker_id FROM idgen_info()) AS a_snowflake;
SELECT array_agg(id ORDER BY id) FILTER (WHERE id <= 3) AS old_ids FROM customers;
-- The widened foreign keys take a Snowflake ID.
INSERT INTO orders (customer_id, amount) SELECT id, 99 FROM customers WHERE name = 'new';
INSERT INTO visits SELECT id, '2026-11-27' FROM customers WHERE name = 'new';

-- bigserial: nothing to widen, the default replaced.
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('orders', 'id');
INSERT INTO orders (customer_id, amount) VALUES (1, 1) RETURNING id > 1000000 AS snowflake;

-- identity: dropped with its sequence; int key widened, and the foreign
-- keys through invoice_items to the note (smallint) too, transitively only
-- where they refer to a widened column (invoice_items.id is not: it stays).
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('invoices', 'id');
SELECT table_name, column_name, data_type, is_identity
FROM information_schema.columns
WHERE table_name IN ('invoices', 'invoice_items', 'invoice_item_notes')
ORDER BY 1, 2;
INSERT INTO invoices (total) VALUES (30) RETURNING id > 2 AS above_existing;
-- A key referred to through a chain: invoice_items.id widens its note.
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('invoice_items', 'id');

-- What it refuses, each before any change (the column keeps its type).
-- A partitioned table, and a partition:
CREATE TABLE events (id serial, at date) PARTITION BY RANGE (at);
CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
SELECT * FROM idgen_convert_column('events', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_convert_column('events_2026', 'id');
\echo :LAST_ERROR_SQLSTATE
-- A view on the column (its type must change):
CREATE TABLE tickets (id serial PRIMARY KEY, title text);
CREATE VIEW open_tickets AS SELECT id, title FROM tickets;
SELECT * FROM idgen_convert_column('tickets', 'id');
\echo :LAST_ERROR_SQLSTATE
-- A view on a foreign key that would widen:
DROP VIEW open_tickets;
CREATE TABLE replies (id bigserial PRIMARY KEY, ticket_id int REFERENCES tickets);
CREATE VIEW replies_v AS SELECT ticket_id FROM replies;
SELECT * FROM idgen_convert_column('tickets', 'id');
\echo :LAST_ERROR_SQLSTATE
DROP VIEW replies_v;
-- A generated column using it:
ALTER TABLE tickets ADD COLUMN shard int GENERATED ALWAYS AS (id % 16) STORED;
SELECT * FROM idgen_convert_column('tickets', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT data_type, column_default LIKE 'nextval%' AS still_serial
FROM information_schema.columns WHERE table_name = 'tickets' AND column_name = 'id';
ALTER TABLE tickets DROP COLUMN shard;
-- Not an integer, no such column, a default of the user's, a view:
SELECT * FROM idgen_convert_column('tickets', 'title');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_convert_column('tickets', 'nope');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE counters (id int PRIMARY KEY DEFAULT 0);
SELECT * FROM idgen_convert_column('counters', 'id');
\echo :LAST_ERROR_SQLSTATE
CREATE VIEW tickets_v AS SELECT 1 AS id;
SELECT * FROM idgen_convert_column('tickets_v', 'id');
\echo :LAST_ERROR_SQLSTATE
-- Values already in the Snowflake range: a new ID could equal one.
CREATE TABLE imported (id bigint PRIMARY KEY);
INSERT INTO imported SELECT idgen_snowflake_min(now() + interval '1 day');
\set VERBOSITY terse
SELECT * FROM idgen_convert_column('imported', 'id');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT column_default IS NULL AS unchanged FROM information_schema.columns
WHERE table_name = 'imported' AND column_name = 'id';
-- Such values hidden from the table's owner by row-level security
-- (FORCE ROW LEVEL SECURITY; a superuser would see them all): the largest
-- value cannot be known, so the conversion is refused, not made as if the
-- hidden rows were not there.
CREATE ROLE regress_idgen_convert_rls;
GRANT CREATE ON SCHEMA public TO regress_idgen_convert_rls;
GRANT EXECUTE ON FUNCTION idgen_convert_column(regclass, name) TO regress_idgen_convert_rls;
SET ROLE regress_idgen_convert_rls;
CREATE TABLE rls_hidden (id bigint PRIMARY KEY);
INSERT INTO rls_hidden SELECT idgen_snowflake_min(now() + interval '1 day');
INSERT INTO rls_hidden VALUES (7);
CREATE POLICY rls_small ON rls_hidden USING (id < 1000);
ALTER TABLE rls_hidden ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
SELECT count(*) AS rows_the_owner_sees FROM rls_hidden;
\set VERBOSITY terse
SELECT * FROM idgen_convert_column('rls_hidden', 'id');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT column_default IS NULL AS unchanged FROM information_schema.columns
WHERE table_name = 'rls_hidden' AND column_name = 'id';
DROP TABLE rls_hidden;
RESET ROLE;
REVOKE ALL ON FUNCTION idgen_convert_column(regclass, name) FROM regress_idgen_convert_rls;
REVOKE ALL ON SCHEMA public FROM regress_idgen_convert_rls;
DROP ROLE regress_idgen_convert_rls;
-- Only the table's owner (ALTER TABLE's rule), and only those granted the
-- function.
CREATE ROLE regress_idgen_convert_stranger;
GRANT USAGE ON SCHEMA public TO regress_idgen_convert_stranger;
SET ROLE regress_idgen_convert_stranger;
SELECT * FROM idgen_convert_column('tickets', 'id');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION idgen_convert_column(regclass, name) TO regress_idgen_convert_stranger;
SET ROLE regress_idgen_convert_stranger;
\set VERBOSITY terse
SELECT * FROM idgen_convert_column('tickets', 'id');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
RESET ROLE;
-- And it all runs in the caller's transaction: a rollback undoes it.
BEGIN;
SELECT count(*) AS changes FROM idgen_convert_column('tickets', 'id');
ROLLBACK;
SELECT data_type, column_default LIKE 'nextval%' AS still_serial
FROM information_schema.columns WHERE table_name = 'tickets' AND column_name = 'id';

-- Another role's code never runs with the caller's rights.  PostgreSQL
-- evaluates the CHECK constraints of a table ALTER COLUMN ... TYPE
-- rewrites with the rights of the role running it.  regress_idgen_convert_writer holds
-- only GRANT ALL (so REFERENCES) on accounts; its own table refers to
-- accounts with a CHECK calling its own function, which records whom it
-- ran as and tries to make regress_idgen_convert_writer a superuser.  A superuser of
-- its own, regress_idgen_convert_admin, converts.
CREATE ROLE regress_idgen_convert_admin SUPERUSER;
SET ROLE regress_idgen_convert_admin;
CREATE TABLE accounts (id serial PRIMARY KEY, name text);
INSERT INTO accounts (name) VALUES ('a'), ('b');
CREATE ROLE regress_idgen_convert_writer;
GRANT ALL ON accounts TO regress_idgen_convert_writer;
CREATE SCHEMA convert_mal AUTHORIZATION regress_idgen_convert_writer;
SET ROLE regress_idgen_convert_writer;
CREATE TABLE convert_mal.ran (what text, as_writer boolean, as_superuser boolean);
CREATE FUNCTION convert_mal.f(v bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO convert_mal.ran
        SELECT 'check', current_user = 'regress_idgen_convert_writer', rolsuper FROM pg_roles WHERE rolname = current_user;
    BEGIN
        ALTER ROLE regress_idgen_convert_writer SUPERUSER;
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
    RETURN true;
END $$;
CREATE TABLE convert_mal.notes (account_id int REFERENCES accounts (id), CHECK (convert_mal.f(account_id)));
INSERT INTO convert_mal.notes VALUES (1);
SET ROLE regress_idgen_convert_admin;
-- Refused before any change, naming the table and its owner.
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('accounts', 'id');
\echo :LAST_ERROR_SQLSTATE
SELECT what, as_writer, as_superuser FROM convert_mal.ran;
SELECT rolsuper AS writer_is_superuser FROM pg_roles WHERE rolname = 'regress_idgen_convert_writer';
SELECT table_name, data_type, column_default LIKE 'nextval%' AS still_serial
FROM information_schema.columns
WHERE (table_name, column_name) IN (('accounts', 'id'), ('notes', 'account_id')) ORDER BY 1;
-- The way the hint gives: the owner widens its own column (its CHECK runs
-- as itself), then the key's owner converts.  Re-checking the foreign key
-- of a table that is not rewritten runs none of its code: not its CHECK,
-- trigger, rule, default, generated column or policy.
SET ROLE regress_idgen_convert_writer;
ALTER TABLE convert_mal.notes ALTER COLUMN account_id TYPE bigint;
CREATE FUNCTION convert_mal.rec(what text, v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RAISE NOTICE '% ran, as regress_idgen_convert_writer: %', what, current_user = 'regress_idgen_convert_writer';
    RETURN v;
END $$;
CREATE FUNCTION convert_mal.rec_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'trigger ran, as regress_idgen_convert_writer: %', current_user = 'regress_idgen_convert_writer';
    RETURN NEW;
END $$;
-- (the notices of the setup are not shown: only those of the conversion)
SET client_min_messages = warning;
ALTER TABLE convert_mal.notes
    ADD COLUMN d bigint DEFAULT convert_mal.rec('default', 1),
    ADD COLUMN g bigint GENERATED ALWAYS AS (convert_mal.rec('generated', 2)) STORED;
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON convert_mal.notes
    FOR EACH ROW EXECUTE FUNCTION convert_mal.rec_trigger();
CREATE RULE r AS ON UPDATE TO convert_mal.notes DO ALSO SELECT convert_mal.rec('rule', 3);
ALTER TABLE convert_mal.notes ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY p ON convert_mal.notes USING (convert_mal.rec('policy', d) IS NOT NULL);
RESET client_min_messages;
SET ROLE regress_idgen_convert_admin;
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('accounts', 'id');
SELECT what, as_writer, as_superuser FROM convert_mal.ran;
SELECT rolsuper AS writer_is_superuser FROM pg_roles WHERE rolname = 'regress_idgen_convert_writer';

-- The key's own table, owned by another role: refused to a superuser, and
-- to a member of the owning role; its owner converts it.  On a table the
-- conversion rewrites, PostgreSQL runs its CHECK constraints on the
-- widened column (as the role converting, its owner) and its index
-- expressions (as the owner); a CHECK on another column, triggers, rules,
-- defaults and generated columns not on the widened column run not at
-- all.
SET ROLE regress_idgen_convert_writer;
SET client_min_messages = warning;
CREATE TABLE convert_mal.things (id serial PRIMARY KEY, n int);
CREATE TABLE convert_mal.parts (
    thing_id int REFERENCES convert_mal.things,
    n int,
    d bigint DEFAULT convert_mal.rec('default', 1),
    g bigint GENERATED ALWAYS AS (convert_mal.rec('generated', n)) STORED,
    CHECK (convert_mal.rec('check', thing_id) IS NOT NULL),
    CHECK (convert_mal.rec('check on another column', n) IS NOT NULL));
CREATE INDEX ON convert_mal.parts ((convert_mal.rec('index', thing_id)));
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON convert_mal.parts
    FOR EACH ROW EXECUTE FUNCTION convert_mal.rec_trigger();
CREATE RULE r AS ON UPDATE TO convert_mal.parts DO ALSO SELECT convert_mal.rec('rule', 3);
INSERT INTO convert_mal.things (n) VALUES (1);
INSERT INTO convert_mal.parts (thing_id, n) VALUES (1, 1);
RESET client_min_messages;
SET ROLE regress_idgen_convert_admin;
SELECT * FROM idgen_convert_column('convert_mal.things', 'id');
\echo :LAST_ERROR_SQLSTATE
CREATE ROLE regress_idgen_convert_member IN ROLE regress_idgen_convert_writer;
GRANT EXECUTE ON FUNCTION idgen_convert_column(regclass, name) TO regress_idgen_convert_writer, regress_idgen_convert_member;
SET ROLE regress_idgen_convert_member;
SELECT * FROM idgen_convert_column('convert_mal.things', 'id');
\echo :LAST_ERROR_SQLSTATE
SET ROLE regress_idgen_convert_writer;
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('convert_mal.things', 'id');
SET ROLE regress_idgen_convert_admin;
-- A partition of a referencing table is rewritten too (ALTER TABLE
-- recurses): its owner counts.
CREATE TABLE regions (id serial PRIMARY KEY);
CREATE TABLE region_visits (region_id int REFERENCES regions, at date) PARTITION BY RANGE (at);
CREATE TABLE region_visits_2026 PARTITION OF region_visits FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
ALTER TABLE region_visits_2026 OWNER TO regress_idgen_convert_writer;
SELECT * FROM idgen_convert_column('regions', 'id');
\echo :LAST_ERROR_SQLSTATE

-- A sequence the old default used and the conversion did not drop is
-- reported, with what still uses it: an application may read it
-- (currval('users_seq'), lastInsertId('users_seq')), and it no longer
-- advances.  A sequence the column does not own:
CREATE SEQUENCE items_seq;
CREATE TABLE items (id int PRIMARY KEY DEFAULT nextval('items_seq'), name text);
INSERT INTO items (name) VALUES ('a');
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('items', 'id');
-- Roundcube's users: the default names its sequence in text, which
-- records no dependency (the name is resolved at each insert).
CREATE SEQUENCE users_seq INCREMENT BY 1 NO MAXVALUE NO MINVALUE CACHE 1;
CREATE TABLE users (user_id integer DEFAULT nextval('users_seq'::text) PRIMARY KEY, username varchar(128));
INSERT INTO users (username) VALUES ('a');
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('users', 'user_id');
-- Keeping currval('users_seq') working (docs/converting.md): the default
-- sets the sequence to each new ID, which makes it the session's currval.
ALTER TABLE users ALTER COLUMN user_id SET DEFAULT setval('users_seq', idgen_snowflake());
INSERT INTO users (username) VALUES ('b') RETURNING user_id = currval('users_seq') AS currval_is_the_id,
    user_id = idgen_snowflake_last() AS a_snowflake;
-- A serial's own sequence a view uses:
CREATE TABLE seq_viewed (id serial PRIMARY KEY);
CREATE VIEW seq_viewed_last AS SELECT currval('seq_viewed_id_seq') AS last_id;
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('seq_viewed', 'id');
-- A serial's own sequence another default still uses:
CREATE TABLE shared_a (id serial PRIMARY KEY);
CREATE TABLE shared_b (id int PRIMARY KEY DEFAULT nextval('shared_a_id_seq'));
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('shared_a', 'id');
-- A sequence owned by another column:
CREATE TABLE owned_a (id int PRIMARY KEY);
CREATE SEQUENCE owned_a_seq OWNED BY owned_a.id;
CREATE TABLE owned_b (id int PRIMARY KEY DEFAULT nextval('owned_a_seq'));
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('owned_b', 'id');

RESET ROLE;
DROP TABLE items, users, shared_a, shared_b, owned_a, owned_b, accounts, seq_viewed, region_visits, regions CASCADE;
DROP SEQUENCE items_seq, users_seq;
DROP SCHEMA convert_mal CASCADE;
REVOKE ALL ON FUNCTION idgen_convert_column(regclass, name) FROM regress_idgen_convert_writer, regress_idgen_convert_member;
DROP ROLE regress_idgen_convert_member, regress_idgen_convert_writer, regress_idgen_convert_admin;

DROP TABLE visits, lines, orders, customers, invoice_item_notes, invoice_items, invoices,
    events, replies, tickets, counters, imported CASCADE;
DROP VIEW tickets_v;
REVOKE ALL ON SCHEMA public FROM regress_idgen_convert_stranger;
REVOKE ALL ON FUNCTION idgen_convert_column(regclass, name) FROM regress_idgen_convert_stranger;
DROP ROLE regress_idgen_convert_stranger;

-- The owner of the extension's schema (here public) makes look-alikes of
-- the functions the conversion needs, each with one more, defaulted,
-- argument: a call of either by name, qualified or not, is ambiguous
-- (42725).  The conversion calls neither by name, for the superuser and
-- for the schema's owner alike, and the default it sets calls the
-- extension's idgen_snowflake() whatever the schema holds.
CREATE ROLE regress_idgen_convert_schema_owner;
ALTER SCHEMA public OWNER TO regress_idgen_convert_schema_owner;
GRANT EXECUTE ON FUNCTION idgen_convert_column(regclass, name) TO regress_idgen_convert_schema_owner;
SET ROLE regress_idgen_convert_schema_owner;
CREATE FUNCTION public.idgen_snowflake_min(timestamptz, int DEFAULT 0) RETURNS bigint
    LANGUAGE sql AS 'SELECT -1::bigint';
CREATE FUNCTION public.idgen_snowflake(int DEFAULT 0) RETURNS bigint
    LANGUAGE sql AS 'SELECT -1::bigint';
CREATE TABLE shadowed_owner (id serial PRIMARY KEY);
RESET ROLE;
\set VERBOSITY terse
SELECT idgen_snowflake();
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
CREATE TABLE shadowed (id serial PRIMARY KEY);
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('shadowed', 'id');
INSERT INTO shadowed DEFAULT VALUES RETURNING id > 0 AS the_extensions_id;
SET ROLE regress_idgen_convert_schema_owner;
SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g') AS change
FROM idgen_convert_column('shadowed_owner', 'id');
INSERT INTO shadowed_owner DEFAULT VALUES RETURNING id > 0 AS the_extensions_id;
RESET ROLE;
-- the steps themselves are the conversion's alone
SET ROLE regress_idgen_convert_schema_owner;
SELECT * FROM idgen_convert_column_steps('shadowed_owner', 'id', 0);
RESET ROLE;
DROP TABLE shadowed, shadowed_owner;
DROP FUNCTION public.idgen_snowflake_min(timestamptz, int), public.idgen_snowflake(int);
ALTER SCHEMA public OWNER TO pg_database_owner;
REVOKE ALL ON FUNCTION idgen_convert_column(regclass, name) FROM regress_idgen_convert_schema_owner;
DROP ROLE regress_idgen_convert_schema_owner;
