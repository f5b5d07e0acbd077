/*-------------------------------------------------------------------------
 *
 * idgen.h
 *	  Declarations shared by the idgen source files.
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
 *	  stats.c        idgen_stats, idgen_stats_reset, idgen_info
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_H
#define IDGEN_H

#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
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

/* Where a leased identity stands (registry.c). */
typedef enum IdgenIdentityState
{
	IDGEN_IDENTITY_SETTINGS,	/* not leased: from the settings, unchecked */
	IDGEN_IDENTITY_STARTING,	/* no answer from the registry yet */
	IDGEN_IDENTITY_HELD,		/* leased (valid until valid_until) */
	IDGEN_IDENTITY_REFUSED,		/* the registry said no */
	IDGEN_IDENTITY_UNREACHABLE, /* the registry could not be asked */
	IDGEN_IDENTITY_STOPPED		/* released at shutdown */
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
 * Worker-id leases this server granted since it started, per database and
 * worker id (lease.c), under 'lock': when the lease table is dropped and
 * created again, an id the new table has no row for rests until the old
 * table's lease of it has ended.  Ids from IDGEN_LEASE_FENCE_IDS up share
 * the last entry.
 */
#define IDGEN_LEASE_FENCE_DATABASES	16
#define IDGEN_LEASE_FENCE_IDS		1024

typedef struct IdgenLeaseFence
{
	Oid			dbid;			/* InvalidOid: a free slot */
	Oid			relid;			/* the lease table of the latest grant */
	/* per id: the end of its latest lease in that table, or 0 */
	TimestampTz current[IDGEN_LEASE_FENCE_IDS + 1];
	/* per id: the latest end of its leases in tables dropped since */
	TimestampTz dropped[IDGEN_LEASE_FENCE_IDS + 1];
} IdgenLeaseFence;

typedef struct IdgenLeaseFences
{
	LWLock	   *lock;			/* rarely taken: a grant, renewal or claim */
	IdgenLeaseFence db[IDGEN_LEASE_FENCE_DATABASES];
} IdgenLeaseFences;

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
	 * The horizon of an identity's last holder that this server took over
	 * (a promotion, a registry handover), less the monotonic clock's
	 * reading then, in microseconds (0: none); raised only.  Generators may
	 * continue from it, as the monotonic clock advances, ahead of the wall
	 * clock within idgen.takeover_max_lead: idgen_takeover_point (clock.c).
	 */
	IdgenPaddedAtomic takeover;

	/* With identity_leased (set at start): the lease (registry.c). */
	IdgenLeaseLine lease;
	bool		identity_leased;
	IdgenRegistryStatus registry;

	IdgenKeeperStatus keeper;
	bool		horizon_restored;	/* read from the file at start */

	/* the horizon file's content; under file_lock, which its writers take */
	LWLock	   *file_lock;
	TimestampTz file_horizon;

	IdgenReplayStatus replay;

	IdgenLeaseFences lease_fences;

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

/* idgen.c: settings */
extern char *idgen_epoch_string;
extern int	idgen_timestamp_bits;
extern int	idgen_datacenter_bits;
extern int	idgen_worker_bits;
extern int	idgen_sequence_bits;
extern int	idgen_gene_bits;
extern int	idgen_datacenter_id;
extern int	idgen_worker_id;
extern int	idgen_max_drift_ms;
extern int	idgen_clock_wait_ms;
extern int	idgen_takeover_max_lead_ms;
extern int	idgen_horizon_lead_ms;
extern int	idgen_horizon_interval_ms;
extern char *idgen_purge_database;
extern int	idgen_purge_interval_s;
extern int	idgen_worker_quarantine_ms;
extern int	idgen_seq_default_ttl_s;
extern int	idgen_seq_cache_keys;
extern int	idgen_seq_cache_wait_ms;
extern double idgen_seq_cache_prefetch;
extern int	idgen_identity_source;
extern char *idgen_registry;
extern int	idgen_registry_ttl_ms;
extern uint64 idgen_postmaster_nonce;

/* idgen.identity */
#define IDGEN_IDENTITY_FROM_SETTINGS	0
#define IDGEN_IDENTITY_FROM_REGISTRY	1
#define idgen_identity_from_registry	(idgen_identity_source == IDGEN_IDENTITY_FROM_REGISTRY)

/*
 * lease.c: the last field of the advisory lock tags on worker ids (the SQL
 * advisory lock functions use 1 and 2), "id" in ASCII.
 */
#define IDGEN_LEASE_LOCK_CLASS		0x6964
/* ... and their first key, "idge" in ASCII: the same for every lease table */
#define IDGEN_LEASE_LOCK_KEY		0x69646765

/* layout.c */
extern IdgenLayout idgen_layout;
extern void idgen_layout_compute(IdgenLayout *layout, TimestampTz now);
extern void idgen_layout_report(int elevel);
extern void idgen_layout_check(void);
extern int64 idgen_compose(const IdgenLayout *layout, uint64 tick, uint32 gene);
extern int64 idgen_compose_identity(const IdgenLayout *layout, uint64 tick, uint32 gene,
									uint64 identity);

/* clock.c */
extern uint64 idgen_next_tick(pg_atomic_uint64 *word, const IdgenTickClock *clock);
extern int64 idgen_take_over(TimestampTz horizon, bool uuid7);
extern TimestampTz idgen_takeover_point(void);

/* registry.c */
extern void idgen_registry_shmem_init(IdgenShared *s);
extern void idgen_registry_register(void);
extern int64 idgen_leased_next(pg_atomic_uint64 *word, const IdgenTickClock *clock, uint32 gene);

/* horizon.c */
extern bool idgen_horizon_read(TimestampTz *horizon, char *why, size_t whylen);
extern bool idgen_horizon_persist(TimestampTz horizon, int elevel);
extern uint64 idgen_horizon_start_tick(TimestampTz horizon, TimestampTz epoch, int tick_bits);
extern void idgen_keeper_wake(void);
extern void idgen_keeper_register(void);
extern void idgen_register_worker(const char *name, const char *function, int flags,
								  BgWorkerStartTime start_time, int restart_seconds);

/*
 * horizon_wal.c: idgen's WAL resource manager id.  Custom ids are 128 to
 * 255 and must be unique among a server's extensions (128 is for
 * development; see the README's High availability section).
 */
#define IDGEN_RMGR_ID				147

extern void idgen_wal_register(void);
extern bool idgen_wal_log_horizon(TimestampTz horizon);
extern void idgen_recovery_check(IdgenKind kind, const char *item);

/* owner_sql.c: see there */
#define IDGEN_MAX_SQL_ARGS			12

typedef struct IdgenFunction
{
	Oid			owner;
	Oid			nspid;
} IdgenFunction;

typedef struct IdgenStatement
{
	const char *sql;			/* %1$s stands for the quoted schema */
	int			nargs;
	Oid			argtypes[IDGEN_MAX_SQL_ARGS];
} IdgenStatement;

typedef struct IdgenStatements
{
	const IdgenStatement *statements;
	int			count;
	SPIPlanPtr *plans;			/* count entries, kept for the backend's life */
	Oid			nspid;			/* the schema they were prepared for */
	char		nspname[NAMEDATALEN];	/* and its name then */
} IdgenStatements;

typedef struct IdgenSqlContext
{
	IdgenStatements *statements;
	Oid			save_userid;
	int			save_sec_context;
} IdgenSqlContext;

extern void idgen_lookup_function(FunctionCallInfo fcinfo, IdgenFunction *fn);
extern void idgen_sql_begin(const IdgenFunction *fn, IdgenStatements *st, IdgenSqlContext *cx);
extern void idgen_sql_end(IdgenSqlContext *cx);
extern uint64 idgen_sql_run(IdgenSqlContext *cx, int q, Datum *values, const char *nulls);
extern uint64 idgen_sql_run_latest(IdgenSqlContext *cx, int q, Datum *values, const char *nulls);

/* uuid7.c */
extern int64 idgen_uuid7_next_tick(const char *funcname);

/* interval.c */
extern bool idgen_timestamptz_add(TimestampTz ts, const Interval *span, TimestampTz *result);
extern void idgen_ttl_check(const Interval *ttl);

/* seq.c */
#define IDGEN_SEQ_MAX_KEY			256 /* longest key, in bytes */
#define IDGEN_SEQ_MAX_CACHE			1000000 /* largest cache setting */
struct IdgenSeqRequest;
extern void idgen_seq_reserve_segments(const char *schema, struct IdgenSeqRequest *req, int n);
extern void idgen_seq_record_use(const char *schema, struct IdgenSeqRequest *req, int n);

/* seq_cache.c: a segment request, as the worker handles it */
typedef enum IdgenSeqOutcome
{
	IDGEN_SEQ_RETRY,			/* the row was busy: ask again */
	IDGEN_SEQ_RESERVED,			/* count values reserved (0: end of range) */
	IDGEN_SEQ_FORGET			/* the key is gone, expired or not cached */
} IdgenSeqOutcome;

typedef struct IdgenSeqRequest
{
	int			index;			/* the entry */
	uint32		keygen;
	int64		size;			/* values wanted */
	char		key[IDGEN_SEQ_MAX_KEY + 1];
	IdgenSeqOutcome outcome;
	int64		base;			/* the reserved segment */
	int64		step;
	int64		max_value;
	int64		count;
} IdgenSeqRequest;

typedef struct IdgenSeqCacheRow
{
	char		key[IDGEN_SEQ_MAX_KEY + 1];
	int32		cache;
	int64		segment_size;
	int64		served;
	int64		fetches;
	int64		waits;
	bool		has_segment;
	int64		segment_first;
	int64		segment_last;
	int64		segment_left;
	bool		next_ready;
} IdgenSeqCacheRow;

extern Size idgen_seq_cache_shmem_size(void);
extern void idgen_seq_cache_shmem_startup(void);
extern bool idgen_seq_cache_available(void);
extern int	idgen_seq_cache_next(const char *key, int keylen, int count, int64 *out, Oid relid);
extern void idgen_seq_cache_install(const char *key, int keylen, int32 cache_size, bool has_ttl,
								   Oid relid);
extern void idgen_seq_cache_invalidate(const char *key, int keylen);
extern void idgen_seq_cache_worker_attach(Latch *latch);
extern void idgen_seq_cache_worker_detach(int code, Datum arg);
extern int	idgen_seq_cache_collect(IdgenSeqRequest *req, int max);
extern bool idgen_seq_cache_pending(bool *urgent);
extern int64 idgen_seq_cache_reserve(IdgenSeqRequest *r, int64 value, int64 step, int64 max_value);
extern void idgen_seq_cache_publish(IdgenSeqRequest *req, int n);
extern int	idgen_seq_cache_collect_used(IdgenSeqRequest *req, int max);
extern void idgen_seq_cache_report(void (*emit) (void *arg, const IdgenSeqCacheRow *row), void *arg,
								  Oid relid);

/* seq_worker.c */
extern void idgen_purge_register(void);

/* shmem.c */
extern IdgenShared *idgen_shared;
extern bool idgen_preloaded;
extern void idgen_shmem_init(void);
extern Size idgen_shmem_size(void);
extern void idgen_require_shmem(const char *funcname);

/* stats.c */
extern void idgen_count(IdgenKind kind, IdgenCounter counter, uint64 n);

#endif							/* IDGEN_H */
