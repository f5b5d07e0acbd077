/*-------------------------------------------------------------------------
 *
 * seq_slots.c
 *	  The slots of the per-database idgen sequencers, and the handshake
 *	  between them, the backends that ask for one and the idgen sequencer
 *	  launcher (sequencer.c and sequencer_launcher.c run the processes).
 *
 * Each database whose cached keys are in use has its own idgen sequencer,
 * in one of idgen.max_sequencers slots here, with its own queue of
 * requests.  A backend that meets a cached key in a database without a
 * running sequencer asks for one (idgen_seq_slot_want): it takes a free
 * slot and wakes the launcher, which starts the process; meanwhile, and
 * when every slot serves another database, the key is served from its
 * row, transactionally, and idgen_seq_keys says why
 * (idgen_seq_slot_why_not).  A process ends once its database's cached
 * keys have gone unused for idgen.sequencer_idle, freeing its slot;
 * the launcher also lends free slots, for one purge, to the databases that
 * have none (sequencer.c).
 *
 * When a database's purge finds no slot (or no background worker slot),
 * the launcher asks the process that has served longest, if for at least
 * idgen.purge_interval, to give its slot (yield_to): at its next check the
 * process hands the slot over, under the mutex, as a slot wanted for that
 * database's purge (for_purge), retires its own database's entries (so
 * that callers waiting for a segment go to the table, seq_cache.c), and
 * ends.  The launcher starts the purge once the process has stopped, so
 * that its background worker slot is free.  The databases whose purge
 * waits are published for idgen_info() (waiting[]).
 *
 * A slot's queue holds the indexes of the cache entries (seq_cache.c) that
 * want a segment, so that the process need not scan them all.
 *
 * Locking
 *	  One spinlock, 'mutex', guards every slot (with its queue) and the
 *	  launcher's fields.  Callers in seq_cache.c may hold an entry's LWLock
 *	  when they take it; nothing here takes another lock under it.  Two
 *	  reads are made without it (idgen_seq_slot_available): a slot's
 *	  database and state, as aligned 4-byte reads, on every call of
 *	  idgen_seq_next; a stale answer only makes a request wait for the
 *	  next process, or a key be served from its row once more.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_seq.h"
#include "idgen_sequencer.h"
#include "idgen_shmem.h"

/* A slot for a database's idgen sequencer (see "A process per database"). */
typedef enum SeqSlotState
{
	SLOT_FREE,					/* no database */
	SLOT_WANTED,				/* a backend asked for a process */
	SLOT_STARTING,				/* the launcher started it */
	SLOT_RUNNING				/* it reserves segments (attached) */
} SeqSlotState;

typedef struct SeqSlot
{
	Oid			dbid;			/* InvalidOid when free */
	SeqSlotState state;
	uint32		generation;		/* bumped each time the slot is taken */
	bool		serve;			/* cached keys are in use: stay after a purge */
	bool		for_purge;		/* taken (or handed over) for a purge: started
								 * first */
	Oid			yield_to;		/* the launcher asks for the slot for this
								 * database's purge */
	Latch	   *latch;			/* the process's, when running */
	int			pid;
	TimestampTz started;

	/*
	 * Entries that want a segment, for the process (so that it need not scan
	 * them all): a ring of queue_size indexes, pushed when an entry's
	 * 'requested' turns true.  An entry retired and installed again may be in
	 * it twice; if it ever fills, 'overflow' makes the process scan.
	 */
	int		   *queue;
	uint64		queue_head;		/* next to pop */
	uint64		queue_tail;		/* next to push */
	int			queue_size;
	bool		overflow;
	bool		urgent;			/* a caller is waiting for a segment */
} SeqSlot;

/*
 * A purge step that failed in a database, for the rate of its warnings
 * (idgen_seq_slot_purge_failed): when it was last logged, and how many
 * failures since were not.
 */
typedef struct PurgeFailure
{
	Oid			dbid;			/* InvalidOid: an unused entry */
	int			step;
	int			sqlerrcode;
	TimestampTz logged_at;
	uint64		unlogged;
} PurgeFailure;

#define PURGE_FAILURES_KEPT		64

typedef struct SeqSlotsShared
{
	slock_t		mutex;			/* guards the slots and the launcher's fields */
	Latch	   *launcher_latch;
	uint64		refused;		/* requests for a process with every slot
								 * taken */
	TimestampTz refused_at;
	TimestampTz start_failed_at;	/* the launcher could not start a process */
	int			nwaiting;		/* databases whose purge waits for a slot */
	Oid			waiting[IDGEN_MAX_WAITING_SHOWN];	/* the first of them */
	TimestampTz waiting_since;	/* since when the first has waited */
	PurgeFailure failures[PURGE_FAILURES_KEPT];
	int			nslots;
	SeqSlot		slot[FLEXIBLE_ARRAY_MEMBER];	/* then their queues */
} SeqSlotsShared;

static SeqSlotsShared *slots = NULL;

/* The slots, and a queue of twice as many indexes as cache entries each. */
static Size
struct_size(void)
{
	Size		size = offsetof(SeqSlotsShared, slot);

	size = add_size(size, mul_size(sizeof(SeqSlot), idgen_max_sequencers));
	size = add_size(size, mul_size(mul_size(sizeof(int), 2 * idgen_seq_cache_keys),
								   idgen_max_sequencers));
	return size;
}

static void
shmem_startup(void *ptr, bool found, LWLockPadded *locks)
{
	slots = (SeqSlotsShared *) ptr;
	if (found)
		return;
	SpinLockInit(&slots->mutex);
	slots->launcher_latch = NULL;
	slots->refused = 0;
	slots->refused_at = slots->start_failed_at = 0;
	slots->nwaiting = 0;
	slots->waiting_since = 0;
	memset(slots->failures, 0, sizeof(slots->failures));
	slots->nslots = idgen_max_sequencers;
	for (int i = 0; i < slots->nslots; i++)
	{
		SeqSlot    *w = &slots->slot[i];

		memset(w, 0, sizeof(*w));
		w->state = SLOT_FREE;
		w->queue_size = 2 * idgen_seq_cache_keys;
		w->queue = (int *) &slots->slot[slots->nslots] + (Size) i * w->queue_size;
	}
}

static const IdgenShmemArea seq_slots_area = {
	.name = "idgen seq slots",
	.size = struct_size,
	.own_segment = true,
	.startup = shmem_startup,
};

/*
 * The running process of database 'dbid' (slots->mutex held), or NULL.
 */
static SeqSlot *
running_slot(Oid dbid)
{
	for (int i = 0; i < slots->nslots; i++)
	{
		SeqSlot    *w = &slots->slot[i];

		if (w->dbid == dbid && w->state == SLOT_RUNNING)
			return w;
	}
	return NULL;
}

/* Wake the process of this database, if one runs. */
void
idgen_seq_slot_wake(void)
{
	SeqSlot    *w;
	Latch	   *latch = NULL;

	SpinLockAcquire(&slots->mutex);
	w = running_slot(MyDatabaseId);
	if (w != NULL)
		latch = w->latch;
	SpinLockRelease(&slots->mutex);
	if (latch)
		SetLatch(latch);
}

/*
 * A cache entry of database 'dbid' wants a segment: push its index
 * ('index' >= 0, the entry newly requested) on the queue of that
 * database's process, if one runs; mark the process's queue 'urgent' when
 * a caller will wait.  Without a process, the next one's first scan finds
 * the request.  Returns whether the process must be woken: for the first
 * request in its queue (it sleeps a little to gather the others) or an
 * overflow.
 */
bool
idgen_seq_slot_request(Oid dbid, int index, bool urgent)
{
	SeqSlot    *w;
	bool		wake = false;

	SpinLockAcquire(&slots->mutex);
	w = running_slot(dbid);
	if (w != NULL && index >= 0)
	{
		Assert(w->queue_tail - w->queue_head <= (uint64) w->queue_size);
		if (w->queue_tail - w->queue_head >= (uint64) w->queue_size)
			w->overflow = true;
		else
			w->queue[w->queue_tail++ % w->queue_size] = index;
		wake = (w->queue_tail - w->queue_head == 1) || w->overflow;
	}
	if (urgent && w != NULL)
		w->urgent = true;
	SpinLockRelease(&slots->mutex);
	return wake;
}


/*
 * Whether cached keys of this database are served from shared memory: the
 * library is preloaded and this database's process runs.  On every call of
 * idgen_seq_next, so without the mutex: the slot found last is looked at
 * first, with aligned 4-byte reads (a process that ends meanwhile only
 * makes a request wait for the next one, see idgen_seq_slot_request).
 */
static int	known_slot = -1;	/* a backend's: the slot found last */
static int	my_slot = -1;		/* a database's process: its own slot */

bool
idgen_seq_slot_available(void)
{
	volatile SeqSlot *w;

	if (slots == NULL)
		return false;
	if (known_slot >= 0)
	{
		w = &slots->slot[known_slot];
		if (w->dbid == MyDatabaseId && w->state == SLOT_RUNNING)
			return true;
	}
	for (int i = 0; i < slots->nslots; i++)
	{
		w = &slots->slot[i];
		if (w->dbid == MyDatabaseId && w->state == SLOT_RUNNING)
		{
			known_slot = i;
			return true;
		}
	}
	return false;
}

/*
 * Why cached keys of this database are served from their rows, in the
 * caller's transaction, instead of from shared memory; NULL if they are
 * not (the view idgen_seq_keys shows it for every cached key).
 */
char *
idgen_seq_slot_why_not(bool *for_now)
{
	SeqSlotState state = SLOT_FREE;
	bool		full = true;
	TimestampTz start_failed_at;
	bool		start_failed;

	if (for_now != NULL)
		*for_now = false;
	if (slots == NULL)
		return pstrdup("idgen is not in shared_preload_libraries");
	SpinLockAcquire(&slots->mutex);
	for (int i = 0; i < slots->nslots; i++)
	{
		SeqSlot    *w = &slots->slot[i];

		if (w->dbid == MyDatabaseId)
			state = w->state;
		full &= (w->state != SLOT_FREE);
	}
	start_failed_at = slots->start_failed_at;
	SpinLockRelease(&slots->mutex);
	start_failed = start_failed_at != 0 &&
		!TimestampDifferenceExceeds(start_failed_at, GetCurrentTimestamp(), 60 * 1000);

	if (state == SLOT_RUNNING)
		return NULL;
	if (for_now != NULL)
		*for_now = (state != SLOT_FREE || (!full && !start_failed));
	if (state != SLOT_FREE)
		return pstrdup("the idgen sequencer of this database is starting");
	if (full)
		return psprintf("all %d idgen sequencers (idgen.max_sequencers) serve other databases",
						slots->nslots);
	if (start_failed)
		return pstrdup("the idgen sequencer launcher could not start a process in the last minute (max_worker_processes)");
	return pstrdup("no idgen sequencer runs in this database: the next use of a cached key starts one");
}

/*
 * A cached key of this database is served from its row because no process
 * runs here: ask the launcher for one, unless it is asked for or running
 * already.  When every slot serves another database, count the refusal.  A
 * backend asks at most once a second.
 */
void
idgen_seq_slot_want(void)
{
	static TimestampTz asked_at = 0;
	TimestampTz now;
	SeqSlot    *free_slot = NULL;
	Latch	   *launcher = NULL;
	bool		found = false;

	if (slots == NULL)
		return;
	now = GetCurrentTimestamp();
	if (asked_at != 0 && !TimestampDifferenceExceeds(asked_at, now, 1000))
		return;
	asked_at = now;
	SpinLockAcquire(&slots->mutex);
	for (int i = 0; i < slots->nslots && !found; i++)
	{
		SeqSlot    *w = &slots->slot[i];

		if (w->dbid == MyDatabaseId && w->state != SLOT_FREE)
		{
			w->serve = true;	/* a process lent for a purge stays */
			found = true;
		}
		else if (w->state == SLOT_FREE && free_slot == NULL)
			free_slot = w;
	}
	if (!found && free_slot != NULL)
	{
		free_slot->dbid = MyDatabaseId;
		free_slot->state = SLOT_WANTED;
		free_slot->generation++;
		free_slot->serve = true;
		free_slot->for_purge = false;
		free_slot->yield_to = InvalidOid;
		launcher = slots->launcher_latch;
	}
	else if (!found)
	{
		slots->refused++;
		slots->refused_at = now;
	}
	SpinLockRelease(&slots->mutex);
	if (launcher != NULL)
		SetLatch(launcher);
}

/* For idgen_info(): the processes running, and the refusals so far. */
void
idgen_seq_slots_report(int *running, int *max, int64 *refused)
{
	*running = *max = 0;
	*refused = 0;
	if (slots == NULL)
		return;
	SpinLockAcquire(&slots->mutex);
	for (int i = 0; i < slots->nslots; i++)
		*running += (slots->slot[i].state == SLOT_RUNNING);
	*max = slots->nslots;
	*refused = (int64) slots->refused;
	SpinLockRelease(&slots->mutex);
}


/* ----------
 * The launcher's side (sequencer.c)
 * ----------
 */
void
idgen_seq_slot_launcher_attach(Latch *latch)
{
	SpinLockAcquire(&slots->mutex);
	slots->launcher_latch = latch;
	/* A launcher started again forgets the processes it had started. */
	for (int i = 0; i < slots->nslots; i++)
		if (slots->slot[i].state == SLOT_STARTING)
			slots->slot[i].state = SLOT_WANTED;
	SpinLockRelease(&slots->mutex);
}

void
idgen_seq_slot_launcher_detach(int code, Datum arg)
{
	SpinLockAcquire(&slots->mutex);
	slots->launcher_latch = NULL;
	SpinLockRelease(&slots->mutex);
}

/*
 * A slot whose database wants a process, now being started: its index,
 * database and generation; -1 if none.  Slots wanted for a purge come
 * first (one handed over by a process that gave it would otherwise lose
 * the background worker slot it freed to a database that asked later);
 * slots whose previous process has not stopped yet ('stopping[i]') wait.
 */
int
idgen_seq_slot_take_wanted(Oid *dbid, uint32 *generation, const bool *stopping)
{
	int			slot = -1;

	SpinLockAcquire(&slots->mutex);
	for (int pass = 0; pass < 2 && slot < 0; pass++)
		for (int i = 0; i < slots->nslots && slot < 0; i++)
		{
			SeqSlot    *w = &slots->slot[i];

			if (w->state == SLOT_WANTED && !stopping[i] && (pass == 1 || w->for_purge))
			{
				w->state = SLOT_STARTING;
				*dbid = w->dbid;
				*generation = w->generation;
				slot = i;
			}
		}
	SpinLockRelease(&slots->mutex);
	return slot;
}

/*
 * Lend a free slot to database 'dbid' for one purge: its index and
 * generation; -1 if the database has a process already (which purges
 * it), -3 if its process is wanted but not started yet, -2 if no slot is
 * free.  On -1 or a slot, a process asked to give its slot to this
 * database no longer is.
 */
int
idgen_seq_slot_take_for_purge(Oid dbid, uint32 *generation)
{
	int			slot = -1;
	bool		has = false;
	bool		wanted = false;

	SpinLockAcquire(&slots->mutex);
	for (int i = 0; i < slots->nslots; i++)
	{
		SeqSlot    *w = &slots->slot[i];

		if (w->state != SLOT_FREE && w->dbid == dbid)
		{
			has = true;
			wanted = (w->state == SLOT_WANTED);
		}
		else if (w->state == SLOT_FREE && slot < 0)
			slot = i;
	}
	if (has)
		slot = wanted ? -3 : -1;
	else if (slot < 0)
		slot = -2;
	else
	{
		SeqSlot    *w = &slots->slot[slot];

		w->dbid = dbid;
		w->state = SLOT_STARTING;
		w->generation++;
		w->serve = false;
		w->for_purge = true;
		*generation = w->generation;
	}
	if (slot >= -1)
		for (int i = 0; i < slots->nslots; i++)
			if (slots->slot[i].yield_to == dbid)
				slots->slot[i].yield_to = InvalidOid;
	SpinLockRelease(&slots->mutex);
	return slot;
}

/*
 * Database 'dbid' waits for a slot for its purge: ask the process that has
 * served longest, if for at least 'min_age', to give it its slot (see "A
 * process per database"), unless a process is asked already.  Returns
 * whether one is asked now.
 */
bool
idgen_seq_slot_ask_yield(Oid dbid, int64 min_age)
{
	TimestampTz now = GetCurrentTimestamp();
	SeqSlot    *oldest = NULL;
	Latch	   *latch = NULL;

	SpinLockAcquire(&slots->mutex);
	for (int i = 0; i < slots->nslots; i++)
	{
		SeqSlot    *w = &slots->slot[i];

		if (OidIsValid(w->yield_to))
		{
			oldest = NULL;		/* one at a time */
			break;
		}
		if (w->state == SLOT_RUNNING && w->serve && w->dbid != dbid &&
			w->started <= now - min_age && (oldest == NULL || w->started < oldest->started))
			oldest = w;
	}
	if (oldest != NULL)
	{
		oldest->yield_to = dbid;
		latch = oldest->latch;
	}
	SpinLockRelease(&slots->mutex);
	if (latch != NULL)
		SetLatch(latch);
	return oldest != NULL;
}

/*
 * The databases whose purge waits for a slot, in the launcher's order, and
 * since when the first has waited (n = 0: none), for idgen_info().
 */
void
idgen_seq_slot_set_waiting(const Oid *dbids, int n, TimestampTz since)
{
	SpinLockAcquire(&slots->mutex);
	slots->nwaiting = n;
	for (int i = 0; i < Min(n, IDGEN_MAX_WAITING_SHOWN); i++)
		slots->waiting[i] = dbids[i];
	slots->waiting_since = n > 0 ? since : 0;
	SpinLockRelease(&slots->mutex);
}

/*
 * For idgen_info(): the databases whose purge waits (at most 'max' into
 * 'dbids'), their number, and since when the first has waited.
 */
int
idgen_seq_slot_waiting(Oid *dbids, int max, TimestampTz *since)
{
	int			n;

	*since = 0;
	if (slots == NULL)
		return 0;
	SpinLockAcquire(&slots->mutex);
	n = slots->nwaiting;
	for (int i = 0; i < Min(n, Min(max, IDGEN_MAX_WAITING_SHOWN)); i++)
		dbids[i] = slots->waiting[i];
	*since = slots->waiting_since;
	SpinLockRelease(&slots->mutex);
	return n;
}

/*
 * The process started for slot 'slot' (of 'generation') stopped, or could
 * not be started ('start_failed'): free the slot, unless the process
 * attached (it frees the slot itself) or the slot changed hands.
 */
void
idgen_seq_slot_start_ended(int slot, uint32 generation, bool start_failed)
{
	SeqSlot    *w = &slots->slot[slot];
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&slots->mutex);
	if (w->generation == generation && w->state == SLOT_STARTING)
	{
		w->dbid = InvalidOid;
		w->state = SLOT_FREE;
		w->serve = w->for_purge = false;
		w->yield_to = InvalidOid;
	}
	if (start_failed)
		slots->start_failed_at = now;
	SpinLockRelease(&slots->mutex);
}


/* ----------
 * A database's process (sequencer.c)
 * ----------
 */
/* The database of slot 'slot', which this process was started for. */
Oid
idgen_seq_slot_dbid(int slot, uint32 *generation)
{
	Oid			dbid;

	SpinLockAcquire(&slots->mutex);
	dbid = slots->slot[slot].state == SLOT_STARTING ? slots->slot[slot].dbid : InvalidOid;
	*generation = slots->slot[slot].generation;
	SpinLockRelease(&slots->mutex);
	return dbid;
}

/*
 * Whether slot 'slot' is still the one started for this database
 * ('generation'); false if it changed hands meanwhile (the launcher
 * restarted).
 */
bool
idgen_seq_slot_starting(int slot, uint32 generation)
{
	SeqSlot    *w = &slots->slot[slot];
	bool		ours;

	SpinLockAcquire(&slots->mutex);
	ours = w->generation == generation && w->state == SLOT_STARTING &&
		w->dbid == MyDatabaseId;
	SpinLockRelease(&slots->mutex);
	return ours;
}

/*
 * Take slot 'slot': this process runs there from now on, with an empty
 * queue and one scan for anything installed meanwhile.
 */
void
idgen_seq_slot_run(int slot, Latch *latch)
{
	SeqSlot    *w = &slots->slot[slot];
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&slots->mutex);
	Assert(w->dbid == MyDatabaseId);
	w->queue_head = w->queue_tail = 0;
	w->urgent = false;
	w->overflow = true;			/* one scan, for anything installed meanwhile */
	w->latch = latch;
	w->pid = MyProcPid;
	w->started = now;
	w->state = SLOT_RUNNING;
	SpinLockRelease(&slots->mutex);
	my_slot = slot;
}

/*
 * Free this process's slot (slots->mutex held) and tell the launcher; or,
 * if 'to' is valid, hand it over as wanted for database 'to''s purge.
 */
static Latch *
free_my_slot(Oid to)
{
	SeqSlot    *w = &slots->slot[my_slot];

	w->dbid = to;
	w->state = OidIsValid(to) ? SLOT_WANTED : SLOT_FREE;
	if (OidIsValid(to))
		w->generation++;
	w->serve = false;
	w->for_purge = OidIsValid(to);
	w->yield_to = InvalidOid;
	w->latch = NULL;
	w->pid = 0;
	my_slot = -1;
	return slots->launcher_latch;
}


void
idgen_seq_slot_detach(int code, Datum arg)
{
	Latch	   *launcher = NULL;

	if (slots == NULL || my_slot < 0)
		return;
	SpinLockAcquire(&slots->mutex);
	if (slots->slot[my_slot].pid == MyProcPid)
		launcher = free_my_slot(InvalidOid);
	SpinLockRelease(&slots->mutex);
	if (launcher != NULL)
		SetLatch(launcher);
}

/*
 * Whether this process may end after a purge: it was lent for the purge
 * only, or no cached key of its database was used since 'last' for
 * 'idle_ms', or the launcher asks for its slot for another database's
 * purge (*handed_over).  If so, its slot is freed or handed over (under the
 * mutex, so that a backend asking for the process either sees it stay or
 * finds it gone).
 */
bool
idgen_seq_slot_done(TimestampTz last, int idle_ms, bool *handed_over)
{
	TimestampTz now = GetCurrentTimestamp();
	SeqSlot    *w = &slots->slot[my_slot];
	bool		done;
	Oid			to;
	Latch	   *launcher = NULL;

	SpinLockAcquire(&slots->mutex);
	last = Max(last, w->started);
	/* Asked for the slot: unless that database has found one meanwhile. */
	to = w->yield_to;
	for (int i = 0; i < slots->nslots && OidIsValid(to); i++)
		if (slots->slot[i].dbid == to && slots->slot[i].state != SLOT_FREE)
			to = w->yield_to = InvalidOid;
	done = !w->serve || TimestampDifferenceExceeds(last, now, idle_ms);
	if (OidIsValid(to) || (done && w->queue_tail == w->queue_head && !w->overflow))
		launcher = free_my_slot(to);
	else
		done = false;
	SpinLockRelease(&slots->mutex);

	*handed_over = OidIsValid(to);
	if (launcher != NULL)
		SetLatch(launcher);
	return done || *handed_over;
}

/*
 * This process's queue, at the start of a collection: whether it must scan
 * every entry instead (an overflow, or its first round), in which case the
 * queue is emptied, as the scan covers it.
 */
bool
idgen_seq_slot_queue_begin(void)
{
	SeqSlot    *w = &slots->slot[my_slot];
	bool		scan;

	SpinLockAcquire(&slots->mutex);
	scan = w->overflow;
	w->overflow = w->urgent = false;
	if (scan)
		w->queue_head = w->queue_tail;
	SpinLockRelease(&slots->mutex);
	return scan;
}

/* The next entry index in this process's queue; -1 if it is empty. */
int
idgen_seq_slot_queue_pop(void)
{
	SeqSlot    *w = &slots->slot[my_slot];
	int			i = -1;

	SpinLockAcquire(&slots->mutex);
	Assert(w->queue_head <= w->queue_tail);
	if (w->queue_head < w->queue_tail)
		i = w->queue[w->queue_head++ % w->queue_size];
	SpinLockRelease(&slots->mutex);
	return i;
}

/* A scan stopped early: scan again next round. */
void
idgen_seq_slot_rescan(void)
{
	SpinLockAcquire(&slots->mutex);
	slots->slot[my_slot].overflow = true;
	SpinLockRelease(&slots->mutex);
}

/* Whether requests wait in the queue, and whether a caller waits. */
bool
idgen_seq_slot_pending(bool *urgent)
{
	SeqSlot    *w = &slots->slot[my_slot];
	bool		pending;

	SpinLockAcquire(&slots->mutex);
	pending = w->queue_head < w->queue_tail || w->overflow;
	*urgent = w->urgent;
	SpinLockRelease(&slots->mutex);
	return pending;
}

/*
 * Whether the failure of purge step 'step' (one of the purge's functions)
 * in this database, with 'sqlerrcode', is to be logged.  The first one is;
 * then, while the step goes on failing with the same SQLSTATE (a database
 * setting, a lock held for hours), one every IDGEN_PURGE_WARN_EVERY_S, with
 * the number of failures not logged since in '*unlogged', instead of one
 * every idgen.purge_interval.  The failures are kept here, not in the
 * process, which a database gets anew for each purge when its cached keys
 * are not in use.  With more databases failing than entries, the one
 * logged longest ago is forgotten, and logged again at its next failure.
 */
bool
idgen_seq_slot_purge_failed(int step, int sqlerrcode, uint64 *unlogged)
{
	TimestampTz now = GetCurrentTimestamp();
	PurgeFailure *f = NULL;
	bool		same;
	bool		log;

	SpinLockAcquire(&slots->mutex);
	for (int i = 0; i < PURGE_FAILURES_KEPT && f == NULL; i++)
		if (slots->failures[i].dbid == MyDatabaseId && slots->failures[i].step == step)
			f = &slots->failures[i];
	for (int i = 0; i < PURGE_FAILURES_KEPT && f == NULL; i++)
		if (!OidIsValid(slots->failures[i].dbid))
			f = &slots->failures[i];
	if (f == NULL)
	{
		f = &slots->failures[0];
		for (int i = 1; i < PURGE_FAILURES_KEPT; i++)
			if (slots->failures[i].logged_at < f->logged_at)
				f = &slots->failures[i];
	}
	same = f->dbid == MyDatabaseId && f->step == step && f->sqlerrcode == sqlerrcode;
	log = !same || now - f->logged_at >= (TimestampTz) IDGEN_PURGE_WARN_EVERY_S * USECS_PER_SEC;
	if (log)
	{
		*unlogged = same ? f->unlogged : 0;
		f->dbid = MyDatabaseId;
		f->step = step;
		f->sqlerrcode = sqlerrcode;
		f->logged_at = now;
		f->unlogged = 0;
	}
	else
		f->unlogged++;
	SpinLockRelease(&slots->mutex);
	return log;
}

/*
 * Purge step 'step' succeeded in this database: its next failure is
 * logged.  Returns whether a failure of it was kept (logged, and maybe
 * repeated since).
 */
bool
idgen_seq_slot_purge_succeeded(int step)
{
	bool		failed = false;

	SpinLockAcquire(&slots->mutex);
	for (int i = 0; i < PURGE_FAILURES_KEPT; i++)
		if (slots->failures[i].dbid == MyDatabaseId && slots->failures[i].step == step)
		{
			slots->failures[i].dbid = InvalidOid;
			failed = true;
		}
	SpinLockRelease(&slots->mutex);
	return failed;
}

/* Register the slots' shared memory (when preloading). */
void
idgen_seq_slots_init(void)
{
	if (process_shared_preload_libraries_in_progress)
		idgen_shmem_register(&seq_slots_area);
}
