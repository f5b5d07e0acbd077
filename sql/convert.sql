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
    (idgen_snowflake_decode(id)).worker_id = 7 AS a_snowflake;
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
-- Only the table's owner (ALTER TABLE's rule), and only those granted the
-- function.
CREATE ROLE convert_stranger;
GRANT USAGE ON SCHEMA public TO convert_stranger;
SET ROLE convert_stranger;
SELECT * FROM idgen_convert_column('tickets', 'id');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION idgen_convert_column(regclass, name) TO convert_stranger;
SET ROLE convert_stranger;
SELECT * FROM idgen_convert_column('tickets', 'id');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- And it all runs in the caller's transaction: a rollback undoes it.
BEGIN;
SELECT count(*) AS changes FROM idgen_convert_column('tickets', 'id');
ROLLBACK;
SELECT data_type, column_default LIKE 'nextval%' AS still_serial
FROM information_schema.columns WHERE table_name = 'tickets' AND column_name = 'id';

DROP TABLE visits, lines, orders, customers, invoice_item_notes, invoice_items, invoices,
    events, replies, tickets, counters, imported CASCADE;
DROP VIEW tickets_v;
REVOKE ALL ON SCHEMA public FROM convert_stranger;
REVOKE ALL ON FUNCTION idgen_convert_column(regclass, name) FROM convert_stranger;
DROP ROLE convert_stranger;
