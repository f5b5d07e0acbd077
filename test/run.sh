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
# Each version first builds the Debian package postgresql-NN-idgen for that
# version alone, with the tests of the build.  15's is the one the README's
# newcomer builds, as root from /root in a bare Debian 12 chroot
# (test/newcomer.sh, below, which then follows the rest of the README).
# The others' in a clean chroot of their release, as a user from their
# home, installed there, tested with their autopkgtest and removed beside
# clusters that preload idgen (test/package.sh).  Then it runs
# test/suite.sh: the build with -Werror and idgen's assertions, that
# package checked with lintian and installed (test/deb.sh), then, against
# the package's files, the regression and isolation suites, the TAP tests
# with the libpq stress client, and the check that no test reached an
# internal error.  17's package is built with idgen's assertions
# (IDGEN_ASSERTS=1), the others as users get them.
# With IDGEN_VENDOR naming a folder of Citus's release archives (checked
# against its SHA256SUMS), Citus is built for 15 (13.2.2, on the machine)
# and 18 (14.0.1, in its chroot) before their suites, and
# test/t/049_citus.pl runs it with idgen there (test/citus.sh; each build
# is kept in the chroot cache, about a minute to make); without it, the
# Citus step is reported as skipped.  No Citus release supports 17's
# pairing here or 19 yet.
# On the machine's own 15, test/t/019_recovery_horizon.pl runs its
# failover scenarios 10 times each (IDGEN_FAILOVER_ROUNDS; 2 elsewhere).
# On 17, every TAP test's clusters start with test/short_duties.conf
# (IDGEN_SHORT_DUTIES): purges and sequencer idle exits every second.
# In the chroot of 19, postgresql-18-idgen is installed too, and
# test/t/040_pg_upgrade.pl upgrades an 18 cluster to 19 with pg_upgrade
# (IDGEN_UPGRADE_FROM; skipped elsewhere).
# Once, on the machine itself:
#
#   metadata       idgen.control, META.json, CHANGELOG.md and README.md agree
#                  on the version; test/released.sh: every released SQL
#                  script has the hash sql/released.sha256 lists, and every
#                  script that make install ships is listed
#   debian         debian/changelog's upstream version is idgen.control's, and
#                  debian/control is up to date with debian/control.in
#   messages       test/messages.pl: every message of src/*/*.c and of the SQL
#                  script's RAISE has an entry in docs/troubleshooting.md
#                  under its SQLSTATE, and every message quoted there is
#                  one idgen or PostgreSQL raises
#   layout         make indent-check: src/ is laid out as pgindent lays out
#                  PostgreSQL's code (test/indent.sh)
#   docs           test/docs.pl: every relative link and #anchor of README.md
#                  and docs/*.md resolves, and every SQL block there is
#                  marked and run by a test
#   auto-failover  test/auto_failover.sh: pg_auto_failover (PostgreSQL 15),
#                  a switchover and a failover under load (about a minute)
#   patroni        test/patroni.sh: Patroni with etcd (Debian 12's patroni
#                  and etcd-server), three PostgreSQL 15 members, a
#                  switchover and a failover under load (about 3 minutes)
#   clients        test/clients.sh: the application code of
#                  docs/applications.md with node-postgres, Knex, Drizzle,
#                  postgres.js, Prisma, psycopg2, psycopg 3, asyncpg,
#                  SQLAlchemy (and asyncio), Alembic, Django, Active Record,
#                  Go's pgx and JDBC, and every function called with
#                  parameters through node-postgres and psycopg 3
#                  (PostgreSQL 15, about a minute from a cold cache)
#   generators     test/generators.sh: the example Snowflake generators of
#                  examples/ (Node.js, Python) with leased worker ids, run as
#                  processes (PostgreSQL 15, about 15 s)
#   pgxn           test/pgxn.sh: make dist's archive against the PGXN Meta
#                  Spec, installed with pgxnclient and loaded (PostgreSQL 15,
#                  about 40 s)
#   newcomer       test/newcomer.sh, run as 15's package step (above): the
#                  README followed as printed, as root in a bare Debian 12
#                  chroot: its Installation's package path, its SQL blocks
#                  in one session, the genes on a server of their own, and
#                  the removal (about 2 minutes, 4 with the bare chroot to
#                  make); counted when the versions have ended
#
# As another user than root, or with PG_CONFIG set, it runs test/suite.sh
# against that one installation, assuming the packages are installed and
# that it may run `make install` (as root with a system PostgreSQL's
# pg_config, it installs the Debian package instead); no chroot.
#
# It ends with one summary line, "idgen: N passed, M failed", counting every
# version's suites (", K skipped" added when a step could not run here:
# Citus without IDGEN_VENDOR), and exits non-zero if anything failed.
#
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HOST_VERSION=15
HOST_PG_CONFIG=/usr/lib/postgresql/$HOST_VERSION/bin/pg_config
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev libipc-run-perl faketime pgbouncer gdb make gcc
	postgresql-15-auto-failover postgresql-15-pglogical postgresql-15-partman debootstrap zstd pg-bsd-indent
	build-essential dpkg-dev lintian postgresql-server-dev-all)

log() { printf '\n=== %s\n' "$*"; }

# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"

# What to run: each entry VERSION:WHERE, WHERE being "host" (the machine's 15),
# "chroot" (test/chroot.sh) or "local" (the installation PG_CONFIG names).
# Citus: the release archive built for each version that has one
# (test/citus.sh), when IDGEN_VENDOR names the folder of the archives;
# and what building it needs on the machine.
declare -A CITUS_ARCHIVE=([15]=citus-13.2.2.tar.gz [18]=citus-14.0.1.tar.gz)
CITUS_BUILD_PACKAGES=(patch libzstd-dev liblz4-dev libkrb5-dev libssl-dev libicu-dev)
VENDOR=${IDGEN_VENDOR:-}
[ -z "$VENDOR" ] || VENDOR=$(cd "$VENDOR" 2>/dev/null && pwd) || VENDOR=$IDGEN_VENDOR
CACHE=${IDGEN_CHROOT_CACHE:-/var/cache/idgen-test}

runs=()
if [ -n "${PG_CONFIG:-}" ] || [ "$(id -u)" != 0 ]; then
	export PG_CONFIG=${PG_CONFIG:-$HOST_PG_CONFIG}
	runs=("$("$PG_CONFIG" --version | sed 's/^PostgreSQL //; s/[^0-9].*//'):local")
else
	[ -z "$VENDOR" ] || PACKAGES+=("${CITUS_BUILD_PACKAGES[@]}")
	idgen_prepare_host "${PACKAGES[@]}" || exit 2
	# In order (19's upgrade test waits for 18's package).
	for v in $(printf '%s\n' ${IDGEN_PG:-15 17 18 19} | sort -n -u); do
		if [ "$v" = "$HOST_VERSION" ]; then runs+=("$v:host"); else runs+=("$v:chroot"); fi
	done
fi

passed=0
failed=0
skipped=0
failures=()
results=()
count() # NAME OK
{
	if [ "$2" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$1"); fi
}

# The Citus archives: those SHA256SUMS lists in IDGEN_VENDOR, unchanged.
citus_versions=()
for r in "${runs[@]}"; do
	[ "${r##*:}" != local ] && [ -n "${CITUS_ARCHIVE[${r%%:*}]:-}" ] && citus_versions+=("${r%%:*}")
done
if [ ${#citus_versions[@]} -gt 0 ] && [ -n "$VENDOR" ]; then
	log "Citus archives"
	ok=0
	for v in "${citus_versions[@]}"; do
		a=${CITUS_ARCHIVE[$v]}
		if ! grep -q " $a\$" "$VENDOR/SHA256SUMS" 2>/dev/null ||
			! (cd "$VENDOR" && grep " $a\$" SHA256SUMS | sha256sum -c --quiet); then
			echo "$VENDOR/$a: missing, or not the archive $VENDOR/SHA256SUMS lists"
			ok=1
		fi
	done
	[ $ok = 0 ] && echo "$VENDOR: ${citus_versions[*]/#/PostgreSQL }: their archives are the ones SHA256SUMS lists"
	count citus-archives $ok
	[ $ok = 0 ] || VENDOR=
fi

# The version lives in idgen.control; META.json and the README must agree,
# and the released scripts must be the ones released (test/released.sh).
log "metadata"
version=$(make -s -C "$SRC" version PG_CONFIG="${PG_CONFIG:-$HOST_PG_CONFIG}")
meta_versions=$(perl -MJSON::PP -0777 -ne '$m = decode_json($_);
	print join("\n", sort { $a cmp $b } keys %{{ map { $_ => 1 } $m->{version},
		map { $_->{version} } values %{ $m->{provides} } }}), "\n"' "$SRC/META.json")
meta_file=$(perl -MJSON::PP -0777 -ne 'print decode_json($_)->{provides}{idgen}{file}' "$SRC/META.json")
if [ -n "$version" ] && [ "$meta_versions" = "$version" ] &&
   [ "$meta_file" = "sql/idgen--$version.sql" ] && [ -f "$SRC/sql/idgen--$version.sql" ] &&
   grep -q "^## $version (" "$SRC/CHANGELOG.md" && grep -q "($version)" "$SRC/README.md"; then
	echo "version $version: idgen.control, META.json, CHANGELOG.md, README.md and sql/idgen--$version.sql agree"
	meta_ok=0
else
	echo "version mismatch: control '$version', META.json '$meta_versions' ($meta_file), or CHANGELOG.md / README.md / sql/idgen--$version.sql"
	meta_ok=1
fi
bash "$SRC/test/released.sh" || meta_ok=1
count metadata $meta_ok

# The Debian package's version follows idgen.control's (debian/changelog's
# upstream part, before the Debian revision), and debian/control is what
# pg_buildext makes of debian/control.in for Debian 12's PostgreSQL 15.
log "debian"
deb_version=$(sed -n '1s/^idgen (\([^)]*\)) .*/\1/p' "$SRC/debian/changelog")
deb_upstream=${deb_version#*:}
deb_upstream=${deb_upstream%-*}
if [ -z "$version" ] || [ "$deb_upstream" != "$version" ]; then
	echo "debian/changelog's version '$deb_version' is not idgen.control's '$version' with a Debian revision (e.g. $version-1)"
	count debian 1
elif command -v pg_buildext >/dev/null && ! (cd "$SRC" && PG_SUPPORTED_VERSIONS=15 pg_buildext checkcontrol); then
	echo "debian/control is not what pg_buildext makes of debian/control.in"
	count debian 1
else
	echo "debian/changelog $deb_version: upstream version $version, as idgen.control; debian/control up to date"
	count debian 0
fi

# docs/troubleshooting.md and the messages of the code agree, both ways.
log "messages"
PG_CONFIG="${PG_CONFIG:-$HOST_PG_CONFIG}" perl "$SRC/test/messages.pl"
count messages $?

# The code is laid out as PostgreSQL's (make indent-check: pg_bsd_indent
# with pgindent's options changes nothing in src/).
if [ "$(id -u)" = 0 ] && [ -z "${PG_CONFIG:-}" ]; then
	log "layout"
	bash "$SRC/test/indent.sh" --check
	count layout $?
fi

# The documentation's links resolve and its SQL examples are all run.
log "docs"
perl "$SRC/test/docs.pl"
count docs $?

# One version's suites, in a pristine copy of the tree, with their output
# in a log file.  Their last line, "PostgreSQL X.Y: N passed, M failed", is
# added to the totals when the version is reported.
SNAPSHOT=$(mktemp -d /tmp/idgen-runs.XXXXXX)
declare -A job_run=() job_start=()
# On an interrupt, stop the versions still running (test/chroot.sh then
# ends what runs in its chroot and removes it).
stop_jobs()
{
	local pids=("${!job_run[@]}") all=() p alive
	while [ ${#pids[@]} -gt 0 ]; do
		all+=("${pids[@]}")
		mapfile -t pids < <(for p in "${pids[@]}"; do pgrep -P "$p"; done)
	done
	[ ${#all[@]} -gt 0 ] || return 0
	kill -TERM "${all[@]}" 2>/dev/null
	# Until each has ended (test/chroot.sh removing its chroot), 60 s at most.
	for _ in $(seq 600); do
		alive=
		for p in "${all[@]}"; do kill -0 "$p" 2>/dev/null && alive=yes; done
		[ -n "$alive" ] || return 0
		sleep 0.1
	done
}
trap 'stop_jobs; rm -rf "$SNAPSHOT"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tar -c -C "$SRC" --exclude=.git . | { mkdir "$SNAPSHOT/tree" && tar -x -C "$SNAPSHOT/tree"; }
run_version() # VERSION WHERE
{
	local v=$1 where=$2 tree=$SNAPSHOT/$1 status
	cp -a "$SNAPSHOT/tree" "$tree"
	case $where in
		local) bash "$tree/test/suite.sh" ;;
		host) build_package "$v" "$tree" && citus_host "$v" "$tree" &&
			IDGEN_FAILOVER_ROUNDS=${IDGEN_FAILOVER_ROUNDS:-10} PG_CONFIG=$HOST_PG_CONFIG \
			IDGEN_PACKAGES=$PACKAGES_DIR bash "$tree/test/suite.sh" ;;
		chroot) build_package "$v" "$tree" && citus_share "$v" &&
			bash "$tree/test/chroot.sh" --share "$PACKAGES_DIR" "$v" "$tree" \
			"$(upgrade_from "$v")$(citus_chroot "$v")$(short_duties "$v")$(asserts "$v")IDGEN_PACKAGES=/share PG_CONFIG=/usr/lib/postgresql/$v/bin/pg_config bash test/suite.sh"
			status=$?
			citus_keep "$v"
			return $status ;;
	esac
}

# Citus for VERSION, when it has an archive and IDGEN_VENDOR is set: built
# (or taken from the cache) and installed before the suites, so that
# test/t/049_citus.pl runs; test/citus.sh's exit status goes to
# PACKAGES_DIR/citus-VERSION.done.  A failed build does not stop the
# suites (049 then skips, and the Citus step counts as failed).
citus_built_for() # VERSION
{
	[ -n "$VENDOR" ] && [ -n "${CITUS_ARCHIVE[$1]:-}" ]
}
# On the machine: the cache is the chroots'.
citus_host() # VERSION TREE
{
	citus_built_for "$1" || return 0
	log "PostgreSQL $1: Citus (test/citus.sh)"
	bash "$2/test/citus.sh" "$VENDOR/${CITUS_ARCHIVE[$1]}" "$HOST_PG_CONFIG" "$CACHE"
	echo "$?" >"$PACKAGES_DIR/citus-$1.done"
}
# In a chroot: the archive and the cache's builds for VERSION go to
# PACKAGES_DIR/citus (at /share/citus there) before, and a new build comes
# back to the cache after (citus_keep).
citus_share() # VERSION
{
	citus_built_for "$1" || return 0
	mkdir -p "$PACKAGES_DIR/citus"
	cp "$VENDOR/${CITUS_ARCHIVE[$1]}" "$PACKAGES_DIR/citus/"
	cp "$CACHE"/citus-*-pg"$1"-*.tar.gz "$PACKAGES_DIR/citus/" 2>/dev/null
	return 0
}
citus_chroot() # VERSION
{
	citus_built_for "$1" || return 0
	printf '%s' "{ bash test/citus.sh /share/citus/${CITUS_ARCHIVE[$1]} /usr/lib/postgresql/$1/bin/pg_config /share/citus; echo \$? >/share/citus-$1.done; }; "
}
citus_keep() # VERSION
{
	local b
	for b in "$PACKAGES_DIR"/citus/citus-*-pg"$1"-*.tar.gz; do
		[ -f "$b" ] && [ ! -f "$CACHE/${b##*/}" ] || continue
		rm -f "$CACHE"/"$(sed -E 's/-[0-9a-f]{12}\.tar\.gz$//' <<<"${b##*/}")"-*.tar.gz
		cp "$b" "$CACHE/"
	done
	return 0
}

# The package postgresql-VERSION-idgen, built with the tests of the build,
# into PACKAGES_DIR/VERSION; then PACKAGES_DIR/VERSION.done holds its exit
# status.  15's as the README's newcomer builds it, as root from /root in
# a bare Debian 12 chroot (test/newcomer.sh, whose own exit status goes to
# PACKAGES_DIR/newcomer.done: the suites need its package only); the
# others' in a clean chroot of the release that ships VERSION, installed
# there and tested with its autopkgtest (test/package.sh), as a user from
# their home, 17's with idgen's assertions.
PACKAGES_DIR=$SNAPSHOT/packages
mkdir "$PACKAGES_DIR"
build_package() # VERSION TREE
{
	local v=$1 status start=$SECONDS
	if [ "$v" = "$HOST_VERSION" ]; then
		log "PostgreSQL $v: the package, built as the README says (test/newcomer.sh)"
		bash "$2/test/newcomer.sh" "$PACKAGES_DIR/$v"
		echo "$?" >"$PACKAGES_DIR/newcomer.done"
		compgen -G "$PACKAGES_DIR/$v/postgresql-$v-idgen_*.deb" >/dev/null
		status=$?
	else
		log "PostgreSQL $v: the package, built and tested in a clean chroot (test/package.sh)"
		bash "$2/test/chroot.sh" --clean --share "$PACKAGES_DIR" "$v" "$2" "$(asserts "$v")bash test/package.sh $v /share/$v"
		status=$?
	fi
	echo "$status" >"$PACKAGES_DIR/$v.done"
	echo "the package of $v: exit status $status, in $((SECONDS - start)) s"
	return "$status"
}

# On 17, the package and the suites' build with idgen's assertions, which
# the suites then check under their whole load; elsewhere the package as
# users get it.
asserts() # VERSION
{
	[ "$1" = 17 ] || return 0
	printf '%s' "IDGEN_ASSERTS=1 "
}

# In the chroot of 19, which has 18 too (sid's postgresql-all): idgen
# installed for 18 from 18's package (test/deb.sh, once 18's run has built
# it), before the suites, and IDGEN_UPGRADE_FROM set, so that
# test/t/040_pg_upgrade.pl upgrades an 18 cluster to 19 as users would,
# both majors' idgen from packages (about 30 s).  For other versions, and
# when 18 is not run or its package failed, nothing (040 is then skipped).
upgrade_from() # VERSION
{
	[ "$1" = 19 ] || return 0
	if [[ " ${runs[*]} " != *" 18:chroot "* ]]; then
		echo "PostgreSQL 19: no upgrade from 18 (18 is not run)" >&2
		return 0
	fi
	while [ ! -s "$PACKAGES_DIR/18.done" ]; do sleep 5; done
	if [ "$(cat "$PACKAGES_DIR/18.done")" != 0 ]; then
		echo "PostgreSQL 19: no upgrade from 18 (18's package failed)" >&2
		return 0
	fi
	printf '%s' "bash test/deb.sh 18 /share/18 && export IDGEN_UPGRADE_FROM=/usr/lib/postgresql/18 && "
}

# On 17, the TAP tests with idgen's background duties every second
# (test/short_duties.conf through TEMP_CONFIG): every test must hold them
# off itself, or wait for them, where they could change what it checks.
short_duties() # VERSION
{
	[ "$1" = 17 ] || return 0
	printf '%s' "IDGEN_SHORT_DUTIES=1 "
}

# Print a finished version's log and count its results.
report_version() # VERSION WHERE STATUS SECONDS
{
	local v=$1 where=$2 status=$3 seconds=$4 log=$SNAPSHOT/$1.log line
	log "PostgreSQL $v ($where): its log"
	cat "$log"
	line=$(grep -E '^PostgreSQL [^ ]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
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
	results+=("$line ($where, $seconds s)")
}

# Versions run IDGEN_JOBS at a time (default 2: the suites wait on servers
# more than they compute, and two fit a 2-vCPU machine); each one's log is
# printed when it ends.
jobs_max=${IDGEN_JOBS:-2}
if ! [[ $jobs_max =~ ^[1-9][0-9]*$ ]]; then
	echo "run.sh: IDGEN_JOBS must be a whole number from 1, not '$jobs_max'" >&2
	exit 2
fi
next=0
while [ $next -lt ${#runs[@]} ] || [ ${#job_run[@]} -gt 0 ]; do
	if [ $next -lt ${#runs[@]} ] && [ ${#job_run[@]} -lt "$jobs_max" ]; then
		r=${runs[$next]}
		next=$((next + 1))
		log "PostgreSQL ${r%%:*} (${r##*:}): started"
		run_version "${r%%:*}" "${r##*:}" >"$SNAPSHOT/${r%%:*}.log" 2>&1 &
		job_run[$!]=$r
		job_start[$!]=$SECONDS
		continue
	fi
	wait -n -p done_pid "${!job_run[@]}"
	status=$?
	r=${job_run[$done_pid]}
	report_version "${r%%:*}" "${r##*:}" "$status" $((SECONDS - job_start[$done_pid]))
	unset "job_run[$done_pid]" "job_start[$done_pid]"
done

# pg_auto_failover: a planned and an unplanned failover under load (about
# a minute), on the machine's PostgreSQL 15 (Debian 12 ships its
# pg_auto_failover for 15).
if [[ " ${runs[*]} " == *" $HOST_VERSION:"* ]]; then
	log "auto-failover"
	PG_CONFIG=$HOST_PG_CONFIG bash "$SRC/test/auto_failover.sh"
	count auto-failover $?
fi

# Patroni with etcd: a switchover and a failover under load, the members'
# shared settings as docs/high-availability.md prints them (about 3
# minutes, on the machine's PostgreSQL 15; Debian 12 ships Patroni).
if [[ " ${runs[*]} " == *" $HOST_VERSION:"* ]]; then
	log "patroni"
	PG_CONFIG=$HOST_PG_CONFIG bash "$SRC/test/patroni.sh"
	count patroni $?
fi

# The README's code for applications, run with the client libraries it
# names (npm's and Debian's), on the machine's PostgreSQL 15.
if [[ " ${runs[*]} " == *" $HOST_VERSION:"* ]]; then
	log "clients"
	PG_CONFIG=$HOST_PG_CONFIG bash "$SRC/test/clients.sh"
	count clients $?
fi

# The example generators of examples/, with worker ids leased from the
# machine's PostgreSQL 15.
if [[ " ${runs[*]} " == *" $HOST_VERSION:"* ]]; then
	log "generators"
	PG_CONFIG=$HOST_PG_CONFIG bash "$SRC/test/generators.sh"
	count generators $?
fi

# The PGXN archive: make dist, checked against the PGXN Meta Spec,
# installed with pgxnclient and loaded into a preloaded server (about 40 s,
# on the machine's PostgreSQL 15; it installs idgen there, as the scripts
# above do).
if [[ " ${runs[*]} " == *" $HOST_VERSION:"* ]]; then
	log "pgxn"
	PG_CONFIG=$HOST_PG_CONFIG bash "$SRC/test/pgxn.sh"
	count pgxn $?
fi

# Citus: for each version with an archive, test/citus.sh's build and
# install, and test/t/049_citus.pl run (not skipped) in its suites.
# Without IDGEN_VENDOR, skipped.
if [ ${#citus_versions[@]} -gt 0 ]; then
	log "citus"
	if [ -z "$VENDOR" ] && [ -z "${IDGEN_VENDOR:-}" ]; then
		echo "Citus: skipped: IDGEN_VENDOR names no folder of Citus's release archives (docs/development.md#citus)"
		skipped=$((skipped + 1))
	else
		for v in "${citus_versions[@]}"; do
			status=$(cat "$PACKAGES_DIR/citus-$v.done" 2>/dev/null)
			if [ "${status:-1}" != 0 ]; then
				echo "PostgreSQL $v: Citus ${CITUS_ARCHIVE[$v]} was not built and installed (test/citus.sh: exit status ${status:-none})"
				count "citus-$v" 1
			elif ! grep -Eq '049_citus\.pl \.+ ok' "$SNAPSHOT/$v.log"; then
				echo "PostgreSQL $v: Citus installed, but test/t/049_citus.pl did not pass (in its log above)"
				count "citus-$v" 1
			else
				echo "PostgreSQL $v: Citus ${CITUS_ARCHIVE[$v]} built and installed, test/t/049_citus.pl passed"
				count "citus-$v" 0
			fi
		done
	fi
fi

# The README as a newcomer follows it (test/newcomer.sh), run as 15's
# package step: its exit status, its log being 15's.
if [[ " ${runs[*]} " == *" $HOST_VERSION:"* ]]; then
	log "newcomer"
	status=$(cat "$PACKAGES_DIR/newcomer.done" 2>/dev/null)
	echo "test/newcomer.sh, in PostgreSQL $HOST_VERSION's log above: exit status ${status:-none}"
	count newcomer "${status:-1}"
fi

echo
printf '%s\n' "${results[@]}"
if [ ${#results[@]} -ne ${#runs[@]} ]; then
	echo "run.sh: ${#results[@]} of ${#runs[@]} versions reported results"
	count versions 1
fi
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
summary="idgen: $passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary+=", $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
