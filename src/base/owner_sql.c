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
 * stands for the quoted schema name.  Each statement is prepared on its
 * first run, and again if the extension was re-created in another schema,
 * or its schema renamed, since; one that cannot be prepared fails the calls
 * that run it and no other.  It is the one cache of prepared statements in
 * idgen: the SQL functions and the idgen sequencer (sequencer.c) use
 * it alike.
 *
 * What a statement may name.  The statements run as the extension's owner
 * with the caller's search_path, in a schema whose owner (and, in a
 * database from before PostgreSQL 15, every role) may create objects next
 * to idgen's.  So they name only what nobody else can make mean something
 * else:
 *
 *	  - the extension's tables, schema-qualified: a relation's name is
 *		unique in its schema, and a qualified name never reaches pg_temp;
 *	  - operators as OPERATOR(pg_catalog.op), and functions and aggregates
 *		as pg_catalog.name, on operands of pg_catalog's types only: the
 *		exact match in pg_catalog wins, and only pg_catalog is searched;
 *	  - none of the extension's own functions.  A function of the
 *		extension's schema, even called qualified with its exact argument
 *		types, is ambiguous (42725) once its schema's owner creates one of
 *		the same name with one more, defaulted, argument.  What a function
 *		of idgen would compute is computed in C (idgen_expiry's test, in
 *		seq_row.c), and the sequencer calls idgen's purge functions by oid
 *		(idgen_extension_function).
 *
 * Test test/t/030_shadowing.pl creates such look-alikes for every name the
 * statements use.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
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

/*
 * The oid of function 'name'('argtypes') of the extension in schema
 * 'nspid': looked up by its exact signature, which nothing else in the
 * schema can share, and refused unless it is a member of the extension
 * (for the idgen sequencer, which runs as a superuser, and for
 * idgen_convert_column(), which calls the extension's functions by oid).
 */
Oid
idgen_extension_function_args(Oid nspid, const char *name, int nargs, const Oid *argtypes)
{
	Oid			fn = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum(name),
									 PointerGetDatum(buildoidvector(argtypes, nargs)),
									 ObjectIdGetDatum(nspid));

	if (!OidIsValid(fn) ||
		getExtensionOfObject(ProcedureRelationId, fn) != get_extension_oid("idgen", false))
	{
		StringInfoData args;

		initStringInfo(&args);
		for (int i = 0; i < nargs; i++)
			appendStringInfo(&args, "%s%s", i > 0 ? ", " : "", format_type_be(argtypes[i]));
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("extension \"idgen\" has no function %s.%s(%s)",
						quote_identifier(get_namespace_name(nspid)), name, args.data),
				 errhint("Drop and create the extension again.")));
	}
	return fn;
}

/* The same, for a function with no argument. */
Oid
idgen_extension_function(Oid nspid, const char *name)
{
	return idgen_extension_function_args(nspid, name, 0, NULL);
}

/*
 * The oid of the extension's table 'name' in the schema of 'fn': the one
 * way idgen finds its tables (idgen_seq, idgen_worker_lease,
 * idgen_public_key).  A relation's name is unique in its schema.  Missing
 * (the extension being dropped, or its table detached by hand): an error,
 * 42P01, or InvalidOid if 'missing_ok'.
 */
Oid
idgen_extension_table(const IdgenFunction *fn, const char *name, bool missing_ok)
{
	Oid			relid = get_relname_relid(name, fn->nspid);

	if (!OidIsValid(relid) && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"%s.%s\" does not exist",
						get_namespace_name(fn->nspid), name),
				 errhint("Drop and create the extension again.")));
	return relid;
}

/*
 * Forget the plans of 'st' if they were prepared for another schema, or
 * under another name of this one (ALTER SCHEMA ... RENAME).
 */
static void
check_schema(IdgenStatements *st, Oid nspid)
{
	char	   *name = get_namespace_name(nspid);

	if (likely(nspid == st->nspid && name != NULL && strcmp(name, st->nspname) == 0))
		return;
	if (name == NULL)
		elog(ERROR, "cache lookup failed for schema %u", nspid);
	for (int q = 0; q < st->count; q++)
	{
		if (st->plans[q] != NULL)
			SPI_freeplan(st->plans[q]);
		st->plans[q] = NULL;
	}
	st->nspid = nspid;
	strlcpy(st->nspname, name, sizeof(st->nspname));
}

/* Statement 'q', prepared on its first run (see the file header). */
static SPIPlanPtr
statement_plan(IdgenSqlContext *cx, int q)
{
	IdgenStatements *st = cx->statements;

	if (unlikely(st->plans[q] == NULL))
	{
		const IdgenStatement *s = &st->statements[q];
		SPIPlanPtr	plan = SPI_prepare_cursor(psprintf(s->sql, quote_identifier(st->nspname)),
											  s->nargs, (Oid *) s->argtypes,
											  s->cursor_options);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		st->plans[q] = plan;
	}
	return st->plans[q];
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
	cx->nspid = fn->nspid;
	check_schema(st, fn->nspid);
}

/*
 * Run the statements of 'st' in 'cx' from now on: for a function of one
 * file that runs its own statements in a context its caller began.  The
 * set run before, which the function gives back the same way.
 */
IdgenStatements *
idgen_sql_use(IdgenSqlContext *cx, IdgenStatements *st)
{
	IdgenStatements *before = cx->statements;

	cx->statements = st;
	check_schema(st, cx->nspid);
	return before;
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
	int			rc = SPI_execute_plan(statement_plan(cx, q), values, nulls, false, 0);

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
	CommandCounterIncrement();
	return idgen_sql_run_in(cx, q, values, nulls, GetLatestSnapshot());
}

/*
 * Run statement 'q' with 'snapshot': for reads that make one decision
 * together, which must all see the same moment (the caller registers a
 * snapshot taken once, and runs each of them with it).
 */
uint64
idgen_sql_run_in(IdgenSqlContext *cx, int q, Datum *values, const char *nulls, Snapshot snapshot)
{
	int			rc = SPI_execute_snapshot(statement_plan(cx, q), values, nulls,
										  snapshot, InvalidSnapshot, false, true, 0);

	if (rc < 0)
		elog(ERROR, "SPI_execute_snapshot failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * Open statement 'q', a SELECT, as a cursor: with a snapshot taken now if
 * 'latest' (as idgen_sql_run_latest), else the transaction's.  For reads
 * that may stop early, or must hold their snapshot while the rows they
 * return are written (SPI_cursor_fetch, SPI_cursor_close).
 */
Portal
idgen_sql_open(IdgenSqlContext *cx, int q, Datum *values, const char *nulls, bool latest)
{
	SPIPlanPtr	plan = statement_plan(cx, q);
	Portal		portal;

	CommandCounterIncrement();
	PushActiveSnapshot(latest ? GetLatestSnapshot() : GetTransactionSnapshot());
	portal = SPI_cursor_open(NULL, plan, values, nulls, true);
	PopActiveSnapshot();
	if (portal == NULL)
		elog(ERROR, "SPI_cursor_open failed: %s", SPI_result_code_string(SPI_result));
	return portal;
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
