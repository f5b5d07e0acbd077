# Scenario: two sessions call idgen_uuid7() in turn, as fast as the client
# can, so that consecutive calls from different backends fall in the same
# millisecond.  Every UUID must be greater than the one before it from either
# session: the order is server-wide, not per backend.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $node = idgen_node('uuid7_order');
my @sessions = map { $node->background_psql('postgres') } 1 .. 2;

my @uuids;
for my $i (1 .. 2000)
{
	push @uuids, $sessions[$i % 2]->query_safe('SELECT idgen_uuid7()');
}
$_->quit for @sessions;

my ($disorder, $same_ms) = (0, 0);
for my $i (1 .. $#uuids)
{
	$disorder++ unless $uuids[$i] gt $uuids[ $i - 1 ];
	# The first 48 bits (12 hex digits) are the millisecond.
	my ($a, $b) = map { substr($_, 0, 8) . substr($_, 9, 4) } @uuids[ $i - 1, $i ];
	$same_ms++ if $a eq $b;
}
is(scalar(@uuids), 2000, '2000 UUIDs from two alternating sessions');
like($uuids[0], qr/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
	'canonical UUIDv7 text');
is($disorder, 0, 'each UUID is greater than the previous one from either session');
cmp_ok($same_ms, '>', 100,
	"consecutive UUIDs from different sessions shared a millisecond $same_ms times");

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
