# Scenario: logical replication with FOR ALL TABLES publications, which
# publish idgen's own tables (idgen_seq, idgen_worker_lease) with the
# application's.
#
#  - Two publishers into one subscriber: each publisher has per-key
#    sequences, among them a common key 'conv:1' at different values, and
#    a lease on the same worker id; the user table has Snowflake primary
#    keys (each publisher its own worker id, so they never collide).  Both
#    subscriptions finish their initial sync (every table 'r'), every row
#    arrives, and the common key holds the greater of the two values, the
#    lease the one that ends later.  Later calls on either publisher reach
#    the subscriber without an error in its log; a key's value there never
#    goes down (a lower value, a dropped key), as ordinary use on the
#    subscriber itself still may (the merging triggers fire only in
#    replication).
#  - Public ID keys (idgen_public_key, published too): each of the three
#    servers made its own version 1 and 50 forms with it.  On the
#    subscriber, after the sync, no form decodes to another ID: the
#    version met a second key and is retired there, with a warning, so all
#    150 are refused; each publisher still decodes its own.  A TRUNCATE of
#    the keys is refused on a publisher, and a version made there later
#    decodes its forms on the subscriber.
#  - One publisher taken over by its subscriber (a blue/green switch):
#    after the subscriptions are dropped, the subscriber's per-key
#    sequences, cached ones too, continue above the publisher's last
#    values, and the publisher's live lease keeps its worker id taken.
#  - pg_dump / pg_restore of the subscriber: a whole dump restores with the
#    replica triggers; a data-only dump with --disable-triggers leaves them
#    ordinary triggers, which change nothing, until ENABLE REPLICA TRIGGER.
#    idgen accepts no other trigger on idgen_seq, even one of that name.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my %common = (
	'max_worker_processes' => 20,
	'max_logical_replication_workers' => 8,
	'max_sync_workers_per_subscription' => 2,
	'idgen.worker_quarantine' => 0);
my $pub_a = idgen_node('pub_a', %common, 'idgen.worker_id' => 1, _init => { allows_streaming => 'logical' });
my $pub_b = idgen_node('pub_b', %common, 'idgen.worker_id' => 2, _init => { allows_streaming => 'logical' });
my $sub = idgen_node('sub', %common, 'idgen.worker_id' => 3);

my $orders = 'CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), src text, n bigint)';
$_->safe_psql('postgres', $orders) for ($pub_a, $pub_b, $sub);

# The common key at 100 on a, at 40 on b; a key of each's own; a cached key
# on a (its row runs ahead of the values served); a descending common key
# at -100 on a, at -40 on b; a common key configured on a but not used
# there (start 7) and used on b (at 3); a lease on worker id 0 on each,
# a's ending later.
$pub_a->safe_psql('postgres', q{
	SELECT idgen_seq_configure('down:1', step => -1), idgen_seq_set('down:1', -100);
	SELECT idgen_seq_configure('fresh:1', start => 7);
	SELECT idgen_seq_set('conv:1', 99);
	INSERT INTO orders (src, n) SELECT 'a', idgen_seq_next('conv:1');
	SELECT idgen_seq_next('a:only');
	SELECT idgen_seq_configure('cached:1', cache => 10);
	SELECT idgen_seq_next('cached:1') FROM generate_series(1, 3);
	SELECT worker_id FROM idgen_worker_acquire('holder-a', '1 hour', max_workers => 1);
	CREATE ROLE app;
	GRANT EXECUTE ON FUNCTION idgen_seq_next(text) TO app;
	SET ROLE app;
	SELECT idgen_seq_next('app:1');
	RESET ROLE;
	CREATE PUBLICATION pa FOR ALL TABLES;
});
$pub_b->safe_psql('postgres', q{
	SELECT idgen_seq_configure('down:1', step => -1), idgen_seq_set('down:1', -40);
	SELECT idgen_seq_set('fresh:1', 3);
	SELECT idgen_seq_set('conv:1', 39);
	INSERT INTO orders (src, n) SELECT 'b', idgen_seq_next('conv:1');
	SELECT idgen_seq_next('b:only');
	SELECT worker_id FROM idgen_worker_acquire('holder-b', '10 minutes', max_workers => 1);
	CREATE PUBLICATION pb FOR ALL TABLES;
});
# Public IDs: each server makes a key of its own (version 1 on each) and
# hands out 50 forms with it, before any subscription.
my $ensure_key = q{SELECT idgen_public_rotate()
	WHERE NOT EXISTS (SELECT FROM idgen_public_key WHERE retired_at IS NULL)};
my %forms;
for my $s ([ 'a', $pub_a, 1000 ], [ 'b', $pub_b, 2000 ], [ 'sub', $sub, 3000 ])
{
	my ($name, $node, $base) = @$s;
	$node->safe_psql('postgres', $ensure_key);
	$forms{$name} = $node->safe_psql('postgres', qq{
		SELECT string_agg(id || ':' || idgen_public(id), ',' ORDER BY id)
		FROM generate_series($base + 1, $base + 50) id});
}
# On a server, a list of 'id:form' pairs as counts: decoded to their ID,
# refused with an error, decoded to another ID.
sub decode_counts
{
	my ($node, $list) = @_;
	return $node->safe_psql('postgres', qq{
		CREATE FUNCTION pg_temp.try_private(form text) RETURNS bigint LANGUAGE plpgsql AS \$\$
		BEGIN
			RETURN idgen_private(form);
		EXCEPTION WHEN OTHERS THEN
			RETURN NULL;
		END \$\$;
		SELECT count(*) FILTER (WHERE d = id) || ' right, ' || count(*) FILTER (WHERE d IS NULL)
		       || ' refused, ' || count(*) FILTER (WHERE d <> id) || ' wrong'
		FROM (SELECT split_part(p, ':', 1)::bigint AS id, pg_temp.try_private(split_part(p, ':', 2)) AS d
		      FROM unnest(string_to_array('$list', ',')) p) s});
}

my $token_a = $pub_a->safe_psql('postgres', 'SELECT token FROM idgen_worker_lease WHERE id = 0');
my $token_b = $pub_b->safe_psql('postgres', 'SELECT token FROM idgen_worker_lease WHERE id = 0');
isnt($token_a, $token_b, 'the two publishers leased worker id 0 with different tokens');

my $log_offset = -s $sub->logfile;
for my $s ([ 'sa', $pub_a, 'pa' ], [ 'sb', $pub_b, 'pb' ])
{
	my ($name, $pub, $publication) = @$s;
	my $conn = $pub->connstr . ' dbname=postgres';
	$sub->safe_psql('postgres', "CREATE SUBSCRIPTION $name CONNECTION '$conn' PUBLICATION $publication");
}

# The initial sync: every table of both subscriptions ready (orders,
# idgen_seq, idgen_worker_lease, idgen_public_key and idgen_identity_claim
# of each).  A conflict
# makes a table's sync worker fail and start again forever, so wait a
# bounded time, long enough for a loaded machine, and show what the
# subscriber logged.
my $synced = 0;
for (1 .. $PostgreSQL::Test::Utils::timeout_default)
{
	last if $synced = $sub->safe_psql('postgres',
		q{SELECT count(*) = 10 AND bool_and(srsubstate = 'r') FROM pg_subscription_rel}) eq 't';
	sleep 1;
}
ok($synced, 'the initial sync of both subscriptions completed (every table ready)')
  or diag("after $PostgreSQL::Test::Utils::timeout_default s, the tables of the subscriptions were:\n"
	  . $sub->safe_psql('postgres', q{SELECT srrelid::regclass || ' ' || srsubstate FROM pg_subscription_rel})
	  . "\nand the subscriber logged:\n"
	  . join("\n", grep { /ERROR/ } split /\n/,
		PostgreSQL::Test::Utils::slurp_file($sub->logfile, $log_offset)));
ok(!$sub->log_contains(qr/ERROR/, $log_offset), 'the subscriber logged no error during the sync');
if (!$synced)
{
	done_testing();
	exit;
}

is($sub->safe_psql('postgres', q{SELECT string_agg(src || n, ',' ORDER BY src) FROM orders}),
	'a100,b40', "both publishers' orders arrived");

# Three keys of version 1 met on the subscriber: no form decodes to another
# ID there, neither its own nor a publisher's (the version is retired there,
# with a warning), and each publisher still decodes its own.
for my $name ('sub', 'a', 'b')
{
	is(decode_counts($sub, $forms{$name}), '0 right, 50 refused, 0 wrong',
		"on the subscriber, no form of $name decodes to another ID: all are refused");
}
ok($sub->log_contains(qr/WARNING:  public ID key version 1 arrived with another key than this server's/,
		$log_offset), 'the subscriber warned of the key that arrived for its version 1');
is(decode_counts($pub_a, $forms{a}), '50 right, 0 refused, 0 wrong', 'a decodes its own forms');
is(decode_counts($pub_b, $forms{b}), '50 right, 0 refused, 0 wrong', 'b decodes its own forms');
is($sub->safe_psql('postgres', q{SELECT string_agg(key, ',' ORDER BY key) FROM idgen_seq}),
	'a:only,app:1,b:only,cached:1,conv:1,down:1,fresh:1', "every publisher's keys arrived");
is($sub->safe_psql('postgres', q{
	SELECT count(*) FROM idgen_seq s JOIN pg_class c ON c.oid = 'idgen_seq'::regclass
	WHERE s.created_by <> c.relowner}),
	'0', "keys that arrive count as the table owner's, not as a publisher's role oid");
is($sub->safe_psql('postgres', q{SELECT value FROM idgen_seq WHERE key = 'conv:1'}),
	'100', 'the common key holds the greater value (a at 100, b at 40)');
is($sub->safe_psql('postgres', q{SELECT value FROM idgen_seq WHERE key = 'down:1'}),
	'-100', 'a descending common key holds the value further down (a at -100, b at -40)');
is($sub->safe_psql('postgres', q{SELECT called || ',' || value FROM idgen_seq WHERE key = 'fresh:1'}),
	'true,3', 'a key used on one publisher holds its value, not the start of one not used on the other');
is($sub->safe_psql('postgres', 'SELECT token FROM idgen_worker_lease WHERE id = 0'),
	$token_a, 'worker id 0 holds the lease that ends later');

# Later calls on both publishers; the subscriber follows and keeps the
# greatest value of each key.
$pub_a->safe_psql('postgres', q{
	INSERT INTO orders (src, n) SELECT 'a', idgen_seq_next('conv:1') FROM generate_series(1, 5);
});
$pub_b->safe_psql('postgres', q{
	INSERT INTO orders (src, n) SELECT 'b', idgen_seq_next('conv:1') FROM generate_series(1, 100);
});
$pub_a->wait_for_catchup('sa');
$pub_b->wait_for_catchup('sb');
is($sub->safe_psql('postgres', q{SELECT count(*) FROM orders}), '107', 'later orders arrived');
is($sub->safe_psql('postgres', q{SELECT value FROM idgen_seq WHERE key = 'conv:1'}),
	'140', 'the common key follows the publisher that is ahead (b at 140, a at 105)');

# a advances, still below b; b lowers its value and drops its own key: the
# subscriber keeps the greatest value and the key.
$pub_a->safe_psql('postgres', q{SELECT idgen_seq_next('conv:1') FROM generate_series(1, 5)});
$pub_b->safe_psql('postgres', q{SELECT idgen_seq_set('conv:1', 5); SELECT idgen_seq_drop('b:only')});
$pub_a->wait_for_catchup('sa');
$pub_b->wait_for_catchup('sb');
is($sub->safe_psql('postgres', q{SELECT value FROM idgen_seq WHERE key = 'conv:1'}),
	'140', 'a lower value from a publisher does not lower the subscriber\'s');
is($sub->safe_psql('postgres', q{SELECT count(*) FROM idgen_seq WHERE key = 'b:only'}),
	'1', 'a key dropped on a publisher stays on the subscriber');
ok(!$sub->log_contains(qr/ERROR/, $log_offset), 'the subscriber logged no error while applying');

# Ordinary use on the subscriber: the triggers, replica triggers, do not
# fire.
is($sub->safe_psql('postgres', q{
	SELECT string_agg(tgname || ':' || tgenabled::text, ',' ORDER BY tgname) FROM pg_trigger
	WHERE tgrelid IN ('idgen_seq'::regclass, 'idgen_worker_lease'::regclass)}),
	'idgen_seq_replica:R,idgen_worker_lease_replica:R',
	'the tables have their replica triggers');
$sub->safe_psql('postgres', q{SELECT idgen_seq_set('local', 10)});
$sub->safe_psql('postgres', q{SELECT idgen_seq_set('local', 3)});
is($sub->safe_psql('postgres', q{SELECT idgen_seq_current('local')}), '3',
	'on the subscriber itself, idgen_seq_set still lowers a value');
is($sub->safe_psql('postgres', q{SELECT idgen_seq_drop('local')}), 't',
	'on the subscriber itself, idgen_seq_drop still drops a key');

# --- One publisher taken over by the subscriber ----------------------------
# b's subscription goes; a runs ahead of the subscriber's 140 and serves
# more of its cached key; then writes move to the subscriber.
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sb');
my $last_a = $pub_a->safe_psql('postgres', q{
	SELECT max(v) FROM idgen_seq_next('conv:1', 200) v;
});
my $last_cached = $pub_a->safe_psql('postgres', q{
	SELECT max(idgen_seq_next('cached:1')) FROM generate_series(1, 25);
});
# A public ID key made on the publisher arrives too: the forms made with it
# there decode on the subscriber.
$pub_a->safe_psql('postgres', 'SELECT idgen_public_rotate()');
my $form = $pub_a->safe_psql('postgres', 'SELECT idgen_public(4242)');
$pub_a->wait_for_catchup('sa');
is($sub->safe_psql('postgres', "SELECT idgen_private('$form')"), '4242',
	"a public ID key made on the publisher decodes the publisher's forms on the subscriber");
# A TRUNCATE of the keys on the publisher is refused (it would replicate
# and empty the subscriber's), and no version is made twice there.
like(sql_error($pub_a, 'TRUNCATE idgen_public_key'), qr/cannot truncate idgen_public_key/,
	'TRUNCATE idgen_public_key is refused on the publisher');
is($pub_a->safe_psql('postgres', 'SELECT idgen_public_rotate() > max(version) FROM idgen_public_key'),
	't', 'the next rotation makes a version above every one made');
my $form2 = $pub_a->safe_psql('postgres', 'SELECT idgen_public(4343)');
$pub_a->wait_for_catchup('sa');
is($sub->safe_psql('postgres', "SELECT idgen_private('$form') || ' ' || idgen_private('$form2')"), '4242 4343',
	"the subscriber still decodes the publisher's forms, and those of its newer key");
# A retirement on the publisher arrives as an update of the same key: the
# subscriber retires the version too.
$pub_a->safe_psql('postgres', "SELECT idgen_public_retire(2)");
$pub_a->wait_for_catchup('sa');
is($sub->safe_psql('postgres', 'SELECT retired_at IS NOT NULL FROM idgen_public_key WHERE version = 2')
	. ', ' . decode_counts($sub, "4242:$form"), 't, 0 right, 1 refused, 0 wrong',
	'a version the publisher retired is retired on the subscriber: its forms are refused');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sa');

my $next = $sub->safe_psql('postgres', q{SELECT idgen_seq_next('conv:1')});
cmp_ok($next, '>', $last_a, "after the switch, conv:1 continues above the publisher's last value ($last_a)");
$next = $sub->safe_psql('postgres', q{SELECT idgen_seq_next('cached:1')});
cmp_ok($next, '>', $last_cached,
	"after the switch, the cached key continues above the publisher's last value ($last_cached)");
is($sub->safe_psql('postgres', q{SELECT idgen_seq_next('down:1')}), '-101',
	'after the switch, the descending key continues below the furthest value (-100)');
like(
	sql_error($sub, q{SELECT * FROM idgen_worker_acquire('holder-c', max_workers => 1)}),
	qr/all 1 worker ids are taken/,
	"the publisher's live lease keeps its worker id taken on the subscriber");
ok(!$sub->log_contains(qr/ERROR:  (?!all 1 worker ids)/, $log_offset),
	'the subscriber logged no other error');

# --- pg_dump and pg_restore of the subscriber -------------------------------
# A whole dump: CREATE EXTENSION makes the triggers, replica triggers as the
# script makes them (pg_dump dumps no trigger of the extension's tables),
# and the rows are copied in ordinary use, where they do not fire.
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $keys = q{SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM idgen_seq};
my $triggers = q{SELECT string_agg(tgname || ':' || tgenabled::text, ',' ORDER BY tgname)
	FROM pg_trigger WHERE tgrelid IN ('idgen_seq'::regclass, 'idgen_worker_lease'::regclass)};
my $sub_keys = $sub->safe_psql('postgres', $keys);
$sub->safe_psql('postgres', 'CREATE DATABASE restored');
$sub->safe_psql('postgres', 'CREATE DATABASE data_only');
$sub->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/full.dump", '-d', 'postgres' ], 'pg_dump of the subscriber');
$sub->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'restored', "$tmp/full.dump" ],
	'pg_restore into a new database');
is($sub->safe_psql('restored', $keys), $sub_keys, 'pg_restore: the keys and values');
is($sub->safe_psql('restored', $triggers), 'idgen_seq_replica:R,idgen_worker_lease_replica:R',
	'pg_restore: the triggers are replica triggers');

# A data-only dump with --disable-triggers ends each table with ENABLE
# TRIGGER ALL, which makes the triggers ordinary ones: they do nothing then
# (ordinary use is as before), and ENABLE REPLICA TRIGGER makes them replica
# triggers again (docs/troubleshooting.md).
$sub->safe_psql('data_only', 'CREATE EXTENSION idgen');
$sub->command_ok(
	[ 'pg_dump', '--data-only', '--disable-triggers', '-t', 'idgen_seq', '-t', 'idgen_worker_lease',
		'-f', "$tmp/data.sql", '-d', 'postgres' ],
	'pg_dump --data-only --disable-triggers of idgen\'s tables');
$sub->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'data_only', '-f', "$tmp/data.sql" ],
	'the data-only dump restores');
is($sub->safe_psql('data_only', $keys), $sub_keys, 'data-only restore: the keys and values');
is($sub->safe_psql('data_only', $triggers), 'idgen_seq_replica:O,idgen_worker_lease_replica:O',
	'data-only restore with --disable-triggers: the triggers are ordinary ones');
$sub->safe_psql('data_only', q{SELECT idgen_seq_set('conv:1', 7)});
is($sub->safe_psql('data_only', q{SELECT idgen_seq_next('conv:1'); SELECT idgen_seq_drop('a:only')}),
	"8\nt", 'with ordinary triggers, the triggers change nothing in ordinary use');
$sub->safe_psql('data_only', q{
	ALTER TABLE idgen_seq ENABLE REPLICA TRIGGER idgen_seq_replica;
	ALTER TABLE idgen_worker_lease ENABLE REPLICA TRIGGER idgen_worker_lease_replica;
});
is($sub->safe_psql('data_only', $triggers), 'idgen_seq_replica:R,idgen_worker_lease_replica:R',
	'ENABLE REPLICA TRIGGER makes them replica triggers again');
is($sub->safe_psql('data_only', q{SELECT idgen_seq_next('conv:1')}), '9',
	'and idgen_seq_next still works');

# idgen writes idgen_seq without firing triggers: it accepts its own
# replica trigger there and no other, not even one of that name.
$sub->safe_psql('data_only', q{
	CREATE FUNCTION not_idgen() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
	DROP TRIGGER idgen_seq_replica ON idgen_seq;
	CREATE TRIGGER idgen_seq_replica BEFORE UPDATE ON idgen_seq FOR EACH ROW EXECUTE FUNCTION not_idgen();
});
my ($ret, $stdout, $stderr) = $sub->psql('data_only', q{SELECT idgen_seq_next('conv:1')});
like($stderr, qr/table "idgen_seq" has been altered/,
	'a trigger of the same name on another function is refused');

no_crash_logged($sub, 'no crash on the subscriber');
done_testing();
