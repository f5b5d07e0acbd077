# Scenario: idgen through pgbouncer in transaction pooling mode
# (pool_mode = transaction), where each transaction of a client may run on
# another of the pooler's server connections.  The test starts pgbouncer
# itself, on a free port, in front of one node, with a pool of two server
# connections.
#
#  - Per-key sequences from 8 pooled clients (pgbench), two calls in each
#    transaction: the values of a transactional key are exactly 1..800,
#    those of a cached key (cache => 10) distinct; the clients ran on at
#    most 2 server processes.
#  - idgen_snowflake_last() asked in the INSERT's transaction, as the README
#    says to behind transaction pooling: 8 pgbench clients, each INSERT's
#    ID equals the _last() of its transaction.
#  - An expiring lease (a ttl) is acquired, renewed and released by three
#    clients, each on another server connection than the one before.
#  - A session-bound lease does not work there, as docs/leases.md says: its
#    session is the server connection that acquired it.  The client's own
#    renewal, run on the other server connection, fails with "bound to
#    another session" and a hint naming transaction pooling; the lease
#    outlives the client (the purge leaves it alone); another client, handed
#    that server connection, releases it.
#  - In session pooling mode (a second pool, one server connection, the
#    default server_reset_query DISCARD ALL), a client handed the server
#    connection another client generated IDs on reads no ID of that client:
#    idgen_snowflake_last() and idgen_uuid7_last() are not yet defined, as
#    currval() is not.
#
# Skipped when pgbouncer is not installed (Debian package pgbouncer, which
# test/run.sh and test/chroot.sh install).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my ($pgbouncer) = grep { -x $_ }
  map { "$_/pgbouncer" } (split(/:/, $ENV{PATH} // ''), '/usr/sbin', '/usr/bin');
plan skip_all => 'pgbouncer is not installed (Debian package pgbouncer)' unless $pgbouncer;

# Purges every second, whatever the cluster's default: the session-bound
# lease below must outlive a purge that runs after its client has gone,
# and the test waits for one (wait_for_purge).
my $node = idgen_node('pooled', 'idgen.purge_interval' => '1s', 'idgen.worker_quarantine' => 0);
$node->safe_psql('postgres', q{
	CREATE TABLE got (k text, v bigint, pid int);
	CREATE TABLE last_rows (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), last bigint);
	SELECT idgen_seq_configure('cached', cache => 10);
});

# The pooler: a node object that is never started gives a free port and the
# tests' socket directory, so that psql, pgbench and background_psql reach
# pgbouncer through it.
my $bouncer = PostgreSQL::Test::Cluster->new('bouncer');
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $user = getpwuid($>);
PostgreSQL::Test::Utils::append_to_file("$tmp/userlist.txt", qq{"$user" ""\n});
# No listen_addr: a Unix socket only.
PostgreSQL::Test::Utils::append_to_file("$tmp/pgbouncer.ini",
	sprintf(<<'EOF', ($node->host, $node->port) x 2, $bouncer->port, $bouncer->host, ($tmp) x 3));
[databases]
postgres = host=%s port=%d dbname=postgres
session = host=%s port=%d dbname=postgres pool_mode=session pool_size=1

[pgbouncer]
listen_port = %d
unix_socket_dir = %s
auth_type = trust
auth_file = %s/userlist.txt
pool_mode = transaction
default_pool_size = 2
max_client_conn = 100
server_round_robin = 0
logfile = %s/pgbouncer.log
pidfile = %s/pgbouncer.pid
EOF
my $pooler = IPC::Run::start([ $pgbouncer, "$tmp/pgbouncer.ini" ], '>', "$tmp/pgbouncer.out", '2>&1');
my $up = 0;
for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
{
	# psql may end (no pgbouncer listening yet) before it reads the query
	# from its standard input: IPC::Run then dies of the broken pipe
	# (EPIPE), which is one more failed try.
	my $ret = eval { ($bouncer->psql('postgres', 'SELECT 1'))[0] } // -1;
	last if $up = ($ret == 0);
	Time::HiRes::usleep(100_000);
}
ok($up, 'pgbouncer accepts connections')
  or diag(PostgreSQL::Test::Utils::slurp_file("$tmp/pgbouncer.log"));

# Both server connections opened (two transactions at once), so that the
# pool holds exactly two from here on.
{
	my @s = map { $bouncer->background_psql('postgres') } 1 .. 2;
	$_->query_safe('BEGIN; SELECT pg_backend_pid()') for @s;
	my %pids = map { $_->query_safe('SELECT pg_backend_pid()') => 1 } @s;
	is(scalar(keys %pids), 2, 'the pool has two server connections');
	$_->query_safe('COMMIT'), $_->quit for @s;
}

# A client of the pool in a transaction on the server connection of backend
# $pid: with two connections in the pool, the first or the second client
# opened gets it; the other ends its transaction.
sub hold_backend
{
	my ($pid) = @_;
	my @other;
	for (1 .. 2)
	{
		my $s = $bouncer->background_psql('postgres', on_error_stop => 0);
		$s->query_safe('BEGIN');
		if ($s->query_safe('SELECT pg_backend_pid()') eq $pid)
		{
			$_->query_safe('COMMIT'), $_->quit for @other;
			return $s;
		}
		push @other, $s;
	}
	die "no client of the pool got backend $pid";
}

# Wait until a whole purge of database postgres has run since this call:
# a lease that has already expired (a 1 us ttl, and no quarantine here) is
# deleted by the purge that follows its acquisition and by nothing else
# here, so once a second one is gone, a purge that began after the first
# was deleted has run to its end.
sub wait_for_purge
{
	for my $n (1 .. 2)
	{
		my $token = $node->safe_psql('postgres',
			"SELECT token FROM idgen_worker_acquire('purge-canary-$n', ttl => '1 microsecond')");
		$node->poll_query_until('postgres',
			"SELECT NOT EXISTS (SELECT FROM idgen_worker_lease WHERE token = $token)")
		  or die "no purge deleted the expired lease purge-canary-$n (token $token)";
	}
}

# --- Per-key sequences from pooled clients ----------------------------------
PostgreSQL::Test::Utils::append_to_file("$tmp/seq.sql", q{
BEGIN;
INSERT INTO got SELECT 'plain', idgen_seq_next('plain'), pg_backend_pid();
INSERT INTO got SELECT 'plain', idgen_seq_next('plain'), pg_backend_pid();
INSERT INTO got SELECT 'cached', idgen_seq_next('cached'), pg_backend_pid();
END;
});
my $pgbench = $node->installed_command('pgbench');
my ($out, $err) = ('', '');
my $ok = IPC::Run::run([ $pgbench, '-n', '-c', 8, '-j', 2, '-t', 50, '-f', "$tmp/seq.sql",
		$bouncer->connstr('postgres') ], '>', \$out, '2>', \$err);
ok($ok, '8 pgbench clients through the pooler') or diag($err);
is($node->safe_psql('postgres', q{
	SELECT count(*), count(DISTINCT v), min(v), max(v) FROM got WHERE k = 'plain'}),
	'800|800|1|800', 'a transactional key: 1..800, no duplicate, no gap');
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT v) FROM got WHERE k = 'cached'}),
	'400|400', 'a cached key: 400 distinct values');
cmp_ok($node->safe_psql('postgres', q{SELECT count(DISTINCT pid) FROM got}), '<=', 2,
	'the 8 clients ran on at most 2 server processes');

# --- _last() in the INSERT's transaction ------------------------------------
PostgreSQL::Test::Utils::append_to_file("$tmp/last.sql", q{
BEGIN;
INSERT INTO last_rows (last) VALUES (NULL) RETURNING id \gset
UPDATE last_rows SET last = idgen_snowflake_last() WHERE id = :id;
END;
});
$ok = IPC::Run::run([ $pgbench, '-n', '-c', 8, '-j', 2, '-t', 50, '-f', "$tmp/last.sql",
		$bouncer->connstr('postgres') ], '>', \$out, '2>', \$err);
ok($ok, '8 pgbench clients insert and ask _last() in one transaction') or diag($err);
is($node->safe_psql('postgres', q{
	SELECT count(*), count(*) FILTER (WHERE last = id) FROM last_rows}),
	'400|400', "_last() in the INSERT's transaction is that INSERT's ID, every time");

# --- An expiring lease ------------------------------------------------------
# (A ttl of an hour: the lease must not expire while the clients connect,
# nor its released row be purged, which happens once its expiry is past,
# before the test reads it.)
{
	my ($wid, $token, $pid) = split /\|/, $bouncer->safe_psql('postgres', q{
		SELECT worker_id, token, pg_backend_pid() FROM idgen_worker_acquire('pooled-ttl', '1 hour')});
	my $holder = hold_backend($pid);
	my ($renewed, $renew_pid) = split /\|/, $bouncer->safe_psql('postgres',
		"SELECT idgen_worker_renew($wid, $token) > now(), pg_backend_pid()");
	is($renewed, 't', 'a lease with a ttl renews from another client');
	isnt($renew_pid, $pid, '... on another server connection');
	$holder->query_safe('COMMIT');
	$holder->quit;
	is($bouncer->safe_psql('postgres', "SELECT idgen_worker_release($wid, $token)"), 't',
		'a lease with a ttl is released from a third client');
	is($node->safe_psql('postgres', "SELECT released_at IS NOT NULL FROM idgen_worker_lease WHERE token = $token"),
		't', 'the lease is released');
}

# --- A session-bound lease --------------------------------------------------
{
	my $client = $bouncer->background_psql('postgres', on_error_stop => 0);
	my ($wid, $token, $pid) = split /\|/, $client->query_safe(q{
		SELECT worker_id, token, pg_backend_pid()
		FROM idgen_worker_acquire('pooled-session', session_bound => true)});
	# Another client is handed the server connection that acquired it; the
	# client's next transaction runs on the other one.
	my $other = hold_backend($pid);
	my ($renewed, $failed) = $client->query("SELECT idgen_worker_renew($wid, $token)");
	ok($failed, "the holder's own renewal fails on another server connection");
	like($client->{stderr}, qr/the lease of worker id $wid is bound to another session/,
		'... with "bound to another session"');
	like($client->{stderr}, qr/HINT:.*transaction-pooling pooler/s, '... and a hint naming transaction pooling');
	$client->quit;

	# The client is gone; its lease is not: the server connection that holds
	# it lives on in the pool.  After a whole purge since then it is still
	# held.
	wait_for_purge();
	is($node->safe_psql('postgres', "SELECT state FROM idgen_worker_leases WHERE token = $token"),
		'held', 'the session-bound lease outlives its client');
	is($other->query_safe("SELECT idgen_worker_release($wid, $token)"), 't',
		'another client of the pool, on that server connection, releases it');
	$other->query_safe('COMMIT');
	$other->quit;
	isnt($node->safe_psql('postgres', "SELECT state FROM idgen_worker_leases WHERE token = $token"),
		'held', 'the lease has ended');
}

# --- Session pooling: the next client's session is reset ------------------
{
	$node->safe_psql('postgres', 'CREATE SEQUENCE pooled_seq');
	my ($id, $uuid, $pid) = split /\|/, $bouncer->safe_psql('session', q{
		SELECT idgen_snowflake(), idgen_uuid7(), pg_backend_pid() FROM nextval('pooled_seq')});
	# The first client has disconnected; pgbouncer ran DISCARD ALL on its
	# server connection and hands it to the next client.
	my $next = $bouncer->background_psql('session', on_error_stop => 0);
	is($next->query_safe('SELECT pg_backend_pid()'), $pid,
		'session pooling: the next client is handed the same server connection');
	for my $f ('idgen_snowflake_last()', 'idgen_uuid7_last()', "currval('pooled_seq')")
	{
		my ($got, $failed) = $next->query("SELECT $f");
		ok($failed && $next->{stderr} =~ /is not yet defined in this session/,
			"session pooling: $f is not yet defined for the next client")
		  or diag("the next client read $got (the previous client's: $id, $uuid)");
	}
	$next->quit;
}

$pooler->signal('TERM');
$pooler->finish;
no_crash_logged($node, 'no crash');
done_testing();
