# shellcheck shell=bash
# test/lib.sh: shell helpers sourced by the scripts of test/ (and test/demo.sh).
#
# idgen_prepare_host PACKAGE...
#     As root: install those of the Debian packages that are missing, and
#     make sure the unprivileged user "postgres" exists (PostgreSQL refuses
#     to run as root).  As any other user: install nothing.  Either way, set
#     IDGEN_USER to the user that runs servers and tests.
# as_idgen_user 'COMMAND LINE'
#     Run a shell command line as IDGEN_USER.
#
# For the host scripts that run real clients or an HA manager's cluster
# (test/clients.sh, test/generators.sh, test/auto_failover.sh,
# test/patroni.sh):
# idgen_client_prepare NAME PACKAGE...
#     Install the packages, build and install idgen (PG_CONFIG), and make a
#     work directory, WORK, removed at exit, with a copy of this file (for
#     the script's part that runs as IDGEN_USER there).
# idgen_client_npm NAME DIR
#     npm ci in DIR: the versions its package-lock.json records, without
#     install scripts.
# idgen_client_run NAME LOG 'ENVIRONMENT'
#     Run "WORK/NAME.sh --inner WORK" as IDGEN_USER with those variables,
#     after giving it WORK; print the tail of each WORK/LOG (a file name or
#     a pattern) if it failed, and the time taken; its exit status.
# In the part that runs as IDGEN_USER:
# say MESSAGE
#     Print MESSAGE after the time of day.
# check WHAT COMMAND...
#     Run COMMAND: print "ok: WHAT" if it succeeds, else "FAILED: WHAT" and
#     count it in FAILURES.
# checks_done NAME
#     Print "NAME: all checks passed" or "NAME: N checks failed"; status 0
#     when none failed.
# idgen_build_tests_passed LOG
#     Whether a package build's LOG shows that its tests ran and passed
#     (pg_regress's and the isolation tester's summaries, from pg_buildext
#     installcheck): print them, or the log's tail and why not.
# idgen_start_cluster DIR LOG SETTINGS FIRST_PORT
#     initdb DIR, preload idgen with SETTINGS (postgresql.conf lines), and
#     start it on the first free loopback port from FIRST_PORT (20 are
#     tried), its socket in DIR's parent; print the port.  Needs BIN.

idgen_prepare_host()
{
	local missing=() p
	if [ "$(id -u)" != 0 ]; then
		IDGEN_USER=$(id -un)
		return 0
	fi
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		printf '\n=== installing %s\n' "${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		if ! { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
			echo "could not install ${missing[*]}" >&2
			return 1
		fi
	fi
	IDGEN_USER=postgres
	id "$IDGEN_USER" >/dev/null 2>&1 || useradd --system --no-create-home "$IDGEN_USER"
}

as_idgen_user()
{
	if [ "$(id -u)" = 0 ]; then
		su "$IDGEN_USER" -s /bin/bash -c "$1"
	else
		bash -c "$1"
	fi
}

idgen_client_prepare()
{
	local name=$1
	shift
	IDGEN_CLIENT_START=$SECONDS
	idgen_prepare_host "$@" || return 2
	make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" >/dev/null &&
		make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" install >/dev/null || return 2
	WORK=$(mktemp -d "/tmp/idgen-$name.XXXXXX")
	# shellcheck disable=SC2064 # WORK is fixed from here on
	trap "rm -rf '$WORK'" EXIT
	cp "$SRC/test/lib.sh" "$WORK/"
}

idgen_client_npm()
{
	echo "npm ci ($(node --version), npm $(npm --version))"
	if ! (cd "$2" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error); then
		echo "$1: npm ci failed" >&2
		return 2
	fi
}

idgen_client_run()
{
	local name=$1 log=$2 env=$3 status f
	[ "$(id -u)" = 0 ] && chown -R "$IDGEN_USER" "$WORK"
	as_idgen_user "$env bash '$WORK/$name.sh' --inner '$WORK'"
	status=$?
	if [ $status -ne 0 ]; then
		# (unquoted: LOG may be a pattern)
		# shellcheck disable=SC2086
		for f in "$WORK"/$log; do [ -f "$f" ] && { echo "--- ${f##*/}"; tail -n 20 "$f"; }; done
	fi
	echo "$name: $((SECONDS - IDGEN_CLIENT_START)) s"
	return $status
}

say() { printf '%s  %s\n' "$(date +%T)" "$*"; }

FAILURES=0
check()
{
	local what=$1
	shift
	if "$@"; then
		say "ok: $what"
	else
		say "FAILED: $what"
		FAILURES=$((FAILURES + 1))
	fi
}

checks_done()
{
	if [ "$FAILURES" -eq 0 ]; then
		say "$1: all checks passed"
	else
		say "$1: $FAILURES checks failed"
	fi
	[ "$FAILURES" -eq 0 ]
}

idgen_build_tests_passed()
{
	if [ "$(grep -cE 'All [0-9]+ tests passed' "$1")" -ge 2 ]; then
		grep -E 'All [0-9]+ tests passed' "$1"
		return 0
	fi
	tail -n 60 "$1"
	echo "the build's log shows no passed regression and isolation tests (${1##*/})" >&2
	return 1
}

idgen_start_cluster()
{
	local dir=$1 log=$2 settings=$3 first=$4 port
	"$BIN/initdb" -D "$dir" -A trust -U postgres >"$dir-initdb.log" 2>&1 ||
		{ cat "$dir-initdb.log" >&2; return 1; }
	printf '%s\n' "shared_preload_libraries = 'idgen'" "listen_addresses = '127.0.0.1'" \
		"unix_socket_directories = '$(dirname "$dir")'" "shared_buffers = '32MB'" \
		"$settings" >>"$dir/postgresql.conf"
	for port in $(seq "$first" $((first + 19))); do
		if "$BIN/pg_ctl" -D "$dir" -l "$log" -o "-p $port" -w -t 30 start >/dev/null 2>&1; then
			echo "$port"
			return 0
		fi
	done
	echo "no server on ports $first to $port" >&2
	return 1
}
