/*-------------------------------------------------------------------------
 *
 * active_claim.c
 *	  Each server's claim to its Snowflake identity and node number, in the
 *	  table idgen_identity_claim: the announcement the idgen sequencer
 *	  makes in every database (idgen_identity_announce), and the trigger
 *	  that reads every claim written (idgen_identity_claim_check).  What a
 *	  claim means, and what a clash stops, is in active.c's header.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_sql.h"

PG_FUNCTION_INFO_V1(idgen_identity_announce);
PG_FUNCTION_INFO_V1(idgen_identity_claim_check);

enum
{
	Q_RETRACT,
	Q_ANNOUNCE,
	Q_OTHER_CLAIM,
	Q_OTHER_NODE,
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
	idgen_active_gate_list(&fn, false);
	if (!identity_announced())
		PG_RETURN_INT64(0);
	idgen_sql_begin(&fn, &statements, &cx);
	args[0] = Int64GetDatum(idgen_active_own_sysid());
	args[1] = Int64GetDatum(node_key(idgen_active_own_sysid()));
	(void) idgen_sql_run(&cx, Q_RETRACT, args, NULL);
	args[3] = CStringGetTextDatum(idgen_active_instance_name());
	args[4] = TimestampTzGetDatum(GetCurrentTimestamp());

	/*
	 * The node claim first: a node that receives both in one transaction then
	 * learns of a clash of node numbers before the identity claim opens its
	 * start gate.
	 */
	if (idgen_active_nodes > 1)
	{
		args[0] = Int64GetDatum(node_key(idgen_active_own_sysid()));
		args[1] = Int32GetDatum(-idgen_active_nodes);
		args[2] = Int32GetDatum(idgen_active_node);
		(void) idgen_sql_run(&cx, Q_ANNOUNCE, args, NULL);
	}
	args[0] = Int64GetDatum(idgen_active_own_sysid());
	args[1] = Int32GetDatum(idgen_layout.datacenter_id);
	args[2] = Int32GetDatum(idgen_layout.worker_id);
	(void) idgen_sql_run(&cx, Q_ANNOUNCE, args, NULL);

	args[0] = Int32GetDatum(idgen_layout.datacenter_id);
	args[1] = Int32GetDatum(idgen_layout.worker_id);
	args[2] = Int64GetDatum(idgen_active_own_sysid());
	if (idgen_sql_run_latest(&cx, Q_OTHER_CLAIM, args, NULL) > 0 &&
		claim_read(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, &c))
	{
		idgen_active_identity_claimed(c.server, c.instance, c.announced_at);
		found = 1;
	}
	args[0] = Int64GetDatum(node_key(idgen_active_own_sysid()));
	args[1] = Int32GetDatum(-idgen_active_nodes);
	args[2] = Int32GetDatum(idgen_active_node);
	if (idgen_active_nodes > 1 && idgen_sql_run_latest(&cx, Q_OTHER_NODE, args, NULL) > 0 &&
		claim_read(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, &c))
	{
		idgen_active_node_claimed(c.server, -c.datacenter_id, c.worker_id, c.instance, c.announced_at);
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
	if (c.server == idgen_active_own_sysid())
	{
		/*
		 * This server's own claim.  Written here, or copied with the data (a
		 * table synchronisation, a restore), it is nothing; arriving through
		 * a subscription's stream it was announced by another live server: a
		 * server's own changes never come back to it (origin = none), so that
		 * server runs from a copy of its data.
		 */
		char	   *subscription = idgen_active_origin_subscription(idgen_replayed_origin());

		if (subscription != NULL)
			idgen_active_copy_found(c.instance, c.announced_at, subscription);
		return result;
	}
	/* another server's claim: first whether it clashes, then the gate */
	if (c.node && idgen_active_nodes > 1 && identity_announced())
		idgen_active_node_claimed(c.server, -c.datacenter_id, c.worker_id, c.instance, c.announced_at);
	else if (!c.node && identity_announced() &&
			 c.datacenter_id == idgen_layout.datacenter_id && c.worker_id == idgen_layout.worker_id)
		idgen_active_identity_claimed(c.server, c.instance, c.announced_at);
	idgen_active_gate_heard();
	return result;
}
