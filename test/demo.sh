#!/usr/bin/env bash
#
# test/demo.sh: a guided tour of idgen on a throwaway PostgreSQL 15 server.
#
#   bash test/demo.sh
#
# Run as root on Debian it installs the build dependencies if any is
# missing (postgresql-server-dev-15 libpq-dev make gcc), builds and
# installs the extension, then starts a temporary cluster as the postgres
# user (PostgreSQL refuses to run as root).  Run as another user it skips
# apt and runs the cluster as that user; it assumes it may `make install`
# (PG_CONFIG may point at a writable installation) or that idgen is
# already installed.
#
# The cluster lives in a mktemp directory under /tmp, listens only on a
# Unix socket in that directory (listen_addresses = '', port $DEMO_PORT,
# default 55433), preloads idgen and uses a layout with 4 gene bits
# (16 shards), datacenter 1, worker 7.  The demo then runs SQL through
# psql with every statement echoed: the extension's info, tables keyed by
# Snowflake IDs, orders carrying their user's gene (trigger and explicit
# form), decoding an ID, routing by gene, a time-range scan, UUIDv7 keys,
# per-key sequences and the stats.
#
# The cluster is stopped and the directory removed on exit, also on
# failure.  The script exits non-zero if the build or any SQL fails.
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
DEMO_PORT=${DEMO_PORT:-55433}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-server-dev-15 libpq-dev make gcc)

log() { printf '\n=== %s\n' "$*"; }
die() { echo "demo.sh: $*" >&2; exit 1; }

# --- 1. dependencies, build, install -------------------------------------

# shellcheck source=test/lib.sh
. "$SRC/test/lib.sh"
idgen_prepare_host "${PACKAGES[@]}" || die "could not prepare the host"
DEMO_USER=$IDGEN_USER
as_user() { as_idgen_user "$1"; }

[ -x "$PG_CONFIG" ] || die "no pg_config at $PG_CONFIG (set PG_CONFIG)"
PGBIN=$("$PG_CONFIG" --bindir)

log "build and install idgen ($PG_CONFIG)"
if make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" &&
   make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" install; then
	:
elif [ "$(id -u)" != 0 ] &&
     [ -f "$("$PG_CONFIG" --pkglibdir)/idgen.so" ] &&
     [ -f "$("$PG_CONFIG" --sharedir)/extension/idgen.control" ]; then
	echo "demo.sh: build or install failed; using the idgen already installed" >&2
else
	die "build or install failed"
fi

# --- 2. a throwaway cluster ----------------------------------------------

DEMO_DIR=$(mktemp -d /tmp/idgen-demo.XXXXXX)
DATA=$DEMO_DIR/data
LOGFILE=$DEMO_DIR/server.log

# Quote a value for the shell that as_user starts.
q() { printf '%q' "$1"; }

stop_server() {
	[ -f "$DATA/postmaster.pid" ] || return 0
	as_user "cd / && $(q "$PGBIN/pg_ctl") -D $(q "$DATA") -m fast -w stop" >/dev/null 2>&1 ||
		as_user "cd / && $(q "$PGBIN/pg_ctl") -D $(q "$DATA") -m immediate -w stop" >/dev/null 2>&1 ||
		{ echo "demo.sh: could not stop the server in $DATA" >&2; return 1; }
}

# On any exit, also a failure or ^C: stop the server, remove the directory.
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_server || true
	rm -rf "$DEMO_DIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ "$(id -u)" = 0 ] && chown "$DEMO_USER" "$DEMO_DIR"
chmod 700 "$DEMO_DIR"

log "start a throwaway cluster in $DEMO_DIR (socket only, port $DEMO_PORT)"
as_user "cd / && $(q "$PGBIN/initdb") -D $(q "$DATA") --auth=trust -E UTF8 --locale=C >/dev/null" ||
	die "initdb failed"
cat >>"$DATA/postgresql.conf" <<EOF

# idgen demo
listen_addresses = ''
port = $DEMO_PORT
unix_socket_directories = '$DEMO_DIR'
shared_preload_libraries = 'idgen'
idgen.gene_bits = 4
idgen.sequence_bits = 8
idgen.datacenter_id = 1
idgen.worker_id = 7
EOF
if ! as_user "cd / && $(q "$PGBIN/pg_ctl") -D $(q "$DATA") -l $(q "$LOGFILE") -w start >/dev/null"; then
	echo "demo.sh: the server did not start; its log:" >&2
	tail -n 30 "$LOGFILE" >&2 || true
	exit 1
fi

# --- 3. the tour ---------------------------------------------------------

log "the tour (each statement is echoed before its result)"
echo
PSQL="cd / && $(q "$PGBIN/psql") -X -e -v ON_ERROR_STOP=1 -h $(q "$DEMO_DIR") -p $DEMO_PORT -d postgres"
as_user "$PSQL" <<'SQL' || die "SQL failed"
\pset footer off
\echo '-- idgen hands out 64-bit Snowflake IDs: time | datacenter | worker | sequence | gene.'
\echo '-- The server preloads the library (shared_preload_libraries = idgen); create the extension:'
CREATE EXTENSION idgen;

\echo
\echo '-- The layout this server runs with (postgresql.conf: 4 gene bits = 16 shards, 8 sequence bits,'
\echo '-- datacenter 1, worker 7), its capacity and how long the timestamp lasts:'
\x on
SELECT * FROM idgen_info();
\x off

\echo
\echo '-- Where the identity comes from: its settings here; with idgen.registry set it would be'
\echo '-- leased from a registry server, which refuses a second server claiming it:'
SELECT source, leased, state, datacenter_id, worker_id FROM idgen_identity();

\echo
\echo '-- A table keyed by Snowflake IDs: a plain column DEFAULT.  Each ID gets a gene (0..15).'
CREATE TABLE users (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), name text NOT NULL);
INSERT INTO users (name) VALUES ('alice'), ('bob'), ('carol'), ('dave')
    RETURNING id, name, idgen_gene(id, 4) AS gene;

\echo
\echo '-- Orders should carry their user''s gene, so a user''s orders live on the user''s shard.'
\echo '-- A column DEFAULT cannot reference another column, so the extension''s trigger does it:'
CREATE TABLE orders (
    id bigint PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users,
    item text NOT NULL);
CREATE TRIGGER orders_id BEFORE INSERT ON orders
    FOR EACH ROW EXECUTE FUNCTION idgen_snowflake_trigger('id', 'user_id');
INSERT INTO orders (user_id, item)
    SELECT u.id, i.item FROM users u, (VALUES ('book'), ('pen')) AS i(item);

\echo
\echo '-- The explicit form, without the trigger: pass the parent''s gene to idgen_snowflake().'
\echo '-- (The trigger keeps an ID that is given explicitly.)  First, alice''s id into :alice (\\gset):'
SELECT id AS alice FROM users WHERE name = 'alice' \gset
INSERT INTO orders (id, user_id, item)
    VALUES (idgen_snowflake(idgen_gene(:alice, 4)), :alice, 'lamp')
    RETURNING id, user_id, item;

\echo
\echo '-- Every order''s gene is its user''s gene:'
SELECT o.id, u.name, o.item, idgen_gene(o.id, 4) AS order_gene, idgen_gene(u.id, 4) AS user_gene
FROM orders o JOIN users u ON u.id = o.user_id
ORDER BY u.id, o.id;

\echo
\echo '-- Taking an ID apart: its fields, its time, and a one-line debug string.'
\echo '-- (The lamp order''s id into :order_id.)'
SELECT id AS order_id FROM orders WHERE item = 'lamp' \gset
SELECT * FROM idgen_snowflake_decode(:order_id);
SELECT idgen_snowflake_time(:order_id);
SELECT idgen_snowflake_debug(:order_id);

\echo
\echo '-- Routing: the shard is read from the ID alone, and equals the user''s shard.'
CREATE VIEW orders_routed AS SELECT o.*, idgen_gene(o.id, 4) AS shard FROM orders o;
SELECT id, item, shard, idgen_gene(user_id, 4) AS user_shard,
       shard = idgen_gene(user_id, 4) AS same_shard
FROM orders_routed
ORDER BY shard, id;

\echo
\echo '-- IDs sort by time, so a time range is an ID range (the primary key index serves it):'
SELECT count(*) FROM orders
WHERE id >= idgen_snowflake_min(now() - interval '1 minute')
  AND id <  idgen_snowflake_min(now() + interval '1 minute');

\echo
\echo '-- UUIDv7 for uuid keys: strictly increasing across the whole server, random tail.'
CREATE TABLE events (id uuid PRIMARY KEY DEFAULT idgen_uuid7(), what text NOT NULL);
INSERT INTO events (what) VALUES ('signup'), ('login'), ('logout')
    RETURNING id, what, idgen_uuid7_time(id) AS at;
SELECT idgen_uuid7_time('919108f7-52d1-4320-9bac-f847db4148a8') AS v4_uuid_has_no_time;

\echo
\echo '-- Per-key business sequences: gap-free, transactional, one row per key.'
SELECT idgen_seq_next('conv:42') AS msg1, idgen_seq_next('conv:42') AS msg2, idgen_seq_next('conv:7') AS other_conv;
BEGIN;
SELECT idgen_seq_next('conv:42') AS rolled_back;
ROLLBACK;
SELECT idgen_seq_next('conv:42') AS given_back;
SELECT idgen_seq_configure('order', step => 5);
SELECT array_agg(v) AS batch_of_three FROM idgen_seq_next('order', 3) v;

\echo
\echo '-- What the generators did (server-wide, from shared memory):'
SELECT * FROM idgen_stats;
SQL

log "stop the cluster and remove $DEMO_DIR"
stop_server
rm -rf "$DEMO_DIR"
echo "demo.sh: done"
