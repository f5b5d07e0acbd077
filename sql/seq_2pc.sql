--
-- Two-phase commit of transactional keys (seq_held.c; the other cases are
-- in seq_txn.sql).  It needs max_prepared_transactions, so it runs on the
-- temporary instance of make check-instance (test/idgen.conf).
--
-- The rows are written at PREPARE TRANSACTION, and the
-- prepared transaction holds them until COMMIT or ROLLBACK PREPARED.
BEGIN;
SELECT count(idgen_seq_next('txn:2pc')) AS calls FROM generate_series(1, 1000);
PREPARE TRANSACTION 'idgen_seq_txn';
COMMIT PREPARED 'idgen_seq_txn';
SELECT idgen_seq_current('txn:2pc') AS prepared_committed;
BEGIN;
SELECT count(idgen_seq_next('txn:2pc')) AS calls FROM generate_series(1, 1000);
PREPARE TRANSACTION 'idgen_seq_txn';
ROLLBACK PREPARED 'idgen_seq_txn';
SELECT idgen_seq_next('txn:2pc') AS after_rollback_prepared;
