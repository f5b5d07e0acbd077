#!/usr/bin/env bash
#
# test/patroni.sh: idgen under Patroni (Debian's patroni) with etcd
# (etcd-server), three PostgreSQL 15 members, a switchover and a failover
# under load.
#
#   bash test/patroni.sh
#
# One etcd and three Patroni members on loopback ports, in a temporary
# directory.  The members' shared settings are the YAML block of
# docs/high-availability.md marked "<!-- test: patroni/dcs -->", taken as
# printed; each member adds its own name, ports and directories.  Every
# member runs idgen with one identity (the group's: a standby refuses to
# generate under it until promoted), Patroni's synchronous_mode on.  While
# three libpq stress clients (test/stress) draw Snowflake IDs, UUIDv7s and
# per-key sequence values through a multi-host connection string with
# target_session_attrs=read-write, reconnecting after each takeover:
#
#   1. patronictl switchover          to the synchronous standby (planned);
#   2. SIGKILL to the leader's postmaster: Patroni (primary_start_timeout
#      0) fails over to the synchronous standby at once (unplanned);
#   3. the old leader rejoins as a standby (pg_rewind).
#
# Checks: no Snowflake ID, UUIDv7 or per-key value repeats, over all three
# leaders; each connection's IDs rise strictly; after each takeover the new
# leader's first IDs are at most idgen.horizon_lead + idgen.max_drift
# ahead of its clock (idgen_info().recovery_lead_ms, and an ID drawn at
# once); a standby refuses to generate under the leader's identity.
#
# Run as root it installs what it needs, builds and installs idgen and
# runs everything as "postgres"; as another user it assumes all that.
# Exit status 0 when every check passed.
#
set -uo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGES=(postgresql-15 postgresql-server-dev-15 libpq-dev make gcc patroni etcd-server etcd-client)
PORT=${PATRONI_PORT:-55440}	# members' PostgreSQL PORT..PORT+2, REST API PORT+10..,
				# etcd PORT+20 (clients) and PORT+21 (peers)
LOAD=${PATRONI_LOAD:-100}	# seconds of load: 10 before each takeover, and what
				# they take (the rejoin after the switchover, 15 to 25 s);
				# it must outlast them, which the script checks

# ---------------------------------------------------------------------------
# As root (or whoever starts it): prepare, then run the rest as the user.
if [ "${1:-}" != --inner ]; then
	# shellcheck source=test/lib.sh
	. "$SRC/test/lib.sh"
	idgen_client_prepare patroni "${PACKAGES[@]}" || exit 2
	make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" stress >/dev/null || exit 2
	cp "$SRC/test/patroni.sh" "$SRC/test/stress/idgen_stress" "$WORK/"
	# The shared settings, as docs/high-availability.md prints them.
	perl -0777 -ne 'print $1 if /^<!-- test: patroni\/dcs -->\n```yaml\n(.*?)^```$/ms' \
		"$SRC/docs/high-availability.md" >"$WORK/dcs.yml"
	[ -s "$WORK/dcs.yml" ] || { echo "patroni.sh: no block patroni/dcs in docs/high-availability.md" >&2; exit 2; }
	[ -n "${PATRONI_KEEP:-}" ] && trap - EXIT
	idgen_client_run patroni '*.log' "PATRONI_PORT='$PORT' PATRONI_LOAD='$LOAD' \
		PATRONI_KEEP='${PATRONI_KEEP:-}' PG_CONFIG='$PG_CONFIG'"
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
ETCD=127.0.0.1:$((PORT + 20))
NODES="host=127.0.0.1,127.0.0.1,127.0.0.1 port=$PORT,$((PORT + 1)),$((PORT + 2)) dbname=postgres user=postgres"

sql() { psql -X -q -At -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2" 2>&1; }
port_of() { echo $((PORT + ${1#m})); }	# member m0, m1, m2
ctl() { patronictl -c "$W/m0.yml" "$@"; }
cleanup() {
	for f in "$W"/*.pgid; do kill -9 -- -"$(cat "$f")" 2>/dev/null; done
	for m in m0 m1 m2; do
		[ -f "$W/$m/postmaster.pid" ] && kill -9 "$(head -n 1 "$W/$m/postmaster.pid")" 2>/dev/null
	done
}
[ -z "${PATRONI_KEEP:-}" ] && trap cleanup EXIT

# The members whose role matches $1 and whose state matches $2 (any if not
# given), per Patroni, one a line.
members() {
	ctl list -f json 2>/dev/null | perl -MJSON::PP -0777 -sne '
		print map { "$_->{Member}\n" } grep { $_->{Role} =~ /^(?:$role)$/i && $_->{State} =~ /^(?:$state)$/ }
			@{decode_json($_)}' -- -role="$1" -state="${2:-.*}"
}
leader() { members Leader running; }
sync_standby() { members 'Sync Standby'; }
# Wait up to $2 seconds until the leader is $1 (or, as "!M", any member
# but M) and, with $3, the other two members stream from it, one of them
# as the sync standby.
wait_leader() {
	local start=$SECONDS l
	while :; do
		l=$(leader)
		if [ -n "$l" ] && { [ "$l" = "$1" ] || { [ "${1#!}" != "$1" ] && [ "$l" != "${1#!}" ]; }; }; then
			[ -z "${3:-}" ] && return 0
			[ "$(members 'Replica|Sync Standby' 'running|streaming' | wc -l)" = 2 ] &&
				[ -n "$(sync_standby)" ] && return 0
		fi
		[ $((SECONDS - start)) -ge "$2" ] && return 1
		sleep 0.5
	done
}
start_member() {
	setsid patroni "$W/$1.yml" >>"$W/$1.log" 2>&1 &
	echo $! >"$W/$1.pgid"
}
# The lead of the first IDs after a takeover on member $1: the server's own
# (recovery_lead_ms), and that of an ID drawn now; both at most
# horizon_lead + max_drift.
check_lead() {
	local lead now_lead bound ok
	IFS='|' read -r lead now_lead bound ok <<<"$(sql "$(port_of "$1")" "
		SELECT lead, now_lead, bound,
		       lead * interval '1 ms' <= bound AND now_lead * interval '1 ms' <= bound
		  FROM (SELECT recovery_lead_ms AS lead,
		               round(1000 * extract(epoch FROM
		                 idgen_snowflake_time(idgen_snowflake()) - clock_timestamp())) AS now_lead,
		               current_setting('idgen.horizon_lead')::interval
		                 + current_setting('idgen.max_drift')::interval AS bound
		          FROM idgen_info()) s")"
	say "$2: $1 leads; its generators started ${lead} ms ahead of its clock, an ID now ${now_lead} ms (bound $bound)"
	check "$2: the first IDs at most idgen.horizon_lead + idgen.max_drift ahead of the clock" test "$ok" = t
}

say "etcd on $ETCD"
setsid etcd --name idgen --data-dir "$W/etcd" \
	--listen-client-urls "http://$ETCD" --advertise-client-urls "http://$ETCD" \
	--listen-peer-urls "http://127.0.0.1:$((PORT + 21))" \
	--initial-advertise-peer-urls "http://127.0.0.1:$((PORT + 21))" \
	--initial-cluster "idgen=http://127.0.0.1:$((PORT + 21))" >"$W/etcd.log" 2>&1 &
echo $! >"$W/etcd.pgid"
for _ in $(seq 1 100); do etcdctl --endpoints "$ETCD" endpoint health >/dev/null 2>&1 && break; sleep 0.2; done
check "etcd answers" etcdctl --endpoints "$ETCD" endpoint health

for m in m0 m1 m2; do
	p=$(port_of "$m")
	cat >"$W/$m.yml" <<EOF
scope: idgen
name: $m
restapi:
  listen: 127.0.0.1:$((p + 10))
  connect_address: 127.0.0.1:$((p + 10))
etcd3:
  hosts: $ETCD
postgresql:
  listen: 127.0.0.1:$p
  connect_address: 127.0.0.1:$p
  data_dir: $W/$m
  bin_dir: $BIN
  pgpass: $W/$m.pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: $W
    shared_buffers: 32MB
EOF
	cat "$W/dcs.yml" >>"$W/$m.yml"
done

say "m0 (first leader), then m1 and m2 (standbys, by pg_basebackup)"
start_member m0
wait_leader m0 60 || { say "m0 did not become the leader"; exit 1; }
for _ in $(seq 1 40); do
	out=$(sql "$PORT" "CREATE EXTENSION idgen") && [ -z "$out" ] && break
	sleep 0.5
done
check "CREATE EXTENSION idgen on the leader" test -z "$out"
start_member m1
start_member m2
wait_leader m0 120 pair || { say "m1 and m2 did not become m0's standbys"; ctl list; exit 1; }
ctl list
check "synchronous replication on the leader" \
	test -n "$(sql "$PORT" "SHOW synchronous_standby_names")"
check "every member preloads idgen with one identity" test "$(for m in m0 m1 m2; do
	sql "$(port_of $m)" "SELECT datacenter_id || ':' || worker_id FROM idgen_info()"; done | sort -u)" = "0:1"
check "a standby refuses to generate under the leader's identity" \
	grep -q "has the Snowflake identity of its primary" <<<"$(sql $((PORT + 1)) "SELECT idgen_snowflake()")"

say "load: Snowflake IDs, UUIDv7s and per-key values, $LOAD s"
./idgen_stress -d "$NODES target_session_attrs=read-write" -c 2 -b 20 -D "$LOAD" \
	--reconnect >"$W/stress_snowflake.log" 2>&1 &
stress1=$!
./idgen_stress -d "$NODES target_session_attrs=read-write" -c 2 -b 20 -D "$LOAD" \
	--reconnect -t uuid -e 'idgen_uuid7()' >"$W/stress_uuid7.log" 2>&1 &
stress2=$!
./idgen_stress -d "$NODES target_session_attrs=read-write" -c 2 -b 5 -D "$LOAD" \
	--reconnect -k 20 >"$W/stress_seq.log" 2>&1 &
stress3=$!
sleep 10

old=$(leader)
sync=$(sync_standby)
say "planned: patronictl switchover from $old to $sync"
start=$SECONDS
ctl switchover --leader "$old" --candidate "$sync" --force >>"$W/patronictl.log" 2>&1
wait_leader "$sync" 60
say "$sync leads $((SECONDS - start)) s after the command"
check "switchover to $sync" test "$(leader)" = "$sync"
check_lead "$sync" switchover
wait_leader "$sync" 120 pair
sleep 10

old=$(leader)
sync=$(sync_standby)
say "unplanned: SIGKILL to $old's postmaster (its synchronous standby: $sync)"
start=$SECONDS
kill -9 "$(head -n 1 "$W/$old/postmaster.pid")"
wait_leader "!$old" 60
new=$(leader)
say "$new leads $((SECONDS - start)) s after the kill"
check "failover to the synchronous standby $sync" test "$new" = "$sync"
check_lead "$new" failover
check "the load ran through both takeovers" kill -0 "$stress1"
say "$old rejoins as a standby"
wait_leader "$new" 120 pair
check "$old streams from $new" test "$(sql "$(port_of "$old")" "SELECT pg_is_in_recovery()")" = t
check "rejoined $old refuses to generate under the leader's identity" \
	grep -q "has the Snowflake identity of its primary" <<<"$(sql "$(port_of "$old")" "SELECT idgen_snowflake()")"

wait "$stress1"; s1=$?
wait "$stress2"; s2=$?
wait "$stress3"; s3=$?
cat "$W/stress_snowflake.log" "$W/stress_uuid7.log" "$W/stress_seq.log"
check "Snowflake IDs: none repeated, each connection's strictly rising" test $s1 -eq 0
check "UUIDv7s: none repeated, each connection's strictly rising" test $s2 -eq 0
check "per-key values: none handed out twice" test $s3 -eq 0

checks_done patroni
