# Scenario: a server made from a copy of a node's data directory is told
# apart from that node (docs/active-active.md, "Copies of a node"), and a
# restart, a crash and a failover of a node are not.  PostgreSQL 16 and
# later (subscriptions with origin = none).  Nodes built as
# docs/active-active.md's setup prints it, announcing every 2 s.
#
#  - Node 0 restarted, crashed (immediate stop) and failed over to its
#    standby, which the mesh then replicates with: no clash anywhere, and
#    every node generates.
#  - A standby of node 0 promoted while node 0 goes on, both loaded with
#    about 50 inserts a second from the promotion on (node 1 too): the
#    promoted standby refuses, because node 0 holds its subscriptions'
#    slots on node 1 and so it never hears from node 1.
#  - A base backup of node 1 made into a third node, its copied
#    subscription replaced by subscriptions to node 1 and then node 0,
#    loaded from its start, beside the load on the others: it refuses
#    until node 1's claim arrives, which is its own system identifier's,
#    and node 1 stops once the copy's claim arrives; node 0 goes on.
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

my %announce = ('idgen.purge_interval' => "'2s'");
my @nodes = map { mesh_node('copies', $_, 3, 11 + $_, %announce) } 0 .. 1;
mesh_subscribe($nodes[0], 0, $nodes[1], 1);
mesh_subscribe($nodes[1], 1, $nodes[0], 0);
wait_for_gate(@nodes);

# Whether $node has no clash.
sub no_clash
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()') eq 't';
}

# --- a restart, a crash and a failover of node 0 -----------------------------
$nodes[0]->backup('node0');
my $standby = PostgreSQL::Test::Cluster->new('copies_0_standby');
$standby->init_from_backup($nodes[0], 'node0', has_streaming => 1);
$standby->start;

$nodes[0]->restart;
wait_for_gate($nodes[0]);
$nodes[0]->stop('immediate');
$nodes[0]->start;
wait_for_gate($nodes[0]);
ok(claim_received($nodes[1], $nodes[0]), 'node 1 receives the claim node 0 made since its start');
ok(no_clash($_), 'a restart and a crash of node 0: no clash on ' . $_->name) for @nodes;

# Node 0 fails: its standby takes over.  It keeps node 0's subscription to
# node 1, whose slot is free now; node 1's subscription to node 0 is made
# anew, to the standby.
$nodes[0]->wait_for_catchup($standby);
$nodes[0]->stop('immediate');
$standby->promote;
$nodes[1]->safe_psql('postgres', $_)
  for ('ALTER SUBSCRIPTION node1_from_node0 DISABLE',
	'ALTER SUBSCRIPTION node1_from_node0 SET (slot_name = NONE)',
	'DROP SUBSCRIPTION node1_from_node0');
mesh_subscribe($nodes[1], 1, $standby, 0);
wait_for_gate($standby);
ok(claim_received(@$_), $_->[0]->name . ' receives the claim ' . $_->[1]->name . ' made since its start')
  for ([ $nodes[1], $standby ], [ $standby, $nodes[1] ]);
ok(no_clash($_), 'a failover of node 0: no clash on ' . $_->name) for ($standby, $nodes[1]);
$nodes[0] = $standby;

# --- a standby promoted while its old primary goes on ------------------------
$nodes[0]->backup('node0_again');
my $split = PostgreSQL::Test::Cluster->new('copies_0_split');
$split->init_from_backup($nodes[0], 'node0_again', has_streaming => 1);
$split->start;
$nodes[0]->wait_for_catchup($split);
my @load = map { start_mesh_load($nodes[$_], $_, 40) } 0 .. 1;
$split->promote;
push @load, start_mesh_load($split, 3, 30);
# it refuses for as long as its old primary goes on: here, the 30 s of its
# load
$load[2]->finish;
my %issued;
@{ $issued{split} } = issued_by($split, 3);
is(scalar(keys %{ $issued{split}[0] }), 0, 'a standby promoted while its primary goes on issues no Snowflake ID');
is(scalar(keys %{ $issued{split}[1] }), 0, '... and no per-key value');
like(sql_error($split, 'SELECT idgen_snowflake()'),
	qr/55000.*this node has not yet heard from the nodes it replicates with.*node0_from_node1/s,
	'... it waits to hear from node 1, whose slot its old primary holds');
like($split->safe_psql('postgres', "SELECT string_agg(DISTINCT message, '; ') FROM refused WHERE node = 3"),
	qr/^this node has not yet heard from the nodes it replicates with$/,
	'... as every call of its load was told');
$split->stop;
$_->finish for @load[0 .. 1];
ok(no_clash($_), 'the old primary and node 1 go on: no clash on ' . $_->name) for @nodes;

# --- a base backup of node 1 made into a node ---------------------------------
# the load on nodes 0 and 1 throughout
@load = map { start_mesh_load($nodes[$_], $_, 60) } 0 .. 1;
$nodes[1]->backup('node1');
my $copy = PostgreSQL::Test::Cluster->new('copies_2');
$copy->init_from_backup($nodes[1], 'node1');
$copy->start;
# the copy's own load, from its start
push @load, start_mesh_load($copy, 2, 50);
# node 1's subscription, copied with its data (its slot is node 1's):
# replaced by the copy's own, first to the node it was copied from
$copy->safe_psql('postgres', doc_block('docs/active-active.md', 'active-active/drop-copied'));
like(sql_error($copy, 'SELECT idgen_snowflake()'),
	qr/55000.*holds other servers' identity claims but has no subscription/s,
	'a copy without subscriptions does not start alone');
mesh_subscribe($copy, 2, $nodes[1], 1);
mesh_subscribe($copy, 2, $nodes[0], 0);
mesh_subscribe($nodes[$_], $_, $copy, 2) for 0 .. 1;
for my $node ($copy, $nodes[1])
{
	ok($node->poll_query_until('postgres', 'SELECT identity_clash IS NOT NULL FROM idgen_info()'),
		'the copy and node 1: ' . $node->name . ' sees the clash');
	like($node->safe_psql('postgres', 'SELECT identity_clash FROM idgen_info()'),
		qr/runs from a copy of this server's data: its claim, announced at .*, arrived through subscription "node\d_from_node[12]"/,
		'... in idgen_info(), naming the subscription');
	for my $call ('SELECT idgen_snowflake()', "SELECT idgen_seq_next('k')",
		"SELECT idgen_worker_acquire('copies', interval '1 minute')", 'SELECT idgen_public_rotate()')
	{
		like(sql_error($node, $call), qr/55006.*another server runs from a copy of this server's data/s,
			"... it refuses $call");
	}
}
$_->finish for @load;
my @told = split /\n/, $copy->safe_psql('postgres', 'SELECT DISTINCT message FROM refused WHERE node = 2 ORDER BY 1');
is_deeply(\@told, [ "another server runs from a copy of this server's data",
		'this node has not yet heard from the nodes it replicates with' ],
	'every call of the copy\'s load was refused: it had not heard from the nodes, then it was a copy');
ok(no_clash($nodes[0]), 'node 0 goes on: no clash');
isnt($nodes[0]->safe_psql('postgres', 'SELECT idgen_snowflake()'), '', '... it generates');

# Everything each server handed out under load: nodes 0 and 1 across both
# phases, the promoted standby, the copy.
my @ids = map { (issued_by($nodes[$_], $_))[0] } 0 .. 1;
my @values = map { (issued_by($nodes[$_], $_))[1] } 0 .. 1;
my ($copy_ids, $copy_values) = issued_by($copy, 2);
push @ids, $copy_ids, $issued{split}[0];
push @values, $copy_values, $issued{split}[1];
is(scalar(keys %$copy_ids), 0, 'the copy issued no Snowflake ID');
is(scalar(keys %$copy_values), 0, '... and no per-key value');
is(count_common(@ids), 0,
	'no Snowflake ID issued by two servers (' . join(', ', map { scalar keys %$_ } @ids) . ' issued)');
is(count_common(@values), 0,
	'no per-key value handed out by two servers (' . join(', ', map { scalar keys %$_ } @values) . ')');
no_crash_logged($_, 'no crash on ' . $_->name) for (@nodes, $copy);

done_testing();
