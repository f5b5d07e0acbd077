/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The "idgen registry" background process: claims this server's
 *	  identity from the registry, renews it, and releases it at shutdown;
 *	  keeps the lease file.  Its state is published through identity.c,
 *	  which holds the shared state; its connection is remote.c's.
 *
 * The lease
 *	  The process calls idgen_server_lease(system_identifier, instance, ttl
 *	  [, datacenter, worker]) on the registry, then idgen_worker_renew every
 *	  ttl / 3.  'instance' names this postmaster (host, port, pid, start
 *	  time), for people.  The token the registry gives out is the only way
 *	  to renew or release the lease; it is kept in shared memory and in the
 *	  file idgen.lease with a random number the postmaster drew at start, so
 *	  that after a crash and restart of this postmaster (shared memory
 *	  re-created) the process renews its lease, while a copy of the data
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
 * Withdrawal
 *	  Withdrawing the lease (a release, at shutdown) writes 0, then waits until the
 *	  clock has passed every tick issued, then releases: a tick taken
 *	  before the 0 was seen is in a generator word the process reads after
 *	  writing it (a compare-and-swap and a full barrier on either side), and
 *	  generators may run up to idgen.max_drift ahead of the clock.
 *
 * Standbys
 *	  A server in recovery whose identity comes from its settings does not
 *	  claim it until it is promoted.  A standby has its primary's settings
 *	  (pg_basebackup copies them), so the identity it would claim is its
 *	  primary's: were the primary's registry process to stop for longer
 *	  than the ttl and the quarantine (a network partition), the standby
 *	  would take it, and the primary, back, would be refused for as long
 *	  as the standby lived.  A standby that leases any free identity
 *	  (idgen.identity = 'registry') claims one in recovery, and generates
 *	  under it.
 *
 * Clock
 *	  The next holder of an identity starts no earlier than the registry's
 *	  expiry plus the quarantine (10 s by default): IDs of the two can only
 *	  meet if this server's clock is ahead of the next one's by more than
 *	  the quarantine minus idgen.max_drift.  The process measures this
 *	  server's clock against the registry's at every renewal and reports it
 *	  in idgen_identity().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_bgworker.h"
#include "idgen_clock.h"
#include "idgen_identity.h"
#include "idgen_layout.h"
#include "idgen_remote.h"
#include "idgen_shmem.h"

PGDLLEXPORT void idgen_registry_main(Datum main_arg);

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


/* A random name for this postmaster (idgen_registry_init). */
static uint64 postmaster_nonce = 0;

/* What the process learnt on connecting, and its current step timeout. */
static char registry_schema[NAMEDATALEN * 2 + 3];
static int	timeout_ms = REGISTRY_TIMEOUT_MS;	/* set from the ttl in the
												 * loop */

/* ----------
 * Connecting
 * ----------
 */
/* Say in the server log that idgen.registry is not valid (at start). */
static void
report_bad_conninfo(void)
{
	char		why[256];
	bool		parsed;

	if (idgen_conninfo_valid(idgen_registry, &parsed, why, sizeof(why)))
		return;
	ereport(WARNING,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("\"idgen.registry\" is not a valid connection string"),
			 parsed ?
			 errdetail("libpq parses it, but %s: it would quote the value in its messages, and the value can be part of a password.", why) :
			 errdetail("libpq could not parse it (%s). Its own message is not shown, as it can contain the password.", why),
			 errhint("Correct the setting and restart the server; psql \"<the string>\", run by hand, shows what is wrong. "
					 "In a URI, a password's \"@\", \"/\", \"?\" and \"%%\" must be percent-encoded. "
					 "This server generates no Snowflake ID until then.")));
}

/* Run 'sql' at the registry; NULL, with the state set, if it did not answer. */
static PGresult *
registry_run(const char *sql, int nparams, const char *const *values)
{
	char		err[256];
	PGresult   *res = idgen_remote_run(sql, nparams, values, err, sizeof(err));

	if (res == NULL)
		idgen_identity_set_state(IDGEN_IDENTITY_UNREACHABLE, "the registry did not answer: %s", err);
	return res;
}

/* The registry's side of a statement gives up when we do. */
static bool
set_registry_timeouts(void)
{
	char		ms[32];
	const char *params[1] = {ms};
	PGresult   *res;

	snprintf(ms, sizeof(ms), "%dms", timeout_ms);
	res = registry_run("SELECT pg_catalog.set_config('statement_timeout', $1, false), "
					   "pg_catalog.set_config('lock_timeout', $1, false)", 1, params);
	if (res == NULL)
		return false;
	PQclear(res);
	return true;
}

/* Find the schema of the registry's idgen extension (registry_schema). */
static bool
find_registry_schema(void)
{
	PGresult   *res;

	res = registry_run("SELECT pg_catalog.quote_ident(n.nspname) "
					   "FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n "
					   "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
					   "WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'", 0, NULL);
	if (res == NULL)
		return false;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		idgen_identity_set_state(IDGEN_IDENTITY_REFUSED, "%s",
								 PQresultStatus(res) != PGRES_TUPLES_OK ? idgen_remote_result_message(res) :
								 "the idgen extension is not installed in the registry's database");
		PQclear(res);
		idgen_remote_disconnect();
		return false;
	}
	strlcpy(registry_schema, PQgetvalue(res, 0, 0), sizeof(registry_schema));
	PQclear(res);
	return true;
}

/*
 * Check the registry's layout is this server's.  idgen_info() loads the
 * library, so the registry's layout is known.  It must be this server's:
 * identities from it must fit, and servers that share a registry must make
 * IDs of one layout, or equal IDs could come from different identities.
 */
static bool
check_registry_layout(void)
{
	char		sql[512];
	char		mine[128];
	PGresult   *res;

	snprintf(sql, sizeof(sql), "SELECT %s FROM %s.idgen_info()",
			 idgen_layout_fingerprint_sql, registry_schema);
	res = registry_run(sql, 0, NULL);
	if (res == NULL)
		return false;
	idgen_layout_fingerprint(&idgen_layout, mine, sizeof(mine));
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		strcmp(PQgetvalue(res, 0, 0), mine) == 0)
	{
		PQclear(res);
		return true;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		idgen_identity_set_state(IDGEN_IDENTITY_REFUSED, "%s", idgen_remote_result_message(res));
	else
		idgen_identity_set_state(IDGEN_IDENTITY_REFUSED,
								 "the registry's Snowflake layout (timestamp, datacenter, worker, sequence and gene bits, epoch in ms) is %s, this server's %s: servers sharing a registry must have one layout",
								 PQgetvalue(res, 0, 0), mine);
	PQclear(res);
	idgen_remote_disconnect();
	return false;
}

/*
 * Connect, find the extension's schema and check the registry's layout has
 * the same identity space; false (with the state set) if not.
 */
static bool
connect_registry(void)
{
	char		err[256];
	bool		parsed;

	if (idgen_registry == NULL || idgen_registry[0] == '\0')
	{
		idgen_identity_set_state(IDGEN_IDENTITY_UNREACHABLE,
								 "\"idgen.identity\" is 'registry' but \"idgen.registry\" (the registry's connection string) is not set");
		return false;
	}
	if (!idgen_conninfo_valid(idgen_registry, &parsed, err, sizeof(err)))
	{
		idgen_identity_set_state(IDGEN_IDENTITY_UNREACHABLE,
								 "\"idgen.registry\" is not a valid connection string (%s); see the server log", err);
		return false;
	}
	if (!idgen_remote_connect(idgen_registry, "idgen registry", "the registry", err, sizeof(err)))
	{
		idgen_identity_set_state(IDGEN_IDENTITY_UNREACHABLE, "%s", err);
		return false;
	}
	return set_registry_timeouts() && find_registry_schema() && check_registry_layout();
}

/* ----------
 * The lease
 * ----------
 */
static int64 system_identifier;
static char instance[256];
static bool renew_at_once = false;	/* a claim took over a horizon ahead of
									 * its bound */

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
	IdgenRegistryStatus *r = idgen_registry_status;
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
		fprintf(f, UINT64_FORMAT " " INT64_FORMAT " %d %d\n", postmaster_nonce,
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
 * another).  The process renews it next; it is not valid before.
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
		nonce == postmaster_nonce && token > 0)
	{
		SpinLockAcquire(&r->mutex);
		r->token = token;
		r->datacenter_id = dc;
		r->worker_id = w;
		SpinLockRelease(&r->mutex);
		ereport(LOG,
				(errmsg("idgen registry resumes the lease on (datacenter %d, worker %d) after a restart",
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
	IdgenRegistryStatus *r = idgen_registry_status;

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
	idgen_identity_publish(r->datacenter_id, r->worker_id, r->valid_until, renewal);
}

/*
 * Ask the registry for a lease sent at 'sent' with bound 'until'; the
 * answer's row (datacenter, worker, token, expiry, the registry's clock,
 * the handover horizon), or NULL with the state set.
 */
static PGresult *
claim_query(TimestampTz until)
{
	char		sql[512];
	char		sysid[32];
	char		ttl[32];
	char		dc[16];
	char		w[16];
	char		bound[32];
	const char *params[6];
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
	res = registry_run(sql, 6, params);
	if (res == NULL)
		return NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		idgen_identity_set_state(IDGEN_IDENTITY_REFUSED, "the registry refused: %s", idgen_remote_result_message(res));
		PQclear(res);
		return NULL;
	}
	return res;
}

/*
 * Start above every ID the identity's earlier holders may have issued,
 * up to 'handover', before any generator can use the lease (publish, in
 * lease_granted, is a full barrier after the raise).  'sent' is when the
 * claim was sent.
 */
static void
take_over_handover(TimestampTz handover, TimestampTz sent)
{
	IdgenRegistryStatus *r = idgen_registry_status;
	int64		lead_ms = idgen_take_over(handover, false, IDGEN_TAKEOVER_REGISTRY);

	if (lead_ms > idgen_takeover_max_lead_ms)
		ereport(LOG,
				(errmsg("idgen identity (datacenter %d, worker %d) taken over " INT64_FORMAT " ms ahead of this server's clock",
						r->datacenter_id, r->worker_id, lead_ms),
				 errdetail("Its last holder may have issued IDs up to %s; generators start above that, and fail until this server's clock is within \"idgen.takeover_max_lead\" of it.",
						   timestamptz_to_str(handover))));
	else if (lead_ms > 0)
		ereport(LOG,
				(errmsg("idgen identity (datacenter %d, worker %d) taken over " INT64_FORMAT " ms ahead of this server's clock",
						r->datacenter_id, r->worker_id, lead_ms),
				 errdetail("Its last holder may have issued IDs up to %s; generators start above that, ahead of the clock.",
						   timestamptz_to_str(handover))));
	/* The bound asked for may not cover IDs above 'handover': renew now. */
	renew_at_once = handover + (TimestampTz) idgen_max_drift_ms * 1000 >= sent;
}

/* Take an identity; true if one is held now. */
static bool
claim(void)
{
	IdgenRegistryStatus *r = idgen_registry_status;
	TimestampTz sent = GetCurrentTimestamp();
	TimestampTz until = lease_bound(sent);
	TimestampTz handover = 0;
	PGresult   *res = claim_query(until);

	if (res == NULL)
		return false;

	/* A horizon no server could have reached: refuse to generate under it. */
	if (!PQgetisnull(res, 0, 5) && !epoch_in_range(PQgetvalue(res, 0, 5), &handover))
	{
		idgen_identity_set_state(IDGEN_IDENTITY_REFUSED,
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
	lease_file_write(r);

	if (!PQgetisnull(res, 0, 5))
		take_over_handover(handover, sent);
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
	IdgenRegistryStatus *r = idgen_registry_status;
	char		sql[512];
	char		wid[16];
	char		token[32];
	char		ttl[32];
	char		bound[32];
	const char *params[4];
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
	res = registry_run(sql, 4, params);
	if (res == NULL)
		return false;
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
		idgen_identity_publish(0, 0, 0, false);
		ereport(WARNING,
				(errmsg("idgen identity (datacenter %d, worker %d) lost: generation stopped",
						r->datacenter_id, r->worker_id),
				 errdetail("The registry answered: %s", idgen_remote_result_message(res))));
		SpinLockAcquire(&r->mutex);
		r->valid_until = 0;
		r->token = 0;
		SpinLockRelease(&r->mutex);
		lease_file_remove();
	}
	idgen_identity_set_state(*lost ? IDGEN_IDENTITY_REFUSED : IDGEN_IDENTITY_UNREACHABLE,
							 "renewal failed: %s", idgen_remote_result_message(res));
	PQclear(res);
	return false;
}

/* ----------
 * The log of failures
 * ----------
 */
#define FAILURE_LOG_REPEAT_US	((TimestampTz) 5 * SECS_PER_MINUTE * USECS_PER_SEC)

static IdgenIdentityState logged_state; /* the failure last logged */
static char logged_message[sizeof(((IdgenRegistryStatus *) 0)->message)];
static TimestampTz logged_at = 0;	/* 0: no failure since the lease was held */
static uint64 failures_before = 0;	/* the count before the first of them */

/*
 * Whether two messages are the same failure: the same once digits are left
 * out, as a refusal names the holder's expiry, which moves at every one of
 * its renewals.
 */
static bool
same_failure(const char *a, const char *b)
{
	for (;;)
	{
		while (isdigit((unsigned char) *a))
			a++;
		while (isdigit((unsigned char) *b))
			b++;
		if (*a != *b)
			return false;
		if (*a == '\0')
			return true;
		a++;
		b++;
	}
}

/*
 * Log the failure the last round left in the shared state, if it is not the
 * one logged last (another state, or another message) or that was 5
 * minutes ago; and that the identity is held again after failures.  The
 * process retries every second or faster, so logging every failure would
 * flood the log.  The message is the one idgen_identity() shows, from
 * remote.c: the connection string's values are hidden.
 */
static void
log_failures(void)
{
	IdgenRegistryStatus *r = idgen_registry_status;
	IdgenRegistryStatus copy;
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&r->mutex);
	copy = *r;
	SpinLockRelease(&r->mutex);

	if (copy.state == IDGEN_IDENTITY_HELD && logged_at != 0)
	{
		uint64		n = copy.failures - failures_before;

		ereport(LOG,
				(errmsg_plural("idgen registry holds identity (datacenter %d, worker %d) again after " UINT64_FORMAT " failure",
							   "idgen registry holds identity (datacenter %d, worker %d) again after " UINT64_FORMAT " failures",
							   (unsigned long) n, copy.datacenter_id, copy.worker_id, n)));
		logged_at = 0;
	}
	if (copy.state != IDGEN_IDENTITY_REFUSED && copy.state != IDGEN_IDENTITY_UNREACHABLE)
		return;
	if (logged_at == 0)
		failures_before = copy.failures - 1;
	else if (copy.state == logged_state && same_failure(copy.message, logged_message) &&
			 now - logged_at < FAILURE_LOG_REPEAT_US)
		return;
	ereport(LOG,
			(errmsg(copy.state == IDGEN_IDENTITY_REFUSED ? "idgen registry is refused by the registry" :
					"idgen registry cannot reach the registry"),
			 errdetail("%s", copy.message),
			 errhint("It tries again every %d ms; the same failure is logged again after 5 minutes. See idgen_identity().",
					 Min(REGISTRY_RETRY_MS, idgen_registry_ttl_ms / 3))));
	logged_state = copy.state;
	strlcpy(logged_message, copy.message, sizeof(logged_message));
	logged_at = now;
}

/*
 * Stop generating under the lease: withdraw the word, then wait until the
 * clock has passed every tick any generator took (they may run up to
 * idgen.max_drift ahead of it), so that no ID issued under the lease is
 * later than the moment the registry records its end.  Returns the bound of
 * what was issued: the end of the last millisecond of any generator word.
 */
static TimestampTz
withdraw(void)
{
	const IdgenLayout *l = &idgen_layout;
	uint64		max_ms = 0;
	TimestampTz give_up = GetCurrentTimestamp() + (TimestampTz) (idgen_max_drift_ms + 1000) * 1000;

	idgen_identity_publish(0, 0, 0, false);
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
 * At a shutdown request: stop generating, then give the lease back, so that
 * the id rests only for the quarantine.  Each step gets a short timeout.
 * Not after an error: the process is started again and goes on with the
 * lease.
 */
static void
release_lease(void)
{
	IdgenRegistryStatus *r = idgen_registry_status;

	if (r->token != 0)
	{
		/*
		 * Whether the release certainly did not happen: nothing was sent, or
		 * the registry answered with an error.  Only then may the token be
		 * kept for a process started again in this postmaster to renew.  A
		 * release sent and not answered may still commit after such a
		 * renewal, and leave the identity free at the registry while this
		 * server generates under it: then the token is dropped, and the
		 * server waits for the lease to run out like any other.
		 */
		bool		not_released = true;
		bool		released = false;
		char		why[256] = "";
		char		bound[32];

		/*
		 * Not valid after a takeover ahead of its bound, so the least of
		 * both.
		 */
		ts_param(bound, sizeof(bound), Min(withdraw(), Max(r->valid_until, IDGEN_UNIX_EPOCH)));
		/* The postmaster may signal again; the answers are waited for. */
		timeout_ms = REGISTRY_EXIT_TIMEOUT_MS;
		idgen_remote_set_limits(timeout_ms,
								GetCurrentTimestamp() + (TimestampTz) timeout_ms * 1000, true);
		if (!idgen_remote_connected() && !connect_registry())
			strlcpy(why, r->message, sizeof(why));
		if (idgen_remote_connected())
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
			res = idgen_remote_run(sql, 3, params, why, sizeof(why));
			not_released = (res != NULL && PQresultStatus(res) == PGRES_FATAL_ERROR);
			released = (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK);
			if (res != NULL && !released)
				strlcpy(why, idgen_remote_result_message(res), sizeof(why));
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
}

/* At any exit: close the connection, and say there is no process. */
static void
registry_exit(int code, Datum arg)
{
	IdgenRegistryStatus *r = idgen_registry_status;

	idgen_remote_disconnect();
	SpinLockAcquire(&r->mutex);
	r->pid = 0;
	SpinLockRelease(&r->mutex);
}

/*
 * SIGUSR1: a generator found the lease held but behind its clock, which
 * jumped forward (identity.c); run the loop now, which renews the lease as
 * its renewal is due by this clock.  (A background process without a
 * database connection ignores SIGUSR1 otherwise.)
 */
static void
registry_sigusr1(SIGNAL_ARGS)
{
	int			save_errno = errno;

	SetLatch(MyLatch);
	errno = save_errno;
}

/*
 * At the start of the process: name this server for the registry, publish
 * the pid, take over the lease file of this postmaster, and say so.
 */
static void
registry_start(void)
{
	IdgenRegistryStatus *r = idgen_registry_status;
	char		host[128];

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
	if (idgen_identity_from_registry)
		ereport(LOG,
				(errmsg("idgen registry started"),
				 errdetail("This server (system identifier " INT64_FORMAT ") takes its identity (any free one) from the registry.",
						   system_identifier)));
	else
		ereport(LOG,
				(errmsg("idgen registry started"),
				 errdetail("This server (system identifier " INT64_FORMAT ") takes its identity (datacenter %d, worker %d, from its settings) from the registry.",
						   system_identifier, idgen_layout.datacenter_id, idgen_layout.worker_id)));
}

/*
 * One round: connect if need be, then claim or renew.  Returns when the
 * next round is due; 0 for at once (a lease lost: claim again, in a round
 * of its own).
 */
static TimestampTz
registry_round(TimestampTz now)
{
	IdgenRegistryStatus *r = idgen_registry_status;
	bool		ok = true;
	bool		standby = false;
	int			retry_ms = Min(REGISTRY_RETRY_MS, idgen_registry_ttl_ms / 3);
	TimestampTz next;

	idgen_remote_set_limits(timeout_ms, now + (TimestampTz) timeout_ms * 1000, false);
	if (!idgen_remote_connected())
		ok = connect_registry();
	if (ok && r->token == 0 && !idgen_identity_from_registry && RecoveryInProgress())
	{
		/* See "Standbys" in the file header; checked every round. */
		idgen_identity_set_state(IDGEN_IDENTITY_STANDBY,
								 "this server is in recovery: it claims the identity of its settings (its primary's) once promoted");
		ok = false;
		standby = true;
	}
	else if (ok && r->token == 0)
		ok = claim();
	else if (ok)
	{
		bool		lost;

		ok = renew(&lost);

		/*
		 * Claim again at once, in a round of its own: with what is left of
		 * this one, the claim could time out here and still commit at the
		 * registry, under a token never learnt.
		 */
		if (lost)
			return 0;
	}
	now = GetCurrentTimestamp();
	/* A standby claims within 100 ms of its promotion. */
	next = now + (TimestampTz) (ok ? idgen_registry_ttl_ms / 3 :
								standby ? 100 : retry_ms) * 1000;
	if (ok && renew_at_once)
	{
		/* Extend the bound past the horizon taken over. */
		renew_at_once = false;
		next = now;
	}
	log_failures();
	return next;
}

/*
 * Main entry point of the registry process.
 */
void
idgen_registry_main(Datum main_arg)
{
	TimestampTz next = 0;

	/*
	 * SIGTERM ends it after a round, with its lease given back: it holds
	 * interrupts for good (bgworker.c), and its waits for the registry end at
	 * ShutdownRequestPending (remote.c).
	 */
	HOLD_INTERRUPTS();
	pqsignal(SIGUSR1, registry_sigusr1);
	idgen_bgworker_signals();
	registry_start();

	for (;;)
	{
		TimestampTz now;
		long		wait_ms;

		if (idgen_bgworker_stopping())
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
			next = registry_round(now);
			if (next == 0)
				continue;
			now = GetCurrentTimestamp();
		}
		wait_ms = (long) ((next - now) / 1000) + 1;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wait_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	/*
	 * Give the lease back, and exit with 1 so that the postmaster starts the
	 * process again unless it is shutting down: a SIGTERM outside a shutdown
	 * must not leave the server without one.
	 */
	release_lease();
	proc_exit(1);
}

/*
 * Called from _PG_init when preloading: if the identity is leased, name
 * this postmaster, and register the process.  It needs no database; it
 * starts at once, so that a standby (which can generate) has its identity
 * too.
 */
void
idgen_registry_init(void)
{
	if (!process_shared_preload_libraries_in_progress || !idgen_identity_is_leased())
		return;

	/*
	 * A random name for this postmaster, inherited by its children and kept
	 * across crash restarts: whose lease file it is.  With EXEC_BACKEND every
	 * child draws its own, so the lease file is never used there: safe, only
	 * slower after a crash.
	 */
	if (!pg_strong_random(&postmaster_nonce, sizeof(postmaster_nonce)))
		postmaster_nonce = (uint64) GetCurrentTimestamp() ^ ((uint64) MyProcPid << 32);
	idgen_register_process("idgen registry", "idgen_registry_main", BGWORKER_SHMEM_ACCESS,
						   BgWorkerStart_PostmasterStart, 1);
}
