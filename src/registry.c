/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  A server's Snowflake identity held as a lease in a registry: the
 *	  "idgen registry" background worker, and the check on the hot path.
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
 * The lease
 *	  The worker calls idgen_server_lease(system_identifier, instance, ttl
 *	  [, datacenter, worker]) on the registry, then idgen_worker_renew every
 *	  ttl / 3.  'instance' names this postmaster (host, port, pid, start
 *	  time), for people.  The token the registry gives out is the only way
 *	  to renew or release the lease; it is kept in shared memory and in the
 *	  file idgen.lease with a random number the postmaster drew at start, so
 *	  that after a crash and restart of this postmaster (shared memory
 *	  re-created) the worker renews its lease, while a copy of the data
 *	  directory (another postmaster) ignores the file.  Any other server has
 *	  to wait until the lease has ended and rested for the registry's
 *	  idgen.worker_quarantine.  A clean shutdown releases it.
 *
 *	  The lease is valid here until the local time its request was sent plus
 *	  the ttl: never later than the registry's expiry, as long as the two
 *	  clocks run at the same rate.  When the registry cannot be reached the
 *	  server goes on generating until then, and refuses after.  A renewal
 *	  answered "lease lost" (the registry gave the id to someone else, which
 *	  it does only after the lease ended) stops generation at once.
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
 *	  Withdrawing it (a release, at shutdown) writes 0, then waits until the
 *	  clock has passed every tick issued, then releases: a tick taken
 *	  before the 0 was seen is in a generator word the worker reads after
 *	  writing it (a compare-and-swap and a full barrier on either side), and
 *	  generators may run up to idgen.max_drift_ms ahead of the clock.
 *
 * Clock
 *	  The next holder of an identity starts no earlier than the registry's
 *	  expiry plus the quarantine (10 s by default): IDs of the two can only
 *	  meet if this server's clock is ahead of the next one's by more than
 *	  the quarantine minus idgen.max_drift_ms.  The worker measures this
 *	  server's clock against the registry's at every renewal and reports it
 *	  in idgen_identity().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_shmem.h"
#include "idgen_registry.h"
#include "idgen_bgworker.h"

PGDLLEXPORT void idgen_registry_main(Datum main_arg);

PG_FUNCTION_INFO_V1(idgen_identity);

/*
 * How long one connection attempt or one query may take (at most; a third
 * of the ttl when that is shorter, so that one hung renewal leaves time for
 * the next); at shutdown.
 */
#define REGISTRY_TIMEOUT_MS		10000
#define REGISTRY_EXIT_TIMEOUT_MS	2000
/* Retry interval after a failure, at most (ttl / 3 when that is shorter). */
#define REGISTRY_RETRY_MS		1000
/* The lease file, in the data directory. */
#define LEASE_FILE				"idgen.lease"

/* This worker's connection and what it learnt on connecting. */
static PGconn *conn = NULL;
static char registry_schema[NAMEDATALEN * 2 + 3];
static int	timeout_ms = REGISTRY_TIMEOUT_MS;	/* set from the ttl in the loop */
static TimestampTz round_deadline = 0;	/* every step of a round ends by then */
static bool exiting = false;	/* releasing: a shutdown request ends nothing */

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
static void
set_state(IdgenIdentityState state, const char *fmt,...) pg_attribute_printf(2, 3);

static void
set_state(IdgenIdentityState state, const char *fmt,...)
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
static void
publish(int datacenter_id, int worker_id, TimestampTz until, bool renewal)
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
 * The status message as the current role may see it (NULL: none).  The
 * messages come from libpq and the registry and can name the registry's
 * host, port and user; roles that may not read idgen.registry itself (it
 * needs the privileges of pg_read_all_settings) are told only where to look.
 */
static const char *
visible_message(const IdgenRegistryStatus *copy)
{
	if (copy->message[0] == '\0')
		return NULL;
	if (has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_SETTINGS))
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
		 * attempt (the server has just started), wait for it a little, as
		 * for the clock.
		 */
		SpinLockAcquire(&idgen_shared->registry.mutex);
		copy = idgen_shared->registry;
		SpinLockRelease(&idgen_shared->registry.mutex);
		if (copy.state == IDGEN_IDENTITY_STARTING)
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
		if (copy.state == IDGEN_IDENTITY_HELD || copy.valid_until != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("this server's lease on its Snowflake identity has ended"),
					 errdetail("The lease on (datacenter %d, worker %d) is valid until %s and has not been renewed: %s.",
							   copy.datacenter_id, copy.worker_id,
							   timestamptz_to_str(copy.valid_until),
							   visible_message(&copy) ? visible_message(&copy) : "the renewal has not been answered yet"),
					 errhint("The \"idgen registry\" worker renews it; see idgen_identity() and the server log, and check that the registry (idgen.registry) is reachable.")));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this server holds no Snowflake identity"),
				 errdetail("Its identity comes from the registry (idgen.identity = '%s'), which has not given it one (%s): %s.",
						   idgen_identity_from_registry ? "registry" : "settings",
						   state_names[copy.state],
						   visible_message(&copy) ? visible_message(&copy) : "no answer yet"),
				 errhint("See idgen_identity() and the server log.")));
	}
}

/* ----------
 * libpq, without blocking the latch
 * ----------
 */

/* When a step (a connection, a statement) must be done: its own timeout, within the round's. */
static TimestampTz
step_deadline(void)
{
	TimestampTz deadline = GetCurrentTimestamp() + (TimestampTz) timeout_ms * 1000;

	return round_deadline != 0 ? Min(deadline, round_deadline) : deadline;
}

/* Wait until 'conn' is readable or writable; false on timeout or shutdown. */
static bool
wait_socket(bool for_write, TimestampTz deadline)
{
	long		timeout = (long) ((deadline - GetCurrentTimestamp()) / 1000);
	int			rc;

	if (timeout <= 0)
		return false;
	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
						   (for_write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE),
						   PQsocket(conn), timeout, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return exiting || !ShutdownRequestPending;
}

static void
disconnect(void)
{
	if (conn != NULL)
		PQfinish(conn);
	conn = NULL;
}

/* Strip the trailing newline libpq puts on its messages. */
static const char *
pq_message(const char *msg)
{
	static char buf[256];
	size_t		len;

	strlcpy(buf, msg ? msg : "", sizeof(buf));
	len = strlen(buf);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		buf[--len] = '\0';
	return buf;
}

/*
 * Run 'sql' with text parameters; the result (the caller clears it), or
 * NULL with the connection dropped when the registry could not answer.
 */
static PGresult *
run(const char *sql, int nparams, const char *const *values, char *err, size_t errlen)
{
	TimestampTz deadline = step_deadline();
	PGresult   *res = NULL;
	PGresult   *r;
	int			f;

	if (!PQsendQueryParams(conn, sql, nparams, NULL, values, NULL, NULL, 0))
		goto broken;
	while ((f = PQflush(conn)) == 1)
		if (!wait_socket(true, deadline))
			goto timeout;
	if (f < 0)
		goto broken;
	for (;;)
	{
		while (PQisBusy(conn))
		{
			if (!wait_socket(false, deadline))
				goto timeout;
			if (!PQconsumeInput(conn))
				goto broken;
		}
		r = PQgetResult(conn);
		if (r == NULL)
			break;
		if (res != NULL)
			PQclear(res);
		res = r;
	}
	if (res != NULL && PQstatus(conn) != CONNECTION_BAD)
		return res;
	if (res != NULL)
		PQclear(res);
broken:
	snprintf(err, errlen, "%s", pq_message(PQerrorMessage(conn)));
	disconnect();
	return NULL;
timeout:
	if (res != NULL)
		PQclear(res);
	if (ShutdownRequestPending && !exiting)
		snprintf(err, errlen, "shutting down");
	else
		snprintf(err, errlen, "no answer from the registry within %d ms", timeout_ms);

	/*
	 * No PQcancel(): it blocks (connect, send, wait for EOF) with no timeout,
	 * and the registry's side of the statement ends by itself, as it runs
	 * with the same statement_timeout and lock_timeout (connect_registry).
	 */
	disconnect();
	return NULL;
}

/* "message: detail" of a failed result. */
static const char *
result_message(const PGresult *res)
{
	static char buf[256];
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);

	snprintf(buf, sizeof(buf), "%s%s%s", msg ? msg : pq_message(PQresultErrorMessage(res)),
			 detail ? ": " : "", detail ? detail : "");
	return buf;
}

/* Microseconds to whole milliseconds, rounding down (as floor() does). */
static int64
floor_ms(int64 us)
{
	return us >= 0 ? us / 1000 : -((-us + 999) / 1000);
}

/* Whether the 'len' bytes at 'w' are one of libpq's connection keywords. */
static bool
is_conninfo_keyword(const char *w, size_t len)
{
	PQconninfoOption *defaults = PQconndefaults();
	bool		found = false;

	for (PQconninfoOption *o = defaults; o != NULL && o->keyword != NULL; o++)
		if (strlen(o->keyword) == len && strncmp(o->keyword, w, len) == 0)
			found = true;
	if (defaults != NULL)
		PQconninfoFree(defaults);
	return found;
}

/*
 * Whether idgen.registry is a connection string libpq can parse; if not,
 * 'why' describes it without libpq's own message, which quotes the part it
 * could not parse and so may repeat the password: it names only the
 * keywords read before the fault (the words before an "=" that libpq
 * knows; any other word may be part of a password), or says that it is a
 * URI.
 */
static bool
registry_conninfo_valid(char *why, size_t len)
{
	char	   *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(idgen_registry, &errmsg);
	StringInfoData keys;
	const char *p;
	int			unknown = 0;	/* words before "=" that are no keyword */

	if (opts != NULL)
	{
		PQconninfoFree(opts);
		return true;
	}
	if (errmsg != NULL)
		PQfreemem(errmsg);		/* never shown: see above */

	/*
	 * A string with neither "=" nor a URI prefix is a database name to
	 * PQconnectStartParams (expand_dbname), though not to PQconninfoParse.
	 */
	if (strchr(idgen_registry, '=') == NULL &&
		strncmp(idgen_registry, "postgresql://", 13) != 0 &&
		strncmp(idgen_registry, "postgres://", 11) != 0)
		return true;

	initStringInfo(&keys);
	if (strncmp(idgen_registry, "postgresql://", 13) == 0 ||
		strncmp(idgen_registry, "postgres://", 11) == 0)
		appendStringInfoString(&keys, "it is a URI");
	else
	{
		/* keyword = value pairs as libpq reads them, up to the first fault */
		p = idgen_registry;
		for (;;)
		{
			const char *w;

			while (isspace((unsigned char) *p))
				p++;
			w = p;
			while (*p && *p != '=' && !isspace((unsigned char) *p))
				p++;
			if (p == w)
				break;
			while (isspace((unsigned char) *p))
				p++;
			if (*p != '=')
				break;
			/* A word libpq does not know may be part of a password: not named. */
			if (is_conninfo_keyword(w, strcspn(w, "= \t\n\r\f\v")))
				appendStringInfo(&keys, "%s\"%.*s\"", keys.len ? ", " : "its keywords are ",
								 (int) strcspn(w, "= \t\n\r\f\v"), w);
			else
				unknown++;
			p++;
			while (isspace((unsigned char) *p))
				p++;
			if (*p == '\'')
			{
				/* a quoted value, with backslash escapes */
				for (p++; *p && *p != '\''; p++)
					if (*p == '\\' && p[1])
						p++;
				if (*p != '\'')
					break;
				p++;
			}
			else
				for (; *p && !isspace((unsigned char) *p); p++)
					if (*p == '\\' && p[1])
						p++;
		}
		if (unknown > 0)
			appendStringInfo(&keys, "%s%d word%s before \"=\" that libpq does not know as a keyword",
							 keys.len ? ", and " : "it has ", unknown, unknown == 1 ? "" : "s");
		else if (keys.len == 0)
			appendStringInfoString(&keys, "it has no keyword");
	}
	strlcpy(why, keys.data, len);
	pfree(keys.data);
	return false;
}

/* Say in the server log that idgen.registry does not parse (at start). */
static void
report_bad_conninfo(void)
{
	char		why[256];

	if (registry_conninfo_valid(why, sizeof(why)))
		return;
	ereport(WARNING,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("\"idgen.registry\" is not a valid connection string"),
			 errdetail("libpq could not parse it (%s). Its own message is not shown, as it can contain the password.", why),
			 errhint("Correct the setting and restart the server; psql \"<the string>\", run by hand, shows what is wrong. This server generates no Snowflake ID until then.")));
}

/*
 * Connect, find the extension's schema and check the registry's layout has
 * the same identity space; false (with the state set) if not.
 */
static bool
connect_registry(void)
{
	const char *keys[] = {"dbname", "fallback_application_name", NULL};
	const char *vals[] = {idgen_registry, "idgen registry", NULL};
	TimestampTz deadline = step_deadline();
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	char		err[256];
	PGresult   *res;

	if (idgen_registry == NULL || idgen_registry[0] == '\0')
	{
		set_state(IDGEN_IDENTITY_UNREACHABLE,
				  "idgen.identity is 'registry' but idgen.registry (the registry's connection string) is not set");
		return false;
	}
	if (!registry_conninfo_valid(err, sizeof(err)))
	{
		set_state(IDGEN_IDENTITY_UNREACHABLE,
				  "\"idgen.registry\" is not a valid connection string (%s); see the server log", err);
		return false;
	}
	conn = PQconnectStartParams(keys, vals, 1);
	if (conn == NULL)
	{
		set_state(IDGEN_IDENTITY_UNREACHABLE, "out of memory");
		return false;
	}
	while (st != PGRES_POLLING_OK)
	{
		if (st == PGRES_POLLING_FAILED || PQstatus(conn) == CONNECTION_BAD)
		{
			set_state(IDGEN_IDENTITY_UNREACHABLE, "could not connect to the registry: %s",
					  pq_message(PQerrorMessage(conn)));
			disconnect();
			return false;
		}
		if (!wait_socket(st == PGRES_POLLING_WRITING, deadline))
		{
			set_state(IDGEN_IDENTITY_UNREACHABLE, "could not connect to the registry within %d ms",
					  timeout_ms);
			disconnect();
			return false;
		}
		st = PQconnectPoll(conn);
	}
	/* The registry's side of a statement gives up when we do. */
	{
		char		ms[32];
		const char *params[1] = {ms};

		snprintf(ms, sizeof(ms), "%dms", timeout_ms);
		res = run("SELECT pg_catalog.set_config('statement_timeout', $1, false), "
				  "pg_catalog.set_config('lock_timeout', $1, false)", 1, params, err, sizeof(err));
		if (res == NULL)
		{
			set_state(IDGEN_IDENTITY_UNREACHABLE, "the registry did not answer: %s", err);
			return false;
		}
		PQclear(res);
	}

	res = run("SELECT pg_catalog.quote_ident(n.nspname) "
			  "FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n "
			  "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
			  "WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'", 0, NULL, err, sizeof(err));
	if (res == NULL)
	{
		set_state(IDGEN_IDENTITY_UNREACHABLE, "the registry did not answer: %s", err);
		return false;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		set_state(IDGEN_IDENTITY_REFUSED, "%s",
				  PQresultStatus(res) != PGRES_TUPLES_OK ? result_message(res) :
				  "the idgen extension is not installed in the registry's database");
		PQclear(res);
		disconnect();
		return false;
	}
	strlcpy(registry_schema, PQgetvalue(res, 0, 0), sizeof(registry_schema));
	PQclear(res);

	/*
	 * idgen_info() loads the library, so the registry's layout is known.  It
	 * must be this server's: identities from it must fit, and servers that
	 * share a registry must make IDs of one layout, or equal IDs could come
	 * from different identities.
	 */
	{
		char		sql[512];
		const IdgenLayout *l = &idgen_layout;
		char		mine[128];

		snprintf(sql, sizeof(sql),
				 "SELECT pg_catalog.format('%%s %%s %%s %%s %%s %%s', timestamp_bits, datacenter_bits, worker_bits, "
				 "sequence_bits, gene_bits, pg_catalog.floor(EXTRACT(EPOCH FROM epoch) OPERATOR(pg_catalog.*) 1000)::bigint) "
				 "FROM %s.idgen_info()", registry_schema);
		res = run(sql, 0, NULL, err, sizeof(err));
		if (res == NULL)
		{
			set_state(IDGEN_IDENTITY_UNREACHABLE, "the registry did not answer: %s", err);
			return false;
		}
		snprintf(mine, sizeof(mine), "%d %d %d %d %d " INT64_FORMAT,
				 l->timestamp_bits, l->datacenter_bits, l->worker_bits, l->sequence_bits,
				 l->gene_bits, floor_ms(l->epoch - IDGEN_UNIX_EPOCH));
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
			strcmp(PQgetvalue(res, 0, 0), mine) != 0)
		{
			if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
				set_state(IDGEN_IDENTITY_REFUSED, "%s", result_message(res));
			else
				set_state(IDGEN_IDENTITY_REFUSED,
						  "the registry's Snowflake layout (timestamp, datacenter, worker, sequence and gene bits, epoch in ms) is %s, this server's %s: servers sharing a registry must have one layout",
						  PQgetvalue(res, 0, 0), mine);
			PQclear(res);
			disconnect();
			return false;
		}
		PQclear(res);
	}
	return true;
}

/* ----------
 * The lease
 * ----------
 */
static int64 system_identifier;
static char instance[256];
static TimestampTz refusal_logged = 0;	/* when a refusal was last logged */
static bool renew_at_once = false;	/* a claim took over a horizon ahead of its bound */

/*
 * A time the registry sent as seconds since 1970 (date_part('epoch', ...):
 * the text form of a timestamptz would depend on its DateStyle and
 * TimeZone), into 'ts'.  False, and 'ts' 1970-01-01, unless it is a finite
 * time from 1970 to the year 2300, as every time a registry may rightly
 * send is: a horizon beyond that would make generators start where they can
 * never generate, or overflow.
 */
static bool
epoch_in_range(const char *s, TimestampTz *ts)
{
	double		secs = strtod(s, NULL);

	/* 10 413 792 000 s after 1970 is 2300-01-01 */
	if (!isfinite(secs) || secs < 0 || secs >= 10413792000.0)
	{
		*ts = IDGEN_UNIX_EPOCH;
		return false;
	}
	*ts = IDGEN_UNIX_EPOCH + (TimestampTz) (secs * USECS_PER_SEC);
	return true;
}

/* The same, where an invalid time only shows (an expiry, a clock reading). */
static TimestampTz
epoch_to_ts(const char *s)
{
	TimestampTz ts;

	(void) epoch_in_range(s, &ts);
	return ts;
}

/*
 * 'ts' as a query parameter the registry reads with to_timestamp($n::float8):
 * seconds since 1970 with six decimals, exact, whatever its DateStyle.
 */
static void
ts_param(char *buf, size_t len, TimestampTz ts)
{
	int64		us = Max(ts - IDGEN_UNIX_EPOCH, 0);

	snprintf(buf, len, INT64_FORMAT ".%06d", us / USECS_PER_SEC, (int) (us % USECS_PER_SEC));
}

/* Remember the registry's clock against ours: its time at our 'sent'. */
static void
note_skew(const char *registry_now, TimestampTz sent, TimestampTz received)
{
	IdgenRegistryStatus *r = &idgen_shared->registry;
	TimestampTz theirs = epoch_to_ts(registry_now);
	int64		skew = (sent + (received - sent) / 2 - theirs) / 1000;

	SpinLockAcquire(&r->mutex);
	r->skew_ms = skew;
	r->has_skew = true;
	SpinLockRelease(&r->mutex);
}

/* ----------
 * The lease file: "nonce token datacenter worker", this postmaster's
 * ----------
 */
static void
lease_file_write(const IdgenRegistryStatus *r)
{
	FILE	   *f = AllocateFile(LEASE_FILE ".tmp", PG_BINARY_W);

	if (f == NULL ||
		fprintf(f, UINT64_FORMAT " " INT64_FORMAT " %d %d\n", idgen_postmaster_nonce,
				r->token, r->datacenter_id, r->worker_id) < 0 ||
		FreeFile(f) != 0 ||
		rename(LEASE_FILE ".tmp", LEASE_FILE) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", LEASE_FILE),
				 errdetail("After a crash and restart this server will wait for its lease to run out.")));
}

static void
lease_file_remove(void)
{
	if (unlink(LEASE_FILE) != 0 && errno != ENOENT)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", LEASE_FILE)));
}

/*
 * After a crash and restart of this postmaster: the lease it held, if the
 * file is this postmaster's (a copy of the data directory has the file of
 * another).  The worker renews it next; it is not valid before.
 */
static void
lease_file_read(IdgenRegistryStatus *r)
{
	FILE	   *f = AllocateFile(LEASE_FILE, PG_BINARY_R);
	uint64		nonce;
	int64		token;
	int			dc;
	int			w;

	if (f == NULL)
		return;
	if (fscanf(f, UINT64_FORMAT " " INT64_FORMAT " %d %d", &nonce, &token, &dc, &w) == 4 &&
		nonce == idgen_postmaster_nonce && token > 0)
	{
		SpinLockAcquire(&r->mutex);
		r->token = token;
		r->datacenter_id = dc;
		r->worker_id = w;
		SpinLockRelease(&r->mutex);
		ereport(LOG,
				(errmsg("idgen registry worker resumes the lease on (datacenter %d, worker %d) after a restart",
						dc, w)));
	}
	FreeFile(f);
}

/*
 * The bound a claim or renewal sent at 'sent' asks for: IDs under the lease
 * will have timestamps before it.  The ttl from now, or from the takeover
 * point when generators run ahead of the clock from there (clock.c).
 */
static TimestampTz
lease_bound(TimestampTz sent)
{
	return Max(sent, idgen_takeover_point()) + (TimestampTz) idgen_registry_ttl_ms * 1000;
}

/*
 * The registry granted the lease (a claim, or a renewal) asked for at
 * 'sent' with bound 'until', to end at 'expires', its clock reading
 * 'registry_now' (both as date_part('epoch', ...)).  Publish it: IDs may be
 * issued here with timestamps up to 'until', which the registry recorded as
 * the identity's horizon before this answer.
 */
static void
lease_granted(TimestampTz sent, TimestampTz until, const char *expires,
			  const char *registry_now, bool renewal)
{
	IdgenRegistryStatus *r = &idgen_shared->registry;

	SpinLockAcquire(&r->mutex);
	r->valid_until = until;
	r->registry_expires_at = epoch_to_ts(expires);
	r->renewed_at = sent;
	if (renewal)
		r->renewals++;
	else
		r->acquired_at = sent;
	r->state = IDGEN_IDENTITY_HELD;
	r->message[0] = '\0';
	SpinLockRelease(&r->mutex);
	note_skew(registry_now, sent, GetCurrentTimestamp());
	publish(r->datacenter_id, r->worker_id, r->valid_until, renewal);
}

/* Take an identity; true if one is held now. */
static bool
claim(void)
{
	IdgenRegistryStatus *r = &idgen_shared->registry;
	char		sql[512];
	char		sysid[32];
	char		ttl[32];
	char		dc[16];
	char		w[16];
	char		bound[32];
	const char *params[6];
	char		err[256];
	TimestampTz sent = GetCurrentTimestamp();
	TimestampTz until = lease_bound(sent);
	TimestampTz handover = 0;
	PGresult   *res;

	snprintf(sysid, sizeof(sysid), INT64_FORMAT, system_identifier);
	snprintf(ttl, sizeof(ttl), "%d ms", idgen_registry_ttl_ms);
	snprintf(dc, sizeof(dc), "%d", idgen_layout.datacenter_id);
	snprintf(w, sizeof(w), "%d", idgen_layout.worker_id);
	params[0] = sysid;
	params[1] = instance;
	params[2] = ttl;
	params[3] = idgen_identity_from_registry ? NULL : dc;
	params[4] = idgen_identity_from_registry ? NULL : w;
	ts_param(bound, sizeof(bound), until);
	params[5] = bound;
	snprintf(sql, sizeof(sql),
			 "SELECT datacenter_id, worker_id, token, pg_catalog.date_part('epoch', expires_at), "
			 "pg_catalog.date_part('epoch', pg_catalog.statement_timestamp()), "
			 "pg_catalog.date_part('epoch', handover_horizon) "
			 "FROM %s.idgen_server_lease($1::bigint, $2, $3::interval, $4::int, $5::int, "
			 "pg_catalog.to_timestamp($6::float8))",
			 registry_schema);
	res = run(sql, 6, params, err, sizeof(err));
	if (res == NULL)
	{
		set_state(IDGEN_IDENTITY_UNREACHABLE, "the registry did not answer: %s", err);
		return false;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		set_state(IDGEN_IDENTITY_REFUSED, "the registry refused: %s", result_message(res));
		/* Claims are retried every second: log the first, then every 5 min. */
		if (refusal_logged == 0 || sent - refusal_logged >= 5 * SECS_PER_MINUTE * USECS_PER_SEC)
		{
			ereport(LOG,
					(errmsg("idgen registry refused this server's identity claim"),
					 errdetail("%s", result_message(res)),
					 errhint("Claims are retried every %d ms; see idgen_identity().",
							 Min(REGISTRY_RETRY_MS, idgen_registry_ttl_ms / 3))));
			refusal_logged = sent;
		}
		PQclear(res);
		return false;
	}

	/* A horizon no server could have reached: refuse to generate under it. */
	if (!PQgetisnull(res, 0, 5) && !epoch_in_range(PQgetvalue(res, 0, 5), &handover))
	{
		set_state(IDGEN_IDENTITY_REFUSED,
				  "the registry's horizon for identity (datacenter %s, worker %s) is not a valid time",
				  PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
		ereport(LOG,
				(errmsg("idgen registry answered with an invalid horizon for identity (datacenter %s, worker %s)",
						PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1)),
				 errdetail("The horizon is %s seconds after 1970; the lease is not used and ends by itself.",
						   PQgetvalue(res, 0, 5)),
				 errhint("Check the horizon column of idgen_worker_lease on the registry.")));
		PQclear(res);
		return false;
	}

	SpinLockAcquire(&r->mutex);
	r->datacenter_id = atoi(PQgetvalue(res, 0, 0));
	r->worker_id = atoi(PQgetvalue(res, 0, 1));
	r->token = strtoi64(PQgetvalue(res, 0, 2), NULL, 10);
	SpinLockRelease(&r->mutex);
	refusal_logged = 0;
	lease_file_write(r);

	/*
	 * Start above every ID the identity's earlier holders may have issued,
	 * before any generator can use the lease (publish, in lease_granted, is
	 * a full barrier after the raise).
	 */
	if (!PQgetisnull(res, 0, 5))
	{
		int64		lead_ms;

		lead_ms = idgen_take_over(handover, false);
		if (lead_ms > 0)
			ereport(LOG,
					(errmsg("idgen identity (datacenter %d, worker %d) taken over " INT64_FORMAT " ms ahead of this server's clock",
							r->datacenter_id, r->worker_id, lead_ms),
					 errdetail("Its last holder may have issued IDs up to %s; generators start above that%s.",
							   timestamptz_to_str(handover),
							   lead_ms > idgen_takeover_max_lead_ms ?
							   ", and fail until this server's clock is within idgen.takeover_max_lead of it" :
							   ", ahead of the clock")));
		/* The bound asked for may not cover IDs above 'handover': renew now. */
		renew_at_once = handover + (TimestampTz) idgen_max_drift_ms * 1000 >= sent;
	}
	lease_granted(sent, until, PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4), false);
	ereport(LOG,
			(errmsg("idgen identity (datacenter %d, worker %d) leased from the registry",
					r->datacenter_id, r->worker_id),
			 errdetail("Token " INT64_FORMAT ", ttl %d ms, renewed every %d ms; this server is \"%s\", system identifier " INT64_FORMAT ".",
					   r->token, idgen_registry_ttl_ms, idgen_registry_ttl_ms / 3,
					   instance, system_identifier)));
	PQclear(res);
	return true;
}

/*
 * Renew the lease; false if it was lost (generation stopped) or could not
 * be renewed now (generation goes on until it runs out).
 */
static bool
renew(bool *lost)
{
	IdgenRegistryStatus *r = &idgen_shared->registry;
	char		sql[512];
	char		wid[16];
	char		token[32];
	char		ttl[32];
	char		bound[32];
	const char *params[4];
	char		err[256];
	TimestampTz sent = GetCurrentTimestamp();
	TimestampTz until = lease_bound(sent);
	PGresult   *res;
	const char *sqlstate;

	*lost = false;
	snprintf(wid, sizeof(wid), "%d", r->worker_id);
	snprintf(token, sizeof(token), INT64_FORMAT, r->token);
	snprintf(ttl, sizeof(ttl), "%d ms", idgen_registry_ttl_ms);
	params[0] = wid;
	params[1] = token;
	params[2] = ttl;
	ts_param(bound, sizeof(bound), until);
	params[3] = bound;
	snprintf(sql, sizeof(sql), "SELECT pg_catalog.date_part('epoch', %s.idgen_worker_renew($1::int, $2::bigint, $3::interval, "
			 "pg_catalog.to_timestamp($4::float8))), "
			 "pg_catalog.date_part('epoch', pg_catalog.statement_timestamp())",
			 registry_schema);
	res = run(sql, 4, params, err, sizeof(err));
	if (res == NULL)
	{
		set_state(IDGEN_IDENTITY_UNREACHABLE, "the registry did not answer: %s", err);
		return false;
	}
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
	{
		lease_granted(sent, until, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), true);
		PQclear(res);
		return true;
	}

	/* "lease lost" (55000) or not ours (42501): the id is someone else's. */
	sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (sqlstate != NULL && (strcmp(sqlstate, "55000") == 0 || strcmp(sqlstate, "42501") == 0))
	{
		*lost = true;
		publish(0, 0, 0, false);
		ereport(WARNING,
				(errmsg("idgen identity (datacenter %d, worker %d) lost: generation stopped",
						r->datacenter_id, r->worker_id),
				 errdetail("The registry answered: %s", result_message(res))));
		SpinLockAcquire(&r->mutex);
		r->valid_until = 0;
		r->token = 0;
		SpinLockRelease(&r->mutex);
		lease_file_remove();
	}
	set_state(*lost ? IDGEN_IDENTITY_REFUSED : IDGEN_IDENTITY_UNREACHABLE,
			  "renewal failed: %s", result_message(res));
	PQclear(res);
	return false;
}

/*
 * Stop generating under the lease: withdraw the word, then wait until the
 * clock has passed every tick any generator took (they may run up to
 * idgen.max_drift_ms ahead of it), so that no ID issued under the lease is
 * later than the moment the registry records its end.  Returns the bound of
 * what was issued: the end of the last millisecond of any generator word.
 */
static TimestampTz
withdraw(void)
{
	const IdgenLayout *l = &idgen_layout;
	uint64		max_ms = 0;
	TimestampTz give_up = GetCurrentTimestamp() + (TimestampTz) (idgen_max_drift_ms + 1000) * 1000;

	publish(0, 0, 0, false);
	pg_memory_barrier();
	for (int g = 0; g < idgen_shared->ngenes; g++)
		max_ms = Max(max_ms, pg_atomic_read_u64(&idgen_shared->genes[g]) >> l->sequence_bits);
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();

		if ((uint64) ((now - l->epoch) / 1000) > max_ms || now > give_up)
			break;
		pg_usleep(1000L);
	}
	return l->epoch + (TimestampTz) (max_ms + 1) * 1000;
}

/*
 * At exit: stop generating, then give the lease back, so that the id rests
 * only for the quarantine.  Each step gets a short timeout.  Not after an
 * error (code 1): the worker is restarted and goes on with the lease.
 */
static void
registry_exit(int code, Datum arg)
{
	IdgenRegistryStatus *r = &idgen_shared->registry;

	if (code == 0 && r->token != 0)
	{
		/*
		 * Whether the release certainly did not happen: nothing was sent, or
		 * the registry answered with an error.  Only then may the token be
		 * kept for a worker started again in this postmaster to renew.  A
		 * release sent and not answered may still commit after such a
		 * renewal, and leave the identity free at the registry while this
		 * server generates under it: then the token is dropped, and the
		 * server waits for the lease to run out like any other.
		 */
		bool		not_released = true;
		bool		released = false;
		char		why[256] = "";
		char		bound[32];

		/* Not valid after a takeover ahead of its bound, so the least of both. */
		ts_param(bound, sizeof(bound), Min(withdraw(), Max(r->valid_until, IDGEN_UNIX_EPOCH)));
		/* The postmaster may signal again; the answers are waited for. */
		exiting = true;
		timeout_ms = REGISTRY_EXIT_TIMEOUT_MS;
		round_deadline = GetCurrentTimestamp() + (TimestampTz) REGISTRY_EXIT_TIMEOUT_MS * 1000;
		if (conn == NULL && !connect_registry())
			strlcpy(why, r->message, sizeof(why));
		if (conn != NULL)
		{
			char		sql[512];
			char		wid[16];
			char		token[32];
			const char *params[3] = {wid, token, bound};
			PGresult   *res;

			snprintf(wid, sizeof(wid), "%d", r->worker_id);
			snprintf(token, sizeof(token), INT64_FORMAT, r->token);
			snprintf(sql, sizeof(sql), "SELECT %s.idgen_worker_release($1::int, $2::bigint, "
					 "pg_catalog.to_timestamp($3::float8))",
					 registry_schema);
			res = run(sql, 3, params, why, sizeof(why));
			not_released = (res != NULL && PQresultStatus(res) == PGRES_FATAL_ERROR);
			released = (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK);
			if (res != NULL && !released)
				strlcpy(why, result_message(res), sizeof(why));
			if (res != NULL)
				PQclear(res);
		}
		if (released)
			ereport(LOG,
					(errmsg("idgen identity (datacenter %d, worker %d) released to the registry",
							r->datacenter_id, r->worker_id)));
		else
			ereport(LOG,
					(errmsg("idgen identity (datacenter %d, worker %d) could not be released; it ends when its lease runs out",
							r->datacenter_id, r->worker_id),
					 errdetail("%s", why)));

		SpinLockAcquire(&r->mutex);
		if (!not_released)
			r->token = 0;
		r->valid_until = 0;
		r->state = IDGEN_IDENTITY_STOPPED;
		SpinLockRelease(&r->mutex);
		if (!not_released)
			lease_file_remove();
	}
	disconnect();
	SpinLockAcquire(&r->mutex);
	r->pid = 0;
	SpinLockRelease(&r->mutex);
}

/*
 * Main entry point of the registry worker.
 */
void
idgen_registry_main(Datum main_arg)
{
	IdgenRegistryStatus *r = &idgen_shared->registry;
	char		host[128];
	TimestampTz next = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	system_identifier = (int64) GetSystemIdentifier();
	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "?", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(instance, sizeof(instance), "idgen server %s:%d pid %d started %s",
			 host, PostPortNumber, (int) PostmasterPid, timestamptz_to_str(PgStartTime));

	SpinLockAcquire(&r->mutex);
	r->pid = MyProcPid;
	SpinLockRelease(&r->mutex);
	before_shmem_exit(registry_exit, (Datum) 0);
	if (r->token == 0)
		lease_file_read(r);

	report_bad_conninfo();
	ereport(LOG,
			(errmsg("idgen registry worker started"),
			 errdetail("This server (system identifier " INT64_FORMAT ") takes its identity %s from the registry.",
					   system_identifier,
					   idgen_identity_from_registry ? "(any free one)" :
					   psprintf("(datacenter %d, worker %d, from its settings)",
								idgen_layout.datacenter_id, idgen_layout.worker_id))));

	for (;;)
	{
		TimestampTz now;
		long		wait_ms;
		bool		ok = true;
		int			retry_ms = Min(REGISTRY_RETRY_MS, idgen_registry_ttl_ms / 3);

		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/*
		 * Each statement, and a whole round (connecting, claiming or
		 * renewing), gets at most a third of the ttl: a hung registry costs
		 * one renewal, not the lease.
		 */
		timeout_ms = Min(REGISTRY_TIMEOUT_MS, Max(idgen_registry_ttl_ms / 3, 100));

		now = GetCurrentTimestamp();
		if (now >= next)
		{
			round_deadline = now + (TimestampTz) timeout_ms * 1000;
			if (conn == NULL)
				ok = connect_registry();
			if (ok && r->token == 0)
				ok = claim();
			else if (ok)
			{
				bool		lost;

				ok = renew(&lost);
				if (lost)
				{
					/*
					 * Claim again at once, in a round of its own: with what
					 * is left of this one, the claim could time out here and
					 * still commit at the registry, under a token never
					 * learnt.
					 */
					next = 0;
					continue;
				}
			}
			now = GetCurrentTimestamp();
			next = now + (TimestampTz) (ok ? idgen_registry_ttl_ms / 3 : retry_ms) * 1000;
			if (ok && renew_at_once)
			{
				/* Extend the bound past the horizon taken over. */
				renew_at_once = false;
				next = now;
			}
		}
		wait_ms = (long) ((next - now) / 1000) + 1;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wait_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	/*
	 * Give the lease back (registry_exit, code 0), and exit with 1 so that
	 * the postmaster starts the worker again unless it is shutting down: a
	 * SIGTERM outside a shutdown must not leave the server without one.
	 */
	registry_exit(0, (Datum) 0);
	proc_exit(1);
}

/*
 * Register the registry worker when the identity is leased; called from
 * _PG_init in the postmaster.  It needs no database; it starts at once, so
 * that a standby (which can generate) has its identity too.
 */
void
idgen_registry_register(void)
{
	if (identity_is_leased())
		idgen_register_worker("idgen registry", "idgen_registry_main", BGWORKER_SHMEM_ACCESS,
							  BgWorkerStart_PostmasterStart, 1);
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
	if (visible_message(&copy))
		values[i++] = CStringGetTextDatum(visible_message(&copy));
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
