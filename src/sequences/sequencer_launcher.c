/*-------------------------------------------------------------------------
 *
 * sequencer_launcher.c
 *	  The "idgen sequencer launcher": the process that starts the
 *	  databases' idgen sequencers (sequencer.c) in their slots
 *	  (seq_slots.c).
 *
 * One process, connected to no database (it reads pg_database).  It starts
 * a database's idgen sequencer (a dynamic background worker, in a slot of
 * seq_slots.c) when a backend there asks for one (a cached key met without
 * a sequencer), and every idgen.purge_interval lends the free slots, one
 * purge each and as they come free, to the databases that accept
 * connections and have no sequencer (templates aside), each round starting
 * one database further so that every database gets its turn; a round not
 * finished when the next is due goes on instead.  No setting names a
 * database: cached keys and purges work in every database where the
 * extension is created.  At most idgen.max_sequencers run at once; beyond
 * that a database's cached keys are served from their rows (idgen_seq_keys
 * says so, idgen_info() counts the refusals).  A purge that finds no free
 * slot, or no background worker slot (max_worker_processes), waits
 * (idgen_info() names the databases waiting) and asks the sequencer that
 * has served longest, if for at least idgen.purge_interval, to give its
 * slot (seq_slots.c): each database waits at most about
 * idgen.purge_interval plus a second for each one before it in the round
 * that had to wait too, whatever the others do.  That the launcher cannot
 * start processes is logged once, and again when it has started every
 * process asked for a minute long, not at every try.  A process that stops
 * before it attached (its database dropped meanwhile, say) is seen through
 * its handle, and its slot freed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_seq.h"
#include "idgen_sequencer.h"
#include "idgen_bgworker.h"

PGDLLEXPORT void idgen_sequencer_launcher_main(Datum main_arg);

/* The processes it started, by slot, to see them stop. */
typedef struct Started
{
	BackgroundWorkerHandle *handle;
	uint32		generation;
} Started;

static Started started[IDGEN_MAX_SEQUENCERS];

/*
 * Starts that failed for want of a background worker slot: since when (0:
 * none lately), the last, and how many.  One WARNING when they begin, one
 * LOG once none has failed for START_FAILURES_CLEAR: not a line per try.
 */
static TimestampTz start_failing_since = 0;
static TimestampTz start_failed_last = 0;
static int64 start_failures = 0;

#define START_FAILURES_CLEAR	(60 * USECS_PER_SEC)

/* Start the process of slot 'slot' (for database 'dbid'); false if it could not. */
static bool
start_process(int slot, uint32 generation, Oid dbid)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw.bgw_library_name, sizeof(bgw.bgw_library_name), "idgen");
	snprintf(bgw.bgw_function_name, sizeof(bgw.bgw_function_name), "idgen_sequencer_main");
	snprintf(bgw.bgw_name, sizeof(bgw.bgw_name), "idgen sequencer for database %u", dbid);
	snprintf(bgw.bgw_type, sizeof(bgw.bgw_type), "idgen sequencer");
	bgw.bgw_main_arg = Int32GetDatum(slot);
	bgw.bgw_notify_pid = MyProcPid;

	if (started[slot].handle != NULL)
		pfree(started[slot].handle);
	started[slot].handle = NULL;
	if (!RegisterDynamicBackgroundWorker(&bgw, &started[slot].handle))
	{
		TimestampTz now = GetCurrentTimestamp();

		if (start_failing_since == 0)
		{
			start_failing_since = now;
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the idgen sequencer launcher could not start an idgen sequencer for database %u", dbid),
					 errdetail("Every background worker slot is taken (max_worker_processes = %d). Until one is free, databases without a process have their cached per-key sequences served transactionally and their purges wait (idgen_info() names them); this is not logged again until no start has failed for a minute.",
							   max_worker_processes),
					 errhint("Raise max_worker_processes, or lower idgen.max_sequencers.")));
		}
		start_failed_last = now;
		start_failures++;
		idgen_seq_slot_start_ended(slot, generation, true);
		started[slot].handle = NULL;
		return false;
	}
	started[slot].generation = generation;
	return true;
}

/* No start has failed for a while: say so, once. */
static void
check_start_failures(TimestampTz now)
{
	if (start_failing_since == 0 || now - start_failed_last < START_FAILURES_CLEAR)
		return;
	ereport(LOG,
			(errmsg("the idgen sequencer launcher starts idgen sequencers again"),
			 errdetail("No start has failed for a minute; " INT64_FORMAT " failed before, for want of a background worker slot, over %ld s.",
					   start_failures, (long) ((start_failed_last - start_failing_since) / USECS_PER_SEC))));
	start_failing_since = start_failed_last = 0;
	start_failures = 0;
}

/* Free the slots of processes that stopped before they attached. */
static void
reap_processes(void)
{
	for (int i = 0; i < idgen_max_sequencers; i++)
	{
		pid_t		pid;

		if (started[i].handle == NULL)
			continue;
		if (GetBackgroundWorkerPid(started[i].handle, &pid) != BGWH_STOPPED)
			continue;
		idgen_seq_slot_start_ended(i, started[i].generation, false);
		pfree(started[i].handle);
		started[i].handle = NULL;
	}
}

/*
 * A purge round: the databases still to visit, in order.  Every
 * idgen.purge_interval a round lists the databases that accept
 * connections (templates aside), starting after the one the last round
 * began with, so that with more databases than slots none waits for ever;
 * each free slot is lent to the next one, for a purge, as slots come free.
 */
static List *round_dbids = NIL;
static TimestampTz round_blocked_since = 0; /* its first database waits */

static void
start_round(void)
{
	static Oid	last_first = InvalidOid;
	List	   *dbids = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	int			n;
	int			first = 0;
	MemoryContext old;

	/* The lists outlive the transaction: in TopMemoryContext. */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (db->datallowconn && !db->datistemplate)
		{
			old = MemoryContextSwitchTo(TopMemoryContext);
			dbids = lappend_oid(dbids, db->oid);
			MemoryContextSwitchTo(old);
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();

	list_free(round_dbids);
	round_dbids = NIL;
	n = list_length(dbids);
	for (int i = 0; i < n; i++)
		if (list_nth_oid(dbids, i) == last_first)
			first = i + 1;
	old = MemoryContextSwitchTo(TopMemoryContext);
	for (int k = 0; k < n; k++)
		round_dbids = lappend_oid(round_dbids, list_nth_oid(dbids, (first + k) % n));
	MemoryContextSwitchTo(old);
	if (round_dbids != NIL)
		last_first = linitial_oid(round_dbids);
	list_free(dbids);
}

/*
 * Lend the free slots to the next databases of the round.  When the next
 * finds no slot, or its process cannot start, it waits: a process that has
 * served for idgen.purge_interval is asked for its slot, and the databases
 * waiting are published.  Returns whether the round waits.
 */
static bool
continue_round(void)
{
	bool		blocked = false;

	while (round_dbids != NIL)
	{
		Oid			dbid = linitial_oid(round_dbids);
		uint32		generation;
		int			slot = idgen_seq_slot_take_for_purge(dbid, &generation);

		if (slot >= 0 && !start_process(slot, generation, dbid))
			slot = -2;			/* no background worker slot: as no slot */
		if (slot == -2)
			(void) idgen_seq_slot_ask_yield(dbid, (int64) idgen_purge_interval_s * USECS_PER_SEC);
		if (slot <= -2)
		{
			/* -3: its process is about to start; the round waits for it */
			blocked = true;
			break;
		}
		/* Started; or -1: the database has a process, which purges it. */
		round_dbids = list_delete_first(round_dbids);
		round_blocked_since = 0;
	}

	if (blocked)
	{
		Oid			waiting[IDGEN_MAX_WAITING_SHOWN];
		int			n = 0;
		ListCell   *lc;

		if (round_blocked_since == 0)
			round_blocked_since = GetCurrentTimestamp();
		foreach(lc, round_dbids)
		{
			if (n < IDGEN_MAX_WAITING_SHOWN)
				waiting[n] = lfirst_oid(lc);
			n++;
		}
		idgen_seq_slot_set_waiting(waiting, n, round_blocked_since);
	}
	else
		idgen_seq_slot_set_waiting(NULL, 0, 0);
	return blocked;
}

/*
 * Main entry point of the idgen sequencer launcher.
 */
void
idgen_sequencer_launcher_main(Datum main_arg)
{
	TimestampTz next_round = 0;

	idgen_bgworker_signals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	before_shmem_exit(idgen_seq_slot_launcher_detach, (Datum) 0);
	idgen_seq_slot_launcher_attach(MyLatch);
	ereport(LOG,
			(errmsg("idgen sequencer launcher started"),
			 errdetail("It starts up to %d idgen sequencers, one per database: where cached per-key sequences are used, and every %d s to purge expired keys and leases.",
					   idgen_max_sequencers, idgen_purge_interval_s)));

	for (;;)
	{
		TimestampTz now;
		Oid			dbid;
		uint32		generation;
		int			slot;
		bool		stopping[IDGEN_MAX_SEQUENCERS];
		long		timeout_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		ResetLatch(MyLatch);

		/*
		 * A slot's next process starts once its last one has stopped (its
		 * handle is then reaped): a slot handed over by a process that gave
		 * it needs the background worker slot that process holds until then.
		 */
		reap_processes();
		for (int i = 0; i < idgen_max_sequencers; i++)
			stopping[i] = started[i].handle != NULL;
		while ((slot = idgen_seq_slot_take_wanted(&dbid, &generation, stopping)) >= 0)
			(void) start_process(slot, generation, dbid);

		now = GetCurrentTimestamp();
		if (now >= next_round)
		{
			/* A round not finished goes on: its databases wait their turn. */
			if (round_dbids == NIL)
				start_round();
			next_round = now + (TimestampTz) idgen_purge_interval_s * USECS_PER_SEC;
		}
		check_start_failures(now);

		/* Waiting (for a slot, or a process to give one): look again in 1 s. */
		timeout_ms = (long) ((next_round - now) / 1000) + 1;
		if (continue_round() || start_failing_since != 0)
			timeout_ms = Min(timeout_ms, 1000L);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout_ms, PG_WAIT_EXTENSION);
	}
}

/*
 * Define the processes' settings; when preloading, register the launcher.
 * It reads pg_database, so it starts once recovery has finished.
 */
void
idgen_sequencer_init(void)
{
	idgen_seq_slots_init();
	if (process_shared_preload_libraries_in_progress)
		idgen_register_process("idgen sequencer launcher", "idgen_sequencer_launcher_main",
							   BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION,
							   BgWorkerStart_RecoveryFinished, 10);
}
