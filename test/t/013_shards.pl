# Scenario: several servers generating IDs, and gene-routed sharding with
# postgres_fdw.  Three shard servers and a router, each with idgen preloaded
# and an identity of its own (datacenter 1, workers 1 to 3; the router
# datacenter 0, worker 1), all with one layout carrying 4 gene bits.
#
# On the router, users and orders are partitioned by RANGE on a plain gene
# column, each partition a foreign table on one shard:
#   genes 0-5 -> shard 1, 6-10 -> shard 2, 11-15 -> shard 3.
# A user's id carries its gene; an order's id is generated with its user's
# gene (idgen_snowflake(idgen_gene(user_id, 4))), so it lands on its user's
# shard, and a lookup by order id alone (gene = idgen_gene(id, 4)) prunes to
# one foreign scan.  IDs generated on all four servers at once never
# collide.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my %layout = ('idgen.gene_bits' => 4, 'idgen.sequence_bits' => 8);
my $router = idgen_node('router', %layout, 'idgen.datacenter_id' => 0, 'idgen.worker_id' => 1);
my @shards = map {
	idgen_node("shard$_", %layout, 'idgen.datacenter_id' => 1, 'idgen.worker_id' => $_)
} 1 .. 3;

# The recipe of docs/many-servers.md, run as printed: each block through
# psql, the router's with the shards' addresses as psql variables.  Every
# node is made with the extension created: drop it, as the recipe creates
# it.
$_->safe_psql('postgres', 'DROP EXTENSION idgen') for ($router, @shards);
$_->safe_psql('postgres', doc_block('docs/many-servers.md', 'shard'), on_error_stop => 1) for @shards;
$router->safe_psql('postgres', doc_block('docs/many-servers.md', 'router'),
	on_error_stop => 1,
	extra_params => [ '-v', 'dbname=postgres',
		map { my $n = $_ + 1; ('-v', "shard${n}_host=" . $shards[$_]->host,
			'-v', "shard${n}_port=" . $shards[$_]->port) } 0 .. 2 ]);
my $found = $router->safe_psql('postgres', doc_block('docs/many-servers.md', 'use'), on_error_stop => 1);
is(scalar(grep { $_->safe_psql('postgres', 'SELECT count(*) FROM users') eq '1' } @shards), 1,
	"the recipe's user is on one shard");
my @order_shards = grep {
	$_->safe_psql('postgres', 'SELECT count(*) FROM orders o JOIN users u ON u.id = o.user_id') eq '1'
} @shards;
is(scalar @order_shards, 1, "the recipe's order is on its user's shard");
like($found, qr/^\d+\|42$/, "the recipe's lookup by order id alone finds it");
# Every gene has a partition: one user per gene, inserted as the recipe does.
is($router->safe_psql('postgres', q{
		INSERT INTO users (id, gene, name)
			SELECT idgen_snowflake(g), g, 'gene ' || g FROM generate_series(0, 15) g;
		SELECT count(DISTINCT gene) FROM users}),
	'16', 'the ranges cover all 16 genes');
$router->safe_psql('postgres', 'DELETE FROM orders; DELETE FROM users');

# 160 users through the router: idgen_snowflake() spreads their genes
# round-robin, and the gene column is the id's gene.  Then 5 orders each,
# with ids carrying the user's gene.
$router->safe_psql('postgres', q{
	INSERT INTO users (id, gene, name)
		SELECT id, idgen_gene(id, 4), 'user ' || n
		FROM (SELECT idgen_snowflake() AS id, n FROM generate_series(1, 160) n) s;
	INSERT INTO orders (id, user_id, gene, amount)
		SELECT idgen_snowflake(idgen_gene(u.id, 4)), u.id, idgen_gene(u.id, 4), k
		FROM users u, generate_series(1, 5) k;
});

my @per_shard = map {
	$_->safe_psql('postgres', 'SELECT count(*) FROM users') . '/' .
	  $_->safe_psql('postgres', 'SELECT count(*) FROM orders')
} @shards;
is(join(' ', @per_shard), '60/300 50/250 50/250',
	'users and orders are spread over the shards by gene (6, 5 and 5 genes of 16)');
is( join(',', map {
			$_->safe_psql('postgres',
				'SELECT count(*) FROM orders o LEFT JOIN users u ON u.id = o.user_id WHERE u.id IS NULL')
		} @shards),
	'0,0,0', "every order is on its user's shard");
is( join(',', map {
			$_->safe_psql('postgres',
				'SELECT count(*) FROM orders WHERE idgen_gene(id, 4) <> gene OR idgen_gene(user_id, 4) <> gene')
		} @shards),
	'0,0,0', "an order's id carries its user's gene");

# A lookup by order id alone: the gene comes from the id, and the plan
# prunes to one foreign scan.
my $order = $shards[1]->safe_psql('postgres', 'SELECT id FROM orders ORDER BY id LIMIT 1');
my $plan = $router->safe_psql('postgres',
	"EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE id = $order AND gene = idgen_gene($order, 4)");
note("plan:\n$plan");
is(scalar(() = $plan =~ /Foreign Scan/g), 1, 'a lookup by order id prunes to one foreign scan');
like($plan, qr/orders_2/, "the one on its user's shard (shard 2)");
is($router->safe_psql('postgres',
		"SELECT count(*) FROM orders WHERE id = $order AND gene = idgen_gene($order, 4)"),
	'1', 'and finds the order');

# IDs generated on all four servers at once (clients connected directly to
# each): every server's IDs carry its identity, and none collides.
my @nodes = ($router, @shards);
my @runs;
for my $node (@nodes)
{
	my ($out, $err) = ('', '');
	push @runs, [ $node, \$out, \$err, IPC::Run::start(
		[ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('postgres'), '-c',
		  'CREATE TABLE ids AS SELECT idgen_snowflake() AS id FROM generate_series(1, 200000)' ],
		'>', \$out, '2>', \$err) ];
}
$_->[3]->finish or die "generation failed: ${$_->[2]}" for @runs;
my (%seen, $dups, $total);
$dups = $total = 0;
for my $node (@nodes)
{
	my ($identities) = $node->safe_psql('postgres', q{
		SELECT string_agg(DISTINCT datacenter_id || ':' || worker_id, ',')
		FROM ids, idgen_snowflake_decode(id)});
	my ($dc, $w) = split /\|/, $node->safe_psql('postgres',
		'SELECT datacenter_id, worker_id FROM idgen_info()');
	is($identities, "$dc:$w", $node->name . "'s IDs all carry its identity $dc:$w");
	for my $id (split /\n/, $node->safe_psql('postgres', 'SELECT id FROM ids'))
	{
		$total++;
		$dups++ if $seen{$id}++;
	}
}
is($total, 800_000, '200 000 IDs from each of the four servers');
is($dups, 0, 'no ID repeats across the servers');

# The negative control, and why identities must be distinct: a fifth server
# configured with shard 1's identity generates the same IDs as shard 1 in
# the same milliseconds.  (With a registry such a server is refused:
# 014_registry.pl.)
my $twin = idgen_node('twin', %layout, 'idgen.datacenter_id' => 1, 'idgen.worker_id' => 1);
{
	my @pair = ($shards[0], $twin);
	# Both sessions connected first, then the two statements sent one
	# right after the other: on a loaded machine a connection can take
	# longer than a generation lasts (seconds), and two generations started
	# with their connections might not overlap.
	$_->safe_psql('postgres', 'DROP TABLE IF EXISTS ids') for @pair;
	my @sessions = map { $_->background_psql('postgres') } @pair;
	$_->query_until(qr/started/, q{
		\echo started
		CREATE TABLE ids AS SELECT idgen_snowflake() AS id FROM generate_series(1, 1000000);
	}) for @sessions;
	for my $session (@sessions)
	{
		$session->query_safe('SELECT 1');
		$session->quit;
	}
	my %ids = map { $_ => 1 } split /
/, $shards[0]->safe_psql('postgres', 'SELECT id FROM ids');
	my $same = grep { $ids{$_} } split /
/, $twin->safe_psql('postgres', 'SELECT id FROM ids');
	cmp_ok($same, '>', 0, "two servers with one identity do collide ($same shared IDs): identities must be distinct");
}
push @nodes, $twin;

$_->stop('fast') for @nodes;
no_crash_logged($_, $_->name . ': clean shutdown') for @nodes;
done_testing();
