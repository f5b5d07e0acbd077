# Scenario: the libpq stress client (test/stress/idgen_stress) opens many
# connections that generate at the same time, then checks every value for
# global uniqueness and each connection's values for strict order.  It runs
# on the default layout (Snowflake and UUIDv7), then on one with gene bits, where order holds per
# gene only; a negative control shows the checker does fail.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $stress = stress_client();
my $node = idgen_node('stress', 'max_connections' => 40);
wait_for_horizon($node);
my $connstr = $node->connstr('postgres');

sub run_stress
{
	my ($name, @args) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run([ $stress, '-d', $connstr, '-q', @args ],
		'>', \$stdout, '2>', \$stderr);
	note("$name:\n$stdout$stderr");
	return ($ok, $stdout);
}

my ($ok, $out) = run_stress('snowflake', '-c', 16, '-n', 20000, '-b', 500);
ok($ok, '16 connections x 20000 idgen_snowflake(): pass');
like($out, qr/320000 values, 320000 distinct, 0 duplicates, 0 order violations/,
	'all 320000 distinct and in order');

($ok, $out) = run_stress('uuid7', '-c', 16, '-n', 20000, '-b', 500,
	'-e', 'idgen_uuid7()', '-t', 'uuid');
ok($ok, '16 connections x 20000 idgen_uuid7(): pass');
like($out, qr/320000 values, 320000 distinct, 0 duplicates, 0 order violations/,
	'UUIDv7: all distinct and in order per connection');

# Now with 2 gene bits taken from the sequence.
$node->append_conf('postgresql.conf', "idgen.sequence_bits = 10\nidgen.gene_bits = 2\n");
$node->restart;
wait_for_horizon($node);

($ok, $out) = run_stress('one gene', '-c', 8, '-n', 20000, '-e', 'idgen_snowflake(3)');
ok($ok, '8 connections on one gene: pass');
like($out, qr/160000 values, 160000 distinct, 0 duplicates, 0 order violations/,
	'one gene shared by 8 connections: distinct and in order');

# Spread over genes, or a random gene per row: order holds only per gene,
# so check uniqueness only.
($ok, $out) = run_stress('spread', '-c', 8, '-n', 20000, '-o', 'none');
ok($ok, 'idgen_snowflake() spread over genes: pass');
like($out, qr/160000 distinct, 0 duplicates/, 'spread: distinct');

($ok, $out) = run_stress('mixed genes', '-c', 8, '-n', 20000, '-o', 'none',
	'-e', 'idgen_snowflake((random() * 3)::int)');
ok($ok, 'random genes: pass');
like($out, qr/160000 distinct, 0 duplicates/, 'random genes: distinct');

# Negative control: values that repeat and go backwards must fail.
($ok, $out) = run_stress('negative control', '-c', 4, '-n', 1000,
	'-e', '(random() * 10)::bigint');
ok(!$ok, 'the checker fails on duplicate values');
like($out, qr/FAIL/, 'and says FAIL');

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
