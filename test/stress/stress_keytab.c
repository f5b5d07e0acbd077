/*-------------------------------------------------------------------------
 *
 * stress_keytab.c
 *	  Interned key strings for sequence mode (-k/--keys).
 *
 * Every connection interns the keys it receives in its own KeyTable and
 * keeps small key ids with its values; the sequence-mode check maps them
 * to the ids of one global table (stress_seq_check.c).  A KeyTable is an
 * array of NUL-terminated key texts with an open-addressing hash table of
 * ids over it; keys are arbitrary text without NUL bytes.
 *
 * test/stress/stress_keytab.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include "stress.h"

/*
 * Key hash: FNV-1a with a final mix, so that the low bits used for the
 * slots depend on every byte (keys like 'k:123' differ only at the end).
 */
static uint32
hash_key(const char *key, size_t len)
{
	uint32		h = 2166136261u;

	for (size_t i = 0; i < len; i++)
	{
		h ^= (unsigned char) key[i];
		h *= 16777619u;
	}
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/* an empty table */
void
keytable_init(KeyTable *kt)
{
	memset(kt, 0, sizeof(KeyTable));
	kt->nslots = 64;
	kt->slots = xmalloc(sizeof(int32) * kt->nslots);
	memset(kt->slots, 0xff, sizeof(int32) * kt->nslots);	/* all -1 */
}

/* free a table's memory; it is left empty, and may be freed again */
void
keytable_free(KeyTable *kt)
{
	free(kt->text);
	free(kt->offset);
	free(kt->length);
	free(kt->hash);
	free(kt->slots);
	memset(kt, 0, sizeof(KeyTable));
}

/* the id of a key, added to the table if it is new */
int32
keytable_intern(KeyTable *kt, const char *key, size_t len)
{
	uint32		h = hash_key(key, len);
	uint32		mask = kt->nslots - 1;
	uint32		i;
	int32		id;

	for (i = h & mask; (id = kt->slots[i]) >= 0; i = (i + 1) & mask)
	{
		if (kt->hash[id] == h && kt->length[id] == len &&
			memcmp(kt->text + kt->offset[id], key, len) == 0)
			return id;
	}

	/* a new key */
	if (kt->nkeys == kt->keycap)
	{
		if (kt->keycap >= PG_INT32_MAX / 4)
		{
			fprintf(stderr, "%s: too many distinct keys\n", PROGNAME);
			exit(2);
		}
		kt->keycap = Max(kt->keycap * 2, 1024);
		kt->offset = xrealloc(kt->offset, sizeof(size_t) * kt->keycap);
		kt->length = xrealloc(kt->length, sizeof(uint32) * kt->keycap);
		kt->hash = xrealloc(kt->hash, sizeof(uint32) * kt->keycap);
	}
	if (kt->textlen + len + 1 > kt->textcap)
	{
		kt->textcap = Max(kt->textcap * 2, kt->textlen + len + 1);
		kt->textcap = Max(kt->textcap, 16384);
		kt->text = xrealloc(kt->text, kt->textcap);
	}
	id = kt->nkeys++;
	memcpy(kt->text + kt->textlen, key, len);
	kt->text[kt->textlen + len] = '\0';
	kt->offset[id] = kt->textlen;
	kt->length[id] = (uint32) len;
	kt->hash[id] = h;
	kt->textlen += len + 1;
	kt->slots[i] = id;

	/* keep the load factor at most 1/2 */
	if ((size_t) kt->nkeys * 2 > kt->nslots)
	{
		kt->nslots *= 2;
		mask = kt->nslots - 1;
		kt->slots = xrealloc(kt->slots, sizeof(int32) * kt->nslots);
		memset(kt->slots, 0xff, sizeof(int32) * kt->nslots);
		for (int32 k = 0; k < kt->nkeys; k++)
		{
			for (i = kt->hash[k] & mask; kt->slots[i] >= 0; i = (i + 1) & mask)
				;
			kt->slots[i] = k;
		}
	}
	return id;
}

/* a key for messages, cut to MAX_KEY_REPORT bytes */
const char *
report_key(char *buf, size_t len, const char *key)
{
	if (strlen(key) > MAX_KEY_REPORT)
		snprintf(buf, len, "%.*s...", MAX_KEY_REPORT, key);
	else
		snprintf(buf, len, "%s", key);
	return buf;
}
