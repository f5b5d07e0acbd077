/*-------------------------------------------------------------------------
 *
 * sequencer.c
 *	  The "idgen sequencer" processes, one per database at a time: they
 *	  reserve the segments of cached per-key sequences and run the
 *	  database's duties (forget expired keys and ended worker-id leases,
 *	  announce the server's identity).  The "idgen sequencer launcher"
 *	  (sequencer_launcher.c) starts them.
 *
 * A database's process
 *	  Attaches to its slot, leaves at once if the extension is not
 *	  installed, purges, and then either ends (lent for the purge) or, while
 *	  its database's cached keys are in use, stays: reserving their
 *	  segments and purging every idgen.purge_interval, until none has been
 *	  used for idgen.sequencer_idle.  While it runs it is a session
 *	  in its database, so DROP DATABASE, ALTER DATABASE ... RENAME and
 *	  CREATE DATABASE ... TEMPLATE of that database fail (55006) until it
 *	  ends, or WITH (FORCE) ends it.
 *
 * Segments
 *	  Callers ask for segments through a queue in shared memory
 *	  (seq_slots.c, seq_cache.c).  The process takes the requests in batches and, in one
 *	  transaction of its own with synchronous_commit on, locks the keys'
 *	  rows (skipping rows other transactions hold: asked again), advances
 *	  each past its segment, commits, and only then publishes the segments:
 *	  no value is served before its reservation is durable.
 *
 * Duties
 *	  Every idgen.purge_interval (a "purge", in the settings' and the
 *	  messages' words) the process records the use of its database's cached
 *	  keys, then runs each of its duties: one of the extension's SQL
 *	  functions, which returns a count, in a subtransaction of its own, so
 *	  that one failing stops neither the others nor the process.  The
 *	  duties belong to layers above this one, so this file does not name
 *	  them: idgen.c declares the list (idgen_sequencer_duties) and hands it
 *	  over at start.  Today they delete the keys whose ttl has passed
 *	  (treated as absent by every function already, seq.c) and the leases
 *	  ended more than idgen.worker_quarantine ago (free whether their row is
 *	  there or not, lease.c), so that the tables do not grow without bound
 *	  (an application that makes a key per conversation, say), and announce
 *	  this server's identity claim (active_claim.c).  Each skips rows other
 *	  transactions hold, so a duty never makes a caller wait and cannot
 *	  deadlock with one.
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
#include "idgen_sequencer.h"
#include "idgen_sql.h"
#include "idgen_bgworker.h"

PGDLLEXPORT void idgen_sequencer_main(Datum main_arg);

/* Requests handled in one transaction (reservation) or one purge run. */
#define SEQUENCER_BATCH	256

/*
 * The sequencer's statements: it runs a few of them for every batch of
 * reservations (hundreds of batches a second under load), so they are
 * prepared once, with generic plans (a custom one would be planned again
 * for every batch).  Keys come as arrays, and the generic plans look them
 * up by the primary key.
 */
enum
{
	W_LOCK,						/* lock the rows of keys $1, skipping busy
								 * ones */
	W_RESERVE,					/* advance keys $1 to values $2, used at $3 */
	W_PRESENT,					/* which of keys $1 exist */
	W_USED,						/* record that keys $1 were used at $2 */
	NUM_SEQUENCER_QUERIES
};

static const IdgenStatement sequencer_statement_list[NUM_SEQUENCER_QUERIES] = {
	[W_LOCK] = {
		"SELECT " IDGEN_SEQ_COLUMN_LIST " "
		"FROM %1$s.idgen_seq WHERE key OPERATOR(pg_catalog.=) ANY ($1) "
		"FOR UPDATE SKIP LOCKED",
		1, {TEXTARRAYOID}, CURSOR_OPT_GENERIC_PLAN
	},
	[W_RESERVE] = {
		"UPDATE %1$s.idgen_seq s SET called = true, value = u.v, "
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

static SPIPlanPtr sequencer_plans[NUM_SEQUENCER_QUERIES];
static IdgenStatements sequencer_statements = {sequencer_statement_list, NUM_SEQUENCER_QUERIES,
sequencer_plans, InvalidOid, ""};

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
 * the segment.  Runs in the sequencer's transaction, SPI connected, as a
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

	idgen_sql_begin(ext, &sequencer_statements, &cx);
	args[0] = request_keys(req, n, NULL);
	(void) idgen_sql_run(&cx, W_LOCK, args, NULL);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[SEQ_NUM_COLS];
		bool		isnull[SEQ_NUM_COLS];
		IdgenSeqRow row;
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
		if (!idgen_seq_cache_request_live(r))
		{
			/*
			 * Its entry was retired: the row stays as it is (publishing skips
			 * it).
			 */
			r->outcome = IDGEN_SEQ_FORGET;
			continue;
		}
		new_values[nnew] = Int64GetDatum(idgen_seq_cache_reserve(r, &row));
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
 * sequencer's transaction.
 */
static void
record_use(const IdgenFunction *ext, IdgenSeqRequest *req, int n)
{
	IdgenSqlContext cx;
	Datum		args[2];

	if (n == 0)
		return;
	idgen_sql_begin(ext, &sequencer_statements, &cx);
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
	int			n = idgen_seq_cache_collect(req, SEQUENCER_BATCH);
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

/* The duties, set at start (idgen_sequencer_set_duties). */
static const IdgenSequencerDuty *duties = NULL;
static int	nduties = 0;

/*
 * Give the sequencer its duties: 'count' of them, run in this order at
 * every purge.  Called by _PG_init, whose file names the functions of the
 * layers above this one; the list is static and outlives the call.
 */
void
idgen_sequencer_set_duties(const IdgenSequencerDuty * list, int count)
{
	duties = list;
	nduties = count;
}

/* A duty's function and its result, for idgen_sql_try. */
typedef struct DutyCall
{
	Oid			nspid;
	const char *function;
	uint64		count;
}			DutyCall;

/*
 * Call the extension's function by its oid, not by a SQL statement: a
 * name, even qualified, is ambiguous once the schema's owner creates a
 * function of that name with a defaulted argument (owner_sql.c).
 */
static void
call_duty(void *arg)
{
	DutyCall   *a = (DutyCall *) arg;
	Oid			fn = idgen_extension_function(a->nspid, a->function);

	a->count = (uint64) DatumGetInt64(OidFunctionCall0(fn));
}

/*
 * Run duty 'd' in a subtransaction: a failure is logged and rolled back,
 * and the other duties and the sequencer go on.  A failure that repeats is
 * logged once an hour, not at every purge (idgen_seq_slot_purge_failed).
 * The function's count, 0 on failure.
 */
static uint64
run_duty(Oid nspid, int d)
{
	const char *function = duties[d].function;
	DutyCall	call = {nspid, function, 0};
	ErrorData  *edata = idgen_sql_try(call_duty, &call);
	uint64		unlogged;

	if (edata == NULL)
	{
		if (idgen_seq_slot_purge_succeeded(d))
			ereport(LOG,
					(errmsg("the idgen sequencer ran %s.%s() again",
							quote_identifier(get_namespace_name(nspid)), function)));
		return call.count;
	}
	if (idgen_seq_slot_purge_failed(d, edata->sqlerrcode, &unlogged))
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("the idgen sequencer could not run %s.%s()",
						quote_identifier(get_namespace_name(nspid)), function),
				 unlogged == 0 ? errdetail("%s", edata->message) :
				 errdetail("%s (It failed " UINT64_FORMAT " more times since this was last logged.)",
						   edata->message, unlogged),
				 errhint("The other purge steps go on; this one is tried again after \"idgen.purge_interval\", and logged again in an hour if it goes on failing.")));
	FreeErrorData(edata);
	return 0;
}

/*
 * One purge, if the extension is installed in this database: record the
 * use of cached keys, then run every duty.  Returns the number of rows the
 * duties deleted.
 */
static uint64
run_duties(IdgenSeqRequest *req)
{
	uint64		deleted = 0;
	IdgenFunction ext;

	if (begin_work("idgen sequencer", &ext))
	{
		record_use(&ext, req, idgen_seq_cache_collect_used(req, idgen_seq_cache_keys));
		for (int d = 0; d < nduties; d++)
		{
			uint64		n = run_duty(ext.nspid, d);

			if (duties[d].counts_deleted)
				deleted += n;
		}
	}
	end_work();
	return deleted;
}

/*
 * Connect to the database of slot 'slot' and take the slot; leave if it
 * changed hands meanwhile, or if the extension is not installed there.
 */
static void
attach_to_slot(int slot)
{
	uint32		generation;
	Oid			dbid;
	IdgenFunction ext;
	bool		installed;

	idgen_bgworker_signals();
	dbid = idgen_seq_slot_dbid(slot, &generation);
	if (!OidIsValid(dbid))
		proc_exit(0);			/* the slot changed hands meanwhile */
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);

	/*
	 * A reservation must be durable before its values are served.  Every
	 * transaction here writes (reservations, purges, the announcement),
	 * whatever default the database's owner set: read-only, they all failed,
	 * and the server's identity claim stood still in that database.
	 */
	SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	before_shmem_exit(idgen_seq_slot_detach, (Datum) 0);
	if (!idgen_seq_cache_sequencer_attach(slot, generation, MyLatch))
		proc_exit(0);

	/*
	 * Nothing to do where the extension is not installed.  (The database's
	 * name is read in the transaction: a catalog lookup outside one crashed
	 * the process at DEBUG1.)
	 */
	installed = begin_work("idgen sequencer", &ext);
	if (installed)
		elog(DEBUG1, "idgen sequencer started in database \"%s\"", get_database_name(MyDatabaseId));
	end_work();
	if (!installed)
		proc_exit(0);
}

/*
 * Main entry point of a database's idgen sequencer (a dynamic background
 * worker started by the launcher for slot main_arg): reserve segments as
 * they are asked for, purge every idgen.purge_interval, and check once a
 * second whether to end.
 */
void
idgen_sequencer_main(Datum main_arg)
{
	IdgenSeqRequest *req;
	TimestampTz next_purge;
	TimestampTz next_check;		/* whether to end, once a second */

	attach_to_slot(DatumGetInt32(main_arg));
	req = MemoryContextAlloc(TopMemoryContext,
							 sizeof(IdgenSeqRequest) * Max(idgen_seq_cache_keys, SEQUENCER_BATCH));
	next_purge = next_check = GetCurrentTimestamp();

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
		if (idgen_seq_slot_pending(&urgent) && !urgent)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 2L, PG_WAIT_EXTENSION);
		progress = reserve_once(req);

		now = GetCurrentTimestamp();
		if (now >= next_purge)
		{
			uint64		deleted = run_duties(req);

			if (deleted > 0)
				elog(DEBUG1, "idgen sequencer deleted " UINT64_FORMAT " expired keys and leases", deleted);
			next_purge = now + (TimestampTz) idgen_purge_interval_s * USECS_PER_SEC;
			next_check = now;
		}

		/* Lent for a purge, done; or no cached key used here for a while. */
		if (now >= next_check)
		{
			if (idgen_seq_cache_sequencer_done(idgen_sequencer_idle_s * 1000))
				proc_exit(0);
			next_check = now + USECS_PER_SEC;
		}

		/*
		 * More to reserve: at once.  Only busy rows to ask again: in 10 ms.
		 * Nothing: sleep until woken, the next check or the next purge.
		 */
		if (idgen_seq_slot_pending(&urgent))
			timeout_ms = progress ? 0 : 10;
		else
			timeout_ms = (long) ((Min(next_purge, next_check) - now) / 1000) + 1;
		if (timeout_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout_ms, PG_WAIT_EXTENSION);
	}
}
