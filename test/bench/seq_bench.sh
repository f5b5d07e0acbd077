#!/usr/bin/env bash
#
# test/bench/seq_bench.sh: what idgen's per-key business sequences
# (idgen_seq_next) cost, next to the counter people write by hand.
#
#   bash test/bench/seq_bench.sh
#
# These are MEASUREMENTS, not tests: the script never fails on a figure (nor
# on the project's target, idgen_seq_next() at least 1.0x the throughput of
# the hand-written counter in Parts A and B, which it only prints).  It exits
# non-zero only if something breaks (the server does not start, a query
# fails, pgbench fails).  Results depend on the machine; the script prints
# the machine first so figures are never quoted without it.
#
# What it does
#   A throwaway cluster is created in a mktemp directory (initdb; Unix socket
#   in that directory, no TCP; shared_preload_libraries = 'idgen',
#   max_connections = 50, shared_buffers = 256MB, plus jit = off and
#   max_parallel_workers_per_gather = 0 as in bench.sh).  It is always
#   stopped and removed at exit.
#
#   The baseline is the hand-written counter:
#       CREATE TABLE counters (key text PRIMARY KEY, value bigint NOT NULL);
#       INSERT INTO counters (key, value) VALUES (<key>, 1)
#           ON CONFLICT (key) DO UPDATE SET value = counters.value + 1
#           RETURNING value;
#   Like idgen_seq_next(key), it is transactional: the value belongs to the
#   caller's transaction and concurrent callers of one key queue on its row
#   lock until the holder commits.
#
#   Parts A and B run twice: first with the default synchronous_commit = on
#   (these are transactional counters: a commit waits for its WAL flush, and
#   on a hot key the row lock is held until then), then with
#   synchronous_commit = off (ALTER SYSTEM + reload), reported separately.
#   Each setting starts from freshly created tables (DROP/CREATE EXTENSION
#   idgen, DROP/CREATE TABLE counters) with no key pre-created; within a
#   setting nothing is truncated, so keys' rows persist from run to run as
#   they would in real use.
#
#   Part A, one hot key: pgbench -n -c 8 -j 8 -T SEQ_BENCH_T -M simple with
#       SELECT idgen_seq_next('hot');
#   versus the hand-written INSERT ... ON CONFLICT on key 'hot'.
#   Part B, 10 000 random keys: the same two with
#       \set k random(1, 10000)
#   and the key 'k:' || :k.
#   Runs come in SEQ_BENCH_PAIRS adjacent pairs per part and setting (one run
#   of each method), the order alternating from pair to pair (idgen hand,
#   hand idgen, ...) so the machine's drift hits both alike, with a
#   CHECKPOINT before every run.  Reported: tps per run, the median tps per
#   (part, method), and the median over the pairs of idgen tps / hand-written
#   tps with the min .. max of the pair ratios (the machine's noise).  Both
#   methods use pgbench's default query mode, -M simple (every statement
#   parsed and planned each time; idgen_seq_next() prepares its own internal
#   statements once per backend either way).  As a sanity check (printed,
#   not enforced), each key's final value is compared with the number of
#   transactions pgbench counted for it.
#
#   Part C, batches, one session: the query
#       SELECT count(*) FROM idgen_seq_next('batch', 1000)
#   is EXECUTE-d SEQ_BENCH_REPS times in a loop inside a PL/pgSQL function
#   that reads clock_timestamp() immediately before and after the loop (as
#   bench.sh times its queries), so no client round trip, psql timing or
#   commit is included; a measurement is one such call (one transaction).
#   For comparison, one value per row:
#       SELECT count(idgen_seq_next('single')) FROM generate_series(1, 20000)
#   timed the same way (one EXECUTE per measurement; its 20 000 calls are
#   one transaction, which writes the key's row at its first call and at
#   commit and advances it in memory in between; seq_txn_bench.sh
#   measures the cost per call for other loop lengths).  One
#   discarded warm-up of each, then 5 measurements of each, interleaved
#   (batch single, single batch, ...), median reported as values per second.
#   Part C runs with synchronous_commit back at on (not that the timed region
#   contains a commit) on freshly created tables.
#
#   It ends with a markdown summary suitable for a README.
#
# Environment
#   PG_CONFIG        pg_config of the installation (default
#                    /usr/lib/postgresql/15/bin/pg_config); binaries from
#                    its --bindir.
#   SEQ_BENCH_T      seconds per pgbench run (default 10)
#   SEQ_BENCH_PAIRS  pairs of pgbench runs (idgen, hand-written) per part and
#                    synchronous_commit setting (default 3)
#   SEQ_BENCH_REPS   batch calls per Part C measurement (default 200)
#   BENCH_INSTALL    as root, run `make install` first, which rebuilds if the
#                    sources changed (default 1; 0 skips)
#   BENCH_PORT       port number of the throwaway server (default: a free
#                    55xxx number; it only names the Unix socket)
#
# Run as root (Debian), the server and clients run as the postgres user;
# run as another user, they run as that user and the extension must already
# be installed.  With defaults, the pgbench runs take 2 settings x 2 parts x
# 3 pairs x 2 runs x 10 s = 240 s; with the checkpoints, the setup and Part C
# (a few seconds) the whole script takes about 4.5 minutes on a 2-core
# machine.
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
T=${SEQ_BENCH_T:-10}
PAIRS=${SEQ_BENCH_PAIRS:-3}
REPS=${SEQ_BENCH_REPS:-200}
INSTALL=${BENCH_INSTALL:-1}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROG=seq_bench.sh
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"

CLIENTS=8			# pgbench clients (and threads)
NKEYS=10000			# Part B key space
BATCH=1000			# values per Part C batch call
SINGLE_N=20000		# values per Part C one-row-at-a-time measurement
MEASUREMENTS=5		# Part C measurements of each, median reported
TARGET=1.0			# project target: idgen / hand-written tps >= 1.0x; printed, never enforced


positive SEQ_BENCH_T "$T"
positive SEQ_BENCH_PAIRS "$PAIRS"
positive SEQ_BENCH_REPS "$REPS"

# The throwaway cluster, the postgres user, psql helpers: shared with the
# other benchmark script.
# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"

# verdict RATIO: how RATIO (idgen / hand-written tps) compares with TARGET.
verdict() {
	awk -v r="$1" -v t="$TARGET" 'BEGIN {
		if (r >= t) printf "meets the target of at least %.1fx", t
		else printf "BELOW the target of at least %.1fx by %.1f%%", t, 100 * (1 - r / t) }'
}
# Words on stdin, one per line: their median / "min .. max".
words_median() { tr ' ' '\n' | grep . | median; }
words_range() { tr ' ' '\n' | grep . | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f .. %.3f", lo, hi }'; }

# --- the machine and the cluster -----------------------------------------------

print_machine
init_cluster ""
echo "  synchronous_commit: the default (on) for the first round of Parts A and B and for Part C,"
echo "  off (ALTER SYSTEM + pg_reload_conf()) for the second round of Parts A and B"
start_cluster

# fresh_tables: the extension (and so its idgen_seq table) and the
# hand-written counters table, created anew and empty.
fresh_tables() {
	sql "SET client_min_messages = warning; DROP EXTENSION IF EXISTS idgen; DROP TABLE IF EXISTS counters"
	sql "CREATE EXTENSION idgen"
	sql "CREATE TABLE counters (key text PRIMARY KEY, value bigint NOT NULL)"
}

# set_sync on|off: set synchronous_commit for new sessions and wait until a
# new session sees it (the postmaster reloads asynchronously).
set_sync() {
	local want=$1 got=
	if [ "$want" = on ]; then
		sql "ALTER SYSTEM RESET synchronous_commit"
	else
		sql "ALTER SYSTEM SET synchronous_commit = $want"
	fi
	sql "SELECT pg_reload_conf()" >/dev/null
	for _ in $(seq 50); do
		got=$(sql "SHOW synchronous_commit")
		[ "$got" = "$want" ] && return 0
		sleep 0.1
	done
	die "synchronous_commit is '$got' after the reload, expected '$want'"
}

# --- Parts A and B --------------------------------------------------------------

HAND_UPSERT="INSERT INTO counters (key, value) VALUES (%s, 1) ON CONFLICT (key) DO UPDATE SET value = counters.value + 1 RETURNING value;"
# shellcheck disable=SC2059	# the format is ours
{
	echo "SELECT idgen_seq_next('hot');" >"$DIR/A_idgen.sql"
	printf "$HAND_UPSERT\n" "'hot'" >"$DIR/A_hand.sql"
	printf '\\set k random(1, %d)\n' "$NKEYS" >"$DIR/B_idgen.sql"
	echo "SELECT idgen_seq_next('k:' || :k);" >>"$DIR/B_idgen.sql"
	printf '\\set k random(1, %d)\n' "$NKEYS" >"$DIR/B_hand.sql"
	printf "$HAND_UPSERT\n" "'k:' || :k" >>"$DIR/B_hand.sql"
}
declare -A PART_TITLE=([A]="one hot key" [B]="$(fmt_int "$NKEYS") random keys")
declare -A METHOD_TITLE=([idgen]="idgen_seq_next()" [hand]="hand-written upsert")

section "Parts A and B: pgbench scripts"
for f in A_idgen A_hand B_idgen B_hand; do
	echo "$f.sql:"
	sed 's/^/    /' "$DIR/$f.sql"
done
echo
echo "each run: CHECKPOINT, then pgbench -n -M simple -c $CLIENTS -j $CLIENTS -T $T -f <script>"
echo "(-M simple, pgbench's default, for both methods: every statement is parsed and planned"
echo " each time; idgen_seq_next() prepares its internal statements once per backend anyway)"
echo "$PAIRS adjacent pairs per part and setting, order alternating (idgen hand, hand idgen, ...);"
echo "tables created fresh at the start of each setting, never truncated between runs."

# Results, keyed "setting,part[,method]".
declare -A TPS_RUNS XACTS TPS_MED PAIR_RATIOS RATIO_MED RATIO_RANGE CHECKS

# check VALUE XACTS: whether a counter's final value equals the transactions
# pgbench counted for it.
check() { if [ "$1" = "$2" ]; then echo "ok"; else echo "MISMATCH (values $1, transactions $2)"; fi; }

# run_setting SETTING: Parts A and B with synchronous_commit = SETTING.
run_setting() {
	local s=$1 part p order m out tps lat n
	local -A pair_tps
	set_sync "$s"
	fresh_tables
	section "Parts A and B with synchronous_commit = $(sql "SHOW synchronous_commit") (SHOW in a new session)"
	printf '%-4s %-22s %-5s %-22s %12s %12s %12s\n' "part" "keys" "pair" "method" "tps" "latency ms" "xacts"
	for part in A B; do
		for ((p = 1; p <= PAIRS; p++)); do
			if ((p % 2)); then order="idgen hand"; else order="hand idgen"; fi
			pair_tps=()
			for m in $order; do
				sql "CHECKPOINT" >/dev/null
				out=$(as_pg "$BINDIR/pgbench" -n -M simple -f "$DIR/${part}_$m.sql" -c "$CLIENTS" -j "$CLIENTS" -T "$T" \
					-h "$DIR" -p "$PORT" bench 2>&1) || { echo "$out" >&2; die "pgbench failed"; }
				tps=$(awk '/^tps = / { print $3; exit }' <<<"$out")
				lat=$(awk '/^latency average = / { print $4; exit }' <<<"$out")
				n=$(awk -F': ' '/^number of transactions actually processed/ { print $2; exit }' <<<"$out")
				{ [ -n "$tps" ] && [ -n "$n" ]; } || { echo "$out" >&2; die "could not read tps from pgbench"; }
				pair_tps[$m]=$tps
				TPS_RUNS[$s,$part,$m]="${TPS_RUNS[$s,$part,$m]:-} $tps"
				XACTS[$s,$part,$m]=$((${XACTS[$s,$part,$m]:-0} + n))
				printf '%-4s %-22s %-5s %-22s %12.0f %12s %12s\n' "$part" "${PART_TITLE[$part]}" "$p" "${METHOD_TITLE[$m]}" "$tps" "${lat:-?}" "$n"
			done
			PAIR_RATIOS[$s,$part]="${PAIR_RATIOS[$s,$part]:-} $(awk -v a="${pair_tps[idgen]}" -v b="${pair_tps[hand]}" 'BEGIN { printf "%.4f", a / b }')"
		done
	done

	echo
	printf '%-4s %-22s %-24s %-26s %-8s %-16s %s\n' "part" "keys" "idgen_seq_next() tps" "hand-written upsert tps" "ratio" "pair ratios" "target"
	for part in A B; do
		for m in idgen hand; do
			TPS_MED[$s,$part,$m]=$(words_median <<<"${TPS_RUNS[$s,$part,$m]}")
		done
		RATIO_MED[$s,$part]=$(words_median <<<"${PAIR_RATIOS[$s,$part]}" | awk '{ printf "%.3f", $1 }')
		RATIO_RANGE[$s,$part]=$(words_range <<<"${PAIR_RATIOS[$s,$part]}")
		printf '%-4s %-22s %-24s %-26s %-8s %-16s %s\n' "$part" "${PART_TITLE[$part]}" "$(fmt_int "${TPS_MED[$s,$part,idgen]}")" \
			"$(fmt_int "${TPS_MED[$s,$part,hand]}")" "${RATIO_MED[$s,$part]}x" "${RATIO_RANGE[$s,$part]}" "$(verdict "${RATIO_MED[$s,$part]}")"
	done
	echo "(tps = median of $PAIRS runs; ratio = median over the $PAIRS adjacent pairs of idgen tps / hand-written tps;"
	echo " the spread of the pair ratios is the machine's noise: a difference inside it is not a measured difference)"

	# Sanity: every committed transaction handed out exactly one value.
	local got_ai got_ah got_bi got_bh keys_bi keys_bh
	read -r got_ai got_ah got_bi got_bh keys_bi keys_bh < <(sql "SELECT
		(SELECT value FROM idgen_seq WHERE key = 'hot'),
		(SELECT value FROM counters WHERE key = 'hot'),
		(SELECT sum(value) FROM idgen_seq WHERE key LIKE 'k:%'),
		(SELECT sum(value) FROM counters WHERE key LIKE 'k:%'),
		(SELECT count(*) FROM idgen_seq WHERE key LIKE 'k:%'),
		(SELECT count(*) FROM counters WHERE key LIKE 'k:%')" | tr '|' ' ')
	CHECKS[$s]="A idgen $(check "$got_ai" "${XACTS[$s,A,idgen]}"), A hand $(check "$got_ah" "${XACTS[$s,A,hand]}"), B idgen $(check "$got_bi" "${XACTS[$s,B,idgen]}"), B hand $(check "$got_bh" "${XACTS[$s,B,hand]}")"
	echo
	echo "sanity (final values vs transactions pgbench counted): ${CHECKS[$s]}"
	echo "Part B keys touched: idgen $(fmt_int "$keys_bi"), hand-written $(fmt_int "$keys_bh") of $(fmt_int "$NKEYS")"
}

SETTINGS=(on off)
for s in "${SETTINGS[@]}"; do
	run_setting "$s"
done

# --- Part C -------------------------------------------------------------------

set_sync on
fresh_tables
section "Part C: batches in one session (synchronous_commit = $(sql "SHOW synchronous_commit"), median of $MEASUREMENTS)"
sql "CREATE FUNCTION bench_calls_ms(q text, reps int, n bigint) RETURNS double precision
LANGUAGE plpgsql AS \$f\$
DECLARE
	t0 timestamptz;
	t1 timestamptz;
	c bigint;
BEGIN
	t0 := clock_timestamp();
	FOR i IN 1 .. reps LOOP
		EXECUTE q INTO c;
		IF c IS DISTINCT FROM n THEN
			RAISE EXCEPTION 'bench query counted % values, expected %', c, n;
		END IF;
	END LOOP;
	t1 := clock_timestamp();
	RETURN extract(epoch FROM t1 - t0) * 1000;
END
\$f\$"

Q_BATCH="SELECT count(*) FROM idgen_seq_next('batch', $BATCH)"
Q_SINGLE="SELECT count(idgen_seq_next('single')) FROM generate_series(1, $SINGLE_N)"
declare -A C_Q=([batch]="$Q_BATCH" [single]="$Q_SINGLE")
declare -A C_REPS=([batch]="$REPS" [single]=1)
declare -A C_N=([batch]="$BATCH" [single]="$SINGLE_N")
declare -A C_VALUES=([batch]=$((REPS * BATCH)) [single]="$SINGLE_N")
declare -A C_TITLE=([batch]="idgen_seq_next('batch', $BATCH)" [single]="idgen_seq_next('single') per row")
echo "batch:  $Q_BATCH"
echo "        EXECUTE-d $REPS times per measurement = $(fmt_int "${C_VALUES[batch]}") values"
echo "single: $Q_SINGLE"
echo "        EXECUTE-d once per measurement = $(fmt_int "${C_VALUES[single]}") values"
echo "timed in the server by clock_timestamp() around the EXECUTE loop in PL/pgSQL (no round trip,"
echo "no commit); one psql session, a measurement per statement (so per transaction), one discarded"
echo "warm-up of each, then $MEASUREMENTS of each interleaved (batch single, single batch, ...)."
echo

c_stmt() { printf "SELECT '%s|%s|' || bench_calls_ms(\$q\$%s\$q\$, %d, %d);\n" "$1" "$2" "${C_Q[$2]}" "${C_REPS[$2]}" "${C_N[$2]}"; }
{
	c_stmt warmup batch
	c_stmt warmup single
	for ((r = 1; r <= MEASUREMENTS; r++)); do
		if ((r % 2)); then order="batch single"; else order="single batch"; fi
		for x in $order; do c_stmt "$r" "$x"; done
	done
} >"$DIR/part_c.sql"
out=$(as_pg "${PSQL[@]}" -At -f "$DIR/part_c.sql")

declare -A C_MS C_RATE
printf '%-36s' "ms per measurement"
for ((r = 1; r <= MEASUREMENTS; r++)); do printf '%9s' "m $r"; done
printf '%10s %14s\n' "median" "values/s"
for x in batch single; do
	runs=$(awk -F'|' -v x="$x" '$1 ~ /^[0-9]+$/ && $2 == x { print $1, $3 }' <<<"$out" | sort -n | awk '{ print $2 }')
	[ "$(grep -c . <<<"$runs")" -eq "$MEASUREMENTS" ] || die "Part C: expected $MEASUREMENTS measurements of $x"
	C_MS[$x]=$(median <<<"$runs")
	C_RATE[$x]=$(awk -v ms="${C_MS[$x]}" -v n="${C_VALUES[$x]}" 'BEGIN { printf "%.0f", n / (ms / 1000) }')
	printf '%-36s' "${C_TITLE[$x]}"
	while read -r ms; do printf '%9.1f' "$ms"; done <<<"$runs"
	printf '%10.1f %14s\n' "${C_MS[$x]}" "$(fmt_int "${C_RATE[$x]}")"
done
C_US_CALL=$(awk -v ms="${C_MS[batch]}" -v r="$REPS" 'BEGIN { printf "%.1f", 1000 * ms / r }')
C_US_SINGLE=$(awk -v ms="${C_MS[single]}" -v n="$SINGLE_N" 'BEGIN { printf "%.2f", 1000 * ms / n }')
C_X=$(awk -v a="${C_RATE[batch]}" -v b="${C_RATE[single]}" 'BEGIN { printf "%.1f", a / b }')
echo
echo "batch: $C_US_CALL us per call of $BATCH values; one row at a time: $C_US_SINGLE us per value;"
echo "batches hand out ${C_X}x as many values per second."
echo "note: the one-row-at-a-time query makes all its $(fmt_int "$SINGLE_N") calls in one transaction, which writes the"
echo "key's row at its first call and at commit and advances it in memory in between (seq_txn_bench.sh"
echo "measures the cost per call for other numbers of calls per transaction)."
expect_batch=$(((MEASUREMENTS + 1) * REPS * BATCH))
expect_single=$(((MEASUREMENTS + 1) * SINGLE_N))
read -r got_batch got_single < <(sql "SELECT idgen_seq_current('batch'), idgen_seq_current('single')" | tr '|' ' ')
if [ "$got_batch" = "$expect_batch" ] && [ "$got_single" = "$expect_single" ]; then C_CHECK=ok; else C_CHECK="MISMATCH (batch $got_batch, expected $expect_batch; single $got_single, expected $expect_single)"; fi
echo "sanity (final values vs values handed out, warm-up included): $C_CHECK"

# --- summary ------------------------------------------------------------------

section "summary (markdown)"
echo "$(nproc) CPU ${cpu_model:-unknown}, $(mem_gib) GiB, $("$BINDIR/postgres" --version | sed 's/^postgres (PostgreSQL) /PostgreSQL /'), $(date -u +%Y-%m-%d)."
echo
BQ='`'
echo "| part | synchronous_commit | ${BQ}idgen_seq_next()${BQ} tps | hand-written upsert tps | idgen / hand-written (median of pairs) | pair ratios | target >= ${TARGET}x |"
echo "|---|---|---:|---:|---:|---:|---|"
for s in "${SETTINGS[@]}"; do
	for part in A B; do
		if awk -v r="${RATIO_MED[$s,$part]}" -v t="$TARGET" 'BEGIN { exit !(r >= t) }'; then v=met; else
			v="not met ($(awk -v r="${RATIO_MED[$s,$part]}" -v t="$TARGET" 'BEGIN { printf "%.1f", 100 * (1 - r / t) }')% below)"; fi
		printf '| %s: %s | %s | %s | %s | %sx | %s | %s |\n' "$part" "${PART_TITLE[$part]}" "$s" \
			"$(fmt_int "${TPS_MED[$s,$part,idgen]}")" "$(fmt_int "${TPS_MED[$s,$part,hand]}")" \
			"${RATIO_MED[$s,$part]}" "${RATIO_RANGE[$s,$part]}" "$v"
	done
done
echo
echo "pgbench -n -M simple -c $CLIENTS -j $CLIENTS -T $T; median tps of $PAIRS runs per cell, in $PAIRS adjacent pairs alternating the order,"
echo "CHECKPOINT before each run, rows never truncated within a setting; hand-written upsert ="
echo "${BQ}INSERT INTO counters (key, value) VALUES (k, 1) ON CONFLICT (key) DO UPDATE SET value = counters.value + 1 RETURNING value${BQ}."
echo "shared_buffers = 256MB, max_connections = 50."
echo
echo "| one session, timed in the server | values/s | per call |"
echo "|---|---:|---:|"
echo "| ${BQ}SELECT count(*) FROM idgen_seq_next('batch', $BATCH)${BQ} | $(fmt_int "${C_RATE[batch]}") | $C_US_CALL us per $BATCH values |"
echo "| ${BQ}SELECT count(idgen_seq_next('single')) FROM generate_series(1, $SINGLE_N)${BQ} | $(fmt_int "${C_RATE[single]}") | $C_US_SINGLE us per value |"
echo
echo "Median of $MEASUREMENTS measurements ($REPS batch calls, or $(fmt_int "$SINGLE_N") single values, per measurement, in one transaction);"
echo "batches hand out ${C_X}x as many values per second as one row at a time (all of a transaction's calls on"
echo "one key after its first advance the key in memory; seq_txn_bench.sh measures them)."
