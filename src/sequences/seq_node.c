/*-------------------------------------------------------------------------
 *
 * seq_node.c
 *	  Per-key sequences in active-active: the values of a key dealt out by
 *	  node (idgen.active_nodes and idgen.active_node, active.c).
 *
 * Each primary advances its own copy of a key's row, and logical
 * replication merges the copies (the replica trigger on idgen_seq keeps the
 * value further on in the key's direction).  Two primaries that advanced
 * one counter apart, concurrently or during a lag or a partition, would
 * hand out the same values.  So with idgen.active_nodes = N > 1, the values a
 * key can take are dealt out to N nodes: node r (idgen.active_node) hands out
 * only the values v with
 *
 *		v = start + (k * N + r) * step		for some integer k,
 *
 * that is, v congruent to start + r * step modulo N * |step|.  No two nodes
 * share a class, so no value is handed out by two nodes, whatever reaches
 * which node when; no coordination is needed.  Each node goes on from the
 * value its row holds, whoever wrote it (its own last value, or a greater
 * one merged from another node): the next value is the first of its own
 * class past it.  The merge rule stays "further on wins", and it respects
 * the classes because a node never takes a value from the row, only a
 * position to go on from.
 *
 * The rounding happens where a key is advanced, on a copy of the row
 * (idgen_seq_node_view): op_next in seq.c for transactional keys, and
 * idgen_seq_cache_reserve in seq_cache.c for cached ones' segments.  The
 * row written back keeps its options as they were; its value is the
 * node's last value handed out (or reserved).  Nothing else changes: with
 * N = 1, the default, the view is the row itself.
 *
 * Both settings are fixed at server start: values already handed out (and
 * cached segments already reserved) belong to the classes of the settings
 * they were made under, and a change of N moves every class.  N is chosen
 * once, at least the number of nodes there will ever be.
 *
 * A key that cycles goes on from its other limit, outside the node's class:
 * cycling means values come again, and across nodes they may come from
 * another node.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"

#include "idgen.h"
#include "idgen_active.h"
#include "idgen_seq.h"

/* x modulo m, in 0 .. m - 1, for m > 0 */
static uint64
floor_mod(int64 x, uint64 m)
{
	if (x >= 0)
		return (uint64) x % m;
	/* -(x + 1) + 1 is |x| without overflow at PG_INT64_MIN */
	return (m - ((uint64) -(x + 1) + 1) % m) % m;
}

/*
 * The copy of 'row' this node advances: its step N times the key's, and its
 * position (value, called) the first value of the node's class after the
 * row's value (at or after it, if nothing was handed out), as a value not
 * yet handed out.  At the key's limit, the row's own position with the
 * node's step, whose next value passes the limit (or cycles).
 */
void
idgen_seq_node_view(const IdgenSeqRow *row, const char *key, IdgenSeqRow *view)
{
	uint64		astep;
	uint64		m;
	uint64		cls;
	int64		from;
	int64		next;
	uint64		delta;
	bool		past;

	*view = *row;
	if (idgen_active_nodes <= 1)
		return;
	idgen_active_node_check();

	astep = row->step > 0 ? (uint64) row->step : (uint64) -(row->step + 1) + 1;
	if (astep > (uint64) PG_INT64_MAX / (uint64) idgen_active_nodes)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("step of sequence key \"%s\" is too large for idgen.active_nodes (%d)",
						key, idgen_active_nodes),
				 errdetail("Each node counts step times idgen.active_nodes, which must fit in bigint."),
				 errhint("Configure a smaller step with idgen_seq_configure().")));
	m = astep * (uint64) idgen_active_nodes;
	view->step = row->step > 0 ? (int64) m : -(int64) m;

	/* the node's class: start + r * step, modulo m (|r * step| < m) */
	cls = (floor_mod(row->start, m) +
		   floor_mod((int64) idgen_active_node * row->step, m)) % m;

	/* the first candidate: the row's value, or the one after it */
	from = row->value;
	if (row->called &&
		(row->step > 0 ? pg_add_s64_overflow(from, 1, &from) :
		 pg_sub_s64_overflow(from, 1, &from)))
		return;					/* at bigint's end: the view passes the limit */

	if (row->step > 0)
	{
		delta = (cls + m - floor_mod(from, m)) % m;
		past = pg_add_s64_overflow(from, (int64) delta, &next) || next > row->max_value;
	}
	else
	{
		delta = (floor_mod(from, m) + m - cls) % m;
		past = pg_sub_s64_overflow(from, (int64) delta, &next) || next < row->min_value;
	}
	if (past)
	{
		/*
		 * No value of the class is left before the limit: from the row's
		 * value, called, the node's next step passes it (the limit's error,
		 * or a cycle).  A row not called yet is at a value of no use here;
		 * its limit stands in for it.
		 */
		if (!row->called)
			view->value = row->step > 0 ? row->max_value : row->min_value;
		view->called = true;
		return;
	}
	view->value = next;
	view->called = false;
}
