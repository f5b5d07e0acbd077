/*-------------------------------------------------------------------------
 *
 * idgen_generators.h
 *	  The generators: Snowflake IDs (snowflake.c) and UUIDv7 (uuid7.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_GENERATORS_H
#define IDGEN_GENERATORS_H

#include "idgen.h"

/* snowflake.c, uuid7.c: the session's last IDs, forgotten by DISCARD */
extern void idgen_snowflake_forget_last(void);
extern void idgen_uuid7_forget_last(void);

/* uuid7.c */
extern int64 idgen_uuid7_next_tick(const char *funcname);

#endif							/* IDGEN_GENERATORS_H */
