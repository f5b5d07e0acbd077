/*-------------------------------------------------------------------------
 *
 * horizon.c
 *	  The durable horizon: its file, its shared state, and where the
 *	  generators start from it.
 *
 * The horizon is an instant H such that no identifier whose millisecond
 * starts after H has ever been issued.  It lives in two places:
 *
 *	  $PGDATA/idgen.horizon   the durable copy, one line of text with a
 *	                          CRC-32C, replaced atomically (written to a
 *	                          temporary file, then durable_rename)
 *	  idgen_shared->horizon   the copy generators read; raised only after
 *	                          the same value is on disk
 *
 * so every identifier ever issued is at or below the horizon on disk.  The
 * "idgen keeper" process (keeper.c) renews it; on a primary it also writes
 * each new horizon into WAL, and waits for synchronous standbys, before
 * generators may use it (horizon_wal.c).  The file is written by the
 * keeper and, in recovery, by redo of those records (the startup process):
 * both through idgen_horizon_persist, under file_lock, which only ever
 * raises it.  After a restart or a crash, this area's shared-memory startup
 * reads the file and starts every generator word just above it
 * (idgen_start_tick, clock.c), so no identifier can repeat whatever the
 * clock says; a clock behind the horizon then makes generation wait or
 * fail with the clock-back error, as at run time.
 *
 * The file also records when it was written, by this server's clock.  At
 * start, a horizon ahead of the clock that has not gone back since is
 * taken over like a promoted standby's (clock.c): generators continue
 * above it at once and return to the clock at half speed.  A clock that
 * went back makes them wait for it, at most idgen.horizon_lead plus the
 * step, or fail with the clock-back error.
 *
 * A missing or corrupt file is not fatal: the server starts, logs a
 * WARNING that the durable horizon was lost, and generators start from the
 * wall clock.  A data directory that never had a horizon (its first start
 * with idgen) lost nothing: that is a LOG.  The two are told apart by
 * $PGDATA/idgen.horizon.seen, an empty file made durable before the first
 * horizon is written in a data directory and never removed: a missing
 * horizon file beside it was lost.
 *
 * Shared state and its protocol
 * -----------------------------
 * The area "idgen horizon" (IdgenHorizonShared, idgen_horizon.h), created
 * after the core segment, whose 'horizon', 'fenced' and generator words it
 * sets at every start:
 *
 * horizon (core): the durable horizon; written by the keeper, after the
 *	  same value is on disk and, after recovery, in WAL (a write barrier
 *	  orders them), and upwards.  Generators read it without a lock: a
 *	  stale value is smaller, so it can only make a generator wait, never
 *	  let it pass the durable value.  It is lowered in two places, under
 *	  file_lock: at the end of recovery (horizon_wal.c), before any
 *	  generator of this identity may run, and when the keeper stops
 *	  generation (idgen_horizon_fence), where generators check it again
 *	  after their compare-and-swap (clock.c).
 *
 * file_horizon, recovery_ended, fenced (core): read and written only under
 *	  file_lock, by whoever writes the file (the keeper, redo) and the end
 *	  of recovery; clock.c reads 'fenced' without it, for its message only.
 *
 * restored: written once, at start, before any other process runs.
 *
 * keeper: the keeper's pid and counters, under keeper.mutex (keeper.c).
 *	  Its latch is in the core segment (keeper_latch), where generators
 *	  find it (clock.c).
 *
 * replay: what redo learnt from WAL, under replay.mutex (horizon_wal.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "idgen.h"
#include "idgen_clock.h"
#include "idgen_layout.h"
#include "idgen_shmem.h"
#include "idgen_horizon.h"

#define HORIZON_FILE		"idgen.horizon"
#define HORIZON_TMP_FILE	"idgen.horizon.tmp"
#define HORIZON_SEEN_FILE	"idgen.horizon.seen"
#define HORIZON_MAGIC_1		"idgen horizon 1"
#define HORIZON_MAGIC		"idgen horizon 2"

/* Settings */
int			idgen_horizon_lead_ms = 1000;
int			idgen_horizon_interval_ms = 100;

IdgenHorizonShared *idgen_horizon_shared = NULL;

/* ----------
 * The file: "idgen horizon 2 <horizon> <written at> <crc>\n", both times in
 * microseconds since 2000 ('written at' by this server's clock), the
 * CRC-32C taken over everything before the last space.  Version 1, without
 * 'written at', is still read.
 * ----------
 */
static pg_crc32c
horizon_crc(const char *text, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, text, len);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Read the durable horizon, and the time it was written (0 if the file
 * does not say).  Returns false, with the reason in 'why', if the file is
 * missing or not exactly what horizon_write writes.  Never throws: it runs
 * in the postmaster.
 */
static bool
horizon_read(TimestampTz *horizon, TimestampTz *written_at, char *why, size_t whylen)
{
	char		buf[128];
	char		body[96];
	int			fd;
	ssize_t		n;
	long long	value;
	long long	written = 0;
	unsigned int crc;
	int			bodylen;
	char		tail;

	fd = OpenTransientFile(HORIZON_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		snprintf(why, whylen, "The file \"%s\" could not be opened: %s.",
				 HORIZON_FILE, strerror(errno));
		return false;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	CloseTransientFile(fd);
	if (n <= 0)
	{
		snprintf(why, whylen, "The file \"%s\" is empty or unreadable.", HORIZON_FILE);
		return false;
	}
	buf[n] = '\0';

	if (sscanf(buf, HORIZON_MAGIC " %lld %lld %8x%c", &value, &written, &crc, &tail) == 4 &&
		tail == '\n')
		bodylen = snprintf(body, sizeof(body), HORIZON_MAGIC " %lld %lld", value, written);
	else if (sscanf(buf, HORIZON_MAGIC_1 " %lld %8x%c", &value, &crc, &tail) == 3 &&
			 tail == '\n')
		bodylen = snprintf(body, sizeof(body), HORIZON_MAGIC_1 " %lld", value);
	else
		bodylen = -1;
	if (bodylen < 0 || (size_t) n != strlen(buf) || buf[n - 1] != '\n')
	{
		snprintf(why, whylen, "The file \"%s\" is corrupt (not in the expected format).",
				 HORIZON_FILE);
		return false;
	}
	if (bodylen >= (int) sizeof(body) || strncmp(buf, body, bodylen) != 0 ||
		horizon_crc(body, bodylen) != (pg_crc32c) crc)
	{
		snprintf(why, whylen, "The file \"%s\" is corrupt (checksum mismatch).", HORIZON_FILE);
		return false;
	}
	if (value <= 0 || !IS_VALID_TIMESTAMP((TimestampTz) value) ||
		written < 0 || !IS_VALID_TIMESTAMP((TimestampTz) written))
	{
		snprintf(why, whylen, "The file \"%s\" holds an impossible horizon.", HORIZON_FILE);
		return false;
	}
	*horizon = (TimestampTz) value;
	*written_at = (TimestampTz) written;
	return true;
}

/*
 * Whether this data directory ever had a horizon: its file, or the mark
 * made before the first one was written.  Never throws (the postmaster).
 */
static bool
horizon_ever_made(void)
{
	struct stat st;

	return stat(HORIZON_FILE, &st) == 0 || stat(HORIZON_SEEN_FILE, &st) == 0;
}

/*
 * Make the mark that this data directory has had a horizon durable, once
 * per process, before a horizon is written: a horizon file that goes
 * missing afterwards was lost, not never made.  False (after logging at
 * 'elevel') if it could not be made; then no horizon is written either.
 */
static bool
mark_horizon_seen(int elevel)
{
	static bool marked = false;
	struct stat st;
	int			fd;

	if (marked)
		return true;
	if (stat(HORIZON_SEEN_FILE, &st) != 0)
	{
		fd = OpenTransientFile(HORIZON_SEEN_FILE, O_WRONLY | O_CREAT | PG_BINARY);
		if (fd < 0)
		{
			ereport(elevel,
					(errcode_for_file_access(),
					 errmsg("could not create file \"%s\": %m", HORIZON_SEEN_FILE)));
			return false;
		}
		if (CloseTransientFile(fd) != 0)
		{
			ereport(elevel,
					(errcode_for_file_access(),
					 errmsg("could not close file \"%s\": %m", HORIZON_SEEN_FILE)));
			return false;
		}
		if (fsync_fname_ext(HORIZON_SEEN_FILE, false, false, elevel) != 0 ||
			fsync_fname_ext(".", true, false, elevel) != 0)
			return false;
	}
	marked = true;
	return true;
}

/*
 * Make 'horizon' durable: write it to a temporary file and rename it over
 * the old file with durable_rename, which fsyncs the temporary file before
 * the rename and the file and its directory after it.  Returns false after
 * logging at 'elevel' if anything fails; the old file is then still in
 * place.
 */
static bool
horizon_write(TimestampTz horizon, int elevel)
{
	char		body[96];
	char		line[128];
	int			bodylen;
	int			len;
	int			fd;

	if (!mark_horizon_seen(elevel))
		return false;
	bodylen = snprintf(body, sizeof(body), HORIZON_MAGIC " %lld %lld",
					   (long long) horizon, (long long) GetCurrentTimestamp());
	len = snprintf(line, sizeof(line), "%s %08x\n", body,
				   (unsigned int) horizon_crc(body, bodylen));

	fd = OpenTransientFile(HORIZON_TMP_FILE, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", HORIZON_TMP_FILE)));
		return false;
	}
	errno = 0;
	if (write(fd, line, len) != len)
	{
		if (errno == 0)
			errno = ENOSPC;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", HORIZON_TMP_FILE)));
		CloseTransientFile(fd);
		return false;
	}
	if (CloseTransientFile(fd) != 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", HORIZON_TMP_FILE)));
		return false;
	}
	return durable_rename(HORIZON_TMP_FILE, HORIZON_FILE, elevel) == 0;
}

/*
 * Make the file hold at least 'horizon': write it unless the file already
 * has as much.  Keeper and redo may both call it; false (after logging at
 * 'elevel') if the write failed.
 */
bool
idgen_horizon_persist(TimestampTz horizon, int elevel)
{
	bool		ok = true;
	IdgenHorizonShared *h = idgen_horizon_shared;

	LWLockAcquire(h->file_lock, LW_EXCLUSIVE);
	if (horizon > h->file_horizon)
	{
		ok = horizon_write(horizon, elevel);
		if (ok)
			h->file_horizon = horizon;
	}
	LWLockRelease(h->file_lock);
	return ok;
}

/*
 * The keeper, at a request to stop: stop generation at what has been issued,
 * and make that the horizon in the file; returns it, for the keeper to
 * write into WAL (keeper.c).
 *
 * The keeper lowers the published horizon to the bound of the IDs issued,
 * then reads the generator words again.  A generator reads the horizon
 * again after its compare-and-swap (clock.c).  Both sides have a full
 * barrier between their write and their read, so for any tick either the
 * keeper's second reading counts it or the generator sees the lowered
 * horizon and gives the tick to nobody: no ID returned is later than the
 * bound.  Until the keeper publishes again (it is started again unless the
 * server is shutting down), generators wait and fail with a message that
 * says why.  Not in recovery (the keeper does not call it there): nothing
 * could be written into WAL.
 */
TimestampTz
idgen_horizon_fence(void)
{
	IdgenHorizonShared *h = idgen_horizon_shared;
	TimestampTz bound = idgen_issued_bound(true);

	LWLockAcquire(h->file_lock, LW_EXCLUSIVE);
	idgen_shared->fenced = true;
	pg_atomic_write_u64(&idgen_shared->horizon.value, (uint64) bound);
	pg_memory_barrier();
	bound = Max(bound, idgen_issued_bound(true));
	Assert(bound >= (TimestampTz) pg_atomic_read_u64(&idgen_shared->horizon.value));

	/* The file may go down to it: nothing above it can be issued now. */
	if (bound < h->file_horizon && horizon_write(bound, LOG))
		h->file_horizon = bound;
	LWLockRelease(h->file_lock);
	return bound;
}

/*
 * Start every generator word just above the durable horizon, so that after
 * a restart or a crash nothing issued before can be issued again (see the
 * file header).  Without a readable horizon, start from the wall clock and
 * say so.  Runs in the postmaster, at start and after every crash, once the
 * core segment exists.
 */
static void
start_generators(IdgenHorizonShared *h)
{
	IdgenShared *s = idgen_shared;
	TimestampTz horizon = 0;
	TimestampTz written_at = 0;
	char		why[256];

	h->restored = horizon_read(&horizon, &written_at, why, sizeof(why));
	if (!h->restored)
	{
		horizon = 0;
		/* A first start lost nothing; a horizon that existed and is gone did. */
		if (horizon_ever_made())
			ereport(WARNING,
					(errmsg("the idgen durable horizon was lost; generators start from the wall clock"),
					 errdetail_internal("%s", why),
					 errhint("Identifiers issued before this start may be issued again if the clock is behind them. Find out what removed or damaged the file.")));
		else
			ereport(LOG,
					(errmsg("no idgen durable horizon yet in this data directory; generators start from the wall clock"),
					 errdetail("No horizon was ever written in this data directory: this is its first start with idgen preloaded.")));
	}

	h->file_horizon = horizon;
	h->recovery_ended = false;
	s->fenced = false;
	pg_atomic_write_u64(&s->horizon.value, (uint64) horizon);
	pg_atomic_write_u64(&s->takeover.value, 0);
	s->takeover_cause = (int) IDGEN_TAKEOVER_NONE;
	for (int g = 0; g < s->ngenes; g++)
		pg_atomic_write_u64(&s->genes[g],
							idgen_layout.valid ?
							idgen_start_tick(horizon, idgen_layout.epoch,
											 idgen_layout.sequence_bits) : 0);
	pg_atomic_write_u64(&s->uuid7_tick.value,
						idgen_start_tick(horizon, IDGEN_UNIX_EPOCH, IDGEN_UUID7_TICK_BITS));

	/*
	 * A horizon ahead of the clock that has not gone back since the file was
	 * written (the IDs before ran ahead of the clock, after a takeover or by
	 * borrowing): continue from it as after a takeover, rather than wait for
	 * the clock to reach it.  A clock that went back waits or fails as the
	 * clock policy says.
	 */
	if (written_at != 0 && horizon > GetCurrentTimestamp() && GetCurrentTimestamp() >= written_at)
		(void) idgen_take_over(horizon, true, IDGEN_TAKEOVER_RESTART);
}

static Size
horizon_shmem_size(void)
{
	return sizeof(IdgenHorizonShared);
}

static int
horizon_shmem_nlocks(void)
{
	return 1;					/* file_lock */
}

/* The area's startup: after the core segment, at start and after a crash. */
static void
horizon_shmem_startup(void *ptr, bool found, LWLockPadded *locks)
{
	IdgenHorizonShared *h = (IdgenHorizonShared *) ptr;

	idgen_horizon_shared = h;
	if (found)
		return;
	Assert(idgen_shared != NULL);
	h->file_lock = &locks[0].lock;

	SpinLockInit(&h->keeper.mutex);
	h->keeper.pid = 0;
	h->keeper.persists = h->keeper.failures = 0;
	h->keeper.last_persist = h->keeper.last_failure = 0;
	pg_atomic_write_u64(&idgen_shared->keeper_latch, 0);

	SpinLockInit(&h->replay.mutex);
	h->replay.known = false;
	h->replay.horizon = h->replay.written_at = h->replay.replayed_at = 0;
	h->replay.datacenter_id = h->replay.worker_id = -1;
	h->replay.records = 0;
	h->replay.lifted_at = h->replay.lifted_to = 0;
	h->replay.lift_lead_ms = 0;

	start_generators(h);
}

static const IdgenShmemArea horizon_area = {
	.name = "idgen horizon",
	.size = horizon_shmem_size,
	.nlocks = horizon_shmem_nlocks,
	.startup = horizon_shmem_startup,
};

/*
 * Define the horizon's settings; when preloading, register its shared
 * state.
 */
void
idgen_horizon_init(void)
{
	DefineCustomIntVariable("idgen.horizon_lead",
							"Sets how far beyond what generators may issue the keeper makes the durable horizon.",
							"Generators may issue up to \"idgen.max_drift\" ahead of the clock; the keeper "
							"renews the horizon when less than half of this lead is left beyond that. "
							"A restart whose clock went back waits for it up to this much plus the step.",
							&idgen_horizon_lead_ms, 1000, 100, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("idgen.horizon_interval",
							"Sets how often the keeper checks the durable horizon.",
							NULL,
							&idgen_horizon_interval_ms, 100, 10, 10 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress)
		idgen_shmem_register(&horizon_area);
}
