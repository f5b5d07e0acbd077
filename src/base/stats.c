/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  The generators' counters: idgen_count, idgen_stats and
 *	  idgen_stats_reset (idgen_info, which reads every area, is in info.c).
 *
 * Counting costs one uncontended atomic read and write on a cache line the
 * calling backend owns (see shmem.c for the protocol), so it can sit on the
 * generator's hot path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_shmem.h"
#include "idgen_stats.h"

PG_FUNCTION_INFO_V1(idgen_stats);
PG_FUNCTION_INFO_V1(idgen_stats_reset);

static const char *const kind_names[IDGEN_NUM_KINDS] = {
	[IDGEN_KIND_SNOWFLAKE] = "snowflake",
	[IDGEN_KIND_UUID7] = "uuid7",
};

/* The slot this process owns, or 0 (shared) when it has no backend number. */
static inline int
my_slot_index(void)
{
	int			n = idgen_my_backend_number();

	return (n > 0 && n < idgen_shared->nslots) ? n : 0;
}

void
idgen_count(IdgenKind kind, IdgenCounter counter, uint64 n)
{
	int			slot;
	pg_atomic_uint64 *c;

	if (idgen_shared == NULL)
		return;
	slot = my_slot_index();
	c = &idgen_shared->slots[slot].counters[kind][counter];
	if (likely(slot != 0))
		pg_atomic_write_u64(c, pg_atomic_read_u64(c) + n);	/* sole writer */
	else
		pg_atomic_fetch_add_u64(c, n);
}

/* Sum one counter over all slots (since server start). */
static uint64
counter_sum(int kind, int counter)
{
	uint64		sum = 0;

	for (int i = 0; i < idgen_shared->nslots; i++)
		sum += pg_atomic_read_u64(&idgen_shared->slots[i].counters[kind][counter]);
	return sum;
}

/*
 * idgen_stats() returns setof (kind, ids, borrowed_ms, clock_backward,
 * waits, wait_time_ms, errors, stats_reset)
 */
Datum
idgen_stats(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	uint64	   *sums;
	int			kind;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext oldcontext;
		TupleDesc	tupdesc;

		idgen_require_shmem("idgen_stats");
		funcctx = SRF_FIRSTCALL_INIT();
		oldcontext = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);

		if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		funcctx->tuple_desc = BlessTupleDesc(tupdesc);

		/* sums[k][c], then the reset time, read under one shared lock */
		sums = palloc(sizeof(uint64) * (IDGEN_NUM_KINDS * IDGEN_NUM_COUNTERS + 1));
		LWLockAcquire(idgen_shared->lock, LW_SHARED);
		for (int k = 0; k < IDGEN_NUM_KINDS; k++)
			for (int c = 0; c < IDGEN_NUM_COUNTERS; c++)
				sums[k * IDGEN_NUM_COUNTERS + c] =
					counter_sum(k, c) - idgen_shared->stats_base[k][c];
		sums[IDGEN_NUM_KINDS * IDGEN_NUM_COUNTERS] = (uint64) idgen_shared->stats_reset;
		LWLockRelease(idgen_shared->lock);

		funcctx->user_fctx = sums;
		funcctx->max_calls = IDGEN_NUM_KINDS;
		MemoryContextSwitchTo(oldcontext);
	}

	funcctx = SRF_PERCALL_SETUP();
	sums = (uint64 *) funcctx->user_fctx;
	kind = (int) funcctx->call_cntr;

	if (kind < IDGEN_NUM_KINDS)
	{
		const uint64 *k = &sums[kind * IDGEN_NUM_COUNTERS];
		Datum		values[8];
		bool		nulls[8] = {0};

		values[0] = CStringGetTextDatum(kind_names[kind]);
		values[1] = Int64GetDatum((int64) k[IDGEN_STAT_IDS]);
		values[2] = Int64GetDatum((int64) k[IDGEN_STAT_BORROWED]);
		values[3] = Int64GetDatum((int64) k[IDGEN_STAT_CLOCK_BACKWARD]);
		values[4] = Int64GetDatum((int64) k[IDGEN_STAT_WAITS]);
		values[5] = Float8GetDatum((double) k[IDGEN_STAT_WAIT_US] / 1000.0);
		values[6] = Int64GetDatum((int64) k[IDGEN_STAT_ERRORS]);
		values[7] = TimestampTzGetDatum((TimestampTz) sums[IDGEN_NUM_KINDS * IDGEN_NUM_COUNTERS]);

		SRF_RETURN_NEXT(funcctx,
						HeapTupleGetDatum(heap_form_tuple(funcctx->tuple_desc,
														  values, nulls)));
	}
	SRF_RETURN_DONE(funcctx);
}

/*
 * idgen_stats_reset() returns void
 *		Counters restart from zero: the current sums become the new base.
 */
Datum
idgen_stats_reset(PG_FUNCTION_ARGS)
{
	idgen_require_shmem("idgen_stats_reset");

	LWLockAcquire(idgen_shared->lock, LW_EXCLUSIVE);
	for (int k = 0; k < IDGEN_NUM_KINDS; k++)
		for (int c = 0; c < IDGEN_NUM_COUNTERS; c++)
			idgen_shared->stats_base[k][c] = counter_sum(k, c);
	idgen_shared->stats_reset = GetCurrentTimestamp();
	LWLockRelease(idgen_shared->lock);

	PG_RETURN_VOID();
}
