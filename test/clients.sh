#!/usr/bin/env bash
#
# test/clients.sh: Snowflake IDs through the client libraries applications
# use, with the code README.md shows.
#
#   bash test/clients.sh
#
# Every code block of README.md preceded by a line
#
#   <!-- test/clients: DIR/FILE -->
#
# is written to DIR/FILE of a work directory that holds a copy of
# test/clients/ (the checks, which load the README's code as a module):
#
#   node/strings.js      node-postgres, IDs as strings    node/strings.test.js
#   node/bigint.js       node-postgres, IDs as BigInt     node/bigint.test.js
#   node/knex.js         Knex                             node/knex.test.js
#   node/drizzle.js      Drizzle ORM                      node/drizzle.test.js
#   python/users.py      psycopg2                         python/users_test.py
#   python/invoices.py   SQLAlchemy                       python/invoices_test.py
#   django/shop/models.py, django/shop/migrations/0001_initial.py
#                        Django                           django/shop_test.py
#
# and, with no README block, every idgen function an application calls
# with parameters, through node-postgres (node/params.test.js: untyped
# parameters) and psycopg 3 (python/params_test.py: an int as the
# narrowest integer type, smallint for small values).
#
# A missing block, or one that no check loads, is a failure.  The Node.js
# packages are the versions test/clients/node/package-lock.json records
# (npm ci); the Python ones are Debian's (python3-psycopg2, python3-psycopg,
# python3-sqlalchemy, python3-django), run with /usr/bin/python3.
#
# The checks run against a throwaway cluster preloading idgen (datacenter 1,
# worker 7, so that decoding is checked against something other than the
# defaults) on a free loopback port from CLIENTS_PORT (default 55460), and
# reach it through PGHOST, PGPORT, PGUSER and PGDATABASE and the same as
# DATABASE_URL, as an application would.  Each check prints "ok: ..." or
# "not ok: ..."; each client compares the IDs it was given with the
# database's text of them, decodes them, and checks that they differ.
#
# Run as root it installs what it needs (npm ci runs as root, without
# install scripts), builds and installs idgen, and runs the cluster and the
# clients as "postgres"; as another user it assumes all that.  Exit status
# 0 when every check passed.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev make gcc
	python3-psycopg2 python3-psycopg python3-sqlalchemy python3-django)
command -v node >/dev/null && command -v npm >/dev/null || PACKAGES+=(nodejs npm)
PORT=${CLIENTS_PORT:-55460}
PYTHON=/usr/bin/python3

# The README blocks and the checks that load them.
BLOCKS=(node/strings.js node/bigint.js node/knex.js node/drizzle.js
	python/users.py python/invoices.py
	django/shop/models.py django/shop/migrations/0001_initial.py)
CLIENTS=(node/strings.test.js node/bigint.test.js node/knex.test.js node/drizzle.test.js
	node/params.test.js python/users_test.py python/invoices_test.py python/params_test.py
	django/shop_test.py)

# ---------------------------------------------------------------------------
# As root (or whoever starts it): prepare, then run the rest as the user.
if [ "${1:-}" != --inner ]; then
	# shellcheck source=test/lib.sh
	. "$SRC/test/lib.sh"
	idgen_client_prepare clients "${PACKAGES[@]}" || exit 2
	cp "$SRC/test/clients.sh" "$SRC/README.md" "$WORK/"
	cp -R "$SRC/test/clients/." "$WORK/"
	idgen_client_npm clients "$WORK/node" || exit 2
	idgen_client_run clients server.log "CLIENTS_PORT='$PORT' PG_CONFIG='$PG_CONFIG'"
	exit
fi

# ---------------------------------------------------------------------------
# As the cluster's user, in the work directory $2.
W=$2
cd "$W" || exit 2
# shellcheck source=test/lib.sh
. "$W/lib.sh"
BIN=$("$PG_CONFIG" --bindir)
passed=0
failures=0

ok() { echo "ok: $*"; passed=$((passed + 1)); }
not_ok() { echo "not ok: $*"; failures=$((failures + 1)); }
cleanup() {
	[ -f "$W/data/postmaster.pid" ] && "$BIN/pg_ctl" -D "$W/data" -m immediate stop >/dev/null 2>&1
}
trap cleanup EXIT

# Write each marked block of README.md $1 to $2/NAME; print the names.
extract_blocks()
{
	local line name='' file='' marker='^<!-- test/clients: ([a-z0-9_][a-z0-9_./]*) -->$'
	while IFS= read -r line; do
		if [ -n "$file" ]; then
			if [ "$line" = '```' ]; then
				echo "$name"
				name='' file=''
			else
				printf '%s\n' "$line" >>"$file"
			fi
		elif [ -n "$name" ]; then
			if [[ $line != '```'?* ]]; then
				echo "README.md: the marker of $name is not right before a code block" >&2
				return 1
			fi
			file=$2/$name
			if [ -e "$file" ]; then
				echo "README.md: $name marked twice" >&2
				return 1
			fi
			mkdir -p "$(dirname "$file")" && : >"$file" || return 1
		elif [[ $line =~ $marker ]]; then
			name=${BASH_REMATCH[1]}
			if [[ $name == *..* ]]; then
				echo "README.md: $name: not a plain path" >&2
				return 1
			fi
		fi
	done <"$1"
	if [ -n "$name" ]; then
		echo "README.md: the block of $name does not end" >&2
		return 1
	fi
}

mkdir "$W/readme"
if extracted=$(extract_blocks "$W/README.md" "$W/readme"); then
	for b in "${BLOCKS[@]}"; do
		if grep -qxF "$b" <<<"$extracted"; then
			ok "README.md has the block $b"
			cp "$W/readme/$b" "$W/$b"
		else
			not_ok "README.md has the block $b"
		fi
	done
	for b in $extracted; do
		[[ " ${BLOCKS[*]} " == *" $b "* ]] || not_ok "README.md block $b: no check runs it"
	done
else
	not_ok "README.md's marked blocks can be read"
fi

# The server, on a free loopback port from PORT on.
port=$(idgen_start_cluster "$W/data" "$W/server.log" $'idgen.datacenter_id = 1\nidgen.worker_id = 7' "$PORT") ||
	exit 2

export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
export DATABASE_URL=postgresql://$PGUSER@$PGHOST:$PGPORT/$PGDATABASE
export PYTHONDONTWRITEBYTECODE=1
echo "server on port $port"
# The tables the README's code uses without creating them: users as in
# "Getting started", posts as drizzle-kit makes it from node/drizzle.js;
# and the first public ID key, which CREATE EXTENSION does not make.
if ! "$BIN/psql" -X -q -v ON_ERROR_STOP=1 <<'EOF'
CREATE EXTENSION idgen;
SELECT idgen_public_rotate();
CREATE TABLE users (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), name text);
CREATE TABLE posts (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), title text NOT NULL);
EOF
then
	echo "clients: could not create the extension and tables" >&2
	exit 2
fi

npm_version() { sed -n 's/^  "version": "\(.*\)",$/\1/p' "$W/node/node_modules/$1/package.json"; }
echo "pg $(npm_version pg), knex $(npm_version knex), drizzle-orm $(npm_version drizzle-orm)," \
	"$("$PYTHON" -c 'import django, psycopg, psycopg2, sqlalchemy
print("psycopg2", psycopg2.__version__.split()[0] + ", psycopg", psycopg.__version__ + ", SQLAlchemy", sqlalchemy.__version__ + ", Django", django.get_version())')"

for c in "${CLIENTS[@]}"; do
	echo "--- $c"
	case $c in
		*.js) out=$(cd "$W/${c%/*}" && node "${c##*/}" 2>&1) ;;
		*.py) out=$(cd "$W/${c%/*}" && "$PYTHON" "${c##*/}" 2>&1) ;;
	esac
	status=$?
	printf '%s\n' "$out"
	n_ok=$(grep -c '^ok: ' <<<"$out")
	n_not=$(grep -c '^not ok: ' <<<"$out")
	passed=$((passed + n_ok))
	failures=$((failures + n_not))
	if [ "$status" -ne 0 ] && [ "$n_not" = 0 ]; then
		not_ok "$c exited with status $status"
	elif [ "$status" = 0 ] && { [ "$n_ok" = 0 ] || [ "$n_not" != 0 ]; }; then
		not_ok "$c exited with status 0 after $n_ok checks passed and $n_not failed"
	fi
done

echo "clients: $passed checks passed, $failures failed"
[ $failures -eq 0 ]
