/*-------------------------------------------------------------------------
 *
 * idgen_shmem.h
 *	  The core shared-memory segment (shmem.c, which states its locking
 *	  protocol), and how an area registers shared state of its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_SHMEM_H
#define IDGEN_SHMEM_H

#include "idgen.h"
#include "idgen_stats.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/guc.h"

/* One backend's counters (stats.c), on cache lines of their own. */
typedef union IdgenStatsSlot
{
	pg_atomic_uint64 counters[IDGEN_NUM_KINDS][IDGEN_NUM_COUNTERS];
	char		pad[TYPEALIGN(PG_CACHE_LINE_SIZE,
							  sizeof(pg_atomic_uint64) * IDGEN_NUM_KINDS * IDGEN_NUM_COUNTERS)];
} IdgenStatsSlot;

/* A value on a cache line of its own: its writes do not slow neighbours. */
typedef union IdgenPaddedAtomic
{
	pg_atomic_uint64 value;
	char		pad[PG_CACHE_LINE_SIZE];
} IdgenPaddedAtomic;

/* With a registry: the lease on this server's identity (identity.c). */
typedef union IdgenLeaseLine
{
	struct
	{
		pg_atomic_uint64 word;	/* idgen_lease_word (layout.c); 0: none */
		pg_atomic_uint64 gen;	/* bumped when a lease begins or ends */
	}			f;
	char		pad[PG_CACHE_LINE_SIZE];
} IdgenLeaseLine;

/* The core segment: what generators read.  shmem.c states the protocol. */
typedef struct IdgenShared
{
	IdgenPaddedAtomic clock_seen_ms;	/* latest wall-clock ms read */
	IdgenPaddedAtomic uuid7_tick;	/* (Unix ms << 12) | rand_a, last UUID */
	IdgenPaddedAtomic horizon;	/* durable horizon (horizon.c) */
	IdgenPaddedAtomic takeover; /* the takeover point's word (clock.c) */
	int			takeover_cause; /* an IdgenTakeoverCause (idgen_clock.h) */
	bool		fenced;			/* the keeper stopped generation (horizon.c) */
	pg_atomic_uint64 keeper_latch;	/* a Latch *, to wake it (keeper.c) */
	IdgenLeaseLine lease;		/* with identity_leased (identity.c) */
	bool		identity_leased;	/* set at start */
	pg_atomic_uint32 clashed;	/* the identity clashed (active.c) */

	/* the rest is written only at start, or under 'lock' */
	LWLock	   *lock;			/* guards stats_base and stats_reset */
	int			ngenes;			/* entries in genes[] */
	int			nslots;			/* entries in slots[] */
	TimestampTz stats_reset;
	uint64		stats_base[IDGEN_NUM_KINDS][IDGEN_NUM_COUNTERS];

	pg_atomic_uint64 *genes;	/* per gene: the tick of its last ID */
	IdgenStatsSlot *slots;
} IdgenShared;

/*
 * An area's own shared state, registered from its *_init() when preloading
 * (shmem.c); created after the core segment, at every start.
 */
typedef struct IdgenShmemArea
{
	const char *name;			/* of the struct and of its LWLock tranche */
	Size		(*size) (void); /* bytes of the struct (settings are final) */
	Size		(*extra_size) (void);	/* more, for its hash tables, or NULL */
	int			(*nlocks) (void);	/* LWLocks in its tranche; or NULL: none */
	bool		own_segment;	/* not in idgen_info().shmem_bytes */
	/* set the area's pointer to 'ptr'; unless 'found', initialise it */
	void		(*startup) (void *ptr, bool found, LWLockPadded *locks);
} IdgenShmemArea;

/* shmem.c */
extern IdgenShared *idgen_shared;
extern GucContext idgen_startup_context(void);
extern void idgen_require_shmem(const char *funcname);
extern void idgen_shmem_register(const IdgenShmemArea *area);
extern void idgen_shmem_set_ngenes(int ngenes);
extern void idgen_shmem_init(void);
extern Size idgen_shmem_size(bool all);

#endif							/* IDGEN_SHMEM_H */
