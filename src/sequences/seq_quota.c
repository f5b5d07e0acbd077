/*-------------------------------------------------------------------------
 *
 * seq_quota.c
 *	  Keys per role: idgen.seq_max_keys_per_role, the count of a role's
 *	  live keys and its estimate in shared memory (an area of its own).
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
 * (below): an exact count plus the keys created since, by every
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
 * waits can pass through it, whatever the callers' transactions hold.  A
 * creator never waits for another creator's transaction either: it counts
 * that one's keys as they stand.
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
 *
 * Shared state: a few slots of (database, role) estimates, under the
 * area's one LWLock (roles_lock), taken only when a key is created while
 * the limit is on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opfamily.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_seq.h"
#include "idgen_shmem.h"

/*
 * The estimate of a role's live keys in a database (see the header):
 * an exact count, capped at the limit it was made for, plus the keys
 * created by use since, by every backend.
 */
#define IDGEN_SEQ_ROLE_SLOTS		32
/* An estimate is trusted this long after its count. */
#define IDGEN_SEQ_ROLE_RECOUNT		(60 * USECS_PER_SEC)

typedef struct SeqRoleKeys
{
	Oid			dbid;			/* InvalidOid: a free slot */
	Oid			role;
	int64		cap;			/* the limit the count stopped at */
	TimestampTz counted_at;
	int64		keys;			/* the count, plus the keys created since */
} SeqRoleKeys;

typedef struct SeqRoleShared
{
	LWLock	   *roles_lock;		/* guards roles[] */
	SeqRoleKeys roles[IDGEN_SEQ_ROLE_SLOTS];
} SeqRoleShared;

static SeqRoleShared *quota = NULL;

static Size
struct_size(void)
{
	return sizeof(SeqRoleShared);
}

static int
nlocks(void)
{
	return 1;
}

static void
shmem_startup(void *ptr, bool found, LWLockPadded *locks)
{
	quota = (SeqRoleShared *) ptr;
	if (!found)
	{
		quota->roles_lock = &locks[0].lock;
		memset(quota->roles, 0, sizeof(quota->roles));
	}
}

static const IdgenShmemArea seq_quota_area = {
	.name = "idgen seq quota",
	.size = struct_size,
	.nlocks = nlocks,
	.own_segment = true,
	.startup = shmem_startup,
};

/* ----------
 * The estimates
 * ----------
 */
/* The slot of (this database, role), or NULL (roles_lock held). */
static SeqRoleKeys *
role_slot(Oid role)
{
	for (int i = 0; i < IDGEN_SEQ_ROLE_SLOTS; i++)
		if (quota->roles[i].dbid == MyDatabaseId && quota->roles[i].role == role)
			return &quota->roles[i];
	return NULL;
}

/*
 * Whether the estimate says 'role' has fewer than 'limit' live keys in this
 * database; if so, the key about to be created is added to it.  False when
 * there is no estimate to trust (none, made for a lower limit, or older
 * than IDGEN_SEQ_ROLE_RECOUNT), or it has reached the limit: the caller
 * then counts (role_keys_counted).
 */
static bool
role_keys_take(Oid role, int64 limit, TimestampTz now)
{
	SeqRoleKeys *r;
	bool		taken = false;

	if (quota == NULL)
		return false;
	LWLockAcquire(quota->roles_lock, LW_EXCLUSIVE);
	r = role_slot(role);
	if (r != NULL && limit <= r->cap && now >= r->counted_at &&
		now - r->counted_at < IDGEN_SEQ_ROLE_RECOUNT && r->keys < limit)
	{
		r->keys++;
		taken = true;
	}
	LWLockRelease(quota->roles_lock);
	return taken;
}

/*
 * An administrative function created a key for 'role' (which is not
 * limited): add it to the role's estimate, if there is one.
 */
static void
role_keys_created(Oid role)
{
	SeqRoleKeys *r;

	if (quota == NULL)
		return;
	LWLockAcquire(quota->roles_lock, LW_EXCLUSIVE);
	r = role_slot(role);
	if (r != NULL)
		r->keys++;
	LWLockRelease(quota->roles_lock);
}

/*
 * Record an exact count of the role's live keys, made up to 'limit', and
 * the key about to be created if it is below.  A full table gives up the
 * slot counted longest ago.
 */
static void
role_keys_counted(Oid role, int64 limit, int64 counted, TimestampTz now)
{
	SeqRoleKeys *r;

	if (quota == NULL)
		return;
	LWLockAcquire(quota->roles_lock, LW_EXCLUSIVE);
	r = role_slot(role);
	for (int i = 0; r == NULL && i < IDGEN_SEQ_ROLE_SLOTS; i++)
		if (quota->roles[i].dbid == InvalidOid)
			r = &quota->roles[i];
	if (r == NULL)
	{
		r = &quota->roles[0];
		for (int i = 1; i < IDGEN_SEQ_ROLE_SLOTS; i++)
			if (quota->roles[i].counted_at < r->counted_at)
				r = &quota->roles[i];
	}
	r->dbid = MyDatabaseId;
	r->role = role;
	r->cap = limit;
	r->counted_at = now;
	r->keys = counted < limit ? counted + 1 : counted;
	LWLockRelease(quota->roles_lock);
}

/* ----------
 * Counting
 * ----------
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
	char		key[IDGEN_SEQ_MAX_KEY]; /* not terminated, zero-padded */
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
void
idgen_seq_check_keys_per_role(IdgenSeqTable *t, text *key, TimestampTz now)
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
		taken = role_keys_take(role, limit, now);
		if (taken || looked)
			break;

		/*
		 * A count: lock the index it reads first, not under the role's lock,
		 * under which nothing may wait (a DROP INDEX CONCURRENTLY could hold
		 * it).
		 */
		LockRelease(&tag, ExclusiveLock, false);
		idx = created_by_index(t->rel);
		looked = true;
	}
	if (!taken)
	{
		keys = count_role_keys(t, idx, role, key, limit, now);
		role_keys_counted(role, limit, keys, now);
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
 * the header), when the limit is on (in every session of a role it is
 * set for with ALTER ROLE).
 */
void
idgen_seq_created_by_admin(void)
{
	LOCKTAG		tag;

	if (idgen_seq_max_keys_per_role <= 0)
		return;
	role_locktag(&tag, GetUserId());
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	role_keys_created(GetUserId());
	LockRelease(&tag, ExclusiveLock, false);
}

/* Register the estimates' shared memory (when preloading). */
void
idgen_seq_quota_init(void)
{
	if (process_shared_preload_libraries_in_progress)
		idgen_shmem_register(&seq_quota_area);
}
