#!/usr/bin/env bash
#
# test/newcomer.sh: the README followed as printed by a newcomer, as root on
# a fresh Debian 12 machine: a bare bookworm chroot (test/chroot.sh --bare:
# debootstrap's minimal system, nothing else installed).
#
#   bash test/newcomer.sh [RESULTS]
#
# Run as root.  test/newcomer.pl takes the README's blocks marked
# "<!-- test: newcomer/NAME -->"; then, in the chroot, from a copy of the
# tree in /root/idgen (root's home, mode 0700, where a clone lands):
#
#   install     the Installation's shell commands, verbatim (bash -e): the
#               server, the package built with its tests (its log must
#               show them passed), installed.  With RESULTS, what the
#               build made (the .deb, its -dbgsym, the .changes and the
#               .buildinfo) is copied there as soon as it is installed,
#               whatever the later steps find: test/run.sh's suites on
#               15 test that package (test/deb.sh)
#   preload     its postgresql.conf lines appended to the default
#               cluster's, and the restart it names (pg_ctlcluster)
#   session     every other SQL block of the README, in its order, in one
#               psql session as the postgres user: the installation's
#               schema, Getting started, converting a serial key, UUIDv7,
#               per-key sequences, public IDs, leases, the standby query,
#               range scans, monitoring; and in a new session, the
#               search_path the installation set
#   genes       a new cluster with the preload and the genes' layout (the
#               README chooses it before a server's first ID), the
#               installation's SQL and the genes' block
#   removal     as the README says: idgen out of shared_preload_libraries
#               and the clusters restarted, DROP EXTENSION idgen CASCADE,
#               apt-get remove (no warning), and the clusters start again
#
# Then test/newcomer.pl checks what each block printed.  It prints each
# step's time and exits non-zero if a step or a check failed.
#
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"

if [ "${1:-}" = --inner ]; then
	# In the chroot, as root, from /idgen.
	S=$2
	step() { printf '\n--- %s\n' "$*"; start=$SECONDS; }
	took() { echo "(${1:-done}, $((SECONDS - start)) s)"; }
	# (from /, which postgres may enter: not from /root/idgen)
	as_postgres() { (cd / && su postgres -c "$1"); }
	conf() { echo "/etc/postgresql/15/$1/postgresql.conf"; }

	step "README, Installation: its shell commands, as root in /root/idgen"
	rm -rf /root/idgen && cp -a /idgen /root/idgen && cd /root/idgen || exit 1
	if ! bash -e -x "$S/install.sh" >"$S/install.log" 2>&1; then
		tail -n 60 "$S/install.log"
		echo "newcomer.sh: the Installation's commands failed (install.log)"
		exit 1
	fi
	idgen_build_tests_passed "$S/install.log" || exit 1
	grep -E '^Setting up postgresql-15-idgen' "$S/install.log"
	mkdir "$S/packages" &&
		cp /root/postgresql-15-idgen_*.deb /root/postgresql-15-idgen-dbgsym_*.deb \
			/root/idgen_*.changes /root/idgen_*.buildinfo "$S/packages/" || exit 1
	took

	step "README, Installation: the preload, and the restart"
	cat "$S/preload.conf" >>"$(conf main)"
	pg_ctlcluster 15 main restart || exit 1
	took

	step "README: its SQL blocks in one psql session"
	as_postgres "psql -X -q -At -v ON_ERROR_STOP=1 -f $S/session.sql" >"$S/session.out" 2>&1
	echo $? >"$S/session.status"
	as_postgres "psql -X -At -c 'SHOW search_path'" >"$S/search_path.out" 2>&1
	took

	step "README, genes: a new cluster with their layout"
	pg_createcluster 15 genes >/dev/null || exit 1
	cat "$S/preload.conf" "$S/genes.conf" >>"$(conf genes)"
	pg_ctlcluster 15 genes start || exit 1
	port=$(pg_lsclusters -h | awk '$2 == "genes" { print $3 }')
	as_postgres "psql -X -q -At -p $port -v ON_ERROR_STOP=1 -f $S/genes.sql" >"$S/genes.out" 2>&1
	echo $? >"$S/genes.status"
	took

	step "README: removing idgen"
	for c in main genes; do
		sed -i 's/^\([[:space:]]*shared_preload_libraries\)/#\1/' "$(conf "$c")"
		pg_ctlcluster 15 "$c" restart || exit 1
		port=$(pg_lsclusters -h | awk -v c="$c" '$2 == c { print $3 }')
		as_postgres "psql -X -q -p $port -v ON_ERROR_STOP=1 -c 'DROP EXTENSION idgen CASCADE'" >>"$S/remove.log" 2>&1 ||
			{ cat "$S/remove.log"; echo "newcomer.sh: DROP EXTENSION idgen CASCADE failed in $c"; exit 1; }
	done
	apt-get remove -y -qq postgresql-15-idgen >>"$S/remove.log" 2>&1 || { cat "$S/remove.log"; exit 1; }
	for c in main genes; do
		pg_ctlcluster 15 "$c" restart || { echo "newcomer.sh: cluster $c did not start after the removal"; exit 1; }
	done
	if grep -q 'warning: cluster' "$S/remove.log"; then
		cat "$S/remove.log"
		echo "newcomer.sh: the package warned of a cluster that no longer preloads idgen"
		exit 1
	fi
	echo "removed; no warning, both clusters started again"
	for c in main genes; do pg_ctlcluster 15 "$c" stop; done
	took
	exit 0
fi

[ "$(id -u)" = 0 ] || { echo "newcomer.sh: run it as root" >&2; exit 2; }
RESULTS=${1:-}
begin=$SECONDS
share=$(mktemp -d /tmp/idgen-newcomer.XXXXXX)
trap 'rm -rf "$share"' EXIT
chmod 755 "$share"   # the blocks are read by psql as postgres
(cd "$SRC" && perl test/newcomer.pl extract "$share") || exit 1
bash "$SRC/test/chroot.sh" --bare --share "$share" 15 "$SRC" "bash test/newcomer.sh --inner /share"
status=$?
if [ -n "$RESULTS" ] && [ -d "$share/packages" ]; then
	mkdir -p "$RESULTS" && cp "$share"/packages/* "$RESULTS/" || status=1
	echo "newcomer: the package its Installation built, in $RESULTS: $(cd "$RESULTS" && echo *.deb)"
fi
echo
(cd "$SRC" && perl test/newcomer.pl check "$share") || status=1
echo "newcomer: $((SECONDS - begin)) s"
exit $status
