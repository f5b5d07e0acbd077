/*-------------------------------------------------------------------------
 *
 * snowflake.c
 *	  The Snowflake generator: one lock-free word per gene in shared memory.
 *
 * State
 *	  For each gene g, shared word genes[g] holds the tick of the last ID
 *	  issued for g, where tick = (millisecond << sequence_bits) | sequence
 *	  and millisecond counts from idgen.epoch.  A tick is a point on one
 *	  number line in units of 1/2^sequence_bits ms, so "the next ID" is
 *	  simply
 *
 *	      next = max(last + 1, now_ms << sequence_bits)
 *
 *	  When a millisecond's sequence is used up, last + 1 carries into the
 *	  next millisecond: that is borrowing, and needs no special case.
 *
 * Clock policy (idgen.max_drift_ms, idgen.clock_wait_ms)
 *	  lead = millisecond(next) - now_ms is how far ahead of the wall clock
 *	  the ID would be.  It is positive after borrowing, or when the clock is
 *	  behind the last ID (it stepped back).
 *	  - lead <= max_drift_ms: issue the ID (continue from the last
 *	    millisecond, borrowing ahead of the clock if needed).
 *	  - otherwise wait until the clock is within max_drift_ms of the ID,
 *	    in slices of at most 10 ms, checking for interrupts;
 *	  - if the wait needed would take the call's total wait past
 *	    clock_wait_ms, fail at once with the clock-back error, which states
 *	    how far the clock is behind the last ID.
 *	  An ID is issued only by a successful compare-and-swap from the value
 *	  the caller computed it from, so it is always greater than every ID of
 *	  its gene issued before, whatever the clock does.
 *
 * Trigger
 *	  A column DEFAULT cannot read another column, so "an order's ID carries
 *	  its user's gene" is done by idgen_snowflake_trigger('id', 'user_id'),
 *	  a BEFORE INSERT row trigger that fills a NULL id column.
 *
 * Spreading
 *	  idgen_snowflake() without a gene walks the genes round-robin from a
 *	  random start in each backend, so root rows spread evenly over shards
 *	  without a shared counter.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#endif

#include "idgen.h"

PG_FUNCTION_INFO_V1(idgen_snowflake);
PG_FUNCTION_INFO_V1(idgen_snowflake_gene);
PG_FUNCTION_INFO_V1(idgen_snowflake_trigger);

/* Longest single sleep while waiting for the clock; interrupts between. */
#define IDGEN_WAIT_SLICE_US		10000

/* This backend's round-robin position for idgen_snowflake(). */
static uint32 spread_next;
static bool spread_started = false;

static inline int64
floor_div(int64 a, int64 b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/*
 * Read the wall clock, counting a reading behind the latest millisecond any
 * backend has seen (see clock_seen_ms in shmem.c).
 */
static TimestampTz
read_clock(IdgenKind kind)
{
	pg_atomic_uint64 *seen_word = &idgen_shared->clock_seen_ms.value;
	uint64		seen = pg_atomic_read_u64(seen_word);
	TimestampTz now;
	uint64		now_ms;

	pg_read_barrier();			/* read 'seen' before the clock */
	now = GetCurrentTimestamp();
	now_ms = (uint64) Max(now, 0) / 1000;
	if (unlikely(now_ms < seen))
		idgen_count(kind, IDGEN_STAT_CLOCK_BACKWARD, 1);
	else if (now_ms > seen)
		(void) pg_atomic_compare_exchange_u64(seen_word, &seen, now_ms);
	return now;
}

static void pg_attribute_noreturn()
clock_behind_error(const IdgenLayout *l, uint64 last_tick, int64 now_ms)
{
	int64		behind = (int64) (last_tick >> l->sequence_bits) - now_ms;

	idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not generate Snowflake ID: the system clock moved backwards by " INT64_FORMAT " ms",
					behind),
			 errdetail("The last ID was issued at %s. Waiting for the clock to come within idgen.max_drift_ms (%d ms) of it would take longer than idgen.clock_wait_ms (%d ms).",
					   timestamptz_to_str(l->epoch + (TimestampTz) (last_tick >> l->sequence_bits) * 1000),
					   idgen_max_drift_ms, idgen_clock_wait_ms),
			 errhint("Check the server's time source. No ID lower than one already issued is ever generated.")));
}

/*
 * Issue the next ID for 'gene'.  See the file header for the policy.
 */
static int64
snowflake_next(uint32 gene)
{
	const IdgenLayout *l = &idgen_layout;
	pg_atomic_uint64 *word = &idgen_shared->genes[gene];
	const int	seq_bits = l->sequence_bits;
	uint64		old = pg_atomic_read_u64(word);
	int64		waited_us = 0;

	for (;;)
	{
		TimestampTz now = read_clock(IDGEN_KIND_SNOWFLAKE);
		int64		now_us = now - l->epoch;
		int64		now_ms = floor_div(now_us, 1000);
		uint64		floor_tick = now_ms > 0 ? ((uint64) now_ms << seq_bits) : 0;
		uint64		next = Max(old + 1, floor_tick);
		int64		next_ms = (int64) (next >> seq_bits);

		if (unlikely(next_ms - now_ms > idgen_max_drift_ms))
		{
			/* Sleep until now_ms >= next_ms - max_drift_ms. */
			int64		need_us = (next_ms - idgen_max_drift_ms) * 1000 - now_us;
			int64		slice_us = Min(need_us, IDGEN_WAIT_SLICE_US);

			if (waited_us + need_us > (int64) idgen_clock_wait_ms * 1000)
				clock_behind_error(l, old, now_ms);

			idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_WAITS, 1);
			idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_WAIT_US, slice_us);
			pgstat_report_wait_start(WAIT_EVENT_PG_SLEEP);
			pg_usleep(slice_us);
			pgstat_report_wait_end();
			waited_us += slice_us;
			CHECK_FOR_INTERRUPTS();
			old = pg_atomic_read_u64(word);
			continue;
		}

		if (unlikely((uint64) next_ms > l->timestamp_max))
		{
			idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the Snowflake timestamp field has run out"),
					 errdetail("The %d-bit field counted from idgen.epoch ended at %s.",
							   l->timestamp_bits, timestamptz_to_str(l->end_of_time)),
					 errhint("Configure a layout with more timestamp bits or a later epoch.")));
		}

		/* On failure 'old' receives the current value; try again from it. */
		if (pg_atomic_compare_exchange_u64(word, &old, next))
		{
			if (next_ms > now_ms && (int64) (old >> seq_bits) < next_ms)
				idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_BORROWED, 1);
			idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_IDS, 1);
			return idgen_compose(l, next, gene);
		}
	}
}

static void
snowflake_prepare(const char *funcname)
{
	idgen_require_shmem(funcname);
	if (unlikely(!idgen_layout.valid))
	{
		idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
		idgen_layout_check();
	}
}

/* The next gene of this backend's round-robin walk. */
static uint32
next_spread_gene(void)
{
	if (unlikely(!spread_started))
	{
#if PG_VERSION_NUM >= 150000
		spread_next = pg_prng_uint32(&pg_global_prng_state);
#else
		spread_next = (uint32) random();
#endif
		spread_started = true;
	}
	return (uint32) (spread_next++ & idgen_layout.gene_mask);
}

/*
 * idgen_snowflake() returns bigint
 *		The next ID; with gene_bits > 0, genes taken round-robin.
 */
Datum
idgen_snowflake(PG_FUNCTION_ARGS)
{
	snowflake_prepare("idgen_snowflake");
	PG_RETURN_INT64(snowflake_next(next_spread_gene()));
}

/*
 * idgen_snowflake(gene bigint) returns bigint
 *		The next ID carrying 'gene' in its low bits.  Not STRICT: a NULL gene
 *		is an error rather than a NULL key.
 */
Datum
idgen_snowflake_gene(PG_FUNCTION_ARGS)
{
	const IdgenLayout *l = &idgen_layout;
	int64		gene;

	snowflake_prepare("idgen_snowflake");

	if (PG_ARGISNULL(0))
	{
		idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("gene must not be null"),
				 errdetail("idgen.gene_bits is %d, so a gene is between 0 and " UINT64_FORMAT ".",
						   l->gene_bits, l->gene_mask),
				 errhint("Use idgen_snowflake() for an ID without a parent.")));
	}

	gene = PG_GETARG_INT64(0);
	if (gene < 0 || (uint64) gene > l->gene_mask)
	{
		idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("gene " INT64_FORMAT " is out of range", gene),
				 errdetail("idgen.gene_bits is %d, so a gene is between 0 and " UINT64_FORMAT ".",
						   l->gene_bits, l->gene_mask),
				 l->gene_bits == 0 ?
				 errhint("IDs carry no gene unless idgen.gene_bits is set above 0.") :
				 errhint("Pass idgen_gene(parent_id, %d) to carry a parent's gene.", l->gene_bits)));
	}

	PG_RETURN_INT64(snowflake_next((uint32) gene));
}

/* Column number of trigger argument 'name' in 'rel', which must be bigint. */
static int
trigger_column(Relation rel, const char *name, bool allow_int4)
{
	int			attnum = SPI_fnumber(RelationGetDescr(rel), name);
	Oid			type;

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						name, RelationGetRelationName(rel)),
				 errhint("The arguments of idgen_snowflake_trigger are the ID column and, optionally, the parent column.")));
	type = SPI_gettypeid(RelationGetDescr(rel), attnum);
	if (type != INT8OID && !(allow_int4 && (type == INT4OID || type == INT2OID)))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of relation \"%s\" has type %s, but idgen_snowflake_trigger needs bigint",
						name, RelationGetRelationName(rel), format_type_be(type))));
	return attnum;
}

/*
 * idgen_snowflake_trigger(id_column [, parent_column]) returns trigger
 *		BEFORE INSERT FOR EACH ROW: when the ID column is NULL, fill it with
 *		idgen_snowflake(), or with idgen_snowflake(idgen_gene(parent)) when a
 *		parent column is named.  An ID given explicitly is kept.
 */
Datum
idgen_snowflake_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	Relation	rel;
	HeapTuple	tuple;
	int			id_attnum;
	bool		isnull;
	uint32		gene;
	Datum		value;
	bool		newnull = false;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idgen_snowflake_trigger() must be called as a trigger")));
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idgen_snowflake_trigger must be fired BEFORE INSERT FOR EACH ROW")));

	trigger = trigdata->tg_trigger;
	rel = trigdata->tg_relation;
	tuple = trigdata->tg_trigtuple;
	if (trigger->tgnargs < 1 || trigger->tgnargs > 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idgen_snowflake_trigger takes 1 or 2 arguments, got %d",
						trigger->tgnargs),
				 errhint("Pass the ID column and, optionally, the parent column: idgen_snowflake_trigger('id', 'user_id').")));

	id_attnum = trigger_column(rel, trigger->tgargs[0], false);
	(void) SPI_getbinval(tuple, RelationGetDescr(rel), id_attnum, &isnull);
	if (!isnull)
		return PointerGetDatum(tuple);

	snowflake_prepare("idgen_snowflake_trigger");
	if (trigger->tgnargs == 2)
	{
		int			parent_attnum = trigger_column(rel, trigger->tgargs[1], true);
		Datum		parent = SPI_getbinval(tuple, RelationGetDescr(rel),
										   parent_attnum, &isnull);
		Oid			type = SPI_gettypeid(RelationGetDescr(rel), parent_attnum);
		int64		pv;

		if (isnull)
		{
			idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("column \"%s\" of relation \"%s\" is null, so there is no gene to carry",
							trigger->tgargs[1], RelationGetRelationName(rel)),
					 errhint("Give the parent before the row is inserted, or give the ID explicitly.")));
		}
		pv = type == INT8OID ? DatumGetInt64(parent) :
			type == INT4OID ? DatumGetInt32(parent) : DatumGetInt16(parent);
		gene = (uint32) ((uint64) pv & idgen_layout.gene_mask);
	}
	else
		gene = next_spread_gene();

	value = Int64GetDatum(snowflake_next(gene));
	tuple = heap_modify_tuple_by_cols(tuple, RelationGetDescr(rel), 1,
									  &id_attnum, &value, &newnull);
	return PointerGetDatum(tuple);
}
