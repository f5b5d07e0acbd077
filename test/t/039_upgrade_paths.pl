# Scenario: test/upgrade_paths.sh on this PostgreSQL version.  For every
# released version (sql/released.sha256) it compares, in the catalog,
# ALTER EXTENSION idgen UPDATE to idgen.control's default_version with a
# fresh CREATE EXTENSION, after checking itself on scratch upgrade scripts
# that each forget one thing (a GRANT, a COMMENT, a config dump, a
# volatility, a trigger's ENABLE ALWAYS).  Run here so that every version
# runs it: an upgrade script can behave differently on each.  It starts
# its own server from a scratch copy of this installation's binaries, so
# that its scratch scripts never reach the installation.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use File::Basename qw(dirname);
use File::Spec;

my $root = dirname(File::Spec->rel2abs(__FILE__)) . '/../..';
# prove-installcheck puts the installation's bin/ first on PATH.
my ($pg_config) = grep { -x $_ } map { "$_/pg_config" } split /:/, $ENV{PATH};
ok(defined $pg_config, 'pg_config of the installation under test on PATH');

my ($stdout, $stderr);
my $ok = IPC::Run::run([ 'bash', "$root/test/upgrade_paths.sh" ],
	'>' => \$stdout, '2>' => \$stderr,
	init => sub { $ENV{PG_CONFIG} = $pg_config });
note($stdout);
diag($stderr) if $stderr ne '';
ok($ok, 'test/upgrade_paths.sh passed');
like($stdout, qr/^ok: self-check: a correct upgrade script compares equal$/m,
	'a correct upgrade script compares equal');
for my $what (qw(grant comment config stable trigger))
{
	like($stdout, qr/^ok: self-check: an upgrade script that differs by '$what' is caught:$/m,
		"an upgrade script that differs by '$what' is caught");
}
unlike($stdout, qr/^FAILED/m, 'no upgrade path differs from a fresh install');
done_testing();
