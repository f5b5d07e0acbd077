#!/usr/bin/env bash
#
# test/installcheck.sh: make installcheck against a running server, as a
# packager's or a user's is: a throwaway one, configured as the README's
# Installation says and nothing more.
#
#   PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config bash test/installcheck.sh [RUNS] [LOGDIR]
#
# As an unprivileged user (PostgreSQL refuses to run as root), in a tree
# where idgen is built and installed: initdb in a temporary directory,
# shared_preload_libraries = 'idgen' and idgen.worker_id = 1 (plus a
# log_line_prefix with the SQLSTATE, for test/suite.sh's scan for internal
# errors, and the Unix socket in that directory, no TCP), start it on the
# first free port from 55432, export PGHOST, PGPORT and PGUSER, and run make
# installcheck RUNS times (2 by default: the second shows that the tests
# need no fresh instance), then stop the server.  Its log is
# LOGDIR/postmaster-installcheck.log (LOGDIR defaults to log/).  Exits
# non-zero if the server did not start or any run failed.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-pg_config}
RUNS=${1:-2}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOGDIR=${2:-$SRC/log}
BIN=$("$PG_CONFIG" --bindir)

DIR=$(mktemp -d /tmp/idgen-installcheck.XXXXXX)
DATA=$DIR/data
LOG=$LOGDIR/postmaster-installcheck.log
mkdir -p "$LOGDIR"
stop() { "$BIN/pg_ctl" -D "$DATA" -m fast stop >/dev/null 2>&1; rm -rf "$DIR"; }
trap stop EXIT
trap 'exit 1' INT TERM HUP

# (idgen_start_cluster: initdb, the settings after its own, and the first
# free port from 55432; its socket in $DIR.  The later lines here win: no
# TCP.)
# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"
settings="# As the README's Installation says:
idgen.worker_id = 1
# For the test run only: the SQLSTATE of every message, and no TCP.
log_line_prefix = '%m [%p] %e '
listen_addresses = ''"
if ! started=$(idgen_start_cluster "$DATA" "$LOG" "$settings" 55432); then
	tail -n 20 "$LOG" >&2
	exit 2
fi
export PGHOST=$DIR PGPORT=$started PGUSER=postgres
unset PGDATABASE PGSERVICE PGOPTIONS

status=0
for run in $(seq 1 "$RUNS"); do
	echo "make installcheck, run $run of $RUNS, against the server on port $PGPORT"
	make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" installcheck || { status=1; break; }
done
exit $status
