/*-------------------------------------------------------------------------
 *
 * purge.c
 *	  The purge background worker: forgets expired per-key sequences and
 *	  ended worker-id leases.
 *
 * Keys whose ttl has passed are already treated as absent by every
 * function (keyseq.c), and a worker id whose lease ended more than
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
#include "utils/snapmgr.h"

#include "idgen.h"

PGDLLEXPORT void idgen_purge_main(Datum main_arg);

/*
 * One purge: delete the expired rows if the extension is installed in this
 * database.  Returns the number of rows deleted.
 */
static uint64
purge_once(void)
{
	uint64		deleted = 0;
	int			rc;
	bool		isnull;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "idgen purge");

	rc = SPI_execute("SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e "
					 "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
					 "WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'", true, 1);
	if (rc == SPI_OK_SELECT && SPI_processed == 1)
	{
		char	   *schema = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		char	   *sql = psprintf("SELECT %1$s.idgen_seq_purge() OPERATOR(pg_catalog.+) %1$s.idgen_worker_purge()",
								   schema);

		rc = SPI_execute(sql, false, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "idgen purge: %s failed: %s", sql, SPI_result_code_string(rc));
		deleted = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 1, &isnull));
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);	/* so autovacuum sees the deleted rows */
	pgstat_report_activity(STATE_IDLE, NULL);
	return deleted;
}

/*
 * Main entry point of the purge background worker.
 */
void
idgen_purge_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(idgen_purge_database, NULL, 0);

	ereport(LOG,
			(errmsg("idgen purge started"),
			 errdetail("Expired per-key sequences and ended worker-id leases in database \"%s\" are deleted every %d s.",
					   idgen_purge_database, idgen_purge_interval_s)));

	for (;;)
	{
		uint64		deleted;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		deleted = purge_once();
		if (deleted > 0)
			elog(DEBUG1, "idgen purge deleted " UINT64_FORMAT " expired keys and leases", deleted);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 (long) idgen_purge_interval_s * 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * Register the purge worker; called from _PG_init in the postmaster.  It
 * needs a database connection, so it starts once recovery has finished.
 */
void
idgen_purge_register(void)
{
	idgen_register_worker("idgen purge", "idgen_purge_main",
						  BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION,
						  BgWorkerStart_RecoveryFinished, 10);
}
