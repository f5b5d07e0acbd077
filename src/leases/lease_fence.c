/*-------------------------------------------------------------------------
 *
 * lease_fence.c
 *	  The worker-id leases' shared area ("idgen leases"): the fences of
 *	  dropped lease tables, the sessions seen gone, and the last lease token.
 *
 * Leases of a dropped lease table
 *	  DROP EXTENSION takes the lease table, and with it every record of the
 *	  leases still held: a new table would hand their ids out again at
 *	  once, while the old holders generate until their leases end.  So this
 *	  server remembers, per database and id, the latest end of the leases
 *	  it granted or renewed in each table (LeaseFence), or of the horizons
 *	  their holders reported: in a table created since, an id with no row
 *	  rests until then, plus idgen.worker_quarantine.  An id with a row
 *	  follows the row.  This covers leases granted since the server started
 *	  (not across a restart or a crash restart), in the first
 *	  LEASE_FENCE_DATABASES databases that lease.  Ids from LEASE_FENCE_IDS
 *	  up share the last entry.  A lease bound to a session is recorded as
 *	  ending never (DT_NOEND): its session keeps holding the id's advisory
 *	  lock, whose key does not depend on the table (lease_lock.c), and once
 *	  whoever claims the id can take that lock, the session is gone and the
 *	  id rests from then (idgen_lease_session_gone_at).
 *
 * Sessions seen gone
 *	  When a lease bound to a session was first seen to have lost its
 *	  session (its id's advisory lock free), per database, id and token (0:
 *	  a lease of a dropped table, known only from the fence): its quarantine
 *	  runs from then, even if the transaction that saw it rolls back.  A
 *	  full table forgets its oldest entry; a forgotten lease rests again
 *	  from the next time it is seen, which is later, so forgetting is safe.
 *
 * The last token
 *	  The greatest lease token given out since the server started (tokens:
 *	  lease.c), so that a new one is above it even if the row that had it
 *	  is gone.
 *
 * Locking protocol
 *	  Everything in the area is read and written only under its one LWLock,
 *	  'lock' (the tranche "idgen leases"), taken exclusively: it is taken
 *	  rarely, by a grant, a renewal or a claim, and held for a scan of at
 *	  most a few thousand words.  Callers that change what a fence says of
 *	  an id hold that id's advisory lock (lease_lock.c) as well, so a fence
 *	  read under it is not overtaken by a grant of the same id.  Fences and
 *	  the last token are raised only, never lowered, while the server runs.
 *	  Without the preload the area does not exist (lease_shared is NULL):
 *	  no lease can then have been granted since start, so nothing is
 *	  recorded and nothing rests.
 *
 *	  The area is created anew at every start and after a crash, empty.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idgen_lease.h"
#include "idgen_shmem.h"

#define LEASE_FENCE_DATABASES	16
#define LEASE_FENCE_IDS			1024

/* One database's fence (see the file header). */
typedef struct LeaseFence
{
	Oid			dbid;			/* InvalidOid: a free slot */
	Oid			relid;			/* the lease table of the latest grant */
	/* per id: the end of its latest lease in that table, or 0 */
	TimestampTz current[LEASE_FENCE_IDS + 1];
	/* per id: the latest end of its leases in tables dropped since */
	TimestampTz dropped[LEASE_FENCE_IDS + 1];
} LeaseFence;

#define LEASE_SESSION_ENDS		64

/* A session-bound lease seen to have lost its session (see the file header). */
typedef struct LeaseSessionEnd
{
	Oid			dbid;			/* InvalidOid: a free entry */
	int32		id;
	int64		token;
	TimestampTz seen_at;
} LeaseSessionEnd;

typedef struct LeaseShared
{
	LWLock	   *lock;			/* guards all the rest */
	LeaseFence	db[LEASE_FENCE_DATABASES];
	LeaseSessionEnd session_ends[LEASE_SESSION_ENDS];
	/* the last lease token given out (above every token in the table) */
	int64		last_token;
} LeaseShared;

static LeaseShared *lease_shared = NULL;

static Size
lease_shmem_size(void)
{
	return sizeof(LeaseShared);
}

static int
lease_shmem_nlocks(void)
{
	return 1;
}

static void
lease_shmem_startup(void *ptr, bool found, LWLockPadded *locks)
{
	lease_shared = (LeaseShared *) ptr;
	if (!found)
	{
		memset(lease_shared, 0, sizeof(LeaseShared));
		lease_shared->lock = &locks[0].lock;
	}
}

static const IdgenShmemArea lease_area = {
	.name = "idgen leases",
	.size = lease_shmem_size,
	.nlocks = lease_shmem_nlocks,
	.startup = lease_shmem_startup,
};

/* Register the area; from idgen_lease_init(), while being preloaded. */
void
idgen_lease_fence_register(void)
{
	idgen_shmem_register(&lease_area);
}

/* This database's slot (claimed if 'create'), or NULL; under the lock. */
static LeaseFence *
fence_slot(bool create)
{
	LeaseFence *free_slot = NULL;

	Assert(LWLockHeldByMeInMode(lease_shared->lock, LW_EXCLUSIVE));
	for (int i = 0; i < LEASE_FENCE_DATABASES; i++)
	{
		LeaseFence *f = &lease_shared->db[i];

		if (f->dbid == MyDatabaseId)
			return f;
		if (f->dbid == InvalidOid && free_slot == NULL)
			free_slot = f;
	}
	if (create && free_slot != NULL)
	{
		free_slot->dbid = MyDatabaseId;
		free_slot->relid = InvalidOid;
		memset(free_slot->current, 0, sizeof(free_slot->current));
		memset(free_slot->dropped, 0, sizeof(free_slot->dropped));
	}
	return create ? free_slot : NULL;
}

/*
 * A new session-bound lease of 'id': when a session-bound lease of it in a
 * dropped table was seen gone is no longer of use, and must not shorten
 * this one's rest once the table is dropped again.  Under the lock.
 */
static void
forget_dropped_session_end(int32 id)
{
	LeaseSessionEnd *ends = lease_shared->session_ends;

	for (int j = 0; j < LEASE_SESSION_ENDS; j++)
		if (ends[j].dbid == MyDatabaseId && ends[j].id == id && ends[j].token == 0)
			ends[j].dbid = InvalidOid;
}

/*
 * A lease of 'id' in table 'relid' was granted or renewed until 'end', its
 * holder reporting 'horizon' (may be null): raise the id's fence to the
 * later of the two.  Never lowered, not even by a release (which may yet
 * roll back).  The caller holds the id's lock.
 */
void
idgen_lease_fence_note(Oid relid, int32 id, TimestampTz end, NullableDatum horizon)
{
	static bool told = false;
	LeaseFence *f;
	int			i = Min(id, LEASE_FENCE_IDS);

	Assert(id >= 0);
	Assert(idgen_lease_id_locked(id));
	if (lease_shared == NULL)
		return;
	if (!horizon.isnull)
		end = Max(end, DatumGetTimestampTz(horizon.value));
	LWLockAcquire(lease_shared->lock, LW_EXCLUSIVE);
	f = fence_slot(true);
	if (f != NULL)
	{
		if (f->relid != relid)
		{
			/* The table of the earlier grants is gone. */
			for (int j = 0; j <= LEASE_FENCE_IDS; j++)
			{
				f->dropped[j] = Max(f->dropped[j], f->current[j]);
				f->current[j] = 0;
			}
			f->relid = relid;
		}
		f->current[i] = Max(f->current[i], end);
	}
	if (end == DT_NOEND)
		forget_dropped_session_end(id);
	LWLockRelease(lease_shared->lock);
	if (f == NULL && !told)
	{
		told = true;
		ereport(LOG,
				(errmsg("idgen keeps no record of the worker-id leases of database \"%s\"",
						get_database_name(MyDatabaseId)),
				 errdetail("It keeps those of the first %d databases that leased worker ids since the server started.",
						   LEASE_FENCE_DATABASES),
				 errhint("Do not drop and create the extension in this database while leases are held.")));
	}
}

/*
 * The latest end of a lease of 'id' in a table dropped since (for an id
 * that has no row in table 'relid'): 0 if none, DT_NOEND for a lease bound
 * to a session.  The id rests until then plus the quarantine.
 */
TimestampTz
idgen_lease_fence_end(Oid relid, int32 id)
{
	LeaseFence *f;
	int			i = Min(id, LEASE_FENCE_IDS);
	TimestampTz end = 0;

	Assert(id >= 0);
	if (lease_shared == NULL)
		return 0;
	LWLockAcquire(lease_shared->lock, LW_EXCLUSIVE);
	f = fence_slot(false);
	if (f != NULL)
		end = (f->relid == relid) ? f->dropped[i] : Max(f->dropped[i], f->current[i]);
	LWLockRelease(lease_shared->lock);
	return end;
}

/*
 * When the session of the session-bound lease 'token' of 'id' (0: a lease
 * of a dropped table) was first seen gone: 'now' unless an earlier time is
 * in shared memory.  The caller holds the id's lock.
 */
TimestampTz
idgen_lease_session_gone_at(int32 id, int64 token, TimestampTz now)
{
	LeaseSessionEnd *slot = NULL;
	TimestampTz seen = now;

	Assert(idgen_lease_id_locked(id));
	if (lease_shared == NULL)
		return now;
	LWLockAcquire(lease_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < LEASE_SESSION_ENDS; i++)
	{
		LeaseSessionEnd *e = &lease_shared->session_ends[i];

		if (e->dbid == MyDatabaseId && e->id == id && e->token == token)
		{
			slot = e;
			seen = e->seen_at;
			break;
		}
		/* else the free entry, or the oldest, to take */
		if (slot == NULL || (slot->dbid != InvalidOid &&
							 (e->dbid == InvalidOid || e->seen_at < slot->seen_at)))
			slot = e;
	}
	if (slot->dbid != MyDatabaseId || slot->id != id || slot->token != token)
	{
		slot->dbid = MyDatabaseId;
		slot->id = id;
		slot->token = token;
		slot->seen_at = now;
	}
	LWLockRelease(lease_shared->lock);
	return seen;
}

/*
 * The token of a new lease: 'tick' (of the UUIDv7 clock), or if that is not
 * above 'table_max' (the greatest token in the table, below PG_INT64_MAX)
 * and every token given out since the server started, the next above
 * those.  Needs the area: the caller drew 'tick', which needs the preload.
 */
int64
idgen_lease_next_token(int64 tick, int64 table_max)
{
	int64		token;

	Assert(lease_shared != NULL);
	Assert(table_max < PG_INT64_MAX);
	LWLockAcquire(lease_shared->lock, LW_EXCLUSIVE);
	token = Max(tick, Max(table_max, lease_shared->last_token) + 1);
	Assert(token > lease_shared->last_token && token > table_max);
	lease_shared->last_token = token;
	LWLockRelease(lease_shared->lock);
	return token;
}
