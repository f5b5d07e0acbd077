/*-------------------------------------------------------------------------
 *
 * remote.c
 *	  One libpq connection from a background process to another server,
 *	  waited on with the process's latch: the registry process's connection
 *	  to the registry (registry_worker.c).
 *
 * Nothing here blocks: a connection is started with PQconnectStartParams
 * and polled, a statement sent with PQsendQueryParams and its result read
 * as it arrives, each wait a WaitLatchOrSocket that ends at the step's
 * deadline, on a shutdown request, or with the postmaster.  So a registry
 * that does not answer delays the process by at most the timeout it set
 * (idgen_remote_set_limits), never indefinitely, and the process still
 * answers SIGTERM.  A step that fails or times out drops the connection;
 * the caller connects again.
 *
 * Messages from libpq can name host, port and user but never the password,
 * except the one PQconninfoParse gives for a string it cannot parse, which
 * quotes the string: idgen_conninfo_valid says what is wrong without it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "idgen_remote.h"

static PGconn *conn = NULL;
static int	timeout_ms = 10000;			/* a step's own timeout */
static TimestampTz round_deadline = 0;	/* every step ends by then (0: none) */
static bool exiting = false;	/* a shutdown request interrupts nothing */

/*
 * Set how long each step (a connection, a statement) may take, and the
 * deadline of the round of steps now beginning (0: none).  With 'exiting',
 * a shutdown request no longer interrupts a step: the process is using
 * its last moments to release what it holds.
 */
void
idgen_remote_set_limits(int step_timeout_ms, TimestampTz deadline, bool is_exiting)
{
	timeout_ms = step_timeout_ms;
	round_deadline = deadline;
	exiting = is_exiting;
}

/* When the step beginning now must be done: its own timeout, within the round's. */
static TimestampTz
step_deadline(void)
{
	TimestampTz deadline = GetCurrentTimestamp() + (TimestampTz) timeout_ms * 1000;

	return round_deadline != 0 ? Min(deadline, round_deadline) : deadline;
}

/* Wait until the connection is readable or writable; false on timeout or shutdown. */
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

bool
idgen_remote_connected(void)
{
	return conn != NULL;
}

void
idgen_remote_disconnect(void)
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
 * Connect to 'conninfo' (a connection string or a database name), naming
 * the connection 'application_name' unless the string does; false, with
 * the reason in 'err' (a sentence naming the server 'what'), if that failed
 * or did not finish in time.
 */
bool
idgen_remote_connect(const char *conninfo, const char *application_name, const char *what,
					 char *err, size_t errlen)
{
	const char *keys[] = {"dbname", "fallback_application_name", NULL};
	const char *vals[] = {conninfo, application_name, NULL};
	TimestampTz deadline = step_deadline();
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;

	idgen_remote_disconnect();
	conn = PQconnectStartParams(keys, vals, 1);
	if (conn == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return false;
	}
	while (st != PGRES_POLLING_OK)
	{
		if (st == PGRES_POLLING_FAILED || PQstatus(conn) == CONNECTION_BAD)
		{
			snprintf(err, errlen, "could not connect to %s: %s", what, pq_message(PQerrorMessage(conn)));
			idgen_remote_disconnect();
			return false;
		}
		if (!wait_socket(st == PGRES_POLLING_WRITING, deadline))
		{
			snprintf(err, errlen, "could not connect to %s within %d ms", what, timeout_ms);
			idgen_remote_disconnect();
			return false;
		}
		st = PQconnectPoll(conn);
	}
	return true;
}

/*
 * Run 'sql' with text parameters; the result (the caller clears it), or
 * NULL with the connection dropped when the server could not answer.
 */
PGresult *
idgen_remote_run(const char *sql, int nparams, const char *const *values, char *err, size_t errlen)
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
	idgen_remote_disconnect();
	return NULL;
timeout:
	if (res != NULL)
		PQclear(res);
	if (ShutdownRequestPending && !exiting)
		snprintf(err, errlen, "shutting down");
	else
		snprintf(err, errlen, "no answer within %d ms", timeout_ms);

	/*
	 * No PQcancel(): it blocks (connect, send, wait for EOF) with no timeout,
	 * and the server's side of the statement ends by itself, as it runs
	 * with the same statement_timeout and lock_timeout (the caller sets them
	 * on connecting).
	 */
	idgen_remote_disconnect();
	return NULL;
}

/* "message: detail" of a failed result. */
const char *
idgen_remote_result_message(const PGresult *res)
{
	static char buf[256];
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);

	snprintf(buf, sizeof(buf), "%s%s%s", msg ? msg : pq_message(PQresultErrorMessage(res)),
			 detail ? ": " : "", detail ? detail : "");
	return buf;
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
 * Whether 'conninfo' is a connection string libpq can parse; if not,
 * 'why' describes it without libpq's own message, which quotes the part it
 * could not parse and so may repeat the password: it names only the
 * keywords read before the fault (the words before an "=" that libpq
 * knows; any other word may be part of a password), or says that it is a
 * URI.
 */
bool
idgen_conninfo_valid(const char *conninfo, char *why, size_t len)
{
	char	   *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
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
	if (strchr(conninfo, '=') == NULL &&
		strncmp(conninfo, "postgresql://", 13) != 0 &&
		strncmp(conninfo, "postgres://", 11) != 0)
		return true;

	initStringInfo(&keys);
	if (strncmp(conninfo, "postgresql://", 13) == 0 ||
		strncmp(conninfo, "postgres://", 11) == 0)
		appendStringInfoString(&keys, "it is a URI");
	else
	{
		/* keyword = value pairs as libpq reads them, up to the first fault */
		p = conninfo;
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

