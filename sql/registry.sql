--
-- A server's identity and the registry side of it.  The test instance
-- (make check-instance, test/idgen.conf) takes its identity from its
-- settings (datacenter 3, worker 7) and has no registry; the multi-server
-- scenarios are in test/t/014_registry.pl.
--
-- The worker-id leases lease.sql left are not this test's.
DELETE FROM idgen_worker_lease;
SELECT source, leased, state, datacenter_id, worker_id, token, valid_until, message,
       system_identifier = (SELECT system_identifier FROM pg_control_system()) AS own_system_identifier
FROM idgen_identity();
SHOW idgen.identity;
SHOW idgen.registry;
-- Both are fixed at start (a lease's token is valid only at the registry
-- that gave it).
SET idgen.identity = 'registry';
SET idgen.registry = 'host=/nonexistent';

-- idgen_server_lease: what the "idgen registry" workers of other servers call.
SET idgen.worker_quarantine = 0;
-- Bad input.
SELECT * FROM idgen_server_lease(NULL, 'x');
SELECT * FROM idgen_server_lease(1, '');
SELECT * FROM idgen_server_lease(1, 'x', '0 s');
SELECT * FROM idgen_server_lease(1, 'x', '30 s', 1, NULL);
SELECT * FROM idgen_server_lease(1, 'x', '30 s', 32, 0);
SELECT * FROM idgen_server_lease(1, 'x', '30 s', 0, -1);
-- A refused claim: SQLSTATE, message, detail (its time masked) and hint.
CREATE FUNCTION claim_error(sysid bigint, instance text, dc int DEFAULT 2, w int DEFAULT 5) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text; hint text;
BEGIN
	PERFORM idgen_server_lease(sysid, instance, '30 s', dc, w);
	RETURN NEXT 'claimed';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
	RETURN NEXT st || ': ' || msg;
	RETURN NEXT 'DETAIL: ' || regexp_replace(det, ' until .*', ' until <time>.');
	RETURN NEXT 'HINT: ' || hint;
END $$;

-- This server's own identity is never leased.
SELECT claim_error(1, 'x', 3, 7);

-- A claim of one identity: taken, with the claimant's system identifier.
SELECT worker_id, datacenter_id, token AS t1, expires_at > now() AS live
FROM idgen_server_lease(101, 'server A started at 1', '30 s', 2, 5) \gset
SELECT :worker_id AS worker_id, :datacenter_id AS datacenter_id, :'live' AS live;
SELECT datacenter_id, worker_id, holder, system_identifier, state
FROM idgen_worker_leases WHERE token = :t1;
-- Another server claiming it is refused and told who holds it.
SELECT claim_error(202, 'server B started at 2');
-- A copy of A (the same system identifier, another instance): refused, and
-- the hint says why.
SELECT claim_error(101, 'server A2 started at 3');
-- Not even the same instance takes a live lease over: only its token
-- renews it (a server restarted by a crash keeps the token in a file).
SELECT claim_error(101, 'server A started at 1');
SELECT idgen_worker_renew(5, :t1) > now() AS renewed;
-- Released at a clean shutdown, by the server's registry process once it
-- has stopped generating, with the bound of what it issued: another server
-- may claim it (no quarantine here), and starts above that bound.
SELECT idgen_worker_release(5, :t1, now());
SELECT datacenter_id, worker_id FROM idgen_server_lease(202, 'server B started at 2', '30 s', 2, 5);
SELECT holder, system_identifier, state FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5;
-- Released by an administrator (the token from the lease table, no
-- horizon): the server hears of it only at its next renewal and may
-- generate until the lease's expiry, so the id rests until then plus the
-- quarantine, and its horizon cannot be reset before.
SELECT token AS tx FROM idgen_server_lease(111, 'server X started at 5', '30 s', 2, 6) \gset
SELECT idgen_worker_release(6, :tx);
SELECT claim_error(222, 'server Y started at 6', 2, 6);
\set VERBOSITY terse
SELECT idgen_worker_reset_horizon(2, 6, now());
\set VERBOSITY default

-- Handover: a holder reports the bound of its IDs with its claim and every
-- renewal (the greatest is kept), and with its release what it did issue;
-- the next holder of the id is told it, and starts above it.  Times are
-- shown relative to t0.
SELECT now() AS t0 \gset
SELECT token AS h1, handover_horizon IS NULL AS first_holder
FROM idgen_server_lease(404, 'server D', '30 s', 1, 1, horizon => :'t0'::timestamptz + interval '10 s') \gset
SELECT :'first_holder' AS first_holder;
SELECT idgen_worker_renew(1, :h1, horizon => :'t0'::timestamptz + interval '30 s') > now() AS renewed;
SELECT idgen_worker_renew(1, :h1, horizon => :'t0'::timestamptz + interval '20 s') > now() AS renewed_lower;
SELECT horizon - :'t0' AS horizon, handover_horizon - :'t0' AS handover_horizon
FROM idgen_worker_leases WHERE datacenter_id = 1 AND worker_id = 1;
SELECT idgen_worker_release(1, :h1, :'t0'::timestamptz + interval '5 s');
SELECT horizon - :'t0' AS horizon FROM idgen_worker_leases WHERE datacenter_id = 1 AND worker_id = 1;
SELECT token AS h2, handover_horizon - :'t0' AS handover_horizon
FROM idgen_server_lease(505, 'server E', '30 s', 1, 1, horizon => :'t0'::timestamptz + interval '1 s') \gset
SELECT :'handover_horizon' AS handover_horizon;
-- A release never brings it below where the lease began.
SELECT idgen_worker_release(1, :h2, :'t0'::timestamptz - interval '1 year');
SELECT horizon - :'t0' AS horizon, handover_horizon - :'t0' AS handover_horizon
FROM idgen_worker_leases WHERE datacenter_id = 1 AND worker_id = 1;

-- A horizon beyond what the lease's holder can issue is refused: beyond
-- the lease's end (now + ttl; now for a release) plus idgen.worker_quarantine,
-- idgen.takeover_max_lead and idgen.max_drift (0 + 60 s + 100 ms here).
\set VERBOSITY sqlstate
SELECT * FROM idgen_server_lease(707, 'server G', '30 s', 1, 2, horizon => now() + interval '91 s');
SELECT token AS g1 FROM idgen_server_lease(707, 'server G', '30 s', 1, 2,
    horizon => now() + interval '89 s') \gset
SELECT idgen_worker_renew(2, :g1, horizon => now() + interval '99 years');
SELECT idgen_worker_release(2, :g1, now() + interval '61 s');
\set VERBOSITY default
SELECT idgen_worker_release(2, :g1, now());
-- A horizon written before that rule (or by hand) is handed over only as far
-- as its lease's end plus the same reach: the next holder starts there, not
-- 99 years ahead.
UPDATE idgen_worker_lease SET horizon = now() + interval '99 years',
    released_at = :'t0'::timestamptz - interval '1 min', expires_at = :'t0'::timestamptz - interval '1 min'
WHERE id = (1 << 5) | 2;
SELECT token AS g2, handover_horizon - :'t0' AS handover_horizon
FROM idgen_server_lease(808, 'server H', '30 s', 1, 2) \gset
SELECT :'handover_horizon' AS handover_horizon;
SELECT horizon - :'t0' AS horizon FROM idgen_worker_leases WHERE datacenter_id = 1 AND worker_id = 2;

-- idgen_worker_reset_horizon: an administrator sets the horizon of an id
-- whose lease has ended; it returns the one it had.  A held lease's is
-- its holder's.
\set VERBOSITY terse
SELECT idgen_worker_reset_horizon(1, 2, now());
\set VERBOSITY default
SELECT idgen_worker_release(2, :g2, :'t0');
SELECT idgen_worker_reset_horizon(1, 2, :'t0'::timestamptz + interval '3 s') - :'t0' AS was;
SELECT horizon - :'t0' AS horizon FROM idgen_worker_leases WHERE datacenter_id = 1 AND worker_id = 2;
SELECT idgen_worker_reset_horizon(1, 2) - :'t0' AS was;
SELECT horizon FROM idgen_worker_leases WHERE datacenter_id = 1 AND worker_id = 2;
SELECT idgen_worker_reset_horizon(1, 30);
SELECT idgen_worker_reset_horizon(1, 32);
SELECT idgen_worker_reset_horizon(NULL, 2);
SELECT idgen_worker_reset_horizon(1, 2, 'infinity');

-- A new token is above every token in the table, also when this server's
-- clock is behind the one that gave them (a table restored elsewhere):
-- here the last token of id (1, 2) is made an hour ahead of the clock.
UPDATE idgen_worker_lease SET token = token + (3600000::bigint << 12) WHERE id = (1 << 5) | 2
RETURNING token AS ahead \gset
SELECT token AS i1, token > :ahead AS above_the_table
FROM idgen_server_lease(909, 'server I', '30 s', 1, 2) \gset
SELECT :'above_the_table' AS above_the_table;
SELECT idgen_worker_release(2, :i1);

-- The purge keeps a row with a horizon (the id's only record of it), even
-- long after its release, and deletes a row without one that has rested.
UPDATE idgen_worker_lease SET released_at = now() - interval '1 day', expires_at = now() - interval '1 day'
WHERE token = :h2;
SELECT token AS horizonless_token
FROM idgen_server_lease(606, 'server F', '30 s', 2, 9) \gset
SELECT idgen_worker_release(9, :horizonless_token);
UPDATE idgen_worker_lease SET released_at = now() - interval '1 day', expires_at = now() - interval '1 day'
WHERE token = :horizonless_token;
SELECT idgen_worker_purge() AS purged;
SELECT datacenter_id, worker_id, horizon - :'t0' AS horizon FROM idgen_worker_leases
WHERE (datacenter_id, worker_id) IN ((1, 1), (2, 9));
-- Any free identity: never this server's own, never one that is held.
SELECT (datacenter_id, worker_id) NOT IN ((3, 7), (2, 5)) AS free_one
FROM idgen_server_lease(303, 'server C started at 4');
SELECT system_identifier, count(*) FROM idgen_worker_leases WHERE state = 'held'
GROUP BY 1 ORDER BY 1;

-- Only for the roles it is granted to.
CREATE ROLE registry_nobody;
SET ROLE registry_nobody;
SELECT * FROM idgen_server_lease(404, 'x');
RESET ROLE;
DROP ROLE registry_nobody;

-- Generation is not affected on a server whose identity is not leased.
SELECT datacenter_id, worker_id FROM idgen_snowflake_decode(idgen_snowflake());
DELETE FROM idgen_worker_lease;
DROP FUNCTION claim_error(bigint, text, int, int);
RESET idgen.worker_quarantine;
