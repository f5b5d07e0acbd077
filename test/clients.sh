#!/usr/bin/env bash
#
# test/clients.sh: Snowflake IDs through the client libraries applications
# use, with the code docs/applications.md shows.
#
#   bash test/clients.sh
#
# Every code block of README.md and of docs/*.md preceded by a line
#
#   <!-- test/clients: DIR/FILE -->
#
# is written to DIR/FILE of a work directory that holds a copy of
# test/clients/ (the checks, which load the documented code as a module):
#
#   node/strings.js      node-postgres, IDs as strings    node/strings.test.js
#   node/bigint.js       node-postgres, IDs as BigInt     node/bigint.test.js
#   node/knex.js         Knex                             node/knex.test.js
#   node/drizzle.js      Drizzle ORM                      node/drizzle.test.js
#   node/postgresjs.js   postgres.js                      node/postgresjs.test.js
#   node/prisma/schema.prisma, node/prisma.js
#                        Prisma ORM 7, pg driver adapter  node/prisma.test.js
#   python/users.py      psycopg2                         python/users_test.py
#   python/users_psycopg3.py  psycopg 3                   python/psycopg3_test.py
#   python/users_asyncpg.py   asyncpg                     python/asyncpg_test.py
#   python/invoices.py   SQLAlchemy                       python/invoices_test.py
#   python/invoices_async.py  SQLAlchemy asyncio          python/invoices_async_test.py
#   python/alembic_env.py     Alembic autogenerate        python/alembic_test.py
#   django/shop/models.py, django/shop/migrations/0001_initial.py,
#   django/shop/serializers.py
#                        Django, Django REST framework    django/shop_test.py
#   django/accounts/models.py, django/accounts/migrations/0001_initial.py
#                        Django, a converted auth_user
#                                                         django/accounts_test.py
#   ruby/purchase.rb, ruby/schema_dumper.rb
#                        Active Record                    ruby/rails_test.rb
#   go/users.go          Go, pgx v4                       go/check.go
#   java/Users.java      JDBC (pgjdbc), Jackson           java/UsersCheck.java
#
# and, with no documented block, every idgen function an application calls
# with parameters, through node-postgres (node/params.test.js: untyped
# parameters) and psycopg 3 (python/params_test.py: an int as the
# narrowest integer type, smallint for small values).
#
# A failure: a block a check needs that no file has, a marked block that no
# check loads, a block marked twice, a marker not right before a code
# block, and a code block of a client language (js, python, ruby, go,
# java) in docs/applications.md without a marker, so that every example
# there runs.  The Node.js packages are the versions
# test/clients/node/package-lock.json records (npm ci); everything else is
# Debian's: psycopg2, psycopg 3, asyncpg, SQLAlchemy (with greenlet),
# Alembic, Django with Django REST framework, Active Record with ruby-pg,
# Go with pgx v4 (built with GOPATH=/usr/share/gocode, GO111MODULE=off,
# no download), and pgjdbc with Jackson (the JDK if javac is missing);
# Python is /usr/bin/python3.  Prisma's client is generated without its
# schema engine, which the CLI would download from outside npm
# (node/prisma.test.js says why that is enough).
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
# install scripts), builds idgen and installs it into the installation
# PG_CONFIG names, and runs the cluster and the clients as "postgres"; as
# another user it assumes all that.  Exit status 0 when every check passed.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev make gcc
	python3-psycopg2 python3-psycopg python3-asyncpg python3-greenlet python3-sqlalchemy
	python3-alembic python3-django python3-djangorestframework ruby-activerecord ruby-pg golang-go
	golang-github-jackc-pgx-v4-dev libpostgresql-jdbc-java libjackson2-databind-java)
command -v javac >/dev/null || PACKAGES+=(default-jdk-headless)
command -v node >/dev/null && command -v npm >/dev/null || PACKAGES+=(nodejs npm)
PORT=${CLIENTS_PORT:-55460}
PYTHON=/usr/bin/python3

# The documented blocks and the checks that load them.
BLOCKS=(node/strings.js node/bigint.js node/knex.js node/drizzle.js node/postgresjs.js
	node/prisma/schema.prisma node/prisma.js
	python/users.py python/users_psycopg3.py python/users_asyncpg.py
	python/invoices.py python/invoices_async.py python/alembic_env.py
	django/shop/models.py django/shop/migrations/0001_initial.py django/shop/serializers.py
	django/accounts/models.py
	django/accounts/migrations/0001_initial.py
	ruby/purchase.rb ruby/schema_dumper.rb go/users.go java/Users.java)
CLIENTS=(node/strings.test.js node/bigint.test.js node/knex.test.js node/drizzle.test.js
	node/postgresjs.test.js node/prisma.test.js node/params.test.js
	python/users_test.py python/psycopg3_test.py python/asyncpg_test.py
	python/invoices_test.py python/invoices_async_test.py python/alembic_test.py
	python/params_test.py django/shop_test.py django/accounts_test.py
	ruby/rails_test.rb go/check.go java/UsersCheck.java)
# The fences of client code that docs/applications.md must mark.
CLIENT_LANGUAGES='js|javascript|ts|typescript|python|py|ruby|rb|go|java'
JARS=/usr/share/java/postgresql.jar:/usr/share/java/jackson-databind.jar
JARS+=:/usr/share/java/jackson-core.jar:/usr/share/java/jackson-annotations.jar

# ---------------------------------------------------------------------------
# As root (or whoever starts it): prepare, then run the rest as the user.
if [ "${1:-}" != --inner ]; then
	# shellcheck source=test/lib.sh
	. "$SRC/test/lib.sh"
	idgen_client_prepare clients "${PACKAGES[@]}" || exit 2
	cp "$SRC/test/clients.sh" "$SRC/README.md" "$WORK/"
	mkdir "$WORK/docs" && cp "$SRC"/docs/*.md "$WORK/docs/"
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

# Write each marked block of the Markdown file $1 (named $3 in messages)
# to $2/NAME and print the names; with $4 = strict, a fence of a client
# language without a marker is an error too.  Every error is reported;
# the status is 1 after any.
extract_blocks()
{
	local line bare name='' file='' fence='' status=0 n=0
	local marker='^<!-- test/clients: ([A-Za-z0-9_][A-Za-z0-9_./]*) -->$'
	local client="^\`\`\`(${CLIENT_LANGUAGES})([[:space:]].*)?\$"
	while IFS= read -r line; do
		n=$((n + 1))
		bare=${line#"${line%%[![:space:]]*}"} # an unmarked fence may be indented (in a list)
		if [ -n "$file" ]; then
			if [ "$line" = '```' ]; then
				echo "$name"
				name='' file=''
			else
				printf '%s\n' "$line" >>"$file"
			fi
		elif [ -n "$fence" ]; then
			[ "$bare" = '```' ] && fence=''
		elif [ -n "$name" ]; then
			if [[ $line != '```'?* ]]; then
				echo "$3:$n: the marker of $name is not right before a code block" >&2
				status=1 name=''
				continue
			fi
			file=$2/$name
			if [ -e "$file" ]; then
				echo "$3:$n: $name marked twice" >&2
				status=1 file="$2/.twice"
			fi
			mkdir -p "$(dirname "$file")" && : >"$file" || return 1
		elif [[ $line =~ $marker ]]; then
			name=${BASH_REMATCH[1]}
			if [[ $name == *..* ]]; then
				echo "$3:$n: $name: not a plain path" >&2
				return 1
			fi
		elif [[ $bare == '```'* ]]; then
			fence=1
			if [ "${4:-}" = strict ] && [[ $bare =~ $client ]]; then
				echo "$3:$n: a ${BASH_REMATCH[1]} block without a test/clients marker" >&2
				status=1
			fi
		fi
	done <"$1"
	if [ -n "$name" ]; then
		echo "$3: the block of $name does not end" >&2
		return 1
	fi
	return $status
}

mkdir "$W/blocks"
extracted=''
for md in README.md docs/*.md; do
	strict=''
	[ "$md" = docs/applications.md ] && strict=strict
	if names=$(extract_blocks "$W/$md" "$W/blocks" "$md" $strict); then
		[ -n "$names" ] && ok "$md's marked blocks can be read"
	else
		not_ok "$md's marked blocks can be read"
	fi
	extracted+="$names"$'\n'
done
for b in "${BLOCKS[@]}"; do
	if grep -qxF "$b" <<<"$extracted"; then
		ok "a document has the block $b"
		mkdir -p "$(dirname "$W/$b")" && cp "$W/blocks/$b" "$W/$b"
	else
		not_ok "a document has the block $b"
	fi
done
for b in $extracted; do
	[[ " ${BLOCKS[*]} " == *" $b "* ]] || not_ok "block $b: no check runs it"
done

# The server, on a free loopback port from PORT on.
port=$(idgen_start_cluster "$W/data" "$W/server.log" $'idgen.datacenter_id = 1\nidgen.worker_id = 7' "$PORT") ||
	exit 2

# The server's own pg_dump and psql first (Active Record's db/structure.sql).
export PATH=$BIN:$PATH
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
	"postgres $(npm_version postgres), prisma $(npm_version prisma)," \
	"$("$PYTHON" -c 'import alembic, asyncpg, django, psycopg, psycopg2, rest_framework, sqlalchemy
print("psycopg2", psycopg2.__version__.split()[0] + ", psycopg", psycopg.__version__ + ", asyncpg",
      asyncpg.__version__ + ", SQLAlchemy", sqlalchemy.__version__ + ", Alembic", alembic.__version__
      + ", Django", django.get_version() + ", DRF", rest_framework.__version__ + ",")')" \
	"$(ruby -ractive_record -rpg -e 'print "Active Record #{ActiveRecord.version}, ruby-pg #{PG::VERSION},"')" \
	"$(go version | cut -d' ' -f3), $(dpkg-query -W -f='pgx ${Version}, pgjdbc ' golang-github-jackc-pgx-v4-dev)$(
		dpkg-query -W -f='${Version}' libpostgresql-jdbc-java), $(javac -version 2>&1)"

for c in "${CLIENTS[@]}"; do
	echo "--- $c"
	case $c in
		*.js) out=$(cd "$W/${c%/*}" && node "${c##*/}" 2>&1) ;;
		*.py) out=$(cd "$W/${c%/*}" && "$PYTHON" "${c##*/}" 2>&1) ;;
		*.rb) out=$(cd "$W/${c%/*}" && ruby "${c##*/}" 2>&1) ;;
		# GOPATH mode: Debian's pgx from /usr/share/gocode, nothing downloaded.
		*.go) out=$(cd "$W/${c%/*}" && GO111MODULE=off GOPATH=/usr/share/gocode \
			GOCACHE="$W/.cache/go-build" go run ./*.go 2>&1) ;;
		*.java) out=$(cd "$W/${c%/*}" && javac -d classes -cp "$JARS" ./*.java 2>&1 &&
			java -cp "classes:$JARS" "$(basename "$c" .java)" 2>&1) ;;
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
