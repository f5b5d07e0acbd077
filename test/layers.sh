#!/usr/bin/env bash
#
# test/layers.sh: check that idgen's source files form layers, from the
# symbols of the built objects.
#
#   bash test/layers.sh [DIR]      DIR: a built tree (default: this one)
#
# src/layers lists the layers, bottom first, one per line: a layer's name
# and the files in it, which are in the folder named after it
# (src/LAYER/FILE.c).  For every symbol a file uses that another file
# defines (`nm -u` of one object against `nm --defined-only` of the
# others), the defining file must be in the same layer or a lower one.  A
# lower layer reaches a higher one only through a hook it exposes (a
# function pointer or a latch the higher one sets at start), which no
# symbol shows.  And no set of files may reference each other in a cycle,
# within a layer either (tsort finds one).
#
# It fails, naming every offending reference, when a reference goes
# upward, when files form a cycle, when an object is missing from
# src/layers or src/layers names a file with no object, when a file is not
# in its layer's folder, or when the module map in docs/development.md
# misses a file; it prints the layers and how
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
	[[ -z $name || $name == \#* || $name == @* ]] && continue
	layer_names+=("$name")
	for f in $files; do
		layer_of[$f]=$n
		if ! grep -q "src/$name/$f\.c " "$DIR/docs/development.md"; then
			echo "layers: docs/development.md's module map does not list src/$name/$f.c"
			status=1
		fi
		if [ ! -f "$DIR/src/$name/$f.o" ]; then
			echo "layers: src/layers names $f in layer $name, but there is no src/$name/$f.o (not built, renamed, or in another folder)"
			status=1
		fi
	done
	n=$((n + 1))
done <"$LAYERS"

# Each object of the tree DIR ($1) whose folder is not the one named for
# its layer in src/layers, or that is in no layer.
misplaced() {
	local o f folder
	for o in "$1"/src/*/*.o; do
		f=$(basename "$o" .o)
		folder=$(basename "$(dirname "$o")")
		if [ -z "${layer_of[$f]+x}" ]; then
			echo "layers: src/$folder/$f.o is in no layer: add it to src/layers"
		elif [ "$folder" != "${layer_names[${layer_of[$f]}]}" ]; then
			echo "layers: src/$folder/$f.c is in layer ${layer_names[${layer_of[$f]}]} (src/layers), but in folder $folder: a file's folder names its layer"
		fi
	done
}

shopt -s nullglob
objects=("$DIR"/src/*/*.o)
if [ ${#objects[@]} -eq 0 ]; then
	echo "layers: no objects in $DIR/src: build first (make)"
	exit 1
fi
wrong=$(misplaced "$DIR")
if [ -n "$wrong" ]; then
	echo "$wrong"
	status=1
fi
for o in "${objects[@]}"; do
	f=$(basename "$o" .o)
	[ -n "${layer_of[$f]+x}" ] || continue
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

# The extension's SQL functions that C code names (checked like the
# symbols): IDGEN_SQL_NAME(name) (idgen_sql.h), for a call by oid; name(
# after a schema in a statement's text ("%s." or "%1$s."); and any string
# "idgen_..." that is a function's name (for a message, or a call written
# without the macro).  A SQL
# function is in the layer of the file that defines its C symbol (the
# install script of default_version, AS 'MODULE_PATHNAME', 'symbol'); one
# in PL/pgSQL has no layer.  Calls made on another server, whose SQL is a
# protocol between versions, are declared in src/layers ("@remote FILE
# NAMES") and not checked.  sql_calls DIR prints, for the sources in DIR,
# one line per name: "file name symbol-file" ("-" for no C symbol), or
# "file name ?" for a call of no SQL function of the extension.
version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$DIR/idgen.control")
script=$DIR/sql/idgen--$version.sql
declare -A sql_symbols=()
while read -r name symbol; do
	sql_symbols[$name]+=" $symbol"
done < <(awk '
	/^CREATE (OR REPLACE )?FUNCTION @extschema@\./ {
		name = $0; sub(/.*@extschema@\./, "", name); sub(/\(.*/, "", name)
		print name, "-"
	}
	/AS \x27MODULE_PATHNAME\x27/ {
		symbol = $0
		if (symbol ~ /, *\x27/) { sub(/.*, *\x27/, "", symbol); sub(/\x27.*/, "", symbol) } else symbol = name
		print name, symbol
	}' "$script")
declare -A remote=()
while read -r _ f names; do
	for name in $names; do remote["$f $name"]=1; done
done < <(grep '^@remote ' "$LAYERS")

sql_calls() {
	local src=$1 f kind name symbol t
	for c in "$src"/*/*.c; do
		f=$(basename "$c" .c)
		grep -oE 'IDGEN_SQL_NAME\([a-z0-9_]+\)|%(1\$)?s\.[a-z0-9_]+\(|"idgen_[a-z0-9_]+"' "$c" |
			sed -E 's/^IDGEN_SQL_NAME\((.*)\)$/call \1/; s/^%(1\$)?s\.(.*)\($/call \2/; s/^"(.*)"$/literal \1/' |
			sort -u |
			while read -r kind name; do
				[ -z "${remote["$f $name"]+x}" ] || continue
				if [ -z "${sql_symbols[$name]+x}" ]; then
					# a table's or a process's name, unless written as a call
					[ "$kind" = literal ] || echo "$f $name ?"
					continue
				fi
				for symbol in ${sql_symbols[$name]}; do
					t=-
					[ "$symbol" = - ] || t=${defined_in[$symbol]:--}
					echo "$f $name $t"
				done
			done
	done
}

# Every call that goes upward, or to no function of the extension.
sql_upward() {
	local f name t
	while read -r f name t; do
		if [ "$t" = "?" ]; then
			echo "layers: $f.c calls $name by name, which is no SQL function of the extension ($script)"
		elif [ "$t" != - ] && [ -n "${layer_of[$f]+x}" ] && [ "${layer_of[$t]}" -gt "${layer_of[$f]}" ]; then
			echo "layers: upward SQL call: $f (${layer_names[${layer_of[$f]}]}) calls $name of $t (${layer_names[${layer_of[$t]}]})"
		fi
	done
}

calls=$(sql_calls "$DIR/src")
sql_count=0
while read -r f name t; do
	[ -n "$f" ] || continue
	sql_count=$((sql_count + 1))
	[ "$t" = - ] || [ "$t" = "?" ] || [ "$t" = "$f" ] || edges+=("$f $t")
done <<<"$calls"
upward=$(sql_upward <<<"$calls")
if [ -n "$upward" ]; then
	echo "$upward"
	status=1
fi

# The check of SQL names, on a copy of the sources with one upward call
# planted: the idgen sequencer (sequences) naming a lease function, as its
# list of purge steps did before its duties were declared at the top.
planted=$(mktemp -d)
trap 'rm -rf "$planted"' EXIT
mkdir "$planted/src"
(cd "$DIR/src" && find . -name '*.[co]' -exec cp --parents {} "$planted/src" \;)
echo 'static const char *const planted[] = {"idgen_worker_purge"};' >>"$planted/src/sequences/sequencer.c"
if ! sql_upward < <(sql_calls "$planted/src") | grep -q 'upward SQL call: sequencer (sequences) calls idgen_worker_purge of lease_renew (leases)'; then
	echo "layers: the check of SQL names missed an upward call planted in a copy of src/sequences/sequencer.c"
	status=1
fi
# The check of folders, on the same copy with one file moved: seq_node.c,
# the sequences' arithmetic that active.c once did, back in active/.
mv "$planted/src/sequences/seq_node.o" "$planted/src/active/" 2>/dev/null
if ! misplaced "$planted" | grep -q 'src/active/seq_node.c is in layer sequences (src/layers), but in folder active'; then
	echo "layers: the check of folders missed src/sequences/seq_node.o moved to src/active/ in a copy"
	status=1
fi

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
	echo "layers: $count references and $sql_count names of SQL functions between $(printf '%s\n' "${edges[@]}" | sort -u | wc -l) pairs of files, none upward, no cycle"
fi
exit $status
