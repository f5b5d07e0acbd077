/*-------------------------------------------------------------------------
 *
 * stress_seq_check.c
 *	  The check of sequence mode (-k/--keys): the values of every key.
 *
 * Every connection kept (key id, value) pairs, SeqValue, with key ids local
 * to its own KeyTable.  The check turns them into the ids of one global
 * table, gathers the values key by key, sorts each key's values and counts
 *
 *	- duplicates: a value that occurs k times counts k - 1 (with --cached,
 *	  where every value is kept, this is the only check on values);
 *	- gaps: runs of missing values in 1, 2, ..., max, and the values missing
 *	  in them (only if asked: not with --reconnect or --cached);
 *	- values below 1.
 *
 * The first MAX_REPORT keys with any of these are printed (unless --quiet),
 * each with its first few duplicated values, gaps and values below 1.
 *
 * test/stress/stress_seq_check.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include "stress.h"

/* per problem key: how many duplicated values and gaps to print */
#define MAX_KEY_DETAILS		5

/* what the check found in the values of one key */
typedef struct KeyFindings
{
	int64		dups;
	int64		gaps;
	int64		missing;
	int64		below;
	char		dupstr[512];	/* the first few duplicated values */
	char		gapstr[512];	/* the first few gaps */
	char		belowstr[512];	/* the first few values below 1 */
} KeyFindings;

/*
 * Intern every client's keys in "global" and rewrite the key ids of the
 * clients' values to the global ones.
 */
static void
map_to_global_keys(const Options *opts, Client *clients, KeyTable *global)
{
	keytable_init(global);
	for (int c = 0; c < opts->clients; c++)
	{
		KeyTable   *kt = &clients[c].keytab;
		SeqValue   *sv = (SeqValue *) clients[c].values.data;
		int32	   *map = xmalloc(sizeof(int32) * Max(kt->nkeys, 1));

		for (int32 k = 0; k < kt->nkeys; k++)
			map[k] = keytable_intern(global, kt->text + kt->offset[k],
									 kt->length[k]);
		for (size_t i = 0; i < clients[c].values.n; i++)
			sv[i].key = map[sv[i].key];
		free(map);
	}
}

/*
 * Gather the values key by key (a counting sort by global key id): returns
 * them, and in *startp where each key's values begin (nk + 1 entries, the
 * last one "total").
 */
static int64 *
group_by_key(const Options *opts, const Client *clients, int32 nk,
			 int64 total, int64 **startp)
{
	int64	   *start;
	int64	   *fill;
	int64	   *vals;

	start = xmalloc(sizeof(int64) * ((size_t) nk + 1));
	memset(start, 0, sizeof(int64) * ((size_t) nk + 1));
	for (int c = 0; c < opts->clients; c++)
	{
		const SeqValue *sv = (const SeqValue *) clients[c].values.data;

		for (size_t i = 0; i < clients[c].values.n; i++)
			start[sv[i].key + 1]++;
	}
	for (int32 k = 0; k < nk; k++)
		start[k + 1] += start[k];
	Assert(start[nk] == total);
	fill = xmalloc(sizeof(int64) * Max(nk, 1));
	if (nk > 0)
		memcpy(fill, start, sizeof(int64) * nk);
	vals = xmalloc(sizeof(int64) * (size_t) Max(total, 1));
	for (int c = 0; c < opts->clients; c++)
	{
		const SeqValue *sv = (const SeqValue *) clients[c].values.data;

		for (size_t i = 0; i < clients[c].values.n; i++)
			vals[fill[sv[i].key]++] = sv[i].value;
	}
	free(fill);
	*startp = start;
	return vals;
}

/*
 * Check the n values of one key, sorting them on the way: count duplicates,
 * values below 1 and (if check_gaps) gaps in 1, 2, ..., and describe the
 * first few of each.
 */
static void
check_key(int64 *v, int64 n, bool check_gaps, KeyFindings *kf)
{
	int64		expect = 1;
	int			ndupvals = 0;

	kf->dups = kf->gaps = kf->missing = kf->below = 0;
	kf->dupstr[0] = kf->gapstr[0] = kf->belowstr[0] = '\0';
	qsort(v, (size_t) n, sizeof(int64), compare_bigint);

	for (int64 i = 0; i < n; i++)
	{
		if (i > 0 && v[i] == v[i - 1])
		{
			kf->dups++;
			/* describe each duplicated value once */
			if (i < 2 || v[i - 2] != v[i])
			{
				int64		j = i + 1;

				while (j < n && v[j] == v[i])
					j++;
				if (ndupvals++ < MAX_KEY_DETAILS)
					appendf(kf->dupstr, sizeof(kf->dupstr), "%s" INT64_FORMAT " (x" INT64_FORMAT ")",
							ndupvals > 1 ? ", " : "", v[i], j - i + 1);
				else if (ndupvals == MAX_KEY_DETAILS + 1)
					appendf(kf->dupstr, sizeof(kf->dupstr), ", ...");
			}
			continue;
		}
		if (v[i] < 1)
		{
			kf->below++;
			if (kf->below <= MAX_KEY_DETAILS)
				appendf(kf->belowstr, sizeof(kf->belowstr), "%s" INT64_FORMAT,
						kf->below > 1 ? ", " : "", v[i]);
			else if (kf->below == MAX_KEY_DETAILS + 1)
				appendf(kf->belowstr, sizeof(kf->belowstr), ", ...");
			continue;
		}
		if (check_gaps && v[i] > expect)
		{
			kf->gaps++;
			kf->missing += v[i] - expect;
			if (kf->gaps <= MAX_KEY_DETAILS)
			{
				if (v[i] - 1 == expect)
					appendf(kf->gapstr, sizeof(kf->gapstr), "%s" INT64_FORMAT,
							kf->gaps > 1 ? ", " : "", expect);
				else
					appendf(kf->gapstr, sizeof(kf->gapstr), "%s" INT64_FORMAT ".." INT64_FORMAT,
							kf->gaps > 1 ? ", " : "", expect, v[i] - 1);
			}
			else if (kf->gaps == MAX_KEY_DETAILS + 1)
				appendf(kf->gapstr, sizeof(kf->gapstr), ", ...");
		}
		expect = v[i] + 1;
	}
}

/* print one key's findings; v holds its n values, sorted */
static void
report_key_findings(const char *key, const int64 *v, int64 n,
					const KeyFindings *kf)
{
	char		kbuf[MAX_KEY_REPORT + 8];

	printf("%s: key '%s': " INT64_FORMAT " values, max " INT64_FORMAT,
		   PROGNAME, report_key(kbuf, sizeof(kbuf), key), n, v[n - 1]);
	if (kf->dups > 0)
		printf("; " INT64_FORMAT " duplicates: %s", kf->dups, kf->dupstr);
	if (kf->gaps > 0)
		printf("; " INT64_FORMAT " gaps, " INT64_FORMAT " values missing: %s",
			   kf->gaps, kf->missing, kf->gapstr);
	if (kf->below > 0)
		printf("; " INT64_FORMAT " values below 1: %s", kf->below, kf->belowstr);
	printf("\n");
}

/*
 * Sequence-mode check: the committed values of every key must be exactly
 * 1, 2, ..., count.  Counts duplicates (a value that occurs k times counts
 * k - 1), gaps (runs of missing values, and the values missing in them; only
 * if check_gaps) and values below 1, and prints the first few keys with any
 * of them.  The clients' key ids are turned into global ones on the way.
 */
void
check_seq(const Options *opts, Client *clients, int64 total, bool check_gaps,
		  SeqCheck *out)
{
	KeyTable	global;
	int64	   *start;
	int64	   *vals;
	int			reported = 0;

	memset(out, 0, sizeof(SeqCheck));
	map_to_global_keys(opts, clients, &global);
	vals = group_by_key(opts, clients, global.nkeys, total, &start);

	for (int32 k = 0; k < global.nkeys; k++)
	{
		int64	   *v = vals + start[k];
		int64		n = start[k + 1] - start[k];
		KeyFindings kf;

		if (n == 0)				/* only in rolled-back or lost batches */
			continue;
		out->keys++;
		check_key(v, n, check_gaps, &kf);

		out->duplicates += kf.dups;
		out->gaps += kf.gaps;
		out->missing += kf.missing;
		out->below += kf.below;
		if (kf.dups == 0 && kf.gaps == 0 && kf.below == 0)
			continue;
		out->bad_keys++;
		/* a duplicate is a failure: said even when quiet */
		if ((!opts->quiet || kf.dups > 0) && reported++ < MAX_REPORT)
			report_key_findings(global.text + global.offset[k], v, n, &kf);
	}
	if ((!opts->quiet || out->duplicates > 0) && out->bad_keys > MAX_REPORT)
		printf("%s: ... and " INT64_FORMAT " more keys with duplicates or gaps\n",
			   PROGNAME, out->bad_keys - MAX_REPORT);

	free(vals);
	free(start);
	keytable_free(&global);
}
