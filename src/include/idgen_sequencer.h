/*-------------------------------------------------------------------------
 *
 * idgen_sequencer.h
 *	  The handshake of the idgen sequencer processes (sequencer.c,
 *	  sequencer_launcher.c) with what serves them: their slots and the
 *	  launcher's queue (seq_slots.c), and the segment requests of cached
 *	  keys (seq_cache.c).  Only those files include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_SEQUENCER_H
#define IDGEN_SEQUENCER_H

#include "idgen_seq.h"
#include "storage/latch.h"

/* A purge step's failure that repeats is logged once an hour (seq_slots.c). */
#define IDGEN_PURGE_WARN_EVERY_S	3600

/* seq_slots.c: a slot's life, the launcher's queue, the purge steps */
extern void idgen_seq_slot_launcher_attach(Latch *latch);
extern void idgen_seq_slot_launcher_detach(int code, Datum arg);
extern int	idgen_seq_slot_take_wanted(Oid *dbid, uint32 *generation, const bool *stopping);
extern int	idgen_seq_slot_take_for_purge(Oid dbid, uint32 *generation);
extern bool idgen_seq_slot_ask_yield(Oid dbid, int64 min_age);
extern void idgen_seq_slot_set_waiting(const Oid *dbids, int n, TimestampTz since);
extern void idgen_seq_slot_start_ended(int slot, uint32 generation, bool start_failed);
extern Oid	idgen_seq_slot_dbid(int slot, uint32 *generation);
extern void idgen_seq_slot_detach(int code, Datum arg);
extern void idgen_seq_slot_wake(void);
extern bool idgen_seq_slot_request(Oid dbid, int index, bool urgent);
extern bool idgen_seq_slot_starting(int slot, uint32 generation);
extern void idgen_seq_slot_run(int slot, Latch *latch);
extern bool idgen_seq_slot_done(TimestampTz last, int idle_ms, bool *handed_over);
extern bool idgen_seq_slot_queue_begin(void);
extern int	idgen_seq_slot_queue_pop(void);
extern void idgen_seq_slot_rescan(void);
extern bool idgen_seq_slot_pending(bool *urgent);
extern bool idgen_seq_slot_purge_failed(int step, int sqlerrcode, uint64 *unlogged);
extern bool idgen_seq_slot_purge_succeeded(int step);

/* seq_cache.c: a segment request, as the sequencer handles it */
typedef enum IdgenSeqOutcome
{
	IDGEN_SEQ_RETRY,			/* the row was busy: ask again */
	IDGEN_SEQ_RESERVED,			/* count values reserved (0: end of range) */
	IDGEN_SEQ_FORGET			/* the key is gone, expired or not cached */
} IdgenSeqOutcome;

typedef struct IdgenSeqRequest
{
	int			index;			/* the entry */
	uint32		keygen;
	int64		size;			/* values wanted */
	char		key[IDGEN_SEQ_MAX_KEY + 1];
	IdgenSeqOutcome outcome;
	int64		first;			/* the reserved segment: its first value */
	int64		step;
	int64		min_value;
	int64		max_value;
	bool		cycle;
	bool		final;			/* it ends at the key's limit (no cycle) */
	int64		count;
} IdgenSeqRequest;

extern bool idgen_seq_cache_sequencer_attach(int slot, uint32 generation, Latch *latch);
extern bool idgen_seq_cache_sequencer_done(int idle_ms);
extern int	idgen_seq_cache_collect(IdgenSeqRequest *req, int max);
extern bool idgen_seq_cache_request_live(const IdgenSeqRequest *r);
extern int64 idgen_seq_cache_reserve(IdgenSeqRequest *r, const IdgenSeqRow *row);
extern void idgen_seq_cache_publish(IdgenSeqRequest *req, int n);
extern int	idgen_seq_cache_collect_used(IdgenSeqRequest *req, int max);

#endif							/* IDGEN_SEQUENCER_H */
