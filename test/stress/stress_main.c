/*-------------------------------------------------------------------------
 *
 * stress_main.c
 *	  Concurrency stress client for ID generators: options and main.
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
 * transaction on random keys, committed or rolled back, and the committed
 * values of every key must be exactly 1, 2, ..., count (stress_seq.c tells
 * the details, and those of --cached).
 *
 * Exit status: 0 if all checks pass, 1 if any check fails (a duplicate, an
 * order violation, a gap or missing values), 2 on usage, connection or
 * query errors.
 *
 * Where to look:
 *
 *	stress_main.c		options, usage, main
 *	stress_conn.c		connections, their threads, the start gate, batch
 *						sizes (-n or -D/--duration), the totals of a run
 *	stress_reconnect.c	query errors and --reconnect
 *	stress_expr.c		expression mode (-e, -t, --order): the loop, the
 *						summary
 *	stress_seq.c		sequence mode (-k, --hot, --rollback, --seq-func,
 *						--cached): the loop, the summary
 *	stress_check.c		the value store; the order and uniqueness checks;
 *						--save
 *	stress_seq_check.c	the key-by-key check of sequence mode
 *	stress_keytab.c		the interned key strings of sequence mode
 *	stress_util.c		memory, clock and message helpers
 *	stress.h			the types and functions they share
 *
 * test/stress/stress_main.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <errno.h>

#include "getopt_long.h"

#include "stress.h"

/* limits for the command-line arguments */
#define MAX_CLIENTS			1000
#define MAX_IDS				INT64CONST(100000000)
#define MAX_BATCH			1000000

/* sequence mode */
#define MAX_KEYS			10000000
#define DEFAULT_SEQ_FUNC	"idgen_seq_next"

/* the codes of the long options without a short form */
enum
{
	OPT_RECONNECT = 1,
	OPT_HOT,
	OPT_SEQ_FUNC,
	OPT_ROLLBACK,
	OPT_CACHED,
	OPT_SAVE
};

static const struct option long_options[] = {
	{"dbname", required_argument, NULL, 'd'},
	{"clients", required_argument, NULL, 'c'},
	{"ids", required_argument, NULL, 'n'},
	{"batch", required_argument, NULL, 'b'},
	{"expr", required_argument, NULL, 'e'},
	{"type", required_argument, NULL, 't'},
	{"order", required_argument, NULL, 'o'},
	{"duration", required_argument, NULL, 'D'},
	{"reconnect", no_argument, NULL, OPT_RECONNECT},
	{"quiet", no_argument, NULL, 'q'},
	{"keys", required_argument, NULL, 'k'},
	{"hot", required_argument, NULL, OPT_HOT},
	{"seq-func", required_argument, NULL, OPT_SEQ_FUNC},
	{"rollback", required_argument, NULL, OPT_ROLLBACK},
	{"cached", no_argument, NULL, OPT_CACHED},
	{"save", required_argument, NULL, OPT_SAVE},
	{"help", no_argument, NULL, '?'},
	{NULL, 0, NULL, 0}
};

/* the settings without options */
static const Options default_options = {
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

static void usage_error(const char *fmt,...) pg_attribute_printf(1, 2);

/* --help */
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

/* a usage error: the message, a hint, exit status 2 */
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

/* an integer option's value, from min to max */
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

/* a duration option's value: seconds, more than 0 and at most max */
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

/*
 * Apply one option of expression mode or of both modes; false if "c" is
 * none of them.
 */
static bool
set_option(Options *opts, int c, char *arg)
{
	switch (c)
	{
		case 'd':
			opts->conninfo = arg;
			break;
		case 'c':
			opts->clients = (int) parse_integer(arg, "-c/--clients", 1, MAX_CLIENTS);
			break;
		case 'n':
			opts->ids = parse_integer(arg, "-n/--ids", 1, MAX_IDS);
			break;
		case 'b':
			opts->batch = (int) parse_integer(arg, "-b/--batch", 1, MAX_BATCH);
			break;
		case 'e':
			if (arg[0] == '\0')
				usage_error("option -e/--expr must not be empty");
			opts->expr = arg;
			break;
		case 't':
			if (strcmp(arg, "bigint") == 0)
				opts->type = VALUE_BIGINT;
			else if (strcmp(arg, "uuid") == 0)
				opts->type = VALUE_UUID;
			else
				usage_error("invalid value \"%s\" for option -t/--type: must be \"bigint\" or \"uuid\"",
							arg);
			break;
		case 'o':
			if (strcmp(arg, "strict") == 0)
				opts->strict = true;
			else if (strcmp(arg, "none") == 0)
				opts->strict = false;
			else
				usage_error("invalid value \"%s\" for option -o/--order: must be \"strict\" or \"none\"",
							arg);
			break;
		case 'D':
			opts->duration = parse_seconds(arg, "-D/--duration", MAX_DURATION);
			break;
		case OPT_RECONNECT:
			opts->reconnect = true;
			break;
		case 'q':
			opts->quiet = true;
			break;
		case 'k':
			opts->keys = (int) parse_integer(arg, "-k/--keys", 1, MAX_KEYS);
			break;
		case OPT_SAVE:
			opts->save = arg;
			break;
		default:
			return false;
	}
	return true;
}

/*
 * Apply one of the options that need -k/--keys; false if "c" is none of
 * them.
 */
static bool
set_seq_option(Options *opts, int c, char *arg)
{
	switch (c)
	{
		case OPT_HOT:
			opts->hot = parse_fraction(arg, "--hot");
			break;
		case OPT_SEQ_FUNC:
			if (!valid_function_name(arg))
				usage_error("invalid value \"%s\" for option --seq-func: must match ^[a-zA-Z_][a-zA-Z0-9_.]*$",
							arg);
			opts->seq_func = arg;
			break;
		case OPT_CACHED:
			opts->cached = true;
			break;
		case OPT_ROLLBACK:
			opts->rollback = parse_fraction(arg, "--rollback");
			break;
		default:
			return false;
	}
	return true;
}

/*
 * Parse the command line into "opts": exits with status 0 after --help,
 * with status 2 (and a message) on a usage error.
 */
static void
parse_options(int argc, char **argv, Options *opts)
{
	bool		seq_option = false; /* an option that needs -k given */
	int			c;
	int			optindex;

	*opts = default_options;
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-?") == 0))
	{
		usage();
		exit(0);
	}

	while ((c = getopt_long(argc, argv, "d:c:n:b:e:t:o:D:qk:?",
							long_options, &optindex)) != -1)
	{
		if (set_seq_option(opts, c, optarg))
			seq_option = true;
		else if (!set_option(opts, c, optarg))
		{
			/* '?': getopt_long has complained already */
			fprintf(stderr, "Try \"%s --help\" for more information.\n", PROGNAME);
			exit(2);
		}
	}
	if (optind < argc)
		usage_error("too many command-line arguments (first is \"%s\")", argv[optind]);
	if (opts->save != NULL && opts->keys > 0)
		usage_error("--save is not available in sequence mode");
	if (seq_option && opts->keys == 0)
		usage_error("options --hot, --seq-func and --rollback need -k/--keys");
	format_fraction(opts->hot_text, sizeof(opts->hot_text), opts->hot);
	format_fraction(opts->rollback_text, sizeof(opts->rollback_text), opts->rollback);
	if (opts->duration == 0 && (int64) opts->clients * opts->ids > MAX_TOTAL_IDS)
		usage_error("too many values: %d clients x " INT64_FORMAT " values exceeds " INT64_FORMAT,
					opts->clients, opts->ids, MAX_TOTAL_IDS);
}

int
main(int argc, char **argv)
{
	Options		opts;
	Shared		shared;
	Client	   *clients;
	Totals		totals;
	bool		pass;

	parse_options(argc, argv, &opts);
	if (!PQisthreadsafe())
	{
		fprintf(stderr, "%s: libpq is not thread-safe\n", PROGNAME);
		exit(2);
	}

	/* connect and generate; nothing to check if any connection failed */
	clients = clients_create(&opts, &shared);
	if (!run_clients(&opts, &shared, clients, &totals))
	{
		clients_free(&opts, &shared, clients);
		exit(2);
	}

	/* the mode's checks and summary */
	if (opts.keys > 0)
		pass = seq_report(&opts, clients, &totals);
	else
		pass = expr_report(&opts, clients, &totals);

	clients_free(&opts, &shared, clients);
	return pass ? 0 : 1;
}
