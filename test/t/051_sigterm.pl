# Scenario: SIGTERM to each of idgen's background processes, each caught
# where SIGTERM must end a wait: the one policy of bgworker.c.  A process
# in a database (a sequencer, the launcher) ends as a backend does, even
# while it waits for a lock; a process that owes something at exit (the
# keeper, the registry process) finishes its step, even a wait for
# synchronous standbys that will never answer, does what it owes, and is
# started again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $node = idgen_node('sigterm', _init => { allows_streaming => 1 },
	'idgen.sequencer_idle' => "'1h'", 'idgen.purge_interval' => "'1s'");
wait_for_horizon($node);

# The process of each kind, and the postmaster's word on how it ended.
sub pid_of
{
	my ($type, $db) = @_;
	$db = defined $db ? "'$db'" : 'NULL';
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = '$type' AND datname IS NOT DISTINCT FROM $db");
}

sub ended
{
	my ($type, $pid, $offset, $code) = @_;
	$node->wait_for_log(qr/background worker "\Q$type\E" \(PID $pid\) exited with exit code $code/,
		$offset);
	return 1;
}

# A sequencer waiting for a lock on idgen_seq, which a session holds (at
# its next purge, every second here, it records the use of the cached
# key): a SIGTERM ends it there, as it ends a backend's wait (57P01), and
# the session's lock is untouched.
{
	$node->safe_psql('postgres', q{SELECT idgen_seq_configure('cached', cache => 10)});
	$node->poll_query_until('postgres',
		q{SELECT idgen_seq_next('cached') > 0 AND EXISTS (SELECT FROM idgen_seq_cache() WHERE key = 'cached')})
	  or die 'the cached key is not served from shared memory';
	my $sequencer = pid_of('idgen sequencer', 'postgres');
	my $locker = $node->background_psql('postgres');
	$locker->query_safe('BEGIN; LOCK TABLE idgen_seq IN ACCESS EXCLUSIVE MODE');
	$node->poll_query_until('postgres', qq{
		SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $sequencer})
	  or die 'the sequencer does not wait for the lock';
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($sequencer)");
	ended('idgen sequencer', $sequencer, $offset, 1);
	ok($node->log_contains(
			qr/57P01 FATAL:  terminating background worker "idgen sequencer" due to administrator command/,
			$offset),
		'a sequencer waiting for a lock ends at SIGTERM, with 57P01');
	is($locker->query_safe(q{SELECT mode FROM pg_locks
		WHERE relation = 'idgen_seq'::regclass AND pid = pg_backend_pid()}),
		'AccessExclusiveLock', 'the session still holds its lock');
	$locker->query_safe('COMMIT');
	$locker->quit;
	$node->poll_query_until('postgres', q{SELECT idgen_seq_next('cached') > 0})
	  or die 'the key is not served after the sequencer ended';
	pass('the key is served again after it');
}

# The launcher: it ends, and the postmaster starts it again.
{
	my $launcher = pid_of('idgen sequencer launcher');
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
	ended('idgen sequencer launcher', $launcher, $offset, 1);
	$node->wait_for_log(qr/idgen sequencer launcher started/, $offset);
	isnt(pid_of('idgen sequencer launcher'), $launcher, 'the launcher ends at SIGTERM and is started again');
}

# The keeper, waiting for a synchronous standby that does not exist: the
# SIGTERM ends that wait, and the keeper leaves by its own path (exit code
# 1, no FATAL), having stopped generation at what it issued, and a new
# keeper goes on.
{
	my $keeper = $node->safe_psql('postgres', 'SELECT keeper_pid FROM idgen_info()');
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()");
	# The keeper renews the horizon well before it is reached (every 100 ms,
	# a second ahead); one a second behind is one the keeper has waited a
	# second to make durable.
	$node->poll_query_until('postgres', 'SELECT horizon_lead_ms < -1000 FROM idgen_info()')
	  or die 'the keeper does not wait for a synchronous standby';
	kill 'TERM', $keeper or die "kill: $!";
	ended('idgen keeper', $keeper, $offset, 1);
	ok($node->log_contains(
			qr/\[$keeper\] 57P01 WARNING:  canceling the wait for synchronous replication and terminating connection due to administrator command/,
			$offset),
		'the keeper\'s wait for a synchronous standby ends at SIGTERM');
	ok(!$node->log_contains(qr/FATAL:  terminating background worker "idgen keeper"/, $offset),
		'the keeper waiting for a synchronous standby leaves by its own path at SIGTERM, not by a FATAL');
	$node->safe_psql('postgres',
		"ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()");
	$node->poll_query_until('postgres',
		"SELECT keeper_pid IS NOT NULL AND keeper_pid <> $keeper AND horizon_lead_ms > 0 FROM idgen_info()")
	  or die 'no new keeper';
	cmp_ok($node->safe_psql('postgres', 'SELECT idgen_snowflake()'), '>', 0,
		'a new keeper is started, and generation goes on');
}

no_crash_logged($node);
done_testing();
