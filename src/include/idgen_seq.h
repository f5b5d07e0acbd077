/*-------------------------------------------------------------------------
 *
 * idgen_seq.h
 *	  Per-key sequences, bottom to top: their settings (seq_settings.c); a
 *	  key's row, the limit rule and bounded waits (seq_row.c); the keys a
 *	  transaction holds (seq_held.c); the sequencers' slots (seq_slots.c);
 *	  keys per role (seq_quota.c); the cached segments in shared memory
 *	  (seq_cache.c); next and current (seq.c); the administrative functions
 *	  (seq_admin.c); and the processes (sequencer.c and
 *	  sequencer_launcher.c).  A file references only files before it in
 *	  this list.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_SEQ_H
#define IDGEN_SEQ_H

#include "idgen.h"
#include "datatype/timestamp.h"
#include "executor/tuptable.h"
#include "port/atomics.h"
#include "utils/relcache.h"

/* seq_settings.c */
extern int	idgen_purge_interval_s;
extern double idgen_seq_default_ttl;
extern int	idgen_seq_max_keys_per_role;
extern int	idgen_seq_cache_keys;
extern int	idgen_max_sequencers;
extern int	idgen_sequencer_idle_s;
extern int	idgen_seq_cache_wait_ms;
extern double idgen_seq_cache_prefetch;
extern void idgen_seq_settings_init(void);

#define IDGEN_SEQ_MAX_KEY			256 /* longest key, in bytes */
#define IDGEN_SEQ_MAX_CACHE			1000000 /* largest cache setting */

/*
 * seq_row.c: a key's row in the table idgen_seq, the limit rule, direct
 * access to the row, and the administrative functions' bounded waits
 */
/*
 * The table's columns, in its order (the install script's CREATE TABLE):
 * the only list of them, each with its number, its name and its type.
 * The key comes first; a column added later goes at the end.  From it
 * come the column numbers (SEQ_COL_*), their count, the column list, the
 * parameters and the types of the statements that read or write whole
 * rows, and the types and names idgen_seq_open_table_oid() checks the
 * table against; seq_row.c converts a row's values, and does not compile
 * until it converts each column.
 */
#define IDGEN_SEQ_COLUMNS(FIRST, NEXT) \
	FIRST(1, KEY, key, TEXTOID) \
	NEXT(2, STEP, step, INT8OID) \
	NEXT(3, START, start, INT8OID) \
	NEXT(4, MIN_VALUE, min_value, INT8OID) \
	NEXT(5, MAX_VALUE, max_value, INT8OID) \
	NEXT(6, CYCLE, cycle, BOOLOID) \
	NEXT(7, TTL, ttl, INTERVALOID) \
	NEXT(8, LAST_USED, last_used, TIMESTAMPTZOID) \
	NEXT(9, CACHE, cache, INT4OID) \
	NEXT(10, CREATED_BY, created_by, OIDOID) \
	NEXT(11, CALLED, called, BOOLOID) \
	NEXT(12, VALUE, value, INT8OID)

#define SEQ_COLUMN_NUMBER_(n, id, name, type)	SEQ_COL_##id = (n),
#define SEQ_COLUMN_ONE_(n, id, name, type)		+ 1
#define SEQ_COLUMN_FIRST_NAME_(n, id, name, type)	#name
#define SEQ_COLUMN_NEXT_NAME_(n, id, name, type)	", " #name
#define SEQ_COLUMN_FIRST_PARAM_(n, id, name, type)	"$" #n
#define SEQ_COLUMN_NEXT_PARAM_(n, id, name, type)	", $" #n
#define SEQ_COLUMN_TYPE_(n, id, name, type)		[(n) - 1] = (type),
#define SEQ_COLUMN_NAME_AT_(n, id, name, type)	[(n) - 1] = #name,

enum
{
	IDGEN_SEQ_COLUMNS(SEQ_COLUMN_NUMBER_, SEQ_COLUMN_NUMBER_)
};

#define SEQ_NUM_COLS	(0 IDGEN_SEQ_COLUMNS(SEQ_COLUMN_ONE_, SEQ_COLUMN_ONE_))

/* "key, step, ...": the columns in a statement */
#define IDGEN_SEQ_COLUMN_LIST \
	IDGEN_SEQ_COLUMNS(SEQ_COLUMN_FIRST_NAME_, SEQ_COLUMN_NEXT_NAME_)
/* "$1, $2, ...": one parameter per column, in a statement that writes a row */
#define IDGEN_SEQ_COLUMN_PARAMS \
	IDGEN_SEQ_COLUMNS(SEQ_COLUMN_FIRST_PARAM_, SEQ_COLUMN_NEXT_PARAM_)

/*
 * Their types and names, by column number less one: an array initializer.
 * A number given twice is an initializer overridden, which -Wextra reports.
 */
#define IDGEN_SEQ_COLUMN_TYPES \
	{IDGEN_SEQ_COLUMNS(SEQ_COLUMN_TYPE_, SEQ_COLUMN_TYPE_)}
#define IDGEN_SEQ_COLUMN_NAMES \
	{IDGEN_SEQ_COLUMNS(SEQ_COLUMN_NAME_AT_, SEQ_COLUMN_NAME_AT_)}

/*
 * A key's row, as locked or read.  The options and state of a PostgreSQL
 * sequence: 'value' is the last value handed out when 'called' (is_called),
 * else the next one; min_value <= value <= max_value always.
 */
typedef struct IdgenSeqRow
{
	int64		value;
	bool		called;
	int64		step;			/* not 0; negative: descending */
	int64		start;
	int64		min_value;
	int64		max_value;
	bool		cycle;			/* past a limit: to the other one; else 2200H */
	bool		has_ttl;
	Interval	ttl;
	TimestampTz last_used;
	int32		cache;			/* > 0: cached mode, minimum segment size */
	Oid			created_by;		/* the role that created the key */
} IdgenSeqRow;


struct IdgenFunction;
typedef struct IdgenSeqTable
{
	Relation	rel;
	Relation	idx;
	TupleTableSlot *slot;		/* the locked row */
	bool		bounded;		/* an administrative function's waits (seq.c) */
	TransactionId blocker;		/* when bounded: whom the last wait was for */
} IdgenSeqTable;

/* What idgen_seq_lock_row() found. */
typedef enum IdgenSeqRowFound
{
	SEQ_ROW_NONE,				/* the key has no row */
	SEQ_ROW_LOCKED,				/* locked, in t->slot and 'row' */
	SEQ_ROW_CACHED				/* a live cached key, not locked, in 'row' */
} IdgenSeqRowFound;

extern bool idgen_seq_ttl_passed(const IdgenSeqRow *row, TimestampTz now);
extern uint64 idgen_seq_values_to_limit(int64 first, int64 step, int64 min_value, int64 max_value);
extern int64 idgen_seq_value_at(int64 first, int64 step, int64 min_value, int64 max_value,
								uint64 to_limit, uint64 off);
extern int64 idgen_seq_fit(int64 first, int64 step, int64 min_value, int64 max_value, bool cycle,
						   int64 want, bool *final);
extern bool idgen_seq_advance(const IdgenSeqRow *row, int64 v, int64 *next);
pg_noreturn extern void idgen_seq_limit_reached(const char *key, int64 step, int64 limit,
												int count);
pg_noreturn extern void idgen_seq_batch_set_back(const char *key, int64 after);
extern void idgen_seq_row_defaults(IdgenSeqRow *row, TimestampTz now);
extern void idgen_seq_take_default_ttl(IdgenSeqRow *row);
extern void idgen_seq_row_from_values(IdgenSeqRow *row, const Datum *values, const bool *isnull);
extern void idgen_seq_row_to_values(IdgenSeqRow *row, Datum *values, bool *isnull);
extern void idgen_seq_open_table(const struct IdgenFunction *fn, IdgenSeqTable *t);
extern void idgen_seq_open_table_oid(Oid relid, IdgenSeqTable *t);
extern void idgen_seq_close_table(IdgenSeqTable *t);
extern IdgenSeqRowFound idgen_seq_lock_row(IdgenSeqTable *t, text *key, IdgenSeqRow *row,
										   bool stop_if_cached);
extern bool idgen_seq_find_held_row(IdgenSeqTable *t, text *key);
extern void idgen_seq_write_row(IdgenSeqTable *t, IdgenSeqRow *row);
extern void idgen_seq_delete_row(IdgenSeqTable *t);
extern void idgen_seq_run_bounded(text *key, IdgenSeqTable *t, void (*step) (void *arg), void *arg);
pg_noreturn extern void idgen_seq_cache_timed_out(const char *key);


/* seq_held.c: the keys this transaction holds, advanced in backend memory */
typedef struct IdgenSeqHeldTag
{
	Oid			relid;			/* the table idgen_seq */
	int			keylen;
	char		key[IDGEN_SEQ_MAX_KEY]; /* not terminated */
} IdgenSeqHeldTag;

typedef struct IdgenSeqHeld
{
	IdgenSeqHeldTag tag;		/* hash key: first */
	IdgenSeqRow row;			/* the key's row as this transaction sees it */
	bool		present;		/* false: the transaction deleted the row */
	bool		dirty;			/* the table lags 'row' */
	int			lock_level;		/* the subtransaction level that locked it */
	int			nsaved;			/* states saved by subtransaction levels */
	int			maxsaved;
	struct HeldState *saved;
} IdgenSeqHeld;

extern void idgen_seq_held_init(void);
extern IdgenSeqHeld *idgen_seq_held_find(Oid relid, const char *key, int keylen);
extern IdgenSeqRow *idgen_seq_held_change(IdgenSeqHeld *h);
extern void idgen_seq_held_written(Oid relid, const char *key, int keylen,
								   const IdgenSeqRow *row, bool create);
extern void idgen_seq_held_deleted(Oid relid, const char *key, int keylen);
extern void idgen_seq_held_write_all(void);


/*
 * seq_slots.c: the sequencers' slots, as the files that want a sequencer
 * see them (the handshake of the processes is in idgen_sequencer.h)
 */
#define IDGEN_MAX_SEQUENCERS		64
#define IDGEN_MAX_WAITING_SHOWN		64
extern void idgen_seq_slots_init(void);
extern bool idgen_seq_slot_available(void);
extern char *idgen_seq_slot_why_not(bool *for_now);
extern void idgen_seq_slot_want(void);
extern void idgen_seq_slots_report(int *running, int *max, int64 *refused);
extern int	idgen_seq_slot_waiting(Oid *dbids, int max, TimestampTz *since);

/* seq_quota.c: keys per role */
extern void idgen_seq_quota_init(void);
extern void idgen_seq_check_keys_per_role(IdgenSeqTable *t, text *key, TimestampTz now);
extern void idgen_seq_created_by_admin(void);

/* seq_cache.c: cached per-key sequences, as backends use them */
typedef struct IdgenSeqCacheRow
{
	char		key[IDGEN_SEQ_MAX_KEY + 1];
	int32		cache;
	int64		segment_size;
	int64		served;
	int64		fetches;
	int64		waits;
	bool		has_segment;
	int64		segment_first;
	int64		segment_last;
	int64		segment_left;
	bool		next_ready;
} IdgenSeqCacheRow;

extern void idgen_seq_cache_init(void);
extern int	idgen_seq_cache_next(const char *key, int keylen, int count, int64 *out,
								 const int64 *after, Oid relid);
extern bool idgen_seq_cache_claim(pg_atomic_uint64 *cursor, uint64 *w, uint32 take);
extern void idgen_seq_cache_install(const char *key, int keylen, int32 cache_size, bool has_ttl,
									Oid relid);
extern void idgen_seq_cache_invalidate(const char *key, int keylen);
extern void idgen_seq_cache_report(void (*emit) (void *arg, const IdgenSeqCacheRow *row), void *arg,
								   Oid relid);

/*
 * seq.c: next and current, and how every function changes a key
 * (idgen_seq_apply, used by seq_admin.c too)
 */
extern void idgen_seq_init(void);

/*
 * What an operation does to a key's row: change 'row' (which holds the
 * defaults if the key is new or expired) and return whether to write it.
 */
typedef bool (*IdgenSeqOp) (IdgenSeqRow *row, bool existed, TimestampTz now, void *arg);

/* What idgen_seq_apply() found. */
typedef enum IdgenSeqApplied
{
	SEQ_APPLIED_NEW,			/* the key was new (or had expired) */
	SEQ_APPLIED_EXISTED,		/* the key existed */
	SEQ_APPLIED_CACHED			/* a cached key: nothing done, entry installed */
} IdgenSeqApplied;

extern text *idgen_seq_key_arg(FunctionCallInfo fcinfo);
extern Oid	idgen_seq_relid(FunctionCallInfo fcinfo);
extern IdgenSeqApplied idgen_seq_apply(FunctionCallInfo fcinfo, text *key, IdgenSeqOp op,
									   void *arg, bool next);

/*
 * sequencer.c: a duty of the idgen sequencer in each database with idgen,
 * at every purge: one of the extension's SQL functions, returning bigint.
 * The list is declared at the top (idgen.c), above the functions' layers.
 */
typedef struct IdgenSequencerDuty
{
	const char *function;		/* its name, IDGEN_SQL_NAME() */
	bool		counts_deleted; /* its count is of rows deleted */
}			IdgenSequencerDuty;

extern void idgen_sequencer_set_duties(const IdgenSequencerDuty * list, int count);

/* sequencer_launcher.c: registers the launcher, and the slots' area */
extern void idgen_sequencer_init(void);

/* seq_node.c: values interleaved by node (active-active) */
extern void idgen_seq_node_view(const IdgenSeqRow *row, const char *key, IdgenSeqRow *view);

#endif							/* IDGEN_SEQ_H */
