#!/usr/bin/env bash
#
# test/citus.sh: Citus built from its release archive for one PostgreSQL,
# kept in a directory of builds, and installed into that PostgreSQL, for
# test/t/049_citus.pl.
#
#   bash test/citus.sh ARCHIVE PG_CONFIG BUILDS
#
# ARCHIVE is an upstream release archive (citus-X.Y.Z.tar.gz, a `git
# archive` of the tag vX.Y.Z, no top-level folder: docs/development.md
# says how to make one).  The build for the PostgreSQL that PG_CONFIG
# names is BUILDS/citus-X.Y.Z-pgNN-DIGEST.tar.gz, DIGEST a digest of the
# archive, that PostgreSQL's version and this script with its patch: made
# when missing (about a minute on 2 vCPUs), then unpacked onto /.  Run as
# root, where the build dependencies are installed (test/run.sh installs
# them on the machine, test/chroot.sh in 18's chroot): make, gcc, patch,
# the server's headers, and the development packages of zstd, lz4, krb5,
# OpenSSL and ICU, and of libcurl where the server was built with it.
#
# The build is Citus's own (configure; make; make install into a staging
# directory), with two choices:
#   - libcurl as the server has it: Citus's statistics code is compiled
#     when pg_config.h defines HAVE_LIBCURL, which Debian's 18 does (for
#     OAuth), so configure must then find libcurl too, or citus.so is left
#     with undefined symbols; elsewhere --without-libcurl.  (The statistics
#     collection itself stays off: nothing defines
#     ENABLE_CITUS_STATISTICS_COLLECTION.)
#   - no JIT bitcode (with_llvm=no): the tests do not JIT Citus's code, and
#     it would double the build.
# One patch, test/citus/have_createdb_privilege.patch, applied only where
# it is needed: Citus 13 defines a static have_createdb_privilege() for
# PostgreSQL before 16, and the server headers of later 15 releases (15.20)
# declare the function too, so the two clash; the patch renames Citus's.
#
set -euo pipefail

usage="usage: citus.sh ARCHIVE PG_CONFIG BUILDS"
[ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
ARCHIVE=$(readlink -f "$1")
PG_CONFIG=$2
BUILDS=$3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATCH=$HERE/citus/have_createdb_privilege.patch

[ -f "$ARCHIVE" ] || { echo "citus.sh: no archive $ARCHIVE" >&2; exit 2; }
[ -x "$PG_CONFIG" ] || { echo "citus.sh: $PG_CONFIG is not executable" >&2; exit 2; }
mkdir -p "$BUILDS"

citus_version=$(basename "$ARCHIVE" .tar.gz)
citus_version=${citus_version#citus-}
pg_version=$("$PG_CONFIG" --version)
pg_major=$(sed 's/^PostgreSQL \([0-9]*\).*/\1/' <<<"$pg_version")
digest=$( { sha256sum <"$ARCHIVE"; echo "$pg_version"; cat "${BASH_SOURCE[0]}" "$PATCH"; } | sha256sum | cut -c1-12)
BUILD_TARBALL=$BUILDS/citus-$citus_version-pg$pg_major-$digest.tar.gz

build()
{
	local src stage start=$SECONDS includedir configure=(--without-libcurl) status=0
	src=$(mktemp -d "${TMPDIR:-/tmp}/citus-src.XXXXXX")
	stage=$(mktemp -d "${TMPDIR:-/tmp}/citus-stage.XXXXXX")
	includedir=$("$PG_CONFIG" --includedir-server)
	echo "Citus $citus_version for $pg_version: built from ${ARCHIVE##*/} (then kept as $BUILD_TARBALL)"
	tar -xzf "$ARCHIVE" -C "$src"
	if [ "$(sed -n 's/^#define PG_VERSION_NUM \([0-9]*\).*/\1/p' "$includedir/pg_config.h")" -lt 160000 ] &&
		grep -q 'have_createdb_privilege' "$includedir/commands/dbcommands.h" &&
		grep -q '^have_createdb_privilege(void)' "$src/src/include/pg_version_compat.h"; then
		echo "the server's headers declare have_createdb_privilege(): ${PATCH#"$HERE"/} applied"
		patch -d "$src" -p1 --forward --no-backup-if-mismatch --quiet <"$PATCH" || status=1
	fi
	grep -q '^#define HAVE_LIBCURL 1' "$includedir/pg_config.h" && configure=()
	[ $status = 0 ] && { (cd "$src" && ./configure "${configure[@]}" PG_CONFIG="$PG_CONFIG") >"$src/build.log" 2>&1 || status=1; }
	[ $status = 0 ] && { make -C "$src" -j"$(nproc)" with_llvm=no >>"$src/build.log" 2>&1 || status=1; }
	[ $status = 0 ] && { make -C "$src" install with_llvm=no DESTDIR="$stage" >>"$src/build.log" 2>&1 || status=1; }
	[ $status = 0 ] && [ -f "$stage$("$PG_CONFIG" --pkglibdir)/citus.so" ] || status=1
	if [ $status = 0 ]; then
		find "$BUILDS" -maxdepth 1 -name "citus-$citus_version-pg$pg_major-*.tar.gz" -delete
		tar -czf "$BUILD_TARBALL.tmp" -C "$stage" usr && mv "$BUILD_TARBALL.tmp" "$BUILD_TARBALL" || status=1
		echo "built in $((SECONDS - start)) s"
	else
		tail -n 30 "$src/build.log" >&2
		echo "citus.sh: could not build Citus $citus_version for $pg_version" >&2
	fi
	rm -rf "$src" "$stage"
	return $status
}

[ -f "$BUILD_TARBALL" ] || build
tar -xzf "$BUILD_TARBALL" -C / --no-overwrite-dir
echo "Citus $citus_version installed for $pg_version, from $BUILD_TARBALL"
