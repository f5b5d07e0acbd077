# Scenario: the registry's connection string (idgen.registry) holds a
# password, and only roles that may read the setting (superusers, members
# of pg_read_all_settings) may learn anything of it: not a role that calls
# a superuser's SECURITY DEFINER function, nor a privileged session that
# has SET ROLE to a role with no grants.  One server is started with each
# of these strings in turn:
#   - a URI whose password has an unencoded "%" (libpq's parse error quotes
#     "S3cret%PW"),
#   - a keyword/value string with a space in the password (libpq's error
#     quotes "s3cr3t"),
#   - the same URI behind a space (libpq then reads it as keyword = value,
#     and the whole URI as a keyword), and a password with an "=" in it:
#     words libpq does not know as keywords are never named;
#   - strings libpq parses, read other than their author meant, whose
#     connection errors would quote part of the password: a URI's password
#     with an unencoded "@" (the rest becomes the host) or "/" (its start
#     becomes the port), and a password with a space before a keyword
#     ("port", "sslmode", "hostaddr", "keepalives_idle"): idgen refuses
#     them before connecting;
#   - a string whose "options" the registry rejects, quoting the value: the
#     message keeps the server's words and hides the value's;
#   - a valid string to a port nobody listens on (libpq's error names the
#     host and port).
# A bare database name stays a valid registry string.
# For each: idgen_identity().message and the DETAIL of idgen_snowflake()'s
# error, as a role with no grants, show neither the password nor the host;
# a member of pg_read_all_settings sees what is wrong (which keywords, or the
# connection error) but never the password, and neither does the server log.
# Then, with a short ttl and the registry down, then closed, then open:
# the registry process logs each failure once however often it retries
# (another failure gets a line of its own), and one line when it holds its
# identity again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdgenTest;

my $node = idgen_node('secrets', 'idgen.worker_id' => 9);
$node->safe_psql('postgres', q{
	CREATE ROLE nobody LOGIN;
	CREATE ROLE reader LOGIN;
	GRANT pg_read_all_settings TO reader;
	GRANT nobody TO reader;	-- so that it may SET ROLE nobody
	-- What an application might wrap idgen in: run as their owner, a superuser.
	CREATE FUNCTION app_identity_message() RETURNS text SECURITY DEFINER
		LANGUAGE sql AS $$ SELECT message FROM public.idgen_identity() $$;
	CREATE FUNCTION app_new_id() RETURNS bigint SECURITY DEFINER
		LANGUAGE sql AS $$ SELECT public.idgen_snowflake() $$;
});

# A server the registry strings can reach: it answers a connection with
# options it rejects, and is the registry at the end.
my $registry = idgen_node('registry');
my $reg_conn = 'host=' . $registry->host . ' port=' . $registry->port . ' dbname=postgres';

# Run $sql as $role; its output and error text together.
sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('postgres', $sql,
		extra_params => [ '-U', $role, '-v', 'VERBOSITY=verbose' ]);
	return "$stdout\n$stderr";
}

# Restart the server with idgen.registry = $conninfo (and any other
# settings in %conf); the log's size before the start.
sub restart_with
{
	my ($conninfo, %conf) = @_;
	(my $quoted = $conninfo) =~ s/'/''/g;
	$node->stop;
	$node->append_conf('postgresql.conf',
		join('', "idgen.registry = '$quoted'\n", map { "$_ = $conf{$_}\n" } sort keys %conf));
	my $offset = -s $node->logfile;
	$node->start;
	return $offset;
}

my $misread = qr/"idgen\.registry" is not a valid connection string \(its/;
my @cases = (
	{ what => 'a URI with an unencoded % in its password',
	  conninfo => 'postgresql://reguser:S3cret%PW@127.0.0.1:5432/reg', secret => qr/S3cret/,
	  privileged => qr/not a valid connection string \(it is a URI\)/ },
	{ what => 'a keyword/value string with a space in its password',
	  conninfo => 'host=127.0.0.1 dbname=reg password=my s3cr3t', secret => qr/s3cr3t/,
	  privileged => qr/not a valid connection string \(its keywords are "host", "dbname", "password"\)/ },
	{ what => 'a URI behind a space (libpq then reads it as keyword = value)',
	  conninfo => ' postgresql://reguser:S3cretPW@127.0.0.1/reg?sslmode=require', secret => qr/S3cretPW/,
	  privileged => qr/not a valid connection string \(it has 1 word before "=" that libpq does not know as a keyword\)/ },
	{ what => 'a password with an "=" in it',
	  conninfo => 'host=127.0.0.1 dbname=reg password=ab cd=ef', secret => qr/"cd"|\bcd\b/,
	  privileged => qr/not a valid connection string \(its keywords are "host", "dbname", "password", and 1 word before "=" that libpq does not know as a keyword\)/ },
	{ what => 'a URI whose password has an unencoded "@" (libpq reads the rest as the host)',
	  conninfo => 'postgresql://reguser:Ab1@Hq4Frag@127.0.0.1:1/reg', secret => qr/Hq4Frag/,
	  privileged => qr/$misread "host" has an "@" after its first character\)/, misread => 1 },
	{ what => 'a URI whose password has an unencoded "/" (libpq reads its start as the port)',
	  conninfo => 'postgresql://reguser:Pw2Frag/Hq5@127.0.0.1/reg', secret => qr/Pw2Frag|Hq5/,
	  privileged => qr/$misread "port" is not a number\)/, misread => 1 },
	{ what => 'a password with a space before "port="',
	  conninfo => 'host=127.0.0.1 dbname=reg password=Qz9a port=Wq7a', secret => qr/Qz9a|Wq7a/,
	  privileged => qr/$misread "port" is not a number\)/, misread => 1 },
	{ what => 'a password with a space before "sslmode="',
	  conninfo => 'host=127.0.0.1 port=1 dbname=reg password=Qz9b sslmode=Wq7b', secret => qr/Qz9b|Wq7b/,
	  privileged => qr/$misread "sslmode" is not a value libpq knows\)/, misread => 1 },
	{ what => 'a password with a space before "hostaddr="',
	  conninfo => 'host=127.0.0.1 port=1 dbname=reg password=Qz9c hostaddr=Wq7c', secret => qr/Qz9c|Wq7c/,
	  privileged => qr/$misread "hostaddr" is not a numeric address\)/, misread => 1 },
	{ what => 'a password with a space before "keepalives_idle="',
	  conninfo => 'host=127.0.0.1 port=1 dbname=reg password=Qz9e keepalives_idle=Wq7e', secret => qr/Qz9e|Wq7e/,
	  privileged => qr/$misread "keepalives_idle" is not a number\)/, misread => 1 },
	{ what => 'options the registry rejects, quoting their value',
	  conninfo => "$reg_conn password=Qz9d options='-c statement_timeout=Wq7d'", secret => qr/Qz9d|Wq7d/,
	  privileged => qr/could not connect to the registry: .*invalid value for parameter/, valid => 1 },
	{ what => 'a valid string to a port nobody listens on',
	  conninfo => 'host=127.0.0.1 port=1 dbname=reg user=reguser password=S3cretPW connect_timeout=2', secret => qr/S3cretPW/,
	  privileged => qr/could not connect to the registry: connection to server at "127\.0\.0\.1", port 1 failed/, valid => 1 });

for my $case (@cases)
{
	my ($what, $secret, $privileged) = @$case{qw(what secret privileged)};
	my $offset = restart_with($case->{conninfo});
	$node->poll_query_until('postgres', q{SELECT state = 'unreachable' FROM idgen_identity()})
	  or die "$what: the registry process did not give up";

	my $nobody = as_role('nobody', 'SELECT message FROM idgen_identity(); SELECT idgen_snowflake();');
	like($nobody, qr/the details are shown only to roles with the privileges of pg_read_all_settings/,
		"$what: a role with no grants is told where to look");
	like($nobody, qr/55000: this server holds no Snowflake identity/, "$what: and why it cannot generate");
	unlike($nobody, $secret, "$what: but not the password");
	unlike($nobody, qr/127\.0\.0\.1|reguser|port/, "$what: nor the host, port or user");

	my $reader = as_role('reader', 'SELECT message FROM idgen_identity(); SELECT idgen_snowflake();');
	like($reader, $privileged, "$what: a member of pg_read_all_settings sees what is wrong");
	unlike($reader, $secret, "$what: but not the password, in the message or the DETAIL");

	my $log = slurp_file($node->logfile, $offset);
	unlike($log, $secret, "$what: the server log never shows the password");
	if (!$case->{valid})
	{
		like($log, qr/WARNING:  "idgen\.registry" is not a valid connection string/,
			"$what: the server log says at start that the string is invalid");
		like($log, $case->{misread} ?
			qr/DETAIL:  libpq parses it, but its "/ : qr/DETAIL:  libpq could not parse it/,
			"$what: and whether libpq could parse it");
	}
}

# A bare database name is a connection string to libpq (expand_dbname),
# not an invalid one.
restart_with('regdb');
$node->poll_query_until('postgres', q{SELECT state = 'unreachable' FROM idgen_identity()})
  or die 'bare dbname: the registry process did not give up';
unlike($node->safe_psql('postgres', 'SELECT message FROM idgen_identity()'),
	qr/not a valid connection string/, 'a bare database name is accepted as a connection string');

# The registry down, with a 1.5 s ttl: the process retries every 500 ms.
# Its database is closed to connections for when it starts again.
$registry->safe_psql('template1', 'ALTER DATABASE postgres WITH ALLOW_CONNECTIONS false');
$registry->stop;
my $offset = restart_with("$reg_conn password=Zr8Frag", 'idgen.registry_ttl' => "'1500ms'");
$node->poll_query_until('postgres', q{SELECT state = 'unreachable' FROM idgen_identity()})
  or die 'registry down: the registry process did not give up';

# The message (a connection error naming the registry's socket) passes
# through a superuser's SECURITY DEFINER function to the superuser ...
my $connection_error = qr/could not connect to the registry: connection to server/;
like(as_role($node->safe_psql('postgres', 'SELECT current_user'),
		'SELECT app_identity_message(); SELECT app_new_id();'),
	qr/$connection_error.*\n.*DETAIL: .*$connection_error/s,
	'a superuser sees the message through SECURITY DEFINER wrappers');
# ... but not to a role with no grants that calls it, nor to a privileged
# session that has become such a role.
for my $way (
	[ 'a role with no grants calling SECURITY DEFINER wrappers', 'nobody',
	  'SELECT app_identity_message(); SELECT app_new_id();' ],
	[ 'a superuser session after SET ROLE to a role with no grants', undef,
	  'SET ROLE nobody; SELECT message FROM idgen_identity(); SELECT idgen_snowflake();' ],
	[ 'a member of pg_read_all_settings after SET ROLE to a role with no grants', 'reader',
	  'SET ROLE nobody; SELECT message FROM idgen_identity(); SELECT idgen_snowflake();' ],
	[ 'the same through the wrappers', 'reader',
	  'SET ROLE nobody; SELECT app_identity_message(); SELECT app_new_id();' ])
{
	my ($what, $role, $sql) = @$way;
	$role //= $node->safe_psql('postgres', 'SELECT current_user');
	my $out = as_role($role, $sql);
	like($out, qr/the details are shown only to roles with the privileges of pg_read_all_settings.*\n(.*\n)*.*DETAIL: .*the details are shown only/,
		"$what: is told where to look, in the message and the DETAIL");
	unlike($out, qr/connection to server|\.s\.PGSQL|Zr8Frag/, "$what: and sees nothing of the registry");
}

# Failures every 500 ms: one line in the log.
$node->poll_query_until('postgres', q{SELECT failures >= 8 FROM idgen_identity()})
  or die 'registry down: fewer than 8 failures';
my $log = slurp_file($node->logfile, $offset);
my $lines = () = $log =~ /LOG:  idgen registry cannot reach the registry/g;
is($lines, 1, 'the registry process logs its failure once, not at every retry');
like($log, qr/LOG:  idgen registry cannot reach the registry\n.*DETAIL: .*$connection_error/,
	'the line says what failed');
unlike($log, qr/Zr8Frag/, 'and never shows the password');

# Another failure is logged when it begins, once: the registry up, its
# database closed to connections, where its socket was missing.
my $closed = qr/LOG:  idgen registry cannot reach the registry\n.*DETAIL: .*is not currently accepting connections/;
$registry->start;
$node->wait_for_log($closed, $offset);
my $failures = $node->safe_psql('postgres', 'SELECT failures FROM idgen_identity()');
$node->poll_query_until('postgres', "SELECT failures >= $failures + 4 FROM idgen_identity()")
  or die 'registry closed: fewer than 4 more failures';

# Back: one line, with how many attempts failed.
$registry->safe_psql('template1', 'ALTER DATABASE postgres WITH ALLOW_CONNECTIONS true');
$node->poll_query_until('postgres', q{SELECT state = 'held' FROM idgen_identity()})
  or die 'registry back: no identity';
$log = slurp_file($node->logfile, $offset);
ok($log =~ /LOG:  idgen registry holds identity \(datacenter 0, worker 9\) again after (\d+) failures/ && $1 >= 12,
	'the registry process logs when it holds its identity again, after how many failures');

# Every line names a failure other than the line before it (a registry that
# starts may answer "starting up" for a moment: another failure, logged
# too), and each of the two failures this test made was logged once.
my @details = $log =~ /LOG:  idgen registry cannot reach the registry\n.*DETAIL:  (.*)/g;
my @shapes = map { (my $shape = $_) =~ s/\d+//g; $shape } @details;
is(scalar(grep { $shapes[$_] eq $shapes[ $_ - 1 ] } 1 .. $#shapes), 0,
	'no line repeats the failure logged before it')
  or diag(join("\n", @details));
is(scalar(grep { $_ eq $shapes[0] } @shapes), 1,
	'the registry down: logged once meanwhile');
is(scalar(grep { /is not currently accepting connections/ } @details), 1,
	'the registry closed: another failure, logged once');

$node->stop('fast');
$registry->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
