/*-------------------------------------------------------------------------
 *
 * idgen_active.h
 *	  Several primaries that replicate to each other (active-active): the
 *	  node settings, the clashes that stop this server (active.c), the start
 *	  gate (active_gate.c) and the identity claims (active_claim.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_ACTIVE_H
#define IDGEN_ACTIVE_H

#include "idgen.h"
#include "access/xlog.h"
#include "storage/spin.h"

#include "idgen_sql.h"

/* active.c: the settings, and what stops this server */
extern int	idgen_active_nodes;
extern int	idgen_active_node;
extern void idgen_active_init(void);
extern void idgen_active_node_check(void);
extern void idgen_node_clash_check(void);
pg_noreturn extern void idgen_identity_clash_error(void);
extern char *idgen_identity_clash_text(void);

/* active.c, for the claims (active_claim.c): a claim seen that clashes */
extern const char *idgen_active_instance_name(void);
extern void idgen_active_identity_claimed(int64 other_sysid, const char *instance,
										  TimestampTz other_announced_at);
extern void idgen_active_copy_found(const char *instance, TimestampTz other_announced_at,
									const char *subscription);
extern void idgen_active_node_claimed(int64 other_sysid, int nodes, int node, const char *instance,
									  TimestampTz other_announced_at);

/* The system identifier as a bigint column holds it. */
static inline int64
idgen_active_own_sysid(void)
{
	return (int64) GetSystemIdentifier();
}

/*
 * The start gate (active_gate.c; see "Starting" there): for each database
 * checked since the server started, whether it generates, and the
 * replication origins of the subscriptions it still waits for and has
 * heard from.  An origin is kept by its name, which names its subscription
 * ("pg_<oid>"), not by its number, which the next origin made takes once
 * the subscription is dropped.  It lives in the area of active.c, "idgen active",
 * which makes it at start: 64 databases of 2 x 64 names, 512 kB.
 */
#define GATE_DATABASES_KEPT		64
#define GATE_WAITING_KEPT		64

typedef struct GateDatabase
{
	Oid			dbid;			/* InvalidOid: unused */
	bool		open;			/* it generates (never closes again) */
	int			nlisted;		/* subscriptions at the last check */
	int			nwaiting;		/* of them, not heard from yet */
	NameData	waiting[GATE_WAITING_KEPT]; /* their origins' names */
	int			nheard;			/* origins heard from since the start */
	NameData	heard[GATE_WAITING_KEPT];	/* by name */
} GateDatabase;

typedef struct IdgenGate
{
	slock_t		mutex;
	GateDatabase db[GATE_DATABASES_KEPT];
} IdgenGate;

extern IdgenGate *idgen_active_gate_state;

/* active_gate.c */
extern bool idgen_active_gate_passed;
extern void idgen_active_gate_check(void);
extern void idgen_active_gate_list(const IdgenFunction *fn, bool calling);
extern void idgen_active_gate_heard(void);
extern char *idgen_active_origin_subscription(IdgenOriginId origin);

/*
 * Raise an error unless this database may hand out Snowflake IDs and
 * per-key values in active-active: a test of a backend-local flag once it
 * may.
 */
static inline void
idgen_active_gate(void)
{
	if (unlikely(!idgen_active_gate_passed))
		idgen_active_gate_check();
}

#endif							/* IDGEN_ACTIVE_H */
