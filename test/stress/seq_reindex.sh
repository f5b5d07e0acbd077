#!/usr/bin/env bash
#
# test/stress/seq_reindex.sh: new per-key sequence keys created by many
# sessions at once while REINDEX CONCURRENTLY rebuilds idgen_seq's primary
# key, for longer and with more clients than 010_seq.pl can afford.
#
#   bash test/stress/seq_reindex.sh
#
# A throwaway cluster (test/bench/lib.sh: a mktemp directory, a Unix socket
# there, no TCP; log_min_messages = debug1) is started.  A REPEATABLE READ
# transaction holds an old snapshot, so that REINDEX INDEX CONCURRENTLY
# idgen_seq_pkey waits with its new index ready for inserts but not valid
# (no ON CONFLICT arbiter).  Then pgbench runs, for SEQ_REINDEX_T seconds
# with SEQ_REINDEX_CLIENTS clients,
#     SELECT idgen_seq_next('m:' || <the current Unix time in ms>);
# so that every key is new to several clients at once and its row is
# updated by the others meanwhile.  It prints how many transactions ran,
# how many clients aborted (a unique violation on idgen_seq_pkey_ccnew, or a
# deadlock), and how many unique violations in the new index idgen took for
# what they mean, a key that exists (its DEBUG1 message "... looking for the
# key again").
# It exits 1 if a client aborted or a key's value is not its number of
# calls.
#
# Settings (environment): SEQ_REINDEX_T (default 30), SEQ_REINDEX_CLIENTS
# (default 96), PG_CONFIG, BENCH_INSTALL=0 to skip `make install` as root.
# Run as root (the server then runs as postgres) or as a user that may run
# PostgreSQL.
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
INSTALL=${BENCH_INSTALL:-1}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T=${SEQ_REINDEX_T:-30}
CLIENTS=${SEQ_REINDEX_CLIENTS:-96}
die() { echo "seq_reindex.sh: $*" >&2; exit 1; }
PROG=seq_reindex.sh
# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"

print_machine
init_cluster "max_connections = $((CLIENTS + 20))
log_min_messages = debug1"
start_cluster
sql "CREATE EXTENSION idgen; CREATE TABLE calls (key text, value bigint)" >/dev/null

section "REINDEX CONCURRENTLY held with its new index ready, not valid"
# The snapshot holder and the REINDEX run in the background until the end.
as_pg bash -c "{ echo 'BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM calls;';
	sleep $((T + 10)); echo 'COMMIT;'; } | $(printf '%q ' "${PSQL[@]}") >/dev/null 2>&1" &
sleep 1
as_pg "${PSQL[@]}" -c 'REINDEX INDEX CONCURRENTLY idgen_seq_pkey' >/dev/null 2>&1 &
ready="SELECT coalesce(bool_or(i.indisready AND NOT i.indisvalid), false) FROM pg_index i
	WHERE i.indexrelid = to_regclass('idgen_seq_pkey_ccnew')"
for _ in $(seq 100); do
	[ "$(sql "$ready")" = t ] && break
	sleep 0.1
done
[ "$(sql "$ready")" = t ] || die "the new index did not become ready"
echo "idgen_seq_pkey_ccnew: ready for inserts, not valid"

section "pgbench: $CLIENTS clients, $T s, a new key every millisecond"
script=$DIR/new_keys.sql
printf '%s\n' "INSERT INTO calls SELECT k, idgen_seq_next(k) FROM (SELECT 'm:' || (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS k) s;" >"$script"
chmod 644 "$script"
out=$(as_pg "$BINDIR/pgbench" -n -h "$DIR" -p "$PORT" -c "$CLIENTS" -j 4 -T "$T" -f "$script" bench 2>&1) || true
processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
aborted=$(grep -c 'client [0-9]* script [0-9]* aborted' <<<"$out" || true)
violations=$(grep -c 'duplicate key value violates unique constraint' <<<"$out" || true)
deadlocks=$(grep -c 'deadlock detected' <<<"$out" || true)
[ "$(sql "$ready")" = t ] || die "the new index did not stay ready and not valid"
taken=$(grep -c 'while an index of the table is not valid: looking for the key again' "$LOG" || true)
bad=$(sql "SELECT count(*) FROM (SELECT key FROM calls GROUP BY key
	HAVING count(DISTINCT value) <> count(*) OR min(value) <> 1 OR max(value) <> count(*)) b")
keys=$(sql "SELECT count(DISTINCT key) FROM calls")
printf '%-44s %s\n' "transactions" "${processed:-0}" \
	"keys" "$keys" \
	"clients aborted" "$aborted" \
	"  of which on a unique violation" "$violations" \
	"  of which on a deadlock" "$deadlocks" \
	"violations taken as an existing key" "$taken" \
	"keys whose values are not 1, 2, 3, ..." "$bad"

# The server's fast stop (at exit) ends the snapshot holder and the REINDEX.
[ "$aborted" = 0 ] && [ "$bad" = 0 ] || exit 1
