/*-------------------------------------------------------------------------
 *
 * idgen_bgworker.h
 *	  Registering idgen's background processes, and their signals
 *	  (bgworker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_BGWORKER_H
#define IDGEN_BGWORKER_H

#include "idgen.h"
#include "postmaster/bgworker.h"

extern void idgen_register_process(const char *name, const char *function, int flags,
								   BgWorkerStartTime start_time, int restart_seconds);
extern void idgen_bgworker_signals(void);
extern bool idgen_bgworker_stopping(void);

#endif							/* IDGEN_BGWORKER_H */
