#!/usr/bin/perl
#
# test/docs.pl: the documentation's links resolve and its examples run.
#
#   perl test/docs.pl
#
# Over README.md and docs/*.md:
#
#   links    every relative link names a file or directory of the
#            repository, and every #anchor (in the same file or another
#            .md file) names a heading there, by GitHub's rule: the
#            heading's text in lower case, its spaces as hyphens, every
#            character other than a letter, a digit, a hyphen or an
#            underscore dropped, and -1, -2, ... added to repeats.
#            Headings and links inside code blocks do not count.
#   markers  every ```sql block is marked on the line before it with
#            "<!-- test: NAME -->", and some test runs each marked block:
#            test/t/027_docs_sql.pl those of docs/ named example/...,
#            test/newcomer.pl those of the README named newcomer/..., any
#            other TAP test those it names in a doc_block('FILE', 'NAME')
#            call with the file that holds the block.  So no SQL a reader
#            may paste goes unrun, and moving a block to another file
#            cannot drop its check.  (Client code blocks are
#            test/clients.sh's.)
#
# Prints each fault and a count; exits 1 if there is any.
#
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use Cwd qw(realpath);

my $root = File::Spec->rel2abs(dirname(__FILE__) . '/..');
chdir $root or die "cannot enter $root: $!";

my @files = ('README.md', sort glob('docs/*.md'));
my (%text, %anchors);
for my $file (@files)
{
	open my $fh, '<:encoding(UTF-8)', $file or die "cannot read $file: $!";
	local $/;
	$text{$file} = <$fh>;
}

# The anchors of a Markdown file, as GitHub makes them from its headings.
sub anchors_of
{
	my ($file) = @_;
	return $anchors{$file} if $anchors{$file};
	my (%seen, %set);
	for my $heading (headings($text{$file} // slurp($file)))
	{
		my $slug = lc $heading;
		$slug =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;    # a link: its text
		$slug =~ s/[^\p{L}\p{N}\s_-]//g;
		$slug =~ s/ /-/g;
		my $n = $seen{$slug}++;
		$set{ $n ? "$slug-$n" : $slug } = 1;
	}
	return $anchors{$file} = \%set;
}

sub slurp
{
	my ($file) = @_;
	open my $fh, '<:encoding(UTF-8)', $file or return '';
	local $/;
	return <$fh>;
}

# The lines of a Markdown text outside its fenced code blocks.
sub prose_lines
{
	my ($text) = @_;
	my ($fence, @lines);
	for my $line (split /\n/, $text)
	{
		if ($line =~ /^\s*(```+|~~~+)/)
		{
			$fence = defined $fence ? undef : $1;
			next;
		}
		push @lines, $line unless defined $fence;
	}
	return @lines;
}

sub headings
{
	my ($text) = @_;
	return map { /^#{1,6}\s+(.*?)\s*#*\s*$/ ? ($1) : () } prose_lines($text);
}

my @faults;
my ($links, $blocks) = (0, 0);

# Links.
for my $file (@files)
{
	for my $line (prose_lines($text{$file}))
	{
		$line =~ s/`[^`]*`//g;    # code spans are not links
		while ($line =~ /\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)
		{
			my $target = $1;
			next if $target =~ m{^[a-z][a-z0-9+.-]*:}i;    # http:, mailto:, ...
			$links++;
			my ($path, $anchor) = $target =~ /^([^#]*)(?:#(.*))?$/;
			my $dest = $file;
			if ($path ne '')
			{
				my $abs = File::Spec->rel2abs($path, dirname($file));
				if (!-e $abs)
				{
					push @faults, "$file: link to $target: no such file";
					next;
				}
				$dest = File::Spec->abs2rel(realpath($abs), $root);
			}
			next unless defined $anchor;
			if ($dest !~ /\.md$/ || !-f $dest)
			{
				push @faults, "$file: link to $target: an anchor into something not Markdown";
				next;
			}
			push @faults, "$file: link to $target: no heading of $dest makes #$anchor"
			  unless anchors_of($dest)->{$anchor};
		}
	}
}

# Markers.
my $tests = join "\n", map { slurp($_) } glob('test/t/*.pl');
my %runner = map { $_ => 1 } slurp('test/t/027_docs_sql.pl') =~ /^\t'([a-z0-9-]+)' => \{/mg;
my %newcomer = map { $_ => 1 } slurp('test/newcomer.pl') =~ /^\t'([a-z0-9-]+)' => \{/mg;
for my $file (@files)
{
	my @lines = split /\n/, $text{$file};
	my $fence;
	for my $i (0 .. $#lines)
	{
		if ($lines[$i] =~ /^\s*(```+|~~~+)(\S*)/)
		{
			if (defined $fence) { $fence = undef; next; }
			$fence = $1;
			next unless $2 eq 'sql';
			$blocks++;
			my $where = "$file:" . ($i + 1);
			my ($name) = $i > 0 && $lines[ $i - 1 ] =~ /^<!-- test: ([a-z0-9\/-]+) -->$/;
			if (!defined $name)
			{
				push @faults, "$where: a SQL block with no \"<!-- test: NAME -->\" line before it";
			}
			elsif ($name =~ m{^example/(.+)$})
			{
				push @faults, "$where: block $name: test/t/027_docs_sql.pl runs the blocks of docs/ only"
				  if $file eq 'README.md';
				push @faults, "$where: block $name: test/t/027_docs_sql.pl does not run it"
				  unless $runner{$1};
			}
			elsif ($name =~ m{^newcomer/(.+)$})
			{
				push @faults, "$where: block $name: test/newcomer.pl runs the README's blocks only"
				  unless $file eq 'README.md';
				push @faults, "$where: block $name: test/newcomer.pl does not run it"
				  unless $newcomer{$1};
			}
			elsif ($tests !~ /doc_block\('\Q$file\E', '\Q$name\E'\)/)
			{
				push @faults, "$where: block $name: no test runs doc_block('$file', '$name')";
			}
		}
	}
}

print "$_\n" for @faults;
printf "docs: %d links in %d files, %d SQL blocks: %s\n", $links, scalar @files, $blocks,
  @faults ? scalar(@faults) . ' faults' : 'all resolve, all marked and run';
exit(@faults ? 1 : 0);
