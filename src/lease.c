/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Worker-id leases for Snowflake generators that run outside the
 *	  database: a process leases a worker id when it starts, renews it while
 *	  it runs and releases it when it stops.
 *
 * One row per worker id ever leased, in the extension's table
 * idgen_worker_lease:
 *
 *	  id int PRIMARY KEY (datacenter_id << worker_bits | worker_id), holder,
 *	  token bigint UNIQUE, ttl, session_bound, acquired_by, acquired_at,
 *	  renewed_at, expires_at (NULL: bound to a session that still lives),
 *	  released_at
 *
 * A lease ends when it expires or is released (or, bound to a session, when
 * that session ends).  Its id rests from its end until idgen.worker_quarantine
 * has passed before anyone may acquire it again, so that a holder that
 * stops late, or whose host's clock is ahead of the next holder's by less
 * than that, cannot generate the same IDs as the next holder.  The end, for the id, is the
 * lease's expiry even when it was released before (LEASE_END): a holder
 * generates until its own deadline, no later than the expiry it was given,
 * and hears of a release only at its next renewal, which may be a third of
 * the ttl away, or never come if the database is out of its reach.  So
 * nobody, neither the holder's own release (the server cannot tell it from
 * an administrator's, who has the token too), nor a horizon reset, nor a
 * purge, nor a renewal with a shorter ttl (a renewal never moves the expiry
 * earlier), hands the id to a new holder while an earlier one may still
 * generate with it.  The one exception is a release that reports a horizon:
 * only a server's lease does (registry.c), once that server has stopped
 * generating under the id, and its next holder starts above the horizon.
 * The id of this server itself (idgen.datacenter_id, idgen.worker_id) is
 * never leased.
 *
 * Tokens are ticks of the server's UUIDv7 clock (uuid7.c): every
 * acquisition gets a new one, greater than every token before it on this
 * server, never reused even if the row is purged or the extension is
 * dropped and created again (the clock starts above the durable horizon
 * after a restart), so a token names one lease for ever and serves as the
 * fencing token a holder shows to renew or release.  A token is no counter
 * of the SQL user's either: lastval() is not touched.
 *
 * Concurrency
 *	  Every change to the row of id N happens under the advisory lock
 *	  on N (see "Locks on worker ids" below).  An acquirer only
 *	  try-locks (two acquirers never wait for each other: the second skips
 *	  the id the first is claiming); renew and release wait for it (so a
 *	  renewal racing a re-acquisition sees the new token and fails).  The
 *	  claim itself is INSERT ... ON CONFLICT DO UPDATE ... WHERE the lease
 *	  has ended, which re-checks on the latest row version, so a lease
 *	  committed after the acquirer's snapshot is never overwritten.
 *
 *	  A lease bound to its session is also held with a session-level lock
 *	  on the same key, released when the session ends (or the acquiring
 *	  (sub)transaction aborts, or the lease is released).  Whoever can lock
 *	  such an id knows the session is gone and ends the lease then: the
 *	  purge (the purge worker, every idgen.purge_interval) or an acquirer
 *	  passing by; the quarantine runs from that moment, which shared memory
 *	  keeps (IdgenSessionEnd) so that an acquirer whose transaction fails
 *	  does not take it back with its rollback.
 *
 * Horizons
 *	  A server's lease (idgen_server_lease, registry.c) carries a horizon:
 *	  no ID of the id's holders reaches it.  The next holder starts above
 *	  it, so a horizon too far ahead would stop that holder for as long as
 *	  it is ahead.  A holder's IDs are near its clock: ahead of it by at
 *	  most idgen.takeover_max_lead plus idgen.max_drift, and its clock ahead
 *	  of this server's by at most idgen.worker_quarantine (the rest an id
 *	  takes covers that much skew anyway).  So no ID of a lease is beyond
 *	  its end plus that sum, the "reach": a horizon reported beyond the
 *	  lease's end plus the reach is refused, and one taken over is never
 *	  taken beyond the end of the lease that reported it plus the reach.
 *	  Only servers' leases report horizons: an application's lease cannot,
 *	  so no role granted the application functions can make a server
 *	  start anywhere.  idgen_worker_reset_horizon() lets an administrator
 *	  see and set an ended lease's horizon.
 *
 * Limits
 *	  idgen.worker_max_ttl caps a lease's ttl, idgen.worker_max_per_role the
 *	  leases a role holds at once (counted under a lock on the role, so two
 *	  sessions of one role cannot both take the last).  Both can be set per
 *	  role by a superuser (ALTER ROLE ... SET) and not by the role itself.
 *
 * Tokens
 *	  A new token is the next tick of the UUIDv7 clock, but above every
 *	  token in the table and every token given out since the server
 *	  started: a table restored onto a server whose clock is behind the
 *	  one that made it still gets tokens above its own, so a store that
 *	  fences holders by the highest token never takes an old holder back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_sql.h"

PG_FUNCTION_INFO_V1(idgen_worker_acquire);
PG_FUNCTION_INFO_V1(idgen_worker_renew);
PG_FUNCTION_INFO_V1(idgen_worker_release);
PG_FUNCTION_INFO_V1(idgen_worker_purge);
PG_FUNCTION_INFO_V1(idgen_server_lease);
PG_FUNCTION_INFO_V1(idgen_worker_reset_horizon);

/* Settings: how long a worker id rests after its lease ends; limits. */
int			idgen_worker_quarantine_ms = 10 * 1000;
static int	idgen_worker_max_ttl_s = SECS_PER_DAY;
static int	idgen_worker_max_per_role = 0;

/* Longest holder name, in bytes. */
#define IDGEN_LEASE_MAX_HOLDER	256

/* ----------
 * Statements (owner_sql.c)
 * ----------
 */
enum
{
	Q_BUSY,						/* ids below $1 whose lease has not ended before $2 */
	Q_CLAIM,					/* take id $1 if its lease ended before $9 */
	Q_HOLDER,					/* who has id $1, and until when */
	Q_END_SESSION,				/* end the session-bound lease $2 of id $1 */
	Q_BY_TOKEN,					/* the lease with token $1 */
	Q_RENEW,					/* renew the lease with token $1 */
	Q_RELEASE,					/* release the lease with token $1 */
	Q_SESSIONS,					/* session-bound leases not known to have ended */
	Q_ENDED,					/* leases that ended before $1 */
	Q_DELETE,					/* delete lease $2 of id $1 if it ended before $3 */
	Q_MAX_TOKEN,				/* the greatest token in the table */
	Q_ROLE_HELD,				/* leases of role $1 not ended before $2 */
	Q_ROLE_SESSIONS,			/* role $1's session-bound leases not known to have ended */
	Q_HORIZON,					/* id $1's horizon and when its lease ended */
	Q_SET_HORIZON,				/* set id $1's horizon to $2 */
	NUM_QUERIES
};

/*
 * When a lease ended, for its id (see the file header): its expiry, or its
 * release if that came later; NULL while a session-bound lease is held.
 * GREATEST ignores a NULL: a session-bound lease has no expiry, and a
 * lease not released no release time.
 */
#define LEASE_END(l) "GREATEST(" l "released_at, " l "expires_at)"

#define LEASE_ENDED_BEFORE(ts) \
	"COALESCE((" LEASE_END("") " OPERATOR(pg_catalog.<=) " ts "), false)"

/*
 * The horizon an ended lease's holders can have reached (see "Horizons"
 * below): the one they reported, but no further than the lease's end plus
 * the reach ($13).  NULL stays NULL (LEAST alone would ignore it).
 */
#define REACHED_HORIZON \
	"CASE WHEN l.horizon IS NULL THEN NULL ELSE LEAST(l.horizon, " \
	LEASE_END("l.") " OPERATOR(pg_catalog.+) $13) END"

static const IdgenStatement statement_list[NUM_QUERIES] = {
	[Q_BUSY] = {
		"SELECT id, token, (expires_at IS NULL AND released_at IS NULL) "
		"FROM %1$s.idgen_worker_lease "
		"WHERE (id OPERATOR(pg_catalog.<) $1) AND NOT " LEASE_ENDED_BEFORE("$2"),
		2, {INT4OID, TIMESTAMPTZOID}
	},
	[Q_CLAIM] = {
		"INSERT INTO %1$s.idgen_worker_lease AS l (id, holder, token, ttl, session_bound, "
		"acquired_by, acquired_at, renewed_at, expires_at, released_at, system_identifier, "
		"horizon, handover_horizon) "
		"SELECT $1, $2, $3, $4, $5, $6, $7, $7, $8, NULL, $10, $11, NULL "
		"WHERE $12 OR EXISTS (SELECT FROM %1$s.idgen_worker_lease WHERE id OPERATOR(pg_catalog.=) $1) "
		"ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, token = excluded.token, "
		"ttl = excluded.ttl, session_bound = excluded.session_bound, "
		"acquired_by = excluded.acquired_by, acquired_at = excluded.acquired_at, "
		"renewed_at = excluded.renewed_at, expires_at = excluded.expires_at, released_at = NULL, "
		"system_identifier = excluded.system_identifier, "
		"horizon = GREATEST(" REACHED_HORIZON ", excluded.horizon), "
		"handover_horizon = " REACHED_HORIZON " "
		"WHERE COALESCE((" LEASE_END("l.") " OPERATOR(pg_catalog.<=) $9), false) "
		"RETURNING token, handover_horizon",
		13, {INT4OID, TEXTOID, INT8OID, INTERVALOID, BOOLOID, OIDOID,
		TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, BOOLOID,
		INTERVALOID}
	},
	[Q_HOLDER] = {
		"SELECT holder, system_identifier, " LEASE_END("") ", released_at "
		"FROM %1$s.idgen_worker_lease WHERE id OPERATOR(pg_catalog.=) $1",
		1, {INT4OID}
	},
	[Q_END_SESSION] = {
		"UPDATE %1$s.idgen_worker_lease SET expires_at = $3 "
		"WHERE (id OPERATOR(pg_catalog.=) $1) AND (token OPERATOR(pg_catalog.=) $2) "
		"AND expires_at IS NULL AND released_at IS NULL",
		3, {INT4OID, INT8OID, TIMESTAMPTZOID}
	},
	[Q_BY_TOKEN] = {
		"SELECT id, holder, ttl, session_bound, acquired_by, expires_at, released_at, "
		"system_identifier IS NOT NULL "
		"FROM %1$s.idgen_worker_lease WHERE token OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
	/*
	 * A renewal never moves the expiry earlier: the holder may generate
	 * until the expiry it was given, whoever renews with a shorter ttl.
	 */
	[Q_RENEW] = {
		"UPDATE %1$s.idgen_worker_lease SET renewed_at = $2, ttl = $3, "
		"expires_at = CASE WHEN session_bound THEN NULL "
		"ELSE GREATEST(expires_at, $2 OPERATOR(pg_catalog.+) $3) END, "
		"horizon = GREATEST(horizon, $4) "
		"WHERE token OPERATOR(pg_catalog.=) $1 RETURNING expires_at",
		4, {INT8OID, TIMESTAMPTZOID, INTERVALOID, TIMESTAMPTZOID}
	},
	/*
	 * A release may lower the horizon to what the holder did issue (it
	 * generates no more), never below where its lease began.  Only such a
	 * release, by a server that has stopped generating under the id, ends
	 * the lease before its expiry (the next holder starts above the
	 * horizon); any other leaves the expiry, until which the holder may
	 * still generate, not having heard of the release.
	 */
	[Q_RELEASE] = {
		"UPDATE %1$s.idgen_worker_lease SET released_at = $2, "
		"expires_at = CASE WHEN $3 IS NULL THEN expires_at "
		"ELSE LEAST(expires_at, $2) END, "
		"horizon = CASE WHEN $3 IS NULL THEN horizon "
		"ELSE GREATEST(handover_horizon, $3) END "
		"WHERE token OPERATOR(pg_catalog.=) $1",
		3, {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[Q_SESSIONS] = {
		"SELECT id, token FROM %1$s.idgen_worker_lease "
		"WHERE session_bound AND expires_at IS NULL AND released_at IS NULL LIMIT 1000",
		0, {InvalidOid}
	},
	/*
	 * A row with a horizon is the only record of how far that id's holders
	 * may have issued (registry.c): kept, at most one per id.
	 */
	[Q_ENDED] = {
		"SELECT id, token FROM %1$s.idgen_worker_lease WHERE " LEASE_ENDED_BEFORE("$1")
		" AND horizon IS NULL LIMIT 1000",
		1, {TIMESTAMPTZOID}
	},
	[Q_DELETE] = {
		"DELETE FROM %1$s.idgen_worker_lease "
		"WHERE (id OPERATOR(pg_catalog.=) $1) AND (token OPERATOR(pg_catalog.=) $2) "
		"AND horizon IS NULL AND " LEASE_ENDED_BEFORE("$3"),
		3, {INT4OID, INT8OID, TIMESTAMPTZOID}
	},
	[Q_MAX_TOKEN] = {
		"SELECT pg_catalog.max(token) FROM %1$s.idgen_worker_lease",
		0, {InvalidOid}
	},
	[Q_ROLE_HELD] = {
		"SELECT pg_catalog.count(*) FROM %1$s.idgen_worker_lease "
		"WHERE (acquired_by OPERATOR(pg_catalog.=) $1) AND NOT " LEASE_ENDED_BEFORE("$2"),
		2, {OIDOID, TIMESTAMPTZOID}
	},
	[Q_ROLE_SESSIONS] = {
		"SELECT id, token FROM %1$s.idgen_worker_lease "
		"WHERE (acquired_by OPERATOR(pg_catalog.=) $1) AND session_bound "
		"AND expires_at IS NULL AND released_at IS NULL",
		1, {OIDOID}
	},
	[Q_HORIZON] = {
		"SELECT horizon, " LEASE_END("") ", holder, released_at "
		"FROM %1$s.idgen_worker_lease WHERE id OPERATOR(pg_catalog.=) $1",
		1, {INT4OID}
	},
	[Q_SET_HORIZON] = {
		"UPDATE %1$s.idgen_worker_lease SET horizon = $2 WHERE id OPERATOR(pg_catalog.=) $1",
		2, {INT4OID, TIMESTAMPTZOID}
	},
};

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};

/*
 * A time as text, in memory of its own: timestamptz_to_str() returns a
 * static buffer, which a second call in the same message would overwrite.
 */
static char *
time_text(TimestampTz t)
{
	return pstrdup(timestamptz_to_str(t));
}

static uint64 run_id_tokens(IdgenSqlContext *cx, int q, Datum *args, int32 **ids, int64 **tokens);

/* ----------
 * Locks on worker ids
 *
 * Advisory locks (database, IDGEN_LEASE_LOCK_KEY, id, IDGEN_LEASE_LOCK_CLASS):
 * the SQL advisory lock functions use 1 and 2 in the last field, so they
 * never collide with these.  The key is a constant, not the lease table's
 * oid, so that a session that holds a session-bound lease of a table since
 * dropped (DROP EXTENSION does not wait for advisory locks) still holds the
 * id in the table created after it: nobody can claim the id there while
 * that session lives.  A session-level lock of the default lock method
 * would be given up by any aborted transaction of the session; an advisory
 * one survives aborts, but DISCARD ALL and pg_advisory_unlock_all() give it
 * up (see the README on session-bound leases behind a pooler).
 * ----------
 */
/*
 * The last field of the advisory lock tags on worker ids (the SQL advisory
 * lock functions use 1 and 2, seq.c "sq"), "id" in ASCII; and their first
 * key, "idge" in ASCII, the same for every lease table.  The idgen_worker_leases view
 * (sql/idgen--*.sql) finds the locks by both.
 */
#define IDGEN_LEASE_LOCK_CLASS		0x6964
#define IDGEN_LEASE_LOCK_KEY		0x69646765
/* The lock on a role while its leases are counted (check_role_limit): "ro" */
#define IDGEN_LEASE_ROLE_LOCK_CLASS	0x726f

static void
lease_locktag(LOCKTAG *tag, int32 id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, IDGEN_LEASE_LOCK_KEY, (uint32) id, IDGEN_LEASE_LOCK_CLASS);
}

static bool
lock_id(int32 id, bool session, bool wait)
{
	LOCKTAG		tag;

	lease_locktag(&tag, id);
	return LockAcquire(&tag, ExclusiveLock, session, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

static void
unlock_id(int32 id, bool session)
{
	LOCKTAG		tag;

	lease_locktag(&tag, id);
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
	int			acquired_level; /* nesting level that acquired it; 0 once committed */
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
static bool
held_by_me(Oid relid, int32 id)
{
	return session_lease(relid, id) != NULL;
}

/* Whether this session still holds the advisory lock on 'id'. */
static bool
session_lock_held(int32 id)
{
	LOCKTAG		tag;

	lease_locktag(&tag, id);
	return idgen_lock_held_by_me(&tag, ExclusiveLock);
}

/* Whether this session holds a lease of 'id' in any lease table, dropped or not. */
static bool
holds_id(int32 id)
{
	ListCell   *lc;

	foreach(lc, session_leases)
		if (((SessionLease *) lfirst(lc))->id == id)
			return true;
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
			if (session_lock_held(sl->id))
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
static void
hold_for_session(Oid relid, int32 id)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	SessionLease *sl;

	register_callbacks();
	sl = palloc(sizeof(SessionLease));
	sl->relid = relid;
	sl->id = id;
	sl->acquired_level = GetCurrentTransactionNestLevel();
	sl->released_level = 0;
	session_leases = lappend(session_leases, sl);
	MemoryContextSwitchTo(old);
	(void) lock_id(id, true, true);	/* we hold it already: no wait */
}

/* Give up the session's lease of id when this transaction commits. */
static void
release_for_session(Oid relid, int32 id)
{
	SessionLease *sl = session_lease(relid, id);

	if (sl != NULL && sl->released_level == 0)
		sl->released_level = GetCurrentTransactionNestLevel();
}

/* ----------
 * Helpers
 * ----------
 */
static Oid
lease_relid(const IdgenFunction *fn, const char *name)
{
	Oid			relid = get_relname_relid(name, fn->nspid);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"%s.%s\" does not exist", get_namespace_name(fn->nspid), name)));
	return relid;
}

/* The worker-id space of the layout: 2^(datacenter_bits + worker_bits). */
static int64
layout_space(void)
{
	idgen_layout_check();
	return INT64CONST(1) << (idgen_layout.datacenter_bits + idgen_layout.worker_bits);
}

static int32
worker_of(int32 id)
{
	return id & (int32) ((INT64CONST(1) << idgen_layout.worker_bits) - 1);
}

static int32
datacenter_of(int32 id)
{
	return (int32) ((int64) id >> idgen_layout.worker_bits);
}

/* The id of (datacenter, worker), both within the layout's fields. */
static int64
id_of(int32 datacenter, int32 worker)
{
	return ((int64) datacenter << idgen_layout.worker_bits) | worker;
}

/* A positive ttl argument: NULL is an error. */
static Interval *
ttl_arg(FunctionCallInfo fcinfo, int n)
{
	Interval   *ttl;

	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ttl must not be null"),
				 errhint("A lease that lasts as long as its session is taken with session_bound => true.")));
	ttl = PG_GETARG_INTERVAL_P(n);
	idgen_ttl_check(ttl);
	if (idgen_worker_max_ttl_s > 0)
	{
		Interval	max_ttl = {.time = (int64) idgen_worker_max_ttl_s * USECS_PER_SEC};

		if (DatumGetInt32(DirectFunctionCall2(interval_cmp, IntervalPGetDatum(ttl),
											  IntervalPGetDatum(&max_ttl))) > 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("ttl \"%s\" is longer than \"idgen.worker_max_ttl\" (%d s)",
							DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(ttl))),
							idgen_worker_max_ttl_s),
					 errdetail("A lease is renewed every third of its ttl; a longer one would keep its id from everyone else for longer after its holder is gone."),
					 errhint("Renew a shorter lease, or use session_bound => true for a lease that lasts as long as its session.")));
	}
	return ttl;
}

/*
 * A horizon argument (NULL allowed): a finite time from 1970 to 100 years
 * and a day from now.  It is read back by the next holder of the id
 * (registry.c), which starts its generators above it: an infinite or
 * far-future horizon would make that holder overflow or never generate.
 */
static NullableDatum
horizon_arg(FunctionCallInfo fcinfo, int n)
{
	NullableDatum h = {(Datum) 0, true};
	TimestampTz ts;
	TimestampTz latest = GetCurrentTimestamp() +
		(TimestampTz) (100 * DAYS_PER_YEAR + 1) * USECS_PER_DAY;

	if (PG_ARGISNULL(n))
		return h;
	ts = PG_GETARG_TIMESTAMPTZ(n);
	if (TIMESTAMP_NOT_FINITE(ts) || ts < IDGEN_UNIX_EPOCH || ts > latest)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("horizon \"%s\" is out of range", timestamptz_to_str(ts)),
				 errdetail("A horizon is a finite time between 1970-01-01 and 100 years from now: the time before which the holder issues its IDs.")));
	h.value = TimestampTzGetDatum(ts);
	h.isnull = false;
	return h;
}

/*
 * The worker_id argument of a renewal or release, not null and within the
 * layout's worker field (bigint, as every integer argument: a driver's
 * parameter of any width resolves).
 */
static int32
worker_id_arg(FunctionCallInfo fcinfo)
{
	int64		w;

	idgen_arg_not_null(fcinfo, 0, "worker_id");
	w = PG_GETARG_INT64(0);
	idgen_layout_check();
	if (w < 0 || w >= (INT64CONST(1) << idgen_layout.worker_bits))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("worker id " INT64_FORMAT " is out of range", w),
				 errdetail("\"idgen.worker_bits\" is %d: a worker id is between 0 and " INT64_FORMAT ".",
						   idgen_layout.worker_bits,
						   (INT64CONST(1) << idgen_layout.worker_bits) - 1)));
	return (int32) w;
}

static int64
token_arg(FunctionCallInfo fcinfo, int n)
{
	idgen_arg_not_null(fcinfo, n, "token");
	return PG_GETARG_INT64(n);
}

/* The instant before which a lease must have ended for its id to be free. */
static TimestampTz
free_before(TimestampTz now)
{
	return now - (TimestampTz) idgen_worker_quarantine_ms * 1000;
}

/* ----------
 * Horizons (see the file header)
 * ----------
 */

/* How far beyond its lease's end a holder's IDs can reach, in microseconds. */
static int64
horizon_reach(void)
{
	return ((int64) idgen_worker_quarantine_ms + idgen_takeover_max_lead_ms + idgen_max_drift_ms) * 1000;
}

/*
 * Refuse a horizon reported for a lease that ends at 'end' (its new
 * expiry, or now for a release) if it lies beyond the reach.
 */
static void
check_horizon_reach(NullableDatum horizon, TimestampTz end)
{
	TimestampTz h;

	if (horizon.isnull)
		return;
	h = DatumGetTimestampTz(horizon.value);
	if (h > end + horizon_reach())
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("horizon \"%s\" is beyond what the lease's holder can issue",
						timestamptz_to_str(h)),
				 errdetail("The lease ends at %s. A holder's IDs are ahead of its clock by at most \"idgen.takeover_max_lead\" (%d ms) plus \"idgen.max_drift\" (%d ms), and its clock is ahead of this server's by at most \"idgen.worker_quarantine\" (%d ms): no later than %s.",
						   time_text(end), idgen_takeover_max_lead_ms, idgen_max_drift_ms,
						   idgen_worker_quarantine_ms, time_text(end + horizon_reach())),
				 errhint("Check the holder's clock against this server's.")));
}

/* Refuse a horizon reported for an application's lease (no system identifier). */
static void
check_horizon_holder(NullableDatum horizon, bool server_lease)
{
	if (!horizon.isnull && !server_lease)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("only a server's lease on its identity reports a horizon"),
				 errdetail("The next holder of a worker id leased through \"idgen.identity\" = 'registry' starts above the id's horizon; an application's lease (idgen_worker_acquire) may not move it."),
				 errhint("Renew or release without horizon.")));
}

/* ----------
 * Leases of a dropped lease table
 *
 * DROP EXTENSION takes the lease table, and with it every record of the
 * leases still held: a new table would hand their ids out again at once,
 * while the old holders generate until their leases end.  So this server
 * remembers in shared memory, per database and id, the latest end of the
 * leases it granted or renewed in each table (IdgenLeaseFence), or of the
 * horizons their holders reported: in a table created since, an id with no
 * row rests until then, plus idgen.worker_quarantine.  An id with a row
 * follows the row.  This covers leases granted since the server started
 * (not across a restart or a crash restart), in the first
 * IDGEN_LEASE_FENCE_DATABASES databases that lease.  A lease bound to a
 * session is recorded as ending never (DT_NOEND): its session keeps
 * holding the id's advisory lock, whose key does not depend on the table
 * (see above), and once whoever claims the id can take that lock, the
 * session is gone and the id rests from then (session_gone_at).
 * ----------
 */

/* This database's slot (claimed if 'create'), or NULL; under the lock. */
static IdgenLeaseFence *
fence_slot(bool create)
{
	IdgenLeaseFence *free_slot = NULL;

	for (int i = 0; i < IDGEN_LEASE_FENCE_DATABASES; i++)
	{
		IdgenLeaseFence *f = &idgen_shared->lease_fences.db[i];

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
 * A lease of 'id' in table 'relid' was granted or renewed until 'end', its
 * holder reporting 'horizon' (may be null): raise the id's fence to the
 * later of the two.  Never lowered, not even by a release (which may yet
 * roll back).  The caller holds the id's lock.
 */
static void
fence_note(Oid relid, int32 id, TimestampTz end, NullableDatum horizon)
{
	static bool told = false;
	IdgenLeaseFence *f;
	int			i = Min(id, IDGEN_LEASE_FENCE_IDS);

	if (idgen_shared == NULL)
		return;
	if (!horizon.isnull)
		end = Max(end, DatumGetTimestampTz(horizon.value));
	LWLockAcquire(idgen_shared->lease_fences.lock, LW_EXCLUSIVE);
	f = fence_slot(true);
	if (f != NULL)
	{
		if (f->relid != relid)
		{
			/* The table of the earlier grants is gone. */
			for (int j = 0; j <= IDGEN_LEASE_FENCE_IDS; j++)
			{
				f->dropped[j] = Max(f->dropped[j], f->current[j]);
				f->current[j] = 0;
			}
			f->relid = relid;
		}
		f->current[i] = Max(f->current[i], end);
	}
	if (end == DT_NOEND)
	{
		/*
		 * A new session-bound lease of the id: when a session-bound lease
		 * of it in a dropped table was seen gone is no longer of use, and
		 * must not shorten this one's rest once the table is dropped again.
		 */
		IdgenSessionEnd *ends = idgen_shared->lease_fences.session_ends;

		for (int j = 0; j < IDGEN_LEASE_SESSION_ENDS; j++)
			if (ends[j].dbid == MyDatabaseId && ends[j].id == id && ends[j].token == 0)
				ends[j].dbid = InvalidOid;
	}
	LWLockRelease(idgen_shared->lease_fences.lock);
	if (f == NULL && !told)
	{
		told = true;
		ereport(LOG,
				(errmsg("idgen keeps no record of the worker-id leases of database \"%s\"",
						get_database_name(MyDatabaseId)),
				 errdetail("It keeps those of the first %d databases that leased worker ids since the server started.",
						   IDGEN_LEASE_FENCE_DATABASES),
				 errhint("Do not drop and create the extension in this database while leases are held.")));
	}
}

/*
 * Until when 'id', if it has no row in table 'relid', rests: the end of
 * its lease in a dropped table plus the quarantine (0: it is free).
 */
static TimestampTz
fence_new_id(Oid relid, int32 id)
{
	IdgenLeaseFence *f;
	int			i = Min(id, IDGEN_LEASE_FENCE_IDS);
	TimestampTz end = 0;

	if (idgen_shared == NULL)
		return 0;
	LWLockAcquire(idgen_shared->lease_fences.lock, LW_EXCLUSIVE);
	f = fence_slot(false);
	if (f != NULL)
		end = (f->relid == relid) ? f->dropped[i] : Max(f->dropped[i], f->current[i]);
	LWLockRelease(idgen_shared->lease_fences.lock);
	if (end == 0 || end == DT_NOEND)
		return end;
	return end + (TimestampTz) idgen_worker_quarantine_ms * 1000;
}

/*
 * When the session of the session-bound lease 'token' of 'id' (0: a lease
 * of a dropped table) was first seen gone: 'now' unless an earlier time is
 * in shared memory.  The caller holds the id's lock.
 */
static TimestampTz
session_gone_at(int32 id, int64 token, TimestampTz now)
{
	IdgenSessionEnd *ends;
	IdgenSessionEnd *slot = NULL;
	TimestampTz seen = now;

	if (idgen_shared == NULL)
		return now;
	LWLockAcquire(idgen_shared->lease_fences.lock, LW_EXCLUSIVE);
	ends = idgen_shared->lease_fences.session_ends;
	for (int i = 0; i < IDGEN_LEASE_SESSION_ENDS; i++)
	{
		IdgenSessionEnd *e = &ends[i];

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
	LWLockRelease(idgen_shared->lease_fences.lock);
	return seen;
}

/*
 * If the session that holds the session-bound lease 'token' of 'id' is gone
 * (its lock can be taken), end the lease when that was first seen
 * (session_gone_at: 'now', or earlier if an acquirer that failed saw it
 * before); that time, or 0 if the lease was not ended.  The quarantine runs
 * from then, whether or not this transaction commits.
 */
static TimestampTz
end_session_lease(IdgenSqlContext *cx, Oid relid, int32 id, int64 token, TimestampTz now)
{
	Datum		args[3];
	TimestampTz end;

	if (held_by_me(relid, id))
		return 0;				/* bound to this very session */
	if (!lock_id(id, false, false))
		return 0;				/* its session still holds it */
	end = session_gone_at(id, token, now);
	args[0] = Int32GetDatum(id);
	args[1] = Int64GetDatum(token);
	args[2] = TimestampTzGetDatum(end);
	return idgen_sql_run_latest(cx, Q_END_SESSION, args, NULL) == 1 ? end : 0;
}

/* ----------
 * Acquiring a lease
 *
 * lease_acquire claims one id for a LeaseRequest: the id it names, or a
 * free one tried in turn from a random start.  An id is claimed under its
 * advisory lock (lock_id) by one INSERT ... ON CONFLICT DO UPDATE that
 * succeeds only if the id's last lease ended before the quarantine
 * (Q_CLAIM); the helpers below each do one step of that.
 * ----------
 */

/* What the SQL function asks for. */
typedef struct LeaseRequest
{
	text	   *holder;
	Interval   *ttl;			/* NULL: until released or its session ends */
	bool		session_bound;
	int32		max_workers;	/* try ids 0 .. max_workers - 1 ... */
	int64		want;			/* ... or, when >= 0, exactly this one */
	NullableDatum sysid;		/* the server whose identity it is */
	NullableDatum horizon;		/* bound of the IDs the holder will issue */
} LeaseRequest;

/* One acquisition in progress. */
typedef struct LeaseScan
{
	IdgenSqlContext cx;
	Oid			relid;			/* the lease table */
	TimestampTz now;
	TimestampTz ended_before;	/* a lease that ended before this is over */
	int64		own;			/* this server's own id: never leased */
	int64		new_token;
	/* ids not free when the scan began, sorted; those bound to a session */
	int32	   *busy;
	int			nbusy;
	int32	   *session_ids;
	int64	   *session_tokens;
	int			nsession;
	/* why ids were passed over, for the error when none is left */
	int			nlocked;		/* another acquirer was claiming it */
	int			nresting;		/* a lease of a dropped table may live */
} LeaseScan;

/* The lease granted: the SQL result row. */
typedef struct LeaseGrant
{
	int32		id;
	int64		token;
	NullableDatum expires_at;
	NullableDatum handover_horizon; /* the id's horizon before this lease */
} LeaseGrant;

typedef enum ClaimOutcome
{
	CLAIM_GRANTED,
	CLAIM_LOCKED,				/* another acquirer holds the id's lock */
	CLAIM_TAKEN,				/* its lease has not ended */
	CLAIM_RESTING				/* no row, but a dropped table's lease may live */
} ClaimOutcome;

static int
compare_int32(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

/* The holder argument: not null, not empty, not too long. */
static text *
holder_arg(FunctionCallInfo fcinfo, int n, const char *name)
{
	text	   *holder;

	idgen_arg_not_null(fcinfo, n, name);
	holder = PG_GETARG_TEXT_PP(n);
	if (VARSIZE_ANY_EXHDR(holder) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", name),
				 errhint("Name the process that will generate with the worker id, e.g. its host and pid.")));
	if (VARSIZE_ANY_EXHDR(holder) > IDGEN_LEASE_MAX_HOLDER)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", name),
				 errdetail("The %s is %d bytes; the limit is %d.",
						   name, (int) VARSIZE_ANY_EXHDR(holder), IDGEN_LEASE_MAX_HOLDER)));
	return holder;
}

/*
 * Why 'id' cannot be leased now, as one sentence, for report_taken: read
 * with the id's lock held, so it is current.
 */
static char *
taken_detail(LeaseScan *scan, int32 id, const LeaseRequest *req, TimestampTz fresh_from,
			 bool *same_server)
{
	Datum		arg = Int32GetDatum(id);
	HeapTuple	tup;
	TupleDesc	desc;
	char	   *holder;
	bool		n;
	bool		sysid_null;
	bool		end_null;
	bool		not_released;
	int64		holder_sysid;
	TimestampTz end;

	*same_server = false;
	if (idgen_sql_run_latest(&scan->cx, Q_HOLDER, &arg, NULL) != 1)
		return scan->now < fresh_from ?
			psprintf(_("Its lease in the lease table this one replaced (the extension was dropped and created again) may still be held; it rests until %s."),
					 timestamptz_to_str(fresh_from)) :
			pstrdup(_("It is being claimed right now."));

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	holder = TextDatumGetCString(SPI_getbinval(tup, desc, 1, &n));
	holder_sysid = DatumGetInt64(SPI_getbinval(tup, desc, 2, &sysid_null));
	end = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &end_null));
	(void) SPI_getbinval(tup, desc, 4, &not_released);

	if (end_null)
		return psprintf(_("It is leased to \"%s\" for as long as its session lasts."), holder);
	if (!not_released && end > scan->now)
		return psprintf(_("Its lease, held by \"%s\", was released, but its holder may generate until the lease's expiry at %s; it rests until %s (\"idgen.worker_quarantine\" after the expiry)."),
						holder, time_text(end),
						time_text(end + (TimestampTz) idgen_worker_quarantine_ms * 1000));
	if (end <= scan->now)
		return psprintf(_("Its lease, held by \"%s\", ended at %s; it rests until %s (\"idgen.worker_quarantine\")."),
						holder, time_text(end),
						time_text(end + (TimestampTz) idgen_worker_quarantine_ms * 1000));
	if (sysid_null)
		return psprintf(_("It is leased to \"%s\" until %s."), holder, timestamptz_to_str(end));
	*same_server = !req->sysid.isnull && holder_sysid == DatumGetInt64(req->sysid.value);
	return psprintf(_("It is leased to \"%s\" (system identifier " INT64_FORMAT ") until %s."),
					holder, holder_sysid, timestamptz_to_str(end));
}

/* Refuse the claim of the id the caller named: say who has it, and until when. */
static void
report_taken(LeaseScan *scan, int32 id, const LeaseRequest *req, TimestampTz fresh_from)
{
	bool		same_server;
	char	   *detail = taken_detail(scan, id, req, fresh_from, &same_server);

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("worker id (datacenter %d, worker %d) is taken",
					datacenter_of(id), worker_of(id)),
			 errdetail_internal("%s", detail),
			 same_server ?
			 errhint("The holder has the same system identifier as the claimant: one is a standby, "
					 "a restored backup or a copy of the other's data directory. "
					 "Give each server its own identity, or set \"idgen.identity\" = 'registry'.") :
			 errhint("Give each server its own \"idgen.datacenter_id\" and \"idgen.worker_id\", "
					 "or set \"idgen.identity\" = 'registry' to be given a free one.")));
}

/*
 * Refuse an acquisition that found none of the 'tries' ids free, saying why
 * in whole sentences.
 */
static void
report_all_taken(const LeaseScan *scan, int32 tries)
{
	StringInfoData detail;

	initStringInfo(&detail);
	appendStringInfo(&detail,
					 _("Each is leased, or rests after its lease ended: until the lease's expiry, even if it was released before, plus \"idgen.worker_quarantine\" (%d ms)."),
					 idgen_worker_quarantine_ms);
	if (scan->nlocked > 0)
		appendStringInfo(&detail, " %s",
						 _("Some were being acquired by other sessions at the same time."));
	if (scan->nresting > 0)
	{
		appendStringInfoChar(&detail, ' ');
		appendStringInfo(&detail,
						 ngettext("%d has no lease in this table but may still be leased in the table it replaced (the extension was dropped and created again).",
								  "%d have no lease in this table but may still be leased in the table it replaced (the extension was dropped and created again).",
								  scan->nresting),
						 scan->nresting);
	}
	if (scan->own < tries)
		appendStringInfo(&detail, " %s",
						 _("One is this server's own identity (\"idgen.datacenter_id\", \"idgen.worker_id\")."));
	if (idgen_active_nodes > 1)
		appendStringInfo(&detail, _(" This node (\"idgen.active_node\" = %d) leases only the ids that are %d modulo \"idgen.active_nodes\" (%d)."),
						 idgen_active_node, idgen_active_node, idgen_active_nodes);
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("all %d worker ids are taken", tries),
			 errdetail_internal("%s", detail.data),
			 errhint("Release leases that are no longer used, or pass a larger max_workers (up to " INT64_FORMAT ").",
					 layout_space())));
}

/*
 * Active-active (idgen.active_nodes > 1): the lease tables of the nodes
 * merge by replication, and a node cannot see another's lease before it
 * arrives, so two nodes could lease one id at once, during a lag or a
 * partition.  So the id space is dealt out as per-key sequence values are
 * (active.c): node r leases only the ids congruent to r modulo the number
 * of nodes, and refuses a claim of another node's.  A lease arriving from
 * another node is of that node's ids, and stays busy here until it ends
 * and rests, as any lease.
 */
static void
refuse_other_node(const LeaseRequest *req)
{
	if (idgen_active_nodes <= 1)
		return;
	idgen_active_node_check();
	if (req->want >= 0 && req->want % idgen_active_nodes != idgen_active_node)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("worker id (datacenter %d, worker %d) is not leased by this node",
						datacenter_of((int32) req->want), worker_of((int32) req->want)),
				 errdetail("With \"idgen.active_nodes\" = %d, node %d leases the ids whose number (datacenter_id << \"idgen.worker_bits\" | worker_id) is %d modulo %d; this one is node " INT64_FORMAT "'s.",
						   idgen_active_nodes, idgen_active_node, idgen_active_node,
						   idgen_active_nodes, req->want % idgen_active_nodes),
				 errhint("Lease it on that node, or claim an id of this node's.")));
	if (req->want < 0 && req->max_workers <= idgen_active_node)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_workers %d leaves no worker id to this node", req->max_workers),
				 errdetail("With \"idgen.active_nodes\" = %d, node %d leases the ids %d, %d, ... only.",
						   idgen_active_nodes, idgen_active_node, idgen_active_node,
						   idgen_active_node + idgen_active_nodes),
				 errhint("Pass a max_workers above %d.", idgen_active_node)));
}

/* The registry never leases its own identity, even when asked for it. */
static void
refuse_own_id(int64 want, int64 own)
{
	if (want == own)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("worker id (datacenter %d, worker %d) is taken",
						datacenter_of((int32) want), worker_of((int32) want)),
				 errdetail("It is the identity of the registry server itself (its \"idgen.datacenter_id\" and \"idgen.worker_id\")."),
				 errhint("Give each server its own \"idgen.datacenter_id\" and \"idgen.worker_id\", "
						 "or set \"idgen.identity\" = 'registry' to be given a free one.")));
}

/*
 * Read the ids below 'max_workers' that are not free now (Q_BUSY), sorted,
 * and which of them are bound to a session, with their tokens.
 */
static void
load_busy(LeaseScan *scan, int32 max_workers)
{
	Datum		args[2];

	args[0] = Int32GetDatum(max_workers);
	args[1] = TimestampTzGetDatum(scan->ended_before);
	scan->nbusy = (int) idgen_sql_run_latest(&scan->cx, Q_BUSY, args, NULL);
	scan->busy = palloc(sizeof(int32) * (scan->nbusy + 1));
	scan->session_ids = palloc(sizeof(int32) * (scan->nbusy + 1));
	scan->session_tokens = palloc(sizeof(int64) * (scan->nbusy + 1));
	scan->nsession = 0;
	for (int i = 0; i < scan->nbusy; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		n;

		scan->busy[i] = DatumGetInt32(SPI_getbinval(tup, desc, 1, &n));
		if (DatumGetBool(SPI_getbinval(tup, desc, 3, &n)))
		{
			scan->session_ids[scan->nsession] = scan->busy[i];
			scan->session_tokens[scan->nsession++] = DatumGetInt64(SPI_getbinval(tup, desc, 2, &n));
		}
	}
	qsort(scan->busy, scan->nbusy, sizeof(int32), compare_int32);
}

/*
 * Whether 'id' was not free when the scan began.  A session-bound lease
 * among those whose session has ended is ended now, at the time its end
 * was first seen: the id is free if it has rested since, and rests
 * otherwise.
 */
static bool
was_busy(LeaseScan *scan, int32 id)
{
	if (bsearch(&id, scan->busy, scan->nbusy, sizeof(int32), compare_int32) == NULL)
		return false;
	for (int s = 0; s < scan->nsession; s++)
	{
		if (scan->session_ids[s] == id)
		{
			TimestampTz end = end_session_lease(&scan->cx, scan->relid, id,
												scan->session_tokens[s], scan->now);

			return end == 0 || end > scan->ended_before;
		}
	}
	return true;
}

/*
 * Claim 'id' for 'req' (Q_CLAIM), under the id's lock: wait for the lock
 * if the caller named the id, else pass over an id another acquirer holds.
 * On CLAIM_RESTING and CLAIM_TAKEN, *fresh_from is when an id with no row
 * stops resting.
 */
static ClaimOutcome
claim_id(LeaseScan *scan, const LeaseRequest *req, int32 id, LeaseGrant *grant,
		 TimestampTz *fresh_from)
{
	Datum		args[13];
	char		nulls[13];
	Interval	reach = {.time = horizon_reach()};
	HeapTuple	tup;
	bool		n;

	/*
	 * This session's own lease of the id, in this table or in a dropped one
	 * (whose lock this session holds, so it would get it again).
	 */
	if (holds_id(id))
		return CLAIM_TAKEN;
	if (!lock_id(id, false, req->want >= 0))
		return CLAIM_LOCKED;

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int32GetDatum(id);
	args[1] = PointerGetDatum(req->holder);
	args[2] = Int64GetDatum(scan->new_token);
	if (req->ttl != NULL)
	{
		args[3] = IntervalPGetDatum(req->ttl);
		args[7] = DirectFunctionCall2(timestamptz_pl_interval,
									  TimestampTzGetDatum(scan->now),
									  IntervalPGetDatum(req->ttl));
	}
	else
		nulls[3] = nulls[7] = 'n';
	args[4] = BoolGetDatum(req->session_bound);
	args[5] = ObjectIdGetDatum(scan->cx.save_userid);	/* the caller */
	args[6] = TimestampTzGetDatum(scan->now);
	args[8] = TimestampTzGetDatum(scan->ended_before);
	args[9] = req->sysid.value;
	nulls[9] = req->sysid.isnull ? 'n' : ' ';
	args[10] = req->horizon.value;
	nulls[10] = req->horizon.isnull ? 'n' : ' ';
	*fresh_from = fence_new_id(scan->relid, id);
	if (*fresh_from == DT_NOEND && !holds_id(id))
	{
		/* A dropped table's session-bound lease, whose session is gone. */
		*fresh_from = session_gone_at(id, 0, scan->now) +
			(TimestampTz) idgen_worker_quarantine_ms * 1000;
	}
	args[11] = BoolGetDatum(scan->now >= *fresh_from);
	args[12] = IntervalPGetDatum(&reach);

	if (idgen_sql_run_latest(&scan->cx, Q_CLAIM, args, nulls) != 1)
		return scan->now < *fresh_from ? CLAIM_RESTING : CLAIM_TAKEN;

	tup = SPI_tuptable->vals[0];
	grant->id = id;
	grant->token = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &n));
	grant->handover_horizon.value = SPI_getbinval(tup, SPI_tuptable->tupdesc, 2,
												  &grant->handover_horizon.isnull);
	grant->expires_at.value = args[7];
	grant->expires_at.isnull = (req->ttl == NULL);
	fence_note(scan->relid, id, req->ttl != NULL ? DatumGetTimestampTz(args[7]) : DT_NOEND,
			   req->horizon);
	return CLAIM_GRANTED;
}

/*
 * The token of a new lease: 'tick' (of the UUIDv7 clock), or if that is not
 * above every token in the table and every one given out since the server
 * started, the next above those (see "Tokens" in the file header).
 */
static int64
token_above_table(IdgenSqlContext *cx, int64 tick)
{
	bool		isnull;
	int64		table_max = 0;
	int64		token;

	if (idgen_sql_run_latest(cx, Q_MAX_TOKEN, NULL, NULL) == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			table_max = DatumGetInt64(d);
	}
	if (table_max == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("no worker-id lease token is left above the greatest in the lease table"),
				 errhint("A token was set to the largest bigint by hand; correct the lease table.")));
	LWLockAcquire(idgen_shared->lease_fences.lock, LW_EXCLUSIVE);
	token = Max(tick, Max(table_max, idgen_shared->lease_fences.last_token) + 1);
	idgen_shared->lease_fences.last_token = token;
	LWLockRelease(idgen_shared->lease_fences.lock);
	return token;
}

/*
 * Refuse a lease to the calling role if idgen.worker_max_per_role of its
 * leases keep their ids from others: held, or ended and still resting.  A
 * resting lease counts, or a role could take ids with leases of a
 * microsecond (each over at once, its id resting) faster than they come
 * free, and renew them (a renewal after the end succeeds while nobody has
 * the id).  The count is taken under a lock on the role (held to the end
 * of the transaction), so that two of its sessions cannot both take the
 * last one.
 */
static void
check_role_limit(IdgenSqlContext *cx, Oid relid, TimestampTz now)
{
	LOCKTAG		tag;
	Datum		args[2];
	int64		held;
	bool		isnull;
	uint64		n;
	int32	   *ids;
	int64	   *tokens;

	if (idgen_worker_max_per_role <= 0)
		return;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, IDGEN_LEASE_LOCK_KEY, (uint32) cx->save_userid,
						 IDGEN_LEASE_ROLE_LOCK_CLASS);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);

	/*
	 * The role's session-bound leases whose session is gone end first (as
	 * of when that was first seen), or a role whose sessions died would be
	 * refused for ever where no purge process runs.
	 */
	args[0] = ObjectIdGetDatum(cx->save_userid);
	n = run_id_tokens(cx, Q_ROLE_SESSIONS, args, &ids, &tokens);
	for (uint64 i = 0; i < n; i++)
		(void) end_session_lease(cx, relid, ids[i], tokens[i], now);

	args[1] = TimestampTzGetDatum(free_before(now));
	(void) idgen_sql_run_latest(cx, Q_ROLE_HELD, args, NULL);
	held = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (held >= idgen_worker_max_per_role)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("role \"%s\" has reached its limit of %d worker-id leases",
						GetUserNameFromId(cx->save_userid, false), idgen_worker_max_per_role),
				 errdetail("It has " INT64_FORMAT " leases that are held or whose id still rests (\"idgen.worker_quarantine\"); \"idgen.worker_max_per_role\" is %d.",
						   held, idgen_worker_max_per_role),
				 errhint("Release the leases this role no longer uses and let their ids rest, or ask an administrator to raise the limit for it.")));
}

/*
 * The SQL result row: (worker_id, datacenter_id, token, expires_at), and a
 * fifth column, the id's horizon before this lease, when the function's row
 * type has one (idgen_server_lease, for registry.c).
 */
static Datum
grant_row(FunctionCallInfo fcinfo, const LeaseGrant *grant)
{
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		isnull[5] = {false, false, false, false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE ||
		tupdesc->natts > (int) lengthof(values))
		elog(ERROR, "return type must be a row type of at most %d columns", (int) lengthof(values));
	values[0] = Int32GetDatum(worker_of(grant->id));
	values[1] = Int32GetDatum(datacenter_of(grant->id));
	values[2] = Int64GetDatum(grant->token);
	values[3] = grant->expires_at.value;
	isnull[3] = grant->expires_at.isnull;
	values[4] = grant->handover_horizon.value;
	isnull[4] = grant->handover_horizon.isnull;
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, isnull));
}

/* Lease an id for 'req' and return the SQL result row, or raise why not. */
static Datum
lease_acquire(FunctionCallInfo fcinfo, const LeaseRequest *req)
{
	IdgenFunction fn;
	LeaseScan	scan = {0};
	LeaseGrant	grant = {.id = -1};
	int32		tries = req->want >= 0 ? 1 : req->max_workers;
	uint32		start = 0;

	scan.now = GetCurrentTimestamp();
	scan.ended_before = free_before(scan.now);
	scan.own = id_of(idgen_layout.datacenter_id, idgen_layout.worker_id);
	refuse_own_id(req->want, scan.own);
	refuse_other_node(req);

	idgen_lookup_function(fcinfo, &fn);
	scan.relid = lease_relid(&fn, "idgen_worker_lease");
	/* Drawn before any row is touched: it needs shared memory. */
	scan.new_token = idgen_uuid7_next_tick(get_func_name(fcinfo->flinfo->fn_oid));
	idgen_sql_begin(&fn, &statements, &scan.cx);
	scan.new_token = token_above_table(&scan.cx, scan.new_token);
	check_role_limit(&scan.cx, scan.relid, scan.now);

	if (req->want < 0)
	{
		load_busy(&scan, req->max_workers);
		/* Try in turn from a random id. */
		start = (int) pg_prng_uint64_range(&pg_global_prng_state, 0, req->max_workers - 1);
	}

	for (int64 i = 0; i < tries && grant.id < 0; i++)
	{
		int32		id = req->want >= 0 ? (int32) req->want : (int32) ((start + i) % tries);
		TimestampTz fresh_from = 0;

		CHECK_FOR_INTERRUPTS();
		if (id == scan.own || (req->want < 0 && was_busy(&scan, id)))
			continue;
		/* active-active: this node's ids only (refuse_other_node) */
		if (idgen_active_nodes > 1 && id % idgen_active_nodes != idgen_active_node)
			continue;
		switch (claim_id(&scan, req, id, &grant, &fresh_from))
		{
			case CLAIM_GRANTED:
				break;
			case CLAIM_LOCKED:
				scan.nlocked++;
				break;
			case CLAIM_TAKEN:
			case CLAIM_RESTING:
				if (req->want >= 0)
					report_taken(&scan, id, req, fresh_from);
				if (scan.now < fresh_from)
					scan.nresting++;
				else
					scan.nlocked++; /* taken after the scan began */
				break;
		}
	}
	idgen_sql_end(&scan.cx);

	if (grant.id < 0)
		report_all_taken(&scan, tries);
	if (req->session_bound)
		hold_for_session(scan.relid, grant.id);
	return grant_row(fcinfo, &grant);
}

/* ----------
 * idgen_worker_acquire(holder text, ttl interval, max_workers int,
 *						session_bound boolean)
 *	  returns (worker_id int, datacenter_id int, token bigint,
 *			   expires_at timestamptz)
 * ----------
 */

/* max_workers argument n: NULL is the whole space. */
static int32
max_workers_arg(FunctionCallInfo fcinfo, int n)
{
	int64		space = layout_space();
	int64		max_workers;

	if (PG_ARGISNULL(n))
		return (int32) Min(space, (int64) PG_INT32_MAX);
	max_workers = PG_GETARG_INT64(n);
	if (max_workers < 1 || max_workers > space)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("max_workers " INT64_FORMAT " is out of range", max_workers),
				 errdetail("This server's layout has " INT64_FORMAT " worker ids "
						   "(\"idgen.datacenter_bits\" = %d plus \"idgen.worker_bits\" = %d): max_workers is 1 to " INT64_FORMAT ".",
						   space, idgen_layout.datacenter_bits, idgen_layout.worker_bits, space)));
	return (int32) Min(max_workers, (int64) PG_INT32_MAX);
}

Datum
idgen_worker_acquire(PG_FUNCTION_ARGS)
{
	text	   *holder = holder_arg(fcinfo, 0, "holder");
	bool		session_bound;
	Interval   *ttl;
	int32		max_workers;
	LeaseRequest req;

	idgen_arg_not_null(fcinfo, 3, "session_bound");
	session_bound = PG_GETARG_BOOL(3);
	ttl = session_bound ? NULL : ttl_arg(fcinfo, 1);
	max_workers = max_workers_arg(fcinfo, 2);
	req = (LeaseRequest) {
		.holder = holder,
		.ttl = ttl,
		.session_bound = session_bound,
		.max_workers = max_workers,
		.want = -1,
		.sysid = {(Datum) 0, true},
		.horizon = {(Datum) 0, true},
	};

	PreventCommandIfReadOnly("idgen_worker_acquire()");
	PG_RETURN_DATUM(lease_acquire(fcinfo, &req));
}

/* The id named by arguments n (datacenter id) and n + 1 (worker id), not null. */
static int64
id_arg(FunctionCallInfo fcinfo, int n)
{
	int64		dc;
	int64		w;
	int64		id;

	dc = PG_GETARG_INT64(n);
	w = PG_GETARG_INT64(n + 1);
	(void) layout_space();
	if (dc < 0 || w < 0 ||
		(int64) dc >= (INT64CONST(1) << idgen_layout.datacenter_bits) ||
		(int64) w >= (INT64CONST(1) << idgen_layout.worker_bits))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("worker id (datacenter " INT64_FORMAT ", worker " INT64_FORMAT ") is out of range", dc, w),
				 errdetail("The registry's layout has \"idgen.datacenter_bits\" = %d and \"idgen.worker_bits\" = %d.",
						   idgen_layout.datacenter_bits, idgen_layout.worker_bits)));
	id = id_of((int32) dc, (int32) w);
	if (id > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("worker id (datacenter " INT64_FORMAT ", worker " INT64_FORMAT ") cannot be leased", dc, w),
				 errdetail("A lease's id, datacenter_id << \"idgen.worker_bits\" | worker_id, must fit in 31 bits; the registry's layout has \"idgen.datacenter_bits\" = %d and \"idgen.worker_bits\" = %d.",
						   idgen_layout.datacenter_bits, idgen_layout.worker_bits)));
	return id;
}

/*
 * The id named by claim_datacenter_id and claim_worker_id (arguments 3 and
 * 4), or -1 when neither is given.
 */
static int64
claim_arg(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(3) != PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("claim_datacenter_id and claim_worker_id must both be given, or neither")));
	if (PG_ARGISNULL(3))
		return -1;
	return id_arg(fcinfo, 3);
}

/* ----------
 * idgen_server_lease(system_identifier bigint, instance text, ttl interval,
 *					  claim_datacenter_id int, claim_worker_id int)
 *	  returns (worker_id int, datacenter_id int, token bigint,
 *			   expires_at timestamptz)
 *
 * A server's own identity, taken from this server as its registry (the
 * "idgen registry" worker of the other server calls it; see registry.c).
 * With claim_* given, exactly that id (a server whose identity comes from
 * its settings: the registry then refuses a second server claiming it);
 * without, any free one.  Renewed and released as any lease.  A live lease
 * is never taken over, not even by the same server: only its token, which
 * the registry gives out once, renews it.
 * ----------
 */
Datum
idgen_server_lease(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {.session_bound = false};

	idgen_arg_not_null(fcinfo, 0, "system_identifier");
	req.sysid.value = PG_GETARG_DATUM(0);
	req.sysid.isnull = false;
	req.holder = holder_arg(fcinfo, 1, "instance");
	req.ttl = ttl_arg(fcinfo, 2);
	req.want = claim_arg(fcinfo);
	req.max_workers = (int32) Min(layout_space(), (int64) PG_INT32_MAX);
	req.horizon = horizon_arg(fcinfo, 5);
	check_horizon_reach(req.horizon,
						DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
																TimestampTzGetDatum(GetCurrentTimestamp()),
																IntervalPGetDatum(req.ttl))));
	PreventCommandIfReadOnly("idgen_server_lease()");
	PG_RETURN_DATUM(lease_acquire(fcinfo, &req));
}

/* ----------
 * Renew and release: the lease named by its token
 * ----------
 */
typedef struct Lease
{
	Oid			relid;			/* the lease table */
	int32		id;
	Interval	ttl;
	bool		has_ttl;
	bool		session_bound;
	Oid			acquired_by;
	bool		released;
	bool		server;			/* a server's identity (it has a system identifier) */
	bool		has_expiry;
	TimestampTz expires_at;
} Lease;

static bool
lease_by_token(IdgenSqlContext *cx, int64 token, Lease *l, bool latest)
{
	Datum		arg = Int64GetDatum(token);
	HeapTuple	tup;
	TupleDesc	desc;
	bool		n;
	Datum		d;

	if ((latest ? idgen_sql_run_latest(cx, Q_BY_TOKEN, &arg, NULL) :
		 idgen_sql_run(cx, Q_BY_TOKEN, &arg, NULL)) == 0)
		return false;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	l->id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &n));
	d = SPI_getbinval(tup, desc, 3, &n);
	l->has_ttl = !n;
	if (!n)
		l->ttl = *DatumGetIntervalP(d);
	l->session_bound = DatumGetBool(SPI_getbinval(tup, desc, 4, &n));
	l->acquired_by = DatumGetObjectId(SPI_getbinval(tup, desc, 5, &n));
	d = SPI_getbinval(tup, desc, 6, &n);
	l->has_expiry = !n;
	l->expires_at = n ? 0 : DatumGetTimestampTz(d);
	(void) SPI_getbinval(tup, desc, 7, &n);
	l->released = !n;
	l->server = DatumGetBool(SPI_getbinval(tup, desc, 8, &n));
	return true;
}

static void
lease_lost(int32 worker_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("worker lease lost: worker id %d is not held with this token", worker_id),
			 errdetail("No lease of this role has this token: it ended and the id was acquired again, or it was purged, or the token is wrong."),
			 errhint("Stop generating IDs with this worker id at once, and acquire a new lease.")));
}

/*
 * Find the lease of 'token' and lock its id: the lease as it is once no
 * acquirer, renewer or releaser of the id is in progress.
 */
static void
lock_lease(FunctionCallInfo fcinfo, IdgenSqlContext *cx, const IdgenFunction *fn,
		   int32 worker_id, int64 token, Lease *l)
{
	Oid			relid = lease_relid(fn, "idgen_worker_lease");

	l->relid = relid;

	/*
	 * The role first: a lease of another role is answered exactly as a
	 * token that names no lease, so that probing tokens and worker ids
	 * tells a role nothing about other roles' leases.
	 */
	if (!lease_by_token(cx, token, l, false) ||
		(l->acquired_by != cx->save_userid && !superuser_arg(cx->save_userid)))
		lease_lost(worker_id);
	if (worker_of(l->id) != worker_id)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the token is not a lease of worker id %d", worker_id),
				 errdetail("It is a lease of worker id %d of datacenter %d.",
						   worker_of(l->id), datacenter_of(l->id))));
	if (l->session_bound)
	{
		/*
		 * Its session holds the id's lock, so no acquirer can touch it; from
		 * another session the lock would never come.
		 */
		if (!l->released && !held_by_me(relid, l->id))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the lease of worker id %d is bound to another session", worker_id),
					 errhint("Renew or release it in the session that acquired it; it ends when that session ends. "
							 "Through a transaction-pooling pooler (pgbouncer's pool_mode = transaction), "
							 "that session is one of the pooler's server connections, not the client: "
							 "take a lease with a ttl there.")));
		return;
	}
	(void) lock_id(l->id, false, true);
	/* Read it again: an acquirer may have taken the id before we locked. */
	if (!lease_by_token(cx, token, l, true))
		lease_lost(worker_id);
}

/*
 * idgen_worker_renew(worker_id bigint, token bigint, ttl interval DEFAULT NULL,
 *					  horizon timestamptz DEFAULT NULL) returns timestamptz
 *		Extend the lease to now + ttl (the lease's own ttl if NULL), never
 *		earlier than the expiry it has (Q_RENEW); the new expiry, NULL for a
 *		lease bound to its session.  'horizon' raises
 *		the id's horizon: the holder will issue no ID at or beyond it.
 */
Datum
idgen_worker_renew(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	int32		worker_id;
	int64		token = token_arg(fcinfo, 1);
	Interval   *ttl = NULL;
	IdgenFunction fn;
	IdgenSqlContext cx;
	Lease		l;
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	bool		n;
	Datum		expires;
	NullableDatum horizon;

	worker_id = worker_id_arg(fcinfo);
	if (!PG_ARGISNULL(2))
		ttl = ttl_arg(fcinfo, 2);
	horizon = horizon_arg(fcinfo, 3);
	(void) layout_space();
	PreventCommandIfReadOnly("idgen_worker_renew()");

	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	lock_lease(fcinfo, &cx, &fn, worker_id, token, &l);
	if (l.released)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("worker lease lost: the lease of worker id %d with this token was released",
						worker_id),
				 errhint("Acquire a new lease.")));

	/*
	 * A lease renewed after its end is still the holder's while nobody has
	 * taken its id (a server whose registry was down keeps its identity).
	 * But once the id has rested it counts no more against
	 * idgen.worker_max_per_role, so its renewal takes the id anew: counted
	 * as an acquisition is (or leases of a microsecond, renewed after their
	 * rest, would take every id past the limit).
	 */
	if (l.has_expiry && l.expires_at <= free_before(now))
		check_role_limit(&cx, l.relid, now);
	/* A session-bound lease whose session gave its lock up has ended. */
	if (l.session_bound && !session_lock_held(l.id))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("worker lease lost: this session no longer holds the lock of worker id %d",
						worker_id),
				 errdetail("pg_advisory_unlock_all() or DISCARD ALL gave up the advisory lock that held the session-bound lease; it ended then."),
				 errhint("Stop generating IDs with this worker id at once, and acquire a new lease.")));
	check_horizon_holder(horizon, l.server);
	args[0] = Int64GetDatum(token);
	args[1] = TimestampTzGetDatum(now);
	if (ttl != NULL)
		args[2] = IntervalPGetDatum(ttl);
	else if (l.has_ttl)
		args[2] = IntervalPGetDatum(&l.ttl);
	else
		nulls[2] = 'n';
	args[3] = horizon.value;
	if (horizon.isnull)
		nulls[3] = 'n';
	/*
	 * Gone although locked: a session-bound lease whose session gave up its
	 * advisory lock (pg_advisory_unlock_all, DISCARD ALL) was ended and its
	 * id taken meanwhile.
	 */
	if (idgen_sql_run_latest(&cx, Q_RENEW, args, nulls) != 1)
		lease_lost(worker_id);
	expires = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &n);
	idgen_sql_end(&cx);
	check_horizon_reach(horizon, n ? now : DatumGetTimestampTz(expires));
	if (n)
		PG_RETURN_NULL();
	fence_note(l.relid, l.id, DatumGetTimestampTz(expires), horizon);
	PG_RETURN_DATUM(expires);
}

/*
 * idgen_worker_release(worker_id int, token bigint,
 *						horizon timestamptz DEFAULT NULL) returns boolean
 *		End the lease now for its holder (a renewal fails from then on);
 *		false if it had been released already.  Its id still rests until the
 *		lease's expiry plus the quarantine (see the file header).  With
 *		'horizon' (a server's lease only), the holder has stopped and issued
 *		no ID at or beyond it: the id's horizon comes down to it, or to
 *		where the lease began, and the lease ends now for its id too.
 */
Datum
idgen_worker_release(PG_FUNCTION_ARGS)
{
	int32		worker_id;
	int64		token = token_arg(fcinfo, 1);
	IdgenFunction fn;
	IdgenSqlContext cx;
	Lease		l;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	NullableDatum horizon;

	worker_id = worker_id_arg(fcinfo);
	horizon = horizon_arg(fcinfo, 2);
	(void) layout_space();
	PreventCommandIfReadOnly("idgen_worker_release()");

	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	lock_lease(fcinfo, &cx, &fn, worker_id, token, &l);
	if (!l.released)
	{
		TimestampTz now = GetCurrentTimestamp();

		check_horizon_holder(horizon, l.server);
		check_horizon_reach(horizon, now);
		args[0] = Int64GetDatum(token);
		args[1] = TimestampTzGetDatum(now);
		args[2] = horizon.value;
		if (horizon.isnull)
			nulls[2] = 'n';
		(void) idgen_sql_run_latest(&cx, Q_RELEASE, args, nulls);
	}
	idgen_sql_end(&cx);

	/* A lease bound to this session: its lock goes too, at commit. */
	if (!l.released && l.session_bound)
		release_for_session(l.relid, l.id);
	PG_RETURN_BOOL(!l.released);
}

/*
 * idgen_worker_reset_horizon(datacenter_id int, worker_id int,
 *							  horizon timestamptz DEFAULT NULL)
 *	  returns timestamptz
 *		Set the horizon of an id whose lease has ended (NULL: none, and the
 *		row may then be purged); the horizon it had.  For an administrator
 *		who knows how far the id's holders really issued: the next holder
 *		starts above what is set here.  A held lease's horizon is its
 *		holder's, and is refused.
 */
Datum
idgen_worker_reset_horizon(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		id;
	NullableDatum horizon;
	IdgenFunction fn;
	IdgenSqlContext cx;
	Datum		args[2];
	char		nulls[2] = {' ', ' '};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		old_null;
	bool		end_null;
	bool		not_released;
	bool		n;
	Datum		old;
	TimestampTz end;

	idgen_arg_not_null(fcinfo, 0, "datacenter_id");
	idgen_arg_not_null(fcinfo, 1, "worker_id");
	id = id_arg(fcinfo, 0);
	horizon = horizon_arg(fcinfo, 2);
	PreventCommandIfReadOnly("idgen_worker_reset_horizon()");

	idgen_lookup_function(fcinfo, &fn);
	(void) lease_relid(&fn, "idgen_worker_lease");
	idgen_sql_begin(&fn, &statements, &cx);
	(void) lock_id((int32) id, false, true);
	args[0] = Int32GetDatum((int32) id);
	if (idgen_sql_run_latest(&cx, Q_HORIZON, args, NULL) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("worker id (datacenter %d, worker %d) has no lease",
						datacenter_of((int32) id), worker_of((int32) id)),
				 errdetail("It has never been leased, or its lease was purged: it has no horizon.")));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	old = SPI_getbinval(tup, desc, 1, &old_null);
	end = DatumGetTimestampTz(SPI_getbinval(tup, desc, 2, &end_null));
	(void) SPI_getbinval(tup, desc, 4, &not_released);
	if (!not_released && !end_null && end > now)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("worker id (datacenter %d, worker %d) may still be in use",
						datacenter_of((int32) id), worker_of((int32) id)),
				 errdetail("Its lease, held by \"%s\", was released, but its holder may generate until the lease's expiry at %s; until then its horizon is its holder's.",
						   TextDatumGetCString(SPI_getbinval(tup, desc, 3, &n)),
						   timestamptz_to_str(end)),
				 errhint("Reset the horizon once the lease has expired.")));
	if (end_null || end > now)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("worker id (datacenter %d, worker %d) is leased",
						datacenter_of((int32) id), worker_of((int32) id)),
				 errdetail("It is leased to \"%s\"%s%s; a held lease's horizon is its holder's.",
						   TextDatumGetCString(SPI_getbinval(tup, desc, 3, &n)),
						   end_null ? " for as long as its session lasts" : " until ",
						   end_null ? "" : timestamptz_to_str(end)),
				 errhint("Reset the horizon once the lease has ended.")));
	args[1] = horizon.value;
	nulls[1] = horizon.isnull ? 'n' : ' ';
	(void) idgen_sql_run_latest(&cx, Q_SET_HORIZON, args, nulls);
	idgen_sql_end(&cx);
	if (old_null)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(old);
}

/* Run statement 'q', which returns (id, token) rows, into two arrays. */
static uint64
run_id_tokens(IdgenSqlContext *cx, int q, Datum *args, int32 **ids, int64 **tokens)
{
	uint64		n = idgen_sql_run(cx, q, args, NULL);

	*ids = palloc(sizeof(int32) * (n + 1));
	*tokens = palloc(sizeof(int64) * (n + 1));
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		(*ids)[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		(*tokens)[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
	}
	return n;
}

/*
 * idgen_worker_purge() returns bigint
 *		End the session-bound leases whose session is gone, and delete the
 *		leases whose id has rested its quarantine (their ids are free either
 *		way); skips ids someone is acquiring.  The number deleted.
 */
Datum
idgen_worker_purge(PG_FUNCTION_ARGS)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz before = free_before(now);
	IdgenFunction fn;
	IdgenSqlContext cx;
	Oid			relid;
	Datum		arg = TimestampTzGetDatum(before);
	uint64		n;
	int32	   *ids;
	int64	   *tokens;
	int64		deleted = 0;

	PreventCommandIfReadOnly("idgen_worker_purge()");
	idgen_lookup_function(fcinfo, &fn);
	relid = lease_relid(&fn, "idgen_worker_lease");
	idgen_sql_begin(&fn, &statements, &cx);

	/* Session-bound leases whose session is gone end now. */
	n = run_id_tokens(&cx, Q_SESSIONS, NULL, &ids, &tokens);
	for (uint64 i = 0; i < n; i++)
		(void) end_session_lease(&cx, relid, ids[i], tokens[i], now);

	/* Then the leases that have rested. */
	n = run_id_tokens(&cx, Q_ENDED, &arg, &ids, &tokens);
	for (uint64 i = 0; i < n; i++)
	{
		Datum		args[3];

		CHECK_FOR_INTERRUPTS();
		if (!lock_id(ids[i], false, false))
			continue;
		args[0] = Int32GetDatum(ids[i]);
		args[1] = Int64GetDatum(tokens[i]);
		args[2] = TimestampTzGetDatum(before);
		deleted += (int64) idgen_sql_run_latest(&cx, Q_DELETE, args, NULL);
	}
	idgen_sql_end(&cx);
	PG_RETURN_INT64(deleted);
}

/* Define the leases' setting. */
void
idgen_lease_init(void)
{
	DefineCustomIntVariable("idgen.worker_quarantine",
							"Sets how long a worker id rests after its lease ends before it is leased again.",
							"Covers a holder that renews late or stops late, and clock differences "
							"between the hosts of one holder and the next.",
							&idgen_worker_quarantine_ms, 10 * 1000, 0, 24 * 3600 * 1000,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.worker_max_ttl",
							"Sets the longest ttl of a worker-id lease.",
							"0: no limit but 100 years. A lease whose holder is gone keeps its id "
							"from everyone for its ttl.",
							&idgen_worker_max_ttl_s, SECS_PER_DAY, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.worker_max_per_role",
							"Sets how many worker-id leases one role may hold at once.",
							"0: no limit. Set it per role with ALTER ROLE ... SET; the role cannot change it.",
							&idgen_worker_max_per_role, 0, 0, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
}
