/*-------------------------------------------------------------------------
 *
 * seq_cache.c
 *	  Cached per-key sequences: values served from segments in shared
 *	  memory, double-buffered as in the segment mode of Meituan's Leaf
 *	  (https://github.com/Meituan-Dianping/Leaf, described in
 *	  https://tech.meituan.com/2017/04/21/mt-leaf.html), where a server
 *	  loads the next segment of a key while it serves the current one, and
 *	  sizes segments so that one lasts about 15 minutes.
 *
 * A key configured with cache => n is served from a fixed-capacity table of
 * entries in shared memory (idgen.seq_cache_keys), one per cached key.  Each
 * entry has two segments: the one being served and the next one.  A segment
 * is a range of the key's values that the idgen sequencer of the key's
 * database (sequencer.c) has reserved in its own committed transaction by
 * advancing the key's row past it, before any of its values is served.  So
 * every value served is at most the row's value, and after a crash or a
 * restart new segments start past it: no value is ever served twice (a
 * key that cycles aside, which is its own rule).  A segment never reaches
 * past the key's limit: one that ends there is final, and a call that
 * needs more than it has left fails with 2200H, as in the transactional
 * mode, without taking any of it.  Values that were
 * reserved but not served are lost (a gap) on a crash, a restart, an
 * eviction, or when the key is set, dropped or reconfigured.
 *
 * Serving
 *	  The entry's cursor word packs (keygen:20, epoch:13, offset:31).  The
 *	  current segment is seg[epoch & 1]; offset counts the values of it
 *	  already served.  A caller reads the entry's 'switches', then (after a
 *	  read barrier) the cursor, then (after another) copies the segment the
 *	  cursor names, and claims values with one compare-and-swap of the
 *	  cursor (idgen_seq_cache_claim): the common case takes no lock.  It then
 *	  reads 'switches' again, and keeps the values only if it grew by less
 *	  than 8191 (EPOCH_ROUND - 1) meanwhile; otherwise the claim is given
 *	  up, a gap, and the caller starts over.
 *
 *	  Why no value is served twice, however long a caller stalls.  The
 *	  cursor is written in two ways only: a claim, which adds to the offset
 *	  (never past the segment's count, so never into the epoch), and a move
 *	  (move_cursor: a switch to the next segment, a retirement or an
 *	  install), under the entry's lock, which adds one to the epoch.  A
 *	  move adds one to 'switches' first, and a write barrier orders the
 *	  slot it names and that count before the cursor.  Number the moves
 *	  1, 2, ...; the cursor is "in round k" from move k to move k + 1.  A
 *	  slot is written only under the lock while the cursor names the other
 *	  slot, so the slot of round k holds round k's segment for all of round
 *	  k.  Say the caller read s1 from 'switches', then a cursor of round a,
 *	  and its swap succeeded on a cursor of round b (b >= a), then it read
 *	  s2.  The cursor of move s1 - 1 was written before move s1's count (the
 *	  lock orders the moves), so a >= s1 - 1; the count of move b was
 *	  written before its cursor, and the swap is a full barrier, so s2 >= b.
 *	  The swap found the very word read, so the epochs of rounds a and b are
 *	  equal: b - a is a multiple of 8192, and b - a <= s2 - s1 + 1 < 8192,
 *	  so b = a.  The whole copy then happened in round a, from the slot of
 *	  round a (read after its cursor, which was written after it), and the
 *	  swap claimed offsets of that segment that no other swap claims.  A
 *	  stall anywhere before the second read of 'switches' (before the copy,
 *	  between it and the swap, after the swap) only makes s2 - s1 larger:
 *	  a gap, never a repeat.  After that read the values are computed from
 *	  the caller's own copy.  'switches' is 64 bits: at a billion moves a
 *	  second it comes back after 584 years, where the 13-bit epoch came
 *	  back after 8192 moves (a caller stopped by a debugger, a VM pause or
 *	  SIGSTOP while another session used 8192 segments got values served
 *	  before; test/t/034_seq_cache_stall.pl).
 *
 *	  That the entry is still the key's rests on the keygen, 20 bits, which
 *	  comes back after 2^20 retirements and installs (each with a move).
 *	  The caller looked the key up under map_lock, which every keygen
 *	  change takes, reading the entry's keygen and 'switches' (s0) there;
 *	  it looks the key up again whenever s1 - s0 reaches EPOCH_ROUND.  So
 *	  s2 - s0 < 2 * EPOCH_ROUND: fewer keygen changes than that (each has
 *	  its move), far fewer than 2^20, came between the lookup and round b,
 *	  and a swap that found the keygen looked up found the entry the lookup
 *	  found, the key's.
 *
 *	  The other two uses of a caller's copy are checked too: a caller
 *	  switches to the next segment only if, under the entry's lock, the
 *	  entry is its key's (keygen and tag) and the segment the cursor names
 *	  is used up; and the final segment's 2200H is raised only if the
 *	  cursor, read again, names the segment copied, in the same round (the
 *	  cursor, a read barrier, then 'switches': s2 >= b as above).
 *
 *	  When the offset reaches the segment's prefetch point (a fraction,
 *	  idgen.seq_cache_prefetch, of it used) the caller asks the sequencer for
 *	  the next segment.  When the segment is used up, the caller takes the
 *	  entry's lock and switches to the next segment, or, if it is not there
 *	  yet, waits for the sequencer on a condition variable, at most
 *	  idgen.seq_cache_wait, then fails: a value is never served without a
 *	  durable reservation.
 *
 * Invalidation and eviction
 *	  Setting, dropping or reconfiguring a key removes its entry: under its
 *	  lock the keygen is bumped and the cursor moved to an empty segment, so
 *	  a compare-and-swap on an old cursor fails, and a caller with the old
 *	  keygen looks the key up again.  A segment reserved for an entry whose
 *	  keygen changed meanwhile is not published.  A full table evicts the
 *	  entry used least recently.
 *
 * Segment size
 *	  Segments start at n values (the key's cache setting), double, up to
 *	  min(n * 1024, 2^30), when used up within IDGEN_SEQ_SEGMENT_TARGET, and
 *	  halve, down to n, when one lasted more than four times that.
 *
 * Locking
 *	  map_lock guards the key -> entry map and entry allocation; an entry's
 *	  tag and keygen change only under both map_lock (exclusive) and the
 *	  entry's lock.  Everything else of an entry but the cursor and the use
 *	  marks is under the entry's lock ('switches' is written under it and
 *	  read without it, see "Serving").
 *
 * The database's sequencer
 *	  Entries wanting a segment are queued for their database's sequencer
 *	  (slot and queue: seq_slots.c; sequencer.c), which reserves them through
 *	  collect, reserve and publish here.  One that attaches or gives its slot
 *	  away first retires its database's entries: no segment reserved before
 *	  is served after the row's values.
 *
 * This file holds the entry protocol alone, both sides of it (callers
 * serving, the sequencer reserving): the one file of src/ over 1 000 lines.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_seq.h"
#include "idgen_sequencer.h"
#include "idgen_shmem.h"

/*
 * A segment of a key's values: 'count' values from 'first' on, as
 * nextval() would give them with the key's options.
 */
typedef struct SeqSegment
{
	int64		first;
	int64		step;
	int64		min_value;
	int64		max_value;
	bool		cycle;
	bool		final;			/* it ends at the key's limit (no cycle) */
	uint64		to_limit;		/* idgen_seq_values_to_limit() from 'first' */
	uint32		count;
	uint32		prefetch_at;	/* offset at which the next is requested */
} SeqSegment;

typedef struct SeqCacheTag
{
	Oid			dbid;
	char		key[IDGEN_SEQ_MAX_KEY + 1]; /* NUL-terminated, zero-padded */
} SeqCacheTag;

typedef struct SeqCacheEntry
{
	/*
	 * The cursor, padded to a cache line's size so that the fields below
	 * (written under the lock) do not share its line, with the hints callers
	 * write without a lock (on the line they write anyway).  Entries are 600
	 * bytes on x86-64, not a multiple of the line, so the previous entry's
	 * tail may share it.
	 */
	union
	{
		struct
		{
			pg_atomic_uint64 cursor;
			pg_atomic_uint64 switches;	/* the cursor's moves; see "Serving" */
			TimestampTz last_used;	/* statement time of a recent use (LRU) */
			bool		used;	/* since the sequencer last recorded a use */
		}			f;
		char		pad[PG_CACHE_LINE_SIZE];
	}			c;

	/* under 'lock' */
	LWLock	   *lock;
	bool		in_use;
	SeqCacheTag tag;
	uint32		keygen;
	SeqSegment	seg[2];
	bool		next_ready;		/* seg[(epoch + 1) & 1] holds the next */
	bool		requested;		/* the sequencer is asked for a segment */
	bool		reserving;		/* the sequencer is reserving one */
	bool		failed;			/* the key reached its limit (no cycle) */
	int64		failed_step;	/* then: its step and limit, for the error */
	int64		failed_limit;
	bool		has_ttl;
	Oid			relid;			/* the table idgen_seq its segments come from */
	int32		cache;			/* the minimum segment size */
	int64		seg_size;		/* the size of the next reservation */
	TimestampTz seg_started;	/* when the current segment became current */
	int64		served_before;	/* values of the segments used up */
	int64		fetches;
	int64		waits;
} SeqCacheEntry;

typedef struct SeqCacheShared
{
	LWLock	   *map_lock;
	ConditionVariable cv;		/* a segment was published, or a key dropped */

	pg_atomic_uint64 installs;	/* entries installed so far */

	int			nentries;
	SeqCacheEntry entries[FLEXIBLE_ARRAY_MEMBER];
} SeqCacheShared;

typedef struct SeqCacheMapEntry
{
	SeqCacheTag tag;			/* hash key */
	int			index;
} SeqCacheMapEntry;

/*
 * The backend's own map: hash of (database, key) -> (entry, keygen).  It
 * holds no key text: a hit is checked against the entry's tag in shared
 * memory (read without its lock; a torn or stale read only fails the check,
 * or the compare-and-swap, whose cursor names the keygen).  Two keys with
 * one hash share a slot and take turns.  A key found without an entry is
 * remembered as such until the next install anywhere, so that a
 * transactional key costs no shared lookup per call.
 */
typedef struct LocalEntry
{
	uint32		hash;			/* simplehash key */
	char		status;
	int			index;			/* -1: the key had no entry (see 'installs') */
	uint32		keygen;
	uint64		switches;		/* the entry's 'switches' at the lookup */
	uint64		installs;		/* for index -1: cache->installs then */
} LocalEntry;

#define SH_PREFIX		localkeys
#define SH_ELEMENT_TYPE	LocalEntry
#define SH_KEY_TYPE		uint32
#define SH_KEY			hash
#define SH_HASH_KEY(tb, key)	(key)
#define SH_EQUAL(tb, a, b)		((a) == (b))
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/*
 * The cursor: keygen (20 bits) | epoch (13 bits) | offset (31 bits; a
 * segment has at most 2^30 values).  The word comes back to a value it had
 * after 8192 moves (EPOCH_ROUND); 'switches' tells a caller whether that
 * many may have happened since it read the word (see "Serving").
 */
#define KEYGEN_BITS		20
#define KEYGEN_MASK		((UINT64CONST(1) << KEYGEN_BITS) - 1)
#define EPOCH_MASK		UINT64CONST(0x1FFF)
#define EPOCH_ROUND		(EPOCH_MASK + 1)	/* moves that bring an epoch back */
#define OFFSET_MASK		UINT64CONST(0x7FFFFFFF)
#define CURSOR(keygen, epoch, off) \
	((((uint64) (keygen) & KEYGEN_MASK) << 44) | (((uint64) (epoch) & EPOCH_MASK) << 31) | (uint64) (off))
#define CURSOR_KEYGEN(w)	((uint32) ((w) >> 44))
#define CURSOR_EPOCH(w)		((uint32) (((w) >> 31) & EPOCH_MASK))
#define CURSOR_OFFSET(w)	((uint32) ((w) & OFFSET_MASK))
/* Whether cursors 'a' and 'b' name the same key and segment. */
#define same_segment(a, b)	(((a) >> 31) == ((b) >> 31))

/* A segment should last about this long (Leaf's 15 minutes, scaled down). */
#define IDGEN_SEQ_SEGMENT_TARGET	(10 * USECS_PER_SEC)
#define IDGEN_SEQ_MAX_SEGMENT		(1 << 30)

static SeqCacheShared *cache = NULL;
static HTAB *map = NULL;
static localkeys_hash *local_map = NULL;

/* ----------
 * Shared memory
 * ----------
 */
/* The structure and its entries. */
static Size
struct_size(void)
{
	Size		size = offsetof(SeqCacheShared, entries);

	return add_size(size, mul_size(sizeof(SeqCacheEntry), idgen_seq_cache_keys));
}

/* The shared map of keys to entries, outside the struct. */
static Size
map_size(void)
{
	return hash_estimate_size(idgen_seq_cache_keys, sizeof(SeqCacheMapEntry));
}

/* map_lock, one per entry */
static int
nlocks(void)
{
	return idgen_seq_cache_keys + 1;
}

static void
shmem_startup(void *ptr, bool found, LWLockPadded *locks)
{
	HASHCTL		info;

	cache = (SeqCacheShared *) ptr;
	if (!found)
	{
		cache->map_lock = &locks[0].lock;
		ConditionVariableInit(&cache->cv);
		pg_atomic_init_u64(&cache->installs, 0);
		cache->nentries = idgen_seq_cache_keys;
		for (int i = 0; i < cache->nentries; i++)
		{
			SeqCacheEntry *e = &cache->entries[i];

			memset(e, 0, sizeof(*e));
			pg_atomic_init_u64(&e->c.f.cursor, CURSOR(0, 0, 0));
			pg_atomic_init_u64(&e->c.f.switches, 0);
			e->lock = &locks[i + 1].lock;
		}
	}

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(SeqCacheTag);
	info.entrysize = sizeof(SeqCacheMapEntry);
	map = idgen_shmem_init_hash("idgen seq cache map", idgen_seq_cache_keys,
								&info, HASH_ELEM | HASH_BLOBS);
}

static const IdgenShmemArea seq_cache_area = {
	.name = "idgen seq cache",
	.size = struct_size,
	.extra_size = map_size,
	.nlocks = nlocks,
	.own_segment = true,
	.startup = shmem_startup,
};

/* ----------
 * Helpers
 * ----------
 */
/* A tag for the shared map: zero-padded, as HASH_BLOBS compares it all. */
static void
make_tag(SeqCacheTag *tag, Oid dbid, const char *key, int len)
{
	memset(tag, 0, sizeof(*tag));
	tag->dbid = dbid;
	memcpy(tag->key, key, len);
}

/*
 * The value 'off' (0-based) of segment 's' (seq_row.c, "The limit rule");
 * only a key that cycles has values past its limit in a segment.
 */
static inline int64
segment_value(const SeqSegment *s, uint64 off)
{
	Assert(off < s->count);
	Assert(s->cycle || s->to_limit == 0 || off < s->to_limit);
	return idgen_seq_value_at(s->first, s->step, s->min_value, s->max_value, s->to_limit, off);
}

/*
 * Ask the sequencer for a segment for entry 'e' (its lock held), unless one is
 * asked for or being reserved already; 'urgent' when the caller will wait
 * for it.  Returns whether the sequencer must be woken: for an urgent request,
 * or the first in the queue (it sleeps a little to gather the others).
 */
static bool
request_segment(SeqCacheEntry *e, bool urgent)
{
	int			index = -1;

	Assert(LWLockHeldByMeInMode(e->lock, LW_EXCLUSIVE));
	if (!e->requested && !e->reserving)
	{
		e->requested = true;
		index = (int) (e - cache->entries);
	}
	/* the queue of the database's process (seq_slots.c) */
	return idgen_seq_slot_request(e->tag.dbid, index, urgent) || urgent;
}

/*
 * Move the cursor of entry 'e' (its lock held), now 'w', to the next
 * segment slot, at offset 0, under the entry's keygen: the only write of
 * the cursor but a claim.  Counted in 'switches' first, and published after
 * that count and after the slot it names (see "Serving").
 */
static void
move_cursor(SeqCacheEntry *e, uint64 w)
{
	Assert(LWLockHeldByMeInMode(e->lock, LW_EXCLUSIVE));
	pg_atomic_write_u64(&e->c.f.switches, pg_atomic_read_u64(&e->c.f.switches) + 1);
	pg_write_barrier();
	pg_atomic_write_u64(&e->c.f.cursor, CURSOR(e->keygen, CURSOR_EPOCH(w) + 1, 0));
}

/*
 * Whether a caller that read 'switches' (then, after a read barrier, the
 * cursor, and copied the segment it names) is sure that the copy is of the
 * segment its claim was made in: 'switches', read again here after the
 * claim's compare-and-swap (or after a second read of the cursor and a read
 * barrier), grew by less than EPOCH_ROUND - 1 (see "Serving").
 */
static inline bool
same_round(SeqCacheEntry *e, uint64 switches)
{
	return pg_atomic_read_u64(&e->c.f.switches) - switches < EPOCH_ROUND - 1;
}

/* Remove entry 'e' (map_lock held exclusively, e->lock held). */
static void
retire_entry(SeqCacheEntry *e)
{
	uint64		w = pg_atomic_read_u64(&e->c.f.cursor);
	uint32		next = (CURSOR_EPOCH(w) + 1) & 1;

	(void) hash_search(map, &e->tag, HASH_REMOVE, NULL);
	e->keygen = (e->keygen + 1) & KEYGEN_MASK;
	e->seg[next].count = 0;
	e->seg[next].final = false;
	e->seg[next].prefetch_at = 0;
	/* a queued index is skipped */
	e->next_ready = e->requested = e->reserving = e->failed = false;
	e->in_use = false;
	move_cursor(e, w);
}

/*
 * Make the next segment current (e->lock held; the current one, of cursor
 * 'w', is used up), and adapt the size of the reservations to come to how
 * long the used-up segment lasted.
 */
static void
switch_segment(SeqCacheEntry *e, uint64 w)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		lasted = now - e->seg_started;
	int64		max_size = Min((int64) e->cache * 1024, (int64) IDGEN_SEQ_MAX_SEGMENT);
	uint32		epoch = CURSOR_EPOCH(w);

	/* only a segment used up is switched from, to one published */
	Assert(CURSOR_OFFSET(w) >= e->seg[epoch & 1].count);
	Assert(e->seg[(epoch + 1) & 1].count > 0);
	if (lasted < IDGEN_SEQ_SEGMENT_TARGET)
		e->seg_size = Min(e->seg_size * 2, max_size);
	else if (lasted > 4 * IDGEN_SEQ_SEGMENT_TARGET)
		e->seg_size = Max(e->seg_size / 2, (int64) e->cache);
	e->served_before += e->seg[epoch & 1].count;
	e->seg_started = now;
	e->next_ready = false;
	move_cursor(e, w);
}

/* ----------
 * The backend's map
 * ----------
 */
static uint32
key_hash(Oid dbid, const char *key, int keylen)
{
	return hash_combine(murmurhash32(dbid), hash_bytes((const unsigned char *) key, keylen));
}

/* Whether entry 'e' is (as far as an unlocked read can tell) the key's. */
static bool
entry_is(const SeqCacheEntry *e, const char *key, int keylen)
{
	return e->tag.dbid == MyDatabaseId && e->tag.key[keylen] == '\0' &&
		memcmp(e->tag.key, key, keylen) == 0;
}

/*
 * Find the key's entry in shared memory: its index and keygen into 'le';
 * false (and 'le' untouched) if it has none.
 */
static bool
shared_lookup(const SeqCacheTag *tag, LocalEntry *le)
{
	SeqCacheMapEntry *m;
	bool		found = false;

	LWLockAcquire(cache->map_lock, LW_SHARED);
	m = (SeqCacheMapEntry *) hash_search(map, tag, HASH_FIND, NULL);
	if (m)
	{
		le->index = m->index;
		/* Under map_lock: no keygen changes before both are read. */
		le->keygen = cache->entries[m->index].keygen;
		le->switches = pg_atomic_read_u64(&cache->entries[m->index].c.f.switches);
		found = true;
	}
	LWLockRelease(cache->map_lock);
	return found;
}

/* ----------
 * Serving
 * ----------
 */

/*
 * The current segment is used up (the cursor is 'w'): switch to the next
 * one, or wait for the sequencer to bring it.  Returns when the cursor has
 * moved (or the entry changed); fails after idgen.seq_cache_wait.
 */
static void
switch_or_wait(SeqCacheEntry *e, uint32 keygen, uint64 w, const char *key, int keylen,
			   int count)
{
	SeqCacheTag tag;			/* the key, NUL-terminated, for messages */
	TimestampTz start = GetCurrentTimestamp();
	bool		counted = false;
	bool		woke = false;

	make_tag(&tag, MyDatabaseId, key, keylen);

	ConditionVariablePrepareToSleep(&cache->cv);
	for (;;)
	{
		bool		failed;
		int64		failed_step = 0;
		int64		failed_limit = 0;
		bool		wake = false;
		long		waited_ms;

		LWLockAcquire(e->lock, LW_EXCLUSIVE);

		/*
		 * The cursor moved, or the entry changed (its keygen, or, after as
		 * many changes as the keygen has values, its key), or the segment it
		 * names has values left (the caller's copy of it was of an earlier
		 * round of the epoch: see "Serving"): serve again.
		 */
		if (pg_atomic_read_u64(&e->c.f.cursor) != w || e->keygen != keygen ||
			e->tag.dbid != MyDatabaseId || strcmp(e->tag.key, tag.key) != 0 ||
			CURSOR_OFFSET(w) < e->seg[CURSOR_EPOCH(w) & 1].count)
		{
			LWLockRelease(e->lock);
			break;
		}
		failed = e->failed;
		if (failed)
		{
			failed_step = e->failed_step;
			failed_limit = e->failed_limit;
		}
		if (!failed && e->next_ready)
		{
			switch_segment(e, w);
			wake = request_segment(e, false);	/* and the one after */
			LWLockRelease(e->lock);
			if (wake)
				idgen_seq_slot_wake();
			break;
		}
		if (!failed)
		{
			wake = request_segment(e, true);
			if (!counted)
				e->waits++, counted = true;
		}
		LWLockRelease(e->lock);
		if (failed)
		{
			ConditionVariableCancelSleep();
			idgen_seq_limit_reached(tag.key, failed_step, failed_limit, count);
		}
		if (wake || !woke)
		{
			idgen_seq_slot_wake();
			woke = true;
		}

		waited_ms = (long) ((GetCurrentTimestamp() - start) / 1000);
		if (waited_ms >= idgen_seq_cache_wait_ms)
		{
			ConditionVariableCancelSleep();
			idgen_seq_cache_timed_out(tag.key);
		}
		/* Woken by a publication (or a retirement); or look again in 100 ms. */
		(void) ConditionVariableTimedSleep(&cache->cv, Min(idgen_seq_cache_wait_ms - waited_ms, 100L),
										   PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
}

/*
 * The backend's entry for the key, naming its entry in shared memory; NULL
 * if the key has none (remembered until the next install anywhere).
 */
static LocalEntry *
local_entry(const char *key, int keylen, uint32 h)
{
	LocalEntry *le;
	SeqCacheTag tag;
	uint64		installs;
	bool		inserted;

	if (local_map == NULL)
		local_map = localkeys_create(TopMemoryContext, 256, NULL);
	le = localkeys_lookup(local_map, h);
	if (le != NULL && le->index >= 0 && entry_is(&cache->entries[le->index], key, keylen))
		return le;
	installs = pg_atomic_read_u64(&cache->installs);
	if (le != NULL && le->index < 0 && le->installs == installs)
		return NULL;			/* no entry, and none installed since */

	make_tag(&tag, MyDatabaseId, key, keylen);
	le = localkeys_insert(local_map, h, &inserted);
	if (shared_lookup(&tag, le))
		return le;
	le->index = -1;
	le->installs = installs;
	return NULL;
}

/*
 * The key's entry was retired or reused: find its entry again, into 'le';
 * false (and 'le' forgotten) if it has none now.
 */
static bool
look_up_again(LocalEntry *le, const char *key, int keylen, uint32 h)
{
	SeqCacheTag tag;

	make_tag(&tag, MyDatabaseId, key, keylen);
	if (shared_lookup(&tag, le))
		return true;
	localkeys_delete(local_map, h);
	return false;
}

/*
 * Entry 'e' was installed for a table that is gone (the extension was
 * dropped and created again): retire it, and forget it here.
 */
static void
forget_stale_entry(SeqCacheEntry *e, LocalEntry *le, Oid relid, uint32 h)
{
	LWLockAcquire(cache->map_lock, LW_EXCLUSIVE);
	LWLockAcquire(e->lock, LW_EXCLUSIVE);
	if (e->in_use && e->keygen == le->keygen && e->relid != relid)
		retire_entry(e);
	LWLockRelease(e->lock);
	LWLockRelease(cache->map_lock);
	localkeys_delete(local_map, h);
}

/*
 * 'take' values of segment 'seg' of entry 'e' were claimed from offset
 * 'off': mark the key used (for the LRU and the ttl), and ask for the next
 * segment if the claim passed the prefetch point.
 */
static void
note_use(SeqCacheEntry *e, uint32 keygen, const SeqSegment *seg, uint32 off, uint32 take)
{
	/* Written only when they change: the line is shared by all callers. */
	if (!e->c.f.used)
		e->c.f.used = true;
	if (e->c.f.last_used != GetCurrentStatementStartTimestamp())
		e->c.f.last_used = GetCurrentStatementStartTimestamp();
	if (off <= seg->prefetch_at && off + take > seg->prefetch_at)
	{
		bool		wake = false;

		LWLockAcquire(e->lock, LW_EXCLUSIVE);
		if (e->keygen == keygen && !e->next_ready)
			wake = request_segment(e, false);
		LWLockRelease(e->lock);
		if (wake)
			idgen_seq_slot_wake();
	}
}

/*
 * Claim 'take' values from cursor 'w': the compare-and-swap of the
 * cursor, the one step of serving that no lock orders.  Kept out of line so
 * that a debugger can stop a caller just before it, or just after it (the
 * stall tests of test/t/034_seq_cache_stall.pl); a call costs nothing next
 * to the rest of a call of idgen_seq_next().
 */
pg_noinline bool
idgen_seq_cache_claim(pg_atomic_uint64 *cursor, uint64 *w, uint32 take)
{
	return pg_atomic_compare_exchange_u64(cursor, w, *w + take);
}

/*
 * The final segment copied ('seg', of cursor 'w') has fewer values left than
 * the call wants: raise 2200H if the cursor, read again, names that segment
 * still, in the same round (see "Serving"); return otherwise, for the
 * caller to start over.
 */
static void
final_segment_short(SeqCacheEntry *e, uint64 w, uint64 switches, const SeqSegment *seg,
					const char *key, int keylen, int count)
{
	SeqCacheTag tag;

	Assert(seg->final && !seg->cycle);
	pg_read_barrier();
	if (!same_segment(pg_atomic_read_u64(&e->c.f.cursor), w))
		return;
	pg_read_barrier();
	if (!same_round(e, switches))
		return;
	make_tag(&tag, MyDatabaseId, key, keylen);
	idgen_seq_limit_reached(tag.key, seg->step, seg->step > 0 ? seg->max_value : seg->min_value,
							count);
}

/*
 * Values 'off' .. off + take - 1 of the caller's copy of a segment into
 * 'out'.  The rest of a batch ('after': its last value so far) goes on in
 * its key's direction, unless the key cycles: else the key was set back.
 */
static void
copy_values(const SeqSegment *seg, uint32 off, uint32 take, int64 *out, const int64 *after,
			const char *key, int keylen)
{
	for (uint32 j = 0; j < take; j++)
		out[j] = segment_value(seg, (uint64) off + j);
	if (after != NULL && !seg->cycle && (seg->step > 0 ? out[0] <= *after : out[0] >= *after))
	{
		SeqCacheTag tag;

		make_tag(&tag, MyDatabaseId, key, keylen);
		idgen_seq_batch_set_back(tag.key, *after);
	}
}

/*
 * Serve up to 'count' values of a cached key into out[]; how many.  Fewer
 * than 'count' (0 included) when the key has no entry in shared memory, or
 * when its entry was retired while the batch was served (the key was
 * reconfigured, set, dropped or evicted meanwhile): the caller looks the
 * key up in the table for the rest, which installs the entry of a cached
 * key.  'after_p' points to the batch's last value so far (NULL: none).
 * The table's value is past every segment ever reserved, so the rest of a
 * batch is past what it holds, unless the key was dropped or set back
 * meanwhile: the batch fails then (40001), here or in seq.c's op_next.
 *
 * A batch that the key's final segment cannot complete fails with 2200H
 * before it takes any value of that segment (values it took from earlier
 * segments are a gap, as any value a cached key reserved and did not
 * serve).
 */
int
idgen_seq_cache_next(const char *key, int keylen, int count, int64 *out, const int64 *after_p,
					 Oid relid)
{
	uint32		h;
	LocalEntry *le;
	int			done = 0;
	bool		has_after = after_p != NULL;
	int64		after = has_after ? *after_p : 0;

	if (!idgen_seq_slot_available())
		return 0;
	h = key_hash(MyDatabaseId, key, keylen);
	le = local_entry(key, keylen, h);
	if (le == NULL)
		return 0;

	for (;;)
	{
		SeqCacheEntry *e = &cache->entries[le->index];
		uint64		switches = pg_atomic_read_u64(&e->c.f.switches);
		uint64		w;
		SeqSegment	seg;
		uint32		off;
		uint32		take;

		CHECK_FOR_INTERRUPTS();

		/*
		 * The keygen looked up is trusted for EPOCH_ROUND moves (see
		 * "Serving").
		 */
		if (unlikely(switches - le->switches >= EPOCH_ROUND))
		{
			if (!look_up_again(le, key, keylen, h))
				return done;
			continue;
		}
		pg_read_barrier();
		w = pg_atomic_read_u64(&e->c.f.cursor);
		if (CURSOR_KEYGEN(w) != (le->keygen & KEYGEN_MASK))
		{
			/* The entry was retired or reused: look the key up again. */
			if (!look_up_again(le, key, keylen, h))
				return done;
			continue;
		}
		pg_read_barrier();
		if (unlikely(e->relid != relid))
		{
			forget_stale_entry(e, le, relid, h);
			return done;
		}
		seg = e->seg[CURSOR_EPOCH(w) & 1];
		off = CURSOR_OFFSET(w);
		if (seg.final && (int64) (count - done) > (int64) seg.count - off)
		{
			final_segment_short(e, w, switches, &seg, key, keylen, count);
			continue;
		}
		if (off >= seg.count)
		{
			switch_or_wait(e, le->keygen, w, key, keylen, count);
			continue;
		}
		take = (uint32) Min((int64) (count - done), (int64) (seg.count - off));
		if (!idgen_seq_cache_claim(&e->c.f.cursor, &w, take))
			continue;
		/* Not proved to be of 'seg' (a stall): given up, a gap. */
		if (unlikely(!same_round(e, switches)))
			continue;

		/* Claimed: the values are this caller's (or a gap). */
		copy_values(&seg, off, take, out + done, has_after ? &after : NULL, key, keylen);
		done += take;
		has_after = true;
		after = out[done - 1];
		note_use(e, le->keygen, &seg, off, take);
		if (done == count)
			return done;
	}
}

/*
 * Give the key an entry (asking the sequencer for its first segment), evicting
 * the least recently used one if the table is full.  'cache_size' is the
 * key's cache setting.
 */
void
idgen_seq_cache_install(const char *key, int keylen, int32 cache_size, bool has_ttl, Oid relid)
{
	SeqCacheTag tag;
	SeqCacheMapEntry *m;
	bool		found;
	SeqCacheEntry *e = NULL;

	if (!idgen_seq_slot_available())
		return;
	make_tag(&tag, MyDatabaseId, key, keylen);
	LWLockAcquire(cache->map_lock, LW_EXCLUSIVE);
	m = (SeqCacheMapEntry *) hash_search(map, &tag, HASH_FIND, NULL);
	if (m)
	{
		LWLockRelease(cache->map_lock);
		return;
	}
	for (int i = 0; i < cache->nentries; i++)
	{
		SeqCacheEntry *c = &cache->entries[i];

		if (!c->in_use)
		{
			e = c;
			break;
		}
		if (e == NULL || c->c.f.last_used < e->c.f.last_used)
			e = c;
	}
	LWLockAcquire(e->lock, LW_EXCLUSIVE);
	if (e->in_use)
		retire_entry(e);		/* evicted: its unserved values are lost */
	e->tag = tag;
	e->in_use = true;
	e->keygen = (e->keygen + 1) & KEYGEN_MASK;
	e->cache = cache_size;
	e->seg_size = cache_size;
	e->has_ttl = has_ttl;
	e->relid = relid;
	e->seg_started = GetCurrentTimestamp();
	e->c.f.last_used = GetCurrentStatementStartTimestamp();
	e->served_before = e->fetches = e->waits = 0;
	e->c.f.used = true;
	e->requested = e->reserving = false;
	(void) request_segment(e, true);
	{
		uint64		w = pg_atomic_read_u64(&e->c.f.cursor);
		uint32		next = (CURSOR_EPOCH(w) + 1) & 1;

		e->seg[next].count = 0;
		e->seg[next].final = false;
		e->seg[next].prefetch_at = 0;
		move_cursor(e, w);
	}
	m = (SeqCacheMapEntry *) hash_search(map, &tag, HASH_ENTER, &found);
	m->index = (int) (e - cache->entries);
	/* After the map has it: backends' "no entry" memories end here. */
	pg_atomic_fetch_add_u64(&cache->installs, 1);
	LWLockRelease(e->lock);
	LWLockRelease(cache->map_lock);
	idgen_seq_slot_wake();
}

/*
 * Forget the key's cached segments at once, on every backend (the key was
 * set, dropped or reconfigured).  Safe to call for any key.
 */
void
idgen_seq_cache_invalidate(const char *key, int keylen)
{
	SeqCacheTag tag;
	SeqCacheMapEntry *m;

	if (cache == NULL)
		return;
	make_tag(&tag, MyDatabaseId, key, keylen);
	LWLockAcquire(cache->map_lock, LW_EXCLUSIVE);
	m = (SeqCacheMapEntry *) hash_search(map, &tag, HASH_FIND, NULL);
	if (m)
	{
		SeqCacheEntry *e = &cache->entries[m->index];

		LWLockAcquire(e->lock, LW_EXCLUSIVE);
		retire_entry(e);
		LWLockRelease(e->lock);
	}
	LWLockRelease(cache->map_lock);
	if (m)
		ConditionVariableBroadcast(&cache->cv);
}

/* ----------
 * A database's process (sequencer.c)
 * ----------
 */
static void retire_database_entries(void);

/*
 * Take slot 'slot' (started for this database, 'generation'); false if it
 * changed hands meanwhile (the launcher restarted).
 */
bool
idgen_seq_cache_sequencer_attach(int slot, uint32 generation, Latch *latch)
{
	if (!idgen_seq_slot_starting(slot, generation))
		return false;

	/*
	 * Start afresh: while no process ran here, cached keys of this database
	 * were served from the table, past the segments their entries hold. Their
	 * callers install them again, past the table's values.  Only then does
	 * the slot say the process runs (and callers serve from here).
	 */
	retire_database_entries();
	idgen_seq_slot_run(slot, latch);
	ConditionVariableBroadcast(&cache->cv);
	return true;
}

/*
 * Retire every entry of this database, and drop the requests of those
 * retired before: callers waiting for a segment look their keys up again
 * and find none (served from the table until a process attaches).
 */
static void
retire_database_entries(void)
{
	LWLockAcquire(cache->map_lock, LW_EXCLUSIVE);
	for (int i = 0; i < cache->nentries; i++)
	{
		SeqCacheEntry *e = &cache->entries[i];

		LWLockAcquire(e->lock, LW_EXCLUSIVE);
		if (e->tag.dbid == MyDatabaseId)
		{
			if (e->in_use)
				retire_entry(e);
			e->requested = e->reserving = false;
		}
		LWLockRelease(e->lock);
	}
	LWLockRelease(cache->map_lock);
	ConditionVariableBroadcast(&cache->cv);
}

/*
 * Whether this process may end after a purge (seq_slots.c says when), from
 * the last use of its database's cached keys.  A slot handed over to
 * another database's purge leaves its requests to nobody: their callers go
 * to the table.
 */
bool
idgen_seq_cache_sequencer_done(int idle_ms)
{
	TimestampTz last = 0;
	bool		handed_over;
	bool		done;

	for (int i = 0; i < cache->nentries; i++)
	{
		SeqCacheEntry *e = &cache->entries[i];

		LWLockAcquire(e->lock, LW_SHARED);
		if (e->in_use && e->tag.dbid == MyDatabaseId)
			last = Max(last, e->c.f.last_used);
		LWLockRelease(e->lock);
	}
	done = idgen_seq_slot_done(last, idle_ms, &handed_over);
	if (handed_over)
		retire_database_entries();
	return done;
}

/*
 * The keys of this database whose entries want a segment, marked as being
 * reserved: their count, with key text, keygen and wanted size in the arrays.
 */
static bool collect_one(SeqCacheEntry *e, IdgenSeqRequest *r);

int
idgen_seq_cache_collect(IdgenSeqRequest *req, int max)
{
	int			n = 0;

	if (idgen_seq_slot_queue_begin())
	{
		int			i;

		for (i = 0; i < cache->nentries && n < max; i++)
			if (cache->entries[i].requested)	/* unlocked peek; rechecked */
				n += collect_one(&cache->entries[i], &req[n]);
		if (i < cache->nentries)
			idgen_seq_slot_rescan();
		return n;
	}
	while (n < max)
	{
		int			i = idgen_seq_slot_queue_pop();

		if (i < 0)
			break;
		Assert(i < cache->nentries);
		n += collect_one(&cache->entries[i], &req[n]);
	}
	return n;
}

/* Take entry 'e''s request into 'r', if it still wants a segment. */
static bool
collect_one(SeqCacheEntry *e, IdgenSeqRequest *r)
{
	bool		taken = false;

	LWLockAcquire(e->lock, LW_EXCLUSIVE);
	if (e->in_use && e->requested && !e->reserving && !e->next_ready &&
		e->tag.dbid == MyDatabaseId)
	{
		e->reserving = true;
		e->requested = false;
		r->index = (int) (e - cache->entries);
		r->keygen = e->keygen;
		r->size = e->seg_size;
		strlcpy(r->key, e->tag.key, sizeof(r->key));
		r->outcome = IDGEN_SEQ_RETRY;
		taken = true;
	}
	LWLockRelease(e->lock);
	return taken;
}

/*
 * Whether the entry of request 'r' is still the one it was made for (the
 * sequencer holds the key's row locked).  A key that is set, dropped or
 * reconfigured has its entry retired before that transaction commits, so
 * once the sequencer holds the row, a request of a retired entry is known as
 * such: the sequencer then leaves the row alone, instead of reserving a
 * segment nobody will serve (which would skip past an idgen_seq_set(k, v,
 * false): the next entry would start after it).
 */
bool
idgen_seq_cache_request_live(const IdgenSeqRequest *r)
{
	SeqCacheEntry *e = &cache->entries[r->index];
	bool		live;

	LWLockAcquire(e->lock, LW_SHARED);
	live = e->in_use && e->keygen == r->keygen;
	LWLockRelease(e->lock);
	return live;
}

/*
 * The segment of up to 'size' values the key's row gives next, into 'r':
 * how many fit before the key's limit (0 if it has reached it); the row's
 * new value (the segment's last), to be written with called true.
 */
int64
idgen_seq_cache_reserve(IdgenSeqRequest *r, const IdgenSeqRow *row)
{
	SeqSegment	s = {0};
	const IdgenSeqRow *stored = row;
	IdgenSeqRow nv;

	/* this node's values only (active.c): a segment of its class */
	if (idgen_active_nodes > 1)
	{
		idgen_seq_node_view(row, r->key, &nv);
		row = &nv;
	}
	r->step = row->step;
	r->min_value = row->min_value;
	r->max_value = row->max_value;
	r->cycle = row->cycle;
	r->final = false;
	r->count = 0;
	r->first = row->value;
	if (row->called && !idgen_seq_advance(row, row->value, &r->first))
	{
		/* at its limit: the limit reached, for the error */
		r->first = row->step > 0 ? row->max_value : row->min_value;
		return stored->value;
	}
	r->count = idgen_seq_fit(r->first, row->step, row->min_value, row->max_value, row->cycle,
							 r->size, &r->final);
	Assert(r->count >= 1 && r->count <= r->size && r->size <= IDGEN_SEQ_MAX_SEGMENT);
	s.first = r->first;
	s.step = r->step;
	s.min_value = r->min_value;
	s.max_value = r->max_value;
	s.cycle = r->cycle;
	s.to_limit = idgen_seq_values_to_limit(s.first, s.step, s.min_value, s.max_value);
	s.count = (uint32) r->count;
	return segment_value(&s, (uint64) r->count - 1);
}

/*
 * Publish the outcome of the reservations (after their commit).
 */
void
idgen_seq_cache_publish(IdgenSeqRequest *req, int n)
{
	for (int i = 0; i < n; i++)
	{
		IdgenSeqRequest *r = &req[i];
		SeqCacheEntry *e = &cache->entries[r->index];

		if (r->outcome == IDGEN_SEQ_FORGET)
		{
			LWLockAcquire(cache->map_lock, LW_EXCLUSIVE);
			LWLockAcquire(e->lock, LW_EXCLUSIVE);
			if (e->in_use && e->keygen == r->keygen)
				retire_entry(e);
			LWLockRelease(e->lock);
			LWLockRelease(cache->map_lock);
			continue;
		}
		LWLockAcquire(e->lock, LW_EXCLUSIVE);
		if (e->in_use && e->keygen == r->keygen && e->reserving)
		{
			e->reserving = false;
			if (r->outcome == IDGEN_SEQ_RETRY)
				(void) request_segment(e, false);
			else if (r->outcome == IDGEN_SEQ_RESERVED && r->count == 0)
			{
				e->failed = true;
				e->failed_step = r->step;
				e->failed_limit = r->first;
			}
			else if (r->outcome == IDGEN_SEQ_RESERVED)
			{
				uint64		w = pg_atomic_read_u64(&e->c.f.cursor);
				uint32		epoch = CURSOR_EPOCH(w);
				SeqSegment *next = &e->seg[(epoch + 1) & 1];

				next->first = r->first;
				next->step = r->step;
				next->min_value = r->min_value;
				next->max_value = r->max_value;
				next->cycle = r->cycle;
				next->final = r->final;
				next->to_limit = idgen_seq_values_to_limit(r->first, r->step, r->min_value, r->max_value);
				next->count = (uint32) r->count;
				next->prefetch_at = (uint32) Min((double) r->count - 1,
												 r->count * idgen_seq_cache_prefetch);
				e->fetches++;
				if (CURSOR_OFFSET(w) >= e->seg[epoch & 1].count)
				{
					/*
					 * The current one is used up: switch now, and ask for
					 * more.
					 */
					switch_segment(e, w);
					(void) request_segment(e, false);
				}
				else
					e->next_ready = true;
			}
		}
		LWLockRelease(e->lock);
	}
	ConditionVariableBroadcast(&cache->cv);
}

/*
 * Keys of this database used since the last call, that have a ttl: their
 * use is recorded in the table by the sequencer (see seq.c).
 */
int
idgen_seq_cache_collect_used(IdgenSeqRequest *req, int max)
{
	int			n = 0;

	for (int i = 0; i < cache->nentries && n < max; i++)
	{
		SeqCacheEntry *e = &cache->entries[i];

		if (!e->c.f.used)
			continue;
		LWLockAcquire(e->lock, LW_SHARED);

		/*
		 * Only this database's entries: another database's flag is its own
		 * purge's to record.  Cleared before it is acted on: a use that sets
		 * it again from here on is recorded by the next purge, not lost.
		 */
		if (e->in_use && e->tag.dbid == MyDatabaseId)
		{
			e->c.f.used = false;
			pg_memory_barrier();
			if (e->has_ttl)
			{
				strlcpy(req[n].key, e->tag.key, sizeof(req[n].key));
				n++;
			}
		}
		LWLockRelease(e->lock);
	}
	return n;
}

/* ----------
 * idgen_seq_cache() returns setof record: the cached keys of this database
 * ----------
 */
void
idgen_seq_cache_report(void (*emit) (void *arg, const IdgenSeqCacheRow *row), void *arg,
					   Oid relid)
{
	if (cache == NULL)
		return;
	for (int i = 0; i < cache->nentries; i++)
	{
		SeqCacheEntry *e = &cache->entries[i];
		IdgenSeqCacheRow row;
		bool		emit_it = false;

		LWLockAcquire(e->lock, LW_SHARED);
		if (e->in_use && e->tag.dbid == MyDatabaseId && e->relid == relid)
		{
			uint64		w = pg_atomic_read_u64(&e->c.f.cursor);
			SeqSegment *s = &e->seg[CURSOR_EPOCH(w) & 1];

			strlcpy(row.key, e->tag.key, sizeof(row.key));
			row.cache = e->cache;
			row.segment_size = e->seg_size;
			row.served = e->served_before + CURSOR_OFFSET(w);
			row.fetches = e->fetches;
			row.waits = e->waits;
			row.has_segment = s->count > 0;
			row.segment_first = s->count > 0 ? segment_value(s, 0) : 0;
			row.segment_last = s->count > 0 ? segment_value(s, s->count - 1) : 0;
			row.segment_left = s->count - Min(CURSOR_OFFSET(w), s->count);
			row.next_ready = e->next_ready;
			emit_it = true;
		}
		LWLockRelease(e->lock);
		if (emit_it)
			emit(arg, &row);
	}
}

/* Register the cached sequences' shared memory (when preloading). */
void
idgen_seq_cache_init(void)
{
	if (process_shared_preload_libraries_in_progress)
		idgen_shmem_register(&seq_cache_area);
}
