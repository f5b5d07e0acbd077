/*-------------------------------------------------------------------------
 *
 * stress_main.c
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
 * test/stress/stress_main.c
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
	Shared		shared;
	Client	   *clients;
	Totals		totals;
	int			c;
	int			optindex;
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
		pass = seq_report(&opts, clients, &totals);
	else
		pass = expr_report(&opts, clients, &totals);

	clients_free(&opts, &shared, clients);

	return pass ? 0 : 1;
}
