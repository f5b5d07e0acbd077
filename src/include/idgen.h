/*-------------------------------------------------------------------------
 *
 * idgen.h
 *	  Module-wide constants of idgen: limits and fixed widths, and nothing
 *	  else.  Each area has a header of its own with its types and externs:
 *	  idgen_layout.h, idgen_shmem.h, idgen_stats.h, idgen_interval.h,
 *	  idgen_bgworker.h, idgen_sql.h (base), idgen_clock.h, idgen_horizon.h,
 *	  idgen_active.h, idgen_identity.h, idgen_remote.h, idgen_generators.h,
 *	  idgen_seq.h, idgen_lease.h, idgen_public.h.  Version differences are
 *	  in compat.h.
 *
 * docs/development.md has the module map (every file, by layer); src/layers
 * the layers, which test/layers.sh checks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_H
#define IDGEN_H

#include "postgres.h"

#include "datatype/timestamp.h"

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

#endif							/* IDGEN_H */
