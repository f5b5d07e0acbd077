/*-------------------------------------------------------------------------
 *
 * bgworker.c
 *	  Registering idgen's background processes: "idgen keeper" (keeper.c),
 *	  "idgen registry" (registry.c) and the "idgen sequencer launcher"
 *	  (sequencer_launcher.c), which starts the "idgen sequencer"s; and
 *	  their one policy for SIGTERM.
 *
 * SIGTERM (a shutdown, pg_terminate_backend, DROP DATABASE ... WITH
 * (FORCE), an administrator's kill) stops every idgen process the way it
 * stops a backend: die() ends a wait for a lock, a statement or
 * synchronous standbys, and the next CHECK_FOR_INTERRUPTS exits with FATAL
 * 57P01, aborting the transaction in progress, which is how the sequencers
 * and their launcher end.  A process that owes something at its exit (the
 * keeper the bound of what it issued, in WAL; the registry process its
 * lease, given back) holds interrupts from its start, so that the FATAL
 * never cuts a step short: the handler also sets ShutdownRequestPending,
 * which it reads between steps, and its waits end at that flag or at
 * ProcDiePending.  Each then exits with 1, so that the postmaster starts
 * it again unless the server is shutting down.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/procsignal.h"
#include "tcop/tcopprot.h"

#include "idgen_bgworker.h"

/* SIGTERM, in every idgen process: see the file header. */
static void
idgen_bgworker_sigterm(SIGNAL_ARGS)
{
	ShutdownRequestPending = true;
	die(IDGEN_SIGNAL_ARGS_PASS);
}

/*
 * Install the handlers of SIGHUP (reload the configuration) and SIGTERM,
 * the same in every idgen process, and unblock signals: the first thing a
 * process's main function does (after any handler of its own).
 */
void
idgen_bgworker_signals(void)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, idgen_bgworker_sigterm);
	BackgroundWorkerUnblockSignals();
}

/*
 * In a process that holds interrupts (see the file header): whether it is
 * to stop, read between its steps; meanwhile it does what every process is
 * asked to do by others, a ProcSignal barrier's absorption.
 */
bool
idgen_bgworker_stopping(void)
{
	Assert(InterruptHoldoffCount > 0);
	if (ShutdownRequestPending)
		return true;
	if (ProcSignalBarrierPending)
		ProcessProcSignalBarrier();
	return false;
}

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
