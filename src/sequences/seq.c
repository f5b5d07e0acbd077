/*-------------------------------------------------------------------------
 *
 * seq.c
 *	  Per-key business sequences: idgen_seq_next and idgen_seq_current, and
 *	  how every function changes a key (idgen_seq_apply: lock or insert
 *	  the row, apply the operation, write it back), which the administrative
 *	  functions (seq_admin.c) use too.
 *
 * One row per key in the extension's table idgen_seq:
 *
 *	  key text PRIMARY KEY, step, start, min_value, max_value bigint, cycle
 *	  boolean (a PostgreSQL sequence's options), ttl interval (NULL =
 *	  keep), last_used timestamptz, cache int, created_by oid, called
 *	  boolean, value bigint (a sequence's is_called and last_value: the
 *	  last value handed out, or, while called is false, the next one)
 *
 *	  last_used is kept up to date for keys with a ttl; for the others it is
 *	  when the key was created or last changed by an administrative function
 *	  (so that their common update writes value only).
 *
 * Semantics
 *	  Every change to a key (idgen_seq_next, set, configure, drop) locks the
 *	  latest version of the key's row, computes in C and writes the row back
 *	  (seq_row.c); a missing key is inserted (ON CONFLICT DO NOTHING, and
 *	  if another session inserted it first, its row is locked instead; see
 *	  "Inserting a key" below).  The values therefore belong to the
 *	  caller's transaction: a rollback gives them back, and concurrent
 *	  callers of one key queue on its row lock, so the committed values of a
 *	  key are gap-free and in commit order.  Different keys are different
 *	  rows and do not wait for each other (unless their hashes are equal
 *	  while both are inserted).  A transaction's later calls on a key whose
 *	  row it has locked advance a copy of the row in backend memory, written
 *	  back before the transaction commits (seq_held.c): the n-th call costs
 *	  what the first did.
 *
 *	  A key springs into existence on first use (idgen_seq_next), or when an
 *	  administrative function (set, set_if_absent, configure) names it.
 *	  idgen.seq_default_ttl is taken by the former only: a key the
 *	  administrator creates (a migrated baseline, say) has a ttl only when
 *	  idgen_seq_configure gives it one.  idgen.seq_max_keys_per_role limits
 *	  the former only, too (seq_quota.c).
 *
 *	  Values follow nextval(): start first, then value + step; a call that
 *	  would pass max_value (min_value, for a negative step) fails with
 *	  SQLSTATE 2200H and changes nothing, unless the key cycles: then the
 *	  value after max_value is min_value (after min_value, max_value).  A
 *	  key whose ttl has passed since its last use is forgotten: it behaves
 *	  exactly as if its row had been purged (value and options back to the
 *	  defaults), which is what idgen_seq_purge() and the idgen sequencer
 *	  process do to such rows.
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

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_seq.h"
#include "idgen_sql.h"

PG_FUNCTION_INFO_V1(idgen_seq_next);
PG_FUNCTION_INFO_V1(idgen_seq_next_n);
PG_FUNCTION_INFO_V1(idgen_seq_current);

/* Most values one idgen_seq_next(key, count) call returns. */
#define IDGEN_SEQ_MAX_COUNT		1000000

/* The statements, prepared once per backend (see owner_sql.c). */
enum
{
	Q_READ,						/* the row of $1, not locked */
	Q_INSERT,					/* a new row, unless one exists */
	NUM_QUERIES
};

static const IdgenStatement statement_list[NUM_QUERIES] = {
	[Q_READ] = {
		"SELECT " IDGEN_SEQ_COLUMN_LIST " FROM %1$s.idgen_seq "
		"WHERE key OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[Q_INSERT] = {
		"INSERT INTO %1$s.idgen_seq (" IDGEN_SEQ_COLUMN_LIST ") "
		"VALUES (" IDGEN_SEQ_COLUMN_PARAMS ") ON CONFLICT (key) DO NOTHING",
		SEQ_NUM_COLS, IDGEN_SEQ_COLUMN_TYPES
	},
};

StaticAssertDecl(SEQ_NUM_COLS <= IDGEN_MAX_SQL_ARGS, "Q_INSERT binds every column of idgen_seq");

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};


/* ----------
 * Arguments
 * ----------
 */
text *
idgen_seq_key_arg(FunctionCallInfo fcinfo)
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

/* Read the key's row under the caller's snapshot; false if there is none. */
static bool
read_row(IdgenSqlContext *cx, text *key, IdgenSeqRow *row)
{
	Datum		arg = PointerGetDatum(key);
	Datum		values[SEQ_NUM_COLS];
	bool		isnull[SEQ_NUM_COLS];

	if (idgen_sql_run(cx, Q_READ, &arg, NULL) == 0)
		return false;
	heap_deform_tuple(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, values, isnull);
	idgen_seq_row_from_values(row, values, isnull);
	return true;
}

/*
 * Inserting a key
 *
 * Two sessions that both find a key missing both insert it, and ON CONFLICT
 * DO NOTHING settles it in the primary key, its arbiter: the later finds the
 * earlier's entry there and does nothing, or, if it passed the primary key
 * before that entry was made, gives up its own insertion and looks again.
 * A unique index that is not valid (one REINDEX CONCURRENTLY or CREATE
 * UNIQUE INDEX CONCURRENTLY is building, or left behind when it failed) is
 * no arbiter, but once ready it checks uniqueness as any unique index does:
 * the later session then fails there, before it looks again ("duplicate key
 * value violates unique constraint "idgen_seq_pkey_ccnew"").  Two sessions
 * inserting the key at once meet it, and so does one that read the key's
 * index entries just before another session moved the row to a new version
 * (an update that is not heap-only) and committed.
 *
 * Two measures:
 *
 *	  - The inserts of a key take turns, under an advisory lock on the key's
 *		hash held for the INSERT only (key_locktag), whether or not an index
 *		is being built: the later then finds the earlier's entry in the
 *		primary key before it inserts anything.  Without it, two sessions
 *		meeting in an index that is not valid also deadlock, each waiting
 *		for the other's insertion in a different index.  Two keys whose
 *		hashes are equal take turns too, which costs a wait, nothing else.
 *	  - While the table has a unique index that is not valid, a key is
 *		inserted in a subtransaction, and a unique violation is taken for
 *		what a conflict in the primary key means: the key exists, go and
 *		lock it.  If the primary key then finds no row of the key, again and
 *		again (a unique index that compares keys otherwise, say), apply()
 *		raises the violation after all.  Other errors are raised at once.
 *		A transaction that creates keys meanwhile pays a subtransaction per
 *		key.  The check is made with the table locked: a REINDEX
 *		CONCURRENTLY or CREATE INDEX CONCURRENTLY whose index was not there
 *		yet waits for this transaction before it marks the index ready.
 */

/*
 * The last field of the advisory lock tags on keys being inserted, "sq" in
 * ASCII (the SQL advisory lock functions use 1 and 2, worker-id leases
 * "id", see lease.c).
 */
#define IDGEN_SEQ_LOCK_CLASS	0x7371

static void
key_locktag(LOCKTAG *tag, text *key)
{
	uint64		h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(key),
										VARSIZE_ANY_EXHDR(key), 0);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 IDGEN_SEQ_LOCK_CLASS);
}

/*
 * Whether the table has a unique index that is not valid, ready for inserts
 * or not yet: one that is not ready now may be by the time the INSERT runs
 * only if it was created before this transaction locked the table.
 */
static bool
has_unique_index_not_valid(Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		found = false;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));

		if (!HeapTupleIsValid(tup))
			continue;			/* dropped meanwhile */
		found = ((Form_pg_index) GETSTRUCT(tup))->indisunique &&
			!((Form_pg_index) GETSTRUCT(tup))->indisvalid;
		ReleaseSysCache(tup);
		if (found)
			break;
	}
	list_free(indexes);
	return found;
}

/* Run the INSERT of the key's row; whether it inserted one. */
static bool
run_insert(const IdgenFunction *fn, Datum *values, const char *nulls)
{
	IdgenSqlContext cx;
	bool		inserted;

	idgen_sql_begin(fn, &statements, &cx);

	/*
	 * A row another transaction committed since this one's snapshot is a
	 * conflict like any other (see idgen_seq_lock_row), not a serialization
	 * failure.
	 */
	inserted = idgen_sql_run_latest(&cx, Q_INSERT, values, nulls) == 1;
	idgen_sql_end(&cx);
	return inserted;
}

/* run_insert's arguments and result, for idgen_sql_try. */
typedef struct InsertStep
{
	const IdgenFunction *fn;
	Datum	   *values;
	const char *nulls;
	bool		inserted;
} InsertStep;

static void
insert_step(void *arg)
{
	InsertStep *a = (InsertStep *) arg;

	a->inserted = run_insert(a->fn, a->values, a->nulls);
}

/*
 * run_insert in a subtransaction: a unique violation returns false, as a
 * conflict does, and leaves the error in *violation (for apply() to raise
 * if the key cannot be found after all).
 */
static bool
run_insert_in_subtransaction(const IdgenFunction *fn, Datum *values, const char *nulls,
							 ErrorData **violation)
{
	InsertStep	step = {fn, values, nulls, false};
	ErrorData  *edata = idgen_sql_try(insert_step, &step);

	if (edata == NULL)
		return step.inserted;
	if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
		ReThrowError(edata);
	elog(DEBUG1, "unique violation in index \"%s\" while an index of the table is not valid: looking for the key again",
		 edata->constraint_name ? edata->constraint_name : "?");
	if (*violation != NULL)
		FreeErrorData(*violation);
	*violation = edata;
	return false;
}

/*
 * Insert the key's row, unless the key exists; whether it did.  A unique
 * violation taken for a conflict is left in *violation.
 */
static bool
insert_row(const IdgenFunction *fn, IdgenSeqTable *t, text *key, IdgenSeqRow *row,
		   ErrorData **violation)
{
	Datum		values[SEQ_NUM_COLS];
	bool		isnull[SEQ_NUM_COLS];
	char		nulls[SEQ_NUM_COLS];
	LOCKTAG		tag;
	bool		inserted;

	values[SEQ_COL_KEY - 1] = PointerGetDatum(key);
	isnull[SEQ_COL_KEY - 1] = false;
	idgen_seq_row_to_values(row, values, isnull);
	for (int i = 0; i < SEQ_NUM_COLS; i++)
		nulls[i] = isnull[i] ? 'n' : ' ';
	key_locktag(&tag, key);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	if (has_unique_index_not_valid(t->rel))
		inserted = run_insert_in_subtransaction(fn, values, nulls, violation);
	else
		inserted = run_insert(fn, values, nulls);
	LockRelease(&tag, ExclusiveLock, false);
	return inserted;
}

/*
 * An insert of the key met a row of it (a conflict, or a violation taken for
 * one) IDGEN_SEQ_MAX_MISSES times in a row, and each time the primary key
 * then found none: another unique index decides differently which keys are
 * equal (one with a nondeterministic collation, say).  Raise the violation
 * met last, or say so.
 */
#define IDGEN_SEQ_MAX_MISSES	3

static void
key_not_found(text *key, ErrorData *violation)
{
	if (violation != NULL)
		ReThrowError(violation);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not create sequence key \"%s\"", text_to_cstring(key)),
			 errdetail("Inserting the key met a row of it %d times, and each time the primary key of table \"idgen_seq\" found none.",
					   IDGEN_SEQ_MAX_MISSES),
			 errhint("Drop any other unique index on table \"idgen_seq\": only its primary key may decide which keys are equal.")));
}


/* apply()'s state, for apply_to_row. */
typedef struct ApplyState
{
	text	   *key;
	IdgenSeqOp	op;
	void	   *arg;
	bool		next;			/* for idgen_seq_next */
	bool		serve_cached;
	TimestampTz now;
	IdgenFunction fn;
	IdgenSeqTable t;
	IdgenSeqApplied applied;	/* out */
	bool		from_cached_row;	/* out */
	ErrorData  *violation;		/* out, to free */
} ApplyState;

/*
 * This transaction wrote the key's row: idgen_seq_next holds the key from
 * now on (seq_held.c); an administrative function updates the entry of a
 * key held already.
 */
static void
held_written(ApplyState *s, const IdgenSeqRow *row)
{
	idgen_seq_held_written(RelationGetRelid(s->t.rel), VARDATA_ANY(s->key),
						   VARSIZE_ANY_EXHDR(s->key), row, s->next);
}

/*
 * This transaction made the row of a key it creates (inserted, or revived
 * an expired one): idgen_seq_next checks the role's limit, an
 * administrative function counts the key for it (seq_quota.c).
 */
static void
key_created(ApplyState *s)
{
	if (s->next)
		idgen_seq_check_keys_per_role(&s->t, s->key, s->now);
	else
		idgen_seq_created_by_admin();
}

/*
 * Apply 'op' to the key's row under its row lock, inserting the row if there
 * is none.  A row whose ttl has passed counts as absent.  'op' may run more
 * than once (on the defaults for an insert that lost a race, then on the
 * row), so it must only compute from its row.
 *
 * For idgen_seq_next ('next'), a live cached key that this transaction
 * does not hold is left alone (when shared memory serves this database):
 * its entry in shared memory is installed and SEQ_APPLIED_CACHED returned, for
 * the caller to serve it from there.  Any other change to a key forgets its
 * cached segments, on every backend.
 */
static void
apply_to_row(void *arg)
{
	ApplyState *s = (ApplyState *) arg;
	int			misses = 0;

	for (;;)
	{
		IdgenSeqRow row;
		IdgenSeqRowFound found = idgen_seq_lock_row(&s->t, s->key, &row, s->serve_cached);

		if (found == SEQ_ROW_CACHED)
		{
			idgen_seq_cache_install(VARDATA_ANY(s->key), VARSIZE_ANY_EXHDR(s->key),
									row.cache, row.has_ttl, RelationGetRelid(s->t.rel));
			s->applied = SEQ_APPLIED_CACHED;
			return;
		}
		if (found == SEQ_ROW_LOCKED)
		{
			IdgenSeqHeld *h = idgen_seq_held_find(RelationGetRelid(s->t.rel),
												  VARDATA_ANY(s->key),
												  VARSIZE_ANY_EXHDR(s->key));

			/* A key this transaction holds: its entry is ahead of the row. */
			if (h != NULL && h->present)
				row = h->row;
			s->applied = idgen_seq_ttl_passed(&row, s->now) ? SEQ_APPLIED_NEW : SEQ_APPLIED_EXISTED;
			/* A cached key served from its row: its segments are behind now. */
			s->from_cached_row = row.cache > 0;
			/* Using (or setting) a forgotten key creates it again. */
			if (s->applied == SEQ_APPLIED_NEW)
				idgen_seq_row_defaults(&row, s->now);
			if (s->op(&row, s->applied == SEQ_APPLIED_EXISTED, s->now, s->arg))
			{
				idgen_seq_write_row(&s->t, &row);
				if (s->applied == SEQ_APPLIED_NEW)
					key_created(s);
				held_written(s, &row);
			}
			return;
		}

		/* A new key (or one deleted meanwhile): insert it. */
		if (misses == IDGEN_SEQ_MAX_MISSES)
			key_not_found(s->key, s->violation);
		idgen_seq_row_defaults(&row, s->now);
		(void) s->op(&row, false, s->now, s->arg);
		s->t.blocker = InvalidTransactionId;	/* a wait to insert: for whom,
												 * unknown */
		if (insert_row(&s->fn, &s->t, s->key, &row, &s->violation))
		{
			key_created(s);
			held_written(s, &row);
			s->applied = SEQ_APPLIED_NEW;
			return;
		}
		/* Another session inserted it first: lock that row instead. */
		misses++;
	}
}

/*
 * apply_to_row, for idgen_seq_next ('next') or an administrative function
 * (whose waits are bounded); what it found.
 */
IdgenSeqApplied
idgen_seq_apply(FunctionCallInfo fcinfo, text *key, IdgenSeqOp op, void *arg, bool next)
{
	ApplyState	s = {0};

	if (XactReadOnly)			/* the name only for the error */
		PreventCommandIfReadOnly(psprintf("%s()", get_func_name(fcinfo->flinfo->fn_oid)));
	s.key = key;
	s.op = op;
	s.arg = arg;
	s.next = next;
	s.serve_cached = next && idgen_seq_slot_available();
	s.now = GetCurrentTimestamp();
	idgen_lookup_function(fcinfo, &s.fn);
	idgen_seq_open_table(&s.fn, &s.t);
	if (next)
		apply_to_row(&s);
	else
		idgen_seq_run_bounded(key, &s.t, apply_to_row, &s);
	if (s.violation != NULL)
		FreeErrorData(s.violation);
	idgen_seq_close_table(&s.t);
	if (!next || (s.from_cached_row && idgen_seq_slot_available()))
		idgen_seq_cache_invalidate(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	/* A cached key served from its row for want of a process here: ask. */
	if (next && s.from_cached_row && !s.serve_cached)
		idgen_seq_slot_want();
	return s.applied;
}

/* idgen_seq_next: hand out 'count' values into 'out' (may be NULL). */
typedef struct NextArgs
{
	text	   *key;
	int			count;
	int64	   *out;
	bool		has_after;		/* the rest of a batch served up to 'after' */
	int64		after;
} NextArgs;

static bool
op_next(IdgenSeqRow *row, bool existed, TimestampTz now, void *arg)
{
	NextArgs   *a = (NextArgs *) arg;
	IdgenSeqRow nv;
	int64		v;
	bool		called;

	/*
	 * The values this node may hand out (active.c): with idgen.active_nodes
	 * above 1, every N-th one, from the row's value on; the row itself.
	 */
	if (idgen_active_nodes > 1)
		idgen_seq_node_view(row, text_to_cstring(a->key), &nv);
	else
		nv = *row;
	v = nv.value;
	called = nv.called;

	/* The values first: a call that would pass the limit changes nothing. */
	for (int i = 0; i < a->count; i++)
	{
		if (!called)
			called = true;		/* v is the first value (start, or setval's) */
		else if (!idgen_seq_advance(&nv, v, &v))
			idgen_seq_limit_reached(text_to_cstring(a->key), row->step,
									row->step > 0 ? row->max_value : row->min_value,
									a->count);

		/*
		 * The rest of a batch of a cached key, after its entry was retired:
		 * the row is past every segment reserved, unless the key was dropped
		 * or set back meanwhile, and then this batch would repeat its own
		 * values.  (A key that cycles goes back anyway.)
		 */
		if (i == 0 && a->has_after && !row->cycle &&
			(row->step > 0 ? v <= a->after : v >= a->after))
			idgen_seq_batch_set_back(text_to_cstring(a->key), a->after);
		if (a->out)
			a->out[i] = v;
	}

	/* A key created by use (new, or forgotten) takes the default ttl. */
	if (!existed)
		idgen_seq_take_default_ttl(row);
	/* Only a key that can expire needs its use recorded. */
	if (row->has_ttl)
		row->last_used = now;
	row->value = v;
	row->called = true;
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

Oid
idgen_seq_relid(FunctionCallInfo fcinfo)
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
		known_relid = idgen_extension_table(&fn, "idgen_seq", true);
	}
	return known_relid;
}

/*
 * Serve 'count' values of a key this transaction holds from its entry, in
 * backend memory; false if the key's ttl has passed since its last use (it
 * is then created again, through its row).
 */
static bool
next_held(IdgenSeqHeld *h, text *key, int count, int64 *out)
{
	NextArgs	a = {key, count, out, false, 0};
	TimestampTz now = 0;

	if (h->row.has_ttl)
	{
		now = GetCurrentTimestamp();
		if (idgen_seq_ttl_passed(&h->row, now))
			return false;
	}
	(void) op_next(idgen_seq_held_change(h), true, now, &a);
	return true;
}

static int64
seq_next(FunctionCallInfo fcinfo, text *key, int count, int64 *out)
{
	int64		last = 0;
	int			done = 0;
	TimestampTz waiting = 0;	/* since when entries were retired unused */
	Oid			relid = idgen_seq_relid(fcinfo);
	IdgenSeqHeld *h;

	if (out == NULL)
		out = &last, count = 1;
	PreventCommandIfReadOnly("idgen_seq_next()");
	/* not while another live server has this node's number */
	idgen_node_clash_check();
	/* in active-active, not before the other nodes were heard from */
	idgen_active_gate();

	/*
	 * A key this transaction has used before: its row is locked, and its
	 * values are advanced in memory until the transaction commits.
	 */
	h = idgen_seq_held_find(relid, VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	if (h != NULL && h->present && next_held(h, key, count, out))
		return out[count - 1];

	for (;;)
	{
		NextArgs	rest;
		int			served;

		/* A cached key with an entry: served from shared memory. */
		served = idgen_seq_cache_next(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), count - done,
									  out + done, done > 0 ? &out[done - 1] : NULL, relid);
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
		rest.has_after = done > 0;
		rest.after = done > 0 ? out[done - 1] : 0;
		if (idgen_seq_apply(fcinfo, key, op_next, &rest, true) != SEQ_APPLIED_CACHED)
			break;

		/*
		 * An entry retired again before it served anything (the key was
		 * reconfigured or evicted meanwhile) is installed again, for at most
		 * idgen.seq_cache_wait; never served from the row, whose values would
		 * be this transaction's, given back by a rollback.
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
	text	   *key = idgen_seq_key_arg(fcinfo);

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
		text	   *key = idgen_seq_key_arg(fcinfo);
		int64		count;
		MemoryContext old;

		idgen_arg_not_null(fcinfo, 1, "count");
		count = PG_GETARG_INT64(1);
		if (count < 1 || count > IDGEN_SEQ_MAX_COUNT)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("count " INT64_FORMAT " is out of range", count),
					 errdetail("One call returns between 1 and %d values.", IDGEN_SEQ_MAX_COUNT)));

		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		vals = palloc(sizeof(int64) * count);
		MemoryContextSwitchTo(old);
		(void) seq_next(fcinfo, key, (int) count, vals);
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
 *		The last value handed out; NULL for a key that does not exist, has
 *		expired, or has handed out nothing yet.  Takes no lock.
 */
Datum
idgen_seq_current(PG_FUNCTION_ARGS)
{
	text	   *key = idgen_seq_key_arg(fcinfo);
	IdgenFunction fn;
	IdgenSqlContext cx;
	IdgenSeqRow row;
	bool		found;
	IdgenSeqHeld *h = idgen_seq_held_find(idgen_seq_relid(fcinfo), VARDATA_ANY(key),
										  VARSIZE_ANY_EXHDR(key));

	/* A key this transaction holds: its entry has the latest value. */
	if (h != NULL)
	{
		if (!h->present || !h->row.called ||
			idgen_seq_ttl_passed(&h->row, GetCurrentTimestamp()))
			PG_RETURN_NULL();
		PG_RETURN_INT64(h->row.value);
	}
	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	found = read_row(&cx, key, &row) && !idgen_seq_ttl_passed(&row, GetCurrentTimestamp());
	idgen_sql_end(&cx);
	if (!found || !row.called)
		PG_RETURN_NULL();
	PG_RETURN_INT64(row.value);
}

/*
 * idgen_seq_latest(key text, value bigint, called boolean) returns bigint
 *		The last value of the key as this transaction sees it: the value in
 *		the entry of a key it holds, else 'value' (the row's, from the view
 *		idgen_seq_keys); NULL if the key has handed out nothing yet.
 */
PG_FUNCTION_INFO_V1(idgen_seq_latest);

Datum
idgen_seq_latest(PG_FUNCTION_ARGS)
{
	text	   *key = PG_GETARG_TEXT_PP(0);
	IdgenSeqHeld *h = NULL;

	if (VARSIZE_ANY_EXHDR(key) > 0 && VARSIZE_ANY_EXHDR(key) <= IDGEN_SEQ_MAX_KEY)
		h = idgen_seq_held_find(idgen_seq_relid(fcinfo), VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	if (h != NULL && h->present)
	{
		if (!h->row.called)
			PG_RETURN_NULL();
		PG_RETURN_INT64(h->row.value);
	}
	if (!PG_GETARG_BOOL(2))
		PG_RETURN_NULL();
	PG_RETURN_DATUM(PG_GETARG_DATUM(1));
}

/*
 * idgen_seq_served(cache int) returns text
 *		How a key with this cache setting is served in this database:
 *		'transactional' (cache 0), 'cached' (from shared memory), or, for a
 *		cached key that cannot be, 'transactional: ' and why (the view
 *		idgen_seq_keys shows it, so that a cached key is never served from
 *		its row without a word).
 */
PG_FUNCTION_INFO_V1(idgen_seq_served);

Datum
idgen_seq_served(PG_FUNCTION_ARGS)
{
	char	   *why;

	if (PG_GETARG_INT64(0) <= 0)
		PG_RETURN_TEXT_P(cstring_to_text("transactional"));
	why = idgen_seq_slot_why_not(NULL);
	if (why == NULL)
		PG_RETURN_TEXT_P(cstring_to_text("cached"));
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("transactional: %s", why)));
}

/* Define the settings; the keys a transaction holds; the estimates of keys per role. */
void
idgen_seq_init(void)
{
	idgen_seq_settings_init();
	idgen_seq_held_init();
	idgen_seq_quota_init();
}
