#!/usr/bin/env bash
#
# test/chroot.sh: run a command inside a chroot of the Debian release that
# ships PostgreSQL VERSION, with that release's own packages installed.
#
#   bash test/chroot.sh [--bare | --clean] [--share HOSTDIR] VERSION DIR COMMAND
#
# Run as root on Debian.  The tree DIR is copied to /idgen in the chroot and
# COMMAND (a shell command line) runs there as root, from /idgen.  Its exit
# status is this script's.
#
#   VERSION  release               apt sources
#   15       bookworm              bookworm (--bare and --clean only: the
#                                  machine itself is Debian 12 and runs
#                                  15's tests)
#   17       trixie                trixie
#   18       sid                   sid
#   19       sid                   sid and experimental (19 is a release
#                                  candidate there)
#
# Three kinds of chroot:
#
#   --bare   a fresh Debian machine, as far as a chroot is one:
#            debootstrap's minimal system and nothing installed, for
#            test/newcomer.sh, which installs what the README says.  One
#            thing differs: no package starts a service (policy-rc.d), as
#            in the other kinds.  The chroot shares the machine's network,
#            which the README's apt-get needs: a cluster made there
#            (pg_createcluster) takes a port no process listens on, and
#            starts when told to.
#   --clean  what building the package needs and nothing more: debootstrap's
#            minimal system, build-essential, and debian/control's
#            Build-Depends (debhelper, libpq-dev, postgresql-server-dev-all,
#            postgresql-all), as `apt-get build-dep` installs them, and
#            postgresql-VERSION with its headers (in 19's, from
#            experimental: sid's postgresql-all is 18's).  test/package.sh
#            builds, installs and tests the package there.
#   (default) the clean chroot, and what the suites need besides (their
#            tools, lintian, and pg_partman where the release ships it
#            for VERSION; in 18's, what building Citus needs).
#
# COMMAND runs in a network namespace of its own in the clean and the
# suites' chroots, with loopback alone (they install nothing from the
# network once made): the servers their tests start meet no port of
# another chroot's or of the machine's.  The package build's test server
# (pg_virtualenv) takes the first port it finds free, 5432 first, and met
# one a bare chroot's cluster took back while it restarted.
#
# Each is kept as a tarball in $IDGEN_CHROOT_CACHE (default
# /var/cache/idgen-test), named by kind, release, version and a digest of
# what this script installs, and made again when missing: the bare one
# with debootstrap, the clean one from the bare one's tarball, the suites'
# from the clean one's.  Every run
# unpacks it into a new directory and removes that directory at the end,
# also after a failure or an interrupt.
#
# --share HOSTDIR: the machine's directory HOSTDIR is mounted at /share in
# the chroot, read and write (how test/run.sh passes the packages built in
# a clean chroot to the suites').
#
# Packages come from $IDGEN_DEBIAN_MIRROR (default http://deb.debian.org/debian).
#
# Nothing is mounted on the machine itself: the chroot's /proc, /dev and
# /dev/shm (and /share) are mounted inside a private mount namespace
# (unshare), which disappears with its last process; at the end, processes
# still running in the chroot (a server a failed test left behind) are
# killed.
#
set -uo pipefail

usage="usage: chroot.sh [--bare | --clean] [--share HOSTDIR] VERSION DIR COMMAND"
KIND=suite
SHARE=
while [ $# -gt 0 ]; do
	case $1 in
		--bare) KIND=bare; shift ;;
		--clean) KIND=clean; shift ;;
		--share) SHARE=${2:?$usage}; shift 2 ;;
		*) break ;;
	esac
done
VERSION=${1:?$usage}
TREE=${2:?$usage}
COMMAND=${3:?$usage}
CACHE=${IDGEN_CHROOT_CACHE:-/var/cache/idgen-test}
MIRROR=${IDGEN_DEBIAN_MIRROR:-http://deb.debian.org/debian}

case $VERSION in
	15) RELEASE=bookworm; EXPERIMENTAL= ;;
	17) RELEASE=trixie; EXPERIMENTAL= ;;
	18) RELEASE=sid; EXPERIMENTAL= ;;
	19) RELEASE=sid; EXPERIMENTAL=yes ;;
	*) echo "chroot.sh: no current Debian release ships PostgreSQL $VERSION (15: bookworm, 17: trixie, 18: sid, 19: experimental)" >&2
	   exit 2 ;;
esac
if [ "$VERSION" = 15 ] && [ "$KIND" = suite ]; then
	echo "chroot.sh: 15's suites run on the machine itself (Debian 12); its chroot is --bare or --clean only" >&2
	exit 2
fi
[ -z "$SHARE" ] || [ -d "$SHARE" ] || { echo "chroot.sh: no directory $SHARE" >&2; exit 2; }

# The clean chroot: the package's Build-Depends, and VERSION's server and
# headers.  For 19, those and libpq come from experimental (apt takes the
# rest from sid, whose postgresql-all brings 18, which
# test/t/040_pg_upgrade.pl upgrades from).
CORE=(postgresql-$VERSION postgresql-server-dev-$VERSION libpq-dev)
[ -n "$EXPERIMENTAL" ] && CORE=("${CORE[@]/%//experimental}" libpq5/experimental)
CLEAN_PACKAGES=("${CORE[@]}" build-essential debhelper postgresql-server-dev-all postgresql-all)
# The suites' chroot adds what the tests need, as in test/run.sh's list for
# the machine itself, and lintian (test/deb.sh).
SUITE_PACKAGES=(make gcc libc6-dev libipc-run-perl faketime pgbouncer gdb dpkg-dev lintian)
# pg_partman where the release ships it for VERSION (trixie's 5.2 for 17,
# sid's 5.5 for 18; none for 19 yet): test/t/048_partman.pl.
case $VERSION in 17 | 18) SUITE_PACKAGES+=("postgresql-$VERSION-partman") ;; esac
# What building Citus for 18 needs (test/citus.sh; Citus 14.0.1 supports
# 16 to 18, and test/run.sh builds it for 18 alone): sid's 18 is built with
# libcurl, which Citus's build then needs too.
if [ "$VERSION" = 18 ]; then SUITE_PACKAGES+=(patch libzstd-dev liblz4-dev libkrb5-dev libssl-dev libicu-dev libcurl4-openssl-dev); fi

# The tarballs' names change with what is installed into them.
bare_digest=$( { printf '%s\n' "$RELEASE" "$EXPERIMENTAL"
	sed -n '/^setup_bare()/,/^}/p' "$0"; } | sha256sum | cut -c1-12)
BARE_TARBALL=$CACHE/bare-$RELEASE${EXPERIMENTAL:+-experimental}-$bare_digest.tar.zst
clean_digest=$( { printf '%s\n' "$bare_digest" "${CLEAN_PACKAGES[@]}"
	sed -n '/^setup_clean()/,/^}/p' "$0"; } | sha256sum | cut -c1-12)
CLEAN_TARBALL=$CACHE/clean-$RELEASE-pg$VERSION-$clean_digest.tar.zst
suite_digest=$( { printf '%s\n' "$clean_digest" "${SUITE_PACKAGES[@]}"
	sed -n '/^setup_suite()/,/^}/p' "$0"; } | sha256sum | cut -c1-12)
SUITE_TARBALL=$CACHE/$RELEASE-pg$VERSION-$suite_digest.tar.zst

ROOT=
tmp=
cleanup()
{
	[ -n "$tmp" ] && rm -f "$tmp"
	[ -n "$ROOT" ] || return 0
	# Processes left in the chroot keep its namespace alive: end them.
	local pid left=()
	for pid in /proc/[0-9]*; do
		[ "$(readlink "$pid/root" 2>/dev/null)" = "$ROOT" ] && left+=("${pid#/proc/}")
	done
	if [ ${#left[@]} -gt 0 ]; then
		echo "chroot.sh: ending ${#left[@]} processes left in the chroot" >&2
		kill -KILL "${left[@]}" 2>/dev/null
		sleep 1
	fi
	if grep -qF " $ROOT/" /proc/self/mountinfo; then
		echo "chroot.sh: $ROOT still has mounts; not removing it" >&2
		ROOT=
		return 1
	fi
	rm -rf --one-file-system "$ROOT" "$ROOT.debootstrap.log"
	ROOT=
}
trap 'cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_in ROOT COMMAND [--own-network]: COMMAND as root in the chroot ROOT,
# with /proc, /dev and a private /dev/shm mounted in a mount namespace of
# its own (and SHARE at /share when set), and an IPC namespace of its own
# (so a server killed there leaves no System V shared memory behind on the
# machine); with --own-network, in a network namespace of its own too, its
# loopback up.
run_in()
{
	local net=()
	[ "${3:-}" = --own-network ] && net=(--net)
	unshare --mount --ipc "${net[@]}" --propagation private -- /bin/bash -c '
		set -e
		[ -z "$3" ] || ip link set lo up
		mount -t proc proc "$0/proc"
		mount --rbind /dev "$0/dev"
		mount -t tmpfs -o mode=1777 tmpfs "$0/dev/shm"
		if [ -n "$2" ]; then mkdir -p "$0/share"; mount --bind "$2" "$0/share"; fi
		exec chroot "$0" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
			CI="${CI:-}" DEBIAN_FRONTEND=noninteractive /bin/bash -c "$1"' "$1" "$2" "${SHARE:-}" "${net[*]}"
}

# setup_bare ROOT: debootstrap the release into ROOT, where no package
# starts a service (see the header).
setup_bare()
{
	local root=$1
	# debootstrap mounts /proc and /sys in the chroot: in a namespace too.
	unshare --mount --propagation private -- \
		debootstrap --variant=minbase "$RELEASE" "$root" "$MIRROR" >"$root.debootstrap.log" 2>&1 ||
		{ tail -n 20 "$root.debootstrap.log" >&2; return 1; }
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	# sid's and experimental's Release files may be past their Valid-Until.
	echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99idgen-test"
	[ -n "$EXPERIMENTAL" ] && echo "deb $MIRROR experimental main" >"$root/etc/apt/sources.list.d/experimental.list"
	# No package starts a service in the chroot (pgbouncer's would start
	# one, listening on the machine's network); the tests start their own.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
}

# setup_clean ROOT: the bare chroot (unpacked into ROOT) and
# CLEAN_PACKAGES.  Debian's packages, as a user installs them; the default
# cluster is not created, and apt's downloads are not kept.
setup_clean()
{
	local root=$1
	tar -x -C "$root" --zstd -f "$BARE_TARBALL" || return 1
	mkdir -p "$root/etc/postgresql-common/createcluster.d"
	echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.d/idgen-test.conf"
	install_in "$root" "${CLEAN_PACKAGES[@]}" || return 1
	[ -x "$root/usr/lib/postgresql/$VERSION/bin/pg_config" ] || { echo "pg_config $VERSION is missing" >&2; return 1; }
}

# setup_suite ROOT: the clean chroot (unpacked into ROOT), and
# SUITE_PACKAGES.
setup_suite()
{
	local root=$1
	tar -x -C "$root" --zstd -f "$CLEAN_TARBALL" || return 1
	install_in "$root" "${SUITE_PACKAGES[@]}"
}

install_in() # ROOT PACKAGE...
{
	local root=$1
	shift
	run_in "$root" "apt-get update -qq && apt-get install -y -qq --no-install-recommends $* >/dev/null && apt-get clean"
}

# make_tarball KIND TARBALL: make that kind of chroot in a directory of its
# own and keep it as TARBALL.  Another run may be making the same tarball:
# each writes its own file and renames it into place.
make_tarball()
{
	local kind=$1 tarball=$2 root start=$SECONDS status=0
	root=$(mktemp -d "${TMPDIR:-/var/tmp}/idgen-chroot-$VERSION.XXXXXX")
	chmod 755 "$root"
	ROOT=$root    # for cleanup(), on an interrupt
	echo "the $kind chroot for PostgreSQL $VERSION: $RELEASE, made afresh (then kept as $tarball)"
	if "setup_$kind" "$root"; then
		tmp=$(mktemp "$tarball.XXXXXX")
		if tar -c -C "$root" --zstd -f "$tmp" .; then
			find "$CACHE" -maxdepth 1 ! -name "${tarball##*/}" \
				-name "$(sed -E 's/-[0-9a-f]{12}\.tar\.zst$//' <<<"${tarball##*/}")-*.tar.zst" -delete
			mv "$tmp" "$tarball"
		else
			status=1
		fi
		rm -f "$tmp"
		tmp=
		echo "made in $((SECONDS - start)) s"
	else
		echo "chroot.sh: could not make the $kind $RELEASE chroot with PostgreSQL $VERSION from Debian's packages" >&2
		status=1
	fi
	cleanup
	return $status
}

mkdir -p "$CACHE"
[ -f "$BARE_TARBALL" ] || make_tarball bare "$BARE_TARBALL" || exit 1
TARBALL=$BARE_TARBALL
if [ "$KIND" != bare ]; then
	[ -f "$CLEAN_TARBALL" ] || make_tarball clean "$CLEAN_TARBALL" || exit 1
	TARBALL=$CLEAN_TARBALL
fi
if [ "$KIND" = suite ]; then
	[ -f "$SUITE_TARBALL" ] || make_tarball suite "$SUITE_TARBALL" || exit 1
	TARBALL=$SUITE_TARBALL
fi

ROOT=$(mktemp -d "${TMPDIR:-/var/tmp}/idgen-chroot-$VERSION.XXXXXX")
chmod 755 "$ROOT"
echo "the $KIND chroot for PostgreSQL $VERSION: $RELEASE, from $TARBALL"
tar -x -C "$ROOT" --zstd -f "$TARBALL" ||
	{ echo "chroot.sh: could not unpack $TARBALL" >&2; rm -f "$TARBALL"; exit 1; }
mkdir "$ROOT/idgen"
cp -a "$TREE/." "$ROOT/idgen/"
if [ "$KIND" = bare ]; then
	run_in "$ROOT" "cd /idgen && $COMMAND"
else
	run_in "$ROOT" "cd /idgen && $COMMAND" --own-network
fi
