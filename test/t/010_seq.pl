# Scenario: per-key sequences under load and over time.  The purge worker
# deletes keys whose ttl has passed without anyone calling anything, and
# leaves keys in use alone; the libpq stress client runs many connections
# over a mix of one hot key and many cold keys, committing most batches and
# rolling some back, and checks that each key's committed values are exactly
# 1, 2, 3, ... (distinct and gap-free).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use IdgenTest;

# Purges every second, whatever the clusters' default: the test waits for
# them (expired keys deleted, in every database), and checks what they
# leave alone.
my $node = idgen_node('seq', 'idgen.purge_interval' => '1s', 'max_connections' => 30,
	'max_prepared_transactions' => 2);

# (The launcher may log after the first connection is served.)
ok($node->wait_for_log(qr/LOG:  idgen sequencer launcher started/), 'the idgen sequencer launcher started');

# Keys with a 1 s ttl, one of them kept in use; and a key without ttl.  The
# key in use is called from one session every 0.25 s, at least 8 times and
# until the purge has deleted the 100 others; the last call and the reading
# of the table are one transaction, which holds the key's row (the purge
# skips it).  A loaded machine can hold a call up: a round whose calls were
# ever 1 s apart (from the start of one to the end of the next) proves
# nothing, and is made again with a key of its own.
$node->safe_psql('postgres', q{
	SELECT idgen_seq_configure('k' || g, ttl => '1 s') FROM generate_series(1, 100) g;
	SELECT idgen_seq_next('forever');
});
my ($busy, $busy_calls, $busy_gap, $keys_left, $busy_table);
my $user = $node->background_psql('postgres');
for my $round (1 .. 3)
{
	$busy = "busy$round";
	my $last_start = Time::HiRes::time();
	$user->query_safe("SELECT idgen_seq_configure('$busy', ttl => '1 s')");
	($busy_calls, $busy_gap, $keys_left) = (0, 0, 1);
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while ($busy_calls < 8 || $keys_left)
	{
		die 'expired keys were not purged' if time() > $deadline;
		select(undef, undef, undef, 0.25);
		my $start = Time::HiRes::time();
		$user->query_safe("SELECT idgen_seq_next('$busy')");
		$busy_calls++;
		my $end = Time::HiRes::time();
		$busy_gap = $end - $last_start if $end - $last_start > $busy_gap;
		$last_start = $start;
		$keys_left = $user->query_safe("SELECT count(*) FROM idgen_seq WHERE key LIKE 'k%'");
	}
	pass('the purge worker deleted the 100 expired keys') if $round == 1;
	select(undef, undef, undef, 0.25);
	my $table = $user->query_safe(qq{BEGIN;
		SELECT count(*) FROM (SELECT idgen_seq_next('$busy')) n;
		SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM idgen_seq
		WHERE key !~ '^busy' OR key = '$busy';
		COMMIT});
	$busy_calls++;
	my $end = Time::HiRes::time();
	$busy_gap = $end - $last_start if $end - $last_start > $busy_gap;
	$busy_table = (split /\n/, $table)[1];
	last if $busy_gap < 1;
	diag(sprintf('calls of %s were %.2f s apart at most: again', $busy, $busy_gap));
}
$user->quit;
cmp_ok($busy_gap, '<', 1, 'a round of calls of the key in use less than its ttl apart');
is($busy_table, "$busy=$busy_calls,forever=1",
	sprintf('keys in use (%d calls, at most %.2f s apart), and keys without ttl, were left alone',
		$busy_calls, $busy_gap));

# Every database is purged, not only one: the launcher lends a database
# without an idgen sequencer one for a purge, every idgen.purge_interval.
{
	$node->safe_psql('postgres', 'CREATE DATABASE elsewhere');
	$node->safe_psql('elsewhere', q{CREATE EXTENSION idgen;
		SELECT idgen_seq_configure('e' || g, ttl => '1 s') FROM generate_series(1, 10) g;
		SELECT idgen_seq_next('kept')});
	$node->poll_query_until('elsewhere', "SELECT count(*) = 1 FROM idgen_seq")
	  or die 'the expired keys of database elsewhere were not purged';
	is($node->safe_psql('elsewhere', 'SELECT key FROM idgen_seq'), 'kept',
		'another database: its expired keys were purged, and its key without ttl kept');
	# (A process lent to it for a purge, every second, may be connected.)
	$node->safe_psql('postgres', 'DROP DATABASE elsewhere WITH (FORCE)');
}

# A purge skips an expired row another transaction holds (so it never makes
# a caller wait, nor deadlocks with one), and deletes it once released.
{
	$node->safe_psql('postgres',
		"SELECT idgen_seq_configure('held', ttl => '1 s'), idgen_seq_configure('free', ttl => '1 s')");
	my $holder = $node->background_psql('postgres');
	$holder->query_safe("BEGIN; SELECT key FROM idgen_seq WHERE key = 'held' FOR UPDATE");
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idgen_seq WHERE key = 'free'")
	  or die 'the free expired key was not purged';
	is($node->safe_psql('postgres',
			"SET lock_timeout = '5s'; SELECT idgen_seq_purge(), (SELECT count(*) FROM idgen_seq WHERE key = 'held')"),
		'0|1', 'purge: the sequencer and idgen_seq_purge() skip the held row without waiting');
	$holder->query_safe('COMMIT');
	$holder->quit;
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idgen_seq WHERE key = 'held'")
	  or die 'the released key was not purged';
	pass('purge: the row is deleted once released');
}

# A session left idle in its transaction holds the rows of the keys it
# used.  The administrative functions wait for such a row at most
# lock_timeout, or 5 s when it is 0, then fail (55P03) naming the holder,
# and change nothing; idgen_seq_next waits like UPDATE, bounded only by the
# caller's own lock_timeout.  Each case runs under a statement_timeout of
# 20 s, so that a wait without bound fails the test instead of hanging it.
{
	$node->safe_psql('postgres',
		"SELECT idgen_seq_configure('held:old', step => 3), idgen_seq_set('held:old', 30)");
	my $holder = $node->background_psql('postgres');
	my $pid = $holder->query_safe('SELECT pg_backend_pid()');
	my %admin = (
		drop => "SELECT idgen_seq_drop('%s')",
		set => "SELECT idgen_seq_set('%s', 7)",
		set_if_absent => "SELECT idgen_seq_set_if_absent('%s', 7)",
		configure => "SELECT idgen_seq_configure('%s', step => 1)");
	my $bounded = sub {
		my ($what, $key, $lock_timeout, $min, $max) = @_;
		my $sql = sprintf($admin{$what}, $key);
		my $start = Time::HiRes::time();
		my $err = sql_error($node,
			"SET statement_timeout = '20s';\nSET lock_timeout = '$lock_timeout';\n$sql;");
		my $waited = Time::HiRes::time() - $start;
		note($err);
		like($err, qr/ERROR:  55P03: sequence key "\Q$key\E" is locked by another transaction/,
			"$what of a held key, lock_timeout $lock_timeout: fails with 55P03");
		like($err, qr/DETAIL:  Process $pid holds the key's row/, "$what: the detail names the holder");
		like($err, qr/HINT:  .*idle_in_transaction_session_timeout/, "$what: the hint names the remedy");
		ok($waited >= $min && $waited < $max,
			sprintf('%s: gave up after %.2f s (expected %.1f to %.1f s)', $what, $waited, $min, $max));
	};

	# The holder advanced an existing key: its row is updated, not committed.
	$holder->query_safe("BEGIN; SELECT idgen_seq_next('held:old')");
	$bounded->($_, 'held:old', '200ms', 0.2, 3) for sort keys %admin;
	# lock_timeout 0: the bound of 5 s.
	$bounded->('drop', 'held:old', '0', 5, 12);
	# A caller of the key is not bounded by idgen: its own lock_timeout
	# gives the usual error.
	like(sql_error($node, "SET lock_timeout = '200ms';\nSELECT idgen_seq_next('held:old');"),
		qr/ERROR:  55P03: canceling statement due to lock timeout/,
		'idgen_seq_next of a held key: bounded by the caller\'s lock_timeout');
	$holder->query_safe('ROLLBACK');
	is($node->safe_psql('postgres',
			"SELECT value || ',' || step FROM idgen_seq WHERE key = 'held:old'"),
		'30,3', 'a held key: nothing changed by the functions that gave up');

	# The holder created a key (an insert in progress), and then one that
	# only locks the row (set_if_absent of an existing key writes nothing).
	$holder->query_safe("BEGIN; SELECT idgen_seq_next('held:new')");
	$bounded->('set', 'held:new', '200ms', 0.2, 3);
	$holder->query_safe('COMMIT');
	$holder->query_safe("BEGIN; SELECT idgen_seq_set_if_absent('held:old', 1)");
	$bounded->('configure', 'held:old', '200ms', 0.2, 3);
	$holder->query_safe('COMMIT');
	is($node->safe_psql('postgres',
			"SELECT string_agg(key || '=' || value || ',' || step, ' ' ORDER BY key) FROM idgen_seq WHERE key LIKE 'held:%'"),
		'held:new=1,1 held:old=30,3', 'keys held by an insert or a lock: nothing changed');
	is($node->safe_psql('postgres',
			"SET lock_timeout = '200ms'; SELECT idgen_seq_drop('held:old'), idgen_seq_drop('held:new')"),
		't|t', 'once the holder ended, the functions go on');
	$holder->quit;
}

{
	my $stress = stress_client();
	my ($stdout, $stderr);

	for my $case ([ 'mixed keys', '--keys', 200, '--hot', '0.2' ],
		[ 'one hot key', '--keys', 1, '--hot', '1' ])
	{
		my ($name, @args) = @$case;
		# Each run checks its keys start at 1.
		$node->safe_psql('postgres', 'DELETE FROM idgen_seq');
		IPC::Run::run([ $stress, '-d', $node->connstr('postgres'), '-q', '-c', 8, '-n', 2000,
				'-b', 20, '--rollback', '0.2', @args ], '>', \$stdout, '2>', \$stderr);
		note("$name:\n$stdout$stderr");
		like($stdout, qr/\b0 duplicates, 0 gaps\b/, "$name: committed values distinct and gap-free per key");
		like($stdout, qr/PASS/, "$name: stress client passed");
	}
}

# The stress client's 4 connections making $calls values each over 50 new
# keys, one value per transaction, while REINDEX INDEX CONCURRENTLY of the
# primary key runs again and again; its output, and how many REINDEXes ran.
sub stress_beside_reindex
{
	my ($calls) = @_;
	my ($stdout, $stderr) = ('', '');
	$node->safe_psql('postgres', 'DELETE FROM idgen_seq');
	my $h = IPC::Run::start([ stress_client(), '-d', $node->connstr('postgres'), '-q', '-c', 4, '-n', $calls,
			'-b', 1, '--keys', 50, '--hot', '0' ], '>', \$stdout, '2>', \$stderr);
	my $reindexed = 0;
	while ($h->pumpable)
	{
		$node->safe_psql('postgres', 'REINDEX INDEX CONCURRENTLY idgen_seq_pkey');
		$reindexed++;
		$h->pump_nb;
	}
	$h->finish;
	return ($stdout, $stderr, $reindexed);
}

# Indexes rebuilt while callers write: the rows are updated directly, and a
# version that is not heap-only must reach the index being built as well.
{
	$node->safe_psql('postgres', 'CREATE EXTENSION amcheck');
	my ($stdout, $stderr, $reindexed) = stress_beside_reindex(15000);
	note("during REINDEX CONCURRENTLY:\n$stdout$stderr");
	cmp_ok($reindexed, '>=', 3, "REINDEX CONCURRENTLY ran $reindexed times while callers wrote");
	like($stdout, qr/\b0 duplicates, 0 gaps\b/, 'REINDEX CONCURRENTLY: values distinct and gap-free per key');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM (SELECT bt_index_parent_check('idgen_seq_pkey', heapallindexed => true)) c"),
		'1', 'REINDEX CONCURRENTLY: the rebuilt primary key has every row');
}

# New sessions while REINDEX CONCURRENTLY commits: a session's first call
# opens the table with cold caches, and its catalog lookups take in the
# REINDEX's changes to the table while it checks the table (see
# 041_seq_open_inval.pl, which stops a session at that point).  Rounds of 4
# new connections creating 50 keys beside a REINDEX loop: before the table
# was checked that way, a round in 60 to 300 failed with "table "idgen_seq"
# has been altered".
{
	my @failed;
	my $rounds = 100;
	for my $round (1 .. $rounds)
	{
		my ($stdout, $stderr) = stress_beside_reindex(300);
		push @failed, "round $round:\n$stdout$stderr" unless $stdout =~ /\b0 duplicates, 0 gaps\b/ && $stdout =~ /\bPASS\b/;
	}
	is(scalar(@failed), 0, "new sessions beside REINDEX CONCURRENTLY: $rounds rounds of 4 connections creating 50 keys, every value distinct and gap-free")
	  or diag(join("\n", @failed));
}

# New keys inserted by racing callers while REINDEX CONCURRENTLY's new index
# is ready for inserts but not yet valid: only the primary key arbitrates
# ON CONFLICT, so the new index would report the later of two inserts of a
# key as a unique violation ("idgen_seq_pkey_ccnew") unless inserts of a
# key take turns.  A transaction with an old snapshot keeps the REINDEX
# waiting in that state; 8 pgbench clients then call a key that changes
# every millisecond, so most keys are new to several clients at once.
{
	my $pgbench = $node->installed_command('pgbench');
	my $tmp = PostgreSQL::Test::Utils::tempdir();
	$node->safe_psql('postgres', 'DELETE FROM idgen_seq; CREATE TABLE calls (key text, value bigint)');
	my ($held, $release) = hold_reindex($node, 'idgen_seq_pkey');

	open my $fh, '>', "$tmp/new_keys.sql" or die $!;
	print $fh q{INSERT INTO calls SELECT k, idgen_seq_next(k) FROM }
	  . q{(SELECT 'ms:' || (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS k) s;} . "\n";
	close $fh;
	my ($out, $err) = ('', '');
	my $clean = IPC::Run::run([ $pgbench, '-n', '-c', 8, '-j', 2, '-T', 3, '-f', "$tmp/new_keys.sql",
			$node->connstr('postgres') ], '>', \$out, '2>', \$err);
	my @aborted = ($err =~ /(.*aborted.*)/g);
	ok($clean && !@aborted, 'new keys during REINDEX CONCURRENTLY: no client failed')
	  or diag(scalar(@aborted) . " of 8 clients aborted:\n" . join("\n", @aborted) . "\n$err");
	is($node->safe_psql('postgres', $held), 't',
		'new keys during REINDEX CONCURRENTLY: the new index was ready and not valid throughout');
	my ($calls, $keys, $raced) = split /\|/, $node->safe_psql('postgres', q{
		SELECT sum(n), count(*), count(*) FILTER (WHERE n > 1)
		FROM (SELECT count(*) AS n FROM calls GROUP BY key) c});
	cmp_ok($raced, '>=', 10, "new keys during REINDEX CONCURRENTLY: $calls calls, $keys keys, $raced called by more than one client");
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM (SELECT key FROM calls GROUP BY key
			HAVING count(DISTINCT value) <> count(*) OR min(value) <> 1 OR max(value) <> count(*)) bad}),
		'0', 'new keys during REINDEX CONCURRENTLY: each key\'s values are 1, 2, 3, ... once each');

	$release->();
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM (SELECT bt_index_parent_check('idgen_seq_pkey', heapallindexed => true)) c"),
		'1', 'new keys during REINDEX CONCURRENTLY: the rebuilt primary key has every row');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM idgen_seq'), $keys,
		'new keys during REINDEX CONCURRENTLY: one row per key');
	$node->safe_psql('postgres', 'DROP TABLE calls');
}

# Another unique index on the key that decides differently which keys are
# equal (a nondeterministic collation): inserting 'ABC' meets the row of
# 'abc' there, and the primary key finds no row of 'ABC'.  The call fails
# with the reason rather than go round for ever.
{
	$node->safe_psql('postgres', q{CREATE DATABASE utf8 TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'});
	$node->safe_psql('utf8', q{
		CREATE EXTENSION idgen;
		CREATE COLLATION case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
		CREATE UNIQUE INDEX idgen_seq_key_ci ON idgen_seq (key COLLATE case_insensitive);
		SELECT idgen_seq_next('abc');
	});
	my ($ret, $stdout, $stderr) = $node->psql('utf8',
		"SET statement_timeout = '20s';\n\\set VERBOSITY verbose\nSELECT idgen_seq_next('ABC')");
	like($stderr, qr/ERROR:  55000: could not create sequence key "ABC"/,
		'a unique index with another notion of equal keys: the call fails (it looped until cancelled)');
	like($stderr, qr/HINT:  Drop any other unique index on table "idgen_seq"/, 'with a hint');
	# (A process lent to it for a purge, every second, may be connected.)
	$node->safe_psql('postgres', 'DROP DATABASE utf8 WITH (FORCE)');
}

# A purge that fails (here a trigger refuses the DELETE) is rolled back in
# its subtransaction and logged as a WARNING; the process goes on, and
# purges once the cause is gone.
{
	$node->safe_psql('postgres', q{
		SELECT idgen_seq_configure('doomed', ttl => '1 s');
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'no deletes today'; END $$;
		CREATE TRIGGER refuse BEFORE DELETE ON idgen_seq FOR EACH ROW EXECUTE FUNCTION refuse();
	});
	my $offset = -s $node->logfile;
	ok($node->wait_for_log(qr/WARNING:  the idgen sequencer could not run public\.idgen_seq_purge\(\)/, $offset),
		'a failing purge: a WARNING names it');
	ok($node->log_contains(qr/DETAIL:  no deletes today/, $offset), 'with the error as its detail');
	is($node->safe_psql('postgres', "SELECT count(*) FROM idgen_seq WHERE key = 'doomed'"), '1',
		'a failing purge: nothing deleted');
	$node->safe_psql('postgres', 'DROP TRIGGER refuse ON idgen_seq; DROP FUNCTION refuse()');
	$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM idgen_seq WHERE key = 'doomed'")
	  or die 'the purge did not go on';
	pass('a failing purge: the process went on and purged once the trigger was gone');
}

# The rows are written straight to the heap (no SQL executor): a crash must
# lose nothing committed, and the keys go on from where they were.
{
	my $before = $node->safe_psql('postgres', 'SELECT key, value FROM idgen_seq ORDER BY key');
	isnt($before, '', 'keys exist before the crash');
	$node->safe_psql('postgres', 'CHECKPOINT');
	$node->safe_psql('postgres',
		"SELECT idgen_seq_next('after-checkpoint:' || i) FROM generate_series(1, 100) i");
	$node->safe_psql('postgres',
		"SELECT idgen_seq_next('after-checkpoint:' || (i % 100 + 1)) FROM generate_series(1, 900) i");
	$before = $node->safe_psql('postgres', 'SELECT key, value FROM idgen_seq ORDER BY key');
	$node->stop('immediate');
	$node->start;
	is($node->safe_psql('postgres', 'SELECT key, value FROM idgen_seq ORDER BY key'),
		$before, 'crash recovery: every committed value is back');
	is($node->safe_psql('postgres',
			"SELECT idgen_seq_next('after-checkpoint:7'), idgen_seq_current('after-checkpoint:7')"),
		'11|11', 'crash recovery: a key goes on from its committed value');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM generate_series(1, 100) i "
			  . "WHERE idgen_seq_next('after-checkpoint:' || i) = CASE i WHEN 7 THEN 12 ELSE 11 END"),
		'100', 'crash recovery: the primary key finds every key');
}

# A transaction's calls on a key after its first are advanced in memory and
# the row written once more before commit (seq_held.c).  Across a crash: a
# committed transaction's last value is there, an open transaction's values
# are given back, and a prepared transaction keeps its rows (written at
# PREPARE) until COMMIT PREPARED.
{
	$node->safe_psql('postgres',
		"SELECT count(idgen_seq_next('held:committed')) FROM generate_series(1, 10000)");
	my $open = $node->background_psql('postgres');
	$open->query_safe(q{BEGIN;
		SELECT count(idgen_seq_next('held:committed')) FROM generate_series(1, 5000);
		SELECT count(idgen_seq_next('held:open')) FROM generate_series(1, 5000)});
	$node->safe_psql('postgres', q{BEGIN;
		SELECT count(idgen_seq_next('held:prepared')) FROM generate_series(1, 3000);
		PREPARE TRANSACTION 'held'});
	$node->stop('immediate');
	eval { $open->quit };
	$node->start;
	is($node->safe_psql('postgres', q{SELECT idgen_seq_current('held:committed'),
			idgen_seq_current('held:open') IS NULL, idgen_seq_current('held:prepared') IS NULL}),
		'10000|t|t', 'crash: a committed transaction\'s last value is back, an open one\'s values are not');
	$node->safe_psql('postgres', "COMMIT PREPARED 'held'");
	is($node->safe_psql('postgres',
			"SELECT idgen_seq_next('held:committed'), idgen_seq_next('held:prepared'), idgen_seq_next('held:open')"),
		'10001|3001|1', 'crash: COMMIT PREPARED afterwards commits the prepared transaction\'s values');
}

# More databases than idgen sequencers: a round lends the one slot to
# each database in turn, as it comes free, so every database is purged in
# the round the server starts with (the next is an hour away).
{
	$node->append_conf('postgresql.conf',
		"idgen.max_sequencers = 1\nidgen.purge_interval = '1h'");
	# The launcher lists the round's databases as it starts, right after it
	# says so: only then are the three made, so that none is in that round.
	my $offset = -s $node->logfile;
	$node->restart;
	$node->wait_for_log(qr/LOG:  idgen sequencer launcher started/, $offset);
	for my $db ('p1', 'p2', 'p3')
	{
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, q{CREATE EXTENSION idgen;
			SELECT idgen_seq_configure('e' || g, ttl => '1 s') FROM generate_series(1, 5) g});
	}
	sleep 2;
	is($node->safe_psql('p3', 'SELECT count(*) FROM idgen_seq'), '5',
		'one slot, three databases: nothing purged before the round');
	$node->restart;
	for my $db ('p1', 'p2', 'p3')
	{
		$node->poll_query_until($db, 'SELECT count(*) = 0 FROM idgen_seq')
		  or die "database $db was not purged";
	}
	pass('one slot, three databases: each was purged in the first round');
}

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
