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

/* settings (defined in idgen.c) */
extern int	idgen_identity_source;
extern char *idgen_registry;
extern int	idgen_registry_ttl_ms;
extern uint64 idgen_postmaster_nonce;

/* idgen.identity */
#define IDGEN_IDENTITY_FROM_SETTINGS	0
#define IDGEN_IDENTITY_FROM_REGISTRY	1
#define idgen_identity_from_registry	(idgen_identity_source == IDGEN_IDENTITY_FROM_REGISTRY)

/* registry.c */
extern void idgen_registry_shmem_init(IdgenShared *s);
extern void idgen_registry_register(void);
extern int64 idgen_leased_next(pg_atomic_uint64 *word, const IdgenTickClock *clock, uint32 gene);

#endif							/* IDGEN_REGISTRY_H */
