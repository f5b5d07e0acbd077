# Scenario: the registry's connection string (idgen.registry) holds a
# password, and only roles that may read the setting (superusers, members
# of pg_read_all_settings) may learn anything of it.  One server is started
# with three strings in turn:
#   - a URI whose password has an unencoded "%" (libpq's parse error quotes
#     "S3cret%PW"),
#   - a keyword/value string with a space in the password (libpq's error
#     quotes "s3cr3t"),
#   - the same URI behind a space (libpq then reads it as keyword = value,
#     and the whole URI as a keyword), and a password with an "=" in it:
#     words libpq does not know as keywords are never named;
#   - a valid string to a port nobody listens on (libpq's error names the
#     host and port).
# A bare database name stays a valid registry string.
# For each: idgen_identity().message and the DETAIL of idgen_snowflake()'s
# error, as a role with no grants, show neither the password nor the host;
# a member of pg_read_all_settings sees what is wrong (which keywords, or the
# connection error) but never the password, and neither does the server log.
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
});

# Run $sql as $role; its output and error text together.
sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('postgres', $sql,
		extra_params => [ '-U', $role, '-v', 'VERBOSITY=verbose' ]);
	return "$stdout\n$stderr";
}

my @cases = (
	[ 'a URI with an unencoded % in its password',
	  'postgresql://reguser:S3cret%PW@127.0.0.1:5432/reg', qr/S3cret/,
	  qr/not a valid connection string \(it is a URI\)/ ],
	[ 'a keyword/value string with a space in its password',
	  'host=127.0.0.1 dbname=reg password=my s3cr3t', qr/s3cr3t/,
	  qr/not a valid connection string \(its keywords are "host", "dbname", "password"\)/ ],
	[ 'a URI behind a space (libpq then reads it as keyword = value)',
	  ' postgresql://reguser:S3cretPW@127.0.0.1/reg?sslmode=require', qr/S3cretPW/,
	  qr/not a valid connection string \(it has 1 word before "=" that libpq does not know as a keyword\)/ ],
	[ 'a password with an "=" in it',
	  'host=127.0.0.1 dbname=reg password=ab cd=ef', qr/"cd"|\bcd\b/,
	  qr/not a valid connection string \(its keywords are "host", "dbname", "password", and 1 word before "=" that libpq does not know as a keyword\)/ ],
	[ 'a valid string to a port nobody listens on',
	  'host=127.0.0.1 port=1 dbname=reg user=reguser password=S3cretPW connect_timeout=2', qr/S3cretPW/,
	  qr/could not connect to the registry: connection to server at "127\.0\.0\.1", port 1 failed/ ]);

for my $case (@cases)
{
	my ($what, $conninfo, $secret, $privileged) = @$case;
	$node->stop;
	$node->append_conf('postgresql.conf', "idgen.registry = '$conninfo'");
	my $offset = -s $node->logfile;
	$node->start;
	$node->poll_query_until('postgres', q{SELECT state = 'unreachable' FROM idgen_identity()})
	  or die "$what: the registry worker did not give up";

	my $nobody = as_role('nobody', 'SELECT message FROM idgen_identity(); SELECT idgen_snowflake();');
	like($nobody, qr/the details are shown only to roles with the privileges of pg_read_all_settings/,
		"$what: a role with no grants is told where to look");
	like($nobody, qr/55000: this server holds no Snowflake identity/, "$what: and why it cannot generate");
	unlike($nobody, $secret, "$what: but not the password");
	unlike($nobody, qr/127\.0\.0\.1|reguser|port/, "$what: nor the host, port or user");

	my $reader = as_role('reader', 'SELECT message FROM idgen_identity(); SELECT idgen_snowflake();');
	like($reader, $privileged, "$what: a member of pg_read_all_settings sees what is wrong");
	unlike($reader, $secret, "$what: but not the password");

	my $log = slurp_file($node->logfile, $offset);
	unlike($log, $secret, "$what: the server log never shows the password");
	if ($what !~ /valid string/)
	{
		like($log, qr/WARNING:  "idgen\.registry" is not a valid connection string/,
			"$what: the server log says at start that the string is invalid");
	}
}

# A bare database name is a connection string to libpq (expand_dbname),
# not an invalid one.
$node->stop;
$node->append_conf('postgresql.conf', "idgen.registry = 'regdb'");
$node->start;
$node->poll_query_until('postgres', q{SELECT state = 'unreachable' FROM idgen_identity()})
  or die 'bare dbname: the registry worker did not give up';
unlike($node->safe_psql('postgres', 'SELECT message FROM idgen_identity()'),
	qr/not a valid connection string/, 'a bare database name is accepted as a connection string');

$node->stop('fast');
no_crash_logged($node, 'clean shutdown');
done_testing();
