/*-------------------------------------------------------------------------
 *
 * idgen_stats.h
 *	  The kinds of identifier and their counters (stats.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_STATS_H
#define IDGEN_STATS_H

#include "idgen.h"

/* Kinds of identifier counted in idgen_stats (one row each). */
typedef enum IdgenKind
{
	IDGEN_KIND_SNOWFLAKE = 0,
	IDGEN_KIND_UUID7,
	IDGEN_NUM_KINDS
} IdgenKind;

/* Counters kept for each kind. */
typedef enum IdgenCounter
{
	IDGEN_STAT_IDS = 0,			/* identifiers issued */
	IDGEN_STAT_BORROWED,		/* milliseconds entered ahead of the clock */
	IDGEN_STAT_CLOCK_BACKWARD,	/* clock readings behind one seen before */
	IDGEN_STAT_WAITS,			/* sleeps waiting for the clock */
	IDGEN_STAT_WAIT_US,			/* microseconds slept */
	IDGEN_STAT_ERRORS,			/* calls that raised an error */
	IDGEN_NUM_COUNTERS
} IdgenCounter;

/* stats.c */
extern void idgen_count(IdgenKind kind, IdgenCounter counter, uint64 n);

#endif							/* IDGEN_STATS_H */
