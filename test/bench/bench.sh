#!/usr/bin/env bash
#
# test/bench/bench.sh: how much an idgen Snowflake ID or UUIDv7 costs, next
# to the built-in alternatives and a hand-written SQL UUIDv7.
#
#   bash test/bench/bench.sh
#
# These are MEASUREMENTS, not tests: the script never fails on a figure (nor
# on the project's target for idgen_uuid7(), at most 0.5x the cost of
# gen_random_uuid(), which it only prints).  It exits non-zero only if
# something breaks (the server does not start, a query fails, pgbench fails,
# sql_uuidv7() does not yield version-7 UUIDs).  Results depend on the
# machine; the script prints the machine first so figures are never quoted
# without it.
#
# What it does
#   A throwaway cluster is created in a mktemp directory (initdb; Unix socket
#   in that directory, no TCP; shared_preload_libraries = 'idgen',
#   synchronous_commit = off, max_connections = 50, shared_buffers = 256MB,
#   plus jit = off and max_parallel_workers_per_gather = 0 so that neither
#   JIT compilation nor a parallel plan lands in some runs and not others).
#   It is always stopped and removed at exit.  All parts use this cluster.
#
#   The bench database gets a hand-written UUIDv7 baseline, the kind of
#   function people write without an extension:
#       CREATE FUNCTION sql_uuidv7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
#         SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
#                PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
#                FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
#       $$;
#   (a v4 UUID whose first 48 bits are replaced by Unix milliseconds and
#   whose version nibble 0100 becomes 0111; ordered only to the millisecond,
#   random within it).  The script checks that 10 000 of its values, and of
#   idgen_uuid7()'s, have version digit 7 (13th hex digit) and variant 10.
#
#   Part A, cost per value in one backend.  For each expression
#       idgen_snowflake()  idgen_snowflake(0)  nextval('bench_seq')
#       idgen_uuid7()  sql_uuidv7()  gen_random_uuid()  clock_timestamp()  1
#   the query
#       SELECT count(x) FROM (SELECT <expr> x FROM generate_series(1, N)) s
#   is timed inside the server by a PL/pgSQL function that reads
#   clock_timestamp() immediately before and after EXECUTE-ing it, so the
#   overhead (one EXECUTE: parse, plan, a generate_series of N rows and a
#   count) is the same for every expression and no client round trip or psql
#   \timing is included.  clock_timestamp() is the floor: the cheapest
#   volatile call, i.e. mostly that shared overhead.  The constant 1 is the
#   floor without any function call (the executor's cost per row alone), so
#   that clock_timestamp() minus 1 is what the server charges for one call
#   of a C function that reads the clock, as idgen's generators do: the
#   control when versions are compared (test/bench/versions.sh).  All runs
#   happen in one psql session, after a discarded warm-up round,
#   interleaved round-robin (A B C ... H A B C ...) so machine noise hits
#   all expressions alike,
#   and the MEDIAN of BENCH_REPS runs is reported.  Before each run the
#   session sleeps 2 x idgen.max_drift (outside the timed region, for
#   every expression alike), so a Snowflake or UUIDv7 run never inherits
#   the previous run's borrowed milliseconds.
#   Reported per expression: ns/value, values/s, "vs nextval()" (ns/value
#   over nextval()'s) and, for the three UUID expressions, "vs
#   gen_random_uuid()" (ns/value over gen_random_uuid()'s).
#   With the default layout (12 sequence bits) one server can issue at most
#   4 096 000 Snowflake IDs/s; idgen_uuid7() likewise has 12 rand_a bits per
#   millisecond, 4 096 000 UUIDs/s before it borrows.  Both may run up to
#   idgen.max_drift (100 ms) ahead of the clock and then wait, so a
#   single backend that is faster than the ceiling is capped by it, and at
#   N = 2 000 000 the figure is then the ceiling, not the cost.  Hence
#   Part A runs twice:
#     A1  N = BENCH_N, as above;
#     A2  the same with N = 80% of max_drift_ms worth of IDs (327 680 by
#         default; the smaller of the Snowflake and UUIDv7 figures), where
#         neither idgen_snowflake() nor idgen_uuid7() can ever wait: their
#         own cost.  The 0.5x target is read from A2.
#   idgen_stats (a 'snowflake' and a 'uuid7' row) is reset after each part's
#   warm-up and printed after the part, so the reader sees borrowed_ms and
#   waits.
#
#   Part B, INSERT throughput with pgbench.  Two tables,
#       t_snow   (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), v int)
#       t_serial (id bigserial PRIMARY KEY, v int)
#   and a one-statement script each (INSERT INTO t_x (v) VALUES (1);), run
#   with pgbench -n -c C -j C -T BENCH_T for C in BENCH_CLIENTS, in
#   BENCH_PAIRS adjacent pairs (one run of each table) whose order
#   alternates (snow serial, serial snow, ...), with TRUNCATE + CHECKPOINT
#   before every run.  Reported: tps per run, the median tps per (table,
#   clients), and the median over the pairs of snowflake / bigserial, with
#   the range of the pair ratios (the machine's noise).
#
#   Part C, bulk insert of BENCH_BULK_N rows into a uuid primary key.  For
#   each key type x in uuid7 (idgen_uuid7()), random (gen_random_uuid()) and
#   sqlv7 (sql_uuidv7()), a load is
#       CHECKPOINT;
#       CREATE TABLE t_x (id uuid PRIMARY KEY DEFAULT <expr>, v int);
#       INSERT INTO t_x (v) SELECT g FROM generate_series(1, N) g;
#       (sizes read) DROP TABLE t_x;
#   so every load starts with an empty, checkpointed cluster (Part B's
#   tables are dropped before the first load, so autovacuum has no backlog
#   of them to work through during a load).
#   The INSERT is timed inside the server, like Part A: a PL/pgSQL function
#   reads clock_timestamp() immediately before and after EXECUTE-ing it
#   (and checks the row count), so neither psql \timing nor the commit
#   (asynchronous: synchronous_commit = off) is included.  Each key type is
#   loaded twice, in the order uuid7, random, sqlv7, sqlv7, random, uuid7
#   (cancels slow drift), each load in its own session.  Reported per load
#   and as the mean of the two: load time (s), rows/s, primary-key index
#   size (pg_relation_size('t_x_pkey')) and heap size (pg_relation_size
#   ('t_x')), pretty and in bytes, and each key type's ratio to
#   gen_random_uuid() for time and index size (the one asked for is
#   idgen_uuid7 / gen_random_uuid).
#   A key type whose loads differ by more than 20% of their mean is
#   flagged as noisy.
#   Decision on sql_uuidv7() in Part C: measured on the 2-core reference
#   machine, one 5M-row load takes about 5-8 s with idgen_uuid7(), 20-22 s
#   with gen_random_uuid() and 14 s with sql_uuidv7(), so two loads of all
#   three (about 1.5 minutes with the checkpoints) keep the whole script
#   well within its ~6 minute budget: sql_uuidv7() is included and every
#   key type is loaded twice (5M rows each).
#
#   It ends with a markdown summary suitable for a README.
#
# Environment
#   PG_CONFIG      pg_config of the installation (default
#                  /usr/lib/postgresql/15/bin/pg_config); binaries from
#                  its --bindir.
#   BENCH_N        values per Part A1 run (default 2000000)
#   BENCH_REPS     Part A1/A2 runs per expression, median reported (default 5)
#   BENCH_T        seconds per pgbench run (default 5)
#   BENCH_PAIRS    pairs of pgbench runs (snowflake, bigserial) per client
#                  count (default 6), the order alternating between pairs;
#                  0 skips Part B
#   BENCH_CLIENTS  pgbench client counts (default "1 8")
#   BENCH_BULK_N   rows per Part C load (default 5000000; 0 skips Part C)
#   BENCH_INSTALL  as root, run `make install` first, which rebuilds if the
#                  sources changed (default 1; 0 skips)
#   BENCH_PORT     port number of the throwaway server (default: a free
#                  55xxx number; it only names the Unix socket)
#   BENCH_CLOCK    what Part A times: wall (default), the time between the
#                  two clock_timestamp() readings, or cpu, the time the
#                  backend itself spent on a CPU in between (Linux: the
#                  first field of /proc/self/schedstat, read with
#                  pg_read_file), which a busy machine disturbs far less,
#                  as time the backend waits for a CPU is not counted.
#                  Time a generator sleeps is not counted either, so with
#                  cpu only Part A2's figures (no waits) are costs.
#
# Run as root (Debian), the server and clients run as the postgres user;
# run as another user, they run as that user and the extension must already
# be installed.  With defaults it takes about 4.5 minutes on a 2-core
# machine (Part A about 1.3, Part B 2.1, Part C 1.5); it needs about 2 GB
# of disk in TMPDIR for Part C (a 5M-row table, its index and WAL).
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
N=${BENCH_N:-2000000}
REPS=${BENCH_REPS:-5}
T=${BENCH_T:-5}
PAIRS=${BENCH_PAIRS:-6}
CLIENTS=${BENCH_CLIENTS:-1 8}
BULK_N=${BENCH_BULK_N:-5000000}
INSTALL=${BENCH_INSTALL:-1}
CLOCK=${BENCH_CLOCK:-wall}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROG=bench.sh
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"


positive BENCH_N "$N"
positive BENCH_REPS "$REPS"
positive BENCH_T "$T"
[[ $PAIRS =~ ^(0|[1-9][0-9]*)$ ]] || die "BENCH_PAIRS must be 0 or a positive integer, got '$PAIRS'"
for c in $CLIENTS; do positive BENCH_CLIENTS "$c"; done
[[ $BULK_N =~ ^(0|[1-9][0-9]*)$ ]] || die "BENCH_BULK_N must be 0 or a positive integer, got '$BULK_N'"
[[ $CLOCK =~ ^(wall|cpu)$ ]] || die "BENCH_CLOCK must be wall or cpu, got '$CLOCK'"

# The throwaway cluster, the postgres user, psql helpers: shared with the
# other benchmark script.
# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"
sql_table() { as_pg "${PSQL[@]}" -P pager=off -c "$1"; }	# aligned, for people

# --- the machine and the cluster -----------------------------------------------

print_machine
init_cluster "synchronous_commit = off"
start_cluster
sql "CREATE EXTENSION idgen"
sql_table "SELECT sequence_bits, gene_bits, max_drift_ms, ids_per_second FROM idgen_info()"

CEILING=$(sql "SELECT ids_per_second FROM idgen_info()")
DRIFT_MS=$(sql "SELECT max_drift_ms FROM idgen_info()")
PAUSE=$(awk -v d="$DRIFT_MS" 'BEGIN { printf "%.3f", 2 * d / 1000 }')

# --- Part A -------------------------------------------------------------------

LABELS=("idgen_snowflake()" "idgen_snowflake(0)" "nextval()" "idgen_uuid7()" "sql_uuidv7()" "gen_random_uuid()" "clock_timestamp()" "1 (no call)")
EXPRS=("idgen_snowflake()" "idgen_snowflake(0)" "nextval('bench_seq')" "idgen_uuid7()" "sql_uuidv7()" "gen_random_uuid()" "clock_timestamp()" "1")
NEXPR=${#EXPRS[@]}
I_SNOW=0 I_NEXTVAL=2 I_UUID7=3 I_SQLV7=4 I_RANDOM=5 I_FLOOR=6 I_CONST=7
# The expressions that get a "vs gen_random_uuid()" ratio.
is_uuid() { [ "$1" = "$I_UUID7" ] || [ "$1" = "$I_SQLV7" ] || [ "$1" = "$I_RANDOM" ]; }
TARGET=0.5	# project target: idgen_uuid7() at most 0.5x gen_random_uuid(); printed, never enforced

# UUIDv7 has a fixed 12-bit rand_a per millisecond (RFC 9562), whatever the
# Snowflake layout: at most 4 096 000 UUIDs/s before borrowing.
UUID7_PER_MS=4096
UUID7_CEILING=$((UUID7_PER_MS * 1000))

# Below the ceiling: as many IDs as fit in 80% of what a gene (or the UUIDv7
# tick) may borrow (max_drift_ms worth of sequence), so neither
# idgen_snowflake() nor idgen_uuid7() ever waits.
PER_GENE=$(sql "SELECT ids_per_second_per_gene FROM idgen_info()")
N2=$(awk -v r="$PER_GENE" -v u="$UUID7_PER_MS" -v d="$DRIFT_MS" -v n="$N" 'BEGIN {
	m = int(0.8 * r * d / 1000); m7 = int(0.8 * u * d); if (m7 < m) m = m7; print (m < n) ? m : n }')
[ "$N2" -ge 1 ] || N2=1

sql "CREATE SEQUENCE bench_seq"
sql "CREATE FUNCTION sql_uuidv7() RETURNS uuid LANGUAGE sql VOLATILE AS \$\$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
         PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
         FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
\$\$"
# Both UUIDv7 generators must yield version 7 (the 13th of the 32 hex
# digits) with the RFC 9562 variant (10xx: the 17th digit is 8, 9, a or b).
for f in sql_uuidv7 idgen_uuid7; do
	chk=$(sql "SELECT count(*) FILTER (WHERE substr(h, 13, 1) = '7' AND substr(h, 17, 1) IN ('8', '9', 'a', 'b'))
	           FROM (SELECT replace($f()::text, '-', '') AS h FROM generate_series(1, 10000)) s")
	[ "$chk" = 10000 ] || die "$f(): only $chk of 10000 values are version 7 with variant 10"
done

create_bench_ms
if [ "$CLOCK" = cpu ]; then
	# The same function, timed by this backend's own CPU time (ns since it
	# started, /proc/self/schedstat's first field): see BENCH_CLOCK.
	[ -r /proc/self/schedstat ] || die "BENCH_CLOCK=cpu needs /proc/self/schedstat (Linux)"
	sql "CREATE OR REPLACE FUNCTION bench_n_ms(q text, n bigint) RETURNS double precision LANGUAGE plpgsql AS \$f\$
DECLARE t0 bigint; c bigint;
BEGIN
	t0 := split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint;
	EXECUTE q INTO c;
	IF c IS DISTINCT FROM n THEN RAISE EXCEPTION 'counted % values, not %', c, n; END IF;
	RETURN (split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - t0) / 1e6;
END \$f\$" >/dev/null
fi

query() { printf 'SELECT count(x) FROM (SELECT %s x FROM generate_series(1, %d)) s' "$1" "$2"; }
# verdict RATIO: how RATIO (idgen_uuid7() / gen_random_uuid()) compares with TARGET.
verdict() {
	awk -v r="$1" -v t="$TARGET" 'BEGIN {
		if (r <= t) printf "within the target of at most %.2fx", t
		else printf "ABOVE the target of at most %.2fx by %.0f%%", t, 100 * (r / t - 1) }'
}

# Results, keyed "part,expression index" (PCT and WAITS by part and kind).
declare -A NS RATE RATIO RRATIO PCT WAITS

# part_a PART N: one psql session, a warm-up round, REPS interleaved rounds.
part_a() {
	local part=$1 n=$2 warm i r runs over vr out
	local -a med
	warm=$((n / 10 > 0 ? n / 10 : 1))
	{
		for ((i = 0; i < NEXPR; i++)); do
			printf "SELECT pg_sleep(%s);\n" "$PAUSE"
			printf "SELECT 'warmup|%d|' || bench_n_ms(\$q\$%s\$q\$, %d);\n" "$i" "$(query "${EXPRS[i]}" "$warm")" "$warm"
		done
		# idgen_stats counts the measured runs only.
		printf "SELECT pg_sleep(%s);\nSELECT 'reset|' || idgen_stats_reset();\n" "$PAUSE"
		for ((r = 1; r <= REPS; r++)); do
			for ((i = 0; i < NEXPR; i++)); do
				printf "SELECT pg_sleep(%s);\n" "$PAUSE"
				printf "SELECT '%d|%d|' || bench_n_ms(\$q\$%s\$q\$, %d);\n" "$r" "$i" "$(query "${EXPRS[i]}" "$n")" "$n"
			done
		done
	} >"$DIR/part_$part.sql"
	out=$(as_pg "${PSQL[@]}" -At -f "$DIR/part_$part.sql")

	echo "method: SELECT count(x) FROM (SELECT <expr> x FROM generate_series(1, $n)) s"
	if [ "$CLOCK" = cpu ]; then
		echo "        timed in the server by the backend's CPU time (/proc/self/schedstat) around EXECUTE"
		echo "        in PL/pgSQL (BENCH_CLOCK=cpu: waits for a CPU or for the clock are not counted)"
	else
		echo "        timed in the server by clock_timestamp() around EXECUTE in PL/pgSQL"
	fi
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
	printf '%-20s %10s %14s %14s %14s %10s %20s\n' "expression" "ns/value" "values/s" "vs nextval()" "ns over floor" "ns over 1" "vs gen_random_uuid()"
	for ((i = 0; i < NEXPR; i++)); do
		RATIO[$part,$i]=$(awk -v a="${NS[$part,$i]}" -v b="${NS[$part,$I_NEXTVAL]}" 'BEGIN { printf "%.2f", a / b }')
		over=$(awk -v a="${NS[$part,$i]}" -v f="${NS[$part,$I_FLOOR]}" 'BEGIN { printf "%.1f", a - f }')
		over1=$(awk -v a="${NS[$part,$i]}" -v f="${NS[$part,$I_CONST]}" 'BEGIN { printf "%.1f", a - f }')
		vr="-"
		if is_uuid "$i"; then
			RRATIO[$part,$i]=$(awk -v a="${NS[$part,$i]}" -v b="${NS[$part,$I_RANDOM]}" 'BEGIN { printf "%.2f", a / b }')
			vr="${RRATIO[$part,$i]}x"
		fi
		printf '%-20s %10s %14s %14s %14s %10s %20s\n' "${LABELS[i]}" "${NS[$part,$i]}" "$(fmt_int "${RATE[$part,$i]}")" "${RATIO[$part,$i]}x" "$over" "$over1" "$vr"
	done
	PCT[$part,snowflake]=$(awk -v r="${RATE[$part,$I_SNOW]}" -v c="$CEILING" 'BEGIN { printf "%.1f", 100 * r / c }')
	PCT[$part,uuid7]=$(awk -v r="${RATE[$part,$I_UUID7]}" -v c="$UUID7_CEILING" 'BEGIN { printf "%.1f", 100 * r / c }')
	WAITS[$part,snowflake]=$(sql "SELECT coalesce(sum(waits), 0) FROM idgen_stats WHERE kind = 'snowflake'")
	WAITS[$part,uuid7]=$(sql "SELECT coalesce(sum(waits), 0) FROM idgen_stats WHERE kind = 'uuid7'")
	echo
	echo "idgen_snowflake() ran at $(fmt_int "${RATE[$part,$I_SNOW]}") values/s = ${PCT[$part,snowflake]}% of the $(fmt_int "$CEILING") IDs/s ceiling;"
	echo "idgen_uuid7()     ran at $(fmt_int "${RATE[$part,$I_UUID7]}") values/s = ${PCT[$part,uuid7]}% of the $(fmt_int "$UUID7_CEILING") UUIDs/s ceiling."
	if [ "$part" = A2 ]; then
		echo "idgen_uuid7() / gen_random_uuid() = ${RRATIO[$part,$I_UUID7]}x per value: $(verdict "${RRATIO[$part,$I_UUID7]}") (A2 is its cost)."
	else
		echo "idgen_uuid7() / gen_random_uuid() = ${RRATIO[$part,$I_UUID7]}x per value here; if idgen_uuid7() waited (see waits below),"
		echo "that is the ceiling, not its cost: the 0.5x target is read from Part A2."
	fi
	echo "idgen_stats over the measured runs (reset after the warm-up):"
	sql_table "SELECT * FROM idgen_stats"
}

section "Part A1: single-backend cost per value, N = $N ($REPS runs each, median)"
echo "Ceilings: $(fmt_int "$CEILING") Snowflake IDs/s per server (idgen_info().ids_per_second; 12 sequence"
echo "bits by default) and $(fmt_int "$UUID7_CEILING") UUIDv7/s (12 rand_a bits per ms, fixed by RFC 9562)."
echo "$(fmt_int "$N") IDs are $(awk -v n="$N" -v c="$CEILING" 'BEGIN { printf "%.0f", 1000 * n / c }') ms of Snowflake sequence and $(awk -v n="$N" -v c="$UUID7_CEILING" 'BEGIN { printf "%.0f", 1000 * n / c }') ms of UUIDv7 ticks; a backend may run at"
echo "most $DRIFT_MS ms ahead of the clock and then waits, so if idgen_snowflake() or idgen_uuid7() is"
echo "faster than its ceiling, this part measures the ceiling (plus a $DRIFT_MS ms head start), not its"
echo "CPU cost.  Part A2 measures their cost; the other expressions have no ceiling."
echo "sql_uuidv7() and idgen_uuid7(): 10 000 values each checked: version 7, variant 10."
echo
part_a A1 "$N"

section "Part A2: the same below the ceilings, N = $N2 (80% of max_drift_ms of sequence)"
echo "No run here can wait for the clock, so this is the generators' own cost, for"
echo "idgen_snowflake() and idgen_uuid7() alike."
echo
part_a A2 "$N2"

echo
echo "ns/value and values/s include the per-row overhead shared by all (generate_series + count);"
echo "'ns over floor' subtracts clock_timestamp()'s figure, 'ns over 1' that of the constant 1 (no function call);"
echo "'vs nextval()' = ns/value of expr / ns/value of nextval();"
echo "'vs gen_random_uuid()' = ns/value of expr / ns/value of gen_random_uuid(), for the UUID expressions."
for k in snowflake uuid7; do
	if [ "${WAITS[A1,$k]}" -gt 0 ]; then
		if [ "$k" = uuid7 ]; then f=idgen_uuid7; else f=idgen_snowflake; fi
		echo "In A1 $f() waited for the clock ${WAITS[A1,$k]} times: its A1 figure is the ceiling; A2 is its cost."
	fi
done
echo "Target: idgen_uuid7() at most ${TARGET}x gen_random_uuid() per value; measured (A2) ${RRATIO[A2,$I_UUID7]}x: $(verdict "${RRATIO[A2,$I_UUID7]}")."

# --- Part B -------------------------------------------------------------------

if [ "$PAIRS" -gt 0 ]; then
	section "Part B: pgbench INSERT throughput (-T $T s per run, clients: $CLIENTS)"
	sql "CREATE TABLE t_snow (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), v int)"
	sql "CREATE TABLE t_serial (id bigserial PRIMARY KEY, v int)"
	echo 'INSERT INTO t_snow (v) VALUES (1);' >"$DIR/snow.sql"
	echo 'INSERT INTO t_serial (v) VALUES (1);' >"$DIR/serial.sql"
	echo "scripts: INSERT INTO t_snow (v) VALUES (1);  /  INSERT INTO t_serial (v) VALUES (1);"
	echo "each run: TRUNCATE both tables + CHECKPOINT, then pgbench -n -f <script> -c C -j C -T $T"
	echo

	# Runs come in adjacent pairs, one of each table, the order alternating from
	# pair to pair (snow serial, serial snow, ...), so that the machine's drift
	# and noise hit both alike; the ratio reported is the median over the pairs
	# of snowflake tps / bigserial tps.
	declare -A TPS_RUNS TPS_MED PAIR_RATIOS TPS_RATIO RATIO_RANGE
	printf '%-8s %-5s %-10s %12s %14s\n' "clients" "pair" "table" "tps" "latency ms"
	for c in $CLIENTS; do
		for ((p = 1; p <= PAIRS; p++)); do
			if ((p % 2)); then order="snow serial"; else order="serial snow"; fi
			declare -A PAIR_TPS=()
			for kind in $order; do
				sql "TRUNCATE t_snow, t_serial" >/dev/null
				sql "CHECKPOINT" >/dev/null
				out=$(as_pg "$BINDIR/pgbench" -n -f "$DIR/$kind.sql" -c "$c" -j "$c" -T "$T" \
					-h "$DIR" -p "$PORT" bench 2>&1) || { echo "$out" >&2; die "pgbench failed"; }
				tps=$(awk '/^tps = / { print $3; exit }' <<<"$out")
				lat=$(awk '/^latency average = / { print $4; exit }' <<<"$out")
				[ -n "$tps" ] || { echo "$out" >&2; die "could not read tps from pgbench"; }
				PAIR_TPS[$kind]=$tps
				TPS_RUNS[$kind,$c]="${TPS_RUNS[$kind,$c]:-} $tps"
				printf '%-8s %-5s %-10s %12.0f %14s\n' "$c" "$p" "$kind" "$tps" "${lat:-?}"
			done
			PAIR_RATIOS[$c]="${PAIR_RATIOS[$c]:-} $(awk -v a="${PAIR_TPS[snow]}" -v b="${PAIR_TPS[serial]}" 'BEGIN { printf "%.4f", a / b }')"
		done
	done

	echo
	printf '%-8s %-22s %-22s %-14s %s\n' "clients" "snowflake tps median" "bigserial tps median" "ratio median" "pair ratios (min .. max)"
	for c in $CLIENTS; do
		for kind in snow serial; do
			TPS_MED[$kind,$c]=$(tr ' ' '\n' <<<"${TPS_RUNS[$kind,$c]}" | grep . | median)
		done
		TPS_RATIO[$c]=$(tr ' ' '\n' <<<"${PAIR_RATIOS[$c]}" | grep . | median | awk '{ printf "%.3f", $1 }')
		RATIO_RANGE[$c]=$(tr ' ' '\n' <<<"${PAIR_RATIOS[$c]}" | grep . | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f .. %.3f", lo, hi }')
		printf '%-8s %-22s %-22s %-14s %s\n' "$c" "$(fmt_int "${TPS_MED[snow,$c]}")" "$(fmt_int "${TPS_MED[serial,$c]}")" \
			"${TPS_RATIO[$c]}" "${RATIO_RANGE[$c]}"
	done
	echo "(ratio = median over $PAIRS adjacent pairs of snowflake tps / bigserial tps; the spread of the pair"
	echo " ratios is the machine's noise: a difference inside it is not a measured difference)"
else
	section "Part B: skipped (BENCH_PAIRS=0)"
fi

# --- Part C -------------------------------------------------------------------

C_KINDS=(uuid7 random sqlv7)
declare -A C_EXPR=([uuid7]="idgen_uuid7()" [random]="gen_random_uuid()" [sqlv7]="sql_uuidv7()")
C_ORDER=(uuid7 random sqlv7 sqlv7 random uuid7)	# each key type twice, mirrored
C_RUNS=2
declare -A C_MS C_IDX C_TBL C_RUNS_S C_MEAN_MS C_MEAN_S C_RATE C_IDX_MEAN C_TBL_MEAN C_TRATIO C_IRATIO
pretty() { sql "SELECT pg_size_pretty($1::bigint)"; }

if [ "$BULK_N" -gt 0 ]; then
	section "Part C: bulk INSERT of $(fmt_int "$BULK_N") rows into a uuid primary key ($C_RUNS loads per key type, mean)"
	sql "CREATE FUNCTION bench_load_ms(q text, n bigint) RETURNS double precision
LANGUAGE plpgsql AS \$f\$
DECLARE
	t0 timestamptz;
	t1 timestamptz;
	c bigint;
BEGIN
	t0 := clock_timestamp();
	EXECUTE q;
	t1 := clock_timestamp();
	GET DIAGNOSTICS c = ROW_COUNT;
	IF c IS DISTINCT FROM n THEN
		RAISE EXCEPTION 'bench load inserted % rows, expected %', c, n;
	END IF;
	RETURN extract(epoch FROM t1 - t0) * 1000;
END
\$f\$"
	echo "each load: CHECKPOINT; CREATE TABLE t_<x> (id uuid PRIMARY KEY DEFAULT <expr>, v int);"
	echo "           INSERT INTO t_<x> (v) SELECT g FROM generate_series(1, $BULK_N) g;"
	echo "           (sizes read), DROP TABLE t_<x>;  so no load sees another's table."
	echo "the INSERT timed in the server by clock_timestamp() around EXECUTE in PL/pgSQL"
	echo "(no client round trip, no psql timing, commit not included: synchronous_commit = off),"
	echo "each load in its own session, order ${C_ORDER[*]}."
	echo "index = pg_relation_size('t_<x>_pkey'), table = pg_relation_size('t_<x>'), right after the load."
	echo "Part B's tables are dropped first."
	echo
	# Part B is done: drop its tables, so autovacuum has no backlog of them
	# to work through while a load is being timed.
	sql "DROP TABLE IF EXISTS t_snow, t_serial"
	sql "SELECT idgen_stats_reset()" >/dev/null
	printf '%-6s %-20s %9s %12s %22s %22s\n' "load" "DEFAULT" "s" "rows/s" "PK index" "table"
	load=0
	for x in "${C_ORDER[@]}"; do
		load=$((load + 1))
		sql "CHECKPOINT" >/dev/null
		sql "CREATE TABLE t_$x (id uuid PRIMARY KEY DEFAULT ${C_EXPR[$x]}, v int)"
		ms=$(sql "SELECT bench_load_ms(\$q\$INSERT INTO t_$x (v) SELECT g FROM generate_series(1, $BULK_N) g\$q\$, $BULK_N)")
		sizes=$(sql "SELECT pg_relation_size('t_${x}_pkey'), pg_relation_size('t_$x')")
		IFS='|' read -r idx tbl <<<"$sizes"
		sql "DROP TABLE t_$x" >/dev/null
		C_MS[$x]="${C_MS[$x]:-} $ms"
		C_IDX[$x]="${C_IDX[$x]:-} $idx"
		C_TBL[$x]="${C_TBL[$x]:-} $tbl"
		printf '%-6s %-20s %9.2f %12s %22s %22s\n' "$load" "${C_EXPR[$x]}" "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }')" \
			"$(fmt_int "$(awk -v ms="$ms" -v n="$BULK_N" 'BEGIN { printf "%.0f", n / (ms / 1000) }')")" \
			"$(pretty "$idx") ($idx)" "$(pretty "$tbl") ($tbl)"
	done

	mean() { awk '{ s = 0; for (k = 1; k <= NF; k++) s += $k; printf "%.3f", s / NF }' <<<"$1"; }
	for x in "${C_KINDS[@]}"; do
		C_MEAN_MS[$x]=$(mean "${C_MS[$x]}")
		C_MEAN_S[$x]=$(awk -v ms="${C_MEAN_MS[$x]}" 'BEGIN { printf "%.2f", ms / 1000 }')
		C_RUNS_S[$x]=$(awk '{ o = ""; for (k = 1; k <= NF; k++) o = o (k > 1 ? "/" : "") sprintf("%.2f", $k / 1000); print o }' <<<"${C_MS[$x]}")
		C_RATE[$x]=$(awk -v ms="${C_MEAN_MS[$x]}" -v n="$BULK_N" 'BEGIN { printf "%.0f", n / (ms / 1000) }')
		C_IDX_MEAN[$x]=$(awk -v b="$(mean "${C_IDX[$x]}")" 'BEGIN { printf "%.0f", b }')
		C_TBL_MEAN[$x]=$(awk -v b="$(mean "${C_TBL[$x]}")" 'BEGIN { printf "%.0f", b }')
	done
	for x in "${C_KINDS[@]}"; do
		C_TRATIO[$x]=$(awk -v a="${C_MEAN_MS[$x]}" -v b="${C_MEAN_MS[random]}" 'BEGIN { printf "%.2f", a / b }')
		C_IRATIO[$x]=$(awk -v a="${C_IDX_MEAN[$x]}" -v b="${C_IDX_MEAN[random]}" 'BEGIN { printf "%.2f", a / b }')
	done

	echo
	printf '%-20s %-18s %10s %22s %22s %10s %10s\n' "DEFAULT" "s mean (runs)" "rows/s" "PK index" "table" "time vs" "index vs"
	printf '%-20s %-18s %10s %22s %22s %10s %10s\n' "" "" "" "" "" "random" "random"
	for x in "${C_KINDS[@]}"; do
		printf '%-20s %-18s %10s %22s %22s %10s %10s\n' "${C_EXPR[$x]}" "${C_MEAN_S[$x]} (${C_RUNS_S[$x]})" "$(fmt_int "${C_RATE[$x]}")" \
			"$(pretty "${C_IDX_MEAN[$x]}") (${C_IDX_MEAN[$x]})" "$(pretty "${C_TBL_MEAN[$x]}") (${C_TBL_MEAN[$x]})" \
			"${C_TRATIO[$x]}x" "${C_IRATIO[$x]}x"
	done
	echo "(mean of $C_RUNS loads; rows/s = rows / mean time; 'vs random' = key type / gen_random_uuid(), for load time and PK index size)"
	for x in "${C_KINDS[@]}"; do
		# Spread of a key type's loads (max - min), as a percentage of their mean.
		spread=$(awk '{ lo = hi = s = $1; for (k = 2; k <= NF; k++) { s += $k; if ($k < lo) lo = $k; if ($k > hi) hi = $k }
			printf "%.0f", 100 * (hi - lo) / (s / NF) }' <<<"${C_MS[$x]}")
		if [ "$spread" -gt 20 ]; then
			echo "noisy: the ${C_EXPR[$x]} loads differ by ${spread}% of their mean; read its ratios with that in mind."
		fi
	done
	echo "idgen_uuid7() / gen_random_uuid(): load time ${C_TRATIO[uuid7]}x, primary-key index ${C_IRATIO[uuid7]}x."
	echo "idgen_stats over Part C (the uuid7 row: waits > 0 would mean the load hit the UUIDv7 ceiling):"
	sql_table "SELECT * FROM idgen_stats"
else
	section "Part C: skipped (BENCH_BULK_N=0)"
fi

# --- keeper -------------------------------------------------------------------

# The keeper's cost: how often it made the durable horizon durable while the
# parts above ran.  Each persist is one small write and durable_rename's four
# fsyncs (the new file, the old one, the renamed file, the directory).
section "keeper: durable horizon persists over the whole run"
read -r K_PERSISTS K_FAILURES K_UPTIME K_LEAD < <(sql "SELECT horizon_persists, horizon_failures,
	round(extract(epoch FROM now() - pg_postmaster_start_time())::numeric, 1), horizon_lead_ms FROM idgen_info()" | tr '|' ' ')
K_RATE=$(awk -v p="$K_PERSISTS" -v t="$K_UPTIME" 'BEGIN { printf "%.2f", (t > 0) ? p / t : 0 }')
K_FSYNC=$(awk -v r="$K_RATE" 'BEGIN { printf "%.1f", 4 * r }')
echo "horizon persists: $K_PERSISTS in $K_UPTIME s of server uptime = $K_RATE per second (about $K_FSYNC fsyncs/s); failures: $K_FAILURES; horizon now $K_LEAD ms ahead of the clock"

# --- summary ------------------------------------------------------------------

section "summary (markdown)"
echo "$(nproc) CPU ${cpu_model:-unknown}, $(mem_gib) GiB, $("$BINDIR/postgres" --version | sed 's/^postgres (PostgreSQL) /PostgreSQL /'), $(date -u +%Y-%m-%d)."
echo
BQ='`'
echo "| expression | ns/value | values/s | vs nextval() | vs gen_random_uuid() | ns/value, below ceiling | vs nextval(), below ceiling | vs gen_random_uuid(), below ceiling |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for ((i = 0; i < NEXPR; i++)); do
	r1="-" r2="-"
	if is_uuid "$i"; then r1="${RRATIO[A1,$i]}x" r2="${RRATIO[A2,$i]}x"; fi
	printf '| %s | %s | %s | %sx | %s | %s | %sx | %s |\n' "$BQ${EXPRS[i]}$BQ" "${NS[A1,$i]}" "$(fmt_int "${RATE[A1,$i]}")" "${RATIO[A1,$i]}" "$r1" \
		"${NS[A2,$i]}" "${RATIO[A2,$i]}" "$r2"
done
echo
echo "One backend; median of $REPS runs of $(fmt_int "$N") values (below ceiling: $(fmt_int "$N2") values, so neither idgen_snowflake() nor idgen_uuid7() waits);"
echo "the per-row cost of generate_series + count is included in every row (clock_timestamp() is that floor)."
echo "${BQ}sql_uuidv7()${BQ} is a hand-written SQL function (gen_random_uuid() with Unix milliseconds overlaid and the version set to 7)."
echo "At $(fmt_int "$N") values idgen_snowflake() ran at ${PCT[A1,snowflake]}% of its $(fmt_int "$CEILING") IDs/s per-server ceiling (below it: ${PCT[A2,snowflake]}%, borrowing ahead of the clock),"
echo "idgen_uuid7() at ${PCT[A1,uuid7]}% of its $(fmt_int "$UUID7_CEILING") UUIDs/s ceiling (below it: ${PCT[A2,uuid7]}%); their cost is the below-ceiling column."
echo "Target idgen_uuid7() <= ${TARGET}x gen_random_uuid(): measured ${RRATIO[A2,$I_UUID7]}x below the ceiling, $(verdict "${RRATIO[A2,$I_UUID7]}")."
echo
if [ "$PAIRS" -gt 0 ]; then
	echo "| pgbench INSERT, clients | idgen_snowflake() tps | bigserial tps | ratio (median of pairs) | pair ratios |"
	echo "|---:|---:|---:|---:|---:|"
	for c in $CLIENTS; do
		printf '| %s | %s | %s | %s | %s |\n' "$c" "$(fmt_int "${TPS_MED[snow,$c]}")" "$(fmt_int "${TPS_MED[serial,$c]}")" \
			"${TPS_RATIO[$c]}" "${RATIO_RANGE[$c]}"
	done
	echo
	echo "Median tps of $PAIRS runs of $T s each per cell, in $PAIRS adjacent pairs alternating the order; synchronous_commit = off."
fi

if [ "$BULK_N" -gt 0 ]; then
	echo
	echo "| bulk INSERT, uuid PRIMARY KEY DEFAULT | load s | rows/s | PK index | table | time vs gen_random_uuid() | index vs gen_random_uuid() |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for x in "${C_KINDS[@]}"; do
		printf '| %s | %s | %s | %s | %s | %sx | %sx |\n' "$BQ${C_EXPR[$x]}$BQ" "${C_MEAN_S[$x]}" "$(fmt_int "${C_RATE[$x]}")" \
			"$(pretty "${C_IDX_MEAN[$x]}")" "$(pretty "${C_TBL_MEAN[$x]}")" "${C_TRATIO[$x]}" "${C_IRATIO[$x]}"
	done
	echo
	echo "INSERT INTO t (v) SELECT g FROM generate_series(1, $(fmt_int "$BULK_N")) g into a fresh table per load, timed in the server;"
	echo "mean of $C_RUNS loads per key type (order ${C_ORDER[*]}), CHECKPOINT before and DROP after each, synchronous_commit = off, shared_buffers = 256MB."
fi
echo
echo "Keeper: $K_PERSISTS durable-horizon persists in $K_UPTIME s = $K_RATE/s (about $K_FSYNC fsyncs/s), $K_FAILURES failures."
