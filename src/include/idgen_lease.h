/*-------------------------------------------------------------------------
 *
 * idgen_lease.h
 *	  Worker-id leases, what their files share.  From the bottom up (each
 *	  file uses only those above it in this list):
 *
 *	  lease_fence.c    the leases' shared area: the fences of dropped lease
 *	                   tables, the sessions seen gone, the last token
 *	  lease.c          the design (its header), settings, arguments,
 *	                   horizon reach
 *	  lease_lock.c     advisory locks on worker ids; session-bound leases
 *	  lease_acquire.c  idgen_worker_acquire, idgen_server_lease; the
 *	                   per-role limit
 *	  lease_renew.c    renew, release, reset_horizon, purge: by token or id
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_LEASE_H
#define IDGEN_LEASE_H

#include "idgen.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "idgen_layout.h"
#include "idgen_sql.h"

/* lease.c: settings */
extern int	idgen_worker_quarantine_ms;
extern int	idgen_worker_max_per_role;
extern void idgen_lease_init(void);

/*
 * lease.c: what the statements on the lease table share.  Each statement
 * sits in the file that binds it (lease_acquire.c, lease_renew.c,
 * lease_lock.c), with its parameters named.
 *
 * When a lease ended, for its id (see lease.c's header): its expiry, or
 * its release if that came later; NULL while a session-bound lease is
 * held.  GREATEST ignores a NULL: a session-bound lease has no expiry, and
 * a lease not released no release time.  'l' qualifies the columns.
 */
#define LEASE_END(l) "GREATEST(" l "released_at, " l "expires_at)"

/* Whether the lease ended at or before 'ts', a statement's parameter. */
#define LEASE_ENDED_BEFORE(ts) \
	"COALESCE((" LEASE_END("") " OPERATOR(pg_catalog.<=) " ts "), false)"

extern uint64 idgen_lease_run_id_tokens(IdgenSqlContext *cx, int q, Datum *args,
										int32 **ids, int64 **tokens);
extern Oid	idgen_lease_relid(const IdgenFunction *fn);

/* lease.c: the quarantine (see there) */
extern TimestampTz idgen_lease_free_before(TimestampTz now);
extern TimestampTz idgen_lease_rests_until(TimestampTz end);

/* lease.c: arguments */
extern Interval *idgen_lease_ttl_arg(FunctionCallInfo fcinfo, int n);
extern NullableDatum idgen_lease_horizon_arg(FunctionCallInfo fcinfo, int n);
extern int32 idgen_lease_worker_id_arg(FunctionCallInfo fcinfo);
extern int64 idgen_lease_token_arg(FunctionCallInfo fcinfo, int n);
extern text *idgen_lease_holder_arg(FunctionCallInfo fcinfo, int n, const char *name);
extern int32 idgen_lease_max_workers_arg(FunctionCallInfo fcinfo, int n);
extern int64 idgen_lease_id_arg(FunctionCallInfo fcinfo, int n);

/* lease.c: horizons */
extern int64 idgen_lease_horizon_reach(void);
extern void idgen_lease_check_horizon_reach(NullableDatum horizon, TimestampTz end);
extern void idgen_lease_check_horizon_holder(NullableDatum horizon, bool server_lease);

/* lease.c: a time as text in memory of its own */

/*
 * A lease's id: datacenter_id << worker_bits | worker_id, within the
 * layout's fields (0 to idgen_lease_space() - 1, which fits in an int32).
 */
static inline int64
idgen_lease_space(void)
{
	idgen_layout_check();
	return INT64CONST(1) << (idgen_layout.datacenter_bits + idgen_layout.worker_bits);
}

static inline int32
idgen_lease_worker_of(int32 id)
{
	return id & (int32) ((INT64CONST(1) << idgen_layout.worker_bits) - 1);
}

static inline int32
idgen_lease_datacenter_of(int32 id)
{
	return (int32) ((int64) id >> idgen_layout.worker_bits);
}

static inline int64
idgen_lease_id_of(int32 datacenter, int32 worker)
{
	return ((int64) datacenter << idgen_layout.worker_bits) | worker;
}

/* lease_fence.c: the leases' shared area */
extern void idgen_lease_fence_register(void);
extern void idgen_lease_fence_note(Oid relid, int32 id, TimestampTz end, NullableDatum horizon);
extern TimestampTz idgen_lease_fence_end(Oid relid, int32 id);
extern TimestampTz idgen_lease_session_gone_at(int32 id, int64 token, TimestampTz now);
extern int64 idgen_lease_next_token(int64 tick, int64 table_max);

/*
 * lease_lock.c: advisory locks on worker ids; session-bound leases.
 *
 * The tag of the lock on a worker id: (database, IDGEN_LEASE_LOCK_KEY, id,
 * IDGEN_LEASE_LOCK_CLASS).  The last field is "id" in ASCII (the SQL
 * advisory lock functions use 1 and 2, seq.c "sq"), the first key "idge",
 * the same for every lease table.  The idgen_worker_leases view
 * (sql/idgen--*.sql) finds the locks by both.  The lock on a role while its
 * leases are counted (idgen_lease_check_role_limit) has the class "ro".
 */
#define IDGEN_LEASE_LOCK_CLASS		0x6964
#define IDGEN_LEASE_LOCK_KEY		0x69646765
#define IDGEN_LEASE_ROLE_LOCK_CLASS	0x726f

static inline void
idgen_lease_locktag(LOCKTAG *tag, int32 id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, IDGEN_LEASE_LOCK_KEY, (uint32) id,
						 IDGEN_LEASE_LOCK_CLASS);
}

/*
 * Whether this session holds the lock on 'id' (at transaction or session
 * level; for a session-bound lease, whether its session still holds it).
 */
static inline bool
idgen_lease_id_locked(int32 id)
{
	LOCKTAG		tag;

	idgen_lease_locktag(&tag, id);
	return idgen_lock_held_by_me(&tag, ExclusiveLock);
}

extern bool idgen_lease_lock_id(int32 id, bool session, bool wait);
extern void idgen_lease_lock_role(Oid roleid);
extern bool idgen_lease_held_by_me(Oid relid, int32 id);
extern bool idgen_lease_holds_id(int32 id);
extern void idgen_lease_hold_for_session(Oid relid, int32 id);
extern void idgen_lease_release_for_session(Oid relid, int32 id);
extern TimestampTz idgen_lease_end_session(IdgenSqlContext *cx, Oid relid, int32 id,
										   int64 token, TimestampTz now);

/* lease_acquire.c: idgen.worker_max_per_role */
extern void idgen_lease_check_role_limit(IdgenSqlContext *cx, Oid relid, TimestampTz now);

#endif							/* IDGEN_LEASE_H */
