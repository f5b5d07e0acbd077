# Scenario: the claims travel with the application's rows, on the
# subscriptions docs/active-active.md's setup makes, and a subscription
# stops at its first transaction that fails to apply and retries it for
# ever: a claim behind such a transaction does not arrive.  A clash can
# begin only where a server starts (its identity and node number are read
# at its start), and a server that starts hands out nothing until a claim
# has arrived through each of its subscriptions, so the claims held back
# cannot let two servers hand out the same values.  PostgreSQL 16 and
# later (subscriptions with origin = none).
#
# Node 0 generates alone; a new node 1 is given node 0's identity by
# mistake.  Purges an hour apart, each announcement made by hand, so that
# each node's claim is behind an application row that the other fails to
# apply (a row whose key it inserted itself).  Both loaded with about 50
# inserts a second:
#  - node 1 refuses, waiting for node 0's claim; node 0, which has not
#    heard of node 1's, goes on;
#  - node 1's failure resolved (its row deleted): node 0's claim arrives
#    and node 1 refuses for the clash;
#  - node 0's resolved too: node 1's claim arrives and node 0 stops.
# Node 1 handed out nothing, so no Snowflake ID and no per-key value was
# handed out by both.  Then, as the database's owner (the schema public
# its own too): no write to the claims, their trigger, their publication
# or a subscription.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
plan skip_all => 'subscriptions with origin = none need PostgreSQL 16 or later'
  if $probe->pg_version < 16;

my %hourly = ('idgen.purge_interval' => "'1h'");
my @nodes = map { mesh_node('stuck', $_, 2, 11, %hourly) } 0 .. 1;
$_->safe_psql('postgres', 'CREATE TABLE account (email text PRIMARY KEY)') for @nodes;
isnt($nodes[0]->safe_psql('postgres', 'SELECT idgen_snowflake()'), '', 'node 0 generates alone');

# Each node inserts a row before it is subscribed to, the other the same
# row after: each subscription fails to apply the other's, and each
# node's claim, announced then, is behind it.
$nodes[1]->safe_psql('postgres', q{INSERT INTO account VALUES ('ann@example.com')});
$nodes[0]->safe_psql('postgres', q{INSERT INTO account VALUES ('bob@example.com')});
mesh_subscribe($nodes[1], 1, $nodes[0], 0);
mesh_subscribe($nodes[0], 0, $nodes[1], 1);
$nodes[0]->safe_psql('postgres', q{INSERT INTO account VALUES ('ann@example.com')});
$nodes[1]->safe_psql('postgres', q{INSERT INTO account VALUES ('bob@example.com')});
announce($_) for @nodes;
for my $r (0 .. 1)
{
	my $o = 1 - $r;
	ok($nodes[$r]->poll_query_until('postgres', qq{SELECT apply_error_count > 0
		FROM pg_stat_subscription_stats WHERE subname = 'node${r}_from_node$o'}),
		"node $r: its subscription fails to apply node ${o}'s row");
}

my @load = map { start_mesh_load($nodes[$_], $_, 40) } 0 .. 1;
ok($nodes[1]->poll_query_until('postgres', 'SELECT count(*) >= 50 FROM refused WHERE node = 1'),
	'node 1 refuses under load');
like(sql_error($nodes[1], 'SELECT idgen_snowflake()'),
	qr/55000.*this node has not yet heard from the nodes it replicates with.*node1_from_node0/s,
	'... waiting for node 0, whose claim is behind the row it fails to apply');
is($nodes[0]->safe_psql('postgres', 'SELECT identity_clash IS NULL FROM idgen_info()'), 't',
	'node 0 has not heard of node 1\'s claim, and goes on');

$nodes[1]->safe_psql('postgres', q{DELETE FROM account WHERE email = 'ann@example.com'});
ok($nodes[1]->poll_query_until('postgres', 'SELECT identity_clash IS NOT NULL FROM idgen_info()'),
	'node 1\'s failure resolved: node 0\'s claim arrives');
like(sql_error($nodes[1], 'SELECT idgen_snowflake()'),
	qr/55006.*this server's Snowflake identity \(datacenter 0, worker 11\) is also claimed by another server/s,
	'... and node 1 refuses for the clash');
is($nodes[0]->safe_psql('postgres', 'SELECT count(*) FROM refused WHERE node = 0'), '0',
	'node 0 refused nothing meanwhile');

$nodes[0]->safe_psql('postgres', q{DELETE FROM account WHERE email = 'bob@example.com'});
ok($nodes[0]->poll_query_until('postgres', 'SELECT identity_clash IS NOT NULL FROM idgen_info()'),
	'node 0\'s failure resolved: node 1\'s claim arrives, and node 0 stops');
$_->finish for @load;

my @told = split /\n/, $nodes[1]->safe_psql('postgres', 'SELECT DISTINCT sqlstate FROM refused WHERE node = 1 ORDER BY 1');
is_deeply(\@told, [ '55000', '55006' ],
	'node 1 refused every call: it had not heard from node 0, then the clash');
my ($ids0, $values0) = issued_by($nodes[0], 0);
my ($ids1, $values1) = issued_by($nodes[1], 1);
ok(keys %$ids0 > 0 && keys %$values0 > 0,
	'node 0 handed out IDs and per-key values under load (' . scalar(keys %$ids0) . ' IDs)');
is(scalar(keys %$ids1), 0, 'node 1 issued no Snowflake ID');
is(scalar(keys %$values1), 0, '... and no per-key value');
# Who can put a claim on the way: the claims' table is the extension
# owner's, the publication its creator's, a subscription a superuser's
# (or, from 16, a member of pg_create_subscription's).  The database's
# owner, not a member of either, can do none of it.
$nodes[0]->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	ALTER DATABASE postgres OWNER TO mallory;
	ALTER SCHEMA public OWNER TO mallory;
});
for my $sql (
	q{INSERT INTO idgen_identity_claim VALUES (4242, 0, 12, 'forged (port 1)', now())},
	q{UPDATE idgen_identity_claim SET announced_at = now()},
	q{DELETE FROM idgen_identity_claim},
	q{TRUNCATE idgen_identity_claim},
	q{ALTER TABLE idgen_identity_claim DISABLE TRIGGER ALL},
	q{CREATE PUBLICATION forged FOR TABLE idgen_identity_claim},
	q{ALTER PUBLICATION idgen_all SET (publish = 'delete')},
	q{DROP PUBLICATION idgen_all},
	q{CREATE SUBSCRIPTION forged CONNECTION 'dbname=postgres' PUBLICATION idgen_all WITH (connect = false)},
	q{ALTER SUBSCRIPTION node0_from_node1 DISABLE})
{
	like(sql_error($nodes[0], "SET ROLE mallory; $sql"), qr/42501: (permission denied|must be owner)/, "the database's owner may not: $sql");
}

no_crash_logged($_, 'no crash on ' . $_->name) for @nodes;

done_testing();
