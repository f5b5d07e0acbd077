# Scenario: active-active nodes start generating only once they have heard
# from the nodes they subscribe to (docs/active-active.md, "Starting").
# PostgreSQL 16 and later (subscriptions with origin = none).  Nodes built
# as docs/active-active.md's setup prints it.
#
#  - Two fresh nodes with one identity and the default settings (a purge,
#    and so an announcement, every minute), each inserting about 50 rows a
#    second into a table keyed by idgen_snowflake(), with a per-key value
#    in each row, from the moment their subscriptions exist: each refuses
#    until the other's claim arrives, which stops both.  No Snowflake ID
#    was issued by both (before the gate, the first ones went out from
#    both and halted replication before either claim was sent).
#  - Two nodes with their own identities, announcements an hour apart
#    (each announcement below is made by hand): each refuses Snowflake IDs
#    and per-key values, naming the subscription it waits on, until the
#    other's claim arrives; then both generate.  A node restarted while
#    the other is down refuses until the other is back and announces; a
#    crash (immediate stop) and restarts never look like a clash; a
#    subscription disabled is not waited for; a node added later waits
#    for the two, which go on generating meanwhile, and for a subscription
#    it makes anew to a node it heard from, whose replication origin takes
#    the dropped one's number.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
plan skip_all => 'subscriptions with origin = none need PostgreSQL 16 or later'
  if $probe->pg_version < 16;

# Wait until $node's refusal of a Snowflake ID no longer matches $gone
# (a claim it waited for arrived); return it.
sub refusal_without
{
	my ($node, $gone) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	my $error;
	do
	{
		my ($ret, $out);
		($ret, $out, $error) = $node->psql('postgres', 'SELECT idgen_snowflake()');
		return $error if $error !~ $gone;
		sleep 1;
	} while (time < $deadline);
	return $error;
}

# The error of a Snowflake ID and of a per-key value on $node.
sub refusals
{
	my ($node) = @_;
	return (sql_error($node, 'SELECT idgen_snowflake()'), sql_error($node, "SELECT idgen_seq_next('k')"));
}

# --- two fresh nodes with one identity, default settings, under load -------
{
	# the default purge interval, set so that no test configuration
	# shortens it: the next announcements come a minute after the start
	my @twins = map { mesh_node('twin', $_, 2, 25, 'idgen.purge_interval' => "'60s'") } 0 .. 1;
	mesh_subscribe($twins[0], 0, $twins[1], 1);
	mesh_subscribe($twins[1], 1, $twins[0], 0);
	# the load on both, from the moment both are subscribed, for as long as
	# a claim may take (a purge interval) and more
	my @load = map { start_mesh_load($twins[$_], $_, 90) } 0 .. 1;
	for my $r (0 .. 1)
	{
		ok($twins[$r]->poll_query_until('postgres', 'SELECT identity_clash IS NOT NULL FROM idgen_info()'),
			"twins under load: node $r sees the clash");
	}
	# both keep refusing: the load's last seconds
	$_->finish for @load;
	my (@ids, @values);
	for my $r (0 .. 1)
	{
		($ids[$r], $values[$r]) = issued_by($twins[$r], $r);
		my ($refused, $gate) = split /\|/, $twins[$r]->safe_psql('postgres', qq{SELECT count(*),
			count(*) FILTER (WHERE message LIKE 'this node has not yet heard%') FROM refused WHERE node = $r});
		cmp_ok($gate, '>', 0, "twins under load: node $r refused until it heard from the other ($gate of $refused refusals)");
		like(sql_error($twins[$r], 'SELECT idgen_snowflake()'), qr/55006.*is also claimed by another server/s,
			"twins under load: node $r stopped generating");
	}
	is(count_common(@ids), 0, 'twins under load: no Snowflake ID issued by both (' . scalar(keys %{ $ids[0] }) . ' and '
		  . scalar(keys %{ $ids[1] }) . ' issued)');
	is(count_common(@values), 0, 'twins under load: no per-key value handed out by both (' . scalar(keys %{ $values[0] })
		  . ' and ' . scalar(keys %{ $values[1] }) . ')');
	no_crash_logged($_, 'twins under load: no crash') for @twins;
	$_->stop for @twins;
}

# --- two nodes, then a third ------------------------------------------------
my @nodes = map { mesh_node('mesh', $_, 3, 26 + $_, 'idgen.purge_interval' => "'1h'") } 0 .. 1;
mesh_subscribe($nodes[0], 0, $nodes[1], 1);
mesh_subscribe($nodes[1], 1, $nodes[0], 0);
for my $r (0 .. 1)
{
	my $o = 1 - $r;
	for my $error (refusals($nodes[$r]))
	{
		like($error,
			qr/55000.*this node has not yet heard from the nodes it replicates with.*no claim has arrived yet through (claims_)?node\d_from_node$o/s,
			"node $r refuses until it hears from node $o, naming the subscription");
	}
}
# each announces (as its purge would): each hears the other
announce($_) for @nodes;
wait_for_gate(@nodes);
pass('both generate once each heard from the other');
is($nodes[$_]->safe_psql('postgres', "SELECT idgen_seq_next('k') % 3"), 1 + $_, "node $_ hands out per-key values")
  for 0 .. 1;

# Node 1 restarted while node 0 is down: it has not heard from node 0
# since its start.  Node 0 back: each hears the other's announcement at
# its start (node 1's waited in its slot for node 0); no clash, both
# generate.
$nodes[0]->stop;
$nodes[1]->restart;
like((refusals($nodes[1]))[0], qr/55000.*no claim has arrived yet through (claims_)?node\d_from_node0/s,
	'node 1, restarted while node 0 is down, refuses');
$nodes[0]->start;
wait_for_gate(@nodes);
pass('node 0 back, both generate');
# node 0 crashes and starts again: it announces at its start, and hears
# node 1's next announcement
$nodes[0]->stop('immediate');
$nodes[0]->start;
announce($nodes[1]);
wait_for_gate(@nodes);
for my $r (0 .. 1)
{
	is($nodes[$r]->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
		"restarts and a crash: no clash on node $r");
}

# Node 1 restarted while node 0 is down again, its subscriptions to node 0
# disabled: it does not wait for them.
$nodes[0]->stop;
$nodes[1]->restart;
wait_for_horizon($nodes[1]);
like((refusals($nodes[1]))[0], qr/55000/, 'node 1 refuses while node 0 is down');
$nodes[1]->safe_psql('postgres', "ALTER SUBSCRIPTION $_ DISABLE")
  for split /\n/, $nodes[1]->safe_psql('postgres', "SELECT subname FROM pg_subscription WHERE subname LIKE '%from_node0'");
isnt($nodes[1]->safe_psql('postgres', 'SELECT idgen_snowflake()'), '',
	'its subscriptions to node 0 disabled, node 1 generates');
$nodes[0]->start;
$nodes[1]->safe_psql('postgres', "ALTER SUBSCRIPTION $_ ENABLE")
  for split /\n/, $nodes[1]->safe_psql('postgres', "SELECT subname FROM pg_subscription WHERE subname LIKE '%from_node0'");
announce($nodes[1]);
wait_for_gate(@nodes);

# Node 2 joins: it waits for both; they go on generating meanwhile.
push @nodes, mesh_node('mesh', 2, 3, 28, 'idgen.purge_interval' => "'1h'");
for my $o (0 .. 1)
{
	mesh_subscribe($nodes[2], 2, $nodes[$o], $o);
	mesh_subscribe($nodes[$o], $o, $nodes[2], 2);
}
isnt($nodes[$_]->safe_psql('postgres', 'SELECT idgen_snowflake()'), '',
	"node $_ goes on generating while node 2 joins") for 0 .. 1;
like((refusals($nodes[2]))[0], qr/55000.*no claim has arrived yet through node2_from_node0, node2_from_node1\./s,
	'node 2 refuses until it hears from both, naming their subscriptions');
announce($nodes[0]);
like(refusal_without($nodes[2], qr/from_node0/), qr/no claim has arrived yet through (claims_)?node\d_from_node1\./,
	'node 2 heard from node 0: it waits for node 1 only');
# Its subscription to node 0 made anew, as a failover or a copy makes its
# own: the new one has not been heard from, though its replication origin
# takes the number of the dropped one's, which had.
my $origin_number = q{SELECT o.roident FROM pg_replication_origin o
	JOIN pg_subscription s ON o.roname = 'pg_' || s.oid WHERE s.subname = 'node2_from_node0'};
my $dropped = $nodes[2]->safe_psql('postgres', $origin_number);
$nodes[2]->safe_psql('postgres', 'DROP SUBSCRIPTION node2_from_node0');
mesh_subscribe($nodes[2], 2, $nodes[0], 0);
is($nodes[2]->safe_psql('postgres', $origin_number), $dropped,
	'node 2 subscribes to node 0 anew: its new origin has the number of the dropped one');
announce($nodes[1]);
like(refusal_without($nodes[2], qr/from_node1/), qr/no claim has arrived yet through node2_from_node0\./,
	'... it heard from node 1, and waits for the new subscription to node 0');
announce($nodes[0]);
wait_for_gate($nodes[2]);
pass('node 2 generates once it heard from both');
for my $r (0 .. 2)
{
	is($nodes[$r]->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
		"three nodes: no clash on node $r");
	no_crash_logged($nodes[$r], "three nodes: no crash on node $r");
}

done_testing();
