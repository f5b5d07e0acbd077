/*-------------------------------------------------------------------------
 *
 * seq_worker.c
 *	  The "idgen purge" background process: reserves the segments of cached
 *	  per-key sequences, forgets expired keys and ends worker-id leases.
 *
 * Segments
 *	  Callers ask for segments through a queue in shared memory
 *	  (seq_cache.c).  The process takes the requests in batches and, in one
 *	  transaction of its own with synchronous_commit on, locks the keys'
 *	  rows (skipping rows other transactions hold: asked again), advances
 *	  each past its segment, commits, and only then publishes the segments:
 *	  no value is served before its reservation is durable.
 *
 * Purge
 *	  Keys whose ttl has passed are already treated as absent by every
 *	  function (seq.c), and a worker id whose lease ended more than
 *	  idgen.worker_quarantine ago is free whether its row is there or not
 *	  (lease.c); this process deletes those rows so that the tables do not
 *	  grow without bound (an application that makes a key per
 *	  conversation, say).  Every idgen.purge_interval, if the extension is
 *	  installed in the database idgen.database, it calls idgen_seq_purge()
 *	  and idgen_worker_purge() in a transaction of its own (both skip rows
 *	  other transactions hold, so the purge never makes a caller wait and
 *	  cannot deadlock with one).
 *
 *	  Other databases with the extension are not visited: there, expired
 *	  rows are only ignored (and overwritten on their next use) until
 *	  someone runs the purge functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
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
 * The worker's statements: it runs a few of them for every batch of
 * reservations (hundreds of batches a second under load), so they are
 * prepared once, with generic plans (a custom one would be planned again
 * for every batch).  Keys come as arrays, and the generic plans look them
 * up by the primary key.
 */
enum
{
	W_LOCK,						/* lock the rows of keys $1, skipping busy ones */
	W_RESERVE,					/* advance keys $1 to values $2, used at $3 */
	W_PRESENT,					/* which of keys $1 exist */
	W_USED,						/* record that keys $1 were used at $2 */
	NUM_WORKER_QUERIES
};

static const IdgenStatement worker_statement_list[NUM_WORKER_QUERIES] = {
	[W_LOCK] = {
		"SELECT key, step, max_value, ttl, last_used, cache, created_by, value "
		"FROM %1$s.idgen_seq WHERE key OPERATOR(pg_catalog.=) ANY ($1) "
		"FOR UPDATE SKIP LOCKED",
		1, {TEXTARRAYOID}, CURSOR_OPT_GENERIC_PLAN
	},
	[W_RESERVE] = {
		"UPDATE %1$s.idgen_seq s SET value = u.v, "
		"last_used = CASE WHEN s.ttl IS NULL THEN s.last_used ELSE $3 END "
		"FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(k, v) "
		"WHERE s.key OPERATOR(pg_catalog.=) u.k",
		3, {TEXTARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID}, CURSOR_OPT_GENERIC_PLAN
	},
	[W_PRESENT] = {
		"SELECT key FROM %1$s.idgen_seq WHERE key OPERATOR(pg_catalog.=) ANY ($1)",
		1, {TEXTARRAYOID}, CURSOR_OPT_GENERIC_PLAN
	},
	[W_USED] = {
		"UPDATE %1$s.idgen_seq SET last_used = $2 "
		"WHERE key OPERATOR(pg_catalog.=) ANY ($1) AND ttl IS NOT NULL "
		"AND last_used OPERATOR(pg_catalog.<) $2",
		2, {TEXTARRAYOID, TIMESTAMPTZOID}, CURSOR_OPT_GENERIC_PLAN
	},
};

static SPIPlanPtr worker_plans[NUM_WORKER_QUERIES];
static IdgenStatements worker_statements = {worker_statement_list, NUM_WORKER_QUERIES,
worker_plans, InvalidOid, ""};

/* A text[] of the requests' keys. */
static Datum
request_keys(IdgenSeqRequest *req, int n, bool (*want) (IdgenSeqRequest *r))
{
	Datum	   *keys = palloc(sizeof(Datum) * (n + 1));
	int			m = 0;

	for (int i = 0; i < n; i++)
		if (want == NULL || want(&req[i]))
			keys[m++] = CStringGetTextDatum(req[i].key);
	return PointerGetDatum(construct_array(keys, m, TEXTOID, -1, false, TYPALIGN_INT));
}

static bool
still_retry(IdgenSeqRequest *r)
{
	return r->outcome == IDGEN_SEQ_RETRY;
}

static IdgenSeqRequest *
find_request(IdgenSeqRequest *req, int n, const char *key)
{
	for (int i = 0; i < n; i++)
		if (strcmp(req[i].key, key) == 0)
			return &req[i];
	return NULL;
}

/*
 * Reserve a segment for each request: lock the key's row (skipping rows
 * other transactions hold: those are asked again), advance its value past
 * the segment.  Runs in the worker's transaction, SPI connected, as a
 * superuser; the segments may be served once it commits.
 */
static void
reserve_segments(const IdgenFunction *ext, IdgenSeqRequest *req, int n)
{
	TimestampTz now = GetCurrentTimestamp();
	IdgenSqlContext cx;
	Datum		args[3];
	Datum	   *new_values = palloc(sizeof(Datum) * (n + 1));
	Datum	   *new_keys = palloc(sizeof(Datum) * (n + 1));
	int			nnew = 0;
	bool		any_retry = false;

	idgen_sql_begin(ext, &worker_statements, &cx);
	args[0] = request_keys(req, n, NULL);
	(void) idgen_sql_run(&cx, W_LOCK, args, NULL);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[SEQ_NUM_COLS];
		bool		isnull[SEQ_NUM_COLS];
		IdgenSeqRow		row;
		IdgenSeqRequest *r;
		char	   *key;

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, isnull);
		idgen_seq_row_from_values(&row, values, isnull);
		key = TextDatumGetCString(values[SEQ_COL_KEY - 1]);
		r = find_request(req, n, key);
		if (r == NULL)
			continue;
		if (row.cache <= 0 || idgen_seq_ttl_passed(&row, now))
		{
			/* No longer cached, or forgotten: callers take the table. */
			r->outcome = IDGEN_SEQ_FORGET;
			continue;
		}
		new_values[nnew] = Int64GetDatum(idgen_seq_cache_reserve(r, row.value, row.step, row.max_value));
		new_keys[nnew++] = values[SEQ_COL_KEY - 1];
		r->outcome = IDGEN_SEQ_RESERVED;
	}
	if (nnew > 0)
	{
		args[0] = PointerGetDatum(construct_array(new_keys, nnew, TEXTOID, -1, false, TYPALIGN_INT));
		args[1] = PointerGetDatum(construct_array(new_values, nnew, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		args[2] = TimestampTzGetDatum(now);
		if (idgen_sql_run(&cx, W_RESERVE, args, NULL) != (uint64) nnew)
			elog(ERROR, "idgen: reserving segments updated " UINT64_FORMAT " rows, not %d",
				 SPI_processed, nnew);
	}

	/* The rows not read: held by another transaction (ask again), or gone. */
	for (int i = 0; i < n; i++)
		any_retry |= still_retry(&req[i]);
	if (any_retry)
	{
		args[0] = request_keys(req, n, still_retry);
		(void) idgen_sql_run(&cx, W_PRESENT, args, NULL);
		for (int i = 0; i < n; i++)
		{
			bool		present = false;

			if (req[i].outcome != IDGEN_SEQ_RETRY)
				continue;
			for (uint64 j = 0; j < SPI_processed && !present; j++)
				present = strcmp(SPI_getvalue(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 1),
								 req[i].key) == 0;
			if (!present)
				req[i].outcome = IDGEN_SEQ_FORGET;
		}
	}
	idgen_sql_end(&cx);
}

/*
 * Record the use of cached keys with a ttl (see idgen_seq_ttl_passed), in the
 * worker's transaction.
 */
static void
record_use(const IdgenFunction *ext, IdgenSeqRequest *req, int n)
{
	IdgenSqlContext cx;
	Datum		args[2];

	if (n == 0)
		return;
	idgen_sql_begin(ext, &worker_statements, &cx);
	args[0] = request_keys(req, n, NULL);
	args[1] = TimestampTzGetDatum(GetCurrentTimestamp());
	(void) idgen_sql_run(&cx, W_USED, args, NULL);
	idgen_sql_end(&cx);
}

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
		reserve_segments(&ext, req, n);
	else
		for (int i = 0; i < n; i++)
			req[i].outcome = IDGEN_SEQ_FORGET;
	end_work();					/* committed, and durable: now serve them */
	idgen_seq_cache_publish(req, n);
	for (int i = 0; i < n; i++)
		progress |= (req[i].outcome != IDGEN_SEQ_RETRY);
	return progress;
}

/* purge_step's statement and result, for idgen_sql_try. */
typedef struct PurgeCall
{
	const char *sql;
	uint64		deleted;
} PurgeCall;

static void
purge_call(void *arg)
{
	PurgeCall  *a = (PurgeCall *) arg;
	int			rc;
	bool		isnull;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute(a->sql, false, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "%s failed: %s", a->sql, SPI_result_code_string(rc));
	a->deleted = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
}

/*
 * Run "SELECT schema.function()", which returns a count, in a
 * subtransaction: a failure is logged and rolled back, and the other purge
 * and the worker go on.  The count, 0 on failure.
 */
static uint64
purge_step(const char *schema, const char *function)
{
	PurgeCall	call = {psprintf("SELECT %s.%s()", schema, function), 0};
	ErrorData  *edata = idgen_sql_try(purge_call, &call);

	if (edata == NULL)
		return call.deleted;
	ereport(WARNING,
			(errcode(edata->sqlerrcode),
			 errmsg("the idgen purge could not run %s.%s()", schema, function),
			 errdetail("%s", edata->message),
			 errhint("The other purge goes on; this one is tried again after \"idgen.purge_interval\".")));
	FreeErrorData(edata);
	return 0;
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

		record_use(&ext, req, idgen_seq_cache_collect_used(req, idgen_seq_cache_keys));
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
