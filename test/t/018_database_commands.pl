# Scenario: the idgen purge process stays connected to idgen.database, so
# CREATE DATABASE ... TEMPLATE, ALTER DATABASE ... RENAME and DROP DATABASE
# of that database fail with 55006 while it runs ("is being accessed by
# other users", one other session), and change nothing.  DROP DATABASE ...
# WITH (FORCE) ends the process and drops the database; the process starts
# again after its restart time (10 s) and, once the database exists again,
# is back at work there.
#
# (PostgreSQL 19 lets a background worker ask to be ended by the three
# commands instead, BGWORKER_INTERRUPTIBLE; the server then does not start
# it again until it restarts, which would stop cached per-key sequences, so
# idgen does not ask: docs/versions.md.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $node = idgen_node('dbcmds', 'idgen.database' => "'app'");
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE EXTENSION idgen');

my $purge_in_app = sub {
	return $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idgen purge' AND datname = 'app'");
};
ok($purge_in_app->(), 'the idgen purge process is connected to idgen.database');
$node->safe_psql('app', "SELECT idgen_seq_next('k')");

for my $cmd ('CREATE DATABASE app_copy TEMPLATE app', 'ALTER DATABASE app RENAME TO app_renamed',
	'DROP DATABASE app')
{
	my $err = sql_error($node, $cmd);
	like($err, qr/ERROR:  55006: (source )?database "app" is being accessed by other users/,
		"$cmd: 55006 while the idgen purge process is connected");
	like($err, qr/DETAIL:  There is 1 other session using the database\./, "$cmd: one session, the process");
}
is($node->safe_psql('postgres',
	"SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database WHERE datname LIKE 'app%'"),
	'app', 'nothing changed');
is($node->safe_psql('app', "SELECT idgen_seq_current('k')"), '1', 'app keeps its keys');

$node->safe_psql('postgres', 'DROP DATABASE app WITH (FORCE)');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'app'"), '0',
	'DROP DATABASE ... WITH (FORCE): dropped');
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', "CREATE EXTENSION idgen; SELECT idgen_seq_configure('c', cache => 10)");

ok($purge_in_app->(), 'the process is back once idgen.database exists again');
is($node->safe_psql('app', "SELECT idgen_seq_next('c') FROM generate_series(1, 3)"), "1\n2\n3",
	'a cached key is served there (the process reserves its segments)');

$node->stop;
no_crash_logged($node, 'clean shutdown');
done_testing();
