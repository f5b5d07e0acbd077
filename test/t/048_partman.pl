# Scenario: time partitions through the ID, with pg_partman, as
# docs/partitions.md prints them.  A table keyed by idgen_snowflake()
# (pg_partman 4.7 or 5: ranges of IDs a day wide) and, with pg_partman 5,
# one keyed by idgen_uuid7() (time partitions through idgen_uuid7_min and
# idgen_uuid7_time as pg_partman's encoder and decoder), each partitioned
# daily with no timestamp column, 3 days premade, 2 days kept.
# The server's clock (libfaketime) starts three days back, at noon UTC, and
# moves forward one day at a time; each day rows are inserted with the
# keys' defaults and partman.run_maintenance() runs.  Each day:
#   - every row is in the partition of its ID's day (the partition's
#     bounds, decoded with idgen_snowflake_time / idgen_uuid7_time, are the
#     midnights around the row's ID's time), none in the default partition;
#   - every partition is one whole day;
#   - from the second day, one partition ahead is missing before
#     run_maintenance() and it makes it (3 days ahead again);
#   - the days that have partitions are the 2 kept before today, today and
#     the 3 ahead: retention drops the first day's on the third day, and
#     every row of the kept days is still there;
#   - the docs' "yesterday" queries count yesterday's rows, and EXPLAIN
#     shows them reading yesterday's partition alone.
# Skipped where pg_partman is not installed (Debian ships none for 19 yet).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX qw(floor);
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
my $sharedir = $probe->config_data('--sharedir');
plan skip_all => "pg_partman is not installed ($sharedir/extension/pg_partman.control; "
  . 'Debian package postgresql-NN-partman)'
  unless -f "$sharedir/extension/pg_partman.control";

my $rows_a_day = 20;
my $premake = 3;    # p_premake in the page's blocks
my $kept = 2;       # their retention, in days

# The server's clock: day 0 is three days back at 12:00 UTC, so that a
# day's rounds never cross a midnight.
my ($offset_file, $faketime) = faketime_clock();
my $day0 = 86_400 * (floor(time() / 86_400) - 3) + 43_200;
sub set_day
{
	my ($day) = @_;
	IdgenTest::step_clock($offset_file, sprintf('%+d', $day0 + 86_400 * $day - time()));
}
set_day(0);

my $node;
{
	local @ENV{ keys %$faketime } = values %$faketime;
	$node = idgen_node('partman', timezone => "'UTC'");
}
wait_for_horizon($node);

sub sql { $node->safe_psql('postgres', $_[0]) }

my $partman = sql(q{SELECT default_version FROM pg_available_extensions WHERE name = 'pg_partman'});
my $v5 = $partman =~ /^(\d+)/ && $1 >= 5;
note("pg_partman $partman");

sql(doc_block('docs/partitions.md', 'partman/setup'));
# The keys of this pg_partman: [table, the page's block that makes it, the
# decoder from a key to its time, the type of a key, the page's query
# for yesterday's rows].
my @keys = ([ 'events',
		$v5 ? doc_block('docs/partitions.md', 'partman/events') : doc_block('docs/partitions.md', 'partman/events-4'),
		'idgen_snowflake_time', 'bigint', doc_block('docs/partitions.md', 'partman/events-yesterday') ]);
push @keys, [ 'orders', doc_block('docs/partitions.md', 'partman/orders'),
	'idgen_uuid7_time', 'uuid', doc_block('docs/partitions.md', 'partman/orders-yesterday') ]
  if $v5;
sql($_->[1]) for @keys;

# A subquery of the partitions of $table (not the default): oid, relname,
# and the times of their bounds, lo and hi.
sub bounds
{
	my ($table, $decode, $type) = @_;
	return qq{(
		SELECT c.oid, c.relname, $decode(b[1]::$type) AS lo, $decode(b[2]::$type) AS hi
		  FROM pg_inherits i
		  JOIN pg_class c ON c.oid = i.inhrelid,
		       regexp_match(pg_get_expr(c.relpartbound, c.oid), \$\$FROM \\('([^']*)'\\) TO \\('([^']*)'\\)\$\$) AS b
		 WHERE i.inhparent = '$table'::regclass AND b IS NOT NULL)};
}

# The partitions of $table, name|from|to, in order.
sub partitions
{
	return sql('SELECT relname, lo, hi FROM ' . bounds(@_) . ' AS p ORDER BY lo');
}

# The partitions of $table whose day begins after today's (the server's
# clock).
sub ahead
{
	my ($table, $decode, $type) = @_;
	my $today = sql(q{SELECT date_trunc('day', now(), 'UTC')});
	return scalar grep { (split /\|/)[1] gt $today } split /\n/, partitions($table, $decode, $type);
}

my %inserted;    # table => day => rows
for my $day (0 .. 3)
{
	if ($day > 0)
	{
		set_day($day);
		wait_for_horizon($node);
	}
	my $today = sql(q{SELECT date_trunc('day', now(), 'UTC')::date});
	for my $key (@keys)
	{
		my ($table, undef, $decode, $type, $yesterday) = @$key;
		sql("INSERT INTO $table (body) SELECT 'day $day' FROM generate_series(1, $rows_a_day)");
		$inserted{$table}{$day} = $rows_a_day;

		my $before = ahead($table, $decode, $type);
		sql('SELECT partman.run_maintenance()');
		my $after = ahead($table, $decode, $type);
		is($after, $premake, "$table, day $day ($today): $premake days of partitions ahead after run_maintenance()");
		is($before, $premake - 1, "$table, day $day: one was missing before, run_maintenance() made it")
		  if $day > 0;

		my $parts = partitions($table, $decode, $type);
		my @days = map { substr((split /\|/)[1], 0, 10) } split /\n/, $parts;
		my @expected = map { sql("SELECT ('$today'::date + $_)::text") }
		  (($day >= $kept ? -$kept : -$day) .. $premake);
		is_deeply(\@days, \@expected,
			"$table, day $day: partitions for the $kept days kept, today and $premake ahead")
		  or diag($parts);
		my $bounds = bounds($table, $decode, $type);
		is(sql(qq{
			SELECT count(*) FROM $bounds AS p
			 WHERE lo <> date_trunc('day', lo, 'UTC') OR hi <> lo + interval '1 day'}),
			'0', "$table, day $day: every partition is one whole day, midnight to midnight (UTC)");

		# Every row in the partition of its ID's day; none in the default.
		is(sql(qq{
			SELECT count(*) FILTER (WHERE lo IS NULL OR date_trunc('day', $decode(t.id), 'UTC') <> lo)
			       || '/' || count(*)
			  FROM $table t
			  LEFT JOIN $bounds AS p
			    ON p.oid = t.tableoid}),
			'0/' . ($rows_a_day * ($day >= $kept ? $kept + 1 : $day + 1)),
			"$table, day $day: every row of the kept days is there, each in the partition of its ID's day");
		is(sql("SELECT count(*) FROM ${table}_default"), '0', "$table, day $day: no row in the default partition");

		next if $day == 0;
		# The page's query for yesterday: its rows, from its partition alone.
		is(sql($yesterday), $rows_a_day, "$table, day $day: the page's query counts yesterday's rows");
		my $plan = sql("EXPLAIN (COSTS OFF) $yesterday");
		my %scanned = map { $_ => 1 } $plan =~ /(?<!Bitmap Index )Scan (?:using \w+ )?on (${table}_\w+)/g;
		my $yesterday_day = sql("SELECT ('$today'::date - 1)::text");
		my ($yesterday_part) = map { (split /\|/)[0] }
		  grep { substr((split /\|/)[1], 0, 10) eq $yesterday_day } split /\n/, $parts;
		is_deeply([ sort keys %scanned ], [$yesterday_part],
			"$table, day $day: the query reads yesterday's partition ($yesterday_part) alone")
		  or diag($plan);
	}
}

# Retention dropped day 0's partitions, with their rows, and no other.
for my $key (@keys)
{
	my ($table, undef, $decode) = @$key;
	is(sql(qq{SELECT count(*) FROM $table WHERE body = 'day 0'}), '0',
		"$table: day 0's rows went with its partition on day 3");
	is(sql(qq{SELECT string_agg(body || ':' || n, ',' ORDER BY body)
	            FROM (SELECT body, count(*) AS n FROM $table GROUP BY body) AS d}),
		join(',', map { "day $_:$rows_a_day" } 1 .. 3), "$table: days 1 to 3 kept whole");
}

# The page's listing of the Snowflake partitions: each one's name and day.
my @listed = split /\n/, sql(doc_block('docs/partitions.md', 'partman/events-days'));
my @expected = map { sql("SELECT (date_trunc('day', now(), 'UTC')::date + $_)::text") } -$kept .. $premake;
is_deeply([ map { /^events_p\d+\|(\d{4}-\d\d-\d\d) 00:00:00\+00$/ ? $1 : $_ } @listed ], \@expected,
	"the page's listing names each partition and its day");

no_crash_logged($node, 'no crash in the server log');
$node->stop;
done_testing();
