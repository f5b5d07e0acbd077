# Scenario: the keeper background process and the durable horizon.  The
# keeper starts with the server and keeps a horizon, fsynced in
# $PGDATA/idgen.horizon, ahead of the clock, renewing it only when it is less
# than half idgen.horizon_lead ahead.  With the keeper stopped (SIGSTOP),
# generators run up to the horizon and then fail clearly instead of passing
# it; when it resumes, so do they.  Likewise when the keeper cannot write
# the file (its failures show in idgen_info()).  A missing or corrupt horizon file never
# stops the server: it logs a WARNING and generates from the wall clock.  The
# first start of a data directory, which never had a horizon, logs a LOG.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use IdgenTest;

my $node = idgen_node('horizon');
my $horizon_file = $node->data_dir . '/idgen.horizon';

ok($node->log_contains(qr/LOG:  idgen keeper started/), 'the keeper logs that it started');
# A data directory that never had a horizon: a LOG, not the WARNING of a
# horizon that was lost.
ok($node->log_contains(qr/LOG:  no idgen durable horizon yet in this data directory; generators start from the wall clock/),
	'first start: no horizon yet, said in a LOG');
ok(!$node->log_contains(qr/WARNING:  the idgen durable horizon was lost/),
	'first start: no WARNING that a horizon was lost');
$node->poll_query_until('postgres', 'SELECT horizon IS NOT NULL FROM idgen_info()')
  or die 'keeper made no horizon';

# The keeper needs no database connection, so it is not in pg_stat_activity;
# idgen_info() reports its pid, and the process title names it.
my $keeper_pid = $node->safe_psql('postgres', 'SELECT keeper_pid FROM idgen_info()');
like($keeper_pid, qr/^\d+$/, 'idgen_info reports the keeper pid');
like(slurp_file("/proc/$keeper_pid/cmdline"), qr/idgen keeper/,
	'that process is the "idgen keeper" background process');

like(slurp_file($horizon_file), qr/^idgen horizon 2 \d+ \d+ [0-9a-f]{8}\n$/,
	'the horizon file is one checksummed line: the horizon and when it was written');

# The horizon stays ahead of the clock, and is renewed about twice a second,
# not on every round (idgen.horizon_interval = 100).  Watched until the
# keeper has renewed it 3 times and it is ahead of the clock, rather than
# for a set 3 s: a keeper kept off the CPU, or a slow fsync of its file,
# makes fewer renewals in a given time, and a horizon read while its
# renewal is being written is nearer the clock.  Every renewal needs the
# clock to have moved half the lead on (0.5 s), so 3 take at least 1 s and
# no more than 5 a second were made however long it took; a renewal on
# every round would be 10 a second.
my $t0 = time();
my ($p0) = $node->safe_psql('postgres', 'SELECT horizon_persists FROM idgen_info()');
my ($p1, $lead, $failures);
for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
{
	($p1, $lead, $failures) = split /\|/, $node->safe_psql('postgres',
		'SELECT horizon_persists, horizon_lead_ms, horizon_failures FROM idgen_info()');
	last if $p1 - $p0 >= 3 && $lead >= 300;
	usleep(100_000);
}
my $elapsed = time() - $t0;
my $persists = $p1 - $p0;
cmp_ok($persists, '>=', 3, sprintf('the keeper renewed the horizon in %.1f s (%d times)', $elapsed, $persists));
cmp_ok($persists, '<=', 5 * $elapsed, 'only when it was less than half the lead ahead (not every 100 ms round)');
cmp_ok($lead, '>=', 300, "the horizon is ahead of the clock ($lead ms)");
cmp_ok($lead, '<=', 1100, 'by at most idgen.horizon_lead');
is($failures, '0', 'no failed persist');

# Horizon as written in the file, as a timestamptz.
sub file_horizon
{
	my ($us) = slurp_file($horizon_file) =~ /^idgen horizon 2 (\d+) /;
	return "'2000-01-01 00:00:00+00'::timestamptz + $us * interval '1 microsecond'";
}

# Stop the keeper: generators may use the horizon already on disk, no more.
$node->safe_psql('postgres', 'CREATE TABLE ids (id bigint)');
kill 'STOP', $keeper_pid or die "could not stop the keeper: $!";
# Calls until one fails, for as long as the tests wait for anything: the
# horizon is up to 1.1 s ahead, and the last call waits idgen.clock_wait.
my $err = '';
my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $deadline)
{
	my ($ret, $out, $stderr) = $node->psql('postgres',
		'INSERT INTO ids SELECT idgen_snowflake() FROM generate_series(1, 1000)');
	if ($ret != 0) { $err = $stderr; last; }
	usleep(50_000);
}
like($err, qr/ERROR:  could not generate Snowflake ID: the durable horizon has not advanced/,
	'keeper stopped: generation fails once it reaches the horizon');
like($err, qr/HINT:  Check that the "idgen keeper" background process is running/,
	'with a hint naming the keeper');
my ($ret, $out, $uuid_err) = $node->psql('postgres', 'SELECT idgen_uuid7()');
like($uuid_err, qr/could not generate UUIDv7: the durable horizon has not advanced/,
	'idgen_uuid7() refuses too');
is( $node->safe_psql(
		'postgres', 'SELECT count(*) > 0, max(idgen_snowflake_time(id)) <= ' . file_horizon() . ' FROM ids'),
	't|t', 'no ID was issued beyond the horizon on disk');

# The resumed keeper first writes a horizon (an fsync) before generators
# may use it; a call that comes first waits up to idgen.clock_wait and
# fails: calls are made until one passes.
kill 'CONT', $keeper_pid or die "could not resume the keeper: $!";
ok($node->poll_query_until('postgres', 'SELECT idgen_snowflake() > (SELECT max(id) FROM ids)'),
	'keeper resumed: generation resumes above every earlier ID');

# The keeper cannot write (a directory stands where its temporary file
# goes): the failures show in idgen_info() and the log, generation stops at
# the horizon on disk, and resumes once the keeper can write again.
mkdir $node->data_dir . '/idgen.horizon.tmp' or die $!;
$node->poll_query_until('postgres', 'SELECT horizon_failures > 0 FROM idgen_info()')
  or die 'no failure counted';
ok($node->log_contains(qr/LOG:  could not create file "idgen.horizon.tmp": Is a directory/),
	'keeper cannot write: the log says why');
$err = '';
$deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $deadline)
{
	my ($ret, $out, $stderr) = $node->psql('postgres',
		'INSERT INTO ids SELECT idgen_snowflake() FROM generate_series(1, 1000)');
	if ($ret != 0) { $err = $stderr; last; }
	usleep(50_000);
}
like($err, qr/the durable horizon has not advanced/,
	'keeper cannot write: generation stops at the horizon on disk');
rmdir $node->data_dir . '/idgen.horizon.tmp' or die $!;
$node->poll_query_until('postgres', 'SELECT idgen_snowflake() > (SELECT max(id) FROM ids)')
  or die 'generation did not resume';
pass('keeper can write again: generation resumes above every earlier ID');

# SIGTERM to the keeper (an administrator's kill): the postmaster starts a
# new one, and generation goes on.
kill 'TERM', $keeper_pid or die "kill: $!";
$node->poll_query_until('postgres',
	"SELECT keeper_pid IS NOT NULL AND keeper_pid <> $keeper_pid FROM idgen_info()")
  or die 'no new keeper';
pass('keeper terminated: the postmaster started a new one');
$keeper_pid = $node->safe_psql('postgres', 'SELECT keeper_pid FROM idgen_info()');
$node->poll_query_until('postgres',
	"SELECT horizon_lead_ms > 0 AND idgen_snowflake() > (SELECT max(id) FROM ids) FROM idgen_info()")
  or die 'generation did not go on';
pass('keeper terminated: generation goes on');

# A normal restart restores the horizon.
$node->restart;
wait_for_horizon($node);
is($node->safe_psql('postgres', 'SELECT horizon_restored FROM idgen_info()'), 't',
	'restart: the horizon was read back');
is($node->safe_psql('postgres', 'SELECT idgen_snowflake() > (SELECT max(id) FROM ids)'), 't',
	'restart: IDs above every earlier one');

# Missing, garbled or tampered files: WARNING, start from the wall clock.
# (A missing file is a lost horizon, not a first start: the keeper wrote
# one here, and idgen.horizon.seen says so.)
ok(-e $node->data_dir . '/idgen.horizon.seen', 'the keeper marked that this data directory had a horizon');
my @bad = (
	[ 'missing', undef, qr/could not be opened: No such file or directory/ ],
	[ 'garbage', "garbage\n", qr/is corrupt \(not in the expected format\)/ ],
	[ 'empty', '', qr/is empty or unreadable/ ],
	[ 'checksum', "idgen horizon 1 851234567890123 deadbeef\n", qr/is corrupt \(checksum mismatch\)/ ],
);
for my $case (@bad)
{
	my ($name, $content, $why) = @$case;
	$node->stop('fast');
	unlink $horizon_file;
	if (defined $content)
	{
		open my $fh, '>', $horizon_file or die $!;
		print $fh $content;
		close $fh;
	}
	my $offset = -s $node->logfile;
	$node->start;
	ok($node->log_contains(qr/WARNING:  the idgen durable horizon was lost/, $offset)
		  && $node->log_contains($why, $offset),
		"$name horizon file: the server starts and says why");
	wait_for_horizon($node);
	is($node->safe_psql('postgres',
			'SELECT horizon_restored, idgen_snowflake() > 0, idgen_uuid7() IS NOT NULL FROM idgen_info()'),
		'f|t|t', "$name horizon file: generators start from the wall clock");
	like(slurp_file($horizon_file), qr/^idgen horizon 2 \d+ \d+ [0-9a-f]{8}\n$/,
		"$name horizon file: the keeper writes a good one again");
}

# A file of version 1 (the horizon alone) is still read.
sub crc32c
{
	my ($data) = @_;
	my $crc = 0xFFFFFFFF;
	for my $byte (unpack 'C*', $data)
	{
		$crc ^= $byte;
		$crc = ($crc >> 1) ^ (($crc & 1) ? 0x82F63B78 : 0) for 1 .. 8;
	}
	return $crc ^ 0xFFFFFFFF;
}
{
	my ($horizon) = slurp_file($horizon_file) =~ /^idgen horizon 2 (\d+) /;
	$node->stop('fast');
	my $body = "idgen horizon 1 $horizon";
	open my $fh, '>', $horizon_file or die $!;
	printf $fh "%s %08x\n", $body, crc32c($body);
	close $fh;
	$node->start;
	wait_for_horizon($node);
	is($node->safe_psql('postgres',
			'SELECT horizon_restored, idgen_snowflake() > (SELECT max(id) FROM ids) FROM idgen_info()'),
		't|t', 'a version 1 horizon file is read back; IDs above every earlier one');
}

is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM ids'),
	join('|', ($node->safe_psql('postgres', 'SELECT count(*) FROM ids')) x 2),
	'no duplicate among the collected IDs');

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
