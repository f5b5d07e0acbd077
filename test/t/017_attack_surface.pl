# Scenario: the README's "Attack surface" table lists every SQL object of
# the extension with who may use it, and must not drift from the catalog.
# The table is rebuilt here from pg_proc, pg_class and their ACLs (as
# aclexplode reads them) after CREATE EXTENSION, and compared line by line
# with the README's.  Who may use an object:
#   PUBLIC   every role (EXECUTE, or SELECT, granted to PUBLIC)
#   granted  the roles the administrator grants it to (nobody by default)
#   owner    the extension's owner only: a table no grant should open
# It also checks that every function and view has a description.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Basename;
use IdgenTest;

my $node = idgen_node('surface');

# Every member of the extension: functions with their argument types (as
# regprocedure prints them),
# views and tables; with whether PUBLIC may use it.
my $catalog = $node->safe_psql('postgres', q{
	WITH members AS (
		SELECT 'function' AS kind,
		       p.oid::regprocedure::text AS name,
		       EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
		               WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') AS public
		FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idgen')
		UNION ALL
		SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'r' THEN 'table' ELSE c.relkind::text END,
		       c.relname,
		       EXISTS (SELECT FROM aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
		               WHERE a.grantee = 0 AND a.privilege_type = 'SELECT')
		FROM pg_depend d JOIN pg_class c ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
		WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idgen')
	)
	SELECT '| `' || name || '` | ' || kind || ' | ' ||
	       CASE WHEN public THEN 'PUBLIC' WHEN kind = 'table' THEN 'owner' ELSE 'granted' END || ' |'
	FROM members ORDER BY kind, name COLLATE "C"
});
my @catalog = split /\n/, $catalog;
cmp_ok(scalar @catalog, '>', 30, scalar(@catalog) . ' objects in the extension');

# The README's table: the rows between the markers, without their last
# column (what the object is for), in the same order.
my $readme = slurp_file(dirname(__FILE__) . '/../../README.md');
my ($section) = $readme =~ /<!-- attack surface -->\n(.*?)<!-- end attack surface -->/s;
ok(defined $section, 'the README has the attack surface table');
my @readme = map { s/^(\| `[^`]+` \| \w+ \| \w+ \|).*$/$1/r }
  grep { /^\| `/ } split /\n/, ($section // '');
is_deeply(\@readme, \@catalog, 'the README lists every object with who may use it, as the catalog says')
  or diag(join("\n", 'catalog:', @catalog));

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

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
