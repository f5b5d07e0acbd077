# Scenario: idgen installed but not in shared_preload_libraries.  CREATE
# EXTENSION works, with a WARNING saying so; the functions that need shared memory fail with SQLSTATE
# 55000 and a hint naming shared_preload_libraries; the pure functions work.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

# The layout settings still come from postgresql.conf.
my $node = idgen_node('not_preloaded', shared_preload_libraries => "''",
	'idgen.sequence_bits' => 8, 'idgen.gene_bits' => 4);

# CREATE EXTENSION says at once what is missing (it used to succeed in
# silence, and the first INSERT with DEFAULT idgen_snowflake() failed).
{
	$node->safe_psql('postgres', 'DROP EXTENSION idgen');
	my ($ret, $stdout, $stderr) = $node->psql('postgres', 'CREATE EXTENSION idgen',
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	is($ret, 0, 'without preload, CREATE EXTENSION succeeds');
	like($stderr, qr/WARNING:  55000: idgen is not in shared_preload_libraries/,
		'and warns that the library is not preloaded');
	like($stderr, qr/HINT:  Add 'idgen' to shared_preload_libraries in postgresql.conf and restart the server\./,
		'saying how to preload it');
}

for my $call ('SELECT idgen_snowflake()', 'SELECT idgen_snowflake(0)',
	'SELECT idgen_uuid7()', 'SELECT * FROM idgen_stats', 'SELECT idgen_stats_reset()')
{
	my $err = sql_error($node, $call);
	like($err, qr/ERROR:  55000: idgen_\w+\(\) requires idgen to be loaded via shared_preload_libraries/,
		"$call: 55000 error");
	like($err, qr/HINT:  Add 'idgen' to shared_preload_libraries in postgresql.conf and restart the server\./,
		"$call: hint says how to preload");
}

# LOAD does not help: shared memory exists only from server start.
like(sql_error($node, "LOAD 'idgen'; SELECT idgen_snowflake()"),
	qr/requires idgen to be loaded via shared_preload_libraries/, 'LOAD is not enough');

is( $node->safe_psql(
		'postgres', q{
	SELECT idgen_gene(191, 4), idgen_gene(189),
	       (idgen_snowflake_decode((1::bigint << 22) | (2 << 17) | (3 << 12) | (4 << 4) | 5)) = ('2024-01-01 00:00:00.001+00'::timestamptz, 2, 3, 4, 5),
	       idgen_snowflake_time(4194304) = '2024-01-01 00:00:00.001+00',
	       idgen_snowflake_min('2024-01-01 00:00:00.001+00'),
	       idgen_snowflake_debug(1369734562062337) LIKE '0|%|00001|00010|00000000|0001 timestamp=%'}),
	'15|13|t|t|4194304|t',
	'pure functions work without preload, with the configured layout');

like(sql_error($node, 'SELECT idgen_gene(1); SET idgen.gene_bits = 2'),
	qr/parameter "idgen.gene_bits" cannot be changed now/,
	'layout settings cannot be changed in a session');
is($node->safe_psql('postgres', 'SET idgen.gene_bits = 2; SELECT idgen_gene(189)'),
	'13', 'a value SET before the library loads is ignored');

is( $node->safe_psql(
		'postgres', q{
	SELECT idgen_uuid7_time('017f22e2-79b0-7cc3-98c4-dc0c0c07398f') = '2022-02-22 19:22:22+00',
	       idgen_uuid7_min('2022-02-22 19:22:22+00'),
	       idgen_uuid7_time(idgen_uuid7(timestamptz '2022-02-22 19:22:22+00')) = '2022-02-22 19:22:22+00'}),
	't|017f22e2-79b0-7000-8000-000000000000|t',
	'UUIDv7 readers and idgen_uuid7(ts) work without preload');

is($node->safe_psql('postgres',
		'SELECT preloaded, layout_valid, shmem_bytes IS NULL FROM idgen_info()'),
	'f|t|t', 'idgen_info reports it is not preloaded');

# Without shared memory, a cached per-key sequence is served from the table,
# transactionally: correct, without the speed.
is( $node->safe_psql(
		'postgres', q{
	SELECT idgen_seq_configure('cached', cache => 10);
	BEGIN; SELECT idgen_seq_next('cached'); ROLLBACK;
	SELECT idgen_seq_next('cached'), idgen_seq_next('cached'), idgen_seq_current('cached'),
	       (SELECT count(*) FROM idgen_seq_cache)}),
	"\n1\n1|2|2|0",
	'a cached key falls back to the transactional mode without preload (a rollback gives 1 back)');
# ... and says so: a NOTICE when it is configured, and the view.
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"SELECT idgen_seq_configure('cached2', cache => 10)");
	like($stderr,
		qr/NOTICE:  sequence key "cached2" is served transactionally in this database, not from shared memory/,
		'without preload: configuring a cached key raises a NOTICE');
	like($stderr, qr/idgen is not in shared_preload_libraries/, 'which says why');
	is($node->safe_psql('postgres',
			"SELECT string_agg(key || ': ' || served, ', ' ORDER BY key) FROM idgen_seq_keys"),
		'cached: transactional: idgen is not in shared_preload_libraries, '
		  . 'cached2: transactional: idgen is not in shared_preload_libraries',
		'without preload: idgen_seq_keys says why the cached keys are served transactionally');
}

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
