/*-------------------------------------------------------------------------
 *
 * uuid7.c
 *	  UUIDv7 (RFC 9562), strictly increasing across the whole server.
 *
 * Layout (RFC 9562 section 5.7), most significant first:
 *
 *	  unix_ts_ms (48) | ver = 0111 (4) | rand_a (12) | var = 10 (2) | rand_b (62)
 *
 * unix_ts_ms and rand_a come from one shared tick, (Unix ms << 12) |
 * rand_a, advanced by clock.c like a Snowflake gene word: rand_a starts each
 * millisecond at the clock's sub-millisecond fraction in 1/4096 ms (section
 * 6.2, method 3) and counts up when calls come faster than the clock, so
 * every UUID this server issues, in any backend or parallel worker, is
 * greater than every UUID it issued before (uuid comparison is bytewise).
 * The same borrowing and clock-back policy applies.
 *
 * rand_b comes from pg_strong_random, drawn in blocks into a buffer private
 * to the backend.  The buffer belongs to the process that filled it: a
 * process whose pid differs (a forked child) refills before use, so no two
 * processes ever hand out the same random bytes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "idgen.h"
#include "idgen_clock.h"
#include "idgen_generators.h"
#include "idgen_horizon.h"
#include "idgen_shmem.h"
#include "idgen_stats.h"

PG_FUNCTION_INFO_V1(idgen_uuid7);
PG_FUNCTION_INFO_V1(idgen_uuid7_at);
PG_FUNCTION_INFO_V1(idgen_uuid7_shifted);
PG_FUNCTION_INFO_V1(idgen_uuid_version);
PG_FUNCTION_INFO_V1(idgen_uuid7_min);
PG_FUNCTION_INFO_V1(idgen_uuid7_time);
PG_FUNCTION_INFO_V1(idgen_uuid7_last);

/*
 * The last UUIDv7 idgen_uuid7() generated in this session; forgotten by
 * DISCARD ALL and DISCARD SEQUENCES (idgen_uuid7_forget_last).
 */
static pg_uuid_t last_uuid;
static bool have_last_uuid = false;

#define UUID7_MS_BITS		48
#define UUID7_MAX_MS		((UINT64CONST(1) << UUID7_MS_BITS) - 1)

/* Random bytes per refill: 512 UUIDs' worth of rand_b. */
#define RANDOM_BLOCK		4096

static uint8 random_buf[RANDOM_BLOCK];
static int	random_pos = RANDOM_BLOCK;
static int	random_owner = 0;	/* pid of the process that filled it */

/* Eight fresh random bytes, unique to this process. */
static void
random_8(uint8 *dst)
{
	if (unlikely(random_owner != MyProcPid || random_pos > RANDOM_BLOCK - 8))
	{
		if (!pg_strong_random(random_buf, RANDOM_BLOCK))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random values")));
		random_pos = 0;
		random_owner = MyProcPid;
	}
	memcpy(dst, random_buf + random_pos, 8);
	random_pos += 8;
}

/* Build a UUIDv7 from a tick ((unix_ms << 12) | rand_a) and random bytes. */
static pg_uuid_t *
uuid7_build(uint64 tick, const uint8 *rand)
{
	pg_uuid_t  *u = palloc(sizeof(pg_uuid_t));
	uint64		ms = tick >> IDGEN_UUID7_TICK_BITS;
	uint32		rand_a = (uint32) (tick & 0xFFF);

	for (int i = 0; i < 6; i++)
		u->data[i] = (uint8) (ms >> (8 * (5 - i)));
	u->data[6] = (uint8) (0x70 | (rand_a >> 8));
	u->data[7] = (uint8) (rand_a & 0xFF);
	u->data[8] = (uint8) (0x80 | (rand[0] & 0x3F));
	memcpy(&u->data[9], rand + 1, 7);
	return u;
}

/* Milliseconds since 1970 of 'ts', which must be within UUIDv7 range. */
static uint64
unix_ms_of(TimestampTz ts, const char *funcname)
{
	if (TIMESTAMP_NOT_FINITE(ts) || ts < IDGEN_UNIX_EPOCH ||
		(uint64) (ts - IDGEN_UNIX_EPOCH) / 1000 > UUID7_MAX_MS)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp \"%s\" is out of range for %s()",
						timestamptz_to_str(ts), funcname),
				 errdetail("UUIDv7 holds 48 bits of milliseconds since 1970-01-01 00:00:00+00, up to %s.",
						   timestamptz_to_str(IDGEN_UNIX_EPOCH +
											  (TimestampTz) UUID7_MAX_MS * 1000))));
	return (uint64) (ts - IDGEN_UNIX_EPOCH) / 1000;
}

/* The server's UUIDv7 clock: ticks (Unix ms << 12) | counter. */
static const IdgenTickClock uuid7_clock = {
	.kind = IDGEN_KIND_UUID7,
	.name = "UUIDv7",
	.item = "UUIDv7",
	.epoch = IDGEN_UNIX_EPOCH,
	.epoch_name = "1970-01-01",
	.tick_bits = IDGEN_UUID7_TICK_BITS,
	.sub_ms = true,
	.max_ms = UUID7_MAX_MS,
	.field_bits = UUID7_MS_BITS,
	.end_of_time = IDGEN_UNIX_EPOCH + (TimestampTz) (UUID7_MAX_MS + 1) * 1000,
};

/*
 * The next tick of this server's UUIDv7 clock, a positive 60-bit number
 * greater than every tick taken before on this server: across backends,
 * restarts and crashes (it starts above the durable horizon) and failovers
 * (horizon_wal.c).  'funcname' is the caller, for the not-preloaded error.
 * Worker-id lease tokens are such ticks (lease.c), so that they never go
 * backwards, not even when the extension is dropped and created again.
 */
int64
idgen_uuid7_next_tick(const char *funcname)
{
	idgen_require_shmem(funcname);
	if (unlikely(RecoveryInProgress()))
		idgen_recovery_check(IDGEN_KIND_UUID7, "UUIDv7");
	return (int64) idgen_next_tick(&idgen_shared->uuid7_tick.value, &uuid7_clock);
}

/*
 * idgen_uuid7() returns uuid
 *		The next UUIDv7 of this server: greater than every one issued before.
 */
Datum
idgen_uuid7(PG_FUNCTION_ARGS)
{
	uint8		rand[8];
	uint64		tick = (uint64) idgen_uuid7_next_tick("idgen_uuid7");
	pg_uuid_t  *u;

	random_8(rand);
	u = uuid7_build(tick, rand);
	last_uuid = *u;
	have_last_uuid = true;
	PG_RETURN_UUID_P(u);
}

/*
 * idgen_uuid7_shifted(shift interval) returns uuid
 *		The next UUIDv7 of this server with its time moved by 'shift', as
 *		PostgreSQL 18's uuidv7(shift): the time of the server's next tick
 *		plus 'shift' (timestamptz + interval: days and months in the
 *		session's time zone), truncated to the millisecond, with the tick's
 *		rand_a counter.  A shift of a fixed length (no days or months part)
 *		moves every tick by the same number of milliseconds, so the UUIDs
 *		made with one such shift are strictly increasing across the server,
 *		as idgen_uuid7()'s are; the tick is spent, so unshifted ones stay so
 *		too.  Calendar shifts map two times to one day at a month's end or a
 *		time zone change, and keep no order there.
 */
Datum
idgen_uuid7_shifted(PG_FUNCTION_ARGS)
{
	Interval   *shift = PG_GETARG_INTERVAL_P(0);
	uint64		tick = (uint64) idgen_uuid7_next_tick("idgen_uuid7_shifted");
	TimestampTz at;
	TimestampTz shifted;
	uint64		ms;
	uint8		rand[8];
	pg_uuid_t  *u;

	at = IDGEN_UNIX_EPOCH + (TimestampTz) (tick >> IDGEN_UUID7_TICK_BITS) * 1000;
	shifted = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(at),
													  IntervalPGetDatum(shift)));
	ms = unix_ms_of(shifted, "idgen_uuid7_shifted");
	random_8(rand);
	u = uuid7_build((ms << IDGEN_UUID7_TICK_BITS) | (tick & ((UINT64CONST(1) << IDGEN_UUID7_TICK_BITS) - 1)),
					rand);
	last_uuid = *u;
	have_last_uuid = true;
	PG_RETURN_UUID_P(u);
}

/*
 * idgen_uuid7_last() returns uuid
 *		The last UUIDv7 idgen_uuid7() generated in this session, with
 *		currval()'s rules: idgen_uuid7() or idgen_uuid7_shifted(shift);
 *		idgen_uuid7(ts), which builds one for a given time, does not count.
 */
Datum
idgen_uuid7_last(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *u;

	if (!have_last_uuid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idgen_uuid7_last is not yet defined in this session"),
				 errdetail("This session has not generated a UUIDv7 with idgen_uuid7() yet."),
				 errhint("Generate one first (an INSERT with DEFAULT idgen_uuid7()), or take the ID with INSERT ... RETURNING.")));
	u = palloc(sizeof(pg_uuid_t));
	*u = last_uuid;
	PG_RETURN_UUID_P(u);
}

/* Forget the session's last UUIDv7, as idgen_snowflake_forget_last(). */
void
idgen_uuid7_forget_last(void)
{
	have_last_uuid = false;
}

/*
 * idgen_uuid7(ts timestamptz) returns uuid
 *		A UUIDv7 for 'ts' (backfills): rand_a is the sub-millisecond fraction
 *		of 'ts', the rest random.  Not ordered against other UUIDs of the
 *		same time, and needs no shared memory.
 */
Datum
idgen_uuid7_at(PG_FUNCTION_ARGS)
{
	TimestampTz ts = PG_GETARG_TIMESTAMPTZ(0);
	uint64		ms = unix_ms_of(ts, "idgen_uuid7");
	uint64		frac_us = (uint64) (ts - IDGEN_UNIX_EPOCH) % 1000;
	uint8		rand[8];

	random_8(rand);
	PG_RETURN_UUID_P(uuid7_build((ms << IDGEN_UUID7_TICK_BITS) |
								 ((frac_us << IDGEN_UUID7_TICK_BITS) / 1000), rand));
}

/*
 * idgen_uuid7_min(ts timestamptz) returns uuid
 *		The smallest UUIDv7 of the millisecond of 'ts': everything but the
 *		time, version and variant is zero.
 */
Datum
idgen_uuid7_min(PG_FUNCTION_ARGS)
{
	static const uint8 zero[8] = {0};
	uint64		ms = unix_ms_of(PG_GETARG_TIMESTAMPTZ(0), "idgen_uuid7_min");

	PG_RETURN_UUID_P(uuid7_build(ms << IDGEN_UUID7_TICK_BITS, zero));
}

/*
 * idgen_uuid_version(u uuid) returns smallint
 *		The version of a UUID of the RFC 9562 variant (10 in the two top
 *		bits of byte 8), NULL for any other variant: PostgreSQL 18's
 *		uuid_extract_version() for earlier versions.
 */
Datum
idgen_uuid_version(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *u = PG_GETARG_UUID_P(0);

	if ((u->data[8] & 0xC0) != 0x80)
		PG_RETURN_NULL();
	PG_RETURN_INT16((int16) (u->data[6] >> 4));
}

/*
 * idgen_uuid7_time(u uuid) returns timestamptz
 *		The millisecond of a UUIDv7; NULL for a UUID that is not version 7
 *		with the RFC 9562 variant.
 */
Datum
idgen_uuid7_time(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *u = PG_GETARG_UUID_P(0);
	uint64		ms = 0;

	if ((u->data[6] & 0xF0) != 0x70 || (u->data[8] & 0xC0) != 0x80)
		PG_RETURN_NULL();
	for (int i = 0; i < 6; i++)
		ms = (ms << 8) | u->data[i];
	PG_RETURN_TIMESTAMPTZ(IDGEN_UNIX_EPOCH + (TimestampTz) ms * 1000);
}
