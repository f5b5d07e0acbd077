#!/usr/bin/env bash
#
# test/suite.sh: idgen's suites against one PostgreSQL installation.
#
#   PG_CONFIG=/usr/lib/postgresql/18/bin/pg_config bash test/suite.sh
#
# test/run.sh calls it once per version (on the machine itself for 15,
# inside a chroot for the others); it installs nothing but idgen.  It builds
# with -Werror and idgen's assertions (a build check: the objects are
# checked by test/layers.sh, not installed), installs idgen, then runs every
# suite as an unprivileged user (PostgreSQL refuses to run as root) on a
# private copy of the tree.  As root against a system PostgreSQL
# (PG_CONFIG=/usr/lib/postgresql/N/bin/pg_config), with IDGEN_PACKAGES
# naming a directory where test/package.sh left the package it built for N
# (in IDGEN_PACKAGES/N), idgen is installed from that package (test/deb.sh:
# lintian, its files, apt-get install), so the suites test the package's
# files; IDGEN_ASSERTS=1 in the environment says the package has idgen's
# assertions (test/run.sh builds 17's so).  Otherwise (no package, a
# PostgreSQL of one's own, or as another user) it runs `make install`, with
# the assertions.
#
#   build          the -Werror build with idgen's assertions
#   layers         test/layers.sh on its objects
#   shape          test/shape.sh: no file or function over its size, no
#                  version test outside src/compat.h
#   package        test/deb.sh (or `make install`)
#   installcheck   make installcheck (pg_regress, then the isolation specs of
#                  specs/) against a running server configured as the
#                  README says, twice on the same server
#                  (test/installcheck.sh)
#   check-instance pg_regress on a temporary instance with its own settings
#                  (test/idgen.conf: datacenter 3, worker 7, prepared
#                  transactions)
#   check-genes    pg_regress on a temporary instance with 4 gene bits
#   tap            TAP tests (test/t/*.pl): concurrency, layouts, restart,
#                  not preloaded, clock steps under libfaketime, the keeper
#                  and crashes, per-key sequences, the registry, failover,
#                  and the libpq stress client; with IDGEN_SHORT_DUTIES=1
#                  in the environment, every test cluster starts with
#                  test/short_duties.conf (purges and sequencer idle exits
#                  every second, through TEMP_CONFIG)
#   internal-errors  no SQLSTATE XX000 in any output or server log
#   horizon-tmp    no server log names idgen.horizon.tmp (a file renamed
#                  under the startup process's fsync of the data directory)
#
# Its last line is "PostgreSQL <version>: N passed, M failed"; it exits
# non-zero if anything failed.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# PostgreSQL's own headers trip -Wunused-parameter, so -Wextra is used
# without it (as in PostgreSQL's own builds, which do not use -Wextra).
WARN_FLAGS="-Wextra -Wno-unused-parameter -Werror"
PG_VERSION=$("$PG_CONFIG" --version | sed 's/^PostgreSQL //; s/ .*//')

log() { printf '\n=== %s\n' "$*"; }

# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"
idgen_prepare_host || exit 2

passed=0
failed=0
failures=()
summary()
{
	[ ${#failures[@]} -gt 0 ] && echo "PostgreSQL $PG_VERSION failed suites: ${failures[*]}"
	echo "PostgreSQL $PG_VERSION: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# The build check: no warning with $WARN_FLAGS, idgen's own Assert()s
# compiled in (IDGEN_ASSERTS, see the Makefile).  The build tree is cleaned
# at exit, so that the next plain `make install` (a benchmark's) builds
# without them.
log "PostgreSQL $PG_VERSION: build with $WARN_FLAGS and idgen's assertions"
make -C "$SRC" -s clean >/dev/null 2>&1
if ! make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" PG_CFLAGS="$WARN_FLAGS" IDGEN_ASSERTS=1; then
	echo "suite.sh: build failed"
	failed=1
	failures+=(build)
	summary
	exit 1
fi

# The structure of src/: its layers (src/layers), on the objects just
# built: no file uses a higher layer's symbols or SQL functions, no files
# use each other in a cycle; and its shape: no file or function over the
# size docs/development.md allows, no version test outside src/compat.h.
for check in layers shape; do
	log "PostgreSQL $PG_VERSION: the $check of src/ (test/$check.sh)"
	if bash "$SRC/test/$check.sh" "$SRC"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$check")
	fi
done

# What the suites test: the Debian package test/package.sh built for this
# major, in IDGEN_PACKAGES/MAJOR, checked and installed into the system's
# PostgreSQL (test/deb.sh), when IDGEN_PACKAGES is set, this is a system
# PostgreSQL and we are root; else `make install` of the build with the
# assertions.
PG_MAJOR=$("$PG_CONFIG" --version | sed 's/^PostgreSQL //; s/[^0-9].*//')
if [ -n "${IDGEN_PACKAGES:-}" ] && [ "$(id -u)" = 0 ] &&
   [ "$PG_CONFIG" = "/usr/lib/postgresql/$PG_MAJOR/bin/pg_config" ]; then
	log "PostgreSQL $PG_VERSION: the package postgresql-$PG_MAJOR-idgen (test/deb.sh)"
	bash "$SRC/test/deb.sh" "$PG_MAJOR" "$IDGEN_PACKAGES/$PG_MAJOR"
	installed=$?
else
	log "PostgreSQL $PG_VERSION: make install, with idgen's assertions"
	make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" IDGEN_ASSERTS=1 install
	installed=$?
fi
if [ $installed -ne 0 ]; then
	echo "suite.sh: idgen could not be installed"
	failed=$((failed + 1))
	failures+=(package)
	summary
	exit 1
fi
passed=$((passed + 1))

# A private, writable copy of the tree for the test user.
WORK=$(mktemp -d /tmp/idgen-test.XXXXXX)
# Servers a test left running (an interrupted run) are ended first.
trap 'pkill -KILL -f -- "$WORK/" 2>/dev/null; rm -rf "$WORK"; make -C "$SRC" -s clean >/dev/null 2>&1' EXIT
cp -a "$SRC/." "$WORK/src"
[ "$(id -u)" = 0 ] && chown -R "$IDGEN_USER" "$WORK"
chmod 755 "$WORK"

# run_suite NAME 'COMMAND LINE': run it as the test user in the copy.
run_suite() {
	local name=$1 cmd=$2
	log "PostgreSQL $PG_VERSION: $name"
	# pg_regress's server log goes to log/postmaster.log, which the next
	# temporary instance overwrites: keep each suite's.  (The server of
	# test/installcheck.sh logs to log/postmaster-installcheck.log.)
	if as_idgen_user "cd '$WORK/src' && $cmd;
			status=\$?; [ -f log/postmaster.log ] && mv log/postmaster.log log/postmaster-$name.log; exit \$status"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$name")
		for f in "$WORK"/src/regression.diffs "$WORK"/src/output_iso/regression.diffs; do
			[ -f "$f" ] && { echo "--- $f"; head -n 200 "$f"; }
		done
		for f in "$WORK"/src/tmp_check/log/regress_log_*; do
			# Each failed assertion with what the test logged before it
			# (its notes: a client's output, an error), then the end.
			[ -f "$f" ] && grep -q "not ok" "$f" && {
				echo "--- $f: each failure, after the 30 lines before it"
				grep -n -B 30 "^\[[0-9:.]*\]([0-9.]*s) not ok" "$f" | head -n 300
				echo "--- $f: the last 60 lines"
				tail -n 60 "$f"
			}
		done
	fi
}

make_test="make -s PG_CONFIG='$PG_CONFIG' PG_CFLAGS='$WARN_FLAGS'"
run_suite installcheck "PG_CONFIG='$PG_CONFIG' bash test/installcheck.sh 2"
run_suite check-instance "$make_test check-instance"
run_suite check-genes "$make_test check-genes"
tap_env=
[ "${IDGEN_SHORT_DUTIES:-0}" = 1 ] && tap_env="TEMP_CONFIG='$WORK/src/test/short_duties.conf' "
run_suite tap "$tap_env$make_test prove-installcheck"

# No test may reach an internal error: every message a user can cause has
# its own SQLSTATE.  The servers log the SQLSTATE of every message
# (log_line_prefix %e in test/*.conf and IdgenTest.pm), and psql shows it in
# the regression outputs that use VERBOSITY verbose.  Expected, and not
# idgen's: PostgreSQL's own FATAL for a standby that meets idgen's WAL
# records without idgen preloaded, which 015_failover.pl provokes on
# purpose; PostgreSQL's walsender refusing a standby the WAL its primary
# already removed, in 037_takeover_leads.pl, whose standbys are made to
# miss the primary's WAL; pglogical's apply worker when the node it
# replicates from stops, in 036_pglogical.pl; and Citus's, in
# 049_citus.pl: its refusal of a trigger on a distributed table, which it
# raises without a SQLSTATE of its own, and its maintenance daemon losing
# its connections to the nodes the test restarts.
log "PostgreSQL $PG_VERSION: no internal error (SQLSTATE XX000) in any test's output or server log"
expected_xx000='resource manager with ID 147 not registered|Include the extension module that implements this resource manager'
expected_xx000+='|/037_takeover_leads_[a-z0-9_]+\.log:[0-9]+:.* XX000 s_[0-9]+ (ERROR:  requested WAL segment [0-9A-F]+ has already been removed|STATEMENT:  START_REPLICATION )'
expected_xx000+='|/036_pglogical_[a-z0-9_]+\.log:[0-9]+:.* XX000 pglogical apply [0-9:]+ ERROR:  connection to other side has died$'
expected_xx000+='|/049_citus_[a-z0-9_]+\.log:[0-9]+:.* client backend XX000 (ERROR:  triggers are not supported on distributed tables|STATEMENT:  CREATE TRIGGER posts_id )'
expected_xx000+='|/049_citus_[a-z0-9_]+\.log:[0-9]+:.* Citus Maintenance Daemon: [0-9/]+ XX000 '
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

# No server log says a file of idgen's vanished under it: the startup
# process fsyncs every file of the data directory at the start of crash and
# archive recovery, and a rename by the keeper meanwhile made it log
# "could not open file "./idgen.horizon.tmp"" (not an error, but alarming).
log "PostgreSQL $PG_VERSION: no message about idgen.horizon.tmp in any server log"
# One is expected: test/t/008_horizon.pl makes idgen.horizon.tmp a directory
# on purpose, to see the keeper log its failed write and go on.
expected_tmp='/008_horizon_[a-z_]*\.log:[0-9]+:.*could not create file "idgen\.horizon\.tmp": Is a directory$'
vanished=$(grep -rn "idgen\.horizon\.tmp" "$WORK/src/log" "$WORK/src/tmp_check" 2>/dev/null | grep -v "regress_log_" |
	grep -vE "$expected_tmp")
if [ -z "$vanished" ] && [ "$logs" -gt 0 ]; then
	echo "none, in $logs server and test logs"
	passed=$((passed + 1))
else
	printf '%s\n' "$vanished" | head -n 40
	failed=$((failed + 1))
	failures+=(horizon-tmp)
fi

summary
