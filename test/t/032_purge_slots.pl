# Scenario: purges at the limits of background processes.
#
#  - Background worker slots run out: max_worker_processes at its default
#    (8: the idgen keeper, the idgen sequencer launcher and the logical replication
#    launcher leave 5), idgen.max_sequencers 16, and 12 databases
#    whose cached keys are used all the time.  The launcher cannot start
#    every process it is asked for: it says so in one WARNING, not once per
#    try, and every database is still purged (an expired ttl key is
#    deleted in each): a process that has served for idgen.purge_interval
#    gives its slot to a database whose purge waits.
#  - Two databases whose cached keys are used all the time hold both of
#    idgen.max_sequencers = 2 slots: a third database's purge waits,
#    idgen_info() names it while it waits, and it is purged once a process
#    gives its slot.  The two processes are stopped (SIGSTOP) while the
#    launcher asks one of them for its slot, so that the wait lasts long
#    enough to be seen.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $tmp = PostgreSQL::Test::Utils::tempdir();

# A database with the extension and a cached key 'busy'.  use_busy() takes
# a value of 'busy' and swallows a failure (a process stopped by the test
# makes a call wait idgen.seq_cache_wait, then fail).
sub make_database
{
	my ($node, $db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
		CREATE EXTENSION idgen;
		SELECT idgen_seq_configure('busy', cache => 10);
		CREATE FUNCTION use_busy() RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM idgen_seq_next('busy');
		EXCEPTION WHEN object_not_in_prerequisite_state THEN
			NULL;
		END $$;
	});
}

# The busy clients' script, written once.  Written again for each client,
# it could be empty when the client started before read it (each start
# truncated it first): that client exited at once ("empty command list"),
# its database was never busy, and the loop below waited for it in vain.
open my $busy_sql, '>', "$tmp/busy.sql" or die $!;
print $busy_sql "SELECT use_busy();\n";
close $busy_sql or die $!;

# A pgbench client that uses database $db's cached key 5 times a second
# until it is killed.
sub start_busy
{
	my ($node, $db) = @_;
	my $pgbench = $node->installed_command('pgbench');
	return IPC::Run::start([ $pgbench, '-n', '-c', 1, '-R', 5, '-T', 3600, '-f', "$tmp/busy.sql",
			$node->connstr($db) ], '>', "$tmp/busy_$db.out", '2>', "$tmp/busy_$db.err");
}

# A key 'old' with a 1 s ttl, used once: expired a second later, for the
# purge to delete.  Made once the slots are taken, so that no purge before
# can have deleted it.
sub make_expired
{
	my ($node, $db) = @_;
	$node->safe_psql($db, q{SELECT idgen_seq_configure('old', ttl => '1 s'); SELECT idgen_seq_next('old')});
}

# Whether database $db's expired key 'old' has been deleted.
sub purged
{
	my ($node, $db) = @_;
	return $node->poll_query_until($db, q{SELECT count(*) = 0 FROM idgen_seq WHERE key = 'old'});
}

# --- background worker slots run out --------------------------------------
{
	# A process gives its slot to a database whose purge waits once it has
	# served for idgen.purge_interval: 2 s lets the twelve databases take
	# their turns within the test's waits, however slow the machine (a slow
	# one only makes the turns come later; purged() waits for each).
	# Whatever idgen.sequencer_idle is, refused starts go on all the while:
	# twelve databases use their cached keys 5 times a second, with room
	# for 5 processes (one that ends for idgen.sequencer_idle only frees
	# its slot sooner).
	my $node = idgen_node('workers_out',
		'max_connections' => 40,
		'idgen.max_sequencers' => 16,
		'idgen.purge_interval' => "'2s'");
	is($node->safe_psql('postgres', 'SHOW max_worker_processes'), '8', 'max_worker_processes at its default');
	my @dbs = map { "d$_" } 1 .. 12;
	make_database($node, $_) for @dbs;
	my @load = map { start_busy($node, $_) } @dbs;

	ok($node->poll_query_until('postgres', q{SELECT count(*) >= 3 FROM pg_stat_activity
		WHERE backend_type = 'idgen sequencer'}), 'databases have idgen sequencers');
	$node->wait_for_log(qr/could not start an idgen sequencer/);
	pass('the background worker slots ran out');
	make_expired($node, $_) for @dbs;

	# Every database is purged, those whose processes cannot start too.
	for my $db (@dbs)
	{
		ok(purged($node, $db), "$db: its expired key was purged");
	}
	# Refused starts go on all the while (the loads keep asking): said
	# once.
	my $log = slurp_file($node->logfile);
	my $warnings = () = $log =~ /WARNING: .*could not start an idgen sequencer/g;
	is($warnings, 1, 'the launcher said once that it could not start idgen sequencers');
	like($log, qr/DETAIL:  Every background worker slot is taken/, 'and why');

	$_->kill_kill for @load;
	$node->stop;
	no_crash_logged($node, 'background worker slots run out: no crash');
}

# --- two busy databases hold every slot -------------------------------------
{
	# At DEBUG1 each process logs its database's name when it starts (a
	# catalog lookup that, made outside a transaction, crashed it).
	# idgen.purge_interval at 2 s: c's purge comes to wait for a slot every
	# few seconds, so that the loop below soon finds it waiting; nothing
	# below depends on how long a turn takes (while a's and b's processes
	# are stopped, neither can give its slot, whatever the interval).
	my $node = idgen_node('slots_held',
		'log_min_messages' => 'debug1',
		'max_connections' => 20,
		'idgen.max_sequencers' => 2,
		'idgen.purge_interval' => "'2s'");
	make_database($node, $_) for qw(a b c);
	my @load = map { start_busy($node, $_) } qw(a b);
	ok($node->poll_query_until('postgres', q{SELECT count(DISTINCT datname) = 2 FROM pg_stat_activity
		WHERE backend_type = 'idgen sequencer' AND datname IN ('a', 'b')}),
		'a and b have their idgen sequencers: both slots');

	# Stop both while c's purge waits, so that neither can give its slot
	# yet.  With a 2 s idgen.purge_interval the launcher asks for their
	# slots every few seconds (postgres and c wait for their purges), so c
	# is not always waiting, and a process may have given its slot already:
	# then they are let go and stopped again, until c waits and both hold
	# their slots stopped (their keys served from shared memory, which only
	# a running slot of theirs does).  Each try wins when the stop falls
	# while c waits; a slow machine makes fewer of them win, so the tries
	# go on until a deadline rather than for a count.
	my $c_waits = q{SELECT coalesce('c' = ANY (databases_waiting), false)
		AND databases_waiting_since IS NOT NULL FROM idgen_info()};
	my @pids;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		$node->poll_query_until('postgres', qq{SELECT count(DISTINCT datname) = 2 FROM pg_stat_activity
			WHERE backend_type = 'idgen sequencer' AND datname IN ('a', 'b') AND ($c_waits)})
		  or die 'a and b have no processes, or c never waits';
		@pids = split /\n/, $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity
			WHERE backend_type = 'idgen sequencer' AND datname IN ('a', 'b')});
		kill 'STOP', @pids;
		last if @pids == 2
		  && join(',', map { $node->safe_psql($_, q{SELECT served FROM idgen_seq_keys WHERE key = 'busy'}) }
			qw(a b)) eq 'cached,cached'
		  && $node->safe_psql('postgres', $c_waits) eq 't';
		kill 'CONT', @pids;
		@pids = ();
	}
	is(scalar(@pids), 2, 'a\'s and b\'s processes stopped, holding both slots')
	  or diag("no try in $PostgreSQL::Test::Utils::timeout_default s stopped both while c waited");
	make_expired($node, 'c');
	my $log_offset = -s $node->logfile;
	# Until c's key has expired (its 1 s ttl passed since its use, as the
	# purge decides it), so that a purge would delete it: both slots are
	# held by stopped processes meanwhile, so nothing else can.
	$node->poll_query_until('c', q{SELECT last_used + ttl <= now() FROM idgen_seq WHERE key = 'old'})
	  or die "c's key 'old' did not expire";
	is($node->safe_psql('postgres', $c_waits), 't', 'idgen_info() names c, whose purge waits for a slot');
	is($node->safe_psql('c', q{SELECT count(*) FROM idgen_seq WHERE key = 'old'}), '1',
		'c is not purged while both slots are held');
	kill 'CONT', @pids;

	ok(purged($node, 'c'), 'c is purged once a process gives its slot');
	ok($node->log_contains(qr/DEBUG:  idgen sequencer started in database "c"/, $log_offset),
		"by c's own idgen sequencer");
	ok($node->poll_query_until('postgres', q{SELECT NOT ('c' = ANY (coalesce(databases_waiting, '{}')))
		FROM idgen_info()}), 'c is no longer waiting');
	# The databases that gave their slots get processes again at their next
	# cached calls.
	for my $db (qw(a b))
	{
		ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
			WHERE backend_type = 'idgen sequencer' AND datname = '$db'}),
			"$db has an idgen sequencer again");
	}
	ok(!$node->log_contains(qr/could not start an idgen sequencer/),
		'no background worker slot was missing');

	$_->kill_kill for @load;
	$node->stop;
	no_crash_logged($node, 'two busy databases: no crash');
}

done_testing();
