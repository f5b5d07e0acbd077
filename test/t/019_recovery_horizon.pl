# Scenario: IDs issued right after an end of recovery, then a failover.
# Every ID a primary issues must lie at or below a horizon that is in its
# WAL, from the first ID after any end of recovery: a keeper that ran
# during recovery persisted horizons of its own, which no WAL holds, and a
# server that published one of those after recovery issued IDs that the
# next promoted standby issued again.
#
#   - double failover: primary P, standby S, standby S1 cascaded from S.
#     P is stopped, S promoted and loaded, then stopped with -m immediate;
#     S1 is promoted.  Nothing S issued may repeat on S1.
#   - crash restart then failover: P with a synchronous standby S.  P is
#     stopped with -m immediate and started again (crash recovery, the
#     keeper already running), loaded, stopped with -m immediate again; S
#     is promoted.  Nothing P issued after its restart may repeat on S.
#
# Each is run once made certain (a keeper in recovery that made its horizon
# 60 s ahead, so that, published after recovery, it would serve for a
# minute without any record), then IDGEN_FAILOVER_ROUNDS times (default 2)
# as it happens, with all clocks equal and with the last server promoted
# 5 s behind (libfaketime).
#
# Also at the end of recovery: a promotion faster than idgen.max_drift
# with clocks in agreement; a crash restart with the clock back beyond
# idgen.takeover_max_lead (the refusal names the server's own IDs); and
# point-in-time recovery with the original gone (the documented hole).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time usleep);
use IdgenTest;

my ($clock_file, $faketime) = faketime_clock();
my $rounds = $ENV{IDGEN_FAILOVER_ROUNDS} // 2;
my $seq = 0;

# A streaming standby of $upstream (a fresh backup of it), its clock
# $behind seconds behind (libfaketime), with extra settings %conf.
sub standby_of
{
	my ($upstream, $name, $behind, %conf) = @_;
	$seq++;
	$upstream->backup("backup$seq");
	my $node = PostgreSQL::Test::Cluster->new("${name}_$seq");
	$node->init_from_backup($upstream, "backup$seq", has_streaming => 1);
	$node->append_conf('postgresql.conf',
		join('', "wal_retrieve_retry_interval = '100ms'\n", map { "$_ = $conf{$_}\n" } sort keys %conf));
	IdgenTest::step_clock($clock_file, "-$behind");
	{
		local @ENV{ keys %$faketime } = values %$faketime;
		$node->start;
	}
	$node->poll_query_until('postgres', 'SELECT wal_records > 0 FROM idgen_info()')
	  or die "$name replayed no horizon record";
	return $node;
}

# Load $node with Snowflake IDs and UUIDv7 until it stops; returns a
# function that waits for the clients and returns what they were answered,
# and one that waits (at most timeout_default) until every client has
# received IDs.
sub load
{
	my ($node) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my @clients = (
		start_load($node, "$dir/ids", 'SELECT idgen_snowflake() FROM generate_series(1, 500)'),
		start_load($node, "$dir/ids2", 'SELECT idgen_snowflake() FROM generate_series(1, 500)'),
		start_load($node, "$dir/uuids", 'SELECT idgen_uuid7() FROM generate_series(1, 500)'));
	return sub {
		$_->finish for @clients;
		return ([ read_values("$dir/ids"), read_values("$dir/ids2") ], [ read_values("$dir/uuids") ]);
	}, sub {
		my $t0 = time;
		usleep(10_000) while grep({ !-s "$dir/$_" } qw(ids ids2 uuids))
		  && time - $t0 <= $PostgreSQL::Test::Utils::timeout_default;
	};
}

# Check that nothing in $new repeats or falls below $old.
sub check_after
{
	my ($what, $old, $new) = @_;
	my ($dups, $not_above) = compare_values($old->[0], $new->[0], 1);
	is("$dups|$not_above", '0|0',
		sprintf('%s: no Snowflake ID repeated, none below an old one (%d before, %d after)',
			$what, scalar @{ $old->[0] }, scalar @{ $new->[0] }));
	($dups, $not_above) = compare_values($old->[1], $new->[1], 0);
	is("$dups|$not_above", '0|0', "$what: no UUIDv7 repeated, none below an old one");
}

# Double failover P -> S -> S1.  $certain: S's keeper makes its horizon
# 60 s ahead while in recovery.  $delay: how long S runs, once promoted
# and its clients have received IDs, before it dies.
sub double_failover
{
	my ($what, $behind, $certain, $delay) = @_;
	my $p = idgen_node("p$seq", _init => { allows_streaming => 1 }, 'idgen.worker_id' => 1);
	my $s = standby_of($p, 's', 0);
	my $s1 = standby_of($s, 's1', $behind);
	if ($certain)
	{
		# (After S1's backup, which would copy the horizon file.)  Then
		# renewed only when less than 0.6 s is left: none for a minute.
		$s->append_conf('postgresql.conf', "idgen.horizon_lead = '60s'\n");
		$s->reload;
		sleep 1;
		$s->append_conf('postgresql.conf', "idgen.horizon_lead = '1s'\n");
		$s->reload;
	}
	my ($p_done) = load($p);
	sleep 1;
	$p->stop('immediate');
	my ($p_ids, $p_uuids) = $p_done->();
	$s->promote;
	# S's first IDs wait for its keeper's first horizon in WAL: on a loaded
	# machine longer than the shortest $delay (40 ms; seen on 17 at 49 ms).
	# S dies $delay after its clients received IDs, as P does below.
	my ($s_done, $s_first_ids) = load($s);
	$s_first_ids->();
	sleep $delay;
	$s->wait_for_catchup($s1, 'replay', $s->lsn('flush')) if $certain;
	$s->stop('immediate');
	my ($s_ids, $s_uuids) = $s_done->();
	cmp_ok(scalar @$s_ids, '>', 0, "$what: the promoted standby issued IDs before it died");
	$s1->promote;
	my ($ids, $uuids) = generate_for($s1, 2);
	check_after($what, [ [ @$p_ids, @$s_ids ], [ @$p_uuids, @$s_uuids ] ], [ $ids, $uuids ]);
	$s1->stop;
	$p->clean_node;
}

# Crash restart then failover: P with synchronous standby S.  $certain:
# P's keeper makes its horizon 60 s ahead during crash recovery (the WAL of
# a large insert to replay makes sure it runs before recovery ends).
# $delay: how long P runs after its restart before it dies again.
sub crash_restart_then_failover
{
	my ($what, $behind, $certain, $delay) = @_;
	my $p = idgen_node("p$seq", _init => { allows_streaming => 1 }, 'idgen.worker_id' => 1,
		checkpoint_timeout => "'1h'", max_wal_size => "'4GB'");
	$p->safe_psql('postgres', 'CREATE TABLE big (n int, pad text)');
	my $s = standby_of($p, 's', $behind, 'idgen.takeover_max_lead' => "'5min'");
	$p->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = '*'; SELECT pg_reload_conf()");
	$p->poll_query_until('postgres', "SELECT sync_state = 'sync' FROM pg_stat_replication")
	  or die 'the standby did not become synchronous';
	my ($p_done) = load($p);
	$p->safe_psql('postgres',
		"INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 300000) g") if $certain;
	sleep 1;
	$p->stop('immediate');
	$p_done->();
	$p->append_conf('postgresql.conf', "idgen.horizon_lead = '60s'\n") if $certain;
	$p->start;
	if ($certain)
	{
		$p->append_conf('postgresql.conf', "idgen.horizon_lead = '1s'\n");
		$p->reload;
	}
	# After the restart the first IDs wait for the keeper's first horizon in
	# WAL, which waits for the synchronous standby: on a loaded machine
	# longer than $delay.  P dies $delay after its clients received IDs.
	my $p_first_ids;
	($p_done, $p_first_ids) = load($p);
	$p_first_ids->();
	sleep $delay;
	$p->stop('immediate');
	my ($p_ids, $p_uuids) = $p_done->();
	cmp_ok(scalar @$p_ids, '>', 0, "$what: the restarted primary issued IDs before it died");
	$s->promote;
	my ($ids, $uuids) = generate_for($s, 2);
	check_after($what, [ $p_ids, $p_uuids ], [ $ids, $uuids ]);
	$s->stop;
	$p->clean_node;
}

# Clocks in agreement, a lagging asynchronous standby and a primary far
# ahead of its clock: a primary may issue IDs up to idgen.max_drift ahead
# of its clock (here 2 s, with 4 IDs a millisecond), and the standby, down
# for the primary's last second, replayed a horizon below some of them.
# Promoted at once, it starts above its own clock plus idgen.horizon_lead +
# idgen.max_drift, past everything the primary issued.  (Before, it started
# at the replayed horizon, and issued the primary's last IDs again.)
#
# Both servers read one clock (libfaketime), so that they agree whatever
# it is stepped to.  The primary is put ahead of it by the clock, not by
# a load out-running it (which a loaded machine's clients do not): once the
# standby is down, the clock steps 3 s forward (past every horizon the
# standby replayed, as if it had been down that much longer) and the
# primary issues IDs there; then it steps back to 1.99 s behind the last of
# them, within idgen.max_drift, so that the primary continues from them
# ahead of its clock, as after borrowing.
{
	my %fast = ('idgen.max_drift' => "'2s'", 'idgen.timestamp_bits' => 51, 'idgen.sequence_bits' => 2);
	my $p;
	{
		# idgen.clock_wait is raised from 1 s: after the step forward the
		# first IDs wait for the keeper to renew the horizon past the new
		# clock, which a loaded machine can delay past 1 s.
		local @ENV{ keys %$faketime } = values %$faketime;
		$p = idgen_node('fast_primary', _init => { allows_streaming => 1 }, 'idgen.worker_id' => 1, %fast,
			'idgen.clock_wait' => "'30s'");
	}
	my $s = standby_of($p, 'fast_standby', 0);
	my ($p_done, $p_first_ids) = load($p);
	$p_first_ids->();
	$p->wait_for_catchup($s);
	$s->stop;
	sleep 1;
	my $client = $p->background_psql('postgres');
	my (@mine, @mine_uuids);
	IdgenTest::step_clock($clock_file, '+3');
	my $ahead = 'f';
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	# Each round steps the clock back to 1.99 s behind the primary's last
	# ID and reads how far ahead the next one is; the lead shrinks as long
	# as the statement takes, so a round that a loaded machine held up for
	# more than 0.49 s is made again.
	while ($ahead ne 't' && time < $deadline)
	{
		my @ids = split /\n/, $client->query_safe('SELECT idgen_snowflake() FROM generate_series(1, 1000)');
		push @mine, @ids;
		push @mine_uuids, split /\n/, $client->query_safe('SELECT idgen_uuid7() FROM generate_series(1, 1000)');
		my $last = $client->query_safe("SELECT extract(epoch FROM idgen_snowflake_time($ids[-1]))");
		IdgenTest::step_clock($clock_file, sprintf('%+.3f', $last - 1.99 - time));
		$ahead = $client->query_safe(
			'SELECT idgen_snowflake_time(idgen_snowflake()) > clock_timestamp() + interval \'1.5 s\'');
	}
	$client->quit;
	is($ahead, 't', 'the primary issues IDs more than 1.5 s ahead of its clock');
	$p->stop('immediate');
	my ($p_ids, $p_uuids) = $p_done->();
	push @$p_ids, @mine;
	push @$p_uuids, @mine_uuids;
	{
		local @ENV{ keys %$faketime } = values %$faketime;
		$s->start;
	}
	$s->promote;
	my ($ids, $uuids) = generate_for($s, 1);
	check_after('a promotion faster than idgen.max_drift, clocks in agreement, standby lagging 1 s',
		[ $p_ids, $p_uuids ], [ $ids, $uuids ]);
	$s->stop;
}

# A crash restart with the clock back by more than idgen.takeover_max_lead:
# the refusal names the server's own IDs before the crash, not a takeover
# from another server.
{
	my $node = idgen_node('crash_back', _init => { allows_streaming => 1 },
		'idgen.takeover_max_lead' => "'1s'");
	$node->safe_psql('postgres', 'SELECT idgen_snowflake() FROM generate_series(1, 1000)');
	$node->stop('immediate');
	IdgenTest::step_clock($clock_file, '-5');
	{
		local @ENV{ keys %$faketime } = values %$faketime;
		$node->start;
	}
	my $err = sql_error($node, 'SELECT idgen_snowflake()');
	like($err, qr/ERROR:  55000: could not generate Snowflake ID: the system clock is \d+ ms behind the IDs this server must start above\nDETAIL:  After crash recovery this server starts above every ID it may have issued before, as its WAL says/,
		'a crash restart with the clock 5 s back: the refusal names the IDs before the crash');
	like($err, qr/HINT:  Check this server's time source/, 'and asks to check the time source');
	$node->stop;
}

# Point-in-time recovery with the original gone and the restored server's
# clock 30 s behind: it starts above the horizons it replayed (the
# original's IDs up to about the target), but the original's IDs after the
# target are in no WAL it read, and it issues them again: the
# asynchronous-lag case, with a lag of now - target, as documented.
{
	my $p = idgen_node('pitr_original', _init => { has_archiving => 1, allows_streaming => 1 },
		'idgen.worker_id' => 1);
	$p->safe_psql('postgres', 'CREATE TABLE t (n int)');
	$p->backup('pitr_backup');
	my ($p_done) = load($p);
	sleep 1;
	my $target = $p->safe_psql('postgres', 'SELECT clock_timestamp()');
	sleep 0.5;
	# A commit after the target, archived, for recovery to stop at.  No
	# horizon in the WAL before it is beyond the clock after it plus
	# idgen.horizon_lead + idgen.max_drift.
	$p->safe_psql('postgres', 'INSERT INTO t VALUES (1)');
	my $bound = $p->safe_psql('postgres', q{SELECT clock_timestamp()
		+ current_setting('idgen.horizon_lead')::interval + current_setting('idgen.max_drift')::interval});
	my $walfile = $p->safe_psql('postgres', 'SELECT pg_walfile_name(pg_current_wal_lsn())');
	$p->safe_psql('postgres', 'SELECT pg_switch_wal()');
	$p->poll_query_until('postgres', "SELECT last_archived_wal >= '$walfile' FROM pg_stat_archiver")
	  or die 'the WAL was not archived';
	sleep 1.5;
	# That the original issued IDs above every horizon the restored server
	# replays is what is checked below: one is waited for and answered
	# here, rather than hoped of the load, which a loaded machine may hold
	# up.
	my @above = ids_past($p, $bound);
	$p->stop('immediate');
	my ($p_ids) = $p_done->();
	push @$p_ids, @above;

	my $r = PostgreSQL::Test::Cluster->new('pitr_restored');
	$r->init_from_backup($p, 'pitr_backup', has_restoring => 1);
	$r->append_conf('postgresql.conf',
		"recovery_target_time = '$target'\nrecovery_target_action = 'promote'\n");
	IdgenTest::step_clock($clock_file, '-30');
	{
		local @ENV{ keys %$faketime } = values %$faketime;
		$r->start;
	}
	$r->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'no end of recovery';
	my ($ids) = generate_for($r, 1);
	my ($dups, $not_above) = compare_values($p_ids, $ids, 1);
	cmp_ok($not_above, '>', 0,
		"point-in-time recovery, original gone, clock 30 s behind: $not_above IDs not above the original's ($dups repeated)");
	my $min_new = (sort { $a <=> $b } @$ids)[0];
	is($r->safe_psql('postgres', "SELECT idgen_snowflake_time($min_new) > wal_horizon FROM idgen_info()"),
		't', 'every new ID above the last horizon the restored server replayed');
	$r->stop;
}

double_failover('double failover, horizon made in recovery, S1 5 s behind', 5, 1, 1.5);
crash_restart_then_failover('crash restart then failover, horizon made in recovery, S 5 s behind', 5, 1, 1.5);

for my $round (1 .. $rounds)
{
	for my $behind (0, 5)
	{
		my $delay = 0.04 + rand(0.485);
		double_failover(sprintf('double failover %d, S1 %d s behind, S died %d ms after its first IDs',
				$round, $behind, $delay * 1000), $behind, 0, $delay);
		crash_restart_then_failover(sprintf('crash restart then failover %d, S %d s behind', $round, $behind),
			$behind, 0, 0.2);
	}
}

done_testing();
