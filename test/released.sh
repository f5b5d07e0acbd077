#!/usr/bin/env bash
#
# test/released.sh: the released SQL scripts are the ones released.
#
#   bash test/released.sh
#
# sql/released.sha256 lists every released script (sql/idgen--X.sql and
# the upgrade scripts sql/idgen--X--Y.sql) with its SHA-256.  This fails
#
#   - if a listed script is missing or its hash differs: a released
#     script was edited, and databases that ran it differ from ones that
#     run it now;
#   - if a script that `make install` ships (sql/idgen--*.sql) is not
#     listed, in particular the install script of idgen.control's
#     default_version, which must exist: what is installed is released.
#
# Run by test/run.sh's "metadata" step; as any user, no server needed.
#
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIST=sql/released.sha256
cd "$SRC" || exit 2

failures=0
fail() { echo "released: $*"; failures=$((failures + 1)); }

declare -A listed=()
n=0
while IFS= read -r line || [ -n "$line" ]; do
	n=$((n + 1))
	case $line in '' | '#'*) continue ;; esac
	if ! [[ $line =~ ^([0-9a-f]{64})\ \ (sql/idgen--[^/[:space:]]+\.sql)$ ]]; then
		fail "$LIST:$n: not a line of sha256sum's form: $line"
		continue
	fi
	hash=${BASH_REMATCH[1]} file=${BASH_REMATCH[2]}
	[ -n "${listed[$file]:-}" ] && fail "$LIST:$n: $file is listed twice"
	listed[$file]=$hash
	if [ ! -f "$file" ]; then
		fail "$file is released ($LIST:$n) but missing"
	elif [ "$(sha256sum <"$file" | cut -d' ' -f1)" != "$hash" ]; then
		fail "$file has changed since its release ($LIST:$n): a released script never changes; put the change in a new upgrade script"
	fi
done <"$LIST"

version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" idgen.control)
if [ -z "$version" ]; then
	fail "idgen.control has no default_version"
elif [ ! -f "sql/idgen--$version.sql" ]; then
	fail "default_version $version has no install script sql/idgen--$version.sql"
fi
for file in sql/idgen--*.sql; do
	[ -f "$file" ] || continue
	[ -n "${listed[$file]:-}" ] ||
		fail "$file is installed by make install but not listed in $LIST (add its line: sha256sum $file >>$LIST)"
done

if [ $failures -eq 0 ]; then
	echo "released: ${#listed[@]} released scripts unchanged, every installed script listed (default_version $version)"
fi
[ $failures -eq 0 ]
