#!/usr/bin/env bash
#
# test/bench/seq_txn_bench.sh: what the n-th call on one per-key sequence
# costs within one transaction, next to nextval() and the counter people
# write by hand.
#
#   bash test/bench/seq_txn_bench.sh
#
# These are MEASUREMENTS, not tests: the script never fails on a figure (nor
# on the project's targets, a per-call cost at 100 000 calls at most 1.5x
# the one at 1 000, and at most 1.0x nextval()'s, which it only prints).  It
# exits non-zero only if something breaks (the server does not start, a
# query fails or counts the wrong number of values).  Results depend on the
# machine; the script prints the machine first.
#
# What it does
#   A throwaway cluster as seq_bench.sh makes (test/bench/lib.sh).  For each
#   n of SEQ_TXN_NS, SEQ_TXN_REPS times, one statement (so one transaction)
#   calls a fresh key n times, timed in the server:
#       idgen  SELECT count(idgen_seq_next('k')) FROM generate_series(1, n)
#       seq    SELECT count(nextval('s')) FROM generate_series(1, n)
#       hand   SELECT count(hand_next('h')) FROM generate_series(1, n)
#   where hand_next(key) is the hand-written transactional counter,
#       INSERT INTO counters VALUES (key, 1) ON CONFLICT (key)
#           DO UPDATE SET value = counters.value + 1 RETURNING value
#   in a VOLATILE SQL function.  Every run uses a key, sequence or counter
#   row of its own, created by the run.  Reported per method and n: the
#   median time, the cost per call, that cost over the same method's at
#   the smallest n (1.0 for a cost that does not grow), and idgen's and
#   hand's cost per call over nextval()'s at the same n.
#
# Environment
#   PG_CONFIG          default /usr/lib/postgresql/15/bin/pg_config
#   SEQ_TXN_NS         the numbers of calls (default "1000 10000 100000")
#   SEQ_TXN_REPS       runs per method and n (default 3)
#   BENCH_INSTALL      1: run `make install` first when root (default 1)
#   BENCH_PORT         the socket's port number (default: a free one)
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
NS=${SEQ_TXN_NS:-1000 10000 100000}
REPS=${SEQ_TXN_REPS:-3}
INSTALL=${BENCH_INSTALL:-1}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROG=seq_txn_bench.sh
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"

for n in $NS; do positive SEQ_TXN_NS "$n"; done
positive SEQ_TXN_REPS "$REPS"

# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"

print_machine
init_cluster ""
start_cluster

sql "CREATE EXTENSION idgen" >/dev/null
sql "CREATE TABLE counters (key text PRIMARY KEY, value bigint NOT NULL)" >/dev/null
sql "CREATE FUNCTION hand_next(k text) RETURNS bigint VOLATILE LANGUAGE sql AS \$f\$
	INSERT INTO counters (key, value) VALUES (k, 1)
	ON CONFLICT (key) DO UPDATE SET value = counters.value + 1 RETURNING value \$f\$" >/dev/null
create_bench_ms

section "one statement, one key, n calls (median of $REPS runs)"
printf '%-7s %8s %12s %14s %12s %12s\n' method n "time ms" "us per call" "x at n=${NS%% *}" "x nextval"
declare -A per_call
first_n=${NS%% *}
for n in $NS; do
	for method in seq idgen hand; do
		times=()
		for rep in $(seq "$REPS"); do
			name="${method}_${n}_${rep}"
			case $method in
				seq) sql "CREATE SEQUENCE $name" >/dev/null
					 q="SELECT count(nextval('$name')) FROM generate_series(1, $n)" ;;
				idgen) q="SELECT count(idgen_seq_next('$name')) FROM generate_series(1, $n)" ;;
				hand) q="SELECT count(hand_next('$name')) FROM generate_series(1, $n)" ;;
			esac
			sql "CHECKPOINT" >/dev/null
			times+=("$(sql "SELECT bench_n_ms(\$q\$$q\$q\$, $n)")")
		done
		ms=$(printf '%s\n' "${times[@]}" | median)
		per_call[$method,$n]=$(awk -v ms="$ms" -v n="$n" 'BEGIN { printf "%.4f", ms * 1000 / n }')
		growth=$(awk -v a="${per_call[$method,$n]}" -v b="${per_call[$method,$first_n]}" 'BEGIN { printf "%.2f", a / b }')
		vs_seq=$(awk -v a="${per_call[$method,$n]}" -v b="${per_call[seq,$n]}" 'BEGIN { printf "%.2f", a / b }')
		printf '%-7s %8s %12.1f %14.3f %12s %12s\n' "$method" "$(fmt_int "$n")" "$ms" "${per_call[$method,$n]}" "$growth" "$vs_seq"
	done
done

last_n=${NS##* }
section "summary"
printf 'idgen_seq_next: cost per call at n=%s is %sx the one at n=%s (target at most 1.5), and %sx nextval() at n=%s (target at most 1.0)\n' \
	"$(fmt_int "$last_n")" \
	"$(awk -v a="${per_call[idgen,$last_n]}" -v b="${per_call[idgen,$first_n]}" 'BEGIN { printf "%.2f", a / b }')" \
	"$(fmt_int "$first_n")" \
	"$(awk -v a="${per_call[idgen,$last_n]}" -v b="${per_call[seq,$last_n]}" 'BEGIN { printf "%.2f", a / b }')" \
	"$(fmt_int "$last_n")"
printf 'hand-written counter: %sx at n=%s over n=%s\n' \
	"$(awk -v a="${per_call[hand,$last_n]}" -v b="${per_call[hand,$first_n]}" 'BEGIN { printf "%.2f", a / b }')" \
	"$(fmt_int "$last_n")" "$(fmt_int "$first_n")"
