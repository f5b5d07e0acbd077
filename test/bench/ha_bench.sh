#!/usr/bin/env bash
#
# test/bench/ha_bench.sh: what idgen's durable horizon in WAL costs a
# primary with a streaming standby while nothing fails, and what it adds to
# a failover.
#
#   bash test/bench/ha_bench.sh
#
# These are MEASUREMENTS, not tests: the script fails only if something
# breaks (a server does not start, a query or pgbench fails).  It prints the
# machine first, so figures are never quoted without it.
#
# What it does
#   A throwaway primary (lib.sh's init_cluster: Unix socket in a mktemp
#   directory, no TCP, idgen preloaded, synchronous_commit = on) and a
#   streaming standby made from it with pg_basebackup -R (port + 1, idgen
#   preloaded: it replays idgen's WAL records), both removed at exit.
#
#   Part A, WAL volume on an idle primary.  With nothing else running, the
#   WAL written over HA_IDLE_S seconds (pg_current_wal_lsn() before and
#   after, from 5 s after a CHECKPOINT), twice with idgen preloaded on the
#   primary and twice without (restarted with shared_preload_libraries =
#   ''), alternating; reported as bytes per hour, the quietest window of
#   each (other activity, such as autovacuum of the tables just created,
#   only adds WAL), and their difference: what the keeper's horizon records
#   add (about two a second).
#
#   Part B, INSERT throughput with a synchronous standby
#   (synchronous_standby_names = '*', synchronous_commit = on).  pgbench -n
#   -c HA_CLIENTS -T HA_T, one statement:
#       serial, no idgen   INSERT INTO t_serial (v) VALUES (1)   primary without idgen
#       serial, idgen      the same                              primary with idgen preloaded
#       snowflake, idgen   INSERT INTO t_snow (v) VALUES (1)     (id DEFAULT idgen_snowflake())
#   in HA_ROUNDS rounds, each restarting the primary without, then with
#   idgen; TRUNCATE and CHECKPOINT before every run.  Reported: tps per run,
#   the median per workload and the ratios of the medians to "serial, no
#   idgen".
#
#   Part C, failover time added by idgen, clocks in agreement.  HA_FAILOVERS
#   times: a fresh standby (pg_basebackup -R) catches up, the primary is
#   stopped with -m immediate, and two psql sessions already connected to
#   the standby poll it, one with SELECT idgen_snowflake(), the other with
#   SELECT nextval('s') (a write), from just before pg_ctl promote.
#   Reported, in ms from the promote command: when pg_ctl promote -w
#   returned, the first ID, the first nextval(), and the first ID less the
#   first nextval() (what idgen adds).  The old primary is rebuilt from the
#   promoted one for the next round.
#
# Settings (environment)
#   HA_IDLE_S      seconds per Part A window (default 20)
#   HA_T           seconds per pgbench run (default 5)
#   HA_CLIENTS     pgbench clients (default 8)
#   HA_ROUNDS      Part B rounds (default 5)
#   HA_FAILOVERS   Part C failovers (default 5)
#   HA_PARTS       which parts to run (default "A B C")
#   BENCH_INSTALL  as root, run `make install` first (default 1; 0 skips)
#
set -euo pipefail

PROG=$(basename "$0")
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
INSTALL=${BENCH_INSTALL:-1}
IDLE_S=${HA_IDLE_S:-20}
T=${HA_T:-5}
CLIENTS=${HA_CLIENTS:-8}
ROUNDS=${HA_ROUNDS:-5}
FAILOVERS=${HA_FAILOVERS:-5}
PARTS=${HA_PARTS:-A B C}

# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"

# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"

STANDBY_DIR=$DIR/standby
SPORT=$((PORT + 1))
SPSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$SPORT" -d bench)
ssql() { as_pg "${SPSQL[@]}" -At -c "$1"; }
STANDBY_UP=0

# Stop the standby too at exit, then lib.sh's cleanup.
stop_standby() {
	if [ "$STANDBY_UP" = 1 ]; then
		as_pg "$BINDIR/pg_ctl" -D "$STANDBY_DIR" -m immediate -w stop >/dev/null 2>&1 || true
		STANDBY_UP=0
	fi
}
trap 'stop_standby; cleanup' EXIT

part() { [[ " $PARTS " == *" $1 "* ]]; }

# restart_primary PRELOAD: restart the primary with shared_preload_libraries = PRELOAD.
restart_primary() {
	as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -m fast -w stop >/dev/null
	STARTED=0
	sed -i "s/^shared_preload_libraries = .*/shared_preload_libraries = '$1'/" "$PGDATA_DIR/postgresql.conf"
	as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -l "$LOG" -w -t 60 start >/dev/null || die "primary did not start"
	STARTED=1
}

# make_standby: a new standby of the primary, streaming and caught up.
make_standby() {
	stop_standby
	rm -rf "$STANDBY_DIR"
	as_pg "$BINDIR/pg_basebackup" -h "$DIR" -p "$PORT" -D "$STANDBY_DIR" -R -X stream -c fast >/dev/null ||
		die "pg_basebackup failed"
	sed -i "s/^port = .*/port = $SPORT/" "$STANDBY_DIR/postgresql.conf"
	as_pg "$BINDIR/pg_ctl" -D "$STANDBY_DIR" -l "$DIR/standby.log" -w -t 60 start >/dev/null ||
		die "standby did not start"
	STANDBY_UP=1
	wait_caught_up
}

wait_caught_up() {
	local lsn
	lsn=$(sql "SELECT pg_current_wal_lsn()")
	for _ in $(seq 600); do
		[ "$(ssql "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && return 0
		sleep 0.1
	done
	die "the standby did not catch up"
}

print_machine
init_cluster "synchronous_commit = on
wal_level = replica
max_wal_senders = 5
wal_keep_size = '256MB'"
start_cluster
cat >>"$PGDATA_DIR/pg_hba.conf" <<EOF
local replication all trust
EOF
as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" reload >/dev/null
sql "CREATE EXTENSION idgen;
     CREATE TABLE t_serial (id bigserial PRIMARY KEY, v int);
     CREATE TABLE t_snow (id bigint PRIMARY KEY DEFAULT idgen_snowflake(), v int);
     CREATE SEQUENCE s" >/dev/null
make_standby
echo "standby: pg_basebackup -R of the primary, port $SPORT, idgen preloaded"

# --- Part A ------------------------------------------------------------------

if part A; then
	section "Part A: WAL written by an idle primary, 2 x 2 windows of $IDLE_S s"
	# A window starts after a CHECKPOINT and a few seconds of quiet, so that
	# what a restart or an earlier part leaves (a checkpoint record, the
	# bgwriter's running-xacts snapshot) falls outside it; the two
	# configurations alternate (without, with, with, without) and the
	# quietest window of each is reported: anything else the server does
	# (autovacuum of the tables just created, say) only adds WAL.
	wal_per_hour() {
		local a b
		sql "CHECKPOINT" >/dev/null
		sleep 5
		a=$(sql "SELECT pg_current_wal_lsn()")
		sleep "$IDLE_S"
		b=$(sql "SELECT pg_current_wal_lsn()")
		sql "SELECT round(pg_wal_lsn_diff('$b', '$a') * 3600 / $IDLE_S)"
	}
	: >"$DIR/a_without"; : >"$DIR/a_with"
	for preload in '' idgen idgen ''; do
		restart_primary "$preload"
		w=$(wal_per_hour)
		if [ -z "$preload" ]; then echo "$w" >>"$DIR/a_without"; else echo "$w" >>"$DIR/a_with"; fi
		printf '%-28s %14s bytes/hour\n' "${preload:-no idgen}, one window" "$(fmt_int "$w")"
	done
	without=$(sort -n "$DIR/a_without" | head -n 1)
	with=$(sort -n "$DIR/a_with" | head -n 1)
	echo
	printf '%-28s %14s bytes/hour\n' "without idgen (quietest)" "$(fmt_int "$without")"
	printf '%-28s %14s bytes/hour\n' "with idgen (quietest)" "$(fmt_int "$with")"
	printf '%-28s %14s bytes/hour (%s KiB/hour)\n' "added by the horizon" "$(fmt_int $((with - without)))" \
		"$(fmt_int $(((with - without) / 1024)))"
fi

# --- Part B ------------------------------------------------------------------

if part B; then
	section "Part B: INSERT tps, synchronous standby, $CLIENTS clients, $T s per run"
	sql "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
	sql "SELECT pg_reload_conf()" >/dev/null
	echo "INSERT INTO t_serial (v) VALUES (1);" >"$DIR/serial.sql"
	echo "INSERT INTO t_snow (v) VALUES (1);" >"$DIR/snow.sql"
	chmod 644 "$DIR"/*.sql
	run_pgbench() {
		sql "TRUNCATE t_serial, t_snow; CHECKPOINT" >/dev/null
		as_pg "$BINDIR/pgbench" -h "$DIR" -p "$PORT" -n -c "$CLIENTS" -j "$CLIENTS" -T "$T" -f "$DIR/$1.sql" bench 2>/dev/null |
			sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
	}
	: >"$DIR/b_serial_plain"; : >"$DIR/b_serial_idgen"; : >"$DIR/b_snow_idgen"
	for r in $(seq "$ROUNDS"); do
		restart_primary ''
		[ "$(sql "SELECT sync_state FROM pg_stat_replication" | head -n 1)" = sync ] || sleep 1
		a=$(run_pgbench serial)
		restart_primary idgen
		[ "$(sql "SELECT sync_state FROM pg_stat_replication" | head -n 1)" = sync ] || sleep 1
		b=$(run_pgbench serial)
		c=$(run_pgbench snow)
		[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] || die "pgbench failed"
		echo "$a" >>"$DIR/b_serial_plain"; echo "$b" >>"$DIR/b_serial_idgen"; echo "$c" >>"$DIR/b_snow_idgen"
		printf 'round %d: serial, no idgen %10s   serial, idgen %10s   snowflake, idgen %10s tps\n' \
			"$r" "$(fmt_int "$a")" "$(fmt_int "$b")" "$(fmt_int "$c")"
	done
	ma=$(median <"$DIR/b_serial_plain"); mb=$(median <"$DIR/b_serial_idgen"); mc=$(median <"$DIR/b_snow_idgen")
	echo
	printf '%-20s %10s tps\n' "serial, no idgen" "$(fmt_int "$ma")"
	printf '%-20s %10s tps   %.3fx\n' "serial, idgen" "$(fmt_int "$mb")" "$(awk -v x="$mb" -v y="$ma" 'BEGIN { print x / y }')"
	printf '%-20s %10s tps   %.3fx\n' "snowflake, idgen" "$(fmt_int "$mc")" "$(awk -v x="$mc" -v y="$ma" 'BEGIN { print x / y }')"
	sql "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
	sql "SELECT pg_reload_conf()" >/dev/null
fi

# --- Part C ------------------------------------------------------------------

if part C; then
	section "Part C: failover, ms from pg_ctl promote (clocks in agreement)"
	now_ms() { date +%s%3N; }
	# poll FILE QUERY: a psql session on the standby running QUERY every
	# 0.5 ms or so; stamps (epoch ms) of its successful rows go to FILE.
	poll() {
		local n
		for n in $(seq 20000); do
			echo "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, $2;"
			echo "SELECT pg_sleep(0.0005);"
		done >"$DIR/poll.$1.sql"
		chmod 644 "$DIR/poll.$1.sql"
		as_pg "$BINDIR/psql" -X -q -At -h "$DIR" -p "$SPORT" -d bench -f "$DIR/poll.$1.sql" >"$DIR/$1.out" 2>/dev/null &
	}
	: >"$DIR/c_promote"; : >"$DIR/c_id"; : >"$DIR/c_nextval"; : >"$DIR/c_added"
	for r in $(seq "$FAILOVERS"); do
		sql "SELECT idgen_snowflake() FROM generate_series(1, 1000)" >/dev/null
		wait_caught_up
		as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -m immediate -w stop >/dev/null
		STARTED=0
		: >"$DIR/id.out"; : >"$DIR/nv.out"; chown "$RUN_USER" "$DIR"/*.out 2>/dev/null || true
		poll id "idgen_snowflake()"
		pid_id=$!
		poll nv "nextval('s')"
		pid_nv=$!
		sleep 0.3
		t0=$(now_ms)
		as_pg "$BINDIR/pg_ctl" -D "$STANDBY_DIR" -w promote >/dev/null || die "promote failed"
		t1=$(now_ms)
		for _ in $(seq 200); do
			grep -q '|' "$DIR/id.out" && grep -q '|' "$DIR/nv.out" && break
			sleep 0.05
		done
		kill "$pid_id" "$pid_nv" 2>/dev/null || true
		wait "$pid_id" "$pid_nv" 2>/dev/null || true
		first_id=$(grep -m 1 '|' "$DIR/id.out" | cut -d'|' -f1)
		first_nv=$(grep -m 1 '|' "$DIR/nv.out" | cut -d'|' -f1)
		[ -n "$first_id" ] && [ -n "$first_nv" ] || die "no ID or nextval() after the promotion"
		echo $((t1 - t0)) >>"$DIR/c_promote"
		echo $((first_id - t0)) >>"$DIR/c_id"
		echo $((first_nv - t0)) >>"$DIR/c_nextval"
		echo $((first_id - first_nv)) >>"$DIR/c_added"
		printf 'failover %d: promote returned %5d   first ID %5d   first nextval() %5d   ID - nextval %5d\n' \
			"$r" $((t1 - t0)) $((first_id - t0)) $((first_nv - t0)) $((first_id - first_nv))

		# The promoted standby becomes the primary; a new standby of it.
		as_pg "$BINDIR/pg_ctl" -D "$STANDBY_DIR" -m fast -w stop >/dev/null
		STANDBY_UP=0
		rm -rf "$PGDATA_DIR"
		mv "$STANDBY_DIR" "$PGDATA_DIR"
		rm -f "$PGDATA_DIR/standby.signal"
		sed -i "s/^port = .*/port = $PORT/; /^primary_conninfo/d" "$PGDATA_DIR/postgresql.conf" "$PGDATA_DIR/postgresql.auto.conf"
		as_pg "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -l "$LOG" -w -t 60 start >/dev/null || die "new primary did not start"
		STARTED=1
		make_standby
	done
	echo
	printf 'median over %d: promote returned %s ms, first ID %s ms, first nextval() %s ms, ID - nextval %s ms\n' \
		"$FAILOVERS" "$(median <"$DIR/c_promote")" "$(median <"$DIR/c_id")" \
		"$(median <"$DIR/c_nextval")" "$(median <"$DIR/c_added")"
fi
