# Scenario: takeovers that follow each other fast, on one clock.  A server
# that took an identity over (a promotion, a crash restart) runs ahead of
# its clock for a while; the next takeover must start above that too, and
# leads must not add up.
#
#   - crash, then asynchronous promotion: primary P, asynchronous standby
#     S that misses everything P writes from its crash on (its walreceiver
#     stopped just before).  P crash-restarts (pg_ctl stop -m immediate and start, or a
#     backend SIGKILLed, as the OOM killer does), issues IDs, dies; S is
#     promoted.  Nothing P issued may repeat on S, or sort above S's IDs.
#   - double failover to a standby of the first primary: P with standbys S
#     and S1.  P dies, S is promoted, issues IDs for 0.2 to 0.4 s and
#     dies; S1, which never streamed from S, is promoted.  Nothing P or S
#     issued may repeat on S1.
#   - crash loop: 20 crash restarts about a second apart, default settings:
#     after each, the IDs are at most idgen.horizon_lead + idgen.max_drift
#     (1 100 ms) ahead of the clock.
#
# The first two run with idgen.horizon_lead = 10s: the horizons in WAL are
# then 5 to 10 s ahead, so a promotion that started at a replayed horizon
# (as before) started at or below the IDs of the holder it follows
# whatever the machine's speed (every promoted server's IDs sorted below
# some old ones), where with the default lead of 1 s that takes a
# promotion within about a second.  Each runs three times where
# test/run.sh runs 019's failovers ten times (IDGEN_FAILOVER_ROUNDS), once
# elsewhere.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time usleep);
use IdgenTest;

my $rounds = ($ENV{IDGEN_FAILOVER_ROUNDS} // 2) >= 10 ? 3 : 1;
my $seq = 0;
my @nodes;

# A new primary with a long horizon lead (see above).
sub primary
{
	my ($name) = @_;
	$seq++;
	my $node = idgen_node("${name}_$seq", _init => { allows_streaming => 1 },
		'idgen.worker_id' => 1, 'idgen.horizon_lead' => "'10s'", restart_after_crash => 'on');
	push @nodes, $node;
	return $node;
}

# A streaming standby of $upstream (its postgresql.conf: the same settings).
sub standby_of
{
	my ($upstream, $name) = @_;
	$seq++;
	$upstream->backup("backup$seq");
	my $node = PostgreSQL::Test::Cluster->new("${name}_$seq");
	$node->init_from_backup($upstream, "backup$seq", has_streaming => 1);
	$node->start;
	# A horizon of $upstream's written after the backup (renewed every
	# 5 s): it is what the standby starts above when promoted.
	$node->poll_query_until('postgres', 'SELECT wal_records > 0 FROM idgen_info()')
	  or die "$name replayed no horizon record";
	push @nodes, $node;
	return $node;
}

# Load $node with Snowflake IDs and UUIDv7 until it stops.  Returns a
# function that waits for the clients and returns what they were answered,
# and one that is true once every client has received values.
sub load
{
	my ($node) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my @clients = (
		start_load($node, "$dir/ids", 'SELECT idgen_snowflake() FROM generate_series(1, 500)'),
		start_load($node, "$dir/uuids", 'SELECT idgen_uuid7() FROM generate_series(1, 500)'));
	return sub {
		$_->finish for @clients;
		return ([ read_values("$dir/ids") ], [ read_values("$dir/uuids") ]);
	}, sub {
		return !grep { !-s "$dir/$_" } qw(ids uuids);
	};
}

# Load $node from the moment it answers until it has issued values for
# $seconds, then stop it with -m immediate; returns what it issued.
sub run_then_die
{
	my ($node, $seconds) = @_;
	my ($done, $issued) = load($node);
	my $t0 = time;
	usleep(10_000) until $issued->() || time - $t0 > $PostgreSQL::Test::Utils::timeout_default;
	sleep $seconds;
	$node->stop('immediate');
	return $done->();
}

# Nothing in $new repeats or sorts below anything in $old.
sub check_after
{
	my ($what, $old_ids, $old_uuids, $ids, $uuids) = @_;
	my ($dups, $not_above) = compare_values($old_ids, $ids, 1);
	is("$dups|$not_above", '0|0',
		sprintf('%s: no Snowflake ID repeated, none below an old one (%d before, %d after; %d repeated, %d not above)',
			$what, scalar @$old_ids, scalar @$ids, $dups, $not_above));
	($dups, $not_above) = compare_values($old_uuids, $uuids, 0);
	is("$dups|$not_above", '0|0',
		"$what: no UUIDv7 repeated, none below an old one ($dups repeated, $not_above not above)");
}

# Crash, then asynchronous promotion.  $how: 'restart' (-m immediate and
# start) or 'sigkill' (a backend killed, the postmaster restarts).
sub crash_then_promotion
{
	my ($what, $how) = @_;
	my $p = primary('p');
	my $s = standby_of($p, 's');
	my ($done, $issued) = load($p);
	# P has issued values (every client has received some) before S stops
	# following it.
	my $t0 = time;
	usleep(10_000) until $issued->() || time - $t0 > $PostgreSQL::Test::Utils::timeout_default;
	$issued->() or die "$what: the primary issued no values";
	# S misses everything from here on (its walreceiver stops, for good).
	$p->wait_for_catchup($s);
	$s->safe_psql('postgres', "ALTER SYSTEM SET primary_conninfo = ''");
	$s->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$s->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
	  or die 'the walreceiver did not stop';
	my ($ids, $uuids);
	if ($how eq 'restart')
	{
		$p->stop('immediate');
		($ids, $uuids) = $done->();
		$p->start;
	}
	else
	{
		my $victim = IPC::Run::start(
			[ 'psql', '-X', '-q', '-d', $p->connstr('postgres'), '-c', 'SELECT pg_sleep(600)' ],
			'>', '/dev/null', '2>', '/dev/null');
		my $pid;
		for (1 .. 100 * $PostgreSQL::Test::Utils::timeout_default)
		{
			$pid = $p->safe_psql('postgres',
				"SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'");
			last if $pid =~ /^\d+$/;
			usleep(10_000);
		}
		kill_backend($p, $pid);
		$p->poll_query_until('postgres', 'SELECT 1', '1') or die 'no restart after the crash';
		$victim->kill_kill;
	}
	# (After a SIGKILL the first clients go on until P dies below.)
	my ($ids2, $uuids2) = run_then_die($p, 0.2);
	($ids, $uuids) = $done->() if $how ne 'restart';
	cmp_ok(scalar @$ids2, '>', 0, "$what: the restarted primary issued IDs before it died");
	$s->promote;
	my ($new_ids, $new_uuids) = generate_for($s, 1);
	check_after($what, [ @$ids, @$ids2 ], [ @$uuids, @$uuids2 ], $new_ids, $new_uuids);
	$s->stop;
}

# Double failover: P dies, S is promoted and dies after $delay s, S1 (a
# standby of P that never streamed from S) is promoted.
sub double_failover
{
	my ($what, $delay) = @_;
	my $p = primary('p');
	my $s = standby_of($p, 's');
	my $s1 = standby_of($p, 's1');
	my ($ids, $uuids) = run_then_die($p, 1);
	$s->promote;
	my ($ids2, $uuids2) = run_then_die($s, $delay);
	cmp_ok(scalar @$ids2, '>', 0, "$what: the promoted standby issued IDs before it died");
	$s1->promote;
	my ($new_ids, $new_uuids) = generate_for($s1, 1);
	check_after($what, [ @$ids, @$ids2 ], [ @$uuids, @$uuids2 ], $new_ids, $new_uuids);
	$s1->stop;
}

for my $round (1 .. $rounds)
{
	crash_then_promotion("crash restart then asynchronous promotion, round $round", 'restart');
	crash_then_promotion("backend SIGKILL then asynchronous promotion, round $round", 'sigkill');
	my $delay = 0.2 + rand(0.2);
	double_failover(sprintf('double failover to a standby of the first primary, S lived %d ms, round %d',
			$delay * 1000, $round), $delay);
}

# The crash loop, default settings but idgen.clock_wait.  The lead is that
# of the highest ID each batch received over the clock when the batch
# ended.  The first batch after each start waits for the keeper's horizon
# in WAL (an fsync, over a second on a loaded machine): within the call,
# with idgen.clock_wait at 30 s, which measures the lead as soon as IDs
# come, where waiting beforehand (wait_for_horizon) would let it shrink.
{
	my $node = idgen_node('crash_loop', 'idgen.clock_wait' => '30s');
	push @nodes, $node;
	my $lead_sql = q{SELECT round(1000 * extract(epoch FROM
		max(idgen_snowflake_time(id)) - clock_timestamp()))
		FROM (SELECT idgen_snowflake() AS id FROM generate_series(1, 2000)) s};
	my ($max_id, $went_back, @leads) = (0, 0);
	for my $n (1 .. 20)
	{
		my $lead = -1e9;
		my $end = time + 1;
		while (time < $end)
		{
			my $l = $node->safe_psql('postgres', $lead_sql);
			$lead = $l if $l > $lead;
		}
		my ($min, $max) = split /\|/, $node->safe_psql('postgres',
			'SELECT min(id), max(id) FROM (SELECT idgen_snowflake() AS id FROM generate_series(1, 2000)) s');
		$went_back++ if $min <= $max_id;
		$max_id = $max;
		push @leads, $lead;
		$node->stop('immediate');
		$node->start;
	}
	my @over = grep { $_ > 1100 } @leads;
	is(scalar @over, 0,
		'20 crash restarts a second apart: IDs at most 1 100 ms ahead of the clock (' . join(', ', @leads) . ' ms)');
	is($went_back, 0, 'every ID above every ID issued before the crash before it');
	$node->stop;
}

# Nothing in the server logs says a file vanished under the startup
# process's fsync of the data directory.
for my $node (@nodes)
{
	ok(!$node->log_contains(qr/idgen\.horizon\.tmp/), $node->name . ': no message about idgen.horizon.tmp');
}

done_testing();
