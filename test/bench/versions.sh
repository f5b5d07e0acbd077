#!/usr/bin/env bash
#
# test/bench/versions.sh: bench.sh's cost per value (its Part A) on each
# PostgreSQL version, side by side.
#
#   bash test/bench/versions.sh [VERSION ...]		(default: 15 17 18 19)
#
# A MEASUREMENT, not a test: it never fails on a figure, only when a run
# breaks.  Run as root on Debian.
#
# Where each version runs
#   The version of PG_CONFIG (default /usr/lib/postgresql/15/bin/pg_config)
#   runs on the machine itself, installed there by bench.sh's `make
#   install`.  Every other version runs inside test/chroot.sh's chroot of
#   the Debian release that ships it (17: trixie, 18: sid, 19: sid with
#   experimental), which has that version's server, its headers, make and
#   gcc, so idgen is built there with that version's pg_config and the
#   release's compiler, as a user of that release would build it.  Each run
#   starts from a copy of the working tree (the files git tracks or would
#   track: no build products), so no version runs objects built for another.
#
# What it measures
#   bench.sh with BENCH_PAIRS=0 and BENCH_BULK_N=0 (Part A only: no pgbench,
#   no bulk load), its Part A2 figures: ns per value of each expression,
#   N values below the generators' ceiling, so idgen's generators never wait
#   and the figure is their cost.  Two floors:
#     1                  no function call: the executor's cost per row;
#     clock_timestamp()  one call of a C function that reads the clock, the
#                        control: what the server charges for a call like
#                        idgen's, before idgen's own work.
#   So "above 1" is the whole cost of a call, "above clock_timestamp()" is
#   idgen's own work, and a version that is slower in both idgen and the
#   control by the same amount is slower in the server, not in idgen.
#
#   BENCH_ROUNDS rounds (default 2) run every version once each, back to
#   back, the order reversed every other round (15 17 18 19, 19 18 17 15,
#   ...), so that a drift of the machine's load hits every version alike;
#   per version and expression the median over the rounds is reported.
#   Figures of different versions are comparable only from one run of this
#   script, on a machine otherwise idle: it prints the machine first.
#
# Environment
#   PG_CONFIG      the installation on the machine itself (default
#                  /usr/lib/postgresql/15/bin/pg_config): its version runs
#                  there, the others in chroots
#   BENCH_ROUNDS   rounds over all versions (default 2)
#   BENCH_N, BENCH_REPS, BENCH_CLOCK
#                  passed to bench.sh (its Part A1 size, runs per
#                  expression, and wall or cpu time); Part A2's size
#                  follows from the layout.  BENCH_CLOCK=cpu times each
#                  run by the backend's own CPU time, which other load on
#                  the machine disturbs far less than the wall clock
#   BENCH_OUT      directory for each run's full bench.sh output (default
#                  a new /tmp/idgen-versions.XXXXXX, kept and printed)
#   IDGEN_CHROOT_CACHE, IDGEN_DEBIAN_MIRROR
#                  as for test/chroot.sh, whose cached chroots it uses (the
#                  first run of a version makes its chroot: minutes)
#
# Each run of bench.sh's Part A takes about 1.5 minutes, plus about half a
# minute to unpack a chroot: two rounds of four versions about 15 minutes.
#
set -euo pipefail

PROG=versions.sh
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"
# median: the median of the numbers on stdin, one per line (as lib.sh's,
# which this script does not source: it starts no cluster of its own).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 0; m = int((NR + 1) / 2); printf "%.1f", (NR % 2) ? v[m] : (v[m] + v[m + 1]) / 2 }'; }

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
ROUNDS=${BENCH_ROUNDS:-2}
positive BENCH_ROUNDS "$ROUNDS"
[ -z "${BENCH_N:-}" ] || positive BENCH_N "$BENCH_N"
[ -z "${BENCH_REPS:-}" ] || positive BENCH_REPS "$BENCH_REPS"
CLOCK=${BENCH_CLOCK:-wall}
[[ $CLOCK =~ ^(wall|cpu)$ ]] || die "BENCH_CLOCK must be wall or cpu, got '$CLOCK'"
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(15 17 18 19)
for v in "${VERSIONS[@]}"; do
	[[ $v =~ ^[1-9][0-9]$ ]] || die "a version is a major version number such as 18, got '$v'"
done
[ "$(id -u)" = 0 ] || die "run as root (test/chroot.sh needs it)"
[ -x "$PG_CONFIG" ] || die "no pg_config at $PG_CONFIG"
HOST_VERSION=$("$PG_CONFIG" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')

OUT=${BENCH_OUT:-$(mktemp -d /tmp/idgen-versions.XXXXXX)}
mkdir -p "$OUT"
TREE=$(mktemp -d "${TMPDIR:-/tmp}/idgen-versions-tree.XXXXXX")
trap 'rm -rf "$TREE"' EXIT

# The working tree as git sees it (tracked files, and untracked ones it
# does not ignore), without build products.
(cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
	tar -c --null --no-recursion -T - -f -) | tar -x -C "$TREE"
chmod 755 "$TREE"
COMMIT=$(git -C "$SRC" describe --always --dirty 2>/dev/null || echo "unknown")

# bench.sh's settings for every version: Part A only.
SETTINGS=(BENCH_PAIRS=0 BENCH_BULK_N=0 "BENCH_CLOCK=$CLOCK")
[ -z "${BENCH_N:-}" ] || SETTINGS+=("BENCH_N=$BENCH_N")
[ -z "${BENCH_REPS:-}" ] || SETTINGS+=("BENCH_REPS=$BENCH_REPS")

echo "== machine"
echo
printf '%-10s %s\n' "cpu" "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs"
printf '%-10s %s\n' "memory" "$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
printf '%-10s %s\n' "kernel" "$(uname -srm)"
printf '%-10s %s\n' "load" "$(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min, at the start)"
printf '%-10s %s\n' "date" "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
printf '%-10s %s\n' "idgen" "$COMMIT"
printf '%-10s %s\n' "versions" "${VERSIONS[*]} (${HOST_VERSION} on this machine, the others in chroots); $ROUNDS rounds"
printf '%-10s %s\n' "clock" "$CLOCK (BENCH_CLOCK)"
printf '%-10s %s\n' "logs" "$OUT"

# run_one VERSION LOG: bench.sh's Part A on VERSION, its output in LOG.
run_one() {
	local v=$1 log=$2
	if [ "$v" = "$HOST_VERSION" ]; then
		(cd "$TREE" && make -s clean >/dev/null 2>&1 &&
			env PG_CONFIG="$PG_CONFIG" "${SETTINGS[@]}" bash test/bench/bench.sh) >"$log" 2>&1
	else
		bash "$SRC/test/chroot.sh" "$v" "$TREE" \
			"make -s clean >/dev/null 2>&1; PG_CONFIG=/usr/lib/postgresql/$v/bin/pg_config ${SETTINGS[*]} bash test/bench/bench.sh" \
			>"$log" 2>&1
	fi
}

echo
echo "== runs"
echo
for ((r = 1; r <= ROUNDS; r++)); do
	order=("${VERSIONS[@]}")
	if ((r % 2 == 0)); then
		order=()
		for ((k = ${#VERSIONS[@]} - 1; k >= 0; k--)); do order+=("${VERSIONS[k]}"); done
	fi
	for v in "${order[@]}"; do
		log=$OUT/pg$v-round$r.log
		start=$SECONDS
		if ! run_one "$v" "$log"; then
			tail -n 30 "$log" >&2
			die "bench.sh failed on PostgreSQL $v (round $r); its output is in $log"
		fi
		echo "round $r, PostgreSQL $v: $((SECONDS - start)) s ($log)"
	done
done

# --- figures ------------------------------------------------------------------

# bench.sh's markdown summary has one row per expression:
#   | `expr` | A1 ns | values/s | vs nextval() | vs gen_random_uuid() | A2 ns | ...
# Collect "version expression A2-ns" lines from every log.
figures=$OUT/figures.txt
: >"$figures"
declare -A LABEL
for v in "${VERSIONS[@]}"; do
	for ((r = 1; r <= ROUNDS; r++)); do
		log=$OUT/pg$v-round$r.log
		LABEL[$v]=$(sed -n 's/^postgres *postgres (PostgreSQL) \([^ ]*\).*/\1/p' "$log" | head -n 1)
		awk -F'|' -v v="$v" '
			/^\| expression \|/ { on = 1; next }
			on && !/^\|/ { exit }
			on && $2 !~ /^-/ { e = $2; gsub(/[ `]/, "", e); n = $7; gsub(/ /, "", n); print v, e, n }' "$log" >>"$figures"
	done
	[ -n "${LABEL[$v]}" ] || LABEL[$v]=$v
done

EXPRS=("idgen_snowflake()" "idgen_uuid7()" "nextval('bench_seq')" "gen_random_uuid()" "clock_timestamp()" "1")
NAMES=("idgen_snowflake()" "idgen_uuid7()" "nextval()" "gen_random_uuid()" "clock_timestamp()" "1 (no call)")
I_NEXTVAL=2 I_CLOCK=4 I_ONE=5
# NS[version,i]: the median over the rounds of EXPRS[i]'s ns per value.
declare -A NS
for v in "${VERSIONS[@]}"; do
	for i in "${!EXPRS[@]}"; do
		NS[$v,$i]=$(awk -v v="$v" -v e="${EXPRS[i]}" '$1 == v && $2 == e { print $3 }' "$figures" | median)
		[ -n "${NS[$v,$i]}" ] || die "no figure for ${EXPRS[i]} on PostgreSQL $v in $OUT"
	done
done

# row I FORMULA FORMAT: EXPRS[I]'s line, with FORMULA (an awk expression of
# a, its ns per value, c, clock_timestamp()'s, o, 1's, and n, nextval()'s)
# printed in FORMAT for each version.
row() {
	local i=$1 formula=$2 fmt=$3 v
	printf '%-34s' "${NAMES[i]}"
	for v in "${VERSIONS[@]}"; do
		printf '%10s' "$(awk -v a="${NS[$v,$i]}" -v c="${NS[$v,$I_CLOCK]}" -v o="${NS[$v,$I_ONE]}" \
			-v n="${NS[$v,$I_NEXTVAL]}" "BEGIN { printf \"$fmt\", $formula }")"
	done
	echo
}
header() {
	printf '\n%-34s' "$1"
	for v in "${VERSIONS[@]}"; do printf '%10s' "${LABEL[$v]}"; done
	echo
}

echo
echo "== cost per value (bench.sh Part A2: below the ceilings; $CLOCK time; median of $ROUNDS rounds)"
header "ns per value"
for i in "${!EXPRS[@]}"; do row "$i" "a" "%.1f"; done
header "ns above 1 (a call's whole cost)"
for i in 0 1 2 3 4; do row "$i" "a - o" "%.1f"; done
header "ns above clock_timestamp()"
for i in 0 1 2 3; do row "$i" "a - c" "%.1f"; done
header "vs nextval() (ns per value)"
for i in 0 1; do row "$i" "a / n" "%.2fx"; done
header "vs nextval(), both above 1"
for i in 0 1; do row "$i" "(a - o) / (n - o)" "%.2fx"; done
echo
echo "clock_timestamp() is the control: one call of a C function that reads the clock, as idgen's"
echo "generators do; what it costs above 1 the server charges every such call, whatever the function does."
echo "Each run's full output is in $OUT."
