#!/usr/bin/env bash
#
# test/upgrade_paths.sh: ALTER EXTENSION idgen UPDATE from every released
# version makes what a fresh CREATE EXTENSION of idgen.control's
# default_version makes.
#
#   bash test/upgrade_paths.sh
#
# test/t/039_upgrade_paths.pl runs it with the TAP tests, on every version.
# For each released version (an install script listed in
# sql/released.sha256) other than default_version, in a database of its
# own: CREATE EXTENSION idgen VERSION 'old', ALTER EXTENSION idgen UPDATE;
# in another, CREATE EXTENSION idgen; then the two catalogs are compared,
# not the scripts' text: every object made in the database (functions
# with their signature, result, kind, volatility, strictness, parallel
# safety, SECURITY DEFINER, SET options, language, cost and definition;
# schemas, tables, views and their definitions, sequences, types, columns
# with their defaults and statistics targets, constraints, indexes,
# triggers and whether they are enabled, rules, policies), every owner,
# ACL and pg_init_privs entry, every comment, the extension's members and
# its configuration tables (extconfig, extcondition).  A released version
# with no upgrade path to default_version fails too.
#
# So that the comparison cannot pass for want of looking, a self-check
# runs first, whatever is released: in a scratch copy of the extension
# directory it writes a version above default_version (default_version's
# script and a new function, table and trigger state) and, for it, a
# correct upgrade script and five wrong ones (one forgets a GRANT, one a
# COMMENT, one a pg_extension_config_dump, one declares the function
# STABLE, one leaves a trigger enabled ORIGIN instead of ALWAYS); the
# correct one must compare equal and each wrong one must be caught.
#
# The server is the installation PG_CONFIG names, run from a scratch copy
# of its binaries (postgres, pg_ctl, initdb) so that it reads its extension
# scripts from a directory of this test's (PostgreSQL finds share/ and lib/
# relative to its binary), with idgen built from this tree and preloaded.
# Nothing is installed into the installation itself.
#
# Run as root it installs the packages it needs and runs the server as
# "postgres"; as another user it assumes them.  Exit status 0 when every
# path and every self-check passed; about 10 s.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev make gcc)
PORT=${UPGRADE_PATHS_PORT:-55470}

# ---------------------------------------------------------------------------
# As root (or whoever starts it): build, then run the rest as the user.
if [ "${1:-}" != --inner ]; then
	# shellcheck source=test/lib.sh
	. "$SRC/test/lib.sh"
	START=$SECONDS
	idgen_prepare_host "${PACKAGES[@]}" || exit 2
	make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" >/dev/null || exit 2
	WORK=$(mktemp -d /tmp/idgen-upgrade.XXXXXX)
	mkdir "$WORK/src" "$WORK/src/sql"
	cp "$SRC/test/upgrade_paths.sh" "$SRC/test/lib.sh" "$WORK/"
	cp "$SRC/idgen.control" "$SRC/idgen.so" "$WORK/src/"
	cp "$SRC"/sql/idgen--*.sql "$SRC/sql/released.sha256" "$WORK/src/sql/"
	[ "$(id -u)" = 0 ] && chown -R "$IDGEN_USER" "$WORK"
	as_idgen_user "PG_CONFIG='$PG_CONFIG' UPGRADE_PATHS_PORT='$PORT' \
		bash '$WORK/upgrade_paths.sh' --inner '$WORK'"
	status=$?
	[ $status -ne 0 ] && [ -f "$WORK/server.log" ] && tail -n 20 "$WORK/server.log"
	rm -rf "$WORK"
	echo "upgrade-paths: $((SECONDS - START)) s"
	exit $status
fi

# ---------------------------------------------------------------------------
# As the server's user, in the work directory $2.
W=$2
cd "$W" || exit 2
REAL_BIN=$("$PG_CONFIG" --bindir)
REAL_SHARE=$("$PG_CONFIG" --sharedir)
REAL_LIB=$("$PG_CONFIG" --pkglibdir)
# shellcheck source=test/lib.sh
. "$W/lib.sh"

# The scratch installation: the real one's paths under $T, so that its
# binaries find share/ and lib/ there; every file of those linked, but
# extension/ holding this tree's scripts and lib/ this tree's idgen.so.
T=$W/inst
BIN=$T$REAL_BIN SHARE=$T$REAL_SHARE LIB=$T$REAL_LIB
EXT=$SHARE/extension
mkdir -p "$BIN" "$SHARE" "$LIB" "$EXT" || exit 2
cp "$REAL_BIN/postgres" "$REAL_BIN/pg_ctl" "$REAL_BIN/initdb" "$BIN/" || exit 2
for f in "$REAL_SHARE"/*; do [ "${f##*/}" = extension ] || ln -s "$f" "$SHARE/"; done
for f in "$REAL_SHARE"/extension/*; do
	case ${f##*/} in idgen.control | idgen--*) ;; *) ln -s "$f" "$EXT/" ;; esac
done
for f in "$REAL_LIB"/*; do [ "${f##*/}" = idgen.so ] || ln -s "$f" "$LIB/"; done
cp "$W/src/idgen.so" "$LIB/" && cp "$W/src/idgen.control" "$W"/src/sql/idgen--*.sql "$EXT/" || exit 2

if ! port=$(idgen_start_cluster "$W/data" "$W/server.log" "idgen.worker_id = 1" "$PORT"); then
	exit 2
fi
trap '"$BIN/pg_ctl" -D "$W/data" -m immediate stop >/dev/null 2>&1' EXIT
export PGHOST=$W PGPORT=$port PGUSER=postgres
PSQL=("$REAL_BIN/psql" -X -q -v ON_ERROR_STOP=1 -At)
n_db=0
failures=0

# The catalog of database $1, as sorted lines without OIDs: every object
# made in it (OID >= 16384, pg_toast's aside), and the extension's row
# and members.  Column options the server sets itself, which differ from
# one database to another (pg_attver, in some builds), are left out.
catalog() # DATABASE
{
	"${PSQL[@]}" -d "$1" <<'SQL'
SET search_path = pg_catalog;
WITH ext AS (SELECT * FROM pg_extension WHERE extname = 'idgen'),
rels AS (SELECT c.* FROM pg_class c
	WHERE c.oid >= 16384 AND c.relnamespace <> 'pg_toast'::regnamespace
	  AND c.relpersistence <> 't'),
lines(line) AS (
	SELECT format('extension %s version=%s schema=%s owner=%s relocatable=%s config=[%s]',
		extname, extversion, extnamespace::regnamespace, extowner::regrole, extrelocatable,
		(SELECT string_agg(format('%s where %L', c::regclass, w), ', ' ORDER BY c::regclass::text)
		   FROM unnest(extconfig, extcondition) AS u(c, w)))
	FROM ext
	UNION ALL
	SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
	FROM pg_depend d, ext
	WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
	UNION ALL
	SELECT format('schema %s owner=%s acl=%s', nspname, nspowner::regrole, nspacl)
	FROM pg_namespace WHERE oid >= 16384 AND nspname NOT LIKE 'pg\_temp\_%' AND nspname NOT LIKE 'pg\_toast\_temp\_%'
	UNION ALL
	SELECT format('relation %s kind=%s owner=%s acl=%s persistence=%s options=%s am=%s rls=%s forcerls=%s replident=%s partkey=%s toast=%s',
		r.oid::regclass, relkind, relowner::regrole, relacl, relpersistence, reloptions,
		(SELECT amname FROM pg_am WHERE oid = relam), relrowsecurity, relforcerowsecurity,
		relreplident, CASE WHEN relkind = 'p' THEN pg_get_partkeydef(r.oid) END, reltoastrelid <> 0)
	FROM rels r
	UNION ALL
	SELECT format('column %s.%s position=%s type=%s notnull=%s default=%s identity=%s generated=%s collation=%s storage=%s stattarget=%s options=%s acl=%s',
		r.oid::regclass, a.attname,
		rank() OVER (PARTITION BY r.oid ORDER BY a.attnum),
		format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid),
		a.attidentity, a.attgenerated, (SELECT collname FROM pg_collation WHERE oid = a.attcollation),
		a.attstorage, a.attstattarget,
		(SELECT array_agg(o ORDER BY o) FROM unnest(a.attoptions) AS o WHERE o NOT LIKE 'pg\_%'),
		a.attacl)
	FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
	LEFT JOIN pg_attrdef ad ON ad.adrelid = r.oid AND ad.adnum = a.attnum
	UNION ALL
	SELECT format('view %s: %s', r.oid::regclass, pg_get_viewdef(r.oid))
	FROM rels r WHERE relkind IN ('v', 'm')
	UNION ALL
	SELECT format('sequence %s type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s',
		seqrelid::regclass, seqtypid::regtype, seqstart, seqincrement, seqmin, seqmax, seqcache, seqcycle)
	FROM pg_sequence WHERE seqrelid IN (SELECT oid FROM rels)
	UNION ALL
	SELECT format('index %s: %s clustered=%s replident=%s valid=%s',
		i.indexrelid::regclass, pg_get_indexdef(i.indexrelid), indisclustered, indisreplident, indisvalid)
	FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM rels)
	UNION ALL
	SELECT format('constraint %s on %s: %s deferrable=%s deferred=%s validated=%s',
		conname, COALESCE(conrelid::regclass::text, contypid::regtype::text),
		pg_get_constraintdef(oid), condeferrable, condeferred, convalidated)
	FROM pg_constraint WHERE oid >= 16384
	UNION ALL
	SELECT format('trigger %s on %s enabled=%s: %s', tgname, tgrelid::regclass, tgenabled, pg_get_triggerdef(oid))
	FROM pg_trigger WHERE oid >= 16384 AND NOT tgisinternal
	UNION ALL
	SELECT format('rule %s on %s: %s', rulename, ev_class::regclass, pg_get_ruledef(oid))
	FROM pg_rewrite WHERE oid >= 16384 AND rulename <> '_RETURN'
	UNION ALL
	SELECT format('policy %s on %s cmd=%s permissive=%s roles=%s using=%s check=%s',
		polname, polrelid::regclass, polcmd, polpermissive,
		(SELECT string_agg(CASE WHEN x = 0 THEN 'public' ELSE x::regrole::text END, ',' ORDER BY 1)
		   FROM unnest(polroles) AS x),
		pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid))
	FROM pg_policy WHERE oid >= 16384
	UNION ALL
	SELECT format('function %s returns=%s kind=%s volatility=%s strict=%s parallel=%s secdef=%s leakproof=%s owner=%s acl=%s config=%s language=%s cost=%s rows=%s support=%s bin=%s definition=%s',
		p.oid::regprocedure, pg_get_function_result(p.oid), prokind, provolatile, proisstrict,
		proparallel, prosecdef, proleakproof, proowner::regrole, proacl, proconfig,
		(SELECT lanname FROM pg_language WHERE oid = prolang), procost, prorows, prosupport, probin,
		md5(CASE WHEN prokind = 'a' THEN prosrc ELSE pg_get_functiondef(p.oid) END))
	FROM pg_proc p WHERE oid >= 16384
	UNION ALL
	SELECT format('type %s type=%s owner=%s acl=%s base=%s notnull=%s default=%s enum=%s',
		t.oid::regtype, typtype, typowner::regrole, typacl,
		NULLIF(typbasetype, 0)::regtype, typnotnull, typdefault,
		(SELECT string_agg(enumlabel, ',' ORDER BY enumsortorder) FROM pg_enum WHERE enumtypid = t.oid))
	FROM pg_type t WHERE oid >= 16384 AND typnamespace <> 'pg_toast'::regnamespace
	  AND (typrelid = 0 OR typrelid IN (SELECT oid FROM rels))
	UNION ALL
	SELECT format('event trigger %s event=%s enabled=%s owner=%s function=%s tags=%s',
		evtname, evtevent, evtenabled, evtowner::regrole, evtfoid::regprocedure, evttags)
	FROM pg_event_trigger WHERE oid >= 16384
	UNION ALL
	SELECT format('default privileges role=%s schema=%s on=%s acl=%s',
		defaclrole::regrole, defaclnamespace::regnamespace, defaclobjtype, defaclacl)
	FROM pg_default_acl
	UNION ALL
	SELECT 'object ' || pg_describe_object(classid, objid, 0)
	FROM (SELECT 'pg_cast'::regclass, oid FROM pg_cast WHERE oid >= 16384
	      UNION ALL SELECT 'pg_operator'::regclass, oid FROM pg_operator WHERE oid >= 16384
	      UNION ALL SELECT 'pg_opclass'::regclass, oid FROM pg_opclass WHERE oid >= 16384
	      UNION ALL SELECT 'pg_opfamily'::regclass, oid FROM pg_opfamily WHERE oid >= 16384
	      UNION ALL SELECT 'pg_collation'::regclass, oid FROM pg_collation WHERE oid >= 16384
	      UNION ALL SELECT 'pg_statistic_ext'::regclass, oid FROM pg_statistic_ext WHERE oid >= 16384
	      UNION ALL SELECT 'pg_publication'::regclass, oid FROM pg_publication WHERE oid >= 16384
	     ) AS o(classid, objid)
	UNION ALL
	SELECT format('comment on %s: %s', pg_describe_object(classoid, objoid, objsubid), description)
	FROM pg_description WHERE objoid >= 16384
	UNION ALL
	SELECT format('initial privileges of %s (%s): %s', pg_describe_object(classoid, objoid, objsubid),
		privtype, initprivs)
	FROM pg_init_privs WHERE objoid >= 16384
)
SELECT line FROM lines ORDER BY line COLLATE "C";
SQL
}

# A new database with idgen installed: VERSION, then each ALTER given.
install() # DATABASE VERSION [ALTER_TO]
{
	"$REAL_BIN/createdb" -T template0 "$1" &&
		"${PSQL[@]}" -d "$1" -c "CREATE SCHEMA idgen" \
			-c "CREATE EXTENSION idgen SCHEMA idgen VERSION '$2'" 2>"$W/$1.err" &&
		{ [ -z "${3:-}" ] || "${PSQL[@]}" -d "$1" -c "ALTER EXTENSION idgen UPDATE TO '$3'" 2>>"$W/$1.err"; } ||
		{ grep -v WARNING "$W/$1.err" >&2; return 1; }
}

# Whether ALTER EXTENSION idgen UPDATE from FROM to TO makes what CREATE
# EXTENSION of TO makes, in new databases uN and fN; the differences on
# standard output.
same_catalog() # FROM TO N
{
	local up=u$3 fresh=f$3
	install "$up" "$1" "$2" && install "$fresh" "$2" || return 2
	catalog "$up" >"$W/$up.catalog" && catalog "$fresh" >"$W/$fresh.catalog" || return 2
	diff "$W/$up.catalog" "$W/$fresh.catalog" | sed -n 's/^</  after the update:/p; s/^>/  fresh:           /p'
	cmp -s "$W/$up.catalog" "$W/$fresh.catalog"
}

default=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$EXT/idgen.control")
echo "upgrade-paths: default_version $default; catalog of a fresh install: $(install f0 "$default" && catalog f0 | wc -l) lines"

# The self-check: one target version, a correct upgrade script to it and
# five wrong ones, each wrong one by one thing the comparison must see.
change() # VARIANT: the upgrade's SQL; "good" is also what the target adds
{
	local volatility=IMMUTABLE
	[ "$1" = stable ] && volatility=STABLE
	cat <<EOF
CREATE FUNCTION @extschema@.idgen_selfcheck(n bigint) RETURNS bigint
LANGUAGE sql $volatility STRICT PARALLEL SAFE AS 'SELECT n + 1';
REVOKE ALL ON FUNCTION @extschema@.idgen_selfcheck(bigint) FROM PUBLIC;
CREATE TABLE @extschema@.idgen_selfcheck_t (k text PRIMARY KEY);
EOF
	[ "$1" = grant ] || echo "GRANT EXECUTE ON FUNCTION @extschema@.idgen_selfcheck(bigint) TO pg_monitor;"
	[ "$1" = comment ] || echo "COMMENT ON FUNCTION @extschema@.idgen_selfcheck(bigint) IS 'a self-check';"
	[ "$1" = config ] || echo "SELECT pg_catalog.pg_extension_config_dump('@extschema@.idgen_selfcheck_t', '');"
	[ "$1" = trigger ] && echo "ALTER TABLE @extschema@.idgen_public_key ENABLE TRIGGER idgen_public_key_guard;"
	true
}
for v in good grant comment config stable trigger; do
	{ cat "$EXT/idgen--$default.sql"; change good; } >"$EXT/idgen--selfcheck.$v.sql"
	change "$v" >"$EXT/idgen--$default--selfcheck.$v.sql"
	n_db=$((n_db + 1))
	diffs=$(same_catalog "$default" "selfcheck.$v" $n_db)
	status=$?
	if [ $status = 2 ]; then
		echo "FAILED: self-check $v: could not install"
		failures=$((failures + 1))
	elif [ $v = good ] && [ $status = 0 ]; then
		echo "ok: self-check: a correct upgrade script compares equal"
	elif [ $v != good ] && [ $status = 1 ]; then
		echo "ok: self-check: an upgrade script that differs by '$v' is caught:"
		echo "$diffs"
	else
		echo "FAILED: self-check $v: the comparison said $([ $status = 0 ] && echo equal || echo different)"
		echo "$diffs"
		failures=$((failures + 1))
	fi
done
rm -f "$EXT"/idgen--*selfcheck*

# The released versions: each must have a path to default_version that
# makes what a fresh install makes.
released=()
while read -r _ file; do
	case $file in
		sql/idgen--*--*.sql) ;;
		sql/idgen--*.sql) v=${file#sql/idgen--} && released+=("${v%.sql}") ;;
	esac
done < <(grep -v '^#' "$W/src/sql/released.sha256")
for v in "${released[@]}"; do
	[ "$v" = "$default" ] && continue
	path=$("${PSQL[@]}" -d f0 -c "SELECT path FROM pg_extension_update_paths('idgen')
		WHERE source = '$v' AND target = '$default'")
	if [ -z "$path" ]; then
		echo "FAILED: released version $v has no upgrade path to $default (sql/idgen--$v--$default.sql)"
		failures=$((failures + 1))
		continue
	fi
	n_db=$((n_db + 1))
	diffs=$(same_catalog "$v" "$default" $n_db)
	status=$?
	case $status in
		0) echo "ok: $path makes what CREATE EXTENSION idgen VERSION '$default' makes" ;;
		1) echo "FAILED: $path differs from a fresh install of $default:"
		   echo "$diffs" ;;
		*) echo "FAILED: $path: could not install" ;;
	esac
	[ $status = 0 ] || failures=$((failures + 1))
done
[ ${#released[@]} -le 1 ] && echo "upgrade-paths: no released version but $default, no upgrade path to compare yet"

echo "upgrade-paths: $failures failed"
[ $failures -eq 0 ]
