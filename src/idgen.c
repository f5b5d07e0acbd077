/*-------------------------------------------------------------------------
 *
 * idgen.c
 *	  Module entry point: settings and hook wiring only.
 *
 * Every layout and identity setting is PGC_POSTMASTER: the generator's
 * ordering guarantees hold only while the layout stays the same, so it can
 * change only across a restart.  Their accepted ranges are deliberately wide
 * (any int): a value outside a GUC's own range would be replaced by the
 * default with no more than a WARNING, and a server silently generating with
 * a layout or worker id other than the configured one is exactly the failure
 * an ID generator must not have.  Instead, idgen's own validation (layout.c)
 * rejects such a value, reports it at start and refuses to generate.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "idgen.h"
#include "compat.h"
#include "idgen_horizon.h"
#include "idgen_registry.h"
#include "idgen_seq.h"

PG_MODULE_MAGIC;

char	   *idgen_epoch_string = NULL;
int			idgen_timestamp_bits = 41;
int			idgen_datacenter_bits = 5;
int			idgen_worker_bits = 5;
int			idgen_sequence_bits = 12;
int			idgen_gene_bits = 0;
int			idgen_datacenter_id = 0;
int			idgen_worker_id = 0;
int			idgen_max_drift_ms = 100;
int			idgen_clock_wait_ms = 1000;
int			idgen_takeover_max_lead_ms = 60 * 1000;
int			idgen_horizon_lead_ms = 1000;
int			idgen_horizon_interval_ms = 100;
char	   *idgen_purge_database = NULL;
int			idgen_purge_interval_s = 60;
int			idgen_worker_quarantine_ms = 10 * 1000;
int			idgen_seq_default_ttl_s = 0;
int			idgen_seq_cache_keys = 1024;
int			idgen_seq_cache_wait_ms = 2000;
double		idgen_seq_cache_prefetch = 0.1;
int			idgen_identity_source = IDGEN_IDENTITY_FROM_SETTINGS;
char	   *idgen_registry = NULL;
int			idgen_registry_ttl_ms = 30 * 1000;
uint64		idgen_postmaster_nonce = 0;

static const struct config_enum_entry identity_options[] = {
	{"settings", IDGEN_IDENTITY_FROM_SETTINGS, false},
	{"registry", IDGEN_IDENTITY_FROM_REGISTRY, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/*
 * Layout settings are PGC_POSTMASTER when the library is preloaded.  A
 * library loaded later may not define PGC_POSTMASTER settings; there they
 * are PGC_SIGHUP, still read only from the configuration file (never SET in
 * a session), and serve only the functions that read IDs, since nothing is
 * generated without shared memory.
 */
static GucContext
layout_context(void)
{
	return process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP;
}

static void
define_layout_int(const char *name, const char *desc, int *var, int boot)
{
	DefineCustomIntVariable(name, desc, NULL, var, boot, INT_MIN, INT_MAX,
							layout_context(), 0, NULL, NULL, NULL);
}

void
_PG_init(void)
{
	DefineCustomStringVariable("idgen.epoch",
							   "Sets the time zero of the Snowflake timestamp field.",
							   "Changing it changes the meaning of every existing ID.",
							   &idgen_epoch_string,
							   "2024-01-01 00:00:00+00",
							   layout_context(), 0, NULL, NULL, NULL);
	define_layout_int("idgen.timestamp_bits",
					  "Sets the width of the Snowflake timestamp field (milliseconds since idgen.epoch).",
					  &idgen_timestamp_bits, 41);
	define_layout_int("idgen.datacenter_bits",
					  "Sets the width of the Snowflake datacenter field.",
					  &idgen_datacenter_bits, 5);
	define_layout_int("idgen.worker_bits",
					  "Sets the width of the Snowflake worker field.",
					  &idgen_worker_bits, 5);
	define_layout_int("idgen.sequence_bits",
					  "Sets the width of the Snowflake sequence field (IDs per millisecond per gene).",
					  &idgen_sequence_bits, 12);
	define_layout_int("idgen.gene_bits",
					  "Sets the width of the Snowflake gene field (low bits that carry a shard).",
					  &idgen_gene_bits, 0);
	define_layout_int("idgen.datacenter_id",
					  "Sets this server's datacenter id; distinct per server in a cluster.",
					  &idgen_datacenter_id, 0);
	define_layout_int("idgen.worker_id",
					  "Sets this server's worker id; distinct per server in a cluster.",
					  &idgen_worker_id, 0);

	DefineCustomEnumVariable("idgen.identity",
							 "Sets where this server's datacenter and worker id come from.",
							 "settings: idgen.datacenter_id and idgen.worker_id (claimed from the registry "
							 "when idgen.registry is set); registry: any free one, leased from the registry.",
							 &idgen_identity_source, IDGEN_IDENTITY_FROM_SETTINGS, identity_options,
							 layout_context(), 0, NULL, NULL, NULL);
	DefineCustomStringVariable("idgen.registry",
							   "Sets the connection string of the registry that leases this server's identity.",
							   "Empty: no registry, the identity is not checked against other servers. "
							   "Fixed at start: a lease's token is valid only at the registry that gave it.",
							   &idgen_registry, "",
							   layout_context(), GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.registry_ttl",
							"Sets how long a lease on this server's identity lasts; it is renewed every third of it.",
							"Without a renewal (the registry unreachable) generation stops when it runs out.",
							&idgen_registry_ttl_ms, 30 * 1000, 1000, 24 * 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("idgen.max_drift_ms",
							"Sets how far ahead of the system clock the generator may run.",
							"Borrowed milliseconds (sequence used up) and small backward clock steps "
							"are absorbed within this bound; beyond it the generator waits.",
							&idgen_max_drift_ms, 100, 0, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.clock_wait_ms",
							"Sets how long a call may wait for the system clock before it fails.",
							NULL,
							&idgen_clock_wait_ms, 1000, 0, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("idgen.takeover_max_lead",
							"Sets how far ahead of the system clock a server that took over an identity may continue from its last holder's IDs.",
							"After a promotion, or a registry lease taken over from another server, generators "
							"start above every ID the last holder may have issued. If that is ahead of this "
							"server's clock by at most this much, they continue from there; otherwise they "
							"wait for the clock, and fail after idgen.clock_wait_ms.",
							&idgen_takeover_max_lead_ms, 60 * 1000, 0, 24 * 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("idgen.horizon_lead_ms",
							"Sets how far beyond what generators may issue the keeper makes the durable horizon.",
							"Generators may issue up to idgen.max_drift_ms ahead of the clock; the keeper "
							"renews the horizon when less than half of this lead is left beyond that. "
							"This is also the longest wait for the clock after a fast restart.",
							&idgen_horizon_lead_ms, 1000, 100, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.horizon_interval_ms",
							"Sets how often the keeper checks the durable horizon.",
							NULL,
							&idgen_horizon_interval_ms, 100, 10, 10 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomStringVariable("idgen.database",
							   "Sets the database whose expired per-key sequences the purge worker deletes.",
							   NULL,
							   &idgen_purge_database, "postgres",
							   layout_context(), 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.purge_interval",
							"Sets how often expired per-key sequences are deleted.",
							NULL,
							&idgen_purge_interval_s, 60, 1, 24 * 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("idgen.worker_quarantine",
							"Sets how long a worker id rests after its lease ends before it is leased again.",
							"Covers a holder that renews late or stops late, and clock differences "
							"between the hosts of one holder and the next.",
							&idgen_worker_quarantine_ms, 10 * 1000, 0, 24 * 3600 * 1000,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("idgen.seq_default_ttl",
							"Sets the ttl of per-key sequence keys created without one.",
							"A key unused for this long is forgotten and restarts. 0 (the default) "
							"means new keys never expire unless configured with a ttl.",
							&idgen_seq_default_ttl_s, 0, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("idgen.seq_cache_keys",
							"Sets how many cached per-key sequences shared memory holds.",
							"The least recently used key is evicted when a new one needs room; "
							"its reserved but unserved values are lost.",
							&idgen_seq_cache_keys, 1024, 16, 1024 * 1024,
							layout_context(), 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.seq_cache_wait_ms",
							"Sets how long a call waits for a segment of a cached key before it fails.",
							NULL,
							&idgen_seq_cache_wait_ms, 2000, 0, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomRealVariable("idgen.seq_cache_prefetch",
							 "Sets the fraction of a segment used after which the next one is reserved.",
							 NULL,
							 &idgen_seq_cache_prefetch, 0.1, 0.0, 1.0,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	idgen_mark_guc_prefix_reserved("idgen");

	idgen_layout_compute(&idgen_layout, GetCurrentTimestamp());

	if (process_shared_preload_libraries_in_progress)
	{
		/*
		 * A random name for this postmaster, inherited by its children and
		 * kept across crash restarts (registry.c: whose lease file it is).
		 * With EXEC_BACKEND every child draws its own, so the lease file is
		 * never used there: safe, only slower after a crash.
		 */
		if (!pg_strong_random(&idgen_postmaster_nonce, sizeof(idgen_postmaster_nonce)))
			idgen_postmaster_nonce = (uint64) GetCurrentTimestamp() ^ ((uint64) MyProcPid << 32);
		idgen_layout_report(WARNING);
		idgen_shmem_init();
		idgen_wal_register();
		idgen_keeper_register();
		idgen_purge_register();
		idgen_registry_register();
	}
}
