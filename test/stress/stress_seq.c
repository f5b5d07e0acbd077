/*-------------------------------------------------------------------------
 *
 * stress_seq.c
 *	  Sequence mode (-k/--keys): values of a transactional per-key sequence
 *	  function, and the options that go with it (--hot, --rollback,
 *	  --seq-func, --cached).
 *
 * Sequence mode exercises a transactional per-key sequence function such
 * as idgen_seq_next(key text) instead of an expression: every batch is one
 * transaction,
 *
 *		BEGIN;
 *		SELECT k, <func>(k) FROM (SELECT <random key> AS k
 *			FROM generate_series(1, <batch>) ORDER BY 1 OFFSET 0) s;
 *		COMMIT;		-- or ROLLBACK, with probability --rollback
 *
 * where each row's key is 'hot' with probability --hot and 'k:<i>' with i
 * uniform in 1..N otherwise.  The keys are sorted within the batch so that
 * concurrent transactions lock the keys' rows in one order and cannot
 * deadlock (OFFSET 0 keeps the sort below the function call).  The
 * (key, value) pairs of committed batches are kept, those of rolled-back
 * batches are discarded, and at the end the committed values of every key
 * must be exactly 1, 2, ..., count: no duplicates and no gaps (a rollback
 * gives its values back); so the keys must not have been used before the
 * run (empty the sequence table first).  There is no per-connection order
 * check.  With --reconnect a batch whose transaction was cut off by a lost
 * connection is discarded and retried; as a connection lost while COMMIT
 * was in flight leaves it unknown whether the batch committed, only
 * distinctness is checked then, not gaps.
 *
 * With --cached the keys are expected to be cached per-key sequences
 * (idgen_seq_configure(key, cache => n)), whose values are not
 * transactional and may leave gaps: the values of every batch are kept,
 * rolled back or not, and the checks are that each key's values are
 * distinct over all connections and strictly increasing, key by key, in the
 * order each connection received them; gaps are not checked.
 *
 * The checks of the values themselves are in stress_seq_check.c.
 *
 * test/stress/stress_seq.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "common/pg_prng.h"

#include "stress.h"

/* a different seed for every thread and run; it need not be strong */
static void
seed_prng(pg_prng_state *prng, int id)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	pg_prng_seed(prng,
				 ((uint64) ts.tv_sec * UINT64CONST(1000000000) + (uint64) ts.tv_nsec) ^
				 ((uint64) getpid() << 32) ^
				 ((uint64) (id + 1) * UINT64CONST(0x9E3779B97F4A7C15)));
}

/*
 * Deal with a failed statement of a sequence-mode batch, and free its
 * result.  The batch is lost: its values are discarded and its rows are not
 * counted, it is generated anew.  Returns true if the client should go on,
 * with the connection outside any transaction, false if it must stop.
 */
static bool
seq_query_error(Client *cl, PGresult *res, double *last_ok)
{
	bool		go_on = handle_query_error(cl, res, last_ok);

	if (go_on && PQstatus(cl->conn) == CONNECTION_OK &&
		PQtransactionStatus(cl->conn) != PQTRANS_IDLE)
	{
		/* if this fails, the next BEGIN fails alike and is handled there */
		PQclear(PQexec(cl->conn, "ROLLBACK"));
	}
	PQclear(res);
	return go_on;
}

/*
 * Parse the (key, value) rows of a sequence-mode batch into "out", with the
 * keys interned in the client's key table; false on a fatal error.
 */
static bool
parse_seq_result(Client *cl, PGresult *res, int expected, SeqValue *out)
{
	const Options *opts = cl->shared->opts;
	int			ntuples = PQntuples(res);
	const char *prev_key = NULL;
	int			prev_len = 0;
	int32		prev_id = -1;
	char		kbuf[MAX_KEY_REPORT + 8];

	if (PQnfields(res) != 2)
	{
		client_fail(cl, "sequence query returned %d columns, expected 2",
					PQnfields(res));
		return false;
	}
	if (ntuples != expected)
	{
		client_fail(cl, "sequence query returned %d rows, expected %d",
					ntuples, expected);
		return false;
	}

	for (int i = 0; i < ntuples; i++)
	{
		const char *key = PQgetvalue(res, i, 0);
		int			keylen = PQgetlength(res, i, 0);
		const char *text = PQgetvalue(res, i, 1);
		char	   *end;
		long long	val;

		if (PQgetisnull(res, i, 0))
		{
			client_fail(cl, "sequence query returned a NULL key");
			return false;
		}
		if (PQgetisnull(res, i, 1))
		{
			client_fail(cl, "%s('%s') returned NULL", opts->seq_func,
						report_key(kbuf, sizeof(kbuf), key));
			return false;
		}
		errno = 0;
		val = strtoll(text, &end, 10);
		if (end == text || *end != '\0' || errno == ERANGE)
		{
			client_fail(cl, "%s('%s') returned \"%s\", not a valid bigint",
						opts->seq_func, report_key(kbuf, sizeof(kbuf), key), text);
			return false;
		}

		/* the keys come sorted: look up each distinct one once */
		if (prev_key == NULL || keylen != prev_len ||
			memcmp(key, prev_key, keylen) != 0)
		{
			prev_id = keytable_intern(&cl->keytab, key, (size_t) keylen);
			prev_key = key;
			prev_len = keylen;
		}
		out[i].value = (int64) val;
		out[i].key = prev_id;
	}
	return true;
}

/* keep the n (key, value) pairs of a batch */
static void
append_batch(Client *cl, const SeqValue *batch, int n)
{
	ValueArray *va = &cl->values;

	values_reserve(va, (size_t) n);
	memcpy(va->data + va->n * va->esize, batch, sizeof(SeqValue) * n);
	va->n += n;
}

/*
 * --cached: keep a batch's values whatever becomes of its transaction, and
 * check that each key's values rise in the order this connection got them.
 */
static void
keep_cached_batch(Client *cl, const SeqValue *batch, int n)
{
	if (cl->last_cap < cl->keytab.nkeys)
	{
		int32		cap = Max(cl->keytab.nkeys, 2 * cl->last_cap);

		cl->last_value = xrealloc(cl->last_value, sizeof(int64) * cap);
		for (int32 k = cl->last_cap; k < cap; k++)
			cl->last_value[k] = PG_INT64_MIN;
		cl->last_cap = cap;
	}
	for (int i = 0; i < n; i++)
	{
		if (batch[i].value <= cl->last_value[batch[i].key])
			cl->order_errors++;
		cl->last_value[batch[i].key] = batch[i].value;
	}
	append_batch(cl, batch, n);
}

/*
 * End a batch's transaction: COMMIT, or ROLLBACK if "rollback", and keep
 * the batch's values if it committed (with --cached they are kept
 * already).  Returns false if the client must stop.
 */
static bool
end_seq_batch(Client *cl, bool rollback, const SeqValue *batch, int n,
			  double *last_ok)
{
	const Options *opts = cl->shared->opts;
	const char *endcmd = rollback ? "ROLLBACK" : "COMMIT";
	PGresult   *res = PQexec(cl->conn, endcmd);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		/*
		 * Lost while COMMIT was in flight: the batch may or may not have
		 * committed.  It is discarded all the same (which cannot make a
		 * duplicate), and gaps are not checked with --reconnect.
		 */
		if (!rollback && PQstatus(cl->conn) == CONNECTION_BAD)
			cl->in_doubt++;
		return seq_query_error(cl, res, last_ok);
	}
	/* COMMIT of a failed transaction "succeeds" with the tag ROLLBACK */
	if (strcmp(PQcmdStatus(res), endcmd) != 0)
	{
		client_fail(cl, "%s reported \"%s\"", endcmd, PQcmdStatus(res));
		PQclear(res);
		return false;
	}
	PQclear(res);

	cl->generated += n;
	if (rollback)
		cl->rollbacks++;
	else
	{
		if (!opts->cached)
			append_batch(cl, batch, n);
		cl->commits++;
	}
	*last_ok = now_seconds();
	return true;
}

/*
 * Run one batch of n rows in its own transaction: BEGIN, the query (its
 * pairs parsed into "batch"), then COMMIT, or ROLLBACK with probability
 * --rollback.  A batch whose statement failed is given up (see
 * seq_query_error).  Returns false if the client must stop.
 */
static bool
run_seq_batch(Client *cl, const char *query, int n, SeqValue *batch,
			  pg_prng_state *prng, double *last_ok)
{
	const Options *opts = cl->shared->opts;
	PGresult   *res;
	bool		rollback;

	res = PQexec(cl->conn, "BEGIN");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		return seq_query_error(cl, res, last_ok);
	PQclear(res);

	res = PQexec(cl->conn, query);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		return seq_query_error(cl, res, last_ok);
	if (!parse_seq_result(cl, res, n, batch))
	{
		PQclear(res);
		return false;
	}
	PQclear(res);
	if (opts->cached)
		keep_cached_batch(cl, batch, n);

	rollback = opts->rollback > 0 && pg_prng_double(prng) < opts->rollback;
	return end_seq_batch(cl, rollback, batch, n, last_ok);
}

/* the generating loop of one connection in sequence mode */
void
run_seq_client(Client *cl)
{
	const Options *opts = cl->shared->opts;
	size_t		qlen = strlen(opts->seq_func) + 512;
	char	   *query = xmalloc(qlen);
	SeqValue   *batch = xmalloc(sizeof(SeqValue) * opts->batch);
	pg_prng_state prng;
	double		start = now_seconds();
	double		last_ok = start;

	seed_prng(&prng, cl->id);
	while (!atomic_load(&cl->shared->stop))
	{
		int			n;

		/* -n counts rows generated, rolled back or not */
		if ((n = next_batch(cl, start, cl->generated)) == 0)
			break;

		snprintf(query, qlen,
				 "SELECT k, %s(k) FROM (SELECT CASE WHEN random() < %s THEN 'hot' "
				 "ELSE 'k:' || (1 + floor(random() * %d))::int END AS k "
				 "FROM generate_series(1, %d) ORDER BY 1 OFFSET 0) s",
				 opts->seq_func, opts->hot_text, opts->keys, n);
		if (!run_seq_batch(cl, query, n, batch, &prng, &last_ok))
			break;
	}
	free(batch);
	free(query);
}

/*
 * Whether fewer values were generated or kept than the run should have:
 * with -n, fewer rows than -n per connection, or (without --rollback) fewer
 * committed; with --duration, none at all; with --cached, values lost.
 */
static bool
seq_short_count(const Options *opts, const Totals *totals, int64 expected)
{
	bool		short_count;

	if (opts->duration > 0)
		short_count = (totals->generated == 0 ||
					   (opts->rollback == 0 && totals->values == 0));
	else
		short_count = (totals->generated < expected ||
					   (opts->rollback == 0 && totals->values < expected));
	if (opts->cached)
		short_count = (totals->generated == 0 || totals->values < totals->generated);
	return short_count;
}

/* the summary of a sequence-mode run, but for the verdict */
static void
print_seq_summary(const Options *opts, const Totals *totals,
				  const SeqCheck *sc, bool check_gaps)
{
	/* keys the query can pick ('hot' with probability 1 > random()) */
	int64		possible = (opts->hot < 1.0 ? opts->keys : 0) + (opts->hot > 0.0 ? 1 : 0);
	double		elapsed = totals->elapsed;

	if (opts->duration > 0)
		printf("%s: %d clients x %g s of %s(key) over " INT64_FORMAT " keys",
			   PROGNAME, opts->clients, opts->duration, opts->seq_func, possible);
	else
		printf("%s: %d clients x " INT64_FORMAT " values of %s(key) over " INT64_FORMAT " keys",
			   PROGNAME, opts->clients, opts->ids, opts->seq_func, possible);
	printf(" (hot %s, rollback %s) in %.3f s (%.0f values/s, %.0f transactions/s)\n",
		   opts->hot_text, opts->rollback_text, elapsed,
		   elapsed > 0 ? (double) totals->generated / elapsed : 0.0,
		   elapsed > 0 ? (double) (totals->commits + totals->rollbacks) / elapsed : 0.0);
	printf("%s: " INT64_FORMAT " committed values, " INT64_FORMAT " keys, "
		   INT64_FORMAT " duplicates, ",
		   PROGNAME, totals->values, sc->keys, sc->duplicates);
	if (!check_gaps)
		printf("gaps not checked, ");
	else if (sc->gaps > 0)
		printf(INT64_FORMAT " gaps (" INT64_FORMAT " values missing), ",
			   sc->gaps, sc->missing);
	else
		printf("0 gaps, ");
	printf(INT64_FORMAT " batches rolled back, " INT64_FORMAT " errors, "
		   INT64_FORMAT " reconnects\n",
		   totals->rollbacks, totals->errors, totals->reconnects);
	if (sc->below > 0)
		printf("%s: " INT64_FORMAT " values below 1\n", PROGNAME, sc->below);
	if (opts->cached)
		printf("%s: --cached: every value kept (rolled back or not), gaps not checked; "
			   INT64_FORMAT " order violations (a key's value not above the one the connection got before)\n",
			   PROGNAME, totals->order_errors);
	else if (!check_gaps)
		printf("%s: --reconnect: only distinctness checked, not gaps; "
			   INT64_FORMAT " batches were lost while COMMIT was in flight and may or may not have committed\n",
			   PROGNAME, totals->in_doubt);
	if (totals->capped)
		printf("%s: stopped early: reached the limit of " INT64_FORMAT " committed values per connection\n",
			   PROGNAME, MAX_TOTAL_IDS / opts->clients);
}

/*
 * Check the values of every key (stress_seq_check.c) and print the
 * summary.  Returns true for PASS.
 */
bool
seq_report(const Options *opts, Client *clients, const Totals *totals)
{
	/* neither with --reconnect (a lost COMMIT) nor with --cached */
	bool		check_gaps = !opts->reconnect && !opts->cached;
	int64		expected = (int64) opts->clients * opts->ids;
	SeqCheck	sc;
	bool		short_count;
	bool		pass;

	check_seq(opts, clients, totals->values, check_gaps, &sc);
	short_count = seq_short_count(opts, totals, expected);
	pass = (sc.duplicates == 0 && sc.gaps == 0 && sc.below == 0 &&
			totals->order_errors == 0 && !short_count);

	print_seq_summary(opts, totals, &sc, check_gaps);
	if (short_count)
	{
		if (opts->duration > 0)
			printf("%s: no values were %s\n", PROGNAME,
				   totals->generated == 0 ? "generated" : "committed");
		else if (totals->generated < expected)
			printf("%s: expected " INT64_FORMAT " values generated, got " INT64_FORMAT "\n",
				   PROGNAME, expected, totals->generated);
		else
			printf("%s: expected " INT64_FORMAT " committed values, collected " INT64_FORMAT "\n",
				   PROGNAME, expected, totals->values);
	}
	printf("%s: %s\n", PROGNAME, pass ? "PASS" : "FAIL");
	return pass;
}
