# Scenario: eight sessions generate 100 000 Snowflake IDs each at the same
# moment (released together by an advisory lock), half without a gene and
# half with explicit genes, on a layout with 2 gene bits.  Invariant 1: no ID
# repeats, and within each session the IDs of one gene strictly increase.
# Each session then generates 50 000 UUIDv7.  Then a parallel query
# generates in its workers.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $sessions = 8;
my $per_session = 100_000;

my $node = idgen_node('concurrency',
	'idgen.sequence_bits' => 10,
	'idgen.gene_bits' => 2,
	'idgen.worker_id' => 5,
	'max_connections' => 30);
wait_for_horizon($node);
$node->safe_psql('postgres', q{
	CREATE UNLOGGED TABLE ids (session int, n int, id bigint);
	CREATE UNLOGGED TABLE uuids (session int, n int, id uuid);
});

# The controller holds the lock; every session queues behind it.
my $ctl = $node->background_psql('postgres');
$ctl->query_safe('SELECT pg_advisory_lock(42)');

my @workers;
for my $k (1 .. $sessions)
{
	my $expr = $k % 2 ? 'idgen_snowflake()' : 'idgen_snowflake(g % 4)';
	my $w = $node->background_psql('postgres');
	$w->query_until(qr/queued/, qq{\\echo queued
SELECT pg_advisory_lock_shared(42);
INSERT INTO ids SELECT $k, g, $expr FROM generate_series(1, $per_session) g;
INSERT INTO uuids SELECT $k, g, idgen_uuid7() FROM generate_series(1, $per_session / 2) g;
});
	push @workers, $w;
}

$node->poll_query_until('postgres',
	"SELECT count(*) = $sessions FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
  or die 'sessions did not queue';
$ctl->query_safe('SELECT pg_advisory_unlock(42)');

# A query after the INSERT returns only once the INSERT has finished.
$_->query_safe('SELECT 1') for @workers;
$_->quit for @workers;
$ctl->quit;

my $total = $sessions * $per_session;
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM ids'),
	"$total|$total", "$total IDs from $sessions concurrent sessions, no duplicate");

is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FROM (
		SELECT id, lag(id) OVER (PARTITION BY session, idgen_gene(id, 2) ORDER BY n) AS prev
		FROM ids) s
	WHERE id <= prev}),
	'0',
	'within each session, the IDs of each gene strictly increase');

# The sessions really ran at the same time: many milliseconds hold IDs
# from more than one session.
my $shared_ms = $node->safe_psql(
	'postgres', q{
	SELECT count(*) FROM (
		SELECT idgen_snowflake_time(id) FROM ids
		GROUP BY 1 HAVING count(DISTINCT session) > 1) s});
cmp_ok($shared_ms, '>', 0, "sessions overlapped ($shared_ms shared milliseconds)");

is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FILTER (WHERE d.worker_id <> 5 OR d.datacenter_id <> 0),
	       count(DISTINCT d.gene)
	FROM ids, LATERAL idgen_snowflake_decode(id) d}),
	'0|4',
	'every ID carries this server identity; all four genes used');

is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FILTER (WHERE id % 4 <> (n % 4)) FROM ids WHERE session % 2 = 0}),
	'0', 'explicit genes are carried in the low bits');

# UUIDv7 from the same sessions: unique, and increasing within each session
# (idgen_uuid7() is increasing across the whole server).
my $half = $total / 2;
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM uuids'),
	"$half|$half", "$half UUIDv7 from $sessions concurrent sessions, no duplicate");
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FROM (
		SELECT id, lag(id) OVER (PARTITION BY session ORDER BY n) AS prev FROM uuids) s
	WHERE id <= prev}),
	'0', 'within each session, UUIDv7 strictly increase');

# Parallel workers share the generator.
my $par = $node->safe_psql(
	'postgres', q{
	CREATE TABLE src AS SELECT g FROM generate_series(1, 300000) g;
	ANALYZE src;
	SET parallel_setup_cost = 0;
	SET parallel_tuple_cost = 0;
	SET min_parallel_table_scan_size = 0;
	SET max_parallel_workers_per_gather = 2;
	CREATE TEMP TABLE par AS SELECT idgen_snowflake() AS id FROM src;
	SELECT count(*), count(DISTINCT id), (SELECT count(*) FROM ids i JOIN par p USING (id)) FROM par;
});
is($par, '300000|300000|0', 'parallel query: unique, and distinct from earlier IDs');

my $stats = $node->safe_psql('postgres',
	"SELECT ids, errors FROM idgen_stats WHERE kind = 'snowflake'");
my ($ids, $errors) = split /\|/, $stats;
cmp_ok($ids, '>=', $total + 300_000, 'idgen_stats counted every ID');
is($errors, '0', 'no errors counted');

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
