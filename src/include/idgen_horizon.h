/*-------------------------------------------------------------------------
 *
 * idgen_horizon.h
 *	  The durable horizon: its file and its shared state (horizon.c), the
 *	  horizon in WAL (horizon_wal.c), and the "idgen keeper" process that
 *	  keeps it ahead of the generators (keeper.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_HORIZON_H
#define IDGEN_HORIZON_H

#include "idgen.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

/* The keeper's state, for idgen_info(); under 'mutex' (keeper.c). */
typedef struct IdgenKeeperStatus
{
	slock_t		mutex;
	int			pid;			/* 0 when not running */
	uint64		persists;		/* horizons made durable */
	uint64		failures;		/* attempts that failed */
	TimestampTz last_persist;
	TimestampTz last_failure;
} IdgenKeeperStatus;

/* What redo learnt from the horizon records in WAL; under 'mutex'. */
typedef struct IdgenReplayStatus
{
	slock_t		mutex;
	bool		known;			/* a record was replayed since start */
	TimestampTz horizon;		/* the highest horizon replayed; 0: none */
	TimestampTz written_at;		/* the writer's clock when it wrote that */
	TimestampTz replayed_at;	/* ours, at the last record */
	int			datacenter_id;	/* the writer's identity at the last record */
	int			worker_id;		/* (-1: it held none) */
	uint64		records;		/* records replayed since start */
	TimestampTz lifted_at;		/* end of recovery: generators raised then */
	TimestampTz lifted_to;		/* ... above this horizon */
	int64		lift_lead_ms;	/* how far ahead of the clock that was */
} IdgenReplayStatus;

/*
 * The horizon area's shared state ("idgen horizon"; the protocol is in
 * horizon.c's header).  The horizon generators read, and whether the
 * keeper fenced them, are in the core segment (idgen_shmem.h).
 */
typedef struct IdgenHorizonShared
{
	/*
	 * The horizon file's content; under file_lock, which its writers take.
	 * Also under it: whether recovery has ended (then the keeper publishes
	 * only horizons it wrote into WAL), and the core's 'fenced'.
	 */
	LWLock	   *file_lock;
	TimestampTz file_horizon;
	bool		recovery_ended;

	bool		restored;		/* read from the file at start */
	IdgenKeeperStatus keeper;
	IdgenReplayStatus replay;
} IdgenHorizonShared;

/* settings */
extern int	idgen_horizon_lead_ms;
extern int	idgen_horizon_interval_ms;

/* horizon.c */
extern IdgenHorizonShared *idgen_horizon_shared;
extern bool idgen_horizon_persist(TimestampTz horizon, int elevel);
extern TimestampTz idgen_horizon_fence(void);
extern void idgen_horizon_init(void);

/*
 * horizon_wal.c: idgen's WAL resource manager id.  Custom ids are 128 to
 * 255 and must be unique among a server's extensions (128 is for
 * development; see the README's High availability section).
 */
#define IDGEN_RMGR_ID				147

extern void idgen_horizon_wal_init(void);
extern bool idgen_wal_log_horizon(TimestampTz horizon);
extern void idgen_wal_log_stop(TimestampTz bound);
extern bool idgen_recovery_may_generate(void);
extern void idgen_recovery_check(IdgenKind kind, const char *item);

/* keeper.c */
extern void idgen_keeper_init(void);

#endif							/* IDGEN_HORIZON_H */
