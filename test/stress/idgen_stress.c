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
 * Exit status: 0 if all checks pass, 1 if any check fails (a duplicate, an
 * order violation or missing values), 2 on usage, connection or query
 * errors.
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

#include "getopt_long.h"
#include "libpq-fe.h"

#define PROGNAME			"idgen_stress"

/* limits for the command-line arguments */
#define MAX_CLIENTS			1000
#define MAX_IDS				INT64CONST(100000000)
/* values kept in memory over all connections, also with --duration */
#define MAX_TOTAL_IDS		INT64CONST(100000000)
#define MAX_BATCH			1000000
#define MAX_DURATION		3600.0

/* a lost connection is retried for this long before giving up */
#define RECONNECT_TIMEOUT	30.0
#define RECONNECT_SLEEP_US	100000L
/* after a (non connection-loss) query error, wait this long and retry */
#define ERROR_SLEEP_US		10000L
/* ... but give up when no batch succeeded for this long */
#define ERROR_TIMEOUT		30.0

/* how many order violations, duplicates and error messages to print */
#define MAX_REPORT			5
/* how many occurrences of one duplicated value to locate */
#define MAX_LOCATIONS		4

#define UUID_TEXT_LEN		36
#define MAX_VALUE_TEXT		64

typedef enum ValueType
{
	VALUE_BIGINT,
	VALUE_UUID
} ValueType;

/* command-line settings; read-only once the threads run */
typedef struct Options
{
	const char *conninfo;
	int			clients;
	int64		ids;			/* values per connection, unless duration */
	int			batch;
	const char *expr;
	ValueType	type;
	bool		strict;
	double		duration;		/* seconds; 0 means generate "ids" values */
	bool		reconnect;
	bool		quiet;
} Options;

/* a growable array of fixed-size values */
typedef struct ValueArray
{
	char	   *data;
	size_t		esize;			/* bytes per value */
	size_t		n;				/* values stored */
	size_t		cap;			/* values allocated */
} ValueArray;

/*
 * Start gate: the threads connect, report ready and wait until the main
 * thread opens the gate, which it does once every thread is ready.  If any
 * connection failed, the gate opens with "abort" set and nobody generates.
 */
typedef struct StartGate
{
	pthread_mutex_t lock;
	pthread_cond_t ready_cond;	/* signalled when a thread becomes ready */
	pthread_cond_t open_cond;	/* broadcast when the gate opens */
	int			nready;
	bool		open;
	bool		abort;
} StartGate;

/* state shared by all threads */
typedef struct Shared
{
	const Options *opts;
	StartGate	gate;
	atomic_bool stop;			/* set on a fatal error: everybody quits */
} Shared;

/* per-connection state, owned by its thread until it is joined */
typedef struct Client
{
	int			id;
	Shared	   *shared;
	PGconn	   *conn;
	bool		connected;		/* the initial connection succeeded */
	bool		failed;			/* a fatal error happened, see errmsg */
	bool		capped;			/* --duration run hit the value limit */
	int64		errors;			/* query errors other than connection loss */
	int64		reconnects;		/* connection losses survived */
	ValueArray	values;
	char		errmsg[1024];
} Client;

static void usage(void);
static void usage_error(const char *fmt,...) pg_attribute_printf(1, 2);
static void *xmalloc(size_t size);
static int64 parse_integer(const char *arg, const char *option,
						   int64 min, int64 max);
static double parse_seconds(const char *arg, const char *option,
							double max);
static double now_seconds(void);
static int	compare_bigint(const void *a, const void *b);
static int	compare_uuid(const void *a, const void *b);
static void format_value(char *buf, size_t len, ValueType type,
						 const void *value);
static void values_reserve(ValueArray *va, size_t more);
static const char *strip_message(char *buf, size_t len, const char *msg);
static void client_fail(Client *cl, const char *fmt,...) pg_attribute_printf(2, 3);
static void notice_processor(void *arg, const char *message);
static PGconn *open_connection(const char *conninfo);
static bool wait_at_gate(Shared *sh);
static bool reconnect_client(Client *cl);
static bool handle_query_error(Client *cl, PGresult *res, double *last_ok);
static bool store_result(Client *cl, PGresult *res, int expected);
static void run_client(Client *cl);
static void *client_thread(void *arg);
static int64 check_order(const Options *opts, Client *clients);
static int64 check_unique(const Options *opts, Client *clients, int64 total);


static void
usage(void)
{
	printf("%s generates values of an SQL expression from many concurrent connections\n"
		   "and checks them for global uniqueness and per-connection order.\n\n",
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
		   "                           strictly increase in the order received\n");
	printf("  -D, --duration=SECONDS   generate until SECONDS elapse (at most %.0f) instead\n"
		   "                           of M values per connection; stops early at\n"
		   "                           " INT64_FORMAT " values in all\n",
		   MAX_DURATION, MAX_TOTAL_IDS);
	printf("      --reconnect          survive lost connections (reconnect for up to %.0f s)\n"
		   "                           and count other query errors instead of failing\n",
		   RECONNECT_TIMEOUT);
	printf("  -q, --quiet              print only the summary, not the individual\n"
		   "                           violations, duplicates, errors and reconnects\n");
	printf("  -?, --help               show this help, then exit\n\n");
	printf("Exit status: 0 pass, 1 fail (duplicates, order violations or missing values),\n"
		   "2 usage, connection or query error.\n");
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

/* malloc that exits with status 2 (not 1, which means FAIL) */
static void *
xmalloc(size_t size)
{
	void	   *p = malloc(size > 0 ? size : 1);

	if (p == NULL)
	{
		fprintf(stderr, "%s: out of memory (%zu bytes)\n", PROGNAME, size);
		exit(2);
	}
	return p;
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

static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int
compare_bigint(const void *a, const void *b)
{
	int64		x;
	int64		y;

	memcpy(&x, a, sizeof(int64));
	memcpy(&y, b, sizeof(int64));
	return (x > y) - (x < y);
}

static int
compare_uuid(const void *a, const void *b)
{
	return memcmp(a, b, UUID_TEXT_LEN);
}

static void
format_value(char *buf, size_t len, ValueType type, const void *value)
{
	if (type == VALUE_BIGINT)
	{
		int64		x;

		memcpy(&x, value, sizeof(int64));
		snprintf(buf, len, INT64_FORMAT, x);
	}
	else
		snprintf(buf, len, "%.*s", UUID_TEXT_LEN, (const char *) value);
}

/* make room for "more" values */
static void
values_reserve(ValueArray *va, size_t more)
{
	size_t		newcap;
	char	   *newdata;

	if (va->n + more <= va->cap)
		return;
	newcap = Max(va->cap * 2, va->n + more);
	newcap = Max(newcap, 1024);
	newdata = realloc(va->data, newcap * va->esize);
	if (newdata == NULL)
	{
		fprintf(stderr, "%s: out of memory (%zu values)\n", PROGNAME, newcap);
		exit(2);
	}
	va->data = newdata;
	va->cap = newcap;
}

/* copy a libpq message without its trailing newline */
static const char *
strip_message(char *buf, size_t len, const char *msg)
{
	size_t		n;

	if (msg == NULL || msg[0] == '\0')
		msg = "(no error message)";
	strlcpy(buf, msg, len);
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return buf;
}

/* record a fatal error of this client and make every thread stop */
static void
client_fail(Client *cl, const char *fmt,...)
{
	va_list		ap;

	if (!cl->failed)
	{
		va_start(ap, fmt);
		vsnprintf(cl->errmsg, sizeof(cl->errmsg), fmt, ap);
		va_end(ap);
		cl->failed = true;
	}
	atomic_store(&cl->shared->stop, true);
}

/*
 * Print server notices (including the FATAL message of a terminated backend,
 * which arrives outside any query) with the connection number, or not at
 * all with --quiet.
 */
static void
notice_processor(void *arg, const char *message)
{
	Client	   *cl = (Client *) arg;
	char		msg[512];

	if (!cl->shared->opts->quiet)
		fprintf(stderr, "%s: connection %d: %s\n", PROGNAME, cl->id,
				strip_message(msg, sizeof(msg), message));
}

static PGconn *
open_connection(const char *conninfo)
{
	/*
	 * application_name comes before dbname so that the connection string can
	 * override it, while it still overrides PGAPPNAME from the environment
	 * (test harnesses set that): the tests find our backends by this name.
	 */
	const char *keywords[] = {"application_name", "dbname", NULL};
	const char *values[] = {PROGNAME, conninfo, NULL};

	return PQconnectdbParams(keywords, values, 1);
}

/* report ready and wait for the gate to open; false means abort */
static bool
wait_at_gate(Shared *sh)
{
	StartGate  *gate = &sh->gate;
	bool		abort;

	pthread_mutex_lock(&gate->lock);
	gate->nready++;
	pthread_cond_signal(&gate->ready_cond);
	while (!gate->open)
		pthread_cond_wait(&gate->open_cond, &gate->lock);
	abort = gate->abort;
	pthread_mutex_unlock(&gate->lock);
	return !abort;
}

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
 * batch is retried), false if it must stop.
 */
static bool
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
static void
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

		if (opts->duration > 0)
		{
			int64		left = MAX_TOTAL_IDS / opts->clients - (int64) cl->values.n;

			if (now_seconds() - start >= opts->duration)
				break;
			if (left <= 0)
			{
				cl->capped = true;
				break;
			}
			n = (int) Min(left, (int64) opts->batch);
		}
		else
		{
			int64		left = opts->ids - (int64) cl->values.n;

			if (left <= 0)
				break;
			n = (int) Min(left, (int64) opts->batch);
		}

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

static void *
client_thread(void *arg)
{
	Client	   *cl = (Client *) arg;
	char		msg[512];

	cl->conn = open_connection(cl->shared->opts->conninfo);
	/* survives PQreset, which keeps the PGconn */
	PQsetNoticeProcessor(cl->conn, notice_processor, cl);
	if (PQstatus(cl->conn) == CONNECTION_OK)
		cl->connected = true;
	else
		client_fail(cl, "could not connect: %s",
					strip_message(msg, sizeof(msg), PQerrorMessage(cl->conn)));

	if (wait_at_gate(cl->shared))
		run_client(cl);
	return NULL;
}

/* per-connection order check; returns the number of violations */
static int64
check_order(const Options *opts, Client *clients)
{
	int			(*cmp) (const void *, const void *) =
		opts->type == VALUE_BIGINT ? compare_bigint : compare_uuid;
	int64		violations = 0;

	for (int c = 0; c < opts->clients; c++)
	{
		const ValueArray *va = &clients[c].values;

		for (size_t i = 1; i < va->n; i++)
		{
			const char *prev = va->data + (i - 1) * va->esize;
			const char *cur = va->data + i * va->esize;

			if (cmp(prev, cur) < 0)
				continue;
			violations++;
			if (!opts->quiet && violations <= MAX_REPORT)
			{
				char		a[MAX_VALUE_TEXT];
				char		b[MAX_VALUE_TEXT];

				format_value(a, sizeof(a), opts->type, prev);
				format_value(b, sizeof(b), opts->type, cur);
				printf("%s: order violation: connection %d, position %zu: %s followed by %s\n",
					   PROGNAME, c, i, a, b);
			}
		}
	}
	return violations;
}

/*
 * Global uniqueness check; returns the number of duplicates (values that
 * occur k times count k - 1).  The first few duplicated values are located
 * in the per-connection streams for the report.
 */
static int64
check_unique(const Options *opts, Client *clients, int64 total)
{
	int			(*cmp) (const void *, const void *) =
		opts->type == VALUE_BIGINT ? compare_bigint : compare_uuid;
	size_t		esize = clients[0].values.esize;
	char	   *all;
	char	   *dups;
	int			ndups_reported = 0;
	int64		duplicates = 0;
	size_t		off = 0;

	if (total < 2)
		return 0;

	all = xmalloc((size_t) total * esize);
	for (int c = 0; c < opts->clients; c++)
	{
		const ValueArray *va = &clients[c].values;

		if (va->n > 0)
			memcpy(all + off * esize, va->data, va->n * esize);
		off += va->n;
	}
	qsort(all, (size_t) total, esize, cmp);

	dups = xmalloc(MAX_REPORT * esize);
	for (size_t i = 1; i < (size_t) total; i++)
	{
		if (cmp(all + (i - 1) * esize, all + i * esize) != 0)
			continue;
		duplicates++;
		/* remember each duplicated value once */
		if (ndups_reported < MAX_REPORT &&
			(i < 2 || cmp(all + (i - 2) * esize, all + i * esize) != 0))
			memcpy(dups + (ndups_reported++) * esize, all + i * esize, esize);
	}
	free(all);

	if (!opts->quiet)
	{
		for (int d = 0; d < ndups_reported; d++)
		{
			const char *value = dups + d * esize;
			char		text[MAX_VALUE_TEXT];
			int			found = 0;

			format_value(text, sizeof(text), opts->type, value);
			printf("%s: duplicate value %s at", PROGNAME, text);
			for (int c = 0; c < opts->clients && found < MAX_LOCATIONS; c++)
			{
				const ValueArray *va = &clients[c].values;

				for (size_t i = 0; i < va->n && found < MAX_LOCATIONS; i++)
				{
					if (cmp(va->data + i * esize, value) == 0)
					{
						printf("%s connection %d position %zu",
							   found > 0 ? "," : "", c, i);
						found++;
					}
				}
			}
			printf("%s\n", found >= MAX_LOCATIONS ? ", ..." : "");
		}
	}
	free(dups);
	return duplicates;
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
	};
	Shared		shared;
	Client	   *clients;
	pthread_t  *threads;
	int			nstarted = 0;
	int			nfailed = 0;
	bool		capped = false;
	int			c;
	int			optindex;
	bool		any_failed = false;
	double		t0;
	double		elapsed;
	int64		total = 0;
	int64		errors = 0;
	int64		reconnects = 0;
	int64		violations = 0;
	int64		duplicates;
	bool		short_count;
	bool		pass;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-?") == 0))
	{
		usage();
		exit(0);
	}

	while ((c = getopt_long(argc, argv, "d:c:n:b:e:t:o:D:q?",
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
			case '?':
			default:
				/* getopt_long has complained already */
				fprintf(stderr, "Try \"%s --help\" for more information.\n", PROGNAME);
				exit(2);
		}
	}
	if (optind < argc)
		usage_error("too many command-line arguments (first is \"%s\")", argv[optind]);
	if (opts.duration == 0 && (int64) opts.clients * opts.ids > MAX_TOTAL_IDS)
		usage_error("too many values: %d clients x " INT64_FORMAT " values exceeds " INT64_FORMAT,
					opts.clients, opts.ids, MAX_TOTAL_IDS);

	if (!PQisthreadsafe())
	{
		fprintf(stderr, "%s: libpq is not thread-safe\n", PROGNAME);
		exit(2);
	}

	/* set up the threads' state */
	shared.opts = &opts;
	pthread_mutex_init(&shared.gate.lock, NULL);
	pthread_cond_init(&shared.gate.ready_cond, NULL);
	pthread_cond_init(&shared.gate.open_cond, NULL);
	shared.gate.nready = 0;
	shared.gate.open = false;
	shared.gate.abort = false;
	atomic_init(&shared.stop, false);

	clients = xmalloc(sizeof(Client) * opts.clients);
	threads = xmalloc(sizeof(pthread_t) * opts.clients);
	for (int i = 0; i < opts.clients; i++)
	{
		Client	   *cl = &clients[i];

		memset(cl, 0, sizeof(Client));
		cl->id = i;
		cl->shared = &shared;
		cl->values.esize = opts.type == VALUE_BIGINT ? sizeof(int64) : UUID_TEXT_LEN;
		if (opts.duration == 0)
			values_reserve(&cl->values, (size_t) opts.ids);
	}

	/* start the threads: each connects and waits at the gate */
	for (int i = 0; i < opts.clients; i++)
	{
		int			rc = pthread_create(&threads[i], NULL, client_thread, &clients[i]);

		if (rc != 0)
		{
			fprintf(stderr, "%s: could not create thread %d: %s\n",
					PROGNAME, i, strerror(rc));
			any_failed = true;
			break;
		}
		nstarted++;
	}

	/* wait until all are connected, then let them go together */
	pthread_mutex_lock(&shared.gate.lock);
	while (shared.gate.nready < nstarted)
		pthread_cond_wait(&shared.gate.ready_cond, &shared.gate.lock);
	for (int i = 0; i < nstarted; i++)
	{
		if (!clients[i].connected)
			any_failed = true;
	}
	shared.gate.abort = any_failed;
	shared.gate.open = true;
	pthread_cond_broadcast(&shared.gate.open_cond);
	pthread_mutex_unlock(&shared.gate.lock);
	t0 = now_seconds();

	for (int i = 0; i < nstarted; i++)
		pthread_join(threads[i], NULL);
	elapsed = now_seconds() - t0;

	for (int i = 0; i < nstarted; i++)
	{
		Client	   *cl = &clients[i];

		if (cl->capped)
			capped = true;
		if (cl->failed)
		{
			/* all connections often fail alike: report only the first few */
			if (nfailed++ < MAX_REPORT)
				fprintf(stderr, "%s: connection %d: %s\n", PROGNAME, i, cl->errmsg);
			any_failed = true;
		}
		total += (int64) cl->values.n;
		errors += cl->errors;
		reconnects += cl->reconnects;
		PQfinish(cl->conn);
		cl->conn = NULL;
	}

	if (nfailed > MAX_REPORT)
		fprintf(stderr, "%s: ... and %d more connections failed\n",
				PROGNAME, nfailed - MAX_REPORT);
	if (any_failed)
	{
		for (int i = 0; i < opts.clients; i++)
			free(clients[i].values.data);
		free(clients);
		free(threads);
		exit(2);
	}

	/* the checks */
	if (opts.strict)
		violations = check_order(&opts, clients);
	duplicates = check_unique(&opts, clients, total);
	if (opts.duration > 0)
		short_count = (total == 0);
	else
		short_count = (total < (int64) opts.clients * opts.ids);
	pass = (duplicates == 0 && violations == 0 && !short_count);

	/* the summary */
	if (opts.duration > 0)
		printf("%s: %d clients x %g s of %s in %.3f s (%.0f values/s)\n",
			   PROGNAME, opts.clients, opts.duration, opts.expr, elapsed,
			   elapsed > 0 ? (double) total / elapsed : 0.0);
	else
		printf("%s: %d clients x " INT64_FORMAT " values of %s in %.3f s (%.0f values/s)\n",
			   PROGNAME, opts.clients, opts.ids, opts.expr, elapsed,
			   elapsed > 0 ? (double) total / elapsed : 0.0);
	printf("%s: " INT64_FORMAT " values, " INT64_FORMAT " distinct, "
		   INT64_FORMAT " duplicates, " INT64_FORMAT " order violations, "
		   INT64_FORMAT " errors, " INT64_FORMAT " reconnects\n",
		   PROGNAME, total, total - duplicates, duplicates, violations,
		   errors, reconnects);
	if (capped)
		printf("%s: stopped early: reached the limit of " INT64_FORMAT " values per connection\n",
			   PROGNAME, MAX_TOTAL_IDS / opts.clients);
	if (short_count)
	{
		if (opts.duration > 0)
			printf("%s: no values were collected\n", PROGNAME);
		else
			printf("%s: expected " INT64_FORMAT " values, collected " INT64_FORMAT "\n",
				   PROGNAME, (int64) opts.clients * opts.ids, total);
	}
	printf("%s: %s\n", PROGNAME, pass ? "PASS" : "FAIL");

	for (int i = 0; i < opts.clients; i++)
		free(clients[i].values.data);
	free(clients);
	free(threads);
	pthread_cond_destroy(&shared.gate.open_cond);
	pthread_cond_destroy(&shared.gate.ready_cond);
	pthread_mutex_destroy(&shared.gate.lock);

	return pass ? 0 : 1;
}
