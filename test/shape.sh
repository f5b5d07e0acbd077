#!/usr/bin/env bash
#
# test/shape.sh: check the size rules of docs/development.md's Conventions
# on idgen's C files, and that every version difference is in src/compat.h.
#
#   bash test/shape.sh [DIR]       DIR: a source tree (default: this one)
#
# No .c file of src/ over 1 000 lines, but seq_cache.c (the cached
# sequences' entry protocol alone), which may have 1 300; no function over
# 100 lines, counted from the line that names it to its closing brace.  The
# files are laid out by `make indent` (pgindent's style), so a function's
# name starts its line, its body opens with "{" alone in the first column
# and closes with "}" alone in the first column; a declaration ends with ";"
# before any body.  It fails naming every file and function over its limit,
# and prints the longest function and the mean.  No file of src/ but
# src/compat.h names PG_VERSION_NUM or PG_MAJORVERSION.
#
set -uo pipefail

DIR=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
FILE_LIMIT=1000
FUNCTION_LIMIT=100
declare -A file_limit=([seq_cache.c]=1300)
status=0

shopt -s nullglob globstar
files=("$DIR"/src/**/*.c)
if [ ${#files[@]} -eq 0 ]; then
	echo "shape: no .c file under $DIR/src"
	exit 1
fi

for f in "${files[@]}"; do
	limit=${file_limit[$(basename "$f")]:-$FILE_LIMIT}
	lines=$(wc -l <"$f")
	if [ "$lines" -gt "$limit" ]; then
		echo "shape: ${f#"$DIR"/} has $lines lines, more than $limit"
		status=1
	fi
done

# Every difference between PostgreSQL versions is in src/compat.h.
for f in "${files[@]}" "$DIR"/src/include/*.h; do
	if grep -n 'PG_VERSION_NUM\|PG_MAJORVERSION' "$f" | sed "s#^#shape: ${f#"$DIR"/}:#" | grep .; then
		echo "shape: a version test outside src/compat.h: put the difference there, as a macro or an inline function"
		status=1
	fi
done
if ! grep -q 'PG_VERSION_NUM' "$DIR/src/compat.h" 2>/dev/null; then
	echo "shape: src/compat.h, where every version difference is, is missing or tests no version"
	status=1
fi

# One line per function: file, name, lines.
functions=$(awk '
	FNR == 1 { name = ""; inside = 0 }
	!inside && /^[A-Za-z_][A-Za-z0-9_]*\(/ { name = $0; sub(/\(.*/, "", name); first = FNR }
	!inside && /;[ \t]*(\/\*.*)?$/ { name = "" }
	!inside && /^\{/ && name != "" { inside = 1 }
	inside && /^\}/ { print FILENAME, name, FNR - first + 1; inside = 0; name = "" }
' "${files[@]}")
if [ -z "$functions" ]; then
	echo "shape: found no function in $DIR/src: is it laid out by make indent?"
	exit 1
fi
while read -r f name lines; do
	if [ "$lines" -gt "$FUNCTION_LIMIT" ]; then
		echo "shape: ${f#"$DIR"/}: $name() has $lines lines, more than $FUNCTION_LIMIT"
		status=1
	fi
done <<<"$functions"

if [ $status = 0 ]; then
	awk -v dir="$DIR/" '
		{ n++; sum += $3; if ($3 > max) { max = $3; longest = $1 ": " $2 "()" } }
		END { sub(dir, "", longest); printf "shape: %d files, %d functions (mean %.1f lines; longest %s, %d), none over its limit\n", nfiles, n, sum / n, longest, max }
	' nfiles=${#files[@]} <<<"$functions"
fi
exit $status
