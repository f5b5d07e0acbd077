#!/usr/bin/env bash
#
# test/generators.sh: the example Snowflake generators of examples/ (Node.js
# and Python, each with a worker id leased from idgen), run as processes
# against a preloaded server.
#
#   bash test/generators.sh
#
# test/generators/check.py drives each generator through a small driver
# (node/driver.js, python/driver.py: one command a line on stdin) and
# checks, printing "ok: ..." or "not ok: ..." for each:
#
#   - two instances of each language and idgen_snowflake() generating at
#     once: four different worker ids, none the server's own; every ID
#     distinct; each instance's IDs strictly increasing; each app ID
#     decodes to its lease's datacenter and worker and a time of the run,
#     and idgen_snowflake_compose(idgen_snowflake_decode(id)) = id; the
#     leases are held by "name@host:pid" and renewed
#   - a gene out of range is refused; so are a clock-back bound not below
#     idgen.worker_quarantine and a server whose layout is not valid, before
#     any lease is taken
#   - a wall clock stepped back: a short step is waited out (the next ID is
#     greater), a long one refused after the bound
#   - a lease the administrator releases: the next renewal fails and the
#     generator stops at once ("worker lease lost"), and stays stopped;
#     close then says false, also once the purge has deleted the lease's row
#   - renewals held up (the lease rows locked): the generator stops at its
#     local deadline, and a late renewal does not restart it
#   - close, SIGTERM and SIGINT release the lease
#   - an administrator's release of two generators' leases (ttl 60 s; ttl
#     300 s with a horizon reset and a purge) while they generate: the next
#     two generators, leasing among the same two ids, start only after the
#     old leases' expiry plus the quarantine and share no ID with them
#
# The generators reach the server as a LOGIN role granted the lease
# functions as README.md shows.  The Node.js one uses pg at the version
# examples/node/package-lock.json records (npm ci, without install
# scripts); the Python one Debian's python3-psycopg2, with /usr/bin/python3.
# The cluster (datacenter 1, worker 7) listens on a free loopback port from
# GENERATORS_PORT (default 55480); a second one, with a layout that is not
# valid, on the next free one.
#
# Run as root it installs what it needs, builds and installs idgen, and
# runs the cluster and the generators as "postgres"; as another user it
# assumes all that.  Exit status 0 when every check passed.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev make gcc python3-psycopg2)
command -v node >/dev/null && command -v npm >/dev/null || PACKAGES+=(nodejs npm)
PORT=${GENERATORS_PORT:-55480}
PYTHON=/usr/bin/python3

# ---------------------------------------------------------------------------
# As root (or whoever starts it): prepare, then run the rest as the user.
if [ "${1:-}" != --inner ]; then
	# shellcheck source=test/lib.sh
	. "$SRC/test/lib.sh"
	idgen_client_prepare generators "${PACKAGES[@]}" || exit 2
	cp "$SRC/test/generators.sh" "$WORK/"
	cp -R "$SRC/test/generators/." "$WORK/"
	cp -R "$SRC/examples" "$WORK/examples"
	idgen_client_npm generators "$WORK/examples/node" || exit 2
	idgen_client_run generators data.log "GENERATORS_PORT='$PORT' PG_CONFIG='$PG_CONFIG'"
	exit
fi

# ---------------------------------------------------------------------------
# As the cluster's user, in the work directory $2.
W=$2
cd "$W" || exit 2
# shellcheck source=test/lib.sh
. "$W/lib.sh"
BIN=$("$PG_CONFIG" --bindir)
cleanup() {
	local d
	for d in "$W/data" "$W/bad"; do
		[ -f "$d/postmaster.pid" ] && "$BIN/pg_ctl" -D "$d" -m immediate stop >/dev/null 2>&1
	done
}
trap cleanup EXIT

# The application's role, granted leasing as README.md shows.
setup_cluster() # PORT
{
	"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres postgres <<'EOF'
CREATE EXTENSION idgen;
CREATE ROLE id_workers;
GRANT EXECUTE ON FUNCTION idgen_worker_acquire(text, interval, bigint, boolean),
    idgen_worker_renew(bigint, bigint, interval, timestamptz),
    idgen_worker_release(bigint, bigint, timestamptz) TO id_workers;
CREATE ROLE orders_api LOGIN IN ROLE id_workers;
EOF
}

# The checks' server (datacenter 1, worker 7), and one whose layout is not
# valid (the fields add up to 62 bits), which the generators must refuse.
port=$(idgen_start_cluster "$W/data" "$W/data.log" $'idgen.datacenter_id = 1\nidgen.worker_id = 7' "$PORT") || exit 2
bad_port=$(idgen_start_cluster "$W/bad" "$W/bad.log" 'idgen.timestamp_bits = 40' $((port + 1))) || exit 2
if ! setup_cluster "$port" || ! setup_cluster "$bad_port"; then
	echo "generators: could not create the extension and the role" >&2
	exit 2
fi
echo "servers on ports $port and $bad_port (an invalid layout)"
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
export APP_URL=postgresql://orders_api@$PGHOST:$PGPORT/$PGDATABASE
export BAD_LAYOUT_URL=postgresql://orders_api@$PGHOST:$bad_port/$PGDATABASE
export GENERATORS_WORK=$W GENERATOR_JS=$W/examples/node/snowflake.js
export GENERATOR_PY_DIR=$W/examples/python
export PYTHONDONTWRITEBYTECODE=1
echo "pg $(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$W/examples/node/node_modules/pg/package.json")," \
	"psycopg2 $("$PYTHON" -c 'import psycopg2; print(psycopg2.__version__.split()[0])')"

out=$(timeout 480 "$PYTHON" "$W/check.py" 2>&1)
status=$?
printf '%s\n' "$out"
passed=$(grep -c '^ok: ' <<<"$out")
failures=$(grep -c '^not ok: ' <<<"$out")
if [ "$status" -ne 0 ] && [ "$failures" = 0 ]; then
	echo "not ok: check.py exited with status $status"
	failures=1
elif [ "$status" = 0 ] && { [ "$passed" = 0 ] || [ "$failures" != 0 ]; }; then
	echo "not ok: check.py exited with status 0 after $passed checks passed and $failures failed"
	failures=$((failures + 1))
fi
echo "generators: $passed checks passed, $failures failed"
[ "$failures" -eq 0 ]
