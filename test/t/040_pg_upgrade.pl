# Scenario: pg_upgrade from an older major version, as docs/upgrading.md
# describes it, in copy and in --link mode.  Skipped unless
# IDGEN_UPGRADE_FROM names the older installation (the directory with its
# bin/ and lib/, e.g. /usr/lib/postgresql/18) and idgen is installed there
# too; test/run.sh sets it in the chroot of 19, which has 18 as well.
#
# Each old cluster runs idgen preloaded and generates: Snowflake IDs,
# UUIDv7, a transactional and a cached per-key sequence, a worker lease
# (its token recorded), public IDs under two key versions.  It is stopped,
# upgraded, and the new cluster is started with its clock 60 s behind the
# old one's stop, so behind the last ID it issued (libfaketime).
#
# pg_upgrade does not copy idgen.horizon: it is no relation's file.  With
# the documented step (the two horizon files copied from the old data
# directory before the new cluster's first start) the new cluster refuses
# to generate while its clock is behind, with the clock-back error, and
# once the clock is back every Snowflake ID, UUIDv7 and lease token is
# above every one issued before.  Without it (the copy-mode upgrade made a
# second time from the same old cluster, without the step) the new
# cluster starts from its clock and issues IDs and tokens below those
# issued before: what docs/upgrading.md warns of.  The copy-mode upgrades
# preload idgen in the new cluster only after pg_upgrade, so the copied
# file is all that protects them; the link-mode one preloads it before,
# as Debian's pg_upgradecluster does (its keeper then writes a horizon of
# its own during pg_upgrade, which the copy replaces).
#
# pg_upgrade does copy idgen_identity_claim, with the old server's claim
# to the identity: the new server, whose system identifier is new, stops
# Snowflake generation at its first start (55006) until that claim is
# deleted and it restarts, the second documented step.  Both ways, the
# tables carry the rest: keys go on above everything they handed out,
# public forms decode to the same IDs, the lease is still held and renews
# and releases with its token, and the extension's version is the same
# (no ALTER EXTENSION UPDATE).
use strict;
use warnings;

use File::Copy;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $old_install = $ENV{IDGEN_UPGRADE_FROM};
plan skip_all => 'IDGEN_UPGRADE_FROM names no older PostgreSQL installation'
  unless $old_install && -x "$old_install/bin/pg_ctl";
my $old_bindir = "$old_install/bin";
my ($new_bindir) = run_command([ 'pg_config', '--bindir' ]);
chomp $new_bindir;

my ($offset_file, $faketime) = faketime_clock();
sub step_clock { IdgenTest::step_clock($offset_file, @_) }
my %faketime_env = %$faketime;

# Both clusters get the same settings: pg_upgrade carries no
# postgresql.conf, so the layout and identity are set in the new one as in
# the old (docs/upgrading.md says so).
my $settings = join('', map { "$_\n" } (
		q{shared_preload_libraries = 'idgen'},
		q{log_line_prefix = '%m [%p] %e %q%a '},
		'idgen.datacenter_id = 3',
		'idgen.worker_id = 7'));

# An old cluster, preloaded and generating; stopped.  Returns it and what
# it issued.
sub old_cluster
{
	my ($name) = @_;
	my $old = PostgreSQL::Test::Cluster->new($name, install_path => $old_install);
	$old->init;
	$old->append_conf('postgresql.conf', $settings);
	$old->start;
	$old->safe_psql('postgres', 'CREATE EXTENSION idgen');
	wait_for_horizon($old);
	$old->safe_psql('postgres', q{
		CREATE TABLE ids (phase int, id bigint);
		CREATE TABLE uuids (phase int, u uuid);
		CREATE TABLE tokens (phase int, token bigint);
		SELECT idgen_seq_next('conv:42') FROM generate_series(1, 41);
		SELECT idgen_seq_configure('fast', cache => 100);
		SELECT idgen_seq_next('fast') FROM generate_series(1, 5);
		SELECT idgen_public_rotate();
		INSERT INTO ids SELECT 0, idgen_snowflake() FROM generate_series(1, 1000);
		CREATE TABLE forms AS SELECT id, idgen_public(id) AS form FROM ids;
		SELECT idgen_public_rotate();
		INSERT INTO ids SELECT 0, idgen_snowflake() FROM generate_series(1, 1000);
		INSERT INTO forms SELECT id, idgen_public(id) FROM ids WHERE id NOT IN (SELECT id FROM forms);
		INSERT INTO tokens SELECT 0, token FROM idgen_worker_acquire('generator-a', '1 hour');
		INSERT INTO uuids SELECT 0, idgen_uuid7() FROM generate_series(1, 1000);
		INSERT INTO ids SELECT 0, idgen_snowflake() FROM generate_series(1, 1000);
	});
	my %before;
	$before{fast} = $old->safe_psql('postgres', q{SELECT idgen_seq_current('fast')});
	$before{version} = $old->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idgen'});
	$before{lease} = $old->safe_psql('postgres', q{
		SELECT datacenter_id || ' ' || worker_id || ' ' || token || ' ' || state FROM idgen_worker_leases});
	$before{keys} = $old->safe_psql('postgres', q{SELECT key || ' ' || value FROM idgen_seq_keys ORDER BY key});
	$old->stop('fast');
	$before{stopped_at} = time();
	return ($old, \%before);
}

# pg_upgrade the stopped $old into a new cluster, in $mode ('--copy' or
# '--link'), with idgen preloaded in the new cluster before pg_upgrade
# ($preload_first) or only after it; with $step, copy the horizon files as
# docs/upgrading.md says.  Then start the new cluster with its clock 60 s
# behind the old one's stop (however long pg_upgrade took), and take the
# identity over (the old server's claim deleted, a restart).
sub upgrade
{
	my ($old, $before, $name, $mode, $preload_first, $step) = @_;
	my $new = PostgreSQL::Test::Cluster->new($name);
	$new->init;
	$new->append_conf('postgresql.conf', $settings) if $preload_first;
	# pg_upgrade writes its scripts into the current directory.
	my $cwd = PostgreSQL::Test::Utils::tempdir();
	chdir $cwd or die "chdir $cwd: $!";
	$new->command_ok(
		[
			'pg_upgrade', '--no-sync',
			'--old-datadir' => $old->data_dir,
			'--new-datadir' => $new->data_dir,
			'--old-bindir' => $old_bindir,
			'--new-bindir' => $new_bindir,
			'--socketdir' => $new->host,
			'--old-port' => $old->port,
			'--new-port' => $new->port,
			$mode,
		],
		"$name: pg_upgrade $mode");
	my @found = grep { -e $new->data_dir . "/$_" } qw(idgen.horizon idgen.horizon.seen);
	is(scalar(@found), $preload_first ? 2 : 0,
		"$name: pg_upgrade copied no horizon file; the new cluster's keeper wrote its own only if preloaded: @found");
	$new->append_conf('postgresql.conf', $settings) unless $preload_first;
	if ($step)
	{
		# The step of docs/upgrading.md, as printed there, before the new
		# cluster's first start.
		local $ENV{OLD_PGDATA} = $old->data_dir;
		local $ENV{NEW_PGDATA} = $new->data_dir;
		system('bash', '-e', '-c', doc_block('docs/upgrading.md', 'upgrade/copy-horizon')) == 0
		  or die "the horizon files could not be copied: $?";
	}
	step_clock('-' . (60 + int(time() - $before->{stopped_at} + 1)));
	local @ENV{ keys %faketime_env } = values %faketime_env;
	$new->start;

	# The horizon it started from: the copied file, the one its keeper
	# wrote during pg_upgrade, or none.
	is($new->safe_psql('postgres', 'SELECT horizon_restored FROM idgen_info()'),
		$step || $preload_first ? 't' : 'f', "$name: idgen_info().horizon_restored at first start");

	# The old server's claim to the identity came with the data.  The new
	# server finds it when it announces its own claim, at the first purge
	# after its start (the idgen sequencer launcher's first round): wait
	# for that announcement, committed.
	my $own_claim = q{SELECT count(*) FROM idgen_identity_claim
		WHERE system_identifier = (SELECT system_identifier FROM pg_control_system())};
	$new->poll_query_until('postgres',
		"SELECT identity_clash IS NOT NULL AND ($own_claim) = 1 FROM idgen_info()")
	  or die "$name: the new server did not announce its identity, or found no other claim";
	my ($ret, $stdout, $stderr) = $new->psql('postgres', 'SELECT idgen_snowflake()');
	like($stderr, qr/this server's Snowflake identity \(datacenter 3, worker 7\) is also claimed by another server/,
		"$name: at first start, the old server's claim stops Snowflake generation");
	# The step of docs/upgrading.md, in every database with idgen, then a restart.
	my $forget = doc_block('docs/upgrading.md', 'upgrade/forget-claim');
	is($new->safe_psql('postgres', q{
			SELECT count(*) FROM idgen_identity_claim
			 WHERE system_identifier <> (SELECT system_identifier FROM pg_control_system())}),
		'1', "$name: the old server's claim is there");
	$new->safe_psql('postgres', $forget, on_error_stop => 1);
	is($new->safe_psql('postgres', $own_claim),
		'1', "$name: the old server's claim deleted, the new server's kept");
	$new->restart;
	# An announcement after the restart has looked for other claims.
	$new->poll_query_until('postgres', q{SELECT announced_at > pg_postmaster_start_time() FROM idgen_identity_claim
		WHERE system_identifier = (SELECT system_identifier FROM pg_control_system())})
	  or die "$name: no announcement after the restart";
	is($new->safe_psql('postgres', 'SELECT horizon_restored AND identity_clash IS NULL FROM idgen_info()'),
		't', "$name: after the restart, a horizon restored and no clash");
	is($new->safe_psql('postgres', q{
			SELECT horizon >= (SELECT max(idgen_snowflake_time(id)) FROM ids) FROM idgen_info()}),
		't', "$name: the horizon is at or above the old cluster's last Snowflake ID")
	  if $step;
	return $new;
}

# What the tables carry, whichever way: the extension at the same version,
# the keys going on above their values, the forms decoding, the lease held
# and renewing with its token.
sub check_carried
{
	my ($new, $before, $name) = @_;
	is($new->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idgen'}),
		$before->{version}, "$name: the extension's version is the same");
	is($new->safe_psql('postgres', q{
			SELECT default_version = installed_version FROM pg_available_extensions WHERE name = 'idgen'}),
		't', "$name: and is the installed default");
	my ($ret, $stdout, $stderr) =
	  $new->psql('postgres', doc_block('docs/upgrading.md', 'upgrade/update'), on_error_stop => 1);
	like($stderr, qr/NOTICE:  version "\Q$before->{version}\E" of extension "idgen" is already installed/,
		"$name: ALTER EXTENSION idgen UPDATE has nothing to do");
	is($new->safe_psql('postgres', q{SELECT key || ' ' || value FROM idgen_seq_keys ORDER BY key}),
		$before->{keys}, "$name: idgen_seq_keys as before");
	is($new->safe_psql('postgres', q{SELECT idgen_seq_next('conv:42')}), '42',
		"$name: the transactional key goes on: 42 after 41");
	cmp_ok($new->safe_psql('postgres', q{SELECT idgen_seq_next('fast')}), '>', $before->{fast},
		"$name: the cached key goes on above every value it handed out");
	is($new->safe_psql('postgres', q{
			SELECT count(*) || ' ' || count(*) FILTER (WHERE idgen_private(form) = id) FROM forms}),
		'2000 2000', "$name: every public form, of both key versions, decodes to its ID");
	is($new->safe_psql('postgres', q{
			SELECT datacenter_id || ' ' || worker_id || ' ' || token || ' ' || state FROM idgen_worker_leases}),
		$before->{lease}, "$name: idgen_worker_leases as before, the lease held");
	like($new->safe_psql('postgres', q{
			SELECT idgen_worker_renew(worker_id, token) FROM idgen_worker_leases}),
		qr/^\d{4}-/, "$name: the lease renews with its token");
}

# A phase of IDs, UUIDs and a new lease's token; whether each is above
# every one issued before.
sub generate_phase
{
	my ($new, $phase) = @_;
	$new->safe_psql('postgres', qq{
		INSERT INTO ids SELECT $phase, idgen_snowflake() FROM generate_series(1, 1000);
		INSERT INTO uuids SELECT $phase, idgen_uuid7() FROM generate_series(1, 1000);
		INSERT INTO tokens SELECT $phase, token FROM idgen_worker_acquire('generator-b', '1 hour');
		SELECT idgen_worker_release(worker_id, token) FROM idgen_worker_leases WHERE holder = 'generator-b';
	});
	return $new->safe_psql('postgres', qq{
		SELECT (SELECT min(id) FROM ids WHERE phase = $phase) > (SELECT max(id) FROM ids WHERE phase < $phase),
		       (SELECT u FROM uuids WHERE phase = $phase ORDER BY u LIMIT 1)
		         > (SELECT u FROM uuids WHERE phase < $phase ORDER BY u DESC LIMIT 1),
		       (SELECT min(token) FROM tokens WHERE phase = $phase) > (SELECT max(token) FROM tokens WHERE phase < $phase)});
}

# With the step: refused while the clock is behind, above everything once
# it is back.
sub check_with_step
{
	my ($new, $name) = @_;
	for my $f ('idgen_snowflake()', 'idgen_uuid7()')
	{
		my ($ret, $stdout, $stderr) = $new->psql('postgres', "SELECT $f");
		isnt($ret, 0, "$name: clock 60 s back: $f refuses");
		like($stderr, qr/the system clock moved backwards by \d+ ms/, "$name: with the clock-back error");
	}
	step_clock('+0');
	$new->poll_query_until('postgres', 'SELECT idgen_snowflake() > 0 AND idgen_uuid7() IS NOT NULL')
	  or die "$name: generation did not resume";
	is(generate_phase($new, 1), 't|t|t',
		"$name: clock back: every Snowflake ID, UUIDv7 and lease token above every one before the upgrade");
	is($new->safe_psql('postgres', q{
			SELECT idgen_worker_release(worker_id, token) FROM idgen_worker_leases WHERE holder = 'generator-a'}),
		't', "$name: the old lease releases with its token");
	no_crash_logged($new, "$name: no crash");
}

# Copy mode, with the step.
my ($old, $before) = old_cluster('old_copy');
my $new = upgrade($old, $before, 'new_copy', '--copy', 0, 1);
check_carried($new, $before, 'copy');
check_with_step($new, 'copy');
$new->stop;

# The same old cluster (copy mode left it as it was) upgraded again,
# without the step: the new cluster starts from its clock, 60 s behind.
$new = upgrade($old, $before, 'new_nostep', '--copy', 0, 0);
ok($new->log_contains(qr/no idgen durable horizon yet in this data directory; generators start from the wall clock/),
	'without the step: the new cluster logs that it starts from the wall clock, as if new');
check_carried($new, $before, 'without the step');
wait_for_horizon($new);
# Lease tokens still go on above every token in the lease table, which
# pg_upgrade carries (docs/leases.md): only the generators need the horizon.
is(generate_phase($new, 1), 'f|f|t',
	'without the step, clock back: Snowflake IDs and UUIDv7 below those issued before; lease tokens above');
$new->stop;
step_clock('+0');

# Link mode, from a fresh old cluster, idgen preloaded in the new one
# before pg_upgrade, with the step.
($old, $before) = old_cluster('old_link');
$new = upgrade($old, $before, 'new_link', '--link', 1, 1);
check_carried($new, $before, 'link');
check_with_step($new, 'link');
$new->stop;

done_testing();
