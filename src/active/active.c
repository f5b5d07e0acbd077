/*-------------------------------------------------------------------------
 *
 * active.c
 *	  Several primaries that replicate to each other (active-active): the
 *	  settings that number the nodes, and the clashes that stop a server:
 *	  another server's claim to its Snowflake identity or to its node
 *	  number, or a copy of its data.  Per-key values (seq_node.c), worker
 *	  leases (lease_acquire.c) and public ID key versions (public.c) are
 *	  dealt out by the node number; the claims are announced and read by
 *	  active_claim.c, and a database starts once it has heard from the
 *	  nodes it replicates with (active_gate.c).
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
 *	  the start gate (active_gate.c) keeps the one started later from handing out
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
 *	  worker-lease grants and key rotations (idgen_active_node_claimed), as a copy
 *	  does.  It is written first in the announcement's transaction, so a
 *	  receiver learns of the clash before the identity claim opens its
 *	  start gate.
 *
 * Shared state
 *	  The clashes' details live in this file's area, "idgen active"
 *	  (IdgenClashes): the first claim that stopped Snowflake IDs, and the
 *	  first that stopped what is dealt out by node number, each written
 *	  once under the spinlock 'mutex' together with its flag (the core
 *	  segment's 'clashed', and 'node_clashed'), never cleared until the
 *	  server restarts.  Generators read only the flags, without a lock;
 *	  readers of the details take the mutex, after reading a flag set.  The
 *	  same area holds the start gate (IdgenGate, idgen_active.h), whose
 *	  protocol is active_gate.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_interval.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_stats.h"

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

/* The start gate's state (active_gate.c), in this file's area. */
IdgenGate  *idgen_active_gate_state = NULL;

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

/* How this server is named in claims and messages. */
const char *
idgen_active_instance_name(void)
{
	if (cluster_name != NULL && cluster_name[0] != '\0')
		return psprintf("%s (port %d)", cluster_name, PostPortNumber);
	return psprintf("port %d", PostPortNumber);
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
void
idgen_active_identity_claimed(int64 other_sysid, const char *instance, TimestampTz other_announced_at)
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
						   (uint64) idgen_active_own_sysid(), idgen_active_instance_name()),
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
					   c->subscription, c->database, idgen_time_text(c->seen_at), idgen_active_instance_name()),
			 errhint("Stop one of the two servers, then restart the other. A node of a mesh needs a data directory of its own, not a copy of another node's (idgen's active-active documentation, \"Setup\").")));
}

/*
 * A claim of this server's own system identifier arrived through
 * subscription 'subscription': another live server runs from a copy of
 * this one's data.  Stop Snowflake IDs and everything dealt out by node
 * number; the first one found is logged.
 */
void
idgen_active_copy_found(const char *instance, TimestampTz other_announced_at, const char *subscription)
{
	IdgenClash	c;
	bool		first;

	clash_make(&c, idgen_active_own_sysid(), instance, other_announced_at);
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
						   idgen_time_text(c->other_announced_at), (uint64) idgen_active_own_sysid(), idgen_active_instance_name(),
						   idgen_active_node, idgen_active_nodes, idgen_time_text(c->seen_at), c->database),
				 errhint("Give every node the same \"idgen.active_nodes\" and restart the ones changed; a claim of a server gone for good is deleted from idgen_identity_claim.")));
	ereport(elevel,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("another server has this node's number (%d of %d)", idgen_active_node, idgen_active_nodes),
			 errdetail("Server " UINT64_FORMAT " (%s) announced node %d of %d at %s, and this server " UINT64_FORMAT " (%s) learnt of it at %s in database \"%s\"; "
					   "their per-key values, worker leases and public ID key versions would be the same, so they stop.",
					   c->other_sysid, c->other_instance, c->other_node, c->other_nodes,
					   idgen_time_text(c->other_announced_at), (uint64) idgen_active_own_sysid(), idgen_active_instance_name(),
					   idgen_time_text(c->seen_at), c->database),
			 errhint("Give one of the two servers another \"idgen.active_node\" and restart both; a claim of a server gone for good is deleted from idgen_identity_claim.")));
}

/*
 * Server 'other_sysid' announced node 'node' of 'nodes': if that is this
 * node's number, or another count of nodes, stop what is dealt out by node
 * number.  The first clash found is kept and logged.
 */
void
idgen_active_node_claimed(int64 other_sysid, int nodes, int node, const char *instance,
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
					   (uint64) idgen_active_own_sysid(), idgen_active_instance_name(), idgen_time_text(copy.seen_at),
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

static Size
clash_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(IdgenClashes)), sizeof(IdgenGate));
}

static void
clash_shmem_startup(void *ptr, bool found, LWLockPadded *locks)
{
	clash = (IdgenClashes *) ptr;
	idgen_active_gate_state = (IdgenGate *) ((char *) ptr + MAXALIGN(sizeof(IdgenClashes)));
	if (found)
		return;
	SpinLockInit(&clash->mutex);
	pg_atomic_init_u32(&clash->node_clashed, 0);
	SpinLockInit(&idgen_active_gate_state->mutex);
	memset(idgen_active_gate_state->db, 0, sizeof(idgen_active_gate_state->db));
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
