#!/usr/bin/env bash
#
# test/flaky.sh: run chosen TAP tests many times in a row and count each
# one's failures, to find a test that depends on timing before it lands.
#
#   bash test/flaky.sh [OPTIONS] test/t/022_lease_abuse.pl [test/t/029_seq_limit.pl ...]
#
#   -n N            runs of each file (default 20), in a row: run 1 of
#                   every file, then run 2, ...
#   -v VERSION      the PostgreSQL major (default 15, the machine's own);
#                   17, 18 and 19 run in their Debian release's chroot
#                   (test/chroot.sh), as test/run.sh runs them
#   --cpu N         N CPU-bound busy loops beside the tests (default 0)
#   --disk N        N loops of synchronous 8 kB writes beside them (default 0)
#   --short-duties  every test cluster starts with test/short_duties.conf
#                   (idgen.purge_interval and idgen.sequencer_idle at 1 s,
#                   through TEMP_CONFIG), as test/run.sh runs one version's
#                   TAP tests
#   --keep DIR      keep each failed run's TAP log in DIR (default: a new
#                   directory under /tmp, printed at the end)
#
# With PG_CONFIG set it runs against that installation, on this machine.
# Run as root, it installs idgen (make install, with idgen's assertions)
# into the PostgreSQL it tests and runs the tests as the user "postgres",
# as test/suite.sh does; as another user, idgen must be installed already.
#
# It prints one line per file, "FILE: F of N failed", and, for each failed
# run, the failed assertions' names.  It exits non-zero if any run failed.
#
# Use it on every new or changed test that waits, sleeps, steps a clock or
# races a background process (docs/development.md, Tests): 50 runs with
# --short-duties, then 20 beside "--cpu 4 --disk 2".
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '3,27p' "$0" >&2; exit 2; }

runs=20 version=15 cpu=0 disk=0 short=0 keep='' inner=0
files=()
while [ $# -gt 0 ]; do
	case $1 in
		-n) runs=${2:-}; shift 2 ;;
		-v) version=${2:-}; shift 2 ;;
		--cpu) cpu=${2:-}; shift 2 ;;
		--disk) disk=${2:-}; shift 2 ;;
		--short-duties) short=1; shift ;;
		--keep) keep=${2:-}; shift 2 ;;
		--inner) inner=1; shift ;;
		-h|--help) usage ;;
		-*) echo "flaky.sh: unknown option $1" >&2; usage ;;
		*) files+=("$1"); shift ;;
	esac
done
[ ${#files[@]} -gt 0 ] || usage
for n in "$runs" "$cpu" "$disk"; do
	[[ $n =~ ^[0-9]+$ ]] || { echo "flaky.sh: -n, --cpu and --disk take whole numbers" >&2; exit 2; }
done
for f in "${files[@]}"; do
	[ -f "$SRC/$f" ] || { echo "flaky.sh: no test $f (name it from the tree's top, test/t/...)" >&2; exit 2; }
done
keep=${keep:-$(mktemp -d /tmp/idgen-flaky.XXXXXX)}
mkdir -p "$keep"

# The busy loops run on the machine, beside the chroot too, and end with
# this script.
busy=()
stop_busy() { [ ${#busy[@]} -gt 0 ] && kill "${busy[@]}" 2>/dev/null; rm -rf "${scratch:-}"; }
trap stop_busy EXIT
if [ "$inner" = 0 ]; then
	scratch=$(mktemp -d /var/tmp/idgen-flaky-disk.XXXXXX)
	for _ in $(seq "$cpu"); do
		bash -c 'while :; do :; done' &
		busy+=($!)
	done
	for i in $(seq "$disk"); do
		bash -c 'while :; do dd if=/dev/zero of="$0" bs=8k count=256 oflag=dsync status=none; done' "$scratch/$i" &
		busy+=($!)
	done
fi

# Another version: the same command in its chroot, with the tree copied
# there.  The chroot is removed at the end, with the logs of failed runs:
# what they show of each failure is printed (below), and kept here.
if [ "$inner" = 0 ] && [ -z "${PG_CONFIG:-}" ] && [ "$version" != 15 ]; then
	args=(-n "$runs" -v "$version" --inner)
	[ "$short" = 1 ] && args+=(--short-duties)
	bash "$SRC/test/chroot.sh" "$version" "$SRC" \
		"PG_CONFIG=/usr/lib/postgresql/$version/bin/pg_config bash test/flaky.sh ${args[*]} ${files[*]}" 2>&1 |
		tee "$keep/output.txt"
	status=${PIPESTATUS[0]}
	echo "output: $keep/output.txt"
	exit "$status"
fi

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$version/bin/pg_config}
[ -x "$PG_CONFIG" ] || { echo "flaky.sh: no $PG_CONFIG" >&2; exit 2; }

# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"
idgen_prepare_host || exit 2

# A private copy of the tree, as test/suite.sh makes: built there (so that
# runs side by side do not share objects), and run by the test user.
WORK=$(mktemp -d /tmp/idgen-flaky.XXXXXX)
trap 'stop_busy; pkill -KILL -f -- "$WORK/" 2>/dev/null; rm -rf "$WORK"' EXIT
cp -a "$SRC/." "$WORK/src"
make -C "$WORK/src" -s clean >/dev/null 2>&1
if [ "$(id -u)" = 0 ] && ! { make -C "$WORK/src" -s PG_CONFIG="$PG_CONFIG" IDGEN_ASSERTS=1 >/dev/null &&
		make -C "$WORK/src" -s PG_CONFIG="$PG_CONFIG" IDGEN_ASSERTS=1 install >/dev/null; }; then
	echo "flaky.sh: could not build and install idgen" >&2
	exit 2
fi
# Runs of this script side by side reserve their ports in one directory.
mkdir -p /tmp/idgen-flaky-ports && chmod 1777 /tmp/idgen-flaky-ports
env="PG_TEST_PORT_DIR=/tmp/idgen-flaky-ports"
[ "$short" = 1 ] && env+=" TEMP_CONFIG='$WORK/src/test/short_duties.conf'"
[ "$(id -u)" = 0 ] && chown -R "$IDGEN_USER" "$WORK" && chown "$IDGEN_USER" "$keep"
chmod 755 "$WORK"

echo "flaky.sh: PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //'), $runs runs of ${#files[@]} file(s)," \
	"$cpu CPU and $disk disk loops beside them$([ "$short" = 1 ] && echo ', duties every second')"
declare -A fails=()
for i in $(seq "$runs"); do
	for f in "${files[@]}"; do
		name=$(basename "$f" .pl)
		start=$SECONDS
		if as_idgen_user "cd '$WORK/src' && $env make -s PG_CONFIG='$PG_CONFIG' prove-installcheck PROVE_TESTS='$f' >'$WORK/out' 2>&1"; then
			echo "run $i $name: ok ($((SECONDS - start)) s)"
		else
			fails[$f]=$((${fails[$f]:-0} + 1))
			echo "run $i $name: FAILED ($((SECONDS - start)) s)"
			# Each failed assertion with the 10 lines the test logged before it.
			grep -h -B 10 "^\[[0-9:.]*\]([0-9.]*s) not ok" "$WORK"/src/tmp_check/log/regress_log_* 2>/dev/null |
				sed 's/^/    /' | tail -n 80
			# and the end of its log, where a test that died says why
			echo "    the end of the test's log:"
			grep -h -v "^#\|^waiting for server\|^server st\|^### " "$WORK"/src/tmp_check/log/regress_log_* 2>/dev/null | tail -n 12 | sed "s/^/      /"
			tail -n 5 "$WORK/out" | sed 's/^/    /'
			mkdir -p "$keep/$name.$i"
			cp -a "$WORK/out" "$WORK"/src/tmp_check/log/. "$keep/$name.$i/" 2>/dev/null
		fi
	done
done

echo
status=0
for f in "${files[@]}"; do
	echo "$f: ${fails[$f]:-0} of $runs failed"
	[ "${fails[$f]:-0}" = 0 ] || status=1
done
[ "$status" = 0 ] || echo "logs of the failed runs: $keep"
exit $status
