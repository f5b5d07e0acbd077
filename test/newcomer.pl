#!/usr/bin/perl
#
# test/newcomer.pl: the README's blocks for test/newcomer.sh, and the
# checks of what they printed.
#
#   perl test/newcomer.pl extract DIR   write the blocks' files into DIR
#   perl test/newcomer.pl check DIR     check the outputs newcomer.sh left
#                                       there (each block's, and a new
#                                       session's search_path); exit 1 on a
#                                       failed check
#
# Each block of README.md marked "<!-- test: newcomer/NAME -->" is one of
# %blocks below, and each entry here is a block (a new block must be
# added here; test/docs.pl fails on a SQL block that is not marked):
#
#   install         the Installation's shell commands: install.sh
#   preload         its postgresql.conf lines: preload.conf
#   genes-layout    the genes' postgresql.conf lines: genes.conf
#   genes           the genes' SQL, which needs that layout: genes.sql,
#                   after the installation's SQL (install-schema), for a
#                   new server of its own
#   every other     SQL, in the order of the README, into session.sql: one
#                   psql session, as a newcomer pastes them; each block is
#                   preceded by "\echo @@@ NAME", so that its output can
#                   be told apart, and checked against its pattern
#
use strict;
use warnings;

my ($mode, $dir) = @ARGV;
die "usage: newcomer.pl extract|check DIR\n" unless $mode && $mode =~ /^(extract|check)$/ && $dir && -d $dir;

# name => the file it goes to (sql: session.sql), and a pattern its
# output must match (psql -At: unaligned, tuples only, no command tags).
my %blocks = (
	'install' => { file => 'install.sh' },
	'preload' => { file => 'preload.conf' },
	'genes-layout' => { file => 'genes.conf' },
	'install-schema' => { check => qr/\A\z/ },
	'getting-started' => { check => qr/^\d+\|ann$/m },
	'convert' => { check => qr/^payments\|customer_id\|type integer widened to bigint$/m },
	# user 42's gene in both rows: the one given and the trigger's
	'genes' => { file => 'genes.sql', check => qr/\A10\n10\z/ },
	'uuid7' => { check => qr/^[0-9a-f]{8}-[0-9a-f]{4}-7/m },
	# set_if_absent sets the baseline (t), then 100 values in one call
	'per-key' => { check => qr/\At\n\n1\n2\n(?:\d+\n){97}100\n\z/ },
	# the first key (1), two public numbers, the next key (2); the sample
	# form is of another key: no row, a well-formed form
	'public-ids' => { check => qr/\A1\n\d+\n\d+\n2\z/ },
	# the renewal's new expiry, and the release's true
	'leases' => { check => qr/\A\d{4}-\d\d-\d\d [0-9:.]+\+00\nt\z/ },
	'standby' => { check => qr/\Af\|/ },
	'range-scan' => { check => qr/\A\z/ },
	'monitoring' => { check => qr/^snowflake\|/m },
);

open my $fh, '<', 'README.md' or die "newcomer.pl: run it from the tree's top: $!\n";
my $readme = do { local $/; <$fh> };
close $fh;
my @found;
while ($readme =~ /^<!-- test: newcomer\/([a-z0-9-]+) -->\n```([a-z]*)\n(.*?)^```$/msg)
{
	push @found, [ $1, $2, $3 ];
}
my %seen = map { $_->[0] => 1 } @found;
my @faults = (
	(map { "README.md: block newcomer/$_ is not one of test/newcomer.pl's" } grep { !$blocks{$_} } sort keys %seen),
	(map { "test/newcomer.pl: newcomer/$_ is no block of README.md" } grep { !$seen{$_} } sort keys %blocks));
die join("\n", @faults) . "\n" if @faults;

sub write_file
{
	my ($name, $text) = @_;
	open my $out, '>', "$dir/$name" or die "newcomer.pl: $dir/$name: $!\n";
	print $out $text;
	close $out;
}

sub read_file
{
	my ($name) = @_;
	open my $in, '<', "$dir/$name" or return undef;
	local $/;
	return scalar <$in>;
}

my %text = map { $_->[0] => $_->[2] } @found;
if ($mode eq 'extract')
{
	my $session = '';
	for my $b (@found)
	{
		my ($name, $lang, $text) = @$b;
		if ($blocks{$name}{file}) { next; }
		die "newcomer.pl: block newcomer/$name is $lang, not sql\n" unless $lang eq 'sql';
		$session .= "\\echo @@@ $name\n$text";
	}
	write_file('session.sql', $session);
	write_file($blocks{$_}{file}, $text{$_}) for grep { $blocks{$_}{file} && $_ ne 'genes' } keys %blocks;
	write_file('genes.sql', $text{'install-schema'} . "\\echo @@@ genes\n" . $text{genes});
	printf "newcomer: %d blocks of README.md\n", scalar @found;
	exit 0;
}

# check: each SQL block's output, split at the markers.
my ($passed, $failed) = (0, 0);
sub check
{
	my ($ok, $what, $detail) = @_;
	if ($ok) { $passed++; print "ok: $what\n"; }
	else { $failed++; print "FAILED: $what\n", map { "    $_\n" } split /\n/, $detail // ''; }
}

my @session = map { $_->[0] } grep { !$blocks{ $_->[0] }{file} } @found;
for my $run ([ 'session', @session ], [ 'genes', 'genes' ])
{
	my ($out, @names) = @$run;
	my $printed = read_file("$out.out") // '';
	my $status = read_file("$out.status") // 'none';
	chomp $status;
	check($status eq '0', "$out.sql ran to its end in one psql session (ON_ERROR_STOP)", $printed);
	my @parts = split /^@@@ ([a-z0-9-]+)\n/m, $printed;
	shift @parts;
	my %output = @parts;
	for my $name (@names)
	{
		my $text = $output{$name};
		unless (defined $text)
		{
			check(0, "README block $name: it ran");
			next;
		}
		$text =~ s/\n\z//;
		check($text =~ $blocks{$name}{check}, "README block $name: what it printed", "printed:\n$text");
	}
}
# The installation's ALTER DATABASE, seen by a session opened after it.
my $path = read_file('search_path.out') // '';
chomp $path;
check($path eq '"$user", public, idgen', 'a new session has the search_path the installation set',
	"its search_path: $path");
printf "newcomer: %d checks passed, %d failed\n", $passed, $failed;
exit($failed ? 1 : 0);
