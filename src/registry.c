/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  A server's Snowflake identity held as a lease in a registry: the
 *	  settings, the state in shared memory, the check on the hot path, and
 *	  idgen_identity().  The "idgen registry" background process that
 *	  claims, renews and releases the lease is in registry_worker.c; its
 *	  connection to the registry in remote.c.
 *
 * Settings
 *	  idgen.identity = 'settings' (default): the identity is
 *	  idgen.datacenter_id / idgen.worker_id.  With idgen.registry set at
 *	  start, the server claims exactly that identity from the registry, so a
 *	  second server configured with it (a copy, a standby, a typo) is
 *	  refused instead of issuing the same IDs.
 *	  idgen.identity = 'registry': the registry gives a free identity.
 *	  idgen.registry is a libpq connection string to a database of another
 *	  server (the registry) where the idgen extension is installed; its
 *	  idgen_worker_lease table holds every server's identity, keyed by id,
 *	  with each holder's system_identifier.
 *
 * Hot path
 *	  Shared word 'identity' packs the lease as an ID would:
 *	  (valid-until millisecond << timestamp_shift) | datacenter and worker
 *	  fields; 0 when there is none.  Next to it, 'gen' is bumped (before
 *	  the word is written) whenever a lease begins or ends, not on
 *	  renewals.  A generator reads gen, takes its tick, reads the word and
 *	  gen again, and issues the ID only if gen did not change and the word
 *	  covers the tick's millisecond: the lease in the word was then in place
 *	  from before the tick (a lease that began later would have bumped gen)
 *	  until after it (the word was read after the tick), and a lease that
 *	  ended and another of the same identity that began while the generator
 *	  stalled cannot pass for one.  Three reads of one cache line written
 *	  every ttl / 3 at most: nothing else is added to the hot path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_registry.h"

PG_FUNCTION_INFO_V1(idgen_identity);

/* Settings */
int			idgen_identity_source = IDGEN_IDENTITY_FROM_SETTINGS;
char	   *idgen_registry = NULL;
int			idgen_registry_ttl_ms = 30 * 1000;

/* ----------
 * Shared state
 * ----------
 */
static const char *const state_names[] = {
	[IDGEN_IDENTITY_SETTINGS] = "settings",
	[IDGEN_IDENTITY_STARTING] = "starting",
	[IDGEN_IDENTITY_HELD] = "held",
	[IDGEN_IDENTITY_REFUSED] = "refused",
	[IDGEN_IDENTITY_UNREACHABLE] = "unreachable",
	[IDGEN_IDENTITY_STOPPED] = "stopped",
	[IDGEN_IDENTITY_STANDBY] = "standby",
};

/*
 * Whether this server's identity is leased: from the registry, or from its
 * settings but claimed at a registry.  Both settings are fixed at start.
 */
static bool
identity_is_leased(void)
{
	return idgen_identity_from_registry || (idgen_registry != NULL && idgen_registry[0] != '\0');
}

/* Initialise the shared state; postmaster, at start and after a crash. */
void
idgen_registry_shmem_init(IdgenShared *s)
{
	IdgenRegistryStatus *r = &s->registry;

	pg_atomic_init_u64(&s->lease.f.word, 0);
	pg_atomic_init_u64(&s->lease.f.gen, 0);
	s->identity_leased = identity_is_leased();
	SpinLockInit(&r->mutex);
	r->pid = 0;
	r->state = s->identity_leased ? IDGEN_IDENTITY_STARTING : IDGEN_IDENTITY_SETTINGS;
	r->datacenter_id = r->worker_id = -1;
	r->token = 0;
	r->valid_until = r->registry_expires_at = r->acquired_at = r->renewed_at = 0;
	r->skew_ms = 0;
	r->has_skew = false;
	r->renewals = r->failures = 0;
	r->message[0] = '\0';
}

/* Set the state and its message (printf-style), under the mutex. */
void
idgen_registry_set_state(IdgenIdentityState state, const char *fmt,...)
{
	IdgenRegistryStatus *r = &idgen_shared->registry;
	char		buf[sizeof(r->message)];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	SpinLockAcquire(&r->mutex);
	r->state = state;
	strlcpy(r->message, buf, sizeof(r->message));
	if (state == IDGEN_IDENTITY_REFUSED || state == IDGEN_IDENTITY_UNREACHABLE)
		r->failures++;
	SpinLockRelease(&r->mutex);
}

/*
 * Publish the lease word: identity valid until 'until' (local time), or
 * none (until 0).  Anything but the renewal of the lease already published
 * bumps the generation first, so that a generator that read the word before
 * a lease ended and reads it again after another began (the same identity,
 * say) sees the change.
 */
void
idgen_registry_publish(int datacenter_id, int worker_id, TimestampTz until, bool renewal)
{
	const IdgenLayout *l = &idgen_layout;
	int64		ms = (until - l->epoch) / 1000;
	uint64		w;

	if (ms <= 0)
		w = 0;
	else
	{
		if ((uint64) ms > l->timestamp_max)
			ms = (int64) l->timestamp_max;
		w = ((uint64) ms << l->timestamp_shift) |
			((uint64) datacenter_id << l->datacenter_shift) |
			((uint64) worker_id << l->worker_shift);
	}
	if (!renewal)
		(void) pg_atomic_fetch_add_u64(&idgen_shared->lease.f.gen, 1);	/* a full barrier */
	pg_atomic_write_u64(&idgen_shared->lease.f.word, w);
}

/* ----------
 * The hot path
 * ----------
 */

/* Whether lease word 'w' covers a tick of millisecond 'ms'. */
static inline bool
identity_covers(uint64 w, uint64 ms)
{
	return ms < (w >> idgen_layout.timestamp_shift);
}

/*
 * Whether the registry's messages may be shown here.  They come from libpq
 * and the registry and can name the registry's host, port and user, so
 * only to roles that may read idgen.registry itself (it needs the
 * privileges of pg_read_all_settings), and only if every role the session
 * acts for may: the current user alone is not enough, as in a superuser's
 * SECURITY DEFINER function it is that superuser, and the function hands
 * what it read to its caller, the outer user (or the role a session SET
 * ROLE to).  The session user (who logged in) is checked too; that is
 * stricter than SHOW in a corner (a session user that may SET ROLE to a
 * member of pg_read_all_settings without inheriting its privileges), where
 * the setting itself can still be read.
 */
static bool
registry_messages_visible(void)
{
	Oid			roles[] = {GetUserId(), GetOuterUserId(), GetSessionUserId()};

	for (size_t i = 0; i < lengthof(roles); i++)
		if (!has_privs_of_role(roles[i], ROLE_PG_READ_ALL_SETTINGS))
			return false;
	return true;
}

/*
 * The status message as this session may see it (NULL: none); roles that
 * may not see it are told only where to look.
 */
static const char *
visible_message(const IdgenRegistryStatus *copy)
{
	if (copy->message[0] == '\0')
		return NULL;
	if (registry_messages_visible())
		return copy->message;
	return "the details are shown only to roles with the privileges of pg_read_all_settings, and in the server log";
}

/*
 * Issue the next ID for 'word' (a gene's generator word) under the leased
 * identity.  Called by snowflake.c only when identity_leased.
 */
int64
idgen_leased_next(pg_atomic_uint64 *word, const IdgenTickClock *clock, uint32 gene)
{
	const IdgenLayout *l = &idgen_layout;
	uint64		until_mask = l->timestamp_max << l->timestamp_shift;
	TimestampTz give_up = 0;

	for (;;)
	{
		uint64		gen = pg_atomic_read_u64(&idgen_shared->lease.f.gen);
		uint64		w;
		uint64		tick;
		IdgenRegistryStatus copy;
		const char *message;

		pg_read_barrier();
		tick = idgen_next_tick(word, clock);	/* a full barrier */
		w = pg_atomic_read_u64(&idgen_shared->lease.f.word);
		pg_read_barrier();
		if (likely(pg_atomic_read_u64(&idgen_shared->lease.f.gen) == gen &&
				   identity_covers(w, tick >> l->sequence_bits)))
			return idgen_compose_identity(l, tick, gene, w & ~until_mask);
		if (pg_atomic_read_u64(&idgen_shared->lease.f.gen) != gen)
			continue;			/* a lease ended or began meanwhile: a new tick */

		/*
		 * No lease covers it.  While the worker is still on its first
		 * attempt (the server has just started, or been promoted), wait
		 * for it a little, as for the clock.
		 */
		SpinLockAcquire(&idgen_shared->registry.mutex);
		copy = idgen_shared->registry;
		SpinLockRelease(&idgen_shared->registry.mutex);
		/*
		 * Held, and the last renewal succeeded (a failed one changes the
		 * state), yet the bound is behind this tick: the clock jumped
		 * forward past it (an NTP step, a virtual machine resumed).  Ask
		 * the registry process to renew now, which it does as its next
		 * renewal is due by this clock, and wait for it the same way,
		 * rather than tell clients that a lease renewed moments ago has
		 * ended.  (SIGUSR1 sets a background worker's latch.)
		 */
		if (copy.state == IDGEN_IDENTITY_HELD && copy.pid != 0)
			(void) kill(copy.pid, SIGUSR1);
		if (copy.state == IDGEN_IDENTITY_STARTING ||
			(copy.state == IDGEN_IDENTITY_HELD && copy.pid != 0) ||
			(copy.state == IDGEN_IDENTITY_STANDBY && !RecoveryInProgress()))
		{
			TimestampTz now = GetCurrentTimestamp();

			if (give_up == 0)
				give_up = now + (TimestampTz) idgen_clock_wait_ms * 1000;
			if (now < give_up)
			{
				CHECK_FOR_INTERRUPTS();
				pg_usleep(10 * 1000L);
				continue;
			}
		}

		idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
		message = visible_message(&copy);
		if (copy.state == IDGEN_IDENTITY_HELD || copy.valid_until != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("this server's lease on its Snowflake identity has ended"),
					 errdetail("The lease on (datacenter %d, worker %d) is valid until %s and has not been renewed: %s.",
							   copy.datacenter_id, copy.worker_id,
							   timestamptz_to_str(copy.valid_until),
							   message ? message : "the renewal has not been answered yet"),
					 errhint("The \"idgen registry\" process renews it; see idgen_identity() and the server log, and check that the registry (\"idgen.registry\") is reachable.")));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this server holds no Snowflake identity"),
				 errdetail("Its identity comes from the registry (\"idgen.identity\" = '%s'), which has not given it one (%s): %s.",
						   idgen_identity_from_registry ? "registry" : "settings",
						   state_names[copy.state],
						   message ? message : "no answer yet"),
				 errhint("See idgen_identity() and the server log.")));
	}
}

/*
 * Define the registry's settings; when preloading, register the registry
 * process if the identity is leased.
 */
void
idgen_registry_init(void)
{
	static const struct config_enum_entry identity_options[] = {
		{"settings", IDGEN_IDENTITY_FROM_SETTINGS, false},
		{"registry", IDGEN_IDENTITY_FROM_REGISTRY, false},
		{NULL, 0, false}
	};

	DefineCustomEnumVariable("idgen.identity",
							 "Sets where this server's datacenter id and worker id come from.",
							 "settings: \"idgen.datacenter_id\" and \"idgen.worker_id\" (leased from the registry "
							 "when \"idgen.registry\" is set); registry: any free pair, leased from the registry.",
							 &idgen_identity_source, IDGEN_IDENTITY_FROM_SETTINGS, identity_options,
							 idgen_startup_context(), 0, NULL, NULL, NULL);
	DefineCustomStringVariable("idgen.registry",
							   "Sets the connection string of the registry that leases this server's identity.",
							   "Empty: no registry, the identity is not checked against other servers. "
							   "Fixed at start: a lease's token is valid only at the registry that gave it.",
							   &idgen_registry, "",
							   idgen_startup_context(), GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.registry_ttl",
							"Sets how long a lease on this server's identity lasts; it is renewed every third of it.",
							"Without a renewal (the registry unreachable) generation stops when it runs out.",
							&idgen_registry_ttl_ms, 30 * 1000, 1000, 24 * 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress && identity_is_leased())
		idgen_registry_worker_register();
	else if (process_shared_preload_libraries_in_progress && !IsUnderPostmaster)
		idgen_layout_warn_default_identity();
}

/*
 * Whether the lease in 'copy' is held but generators cannot use it yet:
 * they start above a horizon taken over that is more than
 * idgen.takeover_max_lead ahead of the clock (clock.c), and fail until the
 * clock is within it.  If so, 'buf' says so.  Nothing in it is secret.
 */
static bool
held_but_waiting(const IdgenRegistryStatus *copy, char *buf, size_t len)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz point;

	if (copy->state != IDGEN_IDENTITY_HELD)
		return false;
	point = idgen_takeover_point();
	if (point <= now + (TimestampTz) idgen_takeover_max_lead_ms * 1000)
		return false;
	snprintf(buf, len,
			 "held, but generation fails: the identity's IDs must start above %s, " INT64_FORMAT " ms ahead of this server's clock, more than \"idgen.takeover_max_lead\" (%d ms); it resumes once the clock is within that",
			 timestamptz_to_str(point), (int64) ((point - now) / 1000), idgen_takeover_max_lead_ms);
	return true;
}

/*
 * idgen_identity() returns one row: where this server's Snowflake identity
 * comes from and, when it is leased, the lease.
 */
Datum
idgen_identity(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[15];
	bool		nulls[15] = {0};
	int			i = 0;
	IdgenRegistryStatus copy;
	bool		leased;
	char		waiting[256];
	const char *message;

	idgen_require_shmem("idgen_identity");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	SpinLockAcquire(&idgen_shared->registry.mutex);
	copy = idgen_shared->registry;
	SpinLockRelease(&idgen_shared->registry.mutex);
	leased = idgen_shared->identity_leased;

	values[i++] = CStringGetTextDatum(idgen_identity_from_registry ? "registry" : "settings");	/* source */
	values[i++] = BoolGetDatum(leased); /* leased */
	if (leased && copy.state == IDGEN_IDENTITY_HELD && copy.valid_until <= GetCurrentTimestamp())
		values[i++] = CStringGetTextDatum("expired");
	else
		values[i++] = CStringGetTextDatum(state_names[copy.state]);	/* state */
	if (!leased)
	{
		values[i++] = Int32GetDatum(idgen_layout.datacenter_id);
		values[i++] = Int32GetDatum(idgen_layout.worker_id);
	}
	else if (copy.datacenter_id >= 0)
	{
		values[i++] = Int32GetDatum(copy.datacenter_id);
		values[i++] = Int32GetDatum(copy.worker_id);
	}
	else
	{
		nulls[i++] = true;
		nulls[i++] = true;
	}
#define TS_OR_NULL(ts) \
	do { if ((ts) != 0) values[i++] = TimestampTzGetDatum(ts); else nulls[i++] = true; } while (0)
	if (copy.token != 0)
		values[i++] = Int64GetDatum(copy.token);
	else
		nulls[i++] = true;
	TS_OR_NULL(copy.valid_until);
	TS_OR_NULL(copy.registry_expires_at);
	TS_OR_NULL(copy.acquired_at);
	TS_OR_NULL(copy.renewed_at);
#undef TS_OR_NULL
	if (copy.has_skew)
		values[i++] = Int64GetDatum(copy.skew_ms);
	else
		nulls[i++] = true;
	values[i++] = Int64GetDatum((int64) GetSystemIdentifier());
	message = held_but_waiting(&copy, waiting, sizeof(waiting)) ? waiting : visible_message(&copy);
	if (message)
		values[i++] = CStringGetTextDatum(message);
	else
		nulls[i++] = true;
	if (copy.pid != 0)
		values[i++] = Int32GetDatum(copy.pid);
	else
		nulls[i++] = true;
	values[i++] = Int64GetDatum((int64) copy.failures);

	Assert(i == lengthof(values));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
