# Scenario: the libpq stress client keeps generating Snowflake IDs and
# UUIDv7 from several connections (reconnecting when the server goes away)
# while the test kills a generating backend with SIGKILL (the postmaster then
# crash-restarts every process and re-creates shared memory) and later stops
# the server with pg_ctl stop -m immediate and starts it again.  Over
# everything collected, before and after both crashes: no value repeats, and
# each connection's values keep increasing, because generators restart
# above the durable horizon.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $stress = stress_client();
# PostgreSQL::Test::Cluster turns restart_after_crash off; this test needs it.
my $node = idgen_node('crash', 'max_connections' => 30, 'restart_after_crash' => 'on');
my $connstr = $node->connstr('postgres');

my %runs = (
	snowflake => [ '-c', 4, '-e', 'idgen_snowflake()' ],
	uuid7 => [ '-c', 2, '-e', 'idgen_uuid7()', '-t', 'uuid' ],);
my $connections = 6;

# The clients run for a set time (they cannot be told to stop), and both
# crashes must fall within it: the crashes wait for states, not for set
# times (below), so that on a quiet machine they are over in a few seconds,
# and the clients' time leaves as much again and more for a busy one.
my (%out, %err, %h);
for my $kind (sort keys %runs)
{
	$h{$kind} = IPC::Run::start(
		[ $stress, '-d', $connstr, '-q', '--reconnect', '-D', 15, '-b', 200, @{ $runs{$kind} } ],
		'>', \$out{$kind}, '2>', \$err{$kind});
}

# Both kinds generated since the server (re)started, before each crash:
# what the crashes are to cut off, and the values they are to be compared
# with.  (Shared memory, and with it idgen_stats, is made anew at every
# start and crash restart.)
crash_twice($node, 'generating', $connections,
	q{(SELECT bool_and(ids > 0) FROM idgen_stats WHERE kind IN ('snowflake', 'uuid7'))});

for my $kind (sort keys %runs)
{
	my $passed = $h{$kind}->finish;
	note("$kind:\n$out{$kind}$err{$kind}");
	ok($passed, "$kind: the stress client passed (exit code 0)");
	like($out{$kind}, qr/\b0 duplicates, 0 order violations\b/,
		"$kind: no duplicate, every connection's values kept increasing across both crashes");
	my ($values) = $out{$kind} =~ /(\d+) values, \d+ distinct/;
	my ($reconnects) = $out{$kind} =~ /(\d+) reconnects/;
	cmp_ok($reconnects // 0, '>=', 2 * ($kind eq 'snowflake' ? 4 : 2) - 1,
		"$kind: connections were lost and re-established ($reconnects reconnects, $values values)");
}

# The horizon survived both crashes: only the very first start lacked it,
# and that was no loss.
my $log = slurp_file($node->logfile);
my $lost = () = $log =~ /the idgen durable horizon was lost/g;
my $none = () = $log =~ /no idgen durable horizon yet/g;
is("$none,$lost", '1,0', 'the durable horizon was read back after each crash');

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
