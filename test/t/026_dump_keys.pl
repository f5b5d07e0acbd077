# Scenario: the per-key sequence state, and the public ID keys, in dumps.  A whole-database dump
# carries every key (idgen_seq is an extension configuration table); a dump
# of one table (pg_dump -t orders) carries none, as docs/sequences.md says, and
# one of that table and idgen_seq (-t orders -t idgen_seq) carries every
# key: restored into a database with the extension created, each key goes
# on above its dumped value, like a serial column after its setval.
# Public ID keys: a whole dump restores them (CREATE EXTENSION makes none
# to meet them); a data-only restore of them into a database with another
# version 1 is refused; idgen_public_key_export / _import share keys
# between databases that read each other's forms, and refuse an import
# once both have made a version of their own.  An invalid public ID of
# 20 MB is quoted in its error, and in the server log, by 32 characters.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $node = idgen_node('dump');
$node->safe_psql('postgres', q{
	CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), conv int, n bigint);
	INSERT INTO orders (conv, n) SELECT 42, idgen_seq_next('conv:42') FROM generate_series(1, 41);
	INSERT INTO orders (conv, n) SELECT 7, idgen_seq_next('conv:7') FROM generate_series(1, 3);
	SELECT idgen_seq_configure('batch', step => 10);
	SELECT idgen_seq_next('batch');
	SELECT idgen_seq_configure('fast', cache => 100);
	SELECT idgen_seq_next('fast') FROM generate_series(1, 5);
});
my $fast_before = $node->safe_psql('postgres', q{SELECT idgen_seq_current('fast')});
# Public ID keys: versions 1 and 2 (CREATE EXTENSION makes none).
$node->safe_psql('postgres', q{SELECT idgen_public_rotate()});
my $form_v1 = $node->safe_psql('postgres', q{SELECT idgen_public(777)});
$node->safe_psql('postgres', q{SELECT idgen_public_rotate()});
my $form_v2 = $node->safe_psql('postgres', q{SELECT idgen_public(778)});

sub dump_of
{
	my (@args) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run([ 'pg_dump', '--dbname', $node->connstr('postgres'), @args ],
		'>', \$stdout, '2>', \$stderr);
	die "pg_dump @args: $stderr" unless $ok;
	return $stdout;
}

# One table alone: its rows, no key.
my $table_only = dump_of('-t', 'orders');
like($table_only, qr/COPY public\.orders/, 'pg_dump -t orders: the table');
unlike($table_only, qr/idgen_seq/, 'and no per-key sequence state');

# The table and idgen_seq: every key's row, as data.
my $with_keys = dump_of('-t', 'orders', '-t', 'idgen_seq');
like($with_keys, qr/COPY public\.idgen_seq /, 'pg_dump -t orders -t idgen_seq: the keys, as data');
unlike($with_keys, qr/CREATE TABLE public\.idgen_seq/, 'and not the table, which the extension makes');

# Restored into a database where the extension is created first, every key
# goes on above the value dumped.
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->safe_psql('restored', 'CREATE EXTENSION idgen');
$node->safe_psql('restored', $with_keys, on_error_stop => 1);
is($node->safe_psql('restored', q{
		SELECT idgen_seq_next('conv:42') || ' ' || idgen_seq_next('conv:7') || ' ' || idgen_seq_next('batch')}),
	'42 4 20', 'restored keys go on: 42 after 41, 4 after 3, 20 after 10 (step 10)');
cmp_ok($node->safe_psql('restored', q{SELECT idgen_seq_next('fast')}), '>', $fast_before,
	'a cached key goes on above every value it handed out');
is($node->safe_psql('restored', q{SELECT count(*) FROM orders WHERE n > 0}), '44', 'with the rows');

# A whole-database dump, restored by pg_restore into an empty database:
# the extension and every key come with it.
{
	my $file = PostgreSQL::Test::Utils::tempdir() . '/all.dump';
	dump_of('-Fc', '-f', $file);
	$node->safe_psql('postgres', 'CREATE DATABASE whole');
	my ($out, $err);
	IPC::Run::run([ 'pg_restore', '--dbname', $node->connstr('whole'), $file ], '>', \$out, '2>', \$err)
	  or die "pg_restore: $err";
	is($node->safe_psql('whole', q{SELECT idgen_seq_next('conv:42') || ' ' || idgen_seq_next('batch')}),
		'42 20', 'a whole-database dump carries every key');
	# (CREATE EXTENSION made no key there: the dumped ones are the only ones.)
	is($node->safe_psql('whole', qq{SELECT idgen_private('$form_v1') || ' ' || idgen_private('$form_v2')}),
		'777 778', 'and the public ID keys: forms made before the dump decode after the restore');
	is($node->safe_psql('whole', q{SELECT left(idgen_public(1), 1)}), '2', 'with the same current version');
}

# A data-only dump of the keys restored into a database that made a key of
# its own: its version 1 is another key, so the restore of the keys fails
# whole (23505) rather than decode that database's forms to other IDs, and
# its keys stay as they were.
{
	my $keys_only = dump_of('--data-only', '-t', 'idgen_public_key');
	$node->safe_psql('postgres', 'CREATE DATABASE own_key');
	$node->safe_psql('own_key', 'CREATE EXTENSION idgen');
	$node->safe_psql('own_key', 'SELECT idgen_public_rotate()');
	my $own_form = $node->safe_psql('own_key', 'SELECT idgen_public(555)');
	my ($ret, $out, $err) = $node->psql('own_key', $keys_only);
	like($err, qr/public ID key version 1 exists here with another key/,
		'a data-only restore of the keys into a database with another version 1 is refused');
	is($node->safe_psql('own_key', qq{SELECT count(*) || ' ' || idgen_private('$own_form') FROM idgen_public_key}),
		'1 555', 'and that database keeps its key: its forms decode as before');
}

# A data-only dump of the keys made with --disable-triggers ends with ENABLE
# TRIGGER ALL, which leaves idgen_public_key's triggers ordinary ones:
# logical replication's workers would not fire the guard.  The forms are
# refused until they are enabled ALWAYS again.
{
	my $keys_only = dump_of('--data-only', '--disable-triggers', '-t', 'idgen_public_key');
	$node->safe_psql('postgres', 'CREATE DATABASE no_guard');
	$node->safe_psql('no_guard', 'CREATE EXTENSION idgen');
	$node->safe_psql('no_guard', $keys_only, on_error_stop => 1);
	is($node->safe_psql('no_guard', q{SELECT string_agg(tgname || ':' || tgenabled::text, ',' ORDER BY tgname)
		FROM pg_trigger WHERE tgrelid = 'idgen_public_key'::regclass}),
		'idgen_public_key_changed:O,idgen_public_key_guard:O,idgen_public_key_no_truncate:O',
		'a data-only restore with --disable-triggers leaves the key triggers ordinary ones');
	like(sql_error($node, qq{\\c no_guard\nSELECT idgen_private('$form_v1')}),
		qr/the triggers of idgen_public_key are not enabled ALWAYS/, 'and the forms are refused');
	$node->safe_psql('no_guard', q{ALTER TABLE idgen_public_key ENABLE ALWAYS TRIGGER idgen_public_key_guard,
		ENABLE ALWAYS TRIGGER idgen_public_key_no_truncate, ENABLE ALWAYS TRIGGER idgen_public_key_changed});
	is($node->safe_psql('no_guard', qq{SELECT idgen_private('$form_v1')}), '777',
		'enabled ALWAYS again (the hint), they decode');
}

# Sharing keys between databases (or servers) that read each other's
# forms: the export of one, imported into the other before it makes keys
# of its own.
{
	$node->safe_psql('postgres', 'CREATE DATABASE other');
	$node->safe_psql('other', 'CREATE EXTENSION idgen');
	my $export = $node->safe_psql('postgres', 'SELECT idgen_public_key_export()');
	unlike($export, qr/\\x/, 'the export writes keys as plain hexadecimal digits');
	is($node->safe_psql('other', "SELECT idgen_public_key_import('$export')"), '2',
		'the other database imports both versions');
	my $form_other = $node->safe_psql('other', 'SELECT idgen_public(779)');
	is($node->safe_psql('other', qq{SELECT idgen_private('$form_v1') || ' ' || idgen_private('$form_v2')}),
		'777 778', "it decodes the first one's forms");
	is($node->safe_psql('postgres', qq{SELECT idgen_private('$form_other')}), '779',
		'and the first one decodes its forms');
	# A rotation on one, exported again: the import adds the new version.
	$node->safe_psql('postgres', 'SELECT idgen_public_rotate()');
	$export = $node->safe_psql('postgres', 'SELECT idgen_public_key_export()');
	is($node->safe_psql('other', "SELECT idgen_public_key_import('$export')"), '1',
		'a rotation exported again adds one version');
	# Both rotate on their own: their version 4 differs, and the import is
	# refused whole, changing nothing.
	$node->safe_psql($_, 'SELECT idgen_public_rotate()') for ('postgres', 'other');
	$export = $node->safe_psql('postgres', 'SELECT idgen_public_key_export()');
	my ($ret, $out, $err) = $node->psql('other', "SELECT idgen_public_key_import('$export')");
	like($err, qr/public ID key version 4 exists here with another key/,
		'after rotations on both, the import is refused');
	unlike($err, qr/[0-9a-f]{32}/, 'and its message quotes no key');
	is($node->safe_psql('other', 'SELECT max(version) FROM idgen_public_key'), '4', 'nothing was imported');
}

# A refused import, its keys passed as a literal as above, with statement
# logging off (the test clusters log every statement): the server log
# gets the error, but neither the statement (log_min_error_statement,
# ERROR by default, would write it, keys and all) nor the context and
# detail, which quote the input when it is not valid JSON.  The client
# still gets all of it: the text is its own.  A failed statement that does
# not name the import is logged whole, and so is the error of an import
# passed as a parameter under log_statement = 'all', whose parameter line
# is left out.
{
	my $export = $node->safe_psql('postgres', 'SELECT idgen_public_key_export()');
	my @keys = $export =~ /"key": "([0-9a-f]{32})"/g;
	is(scalar(@keys), 4, 'the export holds the keys of four versions');
	# not JSON from just after the first key (a JSON error's context is the
	# 50 characters before the fault)
	(my $broken = $export) =~ s/("$keys[0]")/$1 x/;
	$node->safe_psql('postgres', "ALTER DATABASE other SET log_statement = 'none'");
	my $offset = -s $node->logfile;

	my ($ret, $out, $err) = $node->psql('other', "SELECT idgen_public_key_import('$export')");
	like($err, qr/public ID key version 4 exists here with another key/, 'a refused import');
	($ret, $out, $err) = $node->psql('other', "select IDGEN_PUBLIC_KEY_IMPORT('$broken')");
	like($err, qr/invalid input syntax for type json.*\nDETAIL: .*\nCONTEXT:  JSON data, line 1: .*$keys[0]/s,
		'an import of text that is not JSON: the client gets the detail and the context, which quote it');
	($ret, $out, $err) = $node->psql('other', 'SELECT 1/0 AS no_import');
	my $bind = '';
	if ($node->pg_version >= 16)
	{
		($ret, $out, $err) = $node->psql('other',
			"SET log_statement = 'all'; SELECT idgen_public_key_import(\$1) \\bind '$export' \\g");
		like($err, qr/public ID key version 4 exists here with another key/, 'an import passed by \bind');
		$bind = 'by \bind';
	}
	$node->psql('other', 'SELECT 1/0 AS the_end');
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $offset);

	like($log, qr/ERROR:  public ID key version 4 exists here with another key/, 'the server log has the refusal');
	like($log, qr/ERROR:  invalid input syntax for type json/, 'and the error of the text that is not JSON');
	like($log, qr/ERROR:  division by zero\n(?:.*\n)*?.*STATEMENT:  SELECT 1\/0 AS no_import/,
		'a failed statement that names no import is logged with its text');
	like($log, qr/STATEMENT:  SELECT 1\/0 AS the_end/, 'and so is the last statement');
	unlike($log, qr/STATEMENT:  .*idgen_public_key_import/i, 'no statement that names the import is logged');
	unlike($log, qr/JSON data, line 1/, 'nor the context that quotes the input');
	like($log, qr/LOG:  (?:statement|execute <unnamed>): SELECT idgen_public_key_import\(\$1\)/,
		"log_statement = 'all' logs the statement $bind") if $bind;
	is(join(', ', grep { index($log, $_) >= 0 } @keys), '', 'the server log holds none of the keys');
	$node->safe_psql('postgres', 'ALTER DATABASE other RESET log_statement');
}

# A form of 20 MB: the error, in the server log too, quotes its first 32
# characters and says how long it was.
{
	my $offset = -s $node->logfile;
	my ($ret, $out, $err) = $node->psql('postgres',
		q{SELECT pg_backend_pid(); SELECT idgen_private(repeat('x', 20000000))});
	my ($pid) = $out =~ /^(\d+)$/m or die "no backend pid in: $out";
	like($err, qr/"x{32}\.\.\."\nDETAIL:  A public ID is 15 characters long; this one has 20000000\./,
		'a 20 MB input: the error quotes 32 characters and the length');
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $offset);
	like($log, qr/ERROR:  invalid input syntax for a public ID: "x{32}\.\.\."/, 'so does the server log');
	# What this session logged: the lines of its pid, and the lines of no
	# process (the continuation of a message).  The lines the background
	# processes log meanwhile (the sequencers' purges in six databases, a
	# checkpoint) are no part of it.
	my $own = join '', grep { !/^\d{4}-\d\d-\d\d [\d:.]+ \S+ \[(\d+)\]/ || $1 == $pid }
	  split /(?<=\n)/, $log;
	cmp_ok(length($own), '<', 2000, 'which grew by less than 2 000 bytes')
	  or diag("the lines this session logged:\n" . substr($own, 0, 4000));
}

# A whole-database dump by a role that is not a superuser: the database's
# owner, say.  idgen's three configuration tables are readable by their
# owner only (the public ID keys are secrets; keys and leases are written
# only through the functions), and pg_dump dumps their rows, so the dump
# fails.  What works (docs/sequences.md, "Dumps and restores"): a role with the privileges of
# pg_read_all_data, which reads them (the dump then holds the public ID
# keys); or the owner's dump without their rows (--exclude-table-data),
# restored with the rows a superuser's dump of the three tables carries.
{
	my $tmp = PostgreSQL::Test::Utils::tempdir();
	my @idgen_tables = qw(idgen_seq idgen_worker_lease idgen_public_key);
	$node->safe_psql('postgres', 'CREATE ROLE app LOGIN');
	$node->safe_psql('postgres', 'CREATE DATABASE appdb OWNER app');
	$node->safe_psql('appdb', q{CREATE EXTENSION idgen; SELECT idgen_seq_set('conv:1', 41); SELECT idgen_public_rotate()});
	my $appdb_form = $node->safe_psql('appdb', q{SELECT idgen_public(4242)});
	$node->safe_psql('appdb', q{CREATE TABLE notes (id bigint, body text); INSERT INTO notes VALUES (1, 'kept')},
		extra_params => [ '-U', 'app' ]);

	my $pg_dump = sub {
		my ($role, @args) = @_;
		my ($out, $err) = ('', '');
		my $ok = IPC::Run::run([ 'pg_dump', '--dbname', $node->connstr('appdb'), '-U', $role, @args ],
			'>', \$out, '2>', \$err);
		return ($ok, $out, $err);
	};
	my ($ok, $out, $err) = $pg_dump->('app');
	ok(!$ok, "the database owner's whole-database pg_dump fails");
	like($err, qr/permission denied for table idgen_/, "on idgen's owner-only tables");

	# The owner's dump without their rows, and a superuser's dump of them.
	($ok, $out, $err) = $pg_dump->('app', '-Fc', '-f', "$tmp/app.dump", '--exclude-table-data', 'idgen_*');
	ok($ok, "the owner's dump with --exclude-table-data 'idgen_*' works") or diag($err);
	($ok, $out, $err) = $pg_dump->($node->safe_psql('postgres', 'SELECT current_user'),
		'-Fc', '-f', "$tmp/keys.dump", '--data-only', map { ('-t', $_) } @idgen_tables);
	ok($ok, "a superuser's dump of the rows of idgen's tables") or diag($err);
	$node->safe_psql('postgres', 'CREATE DATABASE app_restored OWNER app');
	for my $file ("$tmp/app.dump", "$tmp/keys.dump")
	{
		IPC::Run::run([ 'pg_restore', '--dbname', $node->connstr('app_restored'), $file ], '>', \$out, '2>', \$err)
		  or die "pg_restore $file: $err";
	}
	is($node->safe_psql('app_restored', qq{
			SELECT (SELECT body FROM notes) || ' ' || idgen_seq_next('conv:1') || ' ' || idgen_private('$appdb_form')}),
		'kept 42 4242', 'restored together: the tables, every key going on, the public ID keys');

	# A backup role with the privileges of pg_read_all_data.
	$node->safe_psql('postgres', 'CREATE ROLE backup LOGIN IN ROLE pg_read_all_data');
	($ok, $out, $err) = $pg_dump->('backup', '-Fc', '-f', "$tmp/backup.dump");
	ok($ok, 'a whole-database pg_dump by a member of pg_read_all_data works') or diag($err);
	$node->safe_psql('postgres', 'CREATE DATABASE backup_restored OWNER app');
	IPC::Run::run([ 'pg_restore', '--dbname', $node->connstr('backup_restored'), "$tmp/backup.dump" ],
		'>', \$out, '2>', \$err)
	  or die "pg_restore: $err";
	is($node->safe_psql('backup_restored', qq{
			SELECT (SELECT body FROM notes) || ' ' || idgen_seq_next('conv:1') || ' ' || idgen_private('$appdb_form')}),
		'kept 42 4242', 'and carries the tables, every key and the public ID keys');
}

$node->stop;
done_testing();
