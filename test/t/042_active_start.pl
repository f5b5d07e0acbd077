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
#    for the two, which go on generating meanwhile.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
plan skip_all => 'subscriptions with origin = none need PostgreSQL 16 or later'
  if $probe->pg_version < 16;

my %common = (
	'max_worker_processes' => 24,
	'max_logical_replication_workers' => 8,
	'max_wal_senders' => 10);

# The application: a table keyed by idgen_snowflake() with a per-key value
# in each row, and a procedure that inserts about 50 rows a second for
# $seconds, keeping every ID and value the node handed out in "issued"
# (an insert that then failed too: a twin's ID may meet the same ID
# replicated from the other twin) and counting what the node refused.
my $app = q{
	CREATE TABLE t4 (id bigint PRIMARY KEY DEFAULT idgen_snowflake(),
		node int NOT NULL, v bigint NOT NULL);
	CREATE TABLE issued (node int NOT NULL, id bigint, v bigint);
	CREATE TABLE refused (node int NOT NULL, sqlstate text NOT NULL, message text NOT NULL);
	CREATE PROCEDURE load(node int, seconds int) LANGUAGE plpgsql AS $$
	DECLARE
		stop timestamptz := clock_timestamp() + make_interval(secs => seconds);
		new_id bigint;
		new_v bigint;
	BEGIN
		WHILE clock_timestamp() < stop LOOP
			new_id := NULL;
			new_v := NULL;
			BEGIN
				new_id := idgen_snowflake();
				new_v := idgen_seq_next('conv:1');
				INSERT INTO t4 VALUES (new_id, node, new_v);
			EXCEPTION
				WHEN object_not_in_prerequisite_state OR object_in_use THEN
					INSERT INTO refused VALUES (node, SQLSTATE, SQLERRM);
				WHEN unique_violation THEN
					NULL;
			END;
			IF new_id IS NOT NULL THEN
				INSERT INTO issued VALUES (node, new_id, new_v);
			END IF;
			COMMIT;
			PERFORM pg_sleep(0.02);
		END LOOP;
	END $$;
};

# Node $r of $count named "${prefix}_$r", with worker id $worker, the
# application, and docs/active-active.md's publications.
sub make_node
{
	my ($prefix, $r, $count, $worker, %extra) = @_;
	my $node = idgen_node("${prefix}_$r", %common, %extra,
		'idgen.worker_id' => $worker,
		'idgen.active_nodes' => $count,
		'idgen.active_node' => $r,
		_init => { allows_streaming => 'logical' });
	$node->safe_psql('postgres', $app);
	$node->safe_psql('postgres', doc_block('docs/active-active.md', 'active-active/publish'));
	# its identity announced before any subscription, as a purge does (the
	# purge at the start came before the extension): the next purge's is
	# a purge interval after the start
	announce($node);
	$node->safe_psql('postgres', q{SELECT count(*) = 1 FROM idgen_identity_claim
		WHERE system_identifier = (SELECT system_identifier FROM pg_control_system())}) eq 't'
	  or die $node->name . ' did not announce its identity';
	return $node;
}

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

# $node announces its identity, as its purges do (they are an hour apart
# here, or a minute for the twins).  Tried again if it meets the purge at
# the server's start announcing at the same moment (a duplicate key).
sub announce
{
	my ($node) = @_;
	for (1 .. 10)
	{
		my ($ret) = $node->psql('postgres', 'SELECT idgen_identity_announce()');
		return if $ret == 0;
		sleep 1;
	}
	die $node->name . ' could not announce its identity';
}

# docs/active-active.md's subscriptions of node $r to node $o (named
# node${r}_from_node$o), as printed, with node $o's connection string.
sub subscribe
{
	my ($node, $r, $other, $o) = @_;
	my $conn = $other->connstr . ' dbname=postgres';
	(my $steps = doc_block('docs/active-active.md', 'active-active/subscribe'))
	  =~ s/node0_from_node1 CONNECTION 'host=node1 dbname=app'/node${r}_from_node$o CONNECTION '$conn'/g
	  or die 'the subscription step changed';
	$node->safe_psql('postgres', $steps);
	$node->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM pg_stat_subscription
		WHERE subname = 'node${r}_from_node$o' AND pid IS NOT NULL})
	  or die 'the subscription ' . $node->name . " node${r}_from_node$o did not start";
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
	my @twins = map { make_node('twin', $_, 2, 25, 'idgen.purge_interval' => "'60s'") } 0 .. 1;
	subscribe($twins[0], 0, $twins[1], 1);
	subscribe($twins[1], 1, $twins[0], 0);
	# the load on both, from the moment both are subscribed, for as long as
	# a claim may take (a purge interval) and more
	my @load = map {
		IPC::Run::start([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $twins[$_]->connstr('postgres'),
			'-c', "CALL load($_, 90)" ], '>', \my $out, '2>', \my $err)
	} 0 .. 1;
	for my $r (0 .. 1)
	{
		ok($twins[$r]->poll_query_until('postgres', 'SELECT identity_clash IS NOT NULL FROM idgen_info()'),
			"twins under load: node $r sees the clash");
	}
	# both keep refusing: the load's last seconds
	$_->finish for @load;
	my (%ids, %values);
	for my $r (0 .. 1)
	{
		$ids{$r} = { map { $_ => 1 } split /\n/,
			  $twins[$r]->safe_psql('postgres', "SELECT id FROM issued WHERE node = $r") };
		$values{$r} = { map { $_ => 1 } split /\n/,
			  $twins[$r]->safe_psql('postgres', "SELECT v FROM issued WHERE node = $r AND v IS NOT NULL") };
		my ($refused, $gate) = split /\|/, $twins[$r]->safe_psql('postgres', qq{SELECT count(*),
			count(*) FILTER (WHERE message LIKE 'this node has not yet heard%') FROM refused WHERE node = $r});
		cmp_ok($gate, '>', 0, "twins under load: node $r refused until it heard from the other ($gate of $refused refusals)");
		like(sql_error($twins[$r], 'SELECT idgen_snowflake()'), qr/55006.*is also claimed by another server/s,
			"twins under load: node $r stopped generating");
	}
	my $common = grep { $ids{1}{$_} } keys %{ $ids{0} };
	is($common, 0, 'twins under load: no Snowflake ID issued by both (' . scalar(keys %{ $ids{0} }) . ' and '
		  . scalar(keys %{ $ids{1} }) . ' issued)');
	$common = grep { $values{1}{$_} } keys %{ $values{0} };
	is($common, 0, 'twins under load: no per-key value handed out by both (' . scalar(keys %{ $values{0} })
		  . ' and ' . scalar(keys %{ $values{1} }) . ')');
	no_crash_logged($_, 'twins under load: no crash') for @twins;
	$_->stop for @twins;
}

# --- two nodes, then a third ------------------------------------------------
my @nodes = map { make_node('mesh', $_, 3, 26 + $_, 'idgen.purge_interval' => "'1h'") } 0 .. 1;
subscribe($nodes[0], 0, $nodes[1], 1);
subscribe($nodes[1], 1, $nodes[0], 0);
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
push @nodes, make_node('mesh', 2, 3, 28, 'idgen.purge_interval' => "'1h'");
for my $o (0 .. 1)
{
	subscribe($nodes[2], 2, $nodes[$o], $o);
	subscribe($nodes[$o], $o, $nodes[2], 2);
}
isnt($nodes[$_]->safe_psql('postgres', 'SELECT idgen_snowflake()'), '',
	"node $_ goes on generating while node 2 joins") for 0 .. 1;
like((refusals($nodes[2]))[0], qr/55000.*no claim has arrived yet through node2_from_node0, node2_from_node1\./s,
	'node 2 refuses until it hears from both, naming their subscriptions');
announce($nodes[0]);
like(refusal_without($nodes[2], qr/from_node0/), qr/no claim has arrived yet through (claims_)?node\d_from_node1\./,
	'node 2 heard from node 0: it waits for node 1 only');
announce($nodes[1]);
wait_for_gate($nodes[2]);
pass('node 2 generates once it heard from both');
for my $r (0 .. 2)
{
	is($nodes[$r]->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
		"three nodes: no clash on node $r");
	no_crash_logged($nodes[$r], "three nodes: no crash on node $r");
}

done_testing();
