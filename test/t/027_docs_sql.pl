# Scenario: every SQL example of docs/ runs as printed.  Each block of
# docs/*.md marked "<!-- test: example/NAME -->" runs here, through psql
# with ON_ERROR_STOP, in a database of its own, after the setup its
# surrounding text assumes (the tables it names, the extension created or
# not), on a server with the layout the examples use (4 gene bits,
# datacenter 1, worker 7); its output must match a pattern, and what it
# changed may be checked after.  A marked block this test does not know,
# or an entry here with no block, fails it: a new example must be added
# here (test/docs.pl fails on a SQL block that is not marked).  The
# README's blocks are test/newcomer.sh's: they run as a newcomer pastes
# them, in one session on a fresh machine, with no setup they do not say.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $node = idgen_node('readme', 'idgen.gene_bits' => 4, 'idgen.sequence_bits' => 8,
	'idgen.datacenter_id' => 1, 'idgen.worker_id' => 7, 'max_prepared_transactions' => 2);
# the application roles the examples grant to
$node->safe_psql('postgres', 'CREATE ROLE app; CREATE ROLE orders_api');

# name => where it runs (db: a database of that name, made if missing;
# ext: the extension created there first), what it assumes (setup), and
# a pattern its output must match (check).
my %blocks = (
	'revoke-public-create' => { db => 'app' },
	'registry' => { ext => 0, check => qr/^[a-z]+\|1\|7\|/m },
	'stats' => { ext => 1, check => qr/^snowflake\|/m },
	# docs/identifiers.md, with 4 gene bits: orders carry user 42's gene
	'genes-detail' => { ext => 1, after => 'SELECT DISTINCT shard FROM orders_routed',
		after_check => qr/\A10\z/ },
	'genes-partition' => { ext => 1, after => q{
		INSERT INTO orders_p VALUES (idgen_snowflake(13), 1);
		SELECT tableoid::regclass FROM orders_p},
		after_check => qr/\Aorders_p_13\z/ },
	# docs/sequences.md (the README has the first calls)
	'seq-options' => { ext => 1,
		check => qr/^countdown\|10\|-1\|1\|10\|f\|0\ninvoice:2026\|1000\|1\|1\|99999\|f\|1000\nslot\|1\|1\|1\|7\|t\|0$/m },
	'seq-grant' => { ext => 1, after => q{SET ROLE app; SELECT idgen_seq_next('granted')},
		after_check => qr/\A1\z/ },
	'seq-admin-grant' => { ext => 1, after => q{SET ROLE seq_admin;
		SELECT idgen_seq_configure('k', cache => 10); SELECT count(*) FROM idgen_seq_keys},
		after_check => qr/^1$/m },
	'seq-timeouts' => { ext => 1 },
	'seq-prepared' => { ext => 1,
		setup => q{BEGIN; SELECT idgen_seq_next('conv:42'); PREPARE TRANSACTION 'import-7';},
		check => qr/\Aimport-7\|[^|\n]+\|[^|\n]+\|[^|\n]+\n1\n?\z/ },
	'seq-cached' => { ext => 1, check => qr/^1$/m },
	# docs/leases.md
	'lease-grant' => { ext => 1, after => q{SET ROLE orders_api;
		SELECT worker_id >= 0 FROM idgen_worker_acquire('orders-api@host-7:1')},
		after_check => qr/\At\z/ },
	# docs/public-ids.md: a form outlives a rotation, a bare number does not
	'public-id-keys' => { ext => 1, check => qr/\A1\n2\nt\|t\|f\nt\z/ },
	# docs/high-availability.md, here on a primary: nothing received
	'standby-received' => { ext => 1, check => qr/\A\|\z/ },
	# docs/logical-replication.md and docs/active-active.md
	'publish-schemas' => { ext => 1, setup => 'CREATE SCHEMA app; CREATE SCHEMA billing;',
		after => q{SELECT string_agg(n.nspname, ' ' ORDER BY n.nspname)
		           FROM pg_publication_namespace pn JOIN pg_publication p ON p.oid = pn.pnpubid
		           JOIN pg_namespace n ON n.oid = pn.pnnspid WHERE p.pubname = 'app_pub'},
		after_check => qr/\Aapp billing\z/ },
	'publish-claim' => { setup => 'CREATE SCHEMA app; CREATE SCHEMA idgen; CREATE EXTENSION idgen SCHEMA idgen;',
		after => q{SELECT string_agg(schemaname || '.' || tablename, ' ') FROM pg_publication_tables
		           WHERE pubname = 'app_pub'},
		after_check => qr/\Aidgen\.idgen_identity_claim\z/ },
	# (a data-only restore with --disable-triggers left them ordinary ones)
	'replica-triggers' => { setup => q{CREATE SCHEMA idgen; CREATE EXTENSION idgen SCHEMA idgen;
		ALTER TABLE idgen.idgen_seq ENABLE TRIGGER idgen_seq_replica;
		ALTER TABLE idgen.idgen_worker_lease ENABLE TRIGGER idgen_worker_lease_replica;},
		after => q{SELECT string_agg(tgname || '=' || tgenabled::text, ' ' ORDER BY tgname) FROM pg_trigger
		           WHERE tgname LIKE 'idgen%replica'},
		after_check => qr/\Aidgen_seq_replica=R idgen_worker_lease_replica=R\z/ },
	# docs/converting.md: the key converted, the table used after
	'partitioned' => { ext => 1, setup => q{
		CREATE TABLE events (id serial, at date) PARTITION BY RANGE (at);
		CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
		INSERT INTO events (at) VALUES ('2026-11-01'), ('2026-11-02');},
		after => q{
		INSERT INTO events (at) VALUES ('2026-11-03');
		INSERT INTO events_2026 (at) VALUES ('2026-11-04');
		SELECT string_agg(CASE WHEN id > 1000000 THEN 'snowflake' ELSE id::text END, ' ' ORDER BY at),
		       (SELECT string_agg(data_type, ' ') FROM information_schema.columns
		        WHERE table_name IN ('events', 'events_2026') AND column_name = 'id')
		FROM events},
		after_check => qr/^1 2 snowflake snowflake\|bigint bigint$/ },
	'views' => { ext => 1, setup => q{
		CREATE TABLE tickets (id serial PRIMARY KEY, title text);
		CREATE VIEW open_tickets AS SELECT id, title FROM tickets;
		INSERT INTO tickets (title) VALUES ('a');},
		after => q{
		INSERT INTO tickets (title) VALUES ('b');
		SELECT string_agg(CASE WHEN id > 1000000 THEN 'snowflake' ELSE id::text END, ' ' ORDER BY title)
		FROM open_tickets},
		after_check => qr/^1 snowflake$/ },
	# Roundcube's users table, its sequence named in text
	'keep-sequence' => { ext => 1, setup => q{
		CREATE SEQUENCE users_seq INCREMENT BY 1 NO MAXVALUE NO MINVALUE CACHE 1;
		CREATE TABLE users (user_id integer DEFAULT nextval('users_seq'::text) PRIMARY KEY,
		                    username varchar(128) DEFAULT '' NOT NULL);
		INSERT INTO users (username) VALUES ('a');},
		after => q{
		INSERT INTO users (username) VALUES ('b');
		SELECT currval('users_seq') = max(user_id), max(user_id) > 1000000,
		       (SELECT data_type FROM information_schema.columns
		        WHERE table_name = 'users' AND column_name = 'user_id')
		FROM users},
		after_check => qr/^t\|t\|bigint$/ },
);

my @examples = doc_examples('example');
is_deeply([ sort map { $_->[0] } @examples ], [ sort keys %blocks ],
	'each example of the documentation is run here, and each entry here is one');

my $n = 0;
for my $example (grep { $blocks{ $_->[0] } } @examples)
{
	my ($name, $file, $sql) = @$example;
	my $b = $blocks{$name};
	my $db = $b->{db} // 'example_' . ++$n;
	$node->safe_psql('postgres', "CREATE DATABASE $db")
	  unless $node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = '$db'");
	$node->safe_psql($db, 'CREATE EXTENSION idgen') if $b->{ext};
	$node->safe_psql($db, $b->{setup}) if $b->{setup};
	my %vars = @{ $b->{vars} // [] };
	my ($ret, $out, $err) = $node->psql($db, $sql, on_error_stop => 1,
		extra_params => [ map { ('-v', "$_=$vars{$_}") } sort keys %vars ]);
	is($ret, 0, "$file: example $name runs as printed") or diag($err);
	like($out, $b->{check}, "$file: example $name: its result") if $b->{check};
	like($node->safe_psql($db, $b->{after}), $b->{after_check}, "$file: example $name: what it changed")
	  if $b->{after};
}

$node->stop;
done_testing();
