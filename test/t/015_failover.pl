# Scenario: failover of a primary to a streaming standby made with
# pg_basebackup (so the standby has the primary's settings and Snowflake
# identity), the standby's clock behind the primary's under libfaketime.
# Clients load the primary (IDs only returned to the client, and IDs
# inserted into a replicated table), the primary is stopped with
# "pg_ctl stop -m immediate", the standby is promoted at once and loaded in
# turn.  Every ID the primary returned to a client is compared with every
# ID the promoted server issues:
#   - synchronous replication, standby 30 s behind: no duplicate, every new
#     Snowflake ID and UUIDv7 greater than every old one, with IDs only
#     returned to clients (never in WAL); the promoted server continues
#     from the primary's horizon, 30 s ahead of its own clock;
#   - asynchronous replication, standby 10 min behind after running idle:
#     the promoted server refuses (more than idgen.takeover_max_lead
#     ahead), then generates above the old primary once its clock is right;
#   - asynchronous replication at ordinary lag, standby 30 s behind: no
#     duplicate;
#   - asynchronous replication lagging on purpose (the standby down for 3 s
#     before the crash), beyond what the horizon covers: IDs of the old
#     primary can repeat, but only those after the last horizon the
#     standby replayed, as docs/high-availability.md says.
# While in recovery, a hot standby with its primary's identity refuses to
# generate, as does one that has replayed no horizon record yet (it does not
# know its primary's identity); with an identity of its own from a registry
# it generates IDs distinct from its primary's.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes;
use IdgenTest;

my ($clock_file, $faketime) = faketime_clock();

# The same clock, read from its file at most once a second by each process
# instead of at every call: libfaketime's read of the file costs about
# 10 us a call, so that the 2 000 000 IDs the synchronous scenario issues
# ahead of the clock took over a minute on a loaded machine, longer than a
# 30 s lead lasts (it shrinks by half the time that passes).  A step of
# this clock reaches the server within a second or two: a test that steps
# it waits until the server shows it.
my %cached_faketime = (%$faketime, FAKETIME_CACHE_DURATION => 1);
delete $cached_faketime{FAKETIME_NO_CACHE};

# A primary with worker id 1 and a streaming standby of it whose clock is
# $offset (faketime) behind, or real if undef (libfaketime, reading its
# file at every clock call, slows the standby's replies); with $sync, the standby is made synchronous
# once it streams (before, the primary's commits would wait for it).
# %conf: the primary's extra settings, and _faketime, the environment of
# the standby's clock (default: the file read at every call).
sub primary_and_standby
{
	my ($name, $offset, $sync, %conf) = @_;
	my $clock = delete $conf{_faketime} // $faketime;
	my $primary = idgen_node("${name}_primary",
		_init => { allows_streaming => 1 },
		'idgen.worker_id' => 1, %conf);
	$primary->safe_psql('postgres', 'CREATE TABLE t (id bigint PRIMARY KEY, u uuid)');
	$primary->backup("${name}_backup");
	my $standby = PostgreSQL::Test::Cluster->new("${name}_standby");
	$standby->init_from_backup($primary, "${name}_backup", has_streaming => 1);
	if (defined $offset)
	{
		IdgenTest::step_clock($clock_file, $offset);
		local @ENV{ keys %$clock } = values %$clock;
		$standby->start;
	}
	else
	{
		$standby->start;
	}
	$primary->wait_for_catchup($standby);
	# The keeper writes a horizon record each time it renews the horizon
	# (about twice a second), not when a standby connects: the standby knows
	# its primary's identity once it has replayed one after it started.
	$standby->poll_query_until('postgres', 'SELECT wal_records > 0 FROM idgen_info()')
	  or die 'the standby replayed no horizon record';
	if ($sync)
	{
		$primary->safe_psql('postgres',
			"ALTER SYSTEM SET synchronous_standby_names = '*'; SELECT pg_reload_conf()");
		$primary->poll_query_until('postgres',
			"SELECT sync_state = 'sync' FROM pg_stat_replication")
		  or die 'the standby did not become synchronous';
	}
	return ($primary, $standby);
}

# The number of lines in $file so far (0 if there is none yet).
sub lines_in
{
	my ($file) = @_;
	open my $fh, '<', $file or return 0;
	my $n = 0;
	$n++ while defined(my $line = <$fh>);
	close $fh;
	return $n;
}

# Load the primary for $seconds, then stop it with -m immediate; the
# values its clients were answered.  With $min_ids (and $min_uuids), the
# load goes on after $seconds until its clients were answered more than
# that many Snowflake IDs (and UUIDv7): on a loaded machine the clients
# may need longer than $seconds to get them.
sub load_then_crash
{
	my ($primary, $seconds, $before_crash, $min_ids, $min_uuids) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my @loads = (
		start_load($primary, "$dir/select", 'SELECT idgen_snowflake() FROM generate_series(1, 1000)'),
		start_load($primary, "$dir/insert",
			'INSERT INTO t SELECT idgen_snowflake() FROM generate_series(1, 1000) RETURNING id'),
		start_load($primary, "$dir/uuid", 'SELECT idgen_uuid7() FROM generate_series(1, 1000)'));
	sleep $seconds;
	my $deadline = Time::HiRes::time() + $PostgreSQL::Test::Utils::timeout_default;
	Time::HiRes::usleep(100_000)
	  while ((lines_in("$dir/select") + lines_in("$dir/insert") <= ($min_ids // 0))
		|| lines_in("$dir/uuid") <= ($min_uuids // 0))
	  && Time::HiRes::time() < $deadline;
	$before_crash->() if $before_crash;
	$primary->stop('immediate');
	$_->finish for @loads;
	return ([ read_values("$dir/select"), read_values("$dir/insert") ], [ read_values("$dir/uuid") ]);
}

# Generate $n Snowflake IDs and UUIDv7 on the promoted server.  (Returned
# to the client, not inserted into t: a repeat is then counted, where the
# primary key would stop at the first.)
sub generate_after
{
	my ($node, $n) = @_;
	wait_for_horizon($node);
	my @ids = split /\n/, $node->safe_psql('postgres',
		"SELECT idgen_snowflake() FROM generate_series(1, $n)");
	my @uuids = split /\n/, $node->safe_psql('postgres',
		"SELECT idgen_uuid7() FROM generate_series(1, $n)");
	return (\@ids, \@uuids);
}

########################################################################
# Synchronous replication, standby 30 s behind.
########################################################################
{
	my ($primary, $standby) = primary_and_standby('sync', '-30', 1, _faketime => \%cached_faketime);
	my $offset = -30;	# the standby's clock, as its file says

	# In recovery with its primary's identity: refused, with the reason.
	my $err = sql_error($standby, 'SELECT idgen_snowflake()');
	like($err, qr/ERROR:  55000: could not generate Snowflake ID: this standby has the Snowflake identity of its primary \(datacenter 0, worker 1\)/,
		'a hot standby with its primary\'s identity refuses idgen_snowflake()');
	like($err, qr/HINT:  Generate on the primary, or give the standby an identity of its own/, 'with a hint');
	like(sql_error($standby, 'SELECT idgen_uuid7()'),
		qr/could not generate UUIDv7: this standby has the Snowflake identity of its primary/,
		'and idgen_uuid7()');
	is($standby->safe_psql('postgres',
			'SELECT in_recovery, wal_datacenter_id, wal_worker_id, wal_records > 0, wal_horizon > now() FROM idgen_info()'),
		't|0|1|t|t',
		'idgen_info() on the standby: the primary\'s identity and horizon, replayed from WAL');
	# Its horizon file, copied from the primary, is 30 s ahead of its clock:
	# nothing to say about "identifiers issued before the restart" there.
	ok(!$standby->log_contains(qr/behind the idgen durable horizon/),
		'a fresh standby 30 s behind does not log that its clock is behind a horizon of its own');

	my ($old_ids, $old_uuids) = load_then_crash($primary, 3, undef, 10000, 5000);
	cmp_ok(scalar @$old_ids, '>', 10000, scalar(@$old_ids) . ' Snowflake IDs returned by the primary');
	cmp_ok(scalar @$old_uuids, '>', 5000, scalar(@$old_uuids) . ' UUIDv7 returned by the primary');

	$standby->promote;
	my ($new_ids, $new_uuids) = generate_after($standby, 100000);
	my ($dups, $not_above) = compare_values($old_ids, $new_ids, 1);
	is($dups, 0, 'synchronous, 30 s behind: no Snowflake ID repeated');
	is($not_above, 0, 'every new Snowflake ID is greater than every ID the primary returned');
	($dups, $not_above) = compare_values($old_uuids, $new_uuids, 0);
	is($dups + $not_above, 0, 'every new UUIDv7 is greater than every UUIDv7 the primary returned');

	my ($lead, $ended) = split /\|/, $standby->safe_psql('postgres',
		'SELECT recovery_lead_ms, recovery_ended_at IS NOT NULL FROM idgen_info()');
	cmp_ok($lead, '>', 25000, "the promoted server continued from the primary's horizon, $lead ms ahead of its clock");
	ok($standby->log_contains(qr/idgen generators start above the horizon replayed from WAL, \d+ ms ahead of this server's clock/),
		'the log says so');
	is($standby->safe_psql('postgres', "SELECT borrowed_ms > 0 FROM idgen_stats WHERE kind = 'snowflake'"),
		't', 'idgen_stats counts the milliseconds issued ahead of the clock');

	# Ahead of its clock, the promoted server keeps generating: more IDs
	# than 2^sequence_bits x (max_drift_ms + 1) = 409 600 (once all a
	# generator frozen at the horizon could issue), their timestamps
	# advancing at half the pace of real time, so that the lead shrinks by
	# half the time that passes.  The lead lasts twice itself: what is left
	# of it after the promotion and the comparisons above depends on how
	# long they took, so a step of the standby's clock back makes it 30 s
	# again first (the generators go by the takeover point, which the step
	# does not move), and the time that passes is read from the standby's
	# clock in the statements that read the lead.
	my $lead_sql = q{SELECT extract(epoch FROM idgen_snowflake_time(idgen_snowflake()) - clock_timestamp())
		|| '|' || extract(epoch FROM clock_timestamp())};
	my ($lead_now) = split /\|/, $standby->safe_psql('postgres', $lead_sql);
	$lead_now > 1 or die "the promoted server is no longer ahead of its clock ($lead_now s)";
	my $step = 30 - $lead_now;
	if ($step >= 1)
	{
		# Stepped, until a new session's clock shows it (it is read before the
		# reply, so a reading under the old offset is at least that offset
		# from the time the query was sent).
		$offset -= $step;
		IdgenTest::step_clock($clock_file, $offset);
		my $seen = 0;
		my $deadline = Time::HiRes::time() + $PostgreSQL::Test::Utils::timeout_default;
		while (!$seen && Time::HiRes::time() < $deadline)
		{
			my $sent = Time::HiRes::time();
			my $clock = $standby->safe_psql('postgres', 'SELECT extract(epoch FROM clock_timestamp())');
			$seen = $clock - $sent < $offset + $step / 2;
			Time::HiRes::usleep(100_000) unless $seen;
		}
		$seen or die 'the standby did not read the step of its clock';
	}
	my ($before, $t0) = split /\|/, $standby->safe_psql('postgres', $lead_sql);
	is($standby->safe_psql('postgres', q{
			SELECT count(DISTINCT id) FROM (SELECT idgen_snowflake() AS id
				FROM generate_series(1, 1000000)) s}),
		1000000, '1 000 000 distinct Snowflake IDs in one statement, 30 s ahead of the clock');
	is($standby->safe_psql('postgres', q{
			SELECT count(DISTINCT u) FROM (SELECT idgen_uuid7() AS u
				FROM generate_series(1, 1000000)) s}),
		1000000, 'and 1 000 000 distinct UUIDv7');
	sleep 2;
	my ($after, $t1) = split /\|/, $standby->safe_psql('postgres', $lead_sql);
	my $elapsed = $t1 - $t0;
	cmp_ok(abs(($before - $after) - $elapsed / 2), '<', 0.2 + $elapsed / 10,
		sprintf('the lead shrinks by half the time that passes: %.1f s ahead of the clock, %.1f s later %.1f s',
			$before, $elapsed, $after));

	# A clean restart while still ahead: its clock has not gone back, so it
	# continues above its last IDs, ahead of the clock, instead of failing
	# with "the system clock moved backwards".  The first call waits for
	# the keeper's first horizon after the start, for at most
	# idgen.clock_wait: 5 s, not 1, as a loaded machine once took longer
	# (the clock, 28 s behind, is still far beyond it).
	my $max_before = $standby->safe_psql('postgres', 'SELECT idgen_snowflake()');
	$standby->append_conf('postgresql.conf', "idgen.clock_wait = '5s'\n");
	{
		local @ENV{ keys %cached_faketime } = values %cached_faketime;
		$standby->restart;
	}
	my ($ret, $stdout, $stderr) = $standby->psql('postgres', "SELECT idgen_snowflake() > $max_before");
	is("$ret|$stdout", '0|t', 'a clean restart, still ahead of its clock: generates at once, above its last IDs')
	  or diag($stderr);
	ok($standby->log_contains(qr/idgen generators continue above the durable horizon, \d+ ms ahead of this server's clock/),
		'the log says why it is ahead');
	$standby->stop;
}

########################################################################
# Asynchronous replication, standby 10 min behind and idle for a while.
########################################################################
{
	my ($primary, $standby) = primary_and_standby('async10', '-600');
	sleep 3;	# the standby's keeper renews its own horizon meanwhile
	my ($old_ids, $old_uuids) = load_then_crash($primary, 2);
	$standby->promote;
	my $err = sql_error($standby, 'SELECT idgen_snowflake()');
	like($err, qr/ERROR:  55000: could not generate Snowflake ID: the system clock is \d+ ms behind the IDs this server must start above/,
		'10 min behind: the promoted server refuses');
	like($err, qr/DETAIL:  This server was promoted and starts above every ID its former primary may have issued/,
		'naming the promotion');
	like($err, qr/HINT:  Synchronize this server's clock with the former primary's/,
		'and whose clock to check');
	like($err, qr/idgen.takeover_max_lead/, 'and the setting that bounds it');
	IdgenTest::step_clock($clock_file, '+0');
	my ($new_ids, $new_uuids) = generate_after($standby, 100000);
	my ($dups, $not_above) = compare_values($old_ids, $new_ids, 1);
	is($dups + $not_above, 0, 'once its clock is right: no duplicate, every new ID greater');
	($dups, $not_above) = compare_values($old_uuids, $new_uuids, 0);
	is($dups + $not_above, 0, 'and every new UUIDv7 greater');
	$standby->stop;
}

########################################################################
# Asynchronous replication at ordinary lag, standby 30 s behind.
########################################################################
{
	my ($primary, $standby) = primary_and_standby('async30', '-30');
	# Ordinary lag is what the horizon covers (idgen.horizon_lead / 2 less
	# idgen.horizon_interval): the standby is waited for before the crash,
	# as a loaded machine can hold its replay up for longer than that.
	my ($old_ids, $old_uuids) = load_then_crash($primary, 3, sub { $primary->wait_for_catchup($standby) });
	$standby->promote;
	my ($new_ids, $new_uuids) = generate_after($standby, 100000);
	my ($dups, $not_above) = compare_values($old_ids, $new_ids, 1);
	is($dups, 0, 'asynchronous, 30 s behind: no Snowflake ID repeated (' . scalar(@$old_ids) . ' before, 100000 after)');
	is($not_above, 0, 'every new Snowflake ID greater than every old one');
	($dups, $not_above) = compare_values($old_uuids, $new_uuids, 0);
	is($dups + $not_above, 0, 'and every new UUIDv7 greater');
	$standby->stop;
}

########################################################################
# The failure as it was reported: asynchronous replication, a standby 3 s
# behind that has run longer than that (so the horizon file it copied from
# the primary no longer holds it back), 5 s of load.  Before the horizon
# travelled in WAL the promoted server issued the primary's last 3 s of IDs
# again.
########################################################################
{
	my ($primary, $standby) = primary_and_standby('async3', '-3');
	sleep 1;
	# At ordinary lag, as above: the standby is waited for before the crash.
	my ($old_ids, $old_uuids) = load_then_crash($primary, 5, sub { $primary->wait_for_catchup($standby) });
	$standby->promote;
	my ($new_ids, $new_uuids) = generate_after($standby, 100000);
	my ($dups, $not_above) = compare_values($old_ids, $new_ids, 1);
	is($dups, 0, 'asynchronous, 3 s behind after 6 s: no Snowflake ID repeated (' . scalar(@$old_ids) . ' before, 100000 after)');
	is($not_above, 0, 'every new Snowflake ID greater than every old one');
	($dups, $not_above) = compare_values($old_uuids, $new_uuids, 0);
	is($dups + $not_above, 0, 'and every new UUIDv7 greater');
	$standby->stop;
}

########################################################################
# Asynchronous replication lagging on purpose beyond what the horizon
# covers: the standby, 30 s behind, is down for the last 3 s before the
# crash.  The promoted server starts above the last horizon it replayed,
# not above what the primary issued after that: the bound of
# docs/high-availability.md.
########################################################################
{
	my ($primary, $standby) = primary_and_standby('lag', '-30');
	# The standby replayed no horizon beyond the primary's clock plus
	# idgen.horizon_lead + idgen.max_drift when it stopped; an ID above that
	# is issued and answered before the crash, waited for rather than hoped
	# of the load in the last 3 s, which a loaded machine may hold up.
	my @above;
	my ($old_ids) = load_then_crash($primary, 5, sub {
		$standby->stop('immediate');
		my $bound = $primary->safe_psql('postgres', q{SELECT clock_timestamp()
			+ current_setting('idgen.horizon_lead')::interval + current_setting('idgen.max_drift')::interval});
		sleep 3;
		@above = ids_past($primary, $bound);
	});
	push @$old_ids, @above;
	{
		local @ENV{ keys %$faketime } = values %$faketime;
		$standby->start;
	}
	$standby->promote;
	my ($new_ids) = generate_after($standby, 100000);
	my ($dups, $not_above) = compare_values($old_ids, $new_ids, 1);
	cmp_ok($not_above, '>', 0,
		"lagging 3 s with a clock 30 s behind: $not_above new IDs are not above the primary's last ($dups repeated)");
	my $min_new = (sort { $a <=> $b } @$new_ids)[0];
	is($standby->safe_psql('postgres',
			"SELECT idgen_snowflake_time($min_new) > wal_horizon FROM idgen_info()"),
		't', 'every new ID is above the last horizon the standby replayed');
	$standby->stop;
}

# The same lag with the clocks in agreement: the promoted server's own
# clock is past every ID the old primary issued.
{
	my ($primary, $standby) = primary_and_standby('lag_same_clock', undef);
	my ($old_ids) = load_then_crash($primary, 4, sub {
		$standby->stop('immediate');
		sleep 3;
	});
	$standby->start;
	$standby->promote;
	my ($new_ids) = generate_after($standby, 100000);
	my ($dups, $not_above) = compare_values($old_ids, $new_ids, 1);
	is($dups + $not_above, 0, 'lagging 3 s with clocks in agreement: no repeat, every new ID greater');
	$standby->stop;
}

# A standby without idgen preloaded cannot replay the horizon records: its
# startup process stops at the first one and says why, and replays nothing
# wrongly; preloaded again, it goes on.
{
	my ($primary, $standby) = primary_and_standby('no_preload', undef);
	$standby->stop;
	$standby->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
	$primary->safe_psql('postgres', 'SELECT idgen_snowflake() FROM generate_series(1, 1000)');
	sleep 1;	# a horizon record or two
	my $offset = -s $standby->logfile;
	$standby->start(fail_ok => 1);
	ok($standby->wait_for_log(qr/FATAL:  resource manager with ID 147 not registered/, $offset),
		'a standby without idgen preloaded stops at the first idgen WAL record');
	ok($standby->log_contains(qr/HINT:  Include the extension module that implements this resource manager in "?shared_preload_libraries"?\./),
		'with a hint naming shared_preload_libraries');
	$standby->stop('immediate', fail_ok => 1);
	$standby->adjust_conf('postgresql.conf', 'shared_preload_libraries', "'idgen'");
	$standby->start;
	$primary->wait_for_catchup($standby);
	is($standby->safe_psql('postgres', 'SELECT wal_records > 0 FROM idgen_info()'), 't',
		'preloaded again, it replays them');
	$standby->stop;
	$primary->stop;
}

# A standby that has replayed no horizon record since it started does not
# know its primary's identity: it refuses, whatever its own identity, and
# says why.  With idgen.horizon_lead = 60s the primary renews its horizon
# (and writes a record) about every 30 s; the backup is taken well within
# that of the record written at start, and the primary is stopped before
# the standby starts, so the standby replays no idgen record.
{
	my $primary = idgen_node('unknown_primary', _init => { allows_streaming => 1 },
		'idgen.worker_id' => 1, 'idgen.horizon_lead' => "'60s'");
	# A renewal while the backup runs would be in its WAL: on a loaded
	# machine the backup may end 30 s after the start, so it is taken again
	# until the keeper renewed nothing meanwhile.
	my $persists = 'SELECT horizon_persists FROM idgen_info()';
	my $backup;
	for my $try (1 .. 5)
	{
		my $before = $primary->safe_psql('postgres', $persists);
		$backup = "unknown_backup$try";
		$primary->backup($backup);
		last if $primary->safe_psql('postgres', $persists) eq $before;
	}
	$primary->stop;
	my $standby = PostgreSQL::Test::Cluster->new('unknown_standby');
	$standby->init_from_backup($primary, $backup, has_streaming => 1);
	$standby->start;
	is($standby->safe_psql('postgres', 'SELECT in_recovery, wal_records FROM idgen_info()'),
		't|0', 'a standby that has replayed no horizon record yet');
	my $err = sql_error($standby, 'SELECT idgen_snowflake()');
	like($err, qr/ERROR:  55000: could not generate Snowflake ID: this standby does not know its primary's Snowflake identity yet/,
		'it refuses idgen_snowflake(): it does not know its primary\'s identity');
	like($err, qr/HINT:  Generate on the primary, or try again once this standby replays WAL from a primary that has idgen preloaded/,
		'with a hint');
	like(sql_error($standby, 'SELECT idgen_uuid7()'),
		qr/could not generate UUIDv7: this standby does not know its primary's Snowflake identity yet/,
		'and idgen_uuid7()');
	$standby->stop;
}

########################################################################
# A registry hands an identity over: server "holder" (identity 2:5 from its
# settings, claimed from the registry) is loaded for 28 s and stopped with
# -m immediate; server "taker", a different cluster configured as 2:5
# whose clock is 30 s behind, is refused while the holder's lease lives and
# takes 2:5 once it has run out.  Its IDs start above the horizon the
# holder reported with its last renewal, ahead of its own clock.  (Without
# that, it would start from its clock, 26 s before the holder's last IDs:
# the 28 s of load make sure the holder issued IDs there.)
########################################################################
{
	my $registry = idgen_node('registry', 'idgen.worker_quarantine' => "'1s'");
	my $conninfo = 'host=' . $registry->host . ' port=' . $registry->port . ' dbname=postgres';
	my %conf = ('idgen.registry' => "'$conninfo'", 'idgen.registry_ttl' => "'3s'",
		'idgen.datacenter_id' => 2, 'idgen.worker_id' => 5);
	my $holds = q{SELECT state = 'held' FROM idgen_identity()};

	my $holder = idgen_node('holder', %conf);
	$holder->poll_query_until('postgres', $holds) or die 'the holder holds no identity';
	IdgenTest::step_clock($clock_file, '-30');
	my $taker;
	{
		local @ENV{ keys %$faketime } = values %$faketime;
		$taker = idgen_node('taker', %conf);
	}
	$taker->poll_query_until('postgres', q{SELECT state = 'refused' FROM idgen_identity()})
	  or die 'the taker was not refused';
	pass('a server configured as 2:5 is refused while the holder lives');

	my ($old_ids) = load_then_crash($holder, 28);
	$taker->poll_query_until('postgres', $holds) or die 'the taker did not take 2:5';

	# Bounded by idgen.takeover_max_lead: refused while it is 10 s.
	$taker->append_conf('postgresql.conf', "idgen.takeover_max_lead = '10s'");
	$taker->reload;
	$taker->poll_query_until('postgres', q{SELECT setting = '10000' FROM pg_settings WHERE name = 'idgen.takeover_max_lead'});
	like(sql_error($taker, 'SELECT idgen_snowflake()'),
		qr/ERROR:  55000: could not generate Snowflake ID: the system clock is \d+ ms behind the IDs this server must start above\nDETAIL:  This server leased its identity from the registry and starts above every ID the last holder may have issued/,
		'more than idgen.takeover_max_lead behind the last holder: refused, naming the registry');
	like($taker->safe_psql('postgres', q{SELECT state || ': ' || message FROM idgen_identity()}),
		qr/^held: held, but generation fails: the identity's IDs must start above .*, \d+ ms ahead of this server's clock, more than "idgen.takeover_max_lead" \(10000 ms\)/,
		'idgen_identity() says why a held identity generates nothing');
	$taker->append_conf('postgresql.conf', "idgen.takeover_max_lead = '60s'");
	$taker->reload;
	$taker->poll_query_until('postgres', q{SELECT setting = '60000' FROM pg_settings WHERE name = 'idgen.takeover_max_lead'});

	my ($new_ids) = generate_after($taker, 100000);
	my ($dups, $not_above) = compare_values($old_ids, $new_ids, 1);
	is($dups, 0, 'registry takeover by a server 30 s behind: no ID repeated ('
		  . scalar(@$old_ids) . ' before, 100000 after)');
	is($not_above, 0, "every ID of the new holder is greater than every ID of the last");
	ok($taker->log_contains(qr/idgen identity \(datacenter 2, worker 5\) taken over \d+ ms ahead of this server's clock/),
		'the log says the identity was taken over ahead of the clock');
	is($registry->safe_psql('postgres',
			q{SELECT handover_horizon IS NOT NULL AND horizon > handover_horizon
			  FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5}),
		't', 'the registry shows where the new holder started and its horizon since');
	$taker->stop;
	$registry->stop;
}

########################################################################
# A hot standby with an identity of its own from a registry generates in
# recovery, under that identity, while its primary generates under its.
########################################################################
{
	my $registry = idgen_node('registry_hs', 'idgen.worker_quarantine' => "'1s'");
	my $conninfo = 'host=' . $registry->host . ' port=' . $registry->port . ' dbname=postgres';
	my $holds = q{SELECT state = 'held' FROM idgen_identity()};
	my $primary = idgen_node('hs_primary', _init => { allows_streaming => 1 },
		'idgen.identity' => 'registry', 'idgen.registry' => "'$conninfo'", 'idgen.registry_ttl' => "'3s'");
	$primary->poll_query_until('postgres', $holds) or die 'the primary holds no identity';
	$primary->backup('hs_backup');
	my $standby = PostgreSQL::Test::Cluster->new('hs_standby');
	$standby->init_from_backup($primary, 'hs_backup', has_streaming => 1);
	$standby->start;
	$standby->poll_query_until('postgres', $holds) or die 'the standby holds no identity';
	$standby->poll_query_until('postgres', 'SELECT wal_records > 0 FROM idgen_info()')
	  or die 'the standby replayed no horizon';
	my $ident = q{SELECT datacenter_id || ':' || worker_id FROM idgen_identity()};
	my ($p, $s) = ($primary->safe_psql('postgres', $ident), $standby->safe_psql('postgres', $ident));
	isnt($s, $p, "the standby holds an identity of its own ($s; its primary $p)");
	is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'while in recovery');
	wait_for_horizon($standby);
	my @sids = split /\n/, $standby->safe_psql('postgres',
		'SELECT idgen_snowflake() FROM generate_series(1, 50000)');
	my @pids = split /\n/, $primary->safe_psql('postgres',
		'SELECT idgen_snowflake() FROM generate_series(1, 50000)');
	is(scalar(@sids), 50000, 'the hot standby generates');
	my ($dups) = compare_values(\@pids, \@sids, 1);
	is($dups, 0, 'its IDs and its primary\'s are distinct');
	is($standby->safe_psql('postgres',
			"SELECT count(DISTINCT datacenter_id || ':' || worker_id) || ' ' || min(datacenter_id || ':' || worker_id)
			 FROM unnest(ARRAY[$sids[0], $sids[-1]]::bigint[]) id, idgen_snowflake_decode(id)"),
		"1 $s", 'and carry its identity');
	$standby->stop;
	$primary->stop;
	$registry->stop;
}

########################################################################
# pg_rewind switch-back: the primary (real clock) fails over to its
# standby (30 s behind), is rewound and follows it as a standby, refusing
# to generate meanwhile, then the roles switch back.  Over the four
# phases, no ID repeats and each phase's IDs are above the last's.
########################################################################
{
	my ($primary, $standby) = primary_and_standby('rewind', '-30', 0,
		wal_log_hints => 'on', wal_keep_size => "'320MB'");
	my ($ids1) = load_then_crash($primary, 2);
	$standby->promote;
	my ($ids2) = generate_after($standby, 50000);

	# Rewind the old primary (keeping its own postgresql.conf: pg_rewind
	# copies the source's) and start it as a standby of the new one.  (The
	# checkpoint puts the new timeline in the new primary's control file,
	# where pg_rewind reads it.)
	$standby->safe_psql('postgres', 'CHECKPOINT');
	my $conf = $primary->data_dir . '/postgresql.conf';
	my $own_conf = slurp_file($conf);
	command_ok([ 'pg_rewind', '--target-pgdata=' . $primary->data_dir,
			'--source-server=' . $standby->connstr('postgres') ],
		'pg_rewind of the old primary');
	open my $fh, '>', $conf or die "$conf: $!";
	print $fh $own_conf;
	close $fh;
	$primary->enable_streaming($standby);
	$primary->start;
	$standby->wait_for_catchup($primary);
	$primary->poll_query_until('postgres', 'SELECT wal_records > 0 FROM idgen_info()')
	  or die 'the rewound primary replayed no horizon';
	like(sql_error($primary, 'SELECT idgen_snowflake()'),
		qr/this standby has the Snowflake identity of its primary \(datacenter 0, worker 1\)/,
		'rewound and following the new primary: refuses to generate under the shared identity');

	# Switch back: a clean shutdown of the new primary, the old one promoted.
	my @ids3 = split /\n/, $standby->safe_psql('postgres',
		'SELECT idgen_snowflake() FROM generate_series(1, 50000)');
	$standby->stop;
	$primary->promote;
	my ($ids4) = generate_after($primary, 50000);
	my @all = (@$ids1, @$ids2, @ids3, @$ids4);
	my %seen;
	is(scalar(grep { $seen{$_}++ } @all), 0, 'pg_rewind switch-back: no ID repeated over the four phases (' . scalar(@all) . ' IDs)');
	my ($d, $n2) = compare_values($ids1, $ids2, 1);
	my ($d3, $n3) = compare_values([ @$ids1, @$ids2 ], \@ids3, 1);
	my ($d4, $n4) = compare_values([ @$ids1, @$ids2, @ids3 ], $ids4, 1);
	is($n2 + $n3 + $n4, 0, 'each phase\'s IDs are above every earlier one');
	$primary->stop;
}

########################################################################
# Per-key sequences across a synchronous failover: a transactional key and
# a cached one, loaded by clients (batches of 20 values) until the primary stops with -m
# immediate.  Every value a client was answered is on the standby (the
# commit, or the cached segment's reservation, waited for it), so the
# promoted server hands out none of them again.
########################################################################
{
	my ($primary, $standby) = primary_and_standby('seq', undef, 1);
	$primary->safe_psql('postgres', q{SELECT idgen_seq_configure('cached', cache => 50)});
	$primary->wait_for_catchup($standby);
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my @loads = map {
		(start_load($primary, "$dir/tx$_", q{SELECT idgen_seq_next('tx', 20)}),
		 start_load($primary, "$dir/cached$_", q{SELECT idgen_seq_next('cached', 20)}))
	} (1, 2);
	sleep 3;
	# More than 100 values of each key answered, counted below: on a loaded
	# machine the clients may need longer than 3 s for them.
	my $deadline = Time::HiRes::time() + $PostgreSQL::Test::Utils::timeout_default;
	Time::HiRes::usleep(100_000)
	  while (grep { lines_in("$dir/${_}1") + lines_in("$dir/${_}2") <= 100 } ('tx', 'cached'))
	  && Time::HiRes::time() < $deadline;
	$primary->stop('immediate');
	$_->finish for @loads;
	$standby->promote;
	for my $key ('tx', 'cached')
	{
		my @old = map { read_values("$dir/$key$_") } (1, 2);
		my @new = split /\n/, $standby->safe_psql('postgres',
			"SELECT idgen_seq_next('$key') FROM generate_series(1, 2000)");
		my ($dups, $not_above) = compare_values(\@old, \@new, 1);
		cmp_ok(scalar(@old), '>', 100, scalar(@old) . " values of the $key key answered by the primary");
		is($dups, 0, "synchronous failover: no value of the $key key handed out again");
		is($not_above, 0, "the promoted server's values of the $key key are above the primary's");
	}
	$standby->stop;
}

done_testing();
