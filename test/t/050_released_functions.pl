# Scenario: a database whose idgen is still at a released version runs on
# the library of this tree, as it does between `make install` (or a package
# upgrade) and its ALTER EXTENSION idgen UPDATE, or for good.  A released
# script never changes (sql/released.sha256), so each of its C functions
# must keep the SQL signature it was released with: a column or an
# argument added later gets a symbol of its own (docs/development.md,
# "Releasing").  Every function of the released 1.0.0 script is called in
# a database at 1.0.0 and in one at default_version, and must give the
# same result in both; a function of 1.0.0 that no call here covers fails
# the test, so a released function cannot be missed.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

# A database's idgen sequencer stays while idle, so that the cached key
# stays in shared memory from the first call that finds it there to the
# call of idgen_seq_cache() (an idle sequencer that exits retires its
# database's entries, after a second under test/short_duties.conf).
my $node = idgen_node('released', 'idgen.sequence_bits' => 8, 'idgen.gene_bits' => 4,
	'idgen.sequencer_idle' => "'1h'");
my $default = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'idgen'");
$node->safe_psql('postgres', 'CREATE DATABASE released');
$node->safe_psql('postgres', 'CREATE DATABASE current');
$node->safe_psql('released', "CREATE EXTENSION idgen VERSION '1.0.0'");
$node->safe_psql('current', 'CREATE EXTENSION idgen');
is($node->safe_psql('released', "SELECT extversion FROM pg_extension WHERE extname = 'idgen'"),
	'1.0.0', 'database "released" has the extension at 1.0.0');
is($node->safe_psql('current', "SELECT extversion FROM pg_extension WHERE extname = 'idgen'"),
	$default, "database \"current\" has it at default_version ($default)");

# The SQLSTATE of a statement, or "ok": for the calls that must fail.
for my $db ('released', 'current')
{
	$node->safe_psql(
		$db, q{
		CREATE FUNCTION sqlstate_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN
			EXECUTE statement;
			RETURN 'ok';
		EXCEPTION WHEN OTHERS THEN
			RETURN SQLSTATE;
		END $$});
}

my $ts = q{'2026-01-02 03:04:05.678+00'};
my $id = "idgen_snowflake_compose($ts, 1, 2, 3, 4)";

# Each function of 1.0.0 (as regprocedure prints it) and statements that
# call it with every argument it has, and print what must be the same in
# both databases (not the IDs made now, or the keys made at random).
my %calls = (
	'idgen_snowflake()' => q{
		SELECT idgen_snowflake_time(idgen_snowflake())
			BETWEEN now() - interval '1 min' AND clock_timestamp() + interval '1 min'},
	'idgen_snowflake(bigint)' => 'SELECT idgen_gene(idgen_snowflake(5))',
	'idgen_snowflake_row()' =>
	  'SELECT id > 0, gene BETWEEN 0 AND 15, idgen_gene(id) = gene FROM idgen_snowflake_row()',
	'idgen_snowflake_row(bigint)' =>
	  'SELECT gene BETWEEN 0 AND 7, idgen_gene(id, 3) = gene FROM idgen_snowflake_row(3)',
	'idgen_gene(bigint)' => "SELECT idgen_gene($id)",
	'idgen_gene(bigint,bigint)' => 'SELECT idgen_gene(12345, 4), idgen_gene(12345, 7)',
	'idgen_snowflake_decode(bigint)' => "SELECT * FROM idgen_snowflake_decode($id)",
	'idgen_snowflake_time(bigint)' => "SELECT idgen_snowflake_time($id)",
	'idgen_snowflake_min(timestamp with time zone)' => "SELECT idgen_snowflake_min($ts)",
	'idgen_snowflake_compose(timestamp with time zone,bigint,bigint,bigint,bigint)' =>
	  "SELECT $id, idgen_snowflake_compose($ts, 1, 2)",
	'idgen_snowflake_debug(bigint)' => "SELECT idgen_snowflake_debug($id)",
	'idgen_snowflake_last()' =>
	  'SELECT idgen_snowflake(9) > 0; SELECT idgen_gene(idgen_snowflake_last())',
	'idgen_convert_column(regclass,name)' => q{
		CREATE TABLE converted (id bigserial PRIMARY KEY, note text);
		SELECT relation, column_name, regexp_replace(change, '[0-9]{6,}', 'N', 'g')
		FROM idgen_convert_column('converted', 'id');
		SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'converted'::regclass},
	'idgen_uuid7()' => 'SELECT idgen_uuid_version(idgen_uuid7()), idgen_uuid7() < idgen_uuid7()',
	'idgen_uuid7_last()' =>
	  'SELECT idgen_uuid7() IS NOT NULL; SELECT idgen_uuid_version(idgen_uuid7_last())',
	'idgen_uuid7(timestamp with time zone)' => "SELECT idgen_uuid7_time(idgen_uuid7($ts))",
	'idgen_uuid7_shifted(interval)' =>
	  q{SELECT idgen_uuid7_time(idgen_uuid7_shifted('-1 day')) < now() - interval '23 hours'},
	'idgen_uuid_version(uuid)' =>
	  q{SELECT idgen_uuid_version('00000000-0000-4000-8000-000000000000')},
	'idgen_uuid7_min(timestamp with time zone)' => "SELECT idgen_uuid7_min($ts)",
	'idgen_uuid7_time(uuid)' => "SELECT idgen_uuid7_time(idgen_uuid7_min($ts))",
	'idgen_expiry(timestamp with time zone,interval)' =>
	  q{SELECT idgen_expiry('2026-01-31 00:00+00', '1 mon'), idgen_expiry(NULL, '1 day')},
	'idgen_seq_next(text)' => q{SELECT idgen_seq_next('next'); SELECT idgen_seq_next('next')},
	'idgen_seq_next(text,bigint)' => q{SELECT array_agg(v) FROM idgen_seq_next('next_n', 3) v},
	'idgen_seq_current(text)' => q{SELECT idgen_seq_next('current'); SELECT idgen_seq_current('current')},
	'idgen_seq_set(text,bigint)' => q{SELECT idgen_seq_set('set', 10); SELECT idgen_seq_next('set')},
	'idgen_seq_set(text,bigint,boolean)' =>
	  q{SELECT idgen_seq_set('set3', 10, false); SELECT idgen_seq_next('set3')},
	'idgen_seq_set_if_absent(text,bigint)' => q{
		SELECT idgen_seq_set_if_absent('absent', 5);
		SELECT idgen_seq_set_if_absent('absent', 9);
		SELECT idgen_seq_next('absent')},
	'idgen_seq_configure(text,bigint,bigint,interval,bigint,bigint,bigint,boolean,bigint)' => q{
		SELECT idgen_seq_configure('configured', step => 5, max_value => 100, ttl => '1 day',
			cache => 0, start => 10, min_value => 10, cycle => true, restart => 95);
		SELECT step, start, min_value, max_value, cycle, ttl, cache FROM idgen_seq WHERE key = 'configured';
		SELECT array_agg(v) FROM idgen_seq_next('configured', 3) v;
		SELECT idgen_seq_configure('configured', ttl => '0', restart => 40);
		SELECT ttl IS NULL FROM idgen_seq WHERE key = 'configured';
		SELECT idgen_seq_next('configured');
		SELECT sqlstate_of($$SELECT idgen_seq_configure('configured', step => 0)$$),
		       sqlstate_of($$SELECT idgen_seq_configure('configured', cache => -1)$$),
		       sqlstate_of($$SELECT idgen_seq_configure('configured', ttl => '-1 day')$$)},
	'idgen_seq_drop(text)' => q{
		SELECT idgen_seq_next('dropped');
		SELECT idgen_seq_drop('dropped');
		SELECT idgen_seq_drop('dropped')},
	'idgen_seq_purge()' => q{
		SELECT idgen_seq_configure('expiring', ttl => '1 s');
		UPDATE idgen_seq SET last_used = now() - interval '1 hour' WHERE key = 'expiring';
		SELECT idgen_seq_purge() >= 0;
		SELECT count(*) FROM idgen_seq WHERE key = 'expiring'},
	'idgen_seq_latest(text,bigint,boolean)' => q{
		BEGIN;
		SELECT idgen_seq_latest('latest', 0, false) IS NULL;
		SELECT idgen_seq_next('latest');
		SELECT idgen_seq_latest('latest', 0, false);
		COMMIT},
	'idgen_seq_served(bigint)' => 'SELECT idgen_seq_served(0), idgen_seq_served(100) IS NOT NULL',
	'idgen_seq_cache()' => q{
		SELECT key, cache, served >= 1, segment_size >= 10 FROM idgen_seq_cache() WHERE key = 'cached'},
	'idgen_worker_acquire(text,interval,bigint,boolean)' => q{
		SELECT worker_id >= 0, datacenter_id >= 0, token > 0, expires_at > now()
		FROM idgen_worker_acquire('acquired', '1 min', 16, false)},
	'idgen_worker_renew(bigint,bigint,interval,timestamp with time zone)' => q{
		WITH a AS (SELECT * FROM idgen_worker_acquire('renewed', '1 min'))
		SELECT idgen_worker_renew(worker_id, token, '1 hour') > now() + interval '59 min' FROM a;
		WITH s AS (SELECT * FROM idgen_server_lease(5151, 'a server renewing', '1 min'))
		SELECT idgen_worker_renew(worker_id, token, '1 hour', now()) > now() + interval '59 min' FROM s},
	'idgen_worker_release(bigint,bigint,timestamp with time zone)' => q{
		WITH a AS (SELECT * FROM idgen_worker_acquire('released', '1 min'))
		SELECT idgen_worker_release(worker_id, token) FROM a;
		WITH s AS (SELECT * FROM idgen_server_lease(5252, 'a server releasing', '1 min'))
		SELECT idgen_worker_release(worker_id, token, now()) FROM s},
	'idgen_worker_purge()' => 'SELECT idgen_worker_purge() >= 0',
	'idgen_worker_reset_horizon(bigint,bigint,timestamp with time zone)' => q{
		CREATE TABLE ended AS
		WITH a AS (SELECT * FROM idgen_worker_acquire('reset', '1 min'))
		SELECT datacenter_id, worker_id, idgen_worker_release(worker_id, token) AS released FROM a;
		UPDATE idgen_worker_lease SET expires_at = now() - interval '1 s'
		WHERE holder = 'reset';
		SELECT released, idgen_worker_reset_horizon(datacenter_id, worker_id, '2026-01-01 00:00+00') IS NOT NULL
		FROM ended},
	'idgen_server_lease(bigint,text,interval,bigint,bigint,timestamp with time zone)' => q{
		SELECT worker_id >= 0, token > 0, expires_at > now()
		FROM idgen_server_lease(4242, 'a server', '1 min', NULL, NULL, NULL)},
	'idgen_stats()' => 'SELECT kind, ids > 0 FROM idgen_stats() ORDER BY kind',
	'idgen_stats_reset()' => q{
		SELECT idgen_stats_reset();
		SELECT kind, stats_reset > now() - interval '1 min' FROM idgen_stats() ORDER BY kind},
	'idgen_info()' => q{
		SELECT (pg_catalog.row_to_json(i)::jsonb - ARRAY['years_left', 'horizon', 'horizon_lead_ms',
			'horizon_persists', 'horizon_persisted_at', 'sequencers'])::text
		FROM idgen_info() i},
	'idgen_identity()' => 'SELECT source, leased, state, datacenter_id, worker_id FROM idgen_identity()',
	'idgen_snowflake_trigger()' => q{
		CREATE TABLE parent (id bigint PRIMARY KEY DEFAULT idgen_snowflake(6));
		CREATE TABLE child (id bigint PRIMARY KEY, parent_id bigint);
		CREATE TRIGGER child_id BEFORE INSERT ON child
			FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id', 'parent_id');
		INSERT INTO parent DEFAULT VALUES;
		INSERT INTO child (parent_id) SELECT id FROM parent;
		SELECT idgen_gene(id) FROM child},
	'idgen_seq_replica_trigger()' => q{
		SELECT idgen_seq_set('replicated', 50);
		SET session_replication_role = replica;
		UPDATE idgen_seq SET value = 20 WHERE key = 'replicated';
		RESET session_replication_role;
		SELECT value FROM idgen_seq WHERE key = 'replicated'},
	'idgen_worker_lease_replica_trigger()' => q{
		SELECT worker_id >= 0 FROM idgen_worker_acquire('merged', '1 min');
		SET session_replication_role = replica;
		UPDATE idgen_worker_lease SET horizon = '2000-01-01 00:00+00' WHERE holder = 'merged';
		RESET session_replication_role;
		SELECT horizon > '2000-01-01 00:00+00' FROM idgen_worker_lease WHERE holder = 'merged'},
	'idgen_identity_announce()' => q{
		SELECT idgen_identity_announce();
		SELECT datacenter_id, worker_id FROM idgen_identity_claim
		WHERE system_identifier = (SELECT system_identifier FROM pg_control_system())},
	'idgen_identity_claim_check()' => q{
		INSERT INTO idgen_identity_claim VALUES (4242, 9, 9, 'another server', now());
		SELECT sqlstate_of('UPDATE idgen_identity_claim SET instance = instance WHERE system_identifier = 4242');
		SELECT count(*) FROM idgen_identity_claim WHERE system_identifier = 4242;
		SELECT identity_clash IS NULL FROM idgen_info()},
	'idgen_public_key_guard()' => q{
		SELECT sqlstate_of('DELETE FROM idgen_public_key'),
		       sqlstate_of('UPDATE idgen_public_key SET version = version + 1'),
		       sqlstate_of('TRUNCATE idgen_public_key')},
	'idgen_public_key_changed()' => q{
		SELECT idgen_public_rotate();
		SELECT idgen_private(idgen_public(77))},
	'idgen_public(bigint)' => 'SELECT idgen_public(12345), idgen_private(idgen_public(12345))',
	'idgen_private(text)' => 'SELECT idgen_private(idgen_public(12345))',
	'idgen_public_bigint(bigint)' => 'SELECT idgen_public_bigint(12345)',
	'idgen_private_bigint(bigint)' => 'SELECT idgen_private_bigint(idgen_public_bigint(12345))',
	'idgen_private_bigint(bigint,bigint)' =>
	  'SELECT idgen_private_bigint(idgen_public_bigint(12345), 1)',
	'idgen_public_rotate()' => q{
		SELECT idgen_public_rotate();
		SELECT version, retired_at IS NULL FROM idgen_public_key ORDER BY version},
	'idgen_public_retire(bigint)' => q{
		SELECT idgen_public_retire(1);
		SELECT version, retired_at IS NULL FROM idgen_public_key ORDER BY version;
		SELECT idgen_private(idgen_public(12345))},
	'idgen_public_key_export()' =>
	  q{SELECT jsonb_array_length(idgen_public_key_export()) >= 1},
	'idgen_public_key_import(jsonb)' => 'see below',
	'idgen_speck64(bytea,bigint)' =>
	  q{SELECT idgen_speck64('\x000102030405060708090a0b0c0d0e0f', 12345)},);

my @functions = split /\n/, $node->safe_psql(
	'released', q{
	SELECT p.oid::regprocedure FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
	WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
	  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idgen')
	ORDER BY 1::text});
my @uncovered = grep { !exists $calls{$_} } @functions;
my @unknown = grep { my $f = $_; !grep { $_ eq $f } @functions } sort keys %calls;
is(scalar(@functions), 60, '1.0.0 has 60 functions');
is("@uncovered", '', 'every function of 1.0.0 has a call here');
is("@unknown", '', 'every call here is of a function of 1.0.0');

# The public ID keys are random: both databases get the same, by a round
# trip of export and import, before the public ID functions are called.
{
	my $keys = $node->safe_psql('released',
		'SELECT idgen_public_rotate(); SELECT idgen_public_key_export()');
	$keys =~ s/^\d+\n//;
	for my $db ('released', 'current')
	{
		my $imported = $node->safe_psql($db,
			"SELECT idgen_public_key_import('$keys'::jsonb); SELECT count(*) FROM idgen_public_key");
		like($imported, qr/\n1$/, "idgen_public_key_import(jsonb): the key is in \"$db\"");
	}
	is($node->safe_psql('released', 'SELECT idgen_public_key_export()'),
		$node->safe_psql('current', 'SELECT idgen_public_key_export()'),
		'idgen_public_key_import(jsonb): both databases export the same key');
}

# A cached key is served from shared memory once its database's idgen
# sequencer has reserved its first segment: call it until it is.
for my $db ('released', 'current')
{
	$node->safe_psql($db, q{SELECT idgen_seq_configure('cached', cache => 10)});
	$node->poll_query_until($db, q{
		SELECT idgen_seq_next('cached') > 0 AND EXISTS (SELECT FROM idgen_seq_cache() WHERE key = 'cached')})
	  or die "the cached key is not served from shared memory in \"$db\"";
}

for my $function (sort grep { $calls{$_} ne 'see below' } keys %calls)
{
	my %out;
	for my $db ('released', 'current')
	{
		my ($ret, $stdout, $stderr) = $node->psql($db, $calls{$function},
			extra_params => [ '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose' ]);
		is($ret, 0, "$function: runs in \"$db\"") or diag($stderr);
		$out{$db} = $stdout;
	}
	isnt($out{released}, '', "$function: prints a result");
	is($out{released}, $out{current}, "$function: the same result at 1.0.0 as at $default");
}

no_crash_logged($node);
done_testing();
