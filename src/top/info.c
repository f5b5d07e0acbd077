/*-------------------------------------------------------------------------
 *
 * info.c
 *	  idgen_info(): one row that describes every area: the layout and the
 *	  clock policy, the keeper and the durable horizon, what WAL replay
 *	  learnt, the databases' sequencers, and another server's claim to this
 *	  identity.  It reads each area's state (under that area's lock, as its
 *	  file states), so it sits in the top layer; one function per area.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/spin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_clock.h"
#include "idgen_horizon.h"
#include "idgen_layout.h"
#include "idgen_seq.h"
#include "idgen_shmem.h"

PG_FUNCTION_INFO_V1(idgen_info);

/*
 * idgen_info()'s columns (the extension script's OUT parameters), in order:
 * all that this library fills, and those of each released script.  The
 * released script of 1.0.0 binds the symbol idgen_info to its 39 columns
 * for ever: a column added later is appended (after the areas' columns
 * below), and the script of its version binds a symbol of its own that
 * returns them all (docs/development.md, "Releasing").
 */
#define INFO_COLUMNS_1_0_0	39
#define INFO_COLUMNS		INFO_COLUMNS_1_0_0

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
		char	   *name = get_database_name(dbids[j]); /* NULL: dropped since */

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

/* The layout, this server's settings and capacity (preloaded or not). */
static int
info_layout(Datum *values, bool *nulls, int i)
{
	const IdgenLayout *l = &idgen_layout;

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
		values[i++] = Int32GetDatum(1 << l->gene_bits); /* genes */
		values[i++] = Int64GetDatum(per_ms * 1000); /* ids_per_second_per_gene */
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
	return i;
}

/* The keeper and the durable horizon (horizon.c, keeper.c). */
static int
info_keeper(Datum *values, bool *nulls, int i)
{
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
			values[i++] = TimestampTzGetDatum(horizon); /* horizon */
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
	return i;
}

/* What WAL replay learnt (horizon_wal.c). */
static int
info_replay(Datum *values, bool *nulls, int i)
{
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
		values[i++] = Int64GetDatum((int64) r.records); /* wal_records */
		if (r.lifted_at != 0)
		{
			values[i++] = TimestampTzGetDatum(r.lifted_at); /* recovery_ended_at */
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
	return i;
}

/* The databases' idgen sequencers (seq_slots.c). */
static int
info_sequencers(Datum *values, bool *nulls, int i)
{
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
	return i;
}

/* Another server claiming this identity (active.c). */
static int
info_clash(Datum *values, bool *nulls, int i)
{
	{
		char	   *clash = idgen_identity_clash_text();

		if (clash != NULL)
			values[i++] = CStringGetTextDatum(clash);	/* identity_clash */
		else
			nulls[i++] = true;
	}
	return i;
}

/*
 * idgen_info() returns one row: the effective layout, this server's
 * identity, capacity, and when the timestamp field runs out, then each
 * area's state.  Works without preloading (then it describes the settings
 * this backend sees).  'ncolumns' is the number of columns of the script
 * whose symbol was called: the first 'ncolumns' of those filled.
 */
static Datum
info_row(FunctionCallInfo fcinfo, int ncolumns)
{
	TupleDesc	tupdesc;
	Datum		values[INFO_COLUMNS];
	bool		nulls[INFO_COLUMNS] = {0};
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != ncolumns)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the extension's idgen_info() has %d columns, this library's %d",
						tupdesc->natts, ncolumns),
				 errhint("The extension's SQL and its library differ: make them the same version (ALTER EXTENSION idgen UPDATE, or the library of the extension's version).")));

	i = info_layout(values, nulls, i);
	i = info_keeper(values, nulls, i);
	i = info_replay(values, nulls, i);
	i = info_sequencers(values, nulls, i);
	i = info_clash(values, nulls, i);

	Assert(i == lengthof(values) && ncolumns <= i);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

/* The columns of 1.0.0's script (see "idgen_info()'s columns"). */
Datum
idgen_info(PG_FUNCTION_ARGS)
{
	return info_row(fcinfo, INFO_COLUMNS_1_0_0);
}
