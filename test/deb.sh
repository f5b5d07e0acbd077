#!/usr/bin/env bash
#
# test/deb.sh: check the Debian package postgresql-VERSION-idgen that
# test/package.sh built (in a clean chroot, with the tests of the build),
# and install it into the system's PostgreSQL VERSION, which the suites
# then test.
#
#   bash test/deb.sh VERSION DIR
#
# DIR holds what test/package.sh left there: the .deb, its -dbgsym, the
# .changes and the .buildinfo.  Run as root on Debian, in the environment
# whose PostgreSQL the package is for: the machine itself for 15, a chroot
# of test/chroot.sh for the others (test/suite.sh calls it).  It installs
# lintian when missing.
#
#   lintian  on the .changes and the packages: no error; warnings printed.
#   files    the package carries this major's files only: the library, its
#            bitcode, the extension's control file and SQL scripts, its
#            documentation and its lintian overrides.
#   install  apt-get install ./postgresql-VERSION-idgen_*.deb (again if the
#            same version is installed), with its debugging symbols
#            (postgresql-VERSION-idgen-dbgsym, as one installs them to debug
#            a released package: test/t/034_seq_cache_stall.pl and
#            041_seq_open_inval.pl hold a backend at a breakpoint in gdb,
#            which needs them to find and finish a function the compiler
#            inlined); idgen's files not
#            owned by any package in this major's directories (an earlier
#            `make install`'s) are removed first, so that none is tested.
#   links    every relative link of the installed README.md and docs/
#            leads to a file installed beside them.
#   verify   the installed idgen.so, idgen.control and SQL scripts belong
#            to the package and are the files it shipped (dpkg --verify),
#            and idgen.so has idgen's assertions exactly when asked for
#            (IDGEN_ASSERTS=1 in the environment).
#
# It prints each step's time and exits non-zero at the first failure.
#
set -uo pipefail

VERSION=${1:?usage: deb.sh VERSION DIR}
DIR=${2:?usage: deb.sh VERSION DIR}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PKG=postgresql-$VERSION-idgen
PG_CONFIG=/usr/lib/postgresql/$VERSION/bin/pg_config

log() { printf '\n=== %s\n' "$*"; }
fail() { echo "deb.sh: $*" >&2; exit 1; }

# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"
[ "$(id -u)" = 0 ] || fail "run it as root: it installs the package"
[ -x "$PG_CONFIG" ] || fail "no PostgreSQL $VERSION here ($PG_CONFIG is missing)"
idgen_prepare_host lintian || exit 2

WORK=$(mktemp -d /tmp/idgen-deb.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"

deb=$(find "$DIR" -maxdepth 1 -name "${PKG}_*.deb" | head -n 1)
dbgsym=$(find "$DIR" -maxdepth 1 -name "${PKG}-dbgsym_*.deb" | head -n 1)
changes=$(find "$DIR" -maxdepth 1 -name 'idgen_*.changes' | head -n 1)
if [ -z "$deb" ] || [ -z "$dbgsym" ] || [ -z "$changes" ]; then
	fail "no ${PKG}_*.deb, -dbgsym or .changes in $DIR (test/package.sh builds them): $(ls "$DIR" 2>&1)"
fi
with_asserts=", with idgen's assertions"

# lintian runs as the unprivileged user (it warns when run as root), on a
# copy: the files root installs next stay root's.
log "$PKG: lintian"
start=$SECONDS
mkdir "$WORK/lintian"
cp "$DIR"/*.deb "$DIR"/*.changes "$DIR"/*.buildinfo "$WORK/lintian/"
chown -R "$IDGEN_USER" "$WORK/lintian"
as_idgen_user "cd '$WORK/lintian' && lintian --fail-on error '${changes##*/}'" >"$WORK/lintian.log" 2>&1
status=$?
cat "$WORK/lintian.log"
echo "lintian $(lintian --version | sed 's/^Lintian v//'): $(grep -c '^E: ' "$WORK/lintian.log") errors," \
	"$(grep -c '^W: ' "$WORK/lintian.log") warnings, in $((SECONDS - start)) s"
[ $status -eq 0 ] || fail "lintian found errors"

# This major's files only: a package for 15 must not carry 17's.
log "$PKG: its files"
sharedir=$("$PG_CONFIG" --sharedir)
pkglibdir=$("$PG_CONFIG" --pkglibdir)
files=$(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|' | grep -v '/$')
stray=$(printf '%s\n' "$files" | grep -vE "^($pkglibdir/(idgen\.so|bitcode/idgen(\.index\.bc|/.*\.bc))|$sharedir/extension/idgen(\.control|--[0-9.]+(--[0-9.]+)?\.sql)|/usr/share/doc/$PKG/.*|/usr/share/lintian/overrides/$PKG)$")
[ -z "$stray" ] || fail "files that are not PostgreSQL $VERSION's idgen files: $stray"
for f in "$pkglibdir/idgen.so" "$sharedir/extension/idgen.control"; do
	grep -qxF "$f" <<<"$files" || fail "the package lacks $f"
done
dpkg-deb -f "$deb" Depends Breaks
echo "$(wc -l <<<"$files") files, all under $pkglibdir, $sharedir/extension or /usr/share/doc/$PKG, and its lintian overrides"

log "$PKG: install"
start=$SECONDS
# What an earlier `make install` left and no package owns.
for f in "$pkglibdir"/idgen.so "$pkglibdir"/bitcode/idgen.index.bc "$sharedir"/extension/idgen.control \
		"$sharedir"/extension/idgen--*.sql; do
	[ -e "$f" ] || continue
	if ! dpkg -S "$f" >/dev/null 2>&1; then
		echo "removing $f: no package owns it"
		rm -f "$f"
	fi
done
if [ -d "$pkglibdir/bitcode/idgen" ] && ! dpkg -S "$pkglibdir/bitcode/idgen" >/dev/null 2>&1; then
	echo "removing $pkglibdir/bitcode/idgen/: no package owns it"
	rm -rf "$pkglibdir/bitcode/idgen"
fi
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall --no-install-recommends "$deb" "$dbgsym" \
		>"$WORK/install.log" 2>&1; then
	cat "$WORK/install.log"
	fail "apt-get install $deb failed"
fi
echo "installed $(dpkg-query -W -f '${Package} ${Version}' "$PKG"), in $((SECONDS - start)) s"

# What the installed README and docs link to is installed beside them.
log "$PKG: the links of its documentation"
docdir=/usr/share/doc/$PKG
broken=$(cd "$docdir" && find . -name '*.md' -print0 | xargs -0 perl -ne '
	while (/\]\(([^)#\s]+)(?:#[^)]*)?\)/g) {
		my $t = $1;
		next if $t =~ m{^[a-z]+:};
		(my $dir = $ARGV) =~ s{/[^/]*$}{};
		print "$ARGV: $t\n" unless -e "$dir/$t";
	}')
[ -z "$broken" ] || fail "links of $docdir that lead nowhere there: $broken"
echo "every relative link of the $(find "$docdir" -name '*.md' | wc -l) Markdown files in $docdir resolves there"

log "$PKG: the installed files are the package's"
for f in "$pkglibdir/idgen.so" "$sharedir/extension/idgen.control" "$sharedir"/extension/idgen--*.sql; do
	owner=$(dpkg -S "$f" 2>/dev/null | cut -d: -f1)
	[ "$owner" = "$PKG" ] || fail "$f belongs to '${owner:-no package}', not $PKG"
done
changed=$(dpkg --verify "$PKG")
[ -z "$changed" ] || fail "files of $PKG differ from what it shipped: $changed"
# (nm's output is read whole: grep -q ending first would fail the pipeline
# under pipefail.)
symbols=$(nm -D "$pkglibdir/idgen.so")
if grep -q ' U ExceptionalCondition$' <<<"$symbols"; then has_asserts=yes; else has_asserts=; fi
if [ -n "${IDGEN_ASSERTS:-}" ] && [ -z "$has_asserts" ]; then
	fail "IDGEN_ASSERTS is set but the installed idgen.so has no assertions"
elif [ -z "${IDGEN_ASSERTS:-}" ] && [ -n "$has_asserts" ]; then
	fail "the installed idgen.so has assertions, but IDGEN_ASSERTS is not set"
fi
echo "$pkglibdir/idgen.so, idgen.control and $(find "$sharedir/extension" -name 'idgen--*.sql' | wc -l) SQL scripts:" \
	"$PKG's, unchanged (dpkg --verify)${has_asserts:+$with_asserts}"
