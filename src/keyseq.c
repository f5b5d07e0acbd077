/*-------------------------------------------------------------------------
 *
 * keyseq.c
 *	  Per-key business sequences (transactional mode).
 *
 * One row per key in the extension's table idgen_seq:
 *
 *	  key text PRIMARY KEY, step bigint, max_value bigint (0 = no wrap),
 *	  ttl interval (NULL = keep), last_used timestamptz, value bigint (last
 *	  value handed out, 0 = none)
 *
 *	  last_used is kept up to date for keys with a ttl; for the others it is
 *	  when the key was created or last changed by an administrative function
 *	  (so that their common update writes value only).
 *
 * Semantics
 *	  idgen_seq_next(key, count) is, in the common case, one UPDATE ...
 *	  RETURNING of a live key (Q_NEXT).  Otherwise (a new or expired key, a
 *	  batch that wraps, the end of the bigint range) it locks the key's row
 *	  (SELECT ... FOR UPDATE), computes the values in C and writes the last
 *	  back; a missing key is inserted (ON CONFLICT DO NOTHING, and if another
 *	  session inserted it first, lock that row instead).  The
 *	  values therefore belong to the caller's transaction: a rollback gives
 *	  them back, and concurrent callers of one key queue on its row lock, so
 *	  the committed values of a key are gap-free and in commit order.
 *	  Different keys are different rows and never wait for each other.
 *
 *	  A value past max_value wraps to step (seed 003).  A key whose ttl has
 *	  passed since its last use is forgotten: it behaves exactly as if its
 *	  row had been purged (value and options back to the defaults), which is
 *	  what idgen_seq_purge() and the purge worker do to such rows.
 *
 * Privileges
 *	  The table belongs to the extension's owner and is not granted to
 *	  anyone.  The functions switch to the owner of the function being
 *	  called (the extension's owner) around their own SQL, as SECURITY
 *	  DEFINER would, without the cost of a per-call search_path change:
 *	  every statement is prepared once per backend with the table
 *	  schema-qualified and every operator written OPERATOR(pg_catalog.=), so
 *	  the caller's search_path cannot change what runs.  Who may call what is
 *	  decided by EXECUTE grants in the extension script.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "idgen.h"

PG_FUNCTION_INFO_V1(idgen_seq_next);
PG_FUNCTION_INFO_V1(idgen_seq_next_n);
PG_FUNCTION_INFO_V1(idgen_seq_current);
PG_FUNCTION_INFO_V1(idgen_seq_set);
PG_FUNCTION_INFO_V1(idgen_seq_set_if_absent);
PG_FUNCTION_INFO_V1(idgen_seq_configure);
PG_FUNCTION_INFO_V1(idgen_seq_drop);
PG_FUNCTION_INFO_V1(idgen_seq_purge);

/* Longest key, in bytes. */
#define IDGEN_SEQ_MAX_KEY		256

/* Most values one idgen_seq_next(key, count) call returns. */
#define IDGEN_SEQ_MAX_COUNT		1000000

/* A key's row, as locked or read. */
typedef struct SeqRow
{
	int64		value;
	int64		step;
	int64		max_value;
	bool		has_ttl;
	Interval	ttl;
	TimestampTz last_used;
	ItemPointerData ctid;
} SeqRow;

/* The statements, prepared once per backend for one table name. */
enum
{
	Q_NEXT,						/* the common case of idgen_seq_next, in place */
	Q_LOCK,						/* the row of $1, locked */
	Q_READ,						/* the row of $1, not locked */
	Q_INSERT,					/* a new row, unless one exists */
	Q_WRITE,					/* every column of the row at ctid $1 */
	Q_DELETE,					/* the row of $1 */
	Q_PURGE,					/* every expired row */
	NUM_QUERIES
};

static SPIPlanPtr plans[NUM_QUERIES];
static Oid	plans_namespace = InvalidOid;	/* the schema they were made for */

/* ----------
 * Arguments
 * ----------
 */
static text *
key_arg(FunctionCallInfo fcinfo)
{
	text	   *key;
	int			len;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sequence key must not be null")));
	key = PG_GETARG_TEXT_PP(0);
	len = VARSIZE_ANY_EXHDR(key);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sequence key must not be empty")));
	if (len > IDGEN_SEQ_MAX_KEY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sequence key is too long"),
				 errdetail("The key is %d bytes; the limit is %d.", len, IDGEN_SEQ_MAX_KEY)));
	return key;
}

static bool
ttl_passed(const SeqRow *row, TimestampTz now)
{
	TimestampTz expires;

	if (!row->has_ttl)
		return false;
	expires = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(row->last_used),
													  IntervalPGetDatum(&row->ttl)));
	return expires <= now;
}

static void
row_defaults(SeqRow *row)
{
	row->value = 0;
	row->step = 1;
	row->max_value = 0;
	row->has_ttl = false;
	memset(&row->ttl, 0, sizeof(row->ttl));
}

/* ----------
 * SQL, as the extension's owner
 * ----------
 */

/*
 * The table idgen_seq lives in the schema of the function being called.
 * Prepare the statements for it, once per backend (again if the extension
 * was re-created in another schema since).
 */
static void
prepare_plans(Oid nspid)
{
	static const char *const sql[NUM_QUERIES] = {
		/*
		 * $2 values of a live key in one statement, when that cannot
		 * overflow and does not wrap more than once (count 1 with a
		 * max_value); everything else takes the general path.  The CASE in
		 * WHERE fixes the order of evaluation, so the SET never overflows.
		 * OPERATOR() binds like any other operator, so every operation is
		 * parenthesised.
		 */
		[Q_NEXT] = "UPDATE %s SET last_used = CASE WHEN ttl IS NULL THEN last_used ELSE $3 END, "
		"value = CASE "
		"WHEN (max_value OPERATOR(pg_catalog.>) 0) THEN CASE "
		"WHEN (value OPERATOR(pg_catalog.>) (max_value OPERATOR(pg_catalog.-) step)) THEN step "
		"ELSE (value OPERATOR(pg_catalog.+) step) END "
		"ELSE (value OPERATOR(pg_catalog.+) (step OPERATOR(pg_catalog.*) $2)) END "
		"WHERE (key OPERATOR(pg_catalog.=) $1) "
		"AND (ttl IS NULL OR ((last_used OPERATOR(pg_catalog.+) ttl) OPERATOR(pg_catalog.>) $3)) "
		"AND CASE WHEN (max_value OPERATOR(pg_catalog.>) 0) THEN ($2 OPERATOR(pg_catalog.=) 1) "
		"ELSE (step OPERATOR(pg_catalog.<=) "
		"((9223372036854775807 OPERATOR(pg_catalog.-) value) OPERATOR(pg_catalog./) $2)) END "
		"RETURNING value, step",
		[Q_LOCK] = "SELECT value, step, max_value, ttl, last_used, ctid FROM %s "
		"WHERE key OPERATOR(pg_catalog.=) $1 FOR UPDATE",
		[Q_READ] = "SELECT value, step, max_value, ttl, last_used, ctid FROM %s "
		"WHERE key OPERATOR(pg_catalog.=) $1",
		[Q_INSERT] = "INSERT INTO %s (key, value, step, max_value, ttl, last_used) "
		"VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO NOTHING",
		[Q_WRITE] = "UPDATE %s SET value = $2, step = $3, max_value = $4, ttl = $5, last_used = $6 "
		"WHERE ctid OPERATOR(pg_catalog.=) $1",
		[Q_DELETE] = "DELETE FROM %s WHERE key OPERATOR(pg_catalog.=) $1",
		/*
		 * A batch of expired rows that nobody holds: rows locked by others
		 * are skipped (so a purge never makes a caller wait, nor deadlocks
		 * with one), and a row revived meanwhile fails the re-checked
		 * condition.
		 */
		[Q_PURGE] = "DELETE FROM %1$s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
		"SELECT ctid FROM %1$s WHERE ttl IS NOT NULL "
		"AND ((last_used OPERATOR(pg_catalog.+) ttl) OPERATOR(pg_catalog.<=) $1) "
		"LIMIT 1000 FOR UPDATE SKIP LOCKED))",
	};
	static const int nargs[NUM_QUERIES] = {
		[Q_NEXT] = 3,[Q_LOCK] = 1,[Q_READ] = 1,[Q_INSERT] = 6,[Q_WRITE] = 6,[Q_DELETE] = 1,[Q_PURGE] = 1,
	};
	static Oid	types[NUM_QUERIES][6] = {
		[Q_NEXT] = {TEXTOID, INT8OID, TIMESTAMPTZOID},
		[Q_LOCK] = {TEXTOID},
		[Q_READ] = {TEXTOID},
		[Q_INSERT] = {TEXTOID, INT8OID, INT8OID, INT8OID, INTERVALOID, TIMESTAMPTZOID},
		[Q_WRITE] = {TIDOID, INT8OID, INT8OID, INT8OID, INTERVALOID, TIMESTAMPTZOID},
		[Q_DELETE] = {TEXTOID},
		[Q_PURGE] = {TIMESTAMPTZOID},
	};
	char	   *table;

	if (likely(nspid == plans_namespace))
		return;
	table = psprintf("%s.idgen_seq", quote_identifier(get_namespace_name(nspid)));
	for (int q = 0; q < NUM_QUERIES; q++)
	{
		SPIPlanPtr	plan = SPI_prepare(psprintf(sql[q], table), nargs[q], types[q]);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (plans[q] != NULL)
			SPI_freeplan(plans[q]);
		plans[q] = plan;
		SPI_keepplan(plan);
	}
	plans_namespace = nspid;
}

/* State saved by begin_sql() for end_sql(). */
typedef struct SqlContext
{
	Oid			save_userid;
	int			save_sec_context;
} SqlContext;

/*
 * Connect to SPI as the owner of the function being called (see the file
 * header).  A transaction abort restores the caller's identity by itself.
 */
static void
begin_sql(FunctionCallInfo fcinfo, SqlContext *cx)
{
	Oid			fn_oid = fcinfo->flinfo->fn_oid;
	HeapTuple	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	Oid			owner;
	Oid			nspid;

	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for function %u", fn_oid);
	owner = ((Form_pg_proc) GETSTRUCT(tp))->proowner;
	nspid = ((Form_pg_proc) GETSTRUCT(tp))->pronamespace;
	ReleaseSysCache(tp);

	GetUserIdAndSecContext(&cx->save_userid, &cx->save_sec_context);
	SetUserIdAndSecContext(owner, cx->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	prepare_plans(nspid);
}

static void
end_sql(SqlContext *cx)
{
	SPI_finish();
	SetUserIdAndSecContext(cx->save_userid, cx->save_sec_context);
}

static uint64
run(int q, Datum *values, const char *nulls)
{
	int			rc = SPI_execute_plan(plans[q], values, nulls, false, 0);

	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/* Fetch the key's row (locked if 'lock'); false if there is none. */
static bool
fetch_row(text *key, bool lock, SeqRow *row)
{
	Datum		arg = PointerGetDatum(key);
	TupleDesc	desc;
	HeapTuple	tup;
	bool		isnull;
	Datum		d;

	if (run(lock ? Q_LOCK : Q_READ, &arg, NULL) == 0)
		return false;
	desc = SPI_tuptable->tupdesc;
	tup = SPI_tuptable->vals[0];
	row->value = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	row->step = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
	row->max_value = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
	d = SPI_getbinval(tup, desc, 4, &isnull);
	row->has_ttl = !isnull;
	if (!isnull)
		row->ttl = *DatumGetIntervalP(d);
	row->last_used = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull));
	row->ctid = *(ItemPointer) DatumGetPointer(SPI_getbinval(tup, desc, 6, &isnull));
	return true;
}

/* Column values of 'row' for Q_INSERT ($1 = key) or Q_WRITE ($1 = ctid). */
static void
row_args(const SeqRow *row, Datum first, TimestampTz now, Datum *values, char *nulls)
{
	memset(nulls, ' ', 6);
	values[0] = first;
	values[1] = Int64GetDatum(row->value);
	values[2] = Int64GetDatum(row->step);
	values[3] = Int64GetDatum(row->max_value);
	if (row->has_ttl)
		values[4] = IntervalPGetDatum(&row->ttl);
	else
		nulls[4] = 'n';
	values[5] = TimestampTzGetDatum(now);
}

/*
 * What an operation does to a key's row: change 'row' (which holds the
 * defaults if the key is new or expired) and return whether to write it.
 */
typedef bool (*SeqOp) (SeqRow *row, bool existed, void *arg);

/*
 * Apply 'op' to the key's row under its row lock: insert the row if there is
 * none, or else lock it.  A row whose ttl has passed counts as absent.
 * Returns whether the key existed.  'op' may run twice (on the defaults for
 * the insert, then on the row), so it must only compute from its row.
 */
static bool
apply(text *key, TimestampTz now, SeqOp op, void *arg)
{
	for (;;)
	{
		Datum		values[6];
		char		nulls[6];
		SeqRow		row;
		bool		existed;

		/* A new key first: this path is taken mostly for new keys. */
		row_defaults(&row);
		(void) op(&row, false, arg);
		row_args(&row, PointerGetDatum(key), now, values, nulls);
		if (run(Q_INSERT, values, nulls) == 1)
			return false;

		/* It exists (or another session inserted it first): lock it. */
		if (fetch_row(key, true, &row))
		{
			ItemPointerData ctid = row.ctid;

			existed = !ttl_passed(&row, now);
			if (!existed)
				row_defaults(&row);
			row.ctid = ctid;
			if (op(&row, existed, arg))
			{
				row_args(&row, PointerGetDatum(&row.ctid), now, values, nulls);
				run(Q_WRITE, values, nulls);
			}
			return existed;
		}
		/* Deleted again before we could lock it: start over. */
	}
}

/*
 * The value after 'v': v + step, or step once that passes max_value.
 */
static int64
advance(const SeqRow *row, int64 v, text *key)
{
	int64		next;

	if (pg_add_s64_overflow(v, row->step, &next))
	{
		if (row->max_value > 0)
			return row->step;
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("sequence key \"%s\" has reached the end of the bigint range",
						text_to_cstring(key)),
				 errhint("Configure a max_value so that it wraps, or reset it with idgen_seq_set().")));
	}
	if (row->max_value > 0 && next > row->max_value)
		return row->step;
	return next;
}

/* idgen_seq_next: hand out 'count' values into 'out' (may be NULL). */
typedef struct NextArgs
{
	text	   *key;
	int			count;
	int64	   *out;
} NextArgs;

static bool
op_next(SeqRow *row, bool existed, void *arg)
{
	NextArgs   *a = (NextArgs *) arg;
	int64		v = row->value;

	for (int i = 0; i < a->count; i++)
	{
		v = advance(row, v, a->key);
		if (a->out)
			a->out[i] = v;
	}
	row->value = v;
	return true;
}

static int64
seq_next(FunctionCallInfo fcinfo, text *key, int count, int64 *out)
{
	NextArgs	a = {key, count, out};
	SqlContext	cx;
	int64		last = 0;
	TimestampTz now = GetCurrentTimestamp();
	Datum		args[3];

	if (out == NULL)
		a.out = &last, a.count = 1;
	begin_sql(fcinfo, &cx);

	/* The common case: one UPDATE of a live key (see Q_NEXT). */
	args[0] = PointerGetDatum(key);
	args[1] = Int64GetDatum((int64) a.count);
	args[2] = TimestampTzGetDatum(now);
	if (run(Q_NEXT, args, NULL) == 1)
	{
		bool		isnull;
		int64		v = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
		int64		step = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												   SPI_tuptable->tupdesc, 2, &isnull));

		/* Without a wrap the values are v - (count - 1) * step, ..., v. */
		for (int i = 0; i < a.count; i++)
			a.out[i] = v - (int64) (a.count - 1 - i) * step;
	}
	else
		(void) apply(key, now, op_next, &a);	/* new, expired, wrapping, at the end */
	end_sql(&cx);
	return a.out[a.count - 1];
}

/*
 * idgen_seq_next(key text) returns bigint
 */
Datum
idgen_seq_next(PG_FUNCTION_ARGS)
{
	text	   *key = key_arg(fcinfo);

	PG_RETURN_INT64(seq_next(fcinfo, key, 1, NULL));
}

/*
 * idgen_seq_next(key text, count int) returns setof bigint
 *		The values 'count' single calls would return, in order, with one
 *		row update.
 */
Datum
idgen_seq_next_n(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	int64	   *vals;

	if (SRF_IS_FIRSTCALL())
	{
		text	   *key = key_arg(fcinfo);
		int32		count;
		MemoryContext old;

		if (PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("count must not be null")));
		count = PG_GETARG_INT32(1);
		if (count < 1 || count > IDGEN_SEQ_MAX_COUNT)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("count %d is out of range", count),
					 errdetail("One call returns between 1 and %d values.", IDGEN_SEQ_MAX_COUNT)));

		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		vals = palloc(sizeof(int64) * count);
		MemoryContextSwitchTo(old);
		(void) seq_next(fcinfo, key, count, vals);
		funcctx->user_fctx = vals;
		funcctx->max_calls = count;
	}
	funcctx = SRF_PERCALL_SETUP();
	vals = (int64 *) funcctx->user_fctx;
	if (funcctx->call_cntr < funcctx->max_calls)
	{
		/* SRF_RETURN_NEXT advances call_cntr before it evaluates its result */
		Datum		result = Int64GetDatum(vals[funcctx->call_cntr]);

		SRF_RETURN_NEXT(funcctx, result);
	}
	SRF_RETURN_DONE(funcctx);
}

/*
 * idgen_seq_current(key text) returns bigint
 *		The last value handed out (0 if none yet); NULL for a key that does
 *		not exist or has expired.  Takes no lock.
 */
Datum
idgen_seq_current(PG_FUNCTION_ARGS)
{
	text	   *key = key_arg(fcinfo);
	SqlContext	cx;
	SeqRow		row;
	bool		found;

	begin_sql(fcinfo, &cx);
	found = fetch_row(key, false, &row) && !ttl_passed(&row, GetCurrentTimestamp());
	end_sql(&cx);
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64(row.value);
}

static int64
value_arg(FunctionCallInfo fcinfo, int n)
{
	int64		value;

	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value must not be null")));
	value = PG_GETARG_INT64(n);
	if (value < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value " INT64_FORMAT " is out of range", value),
				 errdetail("A sequence value is 0 (nothing handed out yet) or positive.")));
	return value;
}

/*
 * idgen_seq_set(key text, value bigint) returns void
 *		Overwrite the key's value (creating the key); the next value is the
 *		one after it.
 */
static bool
op_set(SeqRow *row, bool existed, void *arg)
{
	row->value = *(int64 *) arg;
	return true;
}

/* Apply a value-setting 'op' to the key; whether the key existed. */
static bool
set_value(FunctionCallInfo fcinfo, SeqOp op)
{
	text	   *key = key_arg(fcinfo);
	int64		value = value_arg(fcinfo, 1);
	SqlContext	cx;
	bool		existed;

	begin_sql(fcinfo, &cx);
	existed = apply(key, GetCurrentTimestamp(), op, &value);
	end_sql(&cx);
	return existed;
}

Datum
idgen_seq_set(PG_FUNCTION_ARGS)
{
	(void) set_value(fcinfo, op_set);
	PG_RETURN_VOID();
}

/*
 * idgen_seq_set_if_absent(key text, value bigint) returns boolean
 *		Initialise a key that does not exist (or has expired) to 'value';
 *		true if it did, false if the key was already there.
 */
static bool
op_set_if_absent(SeqRow *row, bool existed, void *arg)
{
	if (existed)
		return false;
	row->value = *(int64 *) arg;
	return true;
}

Datum
idgen_seq_set_if_absent(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!set_value(fcinfo, op_set_if_absent));
}

/* Take the options of 'arg', keep the value. */
static bool
op_configure(SeqRow *row, bool existed, void *arg)
{
	const SeqRow *opts = (const SeqRow *) arg;

	row->step = opts->step;
	row->max_value = opts->max_value;
	row->has_ttl = opts->has_ttl;
	row->ttl = opts->ttl;
	return true;
}

/*
 * idgen_seq_configure(key text, step bigint, max_value bigint, ttl interval)
 * returns void
 *		Set the key's options (all of them: an omitted argument takes its
 *		default), creating the key if needed.  Its value is kept.
 */
Datum
idgen_seq_configure(PG_FUNCTION_ARGS)
{
	text	   *key = key_arg(fcinfo);
	SqlContext	cx;
	SeqRow		init;
	TimestampTz now = GetCurrentTimestamp();

	row_defaults(&init);
	if (PG_ARGISNULL(1) || PG_GETARG_INT64(1) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("step must be positive"),
				 errhint("Values go step, 2 * step, ...; the default step is 1.")));
	init.step = PG_GETARG_INT64(1);
	if (PG_ARGISNULL(2) || PG_GETARG_INT64(2) < 0 ||
		(PG_GETARG_INT64(2) > 0 && PG_GETARG_INT64(2) < init.step))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_value " INT64_FORMAT " is invalid for step " INT64_FORMAT,
						PG_ARGISNULL(2) ? (int64) 0 : PG_GETARG_INT64(2), init.step),
				 errdetail("max_value is 0 (no wrap) or at least step: a value past it wraps to step.")));
	init.max_value = PG_GETARG_INT64(2);
	if (!PG_ARGISNULL(3))
	{
		Interval   *ttl = PG_GETARG_INTERVAL_P(3);
		TimestampTz later;

		later = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														TimestampTzGetDatum(now),
														IntervalPGetDatum(ttl)));
		if (later <= now)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ttl must be positive"),
					 errhint("Pass NULL (the default) for a key that never expires.")));
		init.has_ttl = true;
		init.ttl = *ttl;
	}

	begin_sql(fcinfo, &cx);
	(void) apply(key, now, op_configure, &init);
	end_sql(&cx);
	PG_RETURN_VOID();
}

/*
 * idgen_seq_drop(key text) returns boolean
 *		Forget the key; true if it existed (and had not expired).
 */
Datum
idgen_seq_drop(PG_FUNCTION_ARGS)
{
	text	   *key = key_arg(fcinfo);
	Datum		arg = PointerGetDatum(key);
	SqlContext	cx;
	SeqRow		row;
	bool		existed;

	begin_sql(fcinfo, &cx);
	existed = fetch_row(key, true, &row) && !ttl_passed(&row, GetCurrentTimestamp());
	run(Q_DELETE, &arg, NULL);
	end_sql(&cx);
	PG_RETURN_BOOL(existed);
}

/*
 * idgen_seq_purge() returns bigint
 *		Delete the keys whose ttl has passed, in batches of 1000, skipping
 *		rows other transactions hold; the number deleted.
 */
Datum
idgen_seq_purge(PG_FUNCTION_ARGS)
{
	Datum		arg = TimestampTzGetDatum(GetCurrentTimestamp());
	SqlContext	cx;
	uint64		n = 0;
	uint64		batch;

	begin_sql(fcinfo, &cx);
	do
	{
		CHECK_FOR_INTERRUPTS();
		batch = run(Q_PURGE, &arg, NULL);
		n += batch;
	} while (batch == 1000);
	end_sql(&cx);
	PG_RETURN_INT64((int64) n);
}
