# Scenario: the second node of a mesh made from a copy of the first, as
# docs/active-active.md prints it ("A second node from a copy of the
# first"): a standby of node 0, turned into a server of its own by
# pg_createsubscriber (PostgreSQL 17 and later), given its own settings
# only then.  Node 0 inserts about 50 rows a second throughout, the new
# node from its start.  The new node has a system identifier of its own,
# neither node sees a clash, both hand out IDs and per-key values, and no
# Snowflake ID or per-key value is handed out by both.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Text::ParseWords qw(shellwords);
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
plan skip_all => 'pg_createsubscriber needs PostgreSQL 17 or later'
  if $probe->pg_version < 17;

my %announce = ('idgen.purge_interval' => "'2s'");
my $node0 = mesh_node('fromcopy', 0, 2, 11, %announce);
my @load = (start_mesh_load($node0, 0, 60));
wait_for_gate($node0);

# A standby of node 0, caught up, then stopped.
$node0->backup('node0');
my $copy = PostgreSQL::Test::Cluster->new('fromcopy_1');
$copy->init_from_backup($node0, 'node0', has_streaming => 1);
$copy->start;
$node0->wait_for_catchup($copy);
$copy->stop;

# pg_createsubscriber as printed, with this test's paths, connection string
# and database, and the socket and port it starts the copy on.
(my $command = doc_block('docs/active-active.md', 'active-active/from-copy')) =~ s/\\\n//g;
my @words = shellwords($command);
my %as_here = (
	'/var/lib/postgresql/17/main' => $copy->data_dir,
	'host=node0 dbname=app' => $node0->connstr('postgres'),
	'app' => 'postgres');
@words = map { $as_here{$_} // $_ } @words;
command_ok([ @words, '--socketdir', $copy->host, '--subscriber-port', $copy->port ],
	'pg_createsubscriber makes the standby a server of its own');

# Its own settings only now, then its start, loaded from then on.
$copy->append_conf('postgresql.conf', "idgen.worker_id = 12\nidgen.active_node = 1\n");
$copy->start;
push @load, start_mesh_load($copy, 1, 30);
$copy->safe_psql('postgres', doc_block('docs/active-active.md', 'active-active/from-copy-origin'));
mesh_subscribe($node0, 0, $copy, 1);

my ($sysid0, $sysid1) = map { $_->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()') }
  ($node0, $copy);
isnt($sysid1, $sysid0, 'the new node has a system identifier of its own');

# Each holds the other's claim, announced since the other's start.
ok(claim_received(@$_), $_->[0]->name . ' receives the claim of ' . $_->[1]->name)
  for ([ $node0, $copy ], [ $copy, $node0 ]);
wait_for_gate($copy);
$_->finish for @load;

for my $node ($node0, $copy)
{
	is($node->safe_psql('postgres', 'SELECT identity_clash FROM idgen_info()'), '',
		$node->name . ': no clash');
	isnt($node->safe_psql('postgres', "SELECT idgen_seq_next('conv:1')"), '',
		$node->name . ': hands out per-key values');
}
is($copy->safe_psql('postgres', q{SELECT subname || ' ' || suborigin FROM pg_subscription}),
	'node1_from_node0 none', 'the new node replicates only node 0\'s own changes');

my ($ids0, $values0) = issued_by($node0, 0);
my ($ids1, $values1) = issued_by($copy, 1);
ok(keys %$ids1 > 0 && keys %$values1 > 0,
	'the new node handed out IDs and per-key values under load (' . scalar(keys %$ids1) . ' IDs)');
is(count_common($ids0, $ids1), 0,
	'no Snowflake ID issued by both (' . join(', ', map { scalar keys %$_ } $ids0, $ids1) . ' issued)');
is(count_common($values0, $values1), 0,
	'no per-key value handed out by both (' . join(', ', map { scalar keys %$_ } $values0, $values1) . ')');
like($copy->safe_psql('postgres', q{SELECT coalesce(string_agg(DISTINCT message, '; '), '') FROM refused WHERE node = 1}),
	qr/^(this node has not yet heard from the nodes it replicates with)?$/,
	'the new node refused calls only until it had heard from node 0');
is($node0->safe_psql('postgres', 'SELECT count(*) FROM refused WHERE node = 0'), '0',
	'node 0 refused nothing');
no_crash_logged($_, 'no crash on ' . $_->name) for ($node0, $copy);

done_testing();
