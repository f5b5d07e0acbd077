/*-------------------------------------------------------------------------
 *
 * seq_admin.c
 *	  The administrative functions of per-key sequences: set,
 *	  set_if_absent, configure, drop, purge, and the view of the cached
 *	  keys (idgen_seq_cache).  They change a key through idgen_seq_apply
 *	  (seq.c), with every wait for its row bounded (seq_row.c, "Bounded
 *	  waits"); the semantics and privileges are described in seq.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "idgen.h"
#include "idgen_interval.h"
#include "idgen_seq.h"
#include "idgen_sql.h"

PG_FUNCTION_INFO_V1(idgen_seq_set);
PG_FUNCTION_INFO_V1(idgen_seq_set_if_absent);
PG_FUNCTION_INFO_V1(idgen_seq_configure);
PG_FUNCTION_INFO_V1(idgen_seq_drop);
PG_FUNCTION_INFO_V1(idgen_seq_purge);

/* The statements, prepared once per backend (see owner_sql.c). */
enum
{
	Q_PURGE_SCAN,				/* the rows with a ttl */
	Q_PURGE,					/* delete rows $1 that nobody holds */
	NUM_QUERIES
};

static const IdgenStatement statement_list[NUM_QUERIES] = {
	/*
	 * Whether a row has expired is decided in C (idgen_seq_ttl_passed), as
	 * for every other use of a key: calling idgen_expiry here would let its
	 * schema's owner make every statement of this set fail (owner_sql.c). The
	 * purge reads the rows with a ttl through a cursor, and deletes those it
	 * found expired by the row versions it read: a row updated since (used,
	 * revived) is another version, which no longer has that ctid, and a row
	 * another transaction holds is skipped (so a purge never makes a caller
	 * wait, nor deadlocks with one).  While the cursor is open its snapshot
	 * keeps every version it read from being pruned, so no ctid read can be
	 * another row's by then.
	 */
	[Q_PURGE_SCAN] = {
		"SELECT ctid, last_used, ttl, cache FROM %1$s.idgen_seq WHERE ttl IS NOT NULL",
		0, {InvalidOid}, CURSOR_OPT_NO_SCROLL
	},
	[Q_PURGE] = {
		"DELETE FROM %1$s.idgen_seq WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
		"SELECT ctid FROM %1$s.idgen_seq WHERE ctid OPERATOR(pg_catalog.=) ANY ($1) "
		"FOR UPDATE SKIP LOCKED)) RETURNING key, cache",
		1, {TIDARRAYOID}
	},
};

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};


/* Rows a purge reads at a time. */
#define SEQ_SCAN_BATCH		1000

/*
 * Whether the ttl of a row read as (last_used, ttl, cache), from column
 * 'col' of 'tup' on, has passed at 'now' (idgen_seq_ttl_passed).
 */
static bool
read_ttl_passed(HeapTuple tup, TupleDesc desc, int col, TimestampTz now)
{
	IdgenSeqRow row = {0};
	bool		isnull;
	Datum		ttl = SPI_getbinval(tup, desc, col + 1, &isnull);

	row.has_ttl = !isnull;
	if (row.has_ttl)
		row.ttl = *DatumGetIntervalP(ttl);
	row.last_used = DatumGetTimestampTz(SPI_getbinval(tup, desc, col, &isnull));
	row.cache = DatumGetInt32(SPI_getbinval(tup, desc, col + 2, &isnull));
	return idgen_seq_ttl_passed(&row, now);
}


/* What idgen_seq_set and idgen_seq_set_if_absent write. */
typedef struct SetArgs
{
	text	   *key;
	int64		value;
	bool		is_called;
} SetArgs;

/*
 * Set the key's value, as setval() does: within min_value and max_value,
 * the last value handed out ('is_called') or the next one.
 */
static bool
op_set(IdgenSeqRow *row, bool existed, TimestampTz now, void *arg)
{
	SetArgs    *a = (SetArgs *) arg;

	if (a->value < row->min_value || a->value > row->max_value)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value " INT64_FORMAT " is out of bounds for sequence key \"%s\" (" INT64_FORMAT ".." INT64_FORMAT ")",
						a->value, text_to_cstring(a->key), row->min_value, row->max_value),
				 errhint("Change the key's min_value or max_value with idgen_seq_configure() first.")));
	row->value = a->value;
	row->called = a->is_called;
	row->last_used = now;
	return true;
}

/* Apply a value-setting 'op' to the key; whether the key existed. */
static bool
set_value(FunctionCallInfo fcinfo, IdgenSeqOp op, bool is_called)
{
	SetArgs		a;

	a.key = idgen_seq_key_arg(fcinfo);
	idgen_arg_not_null(fcinfo, 1, "value");
	a.value = PG_GETARG_INT64(1);
	a.is_called = is_called;
	return idgen_seq_apply(fcinfo, a.key, op, &a, false) == SEQ_APPLIED_EXISTED;
}

/*
 * idgen_seq_set(key text, value bigint) returns void
 *		Overwrite the key's value (creating the key), as setval(seq, value)
 *		does: the next value is the one after it.
 */
Datum
idgen_seq_set(PG_FUNCTION_ARGS)
{
	(void) set_value(fcinfo, op_set, true);
	PG_RETURN_VOID();
}

/*
 * idgen_seq_set(key text, value bigint, is_called boolean) returns void
 *		setval(seq, value, is_called): with is_called false, 'value' is the
 *		next value handed out.
 */
PG_FUNCTION_INFO_V1(idgen_seq_set3);

Datum
idgen_seq_set3(PG_FUNCTION_ARGS)
{
	idgen_arg_not_null(fcinfo, 2, "is_called");
	(void) set_value(fcinfo, op_set, PG_GETARG_BOOL(2));
	PG_RETURN_VOID();
}

/*
 * idgen_seq_set_if_absent(key text, value bigint) returns boolean
 *		Initialise a key that does not exist (or has expired) to 'value';
 *		true if it did, false if the key was already there.
 */
static bool
op_set_if_absent(IdgenSeqRow *row, bool existed, TimestampTz now, void *arg)
{
	if (existed)
		return false;
	return op_set(row, existed, now, arg);
}

Datum
idgen_seq_set_if_absent(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!set_value(fcinfo, op_set_if_absent, true));
}

/*
 * idgen_seq_configure()'s options: its arguments after the key, in order
 * (option n is argument n + 1), each with its SQL type and the check of a
 * value passed.  The released script of 1.0.0 binds the symbol
 * idgen_seq_configure to the first CONFIGURE_OPTIONS_1_0_0 of them, for
 * ever: an option added later is appended here, and the script of its
 * version binds a symbol of its own that reads the longer list
 * (docs/development.md, "Releasing").
 */
typedef enum SeqOption
{
	OPT_STEP,
	OPT_MAX_VALUE,
	OPT_TTL,
	OPT_CACHE,
	OPT_START,
	OPT_MIN_VALUE,
	OPT_CYCLE,
	OPT_RESTART,
	NUM_OPTIONS
}			SeqOption;

#define CONFIGURE_OPTIONS_1_0_0		8

static void
check_step(Datum value)
{
	if (DatumGetInt64(value) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("step must not be zero"),
				 errhint("A positive step counts up, a negative one down; the default is 1.")));
}

/* ttl => '0' removes the key's ttl; any other must be a valid ttl. */
static void
check_ttl(Datum value)
{
	Interval   *ttl = DatumGetIntervalP(value);

	if (ttl->month != 0 || ttl->day != 0 || ttl->time != 0)
		idgen_ttl_check(ttl);
}

static void
check_cache(Datum value)
{
	int64		cache = DatumGetInt64(value);

	if (cache < 0 || cache > IDGEN_SEQ_MAX_CACHE)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("cache must be between 0 and %d", IDGEN_SEQ_MAX_CACHE),
				 errdetail("0 (the default) is the transactional mode; n > 0 serves the key from shared memory in segments of at least n values.")));
}

static const struct
{
	const char *name;			/* the argument's name in the script */
	Oid			type;			/* its type */
	void		(*check) (Datum value); /* raises the error of a bad value */
}			options[NUM_OPTIONS] = {
	[OPT_STEP] = {"step", INT8OID, check_step},
	[OPT_MAX_VALUE] = {"max_value", INT8OID, NULL},
	[OPT_TTL] = {"ttl", INTERVALOID, check_ttl},
	[OPT_CACHE] = {"cache", INT8OID, check_cache},
	[OPT_START] = {"start", INT8OID, NULL},
	[OPT_MIN_VALUE] = {"min_value", INT8OID, NULL},
	[OPT_CYCLE] = {"cycle", BOOLOID, NULL},
	[OPT_RESTART] = {"restart", INT8OID, NULL},
};

/*
 * The options of an idgen_seq_configure call: those passed (given, not
 * NULL, and checked), the others kept.
 */
typedef struct SeqOptions
{
	text	   *key;
	bool		given[NUM_OPTIONS];
	Datum		value[NUM_OPTIONS];
	int32		cache_after;	/* out: the key's cache setting now */
} SeqOptions;

#define OPTION_GIVEN(o, opt)	((o)->given[(opt)])
#define OPTION_INT64(o, opt)	DatumGetInt64((o)->value[(opt)])

static void
bound_refused(const char *what, int64 value, bool below, int64 bound, const char *key)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 key == NULL ?
			 errmsg("%s (" INT64_FORMAT ") cannot be %s than %s (" INT64_FORMAT ")",
					what, value, below ? "less" : "greater", below ? "min_value" : "max_value", bound) :
			 errmsg("value " INT64_FORMAT " of sequence key \"%s\" cannot be %s than %s (" INT64_FORMAT ")",
					value, key, below ? "less" : "greater", below ? "min_value" : "max_value", bound),
			 key == NULL ? 0 :
			 errhint("Pass restart => n within the new bounds to restart the key there, or move it with idgen_seq_set() first.")));
}

/*
 * Change the options passed, keep the others; a key being created (new or
 * expired) takes CREATE SEQUENCE's defaults for its direction.  The checks
 * are CREATE and ALTER SEQUENCE's, with their SQLSTATE (22023).
 */
static bool
op_configure(IdgenSeqRow *row, bool existed, TimestampTz now, void *arg)
{
	SeqOptions *o = (SeqOptions *) arg;
	IdgenSeqRow r = *row;
	bool		has_min = OPTION_GIVEN(o, OPT_MIN_VALUE);
	bool		has_max = OPTION_GIVEN(o, OPT_MAX_VALUE);
	bool		has_start = OPTION_GIVEN(o, OPT_START);
	bool		has_restart = OPTION_GIVEN(o, OPT_RESTART);
	bool		defaults = !existed && (!has_min || !has_max);

	if (OPTION_GIVEN(o, OPT_STEP))
		r.step = OPTION_INT64(o, OPT_STEP);
	if (!existed)
	{
		/*
		 * 1 .. bigint's end ascending, bigint's start .. -1 descending; the
		 * first value is step (a key counts step, 2 * step, ...), or the
		 * bound given on the side it starts from.
		 */
		r.min_value = has_min ? OPTION_INT64(o, OPT_MIN_VALUE) : (r.step > 0 ? 1 : PG_INT64_MIN);
		r.max_value = has_max ? OPTION_INT64(o, OPT_MAX_VALUE) : (r.step > 0 ? PG_INT64_MAX : -1);
		if (has_start)
			r.start = OPTION_INT64(o, OPT_START);
		else if (r.step > 0)
			r.start = has_min ? r.min_value : r.step;
		else
			r.start = has_max ? r.max_value : r.step;
	}
	else
	{
		if (has_min)
			r.min_value = OPTION_INT64(o, OPT_MIN_VALUE);
		if (has_max)
			r.max_value = OPTION_INT64(o, OPT_MAX_VALUE);
		if (has_start)
			r.start = OPTION_INT64(o, OPT_START);
	}
	if (OPTION_GIVEN(o, OPT_CYCLE))
		r.cycle = DatumGetBool(o->value[OPT_CYCLE]);
	if (OPTION_GIVEN(o, OPT_TTL))
	{
		Interval   *ttl = DatumGetIntervalP(o->value[OPT_TTL]);

		/* '0' removes the ttl */
		r.has_ttl = ttl->month != 0 || ttl->day != 0 || ttl->time != 0;
		r.ttl = *ttl;
	}
	if (OPTION_GIVEN(o, OPT_CACHE))
		r.cache = (int32) OPTION_INT64(o, OPT_CACHE);
	if (has_restart)
	{
		r.value = OPTION_INT64(o, OPT_RESTART);
		r.called = false;
	}
	else if (!r.called)
		r.value = r.start;		/* nothing handed out yet: it starts at start */

	if (r.min_value >= r.max_value)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_value (" INT64_FORMAT ") must be less than max_value (" INT64_FORMAT ")",
						r.min_value, r.max_value),
				 !defaults ? 0 :
				 errdetail("A new key with a negative step has max_value -1 unless given one, and one with a positive step min_value 1."),
				 has_max && OPTION_INT64(o, OPT_MAX_VALUE) == 0 ?
				 errhint("max_value 0 does not mean \"no maximum\": omit max_value, or pass 9223372036854775807.") : 0));
	if (r.start < r.min_value || r.start > r.max_value)
		bound_refused(!existed && !has_start ? "start value (by default, step)" : "start value",
					  r.start, r.start < r.min_value,
					  r.start < r.min_value ? r.min_value : r.max_value, NULL);
	if (r.value < r.min_value || r.value > r.max_value)
	{
		if (has_restart)
			bound_refused("restart value", r.value, r.value < r.min_value,
						  r.value < r.min_value ? r.min_value : r.max_value, NULL);
		bound_refused(NULL, r.value, r.value < r.min_value,
					  r.value < r.min_value ? r.min_value : r.max_value,
					  text_to_cstring(o->key));
	}
	r.last_used = now;
	*row = r;
	o->cache_after = r.cache;
	return true;
}

/*
 * idgen_seq_configure(key text, step bigint, max_value bigint, ttl
 * interval, cache int, start bigint, min_value bigint, cycle boolean,
 * restart bigint) returns void
 *		ALTER SEQUENCE for a key: change the options passed (not NULL), keep
 *		the others; create the key if needed.  Its value is kept, but for
 *		restart, or a key that has handed out nothing yet (which starts at
 *		its start).
 */
static Datum
seq_configure(FunctionCallInfo fcinfo, int noptions)
{
	SeqOptions	o = {0};

	if (PG_NARGS() != noptions + 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the extension's idgen_seq_configure() has %d arguments, this library's %d",
						PG_NARGS(), noptions + 1),
				 errhint("The extension's SQL and its library differ: make them the same version (ALTER EXTENSION idgen UPDATE, or the library of the extension's version).")));
	o.key = idgen_seq_key_arg(fcinfo);
	for (int opt = 0; opt < noptions; opt++)
	{
		Assert(get_fn_expr_argtype(fcinfo->flinfo, opt + 1) == InvalidOid ||
			   get_fn_expr_argtype(fcinfo->flinfo, opt + 1) == options[opt].type);
		if ((o.given[opt] = !PG_ARGISNULL(opt + 1)))
		{
			o.value[opt] = PG_GETARG_DATUM(opt + 1);
			if (options[opt].check != NULL)
				options[opt].check(o.value[opt]);
		}
	}

	(void) idgen_seq_apply(fcinfo, o.key, op_configure, &o, false);
	if (o.cache_after > 0)
	{
		char	   *why;
		bool		for_now;

		idgen_seq_slot_want();
		why = idgen_seq_slot_why_not(&for_now);
		if (why != NULL && !for_now)
			ereport(NOTICE,
					(errmsg("sequence key \"%s\" is served transactionally in this database, not from shared memory",
							text_to_cstring(o.key)),
					 errdetail("Cached keys are served from shared memory only where their segments are reserved: %s.", why),
					 errhint("The key works, with the guarantees and the cost of the transactional mode; the column \"served\" of view \"idgen_seq_keys\" shows it.")));
	}
	PG_RETURN_VOID();
}

/* The options of 1.0.0's script (see "idgen_seq_configure()'s options"). */
Datum
idgen_seq_configure(PG_FUNCTION_ARGS)
{
	return seq_configure(fcinfo, CONFIGURE_OPTIONS_1_0_0);
}

/*
 * idgen_seq_drop(key text) returns boolean
 *		Forget the key; true if it existed (and had not expired).
 */
typedef struct DropState
{
	text	   *key;
	IdgenSeqTable t;
	bool		existed;		/* out */
} DropState;

static void
drop_row(void *arg)
{
	DropState  *d = (DropState *) arg;
	IdgenSeqRow row;

	if (idgen_seq_lock_row(&d->t, d->key, &row, false) == SEQ_ROW_LOCKED)
	{
		Oid			relid = RelationGetRelid(d->t.rel);
		IdgenSeqHeld *h = idgen_seq_held_find(relid, VARDATA_ANY(d->key),
											  VARSIZE_ANY_EXHDR(d->key));

		if (h != NULL && h->present)
			row = h->row;		/* a key this transaction holds */
		d->existed = !idgen_seq_ttl_passed(&row, GetCurrentTimestamp());
		idgen_seq_delete_row(&d->t);
		idgen_seq_held_deleted(relid, VARDATA_ANY(d->key), VARSIZE_ANY_EXHDR(d->key));
	}
}

Datum
idgen_seq_drop(PG_FUNCTION_ARGS)
{
	text	   *key = idgen_seq_key_arg(fcinfo);
	IdgenFunction fn;

	DropState	d;

	PreventCommandIfReadOnly("idgen_seq_drop()");
	idgen_lookup_function(fcinfo, &fn);
	idgen_seq_open_table(&fn, &d.t);
	d.key = key;
	d.existed = false;
	idgen_seq_run_bounded(key, &d.t, drop_row, &d);
	idgen_seq_close_table(&d.t);
	idgen_seq_cache_invalidate(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	PG_RETURN_BOOL(d.existed);
}

/*
 * idgen_seq_purge() returns bigint
 *		Delete the keys whose ttl has passed, in batches of 1000, skipping
 *		rows other transactions hold; the number deleted.
 */
Datum
idgen_seq_purge(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	IdgenFunction fn;
	IdgenSqlContext cx;
	Portal		portal;
	uint64		n = 0;
	uint64		fetched;
	Oid			relid;

	/* The keys this transaction holds are judged by their last use. */
	idgen_seq_held_write_all();
	relid = idgen_seq_relid(fcinfo);
	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	portal = idgen_sql_open(&cx, Q_PURGE_SCAN, NULL, NULL, false);
	do
	{
		Datum	   *tids;
		int			expired = 0;
		Datum		arg;
		uint64		deleted;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, SEQ_SCAN_BATCH);
		fetched = SPI_processed;
		tids = palloc(sizeof(Datum) * Max(fetched, 1));
		for (uint64 i = 0; i < fetched; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			bool		isnull;

			if (read_ttl_passed(tup, SPI_tuptable->tupdesc, 2, now))
			{
				ItemPointer tid = palloc(sizeof(ItemPointerData));

				ItemPointerCopy((ItemPointer) DatumGetPointer(SPI_getbinval(tup, SPI_tuptable->tupdesc,
																			1, &isnull)), tid);
				tids[expired++] = PointerGetDatum(tid);
			}
		}
		SPI_freetuptable(SPI_tuptable);
		if (expired == 0)
			continue;
		arg = PointerGetDatum(construct_array(tids, expired, TIDOID, sizeof(ItemPointerData),
											  false, TYPALIGN_SHORT));
		deleted = idgen_sql_run(&cx, Q_PURGE, &arg, NULL);
		for (uint64 i = 0; i < deleted; i++)
		{
			bool		isnull;
			char	   *k = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

			idgen_seq_held_deleted(relid, k, strlen(k));
			if (DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)) > 0)
				idgen_seq_cache_invalidate(k, strlen(k));
			pfree(k);
		}
		SPI_freetuptable(SPI_tuptable);
		n += deleted;
		for (int i = 0; i < expired; i++)
			pfree(DatumGetPointer(tids[i]));
		pfree(tids);
		pfree(DatumGetPointer(arg));
	} while (fetched == SEQ_SCAN_BATCH);
	SPI_cursor_close(portal);
	idgen_sql_end(&cx);
	PG_RETURN_INT64((int64) n);
}

/*
 * idgen_seq_cache() returns setof record: the cached keys of this database
 */
PG_FUNCTION_INFO_V1(idgen_seq_cache);

static void
emit_cache_row(void *arg, const IdgenSeqCacheRow *r)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[10];
	bool		nulls[10] = {false};

	values[0] = CStringGetTextDatum(r->key);
	values[1] = Int32GetDatum(r->cache);
	values[2] = Int64GetDatum(r->segment_size);
	values[3] = Int64GetDatum(r->served);
	values[4] = Int64GetDatum(r->fetches);
	values[5] = Int64GetDatum(r->waits);
	values[6] = Int64GetDatum(r->segment_first);
	values[7] = Int64GetDatum(r->segment_last);
	values[8] = Int64GetDatum(r->segment_left);
	values[9] = BoolGetDatum(r->next_ready);
	nulls[6] = nulls[7] = !r->has_segment;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

Datum
idgen_seq_cache(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	idgen_seq_cache_report(emit_cache_row, rsinfo, idgen_seq_relid(fcinfo));
	return (Datum) 0;
}
