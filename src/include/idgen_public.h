/*-------------------------------------------------------------------------
 *
 * idgen_public.h
 *	  Public IDs (public.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_PUBLIC_H
#define IDGEN_PUBLIC_H

#include "idgen.h"

/* public.c: the server log's hook for key imports */
extern void idgen_public_init(void);

#endif							/* IDGEN_PUBLIC_H */
