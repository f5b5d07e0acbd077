#!/usr/bin/env bash
#
# test/run.sh: the whole idgen test suite, from a fresh clone, on every
# PostgreSQL major version Debian ships.
#
#   bash test/run.sh                 15, 17, 18 and 19
#   IDGEN_PG="15 18" bash test/run.sh   only those
#   PG_CONFIG=/path/to/pg_config bash test/run.sh
#                                    only the installation PG_CONFIG names,
#                                    on this machine
#
# Run as root on Debian 12 it installs what it needs.  PostgreSQL 15 is
# tested on the machine itself, with Debian 12's packages; 17, 18 and 19
# each inside a chroot of the Debian release that ships it, with that
# release's packages (test/chroot.sh: trixie, sid, sid with experimental).
# Each version runs test/suite.sh: the build with -Werror and idgen's
# assertions, the regression and isolation suites, the TAP tests with the
# libpq stress client, and the check that no test reached an internal
# error.  Once, on the machine itself:
#
#   metadata       idgen.control, META.json and README.md agree on the version
#   auto-failover  test/auto_failover.sh: pg_auto_failover (PostgreSQL 15),
#                  a switchover and a failover under load (about a minute)
#
# As another user than root, or with PG_CONFIG set, it runs test/suite.sh
# against that one installation, assuming the packages are installed and
# that it may run `make install`; no chroot.
#
# It ends with one summary line, "idgen: N passed, M failed", counting every
# version's suites, and exits non-zero if anything failed.
#
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HOST_VERSION=15
HOST_PG_CONFIG=/usr/lib/postgresql/$HOST_VERSION/bin/pg_config
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev libipc-run-perl faketime make gcc
	postgresql-15-auto-failover debootstrap zstd)

log() { printf '\n=== %s\n' "$*"; }

# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"

# What to run: each entry VERSION:WHERE, WHERE being "host" or "chroot".
runs=()
if [ -n "${PG_CONFIG:-}" ] || [ "$(id -u)" != 0 ]; then
	PG_CONFIG=${PG_CONFIG:-$HOST_PG_CONFIG}
	runs=("$("$PG_CONFIG" --version | sed 's/^PostgreSQL //; s/[^0-9].*//'):local")
else
	idgen_prepare_host "${PACKAGES[@]}" || exit 2
	for v in ${IDGEN_PG:-15 17 18 19}; do
		if [ "$v" = "$HOST_VERSION" ]; then runs+=("$v:host"); else runs+=("$v:chroot"); fi
	done
fi

passed=0
failed=0
failures=()
results=()
count() # NAME OK
{
	if [ "$2" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$1"); fi
}

# The version lives in idgen.control; META.json and the README must agree.
log "metadata"
version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$SRC/idgen.control")
meta_versions=$(perl -MJSON::PP -0777 -ne '$m = decode_json($_);
	print join("\n", sort { $a cmp $b } keys %{{ map { $_ => 1 } $m->{version},
		map { $_->{version} } values %{ $m->{provides} } }}), "\n"' "$SRC/META.json")
if [ -n "$version" ] && [ "$meta_versions" = "$version" ] &&
   [ -f "$SRC/sql/idgen--$version.sql" ] && grep -q "($version)" "$SRC/README.md"; then
	echo "version $version: idgen.control, META.json, README.md and sql/idgen--$version.sql agree"
	count metadata 0
else
	echo "version mismatch: control '$version', META.json '$meta_versions', or README.md / sql/idgen--$version.sql"
	count metadata 1
fi

# One version's suites; their last line is "PostgreSQL X.Y: N passed, M
# failed", which is added to the totals.
run_version() # VERSION WHERE
{
	local v=$1 where=$2 out line start=$SECONDS status
	out=$(mktemp /tmp/idgen-run-$v.XXXXXX)
	log "PostgreSQL $v ($where)"
	case $where in
		local) bash "$SRC/test/suite.sh" ;;
		host) PG_CONFIG=$HOST_PG_CONFIG bash "$SRC/test/suite.sh" ;;
		chroot) bash "$SRC/test/chroot.sh" "$v" "$SRC" \
			"PG_CONFIG=/usr/lib/postgresql/$v/bin/pg_config bash test/suite.sh" ;;
	esac 2>&1 | tee "$out"
	status=${PIPESTATUS[0]}
	line=$(grep -E '^PostgreSQL [^ ]+: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
	rm -f "$out"
	if [ -z "$line" ]; then
		# The chroot or the build never reached the suites.
		line="PostgreSQL $v: 0 passed, 1 failed"
		status=1
	fi
	[[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]
	passed=$((passed + BASH_REMATCH[1]))
	failed=$((failed + BASH_REMATCH[2]))
	[ "$status" -ne 0 ] && [ "${BASH_REMATCH[2]}" = 0 ] && failed=$((failed + 1))
	[ "$status" -ne 0 ] && failures+=("postgresql-$v")
	results+=("$line ($where, $((SECONDS - start)) s)")
}

for r in "${runs[@]}"; do
	run_version "${r%%:*}" "${r##*:}"
done

# pg_auto_failover: a planned and an unplanned failover under load (about
# a minute), on the machine's PostgreSQL 15 (Debian 12 ships its
# pg_auto_failover for 15).
if [[ " ${runs[*]} " == *" $HOST_VERSION:"* ]]; then
	log "auto-failover"
	PG_CONFIG=$HOST_PG_CONFIG bash "$SRC/test/auto_failover.sh"
	count auto-failover $?
fi

echo
printf '%s\n' "${results[@]}"
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "idgen: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
