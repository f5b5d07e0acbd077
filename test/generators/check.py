"""The checks of test/generators.sh: the example generators of examples/
(Node.js and Python) against a preloaded server, each generator a
process driven through node/driver.js or python/driver.py.

Reaches the server as its superuser through PGHOST, PGPORT, PGUSER and
PGDATABASE, and runs the generators as APP_URL's role.  Prints "ok: ..."
or "not ok: ..." for each check."""
import atexit
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.environ["GENERATORS_WORK"]
TTL = 3                      # seconds: renewed every second
N = 50_000                   # IDs per instance
failures = 0


def ok(cond, what):
    global failures
    print(("ok: " if cond else "not ok: ") + what, flush=True)
    failures += not cond
    return cond


db = psycopg2.connect("")
db.autocommit = True


def sql(query, args=()):
    with db.cursor() as cur:
        cur.execute(query, args)
        return cur.fetchall() if cur.description else None


children = []


@atexit.register
def stop_children():
    """Whatever happens, no generator outlives the checks."""
    for p in children:
        if p.poll() is None:
            p.kill()


class Generator:
    """One generator process and its lease, as it reported it."""

    def __init__(self, lang, name, **settings):
        self.lang, self.name = lang, name
        cmd = (["node", os.path.join(HERE, "node", "driver.js")] if lang == "node"
               else [sys.executable, os.path.join(HERE, "python", "driver.py")])
        env = dict(os.environ, GEN_NAME=name, GEN_TTL=str(TTL))
        env.update(settings)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1, env=env)
        children.append(self.proc)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.first = self.reply(30)
        self.started = self.first.startswith("lease ")
        if self.started:
            dc, w, token, self.holder = self.first.split()[1:]
            self.datacenter_id, self.worker_id, self.token = int(dc), int(w), int(token)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("eof")

    def reply(self, timeout=10):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return "timeout"

    def send(self, line, timeout=10):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.reply(timeout)

    def lease(self):
        """Its row of idgen_worker_leases, read by the administrator."""
        rows = sql("SELECT holder, state, released_at IS NOT NULL, renewed_at > acquired_at"
                   " FROM idgen_worker_leases WHERE token = %s", (self.token,))
        return rows[0] if rows else None

    def exited(self, timeout=10):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


def wait_error(gen, timeout, start=None):
    """Try an ID every 50 ms until one fails: (seconds since start, message)."""
    start = start or time.monotonic()
    while time.monotonic() - start < timeout:
        r = gen.send("try 0")
        if not r.startswith("ok "):
            return time.monotonic() - start, r
        time.sleep(0.05)
    return None, "no error"


# --- Four generators at once, with the server generating too --------------
server_dc, server_w = sql("SELECT datacenter_id, worker_id FROM idgen_info()")[0]
gens = [Generator(lang, f"{lang}{i}") for lang in ("node", "python") for i in (1, 2)]
if not all(ok(g.started, f"{g.name} starts and leases a worker id ({g.first})") for g in gens):
    sys.exit(1)
for g in gens:
    holder = f"{g.name}@{socket.gethostname()}:{g.proc.pid}"
    row = g.lease()
    ok(row is not None and row[0] == holder == g.holder and row[1] == "held",
       f"{g.name}: its lease is held with the holder {holder} (the view says {row})")
pairs = {(g.datacenter_id, g.worker_id) for g in gens}
ok(len(pairs) == 4, f"the four instances got different worker ids: {sorted(pairs)}")
ok((server_dc, server_w) not in pairs,
   f"none is the server's own identity ({server_dc}, {server_w})")
for g in gens:
    r = g.send("try 1")
    ok(r.startswith("error ") and "gene 1 is out of range" in r,
       f"{g.name}: gene 1 is refused with gene_bits 0 ({r})")

# --- What a generator refuses to start with: no lease is taken -----------
bad_layout = psycopg2.connect(os.environ["BAD_LAYOUT_URL"], user="postgres")
bad_layout.autocommit = True
for lang in ("node", "python"):
    g = Generator(lang, f"{lang}-bound", GEN_MAX_BACKWARD="10")
    status = g.exited()
    leases = sql("SELECT count(*) FROM idgen_worker_lease WHERE holder LIKE %s", (g.name + "@%",))
    ok(not g.started and "below idgen.worker_quarantine" in g.first and status == 1
       and leases == [(0,)],
       f"{g.name}: a clock-back bound of 10 s (the quarantine is 10 s) is refused"
       f" (status {status}, {leases[0][0]} leases): {g.first}")
    g = Generator(lang, f"{lang}-bad-layout", APP_URL=os.environ["BAD_LAYOUT_URL"])
    status = g.exited()
    with bad_layout.cursor() as cur:
        cur.execute("SELECT count(*) FROM idgen_worker_lease")
        leases = cur.fetchone()[0]
    ok(not g.started and "layout is not valid" in g.first and status == 1 and leases == 0,
       f"{g.name}: a server whose layout is not valid is refused"
       f" (status {status}, {leases} leases): {g.first}")
bad_layout.close()

t0 = sql("SELECT clock_timestamp()")[0][0]
done = threading.Event()
server_ids = []


def server_generates():
    conn = psycopg2.connect("")
    with conn.cursor() as cur:
        while not server_ids or not done.is_set():
            cur.execute("SELECT idgen_snowflake() FROM generate_series(1, 10000)")
            server_ids.extend(r[0] for r in cur.fetchall())
            conn.commit()
    conn.close()


server = threading.Thread(target=server_generates)
server.start()
for g in gens:
    g.proc.stdin.write(f"gen {N} {WORK}/{g.name}.ids\n")
    g.proc.stdin.flush()
replies = {g.name: g.reply(120) for g in gens}
done.set()
server.join()
t1 = sql("SELECT clock_timestamp()")[0][0]
ok(all(r == "done" for r in replies.values()), f"each instance generated {N} IDs: {replies}")

ids = {}
for g in gens:
    with open(f"{WORK}/{g.name}.ids") as f:
        ids[g.name] = [int(line) for line in f]
    seq = ids[g.name]
    ok(len(seq) == N and all(a < b for a, b in zip(seq, seq[1:])),
       f"{g.name}: {len(seq)} IDs, strictly increasing")
everything = [i for seq in ids.values() for i in seq] + server_ids
ok(len(set(everything)) == len(everything),
   f"all {len(everything)} IDs are distinct ({len(server_ids)} from idgen_snowflake())")

sql("CREATE TEMP TABLE app_ids (name text, dc int, w int, id bigint)")
with db.cursor() as cur:
    for g in gens:
        with open(f"{WORK}/{g.name}.copy", "w") as f:
            f.writelines(f"{g.name}\t{g.datacenter_id}\t{g.worker_id}\t{i}\n" for i in ids[g.name])
        with open(f"{WORK}/{g.name}.copy") as f:
            cur.copy_from(f, "app_ids")
bad = sql("""
    SELECT name, count(*) FILTER (WHERE (d.datacenter_id, d.worker_id) <> (a.dc, a.w)),
           count(*) FILTER (WHERE d.ts NOT BETWEEN %s::timestamptz - interval '1 s'
                                               AND %s::timestamptz + interval '1 s'),
           count(*) FILTER (WHERE idgen_snowflake_compose(d.ts, d.datacenter_id, d.worker_id,
                                                          d.sequence, d.gene) <> a.id),
           count(*)
      FROM app_ids a, idgen_snowflake_decode(a.id) d GROUP BY name ORDER BY name""", (t0, t1))
for name, wrong_worker, wrong_time, wrong_compose, n in bad:
    ok(n == N and wrong_worker == 0,
       f"{name}: every ID decodes to its lease's datacenter and worker ({wrong_worker} do not)")
    ok(n == N and wrong_time == 0, f"{name}: every ID's time is within the run ({wrong_time} are not)")
    ok(n == N and wrong_compose == 0,
       f"{name}: idgen_snowflake_compose(idgen_snowflake_decode(id)) = id ({wrong_compose} differ)")
ok(len(bad) == 4, f"the IDs of the four instances were decoded ({len(bad)})")

time.sleep(TTL / 3 + 0.5)
for g in gens:
    row = g.lease()
    ok(row is not None and row[1] == "held" and row[3], f"{g.name}: its lease was renewed ({row})")

# --- The clock stepped back: wait a bounded time, then refuse ------------
for g in (gens[1], gens[3]):
    a = int(g.send("try 0").split()[1])
    g.send("clock 200")
    start = time.monotonic()
    r = g.send("try 0")
    waited = time.monotonic() - start
    b = int(r.split()[1]) if r.startswith("ok ") else None
    ok(b is not None and b > a and waited >= 0.1,
       f"{g.name}: a clock 200 ms back: it waits ({waited:.2f} s) and the next ID is greater ({r})")
    g.send("clock 5000")
    r = g.send("try 0")
    ok(r.startswith("error ") and "behind the last ID" in r,
       f"{g.name}: a clock 5 s back: it refuses after its bound ({r})")
    g.send("clock 0")
    r = g.send("try 0")
    ok(r.startswith("ok ") and int(r.split()[1]) > b,
       f"{g.name}: the clock back on time: the next ID is greater ({r})")

# --- A lease lost: the renewal fails and the generator stops at once -----
for g in (gens[0], gens[2]):
    ok(g.send("try 0").startswith("ok "), f"{g.name}: generates before its lease is lost")
    # The administrator ends the lease with the real function and the token
    # from the lease table.
    released = sql("SELECT idgen_worker_release(worker_id, token) FROM idgen_worker_leases"
                   " WHERE holder = %s AND released_at IS NULL", (g.holder,))
    ok(released == [(True,)], f"{g.name}: the administrator released its lease ({released})")
    took, r = wait_error(g, 3 * TTL)
    ok(took is not None and took < TTL - 0.5 and "worker lease lost" in r,
       f"{g.name}: stops at the next renewal, {took and round(took, 2)} s later: {r}")
    r = g.send("try 0")
    ok(r.startswith("error ") and "stopped generating" in r, f"{g.name}: and stays stopped ({r})")
    r = g.send("close")
    ok(r == "closed false", f"{g.name}: close says the lease was released already ({r})")
    ok(g.exited() == 0, f"{g.name}: the process ends after close")

# --- A lease lost long before close(): its row purged ---------------------
# Once the purge has deleted an ended lease's row (its quarantine passed),
# idgen_worker_release() cannot tell its token from a wrong one (55000):
# close() says false all the same, the lease had ended.
late = [Generator(lang, f"{lang}3") for lang in ("node", "python")]
late = [g for g in late if ok(g.started, f"{g.name} starts and leases a worker id ({g.first})")]
for g in late:
    sql("SELECT idgen_worker_release(%s, %s)", (g.worker_id, g.token))
for g in late:
    took, r = wait_error(g, 3 * TTL)
    ok("worker lease lost" in r, f"{g.name}: stops at the next renewal after a release: {r}")
deadline = time.monotonic() + 60
while any(g.lease() is not None for g in late) and time.monotonic() < deadline:
    sql("SELECT idgen_worker_purge()")
    time.sleep(0.5)
for g in late:
    ok(g.lease() is None, f"{g.name}: its lease's row is purged once its quarantine passed")
    r = g.send("close")
    ok(r == "closed false", f"{g.name}: close says the lease had ended already ({r})")
    ok(g.exited() == 0, f"{g.name}: the process ends after close")

# --- The database stops answering: the local deadline stops it -----------
blocker = psycopg2.connect("")
blocked = [gens[1], gens[3]]
with blocker.cursor() as cur:
    # The administrator holds the two lease rows: their renewals wait.
    cur.execute("SELECT id FROM idgen_worker_lease WHERE token = ANY(%s) FOR UPDATE",
                ([g.token for g in blocked],))
    start = time.monotonic()
    ok(cur.rowcount == 2, f"the leases of {blocked[0].name} and {blocked[1].name} are locked")
    for g in blocked:
        ok(g.send("try 0").startswith("ok "), f"{g.name}: generates right after")
    for g in blocked:
        took, r = wait_error(g, 3 * TTL, start)
        # The deadline is the send time of the last renewal before the lock
        # plus the ttl: about 2/3 of the ttl to the ttl after the lock
        # (with room for a busy machine's timers).
        ok(took is not None and TTL / 2 <= took <= TTL + 1
           and "the lease deadline passed" in r,
           f"{g.name}: stops at its deadline, {took and round(took, 2)} s after the lock"
           f" (ttl {TTL} s, renewed every {TTL / 3:.0f} s): {r}")
blocker.rollback()
blocker.close()
for g in blocked:
    time.sleep(0.2)
    r = g.send("try 0")
    ok(r.startswith("error "), f"{g.name}: its late renewal does not restart it ({r})")
    r = g.send("close")
    row = g.lease()
    ok(r == "closed true" and row is not None and row[2] and row[1] == "quarantine",
       f"{g.name}: close releases its lease ({r}; the view says {row})")
    ok(g.exited() == 0, f"{g.name}: the process ends after close")

# --- SIGTERM and SIGINT release the lease ---------------------------------
for sig in (signal.SIGTERM, signal.SIGINT):
    for lang in ("node", "python"):
        g = Generator(lang, f"{lang}-{sig.name.lower()}")
        if not ok(g.started, f"{g.name} starts"):
            continue
        ok(g.send(f"gen 1000 {WORK}/{g.name}.ids") == "done", f"{g.name}: generates")
        g.proc.send_signal(sig)
        status = g.exited()
        row = g.lease()
        ok(status is not None and row is not None and row[2] and row[1] == "quarantine",
           f"{g.name}: {sig.name} ends it (status {status}) and releases its lease ({row})")
        if sig == signal.SIGTERM:
            ok(status == -signal.SIGTERM, f"{g.name}: it dies of SIGTERM, as if not caught")

# --- An ended lease's id rests until the lease's expiry plus the quarantine -
# The administrator releases the leases of two generators (with the tokens
# from the lease table) while they generate.  A holder learns of it only at
# its next renewal (every ttl/3), or, if the database is out of its reach,
# at its deadline (its last renewal plus the ttl): until then it generates,
# so the next holder of its id must not start before the lease's expiry
# plus the quarantine, however the lease ended (release, horizon reset,
# purge).  The generators lease among ids 0 and 1 only (max_workers 2), so
# the next ones can only take the old ones' ids.
QUARANTINE = 2
sql(f"ALTER SYSTEM SET idgen.worker_quarantine = '{QUARANTINE}s'")
sql("SELECT pg_reload_conf()")
while sql("SELECT current_setting('idgen.worker_quarantine')")[0][0] != f"{QUARANTINE}s":
    time.sleep(0.1)


def start_pair(name, ttl, timeout):
    """A Node.js and a Python generator leasing among ids 0 and 1, each
    started again every 0.5 s while both ids are taken, for up to timeout
    seconds (g.started is false for one that never started)."""
    pair = []
    give_up = time.monotonic() + timeout
    for lang in ("node", "python"):
        while True:
            g = Generator(lang, f"{lang}-{name}", GEN_TTL=str(ttl), GEN_MAX_WORKERS="2")
            if g.started or time.monotonic() > give_up:
                break
            g.exited()
            time.sleep(0.5)
        pair.append(g)
    return pair


class Producer:
    """Makes IDs with a generator, a batch of 1 000 every 20 ms or so, until
    it fails or stop() is called: the IDs, and the error that ended it."""

    def __init__(self, g):
        self.g, self.ids, self.error = g, [], None
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self):
        path = f"{WORK}/{self.g.name}.batch"
        while not self.halt.wait(0.02):          # a batch every 20 ms or so
            r = self.g.send(f"gen 1000 {path}", 60)
            with open(path) as f:
                self.ids.extend(int(line) for line in f)
            if r != "done":
                self.error = r
                return

    def stop(self):
        self.halt.set()
        self.thread.join()
        return self


def common(olds, news):
    old_ids = {i for p in olds for i in p.ids}
    return sum(i in old_ids for p in news for i in p.ids)


def handover(ttl, end_leases, wait):
    """Two generators with 'ttl' lose their leases through end_leases(olds)
    while they generate; two others try to start for up to 'wait' seconds.
    The old and the new holders' producers (the new ones stopped 2 s after
    they start), and the old leases' rows right after they ended."""
    olds = start_pair(f"old-{ttl}", ttl, 3 * TTL + QUARANTINE + 5)
    if not all(ok(g.started, f"ttl {ttl} s: {g.name} starts ({g.first})") for g in olds):
        return None
    old_producers = [Producer(g) for g in olds]
    time.sleep(0.5)
    end_leases(olds)
    ended = sql("SELECT id, expires_at FROM idgen_worker_lease WHERE token = ANY(%s)",
                ([g.token for g in olds],))
    # The next holders' own ttl is short: once closed, their ids rest only
    # briefly for the next case.
    news = start_pair(f"new-{ttl}", TTL, wait)
    new_producers = [Producer(g) for g in news if g.started]
    time.sleep(2)
    for p in old_producers + new_producers:
        p.stop()
    for g in olds + news:
        if g.started:
            g.send("close")
            g.exited()
    return old_producers, new_producers, news, ended


def admin_release(olds):
    released = sql("SELECT idgen_worker_release(worker_id, token) FROM idgen_worker_leases"
                   " WHERE token = ANY(%s)", ([g.token for g in olds],))
    ok(released == [(True,), (True,)], f"the administrator released both leases ({released})")


# ttl 60 s: renewed every 20 s; the administrator's release.
result = handover(60, admin_release, 60 + QUARANTINE + 20)
if result:
    olds, news, new_gens, ended = result
    n_common = common(olds, news)
    for p in olds:
        ok("worker lease lost" in (p.error or ""),
           f"ttl 60 s: {p.g.name} stops at its next renewal ({p.error})")
    ok(all(g.started for g in new_gens) and all(p.ids for p in olds + news) and n_common == 0,
       f"ttl 60 s, the administrator's release: the next holders made IDs"
       f" ({[len(p.ids) for p in news]}), none of them one of the old holders'"
       f" ({[len(p.ids) for p in olds]}): {n_common} in common")
    # The new leases took the old ones' rows (one row per id).
    late = sql("SELECT count(*) FROM idgen_worker_lease n, unnest(%s::int[], %s::timestamptz[])"
               " o(id, expires_at) WHERE n.id = o.id AND n.token = ANY(%s)"
               " AND n.acquired_at < o.expires_at + %s * interval '1 s'",
               ([i for i, _ in ended], [e for _, e in ended],
                [g.token for g in new_gens if g.started], QUARANTINE))
    ok(late == [(0,)], f"ttl 60 s: the next leases began after the old leases' expiry plus the"
       f" quarantine ({late[0][0]} before)")


# ttl 300 s: renewed every 100 s; the administrator's release, a reset of
# the ids' horizons and a purge once the quarantine has passed.
said = {}


def release_reset_purge(olds):
    admin_release(olds)
    try:
        said["reset"] = sql("SELECT idgen_worker_reset_horizon(datacenter_id, worker_id, NULL)"
                            " FROM idgen_worker_leases WHERE token = ANY(%s)",
                            ([g.token for g in olds],))
    except psycopg2.Error as e:
        said["reset"] = e.pgerror.strip()
    time.sleep(QUARANTINE + 0.5)
    sql("SELECT idgen_worker_purge()")
    said["kept"] = sql("SELECT count(*) FROM idgen_worker_lease WHERE token = ANY(%s)",
                       ([g.token for g in olds],))[0][0]


result = handover(300, release_reset_purge, 3 * QUARANTINE)
if result:
    olds, news, new_gens, ended = result
    n_common = common(olds, news)
    ok(all(p.ids for p in olds) and n_common == 0,
       f"ttl 300 s, the administrator's release, a horizon reset and a purge: the next holders made"
       f" {[len(p.ids) for p in news]} IDs, {n_common} of them also the old holders'")
    ok(said["kept"] == 2 and not any(g.started for g in new_gens)
       and all("all 2 worker ids are taken" in g.first for g in new_gens),
       f"ttl 300 s: the ids rest until the old leases' expiry (the purge left {said['kept']} of"
       f" their 2 rows; the next holders: {[g.first for g in new_gens]}; the reset:"
       f" {said['reset']})")
    ok(all(p.error is None for p in olds),
       f"ttl 300 s: the old holders generated until they were stopped, their next renewal 100 s"
       f" away ({[p.error for p in olds]})")
sql("ALTER SYSTEM RESET idgen.worker_quarantine")
sql("SELECT pg_reload_conf()")

sys.exit(1 if failures else 0)
