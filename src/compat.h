/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every difference between the PostgreSQL versions idgen builds against,
 *	  in one place, as macros and static inline functions.  The code targets
 *	  PostgreSQL 15 (the version CI builds and tests); the branches for
 *	  13-14 and 16-18 follow those versions' headers and keep them possible,
 *	  but are not built by CI.
 *
 *	  A file that uses one of these includes this header after the server
 *	  headers the wrapped function needs: the macros expand only at the call
 *	  site, and the two inline functions are defined only where the headers
 *	  they need (access/heapam.h, funcapi.h) were included.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_COMPAT_H
#define IDGEN_COMPAT_H

/* PostgreSQL 15: shmem_request_hook; before, requests are made in _PG_init. */
#if PG_VERSION_NUM >= 150000
#define IDGEN_HAVE_SHMEM_REQUEST_HOOK 1
#endif

/* PostgreSQL 15: MarkGUCPrefixReserved replaced EmitWarningsOnPlaceholders. */
#if PG_VERSION_NUM >= 150000
#define idgen_mark_guc_prefix_reserved(prefix) MarkGUCPrefixReserved(prefix)
#else
#define idgen_mark_guc_prefix_reserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* PostgreSQL 15: the pg_prng generator; before, random(). */
#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#define idgen_random_u32()	pg_prng_uint32(&pg_global_prng_state)
#define idgen_random_below(n) \
	((uint32) pg_prng_uint64_range(&pg_global_prng_state, 0, (uint64) (n) - 1))
#else
#define idgen_random_u32()	((uint32) random())
#define idgen_random_below(n) ((uint32) (random() % (n)))
#endif

/*
 * PostgreSQL 15: MaxBackends is computed before shmem_request_hook; before,
 * it is not yet known when _PG_init runs, so it is derived the same way.
 */
#if PG_VERSION_NUM >= 150000
#define idgen_max_backends()	MaxBackends
#else
#define idgen_max_backends() \
	(MaxConnections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders)
#endif

/* PostgreSQL 17: a backend's slot is MyProcNumber (0-based), was MyBackendId. */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define idgen_my_backend_number()	(MyProcNumber + 1)
#else
#include "storage/backendid.h"
#define idgen_my_backend_number()	(MyBackendId)
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

/* PostgreSQL 18: index_beginscan() takes instrumentation. */
#if PG_VERSION_NUM >= 180000
#define idgen_index_beginscan(rel, index, snapshot, nkeys, norderbys) \
	index_beginscan((rel), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define idgen_index_beginscan(rel, index, snapshot, nkeys, norderbys) \
	index_beginscan((rel), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * PostgreSQL 16: simple_heap_update() says which indexes need new entries
 * (TU_UpdateIndexes: none, all, or only summarizing ones); before, a tuple
 * that is not heap-only needs them all.  Whether it needs entries, and
 * whether only in summarizing indexes.
 */
#ifdef HEAPAM_H					/* for files that include access/heapam.h */
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

/* PostgreSQL 14 and 16: ExecInsertIndexTuples() gained arguments. */
#if PG_VERSION_NUM >= 160000
#define idgen_exec_insert_index_tuples(rri, slot, estate, only_summarizing) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, (only_summarizing))
#elif PG_VERSION_NUM >= 140000
#define idgen_exec_insert_index_tuples(rri, slot, estate, only_summarizing) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#else
#define idgen_exec_insert_index_tuples(rri, slot, estate, only_summarizing) \
	((estate)->es_result_relation_info = (rri), \
	 ExecInsertIndexTuples((slot), (estate), false, NULL, NIL))
#endif

/*
 * PostgreSQL 15: InitMaterializedSRF() sets up a materialized set-returning
 * function; before, it is done by hand as it does.
 */
#ifdef FUNCAPI_H					/* for files that include funcapi.h */
static inline void
idgen_init_materialized_srf(FunctionCallInfo fcinfo)
{
#if PG_VERSION_NUM >= 150000
	InitMaterializedSRF(fcinfo, 0);
#else
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	tupdesc;
	MemoryContext old;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	rsinfo->setDesc = CreateTupleDescCopy(tupdesc);
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	MemoryContextSwitchTo(old);
#endif
}
#endif

#endif							/* IDGEN_COMPAT_H */
