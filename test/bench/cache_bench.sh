#!/usr/bin/env bash
#
# test/bench/cache_bench.sh: what cached per-key sequences (cache => n) cost,
# next to the transactional mode, the hand-written counter, nextval(), the
# SELECT 1 round trip and Redis INCR, measured side by side in one run.
#
#   bash test/bench/cache_bench.sh
#
# These are MEASUREMENTS, not tests: the script never fails on a figure (nor
# on the project's targets, which it only prints: cached mode at least 1.0x
# Redis INCR and at least 0.85x the SELECT 1 floor with 8 clients; one
# backend's cost per value at most 1.0x nextval()'s).  It exits non-zero
# only if something breaks.  It prints the machine first.
#
# What it does
#   A throwaway PostgreSQL cluster (test/bench/lib.sh: socket in a mktemp
#   directory, no TCP, idgen preloaded, synchronous_commit at its default,
#   on) and a throwaway Redis (Debian's redis-server, installed if missing
#   when run as root; appendonly yes, appendfsync everysec, no RDB saves,
#   listening on a Unix socket in the same directory, no TCP), both stopped
#   and removed at exit.
#
#   idgen.seq_cache_keys is 16384, so the 10 000 cached keys of Part B all
#   fit, and each is used once before the runs (see the README: with more
#   keys in use than entries, keys are evicted and every call waits for a
#   new segment).
#
#   Part A, one hot key, and Part B, 10 000 random keys ('\set k
#   random(1, 10000)'): pgbench -n -M prepared -c 8 -j 8 -T CACHE_BENCH_T
#   with one statement per transaction:
#       cached          SELECT idgen_seq_next('hc')         (cache => 1000)
#                       SELECT idgen_seq_next('c:' || :k)   (cache => 100)
#       transactional   SELECT idgen_seq_next('ht') / ('t:' || :k)
#       hand-written    INSERT INTO counters ... ON CONFLICT (key) DO UPDATE
#                       SET value = counters.value + 1 RETURNING value
#       nextval         SELECT nextval('s')   (one sequence in both parts)
#       SELECT 1        the round-trip floor
#   and redis-benchmark -c 8 -n CACHE_BENCH_REDIS_N over the Unix socket:
#       INCR hot  /  INCR key:__rand_int__ with -r 10000
#   CACHE_BENCH_ROUNDS rounds, the order of the methods rotating from round
#   to round; reported: tps per run and the median per method, and the
#   ratios of the medians.
#
#   Part C, one backend: SELECT count(idgen_seq_next('one')) FROM
#   generate_series(1, 200000) (a cached key) against the same with
#   nextval('s1'), timed in the server (clock_timestamp() around EXECUTE in
#   PL/pgSQL), 5 measurements each, interleaved, median.
#
# Settings (environment):
#   CACHE_BENCH_T        seconds per pgbench run (default 5)
#   CACHE_BENCH_ROUNDS   rounds (default 3)
#   CACHE_BENCH_REDIS_N  requests per redis-benchmark run (default 500000)
#   CACHE_BENCH_PARTS    which of the parts to run (default "A B C")
#   PG_CONFIG            pg_config of the server (default PostgreSQL 15's)
#   BENCH_INSTALL=0      do not run make install first (as root it does)
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
T=${CACHE_BENCH_T:-5}
ROUNDS=${CACHE_BENCH_ROUNDS:-3}
PARTS=${CACHE_BENCH_PARTS:-A B C}
REDIS_N=${CACHE_BENCH_REDIS_N:-500000}
INSTALL=${BENCH_INSTALL:-1}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROG=cache_bench.sh
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"

CLIENTS=8
NKEYS=10000
SINGLE_N=200000
MEASUREMENTS=5

positive CACHE_BENCH_T "$T"
positive CACHE_BENCH_ROUNDS "$ROUNDS"
positive CACHE_BENCH_REDIS_N "$REDIS_N"

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	[ "$(id -u)" = 0 ] || die "redis-server and redis-benchmark are needed (Debian package redis-server)"
	echo "installing redis-server ..." >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } ||
		die "could not install redis-server"
fi
systemctl stop redis-server >/dev/null 2>&1 || true	# the package's own server, if it started one

# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"

REDIS_SOCK=$DIR/redis.sock
REDIS_PID=
stop_redis() { if [ -n "$REDIS_PID" ]; then kill "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null; fi; REDIS_PID=; }
cleanup_all() { local rc=$?; set +e; stop_redis; (exit "$rc"); cleanup; }
trap cleanup_all EXIT

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

print_machine
printf '%-10s %s\n' "redis" "$(redis-server --version | head -n 1)"
init_cluster "idgen.seq_cache_keys = 16384"
start_cluster

sql "CREATE EXTENSION idgen" >/dev/null
sql "CREATE TABLE counters (key text PRIMARY KEY, value bigint NOT NULL)" >/dev/null
sql "CREATE SEQUENCE s; CREATE SEQUENCE s1" >/dev/null
sql "SELECT idgen_seq_configure('hc', cache => 1000)" >/dev/null
sql "SELECT count(idgen_seq_configure('c:' || i, cache => 100)) FROM generate_series(1, $NKEYS) i" >/dev/null
sql "SELECT idgen_seq_configure('one', cache => 1000)" >/dev/null
# The keys live in database bench, not postgres: configuring them had the
# idgen sequencer launcher start bench's own idgen sequencer, which reserves
# their segments (no setting names a database).
for _ in $(seq 100); do
	[ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idgen sequencer' AND datname = 'bench'")" = 1 ] && break
	sleep 0.2
done
[ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idgen sequencer' AND datname = 'bench'")" = 1 ] ||
	die "the idgen sequencer of database bench did not start"
echo "  the keys are in database bench; its idgen sequencer reserves their segments"
# Warm the cache: every cached key has its entry and first segment before the
# runs, as in a service that has been running (the first call of a key waits
# for its first segment to be reserved).
sql "SELECT count(idgen_seq_next('c:' || i)) FROM generate_series(1, $NKEYS) i" >/dev/null
echo "  idgen.seq_cache_keys = 16384 (all $NKEYS keys fit); every cached key used once before the runs"

redis-server --port 0 --unixsocket "$REDIS_SOCK" --unixsocketperm 700 --dir "$DIR" \
	--appendonly yes --appendfsync everysec --save '' --daemonize no --logfile "$DIR/redis.log" &
REDIS_PID=$!
for _ in $(seq 100); do redis-cli -s "$REDIS_SOCK" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -s "$REDIS_SOCK" ping >/dev/null 2>&1 || die "redis-server did not start"
echo "  redis-server: unix socket $REDIS_SOCK, appendonly yes, appendfsync everysec, save ''"

section "pgbench scripts and redis-benchmark commands"
declare -A TITLE=([cached]="idgen_seq_next() cached" [trans]="idgen_seq_next() transactional"
	[hand]="hand-written upsert" [nextval]="nextval()" [select1]="SELECT 1" [redis]="Redis INCR")
METHODS="cached trans hand nextval select1 redis"
write_script() { printf '%s\n' "${@:2}" >"$DIR/$1.sql"; }
write_script A_cached "SELECT idgen_seq_next('hc');"
write_script A_trans "SELECT idgen_seq_next('ht');"
write_script A_hand "INSERT INTO counters (key, value) VALUES ('hot', 1) ON CONFLICT (key) DO UPDATE SET value = counters.value + 1 RETURNING value;"
write_script B_cached "\\set k random(1, $NKEYS)" "SELECT idgen_seq_next('c:' || :k);"
write_script B_trans "\\set k random(1, $NKEYS)" "SELECT idgen_seq_next('t:' || :k);"
write_script B_hand "\\set k random(1, $NKEYS)" "INSERT INTO counters (key, value) VALUES ('h:' || :k, 1) ON CONFLICT (key) DO UPDATE SET value = counters.value + 1 RETURNING value;"
for part in A B; do
	write_script "${part}_nextval" "SELECT nextval('s');"
	write_script "${part}_select1" "SELECT 1;"
done
declare -A REDIS_ARGS=([A]="INCR hot" [B]="-r $NKEYS INCR key:__rand_int__")
for part in A B; do
	for m in cached trans hand nextval select1; do printf '%s_%-8s %s\n' "$part" "$m" "$(tr '\n' ' ' <"$DIR/${part}_$m.sql")"; done
	printf '%s_%-8s redis-benchmark -s <socket> -c %d -n %d %s\n' "$part" redis "$CLIENTS" "$REDIS_N" "${REDIS_ARGS[$part]}"
done
echo "each pgbench run: pgbench -n -M prepared -c $CLIENTS -j $CLIENTS -T $T; $ROUNDS rounds, the order rotating"

declare -A RUNS
section "runs (tps)"
printf '%-4s %-6s %-34s %12s\n' part round method tps
PG_PARTS=$(tr ' ' '\n' <<<"$PARTS" | { grep -E '^[AB]$' || true; } | tr '\n' ' ')
for part in $PG_PARTS; do
	for ((r = 1; r <= ROUNDS; r++)); do
		# rotate the order of the methods from round to round
		read -ra ms <<<"$METHODS"
		for ((i = 0; i < ${#ms[@]}; i++)); do
			m=${ms[$(((i + r - 1) % ${#ms[@]}))]}
			if [ "$m" = redis ]; then
				# shellcheck disable=SC2086
				out=$(redis-benchmark -s "$REDIS_SOCK" -c "$CLIENTS" -n "$REDIS_N" -q ${REDIS_ARGS[$part]} 2>&1) ||
					{ echo "$out" >&2; die "redis-benchmark failed"; }
				tps=$(tr '\r' '\n' <<<"$out" | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i == "requests") v = $(i - 1) } END { print v }')
			else
				out=$(as_pg "$BINDIR/pgbench" -n -M prepared -f "$DIR/${part}_$m.sql" -c "$CLIENTS" -j "$CLIENTS" -T "$T" \
					-h "$DIR" -p "$PORT" bench 2>&1) || { echo "$out" >&2; die "pgbench failed"; }
				tps=$(awk '/^tps = / { print $3; exit }' <<<"$out")
			fi
			[ -n "$tps" ] || { echo "$out" >&2; die "could not read the rate of $part $m"; }
			RUNS[$part,$m]="${RUNS[$part,$m]:-} $tps"
			printf '%-4s %-6s %-34s %12.0f\n' "$part" "$r" "${TITLE[$m]}" "$tps"
		done
	done
done

declare -A C_NS=([cached]=0 [nextval]=1)
if [[ " $PARTS " == *" C "* ]]; then
section "Part C: one backend, cost per value (median of $MEASUREMENTS, timed in the server)"
create_bench_ms "$SINGLE_N"
declare -A CQ=([cached]="SELECT count(idgen_seq_next('one')) FROM generate_series(1, $SINGLE_N)"
	[nextval]="SELECT count(nextval('s1')) FROM generate_series(1, $SINGLE_N)")
{
	echo "SELECT 'warmup|cached|' || bench_ms(\$q\$${CQ[cached]}\$q\$);"
	echo "SELECT 'warmup|nextval|' || bench_ms(\$q\$${CQ[nextval]}\$q\$);"
	for ((r = 1; r <= MEASUREMENTS; r++)); do
		if ((r % 2)); then order="cached nextval"; else order="nextval cached"; fi
		for x in $order; do echo "SELECT '$r|$x|' || bench_ms(\$q\$${CQ[$x]}\$q\$);"; done
	done
} >"$DIR/part_c.sql"
out=$(as_pg "${PSQL[@]}" -At -f "$DIR/part_c.sql")
for x in cached nextval; do
	echo "$x: ${CQ[$x]}"
	ms=$(awk -F'|' -v x="$x" '$1 != "warmup" && $2 == x { print $3 }' <<<"$out" | median)
	C_NS[$x]=$(awk -v ms="$ms" -v n="$SINGLE_N" 'BEGIN { printf "%.1f", ms * 1e6 / n }')
	echo "  runs (ms): $(awk -F'|' -v x="$x" '$1 != "warmup" && $2 == x { printf "%s ", $3 }' <<<"$out"); median ${C_NS[$x]} ns per value"
done

fi

section "summary"
echo "$(nproc) CPU ${cpu_model:-unknown}, $(mem_gib) GiB, $("$BINDIR/postgres" --version | sed 's/^postgres (PostgreSQL) /PostgreSQL /'), $(redis-server --version | awk '{ print "Redis " $3 }' | sed 's/v=//'), $(date -u +%Y-%m-%d)."
echo
echo "| part | method | median tps | / Redis INCR | / SELECT 1 | / nextval() |"
echo "|---|---|---:|---:|---:|---:|"
declare -A MED
for part in $PG_PARTS; do
	for m in $METHODS; do MED[$part,$m]=$(tr ' ' '\n' <<<"${RUNS[$part,$m]}" | grep . | median); done
	for m in $METHODS; do
		printf '| %s | %s | %s | %sx | %sx | %sx |\n' "$([ "$part" = A ] && echo "A: one hot key" || echo "B: $(fmt_int $NKEYS) keys")" \
			"${TITLE[$m]}" "$(fmt_int "${MED[$part,$m]}")" "$(ratio "${MED[$part,$m]}" "${MED[$part,redis]}")" \
			"$(ratio "${MED[$part,$m]}" "${MED[$part,select1]}")" "$(ratio "${MED[$part,$m]}" "${MED[$part,nextval]}")"
	done
done
echo
echo "pgbench -n -M prepared -c $CLIENTS -j $CLIENTS -T $T (Unix socket, synchronous_commit = on); redis-benchmark -c $CLIENTS -n $REDIS_N (Unix socket,"
echo "appendfsync everysec); median of $ROUNDS rounds, the order of the methods rotating."
echo
for part in $PG_PARTS; do
	rr=$(ratio "${MED[$part,cached]}" "${MED[$part,redis]}")
	rf=$(ratio "${MED[$part,cached]}" "${MED[$part,select1]}")
	echo "part $part: cached / Redis INCR = ${rr}x (target >= 1.0: $(awk -v r="$rr" 'BEGIN { print (r >= 1.0) ? "met" : "NOT met" }')), cached / SELECT 1 = ${rf}x (target >= 0.85: $(awk -v r="$rf" 'BEGIN { print (r >= 0.85) ? "met" : "NOT met" }'))"
done
rc=$(ratio "${C_NS[cached]}" "${C_NS[nextval]}")
[[ " $PARTS " == *" C "* ]] && echo "part C: one backend, ${C_NS[cached]} ns per cached value vs ${C_NS[nextval]} ns per nextval() = ${rc}x (target <= 1.0: $(awk -v r="$rc" 'BEGIN { print (r <= 1.0) ? "met" : "NOT met" }'))"
echo
echo "cache statistics:"
as_pg "${PSQL[@]}" -c "SELECT key, cache, segment_size, served, fetches, waits FROM idgen_seq_cache WHERE key IN ('hc', 'one', 'c:1') ORDER BY key"
