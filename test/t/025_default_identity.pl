# Scenario: a server left at the default identity (datacenter 0, worker 0)
# says so in its log at start, once per start, so that two unconfigured
# servers do not share IDs unnoticed.  Setting either id, even to 0, or
# configuring a registry silences it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $warning = qr/WARNING:  idgen generates Snowflake IDs under the default identity \(datacenter 0, worker 0\)/;

sub warnings_logged
{
	my ($node) = @_;
	my @hits = grep { /$warning/ } split /\n/, slurp_file($node->logfile);
	return scalar @hits;
}

my $default = idgen_node('default');
is(warnings_logged($default), 1, 'a server at the default identity warns once at start');
like(slurp_file($default->logfile),
	qr/$warning.*\n.*DETAIL:  Neither "idgen.datacenter_id" nor "idgen.worker_id" is set, and no registry is configured/,
	'and says why');
# Sessions and background processes load the library too: none warns again.
$default->safe_psql('postgres', 'SELECT idgen_snowflake() FROM generate_series(1, 10)') for 1 .. 3;
is(warnings_logged($default), 1, 'sessions do not repeat it');
$default->restart;
is(warnings_logged($default), 2, 'each start warns once');
# A crash restart re-creates shared memory, not the postmaster: no new
# warning.  (PostgreSQL::Test::Cluster turns restart_after_crash off.)
$default->append_conf('postgresql.conf', "restart_after_crash = on\n");
$default->reload;
{
	my $bg = $default->background_psql('postgres');
	kill_backend($default, $bg->query_safe('SELECT pg_backend_pid()'));
	eval { $bg->quit };
}
$default->poll_query_until('postgres', 'SELECT idgen_snowflake() > 0')
  or die 'no recovery after the crash';
is(warnings_logged($default), 2, 'a crash restart does not repeat it');

my $zero = idgen_node('explicit_zero', 'idgen.worker_id' => 0);
is(warnings_logged($zero), 0, 'idgen.worker_id = 0 set explicitly: no warning');
$zero->stop;

my $dc = idgen_node('explicit_dc', 'idgen.datacenter_id' => 0);
is(warnings_logged($dc), 0, 'idgen.datacenter_id = 0 set explicitly: no warning');
$dc->stop;

my $set = idgen_node('configured', 'idgen.datacenter_id' => 1, 'idgen.worker_id' => 2);
is(warnings_logged($set), 0, 'a configured identity: no warning');
$set->stop;

# A registry client (here an unreachable one: the warning is about the
# configuration, not the lease).
my $client = idgen_node('registry_client', 'idgen.registry' => "'host=/nonexistent dbname=postgres'");
is(warnings_logged($client), 0, 'a registry client: no warning');
$client->stop;

# A layout with no identity bits has one identity only: nothing to warn of.
my $single = idgen_node('no_identity_bits', 'idgen.datacenter_bits' => 0, 'idgen.worker_bits' => 0,
	'idgen.timestamp_bits' => 41, 'idgen.sequence_bits' => 22);
is(warnings_logged($single), 0, 'a layout without identity bits: no warning');
$single->stop;

no_crash_logged($default, 'no crash logged but the one the test made');
$default->stop;
done_testing();
