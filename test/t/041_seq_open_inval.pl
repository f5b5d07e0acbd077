# Scenario: a session opens table idgen_seq, and while it checks that the
# table is as the extension made it, REINDEX INDEX CONCURRENTLY of the
# table's primary key commits its new index.  The session then takes in
# that change (at its next catalog lookup), and its cached description of
# the table is built again, the primary key not yet found in it.  The call
# must still find the primary key, not take the table for one altered.
#
# gdb stops the backend of a new session in the first catalog lookup of
# those checks (get_func_name, for the table's own trigger), after it has
# read the table's index list; the REINDEX runs up to its wait for that
# session's transaction; then the backend is let go.  In a run of the
# stress client beside REINDEX CONCURRENTLY, this made new connections
# fail with "table "idgen_seq" has been altered", a few rounds in a
# hundred.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IdgenTest;

my $node = idgen_node('seq_open_inval');
my $gdb = gdb_or_skip($node);
my $tmp = PostgreSQL::Test::Utils::tempdir();

$node->safe_psql('postgres', "SELECT idgen_seq_next('k')");

# (psql goes on after an error, so that the test can read it.)
my $a = $node->background_psql('postgres', on_error_stop => 0);
my $apid = $a->query_safe('SELECT pg_backend_pid()');
my $g = gdb_hold($gdb, $apid, "$tmp/open", 'idgen_seq_open_table_oid',
	'break get_func_name', 'continue', 'bt 3');
$a->query_until(qr/sent/, "\\echo sent\nSELECT idgen_seq_next('k');\n");
gdb_wait_stop($g);

# The REINDEX commits its new index, then waits for A's transaction.
my ($rout, $rerr) = ('', '');
my $reindex = IPC::Run::start([ 'psql', '-X', '-q', '-d', $node->connstr('postgres'),
		'-c', 'REINDEX INDEX CONCURRENTLY idgen_seq_pkey' ], '>', \$rout, '2>', \$rerr);
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_progress_create_index
	WHERE relid = 'idgen_seq'::regclass AND phase LIKE 'waiting for writers%'})
  or die "the REINDEX did not come to wait for session A:\n$rout$rerr";

my ($gout, $gerr) = gdb_release($g);
like($gout, qr/Breakpoint 2, .*get_func_name.*#\d+ .*idgen_seq_open_table_oid/s,
	'session A was stopped in the checks of idgen_seq, after reading its index list')
  or diag("gdb:\n$gout$gerr");

my ($out, $ret) = $a->query("SELECT idgen_seq_current('k')");
is($ret, 0, 'session A: its call went on, and the table was not taken for one altered')
  or diag($a->{stderr});
$a->quit;
$reindex->finish;
is($rerr, '', 'the REINDEX completed');
is($node->safe_psql('postgres', "SELECT idgen_seq_current('k')"), '2', 'the key went on from 1 to 2');

done_testing();
