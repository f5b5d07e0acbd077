/*-------------------------------------------------------------------------
 *
 * lease_acquire.c
 *	  Acquiring a worker-id lease: idgen_worker_acquire (an application's)
 *	  and idgen_server_lease (a server's own identity, for the registry),
 *	  and the per-role limit (idgen.worker_max_per_role).
 *
 * lease_acquire claims one id for a LeaseRequest: the id it names, or a
 * free one tried in turn from a random start.  An id is claimed under its
 * advisory lock (lease_lock.c) by one INSERT ... ON CONFLICT DO UPDATE that
 * succeeds only if the id's last lease ended before the quarantine
 * (Q_CLAIM); the helpers below each do one step of that.  The design
 * (quarantine, horizons, tokens) is in lease.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idgen_active.h"
#include "idgen_generators.h"
#include "idgen_interval.h"
#include "idgen_lease.h"

PG_FUNCTION_INFO_V1(idgen_worker_acquire);
PG_FUNCTION_INFO_V1(idgen_server_lease);

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
	CLAIM_RESTING				/* no row, but a dropped table's lease may
								 * live */
} ClaimOutcome;

/* ----------
 * Statements (owner_sql.c), with their parameters
 * ----------
 */
enum
{
	Q_BUSY,						/* ids below BUSY_BELOW whose lease has not
								 * ended before BUSY_ENDED_BEFORE */
	Q_CLAIM,					/* take an id (claim_id) */
	Q_HOLDER,					/* who has id $1, and until when */
	Q_MAX_TOKEN,				/* the greatest token in the table */
	Q_ROLE_HELD,				/* leases of ROLE_HELD_BY not ended before
								 * ROLE_FREE_BEFORE */
	Q_ROLE_SESSIONS,			/* role $1's session-bound leases not known to
								 * have ended */
	NUM_QUERIES
};

#define BUSY_BELOW			1
#define BUSY_ENDED_BEFORE	2

/*
 * Q_CLAIM: lease CLAIM_ID to CLAIM_HOLDER, if its last lease ended before
 * CLAIM_ENDED_BEFORE, or it has no row and CLAIM_FRESH (it rests after no
 * dropped table's lease).  CLAIM_NOW is when it is acquired and renewed;
 * CLAIM_EXPIRES_AT and CLAIM_TTL are NULL for a lease bound to its
 * session; CLAIM_SYSID and CLAIM_HORIZON for a server's lease only.
 */
#define CLAIM_ID			1
#define CLAIM_HOLDER		2
#define CLAIM_TOKEN			3
#define CLAIM_TTL			4
#define CLAIM_SESSION_BOUND	5
#define CLAIM_ACQUIRED_BY	6
#define CLAIM_NOW			7
#define CLAIM_EXPIRES_AT	8
#define CLAIM_ENDED_BEFORE	9
#define CLAIM_SYSID			10
#define CLAIM_HORIZON		11
#define CLAIM_FRESH			12
#define CLAIM_REACH			13
#define CLAIM_NUM_PARAMS	13

#define ROLE_HELD_BY		1
#define ROLE_FREE_BEFORE	2

/*
 * The horizon an ended lease's holders can have reached (see "Horizons" in
 * lease.c's header): the one they reported, but no further than the
 * lease's end plus the reach.  NULL stays NULL (LEAST alone would ignore
 * it).
 */
#define REACHED_HORIZON \
	"CASE WHEN l.horizon IS NULL THEN NULL ELSE LEAST(l.horizon, " \
	LEASE_END("l.") " OPERATOR(pg_catalog.+) " IDGEN_SQL_PARAM(CLAIM_REACH) ") END"

static const IdgenStatement statement_list[NUM_QUERIES] = {
	[Q_BUSY] = {
		"SELECT id, token, (expires_at IS NULL AND released_at IS NULL) "
		"FROM %1$s.idgen_worker_lease "
		"WHERE (id OPERATOR(pg_catalog.<) " IDGEN_SQL_PARAM(BUSY_BELOW) ") "
		"AND NOT " LEASE_ENDED_BEFORE(IDGEN_SQL_PARAM(BUSY_ENDED_BEFORE)),
		2, {
			[BUSY_BELOW - 1] = INT4OID,
			[BUSY_ENDED_BEFORE - 1] = TIMESTAMPTZOID
		}
	},
	[Q_CLAIM] = {
		"INSERT INTO %1$s.idgen_worker_lease AS l (id, holder, token, ttl, session_bound, "
		"acquired_by, acquired_at, renewed_at, expires_at, released_at, system_identifier, "
		"horizon, handover_horizon) "
		"SELECT " IDGEN_SQL_PARAM(CLAIM_ID) ", " IDGEN_SQL_PARAM(CLAIM_HOLDER) ", "
		IDGEN_SQL_PARAM(CLAIM_TOKEN) ", " IDGEN_SQL_PARAM(CLAIM_TTL) ", "
		IDGEN_SQL_PARAM(CLAIM_SESSION_BOUND) ", " IDGEN_SQL_PARAM(CLAIM_ACQUIRED_BY) ", "
		IDGEN_SQL_PARAM(CLAIM_NOW) ", " IDGEN_SQL_PARAM(CLAIM_NOW) ", "
		IDGEN_SQL_PARAM(CLAIM_EXPIRES_AT) ", NULL, " IDGEN_SQL_PARAM(CLAIM_SYSID) ", "
		IDGEN_SQL_PARAM(CLAIM_HORIZON) ", NULL "
		"WHERE " IDGEN_SQL_PARAM(CLAIM_FRESH) " OR EXISTS (SELECT FROM %1$s.idgen_worker_lease "
		"WHERE id OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(CLAIM_ID) ") "
		"ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, token = excluded.token, "
		"ttl = excluded.ttl, session_bound = excluded.session_bound, "
		"acquired_by = excluded.acquired_by, acquired_at = excluded.acquired_at, "
		"renewed_at = excluded.renewed_at, expires_at = excluded.expires_at, released_at = NULL, "
		"system_identifier = excluded.system_identifier, "
		"horizon = GREATEST(" REACHED_HORIZON ", excluded.horizon), "
		"handover_horizon = " REACHED_HORIZON " "
		"WHERE COALESCE((" LEASE_END("l.") " OPERATOR(pg_catalog.<=) "
		IDGEN_SQL_PARAM(CLAIM_ENDED_BEFORE) "), false) "
		"RETURNING token, handover_horizon",
		CLAIM_NUM_PARAMS, {
			[CLAIM_ID - 1] = INT4OID,
			[CLAIM_HOLDER - 1] = TEXTOID,
			[CLAIM_TOKEN - 1] = INT8OID,
			[CLAIM_TTL - 1] = INTERVALOID,
			[CLAIM_SESSION_BOUND - 1] = BOOLOID,
			[CLAIM_ACQUIRED_BY - 1] = OIDOID,
			[CLAIM_NOW - 1] = TIMESTAMPTZOID,
			[CLAIM_EXPIRES_AT - 1] = TIMESTAMPTZOID,
			[CLAIM_ENDED_BEFORE - 1] = TIMESTAMPTZOID,
			[CLAIM_SYSID - 1] = INT8OID,
			[CLAIM_HORIZON - 1] = TIMESTAMPTZOID,
			[CLAIM_FRESH - 1] = BOOLOID,
			[CLAIM_REACH - 1] = INTERVALOID
		}
	},
	[Q_HOLDER] = {
		"SELECT holder, system_identifier, " LEASE_END("") ", released_at "
		"FROM %1$s.idgen_worker_lease WHERE id OPERATOR(pg_catalog.=) $1",
		1, {INT4OID}
	},
	[Q_MAX_TOKEN] = {
		"SELECT pg_catalog.max(token) FROM %1$s.idgen_worker_lease",
		0, {InvalidOid}
	},
	[Q_ROLE_HELD] = {
		"SELECT pg_catalog.count(*) FROM %1$s.idgen_worker_lease "
		"WHERE (acquired_by OPERATOR(pg_catalog.=) " IDGEN_SQL_PARAM(ROLE_HELD_BY) ") "
		"AND NOT " LEASE_ENDED_BEFORE(IDGEN_SQL_PARAM(ROLE_FREE_BEFORE)),
		2, {
			[ROLE_HELD_BY - 1] = OIDOID,
			[ROLE_FREE_BEFORE - 1] = TIMESTAMPTZOID
		}
	},
	[Q_ROLE_SESSIONS] = {
		"SELECT id, token FROM %1$s.idgen_worker_lease "
		"WHERE (acquired_by OPERATOR(pg_catalog.=) $1) AND session_bound "
		"AND expires_at IS NULL AND released_at IS NULL",
		1, {OIDOID}
	},
};

StaticAssertDecl(CLAIM_NUM_PARAMS <= IDGEN_MAX_SQL_ARGS, "Q_CLAIM's parameters fit an IdgenStatement");

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};

static int
compare_int32(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
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
						holder, idgen_time_text(end),
						idgen_time_text(idgen_lease_rests_until(end)));
	if (end <= scan->now)
		return psprintf(_("Its lease, held by \"%s\", ended at %s; it rests until %s (\"idgen.worker_quarantine\")."),
						holder, idgen_time_text(end),
						idgen_time_text(idgen_lease_rests_until(end)));
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
					idgen_lease_datacenter_of(id), idgen_lease_worker_of(id)),
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
					 idgen_lease_space())));
}

/*
 * Active-active (idgen.active_nodes > 1): the lease tables of the nodes
 * merge by replication, and a node cannot see another's lease before it
 * arrives, so two nodes could lease one id at once, during a lag or a
 * partition.  So the id space is dealt out as per-key sequence values are
 * (active.c): node r leases only the ids congruent to r modulo the number
 * of nodes, and refuses a claim of another node's.  A lease arriving from
 * another node is of that node's ids, and stays busy here until it ends
 * and rests, as any lease.  Nothing is leased while another live server
 * has this node's number (a copy of this server, or a node numbered
 * alike).
 */
static void
refuse_other_node(const LeaseRequest *req)
{
	idgen_node_clash_check();
	if (idgen_active_nodes <= 1)
		return;
	idgen_active_node_check();
	if (req->want >= 0 && req->want % idgen_active_nodes != idgen_active_node)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("worker id (datacenter %d, worker %d) is not leased by this node",
						idgen_lease_datacenter_of((int32) req->want), idgen_lease_worker_of((int32) req->want)),
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
						idgen_lease_datacenter_of((int32) want), idgen_lease_worker_of((int32) want)),
				 errdetail("It is the identity of the registry server itself (its \"idgen.datacenter_id\" and \"idgen.worker_id\")."),
				 errhint("Give each server its own \"idgen.datacenter_id\" and \"idgen.worker_id\", "
						 "or set \"idgen.identity\" = 'registry' to be given a free one.")));
}

/*
 * Read the ids below 'max_workers' that are not free now (Q_BUSY),
 * sorted, and which of them are bound to a session, with their tokens.
 */
static void
load_busy(LeaseScan *scan, int32 max_workers)
{
	Datum		args[2];

	args[BUSY_BELOW - 1] = Int32GetDatum(max_workers);
	args[BUSY_ENDED_BEFORE - 1] = TimestampTzGetDatum(scan->ended_before);
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
			TimestampTz end = idgen_lease_end_session(&scan->cx, scan->relid, id,
													  scan->session_tokens[s], scan->now);

			return end == 0 || end > scan->ended_before;
		}
	}
	return true;
}

/*
 * Until when 'id', if it has no row in the lease table, rests for a lease
 * of it in a dropped table (lease_fence.c): that lease's end plus the
 * quarantine; 0 if it is free.  A session-bound lease of a dropped table
 * (whose session this one is not: claim_id checked) ended when its session
 * was first seen gone, now that the caller could take the id's lock.
 */
static TimestampTz
rests_after_drop(LeaseScan *scan, int32 id)
{
	TimestampTz end = idgen_lease_fence_end(scan->relid, id);

	if (end == 0)
		return 0;
	if (end == DT_NOEND && !idgen_lease_holds_id(id))
		end = idgen_lease_session_gone_at(id, 0, scan->now);
	if (end == DT_NOEND)
		return end;
	return idgen_lease_rests_until(end);
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
	Datum		args[CLAIM_NUM_PARAMS];
	char		nulls[CLAIM_NUM_PARAMS];
	Interval	reach = {.time = idgen_lease_horizon_reach()};
	HeapTuple	tup;
	bool		n;

	/*
	 * This session's own lease of the id, in this table or in a dropped one
	 * (whose lock this session holds, so it would get it again).
	 */
	if (idgen_lease_holds_id(id))
		return CLAIM_TAKEN;
	if (!idgen_lease_lock_id(id, false, req->want >= 0))
		return CLAIM_LOCKED;

	memset(nulls, ' ', sizeof(nulls));
	args[CLAIM_ID - 1] = Int32GetDatum(id);
	args[CLAIM_HOLDER - 1] = PointerGetDatum(req->holder);
	args[CLAIM_TOKEN - 1] = Int64GetDatum(scan->new_token);
	if (req->ttl != NULL)
	{
		args[CLAIM_TTL - 1] = IntervalPGetDatum(req->ttl);
		args[CLAIM_EXPIRES_AT - 1] = DirectFunctionCall2(timestamptz_pl_interval,
														 TimestampTzGetDatum(scan->now),
														 IntervalPGetDatum(req->ttl));
	}
	else
		nulls[CLAIM_TTL - 1] = nulls[CLAIM_EXPIRES_AT - 1] = 'n';
	args[CLAIM_SESSION_BOUND - 1] = BoolGetDatum(req->session_bound);
	args[CLAIM_ACQUIRED_BY - 1] = ObjectIdGetDatum(scan->cx.save_userid);	/* the caller */
	args[CLAIM_NOW - 1] = TimestampTzGetDatum(scan->now);
	args[CLAIM_ENDED_BEFORE - 1] = TimestampTzGetDatum(scan->ended_before);
	args[CLAIM_SYSID - 1] = req->sysid.value;
	nulls[CLAIM_SYSID - 1] = req->sysid.isnull ? 'n' : ' ';
	args[CLAIM_HORIZON - 1] = req->horizon.value;
	nulls[CLAIM_HORIZON - 1] = req->horizon.isnull ? 'n' : ' ';
	*fresh_from = rests_after_drop(scan, id);
	args[CLAIM_FRESH - 1] = BoolGetDatum(scan->now >= *fresh_from);
	args[CLAIM_REACH - 1] = IntervalPGetDatum(&reach);

	if (idgen_sql_run_latest(&scan->cx, Q_CLAIM, args, nulls) != 1)
		return scan->now < *fresh_from ? CLAIM_RESTING : CLAIM_TAKEN;

	tup = SPI_tuptable->vals[0];
	grant->id = id;
	grant->token = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &n));
	grant->handover_horizon.value = SPI_getbinval(tup, SPI_tuptable->tupdesc, 2,
												  &grant->handover_horizon.isnull);
	grant->expires_at.value = args[CLAIM_EXPIRES_AT - 1];
	grant->expires_at.isnull = (req->ttl == NULL);
	idgen_lease_fence_note(scan->relid, id,
						   req->ttl != NULL ? DatumGetTimestampTz(args[CLAIM_EXPIRES_AT - 1]) : DT_NOEND,
						   req->horizon);
	return CLAIM_GRANTED;
}

/*
 * The token of a new lease: 'tick' (of the UUIDv7 clock), or if that is not
 * above every token in the table and every one given out since the server
 * started, the next above those (see "Tokens" in lease.c).
 */
static int64
token_above_table(IdgenSqlContext *cx, int64 tick)
{
	bool		isnull;
	int64		table_max = 0;

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
	return idgen_lease_next_token(tick, table_max);
}

/*
 * Refuse a lease to the calling role if idgen.worker_max_per_role of its
 * leases keep their ids from others: held, or ended and still resting.  A
 * resting lease counts, or a role could take ids with leases of a
 * microsecond (each over at once, its id resting) faster than they come
 * free, and renew them (a renewal after the end succeeds while nobody has
 * the id).  The count is taken under a lock on the role (held to the end
 * of the transaction), so that two of its sessions cannot both take the
 * last one.  With this file's statements, in the caller's context 'cx'
 * (lease_renew.c's too).
 */
void
idgen_lease_check_role_limit(IdgenSqlContext *cx, Oid relid, TimestampTz now)
{
	Datum		args[2];
	int64		held;
	bool		isnull;
	uint64		n;
	int32	   *ids;
	int64	   *tokens;
	IdgenStatements *caller;

	if (idgen_worker_max_per_role <= 0)
		return;
	idgen_lease_lock_role(cx->save_userid);

	/*
	 * The role's session-bound leases whose session is gone end first (as of
	 * when that was first seen), or a role whose sessions died would be
	 * refused for ever where no purge process runs.
	 */
	caller = idgen_sql_use(cx, &statements);
	args[0] = ObjectIdGetDatum(cx->save_userid);
	n = idgen_lease_run_id_tokens(cx, Q_ROLE_SESSIONS, args, &ids, &tokens);
	for (uint64 i = 0; i < n; i++)
		(void) idgen_lease_end_session(cx, relid, ids[i], tokens[i], now);

	args[ROLE_HELD_BY - 1] = ObjectIdGetDatum(cx->save_userid);
	args[ROLE_FREE_BEFORE - 1] = TimestampTzGetDatum(idgen_lease_free_before(now));
	(void) idgen_sql_run_latest(cx, Q_ROLE_HELD, args, NULL);
	held = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	(void) idgen_sql_use(cx, caller);
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
	values[0] = Int32GetDatum(idgen_lease_worker_of(grant->id));
	values[1] = Int32GetDatum(idgen_lease_datacenter_of(grant->id));
	values[2] = Int64GetDatum(grant->token);
	values[3] = grant->expires_at.value;
	isnull[3] = grant->expires_at.isnull;
	values[4] = grant->handover_horizon.value;
	isnull[4] = grant->handover_horizon.isnull;
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, isnull));
}

/*
 * Try to claim 'id' for 'req', into 'grant'; count why if it was passed
 * over.  An id the caller named that cannot be claimed is an error.
 */
static void
try_id(LeaseScan *scan, const LeaseRequest *req, int32 id, LeaseGrant *grant)
{
	TimestampTz fresh_from = 0;

	if (id == scan->own || (req->want < 0 && was_busy(scan, id)))
		return;
	/* active-active: this node's ids only (refuse_other_node) */
	if (idgen_active_nodes > 1 && id % idgen_active_nodes != idgen_active_node)
		return;
	switch (claim_id(scan, req, id, grant, &fresh_from))
	{
		case CLAIM_GRANTED:
			break;
		case CLAIM_LOCKED:
			scan->nlocked++;
			break;
		case CLAIM_TAKEN:
		case CLAIM_RESTING:
			if (req->want >= 0)
				report_taken(scan, id, req, fresh_from);
			if (scan->now < fresh_from)
				scan->nresting++;
			else
				scan->nlocked++;	/* taken after the scan began */
			break;
	}
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
	scan.ended_before = idgen_lease_free_before(scan.now);
	scan.own = idgen_lease_id_of(idgen_layout.datacenter_id, idgen_layout.worker_id);
	refuse_own_id(req->want, scan.own);
	refuse_other_node(req);

	idgen_lookup_function(fcinfo, &fn);
	scan.relid = idgen_lease_relid(&fn);
	/* Drawn before any row is touched: it needs shared memory. */
	scan.new_token = idgen_uuid7_next_tick(get_func_name(fcinfo->flinfo->fn_oid));
	idgen_sql_begin(&fn, &statements, &scan.cx);
	scan.new_token = token_above_table(&scan.cx, scan.new_token);
	idgen_lease_check_role_limit(&scan.cx, scan.relid, scan.now);

	if (req->want < 0)
	{
		load_busy(&scan, req->max_workers);
		/* Try in turn from a random id. */
		start = (int) pg_prng_uint64_range(&pg_global_prng_state, 0, req->max_workers - 1);
	}

	for (int64 i = 0; i < tries && grant.id < 0; i++)
	{
		CHECK_FOR_INTERRUPTS();
		try_id(&scan, req,
			   req->want >= 0 ? (int32) req->want : (int32) ((start + i) % tries), &grant);
	}
	idgen_sql_end(&scan.cx);

	if (grant.id < 0)
		report_all_taken(&scan, tries);
	/* Never this server's own id; active-active: only this node's ids. */
	Assert(grant.id != scan.own);
	Assert(idgen_active_nodes <= 1 || grant.id % idgen_active_nodes == idgen_active_node);
	if (req->session_bound)
		idgen_lease_hold_for_session(scan.relid, grant.id);
	return grant_row(fcinfo, &grant);
}

/* ----------
 * idgen_worker_acquire(holder text, ttl interval, max_workers int,
 *						session_bound boolean)
 *	  returns (worker_id int, datacenter_id int, token bigint,
 *			   expires_at timestamptz)
 * ----------
 */

Datum
idgen_worker_acquire(PG_FUNCTION_ARGS)
{
	text	   *holder = idgen_lease_holder_arg(fcinfo, 0, "holder");
	bool		session_bound;
	Interval   *ttl;
	int32		max_workers;
	LeaseRequest req;

	idgen_arg_not_null(fcinfo, 3, "session_bound");
	session_bound = PG_GETARG_BOOL(3);
	ttl = session_bound ? NULL : idgen_lease_ttl_arg(fcinfo, 1);
	max_workers = idgen_lease_max_workers_arg(fcinfo, 2);
	req = (LeaseRequest)
	{
		.holder = holder,
			.ttl = ttl,
			.session_bound = session_bound,
			.max_workers = max_workers,
			.want = -1,
			.sysid =
		{
			(Datum) 0, true
		},
			.horizon =
		{
			(Datum) 0, true
		},
	};

	PreventCommandIfReadOnly("idgen_worker_acquire()");
	PG_RETURN_DATUM(lease_acquire(fcinfo, &req));
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
	return idgen_lease_id_arg(fcinfo, 3);
}

/* ----------
 * idgen_server_lease(system_identifier bigint, instance text, ttl interval,
 *					  claim_datacenter_id int, claim_worker_id int)
 *	  returns (worker_id int, datacenter_id int, token bigint,
 *			   expires_at timestamptz)
 *
 * A server's own identity, taken from this server as its registry (the
 * "idgen registry" process of the other server calls it; see registry.c).
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
	req.holder = idgen_lease_holder_arg(fcinfo, 1, "instance");
	req.ttl = idgen_lease_ttl_arg(fcinfo, 2);
	req.want = claim_arg(fcinfo);
	req.max_workers = (int32) Min(idgen_lease_space(), (int64) PG_INT32_MAX);
	req.horizon = idgen_lease_horizon_arg(fcinfo, 5);
	idgen_lease_check_horizon_reach(req.horizon,
									DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
																			TimestampTzGetDatum(GetCurrentTimestamp()),
																			IntervalPGetDatum(req.ttl))));
	PreventCommandIfReadOnly("idgen_server_lease()");
	PG_RETURN_DATUM(lease_acquire(fcinfo, &req));
}
