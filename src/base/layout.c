/*-------------------------------------------------------------------------
 *
 * layout.c
 *	  The Snowflake bit layout, and the SQL functions that only read IDs.
 *
 * An ID is a non-negative bigint:
 *
 *	  bit 63      sign, always 0
 *	  then        timestamp   milliseconds since idgen.epoch
 *	              datacenter  idgen.datacenter_id
 *	              worker      idgen.worker_id
 *	              sequence    counter within one millisecond and gene
 *	  bits 0..    gene        shard carried from a parent ID
 *
 * The layout is validated once, when the library is loaded.  An invalid
 * layout is not fatal: the server starts, the problem is logged, and every
 * function that needs the layout raises the same error (see
 * idgen_layout_check), so nothing is ever generated or decoded with a
 * layout other than the one configured.
 *
 * Fields are packed with explicit shifts and masks, never C bit-fields, so
 * the layout is the same on every compiler and platform.
 *
 * idgen_gene(value, bits) reads only its arguments; the other readers
 * depend on the layout too, which cannot change while the server runs, so
 * they are declared IMMUTABLE.  Index and partition expressions should spell
 * the bits out (idgen_gene(id, 4)) so that a later layout change cannot
 * re-route stored rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_interval.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"

PG_FUNCTION_INFO_V1(idgen_gene);
PG_FUNCTION_INFO_V1(idgen_snowflake_decode);
PG_FUNCTION_INFO_V1(idgen_snowflake_time);
PG_FUNCTION_INFO_V1(idgen_snowflake_min);
PG_FUNCTION_INFO_V1(idgen_snowflake_compose);
PG_FUNCTION_INFO_V1(idgen_snowflake_debug);

IdgenLayout idgen_layout;

/*
 * Settings, all fixed at server start (idgen_startup_context): the
 * generator's ordering guarantees hold only while the layout stays the
 * same.  Their accepted ranges are deliberately wide (any int): a value
 * outside a setting's own range would be replaced by the default with no
 * more than a WARNING, and a server silently generating with a layout or
 * worker id other than the configured one is exactly the failure an ID
 * generator must not have.  idgen_layout_compute rejects such a value
 * instead; it is reported at start, and nothing is generated.
 */
static char *idgen_epoch_string = NULL;
static int	idgen_timestamp_bits = 41;
static int	idgen_datacenter_bits = 5;
static int	idgen_worker_bits = 5;
static int	idgen_sequence_bits = 12;
static int	idgen_gene_bits = 0;
static int	idgen_datacenter_id = 0;
static int	idgen_worker_id = 0;

static inline uint64
low_mask(int bits)
{
	return bits >= 64 ? PG_UINT64_MAX : (((uint64) 1) << bits) - 1;
}

/*
 * Parse idgen.epoch without throwing: this runs in the postmaster, where an
 * ERROR would stop the server, and a bad epoch must only disable generation.
 */
static bool
parse_epoch(const char *str, TimestampTz *result)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	int			tz;
	fsec_t		fsec;
	struct pg_tm tt;

	if (str == NULL || strlen(str) >= MAXDATELEN)
		return false;
	if (ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0)
		return false;
	if (idgen_decode_datetime(field, ftype, nf, &dtype, &tt, &fsec, &tz) != 0)
		return false;
	if (dtype != DTK_DATE)
		return false;			/* 'infinity', 'epoch' and the like */
	return tm2timestamp(&tt, fsec, &tz, result) == 0;
}

static void
define_layout_int(const char *name, const char *desc, int *var, int boot,
				  GucIntCheckHook check)
{
	DefineCustomIntVariable(name, desc, NULL, var, boot, INT_MIN, INT_MAX,
							idgen_startup_context(), 0, check, NULL, NULL);
}

/*
 * Whether idgen.datacenter_id or idgen.worker_id was set anywhere (file,
 * ALTER SYSTEM, command line), even to 0: a check hook sees each value's
 * source, the boot value's being PGC_S_DEFAULT.
 */
static bool identity_set = false;

static bool
note_identity_source(int *newval, void **extra, GucSource source)
{
	if (source > PGC_S_DEFAULT)
		identity_set = true;
	return true;
}

/*
 * At server start (the postmaster, once): warn when this server generates
 * under identity 0:0 only because nothing was set, as every server that
 * nobody configured does, so that two such servers make the same IDs.  A
 * server whose identity a registry checks or gives is not warned (the
 * caller knows), nor one whose layout has no identity bits.
 */
void
idgen_layout_warn_default_identity(void)
{
	const IdgenLayout *l = &idgen_layout;

	if (!l->valid || identity_set || l->datacenter_bits + l->worker_bits == 0)
		return;
	ereport(WARNING,
			(errmsg("idgen generates Snowflake IDs under the default identity (datacenter 0, worker 0)"),
			 errdetail("Neither \"idgen.datacenter_id\" nor \"idgen.worker_id\" is set, and no registry is configured: "
					   "any other server left at the default makes the same IDs."),
			 errhint("Give each server its own \"idgen.datacenter_id\" and \"idgen.worker_id\" "
					 "(setting them, even to 0, silences this warning), or set \"idgen.registry\" "
					 "to have the identity checked or given by a registry.")));
}

/*
 * Define the layout settings and compute the layout; when preloading,
 * report a layout that is invalid or near its end in the server log.
 */
void
idgen_layout_init(void)
{
	DefineCustomStringVariable("idgen.epoch",
							   "Sets the time zero of the Snowflake timestamp field.",
							   "Changing it changes the meaning of every existing ID.",
							   &idgen_epoch_string,
							   "2024-01-01 00:00:00+00",
							   idgen_startup_context(), 0, NULL, NULL, NULL);
	define_layout_int("idgen.timestamp_bits",
					  "Sets the width of the Snowflake timestamp field (milliseconds since \"idgen.epoch\").",
					  &idgen_timestamp_bits, 41, NULL);
	define_layout_int("idgen.datacenter_bits",
					  "Sets the width of the Snowflake datacenter id field.",
					  &idgen_datacenter_bits, 5, NULL);
	define_layout_int("idgen.worker_bits",
					  "Sets the width of the Snowflake worker id field.",
					  &idgen_worker_bits, 5, NULL);
	define_layout_int("idgen.sequence_bits",
					  "Sets the width of the Snowflake sequence field (IDs per millisecond per gene).",
					  &idgen_sequence_bits, 12, NULL);
	define_layout_int("idgen.gene_bits",
					  "Sets the width of the Snowflake gene field (low bits that carry a shard).",
					  &idgen_gene_bits, 0, NULL);
	define_layout_int("idgen.datacenter_id",
					  "Sets this server's datacenter id; distinct per server in a cluster.",
					  &idgen_datacenter_id, 0, note_identity_source);
	define_layout_int("idgen.worker_id",
					  "Sets this server's worker id; distinct per server in a cluster.",
					  &idgen_worker_id, 0, note_identity_source);

	idgen_layout_compute(&idgen_layout, GetCurrentTimestamp());
	/* An invalid layout still gets one word so the segment is well formed. */
	idgen_shmem_set_ngenes(idgen_layout.valid ? (1 << idgen_layout.gene_bits) : 1);
	if (process_shared_preload_libraries_in_progress)
		idgen_layout_report(WARNING);
}

#define LAYOUT_ERROR(...) \
	do { snprintf(l->error, sizeof(l->error), __VA_ARGS__); return false; } while (0)

/*
 * Check the settings' field widths and identity; false, with the reason in
 * l->error, if they do not make a layout.
 */
static bool
layout_check_fields(IdgenLayout *l)
{
	int64		sum;


	if (l->timestamp_bits < 1 || l->timestamp_bits > 63)
		LAYOUT_ERROR("\"idgen.timestamp_bits\" is %d, but must be between 1 and 63.",
					 l->timestamp_bits);
	if (l->datacenter_bits < 0 || l->datacenter_bits > 31)
		LAYOUT_ERROR("\"idgen.datacenter_bits\" is %d, but must be between 0 and 31.",
					 l->datacenter_bits);
	if (l->worker_bits < 0 || l->worker_bits > 31)
		LAYOUT_ERROR("\"idgen.worker_bits\" is %d, but must be between 0 and 31.",
					 l->worker_bits);
	if (l->sequence_bits < 0 || l->sequence_bits > 31)
		LAYOUT_ERROR("\"idgen.sequence_bits\" is %d, but must be between 0 and 31.",
					 l->sequence_bits);
	if (l->gene_bits < 0 || l->gene_bits > IDGEN_MAX_GENE_BITS)
		LAYOUT_ERROR("\"idgen.gene_bits\" is %d, but must be between 0 and %d.",
					 l->gene_bits, IDGEN_MAX_GENE_BITS);

	sum = (int64) l->timestamp_bits + l->datacenter_bits + l->worker_bits +
		l->sequence_bits + l->gene_bits;
	if (sum != 63)
		LAYOUT_ERROR("The field widths (timestamp %d + datacenter %d + worker %d + sequence %d + gene %d) sum to "
					 INT64_FORMAT ", but must sum to 63.",
					 l->timestamp_bits, l->datacenter_bits, l->worker_bits,
					 l->sequence_bits, l->gene_bits, sum);

	if (l->datacenter_id < 0 || (uint64) l->datacenter_id > low_mask(l->datacenter_bits))
		LAYOUT_ERROR("\"idgen.datacenter_id\" is %d, but %d datacenter bits hold 0 to " UINT64_FORMAT ".",
					 l->datacenter_id, l->datacenter_bits, low_mask(l->datacenter_bits));
	if (l->worker_id < 0 || (uint64) l->worker_id > low_mask(l->worker_bits))
		LAYOUT_ERROR("\"idgen.worker_id\" is %d, but %d worker bits hold 0 to " UINT64_FORMAT ".",
					 l->worker_id, l->worker_bits, low_mask(l->worker_bits));
	return true;
}

/*
 * Compute and validate the layout from the settings.  'now' is the time the
 * epoch and the timestamp field's lifetime are checked against.
 */
static bool
layout_compute(IdgenLayout *l, TimestampTz now)
{
	memset(l, 0, sizeof(*l));
	l->timestamp_bits = idgen_timestamp_bits;
	l->datacenter_bits = idgen_datacenter_bits;
	l->worker_bits = idgen_worker_bits;
	l->sequence_bits = idgen_sequence_bits;
	l->gene_bits = idgen_gene_bits;
	l->datacenter_id = idgen_datacenter_id;
	l->worker_id = idgen_worker_id;
	l->valid = false;
	if (!layout_check_fields(l))
		return false;

	if (!parse_epoch(idgen_epoch_string, &l->epoch))
		LAYOUT_ERROR("\"idgen.epoch\" is \"%s\", which is not a valid timestamp with time zone.",
					 idgen_epoch_string ? idgen_epoch_string : "");
	if (l->epoch > now)
		LAYOUT_ERROR("\"idgen.epoch\" is \"%s\", which is in the future.", idgen_epoch_string);

	l->gene_shift = 0;
	l->sequence_shift = l->gene_bits;
	l->worker_shift = l->sequence_shift + l->sequence_bits;
	l->datacenter_shift = l->worker_shift + l->worker_bits;
	l->timestamp_shift = l->datacenter_shift + l->datacenter_bits;
	l->timestamp_max = low_mask(l->timestamp_bits);
	l->sequence_mask = low_mask(l->sequence_bits);
	l->gene_mask = low_mask(l->gene_bits);
	l->identity = idgen_identity_encode(l, l->datacenter_id, l->worker_id);

	/*
	 * The field holds milliseconds 0 .. timestamp_max; the first instant it
	 * cannot encode is epoch + (timestamp_max + 1) ms, or past the end of
	 * PostgreSQL's timestamp range.
	 */
	if (l->timestamp_max >= (uint64) (END_TIMESTAMP - l->epoch) / 1000)
		l->end_of_time = DT_NOEND;
	else
		l->end_of_time = l->epoch + (TimestampTz) (l->timestamp_max + 1) * 1000;
	if (l->end_of_time <= now)
		LAYOUT_ERROR("The %d-bit timestamp field counted from \"idgen.epoch\" (%s) ran out at %s.",
					 l->timestamp_bits, idgen_epoch_string,
					 timestamptz_to_str(l->end_of_time));
	return true;
}

#undef LAYOUT_ERROR

/* The same, for callers: l->valid says whether it is a layout. */
void
idgen_layout_compute(IdgenLayout *l, TimestampTz now)
{
	l->valid = layout_compute(l, now);
}

/*
 * Log the layout's state at server start: why it is invalid, or that the
 * timestamp field is close to running out.
 */
void
idgen_layout_report(int elevel)
{
	IdgenLayout *l = &idgen_layout;

	if (!l->valid)
	{
		ereport(elevel,
				(errmsg("invalid Snowflake layout, idgen will not generate Snowflake IDs"),
				 errdetail_internal("%s", l->error),
				 errhint("Correct the idgen settings in postgresql.conf and restart the server.")));
		return;
	}
	if (l->end_of_time != DT_NOEND &&
		l->end_of_time - GetCurrentTimestamp() <
		(TimestampTz) IDGEN_LIFETIME_WARN_YEARS * DAYS_PER_YEAR * USECS_PER_DAY)
		ereport(elevel,
				(errmsg("the Snowflake timestamp field runs out at %s, in fewer than %d years",
						timestamptz_to_str(l->end_of_time), IDGEN_LIFETIME_WARN_YEARS),
				 errdetail("\"idgen.timestamp_bits\" is %d and \"idgen.epoch\" is \"%s\".",
						   l->timestamp_bits, idgen_epoch_string),
				 errhint("Plan a layout with more timestamp bits or a later epoch; IDs cannot be generated after that date.")));
}

/*
 * Raise the layout error if the layout is invalid.  Called by every function
 * that needs the layout.
 */
void
idgen_layout_check(void)
{
	if (likely(idgen_layout.valid))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("invalid Snowflake layout"),
			 errdetail_internal("%s", idgen_layout.error),
			 errhint("Correct the idgen settings in postgresql.conf and restart the server.")));
}

/*
 * The layout's fingerprint: what two servers must have alike to share a
 * registry (identities from it must fit, and equal IDs must never come from
 * different identities), as the text "timestamp datacenter worker sequence
 * gene epoch", bits and the epoch in Unix milliseconds.  The registry
 * process compares this server's with the registry's, which
 * idgen_layout_fingerprint_sql computes from the registry's idgen_info():
 * both are written here, so a field added to one is added to the other.
 */
void
idgen_layout_fingerprint(const IdgenLayout *l, char *buf, size_t len)
{
	snprintf(buf, len, "%d %d %d %d %d " INT64_FORMAT,
			 l->timestamp_bits, l->datacenter_bits, l->worker_bits, l->sequence_bits,
			 l->gene_bits, idgen_floor_div(l->epoch - IDGEN_UNIX_EPOCH, 1000));
}

/* The fingerprint as an expression over the columns of idgen_info(). */
const char *const idgen_layout_fingerprint_sql =
"pg_catalog.format('%s %s %s %s %s %s', timestamp_bits, datacenter_bits, worker_bits, "
"sequence_bits, gene_bits, pg_catalog.floor(EXTRACT(EPOCH FROM epoch) OPERATOR(pg_catalog.*) 1000)::bigint)";

/*
 * Build an ID from a generator tick ((millisecond << sequence_bits) |
 * sequence) and a gene.  Increasing ticks give increasing IDs for one gene.
 */
int64
idgen_compose(const IdgenLayout *l, uint64 tick, uint32 gene)
{
	return idgen_compose_identity(l, tick, gene, l->identity);
}

/* ----------
 * The identity codec: the datacenter and worker fields of an ID, and the
 * lease word (identity.c) that packs a lease as an ID would:
 * (valid-until millisecond << timestamp_shift) | identity fields.
 * ----------
 */

/* The datacenter and worker fields, in place (the ids must fit). */
uint64
idgen_identity_encode(const IdgenLayout *l, int datacenter_id, int worker_id)
{
	Assert(datacenter_id >= 0 && (uint64) datacenter_id <= low_mask(l->datacenter_bits));
	Assert(worker_id >= 0 && (uint64) worker_id <= low_mask(l->worker_bits));
	return ((uint64) datacenter_id << l->datacenter_shift) |
		((uint64) worker_id << l->worker_shift);
}

/* The datacenter and worker ids of an ID, or of a lease word. */
void
idgen_identity_decode(const IdgenLayout *l, uint64 id, int *datacenter_id, int *worker_id)
{
	*datacenter_id = (int) ((id >> l->datacenter_shift) & low_mask(l->datacenter_bits));
	*worker_id = (int) ((id >> l->worker_shift) & low_mask(l->worker_bits));
}

/*
 * An identity as one number, (datacenter_id << worker_bits) | worker_id:
 * the id of its row in idgen_worker_lease (lease.c), and back.
 */
int64
idgen_identity_number(const IdgenLayout *l, int datacenter_id, int worker_id)
{
	return ((int64) datacenter_id << l->worker_bits) | worker_id;
}

void
idgen_identity_of_number(const IdgenLayout *l, int64 number, int *datacenter_id, int *worker_id)
{
	*datacenter_id = (int) (number >> l->worker_bits);
	*worker_id = (int) (number & (int64) low_mask(l->worker_bits));
}

/*
 * The lease word of an identity valid until 'until' (local time): 0, no
 * lease, if that is not after the epoch; a bound past the timestamp field
 * is its last millisecond.
 */
uint64
idgen_lease_word(const IdgenLayout *l, TimestampTz until, int datacenter_id, int worker_id)
{
	int64		ms = (until - l->epoch) / 1000;

	if (ms <= 0)
		return 0;
	if ((uint64) ms > l->timestamp_max)
		ms = (int64) l->timestamp_max;
	return ((uint64) ms << l->timestamp_shift) |
		idgen_identity_encode(l, datacenter_id, worker_id);
}

/* Whether lease word 'w' covers a tick of millisecond 'ms'. */
bool
idgen_lease_word_covers(const IdgenLayout *l, uint64 w, uint64 ms)
{
	return ms < (w >> l->timestamp_shift);
}

/* The identity fields of lease word 'w', in place. */
uint64
idgen_lease_word_identity(const IdgenLayout *l, uint64 w)
{
	return w & ~(l->timestamp_max << l->timestamp_shift);
}

/* The same with 'identity' (datacenter and worker fields, in place). */
int64
idgen_compose_identity(const IdgenLayout *l, uint64 tick, uint32 gene, uint64 identity)
{
	uint64		ms = tick >> l->sequence_bits;
	uint64		seq = tick & l->sequence_mask;

	return (int64) ((ms << l->timestamp_shift) | identity |
					(seq << l->sequence_shift) | (uint64) gene);
}

static uint64
check_id(int64 id)
{
	idgen_layout_check();
	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("Snowflake ID " INT64_FORMAT " is negative", id),
				 errdetail("Snowflake IDs have the sign bit clear.")));
	return (uint64) id;
}

static TimestampTz
id_timestamp(uint64 id)
{
	const IdgenLayout *l = &idgen_layout;
	uint64		ms = id >> l->timestamp_shift;

	if (l->end_of_time == DT_NOEND &&
		ms >= (uint64) (END_TIMESTAMP - l->epoch) / 1000)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp of Snowflake ID " UINT64_FORMAT " is out of range", id)));
	return l->epoch + (TimestampTz) ms * 1000;
}

/*
 * idgen_gene(value bigint [, bits bigint]) returns int
 *		The low 'bits' bits of any value (default idgen.gene_bits).
 */
Datum
idgen_gene(PG_FUNCTION_ARGS)
{
	int64		value = PG_GETARG_INT64(0);
	int64		bits;

	if (PG_NARGS() > 1)
		bits = PG_GETARG_INT64(1);
	else
	{
		idgen_layout_check();
		bits = idgen_layout.gene_bits;
	}

	if (bits < 0 || bits > 31)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("gene width " INT64_FORMAT " is out of range", bits),
				 errdetail("A gene is between 0 and 31 bits wide."),
				 errhint("Pass the number of gene bits the IDs were generated with, for example idgen_gene(id, 4).")));

	PG_RETURN_INT32((int32) ((uint64) value & low_mask(bits)));
}

/*
 * idgen_snowflake_decode(id) returns (ts, datacenter_id, worker_id,
 * sequence, gene)
 */
Datum
idgen_snowflake_decode(PG_FUNCTION_ARGS)
{
	uint64		id = check_id(PG_GETARG_INT64(0));
	const IdgenLayout *l = &idgen_layout;
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	int			dc;
	int			worker;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	idgen_identity_decode(l, id, &dc, &worker);
	values[0] = TimestampTzGetDatum(id_timestamp(id));
	values[1] = Int32GetDatum((int32) dc);
	values[2] = Int32GetDatum((int32) worker);
	values[3] = Int32GetDatum((int32) ((id >> l->sequence_shift) & l->sequence_mask));
	values[4] = Int32GetDatum((int32) (id & l->gene_mask));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

/*
 * idgen_snowflake_time(id) returns timestamptz
 */
Datum
idgen_snowflake_time(PG_FUNCTION_ARGS)
{
	uint64		id = check_id(PG_GETARG_INT64(0));

	PG_RETURN_TIMESTAMPTZ(id_timestamp(id));
}

/*
 * The smallest ID any generator can produce at 'ts', truncated to the
 * millisecond.  Before the epoch that is 0 (every ID is at or after such a
 * time); past the end of the timestamp field there is none.
 */
int64
idgen_snowflake_min_at(TimestampTz ts)
{
	const IdgenLayout *l = &idgen_layout;
	int64		ms;

	idgen_layout_check();
	if (TIMESTAMP_IS_NOBEGIN(ts) || ts < l->epoch)
		return 0;
	if (TIMESTAMP_NOT_FINITE(ts) || ts >= l->end_of_time)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp \"%s\" is past the end of the Snowflake timestamp field",
						timestamptz_to_str(ts)),
				 errdetail("The %d-bit field counted from \"idgen.epoch\" ends at %s.",
						   l->timestamp_bits, timestamptz_to_str(l->end_of_time))));

	ms = (ts - l->epoch) / 1000;
	return (int64) ((uint64) ms << l->timestamp_shift);
}

/*
 * idgen_snowflake_min(ts) returns bigint
 */
Datum
idgen_snowflake_min(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(idgen_snowflake_min_at(PG_GETARG_TIMESTAMPTZ(0)));
}

/* Refuse a field value that does not fit its width in the layout. */
static uint64
check_field(const char *field, int64 value, int bits)
{
	if (value < 0 || (uint64) value > low_mask(bits))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s " INT64_FORMAT " is out of range for the Snowflake layout", field, value),
				 errdetail("The layout's %d-bit %s field holds 0 to " UINT64_FORMAT ".",
						   bits, field, low_mask(bits))));
	return (uint64) value;
}

/*
 * idgen_snowflake_compose(ts, datacenter_id, worker_id, sequence, gene)
 * returns bigint
 *		The Snowflake ID with those fields in this server's layout: the
 *		inverse of idgen_snowflake_decode.  'ts' is truncated to the
 *		millisecond.  Every field is checked against its width; 'ts' must
 *		lie from the epoch to the end of the timestamp field.  Composing
 *		reserves nothing: only the generator that holds an identity may
 *		issue IDs under it.
 */
Datum
idgen_snowflake_compose(PG_FUNCTION_ARGS)
{
	TimestampTz ts = PG_GETARG_TIMESTAMPTZ(0);
	const IdgenLayout *l = &idgen_layout;
	uint64		dc;
	uint64		worker;
	uint64		seq;
	uint64		gene;
	uint64		ms;

	idgen_layout_check();
	dc = check_field("datacenter id", PG_GETARG_INT64(1), l->datacenter_bits);
	worker = check_field("worker id", PG_GETARG_INT64(2), l->worker_bits);
	seq = check_field("sequence", PG_GETARG_INT64(3), l->sequence_bits);
	gene = check_field("gene", PG_GETARG_INT64(4), l->gene_bits);
	if (TIMESTAMP_NOT_FINITE(ts) || ts < l->epoch || ts >= l->end_of_time)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp \"%s\" is outside the Snowflake timestamp field",
						timestamptz_to_str(ts)),
				 errdetail("The %d-bit field counted from \"idgen.epoch\" holds %s up to, not including, %s.",
						   l->timestamp_bits, idgen_time_text(l->epoch),
						   l->end_of_time == DT_NOEND ? "infinity" : idgen_time_text(l->end_of_time))));

	ms = (uint64) ((ts - l->epoch) / 1000);
	PG_RETURN_INT64((int64) ((ms << l->timestamp_shift) |
							 idgen_identity_encode(l, (int) dc, (int) worker) |
							 (seq << l->sequence_shift) | gene));
}

/* Append 'bits' bits of 'value' as binary digits, most significant first. */
static void
append_bits(StringInfo buf, uint64 value, int bits)
{
	for (int i = bits - 1; i >= 0; i--)
		appendStringInfoChar(buf, ((value >> i) & 1) ? '1' : '0');
}

/*
 * idgen_snowflake_debug(id) returns text
 *		The ID's bits split into its fields, each with its value, e.g.
 *		0|<41 timestamp bits>|00001|00010|000000000001 ts=... dc=1 ...
 */
Datum
idgen_snowflake_debug(PG_FUNCTION_ARGS)
{
	uint64		id = check_id(PG_GETARG_INT64(0));
	const IdgenLayout *l = &idgen_layout;
	uint64		ms = id >> l->timestamp_shift;
	int			dc;
	int			worker;
	uint64		seq = (id >> l->sequence_shift) & l->sequence_mask;
	uint64		gene = id & l->gene_mask;
	StringInfoData buf;

	idgen_identity_decode(l, id, &dc, &worker);

	initStringInfo(&buf);
	appendStringInfoString(&buf, "0|");
	append_bits(&buf, ms, l->timestamp_bits);
	appendStringInfoChar(&buf, '|');
	append_bits(&buf, (uint64) dc, l->datacenter_bits);
	appendStringInfoChar(&buf, '|');
	append_bits(&buf, (uint64) worker, l->worker_bits);
	appendStringInfoChar(&buf, '|');
	append_bits(&buf, seq, l->sequence_bits);
	appendStringInfoChar(&buf, '|');
	append_bits(&buf, gene, l->gene_bits);
	appendStringInfo(&buf,
					 " timestamp=" UINT64_FORMAT " (%s) datacenter=%d"
					 " worker=%d sequence=" UINT64_FORMAT " gene=" UINT64_FORMAT,
					 ms, timestamptz_to_str(id_timestamp(id)), dc, worker, seq, gene);

	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}
