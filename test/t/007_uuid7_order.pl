# Scenario: two sessions call idgen_uuid7() in turn, as fast as the client
# can, so that consecutive calls from different backends fall in the same
# millisecond.  Every UUID must be greater than the one before it from either
# session: the order is server-wide, not per backend.
# That consecutive calls share a millisecond is not left to the speed of
# the client: the server runs under libfaketime, and its clock stands still
# while the sessions call (a round trip on a busy machine can take longer
# than a millisecond every time).  The calls then share a millisecond as
# long as its counter lasts (4096 ticks, 2000 calls), and the order between
# them is the counter's alone.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IdgenTest;

my ($offset_file, $faketime) = faketime_clock();
my $node;
{
	local @ENV{ keys %$faketime } = values %$faketime;
	$node = idgen_node('uuid7_order');
}
wait_for_horizon($node);
my @sessions = map { $node->background_psql('postgres') } 1 .. 2;

# Stop the server's clock at the real time now (freeze_clock).
freeze_clock($offset_file, time());

my @uuids;
for my $i (1 .. 2000)
{
	push @uuids, $sessions[$i % 2]->query_safe('SELECT idgen_uuid7()');
}
$_->quit for @sessions;
IdgenTest::step_clock($offset_file, '+0');

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
