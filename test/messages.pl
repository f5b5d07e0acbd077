#!/usr/bin/perl
#
# test/messages.pl: docs/troubleshooting.md and the messages idgen raises
# agree.
#
#   perl test/messages.pl [--list]
#
# It fails, listing each one,
#   (a) for every message the code raises that has no entry in
#       docs/troubleshooting.md, or whose entries are all under another
#       SQLSTATE than the code raises it with;
#   (b) for every message docs/troubleshooting.md quotes that neither the
#       code nor PostgreSQL raises.
# On success it prints the counts.  --list prints what it extracted: each
# message of the code with its SQLSTATE, level and place, then each quoted
# message of the document with its line and its section's SQLSTATE.
#
# The messages of the code:
#   - in src/*/*.c, the format of every errmsg() and errmsg_plural() (both its
#     forms) of an ereport() at any level but DEBUGn: errors, warnings,
#     notices and LOG lines.  errmsg_internal() and elog() are PostgreSQL's
#     calls for messages no user should meet (a can't-happen condition, an
#     internal error raised as XX000, a debug line) and are left out: a
#     message a user or an operator may meet is raised with ereport() and
#     errmsg(), and then it is documented.
#   - in sql/idgen--VERSION.sql, every RAISE EXCEPTION, WARNING, NOTICE,
#     INFO or LOG.
# The script stops with an error where it cannot tell: an errmsg() outside
# an ereport() call, a format that is no string literal, a RAISE without a
# literal format.
#
# A message's SQLSTATE is that of its errcode() (ERRCODE_* names are read
# from the server's utils/errcodes.h) or of RAISE's USING ERRCODE.  An
# errcode() of a value that is no ERRCODE_* name (another error's code,
# passed on) may be documented under any SQLSTATE; errcode_for_file_access()
# depends on errno and counts as 58030, its usual code.  Without a code an
# ERROR is XX000, a WARNING 01000 and a NOTICE or LOG line 00000, as
# PostgreSQL reports them; a level passed in a variable (elevel) may be
# documented under 01000 or 00000.
#
# How the document quotes a message: in bold and double quotes, **"like
# this"**, at the start of its entry; every **"..."** of the document is a
# quoted message.  An entry belongs to the SQLSTATE that begins the nearest
# heading above it ("### 55000 object_not_in_prerequisite_state", whose
# condition name must be one of that SQLSTATE's in errcodes.h); a quote
# under a heading without one ("The messages a new install meets") is
# checked by (b) only, and the message needs an entry under its SQLSTATE
# too.  A value in a quoted message stands for a placeholder of the format:
# %d, %u, %ld, %lld, INT64_FORMAT and UINT64_FORMAT match a word without
# spaces ("N", "1024"), %s and %m any text ("k", "Snowflake ID"), and
# RAISE's % any text.
#
# PostgreSQL's own messages the document quotes (a permission or a
# read-only transaction refused, a unique violation) are found in the
# server's message catalogues: the msgids of postgres-MAJOR.mo, of every
# language installed.
#
# Perl and its core modules only.  The server is found with $PG_CONFIG
# (default: pg_config on the PATH; then PostgreSQL 15's Debian paths).
#
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;

my $list = @ARGV && $ARGV[0] eq '--list';
my $root = File::Spec->rel2abs(dirname(__FILE__) . '/..');
my $doc_file = "$root/docs/troubleshooting.md";
my $pg_config = $ENV{PG_CONFIG} || 'pg_config';

sub slurp
{
	my ($f) = @_;
	open(my $fh, '<', $f) or die "messages.pl: cannot read $f: $!\n";
	local $/;
	return scalar <$fh>;
}

# ERRCODE_* name => SQLSTATE, from the server's errcodes.h.
my %errcode;
{
	my $inc = `$pg_config --includedir-server 2>/dev/null` // '';
	chomp $inc;
	$inc = '/usr/include/postgresql/15/server' unless $inc && -d $inc;
	my $h = slurp("$inc/utils/errcodes.h");
	while ($h =~ /#define\s+(ERRCODE_\w+)\s+MAKE_SQLSTATE\('(.)',\s*'(.)',\s*'(.)',\s*'(.)',\s*'(.)'\)/g)
	{
		$errcode{$1} = "$2$3$4$5$6";
	}
	die "messages.pl: no ERRCODE_ names in $inc/utils/errcodes.h\n" unless %errcode;
}

# PostgreSQL's own messages, which the document may quote too (a permission
# or a read-only transaction refused by the server, a unique violation): the
# msgids of the server's message catalogues, postgres-MAJOR.mo of every
# language installed.  Formats with fewer than 12 letters outside their
# placeholders ("%s: %s") would match almost any text and are left out.
my @pg_formats;
{
	my ($major) = (`$pg_config --version 2>/dev/null` // '') =~ /PostgreSQL (\d+)/;
	$major //= 15;
	my $localedir = `$pg_config --localedir 2>/dev/null` // '';
	chomp $localedir;
	my @mo = glob("$localedir/*/LC_MESSAGES/postgres-$major.mo");
	@mo = glob("/usr/share/locale/*/LC_MESSAGES/postgres-$major.mo") unless @mo;
	die "messages.pl: no message catalogue postgres-$major.mo (is PostgreSQL $major installed?)\n" unless @mo;
	my %seen;
	for my $f (@mo)
	{
		my $mo = slurp($f);
		my $le = unpack('V', $mo) == 0x950412de;
		my $u32 = $le ? 'V' : 'N';
		my ($n, $orig) = unpack("x8 $u32 $u32", $mo);
		for my $i (0 .. $n - 1)
		{
			my ($len, $off) = unpack("$u32 $u32", substr($mo, $orig + 8 * $i, 8));
			my $id = substr($mo, $off, $len);
			$id =~ s/^.*\x04//s;    # a message context
			for my $form (split /\0/, $id)
			{
				next if $seen{$form}++;
				(my $letters = $form) =~ s/%[-+ #0]*\d*(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z)?[diouxXcsm]//g;
				push @pg_formats, $form if ($letters =~ tr/a-zA-Z//) >= 12;
			}
		}
	}
}

# Strings #defined in the headers (src/include/*.h, src/compat.h) and src/*/*.c, for formats built with them.
my %string_macro = (INT64_FORMAT => '%lld', UINT64_FORMAT => '%llu');

# C source without comments, string literals kept.
sub strip_c_comments
{
	my ($s) = @_;
	$s =~ s{("(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')|/\*.*?\*/|//[^\n]*}
		   {defined $1 ? $1 : ' ' . ("\n" x (substr($&, 0, 2) eq '/*' ? ($& =~ tr{\n}{}) : 0))}gse;
	return $s;
}

# The text of a call's arguments: from the "(" at $pos to its matching ")".
sub call_args
{
	my ($s, $pos) = @_;
	my $depth = 0;
	my $start = $pos;
	pos($s) = $pos;
	while ($s =~ /\G(?:("(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')|([()])|[^"'()]+)/gc)
	{
		next if defined $1 || !defined $2;
		$depth += $2 eq '(' ? 1 : -1;
		return substr($s, $start + 1, pos($s) - $start - 2) if $depth == 0;
	}
	return undef;
}

# Split an argument list at its top-level commas.
sub split_args
{
	my ($s) = @_;
	my @args;
	my $depth = 0;
	my $cur = '';
	while ($s =~ /\G(?:("(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')|([(),])|([^"'(),]+))/gc)
	{
		if (defined $2 && $2 eq ',' && $depth == 0)
		{
			push @args, $cur;
			$cur = '';
			next;
		}
		$depth++ if defined $2 && $2 eq '(';
		$depth-- if defined $2 && $2 eq ')';
		$cur .= defined $1 ? $1 : defined $2 ? $2 : $3;
	}
	push @args, $cur;
	return @args;
}

# The formats a format argument may be: string literals and string macros
# concatenated, or several of them as the branches of "?:".
sub formats_of
{
	my ($arg, $where) = @_;
	my @formats;
	my $cur;
	while ($arg =~ /\G\s*(?:"((?:\\.|[^"\\])*)"|(\w+)|([?:])|(.))/gcs)
	{
		if (defined $1)
		{
			my $lit = $1;
			$lit =~ s/\\(["\\])/$1/g;
			$cur = ($cur // '') . $lit;
		}
		elsif (defined $2)
		{
			if (exists $string_macro{$2})
			{
				$cur = ($cur // '') . $string_macro{$2};
			}
			# A condition before "?": what is read so far is not a format.
			else
			{
				$cur = undef;
			}
		}
		elsif (defined $3)
		{
			if ($3 eq ':' && defined $cur)
			{
				push @formats, $cur;
			}
			$cur = undef;
		}
		else
		{
			$cur = undef;
		}
	}
	push @formats, $cur if defined $cur;
	die "messages.pl: $where: no string literal in a message's format\n" unless @formats;
	return @formats;
}

my @messages;    # { formats => [...], sqlstate, level, where }

# src/LAYER/*.c
my @c_files = sort glob("$root/src/*/*.c");
for my $f (sort(glob("$root/src/include/*.h")), "$root/src/compat.h", @c_files)
{
	my $s = strip_c_comments(slurp($f));
	while ($s =~ /#define\s+(\w+)\s+"((?:\\.|[^"\\])*)"\s*$/mg)
	{
		$string_macro{$1} = $2;
	}
}
for my $f (@c_files)
{
	(my $name = $f) =~ s{^\Q$root\E/}{};
	my $s = strip_c_comments(slurp($f));
	my $in_ereport = 0;
	while ($s =~ /\bereport\s*\(/g)
	{
		my $at = pos($s) - 1;
		my $line = 1 + (substr($s, 0, $at) =~ tr/\n//);
		my $args = call_args($s, $at);
		die "messages.pl: $name:$line: unbalanced ereport\n" unless defined $args;
		my ($level) = split_args($args);
		$level =~ s/^\s+|\s+$//g;
		$in_ereport += () = $args =~ /\berrmsg(?:_plural)?\s*\(/g;
		next if $level =~ /^DEBUG\d$/;

		my @codes;
		while ($args =~ /\berrcode\s*\(/g)
		{
			my $c = call_args($args, pos($args) - 1);
			my @names = $c =~ /\b(ERRCODE_\w+)/g;
			# errcode(edata->sqlerrcode): the code of another error, any.
			push @codes, '*' unless @names;
			for my $n (@names)
			{
				die "messages.pl: $name:$line: unknown $n\n" unless $errcode{$n};
				push @codes, $errcode{$n};
			}
		}
		push @codes, '58030' if $args =~ /\berrcode_for_file_access\s*\(/;
		unless (@codes)
		{
			push @codes, $level =~ /^(ERROR|FATAL|PANIC)$/ ? 'XX000'
			  : $level eq 'WARNING' ? '01000'
			  : $level =~ /^(LOG|NOTICE|INFO)$/ ? '00000'
			  : ('01000', '00000');
		}

		while ($args =~ /\b(errmsg|errmsg_plural)\s*\(/g)
		{
			my $fn = $1;
			my @a = split_args(call_args($args, pos($args) - 1));
			my @formats = formats_of($a[0], "$name:$line");
			push @formats, formats_of($a[1], "$name:$line") if $fn eq 'errmsg_plural';
			# A message chosen by "?:" is one message per branch.
			my @groups = $fn eq 'errmsg_plural' ? ([@formats]) : map { [$_] } @formats;
			for my $g (@groups)
			{
				push @messages, {
					formats => $g,
					sqlstates => [@codes],
					level => $level,
					where => "$name:$line",
				};
			}
		}
	}
	# An errmsg() outside an ereport() (in a helper) has no level to read.
	my $all = () = $s =~ /\berrmsg(?:_plural)?\s*\(/g;
	die "messages.pl: $name: an errmsg() outside an ereport() call\n" if $all != $in_ereport;
}

# sql/idgen--*.sql: RAISE EXCEPTION|WARNING|NOTICE 'format', ... [USING ...];
for my $f (sort glob("$root/sql/idgen--*.sql"))
{
	(my $name = $f) =~ s{^\Q$root\E/}{};
	my $s = slurp($f);
	$s =~ s/--[^\n]*//g;
	my $raises = () = $s =~ /\bRAISE\s+(?:EXCEPTION|WARNING|NOTICE|INFO|LOG)\b/gi;
	my $read = 0;
	while ($s =~ /\bRAISE\s+(EXCEPTION|WARNING|NOTICE|INFO|LOG)\s+'((?:''|[^'])*)'([^;]*);/gi)
	{
		$read++;
		my ($level, $format, $rest) = (uc $1, $2, $3);
		my $line = 1 + (substr($s, 0, $-[0]) =~ tr/\n//);
		$format =~ s/''/'/g;
		my $code = $level eq 'EXCEPTION' ? 'P0001' : $level eq 'WARNING' ? '01000' : '00000';
		$level = 'ERROR' if $level eq 'EXCEPTION';
		if ($rest =~ /\bERRCODE\s*=\s*'([^']*)'/i)
		{
			$code = $1;
			if ($code !~ /^[0-9A-Z]{5}$/)
			{
				$code = $errcode{'ERRCODE_' . uc $code}
				  or die "messages.pl: $name:$line: unknown condition name $1\n";
			}
		}
		push @messages, {
			formats => [$format],
			sqlstates => [$code],
			level => $level,
			where => "$name:$line",
			raise => 1,
		};
	}
	die "messages.pl: $name: a RAISE without a literal format (USING MESSAGE?)\n" if $read != $raises;
}

# A format as a pattern a quoted message must match whole.
sub format_pattern
{
	my ($format, $raise) = @_;
	my $re = '';
	for my $piece (split /(%(?:%|[-+ #0]*\d*(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z)?[diouxXcsm]))/, $format)
	{
		if ($raise)
		{
			$re .= join('.+?', map { quotemeta } split(/%/, $piece, -1));
		}
		elsif ($piece eq '%%')
		{
			$re .= '%';
		}
		elsif ($piece =~ /^%.*[sm]$/)
		{
			$re .= '.*?';
		}
		elsif ($piece =~ /^%/)
		{
			$re .= '\S+?';
		}
		else
		{
			$re .= quotemeta $piece;
		}
	}
	return qr/^$re$/s;
}
for my $m (@messages)
{
	$m->{patterns} = [map { format_pattern($_, $m->{raise}) } @{ $m->{formats} }];
}

# The document's quoted messages, with the SQLSTATE of their section.
my @quoted;    # { text, sqlstate, line }
my @heading_failures;
{
	my $doc = slurp($doc_file);
	my $sqlstate;
	my $heading = '';
	my $in_fence = 0;
	my $para = '';
	my $para_line = 0;
	my $n = 0;
	my $flush = sub {
		while ($para =~ /\*\*"(.+?)"\*\*/gs)
		{
			my $t = $1;
			$t =~ s/\s+/ /g;
			$t =~ s/\\([\\`*_{}\[\]()#+\-.!"|<>])/$1/g;
			push @quoted, { text => $t, sqlstate => $sqlstate, line => $para_line };
		}
		$para = '';
	};
	for my $l (split /\n/, $doc)
	{
		$n++;
		if ($l =~ /^```/)
		{
			$in_fence = !$in_fence;
			$flush->();
			next;
		}
		next if $in_fence;
		if ($l =~ /^#+\s+(.*)/)
		{
			$flush->();
			$heading = $1;
			$sqlstate = $heading =~ /^([0-9A-Z]{5})\b/ ? $1 : undef;
			# The condition name after it is the SQLSTATE's (errcodes.h
			# spells trigger_protocol_violated ERRCODE_E_R_I_E_TRIGGER_...).
			if (defined $sqlstate)
			{
				my ($cond) = $heading =~ /^\S+\s+(\w+)/;
				my $uc = uc($cond // '');
				push @heading_failures,
				  "docs/troubleshooting.md:$n: \"$heading\": no condition $sqlstate named \"" . ($cond // '') . '"'
				  unless $uc ne '' && grep { $errcode{$_} eq $sqlstate && ($_ eq "ERRCODE_$uc" || /_\Q$uc\E$/) } keys %errcode;
			}
			next;
		}
		if ($l =~ /^\s*$/ || $l =~ /^\s*[-*]\s/)
		{
			$flush->();
			$para_line = $n;
		}
		$para_line = $n if $para eq '';
		$para .= "$l\n";
	}
	$flush->();
}

if ($list)
{
	for my $m (sort { $a->{sqlstates}[0] cmp $b->{sqlstates}[0] } @messages)
	{
		printf "%s %-7s %-24s %s\n", join('/', @{ $m->{sqlstates} }), $m->{level}, $m->{where},
		  join(' | ', @{ $m->{formats} });
	}
	printf "doc:%d %s %s\n", $_->{line}, $_->{sqlstate} // '-----', $_->{text} for @quoted;
}

my @failures = @heading_failures;

# (a) Each message of the code has an entry, under one of its SQLSTATEs.
my %used;
for my $m (@messages)
{
	my @hits;
	for my $i (0 .. $#quoted)
	{
		next unless grep { $quoted[$i]{text} =~ $_ } @{ $m->{patterns} };
		push @hits, $i;
		$used{$i} = 1;
	}
	my $what = sprintf '%s %s "%s"', $m->{where}, join('/', @{ $m->{sqlstates} }), $m->{formats}[0];
	if (!@hits)
	{
		push @failures, "not documented: $what";
	}
	elsif (!grep { my $q = $quoted[$_]; defined $q->{sqlstate} && grep { $_ eq $q->{sqlstate} || $_ eq '*' } @{ $m->{sqlstates} } } @hits)
	{
		push @failures, sprintf 'documented under another SQLSTATE (%s): %s',
		  join(', ', map { "line $quoted[$_]{line}: " . ($quoted[$_]{sqlstate} // 'none') } @hits), $what;
	}
}

# (b) Each quoted message of the document is one the code produces, or one
# of PostgreSQL's.
my @pg_patterns = map { format_pattern($_, 0) } @pg_formats;
my $postgres_quoted = 0;
for my $i (0 .. $#quoted)
{
	next if $used{$i};
	if (grep { $quoted[$i]{text} =~ $_ } @pg_patterns)
	{
		$postgres_quoted++;
		next;
	}
	push @failures, sprintf 'docs/troubleshooting.md:%d: neither idgen nor PostgreSQL raises "%s"',
	  $quoted[$i]{line}, $quoted[$i]{text};
}

if (@failures)
{
	print "$_\n" for @failures;
	printf "messages: %d problems (%d messages in the code, %d quoted in docs/troubleshooting.md)\n",
	  scalar @failures, scalar @messages, scalar @quoted;
	exit 1;
}
printf "messages: all %d messages of the code (%d of src/*/*.c, %d RAISE of the SQL script) have an entry under their SQLSTATE in docs/troubleshooting.md; its %d quoted messages are the code's (%d) or PostgreSQL's (%d)\n",
  scalar @messages, scalar(grep { !$_->{raise} } @messages), scalar(grep { $_->{raise} } @messages),
  scalar @quoted, @quoted - $postgres_quoted, $postgres_quoted;
exit 0;
