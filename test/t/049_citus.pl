# Scenario: Citus, as docs/many-servers.md prints it: a coordinator and two
# workers, every node with the page's settings (its layout: 10 gene bits,
# 6 worker bits), the coordinator's database the registry.  The page's
# settings are taken as printed, but for the registry's address (this
# test's coordinator, not coordinator.internal, and its database).
#
#   registry identities   the page's tables created on the coordinator and
#                         distributed by gene; its rows and lookups run on
#                         the coordinator and on a worker; then pgbench on
#                         all three nodes at once, each client inserting a
#                         user (idgen_snowflake_row()) and its order
#                         (idgen_snowflake(its gene)), tagged with the node
#                         it is connected to.  Every ID distinct, each
#                         made under the identity of the node that ran its
#                         INSERT, every order's gene its user's; a lookup
#                         by ID runs as one task on one shard; what the
#                         page's "What else to know" says of UPDATE,
#                         triggers and per-key sequences on Citus; and no
#                         ERROR in any node's log from idgen's processes or
#                         naming idgen.
#   settings identities   the workers restarted with idgen.identity =
#   under the registry    'settings' and worker ids of their own, claimed
#                         at the registry: IDs under those; a worker given
#                         the other's worker id is refused by the registry
#                         and makes no ID, the other goes on.
#   settings identities   both workers with one worker id and no registry:
#   with no registry      nothing compares a Citus node's identity with the
#                         others' (each node's idgen_identity_claim holds
#                         its own row alone), so both refuse Snowflake IDs
#                         and warn at start; UUIDv7 and per-key sequences
#                         go on.
#
# Skipped where Citus is not installed for this PostgreSQL (test/citus.sh
# builds and installs it from a release archive).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IdgenTest;

my $probe = PostgreSQL::Test::Cluster->new('probe');
my $sharedir = $probe->config_data('--sharedir');
plan skip_all => "Citus is not installed ($sharedir/extension/citus.control; test/citus.sh installs it)"
  unless -f "$sharedir/extension/citus.control";

# The page's settings, as printed: name => value.
my %page = doc_block('docs/many-servers.md', 'sharding/layout') =~ /^([a-z_.]+) = ('[^']*'|\S+)/mg;
like($page{shared_preload_libraries}, qr/^'citus,idgen'$/, 'the page preloads citus and idgen');
like($page{'idgen.registry'}, qr/^'host=coordinator\.internal dbname=\w+ user=idgen_registry'$/,
	'the page names a registry on the coordinator, with the registry role');

# Every node: the page's settings, and what a test cluster needs for Citus:
# its nodes meet over Unix sockets, without SSL.  (max_prepared_transactions
# is left to Citus, which raises it for its 2PC.)  The log names each
# line's process type (%b: "idgen keeper"...).
my %citus = (
	'citus.node_conninfo' => "'sslmode=disable'",
	max_connections => 60,
	log_line_prefix => "'%m [%p] %b %e '");

sub citus_node
{
	my ($name, %conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my %all = (%page, %citus, %conf);
	$node->append_conf('postgresql.conf', join('', map { "$_ = $all{$_}\n" } sort keys %all));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	return $node;
}

# The coordinator first, without a registry (it is the registry): its
# database gets idgen and the registry role, as the page's "A registry"
# grants it, and then it restarts with the page's settings.
my $coord = citus_node('coordinator', 'idgen.identity' => "'settings'", 'idgen.registry' => "''");
$coord->safe_psql('postgres', q{
	CREATE EXTENSION idgen;
	CREATE ROLE idgen_registry LOGIN;
	GRANT EXECUTE ON FUNCTION idgen_server_lease(bigint, text, interval, bigint, bigint, timestamptz),
	    idgen_worker_renew(bigint, bigint, interval, timestamptz),
	    idgen_worker_release(bigint, bigint, timestamptz) TO idgen_registry;
});
(my $registry = $page{'idgen.registry'}) =~
  s/host=coordinator\.internal dbname=\w+/'host=' . $coord->host . ' port=' . $coord->port . ' dbname=postgres'/e;
$coord->append_conf('postgresql.conf', "idgen.identity = $page{'idgen.identity'}\nidgen.registry = $registry\n");
$coord->restart;
my @workers = map { citus_node("worker$_", 'idgen.registry' => $registry) } 1 .. 2;
my @nodes = ($coord, @workers);

# Wait until $node holds its identity; return its worker id.
sub held
{
	my ($node) = @_;
	$node->poll_query_until('postgres', q{SELECT state = 'held' FROM idgen_identity()})
	  or die $node->name . ': no identity held: '
	  . $node->safe_psql('postgres', 'SELECT state, message FROM idgen_identity()');
	return $node->safe_psql('postgres', 'SELECT worker_id FROM idgen_identity()');
}

$coord->safe_psql('postgres', sprintf(q{SELECT citus_set_coordinator_host('%s', %d)}, $coord->host, $coord->port));
$coord->safe_psql('postgres', sprintf(q{SELECT citus_add_node('%s', %d)}, $_->host, $_->port)) for @workers;
is($coord->safe_psql('postgres', q{SELECT count(*) FROM pg_dist_node WHERE isactive}), '3',
	'a coordinator and two workers');
# Citus made idgen on the workers with the coordinator's CREATE EXTENSION.
is($_->safe_psql('postgres', q{SELECT count(*) FROM pg_extension WHERE extname = 'idgen'}), '1',
	$_->name . ': idgen created there by the coordinator')
  for @workers;

my %worker_id = map { $_->name => held($_) } @nodes;
is(scalar(keys %{ { reverse %worker_id } }), 3,
	'registry identities: each node holds one of its own (' . join(', ', map { "$_ $worker_id{$_}" } sort keys %worker_id) . ')');

# The page's tables, and its rows and lookups on the coordinator and a worker.
$coord->safe_psql('postgres', doc_block('docs/many-servers.md', 'sharding/citus-tables'), on_error_stop => 1);
for my $node ($coord, $workers[0])
{
	my $out = $node->safe_psql('postgres', doc_block('docs/many-servers.md', 'sharding/use'), on_error_stop => 1);
	like($out, qr/^\d+\|42$/m, $node->name . ': the page\'s rows and lookup run as printed');
}

# A lookup by ID, as the page writes it: one task, on one shard.
my $order = $coord->safe_psql('postgres', 'SELECT id FROM orders ORDER BY id LIMIT 1');
for my $node ($coord, $workers[1])
{
	my $plan = $node->safe_psql('postgres',
		"EXPLAIN SELECT user_id, amount FROM orders WHERE gene = idgen_gene($order, 10) AND id = $order");
	like($plan, qr/Task Count: 1\b/, $node->name . ': a lookup by ID runs as one task, on one shard')
	  or diag($plan);
}

# pgbench on every node at once: each transaction a user and its order,
# tagged with the node (orders.amount, users.name).
my $script = PostgreSQL::Test::Utils::tempdir() . '/user_and_order.sql';
open my $fh, '>', $script or die "$script: $!";
print $fh <<'SQL';
INSERT INTO users (id, gene, name) SELECT r.id, r.gene, 'node ' || :node FROM idgen_snowflake_row() r RETURNING id AS uid, gene AS ugene \gset
INSERT INTO orders (id, gene, user_id, amount) VALUES (idgen_snowflake(:ugene), :ugene, :uid, :node);
SQL
close $fh;
my @bench;
for my $n (0 .. $#nodes)
{
	my ($out, $err) = ('', '');
	push @bench, [ $nodes[$n], \$out, \$err, IPC::Run::start(
		[ 'pgbench', '-n', '-c', '2', '-T', '15', '-f', $script, '-D', "node=$n",
		  '-h', $nodes[$n]->host, '-p', $nodes[$n]->port, 'postgres' ],
		'>', \$out, '2>', \$err) ];
}
for my $b (@bench)
{
	my ($node, $out, $err, $h) = @$b;
	ok($h->finish, $node->name . ': pgbench ran without an error') or diag($$err);
	my ($tx) = $$out =~ /number of transactions actually processed: (\d+)/;
	note($node->name . ": $tx transactions");
}

my $by_node = $coord->safe_psql('postgres', q{
	SELECT string_agg(format('%s:%s', amount, n), ' ' ORDER BY amount)
	  FROM (SELECT amount, count(*) AS n FROM orders WHERE amount < 3 GROUP BY amount) AS c});
like($by_node, qr/^0:\d+ 1:\d+ 2:\d+$/, "orders were made on every node ($by_node)");
is($coord->safe_psql('postgres', q{
	SELECT count(*) - count(DISTINCT id)
	  FROM (SELECT id FROM users UNION ALL SELECT id FROM orders) AS ids}),
	'0', 'every ID is distinct, over users and orders');
my $identities = join(', ', map { "($_, $worker_id{ $nodes[$_]->name })" } 0 .. $#nodes);
is($coord->safe_psql('postgres', qq{
	SELECT count(*)
	  FROM orders o
	  JOIN users u ON u.gene = o.gene AND u.id = o.user_id
	  JOIN (VALUES $identities) AS made(node, worker_id) ON made.node = o.amount
	 WHERE o.amount < 3
	   AND ((idgen_snowflake_decode(o.id)).worker_id <> made.worker_id
	        OR (idgen_snowflake_decode(u.id)).worker_id <> made.worker_id
	        OR u.name <> 'node ' || o.amount)}),
	'0', 'each user and order was made under the identity of the node its INSERT ran on');
is($coord->safe_psql('postgres', q{
	SELECT count(*) FROM orders o JOIN users u ON u.gene = o.gene AND u.id = o.user_id
	 WHERE idgen_gene(o.id, 10) <> o.gene OR idgen_gene(u.id, 10) <> u.gene}),
	'0', 'every order carries its user\'s gene, and lands with it');
is($coord->safe_psql('postgres', q{SELECT count(*) FROM orders o WHERE o.amount < 3
	AND NOT EXISTS (SELECT FROM users u WHERE u.gene = o.gene AND u.id = o.user_id)}),
	'0', 'every order found its user on its shard');

# What the page says else of Citus.
# Of the rows of $table that $where selects, those whose ID was not made
# under the identity of the worker that holds the row's shard, and all:
# "not/all".
my $workers_by_port = join(', ', map { '(' . $_->port . ", $worker_id{ $_->name })" } @workers);
sub not_made_on_its_shard
{
	my ($table, $where) = @_;
	# The rows first, pulled to the coordinator; then each gene's shard's
	# node, from the coordinator's metadata.
	return $coord->safe_psql('postgres', qq{
		WITH made AS MATERIALIZED (
		         SELECT (idgen_snowflake_decode(id)).worker_id AS worker_id, gene FROM $table WHERE $where),
		     placed AS MATERIALIZED (
		         SELECT g AS gene, s.nodeport AS port
		           FROM generate_series(0, 1023) AS g
		           JOIN citus_shards s ON s.table_name = '$table'::regclass
		                              AND s.shardid = get_shard_id_for_distribution_column('$table', g))
		SELECT count(*) FILTER (WHERE made.worker_id <> w.worker_id) || '/' || count(*)
		  FROM made
		  JOIN placed USING (gene)
		  JOIN (VALUES $workers_by_port) AS w(port, worker_id) USING (port)});
}
my $insert_select = q{INSERT INTO orders (id, gene, user_id, amount)
	SELECT idgen_snowflake(gene), gene, id, 99 FROM users WHERE name LIKE 'user %'};
like($coord->safe_psql('postgres', "EXPLAIN (COSTS OFF) $insert_select"), qr/INSERT\/SELECT method: repartition/,
	'INSERT ... SELECT calling idgen between colocated tables is repartitioned, not pushed down');
$coord->safe_psql('postgres', $insert_select);
is(not_made_on_its_shard('orders', 'amount = 99'), '0/2000',
	'and each ID is made on the worker holding its source row');
my ($ret, $out, $err) = $coord->psql('postgres', "UPDATE orders SET id = idgen_snowflake(gene) WHERE id = $order");
like($err, qr/functions used in UPDATE queries on distributed tables must not be VOLATILE/,
	'UPDATE ... SET id = idgen_snowflake(...) on a distributed table is refused');
my $trigger = q{CREATE TRIGGER posts_id BEFORE INSERT ON posts
	FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id', 'user_id')};
($ret, $out, $err) = $coord->psql('postgres', qq{
	CREATE TABLE posts (id bigint, gene int NOT NULL, user_id bigint);
	SELECT create_distributed_table('posts', 'gene', colocate_with => 'users');
	$trigger});
like($err, qr/triggers are not supported on distributed tables/,
	'idgen_snowflake_trigger on a distributed table is refused');
$coord->safe_psql('postgres', qq{
	SET citus.enable_unsafe_triggers = on;
	$trigger;
	INSERT INTO posts (gene, user_id) SELECT gene, id FROM users WHERE name LIKE 'user %'});
is(not_made_on_its_shard('posts', 'idgen_gene(id, 10) = gene'), '0/2000',
	'with citus.enable_unsafe_triggers, it makes each ID, with its user\'s gene, on the worker holding the row');
is(join(',', map { $_->safe_psql('postgres', q{SELECT idgen_seq_next('conv:42')}) } $coord, $workers[0]),
	'1,1', 'a per-key sequence counts on the node that runs it');

# No ERROR (or worse) from idgen's background processes, nor naming
# idgen, on any node; but for the ends of background processes at a
# shutdown (57P01, the coordinator's restart).
for my $node (@nodes)
{
	my @errors = grep {
		/^\S+ \S+ \S+ \[\d+\] (.*?) ?([0-9A-Z]{5}) (?:ERROR|FATAL|PANIC):  (.*)$/
		  && $2 ne '57P01' && ($1 =~ /^idgen / || $3 =~ /idgen/)
	} split /\n/, slurp_file($node->logfile);
	is(scalar(@errors), 0, $node->name . ': no error from idgen\'s processes or naming idgen in its log')
	  or diag(join("\n", @errors));
}
my %log_from = map { $_->name => -s $_->logfile } @nodes;

# Settings identities, claimed at the registry: each worker its own id.
sub restart_with
{
	my ($node, %conf) = @_;
	$node->append_conf('postgresql.conf', join('', map { "$_ = $conf{$_}\n" } sort keys %conf));
	$node->restart;
}
restart_with($workers[0], 'idgen.identity' => "'settings'", 'idgen.worker_id' => 11);
restart_with($workers[1], 'idgen.identity' => "'settings'", 'idgen.worker_id' => 12);
is(join(',', map { held($_) } @workers), '11,12', 'settings identities: each worker holds its own id at the registry');
is(join(',', map { $_->safe_psql('postgres', q{SELECT worker_id FROM idgen_snowflake_decode(idgen_snowflake())}) } @workers),
	'11,12', 'and makes IDs under it');

# One worker id given to both: the registry refuses the second.
restart_with($workers[1], 'idgen.worker_id' => 11);
ok($workers[1]->poll_query_until('postgres', q{SELECT state = 'refused' FROM idgen_identity()}),
	'worker2 given worker1\'s id: the registry refuses its claim');
like(sql_error($workers[1], 'SELECT idgen_snowflake()'), qr/55000.*holds no Snowflake identity/s,
	'worker2 makes no Snowflake ID');
is($workers[0]->safe_psql('postgres', q{SELECT worker_id FROM idgen_snowflake_decode(idgen_snowflake())}),
	'11', 'worker1 goes on');

# One worker id by the settings, no registry: no node can see the other,
# so both refuse, and say so at start.
my $unchecked = qr/WARNING:  idgen makes no Snowflake ID on this Citus node: no registry checks its identity/;
for my $node (@workers)
{
	restart_with($node, 'idgen.worker_id' => 21, 'idgen.registry' => "''");
	my $error = sql_error($node, 'SELECT idgen_snowflake()');
	like($error, qr/55000: Snowflake IDs on a Citus node need a registry/,
		$node->name . ': settings identity with no registry on Citus: Snowflake IDs refused');
	like($error, qr/DETAIL:  This server preloads citus/, $node->name . ': and the detail says why');
	ok(slurp_file($node->logfile, $log_from{ $node->name }) =~ $unchecked, $node->name . ': warned at start');
	like($node->safe_psql('postgres', q{SELECT idgen_uuid_version(idgen_uuid7())}), qr/^7$/,
		$node->name . ': UUIDv7 goes on');
	ok($node->safe_psql('postgres', q{SELECT idgen_seq_next('conv:42')}) > 0, $node->name . ': per-key sequences go on');
}
is($coord->safe_psql('postgres', q{SELECT count(*) FROM idgen_snowflake_row()}), '1',
	'the coordinator, with its registry identity, goes on');

no_crash_logged($_, $_->name . ': no crash in the server log') for @nodes;
$_->stop for reverse @nodes;
done_testing();
