/*-------------------------------------------------------------------------
 *
 * public.c
 *	  Public IDs: a keyed, reversible permutation of 64-bit IDs, shown as
 *	  15 URL-safe characters or kept a bigint, so that an ID shown outside
 *	  reveals neither its time, nor its server, nor how many came before.
 *
 * The permutation
 *	  Speck64/128 (Beaulieu et al., "The SIMON and SPECK Families of
 *	  Lightweight Block Ciphers", 2013): a 64-bit block, a 128-bit key, 27
 *	  rounds of add, rotate and xor on two 32-bit words.  It was chosen for
 *	  its block size, which is the ID's (a bijection on 64-bit values with
 *	  no padding and no mode of operation), for a published analysis and
 *	  test vectors (sql/public.sql checks the paper's), and for its cost: a
 *	  few nanoseconds with the round keys expanded once per key.  It is
 *	  used here as a pseudorandom permutation, for confidentiality of one
 *	  number against people who see some public IDs: not as encryption of
 *	  data, and with no authentication (any 15 valid characters decode to
 *	  some ID).  Whoever holds the key reads an ID's time and server back.
 *
 * The text form: 15 characters of Crockford's base32 (0-9 and A-Z without
 *	  I, L, O and U; read case-insensitively, with O read as 0 and I and L
 *	  as 1):
 *
 *	    version (1) | the 64-bit ciphertext (13, the first holding 4 bits) | check (1)
 *
 *	  The check character is a CRC-5 (x^5 + x^2 + 1) over the other 70 bits:
 *	  a CRC of degree 5 detects every error confined to 5 adjacent bits, so
 *	  every single mistyped character, which is refused (22P02) rather than
 *	  decoded to another ID.
 *
 * The number form: the same cipher on the non-negative bigints, 0 to 2^63 -
 *	  1, by cycle walking (encrypt again while the result is 2^63 or more:
 *	  a permutation of the 63-bit values, two rounds expected).  It carries
 *	  no key version: it is decoded with the current key unless told which.
 *
 * Keys
 *	  idgen_public_key (version, key, created_at, retired_at) belongs to the
 *	  extension's owner and is granted to nobody; the functions read it as
 *	  that owner (owner_sql.c).  Versions are 1 to 31 (one character); the
 *	  current key is the newest one not retired; a retired key decodes
 *	  nothing.  A version has one key forever, or a form would decode to
 *	  another ID: rows are never deleted, so a rotation makes the version
 *	  above every one ever made, and a restored, replicated or imported row
 *	  never gives a version another key (the trigger idgen_public_key_guard
 *	  in the extension script states the rules), and the keys are used only
 *	  while it fires in every session (check_key_triggers).  CREATE
 *	  EXTENSION makes no key, for the same reason.  Each backend keeps the
 *	  keys, expanded, until the table's relcache entry is invalidated: a
 *	  row trigger enabled ALWAYS sends that invalidation for every write to
 *	  the table (by the functions, a restore, logical replication or an
 *	  administrator), which other backends process at their next
 *	  transaction (the functions are STABLE for it), and an aborted
 *	  transaction processes its own.  Key material never appears in a
 *	  message, and rotation makes and writes it inside C (pg_strong_random,
 *	  SPI parameters), never in a statement's text; idgen_public_key_export
 *	  and _import, in the script, hand keys to and from their caller only.
 *
 * The server log
 *	  A caller may pass an import's keys as a literal, as the docs show it,
 *	  and a failed statement's text is logged (log_min_error_statement,
 *	  ERROR by default), as is the context of an error in its argument (a
 *	  JSON error's quotes the text before the fault).  So an emit_log_hook
 *	  keeps the statement, the context and the detail of every message out
 *	  of the server log while the statement's text names
 *	  idgen_public_key_import, in any case; the client still gets them, its
 *	  own text.  The text is matched, not parsed: an import called through
 *	  EXECUTE or a function of the caller's is not seen, and a statement
 *	  that names the function only in a comment loses those lines too.  The
 *	  message itself is left alone: log_statement and
 *	  log_min_duration_statement write a statement's text there, which the
 *	  docs say (docs/public-ids.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_public.h"
#include "idgen_sql.h"

PG_FUNCTION_INFO_V1(idgen_public);
PG_FUNCTION_INFO_V1(idgen_private);
PG_FUNCTION_INFO_V1(idgen_public_bigint);
PG_FUNCTION_INFO_V1(idgen_private_bigint);
PG_FUNCTION_INFO_V1(idgen_public_rotate);
PG_FUNCTION_INFO_V1(idgen_public_retire);
PG_FUNCTION_INFO_V1(idgen_speck64);
PG_FUNCTION_INFO_V1(idgen_public_key_changed);

#define PUBLIC_IMPORT_FUNCTION	"idgen_public_key_import"

#define SPECK_ROUNDS		27
#define PUBLIC_KEY_BYTES	16
#define PUBLIC_MAX_VERSION	31	/* one base32 character, 0 never used */
#define PUBLIC_LEN			15

/* ----------
 * Speck64/128
 * ----------
 */
#define ROR32(x, r)	(((x) >> (r)) | ((x) << (32 - (r))))
#define ROL32(x, r)	(((x) << (r)) | ((x) >> (32 - (r))))

typedef struct SpeckKey
{
	uint32		rk[SPECK_ROUNDS];
} SpeckKey;

/* Expand a key given as 16 bytes, the words little-endian, word 0 first. */
static void
speck_expand(const uint8 *key, SpeckKey *k)
{
	uint32		w[4];
	uint32		a;
	uint32		l[SPECK_ROUNDS + 2];

	for (int i = 0; i < 4; i++)
		w[i] = (uint32) key[4 * i] | (uint32) key[4 * i + 1] << 8 |
			(uint32) key[4 * i + 2] << 16 | (uint32) key[4 * i + 3] << 24;
	a = w[0];
	l[0] = w[1];
	l[1] = w[2];
	l[2] = w[3];
	for (uint32 i = 0; i < SPECK_ROUNDS; i++)
	{
		k->rk[i] = a;
		if (i == SPECK_ROUNDS - 1)
			break;
		l[i + 3] = (ROR32(l[i], 8) + a) ^ i;
		a = ROL32(a, 3) ^ l[i + 3];
	}
}

/* The block as one number: x, the high word, then y. */
static uint64
speck_encrypt(const SpeckKey *k, uint64 block)
{
	uint32		x = (uint32) (block >> 32);
	uint32		y = (uint32) block;

	for (int i = 0; i < SPECK_ROUNDS; i++)
	{
		x = (ROR32(x, 8) + y) ^ k->rk[i];
		y = ROL32(y, 3) ^ x;
	}
	return (uint64) x << 32 | y;
}

static uint64
speck_decrypt(const SpeckKey *k, uint64 block)
{
	uint32		x = (uint32) (block >> 32);
	uint32		y = (uint32) block;

	for (int i = SPECK_ROUNDS - 1; i >= 0; i--)
	{
		y = ROR32(y ^ x, 3);
		x = ROL32((x ^ k->rk[i]) - y, 8);
	}
	return (uint64) x << 32 | y;
}

/* ----------
 * The keys, cached per backend
 * ----------
 */
typedef struct PublicKeys
{
	bool		valid;
	Oid			nspid;			/* the extension's schema they were read in */
	Oid			relid;			/* idgen_public_key, whose invalidation drops
								 * them */
	int			current;		/* newest live version, 0 if none */
	bool		live[PUBLIC_MAX_VERSION + 1];
	SpeckKey	key[PUBLIC_MAX_VERSION + 1];
} PublicKeys;

static PublicKeys keys;
static bool callback_registered = false;

/*
 * Invalidations of the keys processed by this backend, so that a read of
 * the keys during which one arrived is used once and not cached.
 */
static uint64 keys_invalidations = 0;

enum
{
	Q_KEYS,
	Q_LOCK,
	Q_ADD,
	Q_RETIRE,
	Q_OTHERS_LIVE,
	NUM_QUERIES
};

static const IdgenStatement statement_list[NUM_QUERIES] = {
	[Q_KEYS] = {
		"SELECT version, key FROM %1$s.idgen_public_key WHERE retired_at IS NULL",
		0, {InvalidOid}
	},
	[Q_LOCK] = {
		"LOCK TABLE %1$s.idgen_public_key IN SHARE ROW EXCLUSIVE MODE",
		0, {InvalidOid}
	},

	/*
	 * Above every version ever made: rows are never deleted
	 * (idgen_public_key_guard), retired ones included.  Of those, the first
	 * of this node's ($3 of $2 nodes, idgen.active_node and
	 * idgen.active_nodes; 0 of 1 on a single server): the versions v with (v
	 * - 1) modulo $2 = $3, so that rotations on several primaries that
	 * replicate to each other make different versions, never one version with
	 * two keys; the newest is current everywhere once all arrived. No row
	 * past the last version: the table's CHECK would refuse it quoting the
	 * row, key and all.
	 */
	[Q_ADD] = {
		"INSERT INTO %1$s.idgen_public_key (version, key, created_at) "
		"SELECT n.v, $1, pg_catalog.now() "
		"FROM (SELECT (s.m OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.+) "
		"((($3 OPERATOR(pg_catalog.-) s.m) OPERATOR(pg_catalog.%%) $2 OPERATOR(pg_catalog.+) $2) "
		"OPERATOR(pg_catalog.%%) $2) AS v "
		"FROM (SELECT COALESCE(pg_catalog.max(version), 0) AS m FROM %1$s.idgen_public_key) s) n "
		"WHERE n.v OPERATOR(pg_catalog.<=) " CppAsString2(PUBLIC_MAX_VERSION) " "
		"RETURNING version",
		3, {BYTEAOID, INT4OID, INT4OID}
	},
	[Q_OTHERS_LIVE] = {
		"SELECT pg_catalog.count(*) FILTER (WHERE version OPERATOR(pg_catalog.<>) $1), "
		"pg_catalog.count(*) FILTER (WHERE version OPERATOR(pg_catalog.=) $1) "
		"FROM %1$s.idgen_public_key WHERE retired_at IS NULL",
		1, {INT4OID}
	},
	[Q_RETIRE] = {
		"UPDATE %1$s.idgen_public_key SET retired_at = pg_catalog.now() "
		"WHERE version OPERATOR(pg_catalog.=) $1 AND retired_at IS NULL RETURNING version",
		1, {INT4OID}
	},
};

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};

static void
keys_invalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == keys.relid)
	{
		keys.valid = false;
		keys_invalidations++;
	}
}

/*
 * Refuse to use keys whose table's triggers do not fire in every session.
 * idgen_public_key_guard is what keeps a version to one key when rows
 * arrive by a restore or logical replication; a data-only restore made
 * with pg_dump --disable-triggers leaves it an ordinary trigger (ENABLE
 * TRIGGER ALL), which replication's workers do not fire, and an
 * administrator may disable it.  Checked whenever the keys are read: any
 * ALTER TABLE of the table invalidates its relcache entry, and so them.
 */
static void
check_key_triggers(Oid relid, Oid nspid)
{
	static const struct
	{
		const char *trigger;
		const char *function;
	}			expected[] = {
		{"idgen_public_key_guard", "idgen_public_key_guard"},
		{"idgen_public_key_no_truncate", "idgen_public_key_guard"},
		{"idgen_public_key_changed", "idgen_public_key_changed"},
	};
	Relation	rel = table_open(relid, AccessShareLock);

	/*
	 * A copy: the lookups below may take in an invalidation of the table, and
	 * its relcache entry, built again, frees the descriptor it had.
	 */
	TriggerDesc *td = CopyTriggerDesc(rel->trigdesc);
	size_t		ok = 0;

	for (size_t e = 0; e < lengthof(expected); e++)
	{
		for (int i = 0; td != NULL && i < td->numtriggers; i++)
		{
			const Trigger *t = &td->triggers[i];
			char	   *fname;

			if (strcmp(t->tgname, expected[e].trigger) != 0 ||
				t->tgenabled != TRIGGER_FIRES_ALWAYS ||
				get_func_namespace(t->tgfoid) != nspid)
				continue;
			fname = get_func_name(t->tgfoid);
			if (fname != NULL && strcmp(fname, expected[e].function) == 0)
			{
				ok++;
				break;
			}
		}
	}
	if (td != NULL)
		FreeTriggerDesc(td);
	table_close(rel, AccessShareLock);
	if (ok != lengthof(expected))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the triggers of idgen_public_key are not enabled ALWAYS"),
				 errdetail("Without them firing in every session, a restore or a subscription could give a key version another key, and public IDs would decode to other IDs."),
				 errhint("ALTER TABLE idgen_public_key ENABLE ALWAYS TRIGGER idgen_public_key_guard, ENABLE ALWAYS TRIGGER idgen_public_key_no_truncate, ENABLE ALWAYS TRIGGER idgen_public_key_changed;")));
}

/* The keys of the extension called through 'fcinfo', read if not cached. */
static const PublicKeys *
public_keys(FunctionCallInfo fcinfo)
{
	IdgenFunction *cached = (IdgenFunction *) fcinfo->flinfo->fn_extra;
	IdgenFunction fn;
	IdgenSqlContext cx;
	uint64		n;
	uint64		invalidations;

	/* The function's owner and schema, looked up once per call site. */
	if (cached == NULL)
	{
		cached = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(IdgenFunction));
		idgen_lookup_function(fcinfo, cached);
		fcinfo->flinfo->fn_extra = cached;
	}
	fn = *cached;
	if (keys.valid && keys.nspid == fn.nspid)
		return &keys;
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(keys_invalidate, (Datum) 0);
		callback_registered = true;
	}

	memset(&keys, 0, sizeof(keys));
	keys.nspid = fn.nspid;
	keys.relid = idgen_extension_table(&fn, "idgen_public_key", true);
	if (OidIsValid(keys.relid))
		check_key_triggers(keys.relid, fn.nspid);

	/*
	 * The keys as committed now, whatever the isolation level: under
	 * REPEATABLE READ the transaction's snapshot may predate a rotation or
	 * retirement whose invalidation this backend has already processed, and
	 * the keys read with it would stay cached after the transaction, a
	 * retired version decoding on.  A commit after this snapshot sends an
	 * invalidation processed later; if one is processed before the read is
	 * done (the statement's lock), the keys serve this call only.
	 */
	invalidations = keys_invalidations;
	idgen_sql_begin(&fn, &statements, &cx);
	n = idgen_sql_run_latest(&cx, Q_KEYS, NULL, NULL);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		int32		version = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 1, &isnull));
		bytea	   *key = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[i],
														SPI_tuptable->tupdesc, 2, &isnull));

		/* Rows only the functions write: anything else is not a key. */
		if (version < 1 || version > PUBLIC_MAX_VERSION ||
			VARSIZE_ANY_EXHDR(key) != PUBLIC_KEY_BYTES)
			continue;
		speck_expand((const uint8 *) VARDATA_ANY(key), &keys.key[version]);
		keys.live[version] = true;
		keys.current = Max(keys.current, version);
	}
	idgen_sql_end(&cx);
	keys.valid = (keys_invalidations == invalidations);
	return &keys;
}

/* The current key, or an error saying there is none. */
static int
current_version(const PublicKeys *k)
{
	if (k->current == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("there is no public ID key"),
				 errdetail("idgen_public_key has no live key version: none was made or imported, or every one is retired."),
				 errhint("An administrator makes one with idgen_public_rotate(), or imports the keys of the servers whose public IDs this one must read with idgen_public_key_import().")));
	return k->current;
}

/* ----------
 * The text form
 * ----------
 */
static const char base32[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/*
 * The value of each byte read as Crockford's decoder does (either case, O
 * as 0, I and L as 1), -1 if none; built on first use.
 */
static int8 base32_values[256];
static bool base32_values_built = false;

static int
base32_value(char c)
{
	if (unlikely(!base32_values_built))
	{
		memset(base32_values, -1, sizeof(base32_values));
		for (int i = 0; i < 32; i++)
		{
			base32_values[(unsigned char) base32[i]] = (int8) i;
			base32_values[(unsigned char) pg_ascii_tolower(base32[i])] = (int8) i;
		}
		base32_values['O'] = base32_values['o'] = 0;
		base32_values['I'] = base32_values['i'] = 1;
		base32_values['L'] = base32_values['l'] = 1;
		base32_values_built = true;
	}
	return base32_values[(unsigned char) c];
}

/* CRC-5 (x^5 + x^2 + 1, initial 0) of n 5-bit symbols, most significant bit first. */
static int
crc5(const int *sym, int n)
{
	int			crc = 0;

	for (int i = 0; i < n; i++)
	{
		for (int b = 4; b >= 0; b--)
		{
			int			in = (sym[i] >> b) & 1;
			int			top = (crc >> 4) & 1;

			crc = (crc << 1) & 0x1F;
			if (in ^ top)
				crc ^= 0x05;
		}
	}
	return crc;
}

/* The 15 characters of 'version' and 'block'. */
static text *
public_text(int version, uint64 block)
{
	int			sym[PUBLIC_LEN];
	char		out[PUBLIC_LEN];

	sym[0] = version;
	for (int i = 13; i >= 1; i--)
	{
		sym[i] = (int) (block & 0x1F);
		block >>= 5;
	}
	sym[PUBLIC_LEN - 1] = crc5(sym, PUBLIC_LEN - 1);
	for (int i = 0; i < PUBLIC_LEN; i++)
		out[i] = base32[sym[i]];
	return cstring_to_text_with_len(out, PUBLIC_LEN);
}

/*
 * Refuse 'input' (len bytes, not terminated).  The message quotes at most
 * its first PUBLIC_QUOTE_MAX characters: the input is the caller's, of any
 * length, and an error is copied into the server log and to the client.
 */
#define PUBLIC_QUOTE_MAX	32

static void
report_invalid(const char *input, int len, const char *detail)
{
	int			quoted = pg_mbcharcliplen(input, len, PUBLIC_QUOTE_MAX);

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for a public ID: \"%.*s%s\"",
					quoted, input, quoted < len ? "..." : ""),
			 errdetail_internal("%s", detail)));
}

/*
 * Read 15 characters into a version and a block, or refuse with the
 * reason.  Read as Crockford's decoder reads: either case, O as 0, I and L
 * as 1, so one ID has several accepted spellings; the canonical one is
 * what idgen_public returns (README, Public IDs).
 */
static void
parse_public(const char *input, int len, int *version, uint64 *block)
{
	int			sym[PUBLIC_LEN];

	if (len != PUBLIC_LEN)
		report_invalid(input, len,
					   psprintf(_("A public ID is %d characters long; this one has %d."),
								PUBLIC_LEN, pg_mbstrlen_with_len(input, len)));
	for (int i = 0; i < PUBLIC_LEN; i++)
	{
		sym[i] = base32_value(input[i]);
		if (sym[i] < 0)
			report_invalid(input, len, _("A public ID is written in Crockford's base32: the digits and the letters but U (I and L are read as 1, O as 0)."));
	}
	if (sym[1] > 0xF)
		report_invalid(input, len, _("Its second character is out of range: a public ID's second character is 0 to F."));
	if (crc5(sym, PUBLIC_LEN - 1) != sym[PUBLIC_LEN - 1])
		report_invalid(input, len, _("Its check character does not match: a character is mistyped."));
	*version = sym[0];
	*block = 0;
	for (int i = 1; i <= 13; i++)
		*block = *block << 5 | (uint64) sym[i];
}

/*
 * idgen_public(id bigint) returns text
 *		The public form of an ID with the current key.
 */
Datum
idgen_public(PG_FUNCTION_ARGS)
{
	const PublicKeys *k = public_keys(fcinfo);
	int			v = current_version(k);

	PG_RETURN_TEXT_P(public_text(v, speck_encrypt(&k->key[v], (uint64) PG_GETARG_INT64(0))));
}

/*
 * idgen_private(public text) returns bigint
 *		The ID a public form stands for, with the key version it names.
 */
Datum
idgen_private(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	const char *input = VARDATA_ANY(t);
	int			len = (int) VARSIZE_ANY_EXHDR(t);
	const PublicKeys *k;
	int			version;
	uint64		block;

	parse_public(input, len, &version, &block);
	k = public_keys(fcinfo);
	if (version < 1 || !k->live[version])
		report_invalid(input, len, psprintf(_("It was made with key version %d, which is retired or was never made."),
											version));
	PG_RETURN_INT64((int64) speck_decrypt(&k->key[version], block));
}

/* ----------
 * The number form
 * ----------
 */
static uint64
check_number(int64 value, const char *what)
{
	if (value < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s " INT64_FORMAT " is negative", what, value),
				 errdetail("The number form maps 0 to 9223372036854775807 onto themselves.")));
	return (uint64) value;
}

/* The version to decode a number with: the one given, or the current one. */
static int
number_version(FunctionCallInfo fcinfo, const PublicKeys *k)
{
	int64		v;

	if (PG_NARGS() < 2)
		return current_version(k);
	v = PG_GETARG_INT64(1);
	if (v < 1 || v > PUBLIC_MAX_VERSION || !k->live[v])
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("public ID key version " INT64_FORMAT " does not exist or is retired", v)));
	return (int) v;
}

/*
 * idgen_public_bigint(id bigint) returns bigint
 *		The current key's permutation of the non-negative bigints.
 */
Datum
idgen_public_bigint(PG_FUNCTION_ARGS)
{
	uint64		x = check_number(PG_GETARG_INT64(0), "ID");
	const PublicKeys *k = public_keys(fcinfo);
	const SpeckKey *key = &k->key[current_version(k)];

	do
		x = speck_encrypt(key, x);
	while (x >> 63);
	PG_RETURN_INT64((int64) x);
}

/*
 * idgen_private_bigint(public bigint [, version int]) returns bigint
 */
Datum
idgen_private_bigint(PG_FUNCTION_ARGS)
{
	uint64		x = check_number(PG_GETARG_INT64(0), "public ID");
	const PublicKeys *k = public_keys(fcinfo);
	const SpeckKey *key = &k->key[number_version(fcinfo, k)];

	do
		x = speck_decrypt(key, x);
	while (x >> 63);
	PG_RETURN_INT64((int64) x);
}

/* ----------
 * Key administration
 * ----------
 */

/*
 * idgen_public_rotate() returns int
 *		A new current key, from pg_strong_random: its version.  Older forms
 *		still decode until their version is retired.
 */
Datum
idgen_public_rotate(PG_FUNCTION_ARGS)
{
	IdgenFunction fn;
	IdgenSqlContext cx;
	bytea	   *key = palloc(VARHDRSZ + PUBLIC_KEY_BYTES);
	Datum		args[3];
	int32		version = 0;
	bool		isnull;

	SET_VARSIZE(key, VARHDRSZ + PUBLIC_KEY_BYTES);
	if (!pg_strong_random(VARDATA(key), PUBLIC_KEY_BYTES))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random key")));
	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	(void) idgen_sql_run(&cx, Q_LOCK, NULL, NULL);
	args[0] = PointerGetDatum(key);
	args[1] = Int32GetDatum(idgen_active_nodes);
	args[2] = Int32GetDatum(idgen_active_node);
	idgen_node_clash_check();
	if (idgen_active_nodes > 1)
		idgen_active_node_check();

	/*
	 * Above every version committed, under the lock, whatever the isolation
	 * level.
	 */
	if (idgen_sql_run_latest(&cx, Q_ADD, args, NULL) > 0)
		version = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	idgen_sql_end(&cx);
	memset(VARDATA(key), 0, PUBLIC_KEY_BYTES);
	if (version == 0 && idgen_active_nodes > 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("this node's public ID key versions are all used"),
				 errdetail("With \"idgen.active_nodes\" = %d, node %d makes only the versions %d, %d, ... up to %d, above every version made, so that two nodes never make one version with two keys.",
						   idgen_active_nodes, idgen_active_node, idgen_active_node + 1,
						   idgen_active_node + 1 + idgen_active_nodes, PUBLIC_MAX_VERSION),
				 errhint("Rotate on a node whose versions are left, or re-key the forms by hand: store the IDs, not their public forms.")));
	if (version == 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("all %d public ID key versions are used", PUBLIC_MAX_VERSION),
				 errdetail("A public ID names its key version in one character, and a version is never made twice, so that no old form decodes to another ID."),
				 errhint("Re-key the forms by hand: store the IDs, not their public forms.")));
	PG_RETURN_INT32(version);
}

/*
 * idgen_public_retire(version int) returns boolean
 *		Retire a key version: its forms no longer decode.  True if it was
 *		live.  The current key can be retired only once a newer one exists.
 */
Datum
idgen_public_retire(PG_FUNCTION_ARGS)
{
	int64		version = PG_GETARG_INT64(0);
	IdgenFunction fn;
	IdgenSqlContext cx;
	Datum		arg;
	bool		isnull;
	int64		others;
	int64		self;
	uint64		n = 0;

	if (version < 1 || version > PUBLIC_MAX_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("public ID key version " INT64_FORMAT " is out of range", version),
				 errdetail("Key versions are between 1 and %d.", PUBLIC_MAX_VERSION)));
	arg = Int32GetDatum((int32) version);

	/* Counted under the lock rotations and retirements take. */
	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	(void) idgen_sql_run(&cx, Q_LOCK, NULL, NULL);

	/*
	 * The versions live now, not in the snapshot of a REPEATABLE READ
	 * transaction, which may predate another's retirement.
	 */
	(void) idgen_sql_run_latest(&cx, Q_OTHERS_LIVE, &arg, NULL);
	others = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	self = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (self > 0 && others > 0)
		n = idgen_sql_run_latest(&cx, Q_RETIRE, &arg, NULL);
	idgen_sql_end(&cx);
	if (self > 0 && others == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot retire public ID key version %d, the only one left", (int) version),
				 errhint("Make a new key with idgen_public_rotate() first.")));
	PG_RETURN_BOOL(n > 0);
}

/*
 * idgen_public_key_changed() returns trigger
 *		AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW on idgen_public_key,
 *		enabled ALWAYS: whatever wrote the row (the functions, a restore, a
 *		logical replication worker, an administrator's UPDATE), every
 *		backend drops its cached keys at its next transaction.
 */
Datum
idgen_public_key_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idgen_public_key_changed() must be called as a trigger")));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	keys.valid = false;
	return PointerGetDatum(NULL);
}

/*
 * idgen_speck64(key bytea, block bigint) returns bigint
 *		The cipher itself, on one block with a given 16-byte key: for
 *		checking it against the published test vectors.
 */
Datum
idgen_speck64(PG_FUNCTION_ARGS)
{
	bytea	   *key = PG_GETARG_BYTEA_PP(0);
	SpeckKey	k;

	if (VARSIZE_ANY_EXHDR(key) != PUBLIC_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a Speck64/128 key is %d bytes, not %d",
						PUBLIC_KEY_BYTES, (int) VARSIZE_ANY_EXHDR(key))));
	speck_expand((const uint8 *) VARDATA_ANY(key), &k);
	PG_RETURN_INT64((int64) speck_encrypt(&k, (uint64) PG_GETARG_INT64(1)));
}

/* ----------
 * The server log (see the file header)
 * ----------
 */
static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * Whether a statement's text names idgen_public_key_import, in any case.
 * Called for every message the backend emits, so the scan tests one
 * character before it compares a name.
 */
static bool
statement_names_import(const char *text)
{
	const size_t len = strlen(PUBLIC_IMPORT_FUNCTION);

	for (const char *c = text; *c != '\0'; c++)
	{
		if ((*c == 'i' || *c == 'I') &&
			pg_strncasecmp(c, PUBLIC_IMPORT_FUNCTION, len) == 0)
			return true;
	}
	return false;
}

static void
idgen_public_emit_log(ErrorData *edata)
{
	if (edata->output_to_server && debug_query_string != NULL &&
		statement_names_import(debug_query_string))
	{
		edata->hide_stmt = true;
		edata->hide_ctx = true;
		/* in the message's memory context (EmitErrorReport's), freed with it */
		if (edata->detail != NULL || edata->detail_log != NULL)
			edata->detail_log = pstrdup("The detail is not logged: the statement names "
										PUBLIC_IMPORT_FUNCTION ", whose argument may hold public ID keys.");
	}
	/* after the change, so that the hooks installed before see it too */
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * Called from _PG_init, in every backend that loads the library: with the
 * preload, every backend.
 */
void
idgen_public_init(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = idgen_public_emit_log;
}
