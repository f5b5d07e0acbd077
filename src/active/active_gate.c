/*-------------------------------------------------------------------------
 *
 * active_gate.c
 *	  The start gate of active-active: a database hands out Snowflake IDs
 *	  and per-key values once it has heard from the nodes it replicates
 *	  with (active.c has the design of the claims).
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
 *	  process, records the subscription by the name of its replication
 *	  origin (idgen_replayed_origin(): "pg_<oid>", or pglogical's, named
 *	  after its slot; a claim copied with the data does not count, since a
 *	  core table synchronisation has an origin of its own and pglogical
 *	  copies through an ordinary session).  By its name, not its number:
 *	  a subscription made after another was dropped takes the dropped
 *	  one's origin number, and has not been heard from.  The database's
 *	  idgen sequencer lists the subscriptions at each purge (gate_check),
 *	  and so does every call while the gate is closed: it opens at a
 *	  check that finds every subscription listed heard from, and that
 *	  check reads the catalogs in one snapshot.  Once open it never
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
 *	  The gate (IdgenGate, idgen_active.h) lives in active.c's area, under
 *	  its own spinlock: a call reads it until it finds its database open,
 *	  and then only its backend's flag (idgen_active_gate_passed), since the
 *	  gate never closes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_subscription.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_sql.h"

/* Whether this backend's database generates: read without a lock. */
bool		idgen_active_gate_passed = false;

enum
{
	Q_SUBSCRIPTIONS,
	Q_PGLOGICAL,
	Q_PGLOGICAL_SUBSCRIPTIONS,
	Q_ALONE,
	NUM_QUERIES
};

static const IdgenStatement statement_list[NUM_QUERIES] = {
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
 * Whether 'origin_name' is a core table synchronisation's origin
 * ("pg_<oid>_<relid>"), which copies rows as they were.
 */
static bool
origin_is_table_sync(const char *origin_name)
{
	Oid			sub;
	Oid			rel;

	return sscanf(origin_name, "pg_%u_%u", &sub, &rel) == 2;
}

/*
 * The name of the subscription whose apply process replays as the
 * replication origin named 'origin_name': a core subscription's name (its
 * origin is "pg_<oid>"), or the origin's own name for another's (pglogical
 * names it after the subscription's slot).  NULL for a core table
 * synchronisation's, or a core subscription since dropped.
 */
static char *
origin_name_subscription(const char *origin_name)
{
	Oid			sub;
	int			end = 0;

	if (origin_is_table_sync(origin_name))
		return NULL;
	if (sscanf(origin_name, "pg_%u%n", &sub, &end) == 1 && origin_name[end] == '\0')
		return get_subscription_name(sub, true);
	return pstrdup(origin_name);
}

/*
 * The name of the subscription whose apply process replays as replication
 * origin 'origin', streaming (origin_name_subscription); NULL for no
 * origin or one since dropped.
 */
char *
idgen_active_origin_subscription(IdgenOriginId origin)
{
	char	   *origin_name;

	if (origin == IDGEN_INVALID_ORIGIN || !replorigin_by_oid(origin, true, &origin_name))
		return NULL;
	return origin_name_subscription(origin_name);
}

/* Whether 'name' is one of the 'n' names of 'list'. */
static bool
name_listed(const NameData *list, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strncmp(NameStr(list[i]), name, NAMEDATALEN) == 0)
			return true;
	return false;
}

/*
 * This database's entry in the gate (its mutex held), made if 'make'
 * and there is room; NULL otherwise.
 */
static GateDatabase *
gate_database(bool make)
{
	GateDatabase *free_entry = NULL;

	for (int i = 0; i < GATE_DATABASES_KEPT; i++)
	{
		GateDatabase *d = &idgen_active_gate_state->db[i];

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
 * that subscription has been heard from since the server started.  The
 * gate opens at the next check that finds none it waits for left, not
 * here: the list of those it waited for at the last check may miss a
 * subscription made since.
 */
void
idgen_active_gate_heard(void)
{
	IdgenOriginId origin = idgen_replayed_origin();
	char	   *origin_name;
	GateDatabase *d;

	if (idgen_active_nodes <= 1 || idgen_active_gate_state == NULL || origin == IDGEN_INVALID_ORIGIN ||
		!replorigin_by_oid(origin, true, &origin_name) || origin_is_table_sync(origin_name))
		return;
	SpinLockAcquire(&idgen_active_gate_state->mutex);
	d = gate_database(true);
	if (d != NULL && !name_listed(d->heard, d->nheard, origin_name) && d->nheard < GATE_WAITING_KEPT)
		namestrcpy(&d->heard[d->nheard++], origin_name);
	SpinLockRelease(&idgen_active_gate_state->mutex);
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
	Snapshot	now;
	uint64		ncore;
	int			n = 0;
	bool		isnull;
	bool		disabled = false;	/* a pglogical subscription disabled */
	bool		alone = false;
	NameData   *origins;
	GateDatabase *d;

	/*
	 * One snapshot for every read: a subscription made between two of them
	 * would be missed by the first and found by the next (Q_ALONE), and open
	 * the gate for a database that has not heard from it.
	 */
	CommandCounterIncrement();
	now = RegisterSnapshot(GetLatestSnapshot());
	ncore = idgen_sql_run_in(cx, Q_SUBSCRIPTIONS, args, NULL, now);
	origins = palloc0(sizeof(NameData) * (ncore + 1));

	/* the origin of each one's apply process (not its table synchronisation) */
	for (uint64 i = 0; i < ncore; i++)
		snprintf(NameStr(origins[n++]), NAMEDATALEN, "pg_%u",
				 DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull)));
	if (idgen_sql_run_in(cx, Q_PGLOGICAL, NULL, NULL, now) == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		uint64		npgl = idgen_sql_run_in(cx, Q_PGLOGICAL_SUBSCRIPTIONS, NULL, NULL, now);

		origins = repalloc(origins, sizeof(NameData) * (ncore + npgl + 1));
		for (uint64 i = 0; i < npgl; i++)
		{
			char	   *slot = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

			if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)))
				disabled = true;
			else if (slot != NULL)
				namestrcpy(&origins[n++], slot);
		}
	}
	if (n == 0 && calling)
	{
		args[1] = Int64GetDatum(idgen_active_own_sysid());
		if (disabled)
			alone = true;
		else if (idgen_sql_run_in(cx, Q_ALONE, args, NULL, now) == 1)
			alone = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	UnregisterSnapshot(now);
	SpinLockAcquire(&idgen_active_gate_state->mutex);
	d = gate_database(true);
	if (d != NULL && !d->open)
	{
		d->nwaiting = 0;
		for (int i = 0; i < n; i++)
		{
			if (name_listed(d->heard, d->nheard, NameStr(origins[i])))
				continue;
			if (d->nwaiting < GATE_WAITING_KEPT)
				d->waiting[d->nwaiting] = origins[i];
			d->nwaiting++;
		}
		d->nlisted = n;
		d->open = d->nwaiting == 0 && (n > 0 || alone);
	}
	SpinLockRelease(&idgen_active_gate_state->mutex);
	pfree(origins);
}

/*
 * gate_check in a transaction, through the statements of the extension
 * whose function 'fn' runs; nothing with one node or not preloaded.
 */
void
idgen_active_gate_list(const IdgenFunction *fn, bool calling)
{
	IdgenSqlContext cx;

	if (idgen_active_nodes <= 1 || idgen_active_gate_state == NULL)
		return;
	idgen_sql_begin(fn, &statements, &cx);
	gate_check(&cx, idgen_extension_table(fn, "idgen_identity_claim", false), calling);
	idgen_sql_end(&cx);
}

/* A copy of this database's entry in the gate; false if it has none. */
static bool
gate_read(GateDatabase *copy)
{
	GateDatabase *d;

	SpinLockAcquire(&idgen_active_gate_state->mutex);
	d = gate_database(false);
	if (d != NULL)
		*copy = *d;
	SpinLockRelease(&idgen_active_gate_state->mutex);
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

	if (idgen_active_nodes <= 1 || idgen_active_gate_state == NULL)
	{
		idgen_active_gate_passed = true;
		return;
	}
	if (!gate_read(&copy) || !copy.open)
	{
		IdgenFunction fn;

		if (idgen_lookup_extension(&fn))
			idgen_active_gate_list(&fn, true);
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
		char	   *sub_name = origin_name_subscription(NameStr(copy.waiting[i]));

		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "",
						 sub_name ? quote_identifier(sub_name) : "(a subscription since dropped)");
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
