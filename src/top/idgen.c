/*-------------------------------------------------------------------------
 *
 * idgen.c
 *	  Module entry point.
 *
 * _PG_init calls one init function per area.  Each defines the area's
 * settings and, when the library is being preloaded, does what only the
 * postmaster can: request shared memory, register a WAL resource manager
 * or a background process.  The order matters in one way only: the layout
 * comes first, since the other areas read it.
 *
 * It also installs a ProcessUtility_hook, chained as pg_stat_statements
 * chains its own, for one reason: PostgreSQL has no callback for DISCARD,
 * and the session's last IDs (idgen_snowflake_last, idgen_uuid7_last) must
 * be forgotten where DISCARD forgets currval() and lastval(), or a client
 * of a session-pooling pooler (whose server_reset_query is DISCARD ALL)
 * reads the previous client's ID.  The hook's signature is the same on
 * every supported version (15 and later).  (public.c installs the other
 * hook, emit_log_hook, which keeps imported keys out of the server log.)
 *
 * Setting names follow one rule, PostgreSQL's own: no unit in the name,
 * times through GUC_UNIT_MS or GUC_UNIT_S, so that '1s' and '100ms' are
 * accepted and SHOW prints the unit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/extension.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/guc.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_clock.h"
#include "idgen_generators.h"
#include "idgen_horizon.h"
#include "idgen_identity.h"
#include "idgen_layout.h"
#include "idgen_lease.h"
#include "idgen_public.h"
#include "idgen_seq.h"
#include "idgen_shmem.h"
#include "idgen_sql.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * After DISCARD ALL or DISCARD SEQUENCES has run (standard processing and
 * any hook before this one), forget the session's last IDs.  Not
 * transactional, as PostgreSQL's own reset: DISCARD SEQUENCES in a
 * transaction that rolls back has still reset them.  A DISCARD that fails
 * (DISCARD ALL in a transaction block) raises before, and resets nothing.
 */
static void
idgen_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	if (IsA(stmt, DiscardStmt) &&
		(((DiscardStmt *) stmt)->target == DISCARD_ALL ||
		 ((DiscardStmt *) stmt)->target == DISCARD_SEQUENCES))
	{
		idgen_snowflake_forget_last();
		idgen_uuid7_forget_last();
	}
}

/*
 * The idgen sequencer's duties in each database with idgen, in this order at
 * every purge (sequencer.c): delete the expired keys (seq_admin.c) and the
 * ended leases (lease_renew.c), and announce this server's identity
 * (active_claim.c).  Each is an extension function of a layer above the
 * sequencer's, so the list is declared here, at the top.
 */
static const IdgenSequencerDuty sequencer_duties[] = {
	{IDGEN_SQL_NAME(idgen_seq_purge), true},
	{IDGEN_SQL_NAME(idgen_worker_purge), true},
	{IDGEN_SQL_NAME(idgen_identity_announce), false},
};

void
_PG_init(void)
{
	idgen_layout_init();
	idgen_clock_init();
	idgen_horizon_init();
	idgen_horizon_wal_init();
	idgen_keeper_init();
	idgen_identity_init();
	idgen_registry_init();
	idgen_lease_init();
	idgen_seq_init();
	idgen_seq_cache_init();
	idgen_sequencer_init();
	idgen_sequencer_set_duties(sequencer_duties, lengthof(sequencer_duties));
	idgen_active_init();
	idgen_public_init();

	MarkGUCPrefixReserved("idgen");

	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = idgen_process_utility;

	if (process_shared_preload_libraries_in_progress)
		idgen_shmem_init();
	else if (creating_extension)
	{
		/*
		 * Loaded by CREATE EXTENSION (its script's C functions) without the
		 * preload: everything is created, and the first ID would fail.
		 */
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idgen is not in shared_preload_libraries"),
				 errdetail("The extension is created, but idgen_snowflake(), idgen_uuid7() and idgen_stats fail until the server is started with the library preloaded, and cached per-key sequences are served transactionally."),
				 errhint("Add 'idgen' to shared_preload_libraries in postgresql.conf and restart the server.")));
	}
}
