# Scenario: IDs generated after a clean restart are greater than every ID
# generated before it (the generator restarts from the wall clock, which
# has moved on; the durable horizon, for crashes and clock steps, is
# 008_horizon.pl's and 009_crash.pl's).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $node = idgen_node('restart');
$node->safe_psql('postgres', q{
	CREATE TABLE ids (epoch int, id bigint PRIMARY KEY DEFAULT idgen_snowflake());
	INSERT INTO ids (epoch) SELECT 1 FROM generate_series(1, 50000);
});

for my $round (2 .. 4)
{
	$node->restart;
	wait_for_horizon($node);
	$node->safe_psql('postgres',
		"INSERT INTO ids (epoch) SELECT $round FROM generate_series(1, 50000)");
	is( $node->safe_psql(
			'postgres', qq{
		SELECT (SELECT min(id) FROM ids WHERE epoch = $round) >
		       (SELECT max(id) FROM ids WHERE epoch < $round)}),
		't', "restart $round: every new ID is greater than every earlier one");
}
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM ids'),
	'200000|200000', 'no duplicate across restarts');

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
