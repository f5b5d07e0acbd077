"""snowflake.py: a Snowflake generator for one application instance, with
its worker id leased from idgen. Needs psycopg2 only.

    from snowflake import Snowflake
    gen = Snowflake("postgresql://app@db/app")
    id = gen.next()         # an int; gen.next(gene) when gene_bits > 0
    gen.close()             # releases the lease (so do SIGTERM and SIGINT)

It reads the layout from idgen_info() once, acquires a lease (holder
"name@host:pid"), renews it every ttl/3 from a thread on its own
connection, and makes IDs locally. It stops for good, and next() raises,
as soon as a renewal fails or the deadline (send time of the last
successful acquire or renew, plus the ttl) passes: build a new generator
then. The rules are in docs/leases.md, "A generator of your own".
"""
import os
import signal
import socket
import threading
import time

import psycopg2


def wall_ms():
    return time.time_ns() // 1_000_000          # may step


def mono():
    return time.monotonic()                     # never steps


class SnowflakeStopped(Exception):
    """The generator stopped generating: its lease is lost or may be."""


class Snowflake:
    def __init__(self, dsn="", name="snowflake", ttl=30.0, max_backward=1.0,
                 handle_signals=True, max_workers=None):
        """dsn: a libpq connection string; ttl and max_backward (how long
        next() waits for a clock stepped back) in seconds; max_workers:
        lease among the first max_workers ids only (None: the whole space)."""
        self.ttl, self.max_backward, self.max_workers = ttl, max_backward, max_workers
        self.holder = f"{name}@{socket.gethostname()}:{os.getpid()}"
        self._lock = threading.Lock()      # next()'s state
        self._stopped = None               # why it stopped generating, once it has
        self._wake = threading.Event()     # set by close(): the renewal thread ends
        self._last_ms, self._seq = -1, 0   # the last ID's millisecond and sequence
        self._conn = psycopg2.connect(dsn)
        self._conn.autocommit = True
        try:
            self._start()
        except BaseException:
            self._conn.close()
            raise
        self._thread = threading.Thread(target=self._keep_alive, daemon=True)
        self._thread.start()
        self._previous = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._on_signal)

    def _start(self):
        with self._conn.cursor() as cur:
            cur.execute("""
                SELECT layout_valid, layout_error, timestamp_bits, datacenter_bits, worker_bits,
                       sequence_bits, gene_bits, (extract(epoch FROM epoch) * 1000)::bigint,
                       (extract(epoch FROM current_setting('idgen.worker_quarantine')::interval)
                        * 1000)::bigint
                  FROM idgen_info()""")
            valid, error, ts_bits, dc_bits, w_bits, seq_bits, gene_bits, epoch_ms, quarantine_ms = \
                cur.fetchone()
            if not valid:
                raise RuntimeError(f"snowflake: the server's layout is not valid: {error}")
            if dc_bits + w_bits == 0:
                raise RuntimeError("snowflake: the layout has no datacenter or worker bits to lease")
            # A clock found stepped back by d was d ahead when it made the
            # last IDs; the quarantine keeps the id's next holder above a
            # lead smaller than itself only, so only such steps are waited out.
            if self.max_backward * 1000 >= quarantine_ms:
                raise RuntimeError("snowflake: max_backward must be below idgen.worker_quarantine"
                                   f" ({quarantine_ms} ms)")
            self._epoch_ms, self._max_ms = epoch_ms, 1 << ts_bits
            self._seq_max, self._genes, self._gene_bits = (1 << seq_bits) - 1, 1 << gene_bits, gene_bits
            self._ts_shift = dc_bits + w_bits + seq_bits + gene_bits

            sent = mono()
            cur.execute("SELECT worker_id, datacenter_id, token"
                        "  FROM idgen_worker_acquire(%s, make_interval(secs => %s), %s)",
                        (self.holder, self.ttl, self.max_workers))
            self.worker_id, self.datacenter_id, self.token = cur.fetchone()
            self._deadline = sent + self.ttl
            # The datacenter and worker fields, shifted into place once.
            self._node = ((self.datacenter_id << w_bits) | self.worker_id) << (seq_bits + gene_bits)

    def _keep_alive(self):
        """Renew every ttl/3; stop generating at once when a renewal fails."""
        while not self._wake.wait(self.ttl / 3):
            sent = mono()
            try:
                with self._conn.cursor() as cur:
                    cur.execute("SELECT idgen_worker_renew(%s, %s, make_interval(secs => %s))",
                                (self.worker_id, self.token, self.ttl))
            except psycopg2.Error as e:
                # Lost (55000), or the database is unreachable: the lease
                # may be someone else's already.
                self._stop("the renewal of the lease failed: "
                           + (e.diag.message_primary or str(e).strip()))
                return
            if self._stopped is not None or self._expired():
                return
            self._deadline = sent + self.ttl

    def _expired(self):
        if mono() < self._deadline:
            return False
        self._stop("the lease deadline passed without a renewal")
        return True

    def _stop(self, why):
        if self._stopped is None:
            self._stopped = why
        self._wake.set()

    def next(self, gene=0):
        """The next ID; gene (0 by default) goes into the low bits."""
        with self._lock:
            if self._stopped is None:
                self._expired()
            if self._stopped is not None:
                raise SnowflakeStopped(f"snowflake: stopped generating: {self._stopped}")
            if not isinstance(gene, int) or not 0 <= gene < self._genes:
                raise ValueError(f"snowflake: gene {gene} is out of range 0 .. {self._genes - 1}")
            ms = wall_ms() - self._epoch_ms
            if ms < self._last_ms:
                # The clock was stepped back: wait for it to come back to the
                # last ID's millisecond, a bounded time, rather than reuse
                # (ms, sequence).
                give_up = mono() + self.max_backward
                while ms < self._last_ms:
                    if mono() > give_up:
                        raise RuntimeError(f"snowflake: the clock is {self._last_ms - ms} ms"
                                           " behind the last ID")
                    time.sleep(0.001)
                    ms = wall_ms() - self._epoch_ms
            if ms == self._last_ms:
                if self._seq == self._seq_max:
                    # The millisecond's sequence is used up: wait for the next.
                    while ms <= self._last_ms:
                        ms = wall_ms() - self._epoch_ms
                    self._seq = 0
                else:
                    self._seq += 1
            else:
                self._seq = 0
            if not 0 <= ms < self._max_ms:
                raise RuntimeError("snowflake: the clock is outside the layout's timestamp field")
            self._last_ms = ms
            return (ms << self._ts_shift) | self._node | (self._seq << self._gene_bits) | gene

    def close(self):
        """Stop generating and release the lease: True if this released it,
        False if it had ended already (released, or ended and its row
        purged once its quarantine passed). An application's lease reports
        no horizon (only a server's lease does): its IDs carry its clock's
        reading, never a millisecond ahead, and the id's next holder starts
        at least the quarantine after the lease's expiry (the release does
        not bring it forward), when this generator has stopped anyway."""
        self._stop("closed")
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}
        if self._conn.closed:
            return False
        self._thread.join()                # a renewal under way ends first
        try:
            with self._conn.cursor() as cur:
                cur.execute("SELECT idgen_worker_release(%s, %s)", (self.worker_id, self.token))
                return cur.fetchone()[0]
        except psycopg2.Error as e:
            # No lease has this token any more (55000): it ended, and the
            # purge deleted its row once its quarantine passed.
            if e.pgcode == "55000":
                return False
            raise
        finally:
            self._conn.close()

    def _on_signal(self, sig, frame):
        """SIGTERM or SIGINT: release, then act on the signal as before."""
        previous = self._previous.get(sig) or signal.SIG_DFL
        try:
            self.close()
        except psycopg2.Error as e:
            print(f"snowflake: releasing the lease failed: {e}", flush=True)
        if callable(previous):
            previous(sig, frame)
        else:
            signal.signal(sig, previous)
            os.kill(os.getpid(), sig)
