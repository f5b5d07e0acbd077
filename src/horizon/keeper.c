/*-------------------------------------------------------------------------
 *
 * keeper.c
 *	  The "idgen keeper" process: keeps the durable horizon (horizon.c)
 *	  ahead of what generators may issue, in the file and in WAL
 *	  (horizon_wal.c), and stops generation at what was issued when it is
 *	  asked to stop.
 *
 * The keeper wakes every idgen.horizon_interval.  Generators may run up
 * to idgen.max_drift ahead of the clock, so when the horizon is less than
 * max_drift_ms + horizon_lead_ms / 2 ahead of the clock, the keeper persists
 * now + max_drift_ms + horizon_lead_ms: about two writes a second with the
 * defaults, while the horizon stays at least lead/2 - interval = 400 ms
 * beyond anything a generator may issue.  After a takeover generators run
 * ahead of a takeover point instead of the clock (clock.c,
 * idgen_generators_now); while that is at most horizon_lead ahead of the
 * clock, the horizon still goes no further than now + max_drift_ms +
 * horizon_lead_ms, so that no horizon in WAL is more than that ahead of
 * its writer's clock: a successor that starts above it then starts no
 * further ahead either, and leads do not add up over takeovers
 * (horizon_wal.c, end of recovery).  The margin beyond the generators is
 * then smaller, lead minus the point's lead, which is back to lead/2 one
 * horizon_lead after the takeover; the keeper renews every round meanwhile.
 * A generator that reaches the horizon because the keeper is late sets the
 * keeper's latch (published in the core segment, keeper_latch) and waits,
 * within idgen.clock_wait, then fails.
 *
 * In recovery the keeper persists horizons only on a standby with an
 * identity of its own, which generates (redo writes the replayed ones into
 * the file), and none of them is in WAL.  So it publishes them only while
 * this server may generate in recovery, and not at all once recovery has
 * ended: the end of recovery (horizon_wal.c) lowers the published horizon
 * to the highest one replayed from WAL and sets recovery_ended, under
 * file_lock, which the keeper holds to publish; a round that began in
 * recovery then publishes nothing, and the next round writes a horizon
 * into WAL first.  From the first ID after any end of recovery, every ID
 * is at or below a horizon in this server's WAL.
 *
 * When the keeper is asked to stop (a shutdown), it stops generation at
 * what has been issued and makes that the horizon, in the file
 * (idgen_horizon_fence) and in WAL: a standby promoted after a clean
 * shutdown then starts just above the last ID, not a lead ahead of it, and
 * a restart starts there too.
 *
 * Its state for idgen_info() is the horizon area's 'keeper', under its
 * mutex (horizon.c states the area's protocol).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_bgworker.h"
#include "idgen_clock.h"
#include "idgen_shmem.h"
#include "idgen_horizon.h"

PGDLLEXPORT void idgen_keeper_main(Datum main_arg);

/*
 * Let generators use 'horizon', which is durable, and in WAL if 'logged'
 * (see the file header).
 */
static void
publish(TimestampTz horizon, bool logged)
{
	IdgenHorizonShared *h = idgen_horizon_shared;

	LWLockAcquire(h->file_lock, LW_EXCLUSIVE);
	/* Durable before generators may use it: the file has at least as much. */
	Assert(horizon <= h->file_horizon);
	if (logged || (!h->recovery_ended && idgen_recovery_may_generate()))
	{
		/* Only now may generators use it. */
		pg_write_barrier();
		pg_atomic_write_u64(&idgen_shared->horizon.value, (uint64) horizon);
		idgen_shared->fenced = false;
	}
	LWLockRelease(h->file_lock);
}

/* Record the outcome of a persist attempt for idgen_info(). */
static void
note_persist(bool ok, TimestampTz now)
{
	IdgenKeeperStatus *k = &idgen_horizon_shared->keeper;

	SpinLockAcquire(&k->mutex);
	if (ok)
	{
		k->persists++;
		k->last_persist = now;
	}
	else
	{
		k->failures++;
		k->last_failure = now;
	}
	SpinLockRelease(&k->mutex);
}

/*
 * A wall-clock reading paired with a monotonic one: the wall clock stepped
 * when the two advance by different amounts between rounds.
 */
typedef struct ClockPair
{
	TimestampTz wall;
	instr_time	mono;
	bool		valid;
} ClockPair;

/* Since when persisting has failed, and when that was last logged. */
static TimestampTz failing_since = 0;
static TimestampTz failing_logged = 0;

/* Steps smaller than this are not reported (reading jitter). */
#define CLOCK_STEP_REPORT_US	2000

/*
 * Read the clocks into 'cur', and say so in the log when the wall clock
 * stepped since 'last', the last good pair (then replaced by 'cur').
 * 'horizon' is the durable horizon, for the message.
 */
static void
note_clock_step(ClockPair *last, ClockPair *cur, TimestampTz horizon)
{
	/*
	 * Read the monotonic clock on both sides of the wall clock; a pair read
	 * across a preemption (the two monotonic readings far apart) would look
	 * like a step, so it is not compared.
	 */
	instr_time	after;

	INSTR_TIME_SET_CURRENT(cur->mono);
	cur->wall = GetCurrentTimestamp();
	INSTR_TIME_SET_CURRENT(after);
	INSTR_TIME_SUBTRACT(after, cur->mono);
	cur->valid = INSTR_TIME_GET_MICROSEC(after) < CLOCK_STEP_REPORT_US / 4;
	if (last->valid && cur->valid)
	{
		instr_time	mono_delta = cur->mono;
		int64		step_us;

		INSTR_TIME_SUBTRACT(mono_delta, last->mono);
		step_us = (cur->wall - last->wall) - (int64) INSTR_TIME_GET_MICROSEC(mono_delta);
		if (step_us <= -CLOCK_STEP_REPORT_US)
			ereport(LOG,
					(errmsg("idgen keeper detected that the system clock moved backwards by " INT64_FORMAT " ms",
							-step_us / 1000),
					 errdetail("The durable horizon stays at %s; generators continue, wait or fail as the clock policy says.",
							   timestamptz_to_str(horizon))));
		else if (step_us >= CLOCK_STEP_REPORT_US)
			ereport(LOG,
					(errmsg("idgen keeper detected that the system clock moved forwards by " INT64_FORMAT " ms",
							step_us / 1000)));
	}
	if (cur->valid)
		*last = *cur;			/* else compare the next round with the last
								 * good pair */
}

/*
 * Make 'target' the horizon: in the file, then (if 'logged') in WAL and on
 * synchronous standbys, then for generators.  Failures are logged every
 * 10 s while they last, not every round.
 */
static void
renew(TimestampTz target, bool logged, TimestampTz wall)
{
	bool		say = failing_since == 0 || wall - failing_logged >= 10 * USECS_PER_SEC;
	bool		ok = idgen_horizon_persist(target, say ? LOG : DEBUG1);

	/* Into WAL, and to synchronous standbys, before anyone uses it. */
	if (ok && logged && !idgen_wal_log_horizon(target))
		return;					/* shutting down: the wait was cut short */

	if (!ok && say)
		failing_logged = wall;
	if (!ok && failing_since == 0)
		failing_since = wall;
	if (ok && failing_since != 0)
	{
		ereport(LOG,
				(errmsg("idgen keeper is writing the durable horizon again"),
				 errdetail("Writes failed for " INT64_FORMAT " ms.",
						   (wall - failing_since) / 1000)));
		failing_since = 0;
	}
	note_persist(ok, wall);
	if (ok)
		publish(target, logged);
}

/*
 * One round of the keeper: notice clock steps, and renew the horizon if it
 * is less than half the lead ahead of what generators go by.
 */
static void
keeper_round(ClockPair *last)
{
	ClockPair	cur;
	TimestampTz horizon = (TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value);

	/* Read first: a round that began in recovery writes nothing into WAL. */
	bool		logged = !RecoveryInProgress();
	int64		lead_us = (int64) idgen_horizon_lead_ms * 1000;
	int64		drift_us = (int64) idgen_max_drift_ms * 1000;
	TimestampTz base;			/* what generators may run ahead of */
	TimestampTz target;

	note_clock_step(last, &cur, horizon);

	/*
	 * Generators run up to max_drift_ms ahead of the time they go by: the
	 * clock, or the takeover point while that is within
	 * idgen.takeover_max_lead of it (clock.c), so the horizon is kept at
	 * least lead/2 beyond that, and renewed to lead beyond it.
	 *
	 * But never beyond clock + lead + max_drift while the point is at most
	 * lead ahead of the clock, which is all it ever is when clocks agree: a
	 * successor starts at or above a horizon it replayed, so a horizon
	 * further ahead would raise its lead, and every takeover would add to the
	 * next one's (see the file header).  Right after a takeover the margin is
	 * then less than lead/2; it comes back as the point slows down.  A point
	 * further ahead comes from a clock that was behind its last holder's; the
	 * horizon keeps its whole margin then.
	 */
	base = idgen_generators_now(cur.wall);
	Assert(base >= cur.wall);

	/*
	 * In recovery, only a server that may generate publishes a horizon
	 * (publish), so only it needs one in the file: redo writes the replayed
	 * ones.  This also keeps the keeper from renaming files in the data
	 * directory while the startup process fsyncs it at the start of crash or
	 * archive recovery, which would log that the temporary file has gone.
	 */
	if (!logged && !idgen_recovery_may_generate())
		return;
	if (horizon - base >= lead_us / 2 + drift_us)
		return;
	target = base - cur.wall > lead_us ?
		base + lead_us + drift_us : cur.wall + lead_us + drift_us;
	if (target <= horizon)
		return;					/* the clock has not moved since the last one */
	renew(target, logged, cur.wall);
}

/* On any exit, forget the keeper's pid and latch (its PGPROC is reused). */
static void
keeper_exit(int code, Datum arg)
{
	IdgenKeeperStatus *k = &idgen_horizon_shared->keeper;

	pg_atomic_write_u64(&idgen_shared->keeper_latch, 0);
	SpinLockAcquire(&k->mutex);
	k->pid = 0;
	SpinLockRelease(&k->mutex);
}

/*
 * At start, say so when the horizon is further ahead of the clock than the
 * keeper keeps it.  Called once the server is out of recovery, and only if
 * the end of recovery took nothing over: after crash recovery, a promotion
 * or point-in-time recovery that replayed idgen's records, what generators
 * start from comes from WAL, and the end of recovery says so itself
 * (horizon_wal.c); a line from here would contradict it.
 */
static void
log_start_lead(TimestampTz horizon)
{
	int64		lead_ms = (horizon - GetCurrentTimestamp()) / 1000;

	if (lead_ms <= idgen_horizon_lead_ms)
		return;
	if (idgen_shared->takeover_cause == (int) IDGEN_TAKEOVER_RESTART)
		ereport(LOG,
				(errmsg("idgen generators continue above the durable horizon, " INT64_FORMAT " ms ahead of this server's clock",
						lead_ms),
				 errdetail("The IDs issued before the restart ran ahead of this clock, which has not gone back since; generation continues above them and returns to the clock at half speed.")));
	else
		ereport(LOG,
				(errmsg("the system clock is " INT64_FORMAT " ms behind the idgen durable horizon",
						lead_ms),
				 errdetail("No identifier issued before the restart is beyond %s; generators wait or fail until the clock is within \"idgen.max_drift\" of it.",
						   timestamptz_to_str(horizon))));
}

/*
 * Once the server is out of recovery: say so when the horizon it started
 * from is further ahead of the clock than the keeper keeps it, unless the
 * end of recovery took something over (it records its takeover, lifted_at,
 * before RecoveryInProgress() turns false, and says so itself).  True once
 * done.
 */
static bool
start_lead_logged(TimestampTz horizon)
{
	IdgenReplayStatus *r = &idgen_horizon_shared->replay;
	bool		took_over;

	if (RecoveryInProgress())
		return false;
	SpinLockAcquire(&r->mutex);
	took_over = r->lifted_at != 0;
	SpinLockRelease(&r->mutex);
	if (!took_over)
		log_start_lead(horizon);
	return true;
}

/* Publish this process's pid and latch, and say it started. */
static void
keeper_start(void)
{
	IdgenKeeperStatus *k = &idgen_horizon_shared->keeper;
	TimestampTz horizon = (TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value);

	on_shmem_exit(keeper_exit, (Datum) 0);
	SpinLockAcquire(&k->mutex);
	k->pid = MyProcPid;
	SpinLockRelease(&k->mutex);
	pg_atomic_write_u64(&idgen_shared->keeper_latch, (uint64) (uintptr_t) MyLatch);

	ereport(LOG,
			(errmsg("idgen keeper started"),
			 errdetail("The durable horizon is %s; it is kept %d ms ahead of the clock, checked every %d ms.",
					   horizon != 0 ? timestamptz_to_str(horizon) : "not set",
					   idgen_horizon_lead_ms, idgen_horizon_interval_ms)));
}

/*
 * Main entry point of the keeper process.
 */
void
idgen_keeper_main(Datum main_arg)
{
	ClockPair	last = {0};
	TimestampTz horizon = (TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value);
	bool		start_lead_pending = true;
	MemoryContext round_context;

	/*
	 * SIGTERM ends it after a round, with the stop record written: it holds
	 * interrupts for good (bgworker.c), and its wait for synchronous standbys
	 * ends at ProcDiePending, which SIGTERM sets.
	 */
	HOLD_INTERRUPTS();
	idgen_bgworker_signals();

	/*
	 * A horizon is published only once synchronous standbys have it, whatever
	 * synchronous_commit the server's configuration gives.
	 */
	SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
	keeper_start();

	round_context = AllocSetContextCreate(TopMemoryContext, "idgen keeper",
										  ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContext old;

		if (idgen_bgworker_stopping())
			break;
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (start_lead_pending && start_lead_logged(horizon))
			start_lead_pending = false;

		old = MemoryContextSwitchTo(round_context);
		keeper_round(&last);
		MemoryContextSwitchTo(old);
		MemoryContextReset(round_context);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 idgen_horizon_interval_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	/* Stop generation at what was issued (not in recovery: no WAL then). */
	if (!RecoveryInProgress())
	{
		TimestampTz bound = idgen_horizon_fence();

		idgen_wal_log_stop(bound);
		ereport(DEBUG1,
				(errmsg_internal("idgen keeper stopped generation at %s", timestamptz_to_str(bound))));
	}

	/*
	 * Exit code 1: the postmaster restarts the process after bgw_restart_time
	 * (it does not during a shutdown).  Exit code 0 would unregister it for
	 * good, and generation would stop.
	 */
	proc_exit(1);
}

/* When preloading, register the keeper process. */
void
idgen_keeper_init(void)
{
	if (process_shared_preload_libraries_in_progress)
		idgen_register_process("idgen keeper", "idgen_keeper_main", BGWORKER_SHMEM_ACCESS,
							   BgWorkerStart_PostmasterStart, 1);
}
