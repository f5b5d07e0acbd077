--
-- Genes: layout 41/5/5/8/4 (16 shards), datacenter 1, worker 2.
--
SELECT layout_valid, sequence_bits, gene_bits, genes, ids_per_second_per_gene, ids_per_second
FROM idgen_info();

-- Users spread over all genes; orders carry their user's gene.  A DEFAULT
-- cannot read another column, so the order's ID comes from the trigger.
CREATE TABLE users (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), name text);
CREATE TABLE orders (
    id bigint DEFAULT idgen_snowflake(idgen_gene(user_id, 4)) PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users,
    amount int);
CREATE TABLE orders (
    id bigint PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users,
    amount int);
CREATE TRIGGER orders_id BEFORE INSERT ON orders
    FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id', 'user_id');
INSERT INTO users (name) SELECT 'user ' || g FROM generate_series(1, 1600) g;
INSERT INTO orders (user_id, amount)
    SELECT u.id, g FROM users u, generate_series(1, 5) g;

-- Every order's gene is its user's gene, read from either ID.
SELECT count(*) AS orders,
       count(*) FILTER (WHERE idgen_gene(o.id) <> idgen_gene(o.user_id)) AS gene_mismatch,
       count(*) FILTER (WHERE (idgen_snowflake_decode(o.id)).gene <> idgen_gene(o.user_id, 4)) AS decode_mismatch
FROM orders o;

-- One backend walks the genes round-robin, so 1600 users land exactly
-- 100 per gene: the tolerance is zero, because nothing here is random
-- except the gene the walk starts from.
SELECT count(*) AS genes_used, min(n) AS fewest, max(n) AS most
FROM (SELECT idgen_gene(id, 4) AS gene, count(*) AS n FROM users GROUP BY 1) s;
-- Each gene's IDs strictly increase in generation order.
CREATE TEMP TABLE burst AS
    SELECT g, idgen_snowflake() AS id FROM generate_series(1, 64000) g;
SELECT count(*) FILTER (WHERE id <= prev) AS not_increasing_within_gene
FROM (SELECT id, lag(id) OVER (PARTITION BY idgen_gene(id, 4) ORDER BY g) AS prev
      FROM burst) s;
SELECT count(DISTINCT id) AS distinct_ids FROM burst;

-- The trigger keeps an ID given explicitly.
INSERT INTO orders (id, user_id, amount)
    SELECT 42, id, 0 FROM users ORDER BY id LIMIT 1;
SELECT count(*) AS explicit_kept FROM orders WHERE id = 42;
DELETE FROM orders WHERE id = 42;

-- "Actual gene length": with 8 shards today, route by the low 3
-- bits; growing to 16 later splits each shard in two without moving a
-- child away from its parent.
SELECT count(*) FILTER (WHERE idgen_gene(o.id, 3) <> idgen_gene(o.user_id, 3)) AS mismatch_3bits,
       count(*) FILTER (WHERE idgen_gene(o.id, 2) <> idgen_gene(o.user_id, 2)) AS mismatch_2bits
FROM orders o;

-- A routing view, and a partitioned table keyed by the gene.
CREATE VIEW orders_routed AS SELECT *, idgen_gene(id, 4) AS shard FROM orders;
SELECT count(DISTINCT shard) AS shards, count(*) AS orders FROM orders_routed;

CREATE TABLE orders_by_shard (
    id bigint NOT NULL DEFAULT idgen_snowflake(),
    user_id bigint NOT NULL)
    PARTITION BY LIST (idgen_gene(id, 4));
DO $$
BEGIN
    FOR s IN 0..15 LOOP
        EXECUTE format('CREATE TABLE orders_by_shard_%s PARTITION OF orders_by_shard FOR VALUES IN (%s)', s, s);
    END LOOP;
END $$;
INSERT INTO orders_by_shard (id, user_id)
    SELECT idgen_snowflake(idgen_gene(u.id, 4)), u.id FROM users u;
SELECT count(*) FILTER (WHERE tableoid::regclass::text <> 'orders_by_shard_' || idgen_gene(user_id, 4)) AS misrouted
FROM orders_by_shard;
-- A lookup by an ID's gene touches one partition.
EXPLAIN (COSTS OFF) SELECT * FROM orders_by_shard WHERE idgen_gene(id, 4) = 13;

-- Explicit genes: every gene accepted, out of range rejected.
SELECT count(DISTINCT idgen_gene(idgen_snowflake(g), 4)) AS genes_accepted
FROM generate_series(0, 15) g;
SELECT idgen_snowflake(16);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake(NULL::bigint);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_snowflake(NULL);
\echo :LAST_ERROR_SQLSTATE

-- Trigger misuse.
CREATE TABLE t_bad (id bigint, parent bigint, label text, small int);
CREATE TRIGGER t1 BEFORE INSERT ON t_bad FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id', 'parent');
INSERT INTO t_bad (parent) VALUES (NULL);
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER t1 ON t_bad;
CREATE TRIGGER t1 BEFORE INSERT ON t_bad FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('nope');
INSERT INTO t_bad (parent) VALUES (1);
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER t1 ON t_bad;
CREATE TRIGGER t1 BEFORE INSERT ON t_bad FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id', 'label');
INSERT INTO t_bad (parent) VALUES (1);
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER t1 ON t_bad;
CREATE TRIGGER t1 BEFORE INSERT ON t_bad FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger();
INSERT INTO t_bad (parent) VALUES (1);
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER t1 ON t_bad;
CREATE TRIGGER t1 AFTER INSERT ON t_bad FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id');
INSERT INTO t_bad (parent) VALUES (1);
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER t1 ON t_bad;
SELECT count(*) AS nothing_inserted FROM t_bad;
-- An int parent column works; one argument spreads over genes.
CREATE TRIGGER t1 BEFORE INSERT ON t_bad FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id', 'small');
INSERT INTO t_bad (small) VALUES (7), (23);
DROP TRIGGER t1 ON t_bad;
CREATE TRIGGER t1 BEFORE INSERT ON t_bad FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id');
INSERT INTO t_bad (label) SELECT 'spread' FROM generate_series(1, 32);
SELECT idgen_gene(id, 4) AS gene, small FROM t_bad WHERE small IS NOT NULL ORDER BY small;
SELECT count(DISTINCT idgen_gene(id, 4)) AS genes_spread FROM t_bad WHERE label = 'spread';
SELECT idgen_snowflake_trigger();
\echo :LAST_ERROR_SQLSTATE

-- idgen_snowflake_compose places the gene in the low bits: it gives back
-- every order's ID from its decoded fields.
SELECT count(*) FILTER (WHERE idgen_snowflake_compose(d.ts, d.datacenter_id, d.worker_id, d.sequence, d.gene) <> o.id)
         AS compose_mismatch,
       count(DISTINCT d.gene) AS genes
FROM orders o, LATERAL idgen_snowflake_decode(o.id) d;
SELECT idgen_snowflake_compose('2025-01-01', 1, 2, 0, 16);
\echo :LAST_ERROR_SQLSTATE

-- idgen_snowflake_row(): a root row's ID and its gene in one call, for a
-- table partitioned by a gene column the INSERT fills.  The rows spread
-- round-robin over the 16 partitions, each row's gene is its ID's, and a
-- child made with the parent's gene lands in its parent's partition.
CREATE TABLE accounts (id bigint NOT NULL, gene int NOT NULL, name text,
                       PRIMARY KEY (gene, id)) PARTITION BY LIST (gene);
DO $$
BEGIN
    FOR g IN 0..15 LOOP
        EXECUTE format('CREATE TABLE accounts_%s PARTITION OF accounts FOR VALUES IN (%s)', g, g);
    END LOOP;
END
$$;
-- (One row: FROM idgen_snowflake_row() r.  Several: the row in the
-- select list of a subquery, as a function in FROM is called only once.)
INSERT INTO accounts (id, gene, name)
    SELECT (r).id, (r).gene, 'account ' || n
    FROM (SELECT idgen_snowflake_row() AS r, n FROM generate_series(1, 160) n) s;
INSERT INTO accounts (id, gene, name) SELECT r.id, r.gene, 'ann' FROM idgen_snowflake_row() r;
SELECT count(*) AS accounts,
       count(*) FILTER (WHERE gene <> idgen_gene(id, 4)) AS gene_mismatch,
       count(DISTINCT tableoid) AS partitions_used,
       max(c) - min(c) AS spread
FROM accounts, LATERAL (SELECT count(*) AS c FROM accounts a2 WHERE a2.gene = accounts.gene) x;
SELECT count(*) FILTER (WHERE idgen_gene(idgen_snowflake(gene), 4) <> gene) AS child_gene_mismatch
FROM accounts;
SELECT idgen_snowflake_last() = max(id) AS last_is_the_rows FROM (SELECT id FROM idgen_snowflake_row()) r;
-- A narrower width groups the genes; a wider one than idgen.gene_bits
-- cannot be carried by children and is refused.
SELECT bool_and((r).gene = idgen_gene((r).id, 2)) AS two_bits, max((r).gene) <= 3 AS within_two_bits,
       count(DISTINCT (r).gene) AS groups
FROM (SELECT idgen_snowflake_row(2) AS r FROM generate_series(1, 50)) s;
SELECT * FROM idgen_snowflake_row(5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_snowflake_row(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_snowflake_row(NULL);

DROP TABLE t_bad, orders_by_shard, orders, users, accounts CASCADE;
