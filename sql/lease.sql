--
-- Worker-id leases.  The test instance (make check-instance,
-- test/idgen.conf) is datacenter 3, worker 7 of the default layout (5 + 5
-- bits: 1024 ids), so id 3 << 5 | 7 = 103 is its own: the spaces below are
-- sized around it.
--
SET idgen.worker_quarantine = '1s';

-- One id: it can only be worker 0 of datacenter 0.
SELECT worker_id, datacenter_id, token AS t1,
       expires_at BETWEEN clock_timestamp() + '29 s' AND clock_timestamp() + '31 s' AS expires_in_30s
FROM idgen_worker_acquire('app-1', max_workers => 1) \gset
SELECT :worker_id AS worker_id, :datacenter_id AS datacenter_id, :t1 > 0 AS has_token, :'expires_in_30s' AS expires_in_30s;
-- The space is full: an error naming its size.
SELECT * FROM idgen_worker_acquire('app-2', max_workers => 1);
\echo :LAST_ERROR_SQLSTATE

-- Renew: the lease's ttl again, or a new one.
SELECT idgen_worker_renew(0, :t1) BETWEEN clock_timestamp() + '29 s' AND clock_timestamp() + '31 s' AS renewed;
SELECT idgen_worker_renew(0, :t1, '1 min') BETWEEN clock_timestamp() + '59 s' AND clock_timestamp() + '61 s' AS renewed_for_a_minute;
SELECT ttl FROM idgen_worker_lease WHERE token = :t1;
-- A renewal never moves the expiry earlier: the holder may generate until
-- the expiry it was given, whoever renews with a shorter ttl.
SELECT idgen_worker_renew(0, :t1, '1 s') BETWEEN clock_timestamp() + '58 s' AND clock_timestamp() + '61 s' AS expiry_kept;
SELECT ttl FROM idgen_worker_lease WHERE token = :t1;
-- Another token, or another worker id: nobody renews a lease not theirs.
SELECT idgen_worker_renew(0, :t1 + 1000);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(1, :t1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(0, :t1 + 1000);
\echo :LAST_ERROR_SQLSTATE

-- Release: true once, then false; the lease cannot be renewed after.
SELECT idgen_worker_release(0, :t1) AS released;
SELECT idgen_worker_release(0, :t1) AS released_again;
SELECT idgen_worker_renew(0, :t1);
\echo :LAST_ERROR_SQLSTATE

-- A release does not shorten the id's rest: the holder hears of it only at
-- its next renewal, and may generate until the lease's expiry if the
-- database is out of its reach.  So the id rests until the expiry plus the
-- quarantine, also once the quarantine after the release has passed, and
-- the purge keeps the lease.
SELECT pg_sleep(1.1);
SELECT * FROM idgen_worker_acquire('app-2', max_workers => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT state, expires_at > clock_timestamp() + '55 s' AS expiry_kept FROM idgen_worker_leases;
SELECT idgen_worker_purge() AS purged;
-- The minute passes (the expiry is moved back here rather than waited for).
UPDATE idgen_worker_lease SET expires_at = clock_timestamp() WHERE token = :t1;

-- Quarantine: the id rests before it is leased again, with a greater token.
SELECT * FROM idgen_worker_acquire('app-2', max_workers => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT state FROM idgen_worker_leases;
SELECT pg_sleep(1.1);
SELECT state FROM idgen_worker_leases;
SELECT worker_id, token AS t2 FROM idgen_worker_acquire('app-2', ttl => '1 s', max_workers => 1) \gset
SELECT :worker_id AS worker_id, :t2 > :t1 AS token_grew;
SELECT idgen_worker_release(0, :t2) AS released;

-- Expiry: an expired lease rests too; renewed late it is still its
-- holder's until someone acquires the id; then the old token is lost.
-- (t2's expiry, 1 s after it was taken, plus the quarantine, first.)
SELECT pg_sleep(2.1);
SELECT token AS t3 FROM idgen_worker_acquire('short', ttl => '200 ms', max_workers => 1) \gset
SELECT pg_sleep(0.3);
SELECT state FROM idgen_worker_leases;
SELECT * FROM idgen_worker_acquire('next', max_workers => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(0, :t3) > clock_timestamp() AS late_renewal;
SELECT pg_sleep(1.4);
SELECT token AS t4 FROM idgen_worker_acquire('next', max_workers => 1) \gset
SELECT holder, token > :t3 AS token_grew FROM idgen_worker_lease WHERE token = :t4;
SELECT idgen_worker_renew(0, :t3);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(0, :t3);
\echo :LAST_ERROR_SQLSTATE

-- Concurrent acquirers are the isolation test's; here, many in a row: with
-- id 0 held by 'next', every other id of the space but this server's own
-- is handed out once.
SELECT count(*) AS acquired, count(DISTINCT (a.datacenter_id, a.worker_id)) AS distinct_ids,
       count(*) FILTER (WHERE a.datacenter_id = 3 AND a.worker_id = 7) AS own_id_leased
FROM generate_series(1, 102) i, LATERAL idgen_worker_acquire('many-' || i, '5 s', max_workers => 104) a;
SELECT * FROM idgen_worker_acquire('one-too-many', max_workers => 104);
\echo :LAST_ERROR_SQLSTATE
SELECT state, count(*) FROM idgen_worker_leases GROUP BY state ORDER BY state;

-- A lease bound to the session: no expiry, held by a session-level advisory
-- lock on its id, ended by release (or the end of the session: see the TAP
-- test).
SELECT worker_id, datacenter_id, token AS ts, expires_at IS NULL AS no_expiry
FROM idgen_worker_acquire('session', session_bound => true, max_workers => 105) \gset
SELECT :worker_id AS worker_id, :datacenter_id AS datacenter_id, :'no_expiry' AS no_expiry;
SELECT state, holder_pid = pg_backend_pid() AS held_by_this_session
FROM idgen_worker_leases WHERE token = :ts;
SELECT idgen_worker_renew(8, :ts) IS NULL AS renewal_keeps_no_expiry;
-- An aborted transaction does not drop its lock.
SELECT 1 / 0;
SELECT count(*) AS session_locks FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 26980;
-- A release that rolls back keeps it held, lock and all.
BEGIN;
SELECT idgen_worker_release(8, :ts) AS released_then_rolled_back;
ROLLBACK;
SELECT state, holder_pid = pg_backend_pid() AS held_by_this_session
FROM idgen_worker_leases WHERE token = :ts;
SELECT count(*) AS session_locks FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 26980;
-- A committed release gives the lock up at commit.
BEGIN;
SELECT idgen_worker_release(8, :ts) AS released;
SELECT count(*) AS session_locks_until_commit FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 26980;
COMMIT;
-- pg_advisory_unlock_all() (and DISCARD ALL) drops the lock of a
-- session-bound lease: the lease then counts as ended (see the README).
SET idgen.worker_quarantine = 0;
SELECT token AS ts2 FROM idgen_worker_acquire('session2', session_bound => true, max_workers => 105) \gset
SELECT state FROM idgen_worker_leases WHERE token = :ts2;
SELECT pg_advisory_unlock_all();
SELECT state FROM idgen_worker_leases WHERE token = :ts2;
SELECT idgen_worker_release(8, :ts2) AS released;
SELECT count(*) AS session_locks_left FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 26980;
-- A session lease acquired in a rolled-back savepoint leaves no lock behind.
SET idgen.worker_quarantine = 0;
BEGIN;
SAVEPOINT s;
SELECT worker_id FROM idgen_worker_acquire('session', session_bound => true, max_workers => 105);
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS session_locks_left FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 26980;
COMMIT;
-- And one in a rolled-back transaction.
BEGIN;
SELECT worker_id FROM idgen_worker_acquire('session', session_bound => true, max_workers => 105);
ROLLBACK;
SELECT count(*) AS session_locks_left FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 26980;
SELECT count(*) AS rows_for_rolled_back FROM idgen_worker_lease WHERE token > :ts;

-- Purge: leases whose id has rested are deleted (their ids are free anyway);
-- a released lease has rested only once its expiry has passed (5 s after
-- the 'many' leases were taken).
SELECT count(*) AS released FROM idgen_worker_lease l
WHERE holder LIKE 'many-%' AND idgen_worker_release(l.id & 31, l.token);
SELECT idgen_worker_purge() > 0 AS purged_the_session_lease;
SELECT count(*) AS released_but_kept FROM idgen_worker_lease WHERE holder LIKE 'many-%';
SELECT pg_sleep(5);
SELECT idgen_worker_purge() AS purged;
SELECT holder, state FROM idgen_worker_leases ORDER BY holder;
RESET idgen.worker_quarantine;

-- Bad input: an error, and nothing changes.
SELECT * FROM idgen_worker_acquire(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_acquire('');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_acquire(repeat('x', 257));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_acquire('app', ttl => '0 s');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_acquire('app', ttl => '-1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_acquire('app', ttl => NULL);
\echo :LAST_ERROR_SQLSTATE
-- A NULL session_bound is an error too, not an ordinary ttl lease.
SELECT * FROM idgen_worker_acquire('app', session_bound => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_acquire('app', max_workers => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_acquire('app', max_workers => 1025);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(0, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(0, 1, '0 s');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(0, NULL);
\echo :LAST_ERROR_SQLSTATE
-- A ttl is positive in every part and at most 100 years.
SELECT * FROM idgen_worker_acquire('app', ttl => '1 mon -29 days');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_acquire('app', ttl => '101 years');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(0, 1, '-1 day +25 hours');
\echo :LAST_ERROR_SQLSTATE
-- A horizon is a finite time between 1970 and 100 years from now: the next
-- holder of the id starts above it.
SELECT idgen_worker_renew(0, 1, NULL, 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(0, 1, '-infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(0, 1, '2300-01-01');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_server_lease(1, 'x', horizon => '1960-01-01');
\echo :LAST_ERROR_SQLSTATE
BEGIN READ ONLY;
SELECT * FROM idgen_worker_acquire('app');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT count(*) AS leases_unchanged FROM idgen_worker_lease;

-- Privileges: leasing is for the roles granted it; a lease is renewed and
-- released only by the role that acquired it; the table and the view are
-- nobody's; the quarantine is for superusers to set.
CREATE ROLE lease_user;
CREATE ROLE lease_other;
SET ROLE lease_user;
SELECT * FROM idgen_worker_acquire('app');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION idgen_worker_acquire(text, interval, bigint, boolean),
    idgen_worker_renew(bigint, bigint, interval, timestamptz), idgen_worker_release(bigint, bigint, timestamptz)
    TO lease_user, lease_other;
SET ROLE lease_user;
SELECT worker_id AS uw, token AS ut FROM idgen_worker_acquire('user-app', max_workers => 2) \gset
-- Another role learns nothing by probing: its tokens and worker ids are
-- answered as a token that names no lease is, whatever worker id it names.
SET ROLE lease_other;
SELECT idgen_worker_renew(:uw, :ut);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(1 - :uw, :ut);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_renew(:uw, :ut + 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(:uw, :ut);
\echo :LAST_ERROR_SQLSTATE
SET ROLE lease_user;
SELECT idgen_worker_renew(:uw, :ut) > clock_timestamp() AS owner_renews;
SELECT * FROM idgen_worker_lease;
\echo :LAST_ERROR_SQLSTATE
UPDATE idgen_worker_lease SET token = 0;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idgen_worker_leases;
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_purge();
\echo :LAST_ERROR_SQLSTATE
SET idgen.worker_quarantine = 0;
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_worker_release(:uw, :ut) AS owner_releases;
RESET ROLE;
REVOKE ALL ON FUNCTION idgen_worker_acquire(text, interval, bigint, boolean),
    idgen_worker_renew(bigint, bigint, interval, timestamptz), idgen_worker_release(bigint, bigint, timestamptz)
    FROM lease_user, lease_other;
DROP ROLE lease_user;
DROP ROLE lease_other;

-- A lease does not move lastval(): a client's "last inserted id" stays the
-- value of its own sequence.
CREATE SEQUENCE app_ids START 41;
SELECT nextval('app_ids') AS app_id;
SELECT worker_id AS lw, token AS lt FROM idgen_worker_acquire('lastval') \gset
SELECT lastval() AS still_the_apps;
SELECT idgen_worker_release(:lw, :lt) AS released;
DROP SEQUENCE app_ids;
-- Tokens are ticks of the server's UUIDv7 clock: they grow with time, and
-- need no sequence the extension could lose.
SELECT :lt > (extract(epoch FROM now() - '1 min'::interval) * 1000)::bigint << 12 AS token_from_the_clock;
