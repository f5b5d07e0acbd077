/*-------------------------------------------------------------------------
 *
 * seq.c
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
 *	  Every change to a key (idgen_seq_next, set, configure, drop) locks the
 *	  latest version of the key's row, computes in C and writes the row back
 *	  (see "Direct access" below); a missing key is inserted (ON CONFLICT DO
 *	  NOTHING, and if another session inserted it first, its row is locked
 *	  instead).  The values therefore belong to the caller's transaction: a
 *	  rollback gives them back, and concurrent callers of one key queue on
 *	  its row lock, so the committed values of a key are gap-free and in
 *	  commit order.  Different keys are different rows and never wait for
 *	  each other.
 *
 *	  A value past max_value wraps to step.  A key whose ttl has
 *	  passed since its last use is forgotten: it behaves exactly as if its
 *	  row had been purged (value and options back to the defaults), which is
 *	  what idgen_seq_purge() and the purge worker do to such rows.
 *
 * Privileges
 *	  The table belongs to the extension's owner and is not granted to
 *	  anyone.  Direct access checks no table privilege, as the functions act
 *	  for the extension; their SQL (inserting a key, reading, purging) runs
 *	  as the extension's owner (owner_sql.c).  Who may call what is decided by
 *	  EXECUTE grants in the extension script.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "compat.h"
#include "idgen_seq.h"
#include "idgen_sql.h"

PG_FUNCTION_INFO_V1(idgen_seq_next);
PG_FUNCTION_INFO_V1(idgen_seq_next_n);
PG_FUNCTION_INFO_V1(idgen_seq_current);
PG_FUNCTION_INFO_V1(idgen_seq_set);
PG_FUNCTION_INFO_V1(idgen_seq_set_if_absent);
PG_FUNCTION_INFO_V1(idgen_seq_configure);
PG_FUNCTION_INFO_V1(idgen_seq_drop);
PG_FUNCTION_INFO_V1(idgen_seq_purge);

/* Setting: the ttl of keys created without one, in seconds (0: none). */
int			idgen_seq_default_ttl_s = 0;

/* Most values one idgen_seq_next(key, count) call returns. */
#define IDGEN_SEQ_MAX_COUNT		1000000

/* The table's columns, in order. */
enum
{
	COL_KEY = 1,
	COL_STEP,
	COL_MAX_VALUE,
	COL_TTL,
	COL_LAST_USED,
	COL_CACHE,
	COL_CREATED_BY,
	COL_VALUE,
	NUM_COLS = COL_VALUE
};

/* A key's row, as locked or read. */
typedef struct SeqRow
{
	int64		value;
	int64		step;
	int64		max_value;
	bool		has_ttl;
	Interval	ttl;
	TimestampTz last_used;
	int32		cache;			/* > 0: cached mode, minimum segment size */
	Oid			created_by;		/* the role that created the key */
} SeqRow;

/* The statements, prepared once per backend (see owner_sql.c). */
enum
{
	Q_READ,						/* the row of $1, not locked */
	Q_INSERT,					/* a new row, unless one exists */
	Q_PURGE,					/* a batch of expired rows */
	NUM_QUERIES
};

static const IdgenStatement statement_list[NUM_QUERIES] = {
	[Q_READ] = {
		"SELECT key, step, max_value, ttl, last_used, cache, created_by, value FROM %1$s.idgen_seq "
		"WHERE key OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[Q_INSERT] = {
		"INSERT INTO %1$s.idgen_seq (key, step, max_value, ttl, last_used, cache, created_by, value) "
		"VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (key) DO NOTHING",
		NUM_COLS, {TEXTOID, INT8OID, INT8OID, INTERVALOID, TIMESTAMPTZOID, INT4OID, OIDOID, INT8OID}
	},

	/*
	 * A batch of expired rows that nobody holds: rows locked by others are
	 * skipped (so a purge never makes a caller wait, nor deadlocks with
	 * one), and a row revived meanwhile fails the re-checked condition.
	 */
	[Q_PURGE] = {
		"DELETE FROM %1$s.idgen_seq WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
		"SELECT ctid FROM %1$s.idgen_seq WHERE ttl IS NOT NULL "
		"AND (%1$s.idgen_expiry(last_used, ttl) OPERATOR(pg_catalog.<=) "
		"CASE WHEN (cache OPERATOR(pg_catalog.>) 0) THEN $2 ELSE $1 END) "
		"LIMIT 1000 FOR UPDATE SKIP LOCKED)) RETURNING key, cache",
		2, {TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
};

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};

/* ----------
 * Arguments
 * ----------
 */
static text *
key_arg(FunctionCallInfo fcinfo)
{
	text	   *key;
	int			len;

	idgen_arg_not_null(fcinfo, 0, "sequence key");
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

/*
 * Whether the key's ttl has passed since its last use.  The use of a cached
 * key is recorded in its row by the worker (at each reservation and each
 * purge run), so it may be up to idgen.purge_interval more recent than the
 * row says: such a key expires that much later.
 */
static bool
ttl_passed(const SeqRow *row, TimestampTz now)
{
	TimestampTz expires;

	if (!row->has_ttl)
		return false;
	/* An expiry beyond the timestamp range is never (interval.c). */
	if (!idgen_timestamptz_add(row->last_used, &row->ttl, &expires))
		return false;
	if (row->cache > 0)
		expires += (TimestampTz) idgen_purge_interval_s * USECS_PER_SEC;
	return expires <= now;
}

/* A new (or forgotten) key's row, created at 'now'. */
static void
row_defaults(SeqRow *row, TimestampTz now)
{
	row->value = 0;
	row->step = 1;
	row->max_value = 0;
	/* idgen.seq_default_ttl, in seconds; 0: none */
	row->has_ttl = idgen_seq_default_ttl_s > 0;
	memset(&row->ttl, 0, sizeof(row->ttl));
	row->ttl.day = idgen_seq_default_ttl_s / SECS_PER_DAY;
	row->ttl.time = (int64) (idgen_seq_default_ttl_s % SECS_PER_DAY) * USECS_PER_SEC;
	row->cache = 0;
	row->last_used = now;
	row->created_by = GetUserId();
}

/* A row's columns from their values (key and ctid aside). */
static void
row_from_values(SeqRow *row, const Datum *values, const bool *isnull)
{
	row->step = DatumGetInt64(values[COL_STEP - 1]);
	row->max_value = DatumGetInt64(values[COL_MAX_VALUE - 1]);
	row->has_ttl = !isnull[COL_TTL - 1];
	if (row->has_ttl)
		row->ttl = *DatumGetIntervalP(values[COL_TTL - 1]);
	row->last_used = DatumGetTimestampTz(values[COL_LAST_USED - 1]);
	row->cache = DatumGetInt32(values[COL_CACHE - 1]);
	row->created_by = DatumGetObjectId(values[COL_CREATED_BY - 1]);
	row->value = DatumGetInt64(values[COL_VALUE - 1]);
}

/* The values of a row's columns (but the first, the key). */
static void
row_to_values(SeqRow *row, Datum *values, bool *isnull)
{
	values[COL_STEP - 1] = Int64GetDatum(row->step);
	isnull[COL_STEP - 1] = false;
	values[COL_MAX_VALUE - 1] = Int64GetDatum(row->max_value);
	isnull[COL_MAX_VALUE - 1] = false;
	values[COL_TTL - 1] = IntervalPGetDatum(&row->ttl);
	isnull[COL_TTL - 1] = !row->has_ttl;
	values[COL_LAST_USED - 1] = TimestampTzGetDatum(row->last_used);
	isnull[COL_LAST_USED - 1] = false;
	values[COL_CACHE - 1] = Int32GetDatum(row->cache);
	isnull[COL_CACHE - 1] = false;
	values[COL_CREATED_BY - 1] = ObjectIdGetDatum(row->created_by);
	isnull[COL_CREATED_BY - 1] = false;
	values[COL_VALUE - 1] = Int64GetDatum(row->value);
	isnull[COL_VALUE - 1] = false;
}

/* Read the key's row under the caller's snapshot; false if there is none. */
static bool
read_row(IdgenSqlContext *cx, text *key, SeqRow *row)
{
	Datum		arg = PointerGetDatum(key);
	Datum		values[NUM_COLS];
	bool		isnull[NUM_COLS];

	if (idgen_sql_run(cx, Q_READ, &arg, NULL) == 0)
		return false;
	heap_deform_tuple(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, values, isnull);
	row_from_values(row, values, isnull);
	return true;
}

/* Insert the key's row, unless the key exists; whether it did. */
static bool
insert_row(const IdgenFunction *fn, text *key, SeqRow *row)
{
	IdgenSqlContext	cx;
	Datum		values[NUM_COLS];
	bool		isnull[NUM_COLS];
	char		nulls[NUM_COLS];
	bool		inserted;

	values[COL_KEY - 1] = PointerGetDatum(key);
	isnull[COL_KEY - 1] = false;
	row_to_values(row, values, isnull);
	for (int i = 0; i < NUM_COLS; i++)
		nulls[i] = isnull[i] ? 'n' : ' ';
	idgen_sql_begin(fn, &statements, &cx);
	/*
	 * A row another transaction committed since this one's snapshot is a
	 * conflict like any other (see lock_row), not a serialization failure.
	 */
	inserted = idgen_sql_run_latest(&cx, Q_INSERT, values, nulls) == 1;
	idgen_sql_end(&cx);
	return inserted;
}

/* ----------
 * Direct access to a key's row
 *
 * Locking a key's row and writing it back is what nearly every call does, so
 * it goes straight to the primary key index and the heap, without the SQL
 * executor: a scan of the index with a dirty snapshot finds the key's row
 * (committed or not), table_tuple_lock() waits for whoever holds it and
 * locks its latest version, and simple_heap_update() writes the new version
 * (a HOT update as a rule; otherwise the indexes get their entries here).
 * Because it always works on the latest committed version, like
 * SELECT ... FOR UPDATE in READ COMMITTED, a key's values are gap-free and in
 * commit order at every isolation level, and a caller that waited never gets
 * a serialization failure.  No trigger fires, so the table must keep no
 * more than the extension gave it (checked on open); indexes may be added
 * or rebuilt.
 * ----------
 */
typedef struct SeqTable
{
	Relation	rel;
	Relation	idx;
	TupleTableSlot *slot;		/* the locked row */
} SeqTable;

static void
open_table(const IdgenFunction *fn, SeqTable *t)
{
	static const Oid coltypes[NUM_COLS] = {
		TEXTOID, INT8OID, INT8OID, INTERVALOID, TIMESTAMPTZOID, INT4OID, OIDOID, INT8OID
	};
	Oid			relid = get_relname_relid("idgen_seq", fn->nspid);
	TupleDesc	desc;
	bool		as_created;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s.idgen_seq\" does not exist", get_namespace_name(fn->nspid))));
	t->rel = table_open(relid, RowExclusiveLock);
	desc = RelationGetDescr(t->rel);
	list_free(RelationGetIndexList(t->rel));	/* sets rd_pkindex */
	as_created = desc->natts == NUM_COLS &&
		t->rel->trigdesc == NULL &&
		t->rel->rd_rel->relkind == RELKIND_RELATION &&
		OidIsValid(t->rel->rd_pkindex);
	for (int i = 0; as_created && i < NUM_COLS; i++)
		as_created = !TupleDescAttr(desc, i)->attisdropped &&
			TupleDescAttr(desc, i)->atttypid == coltypes[i];
	if (!as_created)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has been altered", RelationGetRelationName(t->rel)),
				 errdetail("idgen writes the table directly, without firing triggers, and knows only its own columns and primary key."),
				 errhint("Drop the triggers or columns added to it.")));
	t->idx = index_open(t->rel->rd_pkindex, RowExclusiveLock);
	t->slot = table_slot_create(t->rel, NULL);
}

static void
close_table(SeqTable *t)
{
	ExecDropSingleTupleTableSlot(t->slot);
	index_close(t->idx, NoLock);
	table_close(t->rel, NoLock);
}

/* What lock_row() found. */
typedef enum RowFound
{
	ROW_NONE,					/* the key has no row */
	ROW_LOCKED,					/* locked, in t->slot and 'row' */
	ROW_CACHED					/* a live cached key, not locked, in 'row' */
} RowFound;

static void
row_from_slot(TupleTableSlot *slot, SeqRow *row)
{
	Datum		values[NUM_COLS];
	bool		isnull[NUM_COLS];

	slot_getallattrs(slot);
	memcpy(values, slot->tts_values, sizeof(values));
	memcpy(isnull, slot->tts_isnull, sizeof(isnull));
	row_from_values(row, values, isnull);
}

/*
 * Whether the row in 'slot' was written or locked by this transaction (which
 * then holds its lock until it ends).
 */
static bool
row_is_mine(TupleTableSlot *slot)
{
	bool		should_free;
	HeapTuple	tup = ExecFetchSlotHeapTuple(slot, false, &should_free);
	bool		mine;

	mine = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data)) ||
		TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmax(tup->t_data));
	if (should_free)
		heap_freetuple(tup);
	return mine;
}

/*
 * Lock the latest version of the key's row into t->slot and read it into
 * 'row'.  With 'stop_if_cached', a committed row of a live cached key that
 * this transaction does not hold is only read, not locked (ROW_CACHED): its
 * values are served from shared memory, and the worker that reserves them
 * must be able to lock the row.
 */
static RowFound
lock_row(SeqTable *t, text *key, SeqRow *row, bool stop_if_cached)
{
	/* See the rows written so far in this transaction, SPI's included. */
	CommandCounterIncrement();

	for (;;)
	{
		SnapshotData dirty;
		ScanKeyData skey;
		IndexScanDesc scan;
		ItemPointerData tid;
		TM_FailureData tmfd;
		TM_Result	result;
		bool		found;

		InitDirtySnapshot(dirty);
		ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
							   t->idx->rd_indcollation[0], F_TEXTEQ,
							   PointerGetDatum(key));
		scan = idgen_index_beginscan(t->rel, t->idx, &dirty, 1, 0);
		index_rescan(scan, &skey, 1, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, t->slot);
		index_endscan(scan);
		if (!found)
		{
			ExecClearTuple(t->slot);	/* no buffer pin held across an insert */
			return ROW_NONE;
		}
		tid = t->slot->tts_tid;

		/* Inserted by a transaction still in progress: wait for it. */
		if (TransactionIdIsValid(dirty.xmin))
		{
			XactLockTableWait(dirty.xmin, t->rel, &tid, XLTW_Lock);
			continue;
		}

		/*
		 * A cached key is served from shared memory, unless this transaction
		 * holds its row (it then gets values from the row until it ends, as
		 * the worker could not reserve meanwhile).  While another transaction
		 * writes the row (the worker reserving a segment, or a set or
		 * reconfiguration), wait for it and look again: a value taken from
		 * the row would belong to this transaction, and a rollback would
		 * give back a value of a cached key.
		 */
		if (stop_if_cached)
		{
			row_from_slot(t->slot, row);
			if (row->cache > 0 && !ttl_passed(row, GetCurrentTimestamp()) &&
				!row_is_mine(t->slot))
			{
				if (!TransactionIdIsValid(dirty.xmax))
					return ROW_CACHED;
				XactLockTableWait(dirty.xmax, t->rel, &tid, XLTW_Lock);
				continue;
			}
		}

		result = table_tuple_lock(t->rel, &tid, GetActiveSnapshot(), t->slot,
								  GetCurrentCommandId(true), LockTupleNoKeyExclusive,
								  LockWaitBlock, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
		switch (result)
		{
			case TM_Ok:
				row_from_slot(t->slot, row);
				return ROW_LOCKED;
			case TM_Deleted:
			case TM_Updated:
				/* Deleted (and perhaps inserted again) meanwhile. */
				continue;
			default:
				elog(ERROR, "unexpected table_tuple_lock status %d on \"%s\"",
					 (int) result, RelationGetRelationName(t->rel));
		}
	}
}

/*
 * A new row version that is not heap-only needs entries in every index, as
 * the executor would make them (the primary key, and any index being built
 * by REINDEX CONCURRENTLY).  Rare enough to set up an executor state for.
 */
static void
insert_index_entries(Relation rel, HeapTuple tup, bool only_summarizing)
{
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	TupleTableSlot *slot;

	InitResultRelInfo(rri, rel, 0, NULL, 0);
	ExecOpenIndices(rri, false);
	slot = ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), &TTSOpsHeapTuple);
	ExecStoreHeapTuple(tup, slot, false);
	(void) idgen_exec_insert_index_tuples(rri, slot, estate, only_summarizing);
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, true);
	FreeExecutorState(estate);
}

/* Write 'row' as the new version of the row locked in t->slot. */
static void
write_row(SeqTable *t, SeqRow *row)
{
	Datum		values[NUM_COLS];
	bool		isnull[NUM_COLS];
	HeapTuple	tup;
	bool		only_summarizing;

	values[COL_KEY - 1] = slot_getattr(t->slot, COL_KEY, &isnull[COL_KEY - 1]);
	row_to_values(row, values, isnull);
	tup = heap_form_tuple(RelationGetDescr(t->rel), values, isnull);
	/* A HOT update may still need entries in summarizing (BRIN) indexes. */
	if (idgen_simple_heap_update(t->rel, &t->slot->tts_tid, tup, &only_summarizing))
		insert_index_entries(t->rel, tup, only_summarizing);
	heap_freetuple(tup);
}

/*
 * What an operation does to a key's row: change 'row' (which holds the
 * defaults if the key is new or expired) and return whether to write it.
 */
typedef bool (*SeqOp) (SeqRow *row, bool existed, TimestampTz now, void *arg);

/* What apply() found. */
typedef enum Applied
{
	APPLIED_NEW,				/* the key was new (or had expired) */
	APPLIED_EXISTED,			/* the key existed */
	APPLIED_CACHED				/* a cached key: nothing done, entry installed */
} Applied;

/*
 * Apply 'op' to the key's row under its row lock, inserting the row if there
 * is none.  A row whose ttl has passed counts as absent.  'op' may run more
 * than once (on the defaults for an insert that lost a race, then on the
 * row), so it must only compute from its row.
 *
 * For idgen_seq_next ('next'), a live cached key that this transaction
 * does not hold is left alone (when shared memory serves this database):
 * its entry in shared memory is installed and APPLIED_CACHED returned, for
 * the caller to serve it from there.  Any other change to a key forgets its
 * cached segments, on every backend.
 */
static Applied
apply(FunctionCallInfo fcinfo, text *key, SeqOp op, void *arg, bool next)
{
	TimestampTz now = GetCurrentTimestamp();
	IdgenFunction fn;
	SeqTable	t;
	Applied		applied;
	bool		from_cached_row = false;
	bool		serve_cached = next && idgen_seq_cache_available();

	if (XactReadOnly)			/* the name only for the error */
		PreventCommandIfReadOnly(psprintf("%s()", get_func_name(fcinfo->flinfo->fn_oid)));
	idgen_lookup_function(fcinfo, &fn);
	open_table(&fn, &t);
	for (;;)
	{
		SeqRow		row;
		RowFound	found = lock_row(&t, key, &row, serve_cached);

		if (found == ROW_CACHED)
		{
			idgen_seq_cache_install(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
								   row.cache, row.has_ttl, RelationGetRelid(t.rel));
			applied = APPLIED_CACHED;
			break;
		}
		if (found == ROW_LOCKED)
		{
			applied = ttl_passed(&row, now) ? APPLIED_NEW : APPLIED_EXISTED;
			/* A cached key served from its row: its segments are behind now. */
			from_cached_row = row.cache > 0;
			if (applied == APPLIED_NEW)
				row_defaults(&row, now);
			if (op(&row, applied == APPLIED_EXISTED, now, arg))
				write_row(&t, &row);
			break;
		}

		/* A new key (or one deleted meanwhile): insert it. */
		row_defaults(&row, now);
		(void) op(&row, false, now, arg);
		if (insert_row(&fn, key, &row))
		{
			applied = APPLIED_NEW;
			break;
		}
		/* Another session inserted it first: lock that row instead. */
	}
	close_table(&t);
	if (!next || (from_cached_row && idgen_seq_cache_available()))
		idgen_seq_cache_invalidate(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	return applied;
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

/*
 * The rest of a batch, from the table or from a new segment, would not be
 * above 'after', the batch's last value so far: the key was dropped or set
 * back by another session meanwhile.
 */
void
idgen_seq_batch_set_back(const char *key, int64 after)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("per-key sequence key \"%s\" was set back while a batch of it was served", key),
			 errdetail("The key was dropped, or set below " INT64_FORMAT ", by another session; the rest of the batch would repeat values it already holds.",
					   after),
			 errhint("Call again: the whole batch is discarded.")));
}

/* idgen_seq_next: hand out 'count' values into 'out' (may be NULL). */
typedef struct NextArgs
{
	text	   *key;
	int			count;
	int64	   *out;
	int64		after;			/* > 0: the rest of a batch served up to here */
} NextArgs;

static bool
op_next(SeqRow *row, bool existed, TimestampTz now, void *arg)
{
	NextArgs   *a = (NextArgs *) arg;
	int64		v = row->value;

	/* Only a key that can expire needs its use recorded. */
	if (row->has_ttl)
		row->last_used = now;

	/*
	 * The rest of a batch of a cached key, after its entry was retired: the
	 * row is above every segment reserved, unless the key was dropped or set
	 * lower meanwhile, and then this batch would repeat its own values.
	 * (With max_value the values wrap anyway.)
	 */
	if (a->after > 0 && row->max_value == 0 && row->value < a->after)
		idgen_seq_batch_set_back(text_to_cstring(a->key), a->after);
	for (int i = 0; i < a->count; i++)
	{
		v = advance(row, v, a->key);
		if (a->out)
			a->out[i] = v;
	}
	row->value = v;
	return true;
}

/*
 * The table idgen_seq, remembered by the backend until a relcache
 * invalidation of it (the extension dropped and created again, say): cached
 * entries made for another table are stale.
 */
static Oid	known_relid = InvalidOid;

static void
forget_relid(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == known_relid)
		known_relid = InvalidOid;
}

static Oid
seq_relid(FunctionCallInfo fcinfo)
{
	static bool callback_registered = false;

	if (unlikely(!OidIsValid(known_relid)))
	{
		IdgenFunction fn;

		if (!callback_registered)
		{
			CacheRegisterRelcacheCallback(forget_relid, (Datum) 0);
			callback_registered = true;
		}
		idgen_lookup_function(fcinfo, &fn);
		known_relid = get_relname_relid("idgen_seq", fn.nspid);
	}
	return known_relid;
}

static int64
seq_next(FunctionCallInfo fcinfo, text *key, int count, int64 *out)
{
	int64		last = 0;
	int			done = 0;
	TimestampTz waiting = 0;	/* since when entries were retired unused */

	if (out == NULL)
		out = &last, count = 1;
	PreventCommandIfReadOnly("idgen_seq_next()");
	for (;;)
	{
		NextArgs	rest;
		int			served;

		/* A cached key with an entry: served from shared memory. */
		served = idgen_seq_cache_next(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), count - done,
									  out + done, done > 0 ? out[done - 1] : 0,
									  seq_relid(fcinfo));
		done += served;
		if (done == count)
			break;

		/*
		 * Otherwise (the rest of) the batch from the table, which installs
		 * the entry of a cached key instead: then shared memory again.
		 */
		rest.key = key;
		rest.count = count - done;
		rest.out = out + done;
		rest.after = done > 0 ? out[done - 1] : 0;
		if (apply(fcinfo, key, op_next, &rest, true) != APPLIED_CACHED)
			break;

		/*
		 * An entry retired again before it served anything (the key was
		 * reconfigured or evicted meanwhile) is installed again, for at most
		 * idgen.seq_cache_wait; never served from the row, whose values
		 * would be this transaction's, given back by a rollback.
		 */
		if (served > 0 || waiting == 0)
			waiting = GetCurrentTimestamp();
		else if (TimestampDifferenceExceeds(waiting, GetCurrentTimestamp(),
											idgen_seq_cache_wait_ms))
			idgen_seq_cache_timed_out(text_to_cstring(key));
	}
	return out[count - 1];
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

		idgen_arg_not_null(fcinfo, 1, "count");
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
	IdgenFunction		fn;
	IdgenSqlContext	cx;
	SeqRow		row;
	bool		found;

	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	found = read_row(&cx, key, &row) && !ttl_passed(&row, GetCurrentTimestamp());
	idgen_sql_end(&cx);
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64(row.value);
}

static int64
value_arg(FunctionCallInfo fcinfo, int n)
{
	int64		value;

	idgen_arg_not_null(fcinfo, n, "value");
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
op_set(SeqRow *row, bool existed, TimestampTz now, void *arg)
{
	int64		value = *(int64 *) arg;

	if (row->max_value > 0 && value > row->max_value)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value " INT64_FORMAT " is out of range for the key's max_value " INT64_FORMAT,
						value, row->max_value),
				 errdetail("Values of this key wrap to its step after " INT64_FORMAT ".", row->max_value),
				 errhint("Raise max_value with idgen_seq_configure first.")));
	row->value = value;
	row->last_used = now;
	return true;
}

/* Apply a value-setting 'op' to the key; whether the key existed. */
static bool
set_value(FunctionCallInfo fcinfo, SeqOp op)
{
	text	   *key = key_arg(fcinfo);
	int64		value = value_arg(fcinfo, 1);

	return apply(fcinfo, key, op, &value, false) == APPLIED_EXISTED;
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
op_set_if_absent(SeqRow *row, bool existed, TimestampTz now, void *arg)
{
	if (existed)
		return false;
	return op_set(row, existed, now, arg);
}

Datum
idgen_seq_set_if_absent(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!set_value(fcinfo, op_set_if_absent));
}

/* Take the options of 'arg', keep the value. */
static bool
op_configure(SeqRow *row, bool existed, TimestampTz now, void *arg)
{
	const SeqRow *opts = (const SeqRow *) arg;

	row->last_used = now;
	row->step = opts->step;
	row->max_value = opts->max_value;
	row->has_ttl = opts->has_ttl;
	row->ttl = opts->ttl;
	row->cache = opts->cache;
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
	SeqRow		init;
	TimestampTz now = GetCurrentTimestamp();

	row_defaults(&init, now);
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

		idgen_ttl_check(ttl);
		init.has_ttl = true;
		init.ttl = *ttl;
	}
	else
		init.has_ttl = false;	/* NULL: never expires, whatever the default */
	if (PG_ARGISNULL(4) || PG_GETARG_INT32(4) < 0 || PG_GETARG_INT32(4) > IDGEN_SEQ_MAX_CACHE)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("cache must be between 0 and %d", IDGEN_SEQ_MAX_CACHE),
				 errdetail("0 (the default) is the transactional mode; n > 0 serves the key from shared memory in segments of at least n values.")));
	init.cache = PG_GETARG_INT32(4);

	(void) apply(fcinfo, key, op_configure, &init, false);
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
	IdgenFunction		fn;
	SeqTable	t;
	SeqRow		row;
	bool		existed = false;

	PreventCommandIfReadOnly("idgen_seq_drop()");
	idgen_lookup_function(fcinfo, &fn);
	open_table(&fn, &t);
	if (lock_row(&t, key, &row, false) == ROW_LOCKED)
	{
		existed = !ttl_passed(&row, GetCurrentTimestamp());
		simple_heap_delete(t.rel, &t.slot->tts_tid);
	}
	close_table(&t);
	idgen_seq_cache_invalidate(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
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
	TimestampTz now = GetCurrentTimestamp();
	Datum		args[2];
	IdgenFunction fn;
	IdgenSqlContext cx;
	uint64		n = 0;
	uint64		batch;

	/* A cached key expires idgen.purge_interval later (see ttl_passed). */
	args[0] = TimestampTzGetDatum(now);
	args[1] = TimestampTzGetDatum(now - (TimestampTz) idgen_purge_interval_s * USECS_PER_SEC);
	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	do
	{
		CHECK_FOR_INTERRUPTS();
		batch = idgen_sql_run(&cx, Q_PURGE, args, NULL);
		for (uint64 i = 0; i < batch; i++)
		{
			bool		isnull;

			if (DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)) > 0)
			{
				char	   *k = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

				idgen_seq_cache_invalidate(k, strlen(k));
			}
		}
		n += batch;
	} while (batch == 1000);
	idgen_sql_end(&cx);
	PG_RETURN_INT64((int64) n);
}

/* ----------
 * The database worker's part (seq_worker.c): reserving segments of cached keys
 * ----------
 */

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
void
idgen_seq_reserve_segments(const IdgenFunction *ext, IdgenSeqRequest *req, int n)
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
		Datum		values[NUM_COLS];
		bool		isnull[NUM_COLS];
		SeqRow		row;
		IdgenSeqRequest *r;
		char	   *key;

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, isnull);
		row_from_values(&row, values, isnull);
		key = TextDatumGetCString(values[COL_KEY - 1]);
		r = find_request(req, n, key);
		if (r == NULL)
			continue;
		if (row.cache <= 0 || ttl_passed(&row, now))
		{
			/* No longer cached, or forgotten: callers take the table. */
			r->outcome = IDGEN_SEQ_FORGET;
			continue;
		}
		new_values[nnew] = Int64GetDatum(idgen_seq_cache_reserve(r, row.value, row.step, row.max_value));
		new_keys[nnew++] = values[COL_KEY - 1];
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
 * Record the use of cached keys with a ttl (see ttl_passed), in the
 * worker's transaction.
 */
void
idgen_seq_record_use(const IdgenFunction *ext, IdgenSeqRequest *req, int n)
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

	idgen_init_materialized_srf(fcinfo);
	idgen_seq_cache_report(emit_cache_row, rsinfo, seq_relid(fcinfo));
	return (Datum) 0;
}

/* Define the per-key sequences' setting. */
void
idgen_seq_init(void)
{
	DefineCustomIntVariable("idgen.seq_default_ttl",
							"Sets the ttl of per-key sequence keys created without one.",
							"A key unused for this long is forgotten and restarts. 0 (the default) "
							"means new keys never expire unless configured with a ttl.",
							&idgen_seq_default_ttl_s, 0, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
}
