/*-------------------------------------------------------------------------
 *
 * lease_lock.c
 *	  Advisory locks on worker ids, and the session-bound leases of this
 *	  session.
 *
 * Locks on worker ids
 *	  Every change to the lease row of id N happens under the advisory lock
 *	  on N (its tag: idgen_lease_locktag in idgen_lease.h); the SQL advisory
 *	  lock functions use 1 and 2 in the tag's last field, so they never
 *	  collide with these.  The key is a constant, not the lease table's oid,
 *	  so that a session that holds a session-bound lease of a table since
 *	  dropped (DROP EXTENSION does not wait for advisory locks) still holds
 *	  the id in the table created after it: nobody can claim the id there
 *	  while that session lives.  A session-level lock of the default lock
 *	  method would be given up by any aborted transaction of the session; an
 *	  advisory one survives aborts, but DISCARD ALL and
 *	  pg_advisory_unlock_all() give it up (see the README on session-bound
 *	  leases behind a pooler).
 *
 * Session-bound leases
 *	  A lease bound to its session is held with a session-level lock on its
 *	  id, released when the session ends (or the acquiring (sub)transaction
 *	  aborts, or the lease is released).  Whoever can lock such an id knows
 *	  the session is gone and ends the lease then (idgen_lease_end_session):
 *	  the purge or an acquirer passing by.  The list of this session's such
 *	  leases is backend-local, in TopMemoryContext.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/memutils.h"

#include "idgen_lease.h"

/*
 * Lock 'id' for the transaction, or the session; false if 'wait' is false
 * and another session holds it.
 */
bool
idgen_lease_lock_id(int32 id, bool session, bool wait)
{
	LOCKTAG		tag;

	Assert(id >= 0);
	idgen_lease_locktag(&tag, id);
	return LockAcquire(&tag, ExclusiveLock, session, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

static void
unlock_id(int32 id, bool session)
{
	LOCKTAG		tag;

	idgen_lease_locktag(&tag, id);
	LockRelease(&tag, ExclusiveLock, session);
}

/*
 * The session-bound leases of this session.  Each is held by a
 * session-level lock on its id, taken when it is acquired and given up when
 * it is released; both only count once the (sub)transaction that did them
 * commits:
 *	  acquired in a (sub)transaction that aborts: the lock is given up then;
 *	  released in a (sub)transaction that aborts: the lease stays held;
 *	  released and committed: the lock is given up at commit, not before,
 *	  since until then the release can still roll back.
 */
typedef struct SessionLease
{
	Oid			relid;
	int32		id;
	int			acquired_level; /* nesting level that acquired it; 0 once
								 * committed */
	int			released_level; /* nesting level that released it; 0 if none */
} SessionLease;

static List *session_leases = NIL;	/* in TopMemoryContext */

static SessionLease *
session_lease(Oid relid, int32 id)
{
	ListCell   *lc;

	foreach(lc, session_leases)
	{
		SessionLease *sl = (SessionLease *) lfirst(lc);

		if (sl->relid == relid && sl->id == id)
			return sl;
	}
	return NULL;
}

/* Whether this session holds the lease of 'id' (bound to it). */
bool
idgen_lease_held_by_me(Oid relid, int32 id)
{
	return session_lease(relid, id) != NULL;
}

/* Whether this session holds a lease of 'id' in any lease table, dropped or not. */
bool
idgen_lease_holds_id(int32 id)
{
	ListCell   *lc;

	foreach(lc, session_leases)
	{
		if (((SessionLease *) lfirst(lc))->id == id)
			return true;
	}
	return false;
}

/*
 * The (sub)transactions at nesting level 'level' and deeper end: commit
 * them into 'level - 1' (level 1: the transaction commits) or abort them.
 */
static void
session_leases_end(int level, bool commit)
{
	ListCell   *lc;

	foreach(lc, session_leases)
	{
		SessionLease *sl = (SessionLease *) lfirst(lc);
		bool		drop = false;

		/* Levels of (sub)transactions still open, or 0. */
		Assert(sl->acquired_level >= 0 && sl->acquired_level <= level);
		Assert(sl->released_level >= 0 && sl->released_level <= level);
		if (commit && level == 1)
		{
			/* The transaction commits: what it did takes effect. */
			drop = sl->released_level > 0;
			sl->acquired_level = 0;
		}
		else if (commit)
		{
			if (sl->acquired_level >= level)
				sl->acquired_level = level - 1;
			if (sl->released_level >= level)
				sl->released_level = level - 1;
		}
		else
		{
			/* Aborted: undo what it did. */
			if (sl->released_level >= level)
				sl->released_level = 0;
			drop = sl->acquired_level >= level && sl->acquired_level > 0;
		}
		if (drop)
		{
			/* Unless pg_advisory_unlock_all() or DISCARD ALL took it already. */
			if (idgen_lease_id_locked(sl->id))
				unlock_id(sl->id, true);
			session_leases = foreach_delete_current(session_leases, lc);
			pfree(sl);
		}
	}
}

static void
lease_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			session_leases_end(1, true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			session_leases_end(1, false);
			break;
		default:
			break;
	}
}

static void
lease_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		session_leases_end(GetCurrentTransactionNestLevel(), false);
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		session_leases_end(GetCurrentTransactionNestLevel(), true);
}

static void
register_callbacks(void)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(lease_xact_callback, NULL);
		RegisterSubXactCallback(lease_subxact_callback, NULL);
		registered = true;
	}
}

/* Hold id (claimed in this transaction) for the session. */
void
idgen_lease_hold_for_session(Oid relid, int32 id)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	SessionLease *sl;

	Assert(idgen_lease_id_locked(id));
	Assert(session_lease(relid, id) == NULL);
	register_callbacks();
	sl = palloc(sizeof(SessionLease));
	sl->relid = relid;
	sl->id = id;
	sl->acquired_level = GetCurrentTransactionNestLevel();
	sl->released_level = 0;
	session_leases = lappend(session_leases, sl);
	MemoryContextSwitchTo(old);
	(void) idgen_lease_lock_id(id, true, true); /* we hold it already: no wait */
}

/* Give up the session's lease of id when this transaction commits. */
void
idgen_lease_release_for_session(Oid relid, int32 id)
{
	SessionLease *sl = session_lease(relid, id);

	if (sl != NULL && sl->released_level == 0)
		sl->released_level = GetCurrentTransactionNestLevel();
}

/* Q_END_SESSION: end the session-bound lease END_TOKEN of id END_ID, at END_AT */
#define END_ID		1
#define END_TOKEN	2
#define END_AT		3

enum
{
	Q_END_SESSION,
	NUM_QUERIES
};

static const IdgenStatement statement_list[NUM_QUERIES] = {
	[Q_END_SESSION] = {
		"UPDATE %1$s.idgen_worker_lease SET expires_at = " IDGEN_SQL_PARAM(END_AT) " "
		"WHERE (id OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(END_ID) ") "
		"AND (token OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(END_TOKEN) ") "
		"AND expires_at IS NULL AND released_at IS NULL",
		3, {
			[END_ID - 1] = INT4OID,
			[END_TOKEN - 1] = INT8OID,
			[END_AT - 1] = TIMESTAMPTZOID
		}
	},
};

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};

/*
 * If the session that holds the session-bound lease 'token' of 'id' is gone
 * (its lock can be taken), end the lease when that was first seen
 * (idgen_lease_session_gone_at: 'now', or earlier if an acquirer that
 * failed saw it before); that time, or 0 if the lease was not ended.  The
 * quarantine runs from then, whether or not this transaction commits.
 * It runs in its caller's context 'cx', with a statement of its own.
 */
TimestampTz
idgen_lease_end_session(IdgenSqlContext *cx, Oid relid, int32 id, int64 token, TimestampTz now)
{
	Datum		args[3];
	TimestampTz end;
	IdgenStatements *caller;
	bool		ended;

	if (idgen_lease_held_by_me(relid, id))
		return 0;				/* bound to this very session */
	if (!idgen_lease_lock_id(id, false, false))
		return 0;				/* its session still holds it */
	end = idgen_lease_session_gone_at(id, token, now);
	args[END_ID - 1] = Int32GetDatum(id);
	args[END_TOKEN - 1] = Int64GetDatum(token);
	args[END_AT - 1] = TimestampTzGetDatum(end);
	caller = idgen_sql_use(cx, &statements);
	ended = idgen_sql_run_latest(cx, Q_END_SESSION, args, NULL) == 1;
	(void) idgen_sql_use(cx, caller);
	return ended ? end : 0;
}

/*
 * Lock the role 'roleid' while its leases are counted, to the end of the
 * transaction: two of its sessions then count one after the other.
 */
void
idgen_lease_lock_role(Oid roleid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, IDGEN_LEASE_LOCK_KEY, (uint32) roleid,
						 IDGEN_LEASE_ROLE_LOCK_CLASS);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}
