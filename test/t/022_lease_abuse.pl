# Scenario: what a role granted the lease functions, or a registry's
# server, can do to worker ids that others need, and what stops it.
#
#   horizons  a registry whose lease table holds a horizon 99 years ahead
#             for every free id (written before horizons were bounded, or
#             by hand): a server leasing any free identity from it
#             generates at once, its lease valid for its ttl, not until
#             2125; a role with the application grants cannot report a
#             horizon at all
#   session   in a database no purge visits meanwhile, a session-bound
#             lease whose session has ended blocks its id for the
#             quarantine only, although every acquirer that sees it fails
#             (and rolls back) while it rests
#   dropped   after DROP EXTENSION and CREATE EXTENSION, a session-bound
#             lease of the old table rests the quarantine once its session
#             ends, as a lease with a row does
#   limits    idgen.worker_max_ttl and idgen.worker_max_per_role, set for
#             a role by a superuser: refused beyond them, the role cannot
#             lift them
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IdgenTest;

my $registry = idgen_node('registry', 'idgen.worker_quarantine' => "'1s'", 'max_connections' => 30);
$registry->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	GRANT EXECUTE ON FUNCTION idgen_worker_acquire(text, interval, bigint, boolean),
	    idgen_worker_renew(bigint, bigint, interval, timestamptz),
	    idgen_worker_release(bigint, bigint, timestamptz) TO app;
});

# Run $sql as $role in $db on $node; (exit code, stdout, stderr).
sub as_role
{
	my ($node, $role, $db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $role ]);
	return ($ret, $out, $err);
}

########################################################################
# horizons
########################################################################
{
	# The application role reports a horizon 99 years ahead: refused, and
	# the id keeps none.
	my ($ret, $out, $err) = as_role($registry, 'app', 'postgres', q{
		SELECT worker_id AS w, token AS t FROM idgen_worker_acquire('poisoner', max_workers => 4) \gset
		SELECT idgen_worker_renew(:w, :t, horizon => now() + interval '99 years');
	});
	like($err, qr/ERROR:  22023: only a server's lease on its identity reports a horizon/,
		'an application lease cannot report a horizon to renew');
	($ret, $out, $err) = as_role($registry, 'app', 'postgres', q{
		SELECT worker_id AS w, token AS t FROM idgen_worker_acquire('poisoner', max_workers => 4) \gset
		SELECT idgen_worker_release(:w, :t, now() + interval '99 years');
	});
	like($err, qr/ERROR:  22023: only a server's lease on its identity reports a horizon/,
		'nor to release');
	is($registry->safe_psql('postgres', 'SELECT count(*) FROM idgen_worker_lease WHERE horizon IS NOT NULL'),
		'0', 'no id has a horizon');

	# Every free id of the registry with a horizon 99 years ahead, its lease
	# ended a minute ago (as a table from before horizons were bounded would
	# have it).
	$registry->safe_psql('postgres', q{
		INSERT INTO idgen_worker_lease (id, holder, token, ttl, session_bound, acquired_by,
		    acquired_at, renewed_at, expires_at, released_at, system_identifier, horizon)
		SELECT i, 'poisoned', -i, '30 s', false, 10, now() - interval '2 min',
		       now() - interval '2 min', now() - interval '1 min', now() - interval '1 min',
		       1, now() + interval '99 years'
		FROM generate_series(1, 1023) i
		ON CONFLICT (id) DO UPDATE SET horizon = excluded.horizon,
		    expires_at = excluded.expires_at, released_at = excluded.released_at;
	});
	my $conninfo = 'host=' . $registry->host . ' port=' . $registry->port . ' dbname=postgres';
	my $server = idgen_node('server', 'idgen.identity' => 'registry',
		'idgen.registry' => "'$conninfo'", 'idgen.registry_ttl' => "'3s'");
	$server->poll_query_until('postgres', q{SELECT state = 'held' FROM idgen_identity()})
	  or die 'the server holds no identity: '
	  . $server->safe_psql('postgres', 'SELECT message FROM idgen_identity()');
	my ($gen_ret, $gen_out, $gen_err) = $server->psql('postgres',
		'SELECT count(DISTINCT idgen_snowflake()) FROM generate_series(1, 1000)');
	is($gen_out, '1000', 'a server leasing an id with a poisoned horizon generates at once')
	  or diag($gen_err);
	my (undef, $lead) = $server->psql('postgres',
		q{SELECT extract(epoch FROM idgen_snowflake_time(idgen_snowflake()) - clock_timestamp()) < 90});
	is($lead, 't', 'its IDs are within the reach (quarantine + takeover_max_lead + max_drift) of its clock');
	is($server->safe_psql('postgres',
			q{SELECT valid_until < now() + interval '10 min' FROM idgen_identity()}),
		't', 'idgen_identity() shows a lease valid for its ttl, not for 99 years');
	my ($dc, $w) = split /\|/, $server->safe_psql('postgres',
		'SELECT datacenter_id, worker_id FROM idgen_identity()');
	is($registry->safe_psql('postgres', qq{
			SELECT handover_horizon < now() + interval '90 s'
			FROM idgen_worker_leases WHERE datacenter_id = $dc AND worker_id = $w}),
		't', 'the registry handed over the horizon the last holder could have reached, not the one reported');
	$server->stop;
}

########################################################################
# session: a database no purge visits meanwhile, two ids (own id 0 aside)
########################################################################
# The purge (the sequencer's, every idgen.purge_interval) ends the leases
# of dead sessions and deletes rested ones: every section below checks what
# an acquirer or a renewal does with such a lease when no purge came first,
# so no purge comes (an hour, whatever the test clusters' default).
my $node = idgen_node('node', 'idgen.worker_quarantine' => "'1s'", 'idgen.purge_interval' => "'1h'");
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE EXTENSION idgen');
{
	# The acquirers here rest ids 5 s, so that the first one, however late
	# the machine runs it, comes before the end of the rest; the lease's
	# ttl is an hour, so that freeing the id after its rest and not after
	# its ttl are far apart.
	$node->safe_psql('other', q{SELECT idgen_worker_acquire('steady', ttl => '1 h', max_workers => 3)});
	my $s = $node->background_psql('other');
	$s->query_safe(q{SELECT idgen_worker_acquire('bound', ttl => '1 h', max_workers => 3, session_bound => true)});
	$s->quit;
	$node->poll_query_until('other', q{SELECT count(*) = 0 FROM idgen_worker_leases WHERE holder_pid IS NOT NULL})
	  or die 'the session-bound lease still has its session';
	my $ended = time;
	my ($got, $tries) = (0, 0);
	while (time - $ended < 60)
	{
		$tries++;
		my ($ret) = $node->psql('other', q{SET idgen.worker_quarantine = '5s';
			SELECT idgen_worker_acquire('next', ttl => '1 h', max_workers => 3)});
		if ($ret == 0) { $got = time - $ended; last; }
		usleep(100_000);
	}
	ok($got > 0 && $got < 60,
		sprintf('a dead session-bound lease frees its id after the quarantine, not its ttl (%.1f s, %d tries)',
			$got, $tries));
	ok($tries > 1, 'and not before it');
}

########################################################################
# dropped: a session-bound lease of a dropped lease table
########################################################################
{
	$node->safe_psql('postgres', q{SELECT idgen_worker_acquire('steady', ttl => '1 h', max_workers => 3)});
	my $s = $node->background_psql('postgres');
	$s->query_safe(q{SELECT idgen_worker_acquire('bound', max_workers => 3, session_bound => true)});
	$node->safe_psql('postgres', 'DROP EXTENSION idgen; CREATE EXTENSION idgen');
	# The steady lease's id is known from the fence (ttl 1 h); the bound
	# one's from its session's lock.
	my ($ret, $out, $err) = $node->psql('postgres',
		q{SELECT idgen_worker_acquire('new', ttl => '1 h', max_workers => 3)});
	isnt($ret, 0, 'in the new table, the ids of the old table\'s live leases are not leased');
	$s->quit;
	$node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 26980})
	  or die 'the session still holds its lock';
	# This acquirer rests ids 5 s, so that it comes within the rest however
	# late the machine runs it; the next one, 2 s later, the node's 1 s.
	($ret, $out, $err) = $node->psql('postgres',
		q{\set VERBOSITY verbose
		  SET idgen.worker_quarantine = '5s';
		  SELECT idgen_worker_acquire('new', ttl => '1 h', max_workers => 3)});
	like($err, qr/ERROR:  54000: all 3 worker ids are taken/,
		'right after its session ends, the old table\'s session-bound lease\'s id rests');
	sleep 2;
	($ret, $out, $err) = $node->psql('postgres',
		q{SELECT idgen_worker_acquire('new', ttl => '1 h', max_workers => 3)});
	is($ret, 0, 'and is leased once it has rested') or diag($err);
}

########################################################################
# limits
########################################################################
{
	$node->safe_psql('postgres', q{
		CREATE ROLE app LOGIN;
		GRANT EXECUTE ON FUNCTION idgen_worker_acquire(text, interval, bigint, boolean),
		    idgen_worker_renew(bigint, bigint, interval, timestamptz),
		    idgen_worker_release(bigint, bigint, timestamptz) TO app;
		ALTER ROLE app SET idgen.worker_max_per_role = 2;
		ALTER ROLE app SET idgen.worker_max_ttl = '1h';
	});
	my ($ret, $out, $err) = as_role($node, 'app', 'postgres',
		q{SELECT idgen_worker_acquire('long', ttl => '2 hours')});
	like($err, qr/ERROR:  22023: ttl "02:00:00" is longer than "idgen.worker_max_ttl" \(3600 s\)/,
		'a ttl beyond idgen.worker_max_ttl is refused');
	($ret, $out, $err) = as_role($node, 'app', 'postgres', q{SET idgen.worker_max_ttl = 0});
	like($err, qr/ERROR:  42501: permission denied to set parameter "idgen.worker_max_ttl"/,
		'the role cannot lift it');
	($ret, $out, $err) = as_role($node, 'app', 'postgres', q{
		SELECT idgen_worker_acquire('a1', ttl => '1 min');
		SELECT idgen_worker_acquire('a2', ttl => '1 min');
		SELECT idgen_worker_acquire('a3', ttl => '1 min');
	});
	like($err, qr/ERROR:  54000: role "app" has reached its limit of 2 worker-id leases/,
		'a third lease beyond idgen.worker_max_per_role = 2 is refused');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM idgen_worker_leases WHERE acquired_by = 'app'}),
		'2', 'the role holds two');

	# Leases of a microsecond end at once, but their ids rest: they count
	# until then, or the role could take ids faster than they come free
	# (and renew them: a renewal after the end succeeds while nobody has
	# the id).  The role's ids rest a minute here, so that the third
	# acquire comes within the rest of the first two however late the
	# machine runs it.
	$node->safe_psql('postgres', q{
		DELETE FROM idgen_worker_lease WHERE acquired_by = 'app'::regrole;
		ALTER ROLE app SET idgen.worker_quarantine = '1min';
	});
	($ret, $out, $err) = as_role($node, 'app', 'postgres', q{
		CREATE TEMP TABLE t AS SELECT * FROM idgen_worker_acquire('m1', ttl => '1 microsecond');
		INSERT INTO t SELECT * FROM idgen_worker_acquire('m2', ttl => '1 microsecond');
		SELECT pg_sleep(0.01);
		INSERT INTO t SELECT * FROM idgen_worker_acquire('m3', ttl => '1 microsecond');
	});
	like($err, qr/ERROR:  54000: role "app" has reached its limit of 2 worker-id leases\nDETAIL:  It has 2 leases that are held or whose id still rests/,
		'leases that ended but whose ids rest count toward the limit');
	$node->safe_psql('postgres', q{ALTER ROLE app RESET idgen.worker_quarantine});
}

########################################################################
# more abuse by a role with the lease grants: renewing after the rest, dead sessions of a
# limited role, a lock given up, the same id twice in one session
########################################################################
{
	$node->safe_psql('postgres', q{DELETE FROM idgen_worker_lease WHERE acquired_by = 'app'::regrole});
	# A lease renewed after its id has rested takes the id anew: counted,
	# or it would come back past the limit.
	my ($ret, $out, $err) = as_role($node, 'app', 'postgres', q{
		SELECT worker_id AS w, token AS t FROM idgen_worker_acquire('short', ttl => '1 microsecond') \gset
		SELECT pg_sleep(1.2);
		SELECT idgen_worker_acquire('a1', ttl => '1 min');
		SELECT idgen_worker_acquire('a2', ttl => '1 min');
		SELECT idgen_worker_renew(:w, :t, '1 h');
	});
	like($err, qr/ERROR:  54000: role "app" has reached its limit of 2 worker-id leases/,
		'a lease renewed after its id has rested counts toward the limit');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM idgen_worker_leases WHERE acquired_by = 'app' AND state = 'held'}),
		'2', 'the role still holds two');
	$node->safe_psql('postgres', q{DELETE FROM idgen_worker_lease WHERE acquired_by = 'app'::regrole});

	# Two sessions of the limited role (2) die holding session-bound
	# leases; nothing purges meanwhile (the node's purge_interval): the
	# role's next acquire ends them, and succeeds once their ids have
	# rested.
	for my $i (1 .. 2)
	{
		my ($r, $o, $e) = as_role($node, 'app', 'postgres',
			"SELECT idgen_worker_acquire('dying$i', session_bound => true)");
		is($r, 0, "a session of app acquires a session-bound lease and ends ($i)") or diag($e);
	}
	my $t0 = time;
	my ($got, $tries) = (0, 0);
	# Their leases' ttl is 30 s: acquiring before then shows that their ids
	# came free after their rest (1 s), not after their ttl.
	while (time - $t0 < 25)
	{
		$tries++;
		my ($r) = as_role($node, 'app', 'postgres', q{SELECT idgen_worker_acquire('next', ttl => '1 min')});
		if ($r == 0) { $got = time - $t0; last; }
		usleep(100_000);
	}
	ok($got > 0, sprintf('a limited role whose sessions died acquires again once their ids rested (%.1f s, %d tries)',
			$got, $tries));
	$node->safe_psql('postgres', q{DELETE FROM idgen_worker_lease WHERE acquired_by = 'app'::regrole});

	# pg_advisory_unlock_all() gives the session-bound lease's lock up: the
	# lease has ended, and its renewal says so.
	($ret, $out, $err) = as_role($node, 'app', 'postgres', q{
		SELECT worker_id AS w, token AS t FROM idgen_worker_acquire('unlocked', session_bound => true) \gset
		SELECT pg_advisory_unlock_all();
		SELECT idgen_worker_renew(:w, :t);
	});
	like($err, qr/ERROR:  55000: worker lease lost: this session no longer holds the lock of worker id/,
		'after pg_advisory_unlock_all() a session-bound lease\'s renewal fails');
	$node->safe_psql('postgres', q{DELETE FROM idgen_worker_lease WHERE acquired_by = 'app'::regrole});

	# In a database beyond the 16 that shared memory keeps a record for, a
	# session holding a session-bound lease of a dropped table is not given
	# the same id again.
	for my $d (3 .. 17)
	{
		$node->safe_psql('postgres', "CREATE DATABASE d$d");
		$node->safe_psql("d$d", q{CREATE EXTENSION idgen; SELECT idgen_worker_acquire('x', ttl => '1 min')});
	}
	ok($node->log_contains(qr/idgen keeps no record of the worker-id leases of database "d17"/),
		'the 17th database that leases has no record');
	my $e = $node->background_psql('d17', on_error_stop => 0);
	$e->query_safe(q{SELECT idgen_worker_acquire('e', max_workers => 2, session_bound => true)});
	$node->safe_psql('d17', 'DROP EXTENSION idgen; CREATE EXTENSION idgen');
	my ($stdout, $failed) = $e->query(
		q{SELECT worker_id FROM idgen_worker_acquire('e again', max_workers => 2, session_bound => true)});
	ok($failed && $e->{stderr} =~ /all 2 worker ids are taken/,
		'the session holding id 1 of the dropped table is not given id 1 again')
	  or diag("got worker id '$stdout': $e->{stderr}");
	$e->quit;
}

no_crash_logged($node, 'no crash');
done_testing();
