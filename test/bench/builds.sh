#!/usr/bin/env bash
#
# test/bench/builds.sh: two builds of idgen side by side in one run, on the
# PostgreSQL of this machine: bench.sh's cost per value (its Part A) and
# cache_bench.sh's per-key sequences.  For a change that must not cost
# anything (a restructuring), the before and after.
#
#   bash test/bench/builds.sh OLD NEW		(two commits, e.g. 9ab44e4 HEAD)
#
# A MEASUREMENT, not a test: it never fails on a figure, only when a build
# or a run breaks.  Run as root on Debian: it installs each build in turn
# into PG_CONFIG's installation (`make install`), and leaves NEW installed.
# It installs what the builds need if it is missing (as test/demo.sh does).
#
# What it does
#   Each commit is exported (git archive: its tracked files, no build
#   products) into a temporary directory and built there once.  Then
#   BUILDS_ROUNDS rounds run; a round installs one build and runs the
#   benchmarks, then installs the other and runs them again, the order
#   alternating from round to round (OLD NEW, NEW OLD, ...), so that a drift
#   of the machine's load hits both builds alike.  The benchmarks are the
#   scripts of this working tree for both builds, run with BENCH_INSTALL=0:
#     bench         bench.sh, BENCH_PAIRS=0 BENCH_BULK_N=0: Part A only,
#                   ns per value of each expression (A1: BENCH_N values,
#                   A2: below the generators' ceiling, their own cost)
#     cache         cache_bench.sh: median tps of each method with one hot
#                   key (A) and 10 000 keys (B), and one backend's ns per
#                   value (C)
#   Per build and figure, the median over the rounds is reported, and NEW
#   over OLD.  First it compares the two libraries' machine code for the
#   functions on the generators' and the cached sequences' hot path: when
#   it is the same, a difference in their figures is the machine's, or where
#   the code sits in the library.  Both builds run on one server version with one set of
#   scripts, so the only difference between their runs is the library and
#   its SQL.
#
# Environment
#   PG_CONFIG       the installation (default PostgreSQL 15's pg_config)
#   BUILDS_ROUNDS   rounds (default 2)
#   BUILDS_SCRIPTS  which benchmarks (default "bench cache")
#   BENCH_OUT       directory for each run's full output (default a new
#                   /tmp/idgen-builds.XXXXXX, kept and printed)
#   BENCH_REPS, BENCH_N, BENCH_CLOCK, CACHE_BENCH_T, CACHE_BENCH_ROUNDS, ...
#                   passed on to the scripts
#
# With the defaults a round takes about 11 minutes on a 2-core machine
# (bench.sh's Part A 1.5 minutes and cache_bench.sh 4, for each build).
#
set -euo pipefail

PROG=builds.sh
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"
# median: the median of the numbers on stdin, one per line (as lib.sh's,
# which this script does not source: it starts no cluster of its own).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 0; m = int((NR + 1) / 2); print (NR % 2) ? v[m] : (v[m] + v[m + 1]) / 2 }'; }

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
ROUNDS=${BUILDS_ROUNDS:-2}
SCRIPTS=${BUILDS_SCRIPTS:-bench cache}
positive BUILDS_ROUNDS "$ROUNDS"
for s in $SCRIPTS; do
	[[ $s =~ ^(bench|cache)$ ]] || die "BUILDS_SCRIPTS holds bench and cache, got '$s'"
done
[ $# = 2 ] || die "usage: builds.sh OLD NEW (two commits)"
[ "$(id -u)" = 0 ] || die "run as root (each build is installed in turn)"
# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"
idgen_prepare_host postgresql-server-dev-15 libpq-dev make gcc || die "could not prepare the host"
[ -x "$PG_CONFIG" ] || die "no pg_config at $PG_CONFIG"

declare -A COMMIT
COMMIT[old]=$(git -C "$SRC" rev-parse --short "$1^{commit}") || die "no commit $1"
COMMIT[new]=$(git -C "$SRC" rev-parse --short "$2^{commit}") || die "no commit $2"
OUT=${BENCH_OUT:-$(mktemp -d /tmp/idgen-builds.XXXXXX)}
mkdir -p "$OUT"
TREES=$(mktemp -d "${TMPDIR:-/tmp}/idgen-builds-tree.XXXXXX")
trap 'rm -rf "$TREES"' EXIT

for b in old new; do
	mkdir "$TREES/$b"
	git -C "$SRC" archive "${COMMIT[$b]}" | tar -x -C "$TREES/$b"
	make -C "$TREES/$b" -s PG_CONFIG="$PG_CONFIG" >"$OUT/build-$b.log" 2>&1 ||
		{ tail -n 30 "$OUT/build-$b.log" >&2; die "the build of ${COMMIT[$b]} failed"; }
done

echo "== machine"
echo
printf '%-10s %s\n' "cpu" "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs"
printf '%-10s %s\n' "memory" "$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
printf '%-10s %s\n' "kernel" "$(uname -srm)"
printf '%-10s %s\n' "postgres" "$("$(dirname "$PG_CONFIG")/postgres" --version)"
printf '%-10s %s\n' "load" "$(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min, at the start)"
printf '%-10s %s\n' "date" "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
printf '%-10s %s\n' "builds" "old ${COMMIT[old]}, new ${COMMIT[new]}; scripts of $(git -C "$SRC" describe --always --dirty); rounds: $ROUNDS"
printf '%-10s %s\n' "logs" "$OUT"

# run_build BUILD ROUND: install BUILD, then run each benchmark on it.
run_build() {
	local b=$1 r=$2 s log start
	make -C "$TREES/$b" -s PG_CONFIG="$PG_CONFIG" install >/dev/null || die "make install of ${COMMIT[$b]} failed"
	for s in $SCRIPTS; do
		log=$OUT/$s-$b-round$r.log
		start=$SECONDS
		case $s in
		bench) env PG_CONFIG="$PG_CONFIG" BENCH_INSTALL=0 BENCH_PAIRS=0 BENCH_BULK_N=0 \
			bash "$SRC/test/bench/bench.sh" >"$log" 2>&1 ;;
		cache) env PG_CONFIG="$PG_CONFIG" BENCH_INSTALL=0 \
			bash "$SRC/test/bench/cache_bench.sh" >"$log" 2>&1 ;;
		esac || { tail -n 30 "$log" >&2; die "$s failed on ${COMMIT[$b]} (round $r); its output is in $log"; }
		echo "round $r, ${COMMIT[$b]}, $s: $((SECONDS - start)) s"
	done
}

echo
echo "== runs"
echo
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then order="old new"; else order="new old"; fi
	for b in $order; do run_build "$b" "$r"; done
done

# --- the hot path's machine code ----------------------------------------------

# disassemble SO FUNCTION: FUNCTION's instructions in SO, with the addresses
# (its own, its jumps' and calls' targets, and %rip-relative operands) left
# out, so that the same code placed elsewhere in the library compares equal.
disassemble() {
	objdump -d --no-show-raw-insn "$1" | awk -v f="<$2>:" '
		$2 == f { on = 1; next }
		on && /^$/ { on = 0 }
		on { sub(/^ *[0-9a-f]+:\t/, ""); gsub(/[0-9a-f]+ <[^>]*>/, "ADDR"); gsub(/-?0x[0-9a-f]+\(%rip\)/, "RIP"); print }'
}
echo
echo "== the hot path's machine code (objdump -d, addresses left out)"
echo
if command -v objdump >/dev/null; then
	for fn in idgen_snowflake snowflake_next idgen_next_tick idgen_count idgen_compose idgen_uuid7 idgen_seq_next; do
		a=$(disassemble "$TREES/old/idgen.so" "$fn")
		b=$(disassemble "$TREES/new/idgen.so" "$fn")
		if [ -z "$a" ] || [ -z "$b" ]; then
			printf '%-20s not in both libraries\n' "$fn"
		elif [ "$a" = "$b" ]; then
			printf '%-20s the same (%d instructions)\n' "$fn" "$(wc -l <<<"$b")"
		else
			printf '%-20s differs:\n' "$fn"
			diff <(echo "$a") <(echo "$b") | sed 's/^/    /' | head -n 20 || true
		fi
	done
else
	echo "(no objdump)"
fi

# --- figures ------------------------------------------------------------------

# figures.txt: "build unit figure value" lines from every log.
#   bench.sh's summary table:
#     | `expr` | A1 ns/value | values/s | vs nextval() | vs gen_random_uuid() | A2 ns/value | ...
#   cache_bench.sh's summary table:
#     | part | method | median tps | ...
#   and its line "part C: one backend, X ns per cached value vs Y ns per nextval() = ...".
figures=$OUT/figures.txt
: >"$figures"
for b in old new; do
	for ((r = 1; r <= ROUNDS; r++)); do
		for s in $SCRIPTS; do
			log=$OUT/$s-$b-round$r.log
			case $s in
			bench) awk -F'|' -v b="$b" '
				/^\| expression \|/ { on = 1; next }
				on && !/^\|/ { exit }
				on && $2 !~ /^-/ {
					e = $2; gsub(/[ `]/, "", e); a1 = $3; a2 = $7; gsub(/ /, "", a1); gsub(/ /, "", a2)
					print b, "ns", "A1 " e, a1; print b, "ns", "A2 " e, a2 }' "$log" ;;
			cache) awk -F'|' -v b="$b" '
				/^\| part \| method \|/ { on = 1; next }
				on && /^\|/ && $2 !~ /^-/ {
					p = $2; m = $3; t = $4; gsub(/^ +| +$/, "", p); gsub(/^ +| +$/, "", m); gsub(/ /, "", t)
					sub(/:.*/, "", p); print b, "tps", "cache " p " " m, t }
				/^part C: one backend/ {
					split($0, w, " ")
					print b, "ns", "cache C idgen_seq_next", w[5]; print b, "ns", "cache C nextval()", w[11] }' "$log" ;;
			esac
		done
	done
done >>"$figures"

echo
echo "== figures (the median over the rounds: $ROUNDS; ns: lower is better, tps: higher)"
echo
printf '%-62s %12s %12s %9s\n' "figure" "${COMMIT[old]}" "${COMMIT[new]}" "new/old"
# Every figure in the order of its first appearance.
awk '$1 == "old" { $1 = ""; $2 = $2 "\t"; sub(/ [^ ]+$/, ""); print }' "$figures" | awk '!seen[$0]++' |
	while IFS=$'\t' read -r unit name; do
		unit=${unit# }
		name=${name# }
		declare -A m=()
		for b in old new; do
			m[$b]=$(awk -v b="$b" -v u="$unit" -v f="$name" '$1 == b && $2 == u {
				x = $3; for (i = 4; i < NF; i++) x = x " " $i; if (x == f) print $NF }' "$figures" | median)
		done
		[ -n "${m[old]}" ] && [ -n "${m[new]}" ] || die "no figure for '$name' of both builds in $figures"
		printf '%-62s %12s %12s %8.3fx\n' "$name ($unit)" "${m[old]}" "${m[new]}" \
			"$(awk -v o="${m[old]}" -v n="${m[new]}" 'BEGIN { print (o > 0) ? n / o : 0 }')"
	done
echo
echo "Each run's full output is in $OUT."
