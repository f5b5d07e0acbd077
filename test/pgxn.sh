#!/usr/bin/env bash
#
# test/pgxn.sh: the PGXN archive.
#
#   bash test/pgxn.sh
#
# Builds the archive with `make dist` (idgen-VERSION.zip, git archive of
# HEAD), then:
#
#   1. checks it against the PGXN Meta Spec (https://pgxn.org/spec/, meta-spec
#      1.0.0): every file under one directory idgen-VERSION/, META.json at
#      its top, the required fields (name, version, abstract, maintainer,
#      license, provides with each extension's file and version, meta-spec)
#      with the values the spec allows (versions semantic, a known licence,
#      release_status, prereqs' phases and relations, no_index), every file
#      it names present, and the version idgen.control's default_version;
#   2. installs it with Debian's pgxnclient (`pgxn install ./idgen-VERSION.zip`:
#      unpack, make, make install) into the installation PG_CONFIG names;
#   3. starts a throwaway server preloading idgen, runs `pgxn load` (CREATE
#      EXTENSION) from the archive and generates an ID.
#
# Run as root it installs the packages it needs, installs idgen into that
# installation and runs the server as "postgres"; as another user it
# assumes all that and that it may install there.  Exit status 0 when
# every check passed; about 40 s, most of it the build.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev make gcc git unzip pgxnclient)
PORT=${PGXN_PORT:-55475}

# ---------------------------------------------------------------------------
# The Meta Spec check: perl, on the archive ZIP named VERSION; with META,
# that file is read in place of the archive's META.json.
validate() # ZIP VERSION [META]
{
	perl -MJSON::PP -e '
use strict;
use warnings;
my ($zip, $control_version, $meta) = @ARGV;
my @errors;
sub err { push @errors, join("", @_) }

my @files = map { chomp; $_ } `unzip -Z1 \Q$zip\E`;
$? == 0 or die "pgxn: cannot list $zip\n";
my ($top) = $files[0] =~ m{^([^/]+)/};
$top //= "";
my @outside = grep { !m{^\Q$top\E/} } @files;
err("not every file is under one directory $top/: @outside[0 .. ($#outside < 2 ? $#outside : 2)]") if @outside;
my %in = map { s{^\Q$top\E/}{}r => 1 } @files;

my $json = $meta ? `cat \Q$meta\E` : `unzip -p \Q$zip\E \Q$top\E/META.json`;
$? == 0 && length $json or die "pgxn: no $top/META.json in $zip\n";
my $m = eval { JSON::PP->new->decode($json) } or die "pgxn: META.json is not JSON: $@";

# Meta Spec 1.0.0: a semantic version (SemVer 1.0.0, as PGXN reads it).
my $semver = qr/^(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-?[a-zA-Z][a-zA-Z0-9-]*)?$/;
my $str = sub { defined $_[0] && !ref $_[0] && length $_[0] };
my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2 bsd
	freebsd gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit mozilla_1_0 mozilla_1_1
	openssl perl_5 postgresql qpl_1_0 ssleay sun zlib open_source restricted unrestricted unknown);

for my $f (qw(name version abstract maintainer license provides meta-spec)) {
	err("required field \"$f\" is missing") unless exists $m->{$f};
}
err("name must be a string of 2 or more characters without spaces, / or \\\\")
	unless $str->($m->{name}) && $m->{name} =~ m{^[^\s/\\\\]{2,}$};
err("version \"", $m->{version} // "", "\" is not a semantic version")
	unless $str->($m->{version}) && $m->{version} =~ $semver;
err("abstract must be a non-empty string") unless $str->($m->{abstract});
my $mt = $m->{maintainer};
err("maintainer must be a string or a non-empty list of strings")
	unless $str->($mt) || (ref $mt eq "ARRAY" && @$mt && !grep { !$str->($_) } @$mt);
my $l = $m->{license};
err("license \"", $l // "", "\" is not one the spec names")
	unless ($str->($l) && $licenses{$l}) || (ref $l eq "ARRAY" && @$l && !grep { !$licenses{$_} } @$l)
	|| (ref $l eq "HASH" && %$l);
err("meta-spec must be an object whose version is 1.0.0")
	unless ref $m->{"meta-spec"} eq "HASH" && ($m->{"meta-spec"}{version} // "") eq "1.0.0";
if (ref $m->{provides} eq "HASH" && %{ $m->{provides} }) {
	for my $x (sort keys %{ $m->{provides} }) {
		my $p = $m->{provides}{$x};
		if (ref $p ne "HASH") { err("provides.$x must be an object"); next }
		err("provides.$x.file is required") unless $str->($p->{file});
		err("provides.$x.version \"", $p->{version} // "", "\" is not a semantic version")
			unless $str->($p->{version}) && $p->{version} =~ $semver;
		for my $k (qw(file docfile)) {
			err("provides.$x.$k names $p->{$k}, which is not in the archive")
				if $str->($p->{$k}) && !$in{ $p->{$k} };
		}
		for my $k (grep { !/^(?:file|version|abstract|docfile|x_.*|X_.*)$/ } keys %$p) {
			err("provides.$x has a field the spec does not define: $k");
		}
	}
} else {
	err("provides must be an object naming at least one extension");
}
if (exists $m->{release_status}) {
	err("release_status must be stable, testing or unstable")
		unless ($m->{release_status} // "") =~ /^(?:stable|testing|unstable)$/;
	err("a stable release has no pre-release version")
		if ($m->{release_status} // "") eq "stable" && ($m->{version} // "") =~ /[a-zA-Z]/;
}
if (exists $m->{prereqs}) {
	my $pr = $m->{prereqs};
	if (ref $pr ne "HASH") { err("prereqs must be an object") }
	else {
		for my $phase (sort keys %$pr) {
			err("prereqs has an unknown phase $phase")
				unless $phase =~ /^(?:configure|build|test|runtime|develop)$/;
			for my $rel (sort keys %{ $pr->{$phase} }) {
				err("prereqs.$phase has an unknown relationship $rel")
					unless $rel =~ /^(?:requires|recommends|suggests|conflicts)$/;
				while (my ($n, $v) = each %{ $pr->{$phase}{$rel} }) {
					err("prereqs.$phase.$rel.$n: \"$v\" is not 0 or a version (range)")
						unless "$v" eq "0" || "$v" =~ /^(?:(?:[<>]=?|==|!=)\s*)?[0-9]+(?:\.[0-9]+){0,2}[a-zA-Z0-9-]*(?:\s*,\s*(?:[<>]=?|==|!=)\s*[0-9][^,]*)*$/;
				}
			}
		}
	}
}
if (exists $m->{no_index}) {
	my $ni = $m->{no_index};
	for my $k (ref $ni eq "HASH" ? sort keys %$ni : ()) {
		err("no_index has an unknown key $k") unless $k =~ /^(?:file|directory)$/;
		my @v = ref $ni->{$k} eq "ARRAY" ? @{ $ni->{$k} } : ($ni->{$k});
		for my $p (@v) {
			err("no_index.$k names $p, which is not in the archive")
				unless $k eq "file" ? $in{$p} : grep { m{^\Q$p\E/} } keys %in;
		}
	}
	err("no_index must be an object") unless ref $ni eq "HASH";
}
err("tags must be a list of strings")
	if exists $m->{tags} && !(ref $m->{tags} eq "ARRAY" && !grep { !$str->($_) } @{ $m->{tags} });

# idgen'"'"'s own: the archive is the release idgen.control names.
my $v = $m->{version} // "";
err("the top directory is $top, not $m->{name}-$v") unless $top eq ($m->{name} // "") . "-$v";
err("META.json says $v, idgen.control $control_version") unless $v eq $control_version;
for my $f ("idgen.control", "Makefile", "sql/idgen--$v.sql", "META.json") {
	err("$f is not in the archive") unless $in{$f};
}
err(".ci/ is in the archive") if grep { m{^\.ci/} } keys %in;

if (@errors) { print "FAILED: $_\n" for @errors; exit 1 }
printf "ok: %s: %d files under %s/, META.json valid for PGXN Meta Spec 1.0.0 (%s %s, %s)\n",
	$zip =~ s{.*/}{}r, scalar @files, $top, $m->{name}, $v, $m->{release_status} // "stable";
' "$@"
}

# The check must catch what it is for: each of these changes to the
# archive's META.json must fail it.
validate_self_check() # ZIP VERSION
{
	local top=${1##*/} change failures=0
	top=${top%.zip}
	for change in 'delete $m->{license}' '$m->{version} = "1.0"' \
		'$m->{provides}{idgen}{file} = "sql/idgen--9.9.9.sql"' '$m->{release_status} = "final"' \
		'$m->{prereqs}{runtime}{needs} = {}' '$m->{"meta-spec"}{version} = "2.0.0"'; do
		unzip -p "$1" "$top/META.json" |
			perl -MJSON::PP -0777 -ne 'my $m = decode_json($_); '"$change"'; print encode_json($m)' \
			>"$WORK/META.changed.json"
		if validate "$1" "$2" "$WORK/META.changed.json" >"$WORK/changed.out"; then
			echo "FAILED: self-check: META.json with '$change' passed the check"
			failures=$((failures + 1))
		fi
	done
	[ $failures = 0 ] && echo "ok: self-check: six broken META.json each fail the check"
	[ $failures = 0 ]
}

# ---------------------------------------------------------------------------
# As root (or whoever starts it): make dist, check it, install it; then
# the server part as the user.
if [ "${1:-}" != --inner ]; then
	# shellcheck source=test/lib.sh
	. "$SRC/test/lib.sh"
	START=$SECONDS
	idgen_prepare_host "${PACKAGES[@]}" || exit 2
	if ! git -C "$SRC" rev-parse --verify -q HEAD >/dev/null; then
		echo "pgxn: $SRC is not a git checkout; make dist archives HEAD" >&2
		exit 2
	fi
	version=$(make -s -C "$SRC" version PG_CONFIG="$PG_CONFIG")
	zip=idgen-$version.zip
	WORK=$(mktemp -d /tmp/idgen-pgxn.XXXXXX)
	# shellcheck disable=SC2064 # WORK is fixed from here on
	trap "rm -rf '$WORK'" EXIT
	rm -f "$SRC/$zip"
	make -s -C "$SRC" dist PG_CONFIG="$PG_CONFIG" && mv "$SRC/$zip" "$WORK/" || exit 2
	cp "$SRC/test/pgxn.sh" "$SRC/test/lib.sh" "$WORK/"

	validate "$WORK/$zip" "$version"
	status=$?
	validate_self_check "$WORK/$zip" "$version" || status=1

	# pgxn install: unpacks the archive into a directory of its own, runs
	# make and make install with the pg_config given (as root, no sudo).
	if (cd "$WORK" && MAKEFLAGS=-j2 pgxn install --nosudo --make make \
		--pg_config "$PG_CONFIG" "./$zip") >"$WORK/install.log" 2>&1; then
		echo "ok: pgxn install ./$zip built and installed it into $("$PG_CONFIG" --bindir | sed 's,/bin$,,')"
	else
		echo "FAILED: pgxn install ./$zip"
		tail -n 20 "$WORK/install.log"
		status=1
	fi
	for f in "$("$PG_CONFIG" --sharedir)/extension/idgen--$version.sql" \
		"$("$PG_CONFIG" --pkglibdir)/idgen.so"; do
		[ "$f" -nt "$WORK/$zip" ] || { echo "FAILED: pgxn install did not install $f"; status=1; }
	done

	if [ $status = 0 ]; then
		[ "$(id -u)" = 0 ] && chown -R "$IDGEN_USER" "$WORK"
		as_idgen_user "PG_CONFIG='$PG_CONFIG' PGXN_PORT='$PORT' \
			bash '$WORK/pgxn.sh' --inner '$WORK' '$zip' '$version'"
		status=$?
		[ $status -ne 0 ] && [ -f "$WORK/server.log" ] && tail -n 20 "$WORK/server.log"
	fi
	echo "pgxn: $((SECONDS - START)) s"
	exit $status
fi

# ---------------------------------------------------------------------------
# As the server's user, in the work directory $2: pgxn load on a
# throwaway server that preloads the installed library.
W=$2 zip=$3 version=$4
cd "$W" || exit 2
BIN=$("$PG_CONFIG" --bindir)
# shellcheck source=test/lib.sh
. "$W/lib.sh"
port=$(idgen_start_cluster "$W/data" "$W/server.log" "idgen.worker_id = 1" "$PORT") || exit 2
trap '"$BIN/pg_ctl" -D "$W/data" -m immediate stop >/dev/null 2>&1' EXIT
psql=("$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$W" -p "$port" -U postgres -d postgres)
"${psql[@]}" -c "CREATE SCHEMA idgen" || exit 1
if ! pgxn load --yes --pg_config "$PG_CONFIG" -h "$W" -p "$port" -U postgres -d postgres \
	--schema idgen "./$zip" >"$W/load.log" 2>&1; then
	echo "FAILED: pgxn load ./$zip"
	cat "$W/load.log"
	exit 1
fi
got=$("${psql[@]}" -c "SELECT extversion || ' ' || (idgen.idgen_snowflake() > 0)
	FROM pg_extension WHERE extname = 'idgen'")
if [ "$got" = "$version true" ]; then
	echo "ok: pgxn load ./$zip made idgen $version in a preloaded server, which generates"
else
	echo "FAILED: after pgxn load, extension version and a Snowflake ID: '$got'"
	cat "$W/load.log"
	exit 1
fi
