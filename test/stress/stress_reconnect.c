/*-------------------------------------------------------------------------
 *
 * stress_reconnect.c
 *	  Query errors, and --reconnect: surviving lost connections.
 *
 * Without --reconnect, a failed query is a fatal error of its connection:
 * every thread stops and the program exits with status 2.
 *
 * With --reconnect, queries that fail because the connection was lost are
 * counted and the connection is re-established (a way to check that a
 * generator stays unique and monotonic across backend restarts, crashes
 * and failovers: PQreset connects with the same connection string, so of
 * several hosts it picks whichever now qualifies, e.g. the new primary
 * with target_session_attrs=read-write); other query errors are counted
 * and the batch is retried.  A connection that cannot be re-established
 * within RECONNECT_TIMEOUT, or that has no query succeed for
 * ERROR_TIMEOUT, fails after all.
 *
 * What a lost batch means for the checks is up to the mode: expression
 * mode just runs it again; sequence mode (stress_seq.c) discards it and
 * rolls back what is left of its transaction.
 *
 * test/stress/stress_reconnect.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include "stress.h"

/* wait this long between attempts to reconnect */
#define RECONNECT_SLEEP_US	100000L
/* after a (non connection-loss) query error, wait this long and retry */
#define ERROR_SLEEP_US		10000L
/* ... but give up when no batch succeeded for this long */
#define ERROR_TIMEOUT		30.0

/* re-establish a lost connection; false if that failed (or we must stop) */
static bool
reconnect_client(Client *cl)
{
	double		start = now_seconds();
	char		msg[512];

	for (;;)
	{
		if (atomic_load(&cl->shared->stop))
			return false;
		PQreset(cl->conn);
		if (PQstatus(cl->conn) == CONNECTION_OK)
			return true;
		if (now_seconds() - start >= RECONNECT_TIMEOUT)
		{
			client_fail(cl, "could not reconnect within %.0f s: %s",
						RECONNECT_TIMEOUT,
						strip_message(msg, sizeof(msg), PQerrorMessage(cl->conn)));
			return false;
		}
		pg_usleep(RECONNECT_SLEEP_US);
	}
}

/*
 * Deal with a failed query.  Returns true if the client should go on (the
 * batch is retried), false if it must stop.  Without --reconnect every
 * error is fatal.
 */
bool
handle_query_error(Client *cl, PGresult *res, double *last_ok)
{
	const Options *opts = cl->shared->opts;
	const char *raw = res != NULL ? PQresultErrorMessage(res) : "";
	char		msg[512];

	if (raw[0] == '\0')
		raw = PQerrorMessage(cl->conn);
	strip_message(msg, sizeof(msg), raw);

	if (!opts->reconnect)
	{
		client_fail(cl, "query failed: %s", msg);
		return false;
	}

	if (PQstatus(cl->conn) == CONNECTION_BAD)
	{
		cl->reconnects++;
		if (!opts->quiet)
			fprintf(stderr, "%s: connection %d: connection lost, reconnecting: %s\n",
					PROGNAME, cl->id, msg);
		if (!reconnect_client(cl))
			return false;
		*last_ok = now_seconds();
		return true;
	}

	cl->errors++;
	if (!opts->quiet && cl->errors <= MAX_REPORT)
		fprintf(stderr, "%s: connection %d: query failed, retrying: %s\n",
				PROGNAME, cl->id, msg);
	if (now_seconds() - *last_ok >= ERROR_TIMEOUT)
	{
		client_fail(cl, "no query succeeded for %.0f s, giving up; last error: %s",
					ERROR_TIMEOUT, msg);
		return false;
	}
	pg_usleep(ERROR_SLEEP_US);
	return true;
}
