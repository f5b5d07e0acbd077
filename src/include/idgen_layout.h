/*-------------------------------------------------------------------------
 *
 * idgen_layout.h
 *	  The Snowflake bit layout (layout.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_LAYOUT_H
#define IDGEN_LAYOUT_H

#include "idgen.h"

/* ----------
 * The Snowflake layout, most significant bit first:
 *
 *	  0 | timestamp | datacenter | worker | sequence | gene
 *
 * Widths come from the idgen.*_bits settings and must sum to 63.  The
 * layout is computed once, when the library is loaded, and never changes
 * while the server runs (all layout settings are PGC_POSTMASTER).
 * ----------
 */
typedef struct IdgenLayout
{
	/* settings as given */
	int			timestamp_bits;
	int			datacenter_bits;
	int			worker_bits;
	int			sequence_bits;
	int			gene_bits;
	int			datacenter_id;
	int			worker_id;
	TimestampTz epoch;			/* time zero of the timestamp field */

	/* derived, valid only when 'valid' is true */
	int			gene_shift;		/* always 0 */
	int			sequence_shift;
	int			worker_shift;
	int			datacenter_shift;
	int			timestamp_shift;
	uint64		timestamp_max;	/* largest value of the timestamp field */
	uint64		sequence_mask;
	uint64		gene_mask;
	uint64		identity;		/* datacenter and worker fields, in place */
	TimestampTz end_of_time;	/* first instant the field cannot encode */

	/* validation result */
	bool		valid;
	char		error[256];		/* why the layout is invalid, one sentence */
} IdgenLayout;

/* layout.c */
/* a / b rounded towards minus infinity (b > 0), as floor() does. */
static inline int64
idgen_floor_div(int64 a, int64 b)
{
	Assert(b > 0);
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

extern IdgenLayout idgen_layout;
extern void idgen_layout_init(void);
extern void idgen_layout_compute(IdgenLayout *layout, TimestampTz now);
extern void idgen_layout_report(int elevel);
extern void idgen_layout_check(void);
extern void idgen_layout_fingerprint(const IdgenLayout *layout, char *buf, size_t len);
extern const char *const idgen_layout_fingerprint_sql;
extern void idgen_layout_warn_default_identity(void);
extern int64 idgen_snowflake_min_at(TimestampTz ts);
extern int64 idgen_compose(const IdgenLayout *layout, uint64 tick, uint32 gene);
extern int64 idgen_compose_identity(const IdgenLayout *layout, uint64 tick, uint32 gene,
									uint64 identity);

/* layout.c: the identity codec, and the lease word (identity.c) */
extern uint64 idgen_identity_encode(const IdgenLayout *layout, int datacenter_id, int worker_id);
extern void idgen_identity_decode(const IdgenLayout *layout, uint64 id,
								  int *datacenter_id, int *worker_id);
extern uint64 idgen_lease_word(const IdgenLayout *layout, TimestampTz until,
							   int datacenter_id, int worker_id);
extern int64 idgen_identity_number(const IdgenLayout *layout, int datacenter_id, int worker_id);
extern void idgen_identity_of_number(const IdgenLayout *layout, int64 number,
									 int *datacenter_id, int *worker_id);
extern bool idgen_lease_word_covers(const IdgenLayout *layout, uint64 w, uint64 ms);
extern uint64 idgen_lease_word_identity(const IdgenLayout *layout, uint64 w);

#endif							/* IDGEN_LAYOUT_H */
