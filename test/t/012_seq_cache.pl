# Scenario: cached per-key sequences (cache => n) under load, crashes and a
# stalled worker.
#
#  - 16 connections over one hot cached key and 200 cold ones, a fifth of
#    the batches rolled back: every key's values distinct, and rising in the
#    order each connection got them.
#  - The same while another session reconfigures the hot key every 5 ms:
#    callers that meet its row being written wait and are served from a
#    new segment, so a rollback gives nothing back.
#  - The same through a SIGKILL crash-restart and an immediate stop: shared
#    memory is lost with its segments, and the new segments start above
#    every reserved value, so nothing repeats.
#  - The worker that reserves segments cannot (the table is locked): callers
#    wait idgen.seq_cache_wait, fail with a clear error, and go on once
#    the table is free.
#  - ttl: a cached key in use does not expire; an idle one is purged, its
#    segments forgotten, and it starts again.
#  - A batch of 1 000 000 values of a cached key while another session
#    reconfigures the key: served whole, distinct and rising.
#  - An entry evicted again and again (16 slots, 40 keys) while another
#    session holds its row: the caller fails with 55000 in bounded time.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IdgenTest;

my $stress = stress_client();
# A database's idgen sequencer stays for the whole test
# (idgen.sequencer_idle of an hour): the test asserts, between its uses of
# cached keys, that a database has its process and that its keys are in
# shared memory, and a process that ended when idle would leave its slot to
# a purge, whose process, attaching, retires the database's entries (the
# next process's first use would then find none).  The last block shortens
# it to see a process end.
my $node = idgen_node(
	'seq_cache',
	'max_connections' => 40,
	'restart_after_crash' => 'on',
	'idgen.purge_interval' => '1s',
	'idgen.sequencer_idle' => '1h',
	'idgen.seq_cache_wait' => 1000);
my $connstr = $node->connstr('postgres');

# Wait for the idgen sequencer of database $db (default postgres),
# which configuring a cached key asks for.
sub wait_for_worker
{
	my ($db) = @_;
	$db //= 'postgres';
	# Asked again at every poll: a slot lent to another database for a
	# purge at that moment refuses the request.
	$node->poll_query_until($db, q{
		SELECT (SELECT count(*) FROM (SELECT idgen_seq_configure('worker:wanted', cache => 1)) c) = 1
		   AND (SELECT count(*) = 1 FROM pg_stat_activity
		        WHERE backend_type = 'idgen sequencer' AND datname = current_database())})
	  or die "the idgen sequencer of database $db did not start";
}

# Before a crash: wait until cached keys are served from shared memory in
# each of @dbs, then until every transaction of the stress clients there
# began after that.  Until a database's sequencer runs, as after the first
# crash, its cached keys are served from their rows, transactionally
# (docs/sequences.md): a crash then gives back the values of the
# transactions it cuts off, and the client, which keeps every value of a
# cached key, would count them twice.  (Shown once with the library not
# preloaded: 40 values counted twice through the two crashes.)
sub served_from_memory
{
	my ($when, @dbs) = @_;
	my $since;
	for my $db (@dbs)
	{
		$node->poll_query_until($db,
			"SELECT served = 'cached' FROM idgen_seq_keys WHERE key = 'hot'")
		  or die "$db: the hot key was not served from shared memory $when";
	}
	$since = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	$node->poll_query_until('postgres', qq{
		SELECT NOT EXISTS (SELECT FROM pg_stat_activity
			WHERE application_name = 'idgen_stress' AND xact_start < '$since')})
	  or die "the stress clients' transactions begun before their keys were cached did not end $when";
}

sub configure_keys
{
	$node->safe_psql('postgres', q{
		DELETE FROM idgen_seq;
		SELECT idgen_seq_configure('hot', cache => 50);
		SELECT idgen_seq_configure('k:' || i, cache => 10) FROM generate_series(1, 200) i;
	});
}

wait_for_worker();

# --- load ------------------------------------------------------------------
{
	configure_keys();
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $stress, '-d', $connstr, '-q', '-c', 16, '-n', 4000, '-b', 20,
			'--keys', 200, '--hot', '0.3', '--rollback', '0.2', '--cached' ], '>', \$out, '2>', \$err);
	note("load:\n$out$err");
	ok($ok, 'load: the stress client passed');
	like($out, qr/\b0 duplicates\b/, 'load: no value served twice');
	like($out, qr/\b0 order violations\b/, "load: each connection's values of a key kept rising");
	my ($hot_served, $hot_value) = split /\|/, $node->safe_psql('postgres',
		"SELECT c.served, s.value FROM idgen_seq_cache c JOIN idgen_seq s USING (key) WHERE key = 'hot'");
	cmp_ok($hot_value, '>=', $hot_served, "load: the table is ahead of the hot key's $hot_served values");
}

# --- load while the hot key is reconfigured ---------------------------------
# The same load while another session reconfigures the hot key every few
# milliseconds: each time its entry is retired, and callers look the key up
# in the table while the sequencer or the reconfiguration writes its row.  A
# caller must then wait and serve from a new segment; a value taken from the
# row would be its transaction's, and a rollback would give it back (about
# 3 000 duplicates and 17 order violations per run before this was fixed).
{
	configure_keys();
	$node->safe_psql('postgres', 'CREATE TABLE reconfigure_stop ()');
	my $reconfigure = $node->background_psql('postgres');
	$reconfigure->query_until(qr/started/, q{
		\echo started
		DO $$
		DECLARE
			n int := 0;
		BEGIN
			WHILE n < 10000 AND NOT EXISTS (SELECT FROM reconfigure_stop) LOOP
				PERFORM idgen_seq_configure('hot', cache => 50);
				COMMIT;
				n := n + 1;
				PERFORM pg_sleep(0.005);
			END LOOP;
			RAISE NOTICE 'reconfigured % times', n;
		END $$;
	});
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $stress, '-d', $connstr, '-q', '-c', 16, '-n', 4000, '-b', 20,
			'--keys', 200, '--hot', '0.3', '--rollback', '0.2', '--cached' ], '>', \$out, '2>', \$err);
	$node->safe_psql('postgres', 'INSERT INTO reconfigure_stop DEFAULT VALUES');
	$reconfigure->query('SELECT 1');
	my ($times) = $reconfigure->{stderr} =~ /reconfigured (\d+) times/;
	$reconfigure->quit;
	$node->safe_psql('postgres', 'DROP TABLE reconfigure_stop');
	note("load while reconfigured ($times times):\n$out$err");
	cmp_ok($times, '>=', 20, 'reconfigured: the hot key was reconfigured while the load ran');
	ok($ok, 'reconfigured: the stress client passed');
	like($out, qr/\b0 duplicates\b/, 'reconfigured: no value served twice, rolled back or not');
	like($out, qr/\b0 order violations\b/, "reconfigured: each connection's values of a key kept rising");
}

# --- crashes -----------------------------------------------------------------
{
	configure_keys();
	my ($out, $err) = ('', '');
	# The client runs 15 s: both crashes, which wait for its connections,
	# fall within it even on a loaded machine.
	my $h = IPC::Run::start([ $stress, '-d', $connstr, '-q', '-c', 8, '-D', 15, '-b', 20,
			'--keys', 50, '--hot', '0.5', '--cached', '--reconnect' ], '>', \$out, '2>', \$err);
	crash_twice($node, 'serving cached values', 8, sub { served_from_memory($_[0], 'postgres') });
	my $passed = $h->finish;
	note("crashes:\n$out$err");
	ok($passed, 'crashes: the stress client passed');
	like($out, qr/\b0 duplicates\b/, 'crashes: no value served twice across both crashes');
	like($out, qr/\b0 order violations\b/, "crashes: each connection's values of a key kept rising");
	my ($reconnects) = $out =~ /(\d+) reconnects/;
	cmp_ok($reconnects // 0, '>=', 8, "crashes: the connections were lost and came back ($reconnects)");
}

# --- two databases ------------------------------------------------------------
# Cached keys in two more databases, with no setting changed: each database
# gets its own idgen sequencer, its keys are served from shared memory,
# and under load through a crash-restart and an immediate stop no value of
# either repeats.
{
	for my $db ('one', 'two')
	{
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, q{CREATE EXTENSION idgen;
			SELECT idgen_seq_configure('hot', cache => 50);
			SELECT idgen_seq_configure('k:' || i, cache => 10) FROM generate_series(1, 50) i});
		wait_for_worker($db);
	}
	for my $db ('one', 'two')
	{
		$node->safe_psql($db, "SELECT idgen_seq_next('hot') FROM generate_series(1, 100)");
		is($node->safe_psql($db, "SELECT served FROM idgen_seq_keys WHERE key = 'hot'"),
			'cached', "$db: idgen_seq_keys says the hot key is cached");
		is($node->safe_psql($db, "SELECT served, fetches > 0 FROM idgen_seq_cache WHERE key = 'hot'"),
			'100|t', "$db: idgen_seq_cache shows its 100 values served from shared memory");
	}
	is($node->safe_psql('postgres', q{SELECT string_agg(datname, ',' ORDER BY datname)
			FROM pg_stat_activity WHERE backend_type = 'idgen sequencer' AND datname IN ('one', 'two')}),
		'one,two', 'a process per database with cached keys in use');
	my (%h, %out);
	for my $db ('one', 'two')
	{
		$out{$db} = '';
		$h{$db} = IPC::Run::start([ $stress, '-d', $node->connstr($db), '-q', '-c', 4, '-D', 15, '-b', 20,
				'--keys', 50, '--hot', '0.5', '--cached', '--reconnect' ], '>', \$out{$db}, '2>&1');
	}
	crash_twice($node, 'serving cached values in two databases', 8,
		sub { served_from_memory($_[0], 'one', 'two') });
	for my $db ('one', 'two')
	{
		my $passed = $h{$db}->finish;
		note("two databases, $db:
$out{$db}");
		ok($passed, "$db: the stress client passed");
		like($out{$db}, qr/\b0 duplicates\b/, "$db: no value served twice across both crashes");
		like($out{$db}, qr/\b0 order violations\b/, "$db: each connection's values of a key kept rising");
		# The client may end before the launcher, on a loaded machine, has
		# started this database's process again: its next use does.
		wait_for_worker($db);
		is($node->safe_psql($db, "SELECT served FROM idgen_seq_keys WHERE key = 'hot'"),
			'cached', "$db: cached again after the restarts");
	}
	# The process that started after the restarts retired, as it attached,
	# the entries installed before it; the client may have ended by then,
	# leaving none.  A use now, with the process running, serves the key
	# from shared memory.
	$node->safe_psql('one', "SELECT idgen_seq_next('hot')");
	cmp_ok($node->safe_psql('one', "SELECT count(*) FROM idgen_seq_cache"), '>', 0,
		'one: its keys are in shared memory after the restarts');
}

# --- the sequencer cannot reserve -------------------------------------------
{
	wait_for_worker();
	$node->safe_psql('postgres', "SELECT idgen_seq_configure('slow', cache => 1)");
	$node->safe_psql('postgres', "SELECT idgen_seq_next('slow') FROM generate_series(1, 5)");
	my $locker = $node->background_psql('postgres');
	$locker->query_safe('BEGIN; LOCK TABLE idgen_seq IN ACCESS EXCLUSIVE MODE');
	# More values than the two segments reserved ahead can hold (segments of
	# a key with cache => 1 grow to 1024 values at most).
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT count(idgen_seq_next('slow')) FROM generate_series(1, 5000)");
	isnt($ret, 0, 'with the table locked, a caller that needs a segment fails');
	like($stderr, qr/55000: could not get a segment for cached sequence key "slow" in time/,
		'the error says what happened');
	like($stderr, qr/"idgen.seq_cache_wait" \(1000 ms\)/, 'and how long it waited');
	$locker->query_safe('COMMIT');
	$locker->quit;
	my $next = $node->safe_psql('postgres', "SELECT idgen_seq_next('slow')");
	cmp_ok($next, '>', 5, "once the table is free, the key goes on ($next)");
}

# --- ttl ---------------------------------------------------------------------
# A cached key's use is recorded in its row at each reservation and each
# purge run (every second here), so it expires between its ttl and its ttl
# plus idgen.purge_interval after its last use, and not while it is used,
# even when its segment outlasts the ttl.
# (Each use is a new psql, which a loaded machine can hold up: the ttl is
# 2 s, and a round whose uses were ever 2 s apart proves nothing and is
# made again, with a key of its own.)
{
	wait_for_worker();
	$node->safe_psql('postgres', q{
		SELECT idgen_seq_configure('idle', cache => 1000, ttl => '2 s');
		SELECT idgen_seq_next('idle');
	});
	my ($last, $rising, $gap, $key);
	for my $round (1 .. 3)
	{
		$key = "busy$round";
		$node->safe_psql('postgres', "SELECT idgen_seq_configure('$key', cache => 1000, ttl => '2 s')");
		($last, $rising, $gap) = (0, 1, 0);
		my $before = Time::HiRes::time();
		for (1 .. 20)
		{
			my $v = $node->safe_psql('postgres', "SELECT idgen_seq_next('$key')");
			my $now = Time::HiRes::time();
			$gap = $now - $before if $now - $before > $gap;
			$before = $now;
			$rising &&= $v > $last;
			$last = $v;
			select(undef, undef, undef, 0.25);
		}
		last if $gap < 2;
		diag(sprintf('uses of %s were %.2f s apart at most: again', $key, $gap));
	}
	cmp_ok($gap, '<', 2, 'a round of uses less than the ttl apart');
	ok($rising, sprintf('a cached key used every 0.25 s for 5 s with a 2 s ttl kept going (up to %d; uses at most %.2f s apart)',
		$last, $gap));
	is($node->safe_psql('postgres', "SELECT count(*) FROM idgen_seq WHERE key = '$key'"),
		'1', 'the purge left the key in use alone');
	# 'idle' was used once, 5 s ago or more: past its ttl plus the purge
	# interval.
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idgen_seq WHERE key = 'idle'")
	  or die 'the idle cached key was not purged';
	pass('the purge deleted the idle cached key');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM idgen_seq_cache WHERE key = 'idle'"),
		'0', 'and forgot its cached segments');
	is($node->safe_psql('postgres', "SELECT idgen_seq_next('idle')"),
		'1', 'the expired key starts again, as a new (transactional) key');
}

# --- a batch while its key is reconfigured --------------------------------
# One call takes 1 000 000 values of a key cached in segments of 1 (a
# thousand and more segments, a few seconds) while another session
# reconfigures the key, again and again: the entry the batch is served from
# is retired under it.  The rest of the batch comes from the table, whose
# value is above every segment: 1 000 000 distinct values, rising, and no
# error (it was "XX000: cached sequence key ... changed while a batch was
# served" in 4 tries of 5).
{
	$node->safe_psql('postgres', "SELECT idgen_seq_configure('reconf', cache => 1)");
	for my $try (1 .. 3)
	{
		my $batch = $node->background_psql('postgres');
		$batch->query_until(qr/started/, q{
			\echo started
			SELECT count(DISTINCT v) || ' ' || count(*) || ' ' ||
			       bool_and(v > prev OR prev IS NULL) AS result
			FROM (SELECT v, lag(v) OVER (ORDER BY n) AS prev
			      FROM idgen_seq_next('reconf', 1000000) WITH ORDINALITY AS t(v, n)) s;
		});
		for my $i (1 .. 20)
		{
			$node->safe_psql('postgres',
				"SELECT idgen_seq_configure('reconf', cache => " . (1 + $i % 2) . ")");
			select(undef, undef, undef, 0.1);
		}
		my ($out) = $batch->query('SELECT 1');
		$batch->quit;
		like($out, qr/^1000000 1000000 true$/m,
			"try $try: a batch of 1 000 000 values served while its key was reconfigured 20 times: distinct and rising");
	}
}

# --- a batch while its key is dropped ------------------------------------
# The same, but the other session drops the key: the rest of the batch,
# from the table, would restart below what the batch already holds.  The
# batch then fails as a serialization failure (40001, call again), never
# returns a value twice.
{
	$node->safe_psql('postgres', "SELECT idgen_seq_configure('dropped', cache => 1)");
	my $batch = $node->background_psql('postgres', on_error_stop => 0);
	$batch->query_until(qr/started/, q{
		\set VERBOSITY verbose
		\echo started
		SELECT count(DISTINCT v) || ' ' || count(*) AS result FROM idgen_seq_next('dropped', 1000000) v;
	});
	for my $i (1 .. 20)
	{
		$node->safe_psql('postgres',
			"SELECT idgen_seq_drop('dropped'); SELECT idgen_seq_configure('dropped', cache => 1)");
		select(undef, undef, undef, 0.1);
	}
	my ($out) = $batch->query('SELECT 1');
	my $err = $batch->{stderr};
	$batch->quit;
	ok($out =~ /^1000000 1000000$/m
		  || $err =~ /40001: per-key sequence key "dropped" was set back while a batch of it was served/,
		'a batch while its key is dropped: all values distinct, or 40001 and no value at all')
	  or diag("output: $out\nerror: $err");
}

# --- an entry evicted again and again ---------------------------------------
# With room for 16 cached keys and 40 in use, a caller's entry is evicted
# before its first segment comes; it is installed again, and the caller
# fails after idgen.seq_cache_wait rather than take a value from the row
# (which would be its transaction's, given back by a rollback).  Here
# another session holds the key's row (FOR UPDATE), so the sequencer can never
# reserve for it: the call must end with 55000 in bounded time, not wait
# for that session (it did, after three evictions, until the session ended).
{
	$node->append_conf('postgresql.conf', 'idgen.seq_cache_keys = 16');
	$node->restart;
	wait_for_worker();
	$node->safe_psql('postgres', q{
		SELECT idgen_seq_configure('pinned', cache => 1);
		SELECT idgen_seq_configure('churn:' || i, cache => 1) FROM generate_series(1, 40) i;
	});
	my $holder = $node->background_psql('postgres');
	$holder->query_safe(q{BEGIN; SELECT 1 FROM idgen_seq WHERE key = 'pinned' FOR UPDATE});

	# Other keys, one statement each (a statement's start is its use, for
	# the least-recently-used choice), round and round the 40.
	my $script = PostgreSQL::Test::Utils::tempdir() . '/churn.sql';
	open my $fh, '>', $script or die "$script: $!";
	print $fh "SELECT idgen_seq_next('churn:" . ($_ % 40 + 1) . "');\n" for 1 .. 20000;
	close $fh;
	my $churn = IPC::Run::start([ 'psql', '-X', '-q', '-o', '/dev/null', '-d', $connstr, '-f', $script ]);
	$node->poll_query_until('postgres', q{SELECT count(*) >= 16 FROM idgen_seq_cache WHERE key LIKE 'churn:%'})
	  or die 'the churn did not start';

	my $t0 = time();
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"SET statement_timeout = '20s';\n\\set VERBOSITY verbose\nSELECT idgen_seq_next('pinned')");
	my $took = time() - $t0;
	$churn->kill_kill;
	isnt($ret, 0, 'evicted again and again, its row held: the call fails');
	like($stderr, qr/55000: could not get a segment for cached sequence key "pinned" in time/,
		'evicted again and again: the segment error, not a wait for the row');
	cmp_ok($took, '<', 10, sprintf('evicted again and again: it failed after %.1f s', $took));
	$holder->query_safe('COMMIT');
	$holder->quit;
	cmp_ok($node->safe_psql('postgres', "SELECT idgen_seq_next('pinned')"), '>', 0,
		'once the row is free, the key is served');
}

# --- more databases than processes -------------------------------------------
# With idgen.max_sequencers = 1, the database that asks first gets
# the process; another's cached keys are served from their rows, and it is
# said: a NOTICE when a key is configured, the reason in idgen_seq_keys,
# and the refusal counted in idgen_info().  Once the first database's keys
# have gone unused for idgen.sequencer_idle, its process ends, and
# the other database's next use gets one.
# (The process of database one stays, idgen.sequencer_idle being an hour,
# while the second database is refused; the setting, reloaded, is then
# made 1 s so that it ends.  No purge asks it for its slot: an hour apart.)
{
	$node->append_conf('postgresql.conf',
		"idgen.max_sequencers = 1\nidgen.purge_interval = '1h'");
	$node->restart;
	$node->safe_psql('one', "SELECT idgen_seq_configure('hot', cache => 50)");
	wait_for_worker('one');
	$node->safe_psql('one', "SELECT idgen_seq_next('hot')");
	my ($ret, $stdout, $stderr) = $node->psql('two', "SELECT idgen_seq_configure('hot', cache => 50)");
	like($stderr, qr/NOTICE:  sequence key "hot" is served transactionally in this database, not from shared memory/,
		'one process, two databases: configuring a cached key in the second raises a NOTICE');
	like($stderr, qr/all 1 idgen sequencers \(idgen.max_sequencers\) serve other databases/,
		'which says why');
	is($node->safe_psql('two', "SELECT served FROM idgen_seq_keys WHERE key = 'hot'"),
		'transactional: all 1 idgen sequencers (idgen.max_sequencers) serve other databases',
		'one process, two databases: idgen_seq_keys says why the second database serves it transactionally');
	is($node->safe_psql('two', q{BEGIN; SELECT idgen_seq_next('hot') > 0; ROLLBACK;
			SELECT idgen_seq_next('hot') = idgen_seq_current('hot')}),
		"t\nt", 'one process, two databases: the key works, transactionally');
	is($node->safe_psql('two', q{SELECT sequencers, max_sequencers, sequencers_refused > 0
			FROM idgen_info()}),
		'1|1|t', 'idgen_info() counts the process and the refusals');
	# The first database's process ends once its keys have gone unused.
	$node->append_conf('postgresql.conf', "idgen.sequencer_idle = '1s'");
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'idgen sequencer' AND datname = 'one'")
	  or die 'the idle process of database one did not end';
	pass('the process of a database whose cached keys went unused ended');
	# Used at every poll: the process it gets ends after a second unused.
	$node->poll_query_until('two', q{
		SELECT (SELECT count(*) FROM (SELECT idgen_seq_next('hot')) n) = 1
		   AND (SELECT served = 'cached' FROM idgen_seq_keys WHERE key = 'hot')})
	  or die 'database two did not get the process';
	pass('the other database\'s next use of its cached key got the free process');
}

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
