/*-------------------------------------------------------------------------
 *
 * lease_renew.c
 *	  A worker-id lease once granted: renewed and released by its token
 *	  (idgen_worker_renew, idgen_worker_release); its id's horizon reset by
 *	  an administrator (idgen_worker_reset_horizon); ended leases purged
 *	  (idgen_worker_purge).  The design is in lease.c.
 *
 * A lease is named by its token, and found under its id's advisory lock
 * (lease_lock.c), so that a renewal or release racing a re-acquisition of
 * the id sees the new token and fails.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idgen_lease.h"

PG_FUNCTION_INFO_V1(idgen_worker_renew);
PG_FUNCTION_INFO_V1(idgen_worker_release);
PG_FUNCTION_INFO_V1(idgen_worker_purge);
PG_FUNCTION_INFO_V1(idgen_worker_reset_horizon);

/* ----------
 * Statements (owner_sql.c), with their parameters
 * ----------
 */
enum
{
	Q_BY_TOKEN,					/* the lease with token $1 */
	Q_RENEW,					/* renew the lease with token RENEW_TOKEN */
	Q_RELEASE,					/* release the lease with token RELEASE_TOKEN */
	Q_SESSIONS,					/* session-bound leases not known to have
								 * ended */
	Q_ENDED,					/* leases that ended before $1 */
	Q_DELETE,					/* delete lease DELETE_TOKEN of DELETE_ID if
								 * it ended before DELETE_ENDED_BEFORE */
	Q_HORIZON,					/* id $1's horizon and when its lease ended */
	Q_SET_HORIZON,				/* set SET_ID's horizon to SET_HORIZON */
	NUM_QUERIES
};

#define RENEW_TOKEN			1
#define RENEW_NOW			2
#define RENEW_TTL			3
#define RENEW_HORIZON		4

#define RELEASE_TOKEN		1
#define RELEASE_NOW			2
#define RELEASE_HORIZON		3

#define DELETE_ID			1
#define DELETE_TOKEN		2
#define DELETE_ENDED_BEFORE	3

#define SET_ID				1
#define SET_HORIZON			2

static const IdgenStatement statement_list[NUM_QUERIES] = {
	[Q_BY_TOKEN] = {
		"SELECT id, holder, ttl, session_bound, acquired_by, expires_at, released_at, "
		"system_identifier IS NOT NULL "
		"FROM %1$s.idgen_worker_lease WHERE token OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},

	/*
	 * A renewal never moves the expiry earlier: the holder may generate until
	 * the expiry it was given, whoever renews with a shorter ttl.
	 */
	[Q_RENEW] = {
		"UPDATE %1$s.idgen_worker_lease SET renewed_at = " IDGEN_SQL_PARAM(RENEW_NOW) ", "
		"ttl = " IDGEN_SQL_PARAM(RENEW_TTL) ", "
		"expires_at = CASE WHEN session_bound THEN NULL "
		"ELSE GREATEST(expires_at, " IDGEN_SQL_PARAM(RENEW_NOW) " OPERATOR(pg_catalog.+) "
		IDGEN_SQL_PARAM(RENEW_TTL) ") END, "
		"horizon = GREATEST(horizon, " IDGEN_SQL_PARAM(RENEW_HORIZON) ") "
		"WHERE token OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(RENEW_TOKEN) " RETURNING expires_at",
		4, {
			[RENEW_TOKEN - 1] = INT8OID,
			[RENEW_NOW - 1] = TIMESTAMPTZOID,
			[RENEW_TTL - 1] = INTERVALOID,
			[RENEW_HORIZON - 1] = TIMESTAMPTZOID
		}
	},

	/*
	 * A release may lower the horizon to what the holder did issue (it
	 * generates no more), never below where its lease began.  Only such a
	 * release, by a server that has stopped generating under the id, ends the
	 * lease before its expiry (the next holder starts above the horizon); any
	 * other leaves the expiry, until which the holder may still generate, not
	 * having heard of the release.
	 */
	[Q_RELEASE] = {
		"UPDATE %1$s.idgen_worker_lease SET released_at = " IDGEN_SQL_PARAM(RELEASE_NOW) ", "
		"expires_at = CASE WHEN " IDGEN_SQL_PARAM(RELEASE_HORIZON) " IS NULL THEN expires_at "
		"ELSE LEAST(expires_at, " IDGEN_SQL_PARAM(RELEASE_NOW) ") END, "
		"horizon = CASE WHEN " IDGEN_SQL_PARAM(RELEASE_HORIZON) " IS NULL THEN horizon "
		"ELSE GREATEST(handover_horizon, " IDGEN_SQL_PARAM(RELEASE_HORIZON) ") END "
		"WHERE token OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(RELEASE_TOKEN),
		3, {
			[RELEASE_TOKEN - 1] = INT8OID,
			[RELEASE_NOW - 1] = TIMESTAMPTZOID,
			[RELEASE_HORIZON - 1] = TIMESTAMPTZOID
		}
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
		"WHERE (id OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(DELETE_ID) ") "
		"AND (token OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(DELETE_TOKEN) ") "
		"AND horizon IS NULL AND " LEASE_ENDED_BEFORE(IDGEN_SQL_PARAM(DELETE_ENDED_BEFORE)),
		3, {
			[DELETE_ID - 1] = INT4OID,
			[DELETE_TOKEN - 1] = INT8OID,
			[DELETE_ENDED_BEFORE - 1] = TIMESTAMPTZOID
		}
	},
	[Q_HORIZON] = {
		"SELECT horizon, " LEASE_END("") ", holder, released_at "
		"FROM %1$s.idgen_worker_lease WHERE id OPERATOR(pg_catalog.=) $1",
		1, {INT4OID}
	},
	[Q_SET_HORIZON] = {
		"UPDATE %1$s.idgen_worker_lease SET horizon = " IDGEN_SQL_PARAM(SET_HORIZON) " "
		"WHERE id OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(SET_ID),
		2, {
			[SET_ID - 1] = INT4OID,
			[SET_HORIZON - 1] = TIMESTAMPTZOID
		}
	},
};

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};

/* A lease, as read by its token. */
typedef struct Lease
{
	Oid			relid;			/* the lease table */
	int32		id;
	Interval	ttl;
	bool		has_ttl;
	bool		session_bound;
	Oid			acquired_by;
	bool		released;
	bool		server;			/* a server's identity (it has a system
								 * identifier) */
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
	Oid			relid = idgen_lease_relid(fn);

	l->relid = relid;

	/*
	 * The role first: a lease of another role is answered exactly as a token
	 * that names no lease, so that probing tokens and worker ids tells a role
	 * nothing about other roles' leases.
	 */
	if (!lease_by_token(cx, token, l, false) ||
		(l->acquired_by != cx->save_userid && !superuser_arg(cx->save_userid)))
		lease_lost(worker_id);
	if (idgen_lease_worker_of(l->id) != worker_id)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the token is not a lease of worker id %d", worker_id),
				 errdetail("It is a lease of worker id %d of datacenter %d.",
						   idgen_lease_worker_of(l->id), idgen_lease_datacenter_of(l->id))));
	if (l->session_bound)
	{
		/*
		 * Its session holds the id's lock, so no acquirer can touch it; from
		 * another session the lock would never come.
		 */
		if (!l->released && !idgen_lease_held_by_me(relid, l->id))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the lease of worker id %d is bound to another session", worker_id),
					 errhint("Renew or release it in the session that acquired it; it ends when that session ends. "
							 "Through a transaction-pooling pooler (pgbouncer's pool_mode = transaction), "
							 "that session is one of the pooler's server connections, not the client: "
							 "take a lease with a ttl there.")));
		return;
	}
	(void) idgen_lease_lock_id(l->id, false, true);
	/* Read it again: an acquirer may have taken the id before we locked. */
	if (!lease_by_token(cx, token, l, true))
		lease_lost(worker_id);
}

/*
 * Refuse to renew the lease 'l' (locked) if it was released or its session
 * gave it up; count it against its role's limit if its id has rested.
 */
static void
refuse_renewal(IdgenSqlContext *cx, const Lease *l, int32 worker_id, TimestampTz now)
{
	if (l->released)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("worker lease lost: the lease of worker id %d with this token was released",
						worker_id),
				 errhint("Acquire a new lease.")));

	/*
	 * A lease renewed after its end is still the holder's while nobody has
	 * taken its id (a server whose registry was down keeps its identity). But
	 * once the id has rested it counts no more against
	 * idgen.worker_max_per_role, so its renewal takes the id anew: counted as
	 * an acquisition is (or leases of a microsecond, renewed after their
	 * rest, would take every id past the limit).
	 */
	if (l->has_expiry && l->expires_at <= idgen_lease_free_before(now))
		idgen_lease_check_role_limit(cx, l->relid, now);
	/* A session-bound lease whose session gave its lock up has ended. */
	if (l->session_bound && !idgen_lease_id_locked(l->id))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("worker lease lost: this session no longer holds the lock of worker id %d",
						worker_id),
				 errdetail("pg_advisory_unlock_all() or DISCARD ALL gave up the advisory lock that held the session-bound lease; it ended then."),
				 errhint("Stop generating IDs with this worker id at once, and acquire a new lease.")));
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
	int64		token = idgen_lease_token_arg(fcinfo, 1);
	Interval   *ttl = NULL;
	IdgenFunction fn;
	IdgenSqlContext cx;
	Lease		l;
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	bool		n;
	Datum		expires;
	NullableDatum horizon;

	worker_id = idgen_lease_worker_id_arg(fcinfo);
	if (!PG_ARGISNULL(2))
		ttl = idgen_lease_ttl_arg(fcinfo, 2);
	horizon = idgen_lease_horizon_arg(fcinfo, 3);
	(void) idgen_lease_space();
	PreventCommandIfReadOnly("idgen_worker_renew()");

	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	lock_lease(fcinfo, &cx, &fn, worker_id, token, &l);
	refuse_renewal(&cx, &l, worker_id, now);
	idgen_lease_check_horizon_holder(horizon, l.server);
	args[RENEW_TOKEN - 1] = Int64GetDatum(token);
	args[RENEW_NOW - 1] = TimestampTzGetDatum(now);
	if (ttl != NULL)
		args[RENEW_TTL - 1] = IntervalPGetDatum(ttl);
	else if (l.has_ttl)
		args[RENEW_TTL - 1] = IntervalPGetDatum(&l.ttl);
	else
		nulls[RENEW_TTL - 1] = 'n';
	args[RENEW_HORIZON - 1] = horizon.value;
	if (horizon.isnull)
		nulls[RENEW_HORIZON - 1] = 'n';

	/*
	 * Gone although locked: a session-bound lease whose session gave up its
	 * advisory lock (pg_advisory_unlock_all, DISCARD ALL) was ended and its
	 * id taken meanwhile.
	 */
	if (idgen_sql_run_latest(&cx, Q_RENEW, args, nulls) != 1)
		lease_lost(worker_id);
	expires = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &n);
	idgen_sql_end(&cx);
	idgen_lease_check_horizon_reach(horizon, n ? now : DatumGetTimestampTz(expires));
	if (n)
		PG_RETURN_NULL();
	/* A renewal never moves the expiry earlier (Q_RENEW). */
	Assert(!l.has_expiry || DatumGetTimestampTz(expires) >= l.expires_at);
	idgen_lease_fence_note(l.relid, l.id, DatumGetTimestampTz(expires), horizon);
	PG_RETURN_DATUM(expires);
}

/*
 * idgen_worker_release(worker_id int, token bigint,
 *						horizon timestamptz DEFAULT NULL) returns boolean
 *		End the lease now for its holder (a renewal fails from then on);
 *		false if it had been released already.  Its id still rests until the
 *		lease's expiry plus the quarantine (see lease.c).  With
 *		'horizon' (a server's lease only), the holder has stopped and issued
 *		no ID at or beyond it: the id's horizon comes down to it, or to
 *		where the lease began, and the lease ends now for its id too.
 */
Datum
idgen_worker_release(PG_FUNCTION_ARGS)
{
	int32		worker_id;
	int64		token = idgen_lease_token_arg(fcinfo, 1);
	IdgenFunction fn;
	IdgenSqlContext cx;
	Lease		l;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	NullableDatum horizon;

	worker_id = idgen_lease_worker_id_arg(fcinfo);
	horizon = idgen_lease_horizon_arg(fcinfo, 2);
	(void) idgen_lease_space();
	PreventCommandIfReadOnly("idgen_worker_release()");

	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	lock_lease(fcinfo, &cx, &fn, worker_id, token, &l);
	if (!l.released)
	{
		TimestampTz now = GetCurrentTimestamp();

		idgen_lease_check_horizon_holder(horizon, l.server);
		idgen_lease_check_horizon_reach(horizon, now);
		args[RELEASE_TOKEN - 1] = Int64GetDatum(token);
		args[RELEASE_NOW - 1] = TimestampTzGetDatum(now);
		args[RELEASE_HORIZON - 1] = horizon.value;
		if (horizon.isnull)
			nulls[RELEASE_HORIZON - 1] = 'n';
		(void) idgen_sql_run_latest(&cx, Q_RELEASE, args, nulls);
	}
	idgen_sql_end(&cx);

	/* A lease bound to this session: its lock goes too, at commit. */
	if (!l.released && l.session_bound)
		idgen_lease_release_for_session(l.relid, l.id);
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
	id = idgen_lease_id_arg(fcinfo, 0);
	horizon = idgen_lease_horizon_arg(fcinfo, 2);
	PreventCommandIfReadOnly("idgen_worker_reset_horizon()");

	idgen_lookup_function(fcinfo, &fn);
	(void) idgen_lease_relid(&fn);
	idgen_sql_begin(&fn, &statements, &cx);
	(void) idgen_lease_lock_id((int32) id, false, true);
	args[SET_ID - 1] = Int32GetDatum((int32) id);	/* Q_HORIZON's $1 too */
	if (idgen_sql_run_latest(&cx, Q_HORIZON, args, NULL) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("worker id (datacenter %d, worker %d) has no lease",
						idgen_lease_datacenter_of((int32) id), idgen_lease_worker_of((int32) id)),
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
						idgen_lease_datacenter_of((int32) id), idgen_lease_worker_of((int32) id)),
				 errdetail("Its lease, held by \"%s\", was released, but its holder may generate until the lease's expiry at %s; until then its horizon is its holder's.",
						   TextDatumGetCString(SPI_getbinval(tup, desc, 3, &n)),
						   timestamptz_to_str(end)),
				 errhint("Reset the horizon once the lease has expired.")));
	if (end_null || end > now)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("worker id (datacenter %d, worker %d) is leased",
						idgen_lease_datacenter_of((int32) id), idgen_lease_worker_of((int32) id)),
				 errdetail("It is leased to \"%s\"%s%s; a held lease's horizon is its holder's.",
						   TextDatumGetCString(SPI_getbinval(tup, desc, 3, &n)),
						   end_null ? " for as long as its session lasts" : " until ",
						   end_null ? "" : timestamptz_to_str(end)),
				 errhint("Reset the horizon once the lease has ended.")));
	args[SET_HORIZON - 1] = horizon.value;
	nulls[SET_HORIZON - 1] = horizon.isnull ? 'n' : ' ';
	(void) idgen_sql_run_latest(&cx, Q_SET_HORIZON, args, nulls);
	idgen_sql_end(&cx);
	if (old_null)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(old);
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
	TimestampTz before = idgen_lease_free_before(now);
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
	relid = idgen_lease_relid(&fn);
	idgen_sql_begin(&fn, &statements, &cx);

	/* Session-bound leases whose session is gone end now. */
	n = idgen_lease_run_id_tokens(&cx, Q_SESSIONS, NULL, &ids, &tokens);
	for (uint64 i = 0; i < n; i++)
		(void) idgen_lease_end_session(&cx, relid, ids[i], tokens[i], now);

	/* Then the leases that have rested. */
	n = idgen_lease_run_id_tokens(&cx, Q_ENDED, &arg, &ids, &tokens);
	for (uint64 i = 0; i < n; i++)
	{
		Datum		args[3];

		CHECK_FOR_INTERRUPTS();
		if (!idgen_lease_lock_id(ids[i], false, false))
			continue;
		args[DELETE_ID - 1] = Int32GetDatum(ids[i]);
		args[DELETE_TOKEN - 1] = Int64GetDatum(tokens[i]);
		args[DELETE_ENDED_BEFORE - 1] = TimestampTzGetDatum(before);
		deleted += (int64) idgen_sql_run_latest(&cx, Q_DELETE, args, NULL);
	}
	idgen_sql_end(&cx);
	PG_RETURN_INT64(deleted);
}
