# Scenario: idgen.seq_max_keys_per_role (here 10) is not passed by a
# role's open transactions.  Twelve sessions of one role each create ten
# keys in a transaction and wait at a barrier before they commit; the
# barrier opens once each of the twelve waits there or has been refused
# (a creation counts the keys of the role's transactions in progress and
# waits for none of them).  Then eight transactions of the role each
# create ten keys and are prepared, one after the other: the second and
# later count the first one's keys, prepared (across a restart), and are
# refused; every prepared one is committed.  Each time, the role has at
# most 10 committed keys.  Last, a count that reads the table (its index
# on created_by dropped) refuses one more key.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $sessions = 12;
my $prepared = 8;
my $node = idgen_node('rolelimit', 'max_connections' => 40,
	'max_prepared_transactions' => $prepared);

$node->safe_psql('postgres', q{
	CREATE ROLE keymaker LOGIN;
	GRANT EXECUTE ON FUNCTION idgen_seq_next(text) TO keymaker;
	ALTER ROLE keymaker SET idgen.seq_max_keys_per_role = 10;
});

sub keys_of
{
	my ($prefix) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM idgen_seq WHERE created_by = 'keymaker'::regrole AND key LIKE '$prefix%'");
}

# Twelve concurrent sessions.
{
	my $ctl = $node->background_psql('postgres');
	$ctl->query_safe('SELECT pg_advisory_lock(42)');
	my @clients;
	for my $k (1 .. $sessions)
	{
		my $w = $node->background_psql('postgres', on_error_stop => 0,
			extra_params => [ '-U', 'keymaker' ]);
		$w->query_until(qr/started/, qq{\\echo started
BEGIN;
SELECT count(idgen_seq_next('c${k}_' || g)) FROM generate_series(1, 10) g;
SELECT pg_advisory_xact_lock_shared(42);
COMMIT;
});
		push @clients, $w;
	}
	# Every session waits at the barrier, or was refused and has ended its
	# transaction.
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = $sessions FROM pg_stat_activity
		WHERE usename = 'keymaker'
		  AND ((wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock_shared%')
		    OR (state = 'idle' AND query LIKE 'COMMIT%'))})
	  or die 'the sessions did not all wait or end';
	$ctl->query_safe('SELECT pg_advisory_unlock(42)');
	$ctl->quit;
	# Every session has ended its transaction (committed or refused).
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_stat_activity
		WHERE usename = 'keymaker' AND state <> 'idle'})
	  or die 'the sessions did not end their transactions';
	$_->quit for @clients;
	is(keys_of('c'), '10', "$sessions concurrent sessions of a role limited to 10 keys: 10 keys");
	my $refused = () = PostgreSQL::Test::Utils::slurp_file($node->logfile)
	  =~ /ERROR:  role "keymaker" has reached its limit of 10 per-key sequences/g;
	is($refused, $sessions - 1, 'the other sessions were refused at the limit');
}

$node->safe_psql('postgres',
	"SELECT count(idgen_seq_drop(key)) FROM idgen_seq WHERE created_by = 'keymaker'::regrole");

# Eight prepared transactions.
{
	my @refused;
	for my $k (1 .. $prepared)
	{
		my ($ret, $out, $err) = $node->psql('postgres', qq{
			BEGIN;
			SELECT count(idgen_seq_next('p${k}_' || g)) FROM generate_series(1, 10) g;
			PREPARE TRANSACTION 'keys_$k';
		}, on_error_stop => 1, extra_params => [ '-U', 'keymaker' ]);
		push @refused, $k if $ret != 0;
		# A prepared transaction's keys count after a restart too.
		$node->restart if $k == 1;
		like($err, qr/has reached its limit of 10 per-key sequences/,
			"transaction $k counts the keys of the first, prepared")
		  if $k > 1;
	}
	is(scalar(@refused), $prepared - 1, 'every transaction after the first prepared one was refused');
	$node->safe_psql('postgres', "COMMIT PREPARED 'keys_$_'")
	  for grep { my $k = $_; !grep { $_ == $k } @refused } 1 .. $prepared;
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
		'every prepared transaction committed');
	is(keys_of('p'), '10', "$prepared prepared transactions of a role limited to 10 keys: 10 keys");

	# Once the first has committed, the next one counts its keys; without
	# the index on created_by, by reading the table.
	$node->safe_psql('postgres', 'DROP INDEX idgen_seq_created_by_idx');
	my ($ret, $out, $err) = $node->psql('postgres', q{
		BEGIN;
		SELECT idgen_seq_next('p_after');
		PREPARE TRANSACTION 'keys_after';
	}, on_error_stop => 1, extra_params => [ '-U', 'keymaker' ]);
	like($err, qr/has reached its limit of 10 per-key sequences/,
		'a transaction after the prepared one committed is refused at the limit');
}

no_crash_logged($node, 'no crash');
done_testing();
