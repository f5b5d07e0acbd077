# Scenario: many sessions at once meet the limit of a key that does not
# cycle, in both modes.  8 pgbench clients each call the key 100 times
# (800 calls for 500 values), one call per transaction, keeping each value
# in a table with a primary key and counting each 2200H: the values taken
# are exactly 1 .. 500, each once (a duplicate would fail the insert and
# abort the client), and the other 300 calls were refused.  The key stays
# at its limit.  Then the same with batches of 3 (a batch that would pass
# the limit fails whole): 498 values in whole batches, the last 2 left.
# And setval(k, v, false) on a cached key: v is the next value.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

# The cached runs are served by this database's sequencer, kept from its
# idle exit (else each run's first call starts one again); a call waits for
# a segment up to a minute, however loaded the machine: what this test
# counts is which values are served and refused, not how soon.
my $node = idgen_node('seqlimit', 'max_connections' => 30,
	'idgen.sequencer_idle' => "'1h'", 'idgen.seq_cache_wait' => "'60s'");
my $pgbench = $node->installed_command('pgbench');
my $tmp = PostgreSQL::Test::Utils::tempdir();

# Wait for this database's idgen sequencer, which serves cached keys.
$node->safe_psql('postgres', q{SELECT idgen_seq_configure('wake', cache => 10)});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'idgen sequencer' AND datname = current_database()})
  or die 'no idgen sequencer in this database';

$node->safe_psql('postgres', q{
	CREATE TABLE taken (key text, v bigint, PRIMARY KEY (key, v));
	CREATE TABLE refused (key text);
	CREATE FUNCTION take(k text, n int) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO taken SELECT k, v FROM idgen_seq_next(k, n) v;
	EXCEPTION WHEN sequence_generator_limit_exceeded THEN
		INSERT INTO refused VALUES (k);
	END $$;
});

for my $mode ([ 'transactional', 0 ], [ 'cached', 10 ])
{
	my ($name, $cache) = @$mode;
	for my $batch (1, 3)
	{
		my $key = "$name:$batch";
		$node->safe_psql('postgres', "SELECT idgen_seq_configure('$key', max_value => 500, cache => $cache)");
		open my $fh, '>', "$tmp/take.sql" or die $!;
		print $fh "SELECT take('$key', $batch);\n";
		close $fh;
		my ($out, $err) = ('', '');
		my $clean = IPC::Run::run([ $pgbench, '-n', '-c', 8, '-j', 4, '-t', 100, '-f', "$tmp/take.sql",
				$node->connstr('postgres') ], '>', \$out, '2>', \$err);
		ok($clean && $err !~ /aborted/, "$key: no client failed") or diag($err);
		my $want_taken = $batch == 1 ? 500 : 498;
		is($node->safe_psql('postgres', qq{
			SELECT count(*) || ',' || count(DISTINCT v) FROM taken WHERE key = '$key'}),
			"$want_taken,$want_taken", "$key: $want_taken values taken, each once");
		# The values of 1 .. 500 not taken.  Single calls, and batches of a
		# transactional key, leave only the end: 499 and 500 to batches of
		# 3.  A cached key's batch that took the last values of the segment
		# before the final one and then found too few left in the final
		# segment (other batches took them meanwhile) fails, and loses what
		# it took (a gap, docs/sequences.md): 1 or 2 values just below the
		# final segment's first value F, and the values left at the end are
		# fewer by as many.  Nothing else may be missing.
		my @missing = split /,/, $node->safe_psql('postgres', qq{
			SELECT string_agg(i::text, ',' ORDER BY i) FROM generate_series(1, 500) i
			WHERE i NOT IN (SELECT v FROM taken WHERE key = '$key')});
		my $left = 500 - $want_taken;	# values left at the end, with no gap
		if ($batch == 3 && $cache > 0)
		{
			my $final = $node->safe_psql('postgres', qq{
				SELECT segment_first || ',' || segment_last FROM idgen_seq_cache WHERE key = '$key'});
			my ($first, $last) = split /,/, $final;
			is($last, '500', "$key: the current segment is the final one ($final)");
			my $gap = grep { $_ < $first } @missing;
			$left -= $gap;
			note("$key: final segment $final, gap of $gap value(s), $left left at the end");
			ok($gap <= 2, "$key: a gap of at most the 2 values a failed batch of 3 took before the final segment");
			is(join(',', grep { $_ < $first } @missing), join(',', ($first - $gap) .. ($first - 1)),
				"$key: the gap is the end of the segment before the final one");
		}
		is(join(',', grep { $_ > 500 - $left } @missing), join(',', (500 - $left + 1) .. 500),
			"$key: the values not taken at the end are the last $left");
		is(scalar(@missing), 500 - $want_taken, "$key: no other value is missing");
		is($node->safe_psql('postgres', "SELECT count(*) FROM refused WHERE key = '$key'"),
			800 - $want_taken / $batch, "$key: every other call was refused with 2200H");
		is($node->safe_psql('postgres', qq{
			SELECT served FROM idgen_seq_keys WHERE key = '$key'}),
			$name, "$key: served $name");
		my $current = $node->safe_psql('postgres', "SELECT idgen_seq_current('$key')");
		if ($batch == 1)
		{
			is($current, '500', "$key: the key stays at its limit");
		}
		elsif ($cache == 0)
		{
			# The last 2 values are still there, for calls that fit.
			is($node->safe_psql('postgres', "SELECT array_agg(v) FROM idgen_seq_next('$key', 2) v"),
				'{499,500}', "$key: the values below the limit are left for a batch that fits");
		}
		elsif ($left > 0)
		{
			# Cached: the values left at the end, for calls that fit.
			is($node->safe_psql('postgres', "SELECT array_agg(v) FROM idgen_seq_next('$key', $left) v"),
				'{' . join(',', (500 - $left + 1) .. 500) . '}',
				"$key: the $left value(s) below the limit are left for a call that fits");
		}
		else
		{
			# Cached, a gap of 2: nothing is left.
			like(sql_error($node, "SELECT idgen_seq_next('$key')"), qr/ERROR:  2200H:/,
				"$key: a gap of 2 before the final segment: nothing left, 2200H");
		}
	}
}
# idgen_seq_set(k, v, false) on a cached key makes v the next value, even
# while the sequencer is reserving a segment for the entry the set retires: a
# reservation for a retired entry leaves the row alone (before, it could
# take v .. v + 4 for nobody, about once in 2 000 rounds, and the next
# value was v + 5).  One client, 5 000 rounds of: use the key (a segment of
# 1, so the sequencer is asked for the next at every use), set it back, check.
{
	$node->safe_psql('postgres', q{
		SELECT idgen_seq_configure('restart', cache => 1);
		CREATE TABLE skipped (v bigint);
	});
	open my $fh, '>', "$tmp/restart.sql" or die $!;
	print $fh "SELECT idgen_seq_next('restart');
"
	  . "SELECT idgen_seq_set('restart', 50, false);
"
	  . "INSERT INTO skipped SELECT v FROM (SELECT idgen_seq_next('restart') v) s WHERE v <> 50;
";
	close $fh;
	my ($out, $err) = ('', '');
	my $clean = IPC::Run::run([ $pgbench, '-n', '-c', 1, '-t', 5000, '-f', "$tmp/restart.sql",
			$node->connstr('postgres') ], '>', \$out, '2>', \$err);
	ok($clean && $err !~ /aborted/, 'restart: no client failed') or diag($err);
	is($node->safe_psql('postgres', q{SELECT served FROM idgen_seq_keys WHERE key = 'restart'}),
		'cached', 'restart: the key is served cached');
	is($node->safe_psql('postgres', q{SELECT count(*) || ' ' || coalesce(string_agg(v::text, ','), '') FROM skipped}),
		'0 ', 'restart: after idgen_seq_set(k, 50, false), the next value was 50 in all 5 000 rounds');
}

ok(!$node->log_contains(qr/TRAP|server process .* was terminated/), 'no crash');

$node->stop;
done_testing();
