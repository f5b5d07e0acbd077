/*-------------------------------------------------------------------------
 *
 * remote.c
 *	  One libpq connection from a background process to another server,
 *	  waited on with the process's latch: the registry process's connection
 *	  to the registry (registry.c).
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
 * Messages from libpq and the remote server name host, port and user, and
 * can quote other values of the connection string, any of which may be
 * part of a password its author did not quote or percent-encode as libpq
 * expects.  So idgen_conninfo_valid refuses a string libpq cannot parse
 * (libpq's message quotes the string) or whose host, port or other checked
 * value libpq would misread and quote; and every message from libpq or the
 * server passes through hide_values before it leaves this file, which
 * replaces the values of all other options, the password's among them,
 * by "***".  Callers connect only with a string idgen_conninfo_valid
 * accepted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <netdb.h>

#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "idgen_remote.h"

static PGconn *conn = NULL;
static int	timeout_ms = 10000; /* a step's own timeout */
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
	/* the process holds interrupts: SIGTERM ends a wait here (bgworker.c) */
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
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

/* ----------
 * Values libpq would misread
 * ----------
 */

/*
 * The options whose values libpq takes from a fixed set, with the set (as
 * of libpq 19).  libpq quotes any other value in its message.
 */
static const struct
{
	const char *keyword;
	const char *values[7];		/* up to a NULL */
}			enum_options[] =

{
	{"sslmode", {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}},
	{"gssencmode", {"disable", "prefer", "require"}},
	{"channel_binding", {"disable", "prefer", "require"}},
	{"sslcertmode", {"disable", "allow", "require"}},
	{"sslnegotiation", {"postgres", "direct"}},
	{"target_session_attrs", {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}},
	{"load_balance_hosts", {"disable", "random"}},
	{"ssl_min_protocol_version", {"TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}},
	{"ssl_max_protocol_version", {"TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}},
};

/* The options libpq reads as integers ("port": a list of them). */
static const char *const int_options[] = {
	"port", "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
	"keepalives_count", "tcp_user_timeout"
};

/* enum_options' entry for 'keyword', or -1. */
static int
enum_option(const char *keyword)
{
	for (int i = 0; i < (int) lengthof(enum_options); i++)
		if (strcmp(keyword, enum_options[i].keyword) == 0)
			return i;
	return -1;
}

static bool
is_int_option(const char *keyword)
{
	for (size_t i = 0; i < lengthof(int_options); i++)
		if (strcmp(keyword, int_options[i]) == 0)
			return true;
	return false;
}

/* Whether idgen_conninfo_valid checks the values of 'keyword'. */
static bool
is_checked_option(const char *keyword)
{
	return enum_option(keyword) >= 0 || is_int_option(keyword);
}

/*
 * Whether 'v' is in enum_options[i]'s set, or empty.  Case is ignored (as
 * libpq does for the TLS versions): a value that differs from one of the
 * set only in case is no secret.
 */
static bool
is_known_value(int i, const char *v)
{
	if (v[0] == '\0')
		return true;
	for (size_t j = 0; j < lengthof(enum_options[i].values) && enum_options[i].values[j]; j++)
		if (pg_strcasecmp(v, enum_options[i].values[j]) == 0)
			return true;
	return false;
}

/*
 * Whether the 'len' bytes at 'v' are decimal digits, or none.  libpq also
 * takes a sign and white space around them, which no setting needs.
 */
static bool
is_digits(const char *v, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char) v[i]))
			return false;
	return true;
}

/*
 * Whether the 'len' bytes at 'v' can be a host: an "@" is only the first
 * character of an abstract Unix socket's name.  Elsewhere it comes from a
 * URI whose password has an unencoded "@": libpq reads the password's rest
 * as the host, and quotes it when it cannot be resolved.
 */
static bool
is_host(const char *v, size_t len)
{
	return len <= 1 || memchr(v + 1, '@', len - 1) == NULL;
}

/* Whether the 'len' bytes at 'v' are a numeric IP address, or none (as libpq reads hostaddr). */
static bool
is_numeric_address(const char *v, size_t len)
{
	char		addr[128];
	struct addrinfo hints = {0};
	struct addrinfo *res;

	if (len == 0)
		return true;
	if (len >= sizeof(addr))
		return false;
	memcpy(addr, v, len);
	addr[len] = '\0';
	hints.ai_flags = AI_NUMERICHOST;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(addr, NULL, &hints, &res) != 0)
		return false;
	freeaddrinfo(res);
	return true;
}

/* Whether each comma-separated element of 'list' passes 'ok'. */
static bool
each_element(const char *list, bool (*ok) (const char *v, size_t len))
{
	for (;;)
	{
		size_t		n = strcspn(list, ",");

		if (!ok(list, n))
			return false;
		if (list[n] == '\0')
			return true;
		list += n + 1;
	}
}

/*
 * Whether libpq would read the value of 'o' as its author meant, as far as
 * can be told, and so not quote it in a message; if not, 'why' names the
 * keyword, never the value.  A password with a space before "port=" (not
 * quoted), or with an unencoded "/" in a URI, gives libpq a port that is
 * part of the password; one with a space before "sslmode=", an sslmode.
 */
static bool
value_as_meant(const PQconninfoOption *o, char *why, size_t len)
{
	const char *fault = NULL;
	int			e = enum_option(o->keyword);

	if (strcmp(o->keyword, "host") == 0 && !each_element(o->val, is_host))
		fault = "has an \"@\" after its first character";
	else if (strcmp(o->keyword, "hostaddr") == 0 && !each_element(o->val, is_numeric_address))
		fault = "is not a numeric address";
	else if (strcmp(o->keyword, "port") == 0 ? !each_element(o->val, is_digits) :
			 is_int_option(o->keyword) && !is_digits(o->val, strlen(o->val)))
		fault = "is not a number";
	else if (e >= 0 && !is_known_value(e, o->val))
		fault = "is not a value libpq knows";
	if (fault == NULL)
		return true;
	snprintf(why, len, "its \"%s\" %s", o->keyword, fault);
	return false;
}

/* ----------
 * Hiding the connection string's values in messages
 * ----------
 */

/*
 * What hide_values replaces: the values of the connection string last
 * connected with, and every word of them, in hidden_cxt.
 */
static MemoryContext hidden_cxt = NULL;
static List *hidden = NIL;

/*
 * Keywords whose values messages may show: they say which server and role
 * (a host holding a password's "@" is refused first), or idgen_conninfo_valid
 * checked them against libpq's own set.
 */
static bool
value_shown(const char *keyword)
{
	static const char *const shown[] = {"host", "hostaddr", "port", "user", "dbname"};

	for (size_t i = 0; i < lengthof(shown); i++)
		if (strcmp(keyword, shown[i]) == 0)
			return true;
	return is_checked_option(keyword);
}

/*
 * Hide 'len' bytes at 'v' from now on.  Not fewer than 3: shorter ones are
 * part of too many words to be hidden, and no password worth the name.
 */
static void
hide(const char *v, size_t len)
{
	if (len >= 3)
		hidden = lappend(hidden, pnstrdup(v, len));
}

/*
 * Hide the values of 'conninfo' but those value_shown names: each whole,
 * and each word of it, as a server may quote one word ("-c name=value" in
 * options gives 'invalid value for parameter "name": "value"').  A bare
 * database name has nothing to hide.
 */
static void
hide_values_of(const char *conninfo)
{
	PQconninfoOption *opts;
	MemoryContext old;

	if (hidden_cxt == NULL)
		hidden_cxt = AllocSetContextCreate(TopMemoryContext, "idgen remote", ALLOCSET_SMALL_SIZES);
	MemoryContextReset(hidden_cxt);
	hidden = NIL;
	opts = PQconninfoParse(conninfo, NULL);
	if (opts == NULL)
		return;
	old = MemoryContextSwitchTo(hidden_cxt);
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
	{
		const char *separators = " \t\n\r\f\v=,'\"\\";

		if (o->val == NULL || value_shown(o->keyword))
			continue;
		hide(o->val, strlen(o->val));
		for (const char *w = o->val; *w; w += strspn(w, separators))
		{
			size_t		n = strcspn(w, separators);

			hide(w, n);
			w += n;
		}
	}
	MemoryContextSwitchTo(old);
	PQconninfoFree(opts);
}

/*
 * 'msg' (libpq's, or the server's) into 'buf', every hidden value in it
 * replaced by "***" (the longest that matches; case is ignored, as a
 * server may fold it), without the trailing newline libpq puts on its
 * messages.  Replaced before 'buf' truncates it, so that no part of a
 * value is left at the end.
 */
static const char *
hide_values(const char *msg, char *buf, size_t buflen)
{
	StringInfoData out;
	const char *p = msg ? msg : "";

	initStringInfo(&out);
	while (*p)
	{
		size_t		longest = 0;
		ListCell   *lc;

		foreach(lc, hidden)
		{
			const char *h = lfirst(lc);
			size_t		n = strlen(h);

			if (n > longest && pg_strncasecmp(p, h, n) == 0)
				longest = n;
		}
		if (longest > 0)
		{
			appendStringInfoString(&out, "***");
			p += longest;
		}
		else
			appendStringInfoChar(&out, *p++);
	}
	while (out.len > 0 && (out.data[out.len - 1] == '\n' || out.data[out.len - 1] == ' '))
		out.data[--out.len] = '\0';
	strlcpy(buf, out.data, buflen);
	pfree(out.data);
	return buf;
}

/*
 * A notice from the remote server (a WARNING while connecting, say): libpq
 * would print it to stderr, which is the server log, with nothing hidden.
 */
static void
notice_processor(void *arg, const char *message)
{
	char		buf[256];

	elog(DEBUG1, "notice from the remote server: %s", hide_values(message, buf, sizeof(buf)));
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
	hide_values_of(conninfo);
	conn = PQconnectStartParams(keys, vals, 1);
	if (conn == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return false;
	}
	PQsetNoticeProcessor(conn, notice_processor, NULL);
	while (st != PGRES_POLLING_OK)
	{
		if (st == PGRES_POLLING_FAILED || PQstatus(conn) == CONNECTION_BAD)
		{
			char		msg[256];

			snprintf(err, errlen, "could not connect to %s: %s", what,
					 hide_values(PQerrorMessage(conn), msg, sizeof(msg)));
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
	hide_values(PQerrorMessage(conn), err, errlen);
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
	 * and the server's side of the statement ends by itself, as it runs with
	 * the same statement_timeout and lock_timeout (the caller sets them on
	 * connecting).
	 */
	idgen_remote_disconnect();
	return NULL;
}

/* "message: detail" of a failed result, values hidden. */
const char *
idgen_remote_result_message(const PGresult *res)
{
	static char buf[256];
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	char	   *text = psprintf("%s%s%s", msg ? msg : PQresultErrorMessage(res),
								detail ? ": " : "", detail ? detail : "");

	hide_values(text, buf, sizeof(buf));
	pfree(text);
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
 * Name, in 'keys', the keywords of a keyword = value string libpq could not
 * parse, as libpq reads them up to the first fault, and count the words
 * before "=" that are no keyword (they may be part of a password: not
 * named).
 */
static void
describe_keywords(const char *conninfo, StringInfo keys)
{
	const char *p;
	int			unknown = 0;	/* words before "=" that are no keyword */

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
			appendStringInfo(keys, "%s\"%.*s\"", keys->len ? ", " : "its keywords are ",
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
		appendStringInfo(keys, "%s%d word%s before \"=\" that libpq does not know as a keyword",
						 keys->len ? ", and " : "it has ", unknown, unknown == 1 ? "" : "s");
	else if (keys->len == 0)
		appendStringInfoString(keys, "it has no keyword");
}

/*
 * Whether 'conninfo' is a connection string libpq can parse and would read
 * as meant (value_as_meant); if not, 'why' says what is wrong without any
 * value, and '*parsed' whether libpq could parse it.  libpq's own message
 * about a string it cannot parse quotes the part it could not parse and so
 * may repeat the password: 'why' names only the keywords read before the
 * fault (the words before an "=" that libpq knows; any other word may be
 * part of a password), or says that it is a URI.
 */
bool
idgen_conninfo_valid(const char *conninfo, bool *parsed, char *why, size_t len)
{
	char	   *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
	StringInfoData keys;

	*parsed = (opts != NULL);
	if (opts != NULL)
	{
		bool		valid = true;

		for (PQconninfoOption *o = opts; o->keyword != NULL && valid; o++)
			if (o->val != NULL)
				valid = value_as_meant(o, why, len);
		PQconninfoFree(opts);
		return valid;
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
		describe_keywords(conninfo, &keys);
	strlcpy(why, keys.data, len);
	pfree(keys.data);
	return false;
}
