# Scenario: a prepared transaction holds the row of a key it used, across
# a restart, and idle_in_transaction_session_timeout (the remedy for a
# session left idle in its transaction) does not reach it: it has no
# session.  Other callers of the key wait for it (lock_timeout ends the
# wait, 55P03), and so do the administrative functions, whose DETAIL
# points to pg_prepared_xacts.  ROLLBACK PREPARED frees the key and gives
# its value back (COMMIT PREPARED would keep it).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $node = idgen_node('prepared_key',
	'max_prepared_transactions' => 2,
	'idle_in_transaction_session_timeout' => "'1s'");

$node->safe_psql('postgres', q{
	SELECT idgen_seq_next('held');
	BEGIN;
	SELECT idgen_seq_next('held');
	PREPARE TRANSACTION 'p1';
});
$node->restart;
is($node->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts'), 'p1',
	'the prepared transaction survives the restart');

# Longer than idle_in_transaction_session_timeout: nothing ends it.  A
# session left idle in its transaction shows when the timeout has passed
# (it ends that session) rather than a sleep that a slow machine could make
# too short; only COMMIT or ROLLBACK PREPARED can end the prepared
# transaction meanwhile.
my $idle = $node->background_psql('postgres', on_error_stop => 0);
my $idle_pid = $idle->query_safe('SELECT pg_backend_pid()');
$idle->query_safe('BEGIN; SELECT 1');
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $idle_pid")
  or die 'idle_in_transaction_session_timeout did not end a session idle in its transaction';
$idle->quit;
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '1',
	'idle_in_transaction_session_timeout does not end it');
my $err = sql_error($node, q{SET lock_timeout = '200ms'; SELECT idgen_seq_next('held')});
like($err, qr/ERROR:  55P03: canceling statement due to lock timeout/,
	"another caller of the key waits for it, until lock_timeout");
$err = sql_error($node, q{SET lock_timeout = '200ms'; SELECT idgen_seq_set('held', 10)});
like($err, qr/ERROR:  55P03: sequence key "held" is locked by another transaction/,
	'an administrative function waits for it too, then fails (55P03)');
like($err, qr/pg_prepared_xacts/, 'and points to pg_prepared_xacts');
is($node->safe_psql('postgres', q{SELECT idgen_seq_next('other')}), '1', 'other keys are free');

$node->safe_psql('postgres', q{ROLLBACK PREPARED 'p1'});
is($node->safe_psql('postgres', q{SET lock_timeout = '5s'; SELECT idgen_seq_next('held')}), '2',
	'ROLLBACK PREPARED frees the key and gives its value back');

$node->stop;
no_crash_logged($node, 'no crash');
done_testing();
