# Scenario: an active-active mesh made with extension version 1.0.0 and
# updated to 1.0.1 one node at a time, under load (docs/upgrading.md).
# This build's library serves a database whose SQL is still 1.0.0's: the
# claims' trigger is an AFTER trigger there, a BEFORE trigger in 1.0.1,
# and the tables are the same, so the nodes replicate to each other
# whatever their versions.  PostgreSQL 16 and later (subscriptions with
# origin = none).
#
#  - Two nodes on 1.0.0, each inserting about 50 rows a second; node 0
#    updated meanwhile.
#  - Mixed: each node restarted refuses until the other announces, and
#    generates once that claim has arrived (its trigger, AFTER on node 1,
#    BEFORE on node 0, sees it).
#  - Both loaded again; node 1 updated meanwhile.
# Both end on 1.0.1 with the trigger BEFORE, the same rows, no clash, and
# no Snowflake ID or per-key value handed out by both.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
plan skip_all => 'subscriptions with origin = none need PostgreSQL 16 or later'
  if $probe->pg_version < 16;

# Purges an hour apart: each announcement the test waits for is made by
# hand, once the node that waits for it refuses.
my %old = ('idgen.purge_interval' => "'1h'", _version => '1.0.0');
my @nodes = map { mesh_node('mixed', $_, 2, 11 + $_, %old) } 0 .. 1;
mesh_subscribe($nodes[0], 0, $nodes[1], 1);
mesh_subscribe($nodes[1], 1, $nodes[0], 0);
announce($_) for @nodes;
wait_for_gate(@nodes);

# The extension's version on $node and its claims' trigger's timing.
sub version_and_trigger
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
		SELECT e.extversion || ' ' || CASE WHEN t.tgtype & 2 = 2 THEN 'BEFORE' ELSE 'AFTER' END
		FROM pg_extension e, pg_trigger t
		WHERE e.extname = 'idgen' AND t.tgname = 'idgen_identity_claim_check'});
}
is(version_and_trigger($_), '1.0.0 AFTER', $_->name . ' starts on 1.0.0') for @nodes;

# Update $node while the load runs, then wait for the load.
sub update_under_load
{
	my ($node, @load) = @_;
	$node->poll_query_until('postgres', 'SELECT count(*) >= 100 FROM issued')
	  or die $node->name . ': no load';
	$node->safe_psql('postgres', 'ALTER EXTENSION idgen UPDATE');
	is(version_and_trigger($node), '1.0.1 BEFORE', $node->name . ' updated under load');
	$_->finish for @load;
}

update_under_load($nodes[0], map { start_mesh_load($nodes[$_], $_, 20) } 0 .. 1);

# Mixed versions: a node restarted generates once it has heard from the
# other, through its own trigger.
for my $r (1, 0)
{
	my ($node, $other) = ($nodes[$r], $nodes[1 - $r]);
	# everything the other sent applied first, its last claims too
	$other->wait_for_catchup("node${r}_from_node" . (1 - $r));
	$node->restart;
	like(sql_error($node, 'SELECT idgen_snowflake()'),
		qr/55000.*this node has not yet heard from the nodes it replicates with/s,
		$node->name . ' (' . version_and_trigger($node) . ') restarted waits for the other\'s claim');
	announce($other);
	wait_for_gate($node);
}

update_under_load($nodes[1], map { start_mesh_load($nodes[$_], $_, 20) } 0 .. 1);

my @rows = rows_once_agreed(q{SELECT count(*) || ' ' || count(DISTINCT id) FROM t4}, @nodes);
is($rows[1], $rows[0], "both nodes hold the same rows ($rows[0])");
for my $node (@nodes)
{
	is($node->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
		$node->name . ': no clash');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM refused'), '0', $node->name . ': nothing refused');
}
my @ids = map { (issued_by($nodes[$_], $_))[0] } 0 .. 1;
my @values = map { (issued_by($nodes[$_], $_))[1] } 0 .. 1;
ok(keys %{ $ids[0] } > 0 && keys %{ $ids[1] } > 0, 'both nodes generated');
is(count_common(@ids), 0,
	'no Snowflake ID issued by both (' . join(', ', map { scalar keys %$_ } @ids) . ' issued)');
is(count_common(@values), 0,
	'no per-key value handed out by both (' . join(', ', map { scalar keys %$_ } @values) . ')');
no_crash_logged($_, 'no crash on ' . $_->name) for @nodes;

done_testing();
