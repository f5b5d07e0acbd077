/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Worker-id leases for Snowflake generators that run outside the
 *	  database: a process leases a worker id when it starts, renews it while
 *	  it runs and releases it when it stops.  This file holds the design
 *	  (below), the statements on the lease table, the settings, the
 *	  arguments of the SQL functions and the horizon reach; the other lease
 *	  files are listed in idgen_lease.h.
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
 * than that, cannot generate the same IDs as the next holder.  The end,
 * for the id, is the lease's expiry even when it was released before
 * (LEASE_END): a holder generates until its own deadline, no later than
 * the expiry it was given, and hears of a release only at its next
 * renewal, which may be a third of the ttl away, or never come if the
 * database is out of its reach.  So
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
 *	  Every change to the row of id N happens under the advisory lock on N
 *	  (lease_lock.c).  An acquirer only try-locks (two acquirers never wait
 *	  for each other: the second skips the id the first is claiming); renew
 *	  and release wait for it (so a renewal racing a re-acquisition sees the
 *	  new token and fails).  The claim itself is INSERT ... ON CONFLICT DO
 *	  UPDATE ... WHERE the lease has ended, which re-checks on the latest
 *	  row version, so a lease committed after the acquirer's snapshot is
 *	  never overwritten.
 *
 *	  A lease bound to its session is also held with a session-level lock
 *	  on the same key, released when the session ends (or the acquiring
 *	  (sub)transaction aborts, or the lease is released).  Whoever can lock
 *	  such an id knows the session is gone and ends the lease then: the
 *	  purge (the idgen sequencer, every idgen.purge_interval) or an
 *	  acquirer passing by; the quarantine runs from that moment, which
 *	  shared memory keeps (lease_fence.c) so that an acquirer whose
 *	  transaction fails does not take it back with its rollback.
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
 *	  started (lease_fence.c): a table restored onto a server whose clock
 *	  is behind the one that made it still gets tokens above its own, so a
 *	  store that fences holders by the highest token never takes an old
 *	  holder back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idgen_clock.h"
#include "idgen_interval.h"
#include "idgen_lease.h"

/* Settings: how long a worker id rests after its lease ends; limits. */
int			idgen_worker_quarantine_ms = 10 * 1000;
static int	idgen_worker_max_ttl_s = SECS_PER_DAY;
int			idgen_worker_max_per_role = 0;

/* Longest holder name, in bytes. */
#define IDGEN_LEASE_MAX_HOLDER	256

/* ----------
 * Statements (owner_sql.c): each in the file that binds it; what they
 * share is in idgen_lease.h
 * ----------
 */
/* Run statement 'q', which returns (id, token) rows, into two arrays. */
uint64
idgen_lease_run_id_tokens(IdgenSqlContext *cx, int q, Datum *args, int32 **ids, int64 **tokens)
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

/* The lease table of the extension whose function runs. */
Oid
idgen_lease_relid(const IdgenFunction *fn)
{
	return idgen_extension_table(fn, "idgen_worker_lease", false);
}

/* ----------
 * The quarantine (see the file header)
 * ----------
 */
/* The instant before which a lease must have ended for its id to be free. */
TimestampTz
idgen_lease_free_before(TimestampTz now)
{
	return now - (TimestampTz) idgen_worker_quarantine_ms * 1000;
}

/* Until when an id whose lease ended at 'end' rests. */
TimestampTz
idgen_lease_rests_until(TimestampTz end)
{
	return end + (TimestampTz) idgen_worker_quarantine_ms * 1000;
}

/* ----------
 * Arguments of the SQL functions
 * ----------
 */
/* A positive ttl argument: NULL is an error. */
Interval *
idgen_lease_ttl_arg(FunctionCallInfo fcinfo, int n)
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
NullableDatum
idgen_lease_horizon_arg(FunctionCallInfo fcinfo, int n)
{
	NullableDatum h = {(Datum) 0, true};
	TimestampTz ts;
	TimestampTz latest;

	if (PG_ARGISNULL(n))
		return h;
	latest = GetCurrentTimestamp() + (TimestampTz) (100 * DAYS_PER_YEAR + 1) * USECS_PER_DAY;
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
int32
idgen_lease_worker_id_arg(FunctionCallInfo fcinfo)
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

int64
idgen_lease_token_arg(FunctionCallInfo fcinfo, int n)
{
	idgen_arg_not_null(fcinfo, n, "token");
	return PG_GETARG_INT64(n);
}

/* The holder argument: not null, not empty, not too long. */
text *
idgen_lease_holder_arg(FunctionCallInfo fcinfo, int n, const char *name)
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

/* max_workers argument n: NULL is the whole space. */
int32
idgen_lease_max_workers_arg(FunctionCallInfo fcinfo, int n)
{
	int64		space = idgen_lease_space();
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

/* The id named by arguments n (datacenter id) and n + 1 (worker id), not null. */
int64
idgen_lease_id_arg(FunctionCallInfo fcinfo, int n)
{
	int64		dc;
	int64		w;
	int64		id;

	dc = PG_GETARG_INT64(n);
	w = PG_GETARG_INT64(n + 1);
	(void) idgen_lease_space();
	if (dc < 0 || w < 0 ||
		(int64) dc >= (INT64CONST(1) << idgen_layout.datacenter_bits) ||
		(int64) w >= (INT64CONST(1) << idgen_layout.worker_bits))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("worker id (datacenter " INT64_FORMAT ", worker " INT64_FORMAT ") is out of range", dc, w),
				 errdetail("The registry's layout has \"idgen.datacenter_bits\" = %d and \"idgen.worker_bits\" = %d.",
						   idgen_layout.datacenter_bits, idgen_layout.worker_bits)));
	id = idgen_lease_id_of((int32) dc, (int32) w);
	if (id > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("worker id (datacenter " INT64_FORMAT ", worker " INT64_FORMAT ") cannot be leased", dc, w),
				 errdetail("A lease's id, datacenter_id << \"idgen.worker_bits\" | worker_id, must fit in 31 bits; the registry's layout has \"idgen.datacenter_bits\" = %d and \"idgen.worker_bits\" = %d.",
						   idgen_layout.datacenter_bits, idgen_layout.worker_bits)));
	return id;
}

/* ----------
 * Horizons (see the file header)
 * ----------
 */

/* How far beyond its lease's end a holder's IDs can reach, in microseconds. */
int64
idgen_lease_horizon_reach(void)
{
	return ((int64) idgen_worker_quarantine_ms + idgen_takeover_max_lead_ms + idgen_max_drift_ms) * 1000;
}

/*
 * Refuse a horizon reported for a lease that ends at 'end' (its new
 * expiry, or now for a release) if it lies beyond the reach.
 */
void
idgen_lease_check_horizon_reach(NullableDatum horizon, TimestampTz end)
{
	TimestampTz h;

	if (horizon.isnull)
		return;
	h = DatumGetTimestampTz(horizon.value);
	if (h > end + idgen_lease_horizon_reach())
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("horizon \"%s\" is beyond what the lease's holder can issue",
						timestamptz_to_str(h)),
				 errdetail("The lease ends at %s. A holder's IDs are ahead of its clock by at most \"idgen.takeover_max_lead\" (%d ms) plus \"idgen.max_drift\" (%d ms), and its clock is ahead of this server's by at most \"idgen.worker_quarantine\" (%d ms): no later than %s.",
						   idgen_time_text(end), idgen_takeover_max_lead_ms, idgen_max_drift_ms,
						   idgen_worker_quarantine_ms, idgen_time_text(end + idgen_lease_horizon_reach())),
				 errhint("Check the holder's clock against this server's.")));
}

/* Refuse a horizon reported for an application's lease (no system identifier). */
void
idgen_lease_check_horizon_holder(NullableDatum horizon, bool server_lease)
{
	if (!horizon.isnull && !server_lease)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("only a server's lease on its identity reports a horizon"),
				 errdetail("The next holder of a worker id leased through \"idgen.identity\" = 'registry' starts above the id's horizon; an application's lease (idgen_worker_acquire) may not move it."),
				 errhint("Renew or release without horizon.")));
}

/* Define the leases' settings; register their shared area. */
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

	if (process_shared_preload_libraries_in_progress)
		idgen_lease_fence_register();
}
