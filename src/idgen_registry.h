/*-------------------------------------------------------------------------
 *
 * idgen_registry.h
 *	  A server's Snowflake identity leased from a registry (registry.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_REGISTRY_H
#define IDGEN_REGISTRY_H

#include "idgen_shmem.h"

/* settings */
extern int	idgen_identity_source;
extern char *idgen_registry;
extern int	idgen_registry_ttl_ms;

/* idgen.identity */
#define IDGEN_IDENTITY_FROM_SETTINGS	0
#define IDGEN_IDENTITY_FROM_REGISTRY	1
#define idgen_identity_from_registry	(idgen_identity_source == IDGEN_IDENTITY_FROM_REGISTRY)

/* registry.c */
extern void idgen_registry_shmem_init(IdgenShared *s);
extern void idgen_registry_init(void);
extern int64 idgen_leased_next(pg_atomic_uint64 *word, const IdgenTickClock *clock, uint32 gene);

/* registry.c, for registry_worker.c: the shared state */
extern void idgen_registry_set_state(IdgenIdentityState state, const char *fmt,...) pg_attribute_printf(2, 3);
extern void idgen_registry_publish(int datacenter_id, int worker_id, TimestampTz until, bool renewal);

/* registry_worker.c */
extern void idgen_registry_worker_register(void);

#endif							/* IDGEN_REGISTRY_H */
