--
-- Many calls on one key in one transaction (seq_held.c): the first call
-- locks and writes the key's row, later calls advance it in backend memory,
-- and the row is written once more before the transaction commits.  Every
-- guarantee of the transactional mode holds as when every call wrote it.
--

-- 100 000 calls in one statement: 1 .. 100 000, each once, and the row
-- holds the last at commit.
SELECT count(*) AS calls, count(DISTINCT v) AS distinct_values, min(v), max(v),
       sum(v) = 100000::numeric * 100001 / 2 AS gap_free
FROM (SELECT idgen_seq_next('txn:stmt') v FROM generate_series(1, 100000)) s;
SELECT idgen_seq_current('txn:stmt') AS current,
       (SELECT value FROM idgen_seq WHERE key = 'txn:stmt') AS row_value;

-- 100 000 calls in a PL/pgSQL loop, in order.
DO $$
DECLARE
    v bigint;
BEGIN
    FOR i IN 1 .. 100000 LOOP
        v := idgen_seq_next('txn:loop');
        IF v <> i THEN
            RAISE EXCEPTION 'call % returned %', i, v;
        END IF;
    END LOOP;
END
$$;
SELECT idgen_seq_current('txn:loop') AS after_loop;

-- Within the transaction, idgen_seq_current and idgen_seq_keys show the
-- latest value; a rollback gives every value back (the key, created by the
-- transaction, is gone).
BEGIN;
SELECT count(idgen_seq_next('txn:see')) AS calls FROM generate_series(1, 500);
SELECT idgen_seq_current('txn:see') AS current,
       (SELECT value FROM idgen_seq_keys WHERE key = 'txn:see') AS listed;
ROLLBACK;
SELECT idgen_seq_current('txn:see') IS NULL AS rolled_back;
SELECT idgen_seq_next('txn:see') AS first_again;

-- Savepoints: what ROLLBACK TO SAVEPOINT undoes is handed out again, what
-- RELEASE keeps stays; a key first used in a rolled-back savepoint is
-- forgotten with it (its row lock too).
BEGIN;
SELECT max(v) AS before_a FROM (SELECT idgen_seq_next('txn:sp') v FROM generate_series(1, 1000)) s;
SAVEPOINT a;
SELECT max(v) AS in_a FROM (SELECT idgen_seq_next('txn:sp') v FROM generate_series(1, 1000)) s;
SAVEPOINT b;
SELECT max(v) AS in_b FROM (SELECT idgen_seq_next('txn:sp') v FROM generate_series(1, 1000)) s;
RELEASE SAVEPOINT b;
SELECT idgen_seq_current('txn:sp') AS b_released;
ROLLBACK TO SAVEPOINT a;
SELECT idgen_seq_current('txn:sp') AS a_rolled_back;
SELECT idgen_seq_next('txn:sp') AS handed_out_again;
SAVEPOINT c;
SELECT idgen_seq_next('txn:sp') AS in_c, idgen_seq_next('txn:inner') AS inner_1,
       idgen_seq_next('txn:inner') AS inner_2;
SAVEPOINT d;
SELECT idgen_seq_next('txn:sp') AS in_d;
RELEASE SAVEPOINT d;
ROLLBACK TO SAVEPOINT c;
SELECT idgen_seq_current('txn:inner') IS NULL AS inner_forgotten,
       idgen_seq_next('txn:inner') AS inner_again, idgen_seq_next('txn:sp') AS sp_after_c;
COMMIT;
SELECT idgen_seq_current('txn:sp') AS sp_committed, idgen_seq_current('txn:inner') AS inner_committed;

-- A savepoint rolled back after the key's row was written at its level
-- (a purge writes held keys first): the row and the values go back.
BEGIN;
SELECT idgen_seq_next('txn:written'), idgen_seq_next('txn:written');
SAVEPOINT w;
SELECT idgen_seq_next('txn:written') AS in_w;
SELECT idgen_seq_purge() >= 0 AS purged;
SELECT idgen_seq_next('txn:written') AS in_w_after_write;
ROLLBACK TO SAVEPOINT w;
SELECT idgen_seq_next('txn:written') AS after_w;
COMMIT;
SELECT idgen_seq_current('txn:written') AS written_committed;

-- PL/pgSQL exception blocks are subtransactions: the value of a block that
-- fails is given back and handed to the next one.
DO $$
DECLARE
    v bigint;
    kept bigint[] := '{}';
BEGIN
    FOR i IN 1 .. 10 LOOP
        BEGIN
            v := idgen_seq_next('txn:exc');
            IF i % 2 = 0 THEN
                RAISE EXCEPTION 'block % fails', i;
            END IF;
            kept := kept || v;
        EXCEPTION WHEN raise_exception THEN
            NULL;
        END;
    END LOOP;
    RAISE NOTICE 'kept %', kept;
END
$$;
SELECT idgen_seq_current('txn:exc') AS exc_committed;

-- An error anywhere in the transaction gives every value back.
SELECT idgen_seq_next('txn:err') / (i - 500) FROM generate_series(1, 1000) i;
SELECT idgen_seq_current('txn:err') IS NULL AS err_rolled_back;

-- The administrative functions in the same transaction start from the
-- latest value, and a savepoint rolled back undoes them too.
BEGIN;
SELECT max(v) AS calls FROM (SELECT idgen_seq_next('txn:admin') v FROM generate_series(1, 100)) s;
SELECT idgen_seq_configure('txn:admin', step => 10);
SELECT idgen_seq_next('txn:admin') AS after_configure;
SAVEPOINT s;
SELECT idgen_seq_drop('txn:admin') AS dropped;
SELECT idgen_seq_current('txn:admin') IS NULL AS gone,
       (SELECT count(*) FROM idgen_seq_keys WHERE key = 'txn:admin') AS listed;
SELECT idgen_seq_next('txn:admin') AS restarted, idgen_seq_next('txn:admin') AS restarted_2;
ROLLBACK TO SAVEPOINT s;
SELECT idgen_seq_next('txn:admin') AS drop_rolled_back;
SELECT idgen_seq_set('txn:admin', 5000);
SELECT idgen_seq_next('txn:admin') AS after_set;
SELECT idgen_seq_set_if_absent('txn:admin', 1) AS set_if_absent;
SELECT idgen_seq_next('txn:admin') AS after_set_if_absent;
COMMIT;
SELECT idgen_seq_current('txn:admin') AS admin_committed;

-- A key whose ttl passes between two calls of one transaction restarts, as
-- it would between two transactions.
BEGIN;
SELECT idgen_seq_configure('txn:ttl', ttl => '1 s');
SELECT idgen_seq_next('txn:ttl') AS ttl_1, idgen_seq_next('txn:ttl') AS ttl_2;
SELECT pg_sleep(1.2);
SELECT idgen_seq_next('txn:ttl') AS ttl_restarted;
COMMIT;
SELECT idgen_seq_current('txn:ttl') AS ttl_committed;

-- The batch form, a cycle past max_value, a limit met by a key the
-- transaction holds (refused in a savepoint, the key stays at its last
-- value, the transaction goes on), and several keys interleaved.
BEGIN;
SELECT idgen_seq_next('txn:batch') AS single;
SELECT array_agg(v) AS batch FROM idgen_seq_next('txn:batch', 3) v;
SELECT idgen_seq_configure('txn:wrap', max_value => 3, cycle => true);
SELECT array_agg(idgen_seq_next('txn:wrap')) AS wrapped FROM generate_series(1, 5);
SELECT idgen_seq_configure('txn:stop', max_value => 2);
SELECT idgen_seq_next('txn:stop') AS stop_1, idgen_seq_next('txn:stop') AS stop_2;
SAVEPOINT limit_met;
SELECT idgen_seq_next('txn:stop');
ROLLBACK TO limit_met;
SAVEPOINT limit_met;
SELECT * FROM idgen_seq_next('txn:stop', 2);
ROLLBACK TO limit_met;
SELECT idgen_seq_current('txn:stop') AS stays_at_its_limit;
SELECT count(*) AS calls FROM (SELECT idgen_seq_next('txn:k' || (i % 3)) FROM generate_series(1, 3000) i) s;
COMMIT;
SELECT key, value FROM idgen_seq_keys WHERE key LIKE 'txn:k_' OR key IN ('txn:batch', 'txn:wrap', 'txn:stop') ORDER BY key;

-- What runs at commit before the rows are written: a WITH HOLD cursor's
-- rest, and deferred triggers.  (To keep a holdable cursor's rows,
-- PostgreSQL runs its query again from the start at commit: its rows after
-- the two fetched are 5 .. 12, and 3 and 4 are never seen.)
BEGIN;
DECLARE held_cursor CURSOR WITH HOLD FOR
    SELECT idgen_seq_next('txn:cursor') AS v FROM generate_series(1, 10);
FETCH 2 FROM held_cursor;
COMMIT;
SELECT idgen_seq_current('txn:cursor') AS cursor_committed;
FETCH ALL FROM held_cursor;
CLOSE held_cursor;
CREATE TABLE txn_deferred (id int);
CREATE FUNCTION txn_deferred_next() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN PERFORM idgen_seq_next('txn:deferred'); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER txn_deferred_next AFTER INSERT ON txn_deferred
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION txn_deferred_next();
BEGIN;
SELECT idgen_seq_next('txn:deferred'), idgen_seq_next('txn:deferred');
INSERT INTO txn_deferred SELECT generate_series(1, 5);
COMMIT;
SELECT idgen_seq_current('txn:deferred') AS deferred_committed;
DROP TABLE txn_deferred;
DROP FUNCTION txn_deferred_next();

-- A procedure that commits and rolls back as it goes: each of its
-- transactions writes its keys at its own commit.
CREATE PROCEDURE txn_proc() LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. 5 LOOP
        PERFORM idgen_seq_next('txn:proc') FROM generate_series(1, 100);
        IF i % 2 = 0 THEN
            ROLLBACK;
        ELSE
            COMMIT;
        END IF;
    END LOOP;
END
$$;
CALL txn_proc();
SELECT idgen_seq_current('txn:proc') AS three_of_five_committed;
DROP PROCEDURE txn_proc();

-- The row of a held key deleted behind the functions' back: the commit
-- fails, and its values go back with it.
BEGIN;
SELECT idgen_seq_next('txn:direct'), idgen_seq_next('txn:direct');
DELETE FROM idgen_seq WHERE key = 'txn:direct';
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_current('txn:direct') IS NULL AS direct_rolled_back;
