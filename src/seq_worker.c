/*-------------------------------------------------------------------------
 *
 * seq_worker.c
 *	  The "idgen purge" background process: reserves the segments of cached
 *	  per-key sequences, forgets expired keys and ends worker-id leases.
 *
 * Keys whose ttl has passed are already treated as absent by every
 * function (seq.c), and a worker id whose lease ended more than
 * idgen.worker_quarantine ago is free whether its row is there or not
 * (lease.c); this worker deletes those rows so that the tables do not grow
 * without bound (an application that makes a key per conversation, say).
 * It connects to the database named by idgen.database and, every
 * idgen.purge_interval, if the extension is installed there, calls
 * idgen_seq_purge() and idgen_worker_purge() in a transaction of its own
 * (both skip rows other transactions hold, so the purge never makes a
 * caller wait and cannot deadlock with one).
 *
 * Other databases with the extension are not visited: there, expired rows
 * are only ignored (and overwritten on their next use) until someone runs
 * the purge functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_seq.h"
#include "idgen_sql.h"
#include "idgen_bgworker.h"

PGDLLEXPORT void idgen_purge_main(Datum main_arg);

/* Settings */
char	   *idgen_purge_database = NULL;
int			idgen_purge_interval_s = 60;

/* Requests handled in one transaction (reservation) or one purge run. */
#define WORKER_BATCH	256

/*
 * Start a transaction with a snapshot; whether the extension is installed
 * in this database, with its schema in 'ext'.
 */
static bool
begin_work(const char *activity, IdgenFunction *ext)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
	return idgen_lookup_extension(ext);
}

static void
end_work(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);	/* so autovacuum sees our changes */
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Reserve the segments cached keys are waiting for, in one committed
 * transaction, then publish them.  Returns whether it got anywhere: false
 * if there was nothing to do, or every row asked for was busy (held by
 * another transaction; those are asked again).
 */
static bool
reserve_once(IdgenSeqRequest *req)
{
	int			n = idgen_seq_cache_collect(req, WORKER_BATCH);
	IdgenFunction ext;
	bool		progress = false;

	if (n == 0)
		return false;
	if (begin_work("idgen: reserving segments", &ext))
		idgen_seq_reserve_segments(&ext, req, n);
	else
		for (int i = 0; i < n; i++)
			req[i].outcome = IDGEN_SEQ_FORGET;
	end_work();					/* committed, and durable: now serve them */
	idgen_seq_cache_publish(req, n);
	for (int i = 0; i < n; i++)
		progress |= (req[i].outcome != IDGEN_SEQ_RETRY);
	return progress;
}

/*
 * Run "SELECT schema.function()", which returns a count, in a
 * subtransaction: a failure is logged and rolled back, and the other purge
 * and the worker go on.  The count, 0 on failure.
 */
static uint64
purge_step(const char *schema, const char *function)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile uint64 deleted = 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		char	   *sql = psprintf("SELECT %s.%s()", schema, function);
		int			rc;
		bool		isnull;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		rc = SPI_execute(sql, false, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "%s failed: %s", sql, SPI_result_code_string(rc));
		deleted = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 1, &isnull));
		SPI_finish();
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("the idgen purge could not run %s.%s()", schema, function),
				 errdetail("%s", edata->message),
				 errhint("The other purge goes on; this one is tried again after \"idgen.purge_interval\".")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return deleted;
}

/*
 * One purge: record the use of cached keys, then delete the expired keys
 * and the ended leases, if the extension is installed in this database;
 * each of the two in a subtransaction of its own, so that one cannot stop
 * the other.  Returns the number of rows deleted.
 */
static uint64
purge_once(IdgenSeqRequest *req)
{
	uint64		deleted = 0;
	IdgenFunction ext;

	if (begin_work("idgen purge", &ext))
	{
		const char *schema = quote_identifier(get_namespace_name(ext.nspid));

		idgen_seq_record_use(&ext, req, idgen_seq_cache_collect_used(req, idgen_seq_cache_keys));
		deleted += purge_step(schema, "idgen_seq_purge");
		deleted += purge_step(schema, "idgen_worker_purge");
	}
	end_work();
	return deleted;
}

/*
 * Main entry point of the purge background worker.
 */
void
idgen_purge_main(Datum main_arg)
{
	IdgenSeqRequest *req;
	TimestampTz next_purge;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(idgen_purge_database, NULL, 0);

	/* A reservation must be durable before its values are served. */
	SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
	req = MemoryContextAlloc(TopMemoryContext,
							 sizeof(IdgenSeqRequest) * Max(idgen_seq_cache_keys, WORKER_BATCH));
	before_shmem_exit(idgen_seq_cache_worker_detach, (Datum) 0);
	idgen_seq_cache_worker_attach(MyLatch);
	next_purge = GetCurrentTimestamp() + (TimestampTz) idgen_purge_interval_s * USECS_PER_SEC;

	ereport(LOG,
			(errmsg("idgen purge started"),
			 errdetail("Expired per-key sequences and ended worker-id leases in database \"%s\" are deleted every %d s; segments of its cached keys are reserved here.",
					   idgen_purge_database, idgen_purge_interval_s)));

	for (;;)
	{
		TimestampTz now;
		long		timeout_ms;
		bool		progress;
		bool		urgent;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		ResetLatch(MyLatch);
		/* Prefetch requests can wait 2 ms to be reserved together. */
		if (idgen_seq_cache_pending(&urgent) && !urgent)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 2L, PG_WAIT_EXTENSION);
		progress = reserve_once(req);

		now = GetCurrentTimestamp();
		if (now >= next_purge)
		{
			uint64		deleted = purge_once(req);

			if (deleted > 0)
				elog(DEBUG1, "idgen purge deleted " UINT64_FORMAT " expired keys and leases", deleted);
			next_purge = now + (TimestampTz) idgen_purge_interval_s * USECS_PER_SEC;
		}

		/*
		 * More to reserve: at once.  Only busy rows to ask again: in 10 ms.
		 * Nothing: sleep until woken, or the next purge.
		 */
		if (idgen_seq_cache_pending(&urgent))
			timeout_ms = progress ? 0 : 10;
		else
			timeout_ms = (long) ((next_purge - now) / 1000) + 1;
		if (timeout_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout_ms, PG_WAIT_EXTENSION);
	}
}

/*
 * Define the process's settings; when preloading, register it.  It needs a
 * database connection, so it starts once recovery has finished.
 */
void
idgen_seq_worker_init(void)
{
	DefineCustomStringVariable("idgen.database",
							   "Sets the database where the idgen purge process runs.",
							   "There it reserves segments of cached per-key sequences, records their use, "
							   "and deletes expired per-key sequence keys and ended worker-id leases.",
							   &idgen_purge_database, "postgres",
							   idgen_startup_context(), 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.purge_interval",
							"Sets how often expired per-key sequence keys and ended leases are deleted.",
							NULL,
							&idgen_purge_interval_s, 60, 1, 24 * 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress)
		idgen_register_worker("idgen purge", "idgen_purge_main",
							  BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION,
							  BgWorkerStart_RecoveryFinished, 10);
}
