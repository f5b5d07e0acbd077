/*-------------------------------------------------------------------------
 *
 * idgen_clock.h
 *	  The generators' clock (clock.c): ticks in a generator word, the clock
 *	  policy, the takeover point, and the time arithmetic they share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_CLOCK_H
#define IDGEN_CLOCK_H

#include "idgen.h"
#include "idgen_layout.h"
#include "idgen_stats.h"
#include "port/atomics.h"

/*
 * A generator's clock: ticks are (ms << tick_bits) | counter, ms counted
 * from 'epoch'.
 */
typedef struct IdgenTickClock
{
	IdgenKind	kind;			/* whose statistics to count */
	const char *name;			/* "Snowflake", for messages */
	const char *item;			/* "Snowflake ID", for messages */
	TimestampTz epoch;			/* tick 0 */
	const char *epoch_name;		/* how messages name the epoch */
	int			tick_bits;		/* log2 of ticks per millisecond */
	bool		sub_ms;			/* start each ms at the clock's fraction */
	uint64		max_ms;			/* largest millisecond the field holds */
	int			field_bits;		/* width of the millisecond field */
	TimestampTz end_of_time;	/* first instant the field cannot hold */
} IdgenTickClock;

/* Why generators went above a horizon ahead of the clock. */
typedef enum IdgenTakeoverCause
{
	IDGEN_TAKEOVER_NONE,
	IDGEN_TAKEOVER_PROMOTION,	/* the end of archive recovery */
	IDGEN_TAKEOVER_CRASH_RECOVERY,	/* the end of crash recovery */
	IDGEN_TAKEOVER_RESTART,		/* a start, from the horizon file */
	IDGEN_TAKEOVER_REGISTRY		/* a lease handed over by the registry */
} IdgenTakeoverCause;

/* Longest single sleep of a generator waiting for the clock or a lease. */
#define IDGEN_WAIT_SLICE_US		10000

/* clock.c: the clock policy's settings, read by several areas */
extern int	idgen_max_drift_ms;
extern int	idgen_clock_wait_ms;
extern int	idgen_takeover_max_lead_ms;
extern void idgen_clock_init(void);

/* clock.c */
extern uint64 idgen_next_tick(pg_atomic_uint64 *word, const IdgenTickClock *clock);
extern uint64 idgen_start_tick(TimestampTz horizon, TimestampTz epoch, int tick_bits);
extern int64 idgen_take_over(TimestampTz horizon, bool uuid7, IdgenTakeoverCause cause);
extern TimestampTz idgen_issued_bound(bool uuid7);
extern TimestampTz idgen_takeover_point(void);
extern TimestampTz idgen_generators_now(TimestampTz wall);
extern void idgen_wake_keeper(void);

#endif							/* IDGEN_CLOCK_H */
