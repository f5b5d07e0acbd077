/*-------------------------------------------------------------------------
 *
 * clock.c
 *	  Time-ordered ticks in shared memory, and the clock policy, shared by
 *	  the Snowflake and UUIDv7 generators.
 *
 * A generator word holds the tick of the last identifier it issued:
 *
 *	  tick = (millisecond << tick_bits) | counter
 *
 * with milliseconds counted from the generator's epoch.  A tick is a point
 * on one number line in units of 2^-tick_bits ms, so the next identifier is
 * simply
 *
 *	  next = max(last + 1, floor(now))
 *
 * where floor(now) is the current millisecond shifted into place (plus, for
 * UUIDv7, the fraction of the millisecond in the counter bits: RFC 9562
 * section 6.2, method 3).  When a millisecond's counter is used up, last + 1
 * carries into the next millisecond: that is borrowing, and needs no special
 * case.  The word is advanced only by compare-and-swap from the value 'next'
 * was computed from, so each tick is issued once and ticks strictly
 * increase, whatever the clock does (see shmem.c for the memory-ordering
 * argument).
 *
 * Clock policy (idgen.max_drift, idgen.clock_wait)
 *	  lead = millisecond(next) - now_ms is how far ahead of the wall clock
 *	  the identifier would be.  It is positive after borrowing, or when the
 *	  clock is behind the last identifier (it stepped back).
 *	  - lead <= max_drift_ms: issue it (continue from the last millisecond,
 *	    borrowing ahead of the clock if needed);
 *	  - otherwise wait until the clock is within max_drift_ms of it, in
 *	    slices of at most 10 ms, checking for interrupts;
 *	  - if the wait needed would take the call's total wait past
 *	    clock_wait_ms, fail at once with an error that states how far the
 *	    clock is behind the last identifier.
 *	  - never issue an identifier whose millisecond starts after the durable
 *	    horizon (horizon.c); if the keeper is late, wake it and wait, within
 *	    the same clock_wait_ms budget, then fail.
 *
 * Takeover (idgen.takeover_max_lead)
 *	  A server that took an identity over (a promoted standby, or a server
 *	  at the end of crash recovery, horizon_wal.c; a registry lease handed
 *	  over, registry.c) raises its generator words above the horizon T that
 *	  bounds the IDs issued before.  So does a server that starts with a
 *	  horizon file ahead of its clock, when the clock has not gone back
 *	  since the file was written (horizon.c).  If its clock is behind T, the rule
 *	  above would make it wait until its clock reaches T.  Instead it keeps
 *	  a takeover point that starts idgen.max_drift before T (generators
 *	  issue up to that far ahead of it, so the first ID is just above T)
 *	  and advances with the monotonic clock at half the pace of real time,
 *	  whatever the wall clock does:
 *
 *	    point(t) = T - max_drift + (mono(t) - mono(takeover)) / 2
 *
 *	  While the point is ahead of the wall clock by at most
 *	  takeover_max_lead, generators go by the point instead of the wall
 *	  clock ('now' above): they continue from T at once (the milliseconds
 *	  ahead of the clock counted as borrowed), and the lead shrinks by half
 *	  a millisecond each millisecond, so that a lead of L is gone after 2L
 *	  and IDs return to the wall clock.  So leads do not add up when one
 *	  promotion follows another; the price is that, meanwhile, a gene
 *	  issues at most half its usual IDs per millisecond before borrowing.
 *	  Beyond the bound generators go by the wall clock, and so wait and fail
 *	  as above, with a message that names the takeover, until the wall
 *	  clock reaches T.  The point only decides how far ahead generators may
 *	  run: they never pass the durable horizon, which the keeper keeps ahead
 *	  of the point as it keeps it ahead of the clock.  As the point runs
 *	  slower than the clock, no ID issued after a takeover is further ahead
 *	  of the clock than the first one was: that, and where the end of
 *	  recovery starts (horizon_wal.c), keeps leads bounded however many
 *	  takeovers follow each other.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/guc.h"
#include "portability/instr_time.h"
#include "utils/timestamp.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

#include "idgen.h"
#include "idgen_clock.h"
#include "idgen_interval.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_stats.h"

/* Settings (the clock policy above). */
int			idgen_max_drift_ms = 100;
int			idgen_clock_wait_ms = 1000;
int			idgen_takeover_max_lead_ms = 60 * 1000;

/* Sleep while waiting for the keeper to advance the horizon. */
#define IDGEN_HORIZON_SLICE_US	1000

/*
 * Read the wall clock, counting a reading behind the latest millisecond any
 * backend has seen (see clock_seen_ms in shmem.c).
 */
static TimestampTz
read_clock(IdgenKind kind)
{
	pg_atomic_uint64 *seen_word = &idgen_shared->clock_seen_ms.value;
	uint64		seen = pg_atomic_read_u64(seen_word);
	TimestampTz now;
	uint64		now_ms;

	pg_read_barrier();			/* read 'seen' before the clock */
	now = GetCurrentTimestamp();
	now_ms = (uint64) Max(now, 0) / 1000;
	if (unlikely(now_ms < seen))
		idgen_count(kind, IDGEN_STAT_CLOCK_BACKWARD, 1);
	else if (now_ms > seen)
		(void) pg_atomic_compare_exchange_u64(seen_word, &seen, now_ms);
	return now;
}

/* The monotonic clock in microseconds; one time line for all processes. */
static int64
monotonic_us(void)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	return (int64) INSTR_TIME_GET_MICROSEC(now);
}

/* The takeover point now, of the takeover word 'base' (not 0). */
static inline TimestampTz
takeover_point_of(uint64 base)
{
	return ((TimestampTz) base + monotonic_us()) / 2;
}

/*
 * The takeover point now (see the file header), 0 if this server took no
 * identity over.  idgen_shared->takeover holds 2T - mono(takeover), so
 * that point(t) = (takeover + mono(t)) / 2, and a higher word is a later
 * point at every t.
 */
TimestampTz
idgen_takeover_point(void)
{
	uint64		base = pg_atomic_read_u64(&idgen_shared->takeover.value);

	return base == 0 ? 0 : takeover_point_of(base);
}

/*
 * The detail and hint of the error of a generator held back by a takeover
 * beyond idgen.takeover_max_lead (the latest takeover's cause): what it
 * starts above, up to 'upto', and whose clock to check.
 */
static int
takeover_detail(const char *upto)
{
	switch ((IdgenTakeoverCause) idgen_shared->takeover_cause)
	{
		case IDGEN_TAKEOVER_PROMOTION:
			return errdetail("This server was promoted and starts above every ID its former primary may have issued, up to %s. That is more than \"idgen.takeover_max_lead\" (%d ms) ahead of this server's clock.",
							 upto, idgen_takeover_max_lead_ms);
		case IDGEN_TAKEOVER_CRASH_RECOVERY:
			return errdetail("After crash recovery this server starts above every ID it may have issued before, as its WAL says, up to %s. That is more than \"idgen.takeover_max_lead\" (%d ms) ahead of this server's clock.",
							 upto, idgen_takeover_max_lead_ms);
		case IDGEN_TAKEOVER_RESTART:
			return errdetail("After its restart this server starts above every ID it may have issued before, as its horizon file says, up to %s. That is more than \"idgen.takeover_max_lead\" (%d ms) ahead of this server's clock.",
							 upto, idgen_takeover_max_lead_ms);
		case IDGEN_TAKEOVER_REGISTRY:
		case IDGEN_TAKEOVER_NONE:
			break;
	}
	return errdetail("This server leased its identity from the registry and starts above every ID the last holder may have issued, up to %s. That is more than \"idgen.takeover_max_lead\" (%d ms) ahead of this server's clock.",
					 upto, idgen_takeover_max_lead_ms);
}

static int
takeover_hint(void)
{
	switch ((IdgenTakeoverCause) idgen_shared->takeover_cause)
	{
		case IDGEN_TAKEOVER_PROMOTION:
			return errhint("Synchronize this server's clock with the former primary's; generation resumes once this clock is within \"idgen.takeover_max_lead\" of the time above.");
		case IDGEN_TAKEOVER_CRASH_RECOVERY:
		case IDGEN_TAKEOVER_RESTART:
			return errhint("Check this server's time source; generation resumes once this clock is within \"idgen.takeover_max_lead\" of the time above.");
		case IDGEN_TAKEOVER_REGISTRY:
		case IDGEN_TAKEOVER_NONE:
			break;
	}
	return errhint("Synchronize this server's clock with the last holder's; generation resumes once this clock is within \"idgen.takeover_max_lead\" of the time above.");
}

pg_noreturn static void
clock_behind_error(const IdgenTickClock *c, uint64 last_tick, int64 now_ms)
{
	int64		last_ms = (int64) (last_tick >> c->tick_bits);
	TimestampTz takeover = idgen_takeover_point();
	TimestampTz now = c->epoch + (TimestampTz) now_ms * 1000;

	idgen_count(c->kind, IDGEN_STAT_ERRORS, 1);
	/* Ahead of the clock because of a takeover beyond its bound: say so. */
	if (takeover > now + (TimestampTz) idgen_takeover_max_lead_ms * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not generate %s: the system clock is " INT64_FORMAT " ms behind the IDs this server must start above",
						c->item, last_ms - now_ms),
				 takeover_detail(timestamptz_to_str(c->epoch + (TimestampTz) last_ms * 1000)),
				 takeover_hint()));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not generate %s: the system clock moved backwards by " INT64_FORMAT " ms",
					c->item, last_ms - now_ms),
			 errdetail("The generator is at %s (its last ID, or the durable horizon after a restart). Waiting for the clock to come within \"idgen.max_drift\" (%d ms) of it would take longer than \"idgen.clock_wait\" (%d ms).",
					   timestamptz_to_str(c->epoch + (TimestampTz) last_ms * 1000),
					   idgen_max_drift_ms, idgen_clock_wait_ms),
			 errhint("Check the server's time source. No ID lower than one already issued is ever generated.")));
}

pg_noreturn static void
horizon_error(const IdgenTickClock *c, int64 next_ms)
{
	idgen_count(c->kind, IDGEN_STAT_ERRORS, 1);
	if (idgen_shared->fenced)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not generate %s: the idgen keeper has stopped generation", c->item),
				 errdetail("The keeper stops generation at what has been issued when it is asked to stop: the server is shutting down, or the process was terminated and starts again within a second."),
				 errhint("Try again once the server, or the \"idgen keeper\" process, has started again.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not generate %s: the durable horizon has not advanced", c->item),
			 errdetail("The next ID would be at %s, beyond the horizon made durable by the idgen keeper (%s), which did not advance within \"idgen.clock_wait\" (%d ms).",
					   idgen_time_text(c->epoch + next_ms * 1000),
					   idgen_time_text((TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value)),
					   idgen_clock_wait_ms),
			 errhint("Check that the \"idgen keeper\" background process is running and can write the file \"idgen.horizon\" in the data directory; see the server log and idgen_info().")));
}

/*
 * The time generators go by: the wall clock 'wall', or the takeover point
 * while that is ahead of it within idgen.takeover_max_lead (see the file
 * header).  Once the wall clock has caught up with the point (which runs
 * slower), the takeover is over: the word is cleared, by compare-and-swap
 * from the value read (a takeover raising it meanwhile wins), and later
 * calls take the fast path again.  A wall clock that steps back after that
 * is met by the clock policy, as on any server.  The keeper keeps the
 * horizon ahead of the same time (keeper.c).
 */
TimestampTz
idgen_generators_now(TimestampTz wall)
{
	uint64		base = pg_atomic_read_u64(&idgen_shared->takeover.value);
	TimestampTz takeover;

	if (likely(base == 0))
		return wall;
	takeover = takeover_point_of(base);
	if (takeover > wall)
		return takeover - wall <= (TimestampTz) idgen_takeover_max_lead_ms * 1000 ?
			takeover : wall;
	(void) pg_atomic_compare_exchange_u64(&idgen_shared->takeover.value, &base, 0);
	return wall;
}

/* Move 'word' up to at least 'value'; never down. */
static void
raise_word(pg_atomic_uint64 *word, uint64 value)
{
	uint64		old = pg_atomic_read_u64(word);

	while (old < value && !pg_atomic_compare_exchange_u64(word, &old, value))
		;
	Assert(pg_atomic_read_u64(word) >= value);
}

/*
 * The generator word that makes the next tick start the first millisecond
 * (of the generator's own epoch) that begins after 'horizon': every ID
 * issued from it is above the horizon.
 */
uint64
idgen_start_tick(TimestampTz horizon, TimestampTz epoch, int tick_bits)
{
	int64		ms;

	if (horizon < epoch)
		return 0;
	ms = (horizon - epoch) / 1000 + 1;	/* first ms starting after it */
	return ((uint64) ms << tick_bits) - 1;
}

/*
 * Ask the keeper to run a round now: a generator waits for the horizon, or
 * recovery has ended.  The keeper publishes its latch in the core segment
 * (keeper.c) and clears it when it exits; a latch read just before that
 * belongs to a PGPROC that may be reused, and setting it then only wakes
 * that process once for nothing.
 */
void
idgen_wake_keeper(void)
{
	Latch	   *latch = (Latch *) (uintptr_t) pg_atomic_read_u64(&idgen_shared->keeper_latch);

	if (latch != NULL)
		SetLatch(latch);
}

/*
 * The end of the last millisecond any generator word has reached: no ID
 * issued so far is later.  With 'uuid7', the UUIDv7 word counts too.
 */
TimestampTz
idgen_issued_bound(bool uuid7)
{
	const IdgenLayout *l = &idgen_layout;
	TimestampTz bound = 0;

	if (l->valid)
		for (int g = 0; g < idgen_shared->ngenes; g++)
			bound = Max(bound, l->epoch + (TimestampTz)
						((pg_atomic_read_u64(&idgen_shared->genes[g]) >> l->sequence_bits) + 1) * 1000);
	if (uuid7)
		bound = Max(bound, IDGEN_UNIX_EPOCH + (TimestampTz)
					((pg_atomic_read_u64(&idgen_shared->uuid7_tick.value) >> IDGEN_UUID7_TICK_BITS) + 1) * 1000);
	return bound;
}

/*
 * Take an identity over from a last holder that may have issued IDs up to
 * 'horizon': raise every Snowflake generator word (and, with 'uuid7', the
 * UUIDv7 word) so that its next tick starts after it, then record it so
 * that generators may continue from there ahead of the clock (see the file
 * header).  The first ID is just above 'horizon', or above where the
 * words already are if that is later (after a restart they start above
 * the horizon file), and the point starts idgen.max_drift before it, so
 * that generators issue it at once and never run further ahead of the
 * clock than it.  Only ever upwards, by compare-and-swap, so a generator
 * running at the same moment loses nothing: shmem.c's argument holds for
 * any upward move.  Returns how far the first ID is ahead of the clock, in
 * ms.
 */
int64
idgen_take_over(TimestampTz horizon, bool uuid7, IdgenTakeoverCause cause)
{
	const IdgenLayout *l = &idgen_layout;
	TimestampTz start;
	TimestampTz point;

	if (l->valid)
		for (int g = 0; g < idgen_shared->ngenes; g++)
			raise_word(&idgen_shared->genes[g],
					   idgen_start_tick(horizon, l->epoch, l->sequence_bits));
	if (uuid7)
		raise_word(&idgen_shared->uuid7_tick.value,
				   idgen_start_tick(horizon, IDGEN_UNIX_EPOCH, IDGEN_UUID7_TICK_BITS));
	start = Max(horizon, idgen_issued_bound(uuid7) - 1000);

	/*
	 * Generators may issue up to idgen.max_drift ahead of the point, so the
	 * point is that much behind the first ID: the IDs issued from here are
	 * then at most (start - now) ahead of the clock at any later time, as the
	 * point runs slower than the clock.  That is what keeps every holder's
	 * IDs within idgen.horizon_lead + idgen.max_drift of its clock when
	 * clocks agree (horizon_wal.c, end of recovery).
	 */
	point = start - (TimestampTz) idgen_max_drift_ms * 1000;
	idgen_shared->takeover_cause = (int) cause;
	raise_word(&idgen_shared->takeover.value, (uint64) (2 * point - monotonic_us()));
	return (start - GetCurrentTimestamp()) / 1000;
}

/*
 * Sleep 'us' (at most a slice) in a generator's wait; interrupts are
 * checked after it.  The statistics count the time it slept, which on a
 * loaded machine overruns what it asked for; '*waited_us', the call's
 * budget of idgen.clock_wait, counts what it asked for, so that an overrun
 * does not turn a wait the clock ends into an error.
 */
static void
clock_sleep(const IdgenTickClock *c, int64 us, int64 *waited_us)
{
	int64		start = monotonic_us();

	Assert(us > 0 && us <= IDGEN_WAIT_SLICE_US);
	idgen_count(c->kind, IDGEN_STAT_WAITS, 1);
	pgstat_report_wait_start(WAIT_EVENT_PG_SLEEP);
	pg_usleep(us);
	pgstat_report_wait_end();
	idgen_count(c->kind, IDGEN_STAT_WAIT_US, monotonic_us() - start);
	*waited_us += us;
	CHECK_FOR_INTERRUPTS();
}

pg_noreturn static void
field_run_out_error(const IdgenTickClock *c)
{
	idgen_count(c->kind, IDGEN_STAT_ERRORS, 1);
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the %s timestamp field has run out", c->name),
			 errdetail("The %d-bit field counted from %s ended at %s.",
					   c->field_bits, c->epoch_name,
					   timestamptz_to_str(c->end_of_time)),
			 errhint("Configure a layout with more timestamp bits or a later epoch.")));
}

/* Whether millisecond 'ms' of clock 'c' starts after the durable horizon. */
static inline bool
beyond_horizon(const IdgenTickClock *c, int64 ms)
{
	return c->epoch + ms * 1000 >
		(TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value);
}

/*
 * The first tick of 'now_us' (microseconds from the epoch) on clock 'c':
 * its millisecond shifted into place, with the fraction of the millisecond
 * in the counter bits if the clock says so; 0 before the epoch.
 */
static inline uint64
floor_tick(const IdgenTickClock *c, int64 now_us)
{
	int64		now_ms = idgen_floor_div(now_us, 1000);
	uint64		tick;

	if (now_ms <= 0)
		return 0;
	tick = (uint64) now_ms << c->tick_bits;
	if (c->sub_ms)
		tick |= ((uint64) (now_us - now_ms * 1000) << c->tick_bits) / 1000;
	return tick;
}

/*
 * Issue the next tick of 'word' under clock 'c'.  See the file header.
 */
uint64
idgen_next_tick(pg_atomic_uint64 *word, const IdgenTickClock *c)
{
	const int	bits = c->tick_bits;
	uint64		old = pg_atomic_read_u64(word);
	int64		waited_us = 0;

	for (;;)
	{
		TimestampTz wall = read_clock(c->kind);
		int64		now_us = idgen_generators_now(wall) - c->epoch;
		int64		now_ms = idgen_floor_div(now_us, 1000);
		uint64		next = Max(old + 1, floor_tick(c, now_us));
		int64		next_ms = (int64) (next >> bits);

		if (unlikely(next_ms - now_ms > idgen_max_drift_ms))
		{
			/* Sleep until now_ms >= next_ms - max_drift_ms. */
			int64		need_us = (next_ms - idgen_max_drift_ms) * 1000 - now_us;

			if (waited_us + need_us > (int64) idgen_clock_wait_ms * 1000)
				clock_behind_error(c, old, now_ms);
			clock_sleep(c, Min(need_us, IDGEN_WAIT_SLICE_US), &waited_us);
			old = pg_atomic_read_u64(word);
			continue;
		}

		if (unlikely((uint64) next_ms > c->max_ms))
			field_run_out_error(c);

		/*
		 * Never beyond the durable horizon (horizon.c).  If the keeper is
		 * late, wake it and wait, within the same clock_wait_ms budget.
		 */
		if (unlikely(beyond_horizon(c, next_ms)))
		{
			if (waited_us + IDGEN_HORIZON_SLICE_US > (int64) idgen_clock_wait_ms * 1000)
				horizon_error(c, next_ms);
			idgen_wake_keeper();
			clock_sleep(c, IDGEN_HORIZON_SLICE_US, &waited_us);
			old = pg_atomic_read_u64(word);
			continue;
		}

		/* On failure 'old' receives the current value; try again from it. */
		Assert(next > old);
		if (pg_atomic_compare_exchange_u64(word, &old, next))
		{
			/*
			 * The keeper lowers the horizon to what has been issued when it
			 * stops (horizon.c, idgen_horizon_fence), then reads the words.
			 * Read after the compare-and-swap (a full barrier), the horizon
			 * tells whether this tick was taken before the keeper read the
			 * words (it counted it) or after the horizon was lowered: then
			 * the tick is given to nobody, and the loop waits for the horizon
			 * as above.
			 */
			if (unlikely(beyond_horizon(c, next_ms)))
			{
				old = next;
				continue;
			}
			if (next_ms > idgen_floor_div(wall - c->epoch, 1000) &&
				(int64) (old >> bits) < next_ms)
				idgen_count(c->kind, IDGEN_STAT_BORROWED, 1);
			idgen_count(c->kind, IDGEN_STAT_IDS, 1);
			return next;
		}
	}
}

/* Define the clock policy's settings. */
void
idgen_clock_init(void)
{
	DefineCustomIntVariable("idgen.max_drift",
							"Sets how far ahead of the system clock the generator may run.",
							"Borrowed milliseconds (sequence used up) and small backward clock steps "
							"are absorbed within this bound; beyond it the generator waits.",
							&idgen_max_drift_ms, 100, 0, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.clock_wait",
							"Sets how long a call may wait for the system clock before it fails.",
							NULL,
							&idgen_clock_wait_ms, 1000, 0, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.takeover_max_lead",
							"Sets how far ahead of the system clock a server that took over an identity may continue from its last holder's IDs.",
							"After a promotion, or a registry lease taken over from another server, generators "
							"start above every ID the last holder may have issued. If that is ahead of this "
							"server's clock by at most this much, they continue from there; otherwise they "
							"wait for the clock, and fail after idgen.clock_wait.",
							&idgen_takeover_max_lead_ms, 60 * 1000, 0, 24 * 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
}
