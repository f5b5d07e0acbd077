/*-------------------------------------------------------------------------
 *
 * interval.c
 *	  Time-to-live arithmetic on user input that can never fail later, and
 *	  times as text for messages.
 *
 * A ttl (of a per-key sequence, of a worker-id lease) is added to a
 * timestamp long after it was accepted: when a key is read, by the view of
 * keys, by the purge.  PostgreSQL's timestamptz + interval raises "timestamp
 * out of range" when the sum leaves the timestamp range, and an error there
 * would make the key, the view and the purge fail for good.  So:
 *
 *	  - a ttl is accepted only when every part (months, days, time) is zero
 *		or positive, one of them positive, and it is at most IDGEN_MAX_TTL
 *		(idgen_ttl_check).  Mixed signs such as '-1 mon +32 days' are
 *		refused: whether they are positive depends on the month they are
 *		added to.
 *	  - every later expiry is computed by idgen_timestamptz_add, which
 *		answers "no such time" instead of raising, and callers treat that as
 *		"never expires".  In SQL the same is idgen_expiry(since, ttl), NULL
 *		for "never".
 *
 * idgen_timestamptz_add checks a bound before it adds: N months move a time
 * by at most N x 31 days, N days by at most N x 25 hours (a daylight-saving
 * day), plus a change of UTC offset of under a day; with two days of margin
 * from either end of the range, timestamptz_pl_interval cannot overflow
 * (nor can date2j's int arithmetic on the way).  Sums within two days of
 * the end of the range (the year 294276) count as out of range.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_interval.h"

/*
 * A time as text, in memory of its own.  timestamptz_to_str() returns a
 * static buffer, which a second call among one message's arguments
 * overwrites before the message is formatted: every message that shows
 * two times formats them with this.
 */
char *
idgen_time_text(TimestampTz t)
{
	return pstrdup(timestamptz_to_str(t));
}

/* The largest accepted ttl: 100 years (as interval comparison counts them). */
#define IDGEN_MAX_TTL_MONTHS	(100 * MONTHS_PER_YEAR)

/*
 * ts + span into *result, as timestamptz + interval computes it; false, and
 * no error, when the sum could leave the timestamp range or 'ts' is
 * infinite.
 */
bool
idgen_timestamptz_add(TimestampTz ts, const Interval *span, TimestampTz *result)
{
	double		bound;
	double		margin = 2.0 * USECS_PER_DAY;

	/* An infinite time has no later time: "never" to every caller. */
	if (TIMESTAMP_NOT_FINITE(ts))
		return false;
	bound = fabs((double) span->month) * 31.0 * USECS_PER_DAY +
		fabs((double) span->day) * (double) (USECS_PER_DAY + USECS_PER_HOUR) +
		fabs((double) span->time);
	if ((double) ts + bound > (double) END_TIMESTAMP - margin ||
		(double) ts - bound < (double) MIN_TIMESTAMP + margin)
		return false;
	*result = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(ts),
													  IntervalPGetDatum(span)));
	return true;
}

/*
 * Refuse a ttl argument that is not positive in every part, or is larger
 * than IDGEN_MAX_TTL_MONTHS (see the file header).
 */
void
idgen_ttl_check(const Interval *ttl)
{
	static const Interval max_ttl = {.month = IDGEN_MAX_TTL_MONTHS};
	char	   *text;

	if (ttl->month >= 0 && ttl->day >= 0 && ttl->time >= 0 &&
		(ttl->month > 0 || ttl->day > 0 || ttl->time > 0))
	{
		if (DatumGetInt32(DirectFunctionCall2(interval_cmp,
											  IntervalPGetDatum(ttl),
											  IntervalPGetDatum(&max_ttl))) <= 0)
			return;
		text = DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(ttl)));

		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("ttl \"%s\" is too large", text),
				 errdetail("The largest accepted ttl is %d years.", IDGEN_MAX_TTL_MONTHS / MONTHS_PER_YEAR)));
	}
	text = DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(ttl)));

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("ttl must be positive"),
			 errdetail("Every part of a ttl (months, days, time) must be zero or positive, and one of them positive; \"%s\" is not.",
					   text)));
}

/*
 * idgen_expiry(since timestamptz, ttl interval) returns timestamptz
 *		since + ttl, or NULL (never) when that lies beyond the timestamp
 *		range: the expiry computation of the views and the purge.
 */
PG_FUNCTION_INFO_V1(idgen_expiry);

Datum
idgen_expiry(PG_FUNCTION_ARGS)
{
	TimestampTz result;

	if (!idgen_timestamptz_add(PG_GETARG_TIMESTAMPTZ(0), PG_GETARG_INTERVAL_P(1), &result))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(result);
}
