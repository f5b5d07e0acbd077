/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Observability: idgen_stats, idgen_stats_reset, idgen_info.
 *
 * Counting costs one uncontended atomic read and write on a cache line the
 * calling backend owns (see shmem.c for the protocol), so it can sit on the
 * generator's hot path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_seq.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_horizon.h"

PG_FUNCTION_INFO_V1(idgen_stats);
PG_FUNCTION_INFO_V1(idgen_stats_reset);
PG_FUNCTION_INFO_V1(idgen_info);

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

/*
 * idgen_info()'s databases_waiting (the names of the databases whose purge
 * waits for a slot, at most IDGEN_MAX_WAITING_SHOWN; NULL if none) and
 * databases_waiting_since, into *since / *since_null.
 */
static Datum
databases_waiting(bool *isnull, Datum *since, bool *since_null)
{
	Oid			dbids[IDGEN_MAX_WAITING_SHOWN];
	Datum		names[IDGEN_MAX_WAITING_SHOWN];
	TimestampTz from;
	int			n = idgen_seq_slot_waiting(dbids, IDGEN_MAX_WAITING_SHOWN, &from);
	int			m = 0;

	for (int j = 0; j < Min(n, IDGEN_MAX_WAITING_SHOWN); j++)
	{
		char	   *name = get_database_name(dbids[j]);	/* NULL: dropped since */

		if (name != NULL)
		{
			Name		nm = (Name) palloc0(NAMEDATALEN);

			namestrcpy(nm, name);
			names[m++] = NameGetDatum(nm);
		}
	}
	*since_null = (n == 0);
	*since = TimestampTzGetDatum(from);
	*isnull = (m == 0);
	if (m == 0)
		return (Datum) 0;
	return PointerGetDatum(construct_array(names, m, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
}

/*
 * idgen_info() returns one row: the effective layout, this server's
 * identity, capacity, and when the timestamp field runs out.  Works without
 * preloading (then it describes the settings this backend sees).
 */
Datum
idgen_info(PG_FUNCTION_ARGS)
{
	const IdgenLayout *l = &idgen_layout;
	TupleDesc	tupdesc;
	Datum		values[39];
	bool		nulls[39] = {0};
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	values[i++] = BoolGetDatum(idgen_shared != NULL);	/* preloaded */
	values[i++] = BoolGetDatum(l->valid);	/* layout_valid */
	if (l->valid)
		nulls[i++] = true;		/* layout_error */
	else
		values[i++] = CStringGetTextDatum(l->error);
	values[i++] = Int32GetDatum(l->timestamp_bits);
	values[i++] = Int32GetDatum(l->datacenter_bits);
	values[i++] = Int32GetDatum(l->worker_bits);
	values[i++] = Int32GetDatum(l->sequence_bits);
	values[i++] = Int32GetDatum(l->gene_bits);
	values[i++] = Int32GetDatum(l->datacenter_id);
	values[i++] = Int32GetDatum(l->worker_id);
	values[i++] = Int32GetDatum(idgen_max_drift_ms);
	values[i++] = Int32GetDatum(idgen_clock_wait_ms);

	if (l->valid)
	{
		int64		per_ms = (int64) 1 << l->sequence_bits;
		TimestampTz now = GetCurrentTimestamp();

		values[i++] = TimestampTzGetDatum(l->epoch);	/* epoch */
		values[i++] = Int32GetDatum(1 << l->gene_bits);	/* genes */
		values[i++] = Int64GetDatum(per_ms * 1000);	/* ids_per_second_per_gene */
		values[i++] = Int64GetDatum((per_ms << l->gene_bits) * 1000);	/* ids_per_second */
		values[i++] = TimestampTzGetDatum(l->end_of_time);	/* timestamp_end */
		if (l->end_of_time == DT_NOEND)
			nulls[i++] = true;
		else
			values[i++] = Float8GetDatum((double) (l->end_of_time - now) /
										 (DAYS_PER_YEAR * USECS_PER_DAY));	/* years_left */
	}
	else
	{
		for (int n = 0; n < 6; n++)
			nulls[i++] = true;
	}

	if (idgen_shared != NULL)
	{
		IdgenKeeperStatus *k = &idgen_horizon_shared->keeper;
		TimestampTz horizon = (TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value);
		IdgenKeeperStatus copy;

		SpinLockAcquire(&k->mutex);
		copy = *k;
		SpinLockRelease(&k->mutex);

		values[i++] = Int64GetDatum((int64) idgen_shmem_size(false));	/* shmem_bytes */
		if (copy.pid != 0)
			values[i++] = Int32GetDatum(copy.pid);	/* keeper_pid */
		else
			nulls[i++] = true;
		values[i++] = BoolGetDatum(idgen_horizon_shared->restored);
		if (horizon != 0)
		{
			values[i++] = TimestampTzGetDatum(horizon);	/* horizon */
			values[i++] = Int64GetDatum((horizon - GetCurrentTimestamp()) / 1000);	/* horizon_lead_ms */
		}
		else
		{
			nulls[i++] = true;
			nulls[i++] = true;
		}
		values[i++] = Int64GetDatum((int64) copy.persists);
		values[i++] = Int64GetDatum((int64) copy.failures);
		if (copy.last_persist != 0)
			values[i++] = TimestampTzGetDatum(copy.last_persist);
		else
			nulls[i++] = true;
	}
	else
	{
		for (int n = 0; n < 8; n++)
			nulls[i++] = true;
	}

	/* What WAL replay learnt (horizon_wal.c). */
	values[i++] = BoolGetDatum(RecoveryInProgress());	/* in_recovery */
	if (idgen_shared != NULL)
	{
		IdgenReplayStatus r;

		SpinLockAcquire(&idgen_horizon_shared->replay.mutex);
		r = idgen_horizon_shared->replay;
		SpinLockRelease(&idgen_horizon_shared->replay.mutex);
		if (r.horizon != 0)
			values[i++] = TimestampTzGetDatum(r.horizon);	/* wal_horizon */
		else
			nulls[i++] = true;
		if (r.known && r.datacenter_id >= 0)
		{
			values[i++] = Int32GetDatum(r.datacenter_id);	/* wal_datacenter_id */
			values[i++] = Int32GetDatum(r.worker_id);	/* wal_worker_id */
		}
		else
		{
			nulls[i++] = true;
			nulls[i++] = true;
		}
		values[i++] = Int64GetDatum((int64) r.records);	/* wal_records */
		if (r.lifted_at != 0)
		{
			values[i++] = TimestampTzGetDatum(r.lifted_at);	/* recovery_ended_at */
			values[i++] = Int64GetDatum(r.lift_lead_ms);	/* recovery_lead_ms */
		}
		else
		{
			nulls[i++] = true;
			nulls[i++] = true;
		}
	}
	else
	{
		for (int n = 0; n < 6; n++)
			nulls[i++] = true;
	}

	/* The databases' idgen sequencers (seq_slots.c). */
	if (idgen_shared != NULL)
	{
		int			running;
		int			max;
		int64		refused;

		idgen_seq_slots_report(&running, &max, &refused);
		values[i++] = Int32GetDatum(running);	/* sequencers */
		values[i++] = Int32GetDatum(max);	/* max_sequencers */
		values[i++] = Int64GetDatum(refused);	/* sequencers_refused */
		values[i] = databases_waiting(&nulls[i], &values[i + 1], &nulls[i + 1]);
		i += 2;					/* databases_waiting, databases_waiting_since */
	}
	else
	{
		for (int n = 0; n < 5; n++)
			nulls[i++] = true;
	}

	/* Another server claiming this identity (active.c). */
	{
		char	   *clash = idgen_identity_clash_text();

		if (clash != NULL)
			values[i++] = CStringGetTextDatum(clash);	/* identity_clash */
		else
			nulls[i++] = true;
	}

	Assert(i == lengthof(values));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}
