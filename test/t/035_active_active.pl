# Scenario: active-active.  Primaries replicate to each other with core
# logical replication, FOR ALL TABLES publications and subscriptions both
# ways with origin = none (PostgreSQL 16 and later), idgen installed on each
# with its own idgen.worker_id and its own idgen.active_node of
# idgen.active_nodes.
#
#  - Two nodes, per-key sequences under load on both: two clients on each
#    node take values of a transactional key, a cached key and a batch of
#    a third key, writing each into a replicated table (Snowflake primary
#    keys).  First with replication running, then with both subscriptions
#    disabled (a partition: each node sees none of the other's values),
#    then again with them enabled.  After catch-up: no (key, value) was
#    handed out twice, every value of a node is of its class (start + r *
#    step modulo N * step), both nodes hold the same rows, and no apply
#    worker logged an error.  Before the values were interleaved by node,
#    the partition alone handed out every value twice.  Public ID keys
#    rotated on both nodes during the partition make different versions,
#    and every form decodes on both nodes after catch-up.  Worker leases
#    taken during the partition: each id on one node only.  A cached key
#    used on both nodes during the partition: after the merge, a node
#    serves what it had reserved before, then goes on past the merged value.
#  - Two nodes with one identity (worker id 30 on both): each announces
#    it in idgen_identity_claim, replication carries the claim to the
#    other, and both stop Snowflake generation with an error naming the
#    other server (55006), without an apply error.  On one node, on every
#    version: its own claim appears, a claim written by hand for another
#    server stops it, idgen_info() and the log show it, a restart finds the
#    claim again, and once the claim is deleted a restart generates again.
#  - Three nodes in a mesh (each subscribes to the two others), the same
#    load on all three, with one node's subscriptions paused for a while.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IdgenTest;

# The errors pg_stat_subscription_stats counts, whatever the version calls
# its columns (17 and 18 have apply_error_count and sync_error_count; 19
# has no sync_error_count): every column named *_error_count.
my $apply_errors = q{SELECT coalesce(sum(e.value::bigint), 0)
	FROM pg_stat_subscription_stats s, jsonb_each_text(to_jsonb(s)) e
	WHERE e.key LIKE '%\_error\_count'};

# --- one node's values and leases, on every version ---------------------
# Node 1 of 3 hands out the values start + (3k + 1) * step only, from its
# row's value on, whoever wrote it.  idgen.purge_interval at 1 s: the
# server announces its identity at each purge, and the test waits for
# announcements (after a start, after a restart); a purge changes nothing
# else it checks (no key has a ttl, the leases last an hour).
my $one = idgen_node('one', 'idgen.active_nodes' => 3, 'idgen.active_node' => 1,
	'idgen.worker_id' => 20, 'idgen.purge_interval' => "'1s'");
is($one->safe_psql('postgres', "SELECT string_agg(idgen_seq_next('t')::text, ',') FROM generate_series(1, 3)"),
	'2,5,8', 'one node: a transactional key takes every third value, from start + step');
is($one->safe_psql('postgres', "SELECT string_agg(v::text, ',') FROM idgen_seq_next('b', 4) v"),
	'2,5,8,11', 'one node: a batch too');
$one->safe_psql('postgres', "SELECT idgen_seq_set('t', 100)");
is($one->safe_psql('postgres', "SELECT idgen_seq_next('t')"), '101',
	'one node: from a value written elsewhere, the first of its class past it');
$one->safe_psql('postgres', "SELECT idgen_seq_set('t', 101)");
is($one->safe_psql('postgres', "SELECT idgen_seq_next('t')"), '104',
	'one node: from a value of its own, the next of its class');
$one->safe_psql('postgres', "SELECT idgen_seq_configure('d', step => -2)");
is($one->safe_psql('postgres', "SELECT string_agg(idgen_seq_next('d')::text, ',') FROM generate_series(1, 3)"),
	'-4,-10,-16', 'one node: a descending key');
$one->safe_psql('postgres', "SELECT idgen_seq_configure('m', max_value => 7)");
is($one->safe_psql('postgres', "SELECT string_agg(idgen_seq_next('m')::text, ',') FROM generate_series(1, 2)"),
	'2,5', 'one node: up to its last value before max_value');
like(sql_error($one, "SELECT idgen_seq_next('m')"), qr/2200H.*reached maximum value of sequence key "m" \(7\)/s,
	'one node: then the limit is reached, though 6 and 7 are left to other nodes');
$one->safe_psql('postgres', "SELECT idgen_seq_configure('c', cache => 5)");
is($one->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE v % 3 <> 2) || ',' || count(DISTINCT v) FROM (SELECT idgen_seq_next('c') v FROM generate_series(1, 40)) s"),
	'0,40', 'one node: a cached key serves segments of its class');
is($one->safe_psql('postgres', "SELECT string_agg(worker_id::text, ',' ORDER BY worker_id) FROM
		(SELECT (idgen_worker_acquire('h' || i, '1 hour', max_workers => 9)).worker_id FROM generate_series(1, 3) i) s"),
	'1,4,7', 'one node: leases the worker ids of its class only');
like(sql_error($one, "SELECT * FROM idgen_worker_acquire('h', '1 hour', max_workers => 1)"),
	qr/22023.*max_workers 1 leaves no worker id to this node/s, 'one node: max_workers below its class refused');
# pglogical and Spock add a TRUNCATE trigger to every new table, idgen's
# too: idgen's direct writes of idgen_seq skip nothing of it, so it is
# accepted; a row trigger still is not.
$one->safe_psql('postgres', q{
	CREATE FUNCTION queue_truncate() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
	CREATE TRIGGER queue_truncate_trigger AFTER TRUNCATE ON idgen_seq
		FOR EACH STATEMENT EXECUTE FUNCTION queue_truncate();
	ALTER TABLE idgen_seq ENABLE ALWAYS TRIGGER queue_truncate_trigger;
});
is($one->safe_psql('postgres', "SELECT idgen_seq_next('tr')"), '2',
	'one node: a TRUNCATE trigger on idgen_seq is accepted');
$one->safe_psql('postgres', 'CREATE TRIGGER row_trigger AFTER INSERT ON idgen_seq
	FOR EACH ROW EXECUTE FUNCTION queue_truncate()');
like(sql_error($one, "SELECT idgen_seq_next('tr')"), qr/55000.*table "idgen_seq" has been altered/s,
	'one node: a row trigger is not');
$one->safe_psql('postgres', 'DROP TRIGGER row_trigger ON idgen_seq; DROP TRIGGER queue_truncate_trigger ON idgen_seq');

# Public ID keys: node 1 of 3 makes the versions 2, 5, 8, ... only.
is($one->safe_psql('postgres', 'SELECT idgen_public_rotate()'), '2', 'one node: its first key version');
is($one->safe_psql('postgres', 'SELECT idgen_public_rotate()'), '5', 'one node: its next one');
is($one->safe_psql('postgres', 'SELECT idgen_private(idgen_public(12345))'), '12345',
	'one node: forms decode');

# Identity claims: the server announces its own at each purge; another
# server's claim to it, here written by hand as replication would, stops
# Snowflake generation with an error naming both servers, and idgen_info()
# shows it.
my $sysid = $one->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
ok($one->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM idgen_identity_claim WHERE system_identifier = $sysid
		   AND datacenter_id = 0 AND worker_id = 20"),
	'one node: the server announces its identity');
is($one->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
	'one node: no clash shown before another claim');
$one->safe_psql('postgres', 'SELECT idgen_snowflake()');
$one->safe_psql('postgres',
	"INSERT INTO idgen_identity_claim VALUES (4242, 0, 21, 'elsewhere (port 1)', now())");
$one->safe_psql('postgres', 'SELECT idgen_snowflake()');
is($one->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
	'one node: a claim to another identity changes nothing');
# Announced at a time of its own, which the messages show, and not the
# time this server learnt of it in its place (two times in one message
# once shared one buffer).
$one->safe_psql('postgres',
	"INSERT INTO idgen_identity_claim VALUES (4243, 0, 20, 'twin (port 2)', '2026-01-02 03:04:05+00')");
like(sql_error($one, 'SET TIME ZONE UTC; SELECT idgen_snowflake()'),
	qr/55006.*identity \(datacenter 0, worker 20\) is also claimed by another server.*Server 4243 \(twin \(port 2\)\) announced it at 2026-01-02 03:04:05\+00, and this server $sysid \(.*\) learnt of it at (?!2026-01-02 03:04:05)\d{4}-/s,
	'one node: another claim to its identity stops generation, naming both servers and both times');
like($one->safe_psql('postgres', 'SET TIME ZONE UTC; SELECT identity_clash FROM idgen_info()'),
	qr/server 4243 \(twin \(port 2\)\) claims this identity since 2026-01-02 03:04:05\+00 \(seen at (?!2026-01-02 03:04:05)\d{4}-/,
	'one node: idgen_info() shows the clash');
ok($one->log_contains(qr/WARNING:  another server claims this server's Snowflake identity/),
	'one node: and the log');
isnt($one->safe_psql('postgres', 'SELECT idgen_uuid7()'), '', 'one node: UUIDv7 goes on');
# after a restart, the announcement finds the claim that is still there
$one->restart;
ok($one->poll_query_until('postgres', 'SELECT identity_clash IS NOT NULL FROM idgen_info()'),
	'one node: after a restart, the announcement finds the other claim again');
$one->safe_psql('postgres', 'DELETE FROM idgen_identity_claim WHERE system_identifier = 4243');
$one->restart;
wait_for_horizon($one);
my $restarted = $one->safe_psql('postgres', 'SELECT now()');
# an announcement after the restart has looked for other claims
$one->poll_query_until('postgres',
	"SELECT announced_at > '$restarted' FROM idgen_identity_claim WHERE system_identifier = $sysid")
  or die 'no announcement after the restart';
# another server's claim is still there (4242's), and the database
# subscribes to nothing: it was in a mesh, and does not start alone
like(sql_error($one, 'SELECT idgen_snowflake()'),
	qr/55000.*holds other servers' identity claims but has no subscription/s,
	'one node: with another server\'s claim and no subscription, it does not start alone');
$one->safe_psql('postgres', 'DELETE FROM idgen_identity_claim WHERE system_identifier = 4242');
$one->safe_psql('postgres', 'SELECT idgen_snowflake()');
is($one->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
	'one node: the claims deleted, a restart generates again');

# Another server's node claim to this node's number (node 1 of 3, here
# written by hand as replication would; its key is that server's system
# identifier, 4245, with the bits inverted): per-key values stop, and
# after a restart the announcement finds it again.  Deleted, a restart
# hands out values again.
$one->safe_psql('postgres',
	"INSERT INTO idgen_identity_claim VALUES (~4245::bigint, -3, 1, 'numbered alike (port 3)', now())");
like(sql_error($one, "SELECT idgen_seq_next('k')"),
	qr/55006.*another server has this node's number \(1 of 3\).*Server 4245 \(numbered alike \(port 3\)\)/s,
	'one node: another server\'s claim to its node number stops per-key values');
$one->restart;
ok($one->poll_query_until('postgres', q{SELECT identity_clash LIKE 'server 4245 % claims node 1 of 3 %' FROM idgen_info()}),
	'one node: after a restart, the announcement finds the node claim again');
$one->safe_psql('postgres', 'DELETE FROM idgen_identity_claim WHERE system_identifier = ~4245::bigint');
$one->restart;
$one->poll_query_until('postgres', "SELECT idgen_seq_next('k') IS NOT NULL")
  or die 'no per-key value after the node claim was deleted';
is($one->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
	'one node: the node claim deleted, a restart hands out per-key values again');

# A claim whose instance name is long and not ASCII, found in a UTF8
# database: the clash keeps it as ASCII (\xNN for each other byte), cut
# to 63 bytes between escapes, so that its messages reach a client of
# another encoding (cut inside a character, they failed with 22021).
$one->safe_psql('postgres', "CREATE DATABASE u8 ENCODING 'UTF8' LOCALE 'C' TEMPLATE template0");
$one->safe_psql('u8', q{CREATE EXTENSION idgen;
	INSERT INTO idgen_identity_claim VALUES (4244, 0, 20, repeat(U&'\00E9', 40), now())});
my $cut = '(\\\\xc3\\\\xa9){7}\\\\xc3';
like(sql_error($one, 'SET client_encoding = LATIN1; SELECT idgen_snowflake()'),
	qr/55006.*Server 4244 \($cut\) announced it at/s,
	'one node: a long name not in ASCII, kept as ASCII and cut between escapes: the clash error reaches a LATIN1 client');
like($one->safe_psql('postgres', 'SET client_encoding = LATIN1; SELECT identity_clash FROM idgen_info()'),
	qr/^server 4244 \($cut\) claims this identity/, 'one node: and idgen_info() too');
$one->safe_psql('u8', 'DELETE FROM idgen_identity_claim WHERE system_identifier = 4244');

# The database owner's read-only default: idgen's own transactions there
# (its purges, its announcement) run read-write all the same.  Before,
# each failed at every purge, the claim stood still in that database and
# three warnings were logged every idgen.purge_interval.
$one->safe_psql('postgres', 'ALTER DATABASE u8 SET default_transaction_read_only = on');
my $read_only_from = $one->safe_psql('postgres', 'SELECT now()');
$one->safe_psql('u8', q{SET default_transaction_read_only = off;
	SELECT idgen_seq_configure('brief', ttl => '1 s'); SELECT idgen_seq_next('brief')});
ok($one->poll_query_until('u8', q{SELECT count(*) = 0 FROM idgen_seq WHERE key = 'brief'}),
	'one node: a read-only default: an expired key is purged');
ok($one->poll_query_until('u8',
		"SELECT announced_at > '$read_only_from' FROM idgen_identity_claim WHERE system_identifier = $sysid"),
	'one node: and the server announces its identity');

# A purge step that fails at every purge (the announcement, behind a lock
# held for the while, with a lock_timeout the database's owner set) is
# logged once, not every second; the others go on; and once it runs
# again, that is logged.
$one->safe_psql('postgres', "ALTER DATABASE u8 SET lock_timeout = '100ms'");
my $log_offset = -s $one->logfile;
my $locker = $one->background_psql('u8');
$locker->query_safe('BEGIN; LOCK TABLE idgen_identity_claim IN ACCESS EXCLUSIVE MODE');
my $failed = qr/WARNING:  the idgen sequencer could not run public.idgen_identity_announce\(\)/;
$one->wait_for_log($failed, $log_offset);
# five purges after the first failure, each seen by the key it deletes
for my $i (1 .. 5)
{
	$one->safe_psql('u8', qq{SET default_transaction_read_only = off;
		SELECT idgen_seq_configure('brief$i', ttl => '1 s'); SELECT idgen_seq_next('brief$i')});
	$one->poll_query_until('u8', qq{SELECT count(*) = 0 FROM idgen_seq WHERE key = 'brief$i'})
	  or die "key brief$i was not purged";
}
my $warnings = () = substr(slurp_file($one->logfile), $log_offset) =~ /$failed/g;
is($warnings, 1, 'one node: a purge step that fails at every purge is logged once');
$locker->query_safe('ROLLBACK');
$locker->quit;
$one->wait_for_log(qr/LOG:  the idgen sequencer ran public.idgen_identity_announce\(\) again/, $log_offset);
pass('one node: and that it runs again');
$one->safe_psql('postgres', 'ALTER DATABASE u8 RESET ALL');

$one->append_conf('postgresql.conf', "idgen.active_node = 3\n");
$one->restart;
like(sql_error($one, "SELECT idgen_seq_next('t')"),
	qr/22023.*idgen.active_node \(3\) must be less than idgen.active_nodes \(3\)/s,
	'one node: a node number out of range hands out nothing');
is($one->safe_psql('postgres', "SELECT idgen_seq_current('t')"), '104', 'one node: and changes nothing');
$one->stop;

SKIP:
{
	skip 'subscriptions with origin = none need PostgreSQL 16 or later', 1
	  if $one->pg_version < 16;

# idgen.purge_interval at 2 s: each server announces its identity at each
# purge, and the twins' claims reach each other only by an announcement
# made after the subscriptions (which copy no data), which the test waits
# for.  A purge changes nothing else the test checks: no key has a ttl and
# the leases last an hour.
my %common = (
	'max_worker_processes' => 24,
	'max_logical_replication_workers' => 8,
	'max_wal_senders' => 10,
	'idgen.worker_quarantine' => 0,
	'idgen.purge_interval' => "'2s'",
	# the databases' sequencers stay between the loads: a cached key's
	# segments are retired when its sequencer ends, and the two nodes'
	# check of what a node reserved before a merge counts them
	'idgen.sequencer_idle' => "'1h'");

# The application's table, and a procedure a client runs: $n rounds, each
# one transaction taking one value of a transactional key, one of a cached
# key and a batch of 3 of a third key.
my $app = q{
	CREATE TABLE taken (id bigint PRIMARY KEY DEFAULT idgen_snowflake(),
		node int NOT NULL, k text NOT NULL, v bigint NOT NULL);
	CREATE PROCEDURE take(node int, n int) LANGUAGE plpgsql AS $$
	BEGIN
		FOR i IN 1 .. n LOOP
			INSERT INTO taken (node, k, v) VALUES (node, 'conv:1', idgen_seq_next('conv:1'));
			INSERT INTO taken (node, k, v) VALUES (node, 'hot:1', idgen_seq_next('hot:1'));
			INSERT INTO taken (node, k, v)
				SELECT node, 'batch:1', v FROM idgen_seq_next('batch:1', 3) AS v;
			COMMIT;
		END LOOP;
	END $$;
};

# $count nodes, node r with worker id 20 + r and active node r, and the
# settings %extra.
sub make_nodes
{
	my ($prefix, $count, %extra) = @_;
	my @nodes;
	for my $r (0 .. $count - 1)
	{
		my $node = idgen_node("${prefix}_$r", %common, %extra,
			'idgen.worker_id' => 20 + $r,
			'idgen.active_nodes' => $count,
			'idgen.active_node' => $r,
			_init => { allows_streaming => 'logical' });
		$node->safe_psql('postgres', $app);
		# the cached key exists everywhere before the load
		$node->safe_psql('postgres', "SELECT idgen_seq_configure('hot:1', cache => 20)");
		$node->safe_psql('postgres', "CREATE PUBLICATION p_$r FOR ALL TABLES");
		push @nodes, $node;
	}
	# every node subscribes to every other one, copying nothing (each has
	# its own rows already) and taking only changes made there
	for my $r (0 .. $count - 1)
	{
		for my $o (0 .. $count - 1)
		{
			next if $o == $r;
			my $conn = $nodes[$o]->connstr . ' dbname=postgres';
			$nodes[$r]->safe_psql('postgres',
				"CREATE SUBSCRIPTION s_${r}_from_$o CONNECTION '$conn' PUBLICATION p_$o
				 WITH (origin = none, copy_data = false)");
		}
	}
	for my $r (0 .. $count - 1)
	{
		$nodes[$r]->poll_query_until('postgres',
			"SELECT count(*) = " . ($count - 1) . " FROM pg_stat_subscription WHERE pid IS NOT NULL")
		  or die "subscriptions of node $r did not start";
	}
	# each hands out values once it has heard from the others
	wait_for_gate(@nodes);
	return @nodes;
}

sub set_subscriptions
{
	my ($node, $how) = @_;
	for my $s (split /\n/, $node->safe_psql('postgres', 'SELECT subname FROM pg_subscription'))
	{
		$node->safe_psql('postgres', "ALTER SUBSCRIPTION $s $how");
	}
}

# Every node has applied every other one's changes.
sub catch_up
{
	my @nodes = @_;
	for my $r (0 .. $#nodes)
	{
		for my $o (0 .. $#nodes)
		{
			next if $o == $r;
			$nodes[$o]->wait_for_catchup("s_${r}_from_$o");
		}
	}
}

sub check
{
	my ($what, @nodes) = @_;
	my $n = scalar @nodes;
	my $rows = $nodes[0]->safe_psql('postgres', 'SELECT count(*) FROM taken');
	cmp_ok($rows, '>', 0, "$what: values were taken");
	is($nodes[0]->safe_psql('postgres',
			'SELECT count(*) FROM (SELECT k, v FROM taken GROUP BY k, v HAVING count(*) > 1) d'),
		'0', "$what: no value of any key handed out twice ($rows taken)");
	# start 1, step 1: node r's values are r + 1 modulo n
	is($nodes[0]->safe_psql('postgres',
			"SELECT count(*) FROM taken WHERE (v - 1 - node) % $n <> 0"),
		'0', "$what: every value is of its node's class");
	my $digest = 'SELECT md5(string_agg(concat_ws(\' \', id, node, k, v), \',\' ORDER BY id)) FROM taken';
	my $first = $nodes[0]->safe_psql('postgres', $digest);
	for my $r (1 .. $#nodes)
	{
		is($nodes[$r]->safe_psql('postgres', $digest), $first,
			"$what: node $r holds the same rows as node 0");
	}
	for my $r (0 .. $#nodes)
	{
		# the clients' refused calls above are logged too: only the
		# workers' errors count
		ok(!$nodes[$r]->log_contains(
				qr/"logical replication [a-z ]*worker" \(PID \d+\) exited with exit code [1-9]|ERROR:.*(duplicate key|violates|conflict)/),
			"$what: no apply error logged on node $r");
		is($nodes[$r]->safe_psql('postgres',
				$apply_errors),
			'0', "$what: no apply error counted on node $r");
	}
}

# --- two nodes -------------------------------------------------------------
# A cached key's next segment is reserved only once its current one is
# used up (idgen.seq_cache_prefetch 1), so that what a node reserved
# before a merge is its row's value, read once its first call returned.
my @two = make_nodes('two', 2, 'idgen.seq_cache_prefetch' => 1);
$two[$_]->safe_psql('postgres', "SELECT idgen_seq_configure('cont', cache => 5)") for 0 .. 1;
take_on_nodes(150, @two);
# a partition: neither node sees the other's values while both go on
set_subscriptions($_, 'DISABLE') for @two;
take_on_nodes(50, @two);
# a cached key: node 0 takes its first value, from its first segment (1
# to its row's value), node 1 a hundred
is($two[0]->safe_psql('postgres', "SELECT idgen_seq_next('cont')"), '1', 'two nodes: a cached key\'s first value on node 0');
my $reserved = $two[0]->safe_psql('postgres', "SELECT value FROM idgen_seq WHERE key = 'cont'");
is($two[1]->safe_psql('postgres', q{SELECT count(DISTINCT v) || ',' || count(*) FILTER (WHERE v % 2 <> 0)
		FROM (SELECT idgen_seq_next('cont') v FROM generate_series(1, 100)) s}), '100,0',
	'two nodes: and 100 on node 1, all of its class');
# public ID keys rotated on both nodes during the partition: node 0 makes
# version 1, node 1 version 2; forms of each node, made then
my %form;
for my $r (0 .. 1)
{
	$two[$r]->safe_psql('postgres', 'SELECT idgen_public_rotate()');
	$form{$r} = $two[$r]->safe_psql('postgres', "SELECT idgen_public(1000 + $r)");
}

# worker leases during the partition: each node leases all it can of
# the ids 0 to 3
my %leased;
for my $r (0 .. 1)
{
	for my $i (1 .. 4)
	{
		my ($ret, $id) = $two[$r]->psql('postgres',
			"SELECT worker_id FROM idgen_worker_acquire('holder-$r-$i', '1 hour', max_workers => 4)");
		push @{ $leased{$id} }, $r if $ret == 0;
	}
}
is(join(',', map { "$_:" . join('+', @{ $leased{$_} }) } sort keys %leased), '0:0,1:1,2:0,3:1',
	'two nodes: each worker id leased by one node only during a partition');
like(sql_error($two[1], "SELECT * FROM idgen_server_lease(42, 'other', '1 hour', claim_datacenter_id => 0, claim_worker_id => 4)"),
	qr/worker id \(datacenter 0, worker 4\) is not leased by this node.*node 0's/s,
	"two nodes: a claim of another node's id is refused");
set_subscriptions($_, 'ENABLE') for @two;
take_on_nodes(50, @two);
catch_up(@two);
check('two nodes', @two);
# After catch-up, node 0's row of the cached key holds node 1's last
# value or more: node 0 first serves the rest of what it had reserved
# before the merge (3, 5, ... up to $reserved), then the first value of
# its class past the merged one (docs/active-active.md).
my $node1_row = $two[1]->safe_psql('postgres', "SELECT value FROM idgen_seq WHERE key = 'cont'");
ok($two[0]->poll_query_until('postgres', "SELECT value >= $node1_row FROM idgen_seq WHERE key = 'cont'"),
	'two nodes: node 1\'s values of the cached key merged into node 0\'s row');
my $merged = $two[0]->safe_psql('postgres', "SELECT value FROM idgen_seq WHERE key = 'cont'");
my @want = ((map { 1 + 2 * $_ } 1 .. ($reserved - 1) / 2), $merged + ($merged % 2 == 0 ? 1 : 2));
is($two[0]->safe_psql('postgres',
		"SELECT string_agg(idgen_seq_next('cont')::text, ',') FROM generate_series(1, " . scalar(@want) . ')'),
	join(',', @want),
	"two nodes: node 0 serves the rest of what it reserved (up to $reserved), then goes on past the merged value ($merged)");
# every form decodes on every node to its ID, and the current key is the
# same everywhere
for my $r (0 .. 1)
{
	for my $o (0 .. 1)
	{
		my ($ret, $out, $err) = $two[$o]->psql('postgres', "SELECT idgen_private('$form{$r}')");
		is($out, 1000 + $r, "two nodes: a form made on node $r during the partition decodes on node $o")
		  or diag($err);
	}
}
is($two[1]->safe_psql('postgres', "SELECT idgen_public(7)"), $two[0]->safe_psql('postgres', "SELECT idgen_public(7)"),
	'two nodes: after catch-up both encode with the same key');
ok(!$two[$_]->log_contains(qr/arrived with another key/), "two nodes: no key version retired on node $_")
  for 0 .. 1;
my $leases = 'SELECT string_agg(id || holder, \',\' ORDER BY id) FROM idgen_worker_lease';
is($two[1]->safe_psql('postgres', $leases), $two[0]->safe_psql('postgres', $leases),
	'two nodes: the lease tables agree');
# each key's row agrees on both nodes after catch-up: the furthest value
# (A row a node's idgen sequencer wrote after catch_up, a segment of a
# cached key reserved for a call made before, may still be on its way.)
my @keys = rows_once_agreed('SELECT string_agg(key || value, \',\' ORDER BY key) FROM idgen_seq', @two);
is($keys[1], $keys[0], 'two nodes: the keys\' rows agree');
no_crash_logged($_, 'two nodes: no crash') for @two;
$_->stop for @two;

# --- two nodes with one identity -------------------------------------------
# Both with worker id 30: each announces it, replication carries the claim
# to the other, and both stop generating with an error naming the other.
my @twins;
for my $r (0 .. 1)
{
	my $node = idgen_node("twin_$r", %common, 'idgen.worker_id' => 30,
		_init => { allows_streaming => 'logical' });
	$node->safe_psql('postgres', doc_block('docs/active-active.md', 'active-active/publish'));
	push @twins, $node;
}
# docs/active-active.md's publication on both, then its subscription, as
# printed, with the other node's connection string and name in place of
# node1's.
for my $r (0 .. 1)
{
	my $o = 1 - $r;
	my $conn = $twins[$o]->connstr . ' dbname=postgres';
	(my $steps = doc_block('docs/active-active.md', 'active-active/subscribe'))
	  =~ s/node0_from_node1 CONNECTION 'host=node1 dbname=app'/node${r}_from_node$o CONNECTION '$conn'/
	  or die 'the subscription step changed';
	$twins[$r]->safe_psql('postgres', $steps);
}
for my $r (0 .. 1)
{
	my $other = $twins[1 - $r]->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
	ok($twins[$r]->poll_query_until('postgres', 'SELECT identity_clash IS NOT NULL FROM idgen_info()'),
		"twins: node $r sees the clash");
	like(sql_error($twins[$r], 'SELECT idgen_snowflake()'),
		qr/55006.*identity \(datacenter 0, worker 30\) is also claimed by another server.*Server $other /s,
		"twins: node $r stopped generating, naming the other server");
	is($twins[$r]->safe_psql('postgres',
			$apply_errors),
		'0', "twins: no apply error on node $r");
}
$_->stop for @twins;

# --- three nodes -----------------------------------------------------------
my @three = make_nodes('three', 3);
take_on_nodes(60, @three);
set_subscriptions($three[2], 'DISABLE');
take_on_nodes(30, @three);
set_subscriptions($three[2], 'ENABLE');
catch_up(@three);
check('three nodes', @three);
no_crash_logged($_, 'three nodes: no crash') for @three;
}

done_testing();
