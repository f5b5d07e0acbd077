# Scenario: the "Attack surface" table of docs/security.md lists every SQL object of
# the extension with who may use it, and must not drift from the catalog.
# The table is rebuilt here from pg_proc, pg_class and their ACLs (as
# aclexplode reads them, every grantee) after CREATE EXTENSION, and
# compared line by line with that table.  Who may use an object:
#   PUBLIC   every role (EXECUTE, or SELECT, granted to PUBLIC), and no
#            other role holds anything on it but the owner
#   granted  the roles the administrator grants it to (nobody by default):
#            no role but the owner holds anything on it
#   owner    the extension's owner only: a table no grant should open
# Any other privilege (a role's, or one the owner lacks) shows in place of
# those words, so the comparison fails and names it.  No column of a table
# or view has privileges of its own.  Every function and view has a
# description.
#
# The table must hold however the extension was installed:
#   - in a database with no default privileges, in public;
#   - in one where the installing role's default privileges (ALTER DEFAULT
#     PRIVILEGES, for all schemas and for public) grant EXECUTE on functions
#     and ALL on tables to a role r, and take PUBLIC's EXECUTE away: r then
#     cannot write idgen_seq or call idgen_seq_set, and a role with no
#     grants still generates;
#   - in a schema of its own (the README's installation), with default
#     privileges for that schema granting r the same.
#
# Look-alikes: in a database carried over from before PostgreSQL 15, where
# PUBLIC may create in public, an unprivileged role creates functions named
# like idgen's that take the types the README's calls pass
# (idgen_snowflake(integer): idgen_gene() returns int), and a superuser then
# runs those calls.  idgen has one signature per name and argument count,
# its integer arguments bigint (so that drivers' parameters resolve), so
# types keep no look-alike out; the test pins which calls they capture (an
# integer literal for idgen_gene, idgen_snowflake or
# idgen_snowflake_decode, idgen_gene's int result, a varchar key, a string
# literal for a timestamptz or interval parameter, an integer for a
# sequence's bigint value), and the query docs/security.md gives to find them.
# What closes it is the README's installation: with idgen in a schema of
# its own, names written with that schema run idgen's functions whatever
# public holds, and once PUBLIC may not create in public and the
# look-alikes are dropped, unqualified calls run idgen's too.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Basename;
use IdgenTest;

my $node = idgen_node('surface');

# Every member of the extension, as one row each: functions with
# their argument types (as regprocedure prints them), views and tables;
# with who may use it.  $schema, when given, is put on search_path so that
# names print as they do for an extension in public.
sub surface
{
	my ($db, $schema) = @_;
	my $path = $schema ? "SET search_path = $schema, public;" : '';
	my $rows = $node->safe_psql($db, $path . q{
	WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'idgen'),
	members AS (
		SELECT 'function' AS kind,
		       p.oid::regprocedure::text AS name, p.proowner AS owner,
		       coalesce(p.proacl, acldefault('f', p.proowner)) AS acl,
		       acldefault('f', p.proowner) AS dflt, 'EXECUTE' AS use
		FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		  AND d.refobjid = (SELECT oid FROM ext)
		UNION ALL
		SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'r' THEN 'table' ELSE c.relkind::text END,
		       c.relname, c.relowner,
		       coalesce(c.relacl, acldefault('r', c.relowner)),
		       acldefault('r', c.relowner), 'SELECT'
		FROM pg_depend d JOIN pg_class c ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
		WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		  AND d.refobjid = (SELECT oid FROM ext)
	),
	-- what any role but the owner holds, and what the owner lacks of what
	-- an object's owner holds by default
	held AS (
		SELECT m.*,
		       (SELECT string_agg(g, ',' ORDER BY g)
		        FROM (SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
		                     || ':' || a.privilege_type || CASE WHEN a.is_grantable THEN '*' ELSE '' END AS g
		              FROM (SELECT * FROM aclexplode(m.acl)
		                    EXCEPT SELECT * FROM aclexplode(m.dflt) WHERE grantee = m.owner) a) s) AS extra,
		       (SELECT string_agg(g, ',' ORDER BY g)
		        FROM (SELECT 'owner without ' || a.privilege_type AS g
		              FROM (SELECT * FROM aclexplode(m.dflt) WHERE grantee = m.owner
		                    EXCEPT SELECT * FROM aclexplode(m.acl)) a) s) AS missing
		FROM members m
	)
	SELECT '| `' || name || '` | ' || kind || ' | ' ||
	       CASE WHEN missing IS NOT NULL THEN missing
	            WHEN extra IS NULL THEN CASE WHEN kind = 'table' THEN 'owner' ELSE 'granted' END
	            WHEN extra = 'PUBLIC:' || use THEN 'PUBLIC'
	            ELSE extra END || ' |'
	FROM held ORDER BY kind, name COLLATE "C"
	});
	return split /\n/, $rows;
}

# Columns of the extension's tables and views that have privileges of
# their own: none should.
sub column_grants
{
	my ($db) = @_;
	return $node->safe_psql($db, q{
	SELECT coalesce(string_agg(a.attrelid::regclass || '.' || a.attname || ' ' || a.attacl::text, ', '), '')
	FROM pg_depend d JOIN pg_attribute a ON d.classid = 'pg_class'::regclass AND a.attrelid = d.objid
	WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idgen')
	  AND a.attacl IS NOT NULL});
}

my @catalog = surface('postgres');
cmp_ok(scalar @catalog, '>', 30, scalar(@catalog) . ' objects in the extension');

# The documented table: the rows between the markers, without their last
# column (what the object is for), in the same order.
my $readme = slurp_file(dirname(__FILE__) . '/../../docs/security.md');
my ($section) = $readme =~ /<!-- attack surface -->\n(.*?)<!-- end attack surface -->/s;
ok(defined $section, 'docs/security.md has the attack surface table');
my @readme = map { s/^(\| `[^`]+` \| \w+ \| \w+ \|).*$/$1/r }
  grep { /^\| `/ } split /\n/, ($section // '');
is_deeply(\@catalog, \@readme, 'docs/security.md lists every object with who may use it, as the catalog says')
  or diag(join("\n", 'catalog:', @catalog));
is(column_grants('postgres'), '', 'no column has privileges of its own');

# Every function and view has a description (COMMENT ON), so that \df+ and
# \dv+ document them.
is($node->safe_psql('postgres', q{
	SELECT coalesce(string_agg(d.objid::regprocedure::text, ', '), '')
	FROM pg_depend d
	WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idgen')
	  AND d.classid = 'pg_proc'::regclass
	  AND obj_description(d.objid, 'pg_proc') IS NULL}),
	'', 'every function has a COMMENT');
is($node->safe_psql('postgres', q{
	SELECT coalesce(string_agg(c.relname, ', '), '')
	FROM pg_depend d JOIN pg_class c ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
	WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idgen')
	  AND c.relkind = 'v' AND obj_description(c.oid, 'pg_class') IS NULL}),
	'', 'every view has a COMMENT');

# Run $sql in $db as $role; its output and error text together.
sub as_role
{
	my ($db, $role, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql($db, $sql,
		extra_params => [ '-U', $role, '-v', 'VERBOSITY=verbose' ]);
	return "$stdout\n$stderr";
}

# --- Default privileges ------------------------------------------------------

$node->safe_psql('postgres', q{
	CREATE ROLE r LOGIN;
	CREATE ROLE nobody LOGIN;
	CREATE DATABASE defaults;
	CREATE DATABASE own_schema;
});

# The installing role's default privileges, for all schemas and for public;
# r may grant what it got.
$node->safe_psql('defaults', q{
	ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO r;
	ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO r WITH GRANT OPTION;
	ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, UPDATE ON TABLES TO nobody;
	ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
	CREATE EXTENSION idgen;
});
my @defaults = surface('defaults');
is_deeply(\@defaults, \@readme,
	'default privileges granting to r and revoking from PUBLIC: the catalog is the documented table')
  or diag(join("\n", 'catalog:', @defaults));
is(column_grants('defaults'), '', 'default privileges: no column has privileges of its own');

like(as_role('defaults', 'r', 'UPDATE idgen_seq SET value = 0'),
	qr/42501: permission denied for table idgen_seq/, 'r cannot write idgen_seq');
like(as_role('defaults', 'r', 'SELECT holder FROM idgen_worker_lease'),
	qr/42501: permission denied for table idgen_worker_lease/, 'r cannot read idgen_worker_lease');
like(as_role('defaults', 'r', "SELECT idgen_seq_set('k', 1)"),
	qr/42501: permission denied for function idgen_seq_set/, 'r cannot call idgen_seq_set');
like(as_role('defaults', 'nobody', 'SELECT count(*) FROM idgen_seq_keys'),
	qr/42501: permission denied for view idgen_seq_keys/, 'nobody cannot read idgen_seq_keys');
like(as_role('defaults', 'nobody',
		'SELECT idgen_snowflake() > 0 AS generates, count(*) > 0 AS stats FROM idgen_stats'),
	qr/^ *t *\| *t *$/m, 'a role with no grants generates and reads idgen_stats (PUBLIC)');

# What the install script left are the objects' initial privileges
# (pg_init_privs): pg_dump dumps none of them.
my ($dump) = run_command([ 'pg_dump', '--schema-only', '--dbname', $node->connstr('defaults') ]);
is(join("\n", grep { /^(GRANT|REVOKE)\b.*\bidgen_/ } split /\n/, $dump), '',
	'default privileges: pg_dump dumps no privilege of the extension\'s objects');

# In a schema of its own, with default privileges for that schema.
$node->safe_psql('own_schema', q{
	CREATE SCHEMA idgen;
	ALTER DEFAULT PRIVILEGES IN SCHEMA idgen GRANT ALL ON TABLES TO r;
	ALTER DEFAULT PRIVILEGES IN SCHEMA idgen GRANT EXECUTE ON FUNCTIONS TO r;
	CREATE EXTENSION idgen SCHEMA idgen;
	GRANT USAGE ON SCHEMA idgen TO PUBLIC;
});
my @own = surface('own_schema', 'idgen');
is_deeply(\@own, \@readme, 'in its own schema with default privileges there: the catalog is the documented table')
  or diag(join("\n", 'catalog:', @own));
like(as_role('own_schema', 'r', 'UPDATE idgen.idgen_seq SET value = 0'),
	qr/42501: permission denied for table idgen_seq/, 'own schema: r cannot write idgen_seq');
like(as_role('own_schema', 'r', "SELECT idgen.idgen_seq_set('k', 1)"),
	qr/42501: permission denied for function idgen_seq_set/, 'own schema: r cannot call idgen_seq_set');
like(as_role('own_schema', 'nobody', 'SELECT idgen.idgen_snowflake(idgen.idgen_gene(42, 0)) > 0'),
	qr/^ *t *$/m, 'own schema: a role with no grants generates');

# --- Look-alikes -------------------------------------------------------------

# A database as pg_upgrade carries it over from before 15: PUBLIC may
# create in public, where the extension is.  mallory's functions say when
# they run, and as whom.
$node->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	CREATE DATABASE upgraded;
});
$node->safe_psql('upgraded', q{
	GRANT CREATE ON SCHEMA public TO PUBLIC;
	CREATE EXTENSION idgen;
});

# mallory's look-alike: $signature returning $returns, raising a notice
# that names it and the role it runs as, then running $return.
sub look_alike
{
	my ($signature, $returns, $return) = @_;
	return as_role('upgraded', 'mallory', qq{
		CREATE FUNCTION public.$signature RETURNS $returns LANGUAGE plpgsql AS \$\$
		BEGIN
			RAISE NOTICE 'captured by %, running as %', '$signature', current_user;
			$return;
		END \$\$;});
}

# What a superuser's call prints.
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
sub superuser_runs
{
	my ($sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('upgraded', $sql);
	return "$stdout\n$stderr";
}

# The look-alikes can be created; which calls they capture.
unlike(look_alike('idgen_snowflake(gene integer)', 'bigint', 'RETURN -1'), qr/ERROR/,
	'mallory creates idgen_snowflake(integer)');
unlike(look_alike('idgen_seq_next(key varchar)', 'bigint', 'RETURN -1'), qr/ERROR/,
	'mallory creates idgen_seq_next(varchar)');
unlike(look_alike('idgen_gene(value integer, bits integer)', 'integer', 'RETURN 0'), qr/ERROR/,
	'mallory creates idgen_gene(integer, integer)');
unlike(look_alike('idgen_snowflake_decode(id integer, OUT ts timestamptz, OUT datacenter_id int, '
		. 'OUT worker_id int, OUT sequence int, OUT gene int)', 'record', 'RETURN'),
	qr/ERROR/, 'mallory creates idgen_snowflake_decode(integer)');
unlike(look_alike('idgen_uuid7(ts text)', 'uuid', 'RETURN NULL'), qr/ERROR/,
	'mallory creates idgen_uuid7(text)');
unlike(look_alike('idgen_seq_set_if_absent(key text, value integer)', 'boolean', 'RETURN NULL'),
	qr/ERROR/, 'mallory creates idgen_seq_set_if_absent(text, integer)');
unlike(look_alike('idgen_seq_configure(key text, ttl text)', 'boolean', 'RETURN NULL'),
	qr/ERROR/, 'mallory creates idgen_seq_configure(text, text)');

for my $case (
	# an unknown literal goes to text, the preferred type of its category
	[ "SELECT idgen_seq_next('conv:42') > 0", "idgen_seq_next('conv:42')", 0 ],
	[ 'SELECT (idgen_snowflake_decode(idgen_snowflake())).ts IS NOT NULL',
	  'idgen_snowflake_decode(idgen_snowflake())', 0 ],
	# an int, a key of another type than text, a time as a string literal
	[ 'SELECT (idgen_snowflake_decode(0)).ts IS NULL', 'idgen_snowflake_decode(0)', 1 ],
	[ 'SELECT idgen_gene(42, 4) = 0', 'idgen_gene(42, 4)', 1 ],
	[ 'SELECT idgen_snowflake(0) = -1', 'idgen_snowflake(0)', 1 ],
	[ 'SELECT idgen_snowflake((idgen_snowflake_row(0)).gene) = -1',
	  'idgen_snowflake((idgen_snowflake_row(0)).gene)', 1 ],
	[ "SELECT idgen_seq_next('conv:42'::varchar) = -1", "idgen_seq_next('conv:42'::varchar)", 1 ],
	[ "SELECT idgen_uuid7('2020-05-01 12:00+00') IS NULL", "idgen_uuid7('2020-05-01 12:00+00')", 1 ],
	[ "SELECT idgen_seq_set_if_absent('invoice:2026', 41000) IS NULL",
	  "idgen_seq_set_if_absent('invoice:2026', 41000)", 1 ],
	[ "SELECT idgen_seq_configure('conv:42', ttl => '24 hours') IS NULL",
	  "idgen_seq_configure('conv:42', ttl => '24 hours')", 1 ])
{
	my ($sql, $call, $captured) = @$case;
	my $out = superuser_runs($sql);
	like($out, qr/^t$/m, "$call: the expected function ran");
	if ($captured)
	{
		like($out, qr/captured by .*, running as \Q$superuser\E/,
			"$call still runs a look-alike taking its argument's type, as the superuser");
	}
	else
	{
		unlike($out, qr/captured/, "$call runs no look-alike");
	}
}

# The query of docs/security.md finds them.
is($node->safe_psql('upgraded', q{
	SELECT string_agg(p.oid::regprocedure || ' ' || p.proowner::regrole, ', '
	                  ORDER BY p.oid::regprocedure::text COLLATE "C")
	FROM pg_proc p
	WHERE p.proname LIKE 'idgen%'
	  AND NOT EXISTS (SELECT FROM pg_depend d
	                  WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')}),
	'idgen_gene(integer,integer) mallory, '
	. 'idgen_seq_configure(text,text) mallory, idgen_seq_next(character varying) mallory, '
	. 'idgen_seq_set_if_absent(text,integer) mallory, idgen_snowflake(integer) mallory, '
	. 'idgen_snowflake_decode(integer) mallory, idgen_uuid7(text) mallory',
	'the look-alikes, as the query of docs/security.md lists them');

# Once PUBLIC may not create in public, no new one can be made.
$node->safe_psql('upgraded', 'REVOKE CREATE ON SCHEMA public FROM PUBLIC');
like(look_alike('idgen_snowflake_time(id integer)', 'timestamptz', 'RETURN NULL'),
	qr/42501: permission denied for schema public/, 'after REVOKE CREATE, mallory creates nothing');

# The README's installation: idgen in a schema of its own, which only its
# owner may create in, in a database where PUBLIC still may create in
# public and mallory has made idgen_snowflake(integer) there.  A call with
# idgen's schema runs idgen's function; an unqualified one through public
# is captured, until PUBLIC loses CREATE on public and the query of
# docs/security.md finds the look-alike to drop.
$node->safe_psql('postgres', 'CREATE DATABASE upgraded_own');
$node->safe_psql('upgraded_own', q{
	GRANT CREATE ON SCHEMA public TO PUBLIC;
	CREATE SCHEMA idgen;
	CREATE EXTENSION idgen SCHEMA idgen;
	GRANT USAGE ON SCHEMA idgen TO PUBLIC;
	ALTER DATABASE upgraded_own SET search_path = "$user", public, idgen;
});
unlike(as_role('upgraded_own', 'mallory', q{
		CREATE FUNCTION public.idgen_snowflake(gene integer) RETURNS bigint LANGUAGE plpgsql AS $$
		BEGIN
			RAISE NOTICE 'captured by idgen_snowflake(integer), running as %', current_user;
			RETURN -1;
		END $$;}),
	qr/ERROR/, 'own schema: mallory creates public.idgen_snowflake(integer)');
like(as_role('upgraded_own', 'mallory', 'CREATE FUNCTION idgen.idgen_snowflake(gene integer) RETURNS bigint LANGUAGE sql AS $$ SELECT -1::bigint $$'),
	qr/42501: permission denied for schema idgen/,
	'own schema: nobody but its owner creates in idgen\'s schema');
{
	my ($ret, $out, $err) = $node->psql('upgraded_own',
		'SELECT idgen.idgen_snowflake(idgen.idgen_gene(42, 0)) > 0');
	is("$out$err", 't', 'own schema: the call written with its schema runs idgen\'s function');
	($ret, $out, $err) = $node->psql('upgraded_own', 'SELECT idgen_snowflake(idgen_gene(42, 0))');
	like("$out\n$err", qr/captured by idgen_snowflake\(integer\), running as \Q$superuser\E/,
		'own schema: the unqualified call through public is captured');
	$node->safe_psql('upgraded_own', 'REVOKE CREATE ON SCHEMA public FROM PUBLIC');
	is($node->safe_psql('upgraded_own', q{
		SELECT string_agg(p.oid::regprocedure::text, ', ') FROM pg_proc p
		WHERE p.proname LIKE 'idgen%'
		  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
		                  AND d.objid = p.oid AND d.deptype = 'e')}),
		'idgen_snowflake(integer)', 'own schema: the query of docs/security.md finds the look-alike');
	$node->safe_psql('upgraded_own', 'DROP FUNCTION public.idgen_snowflake(integer)');
	($ret, $out, $err) = $node->psql('upgraded_own', 'SELECT idgen_snowflake(idgen_gene(42, 0)) > 0');
	is("$out$err", 't', 'own schema: once it is dropped, the unqualified call runs idgen\'s function');
}

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
