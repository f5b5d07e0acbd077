#!/usr/bin/env bash
#
# test/run.sh: the whole idgen test suite, from a fresh clone.
#
#   bash test/run.sh
#
# Run as root on Debian it installs what it needs, builds with -Werror,
# installs, then runs every suite as an unprivileged user (PostgreSQL
# refuses to run as root) on a private copy of the tree:
#
#   metadata       idgen.control, META.json and README.md agree on the version
#   regress        pg_regress on a temporary preloaded instance, then the
#                  isolation specs (specs/) on another
#   regress-genes  pg_regress on a second instance with 4 gene bits
#   tap            TAP tests (test/t/*.pl): concurrency, layouts, restart,
#                  not preloaded, clock steps under libfaketime, the keeper
#                  and crashes, per-key sequences, and the libpq stress client
#   auto-failover  test/auto_failover.sh: pg_auto_failover, a switchover and a
#                  failover under load (about a minute)
#
# Run as another user, it assumes the packages are installed and that it
# may run `make install` (PG_CONFIG may point at a writable installation).
# It ends with one summary line and exits non-zero if anything failed.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev libipc-run-perl faketime make gcc
	postgresql-15-auto-failover)
# PostgreSQL's own headers trip -Wunused-parameter, so -Wextra is used
# without it (as in PostgreSQL's own builds, which do not use -Wextra).
WARN_FLAGS="-Wextra -Wno-unused-parameter -Werror"

log() { printf '\n=== %s\n' "$*"; }

# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"
idgen_prepare_host "${PACKAGES[@]}" || exit 2

log "build with $WARN_FLAGS and install"
make -C "$SRC" -s clean >/dev/null 2>&1
if ! make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" PG_CFLAGS="$WARN_FLAGS" ||
   ! make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" install; then
	echo "run.sh: build or install failed"
	echo "idgen tests: 0 passed, 1 failed"
	exit 1
fi

# A private, writable copy of the tree for the test user.
WORK=$(mktemp -d /tmp/idgen-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cp -a "$SRC/." "$WORK/src"
[ "$(id -u)" = 0 ] && chown -R "$IDGEN_USER" "$WORK"
chmod 755 "$WORK"

passed=0
failed=0
failures=()
run_suite() {
	local name=$1 target=$2
	log "$name"
	if as_idgen_user "cd '$WORK/src' && make -s PG_CONFIG='$PG_CONFIG' PG_CFLAGS='$WARN_FLAGS' $target"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$name")
		for f in "$WORK"/src/regression.diffs; do
			[ -f "$f" ] && { echo "--- $f"; head -n 200 "$f"; }
		done
		for f in "$WORK"/src/tmp_check/log/regress_log_*; do
			[ -f "$f" ] && grep -q "not ok" "$f" && { echo "--- $f"; tail -n 60 "$f"; }
		done
	fi
}

# The version lives in idgen.control; META.json and the README must agree.
log "metadata"
version=$(make -s -C "$SRC" version PG_CONFIG="$PG_CONFIG")
meta_versions=$(perl -MJSON::PP -0777 -ne '$m = decode_json($_);
	print join("\n", sort { $a cmp $b } keys %{{ map { $_ => 1 } $m->{version},
		map { $_->{version} } values %{ $m->{provides} } }}), "\n"' "$SRC/META.json")
if [ -n "$version" ] && [ "$meta_versions" = "$version" ] &&
   [ -f "$SRC/sql/idgen--$version.sql" ] && grep -q "($version)" "$SRC/README.md"; then
	echo "version $version: idgen.control, META.json, README.md and sql/idgen--$version.sql agree"
	passed=$((passed + 1))
else
	echo "version mismatch: control '$version', META.json '$meta_versions', or README.md / sql/idgen--$version.sql"
	failed=$((failed + 1))
	failures+=(metadata)
fi

run_suite regress installcheck
run_suite regress-genes installcheck-genes
run_suite tap prove-installcheck

# pg_auto_failover: a planned and an unplanned failover under load (about
# a minute); it runs its own servers as the test user.
log "auto-failover"
if bash "$SRC/test/auto_failover.sh"; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	failures+=(auto-failover)
fi

echo
[ ${#failures[@]} -gt 0 ] && echo "failed suites: ${failures[*]}"
echo "idgen tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
