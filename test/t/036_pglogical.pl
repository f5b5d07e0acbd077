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

my @nodes;
for my $r (0 .. 1)
{
	my $node = idgen_node("pgl_$r", %plugins,
		shared_preload_libraries => "'idgen,pglogical'",
		track_commit_timestamp => 'on',
		max_worker_processes => 24,
		max_replication_slots => 10,
		max_wal_senders => 10,
		'idgen.worker_id' => 20 + $r,
		'idgen.active_nodes' => 2,
		'idgen.active_node' => $r,
		'idgen.worker_quarantine' => 0,
		_init => { allows_streaming => 'logical' });
	# pglogical first, then idgen: its tables get pglogical's trigger (the
	# steps of docs/active-active.md, as printed)
	$node->safe_psql('postgres', 'DROP EXTENSION idgen');
	$node->safe_psql('postgres', doc_block('docs/active-active.md', 'active-active/pglogical-extensions'));
	$node->safe_psql('postgres', $app);
	$node->safe_psql('postgres', "SELECT idgen_seq_configure('hot:1', cache => 20)");
	push @nodes, $node;
}
for my $r (0 .. 1)
{
	my $dsn = $nodes[$r]->connstr . ' dbname=postgres';
	(my $step = doc_block('docs/active-active.md', 'active-active/pglogical-node'))
	  =~ s/'n0', dsn := 'host=node0 dbname=app'/'n$r', dsn := '$dsn'/ or die 'the node step changed';
	$nodes[$r]->safe_psql('postgres', $step);
}
is($nodes[0]->safe_psql('postgres',
		q{SELECT count(*) > 0 FROM pg_trigger WHERE tgrelid = 'idgen_seq'::regclass AND tgname LIKE '%truncate%'}),
	't', "pglogical's TRUNCATE trigger is on idgen_seq");
is($nodes[0]->safe_psql('postgres', "SELECT idgen_seq_next('probe')"), '1',
	'idgen_seq_next works with it');
for my $r (0 .. 1)
{
	my $o = 1 - $r;
	my $dsn = $nodes[$o]->connstr . ' dbname=postgres';
	(my $step = doc_block('docs/active-active.md', 'active-active/pglogical-subscribe'))
	  =~ s/'from_n1',\s+provider_dsn := 'host=node1 dbname=app'/'s_$r', provider_dsn := '$dsn'/
	  or die 'the subscription step changed';
	$nodes[$r]->safe_psql('postgres', $step);
}
for my $r (0 .. 1)
{
	ok($nodes[$r]->poll_query_until('postgres',
			"SELECT status = 'replicating' FROM pglogical.show_subscription_status('s_$r')"),
		"node $r replicates");
}

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
	is($nodes[$r]->safe_psql('postgres',
			q{SELECT s.value = (SELECT max(v) FROM taken WHERE k = 'conv:1') FROM idgen_seq s WHERE key = 'conv:1'}),
		't', "node $r: the transactional key's row holds the furthest value handed out");
	no_crash_logged($nodes[$r], "no crash on node $r");
}

done_testing();
