/*-------------------------------------------------------------------------
 *
 * snowflake.c
 *	  The Snowflake generator: one lock-free word per gene in shared memory.
 *
 * State
 *	  For each gene g, shared word genes[g] holds the tick of the last ID
 *	  issued for g: (millisecond << sequence_bits) | sequence, milliseconds
 *	  counted from idgen.epoch.  Ticks and the clock policy are in clock.c;
 *	  this file maps ticks to IDs (layout.c) and provides the SQL entry
 *	  points.  IDs of one gene increase with their ticks.
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

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_clock.h"
#include "idgen_generators.h"
#include "idgen_horizon.h"
#include "idgen_identity.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_stats.h"

PG_FUNCTION_INFO_V1(idgen_snowflake);
PG_FUNCTION_INFO_V1(idgen_snowflake_gene);
PG_FUNCTION_INFO_V1(idgen_snowflake_trigger);
PG_FUNCTION_INFO_V1(idgen_snowflake_last);
PG_FUNCTION_INFO_V1(idgen_snowflake_row);

/*
 * The last ID this process generated (idgen_snowflake_last), as currval()
 * keeps a sequence's: per session, untouched by rollbacks, forgotten by
 * DISCARD ALL and DISCARD SEQUENCES (idgen_snowflake_forget_last).
 */
static int64 last_id;
static bool have_last_id = false;

/* This backend's round-robin position for idgen_snowflake(). */
static uint32 spread_next;
static bool spread_started = false;

/*
 * Issue the next ID for 'gene'.
 */
static int64
snowflake_next(uint32 gene)
{
	const IdgenLayout *l = &idgen_layout;
	IdgenTickClock c = {
		.kind = IDGEN_KIND_SNOWFLAKE,
		.name = "Snowflake",
		.item = "Snowflake ID",
		.epoch = l->epoch,
		.epoch_name = "\"idgen.epoch\"",
		.tick_bits = l->sequence_bits,
		.sub_ms = false,
		.max_ms = l->timestamp_max,
		.field_bits = l->timestamp_bits,
		.end_of_time = l->end_of_time,
	};

	/* a Citus node whose identity no registry checks (identity.c) */
	if (unlikely(idgen_identity_unchecked))
	{
		idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
		idgen_identity_unchecked_error();
	}
	/* another server claimed this identity too (active.c) */
	if (unlikely(pg_atomic_read_u32(&idgen_shared->clashed) != 0))
		idgen_identity_clash_error();
	/* in active-active, not before the other nodes were heard from */
	idgen_active_gate();
	if (unlikely(idgen_shared->identity_leased))
		last_id = idgen_leased_next(&idgen_shared->genes[gene], &c, gene);
	else
		last_id = idgen_compose(l, idgen_next_tick(&idgen_shared->genes[gene], &c), gene);
	have_last_id = true;
	return last_id;
}

/*
 * idgen_snowflake_last() returns bigint
 *		The last Snowflake ID this session generated (idgen_snowflake, in
 *		either form, or the trigger), with currval()'s rules: an error
 *		before the first, kept across rollbacks; lastval() is left alone.
 *		IDs that parallel workers generated for the session's queries are
 *		theirs, not counted.
 */
Datum
idgen_snowflake_last(PG_FUNCTION_ARGS)
{
	if (!have_last_id)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idgen_snowflake_last is not yet defined in this session"),
				 errdetail("This session has not generated a Snowflake ID yet."),
				 errhint("Generate one first (an INSERT with DEFAULT idgen_snowflake()), or take the ID with INSERT ... RETURNING.")));
	PG_RETURN_INT64(last_id);
}

/*
 * Forget the session's last ID, as DISCARD ALL and DISCARD SEQUENCES forget
 * currval() (idgen.c's utility hook): idgen_snowflake_last() is then not
 * yet defined, as in a new session.
 */
void
idgen_snowflake_forget_last(void)
{
	have_last_id = false;
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
	if (unlikely(RecoveryInProgress()))
		idgen_recovery_check(IDGEN_KIND_SNOWFLAKE, "Snowflake ID");
}

/* The next gene of this backend's round-robin walk. */
static uint32
next_spread_gene(void)
{
	if (unlikely(!spread_started))
	{
		spread_next = pg_prng_uint32(&pg_global_prng_state);
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
 * idgen_snowflake_row([bits bigint]) returns (id bigint, gene int)
 *		A root row's ID and its gene in one call, for tables distributed or
 *		partitioned by a gene column that the INSERT must fill: the ID of
 *		idgen_snowflake() (genes round-robin) and idgen_gene(id, bits), bits
 *		defaulting to idgen.gene_bits.  A narrower width groups the genes
 *		(bits 4 of 8: 16 groups of 16); a wider one would name bits that
 *		children's IDs cannot carry, and is refused.
 */
Datum
idgen_snowflake_row(PG_FUNCTION_ARGS)
{
	const IdgenLayout *l = &idgen_layout;
	int64		bits;
	int64		id;
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	snowflake_prepare("idgen_snowflake_row");
	bits = PG_NARGS() > 0 ? PG_GETARG_INT64(0) : l->gene_bits;
	if (bits < 0 || bits > l->gene_bits)
	{
		idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("gene width " INT64_FORMAT " is out of range", bits),
				 errdetail("\"idgen.gene_bits\" is %d: a row's gene is between 0 and that many bits wide, so that its children's IDs can carry it.",
						   l->gene_bits),
				 errhint("Omit the width to take \"idgen.gene_bits\".")));
	}
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	id = snowflake_next(next_spread_gene());
	values[0] = Int64GetDatum(id);
	values[1] = Int32GetDatum((int32) ((uint64) id & ((UINT64CONST(1) << bits) - 1)));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/*
 * The next ID carrying 'gene' in its low bits, for idgen_snowflake(gene):
 * a NULL gene (isnull) or one out of range is an error naming the range.
 */
static int64
snowflake_gene(bool isnull, int64 gene)
{
	const IdgenLayout *l = &idgen_layout;

	snowflake_prepare("idgen_snowflake");

	if (isnull)
	{
		idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("gene must not be null"),
				 errdetail("\"idgen.gene_bits\" is %d, so a gene is between 0 and " UINT64_FORMAT ".",
						   l->gene_bits, l->gene_mask),
				 errhint("Use idgen_snowflake() for an ID without a parent.")));
	}

	if (gene < 0 || (uint64) gene > l->gene_mask)
	{
		idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("gene " INT64_FORMAT " is out of range", gene),
				 errdetail("\"idgen.gene_bits\" is %d, so a gene is between 0 and " UINT64_FORMAT ".",
						   l->gene_bits, l->gene_mask),
				 l->gene_bits == 0 ?
				 errhint("IDs carry no gene unless \"idgen.gene_bits\" is set above 0.") :
				 errhint("Pass idgen_gene(parent_id, %d) to carry a parent's gene.", l->gene_bits)));
	}

	return snowflake_next((uint32) gene);
}

/*
 * idgen_snowflake(gene bigint) returns bigint
 *		The next ID carrying 'gene' in its low bits.  Not STRICT: a NULL gene
 *		is an error rather than a NULL key.
 */
Datum
idgen_snowflake_gene(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(snowflake_gene(PG_ARGISNULL(0),
								   PG_ARGISNULL(0) ? 0 : PG_GETARG_INT64(0)));
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
