/*-------------------------------------------------------------------------
 *
 * seq_settings.c
 *	  The settings of per-key sequences, cached segments and the idgen sequencer
 *	  processes, defined in one place below every file that reads them
 *	  (seq_row.c, seq_slots.c, seq_cache.c, seq.c, sequencer.c): no file
 *	  of the area reaches up to another for a setting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "idgen.h"
#include "idgen_seq.h"
#include "idgen_shmem.h"

/*
 * The ttl of keys created by use, in seconds (0: none; else at least 1),
 * and the most live keys a role may have for idgen_seq_next to create
 * another (0: no limit).
 */
double		idgen_seq_default_ttl = 0;
int			idgen_seq_max_keys_per_role = 0;

/* Cached segments (seq_cache.c) and the processes' slots (seq_slots.c). */
int			idgen_seq_cache_keys = 1024;
int			idgen_max_sequencers = 4;
int			idgen_seq_cache_wait_ms = 2000;
double		idgen_seq_cache_prefetch = 0.1;

/* The processes (sequencer.c); the interval also bounds a recorded use. */
int			idgen_purge_interval_s = 60;
int			idgen_sequencer_idle_s = 60;

/*
 * idgen.seq_default_ttl is 0 or at least a second.  It is a real number of
 * seconds so that this hook sees '500ms' as 0.5: as an integer it was
 * rounded to 0 before any hook ran, turning the setting off without a word.
 */
static bool
check_default_ttl(double *newval, void **extra, GucSource source)
{
	if (*newval > 0 && *newval < 1)
	{
		GUC_check_errdetail("A default ttl is 0 (none) or at least 1 s; a shorter one would forget keys between two uses.");
		GUC_check_errhint("Set it to 0 to turn it off.");
		return false;
	}
	return true;
}

/* Define the settings (idgen_startup_context: fixed at server start). */
void
idgen_seq_settings_init(void)
{
	DefineCustomRealVariable("idgen.seq_default_ttl",
							 "Sets the ttl of per-key sequence keys created by idgen_seq_next.",
							 "A key unused for this long is forgotten and restarts. Keys created by "
							 "idgen_seq_set, idgen_seq_set_if_absent or idgen_seq_configure never take it. "
							 "0 (the default) means none; else at least 1 s.",
							 &idgen_seq_default_ttl, 0, 0, INT_MAX,
							 PGC_SUSET, GUC_UNIT_S, check_default_ttl, NULL, NULL);
	DefineCustomIntVariable("idgen.seq_max_keys_per_role",
							"Sets how many live per-key sequence keys a role may have for idgen_seq_next to create another.",
							"Counts the keys the role created, by any function, whose ttl has not passed. "
							"The administrative functions are not limited. 0 (the default) means no limit.",
							&idgen_seq_max_keys_per_role, 0, 0, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.seq_cache_keys",
							"Sets how many cached per-key sequences shared memory holds.",
							"The least recently used key is evicted when a new one needs room; "
							"its reserved but unserved values are lost.",
							&idgen_seq_cache_keys, 1024, 16, 1024 * 1024,
							idgen_startup_context(), 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.max_sequencers",
							"Sets how many databases may have an idgen sequencer at once.",
							"A database's process reserves the segments of its cached per-key sequences and "
							"deletes its expired keys and ended leases. Each is a background worker "
							"(max_worker_processes).",
							&idgen_max_sequencers, 4, 1, IDGEN_MAX_SEQUENCERS,
							idgen_startup_context(), 0, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.seq_cache_wait",
							"Sets how long a call waits for a segment of a cached key before it fails.",
							NULL,
							&idgen_seq_cache_wait_ms, 2000, 0, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomRealVariable("idgen.seq_cache_prefetch",
							 "Sets the fraction of a segment used after which the next one is reserved.",
							 NULL,
							 &idgen_seq_cache_prefetch, 0.1, 0.0, 1.0,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("idgen.purge_interval",
							"Sets how often expired per-key sequence keys and ended leases are deleted.",
							"Every database that accepts connections is visited this often.",
							&idgen_purge_interval_s, 60, 1, 24 * 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.sequencer_idle",
							"Sets how long a database's idgen sequencer stays after its cached keys were last used.",
							"Its slot (idgen.max_sequencers) is then free for another database.",
							&idgen_sequencer_idle_s, 60, 1, 24 * 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
}
