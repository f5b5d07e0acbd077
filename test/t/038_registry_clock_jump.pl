# Scenario: a server that leases its identity from a registry, whose clock
# jumps forward 40 s (an NTP correction, a virtual machine resumed).  Its
# lease bounds the timestamps of its IDs by its own clock, so the next IDs
# are beyond the bound until the registry process renews it; the renewal
# is asked for at once and generators wait for it (within
# idgen.clock_wait), rather than telling clients for up to a third of the
# ttl that a lease renewed moments ago "has ended".  (A jump further than
# idgen.takeover_max_lead is refused by the registry, whose clock did not
# move: then calls fail, and say why.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IdgenTest;

my ($clock_file, $faketime) = faketime_clock();
my $registry = idgen_node('registry', 'idgen.worker_quarantine' => "'1s'");
my $conninfo = 'host=' . $registry->host . ' port=' . $registry->port . ' dbname=postgres';
my $node;
{
	local @ENV{ keys %$faketime } = values %$faketime;
	# idgen.clock_wait at 5 s: the first call after the jump waits for the
	# renewal it asked for, a round trip to the registry that a loaded
	# machine can make take longer than the default 1 s.  It stays below
	# the 10 s between scheduled renewals (a third of the default 30 s
	# idgen.registry_ttl), and the jump comes just after one (below), so
	# that only the renewal the generators ask for can end their wait.
	$node = idgen_node('leased', 'idgen.registry' => "'$conninfo'", 'idgen.identity' => 'registry',
		'idgen.clock_wait' => "'5s'");
}
$node->poll_query_until('postgres', q{SELECT state = 'held' FROM idgen_identity()})
  or die 'no identity';
my $before = $node->safe_psql('postgres', 'SELECT idgen_snowflake()');

# Just after a scheduled renewal: the next one is 10 s away.
my $renewed = $node->safe_psql('postgres', 'SELECT renewed_at FROM idgen_identity()');
$node->poll_query_until('postgres', "SELECT renewed_at > '$renewed' FROM idgen_identity()")
  or die 'the lease was not renewed';
IdgenTest::step_clock($clock_file, '+40');
my ($errors, $calls, $last) = (0, 0, '');
my $end = time + 3;
while (time < $end)
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT idgen_snowflake()');
	$calls++;
	if ($ret != 0)
	{
		$errors++;
		$last = $stderr;
	}
}
is($errors, 0, "40 s forward: no call of $calls fails ($last)");
cmp_ok($node->safe_psql('postgres', 'SELECT idgen_snowflake()'), '>', $before,
	'and the IDs go on above the ones before the jump');
$node->stop;
$registry->stop;

done_testing();
