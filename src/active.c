/*-------------------------------------------------------------------------
 *
 * active.c
 *	  Several primaries that replicate to each other (active-active): the
 *	  values of per-key sequences interleaved by node, and each server's
 *	  claim to its Snowflake identity.  Worker leases (lease.c) and public
 *	  ID key versions (public.c) are dealt out by the same node number.
 *
 * Each primary advances its own copy of a key's row, and logical
 * replication merges the copies (the replica trigger on idgen_seq keeps the
 * value further on in the key's direction).  Two primaries that advanced
 * one counter apart, concurrently or during a lag or a partition, would
 * hand out the same values.  So with idgen.active_nodes = N > 1, the values a
 * key can take are dealt out to N nodes: node r (idgen.active_node) hands out
 * only the values v with
 *
 *		v = start + (k * N + r) * step		for some integer k,
 *
 * that is, v congruent to start + r * step modulo N * |step|.  No two nodes
 * share a class, so no value is handed out by two nodes, whatever reaches
 * which node when; no coordination is needed.  Each node goes on from the
 * value its row holds, whoever wrote it (its own last value, or a greater
 * one merged from another node): the next value is the first of its own
 * class past it.  The merge rule stays "further on wins", and it respects
 * the classes because a node never takes a value from the row, only a
 * position to go on from.
 *
 * The rounding happens where a key is advanced, on a copy of the row
 * (idgen_seq_node_view): op_next in seq.c for transactional keys, and
 * idgen_seq_cache_reserve in seq_cache.c for cached ones' segments.  The
 * row written back keeps its options as they were; its value is the
 * node's last value handed out (or reserved).  Nothing else changes: with
 * N = 1, the default, the view is the row itself.
 *
 * Both settings are fixed at server start: values already handed out (and
 * cached segments already reserved) belong to the classes of the settings
 * they were made under, and a change of N moves every class.  N is chosen
 * once, at least the number of nodes there will ever be.
 *
 * A key that cycles goes on from its other limit, outside the node's class:
 * cycling means values come again, and across nodes they may come from
 * another node.
 *
 * Identity claims
 *	  Two servers with one Snowflake identity issue the same IDs, and in
 *	  active-active no registry can stop them (a registry is one server's
 *	  database).  So every primary announces its identity in a table of
 *	  idgen's own, idgen_identity_claim, one row per server (keyed by its
 *	  system identifier), which replication carries to the others with the
 *	  data: the idgen sequencer writes this server's row in every
 *	  database with idgen, at each purge (idgen_identity_announce), so
 *	  that a node that subscribes later receives it too.  A trigger on the
 *	  table, enabled ALWAYS so that it fires in replication's apply processes too,
 *	  looks at every row written: another server's claim to this server's identity stops
 *	  this server's Snowflake generation, with an error naming both servers
 *	  (idgen_identity_clash_error), a WARNING in the log, and the clash in
 *	  idgen_info().  So does the announcement, when it finds such a claim
 *	  already there.  The stop lasts until the server restarts (see
 *	  "Shared state" below).  Only an
 *	  identity from the settings is announced: one leased from a registry
 *	  is the registry's to keep unique.  The table is not dumped: a restored
 *	  copy announces its own identity.
 *
 * Copies
 *	  A copy of a server's data directory (a base backup, a file copy, a
 *	  standby promoted while its primary goes on) has the server's system
 *	  identifier, and its settings: to the claims it is the same server,
 *	  with the same identity and node number.  The trigger tells it apart
 *	  by where its claim comes from: with origin = none a server's own
 *	  changes never come back to it, so a claim of its own system
 *	  identifier arriving through a subscription's stream (not a table
 *	  synchronisation's copy) was announced by another live server made
 *	  from a copy of its data.  Both servers stop everything that depends
 *	  on the identity or the node number: Snowflake IDs, per-key values,
 *	  worker leases and public ID key versions (idgen_node_clash_check).
 *	  Each learns of the other once it receives the other's claim, and
 *	  the start gate below keeps the one started later from handing out
 *	  anything first: the node it was copied from is one of those it
 *	  waits to hear from, and what it hears from it is the clash.
 *
 * Node numbers
 *	  With idgen.active_nodes > 1 each announcement also writes a node
 *	  claim: a second row, keyed by the system identifier's bits inverted
 *	  (node_key), with datacenter_id = -active_nodes and worker_id =
 *	  active_node.  Rows, not columns: a publication FOR ALL TABLES sends
 *	  every column, and a node of an older idgen, without the new ones,
 *	  would stop applying.  A negative datacenter never meets an identity,
 *	  so older libraries pass over the row.  Another server's node claim
 *	  to this node's number, or with another count, stops per-key values,
 *	  worker-lease grants and key rotations (node_claim_seen), as a copy
 *	  does.  It is written first in the announcement's transaction, so a
 *	  receiver learns of the clash before the identity claim opens its
 *	  start gate.
 *
 * Starting
 *	  A claim stops a server only once it has arrived, and until then both
 *	  servers of a clash generate: with load from the first second, the
 *	  same IDs went out from both before either claim was sent.  So with
 *	  idgen.active_nodes > 1 a database hands out Snowflake IDs and per-key
 *	  values only once it has heard, since the server started, from every
 *	  node it replicates with: another server's claim has arrived through
 *	  each of its enabled subscriptions that replicate idgen_identity_claim
 *	  (pg_subscription_rel), and each enabled pglogical subscription (its
 *	  tables are known to the provider only).  The trigger, in the apply
 *	  process, records the subscription by its replication origin
 *	  (idgen_replayed_origin(): "pg_<oid>", or pglogical's, named after
 *	  its slot; a claim copied with the data does not count, since a core
 *	  table synchronisation has an origin of its own and pglogical copies
 *	  through an ordinary session); the database's idgen sequencer
 *	  lists the subscriptions at each purge (gate_check), and the gate opens
 *	  when none is left, in whichever comes last.  Once open it never
 *	  closes: a node cut off from the others goes on.  Nodes that nobody
 *	  subscribes to yet are not waited for (idgen.active_nodes counts nodes
 *	  that may never exist); a subscription disabled is not waited for.
 *	  Per database, not per server: IDs made in a database outside the mesh
 *	  never meet the mesh's.  A database that subscribes to nothing opens
 *	  at its first call, unless it holds other servers' claims (it was in
 *	  a mesh: a node whose subscriptions are still to be made, or a copy
 *	  of one) and has no disabled subscription (Q_ALONE).
 *
 * Shared state
 *	  The clashes' details live in this file's area, "idgen active"
 *	  (IdgenClashes): the first claim that stopped Snowflake IDs, and the
 *	  first that stopped what is dealt out by node number, each written
 *	  once under the spinlock 'mutex' together with its flag (the core
 *	  segment's 'clashed', and 'node_clashed'), never cleared until the
 *	  server restarts.  Generators read only the flags, without a lock;
 *	  readers of the details take the mutex, after reading a flag set.  The same area holds the gate
 *	  (IdgenGate), under its own spinlock: a call reads it until it finds
 *	  its database open, and then only its backend's flag
 *	  (idgen_active_gate_passed), since the gate never closes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "common/int.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "replication/origin.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_layout.h"
#include "idgen_seq.h"
#include "idgen_shmem.h"
#include "idgen_sql.h"

PG_FUNCTION_INFO_V1(idgen_identity_announce);
PG_FUNCTION_INFO_V1(idgen_identity_claim_check);

#define IDGEN_MAX_ACTIVE_NODES		1024

int			idgen_active_nodes = 1;
int			idgen_active_node = 0;

/*
 * A claim that stopped this server (see the file header): another server's
 * to its Snowflake identity or to its node number, another server's count
 * of nodes, or a copy's (a claim of this server's own system identifier by
 * another live server, which shares its identity and node number).
 */
typedef enum IdgenClashKind
{
	CLASH_IDENTITY,				/* another server with this Snowflake identity */
	CLASH_COPY,					/* a copy of this server's data */
	CLASH_NODE_NUMBER,			/* another server with this node number */
	CLASH_NODE_COUNT,			/* another server with another active_nodes */
} IdgenClashKind;

typedef struct IdgenClash
{
	IdgenClashKind kind;
	int			other_nodes;	/* a node clash: the other's active_nodes */
	int			other_node;		/* and its active_node */
	uint64		other_sysid;	/* the other server's system identifier */
	char		other_instance[64]; /* its name, in ASCII (clean_instance) */
	TimestampTz other_announced_at;
	TimestampTz seen_at;		/* when this server learnt of it */
	char		database[NAMEDATALEN];	/* where the claim was found */
	char		subscription[NAMEDATALEN];	/* what a copy's arrived through */
} IdgenClash;

/* The first claim that stopped each kind of generation (see the header). */
typedef struct IdgenClashes
{
	slock_t		mutex;
	IdgenClash	identity;		/* Snowflake IDs: idgen_shared->clashed */
	IdgenClash	node;			/* per-key values, leases, key versions */
	pg_atomic_uint32 node_clashed;	/* set once 'node' is written */
} IdgenClashes;

static IdgenClashes *clash = NULL;

/*
 * The start gate (see "Starting" in the file header): for each database
 * checked since the server started, whether it generates, and the
 * replication origins of the subscriptions it still waits for.
 */
#define GATE_DATABASES_KEPT		64
#define GATE_WAITING_KEPT		64

typedef struct GateDatabase
{
	Oid			dbid;			/* InvalidOid: unused */
	bool		checked;		/* its subscriptions were listed */
	bool		open;			/* it generates (never closes again) */
	int			nlisted;		/* subscriptions at the last check */
	int			nwaiting;		/* of them, not heard from yet */
	IdgenOriginId waiting[GATE_WAITING_KEPT];	/* their origins */
	int			nheard;			/* origins heard from since the start */
	IdgenOriginId heard[GATE_WAITING_KEPT];
} GateDatabase;

typedef struct IdgenGate
{
	slock_t		mutex;
	GateDatabase db[GATE_DATABASES_KEPT];
} IdgenGate;

static IdgenGate *gate = NULL;

/* Whether this backend's database generates: read without a lock. */
bool		idgen_active_gate_passed = false;

/*
 * Raise an error if this node's number is not among the nodes: nothing that
 * depends on it (per-key sequence values, worker ids leased) is handed out.
 */
void
idgen_active_node_check(void)
{
	idgen_node_clash_check();
	if (idgen_active_node >= idgen_active_nodes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idgen.active_node (%d) must be less than idgen.active_nodes (%d)",
						idgen_active_node, idgen_active_nodes),
				 errdetail("Nodes are numbered from 0; per-key sequences and worker leases hand out nothing until it is."),
				 errhint("Give each node its own idgen.active_node from 0 to %d in postgresql.conf and restart it.",
						 idgen_active_nodes - 1)));
}

/* x modulo m, in 0 .. m - 1, for m > 0 */
static uint64
floor_mod(int64 x, uint64 m)
{
	if (x >= 0)
		return (uint64) x % m;
	/* -(x + 1) + 1 is |x| without overflow at PG_INT64_MIN */
	return (m - ((uint64) -(x + 1) + 1) % m) % m;
}

/*
 * The copy of 'row' this node advances: its step N times the key's, and its
 * position (value, called) the first value of the node's class after the
 * row's value (at or after it, if nothing was handed out), as a value not
 * yet handed out.  At the key's limit, the row's own position with the
 * node's step, whose next value passes the limit (or cycles).
 */
void
idgen_seq_node_view(const IdgenSeqRow *row, const char *key, IdgenSeqRow *view)
{
	uint64		astep;
	uint64		m;
	uint64		cls;
	int64		from;
	int64		next;
	uint64		delta;
	bool		past;

	*view = *row;
	if (idgen_active_nodes <= 1)
		return;
	idgen_active_node_check();

	astep = row->step > 0 ? (uint64) row->step : (uint64) -(row->step + 1) + 1;
	if (astep > (uint64) PG_INT64_MAX / (uint64) idgen_active_nodes)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("step of sequence key \"%s\" is too large for idgen.active_nodes (%d)",
						key, idgen_active_nodes),
				 errdetail("Each node counts step times idgen.active_nodes, which must fit in bigint."),
				 errhint("Configure a smaller step with idgen_seq_configure().")));
	m = astep * (uint64) idgen_active_nodes;
	view->step = row->step > 0 ? (int64) m : -(int64) m;

	/* the node's class: start + r * step, modulo m (|r * step| < m) */
	cls = (floor_mod(row->start, m) +
		   floor_mod((int64) idgen_active_node * row->step, m)) % m;

	/* the first candidate: the row's value, or the one after it */
	from = row->value;
	if (row->called &&
		(row->step > 0 ? pg_add_s64_overflow(from, 1, &from) :
		 pg_sub_s64_overflow(from, 1, &from)))
		return;					/* at bigint's end: the view passes the limit */

	if (row->step > 0)
	{
		delta = (cls + m - floor_mod(from, m)) % m;
		past = pg_add_s64_overflow(from, (int64) delta, &next) || next > row->max_value;
	}
	else
	{
		delta = (floor_mod(from, m) + m - cls) % m;
		past = pg_sub_s64_overflow(from, (int64) delta, &next) || next < row->min_value;
	}
	if (past)
	{
		/*
		 * No value of the class is left before the limit: from the row's
		 * value, called, the node's next step passes it (the limit's error,
		 * or a cycle).  A row not called yet is at a value of no use here;
		 * its limit stands in for it.
		 */
		if (!row->called)
			view->value = row->step > 0 ? row->max_value : row->min_value;
		view->called = true;
		return;
	}
	view->value = next;
	view->called = false;
}

/* ----------
 * Identity claims
 * ----------
 */
enum
{
	Q_RETRACT,
	Q_ANNOUNCE,
	Q_OTHER_CLAIM,
	Q_OTHER_NODE,
	Q_SUBSCRIPTIONS,
	Q_PGLOGICAL,
	Q_PGLOGICAL_SUBSCRIPTIONS,
	Q_ALONE,
	NUM_QUERIES
};

static const IdgenStatement statement_list[NUM_QUERIES] = {
	/*
	 * This server's claim, written anew at every announcement: a delete and
	 * an insert, not an update, because replication skips the update of a row
	 * the subscriber does not have (a subscription made after the first
	 * announcement, without copying data), while it applies an insert; the
	 * delete before it is skipped there, or removes the old row first.
	 * announced_at says when a server last announced.
	 */
	[Q_RETRACT] = {
		"DELETE FROM %1$s.idgen_identity_claim WHERE system_identifier OPERATOR(pg_catalog.=) $1 "
		"OR system_identifier OPERATOR(pg_catalog.=) $2",
		2, {INT8OID, INT8OID}
	},
	[Q_ANNOUNCE] = {
		"INSERT INTO %1$s.idgen_identity_claim "
		"(system_identifier, datacenter_id, worker_id, instance, announced_at) "
		"VALUES ($1, $2, $3, $4, $5)",
		5, {INT8OID, INT4OID, INT4OID, TEXTOID, TIMESTAMPTZOID}
	},
	/* another server's claim to the same identity */
	[Q_OTHER_CLAIM] = {
		"SELECT system_identifier, datacenter_id, worker_id, instance, announced_at "
		"FROM %1$s.idgen_identity_claim "
		"WHERE datacenter_id OPERATOR(pg_catalog.=) $1 AND worker_id OPERATOR(pg_catalog.=) $2 "
		"AND system_identifier OPERATOR(pg_catalog.<>) $3 "
		"ORDER BY announced_at LIMIT 1",
		3, {INT4OID, INT4OID, INT8OID}
	},
	/* another server's claim to this node number, or another node count */
	[Q_OTHER_NODE] = {
		"SELECT system_identifier, datacenter_id, worker_id, instance, announced_at "
		"FROM %1$s.idgen_identity_claim "
		"WHERE datacenter_id OPERATOR(pg_catalog.<) 0 AND system_identifier OPERATOR(pg_catalog.<>) $1 "
		"AND (datacenter_id OPERATOR(pg_catalog.<>) $2 OR worker_id OPERATOR(pg_catalog.=) $3) "
		"ORDER BY announced_at LIMIT 1",
		3, {INT8OID, INT4OID, INT4OID}
	},

	/*
	 * The enabled subscriptions of database $1 that replicate the claims'
	 * table $2 (the start gate)
	 */
	[Q_SUBSCRIPTIONS] = {
		"SELECT s.oid FROM pg_catalog.pg_subscription s "
		"WHERE s.subdbid OPERATOR(pg_catalog.=) $1 AND s.subenabled "
		"AND EXISTS (SELECT FROM pg_catalog.pg_subscription_rel r "
		"WHERE r.srsubid OPERATOR(pg_catalog.=) s.oid AND r.srrelid OPERATOR(pg_catalog.=) $2) "
		"ORDER BY s.subname",
		2, {OIDOID, OIDOID}
	},

	/* whether this database has pglogical 2 (its schema is fixed) */
	[Q_PGLOGICAL] = {
		"SELECT EXISTS (SELECT FROM pg_catalog.pg_extension "
		"WHERE extname OPERATOR(pg_catalog.=) 'pglogical')",
		0, {InvalidOid}
	},

	/*
	 * pglogical's subscriptions in this database, by the replication origin
	 * of their apply process (named after the slot), and whether enabled;
	 * which tables they replicate is known to the provider only
	 */
	[Q_PGLOGICAL_SUBSCRIPTIONS] = {
		"SELECT sub_slot_name::pg_catalog.text, sub_enabled FROM pglogical.subscription ORDER BY sub_name",
		0, {InvalidOid}
	},

	/*
	 * Whether database $1, with no enabled subscription that replicates the
	 * claims, may start at once: it has never been in a mesh (no other
	 * server's claim is here, $2 being this server's system identifier), or
	 * its subscriptions were disabled, which is the operator's decision
	 */
	[Q_ALONE] = {
		"SELECT EXISTS (SELECT FROM pg_catalog.pg_subscription WHERE subdbid OPERATOR(pg_catalog.=) $1) "
		"OR NOT EXISTS (SELECT FROM %1$s.idgen_identity_claim "
		"WHERE system_identifier OPERATOR(pg_catalog.<>) $2 "
		"AND system_identifier OPERATOR(pg_catalog.<>) (OPERATOR(pg_catalog.~) $2))",
		2, {OIDOID, INT8OID}
	},
};

static SPIPlanPtr plans[NUM_QUERIES];
static IdgenStatements statements = {statement_list, NUM_QUERIES, plans, InvalidOid, ""};

/*
 * Whether this server announces its identity: preloaded, a valid layout,
 * an identity from the settings.
 */
static bool
identity_announced(void)
{
	return idgen_shared != NULL && idgen_layout.valid && !idgen_shared->identity_leased;
}

/* How this server is named in claims and messages. */
static const char *
instance_name(void)
{
	if (cluster_name != NULL && cluster_name[0] != '\0')
		return psprintf("%s (port %d)", cluster_name, PostPortNumber);
	return psprintf("port %d", PostPortNumber);
}

/* The system identifier as a bigint column holds it. */
static int64
own_sysid(void)
{
	return (int64) GetSystemIdentifier();
}

/*
 * The key of a server's node claim, from its system identifier, and back:
 * its bits inverted (a negative number for every system identifier made
 * before 2038, whose top bit is clear; see "Node numbers" in the header).
 */
static int64
node_key(int64 key)
{
	return (int64) ~(uint64) key;
}

/* A row of idgen_identity_claim, with the server it is of. */
typedef struct ClaimRow
{
	bool		node;			/* a node claim (a negative datacenter) */
	int64		server;			/* the system identifier of its server */
	int32		datacenter_id;	/* an identity's; a node claim's -active_nodes */
	int32		worker_id;		/* an identity's; a node claim's active_node */
	const char *instance;
	TimestampTz announced_at;
} ClaimRow;

/*
 * Read a claim from 'tup', whose columns are the table's, in its order;
 * false if its key, datacenter or worker is NULL (a row written by hand:
 * the columns are NOT NULL, but the table is the owner's to alter).
 */
static bool
claim_read(HeapTuple tup, TupleDesc desc, ClaimRow *c)
{
	Datum		v[5];
	bool		isnull[5];

	if (desc->natts != 5)
		elog(ERROR, "a row of idgen_identity_claim has %d columns, not 5", desc->natts);
	heap_deform_tuple(tup, desc, v, isnull);
	if (isnull[0] || isnull[1] || isnull[2])
		return false;
	c->datacenter_id = DatumGetInt32(v[1]);
	c->worker_id = DatumGetInt32(v[2]);
	c->node = c->datacenter_id < 0;
	c->server = c->node ? node_key(DatumGetInt64(v[0])) : DatumGetInt64(v[0]);
	c->instance = isnull[3] ? "?" : TextDatumGetCString(v[3]);
	c->announced_at = isnull[4] ? 0 : DatumGetTimestampTz(v[4]);
	return true;
}

/*
 * A claim's instance name as shared memory keeps it: every byte outside
 * printable ASCII as \xNN (as PostgreSQL 16 and later keep
 * application_name), cut to fit 'len' bytes, never inside an escape.  The
 * name comes from a row
 * (another server's, or one written by hand) in the encoding of the
 * database where it was found, and is shown in every database, whatever
 * its encoding: cut in the middle of a character, or shown as bytes of
 * another encoding, it made the messages that show it fail to convert
 * (22021) for a client whose encoding differs.
 */
static void
clean_instance(char *dst, size_t len, const char *src)
{
	size_t		n = 0;

	for (const unsigned char *p = (const unsigned char *) src; *p != '\0'; p++)
	{
		char		piece[5];
		size_t		plen;

		if (*p >= 32 && *p < 127)
		{
			piece[0] = (char) *p;
			piece[1] = '\0';
		}
		else
			snprintf(piece, sizeof(piece), "\\x%02x", *p);
		plen = strlen(piece);
		if (n + plen >= len)
			break;
		memcpy(dst + n, piece, plen);
		n += plen;
	}
	dst[n] = '\0';
}

/*
 * Record 'found' in 'into' and set 'flag', unless it is set already (the
 * first claim found is kept); whether it was the first.
 */
static bool
clash_record(IdgenClash *into, pg_atomic_uint32 *flag, const IdgenClash *found)
{
	bool		first = false;

	SpinLockAcquire(&clash->mutex);
	if (pg_atomic_read_u32(flag) == 0)
	{
		*into = *found;
		pg_atomic_write_u32(flag, 1);
		first = true;
	}
	SpinLockRelease(&clash->mutex);
	return first;
}

/* A clash of this moment, in this database, by the claim given. */
static void
clash_make(IdgenClash *c, int64 other_sysid, const char *instance, TimestampTz other_announced_at)
{
	char	   *db = get_database_name(MyDatabaseId);

	memset(c, 0, sizeof(*c));
	c->other_sysid = (uint64) other_sysid;
	clean_instance(c->other_instance, sizeof(c->other_instance), instance);
	c->other_announced_at = other_announced_at;
	c->seen_at = GetCurrentTimestamp();
	strlcpy(c->database, db ? db : "?", sizeof(c->database));
}

/*
 * Another server's claim to this identity was found: stop generating
 * Snowflake IDs.  The first one found is kept and logged; later ones
 * change nothing.
 */
static void
clash_found(int64 other_sysid, const char *instance, TimestampTz other_announced_at)
{
	IdgenClash	c;

	clash_make(&c, other_sysid, instance, other_announced_at);
	if (clash_record(&clash->identity, &idgen_shared->clashed, &c))
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("another server claims this server's Snowflake identity (datacenter %d, worker %d): Snowflake generation stops",
						idgen_layout.datacenter_id, idgen_layout.worker_id),
				 errdetail("Server " UINT64_FORMAT " (%s) announced it at %s; this server is " UINT64_FORMAT " (%s).",
						   c.other_sysid, c.other_instance, idgen_time_text(c.other_announced_at),
						   (uint64) own_sysid(), instance_name()),
				 errhint("Give one of the two servers another \"idgen.worker_id\" or \"idgen.datacenter_id\" and restart both.")));
}

/*
 * The error (or WARNING) of another live server made from a copy of this
 * server's data: the same system identifier, and so, to the claims, the
 * same server, with the same identity and node number unless its settings
 * were changed.
 */
static void
copy_report(int elevel, const IdgenClash *c)
{
	ereport(elevel,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("another server runs from a copy of this server's data"),
			 errdetail("A claim of this server's system identifier " UINT64_FORMAT " by %s, announced at %s, arrived through subscription \"%s\" in database \"%s\" at %s; this server is %s. "
					   "A copy keeps the system identifier, the identity and the node number of the server it was made from, so Snowflake IDs, per-key values, worker leases and public ID key versions stop on both.",
					   c->other_sysid, c->other_instance, idgen_time_text(c->other_announced_at),
					   c->subscription, c->database, idgen_time_text(c->seen_at), instance_name()),
			 errhint("Stop one of the two servers, then restart the other. A node of a mesh needs a data directory of its own, not a copy of another node's (idgen's active-active documentation, \"Setup\").")));
}

/*
 * A claim of this server's own system identifier arrived through
 * subscription 'subscription': another live server runs from a copy of
 * this one's data.  Stop Snowflake IDs and everything dealt out by node
 * number; the first one found is logged.
 */
static void
copy_found(const char *instance, TimestampTz other_announced_at, const char *subscription)
{
	IdgenClash	c;
	bool		first;

	clash_make(&c, own_sysid(), instance, other_announced_at);
	c.kind = CLASH_COPY;
	strlcpy(c.subscription, subscription, sizeof(c.subscription));
	first = clash_record(&clash->identity, &idgen_shared->clashed, &c);
	if (clash_record(&clash->node, &clash->node_clashed, &c) || first)
		copy_report(WARNING, &c);
}

/*
 * The error (or WARNING) of another server's claim to this node number, or
 * of another server's count of nodes.
 */
static void
node_report(int elevel, const IdgenClash *c)
{
	if (c->kind == CLASH_NODE_COUNT)
		ereport(elevel,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("another server counts %d active-active nodes, this one %d",
						c->other_nodes, idgen_active_nodes),
				 errdetail("Server " UINT64_FORMAT " (%s) announced node %d of %d at %s, and this server " UINT64_FORMAT " (%s), node %d of %d, learnt of it at %s in database \"%s\"; "
						   "the values of each node's class would meet the other's, so per-key values, worker leases and public ID key versions stop.",
						   c->other_sysid, c->other_instance, c->other_node, c->other_nodes,
						   idgen_time_text(c->other_announced_at), (uint64) own_sysid(), instance_name(),
						   idgen_active_node, idgen_active_nodes, idgen_time_text(c->seen_at), c->database),
				 errhint("Give every node the same \"idgen.active_nodes\" and restart the ones changed; a claim of a server gone for good is deleted from idgen_identity_claim.")));
	ereport(elevel,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("another server has this node's number (%d of %d)", idgen_active_node, idgen_active_nodes),
			 errdetail("Server " UINT64_FORMAT " (%s) announced node %d of %d at %s, and this server " UINT64_FORMAT " (%s) learnt of it at %s in database \"%s\"; "
					   "their per-key values, worker leases and public ID key versions would be the same, so they stop.",
					   c->other_sysid, c->other_instance, c->other_node, c->other_nodes,
					   idgen_time_text(c->other_announced_at), (uint64) own_sysid(), instance_name(),
					   idgen_time_text(c->seen_at), c->database),
			 errhint("Give one of the two servers another \"idgen.active_node\" and restart both; a claim of a server gone for good is deleted from idgen_identity_claim.")));
}

/*
 * Server 'other_sysid' announced node 'node' of 'nodes': if that is this
 * node's number, or another count of nodes, stop what is dealt out by node
 * number.  The first clash found is kept and logged.
 */
static void
node_claim_seen(int64 other_sysid, int nodes, int node, const char *instance,
				TimestampTz other_announced_at)
{
	IdgenClash	c;

	if (nodes == idgen_active_nodes && node != idgen_active_node)
		return;
	clash_make(&c, other_sysid, instance, other_announced_at);
	c.kind = nodes != idgen_active_nodes ? CLASH_NODE_COUNT : CLASH_NODE_NUMBER;
	c.other_nodes = nodes;
	c.other_node = node;
	if (clash_record(&clash->node, &clash->node_clashed, &c))
		node_report(WARNING, &c);
}

/* The error of a Snowflake call on a server whose identity clashed. */
void
idgen_identity_clash_error(void)
{
	IdgenClash	copy;

	SpinLockAcquire(&clash->mutex);
	copy = clash->identity;
	SpinLockRelease(&clash->mutex);
	idgen_count(IDGEN_KIND_SNOWFLAKE, IDGEN_STAT_ERRORS, 1);
	if (copy.kind == CLASH_COPY)
		copy_report(ERROR, &copy);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("this server's Snowflake identity (datacenter %d, worker %d) is also claimed by another server",
					idgen_layout.datacenter_id, idgen_layout.worker_id),
			 errdetail("Server " UINT64_FORMAT " (%s) announced it at %s, and this server " UINT64_FORMAT " (%s) learnt of it at %s in database \"%s\"; their IDs would be the same.",
					   copy.other_sysid, copy.other_instance, idgen_time_text(copy.other_announced_at),
					   (uint64) own_sysid(), instance_name(), idgen_time_text(copy.seen_at),
					   copy.database),
			 errhint("Give one of the two servers another \"idgen.worker_id\" or \"idgen.datacenter_id\" and restart both; idgen_info() shows the clash.")));
}

/*
 * Raise an error if what is dealt out by this node's number (per-key
 * values, worker leases, public ID key versions) is stopped: another live
 * server has this node's number too.
 */
void
idgen_node_clash_check(void)
{
	IdgenClash	copy;

	if (clash == NULL || likely(pg_atomic_read_u32(&clash->node_clashed) == 0))
		return;
	SpinLockAcquire(&clash->mutex);
	copy = clash->node;
	SpinLockRelease(&clash->mutex);
	if (copy.kind == CLASH_COPY)
		copy_report(ERROR, &copy);
	node_report(ERROR, &copy);
}

/* A clash as idgen_info() shows it. */
static char *
clash_text(const IdgenClash *c)
{
	switch (c->kind)
	{
		case CLASH_COPY:
			return psprintf("another server, %s, runs from a copy of this server's data: its claim, announced at %s, arrived through subscription \"%s\" (seen at %s in database \"%s\"); Snowflake IDs, per-key values, worker leases and public ID key versions are stopped",
							c->other_instance, idgen_time_text(c->other_announced_at), c->subscription,
							idgen_time_text(c->seen_at), c->database);
		case CLASH_NODE_NUMBER:
		case CLASH_NODE_COUNT:
			return psprintf("server " UINT64_FORMAT " (%s) claims node %d of %d since %s, and this server is node %d of %d (seen at %s in database \"%s\"); per-key values, worker leases and public ID key versions are stopped",
							c->other_sysid, c->other_instance, c->other_node, c->other_nodes,
							idgen_time_text(c->other_announced_at), idgen_active_node, idgen_active_nodes,
							idgen_time_text(c->seen_at), c->database);
		case CLASH_IDENTITY:
			break;
	}
	return psprintf("server " UINT64_FORMAT " (%s) claims this identity since %s (seen at %s in database \"%s\"); Snowflake generation is stopped",
					c->other_sysid, c->other_instance, idgen_time_text(c->other_announced_at),
					idgen_time_text(c->seen_at), c->database);
}

/*
 * The clashes for idgen_info(): the identity's, then the node number's
 * unless it is the same copy; NULL when there is none.
 */
char *
idgen_identity_clash_text(void)
{
	bool		identity;
	bool		node;
	IdgenClash	identity_clash;
	IdgenClash	node_clash;

	if (idgen_shared == NULL || clash == NULL)
		return NULL;
	identity = pg_atomic_read_u32(&idgen_shared->clashed) != 0;
	node = pg_atomic_read_u32(&clash->node_clashed) != 0;
	if (!identity && !node)
		return NULL;
	SpinLockAcquire(&clash->mutex);
	identity_clash = clash->identity;
	node_clash = clash->node;
	SpinLockRelease(&clash->mutex);
	if (identity && node && node_clash.kind != CLASH_COPY)
		return psprintf("%s; %s", clash_text(&identity_clash), clash_text(&node_clash));
	return clash_text(identity ? &identity_clash : &node_clash);
}

/* ----------
 * Starting
 * ----------
 */

/*
 * The name of the subscription whose apply process replays as replication
 * origin 'origin', streaming: a core subscription's name (its origin is
 * "pg_<oid>"), or the origin's own name for another's (pglogical names it
 * after the subscription's slot).  NULL for no origin, one since dropped,
 * or a core table synchronisation's ("pg_<oid>_<relid>"), which copies rows
 * as they were.
 */
static char *
origin_subscription(IdgenOriginId origin)
{
	char	   *origin_name;
	Oid			sub;
	Oid			rel;
	int			end = 0;

	if (origin == IDGEN_INVALID_ORIGIN || !replorigin_by_oid(origin, true, &origin_name))
		return NULL;
	if (sscanf(origin_name, "pg_%u_%u", &sub, &rel) == 2)
		return NULL;
	if (sscanf(origin_name, "pg_%u%n", &sub, &end) == 1 && origin_name[end] == '\0')
		return get_subscription_name(sub, true);
	return origin_name;
}

/*
 * This database's entry in the gate (gate->mutex held), made if 'make'
 * and there is room; NULL otherwise.
 */
static GateDatabase *
gate_database(bool make)
{
	GateDatabase *free_entry = NULL;

	for (int i = 0; i < GATE_DATABASES_KEPT; i++)
	{
		GateDatabase *d = &gate->db[i];

		if (d->dbid == MyDatabaseId)
			return d;
		if (!OidIsValid(d->dbid) && free_entry == NULL)
			free_entry = d;
	}
	if (!make || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(*free_entry));
	free_entry->dbid = MyDatabaseId;
	return free_entry;
}

/*
 * Another server's claim arrived in this database through the
 * subscription whose apply process runs this (its replication origin):
 * that subscription has been heard from since the server started, and the
 * database generates once no other it waits for is left.
 */
static void
gate_heard(void)
{
	IdgenOriginId origin = idgen_replayed_origin();
	GateDatabase *d;

	if (idgen_active_nodes <= 1 || gate == NULL || origin == IDGEN_INVALID_ORIGIN)
		return;
	SpinLockAcquire(&gate->mutex);
	d = gate_database(true);
	if (d != NULL)
	{
		bool		known = false;

		for (int i = 0; i < d->nheard && !known; i++)
			known = d->heard[i] == origin;
		if (!known && d->nheard < GATE_WAITING_KEPT)
			d->heard[d->nheard++] = origin;
		for (int i = 0; i < Min(d->nwaiting, GATE_WAITING_KEPT); i++)
			if (d->waiting[i] == origin)
			{
				d->waiting[i] = d->waiting[Min(d->nwaiting, GATE_WAITING_KEPT) - 1];
				d->nwaiting--;
				break;
			}
		if (d->checked && d->nlisted > 0 && d->nwaiting == 0)
			d->open = true;
	}
	SpinLockRelease(&gate->mutex);
}

/*
 * List this database's subscriptions that replicate the claims' table
 * 'claims' (and its pglogical subscriptions, whose tables only the
 * provider knows) and are not heard from yet, in the gate; it opens if there is
 * none, but for a database that subscribes to nothing only if 'calling'
 * (a call wants a value now), and only if it has never been in a mesh or
 * its subscriptions are disabled (Q_ALONE): the idgen sequencer's check
 * at the start comes before the subscriptions of a new mesh are made, and
 * must not open the gate they will need; a database that holds other
 * servers' claims and subscribes to nothing is a node whose subscriptions
 * are still to be made, or a copy of one whose copied subscriptions were
 * dropped.  In a transaction, through the extension's statements ('cx').
 */
static void
gate_check(IdgenSqlContext *cx, Oid claims, bool calling)
{
	Datum		args[2] = {ObjectIdGetDatum(MyDatabaseId), ObjectIdGetDatum(claims)};
	uint64		ncore = idgen_sql_run_latest(cx, Q_SUBSCRIPTIONS, args, NULL);
	int			n = 0;
	bool		isnull;
	bool		disabled = false;	/* a pglogical subscription disabled */
	bool		alone = false;
	IdgenOriginId *origins = palloc0(sizeof(IdgenOriginId) * (ncore + 1));
	GateDatabase *d;

	for (uint64 i = 0; i < ncore; i++)
	{
		Oid			sub = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
														 1, &isnull));
		char		name[NAMEDATALEN];

		/* the apply process's origin (its table synchronisation has another) */
		snprintf(name, sizeof(name), "pg_%u", sub);
		origins[n++] = replorigin_by_name(name, true);
	}
	if (idgen_sql_run_latest(cx, Q_PGLOGICAL, NULL, NULL) == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		uint64		npgl = idgen_sql_run_latest(cx, Q_PGLOGICAL_SUBSCRIPTIONS, NULL, NULL);

		origins = repalloc(origins, sizeof(IdgenOriginId) * (ncore + npgl + 1));
		for (uint64 i = 0; i < npgl; i++)
		{
			char	   *slot = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

			if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)))
				disabled = true;
			else if (slot != NULL)
				origins[n++] = replorigin_by_name(slot, true);
		}
	}
	if (n == 0 && calling)
	{
		args[1] = Int64GetDatum(own_sysid());
		if (disabled)
			alone = true;
		else if (idgen_sql_run_latest(cx, Q_ALONE, args, NULL) == 1)
			alone = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SpinLockAcquire(&gate->mutex);
	d = gate_database(true);
	if (d != NULL && !d->open)
	{
		d->nwaiting = 0;
		for (int i = 0; i < n; i++)
		{
			bool		heard = false;

			for (int k = 0; k < d->nheard && !heard; k++)
				heard = d->heard[k] == origins[i];
			if (heard)
				continue;
			if (d->nwaiting < GATE_WAITING_KEPT)
				d->waiting[d->nwaiting] = origins[i];
			d->nwaiting++;
		}
		d->checked = true;
		d->nlisted = n;
		d->open = d->nwaiting == 0 && (n > 0 || alone);
	}
	SpinLockRelease(&gate->mutex);
	pfree(origins);
}

/* A copy of this database's entry in the gate; false if it has none. */
static bool
gate_read(GateDatabase *copy)
{
	GateDatabase *d;

	SpinLockAcquire(&gate->mutex);
	d = gate_database(false);
	if (d != NULL)
		*copy = *d;
	SpinLockRelease(&gate->mutex);
	return d != NULL;
}

/*
 * Return if this database may hand out Snowflake IDs and per-key values
 * (and remember it: the gate never closes); raise the error of a closed
 * gate otherwise.  While it is closed, a call lists the database's
 * subscriptions itself, as the idgen sequencer does at each purge, so that
 * a database that replicates with nobody opens at its first call, and a
 * subscription disabled stops being waited for at once.
 */
void
idgen_active_gate_check(void)
{
	GateDatabase copy;
	StringInfoData names;

	if (idgen_active_nodes <= 1 || gate == NULL)
	{
		idgen_active_gate_passed = true;
		return;
	}
	if (!gate_read(&copy) || !copy.open)
	{
		IdgenFunction fn;
		IdgenSqlContext cx;

		if (idgen_lookup_extension(&fn))
		{
			idgen_sql_begin(&fn, &statements, &cx);
			gate_check(&cx, idgen_extension_table(&fn, "idgen_identity_claim", false), true);
			idgen_sql_end(&cx);
		}
		if (!gate_read(&copy))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many databases wait to hear from the nodes they replicate with"),
					 errdetail("idgen keeps the state of %d databases with \"idgen.active_nodes\" > 1.",
							   GATE_DATABASES_KEPT)));
	}
	if (copy.open)
	{
		idgen_active_gate_passed = true;
		return;
	}
	if (copy.nlisted == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this node has not yet heard from the nodes it replicates with"),
				 errdetail("With \"idgen.active_nodes\" = %d, database \"%s\" holds other servers' identity claims but has no subscription: it is a node of a mesh whose subscriptions are still to be made, or a copy of one.",
						   idgen_active_nodes, get_database_name(MyDatabaseId)),
				 errhint("Create its subscriptions to the other nodes first; it then starts once it has heard from each. If it has left the mesh, delete the other servers' rows from idgen_identity_claim as the extension's owner.")));
	initStringInfo(&names);
	for (int i = 0; i < Min(copy.nwaiting, GATE_WAITING_KEPT); i++)
	{
		char	   *sub_name = origin_subscription(copy.waiting[i]);

		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "",
						 sub_name ? quote_identifier(sub_name) : "(a subscription not started yet, or since dropped)");
	}
	if (copy.nwaiting > GATE_WAITING_KEPT)
		appendStringInfo(&names, " and %d more", copy.nwaiting - GATE_WAITING_KEPT);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("this node has not yet heard from the nodes it replicates with"),
			 errdetail("With \"idgen.active_nodes\" = %d, database \"%s\" hands out Snowflake IDs and per-key values once another server's identity claim has arrived, since this server started, through each of its enabled subscriptions that replicate idgen_identity_claim; no claim has arrived yet through %s.",
					   idgen_active_nodes, get_database_name(MyDatabaseId), names.data),
			 errhint("A claim arrives at the other node's next purge (\"idgen.purge_interval\"); check that it runs and that the subscription replicates (pg_stat_subscription). A subscription disabled with ALTER SUBSCRIPTION ... DISABLE is not waited for.")));
}

/*
 * idgen_identity_announce() returns bigint
 *		Write this server's claim to its identity into idgen_identity_claim
 *		anew, then look for another server's
 *		claim to it: 1 if there is one (generation stops), else 0.  The idgen
 *		sequencer calls it in every database at each purge.  Nothing on
 *		a standby, or without an identity of its own to announce.
 */
Datum
idgen_identity_announce(PG_FUNCTION_ARGS)
{
	IdgenFunction fn;
	IdgenSqlContext cx;
	Datum		args[5];
	int64		found = 0;
	ClaimRow	c;

	if (RecoveryInProgress())
		PG_RETURN_INT64(0);
	idgen_lookup_function(fcinfo, &fn);
	idgen_sql_begin(&fn, &statements, &cx);
	if (idgen_active_nodes > 1 && gate != NULL)
		gate_check(&cx, idgen_extension_table(&fn, "idgen_identity_claim", false), false);
	if (!identity_announced())
	{
		idgen_sql_end(&cx);
		PG_RETURN_INT64(0);
	}
	args[0] = Int64GetDatum(own_sysid());
	args[1] = Int64GetDatum(node_key(own_sysid()));
	(void) idgen_sql_run(&cx, Q_RETRACT, args, NULL);
	args[3] = CStringGetTextDatum(instance_name());
	args[4] = TimestampTzGetDatum(GetCurrentTimestamp());

	/*
	 * The node claim first: a node that receives both in one transaction then
	 * learns of a clash of node numbers before the identity claim opens its
	 * start gate.
	 */
	if (idgen_active_nodes > 1)
	{
		args[0] = Int64GetDatum(node_key(own_sysid()));
		args[1] = Int32GetDatum(-idgen_active_nodes);
		args[2] = Int32GetDatum(idgen_active_node);
		(void) idgen_sql_run(&cx, Q_ANNOUNCE, args, NULL);
	}
	args[0] = Int64GetDatum(own_sysid());
	args[1] = Int32GetDatum(idgen_layout.datacenter_id);
	args[2] = Int32GetDatum(idgen_layout.worker_id);
	(void) idgen_sql_run(&cx, Q_ANNOUNCE, args, NULL);

	args[0] = Int32GetDatum(idgen_layout.datacenter_id);
	args[1] = Int32GetDatum(idgen_layout.worker_id);
	args[2] = Int64GetDatum(own_sysid());
	if (idgen_sql_run_latest(&cx, Q_OTHER_CLAIM, args, NULL) > 0 &&
		claim_read(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, &c))
	{
		clash_found(c.server, c.instance, c.announced_at);
		found = 1;
	}
	args[0] = Int64GetDatum(node_key(own_sysid()));
	args[1] = Int32GetDatum(-idgen_active_nodes);
	args[2] = Int32GetDatum(idgen_active_node);
	if (idgen_active_nodes > 1 && idgen_sql_run_latest(&cx, Q_OTHER_NODE, args, NULL) > 0 &&
		claim_read(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, &c))
	{
		node_claim_seen(c.server, -c.datacenter_id, c.worker_id, c.instance, c.announced_at);
		found = 1;
	}
	idgen_sql_end(&cx);
	PG_RETURN_INT64(found);
}

/*
 * Trigger on idgen_identity_claim, BEFORE INSERT OR UPDATE FOR EACH ROW,
 * enabled ALWAYS: a row that claims this server's identity for another
 * server, written by replication or by hand, stops this server's
 * generation.  It never raises an error: in a replication worker, an error
 * would stop the replication of every table.
 *
 * Before the row is written, not after: pglogical's apply worker leaves the
 * relation it opened for an AFTER trigger's queue unclosed, a "relcache
 * reference leak" WARNING at every claim it applies.  The claim counts
 * once seen, whether its row is then written or not; a clash is never
 * taken back anyway.  Extension version 1.0.0 made it an AFTER trigger,
 * which a database not yet updated still has: it is accepted too, and
 * works the same but for that WARNING.
 */
Datum
idgen_identity_claim_check(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	HeapTuple	row;
	Datum		result;
	ClaimRow	c;

	if (!CALLED_AS_TRIGGER(fcinfo) || TRIGGER_FIRED_INSTEAD(td->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(td->tg_event) || TRIGGER_FIRED_BY_UPDATE(td->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idgen_identity_claim_check() must be a BEFORE INSERT OR UPDATE row trigger")));
	row = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
	/* the row as it came, for a BEFORE trigger; an AFTER one's is ignored */
	result = TRIGGER_FIRED_BEFORE(td->tg_event) ? PointerGetDatum(row) : PointerGetDatum(NULL);
	if (idgen_shared == NULL || !claim_read(row, RelationGetDescr(td->tg_relation), &c))
		return result;
	if (c.server == own_sysid())
	{
		/*
		 * This server's own claim.  Written here, or copied with the data (a
		 * table synchronisation, a restore), it is nothing; arriving through
		 * a subscription's stream it was announced by another live server: a
		 * server's own changes never come back to it (origin = none), so that
		 * server runs from a copy of its data.
		 */
		char	   *subscription = origin_subscription(idgen_replayed_origin());

		if (subscription != NULL)
			copy_found(c.instance, c.announced_at, subscription);
		return result;
	}
	/* another server's claim: first whether it clashes, then the gate */
	if (c.node && idgen_active_nodes > 1 && identity_announced())
		node_claim_seen(c.server, -c.datacenter_id, c.worker_id, c.instance, c.announced_at);
	else if (!c.node && identity_announced() &&
			 c.datacenter_id == idgen_layout.datacenter_id && c.worker_id == idgen_layout.worker_id)
		clash_found(c.server, c.instance, c.announced_at);
	gate_heard();
	return result;
}

static Size
clash_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(IdgenClashes)), sizeof(IdgenGate));
}

static void
clash_shmem_startup(void *ptr, bool found, LWLockPadded *locks)
{
	clash = (IdgenClashes *) ptr;
	gate = (IdgenGate *) ((char *) ptr + MAXALIGN(sizeof(IdgenClashes)));
	if (found)
		return;
	SpinLockInit(&clash->mutex);
	pg_atomic_init_u32(&clash->node_clashed, 0);
	SpinLockInit(&gate->mutex);
	memset(gate->db, 0, sizeof(gate->db));
}

static const IdgenShmemArea clash_area = {
	.name = "idgen active",
	.size = clash_shmem_size,
	.startup = clash_shmem_startup,
};

/* Define the settings; when preloading, register the clash's area. */
void
idgen_active_init(void)
{
	DefineCustomIntVariable("idgen.active_nodes",
							"Sets how many primaries hand out per-key sequence values (active-active).",
							"With N > 1, node r hands out only every N-th value of each key, from start + r * step. "
							"The same on every node; fixed for the life of the keys.",
							&idgen_active_nodes, 1, 1, IDGEN_MAX_ACTIVE_NODES,
							idgen_startup_context(), 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.active_node",
							"Sets this primary's number among idgen.active_nodes, from 0.",
							"Each primary has its own.",
							&idgen_active_node, 0, 0, IDGEN_MAX_ACTIVE_NODES - 1,
							idgen_startup_context(), 0, NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress)
		idgen_shmem_register(&clash_area);
}
