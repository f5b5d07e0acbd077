/*-------------------------------------------------------------------------
 *
 * seq_row.c
 *	  A key's row in the table idgen_seq: its columns, defaults and expiry,
 *	  and direct access to it (lock, write).
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
 * more than the extension gave it (checked on open: its replica trigger,
 * which only logical replication fires, is its own); indexes may be added
 * or rebuilt.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "common/int.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_interval.h"
#include "idgen_seq.h"
#include "idgen_sql.h"

/*
 * Whether the key's ttl has passed since its last use.  The use of a cached
 * key is recorded in its row by the sequencer (at each reservation and each
 * purge run), so it may be up to idgen.purge_interval more recent than the
 * row says: such a key expires that much later.
 */
bool
idgen_seq_ttl_passed(const IdgenSeqRow *row, TimestampTz now)
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

/*
 * A new (or forgotten) key's row, created at 'now': CREATE SEQUENCE's
 * defaults (1, 2, 3, ... up to the end of bigint, no cycle).  No ttl: only
 * a key created by use takes idgen.seq_default_ttl
 * (idgen_seq_take_default_ttl).
 */
void
idgen_seq_row_defaults(IdgenSeqRow *row, TimestampTz now)
{
	row->step = 1;
	row->start = 1;
	row->min_value = 1;
	row->max_value = PG_INT64_MAX;
	row->cycle = false;
	row->called = false;
	row->value = row->start;
	row->has_ttl = false;
	memset(&row->ttl, 0, sizeof(row->ttl));
	row->cache = 0;
	row->last_used = now;
	row->created_by = GetUserId();
}

/*
 * Give a key being created by use the ttl idgen.seq_default_ttl (seconds,
 * 0: none, else at least 1: see its check hook), if it is set.
 */
void
idgen_seq_take_default_ttl(IdgenSeqRow *row)
{
	int64		usecs = (int64) rint(idgen_seq_default_ttl * USECS_PER_SEC);

	if (usecs <= 0)
		return;
	row->has_ttl = true;
	memset(&row->ttl, 0, sizeof(row->ttl));
	row->ttl.day = (int32) (usecs / USECS_PER_DAY);
	row->ttl.time = usecs % USECS_PER_DAY;
}

/* ----------
 * The limit rule
 *
 * Values follow nextval(): from a value, every step up to the key's limit
 * (max_value for a positive step, else min_value); past it, a key that
 * cycles goes on from the other limit, one full cycle at a time, and one
 * that does not stops there (2200H).  Every function below computes from
 * idgen_seq_values_to_limit(), the only place that measures the distance to
 * the limit, on values within [min_value, max_value] (as a row's always are).
 * ----------
 */

/* |step|, as uint64 (-INT64_MIN does not fit in int64). */
static inline uint64
abs_step(int64 step)
{
	return step > 0 ? (uint64) step : (uint64) -(step + 1) + 1;
}

/*
 * How many values a key can still give from 'first' on before it passes its
 * limit, in its direction: 'first' itself and every step after it up to the
 * limit (a count up to 2^64, as uint64; 0 means 2^64, more than any want).
 */
uint64
idgen_seq_values_to_limit(int64 first, int64 step, int64 min_value, int64 max_value)
{
	Assert(step != 0);
	Assert(min_value <= first && first <= max_value);
	if (step > 0)
		return ((uint64) max_value - (uint64) first) / (uint64) step + 1;
	return ((uint64) first - (uint64) min_value) / abs_step(step) + 1;
}

/*
 * The value 'off' (0-based) from 'first' on, 'to_limit' being
 * idgen_seq_values_to_limit() from 'first'.  Past the limit (off >=
 * to_limit, which only a key that cycles asks for), it goes on from the
 * other limit (min_value for a positive step), one full cycle of values at
 * a time.
 */
int64
idgen_seq_value_at(int64 first, int64 step, int64 min_value, int64 max_value,
				   uint64 to_limit, uint64 off)
{
	uint64		per_cycle;
	uint64		astep = abs_step(step);

	if (to_limit == 0 || off < to_limit)
		return (int64) ((uint64) first + (step > 0 ? off * astep : -(off * astep)));
	per_cycle = ((uint64) max_value - (uint64) min_value) / astep + 1;
	off = (off - to_limit) % (per_cycle == 0 ? PG_UINT64_MAX : per_cycle);
	if (step > 0)
		return (int64) ((uint64) min_value + off * astep);
	return (int64) ((uint64) max_value - off * astep);
}

/*
 * How many of 'want' values from 'first' on a key can give: all of them if
 * it cycles, else those before its limit; whether they reach the limit.
 */
int64
idgen_seq_fit(int64 first, int64 step, int64 min_value, int64 max_value, bool cycle,
			  int64 want, bool *final)
{
	uint64		room;

	*final = false;
	if (cycle)
		return want;
	room = idgen_seq_values_to_limit(first, step, min_value, max_value);
	if (room == 0 || room > (uint64) want)
		return want;
	*final = true;
	return (int64) room;
}

/*
 * The value after 'v' (the last one handed out) into *next, as nextval()
 * computes it: v + step, or, past max_value (min_value for a negative
 * step), the other limit for a key that cycles.  False if the key has
 * reached its limit and does not cycle.
 */
bool
idgen_seq_advance(const IdgenSeqRow *row, int64 v, int64 *next)
{
	uint64		room = idgen_seq_values_to_limit(v, row->step, row->min_value, row->max_value);

	if (room == 1 && !row->cycle)
		return false;
	*next = idgen_seq_value_at(v, row->step, row->min_value, row->max_value, room, 1);
	return true;
}

/*
 * A call would pass the key's limit ('limit', max_value for a positive
 * step, else min_value) of a key that does not cycle: it fails, as
 * nextval() does, having changed nothing.  'count' is the batch's size.
 */
void
idgen_seq_limit_reached(const char *key, int64 step, int64 limit, int count)
{
	ereport(ERROR,
			(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
			 step > 0 ?
			 errmsg("reached maximum value of sequence key \"%s\" (" INT64_FORMAT ")", key, limit) :
			 errmsg("reached minimum value of sequence key \"%s\" (" INT64_FORMAT ")", key, limit),
			 count > 1 ?
			 errdetail("A batch of %d values would pass it; the call returns none.", count) :
			 errdetail("The key does not cycle: it stays at its last value."),
			 step > 0 ?
			 errhint("Raise max_value with idgen_seq_configure(), or configure cycle => true to go on from min_value.") :
			 errhint("Lower min_value with idgen_seq_configure(), or configure cycle => true to go on from max_value.")));
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

/*
 * A row's columns from their values (key and ctid aside), and back: each
 * column of IDGEN_SEQ_COLUMNS but the key, as the count below says.
 */
StaticAssertDecl(SEQ_NUM_COLS == 12,
				 "idgen_seq_row_from_values() and idgen_seq_row_to_values() convert each column");

void
idgen_seq_row_from_values(IdgenSeqRow *row, const Datum *values, const bool *isnull)
{
	row->step = DatumGetInt64(values[SEQ_COL_STEP - 1]);
	row->start = DatumGetInt64(values[SEQ_COL_START - 1]);
	row->min_value = DatumGetInt64(values[SEQ_COL_MIN_VALUE - 1]);
	row->max_value = DatumGetInt64(values[SEQ_COL_MAX_VALUE - 1]);
	row->cycle = DatumGetBool(values[SEQ_COL_CYCLE - 1]);
	row->has_ttl = !isnull[SEQ_COL_TTL - 1];
	if (row->has_ttl)
		row->ttl = *DatumGetIntervalP(values[SEQ_COL_TTL - 1]);
	row->last_used = DatumGetTimestampTz(values[SEQ_COL_LAST_USED - 1]);
	row->cache = DatumGetInt32(values[SEQ_COL_CACHE - 1]);
	row->created_by = DatumGetObjectId(values[SEQ_COL_CREATED_BY - 1]);
	row->called = DatumGetBool(values[SEQ_COL_CALLED - 1]);
	row->value = DatumGetInt64(values[SEQ_COL_VALUE - 1]);
}

void
idgen_seq_row_to_values(IdgenSeqRow *row, Datum *values, bool *isnull)
{
	values[SEQ_COL_STEP - 1] = Int64GetDatum(row->step);
	isnull[SEQ_COL_STEP - 1] = false;
	values[SEQ_COL_START - 1] = Int64GetDatum(row->start);
	isnull[SEQ_COL_START - 1] = false;
	values[SEQ_COL_MIN_VALUE - 1] = Int64GetDatum(row->min_value);
	isnull[SEQ_COL_MIN_VALUE - 1] = false;
	values[SEQ_COL_MAX_VALUE - 1] = Int64GetDatum(row->max_value);
	isnull[SEQ_COL_MAX_VALUE - 1] = false;
	values[SEQ_COL_CYCLE - 1] = BoolGetDatum(row->cycle);
	isnull[SEQ_COL_CYCLE - 1] = false;
	values[SEQ_COL_TTL - 1] = IntervalPGetDatum(&row->ttl);
	isnull[SEQ_COL_TTL - 1] = !row->has_ttl;
	values[SEQ_COL_LAST_USED - 1] = TimestampTzGetDatum(row->last_used);
	isnull[SEQ_COL_LAST_USED - 1] = false;
	values[SEQ_COL_CACHE - 1] = Int32GetDatum(row->cache);
	isnull[SEQ_COL_CACHE - 1] = false;
	values[SEQ_COL_CREATED_BY - 1] = ObjectIdGetDatum(row->created_by);
	isnull[SEQ_COL_CREATED_BY - 1] = false;
	values[SEQ_COL_CALLED - 1] = BoolGetDatum(row->called);
	isnull[SEQ_COL_CALLED - 1] = false;
	values[SEQ_COL_VALUE - 1] = Int64GetDatum(row->value);
	isnull[SEQ_COL_VALUE - 1] = false;
}

void
idgen_seq_open_table(const IdgenFunction *fn, IdgenSeqTable *t)
{
	Oid			relid = idgen_extension_table(fn, "idgen_seq", false);

	idgen_seq_open_table_oid(relid, t);
}

/*
 * Whether the triggers of idgen_seq are at most the extension's own,
 * idgen_seq_replica: enabled as a REPLICA trigger, it fires only in logical
 * replication's workers, where it merges the rows a publisher sends
 * (idgen--1.0.0.sql, "Logical replication"), and does nothing in ordinary
 * use, so idgen's direct writes lose nothing by not firing it.  Any other
 * row trigger would be skipped by them.  Triggers on TRUNCATE only are
 * accepted: no row write fires them, so idgen's writes skip nothing of
 * theirs (pglogical and Spock add one to every new table, to replicate a
 * TRUNCATE).
 */
static bool
only_own_triggers(Relation rel)
{
	/*
	 * A copy: the lookups below may take in an invalidation of the table, and
	 * its relcache entry, built again, frees the descriptor it had.
	 */
	TriggerDesc *td = CopyTriggerDesc(rel->trigdesc);
	bool		own = true;

	for (int i = 0; own && td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *tg = &td->triggers[i];
		char	   *fname;

		if (TRIGGER_FOR_TRUNCATE(tg->tgtype) &&
			!TRIGGER_FOR_INSERT(tg->tgtype) && !TRIGGER_FOR_UPDATE(tg->tgtype) &&
			!TRIGGER_FOR_DELETE(tg->tgtype))
			continue;
		fname = get_func_name(tg->tgfoid);
		own = strcmp(tg->tgname, "idgen_seq_replica") == 0 && fname != NULL &&
			strcmp(fname, "idgen_seq_replica_trigger") == 0 &&
			get_func_namespace(tg->tgfoid) == RelationGetNamespace(rel);
	}
	if (td != NULL)
		FreeTriggerDesc(td);
	return own;
}

/*
 * Open the table idgen_seq of OID 'relid' (and its primary key), checking
 * that it is as the extension created it.
 */
void
idgen_seq_open_table_oid(Oid relid, IdgenSeqTable *t)
{
	static const Oid coltypes[SEQ_NUM_COLS] = IDGEN_SEQ_COLUMN_TYPES;
	static const char *const colnames[SEQ_NUM_COLS] = IDGEN_SEQ_COLUMN_NAMES;
	TupleDesc	desc;
	bool		as_created;
	Oid			pkey = InvalidOid;

	/*
	 * Any catalog lookup (only_own_triggers') may take in an invalidation of
	 * the table, such as the one REINDEX CONCURRENTLY commits with its new
	 * index, and build its relcache entry again: the columns are checked
	 * before, and the primary key is found last, with nothing between finding
	 * it and opening it (test/t/041_seq_open_inval.pl).
	 */
	t->rel = table_open(relid, RowExclusiveLock);
	desc = RelationGetDescr(t->rel);
	as_created = desc->natts == SEQ_NUM_COLS &&
		t->rel->rd_rel->relkind == RELKIND_RELATION;
	for (int i = 0; as_created && i < SEQ_NUM_COLS; i++)
		as_created = !TupleDescAttr(desc, i)->attisdropped &&
			TupleDescAttr(desc, i)->atttypid == coltypes[i] &&
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), colnames[i]) == 0;
	if (as_created && only_own_triggers(t->rel))
		pkey = idgen_primary_key_index(t->rel);
	if (!OidIsValid(pkey))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has been altered", RelationGetRelationName(t->rel)),
				 errdetail("idgen writes the table directly, without firing triggers, and knows only its own columns and primary key."),
				 errhint("Drop the triggers or columns added to it.")));
	t->idx = index_open(pkey, RowExclusiveLock);
	t->slot = table_slot_create(t->rel, NULL);
	t->bounded = false;
	t->blocker = InvalidTransactionId;
}

void
idgen_seq_close_table(IdgenSeqTable *t)
{
	ExecDropSingleTupleTableSlot(t->slot);
	index_close(t->idx, NoLock);
	table_close(t->rel, NoLock);
}

static void
row_from_slot(TupleTableSlot *slot, IdgenSeqRow *row)
{
	Datum		values[SEQ_NUM_COLS];
	bool		isnull[SEQ_NUM_COLS];

	slot_getallattrs(slot);
	memcpy(values, slot->tts_values, sizeof(values));
	memcpy(isnull, slot->tts_isnull, sizeof(isnull));
	idgen_seq_row_from_values(row, values, isnull);
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
 * The transaction that holds the row in 'slot', if one does: its updater,
 * deleter or (only) locker.  Read without the buffer's content lock, for a
 * message: a row locked by several transactions (a MultiXact) names none.
 */
static TransactionId
row_holder(TupleTableSlot *slot)
{
	bool		should_free;
	HeapTuple	tup = ExecFetchSlotHeapTuple(slot, false, &should_free);
	uint16		infomask = tup->t_data->t_infomask;
	TransactionId xmax = HeapTupleHeaderGetRawXmax(tup->t_data);

	if (should_free)
		heap_freetuple(tup);
	if (infomask & (HEAP_XMAX_INVALID | HEAP_XMAX_IS_MULTI))
		return InvalidTransactionId;
	return xmax;
}

/*
 * Find the latest version of the key's row, committed or not, into t->slot
 * ('dirty' tells who inserted or holds it); false if the key has none.
 */
static bool
find_row(IdgenSeqTable *t, text *key, SnapshotData *dirty)
{
	ScanKeyData skey;
	IndexScanDesc scan;
	bool		found;

	InitDirtySnapshot(*dirty);
	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   t->idx->rd_indcollation[0], F_TEXTEQ,
						   PointerGetDatum(key));
	scan = idgen_index_beginscan(t->rel, t->idx, dirty, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, t->slot);
	index_endscan(scan);
	if (!found)
		ExecClearTuple(t->slot);	/* no buffer pin held across an insert */
	return found;
}

/*
 * Find the row of a key this transaction holds (locked or wrote) into
 * t->slot, for idgen_seq_write_row; false if it has none (it deleted it).
 */
bool
idgen_seq_find_held_row(IdgenSeqTable *t, text *key)
{
	SnapshotData dirty;

	CommandCounterIncrement();
	return find_row(t, key, &dirty);
}

/*
 * Lock the latest version of the key's row into t->slot and read it into
 * 'row'.  With 'stop_if_cached', a committed row of a live cached key that
 * this transaction does not hold is only read, not locked (SEQ_ROW_CACHED): its
 * values are served from shared memory, and the sequencer that reserves them
 * must be able to lock the row.
 */
IdgenSeqRowFound
idgen_seq_lock_row(IdgenSeqTable *t, text *key, IdgenSeqRow *row, bool stop_if_cached)
{
	/* See the rows written so far in this transaction, SPI's included. */
	CommandCounterIncrement();

	for (;;)
	{
		SnapshotData dirty;
		ItemPointerData tid;
		TM_FailureData tmfd;
		TM_Result	result;

		if (!find_row(t, key, &dirty))
			return SEQ_ROW_NONE;
		tid = t->slot->tts_tid;

		/* Inserted by a transaction still in progress: wait for it. */
		if (TransactionIdIsValid(dirty.xmin))
		{
			t->blocker = dirty.xmin;
			XactLockTableWait(dirty.xmin, t->rel, &tid, XLTW_Lock);
			continue;
		}

		/*
		 * A cached key is served from shared memory, unless this transaction
		 * holds its row (it then gets values from the row until it ends, as
		 * the sequencer could not reserve meanwhile).  While another
		 * transaction writes the row (the sequencer reserving a segment, or a
		 * set or reconfiguration), wait for it and look again: a value taken
		 * from the row would belong to this transaction, and a rollback would
		 * give back a value of a cached key.
		 */
		if (stop_if_cached)
		{
			row_from_slot(t->slot, row);
			if (row->cache > 0 && !idgen_seq_ttl_passed(row, GetCurrentTimestamp()) &&
				!row_is_mine(t->slot))
			{
				if (!TransactionIdIsValid(dirty.xmax))
					return SEQ_ROW_CACHED;
				XactLockTableWait(dirty.xmax, t->rel, &tid, XLTW_Lock);
				continue;
			}
		}

		/*
		 * An administrative function's wait is bounded (seq.c): note whom it
		 * may wait for, to name in the error.  Not for idgen_seq_next.
		 */
		if (t->bounded)
			t->blocker = row_holder(t->slot);
		result = table_tuple_lock(t->rel, &tid, GetActiveSnapshot(), t->slot,
								  GetCurrentCommandId(true), LockTupleNoKeyExclusive,
								  LockWaitBlock, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
		switch (result)
		{
			case TM_Ok:
				row_from_slot(t->slot, row);
				return SEQ_ROW_LOCKED;
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
void
idgen_seq_write_row(IdgenSeqTable *t, IdgenSeqRow *row)
{
	Datum		values[SEQ_NUM_COLS];
	bool		isnull[SEQ_NUM_COLS];
	HeapTuple	tup;
	bool		only_summarizing;

	values[SEQ_COL_KEY - 1] = slot_getattr(t->slot, SEQ_COL_KEY, &isnull[SEQ_COL_KEY - 1]);
	idgen_seq_row_to_values(row, values, isnull);
	tup = heap_form_tuple(RelationGetDescr(t->rel), values, isnull);
	/* A HOT update may still need entries in summarizing (BRIN) indexes. */
	if (idgen_simple_heap_update(t->rel, &t->slot->tts_tid, tup, &only_summarizing))
		insert_index_entries(t->rel, tup, only_summarizing);
	heap_freetuple(tup);
}

/* Delete the row locked in t->slot. */
void
idgen_seq_delete_row(IdgenSeqTable *t)
{
	simple_heap_delete(t->rel, &t->slot->tts_tid);
}

/*
 * Bounded waits for the administrative functions
 *
 * idgen_seq_next waits for a key's row as UPDATE waits for a row, bounded
 * only by the caller's own lock_timeout: a caller of a hot key queues, and
 * its place in the queue is what makes values come in commit order.  An
 * administrator's set, set_if_absent, configure or drop must not wait for
 * ever behind a session that used the key and sits idle in its
 * transaction, so each of their waits for a key's row (for the transaction
 * that inserted, updated or locked it, or to insert it) lasts at most
 * lock_timeout, or IDGEN_SEQ_ADMIN_WAIT_MS when lock_timeout is 0, and then
 * fails with a message that names the key and the holder.
 *
 * Mechanism: lock_timeout itself, set for the duration of the call at a GUC
 * nesting level of its own (as a function's SET clause is), which the end
 * of the call pops, and so does an error (at the end of the transaction or
 * of the subtransaction that catches it).  The wait stays a real wait in
 * the lock queue: a polling loop (NOWAIT or SKIP LOCKED, then sleep) would
 * lose its place each time and could starve behind a key that its callers
 * never leave unlocked for long.  A new setting would only repeat
 * lock_timeout: an administrator who means to wait longer sets it for the
 * call (SET lock_timeout = '1min').
 *
 * The wait that timed out raises "canceling statement due to lock
 * timeout" (55P03), already cleaned up (LockErrorCleanup); it is caught
 * and replaced with the key's message before the transaction aborts.
 * idgen_seq_lock_row records the transaction waited for (IdgenSeqTable.blocker),
 * whose process the detail names.
 */
#define IDGEN_SEQ_ADMIN_WAIT_MS		5000

static void
key_locked(text *key, TransactionId blocker, int waited_ms, bool own_bound)
{
	int			pid = TransactionIdIsValid(blocker) ? BackendXidGetPid(blocker) : 0;
	char	   *bound;

	if (own_bound)
		bound = psprintf("%d ms, the bound of these functions when lock_timeout is 0", waited_ms);
	else
		bound = psprintf("lock_timeout (%d ms)", waited_ms);
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("sequence key \"%s\" is locked by another transaction", text_to_cstring(key)),
			 pid != 0 ?
			 errdetail("Process %d holds the key's row in a transaction that has not ended; this call gave up after %s.",
					   pid, bound) :
			 errdetail("Another transaction holds the key's row; this call gave up after %s.", bound),
			 errhint("A transaction left idle holds the keys it used until it ends: set idle_in_transaction_session_timeout for the roles that use the key, then call again. A prepared transaction holds them across restarts, out of that setting's reach: find it in pg_prepared_xacts and end it with COMMIT PREPARED or ROLLBACK PREPARED.")));
}

/*
 * Run step(arg), which locks the key's row in table 't', with every wait
 * bounded as described above.
 */
void
idgen_seq_run_bounded(text *key, IdgenSeqTable *t, void (*step) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			nestlevel = NewGUCNestLevel();
	bool		own_bound = LockTimeout <= 0;
	int			waited_ms = own_bound ? IDGEN_SEQ_ADMIN_WAIT_MS : LockTimeout;

	if (own_bound)
	{
		char		value[32];

		snprintf(value, sizeof(value), "%dms", IDGEN_SEQ_ADMIN_WAIT_MS);
		(void) set_config_option("lock_timeout", value, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	t->bounded = true;
	PG_TRY();
	{
		step(arg);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		FlushErrorState();
		key_locked(key, t->blocker, waited_ms, own_bound);
	}
	PG_END_TRY();
	t->bounded = false;
	AtEOXact_GUC(true, nestlevel);
}

/*
 * A caller waited idgen.seq_cache_wait for a segment of the key in vain.
 */
void
idgen_seq_cache_timed_out(const char *key)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not get a segment for cached sequence key \"%s\" in time", key),
			 errdetail("No segment was reserved within \"idgen.seq_cache_wait\" (%d ms); no value is served before its segment is reserved durably.",
					   idgen_seq_cache_wait_ms),
			 errhint("Check that the \"idgen sequencer\" process runs (it reserves segments), that no transaction holds the key's row or locks the table idgen_seq, and that \"idgen.seq_cache_keys\" holds every cached key in use.")));
}
