/*-------------------------------------------------------------------------
 *
 * bgworker.c
 *	  Registering idgen's background processes: "idgen keeper" (keeper.c),
 *	  "idgen registry" (registry.c) and the "idgen sequencer launcher"
 *	  (sequencer_launcher.c), which starts the "idgen sequencer"s.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "postmaster/bgworker.h"

#include "idgen_bgworker.h"

/*
 * Register one of idgen's background processes; called from _PG_init in
 * the postmaster.
 */
void
idgen_register_process(const char *name, const char *function, int flags,
					   BgWorkerStartTime start_time, int restart_seconds)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = flags;
	worker.bgw_start_time = start_time;
	worker.bgw_restart_time = restart_seconds;
	snprintf(worker.bgw_library_name, sizeof(worker.bgw_library_name), "idgen");
	snprintf(worker.bgw_function_name, sizeof(worker.bgw_function_name), "%s", function);
	snprintf(worker.bgw_name, sizeof(worker.bgw_name), "%s", name);
	snprintf(worker.bgw_type, sizeof(worker.bgw_type), "%s", name);
	RegisterBackgroundWorker(&worker);
}
