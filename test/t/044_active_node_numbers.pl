# Scenario: two active-active servers with one node number, or with two
# counts of nodes, are told apart (docs/active-active.md, "One node number
# per node").  PostgreSQL 16 and later (subscriptions with origin = none).
# Nodes built as docs/active-active.md's setup prints it.
#
#  - Two fresh nodes with their own Snowflake identities but one node
#    number (0 of 2), the default purge interval (an announcement a
#    minute), each loaded with about 50 inserts a second from the moment
#    both are subscribed: each refuses until it hears from the other, and
#    what it hears stops its per-key values, worker leases and key
#    versions; their Snowflake IDs go on.
#  - A copy made by pg_dump and restore, with the settings of the node it
#    was dumped from (one identity, one node number), loaded from the
#    moment both are subscribed, announcing every 2 s: both stop Snowflake
#    IDs and per-key values.
#  - A node with another idgen.active_nodes than the others is told so.
# In all: no Snowflake ID and no per-key value handed out by two servers.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
plan skip_all => 'subscriptions with origin = none need PostgreSQL 16 or later'
  if $probe->pg_version < 16;

# Subscribe $a (labelled $ra) and $b ($rb) to each other, load both for
# $seconds, and wait until each shows a clash (all of them, each matching
# the LIKE patterns @clashes in idgen_info().identity_clash): what each
# handed out (two lists of two hash references).
sub load_until_clash
{
	my ($a, $ra, $b, $rb, $seconds, @clashes) = @_;
	my $seen = join(' AND ', 'identity_clash IS NOT NULL', map { "identity_clash LIKE '$_'" } @clashes);
	mesh_subscribe($a, $ra, $b, $rb);
	mesh_subscribe($b, $rb, $a, $ra);
	my @load = (start_mesh_load($a, $ra, $seconds), start_mesh_load($b, $rb, $seconds));
	for my $node ($a, $b)
	{
		ok($node->poll_query_until('postgres', "SELECT $seen FROM idgen_info()"), $node->name . ' sees the clash');
	}
	$_->finish for @load;
	return ([ issued_by($a, $ra) ], [ issued_by($b, $rb) ]);
}

# The refusals of $node's load labelled $label: their distinct messages.
sub refusals_of
{
	my ($node, $label) = @_;
	return [ split /\n/, $node->safe_psql('postgres',
		"SELECT DISTINCT message FROM refused WHERE node = $label ORDER BY 1") ];
}

# --- two fresh nodes with one node number, default settings -----------------
{
	my @same = map { mesh_node("same_$_", 0, 2, 14 + $_, 'idgen.purge_interval' => "'60s'") } 0 .. 1;
	my ($x, $y) = load_until_clash($same[0], 0, $same[1], 1, 90);
	for my $i (0 .. 1)
	{
		my $node = $same[$i];
		like($node->safe_psql('postgres', 'SELECT identity_clash FROM idgen_info()'),
			qr/^server \d+ \(same_\d_0 \(port \d+\)\) claims node 0 of 2 since .*, and this server is node 0 of 2 .*; per-key values, worker leases and public ID key versions are stopped$/,
			"one node number: idgen_info() on node $i names the other server");
		for my $call ("SELECT idgen_seq_next('k')", "SELECT idgen_worker_acquire('same', interval '1 minute')",
			'SELECT idgen_public_rotate()')
		{
			like(sql_error($node, $call), qr/55006.*another server has this node's number \(0 of 2\).*Server \d+ \(same_/s,
				"one node number: node $i refuses $call");
		}
		isnt($node->safe_psql('postgres', 'SELECT idgen_snowflake()'), '',
			"one node number: node $i goes on with Snowflake IDs, its identity its own");
		is_deeply(refusals_of($node, $i),
			[ "another server has this node's number (0 of 2)",
				'this node has not yet heard from the nodes it replicates with' ],
			"one node number: node $i refused until it heard from the other, then per-key values only");
	}
	is(count_common($x->[1], $y->[1]), 0,
		'one node number: no per-key value handed out by both (' . scalar(keys %{ $x->[1] }) . ' and '
		  . scalar(keys %{ $y->[1] }) . ')');
	is(count_common($x->[0], $y->[0]), 0, 'one node number: no Snowflake ID issued by both ('
		  . scalar(keys %{ $x->[0] }) . ' and ' . scalar(keys %{ $y->[0] }) . ')');
	no_crash_logged($_, 'one node number: no crash on ' . $_->name) for @same;
	$_->stop for @same;
}

# --- a pg_dump and restore copy, with its source's settings -----------------
{
	my %announce = ('idgen.purge_interval' => "'2s'");
	my $source = mesh_node('dumped', 0, 2, 16, %announce);
	$source->safe_psql('postgres', q{SELECT idgen_seq_next('conv:1') FROM generate_series(1, 10);
		INSERT INTO issued SELECT 0, idgen_snowflake(), NULL FROM generate_series(1, 10)});
	# the same settings, and the source's schema and data restored
	my $restored = idgen_node('dumped_restored', 'max_worker_processes' => 24,
		'max_logical_replication_workers' => 8, 'max_wal_senders' => 10, %announce,
		'idgen.worker_id' => 16, 'idgen.active_nodes' => 2, 'idgen.active_node' => 0,
		_init => { allows_streaming => 'logical' });
	my $dump = PostgreSQL::Test::Utils::tempdir() . '/dump.sql';
	$source->command_ok([ 'pg_dump', '-d', $source->connstr('postgres'), '-f', $dump ], 'the source dumped');
	$restored->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $restored->connstr('postgres'), '-f', $dump ],
		'... and restored');
	is($restored->safe_psql('postgres', 'SELECT count(*) FROM idgen_identity_claim'), '0',
		'the claims are not dumped: the restored copy has none of its source');
	my ($x, $y) = load_until_clash($source, 0, $restored, 1, 40, '%claims this identity%', '%claims node%');
	for my $node ($source, $restored)
	{
		my ($label) = $node == $source ? 0 : 1;
		like($node->safe_psql('postgres', 'SELECT identity_clash FROM idgen_info()'),
			qr/claims this identity since .*; Snowflake generation is stopped; server \d+ \(dumped_\w+ \(port \d+\)\) claims node 0 of 2/,
			'a restored copy: idgen_info() on ' . $node->name . ' shows both clashes');
		like(sql_error($node, 'SELECT idgen_snowflake()'), qr/55006.*is also claimed by another server/s,
			'a restored copy: ' . $node->name . ' stops Snowflake IDs');
		like(sql_error($node, "SELECT idgen_seq_next('k')"), qr/55006.*another server has this node's number/s,
			'... and per-key values');
	}
	is(count_common($x->[0], $y->[0]), 0, 'a restored copy: no Snowflake ID issued by both ('
		  . scalar(keys %{ $x->[0] }) . ' and ' . scalar(keys %{ $y->[0] }) . ')');
	is(count_common($x->[1], $y->[1]), 0, 'a restored copy: no per-key value handed out by both ('
		  . scalar(keys %{ $x->[1] }) . ' and ' . scalar(keys %{ $y->[1] }) . ')');
	no_crash_logged($_, 'a restored copy: no crash on ' . $_->name) for ($source, $restored);
	$_->stop for ($source, $restored);
}

# --- another count of nodes ---------------------------------------------------
{
	my %announce = ('idgen.purge_interval' => "'2s'");
	my @counts = (mesh_node('count', 0, 2, 17, %announce), mesh_node('count', 1, 3, 18, %announce));
	mesh_subscribe($counts[0], 0, $counts[1], 1);
	mesh_subscribe($counts[1], 1, $counts[0], 0);
	for my $node (@counts)
	{
		$node->poll_query_until('postgres', 'SELECT identity_clash IS NOT NULL FROM idgen_info()')
		  or die $node->name . ' saw no clash';
	}
	like(sql_error($counts[0], "SELECT idgen_seq_next('k')"),
		qr/55006.*another server counts 3 active-active nodes, this one 2.*node 1 of 3/s,
		'another count of nodes: node 0 is told');
	like(sql_error($counts[1], "SELECT idgen_seq_next('k')"),
		qr/55006.*another server counts 2 active-active nodes, this one 3.*node 0 of 2/s,
		'... and so is node 1');
	$_->stop for @counts;
}

done_testing();
