# shellcheck shell=bash
# test/bench/lib.sh: sourced by the benchmarks after they set PROG, SRC,
# PG_CONFIG and INSTALL and source args.sh (die, positive).  It checks the
# installation (running `make install` first as root unless INSTALL=0),
# picks the user that runs the server (postgres when root) and as_pg to run
# a command as that user, makes the throwaway cluster's directory DIR with a
# cleanup trap that stops the server and removes it, chooses PORT, and
# defines PSQL and sql, section, median, fmt_int, print_machine,
# init_cluster, start_cluster and create_bench_ms.

[ -x "$PG_CONFIG" ] || command -v "$PG_CONFIG" >/dev/null || die "no pg_config at $PG_CONFIG"
BINDIR=$("$PG_CONFIG" --bindir)
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
SHAREDIR=$("$PG_CONFIG" --sharedir)

if [ "$(id -u)" = 0 ]; then
	RUN_USER=postgres
	id "$RUN_USER" >/dev/null 2>&1 || die "user $RUN_USER does not exist"
	# Run one command, given as words, as the postgres user.
	as_pg() { su "$RUN_USER" -s /bin/bash -c "$(printf '%q ' "$@")"; }
	if [ "$INSTALL" != 0 ]; then
		make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" install >/dev/null ||
			die "make install failed"
	fi
else
	RUN_USER=$(id -un)
	as_pg() { "$@"; }
fi
if [ ! -f "$PKGLIBDIR/idgen.so" ] || [ ! -f "$SHAREDIR/extension/idgen.control" ]; then
	die "idgen is not installed for $PG_CONFIG (run make install)"
fi
for b in initdb pg_ctl psql pgbench postgres; do
	[ -x "$BINDIR/$b" ] || die "missing $BINDIR/$b"
done

# --- throwaway cluster --------------------------------------------------------

DIR=$(mktemp -d "${TMPDIR:-/tmp}/idgen-${PROG%.sh}.XXXXXX")
PGDATA_DIR=$DIR/data
LOG=$DIR/server.log
STARTED=0

cleanup() {
	local rc=$?
	set +e
	if [ "$STARTED" = 1 ]; then
		as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -m fast -w stop >/dev/null 2>&1
	fi
	if [ "$rc" != 0 ] && [ -f "$LOG" ]; then
		echo "$PROG: failed (exit $rc); last lines of the server log:" >&2
		tail -n 30 "$LOG" >&2
	fi
	rm -rf "$DIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$(id -u)" = 0 ]; then chown "$RUN_USER" "$DIR"; fi
chmod 700 "$DIR"
cd "$DIR" || die "cannot enter $DIR"	# su keeps the cwd; the postgres user must be able to enter it

if [ -n "${BENCH_PORT:-}" ]; then
	PORT=$BENCH_PORT
else
	# The server listens on no TCP port; the number only names the socket
	# (in our own directory) and seeds the shared memory key.  Still avoid
	# numbers some other local server uses.
	PORT=
	for _ in $(seq 50); do
		p=$((55000 + RANDOM % 1000))
		if ! ls /tmp/.s.PGSQL."$p" /var/run/postgresql/.s.PGSQL."$p" >/dev/null 2>&1 &&
		   ! { command -v ss >/dev/null && ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; }; then
			PORT=$p
			break
		fi
	done
	[ -n "$PORT" ] || die "found no free port number"
fi

PSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -d bench)
sql() { as_pg "${PSQL[@]}" -At -c "$1"; }		# one value per line, no headers

section() { printf '\n== %s\n\n' "$*"; }

# median: the median of the numbers on stdin, one per line.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; m = int((NR + 1) / 2); print (NR % 2) ? v[m] : (v[m] + v[m + 1]) / 2 }'; }
# fmt_int X: X rounded, with a space every three digits.
fmt_int() { awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); n = length(s); o = ""; for (k = 1; k <= n; k++) { o = o substr(s, k, 1); if ((n - k) % 3 == 0 && k < n) o = o " " } print o }'; }

# print_machine: the machine the figures come from.  Sets cpu_model and
# mem_kb, which the summaries use again.
mem_gib() { awk -v k="${mem_kb:-0}" 'BEGIN { printf "%.1f", k / 1048576 }'; }
print_machine() {
	section "machine"
	cpu_model=$(sed -n 's/^\(model name\|Model\|cpu model\|Processor\)[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
	mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo 2>/dev/null || true)
	printf '%-10s %s\n' "nproc" "$(nproc)"
	printf '%-10s %s\n' "cpu" "${cpu_model:-unknown}"
	printf '%-10s %s\n' "memory" "$(mem_gib) GiB"
	printf '%-10s %s\n' "kernel" "$(uname -srm)"
	printf '%-10s %s\n' "postgres" "$("$BINDIR/postgres" --version)"
	printf '%-10s %s\n' "date" "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	printf '%-10s %s\n' "idgen" "$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$SHAREDIR/extension/idgen.control") ($(git -C "$SRC" describe --always --dirty 2>/dev/null || echo "no git"))"
	printf '%-10s %s\n' "data on" "$(df -PT "$DIR" 2>/dev/null | awk 'NR == 2 { print $1 " (" $2 ")" }')"
}

# init_cluster 'EXTRA SETTINGS': initdb, then the settings both benchmarks
# use (a socket in DIR only, idgen preloaded) and EXTRA; print them.
init_cluster() {
	section "cluster"
	as_pg "$BINDIR/initdb" -D "$PGDATA_DIR" -U "$RUN_USER" -A trust -E UTF8 --locale=C --no-sync >/dev/null ||
		die "initdb failed"
	cat >>"$PGDATA_DIR/postgresql.conf" <<EOF

# $PROG
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $PORT
shared_preload_libraries = 'idgen'
max_connections = 50
shared_buffers = 256MB
jit = off
max_parallel_workers_per_gather = 0
$1
EOF
	echo "data directory $PGDATA_DIR, socket in $DIR, port $PORT (no TCP)"
	sed -n "/^# $PROG/,\$p" "$PGDATA_DIR/postgresql.conf" | sed '1d; /^$/d; s/^/  /'
}

# create_bench_ms [N]: in database bench, bench_n_ms(q, n) runs the query
# q, which must count n values, and returns the milliseconds it took, timed
# in the server (clock_timestamp() around EXECUTE), so no round trip is
# included; given N, bench_ms(q) is bench_n_ms(q, N).
create_bench_ms() {
	sql "CREATE FUNCTION bench_n_ms(q text, n bigint) RETURNS double precision LANGUAGE plpgsql AS \$f\$
DECLARE t0 timestamptz; c bigint;
BEGIN
	t0 := clock_timestamp();
	EXECUTE q INTO c;
	IF c IS DISTINCT FROM n THEN RAISE EXCEPTION 'counted % values, not %', c, n; END IF;
	RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END \$f\$" >/dev/null
	if [ $# -gt 0 ]; then
		sql "CREATE FUNCTION bench_ms(q text) RETURNS double precision LANGUAGE sql
			AS \$f\$ SELECT bench_n_ms(q, $1) \$f\$" >/dev/null
	fi
}

# start_cluster: start it and create the database "bench".
start_cluster() {
	as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -l "$LOG" -w -t 60 start >/dev/null || die "server did not start"
	STARTED=1
	as_pg "${PSQL[@]}" -d postgres -c "CREATE DATABASE bench" >/dev/null
}
