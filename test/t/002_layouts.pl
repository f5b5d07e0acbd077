# Scenario: the server starts with each kind of invalid layout, logs why,
# and refuses to generate (nothing is produced from an invalid layout); a
# layout whose timestamp field ends within 10 years starts with a warning;
# a 1-bit sequence is used up every millisecond, so the generator borrows
# ahead of the clock up to idgen.max_drift and then waits, and never
# repeats or reorders.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX qw(strftime);
use IdgenTest;

my $node = idgen_node('layouts');

# The restarts below run the server under libfaketime, with its clock at
# the real time until the case of a field that runs out moves it on (and
# never back: the durable horizon follows the clock it sees).
my ($offset_file, $faketime) = faketime_clock();

my @invalid = (
	[ 'widths sum to 64', { 'idgen.worker_bits' => 6 },
		qr/sum to 64, but must sum to 63/ ],
	[ 'worker id does not fit', { 'idgen.worker_id' => 32 },
		qr/"idgen.worker_id" is 32, but 5 worker bits hold 0 to 31/ ],
	[ 'negative datacenter id', { 'idgen.datacenter_id' => -1 },
		qr/"idgen.datacenter_id" is -1, but 5 datacenter bits hold 0 to 31/ ],
	[ 'epoch in the future', { 'idgen.epoch' => "'2999-01-01 00:00:00+00'" },
		qr/"idgen.epoch" is "2999-01-01 00:00:00\+00", which is in the future/ ],
	[ 'epoch not a timestamp', { 'idgen.epoch' => "'yesterday-ish'" },
		qr/"idgen.epoch" is "yesterday-ish", which is not a valid timestamp/ ],
	[ 'timestamp field exhausted',
		{ 'idgen.epoch' => "'2000-01-01 00:00:00+00'", 'idgen.timestamp_bits' => 38,
		  'idgen.sequence_bits' => 15 },
		qr/38-bit timestamp field counted from "idgen.epoch" \(2000-01-01 00:00:00\+00\) ran out at/ ],
	[ 'too many gene bits', { 'idgen.gene_bits' => 17, 'idgen.timestamp_bits' => 24 },
		qr/"idgen.gene_bits" is 17, but must be between 0 and 16/ ],
);

my $base_conf = slurp_file($node->data_dir . '/postgresql.conf');

# Restart the node with the base settings and %$conf (name => value); the
# log offset from before the start.
sub restart_with
{
	my ($conf) = @_;
	$node->stop('fast');
	open my $fh, '>', $node->data_dir . '/postgresql.conf' or die $!;
	print $fh $base_conf, map { "$_ = $conf->{$_}\n" } sort keys %$conf;
	close $fh;
	my $offset = -s $node->logfile;
	local @ENV{ keys %$faketime } = values %$faketime;
	$node->start;
	return $offset;
}

for my $case (@invalid)
{
	my ($name, $conf, $why) = @$case;
	my $log_offset = restart_with($conf);

	ok($node->log_contains(qr/WARNING:  invalid Snowflake layout, idgen will not generate Snowflake IDs/, $log_offset)
		  && $node->log_contains($why, $log_offset),
		"$name: server starts and logs why");

	for my $call ('SELECT idgen_snowflake()', 'SELECT idgen_snowflake(0)',
		'SELECT idgen_snowflake_decode(1)', 'SELECT idgen_gene(1)')
	{
		my $err = sql_error($node, $call);
		like($err, qr/ERROR:  55000: invalid Snowflake layout/, "$name: $call refused");
		like($err, $why, "$name: $call says why");
	}
	is($node->safe_psql('postgres',
			"SELECT layout_valid, layout_error IS NOT NULL FROM idgen_info()"),
		'f|t', "$name: idgen_info reports the invalid layout");
	is($node->safe_psql('postgres', 'SELECT idgen_gene(191, 4)'), '15',
		"$name: idgen_gene with explicit bits still works");
	is($node->safe_psql('postgres',
			"SELECT ids, errors >= 2 FROM idgen_stats WHERE kind = 'snowflake'"),
		'0|t', "$name: nothing generated, refusals counted");
}

# A timestamp field that ends in fewer than 10 years: start with a warning.
my $log_offset = restart_with({ 'idgen.timestamp_bits' => 38, 'idgen.sequence_bits' => 15 });
wait_for_horizon($node);
ok($node->log_contains(qr/WARNING:  the Snowflake timestamp field runs out at 2032-.*, in fewer than 10 years/, $log_offset),
	'short lifetime: warning at start');
is($node->safe_psql('postgres',
		"SELECT layout_valid, timestamp_end < now() + interval '10 years', idgen_snowflake() > 0 FROM idgen_info()"),
	't|t|t', 'short lifetime: still generates, idgen_info shows the end');

# A 20-bit timestamp field (17.5 minutes) that ends a minute from now: the
# server starts and generates, then refuses once the field has run out.  The
# server's clock is stepped past the end once it has generated, rather than
# left to reach it: the end is then as far away as a restart on a busy
# machine may need, and the test does not wait for it.
{
	my $end = time() + 60;
	my $t = $end - 2**20 / 1000;
	my $epoch = strftime('%Y-%m-%d %H:%M:%S', gmtime(int($t)))
	  . sprintf('.%03d+00', int(($t - int($t)) * 1000));
	restart_with({ 'idgen.epoch' => "'$epoch'", 'idgen.timestamp_bits' => 20,
		'idgen.datacenter_bits' => 21, 'idgen.worker_bits' => 10 });
	wait_for_horizon($node);
	is($node->safe_psql('postgres', 'SELECT layout_valid, idgen_snowflake() > 0 FROM idgen_info()'),
		't|t', 'field ending in seconds: generates until then');
	IdgenTest::step_clock($offset_file, sprintf('+%.3f', $end + 1 - time()));
	my $err;
	for (1 .. 200)
	{
		my ($ret, $out, $stderr) = $node->psql('postgres',
			"\\set VERBOSITY verbose\nSELECT idgen_snowflake()");
		if ($ret != 0) { $err = $stderr; last; }
		select(undef, undef, undef, 0.1);
	}
	like($err // '', qr/ERROR:  54000: the Snowflake timestamp field has run out/,
		'field run out: generation refused with 54000');
	like($err // '', qr/DETAIL:  The 20-bit field counted from "idgen.epoch" ended at/,
		'field run out: the detail says when');
}

# Datacenter and worker fields of 32 bits together: a lease's id (an int)
# cannot hold them all, and the registry refuses to lease an id beyond it
# rather than claim a truncated one.
{
	my $epoch = strftime('%Y-%m-%d %H:%M:%S+00', gmtime(time() - 86400));
	restart_with({ 'idgen.epoch' => "'$epoch'", 'idgen.timestamp_bits' => 30,
		'idgen.datacenter_bits' => 22, 'idgen.worker_bits' => 10, 'idgen.sequence_bits' => 1 });
	like(sql_error($node,
			"SELECT * FROM idgen_server_lease(1, 'x', claim_datacenter_id => 4194303, claim_worker_id => 1023)"),
		qr/22003: worker id \(datacenter 4194303, worker 1023\) cannot be leased/,
		'an id beyond the lease table\'s range is refused, not truncated');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM idgen_worker_lease'), '0', 'and nothing is leased');
}

# A 1-bit sequence: two IDs per millisecond.  5000 IDs need 2500 ms of
# clock; at most idgen.max_drift (100) of them can be borrowed, so the
# call must wait for the clock and takes at least 2.3 s.
restart_with({ 'idgen.timestamp_bits' => 52, 'idgen.sequence_bits' => 1 });
wait_for_horizon($node);
$node->safe_psql('postgres', 'SELECT idgen_stats_reset()');
my $res = $node->safe_psql(
	'postgres', q{
	CREATE TEMP TABLE t AS
		SELECT g, idgen_snowflake() AS id, clock_timestamp() AS after
		FROM generate_series(1, 5000) g;
	SELECT count(DISTINCT id),
	       (SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY g) prev FROM t) s WHERE id <= prev),
	       count(*) FILTER (WHERE idgen_snowflake_time(id) > date_trunc('milliseconds', after) + interval '101 ms'),
	       max(after) - min(after) >= interval '2300 ms',
	       max((idgen_snowflake_decode(id)).sequence)
	FROM t;
});
is($res, '5000|0|0|t|1',
	'1-bit sequence: unique, increasing, never beyond max_drift_ms, paced by the clock');
my ($borrowed, $waits, $waited) = split /\|/, $node->safe_psql('postgres',
	"SELECT borrowed_ms, waits, wait_time_ms FROM idgen_stats WHERE kind = 'snowflake'");
cmp_ok($borrowed, '>', 0, "borrowed milliseconds counted ($borrowed)");
cmp_ok($waits, '>', 0, "waits counted ($waits, $waited ms)");

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
