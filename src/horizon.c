/*-------------------------------------------------------------------------
 *
 * horizon.c
 *	  The durable horizon and the keeper background worker.
 *
 * The horizon is an instant H such that no identifier whose millisecond
 * starts after H has ever been issued.  It lives in two places:
 *
 *	  $PGDATA/idgen.horizon   the durable copy, one line of text with a
 *	                          CRC-32C, replaced atomically (written to a
 *	                          temporary file, then durable_rename)
 *	  idgen_shared->horizon   the copy generators read; raised only after
 *	                          the same value is on disk
 *
 * so every identifier ever issued is at or below the horizon on disk.  On a
 * primary the keeper also writes each new horizon into WAL, and waits for
 * synchronous standbys, before generators may use it (horizon_wal.c).  The
 * file is written by the keeper and, in recovery, by redo of those records
 * (the startup process): both through idgen_horizon_persist, under
 * file_lock, which only ever raises it.  After
 * a restart or a crash, the shared-memory startup hook reads the file and
 * starts every generator word just above it (idgen_horizon_start_tick), so
 * no identifier can repeat whatever the clock says; a clock behind the
 * horizon then makes generation wait or fail with the clock-back error, as
 * at run time.
 *
 * In recovery the keeper persists horizons only on a standby with an
 * identity of its own, which generates (redo writes the replayed ones into
 * the file), and none of them is in WAL.  So it publishes them only while
 * this server may generate in recovery, and not at all once recovery has
 * ended: the end
 * of recovery (horizon_wal.c) lowers the published horizon to the highest
 * one replayed from WAL and sets recovery_ended, under file_lock, which
 * the keeper holds to publish; a round that began in recovery then
 * publishes nothing, and the next round writes a horizon into WAL first.
 * From the first ID after any end of recovery, every ID is at or below a
 * horizon in this server's WAL.
 *
 * When the keeper is asked to stop (a shutdown), it stops generation at
 * what has been issued and makes that the horizon, in the file and in WAL
 * (keeper_fence): a standby promoted after a clean shutdown then starts
 * just above the last ID, not a lead ahead of it, and a restart starts
 * there too.
 *
 * The keeper wakes every idgen.horizon_interval.  Generators may run up
 * to idgen.max_drift ahead of the clock, so when the horizon is less than
 * max_drift_ms + horizon_lead_ms / 2 ahead of the clock, the keeper persists
 * now + max_drift_ms + horizon_lead_ms: about two writes a second with the
 * defaults, while the horizon stays at least lead/2 - interval = 400 ms
 * beyond anything a generator may issue.  After a takeover generators run
 * ahead of a takeover point instead of the clock (clock.c); while that is
 * at most horizon_lead ahead of the clock, the horizon still goes no
 * further than now + max_drift_ms + horizon_lead_ms, so that no horizon
 * in WAL is more than that ahead of its writer's clock: a successor that
 * starts above it then starts no further ahead either, and leads do not
 * add up over takeovers (horizon_wal.c, end of recovery).  The margin
 * beyond the generators is then smaller, lead minus the point's lead,
 * which is back to lead/2 one horizon_lead after the takeover; the keeper
 * renews every round meanwhile.
 *
 * The file also records when it was written, by this server's clock.  At
 * start, a horizon ahead of the clock that has not gone back since is
 * taken over like a promoted standby's (shmem.c, clock.c): generators
 * continue above it at once and return to the clock at half speed.  A
 * clock that went back makes them wait for it, at most
 * idgen.horizon_lead plus the step, or fail with the clock-back error.
 * A generator that reaches the horizon because the keeper is late nudges
 * the keeper's latch and waits, within idgen.clock_wait, then fails.
 *
 * A missing or corrupt file is not fatal: the server starts, logs a
 * WARNING that the durable horizon was lost, and generators start from the
 * wall clock.  A data directory that never had a horizon (its first start
 * with idgen) lost nothing: that is a LOG.  The two are told apart by
 * $PGDATA/idgen.horizon.seen, an empty file made durable before the first
 * horizon is written in a data directory and never removed: a missing
 * horizon file beside it was lost.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "port/pg_crc32c.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_shmem.h"
#include "idgen_horizon.h"
#include "idgen_bgworker.h"

#define HORIZON_FILE		"idgen.horizon"
#define HORIZON_TMP_FILE	"idgen.horizon.tmp"
#define HORIZON_SEEN_FILE	"idgen.horizon.seen"
#define HORIZON_MAGIC_1		"idgen horizon 1"
#define HORIZON_MAGIC		"idgen horizon 2"

PGDLLEXPORT void idgen_keeper_main(Datum main_arg);

/* Settings */
int			idgen_horizon_lead_ms = 1000;
int			idgen_horizon_interval_ms = 100;

/* ----------
 * The file: "idgen horizon 2 <horizon> <written at> <crc>\n", both times in
 * microseconds since 2000 ('written at' by this server's clock), the
 * CRC-32C taken over everything before the last space.  Version 1, without
 * 'written at', is still read.
 * ----------
 */
static pg_crc32c
horizon_crc(const char *text, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, text, len);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Read the durable horizon, and the time it was written (0 if the file
 * does not say).  Returns false, with the reason in 'why', if the file is
 * missing or not exactly what horizon_write writes.  Never throws: it runs
 * in the postmaster.
 */
bool
idgen_horizon_read(TimestampTz *horizon, TimestampTz *written_at, char *why, size_t whylen)
{
	char		buf[128];
	char		body[96];
	int			fd;
	ssize_t		n;
	long long	value;
	long long	written = 0;
	unsigned int crc;
	int			bodylen;
	char		tail;

	fd = OpenTransientFile(HORIZON_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		snprintf(why, whylen, "The file \"%s\" could not be opened: %s.",
				 HORIZON_FILE, strerror(errno));
		return false;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	CloseTransientFile(fd);
	if (n <= 0)
	{
		snprintf(why, whylen, "The file \"%s\" is empty or unreadable.", HORIZON_FILE);
		return false;
	}
	buf[n] = '\0';

	if (sscanf(buf, HORIZON_MAGIC " %lld %lld %8x%c", &value, &written, &crc, &tail) == 4 &&
		tail == '\n')
		bodylen = snprintf(body, sizeof(body), HORIZON_MAGIC " %lld %lld", value, written);
	else if (sscanf(buf, HORIZON_MAGIC_1 " %lld %8x%c", &value, &crc, &tail) == 3 &&
			 tail == '\n')
		bodylen = snprintf(body, sizeof(body), HORIZON_MAGIC_1 " %lld", value);
	else
		bodylen = -1;
	if (bodylen < 0 || (size_t) n != strlen(buf) || buf[n - 1] != '\n')
	{
		snprintf(why, whylen, "The file \"%s\" is corrupt (not in the expected format).",
				 HORIZON_FILE);
		return false;
	}
	if (bodylen >= (int) sizeof(body) || strncmp(buf, body, bodylen) != 0 ||
		horizon_crc(body, bodylen) != (pg_crc32c) crc)
	{
		snprintf(why, whylen, "The file \"%s\" is corrupt (checksum mismatch).", HORIZON_FILE);
		return false;
	}
	if (value <= 0 || !IS_VALID_TIMESTAMP((TimestampTz) value) ||
		written < 0 || !IS_VALID_TIMESTAMP((TimestampTz) written))
	{
		snprintf(why, whylen, "The file \"%s\" holds an impossible horizon.", HORIZON_FILE);
		return false;
	}
	*horizon = (TimestampTz) value;
	*written_at = (TimestampTz) written;
	return true;
}

/*
 * Whether this data directory ever had a horizon: its file, or the mark
 * made before the first one was written.  Never throws (the postmaster).
 */
bool
idgen_horizon_ever_made(void)
{
	struct stat st;

	return stat(HORIZON_FILE, &st) == 0 || stat(HORIZON_SEEN_FILE, &st) == 0;
}

/*
 * Make the mark that this data directory has had a horizon durable, once
 * per process, before a horizon is written: a horizon file that goes
 * missing afterwards was lost, not never made.  False (after logging at
 * 'elevel') if it could not be made; then no horizon is written either.
 */
static bool
mark_horizon_seen(int elevel)
{
	static bool marked = false;
	struct stat st;
	int			fd;

	if (marked)
		return true;
	if (stat(HORIZON_SEEN_FILE, &st) != 0)
	{
		fd = OpenTransientFile(HORIZON_SEEN_FILE, O_WRONLY | O_CREAT | PG_BINARY);
		if (fd < 0)
		{
			ereport(elevel,
					(errcode_for_file_access(),
					 errmsg("could not create file \"%s\": %m", HORIZON_SEEN_FILE)));
			return false;
		}
		if (CloseTransientFile(fd) != 0)
		{
			ereport(elevel,
					(errcode_for_file_access(),
					 errmsg("could not close file \"%s\": %m", HORIZON_SEEN_FILE)));
			return false;
		}
		if (fsync_fname_ext(HORIZON_SEEN_FILE, false, false, elevel) != 0 ||
			fsync_fname_ext(".", true, false, elevel) != 0)
			return false;
	}
	marked = true;
	return true;
}

/*
 * Make 'horizon' durable: write it to a temporary file and rename it over
 * the old file with durable_rename, which fsyncs the temporary file before
 * the rename and the file and its directory after it.  Returns false after
 * logging at 'elevel' if anything fails; the old file is then still in
 * place.
 */
static bool
horizon_write(TimestampTz horizon, int elevel)
{
	char		body[96];
	char		line[128];
	int			bodylen;
	int			len;
	int			fd;

	if (!mark_horizon_seen(elevel))
		return false;
	bodylen = snprintf(body, sizeof(body), HORIZON_MAGIC " %lld %lld",
					   (long long) horizon, (long long) GetCurrentTimestamp());
	len = snprintf(line, sizeof(line), "%s %08x\n", body,
				   (unsigned int) horizon_crc(body, bodylen));

	fd = OpenTransientFile(HORIZON_TMP_FILE, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", HORIZON_TMP_FILE)));
		return false;
	}
	errno = 0;
	if (write(fd, line, len) != len)
	{
		if (errno == 0)
			errno = ENOSPC;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", HORIZON_TMP_FILE)));
		CloseTransientFile(fd);
		return false;
	}
	if (CloseTransientFile(fd) != 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", HORIZON_TMP_FILE)));
		return false;
	}
	return durable_rename(HORIZON_TMP_FILE, HORIZON_FILE, elevel) == 0;
}

/*
 * Make the file hold at least 'horizon': write it unless the file already
 * has as much.  Keeper and redo may both call it; false (after logging at
 * 'elevel') if the write failed.
 */
bool
idgen_horizon_persist(TimestampTz horizon, int elevel)
{
	bool		ok = true;

	LWLockAcquire(idgen_shared->file_lock, LW_EXCLUSIVE);
	if (horizon > idgen_shared->file_horizon)
	{
		ok = horizon_write(horizon, elevel);
		if (ok)
			idgen_shared->file_horizon = horizon;
	}
	LWLockRelease(idgen_shared->file_lock);
	return ok;
}

/*
 * The first tick a generator may issue after the horizon was 'horizon':
 * the word is set so that its next tick starts the first millisecond (of
 * the generator's own epoch) that begins after 'horizon'.
 */
uint64
idgen_horizon_start_tick(TimestampTz horizon, TimestampTz epoch, int tick_bits)
{
	int64		ms;

	if (horizon < epoch)
		return 0;
	ms = (horizon - epoch) / 1000 + 1;	/* first ms starting after it */
	return ((uint64) ms << tick_bits) - 1;
}

/*
 * Let generators use 'horizon', which is durable, and in WAL if 'logged'
 * (see the file header).
 */
static void
publish(TimestampTz horizon, bool logged)
{
	LWLockAcquire(idgen_shared->file_lock, LW_EXCLUSIVE);
	if (logged || (!idgen_shared->recovery_ended && idgen_recovery_may_generate()))
	{
		/* Only now may generators use it. */
		pg_write_barrier();
		pg_atomic_write_u64(&idgen_shared->horizon.value, (uint64) horizon);
		idgen_shared->fenced = false;
	}
	LWLockRelease(idgen_shared->file_lock);
}

/* Record the outcome of a persist attempt for idgen_info(). */
static void
note_persist(bool ok, TimestampTz now)
{
	IdgenKeeperStatus *k = &idgen_shared->keeper;

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
 * One round of the keeper: notice clock steps, and renew the horizon if it
 * is less than half the lead ahead of the clock.
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

	/*
	 * Read the monotonic clock on both sides of the wall clock; a pair read
	 * across a preemption (the two monotonic readings far apart) would look
	 * like a step, so it is not compared.
	 */
	{
		instr_time	after;

		INSTR_TIME_SET_CURRENT(cur.mono);
		cur.wall = GetCurrentTimestamp();
		INSTR_TIME_SET_CURRENT(after);
		INSTR_TIME_SUBTRACT(after, cur.mono);
		cur.valid = INSTR_TIME_GET_MICROSEC(after) < CLOCK_STEP_REPORT_US / 4;
	}
	if (last->valid && cur.valid)
	{
		instr_time	mono_delta = cur.mono;
		int64		step_us;

		INSTR_TIME_SUBTRACT(mono_delta, last->mono);
		step_us = (cur.wall - last->wall) - (int64) INSTR_TIME_GET_MICROSEC(mono_delta);
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
	if (cur.valid)
		*last = cur;			/* else compare the next round with the last good pair */
	base = cur.wall;

	/*
	 * Generators run up to max_drift_ms ahead of the clock, or of the
	 * takeover point while that is within idgen.takeover_max_lead of it
	 * (clock.c), so the horizon is kept at least lead/2 beyond that, and
	 * renewed to lead beyond it.
	 *
	 * But never beyond clock + lead + max_drift while the point is at most
	 * lead ahead of the clock, which is all it ever is when clocks agree:
	 * a successor starts at or above a horizon it replayed, so a horizon
	 * further ahead would raise its lead, and every takeover would add to
	 * the next one's (see the file header).  Right after a takeover the
	 * margin is then less than lead/2; it comes back as the point slows
	 * down.  A point further ahead comes from a clock that was behind its
	 * last holder's; the horizon keeps its whole margin then.
	 */
	{
		TimestampTz takeover = idgen_takeover_point();

		if (takeover > cur.wall &&
			takeover - cur.wall <= (TimestampTz) idgen_takeover_max_lead_ms * 1000)
			base = takeover;
	}

	/*
	 * In recovery, only a server that may generate publishes a horizon
	 * (publish), so only it needs one in the file: redo writes the
	 * replayed ones.  This also keeps the keeper from renaming files in
	 * the data directory while the startup process fsyncs it at the start
	 * of crash or archive recovery, which would log that the temporary
	 * file has gone.
	 */
	if (!logged && !idgen_recovery_may_generate())
		return;

	if (horizon - base < lead_us / 2 + drift_us)
	{
		TimestampTz target = base - cur.wall > lead_us ?
			base + lead_us + drift_us : cur.wall + lead_us + drift_us;
		/* While writes keep failing, say why every 10 s, not every round. */
		bool		say = failing_since == 0 ||
			cur.wall - failing_logged >= 10 * USECS_PER_SEC;
		bool		ok;

		if (target <= horizon)
			return;				/* the clock has not moved since the last one */
		ok = idgen_horizon_persist(target, say ? LOG : DEBUG1);

		/* Into WAL, and to synchronous standbys, before anyone uses it. */
		if (ok && logged && !idgen_wal_log_horizon(target))
			return;				/* shutting down: the wait was cut short */

		if (!ok && say)
			failing_logged = cur.wall;
		if (!ok && failing_since == 0)
			failing_since = cur.wall;
		if (ok && failing_since != 0)
		{
			ereport(LOG,
					(errmsg("idgen keeper is writing the durable horizon again"),
					 errdetail("Writes failed for " INT64_FORMAT " ms.",
							   (cur.wall - failing_since) / 1000)));
			failing_since = 0;
		}
		note_persist(ok, cur.wall);
		if (ok)
			publish(target, logged);
	}
}

/*
 * At a request to stop: stop generation at what has been issued, and make
 * that the horizon, in the file and in WAL (see the file header).
 *
 * The keeper lowers the published horizon to the bound of the IDs issued,
 * then reads the generator words again.  A generator reads the horizon
 * again after its compare-and-swap (clock.c).  Both sides have a full
 * barrier between their write and their read, so for any tick either the
 * keeper's second reading counts it or the generator sees the lowered
 * horizon and gives the tick to nobody: no ID returned is later than the
 * bound.  Until the keeper publishes again (it is started again unless the
 * server is shutting down), generators wait and fail with a message that
 * says why.  Not in recovery: nothing could be written into WAL.
 */
static void
keeper_fence(void)
{
	TimestampTz bound;

	if (RecoveryInProgress())
		return;

	bound = idgen_issued_bound(true);
	LWLockAcquire(idgen_shared->file_lock, LW_EXCLUSIVE);
	idgen_shared->fenced = true;
	pg_atomic_write_u64(&idgen_shared->horizon.value, (uint64) bound);
	pg_memory_barrier();
	bound = Max(bound, idgen_issued_bound(true));

	/* The file may go down to it: nothing above it can be issued now. */
	if (bound < idgen_shared->file_horizon && horizon_write(bound, LOG))
		idgen_shared->file_horizon = bound;
	LWLockRelease(idgen_shared->file_lock);

	idgen_wal_log_stop(bound);
	ereport(DEBUG1,
			(errmsg_internal("idgen keeper stopped generation at %s", timestamptz_to_str(bound))));
}

/*
 * SIGTERM: stop after this round.  ProcDiePending also ends a wait for
 * synchronous standbys (SyncRepWaitForLSN checks it), which could otherwise
 * last for ever and hold up the shutdown.
 */
static void
keeper_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	ShutdownRequestPending = true;
	ProcDiePending = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

/* On any exit, forget the keeper's pid and latch (its PGPROC is reused). */
static void
keeper_exit(int code, Datum arg)
{
	IdgenKeeperStatus *k = &idgen_shared->keeper;

	SpinLockAcquire(&k->mutex);
	k->pid = 0;
	k->latch = NULL;
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
	if (idgen_shared->takeover_cause == IDGEN_TAKEOVER_RESTART)
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
 * Main entry point of the keeper background worker.
 */
void
idgen_keeper_main(Datum main_arg)
{
	IdgenKeeperStatus *k;
	ClockPair	last = {0};
	TimestampTz horizon;
	bool		start_lead_pending = true;
	MemoryContext round_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, keeper_sigterm);
	BackgroundWorkerUnblockSignals();

	/*
	 * A horizon is published only once synchronous standbys have it,
	 * whatever synchronous_commit the server's configuration gives.
	 */
	SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);

	k = &idgen_shared->keeper;
	on_shmem_exit(keeper_exit, (Datum) 0);
	SpinLockAcquire(&k->mutex);
	k->pid = MyProcPid;
	k->latch = MyLatch;
	SpinLockRelease(&k->mutex);

	horizon = (TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value);
	ereport(LOG,
			(errmsg("idgen keeper started"),
			 errdetail("The durable horizon is %s; it is kept %d ms ahead of the clock, checked every %d ms.",
					   horizon != 0 ? timestamptz_to_str(horizon) : "not set",
					   idgen_horizon_lead_ms, idgen_horizon_interval_ms)));

	round_context = AllocSetContextCreate(TopMemoryContext, "idgen keeper",
										  ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/*
		 * Once out of recovery: the end of recovery records its takeover
		 * (lifted_at) before RecoveryInProgress() turns false.
		 */
		if (start_lead_pending && !RecoveryInProgress())
		{
			bool		took_over;

			SpinLockAcquire(&idgen_shared->replay.mutex);
			took_over = idgen_shared->replay.lifted_at != 0;
			SpinLockRelease(&idgen_shared->replay.mutex);
			start_lead_pending = false;
			if (!took_over)
				log_start_lead(horizon);
		}

		old = MemoryContextSwitchTo(round_context);
		keeper_round(&last);
		MemoryContextSwitchTo(old);
		MemoryContextReset(round_context);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 idgen_horizon_interval_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	keeper_fence();

	/*
	 * Exit code 1: the postmaster restarts the worker after
	 * bgw_restart_time (it does not during a shutdown).  Exit code 0 would
	 * unregister it for good, and generation would stop.
	 */
	proc_exit(1);
}

/*
 * Ask the keeper to run a round now (a generator is waiting for it).
 */
void
idgen_keeper_wake(void)
{
	IdgenKeeperStatus *k = &idgen_shared->keeper;
	Latch	   *latch;

	SpinLockAcquire(&k->mutex);
	latch = k->latch;
	SpinLockRelease(&k->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * Define the horizon's settings; when preloading, register the WAL resource
 * manager and the keeper.
 */
void
idgen_horizon_init(void)
{
	DefineCustomIntVariable("idgen.horizon_lead",
							"Sets how far beyond what generators may issue the keeper makes the durable horizon.",
							"Generators may issue up to \"idgen.max_drift\" ahead of the clock; the keeper "
							"renews the horizon when less than half of this lead is left beyond that. "
							"A restart whose clock went back waits for it up to this much plus the step.",
							&idgen_horizon_lead_ms, 1000, 100, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.horizon_interval",
							"Sets how often the keeper checks the durable horizon.",
							NULL,
							&idgen_horizon_interval_ms, 100, 10, 10 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	if (!process_shared_preload_libraries_in_progress)
		return;
	idgen_wal_register();
	idgen_register_worker("idgen keeper", "idgen_keeper_main", BGWORKER_SHMEM_ACCESS,
						  BgWorkerStart_PostmasterStart, 1);
}
