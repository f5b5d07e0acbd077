#!/usr/bin/env bash
#
# test/indent.sh: lay out src/ as PostgreSQL lays out its own C code.
#
#   bash test/indent.sh            rewrite src/*/*.c, src/include/*.h and src/compat.h in place
#   bash test/indent.sh --check    change nothing; print the differences
#                                  and exit 1 if a file is not laid out
#   (make indent, make indent-check)
#
# The indenter is pg_bsd_indent (Debian's package pg-bsd-indent, version
# 2.1), with the options PostgreSQL's pgindent passes it, and the type
# names of src/typedefs.list, without which it takes a declaration such as
# "TimestampTz *p" for a multiplication.  That list is made from the built
# objects' debugging information (make typedefs): every typedef idgen's
# files declare or use, the server's included.  Make it again after adding
# a type, then indent.
#
# Two steps follow the indenter, as in pgindent: a function's return type
# that ends in '*' keeps one space before it ("char *" on its own line,
# which pg_bsd_indent would tab out), and the indenter runs again until
# its output no longer changes (refilling a comment can move a sentence's
# end to a line's end, where the next pass joins it with one space).  The
# files need nothing else: no // comments, and every block comment that
# must keep its layout starts with "/*-".
#
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
INDENT=${PG_BSD_INDENT:-pg_bsd_indent}
TYPEDEFS=$SRC/src/typedefs.list
OPTIONS=(-bad -bap -bbb -bc -bl -cli1 -cp33 -cdb -nce -d0 -di12 -nfc1 -i4 -l79 -lp -lpl
	-nip -npro -sac -tpg -ts4 "-U$TYPEDEFS")

check=
case ${1:-} in
	--check) check=yes ;;
	"") ;;
	*) echo "usage: test/indent.sh [--check]" >&2; exit 2 ;;
esac

if ! command -v "$INDENT" >/dev/null; then
	echo "indent.sh: $INDENT not found: apt-get install pg-bsd-indent (or set PG_BSD_INDENT)" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for f in "$SRC"/src/*/*.c "$SRC"/src/include/*.h "$SRC"/src/compat.h; do
	rel=${f#"$SRC"/}
	out=$tmp/$(basename "$f")
	cp "$f" "$out.0"
	for pass in 1 2 3 4; do
		"$INDENT" "${OPTIONS[@]}" "$out.0" "$out"
		sed -i -E 's/^([A-Za-z_][A-Za-z0-9_ ]*[A-Za-z0-9_])[[:space:]]+(\*+)$/\1 \2/' "$out"
		cmp -s "$out.0" "$out" && break
		cp "$out" "$out.0"
		if [ $pass = 4 ]; then
			echo "indent.sh: $rel still changes after 4 passes" >&2
			status=1
		fi
	done
	if cmp -s "$f" "$out"; then
		continue
	fi
	if [ -n "$check" ]; then
		diff -u "$f" "$out" | sed "s|$tmp/[^[:space:]]*|$rel|" || true
		status=1
	else
		cp "$out" "$f"
		echo "indented $rel"
	fi
done
[ -n "$check" ] && [ $status = 0 ] && echo "indent.sh: every file in src/ is laid out"
exit $status
