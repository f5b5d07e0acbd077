/*-------------------------------------------------------------------------
 *
 * idgen.h
 *	  Module-wide declarations of idgen: limits, the Snowflake layout, the
 *	  kinds of identifier, the settings.  Each area has a header of its own
 *	  (idgen_shmem.h, idgen_horizon.h, idgen_registry.h, idgen_sql.h,
 *	  idgen_seq.h, idgen_bgworker.h), and version differences are in
 *	  compat.h; a file includes what it uses.
 *
 * The module is split by concern, files of one area sharing a prefix:
 *	  idgen.c        module magic, _PG_init, settings (GUCs)
 *	  layout.c       the Snowflake bit layout: validation, packing, and the
 *	                 SQL functions that only read IDs (gene, decode, time, ...)
 *	  shmem.c        the shared-memory segment: size, creation, hooks
 *	  clock.c        ticks in shared memory and the clock policy
 *	  snowflake.c    the Snowflake generator's SQL entry points, trigger
 *	  uuid7.c        UUIDv7: generator and readers
 *	  horizon.c      the durable horizon and the keeper background worker
 *	  horizon_wal.c  the horizon in WAL: standbys, promotion, recovery
 *	  owner_sql.c    SQL on the extension's tables, as the extension's owner
 *	  interval.c     ttl arithmetic on user input that never fails later
 *	  seq.c          per-key business sequences
 *	  seq_cache.c    cached per-key sequences: segments in shared memory
 *	  seq_worker.c   the "idgen purge" process: reserves segments of cached
 *	                 keys, deletes expired keys and ended leases
 *	  lease.c        worker-id leases
 *	  registry.c     a server's identity leased from a registry server
 *	  bgworker.c     registering the background processes
 *	  stats.c        idgen_stats, idgen_stats_reset, idgen_info
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_H
#define IDGEN_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

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

/* ----------
 * The Snowflake layout, most significant bit first:
 *
 *	  0 | timestamp | datacenter | worker | sequence | gene
 *
 * Widths come from the idgen.*_bits settings and must sum to 63.  The
 * layout is computed once, when the library is loaded, and never changes
 * while the server runs (all layout settings are PGC_POSTMASTER).
 * ----------
 */
typedef struct IdgenLayout
{
	/* settings as given */
	int			timestamp_bits;
	int			datacenter_bits;
	int			worker_bits;
	int			sequence_bits;
	int			gene_bits;
	int			datacenter_id;
	int			worker_id;
	TimestampTz epoch;			/* time zero of the timestamp field */

	/* derived, valid only when 'valid' is true */
	int			gene_shift;		/* always 0 */
	int			sequence_shift;
	int			worker_shift;
	int			datacenter_shift;
	int			timestamp_shift;
	uint64		timestamp_max;	/* largest value of the timestamp field */
	uint64		sequence_mask;
	uint64		gene_mask;
	uint64		identity;		/* datacenter and worker fields, in place */
	TimestampTz end_of_time;	/* first instant the field cannot encode */

	/* validation result */
	bool		valid;
	char		error[256];		/* why the layout is invalid, one sentence */
} IdgenLayout;

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

/* idgen.c */
extern GucContext idgen_startup_context(void);

/* clock.c: the clock policy's settings, read by several areas */
extern int	idgen_max_drift_ms;
extern int	idgen_clock_wait_ms;
extern int	idgen_takeover_max_lead_ms;
extern void idgen_clock_init(void);

/* lease.c */
extern int	idgen_worker_quarantine_ms;
extern void idgen_lease_init(void);

/* layout.c */
extern IdgenLayout idgen_layout;
extern void idgen_layout_init(void);
extern void idgen_layout_compute(IdgenLayout *layout, TimestampTz now);
extern void idgen_layout_report(int elevel);
extern void idgen_layout_check(void);
extern int64 idgen_compose(const IdgenLayout *layout, uint64 tick, uint32 gene);
extern int64 idgen_compose_identity(const IdgenLayout *layout, uint64 tick, uint32 gene,
									uint64 identity);

/*
 * A SQL function's argument 'n', named 'name' in the message, must not be
 * NULL (for functions that are not STRICT because some argument may be).
 */
static inline void
idgen_arg_not_null(FunctionCallInfo fcinfo, int n, const char *name)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

/* uuid7.c */
extern int64 idgen_uuid7_next_tick(const char *funcname);

/* interval.c */
extern bool idgen_timestamptz_add(TimestampTz ts, const Interval *span, TimestampTz *result);
extern void idgen_ttl_check(const Interval *ttl);

/* shmem.c */
extern bool idgen_preloaded;
extern void idgen_require_shmem(const char *funcname);

/* stats.c */
extern void idgen_count(IdgenKind kind, IdgenCounter counter, uint64 n);

#endif							/* IDGEN_H */
