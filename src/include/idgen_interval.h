/*-------------------------------------------------------------------------
 *
 * idgen_interval.h
 *	  Times and ttls that never fail later (interval.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_INTERVAL_H
#define IDGEN_INTERVAL_H

#include "idgen.h"
#include "datatype/timestamp.h"

/* interval.c */
extern char *idgen_time_text(TimestampTz t);
extern bool idgen_timestamptz_add(TimestampTz ts, const Interval *span, TimestampTz *result);
extern void idgen_ttl_check(const Interval *ttl);

#endif							/* IDGEN_INTERVAL_H */
