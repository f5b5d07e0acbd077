/*-------------------------------------------------------------------------
 *
 * idgen_shmem.h
 *	  The shared-memory segment (shmem.c, which states its locking
 *	  protocol) and the generators' clock (clock.c), which works on it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_SHMEM_H
#define IDGEN_SHMEM_H

#include "idgen.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

/*
 * One backend's counters.  Each slot has exactly one writer, the backend
 * that owns it, so it is updated with a plain atomic read and write (no
 * locked instruction).  Padded to whole cache lines so that backends never
 * share one.
 */
typedef union IdgenStatsSlot
{
	pg_atomic_uint64 counters[IDGEN_NUM_KINDS][IDGEN_NUM_COUNTERS];
	char		pad[TYPEALIGN(PG_CACHE_LINE_SIZE,
							  sizeof(pg_atomic_uint64) * IDGEN_NUM_KINDS * IDGEN_NUM_COUNTERS)];
} IdgenStatsSlot;

/*
 * A value on a cache line of its own, so that writing it does not slow
 * readers of its neighbours.
 */
typedef union IdgenPaddedAtomic
{
	pg_atomic_uint64 value;
	char		pad[PG_CACHE_LINE_SIZE];
} IdgenPaddedAtomic;

/*
 * With a registry: the lease on this server's identity (registry.c), on a
 * cache line of its own that generators only read.
 */
typedef union IdgenLeaseLine
{
	struct
	{
		/* (valid-until ms << timestamp_shift) | identity bits; 0: none */
		pg_atomic_uint64 word;
		/* bumped whenever a lease begins or ends (not on renewals) */
		pg_atomic_uint64 gen;
	}			f;
	char		pad[PG_CACHE_LINE_SIZE];
} IdgenLeaseLine;

/* The keeper's state, for idgen_info(); protected by 'mutex'. */
typedef struct IdgenKeeperStatus
{
	slock_t		mutex;
	int			pid;			/* 0 when not running */
	Latch	   *latch;			/* to wake it early */
	uint64		persists;		/* horizons made durable */
	uint64		failures;		/* attempts that failed */
	TimestampTz last_persist;
	TimestampTz last_failure;
} IdgenKeeperStatus;

/*
 * What redo learnt from the horizon records in WAL (horizon_wal.c); under
 * 'mutex'.
 */
typedef struct IdgenReplayStatus
{
	slock_t		mutex;
	bool		known;			/* a record was replayed since start */
	TimestampTz horizon;		/* the highest horizon replayed; 0: none */
	TimestampTz written_at;		/* the writer's clock when it wrote that */
	TimestampTz replayed_at;	/* ours, at the last record */
	int			datacenter_id;	/* the writer's identity at the last record */
	int			worker_id;		/* (-1: it held none) */
	uint64		records;		/* records replayed since start */
	TimestampTz lifted_at;		/* end of recovery: generators raised then */
	TimestampTz lifted_to;		/* ... above this horizon */
	int64		lift_lead_ms;	/* how far ahead of the clock that was */
} IdgenReplayStatus;

/* Why generators went above a horizon ahead of the clock (clock.c). */
typedef enum IdgenTakeoverCause
{
	IDGEN_TAKEOVER_NONE,
	IDGEN_TAKEOVER_PROMOTION,	/* the end of archive recovery */
	IDGEN_TAKEOVER_CRASH_RECOVERY,	/* the end of crash recovery */
	IDGEN_TAKEOVER_RESTART,		/* a start, from the horizon file */
	IDGEN_TAKEOVER_REGISTRY		/* a lease handed over by the registry */
} IdgenTakeoverCause;

/* Where a leased identity stands (registry.c). */
typedef enum IdgenIdentityState
{
	IDGEN_IDENTITY_SETTINGS,	/* not leased: from the settings, unchecked */
	IDGEN_IDENTITY_STARTING,	/* no answer from the registry yet */
	IDGEN_IDENTITY_HELD,		/* leased (valid until valid_until) */
	IDGEN_IDENTITY_REFUSED,		/* the registry said no */
	IDGEN_IDENTITY_UNREACHABLE, /* the registry could not be asked */
	IDGEN_IDENTITY_STOPPED,		/* released at shutdown */
	IDGEN_IDENTITY_STANDBY		/* in recovery: the claim waits for promotion */
} IdgenIdentityState;

/* The registry worker's state, for idgen_identity(); under 'mutex'. */
typedef struct IdgenRegistryStatus
{
	slock_t		mutex;
	int			pid;			/* the worker's, 0 when not running */
	IdgenIdentityState state;
	int			datacenter_id;	/* of the lease; -1 before the first */
	int			worker_id;
	int64		token;			/* 0: none held */
	TimestampTz valid_until;	/* local: generation stops here */
	TimestampTz registry_expires_at;	/* the registry's */
	TimestampTz acquired_at;
	TimestampTz renewed_at;
	int64		skew_ms;		/* this clock minus the registry's */
	bool		has_skew;
	uint64		renewals;
	uint64		failures;
	char		message[256];	/* why it is not held, or empty */
} IdgenRegistryStatus;

/*
 * Another server's claim to this server's identity (active.c).  'clashed'
 * is set once, after the rest is filled in under 'mutex', and never
 * cleared until the server restarts; generators read it without a lock.
 */
typedef struct IdgenIdentityClash
{
	pg_atomic_uint32 clashed;
	slock_t		mutex;
	uint64		other_sysid;	/* the other server's system identifier */
	char		other_instance[64];
	TimestampTz other_announced_at;
	TimestampTz seen_at;		/* when this server learnt of it */
	char		database[NAMEDATALEN];	/* where the claim was found */
} IdgenIdentityClash;

/*
 * The shared-memory segment.  See shmem.c for the locking protocol.
 */
typedef struct IdgenShared
{
	/* latest wall-clock millisecond any backend has read (since 2000-01-01) */
	IdgenPaddedAtomic clock_seen_ms;

	/* UUIDv7 generator word: (Unix ms << 12) | rand_a of the last UUID */
	IdgenPaddedAtomic uuid7_tick;

	/* durable horizon (a TimestampTz); raised only once it is on disk */
	IdgenPaddedAtomic horizon;

	/*
	 * The takeover point (clock.c): twice the horizon this server took over
	 * (a promotion, the end of crash recovery, a registry handover), less
	 * the monotonic clock's reading then, in microseconds (0: none); raised
	 * only.  Generators may continue from it, as the monotonic clock
	 * advances, ahead of the wall clock within idgen.takeover_max_lead:
	 * idgen_takeover_point.  takeover_cause says why, for messages.
	 */
	IdgenPaddedAtomic takeover;
	IdgenTakeoverCause takeover_cause;

	/* With identity_leased (set at start): the lease (registry.c). */
	IdgenLeaseLine lease;
	bool		identity_leased;
	IdgenRegistryStatus registry;

	/* another server claiming this server's identity (active.c) */
	IdgenIdentityClash clash;

	IdgenKeeperStatus keeper;
	bool		horizon_restored;	/* read from the file at start */

	/*
	 * The horizon file's content; under file_lock, which its writers take.
	 * Also under it: whether recovery has ended (then the keeper publishes
	 * only horizons it wrote into WAL), and whether the keeper has stopped
	 * generation at what was issued (horizon.c).
	 */
	LWLock	   *file_lock;
	TimestampTz file_horizon;
	bool		recovery_ended;
	bool		fenced;

	IdgenReplayStatus replay;

	/* the rest is written only at start, or under 'lock' */
	LWLock	   *lock;			/* guards stats_base and stats_reset */
	int			ngenes;			/* entries in genes[] */
	int			nslots;			/* entries in slots[] */
	TimestampTz stats_reset;
	uint64		stats_base[IDGEN_NUM_KINDS][IDGEN_NUM_COUNTERS];

	/*
	 * Generator words: for each gene, (millisecond << sequence_bits) |
	 * sequence of the last ID issued, advanced only by compare-and-swap.
	 */
	pg_atomic_uint64 *genes;
	IdgenStatsSlot *slots;
} IdgenShared;

/*
 * A generator's clock (clock.c): ticks are (ms << tick_bits) | counter, ms
 * counted from 'epoch'.
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

/* clock.c */
extern uint64 idgen_next_tick(pg_atomic_uint64 *word, const IdgenTickClock *clock);
extern int64 idgen_take_over(TimestampTz horizon, bool uuid7, IdgenTakeoverCause cause);
extern TimestampTz idgen_issued_bound(bool uuid7);
extern TimestampTz idgen_takeover_point(void);

/*
 * An area's own shared state (shmem.c).  An area that needs one registers
 * it from its *_init(), when the library is being preloaded; shmem.c
 * requests the space and the locks, and at every start (and after a crash)
 * creates the area after the core segment and calls its startup.
 */
typedef struct IdgenShmemArea
{
	const char *name;			/* of the struct and of its LWLock tranche */
	Size		(*size) (void);	/* bytes of the struct (settings are final) */
	Size		(*extra_size) (void);	/* more, for its own hash tables; or NULL */
	int			(*nlocks) (void);	/* LWLocks in its tranche; or NULL: none */
	bool		own_segment;	/* not in idgen_info().shmem_bytes */
	/*
	 * Point the area's pointer at 'ptr' (cache-line aligned) and, unless
	 * 'found', initialise it; 'locks' is the tranche (NULL without locks).
	 */
	void		(*startup) (void *ptr, bool found, LWLockPadded *locks);
} IdgenShmemArea;

/* shmem.c */
extern IdgenShared *idgen_shared;
extern void idgen_shmem_register(const IdgenShmemArea *area);
extern void idgen_shmem_init(void);
extern Size idgen_shmem_size(bool all);

#endif							/* IDGEN_SHMEM_H */
