/*-------------------------------------------------------------------------
 *
 * idgen_horizon.h
 *	  The durable horizon and its keeper (horizon.c), and the horizon in WAL
 *	  (horizon_wal.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_HORIZON_H
#define IDGEN_HORIZON_H

#include "idgen.h"

/* settings */
extern int	idgen_horizon_lead_ms;
extern int	idgen_horizon_interval_ms;

/* horizon.c */
extern bool idgen_horizon_read(TimestampTz *horizon, TimestampTz *written_at,
							   char *why, size_t whylen);
extern bool idgen_horizon_ever_made(void);
extern bool idgen_horizon_persist(TimestampTz horizon, int elevel);
extern uint64 idgen_horizon_start_tick(TimestampTz horizon, TimestampTz epoch, int tick_bits);
extern void idgen_keeper_wake(void);
extern void idgen_horizon_init(void);

/*
 * horizon_wal.c: idgen's WAL resource manager id.  Custom ids are 128 to
 * 255 and must be unique among a server's extensions (128 is for
 * development; see the README's High availability section).
 */
#define IDGEN_RMGR_ID				147

extern void idgen_wal_register(void);	/* from idgen_horizon_init */
extern bool idgen_wal_log_horizon(TimestampTz horizon);
extern void idgen_wal_log_stop(TimestampTz bound);
extern bool idgen_recovery_may_generate(void);
extern void idgen_recovery_check(IdgenKind kind, const char *item);

#endif							/* IDGEN_HORIZON_H */
