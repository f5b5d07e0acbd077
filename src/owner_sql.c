/*-------------------------------------------------------------------------
 *
 * owner_sql.c
 *	  SQL run by idgen's functions on the extension's own tables, as the
 *	  extension's owner.
 *
 * The tables (idgen_seq, idgen_worker_lease) belong to the extension's owner
 * and are granted to nobody.  A function that reads or writes them through
 * SQL switches to the owner of the function being called (the extension's
 * owner) around that SQL, as SECURITY DEFINER would, without the cost of a
 * per-call search_path change: every statement is prepared once per backend
 * with the extension's schema spliced in, quoted, and every operator written
 * OPERATOR(pg_catalog.=), so the caller's search_path cannot change what
 * runs.  Who may call what is decided by EXECUTE grants in the extension
 * script.
 *
 * A statement set (IdgenStatements) is a table of SQL texts in which %1$s
 * stands for the quoted schema name; it is prepared on first use and again
 * if the extension was re-created in another schema, or its schema renamed,
 * since.  It is the one cache of prepared statements in idgen: the SQL
 * functions and the idgen purge process (seq_worker.c) use it alike.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "idgen.h"
#include "idgen_sql.h"

/*
 * The owner and schema of the function being called.
 */
void
idgen_lookup_function(FunctionCallInfo fcinfo, IdgenFunction *fn)
{
	Oid			fn_oid = fcinfo->flinfo->fn_oid;
	HeapTuple	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));

	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for function %u", fn_oid);
	fn->owner = ((Form_pg_proc) GETSTRUCT(tp))->proowner;
	fn->nspid = ((Form_pg_proc) GETSTRUCT(tp))->pronamespace;
	ReleaseSysCache(tp);
}

/*
 * For a background process, which calls no function of the extension: the
 * extension's schema in this database, and the process's own user (the
 * bootstrap superuser) as the owner to run as.  False if the extension is
 * not installed here.  Needs a transaction.
 */
bool
idgen_lookup_extension(IdgenFunction *fn)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("idgen"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	found = HeapTupleIsValid(tup);
	if (found)
		fn->nspid = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	fn->owner = GetUserId();
	return found;
}

static void
prepare_statements(IdgenStatements *st, Oid nspid)
{
	char	   *name = get_namespace_name(nspid);
	char	   *schema;

	/* Prepared for this schema, under this name (ALTER SCHEMA ... RENAME). */
	if (likely(nspid == st->nspid && name != NULL && strcmp(name, st->nspname) == 0))
		return;
	if (name == NULL)
		elog(ERROR, "cache lookup failed for schema %u", nspid);
	schema = pstrdup(quote_identifier(name));
	for (int q = 0; q < st->count; q++)
	{
		const IdgenStatement *s = &st->statements[q];
		SPIPlanPtr	plan = SPI_prepare_cursor(psprintf(s->sql, schema), s->nargs,
											  (Oid *) s->argtypes, s->cursor_options);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (st->plans[q] != NULL)
			SPI_freeplan(st->plans[q]);
		st->plans[q] = plan;
		SPI_keepplan(plan);
	}
	st->nspid = nspid;
	strlcpy(st->nspname, name, sizeof(st->nspname));
}

/*
 * Connect to SPI as the owner of the function being called, with 'st'
 * prepared.  A transaction abort restores the caller's identity by itself.
 */
void
idgen_sql_begin(const IdgenFunction *fn, IdgenStatements *st, IdgenSqlContext *cx)
{
	GetUserIdAndSecContext(&cx->save_userid, &cx->save_sec_context);
	SetUserIdAndSecContext(fn->owner, cx->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cx->statements = st;
	prepare_statements(st, fn->nspid);
}

void
idgen_sql_end(IdgenSqlContext *cx)
{
	SPI_finish();
	SetUserIdAndSecContext(cx->save_userid, cx->save_sec_context);
}

/*
 * Run statement 'q' (nulls as for SPI_execute_plan); the number of rows
 * processed, with the rows in SPI_tuptable.
 */
uint64
idgen_sql_run(IdgenSqlContext *cx, int q, Datum *values, const char *nulls)
{
	int			rc = SPI_execute_plan(cx->statements->plans[q], values, nulls, false, 0);

	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * Run statement 'q' with a snapshot taken now, whatever the isolation level:
 * for a write to a row whose writers all hold one lock, which the caller
 * holds (so the latest version is committed and may be written), and for
 * the read that decides it.  Under REPEATABLE READ the transaction's own
 * snapshot would fail such a write with a serialization error.
 */
uint64
idgen_sql_run_latest(IdgenSqlContext *cx, int q, Datum *values, const char *nulls)
{
	int			rc;

	CommandCounterIncrement();
	rc = SPI_execute_snapshot(cx->statements->plans[q], values, nulls,
							  GetLatestSnapshot(), InvalidSnapshot, false, true, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute_snapshot failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * Run step(arg) in a subtransaction of its own.  NULL if it completed (its
 * work is then the caller's); otherwise its error, copied into the caller's
 * memory context, with all it did rolled back, for the caller to report,
 * raise again (ReThrowError) or take for an answer.  PL/pgSQL's exception
 * block, for the statements of idgen that may fail without failing their
 * caller.
 */
ErrorData *
idgen_sql_try(void (*step) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		step(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return edata;
}
