/*-------------------------------------------------------------------------
 *
 * idgen_identity.h
 *	  A server's Snowflake identity leased from a registry: the leased
 *	  identity's shared state and idgen_identity() (identity.c), and the
 *	  "idgen registry" process that claims and renews it (registry.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_IDENTITY_H
#define IDGEN_IDENTITY_H

#include "idgen.h"
#include "idgen_clock.h"
#include "storage/spin.h"

/* settings */
extern int	idgen_identity_source;
extern char *idgen_registry;
extern int	idgen_registry_ttl_ms;

/* idgen.identity */
#define IDGEN_IDENTITY_FROM_SETTINGS	0
#define IDGEN_IDENTITY_FROM_REGISTRY	1
#define idgen_identity_from_registry	(idgen_identity_source == IDGEN_IDENTITY_FROM_REGISTRY)

/* Where a leased identity stands. */
typedef enum IdgenIdentityState
{
	IDGEN_IDENTITY_SETTINGS,	/* not leased: from the settings, unchecked */
	IDGEN_IDENTITY_STARTING,	/* no answer from the registry yet */
	IDGEN_IDENTITY_HELD,		/* leased (valid until valid_until) */
	IDGEN_IDENTITY_REFUSED,		/* the registry said no */
	IDGEN_IDENTITY_UNREACHABLE, /* the registry could not be asked */
	IDGEN_IDENTITY_STOPPED,		/* released at shutdown */
	IDGEN_IDENTITY_STANDBY		/* in recovery: the claim waits for promotion */
} IdgenIdentityState;

/*
 * The "idgen registry" process's state, for idgen_identity(): the area
 * "idgen identity", under 'mutex' (identity.c states the protocol).
 */
typedef struct IdgenRegistryStatus
{
	slock_t		mutex;
	int			pid;			/* the process's, 0 when not running */
	IdgenIdentityState state;
	int			datacenter_id;	/* of the lease; -1 before the first */
	int			worker_id;
	int64		token;			/* 0: none held */
	TimestampTz valid_until;	/* local: generation stops here */
	TimestampTz registry_expires_at;	/* the registry's */
	TimestampTz acquired_at;
	TimestampTz renewed_at;
	int64		skew_ms;		/* this clock minus the registry's */
	bool		has_skew;
	uint64		renewals;
	uint64		failures;
	char		message[256];	/* why it is not held, or empty */
} IdgenRegistryStatus;

/* identity.c */
extern IdgenRegistryStatus *idgen_registry_status;
extern bool idgen_identity_unchecked;
extern bool idgen_identity_is_leased(void);
pg_noreturn extern void idgen_identity_unchecked_error(void);
extern void idgen_identity_init(void);
extern int64 idgen_leased_next(pg_atomic_uint64 *word, const IdgenTickClock *clock, uint32 gene);

/* identity.c, for registry.c: the shared state */
extern void idgen_identity_set_state(IdgenIdentityState state, const char *fmt,...) pg_attribute_printf(2, 3);
extern void idgen_identity_publish(int datacenter_id, int worker_id, TimestampTz until, bool renewal);

/* registry.c */
extern void idgen_registry_init(void);

#endif							/* IDGEN_IDENTITY_H */
