# Scenario: the server runs under libfaketime, whose offset file a test can
# rewrite to step the wall clock of the running server.  The clock steps
# back 1 s (within idgen.max_drift, set to 2 s for it: generation continues at once),
# then to 500 ms behind (generation waits about 400 ms, then continues),
# then 5 s further back (more than idgen.clock_wait = 1000 can absorb: a
# clear error saying by how much), then forward again (generation resumes).
# Then across restarts: 10 s forward and a crash (pg_ctl stop -m immediate),
# the clock back on restart (refused, no repeat), forward again (resumes);
# likewise across a clean restart.  The libpq stress client generates while
# the clock steps.  The keeper logs each step it sees.
# Each step is measured from something the test controls, not from the
# time a client or a server takes to start: the 500 ms step is watched for
# by the session that generates just after it, and across a restart the
# clock stands still (libfaketime's absolute time) a set distance behind
# the horizon on disk until the refusals have been seen.
# Across all of it no ID repeats and every ID is greater than the ones
# before it.  idgen_uuid7() follows the same policy.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IdgenTest;

my ($offset_file, $faketime) = faketime_clock();
sub step_clock { IdgenTest::step_clock($offset_file, @_) }

# Stop the server's clock at $us, a timestamptz in microseconds since
# 2000-01-01 (freeze_clock); step_clock with an offset starts it again.
sub stop_clock_at
{
	my ($us) = @_;
	freeze_clock($offset_file, 946_684_800 + $us / 1e6);
}

# Only the server runs under libfaketime; the keeper compares its stepped
# wall clock with its real monotonic clock.
my %faketime_env = %$faketime;
my $node;
{
	local @ENV{ keys %faketime_env } = values %faketime_env;
	$node = idgen_node('clock_step');
}
wait_for_horizon($node);

sub start_server
{
	local @ENV{ keys %faketime_env } = values %faketime_env;
	$node->start;
}
# 'at': the server's clock when the row was inserted, just after its ID.
$node->safe_psql('postgres',
	'CREATE TABLE ids (phase int, n int, id bigint, at timestamptz DEFAULT clock_timestamp())');

sub generate
{
	my ($phase) = @_;
	return $node->psql('postgres',
		"INSERT INTO ids SELECT $phase, g, idgen_snowflake() FROM generate_series(1, 2000) g",
		on_error_stop => 1);
}

sub phase_after_all_before
{
	my ($phase) = @_;
	return $node->safe_psql('postgres',
		"SELECT (SELECT min(id) FROM ids WHERE phase = $phase) > (SELECT max(id) FROM ids WHERE phase < $phase)");
}

# Issue an ID now, so that the generator's last millisecond is the current
# time and the next step puts the clock behind it by the step's full size.
# Returns the real time just before and just after the call that issued it
# (a psql start, or its exit, can take hundreds of ms on a busy machine).
# After an earlier step back a generator is ahead of the clock until it has
# issued an ID (it waits until it is within idgen.max_drift, 100 ms) and
# the clock has passed that: the mark would be that much ahead too.  So: an
# ID, a pause, then the mark.
sub mark_now
{
	$node->safe_psql('postgres', 'SELECT idgen_snowflake(), idgen_uuid7()');
	select(undef, undef, undef, 0.25);
	my $before = time();
	$node->safe_psql('postgres', 'SELECT idgen_snowflake(), idgen_uuid7()');
	return [ $before, time() ];
}

# Whether a clock-back error reports the step: the clock is behind the
# mark's ID by the step less the real time that passed between the ID and
# the error, which lies between the end of the mark's call and the start of
# the failing one ($started), and the start of the mark's call and now;
# within 100 ms.
sub reports_step
{
	my ($stderr, $what, $step_ms, $mark, $started) = @_;
	my $low = $step_ms - 1000 * (time() - $mark->[0]);
	my $high = $step_ms - 1000 * ($started - $mark->[1]);
	my ($ms) = $stderr =~ /ERROR:  could not generate \Q$what\E: the system clock moved backwards by (\d+) ms/;
	return 1 if defined $ms && $ms >= $low - 100 && $ms <= $high + 100;
	diag(sprintf('expected %.0f to %.0f ms: %s', $low, $high, $stderr));
	return 0;
}

# Wait for the server log to match, up to the tests' default timeout.
sub wait_for_log
{
	my ($re) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		return 1 if $node->log_contains($re);
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# Step the clock, then wait until the keeper has logged that step ($re,
# looked for after the log's end before the step).  The keeper compares
# its clocks once a round: two steps within one round would be logged as
# one, their sum, and the steps whose lines are asserted must each be seen
# alone.
sub step_clock_seen
{
	my ($offset, $re) = @_;
	my $log_offset = -s $node->logfile;
	step_clock($offset);
	$node->wait_for_log($re, $log_offset);
}

# The horizon in the stopped server's horizon file, in microseconds since
# 2000-01-01: what generators start above when it starts again.
sub horizon_on_disk
{
	my ($us) = slurp_file($node->data_dir . '/idgen.horizon') =~ /^idgen horizon 2 (\d+) /
	  or die 'no horizon in ' . $node->data_dir . '/idgen.horizon';
	return $us;
}

sub stats
{
	$node->safe_psql('postgres',
		"SELECT waits, wait_time_ms, clock_backward, errors FROM idgen_stats WHERE kind = 'snowflake'");
}

my ($ret, $stdout, $stderr) = generate(1);
is($ret, 0, 'phase 1: clock as is');

# 1 s back, while a session is generating flat out (until told to stop,
# half a second after the step), with idgen.max_drift at 2 s for this
# phase: the clock is then behind the last ID, within idgen.max_drift, and
# generation continues from the last millisecond without waiting.  (A
# delay such as pg_sleep would hide the step: it sleeps until the clock
# catches up.  So would a session kept off the CPU for as long as the
# step: a 3 ms step once went unseen that way while another suite ran, and
# a 50 ms one on 18 in a run beside two busy loops.  No session is kept
# off the CPU for a second.)
$node->safe_psql('postgres', q{ALTER SYSTEM SET idgen.max_drift = '2s'; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', q{SELECT current_setting('idgen.max_drift') = '2s'})
  or die 'idgen.max_drift was not reloaded';
$node->safe_psql('postgres',
	'SELECT idgen_stats_reset(); CREATE SEQUENCE ord; CREATE TABLE stop_generating ()');
my $bg = $node->background_psql('postgres');
$bg->query_until(qr/started/, q{\echo started
DO $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	WHILE clock_timestamp() < t0 + interval '10 s' AND NOT EXISTS (SELECT FROM stop_generating) LOOP
		INSERT INTO ids SELECT 2, nextval('ord'), idgen_snowflake() FROM generate_series(1, 100);
	END LOOP;
END $$;
});
# Step once it generates (its rows are not visible before it ends; the
# counters in shared memory are), and let it go on until it has read the
# clock behind a reading before the step (counted in shared memory too):
# the clock is behind for a second, until it is back where it was.
$node->poll_query_until('postgres', "SELECT ids >= 1000 FROM idgen_stats WHERE kind = 'snowflake'")
  or die 'the generating session did not start';
select(undef, undef, undef, 0.1);
step_clock_seen('-1', qr/LOG:  idgen keeper detected that the system clock moved backwards by (99\d|100\d) ms/);
$node->poll_query_until('postgres', "SELECT clock_backward > 0 FROM idgen_stats WHERE kind = 'snowflake'")
  or diag('the generating session read no clock behind the step');
$node->safe_psql('postgres', 'INSERT INTO stop_generating DEFAULT VALUES');
$bg->query_safe('SELECT 1');	# returns once the DO block has finished
$bg->quit;
my $phase2 = $node->safe_psql('postgres', 'SELECT count(*) FROM ids WHERE phase = 2');
cmp_ok($phase2, '>=', 1000, "1 s back: generation continued ($phase2 IDs)");
is(phase_after_all_before(2), 't', '1 s back: every new ID is greater than before');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM ids WHERE phase = 2) s
	WHERE id <= prev}),
	'0', '1 s back: IDs kept increasing across the step');
my ($waits, $waited, $backward) = split /\|/, stats();
is($waits, '0', '1 s back: no wait');
cmp_ok($backward, '>', 0, "1 s back: backward clock readings counted ($backward)");
$node->safe_psql('postgres', 'ALTER SYSTEM RESET idgen.max_drift; SELECT pg_reload_conf()');
$node->poll_query_until('postgres', q{SELECT current_setting('idgen.max_drift') = '100ms'})
  or die 'idgen.max_drift was not reset';
# The next steps are measured from the real clock.
step_clock_seen('+0', qr/LOG:  idgen keeper detected that the system clock moved forwards by (99\d|100\d) ms/);

# 500 ms back: wait until the clock is within 100 ms of the last ID.  The
# clock must then be 500 ms behind the generator's last ID: a session
# issues IDs one after the other until it reads the clock behind its
# reading before, and generates the phase at once, in the same statement.
# (An ID from one client and the phase from the next would leave the real
# time between them to chance: a psql start and connection on a busy
# machine once took 300 ms, the clock moved on meanwhile, and the wait was
# 86 ms.)  If the step lands inside an idgen_snowflake() call, that call
# waits instead, and the phase follows it without waiting: the same wait,
# in the same counters.
# The session also records how much real time passed between its last
# clock reading before the step and the statement that waits, less a wait
# already done (a step inside a call): the wait is 400 ms less that.  A
# machine that holds the session off the CPU at the step for 100 ms or
# more (a shared virtual machine can, for hundreds of ms) leaves too little
# to wait for what follows to be measured, so the phase runs again, after
# the clock is put back to the real time and has passed every ID issued:
# at most 5 times.
$node->safe_psql('postgres', 'CREATE TABLE step_gap (attempt int, gap_ms float8)');
my ($t0, $elapsed, $failed);
my $phase3_runs = 0;    # each inserts 2000 IDs
for my $attempt (1 .. 5)
{
	if ($attempt > 1)
	{
		step_clock('+0');
		$node->poll_query_until('postgres',
			'SELECT clock_timestamp() > idgen_snowflake_time(max(id)) FROM ids')
		  or die 'the clock did not pass the IDs issued';
	}
	$node->safe_psql('postgres', 'SELECT idgen_stats_reset()');
	$bg = $node->background_psql('postgres');
	$bg->query_until(qr/started/, qq{\\echo started
DO \$\$
DECLARE
	t0 timestamptz := clock_timestamp();
	prev timestamptz := t0;
	cur timestamptz;
	waiting timestamptz;
	waited float8;
BEGIN
	LOOP
		PERFORM idgen_snowflake();
		cur := clock_timestamp();
		EXIT WHEN cur < prev;
		IF cur > t0 + interval '$PostgreSQL::Test::Utils::timeout_default s' THEN
			RAISE EXCEPTION 'the clock did not step back';
		END IF;
		prev := cur;
	END LOOP;
	waiting := clock_timestamp();
	SELECT wait_time_ms INTO waited FROM idgen_stats WHERE kind = 'snowflake';
	INSERT INTO ids SELECT 3, g, idgen_snowflake() FROM generate_series(1, 2000) g;
	INSERT INTO step_gap VALUES ($attempt, extract(epoch FROM waiting - prev) * 1000 + 500 - waited);
END \$\$;
});
	$node->poll_query_until('postgres', "SELECT ids > 0 FROM idgen_stats WHERE kind = 'snowflake'")
	  or die 'the session did not start issuing IDs';
	$t0 = time();
	step_clock('-0.5');
	(undef, $failed) = $bg->query('SELECT 1');	# returns once the DO block has finished
	$elapsed = time() - $t0;
	diag("500 ms back: $bg->{stderr}") if $failed;
	$bg->quit;
	last if $failed;
	$phase3_runs++;
	my $gap = $node->safe_psql('postgres', "SELECT round(gap_ms) FROM step_gap WHERE attempt = $attempt");
	last if $gap < 100;
	diag("500 ms back: $gap ms passed at the step before the session waited; again");
}
is($failed, 0, '500 ms back: generation continues');
is(phase_after_all_before(3), 't', '500 ms back: every new ID is greater');
($waits, $waited, $backward) = split /\|/, stats();
cmp_ok($backward, '>', 0, "500 ms back: backward clock readings counted ($backward)");
cmp_ok($waits, '>', 0, "500 ms back: waited ($waits sleeps)");
# It waits until the clock is within idgen.max_drift (100 ms) of the
# last ID before the step: about 400 ms, less the time between that ID and
# the session's next clock reading.  What must hold exactly: no ID
# is more than 100 ms ahead of the clock when it was issued (rounded up to
# the next millisecond), and the first waited until the clock was that close.
cmp_ok($waited, '>=', 200, "500 ms back: waited most of the 400 ms ($waited ms)");
is($node->safe_psql('postgres', q{
	SELECT max(idgen_snowflake_time(id) - at) <= interval '101 ms'
	   AND min(at) >= (SELECT idgen_snowflake_time(min(id)) FROM ids WHERE phase = 3) - interval '101 ms'
	FROM ids WHERE phase = 3}),
	't', '500 ms back: every ID issued at most idgen.max_drift ahead of the clock');
# wait_time_ms is the time slept, which cannot exceed the time the call
# took; the call's budget, idgen.clock_wait, is of the time asked for, and
# the call would have failed beyond it.
cmp_ok($waited, '<=', $elapsed * 1000, sprintf('500 ms back: slept no longer than the call took (%.0f ms)', $elapsed * 1000));
cmp_ok($elapsed, '>=', 0.3, sprintf('500 ms back: the call took %.2f s after the step', $elapsed));
ok(wait_for_log(qr/LOG:  idgen keeper detected that the system clock moved backwards by (4[6-9]\d|50\d) ms/),
	'500 ms back: the keeper logged the step');

# 5 s further back: more than idgen.clock_wait can absorb; fail at once, clearly.
my $marked = mark_now();
my $log_before_5s = -s $node->logfile;
step_clock('-5.5');
my $started = time();
($ret, $stdout, $stderr) = generate(4);
isnt($ret, 0, '5 s back: generation fails');
ok(reports_step($stderr, 'Snowflake ID', 5000, $marked, $started),
	'5 s back: the error says by how much the clock moved back');
like($stderr, qr/HINT:  Check the server's time source/, '5 s back: with a hint');
is($node->safe_psql('postgres', 'SELECT count(*) FROM ids WHERE phase = 4'), '0',
	'5 s back: nothing generated');
is((split /\|/, stats())[3], '1', '5 s back: the error is counted');
$started = time();
($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT idgen_uuid7()');
ok(reports_step($stderr, 'UUIDv7', 5000, $marked, $started),
	'5 s back: idgen_uuid7() refuses too, with the same policy');

# The clock comes back: generation resumes above everything issued.  (The
# keeper first sees the step back, so that it logs each step by itself.)
$node->wait_for_log(qr/LOG:  idgen keeper detected that the system clock moved backwards by (49\d\d|50\d\d) ms/,
	$log_before_5s);
step_clock('+0');
($ret) = generate(5);
is($ret, 0, 'clock restored: generation resumes');
is($node->safe_psql('postgres', 'SELECT idgen_uuid7_time(idgen_uuid7()) IS NOT NULL'), 't',
	'clock restored: idgen_uuid7() resumes');
is(phase_after_all_before(5), 't', 'clock restored: every new ID is greater');

# The stress client generates from four connections for 3 s while the clock
# steps back 3 ms, then 300 ms (a wait of about 200 ms), then forward again:
# over everything collected, no duplicate and no connection's values going
# backwards, and no error.
{
	my ($sout, $serr);
	my $h = IPC::Run::start(
		[ stress_client(), '-d', $node->connstr('postgres'), '-q', '-c', 4, '-D', 3, '-b', 200 ],
		'>', \$sout, '2>', \$serr);
	select(undef, undef, undef, 0.7);
	step_clock('-0.003');
	select(undef, undef, undef, 0.7);
	# Each seen by the keeper: the 10 s step below must be logged alone.
	step_clock_seen('-0.3', qr/LOG:  idgen keeper detected that the system clock moved backwards by (29\d|30\d) ms/);
	select(undef, undef, undef, 0.7);
	step_clock_seen('+0', qr/LOG:  idgen keeper detected that the system clock moved forwards by (29\d|30\d) ms/);
	my $passed = $h->finish;
	note("stress client:\n$sout$serr");
	ok($passed, 'stress client across clock steps: passed');
	like($sout, qr/\b0 duplicates, 0 order violations, 0 errors\b/,
		'stress client across clock steps: no duplicate, no disorder, no error');
}

# Forward 10 s, then an immediate stop (a crash), and back to about the
# real time before the server starts again.  IDs were issued up to the
# durable horizon about 11 s ahead of the real clock: the restarted server
# starts above it, so it refuses to generate (rather than repeat IDs) until
# the clock is forward again.  The clock stands still 10 s behind the
# horizon on disk from before the start until the refusal and the keeper's
# line have been seen: a clock running meanwhile would bring them closer by
# however long the start took (with wal_level = minimal, crash recovery
# replays no horizon, and generators start above the file's).
step_clock('+10');
ok(wait_for_log(qr/LOG:  idgen keeper detected that the system clock moved forwards by (99\d\d|100\d\d) ms/),
	'10 s forward: the keeper logged the step');
($ret) = generate(6);
is($ret, 0, '10 s forward: generation continues');
is(phase_after_all_before(6), 't', '10 s forward: every new ID is greater');
$node->stop('immediate');
stop_clock_at(horizon_on_disk() - 10_000_000);
start_server();
($ret, $stdout, $stderr) = generate(7);
isnt($ret, 0, 'crash, then the clock back 10 s: generation refuses');
like($stderr, qr/could not generate Snowflake ID: the system clock moved backwards by (9\d\d\d|1[01]\d\d\d) ms/,
	'crash, then the clock back 10 s: the clock-back error, measured against the durable horizon');
# (The keeper says so once the server is out of recovery, at its next round.)
ok(wait_for_log(qr/LOG:  the system clock is (9\d\d\d|1[01]\d\d\d) ms behind the idgen durable horizon/),
	'crash, then the clock back 10 s: the keeper says so at start');
step_clock('+12');
$node->poll_query_until('postgres', 'SELECT idgen_snowflake() > 0')
  or die 'generation did not resume';
($ret) = generate(7);
is($ret, 0, 'clock forward again: generation resumes');
is(phase_after_all_before(7), 't', 'clock forward again: every new ID is greater than before the crash');

# The same across a clean restart with the clock stepped back 3 s: it
# stands still 3 s behind the horizon the shutdown left on disk (the last
# ID issued), from before the start until the refusal.  (A step of 3 s
# before the stop, with the clock running, once left 1.2 s by the time of
# the call, and a start of more than 3 s would find the clock past the
# time the file was written and take the horizon over instead.)
$node->stop('fast');
stop_clock_at(horizon_on_disk() - 3_000_000);
start_server();
($ret, $stdout, $stderr) = generate(8);
like($stderr, qr/the system clock moved backwards by (2\d\d\d|3\d\d\d) ms/,
	'clean restart, clock back 3 s: refuses with the clock-back error');
step_clock('+12');
$node->poll_query_until('postgres', 'SELECT idgen_snowflake() > 0')
  or die 'generation did not resume';
($ret) = generate(8);
is($ret, 0, 'clock forward again: generation resumes');
is(phase_after_all_before(8), 't', 'clean restart: every new ID is greater than before it');

my $total = 10000 + 2000 * $phase3_runs + $phase2;
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM ids'),
	"$total|$total", 'no duplicate across the clock steps');

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
