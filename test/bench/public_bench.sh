#!/usr/bin/env bash
#
# test/bench/public_bench.sh: what a public ID costs, next to generating the
# ID and to the hash people reach for by hand.
#
#   bash test/bench/public_bench.sh
#
# These are MEASUREMENTS, not tests: the script never fails on a figure (nor
# on the project's targets, idgen_public(idgen_snowflake()) at most 2x
# idgen_snowflake() and below md5, which it only prints).  It exits non-zero
# only if something breaks.  Results depend on the machine; the script
# prints the machine first.
#
# What it does
#   A throwaway cluster as the other benchmarks make (test/bench/lib.sh).
#   PUBLIC_REPS times, in one backend, one statement makes PUBLIC_N values:
#       snowflake  SELECT count(idgen_snowflake()) FROM generate_series(1, n)
#       public     SELECT count(idgen_public(idgen_snowflake())) ...
#       number     SELECT count(idgen_public_bigint(idgen_snowflake())) ...
#       md5        SELECT count(md5(idgen_snowflake()::text)) ...
#       private    SELECT count(idgen_private(idgen_public(idgen_snowflake()))) ...
#   timed in the server.  Reported per method: the median time, the cost
#   per call, and that cost over idgen_snowflake()'s and over md5's.
#
# Environment
#   PG_CONFIG          default /usr/lib/postgresql/15/bin/pg_config
#   PUBLIC_N           values per statement (default 1000000)
#   PUBLIC_REPS        runs per method (default 5)
#   BENCH_INSTALL      1: run `make install` first when root (default 1)
#   BENCH_PORT         the socket's port number (default: a free one)
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
N=${PUBLIC_N:-1000000}
REPS=${PUBLIC_REPS:-5}
INSTALL=${BENCH_INSTALL:-1}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROG=public_bench.sh
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"

positive PUBLIC_N "$N"
positive PUBLIC_REPS "$REPS"

# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"

print_machine
init_cluster ""
start_cluster

sql "CREATE EXTENSION idgen" >/dev/null
sql "SELECT idgen_public_rotate()" >/dev/null   # CREATE EXTENSION makes no key
create_bench_ms

declare -A query=(
	[snowflake]="idgen_snowflake()"
	[public]="idgen_public(idgen_snowflake())"
	[number]="idgen_public_bigint(idgen_snowflake())"
	[md5]="md5(idgen_snowflake()::text)"
	[private]="idgen_private(idgen_public(idgen_snowflake()))"
)
methods=(snowflake public number md5 private)

section "one backend, $(fmt_int "$N") values per statement (median of $REPS runs, methods interleaved)"
declare -A times=()
for _ in $(seq "$REPS"); do
	for m in "${methods[@]}"; do
		times[$m]+="$(sql "SELECT bench_n_ms(\$q\$SELECT count(${query[$m]}) FROM generate_series(1, $N)\$q\$, $N)") "
	done
done
declare -A ns=()
printf '%-10s %12s %12s %14s %10s\n' method "time ms" "ns per call" "x snowflake" "x md5"
for m in "${methods[@]}"; do
	read -ra runs <<<"${times[$m]}"
	ms=$(printf '%s\n' "${runs[@]}" | median)
	ns[$m]=$(awk -v ms="$ms" -v n="$N" 'BEGIN { printf "%.1f", ms * 1e6 / n }')
done
for m in "${methods[@]}"; do
	printf '%-10s %12.1f %12s %14s %10s\n' "$m" "$(awk -v v="${ns[$m]}" -v n="$N" 'BEGIN { printf "%.1f", v * n / 1e6 }')" "${ns[$m]}" \
		"$(awk -v a="${ns[$m]}" -v b="${ns[snowflake]}" 'BEGIN { printf "%.2f", a / b }')" \
		"$(awk -v a="${ns[$m]}" -v b="${ns[md5]}" 'BEGIN { printf "%.2f", a / b }')"
done

section "summary"
printf 'idgen_public(idgen_snowflake()): %sx idgen_snowflake() (target at most 2.0) and %sx md5(id::text) (target below 1.0)\n' \
	"$(awk -v a="${ns[public]}" -v b="${ns[snowflake]}" 'BEGIN { printf "%.2f", a / b }')" \
	"$(awk -v a="${ns[public]}" -v b="${ns[md5]}" 'BEGIN { printf "%.2f", a / b }')"
