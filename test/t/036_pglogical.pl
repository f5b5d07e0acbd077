# Scenario: active-active on pglogical 2 (Debian's postgresql-NN-pglogical),
# which older versions use for what core logical replication does with
# origin = none since PostgreSQL 16.  Two primaries, pglogical installed
# before idgen (so pglogical's event trigger adds its TRUNCATE trigger to
# idgen's tables too), every table of public in the default replication
# set, subscriptions both ways with forward_origins = '{}', idgen.worker_id
# 20 and 21, idgen.active_nodes 2.
#
#  - idgen_seq_next works with pglogical's TRUNCATE trigger on idgen_seq.
#  - Two clients per node take a transactional key, a cached key and
#    batches, with replication running, then with both subscriptions
#    disabled, then enabled again: no (key, value) handed out twice, every
#    value of its node's class, the same rows on both nodes once all
#    arrived, every subscription still replicating.  pglogical reports the
#    updates of idgen_seq that meet a row changed locally as conflicts
#    (LOG) and applies them; the replica trigger keeps the furthest value.
#    Its apply of the claims logs no relcache reference leak (the claims'
#    trigger fires before the row is written).
#  - A node restarted while its peer is down, its pglogical subscription
#    disabled, starts alone.  With its subscription dropped instead it
#    refuses, and a call held by a lock between listing its subscriptions
#    and asking whether it is alone, while a core subscription is made,
#    still refuses: it decides from one snapshot.
#  - Two more nodes with one identity and one node number, the default
#    purge interval, each loaded with about 50 inserts a second from the
#    moment both are subscribed: each refuses until it hears from the
#    other through its pglogical subscription, and what it hears stops
#    both; no Snowflake ID and no per-key value handed out by both.
#
# Skipped when pglogical is not installed for the PostgreSQL under test.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
my $libdir = $probe->config_data('--pkglibdir');
plan skip_all => "pglogical is not installed ($libdir/pglogical.so; Debian package postgresql-NN-pglogical)"
  unless -f "$libdir/pglogical.so";

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

# PostgreSQL 15.20 and later minor releases let logical decoding use only
# the output plugins listed in output_plugin_libraries.
my %plugins;
$plugins{output_plugin_libraries} = "'pgoutput, test_decoding, pglogical_output'"
  if `postgres --describe-config 2>/dev/null` =~ /^output_plugin_libraries\t/m;

# A node "${prefix}_$label" with pglogical and idgen (node $r of 2, worker
# id $worker, %extra more settings), the application $app, and its
# pglogical node "n$label" and replication set: the steps of
# docs/active-active.md, as printed.
sub pglogical_node
{
	my ($prefix, $label, $r, $worker, $app, %extra) = @_;
	my $node = idgen_node("${prefix}_$label", %plugins, %extra,
		shared_preload_libraries => "'idgen,pglogical'",
		track_commit_timestamp => 'on',
		max_worker_processes => 24,
		max_replication_slots => 10,
		max_wal_senders => 10,
		'idgen.worker_id' => $worker,
		'idgen.active_nodes' => 2,
		'idgen.active_node' => $r,
		'idgen.worker_quarantine' => 0,
		_init => { allows_streaming => 'logical' });
	# pglogical first, then idgen: its tables get pglogical's trigger
	$node->safe_psql('postgres', 'DROP EXTENSION idgen');
	$node->safe_psql('postgres', doc_block('docs/active-active.md', 'active-active/pglogical-extensions'));
	$node->safe_psql('postgres', $app);
	my $dsn = $node->connstr . ' dbname=postgres';
	(my $step = doc_block('docs/active-active.md', 'active-active/pglogical-node'))
	  =~ s/'n0', dsn := 'host=node0 dbname=app'/'n$label', dsn := '$dsn'/ or die 'the node step changed';
	$node->safe_psql('postgres', $step);
	return $node;
}

# Subscribe each of the two @nodes to the other (subscriptions s_0 and
# s_1), as docs/active-active.md prints it; wait until both replicate.
sub pglogical_subscribe
{
	my (@nodes) = @_;
	for my $r (0 .. 1)
	{
		my $dsn = $nodes[ 1 - $r ]->connstr . ' dbname=postgres';
		(my $step = doc_block('docs/active-active.md', 'active-active/pglogical-subscribe'))
		  =~ s/'from_n1',\s+provider_dsn := 'host=node1 dbname=app'/'s_$r', provider_dsn := '$dsn'/
		  or die 'the subscription step changed';
		$nodes[$r]->safe_psql('postgres', $step);
	}
	for my $r (0 .. 1)
	{
		ok($nodes[$r]->poll_query_until('postgres',
				"SELECT status = 'replicating' FROM pglogical.show_subscription_status('s_$r')"),
			$nodes[$r]->name . ' replicates');
	}
}

my @nodes = map { pglogical_node('pgl', $_, $_, 20 + $_, $app) } 0 .. 1;
$nodes[0]->safe_psql('postgres', "SELECT idgen_seq_configure('hot:1', cache => 20)");
$nodes[1]->safe_psql('postgres', "SELECT idgen_seq_configure('hot:1', cache => 20)");
is($nodes[0]->safe_psql('postgres',
		q{SELECT count(*) > 0 FROM pg_trigger WHERE tgrelid = 'idgen_seq'::regclass AND tgname LIKE '%truncate%'}),
	't', "pglogical's TRUNCATE trigger is on idgen_seq");
is($nodes[0]->safe_psql('postgres', "SELECT idgen_seq_next('probe')"), '1',
	'idgen_seq_next works with it');
pglogical_subscribe(@nodes);
# each hands out values once it has heard from the other (a purge of the
# other's, up to a minute)
wait_for_gate(@nodes);

my $rows = 0;
# Two clients on each node, $n rounds each (take_on_nodes); the rows made.
sub load
{
	my ($n) = @_;
	take_on_nodes($n, @nodes[0 .. 1]);
	$rows += 4 * $n * 5;
}

load(100);
$nodes[$_]->safe_psql('postgres', "SELECT pglogical.alter_subscription_disable('s_$_')") for 0 .. 1;
load(50);
$nodes[$_]->safe_psql('postgres', "SELECT pglogical.alter_subscription_enable('s_$_')") for 0 .. 1;
load(50);
for my $r (0 .. 1)
{
	ok($nodes[$r]->poll_query_until('postgres', "SELECT count(*) = $rows FROM taken"),
		"node $r received every row ($rows)");
}

is($nodes[0]->safe_psql('postgres',
		'SELECT count(*) FROM (SELECT k, v FROM taken GROUP BY k, v HAVING count(*) > 1) d'),
	'0', 'no value of any key handed out twice');
is($nodes[0]->safe_psql('postgres', 'SELECT count(*) FROM taken WHERE (v - 1 - node) % 2 <> 0'),
	'0', "every value is of its node's class");
my $digest = q{SELECT md5(string_agg(concat_ws(' ', id, node, k, v), ',' ORDER BY id)) FROM taken};
is($nodes[1]->safe_psql('postgres', $digest), $nodes[0]->safe_psql('postgres', $digest),
	'both nodes hold the same rows');
# Every row of taken arrived, but a row of idgen_seq that a node's idgen
# sequencer wrote after them (a segment of the cached key reserved for a
# call made before) may still be on its way: the rows are compared once
# they are the same on both nodes (rows_once_agreed).
my $keys = q{SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM idgen_seq WHERE key <> 'probe'};
my @keys = rows_once_agreed($keys, @nodes);
is($keys[1], $keys[0], "the keys' rows agree: the furthest value");
for my $r (0 .. 1)
{
	is($nodes[$r]->safe_psql('postgres', "SELECT status FROM pglogical.show_subscription_status('s_$r')"),
		'replicating', "node $r still replicates");
	# pglogical logs the updates of idgen_seq that meet a row changed
	# here as conflicts (LOG), resolved by applying them, which the
	# replica trigger merges; the application's rows never conflict
	ok(!$nodes[$r]->log_contains(qr/pglogical apply[^\n]*ERROR:|CONFLICT: [^\n]*relation public\.taken/),
		"no apply error, no conflict on the application's table on node $r");
	# the claims' trigger fires before the row is written: pglogical's
	# apply leaves the relation it opened for an AFTER trigger unclosed
	ok(!$nodes[$r]->log_contains(qr/relcache reference leak/),
		"no relcache reference leak WARNING on node $r, whose pglogical apply wrote the other's claims");
	is($nodes[$r]->safe_psql('postgres',
			q{SELECT s.value = (SELECT max(v) FROM taken WHERE k = 'conv:1') FROM idgen_seq s WHERE key = 'conv:1'}),
		't', "node $r: the transactional key's row holds the furthest value handed out");
	no_crash_logged($nodes[$r], "no crash on node $r");
}
# Stopped before the twins start, their subscriptions disabled first:
# pglogical's apply process ends with "data stream ended" (XX000) when
# the node it streams from stops under it.
$nodes[$_]->safe_psql('postgres', "SELECT pglogical.alter_subscription_disable('s_$_')") for 0 .. 1;
for my $r (0 .. 1)
{
	$nodes[$r]->poll_query_until('postgres',
		"SELECT status = 'disabled' FROM pglogical.show_subscription_status('s_$r')")
	  or die "node $r: its subscription was not disabled";
}
# A node restarted while its peer is down starts alone once its
# subscription to the peer is disabled, the operator's word that the peer
# is not coming; it holds the peer's claims.
$nodes[1]->stop;
$nodes[0]->restart;
wait_for_horizon($nodes[0]);
my (undef, $alone, $why) = $nodes[0]->psql('postgres', 'SELECT idgen_snowflake()');
like($alone, qr/^\d+$/, 'node 0, restarted with node 1 down and its pglogical subscription disabled, starts alone')
  or diag($why);
$nodes[0]->stop;

# A call decides from one moment.  Node 1, its pglogical subscription
# dropped, holds node 0's claims and subscribes to nothing: it refuses.  A
# call is held between listing its subscriptions and asking whether it is
# alone (by a lock on pglogical's subscriptions, which it lists in
# between), a subscription to node 0 is made meanwhile, and the call
# still decides from what it listed: no subscription, so it refuses, and
# the gate waits for the new subscription.
# Node 0 announces at its start, then not for an hour.
$nodes[0]->append_conf('postgresql.conf', "idgen.purge_interval = '1h'");
$nodes[0]->start;
$nodes[0]->poll_query_until('postgres', q{SELECT EXISTS (SELECT FROM idgen_identity_claim
	WHERE system_identifier = (SELECT system_identifier FROM pg_control_system())
	AND announced_at > pg_postmaster_start_time())})
  or die 'node 0 did not announce at its start';
$nodes[0]->safe_psql('postgres', 'CREATE PUBLICATION claims FOR TABLE idgen_identity_claim');
$nodes[1]->start;
$nodes[1]->safe_psql('postgres', "SELECT pglogical.drop_subscription('s_1')");
like(sql_error($nodes[1], 'SELECT idgen_snowflake()'), qr/55000.*holds other servers' identity claims but has no subscription/s,
	'node 1, its pglogical subscription dropped, refuses');
my $locker = $nodes[1]->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE pglogical.subscription IN ACCESS EXCLUSIVE MODE');
my ($held_out, $held_err) = ('', '');
my $held = IPC::Run::start([ 'psql', '-X', '-q', '-d', $nodes[1]->connstr('postgres'), '-c', 'SELECT idgen_snowflake()' ],
	'>', \$held_out, '2>', \$held_err);
$nodes[1]->poll_query_until('postgres', q{SELECT EXISTS (SELECT FROM pg_stat_activity
	WHERE query = 'SELECT idgen_snowflake()' AND wait_event_type = 'Lock')})
  or die 'the call does not wait for the lock on pglogical.subscription';
$nodes[1]->safe_psql('postgres',
	"CREATE SUBSCRIPTION node1_claims CONNECTION '" . $nodes[0]->connstr . " dbname=postgres' PUBLICATION claims");
$locker->query_safe('COMMIT');
$locker->quit;
$held->finish;
like($held_err, qr/holds other servers' identity claims but has no subscription/,
	'a call held while a subscription is made decides from what it listed: none, so it refuses')
  or diag("the call returned: $held_out");
like(sql_error($nodes[1], 'SELECT idgen_snowflake()'), qr/55000.*no claim has arrived yet through node1_claims/s,
	'... and the next call waits for the new subscription');
$_->stop for @nodes[0 .. 1];

# --- two nodes with one identity and one node number, under load ------------
{
	# the default purge interval, set so that no test configuration
	# shortens it
	my @twins = map { pglogical_node('pgl_twin', $_, 0, 22, mesh_app(), 'idgen.purge_interval' => "'60s'") } 0 .. 1;
	pglogical_subscribe(@twins);
	my @load = map { start_mesh_load($twins[$_], $_, 90) } 0 .. 1;
	for my $node (@twins)
	{
		ok($node->poll_query_until('postgres', q{SELECT identity_clash LIKE '%claims this identity%'
			AND identity_clash LIKE '%claims node 0 of 2%' FROM idgen_info()}),
			'twins: ' . $node->name . ' sees both clashes');
	}
	$_->finish for @load;
	my (@ids, @values);
	for my $r (0 .. 1)
	{
		($ids[$r], $values[$r]) = issued_by($twins[$r], $r);
		like($twins[$r]->safe_psql('postgres', "SELECT string_agg(DISTINCT message, '; ') FROM refused WHERE node = $r"),
			qr/this node has not yet heard from the nodes it replicates with/,
			"twins: node $r refused until it heard from the other");
		like(sql_error($twins[$r], 'SELECT idgen_snowflake()'), qr/55006.*is also claimed by another server/s,
			"twins: node $r stopped Snowflake IDs");
		like(sql_error($twins[$r], "SELECT idgen_seq_next('k')"), qr/55006.*another server has this node's number/s,
			"twins: node $r stopped per-key values");
	}
	is(count_common(@ids), 0, 'twins: no Snowflake ID issued by both (' . scalar(keys %{ $ids[0] }) . ' and '
		  . scalar(keys %{ $ids[1] }) . ')');
	is(count_common(@values), 0, 'twins: no per-key value handed out by both (' . scalar(keys %{ $values[0] })
		  . ' and ' . scalar(keys %{ $values[1] }) . ')');
	no_crash_logged($_, 'twins: no crash on ' . $_->name) for @twins;
}

done_testing();
