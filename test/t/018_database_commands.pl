# Scenario: a database's idgen sequencer is a session in its database
# while it runs (its cached keys in use), so CREATE DATABASE ... TEMPLATE,
# ALTER DATABASE ... RENAME and DROP DATABASE of that database fail with
# 55006 ("is being accessed by other users", one other session) and change
# nothing.  DROP DATABASE ... WITH (FORCE) ends the process and drops the
# database; the launcher starts none for a database that is gone, and the
# database created again gets one at its first cached key.  Once the keys
# have gone unused for idgen.sequencer_idle, the process ends and the
# commands work.
#
# (PostgreSQL 19 lets a background worker ask to be ended by the three
# commands instead, BGWORKER_INTERRUPTIBLE: docs/versions.md.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

# Each refused command waits 5 s for the other sessions to leave: the
# process must not end meanwhile, however long a loaded machine takes, so
# idgen.sequencer_idle is an hour until the test lowers it at the end.
# idgen.purge_interval is an hour too: a purge is an idgen sequencer
# connected to its database for a moment, another session there, which
# the commands would count or wait for.
my $node = idgen_node('dbcmds', 'idgen.sequencer_idle' => "'1h'", 'idgen.purge_interval' => "'1h'");
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', "CREATE EXTENSION idgen; SELECT idgen_seq_next('k')");

# Configure a cached key in app and use it until app's process runs.
my $process_in_app = sub {
	return $node->poll_query_until('app', q{
		SELECT (SELECT count(*) FROM (SELECT idgen_seq_configure('c', cache => 10)) c) = 1
		   AND (SELECT count(*) FROM idgen_seq_next('c', 2)) = 2
		   AND (SELECT count(*) = 1 FROM pg_stat_activity
		        WHERE backend_type = 'idgen sequencer' AND datname = 'app')});
};
ok($process_in_app->(), 'a cached key in use: app has its idgen sequencer');

for my $cmd ('CREATE DATABASE app_copy TEMPLATE app', 'ALTER DATABASE app RENAME TO app_renamed',
	'DROP DATABASE app')
{
	# Used again, so that the process does not end meanwhile.
	$node->safe_psql('app', "SELECT idgen_seq_next('c')");
	my $err = sql_error($node, $cmd);
	like($err, qr/ERROR:  55006: (source )?database "app" is being accessed by other users/,
		"$cmd: 55006 while the idgen sequencer is connected");
	like($err, qr/DETAIL:  There is 1 other session using the database\./, "$cmd: one session, the process");
}
is($node->safe_psql('postgres',
	"SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database WHERE datname LIKE 'app%'"),
	'app', 'nothing changed');
is($node->safe_psql('app', "SELECT idgen_seq_current('k')"), '1', 'app keeps its keys');

$node->safe_psql('postgres', 'DROP DATABASE app WITH (FORCE)');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'app'"), '0',
	'DROP DATABASE ... WITH (FORCE): dropped');
sleep 2;
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'idgen sequencer' AND (datname IS NULL OR datname = 'app')}),
	'0', 'no process is started for the dropped database');
$node->safe_psql('postgres', 'CREATE DATABASE app');
{
	# With the library preloaded, CREATE EXTENSION has nothing to warn of.
	my ($ret, $stdout, $stderr) = $node->psql('app', 'CREATE EXTENSION idgen');
	is($ret . $stderr, '0', 'CREATE EXTENSION in a preloaded server: no warning');
}
ok($process_in_app->(), 'the database created again gets a process at its first cached key');
is($node->safe_psql('app', "SELECT served FROM idgen_seq_keys WHERE key = 'c'"), 'cached',
	'a cached key is served there from shared memory');

# Unused for idgen.sequencer_idle (lowered to 2 s now), the process ends:
# the commands work without FORCE.
$node->safe_psql('postgres', "ALTER SYSTEM SET idgen.sequencer_idle = '2s'; SELECT pg_reload_conf()");
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'idgen sequencer' AND datname = 'app'")
  or die 'the idle process did not end';
pass('the process ended once its cached keys went unused');
$node->safe_psql('postgres', 'ALTER DATABASE app RENAME TO app_renamed');
$node->safe_psql('postgres', 'DROP DATABASE app_renamed');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname LIKE 'app%'"), '0',
	'then ALTER DATABASE ... RENAME and DROP DATABASE work');

$node->stop;
no_crash_logged($node, 'clean shutdown');
done_testing();
