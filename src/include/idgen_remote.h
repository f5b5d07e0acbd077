/*-------------------------------------------------------------------------
 *
 * idgen_remote.h
 *	  One libpq connection to another server from a background process,
 *	  waited on with its latch (remote.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_REMOTE_H
#define IDGEN_REMOTE_H

#include "libpq-fe.h"
#include "utils/timestamp.h"

extern void idgen_remote_set_limits(int step_timeout_ms, TimestampTz round_deadline,
									bool exiting);
extern bool idgen_remote_connect(const char *conninfo, const char *application_name,
								 const char *what, char *err, size_t errlen);
extern bool idgen_remote_connected(void);
extern void idgen_remote_disconnect(void);
extern PGresult *idgen_remote_run(const char *sql, int nparams, const char *const *values,
								  char *err, size_t errlen);
extern const char *idgen_remote_result_message(const PGresult *res);
extern bool idgen_conninfo_valid(const char *conninfo, bool *parsed, char *why, size_t len);

#endif							/* IDGEN_REMOTE_H */
