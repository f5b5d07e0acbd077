/*-------------------------------------------------------------------------
 *
 * idgen_stress.c
 *	  Concurrency stress client for ID generators.
 *
 * The program opens N connections, each driven by its own thread, and has
 * every connection fetch values of one SQL expression in batches, one round
 * trip per batch:
 *
 *		SELECT <expr> FROM generate_series(1, <batch>)
 *
 * All threads connect first and then start generating at the same moment,
 * so that the generator is exercised by truly concurrent backends.  Every
 * thread keeps all the values it received.  When all threads are done the
 * program checks:
 *
 *	1. per-connection order (--order=strict): every value a connection
 *	   received is strictly greater than the one it received before it, in
 *	   the order received (rows within a batch, batches in order, across
 *	   reconnects too);
 *	2. global uniqueness: no value was produced twice, over all connections.
 *
 * Values are compared as signed 64-bit integers (--type=bigint) or as the
 * 36-character canonical text of a UUID, byte by byte (--type=uuid; for
 * lower-case hex text this is the same as the order of the UUID's bytes).
 *
 * With --reconnect, queries that fail because the connection was lost are
 * counted and the connection is re-established (a way to check that a
 * generator stays unique and monotonic across backend restarts); other
 * query errors are counted and the batch is retried.
 *
 * Sequence mode (--keys=N) exercises a transactional per-key sequence
 * function such as idgen_seq_next(key text) instead: every batch is one
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
 * run (empty the sequence table first).  There is no per-connection order check.  With
 * --reconnect a batch whose transaction was cut off by a lost connection is
 * discarded and retried; as a connection lost while COMMIT was in flight
 * leaves it unknown whether the batch committed, only distinctness is
 * checked then, not gaps.
 *
 * With --cached the keys are expected to be cached per-key sequences
 * (idgen_seq_configure(key, cache => n)), whose values are not
 * transactional and may leave gaps: the values of every batch are kept,
 * rolled back or not, and the checks are that each key's values are
 * distinct over all connections and strictly increasing, key by key, in the
 * order each connection received them; gaps are not checked.
 *
 * Exit status: 0 if all checks pass, 1 if any check fails (a duplicate, an
 * order violation, a gap or missing values), 2 on usage, connection or
 * query errors.
 *
 * test/stress/idgen_stress.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common/pg_prng.h"
#include "getopt_long.h"
#include "libpq-fe.h"

#include "stress.h"

/* limits for the command-line arguments */
#define MAX_CLIENTS			1000
#define MAX_IDS				INT64CONST(100000000)
#define MAX_BATCH			1000000

/* sequence mode */
#define MAX_KEYS			10000000
#define DEFAULT_SEQ_FUNC	"idgen_seq_next"

static void usage(void);
static void usage_error(const char *fmt,...) pg_attribute_printf(1, 2);
static int64 parse_integer(const char *arg, const char *option,
						   int64 min, int64 max);
static double parse_seconds(const char *arg, const char *option,
							double max);
static double parse_fraction(const char *arg, const char *option);
static void format_fraction(char *buf, size_t len, double value);
static bool valid_function_name(const char *name);
static bool store_result(Client *cl, PGresult *res, int expected);
static bool seq_query_error(Client *cl, PGresult *res, double *last_ok);
static bool parse_seq_result(Client *cl, PGresult *res, int expected,
							 SeqValue *out);
static void keep_cached_batch(Client *cl, const SeqValue *batch, int n);

static void
usage(void)
{
	printf("%s generates values of an SQL expression from many concurrent connections\n"
		   "and checks them for global uniqueness and per-connection order; or, with\n"
		   "-k, values of a per-key transactional sequence function, and checks that\n"
		   "the committed values of every key are exactly 1, 2, 3, ...\n\n",
		   PROGNAME);
	printf("Usage:\n  %s [OPTION]...\n\n", PROGNAME);
	printf("Options:\n");
	printf("  -d, --dbname=CONNSTR     libpq connection string (default: \"\", i.e. PGHOST,\n"
		   "                           PGPORT, ... from the environment)\n");
	printf("  -c, --clients=N          number of connections, one thread each (default 8)\n");
	printf("  -n, --ids=M              values to generate per connection (default 100000)\n");
	printf("  -b, --batch=B            values per round trip (default 1000); each round\n"
		   "                           trip is \"SELECT <expr> FROM generate_series(1, B)\"\n");
	printf("  -e, --expr=SQL           expression generating one value per row\n"
		   "                           (default \"idgen_snowflake()\")\n");
	printf("  -t, --type=bigint|uuid   how to parse and compare values (default bigint);\n"
		   "                           uuid values are compared as their 36-char text\n");
	printf("  -o, --order=strict|none  strict (default): each connection's values must\n"
		   "                           strictly increase in the order received\n"
		   "                           (ignored with -k)\n");
	printf("  -D, --duration=SECONDS   generate until SECONDS elapse (at most %.0f) instead\n"
		   "                           of M values per connection; stops early at\n"
		   "                           " INT64_FORMAT " values in all\n",
		   MAX_DURATION, MAX_TOTAL_IDS);
	printf("      --reconnect          survive lost connections (reconnect for up to %.0f s)\n"
		   "                           and count other query errors instead of failing\n",
		   RECONNECT_TIMEOUT);
	printf("      --save=FILE          write every value received to FILE, one per line\n"
		   "                           (not in sequence mode)\n");
	printf("  -q, --quiet              print only the summary, not the individual\n"
		   "                           violations, duplicates, errors and reconnects\n");
	printf("  -?, --help               show this help, then exit\n");
	printf("\nSequence mode:\n");
	printf("  -k, --keys=N             call the sequence function on keys instead of -e\n"
		   "                           (N at most %d). Each row picks a key: with\n"
		   "                           probability --hot the key 'hot', otherwise 'k:<i>'\n"
		   "                           with i uniform in 1..N. Each batch is one\n"
		   "                           transaction: BEGIN; SELECT k, <seq-func>(k) for B\n"
		   "                           keys, sorted (so that concurrent batches lock in\n"
		   "                           one order); COMMIT, or ROLLBACK with probability\n"
		   "                           --rollback. The values of committed batches must be\n"
		   "                           exactly 1, 2, ..., count for every key: no\n"
		   "                           duplicates, no gaps; so the keys must be new (not\n"
		   "                           used before the run). -n counts rows including\n"
		   "                           rolled-back ones; -e and -t are ignored; -o is\n"
		   "                           ignored: there is no per-connection order check.\n"
		   "                           With --reconnect a batch cut off by a lost\n"
		   "                           connection is discarded and retried, and only\n"
		   "                           distinctness is checked, not gaps (a lost COMMIT\n"
		   "                           may or may not have committed)\n",
		   MAX_KEYS);
	printf("      --hot=FRACTION       probability of the hot key (default 0.1), 0..1\n");
	printf("      --seq-func=NAME      the function to call (default %s); a name\n"
		   "                           matching ^[a-zA-Z_][a-zA-Z0-9_.]*$\n",
		   DEFAULT_SEQ_FUNC);
	printf("      --rollback=FRACTION  probability that a batch's transaction is rolled\n"
		   "                           back instead of committed (default 0), 0..1\n");
	printf("      --cached             the keys are cached (not transactional): keep the\n"
		   "                           values of every batch, rolled back or not; check\n"
		   "                           that each key's values are distinct and rise in\n"
		   "                           the order each connection got them; no gap check\n");
	printf("\nExit status: 0 pass, 1 fail (duplicates, order violations, gaps or missing\n"
		   "values), 2 usage, connection or query error.\n");
}

static void
usage_error(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "%s: ", PROGNAME);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry \"%s --help\" for more information.\n", PROGNAME);
	exit(2);
}

static int64
parse_integer(const char *arg, const char *option, int64 min, int64 max)
{
	char	   *end;
	long long	val;

	errno = 0;
	val = strtoll(arg, &end, 10);
	if (end == arg || *end != '\0' || errno == ERANGE ||
		val < min || val > max)
		usage_error("invalid value \"%s\" for option %s: must be an integer between "
					INT64_FORMAT " and " INT64_FORMAT,
					arg, option, min, max);
	return (int64) val;
}

static double
parse_seconds(const char *arg, const char *option, double max)
{
	char	   *end;
	double		val;

	errno = 0;
	val = strtod(arg, &end);
	if (end == arg || *end != '\0' || errno == ERANGE ||
		!(val > 0.0 && val <= max))
		usage_error("invalid value \"%s\" for option %s: must be a number of seconds greater than 0 and at most %.0f",
					arg, option, max);
	return val;
}

/* a probability: a number from 0 to 1 */
static double
parse_fraction(const char *arg, const char *option)
{
	char	   *end;
	double		val;

	errno = 0;
	val = strtod(arg, &end);
	if (end == arg || *end != '\0' || errno == ERANGE ||
		!(val >= 0.0 && val <= 1.0))
		usage_error("invalid value \"%s\" for option %s: must be a number from 0 to 1",
					arg, option);
	return val;
}

/*
 * The shortest %g text that reads back as the same double: a valid SQL
 * numeric literal (digits, a point, an exponent) and readable in summaries.
 */
static void
format_fraction(char *buf, size_t len, double value)
{
	for (int prec = 1; prec <= 17; prec++)
	{
		snprintf(buf, len, "%.*g", prec, value);
		if (strtod(buf, NULL) == value)
			return;
	}
}

/* ^[a-zA-Z_][a-zA-Z0-9_.]*$, spelled out (it is spliced into SQL) */
static bool
valid_function_name(const char *name)
{
	if (!((name[0] >= 'a' && name[0] <= 'z') ||
		  (name[0] >= 'A' && name[0] <= 'Z') || name[0] == '_'))
		return false;
	for (const char *p = name + 1; *p != '\0'; p++)
	{
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
			return false;
	}
	return true;
}

/* append the values of a successful batch; false on a fatal error */
static bool
store_result(Client *cl, PGresult *res, int expected)
{
	const Options *opts = cl->shared->opts;
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
		const char *text = PQgetvalue(res, i, 0);
		int			len = PQgetlength(res, i, 0);
		char	   *dest = va->data + va->n * va->esize;

		if (PQgetisnull(res, i, 0))
		{
			client_fail(cl, "expression returned NULL");
			return false;
		}

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
		va->n++;
	}
	return true;
}

/* the generating loop of one connection */
void
run_client(Client *cl)
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
 * Deal with a failed statement of a sequence-mode batch.  The batch is lost:
 * its values are discarded and its rows are not counted, it is generated
 * anew.  Returns true if the client should go on, with the connection
 * outside any transaction, false if it must stop.
 */
static bool
seq_query_error(Client *cl, PGresult *res, double *last_ok)
{
	if (!handle_query_error(cl, res, last_ok))
		return false;
	if (PQstatus(cl->conn) == CONNECTION_OK &&
		PQtransactionStatus(cl->conn) != PQTRANS_IDLE)
	{
		/* if this fails, the next BEGIN fails alike and is handled there */
		PQclear(PQexec(cl->conn, "ROLLBACK"));
	}
	return true;
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

/*
 * --cached: keep a batch's values whatever becomes of its transaction, and
 * check that each key's values rise in the order this connection got them.
 */
static void
keep_cached_batch(Client *cl, const SeqValue *batch, int n)
{
	ValueArray *va = &cl->values;

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
	values_reserve(va, (size_t) n);
	memcpy(va->data + va->n * va->esize, batch, sizeof(SeqValue) * n);
	va->n += n;
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

	/* a different seed for every thread and run; it need not be strong */
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		pg_prng_seed(&prng,
					 ((uint64) ts.tv_sec * UINT64CONST(1000000000) + (uint64) ts.tv_nsec) ^
					 ((uint64) getpid() << 32) ^
					 ((uint64) (cl->id + 1) * UINT64CONST(0x9E3779B97F4A7C15)));
	}

	while (!atomic_load(&cl->shared->stop))
	{
		int			n;
		PGresult   *res;
		bool		rollback;
		const char *endcmd;
		bool		go_on;

		/* -n counts rows generated, rolled back or not */
		if ((n = next_batch(cl, start, cl->generated)) == 0)
			break;

		snprintf(query, qlen,
				 "SELECT k, %s(k) FROM (SELECT CASE WHEN random() < %s THEN 'hot' "
				 "ELSE 'k:' || (1 + floor(random() * %d))::int END AS k "
				 "FROM generate_series(1, %d) ORDER BY 1 OFFSET 0) s",
				 opts->seq_func, opts->hot_text, opts->keys, n);

		res = PQexec(cl->conn, "BEGIN");
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			go_on = seq_query_error(cl, res, &last_ok);
			PQclear(res);
			if (!go_on)
				break;
			continue;
		}
		PQclear(res);

		res = PQexec(cl->conn, query);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			go_on = seq_query_error(cl, res, &last_ok);
			PQclear(res);
			if (!go_on)
				break;
			continue;
		}
		if (!parse_seq_result(cl, res, n, batch))
		{
			PQclear(res);
			break;
		}
		PQclear(res);
		if (opts->cached)
			keep_cached_batch(cl, batch, n);

		rollback = opts->rollback > 0 && pg_prng_double(&prng) < opts->rollback;
		endcmd = rollback ? "ROLLBACK" : "COMMIT";
		res = PQexec(cl->conn, endcmd);
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			/*
			 * Lost while COMMIT was in flight: the batch may or may not have
			 * committed.  It is discarded all the same (which cannot make
			 * a duplicate), and gaps are not checked with --reconnect.
			 */
			if (!rollback && PQstatus(cl->conn) == CONNECTION_BAD)
				cl->in_doubt++;
			go_on = seq_query_error(cl, res, &last_ok);
			PQclear(res);
			if (!go_on)
				break;
			continue;
		}
		/* COMMIT of a failed transaction "succeeds" with the tag ROLLBACK */
		if (strcmp(PQcmdStatus(res), endcmd) != 0)
		{
			client_fail(cl, "%s reported \"%s\"", endcmd, PQcmdStatus(res));
			PQclear(res);
			break;
		}
		PQclear(res);

		cl->generated += n;
		if (rollback)
			cl->rollbacks++;
		else if (opts->cached)
			cl->commits++;
		else
		{
			ValueArray *va = &cl->values;

			values_reserve(va, (size_t) n);
			memcpy(va->data + va->n * va->esize, batch, sizeof(SeqValue) * n);
			va->n += n;
			cl->commits++;
		}
		last_ok = now_seconds();
	}
	free(batch);
	free(query);
}

int
main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"dbname", required_argument, NULL, 'd'},
		{"clients", required_argument, NULL, 'c'},
		{"ids", required_argument, NULL, 'n'},
		{"batch", required_argument, NULL, 'b'},
		{"expr", required_argument, NULL, 'e'},
		{"type", required_argument, NULL, 't'},
		{"order", required_argument, NULL, 'o'},
		{"duration", required_argument, NULL, 'D'},
		{"reconnect", no_argument, NULL, 1},
		{"quiet", no_argument, NULL, 'q'},
		{"keys", required_argument, NULL, 'k'},
		{"hot", required_argument, NULL, 2},
		{"seq-func", required_argument, NULL, 3},
		{"rollback", required_argument, NULL, 4},
		{"cached", no_argument, NULL, 5},
		{"save", required_argument, NULL, 6},
		{"help", no_argument, NULL, '?'},
		{NULL, 0, NULL, 0}
	};
	Options		opts = {
		.conninfo = "",
		.clients = 8,
		.ids = 100000,
		.batch = 1000,
		.expr = "idgen_snowflake()",
		.type = VALUE_BIGINT,
		.strict = true,
		.duration = 0,
		.reconnect = false,
		.quiet = false,
		.keys = 0,
		.hot = 0.1,
		.rollback = 0,
		.seq_func = DEFAULT_SEQ_FUNC,
	};
	bool		seq_option = false;	/* --hot, --seq-func or --rollback given */
	SeqCheck	sc;
	Shared		shared;
	Client	   *clients;
	Totals		totals;
	int			c;
	int			optindex;
	int64		violations = 0;
	int64		duplicates = 0;
	bool		short_count;
	bool		pass;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-?") == 0))
	{
		usage();
		exit(0);
	}

	while ((c = getopt_long(argc, argv, "d:c:n:b:e:t:o:D:qk:?",
							long_options, &optindex)) != -1)
	{
		switch (c)
		{
			case 'd':
				opts.conninfo = optarg;
				break;
			case 'c':
				opts.clients = (int) parse_integer(optarg, "-c/--clients", 1, MAX_CLIENTS);
				break;
			case 'n':
				opts.ids = parse_integer(optarg, "-n/--ids", 1, MAX_IDS);
				break;
			case 'b':
				opts.batch = (int) parse_integer(optarg, "-b/--batch", 1, MAX_BATCH);
				break;
			case 'e':
				if (optarg[0] == '\0')
					usage_error("option -e/--expr must not be empty");
				opts.expr = optarg;
				break;
			case 't':
				if (strcmp(optarg, "bigint") == 0)
					opts.type = VALUE_BIGINT;
				else if (strcmp(optarg, "uuid") == 0)
					opts.type = VALUE_UUID;
				else
					usage_error("invalid value \"%s\" for option -t/--type: must be \"bigint\" or \"uuid\"",
								optarg);
				break;
			case 'o':
				if (strcmp(optarg, "strict") == 0)
					opts.strict = true;
				else if (strcmp(optarg, "none") == 0)
					opts.strict = false;
				else
					usage_error("invalid value \"%s\" for option -o/--order: must be \"strict\" or \"none\"",
								optarg);
				break;
			case 'D':
				opts.duration = parse_seconds(optarg, "-D/--duration", MAX_DURATION);
				break;
			case 1:
				opts.reconnect = true;
				break;
			case 'q':
				opts.quiet = true;
				break;
			case 'k':
				opts.keys = (int) parse_integer(optarg, "-k/--keys", 1, MAX_KEYS);
				break;
			case 2:
				opts.hot = parse_fraction(optarg, "--hot");
				seq_option = true;
				break;
			case 3:
				if (!valid_function_name(optarg))
					usage_error("invalid value \"%s\" for option --seq-func: must match ^[a-zA-Z_][a-zA-Z0-9_.]*$",
								optarg);
				opts.seq_func = optarg;
				seq_option = true;
				break;
			case 5:
				opts.cached = true;
				seq_option = true;
				break;
			case 6:
				opts.save = optarg;
				break;
			case 4:
				opts.rollback = parse_fraction(optarg, "--rollback");
				seq_option = true;
				break;
			case '?':
			default:
				/* getopt_long has complained already */
				fprintf(stderr, "Try \"%s --help\" for more information.\n", PROGNAME);
				exit(2);
		}
	}
	if (optind < argc)
		usage_error("too many command-line arguments (first is \"%s\")", argv[optind]);
	if (opts.save != NULL && opts.keys > 0)
		usage_error("--save is not available in sequence mode");
	if (seq_option && opts.keys == 0)
		usage_error("options --hot, --seq-func and --rollback need -k/--keys");
	format_fraction(opts.hot_text, sizeof(opts.hot_text), opts.hot);
	format_fraction(opts.rollback_text, sizeof(opts.rollback_text), opts.rollback);
	if (opts.duration == 0 && (int64) opts.clients * opts.ids > MAX_TOTAL_IDS)
		usage_error("too many values: %d clients x " INT64_FORMAT " values exceeds " INT64_FORMAT,
					opts.clients, opts.ids, MAX_TOTAL_IDS);

	if (!PQisthreadsafe())
	{
		fprintf(stderr, "%s: libpq is not thread-safe\n", PROGNAME);
		exit(2);
	}

	clients = clients_create(&opts, &shared);
	if (!run_clients(&opts, &shared, clients, &totals))
	{
		clients_free(&opts, &shared, clients);
		exit(2);
	}

	if (opts.keys > 0)
	{
		/* sequence mode: its own checks and summary */
		bool		check_gaps = !opts.reconnect && !opts.cached;
		int64		expected = (int64) opts.clients * opts.ids;
		/* keys the query can pick ('hot' with probability 1 > random()) */
		int64		possible = (opts.hot < 1.0 ? opts.keys : 0) + (opts.hot > 0.0 ? 1 : 0);

		check_seq(&opts, clients, totals.values, check_gaps, &sc);
		if (opts.duration > 0)
			short_count = (totals.generated == 0 || (opts.rollback == 0 && totals.values == 0));
		else
			short_count = (totals.generated < expected ||
						   (opts.rollback == 0 && totals.values < expected));
		if (opts.cached)
			short_count = (totals.generated == 0 || totals.values < totals.generated);
		pass = (sc.duplicates == 0 && sc.gaps == 0 && sc.below == 0 &&
				totals.order_errors == 0 && !short_count);

		if (opts.duration > 0)
			printf("%s: %d clients x %g s of %s(key) over " INT64_FORMAT " keys",
				   PROGNAME, opts.clients, opts.duration, opts.seq_func, possible);
		else
			printf("%s: %d clients x " INT64_FORMAT " values of %s(key) over " INT64_FORMAT " keys",
				   PROGNAME, opts.clients, opts.ids, opts.seq_func, possible);
		printf(" (hot %s, rollback %s) in %.3f s (%.0f values/s, %.0f transactions/s)\n",
			   opts.hot_text, opts.rollback_text, totals.elapsed,
			   totals.elapsed > 0 ? (double) totals.generated / totals.elapsed : 0.0,
			   totals.elapsed > 0 ? (double) (totals.commits + totals.rollbacks) / totals.elapsed : 0.0);
		printf("%s: " INT64_FORMAT " committed values, " INT64_FORMAT " keys, "
			   INT64_FORMAT " duplicates, ",
			   PROGNAME, totals.values, sc.keys, sc.duplicates);
		if (!check_gaps)
			printf("gaps not checked, ");
		else if (sc.gaps > 0)
			printf(INT64_FORMAT " gaps (" INT64_FORMAT " values missing), ",
				   sc.gaps, sc.missing);
		else
			printf("0 gaps, ");
		printf(INT64_FORMAT " batches rolled back, " INT64_FORMAT " errors, "
			   INT64_FORMAT " reconnects\n",
			   totals.rollbacks, totals.errors, totals.reconnects);
		if (sc.below > 0)
			printf("%s: " INT64_FORMAT " values below 1\n", PROGNAME, sc.below);
		if (opts.cached)
			printf("%s: --cached: every value kept (rolled back or not), gaps not checked; "
				   INT64_FORMAT " order violations (a key's value not above the one the connection got before)\n",
				   PROGNAME, totals.order_errors);
		else if (!check_gaps)
			printf("%s: --reconnect: only distinctness checked, not gaps; "
				   INT64_FORMAT " batches were lost while COMMIT was in flight and may or may not have committed\n",
				   PROGNAME, totals.in_doubt);
		if (totals.capped)
			printf("%s: stopped early: reached the limit of " INT64_FORMAT " committed values per connection\n",
				   PROGNAME, MAX_TOTAL_IDS / opts.clients);
		if (short_count)
		{
			if (opts.duration > 0)
				printf("%s: no values were %s\n", PROGNAME,
					   totals.generated == 0 ? "generated" : "committed");
			else if (totals.generated < expected)
				printf("%s: expected " INT64_FORMAT " values generated, got " INT64_FORMAT "\n",
					   PROGNAME, expected, totals.generated);
			else
				printf("%s: expected " INT64_FORMAT " committed values, collected " INT64_FORMAT "\n",
					   PROGNAME, expected, totals.values);
		}
		printf("%s: %s\n", PROGNAME, pass ? "PASS" : "FAIL");
	}
	else
	{
		/* the checks */
		if (opts.strict)
			violations = check_order(&opts, clients);
		duplicates = check_unique(&opts, clients, totals.values);
		if (opts.duration > 0)
			short_count = (totals.values == 0);
		else
			short_count = (totals.values < (int64) opts.clients * opts.ids);
		pass = (duplicates == 0 && violations == 0 && !short_count);

		/* the summary */
		if (opts.duration > 0)
			printf("%s: %d clients x %g s of %s in %.3f s (%.0f values/s)\n",
				   PROGNAME, opts.clients, opts.duration, opts.expr, totals.elapsed,
				   totals.elapsed > 0 ? (double) totals.values / totals.elapsed : 0.0);
		else
			printf("%s: %d clients x " INT64_FORMAT " values of %s in %.3f s (%.0f values/s)\n",
				   PROGNAME, opts.clients, opts.ids, opts.expr, totals.elapsed,
				   totals.elapsed > 0 ? (double) totals.values / totals.elapsed : 0.0);
		printf("%s: " INT64_FORMAT " values, " INT64_FORMAT " distinct, "
			   INT64_FORMAT " duplicates, " INT64_FORMAT " order violations, "
			   INT64_FORMAT " errors, " INT64_FORMAT " reconnects\n",
			   PROGNAME, totals.values, totals.values - duplicates, duplicates, violations,
			   totals.errors, totals.reconnects);
		if (totals.capped)
			printf("%s: stopped early: reached the limit of " INT64_FORMAT " values per connection\n",
				   PROGNAME, MAX_TOTAL_IDS / opts.clients);
		if (short_count)
		{
			if (opts.duration > 0)
				printf("%s: no values were collected\n", PROGNAME);
			else
				printf("%s: expected " INT64_FORMAT " values, collected " INT64_FORMAT "\n",
					   PROGNAME, (int64) opts.clients * opts.ids, totals.values);
		}
		printf("%s: %s\n", PROGNAME, pass ? "PASS" : "FAIL");
		if (opts.save != NULL && !save_values(&opts, clients))
			pass = false;
	}

	clients_free(&opts, &shared, clients);

	return pass ? 0 : 1;
}
