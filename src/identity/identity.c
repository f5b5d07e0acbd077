/*-------------------------------------------------------------------------
 *
 * identity.c
 *	  A server's Snowflake identity held as a lease in a registry: the
 *	  settings, the state in shared memory, the check on the hot path, and
 *	  idgen_identity().  The "idgen registry" background process that
 *	  claims, renews and releases the lease is in registry.c; its
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
 *	  The lease word (the core segment's lease.f.word) packs the lease as an
 *	  ID would (idgen_lease_word, layout.c):
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
 *	  every ttl / 3 at most: nothing else is added to the hot path.  Only
 *	  the "idgen registry" process writes them (idgen_identity_publish).
 *	  identity_leased (core) is written once, at start, by this area's
 *	  startup.
 *
 * Shared state
 *	  The area "idgen identity" (IdgenRegistryStatus, idgen_identity.h):
 *	  the registry process's pid, the lease it holds, its clock skew and
 *	  counters, for idgen_identity(), all under its spinlock 'mutex'.
 *	  Written by the registry process; read (copied under the mutex) by
 *	  idgen_identity() and by generators that find no lease covering them.
 *
 * Citus
 *	  A Citus node (one that preloads citus) shares no idgen table with the
 *	  other nodes of its cluster: each node's idgen_identity_claim holds its
 *	  own row alone, and Citus cannot distribute a table with triggers.  So
 *	  nothing but a registry can see two of its nodes given one identity by
 *	  their settings, and they would make the same IDs.  On a Citus node an
 *	  identity from the settings with no registry makes no Snowflake ID
 *	  (idgen_identity_unchecked, read by the generators in snowflake.c):
 *	  each node takes its identity from a registry, or has the one its
 *	  settings give claimed there.  Both the preload list and the identity
 *	  settings are fixed at start.
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
#include "utils/varlena.h"

#include "idgen.h"
#include "idgen_clock.h"
#include "idgen_identity.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_stats.h"

PG_FUNCTION_INFO_V1(idgen_identity);

/* Settings */
int			idgen_identity_source = IDGEN_IDENTITY_FROM_SETTINGS;
char	   *idgen_registry = NULL;
int			idgen_registry_ttl_ms = 30 * 1000;

IdgenRegistryStatus *idgen_registry_status = NULL;

/*
 * A Citus node whose identity no registry checks: it makes no Snowflake ID
 * (see "Citus" above).  Set at load, in every process, from settings fixed
 * at start.
 */
bool		idgen_identity_unchecked = false;

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
bool
idgen_identity_is_leased(void)
{
	return idgen_identity_from_registry || (idgen_registry != NULL && idgen_registry[0] != '\0');
}

static Size
identity_shmem_size(void)
{
	return sizeof(IdgenRegistryStatus);
}

/*
 * The area's startup: after the core segment (whose lease word is 0), in
 * the postmaster, at start and after a crash.
 */
static void
identity_shmem_startup(void *ptr, bool found, LWLockPadded *locks)
{
	IdgenRegistryStatus *r = (IdgenRegistryStatus *) ptr;

	idgen_registry_status = r;
	if (found)
		return;
	Assert(pg_atomic_read_u64(&idgen_shared->lease.f.word) == 0);
	idgen_shared->identity_leased = idgen_identity_is_leased();
	SpinLockInit(&r->mutex);
	r->pid = 0;
	r->state = idgen_shared->identity_leased ? IDGEN_IDENTITY_STARTING : IDGEN_IDENTITY_SETTINGS;
	r->datacenter_id = r->worker_id = -1;
	r->token = 0;
	r->valid_until = r->registry_expires_at = r->acquired_at = r->renewed_at = 0;
	r->skew_ms = 0;
	r->has_skew = false;
	r->renewals = r->failures = 0;
	r->message[0] = '\0';
}

static const IdgenShmemArea identity_area = {
	.name = "idgen identity",
	.size = identity_shmem_size,
	.startup = identity_shmem_startup,
};

/* Set the state and its message (printf-style), under the mutex. */
void
idgen_identity_set_state(IdgenIdentityState state, const char *fmt,...)
{
	IdgenRegistryStatus *r = idgen_registry_status;
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
idgen_identity_publish(int datacenter_id, int worker_id, TimestampTz until, bool renewal)
{
	uint64		w = idgen_lease_word(&idgen_layout, until, datacenter_id, worker_id);

	if (!renewal)
		(void) pg_atomic_fetch_add_u64(&idgen_shared->lease.f.gen, 1);	/* a full barrier */
	pg_atomic_write_u64(&idgen_shared->lease.f.word, w);
}

/* ----------
 * The hot path
 * ----------
 */

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
 * Whether a generator that found no lease covering its tick should wait:
 * the registry process is still on its first attempt (the server has just
 * started, or been promoted), or holds the lease but behind a clock that
 * jumped forward (then it is asked to renew now).  Waits as for the clock,
 * within idgen.clock_wait from '*give_up' (set at the first wait).
 */
static bool
wait_for_lease(const IdgenRegistryStatus *copy, TimestampTz *give_up)
{
	TimestampTz now;

	/*
	 * Held, and the last renewal succeeded (a failed one changes the state),
	 * yet the bound is behind this tick: the clock jumped forward past it (an
	 * NTP step, a virtual machine resumed).  Ask the registry process to
	 * renew now, which it does as its next renewal is due by this clock, and
	 * wait for it the same way, rather than tell clients that a lease renewed
	 * moments ago has ended.  (SIGUSR1 sets the process's latch, registry.c.)
	 */
	if (copy->state == IDGEN_IDENTITY_HELD && copy->pid != 0)
		(void) kill(copy->pid, SIGUSR1);
	if (!(copy->state == IDGEN_IDENTITY_STARTING ||
		  (copy->state == IDGEN_IDENTITY_HELD && copy->pid != 0) ||
		  (copy->state == IDGEN_IDENTITY_STANDBY && !RecoveryInProgress())))
		return false;
	now = GetCurrentTimestamp();
	if (*give_up == 0)
		*give_up = now + (TimestampTz) idgen_clock_wait_ms * 1000;
	if (now >= *give_up)
		return false;
	CHECK_FOR_INTERRUPTS();
	pg_usleep(IDGEN_WAIT_SLICE_US);
	return true;
}

/* The error of a generator that no lease covers (a copy of the state). */
pg_noreturn static void
no_lease_error(const IdgenRegistryStatus *copy)
{
	const char *message = visible_message(copy);

	idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
	if (copy->state == IDGEN_IDENTITY_HELD || copy->valid_until != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this server's lease on its Snowflake identity has ended"),
				 errdetail("The lease on (datacenter %d, worker %d) is valid until %s and has not been renewed: %s.",
						   copy->datacenter_id, copy->worker_id,
						   timestamptz_to_str(copy->valid_until),
						   message ? message : "the renewal has not been answered yet"),
				 errhint("The \"idgen registry\" process renews it; see idgen_identity() and the server log, and check that the registry (\"idgen.registry\") is reachable.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("this server holds no Snowflake identity"),
			 errdetail("Its identity comes from the registry (\"idgen.identity\" = '%s'), which has not given it one (%s): %s.",
					   idgen_identity_from_registry ? "registry" : "settings",
					   state_names[copy->state],
					   message ? message : "no answer yet"),
			 errhint("See idgen_identity() and the server log.")));
}

/*
 * Issue the next ID for 'word' (a gene's generator word) under the leased
 * identity (see "Hot path" in the file header).  Called by snowflake.c
 * only when identity_leased.
 */
int64
idgen_leased_next(pg_atomic_uint64 *word, const IdgenTickClock *clock, uint32 gene)
{
	const IdgenLayout *l = &idgen_layout;
	TimestampTz give_up = 0;

	Assert(idgen_shared->identity_leased);
	for (;;)
	{
		uint64		gen = pg_atomic_read_u64(&idgen_shared->lease.f.gen);
		uint64		w;
		uint64		tick;
		IdgenRegistryStatus copy;

		pg_read_barrier();
		tick = idgen_next_tick(word, clock);	/* a full barrier */
		w = pg_atomic_read_u64(&idgen_shared->lease.f.word);
		pg_read_barrier();
		if (likely(pg_atomic_read_u64(&idgen_shared->lease.f.gen) == gen &&
				   idgen_lease_word_covers(l, w, tick >> l->sequence_bits)))
			return idgen_compose_identity(l, tick, gene, idgen_lease_word_identity(l, w));
		if (pg_atomic_read_u64(&idgen_shared->lease.f.gen) != gen)
			continue;			/* a lease ended or began meanwhile: a new
								 * tick */

		/* No lease covers it. */
		SpinLockAcquire(&idgen_registry_status->mutex);
		copy = *idgen_registry_status;
		SpinLockRelease(&idgen_registry_status->mutex);
		if (!wait_for_lease(&copy, &give_up))
			no_lease_error(&copy);
	}
}

/*
 * Whether shared_preload_libraries names Citus's library ("citus", or a
 * path or file name of it).
 */
static bool
preloads_citus(void)
{
	const char *setting = GetConfigOption("shared_preload_libraries", true, false);
	char	   *raw;
	List	   *names;
	ListCell   *lc;
	bool		found = false;

	if (setting == NULL)
		return false;
	raw = pstrdup(setting);
	/* the server started with this list, so it parses */
	if (SplitDirectoriesString(raw, ',', &names))
	{
		foreach(lc, names)
		{
			const char *name = (const char *) lfirst(lc);
			const char *base = last_dir_separator(name);

			base = base ? base + 1 : name;
			if (strcmp(base, "citus") == 0 || strcmp(base, "citus.so") == 0)
				found = true;
		}
	}
	list_free_deep(names);
	pfree(raw);
	return found;
}

/*
 * The error of a generator on a Citus node whose identity no registry
 * checks.
 */
void
idgen_identity_unchecked_error(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("Snowflake IDs on a Citus node need a registry"),
			 errdetail("This server preloads citus, and its identity comes from \"idgen.datacenter_id\" and \"idgen.worker_id\" with no \"idgen.registry\": "
					   "nothing compares it with the identities of the cluster's other nodes, and two nodes given one identity would make the same IDs."),
			 errhint("Set \"idgen.registry\" on every node of the cluster, with \"idgen.identity\" = 'registry' for a free identity or with each node's own ids to have them claimed there, and restart the server.")));
}

/*
 * Define the registry's settings; when preloading, register the identity's
 * shared state (the "idgen registry" process registers itself, registry.c),
 * and warn of an identity no registry checks: on a Citus node, where it
 * makes no Snowflake ID, or left at the default.
 */
void
idgen_identity_init(void)
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

	idgen_identity_unchecked = !idgen_identity_is_leased() && preloads_citus();

	if (!process_shared_preload_libraries_in_progress)
		return;
	idgen_shmem_register(&identity_area);
	if (IsUnderPostmaster || idgen_identity_is_leased())
		return;
	if (idgen_identity_unchecked)
		ereport(WARNING,
				(errmsg("idgen makes no Snowflake ID on this Citus node: no registry checks its identity"),
				 errdetail("This server preloads citus, and \"idgen.registry\" is not set: nothing would see another node of the cluster given the same identity."),
				 errhint("Set \"idgen.registry\" on every node of the cluster, with \"idgen.identity\" = 'registry' for a free identity or with each node's own ids to have them claimed there, and restart the server.")));
	else
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

	SpinLockAcquire(&idgen_registry_status->mutex);
	copy = *idgen_registry_status;
	SpinLockRelease(&idgen_registry_status->mutex);
	leased = idgen_shared->identity_leased;

	values[i++] = CStringGetTextDatum(idgen_identity_from_registry ? "registry" : "settings");	/* source */
	values[i++] = BoolGetDatum(leased); /* leased */
	if (leased && copy.state == IDGEN_IDENTITY_HELD && copy.valid_until <= GetCurrentTimestamp())
		values[i++] = CStringGetTextDatum("expired");
	else
		values[i++] = CStringGetTextDatum(state_names[copy.state]); /* state */
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
