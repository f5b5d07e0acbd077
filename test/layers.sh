#!/usr/bin/env bash
#
# test/layers.sh: check that idgen's source files form layers, from the
# symbols of the built objects.
#
#   bash test/layers.sh [DIR]      DIR: a built tree (default: this one)
#
# src/layers lists the layers, bottom first, one per line: a layer's name
# and the files in it.  For every symbol a file uses that another file
# defines (`nm -u` of one object against `nm --defined-only` of the
# others), the defining file must be in the same layer or a lower one.  A
# lower layer reaches a higher one only through a hook it exposes (a
# function pointer or a latch the higher one sets at start), which no
# symbol shows.  And no set of files may reference each other in a cycle,
# within a layer either (tsort finds one).
#
# It fails, naming every offending reference, when a reference goes
# upward, when files form a cycle, when an object is missing from
# src/layers or src/layers names a file with no object, or when the module
# map in docs/development.md misses a file; it prints the layers and how
# many references cross between files.
#
set -uo pipefail

DIR=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
LAYERS=$DIR/src/layers
status=0

declare -A layer_of=() defined_in=()
declare -a layer_names=()
n=0
while read -r name files; do
	[[ -z $name || $name == \#* ]] && continue
	layer_names+=("$name")
	for f in $files; do
		layer_of[$f]=$n
		if ! grep -q "src/$f\.c " "$DIR/docs/development.md"; then
			echo "layers: docs/development.md's module map does not list src/$f.c"
			status=1
		fi
		if [ ! -f "$DIR/src/$f.o" ]; then
			echo "layers: src/layers names $f, but there is no src/$f.o (not built, or renamed)"
			status=1
		fi
	done
	n=$((n + 1))
done <"$LAYERS"

shopt -s nullglob
objects=("$DIR"/src/*.o)
if [ ${#objects[@]} -eq 0 ]; then
	echo "layers: no objects in $DIR/src: build first (make)"
	exit 1
fi
for o in "${objects[@]}"; do
	f=$(basename "$o" .o)
	if [ -z "${layer_of[$f]+x}" ]; then
		echo "layers: src/$f.o is in no layer: add it to src/layers"
		status=1
		continue
	fi
	while read -r sym; do
		defined_in[$sym]=$f
	done < <(nm --defined-only -g "$o" | awk '{ print $3 }')
done

edges=()
count=0
for o in "${objects[@]}"; do
	f=$(basename "$o" .o)
	[ -n "${layer_of[$f]+x}" ] || continue
	while read -r sym; do
		t=${defined_in[$sym]:-}
		[ -n "$t" ] && [ "$t" != "$f" ] || continue
		count=$((count + 1))
		edges+=("$f $t")
		if [ "${layer_of[$t]}" -gt "${layer_of[$f]}" ]; then
			echo "layers: upward reference: $f (${layer_names[${layer_of[$f]}]}) uses $sym of $t (${layer_names[${layer_of[$t]}]})"
			status=1
		fi
	done < <(nm -u "$o" | awk '{ print $2 }')
done

# tsort reports each cycle it meets ("input contains a loop") on stderr.
cycles=$(printf '%s\n' "${edges[@]}" | sort -u | tsort 2>&1 >/dev/null)
if [ -n "$cycles" ]; then
	echo "layers: files reference each other in a cycle:"
	printf '%s\n' "$cycles" | sed 's/^tsort: -: //; s/^/  /' | head -n 60
	status=1
fi

for ((i = ${#layer_names[@]} - 1; i >= 0; i--)); do
	files=()
	for f in "${!layer_of[@]}"; do [ "${layer_of[$f]}" = "$i" ] && files+=("$f"); done
	printf '  %-10s %s\n' "${layer_names[$i]}" "$(printf '%s\n' "${files[@]}" | sort | tr '\n' ' ')"
done
if [ $status = 0 ]; then
	echo "layers: $count references between $(printf '%s\n' "${edges[@]}" | sort -u | wc -l) pairs of files, none upward, no cycle"
fi
exit $status
