# test/lib.sh: shell helpers sourced by test/run.sh and test/demo.sh.
#
# idgen_prepare_host PACKAGE...
#     As root: install those of the Debian packages that are missing, and
#     make sure the unprivileged user "postgres" exists (PostgreSQL refuses
#     to run as root).  As any other user: install nothing.  Either way, set
#     IDGEN_USER to the user that runs servers and tests.
# as_idgen_user 'COMMAND LINE'
#     Run a shell command line as IDGEN_USER.

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
