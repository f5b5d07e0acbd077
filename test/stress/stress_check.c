/*-------------------------------------------------------------------------
 *
 * stress_check.c
 *	  The values the connections received, and the checks of expression
 *	  mode: per-connection order and global uniqueness; --save.
 *
 * Every connection appends what it receives to its own ValueArray, a
 * growable array of fixed-size values: int64 (--type=bigint), the 36 bytes
 * of a UUID's canonical text (--type=uuid, compared byte by byte), or
 * SeqValue pairs in sequence mode (checked in stress_seq_check.c).  Once
 * every thread is joined, the main thread checks them all:
 *
 *	1. per-connection order (--order=strict): every value a connection
 *	   received is strictly greater than the one it received before it, in
 *	   the order received (rows within a batch, batches in order, across
 *	   reconnects too);
 *	2. global uniqueness: no value was produced twice, over all connections.
 *
 * The first MAX_REPORT order violations and duplicated values are printed
 * (unless --quiet), each duplicate with where the connections received it.
 *
 * test/stress/stress_check.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <errno.h>

#include "stress.h"

/* how many occurrences of one duplicated value to locate */
#define MAX_LOCATIONS		4

/* room for a value's text in reports */
#define MAX_VALUE_TEXT		64

typedef int (*ValueCmp) (const void *a, const void *b);

/* make room for "more" values */
void
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

/* qsort comparators of the two value types */
int
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

/* the comparison of values of a type: signed 64-bit integers or UUID text */
static ValueCmp
value_cmp(ValueType type)
{
	return type == VALUE_BIGINT ? compare_bigint : compare_uuid;
}

/* a value as text, for reports */
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

/* per-connection order check; returns the number of violations */
int64
check_order(const Options *opts, Client *clients)
{
	ValueCmp	cmp = value_cmp(opts->type);
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
 * Print a duplicated value and where the connections received it: the first
 * MAX_LOCATIONS occurrences, connection by connection.
 */
static void
report_duplicate(const Options *opts, const Client *clients, ValueCmp cmp,
				 const char *value)
{
	size_t		esize = clients[0].values.esize;
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

/*
 * Global uniqueness check; returns the number of duplicates (values that
 * occur k times count k - 1).  The first few duplicated values are located
 * in the per-connection streams for the report.
 */
int64
check_unique(const Options *opts, Client *clients, int64 total)
{
	ValueCmp	cmp = value_cmp(opts->type);
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
			report_duplicate(opts, clients, cmp, dups + d * esize);
	}
	free(dups);
	return duplicates;
}

/*
 * --save: write every value received, one per line, connection after
 * connection, so that a caller can check uniqueness over several runs
 * (several servers).  False (with a message) if the file cannot be written.
 */
bool
save_values(const Options *opts, const Client *clients)
{
	FILE	   *f = fopen(opts->save, "w");

	if (f == NULL)
	{
		fprintf(stderr, "%s: could not open \"%s\": %s\n", PROGNAME, opts->save, strerror(errno));
		return false;
	}
	for (int c = 0; c < opts->clients; c++)
	{
		const ValueArray *va = &clients[c].values;

		for (size_t i = 0; i < va->n; i++)
		{
			if (opts->type == VALUE_BIGINT)
			{
				int64		v;

				memcpy(&v, va->data + i * va->esize, sizeof(v));
				fprintf(f, INT64_FORMAT "\n", v);
			}
			else
				fprintf(f, "%.*s\n", UUID_TEXT_LEN, va->data + i * va->esize);
		}
	}
	if (fclose(f) != 0)
	{
		fprintf(stderr, "%s: could not write \"%s\": %s\n", PROGNAME, opts->save, strerror(errno));
		return false;
	}
	return true;
}
