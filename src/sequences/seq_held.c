/*-------------------------------------------------------------------------
 *
 * seq_held.c
 *	  Keys this transaction holds: a per-key sequence's values advanced in
 *	  backend memory from the transaction's second call on a key to its
 *	  commit.
 *
 * Why
 *	  A key's values belong to the caller's transaction (seq.c).  Writing
 *	  the key's row at every call made the n-th call of a transaction step
 *	  past the n - 1 versions the earlier calls had left, none of which can
 *	  be pruned before the transaction ends: a cost per call growing with n,
 *	  quadratic in all (16 000 calls took 2 s, 300 000 did not end in 20
 *	  minutes).  Now the first call of a transaction on a key locks and
 *	  writes the row, as before; later calls advance a copy of the row in
 *	  backend memory; the row is written once more, just before the
 *	  transaction commits or prepares.  Every call costs the same.
 *
 * State
 *	  A hash table per backend, emptied at the end of every transaction, of
 *	  the keys whose row this transaction locked through idgen_seq_next
 *	  (table OID and key).  An entry holds the key's row as this
 *	  transaction sees it; whether the row exists (a key the transaction
 *	  then dropped or purged does not); whether the table lags the entry
 *	  (dirty); the subtransaction level that took the row's lock; and a
 *	  stack of the entry's states at the start of each subtransaction level
 *	  that changed it.
 *
 * Invariants
 *	  1. While an entry exists, this transaction holds the lock on its row
 *		 (or deleted it): no other transaction can change the key, so the
 *		 entry is the key's latest state.
 *	  2. The table holds the entry's state, or the entry is dirty.
 *	  3. In this transaction, every change to a held key goes through its
 *		 entry: idgen_seq_next, and the administrative functions (which
 *		 start from the entry's row, write the table and update the entry).
 *
 * Events
 *	  - A change to an entry at subtransaction level L first saves the
 *		entry's state, unless level L saved it already or took the lock.
 *	  - Subtransaction commit at level L: a state saved at L becomes the
 *		parent's, unless the parent saved an older one or took the lock;
 *		a lock taken at L is the parent's.
 *	  - Subtransaction abort at level L (ROLLBACK TO SAVEPOINT, an error
 *		caught by a PL/pgSQL exception block): an entry whose lock level L
 *		took is forgotten, as the lock and every write of level L are gone
 *		and the table holds the key's state before L; any other entry gets
 *		back the state saved at L's start, dirty flag included, since the
 *		writes of level L are undone too.  The values level L handed out
 *		are handed out again.
 *	  - Pre-commit and pre-prepare: every dirty entry is written.  Deferred
 *		triggers and WITH HOLD cursors run before it.  An error there (out
 *		of disk space, say) aborts the transaction like any error before
 *		its commit record, and its values go back with it.  PREPARE
 *		TRANSACTION works: the rows are written, and stay locked, in the
 *		prepared transaction, and COMMIT PREPARED makes them durable.
 *	  - Commit, abort, prepare: the table is emptied (and kept for the next
 *		transaction, unless it grew past HELD_KEEP entries).
 *
 * Readers
 *	  idgen_seq_current and the view idgen_seq_keys ask the entry first
 *	  (idgen_seq_held_find); other transactions see the committed rows, as
 *	  before.  A direct read of the table by its owner, in the transaction
 *	  that holds a key, shows the value of the transaction's first call; a
 *	  direct write of a held key's row makes the pre-commit write fail (the
 *	  table is written only through the functions).
 *
 * Parallel workers
 *	  idgen_seq_next and the administrative functions are PARALLEL UNSAFE,
 *	  so only a leader holds keys, and idgen_seq_current and the view's
 *	  function are PARALLEL RESTRICTED: they read the entries in the leader.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "idgen.h"
#include "idgen_seq.h"

/* An entry's state, saved at the start of a subtransaction level. */
typedef struct HeldState
{
	int			level;
	IdgenSeqRow row;
	bool		present;
	bool		dirty;
} HeldState;

/*
 * The hash table, kept from transaction to transaction (made again only
 * after a transaction that held many keys), its memory, how many entries
 * it has, and the entry found last.
 */
static HTAB *held = NULL;
static MemoryContext held_cxt = NULL;
static long nheld = 0;
static IdgenSeqHeld *last_found = NULL;

/* A table that held more keys than this is made again, smaller. */
#define HELD_KEEP	64

/* The deepest subtransaction level with a saved state or a lock taken. */
static int	deepest_level = 0;

static uint32
held_tag_hash(const void *key, Size keysize)
{
	const IdgenSeqHeldTag *tag = (const IdgenSeqHeldTag *) key;

	return hash_combine(murmurhash32(tag->relid),
						hash_bytes((const unsigned char *) tag->key, tag->keylen));
}

static int
held_tag_compare(const void *key1, const void *key2, Size keysize)
{
	const IdgenSeqHeldTag *a = (const IdgenSeqHeldTag *) key1;
	const IdgenSeqHeldTag *b = (const IdgenSeqHeldTag *) key2;

	if (a->relid != b->relid || a->keylen != b->keylen)
		return 1;
	return memcmp(a->key, b->key, a->keylen);
}

static void
set_tag(IdgenSeqHeldTag *tag, Oid relid, const char *key, int keylen)
{
	Assert(keylen > 0 && keylen <= IDGEN_SEQ_MAX_KEY);
	tag->relid = relid;
	tag->keylen = keylen;
	memcpy(tag->key, key, keylen);
}

static void
create_table(void)
{
	HASHCTL		ctl;

	if (held_cxt == NULL)
		held_cxt = AllocSetContextCreate(TopMemoryContext, "idgen held keys",
										 ALLOCSET_SMALL_SIZES);
	ctl.keysize = sizeof(IdgenSeqHeldTag);
	ctl.entrysize = sizeof(IdgenSeqHeld);
	ctl.hash = held_tag_hash;
	ctl.match = held_tag_compare;
	ctl.hcxt = held_cxt;
	held = hash_create("idgen held keys", 16, &ctl,
					   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}

/* Remove entry 'h'. */
static void
remove_entry(IdgenSeqHeld *h)
{
	if (h->saved != NULL)
		pfree(h->saved);
	if (last_found == h)
		last_found = NULL;
	(void) hash_search(held, &h->tag, HASH_REMOVE, NULL);
	nheld--;
}

/* The end of the transaction: forget every entry. */
static void
forget_all(void)
{
	HASH_SEQ_STATUS status;
	IdgenSeqHeld *h;

	deepest_level = 0;
	last_found = NULL;
	if (nheld == 0)
		return;
	if (nheld > HELD_KEEP)
	{
		held = NULL;
		nheld = 0;
		MemoryContextReset(held_cxt);
		return;
	}
	hash_seq_init(&status, held);
	while ((h = (IdgenSeqHeld *) hash_seq_search(&status)) != NULL)
		remove_entry(h);
	Assert(nheld == 0);
}

/*
 * The entry of a key this transaction holds, or NULL.  On every call of
 * idgen_seq_next, so the entry found last is compared first.
 */
IdgenSeqHeld *
idgen_seq_held_find(Oid relid, const char *key, int keylen)
{
	IdgenSeqHeldTag tag;

	if (nheld == 0)
		return NULL;
	if (last_found != NULL && last_found->tag.relid == relid &&
		last_found->tag.keylen == keylen && memcmp(last_found->tag.key, key, keylen) == 0)
		return last_found;
	set_tag(&tag, relid, key, keylen);
	last_found = (IdgenSeqHeld *) hash_search(held, &tag, HASH_FIND, NULL);
	return last_found;
}

/*
 * Save the entry's state before a change at the current subtransaction
 * level, unless this level saved it already or took the lock (an abort of
 * the level then forgets the entry).
 */
static void
save_state(IdgenSeqHeld *h)
{
	int			level = GetCurrentTransactionNestLevel();
	HeldState  *s;

	if (h->lock_level >= level || (h->nsaved > 0 && h->saved[h->nsaved - 1].level >= level))
		return;
	if (h->nsaved == h->maxsaved)
	{
		int			n = h->maxsaved == 0 ? 4 : h->maxsaved * 2;

		h->saved = h->saved == NULL ?
			MemoryContextAlloc(held_cxt, n * sizeof(HeldState)) :
			repalloc(h->saved, n * sizeof(HeldState));
		h->maxsaved = n;
	}
	s = &h->saved[h->nsaved++];
	s->level = level;
	s->row = h->row;
	s->present = h->present;
	s->dirty = h->dirty;
	deepest_level = Max(deepest_level, level);
}

/*
 * The row of a held key, to change in place: its state is saved first and
 * the entry counts as dirty.
 */
IdgenSeqRow *
idgen_seq_held_change(IdgenSeqHeld *h)
{
	Assert(h->present);
	save_state(h);
	h->dirty = true;
	return &h->row;
}

/*
 * This transaction wrote the key's row 'row' (or inserted it): its entry
 * now holds that row, clean.  An entry is made if there is none and
 * 'create' (idgen_seq_next locked the row), else only an existing entry is
 * updated (an administrative function on a key that idgen_seq_next has not
 * used in the transaction needs none).
 */
void
idgen_seq_held_written(Oid relid, const char *key, int keylen, const IdgenSeqRow *row,
					   bool create)
{
	IdgenSeqHeld *h = idgen_seq_held_find(relid, key, keylen);

	if (h == NULL)
	{
		IdgenSeqHeldTag tag;
		bool		found;

		if (!create)
			return;
		if (held == NULL)
			create_table();
		set_tag(&tag, relid, key, keylen);
		h = (IdgenSeqHeld *) hash_search(held, &tag, HASH_ENTER, &found);
		Assert(!found);
		nheld++;
		h->lock_level = GetCurrentTransactionNestLevel();
		h->nsaved = h->maxsaved = 0;
		h->saved = NULL;
		deepest_level = Max(deepest_level, h->lock_level);
		last_found = h;
	}
	else
		save_state(h);
	h->row = *row;
	h->present = true;
	h->dirty = false;
}

/* This transaction deleted the row of the key (a drop or a purge). */
void
idgen_seq_held_deleted(Oid relid, const char *key, int keylen)
{
	IdgenSeqHeld *h = idgen_seq_held_find(relid, key, keylen);

	if (h == NULL)
		return;
	save_state(h);
	h->present = false;
	h->dirty = false;
}

/*
 * Write every dirty entry to its table: at pre-commit, and before anything
 * that reads the table's rows as they are (a purge).  A table dropped in
 * this transaction (DROP EXTENSION) has nothing to write.
 */
void
idgen_seq_held_write_all(void)
{
	HASH_SEQ_STATUS status;
	IdgenSeqHeld *h;
	IdgenSeqTable t;
	Oid			open_relid = InvalidOid;

	if (nheld == 0)
		return;
	hash_seq_init(&status, held);
	while ((h = (IdgenSeqHeld *) hash_seq_search(&status)) != NULL)
	{
		text	   *key;

		if (!h->present || !h->dirty)
			continue;
		if (h->tag.relid != open_relid)
		{
			if (OidIsValid(open_relid))
				idgen_seq_close_table(&t);
			open_relid = InvalidOid;
			if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(h->tag.relid)))
				continue;
			idgen_seq_open_table_oid(h->tag.relid, &t);
			open_relid = h->tag.relid;
		}
		key = cstring_to_text_with_len(h->tag.key, h->tag.keylen);
		if (!idgen_seq_find_held_row(&t, key))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the row of sequence key \"%s\" was deleted by other means than the idgen_seq functions",
							text_to_cstring(key)),
					 errdetail("This transaction advanced the key and then found its row gone: its last values cannot be recorded."),
					 errhint("Change table \"%s\" only through the idgen_seq functions.",
							 RelationGetRelationName(t.rel))));
		save_state(h);
		idgen_seq_write_row(&t, &h->row);
		h->dirty = false;
		pfree(key);
	}
	if (OidIsValid(open_relid))
		idgen_seq_close_table(&t);
}

/* Subtransaction 'level' ends: commit or abort its changes to the entries. */
static void
end_subtransaction(int level, bool commit)
{
	HASH_SEQ_STATUS status;
	IdgenSeqHeld *h;

	if (nheld == 0 || deepest_level < level)
		return;
	hash_seq_init(&status, held);
	while ((h = (IdgenSeqHeld *) hash_seq_search(&status)) != NULL)
	{
		HeldState  *top = h->nsaved > 0 ? &h->saved[h->nsaved - 1] : NULL;

		if (!commit && h->lock_level >= level)
		{
			/* The lock and the row's versions of this level are gone. */
			remove_entry(h);
			continue;
		}
		if (commit && h->lock_level >= level)
			h->lock_level = level - 1;
		if (top == NULL || top->level < level)
			continue;
		Assert(top->level == level);
		if (!commit)
		{
			h->row = top->row;
			h->present = top->present;
			h->dirty = top->dirty;
			h->nsaved--;
		}
		else if (h->lock_level >= level - 1 ||
				 (h->nsaved > 1 && h->saved[h->nsaved - 2].level == level - 1))
			h->nsaved--;		/* the parent has an older state, or the lock */
		else
			top->level = level - 1; /* the state at the parent's start, too */
	}
	deepest_level = level - 1;
}

static void
held_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			idgen_seq_held_write_all();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			forget_all();
			break;
		default:
			break;
	}
}

static void
held_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_COMMIT_SUB)
		end_subtransaction(GetCurrentTransactionNestLevel(), true);
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		end_subtransaction(GetCurrentTransactionNestLevel(), false);
}

void
idgen_seq_held_init(void)
{
	RegisterXactCallback(held_xact_callback, NULL);
	RegisterSubXactCallback(held_subxact_callback, NULL);
}
