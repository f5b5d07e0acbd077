/*-------------------------------------------------------------------------
 *
 * stress_expr.c
 *	  Expression mode, the default: values of one SQL expression (-e).
 *
 * Every connection fetches values of the expression in batches of -b, one
 * round trip per batch:
 *
 *		SELECT <expr> FROM generate_series(1, <batch>)
 *
 * and keeps every value, parsed as a signed 64-bit integer (--type=bigint)
 * or as the 36-character canonical text of a UUID (--type=uuid).  When all
 * connections are done, the values are checked for per-connection order
 * (unless --order=none) and global uniqueness (stress_check.c), and the
 * summary says PASS or FAIL; with --save, every value is written to a file
 * as well.
 *
 * test/stress/stress_expr.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <errno.h>

#include "stress.h"

/*
 * Parse one non-NULL value of the expression into "dest" (esize bytes);
 * false on a fatal error.
 */
static bool
store_value(Client *cl, const char *text, int len, char *dest)
{
	const Options *opts = cl->shared->opts;

	if (opts->type == VALUE_BIGINT)
	{
		char	   *end;
		long long	val;
		int64		v;

		errno = 0;
		val = strtoll(text, &end, 10);
		if (end == text || *end != '\0' || errno == ERANGE)
		{
			client_fail(cl, "value \"%s\" is not a valid bigint", text);
			return false;
		}
		v = (int64) val;
		memcpy(dest, &v, sizeof(int64));
	}
	else
	{
		if (len != UUID_TEXT_LEN)
		{
			client_fail(cl, "value \"%s\" is not a %d-character UUID",
						text, UUID_TEXT_LEN);
			return false;
		}
		memcpy(dest, text, UUID_TEXT_LEN);
	}
	return true;
}

/* append the values of a successful batch; false on a fatal error */
static bool
store_result(Client *cl, PGresult *res, int expected)
{
	ValueArray *va = &cl->values;
	int			ntuples = PQntuples(res);

	if (PQnfields(res) != 1)
	{
		client_fail(cl, "query returned %d columns, expected 1", PQnfields(res));
		return false;
	}
	if (ntuples != expected)
	{
		client_fail(cl, "query returned %d rows, expected %d", ntuples, expected);
		return false;
	}

	values_reserve(va, (size_t) ntuples);
	for (int i = 0; i < ntuples; i++)
	{
		if (PQgetisnull(res, i, 0))
		{
			client_fail(cl, "expression returned NULL");
			return false;
		}
		if (!store_value(cl, PQgetvalue(res, i, 0), PQgetlength(res, i, 0),
						 va->data + va->n * va->esize))
			return false;
		va->n++;
	}
	return true;
}

/* the generating loop of one connection */
void
run_expr_client(Client *cl)
{
	const Options *opts = cl->shared->opts;
	size_t		qlen = strlen(opts->expr) + 64;
	char	   *query = xmalloc(qlen);
	double		start = now_seconds();
	double		last_ok = start;

	while (!atomic_load(&cl->shared->stop))
	{
		int			n;
		PGresult   *res;

		if ((n = next_batch(cl, start, (int64) cl->values.n)) == 0)
			break;

		snprintf(query, qlen, "SELECT %s FROM generate_series(1, %d)",
				 opts->expr, n);
		res = PQexec(cl->conn, query);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			bool		go_on = handle_query_error(cl, res, &last_ok);

			PQclear(res);
			if (!go_on)
				break;
			continue;
		}
		if (!store_result(cl, res, n))
		{
			PQclear(res);
			break;
		}
		PQclear(res);
		last_ok = now_seconds();
	}
	free(query);
}

/*
 * Check the values of all connections, print the summary and, with --save,
 * write the values to the file.  Returns true for PASS (and the file
 * written).
 */
bool
expr_report(const Options *opts, Client *clients, const Totals *totals)
{
	int64		violations = 0;
	int64		duplicates;
	bool		short_count;
	bool		pass;

	/* the checks */
	if (opts->strict)
		violations = check_order(opts, clients);
	duplicates = check_unique(opts, clients, totals->values);
	if (opts->duration > 0)
		short_count = (totals->values == 0);
	else
		short_count = (totals->values < (int64) opts->clients * opts->ids);
	pass = (duplicates == 0 && violations == 0 && !short_count);

	/* the summary */
	if (opts->duration > 0)
		printf("%s: %d clients x %g s of %s in %.3f s (%.0f values/s)\n",
			   PROGNAME, opts->clients, opts->duration, opts->expr, totals->elapsed,
			   totals->elapsed > 0 ? (double) totals->values / totals->elapsed : 0.0);
	else
		printf("%s: %d clients x " INT64_FORMAT " values of %s in %.3f s (%.0f values/s)\n",
			   PROGNAME, opts->clients, opts->ids, opts->expr, totals->elapsed,
			   totals->elapsed > 0 ? (double) totals->values / totals->elapsed : 0.0);
	printf("%s: " INT64_FORMAT " values, " INT64_FORMAT " distinct, "
		   INT64_FORMAT " duplicates, " INT64_FORMAT " order violations, "
		   INT64_FORMAT " errors, " INT64_FORMAT " reconnects\n",
		   PROGNAME, totals->values, totals->values - duplicates, duplicates,
		   violations, totals->errors, totals->reconnects);
	if (totals->capped)
		printf("%s: stopped early: reached the limit of " INT64_FORMAT " values per connection\n",
			   PROGNAME, MAX_TOTAL_IDS / opts->clients);
	if (short_count)
	{
		if (opts->duration > 0)
			printf("%s: no values were collected\n", PROGNAME);
		else
			printf("%s: expected " INT64_FORMAT " values, collected " INT64_FORMAT "\n",
				   PROGNAME, (int64) opts->clients * opts->ids, totals->values);
	}
	printf("%s: %s\n", PROGNAME, pass ? "PASS" : "FAIL");
	if (opts->save != NULL && !save_values(opts, clients))
		pass = false;
	return pass;
}
