#!/usr/bin/env bash
#
# test/bench/identity_bench.sh: what a leased identity (idgen.registry)
# costs on the hot path, against the identity from the settings, measured
# side by side in one run.
#
#   bash test/bench/identity_bench.sh
#
# These are MEASUREMENTS, not tests: the script never fails on a figure (nor
# on the project's target, leased within 5% of settings, which it only
# prints).  It exits non-zero only if something breaks.  It prints the
# machine first.
#
# What it does
#   One throwaway cluster (test/bench/lib.sh: socket in a mktemp directory,
#   no TCP, idgen preloaded, synchronous_commit = off as in bench.sh) is
#   restarted between two modes, IDENTITY_BENCH_ROUNDS times each,
#   alternating (settings, leased, leased, settings, ...):
#     settings  idgen.identity = 'settings', no registry (datacenter 0,
#               worker 0): the ID's identity bits are a constant
#     leased    idgen.identity = 'registry', idgen.registry pointing at the
#               cluster itself (database bench): a free identity is leased
#               from its own idgen_worker_lease table, renewed every 10 s;
#               every ID checks the lease word in shared memory
#   In each mode, after the identity is in place:
#     A  one backend: SELECT count(x) FROM (SELECT idgen_snowflake() x FROM
#        generate_series(1, 327680)) s, timed in the server (clock_timestamp()
#        around EXECUTE in PL/pgSQL), 5 times, median: ns per ID.  327 680
#        IDs are 80% of what max_drift_ms (100 ms) allows with 12 sequence
#        bits, so the generator never waits for the clock (bench.sh's A2).
#     B  pgbench -n -M prepared -c 8 -j 8 -T IDENTITY_BENCH_T:
#        INSERT INTO t_snow (v) VALUES (1), with
#        t_snow (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), v int)
#        (bench.sh's Part B), TRUNCATE + CHECKPOINT before each run.
#   Reported: every run, the median per mode, and leased / settings.
#
# Settings (environment):
#   IDENTITY_BENCH_T       seconds per pgbench run (default 5)
#   IDENTITY_BENCH_ROUNDS  restarts per mode (default 3)
#   PG_CONFIG              pg_config of the server (default PostgreSQL 15's)
#   BENCH_INSTALL=0        do not run make install first (as root it does)
#
set -euo pipefail

PROG=$(basename "$0")
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
INSTALL=${BENCH_INSTALL:-1}
T=${IDENTITY_BENCH_T:-5}
ROUNDS=${IDENTITY_BENCH_ROUNDS:-3}
N=327680
REPS=5
CLIENTS=8
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"
# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

print_machine
init_cluster "synchronous_commit = off"
start_cluster
sql "CREATE EXTENSION idgen" >/dev/null
sql "CREATE TABLE t_snow (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), v int)" >/dev/null
create_bench_ms "$N"
printf 'INSERT INTO t_snow (v) VALUES (1);\n' >"$DIR/insert.sql"
[ "$(id -u)" = 0 ] && chown "$RUN_USER" "$DIR/insert.sql"

# restart_in MODE: restart the cluster with the identity of MODE and wait
# until generation works.
restart_in() {
	if [ "$1" = leased ]; then
		sql "ALTER SYSTEM SET idgen.identity = 'registry'" >/dev/null
		sql "ALTER SYSTEM SET idgen.registry = 'host=$DIR port=$PORT dbname=bench'" >/dev/null
		sql "ALTER SYSTEM SET idgen.registry_ttl = '30s'" >/dev/null
	else
		sql "ALTER SYSTEM RESET idgen.identity" >/dev/null
		sql "ALTER SYSTEM RESET idgen.registry" >/dev/null
	fi
	as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -l "$LOG" -w -m fast restart >/dev/null || die "restart failed"
	for _ in $(seq 100); do
		[ "$(sql "SELECT state IN ('held', 'settings') FROM idgen_identity()")" = t ] && break
		sleep 0.1
	done
	[ "$(sql "SELECT state IN ('held', 'settings') FROM idgen_identity()")" = t ] ||
		die "no identity in mode $1: $(sql "SELECT message FROM idgen_identity()")"
}

declare -A A_RUNS B_RUNS IDENT
section "runs"
printf '%-6s %-9s %-12s %14s %14s\n' round mode identity "A ns/ID" "B insert tps"
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then order="settings leased"; else order="leased settings"; fi
	for mode in $order; do
		restart_in "$mode"
		IDENT[$mode]=$(sql "SELECT source || ' ' || datacenter_id || ':' || worker_id FROM idgen_identity()")
		# A: one backend, after a discarded warm-up.
		q="SELECT count(x) FROM (SELECT idgen_snowflake() x FROM generate_series(1, $N)) s"
		sql "SELECT bench_ms(\$q\$$q\$q\$)" >/dev/null
		ms=$(for ((k = 1; k <= REPS; k++)); do sql "SELECT pg_sleep(0.2), bench_ms(\$q\$$q\$q\$)" | cut -d'|' -f2; done | median)
		ns=$(awk -v ms="$ms" -v n="$N" 'BEGIN { printf "%.1f", ms * 1e6 / n }')
		A_RUNS[$mode]="${A_RUNS[$mode]:-} $ns"
		# B: INSERT throughput.
		sql "TRUNCATE t_snow" >/dev/null
		sql "CHECKPOINT" >/dev/null
		out=$(as_pg "$BINDIR/pgbench" -n -M prepared -f "$DIR/insert.sql" -c "$CLIENTS" -j "$CLIENTS" -T "$T" \
			-h "$DIR" -p "$PORT" bench 2>&1) || { echo "$out" >&2; die "pgbench failed"; }
		tps=$(awk '/^tps = / { print $3; exit }' <<<"$out")
		[ -n "$tps" ] || { echo "$out" >&2; die "could not read the rate"; }
		B_RUNS[$mode]="${B_RUNS[$mode]:-} $tps"
		printf '%-6s %-9s %-12s %14s %14.0f\n' "$r" "$mode" "${IDENT[$mode]#* }" "$ns" "$tps"
	done
done
[ "$(sql "SELECT count(*) = count(DISTINCT id) FROM t_snow")" = t ] || die "duplicate IDs in t_snow"

section "summary"
echo "$(nproc) CPU ${cpu_model:-unknown}, $(mem_gib) GiB, $("$BINDIR/postgres" --version | sed 's/^postgres (PostgreSQL) /PostgreSQL /'), $(date -u +%Y-%m-%d)."
echo
declare -A A_MED B_MED
for mode in settings leased; do
	A_MED[$mode]=$(tr ' ' '\n' <<<"${A_RUNS[$mode]}" | grep . | median)
	B_MED[$mode]=$(tr ' ' '\n' <<<"${B_RUNS[$mode]}" | grep . | median)
done
echo "| identity | A: one backend, ns per ID | B: INSERT tps, $CLIENTS clients |"
echo "|---|---:|---:|"
for mode in settings leased; do
	printf '| %s | %s | %s |\n' "$mode (${IDENT[$mode]})" "${A_MED[$mode]}" "$(fmt_int "${B_MED[$mode]}")"
done
ra=$(ratio "${A_MED[leased]}" "${A_MED[settings]}")
rb=$(ratio "${B_MED[leased]}" "${B_MED[settings]}")
echo
echo "medians of $ROUNDS restarts per mode; A: $REPS timings of $N IDs each, median; B: pgbench -n -M prepared -c $CLIENTS -j $CLIENTS -T $T."
echo "leased / settings: A cost ${ra}x (target <= 1.05: $(awk -v r="$ra" 'BEGIN { print (r <= 1.05) ? "met" : "NOT met" }')), B throughput ${rb}x (target >= 0.95: $(awk -v r="$rb" 'BEGIN { print (r >= 0.95) ? "met" : "NOT met" }'))"
