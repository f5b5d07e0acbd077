/*-------------------------------------------------------------------------
 *
 * idgen.h
 *	  Module-wide declarations of idgen: limits, the kinds of identifier
 *	  and their counters, the settings and functions several areas use.
 *	  Each area has a header of its own (idgen_layout.h, idgen_shmem.h,
 *	  idgen_clock.h, idgen_horizon.h, idgen_identity.h, idgen_remote.h,
 *	  idgen_sql.h, idgen_seq.h, idgen_lease.h, idgen_bgworker.h); version
 *	  differences are in compat.h.
 *
 * docs/development.md has the module map (every file, by layer); src/layers
 * the layers, which test/layers.sh checks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_H
#define IDGEN_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "compat.h"

/*
 * The gene field selects one of 2^gene_bits generator words in shared
 * memory, 8 bytes each.  16 bits (65536 shards, 512 KiB) is far more than any
 * sharded deployment uses and keeps the segment small.
 */
#define IDGEN_MAX_GENE_BITS			16

/* The Unix epoch as a TimestampTz (microseconds since 2000-01-01). */
#define IDGEN_UNIX_EPOCH \
	(-((TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY))

/* UUIDv7 ticks: (Unix ms << 12) | rand_a. */
#define IDGEN_UUID7_TICK_BITS		12

/* Warn at start when the timestamp field has fewer years than this left. */
#define IDGEN_LIFETIME_WARN_YEARS	10

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

/* clock.c: the clock policy's settings, read by several areas */
extern int	idgen_max_drift_ms;
extern int	idgen_clock_wait_ms;
extern int	idgen_takeover_max_lead_ms;
extern void idgen_clock_init(void);

/* active.c: primaries that replicate to each other (active-active) */
extern int	idgen_active_nodes;
extern int	idgen_active_node;
extern void idgen_active_init(void);
extern void idgen_active_node_check(void);
extern void idgen_node_clash_check(void);
pg_noreturn extern void idgen_identity_clash_error(void);
extern char *idgen_identity_clash_text(void);
extern bool idgen_active_gate_passed;
extern void idgen_active_gate_check(void);

/*
 * Raise an error unless this database may hand out Snowflake IDs and
 * per-key values in active-active (active.c): a test of a backend-local
 * flag once it may.
 */
static inline void
idgen_active_gate(void)
{
	if (unlikely(!idgen_active_gate_passed))
		idgen_active_gate_check();
}

/* snowflake.c, uuid7.c: the session's last IDs, forgotten by DISCARD */
extern void idgen_snowflake_forget_last(void);
extern void idgen_uuid7_forget_last(void);

/* public.c: the server log's hook for key imports */
extern void idgen_public_init(void);

/* uuid7.c */
extern int64 idgen_uuid7_next_tick(const char *funcname);

/* interval.c */
extern char *idgen_time_text(TimestampTz t);
extern bool idgen_timestamptz_add(TimestampTz ts, const Interval *span, TimestampTz *result);
extern void idgen_ttl_check(const Interval *ttl);

/* shmem.c */
extern GucContext idgen_startup_context(void);
extern void idgen_require_shmem(const char *funcname);

/* stats.c */
extern void idgen_count(IdgenKind kind, IdgenCounter counter, uint64 n);

#endif							/* IDGEN_H */
