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
# first free port from 55432, export PGHOST and PGPORT, and run make
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

if ! "$BIN/initdb" -D "$DATA" -A trust >"$DIR/initdb.log" 2>&1; then
	cat "$DIR/initdb.log" >&2
	exit 2
fi
cat >>"$DATA/postgresql.conf" <<EOF
# As the README's Installation says:
shared_preload_libraries = 'idgen'
idgen.worker_id = 1
# For the test run only: the SQLSTATE of every message, and no TCP.
log_line_prefix = '%m [%p] %e '
listen_addresses = ''
unix_socket_directories = '$DIR'
EOF
started=
for port in $(seq 55432 55481); do
	if "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -o "-p $port" -w -t 60 start >/dev/null 2>&1; then
		started=$port
		break
	fi
done
if [ -z "$started" ]; then
	echo "installcheck.sh: no server started on ports 55432 to 55481" >&2
	tail -n 20 "$LOG" >&2
	exit 2
fi
export PGHOST=$DIR PGPORT=$started
unset PGDATABASE PGSERVICE PGOPTIONS

status=0
for run in $(seq 1 "$RUNS"); do
	echo "make installcheck, run $run of $RUNS, against the server on port $PGPORT"
	make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" installcheck || { status=1; break; }
done
exit $status
