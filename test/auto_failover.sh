#!/usr/bin/env bash
#
# test/auto_failover.sh: idgen under pg_auto_failover, Debian's
# postgresql-15-auto-failover, with a planned and an unplanned failover
# under load.
#
#   bash test/auto_failover.sh
#
# A monitor and two nodes on loopback ports, in a temporary directory:
# node_1 (the first primary, the machine's clock) and node_2 (its standby,
# made by pg_autoctl with pg_basebackup, with its clock AUTO_FAILOVER_SKEW
# behind under libfaketime).  Both run idgen with one identity, the one in
# node_1's postgresql.conf that pg_basebackup copies.  Two libpq stress
# clients (test/stress) draw Snowflake IDs and UUIDv7s through a
# multi-host connection string with target_session_attrs=read-write, and
# reconnect after each failover, while
#
#   1. pg_autoctl perform switchover   promotes node_2 (planned);
#   2. node_2 is killed (SIGKILL to its pg_autoctl and its postmaster),
#      and the monitor fails over to node_1 (unplanned);
#   3. node_2 is started again and rejoins as a standby.
#
# The clients check that no value repeats and that each connection's values
# rise strictly, across both failovers; the script checks that the rejoined
# standby refuses to generate under its primary's identity, and reports how
# long each failover left the clients without IDs.
#
# Run as root it installs what it needs, builds and installs idgen and
# runs the cluster as "postgres"; as another user it assumes all that.
# Exit status 0 when every check passed.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev faketime make gcc
	postgresql-15-auto-failover)
SKEW=${AUTO_FAILOVER_SKEW:--10s}
PORT=${AUTO_FAILOVER_PORT:-55430}	# monitor; nodes PORT+1, PORT+2
LOAD=${AUTO_FAILOVER_LOAD:-30}		# seconds of load over the three phases

# ---------------------------------------------------------------------------
# As root (or whoever starts it): prepare, then run the rest as the user.
if [ "${1:-}" != --inner ]; then
	# shellcheck source=test/lib.sh
	. "$SRC/test/lib.sh"
	idgen_client_prepare auto_failover "${PACKAGES[@]}" || exit 2
	make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" stress >/dev/null || exit 2
	cp "$SRC/test/auto_failover.sh" "$SRC/test/stress/idgen_stress" "$WORK/"
	[ -n "${AUTO_FAILOVER_KEEP:-}" ] && trap - EXIT
	idgen_client_run auto_failover '*.log' "AUTO_FAILOVER_SKEW='$SKEW' AUTO_FAILOVER_PORT='$PORT' \
		AUTO_FAILOVER_LOAD='$LOAD' AUTO_FAILOVER_KEEP='${AUTO_FAILOVER_KEEP:-}' PG_CONFIG='$PG_CONFIG'"
	exit
fi

# ---------------------------------------------------------------------------
# As the cluster's user, in the work directory $2.
W=$2
cd "$W" || exit 2
# shellcheck source=test/lib.sh
. "$W/lib.sh"
BIN=$("$PG_CONFIG" --bindir)
export PATH="$BIN:$PATH"
# pg_autoctl keeps its configuration and state under these
export XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data
MON=$W/monitor
MON_URI="postgres://autoctl_node@127.0.0.1:$PORT/pg_auto_failover?sslmode=disable"
FAKETIME_LIB=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n 1)
NODES="host=127.0.0.1,127.0.0.1 port=$((PORT + 1)),$((PORT + 2)) dbname=postgres"

sql() { psql -X -q -At -h 127.0.0.1 -p "$1" -d "${3:-postgres}" -c "$2" 2>&1; }
cleanup() {
	for d in "$W"/node_2 "$W"/node_1 "$MON"; do
		[ -d "$d" ] && pg_autoctl stop --pgdata "$d" --immediate >/dev/null 2>&1
	done
	sleep 1
	for f in "$W"/*.pgid; do kill -9 -- -"$(cat "$f")" 2>/dev/null; done
	for d in "$W"/node_2 "$W"/node_1 "$MON"; do
		[ -f "$d/postmaster.pid" ] && kill -9 "$(head -n 1 "$d/postmaster.pid")" 2>/dev/null
	done
}
[ -z "${AUTO_FAILOVER_KEEP:-}" ] && trap cleanup EXIT

# The node that now takes writes, per the monitor ('' if none): "single"
# alone, "wait_primary" while its standby is missing, "primary" with it.
primary() {
	sql "$PORT" "SELECT nodename FROM pgautofailover.node
		WHERE reportedstate = goalstate
		AND goalstate IN ('single', 'wait_primary', 'primary')" pg_auto_failover
}
# Wait up to $2 seconds for primary() to be $1.
wait_primary() {
	local t0=$SECONDS
	while [ "$(primary)" != "$1" ]; do
		[ $((SECONDS - t0)) -ge "$2" ] && return 1
		sleep 0.5
	done
}
# Wait for both nodes to be primary and secondary, in sync.  A new standby
# accepts connections (which the monitor's health checks need) only once it
# has replayed a snapshot of running transactions with none left open, and
# an idle primary logs one only after other WAL activity or a checkpoint
# (idgen's horizon records are marked unimportant, so they do not count);
# so the wait checkpoints both nodes every few seconds (on the standby that
# is a harmless restartpoint).
wait_pair() {
	local start=$SECONDS
	until [ "$(sql "$PORT" "SELECT count(*) FROM pgautofailover.node
			WHERE reportedstate = goalstate AND goalstate IN ('primary', 'secondary')" \
			pg_auto_failover)" = 2 ]; do
		[ $((SECONDS - start)) -ge "$1" ] && return 1
		if [ $(((SECONDS - start) % 5)) = 4 ]; then
			sql $((PORT + 1)) "CHECKPOINT" >/dev/null
			sql $((PORT + 2)) "CHECKPOINT" >/dev/null
		fi
		sleep 0.5
	done
}
# Start node $1's keeper (and so its Postgres); node_2 under the skewed clock.
run_node() {
	if [ "$1" = node_2 ]; then
		LD_PRELOAD=$FAKETIME_LIB FAKETIME=$SKEW \
			setsid pg_autoctl run --pgdata "$W/$1" >>"$W/$1.log" 2>&1 &
	else
		setsid pg_autoctl run --pgdata "$W/$1" >>"$W/$1.log" 2>&1 &
	fi
	echo $! >"$W/$1.pgid"
}

say "monitor on port $PORT"
pg_autoctl create monitor --pgdata "$MON" --pgport "$PORT" --hostname 127.0.0.1 \
	--auth trust --no-ssl >"$W/monitor.log" 2>&1 || { cat "$W/monitor.log"; exit 2; }
cat >>"$MON/postgresql.conf" <<EOF
shared_buffers = '32MB'
# Notice a dead node within seconds (the defaults take about 30 s).
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 3000
# ... and promote a standby 5 s after its primary stopped answering; a
# primary that cannot reach the monitor demotes itself sooner, after the
# nodes' timeout.network_partition_timeout (set to 3 s below).
pgautofailover.primary_demote_timeout = 5000
EOF
setsid pg_autoctl run --pgdata "$MON" >>"$W/monitor.log" 2>&1 &
echo $! >"$W/monitor.pgid"

# node_1: our own initdb, so that postgresql.conf carries idgen before
# pg_autoctl takes it over. pg_autoctl writes its settings, with
# shared_preload_libraries = pg_stat_statements, to an included file at the
# top of postgresql.conf: what follows wins, so list both libraries here.
initdb -D "$W/node_1" -A trust -U postgres >"$W/node_1.log" 2>&1 || exit 2
cat >>"$W/node_1/postgresql.conf" <<EOF
shared_preload_libraries = 'pg_stat_statements,idgen'
idgen.worker_id = 1
shared_buffers = '64MB'
EOF
sleep 2
say "node_1 (primary)"
pg_autoctl create postgres --pgdata "$W/node_1" --pgport $((PORT + 1)) --hostname 127.0.0.1 \
	--auth trust --no-ssl --monitor "$MON_URI" >>"$W/node_1.log" 2>&1 || exit 2
pg_autoctl config set --pgdata "$W/node_1" timeout.network_partition_timeout 3 >/dev/null
run_node node_1
wait_primary node_1 60 || { say "node_1 did not become primary"; exit 1; }
# pg_autoctl restarts Postgres, and keeps it read-only, for a moment after "single".
for _ in $(seq 1 40); do
	out=$(sql $((PORT + 1)) "CREATE EXTENSION idgen") && [ -z "$out" ] && break
	sleep 0.5
done
check "CREATE EXTENSION idgen on node_1" test -z "$out"

say "node_2 (standby, clock $SKEW)"
LD_PRELOAD=$FAKETIME_LIB FAKETIME=$SKEW \
	setsid pg_autoctl create postgres --pgdata "$W/node_2" --pgport $((PORT + 2)) \
	--hostname 127.0.0.1 --auth trust --no-ssl --monitor "$MON_URI" --run \
	>>"$W/node_2.log" 2>&1 &
echo $! >"$W/node_2.pgid"
wait_pair 120 || { say "node_2 did not become a secondary"; exit 1; }
pg_autoctl config set --pgdata "$W/node_2" timeout.network_partition_timeout 3 >/dev/null
pg_autoctl reload --pgdata "$W/node_2" >/dev/null
check "node_2's clock is behind node_1's" \
	test "$(sql $((PORT + 2)) "SELECT extract(epoch FROM now())::int")" -lt \
	"$(sql $((PORT + 1)) "SELECT extract(epoch FROM now())::int - 5")"
check "replication is synchronous" \
	test -n "$(sql $((PORT + 1)) "SHOW synchronous_standby_names")"
check "node_2 refuses to generate under node_1's identity" \
	grep -q "has the Snowflake identity of its primary" \
	<<<"$(sql $((PORT + 2)) "SELECT idgen_snowflake()")"

say "load: Snowflake IDs and UUIDv7s, $LOAD s"
./idgen_stress -d "$NODES target_session_attrs=read-write" -c 2 -b 20 -D "$LOAD" \
	--reconnect >"$W/stress_snowflake.log" 2>&1 &
stress1=$!
./idgen_stress -d "$NODES target_session_attrs=read-write" -c 2 -b 20 -D "$LOAD" \
	--reconnect -t uuid -e 'idgen_uuid7()' >"$W/stress_uuid7.log" 2>&1 &
stress2=$!
phase=$((LOAD / 4))
sleep "$phase"

say "planned: pg_autoctl perform switchover"
start=$SECONDS
pg_autoctl perform switchover --pgdata "$MON" >>"$W/monitor.log" 2>&1
wait_primary node_2 60
say "node_2 is primary $((SECONDS - start)) s after the command"
check "switchover to node_2" test "$(primary)" = node_2
wait_pair 60
sleep "$phase"

say "unplanned: SIGKILL to node_2's pg_autoctl and postmaster"
start=$SECONDS
# Its pg_autoctl processes first (setsid made one process group of them;
# they retitle themselves, so no pkill -f), or they restart Postgres.
kill -9 -- -"$(cat "$W/node_2.pgid")"
kill -9 "$(head -n 1 "$W/node_2/postmaster.pid")"
wait_primary node_1 60
say "node_1 is primary $((SECONDS - start)) s after the kill"
check "failover to node_1" test "$(primary)" = node_1
sleep "$phase"

say "node_2 rejoins"
run_node node_2
wait_pair 120
check "node_2 is a secondary again" test "$(sql "$PORT" "SELECT reportedstate
	FROM pgautofailover.node WHERE nodename = 'node_2'" pg_auto_failover)" = secondary
check "rejoined node_2 refuses to generate under node_1's identity" \
	grep -q "has the Snowflake identity of its primary" \
	<<<"$(sql $((PORT + 2)) "SELECT idgen_snowflake()")"

wait "$stress1"; s1=$?
wait "$stress2"; s2=$?
cat "$W/stress_snowflake.log" "$W/stress_uuid7.log"
check "Snowflake IDs: none repeated, each connection's strictly rising" test $s1 -eq 0
check "UUIDv7s: none repeated, each connection's strictly rising" test $s2 -eq 0
sql $((PORT + 1)) "SELECT 'node_1: recovery_ended_at ' || coalesce(recovery_ended_at::text, '-') ||
	', recovery_lead_ms ' || coalesce(recovery_lead_ms::text, '-') FROM idgen_info()"

checks_done auto_failover
