/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  idgen's shared-memory segment.
 *
 * The segment exists only when the library is in shared_preload_libraries.
 * It holds, after the fixed IdgenShared header:
 *
 *	  genes[ngenes]   one generator word per gene (ngenes = 2^gene_bits),
 *	                  cache-line aligned
 *	  slots[nslots]   one statistics slot per backend, plus slot 0 shared
 *	                  by processes without a backend number
 *
 * Locking protocol
 * ----------------
 * genes[g], uuid7_tick: the tick of the last Snowflake ID issued for gene
 *	  g, and of the last UUIDv7 (see clock.c).  Written only by
 *	  pg_atomic_compare_exchange_u64, which
 *	  replaces 'old' by 'next' only if the word still holds 'old', and
 *	  generators only ever propose next > old.  All compare-and-swaps on one
 *	  word are totally ordered, so every successful one moves the word to a
 *	  value no caller has seen succeed before: each tick, hence each ID, is
 *	  handed to exactly one caller, and the ticks of one gene strictly
 *	  increase in that order.  The read that seeds a compare-and-swap
 *	  (pg_atomic_read_u64, no barrier) may be stale; a stale guess only makes
 *	  the compare-and-swap fail and return the current value.  Nothing else
 *	  is published through these words, so no further memory ordering is
 *	  needed (the compare-and-swap is a full barrier regardless).
 *
 * clock_seen_ms: the largest wall-clock millisecond read by any backend.
 *	  A generator reads it before it reads the clock; a clock reading below
 *	  it means the clock really went back (whoever stored it read the clock
 *	  before we did).  Raised by one compare-and-swap attempt when a reading
 *	  is newer, so it is written about once per millisecond; it lives on a
 *	  cache line of its own.
 *
 * slots[i], i > 0: written only by the backend that owns backend number i,
 *	  with pg_atomic_read_u64 + pg_atomic_write_u64 (no locked instruction on
 *	  the hot path).  Counters only grow.  Readers sum all slots with
 *	  pg_atomic_read_u64 and may see a sum that is a few increments old.
 * slots[0]: shared by processes without a backend number; updated with
 *	  pg_atomic_fetch_add_u64.
 *
 * stats_base, stats_reset: protected by 'lock'.  idgen_stats_reset() takes
 *	  it exclusively and records the current sums as the new base; readers
 *	  take it shared and report sum - base, so a reset never races with a
 *	  reader into a negative figure, and owners never have their slots
 *	  written by anyone else.
 *
 * horizon, fenced: the durable horizon, and whether the keeper stopped
 *	  generation at it; their protocol is the horizon area's (horizon.c).
 *	  Generators read both without a lock.
 *
 * keeper_latch: the keeper's latch, written by the keeper when it starts
 *	  and exits (keeper.c), read without a lock by whoever wakes it
 *	  (clock.c).
 *
 * takeover: written with compare-and-swap, upwards only, by whoever takes
 *	  an identity over (the end of recovery, the "idgen registry" process),
 *	  after it raised the generator words, which it does with
 *	  compare-and-swap (never down), so the protocol above holds; read
 *	  without a lock by generators that are ahead of the clock (clock.c).
 *	  A stale value is smaller: it can only make a generator wait.  It is
 *	  twice a TimestampTz less a reading of the monotonic clock, which is
 *	  one time line for all processes.  takeover_cause is written just
 *	  before it, for messages only.
 *
 * lease, identity_leased: the lease on a leased identity; their protocol
 *	  is the identity area's (identity.c).  identity_leased is written once,
 *	  at start.
 *
 * clashed: set once another server's claim to this identity is recorded
 *	  (active.c, which states its protocol), never cleared.  Generators
 *	  read it without a lock; one that read it just before it was set
 *	  issues the IDs of that moment, as it would have a moment earlier.
 *
 * Areas: state that only one area reads and writes lives in a struct of
 *	  that area's own (its name is the struct's and its LWLock tranche's),
 *	  registered by the area with idgen_shmem_register() and described, with
 *	  its protocol, in the area's file.  The core segment above holds what
 *	  the generators read on every call.
 *
 * Crash and restart: the segment is created anew.  Generator words start
 *	  just above the horizon read from disk, set by the horizon area's
 *	  startup (horizon.c), which runs after the core segment is created;
 *	  statistics start from zero.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "postmaster/postmaster.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_shmem.h"
#include "idgen_stats.h"

IdgenShared *idgen_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * The areas registered with idgen_shmem_register(), in order.  Filled in by
 * _PG_init in the postmaster; every process inherits it.
 */
#define IDGEN_MAX_SHMEM_AREAS		16

static const IdgenShmemArea *areas[IDGEN_MAX_SHMEM_AREAS];
static int	nareas = 0;

/* Generator words in the core segment: one per gene (layout.c says). */
static int	core_ngenes = 1;

/*
 * Set the number of generator words; layout.c, from _PG_init, before the
 * segment's size is requested.
 */
void
idgen_shmem_set_ngenes(int ngenes)
{
	Assert(ngenes >= 1);
	core_ngenes = ngenes;
}

static int
idgen_ngenes(void)
{
	return core_ngenes;
}

static int
idgen_nslots(void)
{
	return MaxBackends + 1;
}

static Size
header_size(void)
{
	return TYPEALIGN(PG_CACHE_LINE_SIZE, sizeof(IdgenShared));
}

static Size
genes_size(void)
{
	return TYPEALIGN(PG_CACHE_LINE_SIZE,
					 mul_size(sizeof(pg_atomic_uint64), idgen_ngenes()));
}

/* The core segment's size, with the slack to start on a cache line. */
static Size
core_size(void)
{
	Size		size = PG_CACHE_LINE_SIZE;

	size = add_size(size, header_size());
	size = add_size(size, genes_size());
	size = add_size(size, mul_size(sizeof(IdgenStatsSlot), idgen_nslots()));
	return size;
}

/* An area's struct, with the slack to start on a cache line. */
static Size
area_size(const IdgenShmemArea *area)
{
	return add_size(PG_CACHE_LINE_SIZE, area->size());
}

static int
area_nlocks(const IdgenShmemArea *area)
{
	return area->nlocks ? area->nlocks() : 0;
}

/*
 * Register an area's shared state; from its *_init(), in the postmaster,
 * while the library is being preloaded.
 */
void
idgen_shmem_register(const IdgenShmemArea *area)
{
	Assert(process_shared_preload_libraries_in_progress);
	if (nareas >= IDGEN_MAX_SHMEM_AREAS)
		elog(ERROR, "too many idgen shared-memory areas");
	areas[nareas++] = area;
}

/*
 * Bytes of shared memory idgen requests: the core segment and every area
 * (with 'all' false, those reported as idgen's segment: without the areas
 * that say they are a segment of their own), each with the slack that lets
 * it start on a cache-line boundary.
 */
Size
idgen_shmem_size(bool all)
{
	Size		size = core_size();

	for (int i = 0; i < nareas; i++)
	{
		if (!all && areas[i]->own_segment)
			continue;
		size = add_size(size, area_size(areas[i]));
		if (areas[i]->extra_size)
			size = add_size(size, areas[i]->extra_size());
	}
	return size;
}

static void
idgen_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(idgen_shmem_size(true));
	RequestNamedLWLockTranche("idgen", 1);
	for (int i = 0; i < nareas; i++)
		if (area_nlocks(areas[i]) > 0)
			RequestNamedLWLockTranche(areas[i]->name, area_nlocks(areas[i]));
}

static void
idgen_shmem_startup(void)
{
	bool		found;
	char	   *base;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);

	base = ShmemInitStruct("idgen", core_size(), &found);
	base = (char *) TYPEALIGN(PG_CACHE_LINE_SIZE, base);
	idgen_shared = (IdgenShared *) base;

	if (!found)
	{
		IdgenShared *s = idgen_shared;

		pg_atomic_init_u64(&s->clock_seen_ms.value, 0);
		s->lock = &(GetNamedLWLockTranche("idgen"))[0].lock;
		s->ngenes = idgen_ngenes();
		s->nslots = idgen_nslots();
		s->stats_reset = GetCurrentTimestamp();
		memset(s->stats_base, 0, sizeof(s->stats_base));
		s->genes = (pg_atomic_uint64 *) (base + header_size());
		s->slots = (IdgenStatsSlot *) (base + header_size() + genes_size());

		/* The areas' startup sets these (horizon.c, identity.c). */
		pg_atomic_init_u64(&s->horizon.value, 0);
		pg_atomic_init_u64(&s->takeover.value, 0);
		s->takeover_cause = 0;
		s->fenced = false;
		pg_atomic_init_u64(&s->keeper_latch, 0);
		pg_atomic_init_u64(&s->uuid7_tick.value, 0);
		for (int g = 0; g < s->ngenes; g++)
			pg_atomic_init_u64(&s->genes[g], 0);
		pg_atomic_init_u64(&s->lease.f.word, 0);
		pg_atomic_init_u64(&s->lease.f.gen, 0);
		s->identity_leased = false;
		pg_atomic_init_u32(&s->clashed, 0);

		for (int i = 0; i < s->nslots; i++)
			for (int k = 0; k < IDGEN_NUM_KINDS; k++)
				for (int c = 0; c < IDGEN_NUM_COUNTERS; c++)
					pg_atomic_init_u64(&s->slots[i].counters[k][c], 0);
	}

	for (int i = 0; i < nareas; i++)
	{
		const IdgenShmemArea *area = areas[i];
		char	   *ptr = ShmemInitStruct(area->name, area_size(area), &found);
		LWLockPadded *locks = NULL;

		if (!found && area_nlocks(area) > 0)
			locks = GetNamedLWLockTranche(area->name);
		area->startup((void *) TYPEALIGN(PG_CACHE_LINE_SIZE, ptr), found, locks);
	}

	LWLockRelease(AddinShmemInitLock);
}

/*
 * Install the hooks; called from _PG_init in the postmaster only.
 */
void
idgen_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = idgen_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = idgen_shmem_startup;
}

/*
 * The context of a setting fixed at server start.  A library loaded later
 * than shared_preload_libraries may not define PGC_POSTMASTER settings;
 * there such a setting is PGC_SIGHUP, still read only from the
 * configuration file (never SET in a session), and serves only the
 * functions that read IDs, since nothing is generated without shared
 * memory.
 */
GucContext
idgen_startup_context(void)
{
	return process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP;
}

/*
 * Fail unless the shared-memory segment exists.
 */
void
idgen_require_shmem(const char *funcname)
{
	if (likely(idgen_shared != NULL))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s() requires idgen to be loaded via shared_preload_libraries",
					funcname),
			 errdetail("The generator's state lives in shared memory, which is set up only at server start."),
			 errhint("Add 'idgen' to shared_preload_libraries in postgresql.conf and restart the server.")));
}
