#!/usr/bin/env bash
#
# test/package.sh: build the Debian package postgresql-VERSION-idgen from
# this tree as its users build it, with the tests of the build, install it,
# and run its autopkgtest.
#
#   bash test/package.sh VERSION RESULTS
#
# Run as root in a clean chroot of test/chroot.sh (chroot.sh --clean: a
# minimal Debian and the package's Build-Depends, nothing of idgen), as
# test/run.sh does for 17, 18 and 19 (15's package is the one
# test/newcomer.sh builds as the README says, as root from /root).  RESULTS is a directory where the
# packages go: the .deb, its -dbgsym, the .changes and the .buildinfo.
#
#   build        dpkg-buildpackage -b -us -uc, with the tests of the build
#                (pg_buildext installcheck against the files just installed
#                into debian/), for VERSION only (PG_SUPPORTED_VERSIONS;
#                debian/control is made again for it from
#                debian/control.in), as a user from a clone in their home,
#                as Debian's builders build.  The log must show the tests
#                ran and passed.  IDGEN_ASSERTS=1 in the environment reaches the
#                Makefile: the package then has idgen's assertions.
#   install      apt-get install ./postgresql-VERSION-idgen_*.deb
#   autopkgtest  debian/tests/installcheck, as autopkgtest runs it: as a
#                user, from a copy of the source, `pg_buildext
#                installcheck` of the installed package in a pg_virtualenv
#                cluster that preloads idgen.
#   remove       apt-get remove, with four clusters of VERSION made: the
#                package's prerm warns of the one whose postgresql.conf
#                preloads idgen and of the one whose postgresql.auto.conf
#                does, and not of one that preloads nothing nor of one
#                whose postgresql.auto.conf takes idgen out again.
#
# test/deb.sh then checks the packages (lintian, their files, their links)
# and installs them where the suites run.  It prints each step's time and
# exits non-zero at the first failure.
#
set -uo pipefail

VERSION=${1:?usage: package.sh VERSION RESULTS}
RESULTS=${2:?usage: package.sh VERSION RESULTS}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"
PKG=postgresql-$VERSION-idgen
BUILDER=idgen-builder

log() { printf '\n=== %s\n' "$*"; }
fail() { echo "package.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run it as root: it installs the package"
[ -x "/usr/lib/postgresql/$VERSION/bin/pg_config" ] || fail "no PostgreSQL $VERSION here"
mkdir -p "$RESULTS" || fail "cannot make $RESULTS"
# A user of one's own, with a home, as on a developer's machine.
id "$BUILDER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$BUILDER" || exit 1
as_builder() { su "$BUILDER" -s /bin/bash -c "$1"; }

# A clone's files: the tree without what git ignores or keeps.
copy_tree() # DIR OWNER
{
	mkdir -p "$1"
	tar -c -C "$SRC" --exclude=.git . | tar -x -C "$1"
	make -C "$1" -s clean PG_CONFIG="/usr/lib/postgresql/$VERSION/bin/pg_config" >/dev/null 2>&1
	chown -R "$2" "$1"
}

home=/home/$BUILDER
tree=$home/idgen
rm -rf "$tree"
copy_tree "$tree" "$BUILDER"

with_asserts=", with idgen's assertions"
log "$PKG: build (dpkg-buildpackage -b -us -uc, with its tests, as $BUILDER, from its home${IDGEN_ASSERTS:+$with_asserts})"
start=$SECONDS
if ! as_builder "cd '$tree' && PG_SUPPORTED_VERSIONS=$VERSION PG_UPDATECONTROL=yes ${IDGEN_ASSERTS:+IDGEN_ASSERTS=1} \
		dpkg-buildpackage -b -us -uc" >"$RESULTS/build.log" 2>&1; then
	tail -n 60 "$RESULTS/build.log"
	fail "dpkg-buildpackage failed (its log: build.log)"
fi
idgen_build_tests_passed "$RESULTS/build.log" || fail "the build's tests did not pass"
grep -E 'warning:' "$RESULTS/build.log" | sort -u
for f in "$home"/"${PKG}"_*.deb "$home"/"${PKG}"-dbgsym_*.deb "$home"/idgen_*.changes "$home"/idgen_*.buildinfo; do
	[ -f "$f" ] || fail "no $f after the build: $(ls "$home")"
	cp "$f" "$RESULTS/"
done
deb=$(find "$RESULTS" -maxdepth 1 -name "${PKG}_*.deb")
echo "${deb##*/}: $(stat -c %s "$deb") bytes, in $((SECONDS - start)) s"

log "$PKG: install"
start=$SECONDS
apt-get install -y -qq --no-install-recommends "$deb" >"$RESULTS/install.log" 2>&1 ||
	{ cat "$RESULTS/install.log"; fail "apt-get install $deb failed"; }
echo "installed $(dpkg-query -W -f '${Package} ${Version}' "$PKG"), in $((SECONDS - start)) s"

# The package's own test, against what was just installed.
log "$PKG: autopkgtest (debian/tests/installcheck)"
start=$SECONDS
work=$(mktemp -d /tmp/idgen-autopkgtest.XXXXXX)
chmod 755 "$work"
copy_tree "$work/src" "$BUILDER"
if ! as_builder "cd '$work/src' && PG_SUPPORTED_VERSIONS=$VERSION sh debian/tests/installcheck" \
		>"$RESULTS/autopkgtest.log" 2>&1; then
	tail -n 60 "$RESULTS/autopkgtest.log"
	fail "debian/tests/installcheck failed"
fi
rm -rf "$work"
grep -E 'All [0-9]+ tests passed' "$RESULTS/autopkgtest.log"
echo "pg_buildext installcheck of the installed $PKG passed, in $((SECONDS - start)) s"

# Removal: the prerm's warning, for the clusters that preload idgen only.
log "$PKG: remove (the warning of the clusters that still preload idgen)"
start=$SECONDS
for c in conf auto plain undone; do
	pg_createcluster "$VERSION" "$c" >/dev/null 2>&1 || fail "pg_createcluster $VERSION $c failed"
done
conf() { echo "/etc/postgresql/$VERSION/$1/postgresql.conf"; }
auto() { echo "/var/lib/postgresql/$VERSION/$1/postgresql.auto.conf"; }
echo "shared_preload_libraries = 'pg_stat_statements, idgen'	# idgen's state" >>"$(conf conf)"
echo "Shared_Preload_Libraries = '\$libdir/idgen'" >>"$(auto auto)"
echo "#shared_preload_libraries = 'idgen'" >>"$(conf plain)"
echo "shared_preload_libraries = 'idgen'" >>"$(conf undone)"
echo "shared_preload_libraries = 'pg_stat_statements'" >>"$(auto undone)"
apt-get remove -y -qq "$PKG" >"$RESULTS/remove.log" 2>&1 || { cat "$RESULTS/remove.log"; fail "apt-get remove $PKG failed"; }
! dpkg -s "$PKG" 2>/dev/null | grep -q '^Status: install ok installed' || fail "$PKG is still installed"
grep "warning: cluster" "$RESULTS/remove.log"
warned=$(grep -o "warning: cluster $VERSION/[a-z]*" "$RESULTS/remove.log" | sed 's/.*\///' | sort | tr '\n' ' ')
[ "$warned" = "auto conf " ] || fail "the prerm warned of the clusters [$warned], not of [auto conf] (its log: remove.log)"
for c in conf auto plain undone; do
	pg_dropcluster "$VERSION" "$c" >/dev/null 2>&1
done
echo "removed; the warning named the clusters auto and conf only, in $((SECONDS - start)) s"
