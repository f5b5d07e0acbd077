# Scenario: objects other roles can create never change what idgen's own
# statements run.  idgen is installed in public of a database whose owner
# is not a superuser (since PostgreSQL 15 that owner may create in public;
# before 15 every role could).  That owner creates, next to idgen's
# functions, look-alikes with one more, defaulted, argument
# (idgen_expiry, idgen_seq_purge, idgen_worker_purge): a call of idgen's
# name with idgen's arguments would then be ambiguous (42725).  Every
# idgen_seq_* call of every role, the purge process and the functions it
# runs must go on working.
#
# Then the whole set of look-alikes: aggregates count(*) and max() and
# operators =, <, <=, >, + on the types idgen's statements compare, all in
# public, each raising an error that names the role it ran as; and a
# caller whose search_path puts public before pg_catalog (and pg_temp,
# with temporary tables named like idgen's, before both).  Every entry
# point runs as the application role, the database owner and the
# extension's owner (a superuser), and the purge process deletes an
# expired key and an ended lease: none of the look-alikes ever runs.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

# Purges every second, whatever the cluster's default: the test waits for
# the purge process to delete what it planted (purged).  A sequencer ends
# a second after its database's cached keys were last used, so that the
# one that served them before the database's search_path changed is soon
# gone (below).
my $node = idgen_node('shadow', 'idgen.purge_interval' => '1s', 'idgen.sequencer_idle' => '1s',
	'idgen.worker_quarantine' => '0', 'idgen.worker_max_per_role' => '50',
	'idgen.seq_max_keys_per_role' => '50');

$node->safe_psql('postgres', q{
	CREATE ROLE dbo LOGIN;
	CREATE ROLE app LOGIN;
	CREATE DATABASE shadow OWNER dbo;
});
$node->safe_psql('shadow', q{
	CREATE EXTENSION idgen;
	GRANT EXECUTE ON FUNCTION idgen_seq_next(text), idgen_seq_next(text, bigint),
		idgen_seq_current(text), idgen_worker_acquire(text, interval, bigint, boolean),
		idgen_worker_renew(bigint, bigint, interval, timestamptz),
		idgen_worker_release(bigint, bigint, timestamptz) TO app, dbo;
});

# Run $sql in database shadow as $role; (exit code, stdout, stderr).
sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('shadow', "\\set VERBOSITY verbose\n$sql",
		on_error_stop => 1, extra_params => [ '-U', $role ]);
	return ($ret, $out, $err);
}

sub works
{
	my ($role, $sql, $name) = @_;
	my ($ret, $out, $err) = as_role($role, $sql);
	is($ret, 0, "$name ($role)") or diag($err);
	return $out;
}

# What the purge process must delete: a key whose 1 s ttl passed an hour
# ago (written straight into the table, as a restore would, so that it
# exists whatever idgen's functions do), and a lease released at once (no
# quarantine).
sub purge_fodder
{
	my ($tag) = @_;
	works('postgres', qq{
		INSERT INTO idgen_seq (key, step, start, min_value, max_value, cycle, ttl, last_used,
			cache, created_by, called, value)
		VALUES ('expiring_$tag', 1, 1, 1, 9223372036854775807, false, '1 s',
			pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 h', 0, 10, true, 5);
		SELECT idgen_worker_release(worker_id, token) FROM idgen_worker_acquire('purged_$tag');
	}, 'an expired key, and a lease released');
}

sub purged
{
	my ($tag, $name) = @_;
	ok( $node->poll_query_until('shadow', qq{
			SELECT NOT EXISTS (SELECT FROM idgen_seq WHERE key OPERATOR(pg_catalog.=) 'expiring_$tag')
			   AND NOT EXISTS (SELECT FROM idgen_worker_lease
							   WHERE holder OPERATOR(pg_catalog.=) 'purged_$tag')}),
		$name)
	  or diag("after $PostgreSQL::Test::Utils::timeout_default s, the key expiring_$tag "
		  . "or the lease of purged_$tag was still there");
}

# As reported: three look-alikes with an extra defaulted argument.
works('dbo', q{
	CREATE FUNCTION public.idgen_expiry(since timestamptz, ttl interval, extra int DEFAULT 0)
	RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL::timestamptz';
	CREATE FUNCTION public.idgen_seq_purge(extra int DEFAULT 0)
	RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
	CREATE FUNCTION public.idgen_worker_purge(extra int DEFAULT 0)
	RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
}, 'the database owner creates look-alikes with a defaulted argument');

my $offset = -s $node->logfile;
purge_fodder('a');
for my $role ('app', 'dbo', 'postgres')
{
	is(works($role, "SELECT idgen_seq_next('k_$role'), idgen_seq_next('k_$role')",
			'idgen_seq_next beside the look-alikes'), "1|2",
		"idgen_seq_next gives 1, 2 ($role)");
	works($role, "SELECT idgen_seq_next('n_$role', 3)", 'idgen_seq_next(key, n) beside the look-alikes');
	is(works($role, "SELECT idgen_seq_current('k_$role')", 'idgen_seq_current beside the look-alikes'),
		'2', "idgen_seq_current ($role)");
}
works('postgres', q{
	SELECT idgen_seq_set('s', 5), idgen_seq_set('s', 7, false), idgen_seq_set_if_absent('t', 1),
		idgen_seq_configure('c', ttl => '1 h', cache => 10), idgen_seq_next('c'),
		idgen_seq_drop('t');
	SELECT count(*) FROM idgen_seq_keys;
}, 'the administrative functions beside the look-alikes');
purged('a', 'the purge process deletes an expired key and an ended lease beside the look-alikes');
ok(!$node->log_contains(qr/could not run|is not unique/, $offset),
	'the purge process logged no failure');

# The whole set.  Each look-alike raises an error naming the role it runs
# as, so that a call that reached one fails and says so.  The database's
# search_path, which the purge process takes too, puts public first.
works('dbo', q{
	CREATE FUNCTION public.caught() RETURNS void LANGUAGE plpgsql AS $$
	BEGIN RAISE EXCEPTION 'look-alike ran as %', current_user; END $$;
	CREATE FUNCTION public.caught_plus(a timestamptz, b interval) RETURNS timestamptz LANGUAGE plpgsql AS $$
	BEGIN PERFORM public.caught(); RETURN a; END $$;
	CREATE FUNCTION public.caught_s(s bigint) RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN PERFORM public.caught(); RETURN s; END $$;
	CREATE FUNCTION public.caught_s2(s bigint, v bigint) RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN PERFORM public.caught(); RETURN s; END $$;
	CREATE FUNCTION public.caught_s4(s int, v int) RETURNS int LANGUAGE plpgsql AS $$
	BEGIN PERFORM public.caught(); RETURN s; END $$;
	CREATE AGGREGATE public.count(*) (sfunc = public.caught_s, stype = bigint, initcond = '0');
	CREATE AGGREGATE public.max(bigint) (sfunc = public.caught_s2, stype = bigint);
	CREATE AGGREGATE public.max(int) (sfunc = public.caught_s4, stype = int);
	CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
	BEGIN PERFORM public.caught(); RETURN NULL; END $$;
	CREATE FUNCTION public.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql AS $$
	BEGIN PERFORM public.caught(); END $$;
	CREATE FUNCTION public.idgen_expiry(since timestamptz, ttl interval, extra text DEFAULT '')
	RETURNS timestamptz LANGUAGE plpgsql AS $$ BEGIN PERFORM public.caught(); RETURN NULL; END $$;
	CREATE OPERATOR public.+ (leftarg = timestamptz, rightarg = interval, function = public.caught_plus);
	-- Every new session of the database, the purge process's too.
	ALTER DATABASE shadow SET search_path = public, pg_catalog;
	DO $$
	DECLARE
		op text;
		t text;
	BEGIN
		FOREACH t IN ARRAY ARRAY['text', 'bigint', 'int', 'oid', 'timestamptz', 'tid', 'boolean'] LOOP
			EXECUTE format('CREATE FUNCTION public.caught_b(a %s, b %s) RETURNS boolean
							LANGUAGE plpgsql AS $b$ BEGIN PERFORM public.caught(); RETURN false; END $b$',
						   t, t);
			FOREACH op IN ARRAY ARRAY['=', '<>', '<', '<=', '>', '>='] LOOP
				EXECUTE format('CREATE OPERATOR public.%s (leftarg = %s, rightarg = %s, function = public.caught_b)',
							   op, t, t);
			END LOOP;
		END LOOP;
	END $$;
}, 'the database owner creates aggregates, functions and operators named like pg_catalog\'s');

# The database's search_path reaches a session when it connects: the
# purge below must be made by a sequencer that connected after it was
# set, not by one that stayed since (serving the cached key 'c').
{
	my $altered = $node->safe_psql('postgres', 'SELECT pg_catalog.clock_timestamp()');
	$node->poll_query_until('postgres', qq{
		SELECT NOT EXISTS (SELECT FROM pg_stat_activity
			WHERE backend_type = 'idgen sequencer' AND datname = 'shadow'
			  AND backend_start <= '$altered')})
	  or die 'the idgen sequencer of database shadow that connected before its search_path was set did not end';
}

# A session of $role with public first, and pg_temp before it holding
# tables named like idgen's.  No operator may appear in the calls below:
# the look-alikes would catch the test's own.
sub hostile
{
	my ($role, $sql) = @_;
	return qq{
		CREATE TEMP TABLE idgen_seq (key text);
		CREATE TEMP TABLE idgen_worker_lease (id int);
		CREATE TEMP TABLE idgen_public_key (version int);
		CREATE FUNCTION pg_temp.idgen_expiry(since timestamptz, ttl interval, extra int DEFAULT 0)
		RETURNS timestamptz LANGUAGE plpgsql AS \$\$ BEGIN PERFORM public.caught(); RETURN NULL; END \$\$;
		SET search_path = pg_temp, public, pg_catalog;
		$sql};
}

$offset = -s $node->logfile;
purge_fodder('b');
# Each entry point in a session of its own, so that one failure hides no
# other.
for my $role ('app', 'dbo', 'postgres')
{
	is(works($role, hostile($role, "SELECT idgen_seq_next('h_$role'), idgen_seq_next('h_$role')"),
			'idgen_seq_next, hostile'), '1|2', "idgen_seq_next gives 1, 2, hostile ($role)");
	is(works($role, hostile($role, "SELECT idgen_seq_next('hn_$role', 3)"),
			'idgen_seq_next(key, n), hostile'), "1\n2\n3", "idgen_seq_next(key, 3) gives 1, 2, 3 ($role)");
	is(works($role, hostile($role, "SELECT idgen_seq_next('h_$role'); SELECT idgen_seq_current('h_$role')"),
			'idgen_seq_current, hostile'), "3\n3", "idgen_seq_current ($role)");
	works($role, hostile($role, qq{
		SELECT idgen_worker_renew(worker_id, token), idgen_worker_release(worker_id, token)
		FROM idgen_worker_acquire('w_$role', ttl => '1 min')}), 'a lease acquired, renewed, released, hostile');
	works($role, hostile($role, "SELECT worker_id FROM idgen_worker_acquire('s_$role', session_bound => true)"),
		'a session-bound lease, hostile');
}
for my $sql (
	"SELECT idgen_seq_set('s', 5), idgen_seq_set('s', 7, false), idgen_seq_set_if_absent('t', 1)",
	"SELECT idgen_seq_configure('c2', ttl => '1 h', cache => 10), idgen_seq_next('c2')",
	"SELECT idgen_seq_configure('new', ttl => '1 h'), idgen_seq_drop('t')",
	# (CREATE EXTENSION makes no key: two, so that the first can be retired)
	'SELECT idgen_public_rotate(), idgen_public_rotate()',
	'SELECT idgen_private(idgen_public(42))',
	'SELECT idgen_public_retire(1)',
	'SELECT key FROM public.idgen_seq_keys',
	'SELECT holder FROM public.idgen_worker_leases')
{
	works('postgres', hostile('postgres', $sql), "hostile: $sql");
}
purged('b', 'the purge process deletes an expired key and an ended lease beside every look-alike');
ok(!$node->log_contains(qr/look-alike ran|could not run|is not unique/, $offset),
	'no look-alike ran, and the purge process logged no failure');

no_crash_logged($node, 'no crash');
done_testing();
