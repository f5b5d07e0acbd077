#!/usr/bin/env bash
#
# test/chroot.sh: run a command inside a chroot of the Debian release that
# ships PostgreSQL VERSION, with that release's own packages installed.
#
#   bash test/chroot.sh VERSION DIR COMMAND
#
# Run as root on Debian.  The tree DIR is copied to /idgen in the chroot and
# COMMAND (a shell command line) runs there as root, from /idgen.  Its exit
# status is this script's.
#
#   VERSION  release               apt sources
#   17       trixie                trixie
#   18       sid                   sid
#   19       sid                   sid and experimental (19 is a release
#                                  candidate there)
#
# The chroot is made with debootstrap, and the packages are installed with
# the chroot's own apt; the result is kept as a tarball in
# $IDGEN_CHROOT_CACHE (default /var/cache/idgen-test), named by release,
# version and a digest of what this script installs, and made again when
# missing.  Every run unpacks it into a new directory and removes that
# directory at the end, also after a failure or an interrupt.
#
# Packages come from $IDGEN_DEBIAN_MIRROR (default http://deb.debian.org/debian).
#
# Nothing is mounted on the machine itself: the chroot's /proc, /dev and
# /dev/shm are mounted inside a private mount namespace (unshare), which
# disappears with its last process; at the end, processes still running in
# the chroot (a server a failed test left behind) are killed.
#
set -uo pipefail

VERSION=${1:?usage: chroot.sh VERSION DIR COMMAND}
TREE=${2:?usage: chroot.sh VERSION DIR COMMAND}
COMMAND=${3:?usage: chroot.sh VERSION DIR COMMAND}
CACHE=${IDGEN_CHROOT_CACHE:-/var/cache/idgen-test}
MIRROR=${IDGEN_DEBIAN_MIRROR:-http://deb.debian.org/debian}

case $VERSION in
	17) RELEASE=trixie; EXPERIMENTAL= ;;
	18) RELEASE=sid; EXPERIMENTAL= ;;
	19) RELEASE=sid; EXPERIMENTAL=yes ;;
	*) echo "chroot.sh: no current Debian release ships PostgreSQL $VERSION (17: trixie, 18: sid, 19: experimental)" >&2
	   exit 2 ;;
esac

# What the tests need, as in test/run.sh's list for the machine itself, and
# what building the Debian package needs (test/deb.sh: debhelper, lintian,
# the release's postgresql-server-dev-all with pg_buildext's debhelper
# addon).  For 19, the server, its headers and libpq come from experimental
# (apt takes the rest from sid), and sid's 18 is there too, server and
# headers, for test/t/040_pg_upgrade.pl (pg_upgrade from 18 to 19).
CORE=(postgresql-$VERSION postgresql-server-dev-$VERSION libpq-dev)
[ -n "$EXPERIMENTAL" ] && CORE=("${CORE[@]/%//experimental}" libpq5/experimental)
[ "$VERSION" = 19 ] && CORE+=(postgresql-18 postgresql-server-dev-18)
PACKAGES=("${CORE[@]}" make gcc libc6-dev libipc-run-perl faketime pgbouncer gdb
	build-essential debhelper dpkg-dev lintian postgresql-server-dev-all)

# The tarball's name changes with what is installed into it.
digest=$( { printf '%s\n' "$RELEASE" "$EXPERIMENTAL" "${PACKAGES[@]}"; sed -n '/^setup_chroot()/,/^}/p' "$0"; } |
	sha256sum | cut -c1-12)
TARBALL=$CACHE/$RELEASE-pg$VERSION-$digest.tar.zst

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

# run_in ROOT COMMAND: COMMAND as root in the chroot ROOT, with /proc, /dev
# and a private /dev/shm mounted in a mount namespace of its own, and an IPC
# namespace of its own (so a server killed there leaves no System V shared
# memory behind on the machine).
run_in()
{
	unshare --mount --ipc --propagation private -- /bin/bash -c '
		set -e
		mount -t proc proc "$0/proc"
		mount --rbind /dev "$0/dev"
		mount -t tmpfs -o mode=1777 tmpfs "$0/dev/shm"
		exec chroot "$0" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
			CI="${CI:-}" DEBIAN_FRONTEND=noninteractive /bin/bash -c "$1"' "$1" "$2"
}

# setup_chroot ROOT: debootstrap the release into ROOT and install PACKAGES
# there.  Debian's packages, as a user installs them; the default cluster
# is not created, and apt's downloads are not kept.
setup_chroot()
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
	mkdir -p "$root/etc/postgresql-common/createcluster.d"
	echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.d/idgen-test.conf"
	run_in "$root" "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${PACKAGES[*]} >/dev/null && apt-get clean" ||
		return 1
	[ -x "$root/usr/lib/postgresql/$VERSION/bin/pg_config" ] || { echo "pg_config $VERSION is missing" >&2; return 1; }
}

mkdir -p "$CACHE"
ROOT=$(mktemp -d "${TMPDIR:-/var/tmp}/idgen-chroot-$VERSION.XXXXXX")
chmod 755 "$ROOT"

if [ -f "$TARBALL" ]; then
	echo "chroot for PostgreSQL $VERSION: $RELEASE, from $TARBALL"
	tar -x -C "$ROOT" --zstd -f "$TARBALL" ||
		{ echo "chroot.sh: could not unpack $TARBALL" >&2; rm -f "$TARBALL"; exit 1; }
else
	echo "chroot for PostgreSQL $VERSION: $RELEASE, made with debootstrap (then kept as $TARBALL)"
	start=$SECONDS
	if ! setup_chroot "$ROOT"; then
		echo "chroot.sh: could not make a $RELEASE chroot with PostgreSQL $VERSION from Debian's packages (${PACKAGES[*]})"
		exit 1
	fi
	# Another run may be making the same tarball: each writes its own file
	# and renames it into place.
	tmp=$(mktemp "$TARBALL.XXXXXX")
	if tar -c -C "$ROOT" --zstd -f "$tmp" .; then
		find "$CACHE" -maxdepth 1 -name "$RELEASE-pg$VERSION-*.tar.zst" ! -name "${TARBALL##*/}" -delete
		mv "$tmp" "$TARBALL"
	fi
	rm -f "$tmp"
	tmp=
	echo "made in $((SECONDS - start)) s"
fi

mkdir "$ROOT/idgen"
cp -a "$TREE/." "$ROOT/idgen/"
run_in "$ROOT" "cd /idgen && $COMMAND"
