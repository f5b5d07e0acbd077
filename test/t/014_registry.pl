# Scenario: servers take their Snowflake identity from a registry (another
# server's idgen_worker_lease table), so that no two running servers
# generate under one identity.
#
#   registry   a server with idgen (its own identity 0:0); quarantine 1 s
#   a, b       idgen.identity = 'registry': given any free identity
#   c          idgen.identity = 'settings' (2:5) claimed from the registry
#   twin       an unrelated server configured as 2:5: refused
#   standby    a streaming standby of c (same system identifier, same
#              settings): claims nothing while in recovery, even when c's
#              lease has run out (a partition: c's registry process
#              stopped); refused while c holds 2:5 once promoted; takes
#              2:5 only after c is gone and its lease has run out; then c,
#              restarted, is the one refused (fencing)
#
# Then: the registry stopped (a keeps generating on its lease until it
# runs out, then refuses with a clear error, and recovers when the registry
# is back); a server started while the registry is down; a crash and
# restart of c's successor takes its own lease over at once; a clean
# shutdown releases the lease.  All leases are 3 s long (renewed every 1 s).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IdgenTest;

# (Every server keeps a connection to the registry: more than the test
# cluster's default of 10.)
my $registry = idgen_node('registry', 'idgen.worker_quarantine' => "'1s'", 'max_connections' => 50);
my $conninfo = 'host=' . $registry->host . ' port=' . $registry->port . ' dbname=postgres';
my %leased = ('idgen.registry' => "'$conninfo'", 'idgen.registry_ttl' => "'3s'");

# Wait until $node's identity is held; return "dc:worker".
sub held
{
	my ($node) = @_;
	$node->poll_query_until('postgres', q{SELECT state = 'held' FROM idgen_identity()})
	  or die $node->name . ': no identity: ' . $node->safe_psql('postgres', 'SELECT message FROM idgen_identity()');
	return $node->safe_psql('postgres', q{SELECT datacenter_id || ':' || worker_id FROM idgen_identity()});
}

# The identity carried by a fresh ID of $node.
sub id_identity
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		q{SELECT datacenter_id || ':' || worker_id FROM idgen_snowflake_decode(idgen_snowflake())});
}

sub sysid
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
}

# c first, holding 2:5 before a and b ask for any free identity: the
# registry tries free ids from a random one, and would as readily give 2:5
# to a server that asked before c (c would then be refused, as any server
# claiming an id held by another; see docs/many-servers.md).
my $nc = idgen_node('c', %leased, 'idgen.datacenter_id' => 2, 'idgen.worker_id' => 5,
	_init => { allows_streaming => 1 });
my %ident = (c => held($nc));
my $na = idgen_node('a', %leased, 'idgen.identity' => 'registry');
my $nb = idgen_node('b', %leased, 'idgen.identity' => 'registry');
$ident{$_->name} = held($_) for ($na, $nb);
is($ident{c}, '2:5', 'c holds the identity of its settings, 2:5');
isnt($ident{a}, $ident{b}, "a and b are given different identities ($ident{a}, $ident{b})");
ok(!grep({ $_ eq '0:0' || $_ eq '2:5' } $ident{a}, $ident{b}),
	"neither is the registry's own (0:0) nor c's");
is(id_identity($_), $ident{ $_->name }, $_->name . "'s IDs carry its leased identity")
  for ($na, $nb, $nc);
is( $registry->safe_psql('postgres', q{
		SELECT string_agg(datacenter_id || ':' || worker_id || '=' || system_identifier, ' ' ORDER BY system_identifier)
		FROM idgen_worker_leases WHERE state = 'held'}),
	join(' ', map { "$_->[0]=$_->[1]" } sort { $a->[1] <=> $b->[1] }
		  map { [ $ident{ $_->name }, sysid($_) ] } ($na, $nb, $nc)),
	"the registry holds each server's identity under its system identifier");

# The stress client against each of the four servers at once (4
# connections x 50 000 IDs each, every ID kept): none repeats, on one
# server or across them.
{
	my @nodes = ($registry, $na, $nb, $nc);
	my @runs;
	for my $node (@nodes)
	{
		my ($out, $err) = ('', '');
		my $file = "${PostgreSQL::Test::Utils::tmp_check}/ids_" . $node->name;
		push @runs, [ $node, $file, \$out, \$err, IPC::Run::start(
			[ stress_client(), '-d', $node->connstr('postgres'), '-q', '-c', 4, '-n', 50000,
			  '-b', 500, '--save', $file ],
			'>', \$out, '2>', \$err) ];
	}
	my (%seen, $dups, $total);
	$dups = $total = 0;
	for my $run (@runs)
	{
		my ($node, $file, $out, $err, $h) = @$run;
		$h->finish;
		like($$out, qr/0 duplicates.*PASS/s, $node->name . ': the stress client passes (200 000 IDs, 0 duplicates)');
		open my $fh, '<', $file or die "$file: $!";
		while (my $id = <$fh>)
		{
			$total++;
			$dups++ if $seen{$id}++;
		}
		close $fh;
	}
	is($total, 800_000, '200 000 IDs from each of the four servers at once');
	is($dups, 0, 'no ID repeats across them');
}

# A fifth server configured with c's identity is refused and says why.
my $twin = idgen_node('twin', %leased, 'idgen.datacenter_id' => 2, 'idgen.worker_id' => 5);
$twin->poll_query_until('postgres', q{SELECT state = 'refused' FROM idgen_identity()})
  or die 'the twin was not refused';
my $err = sql_error($twin, 'SELECT idgen_snowflake()');
like($err, qr/55000: this server holds no Snowflake identity/, 'the twin refuses to generate (55000)');
like($err, qr/worker id \(datacenter 2, worker 5\) is taken.*leased to "idgen server .*system identifier ${\ sysid($nc)}/s,
	"and says who holds its identity: c, by system identifier");
is(id_identity($nc), '2:5', 'c goes on generating');
# (Stopped now: it retries every second and would take 2:5 once c is gone.)
$twin->stop('fast');

# A standby of c has c's system identifier and settings: in recovery it
# claims nothing (the identity of its settings is its primary's), and says
# so.
$nc->backup('c_backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($nc, 'c_backup', has_streaming => 1);
$standby->start;
$standby->poll_query_until('postgres', q{SELECT state = 'standby' FROM idgen_identity()})
  or die 'the standby is not waiting for its promotion';
is(sysid($standby), sysid($nc), 'the standby has the system identifier of c');
like($standby->safe_psql('postgres', 'SELECT message FROM idgen_identity()'),
	qr/in recovery: it claims the identity of its settings \(its primary's\) once promoted/,
	'a standby with the identity of its settings claims nothing in recovery');

# A partition between c and the registry (c's registry process stopped
# for longer than the lease and the quarantine): the standby does not take
# 2:5 meanwhile, and c, back, holds 2:5 again.  (Before, the standby took
# it, generated under it in recovery, and c was refused until the standby
# restarted.)
{
	my $pid = $nc->safe_psql('postgres', 'SELECT process_pid FROM idgen_identity()');
	kill 'STOP', $pid or die "kill: $!";
	$registry->poll_query_until('postgres',
		q{SELECT expires_at < now() - interval '2s' FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5})
	  or die "c's lease did not run out";
	sleep 2;
	is($standby->safe_psql('postgres', 'SELECT state FROM idgen_identity()'), 'standby',
		"c's lease ran out and rested: its standby still claims nothing");
	is($registry->safe_psql('postgres',
			q{SELECT count(*) FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5 AND expires_at > now()}),
		'0', 'nobody holds 2:5 meanwhile');
	kill 'CONT', $pid or die "kill: $!";
	is(held($nc), '2:5', 'c, reconnected, holds 2:5 again');
	is(id_identity($nc), '2:5', 'and generates under it');
}

# Promoted while c is alive: refused, and says why.
$standby->promote;
$standby->poll_query_until('postgres', q{SELECT state = 'refused' FROM idgen_identity()})
  or die 'the promoted standby was not refused';
like($standby->safe_psql('postgres', 'SELECT message FROM idgen_identity()'),
	qr/system identifier ${\ sysid($nc)}/, 'promoted, it is refused: its own system identifier holds 2:5');
sleep 2;
like(sql_error($standby, 'SELECT idgen_snowflake()'), qr/holds no Snowflake identity/,
	'promoted while c lives: it still does not generate under 2:5');

# c dies without releasing its lease (immediate stop): the promoted standby
# gets 2:5 once the lease has run out and rested (3 s + 1 s), not before.
my $c_expires = $registry->safe_psql('postgres',
	q{SELECT extract(epoch FROM expires_at) FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5});
$nc->stop('immediate');
is(held($standby), '2:5', 'the promoted standby takes 2:5 once c is gone');
my $taken = $registry->safe_psql('postgres',
	q{SELECT extract(epoch FROM acquired_at) FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5});
cmp_ok($taken, '>=', $c_expires + 1, "only after c's lease ended and rested 1 s");
is(id_identity($standby), '2:5', 'and generates under it');

# c comes back: now it is the one refused (the fencing works both ways).
$nc->start;
$nc->poll_query_until('postgres', q{SELECT state = 'refused' FROM idgen_identity()})
  or die 'c was not refused after its return';
like(sql_error($nc, 'SELECT idgen_snowflake()'), qr/holds no Snowflake identity/,
	'c, back, does not generate under the identity its standby took');
$nc->stop('fast');

# A crash and restart of the standby's server (SIGKILL of its registry
# worker: shared memory is re-created): the same postmaster finds its token
# in its lease file and renews its lease at once, without waiting for it to
# run out.  A 10 s ttl (reloaded) leaves time to see the difference.
$standby->append_conf('postgresql.conf', "idgen.registry_ttl = '10s'\nrestart_after_crash = on");
$standby->reload;
$registry->poll_query_until('postgres',
	q{SELECT expires_at - renewed_at > '5 s' FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5})
  or die 'the 10 s ttl was not taken up';
my ($token_before, $expires_before) = split /\|/, $registry->safe_psql('postgres',
	q{SELECT token, extract(epoch FROM expires_at) FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5});
my $victim = $standby->safe_psql('postgres', 'SELECT process_pid FROM idgen_identity()');
kill 'KILL', $victim or die "kill: $!";
$standby->poll_query_until('postgres', "SELECT process_pid IS DISTINCT FROM $victim FROM idgen_identity()")
  or die 'no restart';
ok($standby->log_contains(qr/\(PID $victim\) was terminated by signal 9/), 'the postmaster crash-restarted');
is(held($standby), '2:5', 'after a crash and restart it holds 2:5 again');
ok($standby->log_contains(qr/resumes the lease on \(datacenter 2, worker 5\) after a restart/),
	'it resumed its lease from its lease file');
my ($token_after, $renewed_after) = split /\|/, $registry->safe_psql('postgres',
	q{SELECT token, extract(epoch FROM renewed_at) FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5});
is($token_after, $token_before, 'with the same token');
cmp_ok($renewed_after, '<', $expires_before, 'renewed before the lease ran out');

# A SIGTERM to the registry process outside a shutdown: it gives the lease
# back and exits; the postmaster starts it again and it takes an identity.
{
	my $pid = $standby->safe_psql('postgres', 'SELECT process_pid FROM idgen_identity()');
	kill 'TERM', $pid or die "kill: $!";
	$standby->poll_query_until('postgres',
		"SELECT state = 'held' AND process_pid IS DISTINCT FROM $pid FROM idgen_identity()")
	  or die 'the registry process did not come back';
	is(id_identity($standby), '2:5', 'a SIGTERM to the registry process: it comes back and holds 2:5 again');
}

# A release sent and not answered (the registry's backends stopped with
# SIGSTOP): it may still commit later, so the token is not kept for the
# restarted worker to renew; it claims anew once the release has committed
# and the id rested, under a new token, and the registry and the server
# agree on who holds 2:5.
{
	my $old_token = $standby->safe_psql('postgres', 'SELECT token FROM idgen_identity()');
	my @backends = split /\n/, $registry->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE application_name = 'idgen registry'});
	my $offset = -s $standby->logfile;
	kill 'STOP', @backends or die "kill: $!";
	my $pid = $standby->safe_psql('postgres', 'SELECT process_pid FROM idgen_identity()');
	kill 'TERM', $pid or die "kill: $!";
	$standby->wait_for_log(qr/could not be released/, $offset);
	kill 'CONT', @backends or die "kill: $!";
	$registry->poll_query_until('postgres', qq{
		SELECT token <> $old_token AND released_at IS NULL
		FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5})
	  or die 'no new lease on 2:5';
	is(held($standby), '2:5', 'a release not answered: the server claims 2:5 anew');
	my $token = $registry->safe_psql('postgres',
		'SELECT token FROM idgen_worker_leases WHERE datacenter_id = 2 AND worker_id = 5');
	isnt($token, $old_token, 'under a new token, not by renewing the one whose release was in flight');
	is($standby->safe_psql('postgres', 'SELECT token FROM idgen_identity()'), $token,
		'the registry and the server agree on the lease');
	# Had the token been kept, the restarted worker would have renewed it,
	# and its next renewal, after the release committed, would find it lost.
	ok(!$standby->log_contains(qr/lost: generation stopped/, $offset),
		'the token whose release was in flight was never renewed');
	held($_) for ($na, $nb);
}

# The registry stops: a goes on generating on its lease, then refuses.
# (The lease has 2 to 3 s left when the registry goes: a's session is
# connected before, and the registry stopped at once, its shutdown
# checkpoint skipped, so that the first check comes within them on a
# loaded machine too.  The refusal is awaited in a's server, and timed
# there from the last renewal, idgen_identity().renewed_at: a new
# connection's time on a loaded machine is no part of it.)
my $session = $na->background_psql('postgres');
$session->query_safe(q{
	CREATE FUNCTION wait_refused(OUT after_renewal float8, OUT error text) LANGUAGE plpgsql AS $$
	DECLARE
		deadline timestamptz := clock_timestamp() + interval '60 s';
		detail text;
	BEGIN
		WHILE clock_timestamp() < deadline LOOP
			BEGIN
				PERFORM idgen_snowflake();
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
				error := SQLERRM || ' ' || detail;
				SELECT extract(epoch FROM clock_timestamp() - renewed_at) INTO after_renewal FROM idgen_identity();
				RETURN;
			END;
			PERFORM pg_sleep(0.01);
		END LOOP;
	END $$});
$registry->stop('immediate');
is($session->query_safe(
		q{SELECT datacenter_id || ':' || worker_id FROM idgen_snowflake_decode(idgen_snowflake())}),
	$ident{a}, 'the registry is down: a still generates on its lease');
my ($after_renewal, $refusal) = split /\|/, $session->query_safe('SELECT * FROM wait_refused()'), 2;
$session->quit;
like($refusal, qr/lease on its Snowflake identity has ended/, 'then refuses: its lease has ended');
ok($after_renewal ne '', 'a stops generating');
cmp_ok($after_renewal, '<=', 3.5, 'no later than the ttl (3 s) after the last renewal');
like($na->safe_psql('postgres', 'SELECT message FROM idgen_identity()'),
	qr/registry did not answer|could not connect/, 'idgen_identity() says the registry is unreachable');

# A server started while the registry is down has no identity.
my $nd = idgen_node('d', %leased, 'idgen.identity' => 'registry');
like(sql_error($nd, 'SELECT idgen_snowflake()'), qr/holds no Snowflake identity.*could not connect to the registry/s,
	'a server started while the registry is down refuses to generate, and says why');

# The registry returns: both recover.
$registry->start;
is(held($na), $ident{a}, 'the registry is back: a renews its own lease');
is(id_identity($na), $ident{a}, 'and generates again');
my $dident = held($nd);
ok(!grep({ $_ eq $dident } values %ident), "d is given an identity of its own ($dident)");

# A lease lost (its row deleted on the registry by hand): the next renewal
# says so, generation stops at once, and the worker claims again.
{
	my $old = $na->safe_psql('postgres', 'SELECT token FROM idgen_identity()');
	my $offset = -s $na->logfile;
	$registry->safe_psql('postgres', "DELETE FROM idgen_worker_lease WHERE token = $old");
	$na->wait_for_log(qr/lost: generation stopped/, $offset);
	$na->poll_query_until('postgres', "SELECT state = 'held' AND token <> $old FROM idgen_identity()")
	  or die 'a did not claim again';
	$ident{a} = held($na);
	is(id_identity($na), $ident{a}, "a lost lease: a claims again and generates under $ident{a}");
}

# The registry blocked by a lock on its lease table: each server has at
# most one statement waiting there (a statement that times out is
# cancelled, and the registry's side has a lock_timeout), and all recover.
{
	my ($out, $err) = ('', '');
	my $locker = IPC::Run::start(
		[ $registry->installed_command('psql'), '-XAtq', '-d', $registry->connstr('postgres'), '-c',
		  'BEGIN; LOCK TABLE idgen_worker_lease; SELECT pg_sleep(6); COMMIT;' ],
		'>', \$out, '2>', \$err);
	my $most = 0;
	for (1 .. 12)
	{
		usleep(500_000);
		my $n = $registry->safe_psql('postgres', q{
			SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'idgen registry' AND wait_event_type = 'Lock'});
		$most = $n if $n > $most;
	}
	$locker->finish or die "the lock holder failed: $err";
	# a, b, d and the promoted standby hold leases from this registry.
	cmp_ok($most, '<=', 4, "with the registry's table locked for 6 s, at most one waiting statement per server ($most, 4 servers)");
	is(held($na), $ident{a}, 'a holds its identity again once the lock is gone');
}

# A clean shutdown releases the lease.
$nb->stop('fast');
is( $registry->safe_psql('postgres',
		"SELECT released_at IS NOT NULL FROM idgen_worker_leases WHERE datacenter_id || ':' || worker_id = '$ident{b}'"),
	't', "a clean shutdown of b released its lease");

# A server that ran ahead of its clock (borrowing: 0 sequence bits, so every
# ID takes a millisecond, and idgen.max_drift = 5 s) and is then shut
# down cleanly: its release waits until the clock has passed its last ID, so
# the next holder of the identity cannot meet it.  (A second registry, as
# servers sharing a registry must share its layout.)
{
	my %fast = ('idgen.timestamp_bits' => 53, 'idgen.sequence_bits' => 0);
	my $reg2 = idgen_node('registry2', %fast, 'idgen.worker_quarantine' => "'1s'");
	my $conn2 = 'host=' . $reg2->host . ' port=' . $reg2->port . ' dbname=postgres';
	my %borrow = (%fast, 'idgen.registry' => "'$conn2'", 'idgen.registry_ttl' => "'10s'",
		'idgen.max_drift' => 5000, 'idgen.clock_wait' => 10000,
		'idgen.horizon_lead' => 20000, 'idgen.datacenter_id' => 4, 'idgen.worker_id' => 4);
	my $f = idgen_node('f', %borrow);
	is(held($f), '4:4', 'f holds 4:4');
	my $e = idgen_node('e', %borrow);
	$e->poll_query_until('postgres', q{SELECT state = 'refused' FROM idgen_identity()})
	  or die 'e was not refused';
	# (How far ahead, read in the session that generated them, right after:
	# a new connection, on a loaded machine, could take the lead's seconds.)
	my $ahead = $f->safe_psql('postgres', q{
		CREATE TABLE ids AS SELECT idgen_snowflake() AS id FROM generate_series(1, 3000);
		SELECT extract(epoch FROM max(idgen_snowflake_time(id)) - clock_timestamp()) FROM ids});
	cmp_ok($ahead, '>', 1, "f's last ID is ${ahead} s ahead of its clock");
	my @f_ids = split /\n/, $f->safe_psql('postgres', 'SELECT id FROM ids');
	$f->stop('fast');
	is(held($e), '4:4', 'e takes 4:4 after f released it');
	$e->safe_psql('postgres', 'CREATE TABLE ids AS SELECT idgen_snowflake() AS id FROM generate_series(1, 3000)');
	my %f_set = map { $_ => 1 } @f_ids;
	my $same = grep { $f_set{$_} } split /\n/, $e->safe_psql('postgres', 'SELECT id FROM ids');
	is($same, 0, 'none of e\'s IDs is one f issued ahead of its clock');
	$_->stop('fast') for ($e, $reg2);
}

for my $node ($na, $nb, $nc, $twin, $standby, $nd, $registry)
{
	$node->stop('fast');
	no_crash_logged($node, $node->name . ': no assertion failure or panic');
}
done_testing();
