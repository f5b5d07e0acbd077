#!/usr/bin/env bash
#
# test/bench/bench.sh: how much an idgen Snowflake ID costs, next to the
# built-in alternatives.
#
#   bash test/bench/bench.sh
#
# These are MEASUREMENTS, not tests: the script never fails on a figure.  It
# exits non-zero only if something breaks (the server does not start, a
# query fails, pgbench fails).  Results depend on the machine; the script
# prints the machine first so figures are never quoted without it.
#
# What it does
#   A throwaway cluster is created in a mktemp directory (initdb; Unix socket
#   in that directory, no TCP; shared_preload_libraries = 'idgen',
#   synchronous_commit = off, max_connections = 50, shared_buffers = 256MB,
#   plus jit = off and max_parallel_workers_per_gather = 0 so that neither
#   JIT compilation nor a parallel plan lands in some runs and not others).
#   It is always stopped and removed at exit.
#
#   Part A, cost per value in one backend.  For each expression
#       idgen_snowflake()  idgen_snowflake(0)  nextval('bench_seq')
#       gen_random_uuid()  clock_timestamp()
#   the query
#       SELECT count(x) FROM (SELECT <expr> x FROM generate_series(1, N)) s
#   is timed inside the server by a PL/pgSQL function that reads
#   clock_timestamp() immediately before and after EXECUTE-ing it, so the
#   overhead (one EXECUTE: parse, plan, a generate_series of N rows and a
#   count) is the same for every expression and no client round trip or psql
#   \timing is included.  clock_timestamp() is the floor: the cheapest
#   volatile call, i.e. mostly that shared overhead.  All runs happen in one
#   psql session, after a discarded warm-up round, interleaved round-robin
#   (A B C D E A B C D E ...) so machine noise hits all expressions alike,
#   and the MEDIAN of BENCH_REPS runs is reported.  Before each run the
#   session sleeps 2 x idgen.max_drift_ms (outside the timed region, for
#   every expression alike), so a Snowflake run never inherits the
#   previous run's borrowed milliseconds.
#   With the default layout (12 sequence bits) one server can issue at most
#   4 096 000 IDs/s; idgen_snowflake() may run up to idgen.max_drift_ms
#   (100 ms) ahead of the clock and then waits, so a single backend that is
#   faster than the ceiling is capped by it, and at N = 2 000 000 the figure
#   is then the ceiling, not the cost.  Hence Part A runs twice:
#     A1  N = BENCH_N, as above;
#     A2  the same with N = 80% of max_drift_ms worth of IDs (327 680 by
#         default), where idgen_snowflake() can never wait: its own cost.
#   idgen_stats is reset after each part's warm-up and printed after the
#   part, so the reader sees borrowed_ms and waits.
#
#   Part B, INSERT throughput with pgbench.  Two tables,
#       t_snow   (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), v int)
#       t_serial (id bigserial PRIMARY KEY, v int)
#   and a one-statement script each (INSERT INTO t_x (v) VALUES (1);), run
#   with pgbench -n -c C -j C -T BENCH_T for C in BENCH_CLIENTS, in the
#   order snow, serial, serial, snow for each C (cancels slow drift), with
#   TRUNCATE + CHECKPOINT before every run.  Reported: tps per run, mean tps
#   per (table, clients) (with two runs the median is the mean) and the
#   ratio snowflake / bigserial.
#
#   It ends with a markdown summary suitable for a README.
#
# Environment
#   PG_CONFIG      pg_config of the installation (default
#                  /usr/lib/postgresql/15/bin/pg_config); binaries from
#                  its --bindir.
#   BENCH_N        values per Part A1 run (default 2000000)
#   BENCH_REPS     Part A1/A2 runs per expression, median reported (default 5)
#   BENCH_T        seconds per pgbench run (default 15)
#   BENCH_CLIENTS  pgbench client counts (default "1 8")
#   BENCH_INSTALL  as root, run `make install` first, which rebuilds if the
#                  sources changed (default 1; 0 skips)
#   BENCH_PORT     port number of the throwaway server (default: a free
#                  55xxx number; it only names the Unix socket)
#
# Run as root (Debian), the server and clients run as the postgres user;
# run as another user, they run as that user and the extension must already
# be installed.  With defaults it takes about 2.5 minutes.
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
N=${BENCH_N:-2000000}
REPS=${BENCH_REPS:-5}
T=${BENCH_T:-15}
CLIENTS=${BENCH_CLIENTS:-1 8}
INSTALL=${BENCH_INSTALL:-1}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

die() { echo "bench.sh: $*" >&2; exit 1; }
section() { printf '\n== %s\n\n' "$*"; }

positive() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"; }
positive BENCH_N "$N"
positive BENCH_REPS "$REPS"
positive BENCH_T "$T"
for c in $CLIENTS; do
	[[ $c =~ ^[1-9][0-9]*$ ]] || die "BENCH_CLIENTS must list positive integers, got '$CLIENTS'"
done

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

DIR=$(mktemp -d "${TMPDIR:-/tmp}/idgen-bench.XXXXXX")
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
		echo "bench.sh: failed (exit $rc); last lines of the server log:" >&2
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
cd "$DIR"	# su keeps the cwd; the postgres user must be able to enter it

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
sql_table() { as_pg "${PSQL[@]}" -P pager=off -c "$1"; }	# aligned, for people

# --- the machine --------------------------------------------------------------

section "machine"
cpu_model=$(sed -n 's/^\(model name\|Model\|cpu model\|Processor\)[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo 2>/dev/null || true)
printf '%-10s %s\n' "nproc" "$(nproc)"
printf '%-10s %s\n' "cpu" "${cpu_model:-unknown}"
mem_gib() { awk -v k="${mem_kb:-0}" 'BEGIN { printf "%.1f", k / 1048576 }'; }
printf '%-10s %s\n' "memory" "$(mem_gib) GiB"
printf '%-10s %s\n' "kernel" "$(uname -srm)"
printf '%-10s %s\n' "postgres" "$("$BINDIR/postgres" --version)"
printf '%-10s %s\n' "date" "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
printf '%-10s %s\n' "idgen" "$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$SHAREDIR/extension/idgen.control") ($(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"

section "cluster"
as_pg "$BINDIR/initdb" -D "$PGDATA_DIR" -U "$RUN_USER" -A trust -E UTF8 --locale=C --no-sync >/dev/null ||
	die "initdb failed"
cat >>"$PGDATA_DIR/postgresql.conf" <<EOF

# bench.sh
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $PORT
shared_preload_libraries = 'idgen'
synchronous_commit = off
max_connections = 50
shared_buffers = 256MB
jit = off
max_parallel_workers_per_gather = 0
EOF
echo "data directory $PGDATA_DIR, socket in $DIR, port $PORT (no TCP)"
sed -n '/^# bench.sh/,$p' "$PGDATA_DIR/postgresql.conf" | sed '1d; s/^/  /'
as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -l "$LOG" -w -t 60 start >/dev/null || die "server did not start"
STARTED=1
as_pg "${PSQL[@]}" -d postgres -c "CREATE DATABASE bench" >/dev/null
sql "CREATE EXTENSION idgen"
sql_table "SELECT sequence_bits, gene_bits, max_drift_ms, ids_per_second FROM idgen_info()"

CEILING=$(sql "SELECT ids_per_second FROM idgen_info()")
DRIFT_MS=$(sql "SELECT max_drift_ms FROM idgen_info()")
PAUSE=$(awk -v d="$DRIFT_MS" 'BEGIN { printf "%.3f", 2 * d / 1000 }')

# --- Part A -------------------------------------------------------------------

LABELS=("idgen_snowflake()" "idgen_snowflake(0)" "nextval()" "gen_random_uuid()" "clock_timestamp()")
EXPRS=("idgen_snowflake()" "idgen_snowflake(0)" "nextval('bench_seq')" "gen_random_uuid()" "clock_timestamp()")
NEXPR=${#EXPRS[@]}
I_SNOW=0 I_NEXTVAL=2 I_FLOOR=4

# Below the ceiling: as many IDs as fit in 80% of what a gene may borrow
# (max_drift_ms worth of sequence), so idgen_snowflake() never waits.
PER_GENE=$(sql "SELECT ids_per_second_per_gene FROM idgen_info()")
N2=$(awk -v r="$PER_GENE" -v d="$DRIFT_MS" -v n="$N" 'BEGIN { m = int(0.8 * r * d / 1000); print (m < n) ? m : n }')
[ "$N2" -ge 1 ] || N2=1

sql "CREATE SEQUENCE bench_seq"
sql "CREATE FUNCTION bench_ms(q text, n bigint) RETURNS double precision
LANGUAGE plpgsql AS \$f\$
DECLARE
	t0 timestamptz;
	t1 timestamptz;
	c bigint;
BEGIN
	t0 := clock_timestamp();
	EXECUTE q INTO c;
	t1 := clock_timestamp();
	IF c IS DISTINCT FROM n THEN
		RAISE EXCEPTION 'bench query counted % values, expected %', c, n;
	END IF;
	RETURN extract(epoch FROM t1 - t0) * 1000;
END
\$f\$"

query() { printf 'SELECT count(x) FROM (SELECT %s x FROM generate_series(1, %d)) s' "$1" "$2"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; m = int((NR + 1) / 2); print (NR % 2) ? v[m] : (v[m] + v[m + 1]) / 2 }'; }
fmt_int() { awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); n = length(s); o = ""; for (k = 1; k <= n; k++) { o = o substr(s, k, 1); if ((n - k) % 3 == 0 && k < n) o = o " " } print o }'; }

# Results, keyed "part,expression index" (PCT and WAITS by part).
declare -A NS RATE RATIO PCT WAITS

# part_a PART N: one psql session, a warm-up round, REPS interleaved rounds.
part_a() {
	local part=$1 n=$2 warm i r runs over out
	local -a med
	warm=$((n / 10 > 0 ? n / 10 : 1))
	{
		for ((i = 0; i < NEXPR; i++)); do
			printf "SELECT pg_sleep(%s);\n" "$PAUSE"
			printf "SELECT 'warmup|%d|' || bench_ms(\$q\$%s\$q\$, %d);\n" "$i" "$(query "${EXPRS[i]}" "$warm")" "$warm"
		done
		# idgen_stats counts the measured runs only.
		printf "SELECT pg_sleep(%s);\nSELECT 'reset|' || idgen_stats_reset();\n" "$PAUSE"
		for ((r = 1; r <= REPS; r++)); do
			for ((i = 0; i < NEXPR; i++)); do
				printf "SELECT pg_sleep(%s);\n" "$PAUSE"
				printf "SELECT '%d|%d|' || bench_ms(\$q\$%s\$q\$, %d);\n" "$r" "$i" "$(query "${EXPRS[i]}" "$n")" "$n"
			done
		done
	} >"$DIR/part_$part.sql"
	out=$(as_pg "${PSQL[@]}" -At -f "$DIR/part_$part.sql")

	echo "method: SELECT count(x) FROM (SELECT <expr> x FROM generate_series(1, $n)) s"
	echo "        timed in the server by clock_timestamp() around EXECUTE in PL/pgSQL"
	echo "        (same overhead for every expression; clock_timestamp() is the floor),"
	echo "        one psql session, 1 discarded warm-up round of $warm values,"
	echo "        runs interleaved round-robin, ${PAUSE} s pause before each run (untimed)."
	echo
	printf '%-20s' "ms per run"
	for ((r = 1; r <= REPS; r++)); do printf '%9s' "run $r"; done
	printf '%11s\n' "median"
	for ((i = 0; i < NEXPR; i++)); do
		runs=$(awk -F'|' -v i="$i" '$1 ~ /^[0-9]+$/ && $2 == i { print $3 }' <<<"$out")
		[ "$(grep -c . <<<"$runs")" -eq "$REPS" ] || die "Part $part: expected $REPS runs of ${LABELS[i]}"
		med[i]=$(median <<<"$runs")
		NS[$part,$i]=$(awk -v ms="${med[i]}" -v n="$n" 'BEGIN { printf "%.1f", ms * 1e6 / n }')
		RATE[$part,$i]=$(awk -v ms="${med[i]}" -v n="$n" 'BEGIN { printf "%.0f", n / (ms / 1000) }')
		printf '%-20s' "${LABELS[i]}"
		while read -r ms; do printf '%9.1f' "$ms"; done <<<"$runs"
		printf '%11.1f\n' "${med[i]}"
	done

	echo
	printf '%-20s %10s %14s %14s %14s\n' "expression" "ns/value" "values/s" "vs nextval()" "ns over floor"
	for ((i = 0; i < NEXPR; i++)); do
		RATIO[$part,$i]=$(awk -v a="${NS[$part,$i]}" -v b="${NS[$part,$I_NEXTVAL]}" 'BEGIN { printf "%.2f", a / b }')
		over=$(awk -v a="${NS[$part,$i]}" -v f="${NS[$part,$I_FLOOR]}" 'BEGIN { printf "%.1f", a - f }')
		printf '%-20s %10s %14s %14s %14s\n' "${LABELS[i]}" "${NS[$part,$i]}" "$(fmt_int "${RATE[$part,$i]}")" "${RATIO[$part,$i]}x" "$over"
	done
	PCT[$part]=$(awk -v r="${RATE[$part,$I_SNOW]}" -v c="$CEILING" 'BEGIN { printf "%.1f", 100 * r / c }')
	WAITS[$part]=$(sql "SELECT coalesce(sum(waits), 0) FROM idgen_stats")
	echo
	echo "idgen_snowflake() ran at $(fmt_int "${RATE[$part,$I_SNOW]}") values/s = ${PCT[$part]}% of the $(fmt_int "$CEILING") IDs/s ceiling."
	echo "idgen_stats over the measured runs (reset after the warm-up):"
	sql_table "SELECT * FROM idgen_stats"
}

section "Part A1: single-backend cost per value, N = $N ($REPS runs each, median)"
echo "Snowflake ceiling: $(fmt_int "$CEILING") IDs/s per server (idgen_info().ids_per_second; 12 sequence"
echo "bits by default).  $(fmt_int "$N") IDs are $(awk -v n="$N" -v c="$CEILING" 'BEGIN { printf "%.0f", 1000 * n / c }') ms of sequence; a backend may run at most $DRIFT_MS ms"
echo "ahead of the clock and then waits, so if idgen_snowflake() is faster than the ceiling,"
echo "this part measures the ceiling (plus a $DRIFT_MS ms head start), not its CPU cost."
echo
part_a A1 "$N"

section "Part A2: the same below the ceiling, N = $N2 (80% of max_drift_ms of sequence)"
echo "No run here can wait for the clock, so this is the generator's own cost."
echo
part_a A2 "$N2"

echo
echo "ns/value and values/s include the per-row overhead shared by all (generate_series + count);"
echo "'ns over floor' subtracts clock_timestamp()'s figure; 'vs nextval()' = ns/value of expr / ns/value of nextval()."
if [ "${WAITS[A1]}" -gt 0 ]; then
	echo "In A1 idgen_snowflake() waited for the clock ${WAITS[A1]} times: its A1 figure is the ceiling; A2 is its cost."
fi

# --- Part B -------------------------------------------------------------------

section "Part B: pgbench INSERT throughput (-T $T s per run, clients: $CLIENTS)"
sql "CREATE TABLE t_snow (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), v int)"
sql "CREATE TABLE t_serial (id bigserial PRIMARY KEY, v int)"
echo 'INSERT INTO t_snow (v) VALUES (1);' >"$DIR/snow.sql"
echo 'INSERT INTO t_serial (v) VALUES (1);' >"$DIR/serial.sql"
echo "scripts: INSERT INTO t_snow (v) VALUES (1);  /  INSERT INTO t_serial (v) VALUES (1);"
echo "each run: TRUNCATE both tables + CHECKPOINT, then pgbench -n -f <script> -c C -j C -T $T"
echo

declare -A TPS_SUM TPS_RUNS
printf '%-8s %-10s %12s %14s\n' "clients" "table" "tps" "latency ms"
for c in $CLIENTS; do
	for kind in snow serial serial snow; do
		sql "TRUNCATE t_snow, t_serial" >/dev/null
		sql "CHECKPOINT" >/dev/null
		out=$(as_pg "$BINDIR/pgbench" -n -f "$DIR/$kind.sql" -c "$c" -j "$c" -T "$T" \
			-h "$DIR" -p "$PORT" bench 2>&1) || { echo "$out" >&2; die "pgbench failed"; }
		tps=$(awk '/^tps = / { print $3; exit }' <<<"$out")
		lat=$(awk '/^latency average = / { print $4; exit }' <<<"$out")
		[ -n "$tps" ] || { echo "$out" >&2; die "could not read tps from pgbench"; }
		TPS_SUM[$kind,$c]=$(awk -v s="${TPS_SUM[$kind,$c]:-0}" -v t="$tps" 'BEGIN { printf "%.6f", s + t }')
		TPS_RUNS[$kind,$c]="${TPS_RUNS[$kind,$c]:-} $tps"
		printf '%-8s %-10s %12.0f %14s\n' "$c" "$kind" "$tps" "${lat:-?}"
	done
done

echo
printf '%-8s %-26s %-26s %8s\n' "clients" "snowflake tps mean (runs)" "bigserial tps mean (runs)" "ratio"
declare -A TPS_MEAN TPS_RATIO
noisy=()
for c in $CLIENTS; do
	for kind in snow serial; do
		TPS_MEAN[$kind,$c]=$(awk -v s="${TPS_SUM[$kind,$c]}" 'BEGIN { printf "%.0f", s / 2 }')
		# Spread of the two runs of a cell, as a percentage of their mean.
		spread=$(awk '{ d = $1 - $2; if (d < 0) d = -d; printf "%.0f", 200 * d / ($1 + $2) }' <<<"${TPS_RUNS[$kind,$c]}")
		if [ "$spread" -gt 20 ]; then
			noisy+=("$kind/$c clients: the two runs differ by ${spread}%")
		fi
	done
	TPS_RATIO[$c]=$(awk -v a="${TPS_MEAN[snow,$c]}" -v b="${TPS_MEAN[serial,$c]}" 'BEGIN { printf "%.3f", a / b }')
	runs_s=$(awk '{ printf "%.0f/%.0f", $1, $2 }' <<<"${TPS_RUNS[snow,$c]}")
	runs_b=$(awk '{ printf "%.0f/%.0f", $1, $2 }' <<<"${TPS_RUNS[serial,$c]}")
	printf '%-8s %-26s %-26s %8s\n' "$c" "${TPS_MEAN[snow,$c]} ($runs_s)" "${TPS_MEAN[serial,$c]} ($runs_b)" "${TPS_RATIO[$c]}"
done
echo "(two runs per cell, so the median equals the mean; ratio = snowflake / bigserial)"
for w in "${noisy[@]}"; do
	echo "noisy: $w; that ratio is within the machine's noise."
done

# --- summary ------------------------------------------------------------------

section "summary (markdown)"
echo "$(nproc) CPU ${cpu_model:-unknown}, $(mem_gib) GiB, $("$BINDIR/postgres" --version | sed 's/^postgres (PostgreSQL) /PostgreSQL /'), $(date -u +%Y-%m-%d)."
echo
BQ='`'
echo "| expression | ns/value | values/s | vs nextval() | ns/value, below ceiling | vs nextval(), below ceiling |"
echo "|---|---:|---:|---:|---:|---:|"
for ((i = 0; i < NEXPR; i++)); do
	printf '| %s | %s | %s | %sx | %s | %sx |\n' "$BQ${EXPRS[i]}$BQ" "${NS[A1,$i]}" "$(fmt_int "${RATE[A1,$i]}")" "${RATIO[A1,$i]}" \
		"${NS[A2,$i]}" "${RATIO[A2,$i]}"
done
echo
echo "One backend; median of $REPS runs of $(fmt_int "$N") values (below ceiling: $(fmt_int "$N2") values, so idgen_snowflake() never waits);"
echo "the per-row cost of generate_series + count is included in every row (clock_timestamp() is that floor)."
echo "At $(fmt_int "$N") values idgen_snowflake() ran at ${PCT[A1]}% of its $(fmt_int "$CEILING") IDs/s per-server ceiling (below it: ${PCT[A2]}%, borrowing ahead of the clock)."
echo
echo "| pgbench INSERT, clients | idgen_snowflake() tps | bigserial tps | ratio |"
echo "|---:|---:|---:|---:|"
for c in $CLIENTS; do
	printf '| %s | %s | %s | %s |\n' "$c" "$(fmt_int "${TPS_MEAN[snow,$c]}")" "$(fmt_int "${TPS_MEAN[serial,$c]}")" "${TPS_RATIO[$c]}"
done
echo
echo "Mean of 2 runs of $T s each (order snow, serial, serial, snow), synchronous_commit = off."
