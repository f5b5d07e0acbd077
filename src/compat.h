/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every difference between the PostgreSQL versions idgen builds against,
 *	  in one place, as macros and static inline functions.  idgen supports
 *	  PostgreSQL 15 and later; test/run.sh builds and tests it on 15, 17, 18
 *	  and 19 in every run, so each branch below is compiled by every run.
 *	  (16 is not tested: no current Debian release ships it.)
 *
 *	  idgen.h includes this header, so the macros are everywhere.  Two
 *	  wrappers are inline functions that need a server header idgen.h does
 *	  not include (access/heapam.h, executor/executor.h); they are defined
 *	  where that header was included before idgen.h (seq_row.c), as server
 *	  headers come first in every file.  It includes replication/origin.h
 *	  itself, for the type of a replication origin.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_COMPAT_H
#define IDGEN_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "idgen requires PostgreSQL 15 or later"
#endif

/*
 * PostgreSQL 18: a function that does not return is marked by the prefix
 * pg_noreturn (C11's _Noreturn); before, by the attribute
 * pg_attribute_noreturn() after its declarator, which GCC and Clang accept
 * as a prefix too.
 */
#if PG_VERSION_NUM < 180000
#define pg_noreturn pg_attribute_noreturn()
#endif

/* PostgreSQL 17: a backend's slot is MyProcNumber (0-based), was MyBackendId. */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define idgen_my_backend_number()	(MyProcNumber + 1)
#else
#include "storage/backendid.h"
#define idgen_my_backend_number()	(MyBackendId)
#endif

/*
 * PostgreSQL 19: get_database_name() is declared in utils/lsyscache.h; it
 * was in commands/dbcommands.h.
 */
#if PG_VERSION_NUM >= 190000
#include "utils/lsyscache.h"
#else
#include "commands/dbcommands.h"
#endif

/*
 * PostgreSQL 18: RelationGetPrimaryKeyIndex() takes whether a deferrable
 * primary key counts; before, it never did.
 */
#if PG_VERSION_NUM >= 180000
#define idgen_primary_key_index(rel)	RelationGetPrimaryKeyIndex((rel), false)
#else
#define idgen_primary_key_index(rel)	RelationGetPrimaryKeyIndex(rel)
#endif

/* PostgreSQL 17: LockHeldByMe() takes whether a stronger lock counts. */
#if PG_VERSION_NUM >= 170000
#define idgen_lock_held_by_me(tag, mode)	LockHeldByMe((tag), (mode), false)
#else
#define idgen_lock_held_by_me(tag, mode)	LockHeldByMe((tag), (mode))
#endif

/* PostgreSQL 16: DecodeDateTime() reports details of errors in 'extra'. */
#if PG_VERSION_NUM >= 160000
#define idgen_decode_datetime(field, ftype, nf, dtype, tm, fsec, tz) \
	DecodeDateTime((field), (ftype), (nf), (dtype), (tm), (fsec), (tz), \
				   &(DateTimeErrorExtra) {0})
#else
#define idgen_decode_datetime(field, ftype, nf, dtype, tm, fsec, tz) \
	DecodeDateTime((field), (ftype), (nf), (dtype), (tm), (fsec), (tz))
#endif

/*
 * PostgreSQL 18: index_beginscan() takes instrumentation (none here);
 * 19: and scan options (none: the scan finds a row to update).
 */
#if PG_VERSION_NUM >= 190000
#define idgen_index_beginscan(rel, index, snapshot, nkeys, norderbys) \
	index_beginscan((rel), (index), (snapshot), NULL, (nkeys), (norderbys), SO_NONE)
#elif PG_VERSION_NUM >= 180000
#define idgen_index_beginscan(rel, index, snapshot, nkeys, norderbys) \
	index_beginscan((rel), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define idgen_index_beginscan(rel, index, snapshot, nkeys, norderbys) \
	index_beginscan((rel), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * PostgreSQL 19: ShmemInitHash() takes one size, the number of entries; a
 * shared hash never grows, so before 19 both sizes are that number.
 */
#if PG_VERSION_NUM >= 190000
#define idgen_shmem_init_hash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (info), (flags))
#else
#define idgen_shmem_init_hash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (nelems), (info), (flags))
#endif

/*
 * PostgreSQL 19: a signal handler is given the signal's information too
 * (SIGNAL_ARGS has a second parameter, pg_siginfo); a handler that passes
 * its signal on to another (bgworker.c, to die()) passes both.
 */
#if PG_VERSION_NUM >= 190000
#define IDGEN_SIGNAL_ARGS_PASS	postgres_signal_arg, pg_siginfo
#else
#define IDGEN_SIGNAL_ARGS_PASS	postgres_signal_arg
#endif

/*
 * PostgreSQL 19: a replication origin's id is a ReplOriginId, and the
 * origin of the changes a process replays is replorigin_xact_state.origin;
 * before, a RepOriginId in replorigin_session_origin.  Read by the
 * active-active files (idgen_active.h).
 */
#include "replication/origin.h"
#if PG_VERSION_NUM >= 190000
typedef ReplOriginId IdgenOriginId;
#define IDGEN_INVALID_ORIGIN	InvalidReplOriginId
#define idgen_replayed_origin()	(replorigin_xact_state.origin)
#else
typedef RepOriginId IdgenOriginId;
#define IDGEN_INVALID_ORIGIN	InvalidRepOriginId
#define idgen_replayed_origin()	(replorigin_session_origin)
#endif

#endif							/* IDGEN_COMPAT_H */

/*
 * PostgreSQL 16: simple_heap_update() says which indexes need new entries
 * (TU_UpdateIndexes: none, all, or only summarizing ones); before, a tuple
 * that is not heap-only needs them all.  Returns whether it needs entries,
 * and sets whether only in summarizing indexes.
 */
#if defined(HEAPAM_H) && !defined(IDGEN_COMPAT_HEAPAM)
#define IDGEN_COMPAT_HEAPAM
static inline bool
idgen_simple_heap_update(Relation rel, ItemPointer otid, HeapTuple tup, bool *only_summarizing)
{
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;

	simple_heap_update(rel, otid, tup, &update_indexes);
	*only_summarizing = (update_indexes == TU_Summarizing);
	return update_indexes != TU_None;
#else
	simple_heap_update(rel, otid, tup);
	*only_summarizing = false;
	return !HeapTupleIsHeapOnly(tup);
#endif
}
#endif

/*
 * PostgreSQL 16: ExecInsertIndexTuples() can insert into summarizing
 * indexes only; 19: its booleans became flags, and the slot follows the
 * executor state.  Entries for a new or updated row, no arbiter indexes.
 */
#if defined(EXECUTOR_H) && !defined(IDGEN_COMPAT_EXECUTOR)
#define IDGEN_COMPAT_EXECUTOR
static inline void
idgen_exec_insert_index_tuples(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate,
							   bool only_summarizing)
{
#if PG_VERSION_NUM >= 190000
	(void) ExecInsertIndexTuples(rri, estate, only_summarizing ? EIIT_ONLY_SUMMARIZING : 0,
								 slot, NIL, NULL);
#elif PG_VERSION_NUM >= 160000
	(void) ExecInsertIndexTuples(rri, slot, estate, false, false, NULL, NIL, only_summarizing);
#else
	Assert(!only_summarizing);
	(void) ExecInsertIndexTuples(rri, slot, estate, false, false, NULL, NIL);
#endif
}
#endif
