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

# idgen's own Assert()s are compiled in (IDGEN_ASSERTS, see the Makefile),
# so that its invariants are checked under the whole suite; the build tree
# is cleaned at exit, so that the next plain `make install` (a benchmark's)
# builds without them.
log "build with $WARN_FLAGS and idgen's assertions, and install"
make -C "$SRC" -s clean >/dev/null 2>&1
if ! make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" PG_CFLAGS="$WARN_FLAGS" IDGEN_ASSERTS=1 ||
   ! make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" IDGEN_ASSERTS=1 install; then
	echo "run.sh: build or install failed"
	echo "idgen tests: 0 passed, 1 failed"
	exit 1
fi

# A private, writable copy of the tree for the test user.
WORK=$(mktemp -d /tmp/idgen-test.XXXXXX)
trap 'rm -rf "$WORK"; make -C "$SRC" -s clean >/dev/null 2>&1' EXIT
cp -a "$SRC/." "$WORK/src"
[ "$(id -u)" = 0 ] && chown -R "$IDGEN_USER" "$WORK"
chmod 755 "$WORK"

passed=0
failed=0
failures=()
run_suite() {
	local name=$1 target=$2
	log "$name"
	# pg_regress's server log goes to log/postmaster.log, which the next
	# temporary instance overwrites: keep each suite's.
	if as_idgen_user "cd '$WORK/src' && make -s PG_CONFIG='$PG_CONFIG' PG_CFLAGS='$WARN_FLAGS' $target;
			status=\$?; [ -f log/postmaster.log ] && mv log/postmaster.log log/postmaster-$name.log; exit \$status"; then
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

# No test may reach an internal error: every message a user can cause has
# its own SQLSTATE.  The servers log the SQLSTATE of every message
# (log_line_prefix %e in test/*.conf and IdgenTest.pm), and psql shows it in
# the regression outputs that use VERBOSITY verbose.  One XX000 is expected:
# PostgreSQL's own FATAL for a standby that meets idgen's WAL records
# without idgen preloaded, which 015_failover.pl provokes on purpose.
log "no internal error (SQLSTATE XX000) in any test's output or server log"
expected_xx000='resource manager with ID 147 not registered|Include the extension module that implements this resource manager'
internal=$(grep -rnE "(^|[^0-9A-Z])XX000([^0-9A-Z]|$)" "$WORK/src/results" "$WORK/src/output_iso" \
	"$WORK/src/log" "$WORK/src/tmp_check" 2>/dev/null | grep -vE "$expected_xx000")
logs=$(find "$WORK/src/log" "$WORK/src/tmp_check/log" -name '*.log' 2>/dev/null | wc -l)
if [ -z "$internal" ] && [ "$logs" -gt 0 ]; then
	echo "none, in $logs server and test logs and the regression outputs"
	passed=$((passed + 1))
else
	[ "$logs" -gt 0 ] || echo "no server log found: log_line_prefix or the paths changed"
	printf '%s\n' "$internal" | head -n 40
	failed=$((failed + 1))
	failures+=(internal-errors)
fi

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
