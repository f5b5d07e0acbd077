# Scenario: quorum and priority synchronous replication with two standbys,
# both with clocks 30 s behind (libfaketime).  The synchronous guarantee
# (nothing the old primary issued repeats, whatever the clocks) holds for a
# standby that confirmed the horizon records: with FIRST 1 (s1, s2) the one
# whose sync_state is 'sync', with ANY 1 (s1, s2) one at least as far as
# the furthest.  A standby whose walreceiver was cut confirmed nothing: it
# has the asynchronous guarantee only, and with a clock behind it issues
# the old primary's last IDs again.  The check the documentation gives
# before a promotion by hand (each standby's pg_last_wal_receive_lsn(),
# promote the furthest) picks the right one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my ($clock_file, $faketime) = faketime_clock();
IdgenTest::step_clock($clock_file, '-30');

sub scenario
{
	my ($method) = @_;
	my $primary = idgen_node("${method}_primary", _init => { allows_streaming => 1 },
		'idgen.worker_id' => 1);
	$primary->backup("${method}_backup");
	my %standby;
	for my $name ("${method}_s1", "${method}_s2")
	{
		my $node = PostgreSQL::Test::Cluster->new($name);
		$node->init_from_backup($primary, "${method}_backup", has_streaming => 1);
		local @ENV{ keys %$faketime } = values %$faketime;
		$node->start;
		$standby{$name} = $node;
	}
	my ($s1, $s2) = @standby{ "${method}_s1", "${method}_s2" };
	$primary->wait_for_catchup($_) for ($s1, $s2);
	$primary->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = '$method 1 (${method}_s1, ${method}_s2)'; SELECT pg_reload_conf()");
	my $expect = $method eq 'FIRST' ? 'sync|potential' : 'quorum|quorum';
	$primary->poll_query_until('postgres',
		"SELECT string_agg(sync_state, '|' ORDER BY application_name) FROM pg_stat_replication", $expect)
	  or die "the standbys are not $expect";
	pass("$method 1: the standbys are $expect");

	# Cut s2's walreceiver: it streams nothing more.
	$s2->append_conf('postgresql.conf', "primary_conninfo = 'host=/nonexistent port=1'\n");
	$s2->reload;
	$primary->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_replication")
	  or die 's2 is still streaming';

	my $dir = PostgreSQL::Test::Utils::tempdir();
	my @loads = map { start_load($primary, "$dir/ids$_", 'SELECT idgen_snowflake() FROM generate_series(1, 1000)') } (1, 2);
	sleep 3;
	# s2 starts above the last horizon it replayed before its walreceiver
	# was cut.  That the old primary issued IDs above it is what the
	# promotion of s2 is checked against, so one such ID is waited for
	# rather than hoped of the load, which a loaded machine may hold up.
	my $s2_horizon = $s2->safe_psql('postgres', 'SELECT wal_horizon FROM idgen_info()');
	my @mine = ids_past($primary, $s2_horizon);
	$primary->stop('immediate');
	$_->finish for @loads;
	my @old = ((map { read_values("$dir/ids$_") } (1, 2)), @mine);

	# The check before a promotion by hand.
	my %received = map {
		$_ => $standby{$_}->safe_psql('postgres', "SELECT pg_last_wal_receive_lsn() - '0/0'")
	} keys %standby;
	my ($furthest, $other) = sort { $received{$b} <=> $received{$a} } keys %received;
	is($furthest, "${method}_s1", "$method 1: the standby that received the most WAL is the one that confirmed");

	for my $name ($furthest, $other)
	{
		$standby{$name}->promote;
		wait_for_horizon($standby{$name});
		my @new = split /\n/, $standby{$name}->safe_psql('postgres',
			'SELECT idgen_snowflake() FROM generate_series(1, 200000)');
		my ($dups, $not_above) = compare_values(\@old, \@new, 1);
		if ($name eq $furthest)
		{
			is("$dups|$not_above", '0|0',
				"$method 1, promoting the standby that confirmed: nothing repeats (" . scalar(@old) . ' IDs before)');
		}
		else
		{
			cmp_ok($not_above, '>', 0,
				"$method 1, promoting the standby that did not confirm, 30 s behind: $not_above IDs not above the old primary's ($dups repeated), the asynchronous case");
		}
		$standby{$name}->stop;
	}
}

scenario('FIRST');
scenario('ANY');

# A standby with recovery_min_apply_delay: while the primary commits, replay
# waits before each commit and the horizon records behind it wait too, so
# wal_horizon lags by about the delay and "it stopped while replication
# streams" is no alarm there.  The check the documentation gives instead
# holds: the primary's keeper persisted its horizon less than a second ago,
# and the standby's flush_lsn in pg_stat_replication passes what the
# primary has written.
{
	IdgenTest::step_clock($clock_file, '+0');
	my $primary = idgen_node('delay_primary', _init => { allows_streaming => 1 });
	$primary->safe_psql('postgres', 'CREATE TABLE t (n int)');
	$primary->backup('delay_backup');
	my $standby = PostgreSQL::Test::Cluster->new('delay_standby');
	$standby->init_from_backup($primary, 'delay_backup', has_streaming => 1);
	$standby->append_conf('postgresql.conf', "recovery_min_apply_delay = '3s'\n");
	$standby->start;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my $commits = start_load($primary, "$dir/commits", 'INSERT INTO t VALUES (1)');
	sleep 5;
	# Both states are waited for: a load held up on a loaded machine lets
	# replay catch up with the horizon records for a moment, and a keeper
	# held up there may renew later than a second after its last renewal.
	ok($standby->poll_query_until('postgres', 'SELECT wal_horizon < now() FROM idgen_info()'),
		'delayed standby, primary committing: wal_horizon lags behind the clock');
	ok($primary->poll_query_until('postgres',
			q{SELECT now() - horizon_persisted_at < interval '1 s' FROM idgen_info()}),
		'the documented check on the primary: its keeper persisted a horizon within the last second');
	my $lsn = $primary->lsn('write');
	ok($primary->poll_query_until('postgres',
			"SELECT flush_lsn >= '$lsn' FROM pg_stat_replication"),
		'and the delayed standby flushes what the primary writes');
	$primary->stop;
	$commits->finish;
	$standby->stop;
}

done_testing();
