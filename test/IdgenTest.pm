# IdgenTest: small helpers shared by idgen's TAP tests (test/t/*.pl).
package IdgenTest;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes;
use POSIX ();
use File::Basename qw(dirname);
use File::Spec;

use Exporter 'import';
our @EXPORT = qw(idgen_node wait_for_horizon sql_error stress_client crash_twice faketime_clock freeze_clock hold_reindex
  no_crash_logged rows_once_agreed wait_for_gate claim_received ids_past start_load read_values compare_values generate_for take_on_nodes doc_block doc_examples repo_file kill_backend
  gdb_or_skip gdb_hold gdb_wait_stop gdb_release mesh_app mesh_node mesh_subscribe announce start_mesh_load issued_by count_common);

# A new cluster with idgen preloaded and the extension created in database
# "postgres".  %conf holds extra settings (name => value); a setting named
# shared_preload_libraries overrides the preload; the key _init passes a
# hash of options to init (e.g. allows_streaming => 1), and _version the
# extension's version to create (default: idgen.control's).
sub idgen_node
{
	my ($name, %conf) = @_;
	my $init = delete $conf{_init} // {};
	my $version = delete $conf{_version};
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%$init);
	# %e: the SQLSTATE of every logged message, so that test/run.sh can
	# check that no test reached an internal error (XX000).
	my %all = (shared_preload_libraries => "'idgen'",
		log_line_prefix => "'%m [%p] %e %q%a '", %conf);
	$node->append_conf('postgresql.conf',
		join('', map { "$_ = $all{$_}\n" } sort keys %all));
	$node->start;
	$node->safe_psql('postgres',
		'CREATE EXTENSION idgen' . (defined $version ? " VERSION '$version'" : ''));
	return $node;
}

# Wait until generators on $node may issue at once: its keeper has made
# a horizon durable since the start, ahead of the clock and, after an end
# of recovery (a crash restart or a promotion), beyond where the recovery
# started the generators (recovery_ended_at + recovery_lead_ms, two
# readings of the startup process's clock a moment apart, which one
# keeper round, idgen.horizon_interval, covers; a predicate true a little
# early would cost the first call a round's wait, not a failure).  Until
# then a generator wakes the keeper and waits up to idgen.clock_wait (an
# fsync, and a WAL record after a recovery): a test whose first call must
# succeed waits here instead, so that a slow fsync on a loaded machine
# does not fail that call.  The horizon a start begins with does not
# count: after a clean shutdown it is the last ID issued, behind the
# clock, but after a crash of a server whose WAL carries the horizon
# (wal_level replica or logical) it is the one replayed, which may be
# ahead of the clock, with the generators above it.  A wait of over 5 s is
# reported (diag), with the keeper's state: the keeper takes well under a
# second unless the machine's storage stalls, so a test that passes after
# a long wait still shows it.
sub wait_for_horizon
{
	my ($node) = @_;
	my $start = Time::HiRes::time();
	my $ok = $node->poll_query_until('postgres', q{
		SELECT horizon_persists > 0 AND horizon_lead_ms > 0
		   AND (recovery_ended_at IS NULL
		        OR horizon > recovery_ended_at + recovery_lead_ms * interval '1 ms'
		                     + current_setting('idgen.horizon_interval')::interval)
		  FROM idgen_info()});
	my $waited = Time::HiRes::time() - $start;
	diag(sprintf('%s: waited %.1f s for the keeper\'s horizon after the start: %s', $node->name, $waited,
			$node->safe_psql('postgres', q{
				SELECT format('horizon %s, persists %s, failures %s, end of recovery %s',
					horizon, horizon_persists, horizon_failures,
					coalesce(recovery_ended_at || ' (lead ' || recovery_lead_ms || ' ms)', 'none'))
				  FROM idgen_info()})))
	  if $waited > 5 || !$ok;
	die 'the keeper made no horizon generators may use after the start' unless $ok;
}

# Pass if $node's server log shows no crash: no failed assertion (TRAP:),
# no PANIC, and no process that died of a signal other than the SIGKILLs
# the tests send themselves.  A crashed process is logged as "server
# process (PID n) was terminated by signal 11" before 18 and by its type
# since ("client backend (PID n) ..."), so the pattern names neither.
sub no_crash_logged
{
	my ($node, $name) = @_;
	my $crash = qr/TRAP:|PANIC:|\(PID \d+\) was terminated by signal (?!9:)/;
	ok(!$node->log_contains($crash), $name)
	  or diag(join "\n", grep { /$crash/ } split /\n/,
		PostgreSQL::Test::Utils::slurp_file($node->logfile));
}

# Run $sql expecting it to fail; return its stderr (message, detail, hint
# and SQLSTATE, as psql prints them with VERBOSITY verbose).
sub sql_error
{
	my ($node, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"\\set VERBOSITY verbose\n$sql", on_error_stop => 1);
	ok($ret != 0, "fails: $sql");
	return $stderr;
}

# Start REINDEX INDEX CONCURRENTLY $index on $node and hold it with its new
# index ("${index}_ccnew") ready for inserts but not valid: a transaction
# with an old snapshot makes it wait there.  Returns the query that is true
# while the new index is in that state, and a function that ends the
# transaction and waits for the REINDEX to finish.
sub hold_reindex
{
	my ($node, $index) = @_;
	my $snapshot = $node->background_psql('postgres');
	$snapshot->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM pg_class');
	my ($out, $err) = ('', '');
	my $reindex = IPC::Run::start([ 'psql', '-X', '-q', '-d', $node->connstr('postgres'),
			'-c', "REINDEX INDEX CONCURRENTLY $index" ], '>', \$out, '2>', \$err);
	my $held = "SELECT indisready AND NOT indisvalid FROM pg_index "
	  . "WHERE indexrelid = '${index}_ccnew'::regclass";
	$node->poll_query_until('postgres', $held) or die "the new index of $index did not become ready";
	my $release = sub {
		$snapshot->query_safe('COMMIT');
		$snapshot->quit;
		$reindex->finish or die "REINDEX INDEX CONCURRENTLY $index failed: $err";
	};
	return ($held, $release);
}

# While stress clients (idgen_stress with --reconnect) run against $node:
# SIGKILL one of their backends (the postmaster crash-restarts every process
# and re-creates shared memory), then stop the server with pg_ctl stop -m
# immediate and start it again.  Each crash waits until the clients'
# $connections connections are all there, and $ready (optional) holds: so
# every connection is cut off twice, however long a loaded machine takes to
# crash-restart and reconnect.  $ready is a boolean SQL expression, or a
# sub that returns once what it waits for holds.  $what names what the
# backends were doing, for the test names.
sub crash_twice
{
	my ($node, $what, $connections, $ready) = @_;
	my $sql = ref($ready) ? 'true' : ($ready // 'true');
	my $wait = sub {
		my ($when) = @_;
		$node->poll_query_until('postgres', qq{
			SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idgen_stress') = $connections
			   AND $sql})
		  or die "the stress clients were not all connected $when";
		$ready->($when) if ref($ready);
	};
	$wait->('before the first crash');
	my $victim = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'idgen_stress' LIMIT 1");
	like($victim, qr/^\d+$/, "found a backend $what");
	kill_backend($node, $victim);
	$node->poll_query_until('postgres', 'SELECT 1', '1')
	  or die 'server did not come back after the crash';
	$wait->('after the first crash');
	$node->stop('immediate');
	$node->start;
}

# SIGKILL backend $pid of $node, and pass once the postmaster has logged
# its death, after which it restarts every process (with
# restart_after_crash on).  A connection made before it reaped the process
# would answer at once: wait for the line, then for the server.  ("server
# process" before 18, the process's type ("client backend") since.)
sub kill_backend
{
	my ($node, $pid) = @_;
	kill 'KILL', $pid or die "kill: $!";
	my $logged = 0;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		last if $logged = $node->log_contains(qr/\(PID $pid\) was terminated by signal 9/);
		Time::HiRes::usleep(100_000);
	}
	ok($logged, 'SIGKILL of a backend: the postmaster crash-restarted');
}

# A clock for servers under libfaketime: returns the offset file (set to
# +0) and the environment a server must be started with to read its clock
# from it.  Its monotonic clock stays real, as it does when a real wall
# clock is stepped.  step_clock($file, '-30') then moves that clock.
sub faketime_clock
{
	my ($libfaketime) = grep { -f $_ } (
		'/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
		'/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
		glob('/usr/lib/*/faketime/libfaketime.so.1'));
	die 'libfaketime not found: install the Debian package faketime' unless $libfaketime;
	my $file = PostgreSQL::Test::Utils::tempdir() . '/faketime';
	step_clock($file, '+0');
	return ($file,
		{
			LD_PRELOAD => $libfaketime,
			FAKETIME_TIMESTAMP_FILE => $file,
			FAKETIME_NO_CACHE => 1,
			FAKETIME_DONT_FAKE_MONOTONIC => 1
		});
}

# Set the offset of a faketime_clock, atomically.
sub step_clock
{
	my ($file, $offset) = @_;
	open my $fh, '>', "$file.tmp" or die "$file.tmp: $!";
	print $fh "$offset\n";
	close $fh;
	rename "$file.tmp", $file or die "$file: $!";
}

# Stop a faketime_clock at $time (Unix seconds, with a fraction): libfaketime
# reads a time without a sign or '@' as an absolute time (in local time, as
# the server's own TZ reads it) that stands still.  The monotonic clock goes
# on.  step_clock with an offset starts it again.
sub freeze_clock
{
	my ($file, $time) = @_;
	my $s = POSIX::floor($time);
	step_clock($file, POSIX::strftime('%Y-%m-%d %H:%M:%S', localtime($s))
		  . sprintf('.%06d', ($time - $s) * 1e6));
}

# Wait until each of @nodes, nodes of an active-active mesh, hands out
# Snowflake IDs in database postgres: it has heard from every node it
# subscribes to since it started (docs/active-active.md).  Each poll takes
# an ID.
sub wait_for_gate
{
	my @nodes = @_;
	for my $node (@nodes)
	{
		$node->poll_query_until('postgres', 'SELECT idgen_snowflake() IS NOT NULL')
		  or die $node->name . ' did not hear from the nodes it subscribes to';
	}
}

# Whether $node received, in database postgres, a claim of $other's
# identity announced since $other's start: polled until it did, or
# $PostgreSQL::Test::Utils::timeout_default seconds.
sub claim_received
{
	my ($node, $other) = @_;
	my $sysid = $other->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
	my $since = $other->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
	return $node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM idgen_identity_claim
		WHERE system_identifier = $sysid AND announced_at > '$since'});
}

# The rows $query reads in database postgres of each of @nodes (one string
# per node), once they are the same on all of them, or when they are still
# not after $PostgreSQL::Test::Utils::timeout_default seconds (the caller's
# assertion then fails on them).  For replicated rows that a background
# process may write after the changes a test waited for.
sub rows_once_agreed
{
	my ($query, @nodes) = @_;
	my $deadline = Time::HiRes::time() + $PostgreSQL::Test::Utils::timeout_default;
	my @rows;
	while (1)
	{
		@rows = map { $_->safe_psql('postgres', $query) } @nodes;
		last if !grep { $_ ne $rows[0] } @rows;
		if (Time::HiRes::time() > $deadline)
		{
			diag("the nodes still differ after $PostgreSQL::Test::Utils::timeout_default s: $query");
			last;
		}
		Time::HiRes::usleep(100_000);
	}
	return @rows;
}

# Issue Snowflake IDs on $node until one's time is past $bound (a
# timestamptz): the IDs issued, the last of them past it.  A test whose
# scenario needs a server to have issued IDs above some horizon makes sure
# of it this way rather than hoping a load got there in a set time, which
# a loaded machine may hold up.  Dies if none is past it by the tests'
# default timeout.
sub ids_past
{
	my ($node, $bound) = @_;
	my ($id, $past, @ids) = ('', 'f');
	my $deadline = Time::HiRes::time() + $PostgreSQL::Test::Utils::timeout_default;
	while ($past ne 't' && Time::HiRes::time() < $deadline)
	{
		($id, $past) = split /\|/, $node->safe_psql('postgres',
			"SELECT id, idgen_snowflake_time(id) > '$bound' FROM idgen_snowflake() id");
		push @ids, $id;
	}
	$past eq 't' or die $node->name . " issued no ID above $bound";
	return @ids;
}

# Start a client that runs $sql on $node again and again until the server
# has stopped (a failed call is retried while the server still answers),
# appending every value it was answered to $file.
sub start_load
{
	my ($node, $file, $sql) = @_;
	return IPC::Run::start(
		[
			'bash', '-c',
			'while psql -X -A -t -q -d "$0" -c "$1" >> "$2" 2>/dev/null ||
				psql -X -q -d "$0" -c "SELECT 1" > /dev/null 2>&1; do :; done',
			$node->connstr('postgres'), $sql, $file
		]);
}

# The values a start_load client wrote to $file.
sub read_values
{
	my ($file) = @_;
	open my $fh, '<', $file or die "$file: $!";
	my @v = grep { $_ ne '' } map { chomp; $_ } <$fh>;
	close $fh;
	return @v;
}

# Generate Snowflake IDs and UUIDv7s on $node for $seconds (enough that
# they span as many milliseconds as a server before it issued in), from
# when it may (wait_for_horizon); two array references, the IDs and the
# UUIDs.
sub generate_for
{
	my ($node, $seconds) = @_;
	my (@ids, @uuids);
	wait_for_horizon($node);
	my $end = Time::HiRes::time() + $seconds;
	while (Time::HiRes::time() < $end)
	{
		push @ids, split /\n/, $node->safe_psql('postgres',
			'SELECT idgen_snowflake() FROM generate_series(1, 5000)');
		push @uuids, split /\n/, $node->safe_psql('postgres',
			'SELECT idgen_uuid7() FROM generate_series(1, 2000)');
	}
	return (\@ids, \@uuids);
}

# Two clients on each of @nodes at once, each running CALL take(r, $n) in
# database "postgres" (r: the node's index in @nodes; the test defines the
# procedure); one test per client that it finished without an error.
sub take_on_nodes
{
	my ($n, @nodes) = @_;
	my @h;
	for my $r (0 .. $#nodes)
	{
		for (1 .. 2)
		{
			my ($out, $err) = ('', '');
			push @h,
			  [ IPC::Run::start(
					[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $nodes[$r]->connstr('postgres'),
					  '-c', "CALL take($r, $n)" ],
					'>', \$out, '2>', \$err), \$err, $r ];
		}
	}
	for my $c (@h)
	{
		$c->[0]->finish;
		is(${ $c->[1] }, '', "a client on node $c->[2] finished without an error");
	}
}

# Compare the values a server issued ($new) with those issued before it
# ($old): how many repeat, and how many are not above every old one.
# $numeric: Snowflake IDs (else UUIDs, compared as text).
sub compare_values
{
	my ($old, $new, $numeric) = @_;
	my %seen = map { $_ => 1 } @$old;
	my $dups = grep { $seen{$_} } @$new;
	my $max = (sort { $numeric ? $a <=> $b : $a cmp $b } @$old)[-1];
	my $not_above = defined $max ? grep { $numeric ? $_ <= $max : $_ le $max } @$new : 0;
	return ($dups, $not_above);
}

# The contents of a file of the repository, by its path from the root.
sub repo_file
{
	my ($file) = @_;
	return PostgreSQL::Test::Utils::slurp_file(dirname(File::Spec->rel2abs(__FILE__)) . "/../$file");
}

# The code block of a file in the repository (relative to its root, e.g.
# 'docs/many-servers.md') that follows the line "<!-- test: NAME -->",
# exactly as printed: tests run the recipes the documentation shows.
sub doc_block
{
	my ($file, $name) = @_;
	my $text = repo_file($file);
	my @found = $text =~ /^<!-- test: \Q$name\E -->\n```[a-z]*\n(.*?)^```$/msg;
	die "$file: no block marked \"<!-- test: $name -->\"" if @found == 0;
	die "$file: more than one block marked \"<!-- test: $name -->\"" if @found > 1;
	return $found[0];
}

# Every code block of README.md and docs/*.md marked "<!-- test: PREFIX/NAME -->",
# as a list of [NAME, FILE, BLOCK] in the order of the files: a test that
# runs the examples of a kind finds them wherever the documentation puts them.
sub doc_examples
{
	my ($prefix) = @_;
	my $root = dirname(File::Spec->rel2abs(__FILE__)) . '/..';
	my @found;
	for my $file ('README.md', map { s{^\Q$root\E/}{}r } sort glob("$root/docs/*.md"))
	{
		my $text = repo_file($file);
		while ($text =~ /^<!-- test: \Q$prefix\E\/([a-z0-9-]+) -->\n```[a-z]*\n(.*?)^```$/msg)
		{
			push @found, [ $1, $file, $2 ];
		}
	}
	return @found;
}

# gdb holds a backend at a breakpoint: a real stopped process, as a VM
# pause, a swap storm or SIGSTOP would make one.  No init file, no
# questions, no symbol downloads.
my @gdb_opts = ('-nx', '-batch', '-iex', 'set debuginfod enabled off');

# Release files of the gdb sessions still holding a backend: a test that
# dies lets them go, so that gdb and the server can end.
my %gdb_releases;
END { for (keys %gdb_releases) { open my $fh, '>', $_; close $fh; } }

# The path of gdb, or the whole test skipped if gdb cannot attach to a
# backend of $node here (ptrace of a process of the same user).
sub gdb_or_skip
{
	my ($node) = @_;
	my ($gdb) = grep { -x $_ } map { "$_/gdb" } split /:/, $ENV{PATH};
	die 'gdb not found: install the Debian package gdb (test/run.sh and test/chroot.sh do)' unless $gdb;
	my $probe = $node->background_psql('postgres');
	my $pid = $probe->query_safe('SELECT pg_backend_pid()');
	my ($out, $err) = ('', '');
	IPC::Run::run([ $gdb, @gdb_opts, '-p', $pid, '-ex', 'detach' ], '>', \$out, '2>', \$err);
	$probe->quit;
	plan skip_all => "gdb cannot attach to a backend on this machine: " . ($1 // $2)
	  if "$out$err" =~ /ptrace: (.*)|(Could not attach.*)/;
	return $gdb;
}

# Attach gdb to backend $pid with a breakpoint at $break, and let the
# backend go on.  When the backend reaches it, gdb runs @at_stop (more
# gdb commands: 'finish', another breakpoint and 'continue', 'bt') and then
# holds the backend until gdb_release.  $dir, a new directory, holds the
# files by which gdb and the test signal each other.
sub gdb_hold
{
	my ($gdb, $pid, $dir, $break, @at_stop) = @_;
	mkdir $dir or die "$dir: $!";
	my $g = { dir => $dir, out => '', err => '' };
	$gdb_releases{"$dir/release"} = 1;
	my @cmds = ('handle all nostop noprint pass', "break $break", "shell touch $dir/ready", 'continue',
		@at_stop, "shell touch $dir/stopped", "shell while [ ! -e $dir/release ]; do sleep 0.1; done",
		'detach');
	$g->{h} = IPC::Run::start([ $gdb, @gdb_opts, '-p', $pid, map { ('-ex', $_) } @cmds ],
		'>', \$g->{out}, '2>', \$g->{err});
	wait_for_gdb_file("$dir/ready", $g->{h}) or die "gdb did not attach:\n$g->{out}$g->{err}";
	return $g;
}

# Wait until the backend held by gdb_hold's $g has stopped.
sub gdb_wait_stop
{
	my ($g) = @_;
	wait_for_gdb_file("$g->{dir}/stopped", $g->{h})
	  or die "the backend did not stop at the breakpoint:\n$g->{out}$g->{err}";
}

# Let the backend go and gdb end; what gdb printed (stdout, stderr).
sub gdb_release
{
	my ($g) = @_;
	open my $fh, '>', "$g->{dir}/release" or die "$g->{dir}/release: $!";
	close $fh;
	delete $gdb_releases{"$g->{dir}/release"};
	$g->{h}->finish;
	return ($g->{out}, $g->{err});
}

# Wait until $file exists, while gdb ($h) runs.
sub wait_for_gdb_file
{
	my ($file, $h) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		return 1 if -e $file;
		$h->pump_nb;
		return 0 unless $h->pumpable || -e $file;
		Time::HiRes::usleep(100_000);
	}
	return 0;
}

# Path of the libpq stress client built by `make stress`, next to this
# module (PGXS sets TESTDIR before 18 only).
sub stress_client
{
	my $path = dirname(File::Spec->rel2abs(__FILE__)) . '/stress/idgen_stress';
	die "stress client not built: run make stress" unless -x $path;
	return $path;
}


# --- active-active meshes (test/t/042_active_start.pl, 043_active_copies.pl)

# The application of a mesh's tests: a table keyed by idgen_snowflake()
# with a per-key value in each row, and a procedure that inserts about 50
# rows a second for $seconds, keeping every ID and value the node handed
# out in "issued" (an insert that then failed too: another node's ID may
# meet the same ID replicated from it) and counting what the node
# refused.  A node's rows carry its label ("node"), as replication carries
# them to the others; every table has a primary key, which pglogical
# needs.
my $mesh_app = q{
	CREATE TABLE t4 (id bigint PRIMARY KEY DEFAULT idgen_snowflake(),
		node int NOT NULL, v bigint NOT NULL);
	CREATE TABLE issued (node int NOT NULL, id bigint NOT NULL, v bigint, PRIMARY KEY (node, id));
	CREATE TABLE refused (at uuid PRIMARY KEY DEFAULT gen_random_uuid(), node int NOT NULL,
		sqlstate text NOT NULL, message text NOT NULL);
	CREATE PROCEDURE load(node int, seconds int) LANGUAGE plpgsql AS $$
	DECLARE
		stop timestamptz := clock_timestamp() + make_interval(secs => seconds);
		new_id bigint;
		new_v bigint;
	BEGIN
		WHILE clock_timestamp() < stop LOOP
			new_id := NULL;
			new_v := NULL;
			BEGIN
				new_id := idgen_snowflake();
				new_v := idgen_seq_next('conv:1');
				INSERT INTO t4 VALUES (new_id, node, new_v);
			EXCEPTION
				WHEN object_not_in_prerequisite_state OR object_in_use THEN
					INSERT INTO refused (node, sqlstate, message) VALUES (node, SQLSTATE, SQLERRM);
				WHEN unique_violation THEN
					NULL;
			END;
			IF new_id IS NOT NULL THEN
				INSERT INTO issued VALUES (node, new_id, new_v);
			END IF;
			COMMIT;
			PERFORM pg_sleep(0.02);
		END LOOP;
	END $$;
};

# The SQL that makes the mesh's application.
sub mesh_app
{
	return $mesh_app;
}

# Node $r of $count named "${prefix}_$r", with worker id $worker, the
# mesh's application, and docs/active-active.md's publications; %extra
# holds more settings.
sub mesh_node
{
	my ($prefix, $r, $count, $worker, %extra) = @_;
	my $node = idgen_node("${prefix}_$r",
		'max_worker_processes' => 24,
		'max_logical_replication_workers' => 8,
		'max_wal_senders' => 10,
		%extra,
		'idgen.worker_id' => $worker,
		'idgen.active_nodes' => $count,
		'idgen.active_node' => $r,
		_init => { allows_streaming => 'logical' });
	$node->safe_psql('postgres', $mesh_app);
	$node->safe_psql('postgres', doc_block('docs/active-active.md', 'active-active/publish'));
	# its identity announced before any subscription, as a purge does (the
	# purge at the start came before the extension): the next purge's is
	# a purge interval after the start
	announce($node);
	$node->safe_psql('postgres', q{SELECT count(*) = 1 FROM idgen_identity_claim
		WHERE system_identifier = (SELECT system_identifier FROM pg_control_system())}) eq 't'
	  or die $node->name . ' did not announce its identity';
	return $node;
}

# $node announces its identity, as its purges do.  Tried again if it meets
# a purge announcing at the same moment (a duplicate key).
sub announce
{
	my ($node) = @_;
	for (1 .. 10)
	{
		my ($ret) = $node->psql('postgres', 'SELECT idgen_identity_announce()');
		return if $ret == 0;
		sleep 1;
	}
	die $node->name . ' could not announce its identity';
}

# docs/active-active.md's subscription of node $r to node $o (named
# node${r}_from_node$o), as printed, with $other's connection string;
# returns once its apply process runs.
sub mesh_subscribe
{
	my ($node, $r, $other, $o) = @_;
	my $conn = $other->connstr . ' dbname=postgres';
	(my $steps = doc_block('docs/active-active.md', 'active-active/subscribe'))
	  =~ s/node0_from_node1 CONNECTION 'host=node1 dbname=app'/node${r}_from_node$o CONNECTION '$conn'/g
	  or die 'the subscription step changed';
	$node->safe_psql('postgres', $steps);
	$node->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM pg_stat_subscription
		WHERE subname = 'node${r}_from_node$o' AND pid IS NOT NULL})
	  or die 'the subscription ' . $node->name . " node${r}_from_node$o did not start";
}

# Start the mesh's load on $node, labelled $label, for $seconds: a client
# to finish() when the test has what it waits for.
sub start_mesh_load
{
	my ($node, $label, $seconds) = @_;
	my ($out, $err) = ('', '');
	return IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', "CALL load($label, $seconds)" ],
		'>', \$out, '2>', \$err);
}

# What $node handed out under the mesh's load labelled $label: two hash
# references, of its Snowflake IDs and of its per-key values.
sub issued_by
{
	my ($node, $label) = @_;
	my (%ids, %values);
	for (split /\n/, $node->safe_psql('postgres', "SELECT id, v FROM issued WHERE node = $label"))
	{
		my ($id, $v) = split /\|/;
		$ids{$id} = 1;
		$values{$v} = 1 if $v ne '';
	}
	return (\%ids, \%values);
}

# How many keys of the hash references @sets are in more than one of them.
sub count_common
{
	my (@sets) = @_;
	my %n;
	$n{$_}++ for map { keys %$_ } @sets;
	return scalar grep { $_ > 1 } values %n;
}

1;
