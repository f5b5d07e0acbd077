/*-------------------------------------------------------------------------
 *
 * seq.c
 *	  Per-key business sequences (transactional mode).
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
 *	  the former only, too ("Keys per role" below).
 *
 *	  Values follow nextval(): start first, then value + step; a call that
 *	  would pass max_value (min_value, for a negative step) fails with
 *	  SQLSTATE 2200H and changes nothing, unless the key cycles: then the
 *	  value after max_value is min_value (after min_value, max_value).  A
 *	  key whose ttl has passed since its last use is forgotten: it behaves
 *	  exactly as if its row had been purged (value and options back to the
 *	  defaults), which is what idgen_seq_purge() and the idgen purge
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

#include <limits.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/itemptr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
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
#include "utils/tuplestore.h"

#include "idgen.h"
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

/*
 * Settings: the ttl of keys created by use, in seconds (0: none; else at
 * least 1), and the most live keys a role may have for idgen_seq_next to
 * create another (0: no limit).
 */
double		idgen_seq_default_ttl = 0;
int			idgen_seq_max_keys_per_role = 0;

/* Most values one idgen_seq_next(key, count) call returns. */
#define IDGEN_SEQ_MAX_COUNT		1000000

/* The statements, prepared once per backend (see owner_sql.c). */
enum
{
	Q_READ,						/* the row of $1, not locked */
	Q_INSERT,					/* a new row, unless one exists */
	Q_PURGE_SCAN,				/* the rows with a ttl */
	Q_PURGE,					/* delete rows $1 that nobody holds */
	NUM_QUERIES
};

static const IdgenStatement statement_list[NUM_QUERIES] = {
	[Q_READ] = {
		"SELECT key, step, start, min_value, max_value, cycle, ttl, last_used, cache, created_by, "
		"called, value FROM %1$s.idgen_seq "
		"WHERE key OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[Q_INSERT] = {
		"INSERT INTO %1$s.idgen_seq (key, step, start, min_value, max_value, cycle, ttl, last_used, "
		"cache, created_by, called, value) "
		"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (key) DO NOTHING",
		SEQ_NUM_COLS, {TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, BOOLOID, INTERVALOID,
		TIMESTAMPTZOID, INT4OID, OIDOID, BOOLOID, INT8OID}
	},

	/*
	 * Whether a row has expired is decided in C (idgen_seq_ttl_passed), as
	 * for every other use of a key: calling idgen_expiry here would let its
	 * schema's owner make every statement of this set fail (owner_sql.c).
	 * The purge reads the rows with a ttl through a cursor, and deletes
	 * those it found expired by the row versions it read: a row updated
	 * since (used, revived) is another version, which no longer has that
	 * ctid, and a row another transaction holds is skipped (so a purge
	 * never makes a caller wait, nor deadlocks with one).  While the cursor
	 * is open its snapshot keeps every version it read from being pruned,
	 * so no ctid read can be another row's by then.
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
	IdgenSqlContext	cx;
	bool		inserted;

	idgen_sql_begin(fn, &statements, &cx);
	/*
	 * A row another transaction committed since this one's snapshot is a
	 * conflict like any other (see idgen_seq_lock_row), not a serialization failure.
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

/*
 * What an operation does to a key's row: change 'row' (which holds the
 * defaults if the key is new or expired) and return whether to write it.
 */
typedef bool (*SeqOp) (IdgenSeqRow *row, bool existed, TimestampTz now, void *arg);

/* What apply() found. */
typedef enum Applied
{
	APPLIED_NEW,				/* the key was new (or had expired) */
	APPLIED_EXISTED,			/* the key existed */
	APPLIED_CACHED				/* a cached key: nothing done, entry installed */
} Applied;

/*
 * Keys per role
 *
 * idgen.seq_max_keys_per_role bounds what a role granted idgen_seq_next
 * can make others pay for: rows of up to 256 bytes that it cannot drop.
 * When idgen_seq_next creates a key (a new one, or one whose ttl has
 * passed), the caller's other live keys (created_by, the current user)
 * must be fewer than the limit, or the call fails and its transaction (or
 * subtransaction) takes the new row back.  The administrative functions
 * are not limited: an administrator creating a key decides, and such keys
 * count for their creator like any other.
 *
 * Counting a role's keys reads all its rows, up to the limit (one role
 * often owns nearly every key, so the index on created_by does not make it
 * cheaper): about 2 ms at 10 000 keys and 11 ms at 100 000, too much for
 * every new key.  So shared memory keeps an estimate per role
 * (seq_cache.c): an exact count plus the keys created since, by every
 * backend.  A key is created without counting while the estimate is below
 * the limit and less than a minute old; otherwise the keys are counted
 * again.  Drops, purges, expiries and rollbacks only make the estimate too
 * high, which a count corrects: a call is refused only on a count.
 * Without the library preloaded, every key created by use is counted.
 *
 * Protocol.  A creator by use first makes its row (inserts it, or writes
 * the revived version of an expired one): every wait a key's creation may
 * involve (for another transaction's row or insertion of the key) is over
 * by then.  Then it takes a lock on the role (this database, the role,
 * IDGEN_SEQ_ROLE_LOCK_CLASS), takes the estimate or counts, and releases
 * the lock at once; a refusal releases it with the (sub)transaction's
 * abort, after the rows it made are marked aborted.  The count
 * (count_role_keys) takes a new snapshot under the lock and counts the
 * role's live keys other than the one being created whose row is either
 * visible to that snapshot (committed, or this transaction's) or was
 * inserted by a transaction still in progress for it, open or prepared,
 * and not aborted.  An administrative function that creates a key adds it
 * to the estimate under the same lock, after it made the row.
 *
 * Why the limit holds.  Take the keys of a role that are live and
 * committed together at some moment, and among the creations by use that
 * made them, the one C that took the role lock last.  Every other key of
 * the set that a creation by use made was made before C's snapshot: its
 * creator made the row first, then held the lock before C.  So was every
 * key made before the limit was set, or by an administrator before C
 * counted (those made after are not the limit's to bound).  Such a key's
 * row version, or a later one of the key, was visible to C's snapshot, or
 * was inserted by a transaction in progress for it that does not abort
 * (it commits, as the key is in the set): C counted the key, once.  A
 * creation within the estimate is covered too: the estimate was an exact
 * count made under the lock, and every key made since added one under the
 * lock after its row was made (a row made after the count read past its
 * place is not in the count, and is added; one made before is in it, and
 * added again: too high, never too low).  C was accepted only with fewer
 * other keys than the limit: the set holds at most the limit, plus the
 * keys administrators made after C.  A snapshot, not a dirty read,
 * decides for committed rows: a row another transaction updates and
 * commits while the count reads is neither missed (the version the
 * snapshot sees stays) nor counted twice (a version inserted by a
 * transaction in progress counts only for a key of which the snapshot
 * sees no live version of the role).  A transaction that began after the
 * snapshot counts as in progress: its rows are counted too, which is only
 * conservative.
 *
 * Why no deadlock.  The role lock is held only while this backend counts
 * or reads the estimate: it never waits for a lock or a transaction
 * meanwhile (the index the count reads is locked before), so no cycle of
 * waits can pass through it, whatever the callers' transactions hold.  A creator never waits for another
 * creator's transaction either: it counts that one's keys as they stand.
 *
 * The price: a key counted while its transaction was in progress may yet
 * roll back, and a creator that counted it at the limit was refused
 * although the role would have stayed below it.  A creator is never
 * refused by the keys of a transaction refused before it took the lock
 * (that one's abort came first, unless it caught the error in a
 * subtransaction and went on), so of several concurrent creators
 * competing for the last keys, the last to be refused saw only keys that
 * commit.  Using keys that exist takes no lock and counts nothing.  A key
 * whose ttl has passed does not count, purged or not.
 */
/* "sr" in ASCII: not "sq" (key_locktag), whose hash fields could match. */
#define IDGEN_SEQ_ROLE_LOCK_CLASS	0x7372

static void
role_locktag(LOCKTAG *tag, Oid role)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, 0, (uint32) role, IDGEN_SEQ_ROLE_LOCK_CLASS);
}

/*
 * A btree index (oid_ops, valid, not partial) whose first column is
 * created_by, for count_role_keys to read only the role's rows, locked
 * (AccessShareLock) until the transaction ends; InvalidOid if there is
 * none (the table's rows are read then).
 */
static Oid
created_by_index(Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	Oid			found = InvalidOid;

	foreach(lc, indexes)
	{
		Relation	irel = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index ix = irel->rd_index;

		if (irel->rd_rel->relam == BTREE_AM_OID && ix->indisvalid &&
			ix->indnkeyatts >= 1 && ix->indkey.values[0] == SEQ_COL_CREATED_BY &&
			irel->rd_opfamily[0] == OID_BTREE_FAM_OID &&
			heap_attisnull(irel->rd_indextuple, Anum_pg_index_indpred, NULL))
			found = RelationGetRelid(irel);
		index_close(irel, OidIsValid(found) ? NoLock : AccessShareLock);
		if (OidIsValid(found))
			break;
	}
	list_free(indexes);
	return found;
}

/* A key, as the hash table of count_role_keys holds it. */
typedef struct RoleKeyTag
{
	int			keylen;
	char		key[IDGEN_SEQ_MAX_KEY];	/* not terminated, zero-padded */
} RoleKeyTag;

static void
role_key_tag(RoleKeyTag *tag, text *key)
{
	memset(tag, 0, sizeof(*tag));
	tag->keylen = Min(VARSIZE_ANY_EXHDR(key), IDGEN_SEQ_MAX_KEY);
	memcpy(tag->key, VARDATA_ANY(key), tag->keylen);
}

/* Whether the key in 'slot' is 'key', and its row in 'row'. */
static bool
slot_key_is(TupleTableSlot *slot, text *key, IdgenSeqRow *row)
{
	text	   *k;

	slot_getallattrs(slot);
	idgen_seq_row_from_values(row, slot->tts_values, slot->tts_isnull);
	k = DatumGetTextPP(slot->tts_values[SEQ_COL_KEY - 1]);
	return VARSIZE_ANY_EXHDR(k) == VARSIZE_ANY_EXHDR(key) &&
		memcmp(VARDATA_ANY(k), VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)) == 0;
}

/*
 * Whether the version of 'key' visible to 'snap' is a live key of 'role'
 * (then count_role_keys counted it already).
 */
static bool
live_for_snapshot(IdgenSeqTable *t, TupleTableSlot *slot, const RoleKeyTag *tag, Oid role,
				  Snapshot snap, TimestampTz now)
{
	text	   *key = cstring_to_text_with_len(tag->key, tag->keylen);
	ScanKeyData skey;
	IndexScanDesc scan;
	IdgenSeqRow row;
	bool		live = false;

	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   t->idx->rd_indcollation[0], F_TEXTEQ, PointerGetDatum(key));
	scan = idgen_index_beginscan(t->rel, t->idx, snap, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		(void) slot_key_is(slot, key, &row);
		live = row.created_by == role && !idgen_seq_ttl_passed(&row, now);
	}
	index_endscan(scan);
	pfree(key);
	return live;
}

/*
 * The live keys of 'role' other than 'key', up to 'limit', as "Keys per
 * role" defines them: the version of a key visible to a snapshot taken
 * now, or one that a transaction in progress for it inserted.  Every
 * version is read (SnapshotAny) and judged here; the keys of the latter
 * kind are gathered in a hash table, and each counts unless the snapshot
 * sees a live version of it for the role (counted already).
 */
static int64
count_role_keys(IdgenSeqTable *t, Oid idx, Oid role, text *key, int64 limit, TimestampTz now)
{
	Snapshot	snap;
	ScanKeyData skey;
	SysScanDesc scan;
	HASHCTL		ctl = {0};
	HTAB	   *pending;
	HASH_SEQ_STATUS status;
	RoleKeyTag *tag;
	TupleTableSlot *probe;
	int64		keys = 0;

	ctl.keysize = sizeof(RoleKeyTag);
	ctl.entrysize = sizeof(RoleKeyTag);
	ctl.hcxt = CurrentMemoryContext;
	pending = hash_create("idgen role keys in progress", 64, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	/* This transaction's rows so far, SPI's included. */
	CommandCounterIncrement();
	snap = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&skey, SEQ_COL_CREATED_BY, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(role));
	scan = systable_beginscan(t->rel, idx, OidIsValid(idx), SnapshotAny, 1, &skey);
	while (keys < limit && systable_getnext(scan) != NULL)
	{
		TupleTableSlot *slot = scan->slot;
		bool		should_free;
		HeapTuple	tup;
		TransactionId xmin;
		IdgenSeqRow row;
		RoleKeyTag	k;

		if (slot_key_is(slot, key, &row) || idgen_seq_ttl_passed(&row, now))
			continue;
		if (table_tuple_satisfies_snapshot(t->rel, slot, snap))
		{
			keys++;
			continue;
		}
		/* A 4-byte field, read without the buffer's content lock. */
		tup = ExecFetchSlotHeapTuple(slot, false, &should_free);
		xmin = HeapTupleHeaderGetRawXmin(tup->t_data);
		if (should_free)
			heap_freetuple(tup);
		if (!TransactionIdIsNormal(xmin) || TransactionIdIsCurrentTransactionId(xmin) ||
			!XidInMVCCSnapshot(xmin, snap) || TransactionIdDidAbort(xmin))
			continue;
		role_key_tag(&k, DatumGetTextPP(slot->tts_values[SEQ_COL_KEY - 1]));
		(void) hash_search(pending, &k, HASH_ENTER, NULL);
	}
	systable_endscan(scan);

	probe = table_slot_create(t->rel, NULL);
	hash_seq_init(&status, pending);
	while ((tag = (RoleKeyTag *) hash_seq_search(&status)) != NULL)
	{
		if (keys >= limit)
		{
			hash_seq_term(&status);
			break;
		}
		if (!live_for_snapshot(t, probe, tag, role, snap, now))
			keys++;
	}
	ExecDropSingleTupleTableSlot(probe);
	hash_destroy(pending);
	UnregisterSnapshot(snap);
	return keys;
}

/*
 * idgen_seq_next has made the row of a key it creates (in table 't'): the
 * role's other live keys must be fewer than the limit, or the call fails.
 */
static void
check_keys_per_role(IdgenSeqTable *t, text *key, TimestampTz now)
{
	Oid			role = GetUserId();
	int64		limit = idgen_seq_max_keys_per_role;
	LOCKTAG		tag;
	bool		taken;
	bool		looked = false;
	Oid			idx = InvalidOid;
	int64		keys;

	if (limit <= 0)
		return;
	role_locktag(&tag, role);
	for (;;)
	{
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
		taken = idgen_seq_role_keys_take(role, limit, now);
		if (taken || looked)
			break;

		/*
		 * A count: lock the index it reads first, not under the role's
		 * lock, under which nothing may wait (a DROP INDEX CONCURRENTLY
		 * could hold it).
		 */
		LockRelease(&tag, ExclusiveLock, false);
		idx = created_by_index(t->rel);
		looked = true;
	}
	if (!taken)
	{
		keys = count_role_keys(t, idx, role, key, limit, now);
		idgen_seq_role_keys_counted(role, limit, keys, now);
		/* The lock is released by the abort, once this row is aborted. */
		if (keys >= limit)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg_plural("role \"%s\" has reached its limit of %d per-key sequence",
								   "role \"%s\" has reached its limit of %d per-key sequences",
								   idgen_seq_max_keys_per_role,
								   GetUserNameFromId(role, false), idgen_seq_max_keys_per_role),
					 errdetail("Sequence key \"%s\" was not created: idgen_seq_next creates a key only for a role with fewer live keys than idgen.seq_max_keys_per_role, counting those its open and prepared transactions created.",
							   text_to_cstring(key)),
					 errhint("An administrator can drop the keys the role no longer uses with idgen_seq_drop(), or raise idgen.seq_max_keys_per_role for the role.")));
	}
	LockRelease(&tag, ExclusiveLock, false);
}

/*
 * An administrative function has made the row of a key it creates: not
 * limited, but added to the caller's estimate, under the role's lock (see
 * "Keys per role"), when the limit is on (in every session of a role it is
 * set for with ALTER ROLE).
 */
static void
created_by_admin(void)
{
	LOCKTAG		tag;

	if (idgen_seq_max_keys_per_role <= 0)
		return;
	role_locktag(&tag, GetUserId());
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	idgen_seq_role_keys_created(GetUserId());
	LockRelease(&tag, ExclusiveLock, false);
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
 * seq_row.c records the transaction waited for (IdgenSeqTable.blocker),
 * whose process the detail names.
 */
#define IDGEN_SEQ_ADMIN_WAIT_MS		5000

static void
key_locked(text *key, TransactionId blocker, int waited_ms, bool own_bound)
{
	int			pid = TransactionIdIsValid(blocker) ? BackendXidGetPid(blocker) : 0;
	char	   *bound = own_bound ?
		psprintf("%d ms, the bound of these functions when lock_timeout is 0", waited_ms) :
		psprintf("lock_timeout (%d ms)", waited_ms);

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
static void
run_bounded(text *key, IdgenSeqTable *t, void (*step) (void *arg), void *arg)
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

/* apply()'s state, for apply_to_row. */
typedef struct ApplyState
{
	text	   *key;
	SeqOp		op;
	void	   *arg;
	bool		next;			/* for idgen_seq_next */
	bool		serve_cached;
	TimestampTz now;
	IdgenFunction fn;
	IdgenSeqTable t;
	Applied		applied;		/* out */
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
 * administrative function counts the key for it ("Keys per role").
 */
static void
key_created(ApplyState *s)
{
	if (s->next)
		check_keys_per_role(&s->t, s->key, s->now);
	else
		created_by_admin();
}

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
static void
apply_to_row(void *arg)
{
	ApplyState *s = (ApplyState *) arg;
	int			misses = 0;

	for (;;)
	{
		IdgenSeqRow		row;
		IdgenSeqRowFound	found = idgen_seq_lock_row(&s->t, s->key, &row, s->serve_cached);

		if (found == SEQ_ROW_CACHED)
		{
			idgen_seq_cache_install(VARDATA_ANY(s->key), VARSIZE_ANY_EXHDR(s->key),
								   row.cache, row.has_ttl, RelationGetRelid(s->t.rel));
			s->applied = APPLIED_CACHED;
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
			s->applied = idgen_seq_ttl_passed(&row, s->now) ? APPLIED_NEW : APPLIED_EXISTED;
			/* A cached key served from its row: its segments are behind now. */
			s->from_cached_row = row.cache > 0;
			/* Using (or setting) a forgotten key creates it again. */
			if (s->applied == APPLIED_NEW)
				idgen_seq_row_defaults(&row, s->now);
			if (s->op(&row, s->applied == APPLIED_EXISTED, s->now, s->arg))
			{
				idgen_seq_write_row(&s->t, &row);
				if (s->applied == APPLIED_NEW)
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
		s->t.blocker = InvalidTransactionId;	/* a wait to insert: for whom, unknown */
		if (insert_row(&s->fn, &s->t, s->key, &row, &s->violation))
		{
			key_created(s);
			held_written(s, &row);
			s->applied = APPLIED_NEW;
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
static Applied
apply(FunctionCallInfo fcinfo, text *key, SeqOp op, void *arg, bool next)
{
	ApplyState	s = {0};

	if (XactReadOnly)			/* the name only for the error */
		PreventCommandIfReadOnly(psprintf("%s()", get_func_name(fcinfo->flinfo->fn_oid)));
	s.key = key;
	s.op = op;
	s.arg = arg;
	s.next = next;
	s.serve_cached = next && idgen_seq_cache_available();
	s.now = GetCurrentTimestamp();
	idgen_lookup_function(fcinfo, &s.fn);
	idgen_seq_open_table(&s.fn, &s.t);
	if (next)
		apply_to_row(&s);
	else
		run_bounded(key, &s.t, apply_to_row, &s);
	if (s.violation != NULL)
		FreeErrorData(s.violation);
	idgen_seq_close_table(&s.t);
	if (!next || (s.from_cached_row && idgen_seq_cache_available()))
		idgen_seq_cache_invalidate(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
	/* A cached key served from its row for want of a process here: ask. */
	if (next && s.from_cached_row && !s.serve_cached)
		idgen_seq_cache_want_worker();
	return s.applied;
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
	Oid			relid = seq_relid(fcinfo);
	IdgenSeqHeld *h;

	if (out == NULL)
		out = &last, count = 1;
	PreventCommandIfReadOnly("idgen_seq_next()");

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
	text	   *key = key_arg(fcinfo);
	IdgenFunction		fn;
	IdgenSqlContext	cx;
	IdgenSeqRow		row;
	bool		found;
	IdgenSeqHeld *h = idgen_seq_held_find(seq_relid(fcinfo), VARDATA_ANY(key),
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
		h = idgen_seq_held_find(seq_relid(fcinfo), VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
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
	why = idgen_seq_cache_why_not(NULL);
	if (why == NULL)
		PG_RETURN_TEXT_P(cstring_to_text("cached"));
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("transactional: %s", why)));
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
set_value(FunctionCallInfo fcinfo, SeqOp op, bool is_called)
{
	SetArgs		a;

	a.key = key_arg(fcinfo);
	idgen_arg_not_null(fcinfo, 1, "value");
	a.value = PG_GETARG_INT64(1);
	a.is_called = is_called;
	return apply(fcinfo, a.key, op, &a, false) == APPLIED_EXISTED;
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
 * The options of an idgen_seq_configure call: those passed (has_*), the
 * others kept.
 */
typedef struct SeqOptions
{
	text	   *key;
	bool		has_step,
				has_start,
				has_min,
				has_max,
				has_cycle,
				has_ttl,
				has_cache,
				has_restart;
	int64		step,
				start,
				min_value,
				max_value,
				restart;
	bool		cycle;
	bool		ttl_none;		/* ttl => '0': remove the key's ttl */
	Interval	ttl;
	int32		cache;
	int32		cache_after;	/* out: the key's cache setting now */
} SeqOptions;

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
	bool		defaults = !existed && (!o->has_min || !o->has_max);

	if (o->has_step)
		r.step = o->step;
	if (!existed)
	{
		/*
		 * 1 .. bigint's end ascending, bigint's start .. -1 descending; the
		 * first value is step (a key counts step, 2 * step, ...), or the
		 * bound given on the side it starts from.
		 */
		r.min_value = o->has_min ? o->min_value : (r.step > 0 ? 1 : PG_INT64_MIN);
		r.max_value = o->has_max ? o->max_value : (r.step > 0 ? PG_INT64_MAX : -1);
		if (o->has_start)
			r.start = o->start;
		else if (r.step > 0)
			r.start = o->has_min ? r.min_value : r.step;
		else
			r.start = o->has_max ? r.max_value : r.step;
	}
	else
	{
		if (o->has_min)
			r.min_value = o->min_value;
		if (o->has_max)
			r.max_value = o->max_value;
		if (o->has_start)
			r.start = o->start;
	}
	if (o->has_cycle)
		r.cycle = o->cycle;
	if (o->has_ttl)
	{
		r.has_ttl = !o->ttl_none;
		r.ttl = o->ttl;
	}
	if (o->has_cache)
		r.cache = o->cache;
	if (o->has_restart)
	{
		r.value = o->restart;
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
				 o->has_max && o->max_value == 0 ?
				 errhint("max_value 0 does not mean \"no maximum\": omit max_value, or pass 9223372036854775807.") : 0));
	if (r.start < r.min_value || r.start > r.max_value)
		bound_refused(!existed && !o->has_start ? "start value (by default, step)" : "start value",
					  r.start, r.start < r.min_value,
					  r.start < r.min_value ? r.min_value : r.max_value, NULL);
	if (r.value < r.min_value || r.value > r.max_value)
	{
		if (o->has_restart)
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
Datum
idgen_seq_configure(PG_FUNCTION_ARGS)
{
	SeqOptions	o = {0};

	o.key = key_arg(fcinfo);
	if ((o.has_step = !PG_ARGISNULL(1)))
	{
		o.step = PG_GETARG_INT64(1);
		if (o.step == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("step must not be zero"),
					 errhint("A positive step counts up, a negative one down; the default is 1.")));
	}
	if ((o.has_max = !PG_ARGISNULL(2)))
		o.max_value = PG_GETARG_INT64(2);
	if ((o.has_ttl = !PG_ARGISNULL(3)))
	{
		Interval   *ttl = PG_GETARG_INTERVAL_P(3);

		o.ttl_none = ttl->month == 0 && ttl->day == 0 && ttl->time == 0;
		if (!o.ttl_none)
		{
			idgen_ttl_check(ttl);
			o.ttl = *ttl;
		}
	}
	if ((o.has_cache = !PG_ARGISNULL(4)))
	{
		int64		cache = PG_GETARG_INT64(4);

		if (cache < 0 || cache > IDGEN_SEQ_MAX_CACHE)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("cache must be between 0 and %d", IDGEN_SEQ_MAX_CACHE),
					 errdetail("0 (the default) is the transactional mode; n > 0 serves the key from shared memory in segments of at least n values.")));
		o.cache = (int32) cache;
	}
	if ((o.has_start = !PG_ARGISNULL(5)))
		o.start = PG_GETARG_INT64(5);
	if ((o.has_min = !PG_ARGISNULL(6)))
		o.min_value = PG_GETARG_INT64(6);
	if ((o.has_cycle = !PG_ARGISNULL(7)))
		o.cycle = PG_GETARG_BOOL(7);
	if ((o.has_restart = !PG_ARGISNULL(8)))
		o.restart = PG_GETARG_INT64(8);

	(void) apply(fcinfo, o.key, op_configure, &o, false);
	if (o.cache_after > 0)
	{
		char	   *why;
		bool		for_now;

		idgen_seq_cache_want_worker();
		why = idgen_seq_cache_why_not(&for_now);
		if (why != NULL && !for_now)
			ereport(NOTICE,
					(errmsg("sequence key \"%s\" is served transactionally in this database, not from shared memory",
							text_to_cstring(o.key)),
					 errdetail("Cached keys are served from shared memory only where their segments are reserved: %s.", why),
					 errhint("The key works, with the guarantees and the cost of the transactional mode; the column \"served\" of view \"idgen_seq_keys\" shows it.")));
	}
	PG_RETURN_VOID();
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
	text	   *key = key_arg(fcinfo);
	IdgenFunction		fn;

	DropState	d;

	PreventCommandIfReadOnly("idgen_seq_drop()");
	idgen_lookup_function(fcinfo, &fn);
	idgen_seq_open_table(&fn, &d.t);
	d.key = key;
	d.existed = false;
	run_bounded(key, &d.t, drop_row, &d);
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
	relid = seq_relid(fcinfo);
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
	idgen_seq_cache_report(emit_cache_row, rsinfo, seq_relid(fcinfo));
	return (Datum) 0;
}

/*
 * idgen.seq_default_ttl is 0 or at least a second.  It is a real number of
 * seconds so that this hook sees '500ms' as 0.5: as an integer it was
 * rounded to 0 before any hook ran, turning the setting off without a word.
 */
static bool
check_default_ttl(double *newval, void **extra, GucSource source)
{
	if (*newval > 0 && *newval < 1)
	{
		GUC_check_errdetail("A default ttl is 0 (none) or at least 1 s; a shorter one would forget keys between two uses.");
		GUC_check_errhint("Set it to 0 to turn it off.");
		return false;
	}
	return true;
}

/* Define the per-key sequences' settings. */
void
idgen_seq_init(void)
{
	DefineCustomRealVariable("idgen.seq_default_ttl",
							 "Sets the ttl of per-key sequence keys created by idgen_seq_next.",
							 "A key unused for this long is forgotten and restarts. Keys created by "
							 "idgen_seq_set, idgen_seq_set_if_absent or idgen_seq_configure never take it. "
							 "0 (the default) means none; else at least 1 s.",
							 &idgen_seq_default_ttl, 0, 0, INT_MAX,
							 PGC_SUSET, GUC_UNIT_S, check_default_ttl, NULL, NULL);
	idgen_seq_held_init();
	DefineCustomIntVariable("idgen.seq_max_keys_per_role",
							"Sets how many live per-key sequence keys a role may have for idgen_seq_next to create another.",
							"Counts the keys the role created, by any function, whose ttl has not passed. "
							"The administrative functions are not limited. 0 (the default) means no limit.",
							&idgen_seq_max_keys_per_role, 0, 0, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
}
