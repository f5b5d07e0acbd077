/*-------------------------------------------------------------------------
 *
 * horizon_wal.c
 *	  The durable horizon in WAL: how it reaches physical standbys, what a
 *	  standby may generate, and where generators start after a promotion.
 *
 * Why WAL
 *	  The horizon file (horizon.c) bounds what one server has issued, but it
 *	  is not replicated: a standby promoted after its primary died knows
 *	  nothing of the IDs the primary issued, and with its clock behind the
 *	  primary's it issues them again.  So the keeper also writes every new
 *	  horizon into WAL, as a record of idgen's own resource manager
 *	  (RegisterCustomRmgr, PostgreSQL 15), before generators may use it:
 *
 *	    write the file (fsync) -> XLogInsert -> XLogFlush
 *	      -> SyncRepWaitForLSN (when synchronous_standby_names is set)
 *	      -> publish the horizon to generators (idgen_shared->horizon)
 *
 *	  So every ID a primary issued lies at or below a horizon that is in its
 *	  WAL, and, with synchronous replication, flushed on a synchronous
 *	  standby.  The keeper waits for the synchronous standby whatever the
 *	  server's synchronous_commit says (it sets its own to "on"), so "a
 *	  synchronous standby has it" holds as long as synchronous_standby_names
 *	  names the standby that is promoted.  With asynchronous replication a
 *	  standby lags: it has every horizon written at least its replay lag
 *	  ago, and horizons run idgen.horizon_lead / 2 or more ahead of what
 *	  generators may issue, so a lag up to that (less
 *	  idgen.horizon_interval) is covered whatever the clocks say.
 *
 *	  A table row committed by the keeper was the other design.  It needs a
 *	  database connection and a transaction per renewal, it can be read on a
 *	  standby only through a snapshot (not by the startup process at the
 *	  moment recovery ends), and a user with rights on the table could move
 *	  it.  The resource manager's redo runs in the startup process itself,
 *	  before recovery ends, and no SQL can touch it.  The price: a server
 *	  that replays idgen records must have idgen in shared_preload_libraries
 *	  (the startup process stops with "resource manager with ID 147 not
 *	  registered" and a hint saying so; nothing is replayed wrongly), and the
 *	  resource manager id must be unique among the server's extensions.
 *	  Records are marked XLOG_MARK_UNIMPORTANT, so an idle server's horizon
 *	  renewals do not cause checkpoints or archive_timeout segment switches.
 *
 * Two records
 *	  HORIZON: a new durable horizon, written before generators may use it.
 *	  STOP: the keeper stopped generation (a shutdown, keeper.c): the
 *	  bound of every ID issued, usually below the last HORIZON.  Without
 *	  it a standby promoted after a clean switchover would start at its
 *	  old primary's horizon, a lead ahead of the clock, and the next
 *	  switchover a lead further: leads would add up.
 *
 * Redo (startup process, on a standby, in archive recovery and in crash
 *	  recovery)
 *	  raises the horizon file to the record's horizon (horizon.c, under the
 *	  file lock, fsynced: a restartpoint may then drop the record), and
 *	  records in shared memory the horizon that bounds the writer's IDs
 *	  (the highest replayed since its last STOP, or that STOP's bound) and
 *	  the Snowflake identity of the server that wrote it.
 *
 * End of recovery (rm_cleanup, startup process, before any backend sees
 *	  recovery as finished)
 *	  First, under the file lock, lowers the horizon generators may use to
 *	  the one replayed (the keeper may have published horizons of its own
 *	  while in recovery, which are in no WAL) and sets recovery_ended: from
 *	  then on the keeper publishes only horizons it wrote into WAL
 *	  (keeper.c), and generators wait for its first, which it is woken to
 *	  write as soon as WAL may be written.
 *	  Then raises every generator word (each gene's, and UUIDv7's) so that
 *	  its next tick starts after the replayed horizon and after this
 *	  server's clock plus idgen.horizon_lead + idgen.max_drift (C below):
 *	  the promoted server issues nothing its primary may have issued,
 *	  whatever its own clock says, and with clocks in agreement nothing any
 *	  earlier holder of the identity issued, however little of its WAL
 *	  reached this server and however fast takeovers followed each other.
 *	  That rests on one invariant, with clocks in agreement:
 *
 *	    every ID any holder issues at time t is at most t + C
 *
 *	  It holds for the generators of a server that took nothing over (they
 *	  issue up to max_drift ahead of the clock).  It holds after a takeover
 *	  that starts at most C ahead of the clock, since the takeover point
 *	  starts max_drift below the first ID and runs slower than the clock
 *	  (clock.c).  And every takeover starts at most C ahead: this clock
 *	  plus C, or a horizon that its writer made at most C ahead of its
 *	  clock, as the keeper does while its point is at most
 *	  idgen.horizon_lead ahead (keeper.c), which by the invariant it is.
 *	  The same holds for the horizon file a restart starts from.  So leads
 *	  stay at most C after any number of promotions and crash restarts in
 *	  any order; before, each started at a horizon up to C beyond its
 *	  holder's lead, and leads added up.  A clock that was behind its
 *	  last holder's starts further ahead, and that lead slews away.
 *	  Crash recovery starts at this clock plus C too: a server promoted
 *	  and crashed before its first horizon record replays only its old
 *	  primary's records, which may not cover what that primary issued.
 *	  If its clock is behind that by at most idgen.takeover_max_lead,
 *	  generators continue from there, ahead of the clock, the lead
 *	  shrinking until they are back on the clock; further behind, they
 *	  fail until it catches up (clock.c).  idgen_info() shows how far
 *	  (recovery_lead_ms) and the log says so.
 *	  The raise is a compare-and-swap loop that only moves a word up, so a
 *	  generator of the standby's own identity running at the same moment
 *	  loses nothing (shmem.c's argument holds for any upward move).  A
 *	  backend that sees RecoveryInProgress() false has passed the memory
 *	  barrier in RecoveryInProgress, so it sees the raised words.
 *
 * In recovery (a hot standby)
 *	  generators refuse unless the server holds an identity that differs
 *	  from the identity of the primary in the records it replays: a standby
 *	  made with pg_basebackup has its primary's settings, and would issue
 *	  its primary's IDs.  Until a record has been replayed since start the
 *	  primary's identity is unknown, and generators refuse too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_clock.h"
#include "idgen_horizon.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_stats.h"

/* The record types: a new durable horizon; generation stopped. */
#define XLOG_IDGEN_HORIZON		0x00
#define XLOG_IDGEN_STOP			0x10

typedef struct xl_idgen_horizon
{
	TimestampTz horizon;		/* no ID of the writer is beyond it */
	TimestampTz written_at;		/* the writer's clock when it wrote it */
	int32		datacenter_id;	/* the writer's Snowflake identity; -1: */
	int32		worker_id;		/* it held none (a registry lease ended) */
} xl_idgen_horizon;

static void idgen_rmgr_redo(XLogReaderState *record);
static void idgen_rmgr_desc(StringInfo buf, XLogReaderState *record);
static const char *idgen_rmgr_identify(uint8 info);
static void idgen_rmgr_cleanup(void);

static RmgrData idgen_rmgr = {
	.rm_name = "idgen",
	.rm_redo = idgen_rmgr_redo,
	.rm_desc = idgen_rmgr_desc,
	.rm_identify = idgen_rmgr_identify,
	.rm_cleanup = idgen_rmgr_cleanup,
};

/* When preloading, register the resource manager. */
void
idgen_horizon_wal_init(void)
{
	if (process_shared_preload_libraries_in_progress)
		RegisterCustomRmgr(IDGEN_RMGR_ID, &idgen_rmgr);
}

/*
 * This server's Snowflake identity now: from its settings, or from its
 * registry lease (false when it holds none).
 */
static bool
current_identity(int *datacenter_id, int *worker_id)
{
	const IdgenLayout *l = &idgen_layout;
	uint64		w;

	if (!idgen_shared->identity_leased)
	{
		*datacenter_id = l->datacenter_id;
		*worker_id = l->worker_id;
		return true;
	}
	w = pg_atomic_read_u64(&idgen_shared->lease.f.word);
	if (w == 0)
		return false;
	idgen_identity_decode(l, w, datacenter_id, worker_id);
	return true;
}

/*
 * Write 'horizon' into WAL and wait until it is flushed here and, when
 * synchronous replication is configured, on the synchronous standbys.  The
 * keeper calls this after the file has it and before generators may use
 * it; false if the wait was cut short (shutdown): then it must not be used.
 * Nothing is written in recovery, or with wal_level = minimal (no standby
 * or archive could read it; the file covers crash recovery).
 */
static XLogRecPtr
log_record(uint8 info, TimestampTz horizon)
{
	xl_idgen_horizon xlrec;
	XLogRecPtr	lsn;

	xlrec.horizon = horizon;
	xlrec.written_at = GetCurrentTimestamp();
	if (!current_identity(&xlrec.datacenter_id, &xlrec.worker_id))
		xlrec.datacenter_id = xlrec.worker_id = -1;

	XLogBeginInsert();
	XLogSetRecordFlags(XLOG_MARK_UNIMPORTANT);
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	lsn = XLogInsert(IDGEN_RMGR_ID, info);
	XLogFlush(lsn);
	return lsn;
}

bool
idgen_wal_log_horizon(TimestampTz horizon)
{
	XLogRecPtr	lsn;

	if (RecoveryInProgress() || !XLogIsNeeded())
		return true;

	lsn = log_record(XLOG_IDGEN_HORIZON, horizon);

	/*
	 * As a commit does (with interrupts held: the keeper's SIGTERM handler
	 * sets ProcDiePending, which ends the wait).
	 */
	HOLD_INTERRUPTS();
	SyncRepWaitForLSN(lsn, false);
	RESUME_INTERRUPTS();
	return !ProcDiePending;
}

/*
 * Write the bound of every ID issued when the keeper stopped generation
 * (keeper.c, idgen_horizon_fence).  Not waited for: a standby that misses it
 * still has the higher horizon before it.
 */
void
idgen_wal_log_stop(TimestampTz bound)
{
	if (!RecoveryInProgress() && XLogIsNeeded())
		(void) log_record(XLOG_IDGEN_STOP, bound);
}

/* ----------
 * Redo
 * ----------
 */
static void
idgen_rmgr_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	xl_idgen_horizon xlrec;
	IdgenReplayStatus *r = &idgen_horizon_shared->replay;

	if ((info != XLOG_IDGEN_HORIZON && info != XLOG_IDGEN_STOP) ||
		XLogRecGetDataLen(record) != sizeof(xlrec))
		elog(PANIC, "idgen redo: unknown record (info 0x%02X, %u bytes)",
			 info, (unsigned int) XLogRecGetDataLen(record));
	memcpy(&xlrec, XLogRecGetData(record), sizeof(xlrec));

	/*
	 * On disk first: once redo has passed this record a restartpoint may make
	 * it unreachable.  An ERROR here stops recovery, as a failed write of any
	 * other file would.
	 */
	(void) idgen_horizon_persist(xlrec.horizon, ERROR);

	SpinLockAcquire(&r->mutex);
	if (xlrec.horizon > r->horizon || info == XLOG_IDGEN_STOP)
	{
		/* STOP: nothing above its bound was issued (see the file header). */
		r->horizon = xlrec.horizon;
		r->written_at = xlrec.written_at;
	}
	r->datacenter_id = xlrec.datacenter_id;
	r->worker_id = xlrec.worker_id;
	r->known = true;
	r->replayed_at = GetCurrentTimestamp();
	r->records++;
	SpinLockRelease(&r->mutex);
}

static void
idgen_rmgr_desc(StringInfo buf, XLogReaderState *record)
{
	xl_idgen_horizon xlrec;

	if (XLogRecGetDataLen(record) != sizeof(xlrec))
		return;
	memcpy(&xlrec, XLogRecGetData(record), sizeof(xlrec));
	appendStringInfo(buf, "%s %s; datacenter %d, worker %d",
					 (XLogRecGetInfo(record) & ~XLR_INFO_MASK) == XLOG_IDGEN_STOP ?
					 "issued up to" : "horizon",
					 timestamptz_to_str(xlrec.horizon), xlrec.datacenter_id, xlrec.worker_id);
}

static const char *
idgen_rmgr_identify(uint8 info)
{
	switch (info & ~XLR_INFO_MASK)
	{
		case XLOG_IDGEN_HORIZON:
			return "HORIZON";
		case XLOG_IDGEN_STOP:
			return "STOP";
	}
	return NULL;
}

/*
 * End of recovery: generators may use only horizons in WAL, and start above
 * the replayed horizon (see the file header).  Runs in the startup process.
 */
static void
idgen_rmgr_cleanup(void)
{
	IdgenReplayStatus *r = &idgen_horizon_shared->replay;
	bool		promotion = GetRecoveryState() == RECOVERY_STATE_ARCHIVE;
	TimestampTz replayed;
	TimestampTz horizon;
	TimestampTz now = GetCurrentTimestamp();
	int64		lead_ms;

	SpinLockAcquire(&r->mutex);
	replayed = r->horizon;
	SpinLockRelease(&r->mutex);

	LWLockAcquire(idgen_horizon_shared->file_lock, LW_EXCLUSIVE);
	idgen_horizon_shared->recovery_ended = true;
	if ((TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value) > replayed)
		pg_atomic_write_u64(&idgen_shared->horizon.value, (uint64) replayed);
	LWLockRelease(idgen_horizon_shared->file_lock);
	idgen_wake_keeper();

	/*
	 * With clocks in agreement, no holder of this identity ever issued an ID
	 * more than idgen.horizon_lead + idgen.max_drift ahead of its clock (see
	 * the file header), so this clock plus that covers every ID any earlier
	 * holder may have issued, however little WAL reached this server and
	 * however fast takeovers followed each other.  The replayed horizon
	 * covers the IDs the WAL read vouches for, whatever the clocks say. Crash
	 * recovery too: a server promoted and crashed before its first horizon
	 * record replays only its old primary's.  But crash recovery that
	 * replayed no record (wal_level = minimal) has nothing to take over: the
	 * generators started above the horizon file, and a clock behind it is met
	 * by the clock policy, as after a restart.
	 */
	if (!promotion && replayed == 0)
		return;
	horizon = Max(replayed,
				  now + ((TimestampTz) idgen_horizon_lead_ms + idgen_max_drift_ms) * 1000);

	lead_ms = idgen_take_over(horizon, true,
							  promotion ? IDGEN_TAKEOVER_PROMOTION : IDGEN_TAKEOVER_CRASH_RECOVERY);
	SpinLockAcquire(&r->mutex);
	r->lifted_at = now;
	r->lifted_to = horizon;
	r->lift_lead_ms = lead_ms;
	SpinLockRelease(&r->mutex);

	if (lead_ms > idgen_takeover_max_lead_ms)
		ereport(LOG,
				(errmsg("idgen generators start above the horizon replayed from WAL, " INT64_FORMAT " ms ahead of this server's clock",
						lead_ms),
				 promotion ?
				 errdetail("The last primary may have issued IDs up to %s. That is more than \"idgen.takeover_max_lead\" (%d ms) ahead: generation fails until this server's clock is within it.",
						   timestamptz_to_str(horizon), idgen_takeover_max_lead_ms) :
				 errdetail("This server may have issued IDs up to %s before its restart. That is more than \"idgen.takeover_max_lead\" (%d ms) ahead: generation fails until this server's clock is within it.",
						   timestamptz_to_str(horizon), idgen_takeover_max_lead_ms),
				 promotion ?
				 errhint("Synchronize this server's clock with the old primary's.") :
				 errhint("Check this server's time source: its clock is behind the IDs it issued before.")));
	else if (horizon > replayed)
		ereport(LOG,
				(errmsg("idgen generators start above the horizon replayed from WAL, " INT64_FORMAT " ms ahead of this server's clock",
						lead_ms),
				 errdetail("No holder of this identity issued IDs more than \"idgen.horizon_lead\" + \"idgen.max_drift\" (%d ms) ahead of its clock; with clocks in agreement every ID issued before is below %s. Generation continues from there and returns to this clock at half speed.",
						   idgen_horizon_lead_ms + idgen_max_drift_ms, timestamptz_to_str(horizon))));
	else
		ereport(LOG,
				(errmsg("idgen generators start above the horizon replayed from WAL, " INT64_FORMAT " ms ahead of this server's clock",
						lead_ms),
				 promotion ?
				 errdetail("The last primary may have issued IDs up to %s; generation continues from there, ahead of this clock, and returns to it at half speed (\"idgen.takeover_max_lead\" is %d ms).",
						   timestamptz_to_str(horizon), idgen_takeover_max_lead_ms) :
				 errdetail("This server may have issued IDs up to %s before its restart; generation continues from there, ahead of this clock, and returns to it at half speed (\"idgen.takeover_max_lead\" is %d ms).",
						   timestamptz_to_str(horizon), idgen_takeover_max_lead_ms)));
}

/* ----------
 * Generation in recovery
 * ----------
 */

/* Why a server in recovery may not generate (see the file header). */
typedef enum RecoveryRefusal
{
	RECOVERY_MAY_GENERATE,
	RECOVERY_NO_IDENTITY,		/* the registry gave it none */
	RECOVERY_PRIMARY_UNKNOWN,	/* no record replayed since start */
	RECOVERY_PRIMARY_IDENTITY	/* it has its primary's identity */
} RecoveryRefusal;

static RecoveryRefusal
recovery_refusal(int *dc, int *w)
{
	IdgenReplayStatus copy;

	if (!current_identity(dc, w))
		return RECOVERY_NO_IDENTITY;
	SpinLockAcquire(&idgen_horizon_shared->replay.mutex);
	copy = idgen_horizon_shared->replay;
	SpinLockRelease(&idgen_horizon_shared->replay.mutex);
	if (!copy.known)
		return RECOVERY_PRIMARY_UNKNOWN;
	if (copy.datacenter_id == *dc && copy.worker_id == *w)
		return RECOVERY_PRIMARY_IDENTITY;
	return RECOVERY_MAY_GENERATE;
}

/* Whether this server, in recovery, may generate (the keeper asks). */
bool
idgen_recovery_may_generate(void)
{
	int			dc;
	int			w;

	return recovery_refusal(&dc, &w) == RECOVERY_MAY_GENERATE;
}

/*
 * Called by the generators when RecoveryInProgress(): refuse unless this
 * server holds an identity of its own (see the file header).  'item' names
 * what would be generated, for the message.
 */
void
idgen_recovery_check(IdgenKind kind, const char *item)
{
	int			dc;
	int			w;
	RecoveryRefusal refusal = recovery_refusal(&dc, &w);

	if (refusal == RECOVERY_MAY_GENERATE)
		return;
	idgen_count(kind, IDGEN_STAT_ERRORS, 1);
	if (refusal == RECOVERY_NO_IDENTITY)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not generate %s: this standby holds no Snowflake identity", item),
				 errdetail("Its identity comes from the registry (\"idgen.registry\"), which has not given it one; see idgen_identity()."),
				 errhint("Generate on the primary, or wait until the registry gives this server an identity.")));
	if (refusal == RECOVERY_PRIMARY_UNKNOWN)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not generate %s: this standby does not know its primary's Snowflake identity yet", item),
				 errdetail("A standby generates only with an identity other than its primary's. The primary's identity reaches standbys in WAL with its durable horizon, about twice a second; none has been replayed since this server started."),
				 errhint("Generate on the primary, or try again once this standby replays WAL from a primary that has idgen preloaded.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not generate %s: this standby has the Snowflake identity of its primary (datacenter %d, worker %d)",
					item, dc, w),
			 errdetail("It would issue the primary's IDs. Once promoted it generates with this identity, above every ID the primary may have issued."),
			 errhint("Generate on the primary, or give the standby an identity of its own with \"idgen.identity\" = 'registry'.")));
}
