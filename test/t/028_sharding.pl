# Scenario: the sharding-by-gene section of docs/many-servers.md, run as
# printed on one server: its layout (the idgen.*_bits lines of its
# settings block), its tables hash-partitioned by gene into 32 partitions,
# and its rows and lookup.  Every SQL block of the section is either run
# here (marked "<!-- test: sharding/NAME -->") or marked as checked by hand
# on Citus ("<!-- by hand: ... -->").
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $doc = repo_file('docs/many-servers.md');
my ($section) = $doc =~ /^(## Sharding by gene.*?)(?=^## |\z)/ms;
ok(defined $section, 'docs/many-servers.md has the sharding section');
my @fences = $section =~ /^```sql$/mg;
my @marked = $section =~ /^<!-- (?:test: sharding\/[a-z-]+|by hand: Citus [0-9.]+, PostgreSQL [0-9.]+) -->\n```sql$/mg;
is(scalar @marked, scalar @fences, 'every SQL block of the section is run here or marked as checked by hand');

# The layout of the settings block, as printed.
my %layout = doc_block('docs/many-servers.md', 'sharding/layout') =~ /^(idgen\.[a-z]+_bits) = (\d+)/mg;
is(scalar keys %layout, 5, 'the settings block sets all five field widths');
my $node = idgen_node('sharding', %layout);
is($node->safe_psql('postgres', 'SELECT layout_valid FROM idgen_info()'), 't', 'the layout is valid (63 bits)');
is($node->safe_psql('postgres', 'SELECT ids_per_second_per_gene || \' \' || ids_per_second FROM idgen_info()'),
	'64000 65536000', 'idgen_info() gives its rates: 64 000 per second per gene, 65 536 000 in all');
# (The node is made with the extension created; the recipe creates it.)
$node->safe_psql('postgres', 'DROP EXTENSION idgen');

$node->safe_psql('postgres', doc_block('docs/many-servers.md', 'sharding/native-tables'), on_error_stop => 1);
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_inherits WHERE inhparent IN ('users'::regclass, 'orders'::regclass)}),
	'64', 'the tables have 32 partitions each');

my $out = $node->safe_psql('postgres', doc_block('docs/many-servers.md', 'sharding/use'), on_error_stop => 1);
like($out, qr/^\d+\|42$/, 'the lookup by order id alone finds the order');
is($node->safe_psql('postgres', q{
		SELECT count(*) || ' ' || count(DISTINCT tableoid) || ' ' ||
		       count(*) FILTER (WHERE gene <> idgen_gene(id, 10)) FROM users}),
	'1001 32 0', "1 001 users in all 32 partitions, each user's gene its id's");
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM orders o JOIN users u ON u.gene = o.gene AND u.id = o.user_id
		WHERE substr(o.tableoid::regclass::text, 8) = substr(u.tableoid::regclass::text, 7)}),
	'1', "the order is in its user's partition");

# The lookup prunes to one partition; by id alone, or with the gene
# computed from the column, it reads them all (partitions counted by name
# in the plan).
my $order = $node->safe_psql('postgres', 'SELECT id FROM orders');
my $scans = sub {
	my $plan = $node->safe_psql('postgres', "EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE $_[0]");
	my %parts = map { $_ => 1 } $plan =~ /\bon (orders_\d+)\b(?!_)/g;
	return scalar keys %parts;
};
is($scans->("gene = idgen_gene($order, 10) AND id = $order"), 1, 'the lookup reads one partition');
is($scans->("id = $order"), 32, 'by id alone, all 32');
is($scans->("gene = idgen_gene(id, 10) AND id = $order"), 32, 'with the gene computed from the column, all 32');

# The foreign key holds: an order whose gene is not its user's is refused.
my ($ret, $stdout, $stderr) = $node->psql('postgres', qq{
	INSERT INTO orders (id, gene, user_id, amount)
	SELECT idgen_snowflake((gene + 1) % 1024), (gene + 1) % 1024, id, 1 FROM users LIMIT 1});
like($stderr, qr/violates foreign key constraint/, "an order with another gene than its user's is refused");

$node->stop;
done_testing();
