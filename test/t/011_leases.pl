# Scenario: worker-id leases under real concurrency and over time.
#
#  - 200 acquirers released together over 64 ids: exactly 64 succeed, each
#    with its own id and token; the other 136 get the exhaustion error.
#  - Churn: 32 pgbench clients acquire, hold, renew and release 256 ids for
#    a few seconds; a lease handed out twice would make its first holder's
#    renewal fail ("lost") and abort that client.  Again while REINDEX
#    CONCURRENTLY rebuilds the lease table's primary key.
#  - A session-bound lease ends with its connection and then rests in
#    quarantine.
#  - The idgen sequencer deletes ended leases; tokens keep growing
#    across a crash, and across DROP EXTENSION / CREATE EXTENSION, after which the
#    ids of the dropped table's live leases are not handed out until those
#    leases have ended and rested.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

# This server is datacenter 31, worker 31 (id 1023): outside the ids leased
# below, so all 64 of them can be handed out.  Purges every second,
# whatever the clusters' default: the test waits for one to delete the
# released leases, and its churn runs beside them.  A lease's token is a
# tick of the UUIDv7 clock, which waits for the idgen keeper's durable
# horizon up to idgen.clock_wait: on a loaded machine the keeper's fsync
# took over 2 s during the churn, and acquisitions failed ("the durable
# horizon has not advanced") where 30 s lets them wait; after the crash
# below the test waits for the keeper's horizon (wait_for_horizon), which
# must reach WAL first.  What is tested here is who gets which id.
my $node = idgen_node(
	'leases',
	'idgen.clock_wait' => '30s',
	'max_connections' => 230,
	'idgen.datacenter_id' => 31,
	'idgen.worker_id' => 31,
	'idgen.worker_quarantine' => 0,
	'idgen.purge_interval' => '1s');
my $pgbench = $node->installed_command('pgbench');
my $tmp = PostgreSQL::Test::Utils::tempdir;

$node->safe_psql('postgres',
	'CREATE TABLE got (client int, worker_id int, datacenter_id int, token bigint)');

# --- 200 acquirers, 64 ids -------------------------------------------------
{
	# The clients queue on an advisory lock the test holds, so that all 200
	# acquire at the same moment once it lets go.
	my $gate = $node->background_psql('postgres');
	$gate->query_safe('SELECT pg_advisory_lock(42)');
	PostgreSQL::Test::Utils::append_to_file("$tmp/acquire.sql", q{
SELECT pg_advisory_lock_shared(42);
SELECT pg_advisory_unlock_shared(42);
INSERT INTO got SELECT :client_id, worker_id, datacenter_id, token
  FROM idgen_worker_acquire('client-' || :client_id, ttl => '15 s', max_workers => 64);
});
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ $pgbench, '-n', '-c', 200, '-j', 8, '-t', 1, '-f', "$tmp/acquire.sql",
			$node->connstr('postgres') ], '>', \$out, '2>', \$err);
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 200 FROM pg_locks WHERE locktype = 'advisory' AND objid = 42 AND NOT granted})
	  or die 'the 200 clients did not reach the gate';
	$gate->query_safe('SELECT pg_advisory_unlock(42)');
	$h->finish;
	$gate->quit;

	my @exhausted = ($err =~ /ERROR:  all 64 worker ids are taken/g);
	is(scalar(@exhausted), 136, '136 of 200 acquirers got the exhaustion error');
	is($node->safe_psql('postgres',
			'SELECT count(*), count(DISTINCT (datacenter_id, worker_id)), count(DISTINCT token), '
			  . 'min(datacenter_id << 5 | worker_id), max(datacenter_id << 5 | worker_id) FROM got'),
		'64|64|64|0|63', 'exactly 64 acquirers succeeded, each with its own id and token');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM idgen_worker_leases WHERE state = 'held'"),
		'64', 'the view shows 64 held leases');
}

# --- churn: acquire, hold, renew, release ----------------------------------
# 32 pgbench clients run churn.sql (below) for $seconds: none may fail.  A
# released lease's id rests until the lease's expiry (quarantine 0 here), so
# the churn's leases are short, but not so short that a loaded machine's
# pause between a claim and its renewal outlasts them (2 s; 100 ms did on
# a loaded run), over 256 ids; it starts once the 64 leases above, released,
# have expired.
sub run_churn
{
	my ($name, $seconds) = @_;
	my ($out, $err) = ('', '');
	my $clean = IPC::Run::run([ $pgbench, '-n', '-c', 32, '-j', 4, '-T', $seconds, '-f', "$tmp/churn.sql",
			$node->connstr('postgres') ], '>', \$out, '2>', \$err);
	note("$name:\n$out$err");
	unlike($err, qr/ERROR/, "$name: no claim, renewal or release failed (no lease was handed out twice)");
	ok($clean, "$name: pgbench exited 0 (no client aborted)");
}

{
	$node->safe_psql('postgres', q{
		CREATE TABLE churn (client int, ok boolean);
		CREATE FUNCTION try_acquire(holder text, OUT w int, OUT t bigint) LANGUAGE plpgsql AS $$
		BEGIN
			SELECT worker_id, token INTO w, t FROM idgen_worker_acquire(holder, ttl => '2 s', max_workers => 256);
			INSERT INTO churn VALUES (0, true);
		EXCEPTION WHEN program_limit_exceeded THEN
			w := -1; t := -1;
			INSERT INTO churn VALUES (0, false);
		END $$;
		SELECT count(*) FROM (SELECT idgen_worker_release(worker_id, token) FROM got) s;
	});
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idgen_worker_leases WHERE state <> 'free'")
	  or die 'the released leases did not expire';
	PostgreSQL::Test::Utils::append_to_file("$tmp/churn.sql", q{
SELECT w, t FROM try_acquire('churn-' || :client_id) \gset
\if :t > 0
SELECT pg_sleep(0.002 * random());
SELECT idgen_worker_renew(:w, :t) IS NOT NULL AS renewed;
SELECT 1 / idgen_worker_release(:w, :t)::int AS released;
\endif
});
	run_churn('churn', 5);
	my ($ok, $full) = split /\|/, $node->safe_psql('postgres',
		'SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok) FROM churn');
	cmp_ok($ok, '>', 200, "churn: $ok leases acquired, renewed and released");
	cmp_ok($full, '>', 0, "churn: the 256 ids ran out $full times (the clients contended)");
}

# --- churn while the primary key is rebuilt --------------------------------
# The same churn while REINDEX CONCURRENTLY's new index of the lease table's
# primary key takes inserts but is not valid yet (a transaction with an old
# snapshot holds it there), so it is no ON CONFLICT arbiter: the claims of
# an id, and the purge's deletions, must still take turns (they do, under
# the id's advisory lock), or a claim fails in the new index.
{
	$node->safe_psql('postgres', 'TRUNCATE churn');
	my ($held, $release) = hold_reindex($node, 'idgen_worker_lease_pkey');
	run_churn('churn during REINDEX CONCURRENTLY', 3);
	is($node->safe_psql('postgres', $held), 't',
		'churn during REINDEX CONCURRENTLY: the new index was ready and not valid throughout');
	my $ok = $node->safe_psql('postgres', 'SELECT count(*) FILTER (WHERE ok) FROM churn');
	cmp_ok($ok, '>', 100, "churn during REINDEX CONCURRENTLY: $ok leases acquired, renewed and released");
	$release->();
	$node->safe_psql('postgres', 'CREATE EXTENSION IF NOT EXISTS amcheck');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM (SELECT bt_index_parent_check('idgen_worker_lease_pkey', heapallindexed => true)) c"),
		'1', 'churn during REINDEX CONCURRENTLY: the rebuilt primary key has every row');
}

# --- a session-bound lease ends with its session ---------------------------
{
	# A quarantine of 10 s: the two checks made while the id rests must come
	# before it has passed, which a loaded machine's few seconds between
	# statements would not leave to one of 2 s.
	$node->safe_psql('postgres', 'DELETE FROM idgen_worker_lease');
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET idgen.worker_quarantine = '10s'; SELECT pg_reload_conf()");
	$node->poll_query_until('postgres', "SELECT current_setting('idgen.worker_quarantine') = '10s'")
	  or die 'quarantine not set';
	my $holder = $node->background_psql('postgres');
	my $pid = $holder->query_safe('SELECT pg_backend_pid()');
	$holder->query_safe(
		"SELECT * FROM idgen_worker_acquire('session', session_bound => true, max_workers => 1)");
	is($node->safe_psql('postgres', 'SELECT state, holder_pid FROM idgen_worker_leases'),
		"held|$pid", 'a session-bound lease is held by its session');
	like(sql_error($node, "SELECT * FROM idgen_worker_acquire('other', max_workers => 1)"),
		qr/54000: all 1 worker ids are taken/, 'its id is not leased again while the session lives');
	$holder->quit;
	# The idgen sequencer notices the session is gone and ends the lease; the
	# id then rests for the quarantine (10 s).
	$node->poll_query_until('postgres', 'SELECT expires_at IS NOT NULL FROM idgen_worker_lease')
	  or die 'the session lease was not ended';
	pass('the idgen sequencer ended the lease of the closed session');
	like(sql_error($node, "SELECT * FROM idgen_worker_acquire('other', max_workers => 1)"),
		qr/54000: all 1 worker ids are taken/, 'after the session ends, the id rests in quarantine');
	is($node->safe_psql('postgres', 'SELECT state FROM idgen_worker_leases'),
		'quarantine', 'the view shows the quarantine');
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idgen_worker_leases WHERE state <> 'free'")
	  or die 'the quarantine did not end';
	is($node->safe_psql('postgres',
			"SELECT worker_id FROM idgen_worker_acquire('other', ttl => '1 s', max_workers => 1)"),
		'0', 'after the quarantine, the id is leased again');
	$node->safe_psql('postgres',
		'ALTER SYSTEM RESET idgen.worker_quarantine; SELECT pg_reload_conf()');
}

# --- purge, and tokens across a crash --------------------------------------
{
	my $max_token = $node->safe_psql('postgres', 'SELECT max(token) FROM idgen_worker_lease');
	$node->safe_psql('postgres',
		'SELECT idgen_worker_release(worker_id, token) FROM idgen_worker_leases');
	$node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM idgen_worker_lease')
	  or die 'the released leases were not purged';
	pass('the idgen sequencer deleted the ended leases');
	$node->stop('immediate');
	$node->start;
	wait_for_horizon($node);
	my $token = $node->safe_psql('postgres',
		"SELECT token FROM idgen_worker_acquire('after-crash', ttl => '1 s', max_workers => 1)");
	cmp_ok($token, '>', $max_token, 'a token after a crash is greater than every token before');
}

# --- DROP EXTENSION and CREATE EXTENSION --------------------------------
# The new lease table knows nothing of the leases of the old one, which
# their holders still use: tokens keep growing (they are clock ticks, not a
# sequence the extension owned), and ids with no row in the new table rest
# until the old table's leases have ended, plus the quarantine.
{
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET idgen.worker_quarantine = '1s'; SELECT pg_reload_conf()");
	$node->poll_query_until('postgres', "SELECT current_setting('idgen.worker_quarantine') = '1s'")
	  or die 'quarantine not set';
	$node->safe_psql('postgres',
		'SELECT idgen_worker_release(worker_id, token) FROM idgen_worker_leases');
	# A ttl of 20 s: the lease must still be held by the last check that
	# says so below, a dozen statements later (DROP and CREATE EXTENSION
	# among them), which a loaded machine may stretch over seconds.
	$node->poll_query_until('postgres', q{
			SELECT count(*) = 1 FROM idgen_worker_acquire('before-drop', ttl => '20 s', max_workers => 1)})
	  or die 'id 0 was not leased';
	my ($old_token, $old_expiry) = split /\|/, $node->safe_psql('postgres',
		"SELECT token, extract(epoch FROM expires_at) FROM idgen_worker_lease WHERE holder = 'before-drop'");
	# A release that rolls back leaves the lease held: it counts as held.
	$node->safe_psql('postgres', "BEGIN; SELECT idgen_worker_release(0, $old_token); ROLLBACK");
	# A session-bound lease of id 1 whose session outlives the table.
	my $holder = $node->background_psql('postgres');
	$holder->query_safe(
		"SELECT worker_id FROM idgen_worker_acquire('session-before-drop', session_bound => true, max_workers => 2)");
	$node->safe_psql('postgres', 'DROP TABLE got; DROP EXTENSION idgen; CREATE EXTENSION idgen');
	like(sql_error($node, "SELECT * FROM idgen_worker_acquire('after-drop', max_workers => 2)"),
		qr/54000: all 2 worker ids are taken/,
		'after DROP and CREATE EXTENSION, neither the ttl lease nor the session-bound one is handed out');
	$holder->quit;
	$node->poll_query_until('postgres', q{
			SELECT worker_id = 1 FROM idgen_worker_acquire('after-session', max_workers => 2)})
	  or die 'the id of the session-bound lease was not leased once its session ended';
	pass('the session-bound lease\'s id is leased once its session has ended');
	my $err = sql_error($node, "SELECT * FROM idgen_worker_acquire('after-drop', max_workers => 1)");
	like($err, qr/54000: all 1 worker ids are taken/,
		'after DROP and CREATE EXTENSION, the id leased in the old table is not handed out');
	like($err, qr/1 has no lease in this table but may still be leased in the table it replaced/,
		'and the error says why');
	like(sql_error($node, "SELECT * FROM idgen_server_lease(1, 'x', claim_datacenter_id => 0, claim_worker_id => 0)"),
		qr/Its lease in the lease table this one replaced \(the extension was dropped and created again\) may still be held; it rests until/,
		'a claim of that very id says so too');
	$node->poll_query_until('postgres', q{
			SELECT count(*) = 1 FROM idgen_worker_acquire('after-drop', max_workers => 1)})
	  or die 'the id was never leased again';
	my ($token, $acquired_at) = split /\|/, $node->safe_psql('postgres',
		"SELECT token, extract(epoch FROM acquired_at) FROM idgen_worker_lease WHERE holder = 'after-drop'");
	cmp_ok($acquired_at, '>=', $old_expiry + 1,
		'it is leased again once the old lease ended and rested its quarantine');
	cmp_ok($token, '>', $old_token, 'with a greater token than the old table\'s');
}

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
